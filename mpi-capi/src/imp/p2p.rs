//! Point-to-point communication: the send modes, receives, send-receive, persistent request
//! creation, probes and matched receives.
//!
//! Every function with an `int` count has an `_c` twin with an `MPI_Count`; both go through the
//! same code with an `i64` count.

use std::os::raw::{c_int, c_void};
use std::ptr::NonNull;

use madmpi::{Datatype, SendMode};

use super::common::*;
use crate::abi::*;
use crate::errors;
use crate::handles;

// ------------------------------------------------------------------------------------ sends

#[allow(clippy::too_many_arguments)]
unsafe fn send(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    mode: SendMode,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        // SAFETY: the user's buffer holds `count` elements of `datatype` for the whole call.
        unsafe { madmpi::send(buf as *const u8, n, &dt, dest, tag, c, mode) }
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => errors::raise(
            comm,
            &|| p2p_call(name, count, datatype, "dest", dest, tag, comm),
            e,
        ),
    }
}

/// The arguments of a point-to-point call that can take the fast path: a non-negative count of
/// a predefined datatype, a buffer that is neither NULL nor MPI_IN_PLACE when it holds data, a
/// live communicator. Anything else (including every error) takes the checked path.
#[inline(always)]
fn fast_args(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    comm: MPI_Comm,
) -> Option<(usize, &'static Datatype, madmpi::CommId)> {
    // MPI_IN_PLACE is address 1: one comparison covers it and NULL.
    if count < 0 || ((buf as usize) <= MPI_IN_PLACE as usize && count > 0) {
        return None;
    }
    let dt = handles::predefined_type(datatype)?;
    Some((count as usize, dt, handles::comm_live(comm)?))
}

#[allow(clippy::too_many_arguments)]
unsafe fn isend(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    mode: SendMode,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps the buffer valid until the request completes (MPI's rule).
        let rid = unsafe { madmpi::isend(buf as *const u8, n, &dt, dest, tag, c, mode)? };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    match r {
        Ok(()) => MPI_SUCCESS,
        Err(e) => errors::raise(
            comm,
            &|| p2p_call(name, count, datatype, "dest", dest, tag, comm),
            e,
        ),
    }
}

/// How a receive of the fast path is named in an error message.
fn recv_call(
    name: &str,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> String {
    p2p_call(name, count.into(), datatype, "source", source, tag, comm)
}

/// Give the request of a fast path its handle, at `request` (not NULL). (The caller raises
/// the error: the text naming the call is then built only on that path.)
#[inline(always)]
fn new_request_at(
    request: *mut MPI_Request,
    rid: madmpi::RequestId,
    comm: MPI_Comm,
) -> Result<(), madmpi::Error> {
    let h = handles::new_request(rid, comm)?;
    // SAFETY: checked non-null by `fast_args`; the caller's storage for a handle.
    unsafe { *request = h };
    Ok(())
}

// The build finds implementations by their `fn MPI_Xxx(` text: no macros for these.

pub unsafe fn MPI_Send(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    if let Some((n, dt, c)) = fast_args(buf, count, datatype, comm) {
        // SAFETY: the user's buffer holds `count` elements of `datatype` for the whole call.
        if unsafe { madmpi::send_now(buf as *const u8, n, dt, dest, tag, c) } {
            return MPI_SUCCESS;
        }
    }
    send(
        "MPI_Send",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )
}

pub unsafe fn MPI_Send_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Send_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Standard,
    )
}

pub unsafe fn MPI_Isend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let args = fast_args(buf, count, datatype, comm).filter(|_| !request.is_null());
    // SAFETY: the user keeps the buffer valid until the request completes (MPI's rule).
    let fast = args
        .and_then(|(n, dt, c)| unsafe { madmpi::isend_now(buf as *const u8, n, dt, dest, tag, c) });
    if let Some(rid) = fast {
        return match new_request_at(request, rid, comm) {
            Ok(()) => MPI_SUCCESS,
            Err(e) => errors::raise(
                comm,
                &|| p2p_call("MPI_Isend", count.into(), datatype, "dest", dest, tag, comm),
                e,
            ),
        };
    }
    isend(
        "MPI_Isend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

pub unsafe fn MPI_Isend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Isend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

pub unsafe fn MPI_Ssend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Ssend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Synchronous,
    )
}

pub unsafe fn MPI_Ssend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Ssend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Synchronous,
    )
}

