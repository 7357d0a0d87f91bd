//! The origin side: issuing an operation (checks, packing the origin data, flattening the
//! target datatype into segments, cutting into chunks that fit the target's gate) and taking
//! its answers (acknowledgements, data brought back).
//!
//! Origin data is packed when the operation is issued, so the origin buffer of a put or an
//! accumulate may be reused at once (local completion is immediate); a request-based
//! operation's request completes when every answer came (remote completion), which is
//! stronger than the standard asks.

use madmpi_datatypes::{Basic, Datatype};

use super::cma::Outcome;
use super::wire::{self, Sub};
use super::{op_code, Flavor, Track, WinId};
use crate::api::with;
use crate::engine::State;
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::{BuiltinOp, Op as ReduceOp};
use crate::request::{Op, Request, RequestId};
use crate::wire::{Header, Kind};

/// An origin (or result) buffer: `count` elements of `dt` at `ptr`.
#[derive(Clone, Debug)]
pub struct Local {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Elements.
    pub count: usize,
    /// Their type.
    pub dt: Datatype,
}

/// The target of an operation: `count` elements of `dt` at displacement `disp` (in the
/// target's displacement units; an address for a dynamic window) of rank `rank`'s part.
#[derive(Clone, Debug)]
pub struct Remote {
    /// Rank in the window's group (or MPI_PROC_NULL).
    pub rank: i32,
    /// Displacement.
    pub disp: i64,
    /// Elements.
    pub count: usize,
    /// Their type.
    pub dt: Datatype,
}

/// A one-sided operation.
#[derive(Clone, Debug)]
pub enum Call {
    /// MPI_Put / MPI_Rput.
    Put(Local, Remote),
    /// MPI_Get / MPI_Rget.
    Get(Local, Remote),
    /// MPI_Accumulate / MPI_Raccumulate.
    Acc(Local, Remote, BuiltinOp),
    /// MPI_Get_accumulate / MPI_Rget_accumulate / MPI_Fetch_and_op: origin, result, target.
    GetAcc(Local, Local, Remote, BuiltinOp),
    /// MPI_Compare_and_swap: origin, compare, result (one element of the target's type).
    Cas(*const u8, *const u8, *mut u8, Remote),
}

/// Issue `call` on window `w`; with `want_req`, a request that completes with it.
///
/// # Safety
/// The origin buffers hold what their types describe; a result buffer stays valid until the
/// operation completes (at the end of its epoch, a flush, or its request).
pub unsafe fn rma(w: WinId, call: Call, want_req: bool) -> Result<Option<RequestId>> {
    let (req, found, rdma) = with(|e| {
        // SAFETY: forwarded.
        let (req, found) = unsafe { e.st.rma_issue(w, call, want_req) }?;
        Ok((req, found, super::rdma::post(e)))
    })?;
    if let Some(id) = rdma {
        // A request-based put or get by RDMA: complete before the call returns.
        crate::api::wait_until(|e| {
            super::rdma::reap(e)?;
            Ok(super::rdma::done(e, id).then_some(()))
        })?;
    }
    if !found {
        // A compare-and-swap on the direct path that did not swap: the caller probably spins
        // on a lock word, held by a process that may need this CPU to release it. Counted as
        // a fruitless poll (past the spin budget, each one yields).
        crate::api::polled(false);
    }
    Ok(req)
}

/// What an operation sends: its kind, target, packed data, result buffer, operation.
pub(super) struct Plan {
    pub sub: Sub,
    pub target: Remote,
    /// The origin data, packed (empty for the direct path, which reads `origin`).
    pub data: Vec<u8>,
    /// The origin buffer of a put or an accumulate, for the direct path.
    pub origin: Option<Local>,
    /// Bytes of target memory the operation touches (its packed stream).
    pub bytes: usize,
    pub result: Option<(*mut u8, usize, Datatype)>,
    pub op: BuiltinOp,
    pub basic: Option<Basic>,
}

