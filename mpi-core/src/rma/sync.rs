//! Synchronisation: fence, passive target (locks, flushes), post/start/complete/wait.
//!
//! Every closing call waits until the operations it closes have been answered by their targets
//! (`pending` at zero), so that they are complete at the target when it returns: the origin
//! side of every mode is "wait for the answers, then tell whoever needs to know". Lock
//! requests, grants, unlocks, posts and completes are `Rma` chunks like the operations, in
//! sequence order with them. Waiting polls the engine (spin, then yield), so a process waiting
//! here serves the operations others target it with.
//!
//! On the direct path (`direct`) operations are complete when issued: a flush is a memory
//! fence, and the locks are words of the window's control block that the origin takes (spin,
//! then yield, polling the engine meanwhile) and releases itself; fence and PSCW keep their
//! barrier and notices, with memory fences around them.

use std::sync::atomic::{fence, Ordering};

use super::wire::Sub;
use super::{Held, Win, WinId};
use crate::api::{wait_until, with};
use crate::engine::Engine;
use crate::error::{err, Error, ErrorClass, Result};
use crate::wire::{Header, Kind};

/// MPI_MODE_NOCHECK.
pub const MODE_NOCHECK: i32 = 1024;
/// MPI_MODE_NOPRECEDE.
pub const MODE_NOPRECEDE: i32 = 2048;
/// MPI_MODE_NOPUT.
pub const MODE_NOPUT: i32 = 4096;
/// MPI_MODE_NOSTORE.
pub const MODE_NOSTORE: i32 = 8192;
/// MPI_MODE_NOSUCCEED.
pub const MODE_NOSUCCEED: i32 = 16384;

const MODES: i32 = MODE_NOCHECK | MODE_NOPRECEDE | MODE_NOPUT | MODE_NOSTORE | MODE_NOSUCCEED;

/// A lock type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockType {
    /// MPI_LOCK_SHARED.
    Shared,
    /// MPI_LOCK_EXCLUSIVE.
    Exclusive,
}

fn check_assert(a: i32) -> Result<()> {
    if a & !MODES != 0 {
        return err(ErrorClass::Assert, format!("invalid assert {a}"));
    }
    Ok(())
}

/// Queue a synchronisation chunk `sub` to member `rank` of window `w`.
fn notify(e: &mut Engine, w: WinId, rank: i32, sub: Sub, flags: u8) -> Result<()> {
    if sub == Sub::Unlock {
        e.st.rma.win_mut(w)?.unlocks_sent[rank as usize] += 1;
    }
    let win = e.st.rma.win(w)?;
    let (world, hdr) = (
        win.world[rank as usize],
        Header {
            kind: Kind::Rma as u8,
            flags,
            ctx: win.peers[rank as usize].id,
            src: win.rank,
            tag: sub as i32,
            aux: (w.0 as u64) << 32,
            ..Default::default()
        },
    );
    if sub == Sub::Unlock && world == e.st.me {
        // Released on ourselves at once: nothing waits for an unlock's chunk, so one sent to
        // ourselves could still be in the `self` driver's queue when MPI_Win_free drops the
        // window (whose number a new window may take before the chunk is read).
        e.st.handle_rma(world, hdr, &[]);
        return Ok(());
    }
    e.st.queue_owned(world, hdr, Vec::new());
    Ok(())
}

/// Fail if a target among `ranks` has died; `Ok` otherwise.
fn check_alive(e: &Engine, w: WinId, ranks: &mut dyn Iterator<Item = usize>) -> Result<()> {
    let win = e.st.rma.win(w)?;
    for r in ranks {
        if e.st.peer_dead(win.world[r]) {
            return err(
                ErrorClass::ProcAborted,
                format!("rank {r} of the window has died"),
            );
        }
    }
    Ok(())
}

/// Target `r` of window `w` is known dead on this host (another member saw it die and
/// marked its slot of the direct path): this process's engine learns of it too, and the
/// caller fails.
fn gone(e: &mut Engine, w: WinId, r: usize) -> Result<()> {
    let world = e.st.rma.win(w)?.world[r];
    if !e.st.peer_dead(world) {
        e.st.peer_lost(world);
    }
    err(
        ErrorClass::ProcAborted,
        format!("rank {r} of the window has died"),
    )
}

