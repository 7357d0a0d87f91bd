//! Point-to-point, requests, statuses and error handling of the C interface: the self-checking
//! C programs of `tests/c/p2p/` built with `bin/mpicc` and run under `bin/mpirun` on 1 to 4
//! ranks. A passing program prints `OK <name>`; a failing check aborts the job.
//!
//! `MADMPI_TEST_MPICC=mpicc.mpich MADMPI_TEST_MPIRUN=mpiexec.mpich cargo test --test p2p` runs
//! the same programs against MPICH (they skip the checks of madmpi's own choices), which is how
//! the tests themselves were checked.

use std::time::Duration;

use madmpi_tests::harness::{c_program, toolchain, Job, Outcome};

fn prog(name: &str) -> std::path::PathBuf {
    let extra: &[&str] = if ["threads", "funneled", "latency_mt", "bsend_threads"].contains(&name) {
        &["-pthread"]
    } else {
        &[]
    };
    c_program("p2p", name, extra)
}

fn run(name: &str, ranks: usize) -> Outcome {
    Job::new(&prog(name), ranks).run()
}

fn ok(name: &str, ranks: usize) {
    run(name, ranks).assert_ok(name);
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
fn sendmodes_2() {
    ok("sendmodes", 2);
}

#[test]
fn sendmodes_4() {
    ok("sendmodes", 4);
}

#[test]
fn sendmodes_aggreg_strategy() {
    Job::new(&prog("sendmodes"), 2)
        .env("MADMPI_STRATEGY", "aggreg")
        .run()
        .assert_ok("sendmodes");
}

/// `aggreg` packs small non-blocking sends as they are posted: cancellation, completion
/// calls, ordering and truncation behave as with `default`.
#[test]
fn requests_aggreg_strategy() {
    for name in [
        "cancel",
        "completion",
        "ordering",
        "truncate",
        "persistent",
        "complete_at_post",
    ] {
        Job::new(&prog(name), 2)
            .env("MADMPI_STRATEGY", "aggreg")
            .run()
            .assert_ok(name);
    }
}

/// The one-chunk-per-packet strategy, no longer the default, still passes the request tests.
#[test]
fn requests_default_strategy() {
    for name in [
        "sendmodes",
        "cancel",
        "completion",
        "ordering",
        "persistent",
    ] {
        Job::new(&prog(name), 2)
            .env("MADMPI_STRATEGY", "default")
            .run()
            .assert_ok(name);
    }
}

/// A send complete when posted (`aggreg` copies it into the packet being built) still leaves
/// when MPI_Wait, MPI_Test or MPI_Waitall returns or an MPI_Irecv is posted, not at the
/// sender's next MPI call (the receiver tells the sender, which makes no MPI call meanwhile,
/// through a file).
#[test]
fn complete_sends_leave_at_completion() {
    for strategy in ["aggreg", "default", "adaptive"] {
        Job::new(&prog("leave"), 2)
            .env("MADMPI_STRATEGY", strategy)
            .run()
            .assert_ok("leave");
    }
}

#[test]
fn sendmodes_without_cma() {
    // Rendezvous data in fragments instead of cross-memory attach.
    Job::new(&prog("sendmodes"), 2)
        .env("MADMPI_SHM_CMA", "0")
        .run()
        .assert_ok("sendmodes");
}

/// The shm driver's split-copy counters in rank `rank`'s trace (`driver counters`, written
/// at MPI_Finalize): (split gets, chunks it copied itself, chunks the sender copied, chunks it
/// copied for others).
fn split_counters(dir: &std::path::Path, rank: u32) -> (u64, u64, u64, u64) {
    let path = dir.join(format!("madmpi-trace-rank{rank}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no trace at {}: {e}", path.display()));
    let v: serde_json::Value = serde_json::from_str(&text).expect("trace is JSON");
    let e = v["traceEvents"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["name"] == "driver counters" && e["args"]["driver"] == "shm")
        .unwrap_or_else(|| panic!("rank {rank}: no shm driver counters in the trace"));
    let c = |k: &str| {
        e["args"][k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k} in {e}"))
    };
    (
        c("split_gets"),
        c("split_chunks_mine"),
        c("split_chunks_theirs"),
        c("split_chunks_helped"),
    )
}

/// Large messages over shared memory are copied by both processes at once (a split copy):
/// `split.c` checks the data in every situation (both directions, several in flight,
/// truncation, unaligned, a busy sender); the trace shows the receiver splitting and the
/// sender writing some chunks. Without cross-memory attach, or with splitting off, nothing is
/// split and the data is the same.
#[test]
fn split_copies() {
    let dir = madmpi_tests::harness::scratch().join(format!("split-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut job = Job::new(&prog("split"), 2);
    if toolchain().ours {
        job = job.env("MADMPI_TRACE", &dir.display().to_string());
    }
    job.run().assert_ok("split");
    if !toolchain().ours {
        return;
    }
    // Rank 1 receives one way, both ranks in the exchange.
    let (gets, _, theirs, _) = split_counters(&dir, 1);
    let (_, _, _, written) = split_counters(&dir, 0);
    assert!(gets >= 50, "rank 1 split only {gets} receives");
    assert!(
        theirs > 0 && written > 0,
        "the sender never copied a chunk: rank 1 saw {theirs} chunks copied by rank 0, which \
         says it wrote {written}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    for (k, v) in [("MADMPI_SHM_SPLIT_MIN", "0"), ("MADMPI_SHM_CMA", "0")] {
        let dir =
            madmpi_tests::harness::scratch().join(format!("split-{v}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Job::new(&prog("split"), 2)
            .env(k, v)
            .env("MADMPI_TRACE", &dir.display().to_string())
            .run()
            .assert_ok("split");
        for rank in [0, 1] {
            let (n, _, _, _) = split_counters(&dir, rank);
            assert_eq!(n, 0, "{k}={v}: rank {rank} split {n} receives");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn ordering_2() {
    ok("ordering", 2);
}

#[test]
fn ordering_4() {
    ok("ordering", 4);
}

#[test]
fn selfsend_1() {
    ok("selfsend", 1);
}

#[test]
fn selfsend_2() {
    ok("selfsend", 2);
}

#[test]
fn truncate_2() {
    ok("truncate", 2);
}

#[test]
fn persistent_2() {
    ok("persistent", 2);
}

#[test]
fn completion_2() {
    ok("completion", 2);
}

#[test]
fn completion_3() {
    ok("completion", 3);
}

#[test]
fn cancel_2() {
    ok("cancel", 2);
}

/// Sends complete when posted (packed into the packet being built) share one request handle
/// that every completion call, MPI_Request_free, MPI_Request_get_status and MPI_Cancel take.
#[test]
fn complete_at_post_2() {
    ok("complete_at_post", 2);
}

#[test]
fn probe_2() {
    ok("probe", 2);
}

#[test]
fn probe_4() {
    ok("probe", 4);
}

/// Waiting by polling (Iprobe, Improbe, Test, Testany, Testsome, Testall,
/// Request_get_status in application loops) on a ring, with more ranks than CPUs as the
/// library sees it: fruitless polls yield the CPU after a few, and report exactly what is
/// there.
#[test]
fn polling_4_shared_cpus() {
    Job::new(&prog("polling"), 4)
        .env("MADMPI_HOST_CPUS", "1")
        .run()
        .assert_ok("polling");
}

/// The same with the spin budget of dedicated CPUs.
#[test]
fn polling_3() {
    Job::new(&prog("polling"), 3)
        .env("MADMPI_HOST_CPUS", "64")
        .run()
        .assert_ok("polling");
}

#[test]
fn bsend_2() {
    ok("bsend", 2);
}

/// Buffered sends from 4 threads filling the attached buffer, round after round: the room of
/// a round's messages, all received (a barrier says so), serves the next round.
#[test]
fn bsend_threads_2() {
    ok("bsend_threads", 2);
}

#[test]
fn sendrecv_1() {
    ok("sendrecv", 1);
}

#[test]
fn sendrecv_3() {
    ok("sendrecv", 3);
}

#[test]
fn datatypes_2() {
    ok("datatypes", 2);
}

#[test]
fn threads_2() {
    ok("threads", 2);
}

#[test]
fn errors_2() {
    ok("errors", 2);
}

#[test]
fn status_1() {
    ok("status", 1);
}

#[test]
fn stress_4() {
    let o = Job::new(&prog("stress"), 4)
        .args(&["1500"])
        .timeout(Duration::from_secs(300))
        .run();
    o.assert_ok("stress");
}

#[test]
fn stress_4_aggreg() {
    let o = Job::new(&prog("stress"), 4)
        .args(&["600"])
        .env("MADMPI_STRATEGY", "aggreg")
        .timeout(Duration::from_secs(300))
        .run();
    o.assert_ok("stress");
}

// ------------------------------------------------------------------------------------ fatal errors

/// Run `fatal <mode>` on 2 ranks: the job must fail (not time out), never print UNREACHABLE,
/// and its stderr must hold every one of `needles`.
fn fatal(mode: &str, needles: &[&str]) -> Outcome {
    let o = Job::new(&prog("fatal"), 2)
        .args(&[mode])
        .timeout(Duration::from_secs(60))
        .run();
    assert!(!o.timed_out, "the job did not end: {}", o.context());
    assert!(o.code != Some(0), "the job succeeded: {}", o.context());
    assert!(
        !o.stdout.contains("UNREACHABLE"),
        "a rank went on after the error: {}",
        o.context()
    );
    if toolchain().ours {
        for n in needles {
            assert!(o.stderr.contains(n), "stderr lacks {n:?}: {}", o.context());
        }
    }
    o
}

#[test]
fn fatal_invalid_rank() {
    let o = fatal("rank", &["MPI_Send", "MPI_ERR_RANK", "rank 1"]);
    if toolchain().ours {
        let line = o
            .stderr
            .lines()
            .find(|l| l.contains("MPI_ERR_RANK"))
            .expect("checked");
        assert!(
            line.contains("dest=7") && line.contains("7"),
            "the message names the rank: {line}"
        );
    }
}

#[test]
fn fatal_truncate() {
    fatal("truncate", &["MPI_Recv", "MPI_ERR_TRUNCATE"]);
}

#[test]
fn fatal_null_comm() {
    fatal("comm", &["MPI_Send", "MPI_ERR_COMM", "MPI_COMM_NULL"]);
}

#[test]
fn errors_abort_handler() {
    fatal("count", &["MPI_Recv", "MPI_ERR_COUNT"]);
}

#[test]
fn fatal_before_init() {
    fatal("uninit", &["MPI_Send", "MPI_ERR_OTHER", "not initialized"]);
}

#[test]
fn fatal_after_finalize() {
    fatal("finalized", &["MPI_Barrier", "MPI_ERR_OTHER", "finalized"]);
}

#[test]
fn abort_ends_the_job() {
    fatal("abort", &["MPI_Abort"]);
}

#[test]
fn fatal_spawn_of_a_missing_program() {
    fatal(
        "spawn",
        &["MPI_Comm_spawn", "no-such-program-madmpi", "MPI_ERR_SPAWN"],
    );
}

/// The programs of this suite and the rank counts they run with, for the transport matrix.
const SUITE: &[(&str, usize)] = &[
    ("basic", 3),
    ("sendmodes", 4),
    ("ordering", 4),
    ("selfsend", 2),
    ("truncate", 2),
    ("persistent", 2),
    ("completion", 3),
    ("cancel", 2),
    ("complete_at_post", 2),
    ("probe", 4),
    ("bsend", 2),
    ("bsend_threads", 2),
    ("sendrecv", 3),
    ("datatypes", 2),
    ("threads", 2),
    ("errors", 2),
    ("stress", 4),
];

fn matrix(env: &[(&str, &str)]) {
    for &(name, ranks) in SUITE {
        let mut job = Job::new(&prog(name), ranks).timeout(Duration::from_secs(120));
        for (k, v) in env {
            job = job.env(k, v);
        }
        job.run().assert_ok(name);
    }
}

/// The whole suite with every rank pair over TCP (as between hosts).
#[test]
fn suite_over_tcp() {
    matrix(&[("MADMPI_TRANSPORTS", "tcp")]);
}

/// The whole suite with ranks split into two pseudo-hosts: shared memory inside each, TCP
/// between them, so one job mixes both drivers (and ANY_SOURCE receives see both).
#[test]
fn suite_mixed_shm_and_tcp() {
    matrix(&[("MADMPI_FAKE_HOSTS", "2")]);
}

#[test]
fn funneled_2() {
    // MPI_THREAD_FUNNELED: a second thread's call is refused, the owner's traffic goes on.
    ok("funneled", 2);
}

/// The shape of OSU's `osu_latency_mt`: 2 ranks x 4 threads at MPI_THREAD_MULTIPLE exchange
/// messages of every size up to 4 MiB concurrently (each thread on its own tag), every byte
/// checked and a clean finish (times are the benchmarks' business).
#[test]
fn latency_mt_threads_exchange_large_messages() {
    Job::new(&prog("latency_mt"), 2)
        .args(&["4", "4"])
        .run()
        .assert_ok("latency_mt");
}

/// `dead`: the last rank kills itself (SIGKILL) while every other rank is blocked in an
/// operation only it could complete (MPI_Recv, MPI_Wait, MPI_Waitany, MPI_Probe, a
/// rendezvous MPI_Send, an MPI_ANY_SOURCE MPI_Recv, MPI_Test and MPI_Iprobe loops: 9 ranks try
/// them all), under `mpirun --disable-auto-cleanup` so that the others go on. With
/// MPI_ERRORS_RETURN each fails with MPI_ERR_PROC_ABORTED, as do the operations with the dead
/// rank begun later, while the survivors still talk to each other; with "fatal"
/// (MPI_ERRORS_ARE_FATAL) the job ends with a message naming the call and the dead rank. Over
/// shared memory, where nothing reports the death and waits look for it, and over TCP, where
/// the connection does: both must agree. Nothing of the job is left in `/dev/shm`.
fn dead(ranks: usize, transports: Option<&str>, fatal: bool) -> Outcome {
    let tc = toolchain();
    let mut cmd = std::process::Command::new(&tc.mpirun[0]);
    cmd.args(&tc.mpirun[1..])
        .args(["--disable-auto-cleanup", "-n", &ranks.to_string()])
        .arg(prog("dead"));
    if fatal {
        cmd.arg("fatal");
    }
    match transports {
        Some(t) => cmd.env("MADMPI_TRANSPORTS", t),
        None => cmd.env_remove("MADMPI_TRANSPORTS"),
    };
    let command = format!(
        "mpirun --disable-auto-cleanup -n {ranks} dead{} (transports {transports:?})",
        if fatal { " fatal" } else { "" }
    );
    let out = madmpi_tests::harness::run_command(cmd, &command, Duration::from_secs(120));
    assert!(!out.timed_out, "the job hangs: {}", out.context());
    if let Some(jobid) = (out.stdout.lines()).find_map(|l| l.strip_prefix("jobid ")) {
        madmpi_tests::harness::assert_no_shm_left(jobid);
    }
    out
}

/// Every survivor saw its operation fail with MPI_ERR_PROC_ABORTED and finished.
fn survivors_finish(out: &Outcome, ranks: usize) {
    let oks: Vec<&str> = (out.stdout.lines())
        .filter(|l| l.starts_with("OK dead"))
        .collect();
    assert_eq!(
        oks.len(),
        ranks - 1,
        "every survivor finishes: {}",
        out.context()
    );
    for how in [
        "MPI_Recv)",
        "MPI_Wait)",
        "MPI_Waitany)",
        "MPI_Probe)",
        "MPI_Send (rendezvous))",
        "MPI_Recv (MPI_ANY_SOURCE))",
        "MPI_Test loop)",
        "MPI_Iprobe loop)",
    ]
    .iter()
    .take(ranks - 1)
    {
        assert!(
            oks.iter().any(|l| l.ends_with(how)),
            "no survivor blocked in {how}: {}",
            out.context()
        );
    }
    madmpi_tests::harness::assert_victim_killed(out);
}

#[test]
fn dead_peer_fails_operations_shm_9() {
    survivors_finish(&dead(9, None, false), 9);
}

#[test]
fn dead_peer_fails_operations_tcp_9() {
    survivors_finish(&dead(9, Some("tcp"), false), 9);
}

/// With MPI_ERRORS_ARE_FATAL a survivor's MPI_Recv from the dead rank ends the job with the
/// call, the dead rank and the error class in its message.
fn dead_fatal(transports: Option<&str>) {
    let out = dead(3, transports, true);
    assert!(!out.success(), "{}", out.context());
    assert!(!out.stdout.contains("OK dead"), "{}", out.context());
    assert!(
        out.stderr.contains("MPI_Recv(")
            && out.stderr.contains("[dead: rank 2")
            && out.stderr.contains("MPI_ERR_PROC_ABORTED"),
        "the message names the call, the dead rank and the class: {}",
        out.context()
    );
}

#[test]
fn dead_peer_fatal_shm_3() {
    dead_fatal(None);
}

#[test]
fn dead_peer_fatal_tcp_3() {
    dead_fatal(Some("tcp"));
}
