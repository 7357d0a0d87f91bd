//! The read and write calls: one engine ([`access`]) for every form, the helper of the blocking
//! calls (individual pointer, explicit offset, shared pointer, ordered; independent and
//! collective), whose C wrappers `build.rs` generates (`generate_io_wrappers`), seek and position.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use super::super::common::{check_buf, count_arg, out};
use super::access::{read_segs, segments_of, write_segs, Mem};
use super::file::hints;
use super::*;
use crate::abi::*;
use crate::handles;

/// Where an access starts.
#[derive(Clone, Copy)]
pub(crate) enum Where {
    /// An explicit offset (etypes of the view).
    At(i64),
    /// The individual file pointer.
    Indiv,
    /// The shared file pointer.
    Shared,
    /// The shared file pointer, in rank order (collective).
    Ordered,
}

/// Local checks of an access: the file allows it, the arguments are valid.
fn prepare(
    f: &FileObj,
    buf: *mut u8,
    count: i64,
    dth: MPI_Datatype,
    wh: Where,
    write: bool,
) -> IoR<Mem> {
    let count = count_arg(count)?;
    let dt = handles::datatype(dth)?;
    if !dt.is_committed() {
        return Err(ioerr(MPI_ERR_TYPE, "the datatype is not committed"));
    }
    check_buf(buf as *const c_void, count, &dt)?;
    if write && f.amode & MPI_MODE_RDONLY != 0 {
        return Err(ioerr(
            MPI_ERR_READ_ONLY,
            "the file was opened MPI_MODE_RDONLY",
        ));
    }
    if !write && f.amode & MPI_MODE_WRONLY != 0 {
        return Err(ioerr(
            MPI_ERR_ACCESS,
            "the file was opened MPI_MODE_WRONLY: it cannot be read",
        ));
    }
    if f.amode & MPI_MODE_SEQUENTIAL != 0 && matches!(wh, Where::At(_) | Where::Indiv) {
        return Err(ioerr(
            MPI_ERR_UNSUPPORTED_OPERATION,
            "a file opened MPI_MODE_SEQUENTIAL is accessed through the shared file pointer only",
        ));
    }
    if let Where::At(o) = wh {
        if o < 0 {
            return Err(ioerr(
                MPI_ERR_ARG,
                format!("invalid offset {o} (must be >= 0)"),
            ));
        }
    }
    Ok(Mem {
        buf,
        count,
        dt: (*dt).clone(),
        dth,
    })
}

/// One access of `count` elements of `dth` at `buf`; the memory bytes moved.
#[allow(clippy::too_many_arguments)]
pub(crate) fn access(
    f: &Arc<FileObj>,
    buf: *mut u8,
    count: i64,
    dth: MPI_Datatype,
    wh: Where,
    write: bool,
    coll: bool,
) -> IoR<u64> {
    let (view, info, atomic) = {
        let st = f.st.lock();
        (st.view.clone(), st.info.clone(), st.atomic)
    };
    let h = hints(&info);
    let prep = prepare(f, buf, count, dth, wh, write).and_then(|m| {
        let n = m.stream_bytes(&view)?;
        Ok((m, n))
    });
    // A collective access at an offset or the individual pointer agrees on errors in its
    // first exchange (`coll::fail`, the plan of two-phase I/O), saving one.
    let at_once = coll && matches!(wh, Where::At(_) | Where::Indiv);
    let (mem, nstream) = if at_once {
        prep.map_err(|e| coll::fail(f, &h, e, write))?
    } else if coll || matches!(wh, Where::Ordered) {
        agree(f.comm, prep)?
    } else {
        prep?
    };
    let etypes = (nstream / view.esize) as i64;
    let pos = match wh {
        Where::At(o) => o,
        Where::Indiv => f.st.lock().pos,
        Where::Shared => shared::fetch_add(f, etypes)?,
        Where::Ordered => {
            let all = allgather_i64(f.comm, &[etypes], f.size)?;
            let total: i64 = all.iter().sum();
            let before: i64 = all[..f.rank as usize].iter().sum();
            let mut base = [0i64; 1];
            let r = if f.rank == 0 {
                shared::fetch_add(f, total).map(|b| base[0] = b)
            } else {
                Ok(())
            };
            agree(f.comm, r)?;
            bcast_i64(f.comm, &mut base, 0)?;
            base[0] + before
        }
    };
    let moved = if write {
        if coll {
            let data = mem.write_stream(&view);
            coll::write(f, &view, pos, data.as_deref(), &h, atomic)?;
        } else {
            let data = mem.write_stream(&view)?;
            let segs = segments_of(&view, pos, data.len())?;
            write_segs(f, &segs, &data, &h, atomic)?;
        }
        mem.bytes() as u64
    } else {
        mem.read_stream(&view, |out| {
            if coll {
                coll::read(f, &view, pos, out, &h, atomic)
            } else {
                let segs = segments_of(&view, pos, out.len())?;
                read_segs(f, &segs, out, &h, atomic)
            }
        })? as u64
    };
    if let Where::Indiv = wh {
        let adv = if write {
            etypes
        } else {
            (moved / view.etype.size() as u64) as i64
        };
        f.st.lock().pos = pos + adv;
    }
    Ok(moved)
}

/// Write the status of an access that moved `bytes` (MPI_ERROR untouched).
pub(crate) fn io_status(p: *mut MPI_Status, bytes: u64) {
    // SAFETY: a non-null status pointer points to a status (the caller's contract).
    if let Some(s) = unsafe { p.as_mut() } {
        s.MPI_SOURCE = MPI_ANY_SOURCE;
        s.MPI_TAG = MPI_ANY_TAG;
        super::super::common::set_status_bytes(s, bytes);
        s.MPI_internal[2] = 0;
        s.MPI_internal[3] = 0;
        s.MPI_internal[4] = 0;
    }
}

/// A blocking call.
#[allow(clippy::too_many_arguments)]
pub(super) fn blocking(
    name: &'static str,
    fh: MPI_File,
    buf: *mut u8,
    count: i64,
    dth: MPI_Datatype,
    wh: Where,
    write: bool,
    coll: bool,
    status: *mut MPI_Status,
) -> c_int {
    let r = file(fh).and_then(|f| access(&f, buf, count, dth, wh, write, coll));
    match r {
        Ok(n) => {
            io_status(status, n);
            MPI_SUCCESS
        }
        Err(e) => raise(fh, &call_of(name, fh), e),
    }
}

pub unsafe fn MPI_File_seek(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        if f.amode & MPI_MODE_SEQUENTIAL != 0 {
            return Err(ioerr(
                MPI_ERR_UNSUPPORTED_OPERATION,
                "MPI_File_seek on a file opened MPI_MODE_SEQUENTIAL",
            ));
        }
        let cur = f.st.lock().pos;
        let p = shared::seek_target(&f, cur, offset, whence)?;
        f.st.lock().pos = p;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_seek", fh), r)
}

pub unsafe fn MPI_File_get_position(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        *out(offset, "offset")? = f.st.lock().pos;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_position", fh), r)
}
