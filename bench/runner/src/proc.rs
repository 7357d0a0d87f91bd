//! Running external commands with a time limit.
//!
//! Every command starts in a process group of its own, so that on a timeout
//! the launcher *and* the ranks it started are killed together (by that group
//! id, never by name), and stragglers left after a normal exit are reaped the
//! same way.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::thread;
use std::time::{Duration, Instant};

/// How a command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Exited with status 0.
    Ok,
    /// Exited non-zero or was killed by a signal (text says which).
    Failed(String),
    /// Still running when the time limit expired; killed.
    Timeout,
    /// Printed its completion marker but did not exit within the grace
    /// period (typically a launcher or library hanging in MPI_Finalize);
    /// killed. Its output is complete.
    HungAfterDone,
    /// Could not be started.
    SpawnError(String),
}

impl Outcome {
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed(_) => "failed",
            Outcome::Timeout => "timeout",
            Outcome::HungAfterDone => "hung-after-done",
            Outcome::SpawnError(_) => "spawn-error",
        }
    }

    pub fn detail(&self) -> String {
        match self {
            Outcome::Ok => "ok".into(),
            Outcome::Failed(s) => format!("failed ({s})"),
            Outcome::Timeout => "timed out (killed)".into(),
            Outcome::HungAfterDone => "finished its output but did not exit (killed)".into(),
            Outcome::SpawnError(s) => format!("could not start ({s})"),
        }
    }
}

/// A finished command: outcome, wall time and captured output.
#[derive(Debug, Clone)]
pub struct Finished {
    pub outcome: Outcome,
    pub wall: Duration,
    pub stdout: String,
    pub stderr: String,
}

/// A command to run: argv, extra environment, working directory, and
/// optionally a stdout line that means "all output is out".
#[derive(Debug, Clone)]
pub struct Spec {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    /// Once a stdout line equals this, the command gets at most
    /// `after_done` more to exit.
    pub done_line: Option<String>,
    pub after_done: Duration,
}

/// How long a command may linger after printing its `done_line`.
pub const AFTER_DONE_GRACE: Duration = Duration::from_secs(20);

impl Spec {
    pub fn new<S: AsRef<str>>(argv: &[S]) -> Spec {
        Spec {
            argv: argv.iter().map(|s| s.as_ref().to_string()).collect(),
            env: Vec::new(),
            cwd: None,
            done_line: None,
            after_done: AFTER_DONE_GRACE,
        }
    }

    /// The command as a shell-like line, for logs and results.json.
    pub fn display(&self) -> String {
        let mut parts: Vec<String> = self
            .env
            .iter()
            .map(|(k, v)| format!("{k}={}", quote(v)))
            .collect();
        parts.extend(self.argv.iter().map(|a| quote(a)));
        parts.join(" ")
    }
}

fn quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The real-time policy and priority the commands run with, when the runner was started
/// under one (`chrt -f 10 madmpi-bench ...`, so that other load cannot take the CPUs from
/// benchmark ranks): see [`watch_from_above`].
static CHILD_SCHED: OnceLock<Option<(libc::c_int, libc::c_int)>> = OnceLock::new();

/// Started under a real-time policy (SCHED_FIFO or SCHED_RR) at priority p, the runner moves
/// itself to p + 1 and starts its commands at p. Otherwise a benchmark whose ranks busy-poll
/// on every CPU (MPICH over TCP does, and with more ranks than CPUs anyone may) never lets
/// the runner run again: its time limit could not fire, and the suite stayed stuck (seen:
/// 16 minutes on a 2-CPU machine, until killed by hand). Call once, at start.
pub fn watch_from_above() {
    CHILD_SCHED.get_or_init(|| {
        // SAFETY: plain system calls on this process; `param` is a valid sched_param.
        unsafe {
            let policy = libc::sched_getscheduler(0);
            if policy != libc::SCHED_FIFO && policy != libc::SCHED_RR {
                return None;
            }
            let mut param: libc::sched_param = std::mem::zeroed();
            if libc::sched_getparam(0, &mut param) != 0
                || param.sched_priority >= libc::sched_get_priority_max(policy)
            {
                return None;
            }
            let prio = param.sched_priority;
            param.sched_priority = prio + 1;
            if libc::sched_setscheduler(0, policy, &param) != 0 {
                return None;
            }
            Some((policy, prio))
        }
    });
}

