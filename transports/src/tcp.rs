//! The `tcp` driver: one authenticated TCP connection per pair of ranks, for jobs across hosts.
//!
//! # What it owns
//!
//! A listening socket bound to one chosen address (never the wildcard), the connections to
//! peers, an epoll instance (edge-triggered: one registration per socket, no `epoll_ctl` on the
//! hot path), and per connection a receive buffer and at most one partly written packet. It
//! knows nothing of PMI: the engine publishes [`TcpTransport::business_card`] and feeds the
//! peers' cards to [`TcpTransport::add_peer`].
//!
//! # Wire format
//!
//! After the handshake (see `handshake.rs`: mutual HMAC-SHA256 challenge-response over the
//! job's 32-byte secret, the claimed ranks checked against the registered peers), each packet
//! travels as an 8-byte frame header `[0xA7, version 1, kind, 0, len: u32 LE]` followed by `len`
//! bytes; kind 0 is a packet, kind 1 (`len` 0) says the sender is closing. Header and payload
//! leave in one `sendmsg` (a gathering write with `MSG_NOSIGNAL`). A frame with another magic,
//! version or kind, or longer than `max_packet`, closes the connection (logged; the peer is
//! then lost).
//!
//! # Backpressure
//!
//! [`Transport::try_send`] answers `WouldBlock` when the socket takes nothing. If it takes part
//! of a packet, the rest is copied into the connection's outgoing buffer and the packet counts
//! as sent (`Done`): the caller's memory is free at once. While that remainder is pending,
//! later packets to the same peer answer `WouldBlock` (nothing queues behind it, so memory stays
//! bounded by one packet per connection and "WouldBlock means nothing was taken" stays simple).
//! Polling ([`Transport::poll_recv`], [`TcpTransport::progress`]) and the next `try_send` push
//! the remainder out as the socket drains. A socket known to be full is not written again until
//! epoll says it drained: the driver never spins on a socket.
//!
//! # Connections
//!
//! Connections are opened lazily: `try_send` to a peer without a connection starts one and
//! answers `WouldBlock` until it is authenticated (so no packet ever waits on a connection that
//! might lose the tie-break below); polling drives the handshake. When both sides connect at
//! once, the connection initiated by the lower rank is kept: the acceptor decides, after
//! authentication, and says so in its verdict; the loser closes and its initiator waits for the
//! winner (and dials again if it never comes). An attempt that breaks before authentication
//! (reset, timeout: perhaps the peer was busy computing and did not poll) is retried with
//! exponential backoff; the peer is lost when the failure is definitive (connection refused,
//! no route, wrong secret, wrong rank) or has lasted `connect_timeout` over several attempts.
//! Incoming handshakes are bounded by `max_handshakes`: beyond it the oldest is evicted, so
//! silent clients cannot lock out a rank whose handshake takes one round trip.
//!
//! # Peer failure
//!
//! EOF or a reset on an authenticated connection, a failed write, or a peer that cannot be
//! connected or authenticated, makes the peer *lost*: [`Transport::poll_lost`] reports it once
//! (polling itself does not fail, so packets of other peers keep flowing), and every later
//! `try_send` to it answers [`Error::PeerLost`]. A peer that closed cleanly (its transport was
//! dropped after a goodbye frame) is not reported, but sending to it answers `PeerLost` too.
//!
//! # Receiving
//!
//! Bytes are read into a per-connection buffer and packets delivered from it without a copy.
//! With [`Transport::poll_recv_split`], a large packet's head is offered to the engine, which may
//! name the receive buffer for the rest: the driver then `readv`s the payload straight into it
//! (the bytes already buffered are copied once), with the buffer as the second iovec so that the
//! next frames are not read piecemeal.
//!
//! With at most two connections and nothing else in progress, a poll reads the sockets
//! directly instead of asking epoll first (epoll is still consulted every 64 polls, and
//! whenever a handshake, a timer or a full socket needs it): a packet then costs the same
//! system calls as a hand-written busy-polling loop. Large receive buffers (for packets bigger
//! than the 64 KiB a connection normally keeps) come from a small pool and go back to it once
//! empty.
//!
//! # What the engine does with it
//!
//! 1. `TcpTransport::listen(me, nprocs, secret, &TcpConfig::from_env()?)`, publish
//!    [`business_card`](TcpTransport::business_card) through PMI, and after the PMI barrier
//!    [`add_peer`](TcpTransport::add_peer) every rank this driver serves, before polling; with
//!    `MADMPI_TCP_CONNECT=eager` ([`TcpConfig::connect`]), call
//!    [`connect_all`](TcpTransport::connect_all) (every rank should).
//! 2. Poll with [`Transport::poll_recv_split`], its state implementing [`RecvSink`]: `place`
//!    answers for a packet that is exactly one `Data` chunk (48-byte header, then the payload)
//!    with the receive buffer at the fragment's offset; `placed` does what handling that chunk
//!    does, minus the copy.
//! 3. After polling, drain [`Transport::poll_lost`] and fail the operations involving each lost
//!    peer; `try_send` answering [`Error::PeerLost`] fails that gate.
//! 4. At finalize, after the last exchange (a barrier), drop the transport: it pushes out what
//!    it accepted (up to `linger`) and says goodbye, so peers do not report it lost.
//!
//! This module must never block outside [`TcpTransport::connect_all`] and `Drop`, and never
//! bind anything but the configured address.

#![warn(clippy::undocumented_unsafe_blocks)]

mod config;
mod handshake;
mod sys;

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

pub use config::{ConnectMode, TcpConfig};
use handshake::{Auth, Hello, Role, Transcript, Verdict, AUTH_LEN, HELLO_LEN, NONCE_LEN};

use crate::{
    Caps, Error, PeerId, RecvSink, RemoteRegion, Result, SendOutcome, SplitParams, Transport,
};

/// Bytes of a frame header.
const FRAME_HDR: usize = 8;
/// Packets up to this size (with their frame header) are gathered into one buffer and
/// written with `send` instead of `sendmsg`.
const SMALL_WRITE: usize = 2048;
/// First byte of every frame header.
const FRAME_MAGIC: u8 = 0xA7;
/// Frame kind: a packet.
const KIND_PACKET: u8 = 0;
/// Frame kind: the sender is closing (no payload).
const KIND_BYE: u8 = 1;
/// The epoll token of the listening socket.
const LISTENER: u64 = u64::MAX;
/// Initial (and minimum) receive buffer of a connection.
const RX_INITIAL: usize = 64 << 10;
/// Compact the receive buffer before reading when less than this is free at its end.
const RX_MIN_FREE: usize = 16 << 10;
/// epoll events fetched per wait.
const EVENTS: usize = 64;
/// Reads per connection per poll, at most (fairness between peers).
const READS_PER_POLL: usize = 4;
/// Connections accepted per poll, at most.
const ACCEPTS_PER_POLL: usize = 64;
/// Failed attempts to connect to a peer before it may be declared lost (with
/// `connect_timeout` elapsed since the first): one failure may be our own fault, if we did not
/// poll for a long time while the attempt was pending.
const DIAL_ATTEMPTS: u32 = 3;
/// First delay before re-dialling after a transient failure; it doubles up to [`MAX_BACKOFF`].
const BACKOFF: Duration = Duration::from_millis(20);
/// Longest delay between attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// Receive buffer of a connection in the handshake (messages are 64 and 36 bytes).
const HANDSHAKE_RX: usize = 512;
/// With at most this many connections (and nothing else going on), polling reads them
/// directly instead of asking epoll first: one system call instead of two when a packet
/// arrives, and the same one call when nothing does.
const DIRECT_POLL_MAX: usize = 2;
/// In direct polling, epoll is still consulted every this many polls (new connections).
const DIRECT_POLL_EPOLL_EVERY: u32 = 64;
/// Lines of the in-memory log kept for [`TcpTransport::take_log`].
const LOG_KEEP: usize = 256;
/// Lines written to stderr at most (a flood of bad connections must not flood the terminal).
const LOG_PRINT: usize = 1000;
/// Events a socket is registered for.
const SOCKET_EVENTS: u32 = (libc::EPOLLIN
    | libc::EPOLLOUT
    | libc::EPOLLRDHUP
    | libc::EPOLLERR
    | libc::EPOLLHUP
    | libc::EPOLLET) as u32;

/// Counters, for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// Packets accepted by `try_send`.
    pub packets_sent: u64,
    /// Packets of which the socket took only a part (the rest was buffered).
    pub partial_writes: u64,
    /// Bytes copied into outgoing buffers by partial writes.
    pub bytes_buffered: u64,
    /// `try_send` calls answered `WouldBlock`.
    pub would_block: u64,
    /// Packets delivered whole.
    pub packets_delivered: u64,
    /// Packets whose payload was read into engine memory (`place` … `placed`).
    pub packets_placed: u64,
    /// Connections authenticated (both directions).
    pub connections: u64,
    /// Connections closed for a handshake or framing failure.
    pub rejected: u64,
    /// Connections dropped by the tie-break of simultaneous connects (counted by both ends).
    pub tie_breaks: u64,
}

/// What the driver knows of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PeerState {
    /// Reachable (or not yet connected).
    Active,
    /// Failed; reported through `poll_lost`.
    Lost,
    /// Said goodbye and closed.
    Gone,
}

