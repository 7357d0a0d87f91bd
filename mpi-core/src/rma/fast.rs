//! The fast path of one-sided calls on the direct path (one node, shared memory): an operation
//! whose buffers are runs of predefined elements (the C layer passes its predefined datatypes
//! by reference: no reference counting), on a window that takes the direct path, inside an
//! access epoch, in range, to a live target, is done at once, here: a copy into or out of the
//! target's part, or the accumulate's atomic instructions or locked kernel (`direct::acc_run`,
//! `cas_run`, deciding per element exactly as the general path does, so that both meet in the
//! same place). Nothing is built: no plan, no packed data; the request-based forms' request
//! is born complete (`rput_now` …).
//!
//! Each function returns `None`, having done nothing, when the call is not for the fast path
//! (a derived or non-contiguous datatype, another kind of window, MPI_PROC_NULL, any check that
//! fails): the caller then takes the general path (`origin::rma`), which does the operation or
//! reports the error with its class. So the fast path never reports an error of its own, and
//! every error class stays the general path's.
//!
//! A flush on the direct path has nothing to wait for (every operation is complete when its
//! call returns; operations by message never go to a direct window): [`flush_now`] is the
//! epoch check and one memory fence.

use std::sync::atomic::{fence, Ordering};

use madmpi_datatypes::{Basic, Datatype};
use once_cell::sync::Lazy;

use super::direct::{self, Class, Direct};
use super::wire::Sub;
use super::{Held, Win, WinId};
use crate::api::{now, polled, Now};
use crate::engine::State;
use crate::error::Result;
use crate::op::{BuiltinOp, Op as ReduceOp};
use crate::request::{Op, Request, RequestId};

/// A buffer of the fast path: `count` elements of a predefined datatype at `ptr`.
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Elements.
    pub count: usize,
    /// Their (predefined) type.
    pub dt: &'a Datatype,
}

impl Run<'_> {
    /// The run's bytes, when its elements are one run of memory starting at `ptr` (a
    /// contiguous predefined type).
    #[inline(always)]
    fn bytes(&self) -> Option<usize> {
        if !self.dt.is_contiguous() || self.dt.lb() != 0 {
            return None;
        }
        self.count.checked_mul(self.dt.size())
    }
}

/// How accumulates apply each predefined operation (by its position in [`BuiltinOp::ALL`]) to
/// each basic type (by its [`Basic::index`]): `None` where the operation is not defined on it
/// (the general path's check, [`ReduceOp::check`]), else its `Class`. Made once.
static CLASSES: Lazy<Vec<[Option<Class>; Basic::ALL.len()]>> = Lazy::new(|| {
    BuiltinOp::ALL
        .iter()
        .map(|&op| {
            let mut row = [None; Basic::ALL.len()];
            for &b in &Basic::ALL {
                if ReduceOp::Builtin(op).check(&Datatype::basic(b)).is_ok() {
                    row[b.index()] = Some(Class::of(op, b));
                }
            }
            row
        })
        .collect()
});

/// How accumulates apply `op` to `b` (`None`: not defined).
#[inline(always)]
fn class(op: BuiltinOp, b: Basic) -> Option<Class> {
    // (`BuiltinOp::ALL` lists the operations in their declaration order.)
    CLASSES[op as usize][b.index()]
}

/// The target of an operation of the fast path: window `w` on the direct path, inside an
/// access epoch to `rank`, live, and `bytes` bytes at displacement `disp` of its part in
/// range. The window, its direct path and the target address.
#[inline(always)]
fn target(
    st: &State,
    w: WinId,
    rank: i32,
    disp: i64,
    bytes: usize,
) -> Option<(&Win, &Direct, *mut u8)> {
    let win = st.rma.wins.get(w.0 as usize)?.as_ref()?;
    let d = win.direct.as_ref()?;
    // (Negative: MPI_PROC_NULL, or invalid.)
    let r = usize::try_from(rank).ok()?;
    if r >= win.world.len() || bytes == 0 || !win.may_access(rank) {
        return None;
    }
    let peer = &win.peers[r];
    let start = u64::try_from(disp.checked_mul(i64::try_from(peer.disp_unit).ok()?)?).ok()?;
    if start.checked_add(bytes as u64)? > peer.size || st.peer_dead(win.world[r]) {
        return None;
    }
    Some((win, d, d.parts[r].wrapping_add(start as usize)))
}

