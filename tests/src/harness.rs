//! Build, compile and run helpers for multi-process tests of C programs.
//!
//! - [`toolchain`]: the `mpicc` and `mpirun` under test. By default the repository's `bin/mpicc`
//!   and `bin/mpirun`, after running `make` at the repository root once per test process (under
//!   a lock file shared by all test processes, so concurrent test binaries build once each and
//!   never at the same time). `MADMPI_TEST_MPICC` and `MADMPI_TEST_MPIRUN` (whitespace-separated
//!   words) select another MPI instead, to check the tests themselves, e.g.
//!   `MADMPI_TEST_MPICC=mpicc.mpich MADMPI_TEST_MPIRUN=mpiexec.mpich`.
//! - [`compile`]: one C file with `-std=c99 -Wall -Wextra -Werror`, once per process.
//! - [`Job`]: `mpirun -n N prog args` with a timeout, through [`run_command`] (any command):
//!   every process the command starts carries a marker in its environment; when it ends
//!   (normally, by timeout, or because the test panicked) every process with the marker is
//!   killed, so nothing outlives a test.

use std::collections::HashMap;
use std::fs::File;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// The repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Scratch directory for compiled programs.
pub fn scratch() -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    base.join("madmpi-test-progs")
}

/// The compiler and launcher under test, as argv prefixes.
pub struct Toolchain {
    /// `mpicc` and its leading arguments.
    pub mpicc: Vec<String>,
    /// `mpirun` and its leading arguments (`-n N prog args` are appended).
    pub mpirun: Vec<String>,
    /// Short name, for build directories.
    pub tag: String,
    /// Whether this is the repository's own build (not an override).
    pub ours: bool,
}

fn env_words(name: &str) -> Option<Vec<String>> {
    std::env::var(name)
        .ok()
        .map(|s| s.split_whitespace().map(String::from).collect::<Vec<_>>())
        .filter(|w| !w.is_empty())
}

/// The toolchain under test (building the repository once if it is ours).
pub fn toolchain() -> &'static Toolchain {
    static T: OnceLock<Toolchain> = OnceLock::new();
    T.get_or_init(|| {
        let cc = env_words("MADMPI_TEST_MPICC");
        let run = env_words("MADMPI_TEST_MPIRUN");
        let ours = cc.is_none() && run.is_none();
        if ours {
            build_once();
        }
        let tag = match &cc {
            None => "ours".to_string(),
            Some(w) => Path::new(&w[0])
                .file_name()
                .map(|s| {
                    s.to_string_lossy()
                        .replace(|c: char| !c.is_ascii_alphanumeric(), "_")
                })
                .unwrap_or_else(|| "override".into()),
        };
        let root = repo();
        Toolchain {
            mpicc: cc.unwrap_or_else(|| vec![root.join("bin/mpicc").display().to_string()]),
            mpirun: run.unwrap_or_else(|| vec![root.join("bin/mpirun").display().to_string()]),
            tag,
            ours,
        }
    })
}

/// Run `make` at the repository root, once per process, under a lock shared by all processes.
/// Panics with make's output if it fails.
pub fn build_once() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let root = repo();
        let dir = scratch();
        std::fs::create_dir_all(&dir).expect("mkdir scratch");
        let lock_path = dir.join("make.lock");
        let lock = File::create(&lock_path).unwrap_or_else(|e| panic!("{}: {e}", lock_path.display()));
        flock(&lock);
        let out = Command::new("make")
            .current_dir(&root)
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("cannot run `make` in {}: {e}", root.display()));
        let missing: Vec<&str> =
            ["bin/mpicc", "bin/mpirun", "lib/libmadmpi.so"].into_iter().filter(|p| !root.join(p).exists()).collect();
        assert!(
            out.status.success() && missing.is_empty(),
            "`make` at {} ({}) failed or did not produce {missing:?}\n--- stdout\n{}\n--- stderr\n{}",
            root.display(),
            out.status,
            tail(&String::from_utf8_lossy(&out.stdout), 30),
            tail(&String::from_utf8_lossy(&out.stderr), 30),
        );
        drop(lock);
    });
}

