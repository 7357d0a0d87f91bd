//! The non-blocking reads and writes (`MPI_File_i*`). The data moves when the call is made
//! (POSIX reads and writes, and for the `_all` forms the collective exchange with the other
//! processes, which make the same call); the request returned is a real request, complete,
//! that every wait and test call takes and whose status gives the count.

use std::os::raw::c_int;

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
pub(super) fn nonblocking(
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
