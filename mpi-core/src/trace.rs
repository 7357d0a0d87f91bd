//! Event traces (`MADMPI_TRACE=dir`): one file per rank, `<dir>/madmpi-trace-rank<N>.json`, in
//! the Chrome trace-event JSON format (Perfetto, `chrome://tracing`).
//!
//! What is recorded, one track (`tid`) per kind, with `pid` = world rank:
//! - **MPI calls** (`tid` 1, then 10, 11, … for the calls of other threads): every call of the
//!   C interface, with its duration (recorded by the wrappers that `mpi-capi/build.rs`
//!   generates, through [`call`] and its variants);
//! - **scheduler** (`tid` 2): chunks queued on a gate (collect) and the packets the strategy (or
//!   the eager fast path) built from them, chunk by chunk;
//! - **transport** (`tid` 3): each packet offered to a driver (`try_send`: duration and outcome;
//!   a run of "would block" answers to one peer is recorded once, and counted in the next
//!   accepted packet), each packet received by a poll, peers lost;
//! - **rendezvous** (`tid` 4): RTS, CTS and FIN sent and received, and each `get` (the receiver
//!   pulling the data), from start to finish.
//!
//! Cost: when tracing is off, each hook is one relaxed load of an `AtomicBool` and a branch;
//! arguments are only looked at, and events only built, when it is on. Events are kept in memory
//! in a compact form and formatted when the file is written, at `MPI_Finalize` (or `MPI_Abort`,
//! or a fatal error). At most `MADMPI_TRACE_MAX_EVENTS` (default 1 000 000) events are kept per
//! rank: then recording stops, and the file says so (an instant event and `otherData`).
//!
//! Clock: timestamps are taken with `CLOCK_MONOTONIC`, which every process of a host shares, so
//! the files of one host line up exactly. A job spanning several hosts writes `CLOCK_REALTIME`
//! instead (the monotonic reading plus the realtime offset measured at `MPI_Init`), counted from
//! 2024-01-01 UTC: the files line up as well as the hosts' clocks agree (NTP: typically tens of
//! µs to a millisecond; PTP: about a µs). `MADMPI_TRACE_CLOCK=monotonic|realtime` chooses.
//!
//! This module never calls into the engine and never blocks on it: hooks run with the engine
//! lock held, and only take the trace buffer's own lock.

use std::cell::Cell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use madmpi_transports::SendOutcome;

use crate::wire::{self, Header, Kind};

/// Recording: hooks build events.
static ON: AtomicBool = AtomicBool::new(false);
/// A trace file is open and will be written at the end (recording may have stopped).
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// The C wrapper of `MPI_Finalize` writes the file itself, after recording the call.
static DEFER: AtomicBool = AtomicBool::new(false);
/// Threads that made MPI calls so far (their tracks).
static THREADS: AtomicU32 = AtomicU32::new(0);

static BUF: Mutex<Option<Buf>> = Mutex::new(None);

const TID_MPI: u32 = 1;
const TID_SCHED: u32 = 2;
const TID_TRANSPORT: u32 = 3;
const TID_RDV: u32 = 4;
/// MPI calls of the second, third, … thread: `TID_THREADS + 1`, …
const TID_THREADS: u32 = 9;

/// Duration of an instant event.
const INSTANT: u64 = u64::MAX;
/// 2024-01-01T00:00:00Z, the origin of realtime timestamps (keeps them precise as doubles).
const REALTIME_BASE_NS: i64 = 1_704_067_200 * 1_000_000_000;
const DEFAULT_MAX_EVENTS: usize = 1_000_000;

