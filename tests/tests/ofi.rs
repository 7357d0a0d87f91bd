//! The `ofi` transport (libfabric) under MPI programs on one host: the self-checking C programs
//! of point-to-point, datatypes and collectives with `MADMPI_TRANSPORTS=ofi`, over libfabric's
//! `tcp;ofi_rxm` provider and its `shm` provider, with small packets (many fragments per
//! rendezvous), as a rail beside `shm`, and the messages a user sees (`MADMPI_LOG=info` names
//! the provider per peer; a provider that does not exist is named with the libfabric call).
//!
//! Skipped, with the reason printed, only when the library was built without libfabric (it
//! then says so when asked for `ofi`). madmpi-specific: skipped under another MPI.

use madmpi_tests::harness::{c_program, Job, Outcome};

fn ofi() -> bool {
    madmpi_tests::harness::have_ofi()
}

fn job(dir: &str, name: &str, ranks: usize, provider: &str) -> Job {
    Job::new(&c_program(dir, name, &[]), ranks)
        .env("MADMPI_TRANSPORTS", "ofi")
        .env("MADMPI_OFI_PROVIDER", provider)
}

/// (directory, program, ranks): the rank counts the programs are written for.
const PROGRAMS: &[(&str, &str, usize)] = &[
    ("p2p", "ordering", 4),
    ("p2p", "sendmodes", 4),
    ("p2p", "probe", 4),
    ("p2p", "truncate", 2),
    ("p2p", "datatypes", 2),
    ("p2p", "cancel", 2),
    ("p2p", "persistent", 2),
    ("p2p", "stress", 4),
    ("dt", "halo", 3),
    ("dt", "pack", 2),
    ("coll", "basic", 3),
    ("coll", "nonblocking", 4),
    ("coll", "ops", 4),
];

/// The programs that move the most data and exercise the most protocols (every send mode,
/// truncation, datatypes, stress, collectives): for the variants of the full list.
const SUBSET: &[&str] = &["sendmodes", "truncate", "datatypes", "stress", "basic"];

fn programs_pass(provider: &str, env: &[(&str, &str)], all: bool) {
    if !ofi() {
        return;
    }
    for &(dir, name, ranks) in PROGRAMS {
        if !all && !SUBSET.contains(&name) {
            continue;
        }
        let mut j = job(dir, name, ranks, provider);
        for (k, v) in env {
            j = j.env(k, v);
        }
        let o = j.run();
        eprintln!("{name} on {ranks} ranks over {provider}: {:?}", o.elapsed);
        o.assert_ok(name);
    }
}

#[test]
fn programs_over_tcp_provider() {
    programs_pass("tcp;ofi_rxm", &[], true);
}

#[test]
fn programs_over_tcp_provider_aggreg() {
    programs_pass("tcp;ofi_rxm", &[("MADMPI_STRATEGY", "aggreg")], false);
}

/// Packets of 1 KiB and two send credits: every rendezvous is cut in many fragments, and the
/// senders meet backpressure all the time.
#[test]
fn programs_over_tcp_provider_small_packets() {
    programs_pass(
        "tcp;ofi_rxm",
        &[
            ("MADMPI_OFI_MAX_PACKET", "1k"),
            ("MADMPI_OFI_EAGER", "512"),
            ("MADMPI_OFI_TX", "2"),
        ],
        false,
    );
}

