//! The non-blocking reads and writes (`MPI_File_i*`). The data moves when the call is made
//! (POSIX reads and writes, and for the `_all` forms the collective exchange with the other
//! processes, which make the same call); the request returned is a real request, complete,
//! that every wait and test call takes and whose status gives the count.

use std::os::raw::{c_int, c_void};

use madmpi::Status;

use super::super::common::out;
use super::calls::{access, Where};
use super::*;
use crate::abi::*;
use crate::handles;

/// A complete request whose status says `bytes` were moved.
fn completed_request(bytes: u64) -> IoR<MPI_Request> {
    let rid = madmpi::grequest_start()?;
    madmpi::grequest_complete(
        rid,
        Status {
            source: MPI_ANY_SOURCE,
            tag: MPI_ANY_TAG,
            error: None,
            bytes,
            msg_len: bytes,
            cancelled: false,
        },
    )?;
    Ok(handles::new_request(rid, MPI_COMM_SELF)?)
}

/// A non-blocking call.
#[allow(clippy::too_many_arguments)]
fn nonblocking(
    name: &'static str,
    fh: MPI_File,
    buf: *mut u8,
    count: i64,
    dth: MPI_Datatype,
    wh: Where,
    write: bool,
    coll: bool,
    request: *mut MPI_Request,
) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let o = out(request, "request")?;
        let n = access(&f, buf, count, dth, wh, write, coll)?;
        *o = completed_request(n)?;
        Ok(())
    })();
    done(fh, &call_of(name, fh), r)
}

// ------------------------------------------------------------------------------------ the calls

pub unsafe fn MPI_File_iread(
    fh: MPI_File,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Indiv,
        false,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iread_c(
    fh: MPI_File,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Indiv,
        false,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iread_all(
    fh: MPI_File,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_all",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Indiv,
        false,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iread_all_c(
    fh: MPI_File,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_all_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Indiv,
        false,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iread_at(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_at",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::At(offset),
        false,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iread_at_c(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_at_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::At(offset),
        false,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iread_at_all(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_at_all",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::At(offset),
        false,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iread_at_all_c(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_at_all_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::At(offset),
        false,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iread_shared(
    fh: MPI_File,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_shared",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Shared,
        false,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iread_shared_c(
    fh: MPI_File,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iread_shared_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Shared,
        false,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iwrite(
    fh: MPI_File,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Indiv,
        true,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_c(
    fh: MPI_File,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Indiv,
        true,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_all(
    fh: MPI_File,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_all",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Indiv,
        true,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_all_c(
    fh: MPI_File,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_all_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Indiv,
        true,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_at(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_at",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::At(offset),
        true,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_at_c(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_at_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::At(offset),
        true,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_at_all(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_at_all",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::At(offset),
        true,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_at_all_c(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_at_all_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::At(offset),
        true,
        true,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_shared(
    fh: MPI_File,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_shared",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Shared,
        true,
        false,
        request,
    )
}

pub unsafe fn MPI_File_iwrite_shared_c(
    fh: MPI_File,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
    request: *mut MPI_Request,
) -> c_int {
    nonblocking(
        "MPI_File_iwrite_shared_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Shared,
        true,
        false,
        request,
    )
}