/// Wait until the operations to the targets `ranks` (all with `None`) are answered, and
/// report an error a target answered with.
fn wait_done(w: WinId, ranks: Option<&[i32]>) -> Result<()> {
    wait_until(|e| {
        super::rdma::reap(e)?;
        let win = e.st.rma.win(w)?;
        let done = match ranks {
            Some(rs) => rs.iter().all(|&r| win.pending[r as usize] == 0),
            None => win.pending.iter().all(|&p| p == 0),
        };
        if done {
            return Ok(Some(()));
        }
        let n = win.pending.len();
        check_alive(e, w, &mut (0..n).filter(|&r| win_pending(e, w, r)))?;
        Ok(None)
    })?;
    with(|e| match e.st.rma.win_mut(w)?.error.take() {
        Some(x) => Err(x),
        None => Ok(()),
    })
}

fn win_pending(e: &Engine, w: WinId, r: usize) -> bool {
    e.st.rma.win(w).is_ok_and(|x| x.pending[r] > 0)
}

/// Wait until every operation of this process on `w` is answered.
pub(super) fn wait_all_done(w: WinId) -> Result<()> {
    wait_done(w, None)
}

/// MPI_Win_fence.
pub fn win_fence(assert: i32, w: WinId) -> Result<()> {
    check_assert(assert)?;
    let comm = with(|e| {
        let win = e.st.rma.win(w)?;
        if win.lock_all || win.held.iter().any(|h| *h != Held::None) {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_fence while a passive-target epoch is open",
            );
        }
        if win.start.is_some() || win.post.is_some() {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_fence inside a post/start/complete/wait epoch",
            );
        }
        Ok(win.comm)
    })?;
    wait_done(w, None)?;
    // Every member's operations on this process are answered once every member has passed
    // its wait: the barrier says so. (The direct path's copies and stores are this thread's
    // own: the fences order them with the barrier.)
    fence(Ordering::SeqCst);
    crate::barrier(comm)?;
    fence(Ordering::SeqCst);
    with(|e| {
        e.st.rma.win_mut(w)?.fence = assert & MODE_NOSUCCEED == 0;
        super::dynreg::new_epoch(&mut e.st, w, None);
        Ok(())
    })
}

/// A passive-target epoch begins (`call`: MPI_Win_lock or MPI_Win_lock_all). Access epochs
/// of one window are disjoint (MPI-4.1 §12.5): not inside a fence epoch with operations in
/// flight, nor inside an access epoch of MPI_Win_start; a fence followed by a lock opened no
/// fence epoch, so after the unlock no epoch is open.
fn begin_passive(win: &mut Win, call: &str) -> Result<()> {
    if win.fence && win.pending.iter().any(|&p| p > 0) {
        return err(
            ErrorClass::RmaSync,
            format!("{call} inside a fence epoch with operations in flight"),
        );
    }
    if win.start.is_some() {
        return err(
            ErrorClass::RmaSync,
            format!("{call} inside a start/complete access epoch"),
        );
    }
    win.fence = false;
    Ok(())
}

fn check_rank(e: &Engine, w: WinId, rank: i32) -> Result<()> {
    let n = e.st.rma.win(w)?.world.len();
    if rank < 0 || rank as usize >= n {
        return err(
            ErrorClass::Rank,
            format!("invalid rank {rank} (the window has {n} members)"),
        );
    }
    Ok(())
}

