//! Inputs: what a peer's packet does. `handle_packet` cuts it into chunks; message chunks are
//! put back in order (`hold`, `release_held`) and matched or queued as unexpected; control chunks
//! (Cts, Fin, acknowledgements, cancellation) advance their requests. The [`RecvSink`]
//! implementation lets a driver write a large fragment or a matched message straight into the
//! receive buffer (`place_message`, `take_posted_contiguous`).
//!
//! Input only changes state and queues replies: it never calls a driver and never trusts a peer
//! (malformed input is dropped and recorded).

use madmpi_transports::{PeerId, Placement, RecvSink};

use super::{gather_worthy, OnSent, OutChunk, State, UBody, Unexpected};
use crate::request::{Op, Request, RequestId};
use crate::wire::{self, Chunks, Header, Kind, HDR_LEN};

impl State {
    /// Handle one packet from `peer`. Malformed input is dropped and recorded, never trusted.
    pub fn handle_packet(&mut self, peer: u32, pkt: &[u8]) {
        crate::trace::received(peer, pkt);
        let resilient = self.gates[peer as usize].resilient();
        if resilient && self.input_on_dead_rail(peer) {
            return;
        }
        for c in Chunks::new(pkt) {
            match c {
                // An eager message in its turn (the usual chunk): handled here, without the
                // call into `handle_chunk` and its dispatch on the kind.
                Ok((h, payload))
                    if h.kind == Kind::Eager as u8 && h.seq == self.order[peer as usize].expect =>
                {
                    self.message_in_turn(peer, true, h, payload)
                }
                Ok((h, payload)) => self.handle_chunk(peer, h, payload),
                Err(e) => {
                    self.peer_error(format!("from rank {peer}: {}", e.msg));
                    if !self.rma.acks_due.is_empty() {
                        self.rma_send_acks();
                    }
                    return;
                }
            }
        }
        // One answer per origin and window for the untracked one-sided operations of the
        // packet (`rma::batch`).
        if !self.rma.acks_due.is_empty() {
            self.rma_send_acks();
        }
        if resilient {
            self.maybe_ack(peer);
        }
    }

    /// The message `h` from `peer`, the one its sequence number says comes next: matched, then
    /// the ones held because they came before their turn.
    #[inline(always)]
    fn message_in_turn(&mut self, peer: u32, eager: bool, h: Header, payload: &[u8]) {
        let o = &mut self.order[peer as usize];
        o.expect = o.expect.wrapping_add(1);
        self.handle_message(peer, eager, h, payload);
        if !self.order[peer as usize].is_empty() {
            self.release_held(peer);
        }
    }