pub unsafe fn MPI_Issend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Issend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Synchronous,
    )
}

pub unsafe fn MPI_Issend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Issend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Synchronous,
    )
}

pub unsafe fn MPI_Rsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Rsend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Ready,
    )
}

pub unsafe fn MPI_Rsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Rsend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Ready,
    )
}

pub unsafe fn MPI_Irsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Irsend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Ready,
    )
}

pub unsafe fn MPI_Irsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Irsend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Ready,
    )
}

pub unsafe fn MPI_Bsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Bsend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Buffered,
    )
}

pub unsafe fn MPI_Bsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
) -> c_int {
    send(
        "MPI_Bsend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        SendMode::Buffered,
    )
}

pub unsafe fn MPI_Ibsend(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Ibsend",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Buffered,
    )
}

pub unsafe fn MPI_Ibsend_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    isend(
        "MPI_Ibsend_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Buffered,
    )
}

// ------------------------------------------------------------------------------------ receives

#[allow(clippy::too_many_arguments)]
unsafe fn recv(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let call = || p2p_call(name, count, datatype, "source", source, tag, comm);
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        // SAFETY: the user's buffer has room for `count` elements of `datatype`.
        unsafe { madmpi::recv(buf as *mut u8, n, &dt, source, tag, c) }
    })();
    match r {
        Ok(s) => complete_one(comm, status, &s, &call),
        Err(e) => errors::raise(comm, &call, e),
    }
}

// Out of line: inlined into MPI_Irecv, its frame and register saves were paid on the fast path.
#[allow(clippy::too_many_arguments)]
#[inline(never)]
unsafe fn irecv(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps the buffer valid until the request completes (MPI's rule).
        let rid = unsafe { madmpi::irecv(buf as *mut u8, n, &dt, source, tag, c)? };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        p2p_call(name, count, datatype, "source", source, tag, comm)
    })
}

pub unsafe fn MPI_Recv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    // SAFETY: the user's buffer has room for `count` elements of `datatype`.
    let fast = fast_args(buf, count, datatype, comm)
        .and_then(|(n, dt, c)| unsafe { madmpi::recv_now(buf as *mut u8, n, dt, source, tag, c) });
    if let Some(r) = fast {
        let call = || recv_call("MPI_Recv", count, datatype, source, tag, comm);
        return match r {
            Ok(s) => complete_one(comm, status, &s, &call),
            Err(e) => errors::raise(comm, &call, e),
        };
    }
    recv(
        "MPI_Recv",
        buf,
        count as i64,
        datatype,
        source,
        tag,
        comm,
        status,
    )
}

pub unsafe fn MPI_Recv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    recv(
        "MPI_Recv_c",
        buf,
        count,
        datatype,
        source,
        tag,
        comm,
        status,
    )
}

pub unsafe fn MPI_Irecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let args = fast_args(buf, count, datatype, comm).filter(|_| !request.is_null());
    // SAFETY: the user keeps the buffer valid until the request completes (MPI's rule).
    let fast = args
        .and_then(|(n, dt, c)| unsafe { madmpi::irecv_now(buf as *mut u8, n, dt, source, tag, c) });
    if let Some(rid) = fast {
        return match new_request_at(request, rid, comm) {
            Ok(()) => MPI_SUCCESS,
            Err(e) => errors::raise(
                comm,
                &|| recv_call("MPI_Irecv", count, datatype, source, tag, comm),
                e,
            ),
        };
    }
    irecv(
        "MPI_Irecv",
        buf,
        count as i64,
        datatype,
        source,
        tag,
        comm,
        request,
    )
}

pub unsafe fn MPI_Irecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    irecv(
        "MPI_Irecv_c",
        buf,
        count,
        datatype,
        source,
        tag,
        comm,
        request,
    )
}

// ------------------------------------------------------------------------------------ send-receive

