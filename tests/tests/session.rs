//! The sessions model, and the ABI's Fortran calls with MPI_Get_hw_resource_info: the self-checking C programs of `tests/c/session/` built with
//! `bin/mpicc` and run under `bin/mpirun` on 1 to 4 ranks, over shared memory and over TCP
//! (with `MADMPI_FAKE_HOSTS`, so that the per-node process sets differ from mpi://WORLD). A
//! passing program prints `OK <name>`; a failing check aborts the job.

use madmpi_tests::harness::{c_program, Job};

fn job(name: &str, ranks: usize) -> Job {
    Job::new(&c_program("session", name, &[]), ranks)
}

#[test]
fn sessions_1() {
    job("sessions", 1).run().assert_ok("sessions");
}

#[test]
fn sessions_2() {
    job("sessions", 2).run().assert_ok("sessions");
}

#[test]
fn sessions_4() {
    job("sessions", 4).run().assert_ok("sessions");
}

#[test]
fn sessions_3_tcp_two_nodes() {
    job("sessions", 3)
        .env("MADMPI_TRANSPORTS", "tcp")
        .env("MADMPI_FAKE_HOSTS", "2")
        .run()
        .assert_ok("sessions");
}

#[test]
fn sessions_then_world_3() {
    job("sessions_world", 3)
        .args(&["session-first"])
        .run()
        .assert_ok("sessions_world");
}

#[test]
fn world_then_sessions_2_tcp() {
    job("sessions_world", 2)
        .args(&["world-first"])
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("sessions_world");
}

#[test]
fn abi_fortran_1() {
    job("abi_fortran", 1).run().assert_ok("abi_fortran");
}

#[test]
fn abi_fortran_3() {
    job("abi_fortran", 3).run().assert_ok("abi_fortran");
}

/// A session's buffer for buffered sends (MPI_Session_attach_buffer and its kin): the session's
/// communicators and those derived from them use it when they have no buffer of their own, the
/// process having none.
#[test]
fn session_buffers_1() {
    job("session_buffers", 1).run().assert_ok("session_buffers");
}

#[test]
fn session_buffers_3() {
    job("session_buffers", 3).run().assert_ok("session_buffers");
}

#[test]
fn session_buffers_4_tcp() {
    job("session_buffers", 4)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("session_buffers");
}
