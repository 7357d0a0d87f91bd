//! The `ofi` driver: packets over a libfabric (OFI) reliable-datagram endpoint (`FI_EP_RDM`),
//! so that madmpi reaches the networks production MPIs reach through libfabric — InfiniBand
//! and RoCE (`verbs;ofi_rxm`), AWS EFA (`efa`), HPE Slingshot (`cxi`), Omni-Path (`psm2`,
//! `opx`) — and, on any machine, TCP (`tcp;ofi_rxm`) and shared memory (`shm`).
//!
//! How it moves a packet:
//! - one endpoint per process, one completion queue for sends and receives, an address vector
//!   filled at start-up from the peers' address cards ([`Transport::card`] /
//!   [`Transport::connect`]); the provider must keep a peer's messages in order
//!   (`FI_ORDER_SAS`);
//! - a send copies the packet, behind an 8-byte driver header (sender rank, engine protocol
//!   version: the endpoint is connectionless, so the sender is named in the packet), into a
//!   free buffer of the send pool (registered when the provider wants `FI_MR_LOCAL`) and posts
//!   it with `fi_send`. The pool's free buffers are the link's credits: none free, or the
//!   provider's `FI_EAGAIN`, is [`SendOutcome::WouldBlock`]; a buffer is free again when its
//!   send completes;
//! - a packet no larger than the provider's `inject_size` (header included) is gathered into
//!   one buffer and sent with `fi_inject` instead (`MADMPI_OFI_INJECT=0`: never): the provider
//!   copies it at once, so it takes no credit and writes no completion. Its failure is
//!   therefore silent (a peer lost while only such packets go to it is not noticed by the
//!   driver); closing, the driver sends each peer it injected to a header-only packet
//!   ([`CLOSING`]) with a completion, which says the injected ones left;
//! - a pool of receive buffers stays posted; [`Transport::poll_recv`] reads the completion
//!   queue, delivers each received packet from its buffer and posts the buffer again;
//! - a send that completes in error names its peer lost ([`Transport::poll_lost`]).
//!
//! Rendezvous data: when the provider offers `FI_RMA` (and `MADMPI_OFI_RMA` is not 0), the
//! sender registers its buffer for remote reads ([`Transport::register`], once per rendezvous:
//! libfabric's own registration cache, on by default for verbs and EFA with its memory
//! monitor, makes repeats cheap and safe), the key travels in the RTS, and the receiver's
//! [`Transport::get`] reads the data straight into the receive buffer with `fi_read` (cut to
//! the provider's `max_msg_size`, addressed by virtual address or by offset as `FI_MR_VIRT_ADDR`
//! says); the registration ends when the send completes. Otherwise (`can_get` false) the data
//! travels as fragments (the engine cuts them to [`Caps::max_packet`]). Errors name the provider and the libfabric call, with `fi_strerror`.
//! The driver authenticates nothing: like other MPIs over libfabric, it relies on the fabric
//! (a job's endpoints are reachable by the hosts of the network).

mod card;
mod config;
mod ffi;
mod pool;
mod rma;
#[cfg(test)]
mod tests;

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};

use card::{card_provider, hex, unhex};
pub use config::OfiConfig;
use ffi::{Access, Completions, Context, CqEntry, Endpoint, MemReg};
use pool::Pool;

use crate::{Caps, Error, PeerId, RemoteRegion, Result, SendOutcome, Transport};

/// The driver's header before every packet: sender rank (u32 LE), engine version (u32 LE).
const HDR: usize = 8;

/// A posted receive not completed yet.
const PENDING: usize = usize::MAX;
/// A receive that completed in error.
const FAILED: usize = usize::MAX - 1;

/// Completions read per `fi_cq_read`.
const CQ_BATCH: usize = 32;

/// The version field of the header-only packet a closing driver sends behind its injected
/// packets (no engine speaks it).
const CLOSING: u32 = u32::MAX;

