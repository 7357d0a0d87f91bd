//! Derived datatypes through the C interface: the self-checking C programs of `tests/c/dt/`
//! built with `bin/mpicc` and run under `bin/mpirun`. A passing program prints `OK <name>`; a
//! failing check aborts the job.
//!
//! - `constructors`: every constructor in point-to-point (2 ranks and send-to-self), below and
//!   above the rendezvous threshold, against layouts written out by hand; types freed while in
//!   use; the indexed 64 B + 256 KiB case of the NewMadeleine paper (per-block zero-copy);
//! - `bottom`: `MPI_BOTTOM` with a struct of absolute addresses;
//! - `halo`, `darray`: subarray halo exchanges (C and Fortran order) and distributed arrays;
//! - `pack`: `MPI_Pack`/`MPI_Unpack` round trips and byte-exact `external32`;
//! - `decode`: envelope/contents of every combiner, sizes, extents, names, f90 types;
//! - `elements`: `MPI_Get_elements` on partially received derived types;
//! - `errors`: bad input, with `MPI_ERRORS_RETURN`, checking the error classes.
//!
//! Every communicating program also runs with `MADMPI_SHM_CMA=0` (rendezvous data in fragments
//! instead of cross-memory attach) and with `MADMPI_TRANSPORTS=tcp`.
//!
//! `MADMPI_TEST_MPICC=mpicc.mpich MADMPI_TEST_MPIRUN=mpiexec.mpich cargo test --test datatypes`
//! runs the same programs against MPICH (they check madmpi's own choices only when the library
//! is madmpi), which is how the tests themselves were checked.

use madmpi_tests::harness::{c_program, Job};

fn job(name: &str, ranks: usize) -> Job {
    Job::new(&c_program("dt", name, &[]), ranks)
}

/// `name` on `ranks` ranks with the default settings.
fn ok(name: &str, ranks: usize) {
    job(name, ranks).run().assert_ok(name);
}

/// `name` on `ranks` ranks with rendezvous data in fragments (no cross-memory attach).
fn ok_without_cma(name: &str, ranks: usize) {
    job(name, ranks)
        .env("MADMPI_SHM_CMA", "0")
        .run()
        .assert_ok(name);
}

/// `name` on `ranks` ranks over TCP only.
fn ok_tcp(name: &str, ranks: usize) {
    job(name, ranks)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok(name);
}

/// The three variants of one program on one number of ranks, as separate tests.
macro_rules! variants {
    ($($default:ident, $no_cma:ident, $tcp:ident: $name:literal, $ranks:literal;)*) => {$(
        #[test]
        fn $default() {
            ok($name, $ranks);
        }

        #[test]
        fn $no_cma() {
            ok_without_cma($name, $ranks);
        }

        #[test]
        fn $tcp() {
            ok_tcp($name, $ranks);
        }
    )*};
}

variants! {
    constructors_2, constructors_2_without_cma, constructors_2_tcp: "constructors", 2;
    bottom_2, bottom_2_without_cma, bottom_2_tcp: "bottom", 2;
    halo_2, halo_2_without_cma, halo_2_tcp: "halo", 2;
    darray_2, darray_2_without_cma, darray_2_tcp: "darray", 2;
    pack_2, pack_2_without_cma, pack_2_tcp: "pack", 2;
    elements_2, elements_2_without_cma, elements_2_tcp: "elements", 2;
    errors_2, errors_2_without_cma, errors_2_tcp: "errors", 2;
    decode_1, decode_1_without_cma, decode_1_tcp: "decode", 1;
}

// Send-to-self only, and more ranks.

#[test]
fn constructors_1() {
    ok("constructors", 1);
}

#[test]
fn bottom_1() {
    ok("bottom", 1);
}

#[test]
fn halo_1() {
    ok("halo", 1);
}

#[test]
fn halo_3() {
    ok("halo", 3);
}

#[test]
fn darray_1() {
    ok("darray", 1);
}

#[test]
fn darray_4() {
    ok("darray", 4);
}

#[test]
fn pack_1() {
    ok("pack", 1);
}

#[test]
fn elements_1() {
    ok("elements", 1);
}

#[test]
fn decode_2() {
    ok("decode", 2);
}
