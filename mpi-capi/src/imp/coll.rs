//! Collective operations: blocking, non-blocking (`MPI_I*`, completed through MPI_Wait/Test
//! like any request), persistent (`MPI_*_init`, started by MPI_Start) and their large-count `_c`
//! twins, the neighbourhood collectives, and MPI_Reduce_local.
//!
//! Each function is a thin wrapper over one generic implementation per collective: it finds
//! out which arguments are significant at this process (the root's receive buffer, MPI_ROOT
//! and MPI_PROC_NULL on intercommunicators …), looks only those up (others may legitimately be
//! garbage), and makes one call into the core. Blocking forms start the operation and wait.

// The argument lists are the C signatures.
#![allow(clippy::too_many_arguments)]

use std::os::raw::{c_int, c_void};

use madmpi::{Blocks, CommId, Data, Datatype, ErrorClass, Input, RequestId};
use madmpi_datatypes::Basic;

use super::common::*;
use super::op::{op as core_op, op_name};
use crate::abi::*;
use crate::handles;

/// A counts argument: `int[]` or `MPI_Count[]`.
#[derive(Clone, Copy)]
enum Cnts {
    I(*const c_int),
    C(*const MPI_Count),
}

/// A displacements argument: `int[]` or `MPI_Aint[]`.
#[derive(Clone, Copy)]
enum Disp {
    I(*const c_int),
    A(*const MPI_Aint),
}

fn counts(a: Cnts, n: usize, what: &str) -> R<Vec<usize>> {
    let null = match a {
        Cnts::I(p) => p.is_null(),
        Cnts::C(p) => p.is_null(),
    };
    if n > 0 && null {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    (0..n)
        .map(|i| {
            // SAFETY: a non-null counts array has one entry per process (the caller's contract).
            let v = unsafe {
                match a {
                    Cnts::I(p) => *p.add(i) as i64,
                    Cnts::C(p) => *p.add(i),
                }
            };
            count_arg(v)
        })
        .collect()
}

fn displs(a: Disp, n: usize, what: &str) -> R<Vec<isize>> {
    let null = match a {
        Disp::I(p) => p.is_null(),
        Disp::A(p) => p.is_null(),
    };
    if n > 0 && null {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    Ok((0..n)
        .map(|i| {
            // SAFETY: as in `counts`.
            unsafe {
                match a {
                    Disp::I(p) => *p.add(i) as isize,
                    Disp::A(p) => *p.add(i),
                }
            }
        })
        .collect())
}

fn types(a: *const MPI_Datatype, n: usize, what: &str) -> R<Vec<Datatype>> {
    if n > 0 && a.is_null() {
        return fail(ErrorClass::Arg, format!("invalid argument: {what} is NULL"));
    }
    (0..n)
        // SAFETY: as in `counts`.
        .map(|i| handles::datatype(unsafe { *a.add(i) }).map(|d| (*d).clone()))
        .collect()
}

fn in_place(p: *const c_void) -> bool {
    std::ptr::eq(p, MPI_IN_PLACE)
}

/// The send buffer passed again as the receive buffer, where MPI_IN_PLACE is the way to say so:
/// MPI forbids aliased output arguments (MPI_ERR_BUFFER, as in MPICH). `moves` says whether
/// data would move at all; MPI_BOTTOM (NULL) twice is two sets of absolute addresses.
fn not_aliased(sbuf: *const c_void, rbuf: *const c_void, moves: bool) -> R<()> {
    if moves && !sbuf.is_null() && std::ptr::eq(sbuf, rbuf) {
        return fail(
            ErrorClass::Buffer,
            "invalid buffers: the send buffer is also the receive buffer (pass MPI_IN_PLACE as \
             the send buffer instead)",
        );
    }
    Ok(())
}

/// A checked buffer argument: its count and its datatype (borrowed when predefined).
#[inline(always)]
fn checked(buf: *const c_void, count: i64, dt: MPI_Datatype) -> R<(usize, handles::DtRef)> {
    let n = count_arg(count)?;
    let d = handles::datatype(dt)?;
    check_buf(buf, n, &d)?;
    Ok((n, d))
}

/// A checked buffer argument.
fn data(buf: *const c_void, count: i64, dt: MPI_Datatype) -> R<Data> {
    let (n, d) = checked(buf, count, dt)?;
    Ok(Data::new(buf as *const u8, n, &d))
}

/// Blocks of the v form (displacements in extents of `dt`).
fn vblocks(buf: *const c_void, c: Cnts, d: Disp, dt: MPI_Datatype, n: usize) -> R<Blocks> {
    let dt = handles::datatype(dt)?;
    let counts = counts(c, n, "counts")?;
    let displs = displs(d, n, "displacements")?;
    check_buf(buf, counts.iter().sum(), &dt)?;
    Ok(Blocks::v(buf as *const u8, counts, &displs, &dt))
}

/// Blocks of the w form (byte displacements, a type per block).
fn wblocks(buf: *const c_void, c: Cnts, d: Disp, t: *const MPI_Datatype, n: usize) -> R<Blocks> {
    let counts = counts(c, n, "counts")?;
    let displs = displs(d, n, "displacements")?;
    let dts = types(t, n, "datatypes")?;
    // Byte displacements from MPI_BOTTOM (NULL) are absolute addresses: only MPI_IN_PLACE is
    // refused here.
    refuse_in_place(buf, counts.iter().any(|&k| k > 0))?;
    Ok(Blocks::w(buf as *const u8, counts, displs, dts))
}

/// Where this process stands in a rooted collective.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The root of an intracommunicator.
    Root,
    /// Another process of an intracommunicator.
    Other,
    /// MPI_ROOT on an intercommunicator.
    InterRoot,
    /// MPI_PROC_NULL on an intercommunicator (takes no part).
    InterIdle,
    /// A process of the group the root is not in.
    InterLeaf,
}

fn role(c: CommId, root: c_int) -> R<Role> {
    let (inter, rank) = madmpi::comm_role(c)?;
    if inter {
        Ok(match root {
            MPI_ROOT => Role::InterRoot,
            MPI_PROC_NULL => Role::InterIdle,
            _ => Role::InterLeaf,
        })
    } else if rank == root {
        Ok(Role::Root)
    } else {
        Ok(Role::Other)
    }
}

/// Peers of a collective: the group size, or the remote group's.
fn peers(c: CommId) -> R<usize> {
    let i = madmpi::comm_info(c)?;
    Ok(i.remote.as_ref().map_or(i.local.len(), |r| r.len()))
}

/// Blocking, non-blocking (`MPI_I*`) or persistent (`MPI_*_init`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Blocking,
    Nonblocking,
    Persistent,
}

