//! The far end of a rank on another host: `mpirun --madmpi-proxy`, which the remote-start command
//! runs there (`ssh host "exec '/path/to/mpirun' --madmpi-proxy"`), and the stream mpirun feeds
//! it through that command's stdin.
//!
//! Why a proxy rather than the program itself on the remote command line:
//! - the rank's environment (the whole of mpirun's, by default, and the job's PMI token) travels
//!   on the stream, never on a command line that `ps` shows to every user of both hosts;
//! - the stream is the rank's lifeline: when it ends (mpirun died, was killed with SIGKILL, or
//!   tore the job down), the proxy kills the rank at once. `ssh` without a terminal delivers no
//!   signal to the remote side, so without this a remote rank would outlive its job;
//! - signals the proxy gets (forwarded by mpirun when the remote-start command passes them, as a
//!   local `sh -c`/`ip netns exec` chain does) go on to the rank, and the proxy ends the way its
//!   rank ended (same exit code, or killed by the same signal), so mpirun reports it exactly;
//! - rank 0's stdin can be forwarded to a remote rank 0 on the same stream.
//!
//! The stream is a sequence of frames `[tag: u8][len: u32 LE][payload]`: the launch spec
//! (version, rank, kvsname, directory, environment, argv, whether stdin follows, then "go"), then
//! stdin data and stdin end. The rank writes its stdout and stderr straight to the proxy's, which
//! the remote-start command carries back to mpirun.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::sys::{self, ExitKind};

/// The argument that selects proxy mode (it must be the first).
pub const FLAG: &str = "--madmpi-proxy";
/// Protocol version: a proxy refuses a stream of another version.
const VERSION: &[u8] = b"madmpi-proxy/1";
/// Largest frame accepted (one environment variable or one argument).
const MAX_FRAME: usize = 16 << 20;
/// Bytes read per readiness event.
const CHUNK: usize = 64 * 1024;
/// Stdin for the rank buffered beyond this stops reading the stream until the rank catches up.
const MAX_STDIN_BUF: usize = 4 << 20;

const T_VERSION: u8 = b'V';
const T_RANK: u8 = b'R';
const T_KVS: u8 = b'K';
const T_CWD: u8 = b'D';
const T_ENV: u8 = b'E';
const T_ARG: u8 = b'A';
const T_STDIN: u8 = b'S';
const T_GO: u8 = b'G';
const T_DATA: u8 = b'I';
const T_CLOSE: u8 = b'C';

/// What the proxy starts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaunchSpec {
    /// The rank (for messages).
    pub rank: u32,
    /// The job's kvsname: the proxy removes `/dev/shm/madmpi-<kvsname>*` after a failure.
    pub kvsname: String,
    /// Working directory.
    pub cwd: Option<PathBuf>,
    /// The rank's whole environment.
    pub env: Vec<(OsString, OsString)>,
    /// Program and arguments.
    pub argv: Vec<OsString>,
    /// Whether stdin data follows (rank 0); otherwise the rank's stdin is /dev/null.
    pub stdin: bool,
}

fn frame(tag: u8, payload: &[u8], out: &mut Vec<u8>) {
    out.push(tag);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
}

