//! The emulated networks (`MADMPI_TRANSPORTS=emu`, `MADMPI_EMU`): the self-checking C programs
//! of point-to-point, datatypes and collectives pass over Myrinet/BIP (credits, receiver
//! handshake), SCI (64-byte PIO, double buffering), VIA (registration, credits) and BCL-3 over
//! a lossy link (drops and bit flips, recovered by CRC, ACK/NAK and retransmission), and over
//! two emulated NICs at once (BIP + SCI rails) under each strategy. Timing is not checked
//! here (the machine is shared): `bench/runner --bench networks` measures it.
//!
//! madmpi-specific: skipped when `MADMPI_TEST_MPICC`/`MADMPI_TEST_MPIRUN` select another MPI.

use std::collections::HashMap;

use madmpi_tests::harness::{c_program, scratch, toolchain, Job};
use serde_json::Value;

fn ours() -> bool {
    if !toolchain().ours {
        eprintln!("SKIP: the emulated networks are madmpi's");
        return false;
    }
    true
}

/// The eight programs over the networks `emu` (one name, or a list: rails), with `extra`
/// variables.
fn programs_pass(emu: &str, extra: &[(&str, &str)]) {
    let progs: &[Prog] = &[
        ("p2p", "ordering", 4, &[], &[]),
        ("p2p", "sendmodes", 4, &[], &[]),
        ("p2p", "probe", 2, &[], &[]),
        ("p2p", "truncate", 2, &[], &[]),
        ("p2p", "datatypes", 2, &[], &[]),
        ("dt", "halo", 3, &[], &[]),
        ("coll", "basic", 3, &[], &[]),
        ("coll", "nonblocking", 4, &[], &[]),
    ];
    suite_passes(progs, emu, extra);
}

#[test]
fn programs_over_bip() {
    programs_pass("bip", &[]);
}

#[test]
fn programs_over_sisci_with_dma() {
    programs_pass("sisci", &[("MADMPI_EMU_SCI_DMA", "1")]);
}

#[test]
fn programs_over_via() {
    programs_pass("via", &[("MADMPI_STRATEGY", "aggreg")]);
}

#[test]
fn programs_over_lossy_bcl3() {
    programs_pass("bcl3", &[("MADMPI_EMU_LOSS", "1e-4")]);
    // Ten times lossier: many more retransmissions, same results.
    programs_pass("bcl3", &[("MADMPI_EMU_LOSS", "1e-3")]);
}

#[test]
fn programs_over_bip_and_sisci_rails() {
    for s in ["default", "aggreg", "split_balance"] {
        programs_pass("bip,sisci", &[("MADMPI_STRATEGY", s)]);
    }
}

/// One program of the suite: its directory, name, ranks, compiler flags and arguments.
type Prog = (
    &'static str,
    &'static str,
    usize,
    &'static [&'static str],
    &'static [&'static str],
);

const PT: &[&str] = &["-pthread"];

/// Every self-checking program of `tests/c/p2p` but those about failures of the job
/// (`fatal`, `dead`: aborts and killed ranks, which `p2p.rs` checks), at the rank counts the
/// p2p suite runs them with.
const P2P: &[Prog] = &[
    ("p2p", "basic", 3, &[], &[]),
    ("p2p", "sendmodes", 4, &[], &[]),
    ("p2p", "ordering", 4, &[], &[]),
    ("p2p", "selfsend", 2, &[], &[]),
    ("p2p", "truncate", 2, &[], &[]),
    ("p2p", "persistent", 2, &[], &[]),
    ("p2p", "completion", 3, &[], &[]),
    ("p2p", "cancel", 2, &[], &[]),
    ("p2p", "probe", 4, &[], &[]),
    ("p2p", "bsend", 2, &[], &[]),
    ("p2p", "sendrecv", 3, &[], &[]),
    ("p2p", "datatypes", 2, &[], &[]),
    ("p2p", "threads", 2, PT, &[]),
    ("p2p", "errors", 2, &[], &[]),
    ("p2p", "status", 1, &[], &[]),
    ("p2p", "stress", 4, &[], &[]),
    ("p2p", "split", 2, &[], &[]),
    ("p2p", "leave", 2, &[], &[]),
    ("p2p", "polling", 3, &[], &[]),
    ("p2p", "funneled", 2, PT, &[]),
    ("p2p", "latency_mt", 2, PT, &["4", "4"]),
];

