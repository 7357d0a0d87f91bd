//! Collective operations over point-to-point, on each communicator's collective context
//! (`ctx + 1`), so they never match user messages.
//!
//! Each collective is compiled into a schedule (`sched`): rounds of point-to-point steps and
//! local steps, advanced by the progress engine, so the non-blocking form (MPI_Ibcast, …) is
//! the natural one and the blocking form is "start, then wait". Every collective on a
//! communicator takes the next value of the communicator's sequence number as its tag, so
//! several collectives can be in flight on one communicator (in the same order everywhere, as
//! MPI requires) without their messages mixing. A persistent collective (MPI_Bcast_init …)
//! takes its tag when it is initialized and rebuilds its schedule at every MPI_Start.
//!
//! # Algorithms
//!
//! Chosen from values every process agrees on (message size of the type signature, number of
//! processes, commutativity), so all ranks pick the same one:
//!
//! | collective | algorithms (`MADMPI_COLL_<NAME>` value) | default choice |
//! |---|---|---|
//! | barrier | `dissemination` | always |
//! | bcast | `binomial`, `scatter_allgather` (van de Geijn: binomial scatter + ring allgather) | scatter_allgather from 12 KiB on 8 processes or more |
//! | reduce | `binomial`, `rabenseifner` (reduce-scatter by recursive halving + gather) | rabenseifner from 2 KiB, commutative op, count ≥ 2^⌊log2 n⌋ |
//! | allreduce | `recursive_doubling`, `rabenseifner` (reduce-scatter + allgather), `linear` (the same in two rounds), `reduce_bcast` | from 2 KiB with a commutative op: linear on 4 processes below 1 MiB, else rabenseifner (count ≥ 2^⌊log2 n⌋) |
//! | gather | `binomial`, `linear` | linear from 4 KiB per process |
//! | scatter | `binomial`, `linear` | linear from 4 KiB per process |
//! | allgather | `bruck`, `ring` | ring from 80 KiB in total |
//! | alltoall (and v, w) | `linear` (all at once), `pairwise` | pairwise from 32 KiB per block (alltoall) |
//! | reduce_scatter (and block) | `pairwise`, `allreduce` (recursive doubling, then keep one block) | pairwise from 64 KiB, commutative op |
//! | scan, exscan | recursive doubling | always |
//! | gatherv, scatterv, allgatherv | linear, linear, ring | always |
//!
//! The blocking barrier, bcast, reduce, allreduce and alltoall of a communicator on one node go
//! through shared memory instead (`shmcoll`; `MADMPI_COLL_<NAME>=shm`, the default there).
//!
//! A forced algorithm that cannot run (e.g. `rabenseifner` with a non-commutative operation)
//! falls back to the default. Non-commutative operations are always combined in rank order.
//! Intercommunicators: barrier, bcast, gather(v), scatter(v), allgather(v), alltoall(v, w),
//! reduce, allreduce and reduce_scatter(_block) are supported (local reduction or gather to a
//! leader, exchange between the leaders, local broadcast or scatter); scan and exscan are not
//! defined there (MPI_ERR_COMM).

pub(crate) mod algo;
mod all;
mod cma;
mod direct;
mod inter;
mod reduce;
mod rooted;
pub(crate) mod sched;
pub(crate) mod shmcoll;

pub use all::{
    allgather, allgather_init, allgatherv, allgatherv_init, alltoall, alltoall_init, alltoallw,
    alltoallw_init, iallgather, iallgatherv, ialltoall, ialltoallw, ineighbor_alltoallw,
    neighbor_alltoallw, neighbor_alltoallw_init, neighbor_counts,
};
pub use reduce::{
    allreduce, allreduce_init, iallreduce, ireduce, ireduce_scatter, iscan, reduce, reduce_init,
    reduce_local, reduce_scatter, reduce_scatter_init, scan, scan_init,
};
pub use rooted::{
    bcast, bcast_init, gather, gather_init, gatherv, gatherv_init, ibcast, igather, igatherv,
    iscatter, iscatterv, scatter, scatter_init, scatterv, scatterv_init,
};

