//! One-sided communication (MPI RMA) of the C interface: the self-checking C programs of
//! `tests/c/rma/` built with `bin/mpicc` and run under `bin/mpirun` on 1 to 4 ranks, over shared
//! memory and over TCP (`MADMPI_TRANSPORTS=tcp`), and with the `aggreg` strategy (many small
//! operations to one target in one packet). A passing program prints `OK <name>`; a failing
//! check aborts the job.
//!
//! - `fence`: windows (create, allocate), attributes, names, group, info; put, get, the
//!   accumulates, fetch-and-op and compare-and-swap with predefined and derived datatypes on
//!   both sides, a 4 MiB put and accumulate cut into chunks; the error classes of wrong use.
//! - `passive`: shared and exclusive locks, concurrent accumulates from every rank to one
//!   target, a fetch-and-op ticket counter, a compare-and-swap spin lock, lock_all + flush,
//!   request-based operations, a target computing without MPI calls.
//! - `pscw`: post/start/complete/wait and Win_test with subgroups, dynamic windows, `_c` forms.
//! - `shared`: MPI_Win_allocate_shared (contiguous parts, loads and stores of the neighbours'
//!   parts), MPI_Win_shared_query.
//! - `pairs`: accumulates, get-accumulate and fetch-and-op on pair types with a hole
//!   (MPI_SHORT_INT, MPI_DOUBLE_INT, MPI_LONG_DOUBLE_INT) and on a derived type whose segments
//!   split elements; no torn pair is ever read, padding is never written.
//! - `async`: a target that makes no MPI call (computes, then spins on a load of its own window
//!   memory) while the origins lock, put, get, accumulate, fetch-and-op and flush: on the
//!   direct path over shared memory (no target action), served by the asynchronous progress
//!   thread over TCP; on a window and on a shared window.
//! - `direct`: concurrent accumulates from every rank (the target's own included) on every
//!   kind of element (hardware atomics: 4- and 8-byte integers and floating point; the
//!   accumulate lock: chars, shorts, long doubles, pairs with a hole, a misaligned int),
//!   fetch-and-op tickets on an int and a double, exclusive holders that never overlap, a
//!   compare-and-swap mutex, fence and PSCW epochs; on MPI_Win_allocate and
//!   MPI_Win_allocate_shared windows.
//! - `large`: 2 MiB puts, gets and accumulates of one-byte elements on MPI_Win_create windows,
//!   a lock epoch per operation, to every rank including the origin itself, and 2 MiB
//!   `MPI_CHAR` sums from every rank with flush_local/flush (the patterns of MPICH's
//!   `rma_contig` and `large_acc_flush_local`, which crawled on the active-message path); the
//!   origin's own part with a strided target type, get-accumulate, fetch-and-op and
//!   compare-and-swap.
//!
//! - `fast`: the fast path of the direct path (contiguous predefined types, done in the call)
//!   next to the general path on one window: byte checks of puts and gets of 1 to 4096 bytes
//!   at odd displacements, a put overlapping its origin; concurrent accumulates from every rank
//!   mixing fast-path and general-path calls (derived types, request-based forms) on the same
//!   elements (atomic instructions and the accumulate lock), fetch-and-op tickets from both
//!   paths all distinct, MPI_NO_OP reads with a NULL origin, compare-and-swap on aligned and
//!   misaligned elements; every error class through the fast path's calls; on
//!   MPI_Win_allocate, MPI_Win_allocate_shared and MPI_Win_create windows, in owner mode and
//!   at MPI_THREAD_MULTIPLE.
//!
//! - `rfast`: the request-based forms (MPI_Rput, MPI_Rget, MPI_Raccumulate,
//!   MPI_Rget_accumulate, `_c` forms) on the fast path, their requests born complete, and on
//!   the general path: byte checks, MPI_Test/Wait/Waitall and MPI_Request_free of them, exact
//!   concurrent sums, distinct tickets, MPI_NO_OP reads, every error class.
//! - `batch`: thousands of small puts and accumulates in one epoch (untracked operations,
//!   answered by counts: `rma::batch`): byte checks by gets and by the target, accumulate
//!   ordering within a batch, flush_local then buffer reuse, a batch far larger than a
//!   packet completed by unlock, exact sums completed by flush, unlock and fence, a put the
//!   target refuses (a dynamic window's unattached address) reported by the next flush.
//! - `unlockfree`: windows freed right after passive-target epochs on rank 0 (after a fence
//!   epoch), then progress with no window (MPICH's `rmazero`): no unlock may arrive after the
//!   free (its window gone, or another one in its number).
//! - `dead`: a rank killed while it holds locks, under `mpirun --disable-auto-cleanup`: the
//!   others get the locks and finish (see `dead`).
//!
//! Windows made by MPI_Win_allocate[_shared] take the direct path on one node by default (and
//! puts and gets to MPI_Win_create windows cross-memory attach); the TCP and `aggreg` runs,
//! and those named `messages`, set `MADMPI_RMA_DIRECT=0` (neither) to keep the
//! active-message path checked on one host.

