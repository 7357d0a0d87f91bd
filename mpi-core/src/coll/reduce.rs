//! The reductions: reduce, allreduce, reduce_scatter(_block), scan, exscan and
//! MPI_Reduce_local, blocking, non-blocking and persistent, each built as a point-to-point
//! schedule (the blocking reduce and allreduce try the shared-memory and direct paths first).
//!
//! This module owns the choice of algorithm and the schedule of the reductions only. It must
//! never hold the engine lock or send anything outside a schedule built through `start`, and it
//! must never combine a non-commutative operation out of rank order.

use madmpi_datatypes::Datatype;

use crate::error::{err, ErrorClass, Result};
use crate::op::Op;
use crate::request::RequestId;
use crate::CommId;

use super::sched::{bytes, B};
use super::{
    algo, check_root, cma, direct, finish, forced, inter, packed_in, packed_out, shmcoll, start,
    Input, Ptr, View, When, ALLREDUCE_CMA_BELOW, ALLREDUCE_CMA_FROM, ALLREDUCE_CMA_FROM_OTHER,
    ALLREDUCE_CMA_MOST, ALLREDUCE_LINEAR_BELOW, ALLREDUCE_LINEAR_PROCS, REDUCE_LONG,
    REDUCE_SCATTER_LONG,
};

// ------------------------------------------------------------------------------------ reductions

pub(super) fn reduce_checks(op: &Op, dt: &Datatype) -> Result<()> {
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
    crate::comm::blocking_collective(|| {
        if shmcoll::reduce(send, recv, count, dt, op, Some(root), comm)? {
            return Ok(());
        }
        finish(
            ireduce(send, recv, count, dt, op, root, comm)?,
            "MPI_Reduce",
        )
    })
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

/// Whether the non-blocking allreduce of `bytes` (a commutative operation) on `n` processes
/// of one node goes by cross-memory attach by default (docs/collectives.md, "The
/// non-blocking allreduce by cross-memory attach").
fn cma_by_default(n: i32, bytes: usize) -> bool {
    match n {
        ALLREDUCE_LINEAR_PROCS => (ALLREDUCE_CMA_FROM..ALLREDUCE_CMA_BELOW).contains(&bytes),
        3..=ALLREDUCE_CMA_MOST => bytes >= ALLREDUCE_CMA_FROM_OTHER,
        _ => false,
    }
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
    // By cross-memory attach (`cma.rs`) on processes of one node, a commutative operation:
    // forced on 3 processes or more, or by default where it measured faster
    // (`cma_by_default`). Every member decides alike (its first round finds out whether all
    // can copy).
    let forced_cma = f == Some("cma");
    let cma = (forced_cma || f.is_none() && count * dt.size() >= ALLREDUCE_CMA_FROM_OTHER)
        && op.is_commutative()
        && shmcoll::one_node(comm)?;
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
        let lin_ok = op.is_commutative() && count >= v.size as usize && v.size > 2;
        // A forced algorithm that cannot run here (and `shm`, which schedules never are) means
        // the default.
        let f = match f {
            Some("rabenseifner") if !rab_ok => None,
            Some("linear" | "cma") if !lin_ok => None,
            Some("shm" | "cma") => None,
            f => f,
        };
        let (size, commute) = (v.size, op.is_commutative());
        let (spp, rpp) = (Ptr(sp as *mut u8), Ptr(rp));
        let sched = move |b: &mut B| {
            let (sp, rp) = (spp.get().cast_const(), rpp.get());
            match f {
                Some("reduce_bcast") => {
                    algo::reduce_binomial(b, &t, 0, sp, rp, count, esz, commute);
                    algo::bcast_binomial(b, &t, 0, rp, count * esz, &bytes());
                }
                Some("rabenseifner") => algo::allreduce_rabenseifner(b, &t, sp, rp, count, esz),
                Some("linear") => algo::allreduce_linear(b, &t, sp, rp, count, esz),
                Some(_) => algo::allreduce_doubling(b, &t, sp, rp, count, esz),
                None if lin_ok
                    && size == ALLREDUCE_LINEAR_PROCS
                    && (REDUCE_LONG..ALLREDUCE_LINEAR_BELOW).contains(&(count * esz)) =>
                {
                    algo::allreduce_linear(b, &t, sp, rp, count, esz)
                }
                None if rab_ok && count * esz >= REDUCE_LONG => {
                    algo::allreduce_rabenseifner(b, &t, sp, rp, count, esz)
                }
                None => algo::allreduce_doubling(b, &t, sp, rp, count, esz),
            }
        };
        if cma && lin_ok && (forced_cma || cma_by_default(v.size, count * esz)) {
            let (od, t) = ((op.clone(), dt.clone()), v.team());
            cma::allreduce(b, &t, sp, rp, count, esz, shmcoll::nb_cma(v.id), od, sched);
        } else {
            sched(b);
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
    crate::comm::blocking_collective(|| {
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
    })
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
    crate::comm::blocking_collective(|| {
        finish(
            ireduce_scatter(send, recv, counts, dt, op, comm)?,
            "MPI_Reduce_scatter",
        )
    })
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
    crate::comm::blocking_collective(|| {
        finish(
            iscan(send, recv, count, dt, op, comm, exclusive)?,
            if exclusive { "MPI_Exscan" } else { "MPI_Scan" },
        )
    })
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
