//! Socket, epoll and interface calls of the TCP driver, and nothing else.
//!
//! Every call goes through [`cvt`] (errno into `io::Result`). This module holds no driver
//! state and no policy: no retries beyond `EINTR`, no mapping to [`crate::Error`].

#![warn(clippy::undocumented_unsafe_blocks)]

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use crate::sys::cvt;

/// Retry a call while it fails with `EINTR`.
fn retry<T>(mut f: impl FnMut() -> io::Result<T>) -> io::Result<T> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            r => return r,
        }
    }
}

/// A `sockaddr_storage` holding `addr`, and its length.
fn to_raw(addr: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in`.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: `sockaddr_storage` is larger than and aligned for `sockaddr_in6`.
            unsafe { std::ptr::write((&mut st as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

/// The address in a `sockaddr` the kernel filled, if it is IPv4 or IPv6.
///
/// # Safety
///
/// `sa` must point to a valid socket address of at least the size its family implies.
unsafe fn from_raw(sa: *const libc::sockaddr) -> Option<SocketAddr> {
    // SAFETY: the caller vouches for `sa`; the family field comes first in every sockaddr.
    let family = i32::from(unsafe { (*sa).sa_family });
    match family {
        libc::AF_INET => {
            // SAFETY: the family says this is a `sockaddr_in`; it may be unaligned in a buffer.
            let sin = unsafe { std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in>()) };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddr::V4(SocketAddrV4::new(
                ip,
                u16::from_be(sin.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: as above, for `sockaddr_in6`.
            let sin6 = unsafe { std::ptr::read_unaligned(sa.cast::<libc::sockaddr_in6>()) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(sin6.sin6_addr.s6_addr),
                u16::from_be(sin6.sin6_port),
                sin6.sin6_flowinfo,
                sin6.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// A non-blocking, close-on-exec TCP socket for addresses of `addr`'s family.
pub(crate) fn tcp_socket(addr: &SocketAddr) -> io::Result<OwnedFd> {
    let domain = match addr {
        SocketAddr::V4(_) => libc::AF_INET,
        SocketAddr::V6(_) => libc::AF_INET6,
    };
    // SAFETY: plain syscall, no pointers.
    let fd = cvt(unsafe {
        libc::socket(
            domain,
            libc::SOCK_STREAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    })?;
    // SAFETY: `fd` was just returned by a successful `socket`; nobody else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt(fd, level, name, &value)` for an `int` option.
pub(crate) fn set_int(fd: BorrowedFd<'_>, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: the option value is a valid `int` for the duration of the call.
    cvt(unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const i32).cast(),
            size_of::<i32>() as libc::socklen_t,
        )
    })
    .map(drop)
}

/// `getsockopt(fd, level, name)` for an `int` option.
pub(crate) fn get_int(fd: BorrowedFd<'_>, level: i32, name: i32) -> io::Result<i32> {
    let mut value: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: `value` and `len` are writable and describe an `int`.
    cvt(unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut value as *mut i32).cast(),
            &mut len,
        )
    })?;
    Ok(value)
}

/// The pending error of a socket (`SO_ERROR`), which reading clears: how a non-blocking
/// `connect` ended.
pub(crate) fn take_error(fd: BorrowedFd<'_>) -> io::Result<Option<io::Error>> {
    let e = get_int(fd, libc::SOL_SOCKET, libc::SO_ERROR)?;
    Ok((e != 0).then(|| io::Error::from_raw_os_error(e)))
}

/// `bind(fd, addr)`.
pub(crate) fn bind(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<()> {
    let (st, len) = to_raw(addr);
    // SAFETY: `st` holds a valid address of `len` bytes.
    cvt(unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&st as *const libc::sockaddr_storage).cast(),
            len,
        )
    })
    .map(drop)
}

/// `listen(fd, backlog)`.
pub(crate) fn listen(fd: BorrowedFd<'_>, backlog: i32) -> io::Result<()> {
    // SAFETY: plain syscall.
    cvt(unsafe { libc::listen(fd.as_raw_fd(), backlog) }).map(drop)
}