#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv(
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
) -> R<madmpi::Status> {
    let c = handles::comm(comm)?;
    let sn = count_arg(sendcount)?;
    let rn = count_arg(recvcount)?;
    let sdt = handles::datatype(sendtype)?;
    let rdt = handles::datatype(recvtype)?;
    check_buf(sendbuf, sn, &sdt)?;
    check_buf(recvbuf, rn, &rdt)?;
    // SAFETY: both buffers stay valid for the whole call, and both operations end in it.
    let rr = unsafe { madmpi::irecv(recvbuf as *mut u8, rn, &rdt, source, recvtag, c)? };
    // SAFETY: as above.
    let sr = match unsafe {
        madmpi::isend(
            sendbuf as *const u8,
            sn,
            &sdt,
            dest,
            sendtag,
            c,
            SendMode::Standard,
        )
    } {
        Ok(r) => r,
        Err(e) => {
            // Take the receive back before reporting the send's error.
            let _ = madmpi::cancel(rr);
            let _ = madmpi::wait(rr);
            return Err(e);
        }
    };
    let rs = madmpi::wait(rr);
    let ss = madmpi::wait(sr);
    let st = rs?;
    ss?;
    Ok(st)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Sendrecv(
    sendbuf: *const c_void,
    sendcount: c_int,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: c_int,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let call = || {
        sendrecv_call(
            "MPI_Sendrecv",
            sendcount as i64,
            dest,
            sendtag,
            recvcount as i64,
            source,
            recvtag,
            comm,
        )
    };
    // SAFETY: forwarded caller contract.
    let r = unsafe {
        sendrecv(
            sendbuf,
            sendcount as i64,
            sendtype,
            dest,
            sendtag,
            recvbuf,
            recvcount as i64,
            recvtype,
            source,
            recvtag,
            comm,
        )
    };
    match r {
        Ok(s) => complete_one(comm, status, &s, &call),
        Err(e) => errors::raise(comm, &call, e),
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Sendrecv_c(
    sendbuf: *const c_void,
    sendcount: MPI_Count,
    sendtype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    recvbuf: *mut c_void,
    recvcount: MPI_Count,
    recvtype: MPI_Datatype,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let call = || {
        sendrecv_call(
            "MPI_Sendrecv_c",
            sendcount,
            dest,
            sendtag,
            recvcount,
            source,
            recvtag,
            comm,
        )
    };
    // SAFETY: forwarded caller contract.
    let r = unsafe {
        sendrecv(
            sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
            recvtag, comm,
        )
    };
    match r {
        Ok(s) => complete_one(comm, status, &s, &call),
        Err(e) => errors::raise(comm, &call, e),
    }
}

#[allow(clippy::too_many_arguments)]
fn sendrecv_call(
    name: &str,
    sc: i64,
    dest: c_int,
    stag: c_int,
    rc: i64,
    source: c_int,
    rtag: c_int,
    comm: MPI_Comm,
) -> String {
    format!(
        "{name}(sendcount={sc}, dest={}, sendtag={}, recvcount={rc}, source={}, recvtag={}, comm={})",
        rank_name(dest),
        tag_name(stag),
        rank_name(source),
        tag_name(rtag),
        handles::comm_name(comm)
    )
}

/// MPI_Sendrecv_replace through a temporary copy of the buffer's span: the receive lands in the
/// copy while the send reads the user's buffer, then the copy goes back. Bytes of the span the
/// datatype does not cover keep their values.
#[allow(clippy::too_many_arguments)]
unsafe fn sendrecv_replace(
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
) -> R<madmpi::Status> {
    let c = handles::comm(comm)?;
    let n = count_arg(count)?;
    let dt = handles::datatype(datatype)?;
    check_buf(buf, n, &dt)?;
    let (lo, hi) = dt.buffer_span(n).map_err(datatype_error)?;
    let len = (hi - lo) as usize;
    let user = (buf as *mut u8).wrapping_offset(lo);
    let contiguous = dt.is_contiguous();
    let mut tmp = vec![0u8; len];
    if !contiguous && len > 0 {
        // SAFETY: [lo, hi) is the span the datatype covers in the user's buffer.
        unsafe { std::ptr::copy_nonoverlapping(user, tmp.as_mut_ptr(), len) };
    }
    let tmp_base = if len == 0 {
        NonNull::<u8>::dangling().as_ptr()
    } else {
        tmp.as_mut_ptr().wrapping_offset(-lo)
    };
    // SAFETY: `tmp` covers the span of `n` elements at `tmp_base` and outlives both requests,
    // which complete in this function; the user's buffer is valid for the whole call.
    let rr = unsafe { madmpi::irecv(tmp_base, n, &dt, source, recvtag, c)? };
    // SAFETY: as above.
    let sr = match unsafe {
        madmpi::isend(
            buf as *const u8,
            n,
            &dt,
            dest,
            sendtag,
            c,
            SendMode::Standard,
        )
    } {
        Ok(r) => r,
        Err(e) => {
            let _ = madmpi::cancel(rr);
            let _ = madmpi::wait(rr);
            return Err(e);
        }
    };
    let rs = madmpi::wait(rr);
    let ss = madmpi::wait(sr);
    let st = rs?;
    ss?;
    let back = if contiguous {
        (st.bytes as usize).min(len)
    } else {
        len
    };
    if back > 0 {
        // SAFETY: both requests are complete; `back` bytes lie inside the span.
        unsafe { std::ptr::copy_nonoverlapping(tmp.as_ptr(), user, back) };
    }
    Ok(st)
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Sendrecv_replace(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let call = || {
        sendrecv_call(
            "MPI_Sendrecv_replace",
            count as i64,
            dest,
            sendtag,
            count as i64,
            source,
            recvtag,
            comm,
        )
    };
    // SAFETY: forwarded caller contract.
    match unsafe {
        sendrecv_replace(
            buf,
            count as i64,
            datatype,
            dest,
            sendtag,
            source,
            recvtag,
            comm,
        )
    } {
        Ok(s) => complete_one(comm, status, &s, &call),
        Err(e) => errors::raise(comm, &call, e),
    }
}

#[allow(clippy::too_many_arguments)]
pub unsafe fn MPI_Sendrecv_replace_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    sendtag: c_int,
    source: c_int,
    recvtag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let call = || {
        sendrecv_call(
            "MPI_Sendrecv_replace_c",
            count,
            dest,
            sendtag,
            count,
            source,
            recvtag,
            comm,
        )
    };
    // SAFETY: forwarded caller contract.
    match unsafe { sendrecv_replace(buf, count, datatype, dest, sendtag, source, recvtag, comm) } {
        Ok(s) => complete_one(comm, status, &s, &call),
        Err(e) => errors::raise(comm, &call, e),
    }
}

// ------------------------------------------------------------------------------------ persistent

#[allow(clippy::too_many_arguments)]
unsafe fn send_init(
    name: &'static str,
    buf: *const c_void,
    count: i64,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
    mode: SendMode,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps the buffer valid while the request is active (MPI's rule).
        let rid = unsafe { madmpi::send_init(buf as *const u8, n, &dt, dest, tag, c, mode)? };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        p2p_call(name, count, datatype, "dest", dest, tag, comm)
    })
}

pub unsafe fn MPI_Send_init(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Send_init",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

pub unsafe fn MPI_Send_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Send_init_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Standard,
    )
}

pub unsafe fn MPI_Ssend_init(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Ssend_init",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Synchronous,
    )
}

