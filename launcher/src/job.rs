//! One job: start the ranks, serve PMI, forward stdio, watch exits, tear down, clean up.
//!
//! Everything runs on one thread in one poll(2) loop over: a signalfd (SIGCHLD and the
//! signals we forward), each rank's PMI socket, stdout and stderr pipes, our stdin and rank 0's
//! stdin pipe, and (with `--pmi-port`) a listening socket. Nothing spins: the loop sleeps in
//! poll until a descriptor is ready or the next deadline (timeout, SIGKILL escalation, output
//! drain) is due.
//!
//! Children are observed with `waitid(WNOWAIT)` and reaped only at the very end, so their pids,
//! and the process group rank 0 leads, cannot be recycled while we may still signal them.

use std::ffi::OsString;
use std::io;
use std::net::TcpListener;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use madmpi_pmi::{ConnId, Event, Frame, LineFramer, Server, ServerConfig};

use crate::sys::{self, ExitKind};

/// After the first SIGTERM, how long ranks get before SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(500);
/// After the last rank ended, how long we wait for its descendants to close the output pipes.
const DRAIN_GRACE: Duration = Duration::from_millis(1000);
/// Bytes read per readiness event.
const CHUNK: usize = 64 * 1024;
/// In prefixed mode, a line longer than this is cut (and gets a newline) so memory stays bounded.
const MAX_LINE: usize = 1 << 20;
/// The exit code of a job killed by `--timeout` (as `timeout(1)`).
pub const TIMEOUT_EXIT: i32 = 124;

/// What to run.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// `mpirun` or `mpiexec`, for messages.
    pub name: String,
    /// Number of ranks.
    pub np: u32,
    /// Program and arguments.
    pub program: OsString,
    /// Arguments.
    pub args: Vec<OsString>,
    /// Base environment of every rank.
    pub env: Vec<(OsString, OsString)>,
    /// Prefix output lines with `[rank] `.
    pub tag_output: bool,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// PMI over TCP instead of inherited sockets.
    pub pmi_port: bool,
    /// Working directory of the ranks.
    pub wdir: Option<PathBuf>,
    /// Trace PMI traffic.
    pub verbose: bool,
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
}

struct OutPipe {
    fd: Option<OwnedFd>,
    rank: u32,
    /// 1 (stdout) or 2 (stderr): where it goes.
    target: RawFd,
    line: Vec<u8>,
}

struct StdinFwd {
    /// Rank 0's stdin, while it is open.
    pipe: Option<OwnedFd>,
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
    stdin: StdinFwd,
    /// Process group of the ranks (rank 0's pid), 0 before the first spawn.
    pgid: i32,
    /// The job's exit code, fixed by the first failure.
    exit_code: Option<i32>,
    aborting: bool,
    kill_at: Option<Instant>,
    killed: bool,
    swept: bool,
    deadline: Option<Instant>,
    drain_until: Option<Instant>,
    /// Our stdout / stderr went away (EPIPE): output is dropped from then on.
    dead: [bool; 3],
    scratch: Vec<u8>,
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
    let mut config = ServerConfig::single_node(spec.np, &kvsname);
    // The job's secret authenticates every TCP connection between ranks. It travels only over
    // the ranks' private PMI channels, never on a command line or in a file.
    match sys::secret_hex(32) {
        Ok(secret) => config.attributes.push(("madmpi_secret".to_owned(), secret)),
        Err(e) => {
            eprintln!("{}: cannot draw the job secret from the OS: {e}", spec.name);
            return 1;
        }
    }
    let server = Server::new(config);
    let listener = if spec.pmi_port {
        match TcpListener::bind("127.0.0.1:0").and_then(|l| l.set_nonblocking(true).map(|()| l)) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("{}: cannot open the PMI port: {e}", spec.name);
                return 1;
            }
        }
    } else {
        None
    };
    let deadline = spec.timeout.map(|t| Instant::now() + t);
    let mut job = Job {
        kvsname,
        server,
        sigfd,
        listener,
        ranks: Vec::new(),
        conns: Vec::new(),
        outs: Vec::new(),
        stdin: StdinFwd {
            pipe: None,
            buf: Vec::new(),
            eof: false,
        },
        pgid: 0,
        exit_code: None,
        aborting: false,
        kill_at: None,
        killed: false,
        swept: false,
        deadline,
        drain_until: None,
        dead: [false; 3],
        scratch: vec![0; CHUNK],
        spec,
    };
    for r in 0..job.spec.np {
        if let Err(e) = job.spawn(r) {
            let code = match e.kind() {
                io::ErrorKind::NotFound => 127,
                io::ErrorKind::PermissionDenied => 126,
                _ => 1,
            };
            let what = job.spec.program.to_string_lossy().into_owned();
            job.fail(code, format!("cannot start rank {r} ('{what}'): {e}"));
            break;
        }
    }
    job.event_loop();
    job.finish()
}