fn flock(f: &File) {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: the descriptor is open for the lifetime of `f`.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } == 0 {
            return;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "flock: {e}");
    }
}

/// The last `n` lines of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Compile `src` (once per process and set of flags) and return the program's path. Panics with
/// the compiler's output on failure, warnings included (`-Werror`).
pub fn compile(src: &Path, extra: &[&str]) -> PathBuf {
    type Built = HashMap<(PathBuf, Vec<String>), PathBuf>;
    // Held while compiling: tests of one program must not build it at the same time (one
    // would run the file the other is writing).
    static CACHE: Mutex<Option<Built>> = Mutex::new(None);
    let key = (
        src.to_path_buf(),
        extra.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
    );
    let mut cache = lock(&CACHE);
    let cache = cache.get_or_insert_with(HashMap::new);
    if let Some(p) = cache.get(&key) {
        return p.clone();
    }
    let tc = toolchain();
    let stem = src
        .file_stem()
        .expect("a file")
        .to_string_lossy()
        .into_owned();
    let flavor: String = extra
        .iter()
        .map(|f| f.replace(|c: char| !c.is_ascii_alphanumeric(), ""))
        .collect();
    // Named after its directory too: `p2p/basic.c`, `coll/basic.c` and `io/basic.c` (and
    // `errors`, `dead`, `shared`) are different programs, and a test must never run another
    // directory's program of the same name (tests in other processes may build it meanwhile).
    let dir = src
        .parent()
        .and_then(|d| d.file_name())
        .map_or_else(String::new, |d| d.to_string_lossy().into_owned());
    let out = scratch()
        .join(&tc.tag)
        .join(format!("{dir}-{stem}{flavor}"));
    std::fs::create_dir_all(out.parent().expect("has a directory")).expect("mkdir");
    // Built under a temporary name and renamed: another test process may be running the
    // previous build of the same program.
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let o = Command::new(&tc.mpicc[0])
        .args(&tc.mpicc[1..])
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O1", "-g"])
        .args(extra)
        .arg(src)
        .arg("-o")
        .arg(&tmp)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", tc.mpicc));
    assert!(
        o.status.success(),
        "{:?} {} failed ({}):\n{}{}",
        tc.mpicc,
        src.display(),
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::rename(&tmp, &out)
        .unwrap_or_else(|e| panic!("rename {} -> {}: {e}", tmp.display(), out.display()));
    cache.insert(key, out.clone());
    out
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Jobs run one at a time within a test process: one job may already have more ranks than the
/// machine has cores.
fn run_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    lock(&L)
}

/// The outcome of a job.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code of the launcher (None if killed by a signal).
    pub code: Option<i32>,
    /// Whether the job was killed for running past its timeout.
    pub timed_out: bool,
    /// Everything the job wrote to stdout.
    pub stdout: String,
    /// Everything the job wrote to stderr.
    pub stderr: String,
    /// Wall time.
    pub elapsed: Duration,
    /// The command line, for messages.
    pub command: String,
}

impl Outcome {
    /// Whether the launcher exited with 0 in time.
    pub fn success(&self) -> bool {
        !self.timed_out && self.code == Some(0)
    }

    /// A description with the tails of both outputs, for assertion messages.
    pub fn context(&self) -> String {
        format!(
            "`{}`: {} after {:.1?}\n--- stdout (tail)\n{}\n--- stderr (tail)\n{}",
            self.command,
            match (self.timed_out, self.code) {
                (true, _) => "TIMED OUT".to_string(),
                (false, Some(c)) => format!("exit code {c}"),
                (false, None) => "killed by a signal".to_string(),
            },
            self.elapsed,
            tail(&self.stdout, 40),
            tail(&self.stderr, 40)
        )
    }

    /// Panic unless the job succeeded and printed `OK <name>`.
    pub fn assert_ok(&self, name: &str) {
        assert!(self.success(), "job failed: {}", self.context());
        let want = format!("OK {name}");
        assert!(
            self.stdout.lines().any(|l| l.trim() == want),
            "no `{want}` line: {}",
            self.context()
        );
    }
}

