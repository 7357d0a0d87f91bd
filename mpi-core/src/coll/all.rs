//! The all-to-all collectives without reduction: allgather(v), alltoall(v, w) and the
//! neighbourhood collectives, blocking, non-blocking and persistent, each built as a
//! point-to-point schedule (the blocking alltoall tries the shared-memory and direct paths
//! first).
//!
//! This module owns the choice of algorithm and the schedule of these collectives only. It must
//! never hold the engine lock or send anything outside a schedule built through `start`, and it
//! must never choose an algorithm from a value the members do not all agree on.

use crate::error::{err, ErrorClass, Result};
use crate::request::RequestId;
use crate::CommId;

use super::sched::{bytes, Team, B};
use super::{
    algo, direct, finish, forced, inter, need, shmcoll, start, Blocks, Data, View, When,
    ALLGATHER_LONG, ALLTOALL_LONG,
};

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
                let own = send.as_ref().map(|s| (s.ptr as *const u8, s.count, &s.dt));
                algo::allgather_ring(b, &t, &slot, own);
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
    crate::comm::blocking_collective(|| finish(iallgather(send, recv, comm)?, "MPI_Allgather"))
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
            let own = send.as_ref().map(|s| (s.ptr as *const u8, s.count, &s.dt));
            algo::allgather_ring(b, &t, &|i| recv.block(i), own);
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
    crate::comm::blocking_collective(|| finish(iallgatherv(send, recv, comm)?, "MPI_Allgatherv"))
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
    crate::comm::blocking_collective(|| {
        if shmcoll::alltoall(send.as_ref(), &recv, comm)?
            || direct::alltoall(send.as_ref(), &recv, comm)?
        {
            return Ok(());
        }
        finish(ialltoall(send, recv, comm)?, "MPI_Alltoall")
    })
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
    crate::comm::blocking_collective(|| finish(ialltoallw(send, recv, comm)?, "MPI_Alltoallw"))
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
    crate::comm::blocking_collective(|| {
        finish(
            ineighbor_alltoallw(send, recv, comm)?,
            "neighbourhood collective",
        )
    })
}

/// The number of (sources, destinations) of `comm`'s topology at this process.
pub fn neighbor_counts(comm: CommId) -> Result<(usize, usize)> {
    let topo = crate::topo::topo_of(comm)?;
    let me = crate::api::comm_rank(comm)?;
    let (s, d) = topo.neighbors(me);
    Ok((s.len(), d.len()))
}
