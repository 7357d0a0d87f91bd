//! The target side: applying the operations that arrive (`handle_rma`, called by the engine's
//! input for every `Rma` chunk, in sequence order) and the window's lock. Never trusts the
//! origin: every segment is checked against the window (or its attached regions) before the
//! memory is touched, and a bad one is answered with MPI_ERR_RMA_RANGE.

use madmpi_datatypes::Basic;

use super::wire::{self, Sub};
use super::{op_of, Flavor, Held, LockType, Win};
use crate::engine::State;
use crate::op::{apply_basic, BuiltinOp};
use crate::wire::{Header, Kind};

/// The address of `len` bytes at `off` of window `w` (an address for a dynamic window), if
/// they all lie in it.
#[inline(always)]
fn resolve(w: &Win, off: u64, len: u64) -> Option<*mut u8> {
    let end = off.checked_add(len)?;
    if w.flavor == Flavor::Dynamic {
        // Covered by attached regions, which may be adjacent.
        let (a, end) = (off as usize, end as usize);
        let mut at = a;
        while at < end {
            match w.regions.iter().find(|&&(b, n)| at >= b && at < b + n) {
                Some(&(b, n)) => at = b + n,
                None => return None,
            }
        }
        return (at >= end).then_some(a as *mut u8);
    }
    (end <= w.size as u64).then(|| w.base.wrapping_add(off as usize))
}

impl State {
    /// An `Rma` chunk from world rank `peer`.
    pub(crate) fn handle_rma(&mut self, peer: u32, h: Header, payload: &[u8]) {
        let Some(sub) = Sub::of(h.tag) else {
            return self.peer_error(format!("from rank {peer}: unknown one-sided chunk"));
        };
        if matches!(sub, Sub::Ack | Sub::Reply) {
            return self.rma_answer(peer, sub, h, payload);
        }
        let from = h.src;
        let ok = match self.rma.wins.get(h.ctx as usize) {
            Some(Some(w)) => from >= 0 && w.world.get(from as usize) == Some(&peer),
            _ => false,
        };
        if !ok {
            return self.peer_error(format!(
                "from rank {peer}: a one-sided chunk ({sub:?}) for an unknown window {}",
                h.ctx
            ));
        }
        if matches!(sub, Sub::KeyAsk | Sub::KeyTell) {
            return super::dynreg::key_chunk(self, peer, sub, h, payload);
        }
        let win = self.rma.wins[h.ctx as usize].as_mut().expect("checked");
        // The origin's number of the window travels with every chunk: the answer needs no
        // `peers` entry, which this process may not have yet (a member that finished creating
        // the window may use it before the others have).
        let (reply_to, me) = ((h.aux >> 32) as u32, win.rank);
        let answer = |sub: Sub, flags: u8| Header {
            kind: Kind::Rma as u8,
            flags,
            ctx: reply_to,
            src: me,
            tag: sub as i32,
            msg_len: h.msg_len,
            sreq: h.sreq,
            ..Default::default()
        };
        match sub {
            Sub::Put | Sub::Acc | Sub::Get | Sub::GetAcc | Sub::Cas => {
                let reply = if matches!(sub, Sub::Put | Sub::Acc) {
                    Sub::Ack
                } else {
                    Sub::Reply
                };
                let r = match wire::decode_one(payload) {
                    // (One segment, the usual case: no segment list built.)
                    Some((seg, data)) => apply(win, sub, h.aux, &[seg], data),
                    None => wire::decode(payload)
                        .map_err(|_| Bad::Malformed("malformed RMA chunk"))
                        .and_then(|(segs, data)| apply(win, sub, h.aux, &segs, data)),
                };
                if h.sreq == 0 && matches!(sub, Sub::Put | Sub::Acc) {
                    // Untracked (`batch`): counted, answered when the packet is done.
                    return match r {
                        Ok(_) => self.rma_defer_ack(peer, reply_to, me, false),
                        Err(Bad::Range) => self.rma_defer_ack(peer, reply_to, me, true),
                        Err(Bad::Malformed(why)) => {
                            self.peer_error(format!("from rank {peer}: {why}"))
                        }
                    };
                }
                match r {
                    Ok(body) => self.queue_owned(peer, answer(reply, 0), body),
                    Err(Bad::Range) => {
                        self.queue_owned(peer, answer(reply, wire::ERR_RANGE), Vec::new())
                    }
                    Err(Bad::Malformed(why)) => {
                        self.peer_error(format!("from rank {peer}: {why}"));
                    }
                }
            }
            Sub::Batch if h.sreq == 0 => {
                let mut refused = false;
                let mut p = payload;
                while !p.is_empty() {
                    let Some(((off, len, sub, aux, data), rest)) = wire::record(p) else {
                        return self.peer_error(format!("from rank {peer}: malformed RMA batch"));
                    };
                    let r = match sub {
                        Sub::Put => put_one(win, off, len, data),
                        _ => apply(win, sub, aux, &[(off, len)], data).map(drop),
                    };
                    match r {
                        Ok(()) => {}
                        Err(Bad::Range) => refused = true,
                        Err(Bad::Malformed(why)) => {
                            return self.peer_error(format!("from rank {peer}: {why}"));
                        }
                    }
                    p = rest;
                }
                self.rma_defer_ack(peer, reply_to, me, refused);
            }
            Sub::Batch => self.peer_error(format!("from rank {peer}: a tracked RMA batch")),
            Sub::Lock => {
                let excl = h.flags & 1 != 0;
                if win.waiting.is_empty() && grantable(win, excl) {
                    take(win, from, excl);
                    self.queue_owned(peer, answer(Sub::Grant, h.flags), Vec::new());
                } else {
                    win.waiting.push_back((from, excl, reply_to));
                }
            }
            Sub::Unlock => {
                if let Some(c) = win.unlocks_seen.get_mut(from as usize) {
                    *c += 1;
                }
                give_back(win, from);
                self.serve_lock(h.ctx as usize);
            }
            Sub::Grant => {
                let t = if h.flags & 1 != 0 {
                    LockType::Exclusive
                } else {
                    LockType::Shared
                };
                if win.held[from as usize] == Held::Asked(t) {
                    win.held[from as usize] = Held::Granted(t);
                }
            }
            Sub::Post => win.posts[from as usize] += 1,
            Sub::Complete => win.completes += 1,
            Sub::Ack | Sub::Reply | Sub::KeyAsk | Sub::KeyTell => unreachable!("handled above"),
        }
    }
}

