//! Every OS call of the launcher, each behind a small safe function. All `unsafe` of the crate
//! lives here (plus the `pre_exec` hook in `spawn`, which can only call async-signal-safe code).
#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

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

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitKind {
    /// `exit(code)`.
    Exited(i32),
    /// Killed by a signal.
    Signaled {
        /// The signal.
        sig: i32,
        /// Whether it dumped core.
        core: bool,
    },
}

/// Opens /dev/null on any of fds 0, 1, 2 that is closed, so that descriptors we create later
/// never land there (a child's stdio would then clobber them).
pub fn ensure_std_fds() {
    for fd in 0..3 {
        // SAFETY: F_GETFD only inspects the descriptor table.
        if unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
            // SAFETY: the path is a NUL-terminated literal; the new fd is deliberately leaked
            // to occupy the hole (it is the lowest free descriptor, i.e. `fd`).
            unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
        }
    }
}

/// Raises the soft limit on open files to the hard limit: each rank costs four descriptors.
pub fn raise_nofile_limit() {
    let mut rl = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut rl) == 0 && rl.rlim_cur < rl.rlim_max {
            rl.rlim_cur = rl.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &rl);
        }
    }
}

/// A connected pair of close-on-exec Unix stream sockets.
pub fn socketpair() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array we own.
    syscall!(unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// A close-on-exec pipe: (read end, write end).
pub fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we own.
    syscall!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) })?;
    // SAFETY: both descriptors were just created and are owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Sets O_NONBLOCK on a descriptor we own alone (never on our inherited stdio).
pub fn set_nonblocking(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: fcntl on a borrowed, hence open, descriptor.
    let fl = syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    syscall!(unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) })?;
    Ok(())
}

/// `read(2)`; `Interrupted` is retried.
pub fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for writes of its length.
        let r = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// One `write(2)` (or `send(MSG_NOSIGNAL)` on a socket); `Interrupted` is retried.
