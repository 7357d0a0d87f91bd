//! The launcher (`mpirun`) and the PMI client, end to end, with real processes.
//!
//! Ranks are `pmi-probe` (tests/progs/pmi_probe.rs), a program that speaks PMI-1 through
//! `madmpi_pmi::Client` and is scripted by its arguments; the launcher is `mpirun-test` (the
//! `mpirun` code built in this crate), or whatever `MADMPI_MPIRUN` names. The probe also runs
//! under MPICH's `mpiexec.hydra` when it is installed, and MPICH-built programs run under our
//! launcher when `mpicc.mpich` is, which checks both sides against an independent peer.
//!
//! Every test that starts processes holds them in guards that kill them if the test fails.

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use madmpi_tests::harness::{c_program, run_command};

const PROBE: &str = env!("CARGO_BIN_EXE_pmi-probe");

fn mpirun() -> PathBuf {
    match std::env::var_os("MADMPI_MPIRUN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_mpirun-test")),
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Kills the launcher (and through PR_SET_PDEATHSIG its ranks) if a test fails before it ends,
/// and kills probe ranks it saw that are still alive.
struct Guard {
    child: Option<Child>,
    ranks: Vec<i32>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            if c.try_wait().ok().flatten().is_none() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
        for &pid in &self.ranks {
            if probe_alive(pid) {
                // SAFETY: kill has no memory-safety preconditions; probe_alive checked that the
                // pid is still one of our probes.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
    }
}

/// A pid is one of our live probe ranks (not a zombie, not a recycled pid).
fn probe_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    let state = stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.trim_start().chars().next());
    if state == Some('Z') || state == Some('X') {
        return false;
    }
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.windows(9).any(|w| w == b"pmi-probe"))
}

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
}

impl Outcome {
    fn lines(&self, prefix: &str) -> Vec<&str> {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .collect()
    }
    fn dump(&self) -> String {
        format!(
            "exit {:?} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }
    /// Pids printed by `info` lines.
    fn pids(&self) -> Vec<i32> {
        self.lines("info ")
            .iter()
            .filter_map(|l| field(l, "pid"))
            .filter_map(|p| p.parse().ok())
            .collect()
    }
}

/// The value of `key=` in a space-separated line.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split(' ')
        .find_map(|t| t.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

fn spawn(
    cmd: &mut Command,
    stdin: Option<&str>,
) -> (
    Guard,
    std::thread::JoinHandle<String>,
    std::thread::JoinHandle<String>,
) {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    if let Some(text) = stdin {
        let mut w = child.stdin.take().expect("piped");
        let text = text.to_owned();
        std::thread::spawn(move || {
            let _ = w.write_all(text.as_bytes());
        });
    }
    let reader = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = reader(Box::new(child.stdout.take().expect("piped")));
    let err = reader(Box::new(child.stderr.take().expect("piped")));
    (
        Guard {
            child: Some(child),
            ranks: Vec::new(),
        },
        out,
        err,
    )
}

/// Runs a command to completion (or kills it after `limit` and fails the test).
fn run_cmd(mut cmd: Command, stdin: Option<&str>, limit: Duration) -> Outcome {
    let start = Instant::now();
    let (mut guard, out, err) = spawn(&mut cmd, stdin);
    let child = guard.child.as_mut().expect("spawned");
    let status = loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            break st;
        }
        assert!(
            start.elapsed() < limit,
            "{cmd:?} still running after {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    let o = Outcome {
        code: status.code(),
        stdout: out.join().expect("reader"),
        stderr: err.join().expect("reader"),
        elapsed,
    };
    guard.ranks = o.pids();
    o
}

fn mpirun_with(args: &[&str], stdin: Option<&str>) -> Outcome {
    let mut cmd = Command::new(mpirun());
    cmd.args(args);
    run_cmd(cmd, stdin, Duration::from_secs(60))
}

/// `mpirun -n N pmi-probe ACTIONS...`
fn probe_job(n: u32, actions: &[&str]) -> Outcome {
    let n = n.to_string();
    let mut args = vec!["-n", &n, PROBE];
    args.extend_from_slice(actions);
    mpirun_with(&args, None)
}

fn assert_all_gone(pids: &[i32], o: &Outcome) {
    // The launcher has reaped them before exiting; allow a moment for /proc to catch up.
    let start = Instant::now();
    while pids.iter().any(|&p| probe_alive(p)) && start.elapsed() < Duration::from_secs(2) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let alive: Vec<i32> = pids.iter().copied().filter(|&p| probe_alive(p)).collect();
    assert!(
        alive.is_empty(),
        "ranks {alive:?} survived the job\n{}",
        o.dump()
    );
}

#[test]
fn ranks_see_rank_size_kvsname_and_exchange() {
    for n in 1..=4u32 {
        let o = probe_job(n, &["info", "allgather", "local"]);
        assert_eq!(o.code, Some(0), "{}", o.dump());
        let infos = o.lines("info ");
        assert_eq!(infos.len(), n as usize, "{}", o.dump());
        let mut ranks: Vec<u32> = infos
            .iter()
            .map(|l| field(l, "rank").unwrap().parse().unwrap())
            .collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..n).collect::<Vec<_>>());
        let kvs = field(infos[0], "kvsname").unwrap();
        assert!(kvs.starts_with("kvs_"), "{kvs}");
        for l in &infos {
            assert_eq!(field(l, "size"), Some(n.to_string().as_str()));
            assert_eq!(field(l, "kvsname"), Some(kvs));
            assert_eq!(
                field(l, "jobid"),
                Some(kvs),
                "MADMPI_JOBID must be the kvsname"
            );
            assert_eq!(field(l, "appnum"), Some("0"));
            assert_eq!(field(l, "usize"), Some(n.to_string().as_str()));
        }
        assert_eq!(o.lines("allgather ok").len(), n as usize, "{}", o.dump());
        let all: Vec<String> = (0..n).map(|r| r.to_string()).collect();
        for l in o.lines("local ") {
            assert_eq!(
                field(l, "ranks"),
                Some(all.join(",").as_str()),
                "{}",
                o.dump()
            );
        }
        assert!(o.stderr.is_empty(), "{}", o.dump());
    }
}

#[test]
fn kvsnames_are_unique_per_job() {
    let a = probe_job(1, &["info"]);
    let b = probe_job(1, &["info"]);
    let ka = field(a.lines("info ")[0], "kvsname").unwrap().to_owned();
    let kb = field(b.lines("info ")[0], "kvsname").unwrap().to_owned();
    assert_ne!(ka, kb);
}

