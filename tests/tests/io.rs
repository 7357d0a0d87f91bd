//! MPI-IO of the C interface: the self-checking C programs of `tests/c/io/` built with
//! `bin/mpicc` and run under `bin/mpirun` on 1 to 4 ranks, over shared memory and over TCP
//! (`MADMPI_TRANSPORTS=tcp`). Each program works in a fresh directory that the test removes
//! afterwards, also when the program fails. A passing program prints `OK <name>`; a failing
//! check aborts the job. The programs read what they wrote back with plain POSIX calls too.
//!
//! - `basic`: open modes and their error classes, hints, sizes, preallocation, sync, file
//!   error handlers, explicit offsets, individual pointers, seek, non-blocking and split
//!   collective forms, `_c` counts, statuses, atomic mode, APPEND, DELETE_ON_CLOSE, delete.
//! - `views`: an interleaved vector filetype (independent writes with data sieving), a 3-D
//!   subarray written and read collectively from memory with ghost cells, external32 and a
//!   user data representation (MPI_Register_datarep) round trips.
//! - `shared`: the shared file pointer (write_shared from every rank, ordered forms,
//!   seek_shared, non-blocking and split forms, MPI_MODE_SEQUENTIAL).

use std::path::PathBuf;

use madmpi_tests::harness::{c_program, Job};

/// A directory removed when dropped (a failing test unwinds through it).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let base = std::env::temp_dir().join(format!(
            "madmpi-io-{tag}-{}-{:?}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&base).expect("make the test directory");
        TempDir(base)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run(name: &str, ranks: usize, env: &[(&str, &str)]) {
    let dir = TempDir::new(name);
    let mut job = Job::new(&c_program("io", name, &[]), ranks).args(&[&dir.0.to_string_lossy()]);
    for (k, v) in env {
        job = job.env(k, v);
    }
    job.run().assert_ok(name);
}

fn ok(name: &str, ranks: usize) {
    run(name, ranks, &[]);
}

fn ok_tcp(name: &str, ranks: usize) {
    run(name, ranks, &[("MADMPI_TRANSPORTS", "tcp")]);
}

#[test]
fn basic_1() {
    ok("basic", 1);
}

#[test]
fn basic_3() {
    ok("basic", 3);
}

#[test]
fn basic_tcp_4() {
    ok_tcp("basic", 4);
}

#[test]
fn views_1() {
    ok("views", 1);
}

#[test]
fn views_4() {
    ok("views", 4);
}

#[test]
fn views_tcp_4() {
    ok_tcp("views", 4);
}

#[test]
fn views_3() {
    ok("views", 3);
}

#[test]
fn shared_1() {
    ok("shared", 1);
}

#[test]
fn shared_4() {
    ok("shared", 4);
}

#[test]
fn shared_tcp_3() {
    ok_tcp("shared", 3);
}

#[test]
fn coll_1() {
    ok("coll", 1);
}

#[test]
fn coll_3() {
    ok("coll", 3);
}

#[test]
fn coll_4() {
    ok("coll", 4);
}

#[test]
fn coll_tcp_4() {
    ok_tcp("coll", 4);
}
