//! The communication calls: put, get, the accumulates, fetch-and-op, compare-and-swap and
//! their `_c` twins (the request-based forms: `req`). Each tries the fast path (`fast`), else
//! converts its arguments and makes one call to `madmpi::rma::rma`.

// (The C signatures: as many arguments as the standard gives them.)
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use madmpi::op::Op;
use madmpi::rma::{self, Call, Local, Remote};
use madmpi::{BuiltinOp, Datatype, ErrorClass};

use super::super::common::*;
use super::super::op::op as op_arg;
use super::{fast, finish_win, win, win_name};
use crate::abi::*;
use crate::handles;

#[inline]
pub(super) fn dt(d: MPI_Datatype) -> R<Datatype> {
    if let Some(t) = handles::predefined_type(d) {
        // (Predefined types are committed.)
        return Ok(t.clone());
    }
    let t = handles::datatype(d)?;
    if !t.is_committed() {
        return fail(ErrorClass::Type, "the datatype is not committed");
    }
    Ok((*t).clone())
}

pub(super) fn local(buf: *const c_void, count: i64, d: MPI_Datatype) -> R<Local> {
    let count = count_arg(count)?;
    let t = dt(d)?;
    check_buf(buf, count, &t)?;
    Ok(Local {
        ptr: buf as *mut u8,
        count,
        dt: t,
    })
}

pub(super) fn remote(rank: c_int, disp: MPI_Aint, count: i64, d: MPI_Datatype) -> R<Remote> {
    Ok(Remote {
        rank,
        disp: disp as i64,
        count: count_arg(count)?,
        dt: dt(d)?,
    })
}

pub(super) fn builtin(o: MPI_Op, d: MPI_Datatype) -> R<BuiltinOp> {
    let op = match handles::predefined_type(d) {
        // (No reference to take on a predefined type.)
        Some(t) => op_arg(o, d, t)?,
        None => op_arg(o, d, &dt(d)?)?,
    };
    match op {
        Op::Builtin(b) => Ok(b),
        Op::User { .. } => fail(
            ErrorClass::Op,
            "one-sided accumulates take predefined operations only",
        ),
    }
}

