//! The `tcp` driver between two real processes over loopback.
//!
//! The test binary re-executes itself for the peer: the child runs the same test function,
//! sees `MADMPI_TCP_TEST_ROLE`, builds rank 1 (the parent is rank 0), prints its business card
//! on stdout and plays its part. Driver settings travel as `MADMPI_TCP_*` variables, so both
//! ends read the same configuration with `TcpConfig::from_env`/`from_lookup`. A guard kills and
//! reaps the child however the test ends.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, IoSlice, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use madmpi_transports::tcp::{TcpConfig, TcpTransport};
use madmpi_transports::{Error, PeerId, SendOutcome, Transport};

const ROLE: &str = "MADMPI_TCP_TEST_ROLE";
const CARD: &str = "MADMPI_TCP_TEST_CARD";
const SECRET: [u8; 32] = *b"tcp-process-test-secret-32-bytes";
const TIMEOUT: Duration = Duration::from_secs(180);
const PARENT: PeerId = PeerId(0);
const CHILD: PeerId = PeerId(1);

// ---------------------------------------------------------------- helpers

struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let w = self.next().to_le_bytes();
            c.copy_from_slice(&w[..c.len()]);
        }
    }
}

/// FNV-1a over 8-byte words (the tail zero-padded), with the length folded in.
fn fnv(bytes: &[u8]) -> u64 {
    let mut h = 0xcbf2_9ce4_8422_2325u64 ^ bytes.len() as u64;
    for c in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x100_0000_01b3);
    }
    h
}

fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"))
}

/// A message of `len` >= 16 bytes: `[seq][fnv of payload][payload]`.
fn build(seq: u64, len: usize, rng: &mut Rng, buf: &mut Vec<u8>) {
    buf.resize(len, 0);
    rng.fill(&mut buf[16..]);
    let sum = fnv(&buf[16..]);
    buf[..8].copy_from_slice(&seq.to_le_bytes());
    buf[8..16].copy_from_slice(&sum.to_le_bytes());
}

/// Check a message built by [`build`]; returns its sequence number.
fn verify(msg: &[u8]) -> u64 {
    assert!(msg.len() >= 16, "message of {} bytes", msg.len());
    assert_eq!(
        word(msg, 1),
        fnv(&msg[16..]),
        "checksum of message {}",
        word(msg, 0)
    );
    word(msg, 0)
}

/// Random sizes, mostly small, sometimes up to `max`.
fn size(rng: &mut Rng, max: usize) -> usize {
    let s = match rng.below(1000) {
        0..=4 => 16 + rng.below(max - 15),
        5..=99 => 16 + rng.below(32 << 10),
        100..=399 => 16 + rng.below(4096),
        _ => 16 + rng.below(64),
    };
    s.min(max)
}

/// Spin briefly, then yield: the machine may have fewer cores than processes.
struct Waiter {
    spins: u32,
    deadline: Instant,
}

impl Waiter {
    fn new() -> Waiter {
        Waiter {
            spins: 0,
            deadline: Instant::now() + TIMEOUT,
        }
    }
    fn progress(&mut self) {
        self.spins = 0;
    }
    fn idle(&mut self, what: &str) {
        self.spins += 1;
        if self.spins < 200 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
            if self.spins & 1023 == 0 {
                assert!(
                    Instant::now() < self.deadline,
                    "timed out waiting for {what}"
                );
            }
        }
    }
}

