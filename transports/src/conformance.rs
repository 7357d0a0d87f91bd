//! The conformance suite every driver runs: the contract of [`Transport`] checked between two
//! endpoints of one process (for `self`, both ends are the same value).
//!
//! A driver's test builds a [`Pair`] and calls [`run_all`].

use std::collections::VecDeque;
use std::io::{IoSlice, IoSliceMut};

use crate::loopback::LoopbackTransport;
use crate::shm::{ShmConfig, ShmSegment, ShmTransport};
use crate::{Error, PeerId, RemoteRegion, SendOutcome, Transport};

/// Two endpoints: `a` sends to `b`; `b` polls and reads `a`'s memory with `get`.
/// `a()` and `b()` may return the same driver.
pub(crate) trait Pair {
    fn a(&mut self) -> &mut dyn Transport;
    fn b(&mut self) -> &mut dyn Transport;
    fn a_id(&self) -> PeerId;
    fn b_id(&self) -> PeerId;
    /// Wait until what was sent has arrived (a driver whose packets take time on the wire,
    /// as the emulated networks'); nothing by default.
    fn settle(&mut self) {}
    /// How many polls in a row that deliver nothing mean that nothing is in flight. One for
    /// drivers whose data is in the receiver's reach once sent (a ring, a socket); more for
    /// drivers that move a large packet in several exchanges, each at a poll of both ends
    /// (libfabric's rendezvous with manual progress).
    fn patience(&self) -> u32 {
        1
    }
}

/// xorshift64*: deterministic sizes and contents without a dependency.
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// The content of packet `seq` of length `len`: the sequence number, then bytes derived from it.
fn packet(seq: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    let mut r = Rng::new(seq);
    while out.len() < len {
        let w = r.next().to_le_bytes();
        out.extend_from_slice(&w[..(len - out.len()).min(8)]);
    }
    if len >= 8 {
        out[..8].copy_from_slice(&seq.to_le_bytes());
    }
}

/// Poll `b` until it delivers nothing more, collecting packets from `a`. `a` is polled too, as
/// the engine polls every driver: a driver whose provider progresses only when called (libfabric
/// with manual progress) moves its sends then.
pub(crate) fn drain(p: &mut dyn Pair, into: &mut VecDeque<Vec<u8>>) {
    p.settle();
    let a = p.a_id();
    let mut idle = 0;
    loop {
        if a != p.b_id() {
            p.a()
                .poll_recv(&mut |_, _| panic!("a received a packet"))
                .expect("poll_recv of a");
        }
        let n = p
            .b()
            .poll_recv(&mut |from, bytes| {
                assert_eq!(from, a, "packet attributed to the wrong peer");
                into.push_back(bytes.to_vec());
            })
            .expect("poll_recv");
        if n > 0 {
            idle = 0;
            continue;
        }
        idle += 1;
        if idle >= p.patience() {
            return;
        }
        std::thread::yield_now();
    }
}

