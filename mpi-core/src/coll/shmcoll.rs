//! Blocking collectives through shared memory, for intracommunicators whose processes all
//! reach each other through the node's `shm` driver (MPI_Barrier, MPI_Bcast, MPI_Reduce,
//! MPI_Allreduce, MPI_Alltoall). Everything else — other hosts, TCP only, intercommunicators,
//! the non-blocking and persistent forms — goes through the point-to-point schedules.
//!
//! # The area of a communicator
//!
//! A communicator gets its own segment (`madmpi_transports::shmcoll`), created the first
//! time a blocking collective runs on it (MPI_COMM_WORLD), or the `AFTER + 1`-th time (others:
//! a communicator made for one or two collectives is not worth a segment). The setup is itself
//! collective, over point-to-point on the communicator's collective context: rank 0 creates
//! the segment and broadcasts its name, the others map it, an allreduce tells everyone whether
//! all succeeded, and rank 0 removes the name (the launcher also removes
//! `/dev/shm/madmpi-<job>*` after a crash). If anything fails — no memory, too many areas in
//! one process — every member learns it from the allreduce and the communicator stays on
//! point-to-point for good. Then, through the area itself, the members publish their process
//! ids and agree on whether they can copy from each other's memory (cross-memory attach). The
//! area goes when the communicator is freed ([`forget`]).
//!
//! A collective finds the area of its communicator through [`HOT`], a table indexed by
//! communicator id, without the engine lock, another lock or a reference count: the cells
//! holding areas are never freed (a forgotten area leaves its cell to the spares), and the
//! cell's owner is checked before and after taking its flag. Finding the area is all the
//! checking the communicator needs: one exists only for a valid intracommunicator.
//!
//! # Steps
//!
//! A collective is a sequence of numbered steps, the same on every member (from 1, one counter
//! per area). Each member has two counters in the segment, written by itself only and only ever
//! growing: `ready` (= k: it has arrived at barrier k, or its large data or buffer address for
//! step k is in place) and `done` (= k: it has finished step k, so it reads nothing of steps
//! ≤ k any more). A waiter's condition is always "counter ≥ k", so a member running ahead never
//! hides an earlier step, and back-to-back collectives need no reset: there is no slot reuse
//! race.
//!
//! Data goes through each member's data area: a ring of `SLOTS` slots of `SLOT` bytes for steps
//! of at most `SMALL_MAX` bytes, each slot starting with its own flag (the step whose data it
//! holds: data and flag share a cache line, so a reader pays one line transfer), then a ring of
//! `CELLS` cells for larger steps, which take the next ⌈b/cell⌉ cells (at most half the ring)
//! and signal with `ready`. Every member runs the same allocation for every writer, so readers
//! know where to look without being told. A writer reuses a slot or a cell only once every
//! other member's `done` has reached the last step that read it: a small broadcast root runs
//! up to 31 steps ahead (it reads the others' `done` only when it reaches a slot that its last
//! look does not cover, and when it has to wait, it waits until they are at most half a ring
//! behind), and large transfers go in chunks of half the ring, double buffered.
//! MPI_COMM_WORLD's ring of cells is `WORLD_CELLS` per member (within `WORLD_SEGMENT` in all),
//! the others' `SMALL_CELLS`.
//!
//! - barrier: everyone publishes `ready`, then waits for all the others (≤ `FLAT_MAX` members),
//!   or a fan-in tree of radix `RADIX` and a release counter from rank 0 (more).
//! - bcast: the root packs a chunk into its slot or cells and publishes; the others unpack
//!   it (chunks of at most `BCAST_CHUNK`, pipelined). Between two members, from
//!   `CMA_BCAST_MIN` bytes, when they can, the root publishes the address of its (packed)
//!   data instead and the other the address it wants it at; both then copy, chunk by chunk
//!   taken from a claim word: the other reads chunks out of the root's memory, the root
//!   writes the others into the other's (two copies at once take about half the time of
//!   one), and the other finishes the step once the root has reported its chunks.
//! - allreduce / reduce: everyone packs its contribution; small chunks are then combined by
//!   every member (or the root alone) in rank order, `c0 op (c1 op (… op cn-1))`, so any
//!   operation works and every member gets bit-identical results; chunks from `SPLIT_MIN`
//!   bytes are reduce-scattered (member i combines block i, reading its own part in place, and
//!   publishes the result over that part), then gathered.
//! - alltoall: everyone packs its outgoing blocks, then unpacks the blocks meant for it; from
//!   `CMA_ALLTOALL_MIN` bytes per block, when the members can, everyone publishes where its
//!   outgoing blocks are and copies its own straight from the others' memory, then waits for
//!   everyone's `done`.
//!
//! Waits spin briefly then yield, with the same budget as the engine's waits (a host running
//! more ranks than CPUs yields almost at once) — but yield at once when the member waited for
//! was last seen on this process's CPU, where spinning would only keep it from running — and
//! drive the engine's progress now and then, so point-to-point traffic (and non-blocking
//! collectives) pending meanwhile moves on; a member that dies fails the wait with
//! MPI_ERR_PROC_ABORTED.
//!
//! # What this module must never do
//!
//! Send point-to-point messages outside the setup, or hold the engine lock while waiting.

use std::cell::UnsafeCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use madmpi_datatypes::{Basic, Datatype};
use madmpi_transports::shm::{take_chunk, SplitJob};
use madmpi_transports::shmcoll::{my_pid, read_from, write_to, CollSegment};
use madmpi_transports::{PeerId, Transport};
use once_cell::sync::Lazy;
use parking_lot::Mutex;

