//! The buffers of buffered sends: the process's (MPI_Buffer_attach/detach) and, from MPI-4.1,
//! each communicator's (MPI_Comm_attach_buffer/detach_buffer) and each session's
//! (MPI_Session_attach_buffer/detach_buffer), user memory or MPI_BUFFER_AUTOMATIC, and
//! flushing them (MPI_Buffer_flush/iflush and their communicator and session forms). Every
//! form is one call of the same few functions with the buffer's owner; errors go to the
//! owner's handler (MPI_COMM_SELF's for the process's buffer).

use std::os::raw::{c_int, c_void};

use madmpi::{AttachedBuffer, BufferOwner, ErrorClass};

use super::common::*;
use super::session::{done as session_done, session_id};
use crate::abi::*;
use crate::handles;

/// The owner of a communicator's buffer.
fn of_comm(comm: MPI_Comm) -> R<BufferOwner> {
    handles::comm(comm).map(BufferOwner::Comm)
}

/// The owner of a session's buffer.
fn of_session(session: MPI_Session) -> R<BufferOwner> {
    session_id(session).map(BufferOwner::Session)
}

fn attach(owner: R<BufferOwner>, buffer: *mut c_void, size: i64) -> R<()> {
    let owner = owner?;
    running()?;
    if buffer == MPI_BUFFER_AUTOMATIC {
        return madmpi::buffer_attach_to(owner, AttachedBuffer::Automatic);
    }
    let n = usize::try_from(size).or_else(|_| {
        fail(
            ErrorClass::Arg,
            format!("invalid size {size} (must be >= 0)"),
        )
    })?;
    if buffer.is_null() && n > 0 {
        return fail(ErrorClass::Buffer, "invalid buffer pointer NULL");
    }
    madmpi::buffer_attach_to(
        owner,
        AttachedBuffer::User {
            base: buffer as *mut u8,
            size: n,
        },
    )
}

/// Detach and write the buffer's address and size (`int` sizes saturate at `max`):
/// MPI_BUFFER_AUTOMATIC and 0 for an automatic buffer; (NULL, 0) when none is attached (as
/// MPICH does).
fn detach<T: TryFrom<u64> + Copy>(
    owner: R<BufferOwner>,
    addr: *mut c_void,
    size: *mut T,
    max: T,
) -> R<()> {
    let owner = owner?;
    let a = out(addr as *mut *mut c_void, "buffer_addr")?;
    let s = out(size, "size")?;
    running()?;
    let (p, n) = match madmpi::buffer_detach_from(owner) {
        Ok(AttachedBuffer::User { base, size }) => (base as *mut c_void, size as u64),
        Ok(AttachedBuffer::Automatic) => (MPI_BUFFER_AUTOMATIC, 0),
        Err(e) if e.class == ErrorClass::Buffer => (std::ptr::null_mut(), 0),
        Err(e) => return Err(e),
    };
    *a = p;
    *s = T::try_from(n).unwrap_or(max);
    Ok(())
}

fn flush(owner: R<BufferOwner>) -> R<()> {
    let owner = owner?;
    running()?;
    madmpi::buffer_flush(owner)
}

/// A request complete once the buffer has nothing in flight (its errors go to `comm`'s
/// handler).
fn iflush(owner: R<BufferOwner>, request: *mut MPI_Request, comm: MPI_Comm) -> R<()> {
    let owner = owner?;
    running()?;
    let out = out(request, "request")?;
    let rid = madmpi::buffer_iflush(owner)?;
    *out = handles::new_request(rid, comm)?;
    Ok(())
}

const PROCESS: R<BufferOwner> = Ok(BufferOwner::Process);

fn comm_call(name: &'static str, comm: MPI_Comm) -> impl Fn() -> String {
    move || format!("{name}(comm={})", handles::comm_name(comm))
}

pub unsafe fn MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    finish_self("MPI_Buffer_attach", attach(PROCESS, buffer, size as i64))
}

pub unsafe fn MPI_Buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    finish_self("MPI_Buffer_attach_c", attach(PROCESS, buffer, size))
}