fn same_bytes(a: usize, b: usize, what: &str) -> Result<()> {
    if a != b {
        return err(
            ErrorClass::Type,
            format!(
                "the {what} describes {a} bytes and the target {b}: their type signatures must \
                 match"
            ),
        );
    }
    Ok(())
}

/// The basic type an accumulate applies `op` to, checked on both sides.
fn acc_basic(op: BuiltinOp, target: &Datatype, other: Option<&Datatype>) -> Result<Basic> {
    let Some((basic, _)) = target.uniform_element() else {
        return err(
            ErrorClass::Type,
            "an accumulate's target datatype must be made of one predefined type",
        );
    };
    ReduceOp::Builtin(op).check(target)?;
    if let Some(o) = other {
        match o.uniform_element() {
            Some((b, _)) if b == basic => {}
            Some((_, 0)) | None if o.size() == 0 => {}
            _ => {
                return err(
                    ErrorClass::Type,
                    format!(
                        "an accumulate's origin and target must be made of the same predefined \
                         type (the target's is {})",
                        basic.mpi_name()
                    ),
                )
            }
        }
    }
    Ok(basic)
}

/// The segments `(offset, length)` of the first `bytes` of the target's packed stream: one
/// when the target memory is one run (walking the elements of a contiguous type one by one,
/// as the general iterator does, costs a step per element: 2 million for 2 MiB of
/// `MPI_BYTE`).
pub(super) fn target_segments(
    t: &Remote,
    bytes: usize,
) -> Box<dyn Iterator<Item = (isize, usize)> + '_> {
    match t.dt.contiguous_span(t.count) {
        Some((off, len)) => Box::new(
            (len.min(bytes) > 0)
                .then_some((off, len.min(bytes)))
                .into_iter(),
        ),
        None => Box::new(t.dt.segments(t.count, 0..bytes)),
    }
}

/// # Safety
/// `l` describes readable memory.
pub(super) unsafe fn pack(l: &Local) -> Vec<u8> {
    let mut v = vec![0u8; l.count * l.dt.size()];
    // SAFETY: the caller's.
    unsafe { l.dt.pack(l.ptr, l.count, 0, &mut v) };
    v
}

/// The origin's data stream: the origin buffer itself when contiguous, else a packed copy
/// (returned with the pointer, to keep it alive); compare-and-swap's new and compare values.
///
/// # Safety
/// The origin buffer holds its elements.
pub(super) unsafe fn source(p: &Plan) -> (*const u8, Vec<u8>) {
    match &p.origin {
        Some(o) => match o.dt.contiguous_span(o.count) {
            Some((off, _)) => (o.ptr.wrapping_offset(off) as *const u8, Vec::new()),
            None => {
                // SAFETY: the caller's.
                let v = unsafe { pack(o) };
                (v.as_ptr(), v)
            }
        },
        None => (p.data.as_ptr(), Vec::new()),
    }
}

