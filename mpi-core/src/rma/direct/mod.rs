//! The direct path on one node: windows whose members all run on one host and whose memory
//! the library allocates (`MPI_Win_allocate`, `MPI_Win_allocate_shared`) live in one
//! node-wide segment that every member maps, so the origin does every operation itself and
//! the target takes no part:
//!
//! - put and get are copies into or out of the target's part;
//! - accumulates, get-accumulate, fetch-and-op and compare-and-swap are applied by the origin
//!   in place (`ops`): with one hardware atomic instruction per element for replace,
//!   compare-and-swap and the integer sum and bit operations on elements of 4 or 8 bytes at an
//!   aligned address; under the target's accumulate lock in the control block otherwise
//!   (floating point, min/max, products, logical operations, no-op reads; 1-, 2- and 16-byte
//!   types, pair types, misaligned elements), the reduction kernels applied in place;
//! - the window locks (`MPI_Win_lock`, `lock_all`) are words of the control block that the
//!   origins take and release with atomics ([`Slot`]).
//!
//! Whether a window takes the direct path is decided once, collectively, when it is created
//! (every member on one host, the segment created and mapped by all, `MADMPI_RMA_DIRECT` not
//! `0` anywhere): the standard's accumulate atomicity must hold between every origin, the
//! target's own accumulates included, so on one window either every operation is direct or
//! none is. The decision for an element (atomic instruction or accumulate lock) depends only
//! on its basic type, its address and the operation, so two accumulates with the same
//! operation (or MPI_NO_OP) on one element are atomic with respect to each other.
//!
//! The control block is the first pages of the segment: one 64-byte [`Slot`] per member (its
//! lock word, its accumulate lock and the lock holders), zeroed at creation. A window of one
//! process keeps its slot on the heap.

mod atomic;
mod ops;

#[cfg(test)]
pub(crate) use ops::is_native;
pub(crate) use ops::{acc_run, cas_run, issue, Class};

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::LockType;
use crate::api::Backoff;

/// Bytes of one target's slot of the control block.
pub(crate) const SLOT: usize = 64;

/// Shared holders of a lock word (bits 0–23).
const SHARED_MASK: u64 = (1 << 24) - 1;
/// One exclusive waiter (bits 24–39: how many wait).
const WAIT_ONE: u64 = 1 << 24;
const WAIT_MASK: u64 = ((1 << 16) - 1) << 24;
/// The exclusive holder's rank + 1 (bits 40–63).
const HOLDER_SHIFT: u32 = 40;

/// The holder table's entries (one byte per origin in each slot's `holders`, for origins
/// below [`HOLDERS`]): what the origin holds of this target's lock.
const HOLD_SHARED: u8 = 1;
const HOLD_EXCL: u8 = 2;
/// Origins whose holds are recorded in a slot (the rest of its 64 bytes).
pub(crate) const HOLDERS: usize = SLOT - 16;

/// One target's part of the control block.
#[repr(C, align(64))]
pub(crate) struct Slot {
    /// The window lock at this target: shared holders, exclusive waiters, exclusive holder.
    lock: AtomicU64,
    /// The accumulate lock: 0 when free, else the holder's rank + 1.
    acc: AtomicU32,
    /// Nonzero once a member has seen this slot's process die (set before its locks are
    /// given back): the other members' direct locks on it then fail at once, though their
    /// own transports may not have told them yet.
    gone: AtomicU32,
    /// What each origin (rank below [`HOLDERS`]) holds of `lock`, so that the lock of a dead
    /// origin can be given back.
    holders: [AtomicU8; HOLDERS],
}

const _: () = assert!(std::mem::size_of::<Slot>() == SLOT);

/// Yielding rounds between two checks that an accumulate lock's holder still exists.
const HOLDER_CHECK: u32 = 256;

/// Whether process `pid` exists and is not a zombie (the transports' check, shared with the
/// `shm` driver's watch of its peers).
pub(crate) use madmpi_transports::pid_alive;

/// Bytes of the control block of a window of `n` members (whole pages: the data that follows
/// stays page-aligned).
pub(crate) fn ctl_bytes(n: usize) -> usize {
    (n * SLOT).div_ceil(4096) * 4096
}

/// Whether this process lets its windows take the direct path (`MADMPI_RMA_DIRECT=0`: never).
pub(crate) fn enabled() -> bool {
    std::env::var("MADMPI_RMA_DIRECT").map_or(true, |v| v.trim() != "0")
}