pub unsafe fn MPI_Ssend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Ssend_init_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Synchronous,
    )
}

pub unsafe fn MPI_Rsend_init(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Rsend_init",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Ready,
    )
}

pub unsafe fn MPI_Rsend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Rsend_init_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Ready,
    )
}

pub unsafe fn MPI_Bsend_init(
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Bsend_init",
        buf,
        count as i64,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Buffered,
    )
}

pub unsafe fn MPI_Bsend_init_c(
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    dest: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    send_init(
        "MPI_Bsend_init_c",
        buf,
        count,
        datatype,
        dest,
        tag,
        comm,
        request,
        SendMode::Buffered,
    )
}

#[allow(clippy::too_many_arguments)]
unsafe fn recv_init(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let out = out(request, "request")?;
        // SAFETY: the user keeps the buffer valid while the request is active (MPI's rule).
        let rid = unsafe { madmpi::recv_init(buf as *mut u8, n, &dt, source, tag, c)? };
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        p2p_call(name, count, datatype, "source", source, tag, comm)
    })
}

pub unsafe fn MPI_Recv_init(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    recv_init(
        "MPI_Recv_init",
        buf,
        count as i64,
        datatype,
        source,
        tag,
        comm,
        request,
    )
}

pub unsafe fn MPI_Recv_init_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    request: *mut MPI_Request,
) -> c_int {
    recv_init(
        "MPI_Recv_init_c",
        buf,
        count,
        datatype,
        source,
        tag,
        comm,
        request,
    )
}

// ------------------------------------------------------------------------------------ probes

fn probe_call(name: &str, source: c_int, tag: c_int, comm: MPI_Comm) -> String {
    format!(
        "{name}(source={}, tag={}, comm={})",
        rank_name(source),
        tag_name(tag),
        handles::comm_name(comm)
    )
}