/// Whether events are being recorded.
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// `CLOCK_MONOTONIC` in nanoseconds.
fn clock(id: libc::clockid_t) -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(id, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

fn mono() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// The monotonic clock in nanoseconds, whether recording or not (for the engine's own
/// measurements: rail bandwidth).
#[inline]
pub(crate) fn clock_ns() -> u64 {
    mono()
}

/// The time now when recording, else 0 (and no clock read).
#[inline]
pub(crate) fn now() -> u64 {
    if on() {
        mono()
    } else {
        0
    }
}

// ------------------------------------------------------------------------------------ events

/// A chunk header, as recorded.
#[derive(Clone, Copy)]
struct ChunkInfo {
    kind: u8,
    flags: u8,
    ctx: u32,
    src: i32,
    tag: i32,
    seq: u32,
    len: u32,
    msg_len: u64,
    sreq: u64,
}

impl From<&Header> for ChunkInfo {
    fn from(h: &Header) -> ChunkInfo {
        ChunkInfo {
            kind: h.kind,
            flags: h.flags,
            ctx: h.ctx,
            src: h.src,
            tag: h.tag,
            seq: h.seq,
            len: h.len,
            msg_len: h.msg_len,
            sreq: h.sreq,
        }
    }
}

/// Call argument absent.
const NONE: i32 = i32::MIN;

enum Args {
    None,
    Call {
        peer: i32,
        tag: i32,
    },
    Queued {
        peer: u32,
        chunk: ChunkInfo,
    },
    Packet {
        peer: u32,
        driver: &'static str,
        path: &'static str,
        bytes: u64,
        refused: u32,
        chunks: Box<[ChunkInfo]>,
    },
    Post {
        peer: u32,
        driver: &'static str,
        bytes: u64,
        outcome: &'static str,
        error: Option<String>,
    },
    Recv {
        peer: u32,
        bytes: u64,
        placed: bool,
        chunks: Box<[ChunkInfo]>,
    },
    Ctrl {
        peer: u32,
        chunk: ChunkInfo,
    },
    Get {
        peer: u32,
        sreq: u64,
        bytes: u64,
        blocks: usize,
        result: String,
    },
    Split {
        peer: u32,
        sreq: u64,
        bytes: u64,
        mine: u32,
        theirs: Option<u32>,
        result: String,
    },
    Peer {
        peer: u32,
    },
    Truncated {
        max: usize,
    },
    Aborted {
        why: &'static str,
    },
}

struct Ev {
    ts: u64,
    dur: u64,
    tid: u32,
    name: &'static str,
    args: Args,
}

struct Buf {
    rank: u32,
    size: usize,
    host: String,
    path: PathBuf,
    file: Option<File>,
    realtime: bool,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC at start, in ns.
    offset: i64,
    events: Vec<Ev>,
    max: usize,
    truncated: bool,
    /// Consecutive "would block" answers per peer since the last accepted packet.
    refused: Vec<u32>,
    /// The thread tracks: (tid, name).
    threads: Vec<(u32, String)>,
}

fn lock() -> MutexGuard<'static, Option<Buf>> {
    BUF.lock().unwrap_or_else(|e| e.into_inner())
}

#[cold]
#[inline(never)]
fn record(ev: Ev) {
    let mut g = lock();
    let Some(b) = g.as_mut() else { return };
    push(b, ev);
}

fn push(b: &mut Buf, ev: Ev) {
    if !ON.load(Ordering::Relaxed) {
        return;
    }
    if b.events.len() >= b.max {
        // Stop here: later hooks cost one load again, and the file tells where it stopped.
        ON.store(false, Ordering::Relaxed);
        b.truncated = true;
        let ts = ev.ts;
        b.events.push(Ev {
            ts,
            dur: INSTANT,
            tid: TID_MPI,
            name: "trace truncated: recording stopped",
            args: Args::Truncated { max: b.max },
        });
        return;
    }
    b.events.push(ev);
}

fn instant(ts: u64, tid: u32, name: &'static str, args: Args) -> Ev {
    Ev {
        ts,
        dur: INSTANT,
        tid,
        name,
        args,
    }
}

fn kind_of(k: u8) -> Option<Kind> {
    Header {
        kind: k,
        ..Default::default()
    }
    .kind()
}

fn kind_name(k: u8) -> &'static str {
    match kind_of(k) {
        Some(Kind::Eager) => "eager",
        Some(Kind::Rts) => "rts",
        Some(Kind::Cts) => "cts",
        Some(Kind::Data) => "data",
        Some(Kind::Fin) => "fin",
        Some(Kind::SyncAck) => "sync_ack",
        Some(Kind::CancelReq) => "cancel_req",
        Some(Kind::CancelAck) => "cancel_ack",
        Some(Kind::Help) => "help",
        None => "unknown",
    }
}

/// The rendezvous-track name of a control chunk sent or received, if it is one.
fn ctrl_name(kind: u8, sent: bool) -> Option<&'static str> {
    Some(match (kind, sent) {
        (k, true) if k == Kind::Rts as u8 => "RTS sent",
        (k, false) if k == Kind::Rts as u8 => "RTS received",
        (k, true) if k == Kind::Cts as u8 => "CTS sent",
        (k, false) if k == Kind::Cts as u8 => "CTS received",
        (k, true) if k == Kind::Fin as u8 => "FIN sent",
        (k, false) if k == Kind::Fin as u8 => "FIN received",
        (k, true) if k == Kind::Help as u8 => "HELP sent",
        (k, false) if k == Kind::Help as u8 => "HELP received",
        _ => return None,
    })
}

fn packet_bytes(chunks: &[ChunkInfo]) -> u64 {
    chunks
        .iter()
        .map(|c| wire::pad8(wire::header_len(c.kind) + c.len as usize) as u64)
        .sum()
}

// ------------------------------------------------------------------------------ MPI calls

/// An MPI call being traced: records the call, with its duration, when dropped. Made by the
/// generated C wrappers.
#[must_use]
pub struct Call {
    t0: u64,
    name: &'static str,
    peer: i32,
    tag: i32,
    finalize: bool,
}

impl Call {
    #[inline(always)]
    fn new(name: &'static str, t0: u64, peer: i32, tag: i32) -> Call {
        Call {
            t0,
            name,
            peer,
            tag,
            finalize: false,
        }
    }
}