#[derive(Debug)]
struct PeerSlot {
    addr: Option<SocketAddr>,
    state: PeerState,
    /// The authenticated connection.
    conn: Option<usize>,
    /// Our outgoing attempt, not yet authenticated.
    dialing: Option<usize>,
    /// Do not dial before this time: our attempt lost the tie-break (the peer's connection
    /// should arrive meanwhile), or failed and we back off.
    retry_at: Option<Instant>,
    /// When the current series of attempts started (cleared on success).
    first_dial: Option<Instant>,
    /// Failed attempts in the current series.
    attempts: u32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Non-blocking `connect` in flight (connector only).
    Connecting,
    /// Our hello is sent; waiting for the peer's.
    AwaitHello,
    /// Waiting for the peer's proof (connector: with the verdict).
    AwaitAuth,
    /// Authenticated: frames flow.
    Established,
}

/// The rest of a packet being read into engine memory.
#[derive(Debug)]
struct Direct {
    ptr: *mut u8,
    /// Bytes still to write at `ptr`.
    left: usize,
    /// Bytes to drop after that (the placement was shorter than the packet).
    discard: usize,
    total: usize,
}

#[derive(Debug)]
struct Conn {
    fd: OwnedFd,
    token: u64,
    remote: String,
    role: Role,
    phase: Phase,
    /// The peer's rank: the dialled one (connector), or the claimed one after its hello.
    peer: Option<u32>,
    nonce: [u8; NONCE_LEN],
    peer_nonce: [u8; NONCE_LEN],
    deadline: Option<Instant>,
    readable: bool,
    writable: bool,
    /// In the work list.
    queued: bool,
    rx: Vec<u8>,
    /// The small receive buffer, kept while `rx` is a large one from the pool (so that going
    /// back to it allocates nothing: a stream of large packets would otherwise allocate and
    /// fault in a fresh small buffer after each).
    rx_small: Vec<u8>,
    rx_start: usize,
    rx_end: usize,
    /// The frame at `rx_start` was offered to `place` and declined.
    offered: bool,
    direct: Option<Direct>,
    /// The head of the packet in `direct`, for `placed`.
    head: Vec<u8>,
    out: Vec<u8>,
    out_off: usize,
    /// The peer sent its goodbye.
    bye: bool,
    /// The last packet with a payload was placed (not delivered whole).
    last_placed: bool,
    /// Stop reading this connection for this poll and let the engine run first: it accepted a
    /// placement asking to answer first (`Placement::reply_first`), or declined to place a
    /// packet that came right behind one it had placed (see `parse`).
    reply_first: bool,
}

impl Conn {
    fn new(fd: OwnedFd, token: u64, remote: String, role: Role, phase: Phase) -> Conn {
        Conn {
            fd,
            token,
            remote,
            role,
            phase,
            peer: None,
            nonce: [0; NONCE_LEN],
            peer_nonce: [0; NONCE_LEN],
            deadline: None,
            readable: false,
            writable: false,
            queued: false,
            rx: Vec::new(),
            rx_small: Vec::new(),
            rx_start: 0,
            rx_end: 0,
            offered: false,
            direct: None,
            head: Vec::new(),
            out: Vec::new(),
            out_off: 0,
            bye: false,
            last_placed: false,
            reply_first: false,
        }
    }

    fn out_pending(&self) -> bool {
        self.out_off < self.out.len()
    }

    fn rx_len(&self) -> usize {
        self.rx_end - self.rx_start
    }

    /// Write the pending output; `Ok(true)` when all of it is out.
    fn flush(&mut self) -> io::Result<bool> {
        while self.out_pending() {
            let rest = &self.out[self.out_off..];
            let iov = [libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            }];
            // SAFETY: the iovec describes `rest`, alive for the call.
            match unsafe { sys::sendmsg(self.fd.as_fd(), &iov) } {
                Ok(n) => {
                    self.out_off += n;
                    if n < rest.len() {
                        self.writable = false;
                        return Ok(false);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.writable = false;
                    return Ok(false);
                }
                Err(e) => return Err(e),
            }
        }
        self.out.clear();
        self.out_off = 0;
        Ok(true)
    }

    /// Make room in the receive buffer for at least `need` bytes from `rx_start`, and some
    /// free space at its end to read ahead into. A buffer too small for `need` is swapped for
    /// a large one from `pool`.
    fn rx_reserve(&mut self, need: usize, pool: &mut RxPool) {
        if self.rx_start == self.rx_end {
            self.rx_start = 0;
            self.rx_end = 0;
        }
        let fits =
            |c: &Conn| c.rx.len() - c.rx_start >= need && c.rx.len() - c.rx_end >= RX_MIN_FREE;
        if fits(self) {
            return;
        }
        if self.rx_start > 0 {
            self.rx.copy_within(self.rx_start..self.rx_end, 0);
            self.rx_end -= self.rx_start;
            self.rx_start = 0;
        }
        if fits(self) {
            return;
        }
        let required = need.max(self.rx_end + RX_MIN_FREE);
        let mut new = if required <= RX_INITIAL {
            vec![0; RX_INITIAL]
        } else {
            pool.take(required)
        };
        new[..self.rx_end].copy_from_slice(&self.rx[..self.rx_end]);
        let old = std::mem::replace(&mut self.rx, new);
        if old.len() == RX_INITIAL && self.rx_small.is_empty() {
            self.rx_small = old;
        } else {
            pool.give(old);
        }
    }

    /// Hand a large receive buffer back to `pool` once it is empty, so that a connection that
    /// once received a large packet does not keep a large buffer forever.
    fn rx_shrink(&mut self, pool: &mut RxPool) {
        if self.rx_start == self.rx_end && self.rx.len() > RX_INITIAL && self.direct.is_none() {
            self.rx_start = 0;
            self.rx_end = 0;
            let small = match std::mem::take(&mut self.rx_small) {
                b if b.len() == RX_INITIAL => b,
                _ => vec![0; RX_INITIAL],
            };
            pool.give(std::mem::replace(&mut self.rx, small));
        }
    }

    /// Read once into the receive buffer (or straight into a placement, with the buffer
    /// behind it). Returns (bytes read, bytes asked for); 0 bytes read is EOF.
    /// At most `limit` bytes go to the receive buffer.
    fn read(&mut self, limit: usize) -> io::Result<(usize, usize)> {
        let (ptr, left) = match &self.direct {
            Some(d) if d.left > 0 => (d.ptr, d.left),
            _ => (std::ptr::null_mut(), 0),
        };
        let end = self.rx.len().min(self.rx_end.saturating_add(limit));
        let free = &mut self.rx[self.rx_end..end];
        if left == 0 {
            let asked = free.len();
            let n = sys::recv(self.fd.as_fd(), free)?;
            self.rx_end += n;
            return Ok((n, asked));
        }
        let iov = [
            libc::iovec {
                iov_base: ptr.cast(),
                iov_len: left,
            },
            libc::iovec {
                iov_base: free.as_mut_ptr().cast(),
                iov_len: free.len(),
            },
        ];
        let asked = left + free.len();
        // SAFETY: the first iovec is the unwritten part of a placement, which the engine keeps
        // valid and untouched until `placed` (contract of `Placement::new`); the second is our
        // own buffer.
        let n = unsafe { sys::readv(self.fd.as_fd(), &iov) }?;
        let into_dst = n.min(left);
        let d = self.direct.as_mut().expect("checked above");
        // SAFETY: `into_dst <= left`, so the pointer stays inside the placement.
        d.ptr = unsafe { d.ptr.add(into_dst) };
        d.left -= into_dst;
        self.rx_end += n - into_dst;
        Ok((n, asked))
    }
}

/// Large receive buffers (room for a frame of `max_packet` bytes and some read-ahead), lent
/// to connections receiving a packet larger than their small buffer: memory stays bounded by
/// the connections that are receiving a large packet right now, not by all connections that
/// ever did.
#[derive(Debug)]
struct RxPool {
    size: usize,
    spare: Vec<Vec<u8>>,
}

/// Spare large buffers kept at most.
const RX_POOL_KEEP: usize = 2;

impl RxPool {
    fn take(&mut self, at_least: usize) -> Vec<u8> {
        match self.spare.pop() {
            Some(b) if b.len() >= at_least => b,
            _ => vec![0; self.size.max(at_least)],
        }
    }

    fn give(&mut self, b: Vec<u8>) {
        if b.len() == self.size && self.spare.len() < RX_POOL_KEEP {
            self.spare.push(b);
        }
    }
}

/// Encode a frame header.
#[inline]
fn frame_header(kind: u8, len: usize) -> [u8; FRAME_HDR] {
    let l = (len as u32).to_le_bytes();
    [
        FRAME_MAGIC,
        handshake::VERSION as u8,
        kind,
        0,
        l[0],
        l[1],
        l[2],
        l[3],
    ]
}

/// What a valid frame header announces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameHead {
    /// A packet of this many bytes follows.
    Packet(usize),
    /// The peer is closing.
    Bye,
}

