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
    let peer = 1 - me;
    let tag = crate::comm::next_tag(comm);
    let (r, s) = with(|e| {
        let r = match recv {
            // SAFETY: forwarded caller contract.
            Some((p, c, dt)) => Some(unsafe { e.st.irecv(p, c, dt, peer, tag, comm, true)? }),
            None => None,
        };
        let s = match send {
            // SAFETY: forwarded caller contract.
            Some((p, c, dt)) => Some(unsafe {
                e.st.isend(p, c, dt, peer, tag, comm, SendMode::Standard, true)?
            }),
            None => None,
        };
        e.flush()?;
        Ok((r, s))
    })?;
    let mut pending: [Option<RequestId>; 2] = [r, s];
    wait_until(|e| {
        for p in pending.iter_mut() {
            if let Some(id) = *p {
                if step_done(&mut e.st, id)?.is_some() {
                    *p = None;
                }
            }
        }
        Ok(pending.iter().all(Option::is_none).then_some(()))
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

/// MPI_Allreduce of two processes whose general algorithm would be one exchange of the whole
/// vector (recursive doubling): exchange, then combine in rank order.
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
    let mut theirs = AlignedBuf::new(nb);
    let tp = theirs.ptr();
    let b = bytes();
    exchange(comm, me, Some((sp as *mut u8, nb, &b)), Some((tp, nb, &b)))?;
    // c0 op c1, the lower rank's operand as `in`.
    let mut res = None;
    let out = match dt.contiguous_span(count) {
        Some((o, _)) => recv.wrapping_offset(o),
        None => res.insert(AlignedBuf::new(nb)).ptr(),
    };
    if me == 0 {
        apply_packed(op, dt, count, sp, tp)?;
        std::ptr::copy_nonoverlapping(tp, out, nb);
    } else {
        if !std::ptr::eq(out, sp) {
            std::ptr::copy(sp, out, nb);
        }
        apply_packed(op, dt, count, tp, out)?;
    }
    if res.is_some() {
        dt.unpack(recv, count, 0, std::slice::from_raw_parts(out, nb));
    }
    Ok(true)
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
            let (sp, sc, sdt) = s.block(peer);
            exchange(comm, me, Some((sp, sc, &sdt)), Some((rp, rc, &rdt)))?;
            let (op, oc, odt) = s.block(me);
            let (mp, mc, mdt) = recv.block(me);
            super::sched::copy_typed(op, oc, &odt, mp, mc, &mdt)?;
        }
        None => {
            let nb = rc * rdt.size();
            let mut t = AlignedBuf::new(nb);
            let tp = t.ptr();
            super::sched::copy_typed(rp, rc, &rdt, tp, nb, &bytes())?;
            let b = bytes();
            exchange(comm, me, Some((tp, nb, &b)), Some((rp, rc, &rdt)))?;
        }
    }
    Ok(true)
}
