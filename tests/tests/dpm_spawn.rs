//! MPI_Comm_spawn, MPI_Comm_spawn_multiple and MPI_Comm_get_parent under our `mpirun` (PMI-1
//! `spawn`: the launcher starts the children as a job of their own), with the self-checking C
//! program `tests/c/dpm/spawn.c`: arguments, sizes, messages, intercommunicator collectives,
//! merge and disconnect on both sides, `wdir`, and MPI_ERR_SPAWN for a missing program. The
//! spawned jobs are children of the job's launcher, so the harness's process-group kill at the
//! timeout takes them too.

use madmpi_tests::harness::{c_program, run_command, Job};

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

/// The same program started without a launcher (a singleton): it has no process manager to
/// ask, so its MPI_Comm_spawn starts our `mpirun` itself (found next to `libmadmpi.so`) for the
/// children, and everything else is the same, the missing program's MPI_ERR_SPAWN included.
#[test]
fn spawn_from_a_singleton() {
    let p = c_program("dpm", "spawn", &[]);
    let mut cmd = std::process::Command::new(&p);
    cmd.env("MADMPI_DPM_TIMEOUT", "30");
    run_command(
        cmd,
        "spawn (singleton)",
        std::time::Duration::from_secs(180),
    )
    .assert_ok("spawn");
}

/// A singleton whose `MADMPI_MPIRUN` names no program fails its spawn with MPI_ERR_SPAWN (the
/// program, with MPI_ERRORS_RETURN, reports the class and aborts); nothing hangs.
#[test]
fn spawn_from_a_singleton_without_a_launcher_fails_cleanly() {
    let p = c_program("dpm", "spawn", &[]);
    let mut cmd = std::process::Command::new(&p);
    cmd.env("MADMPI_MPIRUN", "/nonexistent/mpirun")
        .env("MADMPI_DPM_TIMEOUT", "30");
    let out = run_command(
        cmd,
        "spawn (singleton, no launcher)",
        std::time::Duration::from_secs(120),
    );
    assert!(!out.success() && !out.timed_out, "{}", out.context());
    assert!(
        out.stderr.contains("MPI_Comm_spawn(") && out.stderr.contains("(MPI_ERR_SPAWN"),
        "{}",
        out.context()
    );
}
