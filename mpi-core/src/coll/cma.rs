//! The non-blocking allreduce by cross-memory attach (`MPI_Iallreduce` of a commutative
//! operation on processes of one node whose shared-memory area exists and whose members
//! agreed on cross-memory attach when it was set up; when it is chosen: `reduce.rs`).
//!
//! A schedule of two rounds of small messages, the data moved in between by the members
//! themselves, the way the blocking path does (`shmcoll/reduce_cma.rs`):
//!
//! 1. every member sends every other the addresses of its packed contribution and of its
//!    packed result buffer, and whether it can copy from the others' memory (24 bytes);
//! 2. one local step: until none is left, the member takes the next piece of the vector
//!    from a claim word in the area (a compare-and-swap), reads every other member's part of
//!    it out of that member's memory (`process_vm_readv`), combines the parts in rank order
//!    `c0 op (c1 op (… op cn-1))`, and writes the piece at once, still in the cache, into
//!    every other member's result buffer (`process_vm_writev`);
//! 3. every member tells every other that it has taken its last piece (8 bytes), and
//!    completes once all have: every piece is delivered, and nobody reads or writes its
//!    buffers any more.
//!
//! Piece p of any member's buffers is touched by the member that took it only (read, then
//! overwritten when in place), so in place needs no copy beyond a scratch accumulator. The
//! members that are running take the pieces: with more ranks than CPUs, one that is not
//! scheduled once it has sent its addresses holds nobody up but for its last message. Each
//! round is small messages sent eagerly, where `linear` moves the blocks by rendezvous, a
//! round ending when every partner has been scheduled to take and answer them.
//!
//! The claim words: the communicator's `s`-th such collective (every member counts them
//! alike) uses word `s % NB_SLOTS` with generation `s`. Several may be in flight on one
//! communicator; one whose word still serves an earlier collective whose pieces are not all
//! taken waits for it (its step returns `Flow::Wait`; the earlier one's members take its
//! pieces in their progress, so it cannot wait for a later one).
//!
//! Whether a member can copy is local knowledge (its communicator's area exists, with
//! cross-memory attach), which members may see differently (an area is made by a blocking
//! collective, and a program may start its non-blocking one on different sides of that):
//! every member learns everyone's answer in round 1, and unless all can, all replace round 3
//! with the fallback schedule, built only then (`Flow::Splice`).
//!
//! This module owns this algorithm only. It must never combine out of rank order, touch a
//! piece of a member's buffers it has not taken, or wait inside a local step.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use madmpi_datatypes::Datatype;
use madmpi_transports::shmcoll::{read_from, write_to};

use crate::error::{Error, ErrorClass, Result};
use crate::op::{apply_packed, Op};

use super::sched::{Flow, Team, B};
use super::shmcoll::{NbCma, NB_SLOTS};
use super::Ptr;

/// Most and fewest bytes of a piece: a piece is half the vector within these bounds (4 ranks
/// on 2 cores, paired against each other: at 128 KiB two pieces of 64 KiB took 0.70 of
/// `linear`'s time, four of 32 KiB 0.77, one 1.16; at 256 KiB two of 128 KiB 0.83, four of
/// 64 KiB 0.87, eight of 32 KiB 0.98; from 512 KiB pieces of 128 KiB beat 64 and 512 KiB).
/// Every piece costs a system call per other member to read it and one to write it, and the
/// running members share the pieces: at least two, so that both cores of such a host work.
const PIECE: usize = 128 << 10;
const MIN_PIECE: usize = 32 << 10;

/// Words of a member's round-1 message: whether it can copy, its contribution, its result.
const HDR: usize = 3;

/// What taking a piece from a claim word gave.
#[derive(Debug, PartialEq)]
enum Take {
    /// The first piece and how many.
    Got(u32, u32),
    /// Every piece of this collective is taken.
    Over,
    /// The word still serves an earlier collective (whose pieces are not all taken).
    Busy,
}

