//! The `shm` driver: one shared segment per node, lock-free byte rings towards every local
//! process (a few pair rings, claimed by their first senders, and an inbox the other senders
//! share), and single-copy large transfers through cross-memory attach.
//!
//! # Setup
//!
//! The engine drives setup around its own barriers (this crate knows nothing of PMI):
//!
//! 1. the node leader calls [`ShmSegment::create`];
//! 2. barrier; every other local process calls [`ShmSegment::open`];
//! 3. every process calls [`ShmTransport::new`] (which publishes its pid);
//! 4. barrier; the leader calls [`ShmSegment::unlink`], so nothing is left in `/dev/shm` even if
//!    the job crashes later (the mappings stay valid after the name is gone).
//!
//! # Memory: rings per receiver
//!
//! Every local process owns `P = min(pair_rings, nlocal - 1)` pair rings (`MADMPI_SHM_PAIR_RINGS`,
//! default 8) and, when `P < nlocal - 1`, an inbox: `nlocal * (P + 1)` rings of `ring_bytes` in
//! all, linear in the number of processes (a ring per ordered pair was `nlocal * (nlocal - 1)`:
//! 1 GiB at 64 processes, 16 GiB at 256).
//!
//! - With `P = nlocal - 1` (up to 9 processes by default) every ordered pair has its ring from
//!   the start, as before: nothing is claimed, there is no inbox, the fast path is unchanged.
//! - Otherwise a sender's first packet to a receiver claims the next of the receiver's pair
//!   rings (`fetch_add` on the receiver's `claimed` count; the sender then writes itself as the
//!   ring's owner and keeps the ring for the rest of the job). The receiver adopts a claimed
//!   ring in a poll once its owner is written (it checks `claimed` while some of its rings are
//!   unclaimed). A sender that finds them all taken uses the receiver's inbox from then on: the
//!   same ring, its producers serialized by a lock word that a sender tries once per packet
//!   (taken: `WouldBlock`, as a full ring; nothing ever waits for it). Each inbox record names
//!   its sender in its header (bits 40–56, local index + 1).
//! - The lock word names its holder (local index + 1). A sender that has found it taken for
//!   [`PEER_CHECK_AFTER`] checks, once per such period, whether the holder still lives (its
//!   pid in its process slot); a holder that died holding it (its pid gone, or its driver
//!   closed) has the lock taken over by one of the waiting senders (compare-and-swap from the
//!   dead holder's value), which first brings the inbox's `tail` past any record the holder
//!   published without publishing `tail` (`ring::repair_tail`). A record the holder had only
//!   begun is invisible and overwritten. Without this, one sender killed inside its push
//!   would block every other sender of that inbox for the rest of the job.
//!
//! A pair of processes uses one channel for the whole job, so its packets stay in order
//! whichever it is, and `MPI_ANY_SOURCE` sees them as before. Rings are claimed on first use,
//! not at start-up: start-up makes no per-pair set-up at all.
//!
//! # Segment layout
//!
//! ```text
//! offset 0        header (128 B): magic, version, nlocal, ring size, total size, flags,
//!                 engine version, pair rings per process
//! 128             nlocal process slots (640 B each):
//!                   line 0: doorbell (u64, bumped by every producer writing to this process,
//!                           when the header's doorbell flag is set)
//!                   line 1: pid (i32), state (u32: 0 free, 1 attached, 2 closed)
//!                   line 2: split board of the transfers towards this process
//!                   line 3: claimed (u32: pair rings claimed by senders, may overshoot)
//!                   line 4: inbox lock (u32: 0 free, else the holder's local index + 1)
//! ...             nlocal*(P+inbox) ring controls (384 B each):
//!                   line 0: head (u64, written by the consumer only)
//!                   line 1: tail (u64, written by the producer only)
//!                   line 2: owner of a pair ring (u32: local index + 1, 0 unclaimed)
//! page aligned    nlocal*(P+inbox) ring data areas of `ring_bytes` (a power of two)
//! ```
//!
//! Ring `r` of receiver `dst` has index `dst * (P + inbox) + r`: its pair rings are `0..P`, its
//! inbox `P`. When every pair has its ring, sender `src` owns ring `src if src < dst else
//! src - 1` of `dst`. Lines are 128 bytes so that the adjacent-line prefetcher does not make
//! producer and consumer fight over a pair of lines.
//!
//! # Ring records
//!
//! `head` and `tail` are free-running byte counters (never reduced modulo the size; the position
//! is `counter & (size - 1)`). A record is an 8-byte header word, `READY (bit 63) | length`,
//! followed by the payload padded to 8 bytes. A record never wraps: when it does not fit before
//! the end of the data area the producer writes a skip marker (`u64::MAX`) and starts the record
//! at offset 0.
//!
//! The producer writes the payload, clears the word just after the record (the next header, so
//! that it reads 0, "nothing yet"), stores the header with Release (the skip marker last, when
//! there is one), then publishes `tail` with Release. The consumer polls the header word at its
//! `head` with Acquire rather than `tail`: the signal then travels in the same cache line as a
//! small payload, one line transfer per message instead of two (on this machine a line transfer
//! is ~150 ns, so this halves small-message latency). It hands the payload to the engine
//! straight from the ring, and only then publishes `head` with Release; the producer reads
//! `head` only when its cached copy says the ring is full. A ring holds at most
//! `ring_bytes - 8` bytes of records (the word after the last record is always free).
//!
//! Every header a peer wrote is validated before use, so a corrupt ring is an
//! [`Error::Malformed`], never an access outside the ring.
//!
//! # Split copies
//!
//! A large transfer from `src` to `dst` can be copied by both processes at once: `dst` reads
//! chunks of it with `process_vm_readv` while `src` writes others with `process_vm_writev`.
//! One core's copy does not saturate the memory system, so two copying halves finish in about
//! half the time (measured here: 1 MiB in ~23 µs instead of ~55 µs). Line 2 of `dst`'s process
//! slot is the board of these transfers, one at a time whoever sends (a `get` returns only
//! when its transfer is over, and each transfer has its own generation). It all happens
//! inside the driver's [`Transport::get`] of one block of at least `split_min` bytes: `dst`
//! opens the board ([`ShmTransport::split_open`]), tells `src` with a driver record on the
//! channel towards `src` (`DRIVER` set in its header: the generation, the chunks, the length and
//! both addresses), then copies ([`ShmTransport::split_get`]); `src`'s driver reads the record
//! in a poll and serves it ([`ShmTransport::split_put`]) at once when that poll had nothing
//! for the engine (a sender waiting for its send), else in its next poll unless a `get` of its
//! own comes first (its own receive first). The engine sees a `get` and nothing else. Both
//! claim chunks:
//!
//! - `claim` = `generation << 32 | next chunk`. Opening bumps the generation; a chunk is taken
//!   by a compare-and-swap that also checks the generation, so a helper that arrives after the
//!   transfer is over (or for an older one) takes nothing.
//! - `done` counts the chunks the helper has finished (Release after its copy: the owner that
//!   reads the count with Acquire sees the bytes). The owner returns only when every chunk it
//!   did not copy itself is counted, so the board is never reopened under a helper's copy.
//! - `orphan` = `generation << 32 | chunk + 1` when the helper could not write a chunk it
//!   claimed (its writes refused): it still counts it as done, and the owner copies it.
//!
//! The helper never waits for anything, and the owner waits only for chunks already claimed:
//! two processes each owning a transfer from the other cannot deadlock. The helper does not
//! check that the addresses of a request are a send of its own: only the kernel reads at
//! them (`process_vm_writev`: an address outside its memory is an error), and only while the
//! board is at the request's generation, i.e. while the receiver is copying that transfer,
//! which is while the send whose data is there waits for its `Fin`.
//!
//! # For the engine
//!
//! - The slice given to the `poll_recv` callback points into the ring, i.e. into memory shared
//!   with the sender: it is valid only during the call, and the ring space is not reused until
//!   the callback returns, so copy out what must outlive it (or consume it in place). A slow
//!   callback holds back the sender once the ring is full.
//! - `poll_recv` cannot be re-entered: the callback has no access to the driver (it is
//!   borrowed mutably). Packets to send in reaction (CTS, acknowledgements) must be queued and
//!   sent after `poll_recv` returns. A packet is consumed before the callback runs: if the
//!   callback panics, that packet is lost, never delivered twice.
//! - A packet is visible only once complete: a sender that dies while writing leaves nothing.
//! - Local processes are trusted not to scribble on the segment while it is in use; what they
//!   could do is make this process see malformed packets (`Error::Malformed`), not read or
//!   write outside the segment.
//! - `try_send` reports [`Error::PeerLost`] when the receiver has closed its driver and its ring
//!   is full, or when the ring has stayed full for a second and its process no longer exists
//!   (an inbox whose lock stays taken counts as full; a dead holder's lock is taken over, see
//!   "Memory").
//! - A receiver learns that a peer died only by asking, rarely: [`Transport::check_peers`]
//!   looks at the process of every peer (`liveness.rs`).
//! - The default [`ShmConfig`] ignores the environment; use [`ShmConfig::from_env`].
//!
//! # What this module must never do
//!
//! Block, allocate or make a system call on the `try_send`/`poll_recv` path (except the cheap
//! liveness probe when a ring has stayed full for a long time), or know anything of MPI.
//!
//! # Layout
//!
//! This file holds the driver: [`ShmTransport`], its peers' rings and its [`Transport`]
//! implementation. The segment, its layout and configuration are `segment.rs`'s; the ring's
//! records and its producer and consumer ends `ring.rs`'s; first contact and the inbox
//! `contact.rs`'s; split copies `split.rs`'s; packets built in place `append.rs`'s; whether the
//! peers still live `liveness.rs`'s.