/// Start a non-blocking `connect`: `Ok(true)` if it completed at once, `Ok(false)` if it is in
/// progress (the socket becomes writable when it ends; [`take_error`] says how).
pub(crate) fn connect(fd: BorrowedFd<'_>, addr: &SocketAddr) -> io::Result<bool> {
    let (st, len) = to_raw(addr);
    // SAFETY: `st` holds a valid address of `len` bytes.
    let r = cvt(unsafe {
        libc::connect(
            fd.as_raw_fd(),
            (&st as *const libc::sockaddr_storage).cast(),
            len,
        )
    });
    match r {
        Ok(_) => Ok(true),
        // EINTR on a non-blocking connect also means "in progress".
        Err(e) if matches!(e.raw_os_error(), Some(libc::EINPROGRESS | libc::EINTR)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Accept one connection (non-blocking, close-on-exec), or `None` when none is waiting.
pub(crate) fn accept(fd: BorrowedFd<'_>) -> io::Result<Option<(OwnedFd, Option<SocketAddr>)>> {
    // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let r = retry(|| {
        // SAFETY: `st`/`len` are writable storage for the peer address.
        cvt(unsafe {
            libc::accept4(
                fd.as_raw_fd(),
                (&mut st as *mut libc::sockaddr_storage).cast(),
                &mut len,
                libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            )
        })
    });
    match r {
        Ok(new) => {
            // SAFETY: `new` was just returned by a successful `accept4`; nobody else owns it.
            let owned = unsafe { OwnedFd::from_raw_fd(new) };
            // SAFETY: the kernel wrote a valid address of its family into `st`.
            let peer = unsafe { from_raw((&st as *const libc::sockaddr_storage).cast()) };
            Ok(Some((owned, peer)))
        }
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(e) => Err(e),
    }
}

/// The local address a socket is bound to.
pub(crate) fn local_addr(fd: BorrowedFd<'_>) -> io::Result<SocketAddr> {
    // SAFETY: all-zero bytes are a valid `sockaddr_storage`.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: `st`/`len` are writable storage for the address.
    cvt(unsafe {
        libc::getsockname(
            fd.as_raw_fd(),
            (&mut st as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    })?;
    // SAFETY: the kernel wrote a valid address of its family into `st`.
    unsafe { from_raw((&st as *const libc::sockaddr_storage).cast()) }
        .ok_or_else(|| io::Error::other("socket bound to a non-IP address"))
}

/// `sendmsg(fd, iov, MSG_NOSIGNAL | MSG_DONTWAIT)`: a gathering write that reports a closed
/// peer as `EPIPE` instead of raising `SIGPIPE` (which C programs do not ignore).
///
/// # Safety
///
/// Every entry of `iov` must describe memory valid for reads for the duration of the call.
pub(crate) unsafe fn sendmsg(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> io::Result<usize> {
    // SAFETY: all-zero bytes are a valid `msghdr` (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr().cast_mut();
    msg.msg_iovlen = iov.len() as _;
    retry(|| {
        // SAFETY: `msg` points to `iov`, whose memory the caller vouches for.
        cvt(unsafe {
            libc::sendmsg(
                fd.as_raw_fd(),
                &msg,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        })
        .map(|n| n as usize)
    })
}

/// `send(fd, buf, MSG_NOSIGNAL | MSG_DONTWAIT)`: [`sendmsg`] of one contiguous buffer,
/// which the kernel takes without copying in a message header and an iovec array.
pub(crate) fn send(fd: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: `buf` is valid for reads of its length.
        cvt(unsafe {
            libc::send(
                fd.as_raw_fd(),
                buf.as_ptr().cast(),
                buf.len(),
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        })
        .map(|n| n as usize)
    })
}

/// `readv(fd, iov)`: a scattering read.
///
/// # Safety
///
/// Every entry of `iov` must describe memory valid for writes and not accessed by anything
/// else for the duration of the call.
pub(crate) unsafe fn readv(fd: BorrowedFd<'_>, iov: &[libc::iovec]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: the caller vouches for the memory `iov` describes.
        cvt(unsafe { libc::readv(fd.as_raw_fd(), iov.as_ptr(), iov.len() as i32) })
            .map(|n| n as usize)
    })
}

/// `recv(fd, buf, MSG_DONTWAIT)`.
pub(crate) fn recv(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    retry(|| {
        // SAFETY: `buf` is valid for writes of its length.
        cvt(unsafe {
            libc::recv(
                fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        })
        .map(|n| n as usize)
    })
}

/// `shutdown(fd, SHUT_WR)`: send FIN after the queued data.
pub(crate) fn shutdown_write(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall.
    cvt(unsafe { libc::shutdown(fd.as_raw_fd(), libc::SHUT_WR) }).map(drop)
}

/// Fill `buf` with random bytes from the kernel (`getrandom`, blocking only until the pool is
/// initialized at boot).
pub(crate) fn random(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: `rest` is valid for writes of its length.
        let n = retry(|| cvt(unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) }))?;
        done += n as usize;
    }
    Ok(())
}

