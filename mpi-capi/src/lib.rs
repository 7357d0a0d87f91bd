//! The C ABI of madmpi: every `MPI_*` and `PMPI_*` symbol of the MPI-5.0 standard ABI.
//!
//! This crate is thin and mechanical. Each exported function has the same shape: panic boundary
//! (in the generated wrapper) → handle lookup → one call into the `madmpi` core → error mapping →
//! error handler. It owns the C handle tables, error codes and error handlers, and nothing of the
//! protocols.
//!
//! Layout:
//! - `abi`: the standard ABI's types and constants, as Rust items (source of `include/mpi.h`).
//! - `imp`: the implemented functions, one `pub unsafe fn MPI_Xxx` per function, with the C
//!   signature. The build script scans `src/imp/` and generates, for every function of the
//!   standard ABI, the exported `MPI_Xxx` and `PMPI_Xxx` symbols: they call `imp::MPI_Xxx` when it
//!   exists and otherwise report `MPI_ERR_UNSUPPORTED_OPERATION` naming the function.
//! - `errors`: error classes/codes/strings and the error handlers.
//! - `handles`: the typed handle tables.
//! - `madeleine`: the `mad_*` functions of `include/madeleine.h` (the Madeleine API).

#![allow(non_snake_case, non_camel_case_types, non_upper_case_globals)]
#![allow(clippy::missing_safety_doc)]

pub mod abi;
pub mod convert;
pub mod errors;
pub mod handles;
pub mod imp;
pub mod madeleine;

mod generated {
    #![allow(
        unused_variables,
        clippy::too_many_arguments,
        clippy::missing_safety_doc
    )]
    use crate::abi::*;
    include!(concat!(env!("OUT_DIR"), "/generated.rs"));
}
