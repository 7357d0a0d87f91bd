//! Collectives, communicators, groups, topologies, attributes, info objects and reduction
//! operations of the C interface: the self-checking C programs of `tests/c/coll/` built with
//! `bin/mpicc` and run under `bin/mpirun` on 1 to 7 ranks (odd sizes included). A passing
//! program prints `OK <name>`; a failing check aborts the job.
//!
//! - `basic`: every blocking collective against a sequential reference (IN_PLACE, derived
//!   datatypes, sub-communicators), also with every algorithm forced through
//!   `MADMPI_COLL_<NAME>` (see `docs/collectives.md`);
//! - `nonblocking`: MPI_I* collectives in flight together, overlapped with point-to-point;
//! - `ops`: every operation × type pair, MINLOC/MAXLOC ties, user operations in rank order;
//! - `comm`, `inter`, `topo`: communicator management, intercommunicators, topologies and
//!   neighbourhood collectives;
//! - `errstate`: erroneous calls under MPI_ERRORS_RETURN, each followed by valid ones.
//!
//! `MADMPI_TEST_MPICC=mpicc.mpich MADMPI_TEST_MPIRUN=mpiexec.mpich cargo test --test
//! collectives` runs the same programs against MPICH (they skip the checks of madmpi's own
//! choices and of MPICH's known defects), which is how the tests themselves were checked.

use std::time::Duration;

use madmpi_tests::harness::{c_program, toolchain, Job};

fn job(name: &str, ranks: usize) -> Job {
    Job::new(&c_program("coll", name, &[]), ranks).timeout(Duration::from_secs(90))
}

fn ok(name: &str, ranks: usize) {
    job(name, ranks).run().assert_ok(name);
}

fn ok_sizes(name: &str, sizes: &[usize]) {
    for &n in sizes {
        ok(name, n);
    }
}

#[test]
fn basic_1_to_7() {
    ok_sizes("basic", &[1, 2, 3, 4, 5, 6, 7]);
}

/// Every algorithm of every collective, forced: the alternatives to the defaults, then the
/// defaults' counterparts, on a power of two and on odd sizes.
#[test]
fn basic_every_algorithm() {
    let sets: &[&[(&str, &str)]] = &[
        &[
            ("MADMPI_COLL_BCAST", "scatter_allgather"),
            ("MADMPI_COLL_REDUCE", "rabenseifner"),
            ("MADMPI_COLL_ALLREDUCE", "rabenseifner"),
            ("MADMPI_COLL_GATHER", "binomial"),
            ("MADMPI_COLL_SCATTER", "binomial"),
            ("MADMPI_COLL_ALLGATHER", "ring"),
            ("MADMPI_COLL_ALLTOALL", "pairwise"),
            ("MADMPI_COLL_REDUCE_SCATTER", "pairwise"),
        ],
        &[
            ("MADMPI_COLL_BCAST", "binomial"),
            ("MADMPI_COLL_REDUCE", "binomial"),
            ("MADMPI_COLL_ALLREDUCE", "recursive_doubling"),
            ("MADMPI_COLL_GATHER", "linear"),
            ("MADMPI_COLL_SCATTER", "linear"),
            ("MADMPI_COLL_ALLGATHER", "bruck"),
            ("MADMPI_COLL_ALLTOALL", "linear"),
            ("MADMPI_COLL_REDUCE_SCATTER", "allreduce"),
        ],
        &[("MADMPI_COLL_ALLREDUCE", "reduce_bcast")],
        &[("MADMPI_COLL_ALLREDUCE", "linear")],
        &[("MADMPI_COLL_ALLREDUCE", "cma")],
    ];
    for set in sets {
        for n in [3, 4, 7] {
            let mut j = job("basic", n);
            for (k, v) in *set {
                j = j.env(k, v);
            }
            j.run().assert_ok("basic");
        }
    }
}

#[test]
fn basic_aggregating_strategy_without_cma() {
    job("basic", 5)
        .env("MADMPI_STRATEGY", "aggreg")
        .env("MADMPI_SHM_CMA", "0")
        .run()
        .assert_ok("basic");
}