#![warn(clippy::undocumented_unsafe_blocks)]

use std::io::{IoSlice, IoSliceMut};
use std::ptr::NonNull;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use crate::sys::{self, IOV_MAX};
use crate::{Caps, Error, PeerId, RemoteRegion, Result, SendOutcome, Transport};

mod contact;
mod liveness;
mod ring;
mod segment;
mod split;
pub(crate) use segment::{create_mapping, open_mapping};
pub use segment::{ShmConfig, ShmSegment};
use split::SplitCounts;
pub use split::{take_chunk, SplitCopy, SplitJob, MAX_SPLIT_CHUNKS};

use ring::{Consumer, Producer};
use segment::{ProcIdent, ProcSlot, STATE_ATTACHED, STATE_CLOSED, STATE_FREE};

/// How long a ring may stay full before the producer checks that the consumer still lives.
const PEER_CHECK_AFTER: Duration = Duration::from_secs(1);

#[derive(Debug)]
struct TxRing {
    prod: Producer,
    /// The receiver's doorbell and identity.
    slot: NonNull<ProcSlot>,
    stall: Stall,
}

/// Consecutive `WouldBlock`s towards a receiver, and when the first of them happened.
#[derive(Debug, Default)]
struct Stall {
    count: u32,
    since: Option<Instant>,
}