impl State {
    /// Grant window `w`'s lock at this process to the origins waiting for it, in order, as
    /// far as it goes (after an unlock, or after a dead holder's lock was given back).
    pub(super) fn serve_lock(&mut self, w: usize) {
        let Some(Some(win)) = self.rma.wins.get_mut(w) else {
            return;
        };
        let me = win.rank;
        let mut grants = Vec::new();
        while let Some(&(o, excl, id)) = win.waiting.front() {
            if !grantable(win, excl) {
                break;
            }
            win.waiting.pop_front();
            take(win, o, excl);
            grants.push((win.world[o as usize], id, excl));
        }
        for (world, id, excl) in grants {
            let hdr = Header {
                kind: Kind::Rma as u8,
                flags: excl as u8,
                ctx: id,
                src: me,
                tag: Sub::Grant as i32,
                ..Default::default()
            };
            self.queue_owned(world, hdr, Vec::new());
        }
    }
}

fn grantable(w: &Win, excl: bool) -> bool {
    w.excl.is_none() && (!excl || w.shared == 0)
}

fn take(w: &mut Win, from: i32, excl: bool) {
    if excl {
        w.excl = Some(from);
    } else {
        w.shared += 1;
        w.shared_by[from as usize] = true;
    }
}

/// Origin `from` releases the lock it holds on this target (an unlock, or its death).
pub(super) fn give_back(w: &mut Win, from: i32) {
    if w.excl == Some(from) {
        w.excl = None;
    } else if std::mem::take(&mut w.shared_by[from as usize]) {
        w.shared = w.shared.saturating_sub(1);
    }
}

/// One segment of a put (`len` bytes at `off`, its `data`): the usual small put, without the
/// general path's lists; a batch's put records come here straight (`handle_rma`).
#[inline(always)]
fn put_one(w: &Win, off: u64, len: u64, data: &[u8]) -> Result<(), Bad> {
    let p = resolve(w, off, len).ok_or(Bad::Range)?;
    if data.len() as u64 != len {
        return Err(Bad::Malformed("RMA chunk data does not match its segments"));
    }
    // SAFETY: [p, p + len) lies in the window (resolve); the payload is not in it. (The fast
    // path's copy by size: a batch's small puts are mostly one word.)
    unsafe { super::fast::copy(data.as_ptr(), p, data.len()) };
    Ok(())
}

