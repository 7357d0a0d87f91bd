//! Large reduce and allreduce by cross-memory attach (`Area::reduce_cma`): member i reads
//! block i of everyone's contribution straight out of their memory, combines it in rank order
//! piece by piece, and writes each combined piece at once, while it is still in the cache,
//! into the result buffer of every member that gets the result. Two waits per call whatever
//! the size — everyone's addresses are published, then everyone has delivered its block —
//! where the path through the cells takes two per half ring of data; each byte is copied once
//! on each side instead of being packed into the cells, combined, published and copied out.
//!
//! This module owns this algorithm only. It must never combine out of rank order, send
//! point-to-point messages, or hold the engine lock while waiting.

use super::*;

/// Bytes of a piece combined at a time: the other members' parts are read into a buffer of
/// this size, which stays in the cache while it is combined and the result written out.
const PIECE: usize = 64 << 10;

/// What one member combines and delivers: its block of the contribution, where its own part
/// is, and where the block of the result goes.
struct Job {
    /// Packed contribution of this member (`mine` may lie inside it: in place).
    base: *const u8,
    /// This member's block of the result (in its own result buffer, or a scratch buffer).
    mine: *mut u8,
    /// First element and element count of the block.
    bs: usize,
    bc: usize,
}

impl Area {
    /// MPI_Allreduce (`root` None) or MPI_Reduce to `root` of `count` elements, by
    /// cross-memory attach (see the module documentation). The caller checked that the
    /// members agreed on it (`self.cma`). `out`: the packed result (significant where the
    /// result goes).
    ///
    /// Every member publishes the address of its packed contribution and (where the result
    /// goes) of its packed result buffer, then waits for the others' (step `k1`). Member i
    /// combines block i and writes it into every result buffer; its own part of block i, and
    /// its own result buffer's block i, are the only ones of its memory that the others do
    /// not touch, and block j of any member's memory is touched by member j only (read, then
    /// overwritten piece by piece when in place). Member i then publishes step `k2`: it reads
    /// and writes nobody's memory any more. Once everyone has, every block of the result is
    /// in place and nobody uses this member's memory: the call returns.
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
        let (bs, bc) = algo::block(count, n, me);
        // Where this member's block of the result is combined: in its own result buffer, or
        // (reduce, not the root) a scratch buffer.
        let mine = if gets {
            out.wrapping_add(bs * esz)
        } else {
            grow(&mut self.recv_buf, bc * esz)
        };
        let k1 = self.step();
        self.seg
            .info(me, INFO_ADDR)
            .store(base as u64, Ordering::Relaxed);
        self.seg
            .info(me, INFO_DST)
            .store(if gets { out as u64 } else { 0 }, Ordering::Relaxed);
        self.publish(k1);
        let mut res = Ok(());
        for d in 1..n {
            if let Err(e) = self.wait_ready((me + d) % n, k1) {
                res = Err(e);
                break;
            }
        }
        if res.is_ok() {
            let job = Job { base, mine, bs, bc };
            res = self.combine_block(&job, r, root);
        }
        // This member reads and writes nobody's memory any more (also after a failure: the
        // others must not wait for it forever).
        let k2 = self.step();
        self.publish(k2);
        self.finish_step(k2);
        // Once every other member has done the same, the result is complete here and nobody
        // uses this member's memory.
        for d in 1..n {
            let j = (me + d) % n;
            let w = self.wait_ready(j, k2);
            if res.is_ok() {
                res = w;
            } else {
                w?;
            }
        }
        res
    }

    /// Combine block `[bs, bs + bc)` (elements) of every member's contribution into `mine`,
    /// in rank order (`c0 op (c1 op (… op cn-1))`), piece by piece, and write each piece into
    /// the result buffers of the others that get the result (everyone, or `root`). This
    /// member's own part is read at `base`, which may hold `mine` itself (in place).
    ///
    /// # Safety
    /// `base` holds the packed contribution, `mine` room for `bc` elements; every other
    /// member has published the addresses of its contribution and result buffer.
    unsafe fn combine_block(&mut self, job: &Job, r: &Red<'_>, root: Option<usize>) -> Result<()> {
        let (me, n, esz) = (self.me, self.n, r.esz);
        let Job { base, mine, bs, bc } = *job;
        let last = n - 1;
        let per = (PIECE / esz).max(1);
        // A piece is at most a chunk (`esz` is at most `MIN_CHUNK`).
        debug_assert!(per * esz <= self.chunk);
        let tmp = self.scratch(0);
        let saved = self.scratch(1);
        // The members this one delivers to, starting with the next one (so that not everyone
        // writes into the same member at once).
        let to: Vec<(usize, u64)> = (1..n)
            .map(|d| (me + d) % n)
            .filter(|&j| root.is_none_or(|rt| rt == j))
            .map(|j| (j, self.info_of(j, INFO_DST)))
            .collect();
        let mut first = 0;
        while first < bc {
            let cnt = per.min(bc - first);
            let (off, len) = ((bs + first) * esz, cnt * esz);
            let acc = mine.add(first * esz);
            let mut own = base.add(off);
            if std::ptr::eq(own, acc) && me != last {
                // In place: the accumulator starts with the last member's part, over this
                // member's own.
                std::ptr::copy_nonoverlapping(own, saved, len);
                own = saved;
            }
            if last == me {
                if !std::ptr::eq(own, acc) {
                    std::ptr::copy_nonoverlapping(own, acc, len);
                }
            } else {
                let at = self.info_of(last, INFO_ADDR) + off as u64;
                self.copy_from(last, at, acc, len)?;
            }
            for j in (0..last).rev() {
                let src = if j == me {
                    own
                } else {
                    let at = self.info_of(j, INFO_ADDR) + off as u64;
                    self.copy_from(j, at, tmp, len)?;
                    tmp as *const u8
                };
                apply_packed(r.op, r.dt, cnt, src, acc)?;
            }
            for &(j, dst) in &to {
                self.copy_to(j, dst + off as u64, acc, len)?;
            }
            first += cnt;
        }
        Ok(())
    }

    /// Copy `len` bytes from `src` to `addr` in member `j`'s memory.
    ///
    /// # Safety
    /// `src` is valid for `len` bytes; member `j` expects the write and touches nothing of
    /// that range until this member's next `ready`.
    unsafe fn copy_to(&self, j: usize, addr: u64, src: *const u8, len: usize) -> Result<()> {
        write_to(self.pids[j], addr, src, len).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("collective: copying into the memory of rank {j}: {e}"),
            )
        })
    }
}