/// Issue `call` on `w`; with `request`, write the request's handle there. (Out of line: the
/// general path, kept out of the fast path's function.)
#[inline(never)]
pub(super) unsafe fn issue(
    name: &'static str,
    w: MPI_Win,
    request: *mut MPI_Request,
    call: impl FnOnce() -> R<Call>,
) -> c_int {
    let r = (|| {
        running()?;
        let id = win(w)?;
        let o = if request.is_null() {
            None
        } else {
            Some(out(request, "request")?)
        };
        let c = call()?;
        let rid = rma::rma(id, c, o.is_some())?;
        if let (Some(o), Some(rid)) = (o, rid) {
            *o = handles::new_request(rid, super::window::win_comm(w))?;
        }
        Ok(())
    })();
    finish_win(w, r, &|| format!("{name}(win={})", win_name(w)))
}

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Put(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(n), Some(tn)) = (
        fast::win_live(win),
        fast::bytes(Some(origin_addr), i64::from(origin_count), origin_datatype),
        fast::bytes(None, i64::from(target_count), target_datatype),
    ) {
        let src = origin_addr as *const u8;
        // SAFETY: the origin buffer holds its elements (the caller's contract).
        if unsafe { rma::put_now(id, src, n, target_rank, target_disp as i64, tn) } {
            return MPI_SUCCESS;
        }
    }
    issue("MPI_Put", win, std::ptr::null_mut(), move || {
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

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Put_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(n), Some(tn)) = (
        fast::win_live(win),
        fast::bytes(Some(origin_addr), origin_count, origin_datatype),
        fast::bytes(None, target_count, target_datatype),
    ) {
        let src = origin_addr as *const u8;
        // SAFETY: the origin buffer holds its elements (the caller's contract).
        if unsafe { rma::put_now(id, src, n, target_rank, target_disp as i64, tn) } {
            return MPI_SUCCESS;
        }
    }
    issue("MPI_Put_c", win, std::ptr::null_mut(), move || {
        Ok(Call::Put(
            local(origin_addr, origin_count, origin_datatype)?,
            remote(target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
}

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Get(
    origin_addr: *mut c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(o), Some(t)) = (
        fast::win_live(win),
        fast::run(origin_addr, i64::from(origin_count), origin_datatype),
        fast::target(i64::from(target_count), target_datatype),
    ) {
        // SAFETY: the origin buffer holds its elements (the caller's contract).
        if unsafe { rma::get_now(id, o, target_rank, target_disp as i64, t) } {
            return MPI_SUCCESS;
        }
    }
    issue("MPI_Get", win, std::ptr::null_mut(), move || {
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

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Get_c(
    origin_addr: *mut c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(o), Some(t)) = (
        fast::win_live(win),
        fast::run(origin_addr, origin_count, origin_datatype),
        fast::target(target_count, target_datatype),
    ) {
        // SAFETY: the origin buffer holds its elements (the caller's contract).
        if unsafe { rma::get_now(id, o, target_rank, target_disp as i64, t) } {
            return MPI_SUCCESS;
        }
    }
    issue("MPI_Get_c", win, std::ptr::null_mut(), move || {
        Ok(Call::Get(
            local(origin_addr as *const c_void, origin_count, origin_datatype)?,
            remote(target_rank, target_disp, target_count, target_datatype)?,
        ))
    })
}

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Accumulate(
    origin_addr: *const c_void,
    origin_count: c_int,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: c_int,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(o), Some(t), Some(b)) = (
        fast::win_live(win),
        fast::run(origin_addr, i64::from(origin_count), origin_datatype),
        fast::target(i64::from(target_count), target_datatype),
        fast::op(op),
    ) {
        // SAFETY: the origin buffer holds its elements (the caller's contract).
        if let Some(r) = unsafe { rma::acc_now(id, o, None, target_rank, target_disp as i64, t, b) }
        {
            return finish_win(win, r, &|| format!("MPI_Accumulate(win={})", win_name(win)));
        }
    }
    issue("MPI_Accumulate", win, std::ptr::null_mut(), || {
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

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Accumulate_c(
    origin_addr: *const c_void,
    origin_count: MPI_Count,
    origin_datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    target_count: MPI_Count,
    target_datatype: MPI_Datatype,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(o), Some(t), Some(b)) = (
        fast::win_live(win),
        fast::run(origin_addr, origin_count, origin_datatype),
        fast::target(target_count, target_datatype),
        fast::op(op),
    ) {
        // SAFETY: the origin buffer holds its elements (the caller's contract).
        if let Some(r) = unsafe { rma::acc_now(id, o, None, target_rank, target_disp as i64, t, b) }
        {
            return finish_win(win, r, &|| {
                format!("MPI_Accumulate_c(win={})", win_name(win))
            });
        }
    }
    issue("MPI_Accumulate_c", win, std::ptr::null_mut(), || {
        Ok(Call::Acc(
            local(origin_addr, origin_count, origin_datatype)?,
            remote(target_rank, target_disp, target_count, target_datatype)?,
            builtin(op, target_datatype)?,
        ))
    })
}

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Get_accumulate(
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
) -> c_int {
    if let (Some(id), Some(r), Some(t), Some(b)) = (
        fast::win_live(win),
        fast::run(result_addr, i64::from(result_count), result_datatype),
        fast::target(i64::from(target_count), target_datatype),
        fast::op(op),
    ) {
        // (The origin is not read with MPI_NO_OP: any arguments do.)
        let o = match b {
            BuiltinOp::NoOp => Some(t),
            _ => fast::run(origin_addr, i64::from(origin_count), origin_datatype),
        };
        if let Some(o) = o {
            // SAFETY: the buffers hold their elements (the caller's contract).
            let done =
                unsafe { rma::acc_now(id, o, Some(r), target_rank, target_disp as i64, t, b) };
            if let Some(r) = done {
                return finish_win(win, r, &|| {
                    format!("MPI_Get_accumulate(win={})", win_name(win))
                });
            }
        }
    }
    issue("MPI_Get_accumulate", win, std::ptr::null_mut(), || {
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

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Get_accumulate_c(
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
) -> c_int {
    if let (Some(id), Some(r), Some(t), Some(b)) = (
        fast::win_live(win),
        fast::run(result_addr, result_count, result_datatype),
        fast::target(target_count, target_datatype),
        fast::op(op),
    ) {
        // (The origin is not read with MPI_NO_OP: any arguments do.)
        let o = match b {
            BuiltinOp::NoOp => Some(t),
            _ => fast::run(origin_addr, origin_count, origin_datatype),
        };
        if let Some(o) = o {
            // SAFETY: the buffers hold their elements (the caller's contract).
            let done =
                unsafe { rma::acc_now(id, o, Some(r), target_rank, target_disp as i64, t, b) };
            if let Some(r) = done {
                return finish_win(win, r, &|| {
                    format!("MPI_Get_accumulate_c(win={})", win_name(win))
                });
            }
        }
    }
    issue("MPI_Get_accumulate_c", win, std::ptr::null_mut(), || {
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

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Fetch_and_op(
    origin_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    op: MPI_Op,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(r), Some(t), Some(b)) = (
        fast::win_live(win),
        fast::run(result_addr, 1, datatype),
        fast::target(1, datatype),
        fast::op(op),
    ) {
        // (The origin is not read with MPI_NO_OP: any pointer does.)
        let o = match b {
            BuiltinOp::NoOp => Some(t),
            _ => fast::run(origin_addr, 1, datatype),
        };
        if let Some(o) = o {
            // SAFETY: the buffers hold one element each (the caller's contract).
            let done =
                unsafe { rma::acc_now(id, o, Some(r), target_rank, target_disp as i64, t, b) };
            if let Some(r) = done {
                return finish_win(win, r, &|| {
                    format!("MPI_Fetch_and_op(win={})", win_name(win))
                });
            }
        }
    }
    issue("MPI_Fetch_and_op", win, std::ptr::null_mut(), || {
        let b = builtin(op, datatype)?;
        let origin = if b == BuiltinOp::NoOp {
            Local {
                ptr: origin_addr as *mut u8,
                count: 0,
                dt: dt(datatype)?,
            }
        } else {
            local(origin_addr, 1, datatype)?
        };
        Ok(Call::GetAcc(
            origin,
            local(result_addr, 1, datatype)?,
            remote(target_rank, target_disp, 1, datatype)?,
            b,
        ))
    })
}

// (Inlined into its C wrapper: the fast path is then one function.)
#[inline(always)]
pub unsafe fn MPI_Compare_and_swap(
    origin_addr: *const c_void,
    compare_addr: *const c_void,
    result_addr: *mut c_void,
    datatype: MPI_Datatype,
    target_rank: c_int,
    target_disp: MPI_Aint,
    win: MPI_Win,
) -> c_int {
    if let (Some(id), Some(r), Some(c), Some(o)) = (
        fast::win_live(win),
        fast::run(result_addr, 1, datatype),
        fast::run(compare_addr, 1, datatype),
        fast::run(origin_addr, 1, datatype),
    ) {
        // SAFETY: the buffers hold one element each (the caller's contract).
        let done = unsafe {
            rma::cas_now(
                id,
                o.ptr,
                c.ptr,
                r.ptr,
                r.dt,
                target_rank,
                target_disp as i64,
            )
        };
        if done.is_some() {
            return MPI_SUCCESS;
        }
    }
    issue("MPI_Compare_and_swap", win, std::ptr::null_mut(), || {
        let t = dt(datatype)?;
        check_buf(origin_addr, 1, &t)?;
        check_buf(compare_addr, 1, &t)?;
        check_buf(result_addr, 1, &t)?;
        Ok(Call::Cas(
            origin_addr as *const u8,
            compare_addr as *const u8,
            result_addr as *mut u8,
            remote(target_rank, target_disp, 1, datatype)?,
        ))
    })
}