#[derive(Debug)]
struct RxRing {
    cons: Consumer,
    /// The sender of a pair ring (unused for the inbox, whose records name theirs).
    peer: PeerId,
    inbox: bool,
}

/// A receiver this process has no pair ring towards: not contacted yet, or reached through
/// its inbox.
#[derive(Debug, Default)]
struct Far {
    inbox: bool,
    stall: Stall,
    /// Attempts that found the inbox lock held, for the check of its holder's liveness.
    lock_stall: Stall,
}

/// World rank → local index.
#[derive(Debug)]
enum RankMap {
    /// `table[rank - base]`, `NOT_LOCAL` for ranks of other nodes: the usual case, where the
    /// ranks of a node span a small range.
    Dense { base: u32, table: Vec<u32> },
    /// `(rank, local index)` sorted by rank, when the span would make the table too large.
    Sorted(Vec<(u32, u32)>),
}

/// Sentinel of [`RankMap::Dense`].
const NOT_LOCAL: u32 = u32::MAX;
/// Largest span of ranks given a dense table (4 bytes per rank).
const DENSE_MAX_SPAN: u32 = 1 << 20;

impl RankMap {
    fn new(ranks: &[PeerId]) -> Result<RankMap> {
        let mut sorted: Vec<(u32, u32)> = ranks
            .iter()
            .enumerate()
            .map(|(i, p)| (p.0, i as u32))
            .collect();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(Error::Invalid(format!("shm: rank {} listed twice", w[0].0)));
        }
        let (lo, hi) = match (sorted.first(), sorted.last()) {
            (Some(a), Some(b)) => (a.0, b.0),
            _ => return Ok(RankMap::Sorted(sorted)),
        };
        if hi - lo >= DENSE_MAX_SPAN {
            return Ok(RankMap::Sorted(sorted));
        }
        let mut table = vec![NOT_LOCAL; (hi - lo) as usize + 1];
        for (rank, i) in sorted {
            table[(rank - lo) as usize] = i;
        }
        Ok(RankMap::Dense { base: lo, table })
    }

    #[inline(always)]
    fn get(&self, peer: PeerId) -> Option<usize> {
        match self {
            RankMap::Dense { base, table } => {
                match table.get(peer.0.wrapping_sub(*base) as usize) {
                    Some(&j) if j != NOT_LOCAL => Some(j as usize),
                    _ => None,
                }
            }
            RankMap::Sorted(v) => v
                .binary_search_by_key(&peer.0, |e| e.0)
                .ok()
                .map(|k| v[k].1 as usize),
        }
    }
}