use std::time::Duration;

use madmpi_tests::harness::{c_program, Job};

fn job(name: &str, ranks: usize) -> Job {
    Job::new(&c_program("rma", name, &[]), ranks)
}

fn ok(name: &str, ranks: usize) {
    clean(&job(name, ranks).run(), name);
}

/// The job succeeded, and no process dropped a chunk it could not place (a one-sided chunk
/// for a window it no longer has, say).
fn clean(out: &madmpi_tests::harness::Outcome, name: &str) {
    out.assert_ok(name);
    assert!(
        !out.stderr.contains("madmpi: dropped"),
        "a chunk was dropped: {}",
        out.context()
    );
}

/// Over TCP, on the active-message path (on one host, windows would otherwise take the
/// direct path whatever the transport).
fn ok_tcp(name: &str, ranks: usize) {
    let out = job(name, ranks)
        .env("MADMPI_TRANSPORTS", "tcp")
        .env("MADMPI_RMA_DIRECT", "0")
        .run();
    clean(&out, name);
}

/// With the `aggreg` strategy, on the active-message path (where operations are chunks that
/// the strategy packs together).
fn ok_aggreg(name: &str, ranks: usize) {
    let out = job(name, ranks)
        .env("MADMPI_STRATEGY", "aggreg")
        .env("MADMPI_RMA_DIRECT", "0")
        .run();
    clean(&out, name);
}

/// On the active-message path over shared memory.
fn ok_messages(name: &str, ranks: usize) {
    let out = job(name, ranks).env("MADMPI_RMA_DIRECT", "0").run();
    clean(&out, name);
}

#[test]
fn fence_1() {
    ok("fence", 1);
}

#[test]
fn fence_3() {
    ok("fence", 3);
}

#[test]
fn fence_tcp_4() {
    ok_tcp("fence", 4);
}

#[test]
fn fence_aggreg_4() {
    ok_aggreg("fence", 4);
}

#[test]
fn passive_1() {
    ok("passive", 1);
}

#[test]
fn passive_4() {
    ok("passive", 4);
}

#[test]
fn passive_tcp_3() {
    ok_tcp("passive", 3);
}

#[test]
fn passive_aggreg_4() {
    ok_aggreg("passive", 4);
}

#[test]
fn unlockfree_2() {
    ok("unlockfree", 2);
}

#[test]
fn unlockfree_3() {
    ok("unlockfree", 3);
}

#[test]
fn unlockfree_tcp_2() {
    ok_tcp("unlockfree", 2);
}

#[test]
fn pscw_1() {
    ok("pscw", 1);
}

#[test]
fn pscw_4() {
    ok("pscw", 4);
}

#[test]
fn pscw_tcp_3() {
    ok_tcp("pscw", 3);
}

#[test]
fn shared_1() {
    ok("shared", 1);
}

#[test]
fn shared_4() {
    ok("shared", 4);
}

/// The segment is mapped by name: a shared window works whatever the transports.
#[test]
fn shared_tcp_3() {
    ok_tcp("shared", 3);
}

#[test]
fn pairs_1() {
    ok("pairs", 1);
}

#[test]
fn pairs_4() {
    ok("pairs", 4);
}

#[test]
fn pairs_tcp_3() {
    ok_tcp("pairs", 3);
}

#[test]
fn pairs_aggreg_3() {
    ok_aggreg("pairs", 3);
}

/// A target that makes no MPI call: a regression hangs, so the job has a timeout well under
/// the harness's default.
fn async_job(ranks: usize, tcp: bool) {
    let mut j = job("async", ranks).timeout(Duration::from_secs(90));
    if tcp {
        // (The active-message path: the target's progress thread serves the origins.)
        j = j
            .env("MADMPI_TRANSPORTS", "tcp")
            .env("MADMPI_RMA_DIRECT", "0");
    }
    j.run().assert_ok("async");
}

#[test]
fn async_2() {
    async_job(2, false);
}

#[test]
fn async_4() {
    async_job(4, false);
}

#[test]
fn async_tcp_2() {
    async_job(2, true);
}

#[test]
fn async_tcp_4() {
    async_job(4, true);
}

#[test]
fn direct_1() {
    ok("direct", 1);
}

#[test]
fn direct_2() {
    ok("direct", 2);
}

#[test]
fn direct_4() {
    ok("direct", 4);
}

