//! `MADMPI_TRACE` and `MADMPI_LOG` (docs/tracing.md): `tests/c/trace/traced.c` (2 ranks: eager
//! messages, a 1 MiB rendezvous message, non-blocking calls, a burst of small sends,
//! collectives) runs under `bin/mpirun` with a trace directory, and each rank's file is parsed
//! and checked: valid JSON in the Chrome trace-event format, one `pid` per rank, MPI calls,
//! packets with their chunks, the rendezvous handshake of the large message (a `get` over
//! shared memory), timestamps in order per track and aligned across ranks (one host: one
//! monotonic clock).
//!
//! madmpi-specific: skipped when `MADMPI_TEST_MPICC`/`MADMPI_TEST_MPIRUN` select another MPI.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use madmpi_tests::harness::{c_program, scratch, toolchain, Job, Outcome};
use serde_json::Value;

fn prog() -> PathBuf {
    c_program("trace", "traced", &[])
}

/// A trace directory that does not exist yet (the library must create it, parents included).
fn fresh_dir(name: &str) -> PathBuf {
    let base = scratch().join(format!("trace-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    base.join("nested")
}

fn run(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> Outcome {
    let mut job = Job::new(&prog(), 2)
        .env("MADMPI_TRACE", &dir.display().to_string())
        .args(args);
    for (k, v) in env {
        job = job.env(k, v);
    }
    job.run()
}

/// The events of one rank's file, after checking the envelope.
struct Trace {
    rank: u64,
    events: Vec<Value>,
    other: Value,
}

impl Trace {
    fn load(dir: &Path, rank: u64) -> Trace {
        let path = dir.join(format!("madmpi-trace-rank{rank}.json"));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("rank {rank}: no trace at {}: {e}", path.display()));
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: invalid JSON: {e}", path.display()));
        let events = v["traceEvents"]
            .as_array()
            .unwrap_or_else(|| panic!("{}: no traceEvents array", path.display()))
            .clone();
        for e in &events {
            assert_eq!(e["pid"].as_u64(), Some(rank), "pid is the world rank: {e}");
            assert!(e["tid"].is_u64(), "every event has a track: {e}");
            let ph = e["ph"].as_str().unwrap_or_else(|| panic!("no ph: {e}"));
            assert!(["M", "X", "i"].contains(&ph), "unexpected phase: {e}");
            if ph != "M" {
                assert!(e["ts"].is_number(), "no ts: {e}");
                assert!(e["name"].is_string(), "no name: {e}");
            }
            if ph == "X" {
                assert!(e["dur"].as_f64().is_some_and(|d| d >= 0.0), "bad dur: {e}");
            }
        }
        assert_eq!(v["otherData"]["rank"].as_u64(), Some(rank));
        Trace {
            rank,
            events,
            other: v["otherData"].clone(),
        }
    }

    fn named<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.events.iter().filter(move |e| e["name"] == name)
    }

    fn has(&self, name: &str) -> bool {
        self.named(name).next().is_some()
    }

    fn first_ts(&self, name: &str) -> f64 {
        self.named(name)
            .next()
            .and_then(|e| e["ts"].as_f64())
            .unwrap_or_else(|| panic!("rank {}: no {name:?} event", self.rank))
    }

    /// Names of the tracks, by tid (thread_name metadata).
    fn track_names(&self) -> HashMap<u64, String> {
        self.named("thread_name")
            .map(|e| {
                (
                    e["tid"].as_u64().expect("tid"),
                    e["args"]["name"].as_str().expect("name").to_string(),
                )
            })
            .collect()
    }

    fn on_track<'a>(&'a self, track: &str) -> Vec<&'a Value> {
        let tid = self
            .track_names()
            .into_iter()
            .find(|(_, n)| n.starts_with(track))
            .unwrap_or_else(|| panic!("rank {}: no track {track:?}", self.rank))
            .0;
        self.events
            .iter()
            .filter(|e| e["tid"].as_u64() == Some(tid) && e["ph"] != "M")
            .collect()
    }

    /// Timestamps never go back within a track, in file order.
    fn assert_monotonic(&self) {
        let mut last: HashMap<u64, f64> = HashMap::new();
        for e in self.events.iter().filter(|e| e["ph"] != "M") {
            let tid = e["tid"].as_u64().expect("tid");
            let ts = e["ts"].as_f64().expect("ts");
            let prev = last.insert(tid, ts).unwrap_or(f64::MIN);
            assert!(
                ts >= prev,
                "rank {}: track {tid} goes back in time at {e}",
                self.rank
            );
        }
    }
}