/// Decode a frame header (no state: `parse` acts on the answer); the error says what is wrong
/// with it. A packet longer than `max_packet` is an error, so that no buffer is ever sized by a
/// length the peer made up.
pub(crate) fn decode_frame_header(
    h: &[u8; FRAME_HDR],
    max_packet: usize,
) -> std::result::Result<FrameHead, String> {
    if h[0] != FRAME_MAGIC || h[1] != handshake::VERSION as u8 || h[3] != 0 {
        return Err(format!("malformed frame header {:02x?}", &h[..4]));
    }
    let kind = h[2];
    let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
    match kind {
        KIND_BYE if len == 0 => Ok(FrameHead::Bye),
        KIND_PACKET if len <= max_packet => Ok(FrameHead::Packet(len)),
        KIND_PACKET => Err(format!(
            "frame of {len} bytes exceeds max_packet {max_packet}"
        )),
        _ => Err(format!("unknown frame kind {kind} (length {len})")),
    }
}

/// Why a connection stopped, as the engine sees it.
enum Fail {
    /// Close it, log the reason, and (if authenticated) lose the peer; an attempt of ours is
    /// retried.
    Bad(String),
    /// Like `Bad`, and an attempt of ours is not retried: the peer is lost.
    Fatal(String),
    /// Orderly end (EOF after a goodbye).
    Closed,
}

/// The `tcp` driver. See the [module documentation](self).
#[derive(Debug)]
pub struct TcpTransport {
    me: u32,
    nprocs: u32,
    secret: [u8; 32],
    cfg: TcpConfig,
    caps: Caps,
    listener: OwnedFd,
    local: SocketAddr,
    listener_ready: bool,
    epoll: sys::Epoll,
    events: Vec<sys::Event>,
    conns: Vec<Option<Conn>>,
    free: Vec<usize>,
    next_gen: u32,
    peers: Vec<PeerSlot>,
    work: Vec<usize>,
    work_spare: Vec<usize>,
    /// Connections not yet authenticated (both roles).
    handshaking: usize,
    /// Of which accepted ones (bounded by `max_handshakes`).
    accepting: usize,
    /// Peers with `retry_at` set.
    waiting: usize,
    /// The established connections.
    established: Vec<usize>,
    /// Polls since epoll was last consulted.
    polls: u32,
    pool: RxPool,
    lost: VecDeque<PeerId>,
    log: VecDeque<String>,
    printed: usize,
    iov: Vec<libc::iovec>,
    /// Where a small packet is gathered for one `send` (kept from call to call).
    small: Vec<u8>,
    stats: TcpStats,
}

// SAFETY: the raw pointers a `TcpTransport` holds are (a) iovecs, only alive during a
// `try_send` call (the vector is cleared before it returns), and (b) placements, which point
// into engine receive buffers the engine keeps valid for the driver (contract of
// `Placement::new`) whichever thread polls. The transport is used by one thread at a time.
unsafe impl Send for TcpTransport {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

impl TcpTransport {
    /// Listen on the configured address (port 0: ephemeral) for rank `me` of `nprocs`, whose
    /// connections prove knowledge of `secret`.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a bad configuration, `me >= nprocs`, or a wildcard address;
    /// [`Error::Io`] if the socket cannot be set up.
    pub fn listen(
        me: PeerId,
        nprocs: u32,
        secret: [u8; 32],
        cfg: &TcpConfig,
    ) -> Result<TcpTransport> {
        cfg.validate()?;
        if me.0 >= nprocs {
            return Err(Error::Invalid(format!(
                "tcp: rank {} of a job of {nprocs}",
                me.0
            )));
        }
        let ip = cfg.address();
        if ip.is_unspecified() {
            return Err(Error::Invalid(format!(
                "tcp: refusing to listen on the wildcard address {ip}: name an interface or \
                 address with MADMPI_TCP_IF"
            )));
        }
        let addr = SocketAddr::new(ip, cfg.port);
        let fd = sys::tcp_socket(&addr).map_err(io_err("tcp: creating the listening socket"))?;
        let b = fd.as_fd();
        if cfg.port != 0 {
            sys::set_int(b, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1)
                .map_err(io_err("tcp: SO_REUSEADDR"))?;
        }
        // Accepted sockets inherit the buffer sizes; the receive buffer must be set before
        // `listen` for the window scale of the handshake to allow it.
        set_buffers(b, cfg)?;
        sys::bind(b, &addr).map_err(io_err(format!("tcp: binding {addr}")))?;
        sys::listen(b, 1024).map_err(io_err(format!("tcp: listening on {addr}")))?;
        let local = sys::local_addr(b).map_err(io_err("tcp: getsockname"))?;
        let epoll = sys::Epoll::new().map_err(io_err("tcp: epoll_create"))?;
        epoll
            .add(b, LISTENER, (libc::EPOLLIN | libc::EPOLLET) as u32)
            .map_err(io_err("tcp: epoll_ctl"))?;
        let mut probe = [0u8; 8];
        sys::random(&mut probe).map_err(io_err("tcp: getrandom"))?;
        let peers = (0..nprocs)
            .map(|_| PeerSlot {
                addr: None,
                state: PeerState::Active,
                conn: None,
                dialing: None,
                retry_at: None,
                first_dial: None,
                attempts: 0,
            })
            .collect();
        Ok(TcpTransport {
            me: me.0,
            nprocs,
            secret,
            caps: Caps {
                name: "tcp",
                latency_ns: 15_000,
                bandwidth_mbps: 1_200,
                max_packet: cfg.max_packet,
                eager_threshold: cfg.eager_threshold,
                max_iov: crate::sys::IOV_MAX,
                can_get: false,
                preference: 40,
                // Every packet is a system call: aggregate up to the largest one.
                aggreg_max: cfg.max_packet,
                solo_min: usize::MAX,
                registers_memory: false,
            },
            cfg: cfg.clone(),
            listener: fd,
            local,
            // A connection may have arrived between `listen` and the registration.
            listener_ready: true,
            epoll,
            events: vec![sys::empty_event(); EVENTS],
            conns: Vec::new(),
            free: Vec::new(),
            next_gen: 1,
            peers,
            work: Vec::new(),
            work_spare: Vec::new(),
            handshaking: 0,
            accepting: 0,
            waiting: 0,
            established: Vec::new(),
            polls: 0,
            pool: RxPool {
                size: FRAME_HDR + cfg.max_packet + RX_MIN_FREE,
                spare: Vec::new(),
            },
            lost: VecDeque::new(),
            log: VecDeque::new(),
            printed: 0,
            iov: Vec::new(),
            small: Vec::with_capacity(SMALL_WRITE),
            stats: TcpStats::default(),
        })
    }

    /// The address peers connect to, as text (`127.0.0.1:45678`, `[::1]:45678`): what the
    /// engine publishes through PMI for [`add_peer`](Self::add_peer) on the other ranks.
    pub fn business_card(&self) -> String {
        self.local.to_string()
    }

    /// The address this transport listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// This transport's rank.
    pub fn rank(&self) -> PeerId {
        PeerId(self.me)
    }

    /// Record `peer`'s business card. Connections are made lazily (first `try_send`, or the
    /// peer connects), or by [`connect_all`](Self::connect_all). A connection that claims a
    /// rank not added here is refused, so the engine adds every peer before it polls.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] for a rank outside the job, our own rank, or a card that is not a
    /// socket address.
    pub fn add_peer(&mut self, peer: PeerId, card: &str) -> Result<()> {
        if peer.0 >= self.nprocs || peer.0 == self.me {
            return Err(Error::Invalid(format!(
                "tcp: cannot add rank {} as a peer of rank {} in a job of {}",
                peer.0, self.me, self.nprocs
            )));
        }
        let addr: SocketAddr = card.trim().parse().map_err(|_| {
            Error::Invalid(format!(
                "tcp: business card {card:?} of rank {} is not an address",
                peer.0
            ))
        })?;
        if addr.ip().is_unspecified() || addr.port() == 0 {
            return Err(Error::Invalid(format!(
                "tcp: business card {card:?} of rank {} is not a reachable address",
                peer.0
            )));
        }
        self.peers[peer.0 as usize].addr = Some(addr);
        Ok(())
    }

    /// Connect to every added peer now and wait until all connections are authenticated.
    /// Safe whether or not the peers call it too: this rank dials the higher ranks at once and
    /// the lower ones only if their connection has not arrived after a grace period, and the
    /// tie-break settles simultaneous attempts. Packets arriving meanwhile stay buffered for
    /// the next poll.
    ///
    /// # Errors
    ///
    /// [`Error::PeerLost`] if a peer cannot be reached or authenticated, [`Error::Io`]
    /// (`TimedOut`) if connections are missing after `connect_timeout`.
    pub fn connect_all(&mut self) -> Result<()> {
        let start = Instant::now();
        let deadline = start + self.cfg.connect_timeout;
        let grace = (self.cfg.connect_timeout / 4).min(Duration::from_secs(1));
        let mut lower_dialled = false;
        for p in self.me + 1..self.nprocs {
            self.dial_if_idle(p);
        }
        loop {
            let mut missing = Vec::new();
            for (p, s) in self.peers.iter().enumerate() {
                if s.addr.is_none() {
                    continue;
                }
                match s.state {
                    PeerState::Active if s.conn.is_none() => missing.push(p as u32),
                    PeerState::Active => {}
                    _ => return Err(Error::PeerLost(PeerId(p as u32))),
                }
            }
            if missing.is_empty() {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Io {
                    what: format!(
                        "tcp: rank {} could not connect to ranks {missing:?} within {:?}",
                        self.me, self.cfg.connect_timeout
                    ),
                    source: io::ErrorKind::TimedOut.into(),
                });
            }
            if !lower_dialled && now >= start + grace {
                lower_dialled = true;
                for p in 0..self.me {
                    self.dial_if_idle(p);
                }
            }
            self.pump(None, 10)?;
        }
    }

