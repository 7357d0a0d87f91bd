//! The emulated NIC of one process: timing (the LogGP model of [`super::profile`]), the
//! protocol of each transmission module (credits, receiver handshake, registration), and the
//! reliable link of BCL-3 (sequence numbers, CRC, ACK/NAK, go-back-N retransmission) over a
//! wire that drops and corrupts frames when asked (`MADMPI_EMU_LOSS`).
//!
//! The wire is a `shm` segment of its own (per-pair rings): a frame is written at once, with
//! the time at which the emulated network makes it visible; the receiving side keeps frames
//! that arrived early in a queue per peer and handles them, in order, once that time has come.

use std::collections::VecDeque;
use std::io::IoSlice;

use super::clock::{now_ns, spin_until};
use super::frame::{frame_crc, Header, Kind, HDR};
use super::profile::Profile;
use super::Stats;
use crate::shm::ShmTransport;
use crate::{Error, PeerId, Result, SendOutcome, Transport};

/// Frames a reliable sender keeps unacknowledged per peer before it stalls.
const WINDOW: usize = 64;
/// Bytes a reliable sender keeps unacknowledged per peer before it stalls.
const WINDOW_BYTES: usize = 2 << 20;

/// Frame buffers kept for reuse (taking a frame off the ring copies it into one: no allocation
/// per frame once the link is warm), and the largest capacity kept.
const SPARE_FRAMES: usize = 64;
const SPARE_FRAME_MAX: usize = 64 << 10;

/// Slices of a frame gathered on the stack up to this many (more: on the heap).
const IOV_STACK: usize = 8;

/// A poll that finds a frame becoming visible within this many ns waits for it (about one
/// progress pass of the engine: the lag with which a poll loop would otherwise notice it).
const NEAR_NS: u64 = 500;

/// The knobs of one emulated NIC.
#[derive(Clone, Debug)]
pub struct NicConfig {
    /// The network.
    pub profile: &'static Profile,
    /// Probability of each frame being dropped, and (separately) of one bit being flipped.
    pub loss: f64,
    /// The modules in use (bit `k`: module `k` of the profile).
    pub modules: u64,
    /// Registration cache entries.
    pub reg_cache: usize,
    /// Seed of the fault injector.
    pub seed: u64,
}

/// A frame sent and not yet acknowledged (reliable profiles).
struct Sent {
    seq: u32,
    frame: Vec<u8>,
    /// When the receiver may see it (its retransmission timer runs from there).
    visible: u64,
    /// Sent more than once: its acknowledgement says nothing of the round trip (Karn).
    retx: bool,
}

/// The least retransmission timeout beyond a control frame's round trip, ns: a few of the
/// scheduler's time slices, as the receiver's NIC is played by a process that may be
/// descheduled (a real one answers whatever its host does); real losses are mostly repaired
/// by a NAK, the timeout only catches the last frame of a burst.
const RTO_MIN: u64 = 2_000_000;
/// The longest retransmission timeout after repeated timeouts (backoff), ns.
const RTO_MAX: u64 = 100_000_000;

#[derive(Default)]
struct Tx {
    /// When the last frame towards this peer becomes visible (the link keeps order).
    last_visible: u64,
    /// Credits left per module.
    credits: Vec<u32>,
    /// A request to send is out (handshake modules).
    rts_sent: bool,
    /// The receiver said it is ready: the next handshake packet may leave.
    granted: bool,
    next_seq: u32,
    unacked: VecDeque<Sent>,
    unacked_bytes: usize,
    last_retx: u64,
    /// Time from a frame's visibility to its acknowledgement: smoothed, and its variation
    /// (RFC 6298's estimator, on the receiver's reaction time instead of the whole round
    /// trip, so that the frame's size does not enter), ns; 0: no sample yet.
    srtt: u64,
    rttvar: u64,
    /// How long after a frame's visibility it is resent if not acknowledged, ns.
    ack_rto: u64,
    /// Control frames the ring had no room for (unreliable profiles).
    ctl_pending: VecDeque<Vec<u8>>,
}

