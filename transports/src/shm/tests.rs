//! The driver with more processes than pair rings per receiver: first contacts claim pair
//! rings, later senders share the receiver's inbox; every sender's records arrive complete
//! and in order whichever way they travel.

use super::*;

/// `n` drivers of one segment in this process (local index `i` is world rank `10 + i`).
struct Node {
    name: String,
    t: Vec<ShmTransport>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = ShmSegment::unlink(&self.name);
    }
}

fn node(n: usize, pair_rings: usize, doorbell: bool) -> Node {
    let name = format!(
        "/madmpi-test-contact-{}-{n}-{pair_rings}-{doorbell}",
        std::process::id()
    );
    let cfg = ShmConfig {
        ring_bytes: 4096,
        pair_rings,
        doorbell: Some(doorbell),
        ..ShmConfig::default()
    };
    let _ = ShmSegment::unlink(&name);
    let mut node = Node {
        name: name.clone(),
        t: Vec::new(),
    };
    let first = ShmSegment::create(&name, n, &cfg).expect("create");
    let peers: Vec<PeerId> = (0..n as u32).map(|i| PeerId(10 + i)).collect();
    node.t
        .push(ShmTransport::new(first, 0, peers.clone()).expect("transport 0"));
    for i in 1..n {
        let seg = ShmSegment::open(&name, n, &cfg).expect("open");
        node.t
            .push(ShmTransport::new(seg, i, peers.clone()).expect("transport"));
    }
    node
}

/// Every sender sends `per` records of various sizes to `dst` (interleaved, the receiver
/// polling when a ring or the inbox is full); returns what `dst` got, by sender.
fn all_to_one(node: &mut Node, dst: usize, per: u32) -> Vec<Vec<Vec<u8>>> {
    let n = node.t.len();
    let mut got: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
    let mut next = vec![0u32; n];
    let poll = |t: &mut ShmTransport, got: &mut Vec<Vec<Vec<u8>>>| {
        t.poll_recv(&mut |p, b| got[(p.0 - 10) as usize].push(b.to_vec()))
            .expect("poll")
    };
    while (0..n).any(|s| s != dst && next[s] < per) {
        #[allow(clippy::needless_range_loop)] // `s` indexes `next` and the transports
        for s in 0..n {
            if s == dst || next[s] >= per {
                continue;
            }
            let k = next[s];
            let len = 1 + (k as usize * 37 + s * 101) % 900;
            let mut rec = vec![(k % 251) as u8; len];
            rec[0] = s as u8;
            match node.t[s].try_send(PeerId(10 + dst as u32), &[IoSlice::new(&rec)]) {
                Ok(SendOutcome::Done) => next[s] += 1,
                Ok(SendOutcome::WouldBlock) => {
                    poll(&mut node.t[dst], &mut got);
                }
                Err(e) => panic!("send {s} -> {dst}: {e}"),
            }
        }
    }
    for _ in 0..4 {
        poll(&mut node.t[dst], &mut got);
    }
    got
}

fn check(got: &[Vec<Vec<u8>>], dst: usize, per: u32) {
    for (s, recs) in got.iter().enumerate() {
        if s == dst {
            assert!(recs.is_empty());
            continue;
        }
        assert_eq!(recs.len(), per as usize, "records from {s}");
        for (k, r) in recs.iter().enumerate() {
            let len = 1 + (k * 37 + s * 101) % 900;
            assert_eq!(r.len(), len, "record {k} from {s}");
            assert_eq!(r[0], s as u8);
            assert!(r[1..].iter().all(|&b| b == (k % 251) as u8), "{k} from {s}");
        }
    }
}

#[test]
fn senders_beyond_the_pair_rings_share_the_inbox() {
    for doorbell in [false, true] {
        let mut node = node(6, 2, doorbell);
        let layout = node.t[0].seg.layout;
        assert_eq!((layout.pairs, layout.inbox), (2, true));
        let got = all_to_one(&mut node, 0, 300);
        check(&got, 0, 300);
        // Two senders own a pair ring towards 0, the three others use its inbox.
        let rings = (1..6).filter(|&s| node.t[s].tx[0].is_some()).count();
        let inbox = (1..6).filter(|&s| node.t[s].far[0].inbox).count();
        assert_eq!((rings, inbox), (2, 3));
        assert_eq!(node.t[0].adopted_count, 2);
        // The other way round, and towards another receiver.
        let got = all_to_one(&mut node, 3, 100);
        check(&got, 3, 100);
    }
}

