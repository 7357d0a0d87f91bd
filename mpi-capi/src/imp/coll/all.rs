//! The collectives without a root: allgather(v), alltoall(v/w), allreduce, reduce-scatter
//! (and its block form), scan and exscan, and MPI_Reduce_local.

// The argument lists are the C signatures.
#![allow(clippy::too_many_arguments)]

use super::*;

pub(super) fn allgather_impl(
    name: &str,
    sbuf: *const c_void,
    scount: i64,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendcount={scount}, sendtype={}, recvcount={rcount}, recvtype={}, comm={})",
            tname(sdt),
            tname(rdt),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let send = if in_place(sbuf) {
            None
        } else {
            Some(data(sbuf, scount, sdt)?)
        };
        let recv = data(rbuf, rcount, rdt)?;
        not_own_nth(c, sbuf, rbuf, rcount, rdt, scount > 0)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::allgather_init(send, recv, c)
            } else {
                madmpi::iallgather(send, recv, c)
            }
        }
    })
}

pub(super) fn allgatherv_impl(
    name: &str,
    sbuf: *const c_void,
    scount: i64,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcounts: Cnts,
    rdispls: Disp,
    rdt: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendcount={scount}, sendtype={}, recvtype={}, comm={})",
            tname(sdt),
            tname(rdt),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let send = if in_place(sbuf) {
            None
        } else {
            Some(data(sbuf, scount, sdt)?)
        };
        let recv = vblocks(rbuf, rcounts, rdispls, rdt, peers(c)?)?;
        let at = |r: usize| Ok(displs(rdispls, r + 1, "displacements")?[r]);
        not_own_block(c, sbuf, rbuf, at, rdt, scount > 0)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::allgatherv_init(send, recv, c)
            } else {
                madmpi::iallgatherv(send, recv, c)
            }
        }
    })
}

pub(super) fn alltoall_impl(
    name: &str,
    sbuf: *const c_void,
    scount: i64,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendcount={scount}, sendtype={}, recvcount={rcount}, recvtype={}, comm={})",
            tname(sdt),
            tname(rdt),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let send = if in_place(sbuf) {
            None
        } else {
            Some(data(sbuf, scount, sdt)?)
        };
        let recv = data(rbuf, rcount, rdt)?;
        not_aliased(sbuf, rbuf, scount > 0)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            match mode {
                Mode::Persistent => madmpi::alltoall_init(send, recv, c).map(Some),
                Mode::Nonblocking => madmpi::ialltoall(send, recv, c).map(Some),
                Mode::Blocking => madmpi::alltoall(send, recv, c).map(|()| None),
            }
        }
    })
}

pub(super) fn alltoallv_impl(
    name: &str,
    sbuf: *const c_void,
    scounts: Cnts,
    sdispls: Disp,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcounts: Cnts,
    rdispls: Disp,
    rdt: MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendtype={}, recvtype={}, comm={})",
            tname(sdt),
            tname(rdt),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let n = peers(c)?;
        let send = if in_place(sbuf) {
            None
        } else {
            Some(vblocks(sbuf, scounts, sdispls, sdt, n)?)
        };
        let recv = vblocks(rbuf, rcounts, rdispls, rdt, n)?;
        not_aliased_counts(sbuf, rbuf, scounts, n)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::alltoallw_init(send, recv, c)
            } else {
                madmpi::ialltoallw(send, recv, c)
            }
        }
    })
}

pub(super) fn alltoallw_impl(
    name: &str,
    sbuf: *const c_void,
    scounts: Cnts,
    sdispls: Disp,
    sdts: *const MPI_Datatype,
    rbuf: *mut c_void,
    rcounts: Cnts,
    rdispls: Disp,
    rdts: *const MPI_Datatype,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || format!("{name}(comm={})", cname(comm));
    issue(comm, req, mode, &call, |c| {
        let n = peers(c)?;
        let send = if in_place(sbuf) {
            None
        } else {
            Some(wblocks(sbuf, scounts, sdispls, sdts, n)?)
        };
        let recv = wblocks(rbuf, rcounts, rdispls, rdts, n)?;
        not_aliased_counts(sbuf, rbuf, scounts, n)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::alltoallw_init(send, recv, c)
            } else {
                madmpi::ialltoallw(send, recv, c)
            }
        }
    })
}