/// Start tracing a call of MPI function `name`: `None` (one flag read, nothing built or
/// checked at the end) when not recording.
#[inline(always)]
pub fn call(name: &'static str) -> Option<Call> {
    on().then(|| Call::new(name, mono(), NONE, NONE))
}

/// Start tracing a point-to-point call of `name` with a peer (`dest` or `source`) and a tag;
/// `None` when not recording, as [`call`].
#[inline(always)]
pub fn call_p2p(name: &'static str, peer: i32, tag: i32) -> Option<Call> {
    on().then(|| Call::new(name, mono(), peer, tag))
}

/// Start tracing `MPI_Init` or `MPI_Init_thread`: tracing starts inside the call, so the start
/// time is always taken (once per process).
pub fn call_init(name: &'static str) -> Call {
    Call::new(name, mono(), NONE, NONE)
}

/// Start tracing `MPI_Finalize`: the trace is written when the call has been recorded, as it
/// returns.
pub fn call_finalize(name: &'static str) -> Call {
    let mut c = Call::new(name, now(), NONE, NONE);
    if ACTIVE.load(Ordering::Acquire) {
        DEFER.store(true, Ordering::Release);
        c.finalize = true;
        c.t0 = mono();
    }
    c
}

impl Drop for Call {
    /// Off: one comparison (`t0` is 0 when the call started with tracing off).
    #[inline(always)]
    fn drop(&mut self) {
        if self.t0 != 0 {
            self.end();
        }
    }
}

impl Call {
    #[cold]
    #[inline(never)]
    fn end(&self) {
        if on() {
            self.record();
        }
        if self.finalize {
            write_trace(None);
        }
    }

    fn record(&self) {
        thread_local! {
            static TID: Cell<u32> = const { Cell::new(0) };
        }
        let end = mono();
        let tid = TID.with(|t| {
            if t.get() == 0 {
                let n = THREADS.fetch_add(1, Ordering::Relaxed);
                let tid = if n == 0 { TID_MPI } else { TID_THREADS + n };
                t.set(tid);
                if n > 0 {
                    if let Some(b) = lock().as_mut() {
                        b.threads
                            .push((tid, format!("MPI calls (thread {})", n + 1)));
                    }
                }
            }
            t.get()
        });
        let args = if self.peer == NONE && self.tag == NONE {
            Args::None
        } else {
            Args::Call {
                peer: self.peer,
                tag: self.tag,
            }
        };
        record(Ev {
            ts: self.t0,
            dur: end.saturating_sub(self.t0),
            tid,
            name: self.name,
            args,
        });
    }
}

// ------------------------------------------------------------------------------ engine hooks

/// A chunk was queued on `peer`'s gate (collect).
#[inline(always)]
pub(crate) fn queued(peer: u32, h: &Header) {
    if on() {
        queued_slow(peer, h)
    }
}

#[cold]
#[inline(never)]
fn queued_slow(peer: u32, h: &Header) {
    record(instant(
        mono(),
        TID_SCHED,
        "chunk queued",
        Args::Queued {
            peer,
            chunk: h.into(),
        },
    ));
}

/// Result of a driver's `try_send`.
pub(crate) type SendResult = std::result::Result<SendOutcome, madmpi_transports::Error>;

/// The strategy offered a packet made of the chunks whose headers `hdrs` gives (called only
/// when tracing) to `peer`'s driver, starting at `t0` (from [`now`]).
#[inline(always)]
pub(crate) fn sent(
    peer: u32,
    driver: &'static str,
    hdrs: impl FnOnce() -> Vec<Header>,
    res: &SendResult,
    t0: u64,
) {
    if on() {
        let chunks: Box<[ChunkInfo]> = hdrs().iter().map(ChunkInfo::from).collect();
        sent_slow(peer, driver, "strategy", chunks, res, t0);
    }
}

/// The eager fast path offered a one-chunk packet with encoded header `hb` to `peer`'s driver.
#[inline(always)]
pub(crate) fn sent_now(
    peer: u32,
    driver: impl FnOnce() -> &'static str,
    hb: &[u8],
    res: &SendResult,
    t0: u64,
) {
    if on() {
        let driver = driver();
        let chunks: Box<[ChunkInfo]> = Header::decode(hb).iter().map(ChunkInfo::from).collect();
        sent_slow(peer, driver, "fast path", chunks, res, t0);
    }
}

