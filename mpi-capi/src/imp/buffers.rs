//! The buffers of buffered sends: the process's (MPI_Buffer_attach/detach) and, from MPI-4.1,
//! each communicator's (MPI_Comm_attach_buffer/detach_buffer), user memory or
//! MPI_BUFFER_AUTOMATIC, and flushing them (MPI_Buffer_flush/iflush,
//! MPI_Comm_flush_buffer/iflush_buffer). Sessions do not exist yet, so neither do their
//! buffers (MPI_Session_attach_buffer and its siblings stay unsupported).

use std::os::raw::{c_int, c_void};

use madmpi::{AttachedBuffer, CommId, ErrorClass};

use super::common::*;
use crate::abi::*;
use crate::handles;

fn attach(comm: Option<CommId>, buffer: *mut c_void, size: i64) -> R<()> {
    running()?;
    if buffer == MPI_BUFFER_AUTOMATIC {
        return madmpi::buffer_attach_to(comm, AttachedBuffer::Automatic);
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
        comm,
        AttachedBuffer::User {
            base: buffer as *mut u8,
            size: n,
        },
    )
}

/// Detach: (address, size); MPI_BUFFER_AUTOMATIC and 0 for an automatic buffer; (NULL, 0)
/// when none is attached (as MPICH does).
fn detach(comm: Option<CommId>) -> R<(*mut c_void, u64)> {
    running()?;
    match madmpi::buffer_detach_from(comm) {
        Ok(AttachedBuffer::User { base, size }) => Ok((base as *mut c_void, size as u64)),
        Ok(AttachedBuffer::Automatic) => Ok((MPI_BUFFER_AUTOMATIC, 0)),
        Err(e) if e.class == ErrorClass::Buffer => Ok((std::ptr::null_mut(), 0)),
        Err(e) => Err(e),
    }
}

/// Write a detached buffer's address and size (`int` sizes saturate).
fn write_detached<T: TryFrom<u64> + Copy>(
    addr: *mut c_void,
    size: *mut T,
    max: T,
    r: (*mut c_void, u64),
) -> R<()> {
    let a = out(addr as *mut *mut c_void, "buffer_addr")?;
    let s = out(size, "size")?;
    *a = r.0;
    *s = T::try_from(r.1).unwrap_or(max);
    Ok(())
}

pub unsafe fn MPI_Buffer_attach(buffer: *mut c_void, size: c_int) -> c_int {
    finish_self("MPI_Buffer_attach", attach(None, buffer, size as i64))
}

pub unsafe fn MPI_Buffer_attach_c(buffer: *mut c_void, size: MPI_Count) -> c_int {
    finish_self("MPI_Buffer_attach_c", attach(None, buffer, size))
}

pub unsafe fn MPI_Buffer_detach(buffer_addr: *mut c_void, size: *mut c_int) -> c_int {
    let r = (|| {
        out(buffer_addr as *mut *mut c_void, "buffer_addr")?;
        out(size, "size")?;
        write_detached(buffer_addr, size, c_int::MAX, detach(None)?)
    })();
    finish_self("MPI_Buffer_detach", r)
}

pub unsafe fn MPI_Buffer_detach_c(buffer_addr: *mut c_void, size: *mut MPI_Count) -> c_int {
    let r = (|| {
        out(buffer_addr as *mut *mut c_void, "buffer_addr")?;
        out(size, "size")?;
        write_detached(buffer_addr, size, MPI_Count::MAX, detach(None)?)
    })();
    finish_self("MPI_Buffer_detach_c", r)
}

fn comm_call(name: &str, comm: MPI_Comm) -> String {
    format!("{name}(comm={})", handles::comm_name(comm))
}

pub unsafe fn MPI_Comm_attach_buffer(comm: MPI_Comm, buffer: *mut c_void, size: c_int) -> c_int {
    let r = handles::comm(comm).and_then(|c| attach(Some(c), buffer, size as i64));
    finish(comm, r, &|| comm_call("MPI_Comm_attach_buffer", comm))
}

pub unsafe fn MPI_Comm_attach_buffer_c(
    comm: MPI_Comm,
    buffer: *mut c_void,
    size: MPI_Count,
) -> c_int {
    let r = handles::comm(comm).and_then(|c| attach(Some(c), buffer, size));
    finish(comm, r, &|| comm_call("MPI_Comm_attach_buffer_c", comm))
}

pub unsafe fn MPI_Comm_detach_buffer(
    comm: MPI_Comm,
    buffer_addr: *mut c_void,
    size: *mut c_int,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        out(buffer_addr as *mut *mut c_void, "buffer_addr")?;
        out(size, "size")?;
        write_detached(buffer_addr, size, c_int::MAX, detach(Some(c))?)
    })();
    finish(comm, r, &|| comm_call("MPI_Comm_detach_buffer", comm))
}

pub unsafe fn MPI_Comm_detach_buffer_c(
    comm: MPI_Comm,
    buffer_addr: *mut c_void,
    size: *mut MPI_Count,
) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        out(buffer_addr as *mut *mut c_void, "buffer_addr")?;
        out(size, "size")?;
        write_detached(buffer_addr, size, MPI_Count::MAX, detach(Some(c))?)
    })();
    finish(comm, r, &|| comm_call("MPI_Comm_detach_buffer_c", comm))
}

pub unsafe fn MPI_Buffer_flush() -> c_int {
    finish_self(
        "MPI_Buffer_flush",
        running().and_then(|_| madmpi::buffer_flush(None)),
    )
}

pub unsafe fn MPI_Buffer_iflush(request: *mut MPI_Request) -> c_int {
    let r = (|| {
        running()?;
        let out = out(request, "request")?;
        let rid = madmpi::buffer_iflush(None)?;
        *out = handles::new_request(rid, MPI_COMM_SELF)?;
        Ok(())
    })();
    finish_self("MPI_Buffer_iflush", r)
}

pub unsafe fn MPI_Comm_flush_buffer(comm: MPI_Comm) -> c_int {
    let r = handles::comm(comm).and_then(|c| madmpi::buffer_flush(Some(c)));
    finish(comm, r, &|| comm_call("MPI_Comm_flush_buffer", comm))
}

pub unsafe fn MPI_Comm_iflush_buffer(comm: MPI_Comm, request: *mut MPI_Request) -> c_int {
    let r = (|| {
        let c = handles::comm(comm)?;
        let out = out(request, "request")?;
        let rid = madmpi::buffer_iflush(Some(c))?;
        *out = handles::new_request(rid, comm)?;
        Ok(())
    })();
    finish(comm, r, &|| comm_call("MPI_Comm_iflush_buffer", comm))
}