use crate::api::{with, Backoff};
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::{apply_packed, AlignedBuf, BuiltinOp, Op};
use crate::{CommId, COMM_WORLD};

use super::sched::bytes;
use super::{algo, Data, Input, Ptr, When};

/// A member's data area is a ring of `SLOTS` slots of `SLOT` bytes for small steps, then a
/// ring of `CELLS` cells for the others.
const SLOTS: usize = 32;
const SLOT: usize = 1024;
const CELLS: usize = 32;
/// Bytes before the data of a slot: its flag (the step whose data it holds), then (a
/// broadcast's) the length of the data, so that data stays 16-byte aligned. Steps of at most `SMALL_MAX` bytes use a slot.
const HDR: usize = 16;
const SMALL_MAX: usize = SLOT - HDR;
/// Bytes of a member's ring of cells: MPI_COMM_WORLD gets `WORLD_CELLS` (large transfers then
/// go in few chunks, which matters most with more ranks than cores, where every step costs
/// context switches), down to `SMALL_CELLS` so that its segment stays within `WORLD_SEGMENT`;
/// other communicators get `SMALL_CELLS`.
const SMALL_CELLS: usize = 128 << 10;
const WORLD_CELLS: usize = 1 << 20;
const WORLD_SEGMENT: usize = 64 << 20;
/// Most bytes a member publishes in one step in the smallest areas.
const MIN_CHUNK: usize = SMALL_CELLS / 2;
/// Blocking collectives a communicator other than MPI_COMM_WORLD runs over point-to-point
/// before it gets an area.
const AFTER: u32 = 2;
/// Most areas one process keeps (each is about `members × SMALL_CELLS` bytes of memory, except
/// MPI_COMM_WORLD's).
const MAX_AREAS: usize = 64;
/// Largest group whose barrier is "everyone waits for everyone".
const FLAT_MAX: usize = 8;
/// Fan-in of the barrier tree of larger groups.
const RADIX: usize = 8;
/// Reduction chunks from this many bytes are reduce-scattered then gathered.
const SPLIT_MIN: usize = 8192;
/// From these sizes (bytes broadcast, bytes per alltoall block), processes copy straight out of
/// each other's memory when they can (cross-memory attach), instead of through their areas —
/// for bcast only between two members (several readers pinning the root's pages at once are
/// slower than a pipeline through the root's cells), where both copy. Measured for the bcast:
/// 32 KiB 2.9 -> 2.2 µs, 64 KiB 5.2 -> 2.7 µs, 256 KiB 21 -> 6.9 µs; at 16 KiB and below the
/// pipeline is as fast or faster (a cross-memory copy costs about a microsecond to start).
const CMA_BCAST_MIN: usize = 32 << 10;
/// The same when ranks take turns on CPUs (more ranks than CPUs on a host): the two copies
/// then rarely run at once, and through the cells is faster up to about 128 KiB (measured with
/// both on one CPU: 64 KiB 3.8 µs through the cells, 5.7 µs copied across; 256 KiB 15.8 and
/// 13.5 µs).
const CMA_BCAST_SHARED_MIN: usize = 256 << 10;
const CMA_ALLTOALL_MIN: usize = 8 << 10;
/// What a probe word holds.
const PROBE: u64 = 0x6d61_646d_7069_636d;
/// Words of the info lines.
const INFO_PID: usize = 0;
const INFO_PROBE: usize = 1;
const INFO_ADDR: usize = 2;
const INFO_STRIDE: usize = 3;
/// 1 + the CPU the member last ran on when it started waiting (0: unknown).
const INFO_CPU: usize = 4;
/// A two-member broadcast copied by both ([`Area::bcast_cma`]): where the non-root wants the
/// data, its claim word (`step << 32 | next chunk`), and the root's report (`step << 32 |`
/// chunks written, or `HELP_FAILED | chunk` for a chunk it could not write).
const INFO_DST: usize = 5;
const INFO_CLAIM: usize = 6;
const INFO_HELPED: usize = 7;
const HELP_FAILED: u64 = 1 << 31;
/// Largest bcast chunk (pipelining depth matters more than step count beyond this).
const BCAST_CHUNK: usize = 256 << 10;
/// While spinning, drive the engine once every this many polls.
const PROGRESS_EVERY: u32 = 64;
/// Polls before yielding when the member waited for shares this process's CPU.
const MIN_SPIN: u32 = 16;

