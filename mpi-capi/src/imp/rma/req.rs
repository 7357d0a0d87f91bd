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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Rput(win={})", win_name(win)),
        );
    }
    // SAFETY: the origin buffer holds its elements; `request` is not NULL.
    let (o, t) = (
        (i64::from(origin_count), origin_datatype),
        (i64::from(target_count), target_datatype),
    );
    let at = (target_rank, target_disp);
    if let Some(rc) = unsafe {
        fast::rcopy(
            "MPI_Rput",
            true,
            win,
            origin_addr,
            o,
            at.0,
            at.1,
            t,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Rput", win, request, || {
        Ok(Call::Put(
            local(origin_addr, i64::from(origin_count), origin_datatype)?,
            remote(
                target_rank,
                target_disp,
                i64::from(target_count),
                target_datatype,
            )?,
        ))
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Rput_c(win={})", win_name(win)),
        );
    }
    // SAFETY: the origin buffer holds its elements; `request` is not NULL.
    let (o, t) = (
        (origin_count, origin_datatype),
        (target_count, target_datatype),
    );
    let at = (target_rank, target_disp);
    if let Some(rc) = unsafe {
        fast::rcopy(
            "MPI_Rput_c",
            true,
            win,
            origin_addr,
            o,
            at.0,
            at.1,
            t,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Rput_c", win, request, || {
        Ok(Call::Put(
            local(origin_addr, origin_count, origin_datatype)?,
            remote(target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Rget(win={})", win_name(win)),
        );
    }
    // SAFETY: the origin buffer holds its elements; `request` is not NULL.
    let (o, t) = (
        (i64::from(origin_count), origin_datatype),
        (i64::from(target_count), target_datatype),
    );
    let at = (target_rank, target_disp);
    if let Some(rc) = unsafe {
        fast::rcopy(
            "MPI_Rget",
            false,
            win,
            origin_addr as *const c_void,
            o,
            at.0,
            at.1,
            t,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Rget", win, request, || {
        Ok(Call::Get(
            local(
                origin_addr as *const c_void,
                i64::from(origin_count),
                origin_datatype,
            )?,
            remote(
                target_rank,
                target_disp,
                i64::from(target_count),
                target_datatype,
            )?,
        ))
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Rget_c(win={})", win_name(win)),
        );
    }
    // SAFETY: the origin buffer holds its elements; `request` is not NULL.
    let (o, t) = (
        (origin_count, origin_datatype),
        (target_count, target_datatype),
    );
    let at = (target_rank, target_disp);
    if let Some(rc) = unsafe {
        fast::rcopy(
            "MPI_Rget_c",
            false,
            win,
            origin_addr as *const c_void,
            o,
            at.0,
            at.1,
            t,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Rget_c", win, request, || {
        Ok(Call::Get(
            local(origin_addr as *const c_void, origin_count, origin_datatype)?,
            remote(target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Raccumulate(win={})", win_name(win)),
        );
    }
    let (o, t) = (
        (i64::from(origin_count), origin_datatype),
        (i64::from(target_count), target_datatype),
    );
    let at = (target_rank, target_disp);
    // SAFETY: the buffers hold their elements; `request` is not NULL.
    if let Some(rc) = unsafe {
        fast::racc(
            "MPI_Raccumulate",
            win,
            origin_addr,
            o,
            None,
            at.0,
            at.1,
            t,
            op,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Raccumulate", win, request, || {
        Ok(Call::Acc(
            local(origin_addr, i64::from(origin_count), origin_datatype)?,
            remote(
                target_rank,
                target_disp,
                i64::from(target_count),
                target_datatype,
            )?,
            builtin(op, target_datatype)?,
        ))
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Raccumulate_c(win={})", win_name(win)),
        );
    }
    let (o, t) = (
        (origin_count, origin_datatype),
        (target_count, target_datatype),
    );
    let at = (target_rank, target_disp);
    // SAFETY: the buffers hold their elements; `request` is not NULL.
    if let Some(rc) = unsafe {
        fast::racc(
            "MPI_Raccumulate_c",
            win,
            origin_addr,
            o,
            None,
            at.0,
            at.1,
            t,
            op,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Raccumulate_c", win, request, || {
        Ok(Call::Acc(
            local(origin_addr, origin_count, origin_datatype)?,
            remote(target_rank, target_disp, target_count, target_datatype)?,
            builtin(op, target_datatype)?,
        ))
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Rget_accumulate(win={})", win_name(win)),
        );
    }
    let (o, t) = (
        (i64::from(origin_count), origin_datatype),
        (i64::from(target_count), target_datatype),
    );
    let at = (target_rank, target_disp);
    // SAFETY: the buffers hold their elements; `request` is not NULL.
    if let Some(rc) = unsafe {
        fast::racc(
            "MPI_Rget_accumulate",
            win,
            origin_addr,
            o,
            Some((result_addr, i64::from(result_count), result_datatype)),
            at.0,
            at.1,
            t,
            op,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Rget_accumulate", win, request, || {
        Ok({
            let b = builtin(op, target_datatype)?;
            let origin = if b == BuiltinOp::NoOp {
                Local {
                    ptr: origin_addr as *mut u8,
                    count: 0,
                    dt: dt(target_datatype)?,
                }
            } else {
                local(origin_addr, i64::from(origin_count), origin_datatype)?
            };
            Call::GetAcc(
                origin,
                local(result_addr, i64::from(result_count), result_datatype)?,
                remote(
                    target_rank,
                    target_disp,
                    i64::from(target_count),
                    target_datatype,
                )?,
                b,
            )
        })
    })
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
    if request.is_null() {
        return finish_win(
            win,
            fail(ErrorClass::Arg, "invalid argument: request is NULL"),
            &|| format!("MPI_Rget_accumulate_c(win={})", win_name(win)),
        );
    }
    let (o, t) = (
        (origin_count, origin_datatype),
        (target_count, target_datatype),
    );
    let at = (target_rank, target_disp);
    // SAFETY: the buffers hold their elements; `request` is not NULL.
    if let Some(rc) = unsafe {
        fast::racc(
            "MPI_Rget_accumulate_c",
            win,
            origin_addr,
            o,
            Some((result_addr, result_count, result_datatype)),
            at.0,
            at.1,
            t,
            op,
            request,
        )
    } {
        return rc;
    }
    issue("MPI_Rget_accumulate_c", win, request, || {
        Ok({
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
            Call::GetAcc(
                origin,
                local(result_addr, result_count, result_datatype)?,
                remote(target_rank, target_disp, target_count, target_datatype)?,
                b,
            )
        })
    })
}