use madmpi_datatypes::Datatype;
use once_cell::sync::Lazy;

use crate::api::{wait, with};
use crate::engine::{Schedule, State};
use crate::error::{err, Error, ErrorClass, Result};
use crate::request::{MakeSched, Persistent, RequestId};
use crate::{CommId, PROC_NULL};

use algo::Blk;
use sched::{Team, B};

/// MPI_ROOT.
pub const ROOT: i32 = -4;

/// Take the completion of an internal step if it is done: `Ok(None)` while pending, the step's
/// error if it failed.
pub(crate) fn step_done(st: &mut State, id: RequestId) -> Result<Option<crate::Status>> {
    let Some(r) = st.reqs.get(id) else {
        return Err(Error::new(
            crate::ErrorClass::Intern,
            "collective step vanished",
        ));
    };
    if !r.complete {
        return Ok(None);
    }
    let status = r.status;
    st.reqs.free(id);
    if let Some(class) = status.error {
        return Err(Error::new(
            class,
            match class {
                ErrorClass::Truncate => {
                    "a message of the collective was longer than its buffer (counts or types \
                     differ between processes)"
                }
                _ => "a point-to-point step of the collective failed",
            },
        ));
    }
    Ok(Some(status))
}

// ------------------------------------------------------------------------------------ arguments

/// A buffer argument: `count` elements of `dt` at `ptr`.
#[derive(Clone, Debug)]
pub struct Data {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Elements.
    pub count: usize,
    /// Their type.
    pub dt: Datatype,
}

/// The input of a reduction: a buffer, or MPI_IN_PLACE (the input is in the receive buffer).
#[derive(Clone, Copy, Debug)]
pub enum Input {
    /// A send buffer.
    Buf(*const u8),
    /// MPI_IN_PLACE.
    InPlace,
}

// SAFETY: `Data` and `Blocks` hold pointers to user buffers that the MPI rule (stated on
// `request`) keeps valid until the operation completes; they are only dereferenced by
// schedules, under the engine lock.
unsafe impl Send for Data {}
// SAFETY: as above.
unsafe impl Sync for Data {}
// SAFETY: as above.
unsafe impl Send for Blocks {}
// SAFETY: as above.
unsafe impl Sync for Blocks {}
// SAFETY: as above.
unsafe impl Send for Input {}
// SAFETY: as above.
unsafe impl Sync for Input {}

impl Data {
    /// `count` elements of `dt` at `ptr`.
    pub fn new(ptr: *const u8, count: usize, dt: &Datatype) -> Data {
        Data {
            ptr: ptr as *mut u8,
            count,
            dt: dt.clone(),
        }
    }

    fn bytes(&self) -> usize {
        self.count * self.dt.size()
    }

    /// Block `i` of a buffer of equal blocks (gather/scatter/allgather/alltoall buffers).
    fn block(&self, i: i32) -> Blk {
        let off = i as isize * self.count as isize * self.dt.extent();
        (self.ptr.wrapping_offset(off), self.count, self.dt.clone())
    }
}

/// Per-process blocks of the v and w collectives: block `i` is `counts[i]` elements of
/// `dts[i]` at `ptr + displs[i]` bytes.
#[derive(Clone, Debug)]
pub struct Blocks {
    /// Start of the buffer.
    pub ptr: *mut u8,
    /// Elements per block.
    pub counts: Vec<usize>,
    /// Byte displacement of each block.
    pub displs: Vec<isize>,
    /// Type of each block.
    pub dts: Vec<Datatype>,
}

impl Blocks {
    /// The v form: displacements in extents of `dt`.
    pub fn v(ptr: *const u8, counts: Vec<usize>, displs: &[isize], dt: &Datatype) -> Blocks {
        let ext = dt.extent();
        Blocks {
            ptr: ptr as *mut u8,
            displs: displs.iter().map(|d| d * ext).collect(),
            dts: vec![dt.clone(); counts.len()],
            counts,
        }
    }