#[cold]
#[inline(never)]
fn sent_slow(
    peer: u32,
    driver: &'static str,
    path: &'static str,
    chunks: Box<[ChunkInfo]>,
    res: &SendResult,
    t0: u64,
) {
    let end = mono();
    let t0 = if t0 == 0 { end } else { t0 };
    let bytes = packet_bytes(&chunks);
    let mut g = lock();
    let Some(b) = g.as_mut() else { return };
    if b.refused.len() <= peer as usize {
        b.refused.resize(peer as usize + 1, 0);
    }
    let (name, outcome, error) = match res {
        Ok(SendOutcome::Done) => ("try_send", "done", None),
        Ok(SendOutcome::WouldBlock) => {
            // Record the first refusal of a run only: a full ring refuses on every poll.
            b.refused[peer as usize] += 1;
            if b.refused[peer as usize] > 1 {
                return;
            }
            ("try_send", "would block", None)
        }
        Err(madmpi_transports::Error::PeerLost(_)) => ("try_send", "peer lost", None),
        Err(e) => ("try_send", "error", Some(e.to_string())),
    };
    let done = outcome == "done";
    push(
        b,
        Ev {
            ts: t0,
            dur: end - t0,
            tid: TID_TRANSPORT,
            name,
            args: Args::Post {
                peer,
                driver,
                bytes,
                outcome,
                error,
            },
        },
    );
    if !done {
        return;
    }
    let refused = std::mem::take(&mut b.refused[peer as usize]);
    push_handshakes(b, t0, peer, &chunks, true);
    push(
        b,
        instant(
            t0,
            TID_SCHED,
            "packet",
            Args::Packet {
                peer,
                driver,
                path,
                bytes,
                refused,
                chunks,
            },
        ),
    );
}

/// The rendezvous handshake chunks (RTS, CTS, FIN) among `chunks`, sent to or received from
/// `peer` at `ts`, as events of the rendezvous track.
fn push_handshakes(b: &mut Buf, ts: u64, peer: u32, chunks: &[ChunkInfo], sent: bool) {
    for c in chunks {
        if let Some(name) = ctrl_name(c.kind, sent) {
            push(
                b,
                instant(ts, TID_RDV, name, Args::Ctrl { peer, chunk: *c }),
            );
        }
    }
}

/// A packet from `peer` arrived (delivered whole by a driver's poll).
#[inline(always)]
pub(crate) fn received(peer: u32, pkt: &[u8]) {
    if on() {
        received_slow(peer, pkt, pkt.len(), false)
    }
}

/// A packet from `peer` of `total_len` bytes, whose head is `head`, has landed in place (split
/// receive straight into the user buffer).
#[inline(always)]
pub(crate) fn received_placed(peer: u32, head: &[u8], total_len: usize) {
    if on() {
        received_slow(peer, head, total_len, true)
    }
}

/// The engine took the head of a packet from `peer` whose rest it receives in place: the
/// handshake the head carries (an RTS with the start of its message) is recorded now, when the
/// engine answers it, not when the rest has landed.
#[inline(always)]
pub(crate) fn placing(peer: u32, head: &[u8]) {
    if on() {
        placing_slow(peer, head)
    }
}

#[cold]
#[inline(never)]
fn placing_slow(peer: u32, head: &[u8]) {
    let ts = mono();
    let chunks: Box<[ChunkInfo]> = Header::decode(head).iter().map(ChunkInfo::from).collect();
    let mut g = lock();
    let Some(b) = g.as_mut() else { return };
    push_handshakes(b, ts, peer, &chunks, false);
}

#[cold]
#[inline(never)]
fn received_slow(peer: u32, pkt: &[u8], total: usize, placed: bool) {
    let ts = mono();
    let chunks: Box<[ChunkInfo]> = if placed {
        Header::decode(pkt).iter().map(ChunkInfo::from).collect()
    } else {
        wire::Chunks::new(pkt)
            .map_while(|c| c.ok())
            .map(|(h, _)| ChunkInfo::from(&h))
            .collect()
    };
    let mut g = lock();
    let Some(b) = g.as_mut() else { return };
    if !placed {
        // (Those of a placed packet were recorded when its head was taken: `placing`.)
        push_handshakes(b, ts, peer, &chunks, false);
    }
    push(
        b,
        instant(
            ts,
            TID_TRANSPORT,
            "packet received",
            Args::Recv {
                peer,
                bytes: total as u64,
                placed,
                chunks,
            },
        ),
    );
}

/// The receiver pulled the blocks `ranges` (stream offset, address, length) of rendezvous
/// `sreq` from `peer`, from `t0` to now, with result `res`.
#[inline(always)]
pub(crate) fn get(
    peer: u32,
    sreq: u64,
    ranges: &[(u64, u64, u64)],
    res: &std::result::Result<(), madmpi_transports::Error>,
    t0: u64,
) {
    if on() {
        get_slow(peer, sreq, ranges, res, t0)
    }
}

#[cold]
#[inline(never)]
fn get_slow(
    peer: u32,
    sreq: u64,
    ranges: &[(u64, u64, u64)],
    res: &std::result::Result<(), madmpi_transports::Error>,
    t0: u64,
) {
    let end = mono();
    let t0 = if t0 == 0 { end } else { t0 };
    let result = match res {
        Ok(()) => "done".to_string(),
        Err(
            e @ (madmpi_transports::Error::PermissionDenied(_)
            | madmpi_transports::Error::Unsupported(_)),
        ) => format!("refused, falling back to CTS: {e}"),
        Err(e) => format!("error: {e}"),
    };
    record(Ev {
        ts: t0,
        dur: end - t0,
        tid: TID_RDV,
        name: "get",
        args: Args::Get {
            peer,
            sreq,
            bytes: ranges.iter().map(|r| r.2).sum(),
            blocks: ranges.len(),
            result,
        },
    });
}

