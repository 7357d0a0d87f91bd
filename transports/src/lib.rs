//! madmpi transports: the [`Transport`] trait and its drivers.
//!
//! A driver moves *packets* (opaque byte strings built by the engine's strategy) between
//! processes, and nothing else: it knows no MPI semantics, no matching, no communicators.
//! All `unsafe` for OS calls (shared memory, `process_vm_readv`, sockets) lives in this crate.
//!
//! The contract every driver follows (checked by the conformance tests in `tests/`):
//! - [`Transport::try_send`] accepts a whole packet or nothing. `Ok(SendOutcome::WouldBlock)` is
//!   backpressure (the peer's ring is full, the socket buffer is full), never an error; the
//!   engine keeps the packet queued and retries after polling.
//! - Packets from one peer are delivered by [`Transport::poll_recv`] complete, in the order they
//!   were accepted by `try_send`, exactly once.
//! - [`Transport::get`] reads a region of a peer's address space straight into local memory
//!   (single copy). Drivers that cannot do it say so in [`Caps::can_get`] and answer
//!   [`Error::Unsupported`]; a driver may also discover at run time that the OS refuses it
//!   ([`Error::PermissionDenied`]), and the engine then falls back to sending fragments.

#![deny(missing_docs)]

use std::fmt;
use std::io::{IoSlice, IoSliceMut};

/// Copy `n` bytes from `src` to `dst` (not overlapping). Up to 64 bytes — the header and
/// payload of a small message — the copy is inline, by a few possibly overlapping word moves
/// that never touch a byte outside either range; beyond, `memcpy`, in pieces of
/// [`LARGE_PIECE`] from [`LARGE_MIN`] bytes (see [`copy_large`]). (A call to `memcpy` costs
/// more than the copy itself at small sizes, and small messages make two of them per send.)
///
/// # Safety
/// `src` is valid for reads and `dst` for writes of `n` bytes, and the ranges do not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(src: *const u8, dst: *mut u8, n: usize) {
    use std::ptr::{read_unaligned as rd, write_unaligned as wr};
    if n >= LARGE_MIN {
        copy_large(src, dst, n);
    } else if n > 64 {
        std::ptr::copy_nonoverlapping(src, dst, n);
    } else if n >= 32 {
        // The first and the last 32 bytes (overlapping when n < 64).
        let a = rd(src as *const [u8; 32]);
        let b = rd(src.add(n - 32) as *const [u8; 32]);
        wr(dst as *mut [u8; 32], a);
        wr(dst.add(n - 32) as *mut [u8; 32], b);
    } else if n >= 16 {
        let a = rd(src as *const [u8; 16]);
        let b = rd(src.add(n - 16) as *const [u8; 16]);
        wr(dst as *mut [u8; 16], a);
        wr(dst.add(n - 16) as *mut [u8; 16], b);
    } else if n >= 8 {
        let a = rd(src as *const u64);
        let b = rd(src.add(n - 8) as *const u64);
        wr(dst as *mut u64, a);
        wr(dst.add(n - 8) as *mut u64, b);
    } else if n >= 4 {
        let a = rd(src as *const u32);
        let b = rd(src.add(n - 4) as *const u32);
        wr(dst as *mut u32, a);
        wr(dst.add(n - 4) as *mut u32, b);
    } else {
        for i in 0..n {
            *dst.add(i) = *src.add(i);
        }
    }
}

pub mod emu;
pub mod loopback;
#[cfg(madmpi_ofi)]
pub mod ofi;
pub mod port;
pub mod registry;
pub mod shm;
pub mod shmcoll;
pub mod shmwin;
mod sys;
pub mod tcp;

pub use shm::{SplitCopy, SplitJob};
pub use sys::pid_alive;

#[cfg(test)]
mod conformance;
/// The fuzz tests' generator and allocation meter (`fuzz/kit.rs`, shared by the crates).
#[cfg(test)]
#[path = "../../fuzz/kit.rs"]
mod fuzzkit;
#[cfg(test)]
#[global_allocator]
static METER: fuzzkit::Meter = fuzzkit::Meter;

/// A peer, identified by its rank in the job (`MPI_COMM_WORLD` rank).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PeerId(pub u32);

