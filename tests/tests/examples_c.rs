//! The C examples (`examples-c/*.c`) built with the repository's `bin/mpicc`
//! and run under `bin/mpirun -n K` for K = 1..=4; each must exit 0 and print
//! what it promises. Also: every C source of `examples-c/` and `bench/c/`
//! compiles with `-std=c99 -Wall -Wextra -Werror` at -O0, -O2 and -O3, and
//! the examples' Makefile works.
//!
//! Building, compiling and running go through `madmpi_tests::harness` (`make`
//! once per test process under a shared lock; a failed build fails the tests,
//! it does not skip them).
//!
//! Overrides, to check these tests against another MPI:
//!   MADMPI_TEST_MPICC="mpicc.mpich"  MADMPI_TEST_MPIRUN="mpiexec.mpich"
//!   MADMPI_TEST_MPIRUN="mpirun.openmpi --oversubscribe --allow-run-as-root"
//! (whitespace-separated words; the launcher gets `-n K prog args` appended).

use std::path::PathBuf;
use std::process::{Command, Stdio};

use madmpi_tests::harness::{compile, repo, scratch, toolchain, Job, Outcome};

const EXAMPLES: [&str; 5] = ["hello", "ring", "pingpong", "probe", "nonblocking"];

fn build_example(name: &str) -> PathBuf {
    compile(
        &repo().join("examples-c").join(format!("{name}.c")),
        &["-O2"],
    )
}

/// `what`, then the job's command, exit and output tails.
fn ctx(o: &Outcome, what: &str) -> String {
    format!("{what}: {}", o.context())
}

/// Run example `name` with `args` on `n` ranks: it must succeed and print
/// `<name>: OK (<n> ranks)`.
fn run_ok(name: &str, n: usize, args: &[&str]) -> Outcome {
    let o = Job::new(&build_example(name), n).args(args).run();
    assert!(
        o.success(),
        "{}",
        ctx(&o, &format!("{name} on {n} rank(s)"))
    );
    let ok_line = format!("{name}: OK ({n} ranks)");
    assert!(
        o.stdout.lines().any(|l| l.trim() == ok_line),
        "{}",
        ctx(
            &o,
            &format!("{name} on {n} rank(s) did not print `{ok_line}`")
        )
    );
    o
}

fn count_lines(text: &str, pred: impl Fn(&str) -> bool) -> usize {
    text.lines().filter(|l| pred(l)).count()
}

#[test]
fn hello() {
    for n in 1..=4 {
        let r = run_ok("hello", n, &[]);
        for rank in 0..n {
            let prefix = format!("hello from rank {rank} of {n} on ");
            assert_eq!(
                count_lines(&r.stdout, |l| l.starts_with(&prefix)),
                1,
                "{}",
                ctx(&r, &format!("rank {rank} must greet exactly once"))
            );
        }
    }
}

#[test]
fn ring() {
    for n in 1..=4 {
        let r = run_ok("ring", n, &[]);
        let want = format!("ring: token {} after 10 laps over {n} ranks", 10 * n);
        assert!(r.stdout.contains(&want), "{}", ctx(&r, &want));
        // Another lap count, to show the count is not hard-wired.
        let r = run_ok("ring", n, &["3"]);
        let want = format!("ring: token {} after 3 laps over {n} ranks", 3 * n);
        assert!(r.stdout.contains(&want), "{}", ctx(&r, &want));
    }
}

#[test]
fn pingpong() {
    for n in 1..=4 {
        let r = run_ok("pingpong", n, &["65536"]);
        if n == 1 {
            assert!(
                r.stdout.contains("needs at least 2 ranks"),
                "{}",
                ctx(&r, "note")
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
        assert_eq!(rows.len(), 18, "{}", ctx(&r, "18 size rows"));
        assert_eq!(rows[0][0], 0.0);
        assert_eq!(rows[17][0], 65536.0);
        for row in &rows {
            assert!(
                row[2] > 0.0 && row[2].is_finite(),
                "{}",
                ctx(&r, "latency > 0")
            );
        }
    }
}

#[test]
fn probe() {
    for n in 1..=4 {
        let r = run_ok("probe", n, &[]);
        for phase in ["Probe+Recv", "Mprobe+Mrecv", "Iprobe+Recv", "Improbe+Mrecv"] {
            let want = format!("{} messages per rank", 6 * n);
            assert!(
                r.stdout
                    .lines()
                    .any(|l| l.contains(phase) && l.contains(&want)),
                "{}",
                ctx(&r, &format!("{phase}: {want}"))
            );
        }
    }
}

#[test]
fn nonblocking() {
    for n in 1..=4 {
        let r = run_ok("nonblocking", n, &[]);
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
                ctx(&r, pattern)
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
    for src in &sources {
        for opt in ["-O0", "-O2", "-O3"] {
            compile(src, &[opt, "-c", "-I", &include]);
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
