//! `libmadmpi.so`: the crate `madmpi-capi` linked as a C shared library.
//!
//! Every `MPI_*` and `PMPI_*` symbol is defined (`#[no_mangle]`) in `madmpi-capi`; a `cdylib`
//! exports the C symbols of the crates it links, so this crate holds nothing but the reference
//! that links it. It exists because Cargo applies link-time optimisation only to a crate whose
//! sole type is a linked artifact, and `madmpi-capi` is also an `rlib` for the tests.

pub use madmpi_capi;