/// A window's direct path: where each member's part is mapped in this process, and the
/// control block.
pub(crate) struct Direct {
    /// Start of each member's part in this process's mapping.
    pub parts: Vec<*mut u8>,
    /// Each member's process id (0: unknown), for an origin waiting for an accumulate lock to
    /// see that its holder has died (`acc_lock`).
    pids: Vec<i32>,
    ctl: *const Slot,
    /// The slot of a window of one process.
    _own: Option<Box<Slot>>,
}

impl Direct {
    /// The direct path of a window whose control block starts at `ctl` (followed by the
    /// parts).
    ///
    /// # Safety
    /// `ctl` is 64-byte aligned and points at `parts.len()` zeroed (or live) slots, mapped in
    /// every member, for as long as the window exists.
    pub(crate) unsafe fn in_segment(parts: Vec<*mut u8>, ctl: *mut u8) -> Direct {
        Direct {
            pids: vec![0; parts.len()],
            parts,
            ctl: ctl as *const Slot,
            _own: None,
        }
    }

    /// The direct path of a window of one process, whose memory starts at `base`.
    pub(crate) fn local(base: *mut u8) -> Direct {
        let own = Box::new(Slot {
            lock: AtomicU64::new(0),
            acc: AtomicU32::new(0),
            gone: AtomicU32::new(0),
            holders: std::array::from_fn(|_| AtomicU8::new(0)),
        });
        Direct {
            parts: vec![base],
            pids: vec![0],
            ctl: &*own as *const Slot,
            _own: Some(own),
        }
    }

    /// The members' process ids, as they published them when the window was created. Kept
    /// only if this process sees every one of them alive now (members in another pid
    /// namespace would look dead: then none is used).
    pub(crate) fn set_pids(&mut self, pids: Vec<i32>) {
        if pids.len() == self.parts.len() && pids.iter().all(|&p| p > 0 && pid_alive(p)) {
            self.pids = pids;
        }
    }

    /// Whether the members' process ids are known ([`Direct::set_pids`] kept them).
    pub(crate) fn has_pids(&self) -> bool {
        self.pids.iter().all(|&p| p > 0)
    }

    /// Take target `t`'s accumulate lock for origin `me` (held for one operation only: spin,
    /// then yield). A holder that died holding it (killed inside an operation) would keep
    /// every origin waiting here forever, and this wait does not poll the engine that would
    /// report the death: so, once yielding, every [`HOLDER_CHECK`] rounds the waiter checks
    /// that the holder's process still exists, and takes the lock over from a dead one (the
    /// elements it was updating are left as it left them).
    #[inline]
    pub(crate) fn acc_lock(&self, t: usize, me: i32) {
        let s = self.slot(t);
        let mine = me as u32 + 1;
        // Free, most of the time: one compare-and-swap.
        if s.acc
            .compare_exchange(0, mine, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            self.acc_lock_wait(s, mine);
        }
    }

