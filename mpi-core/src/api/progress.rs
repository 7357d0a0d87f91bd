//! Asynchronous progress: a background thread that polls the engine whenever no MPI call holds
//! it, so that a process that computes without calling MPI still serves the one-sided
//! operations, lock requests and flushes aimed at it (passive target communication).
//!
//! It runs while at least one window with another member exists that does not take the
//! direct path on one node (`rma::direct`, where origins need no target action): started by
//! the first such window, stopped when the last one is freed, and at MPI_Finalize;
//! `MADMPI_ASYNC_PROGRESS=0` never starts it, `=1` starts it for every window (single-member
//! and direct ones included). Programs without such windows never start it, so their calls
//! keep owner mode (the point-to-point fast path at MPI_THREAD_SINGLE/FUNNELED).
//!
//! Owner mode lets the owner thread reach the engine without the lock, which a second thread
//! cannot share: the owner switches it off (outside any call) before starting the thread, and
//! back on, under the lock, after the thread is gone. The thread only ever tries the lock once
//! per round (never queues behind an MPI call); it polls again at once while there is
//! traffic, then backs off: yields, then sleeps from 20 µs doubling to 1 ms while idle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use parking_lot::Mutex;

use super::engine_slot::{is_owner, try_with, with_slot, ENGINE};
use super::env_parse;

/// The running thread, its stop flag, whether owner mode must come back when it stops, and
/// the windows that need it.
struct Progress {
    thread: Option<(JoinHandle<()>, Arc<AtomicBool>, bool)>,
    windows: usize,
}

static PROGRESS: Mutex<Progress> = Mutex::new(Progress {
    thread: None,
    windows: 0,
});

/// Whether a window of `members` processes needs the thread (`MADMPI_ASYNC_PROGRESS`: `0`
/// never, `1` for every window; by default for windows with another member that do not take
/// the one-sided direct path, where origins need no target action).
fn needs_thread(members: usize, direct: bool) -> bool {
    match env_parse::<u8>("MADMPI_ASYNC_PROGRESS") {
        Some(v) => v != 0,
        None => members > 1 && !direct,
    }
}

/// Whether the progress thread runs (for tests and diagnostics).
pub fn async_progress_running() -> bool {
    PROGRESS.lock().thread.is_some()
}

/// A window of `members` processes was created by this process (called outside any engine
/// call, by the thread that created it).
pub(crate) fn window_opened(members: usize, direct: bool) {
    if !needs_thread(members, direct) {
        return;
    }
    let mut p = PROGRESS.lock();
    p.windows += 1;
    if p.thread.is_some() {
        return;
    }
    // Owner mode off: from now on every call takes the lock. Only the owner switches it, and
    // it is outside any call here.
    let owner = ENGINE.owned.load(Ordering::Relaxed) && is_owner();
    if owner {
        ENGINE.owned.store(false, Ordering::Release);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    match std::thread::Builder::new()
        .name("madmpi-progress".into())
        .spawn(move || run(&s))
    {
        Ok(h) => p.thread = Some((h, stop, owner)),
        Err(e) => {
            tracing::warn!("no asynchronous progress thread: {e}");
            if owner {
                let _ = with_slot(|_| {
                    ENGINE.owned.store(true, Ordering::Relaxed);
                    Ok(())
                });
            }
        }
    }
}

/// A window counted by [`window_opened`] was freed.
pub(crate) fn window_closed(members: usize, direct: bool) {
    if !needs_thread(members, direct) {
        return;
    }
    let mut p = PROGRESS.lock();
    p.windows = p.windows.saturating_sub(1);
    if p.windows == 0 {
        stop(&mut p);
    }
}

/// Stop the thread (at MPI_Finalize, or when the last window went).
pub(crate) fn shutdown() {
    let mut p = PROGRESS.lock();
    p.windows = 0;
    stop(&mut p);
}

fn stop(p: &mut Progress) {
    let Some((h, stop, owner)) = p.thread.take() else {
        return;
    };
    stop.store(true, Ordering::Release);
    let _ = h.join();
    if owner {
        // Owner mode back on, under the lock (see `EngineCell`).
        let _ = with_slot(|_| {
            ENGINE.owned.store(true, Ordering::Relaxed);
            Ok(())
        });
    }
}

/// The thread: poll when the engine is free, back off when idle.
fn run(stop: &AtomicBool) {
    let mut idle = 0u32;
    let mut watched = std::time::Instant::now();
    while !stop.load(Ordering::Acquire) {
        match try_with(|e| e.progress()) {
            // Something arrived (or an MPI call holds the engine: it progresses itself).
            Some(Ok(true)) => {
                idle = 0;
                continue;
            }
            None => {}
            Some(Ok(false)) => idle = idle.saturating_add(1),
            Some(Err(e)) => {
                // The calls of the application meet the same error and report it.
                tracing::debug!("asynchronous progress: {e}");
                idle = idle.saturating_add(1);
            }
        }
        if idle < 4 {
            std::thread::yield_now();
        } else {
            // While idle, now and then: peers that died, among them lock holders of this
            // process's windows (`rma::lost`), which a shared-memory ring never reports.
            if watched.elapsed() >= super::WATCH_EVERY {
                watched = std::time::Instant::now();
                let _ = try_with(|e| e.watch_peers());
            }
            let us = 20u64 << (idle - 4).min(6);
            std::thread::sleep(Duration::from_micros(us.min(1000)));
        }
    }
}
