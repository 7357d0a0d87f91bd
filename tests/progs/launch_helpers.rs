//! Helpers shared by the launcher's multi-process tests (`tests/tests/{multihost,faults,hydra}.rs`
//! include this file with `#[path]`): building MPI programs with `bin/mpicc`, running a launcher
//! while its output is collected, and checking that processes are gone.
//!
//! Every job runs in its own process group, killed when its [`Running`] is dropped, so a failing
//! test leaves nothing behind.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use madmpi_tests::harness;

/// An MPI program (examples-c/<name>.c or tests/c/faults/<name>.c) built with bin/mpicc.
pub fn program(path: &str) -> PathBuf {
    static BUILT: Mutex<Vec<(String, PathBuf)>> = Mutex::new(Vec::new());
    static MAKE: OnceLock<()> = OnceLock::new();
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(s, _)| s == path) {
        return p.clone();
    }
    MAKE.get_or_init(harness::build_once);
    let root = harness::repo();
    let src = root.join(path);
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("launch-progs");
    std::fs::create_dir_all(&out_dir).expect("mkdir");
    let stem = src
        .file_stem()
        .expect("file")
        .to_string_lossy()
        .into_owned();
    let exe = out_dir.join(format!("{stem}-{}", std::process::id()));
    let o = Command::new(root.join("bin/mpicc"))
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-O2", "-g"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("run bin/mpicc");
    assert!(
        o.status.success(),
        "bin/mpicc {}: {}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    built.push((path.to_owned(), exe.clone()));
    exe
}

/// A running job: its output is collected by threads; dropping it kills what is left.
pub struct Running {
    /// The launcher.
    pub child: Child,
    out: Arc<Mutex<String>>,
    err: Arc<Mutex<String>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    started: Instant,
}

pub fn start(cmd: Command) -> Running {
    start_with_stdin(cmd, None)
}

/// [`start`], with the job's stdin a pipe left open in `child.stdin` (dropping it closes it).
pub fn start_held(mut cmd: Command) -> Running {
    cmd.stdin(Stdio::piped());
    launch(cmd)
}

/// [`start`], with `stdin` written to the job's stdin (then closed).
pub fn start_with_stdin(mut cmd: Command, stdin: Option<&str>) -> Running {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut job = launch(cmd);
    if let (Some(text), Some(mut w)) = (stdin, job.child.stdin.take()) {
        let text = text.to_owned();
        std::thread::spawn(move || {
            use std::io::Write;
            let _ = w.write_all(text.as_bytes());
        });
    }
    job
}

/// Starts `cmd` (its stdin already chosen) in a process group of its own, collecting its
/// output.
fn launch(mut cmd: Command) -> Running {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let collect = |r: Box<dyn Read + Send>, into: Arc<Mutex<String>>| {
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines() {
                let Ok(line) = line else { break };
                let mut s = into.lock().unwrap_or_else(|e| e.into_inner());
                s.push_str(&line);
                s.push('\n');
            }
        })
    };
    let out = Arc::new(Mutex::new(String::new()));
    let err = Arc::new(Mutex::new(String::new()));
    let readers = vec![
        collect(Box::new(child.stdout.take().expect("piped")), out.clone()),
        collect(Box::new(child.stderr.take().expect("piped")), err.clone()),
    ];
    Running {
        child,
        out,
        err,
        readers,
        started: Instant::now(),
    }
}

pub struct Finished {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
}

impl Finished {
    pub fn dump(&self) -> String {
        format!(
            "exit {:?} after {:.1?}\n--- stdout\n{}--- stderr\n{}",
            self.code,
            self.elapsed,
            harness::tail(&self.stdout, 40),
            harness::tail(&self.stderr, 40)
        )
    }
}

impl Running {
    pub fn stdout(&self) -> String {
        self.out.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until stdout satisfies `ready` (panics after `limit`, or if the job ends first).
    pub fn wait_output(&mut self, limit: Duration, ready: impl Fn(&str) -> bool) -> String {
        let t = Instant::now();
        loop {
            let s = self.stdout();
            if ready(&s) {
                return s;
            }
            if let Ok(Some(st)) = self.child.try_wait() {
                let err = self.err.lock().unwrap_or_else(|e| e.into_inner()).clone();
                panic!("the job ended ({st}) before it was ready:\n{s}\n--- stderr\n{err}");
            }
            assert!(t.elapsed() < limit, "not ready after {limit:?}:\n{s}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn finish(mut self, limit: Duration) -> Finished {
        let t = Instant::now();
        let code = loop {
            if let Some(st) = self.child.try_wait().expect("try_wait") {
                break st.code();
            }
            if t.elapsed() > limit {
                let s = self.stdout();
                let err = self.err.lock().unwrap_or_else(|e| e.into_inner()).clone();
                panic!("still running after {limit:?}\n--- stdout\n{s}--- stderr\n{err}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let elapsed = self.started.elapsed();
        // The readers end when every writer (ranks included) is gone.
        let readers = std::mem::take(&mut self.readers);
        let deadline = Instant::now() + Duration::from_secs(5);
        for r in readers {
            while !r.is_finished() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        Finished {
            code,
            stdout: self.stdout(),
            stderr: self.err.lock().unwrap_or_else(|e| e.into_inner()).clone(),
            elapsed,
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let pg = self.child.id() as i32;
        // SAFETY: kill has no memory-safety preconditions; the group is the one we created.
        unsafe { libc::kill(-pg, libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

pub fn run(cmd: Command, limit: Duration) -> Finished {
    start(cmd).finish(limit)
}

/// A live process (not a zombie) with this pid.
pub fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
        !matches!(
            s.rsplit_once(')')
                .and_then(|(_, r)| r.trim_start().chars().next()),
            Some('Z' | 'X')
        )
    })
}

/// Pids printed by traffic.c ("rank R pid P ...").
pub fn traffic_pids(out: &str) -> Vec<(u32, i32)> {
    out.lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            match w.as_slice() {
                ["rank", r, "pid", p, ..] => Some((r.parse().ok()?, p.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

pub fn assert_gone(pids: &[i32], what: &str) {
    let t = Instant::now();
    while pids.iter().any(|&p| alive(p)) && t.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<i32> = pids.iter().copied().filter(|&p| alive(p)).collect();
    assert!(left.is_empty(), "{what}: processes {left:?} survived");
}

/// The listening TCP sockets of process `pid` (local addresses), from `ss -ltnpH`; `None` when
/// `ss` cannot be run.
pub fn listening_ports(pid: i32) -> Option<Vec<String>> {
    let o = Command::new("ss").args(["-ltnpH"]).output().ok()?;
    if !o.status.success() {
        return None;
    }
    let needle = format!("pid={pid},");
    Some(
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains(&needle))
            .filter_map(|l| l.split_whitespace().nth(3).map(str::to_owned))
            .collect(),
    )
}

/// Entries of /dev/shm that belong to the job `kvsname`.
pub fn shm_leftovers(kvsname: &str) -> Vec<String> {
    let prefix = format!("madmpi-{kvsname}");
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default()
}

/// The value after `key` in a traffic.c "rank R pid P jobid J pmi_port X" line.
pub fn traffic_field(out: &str, rank: u32, key: &str) -> Option<String> {
    out.lines().find_map(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w.first() != Some(&"rank") || w.get(1) != Some(&rank.to_string().as_str()) {
            return None;
        }
        w.iter()
            .position(|&x| x == key)
            .and_then(|i| w.get(i + 1))
            .map(|s| s.to_string())
    })
}
