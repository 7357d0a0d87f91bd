//! The shared file pointer: an 8-byte counter (etypes of the current view) in a side file
//! next to the data file (`.NAME.madmpi-shfp`), read and advanced under an `fcntl` write lock.
//! It works across processes and nodes on any POSIX file system with working byte-range
//! locks (NFS with its lock manager included). Rank 0 removes a stale side file at open and
//! the side file at close; a missing or empty side file means position 0.

use std::os::fd::AsRawFd;
use std::os::raw::c_int;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::Arc;

use super::super::common::out;
use super::*;
use crate::abi::*;

fn side(f: &FileObj) -> IoR<Arc<std::fs::File>> {
    let mut st = f.st.lock();
    if let Some(s) = &st.shfp {
        return Ok(s.clone());
    }
    let s = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o666)
        .open(&f.shfp_path)
        .map_err(|e| {
            os_err(
                e,
                &format!(
                    "cannot open the shared file pointer's side file {}",
                    f.shfp_path.display()
                ),
            )
        })?;
    let s = Arc::new(s);
    st.shfp = Some(s.clone());
    Ok(s)
}

fn load(s: &std::fs::File) -> IoR<i64> {
    let mut b = [0u8; 8];
    let n = pread_full(s, &mut b, 0)?;
    Ok(if n < 8 { 0 } else { i64::from_le_bytes(b) })
}

/// The shared pointer.
pub(crate) fn read_shared(f: &FileObj) -> IoR<i64> {
    let s = side(f)?;
    let _l = RangeLock::new(s.as_raw_fd(), 0, 8, false)?;
    load(&s)
}

/// Set the shared pointer.
pub(crate) fn write_shared(f: &FileObj, v: i64) -> IoR<()> {
    // A missing side file means 0: resetting needs no file (a read-only directory stays
    // usable while the shared pointer is not).
    if v == 0 && f.st.lock().shfp.is_none() && !f.shfp_path.exists() {
        return Ok(());
    }
    let s = side(f)?;
    let _l = RangeLock::new(s.as_raw_fd(), 0, 8, true)?;
    pwrite_all(&s, &v.to_le_bytes(), 0)
}

/// Advance the shared pointer by `n` etypes; its value before.
pub(crate) fn fetch_add(f: &FileObj, n: i64) -> IoR<i64> {
    let s = side(f)?;
    let _l = RangeLock::new(s.as_raw_fd(), 0, 8, true)?;
    let v = load(&s)?;
    pwrite_all(&s, &(v + n).to_le_bytes(), 0)?;
    Ok(v)
}

/// The view position (etypes) of the end of the file.
pub(crate) fn eof_position(f: &FileObj) -> IoR<i64> {
    let v = f.st.lock().view.clone();
    let size = f.f.metadata().map_err(|e| os_err(e, "stat"))?.len() as i64;
    if size <= v.disp {
        return Ok(0);
    }
    if v.is_contiguous() {
        return Ok((size - v.disp) / v.esize as i64);
    }
    let ext = v.filetype.extent() as i64;
    let fsz = v.filetype.size();
    let k0 = ((size - v.disp - v.filetype.true_ub() as i64).div_euclid(ext) + 1).max(0);
    let mut data = k0 * fsz as i64;
    let mut k = k0;
    loop {
        let base = v.disp + k * ext;
        let mut here = 0i64;
        for (off, len) in v.filetype.segments(1, 0..fsz) {
            let o = base + off as i64;
            here += (size - o).clamp(0, len as i64);
        }
        if here == 0 {
            break;
        }
        data += here;
        k += 1;
    }
    Ok(data / v.etype.size() as i64)
}

/// The new position of a seek from `cur`.
pub(crate) fn seek_target(f: &FileObj, cur: i64, offset: i64, whence: c_int) -> IoR<i64> {
    let p = match whence {
        MPI_SEEK_SET => offset,
        MPI_SEEK_CUR => cur + offset,
        MPI_SEEK_END => eof_position(f)? + offset,
        _ => {
            return Err(ioerr(
                MPI_ERR_ARG,
                format!("invalid whence {whence} (MPI_SEEK_SET, MPI_SEEK_CUR or MPI_SEEK_END)"),
            ))
        }
    };
    if p < 0 {
        return Err(ioerr(
            MPI_ERR_ARG,
            format!("the seek would move the file pointer to {p}, before the start of the view"),
        ));
    }
    Ok(p)
}

pub unsafe fn MPI_File_seek_shared(fh: MPI_File, offset: MPI_Offset, whence: c_int) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        let mine = [offset, whence as i64];
        let all = allgather_i64(f.comm, &mine, f.size)?;
        if all.chunks(2).any(|c| c != mine) {
            return Err(ioerr(
                MPI_ERR_NOT_SAME,
                "MPI_File_seek_shared: offset or whence differ between processes",
            ));
        }
        let local = if f.rank == 0 {
            read_shared(&f)
                .and_then(|cur| seek_target(&f, cur, offset, whence))
                .and_then(|p| write_shared(&f, p))
        } else if !matches!(whence, MPI_SEEK_SET | MPI_SEEK_CUR | MPI_SEEK_END) {
            seek_target(&f, 0, offset, whence).map(|_| ())
        } else {
            Ok(())
        };
        agree(f.comm, local)
    })();
    done(fh, &call_of("MPI_File_seek_shared", fh), r)
}

pub unsafe fn MPI_File_get_position_shared(fh: MPI_File, offset: *mut MPI_Offset) -> c_int {
    let r = (|| {
        let f = file(fh)?;
        *out(offset, "offset")? = read_shared(&f)?;
        Ok(())
    })();
    done(fh, &call_of("MPI_File_get_position_shared", fh), r)
}
