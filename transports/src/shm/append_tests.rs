//! Packets built in place ([`ShmTransport::append`]) between drivers of one segment in this
//! process: held until published, in order with whole packets, refused when the ring is full,
//! only towards a pair ring of one's own.

use std::io::IoSlice;

use super::super::{ShmConfig, ShmSegment, ShmTransport};
use super::Appended;
use crate::{PeerId, SendOutcome, Transport};

/// `n` drivers of one segment (local index `i` is world rank `10 + i`).
struct Node {
    name: String,
    t: Vec<ShmTransport>,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = ShmSegment::unlink(&self.name);
    }
}

fn node(tag: &str, n: usize, pair_rings: usize, doorbell: bool, publish_min: usize) -> Node {
    let name = format!(
        "/madmpi-test-append-{}-{tag}-{n}-{pair_rings}-{doorbell}",
        std::process::id()
    );
    let cfg = ShmConfig {
        ring_bytes: 4096,
        pair_rings,
        doorbell: Some(doorbell),
        publish_min,
        ..ShmConfig::default()
    };
    let _ = ShmSegment::unlink(&name);
    let mut node = Node {
        name: name.clone(),
        t: Vec::new(),
    };
    let peers: Vec<PeerId> = (0..n as u32).map(|i| PeerId(10 + i)).collect();
    let first = ShmSegment::create(&name, n, &cfg).expect("create");
    node.t
        .push(ShmTransport::new(first, 0, peers.clone()).expect("transport 0"));
    for i in 1..n {
        let seg = ShmSegment::open(&name, n, &cfg).expect("open");
        node.t
            .push(ShmTransport::new(seg, i, peers.clone()).expect("transport"));
    }
    node
}

fn append(t: &mut ShmTransport, to: u32, bytes: &[u8]) -> Appended {
    // SAFETY: `append` gives room for exactly `bytes.len()` bytes, outside `bytes`.
    t.append(PeerId(10 + to), bytes.len(), |dst| unsafe {
        crate::copy_bytes(bytes.as_ptr(), dst, bytes.len())
    })
}

/// The packets `t` receives in one poll, with their senders' local indices.
fn poll(t: &mut ShmTransport) -> Vec<(u32, Vec<u8>)> {
    let mut got = Vec::new();
    t.poll_recv(&mut |p, b| got.push((p.0 - 10, b.to_vec())))
        .expect("poll");
    got
}

fn cat(parts: &[&[u8]]) -> Vec<u8> {
    parts.concat()
}

#[test]
fn appended_packets_are_held_then_seen_in_order() {
    for doorbell in [false, true] {
        let mut nd = node("order", 2, 8, doorbell, 64);
        let (a, b, c, d) = ([1u8; 8], [2u8; 16], [3u8; 56], *b"whole packet");
        // Begun, then grown: nothing visible.
        assert_eq!(
            append(&mut nd.t[1], 0, &a),
            Appended::Done {
                begun: true,
                held: true
            }
        );
        assert_eq!(
            append(&mut nd.t[1], 0, &b),
            Appended::Done {
                begun: false,
                held: true
            }
        );
        assert!(!nd.t[0].may_have_input(), "doorbell {doorbell}");
        assert!(poll(&mut nd.t[0]).is_empty());
        // Published by the caller: one packet, the chunks in order.
        nd.t[1].publish_all();
        assert!(nd.t[0].may_have_input());
        assert_eq!(poll(&mut nd.t[0]), vec![(1, cat(&[&a, &b]))]);
        // Reaching `publish_min` (64) publishes at once.
        assert_eq!(
            append(&mut nd.t[1], 0, &a),
            Appended::Done {
                begun: true,
                held: true
            }
        );
        assert_eq!(
            append(&mut nd.t[1], 0, &c),
            Appended::Done {
                begun: false,
                held: false
            }
        );
        assert_eq!(poll(&mut nd.t[0]), vec![(1, cat(&[&a, &c]))]);
        // A whole packet to the same peer publishes the one being built first.
        append(&mut nd.t[1], 0, &b);
        assert_eq!(
            nd.t[1].try_send2(PeerId(10), &d[..4], &d[4..]).unwrap(),
            SendOutcome::Done
        );
        assert_eq!(
            nd.t[1].try_send(PeerId(10), &[IoSlice::new(&d)]).unwrap(),
            SendOutcome::Done
        );
        assert_eq!(
            poll(&mut nd.t[0]),
            vec![(1, b.to_vec()), (1, d.to_vec()), (1, d.to_vec())]
        );
        // Nothing held: publishing again sends nothing.
        nd.t[1].publish_all();
        assert!(poll(&mut nd.t[0]).is_empty());
    }
}

