//! Split collective reads and writes (`_begin`/`_end`). The begin call moves the data (it is
//! collective, as the standard requires); the end call returns its status. One split
//! collective at a time per file (the standard's rule): a second begin, or an end without its
//! begin, is an error.

use std::os::raw::c_int;

use super::calls::{access, io_status, Where};
use super::*;
use crate::abi::*;

#[allow(clippy::too_many_arguments)]
pub(super) fn begin(
    name: &'static str,
    fh: MPI_File,
    buf: *mut u8,
    count: i64,
    dth: MPI_Datatype,
    wh: Where,
    write: bool,
) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        if f.st.lock().split.is_some() {
            return Err(ioerr(
                MPI_ERR_IO,
                "a split collective is already in progress on this file (end it first)",
            ));
        }
        let n = access(&f, buf, count, dth, wh, write, true)?;
        f.st.lock().split = Some((n, !write));
        Ok(())
    })();
    done(fh, &call_of(name, fh), r)
}

pub(super) fn end(name: &'static str, fh: MPI_File, write: bool, status: *mut MPI_Status) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let mut st = f.st.lock();
        match st.split {
            Some((n, read)) if read != write => {
                st.split = None;
                drop(st);
                io_status(status, n);
                Ok(())
            }
            _ => Err(ioerr(
                MPI_ERR_IO,
                "no matching split collective was begun on this file",
            )),
        }
    })();
    done(fh, &call_of(name, fh), r)
}
