//! Receives: `irecv` and its fast path `irecv_posted`, `imrecv`, the delivery of a matched
//! message into its receive (`deliver`, `deliver_eager`, `matched`, `write_prefix`), and the
//! receiving side of the rendezvous: asking for the data (`request_data`, cut over the rails,
//! its pieces followed in `resilience`) and the `get`s queued for the progress loop
//! ([`PendingGet`]).
//!
//! This module never calls a driver: `get`s are queued here and run by `drive`. It never
//! blocks.

use madmpi_datatypes::Datatype;

use super::resilience::PieceRecv;
use super::strategy::Piece;
use super::{check_type, matches, Comm, State, UBody, Unexpected};
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Op, RecvOp, RecvTarget, Request, RequestId};
use crate::wire::Kind;
use crate::{CommId, MessageId, ANY_SOURCE, ANY_TAG, PROC_NULL, TAG_UB};

pub(super) struct PendingGet {
    pub(super) peer: u32,
    /// (stream offset, sender address, length) of each block to pull.
    pub(super) ranges: Vec<(u64, u64, u64)>,
    pub(super) rid: RequestId,
    pub(super) sreq: u64,
    /// The sender's registration of the data (`FLAG_KEY`; 0: none) and where it starts.
    pub(super) key: u64,
    pub(super) base: u64,
}