pub unsafe fn MPI_Probe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    status: *mut MPI_Status,
) -> c_int {
    let r = handles::comm(comm)
        .and_then(|c| madmpi::probe(source, tag, c))
        .map(|s| write_status(status, &s));
    finish(comm, r, &|| probe_call("MPI_Probe", source, tag, comm))
}

pub unsafe fn MPI_Iprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let flag = out(flag, "flag")?;
        match madmpi::iprobe(source, tag, c)? {
            Some(s) => {
                *flag = 1;
                write_status(status, &s);
            }
            None => *flag = 0,
        }
        Ok(())
    })();
    finish(comm, r, &|| probe_call("MPI_Iprobe", source, tag, comm))
}

pub unsafe fn MPI_Mprobe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let out = out(message, "message")?;
        let (m, s) = madmpi::mprobe(source, tag, c)?;
        *out = handles::new_message(m, comm)?;
        write_status(status, &s);
        Ok(())
    })();
    finish(comm, r, &|| probe_call("MPI_Mprobe", source, tag, comm))
}

pub unsafe fn MPI_Improbe(
    source: c_int,
    tag: c_int,
    comm: MPI_Comm,
    flag: *mut c_int,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let flag = out(flag, "flag")?;
        let msg = out(message, "message")?;
        match madmpi::improbe(source, tag, c)? {
            Some((m, s)) => {
                *msg = handles::new_message(m, comm)?;
                *flag = 1;
                write_status(status, &s);
            }
            None => *flag = 0,
        }
        Ok(())
    })();
    finish(comm, r, &|| probe_call("MPI_Improbe", source, tag, comm))
}

/// The communicator a message handle belongs to, for errors (MPI_COMM_SELF if it is invalid).
fn message_comm(message: *mut MPI_Message) -> MPI_Comm {
    // SAFETY: a non-null message pointer points to a handle (the caller's contract).
    unsafe { message.as_ref() }
        .and_then(|&m| handles::message_comm(m))
        .unwrap_or(MPI_COMM_SELF as usize) as MPI_Comm
}

unsafe fn mrecv(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    let comm = message_comm(message);
    let call = || {
        format!(
            "{name}(count={count}, datatype={})",
            handles::type_name(datatype)
        )
    };
    let r = (|| {
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let m = out(message, "message")?;
        let e = handles::take_message(*m)?;
        *m = MPI_MESSAGE_NULL;
        // SAFETY: the user's buffer has room for `count` elements for the whole call.
        let rid = unsafe { madmpi::imrecv(buf as *mut u8, n, &dt, e.msg)? };
        madmpi::wait(rid)
    })();
    match r {
        Ok(s) => complete_one(comm, status, &s, &call),
        Err(e) => errors::raise(comm, &call, e),
    }
}

unsafe fn imrecv(
    name: &'static str,
    buf: *mut c_void,
    count: i64,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    let comm = message_comm(message);
    let r = (|| {
        let n = count_arg(count)?;
        let dt = handles::datatype(datatype)?;
        check_buf(buf, n, &dt)?;
        let req = out(request, "request")?;
        let m = out(message, "message")?;
        let e = handles::take_message(*m)?;
        *m = MPI_MESSAGE_NULL;
        // SAFETY: the user keeps the buffer valid until the request completes (MPI's rule).
        let rid = unsafe { madmpi::imrecv(buf as *mut u8, n, &dt, e.msg)? };
        *req = handles::new_request(rid, e.comm as MPI_Comm)?;
        Ok(())
    })();
    finish(comm, r, &|| {
        format!(
            "{name}(count={count}, datatype={})",
            handles::type_name(datatype)
        )
    })
}

pub unsafe fn MPI_Mrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    mrecv("MPI_Mrecv", buf, count as i64, datatype, message, status)
}

pub unsafe fn MPI_Mrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    status: *mut MPI_Status,
) -> c_int {
    mrecv("MPI_Mrecv_c", buf, count, datatype, message, status)
}

pub unsafe fn MPI_Imrecv(
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    imrecv("MPI_Imrecv", buf, count as i64, datatype, message, request)
}

pub unsafe fn MPI_Imrecv_c(
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    message: *mut MPI_Message,
    request: *mut MPI_Request,
) -> c_int {
    imrecv("MPI_Imrecv_c", buf, count, datatype, message, request)
}