/// The receiver copied the `bytes` of rendezvous `sreq` from `peer` with the sender's help
/// (a split copy), from `t0` to now; `res` says how the chunks were shared out.
#[inline(always)]
pub(crate) fn split_get(
    peer: u32,
    sreq: u64,
    bytes: usize,
    res: &std::result::Result<madmpi_transports::shm::SplitCopy, madmpi_transports::Error>,
    t0: u64,
) {
    if on() {
        let r = res.as_ref().map(|c| (c.mine, Some(c.theirs)));
        split_slow("split get", peer, sreq, bytes, r, t0)
    }
}

/// The sender helped `peer` copy the `bytes` of its rendezvous `sreq`, from `t0` to now; `res`
/// is the number of chunks it wrote.
#[inline(always)]
pub(crate) fn split_put(
    peer: u32,
    sreq: u64,
    bytes: usize,
    res: &std::result::Result<u32, madmpi_transports::Error>,
    t0: u64,
) {
    if on() {
        split_slow(
            "split put",
            peer,
            sreq,
            bytes,
            res.as_ref().map(|&n| (n, None)),
            t0,
        )
    }
}

#[cold]
#[inline(never)]
fn split_slow(
    name: &'static str,
    peer: u32,
    sreq: u64,
    bytes: usize,
    res: std::result::Result<(u32, Option<u32>), &madmpi_transports::Error>,
    t0: u64,
) {
    let end = mono();
    let t0 = if t0 == 0 { end } else { t0 };
    let ((mine, theirs), result) = match res {
        Ok(c) => (c, "done".to_string()),
        Err(e) => ((0, None), format!("error: {e}")),
    };
    record(Ev {
        ts: t0,
        dur: end - t0,
        tid: TID_RDV,
        name,
        args: Args::Split {
            peer,
            sreq,
            bytes: bytes as u64,
            mine,
            theirs,
            result,
        },
    });
}

/// `peer` was found dead (also logged).
pub(crate) fn peer_lost(peer: u32) {
    tracing::warn!(peer, "peer lost: failing every operation that involves it");
    if on() {
        record(instant(
            mono(),
            TID_TRANSPORT,
            "peer lost",
            Args::Peer { peer },
        ));
    }
}

// ------------------------------------------------------------------------------ lifetime

