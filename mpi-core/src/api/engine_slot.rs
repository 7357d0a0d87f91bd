//! The engine slot and how a call reaches it: the engine lock, or owner mode for the thread
//! that initialized MPI at MPI_THREAD_SINGLE/FUNNELED (see `EngineCell`), and the errors of a
//! call that may not reach it (another thread, a re-entrant call, MPI not running).

use std::cell::UnsafeCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::lifetime::{FINALIZED, PHASE};
use super::wait::Backoff;
use crate::engine::Engine;
use crate::error::{err, ErrorClass, Result};

/// The engine, and how calls reach it.
///
/// At MPI_THREAD_SERIALIZED and MULTIPLE every call takes the engine lock: acquired with one
/// atomic exchange (spinning briefly, then yielding), released with a plain store. (A locked
/// instruction waits until every earlier store of the core has left it; at the end of a call
/// those are its writes to the shared-memory rings, which the other core is reading, so a
/// release by compare-and-swap, as a general-purpose mutex does it, stalls every call for a
/// cross-core transfer.)
///
/// At MPI_THREAD_SINGLE and FUNNELED only the thread that initialized MPI may call it (the
/// standard's rule), so that thread owns the engine and reaches it without the lock: *owner
/// mode*, no atomic read-modify-write per call. Any other thread then gets an error instead of
/// a data race. Owner mode is switched on and off by the owner only, the switch-on under the
/// lock, so a thread that took the lock before sees it when it looks again under the lock.
/// It is off while the asynchronous progress thread of one-sided communication runs
/// (`progress`: switched off before the thread starts, back on after it stopped).
pub(super) struct EngineCell {
    /// Owner mode.
    pub(super) owned: AtomicBool,
    /// The lock; in owner mode, the guard against a re-entrant call (an error, never a second
    /// `&mut Engine`).
    held: AtomicBool,
    engine: UnsafeCell<Option<Engine>>,
}

// SAFETY: the engine is reached only through `with_slot`, which gives one thread at a time a
// reference: the lock holder, or in owner mode the owner (others are refused).
unsafe impl Sync for EngineCell {}

pub(super) static ENGINE: EngineCell = EngineCell {
    owned: AtomicBool::new(false),
    held: AtomicBool::new(false),
    engine: UnsafeCell::new(None),
};

/// The thread that initialized MPI at MPI_THREAD_SINGLE or FUNNELED (its [`thread_word`], 0
/// for none). A thread id rather than a thread-local flag: in a shared library a thread-local
/// costs a call to `__tls_get_addr` on every MPI call, the thread id one load.
pub(super) static OWNER_THREAD: AtomicUsize = AtomicUsize::new(0);

/// A word that identifies the calling thread among the live ones, never 0: the address of
/// its thread control block. On x86-64 Linux that is the first word of the `fs` segment (the
/// value `pthread_self` returns, read inline instead of through a call into libc on every MPI
/// call); elsewhere `pthread_self` itself.
#[inline(always)]
pub(super) fn thread_word() -> usize {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let tcb: usize;
        // SAFETY: on x86-64 Linux (glibc and musl alike) `fs` points at the thread control
        // block, whose first word is its own address; reading it has no other effect.
        unsafe {
            std::arch::asm!(
                "mov {}, qword ptr fs:[0]",
                out(reg) tcb,
                options(nostack, readonly, preserves_flags, pure)
            )
        };
        tcb
    }
    #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
    {
        // SAFETY: pthread_self has no preconditions.
        unsafe { libc::pthread_self() as usize }
    }
}

/// Whether the calling thread owns the engine.
#[inline(always)]
pub(super) fn is_owner() -> bool {
    OWNER_THREAD.load(Ordering::Relaxed) == thread_word()
}

/// Clears a flag when dropped (also when `f` panics).
struct Clear<'a>(&'a AtomicBool);

impl Drop for Clear<'_> {
    #[inline]
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// Run `f` on the engine slot, alone: see [`EngineCell`].
#[inline]
pub(super) fn with_slot<T>(f: impl FnOnce(&mut Option<Engine>) -> Result<T>) -> Result<T> {
    let c = &ENGINE;
    if c.owned.load(Ordering::Relaxed) {
        if !is_owner() {
            return not_owner();
        }
        if c.held.load(Ordering::Relaxed) {
            return reentrant();
        }
        c.held.store(true, Ordering::Relaxed);
        let _c = Clear(&c.held);
        // SAFETY: owner mode: only this thread reaches the engine, and `held` keeps it from
        // doing so twice at once.
        return f(unsafe { &mut *c.engine.get() });
    }
    acquire(c);
    let _c = Clear(&c.held);
    if c.owned.load(Ordering::Relaxed) {
        // Owner mode began while we waited.
        return if is_owner() { reentrant() } else { not_owner() };
    }
    // SAFETY: we hold the lock.
    f(unsafe { &mut *c.engine.get() })
}

#[cold]
fn not_owner<T>() -> Result<T> {
    err(
        ErrorClass::Other,
        "MPI called from a thread other than the one that initialized it (the thread level is \
         MPI_THREAD_SINGLE or MPI_THREAD_FUNNELED; initialize with MPI_Init_thread and \
         MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE to call MPI from several threads)",
    )
}

#[cold]
fn reentrant<T>() -> Result<T> {
    err(
        ErrorClass::Other,
        "MPI called from inside an MPI call (a callback that calls MPI back)",
    )
}

