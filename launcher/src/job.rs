//! One job: start the ranks, serve PMI, forward stdio, watch exits, tear down, clean up.
//!
//! Everything runs on one thread in one poll(2) loop over: a signalfd (SIGCHLD and the
//! signals we forward), each rank's PMI socket, stdout and stderr pipes, our stdin and rank 0's
//! stdin pipe, the streams to the proxies of remote ranks, and (with `--pmi-port` or remote
//! hosts) a listening socket. Nothing spins: the loop sleeps in poll until a descriptor is ready
//! or the next deadline (timeout, SIGKILL escalation, output drain, a PMI connection that has
//! not authenticated in time) is due.
//!
//! Ranks on this machine are our children. A rank on another host is started by the
//! remote-start command (`ssh host "exec mpirun --madmpi-proxy"`, see [`crate::proxy`]): that
//! command is our child and stands for the rank (its output is the rank's, its end the rank's
//! end, signalling it ends the rank), and the rank reaches us at `PMI_PORT`, authenticated
//! with the job's token.
//!
//! Children are observed with `waitid(WNOWAIT)` and reaped only at the very end, so their pids,
//! and the process group rank 0 leads, cannot be recycled while we may still signal them.

use std::ffi::OsString;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use madmpi_pmi::{ConnId, Event, Frame, LineFramer, Server, ServerConfig};

use crate::hosts::Placement;
use crate::proxy::{self, LaunchSpec};
use crate::sys::{self, ExitKind, IfAddr};

/// After the first SIGTERM, how long ranks get before SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// After the last rank ended, how long we wait for its descendants to close the output pipes.
const DRAIN_GRACE: Duration = Duration::from_millis(1000);
/// Bytes read per readiness event.
const CHUNK: usize = 64 * 1024;
/// A line longer than this is written in pieces, so memory stays bounded.
const MAX_LINE: usize = 1 << 20;
/// How long a rank's partial line (no newline yet: a prompt) waits for more output before it
/// is written as it is.
const PARTIAL_DELAY: Duration = Duration::from_millis(100);
/// The exit code of a job killed by `--timeout` (as `timeout(1)`).
pub const TIMEOUT_EXIT: i32 = 124;
/// How long a failure that may be the consequence of another (an abort, an error exit) waits
/// for a rank killed by a signal, which is then reported instead: a rank that loses a peer may
/// abort before we learn of the peer's death, all the more when the news comes from another
/// host through the remote-start command.
const SETTLE: Duration = Duration::from_millis(500);
/// A connection to the PMI port that has not presented the job's token by then is closed.
const AUTH_TIMEOUT: Duration = Duration::from_secs(10);
/// At most this many connections to the PMI port may be waiting to authenticate.
const MAX_UNAUTHENTICATED: usize = 64;

/// What to run.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// `mpirun` or `mpiexec`, for messages.
    pub name: String,
    /// Where each rank runs (its length is the number of ranks).
    pub placement: Placement,
    /// The remote-start command and its leading arguments (`ssh -x`).
    pub rsh: Vec<String>,
    /// Where the PMI port listens for remote ranks: an address, an interface, or `auto`.
    pub pmi_bind: Option<String>,
    /// This program's path on the remote hosts (run there as the proxy).
    pub proxy_path: PathBuf,
    /// The parts of the job (MPMD: several), in rank order; their `np`s add up to the
    /// placement's.
    pub apps: Vec<AppSpec>,
    /// Prefix output lines with `[rank] `.
    pub tag_output: bool,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// PMI over TCP instead of inherited sockets for the local ranks too.
    pub pmi_port: bool,
    /// Trace PMI traffic.
    pub verbose: bool,
    /// Binding of the local ranks to CPUs.
    pub bind: crate::cli::Bind,
    /// A rank that dies does not end the job (`--disable-auto-cleanup`): the others go on,
    /// and PMI barriers stop waiting for it.
    pub keep_going: bool,
}

/// One part of the job: `np` ranks of one program (its index is their `MPI_APPNUM`).
#[derive(Debug, Clone)]
pub struct AppSpec {
    /// Number of ranks.
    pub np: u32,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Base environment of its ranks.
    pub env: Vec<(OsString, OsString)>,
    /// Working directory of its ranks.
    pub wdir: Option<PathBuf>,
}

impl JobSpec {
    /// The index of the part `rank` belongs to, and the part.
    fn app_of(&self, rank: u32) -> (usize, &AppSpec) {
        let mut first = 0;
        for (i, a) in self.apps.iter().enumerate() {
            if rank < first + a.np {
                return (i, a);
            }
            first += a.np;
        }
        unreachable!("rank {rank} is beyond the parts' ranks")
    }
}

struct Rank {
    pid: i32,
    status: Option<ExitKind>,
}

struct PmiConn {
    fd: Option<OwnedFd>,
    id: ConnId,
    /// The rank of a PMI_FD connection (PMI_PORT ones learn theirs through initack).
    hint: Option<u32>,
    framer: LineFramer,
    out: Vec<u8>,
    /// Accepted on the PMI port: who connected, and until when it may take to authenticate.
    peer: Option<SocketAddr>,
    auth_deadline: Option<Instant>,
}

/// The stream to a remote rank's proxy (the remote-start command's stdin): the launch spec,
/// then rank 0's stdin. Kept open until the rank ends: closing it makes the proxy kill the rank.
struct ProxyLink {
    rank: u32,
    fd: Option<OwnedFd>,
    out: Vec<u8>,
}

struct OutPipe {
    fd: Option<OwnedFd>,
    rank: u32,
    /// 1 (stdout) or 2 (stderr): where it goes.
    target: RawFd,
    /// The rank's line not complete yet.
    line: Vec<u8>,
    /// When the rank last added to `line` without ending it (see [`PARTIAL_DELAY`]).
    partial_since: Option<Instant>,
    /// The start of the rank's current line has been written (a partial line flushed): the
    /// rest continues it, without a prefix.
    mid_line: bool,
}

struct StdinFwd {
    /// Rank 0's stdin, while it is open.
    pipe: Option<OwnedFd>,
    /// Rank 0 is remote: its stdin goes as frames on its proxy link, while this is set.
    remote: bool,
    buf: Vec<u8>,
    eof: bool,
}

#[derive(Clone, Copy)]
enum Slot {
    Signals,
    Listener,
    Stdin,
    StdinPipe,
    Conn(usize),
    Out(usize),
    Link(usize),
}

