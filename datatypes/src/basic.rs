//! The predefined (named) MPI datatypes: their C sizes and alignments on this platform, their
//! names, and their `external32` representation.
//!
//! This module owns the platform facts (how big a C `long` or `long double` is) and nothing else;
//! it never touches user memory.

#![forbid(unsafe_code)]

use std::ffi::{c_int, c_long, c_longlong, c_short};
use std::mem::{align_of, size_of};

/// A predefined MPI datatype.
///
/// The pair types (`FloatInt` … `TwoInteger`) have the layout of the corresponding C struct
/// (e.g. `DoubleInt` is `struct { double; int; }`: size 12, extent 16, a 4-byte gap at the end)
/// and count as two basic elements each.
#[allow(missing_docs)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Basic {
    Char,
    SignedChar,
    UnsignedChar,
    Byte,
    Short,
    UnsignedShort,
    Int,
    Unsigned,
    Long,
    UnsignedLong,
    LongLong,
    UnsignedLongLong,
    Float,
    Double,
    LongDouble,
    WChar,
    CBool,
    Int8,
    Int16,
    Int32,
    Int64,
    UInt8,
    UInt16,
    UInt32,
    UInt64,
    Aint,
    Offset,
    Count,
    CFloatComplex,
    CDoubleComplex,
    CLongDoubleComplex,
    CxxBool,
    CxxFloatComplex,
    CxxDoubleComplex,
    CxxLongDoubleComplex,
    Packed,
    // Fortran
    Logical,
    Integer,
    Real,
    DoublePrecision,
    Complex,
    DoubleComplex,
    Character,
    Logical1,
    Logical2,
    Logical4,
    Logical8,
    Logical16,
    Integer1,
    Integer2,
    Integer4,
    Integer8,
    Integer16,
    Real2,
    Real4,
    Real8,
    Real16,
    Complex4,
    Complex8,
    Complex16,
    Complex32,
    // pair types
    FloatInt,
    DoubleInt,
    LongInt,
    TwoInt,
    ShortInt,
    LongDoubleInt,
    TwoReal,
    TwoDoublePrecision,
    TwoInteger,
}

/// The class of a scalar, as used by `MPI_Type_match_size` and by the external32 conversion.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TypeClass {
    /// Signed or unsigned integers (and characters, booleans, bytes).
    Integer,
    /// Floating point.
    Real,
    /// Complex floating point (a pair of reals).
    Complex,
    /// Fortran `LOGICAL` (`MPIX_TYPECLASS_LOGICAL`).
    Logical,
}

/// How one scalar unit of a basic type is converted to and from `external32`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Conv {
    /// Single bytes, copied as they are.
    Byte,
    /// An integer of `native` bytes stored as a big-endian integer of `ext` bytes.
    Int { signed: bool, native: u8, ext: u8 },
    /// An IEEE float of `n` bytes: byte order only.
    Float { n: u8 },
    /// C `long double` → IEEE binary128.
    LongDouble,
}

#[cfg(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64",
    target_arch = "powerpc64",
    target_arch = "s390x",
    target_arch = "loongarch64"
))]
mod ld {
    pub const SIZE: usize = 16;
    pub const ALIGN: usize = 16;
}
#[cfg(target_arch = "x86")]
mod ld {
    pub const SIZE: usize = 12;
    pub const ALIGN: usize = 4;
}
#[cfg(not(any(
    target_arch = "x86_64",
    target_arch = "aarch64",
    target_arch = "riscv64",
    target_arch = "powerpc64",
    target_arch = "s390x",
    target_arch = "loongarch64",
    target_arch = "x86"
)))]
mod ld {
    pub const SIZE: usize = 8;
    pub const ALIGN: usize = 8;
}

/// Representation of the C `long double` on this target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LongDoubleFormat {
    /// x87 80-bit extended precision, padded.
    X87,
    /// IEEE binary128.
    Binary128,
    /// Same as `double`.
    Double,
    /// IBM double-double (not convertible here).
    DoubleDouble,
}

