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
//! | allreduce | `recursive_doubling`, `rabenseifner` (reduce-scatter + allgather), `reduce_bcast` | rabenseifner from 2 KiB, commutative op, count ≥ 2^⌊log2 n⌋ |
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
mod direct;
mod inter;
pub(crate) mod sched;
pub(crate) mod shmcoll;

use madmpi_datatypes::Datatype;
use once_cell::sync::Lazy;

use crate::api::{wait, with};
use crate::engine::{Schedule, State};
use crate::error::{err, Error, ErrorClass, Result};
use crate::op::Op;
use crate::request::{MakeSched, Persistent, RequestId};
use crate::{CommId, PROC_NULL};

use algo::Blk;
use sched::{bytes, Team, B};

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
const KNOWN: &[(&str, &[&str])] = &[
    ("BARRIER", &["dissemination", "shm"]),
    ("BCAST", &["binomial", "scatter_allgather", "shm"]),
    ("REDUCE", &["binomial", "rabenseifner", "shm"]),
    (
        "ALLREDUCE",
        &["recursive_doubling", "rabenseifner", "reduce_bcast", "shm"],
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
fn forced_any(name: &str) -> Result<Option<&'static str>> {
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
    if shmcoll::barrier(comm)? || direct::barrier(comm)? {
        return Ok(());
    }
    finish(ibarrier(comm)?, "MPI_Barrier")
}

// ------------------------------------------------------------------------------------ bcast

/// MPI_Ibcast.
///
/// # Safety
/// `d` must stay valid until the request completes.
unsafe fn bcast_at(d: Data, root: i32, comm: CommId, when: When) -> Result<RequestId> {
    let f = forced("BCAST")?;
    start(comm, when, move |b: &mut B, v: &View| {
        check_root(v, root)?;
        if v.inter.is_some() {
            inter::bcast(b, v, &d, root);
            return Ok(());
        }
        let t = v.team();
        let nb = d.bytes();
        let long = match f {
            Some(a) => a == "scatter_allgather",
            None => nb >= BCAST_LONG && v.size >= BCAST_MIN_PROCS,
        };
        if !long || v.size == 1 || nb == 0 {
            algo::bcast_binomial(b, &t, root, d.ptr, d.count, &d.dt);
            return Ok(());
        }
        match d.dt.contiguous_span(d.count) {
            Some((off, _)) => algo::bcast_scatter_ring(b, &t, root, d.ptr.wrapping_offset(off), nb),
            None => {
                let tmp = b.tmp(nb);
                if v.rank == root {
                    b.pack(d.ptr, d.count, &d.dt, tmp);
                }
                algo::bcast_scatter_ring(b, &t, root, tmp, nb);
                if v.rank != root {
                    b.unpack(tmp, d.ptr, d.count, &d.dt);
                }
            }
        }
        Ok(())
    })
}

/// MPI_Ibcast.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn ibcast(d: Data, root: i32, comm: CommId) -> Result<RequestId> {
    bcast_at(d, root, comm, When::Now)
}

/// MPI_Bcast_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn bcast_init(d: Data, root: i32, comm: CommId) -> Result<RequestId> {
    bcast_at(d, root, comm, When::Persistent)
}

/// MPI_Bcast of `count` elements of `dt` at `ptr`. The datatype is borrowed: the blocking
/// forms that complete here (shared memory) take no reference to it.
///
/// # Safety
/// As [`ibcast`], until the call returns.
pub unsafe fn bcast(
    ptr: *mut u8,
    count: usize,
    dt: &Datatype,
    root: i32,
    comm: CommId,
) -> Result<()> {
    if shmcoll::bcast(ptr, count, dt, root, comm)? {
        return Ok(());
    }
    bcast_p2p(Data::new(ptr, count, dt), root, comm)
}

/// MPI_Bcast over point-to-point (kept out of [`bcast`], whose shared-memory path is short).
///
/// # Safety
/// As [`bcast`].
#[inline(never)]
unsafe fn bcast_p2p(d: Data, root: i32, comm: CommId) -> Result<()> {
    if direct::bcast(&d, root, comm)? {
        return Ok(());
    }
    finish(ibcast(d, root, comm)?, "MPI_Bcast")
}

// ------------------------------------------------------------------------------------ gather

