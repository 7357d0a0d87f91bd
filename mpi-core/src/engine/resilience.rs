//! Losing a rail: a peer reached by several rails stays reachable when one of them fails (its
//! link went down), and nothing that was in flight on the failed rail is lost.
//!
//! Only gates with more than one rail (*resilient* gates) pay for this; a gate with one rail
//! fails its peer when that rail fails, as before. On a resilient gate:
//!
//! - **Every chunk but data is numbered.** Message chunks (Eager, Rts) and one-sided chunks are
//!   numbered anyway; control chunks (Cts, Fin, SyncAck, CancelReq, CancelAck) leave wrapped in a
//!   `Ctrl` chunk that is numbered too (`wrap`). The receiver handles numbered chunks in
//!   sequence order and drops a number it handled already (a copy sent again).
//! - **The sender keeps a copy of every numbered chunk until the receiver acknowledges it**
//!   (`retain`; `Ack` chunks, cumulative, one per [`ACK_EVERY`] numbered chunks handled, and at
//!   once after a duplicate). When a rail fails, the copies not yet acknowledged are sent again
//!   on the rails left (`resend`): whatever the failed rail swallowed arrives, once.
//! - **Rendezvous data is asked for piece by piece, each piece on one rail** (`FLAG_PART`
//!   Cts). A rail delivers in order, so what arrived of a piece is its beginning: when the rail
//!   fails, the receiver asks for the rest of each of its unfinished pieces on another rail
//!   (`pieces`). The sender drops the fragments it had queued on the failed rail, and keeps
//!   the send buffer until the receiver's Fin (`FLAG_FIN` in the Rts), since the data may be
//!   asked for again.
//! - **Either side may notice first** (a TCP driver notices from its socket: a write not
//!   acknowledged or a keepalive not answered within `MADMPI_TCP_LINK_TIMEOUT_MS`). The side
//!   that notices tells the other with a `RailDown` chunk on a rail that works, and both stop
//!   using the rail: nothing is sent on it, and what still comes in on it is ignored.

use std::collections::VecDeque;

use super::gate::{numbered, OutChunk};
use super::rails::DriverId;
use super::State;
use crate::request::RequestId;
use crate::wire::{self, Chunks, Header, Kind, HDR_LEN};

/// A receiver acknowledges the numbered chunks of a resilient gate at least this often.
pub(crate) const ACK_EVERY: u32 = 64;

/// What a resilient gate keeps for losing a rail.
#[derive(Default)]
pub(crate) struct Resilience {
    /// Copies of the numbered chunks that left and are not acknowledged yet, oldest first:
    /// (sequence number, the chunk as it was on the wire).
    pub unacked: VecDeque<(u32, Vec<u8>)>,
    /// Copies to send again (a rail failed), each a packet of its own.
    pub resend: VecDeque<Vec<u8>>,
    /// The last sequence number of the peer's that this process acknowledged.
    pub acked: u32,
    /// Acknowledge at the next occasion (a duplicate came in).
    pub ack_now: bool,
}

/// An unfinished piece of a rendezvous message pushed over a gate with several rails (or
/// whose sender wants a Fin): what came of it, for asking again, for the Fin, and for learning
/// its rail's bandwidth.
pub(crate) struct PieceRecv {
    pub rid: RequestId,
    pub peer: u32,
    /// The sender's request (for the Cts of a piece asked for again, and the Fin).
    pub sreq: u64,
    pub off: usize,
    pub len: usize,
    /// The rail it was asked for on.
    pub rail: usize,
    /// Bytes of it arrived (its beginning: a rail delivers in order).
    pub got: usize,
    /// The sender wants a Fin when the whole message is in (`FLAG_FIN`).
    pub fin: bool,
    /// When it was asked for (ns; 0: asked for again after a rail failed, which teaches
    /// nothing of the rail's bandwidth) and when its last byte came (0: not yet).
    pub asked: u64,
    pub done_at: u64,
}

/// Whether a control chunk of this kind travels wrapped (numbered) on a resilient gate.
#[inline]
pub(super) fn wrapped(kind: u8) -> bool {
    matches!(
        Kind::from_raw(kind),
        Some(
            Kind::Cts
                | Kind::Fin
                | Kind::SyncAck
                | Kind::CancelReq
                | Kind::CancelAck
                | Kind::RailDown
        )
    )
}

