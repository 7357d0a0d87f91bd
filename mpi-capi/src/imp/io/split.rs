//! Split collective reads and writes (`_begin`/`_end`). The begin call moves the data (it is
//! collective, as the standard requires); the end call returns its status. One split
//! collective at a time per file (the standard's rule): a second begin, or an end without its
//! begin, is an error.

use std::os::raw::{c_int, c_void};

use super::calls::{access, io_status, Where};
use super::*;
use crate::abi::*;

#[allow(clippy::too_many_arguments)]
fn begin(
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

fn end(name: &'static str, fh: MPI_File, write: bool, status: *mut MPI_Status) -> c_int {
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

// ------------------------------------------------------------------------------------ the calls

pub unsafe fn MPI_File_read_all_begin(
    fh: MPI_File,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_read_all_begin",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Indiv,
        false,
    )
}

pub unsafe fn MPI_File_read_all_begin_c(
    fh: MPI_File,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_read_all_begin_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Indiv,
        false,
    )
}

pub unsafe fn MPI_File_read_all_end(
    fh: MPI_File,
    buf: *mut c_void,
    status: *mut MPI_Status,
) -> c_int {
    let _ = buf;
    end("MPI_File_read_all_end", fh, false, status)
}

pub unsafe fn MPI_File_read_at_all_begin(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_read_at_all_begin",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::At(offset),
        false,
    )
}

pub unsafe fn MPI_File_read_at_all_begin_c(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_read_at_all_begin_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::At(offset),
        false,
    )
}

pub unsafe fn MPI_File_read_at_all_end(
    fh: MPI_File,
    buf: *mut c_void,
    status: *mut MPI_Status,
) -> c_int {
    let _ = buf;
    end("MPI_File_read_at_all_end", fh, false, status)
}

pub unsafe fn MPI_File_read_ordered_begin(
    fh: MPI_File,
    buf: *mut c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_read_ordered_begin",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Ordered,
        false,
    )
}

pub unsafe fn MPI_File_read_ordered_begin_c(
    fh: MPI_File,
    buf: *mut c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_read_ordered_begin_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Ordered,
        false,
    )
}

pub unsafe fn MPI_File_read_ordered_end(
    fh: MPI_File,
    buf: *mut c_void,
    status: *mut MPI_Status,
) -> c_int {
    let _ = buf;
    end("MPI_File_read_ordered_end", fh, false, status)
}

pub unsafe fn MPI_File_write_all_begin(
    fh: MPI_File,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_write_all_begin",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Indiv,
        true,
    )
}

pub unsafe fn MPI_File_write_all_begin_c(
    fh: MPI_File,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_write_all_begin_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Indiv,
        true,
    )
}

pub unsafe fn MPI_File_write_all_end(
    fh: MPI_File,
    buf: *const c_void,
    status: *mut MPI_Status,
) -> c_int {
    let _ = buf;
    end("MPI_File_write_all_end", fh, true, status)
}

pub unsafe fn MPI_File_write_at_all_begin(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_write_at_all_begin",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::At(offset),
        true,
    )
}

pub unsafe fn MPI_File_write_at_all_begin_c(
    fh: MPI_File,
    offset: MPI_Offset,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_write_at_all_begin_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::At(offset),
        true,
    )
}

pub unsafe fn MPI_File_write_at_all_end(
    fh: MPI_File,
    buf: *const c_void,
    status: *mut MPI_Status,
) -> c_int {
    let _ = buf;
    end("MPI_File_write_at_all_end", fh, true, status)
}

pub unsafe fn MPI_File_write_ordered_begin(
    fh: MPI_File,
    buf: *const c_void,
    count: c_int,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_write_ordered_begin",
        fh,
        buf as *mut u8,
        count as i64,
        datatype,
        Where::Ordered,
        true,
    )
}

pub unsafe fn MPI_File_write_ordered_begin_c(
    fh: MPI_File,
    buf: *const c_void,
    count: MPI_Count,
    datatype: MPI_Datatype,
) -> c_int {
    begin(
        "MPI_File_write_ordered_begin_c",
        fh,
        buf as *mut u8,
        count,
        datatype,
        Where::Ordered,
        true,
    )
}

pub unsafe fn MPI_File_write_ordered_end(
    fh: MPI_File,
    buf: *const c_void,
    status: *mut MPI_Status,
) -> c_int {
    let _ = buf;
    end("MPI_File_write_ordered_end", fh, true, status)
}
