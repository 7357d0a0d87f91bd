//! Gates: the per-peer queue of outgoing chunks ([`Gate`], [`OutChunk`]) and what the engine
//! does with it. Commands queue chunks here (`queue`, `queue_ctrl`, `pin` for a fragment bound to
//! a rail); the progress loop asks the strategy for the next packet (`pick`), numbers its message
//! chunks (`number`) and reports what a driver took (`sent`, `sent_pinned`), which advances the
//! requests the chunks belong to. Also the gate of a peer from its rails (`gate_for`) and the
//! checked route of a fast-path send ([`Route`]).
//!
//! This module only changes state: it never calls a driver, never matches a message and never
//! blocks.

use std::collections::VecDeque;

use madmpi_datatypes::Datatype;

use super::rails::{DriverId, Rail, NO_DRIVER};
use super::resilience::Resilience;
use super::strategy::Commit;
use super::{raw_slice, State};
use crate::request::{Op, Request, RequestId, SendOp};
use crate::wire::{Header, Kind, HDR_LEN};

/// What to do when a chunk has been handed to the driver.
#[derive(Clone, Copy)]
pub(super) enum OnSent {
    Nothing,
    /// The Eager/Rts chunk of a send request.
    Send(RequestId),
    /// A Data fragment of a send request.
    Frag(RequestId),
    /// A chunk whose payload the engine owns (`State::owned`, one-sided communication): freed.
    Owned(u32),
}

/// The `kind` of the marker chunk that stands, in a gate's queue, for the records already
/// encoded into the gate's `packed` bytes (never on the wire as such: its records are).
pub(crate) const KIND_PACKED: u8 = 0;

pub(crate) struct OutChunk {
    pub(super) hdr: Header,
    pub(super) ptr: *const u8,
    pub(super) len: usize,
    pub(super) sent: OnSent,
    /// A Data fragment gathered from a non-contiguous user buffer at `ptr`: bytes
    /// `hdr.msg_len..+len` of the packed stream of `count` elements of the type.
    pub(super) gather: Option<(Datatype, usize)>,
}

impl OutChunk {
    /// The pieces of the user buffer a gathered fragment (`gather`) is made of, in order
    /// (none for another chunk).
    ///
    /// # Safety
    /// The send buffer is valid: the chunk's request has not completed.
    pub(super) unsafe fn gathered(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let off = self.hdr.msg_len as usize;
        self.gather.iter().flat_map(move |(dt, count)| {
            dt.segments(*count, off..off + self.len)
                // SAFETY: the segment lies in the send buffer (caller).
                .map(move |(mem, len)| unsafe { raw_slice(self.ptr.wrapping_offset(mem), len) })
        })
    }
}

