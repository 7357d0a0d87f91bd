//! The lock-free byte ring between two processes: its records and its two ends.
//!
//! # What it owns
//!
//! The record format (the header word with `READY`, the skip marker, 8-byte alignment), the
//! [`Producer`] (writes records, or builds one in place at its tail and publishes it later:
//! [`Producer::append`], [`Producer::publish`]; publishes `tail`) and the [`Consumer`] (polls the
//! header word, hands payloads over in place, publishes `head`), as described under "Ring
//! records" in the `shm` module documentation.
//!
//! # What it must never do
//!
//! Block, allocate or make a system call, or use a header a peer wrote without checking it (a
//! corrupt ring is an [`Error::Malformed`], never an access outside the ring). It knows nothing
//! of peers, ranks or the rest of the segment.

use std::io::IoSlice;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use super::segment::RingCtrl;
use crate::{Error, Result};

/// Size of a record header.
const REC_HDR: usize = 8;
/// Record header meaning "nothing more before the end of the data area".
const SKIP: u64 = u64::MAX;
/// Set in every record header, so that a header is never 0 (0 means "no record yet").
const READY: u64 = 1 << 63;
/// Set in the header of a record for the driver itself (a split copy's help request), which
/// the consumer hands to its second callback instead of the engine's.
const DRIVER: u64 = 1 << 62;
/// Bits 40..56 of a record header in an inbox: the sender's local index + 1 (0 in a pair ring,
/// whose sender is known). The length is below 2^40 (a quarter of a ring of at most 1 GiB).
const FROM_SHIFT: u32 = 40;
const FROM_MASK: u64 = 0xffff << FROM_SHIFT;

/// The header bits naming sender `from` (a local index) of an inbox record.
#[inline(always)]
pub(super) fn from_bits(from: usize) -> u64 {
    debug_assert!(from < 0xffff);
    ((from as u64 + 1) << FROM_SHIFT) & FROM_MASK
}

/// Round up to the record alignment.
#[inline(always)]
fn align8(n: usize) -> usize {
    (n + 7) & !7
}

/// The header word of the record at byte `pos` of a data area.
///
/// # Safety
///
/// `base` is a live data area, `pos` is 8-aligned and at most its size minus 8.
#[inline(always)]
unsafe fn header<'a>(base: *mut u8, pos: usize) -> &'a AtomicU64 {
    // SAFETY: in bounds and 8-aligned (caller); the word is only accessed atomically while it
    // serves as a header, and accesses as payload bytes are ordered with those by the
    // head/header protocol.
    unsafe { AtomicU64::from_ptr(base.add(pos).cast()) }
}

/// Producer end of one ring, owned by the only process that writes to it.
#[derive(Debug)]
pub(super) struct Producer {
    ctrl: NonNull<RingCtrl>,
    data: NonNull<u8>,
    mask: usize,
    /// Our own `tail`, mirrored in the shared control block.
    tail: u64,
    /// The consumer's `head` as last read: the ring has at least this much room.
    head_cache: u64,
}

impl Producer {
    /// # Safety
    ///
    /// `ctrl` and `data` (`capacity` bytes, 8-byte aligned, `capacity` a power of two, zeroed
    /// at creation) stay valid as long as the producer, and no one else produces on this ring.
    pub(super) unsafe fn new(
        ctrl: NonNull<RingCtrl>,
        data: NonNull<u8>,
        capacity: usize,
    ) -> Producer {
        debug_assert!(capacity.is_power_of_two() && capacity >= 64);
        // SAFETY: `ctrl` is valid (caller).
        let tail = unsafe { ctrl.as_ref() }.tail.0.load(Ordering::Acquire);
        // SAFETY: as above.
        let head = unsafe { ctrl.as_ref() }.head.0.load(Ordering::Acquire);
        Producer {
            ctrl,
            data,
            mask: capacity - 1,
            tail,
            head_cache: head,
        }
    }

    #[inline(always)]
    pub(super) fn ctrl(&self) -> &RingCtrl {
        // SAFETY: valid for our lifetime (see `new`); only atomics are accessed through it.
        unsafe { self.ctrl.as_ref() }
    }

