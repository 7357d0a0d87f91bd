//! Large reduce and allreduce by cross-memory attach (`Area::reduce_cma`): the vector is cut
//! into pieces, which the members take one by one from a shared claim word; whoever takes a
//! piece reads it out of every member's contribution, combines it in rank order and writes it
//! at once, while it is still in the cache, into the result buffer of every member that gets
//! the result. Two waits per call whatever the size — everyone's addresses are published, then
//! every piece is delivered — where the path through the cells takes two per half ring of
//! data; each byte is copied once on each side instead of being packed into the cells,
//! combined, published and copied out. The members that run take the pieces: with more ranks
//! than free CPUs, a member that is not scheduled does not hold up the others.
//!
//! This module owns this algorithm only. It must never combine out of rank order (on two
//! members a commutative operation may take its operands the other way round: `c1 op c0`),
//! send point-to-point messages, or hold the engine lock while waiting.

use super::*;

/// Most bytes of a piece (and at most a chunk of the area, the size of the scratch buffers):
/// the other members' parts are read into a buffer of this size, which stays in the cache (an
/// accumulator and a part: 1 MiB, half of a 2 MiB L2) while it is combined and the result
/// written out. Every piece costs two system calls per other member, and they count: with
/// 64 KiB pieces, 1 and 4 MiB allreduces on 2 ranks took 1.2-1.35 times as long.
const PIECE: usize = 512 << 10;
/// Fewest bytes of a piece: at 64 KiB a call, one piece per member on 2 ranks, two pieces
/// in all on 4 (16 KiB pieces took 1.2 times as long on both).
const MIN_PIECE: usize = 32 << 10;

/// One call as its members share it out: where everyone's data is, and how it is cut.
struct Plan {
    /// Every member's packed contribution (this member's: a local address).
    addr: Vec<u64>,
    /// The members this one delivers to, other than itself, and where their packed result
    /// buffer is (all members, or the root of a reduce), starting with the next one.
    to: Vec<(usize, u64)>,
    /// This member's packed contribution, and its packed result buffer where it gets one.
    base: *const u8,
    out: Option<*mut u8>,
    /// Elements in all, and per claim unit (claim and delivery words count units).
    count: usize,
    unit: usize,
    /// Scratch pieces: the other members' parts as they are read, the accumulator when the
    /// result buffer cannot be (in place, or no result here).
    tmp: *mut u8,
    spare: *mut u8,
}

impl Plan {
    fn units(&self) -> u32 {
        self.count.div_ceil(self.unit) as u32
    }
}

/// Units of a claim in the usual case (a piece of `per` elements is this many units).
const UNITS: usize = 32;
/// Units of a claim in a two-member reduce: the root's and the other member's. The root's
/// pieces cost it a read of the other's part and the combination; the other's cost it the
/// same and a write into the root's memory (`process_vm_writev`, which also takes the root's
/// pages), so the root takes the larger share (44 : 20 of two pieces measured best among
/// 32 : 32, 38 : 26, 44 : 20, 48 : 16, 52 : 12, 56 : 8 and the root alone: 64 KiB and
/// 256 KiB 1.3–1.4 times faster than halves, see docs/collectives.md).
const ROOT_UNITS: usize = 44;
const OTHER_UNITS: usize = 2 * UNITS - ROOT_UNITS;

/// The generation of step `k` in a claim or delivery word (`generation << 32 | count`).
fn gen_of(k: u64) -> u32 {
    k as u32
}

/// The count a word holds for generation `gen`: 0 for an older generation, None for a newer
/// one (the step is over for everyone).
fn count_of(word: u64, gen: u32) -> Option<u32> {
    let g = (word >> 32) as u32;
    match (g.wrapping_sub(gen) as i32).signum() {
        0 => Some(word as u32),
        -1 => Some(0),
        _ => None,
    }
}

/// Add up to `want` (at least 1) to the count of generation `gen` in `word` while it is below
/// `limit` (starting from 0 when the word holds an older generation): the count before and
/// what was added, or None when it was already at `limit` (or the word holds a newer
/// generation).
fn take_next(word: &AtomicU64, gen: u32, limit: u32, want: u32) -> Option<(u32, u32)> {
    let mut cur = word.load(Ordering::Acquire);
    loop {
        let c = count_of(cur, gen)?;
        if c >= limit {
            return None;
        }
        let got = want.max(1).min(limit - c);
        let next = u64::from(gen) << 32 | u64::from(c + got);
        match word.compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return Some((c, got)),
            Err(now) => cur = now,
        }
    }
}