    fn handle_chunk(&mut self, peer: u32, h: Header, payload: &[u8]) {
        let Some(kind) = h.kind() else { return };
        match kind {
            Kind::Eager | Kind::Rts => {
                // Messages are matched in the order they were sent, whatever their rails.
                if h.seq != self.order[peer as usize].expect {
                    return self.hold(peer, h, payload);
                }
                self.message_in_turn(peer, kind == Kind::Eager, h, payload);
            }
            Kind::Rma | Kind::Ctrl => {
                // In sequence order with the messages of the same peer (see `Kind::Rma`,
                // `Kind::Ctrl`).
                let o = &mut self.order[peer as usize];
                if h.seq != o.expect {
                    return self.hold(peer, h, payload);
                }
                o.expect = o.expect.wrapping_add(1);
                self.handle_numbered(peer, h, payload);
                if !self.order[peer as usize].is_empty() {
                    self.release_held(peer);
                }
            }
            Kind::Ack => self.acked(peer, h.msg_len as u32),
            Kind::RailDown => {
                // (Only inside a `Ctrl` chunk: `handle_numbered`.)
                self.peer_error(format!("from rank {peer}: a RailDown chunk not numbered"))
            }
            Kind::Fin | Kind::SyncAck => {
                let id = RequestId(h.sreq);
                if let Some(Request {
                    op: Op::Send(s), ..
                }) = self.reqs.get_mut(id)
                {
                    s.await_ack = false;
                    self.maybe_complete_send(id);
                }
            }
            Kind::Cts => {
                let id = RequestId(h.sreq);
                let Some(Request {
                    op: Op::Send(s), ..
                }) = self.reqs.get_mut(id)
                else {
                    return;
                };
                // A Cts asks for the rest of the message; with `FLAG_PART`, for one piece of
                // it on one rail (the receiver cut it: `request_data`).
                let part = h.flags & wire::FLAG_PART != 0;
                if s.fragmenting && !part {
                    // (A second Cts for the same send: the peer is confused.)
                    return self.peer_error(format!("from rank {peer}: a second Cts"));
                }
                let g = &self.gates[peer as usize];
                if part && g.rails.get(h.tag.max(0) as usize).is_some_and(|r| r.dead) {
                    // A piece asked for on a rail that has failed since: the receiver asks
                    // for it again on another one when it learns of the failure.
                    return;
                }
                let resilient = g.resilient();
                if part {
                    // (Checked before anything changes: a forged piece leaves the send as it
                    // was.)
                    let (off, n, len) = (h.msg_len, h.seq as u64, s.len as u64);
                    if off.checked_add(n).is_none_or(|end| end > len) {
                        return self.peer_error(format!(
                            "from rank {peer}: a Cts for bytes {off}+{n} of a {len}-byte message"
                        ));
                    }
                }
                if !s.fragmenting {
                    self.gates[peer as usize].start_settled(s);
                    // On a gate with several rails the data may be asked for again: the
                    // buffer is kept until the receiver's Fin (`FLAG_FIN`).
                    s.await_ack = resilient;
                    s.fragmenting = true;
                    if let Some((buf, dt, count)) = s.extra.as_mut().and_then(|x| x.layout.take()) {
                        if gather_worthy(&dt, count) {
                            // Fragments gathered straight from the user buffer (the layout
                            // stays for the pieces of later Cts).
                            self.gather_sends += 1;
                            s.ptr = buf;
                            s.extra_mut().layout = Some((buf, dt, count));
                        } else {
                            // The receiver cannot pull the blocks: stream the packed bytes.
                            let mut v = vec![0u8; s.len];
                            // SAFETY: the send buffer is valid until the request completes.
                            unsafe { dt.pack(buf, count, 0, &mut v) };
                            s.ptr = v.as_ptr();
                            s.extra_mut().staging = Some(v);
                        }
                    }
                }
                let gather = s
                    .extra
                    .as_ref()
                    .and_then(|x| x.layout.as_ref())
                    .map(|(_, dt, count)| (dt.clone(), *count));
                let (ptr, len) = (s.ptr, s.len);
                // The fragments start after what the RTS carried (`frag_sent` counts it).
                let (from, to, rail) = if part {
                    // (In range: checked above.)
                    let (off, n) = (h.msg_len as usize, h.seq as usize);
                    let rails = self.gates[peer as usize].rails.len();
                    (
                        off,
                        off + n,
                        Some((h.tag.max(0) as usize).min(rails.max(1) - 1)),
                    )
                } else {
                    (s.frag_sent, len, None)
                };
                let frag = match rail {
                    Some(r) => self.gates[peer as usize].rails[r].frag_max,
                    None => self.gates[peer as usize].frag_max,
                };
                let mut off = from;
                while off < to {
                    let n = frag.min(to - off);
                    let hdr = Header {
                        kind: Kind::Data as u8,
                        len: n as u32,
                        msg_len: off as u64,
                        sreq: h.sreq,
                        aux: h.aux,
                        ..Default::default()
                    };
                    let chunk = match &gather {
                        Some(g) => OutChunk {
                            hdr,
                            ptr,
                            len: n,
                            sent: OnSent::Frag(id),
                            gather: Some(g.clone()),
                        },
                        None => OutChunk {
                            hdr,
                            ptr: ptr.wrapping_add(off),
                            len: n,
                            sent: OnSent::Frag(id),
                            gather: None,
                        },
                    };
                    match rail {
                        Some(r) => self.pin(peer, r, chunk),
                        None => self.queue(peer, chunk),
                    }
                    off += n;
                }
            }
            Kind::Data => {
                let id = RequestId(h.aux);
                let Some(r) = self.reqs.get_mut(id) else {
                    return self
                        .peer_error(format!("from rank {peer}: data for an unknown request"));
                };
                let Op::Recv(rv) = &mut r.op else { return };
                // SAFETY: the receive buffer is valid until completion; write_at clips.
                unsafe { rv.target.write_at(h.msg_len as usize, payload) };
                rv.got += payload.len() as u64;
                let done = rv.got >= rv.msg_len;
                if !self.pieces.is_empty() {
                    self.piece_data(peer, id, h.msg_len as usize, payload.len());
                    if done {
                        self.pieces_done(peer, id);
                    }
                }
                if done {
                    self.complete(id);
                }
            }
            Kind::CancelReq => {
                let mut found = false;
                for q in &mut self.mq {
                    if let Some(pos) = q
                        .unexpected
                        .iter()
                        .position(|u| u.peer == peer && u.sreq == h.sreq)
                    {
                        if let Some(u) = q.unexpected.remove(pos) {
                            self.stats.unexpected_out(u.held());
                        }
                        found = true;
                        break;
                    }
                }
                let flags = if found { wire::FLAG_CANCELLED } else { 0 };
                self.queue_ctrl(peer, Kind::CancelAck, flags, h.sreq, 0);
            }
            Kind::CancelAck => {
                let id = RequestId(h.sreq);
                let Some(r) = self.reqs.get_mut(id) else {
                    return;
                };
                let Op::Send(s) = &mut r.op else { return };
                s.cancel_wait = false;
                if h.flags & wire::FLAG_CANCELLED != 0 {
                    // No Cts will come.
                    self.gates[peer as usize].start_settled(s);
                    r.status.cancelled = true;
                    s.await_ack = false;
                    s.fragmenting = false;
                }
                self.maybe_complete_send(id);
            }
        }
    }

