//! Intercommunicators beyond the basics of `collectives.rs`'s `inter`: the C program
//! `tests/c/inter/intercomm.c` cuts MPI_COMM_WORLD in two (uneven halves, or even and odd
//! ranks), then checks against a sequential reference MPI_Reduce_scatter(_block) (blocking,
//! non-blocking, persistent; non-commutative operation, uneven and zero counts, long
//! messages), MPI_Comm_split (several colors, MPI_UNDEFINED, a color on one side only),
//! MPI_Comm_create (subgroups, MPI_GROUP_EMPTY on one side), MPI_Comm_split_type, point to
//! point and collectives over the new intercommunicators, and the error classes of the
//! erroneous calls (MPI_Comm_create_group, MPI_IN_PLACE, scans) under MPI_ERRORS_RETURN.
//!
//! `MADMPI_TEST_MPICC=mpicc.mpich MADMPI_TEST_MPIRUN=mpiexec.mpich cargo test --test
//! intercomm` runs the program against MPICH (it skips madmpi's extensions and MPICH's known
//! defects), which is how the test itself was checked.

use std::time::Duration;

use madmpi_tests::harness::{c_program, Job};

fn run(ranks: usize, layout: &str) {
    Job::new(&c_program("inter", "intercomm", &[]), ranks)
        .args(&[layout])
        .timeout(Duration::from_secs(120))
        .run()
        .assert_ok("intercomm");
}

/// Uneven halves: 1 + 3 and 2 + 3 processes (the sizes the issue asks for), and 1 + 1.
#[test]
fn uneven_halves() {
    for n in [2, 4, 5] {
        run(n, "low");
    }
}

/// Even and odd world ranks (ranks of the groups interleave in MPI_COMM_WORLD): 3 + 2, 4 + 3.
#[test]
fn interleaved_groups() {
    for n in [5, 7] {
        run(n, "interleaved");
    }
}
