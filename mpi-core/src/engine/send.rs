//! Sends: `isend` (eager, rendezvous, synchronous and buffered sends, contiguous or not), the
//! argument checks of a send, `aggreg`'s copy of a small send into the packet being built
//! (`pack_routed`) and its route (`fast_route`), MPI_Cancel, the attached buffer of buffered sends
//! ([`BsendBuffer`]) and the piece table of a zero-copy rendezvous of a sparse type.
//!
//! This module queues chunks on gates and never calls a driver; it never blocks.

use madmpi_datatypes::Datatype;
use madmpi_transports::emu::charge_host_copy;

use super::rails::NO_DRIVER;
use super::{bad_request, Comm, NotPacked, OnSent, OutChunk, Route, State, KIND_PACKED};
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Op, Request, RequestId, SendExtra, SendMode, SendOp};
use crate::wire::{self, Header, Kind};
use crate::{CommId, PROC_NULL, TAG_UB};

/// Largest message `aggreg` copies into the packet being built when it is posted (beyond,
/// copying costs more than the queued chunk it saves).
const PACK_COPY_MAX: usize = 1024;

impl State {
    /// Where a contiguous message of the send fast paths goes: `None` when the arguments need
    /// the checked path (a bad communicator, rank, tag or datatype, or a non-contiguous layout).
    /// `coll`: on the communicator's collective context.
    #[inline(always)]
    pub(super) fn fast_route(
        &self,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
        coll: bool,
    ) -> Option<Route> {
        let Some(Some(c)) = self.comms.get(comm.0 as usize) else {
            return None;
        };
        if dest < 0 || dest >= c.peer_count() || !(0..=TAG_UB).contains(&tag) || !dt.is_committed()
        {
            return None;
        }
        let (off, bytes) = dt.contiguous_span(count)?;
        Some(Route {
            peer: c.peers()[dest as usize],
            ctx: c.ctx + coll as u32,
            src: c.rank,
            tag,
            off,
            bytes,
        })
    }

