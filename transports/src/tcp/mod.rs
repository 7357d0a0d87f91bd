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
//!
//! # Layout
//!
//! This file holds the driver: [`TcpTransport`], its public API, the poll loop, its
//! [`Transport`] implementation and its goodbye at `Drop`. A connection, its buffers, framing,
//! reads, writes and placements are `conn.rs`'s; the connection table, peer states,
//! accepting, dialling, the handshake exchange, the tie-break and peer loss are `peers.rs`'s;
//! the handshake messages and their MACs `handshake.rs`'s, the configuration `config.rs`'s,
//! the socket system calls `sys.rs`'s.

#![warn(clippy::undocumented_unsafe_blocks)]

mod config;
mod conn;
mod dynamic;
mod handshake;
mod peers;
mod sys;

use std::collections::VecDeque;
use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

#[cfg(madmpi_ofi)]
pub(crate) use config::parse_size;
pub use config::{ConnectMode, TcpConfig};
use conn::{frame_header, Conn, Fail, Phase, RxPool, FRAME_HDR, KIND_BYE, KIND_PACKET};
use conn::{RX_MIN_FREE, SMALL_WRITE};
pub use dynamic::DynTcp;
use peers::{set_buffers, set_liveness, PeerSlot, PeerState};
pub(crate) use sys::random;

use crate::{
    Caps, Error, PeerId, RecvSink, RemoteRegion, Result, SendOutcome, SplitParams, Transport,
};

/// The epoll token of the listening socket.
const LISTENER: u64 = u64::MAX;
/// epoll events fetched per wait.
const EVENTS: usize = 64;
/// With at most this many connections (and nothing else going on), polling reads them
/// directly instead of asking epoll first: one system call instead of two when a packet
/// arrives, and the same one call when nothing does.
const DIRECT_POLL_MAX: usize = 2;
/// In direct polling, epoll is still consulted every this many polls (new connections).
const DIRECT_POLL_EPOLL_EVERY: u32 = 64;

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
    /// When the links of the connections with data in flight are checked next
    /// (`link_timeout`: [`peers::link_failed`]).
    next_link_check: Instant,
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
        set_liveness(b, cfg)?;
        sys::bind(b, &addr).map_err(io_err(format!("tcp: binding {addr}")))?;
        sys::listen(b, 1024).map_err(io_err(format!("tcp: listening on {addr}")))?;
        let local = sys::local_addr(b).map_err(io_err("tcp: getsockname"))?;
        let epoll = sys::Epoll::new().map_err(io_err("tcp: epoll_create"))?;
        epoll
            .add(b, LISTENER, (libc::EPOLLIN | libc::EPOLLET) as u32)
            .map_err(io_err("tcp: epoll_ctl"))?;
        let mut probe = [0u8; 8];
        sys::random(&mut probe).map_err(io_err("tcp: getrandom"))?;
        let peers = (0..nprocs).map(|_| PeerSlot::idle()).collect();
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
                pack_count: u32::MAX,
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
            next_link_check: Instant::now(),
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

    /// Name this driver `name` in its [`Caps`] (a second TCP driver over another network is
    /// a rail of its own: `tcp1`, ...).
    pub fn set_name(&mut self, name: &'static str) {
        self.caps.name = name;
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

    // ------------------------------------------------------------ internals: the poll loop

    /// At most every quarter of a second: end the established connections whose link has
    /// failed with data in flight — the kernel has been retransmitting, with no
    /// acknowledgement, for `link_timeout` (a single loss recovers within a retransmission
    /// timeout; a receiver that stops reading still acknowledges): their peer is lost through
    /// this driver, and the engine goes on on the peer's other rails, if it has any.
    fn check_links(&mut self) {
        let now = Instant::now();
        if now < self.next_link_check {
            return;
        }
        self.next_link_check = now + Duration::from_millis(250);
        let limit = self.cfg.link_timeout;
        let ms = limit.as_millis() as u64;
        let mut failed = Vec::new();
        for (i, c) in self.conns.iter_mut().enumerate() {
            let Some(c) = c.as_mut().filter(|c| c.phase == Phase::Established) else {
                continue;
            };
            match peers::retransmitting(c.fd.as_fd()) {
                Some(since_ack) => {
                    let t = *c.suspect_since.get_or_insert(now);
                    if now.duration_since(t) >= limit && since_ack >= ms {
                        failed.push(i);
                    }
                }
                None => c.suspect_since = None,
            }
        }
        for idx in failed {
            self.fail(
                idx,
                Fail::Fatal(format!(
                    "link failed: data unacknowledged for {ms} ms (MADMPI_TCP_LINK_TIMEOUT_MS)"
                )),
            );
        }
    }

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
        if !self.cfg.link_timeout.is_zero() {
            self.check_links();
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

    fn check_peer(&self, peer: PeerId) -> Result<usize> {
        match self.peers.get(peer.0 as usize) {
            Some(s) if s.addr.is_some() => Ok(peer.0 as usize),
            _ => Err(Error::Invalid(format!(
                "tcp: rank {} has no registered peer {}",
                self.me, peer.0
            ))),
        }
    }
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
pub mod testing;

#[cfg(test)]
mod tests;