/// A job to run under the launcher.
pub struct Job {
    prog: PathBuf,
    ranks: usize,
    args: Vec<String>,
    env: Vec<(String, String)>,
    timeout: Duration,
}

impl Job {
    /// `mpirun -n ranks prog`, 120 s timeout.
    pub fn new(prog: &Path, ranks: usize) -> Job {
        Job {
            prog: prog.to_path_buf(),
            ranks,
            args: Vec::new(),
            env: Vec::new(),
            timeout: Duration::from_secs(120),
        }
    }

    /// Append program arguments.
    pub fn args(mut self, args: &[&str]) -> Job {
        self.args.extend(args.iter().map(|s| s.to_string()));
        self
    }

    /// Set an environment variable for the job.
    pub fn env(mut self, k: &str, v: &str) -> Job {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Change the timeout.
    pub fn timeout(mut self, t: Duration) -> Job {
        self.timeout = t;
        self
    }

    /// Run the job to completion or timeout; every process it started is gone on return.
    pub fn run(&self) -> Outcome {
        let tc = toolchain();
        let mut cmd = Command::new(&tc.mpirun[0]);
        cmd.args(&tc.mpirun[1..])
            .arg("-n")
            .arg(self.ranks.to_string())
            .arg(&self.prog)
            .args(&self.args);
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        let command = format!(
            "{} -n {} {} {}",
            tc.mpirun.join(" "),
            self.ranks,
            self.prog.display(),
            self.args.join(" ")
        );
        run_command(cmd, &command, self.timeout)
    }
}

/// Run `cmd` (`command` names it in messages) in a process group of its own, without stdin
/// and with its output captured, to completion or `timeout`, one command at a time within a
/// test process. Every process it started is gone on return, also when the test panics.
pub fn run_command(mut cmd: Command, command: &str, timeout: Duration) -> Outcome {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let _one_at_a_time = run_lock();
    let marker = format!(
        "{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    );
    cmd.env(MARKER_VAR, &marker)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Its own process group, so that a signal reaches the launcher and what it started.
    cmd.process_group(0);
    let start = Instant::now();
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start `{command}`: {e}"));
    let mut guard = Reaper { child, marker };
    let out_reader = reader(guard.child.stdout.take());
    let err_reader = reader(guard.child.stderr.take());
    let mut timed_out = false;
    let code = loop {
        match guard.child.try_wait() {
            Ok(Some(st)) => break st.code(),
            Ok(None) => {}
            Err(e) => panic!("waiting for `{command}`: {e}"),
        }
        if start.elapsed() > timeout {
            timed_out = true;
            guard.kill_all();
            let _ = guard.child.wait();
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    let elapsed = start.elapsed();
    // Processes that outlive the command (they should not) are killed, which also closes the
    // pipes the readers wait on.
    guard.kill_all();
    let stdout = out_reader.join().unwrap_or_default();
    let stderr = err_reader.join().unwrap_or_default();
    Outcome {
        code,
        timed_out,
        stdout,
        stderr,
        elapsed,
        command: command.to_string(),
    }
}

/// The environment variable that marks every process of a job.
const MARKER_VAR: &str = "MADMPI_TEST_JOB";

fn reader(pipe: Option<impl Read + Send + 'static>) -> JoinHandle<String> {
    thread::spawn(move || {
        let mut s = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut s);
        }
        String::from_utf8_lossy(&s).into_owned()
    })
}

/// Kills the job's processes when dropped (also when the test panics).
struct Reaper {
    child: Child,
    marker: String,
}

impl Reaper {
    /// SIGKILL the launcher's process group and every process carrying the job's marker.
    fn kill_all(&mut self) {
        let pgid = self.child.id() as libc::pid_t;
        // SAFETY: signalling a process group we created; ESRCH when it is gone is fine.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        for _ in 0..3 {
            let pids = marked_processes(&self.marker);
            if pids.is_empty() {
                break;
            }
            for p in pids {
                // SAFETY: a process of this job (it carries the job's marker).
                unsafe { libc::kill(p, libc::SIGKILL) };
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Reaper {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_all();
            let _ = self.child.wait();
        } else {
            self.kill_all();
        }
    }
}

/// Pids of the processes whose environment holds `MADMPI_TEST_JOB=<marker>`.
fn marked_processes(marker: &str) -> Vec<libc::pid_t> {
    let needle = format!("{MARKER_VAR}={marker}");
    let me = std::process::id() as libc::pid_t;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok())
        .filter_map(|e| {
            e.file_name()
                .to_str()
                .and_then(|s| s.parse::<libc::pid_t>().ok())
        })
        .filter(|&pid| pid != me)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|&b| b == 0).any(|v| v == needle.as_bytes()))
                .unwrap_or(false)
        })
        .collect()
}