    /// A message chunk (Eager or Rts), in its turn.
    #[inline(always)]
    fn handle_message(&mut self, peer: u32, eager: bool, h: Header, payload: &[u8]) {
        // (An eager header carries no length of its own: the chunk's is the message's.)
        let Some(q) = self.peer_mq(h.ctx) else {
            return self.bad_context(peer, h.ctx);
        };
        let pos = q.find_posted(h.src, h.tag);
        if eager {
            if let Some(pos) = pos {
                // The usual case, matched to the oldest posted receive: no copy kept.
                let (_, _, rid) = q.posted.remove(pos).expect("in range");
                let sync = h.flags & wire::FLAG_SYNC != 0;
                self.deliver_eager(rid, h.src, h.tag, peer, payload);
                if sync {
                    self.queue_ctrl(peer, Kind::SyncAck, 0, h.sreq, 0);
                }
                return;
            }
        }
        self.not_posted(peer, h, payload, pos);
    }

    /// A message chunk that came before its turn (on another rail): kept until the ones
    /// before it have been handled.
    #[cold]
    #[inline(never)]
    pub(super) fn hold(&mut self, peer: u32, h: Header, payload: &[u8]) {
        let expect = self.order[peer as usize].expect;
        if let Err(why) = self.order[peer as usize].hold(h, payload) {
            let g = &mut self.gates[peer as usize];
            if g.resilient() && why == super::order::Refused::Old {
                // Sent again after a rail failed, and handled already: acknowledge at once,
                // so that the sender stops keeping it.
                g.resil.ack_now = true;
                return;
            }
            self.peer_error(format!(
                "from rank {peer}: message number {} while expecting {expect} ({why:?})",
                h.seq
            ));
        }
    }

    /// Handle the held chunks of `peer` whose turn has come.
    #[cold]
    #[inline(never)]
    fn release_held(&mut self, peer: u32) {
        while let Some((h, payload)) = self.order[peer as usize].next_held() {
            if h.kind == Kind::Rma as u8 || h.kind == Kind::Ctrl as u8 {
                self.handle_numbered(peer, h, &payload);
            } else {
                self.handle_message(peer, h.kind == Kind::Eager as u8, h, &payload);
            }
        }
    }

    /// A numbered chunk that is not a message, in its turn: a one-sided operation, or a
    /// control chunk that came wrapped (`Ctrl`).
    fn handle_numbered(&mut self, peer: u32, h: Header, payload: &[u8]) {
        if h.kind == Kind::Rma as u8 {
            return self.handle_rma(peer, h, payload);
        }
        match Header::decode(payload) {
            Ok(inner) if inner.kind == Kind::RailDown as u8 => {
                self.rail_down(peer, inner.tag.max(0) as usize, false)
            }
            Ok(inner) if inner.len == 0 && super::resilience::wrapped(inner.kind) => {
                self.handle_chunk(peer, inner, &[])
            }
            _ => self.peer_error(format!("from rank {peer}: a malformed Ctrl chunk")),
        }
    }

