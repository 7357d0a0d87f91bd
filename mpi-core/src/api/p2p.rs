//! Point-to-point calls: sends and receives (blocking, nonblocking, persistent, and the
//! owner-mode fast paths that complete in one engine visit), probes and matched receives.

use madmpi_datatypes::Datatype;

use super::engine_slot::{with, with_owned};
use super::wait::{polled_opt, take_done, take_if_complete, wait, wait_until, Completion, Taken};
use crate::engine::{Engine, NO_SREQ};
use crate::error::{err, ErrorClass, Result};
use crate::request::{Persistent, RequestId, SendMode, Status, EMPTY_STATUS};
use crate::{CommId, MessageId};

// -------------------------------------------------------------------- point to point

/// MPI_Isend and its modes. `buf` must stay valid until the request completes.
///
/// # Safety
/// `buf` must point to `count` elements of `dt` and stay valid and unmodified until the request
/// completes.
pub unsafe fn isend(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
    mode: SendMode,
) -> Result<RequestId> {
    with(|e| {
        // An eager message on an idle gate leaves at once and the request is born complete;
        // `aggreg` copies a small one into the packet it is building instead.
        if matches!(mode, SendMode::Standard | SendMode::Ready) {
            // SAFETY: forwarded caller contract.
            if let Some(r) = unsafe { e.isend_fast(buf, count, dt, dest, tag, comm)? } {
                return Ok(r);
            }
        }
        let r = room_made(e, |e| {
            // SAFETY: forwarded caller contract.
            unsafe { e.st.isend(buf, count, dt, dest, tag, comm, mode, false) }
        })?;
        if e.st.sends_leave_at_once() {
            e.flush_posted()?;
        }
        Ok(r)
    })
}

/// Runs `post`, which posts a send; when a buffered send finds too little room in its
/// attached buffer, takes in what has already arrived and tries again, as long as something
/// did arrive. A buffered message's room is given back when its receiver says it has the data
/// (the rendezvous' Fin), and that notice may still wait in this process's input when the user
/// knows the message was received (the receiver's reply, a barrier: the shared-memory
/// collectives do not pass through the queues the notice is in). `post` must leave nothing
/// behind when it fails (a send reserves its room before anything else).
fn room_made<T>(e: &mut Engine, mut post: impl FnMut(&mut Engine) -> Result<T>) -> Result<T> {
    loop {
        match post(e) {
            Err(x) if x.class == ErrorClass::BufferSpace && e.progress()? => continue,
            r => return r,
        }
    }
}

/// The fast path of a standard-mode MPI_Isend, for the thread that owns the engine
/// (MPI_THREAD_SINGLE/FUNNELED): the eager fast path (`default`) or the packet being built
/// (`aggreg`). `None`, having done nothing, when the send needs [`isend`] (which also reports
/// every error).
///
/// # Safety
/// As [`isend`].
#[inline]
pub unsafe fn isend_now(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
) -> Option<RequestId> {
    // SAFETY: forwarded caller contract.
    with_owned(|e| unsafe { e.isend_fast(buf, count, dt, dest, tag, comm) }.ok()?)
}

/// The fast path of a standard-mode MPI_Send, for the thread that owns the engine: a small
/// contiguous message to an idle gate leaves at once (the engine's `try_send_now`). False,
/// having done nothing, when the send needs [`send`].
///
/// # Safety
/// As [`send`].
#[inline]
pub unsafe fn send_now(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
) -> bool {
    with_owned(|e| {
        // Packets being built leave at this call: the checked path sends them.
        if !e.st.nothing_queued() {
            return None;
        }
        // SAFETY: forwarded caller contract.
        unsafe { e.try_send_now(buf, count, dt, dest, tag, comm, NO_SREQ, false) }.ok()?
    })
    .is_some()
}

/// The fast path of MPI_Recv, for the thread that owns the engine: a receive that can be posted
/// at once (see [`irecv_now`]), then waited for. `None`, having done nothing, when the receive
/// needs [`recv`].
///
/// # Safety
/// As [`recv`].
#[inline]
pub unsafe fn recv_now(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Option<Result<Status>> {
    // Post, then poll once, in one visit: the message is often already there.
    let first = with_owned(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.irecv_posted(buf, count, dt, src, tag, comm) }?;
        Some(e.progress().map(|_| match take_done(e, r) {
            Taken::Done(c) => Err(c.status),
            _ => Ok(r),
        }))
    })?;
    Some(match first {
        Err(e) => Err(e),
        Ok(Err(status)) => Ok(status),
        Ok(Ok(r)) => wait(r),
    })
}