/// Compile a test program of `tests/c/<dir>/<name>.c`.
pub fn c_program(dir: &str, name: &str, extra: &[&str]) -> PathBuf {
    compile(
        &repo()
            .join("tests")
            .join("c")
            .join(dir)
            .join(format!("{name}.c")),
        extra,
    )
}

/// Whether the library has the `ofi` transport: a two-rank job asking for it either runs or
/// says the build has no libfabric (then the caller's tests are skipped, the reason printed).
pub fn have_ofi() -> bool {
    static HAVE: OnceLock<bool> = OnceLock::new();
    *HAVE.get_or_init(|| {
        if !toolchain().ours {
            eprintln!("SKIP: the ofi transport is madmpi's");
            return false;
        }
        let o = Job::new(&c_program("p2p", "basic", &[]), 2)
            .env("MADMPI_TRANSPORTS", "ofi")
            .env("MADMPI_OFI_PROVIDER", "tcp;ofi_rxm")
            .run();
        if !o.success() && o.stderr.contains("no libfabric") {
            eprintln!("SKIP: this build has no libfabric: {}", o.stderr.trim());
            return false;
        }
        o.assert_ok("basic");
        true
    })
}

/// The trace's `ofi` driver counter `name`, summed over the ranks of a job traced into `dir`.
pub fn ofi_counter_sum(dir: &std::path::Path, ranks: usize, name: &str) -> u64 {
    (0..ranks)
        .map(|rank| {
            let path = dir.join(format!("madmpi-trace-rank{rank}.json"));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("no trace at {}: {e}", path.display()));
            let v: serde_json::Value = serde_json::from_str(&text).expect("trace is JSON");
            let events = v["traceEvents"].as_array().expect("events");
            let e = events
                .iter()
                .find(|e| e["name"] == "driver counters" && e["args"]["driver"] == "ofi")
                .unwrap_or_else(|| panic!("rank {rank}: no ofi driver counters"));
            e["args"][name]
                .as_u64()
                .unwrap_or_else(|| panic!("{name} in {e}"))
        })
        .sum()
}

/// Assert that nothing of job `jobid` (the `jobid` line a test program prints; `-` when the
/// launcher named none) is left in `/dev/shm`: the segments of a job whose ranks died must be
/// removed too.
pub fn assert_no_shm_left(jobid: &str) {
    let jobid = jobid.trim();
    if jobid == "-" {
        return;
    }
    let prefix = format!("madmpi-{jobid}");
    let left: Vec<String> = std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|f| f.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "left in /dev/shm: {left:?}");
}

/// Assert how a job whose victim SIGKILLed itself under `mpirun --disable-auto-cleanup` ended:
/// no survivor printed `FAIL`, the job's code is the victim's (137), and `mpirun` said the
/// victim was killed and the others went on.
pub fn assert_victim_killed(out: &Outcome) {
    assert!(!out.stderr.contains("FAIL"), "{}", out.context());
    assert_eq!(out.code, Some(137), "the victim's code: {}", out.context());
    assert!(
        out.stderr.contains("killed by signal 9") && out.stderr.contains("the others go on"),
        "{}",
        out.context()
    );
}
