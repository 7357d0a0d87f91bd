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
//!
//! Here: the recording state, the clocks, the events as kept in memory and the trace's lifetime
//! (start, finish); `hooks` holds the recording hooks, `write` the JSON writer.

mod hooks;
mod write;

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};

use crate::wire::{self, Header, Kind};

pub use hooks::{call, call_finalize, call_init, call_p2p, Call};
pub(crate) use hooks::{
    driver_counters, get, peer_lost, placing, queued, rail_lost, received, received_placed, sent,
    sent_now,
};
use write::write_json;

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
    Peer {
        peer: u32,
    },
    Counters {
        driver: &'static str,
        values: Vec<(&'static str, u64)>,
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

/// Record `ev` even after recording stopped at the limit: for the few events that sum a run
/// up, recorded once at its end.
#[cold]
#[inline(never)]
fn record_summary(ev: Ev) {
    if let Some(b) = lock().as_mut() {
        b.events.push(ev);
    }
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
        Some(Kind::Rma) => "rma",
        Some(Kind::Ctrl) => "ctrl",
        Some(Kind::Ack) => "ack",
        Some(Kind::RailDown) => "rail_down",
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
        _ => return None,
    })
}

fn packet_bytes(chunks: &[ChunkInfo]) -> u64 {
    chunks
        .iter()
        .map(|c| wire::pad8(wire::header_len(c.kind) + c.len as usize) as u64)
        .sum()
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
    use super::write::json_str;
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
