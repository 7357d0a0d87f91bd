//! Operations made of others: MPI_Isendrecv and MPI_Isendrecv_replace, a receive and a send
//! joined into one request by a [`Schedule`] that completes when both have (with the
//! receive's status), and generalized requests (MPI_Grequest_start/complete), requests that
//! the application completes.

use madmpi_datatypes::Datatype;

use super::engine_slot::with;
use crate::engine::{Engine, Schedule, State};
use crate::error::{err, ErrorClass, Result};
use crate::request::{Op, Request, RequestId, SendMode, Status};
use crate::CommId;

/// Where the receive of MPI_Isendrecv_replace lands before it goes back to the user's buffer.
struct CopyBack {
    tmp: Vec<u8>,
    /// Start of the datatype's span in the user's buffer.
    user: *mut u8,
    /// Only the bytes received go back (else the whole span, holes keeping their values
    /// since the copy started from them).
    contiguous: bool,
}

/// A receive and a send that complete as one request.
struct Pair {
    recv: Option<RequestId>,
    send: Option<RequestId>,
    status: Option<Status>,
    send_error: Option<ErrorClass>,
    back: Option<CopyBack>,
}

// SAFETY: the raw pointer is the user's buffer, valid until the request completes (the MPI
// rule stated in `request`); the schedule only runs under the engine.
unsafe impl Send for Pair {}

/// The status of step `r` if it is complete (the step is then freed).
fn take_step(st: &mut State, r: RequestId) -> Option<Status> {
    let req = st.reqs.get(r)?;
    if !req.complete {
        return None;
    }
    let s = req.status;
    st.reqs.free(r);
    Some(s)
}

impl Schedule for Pair {
    fn advance(&mut self, st: &mut State) -> Result<bool> {
        if let Some(r) = self.recv {
            if let Some(s) = take_step(st, r) {
                self.status = Some(s);
                self.recv = None;
            }
        }
        if let Some(r) = self.send {
            if let Some(s) = take_step(st, r) {
                self.send_error = s.error;
                self.send = None;
            }
        }
        if self.recv.is_some() || self.send.is_some() {
            return Ok(false);
        }
        let status = self.status.get_or_insert(crate::EMPTY_STATUS);
        if status.error.is_none() {
            status.error = self.send_error;
        }
        if let Some(b) = self.back.take() {
            let n = if b.contiguous {
                (status.bytes as usize).min(b.tmp.len())
            } else {
                b.tmp.len()
            };
            if n > 0 && !status.cancelled {
                // SAFETY: the span of the user's buffer is valid until this request
                // completes, which is now; `tmp` is ours.
                unsafe { std::ptr::copy_nonoverlapping(b.tmp.as_ptr(), b.user, n) };
            }
        }
        Ok(true)
    }

    fn status(&self) -> Option<Status> {
        self.status
    }
}

/// Take back a receive posted by a call that then failed.
fn withdraw(e: &mut Engine, r: RequestId) {
    let _ = e.st.cancel(r);
    if let Some(req) = e.st.reqs.get_mut(r) {
        if req.complete {
            e.st.reqs.free(r);
        } else {
            req.detached = true;
        }
    }
}

/// Post `recv`, then the send, and join them.
///
/// # Safety
/// As [`isendrecv`].
#[allow(clippy::too_many_arguments)]
unsafe fn join(
    e: &mut Engine,
    rbuf: *mut u8,
    rcount: usize,
    rdt: &Datatype,
    source: i32,
    recvtag: i32,
    sbuf: *const u8,
    scount: usize,
    sdt: &Datatype,
    dest: i32,
    sendtag: i32,
    comm: CommId,
    back: Option<CopyBack>,
) -> Result<RequestId> {
    // Both checked before either is posted: a receive posted and then withdrawn could have
    // matched (and lost) a message.
    e.st.check_args(comm, source, recvtag, rdt, true)?;
    e.st.check_args(comm, dest, sendtag, sdt, false)?;
    // SAFETY: forwarded caller contract.
    let rr = unsafe {
        e.st.irecv(rbuf, rcount, rdt, source, recvtag, comm, false)?
    };
    // SAFETY: forwarded caller contract.
    let sr = match unsafe {
        e.st.isend(
            sbuf,
            scount,
            sdt,
            dest,
            sendtag,
            comm,
            SendMode::Standard,
            false,
        )
    } {
        Ok(r) => r,
        Err(err) => {
            withdraw(e, rr);
            return Err(err);
        }
    };
    let rid = e.st.start_schedule(Box::new(Pair {
        recv: Some(rr),
        send: Some(sr),
        status: None,
        send_error: None,
        back,
    }))?;
    e.flush()?;
    Ok(rid)
}