/// A claim word is `generation << 32 | taken << 16 | pieces` (a collective has at most
/// `u16::MAX` pieces). Take up to `want` of the `units` pieces of generation `gen`: a word of
/// an older generation whose pieces are all taken starts over at 0 for `gen`; one whose
/// pieces are not is still in use (`Busy`); a newer generation means that every piece of
/// `gen` was taken.
fn take(word: &AtomicU64, gen: u32, units: u16, want: u16) -> Take {
    let mut cur = word.load(Ordering::Acquire);
    loop {
        let (g, c, u) = ((cur >> 32) as u32, (cur >> 16) as u16, cur as u16);
        let c = match g.wrapping_sub(gen) as i32 {
            0 => c,
            d if d > 0 => return Take::Over,
            _ if c < u => return Take::Busy,
            _ => 0,
        };
        if c >= units {
            return Take::Over;
        }
        let got = want.max(1).min(units - c);
        let next = u64::from(gen) << 32 | u64::from(c + got) << 16 | u64::from(units);
        match word.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Take::Got(c.into(), got.into()),
            Err(now) => cur = now,
        }
    }
}

/// The allreduce by cross-memory attach of `count` elements of `esz` packed bytes, `sp` to
/// `rp` (the same in place), over `t` (n ≥ 2, `op` commutative or not: the combination is in
/// rank order), the `seq`-th on its communicator. `peers`: the communicator's area, if this
/// member can copy from the others' memory. `fallback` builds the schedule all members run
/// instead of the last round when one of them cannot (built only then).
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce(
    b: &mut B,
    t: &Team,
    sp: *const u8,
    rp: *mut u8,
    count: usize,
    esz: usize,
    (seq, peers): (u32, Option<NbCma>),
    (op, dt): (Op, Datatype),
    fallback: impl FnOnce(&mut B) + Send + 'static,
) {
    let n = t.size as usize;
    let me = t.me as usize;
    // The others write into the result buffer, which may be a scratch buffer (a packed
    // result): if this member's schedule fails (a lost peer), another may still be writing.
    b.exposed = true;
    let hdr = b.tmp(n * HDR * 8).cast::<u64>();
    // SAFETY: the schedule's own buffer of n * HDR words.
    unsafe {
        let mine = hdr.add(me * HDR);
        *mine = u64::from(peers.is_some());
        *mine.add(1) = sp as u64;
        *mine.add(2) = rp as u64;
    }
    b.fence();
    for k in 1..n {
        let (to, from) = ((me + k) % n, (me + n - k) % n);
        b.send_bytes(t, to as i32, hdr.wrapping_add(me * HDR).cast(), HDR * 8);
        b.recv_bytes(t, from as i32, hdr.wrapping_add(from * HDR).cast(), HDR * 8);
    }
    // Pieces of `per` elements (the same cut on every member), at most `u16::MAX` of them.
    let per = count
        .div_ceil(2)
        .min((PIECE / esz).max(1))
        .max(MIN_PIECE / esz)
        .max(count.div_ceil(usize::from(u16::MAX)));
    let units = count.div_ceil(per) as u16;
    let plen = per.min(count) * esz;
    let in_place = std::ptr::eq(sp, rp);
    // A part being combined, and the accumulator in place (where the result buffer holds
    // this member's part until the piece is combined).
    let tmp = Ptr(b.tmp(plen));
    let spare = Ptr(if in_place {
        b.tmp(plen)
    } else {
        std::ptr::null_mut()
    });
    let (hdr, sp, rp) = (Ptr(hdr.cast()), Ptr(sp as *mut u8), Ptr(rp));
    let mut fallback = Some(fallback);
    // The error of a piece that failed, reported once the last round has gone.
    let failed: Arc<Mutex<Option<Error>>> = Arc::default();
    let failed_at = Arc::clone(&failed);
    b.call(move |_| {
        let hdr = hdr.get().cast::<u64>();
        let word = |j: usize, w: usize| {
            // SAFETY: round 1 filled every member's words.
            unsafe { *hdr.add(j * HDR + w) }
        };
        let peers = match &peers {
            Some(p) if (0..n).all(|j| word(j, 0) == 1) => p,
            _ => {
                return match fallback.take() {
                    Some(f) => Ok(Flow::Splice(Box::new(f))),
                    None => {
                        crate::error::err(ErrorClass::Intern, "iallreduce: fallback taken twice")
                    }
                }
            }
        };
        // SAFETY: a collective on the communicator is in progress.
        let claim = unsafe { peers.claim(seq as usize % NB_SLOTS) };
        let mut first_take = true;
        let mut res = Ok(());
        loop {
            let (u, got) = match take(claim, seq, units, 1) {
                Take::Busy if first_take => return Ok(Flow::Wait),
                Take::Busy | Take::Over => break,
                Take::Got(u, got) => (u as usize, got as usize),
            };
            first_take = false;
            let first = u * per;
            let cnt = (got * per).min(count - first);
            // A piece that fails does not stop this member: it still sends its last message
            // (the others must not wait for it forever), and reports the error.
            // SAFETY: every member has published its buffers and touches none of this piece
            // of them before every member has said it is done (the last round); nobody else
            // took it.
            let e = unsafe {
                piece(
                    &peers.pids,
                    &word,
                    (me, n),
                    (first * esz, cnt * esz, cnt),
                    (sp.get(), rp.get(), in_place),
                    (tmp.get(), spare.get()),
                    (&op, &dt),
                )
            };
            if res.is_ok() {
                res = e;
            }
        }
        if let Err(e) = res {
            *failed_at.lock() = Some(e);
        }
        Ok(Flow::Next)
    });
    let token = b.tmp(8);
    for k in 1..n {
        let (to, from) = ((me + k) % n, (me + n - k) % n);
        b.send_bytes(t, to as i32, token, 8);
        // The tokens carry nothing: each lands in the first word of its sender's header.
        b.recv_bytes(t, from as i32, hdr.get().wrapping_add((from * HDR) * 8), 8);
    }
    b.fence();
    b.call(move |_| match failed.lock().take() {
        Some(e) => Err(e),
        None => Ok(Flow::Next),
    });
}