/// MPI_Win_lock.
pub fn win_lock(t: LockType, rank: i32, assert: i32, w: WinId) -> Result<()> {
    check_assert(assert)?;
    if rank == crate::PROC_NULL {
        return with(|e| e.st.rma.win(w).map(|_| ()));
    }
    let asked = with(|e| {
        check_rank(e, w, rank)?;
        if (e.st.rma.win(w)?.direct.as_ref()).is_some_and(|d| d.gone(rank as usize)) {
            return gone(e, w, rank as usize).map(|()| false);
        }
        super::dynreg::new_epoch(&mut e.st, w, Some(rank));
        let win = e.st.rma.win_mut(w)?;
        if win.lock_all || win.held[rank as usize] != Held::None {
            return err(
                ErrorClass::RmaSync,
                format!("this process already holds a lock on rank {rank} of the window"),
            );
        }
        begin_passive(win, "MPI_Win_lock")?;
        if assert & MODE_NOCHECK != 0 {
            win.held[rank as usize] = Held::Unchecked(t);
            return Ok(false);
        }
        if let Some(d) = &win.direct {
            // The lock word in the control block: taken at once, or waited for below.
            if d.try_lock(rank as usize, t, win.rank, false) {
                win.held[rank as usize] = Held::Granted(t);
                return Ok(false);
            }
            if t == LockType::Exclusive {
                d.slot(rank as usize).announce();
            }
            win.held[rank as usize] = Held::Asked(t);
            return Ok(true);
        }
        win.held[rank as usize] = Held::Asked(t);
        notify(e, w, rank, Sub::Lock, (t == LockType::Exclusive) as u8)?;
        Ok(true)
    })?;
    if asked {
        let r = wait_until(|e| {
            let win = e.st.rma.win_mut(w)?;
            take_direct(win, rank as usize);
            if matches!(win.held[rank as usize], Held::Granted(_)) {
                return Ok(Some(()));
            }
            if win.direct.as_ref().is_some_and(|d| d.gone(rank as usize)) {
                return gone(e, w, rank as usize).map(|()| None);
            }
            check_alive(e, w, &mut std::iter::once(rank as usize))?;
            Ok(None)
        });
        if r.is_err() {
            let _ = with(|e| {
                let win = e.st.rma.win_mut(w)?;
                if let (Some(d), Held::Asked(t)) = (&win.direct, win.held[rank as usize]) {
                    if t == LockType::Exclusive {
                        d.slot(rank as usize).withdraw();
                    }
                    win.held[rank as usize] = Held::None;
                }
                Ok(())
            });
        }
        r?;
    }
    Ok(())
}

/// On the direct path, try again to take the lock asked for on `rank` (exclusive ones were
/// announced).
fn take_direct(win: &mut super::Win, rank: usize) {
    if let (Some(d), Held::Asked(t)) = (&win.direct, win.held[rank]) {
        if d.try_lock(rank, t, win.rank, true) {
            win.held[rank] = Held::Granted(t);
        }
    }
}

/// Release this process's lock on `rank`, held as `h` (a message to the target, or the lock
/// word on the direct path).
fn release(e: &mut Engine, w: WinId, rank: i32, h: Held) -> Result<()> {
    let win = e.st.rma.win(w)?;
    if let (Some(d), Held::Granted(t)) = (&win.direct, h) {
        d.unlock(rank as usize, t, win.rank);
        return Ok(());
    }
    if matches!(h, Held::Granted(_)) && win.direct.is_none() {
        return notify(e, w, rank, Sub::Unlock, 0);
    }
    Ok(())
}

/// MPI_Win_unlock.
pub fn win_unlock(rank: i32, w: WinId) -> Result<()> {
    if rank == crate::PROC_NULL {
        return with(|e| e.st.rma.win(w).map(|_| ()));
    }
    with(|e| {
        check_rank(e, w, rank)?;
        match e.st.rma.win(w)?.held[rank as usize] {
            Held::Granted(_) | Held::Unchecked(_) if !e.st.rma.win(w)?.lock_all => Ok(()),
            _ => err(
                ErrorClass::RmaSync,
                format!("MPI_Win_unlock of rank {rank}, which this process has not locked"),
            ),
        }
    })?;
    let done = wait_done(w, Some(&[rank]));
    with(|e| {
        let win = e.st.rma.win_mut(w)?;
        let h = std::mem::replace(&mut win.held[rank as usize], Held::None);
        let direct = win.direct.is_some();
        release(e, w, rank, h)?;
        if matches!(h, Held::Granted(_)) && !direct {
            // The lock is released at once: others may be waiting for it.
            e.flush()?;
        }
        Ok(())
    })?;
    done
}