/// MPI_Isendrecv: one request for a receive and a send, complete when both are, with the
/// receive's status (a failed send shows in its error).
///
/// # Safety
/// `sbuf` must hold `scount` elements of `sdt` and `rbuf` be writable for `rcount` elements of
/// `rdt`, both until the request completes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv(
    sbuf: *const u8,
    scount: usize,
    sdt: &Datatype,
    dest: i32,
    sendtag: i32,
    rbuf: *mut u8,
    rcount: usize,
    rdt: &Datatype,
    source: i32,
    recvtag: i32,
    comm: CommId,
) -> Result<RequestId> {
    with(|e| {
        // SAFETY: forwarded caller contract.
        unsafe {
            join(
                e, rbuf, rcount, rdt, source, recvtag, sbuf, scount, sdt, dest, sendtag, comm, None,
            )
        }
    })
}

/// MPI_Isendrecv_replace: the message received replaces the one sent, in `buf`. The receive
/// lands in a scratch copy of the datatype's span, which goes back when both complete.
///
/// # Safety
/// `buf` must hold `count` elements of `dt`, readable and writable until the request
/// completes.
#[allow(clippy::too_many_arguments)]
pub unsafe fn isendrecv_replace(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    sendtag: i32,
    source: i32,
    recvtag: i32,
    comm: CommId,
) -> Result<RequestId> {
    let (lo, hi) = dt.buffer_span(count)?;
    let len = usize::try_from(hi - lo)
        .or_else(|_| err(ErrorClass::Type, "datatype with a negative span"))?;
    let user = buf.wrapping_offset(lo);
    let contiguous = dt.is_contiguous();
    let mut tmp = vec![0u8; len];
    if !contiguous && len > 0 {
        // SAFETY: [lo, hi) is the span the datatype covers in the user's buffer.
        unsafe { std::ptr::copy_nonoverlapping(user, tmp.as_mut_ptr(), len) };
    }
    // The receive's base: byte `lo` of the span is `tmp[0]` (a Vec's buffer never moves).
    let tmp_base = tmp.as_mut_ptr().wrapping_offset(-lo);
    let back = CopyBack {
        tmp,
        user,
        contiguous,
    };
    with(|e| {
        // SAFETY: the scratch buffer lives in the schedule until the receive completes; the
        // user's buffer as the caller's contract says.
        unsafe {
            join(
                e,
                tmp_base,
                count,
                dt,
                source,
                recvtag,
                buf,
                count,
                dt,
                dest,
                sendtag,
                comm,
                Some(back),
            )
        }
    })
}

// -------------------------------------------------------------------- generalized requests

/// MPI_Grequest_start: a request that completes when [`grequest_complete`] is called. Its
/// callbacks (query, free, cancel) belong to the caller (the C layer), which runs them outside
/// the engine.
pub fn grequest_start() -> Result<RequestId> {
    with(|e| Ok(e.st.reqs.insert(Request::new(Op::None))))
}

/// MPI_Grequest_complete: the request is complete with `status`. True when it was freed
/// (MPI_Request_free was called on it before).
pub fn grequest_complete(r: RequestId, status: Status) -> Result<bool> {
    with(|e| {
        let req =
            e.st.reqs
                .get_mut(r)
                .ok_or_else(|| crate::Error::new(ErrorClass::Request, "invalid request handle"))?;
        if !matches!(req.op, Op::None) || req.persistent.is_some() || !req.active {
            return err(ErrorClass::Request, "not a generalized request");
        }
        if req.complete {
            return err(
                ErrorClass::Request,
                "the generalized request is already complete",
            );
        }
        req.status = status;
        let freed = req.detached;
        e.st.complete(r);
        Ok(freed)
    })
}