/// Idle completion-queue reads while waiting for an RDMA read before the wait starts yielding,
/// and, past them, reads between two yields.
const READ_SPIN: u32 = 64;
const READ_YIELD_EVERY: u32 = 16;

/// Providers that reach other hosts no faster than the `tcp` driver (or not at all): a job
/// spanning hosts prefers `ofi` over `tcp` only when the provider is none of these.
const SLOW_PROVIDERS: &[&str] = &["tcp", "udp", "sockets", "net", "shm"];

/// Whether `provider` (`tcp;ofi_rxm`, `verbs;ofi_rxm`, `efa`...) is a fast network: its core
/// provider (the first name) is not a socket or shared-memory one.
pub fn is_fast(provider: &str) -> bool {
    let core = provider.split(';').next().unwrap_or_default();
    !SLOW_PROVIDERS.contains(&core)
}

/// The provider libfabric offers for this driver under `cfg` (a fast network or not: see
/// [`is_fast`]).
///
/// # Errors
///
/// No provider fits (the error names the provider asked for and `fi_getinfo`'s answer).
pub fn probe(cfg: &OfiConfig) -> Result<String> {
    tune_provider(cfg);
    ffi::probe(cfg.provider.as_deref())
}

/// Set the provider variables the driver needs before libfabric reads them (at its first
/// call in the process): over `tcp;ofi_rxm`, rxm's eager limit to the driver's largest packet
/// ([`config::rxm_eager_limit`]), so that no packet is segmented by rxm. A variable the user
/// set is left alone. Every rank computes the same value from the same settings (rxm refuses
/// a connection between two eager limits).
fn tune_provider(cfg: &OfiConfig) {
    let set = std::env::var(config::RXM_EAGER_VAR).ok();
    if let Some(v) = config::rxm_eager_limit(
        cfg.provider.as_deref(),
        cfg.max_packet + HDR,
        set.as_deref(),
    ) {
        // (MPI_Init runs before the application's threads read the environment, as for the
        // variables the launcher sets.)
        std::env::set_var(config::RXM_EAGER_VAR, &v);
        tracing::debug!(provider = ?cfg.provider, "ofi: {}={v}", config::RXM_EAGER_VAR);
    }
}

/// A peer as the driver knows it.
#[derive(Clone, Copy, Debug)]
struct Peer {
    /// Its address in the address vector.
    addr: u64,
    /// A send to it failed: every later send answers [`Error::PeerLost`].
    lost: bool,
    /// Packets injected to it since the last one sent with a completion.
    injected: u32,
}

/// The `ofi` driver (see the [module documentation](self)).
pub struct OfiTransport {
    // Dropped in this order after `Drop::drop` closed the endpoint: the registrations, then
    // the endpoint's other objects (domain last).
    rx: Pool,
    tx: Pool,
    /// Registrations of send buffers for remote reads and of one-sided windows, by key.
    regs: std::collections::HashMap<u64, MemReg>,
    /// One-sided RDMA transfers in flight (`rma`), with their local registrations.
    rma: rma::RmaOps,
    ep: Endpoint,
    /// One libfabric context per operation in flight: receives `0..rx_count`, then sends.
    ctx: Box<[Context]>,
    rx_count: usize,
    /// Receive buffers to post again (delivered, or the provider said `FI_EAGAIN`).
    rx_idle: Vec<u32>,
    /// Posted receive buffers, in the order they were posted: the provider matches incoming
    /// messages to them in that order (and a peer's messages in their sending order), but may
    /// complete them out of it (a large message later than a small one that followed it), so
    /// packets are delivered from the front of this queue.
    rx_posted: VecDeque<u32>,
    /// Per receive buffer: the length received once completed, [`PENDING`] while posted,
    /// [`FAILED`] if the receive failed.
    rx_len: Vec<usize>,
    /// Free send buffers (the credits).
    tx_free: Vec<u32>,
    /// The largest packet sent with `fi_inject` (driver header included; 0: none), and the
    /// buffer it is gathered into.
    inject_max: usize,
    inject_buf: Box<[u8]>,
    /// The destination of each send buffer in flight.
    tx_peer: Vec<u32>,
    peers: Vec<Option<Peer>>,
    lost: VecDeque<PeerId>,
    me: u32,
    version: u32,
    caps: Caps,
    address: Vec<u8>,
    /// Malformed packets seen (logged, the first few on stderr).
    dropped: u64,
    /// RDMA reads posted and not completed (their context is the last of `ctx`).
    reads: usize,
    /// Why a read failed, if one did since the last `get`.
    read_failed: Option<String>,
    /// The next key asked for (providers without `FI_MR_PROV_KEY` take the application's).
    next_key: u64,
    /// Counted for the trace ([`Transport::counters`]): `get`s, bytes read, registrations.
    gets: u64,
    read_bytes: u64,
    registrations: u64,
    /// Packets sent with `fi_inject` (counted for the trace).
    injects: u64,
    /// The driver is being dropped: a peer's failure is not reported on stderr.
    closing: bool,
}