/// The per-peer gate: outgoing chunks waiting for the strategy, its rails, and protocol
/// parameters (those of the first rail, which carries every message chunk under the built-in
/// strategies).
pub(crate) struct Gate {
    /// The first rail's driver (`NO_DRIVER`: the peer is unreachable).
    pub(super) driver: DriverId,
    /// The drivers that reach the peer, best first (`rails`).
    pub(super) rails: Vec<Rail>,
    pub(super) out: VecDeque<OutChunk>,
    /// The sequence number of the last message chunk (Eager, Rts) that left; queued chunks are
    /// numbered when they leave (a cancelled one leaves no gap).
    pub(super) seq: u32,
    /// Largest message sent eagerly.
    pub(super) eager_max: usize,
    /// Largest chunk payload (packet minus header).
    pub(super) frag_max: usize,
    /// Largest packet `aggreg` builds (at most the driver's largest packet).
    pub(super) aggreg_max: usize,
    /// A message of more than this many bytes travels in a packet of its own.
    pub(super) solo_min: usize,
    /// Largest packet the send fast path builds (`pack_routed`; a lone record may exceed it up
    /// to `aggreg_max`): `aggreg_max` unless `MADMPI_PACK_FLUSH` sets it
    /// ([`State::set_pack_flush`]).
    pub(super) pack_max: usize,
    /// The most sends the first packet of a burst holds (the first rail's `Caps::pack_count`,
    /// or `MADMPI_PACK_COUNT`): the packet leaves when the next send would exceed it, as a
    /// full one does.
    pub(super) pack_count: u32,
    /// The most sends the packet being built holds: `pack_count` for a burst's first packet,
    /// doubled for each next one (an early packet lets the receiver start; later ones
    /// amortize their cost over more sends).
    pub(super) pack_limit: u32,
    pub(super) max_iov: usize,
    /// Rendezvous data may be pulled with `get`.
    pub(super) can_get: bool,
    /// ... once the sender registered it with the first rail's driver (`FLAG_KEY`).
    pub(super) registers: bool,
    pub(super) queued: bool,
    /// The peer has died: every operation involving it fails with MPI_ERR_PROC_ABORTED.
    pub(super) dead: bool,
    /// What a gate with several rails keeps so that it may lose one (`resilience`).
    pub(super) resil: Resilience,
    /// Complete chunks (header, payload, padding) of small sends `aggreg` copied when they
    /// were posted; a `KIND_PACKED` marker holds their place in `out` (at most one, last).
    pub(super) packed: Vec<u8>,
    /// Messages in `packed` (the tool interface's chunks per packet).
    pub(super) packed_n: u32,
    /// The posted receive an eager message from this peer is being received into, straight
    /// from the driver (`RecvSink::place`); `placed` completes it.
    pub(super) placing: Option<RequestId>,
    /// Sends to this peer whose RTS carried the start of the message and that wait for their
    /// Cts.
    pub(super) prefixed: u32,
    /// The engine's progress epoch (`State::epoch`) in which a send to this peer last left at
    /// once under `lone_at_once`; the sends after it in the same epoch are packed.
    pub(super) lone_epoch: u32,
    /// Sends the fast path posted to this peer in epoch `lone_epoch` (saturating): where a
    /// burst leaves as one packet (`pack_count` unlimited: every packet a system call, TCP),
    /// the first send of an epoch after one that carried several is packed too, instead of
    /// leaving alone ahead of the packet (two writes where one does).
    pub(super) epoch_sends: u32,
}

impl Gate {
    /// The bookkeeping of a send posted to this peer under `lone_at_once` in progress epoch
    /// `epoch`: whether it should leave at once. The first send of an epoch does (and the
    /// burst's packet count starts again), unless this gate's bursts leave as one packet (no
    /// `pack_count`: TCP) and the epoch before carried several sends: then it is taken for the
    /// start of another burst (`epoch_sends`). The later ones of the epoch do not.
    #[inline(always)]
    pub(super) fn lone_send(&mut self, epoch: u32) -> bool {
        if self.lone_epoch == epoch {
            self.epoch_sends = self.epoch_sends.saturating_add(1);
            return false;
        }
        let burst = self.epoch_sends > 1 && self.pack_count == u32::MAX;
        self.lone_epoch = epoch;
        self.epoch_sends = 1;
        self.pack_limit = self.pack_count;
        !burst
    }

    /// The gate has several rails, and may lose one (`resilience`).
    #[inline(always)]
    pub(super) fn resilient(&self) -> bool {
        self.rails.len() > 1
    }

    /// Rail `r`, or the first that works if it has failed (`resilience`).
    #[inline]
    pub(super) fn live_rail(&self, r: usize) -> usize {
        match self.rails.get(r) {
            Some(x) if !x.dead => r,
            _ => self.rails.iter().position(|x| !x.dead).unwrap_or(0),
        }
    }

    /// The send `s` to this peer will get no Cts for a start its RTS carried (the Cts came, or
    /// the send was cancelled): a rendezvous to this peer may carry a start again once none
    /// waits ([`Gate::prefixed`]). Nothing for a send whose RTS carried none, or that is
    /// already past its Cts.
    pub(super) fn start_settled(&mut self, s: &SendOp) {
        if s.frag_sent > 0 && !s.fragmenting {
            self.prefixed = self.prefixed.saturating_sub(1);
        }
    }
}

/// Why `aggreg` did not copy a send into the packet it is building ([`State::pack_routed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NotPacked {
    /// The packet has no room left for it.
    Full,
    /// The send takes the general path.
    Other,
}