impl LaunchSpec {
    /// The spec as the first frames of the stream.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        frame(T_VERSION, VERSION, &mut out);
        frame(T_RANK, self.rank.to_string().as_bytes(), &mut out);
        frame(T_KVS, self.kvsname.as_bytes(), &mut out);
        if let Some(d) = &self.cwd {
            frame(T_CWD, d.as_os_str().as_bytes(), &mut out);
        }
        for (k, v) in &self.env {
            let mut kv = k.as_bytes().to_vec();
            kv.push(b'=');
            kv.extend_from_slice(v.as_bytes());
            frame(T_ENV, &kv, &mut out);
        }
        for a in &self.argv {
            frame(T_ARG, a.as_bytes(), &mut out);
        }
        if self.stdin {
            frame(T_STDIN, b"", &mut out);
        }
        frame(T_GO, b"", &mut out);
        out
    }

    /// Adds one frame of the spec; `Ok(true)` after the last one.
    fn handle_frame(
        &mut self,
        tag: u8,
        payload: Vec<u8>,
        seen_version: &mut bool,
    ) -> Result<bool, String> {
        if !*seen_version && tag != T_VERSION {
            return Err("the stream does not start with a version".into());
        }
        let text = |p: &[u8]| String::from_utf8_lossy(p).into_owned();
        match tag {
            T_VERSION => {
                if payload != VERSION {
                    return Err(format!(
                        "mpirun speaks {}, this proxy {} (different madmpi versions?)",
                        text(&payload),
                        text(VERSION)
                    ));
                }
                *seen_version = true;
            }
            T_RANK => {
                self.rank = text(&payload)
                    .parse()
                    .map_err(|_| format!("bad rank '{}'", text(&payload)))?;
            }
            T_KVS => self.kvsname = text(&payload),
            T_CWD => self.cwd = Some(PathBuf::from(OsString::from_vec(payload))),
            T_ENV => {
                let eq = payload
                    .iter()
                    .position(|&b| b == b'=')
                    .filter(|&i| i > 0)
                    .ok_or("environment entry without a name")?;
                let v = payload[eq + 1..].to_vec();
                let mut k = payload;
                k.truncate(eq);
                self.env
                    .push((OsString::from_vec(k), OsString::from_vec(v)));
            }
            T_ARG => self.argv.push(OsString::from_vec(payload)),
            T_STDIN => self.stdin = true,
            T_GO => {
                if self.argv.is_empty() {
                    return Err("no program to start".into());
                }
                return Ok(true);
            }
            other => {
                return Err(format!(
                    "unexpected frame '{}' in the launch spec",
                    other as char
                ))
            }
        }
        Ok(false)
    }
}

/// Appends a frame of stdin data for the rank.
pub fn stdin_data(data: &[u8], out: &mut Vec<u8>) {
    for piece in data.chunks(CHUNK) {
        frame(T_DATA, piece, out);
    }
}

/// Appends the end of the rank's stdin.
pub fn stdin_close(out: &mut Vec<u8>) {
    frame(T_CLOSE, b"", out);
}

/// Cuts the stream into frames.
#[derive(Debug, Default)]
struct Deframer {
    buf: Vec<u8>,
    start: usize,
}