impl State {
    /// Start a receive. `buf` must stay valid until the request completes.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn irecv(
        &mut self,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
        coll: bool,
    ) -> Result<RequestId> {
        self.irecv_in(None, buf, count, dt, src, tag, comm, coll)
    }

    /// [`State::irecv`], in request `into` when given (a persistent receive being started):
    /// that request is then the receive itself, so that what its match sets going (a Cts, the
    /// pieces asked for, a `get`) names it. A receive from MPI_PROC_NULL is a new null request
    /// all the same.
    ///
    /// # Safety
    /// As [`State::irecv`].
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn irecv_in(
        &mut self,
        into: Option<RequestId>,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
        coll: bool,
    ) -> Result<RequestId> {
        let c = self.comm(comm)?;
        check_src_tag(c, src, tag)?;
        check_type(dt)?;
        if src == PROC_NULL {
            return Ok(self.null_request());
        }
        let ctx = c.ctx + coll as u32;
        // A receive only a lost peer could satisfy fails, unless a message already matches.
        let hopeless = self.lost_source_in(c.peers(), src).is_some();
        let target = recv_target(buf, count, dt)?;
        let op = Op::Recv(RecvOp {
            ctx,
            target,
            peer: None,
            msg_len: 0,
            got: 0,
            posted: true,
        });
        let rid = match into {
            Some(id) => {
                let r = self
                    .reqs
                    .get_mut(id)
                    .ok_or_else(super::state::bad_request)?;
                r.op = op;
                r.active = true;
                r.complete = false;
                r.status = crate::request::EMPTY_STATUS;
                id
            }
            None => self.reqs.insert(Request::new(op)),
        };
        let q = self.mq(ctx);
        if let Some(pos) = q
            .unexpected
            .iter()
            .position(|u| matches(src, tag, u.src, u.tag))
        {
            let u = q.unexpected.remove(pos).expect("position is in range");
            self.stats.unexpected_out(u.held());
            self.deliver(rid, u);
        } else if hopeless {
            self.fail_request(rid);
        } else {
            q.posted.push_back((src, tag, rid));
        }
        Ok(rid)
    }

    /// [`State::irecv`] of a receive that can only be posted: a contiguous type, valid
    /// arguments, nothing unexpected on the communicator to match. `None`, having done nothing,
    /// otherwise.
    ///
    /// # Safety
    /// As [`State::irecv`].
    #[inline(always)]
    pub unsafe fn irecv_posted(
        &mut self,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        src: i32,
        tag: i32,
        comm: CommId,
    ) -> Option<RequestId> {
        let Some(Some(c)) = self.comms.get(comm.0 as usize) else {
            return None;
        };
        if (src != ANY_SOURCE && (src < 0 || src >= c.peer_count()))
            || (tag != ANY_TAG && !(0..=TAG_UB).contains(&tag))
            || !dt.is_committed()
        {
            return None;
        }
        let ctx = c.ctx;
        let (off, cap) = dt.contiguous_span(count)?;
        let q = self.mq.get_mut(ctx as usize)?;
        if !q.unexpected.is_empty() {
            return None;
        }
        let rid = self.reqs.insert_with(|| {
            Request::new(Op::Recv(RecvOp {
                ctx,
                target: RecvTarget {
                    ptr: buf.wrapping_offset(off),
                    cap,
                    layout: None,
                },
                peer: None,
                msg_len: 0,
                got: 0,
                posted: true,
            }))
        });
        q.posted.push_back((src, tag, rid));
        Some(rid)
    }

    /// MPI_Imrecv.
    pub unsafe fn imrecv(
        &mut self,
        buf: *mut u8,
        count: usize,
        dt: &Datatype,
        msg: MessageId,
    ) -> Result<RequestId> {
        if msg == MessageId::NO_PROC {
            return Ok(self.null_request());
        }
        check_type(dt)?;
        let pos = self
            .messages
            .iter()
            .position(|(id, _)| *id == msg.0)
            .ok_or_else(|| {
                Error::new(
                    ErrorClass::Request,
                    "invalid message handle (already received?)",
                )
            })?;
        let target = recv_target(buf, count, dt)?;
        let (_, u) = self.messages.swap_remove(pos);
        let rid = self.reqs.insert(Request::new(Op::Recv(RecvOp {
            ctx: 0,
            target,
            peer: None,
            msg_len: 0,
            got: 0,
            posted: false,
        })));
        self.deliver(rid, u);
        Ok(rid)
    }

    /// A matched message goes into receive request `rid`.
    pub(super) fn deliver(&mut self, rid: RequestId, u: Unexpected) {
        let peer = u.peer;
        if let UBody::Eager(data) = u.body {
            self.deliver_eager(rid, u.src, u.tag, peer, &data);
            if u.sync {
                self.queue_ctrl(peer, Kind::SyncAck, 0, u.sreq, 0);
            }
            self.recycle(data);
            return;
        }
        let can_get = self.gates[peer as usize].can_get;
        let Some(r) = self.matched(rid, u.src, u.tag, peer, u.msg_len) else {
            return;
        };
        let Op::Recv(rv) = &mut r.op else { return };
        match u.body {
            UBody::Eager(_) => unreachable!("delivered above"),
            UBody::Rts {
                addr,
                table,
                stream,
                fin,
                key,
                prefix,
                start,
            } => {
                tracing::debug!(
                    peer,
                    bytes = u.msg_len,
                    get = can_get && !stream,
                    "rendezvous matched"
                );
                rv.msg_len = u.msg_len;
                let ranges = match table {
                    None => vec![(0, addr, u.msg_len)],
                    // SAFETY: the receive buffer is valid until completion.
                    Some(t) => match unsafe { apply_piece_table(&rv.target, &t, u.msg_len) } {
                        Ok(r) => r,
                        Err(why) => {
                            r.status.error = Some(ErrorClass::Other);
                            self.peer_error(format!(
                                "from rank {peer}: bad rendezvous table: {why}"
                            ));
                            self.queue_ctrl(peer, Kind::Fin, 0, u.sreq, 0);
                            self.complete(rid);
                            return;
                        }
                    },
                };
                if can_get && !stream {
                    self.gets.push(PendingGet {
                        peer,
                        ranges,
                        rid,
                        sreq: u.sreq,
                        key,
                        base: addr,
                    });
                } else {
                    self.request_data(peer, u.sreq, rid, start, u.msg_len as usize, fin);
                }
                if !prefix.is_empty() {
                    self.write_prefix(rid, &prefix);
                    self.recycle(prefix);
                }
            }
        }
    }

    /// Ask `peer` for the data of its rendezvous send `sreq`, matched by the receive `rid`:
    /// bytes `from..len` (the RTS carried the start). With several rails to the peer, the
    /// strategy may cut it (`rdv_accept`, on the receiving side as in NewMadeleine), and every
    /// piece, also a lone one, is asked for on its rail by a Cts of its own (`FLAG_PART`);
    /// otherwise one Cts asks for all of it. The pieces are followed as they come in
    /// ([`PieceRecv`]): to learn each rail's bandwidth, to ask again for what a failed rail
    /// was carrying (`resilience`), and to send the Fin a sender waits for (`fin`).
    fn request_data(
        &mut self,
        peer: u32,
        sreq: u64,
        rid: RequestId,
        from: usize,
        len: usize,
        fin: bool,
    ) {
        let g = &self.gates[peer as usize];
        let resilient = g.resilient();
        let mut pieces: Vec<Piece> = Vec::new();
        if g.rails.len() > 1 && from < len {
            self.strat.rdv_accept(g, from, len, &mut pieces);
        }
        for p in pieces.iter_mut() {
            if g.rails.get(p.rail).is_none_or(|r| r.dead) {
                // (A strategy may name a rail that has failed.)
                p.rail = g.rails.iter().position(|r| !r.dead).unwrap_or(0);
            }
        }
        if pieces.is_empty() && resilient && from < len {
            let rail = g.rails.iter().position(|r| !r.dead).unwrap_or(0);
            pieces.push(Piece {
                rail,
                off: from,
                len: len - from,
            });
        }
        if fin || resilient {
            let asked = crate::trace::clock_ns();
            let follow = |p: &Piece| PieceRecv {
                rid,
                peer,
                sreq,
                off: p.off,
                len: p.len,
                rail: p.rail,
                got: 0,
                fin,
                asked,
                done_at: 0,
            };
            match pieces.as_slice() {
                [] if from < len => self.pieces.push(follow(&Piece {
                    rail: 0,
                    off: from,
                    len: len - from,
                })),
                ps => self.pieces.extend(ps.iter().map(follow)),
            }
        }
        if !resilient && matches!(pieces.as_slice(), [] | [Piece { rail: 0, .. }]) {
            return self.queue_ctrl(peer, Kind::Cts, 0, sreq, rid.0);
        }
        for p in &pieces {
            self.queue_piece_cts(peer, p.rail, p.off, p.len, sreq, rid);
        }
        tracing::debug!(
            peer,
            bytes = len - from,
            ?pieces,
            "rendezvous cut over rails"
        );
    }

    /// The start of a rendezvous message, sent with its RTS, into the receive `rid` that
    /// matched it.
    pub(super) fn write_prefix(&mut self, rid: RequestId, data: &[u8]) {
        if let Some(Request {
            op: Op::Recv(rv), ..
        }) = self.reqs.get_mut(rid)
        {
            // SAFETY: the receive buffer is valid until completion; write_at clips.
            unsafe { rv.target.write_at(0, data) };
            rv.got += data.len() as u64;
        }
    }

    /// Eager payload straight from the packet into a posted receive (no intermediate copy).
    /// An eager message (`payload`, from `src` with `tag`, arrived from world rank `peer`)
    /// matched by the posted receive `rid`. (A synchronous sender's acknowledgement is the
    /// caller's.) Always inlined: it runs for every eager chunk a posted receive takes.
    #[inline(always)]
    pub(super) fn deliver_eager(
        &mut self,
        rid: RequestId,
        src: i32,
        tag: i32,
        peer: u32,
        payload: &[u8],
    ) {
        let Some(r) = self.matched(rid, src, tag, peer, payload.len() as u64) else {
            return;
        };
        if let Op::Recv(rv) = &r.op {
            match rv.target.layout {
                // A contiguous receive (the usual one): the copy inline, clipped to the
                // capacity (truncation).
                // SAFETY: the receive buffer is valid until completion, `cap` bytes long.
                None => unsafe {
                    madmpi_transports::copy_bytes(
                        payload.as_ptr(),
                        rv.target.ptr,
                        payload.len().min(rv.target.cap),
                    )
                },
                // SAFETY: as above; write_at clips to cap.
                Some(_) => unsafe {
                    rv.target.write_at(0, payload);
                },
            }
        }
        // What `complete` does for a receive, on the request at hand.
        r.complete = true;
        if r.detached {
            self.free_detached(rid);
        }
    }

    /// A detached receive (freed by the user, or internal) completed: it goes. Out of line,
    /// so that the delivery of the others stays short.
    #[cold]
    #[inline(never)]
    fn free_detached(&mut self, rid: RequestId) {
        self.reqs.free(rid);
    }

    /// The receive `rid` matched a message of `len` bytes from `src` with `tag`, arrived from
    /// world rank `peer` (eager, or a rendezvous of that length): its status is set
    /// (truncation included), its data not yet written. `None` if `rid` is not a receive.
    #[inline(always)]
    pub(super) fn matched(
        &mut self,
        rid: RequestId,
        src: i32,
        tag: i32,
        peer: u32,
        len: u64,
    ) -> Option<&mut Request> {
        let r = self.reqs.get_mut(rid)?;
        let Op::Recv(rv) = &mut r.op else {
            return None;
        };
        rv.posted = false;
        rv.peer = Some(peer);
        r.status.source = src;
        r.status.tag = tag;
        let cap = rv.target.cap as u64;
        r.status.bytes = len.min(cap);
        r.status.msg_len = len;
        if len > cap {
            r.status.error = Some(ErrorClass::Truncate);
        }
        Some(r)
    }
}

