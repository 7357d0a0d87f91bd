//! The predefined operations' arithmetic: element kernels for integers, floating point,
//! complex numbers, logicals and MINLOC/MAXLOC pairs over packed (unaligned) data, C `long
//! double` through the x87 FPU, and [`apply_basic`], which picks the kernel for a basic type.

use madmpi_datatypes::Basic;

use super::kind::{available, kind, Fl, Kind};
use super::BuiltinOp;
use crate::error::{err, ErrorClass, Result};

/// Read element `i` of type `T` (unaligned).
#[inline(always)]
unsafe fn rd<T: Copy>(p: *const u8, i: usize) -> T {
    std::ptr::read_unaligned((p as *const T).add(i))
}

#[inline(always)]
unsafe fn wr<T: Copy>(p: *mut u8, i: usize, v: T) {
    std::ptr::write_unaligned((p as *mut T).add(i), v)
}

/// `io[i] = f(a[i], io[i])` for `n` values of `T`.
#[inline(always)]
unsafe fn each<T: Copy>(n: usize, a: *const u8, io: *mut u8, f: impl Fn(T, T) -> T) {
    for i in 0..n {
        let x = rd::<T>(a, i);
        let y = rd::<T>(io, i);
        wr(io, i, f(x, y));
    }
}

trait IntOps: Copy + PartialOrd {
    const ZERO: Self;
    const ONE: Self;
    fn wadd(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
}

macro_rules! int_ops {
    ($($t:ty),*) => {$(
        impl IntOps for $t {
            const ZERO: Self = 0;
            const ONE: Self = 1;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self { self.wrapping_add(o) }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self { self.wrapping_mul(o) }
            #[inline(always)]
            fn and(self, o: Self) -> Self { self & o }
            #[inline(always)]
            fn or(self, o: Self) -> Self { self | o }
            #[inline(always)]
            fn xor(self, o: Self) -> Self { self ^ o }
        }
    )*};
}
int_ops!(i8, u8, i16, u16, i32, u32, i64, u64, i128, u128);

unsafe fn int_op<T: IntOps>(op: BuiltinOp, n: usize, a: *const u8, io: *mut u8) {
    use BuiltinOp::*;
    let t = |x: bool| if x { T::ONE } else { T::ZERO };
    match op {
        Sum => each::<T>(n, a, io, |x, y| x.wadd(y)),
        Prod => each::<T>(n, a, io, |x, y| x.wmul(y)),
        Min => each::<T>(n, a, io, |x, y| if x < y { x } else { y }),
        Max => each::<T>(n, a, io, |x, y| if x > y { x } else { y }),
        Land => each::<T>(n, a, io, |x, y| t(x != T::ZERO && y != T::ZERO)),
        Lor => each::<T>(n, a, io, |x, y| t(x != T::ZERO || y != T::ZERO)),
        Lxor => each::<T>(n, a, io, |x, y| t((x != T::ZERO) != (y != T::ZERO))),
        Band => each::<T>(n, a, io, |x, y| x.and(y)),
        Bor => each::<T>(n, a, io, |x, y| x.or(y)),
        Bxor => each::<T>(n, a, io, |x, y| x.xor(y)),
        MinLoc | MaxLoc | Replace | NoOp => {}
    }
}

unsafe fn int_dispatch(
    op: BuiltinOp,
    size: usize,
    signed: bool,
    n: usize,
    a: *const u8,
    io: *mut u8,
) {
    match (size, signed) {
        (1, true) => int_op::<i8>(op, n, a, io),
        (1, false) => int_op::<u8>(op, n, a, io),
        (2, true) => int_op::<i16>(op, n, a, io),
        (2, false) => int_op::<u16>(op, n, a, io),
        (4, true) => int_op::<i32>(op, n, a, io),
        (4, false) => int_op::<u32>(op, n, a, io),
        (8, true) => int_op::<i64>(op, n, a, io),
        (8, false) => int_op::<u64>(op, n, a, io),
        (16, true) => int_op::<i128>(op, n, a, io),
        _ => int_op::<u128>(op, n, a, io),
    }
}

/// Arithmetic of a floating-point format.
trait Real: Copy {
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn lt(self, o: Self) -> bool;
}

macro_rules! real {
    ($($t:ty),*) => {$(
        impl Real for $t {
            #[inline(always)]
            fn add(self, o: Self) -> Self { self + o }
            #[inline(always)]
            fn sub(self, o: Self) -> Self { self - o }
            #[inline(always)]
            fn mul(self, o: Self) -> Self { self * o }
            #[inline(always)]
            fn lt(self, o: Self) -> bool { self < o }
        }
    )*};
}
real!(f32, f64);

#[inline(always)]
unsafe fn float_op<T: Real>(op: BuiltinOp, n: usize, a: *const u8, io: *mut u8) {
    use BuiltinOp::*;
    match op {
        Sum => each::<T>(n, a, io, |x, y| x.add(y)),
        Prod => each::<T>(n, a, io, |x, y| x.mul(y)),
        Min => each::<T>(n, a, io, |x, y| if x.lt(y) { x } else { y }),
        Max => each::<T>(n, a, io, |x, y| if y.lt(x) { x } else { y }),
        _ => {}
    }
}

unsafe fn complex_op<T: Real>(op: BuiltinOp, n: usize, a: *const u8, io: *mut u8) {
    match op {
        BuiltinOp::Sum => each::<T>(2 * n, a, io, |x, y| x.add(y)),
        BuiltinOp::Prod => {
            for i in 0..n {
                let (ar, ai) = (rd::<T>(a, 2 * i), rd::<T>(a, 2 * i + 1));
                let (br, bi) = (rd::<T>(io, 2 * i), rd::<T>(io, 2 * i + 1));
                wr(io, 2 * i, ar.mul(br).sub(ai.mul(bi)));
                wr(io, 2 * i + 1, ar.mul(bi).add(ai.mul(br)));
            }
        }
        _ => {}
    }
}

/// A value of a pair type's first member, compared as a number.
unsafe fn cmp_value(b: Basic, x: *const u8, y: *const u8) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    fn o<T: PartialOrd>(a: T, b: T) -> std::cmp::Ordering {
        a.partial_cmp(&b).unwrap_or(Equal)
    }
    match kind(b) {
        Kind::Float(Fl::F32) => o(rd::<f32>(x, 0), rd::<f32>(y, 0)),
        Kind::Float(Fl::F64) => o(rd::<f64>(x, 0), rd::<f64>(y, 0)),
        Kind::Float(_) => {
            let (p, q) = (ld::load(x), ld::load(y));
            if p.lt(q) {
                Less
            } else if q.lt(p) {
                Greater
            } else {
                Equal
            }
        }
        Kind::Int { size: 2, .. } => o(rd::<i16>(x, 0), rd::<i16>(y, 0)),
        Kind::Int { size: 4, .. } => o(rd::<i32>(x, 0), rd::<i32>(y, 0)),
        _ => o(rd::<i64>(x, 0), rd::<i64>(y, 0)),
    }
}