impl Area {
    /// MPI_Allreduce (`root` None) or MPI_Reduce to `root` of `count` elements, by
    /// cross-memory attach (see the module documentation). The caller checked that the
    /// members agreed on it (`self.cma`). `out`: the packed result (significant where the
    /// result goes).
    ///
    /// Every member publishes the address of its packed contribution and (where the result
    /// goes) of its packed result buffer, then waits for the others' (step `k`). Then, until
    /// no piece is left, it takes the next piece from member 0's claim word, combines it and
    /// writes it into every result buffer, and counts it in member 1's delivery word. Piece p
    /// of any member's buffers is touched by the member that took it only (read, then
    /// overwritten when in place). A member returns once every piece is delivered: the result
    /// is complete and nobody touches its buffers any more (a member that took no piece reads
    /// nothing of the others'). The words carry the step as their generation, so a member
    /// that comes late to them finds the pieces taken (or a later collective's generation)
    /// and takes none.
    ///
    /// # Safety
    /// As [`Area::reduce`].
    pub(super) unsafe fn reduce_cma(
        &mut self,
        input: &Typed<'_>,
        out: *mut u8,
        count: usize,
        r: &Red<'_>,
        root: Option<usize>,
    ) -> Result<()> {
        let (me, n, esz) = (self.me, self.n, r.esz);
        let gets = root.is_none_or(|rt| rt == me);
        // The contribution, packed: in place when it is one run of memory.
        let base = match input.flat {
            Some(f) => input.ptr.offset(f) as *const u8,
            None => {
                let t = grow(&mut self.pack_buf, count * esz);
                input.pack(0, count * esz, t);
                t as *const u8
            }
        };
        let k = self.step();
        self.seg
            .info(me, INFO_ADDR)
            .store(base as u64, Ordering::Relaxed);
        self.seg
            .info(me, INFO_DST)
            .store(if gets { out as u64 } else { 0 }, Ordering::Relaxed);
        self.publish(k);
        for d in 1..n {
            self.wait_ready((me + d) % n, k)?;
        }
        // Pieces of at most `PIECE` bytes, at least two per member when they are not too
        // small, so that every running member has a share. They are claimed in units of
        // 1/`UNITS` of such a piece (the same unit on every member: it depends on `count`,
        // `n` and `esz` only), `UNITS` at a time, or in a two-member reduce more for the root
        // and fewer for the other; never more than `cap` elements.
        let cap = (PIECE.min(self.chunk) / esz).max(1);
        let per = count.div_ceil(2 * n).max(MIN_PIECE / esz).min(cap);
        let unit = per.div_ceil(UNITS);
        let most = (cap / unit) as u32;
        let want = match root {
            Some(rt) if n == 2 && rt == me => ROOT_UNITS,
            Some(_) if n == 2 => OTHER_UNITS,
            _ => UNITS,
        } as u32;
        let want = want.min(most);
        let plan = Plan {
            addr: (0..n).map(|j| self.info_of(j, INFO_ADDR)).collect(),
            to: (1..n)
                .map(|d| (me + d) % n)
                .filter(|&j| root.is_none_or(|rt| rt == j))
                .map(|j| (j, self.info_of(j, INFO_DST)))
                .collect(),
            base,
            out: gets.then_some(out),
            count,
            unit,
            tmp: self.scratch(0),
            spare: self.scratch(1),
        };
        let (gen, units) = (gen_of(k), plan.units());
        let mut res = Ok(());
        {
            let claim = self.seg.info(0, INFO_CLAIM);
            let delivered = self.seg.info(1, INFO_CLAIM);
            while let Some((u, got)) = take_next(claim, gen, units, want) {
                // A piece that fails is still counted (the others must not wait for it
                // forever); this member reports the error.
                let first = u as usize * unit;
                let cnt = (got as usize * unit).min(count - first);
                let e = self.piece(&plan, first, cnt, r, root);
                if res.is_ok() {
                    res = e;
                }
                take_next(delivered, gen, units, got);
            }
            let last = (me + 1) % n;
            self.wait(last, || {
                count_of(delivered.load(Ordering::Acquire), gen).is_none_or(|c| c >= units)
            })?;
        }
        self.finish_step(k);
        res
    }