/// Runs `spec` with a time limit, capturing stdout and stderr into files
/// under `log_prefix` (`<prefix>.out`, `<prefix>.err`) and returning both.
pub fn run(spec: &Spec, timeout: Duration, log_prefix: &Path) -> Finished {
    let started = Instant::now();
    let out_path = log_prefix.with_extension("out");
    let err_path = log_prefix.with_extension("err");
    let files = File::create(&out_path).and_then(|o| Ok((o, File::create(&err_path)?)));
    let (out_file, err_file) = match files {
        Ok(f) => f,
        Err(e) => return spawn_error(started, format!("log files: {e}")),
    };
    let Some((prog, args)) = spec.argv.split_first() else {
        return spawn_error(started, "empty command".into());
    };
    let mut cmd = Command::new(prog);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::from(out_file))
        .stderr(Stdio::from(err_file))
        .process_group(0);
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    if let Some(dir) = &spec.cwd {
        cmd.current_dir(dir);
    }
    if let Some(&Some((policy, prio))) = CHILD_SCHED.get() {
        // SAFETY: only async-signal-safe system calls between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                let param = libc::sched_param {
                    sched_priority: prio,
                };
                if libc::sched_setscheduler(0, policy, &param) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return spawn_error(started, format!("{prog}: {e}")),
    };
    // The child is the group leader: its pid is the group id.
    let pgid = child.id() as libc::pid_t;
    let mut done_at: Option<Instant> = None;
    let mut seen_len = 0;
    let outcome = loop {
        match child.try_wait() {
            Ok(Some(status)) => break outcome_of(status),
            Ok(None) => {}
            Err(e) => break Outcome::Failed(format!("wait: {e}")),
        }
        if let (Some(line), None) = (&spec.done_line, done_at) {
            if saw_line(&out_path, line, &mut seen_len) {
                done_at = Some(Instant::now());
            }
        }
        let hung = done_at.is_some_and(|t| t.elapsed() >= spec.after_done);
        if hung || started.elapsed() >= timeout {
            // Launchers may start ranks in sessions of their own (MPICH's Hydra does), out
            // of the group's reach: their tree is found by parent links before any dies.
            let tree = descendants(pgid);
            demote(&tree);
            kill_group(pgid, libc::SIGTERM);
            let grace = Instant::now();
            while grace.elapsed() < Duration::from_secs(2) {
                if matches!(child.try_wait(), Ok(Some(_))) {
                    break;
                }
                thread::sleep(Duration::from_millis(20));
            }
            kill_group(pgid, libc::SIGKILL);
            for &p in &tree {
                // SAFETY: kill has no memory-safety preconditions; each pid descends from
                // our child (read just before), so it is one of the command's processes.
                unsafe {
                    libc::kill(p, libc::SIGKILL);
                }
            }
            let _ = child.wait();
            break if done_at.is_some() {
                Outcome::HungAfterDone
            } else {
                Outcome::Timeout
            };
        }
        thread::sleep(poll_interval(started.elapsed()));
    };
    // Ranks that outlived their launcher would skew the next measurement.
    kill_group(pgid, libc::SIGKILL);
    Finished {
        outcome,
        wall: started.elapsed(),
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

/// Whether the file has a line equal to `line`; rereads only when it grew.
fn saw_line(path: &Path, line: &str, seen_len: &mut u64) -> bool {
    let len = std::fs::metadata(path).map_or(0, |m| m.len());
    if len == *seen_len {
        return false;
    }
    *seen_len = len;
    std::fs::read_to_string(path).is_ok_and(|t| t.lines().any(|l| l.trim_end() == line))
}

/// Short polls at first so quick commands are not padded, then coarser.
fn poll_interval(elapsed: Duration) -> Duration {
    if elapsed < Duration::from_millis(200) {
        Duration::from_millis(5)
    } else {
        Duration::from_millis(50)
    }
}

fn spawn_error(started: Instant, why: String) -> Finished {
    Finished {
        outcome: Outcome::SpawnError(why),
        wall: started.elapsed(),
        stdout: String::new(),
        stderr: String::new(),
    }
}

fn outcome_of(status: ExitStatus) -> Outcome {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        Outcome::Ok
    } else if let Some(code) = status.code() {
        Outcome::Failed(format!("exit code {code}"))
    } else if let Some(sig) = status.signal() {
        Outcome::Failed(format!("signal {sig}"))
    } else {
        Outcome::Failed("unknown status".into())
    }
}

/// `root` and every process below it, by the parent links of `/proc/<pid>/stat`.
fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent_of = Vec::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<libc::pid_t>().ok());
            if let Some(ppid) = ppid {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![root];
    let mut i = 0;
    while i < tree.len() {
        let p = tree[i];
        tree.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == p)
                .map(|&(c, _)| c),
        );
        i += 1;
    }
    tree
}