    /// [`Direct::acc_lock`] when the lock was not free at once.
    #[cold]
    #[inline(never)]
    fn acc_lock_wait(&self, s: &Slot, mine: u32) {
        let mut b = Backoff::new();
        let mut rounds = 0u32;
        loop {
            let h = s.acc.load(Ordering::Relaxed);
            if h == 0 {
                if s.acc
                    .compare_exchange_weak(0, mine, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok()
                {
                    return;
                }
            } else if b.yielding() {
                rounds += 1;
                if rounds.is_multiple_of(HOLDER_CHECK)
                    && !self.alive(h as usize - 1)
                    && s.acc
                        .compare_exchange(h, mine, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                {
                    tracing::warn!(
                        "rank {} of a window died holding an accumulate lock: taken over",
                        h - 1
                    );
                    return;
                }
            }
            b.snooze();
        }
    }

    /// Whether member `r`'s process may still exist (true when its id is unknown).
    fn alive(&self, r: usize) -> bool {
        match self.pids.get(r) {
            Some(&p) if p > 0 => pid_alive(p),
            _ => true,
        }
    }

    /// Member `t`'s slot.
    pub(crate) fn slot(&self, t: usize) -> &Slot {
        assert!(t < self.parts.len());
        // SAFETY: `ctl` holds one slot per member, alive with the window (`in_segment`).
        unsafe { &*self.ctl.add(t) }
    }

    /// Whether a member has seen target `t`'s process die ([`Direct::release_dead`]).
    pub(crate) fn gone(&self, t: usize) -> bool {
        self.slot(t).gone.load(Ordering::Acquire) != 0
    }

    /// Try to take target `t`'s lock for origin `me` (an exclusive one once announced with
    /// [`Slot::announce`]: `announced`).
    pub(crate) fn try_lock(&self, t: usize, kind: LockType, me: i32, announced: bool) -> bool {
        let s = self.slot(t);
        let got = match kind {
            LockType::Shared => s.try_shared(),
            LockType::Exclusive => s.try_exclusive(me, announced),
        };
        if got {
            s.record(me, kind);
        }
        got
    }

    /// Release origin `me`'s lock on target `t` (its puts, being this thread's stores, are
    /// ordered before: release).
    pub(crate) fn unlock(&self, t: usize, kind: LockType, me: i32) {
        let s = self.slot(t);
        s.forget(me);
        match kind {
            LockType::Shared => s.lock.fetch_sub(1, Ordering::Release),
            LockType::Exclusive => s
                .lock
                .fetch_sub((me as u64 + 1) << HOLDER_SHIFT, Ordering::Release),
        };
    }

    /// A member holding target `t`'s lock (exclusive, or a shared one recorded in the holder
    /// table) whose process no longer exists, if any (only members whose id is known).
    pub(crate) fn dead_holder(&self, t: usize) -> Option<usize> {
        let s = self.slot(t);
        let x = (s.lock.load(Ordering::Relaxed) >> HOLDER_SHIFT) as usize;
        if x > 0 && x <= self.parts.len() && !self.alive(x - 1) {
            return Some(x - 1);
        }
        (s.holders.iter().take(self.parts.len()).enumerate())
            .find(|(o, h)| h.load(Ordering::Relaxed) != 0 && !self.alive(*o))
            .map(|(o, _)| o)
    }

    /// Give back every lock dead origin `dead` held (recorded in the holder table: origins
    /// below [`HOLDERS`]); the first process to see the death does it. Returns how many it
    /// released.
    pub(crate) fn release_dead(&self, dead: i32) -> usize {
        let mut n = 0;
        // Marked first: an origin that gets a lock released below sees the mark after it.
        if let Some(s) = usize::try_from(dead).ok().filter(|&d| d < self.parts.len()) {
            self.slot(s).gone.store(1, Ordering::Release);
        }
        for t in 0..self.parts.len() {
            let s = self.slot(t);
            let Some(h) = s.holders.get(dead as usize) else {
                return n;
            };
            match h.swap(0, Ordering::AcqRel) {
                HOLD_SHARED => {
                    s.lock.fetch_sub(1, Ordering::Release);
                    n += 1;
                }
                HOLD_EXCL => {
                    s.lock
                        .fetch_sub((dead as u64 + 1) << HOLDER_SHIFT, Ordering::Release);
                    n += 1;
                }
                _ => {}
            }
            let _ = s
                .acc
                .compare_exchange(dead as u32 + 1, 0, Ordering::AcqRel, Ordering::Relaxed);
        }
        n
    }
}

impl Slot {
    fn try_shared(&self) -> bool {
        let v = self.lock.load(Ordering::Relaxed);
        // Waiting exclusive lockers go first: readers that come and go cannot starve them.
        v >> HOLDER_SHIFT == 0
            && v & WAIT_MASK == 0
            && self
                .lock
                .compare_exchange(v, v + 1, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
    }

    fn try_exclusive(&self, me: i32, announced: bool) -> bool {
        let v = self.lock.load(Ordering::Relaxed);
        if v >> HOLDER_SHIFT != 0 || v & SHARED_MASK != 0 {
            return false;
        }
        let mut new = v + ((me as u64 + 1) << HOLDER_SHIFT);
        if announced {
            new -= WAIT_ONE;
        }
        self.lock
            .compare_exchange(v, new, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// An exclusive locker starts waiting: shared lockers stay out until it is served.
    pub(crate) fn announce(&self) {
        self.lock.fetch_add(WAIT_ONE, Ordering::Relaxed);
    }

    /// An announced exclusive locker gives up (its wait failed).
    pub(crate) fn withdraw(&self) {
        self.lock.fetch_sub(WAIT_ONE, Ordering::Relaxed);
    }

    fn record(&self, me: i32, kind: LockType) {
        if let Some(h) = self.holders.get(me as usize) {
            h.store(
                match kind {
                    LockType::Shared => HOLD_SHARED,
                    LockType::Exclusive => HOLD_EXCL,
                },
                Ordering::Relaxed,
            );
        }
    }

    fn forget(&self, me: i32) {
        if let Some(h) = self.holders.get(me as usize) {
            h.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn acc_unlock(&self) {
        self.acc.store(0, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_word_shared_exclusive_and_waiters() {
        let d = Direct::local(std::ptr::null_mut());
        assert!(d.try_lock(0, LockType::Shared, 0, false));
        assert!(d.try_lock(0, LockType::Shared, 1, false));
        assert!(!d.try_lock(0, LockType::Exclusive, 2, false));
        // A waiting exclusive locker keeps new shared lockers out.
        d.slot(0).announce();
        assert!(!d.try_lock(0, LockType::Shared, 3, false));
        d.unlock(0, LockType::Shared, 0);
        assert!(!d.try_lock(0, LockType::Exclusive, 2, true));
        d.unlock(0, LockType::Shared, 1);
        assert!(d.try_lock(0, LockType::Exclusive, 2, true));
        assert!(!d.try_lock(0, LockType::Shared, 3, false));
        assert!(!d.try_lock(0, LockType::Exclusive, 4, false));
        d.unlock(0, LockType::Exclusive, 2);
        assert!(d.try_lock(0, LockType::Shared, 3, false));
        // A dead holder's lock is given back.
        assert_eq!(d.release_dead(3), 1);
        assert_eq!(d.release_dead(3), 0);
        assert!(d.try_lock(0, LockType::Exclusive, 5, false));
        assert_eq!(d.slot(0).lock.load(Ordering::Relaxed), 6 << HOLDER_SHIFT);
        d.unlock(0, LockType::Exclusive, 5);
        assert_eq!(d.slot(0).lock.load(Ordering::Relaxed), 0);
        // Only the dead member's own slot is marked gone (origins 3 and 5 have none here).
        assert!(!d.gone(0));
        assert_eq!(d.release_dead(0), 0);
        assert!(d.gone(0));
    }

    /// An origin waiting for an accumulate lock whose holder's process has died takes it
    /// over; a live holder's is waited for.
    #[test]
    fn accumulate_lock_of_a_dead_holder_is_taken_over() {
        let mut d = Direct::local(std::ptr::null_mut());
        d.parts.push(std::ptr::null_mut());
        // Member 1: a process that has exited (and been reaped); member 0: this one.
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let dead = child.id() as i32;
        child.wait().expect("wait");
        d.pids = vec![std::process::id() as i32, dead];
        assert!(d.alive(0) && !d.alive(1));
        // (`set_pids` keeps none of them: one member looks dead.)
        let mut e = Direct::local(std::ptr::null_mut());
        e.parts.push(std::ptr::null_mut());
        e.set_pids(vec![std::process::id() as i32, dead]);
        assert!(e.pids.iter().all(|&p| p == 0));

        let s = d.slot(0);
        s.acc.store(2, Ordering::Relaxed); // held by member 1, dead
        d.acc_lock(0, 0);
        assert_eq!(s.acc.load(Ordering::Relaxed), 1);
        s.acc_unlock();

        // Held by member 0 (alive): the waiter gets it only once released.
        s.acc.store(1, Ordering::Relaxed);
        /// (The window's pointers are only read here.)
        struct Shared<'a>(&'a Direct);
        // SAFETY: the waiter thread only uses the slot's atomics and the pid table.
        unsafe impl Sync for Shared<'_> {}
        impl Shared<'_> {
            fn get(&self) -> &Direct {
                self.0
            }
        }
        let w = Shared(&d);
        std::thread::scope(|sc| {
            let t = sc.spawn(|| {
                w.get().acc_lock(0, 1);
                w.get().slot(0).acc.load(Ordering::Relaxed)
            });
            std::thread::sleep(std::time::Duration::from_millis(50));
            assert_eq!(
                s.acc.load(Ordering::Relaxed),
                1,
                "a live holder's lock kept"
            );
            s.acc_unlock();
            assert_eq!(t.join().expect("waiter"), 2);
        });
    }
}