/// Check `call` and say what it does. The origin data is not packed here: every path reads
/// it from the origin buffer (`source`), which is packed only when not contiguous.
fn plan(call: Call) -> Result<Plan> {
    let tbytes = |t: &Remote| t.count * t.dt.size();
    Ok(match call {
        Call::Put(o, t) => {
            same_bytes(o.count * o.dt.size(), tbytes(&t), "origin")?;
            Plan {
                sub: Sub::Put,
                bytes: tbytes(&t),
                data: Vec::new(),
                origin: Some(o),
                target: t,
                result: None,
                op: BuiltinOp::Replace,
                basic: None,
            }
        }
        Call::Get(o, t) => {
            same_bytes(o.count * o.dt.size(), tbytes(&t), "origin")?;
            Plan {
                sub: Sub::Get,
                bytes: tbytes(&t),
                data: Vec::new(),
                origin: None,
                target: t,
                result: Some((o.ptr, o.count, o.dt)),
                op: BuiltinOp::NoOp,
                basic: None,
            }
        }
        Call::Acc(o, t, op) => {
            same_bytes(o.count * o.dt.size(), tbytes(&t), "origin")?;
            // (Nothing moves when the target describes no bytes: no type to agree on.)
            let basic = match tbytes(&t) {
                0 => None,
                _ => Some(acc_basic(op, &t.dt, Some(&o.dt))?),
            };
            Plan {
                sub: Sub::Acc,
                bytes: tbytes(&t),
                data: Vec::new(),
                origin: Some(o),
                target: t,
                result: None,
                op,
                basic,
            }
        }
        Call::GetAcc(o, r, t, op) => {
            same_bytes(r.count * r.dt.size(), tbytes(&t), "result buffer")?;
            let noop = op == BuiltinOp::NoOp;
            if !noop {
                same_bytes(o.count * o.dt.size(), tbytes(&t), "origin")?;
            }
            let basic = match tbytes(&t) {
                0 => None,
                _ => Some(acc_basic(op, &t.dt, if noop { None } else { Some(&o.dt) })?),
            };
            Plan {
                sub: Sub::GetAcc,
                bytes: tbytes(&t),
                data: Vec::new(),
                origin: (!noop).then_some(o),
                target: t,
                result: Some((r.ptr, r.count, r.dt)),
                op,
                basic,
            }
        }
        Call::Cas(o, c, r, t) => {
            let Some(basic) = t.dt.as_basic() else {
                return err(
                    ErrorClass::Type,
                    "MPI_Compare_and_swap takes a predefined datatype",
                );
            };
            if !basic.compare_and_swap_ok() {
                return err(
                    ErrorClass::Type,
                    format!(
                        "MPI_Compare_and_swap takes an integer, logical or byte type, not {}",
                        basic.mpi_name()
                    ),
                );
            }
            let n = basic.size();
            let mut data = vec![0u8; 2 * n];
            // SAFETY: both buffers hold one element of the type (caller of `rma`).
            unsafe {
                std::ptr::copy_nonoverlapping(o, data.as_mut_ptr(), n);
                std::ptr::copy_nonoverlapping(c, data.as_mut_ptr().add(n), n);
            }
            Plan {
                sub: Sub::Cas,
                bytes: n,
                data,
                origin: None,
                result: Some((r, 1, t.dt.clone())),
                target: t,
                op: BuiltinOp::Replace,
                basic: Some(basic),
            }
        }
    })
}