/// What a driver can do, with the numbers the engine uses to choose protocols.
#[derive(Clone, Debug)]
pub struct Caps {
    /// Driver name (`self`, `shm`, `tcp`, ...).
    pub name: &'static str,
    /// Approximate one-way latency of a small packet, in nanoseconds.
    pub latency_ns: u64,
    /// Approximate bandwidth, in MB/s.
    pub bandwidth_mbps: u64,
    /// The largest packet `try_send` accepts (sum of the iovec lengths).
    pub max_packet: usize,
    /// Messages up to this many bytes travel eagerly; above, rendezvous.
    pub eager_threshold: usize,
    /// The most iovec entries one `try_send` takes.
    pub max_iov: usize,
    /// `get` is available (cross-memory attach, or memcpy for `self`).
    pub can_get: bool,
    /// Rank among the drivers that reach a peer: the highest one carries its traffic alone
    /// unless several rails are asked for (`self` 100, `shm` 80, `tcp` 40).
    pub preference: u8,
    /// The largest packet worth aggregating small chunks into (at most `max_packet`): a bigger
    /// one gains nothing per chunk and makes the receiver wait for all of it.
    pub aggreg_max: usize,
    /// A message of more than this many bytes travels in a packet of its own (copying it into
    /// an aggregate costs more than the packet it saves).
    pub solo_min: usize,
    /// The most small sends the engine's send fast path packs into one packet before that
    /// packet leaves (`u32::MAX`: no limit but `aggreg_max`). Where a packet costs little and
    /// the receiver can work on one while the sender builds the next (shared memory), a burst
    /// leaving in a few packets lets the two sides overlap; where every packet is a system
    /// call (TCP), one packet per burst is best.
    pub pack_count: u32,
    /// Rendezvous data needs registered memory: [`Transport::register`] gives the key bytes
    /// that travel with the request.
    pub registers_memory: bool,
}

/// Result of [`Transport::try_send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// The whole packet was accepted; the iovec memory may be reused at once.
    Done,
    /// No room now: nothing was taken. Poll and try again.
    WouldBlock,
}

/// A region of a peer's address space, as advertised in a rendezvous request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteRegion {
    /// Virtual address in the peer's address space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The key of the peer's registration that covers it ([`Transport::register`]; 0 for
    /// drivers that register nothing).
    pub key: u64,
    /// Where that registration starts in the peer's address space (drivers whose network
    /// addresses registered memory by offset need it).
    pub base: u64,
}

impl RemoteRegion {
    /// `len` bytes at `addr`, in memory that needs no registration.
    pub fn at(addr: u64, len: u64) -> RemoteRegion {
        RemoteRegion {
            addr,
            len,
            key: 0,
            base: addr,
        }
    }
}

