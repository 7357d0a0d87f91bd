//! The C examples (`examples-c/*.c`) built with the repository's `bin/mpicc`
//! and run under `bin/mpirun -n K` for K = 1..=4; each must exit 0 and print
//! what it promises. Also: every C source of `examples-c/` and `bench/c/`
//! compiles with `-std=c99 -Wall -Wextra -Werror` at -O0, -O2 and -O3, and
//! the examples' Makefile works.
//!
//! When `bin/mpicc`, `bin/mpirun` or `lib/libmadmpi.so` is missing, `make`
//! runs once at the repository root (guarded by a lock file shared by all
//! test processes); a failed build fails the tests, it does not skip them.
//!
//! Overrides, to check these tests against another MPI:
//!   MADMPI_TEST_MPICC="mpicc.mpich"  MADMPI_TEST_MPIRUN="mpiexec.mpich"
//!   MADMPI_TEST_MPIRUN="mpirun.openmpi --oversubscribe --allow-run-as-root"
//! (whitespace-separated words; the launcher gets `-n K prog args` appended).

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);
const EXAMPLES: [&str; 5] = ["hello", "ring", "pingpong", "probe", "nonblocking"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn scratch() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("examples-c")
}

/// The compiler and launcher under test, as argv prefixes.
struct Toolchain {
    mpicc: Vec<String>,
    mpirun: Vec<String>,
    /// Short name for build directories.
    tag: String,
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

fn env_words(name: &str) -> Option<Vec<String>> {
    std::env::var(name)
        .ok()
        .map(|s| words(&s))
        .filter(|w| !w.is_empty())
}

fn toolchain() -> &'static Toolchain {
    static T: OnceLock<Toolchain> = OnceLock::new();
    T.get_or_init(|| {
        let cc = env_words("MADMPI_TEST_MPICC");
        let run = env_words("MADMPI_TEST_MPIRUN");
        if cc.is_none() || run.is_none() {
            ensure_built();
        }
        let root = repo();
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
        Toolchain {
            mpicc: cc.unwrap_or_else(|| vec![root.join("bin/mpicc").display().to_string()]),
            mpirun: run.unwrap_or_else(|| vec![root.join("bin/mpirun").display().to_string()]),
            tag,
        }
    })
}

/// Runs `make` at the repository root once if our wrapper scripts or
/// library are missing. A lock file serializes concurrent test processes;
/// the second one finds everything built.
fn ensure_built() {
    let root = repo();
    let needed = ["bin/mpicc", "bin/mpirun", "lib/libmadmpi.so"];
    let missing = || -> Vec<&str> {
        needed
            .iter()
            .copied()
            .filter(|p| !root.join(p).exists())
            .collect()
    };
    if missing().is_empty() {
        return;
    }
    let lock_path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("madmpi-make.lock");
    let lock = File::create(&lock_path).unwrap_or_else(|e| panic!("{}: {e}", lock_path.display()));
    flock(&lock);
    if missing().is_empty() {
        return;
    }
    let out = Command::new("make")
        .current_dir(&root)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `make` in {}: {e}", root.display()));
    let still = missing();
    assert!(
        out.status.success() && still.is_empty(),
        "`make` at {} ({}) did not produce {:?}\n--- stdout\n{}\n--- stderr\n{}",
        root.display(),
        out.status,
        still,
        tail(&String::from_utf8_lossy(&out.stdout), 30),
        tail(&String::from_utf8_lossy(&out.stderr), 30),
    );
    // The lock is released when `lock` is dropped.
}

fn flock(f: &File) {
    use std::os::fd::AsRawFd;
    loop {
        // SAFETY: the descriptor is open for the lifetime of `f`; flock has
        // no other preconditions.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) };
        if r == 0 {
            return;
        }
        let e = std::io::Error::last_os_error();
        assert_eq!(e.kind(), std::io::ErrorKind::Interrupted, "flock: {e}");
    }
}