    /// The w form: byte displacements and a type per block.
    pub fn w(ptr: *const u8, counts: Vec<usize>, displs: Vec<isize>, dts: Vec<Datatype>) -> Blocks {
        Blocks {
            ptr: ptr as *mut u8,
            counts,
            displs,
            dts,
        }
    }

    /// Equal blocks one after the other (the plain collectives as v collectives).
    fn regular(d: &Data, n: usize) -> Blocks {
        let ext = d.count as isize * d.dt.extent();
        Blocks {
            ptr: d.ptr,
            counts: vec![d.count; n],
            displs: (0..n as isize).map(|i| i * ext).collect(),
            dts: vec![d.dt.clone(); n],
        }
    }

    fn block(&self, i: i32) -> Blk {
        let i = i as usize;
        (
            self.ptr.wrapping_offset(self.displs[i]),
            self.counts[i],
            self.dts[i].clone(),
        )
    }

    fn check(&self, n: usize, what: &str) -> Result<()> {
        if self.counts.len() < n || self.displs.len() < n || self.dts.len() < n {
            return err(
                ErrorClass::Arg,
                format!("{what}: {n} counts, displacements and types are needed"),
            );
        }
        Ok(())
    }
}

/// The engine's view of a communicator for building a collective.
pub(crate) struct View {
    pub id: CommId,
    pub rank: i32,
    pub size: i32,
    /// Intercommunicator: (remote size, local communicator).
    pub inter: Option<(i32, CommId)>,
}

impl View {
    fn of(st: &State, id: CommId) -> Result<View> {
        let c = st.comm(id)?;
        let inter = match &c.remote {
            None => None,
            Some(r) => Some((
                r.len() as i32,
                crate::comm::local_of(id).ok_or_else(|| {
                    Error::new(
                        ErrorClass::Intern,
                        "intercommunicator without a local communicator",
                    )
                })?,
            )),
        };
        Ok(View {
            id,
            rank: c.rank,
            size: c.size,
            inter,
        })
    }

    /// The local group (through the local communicator of an intercommunicator).
    pub fn team(&self) -> Team {
        match self.inter {
            None => Team::new(self.id, self.rank, self.size),
            Some((_, l)) => Team::new(l, self.rank, self.size),
        }
    }

    /// The remote group of an intercommunicator.
    pub fn remote(&self) -> Team {
        Team::new(self.id, self.rank, self.inter.map_or(0, |i| i.0))
    }
}

/// How a collective starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    /// At once (MPI_Ixxx, and the blocking forms).
    Now,
    /// As an inactive persistent request that MPI_Start starts (MPI_Xxx_init).
    Persistent,
}

/// A raw pointer a build closure may keep (see [`Data`] for the rule that makes it sound).
#[derive(Clone, Copy)]
struct Ptr(*mut u8);

// SAFETY: as for `Data`.
unsafe impl Send for Ptr {}
// SAFETY: as for `Data`.
unsafe impl Sync for Ptr {}

impl Ptr {
    fn get(self) -> *mut u8 {
        self.0
    }
}

/// Build (with `f`) and start a collective on `comm`, now or as a persistent request. A
/// persistent request takes its tag now (initializations are ordered like collectives) and
/// rebuilds its schedule at every MPI_Start; its arguments are checked now.
fn start<F>(comm: CommId, when: When, f: F) -> Result<RequestId>
where
    F: Fn(&mut B, &View) -> Result<()> + Send + Sync + 'static,
{
    with(|e| {
        let v = View::of(&e.st, comm)?;
        let mut b = B::new();
        f(&mut b, &v)?;
        let tag = crate::comm::next_tag(comm);
        if when == When::Persistent {
            let make: MakeSched = std::sync::Arc::new(move |st: &mut State| {
                let v = View::of(st, comm)?;
                let mut b = B::new();
                f(&mut b, &v)?;
                Ok(Box::new(b.finish(tag).holding(comm)) as Box<dyn Schedule>)
            });
            return e.st.persistent(Persistent::Coll(make));
        }
        let r = e.st.start_schedule(Box::new(b.finish(tag).holding(comm)))?;
        e.flush()?;
        Ok(r)
    })
}

