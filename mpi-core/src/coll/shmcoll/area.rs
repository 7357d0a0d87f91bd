//! A communicator's shared area as this member sees it (`Area`), and the typed views of user
//! buffers it reads and writes (`Typed`, `Regular`, `Out`): step numbering, the slot and cell
//! rings, posting, claiming, waiting and progress.
//!
//! This module owns the step protocol every collective relies on. It must never run a
//! collective itself, never reuse a slot or cell before every member's `done` allows it, and
//! never hold the engine lock while waiting.

use super::*;

// ------------------------------------------------------------------------------------ buffers

/// `count` elements of `dt` at `ptr`, read or written by ranges of their packed stream.
#[derive(Clone, Copy)]
pub(super) struct Typed<'a> {
    pub(super) ptr: *mut u8,
    pub(super) count: usize,
    pub(super) dt: &'a Datatype,
    /// Offset of the packed stream when the elements are one run of memory.
    pub(super) flat: Option<isize>,
}

impl<'a> Typed<'a> {
    pub(super) fn new(ptr: *const u8, count: usize, dt: &'a Datatype) -> Typed<'a> {
        Typed {
            ptr: ptr as *mut u8,
            count,
            dt,
            flat: dt.contiguous_span(count).map(|(o, _)| o),
        }
    }

    /// Copy bytes `[off, off + len)` of the packed stream to `dst`.
    ///
    /// # Safety
    /// The buffer holds its elements; `dst` is valid for `len` bytes and does not overlap them.
    pub(super) unsafe fn pack(&self, off: usize, len: usize, dst: *mut u8) {
        if len == 0 {
            return;
        }
        match self.flat {
            Some(o) => madmpi_transports::copy_bytes(self.ptr.offset(o).add(off), dst, len),
            None => {
                self.dt.pack(
                    self.ptr,
                    self.count,
                    off,
                    std::slice::from_raw_parts_mut(dst, len),
                );
            }
        }
    }

    /// Write bytes `[off, off + len)` of the packed stream from `src`.
    ///
    /// # Safety
    /// As [`Typed::pack`], the other way.
    pub(super) unsafe fn unpack(&self, off: usize, len: usize, src: *const u8) {
        if len == 0 {
            return;
        }
        match self.flat {
            Some(o) => madmpi_transports::copy_bytes(src, self.ptr.offset(o).add(off), len),
            None => {
                self.dt.unpack(
                    self.ptr,
                    self.count,
                    off,
                    std::slice::from_raw_parts(src, len),
                );
            }
        }
    }
}

/// Equal blocks of typed elements one after the other (the buffers of MPI_Alltoall).
#[derive(Clone, Copy)]
pub(super) struct Regular<'a> {
    /// Block 0, whose `ptr` moves by `stride` bytes per block.
    pub(super) first: &'a Typed<'a>,
    pub(super) stride: isize,
}

impl<'a> Regular<'a> {
    pub(super) fn at(&self, j: usize) -> Typed<'a> {
        Typed {
            ptr: self.first.ptr.wrapping_offset(j as isize * self.stride),
            ..*self.first
        }
    }
}

/// Where a reduction's packed result goes: the receive buffer itself when it is one run of
/// memory, else a scratch buffer unpacked at the end.
pub(super) struct Out<'a> {
    pub(super) to: Typed<'a>,
    pub(super) tmp: Option<AlignedBuf>,
    pub(super) p: *mut u8,
}