/// Errors of this crate.
#[derive(Debug)]
pub enum Error {
    /// An operating-system call failed.
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The operation is not available on this driver.
    Unsupported(&'static str),
    /// The OS refused the operation (e.g. cross-memory attach forbidden by ptrace rules).
    PermissionDenied(String),
    /// The peer is gone (process exited, connection reset).
    PeerLost(PeerId),
    /// The peer sent something that is not a valid packet.
    Malformed(String),
    /// Bad argument from the caller (unknown peer, packet too large, ...).
    Invalid(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Unsupported(what) => write!(f, "{what} is not supported by this transport"),
            Error::PermissionDenied(what) => write!(f, "permission denied: {what}"),
            Error::PeerLost(p) => write!(f, "peer {} is gone", p.0),
            Error::Malformed(what) => write!(f, "malformed packet: {what}"),
            Error::Invalid(what) => write!(f, "invalid argument: {what}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Result type of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A driver. The engine owns one value per driver kind and calls it from its progress loop,
/// with its own lock held: drivers need no internal locking.
pub trait Transport {
    /// What this driver can do.
    fn caps(&self) -> &Caps;

    /// Offer a whole packet (the concatenation of `iov`) to `peer`.
    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome>;

    /// [`try_send`](Self::try_send) of a packet made of two pieces (a chunk header and its
    /// payload: the eager fast path). A driver may do it without building an iovec array.
    #[inline]
    fn try_send2(&mut self, peer: PeerId, head: &[u8], body: &[u8]) -> Result<SendOutcome> {
        self.try_send(peer, &[IoSlice::new(head), IoSlice::new(body)])
    }

    /// What the driver counted so far (name, value): shown in traces (`driver counters`).
    /// The default counts nothing.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// Whether a packet may be waiting: `false` lets the engine skip the poll. The default
    /// always says yes.
    #[inline]
    fn may_have_input(&self) -> bool {
        true
    }

    /// This driver's address card, published at start-up for [`connect`](Self::connect) on
    /// the other ranks (`None`: the driver needs none, e.g. it reaches its peers through a
    /// shared segment).
    fn card(&self) -> Option<String> {
        None
    }

    /// Record the card of `peer` (from its [`card`](Self::card)); the connection itself may be
    /// made lazily.
    fn connect(&mut self, peer: PeerId, card: &str) -> Result<()> {
        let _ = (peer, card);
        Err(Error::Unsupported("connect"))
    }

    /// Make `len` bytes at `ptr` readable by the peers' `get` (RDMA): the key travels in the
    /// rendezvous request and comes back in the peer's [`RemoteRegion`]. Drivers whose `get`
    /// needs no registration (shared memory, `self`) return 0, which is the default.
    fn register(&mut self, ptr: *const u8, len: usize) -> Result<u64> {
        let _ = (ptr, len);
        Ok(0)
    }

    /// Undo a [`register`](Self::register) whose key was `key`.
    fn deregister(&mut self, key: u64) {
        let _ = key;
    }

    /// Make a one-sided window's `len` bytes at `ptr` readable and writable by the peers'
    /// [`rma_post`](Self::rma_post) until [`deregister`](Self::deregister) of the key returned.
    /// The default, for drivers without RDMA writes: [`Error::Unsupported`] (the window's
    /// operations then travel as messages).
    fn register_window(&mut self, ptr: *mut u8, len: usize) -> Result<u64> {
        let _ = (ptr, len);
        Err(Error::Unsupported("one-sided RDMA to a registered window"))
    }

    /// Post a one-sided RDMA transfer between `len` bytes at `local` and `remote` in `peer`'s
    /// window (registered by its [`register_window`](Self::register_window)): a write of
    /// `local` into it when `write`, else a read of it into `local`. It is asynchronous: its
    /// completion (with the error text if it failed) is reported once, by
    /// [`rma_poll`](Self::rma_poll), with `token`. When the provider has no room, this polls
    /// until it has. The default: [`Error::Unsupported`].
    ///
    /// # Safety
    ///
    /// `local` is valid for reads (a write) or writes (a read) of `len` bytes, and untouched by
    /// anything else, until `rma_poll` reports `token` (or the driver is dropped).
    unsafe fn rma_post(
        &mut self,
        peer: PeerId,
        write: bool,
        remote: RemoteRegion,
        local: *mut u8,
        len: usize,
        token: u64,
    ) -> Result<()> {
        let _ = (peer, write, remote, local, len, token);
        Err(Error::Unsupported("one-sided RDMA"))
    }

    /// One-sided transfers of fewer bytes than this are better sent as messages (a provider
    /// that does RDMA in software). The default: 0.
    fn rma_min(&self) -> usize {
        0
    }

    /// Progress the driver and report each [`rma_post`](Self::rma_post) completed since the
    /// last call: `done(token, None)`, or `done(token, Some(why))` if it failed. Never blocks.
    /// The default reports nothing.
    fn rma_poll(&mut self, done: &mut dyn FnMut(u64, Option<String>)) -> Result<()> {
        let _ = done;
        Ok(())
    }

    /// Deliver every complete packet that has arrived, oldest first per peer, by calling
    /// `deliver(peer, packet)`. The slice is only valid during the call. Returns how many
    /// packets were delivered. Never blocks.
    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize>;

    /// Copy `remote` from `peer`'s memory into `local` (whose lengths sum to `remote.len`).
    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()>;

    /// Whether `peer` is reachable through this driver.
    fn reaches(&self, peer: PeerId) -> bool;

    /// Like [`poll_recv`](Self::poll_recv), but large packets may be written straight into
    /// memory the engine chooses (the rendezvous receive buffer) instead of being delivered
    /// whole: see [`RecvSink`] for the contract. Returns how many packets were delivered or
    /// placed. Never blocks.
    ///
    /// The default delivers every packet whole through [`RecvSink::deliver`], so a driver that
    /// cannot do better needs nothing; a driver that can (TCP, which otherwise reads every
    /// byte into its own buffer first) overrides it, and its `poll_recv` is then this method
    /// with a sink that never places.
    fn poll_recv_split(&mut self, split: SplitParams, sink: &mut dyn RecvSink) -> Result<usize> {
        let _ = split;
        self.poll_recv(&mut |peer, packet| sink.deliver(peer, packet))
    }

    /// The next peer this driver has lost since the last call, each reported once, or `None`.
    ///
    /// A driver that detects peer failure while polling (EOF or reset on a connection) does not
    /// fail [`poll_recv`](Self::poll_recv) for it, since packets from other peers still flow:
    /// it records the loss, and the engine calls this after polling to fail the operations
    /// involving that peer only. Every later [`try_send`](Self::try_send) to a lost peer
    /// answers [`Error::PeerLost`]. The default reports nothing.
    fn poll_lost(&mut self) -> Option<PeerId> {
        None
    }

    /// The peers found dead since the last call, each reported once, by a check that costs
    /// system calls, for a driver whose peers can die without anything in its data path
    /// saying so (`shm`: a ring stays silent; it looks whether each peer's process still
    /// exists). The engine calls it rarely, only from waits that have found nothing for a
    /// while (every 50 ms of idle waiting), never on the fast path; it then fails the
    /// operations involving each peer as for [`poll_lost`](Self::poll_lost). A peer that closed
    /// its driver cleanly (finalized) is not dead. The default reports nothing: a driver with
    /// connections learns of deaths from them.
    fn check_peers(&mut self) -> Vec<PeerId> {
        Vec::new()
    }
}

/// Parameters of [`Transport::poll_recv_split`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SplitParams {
    /// How many bytes at the start of a packet the engine needs to decide where the rest goes
    /// (the engine's chunk header).
    pub head_len: usize,
    /// Only packets of at least `head_len + min_rest` bytes are offered to
    /// [`RecvSink::place`]; smaller ones are cheaper to deliver whole.
    pub min_rest: usize,
}

/// Memory into which a driver writes the rest of a packet (see [`RecvSink::place`]).
///
/// It holds a raw pointer into a receive buffer owned by the engine; the buffer must stay
/// valid as [`Placement::new`] says, which the MPI rule ("a receive buffer stays valid until its
/// request completes") gives for free, since the request cannot complete before its data has
/// landed.
#[derive(Debug)]
pub struct Placement {
    ptr: *mut u8,
    len: usize,
    reply_first: bool,
}

impl Placement {
    /// Memory of `len` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` must be valid for writes of `len` bytes, and nothing else may read or write that
    /// memory, from the moment [`RecvSink::place`] returns this value until the driver calls
    /// [`RecvSink::placed`] for the packet, reports the peer through
    /// [`Transport::poll_lost`], or is dropped, whichever comes first.
    pub unsafe fn new(ptr: *mut u8, len: usize) -> Placement {
        Placement {
            ptr,
            len,
            reply_first: false,
        }
    }

    /// The engine has queued an answer the sender waits for (a rendezvous Cts): the driver
    /// returns from its poll as soon as it has accepted this placement, so that the answer
    /// leaves before the rest of the packet is read (at the next poll).
    pub fn reply_first(mut self) -> Placement {
        self.reply_first = true;
        self
    }

    /// Whether [`Placement::reply_first`] was asked.
    pub fn wants_reply_first(&self) -> bool {
        self.reply_first
    }

    /// Start of the memory.
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// Length of the memory in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the memory is empty (the whole rest of the packet is discarded).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// Where [`Transport::poll_recv_split`] puts incoming packets. The engine implements it on its
/// state; the driver calls it, and it must not call back into the driver.
///
/// The contract, per peer (packets of different peers interleave freely):
/// - Packets are handled in order, each exactly once, by either `deliver` (whole) or
///   `place` … `placed` (split).
/// - The driver calls `place(peer, head, total_len)` at most once per packet, only if
///   `total_len >= split.head_len + split.min_rest`; `head` is the first `split.head_len`
///   bytes of the packet. `None`: the packet is delivered whole through `deliver`, in this
///   call or a later one. `Some(p)`: the driver writes the packet's bytes
///   `head_len .. head_len + min(p.len(), total_len - head_len)` to `p` (nothing else of `p`
///   is touched), discards the rest of the packet if `p` is shorter, and then calls
///   `placed(peer, head, total_len)` exactly once, with the same `head`; this may take several
///   polls. No later packet of that peer is delivered or offered before `placed`.
/// - If the peer is lost before the packet is complete, `placed` is never called; the driver
///   stops touching `p` before [`Transport::poll_lost`] reports the peer, and the content of
///   `p` is then unspecified. The same holds when the driver is dropped.
pub trait RecvSink {
    /// A whole packet from `peer`. The slice is only valid during the call.
    fn deliver(&mut self, peer: PeerId, packet: &[u8]);

    /// The first bytes of a large packet from `peer` (of `total_len` bytes) have arrived:
    /// return where the rest goes, or `None` to have it delivered whole. The default declines.
    fn place(&mut self, peer: PeerId, head: &[u8], total_len: usize) -> Option<Placement> {
        let _ = (peer, head, total_len);
        None
    }

    /// The packet whose head was `head` has fully landed in the [`Placement`] that
    /// [`place`](Self::place) returned for it.
    fn placed(&mut self, peer: PeerId, head: &[u8], total_len: usize) {
        let _ = (peer, head, total_len);
    }
}

/// A closure is a sink that never places.
impl<F: FnMut(PeerId, &[u8])> RecvSink for F {
    fn deliver(&mut self, peer: PeerId, packet: &[u8]) {
        self(peer, packet)
    }
}

/// The sizes [`copy_bytes`] copies in pieces.
pub const LARGE_MIN: usize = 2 * LARGE_PIECE;

/// [`copy_bytes`]'s pieces for large copies.
pub const LARGE_PIECE: usize = 256 * 1024;

/// [`copy_bytes`] of `LARGE_MIN..` bytes, in pieces of 256 KiB. Why: above a threshold of its
/// own (about 1 MiB here) glibc copies with non-temporal stores, which bypass the cache: a
/// 1 MiB copy, cache-hot, ran at 59 GB/s in one `memcpy` against 69 GB/s in 256 KiB pieces (a
/// scratch C program, best of 30 rounds of 64 copies, under SCHED_FIFO); 4 MiB 60 against
/// 65, 16 MiB 26 against 43, 64 MiB 21 against 26 GB/s (best of 5 rounds of 4 copies).
///
/// # Safety
/// As [`copy_bytes`].
#[inline(never)]
unsafe fn copy_large(src: *const u8, dst: *mut u8, n: usize) {
    let mut i = 0;
    while i < n {
        let k = LARGE_PIECE.min(n - i);
        // SAFETY: inside the first `n` bytes of each (the caller's), which do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), k) };
        i += k;
    }
}

#[cfg(test)]
mod copy_tests {
    /// Large copies go in pieces: every byte lands, at piece boundaries too, and nothing
    /// around the destination is touched.
    #[test]
    fn copy_bytes_large_in_pieces() {
        let len = 3 * super::LARGE_PIECE + 100;
        let src: Vec<u8> = (0..len as u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for n in [
            super::LARGE_MIN,
            super::LARGE_MIN + 1,
            3 * super::LARGE_PIECE + 9,
        ] {
            let mut dst = vec![0xEEu8; n + 16];
            // SAFETY: both ranges are inside their vectors and distinct.
            unsafe { super::copy_bytes(src.as_ptr().add(3), dst.as_mut_ptr().add(8), n) };
            assert!(dst[8..8 + n] == src[3..3 + n], "n={n}");
            assert!(dst[..8].iter().chain(&dst[8 + n..]).all(|&b| b == 0xEE));
        }
    }

    /// Every length from 0 to 130, at several alignments: the bytes land in order, and the
    /// guard bytes around the destination are untouched.
    #[test]
    fn copy_bytes_every_small_length() {
        let src: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..=130usize {
            for (so, doff) in [(0usize, 0usize), (1, 3), (5, 8), (7, 1)] {
                let mut dst = vec![0xEEu8; 160];
                // SAFETY: both ranges are inside their vectors and distinct.
                unsafe {
                    super::copy_bytes(src.as_ptr().add(so), dst.as_mut_ptr().add(8 + doff), n)
                };
                assert_eq!(
                    &dst[8 + doff..8 + doff + n],
                    &src[so..so + n],
                    "n={n} so={so}"
                );
                assert!(
                    dst[..8 + doff].iter().all(|&b| b == 0xEE),
                    "n={n}: wrote before"
                );
                assert!(
                    dst[8 + doff + n..].iter().all(|&b| b == 0xEE),
                    "n={n}: wrote after"
                );
            }
        }
    }
}