/// The source and tag of a receive or probe: a rank of `c`, MPI_ANY_SOURCE or MPI_PROC_NULL; a
/// tag in 0..=TAG_UB or MPI_ANY_TAG (checked for MPI_PROC_NULL too, as in MPICH and Open MPI).
pub(super) fn check_src_tag(c: &Comm, src: i32, tag: i32) -> Result<()> {
    if src != ANY_SOURCE && src != PROC_NULL && (src < 0 || src >= c.peer_count()) {
        return err(
            ErrorClass::Rank,
            format!(
                "invalid source rank {src} (communicator size {})",
                c.peer_count()
            ),
        );
    }
    if tag != ANY_TAG && !(0..=TAG_UB).contains(&tag) {
        return err(
            ErrorClass::Tag,
            format!("invalid tag {tag} (must be 0..={TAG_UB} or MPI_ANY_TAG)"),
        );
    }
    Ok(())
}

fn recv_target(buf: *mut u8, count: usize, dt: &Datatype) -> Result<RecvTarget> {
    let cap = count
        .checked_mul(dt.size())
        .ok_or_else(|| Error::new(ErrorClass::Count, format!("count {count} overflows")))?;
    Ok(match dt.contiguous_span(count) {
        Some((off, _)) => RecvTarget {
            ptr: buf.wrapping_offset(off),
            cap,
            layout: None,
        },
        None => RecvTarget {
            ptr: buf,
            cap,
            layout: Some(Box::new((buf, dt.clone(), count))),
        },
    })
}