/// Largest packet worth aggregating into over shared memory (`Caps::aggreg_max`): a bigger one
/// gains nothing per chunk and makes the receiver wait for all of it, where packets of this
/// size keep both sides busy at once.
const AGGREG_MAX: usize = 16 << 10;
/// Over shared memory a message of more than this many bytes travels alone (`Caps::solo_min`):
/// copying it costs more than a packet of its own, and the receiver starts on it as soon as it
/// is written (measured: 64 non-blocking 4 KiB sends in flight, ~6 GB/s aggregated by four,
/// ~9–10 GB/s alone; the multiseg ping-pong 16 × 4 KiB and 16 × 8 KiB 10–15 % faster alone,
/// 16 × 2 KiB faster aggregated).
const SOLO_MIN: usize = 2 << 10;
/// Over shared memory a packet of small sends leaves once it holds this many
/// (`Caps::pack_count`), so that the receiver delivers it while the sender builds the next
/// (measured against 4 and 8: docs/architecture.md, issue #23's ninth pass).
const PACK_COUNT: u32 = 6;

/// The `shm` driver of one process. See the [module documentation](self).
#[derive(Debug)]
pub struct ShmTransport {
    caps: Caps,
    me: usize,
    my_slot: NonNull<ProcSlot>,
    doorbell: bool,
    /// Doorbell value when the rings were last scanned.
    seen: u64,
    /// `tx[j]` sends to local index `j` through a pair ring; absent for `me`, and for a
    /// receiver not contacted yet or reached through its inbox (see `far`).
    tx: Vec<Option<TxRing>>,
    /// Where `tx[j]` is absent: whether local `j` is reached through its inbox.
    far: Vec<Far>,
    /// Incoming rings: the pair rings adopted so far, and the inbox.
    rx: Vec<RxRing>,
    /// World rank of every local index.
    peers: Vec<PeerId>,
    /// Pair rings of this process that senders claim on first contact (0 when every pair has
    /// its ring from the start), and which of them were adopted into `rx`.
    claimable: usize,
    adopted: Vec<bool>,
    adopted_count: usize,
    /// Where the next poll starts, for fairness between peers.
    rr: usize,
    /// World rank → local index.
    ranks: RankMap,
    /// Slots of every local process, by local index (for pids and liveness).
    slots: Vec<NonNull<ProcSlot>>,
    /// Reused by `get`.
    iov_scratch: Vec<libc::iovec>,
    /// Help requests of split copies read by a poll and not served yet (`None`: malformed).
    helps: Vec<(PeerId, Option<split::HelpAsk>)>,
    /// Local indices whose memory this process may not write (a help refused once).
    no_put: Vec<bool>,
    /// Local indices reported dead by [`Transport::check_peers`].
    reported: Vec<bool>,
    /// Split copies (`get`s) and how their chunks were shared out; chunks of other
    /// processes' split copies this one wrote (`helped`).
    split: SplitCounts,
    /// Keeps the mapping alive; declared last so it is dropped after the pointers above.
    seg: ShmSegment,
}

// SAFETY: all raw pointers point into the mapping owned by `seg`, which moves with the value;
// none of them is tied to the creating thread. (`iov_scratch` holds no live pointers between
// calls.)
unsafe impl Send for ShmTransport {}