pub(crate) const LONG_DOUBLE_FORMAT: LongDoubleFormat =
    if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
        LongDoubleFormat::X87
    } else if cfg!(target_arch = "powerpc64") {
        LongDoubleFormat::DoubleDouble
    } else if ld::SIZE == 16 {
        LongDoubleFormat::Binary128
    } else {
        LongDoubleFormat::Double
    };

const WCHAR_SIZE: usize = if cfg!(windows) { 2 } else { 4 };

impl Basic {
    /// Every predefined type, in declaration order.
    pub const ALL: [Basic; 70] = [
        Basic::Char,
        Basic::SignedChar,
        Basic::UnsignedChar,
        Basic::Byte,
        Basic::Short,
        Basic::UnsignedShort,
        Basic::Int,
        Basic::Unsigned,
        Basic::Long,
        Basic::UnsignedLong,
        Basic::LongLong,
        Basic::UnsignedLongLong,
        Basic::Float,
        Basic::Double,
        Basic::LongDouble,
        Basic::WChar,
        Basic::CBool,
        Basic::Int8,
        Basic::Int16,
        Basic::Int32,
        Basic::Int64,
        Basic::UInt8,
        Basic::UInt16,
        Basic::UInt32,
        Basic::UInt64,
        Basic::Aint,
        Basic::Offset,
        Basic::Count,
        Basic::CFloatComplex,
        Basic::CDoubleComplex,
        Basic::CLongDoubleComplex,
        Basic::CxxBool,
        Basic::CxxFloatComplex,
        Basic::CxxDoubleComplex,
        Basic::CxxLongDoubleComplex,
        Basic::Packed,
        Basic::Logical,
        Basic::Integer,
        Basic::Real,
        Basic::DoublePrecision,
        Basic::Complex,
        Basic::DoubleComplex,
        Basic::Character,
        Basic::Logical1,
        Basic::Logical2,
        Basic::Logical4,
        Basic::Logical8,
        Basic::Logical16,
        Basic::Integer1,
        Basic::Integer2,
        Basic::Integer4,
        Basic::Integer8,
        Basic::Integer16,
        Basic::Real2,
        Basic::Real4,
        Basic::Real8,
        Basic::Real16,
        Basic::Complex4,
        Basic::Complex8,
        Basic::Complex16,
        Basic::Complex32,
        Basic::FloatInt,
        Basic::DoubleInt,
        Basic::LongInt,
        Basic::TwoInt,
        Basic::ShortInt,
        Basic::LongDoubleInt,
        Basic::TwoReal,
        Basic::TwoDoublePrecision,
        Basic::TwoInteger,
    ];

    /// Position in [`Basic::ALL`].
    #[inline]
    pub fn index(self) -> usize {
        self as usize
    }

