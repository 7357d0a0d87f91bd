//! Barrier and broadcast through a communicator's area (`Area::barrier`, `Area::bcast` and its
//! small and cross-memory forms), and the cross-memory copy helpers they share.
//!
//! This module owns these algorithms only. It must never send point-to-point messages or hold
//! the engine lock while waiting.

use super::*;

impl Area {
    // -------------------------------------------------------------------------- algorithms

    pub(super) fn barrier(&mut self) -> Result<()> {
        let k = self.step();
        let (me, n) = (self.me, self.n);
        if n <= FLAT_MAX {
            self.publish(k);
            for j in 0..n {
                self.wait_ready(j, k)?;
            }
        } else {
            for c in (RADIX * me + 1..=RADIX * me + RADIX).take_while(|&c| c < n) {
                self.wait_ready(c, k)?;
            }
            // `ready` here: this member's subtree has arrived.
            self.publish(k);
            let rel = self.seg.release();
            if me == 0 {
                rel.store(k, Ordering::Release);
            } else {
                self.wait(0, || rel.load(Ordering::Acquire) >= k)?;
            }
        }
        // No `done`: a barrier reads no data, and writers only wait for `done` to reach steps
        // that did.
        Ok(())
    }

    /// # Safety
    /// `buf` holds its elements (significant everywhere).
    pub(super) unsafe fn bcast(&mut self, buf: &Typed<'_>, nb: usize, root: usize) -> Result<()> {
        // Every member first takes the step of the root's slot, which carries the root's byte
        // count (and the data itself up to `SMALL_MAX`). The path of the rest follows from that
        // count alone, so members whose counts differ (an erroneous program) still take the
        // same steps and learn of the truncation, instead of waiting for a step the root never
        // takes.
        let total = self.bcast_small(buf, nb, root)?;
        if total <= SMALL_MAX {
            return Ok(());
        }
        let cma_min = if self.own_cpus {
            CMA_BCAST_MIN
        } else {
            CMA_BCAST_SHARED_MIN
        };
        if self.cma && self.n == 2 && total >= cma_min {
            self.bcast_cma(buf, nb, total, root)?;
        } else {
            self.bcast_chunks(buf, nb, total, root)?;
        }
        truncated(nb, total)
    }

    /// The chunked broadcast of `total` bytes through the root's cells (`nb`: this member's
    /// own count; a receiver keeps what fits).
    ///
    /// # Safety
    /// As [`Area::bcast`].
    unsafe fn bcast_chunks(
        &mut self,
        buf: &Typed<'_>,
        nb: usize,
        total: usize,
        root: usize,
    ) -> Result<()> {
        let mut off = 0;
        while off < total {
            let len = self.chunk.min(BCAST_CHUNK).min(total - off);
            let k = self.step();
            self.alloc(root, len);
            let p = self.data(root, 0);
            if self.me == root {
                self.claim(len)?;
                buf.pack(off, len, p);
                self.post(k);
                self.lend(len, k);
            } else {
                self.wait_posted(root, k)?;
                if off < nb {
                    buf.unpack(off, len.min(nb - off), p);
                }
            }
            self.finish_step(k);
            off += len;
        }
        Ok(())
    }

