//! The few OS calls the client needs, each behind a safe function. All `unsafe` of this crate
//! lives here.
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once the fd named by `PMI_FD` has an owner, so that a second `Client::from_env` cannot
/// create a second owner (and a double close).
static FD_TAKEN: AtomicBool = AtomicBool::new(false);

/// Runs a libc call returning -1 on error, turning errno into `io::Error`.
macro_rules! syscall {
    ($e:expr) => {{
        let r = $e;
        if r == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }};
}

/// Takes ownership of the inherited descriptor `fd`, marks it close-on-exec (the rank's own
/// children must not inherit its PMI connection) and says whether it is a socket.
pub(crate) fn inherit_fd(fd: i32) -> io::Result<(OwnedFd, bool)> {
    if fd < 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "negative descriptor",
        ));
    }
    // SAFETY: F_GETFD only inspects the descriptor table; an invalid fd yields EBADF.
    let flags = syscall!(unsafe { libc::fcntl(fd, libc::F_GETFD) })?;
    if FD_TAKEN.swap(true, Ordering::SeqCst) {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "already owned by another PMI client",
        ));
    }
    // SAFETY: as above, on a descriptor we just checked is open.
    syscall!(unsafe { libc::fcntl(fd, libc::F_SETFD, flags | libc::FD_CLOEXEC) })?;
    let mut st = std::mem::MaybeUninit::<libc::stat>::zeroed();
    // SAFETY: fstat writes into the buffer we own; the fd is open.
    syscall!(unsafe { libc::fstat(fd, st.as_mut_ptr()) })?;
    // SAFETY: fstat succeeded, so it initialized the struct.
    let is_socket = unsafe { st.assume_init() }.st_mode & libc::S_IFMT == libc::S_IFSOCK;
    // SAFETY: the launcher handed this descriptor to this process for PMI alone, it is open,
    // and FD_TAKEN guarantees no other OwnedFd is ever made from it here.
    Ok((unsafe { OwnedFd::from_raw_fd(fd) }, is_socket))
}

/// This host's name (empty if the call fails).
pub(crate) fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// Writes all of `buf` to a socket with `MSG_NOSIGNAL`: a closed peer is `EPIPE`, never a
/// SIGPIPE (which would kill a C program that has not ignored it).
pub(crate) fn send_all(fd: std::os::fd::BorrowedFd<'_>, mut buf: &[u8]) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    while !buf.is_empty() {
        // SAFETY: buf is a valid readable slice for its length; the fd is borrowed, hence open.
        let r = unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if r == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "PMI socket accepted no bytes",
            ));
        }
        buf = &buf[r as usize..];
    }
    Ok(())
}