impl ShmTransport {
    /// The driver of local process `my_local` of `seg`, where `local_peers[i]` is the world
    /// rank of local index `i`. Publishes this process's pid in the segment (for cross-memory
    /// attach by the others).
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] when `local_peers` does not have one distinct rank per local process,
    /// `my_local` is out of range, or another process already attached as `my_local`.
    pub fn new(seg: ShmSegment, my_local: usize, local_peers: Vec<PeerId>) -> Result<ShmTransport> {
        let n = seg.nlocal();
        if local_peers.len() != n || my_local >= n {
            return Err(Error::Invalid(format!(
                "shm: {} local peers and local index {my_local} for a segment of {n}",
                local_peers.len()
            )));
        }
        let ranks = RankMap::new(&local_peers)?;

        let slots: Vec<_> = (0..n).map(|i| seg.slot(i)).collect();
        let my_slot = slots[my_local];
        // SAFETY: slots point into the mapping owned by `seg`; only atomics are accessed.
        let ident = unsafe { &my_slot.as_ref().ident.0 };
        if let Err(state) = ident.state.compare_exchange(
            STATE_FREE,
            STATE_ATTACHED,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            return Err(Error::Invalid(format!(
                "shm segment {}: local index {my_local} already taken (state {state}, pid {})",
                seg.name(),
                ident.pid.load(Ordering::Acquire)
            )));
        }
        ident.pid.store(sys::getpid(), Ordering::Release);

        let cap = seg.layout.ring_bytes;
        let mut tx = Vec::with_capacity(n);
        let mut rx = Vec::with_capacity(n.saturating_sub(1));
        let mut far = Vec::with_capacity(n);
        let layout = seg.layout;
        for j in 0..n {
            far.push(Far::default());
            if j == my_local || !layout.static_pairs() {
                tx.push(None);
                continue;
            }
            // Every ordered pair has its ring: ours towards `j`, and `j`'s towards us.
            let (ctrl, data) = seg.ring(j, layout.static_ring(my_local, j));
            tx.push(Some(TxRing {
                // SAFETY: the ring lies in the mapping kept alive by `seg` (owned by the
                // transport), is page aligned with a power-of-two size, and we are its only
                // producer (the slot claim above makes `my_local` ours).
                prod: unsafe { Producer::new(ctrl, data, cap) },
                slot: slots[j],
                stall: Stall::default(),
            }));
            let (ctrl, data) = seg.ring(my_local, layout.static_ring(j, my_local));
            rx.push(RxRing {
                // SAFETY: as above, and we are the only consumer of rings towards `my_local`.
                cons: unsafe { Consumer::new(ctrl, data, cap) },
                peer: local_peers[j],
                inbox: false,
            });
        }
        let claimable = if layout.static_pairs() {
            0
        } else {
            layout.pairs
        };
        if layout.inbox {
            let (ctrl, data) = seg.ring(my_local, layout.pairs);
            rx.push(RxRing {
                // SAFETY: as above; the inbox of `my_local` has no other consumer.
                cons: unsafe { Consumer::new(ctrl, data, cap) },
                peer: local_peers[my_local],
                inbox: true,
            });
        }

        let max_packet = seg.cfg.max_packet();
        let caps = Caps {
            name: "shm",
            // Measured on the development machine (see the benchmark in
            // `tests/shm_processes.rs`): ~190 ns for 8 bytes one way, ~16 GB/s for a 1 MiB `get`.
            latency_ns: 200,
            bandwidth_mbps: 15_000,
            max_packet,
            eager_threshold: seg.cfg.eager_threshold.min(max_packet / 2),
            max_iov: IOV_MAX,
            can_get: seg.cfg.cma,
            preference: 80,
            aggreg_max: max_packet.min(AGGREG_MAX),
            solo_min: SOLO_MIN,
            pack_count: PACK_COUNT,
            registers_memory: false,
        };
        Ok(ShmTransport {
            caps,
            me: my_local,
            my_slot,
            doorbell: seg.doorbell,
            seen: 0,
            tx,
            far,
            rx,
            peers: local_peers,
            claimable,
            adopted: vec![false; claimable],
            adopted_count: 0,
            rr: 0,
            ranks,
            slots,
            iov_scratch: Vec::with_capacity(IOV_MAX),
            helps: Vec::new(),
            no_put: vec![false; n],
            reported: vec![false; n],
            split: SplitCounts::default(),
            seg,
        })
    }

    /// Local index of `peer`, if it is on this node.
    #[inline(always)]
    fn local_index(&self, peer: PeerId) -> Option<usize> {
        self.ranks.get(peer)
    }

    fn unreachable(&self, peer: PeerId) -> Error {
        Error::Invalid(format!(
            "shm: rank {} is not another process of this node",
            peer.0
        ))
    }

    /// The segment this driver works in.
    pub fn segment(&self) -> &ShmSegment {
        &self.seg
    }

    fn ident(&self, j: usize) -> &ProcIdent {
        // SAFETY: slots point into the mapping owned by `self.seg`; only atomics are accessed.
        unsafe { &self.slots[j].as_ref().ident.0 }
    }

    /// Slow path of `try_send`: the ring towards local `j` is full. Decide whether the
    /// receiver may be gone.
    #[cold]
    #[inline(never)]
    fn blocked(&mut self, j: usize) -> Result<SendOutcome> {
        let peer = self.peers[j];
        if self.ident(j).state.load(Ordering::Acquire) == STATE_CLOSED {
            return Err(Error::PeerLost(peer));
        }
        let s = match self.tx[j].as_mut() {
            Some(t) => &mut t.stall,
            None => &mut self.far[j].stall,
        };
        s.count = s.count.wrapping_add(1);
        // Read the clock once every 256 attempts only.
        if s.count & 0xff == 1 {
            let now = Instant::now();
            match s.since {
                None => s.since = Some(now),
                Some(since) if now.duration_since(since) >= PEER_CHECK_AFTER => {
                    s.since = Some(now);
                    if self.gone(j) {
                        return Err(Error::PeerLost(peer));
                    }
                }
                Some(_) => {}
            }
        }
        Ok(SendOutcome::WouldBlock)
    }

    /// Advance the (entry, offset) cursor over `local` by `n` bytes.
    fn advance(local: &[IoSliceMut<'_>], idx: &mut usize, off: &mut usize, mut n: usize) {
        while n > 0 {
            let left = local[*idx].len() - *off;
            if n < left {
                *off += n;
                return;
            }
            n -= left;
            *idx += 1;
            *off = 0;
        }
        // Skip empty entries so the cursor rests on data (or the end).
        while *idx < local.len() && local[*idx].len() == *off {
            *idx += 1;
            *off = 0;
        }
    }
}