/// Start tracing if `MADMPI_TRACE` names a directory: called by `MPI_Init` once the world rank
/// and every rank's host are known. A directory or file that cannot be created is reported on
/// stderr, and the job runs untraced.
pub(crate) fn start(rank: u32, hosts: &[String]) {
    let Some(dir) = std::env::var_os("MADMPI_TRACE").filter(|d| !d.is_empty()) else {
        return;
    };
    let dir = PathBuf::from(dir);
    let path = dir.join(format!("madmpi-trace-rank{rank}.json"));
    let file = match std::fs::create_dir_all(&dir) {
        Err(e) => Err((&dir, e)),
        Ok(()) => File::create(&path).map_err(|e| (&path, e)),
    };
    let file = match file {
        Ok(f) => f,
        Err((what, e)) => {
            crate::trace::say_line(format!(
                "madmpi: rank {rank}: MADMPI_TRACE: cannot create {}: {e}; running without a trace",
                what.display()
            ));
            return;
        }
    };
    // Ranks on other hosts do not share this host's monotonic clock.
    let machine = |h: &str| h.split('#').next().unwrap_or_default().to_string();
    let multi_host = hosts
        .iter()
        .filter(|h| !h.is_empty())
        .any(|h| machine(h) != machine(&hosts[rank as usize]));
    let realtime = match std::env::var("MADMPI_TRACE_CLOCK")
        .as_deref()
        .map(str::trim)
    {
        Ok("realtime") => true,
        Ok("monotonic") => false,
        Ok(other) => {
            crate::trace::say_line(format!(
                "madmpi: rank {rank}: MADMPI_TRACE_CLOCK={other}: unknown clock \
                 (monotonic, realtime); using {}",
                if multi_host { "realtime" } else { "monotonic" }
            ));
            multi_host
        }
        Err(_) => multi_host,
    };
    let max = std::env::var("MADMPI_TRACE_MAX_EVENTS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_MAX_EVENTS);
    let m0 = mono();
    let real = clock(libc::CLOCK_REALTIME);
    let m1 = mono();
    let offset = real as i64 - ((m0 + m1) / 2) as i64;
    *lock() = Some(Buf {
        rank,
        size: hosts.len(),
        host: hosts.get(rank as usize).cloned().unwrap_or_default(),
        path,
        file: Some(file),
        realtime,
        offset,
        events: Vec::with_capacity(max.min(1 << 16)),
        max,
        truncated: false,
        refused: Vec::new(),
        threads: Vec::new(),
    });
    ACTIVE.store(true, Ordering::Release);
    ON.store(max > 0, Ordering::Release);
    tracing::debug!(rank, realtime, max, "tracing to {}", dir.display());
}

/// End of `MPI_Finalize`: write the trace, unless the C wrapper of `MPI_Finalize` will (after
/// recording the call itself).
pub(crate) fn finish() {
    if ACTIVE.load(Ordering::Acquire) && !DEFER.load(Ordering::Acquire) {
        write_trace(None);
    }
}

/// The process is about to exit on `MPI_Abort` or a fatal error: write what was recorded.
pub(crate) fn finish_abort() {
    if ACTIVE.load(Ordering::Acquire) {
        write_trace(Some("the process aborted (MPI_Abort or a fatal error)"));
    }
}

/// Write the file and stop tracing for good. Errors are reported on stderr.
fn write_trace(aborted: Option<&'static str>) {
    ON.store(false, Ordering::Release);
    if !ACTIVE.swap(false, Ordering::AcqRel) {
        return;
    }
    // An abort may come from a thread that holds the lock (a panic in a hook): do not wait.
    let mut g = if aborted.is_some() {
        let mut tries = 0;
        loop {
            match BUF.try_lock() {
                Ok(g) => break g,
                Err(std::sync::TryLockError::Poisoned(e)) => break e.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if tries < 200 => {
                    tries += 1;
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                Err(std::sync::TryLockError::WouldBlock) => return,
            }
        }
    } else {
        lock()
    };
    let Some(mut b) = g.take() else { return };
    drop(g);
    let Some(file) = b.file.take() else { return };
    if let Err(e) = write_json(&mut b, file, aborted) {
        crate::trace::say_line(format!(
            "madmpi: rank {}: MADMPI_TRACE: cannot write {}: {e}",
            b.rank,
            b.path.display()
        ));
    }
}

// ------------------------------------------------------------------------------ JSON output

fn json_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn chunk_json(out: &mut String, c: &ChunkInfo) {
    let _ = write!(out, "{{\"kind\":\"{}\"", kind_name(c.kind));
    match kind_of(c.kind) {
        Some(Kind::Eager | Kind::Rts) => {
            let _ = write!(
                out,
                ",\"ctx\":{},\"src\":{},\"tag\":{},\"seq\":{},\"len\":{},\"msg_len\":{},\"sreq\":{}",
                c.ctx, c.src, c.tag, c.seq, c.len, c.msg_len, c.sreq
            );
            if c.flags & wire::FLAG_SYNC != 0 {
                out.push_str(",\"sync\":true");
            }
            if c.flags & wire::FLAG_PIECES != 0 {
                out.push_str(",\"zero_copy_blocks\":true");
            }
        }
        Some(Kind::Data) => {
            let _ = write!(
                out,
                ",\"len\":{},\"offset\":{},\"sreq\":{}",
                c.len, c.msg_len, c.sreq
            );
        }
        _ => {
            let _ = write!(out, ",\"len\":{},\"sreq\":{}", c.len, c.sreq);
            if c.flags & wire::FLAG_CANCELLED != 0 {
                out.push_str(",\"cancelled\":true");
            }
        }
    }
    out.push('}');
}

fn chunks_json(out: &mut String, chunks: &[ChunkInfo]) {
    out.push('[');
    for (i, c) in chunks.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        chunk_json(out, c);
    }
    out.push(']');
}

fn args_json(out: &mut String, a: &Args) {
    match a {
        Args::None => return,
        Args::Call { peer, tag } => {
            out.push_str(",\"args\":{");
            let mut sep = "";
            if *peer != NONE {
                let _ = write!(out, "\"peer\":{peer}");
                sep = ",";
            }
            if *tag != NONE {
                let _ = write!(out, "{sep}\"tag\":{tag}");
            }
        }
        Args::Queued { peer, chunk } => {
            let _ = write!(out, ",\"args\":{{\"peer\":{peer},\"chunk\":");
            chunk_json(out, chunk);
        }
        Args::Packet {
            peer,
            driver,
            path,
            bytes,
            refused,
            chunks,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"driver\":\"{driver}\",\"built_by\":\"{path}\",\
                 \"bytes\":{bytes},\"refused_before\":{refused},\"nchunks\":{},\"chunks\":",
                chunks.len()
            );
            chunks_json(out, chunks);
        }
        Args::Post {
            peer,
            driver,
            bytes,
            outcome,
            error,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"driver\":\"{driver}\",\"bytes\":{bytes},\
                 \"outcome\":\"{outcome}\""
            );
            if let Some(e) = error {
                out.push_str(",\"error\":");
                json_str(out, e);
            }
        }
        Args::Recv {
            peer,
            bytes,
            placed,
            chunks,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"bytes\":{bytes},\"placed_in_user_buffer\":{placed},\
                 \"nchunks\":{},\"chunks\":",
                chunks.len()
            );
            chunks_json(out, chunks);
        }
        Args::Ctrl { peer, chunk } => {
            let _ = write!(out, ",\"args\":{{\"peer\":{peer},\"sreq\":{}", chunk.sreq);
            if chunk.kind == Kind::Rts as u8 {
                let _ = write!(
                    out,
                    ",\"msg_len\":{},\"ctx\":{},\"tag\":{}",
                    chunk.msg_len, chunk.ctx, chunk.tag
                );
            }
        }
        Args::Get {
            peer,
            sreq,
            bytes,
            blocks,
            result,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"sreq\":{sreq},\"bytes\":{bytes},\"blocks\":{blocks},\
                 \"result\":"
            );
            json_str(out, result);
        }
        Args::Split {
            peer,
            sreq,
            bytes,
            mine,
            theirs,
            result,
        } => {
            let _ = write!(
                out,
                ",\"args\":{{\"peer\":{peer},\"sreq\":{sreq},\"bytes\":{bytes},\"chunks_mine\":{mine}"
            );
            if let Some(t) = theirs {
                let _ = write!(out, ",\"chunks_theirs\":{t}");
            }
            out.push_str(",\"result\":");
            json_str(out, result);
        }
        Args::Peer { peer } => {
            let _ = write!(out, ",\"args\":{{\"peer\":{peer}");
        }
        Args::Aborted { why } => {
            out.push_str(",\"args\":{\"why\":");
            json_str(out, why);
        }
        Args::Truncated { max } => {
            let _ = write!(
                out,
                ",\"args\":{{\"max_events\":{max},\"why\":\"MADMPI_TRACE_MAX_EVENTS reached; \
                 later events were not recorded\""
            );
        }
    }
    out.push('}');
}

