//! Gathering writes and scattering reads (`pwritev`, `preadv`) of one contiguous file range
//! from or into many memory pieces: what lets an aggregator write the pieces it received
//! without first copying them into one buffer, and read its window straight into the
//! messages it answers with.

use std::os::raw::c_int;

use super::super::{os_err, IoR};

/// Pieces per system call at most (`IOV_MAX` on Linux and the BSDs).
const IOV_MAX: usize = 1024;

/// Write the pieces `iov` (pointer, length), one after the other, at file offset `off`.
///
/// # Safety
/// Every piece must be readable for its length for the call.
pub(super) unsafe fn pwritev_all(fd: c_int, iov: &[(*const u8, usize)], off: u64) -> IoR<()> {
    let mut v: Vec<libc::iovec> = iov
        .iter()
        .filter(|p| p.1 > 0)
        .map(|&(p, l)| libc::iovec {
            iov_base: p as *mut _,
            iov_len: l,
        })
        .collect();
    let mut at = 0;
    let mut off = off;
    while at < v.len() {
        let n = (v.len() - at).min(IOV_MAX);
        // SAFETY: the iovecs describe readable memory (the caller's contract).
        let rc = unsafe { libc::pwritev(fd, v[at..].as_ptr(), n as c_int, off as libc::off_t) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(os_err(e, "write"));
        }
        if rc == 0 {
            return Err(os_err(
                std::io::Error::from(std::io::ErrorKind::WriteZero),
                "write",
            ));
        }
        off += rc as u64;
        advance(&mut v, &mut at, rc as usize);
    }
    Ok(())
}

/// Read the file range at `off` into the pieces `iov`, one after the other; past the end of the
/// file the pieces are zero-filled. Returns the bytes read from the file.
///
/// # Safety
/// Every piece must be writable for its length for the call.
pub(super) unsafe fn preadv_full(fd: c_int, iov: &[(*mut u8, usize)], off: u64) -> IoR<usize> {
    let mut v: Vec<libc::iovec> = iov
        .iter()
        .filter(|p| p.1 > 0)
        .map(|&(p, l)| libc::iovec {
            iov_base: p as *mut _,
            iov_len: l,
        })
        .collect();
    let mut at = 0;
    let mut done = 0usize;
    while at < v.len() {
        let n = (v.len() - at).min(IOV_MAX);
        let o = (off + done as u64) as libc::off_t;
        // SAFETY: the iovecs describe writable memory (the caller's contract).
        let rc = unsafe { libc::preadv(fd, v[at..].as_ptr(), n as c_int, o) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(os_err(e, "read"));
        }
        if rc == 0 {
            // The end of the file: zeros for the rest.
            for x in &v[at..] {
                // SAFETY: as above.
                unsafe { std::ptr::write_bytes(x.iov_base as *mut u8, 0, x.iov_len) };
            }
            break;
        }
        done += rc as usize;
        advance(&mut v, &mut at, rc as usize);
    }
    Ok(done)
}

/// Move past `n` bytes of the iovecs from `v[*at]` on.
fn advance(v: &mut [libc::iovec], at: &mut usize, mut n: usize) {
    while n > 0 && *at < v.len() {
        let x = &mut v[*at];
        if n >= x.iov_len {
            n -= x.iov_len;
            *at += 1;
        } else {
            x.iov_base = (x.iov_base as *mut u8).wrapping_add(n) as *mut _;
            x.iov_len -= n;
            n = 0;
        }
    }
}