/// Copy `n` bytes (small ones as one load and one store: they may overlap, in a put from this
/// process's own part to itself; from 2 KiB to 32 KiB by [`copy_mid`]).
///
/// # Safety
/// Both hold `n` bytes.
#[inline(always)]
pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, n: usize) {
    // SAFETY: the caller's; each width reads everything before writing.
    unsafe {
        match n {
            1 => *dst = *src,
            2 => (dst as *mut u16).write_unaligned((src as *const u16).read_unaligned()),
            4 => (dst as *mut u32).write_unaligned((src as *const u32).read_unaligned()),
            8 => (dst as *mut u64).write_unaligned((src as *const u64).read_unaligned()),
            16 => (dst as *mut u128).write_unaligned((src as *const u128).read_unaligned()),
            MID_MIN..=MID_MAX => copy_mid(src, dst, n),
            LARGE_MIN.. => copy_large(src, dst, n),
            _ => std::ptr::copy(src, dst, n),
        }
    }
}

/// The sizes [`copy_large`] copies.
const LARGE_MIN: usize = madmpi_transports::LARGE_MIN;

/// Copy `n` bytes (`LARGE_MIN..`): by the transports' [`copy_bytes`] (in pieces that keep
/// glibc off its non-temporal stores) when the two do not overlap, else by one `memmove`.
///
/// [`copy_bytes`]: madmpi_transports::copy_bytes
///
/// # Safety
/// Both hold `n` bytes.
#[inline(never)]
unsafe fn copy_large(src: *const u8, dst: *mut u8, n: usize) {
    let (s, d) = (src as usize, dst as usize);
    if s + n <= d || d + n <= s {
        // SAFETY: the caller's, and the two do not overlap.
        unsafe { madmpi_transports::copy_bytes(src, dst, n) }
    } else {
        // SAFETY: the caller's.
        unsafe { std::ptr::copy(src, dst, n) }
    }
}

/// The sizes [`copy_mid`] copies.
const MID_MIN: usize = 2049;
const MID_MAX: usize = 32 * 1024;

/// Copy `n` bytes (`MID_MIN..=MID_MAX`) with 32-byte vector loads and stores when the CPU has
/// AVX2 and the two do not overlap, else `memmove`. Why: from 2112 bytes on, glibc (2.36 here,
/// on a CPU with fast short `rep movsb`) copies with `rep movsb`, whose start costs about 7 ns
/// on this machine's AMD EPYC: 4 KiB took 54 ns against 47 ns with this loop (best of 20 000
/// rounds of 64 copies, cache-hot; 2 KiB and 32 KiB the same, 16 KiB 358 against 294 ns).
///
/// # Safety
/// Both hold `n` bytes.
#[inline(never)]
unsafe fn copy_mid(src: *const u8, dst: *mut u8, n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let (s, d) = (src as usize, dst as usize);
        if (s + n <= d || d + n <= s) && std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is there; both hold `n` bytes and do not overlap.
            return unsafe { copy_avx2(src, dst, n) };
        }
    }
    // SAFETY: the caller's.
    unsafe { std::ptr::copy(src, dst, n) }
}

/// [`copy_mid`]'s loop: 128 bytes a round, then 32, then the last 32 (again over bytes already
/// copied, with the same values).
///
/// # Safety
/// The CPU has AVX2; both hold `n` ≥ 32 bytes and do not overlap.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn copy_avx2(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::{__m256i, _mm256_loadu_si256 as load, _mm256_storeu_si256 as store};
    let (s, d) = (src as *const __m256i, dst as *mut __m256i);
    let mut i = 0;
    // SAFETY: every access is of 32 bytes inside the first `n` of each (the caller's).
    unsafe {
        while i + 128 <= n {
            let (a, b) = (load(s.byte_add(i)), load(s.byte_add(i + 32)));
            let (c, e) = (load(s.byte_add(i + 64)), load(s.byte_add(i + 96)));
            store(d.byte_add(i), a);
            store(d.byte_add(i + 32), b);
            store(d.byte_add(i + 64), c);
            store(d.byte_add(i + 96), e);
            i += 128;
        }
        while i + 32 <= n {
            store(d.byte_add(i), load(s.byte_add(i)));
            i += 32;
        }
        if i < n {
            store(d.byte_add(n - 32), load(s.byte_add(n - 32)));
        }
    }
}

