//! Reduce and allreduce through a communicator's area (`Area::reduce`, `Area::fold`): rank-order
//! combination for small chunks, reduce-scatter then gather for large ones.
//!
//! This module owns these algorithms only. It must never combine out of rank order, send
//! point-to-point messages, or hold the engine lock while waiting.

use super::*;

impl Area {
    /// `dst = c0 op (c1 op (… op cn-1))` over elements `[first, first + cnt)` of the current
    /// step's contributions (published at step `k`); this member's own elements come from
    /// `own` if given, else from its data area.
    ///
    /// # Safety
    /// `dst` is valid for the block and overlaps neither a data area nor `own`.
    pub(super) unsafe fn fold(
        &self,
        k: u64,
        first: usize,
        cnt: usize,
        dst: *mut u8,
        r: &Red<'_>,
        own: Option<*const u8>,
    ) -> Result<()> {
        if cnt == 0 {
            return Ok(());
        }
        let (off, len) = (first * r.esz, cnt * r.esz);
        let src = |j: usize| -> *const u8 {
            match own {
                Some(p) if j == self.me => p,
                _ => self.data(j, off),
            }
        };
        let last = self.n - 1;
        self.wait_posted(last, k)?;
        std::ptr::copy_nonoverlapping(src(last), dst, len);
        for j in (0..last).rev() {
            self.wait_posted(j, k)?;
            apply_packed(r.op, r.dt, cnt, src(j), dst)?;
        }
        Ok(())
    }

    /// A chunk-sized scratch buffer (`which`: 0 or 1).
    pub(super) fn scratch(&mut self, which: usize) -> *mut u8 {
        let chunk = self.chunk;
        self.scratch[which]
            .get_or_insert_with(|| AlignedBuf::new(chunk))
            .ptr()
    }

    /// MPI_Allreduce (`root` None) or MPI_Reduce to `root` (`out` significant there only).
    /// `in_place`: `out` is (the packed form of) the input.
    ///
    /// # Safety
    /// `input` holds `count` elements, `out` (where significant) room for their packed form.
    pub(super) unsafe fn reduce(
        &mut self,
        input: &Typed<'_>,
        out: *mut u8,
        count: usize,
        r: &Red<'_>,
        root: Option<usize>,
        in_place: bool,
    ) -> Result<()> {
        let (me, n, esz) = (self.me, self.n, r.esz);
        if self.cma && n > 1 && count * esz >= CMA_REDUCE_MIN && count >= n {
            return self.reduce_cma(input, out, count, r, root);
        }
        let gets = root.is_none_or(|rt| rt == me);
        let per = (self.chunk / esz).max(1);
        let mut first = 0;
        while first < count {
            let cnt = per.min(count - first);
            let cb = cnt * esz;
            let k = self.step();
            self.alloc_all(cb);
            self.claim(cb)?;
            let o = out.wrapping_add(first * esz);
            if cb < SPLIT_MIN {
                input.pack(first * esz, cb, self.data(me, 0));
                self.post(k);
                if gets {
                    self.fold(k, 0, cnt, o, r, None)?;
                }
                self.finish_step(k);
                self.lend(cb, k);
            } else {
                // Reduce-scatter: this member combines block `me` of the chunk, so the others
                // only need the rest of its contribution...
                let (bs, bc) = algo::block(cnt, n, me);
                let (a, z) = ((first + bs) * esz, (first + bs + bc) * esz);
                input.pack(first * esz, a - first * esz, self.data(me, 0));
                input.pack(z, first * esz + cb - z, self.data(me, z - first * esz));
                self.post(k);
                // ... and reads its own block in place when it can.
                let own = match input.flat {
                    Some(f) if !in_place => input.ptr.offset(f).add(a) as *const u8,
                    _ => {
                        let t = self.scratch(1);
                        input.pack(a, z - a, t);
                        t as *const u8
                    }
                };
                let mine = if gets {
                    o.wrapping_add(bs * esz)
                } else {
                    self.scratch(0)
                };
                self.fold(k, bs, bc, mine, r, Some(own))?;
                // ... and publishes it in place of its own contribution's block, which only
                // it reads.
                std::ptr::copy_nonoverlapping(mine, self.data(me, bs * esz), bc * esz);
                self.finish_step(k);
                let k2 = self.step();
                self.post(k2);
                if gets {
                    for j in (0..n).filter(|&j| j != me) {
                        let (js, jc) = algo::block(cnt, n, j);
                        self.wait_posted(j, k2)?;
                        std::ptr::copy_nonoverlapping(
                            self.data(j, js * esz),
                            o.wrapping_add(js * esz),
                            jc * esz,
                        );
                    }
                }
                self.finish_step(k2);
                self.lend(cb, k2);
            }
            first += cnt;
        }
        Ok(())
    }
}