impl<'a> Out<'a> {
    pub(super) fn new(ptr: *mut u8, count: usize, dt: &'a Datatype) -> Out<'a> {
        let to = Typed::new(ptr, count, dt);
        match to.flat {
            Some(o) => Out {
                p: ptr.wrapping_offset(o),
                to,
                tmp: None,
            },
            None => {
                let mut t = AlignedBuf::new(count * dt.size());
                Out {
                    p: t.ptr(),
                    to,
                    tmp: Some(t),
                }
            }
        }
    }

    /// # Safety
    /// The receive buffer holds its elements.
    pub(super) unsafe fn finish(self) {
        if self.tmp.is_some() {
            self.to.unpack(0, self.to.count * self.to.dt.size(), self.p);
        }
    }
}

// ------------------------------------------------------------------------------------ area

/// A communicator's shared area, as this member sees it (see the module documentation).
pub(super) struct Area {
    pub(super) seg: CollSegment,
    pub(super) me: usize,
    pub(super) n: usize,
    /// Start of every member's data area, and this member's `ready` and `done` (all inside
    /// `seg`, so valid as long as it is): what every step uses, without the segment's
    /// bounds checks.
    pub(super) bases: Vec<*mut u8>,
    pub(super) ready_own: *const AtomicU64,
    pub(super) done_own: *const AtomicU64,
    /// World rank of every member (to notice a dead one).
    pub(super) world: Arc<[u32]>,
    /// Last step number used.
    pub(super) k: u64,
    /// Next free cell, next slot of every member's rings (the same on every member).
    pub(super) cursor: Vec<usize>,
    pub(super) slot_cursor: Vec<usize>,
    /// First cell (or the slot) of every member's data in the current step.
    pub(super) at: Vec<usize>,
    /// Whether the current step uses slots.
    pub(super) small: bool,
    /// Per cell and per slot of this member's rings: it may be rewritten once every other
    /// member's `done` has reached this step.
    pub(super) free_after: [u64; CELLS],
    pub(super) slot_free_after: [u64; SLOTS],
    /// Bytes of a cell, and the most bytes a member publishes in one step (half its area, so
    /// that consecutive chunks alternate).
    pub(super) cell: usize,
    pub(super) chunk: usize,
    /// Smallest `done` of the other members seen so far.
    pub(super) min_done: u64,
    /// Whether every member can copy from the others' memory (agreed at setup).
    pub(super) cma: bool,
    /// Every member's host has a CPU for each of its ranks (agreed with `cma`).
    pub(super) own_cpus: bool,
    /// Process id of every member (for cross-memory copies).
    pub(super) pids: Vec<i32>,
    /// A word the next member reads at setup to find out whether cross-memory copies work.
    pub(super) probe: Box<u64>,
    /// Outgoing data packed for cross-memory copies, incoming data to unpack.
    pub(super) pack_buf: Vec<u8>,
    pub(super) recv_buf: Vec<u8>,
    /// Scratch buffers of a chunk: a block being reduced (reduce, non-root members), this
    /// member's own block (packed, or copied away from an in-place output).
    pub(super) scratch: [Option<AlignedBuf>; 2],
}

// SAFETY: the scratch buffer and the segment's raw pointers (also those into it kept here)
// belong to this value; it is only used under its `AreaCell` flag.
unsafe impl Send for Area {}

impl Area {
    pub(super) fn new(seg: CollSegment, info: &Info) -> Area {
        let cell = (seg.data_bytes() - SLOTS * SLOT) / CELLS;
        Area {
            cell,
            chunk: cell * CELLS / 2,
            bases: (0..info.size).map(|j| seg.data(j).as_ptr()).collect(),
            ready_own: seg.ready(info.rank),
            done_own: seg.done(info.rank),
            seg,
            me: info.rank,
            n: info.size,
            world: info.world.clone(),
            k: 0,
            cursor: vec![0; info.size],
            slot_cursor: vec![0; info.size],
            at: vec![0; info.size],
            small: false,
            free_after: [0; CELLS],
            slot_free_after: [0; SLOTS],
            min_done: 0,
            scratch: [None, None],
            cma: false,
            own_cpus: false,
            pids: Vec::new(),
            probe: Box::new(PROBE),
            pack_buf: Vec::new(),
            recv_buf: Vec::new(),
        }
    }

    /// Learn the members' process ids, and agree (through the area: a barrier and an
    /// allreduce) on whether every member can copy from the next one's memory
    /// (`MADMPI_SHM_CMA=0` says no), and whether every member's host has a CPU for each of
    /// its ranks (where the paths of a collective depend on it, all members must choose alike).
    pub(super) fn agree_cma(&mut self) -> Result<()> {
        let me = self.me;
        self.seg
            .info(me, INFO_PID)
            .store(my_pid() as u64, Ordering::Relaxed);
        self.seg
            .info(me, INFO_PROBE)
            .store(&*self.probe as *const u64 as u64, Ordering::Relaxed);
        self.barrier()?;
        self.pids = (0..self.n)
            .map(|j| self.seg.info(j, INFO_PID).load(Ordering::Relaxed) as i32)
            .collect();
        let off = matches!(
            std::env::var("MADMPI_SHM_CMA").as_deref().map(str::trim),
            Ok("0" | "no" | "off")
        );
        // Bit 0: this member can read the next one's memory; bit 1: its host has a CPU for
        // each of its ranks. Every member gets the AND of all.
        let mut ok = if crate::api::cpus_shared() { 0 } else { 2 };
        if !off {
            let j = (me + 1) % self.n;
            let mut v = 0u64;
            // SAFETY: `v` is a local word; member j's probe lives as long as its area.
            let r = unsafe {
                read_from(
                    self.pids[j],
                    self.seg.info(j, INFO_PROBE).load(Ordering::Relaxed),
                    (&mut v as *mut u64).cast(),
                    8,
                )
            };
            ok |= i32::from(r.is_ok() && v == PROBE);
        }
        let int = Datatype::basic(Basic::Int);
        let band = Op::Builtin(BuiltinOp::Band);
        let red = Red {
            op: &band,
            dt: &int,
            esz: 4,
        };
        let mut all = 0i32;
        // SAFETY: one int in, one int out, both locals.
        unsafe {
            let input = Typed::new((&ok as *const i32).cast(), 1, &int);
            self.reduce(&input, (&mut all as *mut i32).cast(), 1, &red, None, false)?;
        }
        self.cma = all & 1 != 0;
        self.own_cpus = all & 2 != 0;
        Ok(())
    }