#[test]
fn no_pair_rings_at_all() {
    let mut node = node(4, 0, false);
    let got = all_to_one(&mut node, 2, 200);
    check(&got, 2, 200);
    assert!((0..4).all(|s| node.t[s].tx.iter().all(Option::is_none)));
}

#[test]
fn held_inbox_lock_is_backpressure() {
    let mut node = node(4, 0, false);
    // Sender 1 holds 0's inbox lock (as if descheduled while writing): 2 must not block.
    // SAFETY: the slot lies in the mapping owned by the transport.
    let lock = unsafe { &node.t[0].my_slot.as_ref().inbox_lock.0 };
    lock.store(2, Ordering::Release);
    let r = node.t[2].try_send(PeerId(10), &[IoSlice::new(b"x")]);
    assert!(matches!(r, Ok(SendOutcome::WouldBlock)), "{r:?}");
    lock.store(0, Ordering::Release);
    let r = node.t[2].try_send(PeerId(10), &[IoSlice::new(b"x")]);
    assert!(matches!(r, Ok(SendOutcome::Done)), "{r:?}");
}

#[test]
fn inbox_record_from_nobody_is_malformed() {
    let mut node = node(3, 0, false);
    let (ctrl, data) = node.t[0].seg.ring(0, 0);
    // SAFETY: the inbox of 0 in the live mapping; nobody else produces on it now.
    let mut p = unsafe { Producer::new(ctrl, data, 4096) };
    assert!(p.try_push(&[IoSlice::new(b"forged")], 6, ring::from_bits(7)));
    let r = node.t[0].poll_recv(&mut |_, _| panic!("delivered"));
    assert!(matches!(r, Err(Error::Malformed(_))), "{r:?}");
}

/// The pid of a process that has exited and been reaped (so `kill(pid, 0)` says ESRCH, unless
/// the system reuses the pid within the test: then the holder looks alive and the test fails
/// rather than passing wrongly).
fn dead_pid() -> i32 {
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let pid = child.id() as i32;
    child.wait().expect("wait");
    pid
}

#[test]
fn inbox_lock_of_a_dead_sender_is_taken_over() {
    for doorbell in [false, true] {
        let mut node = node(4, 0, doorbell);
        // Sender 1 pushes one record normally, then "dies" inside its next push: it takes
        // 0's inbox lock, publishes a record's header and never stores `tail` nor releases
        // the lock.
        assert!(matches!(
            node.t[1].try_send(PeerId(10), &[IoSlice::new(b"before")]),
            Ok(SendOutcome::Done)
        ));
        // SAFETY: the slot lies in the mapping owned by the transport.
        let lock = unsafe { &node.t[0].my_slot.as_ref().inbox_lock.0 };
        lock.store(2, Ordering::Release);
        let (ctrl, data) = node.t[0].seg.ring(0, 0);
        // SAFETY: the inbox of 0 in the live mapping; "sender 1" holds its lock.
        let old_tail = unsafe { ctrl.as_ref() }.tail.0.load(Ordering::Acquire);
        // SAFETY: as above.
        let mut p = unsafe { Producer::new(ctrl, data, 4096) };
        assert!(p.try_push(&[IoSlice::new(b"last words")], 10, ring::from_bits(1)));
        // SAFETY: as above.
        unsafe { ctrl.as_ref() }
            .tail
            .0
            .store(old_tail, Ordering::Release);
        // SAFETY: the slot of local 1 in the live mapping.
        let ident = unsafe { &node.t[0].slots[1].as_ref().ident.0 };
        ident.pid.store(dead_pid(), Ordering::Release);

        // Sender 2 sees the lock held (backpressure) until the holder has been checked, then
        // takes it over; nothing is lost or duplicated, and 0 keeps polling meanwhile.
        let start = Instant::now();
        let mut got: Vec<(u32, Vec<u8>)> = Vec::new();
        let mut sent = 0u32;
        while sent < 20 {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "sender 2 still blocked by the dead holder's lock"
            );
            match node.t[2].try_send(PeerId(10), &[IoSlice::new(&[sent as u8; 40])]) {
                Ok(SendOutcome::Done) => sent += 1,
                Ok(SendOutcome::WouldBlock) => std::thread::yield_now(),
                Err(e) => panic!("send 2 -> 0: {e}"),
            }
            node.t[0]
                .poll_recv(&mut |p, b| got.push((p.0, b.to_vec())))
                .expect("poll");
        }
        // Took at least one liveness check period, as for a full ring.
        assert!(start.elapsed() >= PEER_CHECK_AFTER);
        for _ in 0..4 {
            node.t[0]
                .poll_recv(&mut |p, b| got.push((p.0, b.to_vec())))
                .expect("poll");
        }
        let from1: Vec<_> = got.iter().filter(|(p, _)| *p == 11).collect();
        assert_eq!(from1.len(), 2, "{got:?}");
        assert_eq!(from1[0].1, b"before");
        assert_eq!(from1[1].1, b"last words");
        let from2: Vec<_> = got.iter().filter(|(p, _)| *p == 12).collect();
        assert_eq!(from2.len(), 20);
        for (k, (_, r)) in from2.iter().enumerate() {
            assert_eq!(r, &vec![k as u8; 40]);
        }
        // The lock is free again, and a third sender uses the inbox at once.
        assert_eq!(lock.load(Ordering::Acquire), 0);
        assert!(matches!(
            node.t[3].try_send(PeerId(10), &[IoSlice::new(b"z")]),
            Ok(SendOutcome::Done)
        ));
    }
}