/// MPI_Put on the fast path: whether it was done (`false`: nothing was, take the general
/// path). The buffers are given by their bytes (`n` at `src`, `tn` at the target: each a run of
/// a contiguous predefined type, see [`Run`]), which is all a put needs of them.
///
/// # Safety
/// `src` holds `n` bytes.
#[inline(always)]
pub unsafe fn put_now(w: WinId, src: *const u8, n: usize, rank: i32, disp: i64, tn: usize) -> bool {
    if n != tn {
        return false;
    }
    let Some(mut g) = now() else {
        return false;
    };
    let st = &mut g.engine().st;
    // The next put to the target of the last one, to a window that takes messages, while its
    // batch is open (`batch::Hot`).
    // SAFETY: `src` holds `n` bytes (caller).
    if unsafe { st.hot_now(w, src, n, rank, disp, Sub::Put, 0) } {
        return true;
    }
    if let Some((_, _, tp)) = target(st, w, rank, disp, n) {
        // SAFETY: the origin holds `n` bytes (caller); the target range is in its part,
        // mapped while the window lives.
        unsafe { copy(src, tp, n) };
        return true;
    }
    // A window that takes messages: a record of the target's batch when it fits (`batch`).
    // SAFETY: the origin holds `n` bytes (caller).
    unsafe { st.msg_now(w, src, n, rank, disp, Sub::Put, 0) }.is_some()
}

/// MPI_Get on the fast path: whether it was done (as [`put_now`]).
///
/// # Safety
/// The origin buffer holds its elements.
#[inline(always)]
pub unsafe fn get_now(w: WinId, origin: Run, rank: i32, disp: i64, tgt: Run) -> bool {
    // SAFETY: forwarded.
    unsafe { copy_now(w, origin, rank, disp, tgt, false) }.is_some()
}

/// MPI_Rput on the fast path: done at once, its request born complete (`None`: nothing was
/// done, take the general path).
///
/// # Safety
/// As [`put_now`].
#[inline(always)]
pub unsafe fn rput_now(w: WinId, origin: Run, rank: i32, disp: i64, tgt: Run) -> Option<RequestId> {
    // SAFETY: forwarded.
    unsafe { copy_now(w, origin, rank, disp, tgt, true) }.map(|mut g| done(&mut g.engine().st))
}

/// MPI_Rget on the fast path (as [`rput_now`]).
///
/// # Safety
/// As [`put_now`].
#[inline(always)]
pub unsafe fn rget_now(w: WinId, origin: Run, rank: i32, disp: i64, tgt: Run) -> Option<RequestId> {
    // SAFETY: forwarded.
    unsafe { copy_now(w, origin, rank, disp, tgt, false) }.map(|mut g| done(&mut g.engine().st))
}

/// The request of a request-based operation of the fast path, done in the call: born
/// complete, as the general path makes those it completes at once (a free slot of the
/// request table: no allocation once the table has grown).
#[inline(always)]
fn done(st: &mut State) -> RequestId {
    st.reqs.insert(Request::done(Op::None))
}

/// A put (`to_target`) or a get on the fast path: the engine, still held, when it was done.
///
/// # Safety
/// As [`put_now`].
#[inline(always)]
unsafe fn copy_now(
    w: WinId,
    origin: Run,
    rank: i32,
    disp: i64,
    tgt: Run,
    to_target: bool,
) -> Option<Now> {
    let (Some(n), Some(tn)) = (origin.bytes(), tgt.bytes()) else {
        return None;
    };
    if n != tn {
        return None;
    }
    let mut g = now()?;
    let (_, _, tp) = target(&g.engine().st, w, rank, disp, n)?;
    // SAFETY: the origin holds `n` bytes (caller); the target range is in its part, mapped
    // while the window lives.
    unsafe {
        if to_target {
            copy(origin.ptr, tp, n)
        } else {
            copy(tp, origin.ptr, n)
        }
    };
    Some(g)
}