/// MPI_Win_lock_all.
pub fn win_lock_all(assert: i32, w: WinId) -> Result<()> {
    check_assert(assert)?;
    let n = with(|e| {
        let win = e.st.rma.win_mut(w)?;
        if win.lock_all || win.held.iter().any(|h| *h != Held::None) {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_lock_all while this process holds a lock on the window",
            );
        }
        begin_passive(win, "MPI_Win_lock_all")?;
        let n = win.world.len();
        win.lock_all = true;
        super::dynreg::new_epoch(&mut e.st, w, None);
        let win = e.st.rma.win_mut(w)?;
        if assert & MODE_NOCHECK != 0 {
            win.held.fill(Held::Unchecked(LockType::Shared));
            return Ok(0);
        }
        win.held.fill(Held::Asked(LockType::Shared));
        if win.direct.is_some() {
            // Shared locks of the control block, taken in rank order.
            for r in 0..n {
                take_direct(win, r);
            }
            return Ok(n);
        }
        for r in 0..n {
            notify(e, w, r as i32, Sub::Lock, 0)?;
        }
        Ok(n)
    })?;
    if n > 0 {
        wait_until(|e| {
            let win = e.st.rma.win_mut(w)?;
            if let Some(r) = win.held.iter().position(|h| !matches!(h, Held::Granted(_))) {
                take_direct(win, r);
            }
            if win.held.iter().all(|h| matches!(h, Held::Granted(_))) {
                return Ok(Some(()));
            }
            check_alive(e, w, &mut (0..n))?;
            Ok(None)
        })?;
    }
    Ok(())
}

/// MPI_Win_unlock_all.
pub fn win_unlock_all(w: WinId) -> Result<()> {
    with(|e| {
        if !e.st.rma.win(w)?.lock_all {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_unlock_all without MPI_Win_lock_all",
            );
        }
        Ok(())
    })?;
    let done = wait_done(w, None);
    with(|e| {
        let win = e.st.rma.win_mut(w)?;
        win.lock_all = false;
        let held = std::mem::take(&mut win.held);
        win.held = vec![Held::None; held.len()];
        for (r, h) in held.into_iter().enumerate() {
            release(e, w, r as i32, h)?;
        }
        e.flush()
    })?;
    done
}

fn passive(e: &Engine, w: WinId, rank: Option<i32>) -> Result<()> {
    let win = e.st.rma.win(w)?;
    let ok = win.lock_all
        || match rank {
            Some(r) => matches!(win.held[r as usize], Held::Granted(_) | Held::Unchecked(_)),
            None => win
                .held
                .iter()
                .any(|h| matches!(h, Held::Granted(_) | Held::Unchecked(_))),
        };
    if !ok {
        return err(
            ErrorClass::RmaSync,
            "a flush outside a passive-target epoch (MPI_Win_lock or MPI_Win_lock_all first)",
        );
    }
    Ok(())
}

/// MPI_Win_flush and MPI_Win_flush_local (operations are packed when issued, so local
/// completion needs what remote completion does, no more).
pub fn win_flush(rank: i32, w: WinId) -> Result<()> {
    if rank == crate::PROC_NULL {
        return with(|e| e.st.rma.win(w).map(|_| ()));
    }
    let done = with(|e| {
        check_rank(e, w, rank)?;
        passive(e, w, Some(rank))?;
        direct_done(e, w)
    })?;
    if done {
        return Ok(());
    }
    wait_done(w, Some(&[rank]))
}

/// On the direct path every operation is complete when issued: a flush is a memory fence
/// (and the report of an error), unless operations by message are still in flight. Whether
/// that settled the flush.
fn direct_done(e: &mut Engine, w: WinId) -> Result<bool> {
    let win = e.st.rma.win_mut(w)?;
    if win.direct.is_none() || win.pending.iter().any(|&p| p > 0) {
        return Ok(false);
    }
    fence(Ordering::SeqCst);
    match win.error.take() {
        Some(x) => Err(x),
        None => Ok(true),
    }
}

/// MPI_Win_flush_all and MPI_Win_flush_local_all.
pub fn win_flush_all(w: WinId) -> Result<()> {
    let done = with(|e| {
        passive(e, w, None)?;
        direct_done(e, w)
    })?;
    if done {
        return Ok(());
    }
    wait_done(w, None)
}

/// MPI_Win_sync: the window's memory copies agree (one copy: a memory barrier).
pub fn win_sync(w: WinId) -> Result<()> {
    with(|e| {
        e.st.rma.win(w)?;
        super::dynreg::new_epoch(&mut e.st, w, None);
        Ok(())
    })?;
    fence(Ordering::SeqCst);
    Ok(())
}