#[derive(Default)]
struct Rx {
    /// Frames taken from the ring, not yet visible or not yet handled, each with the result of
    /// its CRC check (made once, as the frame comes off the ring: a real NIC checks it at wire
    /// speed as the frame arrives; `true` on profiles without CRC).
    wire: VecDeque<(Vec<u8>, bool)>,
    /// Data accepted by the NIC, for the host: (module, frame).
    ready: VecDeque<(u8, Vec<u8>)>,
    /// Next sequence number expected.
    expected: u32,
    /// Static buffers consumed since the last credit return, per module.
    consumed: Vec<u32>,
    ack_due: bool,
    /// The last NAK: (expected, when).
    nak: Option<(u32, u64)>,
}

struct Peer {
    id: PeerId,
    tx: Tx,
    rx: Rx,
}

/// One process's emulated NIC.
pub(crate) struct Nic {
    cfg: NicConfig,
    wire: ShmTransport,
    max_packet: usize,
    peers: Vec<Peer>,
    /// `index[rank]`: 1 + the position of that peer in `peers`, 0 if it is not one (a
    /// direct lookup per packet, no hashing).
    index: Vec<u32>,
    /// Frame buffers for reuse ([`SPARE_FRAMES`]).
    spare: Vec<Vec<u8>>,
    /// When the NIC can start the next packet.
    nic_free: u64,
    /// Registered ranges (start, end), most recent last.
    regs: VecDeque<(u64, u64)>,
    rng: u64,
    rto: u64,
    /// The least `ack_rto`: 0.5 ms beyond a control frame's round trip.
    rto_min: u64,
    rtt: u64,
    /// When the host or the firmware last serviced the NIC.
    pub(crate) last_service: u64,
    /// An error found by the firmware thread, for the host's next call.
    pub(crate) deferred: Option<Error>,
    pub(crate) stats: Stats,
}

fn seq_before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

impl Nic {
    pub(crate) fn new(cfg: NicConfig, wire: ShmTransport, peers: &[PeerId], me: PeerId) -> Nic {
        let nmod = cfg.profile.modules.len();
        let credits: Vec<u32> = cfg.profile.modules.iter().map(|m| m.credits).collect();
        let mut list = Vec::new();
        let top = peers.iter().map(|p| p.0 as usize + 1).max().unwrap_or(0);
        let mut index = vec![0u32; top];
        for &p in peers.iter().filter(|&&p| p != me) {
            index[p.0 as usize] = list.len() as u32 + 1;
            list.push(Peer {
                id: p,
                tx: Tx {
                    credits: credits.clone(),
                    ..Tx::default()
                },
                rx: Rx {
                    consumed: vec![0; nmod],
                    ..Rx::default()
                },
            });
        }
        let max_packet = wire.caps().max_packet - HDR;
        let m0 = &cfg.profile.modules[0];
        let rtt = 2 * (m0.o_s + m0.l + m0.o_r);
        let rto = 500_000 + 2 * cfg.profile.one_way_ns(max_packet, cfg.modules);
        let rto_min = RTO_MIN + rtt;
        for p in &mut list {
            p.tx.ack_rto = rto_min;
        }
        Nic {
            rng: cfg.seed | 1,
            cfg,
            wire,
            max_packet,
            peers: list,
            index,
            spare: Vec::new(),
            nic_free: 0,
            regs: VecDeque::new(),
            rto,
            rto_min,
            rtt,
            last_service: 0,
            deferred: None,
            stats: Stats::default(),
        }
    }

    pub(crate) fn wire(&mut self) -> &mut ShmTransport {
        &mut self.wire
    }

    pub(crate) fn max_packet(&self) -> usize {
        self.max_packet
    }

    pub(crate) fn reaches(&self, peer: PeerId) -> bool {
        slot(&self.index, peer.0).is_some()
    }