/// MPI_Accumulate (`result` `None`), MPI_Get_accumulate and MPI_Fetch_and_op on the fast path:
/// `None` when not done (take the general path), else the operation's outcome. The origin is
/// not read with MPI_NO_OP.
///
/// # Safety
/// The buffers hold their elements.
#[inline(always)]
pub unsafe fn acc_now(
    w: WinId,
    origin: Run,
    result: Option<Run>,
    rank: i32,
    disp: i64,
    tgt: Run,
    op: BuiltinOp,
) -> Option<Result<()>> {
    // SAFETY: forwarded.
    unsafe { acc_then(w, origin, result, rank, disp, tgt, op, true) }.map(|(_, r)| r)
}

/// MPI_Raccumulate (`result` `None`) and MPI_Rget_accumulate on the fast path: as
/// [`acc_now`], the request born complete.
///
/// # Safety
/// As [`acc_now`].
#[inline(always)]
pub unsafe fn racc_now(
    w: WinId,
    origin: Run,
    result: Option<Run>,
    rank: i32,
    disp: i64,
    tgt: Run,
    op: BuiltinOp,
) -> Option<Result<RequestId>> {
    // SAFETY: forwarded.
    unsafe { acc_then(w, origin, result, rank, disp, tgt, op, false) }
        .map(|(mut g, r)| r.map(|()| done(&mut g.engine().st)))
}

/// [`acc_now`]: the engine, still held, and the outcome when it was done. With `msg`, an
/// accumulate without result to a window that takes messages leaves as one untracked chunk
/// when it fits (`batch`).
///
/// # Safety
/// As [`acc_now`].
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn acc_then(
    w: WinId,
    origin: Run,
    result: Option<Run>,
    rank: i32,
    disp: i64,
    tgt: Run,
    op: BuiltinOp,
    msg: bool,
) -> Option<(Now, Result<()>)> {
    let b = tgt.dt.as_basic()?;
    let n = tgt.bytes()?;
    let noop = op == BuiltinOp::NoOp;
    let c = class(op, b)?;
    // (The origin and the result hold the target's basic type, predefined: their elements
    // are as contiguous as the target's, and as many bytes.)
    if !noop && (origin.dt.as_basic() != Some(b) || origin.count != tgt.count) {
        return None;
    }
    let old = match result {
        Some(r) if r.dt.as_basic() == Some(b) && r.count == tgt.count => r.ptr,
        Some(_) => return None,
        None => std::ptr::null_mut(),
    };
    let src = if noop {
        std::ptr::null()
    } else {
        origin.ptr as *const u8
    };
    let mut g = now()?;
    let Some((win, d, tp)) = target(&g.engine().st, w, rank, disp, n) else {
        if msg && result.is_none() && !noop {
            let aux = super::op_code(op) as u64 | (b.index() as u64) << 8;
            let st = &mut g.engine().st;
            // SAFETY: the origin holds `n` bytes (caller).
            if !unsafe { st.hot_now(w, src, n, rank, disp, Sub::Acc, aux) } {
                // SAFETY: as above.
                unsafe { st.msg_now(w, src, n, rank, disp, Sub::Acc, aux) }?;
            }
            return Some((g, Ok(())));
        }
        return None;
    };
    let es = tgt.dt.size();
    // SAFETY: the target run is in its part (checked); the origin and result hold `count`
    // elements (caller).
    let r = unsafe {
        direct::acc_run(
            d,
            win.rank,
            rank as usize,
            op,
            b,
            c,
            es,
            tp,
            tgt.count,
            src,
            old,
        )
    };
    Some((g, r))
}