    /// The first step of every broadcast, through the root's next slot: the root writes its
    /// byte count beside the slot's flag, and the data too when it fits (`SMALL_MAX`: the whole
    /// broadcast is then this one step). Returns the root's count. The root reads the others'
    /// `done` only when it reuses a slot they may still be reading, which its last look at them
    /// does not cover; the others read the slot's line, which holds its flag, count and data.
    ///
    /// # Safety
    /// As [`Area::bcast`].
    #[inline]
    pub(super) unsafe fn bcast_small(
        &mut self,
        buf: &Typed<'_>,
        nb: usize,
        root: usize,
    ) -> Result<usize> {
        let k = self.step();
        let a = self.slot_cursor[root];
        self.slot_cursor[root] = (a + 1) % SLOTS;
        self.at[root] = a;
        self.small = true;
        let slot = self.bases[root].add(a * SLOT);
        // SAFETY: as in `flag`.
        let flag = AtomicU64::from_ptr(slot.cast());
        if self.me == root {
            let need = self.slot_free_after[a];
            if self.min_done < need {
                self.await_done(need)?;
            }
            if nb <= SMALL_MAX {
                buf.pack(0, nb, slot.add(HDR));
            }
            // The second word of the slot header: aligned, ours until the flag says k.
            slot.add(8).cast::<u64>().write(nb as u64);
            flag.store(k, Ordering::Release);
            self.slot_free_after[a] = k;
            self.finish_step(k);
            return Ok(nb);
        }
        self.wait(root, || flag.load(Ordering::Acquire) >= k)?;
        let sent = slot.add(8).cast::<u64>().read() as usize;
        if sent <= SMALL_MAX {
            buf.unpack(0, nb.min(sent), slot.add(HDR));
        }
        self.finish_step(k);
        if sent <= SMALL_MAX {
            truncated(nb, sent)?;
        }
        Ok(sent)
    }

    /// Broadcast between two members in one step, copied by both: the root publishes where
    /// its data is, the other where it wants it and a claim word; each then takes chunks by
    /// compare-and-swap on that word, the other reading them out of the root's memory, the root
    /// writing them into the other's (one core's copy does not saturate the memory system:
    /// two halves at once take about half the time). The other finishes the step only when
    /// the root has reported every chunk it took; the root returns when the other has finished.
    ///
    /// # Safety
    /// As [`Area::bcast`].
    unsafe fn bcast_cma(
        &mut self,
        buf: &Typed<'_>,
        nb: usize,
        total: usize,
        root: usize,
    ) -> Result<()> {
        let k = self.step();
        let other = 1 - self.me;
        // The claim and report words carry the step as the board's generation.
        let job = SplitJob::sized(k as u32, total);
        let gen = u64::from(k as u32) << 32;
        if self.me == root {
            let src = match buf.flat {
                Some(o) => buf.ptr.offset(o).cast_const(),
                None => {
                    let t = grow(&mut self.pack_buf, nb);
                    buf.pack(0, nb, t);
                    t.cast_const()
                }
            };
            self.seg
                .info(self.me, INFO_ADDR)
                .store(src as u64, Ordering::Relaxed);
            self.publish(k);
            let (ready, done) = (self.seg.ready(other), self.seg.done(other));
            let claim = self.seg.info(other, INFO_CLAIM);
            let helped = self.seg.info(self.me, INFO_HELPED);
            let mut count = 0;
            loop {
                // Help while the other's board for this step has chunks left.
                self.wait(other, || {
                    done.load(Ordering::Acquire) >= k || ready.load(Ordering::Acquire) >= k
                })?;
                if done.load(Ordering::Acquire) >= k {
                    return Ok(());
                }
                let Some(c) = take_chunk(claim, &job) else {
                    return self.wait(other, || done.load(Ordering::Acquire) >= k);
                };
                let (off, len) = job.span(c);
                let dst = self.info_of(other, INFO_DST) + off as u64;
                // SAFETY: bytes [off, off + len) of our packed data, which stay until the
                // other's `done`; the other reads or writes nothing of that range of its
                // buffer until we report the chunk.
                match unsafe { write_to(self.pids[other], dst, src.add(off), len) } {
                    Ok(()) => {
                        count += 1;
                        helped.store(gen | count, Ordering::Release);
                    }
                    Err(_) => {
                        // The other copies it itself (and we stop helping).
                        helped.store(gen | HELP_FAILED | u64::from(c), Ordering::Release);
                        return self.wait(other, || done.load(Ordering::Acquire) >= k);
                    }
                }
            }
        }
        // Straight into the user's buffer when it is contiguous and holds everything.
        let direct = buf.flat.filter(|_| nb >= total);
        let dst = match direct {
            Some(o) => buf.ptr.offset(o),
            None => grow(&mut self.recv_buf, total),
        };
        let claim = self.seg.info(self.me, INFO_CLAIM);
        self.seg
            .info(self.me, INFO_DST)
            .store(dst as u64, Ordering::Relaxed);
        claim.store(gen, Ordering::Relaxed);
        self.publish(k);
        let res = (|| {
            self.wait_ready(root, k)?;
            let src = self.info_of(root, INFO_ADDR);
            let read = |c: u32| {
                let (off, len) = job.span(c);
                // SAFETY: `dst` holds `total` bytes; the root keeps its data until our `done`.
                unsafe { self.copy_from(root, src + off as u64, dst.add(off), len) }
            };
            // After a failed copy, the chunks left are still taken (not copied), so that the
            // root takes no more: our buffer is ours again once it has reported its own.
            let (mut mine, mut failed) = (0, None);
            while let Some(c) = take_chunk(claim, &job) {
                mine += 1;
                if failed.is_none() {
                    failed = read(c).err();
                }
            }
            let theirs = u64::from(job.chunks() - mine);
            if theirs > 0 {
                let helped = self.seg.info(root, INFO_HELPED);
                let mut w = 0;
                self.wait(root, || {
                    w = helped.load(Ordering::Acquire);
                    w & !0xffff_ffff == gen && (w & HELP_FAILED != 0 || w & 0xffff_ffff == theirs)
                })?;
                if w & HELP_FAILED != 0 && failed.is_none() {
                    failed = read((w & 0xffff_ffff & !HELP_FAILED) as u32).err();
                }
            }
            failed.map_or(Ok(()), Err)
        })();
        if res.is_ok() && direct.is_none() {
            buf.unpack(0, nb.min(total), dst);
        }
        self.finish_step(k);
        res
    }

