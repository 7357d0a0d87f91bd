//! Connection set-up of the `tcp` driver: simultaneous connects settle on one connection per
//! pair, and nothing is lost, duplicated or reordered.

use std::io::IoSlice;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use madmpi_transports::tcp::{TcpConfig, TcpTransport};
use madmpi_transports::{PeerId, SendOutcome, Transport};

const SECRET: [u8; 32] = [7; 32];

/// `n` transports of one job, each knowing every other.
fn job(n: u32) -> Vec<TcpTransport> {
    let mut ts: Vec<TcpTransport> = (0..n)
        .map(|r| TcpTransport::listen(PeerId(r), n, SECRET, &TcpConfig::default()).unwrap())
        .collect();
    let cards: Vec<String> = ts.iter().map(TcpTransport::business_card).collect();
    for t in &mut ts {
        for (q, c) in cards.iter().enumerate() {
            if q as u32 != t.rank().0 {
                t.add_peer(PeerId(q as u32), c).unwrap();
            }
        }
    }
    ts
}

/// Message `seq` from `from` to `to`.
fn msg(from: u32, to: u32, seq: u32) -> [u8; 12] {
    let mut m = [0u8; 12];
    m[..4].copy_from_slice(&from.to_le_bytes());
    m[4..8].copy_from_slice(&to.to_le_bytes());
    m[8..].copy_from_slice(&seq.to_le_bytes());
    m
}