/// Wait for a collective and turn a failure into an error.
fn finish(r: RequestId, name: &str) -> Result<()> {
    let s = wait(r)?;
    match s.error {
        None => Ok(()),
        Some(c) => err(
            c,
            format!("{name}: a point-to-point step failed ({})", c.mpi_name()),
        ),
    }
}

fn check_root(v: &View, root: i32) -> Result<()> {
    let ok = match v.inter {
        None => (0..v.size).contains(&root),
        Some((rs, _)) => root == ROOT || root == PROC_NULL || (0..rs).contains(&root),
    };
    if ok {
        Ok(())
    } else {
        err(ErrorClass::Root, format!("invalid root {root}"))
    }
}

fn need<T>(x: Option<T>, what: &str) -> Result<T> {
    x.ok_or_else(|| Error::new(ErrorClass::Arg, format!("missing {what}")))
}

/// The packed form of `count` elements of `dt` at `ptr`: the data itself when it is one run
/// of memory, else a scratch copy packed by a first step.
fn packed_in(b: &mut B, ptr: *const u8, count: usize, dt: &Datatype) -> *const u8 {
    match dt.contiguous_span(count) {
        Some((off, _)) => ptr.wrapping_offset(off),
        None => {
            let t = b.tmp(count * dt.size());
            b.pack(ptr, count, dt, t);
            t
        }
    }
}

/// Where to produce the packed form of an output: `(packed, unpack needed)`.
fn packed_out(b: &mut B, ptr: *mut u8, count: usize, dt: &Datatype) -> (*mut u8, bool) {
    match dt.contiguous_span(count) {
        Some((off, _)) => (ptr.wrapping_offset(off), false),
        None => (b.tmp(count * dt.size()), true),
    }
}

// ------------------------------------------------------------------------------------ choices

/// The algorithms each `MADMPI_COLL_<NAME>` variable may name.
pub(crate) const KNOWN: &[(&str, &[&str])] = &[
    ("BARRIER", &["dissemination", "shm"]),
    ("BCAST", &["binomial", "scatter_allgather", "shm"]),
    ("REDUCE", &["binomial", "rabenseifner", "shm"]),
    (
        "ALLREDUCE",
        &[
            "recursive_doubling",
            "rabenseifner",
            "linear",
            "cma",
            "reduce_bcast",
            "shm",
        ],
    ),
    ("GATHER", &["binomial", "linear"]),
    ("SCATTER", &["binomial", "linear"]),
    ("ALLGATHER", &["bruck", "ring"]),
    ("ALLTOALL", &["linear", "pairwise", "shm"]),
    ("REDUCE_SCATTER", &["pairwise", "allreduce"]),
];