fn tail(s: &str, n: usize) -> String {
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// MPI jobs run one at a time: the machine may have fewer cores than the
/// ranks of one job already.
fn run_lock() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

/// Compiles one C file; panics with the compiler's output on failure.
fn compile(src: &Path, out: &Path, extra: &[&str]) {
    let tc = toolchain();
    std::fs::create_dir_all(out.parent().expect("output has a directory")).expect("mkdir");
    let mut cmd = Command::new(&tc.mpicc[0]);
    cmd.args(&tc.mpicc[1..])
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .args(extra)
        .arg(src)
        .arg("-o")
        .arg(out)
        .stdin(Stdio::null());
    let o = cmd
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
}

fn build_example(name: &str) -> PathBuf {
    let tc = toolchain();
    let out = scratch().join(&tc.tag).join(name);
    let src = repo().join("examples-c").join(format!("{name}.c"));
    compile(&src, &out, &["-O2"]);
    out
}

struct Ran {
    ok: bool,
    status: String,
    stdout: String,
    stderr: String,
}

impl Ran {
    fn context(&self, what: &str) -> String {
        format!(
            "{what}: {}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            tail(&self.stdout, 40),
            tail(&self.stderr, 40)
        )
    }
}

/// Runs `exe args` on `n` ranks with a time limit. The launcher gets its own
/// process group, killed as a whole afterwards so no rank outlives the test.
fn mpirun(n: u32, exe: &Path, args: &[&str]) -> Ran {
    let tc = toolchain();
    let _serial = run_lock();
    let dir = scratch().join("logs");
    std::fs::create_dir_all(&dir).expect("mkdir logs");
    let base = format!(
        "{}-{}-n{n}-{}",
        tc.tag,
        exe.file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default(),
        std::process::id()
    );
    let out_path = dir.join(format!("{base}.out"));
    let err_path = dir.join(format!("{base}.err"));
    let mut cmd = Command::new(&tc.mpirun[0]);
    cmd.args(&tc.mpirun[1..])
        .arg("-n")
        .arg(n.to_string())
        .arg(exe)
        .args(args)
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .process_group(0);
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", tc.mpirun));
    let pgid = child.id() as libc::pid_t;
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break Some(st);
        }
        if started.elapsed() > RUN_TIMEOUT {
            break None;
        }
        thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: killpg has no memory-safety preconditions; pgid is the group
    // created above for this launcher (never our own group).
    unsafe {
        libc::killpg(pgid, libc::SIGKILL);
    }
    let status_text = match status {
        Some(st) => st.to_string(),
        None => {
            let _ = child.wait();
            format!("timed out after {RUN_TIMEOUT:?} (killed)")
        }
    };
    Ran {
        ok: status.is_some_and(|s| s.success()),
        status: status_text,
        stdout: std::fs::read_to_string(&out_path).unwrap_or_default(),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
    }
}

fn run_ok(n: u32, exe: &Path, args: &[&str]) -> Ran {
    let r = mpirun(n, exe, args);
    let name = exe
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    assert!(r.ok, "{}", r.context(&format!("{name} on {n} rank(s)")));
    let ok_line = format!("{name}: OK ({n} ranks)");
    assert!(
        r.stdout.lines().any(|l| l.trim() == ok_line),
        "{}",
        r.context(&format!("{name} on {n} rank(s) did not print `{ok_line}`"))
    );
    r
}

fn count_lines(text: &str, pred: impl Fn(&str) -> bool) -> usize {
    text.lines().filter(|l| pred(l)).count()
}

#[test]
fn hello() {
    let exe = build_example("hello");
    for n in 1..=4 {
        let r = run_ok(n, &exe, &[]);
        for rank in 0..n {
            let prefix = format!("hello from rank {rank} of {n} on ");
            assert_eq!(
                count_lines(&r.stdout, |l| l.starts_with(&prefix)),
                1,
                "{}",
                r.context(&format!("rank {rank} must greet exactly once"))
            );
        }
    }
}

#[test]
fn ring() {
    let exe = build_example("ring");
    for n in 1..=4 {
        let r = run_ok(n, &exe, &[]);
        let want = format!("ring: token {} after 10 laps over {n} ranks", 10 * n);
        assert!(r.stdout.contains(&want), "{}", r.context(&want));
        // Another lap count, to show the count is not hard-wired.
        let r = run_ok(n, &exe, &["3"]);
        let want = format!("ring: token {} after 3 laps over {n} ranks", 3 * n);
        assert!(r.stdout.contains(&want), "{}", r.context(&want));
    }
}