/// MINLOC / MAXLOC on packed pairs `(value, index)`: the smaller (larger) value, and on a tie
/// the smaller index.
unsafe fn loc_op(max: bool, pair: Basic, n: usize, a: *const u8, io: *mut u8) {
    let Some([(v, _), (i, _)]) = pair.pair() else {
        return;
    };
    let (vs, es) = (v.size(), pair.size());
    for k in 0..n {
        let x = a.add(k * es);
        let y = io.add(k * es);
        let c = cmp_value(v, x, y);
        let c = if max { c.reverse() } else { c };
        let take_in = match c {
            std::cmp::Ordering::Less => true,
            std::cmp::Ordering::Greater => false,
            std::cmp::Ordering::Equal => {
                cmp_value(i, x.add(vs), y.add(vs)) == std::cmp::Ordering::Less
            }
        };
        if c == std::cmp::Ordering::Equal {
            if take_in {
                std::ptr::copy_nonoverlapping(x.add(vs), y.add(vs), i.size());
            }
        } else if take_in {
            std::ptr::copy_nonoverlapping(x, y, es);
        }
    }
}

/// `io = a op io` for `n` elements of the basic type `b`, packed.
///
/// # Safety
/// As [`apply_packed`] (`n * b.size()` bytes).
pub unsafe fn apply_basic(
    op: BuiltinOp,
    b: Basic,
    n: usize,
    a: *const u8,
    io: *mut u8,
) -> Result<()> {
    if !op.supports(b) || !available(op, b) {
        return err(
            ErrorClass::Op,
            format!(
                "{} is not defined for datatype {}",
                op.mpi_name(),
                b.mpi_name()
            ),
        );
    }
    match op {
        BuiltinOp::NoOp => return Ok(()),
        BuiltinOp::Replace => {
            if !std::ptr::eq(a, io) {
                std::ptr::copy(a, io, n * b.size());
            }
            return Ok(());
        }
        _ => {}
    }
    match kind(b) {
        Kind::Int { size, signed, .. } => int_dispatch(op, size, signed, n, a, io),
        Kind::Logical(size) => {
            if !super::fortran_bool::apply(op, b, size, n, a, io) {
                int_dispatch(op, size, false, n, a, io)
            }
        }
        Kind::Byte => int_dispatch(op, 1, false, n, a, io),
        Kind::Float(Fl::F32) => float_op::<f32>(op, n, a, io),
        Kind::Float(Fl::F64) => float_op::<f64>(op, n, a, io),
        Kind::Float(_) => ld::float_op(op, n, a, io),
        Kind::Complex(Fl::F32) => complex_op::<f32>(op, n, a, io),
        Kind::Complex(Fl::F64) => complex_op::<f64>(op, n, a, io),
        Kind::Complex(_) => ld::complex_op(op, n, a, io),
        Kind::Pair(..) => loc_op(op == BuiltinOp::MaxLoc, b, n, a, io),
        Kind::None => {}
    }
    Ok(())
}

