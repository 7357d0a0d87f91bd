//! The rooted collectives: bcast, gather(v), scatter(v) and reduce.

// The argument lists are the C signatures.
#![allow(clippy::too_many_arguments)]

use super::*;

// Inlined: each form gets its own copy, with its mode known (the blocking one is short).
#[inline(always)]
pub(super) fn bcast_impl(
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

pub(super) fn gather_impl(
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
            not_own_nth(c, sbuf, rbuf, rcount, rdt, scount > 0)?;
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

pub(super) fn gatherv_impl(
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
        if ro == Role::Root {
            let at = |r: usize| Ok(displs(rdispls, r + 1, "displacements")?[r]);
            not_own_block(c, sbuf, rbuf, at, rdt, scount > 0)?;
        }
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

pub(super) fn scatter_impl(
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
            not_own_nth(c, rbuf, sbuf, scount, sdt, rcount > 0)?;
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

pub(super) fn scatterv_impl(
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
        if ro == Role::Root {
            let at = |r: usize| Ok(displs(sdispls, r + 1, "displacements")?[r]);
            not_own_block(c, rbuf, sbuf, at, sdt, rcount > 0)?;
        }
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

pub(super) fn reduce_impl(
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
