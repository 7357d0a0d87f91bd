//! Alltoall through a communicator's area (`Area::alltoall` and its cross-memory form).
//!
//! This module owns this algorithm only. It must never send point-to-point messages or hold
//! the engine lock while waiting.

use super::*;

impl Area {
    /// MPI_Alltoall of `b` bytes per block: block `j` of `send` to member `j`, block `j` of
    /// `recv` from member `j`. `send` None: in place (the blocks to send are in `recv`).
    ///
    /// # Safety
    /// Both sides hold `n` blocks.
    pub(super) unsafe fn alltoall(
        &mut self,
        send: Option<Regular<'_>>,
        recv: Regular<'_>,
        b: usize,
    ) -> Result<()> {
        let (me, n) = (self.me, self.n);
        let src = send.unwrap_or(recv);
        if let Some(s) = send {
            let (sp, rp) = (s.at(me), recv.at(me));
            super::super::sched::copy_typed(sp.ptr, sp.count, sp.dt, rp.ptr, rp.count, rp.dt)?;
        }
        if self.cma && b >= CMA_ALLTOALL_MIN {
            return self.alltoall_cma(send.is_some(), src, recv, b);
        }
        // Slot of the block for member `to` among the n - 1 blocks `from` publishes.
        let slot = |from: usize, to: usize| if to < from { to } else { to - 1 };
        let per = (self.chunk / (n - 1)).max(1);
        let mut off = 0;
        while off < b {
            let len = per.min(b - off);
            let k = self.step();
            self.alloc_all(len * (n - 1));
            self.claim(len * (n - 1))?;
            for j in (0..n).filter(|&j| j != me) {
                src.at(j).pack(off, len, self.data(me, slot(me, j) * len));
            }
            self.post(k);
            for d in 1..n {
                // Start with the next member up, so not everyone reads member 0 first.
                let j = (me + d) % n;
                self.wait_posted(j, k)?;
                recv.at(j).unpack(off, len, self.data(j, slot(j, me) * len));
            }
            self.finish_step(k);
            self.lend(len * (n - 1), k);
            off += len;
        }
        Ok(())
    }

    /// Alltoall in one step: everyone publishes where its outgoing blocks are (block `j` at
    /// `base + j × stride`), copies its blocks straight out of the others' memory, and waits
    /// until they have all done the same before its buffers may change. Outgoing blocks that
    /// are not one run of memory each, or that sit in the receive buffer (in place), are
    /// packed first.
    ///
    /// # Safety
    /// As [`Area::alltoall`]; `not_in_place`: the own block was already copied.
    pub(super) unsafe fn alltoall_cma(
        &mut self,
        not_in_place: bool,
        src: Regular<'_>,
        recv: Regular<'_>,
        b: usize,
    ) -> Result<()> {
        let (me, n) = (self.me, self.n);
        let k = self.step();
        let (base, stride) = match src.first.flat {
            Some(o) if not_in_place => (
                src.first.ptr.wrapping_offset(o) as u64,
                src.stride as i64 as u64,
            ),
            _ => {
                let t = grow(&mut self.pack_buf, b * n);
                for j in (0..n).filter(|&j| j != me) {
                    src.at(j).pack(0, b, t.add(j * b));
                }
                (t as u64, b as u64)
            }
        };
        self.seg.info(me, INFO_ADDR).store(base, Ordering::Relaxed);
        self.seg
            .info(me, INFO_STRIDE)
            .store(stride, Ordering::Relaxed);
        self.publish(k);
        let mut res = Ok(());
        for d in 1..n {
            let j = (me + d) % n;
            if let Err(e) = self.wait_ready(j, k) {
                res = Err(e);
                break;
            }
            let at = self
                .info_of(j, INFO_ADDR)
                .wrapping_add((me as u64).wrapping_mul(self.info_of(j, INFO_STRIDE)));
            res = self.read_typed(j, at, &recv.at(j), b);
            if res.is_err() {
                break;
            }
        }
        // Whatever happened, the others may be reading this member's blocks: it leaves only
        // when they are done.
        self.finish_step(k);
        self.wait_done_all(k)?;
        res
    }
}