impl Deframer {
    fn handle_bytes(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    fn poll_frame(&mut self) -> Result<Option<(u8, Vec<u8>)>, String> {
        let rest = &self.buf[self.start..];
        if rest.len() < 5 {
            return Ok(None);
        }
        let len = u32::from_le_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        if len > MAX_FRAME {
            return Err(format!("a frame of {len} bytes is over the limit"));
        }
        if rest.len() < 5 + len {
            return Ok(None);
        }
        let out = (rest[0], rest[5..5 + len].to_vec());
        self.start += 5 + len;
        if self.start > CHUNK && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        Ok(Some(out))
    }
}

/// The proxy: reads the spec from stdin, starts the rank, watches it and the stream, and ends as
/// the rank ended. Returns the exit code (or does not return, when mirroring a signal).
pub fn main() -> i32 {
    sys::ensure_std_fds();
    let host = sys::hostname();
    let say = |m: &str| eprintln!("mpirun proxy on {host}: {m}");
    let sigfd = match sys::signalfd() {
        Ok(fd) => fd,
        Err(e) => {
            say(&format!("cannot set up signal handling: {e}"));
            return 1;
        }
    };
    let mut de = Deframer::default();
    let mut scratch = vec![0u8; CHUNK];
    let mut spec = LaunchSpec::default();
    let mut seen_version = false;
    'spec: loop {
        loop {
            match de.poll_frame() {
                Ok(Some((tag, payload))) => {
                    match spec.handle_frame(tag, payload, &mut seen_version) {
                        Ok(true) => break 'spec,
                        Ok(false) => {}
                        Err(e) => {
                            say(&format!("bad launch spec from mpirun: {e}"));
                            return 1;
                        }
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    say(&format!("bad launch spec from mpirun: {e}"));
                    return 1;
                }
            }
        }
        match sys::read(0, &mut scratch) {
            Ok(0) | Err(_) => {
                // Not started by mpirun, or mpirun went away before the launch.
                say("no launch spec on stdin (this mode is for mpirun only)");
                return 1;
            }
            Ok(n) => de.handle_bytes(&scratch[..n]),
        }
    }
    let rank = spec.rank;
    if let Some(d) = &spec.cwd {
        if let Err(e) = std::env::set_current_dir(d) {
            say(&format!(
                "rank {rank}: cannot change to directory {}: {e}",
                d.display()
            ));
            return 1;
        }
    }
    let mut running = match Running::start(&spec) {
        Ok(r) => r,
        Err(e) => {
            let code = match e.kind() {
                io::ErrorKind::NotFound => 127,
                io::ErrorKind::PermissionDenied => 126,
                _ => 1,
            };
            say(&format!(
                "cannot start rank {rank} ('{}'): {e}",
                spec.argv[0].to_string_lossy()
            ));
            return code;
        }
    };
    let status = running.watch(&sigfd, &mut de, &mut scratch);
    if let (ExitKind::Signaled { sig, core }, false) = (status, running.terminating) {
        // A remote-start command like ssh reports a signal as exit code 255: say it here.
        let core = if core { ", core dumped" } else { "" };
        say(&format!(
            "rank {rank} (pid {}) killed by signal {sig} ({}{core})",
            running.pid,
            sys::signal_name(sig)
        ));
    }
    let failed = running.terminating || status != ExitKind::Exited(0);
    if failed {
        // Descendants of the rank go with it, and so do the job's shared-memory files on this
        // host (mpirun removes those of its own host only).
        sys::kill(-running.pid, libc::SIGKILL);
        if !spec.kvsname.is_empty() {
            crate::job::remove_shm_leftovers(&spec.kvsname);
        }
    }
    sys::reap(running.pid);
    match status {
        ExitKind::Exited(code) => code,
        ExitKind::Signaled { sig, .. } => sys::die_by_signal(sig),
    }
}

struct Running {
    pid: i32,
    /// The rank's stdin while it is open.
    stdin: Option<OwnedFd>,
    stdin_buf: Vec<u8>,
    /// Close the rank's stdin once `stdin_buf` is written.
    stdin_closing: bool,
    /// Our stdin (the stream from mpirun) is still open.
    lifeline: bool,
    /// The rank was told to stop (a signal, or mpirun is gone).
    terminating: bool,
}

impl Running {
    fn start(spec: &LaunchSpec) -> io::Result<Running> {
        let mut cmd = Command::new(&spec.argv[0]);
        cmd.args(&spec.argv[1..])
            .env_clear()
            .envs(spec.env.iter().map(|(k, v)| (k, v)));
        let stdin_w = if spec.stdin {
            let (r, w) = sys::pipe()?;
            cmd.stdin(Stdio::from(r));
            Some(w)
        } else {
            cmd.stdin(Stdio::null());
            None
        };
        sys::set_child_setup(
            &mut cmd,
            sys::ChildSetup {
                parent: sys::getpid(),
                pgid: 0,
                keep_fd: None,
                // (Remote ranks are not bound: the proxy does not know the host's other ranks.)
                cpu: None,
            },
        );
        let child = cmd.spawn()?;
        drop(cmd);
        let pid = child.id() as i32;
        drop(child);
        sys::setpgid(pid, pid);
        if let Some(w) = &stdin_w {
            sys::set_nonblocking(w.as_fd())?;
        }
        Ok(Running {
            pid,
            stdin: stdin_w,
            stdin_buf: Vec::new(),
            stdin_closing: false,
            lifeline: true,
            terminating: false,
        })
    }