fn category(tid: u32) -> &'static str {
    match tid {
        TID_SCHED => "scheduler",
        TID_TRANSPORT => "transport",
        TID_RDV => "rendezvous",
        _ => "mpi",
    }
}

fn write_json(b: &mut Buf, file: File, aborted: Option<&'static str>) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(1 << 20, file);
    if let Some(why) = aborted {
        let ts = b.events.last().map_or(0, |e| e.ts).max(mono());
        b.events
            .push(instant(ts, TID_MPI, "aborted", Args::Aborted { why }));
    }
    // Chrome's format does not need sorted events, but per-track order makes the file easy to
    // read and check; longer slices first at equal times, so that parents precede children.
    b.events.sort_by_key(|e| {
        (
            e.ts,
            std::cmp::Reverse(if e.dur == INSTANT { 0 } else { e.dur }),
        )
    });
    let (realtime, offset) = (b.realtime, b.offset);
    let ts = |out: &mut String, ns: u64| {
        let t = if realtime {
            ns as i64 + offset - REALTIME_BASE_NS
        } else {
            ns as i64
        };
        let (sign, t) = if t < 0 { ("-", -t) } else { ("", t) };
        let _ = write!(out, "{sign}{}.{:03}", t / 1000, t % 1000);
    };
    let pid = b.rank;
    let mut out = String::with_capacity(1 << 16);
    out.push_str("{\"traceEvents\":[\n");
    let _ = write!(
        out,
        "{{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":\"rank {pid}\"}}}},\n\
         {{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{pid}}}}},\n\
         {{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":{pid},\"tid\":0,\"args\":{{\"labels\":"
    );
    json_str(&mut out, &b.host);
    out.push_str("}},\n");
    let mut tracks: Vec<(u32, String)> = vec![
        (TID_MPI, "MPI calls".into()),
        (TID_SCHED, "scheduler (strategy)".into()),
        (TID_TRANSPORT, "transport".into()),
        (TID_RDV, "rendezvous".into()),
    ];
    tracks.append(&mut b.threads);
    for (tid, name) in &tracks {
        let _ = write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":"
        );
        json_str(&mut out, name);
        let _ = writeln!(
            out,
            "}}}},\n{{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\
             \"args\":{{\"sort_index\":{tid}}}}},"
        );
    }
    w.write_all(out.as_bytes())?;
    let n = b.events.len();
    for (i, e) in b.events.iter().enumerate() {
        out.clear();
        out.push('{');
        out.push_str("\"name\":");
        json_str(&mut out, e.name);
        let _ = write!(out, ",\"cat\":\"{}\"", category(e.tid));
        if e.dur == INSTANT {
            out.push_str(",\"ph\":\"i\",\"s\":\"t\"");
        } else {
            out.push_str(",\"ph\":\"X\"");
        }
        let _ = write!(out, ",\"pid\":{pid},\"tid\":{},\"ts\":", e.tid);
        ts(&mut out, e.ts);
        if e.dur != INSTANT {
            let _ = write!(out, ",\"dur\":{}.{:03}", e.dur / 1000, e.dur % 1000);
        }
        args_json(&mut out, &e.args);
        out.push('}');
        if i + 1 < n {
            out.push(',');
        }
        out.push('\n');
        w.write_all(out.as_bytes())?;
    }
    out.clear();
    let _ = write!(
        out,
        "],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{{\"producer\":\"madmpi {}\",\"rank\":{pid},\
         \"size\":{},\"host\":",
        env!("CARGO_PKG_VERSION"),
        b.size
    );
    json_str(&mut out, &b.host);
    let _ = writeln!(
        out,
        ",\"clock\":\"{}\",\"realtime_minus_monotonic_ns\":{},\"events\":{n},\"max_events\":{},\
         \"truncated\":{},\"aborted\":{}}}}}",
        if realtime {
            "CLOCK_REALTIME, microseconds since 2024-01-01T00:00:00Z"
        } else {
            "CLOCK_MONOTONIC, microseconds"
        },
        offset,
        b.max,
        b.truncated,
        aborted.is_some()
    );
    w.write_all(out.as_bytes())?;
    w.flush()
}