pub(super) enum Bad {
    Range,
    Malformed(&'static str),
}

/// Apply an operation (a chunk's segments `segs` and data, its `aux` word: operation and
/// basic type) to the window; the body of its answer (the data a get-like operation brings
/// back, nothing otherwise). Also used by an origin for operations on its own part of a
/// window (`origin`), with the engine held as here.
pub(super) fn apply(
    w: &Win,
    sub: Sub,
    aux: u64,
    segs: &[(u64, u64)],
    data: &[u8],
) -> Result<Vec<u8>, Bad> {
    if let ([(off, len)], Sub::Put) = (segs, sub) {
        return put_one(w, *off, *len, data).map(|()| Vec::new());
    }
    if let ([(off, len)], Sub::Acc) = (segs, sub) {
        // One segment of an accumulate: applied in place (it holds whole elements).
        let p = resolve(w, *off, *len).ok_or(Bad::Range)?;
        let op = op_of(aux as u8).ok_or(Bad::Malformed("unknown accumulate operation"))?;
        if data.len() as u64 != *len {
            return Err(Bad::Malformed("RMA chunk data does not match its segments"));
        }
        if op == BuiltinOp::NoOp {
            return Ok(Vec::new());
        }
        let b = Basic::ALL
            .get((aux >> 8 & 0xff_ffff) as usize)
            .copied()
            .ok_or(Bad::Malformed("unknown basic type"))?;
        let es = b.size();
        if !data.len().is_multiple_of(es) {
            return Err(Bad::Malformed("accumulate chunk of partial elements"));
        }
        // SAFETY: [p, p + len) lies in the window (resolve); the kernels read and write
        // unaligned; the payload is not in the window.
        unsafe { apply_basic(op, b, data.len() / es, data.as_ptr(), p) }
            .map_err(|_| Bad::Malformed("accumulate operation not defined on its type"))?;
        return Ok(Vec::new());
    }
    let mut ptrs = Vec::with_capacity(segs.len());
    let mut total = 0usize;
    for &(off, len) in segs {
        ptrs.push((resolve(w, off, len).ok_or(Bad::Range)?, len as usize));
        total += len as usize;
    }
    let op = op_of(aux as u8).ok_or(Bad::Malformed("unknown accumulate operation"))?;
    let basic = Basic::ALL.get((aux >> 8 & 0xff_ffff) as usize).copied();
    let need = match sub {
        Sub::Put | Sub::Acc => total,
        Sub::GetAcc if op != BuiltinOp::NoOp => total,
        Sub::Cas => 2 * total,
        _ => 0,
    };
    if data.len() != need {
        return Err(Bad::Malformed("RMA chunk data does not match its segments"));
    }
    let mut out = Vec::new();
    if matches!(sub, Sub::Get | Sub::GetAcc | Sub::Cas) {
        out = gather(&ptrs, total);
    }
    let mut at = 0;
    match sub {
        Sub::Put => {
            for &(p, n) in &ptrs {
                // SAFETY: as above; the payload is not in the window.
                unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(at), p, n) };
                at += n;
            }
        }
        Sub::Acc | Sub::GetAcc if op != BuiltinOp::NoOp => {
            let b = basic.ok_or(Bad::Malformed("unknown basic type"))?;
            let es = b.size();
            if !total.is_multiple_of(es) {
                return Err(Bad::Malformed("accumulate chunk of partial elements"));
            }
            let fail = |_| Bad::Malformed("accumulate operation not defined on its type");
            // Whether every segment holds whole elements (starts at an element boundary of
            // the stream and ends at one): then its bytes are the packed elements.
            let whole = ptrs
                .iter()
                .try_fold(0usize, |at, &(_, n)| {
                    (at % es == 0 && n % es == 0).then_some(at + n)
                })
                .is_some();
            if whole {
                // Apply in place.
                for &(p, n) in &ptrs {
                    // SAFETY: as above; the kernels read and write unaligned.
                    unsafe { apply_basic(op, b, n / es, data.as_ptr().add(at), p) }
                        .map_err(fail)?;
                    at += n;
                }
            } else {
                // Segments split elements (a pair type with a hole, a derived type): gather
                // the target's elements packed, apply, scatter them back.
                let mut tmp = if out.is_empty() {
                    gather(&ptrs, total)
                } else {
                    out.clone()
                };
                // SAFETY: `tmp` and `data` hold `total` bytes, whole elements.
                unsafe { apply_basic(op, b, total / es, data.as_ptr(), tmp.as_mut_ptr()) }
                    .map_err(fail)?;
                scatter(&ptrs, &tmp);
            }
        }
        Sub::Cas => {
            let (new, cmp) = data.split_at(total);
            if out == cmp {
                scatter(&ptrs, new);
            }
        }
        _ => {}
    }
    Ok(out)
}

/// The bytes of the segments, in order.
fn gather(ptrs: &[(*mut u8, usize)], total: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(total);
    for &(p, n) in ptrs {
        // SAFETY: each segment lies in the window (resolve), valid until MPI_Win_free.
        v.extend_from_slice(unsafe { std::slice::from_raw_parts(p, n) });
    }
    v
}

/// Write `data` over the segments, in order (`data` covers them all).
fn scatter(ptrs: &[(*mut u8, usize)], data: &[u8]) {
    let mut at = 0;
    for &(p, n) in ptrs {
        // SAFETY: as in `gather`; `data` is not in the window and holds the segments' bytes.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(at), p, n) };
        at += n;
    }
}