    /// Push pending output and advance connection handshakes, delivering nothing (packets
    /// that arrive stay buffered for the next poll). Never blocks.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if epoll itself fails.
    pub fn progress(&mut self) -> Result<()> {
        self.pump(None, 0).map(drop)
    }

    /// Every peer lost since the last call (each reported once): the same reports as
    /// [`Transport::poll_lost`], all at once.
    pub fn lost_peers(&mut self) -> Vec<PeerId> {
        self.lost.drain(..).collect()
    }

    /// Whether an authenticated connection to `peer` exists.
    pub fn is_connected(&self, peer: PeerId) -> bool {
        self.peers
            .get(peer.0 as usize)
            .is_some_and(|s| s.conn.is_some())
    }

    /// Whether some accepted packet is still partly in an outgoing buffer.
    pub fn has_pending_output(&self) -> bool {
        self.conns.iter().flatten().any(Conn::out_pending)
    }

    /// Counters since creation.
    pub fn stats(&self) -> TcpStats {
        self.stats
    }

    /// The lines logged since the last call (the same lines go to stderr): rejected
    /// connections with the peer address and reason, lost peers.
    pub fn take_log(&mut self) -> Vec<String> {
        self.log.drain(..).collect()
    }

    // ------------------------------------------------------------ internals: bookkeeping

    fn log(&mut self, msg: String) {
        let line = format!("madmpi tcp (rank {}): {msg}", self.me);
        if self.printed < LOG_PRINT {
            eprintln!("{line}");
            self.printed += 1;
            if self.printed == LOG_PRINT {
                eprintln!(
                    "madmpi tcp (rank {}): too many messages, not printing more",
                    self.me
                );
            }
        }
        if self.log.len() == LOG_KEEP {
            self.log.pop_front();
        }
        self.log.push_back(line);
    }

    fn token_of(idx: usize, gen: u32) -> u64 {
        (u64::from(gen) << 32) | idx as u64
    }

    /// The connection a token names, if it is still the same one.
    fn index_of(&self, token: u64) -> Option<usize> {
        let idx = (token & 0xffff_ffff) as usize;
        match self.conns.get(idx) {
            Some(Some(c)) if c.token == token => Some(idx),
            _ => None,
        }
    }

    fn insert(&mut self, fd: OwnedFd, remote: String, role: Role, phase: Phase) -> Result<usize> {
        let idx = self.free.pop().unwrap_or_else(|| {
            self.conns.push(None);
            self.conns.len() - 1
        });
        let gen = self.next_gen;
        self.next_gen = self.next_gen.wrapping_add(1).max(1);
        let token = TcpTransport::token_of(idx, gen);
        if let Err(e) = self.epoll.add(fd.as_fd(), token, SOCKET_EVENTS) {
            self.free.push(idx);
            return Err(Error::Io {
                what: "tcp: epoll_ctl".into(),
                source: e,
            });
        }
        self.conns[idx] = Some(Conn::new(fd, token, remote, role, phase));
        self.handshaking += 1;
        if role == Role::Acceptor {
            self.accepting += 1;
        }
        Ok(idx)
    }

    fn conn(&mut self, idx: usize) -> &mut Conn {
        self.conns[idx].as_mut().expect("live connection")
    }

    fn enqueue(&mut self, idx: usize) {
        let c = self.conn(idx);
        if !c.queued {
            c.queued = true;
            self.work.push(idx);
        }
    }

    /// Close a connection and forget every reference to it.
    fn close(&mut self, idx: usize) {
        let Some(c) = self.conns[idx].take() else {
            return;
        };
        let _ = self.epoll.delete(c.fd.as_fd());
        if c.phase != Phase::Established {
            self.handshaking -= 1;
            if c.role == Role::Acceptor {
                self.accepting -= 1;
            }
        } else {
            self.established.retain(|&i| i != idx);
        }
        if let Some(p) = c.peer {
            let s = &mut self.peers[p as usize];
            if s.conn == Some(idx) {
                s.conn = None;
            }
            if s.dialing == Some(idx) {
                s.dialing = None;
            }
        }
        self.free.push(idx);
        drop(c);
    }

    /// Close a connection for a protocol failure, with a log line.
    fn reject(&mut self, idx: usize, reason: &str) {
        let c = self.conn(idx);
        let what = match (c.role, c.peer, c.phase) {
            (_, Some(p), Phase::Established) => format!("connection with rank {p}"),
            (Role::Connector, Some(p), _) => format!("connection to rank {p}"),
            (Role::Acceptor, Some(p), _) => format!("connection claiming rank {p}"),
            _ => "connection".to_string(),
        };
        let line = format!("closed {what} ({}): {reason}", c.remote);
        self.stats.rejected += 1;
        self.log(line);
        self.close(idx);
    }

    /// `peer` failed: close its connections, report it once.
    fn lose(&mut self, peer: u32, reason: &str) {
        let s = &mut self.peers[peer as usize];
        if s.state != PeerState::Active {
            return;
        }
        s.state = PeerState::Lost;
        if s.retry_at.take().is_some() {
            self.waiting -= 1;
        }
        let conns = [s.conn, s.dialing];
        for idx in conns.into_iter().flatten() {
            self.close(idx);
        }
        self.lost.push_back(PeerId(peer));
        self.log(format!("lost rank {peer}: {reason}"));
    }

    /// Close a connection that failed; if it was `peer`'s authenticated one, or our attempt to
    /// reach `peer` failed for good, `peer` is lost.
    fn fail(&mut self, idx: usize, fail: Fail) {
        let c = self.conn(idx);
        let (peer, phase, role) = (c.peer, c.phase, c.role);
        let (reason, fatal) = match fail {
            Fail::Closed => {
                if let Some(p) = peer {
                    let s = &mut self.peers[p as usize];
                    if s.conn == Some(idx) && s.state == PeerState::Active {
                        s.state = PeerState::Gone;
                    }
                }
                return self.close(idx);
            }
            Fail::Bad(r) => (r, false),
            Fail::Fatal(r) => (r, true),
        };
        if phase == Phase::Established {
            let remote = self.conn(idx).remote.clone();
            let p = peer.expect("established connections know their peer");
            self.close(idx);
            self.lose(p, &format!("{reason} ({remote})"));
        } else if role == Role::Connector {
            let p = peer.expect("connectors know their peer");
            self.reject(idx, &reason);
            self.dial_failed(p, &reason, fatal);
        } else {
            self.reject(idx, &reason);
        }
    }

    /// Our attempt to reach `peer` failed before authentication: back off and try again, or
    /// give up if the failure is definitive (refused, wrong secret) or has lasted.
    fn dial_failed(&mut self, peer: u32, reason: &str, fatal: bool) {
        let now = Instant::now();
        let timeout = self.cfg.connect_timeout;
        let s = &mut self.peers[peer as usize];
        s.attempts += 1;
        let attempts = s.attempts;
        let since = *s.first_dial.get_or_insert(now);
        if fatal || (attempts >= DIAL_ATTEMPTS && now >= since + timeout) {
            return self.lose(
                peer,
                &format!("cannot connect ({attempts} attempts), the last: {reason}"),
            );
        }
        if s.conn.is_none() && s.retry_at.is_none() && s.state == PeerState::Active {
            let backoff = BACKOFF
                .saturating_mul(1 << attempts.min(10))
                .min(MAX_BACKOFF);
            s.retry_at = Some(now + backoff);
            self.waiting += 1;
        }
    }

    // ------------------------------------------------------------ internals: connecting

    /// Start connecting to `peer` unless a connection exists, is being made, or is expected.
    fn dial_if_idle(&mut self, peer: u32) {
        let s = &self.peers[peer as usize];
        if s.state != PeerState::Active
            || s.conn.is_some()
            || s.dialing.is_some()
            || s.retry_at.is_some()
        {
            return;
        }
        let Some(addr) = s.addr else { return };
        self.peers[peer as usize]
            .first_dial
            .get_or_insert_with(Instant::now);
        if let Err(reason) = self.dial(peer, addr) {
            self.lose(peer, &format!("cannot connect to {addr}: {reason}"));
        }
    }