    /// The MPI name, e.g. `"MPI_DOUBLE_INT"`.
    pub fn mpi_name(self) -> &'static str {
        use Basic::*;
        match self {
            Char => "MPI_CHAR",
            SignedChar => "MPI_SIGNED_CHAR",
            UnsignedChar => "MPI_UNSIGNED_CHAR",
            Byte => "MPI_BYTE",
            Short => "MPI_SHORT",
            UnsignedShort => "MPI_UNSIGNED_SHORT",
            Int => "MPI_INT",
            Unsigned => "MPI_UNSIGNED",
            Long => "MPI_LONG",
            UnsignedLong => "MPI_UNSIGNED_LONG",
            LongLong => "MPI_LONG_LONG",
            UnsignedLongLong => "MPI_UNSIGNED_LONG_LONG",
            Float => "MPI_FLOAT",
            Double => "MPI_DOUBLE",
            LongDouble => "MPI_LONG_DOUBLE",
            WChar => "MPI_WCHAR",
            CBool => "MPI_C_BOOL",
            Int8 => "MPI_INT8_T",
            Int16 => "MPI_INT16_T",
            Int32 => "MPI_INT32_T",
            Int64 => "MPI_INT64_T",
            UInt8 => "MPI_UINT8_T",
            UInt16 => "MPI_UINT16_T",
            UInt32 => "MPI_UINT32_T",
            UInt64 => "MPI_UINT64_T",
            Aint => "MPI_AINT",
            Offset => "MPI_OFFSET",
            Count => "MPI_COUNT",
            CFloatComplex => "MPI_C_FLOAT_COMPLEX",
            CDoubleComplex => "MPI_C_DOUBLE_COMPLEX",
            CLongDoubleComplex => "MPI_C_LONG_DOUBLE_COMPLEX",
            CxxBool => "MPI_CXX_BOOL",
            CxxFloatComplex => "MPI_CXX_FLOAT_COMPLEX",
            CxxDoubleComplex => "MPI_CXX_DOUBLE_COMPLEX",
            CxxLongDoubleComplex => "MPI_CXX_LONG_DOUBLE_COMPLEX",
            Packed => "MPI_PACKED",
            Logical => "MPI_LOGICAL",
            Integer => "MPI_INTEGER",
            Real => "MPI_REAL",
            DoublePrecision => "MPI_DOUBLE_PRECISION",
            Complex => "MPI_COMPLEX",
            DoubleComplex => "MPI_DOUBLE_COMPLEX",
            Character => "MPI_CHARACTER",
            Logical1 => "MPI_LOGICAL1",
            Logical2 => "MPI_LOGICAL2",
            Logical4 => "MPI_LOGICAL4",
            Logical8 => "MPI_LOGICAL8",
            Logical16 => "MPI_LOGICAL16",
            Integer1 => "MPI_INTEGER1",
            Integer2 => "MPI_INTEGER2",
            Integer4 => "MPI_INTEGER4",
            Integer8 => "MPI_INTEGER8",
            Integer16 => "MPI_INTEGER16",
            Real2 => "MPI_REAL2",
            Real4 => "MPI_REAL4",
            Real8 => "MPI_REAL8",
            Real16 => "MPI_REAL16",
            Complex4 => "MPI_COMPLEX4",
            Complex8 => "MPI_COMPLEX8",
            Complex16 => "MPI_COMPLEX16",
            Complex32 => "MPI_COMPLEX32",
            FloatInt => "MPI_FLOAT_INT",
            DoubleInt => "MPI_DOUBLE_INT",
            LongInt => "MPI_LONG_INT",
            TwoInt => "MPI_2INT",
            ShortInt => "MPI_SHORT_INT",
            LongDoubleInt => "MPI_LONG_DOUBLE_INT",
            TwoReal => "MPI_2REAL",
            TwoDoublePrecision => "MPI_2DOUBLE_PRECISION",
            TwoInteger => "MPI_2INTEGER",
        }
    }

    /// The two members of a pair type with their offsets, or `None` for a scalar type.
    pub fn pair(self) -> Option<[(Basic, usize); 2]> {
        use Basic::*;
        let (a, b) = match self {
            FloatInt => (Float, Int),
            DoubleInt => (Double, Int),
            LongInt => (Long, Int),
            TwoInt => (Int, Int),
            ShortInt => (Short, Int),
            LongDoubleInt => (LongDouble, Int),
            TwoReal => (Real, Real),
            TwoDoublePrecision => (DoublePrecision, DoublePrecision),
            TwoInteger => (Integer, Integer),
            _ => return None,
        };
        let off_b = round_up(a.size(), b.align());
        Some([(a, 0), (b, off_b)])
    }

    /// Whether this is one of the pair types used by `MPI_MINLOC`/`MPI_MAXLOC`.
    #[inline]
    pub fn is_pair(self) -> bool {
        self.pair().is_some()
    }

    /// Bytes of data in one element (for pair types, the sum of the two members).
    pub fn size(self) -> usize {
        use Basic::*;
        match self {
            Char | SignedChar | UnsignedChar | Byte | CBool | Int8 | UInt8 | CxxBool | Packed
            | Character | Logical1 | Integer1 => 1,
            Short | UnsignedShort => size_of::<c_short>(),
            Int | Unsigned => size_of::<c_int>(),
            Long | UnsignedLong => size_of::<c_long>(),
            LongLong | UnsignedLongLong => size_of::<c_longlong>(),
            Float => 4,
            Double => 8,
            LongDouble => ld::SIZE,
            WChar => WCHAR_SIZE,
            Int16 | UInt16 | Logical2 | Integer2 | Real2 => 2,
            Int32 | UInt32 | Logical4 | Integer4 | Real4 | Complex4 => 4,
            Int64 | UInt64 | Logical8 | Integer8 | Real8 | Complex8 => 8,
            Logical16 | Integer16 | Real16 | Complex16 => 16,
            Complex32 => 32,
            Aint => size_of::<isize>(),
            Offset | Count => 8,
            CFloatComplex | CxxFloatComplex => 8,
            CDoubleComplex | CxxDoubleComplex => 16,
            CLongDoubleComplex | CxxLongDoubleComplex => 2 * ld::SIZE,
            Logical | Integer | Real => 4,
            DoublePrecision | Complex => 8,
            DoubleComplex => 16,
            FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | TwoReal
            | TwoDoublePrecision | TwoInteger => match self.pair() {
                Some([(a, _), (b, _)]) => a.size() + b.size(),
                None => 0,
            },
        }
    }

    /// Alignment of the C type (used for the struct extent padding rule).
    pub fn align(self) -> usize {
        use Basic::*;
        match self {
            Short | UnsignedShort => align_of::<c_short>(),
            Int | Unsigned => align_of::<c_int>(),
            Long | UnsignedLong => align_of::<c_long>(),
            LongLong | UnsignedLongLong => align_of::<c_longlong>(),
            LongDouble | CLongDoubleComplex | CxxLongDoubleComplex => ld::ALIGN,
            Aint => align_of::<isize>(),
            Offset | Count | Int64 | UInt64 => align_of::<i64>(),
            Double | DoublePrecision | Real8 => align_of::<f64>(),
            CFloatComplex | CxxFloatComplex | Complex => 4,
            CDoubleComplex | CxxDoubleComplex | DoubleComplex => align_of::<f64>(),
            Complex4 => 2,
            Complex8 => 4,
            Complex16 => align_of::<f64>(),
            Complex32 => 16,
            FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | TwoReal
            | TwoDoublePrecision | TwoInteger => match self.pair() {
                Some([(a, _), (b, _)]) => a.align().max(b.align()),
                None => 1,
            },
            // every remaining scalar is aligned to its size (16-byte ones included)
            _ => self.size(),
        }
    }

    /// Extent of one element: the size, except for pair types (the padded C struct).
    pub fn extent(self) -> usize {
        match self.pair() {
            Some([_, (b, off_b)]) => round_up(off_b + b.size(), self.align()),
            None => self.size(),
        }
    }

    /// The type class, for scalar types (`None` for byte-like types and pair types).
    pub fn type_class(self) -> Option<TypeClass> {
        use Basic::*;
        match self {
            Short | UnsignedShort | Int | Unsigned | Long | UnsignedLong | LongLong
            | UnsignedLongLong | Int8 | Int16 | Int32 | Int64 | UInt8 | UInt16 | UInt32
            | UInt64 | Aint | Offset | Count | Integer | Integer1 | Integer2 | Integer4
            | Integer8 | Integer16 | SignedChar | UnsignedChar | WChar | Char => {
                Some(TypeClass::Integer)
            }
            Float | Double | LongDouble | Real | DoublePrecision | Real2 | Real4 | Real8
            | Real16 => Some(TypeClass::Real),
            CFloatComplex | CDoubleComplex | CLongDoubleComplex | CxxFloatComplex
            | CxxDoubleComplex | CxxLongDoubleComplex | Complex | DoubleComplex | Complex4
            | Complex8 | Complex16 | Complex32 => Some(TypeClass::Complex),
            Logical | Logical1 | Logical2 | Logical4 | Logical8 | Logical16 | CBool | CxxBool => {
                Some(TypeClass::Logical)
            }
            Byte | Packed | Character | FloatInt | DoubleInt | LongInt | TwoInt | ShortInt
            | LongDoubleInt | TwoReal | TwoDoublePrecision | TwoInteger => None,
        }
    }

    /// Whether `MPI_Compare_and_swap` takes this type: a C or Fortran integer, a logical, a
    /// multi-language type (`MPI_AINT`, `MPI_OFFSET`, `MPI_COUNT`) or `MPI_BYTE` (MPI-4.1
    /// §12.3.4), and the C character types (as MPICH: bytes compared as integers). Not floating
    /// point, whose equality is not that of the bits (0.0 and -0.0, NaN).
    pub fn compare_and_swap_ok(self) -> bool {
        self == Basic::Byte
            || matches!(
                self.type_class(),
                Some(TypeClass::Integer | TypeClass::Logical)
            )
    }

    /// `external32` conversion of one unit, and the number of units per element (2 for complex
    /// types). Pair types are never asked: they are decomposed into their members first.
    pub(crate) fn conv(self) -> (Conv, usize) {
        use Basic::*;
        let int = |signed: bool, ext: u8| {
            (
                Conv::Int {
                    signed,
                    native: self.size() as u8,
                    ext,
                },
                1,
            )
        };
        match self {
            Char | SignedChar | UnsignedChar | Byte | CBool | Int8 | UInt8 | CxxBool | Packed
            | Character | Logical1 | Integer1 => (Conv::Byte, 1),
            Short | Int16 | Integer2 => int(true, 2),
            UnsignedShort | UInt16 | Logical2 => int(false, 2),
            // The standard's table of external32 sizes gives `long` 4 bytes whatever the
            // platform's `long` (a value that does not fit is a conversion error), as MPICH.
            Int | Int32 | Integer | Integer4 | Long => int(true, 4),
            Unsigned | UInt32 | Logical | Logical4 | UnsignedLong => int(false, 4),
            LongLong | Int64 | Aint | Offset | Count | Integer8 => int(true, 8),
            UnsignedLongLong | UInt64 | Logical8 => int(false, 8),
            Integer16 => int(true, 16),
            Logical16 => int(false, 16),
            // 2 bytes in the standard's table (a `wchar_t` above U+FFFF does not fit).
            WChar => int(false, 2),
            Real2 => (Conv::Float { n: 2 }, 1),
            Float | Real | Real4 => (Conv::Float { n: 4 }, 1),
            Double | DoublePrecision | Real8 => (Conv::Float { n: 8 }, 1),
            Real16 => (Conv::Float { n: 16 }, 1),
            LongDouble => (Conv::LongDouble, 1),
            Complex4 => (Conv::Float { n: 2 }, 2),
            CFloatComplex | CxxFloatComplex | Complex | Complex8 => (Conv::Float { n: 4 }, 2),
            CDoubleComplex | CxxDoubleComplex | DoubleComplex | Complex16 => {
                (Conv::Float { n: 8 }, 2)
            }
            Complex32 => (Conv::Float { n: 16 }, 2),
            CLongDoubleComplex | CxxLongDoubleComplex => (Conv::LongDouble, 2),
            FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | TwoReal
            | TwoDoublePrecision | TwoInteger => (Conv::Byte, 0),
        }
    }

    /// Size of one element in the `external32` representation (e.g. `long` is 4, `long double`
    /// 16, `wchar_t` 2, `bool` 1).
    pub fn external32_size(self) -> usize {
        if let Some([(a, _), (b, _)]) = self.pair() {
            return a.external32_size() + b.external32_size();
        }
        let (conv, units) = self.conv();
        units
            * match conv {
                Conv::Byte => 1,
                Conv::Int { ext, .. } => ext as usize,
                Conv::Float { n } => n as usize,
                Conv::LongDouble => 16,
            }
    }

    /// The predefined type of `class` whose size is `size` (`MPI_Type_match_size`): the
    /// Fortran sized types (`INTEGERn`, `REALn`, `COMPLEXn`, `LOGICALn`), or `None`.
    pub fn match_size(class: TypeClass, size: usize) -> Option<Basic> {
        use Basic::*;
        let b = match (class, size) {
            (TypeClass::Integer, 1) => Integer1,
            (TypeClass::Integer, 2) => Integer2,
            (TypeClass::Integer, 4) => Integer4,
            (TypeClass::Integer, 8) => Integer8,
            (TypeClass::Integer, 16) => Integer16,
            (TypeClass::Real, 2) => Real2,
            (TypeClass::Real, 4) => Real4,
            (TypeClass::Real, 8) => Real8,
            (TypeClass::Real, 16) => Real16,
            (TypeClass::Complex, 4) => Complex4,
            (TypeClass::Complex, 8) => Complex8,
            (TypeClass::Complex, 16) => Complex16,
            (TypeClass::Complex, 32) => Complex32,
            (TypeClass::Logical, 1) => Logical1,
            (TypeClass::Logical, 2) => Logical2,
            (TypeClass::Logical, 4) => Logical4,
            (TypeClass::Logical, 8) => Logical8,
            (TypeClass::Logical, 16) => Logical16,
            _ => return None,
        };
        Some(b)
    }

    /// The pair type whose members are `value` and `index` (`MPI_Type_get_value_index`), if
    /// one is predefined.
    pub fn value_index(value: Basic, index: Basic) -> Option<Basic> {
        use Basic::*;
        Some(match (value, index) {
            (Float, Int) => FloatInt,
            (Double, Int) => DoubleInt,
            (Long, Int) => LongInt,
            (Int, Int) => TwoInt,
            (Short, Int) => ShortInt,
            (LongDouble, Int) => LongDoubleInt,
            (Real, Real) => TwoReal,
            (DoublePrecision, DoublePrecision) => TwoDoublePrecision,
            (Integer, Integer) => TwoInteger,
            _ => return None,
        })
    }
}

