//! The neighbourhood collectives of the process topologies.

// The argument lists are the C signatures.
#![allow(clippy::too_many_arguments)]

use super::*;

fn neighbor_impl(
    name: &str,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
    f: impl FnOnce(usize, usize) -> R<(Blocks, Blocks)>,
) -> c_int {
    let call = || format!("{name}(comm={})", cname(comm));
    issue(comm, req, mode, &call, |c| {
        let (ins, outs) = madmpi::neighbor_counts(c)?;
        let (s, r) = f(ins, outs)?;
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::neighbor_alltoallw_init(s, r, c)
            } else {
                madmpi::ineighbor_alltoallw(s, r, c)
            }
        }
    })
}

/// The same block for every destination.
fn same_blocks(d: Data, n: usize) -> Blocks {
    Blocks::w(d.ptr, vec![d.count; n], vec![0; n], vec![d.dt; n])
}

/// Consecutive blocks of `count` elements.
fn seq_blocks(d: Data, n: usize) -> Blocks {
    let ext = d.count as isize * d.dt.extent();
    Blocks::w(
        d.ptr,
        vec![d.count; n],
        (0..n as isize).map(|i| i * ext).collect(),
        vec![d.dt; n],
    )
}

pub(super) fn neighbor_allgather_impl(
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
    neighbor_impl(name, comm, req, mode, |ins, outs| {
        let s = same_blocks(data(sbuf, scount, sdt)?, outs);
        let r = seq_blocks(data(rbuf, rcount, rdt)?, ins);
        Ok((s, r))
    })
}

pub(super) fn neighbor_allgatherv_impl(
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
    neighbor_impl(name, comm, req, mode, |ins, outs| {
        let s = same_blocks(data(sbuf, scount, sdt)?, outs);
        let r = vblocks(rbuf, rcounts, rdispls, rdt, ins)?;
        Ok((s, r))
    })
}

pub(super) fn neighbor_alltoall_impl(
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
    neighbor_impl(name, comm, req, mode, |ins, outs| {
        let s = seq_blocks(data(sbuf, scount, sdt)?, outs);
        let r = seq_blocks(data(rbuf, rcount, rdt)?, ins);
        Ok((s, r))
    })
}

pub(super) fn neighbor_alltoallv_impl(
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
    neighbor_impl(name, comm, req, mode, |ins, outs| {
        let s = vblocks(sbuf, scounts, sdispls, sdt, outs)?;
        let r = vblocks(rbuf, rcounts, rdispls, rdt, ins)?;
        Ok((s, r))
    })
}

pub(super) fn neighbor_alltoallw_impl(
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
    neighbor_impl(name, comm, req, mode, |ins, outs| {
        let s = wblocks(sbuf, scounts, sdispls, sdts, outs)?;
        let r = wblocks(rbuf, rcounts, rdispls, rdts, ins)?;
        Ok((s, r))
    })
}
