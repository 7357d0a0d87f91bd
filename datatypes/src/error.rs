//! The crate's one error type.
//!
//! Every fallible operation returns [`Error`]; the C layer (`mpi-capi`) alone maps the variants to
//! `MPI_ERR_*` classes. The variants are named after the MPI error class they correspond to, and
//! each carries a message for the error string.

#![forbid(unsafe_code)]

use std::fmt;

/// An error from a datatype operation. Never a panic: bad input, overflowing arithmetic and
/// too-small buffers all end here.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A count is invalid (negative when given as a signed value, or too large). `MPI_ERR_COUNT`.
    Count(String),
    /// The datatype cannot be used here (uncommitted, predefined where a derived type is
    /// required, `MPI_PACKED` as a constructor argument…). `MPI_ERR_TYPE`.
    Type(String),
    /// Another argument is invalid (mismatched array lengths, out-of-range start, bad order,
    /// bad distribution…). `MPI_ERR_ARG`.
    Arg(String),
    /// An output buffer or array is too small. `MPI_ERR_TRUNCATE` for buffers; the C layer may
    /// report it as `MPI_ERR_ARG` for `get_contents` arrays.
    Truncate {
        /// What was being written.
        what: &'static str,
        /// How many units (bytes or array entries) were needed.
        needed: usize,
        /// How many were available.
        available: usize,
    },
    /// A size, extent, stride or displacement overflows the address range. `MPI_ERR_VALUE_TOO_LARGE`.
    ValueTooLarge(String),
    /// The data representation is not supported (only `"native"` and `"external32"` exist).
    /// `MPI_ERR_UNSUPPORTED_DATAREP`.
    UnsupportedDatarep(String),
    /// A value cannot be converted to or from the external representation on this platform.
    /// `MPI_ERR_CONVERSION`.
    Conversion(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Count(m) => write!(f, "invalid count: {m}"),
            Error::Type(m) => write!(f, "invalid datatype: {m}"),
            Error::Arg(m) => write!(f, "invalid argument: {m}"),
            Error::Truncate {
                what,
                needed,
                available,
            } => write!(
                f,
                "{what} too small: {needed} needed, {available} available"
            ),
            Error::ValueTooLarge(m) => write!(f, "value too large: {m}"),
            Error::UnsupportedDatarep(m) => write!(f, "unsupported data representation: {m}"),
            Error::Conversion(m) => write!(f, "conversion error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Converts a signed count from a binding (C `int`, `MPI_Count`) into a `usize`, rejecting
/// negative values with [`Error::Count`].
pub fn count_from_i64(value: i64, what: &str) -> Result<usize> {
    usize::try_from(value).map_err(|_| Error::Count(format!("{what} = {value} must be >= 0")))
}

pub(crate) fn too_large(what: &str) -> Error {
    Error::ValueTooLarge(format!("{what} overflows the address range"))
}

/// Checked arithmetic helpers that turn overflow into [`Error::ValueTooLarge`].
pub(crate) trait Checked: Sized {
    fn add_or(self, rhs: Self, what: &str) -> Result<Self>;
    fn mul_or(self, rhs: Self, what: &str) -> Result<Self>;
}

macro_rules! impl_checked {
    ($($t:ty),*) => {$(
        impl Checked for $t {
            #[inline]
            fn add_or(self, rhs: Self, what: &str) -> Result<Self> {
                self.checked_add(rhs).ok_or_else(|| too_large(what))
            }
            #[inline]
            fn mul_or(self, rhs: Self, what: &str) -> Result<Self> {
                self.checked_mul(rhs).ok_or_else(|| too_large(what))
            }
        }
    )*};
}
impl_checked!(isize, usize, i64);

/// `usize` → `isize`, or [`Error::ValueTooLarge`].
#[inline]
pub(crate) fn to_isize(v: usize, what: &str) -> Result<isize> {
    isize::try_from(v).map_err(|_| too_large(what))
}