/// Every program of `tests/c/dt`.
const DT: &[Prog] = &[
    ("dt", "constructors", 2, &[], &[]),
    ("dt", "bottom", 2, &[], &[]),
    ("dt", "halo", 3, &[], &[]),
    ("dt", "darray", 4, &[], &[]),
    ("dt", "pack", 2, &[], &[]),
    ("dt", "elements", 2, &[], &[]),
    ("dt", "errors", 2, &[], &[]),
    ("dt", "decode", 2, &[], &[]),
];

/// Every program of `tests/c/coll` (`shm` with fewer iterations than `coll_shm.rs` runs).
const COLL: &[Prog] = &[
    ("coll", "basic", 4, &[], &[]),
    ("coll", "nonblocking", 4, &[], &[]),
    ("coll", "ops", 3, &[], &[]),
    ("coll", "comm", 4, &[], &[]),
    ("coll", "ctx_threads", 2, PT, &[]),
    ("coll", "inter", 4, &[], &[]),
    ("coll", "topo", 4, &[], &[]),
    ("coll", "errstate", 3, &[], &[]),
    ("coll", "nullcomm", 4, &[], &[]),
    ("coll", "intersig", 4, &[], &[]),
    ("coll", "bigreduce", 3, &[], &["1"]),
    ("coll", "shm", 4, &[], &["200"]),
];

/// Run `progs` over the networks `emu` with `extra` variables; prints each program's time.
fn suite_passes(progs: &[Prog], emu: &str, extra: &[(&str, &str)]) {
    if !ours() {
        return;
    }
    for &(dir, name, ranks, flags, args) in progs {
        let mut job = Job::new(&c_program(dir, name, flags), ranks)
            .args(args)
            .timeout(std::time::Duration::from_secs(240))
            .env("MADMPI_TRANSPORTS", "emu")
            .env("MADMPI_EMU", emu);
        for (k, v) in extra {
            job = job.env(k, v);
        }
        let o = job.run();
        eprintln!(
            "{dir}/{name} on {ranks} ranks over {emu} {extra:?}: {:?}",
            o.elapsed
        );
        o.assert_ok(name);
    }
}

/// The whole point-to-point suite over the emulated Myri-10G MX (eager below 32 KiB,
/// receiver handshake above: both of the engine's protocols through the emulated NIC).
#[test]
fn suite_p2p_over_mx() {
    suite_passes(P2P, "mx", &[]);
}

/// The whole datatype suite over the emulated MX.
#[test]
fn suite_dt_over_mx() {
    suite_passes(DT, "mx", &[]);
}

/// The whole collective suite over the emulated MX.
#[test]
fn suite_coll_over_mx() {
    suite_passes(COLL, "mx", &[]);
}

/// A representative set of every part of the suite over lossy BCL-3 (drops and bit flips at
/// 10^-3, recovered by CRC, ACK/NAK and retransmission): large rendezvous messages (`split`),
/// threads, derived datatypes, collectives with reductions, and many small messages.
#[test]
fn suite_sample_over_lossy_bcl3() {
    let progs: &[Prog] = &[
        ("p2p", "stress", 4, &[], &[]),
        ("p2p", "split", 2, &[], &[]),
        ("p2p", "latency_mt", 2, PT, &["4", "4"]),
        ("p2p", "completion", 3, &[], &[]),
        ("dt", "darray", 4, &[], &[]),
        ("dt", "pack", 2, &[], &[]),
        ("coll", "ops", 3, &[], &[]),
        ("coll", "bigreduce", 3, &[], &["1"]),
        ("coll", "comm", 4, &[], &[]),
    ];
    suite_passes(progs, "bcl3", &[("MADMPI_EMU_LOSS", "1e-3")]);
}

/// The whole suite (every program of the three lists above) over lossy BCL-3 at 10^-3: a
/// few minutes, so run by hand (`cargo test --release -p madmpi-tests --test emu --
/// --ignored`); CI runs the sample above.
#[test]
#[ignore = "minutes: the whole suite over lossy BCL-3, run by hand"]
fn suite_all_over_lossy_bcl3() {
    for progs in [P2P, DT, COLL] {
        suite_passes(progs, "bcl3", &[("MADMPI_EMU_LOSS", "1e-3")]);
    }
}

