//! The `shm` driver between real processes.
//!
//! The test binary re-executes itself for the other processes: a child runs the same test
//! function, which sees `MADMPI_SHM_TEST_ROLE` and plays its part instead. Segment names carry
//! the parent's pid so parallel runs do not collide; a guard unlinks them and reaps the children
//! however the test ends.

use std::hint::black_box;
use std::io::{IoSlice, IoSliceMut};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use madmpi_transports::shm::{ShmConfig, ShmSegment, ShmTransport};
use madmpi_transports::{PeerId, RemoteRegion, SendOutcome, Transport};

const ROLE: &str = "MADMPI_SHM_TEST_ROLE";
const SEG: &str = "MADMPI_SHM_TEST_SEG";
const LOCAL: &str = "MADMPI_SHM_TEST_LOCAL";
const NLOCAL: &str = "MADMPI_SHM_TEST_NLOCAL";
const DOORBELL: &str = "MADMPI_SHM_TEST_DOORBELL";

/// Control messages start with one of these instead of a sequence number.
const HELLO: u64 = u64::MAX;
const GET_REQ: u64 = u64::MAX - 1;
const DONE: u64 = u64::MAX - 2;

const TIMEOUT: Duration = Duration::from_secs(120);

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
    let s = match rng.below(100) {
        0 => 16 + rng.below(max - 15),
        1..=9 => 16 + rng.below(32 << 10),
        10..=39 => 16 + rng.below(4096),
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
            if self.spins & 4095 == 0 {
                assert!(
                    Instant::now() < self.deadline,
                    "timed out waiting for {what}"
                );
            }
        }
    }
}

fn send(t: &mut ShmTransport, to: PeerId, msg: &[u8], w: &mut Waiter) {
    loop {
        match t.try_send(to, &[IoSlice::new(msg)]).expect("try_send") {
            SendOutcome::Done => return,
            SendOutcome::WouldBlock => w.idle("room in a ring"),
        }
    }
}

thread_local! {
    /// Messages a poll delivered beyond the one asked for, in arrival order (a peer may send
    /// its next message, e.g. the last reply then the get request, before this process polls).
    static EARLY: std::cell::RefCell<std::collections::VecDeque<(PeerId, Vec<u8>)>> =
        Default::default();
}

/// Poll until one message arrives (or take the oldest one an earlier poll delivered); return
/// a copy.
fn recv_one(t: &mut ShmTransport, w: &mut Waiter) -> (PeerId, Vec<u8>) {
    loop {
        if let Some(g) = EARLY.with_borrow_mut(|q| q.pop_front()) {
            return g;
        }
        t.poll_recv(&mut |from, msg| {
            EARLY.with_borrow_mut(|q| q.push_back((from, msg.to_vec())));
        })
        .expect("poll_recv");
        if EARLY.with_borrow(|q| q.is_empty()) {
            w.idle("a message");
        }
    }
}

fn config(ring: usize, doorbell: Option<bool>) -> ShmConfig {
    let mut c = ShmConfig::default();
    c.ring_bytes = ring;
    c.doorbell = doorbell;
    c
}

fn ranks(n: usize) -> Vec<PeerId> {
    // Non-trivial world ranks: 10, 13, 16, ...
    (0..n).map(|i| PeerId(10 + 3 * i as u32)).collect()
}

/// The child processes and the segment name: reaped and unlinked however the test ends.
struct Job {
    name: String,
    children: Vec<Child>,
}

impl Job {
    fn new(tag: &str) -> Job {
        Job {
            name: format!("/madmpi-test-{}-{tag}", std::process::id()),
            children: Vec::new(),
        }
    }

    fn spawn(&mut self, test: &str, local: usize, nlocal: usize, doorbell: Option<bool>) {
        let exe = std::env::current_exe().expect("test binary");
        let child = Command::new(exe)
            .args([
                test,
                "--exact",
                "--nocapture",
                "--test-threads=1",
                "--include-ignored",
            ])
            .env(ROLE, test)
            .env(SEG, &self.name)
            .env(LOCAL, local.to_string())
            .env(NLOCAL, nlocal.to_string())
            .env(
                DOORBELL,
                doorbell.map_or("auto", |d| if d { "1" } else { "0" }),
            )
            // The child's harness chatter; its panics go to stderr, which we keep.
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn child");
        self.children.push(child);
    }