/// MPI_Igather. `send` is None for MPI_IN_PLACE at the root (and at an intercommunicator's
/// root side); `recv` is significant at the root only.
///
/// # Safety
/// The buffers must stay valid until the request completes.
unsafe fn gather_at(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    let f = forced("GATHER")?;
    start(comm, when, move |b: &mut B, v: &View| {
        check_root(v, root)?;
        if v.inter.is_some() {
            let rb = recv
                .as_ref()
                .map(|r| Blocks::regular(r, v.remote().size as usize));
            return inter::gather(b, v, send.as_ref(), rb.as_ref(), root);
        }
        let t = v.team();
        let at_root = v.rank == root;
        let recv = if at_root {
            Some(need(recv.clone(), "receive buffer")?)
        } else {
            None
        };
        let send = if at_root {
            send.clone()
        } else {
            Some(need(send.clone(), "send buffer")?)
        };
        let bsz = match (&send, &recv) {
            (Some(s), _) => s.bytes(),
            (None, Some(r)) => r.bytes(),
            (None, None) => 0,
        };
        let linear = match f {
            Some(a) => a == "linear",
            None => bsz >= GATHER_LONG,
        };
        if linear {
            let rb = recv.as_ref().map(|r| Blocks::regular(r, v.size as usize));
            gatherv_linear(b, &t, root, send.as_ref(), rb.as_ref());
            return Ok(());
        }
        let slot = recv.as_ref().map(|r| move |i: i32| r.block(i));
        let own = send.as_ref().map(|s| (s.ptr as *const u8, s.count, &s.dt));
        algo::gather_binomial(
            b,
            &t,
            root,
            algo::GatherArgs {
                bsz,
                own,
                slot: slot.as_ref().map(|s| s as &dyn Fn(i32) -> Blk),
            },
        );
        Ok(())
    })
}

/// MPI_Igather.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn igather(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    gather_at(send, recv, root, comm, When::Now)
}

/// MPI_Gather_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn gather_init(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    gather_at(send, recv, root, comm, When::Persistent)
}

/// MPI_Gather.
///
/// # Safety
/// As [`igather`], until the call returns.
pub unsafe fn gather(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<()> {
    finish(igather(send, recv, root, comm)?, "MPI_Gather")
}

/// Linear gather: the root receives every block in place.
fn gatherv_linear(b: &mut B, t: &Team, root: i32, send: Option<&Data>, recv: Option<&Blocks>) {
    b.fence();
    if t.me == root {
        let Some(r) = recv else { return };
        for i in 0..t.size {
            let (p, c, dt) = r.block(i);
            if i == root {
                if let Some(s) = send {
                    b.copy_typed(s.ptr, s.count, &s.dt, p, c, &dt);
                }
            } else {
                b.recv(t, i, p, c, &dt);
            }
        }
    } else if let Some(s) = send {
        b.send(t, root, s.ptr, s.count, &s.dt);
    }
}

/// MPI_Igatherv.
///
/// # Safety
/// As [`igather`].
unsafe fn gatherv_at(
    send: Option<Data>,
    recv: Option<Blocks>,
    root: i32,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    start(comm, when, move |b: &mut B, v: &View| {
        check_root(v, root)?;
        if v.inter.is_some() {
            if root == ROOT {
                need(recv.as_ref(), "receive blocks")?
                    .check(v.remote().size as usize, "MPI_Gatherv")?;
            }
            return inter::gather(b, v, send.as_ref(), recv.as_ref(), root);
        }
        let t = v.team();
        if v.rank == root {
            need(recv.as_ref(), "receive blocks")?.check(v.size as usize, "MPI_Gatherv")?;
        } else {
            need(send.as_ref(), "send buffer")?;
        }
        gatherv_linear(b, &t, root, send.as_ref(), recv.as_ref());
        Ok(())
    })
}

/// MPI_Igatherv.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn igatherv(
    send: Option<Data>,
    recv: Option<Blocks>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    gatherv_at(send, recv, root, comm, When::Now)
}

/// MPI_Gatherv_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn gatherv_init(
    send: Option<Data>,
    recv: Option<Blocks>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    gatherv_at(send, recv, root, comm, When::Persistent)
}

/// MPI_Gatherv.
///
/// # Safety
/// As [`igather`], until the call returns.
pub unsafe fn gatherv(
    send: Option<Data>,
    recv: Option<Blocks>,
    root: i32,
    comm: CommId,
) -> Result<()> {
    finish(igatherv(send, recv, root, comm)?, "MPI_Gatherv")
}

// ------------------------------------------------------------------------------------ scatter