#[test]
fn pingpong() {
    let exe = build_example("pingpong");
    for n in 1..=4 {
        let r = run_ok(n, &exe, &["65536"]);
        if n == 1 {
            assert!(
                r.stdout.contains("needs at least 2 ranks"),
                "{}",
                r.context("note")
            );
            continue;
        }
        // Sizes 0, 1, 2, 4, ..., 65536: 18 rows of "bytes iters latency MB/s".
        let rows: Vec<Vec<f64>> = r
            .stdout
            .lines()
            .filter_map(|l| {
                let v: Vec<f64> = l
                    .split_whitespace()
                    .filter_map(|w| w.parse().ok())
                    .collect();
                (v.len() == 4).then_some(v)
            })
            .collect();
        assert_eq!(rows.len(), 18, "{}", r.context("18 size rows"));
        assert_eq!(rows[0][0], 0.0);
        assert_eq!(rows[17][0], 65536.0);
        for row in &rows {
            assert!(
                row[2] > 0.0 && row[2].is_finite(),
                "{}",
                r.context("latency > 0")
            );
        }
    }
}

#[test]
fn probe() {
    let exe = build_example("probe");
    for n in 1..=4 {
        let r = run_ok(n, &exe, &[]);
        for phase in ["Probe+Recv", "Mprobe+Mrecv", "Iprobe+Recv", "Improbe+Mrecv"] {
            let want = format!("{} messages per rank", 6 * n);
            assert!(
                r.stdout
                    .lines()
                    .any(|l| l.contains(phase) && l.contains(&want)),
                "{}",
                r.context(&format!("{phase}: {want}"))
            );
        }
    }
}

#[test]
fn nonblocking() {
    let exe = build_example("nonblocking");
    for n in 1..=4 {
        let r = run_ok(n, &exe, &[]);
        for pattern in [
            "Irecv/Isend+Waitall",
            "Waitany/Testsome",
            "Sendrecv ",
            "Sendrecv_replace",
        ] {
            assert!(
                r.stdout
                    .lines()
                    .any(|l| l.contains(pattern) && l.contains("ok for 1, 1000 and 50000 ints")),
                "{}",
                r.context(pattern)
            );
        }
    }
}

/// All C sources of the repository that users compile, at several
/// optimization levels (GCC's warnings depend on them).
#[test]
fn all_c_sources_compile_warning_free() {
    let root = repo();
    let mut sources = Vec::new();
    for dir in ["examples-c", "bench/c"] {
        let mut v: Vec<PathBuf> = std::fs::read_dir(root.join(dir))
            .unwrap_or_else(|e| panic!("{dir}: {e}"))
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect();
        v.sort();
        assert!(!v.is_empty(), "no C sources in {dir}");
        sources.extend(v);
    }
    let include = root.join("bench/c").display().to_string();
    let tag = &toolchain().tag;
    for src in &sources {
        for opt in ["-O0", "-O2", "-O3"] {
            let stem = src.file_stem().unwrap_or_default().to_string_lossy();
            let obj = scratch()
                .join(tag)
                .join("objs")
                .join(format!("{stem}{opt}.o"));
            compile(src, &obj, &[opt, "-c", "-I", &include]);
        }
    }
}

/// `make -C examples-c MPICC=... OUT=...` builds every example.
#[test]
fn examples_makefile() {
    let tc = toolchain();
    let out = scratch().join(&tc.tag).join("make-out");
    let o = Command::new("make")
        .arg("-C")
        .arg(repo().join("examples-c"))
        .arg(format!("MPICC={}", tc.mpicc.join(" ")))
        .arg(format!("OUT={}", out.display()))
        .arg("-B")
        .stdin(Stdio::null())
        .output()
        .expect("run make");
    assert!(
        o.status.success(),
        "make -C examples-c failed:\n{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    for p in EXAMPLES {
        assert!(out.join(p).is_file(), "make did not build {p}");
    }
}