/// Run `f` on the engine when the calling thread owns it (MPI_THREAD_SINGLE/FUNNELED) and is
/// not already inside it; `None` otherwise (the caller then takes the path through [`with`]).
#[inline(always)]
pub(super) fn with_owned<T>(f: impl FnOnce(&mut Engine) -> Option<T>) -> Option<T> {
    let c = &ENGINE;
    if !c.owned.load(Ordering::Relaxed) || c.held.load(Ordering::Relaxed) || !is_owner() {
        return None;
    }
    c.held.store(true, Ordering::Relaxed);
    let _c = Clear(&c.held);
    // SAFETY: owner mode, on the owner thread, not re-entered: as in `with_slot`.
    unsafe { &mut *c.engine.get() }.as_mut().and_then(f)
}

/// The engine, held by a fast path written as straight code rather than a closure (see
/// [`now`]); released when dropped.
pub(crate) struct Now(());

impl Now {
    /// The engine.
    #[inline(always)]
    pub(crate) fn engine(&mut self) -> &mut Engine {
        // SAFETY: held (owner mode on the owner thread, or the lock), and the engine was there
        // when it was taken: nothing removes it while it is held.
        unsafe { (*ENGINE.engine.get()).as_mut().unwrap_unchecked() }
    }
}

impl Drop for Now {
    #[inline(always)]
    fn drop(&mut self) {
        ENGINE.held.store(false, Ordering::Release);
    }
}

/// The engine, held, by either way in (owner mode or the lock, see [`EngineCell`]), as a
/// guard; `None`, having done nothing, when the call may not reach it (MPI not running,
/// another thread in owner mode, a re-entrant call). For the one-sided fast paths, whose
/// checked path reports every error: written as straight code on the guard, their whole body
/// inlines into the C layer's function (a closure run by both ways in would be called from two
/// places and stay a function of its own). Tool events are not delivered here: a fast path
/// queues none.
#[inline(always)]
pub(crate) fn now() -> Option<Now> {
    let c = &ENGINE;
    if c.owned.load(Ordering::Relaxed) {
        // Owner mode (as `with_owned`): the owner thread, not re-entered.
        if c.held.load(Ordering::Relaxed) || !is_owner() {
            return None;
        }
        c.held.store(true, Ordering::Relaxed);
    } else if !now_locked() {
        return None;
    }
    let g = Now(());
    // SAFETY: held (above).
    if unsafe { (*c.engine.get()).is_none() } {
        return None;
    }
    Some(g)
}

/// Take the engine lock (`held`), spinning then yielding while another thread holds it.
#[inline]
fn acquire(c: &EngineCell) {
    if c.held.swap(true, Ordering::Acquire) {
        let mut b = Backoff::new();
        loop {
            b.snooze();
            if !c.held.load(Ordering::Relaxed) && !c.held.swap(true, Ordering::Acquire) {
                break;
            }
        }
    }
}

/// [`now`] without owner mode: take the lock (as `with_slot`); false, not holding it, when
/// owner mode was switched on meanwhile.
#[inline(never)]
fn now_locked() -> bool {
    let c = &ENGINE;
    acquire(c);
    if c.owned.load(Ordering::Relaxed) {
        c.held.store(false, Ordering::Release);
        return false;
    }
    true
}

/// Run `f` on the engine, alone (see [`EngineCell`]).
#[inline]
pub(crate) fn with<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    let r = with_quiet(f);
    // Tool events the call queued are delivered now, the engine released (one relaxed load
    // when there are none).
    crate::tool::events::after_call();
    r
}

/// [`with`] without delivering tool events: for the tool interface's own reads, which may
/// run inside an event callback.
#[inline]
pub(crate) fn with_quiet<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Result<T> {
    with_slot(|slot| match slot.as_mut() {
        Some(e) => f(e),
        None => not_running(),
    })
}

/// Run `f` on the engine if the lock is free at once; `None` if an MPI call holds it, in owner
/// mode (never while the progress thread runs: see `progress`) or when MPI is not running. For
/// the asynchronous progress thread, which must never queue behind the application's calls.
pub(super) fn try_with<T>(f: impl FnOnce(&mut Engine) -> Result<T>) -> Option<Result<T>> {
    let c = &ENGINE;
    if c.owned.load(Ordering::Relaxed)
        || c.held.load(Ordering::Relaxed)
        || c.held.swap(true, Ordering::Acquire)
    {
        return None;
    }
    let _c = Clear(&c.held);
    if c.owned.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: we hold the lock.
    unsafe { &mut *c.engine.get() }.as_mut().map(f)
}

pub(super) fn not_running<T>() -> Result<T> {
    match PHASE.load(Ordering::Acquire) {
        FINALIZED => err(ErrorClass::Other, "MPI has already been finalized"),
        _ => err(
            ErrorClass::Other,
            "MPI is not initialized (call MPI_Init first)",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::thread_word;

    #[test]
    fn thread_word_names_the_calling_thread() {
        let here = thread_word();
        assert_ne!(here, 0);
        assert_eq!(here, thread_word());
        // SAFETY: pthread_self has no preconditions.
        #[cfg(all(target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
        assert_eq!(here, unsafe { libc::pthread_self() } as usize);
        let other = std::thread::spawn(thread_word).join().unwrap();
        assert_ne!(other, 0);
        assert_ne!(other, here);
    }
}
