//! Synchronisation calls: fence, locks, flushes, sync, post/start/complete/wait/test, and
//! MPI_Win_shared_query.

use std::os::raw::{c_int, c_void};

use madmpi::rma::{self, LockType};
use madmpi::ErrorClass;

use super::super::common::*;
use super::super::group::group;
use super::{call_of, fast, finish_win, win};
use crate::abi::*;

fn done(name: &'static str, w: MPI_Win, r: R<()>) -> c_int {
    finish_win(w, r, &call_of(name, w))
}

pub unsafe fn MPI_Win_fence(assert: c_int, win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_fence(assert, win(win_)?));
    done("MPI_Win_fence", win_, r)
}

pub unsafe fn MPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win_: MPI_Win) -> c_int {
    let r = (|| {
        running()?;
        let id = win(win_)?;
        let t = match lock_type {
            MPI_LOCK_SHARED => LockType::Shared,
            MPI_LOCK_EXCLUSIVE => LockType::Exclusive,
            _ => {
                return fail(
                    ErrorClass::Locktype,
                    format!("invalid lock type {lock_type}"),
                )
            }
        };
        rma::win_lock(t, rank, assert, id)
    })();
    done("MPI_Win_lock", win_, r)
}

pub unsafe fn MPI_Win_unlock(rank: c_int, win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_unlock(rank, win(win_)?));
    done("MPI_Win_unlock", win_, r)
}

pub unsafe fn MPI_Win_lock_all(assert: c_int, win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_lock_all(assert, win(win_)?));
    done("MPI_Win_lock_all", win_, r)
}

pub unsafe fn MPI_Win_unlock_all(win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_unlock_all(win(win_)?));
    done("MPI_Win_unlock_all", win_, r)
}

// (The flushes: inlined into their C wrappers, the general path out of line.)
#[inline(always)]
pub unsafe fn MPI_Win_flush(rank: c_int, win_: MPI_Win) -> c_int {
    if fast::win_live(win_).is_some_and(|id| rma::flush_now(id, Some(rank))) {
        return MPI_SUCCESS;
    }
    flush("MPI_Win_flush", Some(rank), win_)
}

#[inline(always)]
pub unsafe fn MPI_Win_flush_local(rank: c_int, win_: MPI_Win) -> c_int {
    if fast::win_live(win_).is_some_and(|id| rma::flush_now(id, Some(rank))) {
        return MPI_SUCCESS;
    }
    flush("MPI_Win_flush_local", Some(rank), win_)
}

#[inline(always)]
pub unsafe fn MPI_Win_flush_all(win_: MPI_Win) -> c_int {
    if fast::win_live(win_).is_some_and(|id| rma::flush_now(id, None)) {
        return MPI_SUCCESS;
    }
    flush("MPI_Win_flush_all", None, win_)
}

#[inline(always)]
pub unsafe fn MPI_Win_flush_local_all(win_: MPI_Win) -> c_int {
    if fast::win_live(win_).is_some_and(|id| rma::flush_now(id, None)) {
        return MPI_SUCCESS;
    }
    flush("MPI_Win_flush_local_all", None, win_)
}

/// The general path of the flushes: of `rank`, or of every target (`None`).
#[inline(never)]
fn flush(name: &'static str, rank: Option<c_int>, win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| match rank {
        Some(rank) => rma::win_flush(rank, win(win_)?),
        None => rma::win_flush_all(win(win_)?),
    });
    done(name, win_, r)
}

pub unsafe fn MPI_Win_sync(win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_sync(win(win_)?));
    done("MPI_Win_sync", win_, r)
}

/// The ranks in window `w` of the members of group `g`.
fn ranks_in(w: MPI_Win, g: MPI_Group) -> R<Vec<i32>> {
    let members = group(g)?;
    let i = rma::win_info(win(w)?)?;
    members
        .world_ranks()
        .iter()
        .map(|m| match i.world.iter().position(|x| x == m) {
            Some(r) => Ok(r as i32),
            None => fail(
                ErrorClass::Group,
                format!("world rank {m} of the group is not a member of the window"),
            ),
        })
        .collect()
}

pub unsafe fn MPI_Win_post(group: MPI_Group, assert: c_int, win_: MPI_Win) -> c_int {
    let r = (|| {
        running()?;
        let ranks = ranks_in(win_, group)?;
        rma::win_post(&ranks, assert, win(win_)?)
    })();
    done("MPI_Win_post", win_, r)
}

pub unsafe fn MPI_Win_start(group: MPI_Group, assert: c_int, win_: MPI_Win) -> c_int {
    let r = (|| {
        running()?;
        let ranks = ranks_in(win_, group)?;
        rma::win_start(&ranks, assert, win(win_)?)
    })();
    done("MPI_Win_start", win_, r)
}

pub unsafe fn MPI_Win_complete(win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_complete(win(win_)?));
    done("MPI_Win_complete", win_, r)
}

pub unsafe fn MPI_Win_wait(win_: MPI_Win) -> c_int {
    let r = running().and_then(|_| rma::win_wait(win(win_)?));
    done("MPI_Win_wait", win_, r)
}

pub unsafe fn MPI_Win_test(win_: MPI_Win, flag: *mut c_int) -> c_int {
    let r = (|| {
        running()?;
        let f = out(flag, "flag")?;
        *f = rma::win_test(win(win_)?)? as c_int;
        Ok(())
    })();
    done("MPI_Win_test", win_, r)
}

unsafe fn shared_query(
    win_: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> R<usize> {
    running()?;
    let s = out(size, "size")?;
    let b = out(baseptr as *mut *mut c_void, "baseptr")?;
    let (n, du, p) = rma::win_shared_query(win(win_)?, rank)?;
    *s = n as MPI_Aint;
    *b = p as *mut c_void;
    Ok(du)
}

pub unsafe fn MPI_Win_shared_query(
    win_: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut c_int,
    baseptr: *mut c_void,
) -> c_int {
    let r = out(disp_unit, "disp_unit").and_then(|d| {
        *d = shared_query(win_, rank, size, baseptr)? as c_int;
        Ok(())
    });
    done("MPI_Win_shared_query", win_, r)
}

pub unsafe fn MPI_Win_shared_query_c(
    win_: MPI_Win,
    rank: c_int,
    size: *mut MPI_Aint,
    disp_unit: *mut MPI_Aint,
    baseptr: *mut c_void,
) -> c_int {
    let r = out(disp_unit, "disp_unit").and_then(|d| {
        *d = shared_query(win_, rank, size, baseptr)? as MPI_Aint;
        Ok(())
    });
    done("MPI_Win_shared_query_c", win_, r)
}
