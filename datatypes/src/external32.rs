//! `external32`: big-endian, fixed sizes (MPI-4 §13.5.2). Conversion of runs of scalars between
//! the native and the external representation, on byte slices.
//!
//! Safe code only: `raw` hands in slices of user memory. Integers whose native and external
//! sizes differ are sign- or zero-extended (and rejected with [`Error::Conversion`] when they do
//! not fit); `long double` is converted to and from IEEE binary128.

#![forbid(unsafe_code)]

use std::mem::size_of;

use crate::basic::{Conv, LongDoubleFormat, LONG_DOUBLE_FORMAT};
use crate::error::{Error, Result};

/// Native bytes of one unit.
pub(crate) fn native_unit(conv: Conv) -> usize {
    match conv {
        Conv::Byte => 1,
        Conv::Int { native, .. } => native as usize,
        Conv::Float { n } => n as usize,
        Conv::LongDouble => crate::basic::Basic::LongDouble.size(),
    }
}

/// Reverses each `n`-byte unit of `src` into `dst` (or copies on a big-endian host).
fn to_big_endian(n: usize, src: &[u8], dst: &mut [u8]) {
    if cfg!(target_endian = "big") || n == 1 {
        dst.copy_from_slice(src);
        return;
    }
    macro_rules! swap {
        ($t:ty) => {
            for (s, d) in src
                .chunks_exact(size_of::<$t>())
                .zip(dst.chunks_exact_mut(size_of::<$t>()))
            {
                let mut a = [0u8; size_of::<$t>()];
                a.copy_from_slice(s);
                d.copy_from_slice(&<$t>::from_ne_bytes(a).swap_bytes().to_ne_bytes());
            }
        };
    }
    match n {
        2 => swap!(u16),
        4 => swap!(u32),
        8 => swap!(u64),
        16 => swap!(u128),
        _ => {
            for (s, d) in src.chunks_exact(n).zip(dst.chunks_exact_mut(n)) {
                for (i, b) in s.iter().rev().enumerate() {
                    d[i] = *b;
                }
            }
        }
    }
}

fn read_int_ne(bytes: &[u8], signed: bool) -> i128 {
    let mut v: u128 = 0;
    let n = bytes.len();
    for i in 0..n {
        let b = if cfg!(target_endian = "little") {
            bytes[n - 1 - i]
        } else {
            bytes[i]
        };
        v = (v << 8) | b as u128;
    }
    if signed && n < 16 && (v >> (8 * n - 1)) & 1 == 1 {
        v |= !0u128 << (8 * n);
    }
    v as i128
}

fn fits(v: i128, n: usize, signed: bool) -> bool {
    if n >= 16 {
        return true;
    }
    let bits = 8 * n as u32;
    if signed {
        let min = -(1i128 << (bits - 1));
        let max = (1i128 << (bits - 1)) - 1;
        (min..=max).contains(&v)
    } else {
        v >= 0 && v < (1i128 << bits)
    }
}

/// Converts `units` native units in `src` to external units in `dst`.
pub(crate) fn encode(conv: Conv, src: &[u8], dst: &mut [u8]) -> Result<()> {
    match conv {
        Conv::Byte => dst.copy_from_slice(src),
        Conv::Float { n } => to_big_endian(n as usize, src, dst),
        Conv::Int {
            signed,
            native,
            ext,
        } if native == ext => {
            let _ = signed;
            to_big_endian(native as usize, src, dst)
        }
        Conv::Int {
            signed,
            native,
            ext,
        } => {
            let (native, ext) = (native as usize, ext as usize);
            for (s, d) in src.chunks_exact(native).zip(dst.chunks_exact_mut(ext)) {
                let v = read_int_ne(s, signed);
                if !fits(v, ext, signed) {
                    return Err(Error::Conversion(format!(
                        "integer {v} does not fit {ext} bytes"
                    )));
                }
                let be = (v as u128).to_be_bytes();
                d.copy_from_slice(&be[16 - ext..]);
            }
        }
        Conv::LongDouble => {
            let n = native_unit(conv);
            for (s, d) in src.chunks_exact(n).zip(dst.chunks_exact_mut(16)) {
                d.copy_from_slice(&long_double_to_binary128(s)?.to_be_bytes());
            }
        }
    }
    Ok(())
}