    /// Start a send. `buf` must stay valid until the request completes (see `request`).
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn isend(
        &mut self,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        dest: i32,
        tag: i32,
        comm: CommId,
        mode: SendMode,
        coll: bool,
    ) -> Result<RequestId> {
        let c = self.comm(comm)?;
        check_dest_tag(c, dest, tag)?;
        check_type(dt)?;
        // A null operation still has valid arguments (as in MPICH and Open MPI).
        if dest == PROC_NULL {
            return Ok(self.null_request());
        }
        let bytes = count
            .checked_mul(dt.size())
            .ok_or_else(|| Error::new(ErrorClass::Count, format!("count {count} overflows")))?;
        let peer = c.peers()[dest as usize];
        let (ctx, src) = (c.ctx + coll as u32, c.rank);
        // Before anything is reserved in the attached buffer: a send that fails here must
        // leave none of it taken (MPI_Buffer_detach would wait for it forever).
        let g = &self.gates[peer as usize];
        if g.dead {
            return err(
                ErrorClass::ProcAborted,
                format!("rank {dest} (world rank {peer}) has died"),
            );
        }
        if g.driver == NO_DRIVER {
            return err(
                ErrorClass::Intern,
                format!("no transport reaches rank {dest} (world rank {peer})"),
            );
        }

        // The bytes to send: the user buffer itself when contiguous, else a packed copy;
        // buffered sends copy into the attached buffer.
        let mut staging = None;
        let mut bsend = None;
        let mut pieces = None;
        let mut stream = false;
        let ptr: *const u8 = if mode == SendMode::Buffered {
            // SAFETY: forwarded caller contract.
            let (p, slot, own) = unsafe { self.bsend_reserve(comm, buf, count, dt, bytes)? };
            bsend = Some(slot);
            staging = own;
            p
        } else if let Some((off, _)) = dt.contiguous_span(count) {
            buf.wrapping_offset(off)
        } else if bytes > self.gates[peer as usize].eager_max
            && self.gates[peer as usize].can_get
            && !self.gates[peer as usize].registers
        {
            // Sparse type, rendezvous with `get`: small blocks inline, large blocks pulled
            // straight from the user buffer (NewMadeleine's per-block zero copy).
            match piece_table(
                buf,
                count,
                dt,
                self.zcopy_min,
                self.gates[peer as usize].frag_max,
            ) {
                Some(table) => {
                    self.zcopy_sends += 1;
                    pieces = Some((buf, dt.clone(), count));
                    let p = table.as_ptr();
                    staging = Some(table);
                    p
                }
                None => {
                    let mut v = vec![0u8; bytes];
                    charge_host_copy(bytes, || dt.pack(buf, count, 0, &mut v));
                    let p = v.as_ptr();
                    staging = Some(v);
                    p
                }
            }
        } else if bytes > self.gates[peer as usize].eager_max && gather_worthy(dt, count) {
            // Sparse type with large blocks, no `get`: the fragments will be gathered from
            // the user buffer when the receiver asks (Cts), never packed.
            stream = true;
            pieces = Some((buf, dt.clone(), count));
            buf
        } else {
            let mut v = vec![0u8; bytes];
            charge_host_copy(bytes, || dt.pack(buf, count, 0, &mut v));
            let p = v.as_ptr();
            staging = Some(v);
            p
        };

        let g = &self.gates[peer as usize];
        let eager = bytes <= g.eager_max;
        // A rendezvous that the receiver answers with a Cts (it cannot pull the data) carries
        // the start of the message, as much as an eager message could: the receiver has it,
        // and answers, while the rest waits for the answer. Only when nothing else is on its
        // way to the peer (a latency-bound message): in a stream of large messages the round
        // trips overlap anyway, and the starts only add packets.
        let prefix =
            if !eager && !g.can_get && pieces.is_none() && g.out.is_empty() && g.prefixed == 0 {
                bytes.min(g.eager_max)
            } else {
                0
            };
        if !eager {
            tracing::debug!(
                peer,
                bytes,
                get = g.can_get,
                zero_copy = pieces.is_some(),
                "rendezvous"
            );
        }
        if prefix > 0 {
            self.gates[peer as usize].prefixed += 1;
        }
        if eager {
            self.stats.eager_sends += 1;
        } else {
            self.stats.rendezvous(peer, tag, bytes);
        }
        let sync = mode == SendMode::Synchronous;
        // (A gate with several rails keeps a pushed message until its Fin: `resilience`.)
        let resilient = self.gates[peer as usize].resilient();
        // Numbered when it leaves (`number`).
        let seq = 0;
        let table_len = if pieces.is_some() {
            staging.as_ref().map_or(0, |t| t.len())
        } else {
            0
        };
        // A rendezvous the receiver pulls from memory the driver must register first: its RTS
        // carries the key (`FLAG_KEY`), filled in by the engine before it leaves
        // (`Engine::register_sends`).
        let g = &self.gates[peer as usize];
        let keyed = !eager && g.can_get && g.registers && !stream && table_len == 0;
        let extra =
            (staging.is_some() || bsend.is_some() || pieces.is_some() || keyed).then(|| {
                Box::new(SendExtra {
                    staging,
                    layout: pieces,
                    bsend,
                    key: [0; 8],
                    registered: None,
                })
            });
        let key_ptr = match &extra {
            Some(x) if keyed => x.key.as_ptr(),
            _ => std::ptr::null(),
        };
        let mut r = Request::new(Op::Send(SendOp {
            queued: true,
            await_ack: sync || !eager,
            frag_sent: prefix,
            extra,
            ..SendOp::new(peer, ptr, bytes)
        }));
        // A buffered send completes for the user at once; the transfer goes on detached.
        let user_req = if mode == SendMode::Buffered {
            r.detached = true;
            let mut u = Request::new(Op::None);
            u.complete = true;
            Some(u)
        } else {
            None
        };
        let rid = self.reqs.insert(r);
        let hdr = Header {
            kind: if eager { Kind::Eager } else { Kind::Rts } as u8,
            flags: if sync { wire::FLAG_SYNC } else { 0 }
                | if table_len > 0 { wire::FLAG_PIECES } else { 0 }
                | if stream && !eager {
                    wire::FLAG_STREAM
                } else {
                    0
                }
                | if prefix > 0 { wire::FLAG_PREFIX } else { 0 }
                | if !eager && resilient {
                    wire::FLAG_FIN
                } else {
                    0
                }
                | if keyed { wire::FLAG_KEY } else { 0 },
            ctx,
            src,
            tag,
            seq,
            len: if eager {
                bytes as u32
            } else if keyed {
                8
            } else {
                (table_len + prefix) as u32
            },
            msg_len: bytes as u64,
            sreq: rid.0,
            aux: if eager || table_len > 0 || stream {
                0
            } else {
                ptr as u64
            },
        };
        if keyed {
            self.to_register.push(rid);
        }
        self.queue(
            peer,
            OutChunk {
                hdr,
                ptr: if keyed { key_ptr } else { ptr },
                len: if keyed {
                    8
                } else if eager {
                    bytes
                } else {
                    table_len + prefix
                },
                sent: OnSent::Send(rid),
                gather: None,
            },
        );
        Ok(match user_req {
            Some(u) => self.reqs.insert(u),
            None => rid,
        })
    }

