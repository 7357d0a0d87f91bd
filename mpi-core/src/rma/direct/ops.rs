//! Issuing an operation on the direct path: the origin reads and writes the target's part of
//! the segment itself. Put and get are copies (one when both sides are contiguous). The
//! accumulates, get-accumulate, fetch-and-op and compare-and-swap whose operation is one
//! atomic instruction (replace, compare-and-swap, integer sum and bit operations) go element
//! by element through `atomic`, without any lock, where every element is 4 or 8 bytes at an
//! aligned address; every other one holds the target's accumulate lock and applies the
//! reduction kernel in place (floating point, min/max, products, logical operations, MPI_NO_OP
//! reads, elements of other sizes, pair types, misaligned elements); under the lock, aligned
//! elements of a native operation still take the atomic instructions, since the lock-free
//! operations of other origins may touch them meanwhile. Which way an element goes depends
//! only on its basic type, its address and the operation: concurrent accumulates with the
//! same operation (or MPI_NO_OP) are atomic per element, which is what the standard asks
//! (`accumulate_ops` = `same_op_no_op`, the default). Every operation is complete at the
//! target when `issue` returns.

use madmpi_datatypes::{Basic, Datatype};

use super::atomic::{self, atomic_at};
use super::Direct;
use crate::error::Result;
use crate::op::{apply_basic, float_width, is_integer, kernel, BuiltinOp, Kernel};
use crate::rma::origin::{source, Plan, Remote};
use crate::rma::wire::Sub;

/// Each segment of the target memory: (offset from the operation's start, length, offset in
/// the packed stream).
fn each_seg(t: &Remote, bytes: usize, mut f: impl FnMut(isize, usize, usize)) {
    if let Some((off, len)) = t.dt.contiguous_span(t.count) {
        if len > 0 {
            f(off, len, 0);
        }
        return;
    }
    let mut at = 0;
    for (off, len) in t.dt.segments(t.count, 0..bytes) {
        f(off, len, at);
        at += len;
    }
}

/// Do operation `p` of origin `me` on member `target`'s part, `start` bytes into it (the
/// range was checked against the part). False for a compare-and-swap that did not swap.
///
/// # Safety
/// The origin and result buffers hold what their types describe; `d` is the window's live
/// direct path.
pub(crate) unsafe fn issue(
    d: &Direct,
    me: i32,
    p: &Plan,
    target: usize,
    start: isize,
) -> Result<bool> {
    if p.bytes == 0 {
        return Ok(true);
    }
    let part = d.parts[target].wrapping_offset(start);
    let t = &p.target;
    match p.sub {
        Sub::Put => {
            // SAFETY: the caller's.
            let (src, _keep) = unsafe { source(p) };
            // SAFETY: each segment lies in the target's part (range checked), mapped while
            // the window lives; the source holds `bytes` bytes. (They may overlap: a put to
            // this process's own part.)
            each_seg(t, p.bytes, |off, len, at| unsafe {
                std::ptr::copy(src.add(at), part.wrapping_offset(off), len)
            });
        }
        Sub::Get => {
            let Some((rp, rc, rdt)) = &p.result else {
                return Ok(true);
            };
            match rdt.contiguous_span(*rc) {
                Some((ro, _)) => {
                    let dst = rp.wrapping_offset(ro);
                    // SAFETY: as for a put, the other way; the result buffer holds `bytes`.
                    each_seg(t, p.bytes, |off, len, at| unsafe {
                        std::ptr::copy(part.wrapping_offset(off), dst.add(at), len)
                    });
                }
                None => {
                    let mut v = vec![0u8; p.bytes];
                    let dst = v.as_mut_ptr();
                    // SAFETY: as above, into `v`.
                    each_seg(t, p.bytes, |off, len, at| unsafe {
                        std::ptr::copy_nonoverlapping(part.wrapping_offset(off), dst.add(at), len)
                    });
                    // SAFETY: the result buffer holds `rc` elements (caller).
                    unsafe { rdt.unpack(*rp, *rc, 0, &v) };
                }
            }
        }
        // SAFETY: forwarded.
        _ => return unsafe { accumulate(d, me, p, target, part) },
    }
    Ok(true)
}

