//! Accumulates applied element by element with hardware atomics, on elements of 4 or 8 bytes
//! at an address aligned to their size: one atomic instruction for replace, no-op (a load)
//! and the integer sum and bit operations, and compare-and-swap. Each element is updated by
//! one atomic read-modify-write, so concurrent accumulates of every origin are atomic per
//! element without any lock. (Any other operation would run as a compare-and-swap loop around
//! the reduction kernel of one element; `ops` sends those through the accumulate lock
//! instead, where the kernels run vectorized over the whole operation.)

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use madmpi_datatypes::Basic;

use crate::error::Result;
use crate::op::{apply_basic, BuiltinOp};

macro_rules! word_ops {
    ($run:ident, $cas:ident, $t:ty, $a:ty) => {
        /// `n` elements at `tp` (aligned) `= src op tp`; the previous values to `old` (when
        /// not null, unaligned); `src` may be null for MPI_NO_OP. `native`: the operation is
        /// one instruction on `b` (`ops::is_native`).
        ///
        /// # Safety
        /// `tp` is aligned and holds `n` elements in shared memory that only atomic
        /// operations touch concurrently; `src` and `old` hold `n` elements each.
        #[allow(clippy::too_many_arguments)]
        unsafe fn $run(
            op: BuiltinOp,
            b: Basic,
            tp: *mut u8,
            n: usize,
            src: *const u8,
            old: *mut u8,
            native: bool,
        ) -> Result<()> {
            const ES: usize = std::mem::size_of::<$t>();
            let int = native;
            for i in 0..n {
                // SAFETY: aligned, in the mapping (caller).
                let a = unsafe { &*(tp.add(i * ES) as *const $a) };
                let x: $t = if src.is_null() {
                    0
                } else {
                    // SAFETY: `src` holds `n` elements (caller).
                    unsafe { (src.add(i * ES) as *const $t).read_unaligned() }
                };
                let prev = match op {
                    BuiltinOp::NoOp => a.load(Ordering::Acquire),
                    BuiltinOp::Replace if old.is_null() => {
                        a.store(x, Ordering::Release);
                        continue;
                    }
                    BuiltinOp::Replace => a.swap(x, Ordering::AcqRel),
                    BuiltinOp::Sum if int => a.fetch_add(x, Ordering::AcqRel),
                    BuiltinOp::Band if int => a.fetch_and(x, Ordering::AcqRel),
                    BuiltinOp::Bor if int => a.fetch_or(x, Ordering::AcqRel),
                    BuiltinOp::Bxor if int => a.fetch_xor(x, Ordering::AcqRel),
                    _ => {
                        let mut cur = a.load(Ordering::Relaxed);
                        loop {
                            let mut new = cur;
                            // SAFETY: one element each, on the stack.
                            unsafe {
                                apply_basic(
                                    op,
                                    b,
                                    1,
                                    (&x as *const $t).cast(),
                                    (&mut new as *mut $t).cast(),
                                )?
                            };
                            match a.compare_exchange_weak(
                                cur,
                                new,
                                Ordering::AcqRel,
                                Ordering::Relaxed,
                            ) {
                                Ok(_) => break cur,
                                Err(v) => cur = v,
                            }
                        }
                    }
                };
                if !old.is_null() {
                    // SAFETY: `old` holds `n` elements (caller).
                    unsafe { (old.add(i * ES) as *mut $t).write_unaligned(prev) };
                }
            }
            Ok(())
        }

        /// Compare-and-swap of one element: `new` replaces it when it equals `cmp` (bit for
        /// bit); its previous value goes to `old`.
        ///
        /// # Safety
        /// As the accumulate above, for one element.
        unsafe fn $cas(tp: *mut u8, new: *const u8, cmp: *const u8, old: *mut u8) -> bool {
            // SAFETY: the caller's.
            unsafe {
                let a = &*(tp as *const $a);
                let new = (new as *const $t).read_unaligned();
                let cmp = (cmp as *const $t).read_unaligned();
                let r = a.compare_exchange(cmp, new, Ordering::AcqRel, Ordering::Acquire);
                let (Ok(prev) | Err(prev)) = r;
                (old as *mut $t).write_unaligned(prev);
                r.is_ok()
            }
        }
    };
}