    /// The next step number.
    pub(super) fn step(&mut self) -> u64 {
        self.k += 1;
        self.k
    }

    /// Cells holding `len` bytes.
    pub(super) fn cells(&self, len: usize) -> usize {
        len.div_ceil(self.cell).max(1)
    }

    /// Place `len` bytes (at most a chunk) of data of member `j` for the current step (every
    /// member of a step publishes the same number of bytes, or only one member publishes).
    pub(super) fn alloc(&mut self, j: usize, len: usize) {
        self.small = len <= SMALL_MAX;
        if self.small {
            self.at[j] = self.slot_cursor[j];
            self.slot_cursor[j] = (self.at[j] + 1) % SLOTS;
            return;
        }
        let c = self.cells(len);
        debug_assert!(c <= CELLS / 2);
        let mut at = self.cursor[j];
        if at + c > CELLS {
            at = 0;
        }
        self.cursor[j] = at + c;
        self.at[j] = at;
    }

    /// Every member publishes `len` bytes in the current step.
    pub(super) fn alloc_all(&mut self, len: usize) {
        for j in 0..self.n {
            self.alloc(j, len);
        }
    }

    /// Where member `j`'s data of the current step starts (plus `off` bytes).
    pub(super) fn data(&self, j: usize, off: usize) -> *mut u8 {
        let at = if self.small {
            self.at[j] * SLOT + HDR
        } else {
            SLOTS * SLOT + self.at[j] * self.cell
        };
        self.bases[j].wrapping_add(at + off)
    }

    /// The flag of member `j`'s slot in the current (small) step: the step whose data it
    /// holds. Its own flag, or its `ready`, tells when member `j`'s data is in place.
    pub(super) fn flag(&self, j: usize) -> &AtomicU64 {
        if !self.small {
            return self.seg.ready(j);
        }
        let p = self.bases[j].wrapping_add(self.at[j] * SLOT);
        // SAFETY: the first word of a slot, inside member j's data area and aligned (slots are
        // 1024-byte multiples from a page); it is only ever accessed atomically (data starts
        // `HDR` bytes further), and the area lives as long as `self`.
        unsafe { AtomicU64::from_ptr(p.cast()) }
    }

    /// This member's data of the current step is in place for step `k`. For a small step the
    /// flag shares a cache line with the first data bytes, so readers pay one line transfer.
    pub(super) fn post(&self, k: u64) {
        self.flag(self.me).store(k, Ordering::Release);
    }

    /// Wait for member `j`'s data of the current step to be in place for step `k`.
    pub(super) fn wait_posted(&self, j: usize, k: u64) -> Result<()> {
        if j == self.me {
            return Ok(());
        }
        let f = self.flag(j);
        self.wait(j, || f.load(Ordering::Acquire) >= k)
    }

    /// Wait until this member may write `len` bytes at its current cells: every other member
    /// is done with the last steps that read them.
    pub(super) fn claim(&mut self, len: usize) -> Result<()> {
        let a = self.at[self.me];
        let need = if self.small {
            self.slot_free_after[a]
        } else {
            self.free_after[a..a + self.cells(len)]
                .iter()
                .copied()
                .max()
                .unwrap_or(0)
        };
        if self.min_done >= need {
            return Ok(());
        }
        self.await_done(need)
    }