struct Job {
    spec: JobSpec,
    kvsname: String,
    server: Server,
    sigfd: OwnedFd,
    listener: Option<TcpListener>,
    ranks: Vec<Rank>,
    conns: Vec<PmiConn>,
    outs: Vec<OutPipe>,
    links: Vec<ProxyLink>,
    stdin: StdinFwd,
    /// The PMI port's token (`MADMPI_PMI_TOKEN`).
    token: String,
    /// Each part's ranks' working directory, absolute (remote ranks `cd` there).
    cwd: Vec<Option<PathBuf>>,
    /// Process group of the ranks (rank 0's pid), 0 before the first spawn.
    pgid: i32,
    /// The job's exit code, fixed by the first failure.
    exit_code: Option<i32>,
    aborting: bool,
    /// A failure waiting [`SETTLE`] for a rank killed by a signal: (deadline, code, message).
    pending: Option<(Instant, i32, String)>,
    kill_at: Option<Instant>,
    killed: bool,
    swept: bool,
    deadline: Option<Instant>,
    drain_until: Option<Instant>,
    /// Our stdout / stderr went away (EPIPE): output is dropped from then on.
    dead: [bool; 3],
    /// Per destination, the output pipe whose partial line was written last and not ended
    /// yet: another rank's output first ends that line.
    open_line: [Option<usize>; 3],
    scratch: Vec<u8>,
    /// The CPUs mpirun may use, which local ranks are bound to.
    cpus: Vec<usize>,
    /// Jobs started by MPI_Comm_spawn (`spawn.rs`), waited for at the end.
    spawned: Vec<std::process::Child>,
}

/// Runs a job to completion; returns the exit code for mpirun.
pub fn run(spec: JobSpec) -> i32 {
    let sigfd = match sys::signalfd() {
        Ok(fd) => fd,
        Err(e) => {
            eprintln!("{}: cannot set up signal handling: {e}", spec.name);
            return 1;
        }
    };
    let kvsname = format!("kvs_{}_{}", sys::getpid(), sys::random_hex(8));
    let np = spec.placement.np();
    let mut config = ServerConfig::single_node(np, &kvsname);
    config.process_mapping = Some(spec.placement.mapping().to_string());
    // MPI_UNIVERSE_SIZE: how many processes the job may have in all, spawned ones included
    // (`MADMPI_UNIVERSE_SIZE`; never below the world's size).
    config.universe_size = Some(universe_size(
        np,
        std::env::var("MADMPI_UNIVERSE_SIZE").ok().as_deref(),
    ));
    config.rank_appnum = (0..np).map(|r| spec.app_of(r).0 as i32).collect();
    // The job's secret authenticates every TCP connection between ranks. It travels only over
    // the ranks' PMI channels (inherited sockets, or the PMI port after the token), never on a
    // command line or in a file. The token guards the PMI port: it travels in the ranks'
    // environment (readable by their owner only), to remote ranks on the proxy's stdin.
    let (secret, token) = match (sys::secret_hex(32), sys::secret_hex(16)) {
        (Ok(s), Ok(t)) => (s, t),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("{}: cannot draw the job secret from the OS: {e}", spec.name);
            return 1;
        }
    };
    config.attributes.push(("madmpi_secret".to_owned(), secret));
    config.auth_token = Some(token.clone());
    let server = Server::new(config);
    let remote = spec.placement.any_remote();
    let listener = if spec.pmi_port || remote {
        let ip = match (&spec.pmi_bind, remote) {
            (None, false) => Ok(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            (bind, _) => sys::interface_addresses()
                .map_err(|e| format!("cannot list the network interfaces: {e}"))
                .and_then(|ifs| pmi_address(bind.as_deref().unwrap_or("auto"), &ifs)),
        };
        let bound = ip.and_then(|ip| {
            TcpListener::bind(SocketAddr::new(ip, 0))
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .map_err(|e| format!("cannot open the PMI port on {ip}: {e}"))
        });
        match bound {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("{}: {e}", spec.name);
                return 1;
            }
        }
    } else {
        None
    };
    let cwd = spec
        .apps
        .iter()
        .map(|a| match &a.wdir {
            Some(d) if d.is_absolute() => Some(d.clone()),
            Some(d) => std::env::current_dir().ok().map(|c| c.join(d)),
            None => std::env::current_dir().ok(),
        })
        .collect();
    let deadline = spec.timeout.map(|t| Instant::now() + t);
    let mut job = Job {
        kvsname,
        server,
        sigfd,
        listener,
        ranks: Vec::new(),
        conns: Vec::new(),
        outs: Vec::new(),
        links: Vec::new(),
        stdin: StdinFwd {
            pipe: None,
            remote: false,
            buf: Vec::new(),
            eof: false,
        },
        token,
        cwd,
        pgid: 0,
        exit_code: None,
        aborting: false,
        pending: None,
        kill_at: None,
        killed: false,
        swept: false,
        deadline,
        drain_until: None,
        dead: [false; 3],
        open_line: [None; 3],
        scratch: vec![0; CHUNK],
        cpus: sys::allowed_cpus(),
        spawned: Vec::new(),
        spec,
    };
    for r in 0..np {
        if let Err(e) = job.spawn(r) {
            let code = match e.kind() {
                io::ErrorKind::NotFound => 127,
                io::ErrorKind::PermissionDenied => 126,
                _ => 1,
            };
            let host = job.spec.placement.host(r);
            let what = if host.local {
                job.spec.app_of(r).1.program.to_string_lossy().into_owned()
            } else {
                format!("{} {}", job.spec.rsh.join(" "), host.name)
            };
            job.fail(code, format!("cannot start rank {r} ('{what}'): {e}"));
            break;
        }
    }
    job.event_loop();
    job.finish()
}

impl Job {
    /// The PMI variables and placement facts every rank gets, besides the base environment.
    fn rank_env(&self, rank: u32, pmi_fd: Option<RawFd>) -> io::Result<Vec<(OsString, OsString)>> {
        let np = self.spec.placement.np();
        let (local_id, local_n) = self.spec.placement.local_index(rank);
        let mut env: Vec<(OsString, OsString)> = Vec::new();
        let mut set = |k: &str, v: String| env.push((k.into(), v.into()));
        match (pmi_fd, &self.listener) {
            (Some(fd), _) => {
                set("PMI_FD", fd.to_string());
            }
            (None, Some(l)) => {
                set("PMI_PORT", l.local_addr()?.to_string());
                set("PMI_ID", rank.to_string());
                set("MADMPI_PMI_TOKEN", self.token.clone());
            }
            (None, None) => unreachable!("either PMI_FD or PMI_PORT is set up"),
        }
        set("PMI_RANK", rank.to_string());
        set("PMI_SIZE", np.to_string());
        set("PMI_JOBID", self.kvsname.clone());
        set("MADMPI_JOBID", self.kvsname.clone());
        set("MPI_LOCALNRANKS", local_n.to_string());
        set("MPI_LOCALRANKID", local_id.to_string());
        if let Some(cpu) = self.cpu_of(rank) {
            set("MADMPI_BOUND_CPU", cpu.to_string());
        }
        if self.spec.placement.host(rank).local && !self.cpus.is_empty() {
            // The CPUs the host's ranks share (a bound rank itself may use only one).
            set("MADMPI_HOST_CPUS", self.cpus.len().to_string());
        }
        Ok(env)
    }