enum Entry {
    /// Blocking collectives seen so far, before the area is made.
    Count(u32),
    Ready(&'static AreaCell),
    /// Not eligible, or the setup failed: point-to-point for good.
    Off,
}

/// Per communicator (engine id) of this process.
static AREAS: Lazy<Mutex<HashMap<u32, Entry>>> = Lazy::new(|| Mutex::new(HashMap::new()));
/// Numbers the segments this process creates.
static NAMES: AtomicU64 = AtomicU64::new(0);

/// The collectives this module runs, each with its own `MADMPI_COLL_<NAME>` setting.
#[derive(Clone, Copy)]
enum Coll {
    Barrier,
    Bcast,
    Reduce,
    Allreduce,
    Alltoall,
}

/// Names of the settings, in the order of [`Coll`].
const SETTINGS: [&str; 5] = ["BARRIER", "BCAST", "REDUCE", "ALLREDUCE", "ALLTOALL"];

/// The settings, read once (they cannot change after): bit `1 << c` set when collective `c`
/// may run here, `RESOLVED` once they were read and are all valid (until then, and for good if
/// one is invalid, every call reads them again, and reports the invalid one).
static WANTED: AtomicU8 = AtomicU8::new(0);
const RESOLVED: u8 = 0x80;

/// Whether the shared-memory algorithm may run for collective `c` (`MADMPI_COLL_<NAME>`
/// unset, `auto` or `shm`).
#[inline]
fn wanted(c: Coll) -> Result<bool> {
    let w = WANTED.load(Ordering::Relaxed);
    if w & RESOLVED != 0 {
        return Ok(w & 1 << c as u8 != 0);
    }
    wanted_first(c)
}

#[cold]
#[inline(never)]
fn wanted_first(c: Coll) -> Result<bool> {
    let mut w = RESOLVED;
    for (i, name) in SETTINGS.iter().enumerate() {
        if matches!(super::forced_any(name)?, None | Some("shm")) {
            w |= 1 << i;
        }
    }
    WANTED.store(w, Ordering::Relaxed);
    Ok(w & 1 << c as u8 != 0)
}

/// Forget the area of a communicator being destroyed: its mapping goes now, and its cell
/// becomes a spare. (If a thread is using the area at this very moment, which only an
/// erroneous program does — a collective on a communicator being freed — the cell is left to
/// it, and never reused.) Runs under the engine lock: it never waits for the area's user.
pub(crate) fn forget(c: CommId) {
    let Some(Entry::Ready(cell)) = AREAS.lock().remove(&c.0) else {
        return;
    };
    let _ = HOT[hot_slot(c)].compare_exchange(
        cell as *const AreaCell as *mut AreaCell,
        std::ptr::null_mut(),
        Ordering::AcqRel,
        Ordering::Relaxed,
    );
    if cell.busy.swap(true, Ordering::Acquire) {
        return;
    }
    cell.owner.store(NOBODY, Ordering::Relaxed);
    // SAFETY: `busy` is ours.
    let area = unsafe { (*cell.inner.get()).take() };
    cell.busy.store(false, Ordering::Release);
    drop(area);
    SPARE.lock().push(cell);
}

/// Cells of forgotten areas, to reuse.
static SPARE: Mutex<Vec<&'static AreaCell>> = parking_lot::const_mutex(Vec::new());

/// The cell of the area of communicator `c` is `HOT[hot_slot(c)]`, if any (a communicator
/// whose slot another one's area took finds its own through [`AREAS`], and takes the slot
/// back).
const HOT_SLOTS: usize = 64;
static HOT: [AtomicPtr<AreaCell>; HOT_SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; HOT_SLOTS];

fn hot_slot(c: CommId) -> usize {
    c.0 as usize % HOT_SLOTS
}

/// The area of `comm`, held by this thread until the guard goes, if it has (or now gets) one.
/// Collective (see [`area`]). An area is found without the engine lock, another lock or a
/// reference count change: the call costs no atomic read-modify-write but its cell's flag. An
/// area exists only for a valid intracommunicator (it goes with it), so finding one is all the
/// checking the communicator needs.
#[inline]
fn held(comm: CommId) -> Result<Option<Held>> {
    if crate::api::finalized() {
        return err(ErrorClass::Other, "MPI has already been finalized");
    }
    // SAFETY: cells are never freed.
    if let Some(cell) = unsafe { HOT[hot_slot(comm)].load(Ordering::Acquire).as_ref() } {
        if let Some(a) = cell.get(comm) {
            return Ok(Some(a));
        }
    }
    held_slow(comm)
}

/// [`held`] when the area is not in [`HOT`].
#[inline(never)]
fn held_slow(comm: CommId) -> Result<Option<Held>> {
    let Some(cell) = area(comm)? else {
        return Ok(None);
    };
    HOT[hot_slot(comm)].store(cell as *const AreaCell as *mut AreaCell, Ordering::Release);
    // None: forgotten meanwhile, the communicator was freed during the call (erroneous).
    Ok(cell.get(comm))
}

/// Run `f` on the area of `comm` (see [`held`]): `Ok(None)` if it has none.
fn with_area<T>(comm: CommId, f: impl FnOnce(&mut Area) -> Result<T>) -> Result<Option<T>> {
    match held(comm)? {
        Some(mut a) => f(&mut a).map(Some),
        None => Ok(None),
    }
}

/// The place of an area, and the flag that keeps two threads from using it at once (which
/// MPI forbids anyway: collectives on one communicator are ordered). Allocated once and never
/// freed (forgotten areas leave their cells to [`SPARE`]), so that a pointer to one found
/// without a lock is always valid memory; whether it holds the area wanted is checked before
/// taking the flag (a thread never waits for the flag of another communicator's area), and
/// again under it. Released with a plain store, so that no locked instruction waits behind
/// the last cross-core store of a collective.
struct AreaCell {
    busy: AtomicBool,
    /// The communicator whose area this is (`NOBODY`: none); changed under `busy`.
    owner: AtomicU32,
    /// The area (None when `owner` is `NOBODY`).
    inner: UnsafeCell<Option<Area>>,
}

const NOBODY: u32 = u32::MAX;

// SAFETY: the area is only reached under `busy`, which makes access exclusive.
unsafe impl Sync for AreaCell {}
// SAFETY: `Area` is `Send`.
unsafe impl Send for AreaCell {}

impl AreaCell {
    /// A cell holding `a`, the area of `comm` (a spare one if there is one).
    fn hold(comm: CommId, a: Area) -> &'static AreaCell {
        let spare = SPARE.lock().pop();
        match spare {
            Some(cell) => {
                cell.lock();
                // SAFETY: `busy` is ours.
                unsafe { *cell.inner.get() = Some(a) };
                cell.owner.store(comm.0, Ordering::Relaxed);
                cell.busy.store(false, Ordering::Release);
                cell
            }
            None => Box::leak(Box::new(AreaCell {
                busy: AtomicBool::new(false),
                owner: AtomicU32::new(comm.0),
                inner: UnsafeCell::new(Some(a)),
            })),
        }
    }