#[inline]
pub(crate) const fn round_up(v: usize, align: usize) -> usize {
    if align <= 1 {
        v
    } else {
        v.div_ceil(align) * align
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_order() {
        for (i, b) in Basic::ALL.iter().enumerate() {
            assert_eq!(b.index(), i);
        }
    }

    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    #[test]
    fn lp64_sizes() {
        use Basic::*;
        let cases = [
            (Char, 1, 1),
            (Short, 2, 2),
            (Int, 4, 4),
            (Long, 8, 8),
            (LongLong, 8, 8),
            (Float, 4, 4),
            (Double, 8, 8),
            (LongDouble, 16, 16),
            (WChar, 4, 4),
            (CBool, 1, 1),
            (CDoubleComplex, 16, 16),
            (CLongDoubleComplex, 32, 32),
            (FloatInt, 8, 8),
            (DoubleInt, 12, 16),
            (LongInt, 12, 16),
            (TwoInt, 8, 8),
            (ShortInt, 6, 8),
            (LongDoubleInt, 20, 32),
            (TwoReal, 8, 8),
            (TwoDoublePrecision, 16, 16),
            (TwoInteger, 8, 8),
        ];
        for (b, size, extent) in cases {
            assert_eq!((b.size(), b.extent()), (size, extent), "{b:?}");
        }
        assert_eq!(LongDouble.external32_size(), 16);
        assert_eq!(Long.external32_size(), 4);
        assert_eq!(UnsignedLong.external32_size(), 4);
        assert_eq!(LongLong.external32_size(), 8);
        assert_eq!(WChar.external32_size(), 2);
        assert_eq!(LongInt.external32_size(), 8);
        assert_eq!(CBool.external32_size(), 1);
        assert_eq!(CDoubleComplex.external32_size(), 16);
        assert_eq!(DoubleInt.external32_size(), 12);
    }

    #[test]
    fn scalar_sizes_and_external32_units_agree() {
        for b in Basic::ALL {
            if b.is_pair() {
                continue;
            }
            let (conv, units) = b.conv();
            let native_unit = match conv {
                Conv::Byte => 1,
                Conv::Int { native, .. } => native as usize,
                Conv::Float { n } => n as usize,
                Conv::LongDouble => ld::SIZE,
            };
            assert_eq!(native_unit * units, b.size(), "{b:?}");
            assert!(
                b.align().is_power_of_two() && b.align() <= b.size().max(1),
                "{b:?}"
            );
        }
    }
}