    /// The CPU local rank `rank` is bound to, if any (see [`crate::cli::Bind`]): the
    /// `local_id`-th of the CPUs mpirun may use.
    fn cpu_of(&self, rank: u32) -> Option<usize> {
        let host = self.spec.placement.host(rank);
        if !host.local {
            return None;
        }
        let (local_id, local_n) = self.spec.placement.local_index(rank);
        let cpus = &self.cpus;
        let bind = match self.spec.bind {
            crate::cli::Bind::None => false,
            crate::cli::Bind::Core => true,
            crate::cli::Bind::Auto => local_n as usize <= cpus.len(),
        };
        (bind && !cpus.is_empty()).then(|| cpus[local_id as usize % cpus.len()])
    }

    fn spawn(&mut self, rank: u32) -> io::Result<()> {
        let local = self.spec.placement.host(rank).local;
        let pmi = if local && !self.spec.pmi_port {
            Some(sys::socketpair()?)
        } else {
            None
        };
        let (out_r, out_w) = sys::pipe()?;
        let (err_r, err_w) = sys::pipe()?;
        let env = self.rank_env(rank, pmi.as_ref().map(|(_, c)| c.as_raw_fd()))?;
        let mut stdin_w = None;
        let mut link = None;
        let (appnum, app) = self.spec.app_of(rank);
        let mut cmd = if local {
            let mut cmd = Command::new(&app.program);
            cmd.args(&app.args)
                .env_clear()
                .envs(app.env.iter().map(|(k, v)| (k, v)))
                .envs(env.iter().map(|(k, v)| (k, v)));
            if rank == 0 {
                let (in_r, in_w) = sys::pipe()?;
                cmd.stdin(Stdio::from(in_r));
                stdin_w = Some(in_w);
            } else {
                cmd.stdin(Stdio::null());
            }
            if let Some(d) = &app.wdir {
                // The spawn would report a missing directory as a missing program.
                let why = match std::fs::metadata(d) {
                    Ok(m) if m.is_dir() => None,
                    Ok(_) => Some(io::Error::other("not a directory")),
                    Err(e) => Some(e),
                };
                if let Some(e) = why {
                    return Err(io::Error::new(
                        e.kind(),
                        format!(
                            "cannot change to the working directory {}: {e}",
                            d.display()
                        ),
                    ));
                }
                cmd.current_dir(d);
            }
            cmd
        } else {
            // The remote-start command runs with mpirun's own environment (ssh needs its
            // agent); the rank's goes to the proxy on the stream.
            let host = &self.spec.placement.host(rank).name;
            let (in_r, in_w) = sys::pipe()?;
            let mut cmd = Command::new(&self.spec.rsh[0]);
            cmd.args(&self.spec.rsh[1..])
                .arg(host)
                .arg(remote_command(&self.spec.proxy_path))
                .stdin(Stdio::from(in_r));
            let mut full_env = app.env.clone();
            full_env.retain(|(k, _)| !env.iter().any(|(ek, _)| ek == k));
            full_env.extend(env);
            let mut argv = vec![app.program.clone()];
            argv.extend(app.args.iter().cloned());
            let launch = LaunchSpec {
                rank,
                kvsname: self.kvsname.clone(),
                cwd: self.cwd[appnum].clone(),
                env: full_env,
                argv,
                stdin: rank == 0,
            };
            link = Some(ProxyLink {
                rank,
                fd: Some(in_w),
                out: launch.encode(),
            });
            cmd
        };
        cmd.stdout(Stdio::from(out_w)).stderr(Stdio::from(err_w));
        let setup = sys::ChildSetup {
            parent: sys::getpid(),
            pgid: self.pgid,
            keep_fd: pmi.as_ref().map(|(_, c)| c.as_raw_fd()),
            cpu: self.cpu_of(rank),
        };
        sys::set_child_setup(&mut cmd, setup);
        let spawned = cmd.spawn();
        // The child's ends of the pipes and socket live in `cmd` and `pmi`: close ours now, or
        // we would never see EOF on them.
        drop(cmd);
        let child = spawned?;
        let pid = child.id() as i32;
        drop(child);
        if self.pgid == 0 {
            self.pgid = pid;
        }
        sys::setpgid(pid, self.pgid);
        self.ranks.push(Rank { pid, status: None });
        if let Some((ours, _theirs)) = pmi {
            sys::set_nonblocking(ours.as_fd())?;
            let id = self.server.handle_connect(Some(rank));
            self.conns.push(PmiConn {
                fd: Some(ours),
                id,
                hint: Some(rank),
                framer: LineFramer::default(),
                out: Vec::new(),
                peer: None,
                auth_deadline: None,
            });
        }
        for (fd, target) in [(out_r, 1), (err_r, 2)] {
            sys::set_nonblocking(fd.as_fd())?;
            self.outs.push(OutPipe {
                fd: Some(fd),
                rank,
                target,
                line: Vec::new(),
                partial_since: None,
                mid_line: false,
            });
        }
        if let Some(l) = link {
            if let Some(fd) = &l.fd {
                sys::set_nonblocking(fd.as_fd())?;
            }
            self.links.push(l);
            self.flush_link(self.links.len() - 1);
            if rank == 0 {
                self.stdin.remote = true;
            }
        }
        if let Some(w) = stdin_w {
            sys::set_nonblocking(w.as_fd())?;
            self.stdin.pipe = Some(w);
        }
        if rank == 0 && sys::stdin_is_background_tty() {
            // Reading the terminal from the background would stop us with SIGTTIN.
            self.stdin.eof = true;
            self.end_remote_stdin();
        }
        Ok(())
    }

    /// "rank 3 (pid 1234)", or "rank 3 on host b (pid 1234 of 'ssh')" for a remote rank.
    fn who(&self, rank: u32, pid: i32) -> String {
        let host = self.spec.placement.host(rank);
        if host.local {
            format!("rank {rank} (pid {pid})")
        } else {
            format!(
                "rank {rank} on host {} (pid {pid}: '{}')",
                host.name,
                self.spec.rsh.join(" ")
            )
        }
    }