/// The fast path of MPI_Irecv, for the thread that owns the engine: a receive of a contiguous
/// type with valid arguments and nothing unexpected on its communicator is posted. `None`,
/// having done nothing, when the receive needs [`irecv`].
///
/// # Safety
/// As [`irecv`].
#[inline(always)]
pub unsafe fn irecv_now(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Option<RequestId> {
    with_owned(|e| {
        // Packets being built leave at this call: the checked path sends them.
        if !e.st.nothing_queued() {
            return None;
        }
        // SAFETY: forwarded caller contract.
        unsafe { e.st.irecv_posted(buf, count, dt, src, tag, comm) }
    })
}

/// MPI_Send and its blocking modes.
///
/// # Safety
/// As [`isend`], until the call returns.
pub unsafe fn send(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
    mode: SendMode,
) -> Result<()> {
    // Post and try to complete under one lock: an eager send usually leaves at once.
    let r = with(|e| {
        if matches!(mode, SendMode::Standard | SendMode::Ready)
            // SAFETY: forwarded caller contract.
            && unsafe { e.try_send_now(buf, count, dt, dest, tag, comm, NO_SREQ, false)? }.is_some()
        {
            return Ok(Err(Completion {
                status: EMPTY_STATUS,
                freed: true,
            }));
        }
        let r = room_made(e, |e| {
            // SAFETY: forwarded caller contract.
            unsafe { e.st.isend(buf, count, dt, dest, tag, comm, mode, false) }
        })?;
        e.flush()?;
        Ok(match take_if_complete(e, r)? {
            Some(c) => Err(c),
            None => Ok(r),
        })
    })?;
    match r {
        Err(done) => status_result(done.status),
        Ok(r) => wait(r).and_then(status_result),
    }
}

/// A send's status as a result (a send fails only when its peer died).
fn status_result(s: Status) -> Result<()> {
    match s.error {
        Some(ErrorClass::ProcAborted) => {
            err(ErrorClass::ProcAborted, "the destination process has died")
        }
        _ => Ok(()),
    }
}

/// MPI_Irecv.
///
/// # Safety
/// `buf` must be valid for writes of `count` elements of `dt` until the request completes.
pub unsafe fn irecv(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<RequestId> {
    with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.irecv(buf, count, dt, src, tag, comm, false)? };
        e.flush()?;
        Ok(r)
    })
}

/// MPI_Recv. Returns the status; a truncated message is reported in `status.error`.
///
/// # Safety
/// As [`irecv`], until the call returns.
pub unsafe fn recv(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<Status> {
    // Post, then poll once, under one lock: the message is often already there.
    let r = with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.irecv(buf, count, dt, src, tag, comm, false)? };
        if let Some(c) = take_if_complete(e, r)? {
            return Ok(Err(c.status));
        }
        e.progress()?;
        Ok(match take_if_complete(e, r)? {
            Some(c) => Err(c.status),
            None => Ok(r),
        })
    })?;
    match r {
        Err(status) => Ok(status),
        Ok(r) => wait(r),
    }
}

/// MPI_Send_init (and Ssend/Rsend/Bsend_init): an inactive persistent request.
///
/// # Safety
/// `buf` must be valid each time the request is started, until it completes.
pub unsafe fn send_init(
    buf: *const u8,
    count: usize,
    dt: &Datatype,
    dest: i32,
    tag: i32,
    comm: CommId,
    mode: SendMode,
) -> Result<RequestId> {
    let dt = dt.clone();
    with(|e| {
        e.st.persistent(Persistent::Send {
            buf,
            count,
            dt,
            dest,
            tag,
            comm,
            mode,
        })
    })
}

/// MPI_Recv_init.
///
/// # Safety
/// As [`send_init`].
pub unsafe fn recv_init(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    src: i32,
    tag: i32,
    comm: CommId,
) -> Result<RequestId> {
    let dt = dt.clone();
    with(|e| {
        e.st.persistent(Persistent::Recv {
            buf,
            count,
            dt,
            src,
            tag,
            comm,
        })
    })
}

/// MPI_Start.
pub fn start(r: RequestId) -> Result<()> {
    with(|e| {
        room_made(e, |e| e.st.start(r))?;
        if e.st.sends_leave_at_once() {
            e.flush_posted()?;
        }
        Ok(())
    })
}

// -------------------------------------------------------------------- probes

/// MPI_Iprobe.
pub fn iprobe(src: i32, tag: i32, comm: CommId) -> Result<Option<Status>> {
    polled_opt(with(|e| {
        if let Some(s) = e.st.iprobe(src, tag, comm)? {
            return Ok(Some(s));
        }
        e.progress()?;
        e.st.iprobe(src, tag, comm)
    }))
}

/// MPI_Probe.
pub fn probe(src: i32, tag: i32, comm: CommId) -> Result<Status> {
    wait_until(|e| e.st.iprobe(src, tag, comm))
}

/// MPI_Improbe.
pub fn improbe(src: i32, tag: i32, comm: CommId) -> Result<Option<(MessageId, Status)>> {
    polled_opt(with(|e| {
        if let Some(s) = e.st.improbe(src, tag, comm)? {
            return Ok(Some(s));
        }
        e.progress()?;
        e.st.improbe(src, tag, comm)
    }))
}

/// MPI_Mprobe.
pub fn mprobe(src: i32, tag: i32, comm: CommId) -> Result<(MessageId, Status)> {
    wait_until(|e| e.st.improbe(src, tag, comm))
}

/// MPI_Imrecv.
///
/// # Safety
/// As [`irecv`].
pub unsafe fn imrecv(
    buf: *mut u8,
    count: usize,
    dt: &Datatype,
    msg: MessageId,
) -> Result<RequestId> {
    with(|e| {
        // SAFETY: forwarded caller contract.
        let r = unsafe { e.st.imrecv(buf, count, dt, msg)? };
        e.flush()?;
        Ok(r)
    })
}