/// Back to the normal policy, so that processes about to be killed get a CPU to die on:
/// under a real-time policy (see [`watch_from_above`]) a launcher waiting behind its
/// busy-polling ranks at the same priority never runs again, signalled or not.
fn demote(tree: &[libc::pid_t]) {
    if !matches!(CHILD_SCHED.get(), Some(Some(_))) {
        return;
    }
    let param = libc::sched_param { sched_priority: 0 };
    for &p in tree {
        // SAFETY: a plain system call on a process of the command; `param` is valid.
        unsafe {
            libc::sched_setscheduler(p, libc::SCHED_OTHER, &param);
        }
    }
}

fn kill_group(pgid: libc::pid_t, sig: libc::c_int) {
    if pgid <= 1 {
        return;
    }
    // SAFETY: killpg has no memory-safety preconditions; `pgid` is the group
    // this module created for its own child (never 0/1, which would mean our
    // own group or init).
    unsafe {
        libc::killpg(pgid, sig);
    }
}

/// The full path of `name` on PATH (or `name` itself if it contains a
/// slash and is an executable file).
pub fn which(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

pub fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    // SAFETY: geteuid cannot fail and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// The last `n` lines of `text`, for reports.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Creates a directory and its parents.
pub fn mkdirs(p: &Path) -> io::Result<()> {
    std::fs::create_dir_all(p)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("madmpi-bench-test-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    #[test]
    fn captures_output_and_status() {
        let f = run(
            &Spec::new(&["sh", "-c", "echo hi; echo err >&2; exit 3"]),
            Duration::from_secs(10),
            &tmp("a"),
        );
        assert_eq!(f.outcome, Outcome::Failed("exit code 3".into()));
        assert_eq!(f.stdout, "hi\n");
        assert_eq!(f.stderr, "err\n");
    }

    #[test]
    fn kills_the_whole_group_on_timeout() {
        // The grandchild would keep the group alive if only `sh` were killed.
        let started = Instant::now();
        let f = run(
            &Spec::new(&["sh", "-c", "sleep 30 & sleep 30; echo never"]),
            Duration::from_millis(300),
            &tmp("b"),
        );
        assert_eq!(f.outcome, Outcome::Timeout);
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(!f.stdout.contains("never"));
    }

    #[test]
    fn kills_processes_in_sessions_of_their_own_on_timeout() {
        // As MPICH's Hydra starts its ranks: outside the command's process group.
        let pidfile = tmp("s").with_extension("pid");
        let script = format!(
            "setsid sleep 30 & echo $! > {}; sleep 30",
            pidfile.display()
        );
        let f = run(
            &Spec::new(&["sh", "-c", &script]),
            Duration::from_millis(500),
            &tmp("s"),
        );
        assert_eq!(f.outcome, Outcome::Timeout);
        let pid: libc::pid_t = std::fs::read_to_string(&pidfile)
            .expect("pid file")
            .trim()
            .parse()
            .expect("a pid");
        // Killed, then reaped by init: gone, or a zombie until then.
        let gone = || {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
                s.rsplit_once(')')
                    .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
            })
        };
        let t = Instant::now();
        while !gone() && t.elapsed() < Duration::from_secs(5) {
            thread::sleep(Duration::from_millis(20));
        }
        assert!(gone(), "pid {pid} survived the timeout");
    }

    #[test]
    fn a_command_hanging_after_its_done_line_is_cut_short() {
        let mut spec = Spec::new(&["sh", "-c", "echo out; echo '# done'; sleep 600"]);
        spec.done_line = Some("# done".into());
        spec.after_done = Duration::from_millis(300);
        let started = Instant::now();
        let f = run(&spec, Duration::from_secs(120), &tmp("d"));
        assert_eq!(f.outcome, Outcome::HungAfterDone);
        let waited = started.elapsed();
        assert!(
            waited >= spec.after_done && waited < Duration::from_secs(30),
            "{waited:?}"
        );
        assert_eq!(f.stdout, "out\n# done\n");
    }

    #[test]
    fn missing_program_is_a_spawn_error() {
        let f = run(
            &Spec::new(&["/nonexistent/prog"]),
            Duration::from_secs(1),
            &tmp("c"),
        );
        assert!(
            matches!(f.outcome, Outcome::SpawnError(_)),
            "{:?}",
            f.outcome
        );
    }

    #[test]
    fn quotes_for_display() {
        let mut s = Spec::new(&["mpirun", "-n", "2", "a b"]);
        s.env.push(("UCX_TLS".into(), "tcp,self".into()));
        assert_eq!(s.display(), "UCX_TLS=tcp,self mpirun -n 2 'a b'");
    }
}