/// Seed 004's reliability through MPI: `exactly_once.c` (both ranks send 20,000 messages of
/// 0 B to 256 KiB, each checked for loss, duplication, order and content) over BCL-3 at a
/// loss rate of 10^-3, and the NICs' counters show that the link did lose and corrupt frames
/// and that retransmission repaired them. `make bench` (networks part, `exactly_once`) runs
/// 10^6 messages at 10^-4.
#[test]
fn exactly_once_over_lossy_bcl3() {
    if !ours() {
        return;
    }
    let o = Job::new(&c_program("p2p", "exactly_once", &[]), 2)
        .args(&["20000"])
        .timeout(std::time::Duration::from_secs(240))
        .env("MADMPI_TRANSPORTS", "emu")
        .env("MADMPI_EMU", "bcl3")
        .env("MADMPI_EMU_LOSS", "1e-3")
        .env("MADMPI_EMU_STATS", "1")
        .run();
    eprintln!("exactly_once over lossy bcl3: {:?}", o.elapsed);
    o.assert_ok("exactly_once");
    assert!(
        o.stdout.contains("40000 messages checked"),
        "{}",
        o.context()
    );
    let sum = |key: &str| -> u64 {
        o.stderr
            .lines()
            .filter(|l| l.starts_with("madmpi emu "))
            .filter_map(|l| {
                let at = l.find(&format!("{key}: "))? + key.len() + 2;
                l[at..]
                    .split(|c: char| !c.is_ascii_digit())
                    .next()?
                    .parse::<u64>()
                    .ok()
            })
            .sum()
    };
    let (dropped, flipped, retx) = (sum("dropped"), sum("flipped"), sum("retransmitted"));
    eprintln!("dropped {dropped}, flipped {flipped}, retransmitted {retx}");
    assert!(
        dropped > 0 && flipped > 0 && retx > 0,
        "the link lost and corrupted frames and they were sent again\n{}",
        o.context()
    );
}

/// `split_balance` over two emulated NICs: the 1 MiB rendezvous of `traced.c` is cut over
/// both, every byte arrives (the program checks them), and the small messages take the rail
/// of the lower latency (SISCI's `emu1`: 3.0 µs against BIP's 5 µs) and only that one.
#[test]
fn split_balance_uses_both_emulated_nics() {
    if !ours() {
        return;
    }
    let dir = scratch().join(format!("emu-trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    Job::new(&c_program("trace", "traced", &[]), 2)
        .env("MADMPI_TRANSPORTS", "emu")
        .env("MADMPI_EMU", "bip,sisci")
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
            match c["kind"].as_str() {
                Some("data") => {
                    *data.entry(driver.clone()).or_default() += c["len"].as_u64().expect("len")
                }
                Some("eager") => *eager.entry(driver.clone()).or_default() += 1,
                _ => {}
            }
        }
    }
    assert!(
        eager.get("emu1").is_some_and(|&n| n > 0) && !eager.contains_key("emu"),
        "small messages on the lower-latency NIC (SISCI, emu1) only: {eager:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        data.get("emu").is_some_and(|&n| n > 0) && data.get("emu1").is_some_and(|&n| n > 0),
        "rendezvous data on both emulated NICs: {data:?}"
    );
}

/// An unknown network, and a loss rate on a network without retransmission, are refused
/// with the list of what is known.
#[test]
fn bad_settings_are_clear_errors() {
    if !ours() {
        return;
    }
    let o = Job::new(&c_program("p2p", "basic", &[]), 2)
        .env("MADMPI_TRANSPORTS", "emu")
        .env("MADMPI_EMU", "bip,infiniband")
        .run();
    assert!(!o.success(), "{}", o.context());
    assert!(
        o.stderr.contains("unknown network profile 'infiniband'")
            && o.stderr.contains("bip, gm, mx, sisci, via, elan, bcl3"),
        "{}",
        o.context()
    );
    let o = Job::new(&c_program("p2p", "basic", &[]), 2)
        .env("MADMPI_TRANSPORTS", "emu")
        .env("MADMPI_EMU", "gm")
        .env("MADMPI_EMU_LOSS", "1e-4")
        .run();
    assert!(!o.success(), "{}", o.context());
    assert!(
        o.stderr.contains("MADMPI_EMU_LOSS") && o.stderr.contains("bcl3"),
        "{}",
        o.context()
    );
}