/// Rendezvous data read by the receiver with `fi_read` from the sender's registered buffer
/// (the default where the provider has `FI_RMA`, as `tcp;ofi_rxm` and `shm` do): the trace's
/// driver counters show the reads and the registrations; with `MADMPI_OFI_RMA=0` the data
/// travels as fragments and nothing is read.
#[test]
fn rendezvous_data_is_read_with_rdma() {
    if !ofi() {
        return;
    }
    for (provider, rma) in [("tcp;ofi_rxm", "1"), ("shm", "1"), ("tcp;ofi_rxm", "0")] {
        let dir = madmpi_tests::harness::scratch().join(format!(
            "ofi-rma-{}-{rma}-{}",
            provider.replace(';', "_"),
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        job("p2p", "sendmodes", 2, provider)
            .env("MADMPI_OFI_RMA", rma)
            .env("MADMPI_TRACE", &dir.display().to_string())
            .run()
            .assert_ok("sendmodes");
        let (mut gets, mut bytes, mut regs) = (0, 0, 0);
        for rank in 0..2 {
            let path = dir.join(format!("madmpi-trace-rank{rank}.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("no trace at {}: {e}", path.display()));
            let v: serde_json::Value = serde_json::from_str(&text).expect("trace is JSON");
            let e = v["traceEvents"]
                .as_array()
                .expect("events")
                .iter()
                .find(|e| e["name"] == "driver counters" && e["args"]["driver"] == "ofi")
                .unwrap_or_else(|| panic!("rank {rank}: no ofi driver counters"))
                .clone();
            let c = |k: &str| {
                e["args"][k]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{k} in {e}"))
            };
            gets += c("rdma_gets");
            bytes += c("rdma_read_bytes");
            regs += c("registrations");
        }
        let _ = std::fs::remove_dir_all(&dir);
        println!("{provider} rma={rma}: {gets} reads of {bytes} bytes, {regs} registrations");
        if rma == "1" {
            assert!(
                gets > 0 && bytes > gets * 1024,
                "{provider}: {gets} reads of {bytes} bytes"
            );
            assert!(
                regs >= gets,
                "{provider}: {regs} registrations for {gets} reads"
            );
        } else {
            assert_eq!((gets, regs), (0, 0), "MADMPI_OFI_RMA=0 reads nothing");
        }
    }
}

fn counter_sum(dir: &std::path::Path, ranks: usize, name: &str) -> u64 {
    madmpi_tests::harness::ofi_counter_sum(dir, ranks, name)
}

/// Small packets (up to the provider's `inject_size`) leave with `fi_inject` by default, and
/// with `fi_send` under `MADMPI_OFI_INJECT=0`; the programs pass either way (the sends and
/// collectives of `sendmodes` and `stress` mix injected and sent packets to each peer, whose
/// order the provider keeps).
#[test]
fn small_packets_are_injected_unless_turned_off() {
    if !ofi() {
        return;
    }
    for (name, ranks) in [("sendmodes", 4), ("stress", 4)] {
        for inject in ["1", "0"] {
            let dir = madmpi_tests::harness::scratch()
                .join(format!("ofi-inject-{name}-{inject}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            job("p2p", name, ranks, "tcp;ofi_rxm")
                .env("MADMPI_OFI_INJECT", inject)
                .env("MADMPI_TRACE", &dir.display().to_string())
                .run()
                .assert_ok(name);
            let n = counter_sum(&dir, ranks, "injects");
            let _ = std::fs::remove_dir_all(&dir);
            println!("{name} MADMPI_OFI_INJECT={inject}: {n} packets injected");
            if inject == "1" {
                assert!(n > 0, "{name}: nothing injected");
            } else {
                assert_eq!(n, 0, "{name}: MADMPI_OFI_INJECT=0 injects nothing");
            }
        }
    }
}

#[test]
fn programs_over_shm_provider() {
    programs_pass("shm", &[], true);
}

/// `MADMPI_RAILS=shm,ofi`: both drivers carry traffic to each peer of the host.
#[test]
fn shm_and_ofi_rails() {
    if !ofi() {
        return;
    }
    for strategy in ["default", "split_balance"] {
        for &(dir, name, ranks) in PROGRAMS.iter().filter(|p| SUBSET.contains(&p.1)) {
            Job::new(&c_program(dir, name, &[]), ranks)
                .env("MADMPI_RAILS", "shm,ofi")
                .env("MADMPI_OFI_PROVIDER", "tcp;ofi_rxm")
                .env("MADMPI_STRATEGY", strategy)
                .run()
                .assert_ok(name);
        }
    }
}

/// `MADMPI_LOG=info` names the provider each peer is reached through; `FI_PROVIDER` selects
/// it when `MADMPI_OFI_PROVIDER` does not.
#[test]
fn log_names_the_provider_per_peer() {
    if !ofi() {
        return;
    }
    let o: Outcome = Job::new(&c_program("p2p", "basic", &[]), 3)
        .env("MADMPI_TRANSPORTS", "ofi")
        .env("FI_PROVIDER", "shm")
        .env("MADMPI_LOG", "info")
        .run();
    o.assert_ok("basic");
    for (me, peer) in [(0, 1), (0, 2), (1, 0), (2, 1)] {
        let line = format!("ofi: rank {me} reaches rank {peer} through provider shm");
        assert!(o.stderr.contains(&line), "no '{line}': {}", o.context());
    }
}

/// A provider that does not exist: the job fails, naming it and the libfabric call.
#[test]
fn unknown_provider_is_named() {
    if !ofi() {
        return;
    }
    let o = job("p2p", "basic", 2, "no-such-provider").run();
    assert!(!o.success(), "{}", o.context());
    assert!(
        o.stderr.contains("no-such-provider") && o.stderr.contains("fi_getinfo"),
        "{}",
        o.context()
    );
}

/// Over `tcp;ofi_rxm` the driver raises rxm's eager limit to its largest packet (its 8-byte
/// header over `MADMPI_OFI_MAX_PACKET`, 68 KiB by default), so that rxm never cuts a packet
/// into segments; a limit the user set is kept (the endpoint's log line says which), and the
/// programs pass under rxm's own 16 KiB limit too, with every large message in 68 KiB
/// fragments that rxm segments (reads off).
#[test]
fn rxm_eager_limit_covers_a_packet_unless_set() {
    if !ofi() {
        return;
    }
    let o = job("p2p", "basic", 2, "tcp;ofi_rxm")
        .env("MADMPI_LOG", "info")
        .run();
    o.assert_ok("basic");
    assert!(
        o.stderr.contains("rxm_eager_limit=69640"),
        "{}",
        o.context()
    );
    let o = job("p2p", "basic", 2, "tcp;ofi_rxm")
        .env("MADMPI_LOG", "info")
        .env("FI_OFI_RXM_EAGER_LIMIT", "16384")
        .run();
    o.assert_ok("basic");
    assert!(
        o.stderr.contains("rxm_eager_limit=16384"),
        "{}",
        o.context()
    );
    programs_pass(
        "tcp;ofi_rxm",
        &[("FI_OFI_RXM_EAGER_LIMIT", "16384"), ("MADMPI_OFI_RMA", "0")],
        false,
    );
}