impl Job {
    fn spawn(&mut self, rank: u32) -> io::Result<()> {
        let np = self.spec.np;
        let pmi = if self.listener.is_none() {
            Some(sys::socketpair()?)
        } else {
            None
        };
        let (out_r, out_w) = sys::pipe()?;
        let (err_r, err_w) = sys::pipe()?;
        let mut cmd = Command::new(&self.spec.program);
        cmd.args(&self.spec.args)
            .env_clear()
            .envs(self.spec.env.iter().map(|(k, v)| (k, v)));
        match (&pmi, &self.listener) {
            (Some((_, child_end)), _) => {
                cmd.env("PMI_FD", child_end.as_raw_fd().to_string())
                    .env("PMI_RANK", rank.to_string())
                    .env("PMI_SIZE", np.to_string());
            }
            (None, Some(l)) => {
                cmd.env("PMI_PORT", l.local_addr()?.to_string())
                    .env("PMI_ID", rank.to_string());
            }
            (None, None) => unreachable!("either PMI_FD or PMI_PORT is set up"),
        }
        cmd.env("PMI_JOBID", &self.kvsname)
            .env("MADMPI_JOBID", &self.kvsname)
            .env("MPI_LOCALNRANKS", np.to_string())
            .env("MPI_LOCALRANKID", rank.to_string())
            .stdout(Stdio::from(out_w))
            .stderr(Stdio::from(err_w));
        let stdin_w = if rank == 0 {
            let (in_r, in_w) = sys::pipe()?;
            cmd.stdin(Stdio::from(in_r));
            Some(in_w)
        } else {
            cmd.stdin(Stdio::null());
            None
        };
        if let Some(d) = &self.spec.wdir {
            cmd.current_dir(d);
        }
        let setup = sys::ChildSetup {
            parent: sys::getpid(),
            pgid: self.pgid,
            keep_fd: pmi.as_ref().map(|(_, c)| c.as_raw_fd()),
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
            });
        }
        for (fd, target) in [(out_r, 1), (err_r, 2)] {
            sys::set_nonblocking(fd.as_fd())?;
            self.outs.push(OutPipe {
                fd: Some(fd),
                rank,
                target,
                line: Vec::new(),
            });
        }
        if let Some(w) = stdin_w {
            sys::set_nonblocking(w.as_fd())?;
            self.stdin.pipe = Some(w);
            if sys::stdin_is_background_tty() {
                // Reading the terminal from the background would stop us with SIGTTIN.
                self.stdin.eof = true;
            }
        }
        Ok(())
    }

    fn event_loop(&mut self) {
        let mut fds: Vec<libc::pollfd> = Vec::new();
        let mut slots: Vec<Slot> = Vec::new();
        loop {
            let now = Instant::now();
            if self.ranks.iter().all(|r| r.status.is_some()) {
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
            if self.stdin.pipe.is_some() && !self.stdin.eof && self.stdin.buf.len() < CHUNK {
                add(0, libc::POLLIN, Slot::Stdin);
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
                }
            }
            self.pump_server();
            if children_changed || self.aborting {
                self.check_children();
            }
        }
    }

    fn poll_timeout(&self, now: Instant) -> i32 {
        let timers = [
            self.deadline.filter(|_| !self.aborting),
            self.kill_at.filter(|_| !self.killed),
            self.drain_until,
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
            }
        }
    }

    /// Records the job's failure (the first one fixes the exit code and is the one reported)
    /// and starts the teardown: SIGTERM now, SIGKILL after the grace period.
    fn fail(&mut self, code: i32, message: String) {
        if self.exit_code.is_none() {
            self.exit_code = Some(code);
            eprintln!("{}: {message}", self.spec.name);
        }
        self.begin_teardown(libc::SIGTERM);
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
            }
            _ => {
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
        for r in 0..self.ranks.len() {
            if self.ranks[r].status.is_some() {
                continue;
            }
            let pid = self.ranks[r].pid;
            let status = match sys::exited(pid) {
                Ok(Some(s)) => s,
                Ok(None) => continue,
                // ECHILD cannot happen for an unreaped child; treat anything odd as gone.
                Err(_) => ExitKind::Exited(1),
            };
            // What the rank said last (an abort, typically) comes before how it ended.
            self.drain_rank_conns(r as u32);
            self.ranks[r].status = Some(status);
            if r == 0 {
                self.stdin.pipe = None;
                self.stdin.eof = true;
            }
            self.judge_exit(r as u32, pid, status);
        }
    }

    fn judge_exit(&mut self, rank: u32, pid: i32, status: ExitKind) {
        if self.aborting {
            return;
        }
        let others = self.ranks.iter().any(|r| r.status.is_none());
        let tail = if others { "; aborting job" } else { "" };
        match status {
            ExitKind::Exited(0) => {
                // A rank that used PMI and left without finalize leaves the others stuck in
                // their next collective: end the job. Non-MPI programs never init.
                if others && self.server.is_initialized(rank) && !self.server.is_finalized(rank) {
                    self.fail(
                        1,
                        format!(
                            "rank {rank} (pid {pid}) exited without calling PMI finalize{tail}"
                        ),
                    );
                }
            }
            ExitKind::Exited(code) => self.fail(
                code,
                format!("rank {rank} (pid {pid}) exited with code {code}{tail}"),
            ),
            ExitKind::Signaled { sig, core } => {
                let core = if core { ", core dumped" } else { "" };
                let name = sys::signal_name(sig);
                self.fail(
                    128 + sig,
                    format!("rank {rank} (pid {pid}) killed by signal {sig} ({name}{core}){tail}"),
                );
            }
        }
    }

    fn accept(&mut self) {
        let Some(l) = &self.listener else { return };
        loop {
            match l.accept() {
                Ok((stream, _)) => {
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
                                eprintln!(
                                    "{}: [pmi {who}] > {}",
                                    self.spec.name,
                                    String::from_utf8_lossy(d).trim_end()
                                );
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
        while let Some(ev) = self.server.poll_event() {
            match ev {
                Event::Abort {
                    rank,
                    exitcode,
                    message,
                    ..
                } => {
                    let who = rank.map_or("a rank".to_owned(), |r| format!("rank {r}"));
                    let msg = match message {
                        Some(m) => format!("{who} called MPI_Abort with code {exitcode}: {m}"),
                        None => format!("{who} called MPI_Abort with code {exitcode}"),
                    };
                    self.fail(exitcode, msg);
                }
                Event::Misbehaved { rank, reason, .. } => {
                    let who = rank.map_or("a PMI client".to_owned(), |r| format!("rank {r}"));
                    eprintln!("{}: warning: {who}: {reason}", self.spec.name);
                }
                Event::Initialized { .. }
                | Event::Finalized { .. }
                | Event::BarrierReleased { .. } => {}
            }
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
        self.write_stdin();
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

    /// Forwards what a rank wrote on stdout or stderr.
    fn forward(&mut self, i: usize) {
        let Some(fd) = self.outs[i].fd.as_ref().map(|f| f.as_raw_fd()) else {
            return;
        };
        match sys::read(fd, &mut self.scratch) {
            Ok(0) => {
                let o = &mut self.outs[i];
                o.fd = None;
                if !o.line.is_empty() {
                    // A last line without newline: complete it, as it is prefixed.
                    let mut out = format!("[{}] ", o.rank).into_bytes();
                    out.append(&mut o.line);
                    out.push(b'\n');
                    let target = o.target;
                    self.emit(target, &out);
                }
            }
            Ok(n) => {
                let target = self.outs[i].target;
                if !self.spec.tag_output {
                    let data = self.scratch[..n].to_vec();
                    return self.emit(target, &data);
                }
                // Whole lines only, one write for all of them: lines of different ranks
                // never mix.
                let o = &mut self.outs[i];
                o.line.extend_from_slice(&self.scratch[..n]);
                let prefix = format!("[{}] ", o.rank);
                let mut out = Vec::new();
                let mut start = 0;
                while let Some(off) = o.line[start..].iter().position(|&b| b == b'\n') {
                    out.extend_from_slice(prefix.as_bytes());
                    out.extend_from_slice(&o.line[start..=start + off]);
                    start += off + 1;
                }
                o.line.drain(..start);
                if o.line.len() > MAX_LINE {
                    out.extend_from_slice(prefix.as_bytes());
                    out.append(&mut o.line);
                    out.push(b'\n');
                }
                if !out.is_empty() {
                    self.emit(target, &out);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(_) => self.outs[i].fd = None,
        }
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
    fn finish(self) -> i32 {
        for r in &self.ranks {
            sys::reap(r.pid);
        }
        remove_shm_leftovers(&self.kvsname);
        exit_status_byte(self.exit_code.unwrap_or(0))
    }
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
    let prefix = format!("madmpi-{kvsname}");
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