/// What starting a collective gives: its request, or (`None`) nothing to wait for because a
/// blocking form already ran to completion (the shared-memory collectives).
trait Started {
    fn request(self) -> Option<RequestId>;
}

impl Started for RequestId {
    fn request(self) -> Option<RequestId> {
        Some(self)
    }
}

impl Started for Option<RequestId> {
    fn request(self) -> Option<RequestId> {
        self
    }
}

/// Start a collective with `f` (or create its persistent request) and either wait for it or
/// hand out its request.
fn issue<T: Started>(
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
    call: &dyn Fn() -> String,
    f: impl FnOnce(CommId) -> R<T>,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        if mode != Mode::Blocking {
            out(req, "request")?;
        }
        let Some(rid) = f(c)?.request() else {
            if mode == Mode::Blocking {
                return Ok(());
            }
            return fail(
                ErrorClass::Intern,
                "a non-blocking collective completed without a request",
            );
        };
        if mode == Mode::Blocking {
            let s = madmpi::wait(rid)?;
            if let Some(cl) = s.error {
                return fail(
                    cl,
                    format!(
                        "a point-to-point step of the collective failed ({})",
                        cl.mpi_name()
                    ),
                );
            }
        } else {
            let h = handles::new_request(rid, comm)?;
            // SAFETY: checked non-null above.
            unsafe { *req = h };
        }
        Ok(())
    })();
    finish(comm, r, call)
}

fn cname(comm: MPI_Comm) -> String {
    handles::comm_name(comm)
}

fn tname(dt: MPI_Datatype) -> String {
    handles::type_name(dt)
}

// ------------------------------------------------------------------------------------ generic