#[test]
fn unknown_algorithm_is_reported() {
    if !toolchain().ours {
        return;
    }
    let out = job("basic", 2).env("MADMPI_COLL_BCAST", "quantum").run();
    assert!(!out.success(), "{}", out.context());
    assert!(
        out.stderr.contains("MADMPI_COLL_BCAST=quantum") && out.stderr.contains("binomial"),
        "{}",
        out.context()
    );
}

#[test]
fn nonblocking_overlap() {
    ok_sizes("nonblocking", &[1, 2, 3, 4, 7]);
}

/// Over TCP every blocking collective goes through point-to-point messages (no shared-memory
/// path), where blocking and non-blocking collectives started in different orders must still
/// keep apart (`orders_apart` in `nonblocking.c`).
#[test]
fn nonblocking_overlap_over_tcp() {
    for n in [2, 3] {
        job("nonblocking", n)
            .env("MADMPI_TRANSPORTS", "tcp")
            .run()
            .assert_ok("nonblocking");
    }
}

#[test]
fn ops_every_type() {
    ok_sizes("ops", &[1, 2, 3, 5, 7]);
}

#[test]
fn communicators_groups_attributes_info() {
    ok_sizes("comm", &[1, 2, 3, 4, 7]);
}

/// Context-id agreements from 4 threads at once, with MPI_Comm_dup of MPI_COMM_SELF between
/// MPI_Comm_create_group calls (MPICH's `threads/comm/comm_create_group_threads` hung).
#[test]
fn communicators_made_from_threads() {
    for n in [1, 2, 4] {
        Job::new(&c_program("coll", "ctx_threads", &["-pthread"]), n)
            .timeout(Duration::from_secs(120))
            .run()
            .assert_ok("ctx_threads");
    }
}

#[test]
fn intercommunicators() {
    ok_sizes("inter", &[2, 3, 4, 5, 7]);
}

#[test]
fn topologies_and_neighbor_collectives() {
    ok_sizes("topo", &[1, 2, 3, 4, 6, 7]);
}

/// Erroneous calls under MPI_ERRORS_RETURN (bad arguments everywhere, truncation in a receive
/// and in collectives, too small and too large blocks) leave nothing behind: the valid
/// collectives and point-to-point exchanges after each one succeed with the right data, over
/// shared memory and over the point-to-point algorithms.
#[test]
fn errors_leave_no_state_behind() {
    ok_sizes("errstate", &[2, 3, 4]);
    let p2p = [
        ("MADMPI_COLL_BCAST", "binomial"),
        ("MADMPI_COLL_ALLREDUCE", "recursive_doubling"),
        ("MADMPI_COLL_ALLTOALL", "pairwise"),
        ("MADMPI_COLL_GATHER", "binomial"),
        ("MADMPI_COLL_SCATTER", "binomial"),
        ("MADMPI_COLL_ALLGATHER", "ring"),
    ];
    for n in [2, 3] {
        let mut j = job("errstate", n);
        for (k, v) in p2p {
            j = j.env(k, v);
        }
        j.run().assert_ok("errstate");
    }
}

/// Every communicator constructor with MPI_UNDEFINED or an empty group on some processes:
/// those get MPI_COMM_NULL (MPI_Comm_create_group with MPI_GROUP_EMPTY too, a local call),
/// the others a working communicator, on intra- and intercommunicators.
#[test]
fn constructors_with_undefined_and_empty_groups() {
    ok_sizes("nullcomm", &[2, 3, 4, 5]);
}

/// Intercommunicator collectives with what may differ between the groups (alltoall,
/// allgather and alltoallv counts) and with garbage in the arguments that are not significant
/// (MPI_PROC_NULL processes, the root's send or receive side), blocking and non-blocking.
#[test]
fn intercommunicator_significant_arguments() {
    ok_sizes("intersig", &[2, 3, 4, 5]);
}