fn send_blocking(p: &mut dyn Pair, iov: &[IoSlice<'_>], got: &mut VecDeque<Vec<u8>>) {
    let b = p.b_id();
    for _ in 0..1_000_000 {
        match p.a().try_send(b, iov).expect("try_send") {
            SendOutcome::Done => return,
            SendOutcome::WouldBlock => drain(p, got),
        }
    }
    panic!("try_send never succeeded");
}

/// Random sizes (mostly small, some up to `max_packet`): each packet arrives once, in order,
/// intact, with the right source.
pub(crate) fn order_and_exactly_once(p: &mut dyn Pair) {
    // `max_packet` itself is covered by its own test; stay fast with big drivers.
    let max = p.a().caps().max_packet.min(64 << 10);
    let mut rng = Rng::new(1);
    let mut got = VecDeque::new();
    let mut next_expected = 0u64;
    let mut buf = Vec::new();
    let mut want = Vec::new();
    let check = |got: &mut VecDeque<Vec<u8>>, next: &mut u64, want: &mut Vec<u8>| {
        while let Some(pk) = got.pop_front() {
            packet(*next, pk.len(), want);
            assert!(
                pk == *want,
                "packet {next} corrupt or out of order ({} bytes, begins with {:?})",
                pk.len(),
                &pk[..pk.len().min(8)]
            );
            *next += 1;
        }
    };
    const N: u64 = 5000;
    for seq in 0..N {
        let len = match rng.below(100) {
            0 => max,
            1..=5 => rng.below(max + 1),
            6..=30 => 8 + rng.below(4096),
            _ => 8 + rng.below(64),
        }
        .min(max);
        packet(seq, len, &mut buf);
        send_blocking(p, &[IoSlice::new(&buf)], &mut got);
        if rng.below(4) == 0 {
            drain(p, &mut got);
        }
        check(&mut got, &mut next_expected, &mut want);
    }
    drain(p, &mut got);
    check(&mut got, &mut next_expected, &mut want);
    assert_eq!(next_expected, N);
    drain(p, &mut got);
    assert!(got.is_empty(), "extra packets delivered");
}

/// The packet is the concatenation of the iovecs, empty entries included.
pub(crate) fn iovec_gather(p: &mut dyn Pair) {
    let mut rng = Rng::new(2);
    let mut got = VecDeque::new();
    let max_iov = p.a().caps().max_iov.min(64);
    for round in 0..200 {
        let nparts = 1 + rng.below(max_iov);
        let piece = p.a().caps().max_packet / nparts;
        let parts: Vec<Vec<u8>> = (0..nparts)
            .map(|k| {
                let len = if rng.below(4) == 0 {
                    0
                } else {
                    rng.below(100.min(piece) + 1)
                };
                vec![(round + k) as u8; len]
            })
            .collect();
        let iov: Vec<_> = parts.iter().map(|v| IoSlice::new(v)).collect();
        send_blocking(p, &iov, &mut got);
        drain(p, &mut got);
        assert_eq!(got.pop_front().expect("delivered"), parts.concat());
        assert!(got.is_empty());
    }
    // No iovec at all is a zero-length packet.
    send_blocking(p, &[], &mut got);
    drain(p, &mut got);
    assert_eq!(got.pop_front(), Some(vec![]));
}

/// Zero-length packets are packets.
pub(crate) fn zero_length(p: &mut dyn Pair) {
    let mut got = VecDeque::new();
    for _ in 0..10 {
        send_blocking(p, &[IoSlice::new(&[])], &mut got);
    }
    send_blocking(p, &[IoSlice::new(b"end")], &mut got);
    drain(p, &mut got);
    assert_eq!(got.len(), 11);
    assert!(got.iter().take(10).all(Vec::is_empty));
    assert_eq!(got[10], b"end");
}

/// Filling the link gives `WouldBlock` (nothing taken), and draining makes room again.
pub(crate) fn backpressure(p: &mut dyn Pair) {
    let b = p.b_id();
    let mut got = VecDeque::new();
    let mut buf = Vec::new();
    let mut accepted = 0u64;
    let mut blocked = false;
    let size = p.a().caps().max_packet.min(1024);
    for _ in 0..1_000_000 {
        packet(accepted, size, &mut buf);
        match p.a().try_send(b, &[IoSlice::new(&buf)]).expect("try_send") {
            SendOutcome::Done => accepted += 1,
            SendOutcome::WouldBlock => {
                blocked = true;
                break;
            }
        }
    }
    assert!(blocked, "never saw backpressure");
    // Still full: another packet of that size is refused too, and leaves no trace.
    let other = vec![0xee; size];
    assert_eq!(
        p.a().try_send(b, &[IoSlice::new(&other)]).unwrap(),
        SendOutcome::WouldBlock
    );
    drain(p, &mut got);
    assert_eq!(got.len() as u64, accepted);
    for (seq, pk) in got.iter().enumerate() {
        packet(seq as u64, size, &mut buf);
        assert_eq!(*pk, buf);
    }
    got.clear();
    assert_eq!(
        p.a().try_send(b, &[IoSlice::new(b"after")]).unwrap(),
        SendOutcome::Done
    );
    drain(p, &mut got);
    assert_eq!(got, [b"after".to_vec()]);
}

/// `max_packet` bytes go through; one more is refused as invalid.
pub(crate) fn max_packet(p: &mut dyn Pair) {
    let b = p.b_id();
    let max = p.a().caps().max_packet;
    let mut got = VecDeque::new();
    let big: Vec<u8> = (0..max).map(|i| (i % 251) as u8).collect();
    send_blocking(
        p,
        &[IoSlice::new(&big[..max / 3]), IoSlice::new(&big[max / 3..])],
        &mut got,
    );
    drain(p, &mut got);
    assert_eq!(got.pop_front().as_deref(), Some(&big[..]));
    let over = vec![0u8; max + 1];
    assert!(matches!(
        p.a().try_send(b, &[IoSlice::new(&over)]),
        Err(Error::Invalid(_))
    ));
}

/// `b` reads a region of `a`'s memory into scattered buffers.
pub(crate) fn get(p: &mut dyn Pair) {
    let a = p.a_id();
    if !p.b().caps().can_get {
        let mut one = [0u8; 1];
        let r = RemoteRegion {
            addr: one.as_ptr() as u64,
            len: 1,
            ..RemoteRegion::at(0, 0)
        };
        assert!(p.b().get(a, r, &mut [IoSliceMut::new(&mut one)]).is_err());
        return;
    }
    let src: Vec<u8> = {
        let mut r = Rng::new(3);
        (0..(1 << 20) + 13).map(|_| r.next() as u8).collect()
    };
    let region = |off: usize, len: usize| RemoteRegion {
        addr: src.as_ptr() as u64 + off as u64,
        len: len as u64,
        ..RemoteRegion::at(0, 0)
    };
    let mut rng = Rng::new(4);
    for round in 0..20 {
        let len = match round {
            0 => src.len(),
            1 => 1,
            _ => rng.below(src.len()),
        };
        let off = rng.below(src.len() - len + 1);
        let mut dst = vec![0u8; len];
        // Split the destination at random points, with some empty pieces.
        let mut cuts: Vec<usize> = (0..rng.below(8)).map(|_| rng.below(len + 1)).collect();
        cuts.extend([0, len]);
        cuts.sort_unstable();
        let mut rest: &mut [u8] = &mut dst;
        let mut iov = Vec::new();
        for w in cuts.windows(2) {
            let (head, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            iov.push(IoSliceMut::new(head));
            rest = tail;
        }
        p.b().get(a, region(off, len), &mut iov).expect("get");
        drop(iov);
        assert!(dst == src[off..off + len], "get round {round}: wrong bytes");
    }
    // More pieces than one system call takes.
    let mut dst = vec![0u8; 3000 * 3];
    {
        let mut iov: Vec<_> = dst.chunks_mut(3).map(IoSliceMut::new).collect();
        p.b()
            .get(a, region(5, 9000), &mut iov)
            .expect("get of 3000 pieces");
    }
    assert_eq!(dst, src[5..9005]);
    // Zero bytes, and a length mismatch.
    p.b().get(a, region(0, 0), &mut []).expect("empty get");
    let mut small = [0u8; 4];
    assert!(matches!(
        p.b()
            .get(a, region(0, 5), &mut [IoSliceMut::new(&mut small)]),
        Err(Error::Invalid(_))
    ));
}

/// Reachability: the pair reach each other, strangers are refused.
pub(crate) fn reachability(p: &mut dyn Pair) {
    let (a, b) = (p.a_id(), p.b_id());
    assert!(p.a().reaches(b));
    assert!(p.b().reaches(a));
    let stranger = PeerId(1_000_000);
    assert!(!p.a().reaches(stranger));
    assert!(matches!(
        p.a().try_send(stranger, &[IoSlice::new(b"x")]),
        Err(Error::Invalid(_))
    ));
}

pub(crate) fn run_all(p: &mut dyn Pair) {
    reachability(p);
    zero_length(p);
    iovec_gather(p);
    order_and_exactly_once(p);
    backpressure(p);
    max_packet(p);
    get(p);
}

// ---- the drivers of this crate ----

struct SelfPair(LoopbackTransport, PeerId);

impl Pair for SelfPair {
    fn a(&mut self) -> &mut dyn Transport {
        &mut self.0
    }
    fn b(&mut self) -> &mut dyn Transport {
        &mut self.0
    }
    fn a_id(&self) -> PeerId {
        self.1
    }
    fn b_id(&self) -> PeerId {
        self.1
    }
}

#[test]
fn loopback_conformance() {
    let me = PeerId(3);
    // A small limit so that backpressure shows quickly.
    run_all(&mut SelfPair(
        LoopbackTransport::with_limit(me, 1 << 20),
        me,
    ));
    run_all(&mut SelfPair(LoopbackTransport::new(me), me));
}

struct ShmPair {
    a: ShmTransport,
    b: ShmTransport,
    ids: [PeerId; 2],
}

impl Pair for ShmPair {
    fn a(&mut self) -> &mut dyn Transport {
        &mut self.a
    }
    fn b(&mut self) -> &mut dyn Transport {
        &mut self.b
    }
    fn a_id(&self) -> PeerId {
        self.ids[0]
    }
    fn b_id(&self) -> PeerId {
        self.ids[1]
    }
}

/// Removes the segment name however the test ends.
pub(crate) struct Unlink(pub(crate) String);

impl Drop for Unlink {
    fn drop(&mut self) {
        let _ = ShmSegment::unlink(&self.0);
    }
}

pub(crate) fn seg_name(tag: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "/madmpi-test-{}-{tag}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Both ends of a two-process segment, in this process.
fn shm_pair(cfg: &ShmConfig, reversed: bool) -> ShmPair {
    let name = seg_name("conf");
    let _guard = Unlink(name.clone());
    let s0 = ShmSegment::create(&name, 2, cfg).expect("create");
    let s1 = ShmSegment::open(&name, 2, cfg).expect("open");
    ShmSegment::unlink(&name).expect("unlink");
    assert!(
        ShmSegment::open(&name, 2, cfg).is_err(),
        "the name is gone after unlink"
    );
    // Non-contiguous world ranks, in both orders.
    let ranks = vec![PeerId(7), PeerId(2)];
    let t0 = ShmTransport::new(s0, 0, ranks.clone()).expect("transport 0");
    let t1 = ShmTransport::new(s1, 1, ranks.clone()).expect("transport 1");
    if reversed {
        ShmPair {
            a: t1,
            b: t0,
            ids: [ranks[1], ranks[0]],
        }
    } else {
        ShmPair {
            a: t0,
            b: t1,
            ids: [ranks[0], ranks[1]],
        }
    }
}

fn cfg(ring: usize, doorbell: bool, cma: bool) -> ShmConfig {
    ShmConfig {
        ring_bytes: ring,
        doorbell: Some(doorbell),
        cma,
        ..ShmConfig::default()
    }
}

#[test]
fn shm_conformance() {
    for (ring, doorbell, reversed) in [
        (4096, false, false),
        (4096, true, true),
        (256 << 10, false, true),
        (64 << 10, true, false),
    ] {
        run_all(&mut shm_pair(&cfg(ring, doorbell, true), reversed));
    }
}

#[test]
fn shm_without_cma_refuses_get() {
    let mut p = shm_pair(&cfg(4096, false, false), false);
    assert!(!p.b.caps().can_get);
    let a = p.a_id();
    let mut x = [0u8; 8];
    let r = RemoteRegion {
        addr: x.as_ptr() as u64,
        len: 8,
        ..RemoteRegion::at(0, 0)
    };
    assert!(matches!(
        p.b.get(a, r, &mut [IoSliceMut::new(&mut x)]),
        Err(Error::Unsupported(_))
    ));
    run_all(&mut p);
}

#[test]
fn shm_setup_errors_are_clear() {
    let c = ShmConfig::default();
    let name = seg_name("setup");
    let _guard = Unlink(name.clone());
    assert!(matches!(
        ShmSegment::create("no-slash", 2, &c),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        ShmSegment::create("/a/b", 2, &c),
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        ShmSegment::open(&name, 2, &c),
        Err(Error::Io { .. })
    ));
    let s = ShmSegment::create(&name, 3, &c).expect("create");
    assert_eq!((s.nlocal(), s.name()), (3, name.as_str()));
    assert!(
        matches!(ShmSegment::create(&name, 3, &c), Err(Error::Io { .. })),
        "O_EXCL"
    );
    let msg = |r: crate::Result<ShmSegment>| match r {
        Err(Error::Invalid(m)) => m,
        other => panic!("expected a mismatch error, got {other:?}"),
    };
    let m = msg(ShmSegment::open(&name, 4, &c));
    assert!(
        m.contains("3 local processes") && m.contains("4 expected"),
        "{m}"
    );
    let m = msg(ShmSegment::open(&name, 3, &cfg(8192, false, true)));
    assert!(m.contains("rings of"), "{m}");
    // Claiming a local index twice, a wrong peer list.
    let peers = vec![PeerId(0), PeerId(1), PeerId(2)];
    let t = ShmTransport::new(ShmSegment::open(&name, 3, &c).unwrap(), 1, peers.clone()).unwrap();
    let again = ShmTransport::new(ShmSegment::open(&name, 3, &c).unwrap(), 1, peers.clone());
    assert!(matches!(again, Err(Error::Invalid(_))));
    let dup = vec![PeerId(0), PeerId(0), PeerId(2)];
    assert!(ShmTransport::new(ShmSegment::open(&name, 3, &c).unwrap(), 0, dup).is_err());
    assert!(!t.reaches(PeerId(1)), "not to itself");
    assert!(t.reaches(PeerId(2)));
    drop((t, s));
    ShmSegment::unlink(&name).unwrap();
    ShmSegment::unlink(&name).expect("unlinking twice is fine");
}

#[test]
fn shm_closed_peer_with_full_ring_is_lost() {
    let c = cfg(4096, false, true);
    let mut p = shm_pair(&c, false);
    let b = p.b_id();
    // Fill the ring, then the receiver goes away.
    while p.a.try_send(b, &[IoSlice::new(&[0; 512])]).unwrap() == SendOutcome::Done {}
    let ShmPair {
        mut a, b: receiver, ..
    } = p;
    drop(receiver);
    assert!(matches!(a.try_send(b, &[IoSlice::new(&[0; 512])]), Err(Error::PeerLost(x)) if x == b));
}

#[test]
fn shm_single_process_node() {
    let name = seg_name("single");
    let _guard = Unlink(name.clone());
    let s = ShmSegment::create(&name, 1, &ShmConfig::default()).unwrap();
    let mut t = ShmTransport::new(s, 0, vec![PeerId(4)]).unwrap();
    assert!(!t.reaches(PeerId(4)));
    assert_eq!(t.poll_recv(&mut |_, _| unreachable!()).unwrap(), 0);
}

#[test]
fn shm_segment_is_reclaimed_after_unlink() {
    let name = seg_name("gone");
    let _guard = Unlink(name.clone());
    let s = ShmSegment::create(&name, 2, &ShmConfig::default()).unwrap();
    let path = format!("/dev/shm{name}");
    assert!(std::path::Path::new(&path).exists());
    ShmSegment::unlink(&name).unwrap();
    assert!(!std::path::Path::new(&path).exists());
    drop(s);
}

/// Split copies between the two ends of an in-process pair (cross-memory attach to our own
/// pid): `b` receives from `a`.
mod split {
    use super::*;
    use crate::shm::{SplitCopy, SplitJob};

    fn data(n: usize, seed: u8) -> Vec<u8> {
        (0..n)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// The sender writes while the receiver reads, from two threads: every byte lands, every
    /// chunk is copied once by one of them, at several sizes and chunk counts.
    #[test]
    fn both_copy_at_once() {
        let mut p = shm_pair(&cfg(4096, false, true), false);
        let (a_id, b_id) = (p.a_id(), p.b_id());
        assert_eq!(p.b.split_min(), Some(128 << 10));
        for (n, chunks) in [(1, 1), (4096 * 3 + 5, 3), (1 << 20, 2), ((4 << 20) + 7, 4)] {
            for round in 0..4u8 {
                let src = data(n, round);
                let mut dst = vec![0u8; n];
                let gen = p.b.split_open(a_id).expect("open");
                let job = SplitJob::new(gen, n, chunks).expect("job");
                let (a, b) = (&mut p.a, &mut p.b);
                let (src_addr, dst_addr) = (src.as_ptr() as u64, dst.as_mut_ptr() as u64);
                let (got, put) = std::thread::scope(|s| {
                    let helper = s.spawn(move || {
                        // SAFETY: `src` outlives the scope and is only read.
                        unsafe { a.split_put(b_id, job, src_addr as *const u8, dst_addr) }
                    });
                    // SAFETY: `dst` is only written by the copy until it returns.
                    let got = unsafe { b.split_get(a_id, job, src_addr, dst_addr as *mut u8) };
                    (
                        got.expect("split_get"),
                        helper.join().expect("helper").expect("put"),
                    )
                });
                assert_eq!(got.mine + got.theirs, chunks, "n={n}");
                assert_eq!(got.theirs, put, "n={n}: the sender's count");
                assert!(dst == src, "n={n} chunks={chunks}: data differs");
            }
        }
    }

    /// A `get` of one large block asks the sender's driver for help with a record of its own:
    /// a sender that polls meanwhile serves it (the engine's callback never sees the record),
    /// one that does not leaves the receiver to copy everything; the data lands either way.
    #[test]
    fn get_of_a_large_block_is_helped_by_the_senders_poll() {
        let mut p = shm_pair(&cfg(4096, false, true), false);
        let a_id = p.a_id();
        // Four chunks of 4 MiB: the receiver's own copy leaves the polling thread time.
        let n = (16 << 20) + 3;
        // Alone first: nobody polls `a`.
        let src = data(n, 1);
        let mut dst = vec![0u8; n];
        let whole = RemoteRegion {
            addr: src.as_ptr() as u64,
            len: n as u64,
            ..RemoteRegion::at(0, 0)
        };
        p.b.get(a_id, whole, &mut [IoSliceMut::new(&mut dst)])
            .expect("get");
        assert!(dst == src);
        // The request, read late, finds the transfer over and takes nothing.
        for _ in 0..2 {
            p.a.poll_recv(&mut |_, _| panic!("the engine got the driver's record"))
                .expect("poll");
        }
        assert_eq!(p.a.chunks_helped(), 0);
        // With the sender polling until the receiver is done: it helps.
        let mut helped = false;
        for round in 0..50u8 {
            let src = data(n, round);
            let mut dst = vec![0u8; n];
            let whole = RemoteRegion {
                addr: src.as_ptr() as u64,
                len: n as u64,
                ..RemoteRegion::at(0, 0)
            };
            let done = std::sync::atomic::AtomicBool::new(false);
            let (a, b) = (&mut p.a, &mut p.b);
            std::thread::scope(|s| {
                s.spawn(|| {
                    while !done.load(std::sync::atomic::Ordering::Acquire) {
                        a.poll_recv(&mut |_, _| panic!("the engine got the driver's record"))
                            .expect("poll");
                        std::thread::yield_now();
                    }
                });
                b.get(a_id, whole, &mut [IoSliceMut::new(&mut dst)])
                    .expect("get");
                done.store(true, std::sync::atomic::Ordering::Release);
            });
            assert!(dst == src, "round {round}: data differs");
            if p.a.chunks_helped() > 0 {
                helped = true;
                break;
            }
        }
        assert!(helped, "the sender never helped in 50 transfers");
    }

    /// A transfer of `src` (in `a`) to `dst` (in `b`), both ends in this process.
    struct Xfer {
        p: ShmPair,
        src: Vec<u8>,
        dst: Vec<u8>,
    }

    /// An address no process has mapped: a copy to or from it fails with `EFAULT`.
    const UNMAPPED: u64 = 8;

    impl Xfer {
        fn new(reversed: bool, n: usize, seed: u8) -> Xfer {
            Xfer {
                p: shm_pair(&cfg(4096, false, true), reversed),
                src: data(n, seed),
                dst: vec![0; n],
            }
        }

        /// The address of `p`, or [`UNMAPPED`] when `bad`.
        fn or_unmapped(bad: bool, p: *const u8) -> u64 {
            if bad {
                UNMAPPED
            } else {
                p as u64
            }
        }

        /// `b` opens its board for a transfer in `chunks` chunks.
        fn open(&mut self, chunks: u32) -> SplitJob {
            let gen = self.p.b.split_open(self.p.a_id()).expect("open");
            SplitJob::new(gen, self.src.len(), chunks).expect("job")
        }

        /// `a` helps with `job`, writing to `dst`, or to [`UNMAPPED`] when `bad`.
        fn put(&mut self, job: SplitJob, bad: bool) -> crate::Result<u32> {
            let to = Self::or_unmapped(bad, self.dst.as_ptr());
            let b = self.p.b_id();
            // SAFETY: `src` is ours and only read; the destination is `dst`, which nothing
            // else touches during the call, or unmapped.
            unsafe { self.p.a.split_put(b, job, self.src.as_ptr(), to) }
        }

        /// `b` copies `job` into `dst`, reading `src`, or [`UNMAPPED`] when `bad`.
        fn get(&mut self, job: SplitJob, bad: bool) -> crate::Result<SplitCopy> {
            let from = Self::or_unmapped(bad, self.src.as_ptr());
            let a = self.p.a_id();
            // SAFETY: `dst` is ours and nothing else touches it during the call.
            unsafe { self.p.b.split_get(a, job, from, self.dst.as_mut_ptr()) }
        }
    }

    /// A helper that comes first does everything; one that comes after the receiver is done
    /// (or for an older transfer) takes nothing and writes nothing.
    #[test]
    fn early_and_late_helpers() {
        let mut x = Xfer::new(true, 300_000, 9);
        let job = x.open(4);
        assert_eq!(x.put(job, false).expect("put"), 4);
        let got = x.get(job, false).expect("get");
        assert_eq!(got, SplitCopy { mine: 0, theirs: 4 });
        assert!(x.dst == x.src);

        // Late: the transfer is over; a new one is open (another generation).
        x.dst.fill(0);
        let job2 = x.open(2);
        assert_ne!(job2, job);
        let stale = x.put(job, false).expect("stale put");
        assert_eq!(stale, 0, "an old generation takes nothing");
        let got = x.get(job2, false).expect("get");
        assert_eq!(got, SplitCopy { mine: 2, theirs: 0 });
        assert_eq!(x.put(job2, false).expect("late put"), 0, "nothing left");
        assert!(x.dst == x.src);
    }

    /// A chunk the helper cannot write goes back to the receiver, which copies it; a receiver
    /// whose read fails takes what is left, so no helper writes after it returned.
    #[test]
    fn failures_hand_chunks_back() {
        let mut x = Xfer::new(false, 200_000, 3);
        let job = x.open(2);
        // The helper's first chunk fails and is handed back.
        let put = x.put(job, true);
        assert!(matches!(put, Err(Error::Invalid(_))), "{put:?}");
        let got = x.get(job, false).expect("get");
        assert_eq!(got, SplitCopy { mine: 2, theirs: 0 });
        assert!(x.dst == x.src, "the handed-back chunk was copied");

        // The receiver fails, and leaves nothing for a helper.
        x.dst.fill(0);
        let job = x.open(4);
        let got = x.get(job, true);
        assert!(matches!(got, Err(Error::Invalid(_))), "{got:?}");
        assert_eq!(x.put(job, false).expect("put"), 0);
        assert!(
            x.dst.iter().all(|&b| b == 0),
            "nothing written after the failure"
        );

        assert!(SplitJob::new(1, 10, 0).is_none());
        assert!(SplitJob::new(1, 10, crate::shm::MAX_SPLIT_CHUNKS + 1).is_none());
        let off = shm_pair(&cfg(4096, false, false), false);
        assert_eq!(
            off.b.split_min(),
            None,
            "no split without cross-memory attach"
        );
    }
}