    fn dial(&mut self, peer: u32, addr: SocketAddr) -> std::result::Result<(), String> {
        let fd = sys::tcp_socket(&addr).map_err(|e| e.to_string())?;
        let b = fd.as_fd();
        set_buffers(b, &self.cfg).map_err(|e| e.to_string())?;
        let _ = sys::set_int(b, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        // Leave from the configured address, so that peers see (and routes use) the chosen
        // interface; the port is picked at connect time.
        let ip = self.local.ip();
        if ip.is_ipv4() == addr.is_ipv4() {
            let _ = sys::set_int(b, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1);
            sys::bind(b, &SocketAddr::new(ip, 0)).map_err(|e| format!("binding {ip}: {e}"))?;
        }
        let done = sys::connect(b, &addr).map_err(|e| e.to_string())?;
        let idx = self
            .insert(fd, addr.to_string(), Role::Connector, Phase::Connecting)
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + self.cfg.connect_timeout;
        let c = self.conn(idx);
        c.peer = Some(peer);
        c.deadline = Some(deadline);
        self.peers[peer as usize].dialing = Some(idx);
        if done {
            self.conn(idx).writable = true;
            self.enqueue(idx);
        }
        Ok(())
    }

    fn accept(&mut self) -> Result<()> {
        for _ in 0..ACCEPTS_PER_POLL {
            let (fd, remote) = match sys::accept(self.listener.as_fd()) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    self.listener_ready = false;
                    return Ok(());
                }
                // The connection died in the queue, or we are out of descriptors for now:
                // neither stops the transport.
                Err(e) => {
                    self.log(format!("accept failed: {e}"));
                    self.listener_ready = false;
                    return Ok(());
                }
            };
            let remote = remote.map_or_else(|| "?".to_string(), |a| a.to_string());
            if self.accepting >= self.cfg.max_handshakes {
                // Evict the oldest: a legitimate handshake completes in a round trip, so the
                // oldest is the likeliest to be a client that will never finish.
                let oldest = self
                    .conns
                    .iter()
                    .enumerate()
                    .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
                    .filter(|(_, c)| c.role == Role::Acceptor && c.phase != Phase::Established)
                    .min_by_key(|(_, c)| c.deadline)
                    .map(|(i, _)| i);
                if let Some(i) = oldest {
                    let msg = format!(
                        "evicted: {} handshakes in progress (the limit)",
                        self.accepting
                    );
                    self.reject(i, &msg);
                }
            }
            let _ = sys::set_int(fd.as_fd(), libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
            let idx = self.insert(fd, remote, Role::Acceptor, Phase::AwaitHello)?;
            let deadline = Instant::now() + self.cfg.handshake_timeout;
            self.conn(idx).deadline = Some(deadline);
            self.conn(idx).writable = true;
            if let Err(reason) = self.send_hello(idx) {
                self.reject(idx, &reason);
            }
        }
        Ok(())
    }

    fn send_hello(&mut self, idx: usize) -> std::result::Result<(), String> {
        let mut nonce = [0u8; NONCE_LEN];
        sys::random(&mut nonce).map_err(|e| format!("getrandom: {e}"))?;
        let (me, nprocs, max_packet) = (self.me, self.nprocs, self.cfg.max_packet as u32);
        let c = self.conn(idx);
        c.nonce = nonce;
        let hello = Hello {
            role: c.role,
            nprocs,
            rank: me,
            target: match c.role {
                Role::Connector => c.peer.expect("connectors know their peer"),
                Role::Acceptor => handshake::ANY_RANK,
            },
            max_packet,
            nonce,
        };
        c.out.extend_from_slice(&hello.encode());
        c.flush()
            .map(drop)
            .map_err(|e| format!("sending hello: {e}"))
    }