/// Where the previous values of a get-like accumulate go: the result buffer itself when it
/// is contiguous, else a temporary unpacked into it at the end.
struct Old {
    ptr: *mut u8,
    tmp: Vec<u8>,
    unpack: Option<(*mut u8, usize, Datatype)>,
}

impl Old {
    fn new(p: &Plan) -> Old {
        let mut o = Old {
            ptr: std::ptr::null_mut(),
            tmp: Vec::new(),
            unpack: None,
        };
        if let Some((rp, rc, rdt)) = &p.result {
            match rdt.contiguous_span(*rc) {
                Some((ro, _)) => o.ptr = rp.wrapping_offset(ro),
                None => {
                    o.tmp = vec![0u8; p.bytes];
                    o.ptr = o.tmp.as_mut_ptr();
                    o.unpack = Some((*rp, *rc, rdt.clone()));
                }
            }
        }
        o
    }

    fn at(&self, at: usize) -> *mut u8 {
        if self.ptr.is_null() {
            self.ptr
        } else {
            self.ptr.wrapping_add(at)
        }
    }

    /// # Safety
    /// The result buffer holds its elements.
    unsafe fn finish(self) {
        if let Some((rp, rc, rdt)) = self.unpack {
            // SAFETY: the caller's.
            unsafe { rdt.unpack(rp, rc, 0, &self.tmp) };
        }
    }
}

/// An accumulate, get-accumulate, fetch-and-op or compare-and-swap on the target memory at
/// `part`; false for a compare-and-swap that did not swap.
///
/// # Safety
/// As [`issue`].
unsafe fn accumulate(d: &Direct, me: i32, p: &Plan, target: usize, part: *mut u8) -> Result<bool> {
    let Some(b) = p.basic else {
        return Ok(true);
    };
    let es = b.size();
    let noop = p.op == BuiltinOp::NoOp && p.sub != Sub::Cas;
    let (src, _keep) = if noop {
        (std::ptr::null(), Vec::new())
    } else {
        // SAFETY: the caller's.
        unsafe { source(p) }
    };
    let src_at = |at: usize| {
        if src.is_null() {
            src
        } else {
            src.wrapping_add(at)
        }
    };
    let old = Old::new(p);
    let t = &p.target;
    // Whether the segments hold whole elements, and whether all of them are aligned.
    let (mut whole, mut aligned, mut segs) = (true, true, 0);
    each_seg(t, p.bytes, |off, len, at| {
        whole &= at % es == 0 && len % es == 0;
        aligned &= atomic_at(es, part.wrapping_offset(off));
        segs += 1;
    });
    let atomic_kind = (es == 4 || es == 8) && whole;
    // The operations one atomic instruction does; the others (and MPI_NO_OP, so that its
    // reads are ordered with them) hold the accumulate lock and run the reduction kernels in
    // place. (A compare-and-swap is one element: atomic when it is one aligned run.)
    let native = p.sub == Sub::Cas || is_native(p.op, b);
    let lock = !(atomic_kind && aligned && native && (p.sub != Sub::Cas || segs == 1));
    let slot = d.slot(target);
    if lock {
        d.acc_lock(target, me);
    }
    let mut r = Ok(());
    let mut swapped = true;
    if p.sub == Sub::Cas {
        if !lock {
            // SAFETY: one aligned element in the part; `src` holds new then compare.
            swapped = unsafe { atomic::cas(es, part, src, src.add(es), old.ptr) };
        } else {
            // SAFETY: under the accumulate lock; the segments are in the part.
            unsafe {
                let cur = gather(t, p.bytes, part);
                std::ptr::copy_nonoverlapping(cur.as_ptr(), old.ptr, p.bytes);
                let cmp = std::slice::from_raw_parts(src.add(p.bytes), p.bytes);
                swapped = cur == cmp;
                if swapped {
                    scatter(t, p.bytes, part, src);
                }
            }
        }
    } else if atomic_kind {
        each_seg(t, p.bytes, |off, len, at| {
            let tp = part.wrapping_offset(off);
            if r.is_err() {
                return;
            }
            // SAFETY: the segment is in the part; aligned elements of a native operation (or
            // read by MPI_NO_OP) take the atomic instructions, since other origins' native
            // operations may update them without the lock meanwhile; everything else is
            // only ever touched under the accumulate lock (held: `lock` is set).
            r = unsafe {
                if atomic_at(es, tp) && (native || p.op == BuiltinOp::NoOp) {
                    atomic::run(p.op, b, es, tp, len / es, src_at(at), old.at(at), native)
                } else {
                    plain(p.op, b, es, tp, len, src_at(at), old.at(at))
                }
            };
        });
    } else {
        // Elements of other sizes, or split over segments (a pair type with a hole): gather
        // them packed, apply, scatter back, under the lock.
        // SAFETY: under the accumulate lock; the segments are in the part, `src` and `old`
        // hold `bytes` bytes.
        r = unsafe {
            let mut cur = gather(t, p.bytes, part);
            if !old.ptr.is_null() {
                std::ptr::copy_nonoverlapping(cur.as_ptr(), old.ptr, p.bytes);
            }
            let r = if src.is_null() {
                Ok(())
            } else {
                apply_basic(p.op, b, p.bytes / es, src, cur.as_mut_ptr())
            };
            if r.is_ok() && !src.is_null() {
                scatter(t, p.bytes, part, cur.as_ptr());
            }
            r
        };
    }
    if lock {
        slot.acc_unlock();
    }
    r?;
    // SAFETY: the caller's.
    unsafe { old.finish() };
    Ok(swapped)
}