/// MPI_Win_post: expose the window to the origins `group` (ranks in the window).
pub fn win_post(group: &[i32], assert: i32, w: WinId) -> Result<()> {
    check_assert(assert)?;
    with(|e| {
        let win = e.st.rma.win_mut(w)?;
        if win.post.is_some() {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_post while an exposure epoch is open",
            );
        }
        win.post = Some(group.to_vec());
        // The target's own stores come before the origins' accesses.
        fence(Ordering::SeqCst);
        if assert & MODE_NOCHECK == 0 {
            for &r in group {
                notify(e, w, r, Sub::Post, 0)?;
            }
            e.flush()?;
        }
        Ok(())
    })
}

/// MPI_Win_start: open an access epoch to the targets `group` (ranks in the window); waits
/// for their posts (unless MPI_MODE_NOCHECK).
pub fn win_start(group: &[i32], assert: i32, w: WinId) -> Result<()> {
    check_assert(assert)?;
    with(|e| {
        let win = e.st.rma.win(w)?;
        if win.start.is_some() {
            return err(
                ErrorClass::RmaSync,
                "MPI_Win_start while an access epoch is open",
            );
        }
        Ok(())
    })?;
    if assert & MODE_NOCHECK == 0 {
        wait_until(|e| {
            let win = e.st.rma.win_mut(w)?;
            if group.iter().all(|&r| win.posts[r as usize] > 0) {
                for &r in group {
                    win.posts[r as usize] -= 1;
                }
                return Ok(Some(()));
            }
            check_alive(e, w, &mut group.iter().map(|&r| r as usize))?;
            Ok(None)
        })?;
    }
    fence(Ordering::SeqCst);
    with(|e| {
        for &r in group {
            super::dynreg::new_epoch(&mut e.st, w, Some(r));
        }
        e.st.rma.win_mut(w)?.start = Some(group.to_vec());
        Ok(())
    })
}

/// MPI_Win_complete: close the access epoch once its operations are done at their targets.
pub fn win_complete(w: WinId) -> Result<()> {
    let group = with(|e| match &e.st.rma.win(w)?.start {
        Some(g) => Ok(g.clone()),
        None => err(
            ErrorClass::RmaSync,
            "MPI_Win_complete without MPI_Win_start",
        ),
    })?;
    let done = wait_done(w, Some(&group));
    // The direct path's stores before the notice.
    fence(Ordering::SeqCst);
    with(|e| {
        e.st.rma.win_mut(w)?.start = None;
        for &r in &group {
            notify(e, w, r, Sub::Complete, 0)?;
        }
        e.flush()
    })?;
    done
}

/// MPI_Win_test: whether every origin of the exposure epoch has completed (closing it if so).
pub fn win_test(w: WinId) -> Result<bool> {
    let r = with(|e| {
        let done = exposure_done(e, w)?;
        if !done {
            e.progress()?;
            return exposure_done(e, w);
        }
        Ok(done)
    })?;
    if r {
        close_exposure(w)?;
    }
    Ok(r)
}

fn exposure_done(e: &Engine, w: WinId) -> Result<bool> {
    let win = e.st.rma.win(w)?;
    match &win.post {
        Some(g) => Ok(win.completes as usize >= g.len()),
        None => Err(Error::new(
            ErrorClass::RmaSync,
            "MPI_Win_wait/test without MPI_Win_post",
        )),
    }
}

fn close_exposure(w: WinId) -> Result<()> {
    // The origins' direct stores (fenced before their notices) before the target's loads.
    fence(Ordering::SeqCst);
    with(|e| {
        let win = e.st.rma.win_mut(w)?;
        let n = win.post.take().map_or(0, |g| g.len()) as u32;
        win.completes -= n;
        Ok(())
    })
}

/// MPI_Win_wait: wait until every origin of the exposure epoch has completed.
pub fn win_wait(w: WinId) -> Result<()> {
    with(|e| exposure_done(e, w).map(|_| ()))?;
    wait_until(|e| Ok(exposure_done(e, w)?.then_some(())))?;
    close_exposure(w)
}