/// The gate of a peer reached by `rails` (best first; none: unreachable), its protocol
/// parameters those of the first rail. `caps` gives each rail's driver's capabilities.
pub(super) fn gate_for(rails: Vec<(DriverId, &madmpi_transports::Caps)>) -> Gate {
    let first = rails.first().map(|&(_, c)| c);
    let rails: Vec<Rail> = rails.into_iter().map(|(d, c)| Rail::new(d, c)).collect();
    let registers = rails.first().is_some_and(|r| r.registers);
    let (driver, eager, frag_max, aggreg, solo, count, iov, get) = match (rails.first(), first) {
        (Some(r), Some(c)) => (
            r.drv,
            r.eager_max,
            r.frag_max,
            c.aggreg_max.min(c.max_packet),
            c.solo_min,
            c.pack_count.max(1),
            r.max_iov,
            r.can_get,
        ),
        _ => (NO_DRIVER, 0, 1, HDR_LEN + 1, usize::MAX, u32::MAX, 2, false),
    };
    Gate {
        driver,
        rails,
        out: VecDeque::new(),
        seq: 0,
        eager_max: eager,
        frag_max,
        aggreg_max: aggreg,
        solo_min: solo,
        pack_max: aggreg,
        pack_count: count,
        pack_limit: count,
        max_iov: iov,
        can_get: get,
        registers,
        queued: false,
        dead: false,
        resil: Resilience::default(),
        packed: Vec::new(),
        packed_n: 0,
        placing: None,
        prefixed: 0,
        lone_epoch: u32::MAX,
        epoch_sends: 0,
    }
}

/// A message of the send fast paths, its arguments checked: world rank of the destination,
/// context, source rank and tag of its header, and its contiguous bytes (`off` from the
/// buffer, `bytes` long).
#[derive(Clone, Copy)]
pub(crate) struct Route {
    pub(super) peer: u32,
    pub(super) ctx: u32,
    pub(super) src: i32,
    pub(super) tag: i32,
    pub(super) off: isize,
    pub(super) bytes: usize,
}

impl Route {
    /// The header of the message as an eager chunk.
    #[inline(always)]
    pub(super) fn eager(&self, seq: u32, sreq: u64) -> Header {
        Header {
            kind: Kind::Eager as u8,
            flags: 0,
            ctx: self.ctx,
            src: self.src,
            tag: self.tag,
            seq,
            len: self.bytes as u32,
            msg_len: self.bytes as u64,
            sreq,
            aux: 0,
        }
    }
}

/// Chunks handled in sequence order at the receiver: messages, one-sided operations, and the
/// control chunks of a gate with several rails (`Ctrl`, see `resilience`).
#[inline(always)]
pub(super) fn numbered(kind: u8) -> bool {
    kind == Kind::Eager as u8
        || kind == Kind::Rts as u8
        || kind == Kind::Rma as u8
        || kind == Kind::Ctrl as u8
}

impl State {
    /// `MADMPI_PACK_FLUSH`: the packets the send fast path builds (`adaptive`, `aggreg`) hold
    /// at most `bytes` bytes (capped at each gate's `aggreg_max`; 0: `aggreg_max`, the
    /// default): a packet that has no room for the next send leaves then, as a full one does,
    /// so that the receiver works on it while the sender builds the next.
    pub fn set_pack_flush(&mut self, bytes: usize) {
        for g in &mut self.gates {
            g.pack_max = if bytes == 0 {
                g.aggreg_max
            } else {
                bytes.min(g.aggreg_max)
            };
        }
    }

    /// `MADMPI_PACK_COUNT`: the packets the send fast path builds hold at most `n` sends
    /// (0: each gate's first rail's `Caps::pack_count`, the default).
    pub fn set_pack_count(&mut self, n: u32) {
        if n > 0 {
            for g in &mut self.gates {
                g.pack_count = n;
                g.pack_limit = n;
            }
        }
    }

    /// No gate has chunks waiting for the strategy.
    #[inline(always)]
    pub fn nothing_queued(&self) -> bool {
        self.dirty.is_empty()
    }

    pub(super) fn queue(&mut self, peer: u32, mut c: OutChunk) {
        if !self.rma.open.is_empty() {
            // A batch of one-sided operations leaves before what is queued after it.
            self.rma_close(peer);
        }
        crate::trace::queued(peer, &c.hdr);
        if self.gates[peer as usize].resilient() {
            c = self.wrap(c);
        }
        let g = &mut self.gates[peer as usize];
        g.out.push_back(c);
        if !g.queued {
            g.queued = true;
            self.dirty.push(peer);
        }
    }