/// MPI_Iscatter. `send` is significant at the root only; `recv` is None for MPI_IN_PLACE at
/// the root.
///
/// # Safety
/// The buffers must stay valid until the request completes.
unsafe fn scatter_at(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    let f = forced("SCATTER")?;
    start(comm, when, move |b: &mut B, v: &View| {
        check_root(v, root)?;
        if v.inter.is_some() {
            let sb = send
                .as_ref()
                .map(|s| Blocks::regular(s, v.remote().size as usize));
            return inter::scatter(b, v, sb.as_ref(), recv.as_ref(), root);
        }
        let t = v.team();
        let at_root = v.rank == root;
        let send = if at_root {
            Some(need(send.clone(), "send buffer")?)
        } else {
            None
        };
        let recv = if at_root {
            recv.clone()
        } else {
            Some(need(recv.clone(), "receive buffer")?)
        };
        // The root's blocks are the size it sends (packed into `bsz`-byte slots: its own
        // receive block may differ, an erroneous program that must not write past them).
        let bsz = match (&send, &recv) {
            (Some(s), _) => s.bytes(),
            (None, Some(r)) => r.bytes(),
            (None, None) => 0,
        };
        let linear = match f {
            Some(a) => a == "linear",
            None => bsz >= GATHER_LONG,
        };
        if linear {
            let sb = send.as_ref().map(|s| Blocks::regular(s, v.size as usize));
            scatterv_linear(b, &t, root, sb.as_ref(), recv.as_ref());
            return Ok(());
        }
        let slot = send.as_ref().map(|s| move |i: i32| s.block(i));
        let own = recv.as_ref().map(|r| (r.ptr, r.count, &r.dt));
        algo::scatter_binomial(
            b,
            &t,
            root,
            algo::ScatterArgs {
                bsz,
                slot: slot.as_ref().map(|s| s as &dyn Fn(i32) -> Blk),
                own,
            },
        );
        Ok(())
    })
}

/// MPI_Iscatter.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn iscatter(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    scatter_at(send, recv, root, comm, When::Now)
}

/// MPI_Scatter_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn scatter_init(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    scatter_at(send, recv, root, comm, When::Persistent)
}

/// MPI_Scatter.
///
/// # Safety
/// As [`iscatter`], until the call returns.
pub unsafe fn scatter(
    send: Option<Data>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<()> {
    finish(iscatter(send, recv, root, comm)?, "MPI_Scatter")
}

fn scatterv_linear(b: &mut B, t: &Team, root: i32, send: Option<&Blocks>, recv: Option<&Data>) {
    b.fence();
    if t.me == root {
        let Some(s) = send else { return };
        for i in 0..t.size {
            let (p, c, dt) = s.block(i);
            if i == root {
                if let Some(r) = recv {
                    b.copy_typed(p, c, &dt, r.ptr, r.count, &r.dt);
                }
            } else {
                b.send(t, i, p, c, &dt);
            }
        }
    } else if let Some(r) = recv {
        b.recv(t, root, r.ptr, r.count, &r.dt);
    }
}

/// MPI_Iscatterv.
///
/// # Safety
/// As [`iscatter`].
unsafe fn scatterv_at(
    send: Option<Blocks>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    start(comm, when, move |b: &mut B, v: &View| {
        check_root(v, root)?;
        if v.inter.is_some() {
            if root == ROOT {
                need(send.as_ref(), "send blocks")?
                    .check(v.remote().size as usize, "MPI_Scatterv")?;
            }
            return inter::scatter(b, v, send.as_ref(), recv.as_ref(), root);
        }
        let t = v.team();
        if v.rank == root {
            need(send.as_ref(), "send blocks")?.check(v.size as usize, "MPI_Scatterv")?;
        } else {
            need(recv.as_ref(), "receive buffer")?;
        }
        scatterv_linear(b, &t, root, send.as_ref(), recv.as_ref());
        Ok(())
    })
}

/// MPI_Iscatterv.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn iscatterv(
    send: Option<Blocks>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    scatterv_at(send, recv, root, comm, When::Now)
}

/// MPI_Scatterv_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn scatterv_init(
    send: Option<Blocks>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    scatterv_at(send, recv, root, comm, When::Persistent)
}

/// MPI_Scatterv.
///
/// # Safety
/// As [`iscatter`], until the call returns.
pub unsafe fn scatterv(
    send: Option<Blocks>,
    recv: Option<Data>,
    root: i32,
    comm: CommId,
) -> Result<()> {
    finish(iscatterv(send, recv, root, comm)?, "MPI_Scatterv")
}

// ------------------------------------------------------------------------------------ allgather

/// MPI_Iallgather (`send` None: MPI_IN_PLACE).
///
/// # Safety
/// The buffers must stay valid until the request completes.
unsafe fn allgather_at(
    send: Option<Data>,
    recv: Data,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    let f = forced("ALLGATHER")?;
    start(comm, when, move |b: &mut B, v: &View| {
        if v.inter.is_some() {
            let s = need(
                send.as_ref(),
                "send buffer (MPI_IN_PLACE is not allowed on an intercommunicator)",
            )?;
            let rb = Blocks::regular(&recv, v.remote().size as usize);
            inter::allgather(b, v, s, &rb);
            return Ok(());
        }
        let t = v.team();
        let n = v.size;
        let bsz = match &send {
            Some(s) => s.bytes(),
            None => recv.bytes(),
        };
        let ring = match f {
            Some(a) => a == "ring",
            None => bsz * n as usize >= ALLGATHER_LONG,
        };
        let slot = |i: i32| recv.block(i);
        if ring || n == 1 {
            if let Some(s) = &send {
                let (p, c, dt) = recv.block(v.rank);
                b.copy_typed(s.ptr, s.count, &s.dt, p, c, &dt);
            }
            if n > 1 {
                algo::allgather_ring(b, &t, &slot);
            }
            return Ok(());
        }
        let mine = recv.block(v.rank);
        let own = match &send {
            Some(s) => (s.ptr as *const u8, s.count, &s.dt),
            None => (mine.0 as *const u8, mine.1, &mine.2),
        };
        algo::allgather_bruck(b, &t, bsz, own, &slot, send.is_none());
        Ok(())
    })
}