#[test]
fn packets_to_several_peers_are_held_apart() {
    let mut nd = node("peers", 3, 8, true, 1024);
    append(&mut nd.t[0], 1, &[1; 8]);
    append(&mut nd.t[0], 2, &[2; 8]);
    append(&mut nd.t[0], 1, &[3; 8]);
    assert!(poll(&mut nd.t[1]).is_empty());
    assert!(poll(&mut nd.t[2]).is_empty());
    nd.t[0].publish_all();
    assert_eq!(poll(&mut nd.t[1]), vec![(0, cat(&[&[1; 8], &[3; 8]]))]);
    assert_eq!(poll(&mut nd.t[2]), vec![(0, vec![2; 8])]);
}

#[test]
fn a_full_ring_refuses_then_takes_again() {
    // Every chunk published at once (`publish_min` 0): records of 8 + 120 bytes.
    let mut nd = node("full", 2, 8, false, 0);
    let chunk = [7u8; 120];
    let mut n = 0;
    loop {
        match append(&mut nd.t[0], 1, &chunk) {
            Appended::Done { begun, held } => {
                assert!(begun && !held);
                n += 1;
            }
            Appended::WouldBlock => break,
            Appended::Unsupported => panic!("a pair ring"),
        }
    }
    // 4096 bytes of ring, the word after the last record free.
    assert_eq!(n, 4096 / 128 - 1);
    let got = poll(&mut nd.t[1]);
    assert_eq!(got.len(), n);
    assert!(got.iter().all(|(s, b)| *s == 0 && b[..] == chunk[..]));
    // Room again, and the refused chunk left nothing behind.
    assert!(matches!(
        append(&mut nd.t[0], 1, &chunk),
        Appended::Done { .. }
    ));
    assert_eq!(poll(&mut nd.t[1]), vec![(0, chunk.to_vec())]);
}

#[test]
fn only_towards_a_pair_ring_of_ones_own() {
    // One pair ring per receiver: the first sender to 0 claims it, the second uses the inbox.
    let mut nd = node("inbox", 3, 1, false, 1024);
    assert_eq!(append(&mut nd.t[1], 0, &[1; 8]), Appended::Unsupported);
    assert_eq!(
        nd.t[1]
            .try_send(PeerId(10), &[IoSlice::new(b"hi")])
            .unwrap(),
        SendOutcome::Done
    );
    assert!(matches!(
        append(&mut nd.t[1], 0, &[2; 8]),
        Appended::Done { begun: true, .. }
    ));
    assert_eq!(
        nd.t[2]
            .try_send(PeerId(10), &[IoSlice::new(b"yo")])
            .unwrap(),
        SendOutcome::Done
    );
    assert_eq!(append(&mut nd.t[2], 0, &[3; 8]), Appended::Unsupported);
    // Not a local peer, or more than a packet holds: refused too.
    assert_eq!(append(&mut nd.t[1], 7, &[1; 8]), Appended::Unsupported);
    assert_eq!(
        append(&mut nd.t[1], 0, &vec![0; 1 << 20]),
        Appended::Unsupported
    );
    nd.t[1].publish_all();
    let mut got = Vec::new();
    for _ in 0..4 {
        got.extend(poll(&mut nd.t[0]));
    }
    let from = |s: u32| -> Vec<Vec<u8>> {
        got.iter()
            .filter(|g| g.0 == s)
            .map(|g| g.1.clone())
            .collect()
    };
    assert_eq!(from(1), vec![b"hi".to_vec(), vec![2; 8]]);
    assert_eq!(from(2), vec![b"yo".to_vec()]);
}

#[test]
fn a_closing_driver_publishes_what_it_holds() {
    let mut nd = node("drop", 2, 8, true, 1024);
    append(&mut nd.t[1], 0, &[5; 8]);
    drop(nd.t.pop());
    assert_eq!(poll(&mut nd.t[0]), vec![(1, vec![5; 8])]);
}