    pub(crate) fn profile_name(&self) -> &'static str {
        self.cfg.profile.name
    }

    pub(crate) fn reliable(&self) -> bool {
        self.cfg.profile.reliable
    }

    pub(crate) fn rto(&self) -> u64 {
        self.rto
    }

    fn peer_index(&self, peer: PeerId) -> Result<usize> {
        slot(&self.index, peer.0).ok_or_else(|| {
            Error::Invalid(format!(
                "emu: rank {} is not another process of this node",
                peer.0
            ))
        })
    }

    fn rand(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Whether `[addr, addr+len)` is registered already (a hit refreshes the entry).
    fn reg_hit(&mut self, addr: u64, len: usize) -> bool {
        let (s, e) = (addr & !4095, (addr + len as u64).div_ceil(4096) * 4096);
        if let Some(k) = self.regs.iter().position(|&(a, b)| a <= s && e <= b) {
            let r = self.regs.remove(k).unwrap_or((s, e));
            self.regs.push_back(r);
            return true;
        }
        false
    }

    fn reg_insert(&mut self, addr: u64, len: usize) {
        if self.cfg.reg_cache == 0 {
            return;
        }
        let (s, e) = (addr & !4095, (addr + len as u64).div_ceil(4096) * 4096);
        if self.regs.len() >= self.cfg.reg_cache {
            self.regs.pop_front();
        }
        self.regs.push_back((s, e));
    }

    /// Put a frame on the wire, where the fault injector may drop it or flip one bit of it.
    /// `Ok(false)`: the ring is full, nothing was written.
    fn transmit(&mut self, i: usize, frame: &[&[u8]]) -> Result<bool> {
        let peer = self.peers[i].id;
        if self.cfg.loss > 0.0 {
            let r = (self.rand() >> 11) as f64 / (1u64 << 53) as f64;
            if r < self.cfg.loss {
                self.stats.dropped += 1;
                return Ok(true);
            }
            if r < 2.0 * self.cfg.loss {
                let mut bad = frame.concat();
                let bit = self.rand() as usize % (bad.len() * 8);
                bad[bit / 8] ^= 1 << (bit % 8);
                self.stats.flipped += 1;
                return Ok(self.wire.try_send(peer, &[IoSlice::new(&bad)])? == SendOutcome::Done);
            }
        }
        let sent = if frame.len() <= IOV_STACK {
            let mut iov = [IoSlice::new(&[]); IOV_STACK];
            for (v, b) in iov.iter_mut().zip(frame) {
                *v = IoSlice::new(b);
            }
            self.wire.try_send(peer, &iov[..frame.len()])?
        } else {
            let iov: Vec<IoSlice<'_>> = frame.iter().map(|b| IoSlice::new(b)).collect();
            self.wire.try_send(peer, &iov)?
        };
        Ok(sent == SendOutcome::Done)
    }

    /// Seal a reliable frame: sequence number (if sequenced), CRC.
    fn seal(frame: &mut [u8], seq: Option<u32>, visible: u64) {
        if let Some(s) = seq {
            frame[8..12].copy_from_slice(&s.to_le_bytes());
        }
        frame[16..24].copy_from_slice(&visible.to_le_bytes());
        let c = frame_crc(frame);
        frame[24..28].copy_from_slice(&c.to_le_bytes());
    }

    /// Send a control frame to peer `i` (errors towards a peer that is gone are ignored:
    /// the loss is reported by the data path and `poll_lost`).
    fn send_ctl(&mut self, i: usize, kind: Kind, module: u8, aux: u32, now: u64) {
        let m0 = self.cfg.profile.modules[0];
        let reliable = self.reliable();
        let mut h = Header::new(kind, 0);
        h.module = module;
        h.aux = aux;
        let tx = &mut self.peers[i].tx;
        h.visible = tx.last_visible.max(now + m0.o_s + m0.l);
        tx.last_visible = h.visible;
        let mut frame = h.encode().to_vec();
        if reliable {
            let seq = kind.sequenced().then_some(tx.next_seq);
            Self::seal(&mut frame, seq, h.visible);
            if let Some(s) = seq {
                tx.next_seq = s.wrapping_add(1);
                tx.unacked_bytes += frame.len();
                tx.unacked.push_back(Sent {
                    seq: s,
                    frame: frame.clone(),
                    visible: h.visible,
                    retx: false,
                });
            }
            // A frame the ring cannot take is lost like a dropped one: the timeout resends.
            let _ = self.transmit(i, &[&frame]);
            return;
        }
        if !tx.ctl_pending.is_empty() {
            tx.ctl_pending.push_back(frame);
            return;
        }
        match self.transmit(i, &[&frame]) {
            Ok(true) | Err(_) => {}
            Ok(false) => self.peers[i].tx.ctl_pending.push_back(frame),
        }
    }

    /// The host offers a packet.
    pub(crate) fn try_send(&mut self, peer: PeerId, iov: &[IoSlice<'_>]) -> Result<SendOutcome> {
        // The sender's o_s runs from here: the emulator's work below is part of it.
        let now = now_ns();
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let i = self.peer_index(peer)?;
        let len: usize = iov.iter().map(|b| b.len()).sum();
        if len > self.max_packet {
            return Err(Error::Invalid(format!(
                "emu: packet of {len} bytes exceeds max_packet {}",
                self.max_packet
            )));
        }
        self.service(now)?;
        if now < self.nic_free {
            self.stats.nic_busy += 1;
            return Ok(SendOutcome::WouldBlock);
        }
        let prof = self.cfg.profile;
        let mi = prof.module_for(len, self.cfg.modules);
        let m = prof.modules[mi];
        let reliable = self.reliable();
        {
            let tx = &self.peers[i].tx;
            if reliable && (tx.unacked.len() >= WINDOW || tx.unacked_bytes >= WINDOW_BYTES) {
                self.stats.window_stalls += 1;
                return Ok(SendOutcome::WouldBlock);
            }
            if m.credits > 0 && tx.credits[mi] == 0 {
                self.stats.credit_stalls += 1;
                return Ok(SendOutcome::WouldBlock);
            }
        }
        if m.handshake && !self.peers[i].tx.granted {
            if !self.peers[i].tx.rts_sent {
                self.peers[i].tx.rts_sent = true;
                self.stats.handshakes += 1;
                self.send_ctl(i, Kind::Rts, mi as u8, len as u32, now);
            }
            return Ok(SendOutcome::WouldBlock);
        }
        // Registration of the sender's buffer (the largest piece: the user's data).
        let (addr, blen) = iov
            .iter()
            .max_by_key(|b| b.len())
            .map_or((0, 0), |b| (b.as_ptr() as u64, b.len()));
        let reg = if m.reg.is_some() {
            if self.cfg.reg_cache > 0 && self.reg_hit(addr, blen) {
                self.stats.reg_hits += 1;
                0
            } else {
                m.reg_ns(blen)
            }
        } else {
            0
        };
        // The paper's middleware on its host (Madeleine II, MPI over BCL-3, MAD-MPI) runs with
        // each data packet, besides the network's o_s.
        let cpu = m.send_cpu_ns(len) + reg + prof.host.send_ns;
        let wire_t = m.wire_ns(len);
        let tx = &mut self.peers[i].tx;
        let visible = tx.last_visible.max(now + cpu + m.l + wire_t);
        let mut h = Header::new(Kind::Data, len);
        h.module = mi as u8;
        h.visible = visible;
        if reliable {
            let mut frame = Vec::with_capacity(HDR + len);
            frame.extend_from_slice(&h.encode());
            for b in iov {
                frame.extend_from_slice(b);
            }
            let seq = tx.next_seq;
            Self::seal(&mut frame, Some(seq), visible);
            if !self.transmit(i, &[&frame])? {
                return Ok(SendOutcome::WouldBlock);
            }
            let tx = &mut self.peers[i].tx;
            tx.next_seq = seq.wrapping_add(1);
            tx.unacked_bytes += frame.len();
            tx.unacked.push_back(Sent {
                seq,
                frame,
                visible,
                retx: false,
            });
        } else {
            let hb = h.encode();
            let sent = if iov.len() < IOV_STACK {
                let mut parts: [&[u8]; IOV_STACK] = [&[]; IOV_STACK];
                parts[0] = &hb;
                for (p, b) in parts[1..].iter_mut().zip(iov) {
                    *p = b;
                }
                self.transmit(i, &parts[..iov.len() + 1])?
            } else {
                let mut parts: Vec<&[u8]> = Vec::with_capacity(iov.len() + 1);
                parts.push(&hb);
                parts.extend(iov.iter().map(|b| &b[..]));
                self.transmit(i, &parts)?
            };
            if !sent {
                return Ok(SendOutcome::WouldBlock);
            }
        }
        if m.reg.is_some() && reg > 0 {
            self.stats.reg_misses += 1;
            self.reg_insert(addr, blen);
        }
        let tx = &mut self.peers[i].tx;
        tx.last_visible = visible;
        if m.credits > 0 {
            tx.credits[mi] -= 1;
        }
        if m.handshake {
            tx.granted = false;
            tx.rts_sent = false;
        }
        self.nic_free = now + cpu + wire_t;
        self.stats.sent[mi] += 1;
        // The host's share: its overhead (and registration or copy, and the middleware's).
        spin_until(now + cpu);
        Ok(SendOutcome::Done)
    }

    /// The NIC's work: take frames from the wire, handle the visible ones (control frames,
    /// checks, acknowledgements), resend what timed out. Data goes to the host's queue.
    pub(crate) fn service(&mut self, now: u64) -> Result<()> {
        self.last_service = now;
        let reliable = self.reliable();
        let Nic {
            wire,
            peers,
            index,
            stats,
            spare,
            ..
        } = self;
        wire.poll_recv(&mut |from, bytes| {
            if let Some(i) = slot(index, from.0) {
                stats.frames_in += 1;
                stats.crc_checks += u64::from(reliable);
                // The CRC is checked once per frame, here: not again at each look while the
                // frame waits for its visibility time (a 256 KiB frame's CRC, computed on every
                // poll, used to delay its delivery by up to two CRC times).
                let ok = !reliable
                    || (bytes.len() >= HDR
                        && u32::from_le_bytes(bytes[24..28].try_into().unwrap_or_default())
                            == frame_crc(bytes));
                let mut f = spare.pop().unwrap_or_default();
                f.clear();
                f.extend_from_slice(bytes);
                peers[i].rx.wire.push_back((f, ok));
            }
        })?;
        for i in 0..self.peers.len() {
            self.handle_arrivals(i, now)?;
            self.flush_ctl(i);
            if self.reliable() {
                self.reliability(i, now);
            }
        }
        Ok(())
    }

    fn flush_ctl(&mut self, i: usize) {
        while let Some(f) = self.peers[i].tx.ctl_pending.pop_front() {
            match self.transmit(i, &[&f]) {
                Ok(true) | Err(_) => {}
                Ok(false) => {
                    self.peers[i].tx.ctl_pending.push_front(f);
                    return;
                }
            }
        }
    }

    fn handle_arrivals(&mut self, i: usize, now: u64) -> Result<()> {
        let reliable = self.reliable();
        let prof = self.cfg.profile;
        while let Some((f, ok)) = self.peers[i].rx.wire.front() {
            if !*ok {
                // A damaged frame is dropped (and the gap it leaves asked for again).
                self.peers[i].rx.wire.pop_front();
                self.stats.crc_errors += 1;
                self.nak(i, now);
                continue;
            }
            let h = Header::decode(f)?;
            if h.visible > now {
                return Ok(());
            }
            let Some((f, _)) = self.peers[i].rx.wire.pop_front() else {
                return Ok(());
            };
            if reliable && h.kind.sequenced() {
                let rx = &mut self.peers[i].rx;
                if h.seq != rx.expected {
                    if seq_before(h.seq, rx.expected) {
                        // A duplicate (our ACK was lost or late): acknowledge again.
                        self.stats.duplicates += 1;
                        rx.ack_due = true;
                    } else {
                        self.stats.out_of_order += 1;
                        self.nak(i, now);
                    }
                    continue;
                }
                rx.expected = rx.expected.wrapping_add(1);
                rx.ack_due = true;
            }
            match h.kind {
                Kind::Data => {
                    let want = prof.module_for(h.len as usize, self.cfg.modules);
                    if want != h.module as usize {
                        return Err(Error::Malformed(format!(
                            "emu: rank {} sent {} bytes with module {}, this side selects {}",
                            self.peers[i].id.0, h.len, h.module, prof.modules[want].name
                        )));
                    }
                    self.peers[i].rx.ready.push_back((h.module, f));
                }
                Kind::Rts => {
                    self.recycle(f);
                    self.send_ctl(i, Kind::Cts, h.module, 0, now)
                }
                Kind::Cts => self.peers[i].tx.granted = true,
                Kind::Credit => {
                    let c = self.peers[i].tx.credits.get_mut(h.module as usize);
                    let cap = prof.modules.get(h.module as usize).map_or(0, |m| m.credits);
                    match c {
                        Some(c) if *c + h.aux <= cap => *c += h.aux,
                        _ => {
                            return Err(Error::Malformed(format!(
                                "emu: rank {} returned {} credits of module {}",
                                self.peers[i].id.0, h.aux, h.module
                            )))
                        }
                    }
                }
                Kind::Ack => self.acked(i, h.aux, now),
                Kind::Nak => {
                    self.acked(i, h.aux, now);
                    if now >= self.peers[i].tx.last_retx + self.rtt {
                        self.retransmit(i, now, usize::MAX);
                    }
                }
            }
        }
        Ok(())
    }

    fn nak(&mut self, i: usize, now: u64) {
        let rx = &mut self.peers[i].rx;
        let exp = rx.expected;
        if matches!(rx.nak, Some((e, t)) if e == exp && now < t + self.rtt) {
            return;
        }
        rx.nak = Some((exp, now));
        self.stats.naks += 1;
        self.send_ctl(i, Kind::Nak, 0, exp, now);
    }

    /// Every frame before `upto` arrived: forget them, and learn from the newest of them sent
    /// once how soon the receiver answers.
    fn acked(&mut self, i: usize, upto: u32, now: u64) {
        let tx = &mut self.peers[i].tx;
        let mut sample = None;
        let first = tx.unacked.front().map(|s| s.seq);
        while let Some(s) = tx.unacked.front() {
            if !seq_before(s.seq, upto) {
                break;
            }
            sample = (!s.retx).then(|| now.saturating_sub(s.visible));
            tx.unacked_bytes -= s.frame.len();
            tx.unacked.pop_front();
        }
        let advanced = sample.is_some() || tx.unacked.front().map(|s| s.seq) != first;
        if let Some(r) = sample {
            if tx.srtt == 0 {
                tx.srtt = r.max(1);
                tx.rttvar = r / 2;
            } else {
                tx.rttvar = (3 * tx.rttvar + tx.srtt.abs_diff(r)) / 4;
                tx.srtt = (7 * tx.srtt + r) / 8;
            }
        }
        if advanced {
            // Progress ends a backoff: the timeout is the estimator's again.
            tx.ack_rto = (tx.srtt + 4 * tx.rttvar).clamp(self.rto_min, RTO_MAX);
        }
    }

    /// Resend the first `count` unacknowledged frames, in order, on the NIC (no host time):
    /// all of them after a NAK (go-back-N), the first one after a timeout (the receiver's
    /// answer to it says what else is missing; a timeout that was only a late answer, a host
    /// descheduled for a while, then costs one frame, not the window).
    fn retransmit(&mut self, i: usize, now: u64, count: usize) {
        let prof = self.cfg.profile;
        let mut k = 0;
        while k < self.peers[i].tx.unacked.len().min(count) {
            let start = self.nic_free.max(now);
            let (frame, len, module) = {
                let s = &self.peers[i].tx.unacked[k];
                (s.frame.clone(), s.frame.len() - HDR, s.frame[1] as usize)
            };
            let m = prof.modules.get(module).unwrap_or(&prof.modules[0]);
            let tx = &mut self.peers[i].tx;
            let visible = tx.last_visible.max(start + m.o_s + m.l + m.wire_ns(len));
            let mut frame = frame;
            Self::seal(&mut frame, None, visible);
            match self.transmit(i, &[&frame]) {
                Ok(true) => {}
                Ok(false) | Err(_) => break,
            }
            self.stats.retransmitted += 1;
            self.nic_free = start + m.o_s + m.wire_ns(len);
            let tx = &mut self.peers[i].tx;
            tx.last_visible = visible;
            tx.unacked[k].frame = frame;
            tx.unacked[k].visible = visible;
            tx.unacked[k].retx = true;
            k += 1;
        }
        self.peers[i].tx.last_retx = now;
    }

    fn reliability(&mut self, i: usize, now: u64) {
        if self.peers[i].rx.ack_due {
            self.peers[i].rx.ack_due = false;
            let exp = self.peers[i].rx.expected;
            self.send_ctl(i, Kind::Ack, 0, exp, now);
        }
        let tx = &self.peers[i].tx;
        let timed_out = tx
            .unacked
            .front()
            .is_some_and(|s| now >= s.visible + tx.ack_rto);
        if timed_out {
            self.stats.timeouts += 1;
            self.retransmit(i, now, 1);
            let tx = &mut self.peers[i].tx;
            tx.ack_rto = (2 * tx.ack_rto).min(RTO_MAX);
        }
    }

    /// The host takes what the NIC accepted: each packet costs it `o_r`; static buffers are
    /// returned to the sender as credits, half a pool at a time.
    pub(crate) fn poll(&mut self, deliver: &mut dyn FnMut(PeerId, &[u8])) -> Result<usize> {
        if let Some(e) = self.deferred.take() {
            return Err(e);
        }
        let now = now_ns();
        self.service(now)?;
        // The host's o_r per packet runs from when this poll found it (the emulator's own
        // bookkeeping in this poll is part of it, as the sender's is part of o_s), then from
        // the end of the engine's handling of the previous packet.
        let mut start = now;
        if self.peers.iter().all(|p| p.rx.ready.is_empty()) {
            if let Some(v) = self.next_visible(now) {
                // A frame becomes visible within the next poll or so: wait for it here rather
                // than see it one progress pass late (a lag the network does not have). This
                // poll is looking when it becomes visible, so it finds it then, at `v`: taking
                // it in (the second look at the wire below) is part of its o_r.
                spin_until(v);
                self.service(now_ns())?;
                start = v;
            }
        }
        let prof = self.cfg.profile;
        let mut n = 0;
        for i in 0..self.peers.len() {
            while let Some((mi, f)) = self.peers[i].rx.ready.pop_front() {
                let m = &prof.modules[mi as usize];
                spin_until(start + m.o_r + prof.host.recv_ns);
                deliver(self.peers[i].id, &f[HDR..]);
                self.recycle(f);
                n += 1;
                start = now_ns();
                if m.credits > 0 {
                    let rx = &mut self.peers[i].rx;
                    rx.consumed[mi as usize] += 1;
                    if rx.consumed[mi as usize] >= m.credits.div_ceil(2) {
                        let c = std::mem::take(&mut rx.consumed[mi as usize]);
                        self.send_ctl(i, Kind::Credit, mi, c, start);
                    }
                }
            }
        }
        Ok(n)
    }

    /// Keep a frame's buffer for the next frame taken off the ring.
    fn recycle(&mut self, f: Vec<u8>) {
        if self.spare.len() < SPARE_FRAMES && f.capacity() <= SPARE_FRAME_MAX {
            self.spare.push(f);
        }
    }

    /// When the first frame waiting on the wire becomes visible, if that is less than
    /// [`NEAR_NS`] after `now`.
    fn next_visible(&self, now: u64) -> Option<u64> {
        self.peers
            .iter()
            .filter_map(|p| p.rx.wire.front())
            .filter(|(f, ok)| *ok && f.len() >= HDR)
            .map(|(f, _)| u64::from_le_bytes(f[16..24].try_into().unwrap_or_default()))
            .filter(|&v| v > now && v <= now + NEAR_NS)
            .min()
    }

    /// Nothing of ours is in flight: every frame sent is visible and (reliable) acknowledged,
    /// every frame received handled. For tests.
    pub(crate) fn idle(&self, now: u64) -> bool {
        self.peers.iter().all(|p| {
            p.tx.last_visible <= now
                && p.tx.unacked.is_empty()
                && p.tx.ctl_pending.is_empty()
                && p.rx.wire.is_empty()
        })
    }
}

/// The position in `peers` of world rank `rank`, if it is one of them.
#[inline]
fn slot(index: &[u32], rank: u32) -> Option<usize> {
    match index.get(rank as usize) {
        Some(&k) if k > 0 => Some(k as usize - 1),
        _ => None,
    }
}
