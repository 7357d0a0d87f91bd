//! The extensions beyond the MPI standard and the newer point-to-point calls: the self-checking
//! C programs of `tests/c/ext/` built with `bin/mpicc` and run under `bin/mpirun` on 1 to 4
//! ranks, over shared memory and over TCP. A passing program prints `OK <name>`; a failing
//! check aborts the job.

use madmpi_tests::harness::{c_program, Job};

fn prog(name: &str) -> std::path::PathBuf {
    c_program("ext", name, &[])
}

/// Run `name` on `ranks` ranks over shared memory, then over TCP.
fn ok_shm_tcp(name: &str, ranks: usize) {
    let p = prog(name);
    Job::new(&p, ranks).run().assert_ok(name);
    Job::new(&p, ranks)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok(name);
}

/// The Madeleine API (`include/madeleine.h`): modes, the RPC of the paper, mismatches and bad
/// arguments.
#[test]
fn madeleine_2_to_4() {
    if !madmpi_tests::harness::toolchain().ours {
        return; // madeleine.h is madmpi's own
    }
    for n in 2..=4 {
        ok_shm_tcp("madeleine", n);
    }
    Job::new(&prog("madeleine"), 2)
        .env("MADMPI_STRATEGY", "aggreg")
        .run()
        .assert_ok("madeleine");
}

/// MPI_Isendrecv, MPI_Isendrecv_replace (+ `_c`) and MPI_Request_get_status_any/some.
#[test]
fn isendrecv_1_to_4() {
    for n in 1..=4 {
        ok_shm_tcp("isendrecv", n);
    }
}

/// Generalized requests with every completion call, cancel and free.
#[test]
fn grequest_1_and_3() {
    ok_shm_tcp("grequest", 1);
    ok_shm_tcp("grequest", 3);
}

/// MPI-4.1 buffered-send buffers: automatic, per communicator, flush, attach after detach.
#[test]
fn buffers_1_to_4() {
    for n in 1..=4 {
        ok_shm_tcp("buffers", n);
    }
}