    /// Wait for every child; each must succeed.
    fn finish(mut self) {
        let deadline = Instant::now() + TIMEOUT;
        for mut c in std::mem::take(&mut self.children) {
            loop {
                match c.try_wait().expect("wait") {
                    Some(st) => {
                        assert!(st.success(), "child {} failed: {st}", c.id());
                        break;
                    }
                    None if Instant::now() > deadline => {
                        let _ = c.kill();
                        let _ = c.wait();
                        panic!("child {} did not finish", c.id());
                    }
                    None => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        }
        assert!(
            !std::path::Path::new(&format!("/dev/shm{}", self.name)).exists(),
            "segment left in /dev/shm"
        );
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        let _ = ShmSegment::unlink(&self.name);
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The child side's arguments, when this process is a child running `test`.
struct ChildArgs {
    seg: String,
    local: usize,
    nlocal: usize,
    doorbell: Option<bool>,
}

fn child_args(test: &str) -> Option<ChildArgs> {
    let role = std::env::var(ROLE).ok()?;
    if role != test {
        return None;
    }
    let get = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} unset"));
    Some(ChildArgs {
        seg: get(SEG),
        local: get(LOCAL).parse().expect("local index"),
        nlocal: get(NLOCAL).parse().expect("nlocal"),
        doorbell: match get(DOORBELL).as_str() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        },
    })
}

/// Parent side: wait for a HELLO from every child (so all attached), then unlink the name.
fn attach_all(t: &mut ShmTransport, job: &Job, nlocal: usize) {
    let mut w = Waiter::new();
    for _ in 1..nlocal {
        let (_, m) = recv_one(t, &mut w);
        assert_eq!(word(&m, 0), HELLO);
    }
    ShmSegment::unlink(&job.name).expect("unlink");
}

fn hello(t: &mut ShmTransport, to: PeerId) {
    send(t, to, &HELLO.to_le_bytes(), &mut Waiter::new());
}

// ---------------------------------------------------------------- two processes

const PINGPONG: &str = "two_processes_ping_pong_and_get";
const PP_RING: usize = 256 << 10;
const PP_ROUNDS: u64 = 100_000;
const GET_BYTES: usize = 4 << 20;

#[test]
fn two_processes_ping_pong_and_get() {
    if let Some(a) = child_args(PINGPONG) {
        return pingpong_child(a);
    }
    let mut job = Job::new("pp");
    let cfg = config(PP_RING, None);
    let seg = ShmSegment::create(&job.name, 2, &cfg).expect("create");
    job.spawn(PINGPONG, 1, 2, None);
    let peers = ranks(2);
    let mut t = ShmTransport::new(seg, 0, peers.clone()).expect("transport");
    attach_all(&mut t, &job, 2);
    let max = t.caps().max_packet;

    let mut rng = Rng::new(0xfeed);
    let mut buf = Vec::new();
    let mut w = Waiter::new();
    for seq in 0..PP_ROUNDS {
        build(seq, size(&mut rng, max), &mut rng, &mut buf);
        send(&mut t, peers[1], &buf, &mut w);
        let (from, reply) = recv_one(&mut t, &mut w);
        assert_eq!(from, peers[1]);
        assert_eq!(verify(&reply), seq, "reply out of order");
        w.progress();
    }

    // Single-copy read of the child's 4 MiB buffer, into three unequal pieces.
    let (_, req) = recv_one(&mut t, &mut w);
    assert_eq!(word(&req, 0), GET_REQ);
    let (addr, len, sum) = (word(&req, 1), word(&req, 2), word(&req, 3));
    assert_eq!(len as usize, GET_BYTES);
    let mut dst = vec![0u8; GET_BYTES];
    {
        let (x, rest) = dst.split_at_mut(12_345);
        let (y, z) = rest.split_at_mut(1 << 21);
        let mut iov = [IoSliceMut::new(x), IoSliceMut::new(y), IoSliceMut::new(z)];
        t.get(
            peers[1],
            RemoteRegion {
                addr,
                len,
                ..RemoteRegion::at(0, 0)
            },
            &mut iov,
        )
        .expect("get 4 MiB");
    }
    assert_eq!(fnv(&dst), sum, "get returned wrong bytes");
    send(&mut t, peers[1], &DONE.to_le_bytes(), &mut w);
    drop(t);
    job.finish();
}

fn pingpong_child(a: ChildArgs) {
    let cfg = config(PP_RING, a.doorbell);
    let seg = ShmSegment::open(&a.seg, a.nlocal, &cfg).expect("open");
    let peers = ranks(a.nlocal);
    let mut t = ShmTransport::new(seg, a.local, peers.clone()).expect("transport");
    hello(&mut t, peers[0]);
    let max = t.caps().max_packet;
    let mut rng = Rng::new(0xbeef);
    let mut buf = Vec::new();
    let mut w = Waiter::new();
    for seq in 0..PP_ROUNDS {
        let (from, msg) = recv_one(&mut t, &mut w);
        assert_eq!(from, peers[0]);
        assert_eq!(verify(&msg), seq, "ping out of order");
        build(seq, size(&mut rng, max), &mut rng, &mut buf);
        send(&mut t, peers[0], &buf, &mut w);
        w.progress();
    }
    let mut src = vec![0u8; GET_BYTES];
    rng.fill(&mut src);
    let mut req = Vec::new();
    for v in [GET_REQ, src.as_ptr() as u64, src.len() as u64, fnv(&src)] {
        req.extend_from_slice(&v.to_le_bytes());
    }
    send(&mut t, peers[0], &req, &mut w);
    let (_, done) = recv_one(&mut t, &mut w);
    assert_eq!(word(&done, 0), DONE);
    black_box(&src);
}

// ---------------------------------------------------------------- four processes

const ALLTOALL: &str = "four_processes_all_to_all";
const A2A_RING: usize = 16 << 10;
const A2A_MSGS: u64 = 20_000;

#[test]
fn four_processes_all_to_all() {
    if let Some(a) = child_args(ALLTOALL) {
        let seg = ShmSegment::open(&a.seg, a.nlocal, &config(A2A_RING, a.doorbell)).expect("open");
        let mut t = ShmTransport::new(seg, a.local, ranks(a.nlocal)).expect("transport");
        hello(&mut t, ranks(a.nlocal)[0]);
        return all_to_all(&mut t, a.local, a.nlocal, None);
    }
    for doorbell in [Some(true), Some(false)] {
        let mut job = Job::new(&format!("a2a-{doorbell:?}"));
        let seg = ShmSegment::create(&job.name, 4, &config(A2A_RING, doorbell)).expect("create");
        for local in 1..4 {
            job.spawn(ALLTOALL, local, 4, doorbell);
        }
        let mut t = ShmTransport::new(seg, 0, ranks(4)).expect("transport");
        all_to_all(&mut t, 0, 4, Some(&job.name));
        drop(t);
        job.finish();
    }
}

/// Everyone sends `A2A_MSGS` checksummed messages of random sizes to everyone else, while
/// receiving, and checks per-source order. Small rings, so wrap-around and backpressure happen
/// all the time. The leader (`unlink` is its segment name) unlinks the name once every child
/// has said hello.
fn all_to_all(t: &mut ShmTransport, me: usize, n: usize, mut unlink: Option<&str>) {
    let mut hellos = 0;
    let peers = ranks(n);
    let max = t.caps().max_packet;
    let mut rng = Rng::new(me as u64 + 100);
    let mut next_send = vec![0u64; n];
    let mut next_recv = vec![0u64; n];
    next_send[me] = A2A_MSGS;
    next_recv[me] = A2A_MSGS;
    let mut pending: Vec<Option<Vec<u8>>> = vec![None; n];
    let mut w = Waiter::new();
    let done = |s: &[u64]| s.iter().all(|&x| x == A2A_MSGS);
    while !(done(&next_send) && done(&next_recv)) {
        let mut progressed = false;
        for j in 0..n {
            if j == me || next_send[j] == A2A_MSGS {
                continue;
            }
            let msg = pending[j].get_or_insert_with(|| {
                let mut b = Vec::new();
                let len = size(&mut rng, max);
                build(next_send[j], len, &mut rng, &mut b);
                b
            });
            if t.try_send(peers[j], &[IoSlice::new(msg)])
                .expect("try_send")
                == SendOutcome::Done
            {
                pending[j] = None;
                next_send[j] += 1;
                progressed = true;
            }
        }
        let got = t
            .poll_recv(&mut |from, msg| {
                let j = peers.iter().position(|&p| p == from).expect("known peer");
                if msg.len() == 8 && word(msg, 0) == HELLO {
                    assert_eq!(next_recv[j], 0, "hello comes first");
                    hellos += 1;
                    return;
                }
                assert_eq!(verify(msg), next_recv[j], "from local {j}: order");
                next_recv[j] += 1;
            })
            .expect("poll_recv");
        if hellos == n - 1 {
            if let Some(name) = unlink.take() {
                ShmSegment::unlink(name).expect("unlink");
            }
        }
        if progressed || got > 0 {
            w.progress();
        } else {
            w.idle("all-to-all traffic");
        }
    }
}

// ---------------------------------------------------------------- a peer that dies

const DEATH: &str = "dead_peer_is_detected";

/// A receiver that exits without closing its driver: once its ring is full, `try_send` keeps
/// answering `WouldBlock` for a while, then `PeerLost`.
#[test]
fn dead_peer_is_detected() {
    if let Some(a) = child_args(DEATH) {
        let seg = ShmSegment::open(&a.seg, a.nlocal, &config(4096, a.doorbell)).expect("open");
        let mut t = ShmTransport::new(seg, a.local, ranks(a.nlocal)).expect("transport");
        hello(&mut t, ranks(a.nlocal)[0]);
        // Gone without dropping `t`, as after a crash.
        std::process::exit(0);
    }
    let mut job = Job::new("death");
    let seg = ShmSegment::create(&job.name, 2, &config(4096, None)).expect("create");
    job.spawn(DEATH, 1, 2, None);
    let peers = ranks(2);
    let mut t = ShmTransport::new(seg, 0, peers.clone()).expect("transport");
    attach_all(&mut t, &job, 2);
    for c in &mut job.children {
        assert!(c.wait().expect("reap").success());
    }
    job.children.clear();
    let start = Instant::now();
    let lost = loop {
        match t.try_send(peers[1], &[IoSlice::new(&[0; 256])]) {
            Ok(SendOutcome::Done) => {}
            Ok(SendOutcome::WouldBlock) => std::thread::sleep(Duration::from_micros(50)),
            Err(e) => break e,
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "death never noticed"
        );
    };
    assert!(
        matches!(lost, madmpi_transports::Error::PeerLost(p) if p == peers[1]),
        "{lost:?}"
    );
    drop(t);
    job.finish();
}

// ---------------------------------------------------------------- benchmark

const BENCH: &str = "bench_latency_and_get_bandwidth";
/// Round trips per timing window, and windows.
const BENCH_WINDOW: u64 = 2_000;
const BENCH_WINDOWS: u64 = 300;
const BENCH_GET: usize = 1 << 20;

/// Wait for one packet, spinning (no `pause`: it costs ~140 cycles on recent Intel parts) and
/// yielding now and then, since the machine may be shared.
fn bench_recv(t: &mut ShmTransport) {
    let mut spins = 0u32;
    while t
        .poll_recv(&mut |_, m| {
            black_box(m);
        })
        .unwrap()
        == 0
    {
        spins += 1;
        if spins == 20_000 {
            spins = 0;
            std::thread::yield_now();
        }
    }
}

fn bench_send(t: &mut ShmTransport, to: PeerId, msg: &[u8]) {
    while t.try_send(to, &[IoSlice::new(msg)]).unwrap() != SendOutcome::Done {
        std::hint::spin_loop();
    }
}

/// Minimum and median of per-window averages: the minimum is what the code costs when both
/// processes have a core; the median shows the noise of a shared machine.
fn min_median(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (v[0], v[v.len() / 2])
}

/// Prints numbers, asserts none (the machine is shared):
/// `cargo test --release -p madmpi-transports --test shm_processes -- --ignored --nocapture`
#[test]
#[ignore]
fn bench_latency_and_get_bandwidth() {
    if let Some(a) = child_args(BENCH) {
        return bench_child(a);
    }
    cache_line_floor();
    for doorbell in [false, true] {
        let mut job = Job::new(&format!("bench-{doorbell}"));
        let seg = ShmSegment::create(&job.name, 2, &config(PP_RING, Some(doorbell))).unwrap();
        job.spawn(BENCH, 1, 2, Some(doorbell));
        let peers = ranks(2);
        let mut t = ShmTransport::new(seg, 0, peers.clone()).unwrap();
        attach_all(&mut t, &job, 2);
        let msg = [7u8; 8];
        let mut windows = Vec::new();
        for _ in 0..BENCH_WINDOWS {
            let start = Instant::now();
            for _ in 0..BENCH_WINDOW {
                bench_send(&mut t, peers[1], &msg);
                bench_recv(&mut t);
            }
            windows.push(start.elapsed().as_nanos() as f64 / (2 * BENCH_WINDOW) as f64);
        }
        let (min, med) = min_median(windows);
        println!(
            "shm 8-byte half round trip (doorbell {doorbell}): {min:.0} ns best window, \
             {med:.0} ns median"
        );

        let (_, req) = recv_one(&mut t, &mut Waiter::new());
        let region = RemoteRegion {
            addr: word(&req, 1),
            len: word(&req, 2),
            ..RemoteRegion::at(0, 0)
        };
        let mut dst = vec![0u8; BENCH_GET];
        let mut windows = Vec::new();
        for _ in 0..100 {
            let start = Instant::now();
            for _ in 0..10 {
                t.get(peers[1], region, &mut [IoSliceMut::new(&mut dst)])
                    .unwrap();
            }
            windows.push(start.elapsed().as_secs_f64() / 10.0);
        }
        let (min, med) = min_median(windows);
        let mbps = |secs: f64| BENCH_GET as f64 / secs / 1e6;
        println!(
            "shm get of 1 MiB: {:.0} us ({:.0} MB/s) best window, {:.0} MB/s median",
            min * 1e6,
            mbps(min),
            mbps(med)
        );
        let src = dst.clone();
        let mut windows = Vec::new();
        for _ in 0..100 {
            let start = Instant::now();
            for _ in 0..10 {
                black_box(&mut dst).copy_from_slice(black_box(&src));
            }
            windows.push(start.elapsed().as_secs_f64() / 10.0);
        }
        println!(
            "  (memcpy of 1 MiB within a process: {:.0} MB/s best)",
            mbps(min_median(windows).0)
        );
        send(&mut t, peers[1], &DONE.to_le_bytes(), &mut Waiter::new());
        drop(t);
        job.finish();
    }
    idle_poll_cost();
}

fn bench_child(a: ChildArgs) {
    let seg = ShmSegment::open(&a.seg, a.nlocal, &config(PP_RING, a.doorbell)).unwrap();
    let peers = ranks(a.nlocal);
    let mut t = ShmTransport::new(seg, a.local, peers.clone()).unwrap();
    hello(&mut t, peers[0]);
    let msg = [9u8; 8];
    for _ in 0..BENCH_WINDOWS * BENCH_WINDOW {
        bench_recv(&mut t);
        bench_send(&mut t, peers[0], &msg);
    }
    let src = vec![5u8; BENCH_GET];
    let mut req = Vec::new();
    for v in [GET_REQ, src.as_ptr() as u64, src.len() as u64] {
        req.extend_from_slice(&v.to_le_bytes());
    }
    send(&mut t, peers[0], &req, &mut Waiter::new());
    let (_, done) = recv_one(&mut t, &mut Waiter::new());
    assert_eq!(word(&done, 0), DONE);
    black_box(&src);
}

/// The hardware floor: one cache line written by a thread and read by another, each way.
fn cache_line_floor() {
    use std::sync::atomic::{AtomicU64, Ordering};
    #[repr(align(128))]
    struct Line(AtomicU64);
    let (ping, pong) = (Line(AtomicU64::new(0)), Line(AtomicU64::new(0)));
    let total = BENCH_WINDOWS * BENCH_WINDOW;
    let windows = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 1..=total {
                let mut spins = 0u32;
                while ping.0.load(Ordering::Acquire) != i {
                    spins += 1;
                    if spins == 20_000 {
                        spins = 0;
                        std::thread::yield_now();
                    }
                }
                pong.0.store(i, Ordering::Release);
            }
        });
        let mut windows = Vec::new();
        let mut i = 0;
        for _ in 0..BENCH_WINDOWS {
            let start = Instant::now();
            for _ in 0..BENCH_WINDOW {
                i += 1;
                ping.0.store(i, Ordering::Release);
                let mut spins = 0u32;
                while pong.0.load(Ordering::Acquire) != i {
                    spins += 1;
                    if spins == 20_000 {
                        spins = 0;
                        std::thread::yield_now();
                    }
                }
            }
            windows.push(start.elapsed().as_nanos() as f64 / (2 * BENCH_WINDOW) as f64);
        }
        windows
    });
    let (min, med) = min_median(windows);
    println!("cache-line ping-pong between two threads (floor): {min:.0} ns best window, {med:.0} ns median");
}
/// Cost of a `poll_recv` that finds nothing, with 16 local processes (15 incoming rings).
fn idle_poll_cost() {
    for doorbell in [false, true] {
        let name = format!("/madmpi-test-{}-idle-{doorbell}", std::process::id());
        let seg = ShmSegment::create(&name, 16, &config(4096, Some(doorbell))).unwrap();
        ShmSegment::unlink(&name).unwrap();
        let mut t = ShmTransport::new(seg, 0, ranks(16)).unwrap();
        let iters = 10_000_000u32;
        let start = Instant::now();
        for _ in 0..iters {
            black_box(t.poll_recv(&mut |_, _| {}).unwrap());
        }
        let ns = start.elapsed().as_nanos() as f64 / iters as f64;
        println!("idle poll_recv over 15 rings (doorbell {doorbell}): {ns:.1} ns");
    }
}