    /// `aggreg`'s way with a small standard-mode send (its arguments checked: `r`): the chunk
    /// (header, payload, padding) is written at once into the packet the gate is building, and
    /// the send is complete: the bytes are ours now, and it needs no request record
    /// ([`RequestId::COMPLETE`]; a cancel leaves it alone). What the strategy would have
    /// done at the next progress call, without a queued chunk and a completion per message.
    /// Fails, having done nothing, when the packet has no room left for the message (`Full`:
    /// the packet should leave) or when the message needs the general path (a large message,
    /// other chunks queued behind the packed ones, a dead peer).
    ///
    /// # Safety
    /// `buf` holds the message `r` describes for the duration of the call.
    #[inline(always)]
    pub(super) unsafe fn pack_routed(
        &mut self,
        r: Route,
        buf: *const u8,
    ) -> std::result::Result<RequestId, NotPacked> {
        let (peer, bytes) = (r.peer, r.bytes);
        let g = &self.gates[peer as usize];
        let rec = wire::EAGER_HDR_LEN + wire::pad8(bytes);
        let open = match g.out.back() {
            None => true,
            Some(c) => c.hdr.kind == KIND_PACKED,
        };
        if !open || g.dead || g.driver == NO_DRIVER || bytes > g.eager_max.min(PACK_COPY_MAX) {
            return Err(NotPacked::Other);
        }
        // `pack_max` is `aggreg_max` unless `MADMPI_PACK_FLUSH` made it smaller; a record
        // alone in its packet may be larger, up to `aggreg_max` (checked only then: the
        // common path makes one compare, as before the setting existed).
        // Under `adaptive` a burst leaves in packets of growing counts (`pack_limit`);
        // `aggreg` packs up to the size limit only.
        if g.packed.len() + rec > g.pack_max || (g.packed_n >= g.pack_limit && self.lone_at_once) {
            if !g.packed.is_empty() {
                return Err(NotPacked::Full);
            }
            if rec > g.aggreg_max {
                return Err(NotPacked::Other);
            }
        }
        // Once copied, the message needs nothing more from its sender: the send is complete
        // and has no request record (`RequestId::COMPLETE`; the message names `NO_SREQ`, the
        // same value, as its sender's request: no cancel or acknowledgement will name it).
        let rid = RequestId::COMPLETE;
        self.stats.eager_sends += 1;
        self.stats.packed_sends += 1;
        let g = &mut self.gates[peer as usize];
        g.seq = g.seq.wrapping_add(1);
        g.packed_n += 1;
        let hdr = r.eager(g.seq, super::NO_SREQ);
        crate::trace::queued(peer, &hdr);
        let at = g.packed.len();
        g.packed.reserve(rec);
        let spare = &mut g.packed.spare_capacity_mut()[..rec];
        // SAFETY: `spare` has `rec` bytes: the header, the payload, then up to 7 of padding,
        // all written here (the padding zeroed) before they are counted in the length; the
        // caller's buffer holds the payload.
        unsafe {
            let dst = spare.as_mut_ptr() as *mut u8;
            hdr.encode_eager(&mut *(dst as *mut [u8; wire::EAGER_HDR_LEN]));
            let body = dst.add(wire::EAGER_HDR_LEN);
            let padded = rec - wire::EAGER_HDR_LEN;
            if padded > 0 {
                std::ptr::write_bytes(body.add(padded - 8), 0, 8);
            }
            madmpi_transports::copy_bytes(buf.wrapping_offset(r.off), body, bytes);
            g.packed.set_len(at + rec);
        }
        if at == 0 {
            self.queue(
                peer,
                OutChunk {
                    hdr: Header {
                        kind: KIND_PACKED,
                        ..Header::default()
                    },
                    ptr: std::ptr::null(),
                    len: 0,
                    sent: OnSent::Nothing,
                    gather: None,
                },
            );
        }
        Ok(rid)
    }

