//! Blocking collectives of two processes over point-to-point, without a schedule: the
//! messages are posted and waited for directly, under one lock each. Two processes need no
//! algorithm (each sends the other what it needs, once), and at this size building, boxing
//! and advancing a schedule costs as much as the messages themselves on a fast network.
//!
//! The messages are exactly those of the schedule the general path would build (one exchange
//! on the collective context, tagged with the collective's sequence number), so the choice
//! between the two never needs to agree between processes beyond what the general path
//! already requires (the same size and operation everywhere).
//!
//! # What this module must never do
//!
//! Handle more than two processes, or an intercommunicator.

use madmpi_datatypes::Datatype;

use crate::api::{wait_until, with};
use crate::engine::State;
use crate::error::Result;
use crate::op::{apply_packed, AlignedBuf, Op};
use crate::request::{RequestId, SendMode};
use crate::CommId;

use super::sched::bytes;
use super::step_done;

/// The process's rank and whether `comm` is an intracommunicator of two processes.
fn pair(comm: CommId) -> Result<Option<i32>> {
    with(|e| {
        let c = e.st.comm(comm)?;
        Ok((c.remote.is_none() && c.size == 2).then_some(c.rank))
    })
}

/// A typed buffer.
type Buf<'a> = (*mut u8, usize, &'a Datatype);

/// Post a receive (`send` false) or a send of a typed buffer to or from the other process
/// (rank `1 - me`) with tag `tag`, under the lock the caller holds.
///
/// # Safety
/// The buffer holds its elements until the request completes.
unsafe fn post(
    st: &mut State,
    comm: CommId,
    me: i32,
    tag: i32,
    send: bool,
    b: Buf<'_>,
) -> Result<RequestId> {
    let (p, c, dt) = b;
    if send {
        st.isend(p, c, dt, 1 - me, tag, comm, SendMode::Standard, true)
    } else {
        st.irecv(p, c, dt, 1 - me, tag, comm, true)
    }
}

/// Wait until every request of `ids` has completed (and free them, setting their entries to
/// None).
fn wait_all(ids: &mut [Option<RequestId>]) -> Result<()> {
    wait_until(|e| {
        for p in ids.iter_mut() {
            if let Some(id) = *p {
                if step_done(&mut e.st, id)?.is_some() {
                    *p = None;
                }
            }
        }
        Ok(ids.iter().all(Option::is_none).then_some(()))
    })
}

/// After a failure: the requests still in `ids` free themselves when they complete, and
/// `scratch` is leaked, since they may still write into it.
fn abandon(ids: &[Option<RequestId>], scratch: Vec<AlignedBuf>) {
    let _ = with(|e| {
        for id in ids.iter().flatten() {
            if let Some(r) = e.st.reqs.get_mut(*id) {
                r.detached = true;
            }
        }
        Ok(())
    });
    std::mem::forget(scratch);
}

/// Receive `recv` from and send `send` to the other process (rank `1 - me`), with the
/// collective's tag, and wait for both.
///
/// # Safety
/// The buffers hold their elements until the call returns.
unsafe fn exchange(
    comm: CommId,
    me: i32,
    send: Option<Buf<'_>>,
    recv: Option<Buf<'_>>,
) -> Result<()> {
    let mut ids = start(comm, me, send, recv)?;
    let r = wait_all(&mut ids);
    if r.is_err() {
        abandon(&ids, Vec::new());
    }
    r
}

/// Post the receive and the send of [`exchange`] (receive first).
///
/// # Safety
/// As [`exchange`], until the requests complete.
unsafe fn start(
    comm: CommId,
    me: i32,
    send: Option<Buf<'_>>,
    recv: Option<Buf<'_>>,
) -> Result<[Option<RequestId>; 2]> {
    let tag = crate::comm::next_tag(comm);
    with(|e| {
        let r = match recv {
            // SAFETY: forwarded caller contract.
            Some(b) => Some(unsafe { post(&mut e.st, comm, me, tag, false, b)? }),
            None => None,
        };
        let s = match send {
            // A small message to an idle peer leaves at once, with no request to wait for
            // (exactly the packet the general path would send).
            // SAFETY: forwarded caller contract.
            Some((p, c, dt))
                if unsafe {
                    e.try_send_now(p, c, dt, 1 - me, tag, comm, crate::engine::NO_SREQ, true)?
                }
                .is_some() =>
            {
                None
            }
            // SAFETY: forwarded caller contract.
            Some(b) => Some(unsafe { post(&mut e.st, comm, me, tag, true, b)? }),
            None => None,
        };
        e.flush()?;
        Ok([r, s])
    })
}

/// MPI_Barrier of two processes: `Ok(false)` if `comm` has not two.
pub(crate) fn barrier(comm: CommId) -> Result<bool> {
    let Some(me) = pair(comm)? else {
        return Ok(false);
    };
    let nothing = std::ptr::NonNull::<u8>::dangling().as_ptr();
    let b = bytes();
    // SAFETY: zero bytes.
    unsafe { exchange(comm, me, Some((nothing, 0, &b)), Some((nothing, 0, &b)))? };
    Ok(true)
}