/// Converts external units in `src` to native units in `dst`.
pub(crate) fn decode(conv: Conv, src: &[u8], dst: &mut [u8]) -> Result<()> {
    match conv {
        Conv::Byte => dst.copy_from_slice(src),
        Conv::Float { n } => to_big_endian(n as usize, src, dst),
        Conv::Int { native, ext, .. } if native == ext => to_big_endian(native as usize, src, dst),
        Conv::Int {
            signed,
            native,
            ext,
        } => {
            let (native, ext) = (native as usize, ext as usize);
            for (s, d) in src.chunks_exact(ext).zip(dst.chunks_exact_mut(native)) {
                let mut v: u128 = 0;
                for &b in s {
                    v = (v << 8) | b as u128;
                }
                let mut v = v as i128;
                if signed && ext < 16 && (v >> (8 * ext - 1)) & 1 == 1 {
                    v |= -1i128 << (8 * ext);
                }
                if !fits(v, native, signed) {
                    return Err(Error::Conversion(format!(
                        "external integer {v} does not fit the native {native} bytes"
                    )));
                }
                let ne = (v as u128).to_ne_bytes();
                if cfg!(target_endian = "little") {
                    d.copy_from_slice(&ne[..native]);
                } else {
                    d.copy_from_slice(&ne[16 - native..]);
                }
            }
        }
        Conv::LongDouble => {
            let n = native_unit(conv);
            for (s, d) in src.chunks_exact(16).zip(dst.chunks_exact_mut(n)) {
                let mut a = [0u8; 16];
                a.copy_from_slice(s);
                binary128_to_long_double(u128::from_be_bytes(a), d)?;
            }
        }
    }
    Ok(())
}

fn long_double_to_binary128(native: &[u8]) -> Result<u128> {
    match LONG_DOUBLE_FORMAT {
        LongDoubleFormat::X87 => {
            let mut ten = [0u8; 10];
            ten.copy_from_slice(&native[..10]);
            Ok(x87_to_binary128(ten))
        }
        LongDoubleFormat::Binary128 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&native[..16]);
            Ok(u128::from_ne_bytes(a))
        }
        LongDoubleFormat::Double => {
            let mut a = [0u8; 8];
            a.copy_from_slice(&native[..8]);
            Ok(f64_to_binary128(f64::from_ne_bytes(a)))
        }
        LongDoubleFormat::DoubleDouble => Err(Error::Conversion(
            "IBM double-double long double has no external32 conversion".into(),
        )),
    }
}

fn binary128_to_long_double(q: u128, native: &mut [u8]) -> Result<()> {
    match LONG_DOUBLE_FORMAT {
        LongDoubleFormat::X87 => {
            native.fill(0);
            native[..10].copy_from_slice(&binary128_to_x87(q));
        }
        LongDoubleFormat::Binary128 => native[..16].copy_from_slice(&q.to_ne_bytes()),
        LongDoubleFormat::Double => native[..8].copy_from_slice(&binary128_to_f64(q).to_ne_bytes()),
        LongDoubleFormat::DoubleDouble => {
            return Err(Error::Conversion(
                "IBM double-double long double has no external32 conversion".into(),
            ))
        }
    }
    Ok(())
}

const Q_FRAC_BITS: u32 = 112;
const Q_EXP_MAX: u128 = 0x7fff;

