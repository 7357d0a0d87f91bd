//! Tests of records built in place ([`Producer::append`], [`Producer::publish`]): invisible
//! until published, in order with whole records, cut at `max` and at the end of the area,
//! wrapped behind a skip marker, refused when the ring is full.

use super::super::segment::{Padded, RingCtrl};
use super::*;
use std::sync::atomic::AtomicU32;

struct Ring {
    _ctrl: Box<RingCtrl>,
    _data: Vec<u64>,
    prod: Producer,
    cons: Consumer,
}

fn ring(cap: usize) -> Ring {
    let mut ctrl = Box::new(RingCtrl {
        head: Padded(AtomicU64::new(0)),
        tail: Padded(AtomicU64::new(0)),
        owner: Padded(AtomicU32::new(0)),
    });
    let mut data = vec![0u64; cap / 8];
    let c = NonNull::from(&mut *ctrl);
    let d = NonNull::new(data.as_mut_ptr().cast::<u8>()).unwrap();
    // SAFETY: ctrl and data live in the returned value, alongside the two ends.
    let (prod, cons) = unsafe { (Producer::new(c, d, cap), Consumer::new(c, d, cap)) };
    Ring {
        _ctrl: ctrl,
        _data: data,
        prod,
        cons,
    }
}

/// Append `bytes` (a multiple of 8 long) to the record being built.
fn append(r: &mut Ring, bytes: &[u8], max: usize) -> Option<bool> {
    // SAFETY: `append` gives room for exactly `bytes.len()` bytes, outside `bytes`.
    r.prod.append(bytes.len(), max, |dst| unsafe {
        crate::copy_bytes(bytes.as_ptr(), dst, bytes.len())
    })
}

fn push(r: &mut Ring, bytes: &[u8]) -> bool {
    r.prod.try_push(&[IoSlice::new(bytes)], bytes.len(), 0)
}

fn pop(r: &mut Ring) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    r.cons
        .pop_all(&mut |_, p| out.push(p.to_vec()), &mut |_, _| {
            panic!("driver record")
        })
        .unwrap();
    out
}

fn shared_tail(r: &Ring) -> u64 {
    r.prod.ctrl().tail.0.load(Ordering::Acquire)
}

#[test]
fn appended_bytes_are_invisible_until_published() {
    let mut r = ring(4096);
    assert_eq!(append(&mut r, &[1; 8], 1024), Some(true));
    assert_eq!(append(&mut r, &[2; 16], 1024), Some(false));
    assert_eq!(r.prod.open_len(), 24);
    assert!(pop(&mut r).is_empty(), "nothing visible before publish");
    assert_eq!(shared_tail(&r), 0, "tail not published either");
    r.prod.publish();
    assert_eq!(r.prod.open_len(), 0);
    let mut want = vec![1u8; 8];
    want.extend([2u8; 16]);
    assert_eq!(pop(&mut r), vec![want]);
    assert_eq!(shared_tail(&r), 8 + 24);
    // Publishing with nothing open changes nothing.
    r.prod.publish();
    assert_eq!(shared_tail(&r), 8 + 24);
    assert!(pop(&mut r).is_empty());
}

#[test]
fn a_whole_record_publishes_the_open_one_first() {
    let mut r = ring(4096);
    assert_eq!(append(&mut r, b"first..!", 1024), Some(true));
    assert!(push(&mut r, b"second"));
    assert_eq!(append(&mut r, b"third..!", 1024), Some(true));
    assert_eq!(pop(&mut r), vec![b"first..!".to_vec(), b"second".to_vec()]);
    r.prod.publish();
    assert_eq!(pop(&mut r), vec![b"third..!".to_vec()]);
}

#[test]
fn a_record_is_cut_at_max() {
    let mut r = ring(4096);
    assert_eq!(append(&mut r, &[1; 40], 64), Some(true));
    assert_eq!(append(&mut r, &[2; 24], 64), Some(false));
    // 64 + 8 > max: the record of 64 is published, a new one begun.
    assert_eq!(append(&mut r, &[3; 8], 64), Some(true));
    let mut first = vec![1u8; 40];
    first.extend([2u8; 24]);
    assert_eq!(pop(&mut r), vec![first]);
    r.prod.publish();
    assert_eq!(pop(&mut r), vec![vec![3u8; 8]]);
}

#[test]
fn records_wrap_behind_a_skip_marker() {
    let mut r = ring(256);
    // Three records of 64 bytes: tail at 192, 64 bytes to the end.
    for i in 0..3u8 {
        assert!(push(&mut r, &[i; 56]));
    }
    assert_eq!(pop(&mut r).len(), 3);
    // Begun where it fits (8 + 40 bytes at 192), then grown past the end of the area: it is
    // published as it is, and the new bytes begin a record at 0 behind a skip marker.
    assert_eq!(append(&mut r, &[7; 40], 64), Some(true));
    assert_eq!(append(&mut r, &[8; 24], 64), Some(true));
    assert_eq!(pop(&mut r), vec![vec![7u8; 40]]);
    assert_eq!(shared_tail(&r), 192 + 48);
    // The second record grows at 0; nothing visible until published.
    assert_eq!(append(&mut r, &[9; 8], 64), Some(false));
    assert!(pop(&mut r).is_empty());
    r.prod.publish();
    // SAFETY: test ring memory is alive; offset 240 is inside and 8-aligned.
    let marker = unsafe { r.prod.data.as_ptr().add(240).cast::<u64>().read() };
    assert_eq!(marker, SKIP);
    let mut second = vec![8u8; 24];
    second.extend([9u8; 8]);
    assert_eq!(pop(&mut r), vec![second]);
    assert_eq!(shared_tail(&r), 256 + 40);
    assert_eq!(r.cons.head, 256 + 40);
}