/// MPI_Allreduce of two processes: one exchange of the whole vector, then combine in rank
/// order (`split` false: what recursive doubling does), or (`split`) each process combines
/// half of it and sends it back, chunk by chunk, so that combining overlaps the transfers
/// (what Rabenseifner's algorithm does, pipelined). Any operation: the lower rank's operand is
/// always the `in` one.
///
/// # Safety
/// As `super::allreduce`.
pub(crate) unsafe fn allreduce(
    send: super::Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    split: bool,
) -> Result<bool> {
    let Some(me) = pair(comm)? else {
        return Ok(false);
    };
    let esz = dt.size();
    let nb = count * esz;
    if count == 0 || esz == 0 {
        return Ok(true);
    }
    // Packed input and output.
    let mut tin = None;
    let sp: *const u8 = match (send, dt.contiguous_span(count)) {
        (super::Input::Buf(p), Some((o, _))) => p.wrapping_offset(o),
        (super::Input::Buf(p), None) => {
            let t = tin.insert(AlignedBuf::new(nb)).ptr();
            dt.pack(p, count, 0, std::slice::from_raw_parts_mut(t, nb));
            t
        }
        (super::Input::InPlace, _) => {
            let t = tin.insert(AlignedBuf::new(nb)).ptr();
            super::sched::copy_typed(recv, count, dt, t, nb, &bytes())?;
            t
        }
    };
    let mut res = None;
    let out = match dt.contiguous_span(count) {
        Some((o, _)) => recv.wrapping_offset(o),
        None => res.insert(AlignedBuf::new(nb)).ptr(),
    };
    if split && count >= 2 {
        if let Err(e) = split_allreduce(comm, me, sp, out, count, dt, op) {
            // Sends from it may still be going.
            std::mem::forget(tin);
            std::mem::forget(res);
            return Err(e);
        }
    } else {
        let mut theirs = AlignedBuf::new(nb);
        let tp = theirs.ptr();
        let b = bytes();
        if let Err(e) = exchange(comm, me, Some((sp as *mut u8, nb, &b)), Some((tp, nb, &b))) {
            // The receive may still land.
            std::mem::forget(theirs);
            std::mem::forget(tin);
            return Err(e);
        }
        combine(me, sp, tp, out, count, dt, op)?;
    }
    if res.is_some() {
        dt.unpack(recv, count, 0, std::slice::from_raw_parts(out, nb));
    }
    Ok(true)
}

/// `out = c0 op c1` over `count` packed elements, `mine` being this process's operand and
/// `theirs` the other's (which may be overwritten); `out` may be `mine`.
///
/// # Safety
/// The three buffers hold `count` packed elements; `out` does not overlap `theirs`.
unsafe fn combine(
    me: i32,
    mine: *const u8,
    theirs: *mut u8,
    out: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
) -> Result<()> {
    let nb = count * dt.size();
    if me == 0 {
        apply_packed(op, dt, count, mine, theirs)?;
        std::ptr::copy_nonoverlapping(theirs, out, nb);
    } else {
        if !std::ptr::eq(out, mine) {
            std::ptr::copy(mine, out, nb);
        }
        apply_packed(op, dt, count, theirs, out)?;
    }
    Ok(())
}

/// Chunks of `SPLIT_CHUNK` bytes (about) of half `h` of `count` elements of `esz` bytes:
/// `(first element, elements)` of chunk `i` of `chunks(..)`.
fn half_chunks(count: usize, esz: usize, h: usize) -> impl Iterator<Item = (usize, usize)> {
    let (hs, hc) = super::algo::block(count, 2, h);
    let k = (hc * esz).div_ceil(SPLIT_CHUNK).max(1);
    (0..k).map(move |i| {
        let (s, c) = super::algo::block(hc, k, i);
        (hs + s, c)
    })
}

/// Bytes per message of the pipelined allreduce: large, since every message costs a
/// rendezvous (over TCP, halves of 1 MiB went fastest unpipelined).
const SPLIT_CHUNK: usize = 1 << 20;