    /// Advance a connection that is not established yet as far as the bytes at hand allow.
    fn handshake(&mut self, idx: usize) -> std::result::Result<(), Fail> {
        let hs_timeout = self.cfg.handshake_timeout;
        let c = self.conn(idx);
        if c.phase == Phase::Connecting {
            if !c.writable && !c.readable {
                return Ok(());
            }
            match sys::take_error(c.fd.as_fd()) {
                Ok(None) => {}
                Ok(Some(e)) | Err(e) => {
                    let msg = format!("connect: {e}");
                    // Nobody listens there, or no route: retrying will not help.
                    return Err(match e.raw_os_error() {
                        Some(
                            libc::ECONNREFUSED
                            | libc::ENETUNREACH
                            | libc::EHOSTUNREACH
                            | libc::EADDRNOTAVAIL,
                        ) => Fail::Fatal(msg),
                        _ => Fail::Bad(msg),
                    });
                }
            }
            c.phase = Phase::AwaitHello;
            c.writable = true;
            c.deadline = Some(Instant::now() + hs_timeout);
            self.send_hello(idx).map_err(Fail::Bad)?;
        }
        let c = self.conn(idx);
        if c.writable && c.out_pending() {
            c.flush().map_err(|e| Fail::Bad(format!("write: {e}")))?;
        }
        loop {
            // Every complete message first: what follows the handshake may be frames, which
            // stay in the buffer for the established connection.
            loop {
                let c = self.conn(idx);
                let need = match c.phase {
                    Phase::AwaitHello => HELLO_LEN,
                    Phase::AwaitAuth => AUTH_LEN,
                    _ => return Ok(()),
                };
                if c.rx_len() < need {
                    // Do not wait for a whole hello to turn away something else.
                    let have = &c.rx[c.rx_start..c.rx_end];
                    if c.phase == Phase::AwaitHello && !handshake::magic_prefix_ok(have) {
                        return Err(Fail::Fatal("not a madmpi TCP hello (bad magic)".into()));
                    }
                    break;
                }
                let msg = c.rx[c.rx_start..c.rx_start + need].to_vec();
                c.rx_start += need;
                match c.phase {
                    Phase::AwaitHello => self.on_hello(idx, &msg)?,
                    _ => self.on_auth(idx, &msg)?,
                }
                if self.conns[idx].is_none() {
                    return Ok(());
                }
            }
            let c = self.conn(idx);
            if !c.readable {
                return Ok(());
            }
            // A small buffer until authenticated: the messages are short, and a flood of
            // handshakes must not cost a full receive buffer each.
            if c.rx.len() < HANDSHAKE_RX {
                c.rx.resize(HANDSHAKE_RX, 0);
            }
            if c.rx_start > 0 {
                c.rx.copy_within(c.rx_start..c.rx_end, 0);
                c.rx_end -= c.rx_start;
                c.rx_start = 0;
            }
            match c.read(usize::MAX) {
                Ok((0, _)) => {
                    return Err(Fail::Bad(format!(
                        "connection closed during the handshake ({} bytes received)",
                        c.rx_len()
                    )))
                }
                Ok((n, asked)) => {
                    if n < asked {
                        c.readable = false;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.readable = false,
                Err(e) => return Err(Fail::Bad(format!("read during the handshake: {e}"))),
            }
        }
    }

    fn on_hello(&mut self, idx: usize, msg: &[u8]) -> std::result::Result<(), Fail> {
        let h = Hello::decode(msg.try_into().expect("HELLO_LEN bytes")).map_err(Fail::Fatal)?;
        let (me, nprocs, max_packet) = (self.me, self.nprocs, self.cfg.max_packet as u32);
        let c = self.conn(idx);
        let expected_role = match c.role {
            Role::Connector => Role::Acceptor,
            Role::Acceptor => Role::Connector,
        };
        if h.role != expected_role {
            return Err(Fail::Fatal("both ends claim the same role".into()));
        }
        if h.nprocs != nprocs {
            return Err(Fail::Fatal(format!(
                "peer is in a job of {} ranks, this one has {nprocs}",
                h.nprocs
            )));
        }
        if h.max_packet != max_packet {
            return Err(Fail::Fatal(format!(
                "peer uses max_packet {}, this rank {max_packet} (MADMPI_TCP_MAX_PACKET must \
                 match across the job)",
                h.max_packet
            )));
        }
        match c.role {
            Role::Connector => {
                let p = c.peer.expect("connectors know their peer");
                if h.rank != p || h.target != handshake::ANY_RANK {
                    return Err(Fail::Fatal(format!(
                        "the process at this address is rank {}, not rank {p}",
                        h.rank
                    )));
                }
                c.peer_nonce = h.nonce;
                let t = Transcript {
                    nonce_c: c.nonce,
                    nonce_a: h.nonce,
                    rank_c: me,
                    rank_a: p,
                    nprocs,
                };
                let mac = t.mac(&self.secret, Role::Connector, Verdict::Accept);
                let c = self.conn(idx);
                c.out.extend_from_slice(
                    &Auth {
                        verdict: Verdict::Accept,
                        mac,
                    }
                    .encode(),
                );
                c.phase = Phase::AwaitAuth;
                c.flush()
                    .map_err(|e| Fail::Bad(format!("sending proof: {e}")))?;
            }
            Role::Acceptor => {
                if h.target != me {
                    return Err(Fail::Fatal(format!(
                        "client wants rank {}, this is rank {me}",
                        h.target
                    )));
                }
                if h.rank >= nprocs || h.rank == me {
                    return Err(Fail::Fatal(format!(
                        "client claims invalid rank {}",
                        h.rank
                    )));
                }
                if self.peers[h.rank as usize].addr.is_none() {
                    return Err(Fail::Fatal(format!(
                        "client claims rank {}, which is not a registered peer",
                        h.rank
                    )));
                }
                let c = self.conn(idx);
                c.peer = Some(h.rank);
                c.peer_nonce = h.nonce;
                c.phase = Phase::AwaitAuth;
            }
        }
        Ok(())
    }

    fn on_auth(&mut self, idx: usize, msg: &[u8]) -> std::result::Result<(), Fail> {
        let a = Auth::decode(msg.try_into().expect("AUTH_LEN bytes")).map_err(Fail::Bad)?;
        let (me, nprocs) = (self.me, self.nprocs);
        let c = self.conn(idx);
        let p = c.peer.expect("set by the hello");
        let t = match c.role {
            Role::Connector => Transcript {
                nonce_c: c.nonce,
                nonce_a: c.peer_nonce,
                rank_c: me,
                rank_a: p,
                nprocs,
            },
            Role::Acceptor => Transcript {
                nonce_c: c.peer_nonce,
                nonce_a: c.nonce,
                rank_c: p,
                rank_a: me,
                nprocs,
            },
        };
        match c.role {
            Role::Acceptor => {
                if a.verdict != Verdict::Accept || !t.verify(&self.secret, Role::Connector, &a) {
                    return Err(Fail::Bad(
                        "authentication failed (wrong job secret?)".into(),
                    ));
                }
                let s = &self.peers[p as usize];
                // Only the tie-break may reject a connection from a higher rank while ours is
                // pending or even established already (its handshake raced ours); a second
                // connection in any other situation is a hijack attempt (or a bug).
                let ours = |i: usize| {
                    self.conns[i]
                        .as_ref()
                        .is_some_and(|c| c.role == Role::Connector)
                };
                let verdict = if s.state != PeerState::Active {
                    Verdict::Refused
                } else if let Some(i) = s.conn {
                    if ours(i) && p > me {
                        Verdict::Superseded
                    } else {
                        Verdict::Duplicate
                    }
                } else if s.dialing.is_some() && p > me {
                    Verdict::Superseded
                } else {
                    Verdict::Accept
                };
                let mac = t.mac(&self.secret, Role::Acceptor, verdict);
                let c = self.conn(idx);
                c.out.extend_from_slice(&Auth { verdict, mac }.encode());
                let sent = c.flush();
                match verdict {
                    Verdict::Accept => {
                        sent.map_err(|e| Fail::Bad(format!("sending proof: {e}")))?;
                        self.establish(idx, p);
                    }
                    // The connector knows why; nothing to log for a tie-break.
                    Verdict::Superseded => {
                        self.stats.tie_breaks += 1;
                        self.close(idx)
                    }
                    Verdict::Duplicate => {
                        self.reject(idx, &format!("rank {p} is already connected"))
                    }
                    Verdict::Refused => self.reject(idx, &format!("rank {p} was lost or has left")),
                }
            }
            Role::Connector => {
                if !t.verify(&self.secret, Role::Acceptor, &a) {
                    return Err(Fail::Fatal(
                        "peer failed authentication (wrong job secret, or not our peer)".into(),
                    ));
                }
                match a.verdict {
                    Verdict::Accept if self.peers[p as usize].conn.is_none() => {
                        self.establish(idx, p)
                    }
                    Verdict::Accept => {
                        // Cannot happen with a correct peer: it accepted a second connection.
                        self.reject(idx, "peer accepted a second connection; keeping the first");
                    }
                    Verdict::Superseded => {
                        self.stats.tie_breaks += 1;
                        self.close(idx);
                        let s = &mut self.peers[p as usize];
                        if s.conn.is_none() && s.retry_at.is_none() && s.state == PeerState::Active
                        {
                            s.retry_at = Some(Instant::now() + self.cfg.connect_timeout);
                            self.waiting += 1;
                        }
                    }
                    // We have a connection already (it cannot happen with a correct peer,
                    // but nothing is lost): drop this one.
                    Verdict::Duplicate if self.peers[p as usize].conn.is_some() => {
                        self.reject(idx, "peer already has a connection with us");
                    }
                    Verdict::Duplicate | Verdict::Refused => {
                        self.reject(
                            idx,
                            &format!("peer refused the connection ({:?})", a.verdict),
                        );
                        self.lose(p, "it refused our connection");
                    }
                }
            }
        }
        Ok(())
    }

    fn establish(&mut self, idx: usize, peer: u32) {
        self.handshaking -= 1;
        self.stats.connections += 1;
        if self.conn(idx).role == Role::Acceptor {
            self.accepting -= 1;
        }
        self.established.push(idx);
        let c = self.conn(idx);
        c.phase = Phase::Established;
        c.deadline = None;
        let leftover = c.rx_len() > 0;
        let s = &mut self.peers[peer as usize];
        s.conn = Some(idx);
        if s.dialing == Some(idx) {
            s.dialing = None;
        }
        s.attempts = 0;
        s.first_dial = None;
        if s.retry_at.take().is_some() {
            self.waiting -= 1;
        }
        if leftover {
            self.enqueue(idx);
        }
    }

    /// Close handshakes past their deadline; re-dial peers whose expected connection never came.
    fn check_deadlines(&mut self) {
        let now = Instant::now();
        for idx in 0..self.conns.len() {
            let Some(c) = &self.conns[idx] else { continue };
            if c.phase == Phase::Established || !c.deadline.is_some_and(|d| d <= now) {
                continue;
            }
            let what = if c.phase == Phase::Connecting {
                "connect timed out"
            } else {
                "handshake timed out"
            };
            self.fail(idx, Fail::Bad(what.into()));
        }
        if self.waiting > 0 {
            for p in 0..self.nprocs {
                let s = &mut self.peers[p as usize];
                if s.retry_at.is_some_and(|t| now >= t) {
                    s.retry_at = None;
                    self.waiting -= 1;
                    self.dial_if_idle(p);
                }
            }
        }
    }

    // ------------------------------------------------------------ internals: the poll loop

    /// Wait up to `timeout_ms` for events, then advance every connection with work: accept,
    /// handshakes, pending output, and (with a sink) incoming frames. Returns the packets
    /// delivered or placed.
    fn pump(
        &mut self,
        mut sink: Option<(SplitParams, &mut dyn RecvSink)>,
        timeout_ms: i32,
    ) -> Result<usize> {
        if timeout_ms == 0 {
            if let Some((split, s)) = &mut sink {
                if let Some(n) = self.direct_poll(*split, &mut **s) {
                    return Ok(n);
                }
            }
        }
        self.polls = 0;
        let n = self
            .epoll
            .wait(&mut self.events, timeout_ms)
            .map_err(io_err("tcp: epoll_wait"))?;
        for i in 0..n {
            let ev = self.events[i];
            let (bits, token) = (ev.events, ev.u64);
            if token == LISTENER {
                self.listener_ready = true;
                continue;
            }
            let Some(idx) = self.index_of(token) else {
                continue;
            };
            let c = self.conn(idx);
            let err = bits & (libc::EPOLLERR | libc::EPOLLHUP) as u32 != 0;
            if err || bits & (libc::EPOLLIN | libc::EPOLLRDHUP) as u32 != 0 {
                c.readable = true;
            }
            if err || bits & libc::EPOLLOUT as u32 != 0 {
                c.writable = true;
            }
            self.enqueue(idx);
        }
        if self.listener_ready {
            self.accept()?;
        }
        let mut count = 0;
        if !self.work.is_empty() {
            let delivering = sink.is_some();
            let mut work = std::mem::take(&mut self.work);
            std::mem::swap(&mut self.work, &mut self.work_spare);
            for &idx in &work {
                let Some(c) = self.conns[idx].as_mut() else {
                    continue;
                };
                c.queued = false;
                let r = if c.phase != Phase::Established {
                    self.handshake(idx)
                } else {
                    match &mut sink {
                        Some((split, s)) => self.service(idx, Some((*split, &mut **s)), &mut count),
                        None => self.service(idx, None, &mut count),
                    }
                };
                if let Err(f) = r {
                    if self.conns[idx].is_some() {
                        self.fail(idx, f);
                    }
                    continue;
                }
                if let Some(c) = self.conns[idx].as_ref() {
                    // Still readable (stopped early for fairness), or holding frames no sink has
                    // seen yet (a partial frame waits for the next event instead).
                    let more = c.phase == Phase::Established
                        && (c.readable
                            || (!delivering && c.rx_len() > 0)
                            || (c.writable && c.out_pending()));
                    if more {
                        self.enqueue(idx);
                    }
                }
            }
            work.clear();
            self.work_spare = work;
        }
        if self.handshaking > 0 || self.waiting > 0 {
            self.check_deadlines();
        }
        Ok(count)
    }

    /// The fast path of a poll with few connections and nothing else to do: read each
    /// connection directly. `None` when the full path is needed (then epoll is consulted:
    /// new connections, handshakes, timers, sockets that were full).
    fn direct_poll(&mut self, split: SplitParams, sink: &mut dyn RecvSink) -> Option<usize> {
        self.polls += 1;
        if self.polls >= DIRECT_POLL_EPOLL_EVERY
            || self.established.len() > DIRECT_POLL_MAX
            || self.handshaking > 0
            || self.waiting > 0
            || self.listener_ready
            || !self.work.is_empty()
        {
            return None;
        }
        let quiet = |c: &Option<Conn>| c.as_ref().is_some_and(|c| c.writable && !c.out_pending());
        if !self.established.iter().all(|&i| quiet(&self.conns[i])) {
            return None;
        }
        let mut count = 0;
        for k in 0..self.established.len() {
            let Some(&idx) = self.established.get(k) else {
                break;
            };
            // Edge-triggered epoll will still report what we read here; the next full poll
            // then finds the socket empty, which is harmless.
            self.conn(idx).readable = true;
            if let Err(f) = self.service(idx, Some((split, &mut *sink)), &mut count) {
                self.fail(idx, f);
                return Some(count);
            }
            if self.conns[idx].as_ref().is_some_and(|c| c.readable) {
                self.enqueue(idx);
            }
        }
        Some(count)
    }

    /// Pending output, then (with a sink) incoming frames of an established connection.
    fn service(
        &mut self,
        idx: usize,
        sink: Option<(SplitParams, &mut dyn RecvSink)>,
        count: &mut usize,
    ) -> std::result::Result<(), Fail> {
        let max_packet = self.cfg.max_packet;
        let c = self.conns[idx].as_mut().expect("live connection");
        let pool = &mut self.pool;
        if c.writable && c.out_pending() {
            if let Err(e) = c.flush() {
                return Err(Fail::Bad(format!("write: {e}")));
            }
        }
        let Some((split, sink)) = sink else {
            return Ok(());
        };
        let peer = c.peer.expect("established connections know their peer");
        let mut stats = (0u64, 0u64);
        let mut parse = |c: &mut Conn, pool: &mut RxPool| {
            parse(c, pool, peer, max_packet, split, &mut *sink, &mut stats)
        };
        let r = (|| {
            parse(c, pool)?;
            for _ in 0..READS_PER_POLL {
                if c.reply_first {
                    break;
                }
                if !c.readable {
                    break;
                }
                c.rx_reserve(0, pool);
                // While placing a packet, and after one, the next is likely large too: read
                // only up to its head, so that its payload goes straight to where the engine
                // wants it instead of through our buffer (one more system call per large
                // packet, one copy of up to 64 KiB less).
                let limit = if c.direct.is_some() || (c.last_placed && c.rx_len() == 0) {
                    FRAME_HDR + split.head_len
                } else {
                    usize::MAX
                };
                match c.read(limit) {
                    Ok((0, _)) => {
                        parse(c, pool)?;
                        return Err(if c.bye {
                            Fail::Closed
                        } else if c.rx_len() > 0 || c.direct.is_some() {
                            Fail::Bad("connection closed in the middle of a packet".into())
                        } else {
                            Fail::Bad("connection closed by the peer".into())
                        });
                    }
                    Ok((n, asked)) => {
                        if n < asked {
                            c.readable = false;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => c.readable = false,
                    // After a goodbye, a reset (our late packet hit a closed socket) is the
                    // same orderly end.
                    Err(_) if c.bye => return Err(Fail::Closed),
                    Err(e) => return Err(Fail::Bad(format!("read: {e}"))),
                }
                parse(c, pool)?;
            }
            if c.reply_first {
                // The engine answers before this connection is read further; the rest
                // (buffered or not) is taken at the next poll, which `readable` asks for.
                c.reply_first = false;
                c.readable = true;
            }
            c.rx_shrink(pool);
            Ok(())
        })();
        self.stats.packets_delivered += stats.0;
        self.stats.packets_placed += stats.1;
        *count += (stats.0 + stats.1) as usize;
        r
    }

    fn check_peer(&self, peer: PeerId) -> Result<usize> {
        match self.peers.get(peer.0 as usize) {
            Some(s) if s.addr.is_some() => Ok(peer.0 as usize),
            _ => Err(Error::Invalid(format!(
                "tcp: rank {} has no registered peer {}",
                self.me, peer.0
            ))),
        }
    }

    /// Write one packet on an established, writable connection with nothing pending.
    fn write_packet(&mut self, idx: usize, iov: &[IoSlice<'_>], len: usize) -> Result<SendOutcome> {
        let hdr = frame_header(KIND_PACKET, len);
        let total = FRAME_HDR + len;
        let mut list = std::mem::take(&mut self.iov);
        list.clear();
        // A small packet is gathered here and written as one buffer: cheaper for the kernel
        // than a message header and an iovec array to copy in and walk.
        let mut small = std::mem::take(&mut self.small);
        small.clear();
        if total <= SMALL_WRITE {
            small.extend_from_slice(&hdr);
            for s in iov {
                small.extend_from_slice(s);
            }
            list.push(libc::iovec {
                iov_base: small.as_mut_ptr() as *mut libc::c_void,
                iov_len: total,
            });
        } else {
            list.push(libc::iovec {
                iov_base: hdr.as_ptr() as *mut libc::c_void,
                iov_len: FRAME_HDR,
            });
            list.extend(iov.iter().filter(|s| !s.is_empty()).map(|s| libc::iovec {
                iov_base: s.as_ptr() as *mut libc::c_void,
                iov_len: s.len(),
            }));
        }
        let mut sent = 0usize;
        let mut first = 0usize;
        let c = self.conns[idx].as_mut().expect("live connection");
        let mut failure = None;
        while sent < total {
            let window = &list[first..list.len().min(first + crate::sys::IOV_MAX)];
            let want: usize = window.iter().map(|v| v.iov_len).sum();
            let wrote = match window {
                // SAFETY: the entry points into `small`, `hdr` or a caller's slice, alive
                // for the call.
                [one] => sys::send(c.fd.as_fd(), unsafe {
                    std::slice::from_raw_parts(one.iov_base as *const u8, one.iov_len)
                }),
                // SAFETY: every entry points into `small`, `hdr` or the caller's slices,
                // alive for the call.
                _ => unsafe { sys::sendmsg(c.fd.as_fd(), window) },
            };
            match wrote {
                Ok(n) => {
                    sent += n;
                    // Skip what was written.
                    let mut k = n;
                    while k > 0 {
                        let v = &mut list[first];
                        if k >= v.iov_len {
                            k -= v.iov_len;
                            first += 1;
                        } else {
                            // SAFETY: `k < iov_len`, so the pointer stays inside the entry.
                            v.iov_base = unsafe { v.iov_base.cast::<u8>().add(k) }.cast();
                            v.iov_len -= k;
                            k = 0;
                        }
                    }
                    if n < want {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            }
        }
        let outcome = if let Some(e) = failure {
            Err(e)
        } else if sent == 0 {
            c.writable = false;
            Ok(SendOutcome::WouldBlock)
        } else {
            if sent < total {
                c.writable = false;
                for v in &list[first..] {
                    // SAFETY: the entry describes the unsent part of `small`, `hdr` or a caller slice.
                    let s =
                        unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) };
                    c.out.extend_from_slice(s);
                }
                self.stats.partial_writes += 1;
                self.stats.bytes_buffered += (total - sent) as u64;
            }
            Ok(SendOutcome::Done)
        };
        list.clear();
        self.iov = list;
        self.small = small;
        match outcome {
            Ok(o) => {
                if o == SendOutcome::Done {
                    self.stats.packets_sent += 1;
                } else {
                    self.stats.would_block += 1;
                }
                Ok(o)
            }
            Err(e) => {
                let c = self.conn(idx);
                let p = c.peer.expect("established connections know their peer");
                let f = if c.bye {
                    Fail::Closed
                } else {
                    Fail::Bad(format!("write: {e}"))
                };
                self.fail(idx, f);
                Err(Error::PeerLost(PeerId(p)))
            }
        }
    }
}

/// Deliver or place every complete frame in a connection's buffer.
fn parse(
    c: &mut Conn,
    pool: &mut RxPool,
    peer: u32,
    max_packet: usize,
    split: SplitParams,
    sink: &mut dyn RecvSink,
    stats: &mut (u64, u64),
) -> std::result::Result<(), Fail> {
    let from = PeerId(peer);
    loop {
        if let Some(d) = &mut c.direct {
            let take = (c.rx_end - c.rx_start).min(d.left);
            if take > 0 {
                // SAFETY: `take <= left`: inside the placement, which the engine keeps valid
                // and untouched until `placed`; the source is our buffer, not overlapping it.
                unsafe {
                    std::ptr::copy_nonoverlapping(c.rx.as_ptr().add(c.rx_start), d.ptr, take);
                    d.ptr = d.ptr.add(take);
                }
                d.left -= take;
                c.rx_start += take;
            }
            let drop_n = (c.rx_end - c.rx_start).min(d.discard);
            d.discard -= drop_n;
            c.rx_start += drop_n;
            if d.left > 0 || d.discard > 0 {
                break;
            }
            let total = d.total;
            c.direct = None;
            c.last_placed = true;
            sink.placed(from, &c.head, total);
            stats.1 += 1;
            continue;
        }
        let avail = c.rx_len();
        if avail < FRAME_HDR {
            c.rx_reserve(FRAME_HDR, pool);
            break;
        }
        let h = c.rx[c.rx_start..c.rx_start + FRAME_HDR]
            .try_into()
            .expect("FRAME_HDR bytes");
        let len = match decode_frame_header(h, max_packet).map_err(Fail::Bad)? {
            FrameHead::Bye => {
                c.rx_start += FRAME_HDR;
                c.bye = true;
                continue;
            }
            FrameHead::Packet(len) => len,
        };
        if c.bye {
            return Err(Fail::Bad("packet after goodbye".into()));
        }
        let body = c.rx_start + FRAME_HDR;
        if !c.offered
            && split.head_len > 0
            && len >= split.head_len.saturating_add(split.min_rest)
            && len > split.head_len
        {
            if avail < FRAME_HDR + split.head_len {
                c.rx_reserve(FRAME_HDR + split.head_len, pool);
                break;
            }
            let head = &c.rx[body..body + split.head_len];
            match sink.place(from, head, len) {
                Some(p) => {
                    let rest = len - split.head_len;
                    let into = p.len().min(rest);
                    c.head.clear();
                    c.head.extend_from_slice(head);
                    c.direct = Some(Direct {
                        ptr: p.as_mut_ptr(),
                        left: into,
                        discard: rest - into,
                        total: len,
                    });
                    c.rx_start = body + split.head_len;
                    if p.wants_reply_first() {
                        // What is already buffered goes into the placement at the next poll.
                        c.reply_first = true;
                        break;
                    }
                    continue;
                }
                // Right behind a packet placed in this poll (`stats.1` counts this service's
                // placements: the next RTS or fragment of a stream), the receive is most
                // likely about to be posted: the engine has not yet seen the previous one
                // complete. It gets to run before the payload is read, which would otherwise go
                // through our buffer (and an unexpected message) instead of straight where it
                // belongs, and delay the reply. If it declines again at the next poll, the
                // packet is read whole.
                None if stats.1 > 0 => {
                    c.reply_first = true;
                    break;
                }
                None => c.offered = true,
            }
        }
        if avail < FRAME_HDR + len {
            c.rx_reserve(FRAME_HDR + len, pool);
            break;
        }
        sink.deliver(from, &c.rx[body..body + len]);
        // A packet with no payload (a Cts, an acknowledgement) between the fragments of large
        // messages does not end the run of them.
        if len > split.head_len {
            c.last_placed = false;
        }
        stats.0 += 1;
        c.rx_start = body + len;
        c.offered = false;
    }
    if c.rx_start == c.rx_end {
        c.rx_start = 0;
        c.rx_end = 0;
    }
    Ok(())
}

/// Apply the configured socket buffer sizes (0: leave the kernel's autotuning alone).
fn set_buffers(fd: std::os::fd::BorrowedFd<'_>, cfg: &TcpConfig) -> Result<()> {
    // The kernel doubles the value (bookkeeping overhead) and caps it at
    // net.core.{w,r}mem_max; what we get is visible with getsockopt.
    if cfg.sndbuf > 0 {
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_SNDBUF, cfg.sndbuf as i32)
            .map_err(io_err("tcp: SO_SNDBUF"))?;
    }
    if cfg.rcvbuf > 0 {
        sys::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, cfg.rcvbuf as i32)
            .map_err(io_err("tcp: SO_RCVBUF"))?;
    }
    Ok(())
}

impl Transport for TcpTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        let p = self.check_peer(peer)?;
        let len: usize = iov.iter().map(|s| s.len()).sum();
        if len > self.cfg.max_packet {
            return Err(Error::Invalid(format!(
                "packet of {len} bytes exceeds max_packet {}",
                self.cfg.max_packet
            )));
        }
        let s = &self.peers[p];
        if s.state != PeerState::Active {
            return Err(Error::PeerLost(peer));
        }
        let Some(idx) = s.conn else {
            self.dial_if_idle(peer.0);
            self.stats.would_block += 1;
            return if self.peers[p].state == PeerState::Active {
                Ok(SendOutcome::WouldBlock)
            } else {
                Err(Error::PeerLost(peer))
            };
        };
        let c = self.conn(idx);
        if c.bye {
            return Err(Error::PeerLost(peer));
        }
        if c.out_pending() {
            if c.writable {
                if let Err(e) = c.flush() {
                    self.fail(idx, Fail::Bad(format!("write: {e}")));
                    return Err(Error::PeerLost(peer));
                }
            }
            if self.conn(idx).out_pending() {
                self.stats.would_block += 1;
                return Ok(SendOutcome::WouldBlock);
            }
        }
        if !self.conn(idx).writable {
            self.stats.would_block += 1;
            return Ok(SendOutcome::WouldBlock);
        }
        self.write_packet(idx, iov, len)
    }

    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        let split = SplitParams {
            head_len: 0,
            min_rest: 0,
        };
        self.pump(Some((split, &mut DeliverOnly(deliver))), 0)
    }