    fn event_loop(&mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut slots: Vec<Slot> = Vec::new();
        loop {
            let now = Instant::now();
            if self.ranks.iter().all(|r| r.status.is_some()) {
                if let Some((_, code, message)) = self.pending.take() {
                    // No rank left to die: the waiting failure is the news.
                    self.fail(code, message);
                }
                if self.aborting && !self.swept && self.pgid != 0 {
                    // Descendants of the ranks may survive them and hold the pipes open.
                    sys::kill(-self.pgid, libc::SIGKILL);
                    self.swept = true;
                }
                let until = *self.drain_until.get_or_insert(now + DRAIN_GRACE);
                if self.outs.iter().all(|o| o.fd.is_none()) || now >= until {
                    return;
                }
            }
            self.check_timers(now);

            fds.clear();
            slots.clear();
            let mut add = |fd: RawFd, events: i16, slot: Slot| {
                fds.push(libc::pollfd {
                    fd,
                    events,
                    revents: 0,
                });
                slots.push(slot);
            };
            add(self.sigfd.as_raw_fd(), libc::POLLIN, Slot::Signals);
            if let Some(l) = &self.listener {
                add(l.as_raw_fd(), libc::POLLIN, Slot::Listener);
            }
            let stdin_room = if self.stdin.remote {
                self.links
                    .iter()
                    .find(|l| l.rank == 0 && l.fd.is_some())
                    .is_some_and(|l| l.out.len() < CHUNK)
            } else {
                self.stdin.pipe.is_some() && self.stdin.buf.len() < CHUNK
            };
            if stdin_room && !self.stdin.eof {
                add(0, libc::POLLIN, Slot::Stdin);
            }
            for (i, l) in self.links.iter().enumerate() {
                if let (Some(fd), false) = (&l.fd, l.out.is_empty()) {
                    add(fd.as_raw_fd(), libc::POLLOUT, Slot::Link(i));
                }
            }
            if let Some(p) = &self.stdin.pipe {
                if !self.stdin.buf.is_empty() {
                    add(p.as_raw_fd(), libc::POLLOUT, Slot::StdinPipe);
                }
            }
            for (i, c) in self.conns.iter().enumerate() {
                if let Some(fd) = &c.fd {
                    let ev = if c.out.is_empty() {
                        libc::POLLIN
                    } else {
                        libc::POLLIN | libc::POLLOUT
                    };
                    add(fd.as_raw_fd(), ev, Slot::Conn(i));
                }
            }
            for (i, o) in self.outs.iter().enumerate() {
                if let Some(fd) = &o.fd {
                    add(fd.as_raw_fd(), libc::POLLIN, Slot::Out(i));
                }
            }
            if let Err(e) = sys::poll(&mut fds, self.poll_timeout(Instant::now())) {
                // Cannot wait for events any more: tear down, and keep watching the children
                // (at a slow pace) until they are gone.
                self.fail(1, format!("poll failed: {e}; aborting job"));
                std::thread::sleep(Duration::from_millis(10));
            }
            let mut children_changed = false;
            for (pfd, &slot) in fds.iter().zip(slots.iter()) {
                let rev = pfd.revents;
                if rev == 0 {
                    continue;
                }
                match slot {
                    Slot::Signals => {
                        for sig in sys::read_signals(self.sigfd.as_fd()) {
                            if sig == libc::SIGCHLD {
                                children_changed = true;
                            } else {
                                self.on_signal(sig);
                            }
                        }
                    }
                    Slot::Listener => self.accept(),
                    Slot::Stdin => self.read_stdin(rev),
                    Slot::StdinPipe => self.write_stdin(),
                    Slot::Conn(i) => {
                        if rev & libc::POLLOUT != 0 {
                            self.flush_conn(i);
                        }
                        if rev & !libc::POLLOUT != 0 {
                            self.read_conn(i, 16);
                        }
                    }
                    Slot::Out(i) => self.forward(i),
                    Slot::Link(i) => self.flush_link(i),
                }
            }
            self.pump_server();
            if children_changed || self.aborting {
                self.check_children();
            }
        }
    }

    fn poll_timeout(&self, now: Instant) -> i32 {
        let auth = self
            .conns
            .iter()
            .filter(|c| c.fd.is_some())
            .filter_map(|c| c.auth_deadline)
            .min();
        let timers = [
            self.deadline.filter(|_| !self.aborting),
            self.kill_at.filter(|_| !self.killed),
            self.drain_until,
            auth,
            self.pending.as_ref().map(|p| p.0),
            self.outs
                .iter()
                .filter_map(|o| o.partial_since)
                .min()
                .map(|t| t + PARTIAL_DELAY),
        ];
        match timers.into_iter().flatten().min() {
            None => -1,
            Some(t) => {
                let d = t.saturating_duration_since(now);
                // Round up, so that we do not wake a millisecond early and spin.
                i32::try_from(d.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
            }
        }
    }

    fn check_timers(&mut self, now: Instant) {
        for i in 0..self.outs.len() {
            if self.outs[i]
                .partial_since
                .is_some_and(|t| now >= t + PARTIAL_DELAY)
            {
                self.flush_partial(i, false);
            }
        }
        if self.pending.as_ref().is_some_and(|p| now >= p.0) {
            if let Some((_, code, message)) = self.pending.take() {
                self.fail(code, message);
            }
        }
        if let Some(d) = self.deadline {
            if !self.aborting && now >= d {
                let secs = self.spec.timeout.map_or(0.0, |t| t.as_secs_f64());
                self.fail(
                    TIMEOUT_EXIT,
                    format!("job timed out after {secs} s; aborting job"),
                );
            }
        }
        if let Some(k) = self.kill_at {
            if !self.killed && now >= k {
                self.killed = true;
                self.signal_ranks(libc::SIGKILL);
                // The ranks can create no more segments: remove theirs now rather than only
                // once every rank is reaped and the output drained, which can take seconds
                // with many ranks on a busy node, seconds in which whoever ended this job may
                // kill us too (the bench runner sends SIGKILL 2 s after SIGTERM).
                remove_shm_leftovers(&self.kvsname);
                // Without their stream, the proxies kill the remote ranks themselves.
                self.links.clear();
            }
        }
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.fd.is_some() && c.auth_deadline.is_some_and(|d| now >= d) {
                if self.server.is_authenticated(c.id) {
                    c.auth_deadline = None;
                } else {
                    let peer = c.peer.map_or("?".into(), |p| p.to_string());
                    eprintln!(
                        "{}: warning: closed a PMI connection from {peer} that did not authenticate within {} s",
                        self.spec.name,
                        AUTH_TIMEOUT.as_secs()
                    );
                    self.close_conn(i);
                }
            }
        }
    }