impl State {
    /// A control chunk for a resilient gate, wrapped into a `Ctrl` chunk (numbered when it
    /// leaves); other chunks as they are.
    pub(super) fn wrap(&mut self, c: OutChunk) -> OutChunk {
        if !wrapped(c.hdr.kind) || c.len != 0 {
            return c;
        }
        let hdr = Header {
            kind: Kind::Ctrl as u8,
            ..Default::default()
        };
        self.owned.chunk(hdr, c.hdr.encode().to_vec())
    }

    /// A packet left for `peer` on a resilient gate: keep a copy of its numbered chunks until
    /// they are acknowledged.
    pub(super) fn retain(&mut self, peer: u32, pkt: &[u8]) {
        let r = &mut self.gates[peer as usize].resil;
        for (h, payload) in Chunks::new(pkt).map_while(|c| c.ok()) {
            if !numbered(h.kind) {
                continue;
            }
            let enc = h.encode();
            let mut v = Vec::with_capacity(wire::pad8(enc.len() + payload.len()));
            v.extend_from_slice(&enc);
            v.extend_from_slice(payload);
            v.resize(wire::pad8(v.len()), 0);
            r.unacked.push_back((h.seq, v));
        }
    }

    /// `peer` handled our numbered chunks up to `upto`.
    pub(super) fn acked(&mut self, peer: u32, upto: u32) {
        let r = &mut self.gates[peer as usize].resil;
        while let Some(&(seq, _)) = r.unacked.front() {
            // (Sequence numbers wrap: `seq` is at or before `upto`.)
            if upto.wrapping_sub(seq) > u32::MAX / 2 {
                break;
            }
            r.unacked.pop_front();
        }
    }

    /// After input from `peer` on a resilient gate: acknowledge what was handled, when due.
    pub(super) fn maybe_ack(&mut self, peer: u32) {
        let last = self.order[peer as usize].expect.wrapping_sub(1);
        let r = &mut self.gates[peer as usize].resil;
        let pending = last.wrapping_sub(r.acked);
        if pending == 0 || (pending < ACK_EVERY && !r.ack_now) {
            return;
        }
        r.acked = last;
        r.ack_now = false;
        self.queue_header(
            peer,
            Header {
                kind: Kind::Ack as u8,
                msg_len: last as u64,
                ..Default::default()
            },
        );
    }

    /// Whether the packet being handled came from `peer` on a rail of its gate that failed
    /// (then it is ignored).
    #[inline]
    pub(super) fn input_on_dead_rail(&self, peer: u32) -> bool {
        let g = &self.gates[peer as usize];
        g.resilient() && g.rails.iter().any(|r| r.dead && r.drv == self.polling)
    }

    /// Driver `drv` lost `peer`: on a resilient gate with another rail left, that rail is lost
    /// (the peer stays reachable); otherwise the peer is lost.
    pub(crate) fn driver_lost(&mut self, peer: u32, drv: DriverId) {
        let g = &self.gates[peer as usize];
        let rail = g.rails.iter().position(|r| r.drv == drv);
        match rail {
            Some(r)
                if g.resilient() && g.rails.iter().enumerate().any(|(i, x)| i != r && !x.dead) =>
            {
                self.rail_down(peer, r, true)
            }
            _ => self.peer_lost(peer),
        }
    }