/// MPI_Iallgather.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn iallgather(send: Option<Data>, recv: Data, comm: CommId) -> Result<RequestId> {
    allgather_at(send, recv, comm, When::Now)
}

/// MPI_Allgather_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn allgather_init(send: Option<Data>, recv: Data, comm: CommId) -> Result<RequestId> {
    allgather_at(send, recv, comm, When::Persistent)
}

/// MPI_Allgather.
///
/// # Safety
/// As [`iallgather`], until the call returns.
pub unsafe fn allgather(send: Option<Data>, recv: Data, comm: CommId) -> Result<()> {
    finish(iallgather(send, recv, comm)?, "MPI_Allgather")
}

/// MPI_Iallgatherv (`send` None: MPI_IN_PLACE).
///
/// # Safety
/// As [`iallgather`].
unsafe fn allgatherv_at(
    send: Option<Data>,
    recv: Blocks,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    start(comm, when, move |b: &mut B, v: &View| {
        if v.inter.is_some() {
            let s = need(
                send.as_ref(),
                "send buffer (MPI_IN_PLACE is not allowed on an intercommunicator)",
            )?;
            recv.check(v.remote().size as usize, "MPI_Allgatherv")?;
            inter::allgather(b, v, s, &recv);
            return Ok(());
        }
        recv.check(v.size as usize, "MPI_Allgatherv")?;
        let t = v.team();
        if let Some(s) = &send {
            let (p, c, dt) = recv.block(v.rank);
            b.copy_typed(s.ptr, s.count, &s.dt, p, c, &dt);
        }
        if v.size > 1 {
            algo::allgather_ring(b, &t, &|i| recv.block(i));
        }
        Ok(())
    })
}

/// MPI_Iallgatherv.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn iallgatherv(send: Option<Data>, recv: Blocks, comm: CommId) -> Result<RequestId> {
    allgatherv_at(send, recv, comm, When::Now)
}

/// MPI_Allgatherv_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn allgatherv_init(send: Option<Data>, recv: Blocks, comm: CommId) -> Result<RequestId> {
    allgatherv_at(send, recv, comm, When::Persistent)
}

/// MPI_Allgatherv.
///
/// # Safety
/// As [`iallgather`], until the call returns.
pub unsafe fn allgatherv(send: Option<Data>, recv: Blocks, comm: CommId) -> Result<()> {
    finish(iallgatherv(send, recv, comm)?, "MPI_Allgatherv")
}

// ------------------------------------------------------------------------------------ alltoall

/// MPI_Ialltoall (`send` None: MPI_IN_PLACE).
///
/// # Safety
/// The buffers must stay valid until the request completes.
unsafe fn alltoall_at(
    send: Option<Data>,
    recv: Data,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    let f = forced("ALLTOALL")?;
    let pairwise = match f {
        Some(a) => a == "pairwise",
        None => recv.bytes() >= ALLTOALL_LONG,
    };
    let n = crate::api::comm_info(comm)?;
    let peers = n.remote.as_ref().map_or(n.local.len(), |r| r.len());
    let sb = send.as_ref().map(|s| Blocks::regular(s, peers));
    let rb = Blocks::regular(&recv, peers);
    ialltoallw_inner(sb, rb, comm, pairwise, when)
}

/// MPI_Ialltoall.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn ialltoall(send: Option<Data>, recv: Data, comm: CommId) -> Result<RequestId> {
    alltoall_at(send, recv, comm, When::Now)
}

/// MPI_Alltoall_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn alltoall_init(send: Option<Data>, recv: Data, comm: CommId) -> Result<RequestId> {
    alltoall_at(send, recv, comm, When::Persistent)
}

/// MPI_Alltoall.
///
/// # Safety
/// As [`ialltoall`], until the call returns.
pub unsafe fn alltoall(send: Option<Data>, recv: Data, comm: CommId) -> Result<()> {
    if shmcoll::alltoall(send.as_ref(), &recv, comm)?
        || direct::alltoall(send.as_ref(), &recv, comm)?
    {
        return Ok(());
    }
    finish(ialltoall(send, recv, comm)?, "MPI_Alltoall")
}