/// Bytes from which bcast uses scatter + allgather (with at least `BCAST_MIN_PROCS`).
const BCAST_LONG: usize = 12 * 1024;
const BCAST_MIN_PROCS: i32 = 8;
/// Bytes from which reduce/allreduce use Rabenseifner's algorithm.
const REDUCE_LONG: usize = 2048;
/// The number of processes on which the schedule of an allreduce from `REDUCE_LONG` bytes (a
/// commutative operation) is `linear` (two rounds) rather than Rabenseifner's, and the bytes
/// from which it is Rabenseifner's again (on 4 ranks over 2 cores `linear` took 0.5 and 0.93
/// of its time at 64 and 256 KiB, 1.05 at 1 MiB and 1.07 at 4 MiB; on 3 ranks 1.6 at 64 KiB,
/// where Rabenseifner's fold leaves two processes for two cores; docs/collectives.md).
const ALLREDUCE_LINEAR_PROCS: i32 = 4;
const ALLREDUCE_LINEAR_BELOW: usize = 1 << 20;
/// The bytes between which the non-blocking allreduce of a commutative operation on
/// `ALLREDUCE_LINEAR_PROCS` processes of one node goes by cross-memory attach (`cma.rs`) when
/// the members can (on 4 ranks over 2 cores, paired against `linear` and Rabenseifner's
/// schedule: 0.70–0.77 of their time at 128 KiB, 0.8–0.9 at 256 – 768 KiB, 0.9–1.0 at 1 MiB,
/// 1.0–1.1 at 4 MiB; 1.5–1.8 at 64 KiB, where the system calls cost more than `linear`'s
/// eager messages), and from which it does on 3 to `ALLREDUCE_CMA_MOST` processes (against
/// Rabenseifner's, 64 KiB – 4 MiB: 0.55–0.85 on 3 ranks, 0.5–0.75 on 5, 0.35–0.95 on 8; the
/// most measured). Docs/collectives.md.
const ALLREDUCE_CMA_FROM: usize = 128 << 10;
const ALLREDUCE_CMA_FROM_OTHER: usize = 64 << 10;
const ALLREDUCE_CMA_MOST: i32 = 8;
const ALLREDUCE_CMA_BELOW: usize = 2 << 20;
/// Bytes per process from which gather/scatter go linear.
const GATHER_LONG: usize = 4096;
/// Total bytes from which allgather uses the ring.
const ALLGATHER_LONG: usize = 80 * 1024;
/// Bytes per block from which alltoall goes pairwise.
const ALLTOALL_LONG: usize = 32 * 1024;
/// Total bytes from which reduce-scatter goes pairwise.
const REDUCE_SCATTER_LONG: usize = 64 * 1024;

static CHOICES: Lazy<std::result::Result<Vec<(&'static str, &'static str)>, String>> =
    Lazy::new(|| {
        let mut out = Vec::new();
        for (name, algs) in KNOWN {
            let var = format!("MADMPI_COLL_{name}");
            if let Ok(v) = std::env::var(&var) {
                let v = v.trim().to_ascii_lowercase();
                if v.is_empty() || v == "auto" {
                    continue;
                }
                match algs.iter().find(|a| **a == v) {
                    Some(a) => out.push((*name, *a)),
                    None => {
                        return Err(format!(
                            "{var}={v}: unknown algorithm (auto, {})",
                            algs.join(", ")
                        ))
                    }
                }
            }
        }
        Ok(out)
    });

/// The algorithm forced for collective `name`, if any (`shm` included).
pub(crate) fn forced_any(name: &str) -> Result<Option<&'static str>> {
    match &*CHOICES {
        Ok(v) => Ok(v.iter().find(|(n, _)| *n == name).map(|(_, a)| *a)),
        Err(m) => err(ErrorClass::Arg, m.clone()),
    }
}

/// The point-to-point algorithm forced for collective `name`, if any: `shm` only concerns
/// the blocking forms on shared memory (see `shmcoll`), so elsewhere it means the default.
fn forced(name: &str) -> Result<Option<&'static str>> {
    Ok(forced_any(name)?.filter(|a| *a != "shm"))
}

// ------------------------------------------------------------------------------------ barrier

/// MPI_Ibarrier.
fn barrier_at(comm: CommId, when: When) -> Result<RequestId> {
    forced("BARRIER")?;
    start(comm, when, move |b: &mut B, v: &View| {
        match v.inter {
            None => algo::barrier_dissemination(b, &v.team()),
            Some(_) => inter::barrier(b, v),
        }
        Ok(())
    })
}

/// MPI_Ibarrier.
pub fn ibarrier(comm: CommId) -> Result<RequestId> {
    barrier_at(comm, When::Now)
}

/// MPI_Barrier_init: an inactive persistent request (start it with MPI_Start).
pub fn barrier_init(comm: CommId) -> Result<RequestId> {
    barrier_at(comm, When::Persistent)
}

/// MPI_Barrier.
pub fn barrier(comm: CommId) -> Result<()> {
    crate::comm::blocking_collective(|| {
        if shmcoll::barrier(comm)? || direct::barrier(comm)? {
            return Ok(());
        }
        finish(ibarrier(comm)?, "MPI_Barrier")
    })
}