/// The direct path does not depend on the transport: PSCW notices and fence barriers over
/// TCP, operations in the node-wide segment.
#[test]
fn direct_tcp_3() {
    job("direct", 3)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("direct");
}

/// The same checks on the active-message path.
#[test]
fn direct_messages_4() {
    ok_messages("direct", 4);
}

#[test]
fn passive_messages_3() {
    ok_messages("passive", 3);
}

#[test]
fn shared_messages_3() {
    ok_messages("shared", 3);
}

/// MPI_Win_create windows with puts and gets by message instead of cross-memory attach.
#[test]
fn fence_without_cma_3() {
    job("fence", 3)
        .env("MADMPI_RMA_CMA", "0")
        .run()
        .assert_ok("fence");
}

/// Large one-byte-element operations: cross-memory attach for puts and gets (default), then
/// every operation by message over shared memory and over TCP.
#[test]
fn large_1() {
    ok("large", 1);
}

#[test]
fn large_3() {
    ok("large", 3);
}

#[test]
fn large_messages_3() {
    ok_messages("large", 3);
}

#[test]
fn large_tcp_3() {
    ok_tcp("large", 3);
}

#[test]
fn fast_1() {
    ok("fast", 1);
}

#[test]
fn fast_3() {
    ok("fast", 3);
}

/// At MPI_THREAD_MULTIPLE: the fast path takes the engine lock instead of owner mode.
#[test]
fn fast_multiple_4() {
    let out = job("fast", 4).args(&["multiple"]).run();
    clean(&out, "fast");
}

/// The same program on the active-message path (no fast path at all): the results the fast
/// path must give.
#[test]
fn fast_messages_3() {
    ok_messages("fast", 3);
}

/// `dead`: a rank killed (SIGKILL) while it holds an exclusive lock on rank 0 and a shared
/// one on rank 1, under `mpirun --disable-auto-cleanup` so that the others go on: they get
/// the locks, see its write, and finish with exact counts; an operation aimed at the dead
/// rank fails with MPI_ERR_PROC_ABORTED (`strict`: where every survivor learns of the death
/// from its transport). The job's exit code is the victim's (137), and nothing of it is left
/// in `/dev/shm`.
fn dead(ranks: usize, env: &[(&str, &str)], strict: bool) {
    let tc = madmpi_tests::harness::toolchain();
    let prog = c_program("rma", "dead", &[]);
    let mut cmd = std::process::Command::new(&tc.mpirun[0]);
    cmd.args(&tc.mpirun[1..])
        .args(["--disable-auto-cleanup", "-n", &ranks.to_string()])
        .arg(&prog);
    if strict {
        cmd.arg("strict");
    }
    for &(k, v) in env {
        cmd.env(k, v);
    }
    let command = format!("mpirun --disable-auto-cleanup -n {ranks} dead {env:?}");
    let out = madmpi_tests::harness::run_command(cmd, &command, Duration::from_secs(120));
    let oks = out.stdout.lines().filter(|l| l.trim() == "OK dead").count();
    assert_eq!(oks, ranks - 1, "every survivor finishes: {}", out.context());
    madmpi_tests::harness::assert_victim_killed(&out);
    let jobid = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("jobid "))
        .expect("a jobid line")
        .trim();
    madmpi_tests::harness::assert_no_shm_left(jobid);
}

#[test]
fn dead_holder_4() {
    dead(4, &[], false);
}

#[test]
fn dead_holder_messages_4() {
    dead(4, &[("MADMPI_RMA_DIRECT", "0")], false);
}

#[test]
fn dead_holder_tcp_3() {
    dead(
        3,
        &[("MADMPI_TRANSPORTS", "tcp"), ("MADMPI_RMA_DIRECT", "0")],
        true,
    );
}

#[test]
fn dead_holder_tcp_direct_3() {
    dead(3, &[("MADMPI_TRANSPORTS", "tcp")], true);
}

#[test]
fn rfast_1() {
    ok("rfast", 1);
}

#[test]
fn rfast_3() {
    ok("rfast", 3);
}

#[test]
fn rfast_messages_3() {
    ok_messages("rfast", 3);
}

#[test]
fn rfast_tcp_3() {
    ok_tcp("rfast", 3);
}

#[test]
fn batch_1() {
    ok("batch", 1);
}

#[test]
fn batch_3() {
    ok("batch", 3);
}

#[test]
fn batch_messages_3() {
    ok_messages("batch", 3);
}

#[test]
fn batch_aggreg_3() {
    ok_aggreg("batch", 3);
}

#[test]
fn batch_tcp_2() {
    ok_tcp("batch", 2);
}

#[test]
fn batch_tcp_4() {
    ok_tcp("batch", 4);
}