/// One entry of the interface list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Interface {
    /// Interface name (`lo`, `eth0`, ...).
    pub name: String,
    /// One of its addresses.
    pub addr: IpAddr,
    /// `IFF_UP` is set.
    pub up: bool,
    /// `IFF_LOOPBACK` is set.
    pub loopback: bool,
}

/// Every IPv4 and IPv6 address of every interface (`getifaddrs`).
pub(crate) fn interfaces() -> io::Result<Vec<Interface>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is writable; on success the kernel list is freed below.
    cvt(unsafe { libc::getifaddrs(&mut head) })?;
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list `getifaddrs` returned, not yet freed.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() && !ifa.ifa_name.is_null() {
            // SAFETY: `ifa_addr` points to an address of the family it announces.
            if let Some(sa) = unsafe { from_raw(ifa.ifa_addr) } {
                // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
                let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) };
                out.push(Interface {
                    name: name.to_string_lossy().into_owned(),
                    addr: sa.ip(),
                    up: ifa.ifa_flags & libc::IFF_UP as u32 != 0,
                    loopback: ifa.ifa_flags & libc::IFF_LOOPBACK as u32 != 0,
                });
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: `head` came from a successful `getifaddrs` and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// An epoll instance, closed on drop.
#[derive(Debug)]
pub(crate) struct Epoll {
    fd: OwnedFd,
}

/// One epoll event (`epoll_event`, packed on x86-64 as the kernel wants).
pub(crate) type Event = libc::epoll_event;

/// An empty event, to fill a buffer with.
pub(crate) fn empty_event() -> Event {
    libc::epoll_event { events: 0, u64: 0 }
}

impl Epoll {
    /// A new, close-on-exec epoll instance.
    pub(crate) fn new() -> io::Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = cvt(unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) })?;
        // SAFETY: `fd` was just returned by a successful `epoll_create1`; nobody else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Epoll { fd })
    }

    /// Watch `fd` for `events`, tagging its events with `token`.
    pub(crate) fn add(&self, fd: BorrowedFd<'_>, token: u64, events: u32) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: `ev` is a valid event for the call.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                fd.as_raw_fd(),
                &mut ev,
            )
        })
        .map(drop)
    }

    /// Stop watching `fd`.
    pub(crate) fn delete(&self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let mut ev = empty_event();
        // SAFETY: `ev` is ignored by the kernel for DEL but must be non-null on old kernels.
        cvt(unsafe {
            libc::epoll_ctl(
                self.fd.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                fd.as_raw_fd(),
                &mut ev,
            )
        })
        .map(drop)
    }

    /// Wait up to `timeout_ms` (0: do not wait, -1: forever) for events; returns how many of
    /// `events` were filled.
    pub(crate) fn wait(&self, events: &mut [Event], timeout_ms: i32) -> io::Result<usize> {
        let max = events.len().min(i32::MAX as usize) as i32;
        let r = cvt(
            // SAFETY: `events` is writable storage for `max` events.
            unsafe { libc::epoll_wait(self.fd.as_raw_fd(), events.as_mut_ptr(), max, timeout_ms) },
        );
        match r {
            Ok(n) => Ok(n as usize),
            // A signal: report "nothing", the caller polls again.
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Ok(0),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_round_trip() {
        for a in ["127.0.0.1:4242", "[::1]:9", "[fe80::1%3]:80", "0.0.0.0:0"] {
            let a: SocketAddr = a.parse().unwrap();
            let (st, _) = to_raw(&a);
            // SAFETY: `st` holds the address `to_raw` wrote.
            let back = unsafe { from_raw((&st as *const libc::sockaddr_storage).cast()) };
            assert_eq!(back, Some(a));
        }
    }

    #[test]
    fn loopback_interface_is_listed() {
        let ifs = interfaces().unwrap();
        assert!(ifs
            .iter()
            .any(|i| i.loopback && i.addr == IpAddr::V4(Ipv4Addr::LOCALHOST)));
    }

    #[test]
    fn random_bytes_differ() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        random(&mut a).unwrap();
        random(&mut b).unwrap();
        assert_ne!(a, b);
    }
}