fn barrier_impl(name: &str, comm: MPI_Comm, req: *mut MPI_Request, mode: Mode) -> c_int {
    issue(
        comm,
        req,
        mode,
        &|| format!("{name}(comm={})", cname(comm)),
        |c| match mode {
            Mode::Persistent => madmpi::barrier_init(c).map(Some),
            Mode::Nonblocking => madmpi::ibarrier(c).map(Some),
            Mode::Blocking => madmpi::barrier(c).map(|()| None),
        },
    )
}

// Inlined: each form gets its own copy, with its mode known (the blocking one is short).
#[inline(always)]
fn bcast_impl(
    name: &str,
    buf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(count={count}, datatype={}, root={}, comm={})",
            tname(dt),
            rank_name(root),
            cname(comm)
        )
    };
    if mode == Mode::Blocking {
        return match bcast_now(buf, count, dt, root, comm) {
            Ok(()) => MPI_SUCCESS,
            r => finish(comm, r, &call),
        };
    }
    issue(comm, req, mode, &call, |c| {
        let d = if bcast_idle(c, root)? {
            Data::new(std::ptr::null(), 0, &Datatype::basic(Basic::Byte))
        } else {
            data(buf, count, dt)?
        };
        // SAFETY: the buffer stays valid until the operation completes (MPI's rule).
        unsafe {
            if mode == Mode::Persistent {
                madmpi::bcast_init(d, root, c)
            } else {
                madmpi::ibcast(d, root, c)
            }
        }
    })
}

/// Whether this process takes no part in a broadcast from `root`: MPI_PROC_NULL on an
/// intercommunicator, the only case where the buffer arguments are not significant (they may
/// be garbage). The communicator's kind, which takes the engine lock, is asked only then.
#[inline(always)]
fn bcast_idle(c: CommId, root: c_int) -> R<bool> {
    Ok(root == MPI_PROC_NULL && role(c, root)? == Role::InterIdle)
}

/// MPI_Bcast: the blocking form in one piece, its datatype borrowed (most often a predefined
/// one: no reference count changes), which keeps the shared-memory path short.
#[inline(always)]
fn bcast_now(buf: *mut c_void, count: i64, dt: MPI_Datatype, root: c_int, comm: MPI_Comm) -> R<()> {
    let c = handles::comm(comm)?;
    // SAFETY: the buffer stays valid until the call returns.
    unsafe {
        if bcast_idle(c, root)? {
            return madmpi::bcast(
                std::ptr::null_mut(),
                0,
                &Datatype::basic(Basic::Byte),
                root,
                c,
            );
        }
        let (n, d) = checked(buf, count, dt)?;
        madmpi::bcast(buf.cast(), n, &d, root, c)
    }
}

fn gather_impl(
    name: &str,
    sbuf: *const c_void,
    scount: i64,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendcount={scount}, sendtype={}, recvcount={rcount}, recvtype={}, root={}, comm={})",
            tname(sdt),
            tname(rdt),
            rank_name(root),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let ro = role(c, root)?;
        let recv = match ro {
            Role::Root | Role::InterRoot => Some(data(rbuf, rcount, rdt)?),
            _ => None,
        };
        let send = match ro {
            Role::Root if in_place(sbuf) => None,
            Role::Root | Role::Other | Role::InterLeaf => Some(data(sbuf, scount, sdt)?),
            _ => None,
        };
        if ro == Role::Root {
            not_aliased(sbuf, rbuf, scount > 0)?;
        }
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::gather_init(send, recv, root, c)
            } else {
                madmpi::igather(send, recv, root, c)
            }
        }
    })
}

fn gatherv_impl(
    name: &str,
    sbuf: *const c_void,
    scount: i64,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcounts: Cnts,
    rdispls: Disp,
    rdt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendcount={scount}, sendtype={}, recvtype={}, root={}, comm={})",
            tname(sdt),
            tname(rdt),
            rank_name(root),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let ro = role(c, root)?;
        let recv = match ro {
            Role::Root | Role::InterRoot => Some(vblocks(rbuf, rcounts, rdispls, rdt, peers(c)?)?),
            _ => None,
        };
        let send = match ro {
            Role::Root if in_place(sbuf) => None,
            Role::Root | Role::Other | Role::InterLeaf => Some(data(sbuf, scount, sdt)?),
            _ => None,
        };
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::gatherv_init(send, recv, root, c)
            } else {
                madmpi::igatherv(send, recv, root, c)
            }
        }
    })
}