impl OfiTransport {
    /// Open the endpoint of rank `me` of `n`, whose peers run engine protocol `version`.
    ///
    /// # Errors
    ///
    /// No provider fits `cfg`, or a libfabric call fails (named with the provider).
    pub fn open(me: PeerId, n: u32, version: u32, cfg: &OfiConfig) -> Result<OfiTransport> {
        tune_provider(cfg);
        let cq_size = cfg.rx_buffers + cfg.tx_buffers + CQ_BATCH;
        let ep = Endpoint::open(cfg.provider.as_deref(), cfg.rma, cq_size + 1)?;
        let a = ep.attr().clone();
        let clamp = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        let max_msg = clamp(a.max_msg_size).max(HDR + 1);
        let max_packet = cfg.max_packet.min(max_msg - HDR);
        let rx_count = cfg.rx_buffers.min(clamp(a.rx_size).max(2));
        let tx_count = cfg.tx_buffers.min(clamp(a.tx_size).max(1));
        let rx = Pool::new(&ep, rx_count, max_packet + HDR)?;
        let tx = Pool::new(&ep, tx_count, max_packet + HDR)?;
        // fi_inject where the provider has room for at least a header and a few bytes; never
        // above the packets the driver sends.
        let inject_max = match clamp(a.inject_size).min(max_packet + HDR) {
            n if cfg.inject && n > HDR + 8 => n,
            _ => 0,
        };
        let fast = is_fast(&a.provider);
        let shm = a.provider.split(';').next() == Some("shm");
        let address = ep.name()?;
        // (What rxm was started with: `default` is its own 16 KiB.)
        let rxm_eager = std::env::var(config::RXM_EAGER_VAR).unwrap_or_else(|_| "default".into());
        tracing::info!(
            rank = me.0,
            provider = %a.provider,
            fabric = %a.fabric,
            domain = %a.domain,
            max_msg_size = a.max_msg_size,
            inject_size = a.inject_size,
            iov_limit = a.iov_limit,
            rma = a.rma,
            rma_iov_limit = a.rma_iov_limit,
            mr_local = a.mr_local,
            mr_virt_addr = a.mr_virt_addr,
            max_packet,
            inject_max,
            rx_count,
            tx_count,
            rxm_eager_limit = %rxm_eager,
            "ofi: endpoint open"
        );
        let mut t = OfiTransport {
            rx,
            tx,
            ep,
            // (One more: every RDMA read's.)
            ctx: vec![Context::default(); rx_count + tx_count + 1].into_boxed_slice(),
            rx_count,
            rx_idle: (0..rx_count as u32).rev().collect(),
            rx_posted: VecDeque::with_capacity(rx_count),
            rx_len: vec![PENDING; rx_count],
            tx_free: (0..tx_count as u32).rev().collect(),
            tx_peer: vec![u32::MAX; tx_count],
            inject_max,
            inject_buf: vec![0u8; inject_max].into_boxed_slice(),
            peers: vec![None; n as usize],
            lost: VecDeque::new(),
            me: me.0,
            version,
            caps: Caps {
                name: "ofi",
                // Figures by class of provider; the engine orders rails by them.
                latency_ns: if shm {
                    1_000
                } else if fast {
                    2_000
                } else {
                    20_000
                },
                bandwidth_mbps: if fast || shm { 10_000 } else { 1_000 },
                max_packet,
                eager_threshold: cfg.eager_threshold.min(max_packet / 2),
                // Packets are gathered into a bounce buffer: any number of pieces.
                max_iov: 1024,
                can_get: a.rma,
                preference: 60,
                aggreg_max: max_packet.min(32 << 10),
                solo_min: usize::MAX,
                pack_count: u32::MAX,
                registers_memory: a.rma,
            },
            address,
            dropped: 0,
            regs: std::collections::HashMap::new(),
            rma: rma::RmaOps::new(&a.provider, cfg.rma_min),
            reads: 0,
            read_failed: None,
            next_key: 1,
            gets: 0,
            read_bytes: 0,
            registrations: 0,
            injects: 0,
            closing: false,
        };
        t.post_receives()?;
        Ok(t)
    }