/// Right shift with round-half-to-even.
fn round_shift(m: u128, s: u32) -> u128 {
    if s == 0 {
        return m;
    }
    if s >= 128 {
        return 0;
    }
    let q = m >> s;
    let rem = m & ((1u128 << s) - 1);
    let half = 1u128 << (s - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// x87 80-bit extended (little-endian: 64-bit significand with explicit integer bit, then sign
/// and 15-bit exponent) → binary128 bits. Exact.
pub(crate) fn x87_to_binary128(b: [u8; 10]) -> u128 {
    let mut m = [0u8; 8];
    m.copy_from_slice(&b[..8]);
    let mant = u64::from_le_bytes(m);
    let se = u16::from_le_bytes([b[8], b[9]]);
    let sign = (se >> 15) as u128;
    let mut exp = (se & 0x7fff) as u128;
    let frac = ((mant & 0x7fff_ffff_ffff_ffff) as u128) << 49;
    if exp == 0 && mant >> 63 == 1 {
        // pseudo-denormal: the same value as exponent 1
        exp = 1;
    }
    (sign << 127) | (exp << Q_FRAC_BITS) | frac
}

/// binary128 bits → x87 80-bit extended, rounding to nearest even.
pub(crate) fn binary128_to_x87(q: u128) -> [u8; 10] {
    let sign = (q >> 127) as u16;
    let mut exp = ((q >> Q_FRAC_BITS) & Q_EXP_MAX) as u16;
    let frac = q & ((1u128 << Q_FRAC_BITS) - 1);
    let mant: u64 = if exp == 0x7fff {
        if frac == 0 {
            1 << 63
        } else {
            // NaN: keep the top payload bits and stay a NaN
            let m = (frac >> 49) as u64;
            (1 << 63) | if m == 0 { 1 << 62 } else { m }
        }
    } else {
        let r = round_shift(frac, 49) as u64; // up to 2^63
        if exp == 0 {
            // subnormal in both formats; rounding may carry into the integer bit (normal)
            if r >> 63 == 1 {
                exp = 1;
            }
            r
        } else if r >> 63 == 1 {
            // rounding carried out of the fraction
            // (an exponent reaching 0x7fff makes this the infinity encoding)
            exp += 1;
            1 << 63
        } else {
            (1 << 63) | r
        }
    };
    let mut out = [0u8; 10];
    out[..8].copy_from_slice(&mant.to_le_bytes());
    out[8..].copy_from_slice(&((sign << 15) | exp).to_le_bytes());
    out
}

/// `f64` → binary128 bits. Exact.
pub(crate) fn f64_to_binary128(x: f64) -> u128 {
    let bits = x.to_bits();
    let sign = (bits >> 63) as u128;
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let frac = (bits & ((1 << 52) - 1)) as u128;
    let (e, f) = if exp == 0x7ff {
        (Q_EXP_MAX, frac << 60)
    } else if exp == 0 {
        if frac == 0 {
            (0, 0)
        } else {
            // normalize the subnormal
            let lead = 127 - frac.leading_zeros() as i64; // index of the top set bit (< 52)
            let e = -1022 - (52 - lead) + 16383;
            let f = (frac << (Q_FRAC_BITS as i64 - lead)) & ((1u128 << Q_FRAC_BITS) - 1);
            (e as u128, f)
        }
    } else {
        ((exp - 1023 + 16383) as u128, frac << 60)
    };
    (sign << 127) | (e << Q_FRAC_BITS) | f
}

/// binary128 bits → `f64`, rounding to nearest even.
pub(crate) fn binary128_to_f64(q: u128) -> f64 {
    let sign = ((q >> 127) as u64) << 63;
    let exp = ((q >> Q_FRAC_BITS) & Q_EXP_MAX) as i64;
    let frac = q & ((1u128 << Q_FRAC_BITS) - 1);
    if exp == 0x7fff {
        let nan = if frac == 0 {
            0
        } else {
            ((frac >> 60) as u64) | (1 << 51)
        };
        return f64::from_bits(sign | (0x7ff << 52) | nan);
    }
    if exp == 0 {
        return f64::from_bits(sign); // far below the f64 range
    }
    let e = exp - 16383 + 1023;
    if e >= 0x7ff {
        return f64::from_bits(sign | (0x7ff << 52));
    }
    let sig = (1u128 << Q_FRAC_BITS) | frac; // 113 bits
    if e >= 1 {
        let r = round_shift(sig, 60) as u64; // 53 bits, maybe 2^53 after rounding
        let (e, r) = if r >> 53 == 1 {
            (e + 1, r >> 1)
        } else {
            (e, r)
        };
        if e >= 0x7ff {
            return f64::from_bits(sign | (0x7ff << 52));
        }
        return f64::from_bits(sign | ((e as u64) << 52) | (r & ((1 << 52) - 1)));
    }
    // subnormal result: value = sig * 2^(exp - 16383 - 112); f64 subnormal unit is 2^-1074
    let shift = 60 + (1 - e);
    if shift >= 128 {
        return f64::from_bits(sign);
    }
    let r = round_shift(sig, shift as u32) as u64; // may round up to the smallest normal
    f64::from_bits(sign | r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x87_of(x: f64) -> [u8; 10] {
        // exact for normal doubles
        let bits = x.to_bits();
        let sign = (bits >> 63) as u16;
        let exp = ((bits >> 52) & 0x7ff) as u16;
        let frac = bits & ((1 << 52) - 1);
        let mut out = [0u8; 10];
        let (e, m) = if exp == 0 && frac == 0 {
            (0, 0)
        } else {
            (
                (exp as i32 - 1023 + 16383) as u16,
                (1u64 << 63) | (frac << 11),
            )
        };
        out[..8].copy_from_slice(&m.to_le_bytes());
        out[8..].copy_from_slice(&((sign << 15) | e).to_le_bytes());
        out
    }

    #[test]
    fn f64_binary128_round_trip() {
        for x in [
            0.0,
            -0.0,
            1.0,
            -2.5,
            std::f64::consts::PI,
            f64::MAX,
            f64::MIN_POSITIVE,
            5e-324,
            1e-310,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ] {
            let q = f64_to_binary128(x);
            assert_eq!(binary128_to_f64(q).to_bits(), x.to_bits(), "{x}");
        }
        assert!(binary128_to_f64(f64_to_binary128(f64::NAN)).is_nan());
        // 1.0 in binary128
        assert_eq!(f64_to_binary128(1.0), 0x3fff_u128 << 112);
    }

    #[test]
    fn x87_binary128_round_trip() {
        for x in [1.0, -2.5, std::f64::consts::E, 1e300, -1e-300, 0.0] {
            let t = x87_of(x);
            let q = x87_to_binary128(t);
            assert_eq!(q, f64_to_binary128(x), "{x}");
            assert_eq!(binary128_to_x87(q), t, "{x}");
        }
        // rounding: a binary128 value just above 1 rounds to 1 in x87
        let q = (0x3fff_u128 << 112) | 1;
        assert_eq!(binary128_to_x87(q), x87_of(1.0));
        // all-ones fraction rounds up to the next power of two
        let q = (0x3fff_u128 << 112) | ((1u128 << 112) - 1);
        assert_eq!(binary128_to_x87(q), x87_of(2.0));
    }

    #[test]
    fn integers_resize_with_sign() {
        let c = Conv::Int {
            signed: true,
            native: 4,
            ext: 8,
        };
        let mut out = [0u8; 8];
        encode(c, &(-2i32).to_ne_bytes(), &mut out).unwrap();
        assert_eq!(out, (-2i64).to_be_bytes());
        let mut back = [0u8; 4];
        decode(c, &out, &mut back).unwrap();
        assert_eq!(i32::from_ne_bytes(back), -2);
        assert!(decode(c, &(1i64 << 40).to_be_bytes(), &mut back).is_err());
        let c = Conv::Int {
            signed: false,
            native: 8,
            ext: 4,
        };
        let mut out = [0u8; 4];
        assert!(encode(c, &u64::MAX.to_ne_bytes(), &mut out).is_err());
        encode(c, &7u64.to_ne_bytes(), &mut out).unwrap();
        assert_eq!(out, 7u32.to_be_bytes());
    }
}