#[test]
fn inbox_lock_of_a_live_sender_is_not_taken_over() {
    let mut node = node(3, 0, false);
    // Local 1 (this very process: alive) holds 0's inbox lock for longer than the check period.
    // SAFETY: the slot lies in the mapping owned by the transport.
    let lock = unsafe { &node.t[0].my_slot.as_ref().inbox_lock.0 };
    lock.store(2, Ordering::Release);
    let start = Instant::now();
    while start.elapsed() < PEER_CHECK_AFTER + Duration::from_millis(300) {
        let r = node.t[2].try_send(PeerId(10), &[IoSlice::new(b"x")]);
        assert!(matches!(r, Ok(SendOutcome::WouldBlock)), "{r:?}");
        std::thread::yield_now();
    }
    assert_eq!(lock.load(Ordering::Acquire), 2);
    lock.store(0, Ordering::Release);
    let r = node.t[2].try_send(PeerId(10), &[IoSlice::new(b"x")]);
    assert!(matches!(r, Ok(SendOutcome::Done)), "{r:?}");
}

/// `may_have_input` (the engine's idle test, which skips the poll when false) is true whenever
/// a record waits, whichever way it came (pair ring from the start, claimed pair ring, inbox;
/// with and without the doorbell), and false again once everything was delivered.
#[test]
fn may_have_input_sees_every_waiting_record() {
    for doorbell in [false, true] {
        // 3 ranks, 8 pair rings: every pair has its ring; 6 ranks, 2 pair rings: claimed
        // rings and the inbox; 4 ranks, no pair ring: the inbox only.
        for (n, pairs) in [(3, 8), (6, 2), (4, 0)] {
            let mut node = node(n, pairs, doorbell);
            let dst = 0;
            let drain = |t: &mut ShmTransport| {
                let mut got = 0;
                for _ in 0..8 {
                    got += t.poll_recv(&mut |_, _| {}).expect("poll");
                }
                got
            };
            drain(&mut node.t[dst]);
            let t = &node.t[dst];
            assert!(
                t.claimable > 0 || !t.may_have_input(),
                "idle after draining ({n} ranks, {pairs} pair rings, doorbell {doorbell})"
            );
            for s in 1..n {
                let rec = [s as u8; 24];
                let sent = node.t[s]
                    .try_send(PeerId(10 + dst as u32), &[IoSlice::new(&rec)])
                    .expect("send");
                assert_eq!(sent, SendOutcome::Done);
                assert!(
                    node.t[dst].may_have_input(),
                    "a record from {s} waits ({n} ranks, {pairs} pair rings, doorbell {doorbell})"
                );
                let mut got = Vec::new();
                // (A claimed ring is adopted by the poll that finds its owner written.)
                for _ in 0..8 {
                    node.t[dst]
                        .poll_recv(&mut |p, b| got.push((p, b.to_vec())))
                        .expect("poll");
                }
                assert_eq!(got, vec![(PeerId(10 + s as u32), rec.to_vec())]);
                // (Pair rings not yet claimed keep the poll looking for their owner.)
                let t = &node.t[dst];
                assert_eq!(t.may_have_input(), t.adopted_count < t.claimable);
                assert!(
                    t.adopted_count < t.claimable || !t.may_have_input(),
                    "idle once delivered ({n} ranks, {pairs} pair rings, doorbell {doorbell})"
                );
            }
        }
    }
}