#[test]
fn a_full_ring_refuses_and_writes_nothing() {
    let mut r = ring(256);
    // Records of 8 + 24 bytes, each published at once: 7 fit (the word after the last one
    // stays free).
    let mut n = 0;
    while let Some(begun) = append(&mut r, &[1; 24], 24) {
        assert!(begun);
        n += 1;
    }
    assert_eq!(n, 256 / 32 - 1);
    // The refused one published the one before it and left no record behind.
    let tail = shared_tail(&r);
    assert_eq!(tail, 7 * 32);
    assert_eq!(r.prod.open_len(), 0);
    assert_eq!(append(&mut r, &[9; 24], 24), None);
    assert_eq!(shared_tail(&r), tail);
    assert_eq!(pop(&mut r), vec![vec![1u8; 24]; n]);
    // Room again once the consumer moved on.
    assert_eq!(append(&mut r, &[2; 24], 24), Some(true));
    r.prod.publish();
    assert_eq!(pop(&mut r), vec![vec![2u8; 24]]);
}

#[test]
fn growing_stops_where_the_ring_is_full() {
    let mut r = ring(256);
    // Six records of 32 bytes, not consumed: 64 bytes free.
    for _ in 0..6 {
        assert!(push(&mut r, &[1; 24]));
    }
    assert_eq!(append(&mut r, &[2; 40], 64), Some(true));
    assert_eq!(append(&mut r, &[3; 8], 64), Some(false));
    // 8 + 56 more bytes and the free word would be 72: the record built so far is published,
    // and the rest of the ring (8 bytes before the end) has no room for a new one.
    assert_eq!(append(&mut r, &[4; 8], 64), None);
    let mut built = vec![2u8; 40];
    built.extend([3u8; 8]);
    let mut want = vec![vec![1u8; 24]; 6];
    want.push(built);
    assert_eq!(pop(&mut r), want);
    // Room again: the refused bytes begin a record at 0 (behind a skip marker).
    assert_eq!(append(&mut r, &[4; 8], 64), Some(true));
    r.prod.publish();
    assert_eq!(pop(&mut r), vec![vec![4u8; 8]]);
    assert_eq!(shared_tail(&r), 256 + 16);
}

#[test]
fn a_dead_producers_open_record_stays_invisible() {
    let mut r = ring(256);
    assert!(push(&mut r, &[1; 56]));
    assert_eq!(append(&mut r, &[2; 56], 64), Some(true));
    // The producer dies here: the walk stops at the open record's header, which reads 0.
    // SAFETY: the test ring's memory is alive, and nothing else produces on it.
    unsafe { repair_tail(r.prod.ctrl, r.prod.data, 256) }.unwrap();
    assert_eq!(shared_tail(&r), 64);
    assert_eq!(pop(&mut r), vec![vec![1u8; 56]]);
    assert!(pop(&mut r).is_empty());
}

/// Appends, publishes and whole records of random sizes over many laps, against a model:
/// every record arrives once, in order, with its bytes, however the appends were grouped.
#[test]
fn random_mix_keeps_order_and_content() {
    let mut r = ring(1024);
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    // What the consumer must see, record by record, and the record being built.
    let mut expect: std::collections::VecDeque<Vec<u8>> = Default::default();
    let mut building: Vec<u8> = Vec::new();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let max = 200;
    let mut stamp = 0u8;
    for _ in 0..20_000 {
        stamp = stamp.wrapping_add(1);
        match rnd(10) {
            0..=5 => {
                let len = 8 * (1 + rnd(8) as usize);
                let v = vec![stamp; len];
                let open_before = r.prod.open_len();
                match append(&mut r, &v, max) {
                    Some(false) => building.extend(&v),
                    Some(true) => {
                        if open_before > 0 {
                            expect.push_back(std::mem::take(&mut building));
                        }
                        building = v;
                    }
                    None => {
                        if open_before > 0 {
                            expect.push_back(std::mem::take(&mut building));
                        }
                        got.extend(pop(&mut r));
                    }
                }
            }
            6 => {
                r.prod.publish();
                if !building.is_empty() {
                    expect.push_back(std::mem::take(&mut building));
                }
            }
            7 => {
                let len = rnd(60) as usize;
                let v = vec![stamp; len];
                let open_before = r.prod.open_len();
                if push(&mut r, &v) {
                    if open_before > 0 {
                        expect.push_back(std::mem::take(&mut building));
                    }
                    expect.push_back(v);
                } else {
                    if open_before > 0 {
                        expect.push_back(std::mem::take(&mut building));
                    }
                    got.extend(pop(&mut r));
                }
            }
            _ => got.extend(pop(&mut r)),
        }
        for g in got.drain(..) {
            assert_eq!(Some(g), expect.pop_front());
        }
    }
    r.prod.publish();
    if !building.is_empty() {
        expect.push_back(building);
    }
    for g in pop(&mut r) {
        assert_eq!(Some(g), expect.pop_front());
    }
    assert!(expect.is_empty());
}
