//! The request-based forms of the communication calls (MPI_Rput, MPI_Rget, MPI_Raccumulate,
//! MPI_Rget_accumulate and their `_c` twins): the fast path first (`fast::rcopy`,
//! `fast::racc`: done at once, the request born complete), else `ops`' checked path.

// (The C signatures: as many arguments as the standard gives them.)
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use madmpi::rma::{Call, Local};
use madmpi::{BuiltinOp, ErrorClass};

use super::super::common::*;
use super::ops::{builtin, dt, issue, local, remote};
use super::{fast, finish_win, win_name};
use crate::abi::*;

/// A NULL request: the error every form reports first.
fn null_request(name: &str, win: MPI_Win) -> c_int {
    finish_win(
        win,
        fail(ErrorClass::Arg, "invalid argument: request is NULL"),
        &|| format!("{name}(win={})", win_name(win)),
    )
}

/// MPI_Rput and MPI_Rget (`put`), with their counts widened.
unsafe fn rcopy(
    name: &'static str,
    put: bool,
    origin_addr: *const c_void,
    origin_count: i64,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: i64,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    if request.is_null() {
        return null_request(name, win);
    }
    // SAFETY: the origin buffer holds its elements; `request` is not NULL.
    if let Some(rc) = unsafe {
        fast::rcopy(
            name,
            put,
            win,
            origin_addr,
            (origin_count, origin_datatype),
            target_rank,
            target_disp,
            (target_count, target_datatype),
            request,
        )
    } {
        return rc;
    }
    issue(name, win, request, || {
        let o = local(origin_addr, origin_count, origin_datatype)?;
        let t = remote(target_rank, target_disp, target_count, target_datatype)?;
        Ok(if put {
            Call::Put(o, t)
        } else {
            Call::Get(o, t)
        })
    })
}

/// MPI_Raccumulate (`result` None) and MPI_Rget_accumulate, with their counts widened.
unsafe fn racc(
    name: &'static str,
    origin_addr: *const c_void,
    origin_count: i64,
    origin_datatype: MPI_Datatype,
    result: Option<(*mut c_void, i64, MPI_Datatype)>,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: i64,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    if request.is_null() {
        return null_request(name, win);
    }
    // SAFETY: the buffers hold their elements; `request` is not NULL.
    if let Some(rc) = unsafe {
        fast::racc(
            name,
            win,
            origin_addr,
            (origin_count, origin_datatype),
            result,
            target_rank,
            target_disp,
            (target_count, target_datatype),
            op,
            request,
        )
    } {
        return rc;
    }
    issue(name, win, request, || {
        // (The arguments are checked in the order of the calls' other forms.)
        let Some((result_addr, result_count, result_datatype)) = result else {
            let o = local(origin_addr, origin_count, origin_datatype)?;
            let t = remote(target_rank, target_disp, target_count, target_datatype)?;
            return Ok(Call::Acc(o, t, builtin(op, target_datatype)?));
        };
        let b = builtin(op, target_datatype)?;
        let origin = if b == BuiltinOp::NoOp {
            Local {
                ptr: origin_addr as *mut u8,
                count: 0,
                dt: dt(target_datatype)?,
            }
        } else {
            local(origin_addr, origin_count, origin_datatype)?
        };
        let r = local(result_addr, result_count, result_datatype)?;
        let t = remote(target_rank, target_disp, target_count, target_datatype)?;
        Ok(Call::GetAcc(origin, r, t, b))
    })
}

pub unsafe fn MPI_Rput(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        rcopy(
            "MPI_Rput",
            true,
            origin_addr,
            i64::from(origin_count),
            origin_datatype,
            target_rank,
            target_disp,
            i64::from(target_count),
            target_datatype,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Rput_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        rcopy(
            "MPI_Rput_c",
            true,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Rget(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        rcopy(
            "MPI_Rget",
            false,
            origin_addr,
            i64::from(origin_count),
            origin_datatype,
            target_rank,
            target_disp,
            i64::from(target_count),
            target_datatype,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Rget_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        rcopy(
            "MPI_Rget_c",
            false,
            origin_addr,
            origin_count,
            origin_datatype,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Raccumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        racc(
            "MPI_Raccumulate",
            origin_addr,
            i64::from(origin_count),
            origin_datatype,
            None,
            target_rank,
            target_disp,
            i64::from(target_count),
            target_datatype,
            op,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Raccumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        racc(
            "MPI_Raccumulate_c",
            origin_addr,
            origin_count,
            origin_datatype,
            None,
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            op,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Rget_accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: c_int,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        racc(
            "MPI_Rget_accumulate",
            origin_addr,
            i64::from(origin_count),
            origin_datatype,
            Some((result_addr, i64::from(result_count), result_datatype)),
            target_rank,
            target_disp,
            i64::from(target_count),
            target_datatype,
            op,
            win,
            request,
        )
    }
}

pub unsafe fn MPI_Rget_accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    result_addr: *mut c_void,
    result_count: MPI_Count,
    result_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
    request: *mut MPI_Request,
) -> c_int {
    // SAFETY: forwarded caller contract.
    unsafe {
        racc(
            "MPI_Rget_accumulate_c",
            origin_addr,
            origin_count,
            origin_datatype,
            Some((result_addr, result_count, result_datatype)),
            target_rank,
            target_disp,
            target_count,
            target_datatype,
            op,
            win,
            request,
        )
    }
}