impl State {
    /// [`rma`] under the engine lock; with the request, whether the operation did something
    /// (false: a compare-and-swap on the direct path that did not swap).
    ///
    /// # Safety
    /// As [`rma`].
    pub(crate) unsafe fn rma_issue(
        &mut self,
        w: WinId,
        call: Call,
        want_req: bool,
    ) -> Result<(Option<RequestId>, bool)> {
        let p = plan(call)?;
        let win = self.rma.win(w)?;
        let t = &p.target;
        if t.rank == crate::PROC_NULL {
            return Ok((
                want_req.then(|| self.reqs.insert(Request::done(Op::None))),
                true,
            ));
        }
        if t.rank < 0 || t.rank as usize >= win.world.len() {
            return err(
                ErrorClass::Rank,
                format!(
                    "invalid target rank {} (the window has {} members)",
                    t.rank,
                    win.world.len()
                ),
            );
        }
        if !win.may_access(t.rank) {
            return err(
                ErrorClass::RmaSync,
                format!(
                    "no access epoch is open on target {} (MPI_Win_fence, MPI_Win_lock[_all] or \
                     MPI_Win_start first)",
                    t.rank
                ),
            );
        }
        let peer = win.peers[t.rank as usize];
        // Where the target memory starts: from the window's base, or an address.
        let start: i128 = if win.flavor == Flavor::Dynamic {
            t.disp as i128
        } else {
            t.disp as i128 * peer.disp_unit as i128
        };
        let (lo, hi) =
            t.dt.buffer_span(t.count)
                .map_err(|e| Error::new(ErrorClass::Count, e.to_string()))?;
        if win.flavor != Flavor::Dynamic
            && p.bytes > 0
            && (start + (lo as i128) < 0 || start + hi as i128 > peer.size as i128)
        {
            return err(
                ErrorClass::RmaRange,
                format!(
                    "target memory [{}, {}) lies outside rank {}'s {}-byte window",
                    start + lo as i128,
                    start + hi as i128,
                    t.rank,
                    peer.size
                ),
            );
        }
        if win.flavor == Flavor::Dynamic && p.bytes > 0 && start + (lo as i128) < 0 {
            return err(ErrorClass::RmaRange, "negative target address");
        }
        let world = win.world[t.rank as usize];
        if self.peer_dead(world) {
            return err(
                ErrorClass::ProcAborted,
                format!("target {} has died", t.rank),
            );
        }
        if let Some(d) = &win.direct {
            // The direct path on one node: the origin does the operation itself, complete
            // when this returns (range checked above).
            // SAFETY: the origin and result buffers hold what their types say (caller).
            let found =
                unsafe { super::direct::issue(d, win.rank, &p, t.rank as usize, start as isize)? };
            let req = want_req.then(|| self.reqs.insert(Request::done(Op::None)));
            return Ok((req, found));
        }
        if win.flavor == Flavor::Create && peer.pid != 0 && matches!(p.sub, Sub::Put | Sub::Get) {
            // SAFETY: the buffers are the caller's; the range was checked against the
            // target's window, whose base and process the target published.
            match unsafe { super::cma::copy(&p, &peer, start)? } {
                Outcome::Done => {
                    let req = want_req.then(|| self.reqs.insert(Request::done(Op::None)));
                    return Ok((req, true));
                }
                Outcome::NotHere => {}
                Outcome::Refused => {
                    for x in &mut self.rma.win_mut(w)?.peers {
                        x.pid = 0;
                    }
                }
            }
        }
        // SAFETY: the buffers are the caller's (valid until the operation completes); range
        // and epoch checked above.
        if let Some(req) = unsafe { super::rdma::queue(self, w, &p, &peer, start, want_req)? } {
            return Ok((req, true));
        }
        // The origin's data stream (packed now if the origin buffer is not contiguous: the
        // buffer may be reused once the call returns).
        // SAFETY: the origin buffer holds its elements (caller).
        let (src, _packed) = unsafe { source(&p) };
        let src_len = match p.sub {
            Sub::Put | Sub::Acc => p.bytes,
            Sub::GetAcc if p.origin.is_some() => p.bytes,
            Sub::Cas => p.data.len(),
            _ => 0,
        };
        // SAFETY: `source` gives `src_len` readable bytes (the origin's stream, or the
        // compare-and-swap values).
        let src: &[u8] = match src_len {
            0 => &[],
            n => unsafe { std::slice::from_raw_parts(src, n) },
        };
        let win = self.rma.win(w)?;
        if let (Some((seg, offs)), Sub::Put | Sub::Get) = (&win.segment, p.sub) {
            // A shared window: the target's part is mapped here; a put or a get is a copy
            // (checked in range above), complete at once, with no work for the target.
            let part = seg.wrapping_add(offs[t.rank as usize]);
            let mut at = 0usize;
            let mut packed = vec![0u8; if p.sub == Sub::Get { p.bytes } else { 0 }];
            for (off, len) in target_segments(t, p.bytes) {
                let tp = part.wrapping_offset(start as isize + off);
                // SAFETY: [tp, tp + len) lies in the target's part of the segment (range
                // checked above), mapped until the window is freed; the origin data is ours.
                unsafe {
                    if p.sub == Sub::Put {
                        std::ptr::copy(src.as_ptr().add(at), tp, len);
                    } else {
                        std::ptr::copy(tp, packed.as_mut_ptr().add(at), len);
                    }
                }
                at += len;
            }
            if let Some((ptr, count, dt)) = &p.result {
                // SAFETY: the result buffer holds `count` elements (caller).
                unsafe { dt.unpack(*ptr, *count, 0, &packed) };
            }
            return Ok((
                want_req.then(|| self.reqs.insert(Request::done(Op::None))),
                true,
            ));
        }
        let (me, wid, rank) = (win.rank, peer.id, t.rank);
        let aux = op_code(p.op) as u64
            | (p.basic.map_or(0, |b| b.index() as u64) << 8)
            | ((w.0 as u64) << 32);
        if world == self.me && win.pending[rank as usize] == 0 {
            // This process's own part: applied now, as the target would apply the chunk (the
            // engine is held here as there), without the trip through the self transport.
            // Earlier operations to it are all applied (none pending), so the order holds.
            let segs: Vec<(u64, u64)> = target_segments(t, p.bytes)
                .map(|(off, len)| ((start + off as i128) as u64, len as u64))
                .collect();
            let data: &[u8] = if p.sub == Sub::Cas {
                src
            } else {
                &src[..src_len.min(p.bytes)]
            };
            // The origin buffer may lie in the window itself (a put or an accumulate from one
            // place of this process's part to another): the chunk's data is then a copy, as
            // it is on the way through the transport.
            let base = if win.flavor == Flavor::Dynamic {
                0
            } else {
                win.base as u64
            };
            let (s0, s1) = (
                data.as_ptr() as u64,
                data.as_ptr() as u64 + data.len() as u64,
            );
            let overlaps = segs.iter().any(|&(o, l)| {
                let a = base.wrapping_add(o);
                a < s1 && s0 < a.wrapping_add(l)
            });
            let copy;
            let data = if overlaps {
                copy = data.to_vec();
                &copy[..]
            } else {
                data
            };
            match super::target::apply(win, p.sub, aux, &segs, data) {
                Ok(out) => {
                    if let Some((ptr, count, dt)) = &p.result {
                        // SAFETY: the result buffer holds `count` elements (caller).
                        unsafe { dt.unpack(*ptr, *count, 0, &out) };
                    }
                }
                Err(super::target::Bad::Range) => {
                    let win = self.rma.win_mut(w)?;
                    if win.error.is_none() {
                        win.error = Some(Error::new(
                            ErrorClass::RmaRange,
                            "an operation on this process's own part of the window: its target \
                             memory is not (all) in the window",
                        ));
                    }
                }
                Err(super::target::Bad::Malformed(why)) => {
                    return err(ErrorClass::Intern, why);
                }
            }
            let req = want_req.then(|| self.reqs.insert(Request::done(Op::None)));
            return Ok((req, true));
        }
        let elem = p.basic.map_or(1, |b| b.size());
        let room = self
            .chunk_max(world)
            .max(wire::SEG_HDR + wire::SEG_LEN + elem);
        let segs = target_segments(t, p.bytes)
            .map(|(off, len)| ((start + off as i128) as u64, len as u64));
        let pieces = wire::pieces(segs, room, elem);
        let req = want_req.then(|| self.reqs.insert(Request::new(Op::None)));
        if pieces.is_empty() {
            if let Some(r) = req {
                self.complete_with(r, None);
            }
            return Ok((req, true));
        }
        let token = if req.is_none() && p.result.is_none() {
            // Untracked (`batch`): each chunk counts at the target, answered by counts.
            self.rma.win_mut(w)?.pending[rank as usize] += pieces.len() as u32;
            0
        } else {
            self.rma.next_token += 1;
            let token = self.rma.next_token;
            self.rma.ops.insert(
                token,
                Track {
                    win: w,
                    target: rank,
                    left: pieces.len() as u32,
                    result: p.result,
                    req,
                    error: None,
                },
            );
            self.rma.win_mut(w)?.pending[rank as usize] += 1;
            token
        };
        for (segs, at) in pieces {
            let n: u64 = segs.iter().map(|s| s.1).sum();
            let data: &[u8] = match p.sub {
                Sub::Cas => src,
                _ if src.is_empty() => &[],
                _ => &src[at..at + n as usize],
            };
            let hdr = Header {
                kind: Kind::Rma as u8,
                ctx: wid,
                src: me,
                tag: p.sub as i32,
                msg_len: at as u64,
                sreq: token,
                aux,
                ..Default::default()
            };
            let buf = self.owned_buffer(wire::encoded_len(&segs, data));
            self.queue_owned(world, hdr, wire::encode_into(buf, &segs, data));
        }
        Ok((req, true))
    }