/// MPI_Ialltoallv and MPI_Ialltoallw (`send` None: MPI_IN_PLACE).
///
/// # Safety
/// As [`ialltoall`].
unsafe fn alltoallw_at(
    send: Option<Blocks>,
    recv: Blocks,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    let pairwise = forced("ALLTOALL")? == Some("pairwise");
    ialltoallw_inner(send, recv, comm, pairwise, when)
}

/// MPI_Ialltoallv / MPI_Ialltoallw.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn ialltoallw(send: Option<Blocks>, recv: Blocks, comm: CommId) -> Result<RequestId> {
    alltoallw_at(send, recv, comm, When::Now)
}

/// MPI_Alltoallv_init / MPI_Alltoallw_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn alltoallw_init(
    send: Option<Blocks>,
    recv: Blocks,
    comm: CommId,
) -> Result<RequestId> {
    alltoallw_at(send, recv, comm, When::Persistent)
}

/// MPI_Alltoallv / MPI_Alltoallw.
///
/// # Safety
/// As [`ialltoall`], until the call returns.
pub unsafe fn alltoallw(send: Option<Blocks>, recv: Blocks, comm: CommId) -> Result<()> {
    finish(ialltoallw(send, recv, comm)?, "MPI_Alltoallw")
}

fn ialltoallw_inner(
    send: Option<Blocks>,
    recv: Blocks,
    comm: CommId,
    pairwise: bool,
    when: When,
) -> Result<RequestId> {
    start(comm, when, move |b: &mut B, v: &View| {
        let (t, n) = match v.inter {
            None => (v.team(), v.size),
            Some((rs, _)) => (v.remote(), rs),
        };
        recv.check(n as usize, "alltoall receive")?;
        let send = match send.clone() {
            Some(s) => {
                s.check(n as usize, "alltoall send")?;
                s
            }
            None => {
                if v.inter.is_some() {
                    return err(
                        ErrorClass::Buffer,
                        "MPI_IN_PLACE is not allowed on an intercommunicator",
                    );
                }
                // In place: pack the whole receive buffer first, and send from the copy.
                let mut offs = Vec::with_capacity(n as usize);
                let mut total = 0usize;
                for i in 0..n {
                    offs.push(total);
                    let (_, c, dt) = recv.block(i);
                    total += c * dt.size();
                }
                let tmp = b.tmp(total);
                for i in 0..n {
                    let (p, c, dt) = recv.block(i);
                    b.pack(p, c, &dt, tmp.wrapping_add(offs[i as usize]));
                }
                let counts = (0..n)
                    .map(|i| {
                        let (_, c, dt) = recv.block(i);
                        c * dt.size()
                    })
                    .collect();
                Blocks::w(
                    tmp,
                    counts,
                    offs.iter().map(|&o| o as isize).collect(),
                    vec![bytes(); n as usize],
                )
            }
        };
        if v.inter.is_none() {
            let (sp, sc, sdt) = send.block(v.rank);
            let (rp, rc, rdt) = recv.block(v.rank);
            b.copy_typed(sp, sc, &sdt, rp, rc, &rdt);
            if pairwise {
                algo::alltoall_pairwise(b, &t, &|i| send.block(i), &|i| recv.block(i));
            } else {
                algo::alltoall_linear(b, &t, &|i| send.block(i), &|i| recv.block(i));
            }
        } else {
            inter::alltoall(b, &t, &send, &recv);
        }
        Ok(())
    })
}

// ------------------------------------------------------------------------------------ reductions

/// The input of a reduction: a buffer, or MPI_IN_PLACE (the input is in the receive buffer).
#[derive(Clone, Copy, Debug)]
pub enum Input {
    /// A send buffer.
    Buf(*const u8),
    /// MPI_IN_PLACE.
    InPlace,
}

fn reduce_checks(op: &Op, dt: &Datatype) -> Result<()> {
    op.check_collective(dt)?;
    if !dt.is_committed() {
        return err(
            ErrorClass::Type,
            "datatype not committed (call MPI_Type_commit)",
        );
    }
    Ok(())
}