/// Settings shared by both ends, as environment variables.
type Env = Vec<(&'static str, String)>;

fn config(env: &Env) -> TcpConfig {
    let map: HashMap<&str, String> = env.iter().cloned().collect();
    TcpConfig::from_lookup(|k| map.get(k).cloned()).expect("config")
}

/// The child process, killed and reaped however the test ends.
struct Peer {
    child: Child,
    /// Kept open: the child's harness writes its result there at the end.
    _out: Option<BufReader<ChildStdout>>,
}

impl Peer {
    /// Wait for the child; it must succeed.
    fn finish(mut self) {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            match self.child.try_wait().expect("wait") {
                Some(st) => {
                    assert!(st.success(), "child failed: {st}");
                    return;
                }
                None if Instant::now() > deadline => panic!("child did not finish"),
                None => std::thread::sleep(Duration::from_millis(2)),
            }
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parent side: rank 0 listening, the child spawned as rank 1 and registered both ways.
fn parent(test: &str, env: &Env) -> (TcpTransport, Peer) {
    let cfg = config(env);
    let mut t = TcpTransport::listen(PARENT, 2, SECRET, &cfg).expect("listen");
    let exe = std::env::current_exe().expect("test binary");
    let mut cmd = Command::new(exe);
    cmd.args([
        test,
        "--exact",
        "--nocapture",
        "--test-threads=1",
        "--include-ignored",
    ])
    .env(ROLE, test)
    .env(CARD, t.business_card())
    .stdout(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut peer = Peer {
        child: cmd.spawn().expect("spawn child"),
        _out: None,
    };
    let mut out = BufReader::new(peer.child.stdout.take().expect("piped"));
    let card = loop {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).expect("child stdout") > 0,
            "child exited before printing its card"
        );
        // The harness may have written "test name ... " on the same line.
        if let Some(i) = line.find("MADMPI-CARD ") {
            break line[i + "MADMPI-CARD ".len()..].trim().to_string();
        }
    };
    peer._out = Some(out);
    t.add_peer(CHILD, &card).expect("child card");
    (t, peer)
}

/// Child side, if this process is the child of `test`: rank 1, registered with the parent,
/// its card printed.
fn child(test: &str) -> Option<TcpTransport> {
    if std::env::var(ROLE).ok()? != test {
        return None;
    }
    let cfg = TcpConfig::from_env().expect("child config");
    let mut t = TcpTransport::listen(CHILD, 2, SECRET, &cfg).expect("child listen");
    let card = std::env::var(CARD).expect("parent card");
    t.add_peer(PARENT, &card).expect("parent card");
    let mut out = std::io::stdout().lock();
    writeln!(out, "\nMADMPI-CARD {}", t.business_card()).expect("stdout");
    out.flush().expect("stdout");
    Some(t)
}

fn no_losses(t: &mut TcpTransport) {
    if let Some(p) = t.poll_lost() {
        panic!("rank {} lost rank {}: {:?}", t.rank().0, p.0, t.take_log());
    }
}

/// Send `n` random messages to `peer` and receive `n` from it, interleaved; every message is
/// checked and must arrive in order.
fn exchange(t: &mut TcpTransport, peer: PeerId, n: u64, max: usize) {
    let me = t.rank().0 as u64;
    let mut srng = Rng::new(100 + me);
    let mut sizes = Rng::new(200 + me);
    let (mut sent, mut recvd) = (0u64, 0u64);
    let mut buf = Vec::new();
    build(0, size(&mut sizes, max), &mut srng, &mut buf);
    let mut w = Waiter::new();
    while sent < n || recvd < n {
        let mut moved = false;
        // A few sends per round, so that both directions fill up.
        for _ in 0..4 {
            if sent == n {
                break;
            }
            match t.try_send(peer, &[IoSlice::new(&buf)]).expect("try_send") {
                SendOutcome::Done => {
                    sent += 1;
                    moved = true;
                    if sent < n {
                        build(sent, size(&mut sizes, max), &mut srng, &mut buf);
                    }
                }
                SendOutcome::WouldBlock => break,
            }
        }
        let got = t
            .poll_recv(&mut |from, msg| {
                assert_eq!(from, peer);
                assert_eq!(verify(msg), recvd, "out of order");
                recvd += 1;
            })
            .expect("poll_recv");
        no_losses(t);
        if moved || got > 0 {
            w.progress();
        } else {
            w.idle(&format!("traffic (sent {sent}, received {recvd} of {n})"));
        }
    }
}

// ---------------------------------------------------------------- tests

#[test]
fn hundred_thousand_packets_both_ways() {
    const TEST: &str = "hundred_thousand_packets_both_ways";
    const N: u64 = 100_000;
    let max = 256 << 10;
    if let Some(mut t) = child(TEST) {
        exchange(&mut t, PARENT, N, max);
        return;
    }
    let env: Env = vec![("MADMPI_TCP_IF", "lo".into())];
    let (mut t, peer) = parent(TEST, &env);
    let start = Instant::now();
    exchange(&mut t, CHILD, N, max);
    let s = t.stats();
    eprintln!(
        "{N} packets each way in {:?}; parent stats {s:?}",
        start.elapsed()
    );
    assert_eq!(s.connections, 1);
    drop(t);
    peer.finish();
}

#[test]
fn large_packets_with_backpressure() {
    const TEST: &str = "large_packets_with_backpressure";
    const N: u64 = 300;
    // Small socket buffers: every 1 MiB packet is written in pieces.
    let env: Env = vec![
        ("MADMPI_TCP_SNDBUF", "64k".into()),
        ("MADMPI_TCP_RCVBUF", "64k".into()),
        ("MADMPI_TCP_MAX_PACKET", "1m".into()),
    ];
    if let Some(mut t) = child(TEST) {
        // A slow receiver: the sender sees WouldBlock and partial writes.
        let mut recvd = 0u64;
        let mut w = Waiter::new();
        while recvd < N {
            let got = t
                .poll_recv(&mut |from, msg| {
                    assert_eq!(from, PARENT);
                    assert_eq!(msg.len(), 1 << 20);
                    assert_eq!(verify(msg), recvd);
                    recvd += 1;
                })
                .unwrap();
            no_losses(&mut t);
            if got > 0 {
                w.progress();
                if recvd % 16 == 0 {
                    std::thread::sleep(Duration::from_millis(5));
                }
            } else {
                w.idle("large packets");
            }
        }
        let done = N.to_le_bytes();
        while t.try_send(PARENT, &[IoSlice::new(&done)]).unwrap() != SendOutcome::Done {
            t.poll_recv(&mut |_, _| {}).unwrap();
        }
        return;
    }
    let (mut t, peer) = parent(TEST, &env);
    let mut rng = Rng::new(5);
    let mut buf = Vec::new();
    let mut w = Waiter::new();
    let start = Instant::now();
    for seq in 0..N {
        build(seq, 1 << 20, &mut rng, &mut buf);
        // Two iovecs, cut at a random point, as header + payload would be.
        let cut = rng.below(buf.len());
        let iov = [IoSlice::new(&buf[..cut]), IoSlice::new(&buf[cut..])];
        loop {
            match t.try_send(CHILD, &iov).unwrap() {
                SendOutcome::Done => break,
                SendOutcome::WouldBlock => {
                    t.poll_recv(&mut |_, _| panic!("nothing expected yet"))
                        .unwrap();
                    no_losses(&mut t);
                    w.idle("room to send");
                }
            }
        }
        // The caller's memory is reusable at once: scribble over it.
        buf.fill(0xdd);
    }
    let mut done = false;
    while !done {
        t.poll_recv(&mut |_, msg| {
            assert_eq!(msg, N.to_le_bytes());
            done = true;
        })
        .unwrap();
        no_losses(&mut t);
        w.idle("the receiver's count");
    }
    let s = t.stats();
    eprintln!(
        "{N} x 1 MiB in {:?} through 64 KiB socket buffers; stats {s:?}",
        start.elapsed()
    );
    assert!(s.partial_writes > 0, "no partial write: {s:?}");
    assert!(s.would_block > 0, "no backpressure: {s:?}");
    drop(t);
    peer.finish();
}

/// The child sends and receives until it is killed with SIGKILL; the parent must see the
/// loss quickly and keep working.
#[test]
fn killed_peer_is_lost() {
    const TEST: &str = "killed_peer_is_lost";
    if let Some(mut t) = child(TEST) {
        // Send forever (large packets, so that the parent is often in the middle of one),
        // and read, so the parent is not blocked; the parent kills us.
        let mut rng = Rng::new(7);
        let mut buf = Vec::new();
        let mut seq = 0;
        build(seq, 16 + rng.below(900_000), &mut rng, &mut buf);
        loop {
            if t.try_send(PARENT, &[IoSlice::new(&buf)]).unwrap() == SendOutcome::Done {
                seq += 1;
                build(seq, 16 + rng.below(900_000), &mut rng, &mut buf);
            }
            t.poll_recv(&mut |_, _| {}).unwrap();
            std::thread::yield_now();
        }
    }
    for mode in ["mid-traffic", "receiver-full"] {
        // The child's packets reach 900 KB: above the default largest packet.
        let env: Env = vec![
            ("MADMPI_TCP_SNDBUF", "256k".into()),
            ("MADMPI_TCP_MAX_PACKET", "1m".into()),
        ];
        let (mut t, mut peer) = parent(TEST, &env);
        let mut recvd = 0u64;
        let mut w = Waiter::new();
        let payload = vec![0x33u8; 100_000];
        let mut blocked = 0;
        // Traffic both ways until well established.
        while recvd < 50 || (mode == "receiver-full" && blocked < 100) {
            if mode == "receiver-full" {
                // Stop reading: our sends fill the child's buffers. The child still reads,
                // but more slowly than we send; WouldBlock must come.
                match t.try_send(CHILD, &[IoSlice::new(&payload)]).unwrap() {
                    SendOutcome::Done => {}
                    SendOutcome::WouldBlock => blocked += 1,
                }
            }
            t.poll_recv(&mut |_, msg| {
                verify(msg);
                recvd += 1;
            })
            .unwrap();
            no_losses(&mut t);
            w.idle("traffic before the kill");
        }
        peer.child.kill().expect("SIGKILL");
        let killed = Instant::now();
        let mut lost_via = None;
        while lost_via.is_none() {
            match t.try_send(CHILD, &[IoSlice::new(&payload)]) {
                Err(Error::PeerLost(p)) => {
                    assert_eq!(p, CHILD);
                    lost_via.get_or_insert("try_send");
                }
                Ok(_) => {}
                Err(e) => panic!("unexpected error {e}"),
            }
            t.poll_recv(&mut |_, msg| {
                verify(msg);
            })
            .expect("poll_recv keeps working");
            if let Some(p) = t.poll_lost() {
                assert_eq!(p, CHILD);
                lost_via = Some("poll_lost");
            }
            assert!(
                killed.elapsed() < Duration::from_secs(10),
                "{mode}: the loss was not noticed within 10 s"
            );
            std::thread::yield_now();
        }
        let took = killed.elapsed();
        // Reported once; later sends fail at once.
        let mut reports = usize::from(lost_via == Some("poll_lost"));
        for _ in 0..10 {
            t.poll_recv(&mut |_, _| {}).unwrap();
            reports += t.lost_peers().len();
        }
        assert_eq!(reports, 1, "{mode}: lost reported once");
        assert!(matches!(
            t.try_send(CHILD, &[IoSlice::new(b"x")]),
            Err(Error::PeerLost(CHILD))
        ));
        eprintln!("{mode}: loss noticed after {took:?} (first via {lost_via:?})");
        let log = t.take_log();
        assert!(log.iter().any(|l| l.contains("lost rank 1")), "{log:?}");
        let _ = peer.child.wait();
    }
}