pub(super) fn allreduce_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || red_call(name, count, dt, op, comm);
    issue(comm, req, mode, &call, |c| {
        let n = count_arg(count)?;
        let d = handles::datatype(dt)?;
        let o = core_op(op, dt, &d)?;
        let input = red_input(sbuf, n, &d)?;
        check_buf(rbuf, n, &d)?;
        not_aliased(sbuf, rbuf, n > 0)?;
        let rb = rbuf as *mut u8;
        // SAFETY: as in bcast_impl.
        unsafe {
            match mode {
                Mode::Persistent => madmpi::allreduce_init(input, rb, n, &d, &o, c).map(Some),
                Mode::Nonblocking => madmpi::iallreduce(input, rb, n, &d, &o, c).map(Some),
                Mode::Blocking => madmpi::allreduce(input, rb, n, &d, &o, c).map(|()| None),
            }
        }
    })
}

#[inline(always)]
pub(super) fn scan_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    scan_any(name, sbuf, rbuf, count, dt, op, comm, req, mode, false)
}

#[inline(always)]
pub(super) fn exscan_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    scan_any(name, sbuf, rbuf, count, dt, op, comm, req, mode, true)
}

/// Inclusive (MPI_Scan) or exclusive (MPI_Exscan) scan.
fn scan_any(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
    exclusive: bool,
) -> c_int {
    let call = || red_call(name, count, dt, op, comm);
    issue(comm, req, mode, &call, |c| {
        let n = count_arg(count)?;
        let d = handles::datatype(dt)?;
        let o = core_op(op, dt, &d)?;
        let input = red_input(sbuf, n, &d)?;
        check_buf(rbuf, n, &d)?;
        not_aliased(sbuf, rbuf, n > 0)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::scan_init(input, rbuf as *mut u8, n, &d, &o, c, exclusive)
            } else {
                madmpi::iscan(input, rbuf as *mut u8, n, &d, &o, c, exclusive)
            }
        }
    })
}

#[inline(always)]
pub(super) fn reduce_scatter_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: Cnts,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    reduce_scatter_any(name, sbuf, rbuf, Some(rcounts), 0, dt, op, comm, req, mode)
}

#[inline(always)]
pub(super) fn reduce_scatter_block_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    recvcount: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    reduce_scatter_any(name, sbuf, rbuf, None, recvcount, dt, op, comm, req, mode)
}

/// Reduce-scatter; `counts` None is the block form with `block` elements each.
fn reduce_scatter_any(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    rcounts: Option<Cnts>,
    block: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || red_call(name, block, dt, op, comm);
    issue(comm, req, mode, &call, |c| {
        // One count per process of the (local) group, intercommunicators included: there the
        // other group's result is scattered over this group.
        let np = madmpi::comm_size(c)? as usize;
        let cs = match rcounts {
            Some(a) => counts(a, np, "recvcounts")?,
            None => vec![count_arg(block)?; np],
        };
        let d = handles::datatype(dt)?;
        let o = core_op(op, dt, &d)?;
        let total: usize = cs.iter().sum();
        let input = red_input(sbuf, total, &d)?;
        check_buf(rbuf, cs[madmpi::comm_rank(c)? as usize], &d)?;
        not_aliased(sbuf, rbuf, total > 0)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::reduce_scatter_init(input, rbuf as *mut u8, cs, &d, &o, c)
            } else {
                madmpi::ireduce_scatter(input, rbuf as *mut u8, cs, &d, &o, c)
            }
        }
    })
}

pub(super) fn reduce_local_impl(
    name: &str,
    inbuf: *const c_void,
    inout: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    let r = (|| {
        running()?;
        let n = count_arg(count)?;
        let d = handles::datatype(dt)?;
        let o = core_op(op, dt, &d)?;
        check_buf(inbuf, n, &d)?;
        check_buf(inout, n, &d)?;
        // SAFETY: both buffers hold `n` elements (the caller's contract).
        unsafe { madmpi::reduce_local(inbuf as *const u8, inout as *mut u8, n, &d, &o) }
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => crate::errors::raise(
            MPI_COMM_SELF,
            &|| {
                format!(
                    "{name}(count={count}, datatype={}, op={})",
                    tname(dt),
                    op_name(op)
                )
            },
            e,
        ),
    }
}