    /// Mark `peer`'s gate for the next progress (a batch of one-sided operations is open:
    /// `rma::batch`).
    pub(crate) fn mark_queued(&mut self, peer: u32) {
        let g = &mut self.gates[peer as usize];
        if !g.queued {
            g.queued = true;
            self.dirty.push(peer);
        }
    }

    /// Queue a Data fragment on rail `rail` of `peer`'s gate (the receiver cut the message
    /// over several rails).
    pub(super) fn pin(&mut self, peer: u32, rail: usize, c: OutChunk) {
        crate::trace::queued(peer, &c.hdr);
        let g = &mut self.gates[peer as usize];
        g.rails[rail].out.push_back(c);
        if !g.queued {
            g.queued = true;
            self.dirty.push(peer);
        }
    }

    pub(super) fn queue_ctrl(&mut self, peer: u32, kind: Kind, flags: u8, sreq: u64, aux: u64) {
        self.queue_header(
            peer,
            Header {
                kind: kind as u8,
                flags,
                sreq,
                aux,
                ..Default::default()
            },
        );
    }

    /// Queue a control chunk of `kind` whose only argument is `tag`.
    pub(super) fn queue_ctrl_tagged(&mut self, peer: u32, kind: Kind, tag: i32) {
        self.queue_header(
            peer,
            Header {
                kind: kind as u8,
                tag,
                ..Default::default()
            },
        );
    }

    /// Queue a chunk that is a header alone.
    pub(super) fn queue_header(&mut self, peer: u32, hdr: Header) {
        self.queue(
            peer,
            OutChunk {
                hdr,
                ptr: std::ptr::null(),
                len: 0,
                sent: OnSent::Nothing,
                gather: None,
            },
        );
    }

    fn on_sent(&mut self, s: OnSent, len: usize) {
        match s {
            OnSent::Nothing => {}
            OnSent::Owned(k) => self.release_owned(k),
            OnSent::Send(id) => {
                if let Some(Request {
                    op: Op::Send(op), ..
                }) = self.reqs.get_mut(id)
                {
                    op.queued = false;
                    self.maybe_complete_send(id);
                }
            }
            OnSent::Frag(id) => {
                if let Some(Request {
                    op: Op::Send(op), ..
                }) = self.reqs.get_mut(id)
                {
                    op.frag_sent += len;
                    self.maybe_complete_send(id);
                }
            }
        }
    }

    /// The next packet of `peer`'s gate, as the strategy commits it.
    #[inline]
    pub(super) fn pick(&self, peer: u32, busy: u32) -> Commit {
        self.strat.try_and_commit(&self.gates[peer as usize], busy)
    }

    /// Number the message chunks among the first `n` queued on `peer`'s gate, from the last
    /// number that left: they are about to be offered to a driver (numbers become final when
    /// the driver takes them, in [`State::sent`]; a refused packet is numbered again).
    pub(super) fn number(&mut self, peer: u32, n: usize) {
        let g = &mut self.gates[peer as usize];
        let mut seq = g.seq;
        for c in g.out.iter_mut().take(n) {
            if numbered(c.hdr.kind) {
                seq = seq.wrapping_add(1);
                c.hdr.seq = seq;
            }
        }
    }

    /// The first `n` chunks of `peer`'s gate were handed to the driver.
    pub(super) fn sent(&mut self, peer: u32, n: usize) {
        for _ in 0..n {
            let g = &mut self.gates[peer as usize];
            let c = g.out.pop_front().expect("n chunks queued");
            if c.hdr.kind == KIND_PACKED {
                g.packed.clear();
                g.packed_n = 0;
            } else if numbered(c.hdr.kind) {
                g.seq = c.hdr.seq;
            }
            self.on_sent(c.sent, c.len);
        }
    }

    /// The first fragment pinned to rail `rail` of `peer`'s gate was handed to its driver.
    pub(super) fn sent_pinned(&mut self, peer: u32, rail: usize) {
        let r = &mut self.gates[peer as usize].rails[rail];
        let c = r.out.pop_front().expect("a pinned chunk");
        self.on_sent(c.sent, c.len);
    }
}