    fn lock(&self) {
        while self.busy.swap(true, Ordering::Acquire) {
            std::thread::yield_now();
        }
    }

    /// The area, held until the guard goes, if it is `comm`'s.
    #[inline]
    fn get(&'static self, comm: CommId) -> Option<Held> {
        if self.owner.load(Ordering::Relaxed) != comm.0 {
            return None;
        }
        self.lock();
        let held = Held(self);
        // Under the flag, `owner` (and so `inner`) cannot change.
        (self.owner.load(Ordering::Relaxed) == comm.0).then_some(held)
    }
}

/// An area whose cell's flag this thread holds (see [`AreaCell::get`]).
struct Held(&'static AreaCell);

impl Drop for Held {
    #[inline]
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

impl std::ops::Deref for Held {
    type Target = Area;
    #[inline]
    fn deref(&self) -> &Area {
        // SAFETY: the flag is held, and the area is there (`owner` checked by `get`).
        unsafe { (*self.0.inner.get()).as_ref().unwrap_unchecked() }
    }
}

impl std::ops::DerefMut for Held {
    #[inline]
    fn deref_mut(&mut self) -> &mut Area {
        // SAFETY: as in `deref`; the flag makes the reference exclusive.
        unsafe { (*self.0.inner.get()).as_mut().unwrap_unchecked() }
    }
}

/// What setting up an area needs to know about the communicator.
struct Info {
    rank: usize,
    size: usize,
    world: Arc<[u32]>,
    /// Name of the node segment: the prefix of ours, which the launcher cleans up.
    prefix: String,
}

/// The communicator's description if its processes (two or more) all share this process's
/// node segment.
fn eligible(comm: CommId) -> Result<Option<Info>> {
    with(|e| {
        let c = e.st.comm(comm)?;
        if c.remote.is_some()
            || c.size < 2
            || c.size as usize > madmpi_transports::shmcoll::MAX_MEMBERS
        {
            return Ok(None);
        }
        // The driver that maps the node's segment, if there is one.
        let Some((shm, prefix)) = e
            .drv
            .list
            .iter()
            .find_map(|d| d.segment_name().map(|n| (d, n)))
        else {
            return Ok(None);
        };
        let me = c.world[c.rank as usize];
        if !c.world.iter().all(|&w| w == me || shm.reaches(PeerId(w))) {
            return Ok(None);
        }
        Ok(Some(Info {
            rank: c.rank as usize,
            size: c.size as usize,
            world: c.world.clone(),
            prefix: prefix.to_owned(),
        }))
    })
}

/// The area of `comm`, if it has (or now gets) one. Collective: every member calls it at the
/// same collective, and all get the same answer.
fn area(comm: CommId) -> Result<Option<&'static AreaCell>> {
    let seen = {
        let mut s = AREAS.lock();
        match s.get_mut(&comm.0) {
            Some(Entry::Ready(a)) => return Ok(Some(*a)),
            Some(Entry::Off) => return Ok(None),
            Some(Entry::Count(c)) if *c < AFTER => {
                *c += 1;
                return Ok(None);
            }
            Some(Entry::Count(_)) => true,
            None => false,
        }
    };
    // Never hold AREAS while taking the engine lock: `forget` runs under the engine lock.
    let Some(info) = eligible(comm)? else {
        AREAS.lock().insert(comm.0, Entry::Off);
        return Ok(None);
    };
    if !seen && comm != COMM_WORLD && AFTER > 0 {
        AREAS.lock().insert(comm.0, Entry::Count(1));
        return Ok(None);
    }
    let made = setup(comm, &info)?;
    let mut s = AREAS.lock();
    match made {
        Some(a) => {
            let a = AreaCell::hold(comm, a);
            s.insert(comm.0, Entry::Ready(a));
            Ok(Some(a))
        }
        None => {
            s.insert(comm.0, Entry::Off);
            Ok(None)
        }
    }
}

fn live_areas() -> usize {
    AREAS
        .lock()
        .values()
        .filter(|s| matches!(s, Entry::Ready(_)))
        .count()
}

/// Create (rank 0) or map (the others) the communicator's segment; see the module
/// documentation. `None`: some member could not, and everyone stays on point-to-point.
fn setup(comm: CommId, info: &Info) -> Result<Option<Area>> {
    let cells = if comm == COMM_WORLD {
        let quantum = CELLS * 4096;
        ((WORLD_SEGMENT / info.size).clamp(SMALL_CELLS, WORLD_CELLS) / quantum) * quantum
    } else {
        SMALL_CELLS
    };
    let data = SLOTS * SLOT + cells;
    let mut msg = [0u64; 2];
    let mut seg = None;
    let name = |id: u64| format!("{}-c{}-{}", info.prefix, info.world[0], id);
    if info.rank == 0 && live_areas() < MAX_AREAS {
        let id = NAMES.fetch_add(1, Ordering::Relaxed);
        if let Ok(s) = CollSegment::create(&name(id), info.size, data) {
            seg = Some(s);
            msg = [1, id];
        }
    }
    let res = (|| -> Result<bool> {
        p2p_bcast(comm, &mut msg)?;
        if msg[0] != 1 {
            return Ok(false);
        }
        if info.rank != 0 && live_areas() < MAX_AREAS {
            seg = CollSegment::open(&name(msg[1]), info.size, data).ok();
        }
        let mut ok = i32::from(seg.is_some());
        p2p_allreduce_min(comm, &mut ok)?;
        Ok(ok == 1)
    })();
    if info.rank == 0 && msg[0] == 1 {
        // Everyone who could map it has: the name goes, whatever happened.
        let _ = CollSegment::unlink(&name(msg[1]));
    }
    match (res?, seg) {
        (true, Some(seg)) => {
            let mut a = Area::new(seg, info);
            a.agree_cma()?;
            Ok(Some(a))
        }
        _ => Ok(None),
    }
}

/// Broadcast two words from rank 0 over point-to-point.
fn p2p_bcast(comm: CommId, msg: &mut [u64; 2]) -> Result<()> {
    let p = Ptr(msg.as_mut_ptr().cast());
    let r = super::start(comm, When::Now, move |b, v| {
        algo::bcast_binomial(b, &v.team(), 0, p.get(), 16, &bytes());
        Ok(())
    })?;
    super::finish(r, "collective set-up (broadcast)")
}

/// Minimum of one `int` over the communicator, over point-to-point.
fn p2p_allreduce_min(comm: CommId, v: &mut i32) -> Result<()> {
    let mut out = 0i32;
    let (sp, rp) = (
        Ptr((v as *mut i32).cast()),
        Ptr((&mut out as *mut i32).cast()),
    );
    let r = super::start(comm, When::Now, move |b, view| {
        b.op = Some((Op::Builtin(BuiltinOp::Min), Datatype::basic(Basic::Int)));
        algo::allreduce_doubling(b, &view.team(), sp.get(), rp.get(), 1, 4);
        Ok(())
    })?;
    super::finish(r, "collective set-up (allreduce)")?;
    *v = out;
    Ok(())
}

// ------------------------------------------------------------------------------------ buffers

/// `count` elements of `dt` at `ptr`, read or written by ranges of their packed stream.
#[derive(Clone, Copy)]
struct Typed<'a> {
    ptr: *mut u8,
    count: usize,
    dt: &'a Datatype,
    /// Offset of the packed stream when the elements are one run of memory.
    flat: Option<isize>,
}

