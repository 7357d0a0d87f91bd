//! Large reduce and allreduce by cross-memory attach (`Area::reduce_cma`): member i reads
//! block i of everyone's contribution straight out of their memory and combines it in rank
//! order; then everyone who gets the result reads the other blocks out of the members that
//! combined them. Three waits per call whatever the size, where the path through the cells
//! takes two per half ring of data, and each byte is copied once on each side instead of
//! being packed into the cells, combined, published and copied out.
//!
//! This module owns this algorithm only. It must never combine out of rank order, send
//! point-to-point messages, or hold the engine lock while waiting.

use super::*;

/// Bytes of a piece combined at a time: the other members' parts are read into a buffer of
/// this size, which stays in the cache while it is combined.
const PIECE: usize = 64 << 10;

impl Area {
    /// MPI_Allreduce (`root` None) or MPI_Reduce to `root` of `count` elements, by
    /// cross-memory attach (see the module documentation). The caller checked that the
    /// members agreed on it (`self.cma`). `out`: the packed result (significant where the
    /// result goes); `in_place`: the input is the receive buffer.
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
        // Where this member's block of the result goes, for itself and the others to read.
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
            .store(mine as u64, Ordering::Relaxed);
        self.publish(k1);
        let mut res = Ok(());
        for j in (0..n).filter(|&j| j != me) {
            if let Err(e) = self.wait_ready(j, k1) {
                res = Err(e);
                break;
            }
        }
        if res.is_ok() {
            res = self.combine_block(base, mine, bs, bc, r);
        }
        // Block `me` of the result is in place, and this member reads no contribution any
        // more (the receive buffer may be the input: its other blocks may now change).
        let k2 = self.step();
        self.publish(k2);
        if gets && res.is_ok() {
            for d in 1..n {
                let j = (me + d) % n;
                let (js, jc) = algo::block(count, n, j);
                if let Err(e) = self.wait_ready(j, k2) {
                    res = Err(e);
                    break;
                }
                if jc > 0 {
                    let at = self.info_of(j, INFO_DST);
                    res = self.copy_from(j, at, out.add(js * esz), jc * esz);
                    if res.is_err() {
                        break;
                    }
                }
            }
        }
        // Whatever happened, the others may be reading this member's memory: it leaves only
        // when they are done.
        self.finish_step(k2);
        self.wait_done_all(k2)?;
        res
    }

    /// Combine block `[bs, bs + bc)` (elements) of every member's contribution into `mine`,
    /// in rank order (`c0 op (c1 op (… op cn-1))`), piece by piece; this member's own part
    /// is read at `base`, which may be `mine` itself (in place).
    ///
    /// # Safety
    /// `base` holds the packed contribution, `mine` room for `bc` elements; every other
    /// member has published the address of its contribution.
    unsafe fn combine_block(
        &mut self,
        base: *const u8,
        mine: *mut u8,
        bs: usize,
        bc: usize,
        r: &Red<'_>,
    ) -> Result<()> {
        let (me, n, esz) = (self.me, self.n, r.esz);
        let last = n - 1;
        let per = (PIECE / esz).max(1);
        // A piece is at most a chunk (`esz` is at most `MIN_CHUNK`).
        debug_assert!(per * esz <= self.chunk);
        let tmp = self.scratch(0);
        let saved = self.scratch(1);
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
            first += cnt;
        }
        Ok(())
    }
}
