//! The predefined operations' view of the basic types: which kind of number each one is
//! (integer, floating point of which format, complex, logical, byte, MINLOC/MAXLOC pair), and
//! whether this build has the arithmetic for an operation on it.

use madmpi_datatypes::Basic;

use super::builtin::ld;
use super::BuiltinOp;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Fl {
    F32,
    F64,
    /// C `long double`.
    Ld,
    /// A float format without arithmetic here (half, quad).
    Unavailable,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Int {
        size: usize,
        signed: bool,
        fortran: bool,
    },
    Float(Fl),
    Complex(Fl),
    Logical(usize),
    Byte,
    Pair(Basic, Basic),
    None,
}

pub(super) fn kind(b: Basic) -> Kind {
    use Basic::*;
    let int = |signed: bool, fortran: bool| Kind::Int {
        size: b.size(),
        signed,
        fortran,
    };
    match b {
        Char | SignedChar | Short | Int | Long | LongLong | Int8 | Int16 | Int32 | Int64 | Aint
        | Offset | Count => int(true, false),
        UnsignedChar | UnsignedShort | Unsigned | UnsignedLong | UnsignedLongLong | UInt8
        | UInt16 | UInt32 | UInt64 => int(false, false),
        Integer | Integer1 | Integer2 | Integer4 | Integer8 | Integer16 => int(true, true),
        Float | Real | Real4 => Kind::Float(Fl::F32),
        Double | DoublePrecision | Real8 => Kind::Float(Fl::F64),
        LongDouble => Kind::Float(Fl::Ld),
        Real2 | Real16 => Kind::Float(Fl::Unavailable),
        CFloatComplex | CxxFloatComplex | Complex | Complex8 => Kind::Complex(Fl::F32),
        CDoubleComplex | CxxDoubleComplex | DoubleComplex | Complex16 => Kind::Complex(Fl::F64),
        CLongDoubleComplex | CxxLongDoubleComplex => Kind::Complex(Fl::Ld),
        Complex4 | Complex32 => Kind::Complex(Fl::Unavailable),
        Logical | Logical1 | Logical2 | Logical4 | Logical8 | Logical16 | CBool | CxxBool => {
            Kind::Logical(b.size())
        }
        Byte => Kind::Byte,
        FloatInt | DoubleInt | LongInt | TwoInt | ShortInt | LongDoubleInt | TwoReal
        | TwoDoublePrecision | TwoInteger => match b.pair() {
            Some([(v, _), (i, _)]) => Kind::Pair(v, i),
            None => Kind::None,
        },
        WChar | Character | Packed => Kind::None,
    }
}

/// Whether this build has the arithmetic for `op` on `b` (long double on x86 and where it is a
/// double; no half or quad precision).
pub(super) fn available(op: BuiltinOp, b: Basic) -> bool {
    if matches!(op, BuiltinOp::Replace | BuiltinOp::NoOp) {
        return true;
    }
    let ok = |f: Fl| match f {
        Fl::F32 | Fl::F64 => true,
        Fl::Ld => ld::AVAILABLE,
        Fl::Unavailable => false,
    };
    match kind(b) {
        Kind::Float(f) | Kind::Complex(f) => ok(f),
        Kind::Pair(v, i) => [v, i].iter().all(|&x| match kind(x) {
            Kind::Float(f) => ok(f),
            _ => true,
        }),
        _ => true,
    }
}

/// Whether `b` is a (C or Fortran) integer type: two's complement, so that its sum and bit
/// operations are those of the machine's integer instructions.
pub(crate) fn is_integer(b: Basic) -> bool {
    matches!(kind(b), Kind::Int { .. })
}