    /// Append one record holding the concatenation of `iov` (`len` bytes in total, at most a
    /// quarter of the ring), or return `false` and take nothing when it does not fit now.
    /// `from`: the header bits naming the sender in an inbox ([`from_bits`]), else 0.
    #[inline]
    pub(super) fn try_push(&mut self, iov: &[IoSlice<'_>], len: usize, from: u64) -> bool {
        // SAFETY: `fill` writes the `len` bytes of the slices, which cannot overlap the ring.
        self.push_flagged(len, from, |mut dst| unsafe {
            for s in iov {
                crate::copy_bytes(s.as_ptr(), dst, s.len());
                dst = dst.add(s.len());
            }
        })
    }

    /// [`Producer::try_push`] of a record for the peer's driver (see [`DRIVER`]); `from`: the
    /// header bits naming the sender in an inbox ([`from_bits`]), else 0.
    pub(super) fn try_push_driver(&mut self, bytes: &[u8], from: u64) -> bool {
        // SAFETY: `fill` writes the `len` bytes of the slice, which cannot overlap the ring.
        self.push_flagged(bytes.len(), DRIVER | from, |dst| unsafe {
            crate::copy_bytes(bytes.as_ptr(), dst, bytes.len());
        })
    }

    /// [`Producer::try_push`] of a record whose `len` bytes `fill` writes at the pointer it is
    /// given (room for exactly `len` bytes), with `flag` or'ed into the header (the sender's
    /// bits in an inbox, [`from_bits`], and for the driver's own records [`DRIVER`]).
    #[inline(always)]
    pub(super) fn push_flagged(
        &mut self,
        len: usize,
        flag: u64,
        fill: impl FnOnce(*mut u8),
    ) -> bool {
        let cap = self.mask + 1;
        let rec = REC_HDR + align8(len);
        let pos = self.tail as usize & self.mask;
        let to_end = cap - pos;
        let wraps = rec > to_end;
        let need = if wraps { to_end + rec } else { rec };
        // `+ REC_HDR`: the word after the record must be free too, to be cleared as the next
        // (still empty) header.
        let used = self.tail.wrapping_sub(self.head_cache);
        if used > cap as u64 || need + REC_HDR > cap - used as usize {
            self.head_cache = self.ctrl().head.0.load(Ordering::Acquire);
            // A consumer publishing nonsense (head past tail) only makes the ring look full.
            let used = self.tail.wrapping_sub(self.head_cache);
            if used > cap as u64 || need + REC_HDR > cap - used as usize {
                return false;
            }
        }
        let base = self.data.as_ptr();
        let at = if wraps { 0 } else { pos };
        let next = (at + rec) & self.mask;
        // SAFETY: [at, at + rec) and the word at `next` are inside the data area (rec <= to_end,
        // or at == 0 and rec < cap) and free (checked above): the consumer reads them only after
        // it sees the header stores below. The iovec slices are valid for reads and cannot
        // overlap the ring, which no Rust reference covers.
        unsafe {
            // The next header is cleared first: its cache line is usually not ours yet, and
            // the header store below cannot become visible before this one (x86 keeps stores
            // in order), so the line is fetched while the payload is written instead of after.
            header(base, next).store(0, Ordering::Relaxed);
            fill(base.add(at + REC_HDR));
            header(base, at).store(READY | flag | len as u64, Ordering::Release);
            if wraps {
                // Published last: the consumer, waiting at `pos`, then finds the record at 0.
                header(base, pos).store(SKIP, Ordering::Release);
            }
        }
        self.tail += need as u64;
        self.ctrl().tail.0.store(self.tail, Ordering::Release);
        true
    }
}

/// Bring a ring's shared `tail` up to the records its producer published: a producer that
/// died between storing a record's header (the record is then visible to the consumer) and
/// publishing `tail` left `tail` behind it. Walks the headers from `tail` to the first empty
/// one (a producer always clears the word after its record, so the walk stops where the dead
/// producer's last published record ends) and stores the result. A record the producer had
/// only begun is invisible (its header still 0) and is overwritten by the next one.
///
/// # Safety
///
/// As [`Producer::new`]; the caller is now the ring's only producer and the previous one is
/// gone (no producer store can race with the walk).
pub(super) unsafe fn repair_tail(
    ctrl: NonNull<RingCtrl>,
    data: NonNull<u8>,
    capacity: usize,
) -> Result<()> {
    let mask = capacity - 1;
    // SAFETY: `ctrl` is valid (caller).
    let ctrl = unsafe { ctrl.as_ref() };
    let start = ctrl.tail.0.load(Ordering::Acquire);
    let mut tail = start;
    loop {
        let pos = tail as usize & mask;
        // SAFETY: `tail` only advances by whole 8-aligned records inside the area.
        let word = unsafe { header(data.as_ptr(), pos) }.load(Ordering::Acquire);
        if word == 0 {
            break;
        }
        let to_end = capacity - pos;
        let step = if word == SKIP {
            to_end
        } else {
            let len = word & !(READY | DRIVER | FROM_MASK);
            let rec = REC_HDR as u64 + align8(len as usize) as u64;
            if word & READY == 0 || len >= capacity as u64 || rec > to_end as u64 {
                return Err(Error::Malformed(format!(
                    "shm ring: bad record header {word:#x} at {pos} after a dead producer"
                )));
            }
            rec as usize
        };
        tail += step as u64;
        // The dead producer published at most one record (and its skip marker) past `tail`;
        // a walk of more than a ring's worth means headers that no producer wrote.
        if tail.wrapping_sub(start) > capacity as u64 {
            return Err(Error::Malformed(
                "shm ring: no end to the records after a dead producer".into(),
            ));
        }
    }
    ctrl.tail.0.store(tail, Ordering::Release);
    Ok(())
}

/// Consumer end of one ring, owned by the only process that reads from it.
#[derive(Debug)]
pub(super) struct Consumer {
    ctrl: NonNull<RingCtrl>,
    data: NonNull<u8>,
    mask: usize,
    /// Our own `head`; ahead of the shared one while a record is being delivered.
    head: u64,
}

impl Consumer {
    /// # Safety
    ///
    /// As [`Producer::new`], with "consumes" for "produces".
    pub(super) unsafe fn new(
        ctrl: NonNull<RingCtrl>,
        data: NonNull<u8>,
        capacity: usize,
    ) -> Consumer {
        debug_assert!(capacity.is_power_of_two() && capacity >= 64);
        // SAFETY: `ctrl` is valid (caller).
        let head = unsafe { ctrl.as_ref() }.head.0.load(Ordering::Acquire);
        Consumer {
            ctrl,
            data,
            mask: capacity - 1,
            head,
        }
    }