    fn poll_recv_split(&mut self, split: SplitParams, sink: &mut dyn RecvSink) -> Result<usize> {
        self.pump(Some((split, sink)), 0)
    }

    fn poll_lost(&mut self) -> Option<PeerId> {
        self.lost.pop_front()
    }

    fn card(&self) -> Option<String> {
        Some(self.business_card())
    }

    fn connect(&mut self, peer: PeerId, card: &str) -> Result<()> {
        self.add_peer(peer, card)
    }

    fn get(
        &mut self,
        _peer: PeerId,
        _remote: RemoteRegion,
        _local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        Err(Error::Unsupported("get over tcp"))
    }

    fn reaches(&self, peer: PeerId) -> bool {
        peer.0 != self.me
            && self
                .peers
                .get(peer.0 as usize)
                .is_some_and(|s| s.addr.is_some())
    }
}

/// A sink that delivers through a `poll_recv` callback.
struct DeliverOnly<'a>(&'a mut dyn FnMut(PeerId, &[u8]));

impl RecvSink for DeliverOnly<'_> {
    fn deliver(&mut self, peer: PeerId, packet: &[u8]) {
        (self.0)(peer, packet)
    }
}

impl Drop for TcpTransport {
    /// Push out packets already accepted (up to `linger`, reading and dropping whatever
    /// arrives meanwhile so that two closing peers cannot block each other), then say goodbye
    /// and close every connection.
    fn drop(&mut self) {
        let deadline = Instant::now() + self.cfg.linger;
        let mut scratch = vec![0u8; 64 << 10];
        loop {
            let mut pending = false;
            for idx in 0..self.conns.len() {
                let Some(c) = self.conns[idx].as_mut() else {
                    continue;
                };
                if c.phase != Phase::Established {
                    continue;
                }
                while c.readable {
                    match sys::recv(c.fd.as_fd(), &mut scratch) {
                        Ok(n) if n > 0 => {}
                        _ => c.readable = false,
                    }
                }
                if c.out_pending() && c.writable && c.flush().is_err() {
                    c.out.clear();
                    c.out_off = 0;
                }
                pending |= c.out_pending();
            }
            if !pending || Instant::now() >= deadline {
                break;
            }
            let Ok(n) = self.epoll.wait(&mut self.events, 10) else {
                break;
            };
            for i in 0..n {
                let ev = self.events[i];
                if let Some(idx) = self.index_of(ev.u64) {
                    let c = self.conn(idx);
                    c.readable = true;
                    c.writable = true;
                }
            }
        }
        let me = self.me;
        for c in self.conns.iter_mut().flatten() {
            if c.phase != Phase::Established {
                continue;
            }
            if c.out_pending() {
                let left = c.out.len() - c.out_off;
                eprintln!(
                    "madmpi tcp (rank {me}): closing with {left} bytes unsent to rank {} ({})",
                    c.peer.unwrap_or(u32::MAX),
                    c.remote
                );
                continue;
            }
            let bye = frame_header(KIND_BYE, 0);
            let iov = [libc::iovec {
                iov_base: bye.as_ptr() as *mut libc::c_void,
                iov_len: FRAME_HDR,
            }];
            // SAFETY: the iovec describes `bye`, alive for the call.
            let _ = unsafe { sys::sendmsg(c.fd.as_fd(), &iov) };
            let _ = sys::shutdown_write(c.fd.as_fd());
        }
    }
}

