//! Partitioned communication: the self-checking C programs of `tests/c/part/` built with
//! `bin/mpicc` and run under `bin/mpirun` on 2 to 4 ranks, over shared memory and over TCP
//! (`MADMPI_TRANSPORTS=tcp`), and under the strategies that aggregate and that do not. A
//! passing program prints `OK <name>`; a failing check aborts the job.

use madmpi_tests::harness::{c_program, Job};

fn job(name: &str, ranks: usize) -> Job {
    let extra: &[&str] = if name == "part_threads" {
        &["-pthread"]
    } else {
        &[]
    };
    Job::new(&c_program("part", name, extra), ranks)
}

#[test]
fn partitioned_2() {
    job("partitioned", 2).run().assert_ok("partitioned");
}

#[test]
fn partitioned_3_tcp() {
    job("partitioned", 3)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("partitioned");
}

#[test]
fn partitioned_4() {
    job("partitioned", 4).run().assert_ok("partitioned");
}

#[test]
fn partitioned_2_default_strategy() {
    job("partitioned", 2)
        .env("MADMPI_STRATEGY", "default")
        .run()
        .assert_ok("partitioned");
}

#[test]
fn partitioned_2_aggreg_tcp() {
    job("partitioned", 2)
        .env("MADMPI_STRATEGY", "aggreg")
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("partitioned");
}

#[test]
fn part_threads_2() {
    job("part_threads", 2).run().assert_ok("part_threads");
}

#[test]
fn part_threads_3_tcp() {
    job("part_threads", 3)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("part_threads");
}
