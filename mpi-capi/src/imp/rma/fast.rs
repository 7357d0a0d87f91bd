//! The arguments of the one-sided calls' fast path (`madmpi::rma::put_now` …): a live window,
//! non-negative counts of predefined datatypes (borrowed from the predefined table: no
//! reference counting), buffers that are neither NULL nor MPI_IN_PLACE when they hold data, a
//! predefined operation. Anything else, every error included, takes the checked path, which
//! reports it.

use std::os::raw::c_void;

use madmpi::rma::{Run, WinId};
use madmpi::BuiltinOp;

use super::WIN_SIDE;
use crate::abi::*;
use crate::handles;

/// The core window of live window handle `w`.
#[inline(always)]
pub(super) fn win_live(w: MPI_Win) -> Option<WinId> {
    WIN_SIDE.get(w as usize).map(|(_, id)| WinId(id as u32))
}

/// A buffer argument of the fast path: `count` elements of predefined `d` at `buf`.
#[inline(always)]
pub(super) fn run(buf: *const c_void, count: i64, d: MPI_Datatype) -> Option<Run<'static>> {
    // MPI_IN_PLACE is address 1: one comparison covers it and NULL.
    if count < 0 || ((buf as usize) <= MPI_IN_PLACE as usize && count > 0) {
        return None;
    }
    Some(Run {
        ptr: buf as *mut u8,
        count: count as usize,
        dt: handles::predefined_type(d)?,
    })
}

/// The target's elements (no buffer here).
#[inline(always)]
pub(super) fn target(count: i64, d: MPI_Datatype) -> Option<Run<'static>> {
    if count < 0 {
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