/// The `split` form of [`allreduce`]: send the other process its half of this process's
/// contribution and receive its contribution to this process's half (all chunks posted at
/// once), combine each chunk as it arrives and send the result at once, and receive the other
/// half's results straight into `out`.
///
/// # Safety
/// `sp` and `out` hold `count` packed elements and do not overlap.
unsafe fn split_allreduce(
    comm: CommId,
    me: i32,
    sp: *const u8,
    out: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
) -> Result<()> {
    let esz = dt.size();
    let mine = me as usize;
    let (ms, mc) = super::algo::block(count, 2, mine);
    let mut tb = AlignedBuf::new(mc * esz);
    // Contributions to this half land at `tp + (first - ms) * esz`.
    let tp = tb.ptr().wrapping_sub(ms * esz);
    let tag = crate::comm::next_tag(comm);
    let b = bytes();
    let mine_chunks: Vec<(usize, usize)> = half_chunks(count, esz, mine).collect();
    let k = mine_chunks.len();
    // The first `k` entries: this half's incoming chunks, in order; then everything else.
    let mut ids: Vec<Option<RequestId>> = Vec::with_capacity(4 * k + 4);
    let r = (|| -> Result<()> {
        split_post(
            comm,
            me,
            tag,
            sp,
            out,
            tp,
            count,
            esz,
            &mine_chunks,
            &mut ids,
        )?;
        for (i, &(f, c)) in mine_chunks.iter().enumerate() {
            wait_all(&mut ids[i..i + 1])?;
            let (o, t) = (out.add(f * esz), tp.add(f * esz));
            combine(me, sp.add(f * esz), t, o, c, dt, op)?;
            // SAFETY: the combined chunk stays in `out` until the send completes.
            let s = with(|e| {
                let s = unsafe { post(&mut e.st, comm, me, tag | 2, true, (o, c * esz, &b))? };
                e.flush()?;
                Ok(s)
            })?;
            ids.push(Some(s));
        }
        wait_all(&mut ids)
    })();
    if r.is_err() {
        abandon(&ids, vec![tb]);
    }
    r
}

/// Post the messages [`split_allreduce`] starts with (into `ids`): receives of this half's
/// chunks (first, in order), sends of the other half's, receives of the other half's results.
///
/// # Safety
/// As [`split_allreduce`]; `tp` is where this half's incoming chunks go.
#[allow(clippy::too_many_arguments)]
unsafe fn split_post(
    comm: CommId,
    me: i32,
    tag: i32,
    sp: *const u8,
    out: *mut u8,
    tp: *mut u8,
    count: usize,
    esz: usize,
    mine_chunks: &[(usize, usize)],
    ids: &mut Vec<Option<RequestId>>,
) -> Result<()> {
    let b = bytes();
    let theirs = 1 - me as usize;
    with(|e| {
        for &(f, c) in mine_chunks {
            // SAFETY: `tp` + this chunk lies in the caller's scratch, alive until the
            // requests complete.
            ids.push(Some(unsafe {
                post(
                    &mut e.st,
                    comm,
                    me,
                    tag | 1,
                    false,
                    (tp.add(f * esz), c * esz, &b),
                )?
            }));
        }
        for (f, c) in half_chunks(count, esz, theirs) {
            // SAFETY: chunks of the other half of `sp` and `out` (caller contract).
            unsafe {
                ids.push(Some(post(
                    &mut e.st,
                    comm,
                    me,
                    tag | 1,
                    true,
                    (sp.add(f * esz) as *mut u8, c * esz, &b),
                )?));
                ids.push(Some(post(
                    &mut e.st,
                    comm,
                    me,
                    tag | 2,
                    false,
                    (out.add(f * esz), c * esz, &b),
                )?));
            }
        }
        e.flush()
    })
}

/// MPI_Bcast of two processes: the root sends, the other receives (typed, in place).
///
/// # Safety
/// As `super::bcast`.
pub(crate) unsafe fn bcast(d: &super::Data, root: i32, comm: CommId) -> Result<bool> {
    let Some(me) = pair(comm)? else {
        return Ok(false);
    };
    if !(0..2).contains(&root) {
        return crate::error::err(
            crate::error::ErrorClass::Root,
            format!("invalid root {root}"),
        );
    }
    let buf = Some((d.ptr, d.count, &d.dt));
    if me == root {
        exchange(comm, me, buf, None)?;
    } else {
        exchange(comm, me, None, buf)?;
    }
    Ok(true)
}

/// MPI_Alltoall of two processes: one exchange, and the own block copied (`send` None: in
/// place, the outgoing block is copied away first).
///
/// # Safety
/// As `super::alltoall`.
pub(crate) unsafe fn alltoall(
    send: Option<&super::Data>,
    recv: &super::Data,
    comm: CommId,
) -> Result<bool> {
    let Some(me) = pair(comm)? else {
        return Ok(false);
    };
    let peer = 1 - me;
    let (rp, rc, rdt) = recv.block(peer);
    match send {
        Some(s) => {
            // The own block is copied while the exchange goes on.
            let (sp, sc, sdt) = s.block(peer);
            let mut ids = start(comm, me, Some((sp, sc, &sdt)), Some((rp, rc, &rdt)))?;
            let (op, oc, odt) = s.block(me);
            let (mp, mc, mdt) = recv.block(me);
            let r = super::sched::copy_typed(op, oc, &odt, mp, mc, &mdt).and(wait_all(&mut ids));
            if r.is_err() {
                abandon(&ids, Vec::new());
            }
            r?;
        }
        None => {
            let nb = rc * rdt.size();
            let mut t = AlignedBuf::new(nb);
            let tp = t.ptr();
            super::sched::copy_typed(rp, rc, &rdt, tp, nb, &bytes())?;
            let b = bytes();
            if let Err(e) = exchange(comm, me, Some((tp, nb, &b)), Some((rp, rc, &rdt))) {
                // The send may still read it.
                std::mem::forget(t);
                return Err(e);
            }
        }
    }
    Ok(true)
}
