//! The shared-memory collectives (`docs/collectives.md`, "Shared memory"): the C program
//! `tests/c/coll/shm.c` — thousands of back-to-back barriers and small collectives with
//! checksums, several communicators interleaved with user point-to-point traffic, sizes around
//! the chunk boundaries up to 1 MiB, derived datatypes, a non-commutative operation, more
//! communicators than areas — on 1 to 7 ranks, through shared memory and through every
//! fallback: TCP only, communicators spanning (pseudo-)hosts, the point-to-point algorithms
//! forced, two processes over TCP (no schedule). The program reports how many collective
//! segments rank 0 had mapped, which tells whether the shared-memory path ran.

use std::time::Duration;

use madmpi_tests::harness::{c_program, toolchain, Job, Outcome};

fn job(ranks: usize, iters: usize) -> Job {
    Job::new(&c_program("coll", "shm", &[]), ranks)
        .args(&[&iters.to_string()])
        .timeout(Duration::from_secs(240))
}

/// The `shm-areas N` line of a passing run.
fn areas(o: &Outcome) -> usize {
    o.assert_ok("shm");
    o.stdout
        .lines()
        .find_map(|l| l.strip_prefix("shm-areas "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no shm-areas line: {}", o.context()))
}

#[test]
fn shared_memory_1_to_7_ranks() {
    for n in 1..=7 {
        let o = job(n, 2000).run();
        let a = areas(&o);
        if toolchain().ours && n > 1 {
            // MPI_COMM_WORLD, and the split communicator of rank 0 once it has two members.
            let want = if n >= 3 { 2 } else { 1 };
            assert!(
                a >= want,
                "{n} ranks: {a} collective segments\n{}",
                o.context()
            );
        }
    }
}

#[test]
fn shared_memory_forced_and_no_cma() {
    let o = job(4, 1000)
        .env("MADMPI_COLL_BARRIER", "shm")
        .env("MADMPI_COLL_BCAST", "shm")
        .env("MADMPI_COLL_REDUCE", "shm")
        .env("MADMPI_COLL_ALLREDUCE", "shm")
        .env("MADMPI_COLL_ALLTOALL", "shm")
        .env("MADMPI_SHM_CMA", "0")
        .run();
    let a = areas(&o);
    if toolchain().ours {
        assert!(a >= 2, "{a} collective segments\n{}", o.context());
    }
}

/// Over TCP there is no node segment: everything runs point-to-point (two processes without
/// a schedule, see `coll/direct.rs`).
#[test]
fn fallback_tcp_only() {
    for n in [2, 3, 5] {
        let o = job(n, 500).env("MADMPI_TRANSPORTS", "tcp").run();
        assert_eq!(areas(&o), 0, "{}", o.context());
    }
}

/// Every blocking collective against its reference on two processes over TCP (the direct
/// two-process path: barrier, bcast, allreduce, alltoall).
#[test]
fn two_processes_over_tcp() {
    Job::new(&c_program("coll", "basic", &[]), 2)
        .env("MADMPI_TRANSPORTS", "tcp")
        .timeout(Duration::from_secs(120))
        .run()
        .assert_ok("basic");
}

/// Two pseudo-hosts (rank mod 2): MPI_COMM_WORLD spans both and stays on point-to-point, the
/// split by rank parity lies within one and gets an area.
#[test]
fn fallback_across_hosts_and_shm_within() {
    if !toolchain().ours {
        return;
    }
    for n in [4, 5] {
        let o = job(n, 500).env("MADMPI_FAKE_HOSTS", "2").run();
        assert_eq!(areas(&o), 1, "{}", o.context());
    }
}

/// The point-to-point algorithms forced: no area at all.
#[test]
fn fallback_point_to_point_forced() {
    let o = job(4, 500)
        .env("MADMPI_COLL_BARRIER", "dissemination")
        .env("MADMPI_COLL_BCAST", "binomial")
        .env("MADMPI_COLL_REDUCE", "binomial")
        .env("MADMPI_COLL_ALLREDUCE", "recursive_doubling")
        .env("MADMPI_COLL_ALLTOALL", "linear")
        .run();
    assert_eq!(areas(&o), 0, "{}", o.context());
}

/// Groups beyond the flat barrier (tree barrier with a release counter).
#[test]
fn shared_memory_ten_ranks() {
    let o = job(10, 300).run();
    let a = areas(&o);
    if toolchain().ours {
        assert!(a >= 2, "{a} collective segments\n{}", o.context());
    }
}

/// Large allreduce and reduce (`tests/c/coll/bigreduce.c`): sizes around the 64 KiB threshold
/// of the cross-memory path and its pieces, odd counts (reduced to every root: the
/// two-process reduce's larger share for the root), in place, every root, a non-commutative
/// operation (to every root), a strided derived datatype, guard words past the vectors, and
/// `MPI_Iallreduce` (in place and not: Rabenseifner reading the contribution where it is), on
/// 2, 3 and 4 ranks; through shared memory (with and without cross-memory attach) and over TCP.
#[test]
fn large_reductions() {
    let job = |n: usize| {
        Job::new(&c_program("coll", "bigreduce", &[]), n)
            .args(&["1"])
            .timeout(Duration::from_secs(300))
    };
    for n in [2, 3, 4] {
        job(n).run().assert_ok("bigreduce");
    }
    job(3)
        .env("MADMPI_SHM_CMA", "0")
        .run()
        .assert_ok("bigreduce");
    for n in [2, 3] {
        job(n)
            .env("MADMPI_TRANSPORTS", "tcp")
            .run()
            .assert_ok("bigreduce");
    }
}

/// Large `MPI_Iallreduce` (`tests/c/coll/iallreduce.c`): every predefined commutative
/// operation on its types and a user one, odd counts with a guard element, in place, a
/// strided datatype, twelve in flight on one communicator among blocking collectives and an
/// `MPI_Ibcast`, a persistent request, a communicator without its area yet and one whose
/// area is made between one rank's start and the others'. On 4 ranks the path by
/// cross-memory attach is the default from 128 KiB; it is forced on 3 and 5, and its
/// fallback runs without cross-memory attach and over TCP.
#[test]
fn large_iallreduce() {
    let job = |n: usize| {
        Job::new(&c_program("coll", "iallreduce", &[]), n).timeout(Duration::from_secs(300))
    };
    for n in [3, 4, 5] {
        job(n).run().assert_ok("iallreduce");
    }
    for n in [3, 5] {
        job(n)
            .env("MADMPI_COLL_ALLREDUCE", "cma")
            .run()
            .assert_ok("iallreduce");
    }
    job(4)
        .env("MADMPI_SHM_CMA", "0")
        .run()
        .assert_ok("iallreduce");
    job(3)
        .env("MADMPI_TRANSPORTS", "tcp")
        .run()
        .assert_ok("iallreduce");
}

/// `iallreduce_dead`: the last of 4 ranks kills itself before starting its part of a large
/// `MPI_Iallreduce` (the others wait for its addresses) or just after (they may be reading
/// its memory, and wait for its last message), under `mpirun --disable-auto-cleanup`: every
/// survivor's `MPI_Wait` fails with MPI_ERR_PROC_ABORTED instead of hanging, and the
/// survivors still reduce among themselves.
#[test]
fn large_iallreduce_with_a_dead_rank() {
    let tc = toolchain();
    if !tc.ours {
        return;
    }
    for when in ["before", "after"] {
        let mut cmd = std::process::Command::new(&tc.mpirun[0]);
        cmd.args(&tc.mpirun[1..])
            .args(["--disable-auto-cleanup", "-n", "4"])
            .arg(c_program("coll", "iallreduce_dead", &[]))
            .arg(when)
            .env_remove("MADMPI_TRANSPORTS");
        let what = format!("mpirun --disable-auto-cleanup -n 4 iallreduce_dead {when}");
        let out = madmpi_tests::harness::run_command(cmd, &what, Duration::from_secs(120));
        assert!(!out.timed_out, "the job hangs: {}", out.context());
        let oks = (out.stdout.lines())
            .filter(|l| l.starts_with("OK iallreduce_dead"))
            .count();
        assert_eq!(oks, 3, "every survivor finishes: {}", out.context());
    }
}