    #[inline(always)]
    pub(super) fn ctrl(&self) -> &RingCtrl {
        // SAFETY: valid for our lifetime (see `new`); only atomics are accessed through it.
        unsafe { self.ctrl.as_ref() }
    }

    /// The header word where the next record will appear (0 while there is none).
    #[inline(always)]
    fn peek(&self) -> u64 {
        // SAFETY: `head` only advances by whole 8-aligned records inside the area.
        unsafe { header(self.data.as_ptr(), self.head as usize & self.mask) }
            .load(Ordering::Acquire)
    }

    /// Whether a record is waiting.
    #[inline]
    pub(super) fn pending(&self) -> bool {
        self.peek() != 0
    }

    /// Hand the records published so far to `f` (the driver's own records to `g`), oldest
    /// first, each with its sender's bits (in an inbox the sender's local index + 1, else 0), and at most one ring's worth (so the loop is bounded even if the producer keeps
    /// up). A record is consumed before its callback runs: if that panics it is not delivered
    /// again. Returns how many records were handed over.
    #[inline]
    pub(super) fn pop_all(
        &mut self,
        f: &mut dyn FnMut(u32, &[u8]),
        g: &mut dyn FnMut(u32, &[u8]),
    ) -> Result<usize> {
        let word = self.peek();
        if word == 0 {
            return Ok(0);
        }
        self.pop_from(word, f, g)
    }