/// MPI_Ireduce: `recv` is significant at the root only.
///
/// # Safety
/// The buffers must hold `count` elements of `dt` and stay valid until the request completes.
#[allow(clippy::too_many_arguments)]
unsafe fn reduce_at(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    root: i32,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    reduce_checks(op, dt)?;
    let f = forced("REDUCE")?;
    let (op, dt, rp) = (op.clone(), dt.clone(), Ptr(recv));
    start(comm, when, move |b: &mut B, v: &View| {
        let (op, dt, recv) = (&op, &dt, rp.get());
        check_root(v, root)?;
        b.op = Some((op.clone(), dt.clone()));
        let esz = dt.size();
        if v.inter.is_some() {
            return inter::reduce(b, v, send, recv, count, dt, op.is_commutative(), root);
        }
        let t = v.team();
        let at_root = v.rank == root;
        let sp = match send {
            Input::Buf(p) => packed_in(b, p, count, dt),
            Input::InPlace if at_root => packed_in(b, recv, count, dt),
            Input::InPlace => return err(ErrorClass::Buffer, "MPI_IN_PLACE is for the root only"),
        };
        let (rp, unpack) = if at_root {
            packed_out(b, recv, count, dt)
        } else {
            (std::ptr::null_mut(), false)
        };
        let p2 = algo::pof2_floor(v.size) as usize;
        let rab_ok = op.is_commutative() && count >= p2 && v.size > 1;
        let rab = rab_ok
            && match f {
                Some(a) => a == "rabenseifner",
                None => count * esz >= REDUCE_LONG,
            };
        if rab {
            algo::reduce_rabenseifner(b, &t, root, sp, rp, count, esz);
        } else {
            algo::reduce_binomial(b, &t, root, sp, rp, count, esz, op.is_commutative());
        }
        if unpack {
            b.unpack(rp, recv, count, dt);
        }
        Ok(())
    })
}

/// MPI_Ireduce.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn ireduce(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    reduce_at(send, recv, count, dt, op, root, comm, When::Now)
}

/// MPI_Reduce_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn reduce_init(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    root: i32,
    comm: CommId,
) -> Result<RequestId> {
    reduce_at(send, recv, count, dt, op, root, comm, When::Persistent)
}

/// MPI_Reduce.
///
/// # Safety
/// As [`ireduce`], until the call returns.
pub unsafe fn reduce(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    root: i32,
    comm: CommId,
) -> Result<()> {
    if shmcoll::reduce(send, recv, count, dt, op, Some(root), comm)? {
        return Ok(());
    }
    finish(
        ireduce(send, recv, count, dt, op, root, comm)?,
        "MPI_Reduce",
    )
}

/// Packed input and output of an all-process reduction of `count` elements: `(sp, rp,
/// unpack)`. In place, the output doubles as the input.
fn reduction_buffers(
    b: &mut B,
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
) -> (*const u8, *mut u8, bool) {
    let (rp, unpack) = packed_out(b, recv, count, dt);
    let sp = match send {
        Input::Buf(p) => packed_in(b, p, count, dt),
        Input::InPlace => {
            if unpack {
                b.pack(recv, count, dt, rp);
            }
            rp as *const u8
        }
    };
    (sp, rp, unpack)
}

/// MPI_Iallreduce.
///
/// # Safety
/// As [`ireduce`].
unsafe fn allreduce_at(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    reduce_checks(op, dt)?;
    let f = forced("ALLREDUCE")?;
    let (op, dt, rp) = (op.clone(), dt.clone(), Ptr(recv));
    start(comm, when, move |b: &mut B, v: &View| {
        let (op, dt, recv) = (&op, &dt, rp.get());
        b.op = Some((op.clone(), dt.clone()));
        let esz = dt.size();
        if v.inter.is_some() {
            return inter::allreduce(b, v, send, recv, count, dt, op.is_commutative());
        }
        let t = v.team();
        let (sp, rp, unpack) = reduction_buffers(b, send, recv, count, dt);
        let p2 = algo::pof2_floor(v.size) as usize;
        let rab_ok = op.is_commutative() && count >= p2 && v.size > 1;
        match f {
            Some("reduce_bcast") => {
                algo::reduce_binomial(b, &t, 0, sp, rp, count, esz, op.is_commutative());
                algo::bcast_binomial(b, &t, 0, rp, count * esz, &bytes());
            }
            Some("rabenseifner") if rab_ok => {
                algo::allreduce_rabenseifner(b, &t, sp, rp, count, esz)
            }
            Some(_) => algo::allreduce_doubling(b, &t, sp, rp, count, esz),
            None if rab_ok && count * esz >= REDUCE_LONG => {
                algo::allreduce_rabenseifner(b, &t, sp, rp, count, esz)
            }
            None => algo::allreduce_doubling(b, &t, sp, rp, count, esz),
        }
        if unpack {
            b.unpack(rp, recv, count, dt);
        }
        Ok(())
    })
}

/// MPI_Iallreduce.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn iallreduce(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
) -> Result<RequestId> {
    allreduce_at(send, recv, count, dt, op, comm, When::Now)
}

/// MPI_Allreduce_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn allreduce_init(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
) -> Result<RequestId> {
    allreduce_at(send, recv, count, dt, op, comm, When::Persistent)
}