pub fn write(fd: RawFd, buf: &[u8], socket: bool) -> io::Result<usize> {
    loop {
        // SAFETY: buf is valid for reads of its length.
        let r = unsafe {
            if socket {
                libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL)
            } else {
                libc::write(fd, buf.as_ptr().cast(), buf.len())
            }
        };
        if r >= 0 {
            return Ok(r as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Writes everything, waiting (in poll, not spinning) if the descriptor is non-blocking and
/// full. Used for our own stdout/stderr, which we must not switch to non-blocking mode.
pub fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        match write(fd, buf, false) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut p = [libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                }];
                poll(&mut p, 100)?;
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// `poll(2)`; an interrupted call reports no event.
pub fn poll(fds: &mut [libc::pollfd], timeout_ms: i32) -> io::Result<usize> {
    // SAFETY: fds is a valid array of pollfd of the given length.
    let r = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// The signals the launcher handles through its signalfd.
pub const HANDLED_SIGNALS: [i32; 7] = [
    libc::SIGCHLD,
    libc::SIGINT,
    libc::SIGTERM,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// Blocks [`HANDLED_SIGNALS`] and returns a non-blocking signalfd that reports them.
/// Children get an empty mask back in `spawn`'s `pre_exec` (std resets it too).
pub fn signalfd() -> io::Result<OwnedFd> {
    // SAFETY: sigset manipulation on a zeroed set we own; sigprocmask and signalfd take valid
    // pointers to it.
    unsafe {
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        for s in HANDLED_SIGNALS {
            libc::sigaddset(&mut set, s);
        }
        syscall!(libc::sigprocmask(
            libc::SIG_BLOCK,
            &set,
            std::ptr::null_mut()
        ))?;
        let fd = syscall!(libc::signalfd(
            -1,
            &set,
            libc::SFD_NONBLOCK | libc::SFD_CLOEXEC
        ))?;
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// Drains the signalfd: the signal numbers received.
pub fn read_signals(fd: BorrowedFd<'_>) -> Vec<i32> {
    let mut out = Vec::new();
    loop {
        // SAFETY: signalfd_siginfo is plain data; zeroed is a valid value.
        let mut info: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
        let size = std::mem::size_of::<libc::signalfd_siginfo>();
        // SAFETY: we read at most `size` bytes into the struct we own.
        let r = unsafe {
            libc::read(
                fd.as_raw_fd(),
                (&mut info as *mut libc::signalfd_siginfo).cast(),
                size,
            )
        };
        if r != size as isize {
            return out;
        }
        out.push(info.ssi_signo as i32);
    }
}

/// `kill(2)`; ESRCH (already gone) is not an error worth reporting.
pub fn kill(pid: i32, sig: i32) {
    // SAFETY: kill has no memory-safety preconditions. Callers only pass pids of children not
    // yet reaped (or the group they lead), which cannot have been recycled.
    unsafe { libc::kill(pid, sig) };
}

/// Has `pid` (our child) ended? Uses WNOWAIT: the child stays a zombie, so its pid (and the
/// process group it may lead) cannot be reused while we may still signal it.
pub fn exited(pid: i32) -> io::Result<Option<ExitKind>> {
    // SAFETY: siginfo_t is plain data; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to our struct; pid is our child.
    syscall!(unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    })?;
    // SAFETY: waitid succeeded; for WEXITED children it filled si_pid and si_status (si_pid
    // stays 0 when nothing has changed).
    let (spid, status) = unsafe { (info.si_pid(), info.si_status()) };
    if spid == 0 {
        return Ok(None);
    }
    Ok(Some(match info.si_code {
        libc::CLD_EXITED => ExitKind::Exited(status),
        libc::CLD_DUMPED => ExitKind::Signaled {
            sig: status,
            core: true,
        },
        _ => ExitKind::Signaled {
            sig: status,
            core: false,
        },
    }))
}

/// Reaps a child known to have exited.
pub fn reap(pid: i32) {
    let mut status = 0;
    loop {
        // SAFETY: valid pointer to our int; pid is our child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            return;
        }
    }
}

/// True when fd 0 is a terminal whose foreground process group is not ours (mpirun runs in the
/// background): reading it would stop us with SIGTTIN.
pub fn stdin_is_background_tty() -> bool {
    // SAFETY: isatty/tcgetpgrp/getpgrp have no memory-safety preconditions.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) != libc::getpgrp() }
}

/// The name of a signal ("Killed", "Segmentation fault", ...).
pub fn signal_name(sig: i32) -> String {
    // SAFETY: strsignal returns a pointer to a NUL-terminated string valid until the next call;
    // we copy it at once and the launcher is single-threaded.
    unsafe {
        let p = libc::strsignal(sig);
        if p.is_null() {
            return format!("signal {sig}");
        }
        std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// `n` random bytes from /dev/urandom as lowercase hex (falls back to time and pid).
pub fn random_hex(n: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; n];
    let ok = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    if !ok {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let mut x = (t.as_nanos() as u64) ^ (u64::from(std::process::id()) << 32);
        for b in &mut buf {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *b = x as u8;
        }
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// What a child does between fork and exec (async-signal-safe calls only).
pub struct ChildSetup {
    /// The launcher's pid: the child dies at once if its parent already changed.
    pub parent: i32,
    /// Process group to join; 0 makes a new one led by the child.
    pub pgid: i32,
    /// The PMI socket end to keep open across exec.
    pub keep_fd: Option<RawFd>,
    /// The CPU to bind the child to.
    pub cpu: Option<usize>,
}

/// The CPUs this process may run on, in increasing order (empty if the OS does not say).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

impl ChildSetup {
    /// Runs in the child after fork.
    pub fn apply(&self) -> io::Result<()> {
        // SAFETY: prctl, getppid, setpgid, fcntl, sched_setaffinity, sigemptyset and
        // sigprocmask are async-signal-safe and get valid arguments; nothing here allocates.
        unsafe {
            // A launcher killed with SIGKILL cannot clean up: the kernel kills its ranks for it.
            syscall!(libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0))?;
            if libc::getppid() != self.parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            // Our own process group, so that terminal signals go to mpirun alone (it forwards
            // them) and one kill(-pgid) reaches every rank and its descendants.
            syscall!(libc::setpgid(0, self.pgid))?;
            if let Some(fd) = self.keep_fd {
                let fl = syscall!(libc::fcntl(fd, libc::F_GETFD))?;
                syscall!(libc::fcntl(fd, libc::F_SETFD, fl & !libc::FD_CLOEXEC))?;
            }
            if let Some(cpu) = self.cpu {
                let mut cpus = std::mem::zeroed::<libc::cpu_set_t>();
                libc::CPU_SET(cpu, &mut cpus);
                syscall!(libc::sched_setaffinity(
                    0,
                    std::mem::size_of::<libc::cpu_set_t>(),
                    &cpus
                ))?;
            }
            let mut set = std::mem::zeroed::<libc::sigset_t>();
            libc::sigemptyset(&mut set);
            syscall!(libc::sigprocmask(
                libc::SIG_SETMASK,
                &set,
                std::ptr::null_mut()
            ))?;
        }
        Ok(())
    }
}

/// Puts a just-spawned child into process group `pgid` from the parent side too, which closes
/// the window in which a signal to the group could miss it. Failure means the child did it
/// itself already (or exec'd): harmless.
pub fn setpgid(pid: i32, pgid: i32) {
    // SAFETY: no memory-safety preconditions.
    unsafe { libc::setpgid(pid, pgid) };
}

/// Our pid.
pub fn getpid() -> i32 {
    std::process::id() as i32
}

/// Installs `setup` to run in the child between fork and exec.
pub fn set_child_setup(cmd: &mut std::process::Command, setup: ChildSetup) {
    use std::os::unix::process::CommandExt;
    // SAFETY: `ChildSetup::apply` only makes async-signal-safe calls and does not allocate, as
    // required between fork and exec.
    unsafe {
        cmd.pre_exec(move || setup.apply());
    }
}

/// `n` bytes from the OS's cryptographic random source, as lowercase hex. Unlike
/// [`random_hex`], this never falls back to anything guessable.
pub fn secret_hex(n: usize) -> std::io::Result<String> {
    let mut buf = vec![0u8; n];
    let mut filled = 0;
    while filled < n {
        // SAFETY: getrandom writes at most `n - filled` bytes into the rest of `buf`.
        let r = unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), n - filled, 0) };
        if r < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        filled += r as usize;
    }
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// This machine's host name ("" when it cannot be read).
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into the buffer we own.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// An address of a network interface.
#[derive(Debug, Clone)]
pub struct IfAddr {
    /// Interface name (`eth0`).
    pub name: String,
    /// The address.
    pub addr: std::net::IpAddr,
    /// IFF_UP.
    pub up: bool,
    /// IFF_LOOPBACK.
    pub loopback: bool,
}

/// The IPv4 and IPv6 addresses of this machine's interfaces, in the kernel's order.
pub fn interface_addresses() -> io::Result<Vec<IfAddr>> {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs allocates a list and stores its head in our pointer.
    syscall!(unsafe { libc::getifaddrs(&mut head) })?;
    let mut out = Vec::new();
    let mut p = head;
    while !p.is_null() {
        // SAFETY: `p` is a node of the list getifaddrs returned, not yet freed.
        let ifa = unsafe { &*p };
        p = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        // SAFETY: ifa_addr points to a sockaddr whose family says its real type; ifa_name is
        // a NUL-terminated string, both valid until freeifaddrs.
        let (family, name) = unsafe {
            (
                i32::from((*ifa.ifa_addr).sa_family),
                std::ffi::CStr::from_ptr(ifa.ifa_name)
                    .to_string_lossy()
                    .into_owned(),
            )
        };
        let addr = match family {
            libc::AF_INET => {
                // SAFETY: family AF_INET: the address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                // SAFETY: family AF_INET6: the address is a sockaddr_in6.
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
            }
            _ => continue,
        };
        let flags = ifa.ifa_flags as i32;
        out.push(IfAddr {
            name,
            addr,
            up: flags & libc::IFF_UP != 0,
            loopback: flags & libc::IFF_LOOPBACK != 0,
        });
    }
    // SAFETY: the list came from getifaddrs and is freed once; no reference into it remains.
    unsafe { libc::freeifaddrs(head) };
    Ok(out)
}

/// Ends this process as if killed by `sig` (the proxy mirrors its rank's end this way), without
/// leaving a core file; exits with 128+sig if the signal does not kill.
pub fn die_by_signal(sig: i32) -> ! {
    // SAFETY: setrlimit reads our struct; signal, sigprocmask and kill have no memory-safety
    // preconditions beyond valid pointers to the sets we own.
    unsafe {
        let none = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &none);
        libc::signal(sig, libc::SIG_DFL);
        let mut set = std::mem::zeroed::<libc::sigset_t>();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
    }
    std::process::exit(128 + sig)
}