    /// MPI_Cancel.
    pub fn cancel(&mut self, id: RequestId) -> Result<()> {
        let Some(r) = self.reqs.get_mut(id) else {
            // A send complete at its posting: the communication completes, the cancel fails
            // (MPI-4.1 §3.8.4), and its status says it was not cancelled.
            return if id == RequestId::COMPLETE {
                Ok(())
            } else {
                Err(bad_request())
            };
        };
        if !r.active {
            return Ok(());
        }
        match &mut r.op {
            Op::Recv(rv) if rv.posted => {
                let ctx = rv.ctx;
                rv.posted = false;
                r.status.cancelled = true;
                self.mq(ctx).posted.retain(|e| e.2 != id);
                self.complete(id);
            }
            Op::Send(s) if !s.cancel_wait && s.bsend().is_none() => {
                let peer = s.peer;
                if s.queued {
                    // Not yet handed to the driver: take it back.
                    let g = &mut self.gates[peer as usize];
                    g.out
                        .retain(|c| !matches!(c.sent, OnSent::Send(r) if r == id));
                    // Never sent: no Cts will come.
                    g.start_settled(s);
                    s.queued = false;
                    s.await_ack = false;
                    r.status.cancelled = true;
                    self.complete(id);
                } else if !s.fragmenting {
                    // Sent: ask the receiver to drop it if it is still unmatched there.
                    s.cancel_wait = true;
                    r.complete = false;
                    self.queue_ctrl(peer, Kind::CancelReq, 0, id.0, 0);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Whether `id` is a send to this process whose cancellation is still being settled.
    pub fn cancel_to_self_pending(&self, id: RequestId) -> bool {
        match self.reqs.get(id).map(|r| &r.op) {
            Some(Op::Send(s)) => s.cancel_wait && s.peer == self.me,
            _ => false,
        }
    }
}

/// Whether a message of `count` elements of a sparse type is better sent by gathering its
/// blocks (one gathering write per fragment) than by packing: blocks large enough that the
/// per-block cost of the write is below the cost of copying them.
pub(super) fn gather_worthy(dt: &Datatype, count: usize) -> bool {
    const MIN_AVG_BLOCK: usize = 2048;
    let s = dt.block_stats(count);
    s.segments > 0 && s.bytes / s.segments >= MIN_AVG_BLOCK
}

impl State {
    /// The argument checks of a send (`recv`: of a receive) alone, for a call that posts
    /// several operations and must post none when one of them is wrong (MPI_Isendrecv).
    pub(crate) fn check_args(
        &self,
        comm: CommId,
        peer: i32,
        tag: i32,
        dt: &Datatype,
        recv: bool,
    ) -> Result<()> {
        let c = self.comm(comm)?;
        if recv {
            super::check_src_tag(c, peer, tag)?;
        } else {
            check_dest_tag(c, peer, tag)?;
        }
        check_type(dt)
    }
}

pub(super) fn check_type(dt: &Datatype) -> Result<()> {
    if !dt.is_committed() {
        return err(
            ErrorClass::Type,
            "datatype not committed (call MPI_Type_commit)",
        );
    }
    Ok(())
}

/// The destination and tag of a send: a rank of `c` or MPI_PROC_NULL; a tag in 0..=TAG_UB
/// (checked for MPI_PROC_NULL too, as in MPICH and Open MPI).
pub(super) fn check_dest_tag(c: &Comm, dest: i32, tag: i32) -> Result<()> {
    if dest != PROC_NULL && (dest < 0 || dest >= c.peer_count()) {
        return err(
            ErrorClass::Rank,
            format!(
                "invalid destination rank {dest} (communicator size {})",
                c.peer_count()
            ),
        );
    }
    if !(0..=TAG_UB).contains(&tag) {
        return err(
            ErrorClass::Tag,
            format!("invalid tag {tag} (must be 0..={TAG_UB})"),
        );
    }
    Ok(())
}

/// The piece table of a zero-copy rendezvous (RTS payload with `FLAG_PIECES`):
/// `u32 nremote, u32 0`, then `nremote` × `(u64 stream offset, u64 address, u64 length)`, then the
/// bytes of the stream not covered by those blocks, in stream order. Blocks of at least
/// `min_block` bytes are remote; the table must fit in `max_len`. `None` when zero copy does not
/// pay (no large block, or too many / too much inline data): the caller packs instead.
///
/// # Safety
/// `buf` must hold `count` elements of `dt`.
unsafe fn piece_table(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    min_block: usize,
    max_len: usize,
) -> Option<Vec<u8>> {
    const MAX_REMOTE: usize = 256;
    let bytes = count * dt.size();
    if dt.block_stats(count).max_len < min_block {
        return None;
    }
    let mut remote: Vec<(u64, u64, u64)> = Vec::new();
    let mut inline: Vec<u8> = Vec::new();
    let mut off = 0usize;
    for (mem, len) in dt.segments(count, 0..bytes) {
        let p = buf.wrapping_offset(mem);
        if len >= min_block {
            if remote.len() == MAX_REMOTE {
                return None;
            }
            remote.push((off as u64, p as u64, len as u64));
        } else {
            if 8 + (remote.len() + 1) * 24 + inline.len() + len > max_len {
                return None;
            }
            inline.extend_from_slice(std::slice::from_raw_parts(p, len));
        }
        off += len;
    }
    if remote.is_empty() || 8 + remote.len() * 24 + inline.len() > max_len {
        return None;
    }
    let mut t = Vec::with_capacity(8 + remote.len() * 24 + inline.len());
    t.extend_from_slice(&(remote.len() as u32).to_le_bytes());
    t.extend_from_slice(&0u32.to_le_bytes());
    for (o, a, l) in &remote {
        t.extend_from_slice(&o.to_le_bytes());
        t.extend_from_slice(&a.to_le_bytes());
        t.extend_from_slice(&l.to_le_bytes());
    }
    t.extend_from_slice(&inline);
    Some(t)
}