    /// Word `w` of member `j`'s info line (read after its `ready` for the step).
    pub(super) fn info_of(&self, j: usize, w: usize) -> u64 {
        self.seg.info(j, w).load(Ordering::Relaxed)
    }

    /// Copy the `nb` packed bytes at `addr` in member `j`'s memory into `to`.
    ///
    /// # Safety
    /// `to` holds its elements; member `j` keeps the bytes there until this member's `done`.
    pub(super) unsafe fn read_typed(
        &mut self,
        j: usize,
        addr: u64,
        to: &Typed<'_>,
        nb: usize,
    ) -> Result<()> {
        let dst = match to.flat {
            Some(o) => to.ptr.offset(o),
            None => grow(&mut self.recv_buf, nb),
        };
        self.copy_from(j, addr, dst, nb)?;
        if to.flat.is_none() {
            to.unpack(0, nb, dst);
        }
        Ok(())
    }

    /// Copy `len` bytes at `addr` in member `j`'s memory to `dst`.
    ///
    /// # Safety
    /// `dst` is valid for `len` bytes and nothing else touches them during the call.
    pub(super) unsafe fn copy_from(
        &self,
        j: usize,
        addr: u64,
        dst: *mut u8,
        len: usize,
    ) -> Result<()> {
        read_from(self.pids[j], addr, dst, len).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("collective: copying from the memory of rank {j}: {e}"),
            )
        })
    }

    /// Wait until every other member has finished step `k`.
    pub(super) fn wait_done_all(&self, k: u64) -> Result<()> {
        for j in (0..self.n).filter(|&j| j != self.me) {
            let d = self.seg.done(j);
            self.wait(j, || d.load(Ordering::Acquire) >= k)?;
        }
        Ok(())
    }
}

/// A member that expected `nb` bytes of a broadcast of `sent`: `MPI_ERR_TRUNCATE` when they
/// do not fit (it kept what did).
fn truncated(nb: usize, sent: usize) -> Result<()> {
    if sent > nb {
        return err(
            ErrorClass::Truncate,
            format!("bcast: {sent} bytes broadcast into a buffer of {nb} bytes"),
        );
    }
    Ok(())
}