    /// The provider in use (`tcp;ofi_rxm`, `efa`, ...).
    pub fn provider(&self) -> &str {
        &self.ep.attr().provider
    }

    /// Post every idle receive buffer again.
    fn post_receives(&mut self) -> Result<()> {
        while let Some(&i) = self.rx_idle.last() {
            let len = self.rx.slot;
            let (buf, desc) = (self.rx.ptr(i as usize), self.rx.desc());
            let ctx: *mut Context = &mut self.ctx[i as usize];
            // SAFETY: the buffer and its context belong to receive `i`, which is not posted;
            // both live until the endpoint is closed (drop).
            if !unsafe { self.ep.recv(buf, len, desc, ctx)? } {
                break;
            }
            self.rx_idle.pop();
            self.rx_len[i as usize] = PENDING;
            self.rx_posted.push_back(i);
        }
        Ok(())
    }

    fn check_peer(&self, peer: PeerId) -> Result<Peer> {
        self.peers
            .get(peer.0 as usize)
            .copied()
            .flatten()
            .ok_or_else(|| Error::Invalid(format!("ofi: rank {} is not a peer", peer.0)))
    }

    fn note_dropped(&mut self, why: String) {
        self.dropped += 1;
        if self.dropped <= 8 {
            eprintln!(
                "madmpi ofi (rank {}, provider {}): {why}",
                self.me,
                self.provider()
            );
        }
        tracing::warn!(rank = self.me, provider = %self.provider(), "ofi: {why}");
    }

    /// Record the completion of operation `i` (`len` bytes received for a receive).
    fn complete(&mut self, i: usize, len: usize) {
        if i == self.ctx.len() - 1 {
            self.reads = self.reads.saturating_sub(1);
        } else if i >= self.rx_count {
            let s = i - self.rx_count;
            self.tx_peer[s] = u32::MAX;
            self.tx_free.push(s as u32);
        } else {
            self.rx_len[i] = len.min(FAILED - 1);
        }
    }