/// Test-only access to the wire format, for the security tests of `tests/` (a client that
/// knows the secret and misbehaves after the handshake).
#[doc(hidden)]
pub mod testing {
    use super::handshake::{Auth, Hello, Role, Transcript, Verdict};
    pub use super::handshake::{AUTH_LEN, HELLO_LEN};

    /// The connector's hello to `target`, from `rank`, with `nonce`.
    pub fn client_hello(
        rank: u32,
        target: u32,
        nprocs: u32,
        max_packet: u32,
        nonce: [u8; 32],
    ) -> [u8; HELLO_LEN] {
        Hello {
            role: Role::Connector,
            nprocs,
            rank,
            target,
            max_packet,
            nonce,
        }
        .encode()
    }

    /// The connector's proof, given the acceptor's hello; `None` if that hello is invalid.
    pub fn client_auth(
        secret: &[u8; 32],
        my_rank: u32,
        my_nonce: [u8; 32],
        server_hello: &[u8; HELLO_LEN],
    ) -> Option<[u8; AUTH_LEN]> {
        let h = Hello::decode(server_hello).ok()?;
        let t = Transcript {
            nonce_c: my_nonce,
            nonce_a: h.nonce,
            rank_c: my_rank,
            rank_a: h.rank,
            nprocs: h.nprocs,
        };
        let mac = t.mac(secret, Role::Connector, Verdict::Accept);
        Some(
            Auth {
                verdict: Verdict::Accept,
                mac,
            }
            .encode(),
        )
    }

    /// The verdict byte of an acceptor's auth message (0 accept, 1 superseded, 2 duplicate,
    /// 3 refused).
    pub fn verdict(auth: &[u8; AUTH_LEN]) -> u8 {
        auth[1]
    }

    /// A frame header for a packet of `len` bytes (any length, for oversize tests).
    pub fn frame_header(len: u32) -> [u8; 8] {
        super::frame_header(super::KIND_PACKET, len as usize)
    }
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;