/// Receiver side of `send::piece_table`: write the inline bytes into place and return the blocks
/// to pull. Everything from the peer is checked: ranges in order, inside the message, and inline
/// bytes exactly filling the gaps.
///
/// # Safety
/// The receive buffer of `target` must be valid.
pub(super) unsafe fn apply_piece_table(
    target: &RecvTarget,
    t: &[u8],
    msg_len: u64,
) -> std::result::Result<Vec<(u64, u64, u64)>, String> {
    let rd = |i: usize| -> std::result::Result<u64, String> {
        t.get(i..i + 8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
            .ok_or_else(|| "truncated table".to_string())
    };
    let n = t
        .get(0..4)
        .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
        .ok_or("truncated table")? as usize;
    if n > 4096 || 8 + n * 24 > t.len() {
        return Err(format!(
            "{n} blocks do not fit a table of {} bytes",
            t.len()
        ));
    }
    let mut ranges = Vec::with_capacity(n);
    let mut inline = &t[8 + n * 24..];
    let mut cursor = 0u64;
    for i in 0..=n {
        let (o, a, l) = if i < n {
            (rd(8 + i * 24)?, rd(16 + i * 24)?, rd(24 + i * 24)?)
        } else {
            (msg_len, 0, 0)
        };
        let end = o
            .checked_add(l)
            .filter(|&e| e <= msg_len)
            .ok_or("block beyond the message")?;
        let gap = o.checked_sub(cursor).ok_or("blocks out of order")? as usize;
        if gap > inline.len() {
            return Err("inline data shorter than the gaps".into());
        }
        target.write_at(cursor as usize, &inline[..gap]);
        inline = &inline[gap..];
        if i < n {
            ranges.push((o, a, l));
        }
        cursor = end;
    }
    if !inline.is_empty() {
        return Err("inline data longer than the gaps".into());
    }
    Ok(ranges)
}
