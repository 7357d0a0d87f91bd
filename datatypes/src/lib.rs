//! # madmpi-datatypes
//!
//! The MPI datatype engine of madmpi, as a pure Rust crate: no I/O, no C handles.
//!
//! * [`Datatype`]: every constructor of MPI-4 (contiguous, vector, hvector, indexed, hindexed,
//!   indexed_block, hindexed_block, struct, subarray, darray, resized, dup, the `f90` types,
//!   value_index), with counts as `usize` and displacements as `isize` (the `_c` variants map
//!   onto the same functions; [`Datatype::mark_large_count`] makes `get_contents` report large
//!   counts as the standard requires for them);
//! * queries: size, extent and bounds with resized-type markers, true extent, envelope and
//!   contents, names;
//! * traversal ([`Datatype::segments`]): the `(offset, len)` memory segments of any byte range of
//!   the packed stream of `count` elements, computed from a compiled layout tree without
//!   flattening, for per-block zero-copy transfers (NewMadeleine §5.3), with
//!   [`Datatype::block_stats`] to decide between packing and zero-copy;
//! * pack / unpack (native, restartable at any offset) and `external32`;
//! * `MPI_Get_elements` ([`Datatype::elements_in`]) and signature matching.
//!
//! All `unsafe` code is in one module (`raw`), which reads and writes user memory for
//! pack/unpack; everything else is `forbid(unsafe_code)`. Bad input is an [`Error`], never a
//! panic.
//!
//! ```
//! use madmpi_datatypes::{Basic, Datatype};
//!
//! // every other int of 6
//! let t = Datatype::vector(3, 1, 2, &Datatype::basic(Basic::Int))?;
//! t.commit();
//! assert_eq!((t.size(), t.extent()), (12, 20));
//! assert_eq!(t.segments(1, 0..usize::MAX).collect::<Vec<_>>(), [(0, 4), (8, 4), (16, 4)]);
//!
//! let src = [10i32, 11, 12, 13, 14, 15];
//! let mut packed = [0u8; 12];
//! // SAFETY: `src` covers the 20 bytes the type spans.
//! let n = unsafe { t.pack(src.as_ptr().cast(), 1, 0, &mut packed) };
//! assert_eq!(n, 12);
//! assert_eq!(packed[4..8], 12i32.to_ne_bytes());
//! # Ok::<(), madmpi_datatypes::Error>(())
//! ```
//!
//! Tests: `cargo test -p madmpi-datatypes` (property tests against a naive type-map reference in
//! `tests/common`; `PROPTEST_CASES=n` for more cases). Under miri:
//! `MIRIFLAGS=-Zmiri-permissive-provenance cargo +nightly miri test -p madmpi-datatypes`
//! (permissive provenance for the `MPI_BOTTOM` test, which turns absolute addresses back into
//! pointers).
#![deny(unsafe_code)]
#![deny(missing_docs)]

mod basic;
mod build;
mod datatype;
mod error;
mod external32;
mod node;
mod raw;
mod segments;
mod signature;

pub use basic::{Basic, TypeClass};
pub use datatype::{abi, BlockStats, Combiner, Contents, Datatype, Distribution, Envelope, Order};
pub use error::{count_from_i64, Error, Result};
pub use segments::Segments;

/// Checks a data representation name for `MPI_Pack_external` and friends: only
/// `"external32"` is supported.
pub fn check_datarep(name: &str) -> Result<()> {
    if name == "external32" {
        Ok(())
    } else {
        Err(Error::UnsupportedDatarep(format!(
            "{name:?} (only \"external32\")"
        )))
    }
}

/// `MPI_Get_address`: the address of `location` as an `MPI_Aint`. The pointer's provenance is
/// exposed, so that a datatype built from such absolute addresses can be used with a null
/// (`MPI_BOTTOM`) buffer in pack and unpack.
pub fn get_address<T>(location: *const T) -> isize {
    location as usize as isize
}

#[cfg(test)]
mod tests {
    #[test]
    fn datatype_is_send_and_sync() {
        fn check<T: Send + Sync + Clone + 'static>() {}
        check::<crate::Datatype>();
        check::<crate::Error>();
    }
}