/// MPI_Allreduce.
///
/// # Safety
/// As [`ireduce`], until the call returns.
pub unsafe fn allreduce(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
) -> Result<()> {
    if shmcoll::reduce(send, recv, count, dt, op, None, comm)? {
        return Ok(());
    }
    // Two processes: one exchange (recursive doubling) or halves (Rabenseifner), pipelined.
    reduce_checks(op, dt)?;
    let split = match forced("ALLREDUCE")? {
        Some(a) => a == "rabenseifner",
        None => op.is_commutative() && count * dt.size() >= REDUCE_LONG,
    };
    if forced("ALLREDUCE")? != Some("reduce_bcast")
        && direct::allreduce(send, recv, count, dt, op, comm, split)?
    {
        return Ok(());
    }
    finish(
        iallreduce(send, recv, count, dt, op, comm)?,
        "MPI_Allreduce",
    )
}

/// MPI_Ireduce_scatter (and _block with equal counts): the reduction of `sum(counts)`
/// elements, block `i` (`counts[i]` elements) to process `i`.
///
/// # Safety
/// As [`ireduce`] (`recv` holds `counts[rank]` elements; in place, the input is `recv`).
unsafe fn reduce_scatter_at(
    send: Input,
    recv: *mut u8,
    counts: Vec<usize>,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    reduce_checks(op, dt)?;
    let f = forced("REDUCE_SCATTER")?;
    let (op, dt, rp) = (op.clone(), dt.clone(), Ptr(recv));
    start(comm, when, move |b: &mut B, v: &View| {
        let (op, dt, recv) = (&op, &dt, rp.get());
        b.op = Some((op.clone(), dt.clone()));
        let n = v.size as usize;
        if counts.len() < n {
            return err(ErrorClass::Arg, format!("{n} receive counts are needed"));
        }
        if v.inter.is_some() {
            return inter::reduce_scatter(b, v, send, recv, &counts, dt, op.is_commutative());
        }
        let esz = dt.size();
        let total: usize = counts[..n].iter().sum();
        let mut blocks = Vec::with_capacity(n);
        let mut at = 0;
        for &c in &counts[..n] {
            blocks.push((at, c));
            at += c;
        }
        let me = v.rank as usize;
        let sp = match send {
            Input::Buf(p) => packed_in(b, p, total, dt),
            Input::InPlace => {
                // The output overlaps the input: always work on a copy.
                let t = b.tmp(total * esz);
                b.pack(recv, total, dt, t);
                t as *const u8
            }
        };
        let (rp, unpack) = packed_out(b, recv, counts[me], dt);
        let t = v.team();
        let pairwise = op.is_commutative()
            && match f {
                Some(a) => a == "pairwise",
                None => total * esz >= REDUCE_SCATTER_LONG,
            };
        if pairwise {
            algo::reduce_scatter_pairwise(b, &t, sp, rp, &blocks, esz);
        } else {
            let full = b.tmp(total * esz);
            algo::allreduce_doubling(b, &t, sp, full, total, esz);
            b.copy(full.wrapping_add(blocks[me].0 * esz), rp, counts[me] * esz);
        }
        if unpack {
            b.unpack(rp, recv, counts[me], dt);
        }
        Ok(())
    })
}

/// MPI_Ireduce_scatter(_block).
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn ireduce_scatter(
    send: Input,
    recv: *mut u8,
    counts: Vec<usize>,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
) -> Result<RequestId> {
    reduce_scatter_at(send, recv, counts, dt, op, comm, When::Now)
}

/// MPI_Reduce_scatter(_block)_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn reduce_scatter_init(
    send: Input,
    recv: *mut u8,
    counts: Vec<usize>,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
) -> Result<RequestId> {
    reduce_scatter_at(send, recv, counts, dt, op, comm, When::Persistent)
}

/// MPI_Reduce_scatter.
///
/// # Safety
/// As [`ireduce_scatter`], until the call returns.
pub unsafe fn reduce_scatter(
    send: Input,
    recv: *mut u8,
    counts: Vec<usize>,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
) -> Result<()> {
    finish(
        ireduce_scatter(send, recv, counts, dt, op, comm)?,
        "MPI_Reduce_scatter",
    )
}

/// MPI_Iscan (`exclusive`: MPI_Iexscan).
///
/// # Safety
/// As [`ireduce`].
#[allow(clippy::too_many_arguments)]
unsafe fn scan_at(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    exclusive: bool,
    when: When,
) -> Result<RequestId> {
    reduce_checks(op, dt)?;
    let (op, dt, rp) = (op.clone(), dt.clone(), Ptr(recv));
    start(comm, when, move |b: &mut B, v: &View| {
        let (op, dt, recv) = (&op, &dt, rp.get());
        if v.inter.is_some() {
            return err(
                ErrorClass::Comm,
                "scans are not defined on intercommunicators",
            );
        }
        b.op = Some((op.clone(), dt.clone()));
        let t = v.team();
        let (sp, rp, unpack) = reduction_buffers(b, send, recv, count, dt);
        algo::scan_doubling(b, &t, sp, rp, count, dt.size(), exclusive);
        // An exclusive scan leaves rank 0's buffer alone.
        if unpack && !(exclusive && v.rank == 0) {
            b.unpack(rp, recv, count, dt);
        }
        Ok(())
    })
}