    /// Wait until every other member's `done` has reached `need`, and note the smallest.
    ///
    /// A member that has to wait here runs a ring ahead of some other (a broadcast root
    /// faster than its readers, typically): it then waits until that one is at most half a
    /// ring behind, so as not to come back at every step (every look at a `done` takes the
    /// line from its writer, whose next store, and the locked instruction after it, then
    /// wait for the line to come back).
    #[cold]
    #[inline(never)]
    pub(super) fn await_done(&mut self, need: u64) -> Result<()> {
        let others = || (0..self.n).filter(|&j| j != self.me);
        let low = |a: &Area| {
            others()
                .map(|j| a.seg.done(j).load(Ordering::Acquire))
                .min()
                .unwrap_or(u64::MAX)
        };
        let mut seen = low(self);
        if seen < need {
            // The others can reach this member's own `done` (the last step with data before
            // the current one: barriers publish none) without it: it has published
            // everything before the current step.
            // SAFETY: points into `self.seg` (see `done_own`).
            let mine = unsafe { &*self.done_own }.load(Ordering::Relaxed);
            let want = need.max(mine.saturating_sub(SLOTS as u64 / 2));
            for j in others() {
                let d = self.seg.done(j);
                self.wait(j, || d.load(Ordering::Acquire) >= want)?;
            }
            seen = low(self);
        }
        self.min_done = seen;
        Ok(())
    }

    /// This member's current cells are read by other members up to step `k`.
    pub(super) fn lend(&mut self, len: usize, k: u64) {
        if self.small {
            self.slot_free_after[self.at[self.me]] = k;
            return;
        }
        let (a, c) = (self.at[self.me], self.cells(len));
        for f in &mut self.free_after[a..a + c] {
            *f = k;
        }
    }

    pub(super) fn publish(&self, k: u64) {
        // SAFETY: points into `self.seg` (see `ready_own`).
        unsafe { &*self.ready_own }.store(k, Ordering::Release);
    }

    pub(super) fn finish_step(&self, k: u64) {
        // SAFETY: points into `self.seg` (see `done_own`).
        unsafe { &*self.done_own }.store(k, Ordering::Release);
    }

    /// Wait for member `j`'s `ready` to reach `k`.
    pub(super) fn wait_ready(&self, j: usize, k: u64) -> Result<()> {
        if j == self.me {
            return Ok(());
        }
        let r = self.seg.ready(j);
        self.wait(j, || r.load(Ordering::Acquire) >= k)
    }

    /// Poll `cond`, which member `j` will make true, until it holds: spin briefly, then
    /// yield, driving the engine now and then.
    ///
    /// Spinning only helps if member `j` runs meanwhile on another CPU: when it was last seen
    /// on this process's CPU (each member notes its CPU in its info line when it starts
    /// waiting), the wait yields after `MIN_SPIN` polls, so that it can run.
    #[inline]
    pub(super) fn wait(&self, j: usize, cond: impl FnMut() -> bool) -> Result<()> {
        let mut cond = cond;
        if cond() {
            return Ok(());
        }
        self.wait_long(j, cond)
    }

    /// [`Area::wait`] once the first poll failed.
    #[inline(never)]
    pub(super) fn wait_long(&self, j: usize, mut cond: impl FnMut() -> bool) -> Result<()> {
        // SAFETY: no arguments; returns the CPU this thread runs on, or -1.
        let cpu = unsafe { libc::sched_getcpu() } as u64 + 1;
        let mine = self.seg.info(self.me, INFO_CPU);
        if mine.load(Ordering::Relaxed) != cpu {
            mine.store(cpu, Ordering::Relaxed);
        }
        let mut b = if self.seg.info(j, INFO_CPU).load(Ordering::Relaxed) == cpu {
            Backoff::with_spin(MIN_SPIN)
        } else {
            Backoff::new()
        };
        let mut i: u32 = 0;
        loop {
            // A member that died without a word (over shared memory) is found by looking.
            let yielded = b.snooze_watched()?;
            i = i.wrapping_add(1);
            if yielded || i.is_multiple_of(PROGRESS_EVERY) {
                self.progress()?;
            }
            if cond() {
                return Ok(());
            }
        }
    }

    /// One pass of the engine; fail if a member has died.
    pub(super) fn progress(&self) -> Result<()> {
        let world = &self.world;
        with(|e| {
            e.progress()?;
            if !e.st.lost.is_empty() {
                if let Some(r) = world.iter().find(|r| e.st.lost.contains(r)) {
                    return err(
                        ErrorClass::ProcAborted,
                        format!("rank {r} (world) has died during a collective"),
                    );
                }
            }
            Ok(())
        })
    }
}

/// A buffer of at least `len` bytes, grown as needed, kept from call to call.
pub(super) fn grow(v: &mut Vec<u8>, len: usize) -> *mut u8 {
    if v.len() < len {
        v.resize(len, 0);
    }
    v.as_mut_ptr()
}

/// The operation of a reduction.
pub(super) struct Red<'a> {
    pub(super) op: &'a Op,
    pub(super) dt: &'a Datatype,
    pub(super) esz: usize,
}