fn skip() -> bool {
    !toolchain().ours
}

#[test]
fn trace_files_of_both_ranks() {
    if skip() {
        return;
    }
    let dir = fresh_dir("shm");
    let o = run(&dir, &[], &[]);
    o.assert_ok("traced");
    assert!(
        !o.stderr.contains("MADMPI_TRACE"),
        "no complaint expected: {}",
        o.context()
    );
    let t0 = Trace::load(&dir, 0);
    let t1 = Trace::load(&dir, 1);
    for t in [&t0, &t1] {
        t.assert_monotonic();
        assert_eq!(t.other["truncated"], false);
        assert_eq!(t.other["aborted"], false);
        assert_eq!(t.other["size"].as_u64(), Some(2));
        // The tracks.
        let names: Vec<String> = t.track_names().into_values().collect();
        for track in ["MPI calls", "scheduler", "transport", "rendezvous"] {
            assert!(
                names.iter().any(|n| n.starts_with(track)),
                "rank {}: no {track} track in {names:?}",
                t.rank
            );
        }
        // MPI calls, with durations, on the MPI track.
        let calls = t.on_track("MPI calls");
        for name in [
            "MPI_Init",
            "MPI_Send",
            "MPI_Recv",
            "MPI_Isend",
            "MPI_Irecv",
            "MPI_Test",
            "MPI_Waitall",
            "MPI_Allreduce",
            "MPI_Bcast",
            "MPI_Barrier",
            "MPI_Finalize",
        ] {
            let hits: Vec<_> = calls.iter().filter(|e| e["name"] == name).collect();
            assert!(!hits.is_empty(), "rank {}: no {name} call event", t.rank);
            assert!(hits.iter().all(|e| e["ph"] == "X"), "{name}: not a slice");
        }
        assert_eq!(
            calls.iter().filter(|e| e["name"] == "MPI_Finalize").count(),
            1,
            "rank {}: MPI_Finalize recorded once",
            t.rank
        );
        // Point-to-point calls carry their peer and tag.
        let send = calls
            .iter()
            .find(|e| e["name"] == "MPI_Send")
            .expect("a send");
        assert_eq!(send["args"]["peer"].as_u64(), Some(1 - t.rank));
        // Packets with their chunks: an eager chunk of the first message has its envelope.
        let packets = t.on_track("scheduler");
        let chunks: Vec<&Value> = packets
            .iter()
            .filter(|e| e["name"] == "packet")
            .flat_map(|e| e["args"]["chunks"].as_array().expect("chunks").iter())
            .collect();
        assert!(!chunks.is_empty(), "rank {}: no packet events", t.rank);
        let tag = if t.rank == 0 { 1 } else { 2 };
        assert!(
            chunks.iter().any(|c| c["kind"] == "eager"
                && c["tag"] == tag
                && c["ctx"] == 0
                && c["len"] == 16),
            "rank {}: no eager chunk of tag {tag} with 16 bytes in {chunks:?}",
            t.rank
        );
        // Transport: posts with an outcome, and received packets with their chunks.
        let transport = t.on_track("transport");
        assert!(transport
            .iter()
            .any(|e| e["name"] == "try_send" && e["args"]["outcome"] == "done"));
        assert!(transport.iter().any(|e| e["name"] == "packet received"
            && e["args"]["chunks"]
                .as_array()
                .is_some_and(|c| !c.is_empty())));
    }
    // The rendezvous of the 1 MiB message from rank 0 to rank 1: RTS, then either the receiver
    // pulls the data (get; over shared memory from `MADMPI_SHM_SPLIT_MIN` the shm driver copies
    // it with the sender's help, inside that get) and answers FIN, or (cross-memory attach
    // refused by the OS) it sends CTS and the data comes in fragments.
    let rts = t0.named("RTS sent").next().expect("rank 0 sent an RTS");
    assert_eq!(rts["args"]["msg_len"].as_u64(), Some(1 << 20));
    assert_eq!(rts["args"]["tag"].as_u64(), Some(3));
    assert!(t1.has("RTS received"));
    if t1.has("get") && t1.named("get").all(|e| e["args"]["result"] == "done") {
        let get = t1.named("get").next().expect("get");
        assert_eq!(get["args"]["bytes"].as_u64(), Some(1 << 20));
        assert!(t1.has("FIN sent") && t0.has("FIN received"));
        assert!(t0.first_ts("FIN received") >= t1.first_ts("FIN sent"));
        assert!(t1.first_ts("FIN sent") >= t1.first_ts("get"));
    } else {
        assert!(t1.has("CTS sent") && t0.has("CTS received"));
    }
    // One host, one clock: what rank 0 sent, rank 1 received later.
    assert!(
        t1.first_ts("RTS received") >= t0.first_ts("RTS sent"),
        "timestamps of the two ranks are not aligned"
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("base"));
}