    /// An eager chunk that no posted receive takes, or an RTS: queued as unexpected, or
    /// delivered to the posted receive at `pos` with what a rendezvous needs. Out of line: the
    /// usual eager arrival, taken by the oldest posted receive, stays short.
    #[cold]
    #[inline(never)]
    fn not_posted(&mut self, peer: u32, h: Header, payload: &[u8], pos: Option<usize>) {
        // The start of the message an RTS carries (FLAG_PREFIX), else nothing.
        let start: &[u8] = if h.carries_start() { payload } else { &[] };
        let body = if h.kind == Kind::Eager as u8 {
            UBody::Eager(self.unexpected_copy(payload))
        } else if h.flags & wire::FLAG_PIECES != 0 {
            UBody::Rts {
                addr: 0,
                table: Some(payload.to_vec()),
                stream: false,
                fin: h.flags & wire::FLAG_FIN != 0,
                key: 0,
                prefix: Vec::new(),
                start: 0,
            }
        } else {
            // The start is kept with the message if no receive takes it yet.
            let prefix = if !start.is_empty() && pos.is_none() {
                self.unexpected_copy(start)
            } else {
                Vec::new()
            };
            // The key of the sender's registration (`FLAG_KEY`): the whole payload.
            let key = match payload.get(..8) {
                Some(k) if h.flags & wire::FLAG_KEY != 0 => {
                    u64::from_le_bytes(k.try_into().expect("8 bytes"))
                }
                _ => 0,
            };
            UBody::Rts {
                addr: h.aux,
                table: None,
                stream: h.flags & wire::FLAG_STREAM != 0,
                fin: h.flags & wire::FLAG_FIN != 0,
                key,
                prefix,
                start: start.len(),
            }
        };
        let u = Unexpected::of(peer, &h, body);
        let q = self.mq(h.ctx);
        match pos {
            Some(pos) => {
                let (_, _, rid) = q.posted.remove(pos).expect("in range");
                self.deliver(rid, u);
                if !start.is_empty() {
                    self.write_prefix(rid, start);
                }
            }
            None => {
                let held = u.held();
                q.unexpected.push_back(u);
                self.stats.unexpected_in(peer, h.tag, h.msg_len, held);
            }
        }
    }
}

/// Packets of Data chunks at least this large are received straight into the user buffer by
/// drivers that can split a packet (TCP).
pub(super) const SPLIT_MIN: usize = 16 * 1024;

impl RecvSink for State {
    fn deliver(&mut self, peer: PeerId, packet: &[u8]) {
        self.stats.received(self.polling, packet.len());
        self.handle_packet(peer.0, packet);
    }

    /// A packet made of exactly one Data chunk for a contiguous receive, or of one eager
    /// message that a contiguous posted receive takes: the rest of it goes straight to its
    /// place in the user buffer.
    fn place(&mut self, peer: PeerId, head: &[u8], total_len: usize) -> Option<Placement> {
        let h = Header::decode(head).ok()?;
        if self.gates.get(peer.0 as usize)?.resilient()
            && (h.kind() != Some(Kind::Data) || self.input_on_dead_rail(peer.0))
        {
            // A message is handled whole on a gate with several rails: one cut short by the
            // loss of its rail comes again whole, and must not have been taken in part.
            return None;
        }
        if h.kind() != Some(Kind::Data) {
            if h.flags & wire::FLAG_KEY != 0 {
                // (Its payload is a key, not the start of the message.)
                return None;
            }
            return self.place_message(peer.0, &h, head, total_len);
        }
        if HDR_LEN + h.len as usize != total_len {
            return None;
        }
        let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get(RequestId(h.aux))
        else {
            return None;
        };
        if rv.target.layout.is_some() {
            return None;
        }
        let off = (h.msg_len as usize).min(rv.target.cap);
        let n = (h.len as usize).min(rv.target.cap - off);
        // SAFETY: [off, off+n) lies in the receive buffer, valid and untouched by anything else
        // until this request completes, which cannot happen before `placed`.
        Some(unsafe { Placement::new(rv.target.ptr.add(off), n) })
    }

