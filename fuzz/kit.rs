//! What the fuzz tests of every crate share: a seeded input generator with the mutations that
//! find decoding bugs, the case count, and an allocation meter. Each crate's fuzz tests include
//! this file with `#[path]` (a crate of its own would have to be published with the workspace,
//! and `pmi` depends on nothing): it is test code only.
//!
//! cargo-fuzz needs a nightly compiler; these targets run on stable as ordinary `#[test]`s with
//! generated inputs instead of coverage-guided ones. Every target runs `cases(default)` inputs:
//! `MADMPI_FUZZ_CASES=10000000` overrides the (small, CI-sized) default, `MADMPI_FUZZ_SEED`
//! changes the inputs, and `MADMPI_FUZZ_CASE=i` replays only case `i` (the number a failing
//! case prints).

#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::Instant;

/// splitmix64: tiny, fast, and good enough to pick mutations; every case gets its own stream,
/// so one case can be replayed alone.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in `0..n` (`n > 0`; the bias of the modulo does not matter here).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// True once in `n` times.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }

    pub fn pick<'a, T>(&mut self, of: &'a [T]) -> &'a T {
        &of[self.below(of.len())]
    }

    pub fn fill(&mut self, b: &mut [u8]) {
        for c in b.chunks_mut(8) {
            let r = self.next_u64().to_le_bytes();
            c.copy_from_slice(&r[..c.len()]);
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0; n];
        self.fill(&mut v);
        v
    }

    /// Random bytes, as many as [`Rng::len_upto`]`(max)`.
    pub fn raw(&mut self, max: usize) -> Vec<u8> {
        let n = self.len_upto(max);
        self.bytes(n)
    }

    /// A length in `0..=max`, most often a small one, often one next to a power of two.
    pub fn len_upto(&mut self, max: usize) -> usize {
        let n = match self.below(4) {
            0 => self.below(16),
            1 => {
                let p = 1usize << self.below(usize::BITS as usize - 1);
                p.wrapping_add(self.below(3)).wrapping_sub(1)
            }
            _ => self.below(max.saturating_add(1).max(1)),
        };
        n.min(max)
    }

    /// A `u32` that breaks length arithmetic: 0, 1, around powers of two and the maxima, or
    /// random.
    pub fn edgy_u32(&mut self) -> u32 {
        match self.below(6) {
            0 => *self.pick(&[0, 1, 7, 8, 9, 63, 64, 65, 4095, 4096, 65535, 65536]),
            1 => *self.pick(&[
                u32::MAX,
                u32::MAX - 1,
                u32::MAX - 7,
                i32::MAX as u32,
                1 << 31,
            ]),
            2 => (1u32 << self.below(32))
                .wrapping_add(self.below(3) as u32)
                .wrapping_sub(1),
            _ => self.next_u32(),
        }
    }

    /// As [`Rng::edgy_u32`], 64 bits wide.
    pub fn edgy_u64(&mut self) -> u64 {
        match self.below(6) {
            0 => self.edgy_u32() as u64,
            1 => *self.pick(&[u64::MAX, u64::MAX - 1, i64::MAX as u64, 1 << 63, 1 << 32]),
            2 => (1u64 << self.below(64))
                .wrapping_add(self.below(3) as u64)
                .wrapping_sub(1),
            _ => self.next_u64(),
        }
    }

    /// One to `max` random mutations of `v`: bit flips, edgy bytes and little-endian 32-bit
    /// fields, insertions, deletions, truncation, random tails, duplicated ranges.
    pub fn mutate(&mut self, v: &mut Vec<u8>, max: usize) {
        for _ in 0..1 + self.below(max.max(1)) {
            let len = v.len();
            match self.below(9) {
                0 if len > 0 => {
                    let i = self.below(len);
                    v[i] ^= 1 << self.below(8);
                }
                1 if len > 0 => {
                    let i = self.below(len);
                    v[i] = *self.pick(&[0, 1, 0x7f, 0x80, 0xff, b'\n', b' ', b'=', b'\\']);
                }
                2 if len >= 4 => {
                    let i = self.below(len - 3) & !3;
                    let i = i.min(len - 4);
                    let x = self.edgy_u32().to_le_bytes();
                    v[i..i + 4].copy_from_slice(&x);
                }
                3 => {
                    let n = self.below(len + 1);
                    v.truncate(n);
                }
                4 => {
                    let n = self.len_upto(64);
                    let tail = self.bytes(n);
                    v.extend_from_slice(&tail);
                }
                5 if len > 0 => {
                    let i = self.below(len);
                    v.remove(i);
                }
                6 => {
                    let i = self.below(len + 1);
                    let b = self.next_u32() as u8;
                    v.insert(i, b);
                }
                7 if len > 0 => {
                    let a = self.below(len);
                    let b = a + self.below((len - a).min(64) + 1);
                    let piece = v[a..b].to_vec();
                    let at = self.below(len + 1);
                    v.splice(at..at, piece);
                }
                _ if len > 0 => {
                    let i = self.below(len);
                    v[i] = self.next_u32() as u8;
                }
                _ => v.push(self.next_u32() as u8),
            }
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim().replace('_', "");
    match v.parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={v:?} is not a number"),
    }
}