/// MPI_Iscan / MPI_Iexscan.
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn iscan(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    exclusive: bool,
) -> Result<RequestId> {
    scan_at(send, recv, count, dt, op, comm, exclusive, When::Now)
}

/// MPI_Scan_init / MPI_Exscan_init: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn scan_init(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    exclusive: bool,
) -> Result<RequestId> {
    scan_at(send, recv, count, dt, op, comm, exclusive, When::Persistent)
}

/// MPI_Scan / MPI_Exscan.
///
/// # Safety
/// As [`ireduce`], until the call returns.
pub unsafe fn scan(
    send: Input,
    recv: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
    comm: CommId,
    exclusive: bool,
) -> Result<()> {
    finish(
        iscan(send, recv, count, dt, op, comm, exclusive)?,
        if exclusive { "MPI_Exscan" } else { "MPI_Scan" },
    )
}

/// MPI_Reduce_local.
///
/// # Safety
/// Both buffers hold `count` elements of `dt`.
pub unsafe fn reduce_local(
    inb: *const u8,
    inout: *mut u8,
    count: usize,
    dt: &Datatype,
    op: &Op,
) -> Result<()> {
    // MPI_Reduce_local is a reduction like the collective ones: MPI_REPLACE and MPI_NO_OP
    // belong to one-sided accumulation only.
    op.check_collective(dt)?;
    crate::op::reduce_layout(op, dt, count, inb, inout)
}

// ------------------------------------------------------------------------------------ neighbours

/// A neighbourhood collective (all of them in their w form): block `i` of `send` goes to the
/// i-th destination, block `i` of `recv` comes from the i-th source of the topology of `comm`.
///
/// # Safety
/// As [`ialltoall`].
unsafe fn neighbor_alltoallw_at(
    send: Blocks,
    recv: Blocks,
    comm: CommId,
    when: When,
) -> Result<RequestId> {
    let topo = crate::topo::topo_of(comm)?;
    start(comm, when, move |b: &mut B, v: &View| {
        let (srcs, dsts) = topo.neighbors(v.rank);
        send.check(dsts.len(), "neighbour send")?;
        recv.check(srcs.len(), "neighbour receive")?;
        let t = Team::new(v.id, v.rank, v.size);
        let cart = topo.is_cart();
        b.fence();
        for (i, &s) in srcs.iter().enumerate() {
            let (p, c, dt) = recv.block(i as i32);
            // A grid message is tagged by its direction of travel: what comes from the −1
            // neighbour travelled in the + direction.
            let sub = if cart { (i ^ 1) as u16 } else { 0 };
            b.recv_sub(&t, s, p, c, &dt, sub);
        }
        for (i, &d) in dsts.iter().enumerate() {
            let (p, c, dt) = send.block(i as i32);
            let sub = if cart { i as u16 } else { 0 };
            b.send_sub(&t, d, p, c, &dt, sub);
        }
        Ok(())
    })
}

/// A neighbourhood collective (all of them in their w form).
///
/// # Safety
/// The buffers must stay valid until the request completes.
pub unsafe fn ineighbor_alltoallw(send: Blocks, recv: Blocks, comm: CommId) -> Result<RequestId> {
    neighbor_alltoallw_at(send, recv, comm, When::Now)
}

/// A persistent neighbourhood collective: an inactive persistent request (start it with MPI_Start).
///
/// # Safety
/// The buffers must stay valid while the request exists.
pub unsafe fn neighbor_alltoallw_init(
    send: Blocks,
    recv: Blocks,
    comm: CommId,
) -> Result<RequestId> {
    neighbor_alltoallw_at(send, recv, comm, When::Persistent)
}

/// Blocking form of [`ineighbor_alltoallw`].
///
/// # Safety
/// As [`ineighbor_alltoallw`], until the call returns.
pub unsafe fn neighbor_alltoallw(send: Blocks, recv: Blocks, comm: CommId) -> Result<()> {
    finish(
        ineighbor_alltoallw(send, recv, comm)?,
        "neighbourhood collective",
    )
}

/// The number of (sources, destinations) of `comm`'s topology at this process.
pub fn neighbor_counts(comm: CommId) -> Result<(usize, usize)> {
    let topo = crate::topo::topo_of(comm)?;
    let me = crate::api::comm_rank(comm)?;
    let (s, d) = topo.neighbors(me);
    Ok((s.len(), d.len()))
}
