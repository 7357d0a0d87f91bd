//! Dynamic process management: the self-checking C programs of `tests/c/dpm/` built with
//! `bin/mpicc` and run under `bin/mpirun` (and as singletons). A passing program prints
//! `OK <name>`; a failing check aborts the job.

use std::process::Command;
use std::time::Duration;

use madmpi_tests::harness::{c_program, run_command, Job};

/// The name service (MPI_Publish_name, MPI_Lookup_name, MPI_Unpublish_name), served by the
/// launcher through PMI, on 1 to 4 ranks; and in a singleton, whose names are its own.
#[test]
fn names_1_to_4_and_singleton() {
    let p = c_program("dpm", "names", &[]);
    for n in 1..=4 {
        Job::new(&p, n).run().assert_ok("names");
    }
    let mut cmd = Command::new(&p);
    for k in ["PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE"] {
        cmd.env_remove(k);
    }
    run_command(cmd, "names (singleton)", Duration::from_secs(60)).assert_ok("names");
}

/// MPI_Comm_disconnect of a job's own communicators (duplicates after traffic of every kind,
/// an intercommunicator), on 1 to 4 ranks over shared memory and over TCP.
#[test]
fn disconnect_1_to_4() {
    let p = c_program("dpm", "disconnect", &[]);
    for n in 1..=4 {
        Job::new(&p, n).run().assert_ok("disconnect");
        Job::new(&p, n)
            .env("MADMPI_TRANSPORTS", "tcp")
            .run()
            .assert_ok("disconnect");
    }
}
