//! Connection management: the table of connections and what the driver knows of each peer.
//!
//! # What it owns
//!
//! The peer states ([`PeerSlot`]: address, active, lost or gone, the authenticated connection
//! and our attempt, backoff), the connection table (tokens, insert, close), accepting with
//! the bound on handshakes in progress, dialling with backoff and retries, the handshake
//! exchange (hello, proof, verdict) and the tie-break of simultaneous connects, deadlines, the
//! decision that a peer is lost, and the log of all that.
//!
//! # What it must never do
//!
//! Read or write the frames of an established connection (that is `conn.rs`), block, or bind
//! anything but the configured address.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};
use std::time::{Duration, Instant};

use super::conn::{Conn, Fail, Phase};
use super::handshake::{
    self, Auth, Hello, Role, Transcript, Verdict, AUTH_LEN, HELLO_LEN, NONCE_LEN,
};
use super::{io_err, sys, TcpConfig, TcpTransport};
use crate::{Error, PeerId, Result};

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

/// What the driver knows of a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum PeerState {
    /// Reachable (or not yet connected).
    Active,
    /// Failed; reported through `poll_lost`.
    Lost,
    /// Said goodbye and closed.
    Gone,
}

#[derive(Debug)]
pub(super) struct PeerSlot {
    pub(super) addr: Option<SocketAddr>,
    pub(super) state: PeerState,
    /// The authenticated connection.
    pub(super) conn: Option<usize>,
    /// Our outgoing attempt, not yet authenticated.
    pub(super) dialing: Option<usize>,
    /// Do not dial before this time: our attempt lost the tie-break (the peer's connection
    /// should arrive meanwhile), or failed and we back off.
    pub(super) retry_at: Option<Instant>,
    /// When the current series of attempts started (cleared on success).
    pub(super) first_dial: Option<Instant>,
    /// Failed attempts in the current series.
    pub(super) attempts: u32,
}

impl PeerSlot {
    /// A peer not yet added.
    pub(super) fn idle() -> PeerSlot {
        PeerSlot {
            addr: None,
            state: PeerState::Active,
            conn: None,
            dialing: None,
            retry_at: None,
            first_dial: None,
            attempts: 0,
        }
    }
}

impl TcpTransport {
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
    pub(super) fn index_of(&self, token: u64) -> Option<usize> {
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

    pub(super) fn conn(&mut self, idx: usize) -> &mut Conn {
        self.conns[idx].as_mut().expect("live connection")
    }

    pub(super) fn enqueue(&mut self, idx: usize) {
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
    pub(super) fn fail(&mut self, idx: usize, fail: Fail) {
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
    pub(super) fn dial_if_idle(&mut self, peer: u32) {
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
        set_liveness(b, &self.cfg).map_err(|e| e.to_string())?;
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

    pub(super) fn accept(&mut self) -> Result<()> {
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
        let engine = self.cfg.engine_version;
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
            engine,
            nonce,
        };
        c.out.extend_from_slice(&hello.encode());
        c.flush()
            .map(drop)
            .map_err(|e| format!("sending hello: {e}"))
    }

    /// Advance a connection that is not established yet as far as the bytes at hand allow.
    pub(super) fn handshake(&mut self, idx: usize) -> std::result::Result<(), Fail> {
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
        let engine = self.cfg.engine_version;
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
        if h.engine != engine {
            return Err(Fail::Fatal(format!(
                "peer speaks engine protocol version {}, this rank {engine} (madmpi builds of \
                 different versions in one job)",
                h.engine
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
    pub(super) fn check_deadlines(&mut self) {
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
}

/// Make an idle connection whose link fails end with an error within about
/// `cfg.link_timeout` (0: the kernel's defaults, hours): keepalive probes (`SO_KEEPALIVE`, the
/// first after a third of it, three unanswered end it). The peer's kernel answers them even
/// when the peer computes. (Set on the listening socket, the accepted connections inherit
/// it.) A link that fails with data in flight is noticed by [`link_failed`] instead: not
/// with `TCP_USER_TIMEOUT`, which also ends a connection whose receiver merely stops reading
/// for that long (a zero window), as an MPI rank that computes does.
pub(super) fn set_liveness(fd: std::os::fd::BorrowedFd<'_>, cfg: &TcpConfig) -> Result<()> {
    let ms = cfg.link_timeout.as_millis().min(i32::MAX as u128) as i32;
    if ms == 0 {
        return Ok(());
    }
    let idle = (ms / 3000).max(1);
    let intvl = (ms / 6000).max(1);
    for (level, name, v, what) in [
        (libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1, "tcp: SO_KEEPALIVE"),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPIDLE,
            idle,
            "tcp: TCP_KEEPIDLE",
        ),
        (
            libc::IPPROTO_TCP,
            libc::TCP_KEEPINTVL,
            intvl,
            "tcp: TCP_KEEPINTVL",
        ),
        (libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 3, "tcp: TCP_KEEPCNT"),
    ] {
        sys::set_int(fd, level, name, v).map_err(io_err(what))?;
    }
    Ok(())
}

/// Whether the kernel is retransmitting on connection `fd` (segments in flight, sent again,
/// not acknowledged yet), and how long ago the last acknowledgement came, in ms (`TCP_INFO`).
/// A receiver that stops reading keeps acknowledging (its zero window answers the probes, and
/// nothing is in flight then), so it never looks retransmitting.
pub(super) fn retransmitting(fd: std::os::fd::BorrowedFd<'_>) -> Option<u64> {
    use std::os::fd::AsRawFd;
    // SAFETY: an all-zero tcp_info is valid; getsockopt writes at most `len` bytes into it.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` and `len` are valid for writes of the sizes given.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (r == 0 && info.tcpi_unacked > 0 && info.tcpi_retransmits > 0)
        .then_some(u64::from(info.tcpi_last_ack_recv))
}

/// Apply the configured socket buffer sizes (0: leave the kernel's autotuning alone).
pub(super) fn set_buffers(fd: std::os::fd::BorrowedFd<'_>, cfg: &TcpConfig) -> Result<()> {
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