pub unsafe fn MPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    let r = detach(PROCESS, buffer_addr, size, c_int::MAX);
    finish_self("MPI_Buffer_detach", r)
}

pub unsafe fn MPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
    let r = detach(PROCESS, buffer_addr, size, MPI_Count::MAX);
    finish_self("MPI_Buffer_detach_c", r)
}

pub unsafe fn MPI_Buffer_flush() -> c_int {
    finish_self("MPI_Buffer_flush", flush(PROCESS))
}

pub unsafe fn MPI_Buffer_iflush(request: *mut MPI_Request) -> c_int {
    let r = iflush(PROCESS, request, MPI_COMM_SELF);
    finish_self("MPI_Buffer_iflush", r)
}

pub unsafe fn MPI_Comm_attach_buffer(comm: MPI_Comm, buffer: *mut c_void, size: c_int) -> c_int {
    let r = attach(of_comm(comm), buffer, size as i64);
    finish(comm, r, &comm_call("MPI_Comm_attach_buffer", comm))
}

pub unsafe fn MPI_Comm_attach_buffer_c(
    comm: MPI_Comm,
    buffer: *mut c_void,
    size: MPI_Count,
) -> c_int {
    let r = attach(of_comm(comm), buffer, size);
    finish(comm, r, &comm_call("MPI_Comm_attach_buffer_c", comm))
}

pub unsafe fn MPI_Comm_detach_buffer(
    comm: MPI_Comm,
    buffer_addr: *mut c_void,
    size: *mut c_int,
) -> c_int {
    let r = detach(of_comm(comm), buffer_addr, size, c_int::MAX);
    finish(comm, r, &comm_call("MPI_Comm_detach_buffer", comm))
}

pub unsafe fn MPI_Comm_detach_buffer_c(
    comm: MPI_Comm,
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    let r = detach(of_comm(comm), buffer_addr, size, MPI_Count::MAX);
    finish(comm, r, &comm_call("MPI_Comm_detach_buffer_c", comm))
}

pub unsafe fn MPI_Comm_flush_buffer(comm: MPI_Comm) -> c_int {
    let r = flush(of_comm(comm));
    finish(comm, r, &comm_call("MPI_Comm_flush_buffer", comm))
}

pub unsafe fn MPI_Comm_iflush_buffer(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    let r = iflush(of_comm(comm), request, comm);
    finish(comm, r, &comm_call("MPI_Comm_iflush_buffer", comm))
}

pub unsafe fn MPI_Session_attach_buffer(
    session: MPI_Session,
    buffer: *mut c_void,
    size: c_int,
) -> c_int {
    let r = attach(of_session(session), buffer, size as i64);
    session_done(session, "MPI_Session_attach_buffer", r)
}

pub unsafe fn MPI_Session_attach_buffer_c(
    session: MPI_Session,
    buffer: *mut c_void,
    size: MPI_Count,
) -> c_int {
    let r = attach(of_session(session), buffer, size);
    session_done(session, "MPI_Session_attach_buffer_c", r)
}

pub unsafe fn MPI_Session_detach_buffer(
    session: MPI_Session,
    buffer_addr: *mut c_void,
    size: *mut c_int,
) -> c_int {
    let r = detach(of_session(session), buffer_addr, size, c_int::MAX);
    session_done(session, "MPI_Session_detach_buffer", r)
}

pub unsafe fn MPI_Session_detach_buffer_c(
    session: MPI_Session,
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    let r = detach(of_session(session), buffer_addr, size, MPI_Count::MAX);
    session_done(session, "MPI_Session_detach_buffer_c", r)
}

pub unsafe fn MPI_Session_flush_buffer(session: MPI_Session) -> c_int {
    session_done(
        session,
        "MPI_Session_flush_buffer",
        flush(of_session(session)),
    )
}

pub unsafe fn MPI_Session_iflush_buffer(session: MPI_Session, request: *mut MPI_Request) -> c_int {
    // The request's errors, if any, go to MPI_COMM_SELF's handler (a request names no
    // session).
    let r = iflush(of_session(session), request, MPI_COMM_SELF);
    session_done(session, "MPI_Session_iflush_buffer", r)
}