    /// Records the job's failure (the first one fixes the exit code and is the one reported)
    /// and starts the teardown: SIGTERM now, SIGKILL after the grace period.
    fn fail(&mut self, code: i32, message: String) {
        self.pending = None;
        if self.exit_code.is_none() {
            self.exit_code = Some(code);
            eprintln!("{}: {message}", self.spec.name);
        }
        self.begin_teardown(libc::SIGTERM);
    }

    /// Records a failure that may be the consequence of a rank's death not yet known: it ends
    /// the job after [`SETTLE`], unless a rank killed by a signal is reported first. The first
    /// such failure is kept.
    fn fail_soon(&mut self, code: i32, message: String) {
        if !self.aborting && self.pending.is_none() {
            self.pending = Some((Instant::now() + SETTLE, code, message));
        }
    }

    fn begin_teardown(&mut self, sig: i32) {
        if self.aborting {
            return;
        }
        self.aborting = true;
        self.kill_at = Some(Instant::now() + KILL_GRACE);
        self.signal_ranks(sig);
    }

    /// Signals the ranks' process group and each rank not yet ended (a rank may have left the
    /// group). Safe against pid reuse: nothing is reaped before the end of the job.
    fn signal_ranks(&self, sig: i32) {
        if self.pgid != 0 {
            sys::kill(-self.pgid, sig);
        }
        for r in self.ranks.iter().filter(|r| r.status.is_none()) {
            sys::kill(r.pid, sig);
        }
    }

    fn on_signal(&mut self, sig: i32) {
        match sig {
            libc::SIGUSR1 | libc::SIGUSR2 => self.signal_ranks(sig),
            _ if self.aborting => {
                // Asked again: no more grace.
                self.killed = true;
                self.signal_ranks(libc::SIGKILL);
                remove_shm_leftovers(&self.kvsname);
                self.links.clear();
            }
            _ => {
                self.pending = None;
                if self.exit_code.is_none() {
                    self.exit_code = Some(128 + sig);
                    eprintln!(
                        "{}: caught signal {sig} ({}); forwarding it to the ranks and ending the job",
                        self.spec.name,
                        sys::signal_name(sig)
                    );
                }
                self.begin_teardown(sig);
            }
        }
    }

    fn check_children(&mut self) {
        let mut ended = Vec::new();
        for r in 0..self.ranks.len() {
            if self.ranks[r].status.is_some() {
                continue;
            }
            let pid = self.ranks[r].pid;
            match sys::exited(pid) {
                Ok(Some(s)) => ended.push((r, pid, s)),
                Ok(None) => {}
                // ECHILD cannot happen for an unreaped child; treat anything odd as gone.
                Err(_) => ended.push((r, pid, ExitKind::Exited(1))),
            }
        }
        // A rank killed by a signal is more likely the cause than ranks that failed at the same
        // time (they may have seen it die): it is judged, hence reported, first.
        ended.sort_by_key(|&(r, _, st)| (!matches!(st, ExitKind::Signaled { .. }), r));
        for (r, pid, status) in ended {
            // What the rank said last (an abort, typically) comes before how it ended.
            self.drain_rank_conns(r as u32);
            self.ranks[r].status = Some(status);
            if r == 0 {
                self.stdin.pipe = None;
                self.stdin.remote = false;
                self.stdin.eof = true;
            }
            self.links.retain(|l| l.rank != r as u32);
            self.judge_exit(r as u32, pid, status);
        }
    }

    fn judge_exit(&mut self, rank: u32, pid: i32, status: ExitKind) {
        if self.aborting {
            return;
        }
        let others = self.ranks.iter().any(|r| r.status.is_none());
        if self.spec.keep_going && others {
            return self.rank_gone(rank, pid, status);
        }
        let tail = if others { "; aborting job" } else { "" };
        let who = self.who(rank, pid);
        match status {
            ExitKind::Exited(0) => {
                // A rank that used PMI and left without finalize leaves the others stuck in
                // their next collective: end the job. Non-MPI programs never init.
                if others && self.server.is_initialized(rank) && !self.server.is_finalized(rank) {
                    self.fail_soon(
                        1,
                        format!("{who} exited without calling PMI finalize{tail}"),
                    );
                }
            }
            ExitKind::Exited(code) => {
                let host = self.spec.placement.host(rank);
                let started = self.server.is_initialized(rank);
                let startup = matches!(code, 126 | 127 | 255);
                // ssh reports a remote command killed by a signal (or a lost connection) as
                // 255: an abrupt end, reported at once like a signal.
                let abrupt = !host.local && started && code == 255;
                let hint = if !host.local && !started && startup {
                    format!(
                        " before reaching PMI (check that '{} {} true' works and that {} \
                         exists there)",
                        self.spec.rsh.join(" "),
                        host.name,
                        self.spec.proxy_path.display()
                    )
                } else if abrupt {
                    " (the remote-start command's code for a rank killed by a signal or a lost \
                     connection)"
                        .to_owned()
                } else {
                    String::new()
                };
                let message = format!("{who} exited with code {code}{hint}{tail}");
                if abrupt {
                    self.fail(code, message);
                } else {
                    self.fail_soon(code, message);
                }
            }
            ExitKind::Signaled { sig, core } => {
                let core = if core { ", core dumped" } else { "" };
                let name = sys::signal_name(sig);
                self.fail(
                    128 + sig,
                    format!("{who} killed by signal {sig} ({name}{core}){tail}"),
                );
            }
        }
    }

    /// With `--disable-auto-cleanup`, a rank ended while others run: a failure is reported
    /// (the first one fixes the exit code) but the job goes on, and PMI barriers stop
    /// waiting for the rank.
    fn rank_gone(&mut self, rank: u32, pid: i32, status: ExitKind) {
        if self.server.is_gone(rank) {
            // (Judged already: `report_dead_first` found it before `check_children`.)
            return;
        }
        let who = self.who(rank, pid);
        let tail = "; the others go on (--disable-auto-cleanup)";
        let failed = match status {
            ExitKind::Exited(0)
                if self.server.is_initialized(rank) && !self.server.is_finalized(rank) =>
            {
                Some((
                    1,
                    format!("{who} exited without calling PMI finalize{tail}"),
                ))
            }
            ExitKind::Exited(0) => None,
            ExitKind::Exited(code) => Some((code, format!("{who} exited with code {code}{tail}"))),
            ExitKind::Signaled { sig, core } => {
                let core = if core { ", core dumped" } else { "" };
                let name = sys::signal_name(sig);
                Some((
                    128 + sig,
                    format!("{who} killed by signal {sig} ({name}{core}){tail}"),
                ))
            }
        };
        if let Some((code, message)) = failed {
            eprintln!("{}: {message}", self.spec.name);
            self.exit_code.get_or_insert(code);
        }
        self.server.rank_gone(rank);
        self.pump_server();
    }