    /// Rail `rail` of `peer`'s gate failed (`notify`: we noticed it, so tell the peer): stop
    /// using it, send again what it may have swallowed, and ask again for the rendezvous
    /// data that was coming on it.
    pub(super) fn rail_down(&mut self, peer: u32, rail: usize, notify: bool) {
        let g = &mut self.gates[peer as usize];
        if g.dead || rail >= g.rails.len() || g.rails[rail].dead {
            return;
        }
        let Some(live) = (0..g.rails.len()).find(|&i| i != rail && !g.rails[i].dead) else {
            return self.peer_lost(peer);
        };
        tracing::warn!(
            peer,
            rail = g.rails[rail].name,
            "rail lost: the others carry on"
        );
        crate::trace::rail_lost(peer);
        g.rails[rail].dead = true;
        // The fragments queued on it are not sent: the receiver asks for them again.
        g.rails[rail].out.clear();
        if rail == 0 || g.driver == g.rails[rail].drv {
            // The first rail carried the messages: the next one does.
            let r = &g.rails[live];
            g.driver = r.drv;
            g.eager_max = g.eager_max.min(r.eager_max);
            g.frag_max = r.frag_max;
            g.aggreg_max = g.aggreg_max.min(r.frag_max + HDR_LEN);
            g.pack_max = g.pack_max.min(g.aggreg_max);
            g.max_iov = r.max_iov;
            g.can_get = g.can_get && r.can_get;
        }
        let copies: Vec<Vec<u8>> = g.resil.unacked.iter().map(|(_, v)| v.clone()).collect();
        g.resil.resend.extend(copies);
        if !g.queued {
            g.queued = true;
            self.dirty.push(peer);
        }
        if notify {
            self.queue_ctrl_tagged(peer, Kind::RailDown, rail as i32);
        }
        // The pieces that were coming on it: the rest of each, on a rail that works.
        let mut again = Vec::new();
        for p in self.pieces.iter_mut() {
            if p.peer == peer && p.rail == rail && p.got < p.len {
                p.off += p.got;
                p.len -= p.got;
                p.got = 0;
                p.rail = live;
                p.asked = 0;
                again.push((p.off, p.len, p.sreq, p.rid));
            }
        }
        for (off, len, sreq, rid) in again {
            self.queue_piece_cts(peer, live, off, len, sreq, rid);
        }
    }

    /// Queue the Cts that asks for `len` bytes from `off` of the rendezvous send `sreq` on
    /// rail `rail` (matched by the receive `rid`), cut where a piece's 32-bit length needs it.
    pub(super) fn queue_piece_cts(
        &mut self,
        peer: u32,
        rail: usize,
        mut off: usize,
        len: usize,
        sreq: u64,
        rid: RequestId,
    ) {
        let end = off + len;
        while off < end {
            let n = (end - off).min(1 << 30);
            self.queue_header(
                peer,
                Header {
                    kind: Kind::Cts as u8,
                    flags: wire::FLAG_PART,
                    tag: rail as i32,
                    seq: n as u32,
                    msg_len: off as u64,
                    sreq,
                    aux: rid.0,
                    ..Default::default()
                },
            );
            off += n;
        }
    }

    /// `n` bytes of data from offset `off` of the receive `rid` came in from `peer`: account
    /// for them in their piece.
    #[cold]
    pub(super) fn piece_data(&mut self, peer: u32, rid: RequestId, off: usize, n: usize) {
        if let Some(p) = self
            .pieces
            .iter_mut()
            .find(|p| p.rid == rid && p.peer == peer && p.off + p.got == off)
        {
            p.got += n;
            if p.got >= p.len {
                p.done_at = crate::trace::clock_ns();
            }
        }
    }

    /// The receive `rid` from `peer` has all its data: teach each rail the rate its pieces
    /// came at (from their Cts to their last byte: the receiver's view, as the sender's would
    /// measure its socket buffers), forget the pieces and send the Fin the sender waits for.
    #[cold]
    pub(super) fn pieces_done(&mut self, peer: u32, rid: RequestId) {
        let mut fin = None;
        let g = &mut self.gates[peer as usize];
        // Per rail: bytes, when asked, when the last came (a rail with a piece asked for
        // again teaches nothing).
        let mut rails = vec![(0usize, 0u64, 0u64); g.rails.len()];
        self.pieces.retain(|p| {
            let mine = p.rid == rid && p.peer == peer;
            if mine {
                if p.fin {
                    fin = Some(p.sreq);
                }
                if let Some(r) = rails.get_mut(p.rail) {
                    r.0 += p.len;
                    r.1 = if p.asked == 0 {
                        u64::MAX
                    } else {
                        r.1.max(p.asked)
                    };
                    r.2 = r.2.max(p.done_at);
                }
            }
            !mine
        });
        for (rail, &(want, asked, last)) in g.rails.iter_mut().zip(&rails) {
            if want > 0 && asked != u64::MAX && last > asked {
                rail.learn(want, last - asked);
            }
        }
        if let Some(sreq) = fin {
            self.queue_ctrl(peer, Kind::Fin, 0, sreq, 0);
        }
    }
}