/// MPI_Compare_and_swap on the fast path: `None` when not done (take the general path), else
/// whether it swapped. One that did not swap counts as a fruitless poll, as on the general
/// path (the caller may spin on a lock word).
///
/// # Safety
/// `new`, `cmp` and `old` hold one element of `dt` each.
#[inline(always)]
pub unsafe fn cas_now(
    w: WinId,
    new: *const u8,
    cmp: *const u8,
    old: *mut u8,
    dt: &Datatype,
    rank: i32,
    disp: i64,
) -> Option<bool> {
    if !dt.as_basic()?.compare_and_swap_ok() {
        return None;
    }
    let es = Run {
        ptr: old,
        count: 1,
        dt,
    }
    .bytes()?;
    if es > 32 {
        return None;
    }
    let swapped = {
        let mut g = now()?;
        let (win, d, tp) = target(&g.engine().st, w, rank, disp, es)?;
        // SAFETY: the element is in the part (checked); the buffers hold one each (caller).
        unsafe { direct::cas_run(d, win.rank, rank as usize, es, tp, new, cmp, old) }
    };
    if !swapped {
        polled(false);
    }
    Some(swapped)
}

/// MPI_Win_flush (`rank`) or MPI_Win_flush_all (`None`), and their `_local` forms, on the
/// direct path: nothing to wait for, one memory fence. `false`, having done nothing, when not
/// for the fast path (another kind of window, no passive epoch, an error to report,
/// MPI_PROC_NULL or an invalid rank).
#[inline(always)]
pub fn flush_now(w: WinId, rank: Option<i32>) -> bool {
    let Some(mut g) = now() else {
        return false;
    };
    let Some(win) = g
        .engine()
        .st
        .rma
        .wins
        .get(w.0 as usize)
        .and_then(|w| w.as_ref())
    else {
        return false;
    };
    if win.direct.is_none() || win.error.is_some() {
        return false;
    }
    // (An invalid rank or MPI_PROC_NULL: the general path reports or skips it.)
    let epoch = match rank {
        Some(r) => match usize::try_from(r).ok().and_then(|r| win.held.get(r)) {
            Some(h) => win.lock_all || matches!(h, Held::Granted(_) | Held::Unchecked(_)),
            None => return false,
        },
        None => win.lock_all,
    };
    if !epoch {
        return false;
    }
    // (The general path would wait for operations by message: none on a direct window.)
    debug_assert!(win.pending.iter().all(|&p| p == 0));
    // (A full barrier: LLVM makes it a locked `or` of zero into a stack word on x86-64,
    // cheaper than `mfence`, as Open MPI's osc/sm flush is.)
    fence(Ordering::SeqCst);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The vector copy of mid-sized puts and gets copies exactly the bytes asked, at any
    /// alignment, and overlapping ones as `memmove` does.
    #[test]
    fn mid_copies_are_exact() {
        let src: Vec<u8> = (0..40_000u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for n in [MID_MIN, 2100, 4096, 4097, 4127, 8191, MID_MAX] {
            for (so, dof) in [(0, 0), (1, 0), (0, 3), (5, 31), (32, 64)] {
                let mut dst = vec![0xa5u8; n + 200];
                // SAFETY: both hold the bytes copied.
                unsafe { copy(src.as_ptr().add(so), dst.as_mut_ptr().add(dof), n) };
                assert_eq!(&dst[dof..dof + n], &src[so..so + n], "{n} {so} {dof}");
                assert!(dst[..dof].iter().chain(&dst[dof + n..]).all(|&b| b == 0xa5));
            }
        }
        // Overlapping (a put within one's own part): memmove's result.
        let mut buf = src.clone();
        let mut want = src.clone();
        want.copy_within(0..4096, 100);
        let p = buf.as_mut_ptr();
        // SAFETY: both ranges lie in `buf`.
        unsafe { copy(p, p.add(100), 4096) };
        assert_eq!(buf, want);
    }

    #[test]
    fn large_copies_are_exact() {
        const LARGE_CHUNK: usize = madmpi_transports::LARGE_PIECE;
        let len = 3 * LARGE_CHUNK + 4000;
        let src: Vec<u8> = (0..len as u32).map(|i| (i * 7 + i / 251) as u8).collect();
        for n in [
            LARGE_MIN,
            LARGE_MIN + 1,
            3 * LARGE_CHUNK - 17,
            3 * LARGE_CHUNK,
        ] {
            for (so, dof) in [(0, 0), (1, 0), (0, 3), (5, 31)] {
                let mut dst = vec![0xa5u8; n + 64];
                // SAFETY: both hold the bytes copied.
                unsafe { copy(src.as_ptr().add(so), dst.as_mut_ptr().add(dof), n) };
                assert!(dst[dof..dof + n] == src[so..so + n], "{n} {so} {dof}");
                assert!(dst[..dof].iter().chain(&dst[dof + n..]).all(|&b| b == 0xa5));
            }
        }
        // Overlapping, both ways: memmove's result.
        for (from, to) in [(0, 1000), (1000, 0)] {
            let mut buf = src.clone();
            let mut want = src.clone();
            want.copy_within(from..from + LARGE_MIN, to);
            let p = buf.as_mut_ptr();
            // SAFETY: both ranges lie in `buf`.
            unsafe { copy(p.add(from), p.add(to), LARGE_MIN) };
            assert!(buf == want, "{from} -> {to}");
        }
    }

    /// The class table is indexed by `op as usize`: the declaration order of the operations
    /// must be `BuiltinOp::ALL`'s. And it says what the general path's check says.
    #[test]
    fn class_table_follows_the_general_check() {
        for (i, &op) in BuiltinOp::ALL.iter().enumerate() {
            assert_eq!(op as usize, i, "{op:?}");
            for &b in &Basic::ALL {
                let ok = ReduceOp::Builtin(op).check(&Datatype::basic(b)).is_ok();
                assert_eq!(class(op, b).is_some(), ok, "{op:?} on {b:?}");
                if let Some(c) = class(op, b) {
                    assert_eq!(c.native, direct::is_native(op, b), "{op:?} on {b:?}");
                }
            }
        }
    }

    /// The inline sum of one `double` or `float` (`Class::add`) gives the kernel's bits, on
    /// every basic type it is chosen for, and is chosen for MPI_SUM on each of them only.
    #[test]
    fn inline_float_sum_is_the_kernels() {
        let vals = [
            0.0f64,
            -0.0,
            1.5,
            -2.25e300,
            f64::INFINITY,
            f64::NAN,
            1e-310,
        ];
        let mut seen = 0;
        for &b in &Basic::ALL {
            for &op in &BuiltinOp::ALL {
                let Some(c) = class(op, b) else { continue };
                if c.add == 0 {
                    continue;
                }
                assert_eq!(op, BuiltinOp::Sum, "{b:?}");
                assert_eq!(c.add, Datatype::basic(b).size(), "{b:?}");
                seen += 1;
                let k = c.kernel.unwrap();
                for &x in &vals {
                    for &y in &vals {
                        // (Not folded by the compiler: computed as the kernel computes.)
                        let (x, y) = (std::hint::black_box(x), std::hint::black_box(y));
                        let (mut io, mut inl) = ([0u8; 8], [0u8; 8]);
                        let mut a = [0u8; 8];
                        if c.add == 8 {
                            a = x.to_ne_bytes();
                            io = y.to_ne_bytes();
                            inl = (x + y).to_ne_bytes();
                        } else {
                            a[..4].copy_from_slice(&(x as f32).to_ne_bytes());
                            io[..4].copy_from_slice(&(y as f32).to_ne_bytes());
                            inl[..4].copy_from_slice(&((x as f32) + (y as f32)).to_ne_bytes());
                        }
                        // SAFETY: one element of `c.add` bytes in each.
                        unsafe { k(op, 1, a.as_ptr(), io.as_mut_ptr()) };
                        assert_eq!(io, inl, "{b:?} {x} {y}");
                    }
                }
            }
        }
        // MPI_FLOAT and MPI_DOUBLE at least (and their Fortran and fixed-size names).
        assert!(seen >= 2);
    }
}
