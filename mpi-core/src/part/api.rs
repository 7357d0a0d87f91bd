//! The calls of partitioned communication, as the C layer makes them.

use madmpi_datatypes::Datatype;

use super::Shared;
use crate::api::with;
use crate::engine::State;
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{Persistent, RequestId};
use crate::CommId;

/// MPI_Psend_init: an inactive partitioned send of `parts` partitions of `count` elements.
///
/// # Safety
/// `buf` must hold `parts * count` elements of `dt` while the request is active.
#[allow(clippy::too_many_arguments)]
pub unsafe fn psend_init(
    buf: *const u8,
    parts: usize,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
) -> Result<RequestId> {
    with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.psend_init(buf, parts, count, dt, dest, tag, comm)? };
        if e.st.sends_leave_at_once() {
            e.flush()?;
        }
        Ok(r)
    })
}

/// MPI_Precv_init.
///
/// # Safety
/// As [`psend_init`].
#[allow(clippy::too_many_arguments)]
pub unsafe fn precv_init(
    buf: *mut u8,
    parts: usize,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<RequestId> {
    // SAFETY: forwarded caller contract.
    with(|e| unsafe { e.st.precv_init(buf, parts, count, dt, src, tag, comm) })
}

/// The state of partitioned request `r`.
fn part_of(st: &State, r: RequestId) -> Result<Shared> {
    let req = st
        .reqs
        .get(r)
        .ok_or_else(|| Error::new(ErrorClass::Request, "invalid request handle"))?;
    match req.persistent.as_deref() {
        Some(Persistent::Part(p)) => Ok(p.clone()),
        _ => err(ErrorClass::Request, "not a partitioned request"),
    }
}

/// Whether `r` is a partitioned request that is active and not complete (MPI_Request_free
/// refuses it: the round could never end).
pub(crate) fn is_running_part(st: &State, r: RequestId) -> bool {
    st.reqs.get(r).is_some_and(|q| {
        q.active && !q.complete && matches!(q.persistent.as_deref(), Some(Persistent::Part(_)))
    })
}

/// MPI_Pready, MPI_Pready_range and MPI_Pready_list: the partitions of `parts` are ready; their
/// sends leave together (one flush), so the strategy may put them in one packet. Every
/// partition is checked before any leaves.
pub fn pready(r: RequestId, parts: &[i64]) -> Result<()> {
    with(|e| {
        let shared = part_of(&e.st, r)?;
        let mut p = shared.lock();
        if !p.send {
            return err(
                ErrorClass::Request,
                "MPI_Pready on a partitioned receive request",
            );
        }
        if !p.active {
            return err(
                ErrorClass::Request,
                "MPI_Pready on an inactive partitioned request (call MPI_Start first)",
            );
        }
        for &i in parts {
            in_range(i, p.parts)?;
        }
        for &i in parts {
            p.ready(&mut e.st, i as usize)?;
        }
        drop(p);
        if e.st.sends_leave_at_once() {
            e.flush()?;
        }
        Ok(())
    })
}

/// MPI_Parrived: whether receive partition `i` has arrived (one pass of progress first). An
/// inactive request reports every partition arrived.
pub fn parrived(r: RequestId, i: i64) -> Result<bool> {
    with(|e| {
        let shared = part_of(&e.st, r)?;
        {
            let p = shared.lock();
            if p.send {
                return err(
                    ErrorClass::Request,
                    "MPI_Parrived on a partitioned send request",
                );
            }
            in_range(i, p.parts)?;
            if !p.active {
                return Ok(true);
            }
        }
        e.progress()?;
        let mut p = shared.lock();
        if !p.active {
            return Ok(true);
        }
        p.advance(&mut e.st);
        p.has_arrived(i as usize)
    })
}

/// Partition `i` of a request of `parts` partitions exists (else MPI_ERR_ARG).
fn in_range(i: i64, parts: usize) -> Result<()> {
    if i < 0 || i >= parts as i64 {
        return err(
            ErrorClass::Arg,
            format!("partition {i} out of range (the request has {parts} partitions)"),
        );
    }
    Ok(())
}