    /// Deliver the completed receives at the front of the posted order. Returns how many
    /// packets were delivered.
    fn deliver_ready(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> usize {
        let mut delivered = 0;
        while let Some(&i) = self.rx_posted.front() {
            let len = self.rx_len[i as usize];
            if len == PENDING {
                break;
            }
            self.rx_posted.pop_front();
            self.rx_idle.push(i);
            if len != FAILED && self.deliver_one(i as usize, len, deliver) {
                delivered += 1;
            }
        }
        delivered
    }

    /// Deliver the packet of `len` bytes in receive buffer `i`, if it is well-formed.
    fn deliver_one(
        &mut self,
        i: usize,
        len: usize,
        deliver: &mut dyn FnMut(PeerId, &[u8]),
    ) -> bool {
        let p = self.rx.ptr(i);
        if len < HDR || len > self.rx.slot {
            self.note_dropped(format!("a packet of {len} bytes has no driver header"));
            return false;
        }
        // SAFETY: the provider wrote `len` bytes into receive buffer `i`, which is not posted
        // again before this returns.
        let bytes = unsafe { std::slice::from_raw_parts(p, len) };
        let from = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let version = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        if version == CLOSING && len == HDR {
            // A sender's last packet, which says its injected ones left.
            return false;
        }
        let known = self.peers.get(from as usize).copied().flatten();
        match known {
            _ if version != self.version => {
                self.note_dropped(format!(
                    "a packet from rank {from} of engine protocol {version} (this one speaks \
                     {}): dropped",
                    self.version
                ));
                false
            }
            None => {
                self.note_dropped(format!("a packet from unknown rank {from}: dropped"));
                false
            }
            Some(peer) if peer.lost => false,
            Some(_) => {
                deliver(PeerId(from), &bytes[HDR..]);
                true
            }
        }
    }

    /// An operation completed in error: a send names its peer lost; a failed receive is
    /// reported and its buffer posted again.
    fn failed(&mut self, ctx: *mut Context, text: String) -> Result<()> {
        let base = self.ctx.as_ptr() as usize;
        let at = (ctx as usize).wrapping_sub(base) / std::mem::size_of::<Context>();
        if ctx.is_null() || (ctx as usize) < base || at >= self.ctx.len() {
            if self.rma.complete(ctx, Some(text.clone())) {
                return Ok(());
            }
            return Err(Error::Io {
                what: format!("ofi (provider {}): fi_cq_readerr", self.provider()),
                source: std::io::Error::other(format!("an operation of no context: {text}")),
            });
        }
        if at == self.ctx.len() - 1 {
            self.reads = self.reads.saturating_sub(1);
            self.read_failed.get_or_insert(text);
            return Ok(());
        }
        if at < self.rx_count {
            self.rx_len[at] = FAILED;
            self.note_dropped(format!("a receive failed: {text}"));
            return Ok(());
        }
        let s = at - self.rx_count;
        let peer = std::mem::replace(&mut self.tx_peer[s], u32::MAX);
        self.tx_free.push(s as u32);
        if let Some(Some(p)) = self.peers.get_mut(peer as usize) {
            if !p.lost {
                p.lost = true;
                self.lost.push_back(PeerId(peer));
                let prov = self.ep.attr().provider.clone();
                // (A peer that closed first while this one closes is no news.)
                if !self.closing {
                    eprintln!(
                        "madmpi ofi (rank {}, provider {prov}): send to rank {peer} failed: {text}",
                        self.me
                    );
                }
            }
        }
        Ok(())
    }

    /// Send a packet with `fi_send` from a buffer of the send pool (its completion frees the
    /// buffer, or names the peer lost), behind the driver header with `version`.
    fn post_send(
        &mut self,
        peer: PeerId,
        addr: u64,
        version: u32,
        iov: &[IoSlice<'_>],
    ) -> Result<SendOutcome> {
        let len: usize = iov.iter().map(|s| s.len()).sum();
        let Some(&s) = self.tx_free.last() else {
            return Ok(SendOutcome::WouldBlock);
        };
        let i = self.rx_count + s as usize;
        let buf = self.tx.ptr(s as usize);
        // SAFETY: send buffer `s` is free (not posted) and has room for HDR + max_packet bytes.
        unsafe {
            crate::copy_bytes(self.me.to_le_bytes().as_ptr(), buf, 4);
            crate::copy_bytes(version.to_le_bytes().as_ptr(), buf.add(4), 4);
            let mut at = HDR;
            for piece in iov {
                crate::copy_bytes(piece.as_ptr(), buf.add(at), piece.len());
                at += piece.len();
            }
        }
        let desc = self.tx.desc();
        let ctx: *mut Context = &mut self.ctx[i];
        // SAFETY: the buffer and the context stay untouched until the completion of `ctx`
        // frees the buffer; both live until the endpoint is closed.
        if !unsafe { self.ep.send(buf, HDR + len, desc, addr, ctx)? } {
            return Ok(SendOutcome::WouldBlock);
        }
        self.tx_free.pop();
        self.tx_peer[s as usize] = peer.0;
        if let Some(Some(q)) = self.peers.get_mut(peer.0 as usize) {
            q.injected = 0;
        }
        Ok(SendOutcome::Done)
    }

    /// Send a packet of `len` bytes (`HDR + len <= inject_max`) with `fi_inject`: gathered
    /// behind the driver header into the inject buffer, which the provider copies before it
    /// returns. No send buffer is taken and no completion comes back.
    fn inject(
        &mut self,
        peer: PeerId,
        addr: u64,
        iov: &[IoSlice<'_>],
        len: usize,
    ) -> Result<SendOutcome> {
        let b = &mut self.inject_buf[..HDR + len];
        b[..4].copy_from_slice(&self.me.to_le_bytes());
        b[4..HDR].copy_from_slice(&self.version.to_le_bytes());
        let mut at = HDR;
        for piece in iov {
            b[at..at + piece.len()].copy_from_slice(piece);
            at += piece.len();
        }
        if !self.ep.inject(b, addr)? {
            return Ok(SendOutcome::WouldBlock);
        }
        self.injects += 1;
        if let Some(Some(q)) = self.peers.get_mut(peer.0 as usize) {
            q.injected = q.injected.saturating_add(1);
        }
        Ok(SendOutcome::Done)
    }

    /// Read the completion queue once (a batch) and record what completed. Returns how many
    /// entries were read.
    fn progress(&mut self) -> Result<usize> {
        // (Not zeroed: the provider writes the entries it returns, and only those are read.)
        let mut entries = [std::mem::MaybeUninit::<CqEntry>::uninit(); CQ_BATCH];
        let base = self.ctx.as_ptr() as usize;
        let n = match self.ep.cq_read(&mut entries)? {
            Completions::Done(n) => n,
            Completions::Failed { ctx, text } => {
                self.failed(ctx, text)?;
                return Ok(1);
            }
        };
        for e in &entries[..n.min(CQ_BATCH)] {
            // SAFETY: the provider wrote the first `n` entries.
            let e = unsafe { e.assume_init_ref() };
            let i = (e.op_context as usize).wrapping_sub(base) / std::mem::size_of::<Context>();
            if i >= self.ctx.len() {
                if self.rma.complete(e.op_context.cast(), None) {
                    continue;
                }
                return Err(Error::Io {
                    what: format!("ofi (provider {}): fi_cq_read", self.provider()),
                    source: std::io::Error::other("a completion of an unknown operation"),
                });
            }
            self.complete(i, e.len);
        }
        Ok(n)
    }
}

impl Drop for OfiTransport {
    fn drop(&mut self) {
        // Let the sends in flight leave (bounded: a peer may be gone), then close the
        // endpoint before the registrations and the buffers go. Injected packets have no
        // completion: a packet of the header alone (version CLOSING, skipped by the
        // receiver), sent with one behind them to each peer that got some, says when they
        // left (the provider keeps a peer's sends in order).
        self.closing = true;
        let start = std::time::Instant::now();
        for i in 0..self.peers.len() {
            let Some(p) = self.peers[i] else { continue };
            if p.lost || p.injected == 0 {
                continue;
            }
            while start.elapsed() < std::time::Duration::from_secs(2) {
                match self.post_send(PeerId(i as u32), p.addr, CLOSING, &[]) {
                    Ok(SendOutcome::WouldBlock) => {
                        if self.progress().is_err() {
                            break;
                        }
                    }
                    _ => break,
                }
            }
        }
        while self.tx_free.len() < self.tx_peer.len()
            && start.elapsed() < std::time::Duration::from_secs(2)
        {
            match self.progress() {
                Ok(0) => std::thread::yield_now(),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        self.ep.close_ep();
    }
}

impl Transport for OfiTransport {
    fn caps(&self) -> &Caps {
        &self.caps
    }

    fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        let p = self.check_peer(peer)?;
        if p.lost {
            return Err(Error::PeerLost(peer));
        }
        let len: usize = iov.iter().map(|s| s.len()).sum();
        if len > self.caps.max_packet {
            return Err(Error::Invalid(format!(
                "packet of {len} bytes exceeds max_packet {}",
                self.caps.max_packet
            )));
        }
        if HDR + len <= self.inject_max {
            return self.inject(peer, p.addr, iov, len);
        }
        self.post_send(peer, p.addr, self.version, iov)
    }

    fn card(&self) -> Option<String> {
        Some(format!(
            "{}:{}",
            card_provider(self.provider()),
            hex(&self.address)
        ))
    }

    fn connect(&mut self, peer: PeerId, card: &str) -> Result<()> {
        let bad =
            |why: &str| Error::Invalid(format!("ofi: card of rank {}: {why}: {card}", peer.0));
        let (prov, addr) = card.split_once(':').ok_or_else(|| bad("no provider"))?;
        let mine = card_provider(self.provider());
        if prov != mine {
            return Err(Error::Invalid(format!(
                "ofi: rank {} uses provider {}, rank {} uses {} (set MADMPI_OFI_PROVIDER \
                 alike on every host)",
                peer.0,
                prov.replace('+', ";"),
                self.me,
                self.provider()
            )));
        }
        let mut addr = unhex(addr).ok_or_else(|| bad("address not in hex"))?;
        if addr.is_empty() || addr.len() > 4096 {
            return Err(bad("address length"));
        }
        // The provider reads an address of its own format: never past the buffer.
        let len = addr.len().max(self.address.len()).max(256);
        addr.resize(len, 0);
        let slot = self
            .peers
            .get_mut(peer.0 as usize)
            .ok_or_else(|| bad("rank out of range"))?;
        if slot.is_some() {
            return Ok(());
        }
        let fi_addr = self.ep.av_insert(&addr)?;
        *slot = Some(Peer {
            addr: fi_addr,
            lost: false,
            injected: 0,
        });
        let a = self.ep.attr();
        tracing::info!(
            rank = self.me,
            peer = peer.0,
            provider = %a.provider,
            fabric = %a.fabric,
            domain = %a.domain,
            "ofi: rank {} reaches rank {} through provider {}",
            self.me,
            peer.0,
            a.provider
        );
        Ok(())
    }

    fn poll_recv(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        // A few batches at most: the caller polls again.
        for _ in 0..4 {
            if self.progress()? < CQ_BATCH {
                break;
            }
        }
        let delivered = self.deliver_ready(deliver);
        if !self.rx_idle.is_empty() {
            self.post_receives()?;
        }
        Ok(delivered)
    }

    // (Registering reads nothing here; the provider serves the peers' reads from the memory
    // until `deregister`, which the engine calls once the send completed: the trait's
    // contract, as for `get`'s local buffers.)
    #[allow(clippy::not_unsafe_ptr_arg_deref)]
    fn register(&mut self, ptr: *const u8, len: usize) -> Result<u64> {
        if !self.caps.registers_memory {
            return Ok(0);
        }
        let asked = self.next_key;
        self.next_key += 1;
        // SAFETY: the engine keeps the buffer until the send completes, and deregisters it
        // then (before the memory may go).
        let mr = unsafe {
            self.ep
                .register(ptr, len.max(1), Access::RemoteRead, asked)?
        };
        let key = mr.key;
        self.registrations += 1;
        // (Keys of live registrations are distinct: ours by the counter, a provider's by
        // FI_MR_PROV_KEY.)
        self.regs.insert(key, mr);
        Ok(key)
    }

    fn deregister(&mut self, key: u64) {
        self.regs.remove(&key);
    }

    fn get(
        &mut self,
        peer: PeerId,
        remote: RemoteRegion,
        local: &mut [IoSliceMut<'_>],
    ) -> Result<()> {
        if !self.caps.can_get {
            return Err(Error::Unsupported(
                "get over ofi (the provider has no FI_RMA)",
            ));
        }
        let src = self.check_peer(peer)?.addr;
        let a = self.ep.attr();
        let (local_mr, virt) = (a.mr_local, a.mr_virt_addr);
        let max = usize::try_from(a.max_msg_size).unwrap_or(usize::MAX).max(1);
        let at = self.ctx.len() - 1;
        let ctx: *mut Context = &mut self.ctx[at];
        let mut from = if virt {
            remote.addr
        } else {
            remote.addr.wrapping_sub(remote.base)
        };
        let mut keep = Vec::new();
        for l in local.iter_mut() {
            let desc = if local_mr && !l.is_empty() {
                // SAFETY: the registration is dropped below, after every read into `l` completed.
                let mr = unsafe {
                    self.ep
                        .register(l.as_mut_ptr(), l.len(), Access::Local, 0)?
                };
                let d = mr.desc;
                keep.push(mr);
                d
            } else {
                std::ptr::null_mut()
            };
            let mut done = 0;
            while done < l.len() {
                let n = (l.len() - done).min(max);
                // SAFETY: `l[done..done + n]` is ours until the read completes: this call waits
                // for it below; `ctx` lives as long as the driver.
                let posted = unsafe {
                    self.ep.read(
                        l.as_mut_ptr().add(done),
                        n,
                        desc,
                        src,
                        from,
                        remote.key,
                        ctx,
                    )?
                };
                if posted {
                    self.reads += 1;
                    done += n;
                    from += n as u64;
                } else {
                    self.progress()?;
                }
            }
        }
        // (The peer serves the read in its own progress: on a host with more processes than
        // cores it needs this one's CPU now and then. A yield per idle poll cost a system call
        // each, several per transfer.)
        let mut idle = 0u32;
        while self.reads > 0 {
            if self.progress()? == 0 {
                idle += 1;
                if idle > READ_SPIN && idle % READ_YIELD_EVERY == 0 {
                    std::thread::yield_now();
                }
            }
        }
        drop(keep);
        match self.read_failed.take() {
            None => {
                self.gets += 1;
                self.read_bytes += remote.len;
                Ok(())
            }
            Some(text) => Err(Error::Io {
                what: format!(
                    "ofi (provider {}): fi_read from rank {}",
                    self.provider(),
                    peer.0
                ),
                source: std::io::Error::other(text),
            }),
        }
    }

    fn reaches(&self, peer: PeerId) -> bool {
        self.peers.get(peer.0 as usize).is_some_and(Option::is_some)
    }

    fn register_window(&mut self, ptr: *mut u8, len: usize) -> Result<u64> {
        self.rma_register_window(ptr, len)
    }

    unsafe fn rma_post(
        &mut self,
        peer: PeerId,
        write: bool,
        remote: RemoteRegion,
        local: *mut u8,
        len: usize,
        token: u64,
    ) -> Result<()> {
        // SAFETY: forwarded.
        unsafe { self.rma_post_now(peer, write, remote, local, len, token) }
    }

    fn rma_poll(&mut self, done: &mut dyn FnMut(u64, Option<String>)) -> Result<()> {
        self.rma_poll_now(done)
    }

    fn rma_min(&self) -> usize {
        self.rma.min
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        vec![
            ("rdma_gets", self.gets),
            ("rdma_read_bytes", self.read_bytes),
            ("registrations", self.registrations),
            ("injects", self.injects),
            ("rma_windows", self.rma.windows),
            ("rma_writes", self.rma.writes),
            ("rma_write_bytes", self.rma.write_bytes),
            ("rma_reads", self.rma.reads),
            ("rma_read_bytes", self.rma.read_bytes),
        ]
    }

    fn poll_lost(&mut self) -> Option<PeerId> {
        self.lost.pop_front()
    }
}