    /// Combine elements `[first, first + cnt)` of every member's contribution in rank order
    /// (`c0 op (c1 op (… op cn-1))`; on two members, member 1 with a commutative operation:
    /// `c1 op c0`) and write them into every result buffer.
    ///
    /// # Safety
    /// Every member has published the addresses of its contribution and result buffer, and
    /// no other member takes any of these elements.
    unsafe fn piece(
        &self,
        plan: &Plan,
        first: usize,
        cnt: usize,
        r: &Red<'_>,
        root: Option<usize>,
    ) -> Result<()> {
        let (me, n, esz) = (self.me, self.n, r.esz);
        let (off, len) = (first * esz, cnt * esz);
        // A piece is at most a chunk (`esz` is at most `MIN_CHUNK`).
        debug_assert!(len <= self.chunk);
        let tmp = plan.tmp;
        let own = plan.base.add(off);
        // Combined straight in this member's result buffer unless that is the input (in
        // place: this member's part must stay until it is combined).
        let acc = match plan.out {
            Some(o) if !std::ptr::eq(o.cast_const(), plan.base) => o.add(off),
            _ => plan.spare,
        };
        let last = n - 1;
        // Two members and a commutative operation: `c0 op c1` is `c1 op c0`, so member 1
        // reads member 0's part straight into the accumulator and combines its own into it,
        // rather than copying its own there first and reading member 0's into a scratch piece.
        let swap = n == 2 && me == 1 && r.op.is_commutative();
        if swap {
            self.copy_from(0, plan.addr[0] + off as u64, acc, len)?;
            apply_packed(r.op, r.dt, cnt, own, acc)?;
        } else if last == me {
            std::ptr::copy_nonoverlapping(own, acc, len);
        } else {
            self.copy_from(last, plan.addr[last] + off as u64, acc, len)?;
        }
        for j in (0..if swap { 0 } else { last }).rev() {
            let src = if j == me {
                own
            } else {
                self.copy_from(j, plan.addr[j] + off as u64, tmp, len)?;
                tmp as *const u8
            };
            apply_packed(r.op, r.dt, cnt, src, acc)?;
        }
        if let Some(o) = plan.out {
            let dst = o.add(off);
            if !std::ptr::eq(dst, acc) {
                std::ptr::copy_nonoverlapping(acc, dst, len);
            }
        }
        debug_assert!(plan.to.iter().all(|&(j, _)| root.is_none_or(|rt| rt == j)));
        for &(j, dst) in &plan.to {
            self.copy_to(j, dst + off as u64, acc, len)?;
        }
        Ok(())
    }

    /// Copy `len` bytes from `src` to `addr` in member `j`'s memory.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes; member `j` expects the write and touches nothing of
    /// that range until the piece is delivered.
    unsafe fn copy_to(&self, j: usize, addr: u64, src: *const u8, len: usize) -> Result<()> {
        write_to(self.pids[j], addr, src, len).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("collective: copying into the memory of rank {j}: {e}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_count_per_generation() {
        let w = AtomicU64::new(u64::from(7u32) << 32 | 3);
        // An older generation counts as 0, a newer one as over.
        assert_eq!(count_of(w.load(Ordering::Relaxed), 8), Some(0));
        assert_eq!(count_of(w.load(Ordering::Relaxed), 7), Some(3));
        assert_eq!(count_of(w.load(Ordering::Relaxed), 6), None);
        assert_eq!(take_next(&w, 8, 2, 1), Some((0, 1)));
        assert_eq!(take_next(&w, 8, 2, 1), Some((1, 1)));
        assert_eq!(take_next(&w, 8, 2, 1), None);
        assert_eq!(take_next(&w, 7, 5, 1), None);
        // Claims of several units, cut at the limit.
        let w = AtomicU64::new(0);
        assert_eq!(take_next(&w, 1, 10, 6), Some((0, 6)));
        assert_eq!(take_next(&w, 1, 10, 6), Some((6, 4)));
        assert_eq!(take_next(&w, 1, 10, 6), None);
        // Generations wrap.
        let w = AtomicU64::new(u64::from(u32::MAX) << 32 | 9);
        assert_eq!(take_next(&w, 0, 4, 1), Some((0, 1)));
        assert_eq!(count_of(w.load(Ordering::Relaxed), u32::MAX), None);
    }
}