#[test]
fn trace_over_tcp_shows_cts_and_fragments() {
    if skip() {
        return;
    }
    let dir = fresh_dir("tcp");
    run(&dir, &[("MADMPI_TRANSPORTS", "tcp")], &[]).assert_ok("traced");
    let t0 = Trace::load(&dir, 0);
    let t1 = Trace::load(&dir, 1);
    t0.assert_monotonic();
    t1.assert_monotonic();
    // TCP cannot `get`: RTS, CTS, then data fragments.
    assert!(t0.has("RTS sent") && t1.has("RTS received"));
    assert!(t1.has("CTS sent") && t0.has("CTS received"));
    assert!(t1.first_ts("CTS sent") >= t1.first_ts("RTS received"));
    assert!(t0.first_ts("CTS received") >= t1.first_ts("CTS sent"));
    // The RTS carries the start of the message, the data chunks the rest.
    let sent = |kind: &str| -> u64 {
        t0.named("packet")
            .flat_map(|e| e["args"]["chunks"].as_array().expect("chunks").iter())
            .filter(|c| c["kind"] == kind)
            .map(|c| c["len"].as_u64().expect("len"))
            .sum()
    };
    let (start, data) = (sent("rts"), sent("data"));
    assert!(start > 0, "the RTS carries the start of the message");
    assert_eq!(
        start + data,
        1 << 20,
        "rank 0 sent the whole message: {start} bytes with the RTS, {data} in data chunks"
    );
    assert!(t0
        .named("try_send")
        .filter(|e| e["args"]["peer"] == 1)
        .all(|e| e["args"]["driver"] == "tcp"));
    // Large data packets land straight in the receive buffer, and so does the 32 KiB eager
    // message whose receive was posted.
    let placed = |kind: &str| {
        t1.named("packet received").any(|e| {
            e["args"]["placed_in_user_buffer"] == true && e["args"]["chunks"][0]["kind"] == kind
        })
    };
    assert!(
        placed("data"),
        "rank 1: no data packet placed in the user buffer"
    );
    assert!(
        placed("eager"),
        "rank 1: the 32 KiB eager message was not placed"
    );
    // The RTS of the 1 MiB message, whose receive was posted, carries the start of the
    // message, placed too; its CTS leaves as soon as the RTS's header is in, before the start
    // has landed.
    assert!(
        placed("rts"),
        "rank 1: the RTS carrying the start was not placed"
    );
    let rts_landed = t1
        .named("packet received")
        .find(|e| e["args"]["chunks"][0]["kind"] == "rts")
        .and_then(|e| e["ts"].as_f64())
        .expect("ts");
    assert!(
        t1.first_ts("CTS sent") <= rts_landed,
        "rank 1: the CTS waited for the start of the message to land"
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("base"));
}

