//! MPI_Comm_spawn, MPI_Comm_spawn_multiple and MPI_Comm_get_parent under our `mpirun` (PMI-1
//! `spawn`: the launcher starts the children as a job of their own), with the self-checking C
//! program `tests/c/dpm/spawn.c`: arguments, sizes, messages, intercommunicator collectives,
//! merge and disconnect on both sides, `wdir`, and MPI_ERR_SPAWN for a missing program. The
//! spawned jobs are children of the job's launcher, so the harness's process-group kill at the
//! timeout takes them too.

use madmpi_tests::harness::{c_program, Job};

#[test]
fn spawn_1_and_3_parents() {
    let p = c_program("dpm", "spawn", &[]);
    for n in [1, 3] {
        Job::new(&p, n)
            .env("MADMPI_DPM_TIMEOUT", "30")
            .run()
            .assert_ok("spawn");
    }
    Job::new(&p, 2)
        .env("MADMPI_TRANSPORTS", "tcp")
        .env("MADMPI_DPM_TIMEOUT", "30")
        .run()
        .assert_ok("spawn");
}
