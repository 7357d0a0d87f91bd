//! The rooted collectives: bcast, gather(v) and scatter(v), blocking, non-blocking and
//! persistent, each built as a point-to-point schedule (the blocking bcast tries the
//! shared-memory and direct paths first).
//!
//! This module owns the choice of algorithm and the schedule of these collectives only. It must
//! never hold the engine lock or send anything outside a schedule built through `start`, and it
//! must never choose an algorithm from a value the members do not all agree on.

use madmpi_datatypes::Datatype;

use crate::error::Result;
use crate::request::RequestId;
use crate::CommId;

use super::algo::Blk;
use super::sched::{Team, B};
use super::{
    algo, check_root, direct, finish, forced, inter, need, shmcoll, start, Blocks, Data, View,
    When, BCAST_LONG, BCAST_MIN_PROCS, GATHER_LONG, ROOT,
};

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
    crate::comm::blocking_collective(|| {
        if shmcoll::bcast(ptr, count, dt, root, comm)? {
            return Ok(());
        }
        bcast_p2p(Data::new(ptr, count, dt), root, comm)
    })
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
    crate::comm::blocking_collective(|| finish(igather(send, recv, root, comm)?, "MPI_Gather"))
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
    crate::comm::blocking_collective(|| finish(igatherv(send, recv, root, comm)?, "MPI_Gatherv"))
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
    crate::comm::blocking_collective(|| finish(iscatter(send, recv, root, comm)?, "MPI_Scatter"))
}

pub(super) fn scatterv_linear(
    b: &mut B,
    t: &Team,
    root: i32,
    send: Option<&Blocks>,
    recv: Option<&Data>,
) {
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
    crate::comm::blocking_collective(|| finish(iscatterv(send, recv, root, comm)?, "MPI_Scatterv"))
}