    /// Runs until the rank has ended; returns how (the rank is not reaped yet).
    fn watch(&mut self, sigfd: &OwnedFd, de: &mut Deframer, scratch: &mut [u8]) -> ExitKind {
        // Stdin data that came with the spec.
        self.take_frames(de);
        loop {
            if let Ok(Some(st)) = sys::exited(self.pid) {
                return st;
            }
            let mut fds = vec![libc::pollfd {
                fd: sigfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            }];
            let read_stream = self.lifeline && self.stdin_buf.len() < MAX_STDIN_BUF;
            if read_stream {
                fds.push(libc::pollfd {
                    fd: 0,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            let stdin_fd = self.stdin.as_ref().map(|f| f.as_raw_fd());
            if let (Some(fd), false) = (stdin_fd, self.stdin_buf.is_empty()) {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                });
            }
            if sys::poll(&mut fds, -1).is_err() {
                // Nothing left to wait with: end the rank and wait for it the slow way.
                self.lose_lifeline();
                std::thread::sleep(std::time::Duration::from_millis(10));
                continue;
            }
            for p in &fds {
                if p.revents == 0 {
                    continue;
                }
                if p.fd == sigfd.as_raw_fd() {
                    for sig in sys::read_signals(sigfd.as_fd()) {
                        self.on_signal(sig);
                    }
                } else if p.fd == 0 {
                    match sys::read(0, scratch) {
                        Ok(0) | Err(_) => self.lose_lifeline(),
                        Ok(n) => {
                            de.handle_bytes(&scratch[..n]);
                            self.take_frames(de);
                        }
                    }
                } else {
                    self.write_stdin();
                }
            }
        }
    }

    fn take_frames(&mut self, de: &mut Deframer) {
        loop {
            match de.poll_frame() {
                Ok(Some((T_DATA, data))) => {
                    if self.stdin.is_some() && !self.stdin_closing {
                        self.stdin_buf.extend_from_slice(&data);
                    }
                }
                Ok(Some((T_CLOSE, _))) => self.stdin_closing = true,
                // Unknown frames are for newer proxies.
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => return self.lose_lifeline(),
            }
        }
        self.write_stdin();
    }

    fn write_stdin(&mut self) {
        let Some(fd) = self.stdin.as_ref().map(|f| f.as_raw_fd()) else {
            self.stdin_buf.clear();
            return;
        };
        while !self.stdin_buf.is_empty() {
            match sys::write(fd, &self.stdin_buf, false) {
                Ok(n) => {
                    self.stdin_buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(_) => {
                    // The rank closed its stdin.
                    self.stdin = None;
                    self.stdin_buf.clear();
                    return;
                }
            }
        }
        if self.stdin_closing {
            self.stdin = None;
        }
    }

    /// mpirun is gone (or the stream is corrupt): nobody can end this rank but us.
    fn lose_lifeline(&mut self) {
        if self.lifeline {
            self.lifeline = false;
            self.terminating = true;
            sys::kill(-self.pid, libc::SIGKILL);
        }
    }

    fn on_signal(&mut self, sig: i32) {
        match sig {
            libc::SIGCHLD => {}
            libc::SIGUSR1 | libc::SIGUSR2 => sys::kill(self.pid, sig),
            _ if self.terminating => sys::kill(-self.pid, libc::SIGKILL),
            _ => {
                self.terminating = true;
                sys::kill(self.pid, sig);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_round_trips_through_frames() {
        let spec = LaunchSpec {
            rank: 7,
            kvsname: "kvs_1_ab".into(),
            cwd: Some("/tmp/x y".into()),
            env: vec![
                ("A".into(), "1=2".into()),
                ("EMPTY".into(), "".into()),
                (OsString::from_vec(b"B\xff".to_vec()), "new\nline".into()),
            ],
            argv: vec!["/bin/prog".into(), "".into(), "-x".into()],
            stdin: true,
        };
        let mut bytes = spec.encode();
        stdin_data(b"hello", &mut bytes);
        stdin_close(&mut bytes);
        // Fed a byte at a time, as a pipe may deliver it.
        let mut de = Deframer::default();
        let mut got = LaunchSpec::default();
        let mut seen = false;
        let mut done = false;
        let mut after = Vec::new();
        for b in bytes {
            de.handle_bytes(&[b]);
            while let Some((tag, payload)) = de.poll_frame().unwrap() {
                if done {
                    after.push((tag, payload));
                } else {
                    done = got.handle_frame(tag, payload, &mut seen).unwrap();
                }
            }
        }
        assert!(done);
        assert_eq!(got, spec);
        assert_eq!(after, vec![(T_DATA, b"hello".to_vec()), (T_CLOSE, vec![])]);
    }

    #[test]
    fn bad_streams_are_refused() {
        let mut seen = false;
        let mut s = LaunchSpec::default();
        assert!(s.handle_frame(T_ARG, b"x".to_vec(), &mut seen).is_err());
        assert!(s
            .handle_frame(T_VERSION, b"madmpi-proxy/0".to_vec(), &mut seen)
            .unwrap_err()
            .contains("different madmpi versions"));
        assert!(s
            .handle_frame(T_VERSION, VERSION.to_vec(), &mut seen)
            .is_ok());
        assert!(s.handle_frame(T_ENV, b"=x".to_vec(), &mut seen).is_err());
        assert!(s.handle_frame(T_GO, vec![], &mut seen).is_err());
        let mut de = Deframer::default();
        de.handle_bytes(&[T_ARG, 0xff, 0xff, 0xff, 0xff]);
        assert!(de.poll_frame().is_err());
    }
}
