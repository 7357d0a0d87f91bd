//! Fuzzing of the ring consumer of the `shm` driver: the record headers a peer process writes
//! into shared memory. A ring here is ordinary memory with the segment's layout (a control
//! block and a power-of-two data area); records are written by the real [`Producer`], then
//! header words are corrupted (random lengths, lengths up to and past the end of the area,
//! missing `READY` bit, skip markers anywhere) or the whole area is random. Properties: no
//! panic; every payload handed over lies inside the data area; one `pop_all` hands over at
//! most one ring's worth (bounded work even against a producer that never stops) and
//! allocates nothing unless it reports a malformed ring; records written by the producer come
//! out unchanged and in order (round trip). `MADMPI_FUZZ_CASES` sets the number of inputs (see
//! `fuzz/kit.rs`).

use std::sync::atomic::{AtomicU32, AtomicU64};

use super::super::segment::{Padded, RingCtrl};
use super::*;
use crate::fuzzkit::{self, Rng};

const CI_CASES: u64 = 50_000;

/// A ring in private memory: control block and data area.
struct Ring {
    ctrl: Box<RingCtrl>,
    /// The data area, as words (8-aligned).
    data: Vec<u64>,
}

impl Ring {
    fn new(cap: usize, counter: u64) -> Ring {
        Ring {
            ctrl: Box::new(RingCtrl {
                head: Padded(AtomicU64::new(counter)),
                tail: Padded(AtomicU64::new(counter)),
                owner: Padded(AtomicU32::new(0)),
            }),
            data: vec![0; cap / 8],
        }
    }

    fn ends(&mut self) -> (Producer, Consumer) {
        let cap = self.data.len() * 8;
        let ctrl = NonNull::from(&*self.ctrl);
        let data = NonNull::new(self.data.as_mut_ptr().cast::<u8>()).expect("allocated");
        // SAFETY: both point into `self`, which outlives the ends in every test below; the
        // area is 8-aligned, `cap` a power of two, zeroed; one producer and one consumer.
        unsafe {
            (
                Producer::new(ctrl, data, cap),
                Consumer::new(ctrl, data, cap),
            )
        }
    }

    /// Overwrite word `i` of the data area (what a misbehaving peer does).
    fn poke(&mut self, p: &Producer, i: usize, w: u64) {
        // SAFETY: `i` is a word of the area; single-threaded, and no slice of the area is
        // alive (payloads are copied out by `pop`).
        unsafe { p.data.as_ptr().cast::<u64>().add(i).write(w) }
    }
}

/// One `pop_all`, checked; the payloads copied out, or `None` after a malformed ring.
fn pop(c: &mut Consumer, cap: usize) -> Option<Vec<Vec<u8>>> {
    let area = c.data.as_ptr() as usize..c.data.as_ptr() as usize + cap;
    let mut out = Vec::new();
    // Room for every record a ring can hold, so that the callback allocates nothing.
    let mut delivered = Vec::with_capacity(cap / REC_HDR + 1);
    let (r, usage) = fuzzkit::metered(|| {
        // The driver's own records are checked the same way and counted with the others.
        let mut inside = |p: &[u8]| {
            let r = p.as_ptr_range();
            assert!(area.start <= r.start as usize && r.end as usize <= area.end);
            delivered.push((r.start as usize, p.len()));
        };
        let cell = std::cell::RefCell::new(&mut inside);
        c.pop_all(&mut |_, p| (cell.borrow_mut())(p), &mut |_, p| {
            (cell.borrow_mut())(p)
        })
    });
    // Copied out after metering, so that only the consumer's own allocations count.
    for (at, len) in delivered {
        // SAFETY: checked above to lie inside the area, which is alive.
        out.push(unsafe { std::slice::from_raw_parts(at as *const u8, len) }.to_vec());
    }
    match r {
        Ok(n) => {
            assert_eq!(n, out.len());
            assert!(n <= cap / REC_HDR, "{n} records from a ring of {cap} bytes");
            assert_eq!(usage.count, 0, "a good poll allocates nothing");
            Some(out)
        }
        Err(_) => {
            assert!(usage.largest <= 256);
            None
        }
    }
}

#[test]
fn fuzz_ring_consumer() {
    fuzzkit::assert_metering();
    fuzzkit::run("shm ring consumer", CI_CASES, |rng: &mut Rng| {
        let cap = *rng.pick(&[64usize, 128, 512, 4096]);
        // Free-running counters start anywhere (8-aligned), as after a long run.
        let counter = (rng.next_u64() >> 24) & !7;
        let mut ring = Ring::new(cap, counter);
        let (mut p, mut c) = ring.ends();
        // Round trip: records pushed (wrapping around the area) come out as written.
        let mut sent = std::collections::VecDeque::new();
        for _ in 0..rng.below(12) {
            let len = rng.len_upto(cap / 4);
            let rec = rng.bytes(len);
            if p.try_push(&[IoSlice::new(&rec)], len, 0) {
                sent.push_back(rec);
            }
            if rng.one_in(3) {
                for got in pop(&mut c, cap).expect("a well-formed ring") {
                    assert_eq!(Some(got), sent.pop_front());
                }
            }
        }
        if rng.one_in(3) {
            let got = pop(&mut c, cap).expect("a well-formed ring");
            assert_eq!(got, Vec::from(sent));
            return;
        }
        // Corruption: header words with any value where the consumer will look, or anywhere.
        let words = cap / 8;
        let head_word = (c.head as usize & (cap - 1)) / 8;
        for _ in 0..1 + rng.below(4) {
            let i = if rng.one_in(2) {
                head_word
            } else {
                rng.below(words)
            };
            let to_end = (cap - i * 8) as u64;
            let edgy = (READY - 1) & rng.edgy_u64();
            let len = *rng.pick(&[
                to_end - 8,
                to_end - 7,
                to_end,
                to_end + 1,
                cap as u64 - 8,
                cap as u64,
                0,
                edgy,
            ]);
            let w = match rng.below(5) {
                0 => SKIP,
                1 => len, // READY missing
                2 => rng.edgy_u64(),
                _ => READY | len,
            };
            ring.poke(&p, i, w);
        }
        if rng.one_in(4) {
            for i in 0..words {
                let w = rng.next_u64();
                ring.poke(&p, i, w);
            }
        }
        // Poll until the ring is empty or reported malformed: bounded, whatever it holds.
        for _ in 0..words + 2 {
            match pop(&mut c, cap) {
                Some(v) if v.is_empty() && !c.pending() => break,
                Some(_) => {}
                None => break,
            }
        }
    });
}
