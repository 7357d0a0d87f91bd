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

pub mod loopback;
pub mod shm;
mod sys;

#[cfg(test)]
mod conformance;

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

    /// Deliver every complete packet that has arrived, oldest first per peer, by calling
    /// `deliver(peer, packet)`. The slice is only valid during the call. Returns how many
    /// packets were delivered. Never blocks.
    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize>;

    /// Copy `remote` from `peer`'s memory into `local` (whose lengths sum to `remote.len`).
    fn get(&mut self, peer: PeerId, remote: RemoteRegion, local: &mut [IoSliceMut<'_>])
        -> Result<()>;

    /// Whether `peer` is reachable through this driver.
    fn reaches(&self, peer: PeerId) -> bool;
}