    fn placed(&mut self, peer: PeerId, head: &[u8], total_len: usize) {
        self.stats.received(self.polling, total_len);
        crate::trace::received_placed(peer.0, head, total_len);
        let Ok(h) = Header::decode(head) else { return };
        if h.kind() == Some(Kind::Eager) {
            if let Some(rid) = self.gates[peer.0 as usize].placing.take() {
                if h.flags & wire::FLAG_SYNC != 0 {
                    self.queue_ctrl(peer.0, Kind::SyncAck, 0, h.sreq, 0);
                }
                self.complete(rid);
            }
            return;
        }
        // The start of a rendezvous message, sent with its RTS, or a fragment.
        let id = if h.kind() == Some(Kind::Rts) {
            match self.gates[peer.0 as usize].placing.take() {
                Some(rid) => rid,
                None => return,
            }
        } else {
            RequestId(h.aux)
        };
        let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get_mut(id)
        else {
            return self.peer_error(format!(
                "from rank {}: placed data for an unknown request",
                peer.0
            ));
        };
        rv.got += h.len as u64;
        let done = rv.got >= rv.msg_len;
        if !self.pieces.is_empty() && h.kind() == Some(Kind::Data) {
            self.piece_data(peer.0, id, h.msg_len as usize, h.len as usize);
            if done {
                self.pieces_done(peer.0, id);
            }
        }
        if done {
            self.complete(id);
        }
    }
}

impl State {
    /// [`RecvSink::place`] for a packet made of one message chunk (`h`, whose first bytes are
    /// `head`): an eager message, or an RTS carrying the start of its message (`FLAG_PREFIX`).
    /// Matched now against the posted receives, as `handle_chunk` would match it (the driver
    /// hands packets over in order, so every earlier message has been matched), if the receive
    /// that takes it is contiguous; the payload bytes already in `head` are copied, the
    /// placement is the rest of what fits, and `placed` finishes the receive. An RTS gets its
    /// Cts queued at once, and the driver lets it leave before reading on
    /// (`Placement::reply_first`), so that the sender streams the rest while the start is still
    /// arriving. `None`, having matched nothing, for the general path.
    fn place_message(
        &mut self,
        peer: u32,
        h: &Header,
        head: &[u8],
        total_len: usize,
    ) -> Option<Placement> {
        let rts = h.carries_start();
        if !rts && h.kind() != Some(Kind::Eager) {
            return None;
        }
        let (hdr_len, len) = (h.wire_len(), h.len as usize);
        if hdr_len + wire::pad8(len) != total_len {
            return None;
        }
        let rid = self.take_posted_contiguous(peer, h)?;
        if rts {
            crate::trace::placing(peer, head);
            let body = UBody::Rts {
                addr: h.aux,
                table: None,
                stream: h.flags & wire::FLAG_STREAM != 0,
                fin: h.flags & wire::FLAG_FIN != 0,
                key: 0,
                prefix: Vec::new(),
                start: h.len as usize,
            };
            self.deliver(rid, Unexpected::of(peer, h, body));
        } else {
            self.matched(rid, h.src, h.tag, peer, len as u64);
        }
        self.gates[peer as usize].placing = Some(rid);
        let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get(rid)
        else {
            unreachable!("a posted receive, taken above");
        };
        let inline = &head[hdr_len.min(head.len())..];
        let inline = &inline[..inline.len().min(len)];
        // SAFETY: the receive buffer is valid until completion; write_at clips to cap.
        unsafe { rv.target.write_at(0, inline) };
        let done = inline.len().min(rv.target.cap);
        let rest = len.min(rv.target.cap) - done;
        // SAFETY: [done, done + rest) lies in the receive buffer, valid and untouched by
        // anything else until this request completes, which cannot happen before `placed` (for
        // an RTS, the fragments after the Cts come behind the start on the same connection) or
        // the loss of the peer.
        let p = unsafe { Placement::new(rv.target.ptr.add(done), rest) };
        if !self.order[peer as usize].is_empty() {
            self.release_held(peer);
        }
        Some(if rts { p.reply_first() } else { p })
    }

    /// The oldest posted receive that matches the message of `h`, from world rank `peer`,
    /// taken out of the posted queue if it is contiguous (a placement needs one span); `None`,
    /// leaving everything as it was, if there is none or a placement from `peer` is under way.
    fn take_posted_contiguous(&mut self, peer: u32, h: &Header) -> Option<RequestId> {
        if self.gates.get(peer as usize)?.placing.is_some()
            || h.seq != self.order[peer as usize].expect
        {
            // (A message before its turn is delivered whole, and held.)
            return None;
        }
        let q = self.peer_mq(h.ctx)?;
        let pos = q.find_posted(h.src, h.tag)?;
        let rid = q.posted[pos].2;
        match self.reqs.get(rid) {
            Some(Request {
                op: Op::Recv(rv), ..
            }) if rv.target.layout.is_none() => {}
            _ => return None,
        }
        self.mq(h.ctx).posted.remove(pos);
        let o = &mut self.order[peer as usize];
        o.expect = o.expect.wrapping_add(1);
        Some(rid)
    }
}