/// A kernel of [`apply_basic`] for one basic type: `io = a op io` over `n` packed elements.
pub(crate) type Kernel = unsafe fn(BuiltinOp, usize, *const u8, *mut u8);

/// The kernel [`apply_basic`] runs for `op` on `b`, resolved once (for callers that apply the
/// same operation often, to few elements: the one-sided fast path): the integer, byte and
/// `float`/`double` kernels; `None` for every other case (and for an operation not defined on
/// `b`), which [`apply_basic`] itself serves.
pub(crate) fn kernel(op: BuiltinOp, b: Basic) -> Option<Kernel> {
    if !op.supports(b) || !available(op, b) || matches!(op, BuiltinOp::NoOp | BuiltinOp::Replace) {
        return None;
    }
    let int = |size: usize, signed: bool| -> Option<Kernel> {
        Some(match (size, signed) {
            (1, true) => int_op::<i8>,
            (1, false) => int_op::<u8>,
            (2, true) => int_op::<i16>,
            (2, false) => int_op::<u16>,
            (4, true) => int_op::<i32>,
            (4, false) => int_op::<u32>,
            (8, true) => int_op::<i64>,
            (8, false) => int_op::<u64>,
            _ => return None,
        })
    };
    match kind(b) {
        Kind::Int { size, signed, .. } => int(size, signed),
        Kind::Byte => int(1, false),
        Kind::Float(Fl::F32) => Some(wide::float::<f32>().unwrap_or(float_op::<f32>)),
        Kind::Float(Fl::F64) => Some(wide::float::<f64>().unwrap_or(float_op::<f64>)),
        _ => None,
    }
}

/// [`float_op`] compiled for AVX2 (4 doubles or 8 floats per instruction instead of SSE2's 2
/// and 4), where the processor has it: the same operations in the same order on each element,
/// so the same results.
mod wide {
    use super::{BuiltinOp, Kernel, Real};

    /// The AVX2 kernel, when this processor runs it.
    pub(super) fn float<T: Real>() -> Option<Kernel> {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            return Some(avx2::<T>);
        }
        None
    }

    /// # Safety
    /// As [`super::float_op`]; the processor has AVX2 ([`float`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn avx2<T: Real>(op: BuiltinOp, n: usize, a: *const u8, io: *mut u8) {
        // SAFETY: the caller's. `float_op` is inlined here, so its loops are compiled with
        // AVX2.
        unsafe { super::float_op::<T>(op, n, a, io) }
    }
}