/// Combine bytes `[off, off + len)` (`cnt` elements) of every member's contribution in rank
/// order, `c0 op (c1 op (… op cn-1))`, and write them into every member's result buffer.
/// `word(j, 1)` and `word(j, 2)`: member j's contribution and result buffer.
///
/// # Safety
/// As the call in [`allreduce`]: the addresses are published and nobody else touches the
/// piece; `tmp` (and `spare` in place) hold `len` bytes.
#[allow(clippy::too_many_arguments)]
unsafe fn piece(
    pids: &[i32],
    word: &impl Fn(usize, usize) -> u64,
    (me, n): (usize, usize),
    (off, len, cnt): (usize, usize, usize),
    (sp, rp, in_place): (*mut u8, *mut u8, bool),
    (tmp, spare): (*mut u8, *mut u8),
    (op, dt): (&Op, &Datatype),
) -> Result<()> {
    let read = |j: usize, dst: *mut u8| -> Result<()> {
        read_from(pids[j], word(j, 1) + off as u64, dst, len).map_err(|e| cma_failed("from", j, e))
    };
    let own = sp.add(off).cast_const();
    let acc = if in_place { spare } else { rp.add(off) };
    let last = n - 1;
    if last == me {
        std::ptr::copy_nonoverlapping(own, acc, len);
    } else {
        read(last, acc)?;
    }
    for j in (0..last).rev() {
        let src = if j == me {
            own
        } else {
            read(j, tmp)?;
            tmp.cast_const()
        };
        apply_packed(op, dt, cnt, src, acc)?;
    }
    if in_place {
        std::ptr::copy_nonoverlapping(acc, rp.add(off), len);
    }
    for k in 1..n {
        let j = (me + k) % n;
        write_to(pids[j], word(j, 2) + off as u64, acc, len)
            .map_err(|e| cma_failed("into", j, e))?;
    }
    Ok(())
}

fn cma_failed(dir: &str, j: usize, e: madmpi_transports::Error) -> Error {
    Error::new(
        ErrorClass::Other,
        format!("iallreduce: copying {dir} the memory of rank {j}: {e}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_words() {
        let w = AtomicU64::new(0);
        assert_eq!(take(&w, 5, 3, 1), Take::Got(0, 1));
        assert_eq!(take(&w, 5, 3, 4), Take::Got(1, 2));
        assert_eq!(take(&w, 5, 3, 1), Take::Over);
        // An older generation: over for it; a newer one starts over once all were taken.
        assert_eq!(take(&w, 4, 3, 1), Take::Over);
        assert_eq!(take(&w, 13, 2, 1), Take::Got(0, 1));
        // Not all of generation 13 taken: generation 21 must wait for it.
        assert_eq!(take(&w, 21, 4, 1), Take::Busy);
        assert_eq!(take(&w, 13, 2, 1), Take::Got(1, 1));
        assert_eq!(take(&w, 21, 4, 1), Take::Got(0, 1));
        // Generations wrap.
        let w = AtomicU64::new(u64::from(u32::MAX) << 32 | 2 << 16 | 2);
        assert_eq!(take(&w, 3, 1, 1), Take::Got(0, 1));
        assert_eq!(take(&w, u32::MAX, 2, 1), Take::Over);
    }
}