    fn pop_from(
        &mut self,
        mut word: u64,
        f: &mut dyn FnMut(u32, &[u8]),
        g: &mut dyn FnMut(u32, &[u8]),
    ) -> Result<usize> {
        let cap = self.mask + 1;
        let base = self.data.as_ptr();
        let start = self.head;
        let mut n = 0;
        loop {
            let pos = self.head as usize & self.mask;
            let to_end = cap - pos;
            if word == SKIP {
                self.head += to_end as u64;
            } else {
                let len = word & !(READY | DRIVER | FROM_MASK);
                let from = ((word & FROM_MASK) >> FROM_SHIFT) as u32;
                if word & READY == 0 || len >= cap as u64 {
                    return Err(Error::Malformed(format!(
                        "shm ring: bad record header {word:#x} at {pos}"
                    )));
                }
                let len = len as usize;
                let rec = REC_HDR + align8(len);
                if rec > to_end {
                    return Err(Error::Malformed(format!(
                        "shm ring: record of {len} bytes at {pos} overruns the ring"
                    )));
                }
                self.head += rec as u64;
                // SAFETY: [pos + 8, pos + 8 + len) is inside the data area (checked above) and
                // was written before the header we read with Acquire; the producer does not
                // write it again before we publish a `head` past it, which happens only after
                // `f` returns, so the slice is stable while it lives.
                let payload = unsafe { std::slice::from_raw_parts(base.add(pos + REC_HDR), len) };
                if word & DRIVER == 0 {
                    prefetch(payload);
                    f(from, payload);
                } else {
                    g(from, payload);
                }
                self.ctrl().head.0.store(self.head, Ordering::Release);
                n += 1;
            }
            if self.head.wrapping_sub(start) >= cap as u64 {
                break;
            }
            word = self.peek();
            if word == 0 {
                break;
            }
        }
        // Publish a skip that ended the batch.
        self.ctrl().head.0.store(self.head, Ordering::Release);
        Ok(n)
    }
}

/// Ask for every cache line of a record at once before handing it over: the lines were
/// written by the other core, and a packet of many small chunks is read a chunk at a time,
/// so without this they arrive one transfer after another instead of overlapped.
#[inline(always)]
fn prefetch(p: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if p.len() > PREFETCH_MIN {
        let end = p.len().min(PREFETCH_MAX);
        let mut off = 64;
        while off < end {
            // SAFETY: a prefetch has no effect on memory; the address is inside `p`.
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    p.as_ptr().add(off).cast(),
                )
            };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Records up to this many bytes are not prefetched (two lines at most: the hardware's
/// adjacent-line prefetch brings them).
const PREFETCH_MIN: usize = 128;
/// Only the first this many bytes of a record are prefetched: a core tracks a limited number
/// of outstanding misses, and beyond a few dozen lines the hardware's stream prefetcher has
/// caught on anyway.
const PREFETCH_MAX: usize = 2048;

#[cfg(test)]
mod tests {
    use super::super::segment::Padded;
    use super::*;
    use std::sync::atomic::AtomicU32;

    /// A ring in private memory, for unit tests of the record logic.
    struct TestRing {
        _ctrl: Box<RingCtrl>,
        _data: Vec<u64>,
        prod: Producer,
        cons: Consumer,
    }

    fn ring(cap: usize) -> TestRing {
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
        TestRing {
            _ctrl: ctrl,
            _data: data,
            prod,
            cons,
        }
    }

    fn push(r: &mut TestRing, bytes: &[u8]) -> bool {
        r.prod.try_push(&[IoSlice::new(bytes)], bytes.len(), 0)
    }

    fn pop(r: &mut TestRing) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        r.cons
            .pop_all(&mut |_, p| out.push(p.to_vec()), &mut |_, _| {
                panic!("driver record")
            })
            .unwrap();
        out
    }

    #[test]
    fn wrap_around_with_skip_marker() {
        let mut r = ring(256);
        // 3 records of 8 + 56 = 64 bytes: tail at 192.
        for i in 0..3u8 {
            assert!(push(&mut r, &[i; 56]));
        }
        assert_eq!(pop(&mut r).len(), 3);
        // 8 + 72 = 80 bytes do not fit in the 64 left before the end: skip, then at 0.
        assert!(push(&mut r, &[7; 72]));
        assert_eq!(r.prod.tail, 256 + 80);
        // SAFETY: test ring memory is alive; offset 192 is inside.
        let marker = unsafe { r.prod.data.as_ptr().add(192).cast::<u64>().read() };
        assert_eq!(marker, SKIP);
        assert_eq!(pop(&mut r), vec![vec![7u8; 72]]);
        assert_eq!(r.cons.head, 256 + 80);
        // Many rounds of odd sizes keep order and content.
        let mut expect = std::collections::VecDeque::new();
        for k in 0..2000usize {
            let len = (k * 7919) % 61;
            let v: Vec<u8> = (0..len).map(|b| (b + k) as u8).collect();
            while !push(&mut r, &v) {
                for got in pop(&mut r) {
                    assert_eq!(Some(got), expect.pop_front());
                }
            }
            expect.push_back(v);
        }
        for got in pop(&mut r) {
            assert_eq!(Some(got), expect.pop_front());
        }
        assert!(expect.is_empty());
    }

    #[test]
    fn full_ring_would_block_and_takes_nothing() {
        let mut r = ring(256);
        let mut n = 0;
        while push(&mut r, &[1; 24]) {
            n += 1;
        }
        // 32-byte records, and the word after the last one stays free.
        assert_eq!(n, 256 / 32 - 1);
        let tail = r.prod.tail;
        assert!(!push(&mut r, &[9; 24]));
        assert_eq!(r.prod.tail, tail);
        assert_eq!(r.prod.ctrl().tail.0.load(Ordering::Relaxed), tail);
        assert_eq!(pop(&mut r), vec![vec![1u8; 24]; n]);
        assert!(push(&mut r, &[2; 24]));
        assert_eq!(pop(&mut r), vec![vec![2u8; 24]]);
    }

    #[test]
    fn exact_fit_records() {
        let mut r = ring(256);
        // 240 + 8 bytes of records and the free word: exactly full.
        assert!(push(&mut r, &[3; 232]));
        assert!(push(&mut r, &[]));
        assert_eq!(r.prod.tail, 248);
        assert!(!push(&mut r, &[]), "the ring is exactly full");
        assert_eq!(pop(&mut r), vec![vec![3u8; 232], vec![]]);
        // A record ending exactly at the end of the area needs no skip marker.
        assert!(push(&mut r, &[]));
        assert_eq!(r.prod.tail, 256);
        assert_eq!(pop(&mut r), vec![vec![]]);
        assert!(push(&mut r, &[4; 120]));
        assert_eq!(pop(&mut r), vec![vec![4u8; 120]]);
        assert!(push(&mut r, &[5; 120]));
        assert_eq!(r.prod.tail, 512);
        assert_eq!(pop(&mut r), vec![vec![5u8; 120]]);
        // The largest record an empty ring takes, and one more byte.
        assert!(!push(&mut r, &[6; 241]));
        assert!(push(&mut r, &[6; 240]));
        assert_eq!(pop(&mut r), vec![vec![6u8; 240]]);
        assert_eq!(r.cons.head, 512 + 248);
    }

    #[test]
    fn zero_length_and_unaligned_lengths() {
        let mut r = ring(4096);
        for len in [0usize, 1, 7, 8, 9, 15, 16, 17, 0, 0] {
            assert!(push(&mut r, &vec![len as u8; len]));
        }
        let got = pop(&mut r);
        let lens: Vec<_> = got.iter().map(Vec::len).collect();
        assert_eq!(lens, vec![0, 1, 7, 8, 9, 15, 16, 17, 0, 0]);
        assert!(pop(&mut r).is_empty());
    }

    #[test]
    fn gather_of_several_slices() {
        let mut r = ring(4096);
        let parts: [&[u8]; 4] = [b"ab", b"", b"cde", b"fghij"];
        let iov: Vec<_> = parts.iter().map(|p| IoSlice::new(p)).collect();
        assert!(r.prod.try_push(&iov, 10, 0));
        assert_eq!(pop(&mut r), vec![b"abcdefghij".to_vec()]);
    }

    #[test]
    fn corrupt_ring_is_malformed_not_a_crash() {
        let mut r = ring(256);
        let base = r.prod.data.as_ptr();
        for bad in [1 << 40, READY | 256, READY | 249, 5] {
            // SAFETY: test ring memory is alive; offset 0 is inside and 8-aligned.
            unsafe { header(base, 0) }.store(bad, Ordering::Release);
            assert!(
                matches!(
                    r.cons.pop_all(&mut |_, _| {}, &mut |_, _| {}),
                    Err(Error::Malformed(_))
                ),
                "{bad:#x}"
            );
        }
    }

    #[test]
    fn repair_tail_after_a_dead_producer() {
        let mut r = ring(256);
        let tail = |r: &TestRing| r.prod.ctrl().tail.0.load(Ordering::Acquire);
        let set_tail = |r: &TestRing, t: u64| r.prod.ctrl().tail.0.store(t, Ordering::Release);
        let repair = |r: &TestRing| {
            // SAFETY: the test ring's memory is alive, and nothing else produces on it.
            unsafe { repair_tail(r.prod.ctrl, r.prod.data, 256) }
        };
        // Nothing published past `tail`: unchanged.
        assert!(push(&mut r, &[1; 56]));
        repair(&r).unwrap();
        assert_eq!(tail(&r), 64);
        // A record published, `tail` not: brought past it.
        assert!(push(&mut r, &[2; 56]));
        set_tail(&r, 64);
        repair(&r).unwrap();
        assert_eq!(tail(&r), 128);
        assert_eq!(pop(&mut r), vec![vec![1u8; 56], vec![2u8; 56]]);
        // A record that wraps: skip marker and record published, `tail` not.
        assert!(push(&mut r, &[3; 56]));
        assert!(push(&mut r, &[4; 72]));
        assert_eq!(r.prod.tail, 256 + 80);
        set_tail(&r, 192);
        repair(&r).unwrap();
        assert_eq!(tail(&r), 256 + 80);
        assert_eq!(pop(&mut r), vec![vec![3u8; 56], vec![4u8; 72]]);
        // The wrapped record written at 0 but its skip marker not yet: nothing is visible, and
        // `tail` stays where the consumer waits.
        assert!(push(&mut r, &[5; 136]));
        assert_eq!(pop(&mut r), vec![vec![5u8; 136]]);
        assert!(push(&mut r, &[6; 136]));
        let wrap_at = 256 + 80 + 144;
        // SAFETY: test ring memory is alive; the skip marker's word is inside and 8-aligned.
        unsafe { header(r.prod.data.as_ptr(), wrap_at & 255) }.store(0, Ordering::Release);
        set_tail(&r, wrap_at as u64);
        repair(&r).unwrap();
        assert_eq!(tail(&r), wrap_at as u64);
        assert!(pop(&mut r).is_empty());
        // A header no producer wrote is malformed, not a walk off the ring.
        // SAFETY: as above.
        unsafe { header(r.prod.data.as_ptr(), wrap_at & 255) }
            .store(READY | 4000, Ordering::Release);
        assert!(matches!(repair(&r), Err(Error::Malformed(_))));
    }

    #[test]
    fn panicking_callback_does_not_redeliver() {
        let mut r = ring(256);
        assert!(push(&mut r, b"first"));
        assert!(push(&mut r, b"second"));
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            r.cons
                .pop_all(&mut |_, _| panic!("engine bug"), &mut |_, _| {})
                .ok();
        }));
        assert!(res.is_err());
        assert_eq!(pop(&mut r), vec![b"second".to_vec()]);
    }
}

#[cfg(test)]
#[path = "fuzz.rs"]
mod fuzz;
