//! Several rails to one peer (`MADMPI_RAILS`): ranks of one host reached through shared memory
//! *and* TCP at once, under each strategy. The self-checking C programs of point-to-point,
//! datatypes and collectives (wildcards, non-overtaking, every send mode, truncation, derived
//! types) pass with both drivers carrying traffic; `split_balance` cuts a rendezvous over the
//! two, as the trace of the job shows.
//!
//! madmpi-specific: skipped when `MADMPI_TEST_MPICC`/`MADMPI_TEST_MPIRUN` select another MPI.

use std::collections::HashMap;

use madmpi_tests::harness::{c_program, scratch, toolchain, Job};
use serde_json::Value;

fn ours() -> bool {
    if !toolchain().ours {
        eprintln!("SKIP: rails are madmpi's");
        return false;
    }
    true
}

/// Each program over both rails, under `strategy`.
fn programs_pass(strategy: &str) {
    if !ours() {
        return;
    }
    // (directory, program, ranks): the rank counts the programs are written for.
    let progs: &[(&str, &str, usize)] = &[
        ("p2p", "ordering", 4),
        ("p2p", "sendmodes", 4),
        ("p2p", "probe", 4),
        ("p2p", "truncate", 2),
        ("p2p", "datatypes", 2),
        ("p2p", "cancel", 2),
        ("dt", "halo", 3),
        ("coll", "basic", 3),
        ("coll", "nonblocking", 4),
    ];
    for &(dir, name, ranks) in progs {
        let o = Job::new(&c_program(dir, name, &[]), ranks)
            .env("MADMPI_RAILS", "shm,tcp")
            .env("MADMPI_STRATEGY", strategy)
            .run();
        eprintln!("{name} on {ranks} ranks: {:?}", o.elapsed);
        o.assert_ok(name);
    }
}

#[test]
fn shm_and_tcp_rails_default() {
    programs_pass("default");
}

#[test]
fn shm_and_tcp_rails_adaptive() {
    programs_pass("adaptive");
}

#[test]
fn shm_and_tcp_rails_aggreg() {
    programs_pass("aggreg");
}

#[test]
fn shm_and_tcp_rails_split_balance() {
    programs_pass("split_balance");
}

/// `split_balance` over shm and tcp: the 1 MiB rendezvous of `traced.c` goes partly over each
/// rail (the receiver asks for the data pushed, and the sender cuts it by the rails'
/// bandwidth), small messages keep to the first rail (shared memory), and every byte arrives
/// (the program checks them).
#[test]
fn split_balance_uses_both_rails() {
    if !ours() {
        return;
    }
    let dir = scratch().join(format!("rails-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Job::new(&c_program("trace", "traced", &[]), 2)
        .env("MADMPI_RAILS", "shm,tcp")
        .env("MADMPI_STRATEGY", "split_balance")
        .env("MADMPI_TRACE", &dir.display().to_string())
        .run()
        .assert_ok("traced");
    let text = std::fs::read_to_string(dir.join("madmpi-trace-rank0.json")).expect("trace");
    let v: Value = serde_json::from_str(&text).expect("JSON");
    let mut data: HashMap<String, u64> = HashMap::new();
    let mut eager: HashMap<String, u64> = HashMap::new();
    for e in v["traceEvents"].as_array().expect("events") {
        if e["name"] != "packet" || e["args"]["peer"] != 1 {
            continue;
        }
        let driver = e["args"]["driver"].as_str().expect("driver").to_owned();
        for c in e["args"]["chunks"].as_array().expect("chunks") {
            let len = c["len"].as_u64().expect("len");
            match c["kind"].as_str() {
                Some("data") => *data.entry(driver.clone()).or_default() += len,
                Some("eager") => *eager.entry(driver.clone()).or_default() += 1,
                _ => {}
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    let (shm, tcp) = (data.get("shm").copied(), data.get("tcp").copied());
    assert!(
        shm.unwrap_or(0) > 0 && tcp.unwrap_or(0) > 0,
        "rendezvous data on both rails: {data:?}"
    );
    assert!(
        !eager.contains_key("tcp") && eager.get("shm").is_some_and(|&n| n > 0),
        "eager messages on the first rail only: {eager:?}"
    );
}

/// A rail that names no driver is refused with the list of the known ones.
#[test]
fn unknown_rail_is_a_clear_error() {
    if !ours() {
        return;
    }
    let o = Job::new(&c_program("p2p", "basic", &[]), 2)
        .env("MADMPI_RAILS", "shm,infiniband")
        .run();
    assert!(!o.success(), "{}", o.context());
    assert!(
        o.stderr
            .contains("MADMPI_RAILS=shm,infiniband: unknown transport 'infiniband'")
            && o.stderr.contains("self, shm, ofi, tcp, emu"),
        "{}",
        o.context()
    );
}

/// Packets sent by each driver, summed over the trace files of `ranks` ranks in `dir`.
fn packets_by_driver(dir: &std::path::Path, ranks: usize) -> HashMap<String, u64> {
    let mut n = HashMap::new();
    for r in 0..ranks {
        let text =
            std::fs::read_to_string(dir.join(format!("madmpi-trace-rank{r}.json"))).expect("trace");
        let v: Value = serde_json::from_str(&text).expect("JSON");
        for e in v["traceEvents"].as_array().expect("events") {
            if e["name"] == "packet" {
                let d = e["args"]["driver"].as_str().expect("driver").to_owned();
                *n.entry(d).or_default() += 1;
            }
        }
    }
    n
}

/// Under `aggreg` a packet the first rail's driver cannot take now (the shared-memory ring is
/// full) leaves on the second: `stress.c` (4 ranks, wildcards, random sizes up to 1 MiB, every
/// byte checked) with small rings sends part of its packets over TCP, and the receivers restore
/// the order of the messages from their sequence numbers.
#[test]
fn aggreg_takes_the_second_rail_when_the_first_is_busy() {
    if !ours() {
        return;
    }
    let dir = scratch().join(format!("rails-aggreg-{}", std::process::id()));
    let mut seen = Vec::new();
    // Whether a ring fills is up to the scheduler of this host: a few tries.
    for _ in 0..3 {
        let _ = std::fs::remove_dir_all(&dir);
        Job::new(&c_program("p2p", "stress", &[]), 4)
            .args(&["300"])
            .env("MADMPI_RAILS", "shm,tcp")
            .env("MADMPI_STRATEGY", "aggreg")
            .env("MADMPI_SHM_RING_BYTES", "16K")
            .env("MADMPI_TRACE", &dir.display().to_string())
            .run()
            .assert_ok("stress");
        let n = packets_by_driver(&dir, 4);
        if n.get("tcp").is_some_and(|&k| k > 0) {
            let _ = std::fs::remove_dir_all(&dir);
            return;
        }
        seen.push(n);
    }
    panic!("no packet took the second rail: {seen:?}");
}