impl<'a> Typed<'a> {
    fn new(ptr: *const u8, count: usize, dt: &'a Datatype) -> Typed<'a> {
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
    unsafe fn pack(&self, off: usize, len: usize, dst: *mut u8) {
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
    unsafe fn unpack(&self, off: usize, len: usize, src: *const u8) {
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
struct Regular<'a> {
    /// Block 0, whose `ptr` moves by `stride` bytes per block.
    first: &'a Typed<'a>,
    stride: isize,
}

impl<'a> Regular<'a> {
    fn at(&self, j: usize) -> Typed<'a> {
        Typed {
            ptr: self.first.ptr.wrapping_offset(j as isize * self.stride),
            ..*self.first
        }
    }
}

/// Where a reduction's packed result goes: the receive buffer itself when it is one run of
/// memory, else a scratch buffer unpacked at the end.
struct Out<'a> {
    to: Typed<'a>,
    tmp: Option<AlignedBuf>,
    p: *mut u8,
}

impl<'a> Out<'a> {
    fn new(ptr: *mut u8, count: usize, dt: &'a Datatype) -> Out<'a> {
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
    unsafe fn finish(self) {
        if self.tmp.is_some() {
            self.to.unpack(0, self.to.count * self.to.dt.size(), self.p);
        }
    }
}

// ------------------------------------------------------------------------------------ area

/// A communicator's shared area, as this member sees it (see the module documentation).
struct Area {
    seg: CollSegment,
    me: usize,
    n: usize,
    /// Start of every member's data area, and this member's `ready` and `done` (all inside
    /// `seg`, so valid as long as it is): what every step uses, without the segment's
    /// bounds checks.
    bases: Vec<*mut u8>,
    ready_own: *const AtomicU64,
    done_own: *const AtomicU64,
    /// World rank of every member (to notice a dead one).
    world: Arc<[u32]>,
    /// Last step number used.
    k: u64,
    /// Next free cell, next slot of every member's rings (the same on every member).
    cursor: Vec<usize>,
    slot_cursor: Vec<usize>,
    /// First cell (or the slot) of every member's data in the current step.
    at: Vec<usize>,
    /// Whether the current step uses slots.
    small: bool,
    /// Per cell and per slot of this member's rings: it may be rewritten once every other
    /// member's `done` has reached this step.
    free_after: [u64; CELLS],
    slot_free_after: [u64; SLOTS],
    /// Bytes of a cell, and the most bytes a member publishes in one step (half its area, so
    /// that consecutive chunks alternate).
    cell: usize,
    chunk: usize,
    /// Smallest `done` of the other members seen so far.
    min_done: u64,
    /// Whether every member can copy from the others' memory (agreed at setup).
    cma: bool,
    /// Every member's host has a CPU for each of its ranks (agreed with `cma`).
    own_cpus: bool,
    /// Process id of every member (for cross-memory copies).
    pids: Vec<i32>,
    /// A word the next member reads at setup to find out whether cross-memory copies work.
    probe: Box<u64>,
    /// Outgoing data packed for cross-memory copies, incoming data to unpack.
    pack_buf: Vec<u8>,
    recv_buf: Vec<u8>,
    /// Scratch buffers of a chunk: a block being reduced (reduce, non-root members), this
    /// member's own block (packed, or copied away from an in-place output).
    scratch: [Option<AlignedBuf>; 2],
}

// SAFETY: the scratch buffer and the segment's raw pointers (also those into it kept here)
// belong to this value; it is only used under its `AreaCell` flag.
unsafe impl Send for Area {}

impl Area {
    fn new(seg: CollSegment, info: &Info) -> Area {
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
    fn agree_cma(&mut self) -> Result<()> {
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
    fn step(&mut self) -> u64 {
        self.k += 1;
        self.k
    }

    /// Cells holding `len` bytes.
    fn cells(&self, len: usize) -> usize {
        len.div_ceil(self.cell).max(1)
    }

    /// Place `len` bytes (at most a chunk) of data of member `j` for the current step (every
    /// member of a step publishes the same number of bytes, or only one member publishes).
    fn alloc(&mut self, j: usize, len: usize) {
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
    fn alloc_all(&mut self, len: usize) {
        for j in 0..self.n {
            self.alloc(j, len);
        }
    }

    /// Where member `j`'s data of the current step starts (plus `off` bytes).
    fn data(&self, j: usize, off: usize) -> *mut u8 {
        let at = if self.small {
            self.at[j] * SLOT + HDR
        } else {
            SLOTS * SLOT + self.at[j] * self.cell
        };
        self.bases[j].wrapping_add(at + off)
    }

    /// The flag of member `j`'s slot in the current (small) step: the step whose data it
    /// holds. Its own flag, or its `ready`, tells when member `j`'s data is in place.
    fn flag(&self, j: usize) -> &AtomicU64 {
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
    fn post(&self, k: u64) {
        self.flag(self.me).store(k, Ordering::Release);
    }

    /// Wait for member `j`'s data of the current step to be in place for step `k`.
    fn wait_posted(&self, j: usize, k: u64) -> Result<()> {
        if j == self.me {
            return Ok(());
        }
        let f = self.flag(j);
        self.wait(j, || f.load(Ordering::Acquire) >= k)
    }

    /// Wait until this member may write `len` bytes at its current cells: every other member
    /// is done with the last steps that read them.
    fn claim(&mut self, len: usize) -> Result<()> {
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
    fn await_done(&mut self, need: u64) -> Result<()> {
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
    fn lend(&mut self, len: usize, k: u64) {
        if self.small {
            self.slot_free_after[self.at[self.me]] = k;
            return;
        }
        let (a, c) = (self.at[self.me], self.cells(len));
        for f in &mut self.free_after[a..a + c] {
            *f = k;
        }
    }

    fn publish(&self, k: u64) {
        // SAFETY: points into `self.seg` (see `ready_own`).
        unsafe { &*self.ready_own }.store(k, Ordering::Release);
    }

    fn finish_step(&self, k: u64) {
        // SAFETY: points into `self.seg` (see `done_own`).
        unsafe { &*self.done_own }.store(k, Ordering::Release);
    }

    /// Wait for member `j`'s `ready` to reach `k`.
    fn wait_ready(&self, j: usize, k: u64) -> Result<()> {
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
    fn wait(&self, j: usize, cond: impl FnMut() -> bool) -> Result<()> {
        let mut cond = cond;
        if cond() {
            return Ok(());
        }
        self.wait_long(j, cond)
    }

    /// [`Area::wait`] once the first poll failed.
    #[inline(never)]
    fn wait_long(&self, j: usize, mut cond: impl FnMut() -> bool) -> Result<()> {
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
            b.snooze();
            i = i.wrapping_add(1);
            if b.yielding() || i.is_multiple_of(PROGRESS_EVERY) {
                self.progress()?;
            }
            if cond() {
                return Ok(());
            }
        }
    }

    /// One pass of the engine; fail if a member has died.
    fn progress(&self) -> Result<()> {
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

    // -------------------------------------------------------------------------- algorithms

    fn barrier(&mut self) -> Result<()> {
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
    unsafe fn bcast(&mut self, buf: &Typed<'_>, nb: usize, root: usize) -> Result<()> {
        if nb <= SMALL_MAX {
            if nb > 0 {
                self.bcast_small(buf, nb, root)?;
            }
            return Ok(());
        }
        let cma_min = if self.own_cpus {
            CMA_BCAST_MIN
        } else {
            CMA_BCAST_SHARED_MIN
        };
        if self.cma && self.n == 2 && nb >= cma_min {
            return self.bcast_cma(buf, nb, root);
        }
        let mut off = 0;
        while off < nb {
            let len = self.chunk.min(BCAST_CHUNK).min(nb - off);
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
                buf.unpack(off, len, p);
            }
            self.finish_step(k);
            off += len;
        }
        Ok(())
    }

    /// Broadcast of 1 to `SMALL_MAX` bytes: one step, through the root's next slot (what
    /// [`Area::bcast`]'s loop does for one chunk, without the general case's branches). The
    /// root reads the others' `done` only when it reuses a slot they may still be reading,
    /// which its last look at them does not cover; the others read the slot's line, which
    /// holds its flag and data.
    ///
    /// # Safety
    /// As [`Area::bcast`].
    #[inline]
    unsafe fn bcast_small(&mut self, buf: &Typed<'_>, nb: usize, root: usize) -> Result<()> {
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
            buf.pack(0, nb, slot.add(HDR));
            // The length beside the flag: a member whose count differs (an erroneous
            // program) learns it, and takes what fits instead of reading the slot blind.
            // (The second word of the slot header: aligned, ours until the flag says k.)
            slot.add(8).cast::<u64>().write(nb as u64);
            flag.store(k, Ordering::Release);
            self.slot_free_after[a] = k;
        } else {
            self.wait(root, || flag.load(Ordering::Acquire) >= k)?;
            let sent = slot.add(8).cast::<u64>().read() as usize;
            buf.unpack(0, nb.min(sent), slot.add(HDR));
            if sent > nb {
                self.finish_step(k);
                return err(
                    ErrorClass::Truncate,
                    format!("bcast: {sent} bytes broadcast into a buffer of {nb} bytes"),
                );
            }
        }
        self.finish_step(k);
        Ok(())
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
    unsafe fn bcast_cma(&mut self, buf: &Typed<'_>, nb: usize, root: usize) -> Result<()> {
        let k = self.step();
        let other = 1 - self.me;
        // The claim and report words carry the step as the board's generation.
        let job = SplitJob::sized(k as u32, nb);
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
        let dst = match buf.flat {
            Some(o) => buf.ptr.offset(o),
            None => grow(&mut self.recv_buf, nb),
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
                // SAFETY: `dst` holds `nb` bytes; the root keeps its data until our `done`.
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
        if res.is_ok() && buf.flat.is_none() {
            buf.unpack(0, nb, dst);
        }
        self.finish_step(k);
        res
    }

    /// Word `w` of member `j`'s info line (read after its `ready` for the step).
    fn info_of(&self, j: usize, w: usize) -> u64 {
        self.seg.info(j, w).load(Ordering::Relaxed)
    }

    /// Copy the `nb` packed bytes at `addr` in member `j`'s memory into `to`.
    ///
    /// # Safety
    /// `to` holds its elements; member `j` keeps the bytes there until this member's `done`.
    unsafe fn read_typed(&mut self, j: usize, addr: u64, to: &Typed<'_>, nb: usize) -> Result<()> {
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
    unsafe fn copy_from(&self, j: usize, addr: u64, dst: *mut u8, len: usize) -> Result<()> {
        read_from(self.pids[j], addr, dst, len).map_err(|e| {
            Error::new(
                ErrorClass::Other,
                format!("collective: copying from the memory of rank {j}: {e}"),
            )
        })
    }

    /// Wait until every other member has finished step `k`.
    fn wait_done_all(&self, k: u64) -> Result<()> {
        for j in (0..self.n).filter(|&j| j != self.me) {
            let d = self.seg.done(j);
            self.wait(j, || d.load(Ordering::Acquire) >= k)?;
        }
        Ok(())
    }

    /// `dst = c0 op (c1 op (… op cn-1))` over elements `[first, first + cnt)` of the current
    /// step's contributions (published at step `k`); this member's own elements come from
    /// `own` if given, else from its data area.
    ///
    /// # Safety
    /// `dst` is valid for the block and overlaps neither a data area nor `own`.
    unsafe fn fold(
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
    fn scratch(&mut self, which: usize) -> *mut u8 {
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
    unsafe fn reduce(
        &mut self,
        input: &Typed<'_>,
        out: *mut u8,
        count: usize,
        r: &Red<'_>,
        root: Option<usize>,
        in_place: bool,
    ) -> Result<()> {
        let (me, n, esz) = (self.me, self.n, r.esz);
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

    /// MPI_Alltoall of `b` bytes per block: block `j` of `send` to member `j`, block `j` of
    /// `recv` from member `j`. `send` None: in place (the blocks to send are in `recv`).
    ///
    /// # Safety
    /// Both sides hold `n` blocks.
    unsafe fn alltoall(
        &mut self,
        send: Option<Regular<'_>>,
        recv: Regular<'_>,
        b: usize,
    ) -> Result<()> {
        let (me, n) = (self.me, self.n);
        let src = send.unwrap_or(recv);
        if let Some(s) = send {
            let (sp, rp) = (s.at(me), recv.at(me));
            super::sched::copy_typed(sp.ptr, sp.count, sp.dt, rp.ptr, rp.count, rp.dt)?;
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
    unsafe fn alltoall_cma(
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

/// A buffer of at least `len` bytes, grown as needed, kept from call to call.
fn grow(v: &mut Vec<u8>, len: usize) -> *mut u8 {
    if v.len() < len {
        v.resize(len, 0);
    }
    v.as_mut_ptr()
}

/// The operation of a reduction.
struct Red<'a> {
    op: &'a Op,
    dt: &'a Datatype,
    esz: usize,
}

// ------------------------------------------------------------------------------------ entries

/// MPI_Barrier through shared memory: `Ok(false)` if this communicator does not use it.
pub(crate) fn barrier(comm: CommId) -> Result<bool> {
    if !wanted(Coll::Barrier)? {
        return Ok(false);
    }
    let Some(mut a) = held(comm)? else {
        return Ok(false);
    };
    a.barrier()?;
    Ok(true)
}

#[inline]
fn check_root(root: i32, n: usize) -> Result<usize> {
    if root < 0 || root as usize >= n {
        return bad_root(root);
    }
    Ok(root as usize)
}

#[cold]
fn bad_root(root: i32) -> Result<usize> {
    err(ErrorClass::Root, format!("invalid root {root}"))
}

/// MPI_Bcast through shared memory of `count` elements of `dt` at `ptr`.
///
/// # Safety
/// The buffer holds its elements until the call returns.
pub(crate) unsafe fn bcast(
    ptr: *mut u8,
    count: usize,
    dt: &Datatype,
    root: i32,
    comm: CommId,
) -> Result<bool> {
    if !wanted(Coll::Bcast)? {
        return Ok(false);
    }
    let Some(mut a) = held(comm)? else {
        return Ok(false);
    };
    let root = check_root(root, a.n)?;
    a.bcast(&Typed::new(ptr, count, dt), count * dt.size(), root)?;
    Ok(true)
}

/// MPI_Reduce (`root` Some) or MPI_Allreduce through shared memory.
///
/// # Safety
/// The buffers hold `count` elements of `dt` (`recv` where significant).
#[allow(clippy::too_many_arguments)]
pub(crate) unsafe fn reduce(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    root: Option<i32>,
    comm: CommId,
) -> Result<bool> {
    if !wanted(if root.is_some() {
        Coll::Reduce
    } else {
        Coll::Allreduce
    })? {
        return Ok(false);
    }
    super::reduce::reduce_checks(op, dt)?;
    let esz = dt.size();
    if esz > MIN_CHUNK {
        return Ok(false);
    }
    let done = with_area(comm, |a| {
        let root = root.map(|r| check_root(r, a.n)).transpose()?;
        let gets = root.is_none_or(|r| r == a.me);
        let input = match send {
            Input::Buf(p) => Typed::new(p, count, dt),
            Input::InPlace if gets => Typed::new(recv, count, dt),
            Input::InPlace => return err(ErrorClass::Buffer, "MPI_IN_PLACE is for the root only"),
        };
        if count == 0 || esz == 0 {
            return Ok(());
        }
        let red = Red { op, dt, esz };
        if gets {
            let out = Out::new(recv, count, dt);
            let in_place = matches!(send, Input::InPlace);
            a.reduce(&input, out.p, count, &red, root, in_place)?;
            out.finish();
        } else {
            a.reduce(&input, std::ptr::null_mut(), count, &red, root, false)?;
        }
        Ok(())
    })?;
    Ok(done.is_some())
}

/// MPI_Alltoall of a member whose blocks to send (`sb` bytes) and to receive differ in size:
/// an erroneous program, most often one rank's receive count too small. The member still
/// runs the steps, with the size it sends (the size the others receive, when only its
/// receive count is wrong): leaving them out would put every later collective's steps out of
/// line with the others' (a wrong answer, or a hang, at the next MPI_Allreduce). It receives
/// into a scratch buffer, keeps what fits and reports MPI_ERR_TRUNCATE when blocks were cut.
///
/// # Safety
/// As [`alltoall`]; `send` is Some.
#[cold]
unsafe fn alltoall_mismatched(
    send: Option<&Data>,
    recv: &Data,
    comm: CommId,
    sb: usize,
) -> Result<bool> {
    let b = recv.count * recv.dt.size();
    let done = with_area(comm, |a| {
        let n = a.n;
        let mut scratch = AlignedBuf::new(sb * n);
        let bt = bytes();
        let tt = Typed::new(scratch.ptr(), sb, &bt);
        let tr = Regular {
            first: &tt,
            stride: sb as isize,
        };
        let st = send.map(|s| Typed::new(s.ptr, s.count, &s.dt));
        let sr = send.zip(st.as_ref()).map(|(s, t)| Regular {
            first: t,
            stride: s.count as isize * s.dt.extent(),
        });
        a.alltoall(sr, tr, sb)?;
        let rt = Typed::new(recv.ptr, recv.count, &recv.dt);
        let rr = Regular {
            first: &rt,
            stride: recv.count as isize * recv.dt.extent(),
        };
        for j in 0..n {
            rr.at(j).unpack(0, sb.min(b), tt.ptr.add(j * sb));
        }
        Ok(())
    })?;
    if done.is_none() {
        return Ok(false);
    }
    if sb > b {
        return err(
            ErrorClass::Truncate,
            format!("alltoall: blocks of {sb} bytes received into {b} bytes"),
        );
    }
    Ok(true)
}

/// MPI_Alltoall through shared memory (`send` None: MPI_IN_PLACE).
///
/// # Safety
/// The buffers hold one block per process.
pub(crate) unsafe fn alltoall(send: Option<&Data>, recv: &Data, comm: CommId) -> Result<bool> {
    if !wanted(Coll::Alltoall)? {
        return Ok(false);
    }
    let b = recv.count * recv.dt.size();
    let sb = send.map_or(b, |s| s.count * s.dt.size());
    if sb != b {
        return alltoall_mismatched(send, recv, comm, sb);
    }
    let done = with_area(comm, |a| {
        let rt = Typed::new(recv.ptr, recv.count, &recv.dt);
        let rr = Regular {
            first: &rt,
            stride: recv.count as isize * recv.dt.extent(),
        };
        let st = send.map(|s| Typed::new(s.ptr, s.count, &s.dt));
        let sr = send.zip(st.as_ref()).map(|(s, t)| Regular {
            first: t,
            stride: s.count as isize * s.dt.extent(),
        });
        a.alltoall(sr, rr, b)
    })?;
    Ok(done.is_some())
}