impl Drop for ShmTransport {
    fn drop(&mut self) {
        // SAFETY: the slot lies in the mapping, still alive (`seg` is dropped after this).
        let ident = unsafe { &self.my_slot.as_ref().ident.0 };
        ident.state.store(STATE_CLOSED, Ordering::Release);
    }
}

impl ShmTransport {
    /// [`Transport::try_send`] of a packet made of two pieces (a chunk header and its payload:
    /// the eager fast path), without the iovec array and without a virtual call.
    #[inline]
    pub fn try_send2(&mut self, peer: PeerId, head: &[u8], body: &[u8]) -> Result<SendOutcome> {
        let len = head.len() + body.len();
        self.push_record(peer, len, |p, from| {
            // SAFETY: the record has room for `len` bytes; the slices cannot overlap the ring.
            p.push_flagged(len, from, |dst| unsafe {
                crate::copy_bytes(head.as_ptr(), dst, head.len());
                crate::copy_bytes(body.as_ptr(), dst.add(head.len()), body.len());
            })
        })
    }

    /// Push a record of `len` bytes to `peer` with `push` (false: the ring is full; its second
    /// argument is the header bits naming the sender, 0 in a pair ring), ring its doorbell,
    /// keep the blocking state.
    #[inline(always)]
    fn push_record(
        &mut self,
        peer: PeerId,
        len: usize,
        push: impl FnOnce(&mut Producer, u64) -> bool,
    ) -> Result<SendOutcome> {
        let Some(j) = self.local_index(peer).filter(|&j| j != self.me) else {
            return Err(self.unreachable(peer));
        };
        if len > self.caps.max_packet {
            return Err(self.too_long(len));
        }
        let doorbell = self.doorbell;
        let Some(t) = self.tx[j].as_mut() else {
            return self.push_far(j, push);
        };
        if push(&mut t.prod, 0) {
            if doorbell {
                // SAFETY: the slot lies in the mapping owned by `self.seg`.
                let slot = unsafe { t.slot.as_ref() };
                // Release: a receiver that sees the new count also sees the record.
                slot.doorbell.0.fetch_add(1, Ordering::Release);
            }
            t.stall = Stall::default();
            return Ok(SendOutcome::Done);
        }
        self.blocked(j)
    }