#[test]
fn puts_are_visible_after_the_barrier_and_limits_are_enforced() {
    let o = probe_job(
        2,
        &[
            "put=shared,one",
            "get=shared",
            "barrier",
            "get=shared",
            "get=missing",
            "bigput",
        ],
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_eq!(o.lines("get shared notfound").len(), 2, "{}", o.dump());
    assert_eq!(o.lines("get shared=one").len(), 2, "{}", o.dump());
    assert_eq!(o.lines("get missing notfound").len(), 2, "{}", o.dump());
    assert_eq!(o.lines("bigput rejected: ").len(), 2, "{}", o.dump());
    assert!(o.stdout.contains("at most 1023"), "{}", o.dump());
}

#[test]
fn exit_codes_propagate() {
    let ok = probe_job(3, &["info"]);
    assert_eq!(ok.code, Some(0), "{}", ok.dump());

    let o = probe_job(3, &["info", "barrier", "@1:exit=3", "sleep=30"]);
    assert_eq!(o.code, Some(3), "{}", o.dump());
    assert!(o.stderr.contains("mpirun: rank 1 (pid "), "{}", o.dump());
    assert!(o.stderr.contains("exited with code 3"), "{}", o.dump());
    assert!(o.elapsed < Duration::from_secs(10), "{}", o.dump());
    assert_all_gone(&o.pids(), &o);

    // Programs that never speak PMI: the first non-zero code wins, no abort message needed.
    let o = mpirun_with(&["-n", "2", "sh", "-c", "exit $((PMI_RANK + 4))"], None);
    assert!(o.code == Some(4) || o.code == Some(5), "{}", o.dump());
    let o = mpirun_with(&["-n", "2", "true"], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
}

#[test]
fn killed_rank_ends_the_job_quickly() {
    let o = probe_job(3, &["info", "barrier", "@1:signal=9", "sleep=30"]);
    assert_eq!(o.code, Some(137), "{}", o.dump());
    let pids = o.pids();
    assert_eq!(pids.len(), 3, "{}", o.dump());
    let line = o
        .stderr
        .lines()
        .find(|l| l.contains("killed by signal 9"))
        .unwrap_or_else(|| panic!("{}", o.dump()));
    assert!(line.starts_with("mpirun: rank 1 (pid "), "{line}");
    assert!(
        line.ends_with("killed by signal 9 (Killed); aborting job"),
        "{line}"
    );
    // The launcher's own budget is ~0.5 s grace; leave room for a loaded machine.
    assert!(
        o.elapsed < Duration::from_secs(4),
        "took {:?}\n{}",
        o.elapsed,
        o.dump()
    );
    assert_all_gone(&pids, &o);
}

#[test]
fn rank_that_ignores_sigterm_is_killed_after_the_grace() {
    // A rank that traps SIGTERM survives the first signal; SIGKILL must follow.
    let script = format!(
        "if [ \"$PMI_RANK\" = 1 ]; then sleep 0.5; exit 9; fi; trap '' TERM; exec {PROBE} info sleep=30"
    );
    let o = mpirun_with(&["-n", "2", "sh", "-c", &script], None);
    assert_eq!(o.code, Some(9), "{}", o.dump());
    assert!(o.elapsed < Duration::from_secs(5), "{}", o.dump());
    assert_all_gone(&o.pids(), &o);
}

#[test]
fn abort_reports_code_and_message() {
    let o = probe_job(
        3,
        &[
            "info",
            "barrier",
            "@2:abort=5,something bad happened",
            "sleep=30",
        ],
    );
    assert_eq!(o.code, Some(5), "{}", o.dump());
    assert!(
        o.stderr
            .contains("mpirun: rank 2 called MPI_Abort with code 5: something bad happened"),
        "{}",
        o.dump()
    );
    assert!(o.elapsed < Duration::from_secs(4), "{}", o.dump());
    assert_all_gone(&o.pids(), &o);
}

#[test]
fn exit_without_finalize_while_others_run_aborts() {
    let o = probe_job(
        3,
        &["info", "barrier", "@1:nofinalize", "@1:exit=0", "sleep=30"],
    );
    assert_eq!(o.code, Some(1), "{}", o.dump());
    assert!(o.stderr.contains("rank 1 (pid "), "{}", o.dump());
    assert!(
        o.stderr
            .contains("exited without calling PMI finalize; aborting job"),
        "{}",
        o.dump()
    );
    assert_all_gone(&o.pids(), &o);
}

#[test]
fn stdin_goes_to_rank_0_only() {
    let mut cmd = Command::new(mpirun());
    cmd.args(["-n", "3", PROBE, "cat"]);
    let o = run_cmd(cmd, Some("hello\nworld\n"), Duration::from_secs(30));
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_eq!(
        o.lines("stdin[0]: "),
        vec!["stdin[0]: hello", "stdin[0]: world"],
        "{}",
        o.dump()
    );
    for r in 0..3 {
        assert_eq!(o.lines(&format!("stdin[{r}] eof")).len(), 1, "{}", o.dump());
    }
    assert!(
        o.lines("stdin[1]: ").is_empty() && o.lines("stdin[2]: ").is_empty(),
        "{}",
        o.dump()
    );

    // A large input arrives intact.
    let big: String = (0..20_000).map(|i| format!("line {i}\n")).collect();
    let mut cmd = Command::new(mpirun());
    cmd.args(["-n", "2", PROBE, "cat"]);
    let o = run_cmd(cmd, Some(&big), Duration::from_secs(30));
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let got: Vec<&str> = o
        .lines("stdin[0]: ")
        .iter()
        .map(|l| &l["stdin[0]: ".len()..])
        .collect();
    assert_eq!(got.len(), 20_000);
    assert!(got
        .iter()
        .enumerate()
        .all(|(i, l)| *l == format!("line {i}")));
}

#[test]
fn tagged_output_keeps_lines_whole() {
    let o = mpirun_with(
        &[
            "-n",
            "4",
            "--tag-output",
            PROBE,
            "lines=300,200",
            "stderr=to-stderr",
        ],
        None,
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let mut counts = [0usize; 4];
    for l in o.stdout.lines() {
        let (tag, rest) = l
            .split_once(' ')
            .unwrap_or_else(|| panic!("untagged line {l:?}"));
        let r: usize = tag
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse()
            .unwrap_or_else(|_| panic!("{l:?}"));
        let want_prefix = format!("rank {r} line {} ", counts[r]);
        assert!(
            rest.starts_with(&want_prefix),
            "line {l:?} mixes ranks or is out of order"
        );
        assert_eq!(rest.len(), want_prefix.len() + 200, "{l:?}");
        assert!(
            rest[want_prefix.len()..].bytes().all(|b| b == b'x'),
            "{l:?}"
        );
        counts[r] += 1;
    }
    assert_eq!(counts, [300; 4]);
    for r in 0..4 {
        assert!(
            o.stderr.contains(&format!("[{r}] to-stderr\n")),
            "{}",
            o.dump()
        );
    }
    // A last line without a newline is completed.
    let o = mpirun_with(&["-n", "1", "--prefix-rank", "printf", "a\\nb"], None);
    assert_eq!(o.stdout, "[0] a\n[0] b\n");
    // Unprefixed output passes through byte for byte.
    let o = mpirun_with(&["-n", "1", "printf", "a\\nb"], None);
    assert_eq!(o.stdout, "a\nb");
}

/// Checks that every line of `text` is one whole line `rank R fd FD line I xxx...` of the
/// probe's `pieces` action, in order per rank, `n` per rank.
fn assert_whole_piece_lines(text: &str, fd: u32, ranks: usize, n: usize, len: usize, o: &Outcome) {
    let mut counts = vec![0usize; ranks];
    for l in text.lines() {
        let r: usize = l
            .strip_prefix("rank ")
            .and_then(|r| r.split(' ').next())
            .and_then(|r| r.parse().ok())
            .filter(|&r| r < ranks)
            .unwrap_or_else(|| panic!("line {:.200?} is not a rank's line\n{}", l, o.dump()));
        let want = format!("rank {r} fd {fd} line {} ", counts[r]);
        assert!(
            l.starts_with(&want)
                && l.len() == want.len() + len
                && l[want.len()..].bytes().all(|b| b == b'x'),
            "line {:.300?} is not rank {r}'s whole line {} (lines of ranks mixed)",
            l,
            counts[r]
        );
        counts[r] += 1;
    }
    assert_eq!(counts, vec![n; ranks], "{}", o.dump());
}

#[test]
fn untagged_output_keeps_lines_whole() {
    // Long lines (more than a pipe read's worth per rank at once) in many small writes, on
    // stdout and stderr, from 4 ranks at once.
    let o = mpirun_with(
        &[
            "-n",
            "4",
            PROBE,
            "pieces=40,5000,50,1",
            "pieces=40,3000,30,2",
        ],
        None,
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_whole_piece_lines(&o.stdout, 1, 4, 40, 5000, &o);
    assert_whole_piece_lines(&o.stderr, 2, 4, 40, 3000, &o);
}

#[test]
fn partial_lines_show_after_a_moment_and_are_not_glued() {
    // Rank 0 writes a prompt and waits; rank 1 writes a line meanwhile. The prompt shows
    // before rank 1's line (it is flushed after 100 ms), and rank 1's line starts a line of
    // its own; the rest of rank 0's line follows on a line of its own.
    let script = "if [ \"$PMI_RANK\" = 0 ]; then printf 'prompt> '; sleep 1.6; echo done; \
                  else sleep 0.8; echo other; fi";
    let o = mpirun_with(&["-n", "2", "sh", "-c", script], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_eq!(o.stdout, "prompt> \nother\ndone\n", "{}", o.dump());
    let o = mpirun_with(&["-n", "2", "--tag-output", "sh", "-c", script], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_eq!(
        o.stdout,
        "[0] prompt> \n[1] other\n[0] done\n",
        "{}",
        o.dump()
    );
}

#[test]
fn garbage_pmi_lines_do_not_crash_the_launcher() {
    let o = probe_job(
        2,
        &[
            "raw=this is not pmi",
            "rawbin",
            "rawlong",
            "info",
            "raw=cmd=put key=novalue",
            "raw=cmd=frobnicate",
            "allgather",
        ],
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let replies = o.lines("raw reply[");
    assert_eq!(replies.len(), 10, "{}", o.dump());
    assert!(
        replies.iter().all(|l| l.contains(" rc=-1 ")),
        "{}",
        o.dump()
    );
    assert_eq!(
        o.lines("raw reply[0]: cmd=put_result rc=-1").len(),
        1,
        "{}",
        o.dump()
    );
    assert_eq!(o.lines("allgather ok").len(), 2, "{}", o.dump());
    assert!(
        o.stderr
            .contains("mpirun: warning: rank 0: unknown PMI command 'frobnicate'"),
        "{}",
        o.dump()
    );
}

#[test]
fn sigterm_to_mpirun_ends_the_ranks() {
    for (sig, code) in [(libc::SIGTERM, 128 + 15), (libc::SIGINT, 128 + 2)] {
        let mut cmd = Command::new(mpirun());
        cmd.args(["-n", "3", PROBE, "info", "sleep=30"]);
        cmd.stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn mpirun");
        let mut out = child.stdout.take().expect("piped");
        let mut guard = Guard {
            child: Some(child),
            ranks: Vec::new(),
        };
        // Wait until the three ranks run (their info lines).
        let mut seen = String::new();
        let start = Instant::now();
        while seen.matches("info ").count() < 3 {
            let mut buf = [0u8; 4096];
            let n = out.read(&mut buf).expect("read mpirun stdout");
            assert!(
                n > 0 && start.elapsed() < Duration::from_secs(30),
                "ranks did not start: {seen}"
            );
            seen.push_str(&String::from_utf8_lossy(&buf[..n]));
        }
        let pids: Vec<i32> = seen
            .lines()
            .filter_map(|l| field(l, "pid"))
            .filter_map(|p| p.parse().ok())
            .collect();
        guard.ranks = pids.clone();
        let child = guard.child.as_mut().expect("child");
        // SAFETY: kill has no memory-safety preconditions; the child is ours and not reaped.
        unsafe { libc::kill(child.id() as i32, sig) };
        let t = Instant::now();
        let status = loop {
            if let Some(st) = child.try_wait().expect("try_wait") {
                break st;
            }
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "mpirun ignored signal {sig}"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(code));
        assert!(
            t.elapsed() < Duration::from_secs(4),
            "took {:?}",
            t.elapsed()
        );
        let o = Outcome {
            code: status.code(),
            stdout: seen,
            stderr: String::new(),
            elapsed: t.elapsed(),
        };
        assert_all_gone(&pids, &o);
    }
}

#[test]
fn sigkill_to_mpirun_kills_the_ranks() {
    // The orphaned ranks come to us rather than to a pid 1 that may never reap them (as in
    // containers), so the test leaves no zombies behind.
    // SAFETY: prctl with integer arguments only.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    let mut cmd = Command::new(mpirun());
    cmd.args(["-n", "2", PROBE, "info", "sleep=30"]);
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::null())
        .stdin(Stdio::null());
    let mut child = cmd.spawn().expect("spawn mpirun");
    let mut out = child.stdout.take().expect("piped");
    let mut guard = Guard {
        child: Some(child),
        ranks: Vec::new(),
    };
    let mut seen = String::new();
    while seen.matches("info ").count() < 2 {
        let mut buf = [0u8; 4096];
        let n = out.read(&mut buf).expect("read");
        assert!(n > 0, "ranks did not start: {seen}");
        seen.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    let pids: Vec<i32> = seen
        .lines()
        .filter_map(|l| field(l, "pid"))
        .filter_map(|p| p.parse().ok())
        .collect();
    guard.ranks = pids.clone();
    let child = guard.child.as_mut().expect("child");
    child.kill().expect("SIGKILL mpirun");
    child.wait().expect("reap mpirun");
    let o = Outcome {
        code: None,
        stdout: seen,
        stderr: String::new(),
        elapsed: Duration::ZERO,
    };
    assert_all_gone(&pids, &o);
    for pid in pids {
        let mut status = 0;
        // SAFETY: valid pointer to a local int; the pid is our (adopted) child or not a child.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    }
}

#[test]
fn timeout_kills_the_job() {
    let o = mpirun_with(
        &["--timeout", "1", "-n", "2", PROBE, "info", "sleep=30"],
        None,
    );
    assert_eq!(o.code, Some(124), "{}", o.dump());
    assert!(
        o.stderr
            .contains("mpirun: job timed out after 1 s; aborting job"),
        "{}",
        o.dump()
    );
    assert!(
        o.elapsed >= Duration::from_millis(900) && o.elapsed < Duration::from_secs(5),
        "{}",
        o.dump()
    );
    assert_all_gone(&o.pids(), &o);
}

#[test]
fn shared_memory_leftovers_are_removed() {
    let o = probe_job(3, &["shm", "barrier", "@1:signal=9", "sleep=30"]);
    assert_eq!(o.code, Some(137), "{}", o.dump());
    let paths: Vec<String> = o
        .lines("shm ")
        .iter()
        .map(|l| l["shm ".len()..].to_owned())
        .collect();
    assert!(!paths.is_empty(), "{}", o.dump());
    for p in &paths {
        assert!(p.starts_with("/dev/shm/madmpi-kvs_"), "{p}");
        assert!(!Path::new(p).exists(), "{p} survived the job");
    }
    // Another job's files are left alone.
    let other = format!("/dev/shm/madmpi-kvs_0_{}-test-keep", std::process::id());
    std::fs::write(&other, b"x").expect("write /dev/shm");
    let o = probe_job(1, &["shm"]);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert!(Path::new(&other).exists());
    let _ = std::fs::remove_file(&other);
    assert!(!Path::new(&o.lines("shm ")[0]["shm ".len()..]).exists());
}

#[test]
fn environment_is_passed() {
    let mut cmd = Command::new(mpirun());
    cmd.env("MADMPI_TEST_INHERITED", "yes")
        .env("PMI_SPURIOUS", "outer-launcher");
    cmd.args([
        "-n",
        "2",
        "-x",
        "MADMPI_TEST_X=1",
        "-genv",
        "MADMPI_TEST_G",
        "two words",
        PROBE,
    ]);
    cmd.args([
        "env=MADMPI_TEST_INHERITED",
        "env=MADMPI_TEST_X",
        "env=MADMPI_TEST_G",
        "env=PMI_SPURIOUS",
    ]);
    cmd.args(["env=MPI_LOCALNRANKS", "env=PMI_SIZE", "env=PMI_JOBID"]);
    let o = run_cmd(cmd, None, Duration::from_secs(30));
    assert_eq!(o.code, Some(0), "{}", o.dump());
    for r in 0..2 {
        for want in [
            "MADMPI_TEST_INHERITED=yes",
            "MADMPI_TEST_X=1",
            "MADMPI_TEST_G=two words",
            "PMI_SPURIOUS=unset",
            "MPI_LOCALNRANKS=2",
            "PMI_SIZE=2",
        ] {
            assert!(
                o.stdout.contains(&format!("env[{r}] {want}\n")),
                "{want}\n{}",
                o.dump()
            );
        }
    }
    let mut cmd = Command::new(mpirun());
    cmd.env("MADMPI_TEST_INHERITED", "yes");
    cmd.args([
        "-n",
        "1",
        "-genvnone",
        "-x",
        "MADMPI_TEST_X=1",
        PROBE,
        "env=MADMPI_TEST_INHERITED",
        "env=MADMPI_TEST_X",
    ]);
    let o = run_cmd(cmd, None, Duration::from_secs(30));
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert!(
        o.stdout.contains("env[0] MADMPI_TEST_INHERITED=unset"),
        "{}",
        o.dump()
    );
    assert!(o.stdout.contains("env[0] MADMPI_TEST_X=1"), "{}", o.dump());
}

#[test]
fn pmi_port_mode_works() {
    let o = mpirun_with(
        &["--pmi-port", "-n", "3", PROBE, "info", "allgather", "local"],
        None,
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_eq!(o.lines("allgather ok").len(), 3, "{}", o.dump());
    assert_eq!(
        o.lines("local ")
            .iter()
            .filter(|l| l.ends_with("ranks=0,1,2"))
            .count(),
        3,
        "{}",
        o.dump()
    );
}

#[test]
fn command_line_errors_are_clear() {
    let o = mpirun_with(&["--help"], None);
    assert_eq!(o.code, Some(0));
    assert!(o.stdout.contains("Usage: mpirun"), "{}", o.dump());
    let o = mpirun_with(&["--version"], None);
    assert_eq!(o.code, Some(0));
    assert!(o.stdout.starts_with("mpirun (madmpi) "), "{}", o.dump());
    let o = mpirun_with(&["--frobnicate", "-n", "2", "true"], None);
    assert_eq!(o.code, Some(2));
    assert!(
        o.stderr.contains("unknown option '--frobnicate'"),
        "{}",
        o.dump()
    );
    for opt in ["-N", "--map-by"] {
        let o = mpirun_with(&[opt, "x", "-n", "2", "true"], None);
        assert_eq!(o.code, Some(2), "{}", o.dump());
        assert!(o.stderr.contains("not supported yet"), "{}", o.dump());
    }
    for (args, msg) in [
        (&["--host", "a:0"][..], "not a positive number of slots"),
        (
            &["--hostfile", "/nonexistent/hosts"],
            "cannot read the host file",
        ),
        (&["-ppn", "x"], "positive number of ranks per host"),
    ] {
        let mut a = args.to_vec();
        a.extend(["-n", "2", "true"]);
        let o = mpirun_with(&a, None);
        assert_eq!(o.code, Some(2), "{}", o.dump());
        assert!(o.stderr.contains(msg), "{}", o.dump());
    }
    let o = mpirun_with(&["-n", "2"], None);
    assert!(o.stderr.contains("no program to run"), "{}", o.dump());
    let o = mpirun_with(&["-n", "2", "/nonexistent/program"], None);
    assert_eq!(o.code, Some(127), "{}", o.dump());
    assert!(o.stderr.contains("cannot start rank 0"), "{}", o.dump());
    let o = mpirun_with(&["-wdir", "/", "--oversubscribe", "-n", "1", "pwd"], None);
    assert_eq!(
        (o.code, o.stdout.as_str()),
        (Some(0), "/\n"),
        "{}",
        o.dump()
    );
    // A missing working directory is named as such, not as a missing program.
    let o = mpirun_with(&["-wdir", "/nonexistent/dir", "-n", "1", "true"], None);
    assert_ne!(o.code, Some(0), "{}", o.dump());
    assert!(
        o.stderr
            .contains("cannot change to the working directory /nonexistent/dir"),
        "{}",
        o.dump()
    );
    // A time limit of 0 is none (as MPIEXEC_TIMEOUT=0 in Hydra, --timeout 0 in Open MPI).
    let o = mpirun_with(&["--timeout", "0", "-n", "1", "true"], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    // `--` and the other count spellings.
    let o = mpirun_with(&["-np", "2", "--", "true"], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let o = mpirun_with(&["--n=2", "-c", "3", "sh", "-c", "exit 0"], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
}

// ---- MPMD: several programs in one job ---------------------------------------------------------

/// The `mpmd: role=...` lines of a job, sorted by rank, as (role, rank, size, appnum, arg, var,
/// dir).
fn mpmd_ranks(out: &str) -> Vec<[String; 7]> {
    let mut v: Vec<[String; 7]> = out
        .lines()
        .filter(|l| l.starts_with("mpmd: role="))
        .map(|l| {
            ["role", "rank", "size", "appnum", "arg", "var", "dir"]
                .map(|k| field(l, k).unwrap_or("?").to_owned())
        })
        .collect();
    v.sort_by_key(|f| f[1].parse::<u32>().unwrap_or(u32::MAX));
    v
}

fn mpmd_run(args: &[&OsStr]) -> madmpi_tests::harness::Outcome {
    let mut cmd = Command::new(mpirun());
    cmd.args(args);
    let text: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    run_command(
        cmd,
        &format!("mpirun {}", text.join(" ")),
        Duration::from_secs(60),
    )
}

#[test]
fn mpmd_parts_are_one_job_with_appnums() {
    let a = c_program("launch", "mpmd", &[]);
    let b = c_program("launch", "mpmd_peer", &[]);
    let tmp = std::env::temp_dir();
    let o = mpmd_run(&[
        "-genv".as_ref(),
        "MPMD_VAR".as_ref(),
        "global".as_ref(),
        "-n".as_ref(),
        "1".as_ref(),
        a.as_os_str(),
        "first".as_ref(),
        ":".as_ref(),
        "-n".as_ref(),
        "2".as_ref(),
        "-env".as_ref(),
        "MPMD_VAR".as_ref(),
        "local".as_ref(),
        "-wdir".as_ref(),
        tmp.as_os_str(),
        b.as_os_str(),
        "second".as_ref(),
        ":".as_ref(),
        a.as_os_str(),
    ]);
    assert!(o.success(), "{}", o.context());
    let cwd = std::env::current_dir().expect("cwd");
    let name = |p: &Path| {
        p.file_name()
            .map_or("".into(), |n| n.to_string_lossy().into_owned())
    };
    let (here, there) = (name(&cwd), name(&tmp));
    let want: Vec<[String; 7]> = [
        ["main", "0", "4", "0", "first", "global", here.as_str()],
        ["peer", "1", "4", "1", "second", "local", there.as_str()],
        ["peer", "2", "4", "1", "second", "local", there.as_str()],
        ["main", "3", "4", "2", "-", "global", here.as_str()],
    ]
    .iter()
    .map(|r| r.map(str::to_owned))
    .collect();
    assert_eq!(mpmd_ranks(&o.stdout), want, "{}", o.context());
    assert!(
        o.stdout.contains("mpmd: appnums=0,1,1,2\n"),
        "{}",
        o.context()
    );
    assert!(o.stdout.contains("mpmd: ring ok\n"), "{}", o.context());

    // The same job from a file, in Hydra's and Open MPI's spellings.
    let file = std::env::temp_dir().join(format!("madmpi-mpmd-{}.txt", std::process::id()));
    std::fs::write(
        &file,
        format!(
            "# two programs\n-n 1 {} first\n\n-n 2 -env MPMD_VAR local {} second  # peers\n",
            a.display(),
            b.display()
        ),
    )
    .expect("write the config file");
    for opt in ["-configfile", "--app"] {
        let o = mpmd_run(&[opt.as_ref(), file.as_os_str()]);
        assert!(o.success(), "{}", o.context());
        let got: Vec<(String, String, String, String)> = mpmd_ranks(&o.stdout)
            .into_iter()
            .map(|f| (f[0].clone(), f[3].clone(), f[4].clone(), f[5].clone()))
            .collect();
        let want: Vec<(String, String, String, String)> = [
            ("main", "0", "first", "-"),
            ("peer", "1", "second", "local"),
            ("peer", "1", "second", "local"),
        ]
        .iter()
        .map(|(a, b, c, d)| (a.to_string(), b.to_string(), c.to_string(), d.to_string()))
        .collect();
        assert_eq!(got, want, "{opt}: {}", o.context());
        assert!(o.stdout.contains("mpmd: ring ok\n"), "{}", o.context());
    }
    let _ = std::fs::remove_file(&file);

    // A singleton was started by no launcher: MPI_APPNUM is not set (as in MPICH).
    let mut cmd = Command::new(&a);
    for k in ["PMI_FD", "PMI_PORT", "PMI_ID", "PMI_RANK", "PMI_SIZE"] {
        cmd.env_remove(k);
    }
    let o = run_command(cmd, "mpmd (singleton)", Duration::from_secs(30));
    assert!(o.success(), "{}", o.context());
    assert_eq!(mpmd_ranks(&o.stdout)[0][3], "unset", "{}", o.context());
}

#[test]
fn mpmd_command_line_errors_are_clear() {
    for (args, msg) in [
        (
            &["-n", "1", "true", ":"][..],
            "part 2 of the command line (after ':' number 1) has no program",
        ),
        (&["true", ":", ":", "true"], "part 2 of the command line"),
        (&["true", ":", "-n", "2"], "part 2 of the command line"),
        (
            &["-configfile", "/nonexistent/mpmd"],
            "cannot read the -configfile file /nonexistent/mpmd",
        ),
    ] {
        let o = mpirun_with(args, None);
        assert_eq!(o.code, Some(2), "{args:?}: {}", o.dump());
        assert!(o.stderr.contains(msg), "{args:?}: {}", o.dump());
    }
    // Without -n, a part has one rank (the hosts' slots when hosts are given), as in Hydra.
    let o = mpirun_with(
        &[
            "sh",
            "-c",
            "echo a$PMI_RANK",
            ":",
            "-n",
            "2",
            "sh",
            "-c",
            "echo b$PMI_RANK",
        ],
        None,
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let mut lines: Vec<&str> = o.stdout.lines().collect();
    lines.sort();
    assert_eq!(lines, ["a0", "b1", "b2"], "{}", o.dump());
}

// ---- against MPICH: our client under Hydra, MPICH programs under our launcher ----------------

fn hydra() -> Option<&'static str> {
    let p = "/usr/bin/mpiexec.hydra";
    if Path::new(p).exists() {
        Some(p)
    } else {
        println!("SKIP: {p} not installed (Debian package mpich); client compatibility with Hydra not checked");
        None
    }
}

#[test]
fn probe_runs_under_mpich_hydra() {
    let Some(hydra) = hydra() else { return };
    for extra in [&[][..], &["-pmi-port"]] {
        let mut cmd = Command::new(hydra);
        cmd.args(extra)
            .args(["-n", "2", PROBE, "info", "allgather", "local", "bigput"]);
        let o = run_cmd(cmd, None, Duration::from_secs(60));
        assert_eq!(o.code, Some(0), "{extra:?}\n{}", o.dump());
        let infos = o.lines("info ");
        assert_eq!(infos.len(), 2, "{}", o.dump());
        let kvs = field(infos[0], "kvsname").unwrap();
        assert!(infos
            .iter()
            .all(|l| field(l, "kvsname") == Some(kvs) && field(l, "size") == Some("2")));
        assert_eq!(o.lines("allgather ok").len(), 2, "{}", o.dump());
        assert_eq!(
            o.lines("local ")
                .iter()
                .filter(|l| l.ends_with("ranks=0,1"))
                .count(),
            2,
            "{}",
            o.dump()
        );
        assert_eq!(o.lines("bigput rejected").len(), 2, "{}", o.dump());
    }
    // Abort through Hydra ends the job with the code.
    let mut cmd = Command::new(hydra);
    cmd.args([
        "-n",
        "2",
        PROBE,
        "info",
        "barrier",
        "@1:abort=6,bye",
        "sleep=30",
    ]);
    let o = run_cmd(cmd, None, Duration::from_secs(60));
    assert_eq!(o.code, Some(6), "{}", o.dump());
    assert!(o.elapsed < Duration::from_secs(20), "{}", o.dump());
}

const MPICH_PROGRAM: &str = r#"
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(int argc, char **argv) {
    int rank, size, sum = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    MPI_Allreduce(&rank, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    printf("mpich rank %d of %d sum %d\n", rank, size, sum);
    fflush(stdout);
    if (argc > 1 && rank == atoi(argv[1])) MPI_Abort(MPI_COMM_WORLD, 42);
    if (argc > 1) sleep(30);
    MPI_Finalize();
    return 0;
}
"#;

#[test]
fn mpich_programs_run_under_our_launcher() {
    let cc = "/usr/bin/mpicc.mpich";
    if !Path::new(cc).exists() {
        println!(
            "SKIP: {cc} not installed; server compatibility with MPICH's PMI client not checked"
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("madmpi-launcher-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("mpich_prog.c");
    let exe = dir.join("mpich_prog");
    std::fs::write(&src, MPICH_PROGRAM).expect("write source");
    let built = Command::new(cc)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run mpicc.mpich");
    if !built.status.success() {
        println!(
            "SKIP: mpicc.mpich failed: {}",
            String::from_utf8_lossy(&built.stderr)
        );
        return;
    }
    let exe_s = exe.to_str().expect("utf-8 temp path");
    let o = mpirun_with(&["-n", "3", exe_s], None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    assert_eq!(
        o.lines("mpich rank ")
            .iter()
            .filter(|l| l.ends_with("of 3 sum 3"))
            .count(),
        3,
        "{}",
        o.dump()
    );
    let o = mpirun_with(&["-n", "3", exe_s, "1"], None);
    assert_eq!(o.code, Some(42), "{}", o.dump());
    assert!(
        o.stderr
            .contains("mpirun: rank 1 called MPI_Abort with code 42"),
        "{}",
        o.dump()
    );
    assert!(o.elapsed < Duration::from_secs(10), "{}", o.dump());
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- the compiler wrappers ---------------------------------------------------------------------

fn wrapper(name: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(repo_root().join("bin").join(name));
    cmd.args(args)
        .env_remove("MPICH_CC")
        .env_remove("OMPI_CC")
        .env_remove("MPI_CC");
    cmd.env_remove("MPICH_CXX")
        .env_remove("OMPI_CXX")
        .env_remove("MPI_CXX");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("bin/{name}: {e}"));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).trim_end().to_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn mpicc_show_options() {
    let root = repo_root().canonicalize().expect("repo root");
    let root = root.display();
    let inc = format!("-I{root}/include");
    let link = format!("-L{root}/lib -Wl,-rpath,{root}/lib -lmadmpi");
    let show = |args: &[&str], env: &[(&str, &str)]| {
        let (code, out, err) = wrapper("mpicc", args, env);
        assert_eq!(code, 0, "{args:?}: {err}");
        out
    };
    assert_eq!(show(&["-show"], &[]), format!("cc {inc} {link}"));
    assert_eq!(show(&["-showme"], &[]), format!("cc {inc} {link}"));
    assert_eq!(
        show(&["-show", "hello.c", "-o", "hello"], &[]),
        format!("cc hello.c -o hello {inc} {link}")
    );
    assert_eq!(
        show(&["-show", "-c", "hello.c"], &[]),
        format!("cc -c hello.c {inc}")
    );
    assert_eq!(show(&["-showme:compile"], &[]), inc);
    assert_eq!(show(&["-showme:link"], &[]), link);
    assert_eq!(show(&["-showme:command"], &[]), "cc");
    assert_eq!(show(&["-showme:incdirs"], &[]), format!("{root}/include"));
    assert_eq!(show(&["-showme:libdirs"], &[]), format!("{root}/lib"));
    assert_eq!(show(&["-showme:libs"], &[]), "madmpi");
    assert_eq!(show(&["-compile-info"], &[]), format!("cc {inc}"));
    assert_eq!(show(&["-link-info"], &[]), format!("cc {inc} {link}"));
    assert_eq!(
        show(&["-show"], &[("MPICH_CC", "gcc")]),
        format!("gcc {inc} {link}")
    );
    assert_eq!(
        show(&["-show"], &[("OMPI_CC", "clang")]),
        format!("clang {inc} {link}")
    );
    assert_eq!(
        show(&["-show"], &[("MPI_CC", "tcc")]),
        format!("tcc {inc} {link}")
    );
    assert_eq!(
        show(&["-cc=gcc-12", "-show"], &[]),
        format!("gcc-12 {inc} {link}")
    );
    // Two dashes, as Open MPI's documentation and Meson spell them.
    for (args, want) in [
        ("--showme:compile", inc.clone()),
        ("--showme:link", link.clone()),
        ("--showme:incdirs", format!("{root}/include")),
        ("--showme:libdirs", format!("{root}/lib")),
        ("--showme:libs", "madmpi".to_owned()),
        ("--showme", format!("cc {inc} {link}")),
        ("--show", format!("cc {inc} {link}")),
    ] {
        assert_eq!(show(&[args], &[]), want, "{args}");
    }
    for args in ["--showme:version", "-showme:version"] {
        let v = show(&[args], &[]);
        // Meson takes the version from the first 'N.N.N' of this line.
        assert!(
            v.starts_with("mpicc: madmpi ")
                && v.split(' ')
                    .nth(2)
                    .is_some_and(|w| w.split('.').count() == 3),
            "{args}: {v}"
        );
    }
    let (code, _, err) = wrapper("mpicc", &["-showme:bogus"], &[]);
    assert_ne!(code, 0);
    assert!(err.contains("-showme:bogus"), "{err}");

    let (code, out, err) = wrapper("mpicxx", &["-show", "x.cc"], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, format!("c++ x.cc {inc} {link}"));
    let (_, out, _) = wrapper("mpicxx", &["-show"], &[("MPICH_CXX", "g++")]);
    assert_eq!(out, format!("g++ {inc} {link}"));
    let (_, out, _) = wrapper("mpicxx", &["-show"], &[("MPICH_CC", "gcc")]);
    assert!(
        out.starts_with("c++ "),
        "mpicxx must not use the C compiler variables: {out}"
    );

    // Through a symlink from elsewhere, the prefix is still the repository's.
    let dir = std::env::temp_dir().join(format!("madmpi-mpicc-link-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let link_path = dir.join("mpicc");
    let _ = std::fs::remove_file(&link_path);
    std::os::unix::fs::symlink(repo_root().join("bin/mpicc"), &link_path).expect("symlink");
    let out = Command::new(&link_path)
        .arg("-showme:incdirs")
        .output()
        .expect("run via symlink");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        format!("{root}/include")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Whether `tool` is on PATH (else prints why the test is skipped).
fn have_tool(tool: &str, test: &str) -> bool {
    let found = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(tool).is_file()));
    if !found {
        println!("SKIP {test}: {tool} is not installed");
    }
    found
}

#[test]
fn pkg_config_finds_madmpi_under_mpi_names() {
    if !have_tool("pkg-config", "pkg_config_finds_madmpi_under_mpi_names") {
        return;
    }
    let root = repo_root();
    if !root.join("lib/pkgconfig/madmpi.pc").exists() {
        println!("SKIP: lib/pkgconfig is not built (run make)");
        return;
    }
    for name in ["madmpi", "mpi", "mpi-c", "ompi-c"] {
        let out = Command::new("pkg-config")
            .args(["--cflags", "--libs", name])
            .env("PKG_CONFIG_PATH", root.join("lib/pkgconfig"))
            .output()
            .expect("run pkg-config");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "pkg-config {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        // The rpath lets cargo/rsmpi-built programs run without LD_LIBRARY_PATH.
        for want in ["-lmadmpi", "-Wl,-rpath,", "/include"] {
            assert!(text.contains(want), "pkg-config {name}: {text}");
        }
    }
}

#[test]
fn cmake_find_mpi_uses_our_wrappers() {
    let test = "cmake_find_mpi_uses_our_wrappers";
    if !have_tool("cmake", test) {
        return;
    }
    let root = repo_root().canonicalize().expect("repo root");
    if !root.join("lib/libmadmpi.so").exists() || !root.join("bin/mpiexec").exists() {
        println!("SKIP {test}: the build tree is not built (run make)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("madmpi-cmake-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("build")).expect("temp dir");
    std::fs::write(
        dir.join("CMakeLists.txt"),
        "cmake_minimum_required(VERSION 3.10)\nproject(t C)\nfind_package(MPI REQUIRED COMPONENTS C)\n\
         add_executable(t t.c)\ntarget_link_libraries(t MPI::MPI_C)\n\
         file(WRITE ${CMAKE_BINARY_DIR}/found.txt \"${MPI_C_COMPILER}\\n${MPIEXEC_EXECUTABLE}\\n\")\n",
    )
    .expect("write CMakeLists.txt");
    std::fs::write(
        dir.join("t.c"),
        "#include <mpi.h>\n#include <stdio.h>\nint main(int argc, char **argv) { int r, n; char v[MPI_MAX_LIBRARY_VERSION_STRING]; \
         MPI_Init(&argc, &argv); MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n); \
         MPI_Get_library_version(v, &n); MPI_Comm_size(MPI_COMM_WORLD, &n); \
         printf(\"cmake rank %d of %d: %.6s\\n\", r, n, v); MPI_Finalize(); return 0; }\n",
    )
    .expect("write t.c");
    let build = dir.join("build");
    // MPI_HOME: FindMPI looks for mpiexec there first, then for the wrappers next to it.
    let run = |args: &[&OsStr]| {
        let out = Command::new("cmake")
            .args(args)
            .current_dir(&build)
            .output()
            .expect("run cmake");
        assert!(
            out.status.success(),
            "cmake {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    let home = format!("-DMPI_HOME={}", root.display());
    let cc = format!("-DMPI_C_COMPILER={}", root.join("bin/mpicc").display());
    run(&[home.as_ref(), cc.as_ref(), dir.as_os_str()]);
    run(&["--build".as_ref(), ".".as_ref()]);
    let found = std::fs::read_to_string(build.join("found.txt")).expect("found.txt");
    assert_eq!(
        found,
        format!(
            "{}\n{}\n",
            root.join("bin/mpicc").display(),
            root.join("bin/mpiexec").display()
        )
    );
    let o = mpirun_with(
        &["-n", "2", build.join("t").to_str().expect("utf-8 path")],
        None,
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let mut lines: Vec<&str> = o.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["cmake rank 0 of 2: madmpi", "cmake rank 1 of 2: madmpi"],
        "{}",
        o.dump()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Meson's `dependency('mpi', language: 'c')` asks pkg-config for `ompi-c` first: with our
/// `lib/pkgconfig` on `PKG_CONFIG_PATH` it finds madmpi (the alias), even where another MPI's
/// `.pc` files are installed, and the program runs under our mpirun.
#[test]
fn meson_dependency_mpi_finds_madmpi() {
    let test = "meson_dependency_mpi_finds_madmpi";
    if !have_tool("meson", test) || !have_tool("ninja", test) || !have_tool("pkg-config", test) {
        return;
    }
    let root = repo_root().canonicalize().expect("repo root");
    if !root.join("lib/libmadmpi.so").exists() || !root.join("lib/pkgconfig/ompi-c.pc").exists() {
        println!("SKIP {test}: the build tree is not built (run make)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("madmpi-meson-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(
        dir.join("meson.build"),
        "project('t', 'c')\nmpi = dependency('mpi', language: 'c')\n\
         executable('t', 't.c', dependencies: mpi)\n",
    )
    .expect("write meson.build");
    std::fs::write(
        dir.join("t.c"),
        "#include <mpi.h>\n#include <stdio.h>\nint main(int argc, char **argv) { int r, n, l; \
         char v[MPI_MAX_LIBRARY_VERSION_STRING]; MPI_Init(&argc, &argv); \
         MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n); \
         MPI_Get_library_version(v, &l); printf(\"meson rank %d of %d: %.6s\\n\", r, n, v); \
         MPI_Finalize(); return 0; }\n",
    )
    .expect("write t.c");
    let run = |prog: &str, args: &[&str]| {
        let out = Command::new(prog)
            .args(args)
            .current_dir(&dir)
            .env("PKG_CONFIG_PATH", root.join("lib/pkgconfig"))
            .output()
            .unwrap_or_else(|e| panic!("run {prog}: {e}"));
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{prog} {args:?}:\n{text}");
        text
    };
    let setup = run("meson", &["setup", "build"]);
    assert!(
        setup.contains("Run-time dependency MPI for c found: YES"),
        "meson setup:\n{setup}"
    );
    run("ninja", &["-C", "build"]);
    let o = mpirun_with(
        &["-n", "2", dir.join("build/t").to_str().expect("utf-8 path")],
        None,
    );
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let mut lines: Vec<&str> = o.stdout.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["meson rank 0 of 2: madmpi", "meson rank 1 of 2: madmpi"],
        "{}",
        o.dump()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn mpicc_compiles_against_mpi_h() {
    let root = repo_root();
    if !root.join("include/mpi.h").exists() {
        println!("SKIP: include/mpi.h is not generated yet; compiling with bin/mpicc not checked");
        return;
    }
    let dir = std::env::temp_dir().join(format!("madmpi-mpicc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let src = dir.join("t.c");
    std::fs::write(
        &src,
        "#include <mpi.h>\nint main(int argc, char **argv) { MPI_Init(&argc, &argv); MPI_Finalize(); return 0; }\n",
    )
    .expect("write");
    let obj = dir.join("t.o");
    let (code, _, err) = wrapper(
        "mpicc",
        &["-c", src.to_str().unwrap(), "-o", obj.to_str().unwrap()],
        &[],
    );
    assert_eq!(code, 0, "mpicc -c failed: {err}");
    assert!(obj.exists());
    if !root.join("lib/libmadmpi.so").exists() {
        println!("SKIP: lib/libmadmpi.so not built (run make); linking with bin/mpicc not checked");
    } else {
        let exe = dir.join("t");
        let (code, _, err) = wrapper(
            "mpicc",
            &[obj.to_str().unwrap(), "-o", exe.to_str().unwrap()],
            &[],
        );
        assert_eq!(code, 0, "mpicc link failed: {err}");
        assert!(exe.exists());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CPUs this test process may use (mpirun inherits them).
fn own_cpus() -> String {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .expect("Cpus_allowed_list")
        .trim()
        .to_string()
}

/// `rank cpus bound host_cpus` of every rank of `mpirun ARGS sh -c …`, sorted by rank.
fn affinities(args: &[&str]) -> Vec<(u32, String, String, String)> {
    let script = "echo \"$PMI_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2) \
                  ${MADMPI_BOUND_CPU:-none} ${MADMPI_HOST_CPUS:-none}\"";
    let mut a: Vec<&str> = args.to_vec();
    a.extend(["sh", "-c", script]);
    let o = mpirun_with(&a, None);
    assert_eq!(o.code, Some(0), "{}", o.dump());
    let mut v: Vec<(u32, String, String, String)> = o
        .stdout
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 4, "{l:?}\n{}", o.dump());
            (
                f[0].parse().expect("rank"),
                f[1].into(),
                f[2].into(),
                f[3].into(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn ranks_are_bound_to_cpus_when_there_are_enough() {
    let cpus = own_cpu_list();
    let n = cpus.len();
    // As many ranks as CPUs: one CPU each, all different, the k-th allowed CPU for rank k.
    let v = affinities(&["-n", &n.to_string()]);
    assert_eq!(v.len(), n);
    for (k, (rank, list, bound, host)) in v.iter().enumerate() {
        assert_eq!(*rank as usize, k);
        assert_eq!(list, &cpus[k].to_string(), "rank {k} allowed {list}");
        assert_eq!(bound, &cpus[k].to_string());
        assert_eq!(host, &n.to_string());
    }
    // More ranks than CPUs: nobody is bound (by default), everybody may use them all.
    let all = own_cpus();
    for (_, list, bound, _) in affinities(&["-n", &(n + 1).to_string()]) {
        assert_eq!(list, all);
        assert_eq!(bound, "none");
    }
    // --bind-to none, and --bind-to core with more ranks than CPUs (round robin).
    for (_, list, bound, _) in affinities(&["--bind-to", "none", "-n", &n.to_string()]) {
        assert_eq!((list.as_str(), bound.as_str()), (all.as_str(), "none"));
    }
    for (rank, list, _, _) in affinities(&["--bind-to", "core", "-n", &(n + 1).to_string()]) {
        assert_eq!(list, cpus[rank as usize % n].to_string());
    }
    // A bad value is a command-line error.
    let o = mpirun_with(&["--bind-to", "socket", "-n", "1", "true"], None);
    assert_eq!(o.code, Some(2), "{}", o.dump());
    assert!(o.stderr.contains("--bind-to socket"), "{}", o.dump());
}

/// The CPUs of `Cpus_allowed_list` (ranges expanded).
fn own_cpu_list() -> Vec<usize> {
    own_cpus()
        .split(',')
        .flat_map(|r| match r.split_once('-') {
            Some((a, b)) => (a.parse::<usize>().unwrap()..=b.parse().unwrap()).collect(),
            None => vec![r.parse().unwrap()],
        })
        .collect()
}