fn scatter_impl(
    name: &str,
    sbuf: *const c_void,
    scount: i64,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendcount={scount}, sendtype={}, recvcount={rcount}, recvtype={}, root={}, comm={})",
            tname(sdt),
            tname(rdt),
            rank_name(root),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let ro = role(c, root)?;
        let send = match ro {
            Role::Root | Role::InterRoot => Some(data(sbuf, scount, sdt)?),
            _ => None,
        };
        let recv = match ro {
            Role::Root if in_place(rbuf) => None,
            Role::Root | Role::Other | Role::InterLeaf => Some(data(rbuf, rcount, rdt)?),
            _ => None,
        };
        if ro == Role::Root {
            not_aliased(sbuf, rbuf, rcount > 0)?;
        }
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::scatter_init(send, recv, root, c)
            } else {
                madmpi::iscatter(send, recv, root, c)
            }
        }
    })
}

fn scatterv_impl(
    name: &str,
    sbuf: *const c_void,
    scounts: Cnts,
    sdispls: Disp,
    sdt: MPI_Datatype,
    rbuf: *mut c_void,
    rcount: i64,
    rdt: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{name}(sendtype={}, recvcount={rcount}, recvtype={}, root={}, comm={})",
            tname(sdt),
            tname(rdt),
            rank_name(root),
            cname(comm)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let ro = role(c, root)?;
        let send = match ro {
            Role::Root | Role::InterRoot => Some(vblocks(sbuf, scounts, sdispls, sdt, peers(c)?)?),
            _ => None,
        };
        let recv = match ro {
            Role::Root if in_place(rbuf) => None,
            Role::Root | Role::Other | Role::InterLeaf => Some(data(rbuf, rcount, rdt)?),
            _ => None,
        };
        // SAFETY: as in bcast_impl.
        unsafe {
            if mode == Mode::Persistent {
                madmpi::scatterv_init(send, recv, root, c)
            } else {
                madmpi::iscatterv(send, recv, root, c)
            }
        }
    })
}

fn allgather_impl(
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
            if mode == Mode::Persistent {
                madmpi::allgather_init(send, recv, c)
            } else {
                madmpi::iallgather(send, recv, c)
            }
        }
    })
}