/// Print one line on stderr with a single write, so that the lines of ranks sharing the
/// launcher's stderr never interleave mid-line.
pub(crate) fn say_line(msg: String) {
    use std::io::Write;
    let mut line = msg;
    line.push('\n');
    let _ = std::io::stderr().write_all(line.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        let mut out = String::new();
        json_str(&mut out, "a\"b\\c\nd\u{1}é");
        assert_eq!(out, r#""a\"b\\c\nd\u0001é""#);
    }

    fn buf(path: PathBuf, realtime: bool) -> Buf {
        Buf {
            rank: 3,
            size: 4,
            host: "h\"x".into(),
            path,
            file: None,
            realtime,
            offset: REALTIME_BASE_NS + 5_000,
            events: Vec::new(),
            max: 10,
            truncated: false,
            refused: Vec::new(),
            threads: vec![(TID_THREADS + 1, "MPI calls (thread 2)".into())],
        }
    }

    fn eager(tag: i32, len: u32) -> ChunkInfo {
        ChunkInfo::from(&Header {
            kind: Kind::Eager as u8,
            tag,
            len,
            msg_len: len as u64,
            ..Default::default()
        })
    }

    #[test]
    fn file_is_sorted_and_complete() {
        let dir = std::env::temp_dir().join(format!("madmpi-trace-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let mut b = buf(path.clone(), false);
        // Recorded out of order (a call is recorded when it ends).
        b.events.push(instant(
            2_500,
            TID_SCHED,
            "packet",
            Args::Packet {
                peer: 1,
                driver: "shm",
                path: "strategy",
                bytes: 128,
                refused: 2,
                chunks: vec![eager(7, 8), eager(8, 16)].into(),
            },
        ));
        b.events.push(Ev {
            ts: 1_000,
            dur: 3_000,
            tid: TID_MPI,
            name: "MPI_Send",
            args: Args::Call { peer: 1, tag: 7 },
        });
        write_json(&mut b, File::create(&path).unwrap(), Some("test")).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let send = text.find("\"MPI_Send\"").expect("call");
        let packet = text.find("\"packet\"").expect("packet");
        assert!(send < packet, "sorted by time:\n{text}");
        for needle in [
            "\"ts\":1.000,\"dur\":3.000,\"args\":{\"peer\":1,\"tag\":7}",
            "\"ts\":2.500",
            "\"nchunks\":2,\"chunks\":[{\"kind\":\"eager\",\"ctx\":0,\"src\":0,\"tag\":7,",
            "\"refused_before\":2",
            "\"name\":\"MPI calls (thread 2)\"",
            "\"labels\":\"h\\\"x\"",
            "\"name\":\"aborted\"",
            "\"aborted\":true",
            "\"pid\":3",
        ] {
            assert!(text.contains(needle), "{needle} missing:\n{text}");
        }
        assert!(text.trim_end().ends_with("}}"));
    }

    #[test]
    fn realtime_timestamps_count_from_2024() {
        let dir = std::env::temp_dir().join(format!("madmpi-trace-rt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("t.json");
        let mut b = buf(path.clone(), true);
        b.events
            .push(instant(1_000, TID_RDV, "RTS sent", Args::Peer { peer: 0 }));
        write_json(&mut b, File::create(&path).unwrap(), None).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        // 1 µs of monotonic time + an offset of (2024-01-01 + 5 µs).
        assert!(text.contains("\"ts\":6.000"), "{text}");
        assert!(text.contains("CLOCK_REALTIME"));
    }

    #[test]
    fn hooks_do_nothing_when_off() {
        assert!(!on());
        assert_eq!(now(), 0);
        assert!(call("MPI_Send").is_none());
        assert!(call_p2p("MPI_Isend", 1, 7).is_none());
        queued(0, &Header::default());
        assert!(lock().is_none());
    }
}