/// Rank `t` sends `per_peer` messages to every other rank and receives as many from each;
/// every message arrives once, in order. The first `try_send`s happen right after the barrier.
fn talk(t: &mut TcpTransport, n: u32, per_peer: u32, barrier: Option<&Barrier>) {
    let me = t.rank().0;
    let mut next_send = vec![0u32; n as usize];
    let mut next_recv = vec![0u32; n as usize];
    next_send[me as usize] = per_peer;
    next_recv[me as usize] = per_peer;
    if let Some(b) = barrier {
        b.wait();
    }
    let start = Instant::now();
    let mut spins = 0u32;
    loop {
        let mut moved = false;
        for q in 0..n {
            let s = next_send[q as usize];
            if s < per_peer {
                let m = msg(me, q, s);
                if t.try_send(PeerId(q), &[IoSlice::new(&m)]).unwrap() == SendOutcome::Done {
                    next_send[q as usize] += 1;
                    moved = true;
                }
            }
        }
        let got = t
            .poll_recv(&mut |from, m| {
                assert_eq!(m.len(), 12);
                let f = u32::from_le_bytes(m[..4].try_into().unwrap());
                let to = u32::from_le_bytes(m[4..8].try_into().unwrap());
                let seq = u32::from_le_bytes(m[8..].try_into().unwrap());
                assert_eq!((f, to), (from.0, me), "misattributed");
                assert_eq!(seq, next_recv[f as usize], "lost, duplicated or reordered");
                next_recv[f as usize] += 1;
            })
            .unwrap();
        assert_eq!(t.poll_lost(), None);
        if next_send.iter().all(|&s| s == per_peer) && next_recv.iter().all(|&r| r == per_peer) {
            break;
        }
        if moved || got > 0 {
            spins = 0;
        } else {
            spins += 1;
            if spins > 100 {
                std::thread::yield_now();
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "rank {me}: stuck (sent {next_send:?}, received {next_recv:?})"
        );
    }
    // Keep answering until the peers have everything (their last packets may still need our
    // reads to make room, and our output must drain).
    while t.has_pending_output() {
        t.progress().unwrap();
        std::thread::yield_now();
    }
}

fn check_quiet(ts: &mut [TcpTransport]) -> u64 {
    let n = ts.len() as u32;
    let mut ties = 0;
    for t in ts.iter_mut() {
        let me = t.rank();
        for q in 0..n {
            assert_eq!(t.is_connected(PeerId(q)), q != me.0);
        }
        let log = t.take_log();
        assert!(log.is_empty(), "rank {}: {log:?}", me.0);
        let s = t.stats();
        assert_eq!(s.rejected, 0);
        // One authenticated connection per peer, whoever dialled.
        assert_eq!(s.connections, u64::from(n - 1), "rank {}: {s:?}", me.0);
        ties += s.tie_breaks;
    }
    ties
}

#[test]
fn simultaneous_first_sends_in_threads() {
    let mut ties = 0;
    for rep in 0..100 {
        let n = if rep % 10 == 9 { 4 } else { 2 };
        let barrier = Arc::new(Barrier::new(n as usize));
        let handles: Vec<_> = job(n)
            .into_iter()
            .map(|mut t| {
                let b = Arc::clone(&barrier);
                std::thread::spawn(move || {
                    talk(&mut t, n, 50, Some(&b));
                    t
                })
            })
            .collect();
        let mut ts: Vec<TcpTransport> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        ties += check_quiet(&mut ts);
        // The peers may still be reading our last packets: drop them together.
        drop(ts);
    }
    eprintln!("{ties} tie-breaks in 100 repetitions");
}

#[test]
fn simultaneous_dials_settle_on_the_lower_ranks_connection() {
    // Deterministic: both dial before either polls, so both connections exist at once.
    for rep in 0..100 {
        let mut ts = job(2);
        let (l, r) = ts.split_at_mut(1);
        let (a, b) = (&mut l[0], &mut r[0]);
        let (ma, mb) = (msg(0, 1, 0), msg(1, 0, 0));
        assert_eq!(
            a.try_send(PeerId(1), &[IoSlice::new(&ma)]).unwrap(),
            SendOutcome::WouldBlock
        );
        assert_eq!(
            b.try_send(PeerId(0), &[IoSlice::new(&mb)]).unwrap(),
            SendOutcome::WouldBlock
        );
        // Alternate, in either order.
        let (mut sa, mut sb, mut ga, mut gb) = (false, false, 0, 0);
        let start = Instant::now();
        while !(sa && sb && ga == 1 && gb == 1) {
            let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
            for side in order {
                if side == 0 {
                    if !sa {
                        sa = a.try_send(PeerId(1), &[IoSlice::new(&ma)]).unwrap()
                            == SendOutcome::Done;
                    }
                    a.poll_recv(&mut |_, m| {
                        assert_eq!(m, mb);
                        ga += 1
                    })
                    .unwrap();
                } else {
                    if !sb {
                        sb = b.try_send(PeerId(0), &[IoSlice::new(&mb)]).unwrap()
                            == SendOutcome::Done;
                    }
                    b.poll_recv(&mut |_, m| {
                        assert_eq!(m, ma);
                        gb += 1
                    })
                    .unwrap();
                }
            }
            assert!(start.elapsed() < Duration::from_secs(10), "stuck");
        }
        assert_eq!(check_quiet(&mut ts), 2, "one tie-break, seen by both ends");
    }
}

#[test]
fn connect_all_in_every_rank() {
    let n = 5;
    let handles: Vec<_> = job(n)
        .into_iter()
        .map(|mut t| {
            std::thread::spawn(move || {
                t.connect_all().expect("connect_all");
                talk(&mut t, n, 20, None);
                t
            })
        })
        .collect();
    let mut ts: Vec<TcpTransport> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    check_quiet(&mut ts);
}

#[test]
fn connect_all_when_only_one_rank_calls_it() {
    // Rank 1 connects eagerly; rank 0 only polls (lazy). The higher rank dials the lower one
    // after its grace period.
    let mut ts = job(2);
    let mut b = ts.pop().unwrap();
    let mut a = ts.pop().unwrap();
    let h = std::thread::spawn(move || {
        b.connect_all().expect("connect_all");
        b
    });
    let start = Instant::now();
    while !h.is_finished() {
        a.poll_recv(&mut |_, _| {}).unwrap();
        std::thread::yield_now();
        assert!(start.elapsed() < Duration::from_secs(20));
    }
    let b = h.join().unwrap();
    assert!(a.is_connected(PeerId(1)) && b.is_connected(PeerId(0)));
}