fn allgatherv_impl(
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

fn alltoall_impl(
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

fn alltoallv_impl(
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

fn alltoallw_impl(
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

fn red_call(name: &str, count: i64, dt: MPI_Datatype, op: MPI_Op, comm: MPI_Comm) -> String {
    format!(
        "{name}(count={count}, datatype={}, op={}, comm={})",
        tname(dt),
        op_name(op),
        cname(comm)
    )
}

/// The checked input of a reduction.
fn red_input(sbuf: *const c_void, n: usize, d: &Datatype) -> R<Input> {
    if in_place(sbuf) {
        return Ok(Input::InPlace);
    }
    check_buf(sbuf, n, d)?;
    Ok(Input::Buf(sbuf as *const u8))
}

fn reduce_impl(
    name: &str,
    sbuf: *const c_void,
    rbuf: *mut c_void,
    count: i64,
    dt: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    req: *mut MPI_Request,
    mode: Mode,
) -> c_int {
    let call = || {
        format!(
            "{} root={}",
            red_call(name, count, dt, op, comm),
            rank_name(root)
        )
    };
    issue(comm, req, mode, &call, |c| {
        let ro = role(c, root)?;
        if ro == Role::InterIdle {
            // MPI_PROC_NULL on an intercommunicator: no buffer, count, datatype or operation
            // is significant (they may be garbage, or an operation the datatype does not
            // have): checking them would fail here alone while the others go on.
            let byte = Datatype::basic(Basic::Byte);
            let o = madmpi::Op::Builtin(madmpi::BuiltinOp::Bor);
            let (np, rb) = (std::ptr::null(), std::ptr::null_mut());
            // SAFETY: nothing is read or written.
            return unsafe {
                match mode {
                    Mode::Persistent => {
                        madmpi::reduce_init(Input::Buf(np), rb, 0, &byte, &o, root, c).map(Some)
                    }
                    Mode::Nonblocking => {
                        madmpi::ireduce(Input::Buf(np), rb, 0, &byte, &o, root, c).map(Some)
                    }
                    Mode::Blocking => {
                        madmpi::reduce(Input::Buf(np), rb, 0, &byte, &o, root, c).map(|()| None)
                    }
                }
            };
        }
        let n = count_arg(count)?;
        let d = handles::datatype(dt)?;
        let o = core_op(op, dt, &d)?;
        let input = match ro {
            Role::InterRoot | Role::InterIdle => Input::Buf(std::ptr::null()),
            Role::Root => red_input(sbuf, n, &d)?,
            // MPI_IN_PLACE is the root's only.
            Role::Other | Role::InterLeaf => {
                check_buf(sbuf, n, &d)?;
                Input::Buf(sbuf as *const u8)
            }
        };
        if matches!(ro, Role::Root | Role::InterRoot) {
            check_buf(rbuf, n, &d)?;
        }
        if ro == Role::Root {
            not_aliased(sbuf, rbuf, n > 0)?;
        }
        let rb = rbuf as *mut u8;
        // SAFETY: as in bcast_impl.
        unsafe {
            match mode {
                Mode::Persistent => madmpi::reduce_init(input, rb, n, &d, &o, root, c).map(Some),
                Mode::Nonblocking => madmpi::ireduce(input, rb, n, &d, &o, root, c).map(Some),
                Mode::Blocking => madmpi::reduce(input, rb, n, &d, &o, root, c).map(|()| None),
            }
        }
    })
}

fn allreduce_impl(
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

fn scan_impl(
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

/// Reduce-scatter; `counts` None is the block form with `block` elements each.
fn reduce_scatter_impl(
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

fn reduce_local_impl(
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

// ------------------------------------------------------------------------------------ neighbours

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

fn neighbor_allgather_impl(
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

fn neighbor_allgatherv_impl(
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

fn neighbor_alltoall_impl(
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

fn neighbor_alltoallv_impl(
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

fn neighbor_alltoallw_impl(
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

// ------------------------------------------------------------------------------------ functions
// One wrapper per C function (the build finds them by their `fn MPI_Xxx(` text).

const NOREQ: *mut MPI_Request = std::ptr::null_mut();

// MPI_Barrier is in `comm.rs` (it calls the same core barrier).

pub unsafe fn MPI_Ibarrier(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    barrier_impl("MPI_Ibarrier", comm, request, Mode::Nonblocking)
}

pub unsafe fn MPI_Barrier_init(comm: MPI_Comm, info: MPI_Info, request: *mut MPI_Request) -> c_int {
    let _ = info; // no hints are used
    barrier_impl("MPI_Barrier_init", comm, request, Mode::Persistent)
}

pub unsafe fn MPI_Bcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    bcast_impl(
        "MPI_Bcast",
        buffer,
        count as i64,
        datatype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Bcast_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    bcast_impl(
        "MPI_Bcast_c",
        buffer,
        count,
        datatype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ibcast(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    bcast_impl(
        "MPI_Ibcast",
        buffer,
        count as i64,
        datatype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ibcast_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    bcast_impl(
        "MPI_Ibcast_c",
        buffer,
        count,
        datatype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Bcast_init(
    buffer: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    bcast_impl(
        "MPI_Bcast_init",
        buffer,
        count as i64,
        datatype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Bcast_init_c(
    buffer: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    bcast_impl(
        "MPI_Bcast_init_c",
        buffer,
        count,
        datatype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Gather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    gather_impl(
        "MPI_Gather",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Gather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    gather_impl(
        "MPI_Gather_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Igather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    gather_impl(
        "MPI_Igather",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Igather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    gather_impl(
        "MPI_Igather_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Gather_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    gather_impl(
        "MPI_Gather_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Gather_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    gather_impl(
        "MPI_Gather_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Gatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    gatherv_impl(
        "MPI_Gatherv",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Gatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    gatherv_impl(
        "MPI_Gatherv_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Igatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    gatherv_impl(
        "MPI_Igatherv",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Igatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    gatherv_impl(
        "MPI_Igatherv_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Gatherv_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    gatherv_impl(
        "MPI_Gatherv_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Gatherv_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    gatherv_impl(
        "MPI_Gatherv_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Scatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    scatter_impl(
        "MPI_Scatter",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Scatter_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    scatter_impl(
        "MPI_Scatter_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Iscatter(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scatter_impl(
        "MPI_Iscatter",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Iscatter_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scatter_impl(
        "MPI_Iscatter_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Scatter_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scatter_impl(
        "MPI_Scatter_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Scatter_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scatter_impl(
        "MPI_Scatter_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Scatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    scatterv_impl(
        "MPI_Scatterv",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(displs),
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Scatterv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    scatterv_impl(
        "MPI_Scatterv_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(displs),
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Iscatterv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scatterv_impl(
        "MPI_Iscatterv",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(displs),
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Iscatterv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scatterv_impl(
        "MPI_Iscatterv_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(displs),
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Scatterv_init(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    displs: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scatterv_impl(
        "MPI_Scatterv_init",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(displs),
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Scatterv_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scatterv_impl(
        "MPI_Scatterv_init_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(displs),
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    allgather_impl(
        "MPI_Allgather",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Allgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    allgather_impl(
        "MPI_Allgather_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Iallgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    allgather_impl(
        "MPI_Iallgather",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Iallgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    allgather_impl(
        "MPI_Iallgather_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Allgather_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    allgather_impl(
        "MPI_Allgather_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Allgather_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    allgather_impl(
        "MPI_Allgather_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    allgatherv_impl(
        "MPI_Allgatherv",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    allgatherv_impl(
        "MPI_Allgatherv_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Iallgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    allgatherv_impl(
        "MPI_Iallgatherv",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Iallgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    allgatherv_impl(
        "MPI_Iallgatherv_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Allgatherv_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    allgatherv_impl(
        "MPI_Allgatherv_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Allgatherv_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    allgatherv_impl(
        "MPI_Allgatherv_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    alltoall_impl(
        "MPI_Alltoall",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Alltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    alltoall_impl(
        "MPI_Alltoall_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ialltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    alltoall_impl(
        "MPI_Ialltoall",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ialltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    alltoall_impl(
        "MPI_Ialltoall_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Alltoall_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    alltoall_impl(
        "MPI_Alltoall_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Alltoall_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    alltoall_impl(
        "MPI_Alltoall_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    alltoallv_impl(
        "MPI_Alltoallv",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Alltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    alltoallv_impl(
        "MPI_Alltoallv_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ialltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    alltoallv_impl(
        "MPI_Ialltoallv",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ialltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    alltoallv_impl(
        "MPI_Ialltoallv_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Alltoallv_init(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    alltoallv_impl(
        "MPI_Alltoallv_init",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Alltoallv_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    alltoallv_impl(
        "MPI_Alltoallv_init_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    alltoallw_impl(
        "MPI_Alltoallw",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtypes,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtypes,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    alltoallw_impl(
        "MPI_Alltoallw_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ialltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    alltoallw_impl(
        "MPI_Ialltoallw",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtypes,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ialltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    alltoallw_impl(
        "MPI_Ialltoallw_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Alltoallw_init(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    alltoallw_impl(
        "MPI_Alltoallw_init",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtypes,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Alltoallw_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    alltoallw_impl(
        "MPI_Alltoallw_init_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Reduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    reduce_impl(
        "MPI_Reduce",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Reduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
) -> c_int {
    reduce_impl(
        "MPI_Reduce_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        root,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ireduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    reduce_impl(
        "MPI_Ireduce",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ireduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    reduce_impl(
        "MPI_Ireduce_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        root,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Reduce_init(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    reduce_impl(
        "MPI_Reduce_init",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Reduce_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    root: c_int,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    reduce_impl(
        "MPI_Reduce_init_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        root,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Allreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    allreduce_impl(
        "MPI_Allreduce",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Allreduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    allreduce_impl(
        "MPI_Allreduce_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Iallreduce(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    allreduce_impl(
        "MPI_Iallreduce",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Iallreduce_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    allreduce_impl(
        "MPI_Iallreduce_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Allreduce_init(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    allreduce_impl(
        "MPI_Allreduce_init",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Allreduce_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    allreduce_impl(
        "MPI_Allreduce_init_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Reduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Reduce_scatter",
        sendbuf,
        recvbuf,
        Some(Cnts::I(recvcounts)),
        0,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Reduce_scatter_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Reduce_scatter_c",
        sendbuf,
        recvbuf,
        Some(Cnts::C(recvcounts)),
        0,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ireduce_scatter(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Ireduce_scatter",
        sendbuf,
        recvbuf,
        Some(Cnts::I(recvcounts)),
        0,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ireduce_scatter_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Ireduce_scatter_c",
        sendbuf,
        recvbuf,
        Some(Cnts::C(recvcounts)),
        0,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Reduce_scatter_init(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    reduce_scatter_impl(
        "MPI_Reduce_scatter_init",
        sendbuf,
        recvbuf,
        Some(Cnts::I(recvcounts)),
        0,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Reduce_scatter_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    reduce_scatter_impl(
        "MPI_Reduce_scatter_init_c",
        sendbuf,
        recvbuf,
        Some(Cnts::C(recvcounts)),
        0,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Reduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Reduce_scatter_block",
        sendbuf,
        recvbuf,
        None,
        recvcount as i64,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Reduce_scatter_block_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Reduce_scatter_block_c",
        sendbuf,
        recvbuf,
        None,
        recvcount,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ireduce_scatter_block(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Ireduce_scatter_block",
        sendbuf,
        recvbuf,
        None,
        recvcount as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ireduce_scatter_block_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    reduce_scatter_impl(
        "MPI_Ireduce_scatter_block_c",
        sendbuf,
        recvbuf,
        None,
        recvcount,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Reduce_scatter_block_init(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    reduce_scatter_impl(
        "MPI_Reduce_scatter_block_init",
        sendbuf,
        recvbuf,
        None,
        recvcount as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Reduce_scatter_block_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    reduce_scatter_impl(
        "MPI_Reduce_scatter_block_init_c",
        sendbuf,
        recvbuf,
        None,
        recvcount,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Scan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    scan_impl(
        "MPI_Scan",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
        false,
    )
}

pub unsafe fn MPI_Scan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    scan_impl(
        "MPI_Scan_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
        false,
    )
}

pub unsafe fn MPI_Iscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scan_impl(
        "MPI_Iscan",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
        false,
    )
}

pub unsafe fn MPI_Iscan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scan_impl(
        "MPI_Iscan_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
        false,
    )
}

pub unsafe fn MPI_Scan_init(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scan_impl(
        "MPI_Scan_init",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
        false,
    )
}

pub unsafe fn MPI_Scan_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scan_impl(
        "MPI_Scan_init_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
        false,
    )
}

pub unsafe fn MPI_Exscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    scan_impl(
        "MPI_Exscan",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
        true,
    )
}

pub unsafe fn MPI_Exscan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
) -> c_int {
    scan_impl(
        "MPI_Exscan_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        NOREQ,
        Mode::Blocking,
        true,
    )
}

pub unsafe fn MPI_Iexscan(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scan_impl(
        "MPI_Iexscan",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
        true,
    )
}

pub unsafe fn MPI_Iexscan_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    scan_impl(
        "MPI_Iexscan_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        request,
        Mode::Nonblocking,
        true,
    )
}

pub unsafe fn MPI_Exscan_init(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scan_impl(
        "MPI_Exscan_init",
        sendbuf,
        recvbuf,
        count as i64,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
        true,
    )
}

pub unsafe fn MPI_Exscan_init_c(
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    scan_impl(
        "MPI_Exscan_init_c",
        sendbuf,
        recvbuf,
        count,
        datatype,
        op,
        comm,
        request,
        Mode::Persistent,
        true,
    )
}

pub unsafe fn MPI_Reduce_local(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    reduce_local_impl(
        "MPI_Reduce_local",
        inbuf,
        inoutbuf,
        count as i64,
        datatype,
        op,
    )
}

pub unsafe fn MPI_Reduce_local_c(
    inbuf: *const c_void,
    inoutbuf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    op: MPI_Op,
) -> c_int {
    reduce_local_impl("MPI_Reduce_local_c", inbuf, inoutbuf, count, datatype, op)
}

pub unsafe fn MPI_Neighbor_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_allgather_impl(
        "MPI_Neighbor_allgather",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Neighbor_allgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_allgather_impl(
        "MPI_Neighbor_allgather_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ineighbor_allgather(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_allgather_impl(
        "MPI_Ineighbor_allgather",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ineighbor_allgather_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_allgather_impl(
        "MPI_Ineighbor_allgather_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Neighbor_allgather_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_allgather_impl(
        "MPI_Neighbor_allgather_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_allgather_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_allgather_impl(
        "MPI_Neighbor_allgather_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_allgatherv_impl(
        "MPI_Neighbor_allgatherv",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Neighbor_allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_allgatherv_impl(
        "MPI_Neighbor_allgatherv_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ineighbor_allgatherv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_allgatherv_impl(
        "MPI_Ineighbor_allgatherv",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ineighbor_allgatherv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_allgatherv_impl(
        "MPI_Ineighbor_allgatherv_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Neighbor_allgatherv_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    displs: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_allgatherv_impl(
        "MPI_Neighbor_allgatherv_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(displs),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_allgatherv_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    displs: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_allgatherv_impl(
        "MPI_Neighbor_allgatherv_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(displs),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_alltoall_impl(
        "MPI_Neighbor_alltoall",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Neighbor_alltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_alltoall_impl(
        "MPI_Neighbor_alltoall_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ineighbor_alltoall(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_alltoall_impl(
        "MPI_Ineighbor_alltoall",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ineighbor_alltoall_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_alltoall_impl(
        "MPI_Ineighbor_alltoall_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Neighbor_alltoall_init(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_alltoall_impl(
        "MPI_Neighbor_alltoall_init",
        sendbuf,
        sendcount as i64,
        sendtype,
        recvbuf,
        recvcount as i64,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_alltoall_init_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_alltoall_impl(
        "MPI_Neighbor_alltoall_init_c",
        sendbuf,
        sendcount,
        sendtype,
        recvbuf,
        recvcount,
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_alltoallv_impl(
        "MPI_Neighbor_alltoallv",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Neighbor_alltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_alltoallv_impl(
        "MPI_Neighbor_alltoallv_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtype,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ineighbor_alltoallv(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_alltoallv_impl(
        "MPI_Ineighbor_alltoallv",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ineighbor_alltoallv_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_alltoallv_impl(
        "MPI_Ineighbor_alltoallv_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtype,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Neighbor_alltoallv_init(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const c_int,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const c_int,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_alltoallv_impl(
        "MPI_Neighbor_alltoallv_init",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::I(sdispls),
        sendtype,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::I(rdispls),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_alltoallv_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtype: MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtype: MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_alltoallv_impl(
        "MPI_Neighbor_alltoallv_init_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtype,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtype,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_alltoallw_impl(
        "MPI_Neighbor_alltoallw",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Neighbor_alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
) -> c_int {
    neighbor_alltoallw_impl(
        "MPI_Neighbor_alltoallw_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        NOREQ,
        Mode::Blocking,
    )
}

pub unsafe fn MPI_Ineighbor_alltoallw(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_alltoallw_impl(
        "MPI_Ineighbor_alltoallw",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Ineighbor_alltoallw_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    neighbor_alltoallw_impl(
        "MPI_Ineighbor_alltoallw_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Nonblocking,
    )
}

pub unsafe fn MPI_Neighbor_alltoallw_init(
    sendbuf: *const c_void,
    sendcounts: *const c_int,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const c_int,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_alltoallw_impl(
        "MPI_Neighbor_alltoallw_init",
        sendbuf,
        Cnts::I(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::I(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Persistent,
    )
}

pub unsafe fn MPI_Neighbor_alltoallw_init_c(
    sendbuf: *const c_void,
    sendcounts: *const MPI_Count,
    sdispls: *const MPI_Aint,
    sendtypes: *const MPI_Datatype,
    recvbuf: *mut c_void,
    recvcounts: *const MPI_Count,
    rdispls: *const MPI_Aint,
    recvtypes: *const MPI_Datatype,
    comm: MPI_Comm,
    info: MPI_Info,
    request: *mut MPI_Request,
) -> c_int {
    let _ = info; // no hints are used
    neighbor_alltoallw_impl(
        "MPI_Neighbor_alltoallw_init_c",
        sendbuf,
        Cnts::C(sendcounts),
        Disp::A(sdispls),
        sendtypes,
        recvbuf,
        Cnts::C(recvcounts),
        Disp::A(rdispls),
        recvtypes,
        comm,
        request,
        Mode::Persistent,
    )
}