/// C `long double` arithmetic: the x87 80-bit format on x86-64 (through the FPU, so results are
/// exactly those of C), `double` where `long double` is a double.
pub(super) mod ld {
    use super::{BuiltinOp, Real};
    use madmpi_datatypes::Basic;

    #[cfg(target_arch = "x86_64")]
    pub const AVAILABLE: bool = true;
    #[cfg(not(target_arch = "x86_64"))]
    pub const AVAILABLE: bool = false;

    /// One `long double` in its 16-byte slot.
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    pub struct F80([u8; 16]);

    pub unsafe fn load(p: *const u8) -> F80 {
        let mut v = F80([0; 16]);
        let n = Basic::LongDouble.size().min(16);
        std::ptr::copy_nonoverlapping(p, v.0.as_mut_ptr(), n);
        v
    }

    unsafe fn store(p: *mut u8, v: F80) {
        let n = Basic::LongDouble.size().min(16);
        std::ptr::copy_nonoverlapping(v.0.as_ptr(), p, n);
    }

    #[cfg(target_arch = "x86_64")]
    mod fpu {
        use super::F80;
        use std::arch::asm;

        macro_rules! binop {
            ($name:ident, $insn:literal) => {
                pub fn $name(a: F80, b: F80) -> F80 {
                    let mut r = F80([0; 16]);
                    // SAFETY: the three pointers are to live 16-byte slots; the x87 stack is
                    // left as found (two loads, one popping op, one popping store).
                    unsafe {
                        asm!(
                            "fld tbyte ptr [{a}]",
                            "fld tbyte ptr [{b}]",
                            $insn,
                            "fstp tbyte ptr [{r}]",
                            a = in(reg) a.0.as_ptr(),
                            b = in(reg) b.0.as_ptr(),
                            r = in(reg) r.0.as_mut_ptr(),
                            out("st(0)") _,
                            out("st(1)") _,
                            options(nostack),
                        );
                    }
                    r
                }
            };
        }
        // After the loads st(1) = a, st(0) = b; each computes st(1) = st(1) op st(0) and pops.
        binop!(add, "faddp st(1), st");
        binop!(sub, "fsubp st(1), st");
        binop!(mul, "fmulp st(1), st");