/// How many inputs a target runs: `MADMPI_FUZZ_CASES`, else `default` (sized for CI).
pub fn cases(default: u64) -> u64 {
    env_u64("MADMPI_FUZZ_CASES").unwrap_or(default)
}

/// Run `case` on `cases(default)` inputs, each with its own generator; report the count and
/// the time on stderr (`cargo test -- --nocapture` shows it). A failing case names itself.
pub fn run(name: &str, default: u64, mut case: impl FnMut(&mut Rng)) {
    let seed = env_u64("MADMPI_FUZZ_SEED").unwrap_or(0x6d61_646d_7069);
    let (from, to) = match env_u64("MADMPI_FUZZ_CASE") {
        Some(i) => (i, i + 1),
        None => (0, cases(default)),
    };
    /// Names the failing case when a panic unwinds through the loop.
    struct Guard<'a>(&'a str, u64, u64);
    impl Drop for Guard<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                eprintln!(
                    "fuzz {}: case {} failed (replay: MADMPI_FUZZ_SEED={} MADMPI_FUZZ_CASE={})",
                    self.0, self.1, self.2, self.1
                );
            }
        }
    }
    let t = Instant::now();
    for i in from..to {
        let g = Guard(name, i, seed);
        let mut rng = Rng::new(seed ^ i.wrapping_mul(0xd134_2543_de82_ef95));
        case(&mut rng);
        std::mem::forget(g);
    }
    eprintln!("fuzz {name}: {} inputs in {:.2?}", to - from, t.elapsed());
}

/// Allocations made by this thread while metered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Number of allocations (a `realloc` counts as one).
    pub count: usize,
    /// Sum of the sizes asked for (a `realloc` counts its new size).
    pub bytes: usize,
    /// The largest single request.
    pub largest: usize,
}

thread_local! {
    static METERING: Cell<bool> = const { Cell::new(false) };
    static USAGE: Cell<Usage> = const { Cell::new(Usage { count: 0, bytes: 0, largest: 0 }) };
}

/// A global allocator that counts, per thread, what is asked for while [`metered`] runs.
/// It checks a length field's consequences concretely: a decoder that allocates what a peer
/// claims, instead of what it received, shows up as a request larger than its input.
pub struct Meter;

fn note(size: usize) {
    let _ = METERING.try_with(|m| {
        if m.get() {
            let _ = USAGE.try_with(|u| {
                let mut x = u.get();
                x.count += 1;
                x.bytes = x.bytes.saturating_add(size);
                x.largest = x.largest.max(size);
                u.set(x);
            });
        }
    });
}

// SAFETY: every call is forwarded to `System` unchanged; the bookkeeping touches only
// const-initialized thread-locals without destructors, which never allocate.
unsafe impl GlobalAlloc for Meter {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note(l.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        note(new);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

/// Run `f` and return what it allocated on this thread (the including crate must install
/// [`Meter`] as its `#[global_allocator]`).
pub fn metered<R>(f: impl FnOnce() -> R) -> (R, Usage) {
    USAGE.with(|u| u.set(Usage::default()));
    METERING.with(|m| m.set(true));
    let r = f();
    METERING.with(|m| m.set(false));
    (r, USAGE.with(|u| u.get()))
}

/// Fails when [`Meter`] is not the global allocator (the bounds would then check nothing).
pub fn assert_metering() {
    let (v, u) = metered(|| vec![1u8; 1000]);
    drop(v);
    assert!(
        u.largest >= 1000,
        "fuzz::Meter is not the #[global_allocator]"
    );
}