#[test]
fn aggreg_strategy_packs_several_chunks_in_one_packet() {
    if skip() {
        return;
    }
    let dir = fresh_dir("aggreg");
    run(&dir, &[("MADMPI_STRATEGY", "aggreg")], &[]).assert_ok("traced");
    for rank in 0..2 {
        let t = Trace::load(&dir, rank);
        t.assert_monotonic();
        let most = t
            .named("packet")
            .map(|e| e["args"]["nchunks"].as_u64().expect("nchunks"))
            .max()
            .unwrap_or(0);
        assert!(
            most > 1,
            "rank {rank}: the burst of 4 isends should leave in one packet"
        );
        let multi = t
            .named("packet")
            .find(|e| e["args"]["nchunks"].as_u64() == Some(most))
            .expect("packet");
        let tags: Vec<u64> = multi["args"]["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .filter_map(|c| c["tag"].as_u64())
            .collect();
        assert!(
            tags.windows(2).all(|w| w[0] < w[1]),
            "chunks in send order: {tags:?}"
        );
        assert!(t.has("chunk queued"));
    }
    // Rank 0's burst of 24 sends of 1 KiB (tags 20..43) needs more than one shared-memory
    // packet: the first leaves as soon as it is full, before the burst's last MPI_Isend.
    let t0 = Trace::load(&dir, 0);
    let long_burst = |e: &&Value| {
        e["args"]["chunks"]
            .as_array()
            .expect("chunks")
            .iter()
            .any(|c| c["tag"].as_u64().is_some_and(|t| (20..44).contains(&t)))
    };
    let packets: Vec<&Value> = t0.named("packet").filter(long_burst).collect();
    assert!(
        packets.len() >= 2
            && packets
                .iter()
                .all(|p| p["args"]["nchunks"].as_u64() > Some(1)),
        "the 1 KiB burst in a few full packets: {packets:?}"
    );
    let first = packets[0]["ts"].as_f64().expect("ts");
    let last_isend = t0
        .named("MPI_Isend")
        .filter_map(|e| e["ts"].as_f64())
        .fold(f64::MIN, f64::max);
    assert!(
        first < last_isend,
        "the first full packet left during the burst ({first} µs), not after its last \
         MPI_Isend ({last_isend} µs)"
    );
    let _ = std::fs::remove_dir_all(dir.parent().expect("base"));
}

#[test]
fn trace_written_on_abort() {
    if skip() {
        return;
    }
    let dir = fresh_dir("abort");
    let o = run(&dir, &[], &["abort"]);
    assert!(!o.success(), "the job aborts: {}", o.context());
    let t0 = Trace::load(&dir, 0);
    assert_eq!(t0.other["aborted"], true);
    assert!(t0.has("aborted"));
    assert!(t0.has("MPI_Barrier"));
    t0.assert_monotonic();
    let _ = std::fs::remove_dir_all(dir.parent().expect("base"));
}

#[test]
fn unwritable_trace_dir_is_reported_not_fatal() {
    if skip() {
        return;
    }
    // A directory below a regular file cannot be created.
    let base = scratch().join(format!("trace-bad-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).expect("mkdir");
    let file = base.join("a-file");
    std::fs::write(&file, b"x").expect("write");
    let o = run(&file.join("sub"), &[], &[]);
    o.assert_ok("traced");
    for rank in 0..2 {
        assert!(
            o.stderr
                .contains(&format!("madmpi: rank {rank}: MADMPI_TRACE: cannot create")),
            "rank {rank} explains: {}",
            o.context()
        );
    }
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn log_debug_prints_on_stderr_with_the_rank() {
    if skip() {
        return;
    }
    let o = Job::new(&prog(), 2).env("MADMPI_LOG", "debug").run();
    o.assert_ok("traced");
    for rank in 0..2 {
        let prefix = format!("madmpi[{rank}] ");
        let lines: Vec<&str> = o
            .stderr
            .lines()
            .filter(|l| l.starts_with(&prefix))
            .collect();
        assert!(
            lines
                .iter()
                .any(|l| l.contains("DEBUG") && l.contains("transport")),
            "rank {rank}: no transport selection logged: {}",
            o.context()
        );
    }
    assert!(
        o.stderr.contains("rendezvous"),
        "the rendezvous decision is logged: {}",
        o.context()
    );
}

#[test]
fn off_by_default() {
    if skip() {
        return;
    }
    let o = Job::new(&prog(), 2).run();
    o.assert_ok("traced");
    assert!(
        !o.stderr.contains("madmpi["),
        "no log without MADMPI_LOG: {}",
        o.context()
    );
}

#[test]
fn recording_stops_at_the_event_limit_and_says_so_but_keeps_the_driver_counters() {
    if skip() {
        return;
    }
    let dir = fresh_dir("limit");
    run(&dir, &[("MADMPI_TRACE_MAX_EVENTS", "10")], &[]).assert_ok("traced");
    for rank in 0..2 {
        let t = Trace::load(&dir, rank);
        t.assert_monotonic();
        assert_eq!(t.other["truncated"], true);
        assert_eq!(t.other["max_events"].as_u64(), Some(10));
        // The drivers' totals are recorded at the end even so (one event per driver).
        let counters = t
            .events
            .iter()
            .filter(|e| e["name"] == "driver counters")
            .count();
        assert!(counters >= 1, "rank {rank}: the driver counters are kept");
        let kept = t.events.iter().filter(|e| e["ph"] != "M").count();
        assert_eq!(
            kept,
            11 + counters,
            "rank {rank}: 10 events, the truncation notice and the driver counters"
        );
        assert!(t.has("trace truncated: recording stopped"));
        assert!(t.has("MPI_Init"));
    }
    let _ = std::fs::remove_dir_all(dir.parent().expect("base"));
}