        pub fn lt(a: F80, b: F80) -> bool {
            let below: u8;
            let parity: u8;
            // SAFETY: as above; fcomip pops one value, fstp the other.
            unsafe {
                asm!(
                    "fld tbyte ptr [{b}]",
                    "fld tbyte ptr [{a}]",
                    "fcomip st, st(1)",
                    "fstp st(0)",
                    "setb {lt}",
                    "setp {p}",
                    a = in(reg) a.0.as_ptr(),
                    b = in(reg) b.0.as_ptr(),
                    lt = out(reg_byte) below,
                    p = out(reg_byte) parity,
                    out("st(0)") _,
                    out("st(1)") _,
                    options(nostack),
                );
            }
            below != 0 && parity == 0
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    mod fpu {
        use super::F80;
        fn get(a: F80) -> f64 {
            f64::from_ne_bytes(a.0[..8].try_into().unwrap_or([0; 8]))
        }
        fn put(x: f64) -> F80 {
            let mut r = F80([0; 16]);
            r.0[..8].copy_from_slice(&x.to_ne_bytes());
            r
        }
        pub fn add(a: F80, b: F80) -> F80 {
            put(get(a) + get(b))
        }
        pub fn sub(a: F80, b: F80) -> F80 {
            put(get(a) - get(b))
        }
        pub fn mul(a: F80, b: F80) -> F80 {
            put(get(a) * get(b))
        }
        pub fn lt(a: F80, b: F80) -> bool {
            get(a) < get(b)
        }
    }

    impl Real for F80 {
        fn add(self, o: Self) -> Self {
            fpu::add(self, o)
        }
        fn sub(self, o: Self) -> Self {
            fpu::sub(self, o)
        }
        fn mul(self, o: Self) -> Self {
            fpu::mul(self, o)
        }
        fn lt(self, o: Self) -> bool {
            fpu::lt(self, o)
        }
    }

    fn combine(op: BuiltinOp, x: F80, y: F80) -> F80 {
        match op {
            BuiltinOp::Sum => x.add(y),
            BuiltinOp::Prod => x.mul(y),
            BuiltinOp::Min => {
                if x.lt(y) {
                    x
                } else {
                    y
                }
            }
            BuiltinOp::Max => {
                if y.lt(x) {
                    x
                } else {
                    y
                }
            }
            _ => y,
        }
    }

    pub unsafe fn float_op(op: BuiltinOp, n: usize, a: *const u8, io: *mut u8) {
        let s = Basic::LongDouble.size();
        for i in 0..n {
            let r = combine(op, load(a.add(i * s)), load(io.add(i * s)));
            store(io.add(i * s), r);
        }
    }

    pub unsafe fn complex_op(op: BuiltinOp, n: usize, a: *const u8, io: *mut u8) {
        let s = Basic::LongDouble.size();
        for i in 0..n {
            let (pa, pb) = (a.add(2 * i * s), io.add(2 * i * s));
            let (ar, ai) = (load(pa), load(pa.add(s)));
            let (br, bi) = (load(pb), load(pb.add(s)));
            let (r, im) = match op {
                BuiltinOp::Sum => (ar.add(br), ai.add(bi)),
                BuiltinOp::Prod => (ar.mul(br).sub(ai.mul(bi)), ar.mul(bi).add(ai.mul(br))),
                _ => (br, bi),
            };
            store(pb, r);
            store(pb.add(s), im);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernels resolved once (the one-sided fast path's, AVX2 ones included) give the
    /// bytes `apply_basic` gives, for every operation on the types they cover.
    #[test]
    fn resolved_kernels_match_apply_basic() {
        let types = [
            Basic::Double,
            Basic::Float,
            Basic::Int,
            Basic::UnsignedLong,
            Basic::Char,
            Basic::Short,
            Basic::Byte,
        ];
        for b in types {
            for op in BuiltinOp::ALL {
                let Some(k) = kernel(op, b) else {
                    continue;
                };
                let es = b.size();
                // 37 elements: vector loops and their tails; values with signs, NaN-free.
                let n = 37;
                let a: Vec<u8> = (0..n * es).map(|i| (i * 37 + 11) as u8 & 0x7e).collect();
                let io: Vec<u8> = (0..n * es).map(|i| (i * 53 + 5) as u8 & 0x3f).collect();
                let (mut x, mut y) = (io.clone(), io.clone());
                // SAFETY: `n` elements in each buffer (byte buffers: unaligned access).
                unsafe {
                    k(op, n, a.as_ptr(), x.as_mut_ptr());
                    apply_basic(op, b, n, a.as_ptr(), y.as_mut_ptr()).unwrap();
                }
                assert_eq!(x, y, "{op:?} on {b:?}");
            }
        }
    }

    fn bytes<T: Copy>(v: &[T]) -> Vec<u8> {
        let mut out = vec![0u8; std::mem::size_of_val(v)];
        // SAFETY: plain-old-data copy into a buffer of the same size.
        unsafe {
            std::ptr::copy_nonoverlapping(v.as_ptr() as *const u8, out.as_mut_ptr(), out.len())
        };
        out
    }

    fn run<T: Copy>(op: BuiltinOp, b: Basic, a: &[T], io: &[T]) -> Vec<T> {
        let ab = bytes(a);
        let mut iob = bytes(io);
        // SAFETY: both buffers hold a.len() elements of b.
        unsafe { apply_basic(op, b, a.len(), ab.as_ptr(), iob.as_mut_ptr()).unwrap() };
        let mut out = io.to_vec();
        // SAFETY: as above, back into typed values.
        unsafe {
            std::ptr::copy_nonoverlapping(iob.as_ptr(), out.as_mut_ptr() as *mut u8, iob.len())
        };
        out
    }

    #[test]
    fn integer_ops() {
        use BuiltinOp::*;
        assert_eq!(run(Sum, Basic::Int, &[1i32, -2], &[3, 4]), vec![4, 2]);
        assert_eq!(run(Prod, Basic::Int, &[2i32, -2], &[3, 4]), vec![6, -8]);
        assert_eq!(run(Min, Basic::Int, &[2i32, -2], &[3, -4]), vec![2, -4]);
        assert_eq!(
            run(Max, Basic::Unsigned, &[2u32, u32::MAX], &[3, 4]),
            vec![3, u32::MAX]
        );
        assert_eq!(run(Land, Basic::Int, &[2i32, 0], &[3, 4]), vec![1, 0]);
        assert_eq!(run(Lxor, Basic::Int, &[2i32, 0], &[3, 4]), vec![0, 1]);
        assert_eq!(run(Bxor, Basic::Byte, &[0x0fu8], &[0xff]), vec![0xf0]);
        assert!(!Sum.supports(Basic::Byte));
        assert!(!Land.supports(Basic::Float));
        assert!(!Land.supports(Basic::Integer));
        assert!(Band.supports(Basic::Integer));
    }

    #[test]
    fn long_double_matches_the_fpu() {
        if !ld::AVAILABLE {
            return;
        }
        // 1.5 and 2.25 as x87 extended values, computed through f64 loads on the FPU.
        fn ext(x: f64) -> [u8; 16] {
            let mut out = [0u8; 16];
            #[cfg(target_arch = "x86_64")]
            // SAFETY: loads a double and stores it as an 80-bit value into `out`.
            unsafe {
                std::arch::asm!(
                    "fld qword ptr [{x}]", "fstp tbyte ptr [{o}]",
                    x = in(reg) &x, o = in(reg) out.as_mut_ptr(),
                    out("st(0)") _, options(nostack)
                );
            }
            out
        }
        let a = ext(1.5);
        let b = ext(2.25);
        let mut io = b;
        // SAFETY: 16-byte slots.
        unsafe {
            apply_basic(
                BuiltinOp::Sum,
                Basic::LongDouble,
                1,
                a.as_ptr(),
                io.as_mut_ptr(),
            )
            .unwrap()
        };
        assert_eq!(io[..10], ext(3.75)[..10]);
        let mut io = b;
        // SAFETY: as above.
        unsafe {
            apply_basic(
                BuiltinOp::Min,
                Basic::LongDouble,
                1,
                a.as_ptr(),
                io.as_mut_ptr(),
            )
            .unwrap()
        };
        assert_eq!(io[..10], a[..10]);
        let mut z = [0u8; 64];
        z[..16].copy_from_slice(&ext(1.0));
        z[16..32].copy_from_slice(&ext(2.0));
        z[32..48].copy_from_slice(&ext(3.0));
        z[48..64].copy_from_slice(&ext(4.0));
        let (x, y) = z.split_at_mut(32);
        // (1+2i)(3+4i) = -5+10i
        // SAFETY: one complex long double each.
        unsafe {
            apply_basic(
                BuiltinOp::Prod,
                Basic::CLongDoubleComplex,
                1,
                x.as_ptr(),
                y.as_mut_ptr(),
            )
            .unwrap()
        };
        assert_eq!(y[..10], ext(-5.0)[..10]);
        assert_eq!(y[16..26], ext(10.0)[..10]);
    }

    #[test]
    fn minloc_ties_take_the_smaller_index() {
        let pair = |v: f64, i: i32| {
            let mut b = vec![0u8; 12];
            b[..8].copy_from_slice(&v.to_ne_bytes());
            b[8..].copy_from_slice(&i.to_ne_bytes());
            b
        };
        let a = pair(1.0, 7);
        let mut io = pair(1.0, 3);
        // SAFETY: one packed DOUBLE_INT each.
        unsafe {
            apply_basic(
                BuiltinOp::MinLoc,
                Basic::DoubleInt,
                1,
                a.as_ptr(),
                io.as_mut_ptr(),
            )
            .unwrap()
        };
        assert_eq!(io, pair(1.0, 3));
        let a = pair(0.5, 9);
        // SAFETY: as above.
        unsafe {
            apply_basic(
                BuiltinOp::MinLoc,
                Basic::DoubleInt,
                1,
                a.as_ptr(),
                io.as_mut_ptr(),
            )
            .unwrap()
        };
        assert_eq!(io, pair(0.5, 9));
        let a = pair(0.5, 2);
        // SAFETY: as above.
        unsafe {
            apply_basic(
                BuiltinOp::MaxLoc,
                Basic::DoubleInt,
                1,
                a.as_ptr(),
                io.as_mut_ptr(),
            )
            .unwrap()
        };
        assert_eq!(io, pair(0.5, 2));
    }
}
