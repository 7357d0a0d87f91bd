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

pub(crate) use ops::issue;

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
    _pad: u32,
    /// What each origin (rank below [`HOLDERS`]) holds of `lock`, so that the lock of a dead
    /// origin can be given back.
    holders: [AtomicU8; HOLDERS],
}

const _: () = assert!(std::mem::size_of::<Slot>() == SLOT);

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
            _pad: 0,
            holders: std::array::from_fn(|_| AtomicU8::new(0)),
        });
        Direct {
            parts: vec![base],
            ctl: &*own as *const Slot,
            _own: Some(own),
        }
    }

    /// Member `t`'s slot.
    pub(crate) fn slot(&self, t: usize) -> &Slot {
        assert!(t < self.parts.len());
        // SAFETY: `ctl` holds one slot per member, alive with the window (`in_segment`).
        unsafe { &*self.ctl.add(t) }
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

    /// Give back every lock dead origin `dead` held (recorded in the holder table: origins
    /// below [`HOLDERS`]); the first process to see the death does it. Returns how many it
    /// released.
    pub(crate) fn release_dead(&self, dead: i32) -> usize {
        let mut n = 0;
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

    /// Take the accumulate lock (held for one operation only: spin, then yield).
    pub(crate) fn acc_lock(&self, me: i32) {
        let mine = me as u32 + 1;
        let mut b = Backoff::new();
        while self.acc.load(Ordering::Relaxed) != 0
            || self
                .acc
                .compare_exchange_weak(0, mine, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
        {
            b.snooze();
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
    }
}