    /// An answer (`Ack` or `Reply`) to one chunk of operation `h.sreq`.
    pub(super) fn rma_answer(&mut self, peer: u32, sub: Sub, h: Header, payload: &[u8]) {
        if h.sreq == 0 && sub == Sub::Ack {
            return self.rma_counted(peer, h);
        }
        let Some(t) = self.rma.ops.get_mut(&h.sreq) else {
            return self.peer_error(format!(
                "from rank {peer}: an answer to an unknown one-sided operation"
            ));
        };
        if h.flags == wire::ERR_RANGE {
            t.error = Some(ErrorClass::RmaRange);
        } else if sub == Sub::Reply {
            if let Some((ptr, count, dt)) = &t.result {
                // SAFETY: the result buffer stays valid until the operation completes (caller
                // of `rma`); unpack clips to the stream of `count` elements.
                unsafe { dt.unpack(*ptr, *count, h.msg_len as usize, payload) };
            }
        }
        t.left = t.left.saturating_sub(1);
        if t.left > 0 {
            return;
        }
        let t = self.rma.ops.remove(&h.sreq).expect("found above");
        if let Ok(win) = self.rma.win_mut(t.win) {
            let p = &mut win.pending[t.target as usize];
            *p = p.saturating_sub(1);
            if let Some(c) = t.error {
                if win.error.is_none() {
                    win.error = Some(Error::new(
                        c,
                        format!(
                            "target {} refused an operation: its target memory is not (all) in \
                             the window",
                            t.target
                        ),
                    ));
                }
            }
        }
        if let Some(r) = t.req {
            self.complete_with(r, t.error);
        }
    }
}