    #[cold]
    fn too_long(&self, len: usize) -> Error {
        Error::Invalid(format!(
            "shm: packet of {len} bytes exceeds max_packet {}",
            self.caps.max_packet
        ))
    }

    /// The rest of [`Transport::poll_recv`]: deliver what every ring holds (one lap each),
    /// starting with a different ring each time; `bell` is the doorbell count read first.
    #[inline(never)]
    fn scan(&mut self, bell: u64, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        let n = self.rx.len();
        if n == 0 {
            return Ok(0);
        }
        let start = self.rr;
        self.rr = if start + 1 == n { 0 } else { start + 1 };
        let mut total = 0;
        let mut more = false;
        let mut i = start;
        let mut helps = std::mem::take(&mut self.helps);
        let asked_before = helps.len();
        for _ in 0..n {
            let r = &mut self.rx[i];
            let got = if r.inbox {
                let peers = &self.peers;
                let me = self.me;
                let bad = std::cell::Cell::new(None);
                // The record names its sender: local index + 1.
                let sender = |from: u32| {
                    let k = (from as usize).wrapping_sub(1);
                    (k < peers.len() && k != me).then(|| peers[k])
                };
                let got = r.cons.pop_all(
                    &mut |from, p| match sender(from) {
                        Some(q) => deliver(q, p),
                        None => bad.set(Some(from)),
                    },
                    &mut |from, p| match sender(from) {
                        Some(q) => helps.push((q, split::HelpAsk::decode(p))),
                        None => bad.set(Some(from)),
                    },
                )?;
                if let Some(from) = bad.get() {
                    self.helps = helps;
                    return Err(Error::Malformed(format!(
                        "shm inbox: a record from local index {} of {}",
                        i64::from(from) - 1,
                        peers.len()
                    )));
                }
                got
            } else {
                let peer = r.peer;
                r.cons.pop_all(&mut |_, p| deliver(peer, p), &mut |_, p| {
                    helps.push((peer, split::HelpAsk::decode(p)))
                })?
            };
            // A ring left non-empty (one lap per call) must be visited again even if the
            // doorbell stays quiet.
            more |= got > 0 && r.cons.pending();
            total += got;
            i += 1;
            if i == n {
                i = 0;
            }
        }
        // Every ring was scanned after reading `bell`: unless one was left non-empty,
        // everything it announced is in.
        if !more {
            self.seen = bell;
        }
        // Help at once when the engine got nothing from this poll (a sender waiting for its
        // send: nothing else to do). Otherwise at the next poll, unless a `get` of ours comes
        // first (see `helped_get`): what the engine got may be a message of its own to copy.
        let engine_got = total - (helps.len() - asked_before);
        self.helps = helps;
        if engine_got == 0 && !self.helps.is_empty() {
            self.serve_helps()?;
        }
        Ok(total)
    }
}

