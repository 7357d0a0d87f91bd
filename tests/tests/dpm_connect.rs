//! Dynamic processes between groups: MPI_Open_port, MPI_Comm_accept, MPI_Comm_connect,
//! MPI_Close_port and MPI_Comm_join, with the self-checking C programs of `tests/c/dpm/` built
//! with `bin/mpicc` and run under `bin/mpirun`. A passing program prints `OK <name>`; a failing
//! check aborts the job. Every job is killed with its process group at its timeout.

use std::process::Command;
use std::time::Duration;

use madmpi_tests::harness::{c_program, run_command, toolchain, Job};

/// Two halves of one job accept/connect twice (other roots the second time) and use the
/// intercommunicator (point-to-point, collectives, dup, merge, disconnect); then the errors
/// (MPI_ERR_PORT: closed port, bad name, nobody accepting within `MADMPI_DPM_TIMEOUT`). On 1
/// to 4 ranks, the world over shared memory and over TCP (the dynamic peers always go over
/// TCP).
#[test]
fn connect_accept_1_to_4() {
    let p = c_program("dpm", "connect", &[]);
    for n in 1..=4 {
        for transports in ["", "tcp"] {
            let mut j = Job::new(&p, n).env("MADMPI_DPM_TIMEOUT", "2");
            if !transports.is_empty() {
                j = j.env("MADMPI_TRANSPORTS", transports);
            }
            j.run().assert_ok("connect");
        }
    }
}

/// Two jobs (3 and 2 ranks, then 1 and 4), each started by its own `mpirun`: the server's
/// root writes its port name to a file, the client's root reads it; each world is one group.
#[test]
fn connect_two_jobs() {
    let p = c_program("dpm", "connect", &[]);
    let mpirun = toolchain().mpirun.join(" ");
    for (ns, nc) in [(3, 2), (1, 4)] {
        let file =
            std::env::temp_dir().join(format!("madmpi-dpm-port-{}-{ns}{nc}", std::process::id()));
        let _ = std::fs::remove_file(&file);
        let f = file.display();
        let prog = p.display();
        let script = format!(
            "{mpirun} -n {ns} {prog} server {f} & s=$!; \
             {mpirun} -n {nc} {prog} client {f}; c=$?; wait $s; s=$?; \
             echo server=$s client=$c; exit $((s | c))"
        );
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&script);
        let out = run_command(cmd, &script, Duration::from_secs(180));
        let _ = std::fs::remove_file(&file);
        assert!(out.success(), "two jobs failed: {}", out.context());
        let oks = out
            .stdout
            .lines()
            .filter(|l| l.trim() == "OK connect")
            .count();
        assert_eq!(oks, 2, "both jobs pass: {}", out.context());
    }
}

/// MPI_Comm_join over TCP sockets the ranks connect themselves, in pairs, on 1 to 4 ranks.
#[test]
fn join_1_to_4() {
    let p = c_program("dpm", "join", &[]);
    for n in 1..=4 {
        Job::new(&p, n).run().assert_ok("join");
    }
}
