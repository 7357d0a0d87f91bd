//! The arguments of the one-sided calls' fast path (`madmpi::rma::put_now` …): a live window,
//! non-negative counts of predefined datatypes (borrowed from the predefined table: no
//! reference counting), buffers that are neither NULL nor MPI_IN_PLACE when they hold data, a
//! predefined operation. Anything else, every error included, takes the checked path, which
//! reports it.

use std::os::raw::{c_int, c_void};

use madmpi::rma::{self, Run, WinId};
use madmpi::BuiltinOp;

use super::WIN_SIDE;
use crate::abi::*;
use crate::handles;

/// The core window of live window handle `w`.
#[inline(always)]
pub(super) fn win_live(w: MPI_Win) -> Option<WinId> {
    WIN_SIDE.get(w as usize).map(|(_, id)| WinId(id as u32))
}

/// Whether `count` elements at `buf` (`None`: the target's, no buffer here) may take the fast
/// path: a non-negative count, and a buffer that is neither NULL nor MPI_IN_PLACE when it
/// holds data.
#[inline(always)]
fn usable(buf: Option<*const c_void>, count: i64) -> bool {
    // MPI_IN_PLACE is address 1: one comparison covers it and NULL.
    count >= 0 && !buf.is_some_and(|b| (b as usize) <= MPI_IN_PLACE as usize && count > 0)
}

/// A buffer argument of the fast path: `count` elements of predefined `d` at `buf`.
#[inline(always)]
pub(super) fn run(buf: *const c_void, count: i64, d: MPI_Datatype) -> Option<Run<'static>> {
    if !usable(Some(buf), count) {
        return None;
    }
    Some(Run {
        ptr: buf as *mut u8,
        count: count as usize,
        dt: handles::predefined_type(d)?,
    })
}

/// A put's buffer argument on the fast path: its bytes, when it is `count` elements of a
/// predefined `d` that lie in one run of memory from `buf` (`buf` ignored for the target's,
/// `None`).
#[inline(always)]
pub(super) fn bytes(buf: Option<*const c_void>, count: i64, d: MPI_Datatype) -> Option<usize> {
    if !usable(buf, count) {
        return None;
    }
    (count as usize).checked_mul(handles::predefined_run_bytes(d)?)
}

/// The target's elements (no buffer here).
#[inline(always)]
pub(super) fn target(count: i64, d: MPI_Datatype) -> Option<Run<'static>> {
    if !usable(None, count) {
        return None;
    }
    Some(Run {
        ptr: std::ptr::null_mut(),
        count: count as usize,
        dt: handles::predefined_type(d)?,
    })
}

/// A predefined operation.
#[inline(always)]
pub(super) fn op(o: MPI_Op) -> Option<BuiltinOp> {
    super::super::op::builtin(o as usize)
}

/// MPI_Rput (`put`) or MPI_Rget on the fast path, `request` not NULL: its return code when
/// done (the request, born complete, written there), `None` when the general path must do it.
///
/// # Safety
/// The origin buffer holds its elements (the caller's contract); `request` is writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn rcopy(
    name: &'static str,
    put: bool,
    win: MPI_Win,
    buf: *const c_void,
    (oc, od): (i64, MPI_Datatype),
    rank: c_int,
    disp: MPI_Aint,
    (tc, td): (i64, MPI_Datatype),
    request: *mut MPI_Request,
) -> Option<c_int> {
    let (id, o, t) = (win_live(win)?, run(buf, oc, od)?, target(tc, td)?);
    // SAFETY: forwarded.
    let rid = unsafe {
        if put {
            rma::rput_now(id, o, rank, disp as i64, t)
        } else {
            rma::rget_now(id, o, rank, disp as i64, t)
        }
    }?;
    // SAFETY: forwarded.
    Some(unsafe { born(name, win, rid, request) })
}

/// MPI_Raccumulate (`result` `None`) or MPI_Rget_accumulate on the fast path, `request` not
/// NULL: as [`rcopy`].
///
/// # Safety
/// The buffers hold their elements (the caller's contract); `request` is writable.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub(super) unsafe fn racc(
    name: &'static str,
    win: MPI_Win,
    origin: *const c_void,
    (oc, od): (i64, MPI_Datatype),
    result: Option<(*mut c_void, i64, MPI_Datatype)>,
    rank: c_int,
    disp: MPI_Aint,
    (tc, td): (i64, MPI_Datatype),
    o: MPI_Op,
    request: *mut MPI_Request,
) -> Option<c_int> {
    let (id, t, b) = (win_live(win)?, target(tc, td)?, op(o)?);
    let r = match result {
        Some((p, c, d)) => Some(run(p, c, d)?),
        None => None,
    };
    // (Get-accumulate does not read the origin with MPI_NO_OP: any arguments do.)
    let or = match (b, r) {
        (BuiltinOp::NoOp, Some(_)) => t,
        _ => run(origin, oc, od)?,
    };
    // SAFETY: forwarded.
    match unsafe { rma::racc_now(id, or, r, rank, disp as i64, t, b) }? {
        // SAFETY: forwarded.
        Ok(rid) => Some(unsafe { born(name, win, rid, request) }),
        Err(e) => Some(super::finish_win(win, Err(e), &|| {
            format!("{name}(win={})", super::win_name(win))
        })),
    }
}

/// Give request `rid` of a fast-path call its handle, at `request`.
///
/// # Safety
/// `request` is writable.
#[inline(always)]
unsafe fn born(
    name: &'static str,
    win: MPI_Win,
    rid: madmpi::RequestId,
    request: *mut MPI_Request,
) -> c_int {
    match handles::new_request(rid, super::window::win_comm(win)) {
        Ok(h) => {
            // SAFETY: the caller's.
            unsafe { *request = h };
            MPI_SUCCESS
        }
        Err(e) => super::finish_win(win, Err(e), &|| {
            format!("{name}(win={})", super::win_name(win))
        }),
    }
}