word_ops!(run32, cas32, u32, AtomicU32);
word_ops!(run64, cas64, u64, AtomicU64);

/// Whether an element of `es` bytes at `p` takes the atomic path.
#[inline]
pub(super) fn atomic_at(es: usize, p: *const u8) -> bool {
    (es == 4 || es == 8) && (p as usize).is_multiple_of(es)
}

/// `n` elements of `es` bytes (4 or 8, [`atomic_at`]) at `tp`: see `run32`. `native`: the
/// operation is one instruction on `b` (`ops::is_native`: replace, integer sum and bit
/// operations); other operations run as compare-and-swap loops.
///
/// # Safety
/// As `run32`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn run(
    op: BuiltinOp,
    b: Basic,
    es: usize,
    tp: *mut u8,
    n: usize,
    src: *const u8,
    old: *mut u8,
    native: bool,
) -> Result<()> {
    // SAFETY: forwarded.
    unsafe {
        if es == 4 {
            run32(op, b, tp, n, src, old, native)
        } else {
            run64(op, b, tp, n, src, old, native)
        }
    }
}

/// Compare-and-swap of one element of `es` bytes (4 or 8, [`atomic_at`]); whether it swapped.
///
/// # Safety
/// As `cas32`.
pub(super) unsafe fn cas(
    es: usize,
    tp: *mut u8,
    new: *const u8,
    cmp: *const u8,
    old: *mut u8,
) -> bool {
    // SAFETY: forwarded.
    unsafe {
        if es == 4 {
            cas32(tp, new, cmp, old)
        } else {
            cas64(tp, new, cmp, old)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_accumulates_match_the_kernels() {
        let mut t = [5i32, -3, 7, 0];
        let src = [1i32, 2, 3, 4];
        let mut old = [0i32; 4];
        for (op, want) in [
            (BuiltinOp::Sum, [6, -1, 10, 4]),
            (BuiltinOp::Max, [6, 2, 10, 4]),
            (BuiltinOp::Prod, [6, 4, 30, 16]),
            (BuiltinOp::Replace, [1, 2, 3, 4]),
            (BuiltinOp::Bxor, [0, 0, 0, 0]),
        ] {
            let before = t;
            // SAFETY: local arrays of 4 aligned elements.
            unsafe {
                run(
                    op,
                    Basic::Int,
                    4,
                    t.as_mut_ptr().cast(),
                    4,
                    src.as_ptr().cast(),
                    old.as_mut_ptr().cast(),
                    super::super::ops::is_native(op, Basic::Int),
                )
                .unwrap()
            };
            assert_eq!(t, want, "{op:?}");
            assert_eq!(old, before);
        }
        let mut d = [1.5f64, 2.0];
        let s = [0.25f64, -4.0];
        // SAFETY: as above.
        unsafe {
            run(
                BuiltinOp::Sum,
                Basic::Double,
                8,
                d.as_mut_ptr().cast(),
                2,
                s.as_ptr().cast(),
                std::ptr::null_mut(),
                false,
            )
            .unwrap()
        };
        assert_eq!(d, [1.75, -2.0]);
        let (mut x, mut o) = (9u64, 0u64);
        // SAFETY: one aligned element each.
        unsafe {
            let p = (&mut x as *mut u64).cast();
            cas(
                8,
                p,
                (&3u64 as *const u64).cast(),
                (&8u64 as *const u64).cast(),
                (&mut o as *mut u64).cast(),
            );
            assert_eq!((x, o), (9, 9));
            cas(
                8,
                p,
                (&3u64 as *const u64).cast(),
                (&9u64 as *const u64).cast(),
                (&mut o as *mut u64).cast(),
            );
            assert_eq!((x, o), (3, 9));
        }
    }
}
