//! Raw operating-system calls, and nothing else.
//!
//! Every call goes through [`cvt`], which turns the C convention (-1 and `errno`) into
//! `io::Result`, so the drivers above never look at `errno` themselves. This module owns the
//! `unsafe` needed to talk to the kernel; it must never hold driver state or policy (no retries,
//! no error mapping to [`crate::Error`]).

#![warn(clippy::undocumented_unsafe_blocks)]

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;

use crate::{Error, PeerId};

/// The most iovec entries the kernel takes in one call (`IOV_MAX` on Linux).
pub(crate) const IOV_MAX: usize = 1024;

/// Return values that signal failure with -1.
pub(crate) trait IsMinusOne: Copy {
    fn is_minus_one(self) -> bool;
}

macro_rules! impl_is_minus_one {
    ($($t:ty)*) => {$(
        impl IsMinusOne for $t {
            #[inline]
            fn is_minus_one(self) -> bool {
                self == -1
            }
        }
    )*};
}
impl_is_minus_one!(i32 i64 isize);

/// Turn a C return value into `io::Result`: -1 means "look at errno".
#[inline]
pub(crate) fn cvt<T: IsMinusOne>(ret: T) -> io::Result<T> {
    if ret.is_minus_one() {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// `shm_open(name, oflag, mode)`.
pub(crate) fn shm_open(name: &CStr, oflag: i32, mode: libc::mode_t) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    let fd = cvt(unsafe { libc::shm_open(name.as_ptr(), oflag | libc::O_CLOEXEC, mode) })?;
    // SAFETY: `fd` was just returned by a successful `shm_open`; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `shm_unlink(name)`.
pub(crate) fn shm_unlink(name: &CStr) -> io::Result<()> {
    // SAFETY: `name` is a valid NUL-terminated string for the duration of the call.
    cvt(unsafe { libc::shm_unlink(name.as_ptr()) }).map(drop)
}

/// `ftruncate(fd, len)`.
pub(crate) fn ftruncate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
    // SAFETY: plain syscall on a file descriptor we borrow for the call.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len) }).map(drop)
}

/// `posix_fallocate(fd, 0, len)`: reserve the backing store now, so that a full tmpfs is an
/// error here rather than a `SIGBUS` on first touch.
pub(crate) fn fallocate(fd: BorrowedFd<'_>, len: u64) -> io::Result<()> {
    let len = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "length too large"))?;
    // SAFETY: plain syscall on a file descriptor we borrow for the call.
    // Unlike the others, this call returns the error number instead of setting errno.
    match unsafe { libc::posix_fallocate(fd.as_raw_fd(), 0, len) } {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

/// The size in bytes of the file behind `fd` (`fstat`).
pub(crate) fn file_size(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is writable storage of the right type; the kernel fills it on success.
    cvt(unsafe { libc::fstat(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    // SAFETY: `fstat` succeeded, so `st` is initialized.
    let st = unsafe { st.assume_init() };
    Ok(st.st_size as u64)
}

/// A shared, read-write memory mapping, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

impl Mmap {
    /// Map `len` bytes of `fd` from offset 0, shared and read-write.
    pub(crate) fn shared(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mmap> {
        // SAFETY: a fresh mapping chosen by the kernel (null hint) cannot alias any Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
        Ok(Mmap { ptr, len })
    }

    /// Start of the mapping (page aligned).
    #[inline]
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping we created and nobody uses after drop (the
        // owners of pointers into it hold the `Mmap`, directly or through its owner).
        unsafe {
            libc::munmap(self.ptr.as_ptr().cast(), self.len);
        }
    }
}

/// This process's id.
pub(crate) fn getpid() -> i32 {
    // SAFETY: `getpid` has no preconditions and cannot fail.
    unsafe { libc::getpid() }
}

/// `kill(pid, 0)`: does `pid` exist (and may we signal it)?
pub(crate) fn probe_pid(pid: i32) -> io::Result<()> {
    // SAFETY: signal 0 sends nothing; it only checks existence and permission.
    cvt(unsafe { libc::kill(pid, 0) }).map(drop)
}

/// Whether process `pid` exists (`kill(pid, 0)`: only `ESRCH` says it does not) and is not a
/// zombie (dead, not yet reaped: a launcher may reap its ranks only at the end of the job).
/// A few system calls: for rare checks, never a fast path.
pub fn pid_alive(pid: i32) -> bool {
    if let Err(e) = probe_pid(pid) {
        return e.raw_os_error() != Some(libc::ESRCH);
    }
    // The state follows the command name, which is in parentheses and may hold any byte.
    match std::fs::read(format!("/proc/{pid}/stat")) {
        Ok(st) => match st.iter().rposition(|&b| b == b')') {
            Some(i) => !matches!(st.get(i + 2), Some(b'Z' | b'X')),
            None => true,
        },
        Err(_) => true,
    }
}

/// `process_vm_readv(pid, local, remote, 0)`: one call, possibly partial.
///
/// # Safety
///
/// Every entry of `local` must describe memory that is valid for writes and not accessed by
/// anything else for the duration of the call (the kernel writes it behind Rust's back).
pub(crate) unsafe fn process_vm_readv(
    pid: i32,
    local: &[libc::iovec],
    remote: &[libc::iovec],
) -> io::Result<usize> {
    // SAFETY: forwarded contract.
    unsafe { process_vm(pid, local, remote, false) }
}

/// `process_vm_writev(pid, local, remote, 0)` when `write` (`local` is then only read),
/// else `process_vm_readv`: one call, possibly partial.
///
/// # Safety
///
/// As [`process_vm_readv`] (for reads only, when `write`).
pub(crate) unsafe fn process_vm(
    pid: i32,
    local: &[libc::iovec],
    remote: &[libc::iovec],
    write: bool,
) -> io::Result<usize> {
    let call = if write {
        libc::process_vm_writev
    } else {
        libc::process_vm_readv
    };
    // SAFETY: the iovec arrays are valid for the call; the caller vouches for the memory the
    // local entries describe; the kernel validates the remote entries against the peer's map.
    let n = cvt(unsafe {
        call(
            pid,
            local.as_ptr(),
            local.len() as libc::c_ulong,
            remote.as_ptr(),
            remote.len() as libc::c_ulong,
            0,
        )
    })?;
    Ok(n as usize)
}

/// Copy `len` bytes between `local` and address `remote` of process `pid`: into `local` with
/// `process_vm_readv`, or out of it with `process_vm_writev` when `write`; partial transfers
/// and interruptions are resumed.
///
/// # Safety
///
/// `local` is valid for `len` bytes (for writes unless `write`), and nothing else touches that
/// memory during the call.
pub(crate) unsafe fn cma_copy(
    pid: i32,
    write: bool,
    local: *mut u8,
    remote: u64,
    len: usize,
) -> io::Result<()> {
    let mut done = 0usize;
    while done < len {
        let l = [libc::iovec {
            // Only the kernel dereferences it (an address outside our memory is EFAULT).
            iov_base: local.wrapping_add(done).cast(),
            iov_len: len - done,
        }];
        let r = [libc::iovec {
            iov_base: remote.wrapping_add(done as u64) as usize as *mut libc::c_void,
            iov_len: len - done,
        }];
        // SAFETY: the local entry describes the caller's memory (see the contract).
        match unsafe { process_vm(pid, &l, &r, write) } {
            Ok(0) => return Err(io::Error::from_raw_os_error(libc::EFAULT)),
            Ok(n) => done += n,
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// The driver's error for a failed cross-memory copy (`what`: the call) of `len` bytes at
/// `addr` in process `pid`, which is world rank `peer` when known (a vanished peer is then
/// [`Error::PeerLost`]).
pub(crate) fn cma_error(
    e: io::Error,
    what: &str,
    peer: Option<PeerId>,
    pid: i32,
    addr: u64,
    len: usize,
) -> Error {
    let whom = match peer {
        Some(p) => format!("rank {} (pid {pid})", p.0),
        None => format!("pid {pid}"),
    };
    match (e.raw_os_error(), peer) {
        (Some(libc::EPERM | libc::ENOSYS), _) => {
            Error::PermissionDenied(format!("{what} with {whom}: {e}"))
        }
        (Some(libc::ESRCH), Some(p)) => Error::PeerLost(p),
        (Some(libc::EFAULT), _) => Error::Invalid(format!(
            "{what}: bad address {addr:#x}+{len} in {whom}: {e}"
        )),
        _ => Error::Io {
            what: format!("{what} with {whom}"),
            source: e,
        },
    }
}