/// Whether `op` on elements of `b` is one atomic instruction (where the element is 4 or 8 bytes
/// at an aligned address): replace, and the integer sum and bit operations. (Compare-and-swap
/// is too.) Every path of the window decides with this: an element's accumulates with one
/// operation always meet in one place.
#[inline]
pub(crate) fn is_native(op: BuiltinOp, b: Basic) -> bool {
    op == BuiltinOp::Replace
        || (matches!(
            op,
            BuiltinOp::Sum | BuiltinOp::Band | BuiltinOp::Bor | BuiltinOp::Bxor
        ) && is_integer(b))
}

/// How accumulates apply an operation to a basic type, resolved once (the fast path keeps a
/// table of them).
#[derive(Clone, Copy)]
pub(crate) struct Class {
    /// One atomic instruction per aligned element of 4 or 8 bytes ([`is_native`]).
    pub native: bool,
    /// The reduction kernel, when resolved ([`kernel`]; else `apply_basic` dispatches).
    pub kernel: Option<Kernel>,
    /// 8 for `MPI_SUM` on a `double`, 4 on a `float` (with a kernel), else 0: one element is
    /// then added inline, as the kernel adds it.
    pub add: usize,
}

impl Class {
    pub(crate) fn of(op: BuiltinOp, b: Basic) -> Class {
        let kernel = kernel(op, b);
        let add = match (op, kernel) {
            (BuiltinOp::Sum, Some(_)) => float_width(b).unwrap_or(0),
            _ => 0,
        };
        Class {
            native: is_native(op, b),
            kernel,
            add,
        }
    }
}

/// An accumulate (or get-accumulate, fetch-and-op: `old` not null) of origin `me` on `n`
/// elements of `b` (`es` bytes each) that are one run of memory at `tp` in member `target`'s
/// part, from the packed `src` (null for MPI_NO_OP), `c` being `Class::of(op, b)`: the fast
/// path's form of [`accumulate`], deciding as it does for a run of whole elements. Aligned
/// elements of 4 or 8 bytes with a native operation: atomic instructions, no lock; anything
/// else under the target's accumulate lock, where aligned elements read by MPI_NO_OP are still
/// loaded atomically.
///
/// # Safety
/// `tp` holds `n` elements in the part (range checked); `src` and `old` hold `n` elements
/// each (or are null).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn acc_run(
    d: &Direct,
    me: i32,
    target: usize,
    op: BuiltinOp,
    b: Basic,
    c: Class,
    es: usize,
    tp: *mut u8,
    n: usize,
    src: *const u8,
    old: *mut u8,
) -> Result<()> {
    let aligned = atomic_at(es, tp);
    if aligned && c.native {
        // SAFETY: the caller's; aligned elements of 4 or 8 bytes.
        return unsafe { atomic::run(op, b, es, tp, n, src, old, true) };
    }
    d.acc_lock(target, me);
    // SAFETY: the caller's; under the accumulate lock.
    let r = unsafe {
        if aligned && op == BuiltinOp::NoOp {
            atomic::run(op, b, es, tp, n, src, old, false)
        } else if let (Some(k), false) = (c.kernel, src.is_null()) {
            if !old.is_null() {
                std::ptr::copy_nonoverlapping(tp, old, n * es);
            }
            // One `double` or `float` summed (a common accumulate): the kernel's addition
            // (`tp = src + tp`, the same operands in the same order), without its call.
            match (n, c.add) {
                (1, 8) => (tp as *mut f64).write_unaligned(
                    (src as *const f64).read_unaligned() + (tp as *const f64).read_unaligned(),
                ),
                (1, 4) => (tp as *mut f32).write_unaligned(
                    (src as *const f32).read_unaligned() + (tp as *const f32).read_unaligned(),
                ),
                _ => k(op, n, src, tp),
            }
            Ok(())
        } else {
            plain(op, b, es, tp, n * es, src, old)
        }
    };
    d.slot(target).acc_unlock();
    r
}

