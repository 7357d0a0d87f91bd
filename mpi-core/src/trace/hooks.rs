//! The recording hooks: the MPI calls (through [`call`] and its variants, by the C
//! interface's wrappers) and the engine's scheduler, transport and rendezvous events. Each hook
//! is one relaxed load and a branch when tracing is off; the engine hooks' work is in their
//! cold `*_slow` halves.

use std::cell::Cell;
use std::sync::atomic::Ordering;

use madmpi_transports::SendOutcome;

use super::{
    ctrl_name, instant, lock, mono, now, on, packet_bytes, push, record, record_summary,
    write_trace, Args, Buf, ChunkInfo, Ev, ACTIVE, DEFER, NONE, THREADS, TID_MPI, TID_RDV,
    TID_SCHED, TID_THREADS, TID_TRANSPORT,
};
use crate::wire::{self, Header};

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

/// What each driver counted over the run ([`Transport::counters`]), recorded once, before the
/// engine goes at MPI_Finalize.
///
/// [`Transport::counters`]: madmpi_transports::Transport::counters
/// Recorded even when the trace stopped at `MADMPI_TRACE_MAX_EVENTS` (one event per driver,
/// the run's totals: a long run still tells what its drivers did).
pub(crate) fn driver_counters(list: &[madmpi_transports::registry::Driver]) {
    if ACTIVE.load(Ordering::Relaxed) {
        counters_slow(list);
    }
}

#[cold]
#[inline(never)]
fn counters_slow(list: &[madmpi_transports::registry::Driver]) {
    use madmpi_transports::Transport;
    for d in list {
        let values = d.counters();
        if !values.is_empty() {
            record_summary(instant(
                mono(),
                TID_TRANSPORT,
                "driver counters",
                Args::Counters {
                    driver: d.caps().name,
                    values,
                },
            ));
        }
    }
}

/// `peer` was found dead (also logged).
/// A rail to `peer` failed; the peer's other rails carry on.
pub(crate) fn rail_lost(peer: u32) {
    if on() {
        record(instant(
            mono(),
            TID_TRANSPORT,
            "rail lost",
            Args::Peer { peer },
        ));
    }
}

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