impl Transport for ShmTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    #[inline]
    fn try_send2(&mut self, peer: PeerId, head: &[u8], body: &[u8]) -> Result<SendOutcome> {
        ShmTransport::try_send2(self, peer, head, body)
    }

    #[inline]
    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        let mut len = 0usize;
        for s in iov {
            len += s.len();
        }
        self.push_record(peer, len, |p, from| p.try_push(iov, len, from))
    }
    /// The idle test of [`poll_recv`](Self::poll_recv) alone, so that the engine's progress
    /// loop skips an idle driver without the poll and the `poll_lost` after it: help asked
    /// for, rings still to adopt, and (with the doorbell) a ring since the last complete scan
    /// or (without) a record at the head of some ring.
    #[inline]
    fn may_have_input(&self) -> bool {
        if !self.helps.is_empty() || self.adopted_count < self.claimable {
            return true;
        }
        if self.doorbell {
            // SAFETY: the slot lies in the mapping owned by `self.seg`.
            let bell = unsafe { self.my_slot.as_ref() }
                .doorbell
                .0
                .load(Ordering::Acquire);
            return bell != self.seen;
        }
        self.rx.iter().any(|r| r.cons.pending())
    }

    /// An idle poll (nothing in any ring) is a few loads and no call: with the doorbell,
    /// whether it rang since the last complete scan (a ring left non-empty keeps that scan
    /// incomplete); without, whether a record waits at the head of some ring.
    #[inline]
    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        if !self.helps.is_empty() {
            self.serve_helps()?;
        }
        let mut bell = 0;
        if self.doorbell {
            // SAFETY: the slot lies in the mapping owned by `self.seg`.
            bell = unsafe { self.my_slot.as_ref() }
                .doorbell
                .0
                .load(Ordering::Acquire);
            if bell == self.seen {
                return Ok(0);
            }
        }
        if self.adopted_count < self.claimable {
            self.adopt()?;
        }
        if !self.doorbell && !self.rx.iter().any(|r| r.cons.pending()) {
            return Ok(0);
        }
        self.scan(bell, deliver)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.split;
        vec![
            ("split_gets", c.gets),
            ("split_chunks_mine", c.mine),
            ("split_chunks_theirs", c.theirs),
            ("split_chunks_helped", c.helped),
        ]
    }

    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        if !self.caps.can_get {
            return Err(Error::Unsupported("shm get (cross-memory attach disabled)"));
        }
        let Some(j) = self.local_index(peer).filter(|&j| j != self.me) else {
            return Err(self.unreachable(peer));
        };
        let total: u64 = local.iter().map(|s| s.len() as u64).sum();
        if total != remote.len {
            return Err(Error::Invalid(format!(
                "get: local buffers hold {total} bytes, remote region {}",
                remote.len
            )));
        }
        if remote.len == 0 {
            return Ok(());
        }
        if remote.addr.checked_add(remote.len).is_none() || usize::try_from(remote.len).is_err() {
            return Err(Error::Invalid(format!(
                "get: bad region {:#x}+{}",
                remote.addr, remote.len
            )));
        }
        let pid = self.ident(j).pid.load(Ordering::Acquire);
        if pid <= 0 {
            return Err(Error::Invalid(format!(
                "get: rank {} has not attached to the shm segment yet",
                peer.0
            )));
        }
        if let [one] = local {
            if self.split_min().is_some_and(|m| one.len() >= m) {
                return self.helped_get(peer, remote.addr, one);
            }
        }

        let mut scratch = std::mem::take(&mut self.iov_scratch);
        let (mut idx, mut off) = (0usize, 0usize);
        Self::advance(local, &mut idx, &mut off, 0);
        let mut addr = remote.addr;
        let mut left = remote.len as usize;
        let result = loop {
            if left == 0 {
                break Ok(());
            }
            scratch.clear();
            let mut batch = 0usize;
            let (mut k, mut o) = (idx, off);
            while k < local.len() && scratch.len() < IOV_MAX {
                let s = &mut local[k];
                let l = s.len() - o;
                if l > 0 {
                    scratch.push(libc::iovec {
                        // SAFETY: `o` <= the slice length, so the pointer stays in bounds.
                        iov_base: unsafe { s.as_mut_ptr().add(o) }.cast(),
                        iov_len: l,
                    });
                    batch += l;
                }
                k += 1;
                o = 0;
            }
            let rem = [libc::iovec {
                iov_base: addr as usize as *mut libc::c_void,
                iov_len: batch,
            }];
            // SAFETY: every local entry is a part of a distinct `&mut` slice of `local`, which
            // nothing else touches during the call.
            match unsafe { sys::process_vm_readv(pid, &scratch, &rem) } {
                Ok(0) => {
                    break Err(Error::Invalid(format!(
                        "get: no progress reading {:#x}+{left} from rank {}",
                        addr, peer.0
                    )))
                }
                Ok(got) => {
                    let got = got.min(left);
                    Self::advance(local, &mut idx, &mut off, got);
                    addr += got as u64;
                    left -= got;
                }
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
                Err(e) => {
                    break Err(sys::cma_error(
                        e,
                        "process_vm_readv",
                        Some(peer),
                        pid,
                        addr,
                        left,
                    ))
                }
            }
        };
        scratch.clear();
        self.iov_scratch = scratch;
        result
    }

    fn reaches(&self, peer: PeerId) -> bool {
        self.local_index(peer).is_some_and(|j| j != self.me)
    }

    fn check_peers(&mut self) -> Vec<PeerId> {
        self.dead_peers()
    }
}

#[cfg(test)]
mod tests;