/// Compare-and-swap of origin `me` on one element of `es` bytes at `tp` in member `target`'s
/// part (the fast path's form of [`accumulate`]'s): one atomic instruction when it is 4 or 8
/// bytes at an aligned address, else under the accumulate lock. Whether it swapped.
///
/// # Safety
/// `tp` holds the element in the part; `new`, `cmp` and `old` hold one element each.
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn cas_run(
    d: &Direct,
    me: i32,
    target: usize,
    es: usize,
    tp: *mut u8,
    new: *const u8,
    cmp: *const u8,
    old: *mut u8,
) -> bool {
    if atomic_at(es, tp) {
        // SAFETY: the caller's; one aligned element of 4 or 8 bytes.
        return unsafe { atomic::cas(es, tp, new, cmp, old) };
    }
    d.acc_lock(target, me);
    // SAFETY: the caller's; under the accumulate lock. (`old` may alias `cmp` or `new`: the
    // values are compared and copied from a temporary.)
    let swapped = unsafe {
        let mut cur = [0u8; 32];
        let cur = &mut cur[..es.min(32)];
        std::ptr::copy_nonoverlapping(tp, cur.as_mut_ptr(), cur.len());
        let swapped = std::slice::from_raw_parts(cmp, cur.len()) == &cur[..];
        if swapped {
            std::ptr::copy(new, tp, cur.len());
        }
        std::ptr::copy(cur.as_ptr(), old, cur.len());
        swapped
    };
    d.slot(target).acc_unlock();
    swapped
}

/// `len` bytes of elements at `tp` `= src op tp` without atomics (under the accumulate lock);
/// the previous values to `old` (when not null).
///
/// # Safety
/// `tp`, `src` and `old` hold `len` bytes; the kernels read and write unaligned.
unsafe fn plain(
    op: BuiltinOp,
    b: Basic,
    es: usize,
    tp: *mut u8,
    len: usize,
    src: *const u8,
    old: *mut u8,
) -> Result<()> {
    // SAFETY: the caller's.
    unsafe {
        if !old.is_null() {
            std::ptr::copy_nonoverlapping(tp, old, len);
        }
        if src.is_null() {
            return Ok(());
        }
        apply_basic(op, b, len / es, src, tp)
    }
}

/// The bytes of the target segments, packed.
///
/// # Safety
/// The segments lie in the part at `part`.
unsafe fn gather(t: &Remote, bytes: usize, part: *mut u8) -> Vec<u8> {
    let mut v = vec![0u8; bytes];
    let dst = v.as_mut_ptr();
    // SAFETY: the caller's; `v` holds `bytes`.
    each_seg(t, bytes, |off, len, at| unsafe {
        std::ptr::copy_nonoverlapping(part.wrapping_offset(off), dst.add(at), len)
    });
    v
}

/// Write the packed `data` (`bytes` bytes) over the target segments.
///
/// # Safety
/// As [`gather`]; `data` holds `bytes` bytes outside the segments.
unsafe fn scatter(t: &Remote, bytes: usize, part: *mut u8, data: *const u8) {
    // SAFETY: the caller's.
    each_seg(t, bytes, |off, len, at| unsafe {
        std::ptr::copy_nonoverlapping(data.add(at), part.wrapping_offset(off), len)
    });
}
