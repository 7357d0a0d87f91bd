//! Blocking collectives through shared memory, for intracommunicators whose processes all
//! reach each other through the node's `shm` driver (MPI_Barrier, MPI_Bcast, MPI_Reduce,
//! MPI_Allreduce, MPI_Alltoall). Everything else — other hosts, TCP only, intercommunicators,
//! the non-blocking and persistent forms — goes through the point-to-point schedules; the
//! large non-blocking allreduce's (`coll/cma.rs`) borrows an area's process ids and claim
//! words ([`nb_cma`]), never its steps.
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
//! - bcast: the first step goes through the root's slot and carries the root's byte count,
//!   and the data when it fits (`SMALL_MAX`); every member follows the path that count gives,
//!   so members whose counts differ (an erroneous program) take the same steps and report
//!   MPI_ERR_TRUNCATE rather than hang. Larger data: the root packs a chunk into its cells
//!   and publishes; the others unpack it (chunks of at most `BCAST_CHUNK`, pipelined). Between two members, from
//!   `CMA_BCAST_MIN` bytes, when they can, the root publishes the address of its (packed)
//!   data instead and the other the address it wants it at; both then copy, chunk by chunk
//!   taken from a claim word: the other reads chunks out of the root's memory, the root
//!   writes the others into the other's (two copies at once take about half the time of
//!   one), and the other finishes the step once the root has reported its chunks.
//! - allreduce / reduce: everyone packs its contribution; small chunks are then combined by
//!   every member (or the root alone) in rank order, `c0 op (c1 op (… op cn-1))`, so any
//!   operation works and every member gets bit-identical results; chunks from `SPLIT_MIN`
//!   bytes are reduce-scattered (member i combines block i, reading its own part in place, and
//!   publishes the result over that part), then gathered. From `CMA_REDUCE_MIN` bytes, when
//!   the members can, they take pieces of the vector from a claim word, read each out of the
//!   others' contributions, combine it and write it straight into the result buffers
//!   (`reduce_cma.rs`).
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

mod alltoall;
mod area;
mod bcast;
mod life;
mod reduce;
mod reduce_cma;

use area::*;
use life::*;

pub(crate) use life::forget;

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
/// From this many bytes, reduce and allreduce go by cross-memory attach when the members can
/// (`reduce_cma.rs`): two waits whatever the size and one copy per byte on each side, where
/// the cells take two waits per half ring and three copies.
const CMA_REDUCE_MIN: usize = 64 << 10;
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
// ------------------------------------------------------------------------------------ entries

/// Whether `comm` is an intracommunicator of two or more processes that all share this
/// process's node segment (the same answer on every member): those whose non-blocking
/// allreduce may go by cross-memory attach (`coll/cma.rs`). Takes the engine lock.
pub(crate) fn one_node(comm: CommId) -> Result<bool> {
    Ok(eligible(comm)?.is_some())
}

/// What a non-blocking allreduce by cross-memory attach needs of a communicator's area.
#[derive(Clone)]
pub(crate) struct NbCma {
    /// Every member's process id.
    pub(crate) pids: Arc<[i32]>,
    /// The first of `NB_SLOTS` claim words (member 0's info words from `INFO_NB_CLAIMS`).
    claims: *const AtomicU64,
}

// SAFETY: `claims` points into the area's shared mapping, used through atomics only; the
// mapping lives as long as the area, which lives as long as its communicator.
unsafe impl Send for NbCma {}
// SAFETY: as for Send.
unsafe impl Sync for NbCma {}

/// Claim words for the non-blocking allreduces by cross-memory attach: the `s`-th of the
/// communicator's such collectives uses word `s % NB_SLOTS`.
pub(crate) const NB_SLOTS: usize = 8;
const INFO_NB_CLAIMS: usize = 8;
const _: () = assert!(INFO_NB_CLAIMS + NB_SLOTS <= madmpi_transports::shmcoll::INFO_WORDS);

impl NbCma {
    /// Claim word `s` (< `NB_SLOTS`).
    ///
    /// # Safety
    /// The communicator (so its area) still exists: a collective on it is in progress.
    pub(crate) unsafe fn claim(&self, s: usize) -> &AtomicU64 {
        debug_assert!(s < NB_SLOTS);
        &*self.claims.add(s)
    }
}

/// The sequence number of this non-blocking allreduce by cross-memory attach on `comm` (each
/// call counts one), and what it needs of `comm`'s area if it has one whose members agreed on
/// cross-memory attach (this member's view: another may not have made the area yet). Makes
/// no area and takes no area's flag; may run under the engine lock.
pub(crate) fn nb_cma(comm: CommId) -> (u32, Option<NbCma>) {
    let seq = {
        let mut m = NB_SEQ.lock();
        let s = m.entry(comm.0).or_insert(0);
        *s = s.wrapping_add(1);
        *s
    };
    (seq, CMA_PEERS.lock().get(&comm.0).cloned())
}

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