impl State {
    /// World rank `peer` died: its operations in flight will never be answered. They fail
    /// with MPI_ERR_PROC_ABORTED (their requests complete with it; the windows report it at
    /// their next synchronisation) and are forgotten, and their targets count none pending.
    ///
    /// On the direct path, the locks the dead process held in the control blocks of the
    /// windows it shared with this one are given back (the first member to see the death
    /// does it), so that origins waiting for them go on.
    pub(crate) fn rma_peer_lost(&mut self, peer: u32) {
        for w in self.rma.wins.iter().flatten() {
            if let (Some(d), Some(r)) = (&w.direct, w.world.iter().position(|&x| x == peer)) {
                if d.release_dead(r as i32) > 0 {
                    tracing::debug!("released the window locks of dead rank {peer}");
                }
            }
        }
        self.rma_release_locks(peer);
        self.rma_drop_open(peer);
        // Untracked operations (`batch`) are only counted per target.
        for w in self.rma.wins.iter_mut().flatten() {
            for (r, &x) in w.world.iter().enumerate() {
                if x == peer && w.pending[r] > 0 {
                    w.pending[r] = 0;
                    if w.error.is_none() {
                        w.error = Some(Error::new(
                            ErrorClass::ProcAborted,
                            format!("target {r} of the window has died"),
                        ));
                    }
                }
            }
        }
        if self.rma.ops.is_empty() {
            return;
        }
        let rma = &mut self.rma;
        let mut failed = Vec::new();
        rma.ops.retain(|_, t| {
            let hit = match rma.wins.get_mut(t.win.0 as usize) {
                Some(Some(w)) if w.world.get(t.target as usize) == Some(&peer) => {
                    w.pending[t.target as usize] = 0;
                    if w.error.is_none() {
                        w.error = Some(Error::new(
                            ErrorClass::ProcAborted,
                            format!("target {} of the window has died", t.target),
                        ));
                    }
                    true
                }
                _ => false,
            };
            if hit {
                failed.extend(t.req);
            }
            !hit
        });
        for r in failed {
            self.complete_with(r, Some(ErrorClass::ProcAborted));
        }
    }
}
