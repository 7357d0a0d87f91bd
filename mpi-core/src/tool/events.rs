//! Events of the tool interface: what the engine reports as it happens (a packet left, a
//! rendezvous started, a message arrived unexpected), queued with a timestamp while a tool has
//! registered for that kind, and handed to the C layer's callbacks outside the engine (see
//! [`after_call`]).
//!
//! The engine never calls a tool from inside its state: [`emit`] only appends to a bounded
//! queue (instances beyond [`QUEUE_MAX`] are counted as dropped). The queue is drained by the
//! delivery function the C layer installs ([`set_delivery`]), called after an MPI call has
//! released the engine, on the calling thread.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering::Relaxed};
use std::time::Instant;

use once_cell::sync::{Lazy, OnceCell};
use parking_lot::Mutex;

use super::Verbosity;

/// The kinds of events (the index of an event type in MPI_T).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum EventKind {
    /// A packet was handed to a driver.
    PacketSent = 0,
    /// A rendezvous send started (its RTS was queued).
    RendezvousStarted = 1,
    /// A message arrived before its receive was posted.
    UnexpectedMessage = 2,
}

/// An event type: name, description, the names of its four `u64` elements.
pub struct EventDesc {
    /// Name (`MPI_T_event_get_index`).
    pub name: &'static str,
    /// What it reports.
    pub desc: &'static str,
    /// Its elements, in order (each an unsigned 64-bit integer).
    pub elements: &'static [&'static str],
    /// How deep a user must look to care.
    pub verbosity: Verbosity,
    /// Category.
    pub category: &'static str,
}

/// Every event type, indexed by [`EventKind`].
pub const EVENTS: &[EventDesc] = &[
    EventDesc {
        name: "madmpi_packet_sent",
        desc: "a packet was handed to a driver: peer (world rank), driver index, bytes, chunks",
        elements: &["peer", "driver", "bytes", "chunks"],
        verbosity: Verbosity::TunerDetail,
        category: "scheduler",
    },
    EventDesc {
        name: "madmpi_rendezvous_started",
        desc: "a rendezvous send started (its RTS was queued): peer (world rank), tag, bytes",
        elements: &["peer", "tag", "bytes", "reserved"],
        verbosity: Verbosity::TunerBasic,
        category: "engine",
    },
    EventDesc {
        name: "madmpi_unexpected_message",
        desc: "a message arrived before its receive was posted: source (world rank), tag, \
               message bytes, bytes held by the unexpected queue",
        elements: &["source", "tag", "bytes", "held"],
        verbosity: Verbosity::UserDetail,
        category: "engine",
    },
];

/// One occurrence of an event.
#[derive(Clone, Copy, Debug)]
pub struct Instance {
    /// Its [`EventKind`] as an index of [`EVENTS`].
    pub kind: usize,
    /// Nanoseconds since the process's tool epoch ([`now_ns`]).
    pub time_ns: u64,
    /// Its elements.
    pub data: [u64; 4],
}

/// Instances kept before more are dropped.
pub const QUEUE_MAX: usize = 1 << 16;

/// Bit `k` set: a tool wants events of kind `k`.
static MASK: AtomicU32 = AtomicU32::new(0);
/// Instances or drops wait for delivery.
static PENDING: AtomicBool = AtomicBool::new(false);
static DELIVER: OnceCell<fn()> = OnceCell::new();
static EPOCH: Lazy<Instant> = Lazy::new(Instant::now);

#[derive(Default)]
struct Queue {
    items: Vec<Instance>,
    dropped: [u64; 3],
}

static QUEUE: Lazy<Mutex<Queue>> = Lazy::new(Default::default);

/// Whether any kind of event is wanted: one relaxed load.
#[inline(always)]
pub fn armed() -> bool {
    MASK.load(Relaxed) != 0
}

/// Ask for (or stop asking for) events of kind `kind`.
pub fn want(kind: usize, on: bool) {
    Lazy::force(&EPOCH);
    let bit = 1u32 << kind;
    if on {
        MASK.fetch_or(bit, Relaxed);
    } else {
        MASK.fetch_and(!bit, Relaxed);
    }
}

/// Nanoseconds since the tool epoch (the first use of the tool interface or of MPI_T events).
pub fn now_ns() -> u64 {
    EPOCH.elapsed().as_nanos() as u64
}

/// Record an instance of `kind`, if wanted.
#[cold]
#[inline(never)]
pub(crate) fn emit(kind: EventKind, data: [u64; 4]) {
    let k = kind as usize;
    if MASK.load(Relaxed) & (1 << k) == 0 {
        return;
    }
    let time_ns = now_ns();
    let mut q = QUEUE.lock();
    if q.items.len() >= QUEUE_MAX {
        q.dropped[k] += 1;
    } else {
        q.items.push(Instance {
            kind: k,
            time_ns,
            data,
        });
    }
    PENDING.store(true, Relaxed);
}

/// The instances queued and the drops per kind since the last call.
pub fn take() -> (Vec<Instance>, [u64; 3]) {
    let mut q = QUEUE.lock();
    PENDING.store(false, Relaxed);
    (std::mem::take(&mut q.items), std::mem::take(&mut q.dropped))
}

/// The function that hands queued instances to the tools (the C layer's).
pub fn set_delivery(f: fn()) {
    let _ = DELIVER.set(f);
}

/// After an MPI call released the engine: deliver queued events, if any (one relaxed load
/// otherwise).
#[inline(always)]
pub(crate) fn after_call() {
    if PENDING.load(Relaxed) {
        deliver();
    }
}

/// Deliver now (also from `MPI_T` calls that poll).
#[cold]
pub fn deliver() {
    if let Some(f) = DELIVER.get() {
        f();
    }
}