    fn accept(&mut self) {
        let Some(l) = &self.listener else { return };
        loop {
            match l.accept() {
                Ok((stream, peer)) => {
                    let waiting = self
                        .conns
                        .iter()
                        .filter(|c| c.fd.is_some() && !self.server.is_authenticated(c.id))
                        .count();
                    if waiting >= MAX_UNAUTHENTICATED {
                        // Someone is flooding the port: the ranks that belong here retry.
                        continue;
                    }
                    let _ = stream.set_nodelay(true);
                    let fd = OwnedFd::from(stream);
                    if sys::set_nonblocking(fd.as_fd()).is_err() {
                        continue;
                    }
                    let id = self.server.handle_connect(None);
                    self.conns.push(PmiConn {
                        fd: Some(fd),
                        id,
                        hint: None,
                        framer: LineFramer::default(),
                        out: Vec::new(),
                        peer: Some(peer),
                        auth_deadline: Some(Instant::now() + AUTH_TIMEOUT),
                    });
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            }
        }
    }

    fn drain_rank_conns(&mut self, rank: u32) {
        for i in 0..self.conns.len() {
            let c = &self.conns[i];
            if c.hint == Some(rank) || self.server.rank_of(c.id) == Some(rank) {
                // The rank has exited: take all it wrote (bounded, in case a descendant
                // inherited the socket and keeps writing).
                self.read_conn(i, 1024);
            }
        }
        self.pump_server();
    }

    /// Reads what is available on a PMI connection (up to `budget` reads, so that a flooding
    /// rank cannot starve the others) and feeds the server.
    fn read_conn(&mut self, i: usize, budget: usize) {
        for _ in 0..budget {
            let Some(fd) = self.conns[i].fd.as_ref().map(|f| f.as_raw_fd()) else {
                return;
            };
            match sys::read(fd, &mut self.scratch) {
                Ok(0) => return self.close_conn(i),
                Ok(n) => {
                    let c = &mut self.conns[i];
                    c.framer.handle_bytes(&self.scratch[..n]);
                    while let Some(frame) = c.framer.poll_frame() {
                        if self.spec.verbose {
                            let who = self
                                .server
                                .rank_of(c.id)
                                .map_or("?".into(), |r| r.to_string());
                            if let Frame::Data(d) = &frame {
                                let line = String::from_utf8_lossy(d);
                                let shown = if line.contains("madmpi_auth") {
                                    "cmd=madmpi_auth (token not shown)".into()
                                } else {
                                    line
                                };
                                eprintln!("{}: [pmi {who}] > {}", self.spec.name, shown.trim_end());
                            }
                        }
                        self.server.handle_frame(c.id, &frame);
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.close_conn(i),
            }
        }
    }

    fn close_conn(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd.take().is_some() {
            c.out.clear();
            self.server.handle_disconnect(c.id);
        }
    }

    fn flush_conn(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(fd) = c.fd.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        while !c.out.is_empty() {
            match sys::write(fd, &c.out, true) {
                Ok(n) => {
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => return self.close_conn(i),
            }
        }
    }

    /// Moves the server's replies to the sockets and acts on its events.
    fn pump_server(&mut self) {
        while let Some((id, bytes)) = self.server.poll_transmit() {
            if self.spec.verbose {
                let who = self
                    .server
                    .rank_of(id)
                    .map_or("?".into(), |r| r.to_string());
                eprintln!(
                    "{}: [pmi {who}] < {}",
                    self.spec.name,
                    String::from_utf8_lossy(&bytes).trim_end()
                );
            }
            if let Some(i) = self.conns.iter().position(|c| c.id == id) {
                self.conns[i].out.extend_from_slice(&bytes);
                self.flush_conn(i);
            }
        }
        let mut replied = false;
        while let Some(ev) = self.server.poll_event() {
            match ev {
                Event::Abort {
                    rank,
                    exitcode,
                    message,
                    ..
                } => {
                    // A rank that sees a peer die may abort before we have heard of the death:
                    // the dead rank is the news.
                    self.report_dead_first(rank);
                    let who = rank.map_or("a rank".to_owned(), |r| format!("rank {r}"));
                    let msg = match message {
                        Some(m) => format!("{who} called MPI_Abort with code {exitcode}: {m}"),
                        None => format!("{who} called MPI_Abort with code {exitcode}"),
                    };
                    self.fail_soon(exitcode, msg);
                }
                Event::Refused { conn, reason } => {
                    if let Some(i) = self.conns.iter().position(|c| c.id == conn) {
                        let peer = self.conns[i].peer.map_or("?".into(), |p| p.to_string());
                        eprintln!(
                            "{}: warning: refused a PMI connection from {peer}: {reason}",
                            self.spec.name
                        );
                        self.flush_conn(i);
                        self.close_conn(i);
                    }
                }
                Event::Misbehaved { rank, reason, .. } => {
                    let who = rank.map_or("a PMI client".to_owned(), |r| format!("rank {r}"));
                    eprintln!("{}: warning: {who}: {reason}", self.spec.name);
                }
                Event::Spawn { conn, blocks, .. } => {
                    let r = crate::spawn::start(&blocks).map(|c| self.spawned.push(c));
                    if let Err(e) = &r {
                        eprintln!("{}: {e}", self.spec.name);
                    }
                    self.server.spawn_result(conn, r);
                    replied = true;
                }
                Event::Initialized { .. }
                | Event::Finalized { .. }
                | Event::BarrierReleased { .. } => {}
            }
        }
        if replied {
            // The answer to a spawn request.
            self.pump_server();
        }
    }

    fn read_stdin(&mut self, revents: i16) {
        if revents & libc::POLLNVAL != 0 {
            self.stdin.eof = true;
        } else {
            let room = CHUNK - self.stdin.buf.len();
            match sys::read(0, &mut self.scratch[..room]) {
                Ok(0) => self.stdin.eof = true,
                Ok(n) => self.stdin.buf.extend_from_slice(&self.scratch[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => self.stdin.eof = true,
            }
        }
        if self.stdin.remote {
            if let Some(i) = self.links.iter().position(|l| l.rank == 0) {
                proxy::stdin_data(&self.stdin.buf, &mut self.links[i].out);
                self.stdin.buf.clear();
                if self.stdin.eof {
                    self.end_remote_stdin();
                }
                self.flush_link(i);
            }
            return;
        }
        self.write_stdin();
    }

    /// Tells a remote rank 0's proxy that its stdin has ended.
    fn end_remote_stdin(&mut self) {
        if !self.stdin.remote {
            return;
        }
        self.stdin.remote = false;
        if let Some(i) = self.links.iter().position(|l| l.rank == 0) {
            proxy::stdin_close(&mut self.links[i].out);
            self.flush_link(i);
        }
    }

    /// Writes what is pending on a proxy's stream.
    fn flush_link(&mut self, i: usize) {
        let l = &mut self.links[i];
        let Some(fd) = l.fd.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        while !l.out.is_empty() {
            match sys::write(fd, &l.out, false) {
                Ok(n) => {
                    l.out.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    // The remote-start command is gone; its exit tells the rest.
                    l.out.clear();
                    l.fd = None;
                    return;
                }
            }
        }
    }

    /// Reports (as the job's failure) a rank other than `except` that has already died, before
    /// another failure is reported.
    fn report_dead_first(&mut self, except: Option<u32>) {
        if self.aborting {
            return;
        }
        for r in 0..self.ranks.len() {
            let (pid, status) = (self.ranks[r].pid, self.ranks[r].status);
            if status.is_some() || Some(r as u32) == except {
                continue;
            }
            if let Ok(Some(st)) = sys::exited(pid) {
                if st != ExitKind::Exited(0) {
                    // Its status is recorded by the next check_children.
                    return self.judge_exit(r as u32, pid, st);
                }
            }
        }
    }

    fn write_stdin(&mut self) {
        let Some(fd) = self.stdin.pipe.as_ref().map(|p| p.as_raw_fd()) else {
            self.stdin.buf.clear();
            return;
        };
        while !self.stdin.buf.is_empty() {
            match sys::write(fd, &self.stdin.buf, false) {
                Ok(n) => {
                    self.stdin.buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    // Rank 0 closed its stdin: stop forwarding.
                    self.stdin.pipe = None;
                    self.stdin.buf.clear();
                    self.stdin.eof = true;
                    return;
                }
            }
        }
        if self.stdin.eof && self.stdin.buf.is_empty() {
            self.stdin.pipe = None;
        }
    }

    /// Forwards what a rank wrote on stdout or stderr, by whole lines: each write to our
    /// stdout or stderr holds whole lines of one rank, so ranks' lines never mix. A partial
    /// line is held until its newline, or [`PARTIAL_DELAY`] (a prompt must show), or the end
    /// of the rank's output.
    fn forward(&mut self, i: usize) {
        let Some(fd) = self.outs[i].fd.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        match sys::read(fd, &mut self.scratch) {
            Ok(0) => {
                self.outs[i].fd = None;
                self.flush_partial(i, true);
            }
            Ok(n) => {
                let tag = self.spec.tag_output;
                let o = &mut self.outs[i];
                o.line.extend_from_slice(&self.scratch[..n]);
                let Some(last) = o.line.iter().rposition(|&b| b == b'\n') else {
                    if o.line.len() > MAX_LINE {
                        return self.flush_partial(i, false);
                    }
                    // The delay runs from the last piece: a rank writing a line in many
                    // pieces keeps it whole.
                    o.partial_since = Some(Instant::now());
                    return;
                };
                let prefix = format!("[{}] ", o.rank);
                let mut out = Vec::with_capacity(last + 1);
                for (k, line) in o.line[..=last].split_inclusive(|&b| b == b'\n').enumerate() {
                    if tag && !(k == 0 && o.mid_line) {
                        out.extend_from_slice(prefix.as_bytes());
                    }
                    out.extend_from_slice(line);
                }
                o.line.drain(..=last);
                o.partial_since = (!o.line.is_empty()).then(Instant::now);
                self.write_lines(i, &out, false);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => {
                self.outs[i].fd = None;
                self.flush_partial(i, true);
            }
        }
    }

    /// Writes the partial line of output pipe `i` as it is (prefixed if it starts a line). At
    /// the end of the rank's output (`end`), a prefixed line is completed with a newline;
    /// unprefixed output passes byte for byte.
    fn flush_partial(&mut self, i: usize, end: bool) {
        let o = &mut self.outs[i];
        o.partial_since = None;
        if o.line.is_empty() {
            return;
        }
        let mut out = Vec::new();
        if self.spec.tag_output && !o.mid_line {
            out.extend_from_slice(format!("[{}] ", o.rank).as_bytes());
        }
        out.append(&mut o.line);
        let complete = end && self.spec.tag_output;
        if complete {
            out.push(b'\n');
        }
        self.write_lines(i, &out, !complete);
    }

    /// Writes output of pipe `i` to its destination: after a newline that ends another rank's
    /// partial line there, if any. `partial`: `data` ends inside a line, which stays open.
    fn write_lines(&mut self, i: usize, data: &[u8], partial: bool) {
        let target = self.outs[i].target;
        let t = target as usize;
        if let Some(j) = self.open_line[t].filter(|&j| j != i) {
            self.outs[j].mid_line = false;
            self.emit(target, b"\n");
        }
        self.outs[i].mid_line = partial;
        self.open_line[t] = partial.then_some(i);
        self.emit(target, data);
    }

    fn emit(&mut self, target: RawFd, data: &[u8]) {
        let t = target as usize;
        if !self.dead[t] && sys::write_all(target, data).is_err() {
            // Our reader went away (`mpirun ... | head`): pass that on as a shell pipeline
            // would, by closing the ranks' pipes, so that their next write gets SIGPIPE.
            self.dead[t] = true;
            for o in self.outs.iter_mut().filter(|o| o.target == target) {
                o.fd = None;
            }
        }
    }

    /// Reaps everything, removes the job's shared-memory files, and says how the job ended.
    fn finish(mut self) -> i32 {
        // Partial lines of ranks whose descendants kept the pipes open past the drain.
        for i in 0..self.outs.len() {
            self.flush_partial(i, true);
        }
        self.links.clear();
        for r in &self.ranks {
            sys::reap(r.pid);
        }
        // Spawned jobs end on their own (their launcher kills them on failure); a failed job
        // takes them with it.
        for c in &mut self.spawned {
            if self.exit_code.unwrap_or(0) != 0 {
                let _ = c.kill();
            }
            let _ = c.wait();
        }
        remove_shm_leftovers(&self.kvsname);
        exit_status_byte(self.exit_code.unwrap_or(0))
    }
}

/// MPI_UNIVERSE_SIZE of a job of `np` ranks: `setting` (`MADMPI_UNIVERSE_SIZE`) when it is a
/// number of at least `np`, else `np`.
fn universe_size(np: u32, setting: Option<&str>) -> u32 {
    setting
        .and_then(|v| v.trim().parse::<u32>().ok())
        .map_or(np, |u| u.max(np))
}

/// The command line the remote-start command runs on the remote host: this program as proxy.
fn remote_command(proxy_path: &std::path::Path) -> String {
    format!(
        "exec {} {}",
        sh_quote(&proxy_path.to_string_lossy()),
        proxy::FLAG
    )
}

/// Quotes a word for a POSIX shell (ssh hands the command line to the remote user's shell).
fn sh_quote(s: &str) -> String {
    if !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+=:,@%".contains(&b))
    {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// The address the PMI port listens on: `spec` is an IP address, an interface name (its first
/// IPv4 address, else its first IPv6 one), or `auto` (the first interface that is up and not
/// loopback: IPv4 first, then global IPv6).
pub fn pmi_address(spec: &str, ifs: &[IfAddr]) -> Result<IpAddr, String> {
    if let Ok(ip) = spec.parse::<IpAddr>() {
        return Ok(ip);
    }
    let v4_first = |list: Vec<&IfAddr>| {
        list.iter()
            .find(|i| i.addr.is_ipv4())
            .or_else(|| list.first())
            .map(|i| i.addr)
    };
    if spec == "auto" {
        let usable: Vec<&IfAddr> = ifs
            .iter()
            .filter(|i| i.up && !i.loopback && !i.addr.is_loopback())
            .filter(|i| match i.addr {
                IpAddr::V6(a) => (a.segments()[0] & 0xffc0) != 0xfe80,
                IpAddr::V4(_) => true,
            })
            .collect();
        return v4_first(usable).ok_or_else(|| {
            "--pmi-bind auto: no interface is up besides loopback; remote hosts could not reach \
             this one (name an address or interface with --pmi-bind)"
                .to_owned()
        });
    }
    let named: Vec<&IfAddr> = ifs.iter().filter(|i| i.name == spec).collect();
    v4_first(named).ok_or_else(|| {
        format!("--pmi-bind {spec}: not an IP address, 'auto', or an interface with an address")
    })
}

/// The byte a process can exit with for a job code. MPI_Abort codes are arbitrary ints; a
/// failure must never come out as 0 (`MPI_Abort(comm, 256)` would otherwise "succeed").
pub fn exit_status_byte(code: i32) -> i32 {
    match code & 0xff {
        0 if code != 0 => 1,
        c => c,
    }
}

/// Removes `/dev/shm/madmpi-<kvsname>*`: the library names its segments so, and a rank killed
/// mid-job cannot unlink them itself.
pub fn remove_shm_leftovers(kvsname: &str) {
    let prefix = madmpi_pmi::shm_prefix(kvsname);
    let Ok(dir) = std::fs::read_dir("/dev/shm") else {
        return;
    };
    for entry in dir.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let path = entry.path();
            let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_codes_fit_a_byte_and_failures_stay_failures() {
        assert_eq!(exit_status_byte(0), 0);
        assert_eq!(exit_status_byte(3), 3);
        assert_eq!(exit_status_byte(137), 137);
        assert_eq!(exit_status_byte(256), 1);
        assert_eq!(exit_status_byte(257), 1);
        assert_eq!(exit_status_byte(-1), 255);
        assert_eq!(exit_status_byte(-256), 1);
    }

    #[test]
    fn universe_size_is_the_setting_but_never_below_the_world() {
        assert_eq!(universe_size(4, None), 4);
        assert_eq!(universe_size(4, Some("16")), 16);
        assert_eq!(universe_size(4, Some(" 2 ")), 4);
        assert_eq!(universe_size(4, Some("many")), 4);
    }

    #[test]
    fn remote_command_lines_quote() {
        assert_eq!(sh_quote("/usr/bin/mpirun"), "/usr/bin/mpirun");
        assert_eq!(sh_quote("/a b/it's"), "'/a b/it'\\''s'");
        assert_eq!(sh_quote(""), "''");
        assert_eq!(
            remote_command(std::path::Path::new("/opt/x y/mpirun")),
            "exec '/opt/x y/mpirun' --madmpi-proxy"
        );
    }

    #[test]
    fn pmi_port_addresses() {
        let ifa = |name: &str, addr: &str, up, loopback| IfAddr {
            name: name.into(),
            addr: addr.parse().unwrap(),
            up,
            loopback,
        };
        let ifs = [
            ifa("lo", "127.0.0.1", true, true),
            ifa("eth0", "fe80::1", true, false),
            ifa("down0", "192.0.2.9", false, false),
            ifa("eth0", "fd00::5", true, false),
            ifa("eth1", "fd00::7", true, false),
            ifa("eth1", "10.77.0.1", true, false),
        ];
        let a = |s: &str| pmi_address(s, &ifs).map(|ip| ip.to_string());
        assert_eq!(a("auto").unwrap(), "10.77.0.1");
        assert_eq!(a("eth1").unwrap(), "10.77.0.1");
        assert_eq!(a("eth0").unwrap(), "fe80::1");
        assert_eq!(a("192.0.2.1").unwrap(), "192.0.2.1");
        assert!(a("nope").is_err());
        assert_eq!(
            pmi_address("auto", &ifs[..4]).unwrap().to_string(),
            "fd00::5"
        );
        assert!(pmi_address("auto", &ifs[..3]).is_err());
    }

    #[test]
    fn shm_cleanup_matches_the_prefix_only() {
        let kvs = format!("kvs_test_{}_{}", std::process::id(), sys::random_hex(4));
        let mine = format!("/dev/shm/madmpi-{kvs}-seg0");
        let unrelated = format!("/dev/shm/other-{kvs}");
        if std::fs::write(&mine, b"x").is_err() {
            eprintln!("SKIP: /dev/shm is not writable");
            return;
        }
        std::fs::write(&unrelated, b"x").unwrap();
        remove_shm_leftovers(&kvs);
        assert!(!std::path::Path::new(&mine).exists());
        assert!(std::path::Path::new(&unrelated).exists());
        let _ = std::fs::remove_file(&unrelated);
    }
}
