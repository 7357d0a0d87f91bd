//! Smoke test of the benchmark programs (`bench/c/*.c`): each builds with
//! `-std=c99 -Wall -Wextra -Werror` using the repository's `bin/mpicc`, runs
//! on 2 ranks under `bin/mpirun` for a tiny size range, and prints `RESULT`
//! lines in the documented format (bench/README.md) with the expected modes.
//!
//! Same build-once logic and overrides as `examples_c.rs`
//! (`MADMPI_TEST_MPICC`, `MADMPI_TEST_MPIRUN`); helpers are duplicated
//! because each integration test is its own crate.
//!
//! `runner_*` runs the benchmark runner (`madmpi-bench`, built by `make`) on
//! tiny inputs: a TCP ping-pong with ours only, where it must write the
//! figures (PNG and SVG) and measure and report the raw TCP baseline
//! (`bench/c/rawtcp.c`); and ours with both packet schedulers over shared
//! memory, where `ours (aggreg)` must run where the scheduler matters, show
//! up in the scheduler section and not count as a peer.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use madmpi_tests::harness::{build_once, compile, repo, run_command, scratch, Job, Outcome};

const RUN_TIMEOUT: Duration = Duration::from_secs(120);

/// `what`, then the command, its exit and output tails.
fn ctx(o: &Outcome, what: &str) -> String {
    format!("{what}: {}", o.context())
}

/// Compile `bench/c/<bench>.c` with the toolchain under test.
fn bench_program(bench: &str) -> PathBuf {
    let root = repo();
    let include = root.join("bench/c").display().to_string();
    compile(
        &root.join("bench/c").join(format!("{bench}.c")),
        &["-O2", "-I", &include],
    )
}

/// Run `exe args` directly (not under mpirun), with the time limit.
fn run_plain(exe: &Path, args: &[String]) -> Outcome {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    run_command(
        cmd,
        &format!("{} {}", exe.display(), args.join(" ")),
        RUN_TIMEOUT,
    )
}

/// Run the benchmark runner with `args` (and `env`), with a time limit of its own.
fn run_runner(args: &[&str], out: &Path, env: &[(&str, &str)]) -> Outcome {
    let mut cmd = Command::new(runner_exe());
    cmd.args(args).arg("--out").arg(out);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_command(
        cmd,
        &format!("madmpi-bench {}", args.join(" ")),
        Duration::from_secs(600),
    )
}

/// The release build of the benchmark runner (`make` builds every binary
/// of the workspace), in cargo's target directory.
fn runner_exe() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .map(|d| if d.is_absolute() { d } else { repo().join(d) })
        .unwrap_or_else(|| repo().join("target"))
        .join("release/madmpi-bench")
}

/// One parsed `RESULT` line.
#[derive(Debug)]
struct Measured {
    fields: Vec<(String, String)>,
}

impl Measured {
    fn get(&self, k: &str) -> &str {
        self.fields
            .iter()
            .find(|(key, _)| key == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("RESULT line without `{k}`: {:?}", self.fields))
    }

    fn num(&self, k: &str) -> f64 {
        let v = self.get(k);
        let x: f64 = v
            .parse()
            .unwrap_or_else(|_| panic!("`{k}={v}` is not a number"));
        assert!(x.is_finite(), "`{k}={v}` is not finite");
        x
    }
}

/// Parses and validates every `RESULT` line of `stdout`.
fn results(bench: &str, stdout: &str) -> Vec<Measured> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let Some(rest) = line.strip_prefix("RESULT ") else {
            continue;
        };
        let fields: Vec<(String, String)> = rest
            .split_whitespace()
            .map(|w| {
                let (k, v) = w
                    .split_once('=')
                    .unwrap_or_else(|| panic!("`{w}` is not key=value in: {line}"));
                (k.to_string(), v.to_string())
            })
            .collect();
        let r = Measured { fields };
        assert_eq!(r.get("bench"), bench, "{line}");
        assert_eq!(r.num("ranks"), 2.0, "{line}");
        let size = r.num("size");
        assert!(size >= 0.0 && size.fract() == 0.0, "{line}");
        assert!(r.num("iters") >= 1.0, "{line}");
        assert!(r.num("reps") >= 1.0, "{line}");
        assert!(!r.get("metric").is_empty(), "{line}");
        assert!(matches!(r.get("better"), "lower" | "higher"), "{line}");
        let (min, med, max) = (r.num("min"), r.num("med"), r.num("max"));
        assert!(min <= med && med <= max, "min <= med <= max: {line}");
        assert!(min >= 0.0, "{line}");
        if r.get("metric") != "overlap_pct" {
            assert!(min > 0.0, "a time or rate must be positive: {line}");
        } else {
            assert!(max <= 100.0, "{line}");
        }
        out.push(r);
    }
    out
}

/// Builds `bench` warning-free, runs it on 2 ranks with `args`, and checks
/// that every mode in `modes` reported with the given metric.
fn smoke(bench: &str, args: &[&str], modes: &[(&str, &str)]) {
    let exe = bench_program(bench);
    let r = Job::new(&exe, 2).args(args).run();
    assert!(r.success(), "{}", ctx(&r, &format!("{bench} on 2 ranks")));
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with(&format!("# {bench} ranks=2"))),
        "{}",
        ctx(&r, "header comment line")
    );
    assert!(
        r.stdout.lines().any(|l| l.trim_end() == "# done"),
        "{}",
        ctx(&r, "the final `# done` line")
    );
    let res = results(bench, &r.stdout);
    for (mode, metric) in modes {
        assert!(
            res.iter()
                .any(|x| x.get("mode") == *mode && x.get("metric") == *metric),
            "{}",
            ctx(&r, &format!("no RESULT with mode={mode} metric={metric}"))
        );
    }
}

const TINY: [&str; 4] = ["--reps", "2", "--iters", "3"];

fn args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    TINY.iter().copied().chain(extra.iter().copied()).collect()
}

#[test]
fn pingpong() {
    smoke(
        "pingpong",
        &args(&["--max", "1024", "--window", "8"]),
        &[
            ("lat", "lat_us"),
            ("lat", "bw_MBps"),
            ("bw", "bw_MBps"),
            ("bibw", "bw_MBps"),
        ],
    );
}

#[test]
fn barrier() {
    smoke("barrier", &args(&[]), &[("barrier", "lat_us")]);
}

#[test]
fn msgrate() {
    smoke(
        "msgrate",
        &args(&["--max", "8", "--window", "8"]),
        &[("uni", "msg_rate_M")],
    );
}

#[test]
fn multiseg() {
    smoke(
        "multiseg",
        &args(&["--max", "64"]),
        &[("multiseg", "lat_us"), ("contig", "lat_us")],
    );
}

#[test]
fn indexed() {
    // --quick: the 64 B + 256 KiB indexed type, 2 vector and 2 struct sizes.
    smoke(
        "indexed",
        &args(&["--quick"]),
        &[
            ("indexed", "lat_us"),
            ("indexed_contig", "lat_us"),
            ("vector", "lat_us"),
            ("struct", "bw_MBps"),
        ],
    );
}

#[test]
fn overlap() {
    smoke(
        "overlap",
        &args(&["--quick"]),
        &[("nocall", "overlap_pct"), ("test", "overlap_pct")],
    );
}

#[test]
fn coll() {
    smoke(
        "coll",
        &args(&["--max", "1024"]),
        &[
            ("allreduce", "lat_us"),
            ("bcast", "lat_us"),
            ("alltoall", "lat_us"),
            ("barrier", "lat_us"),
        ],
    );
}

#[test]
fn ringbcast() {
    smoke(
        "ringbcast",
        &args(&["--max", "1024"]),
        &[("iprobe", "lat_us"), ("test", "lat_us")],
    );
}

#[test]
fn io() {
    smoke(
        "io",
        &args(&["--quick"]),
        &[("write", "bw_MBps"), ("read", "bw_MBps")],
    );
}

/// A bad option is refused with a usage message, not ignored.
#[test]
fn bad_option_is_refused() {
    let exe = bench_program("barrier");
    let r = Job::new(&exe, 2).args(&["--mode", "nonsense"]).run();
    assert!(!r.success(), "{}", ctx(&r, "--mode nonsense must fail"));
    assert!(
        r.stderr.contains("usage:"),
        "{}",
        ctx(&r, "usage on stderr")
    );
}

/// The raw TCP baseline (not an MPI program) builds warning-free with the
/// plain C compiler and reports `pingpong` `lat` figures in the format of
/// the MPI benchmarks, 0 B left out, ending with `# done`.
#[test]
fn rawtcp() {
    raw_baseline("rawtcp", "library=raw TCP", &[]);
}

/// The fi_pingpong baseline of ofi mode (runs libfabric's `fi_pingpong` over
/// `tcp;ofi_rxm`, installed by scripts/install-deps.sh), likewise.
#[test]
fn fipingpong() {
    raw_baseline(
        "fipingpong",
        "library=fi_pingpong",
        &[("MADMPI_OFI_PROVIDER", "tcp;ofi_rxm")],
    );
}

/// Builds `bench/c/<name>.c` with the plain C compiler, warning-free, and
/// checks its output: the header naming the library (`library`), `lat_us`
/// and `bw_MBps` for 1 .. 64 B, `# done` last, and a usage error on a bad
/// option.
fn raw_baseline(name: &str, library: &str, env: &[(&str, &str)]) {
    let root = repo();
    let exe = scratch().join("plain").join(name);
    std::fs::create_dir_all(exe.parent().expect("dir")).expect("mkdir");
    let cc = std::env::var("CC")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    let src = root.join(format!("bench/c/{name}.c"));
    let o = Command::new(&cc)
        .args(["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror"])
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cc}: {e}"));
    assert!(
        o.status.success(),
        "{cc} {} failed ({}):\n{}",
        src.display(),
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    let argv: Vec<String> = args(&["--max", "64"])
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut cmd = Command::new(&exe);
    cmd.args(&argv).envs(env.iter().copied());
    let r = run_command(cmd, name, RUN_TIMEOUT);
    assert!(r.success(), "{}", ctx(&r, name));
    assert!(
        r.stdout
            .lines()
            .any(|l| l.starts_with("# pingpong ranks=2") && l.contains(library)),
        "{}",
        ctx(&r, "header comment line")
    );
    assert!(
        r.stdout.lines().last() == Some("# done"),
        "{}",
        ctx(&r, "the final `# done` line")
    );
    let res = results("pingpong", &r.stdout);
    let sizes = |metric: &str| -> Vec<f64> {
        res.iter()
            .filter(|x| x.get("mode") == "lat" && x.get("metric") == metric)
            .map(|x| x.num("size"))
            .collect()
    };
    let powers: Vec<f64> = (0..=6).map(|k| f64::from(1u32 << k)).collect();
    assert_eq!(sizes("lat_us"), powers, "{}", ctx(&r, "lat_us sizes"));
    assert_eq!(sizes("bw_MBps"), powers, "{}", ctx(&r, "bw_MBps sizes"));
    let bad = run_plain(&exe, &["--mode".into(), "nonsense".into()]);
    assert!(
        !bad.success() && bad.stderr.contains("usage:"),
        "{}",
        ctx(&bad, "--mode nonsense must fail with a usage line")
    );
}

/// The runner on a tiny TCP ping-pong (ours and the raw TCP baseline, one
/// run, a few iterations): it succeeds, writes the figures as PNG and SVG,
/// links them from summary.md, and reports the raw TCP baseline next to ours
/// (not as a peer) with our overhead over it.
#[test]
fn runner_writes_plots_and_the_raw_tcp_baseline() {
    // The runner always uses the repository's own build (whatever toolchain
    // the other tests were pointed at).
    build_once();
    let out = scratch().join(format!("runner-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = run_runner(
        &[
            "--impl",
            "ours",
            "--bench",
            "pingpong",
            "--transport",
            "tcp",
            "--runs",
            "1",
            "--no-install",
            "--timeout",
            "100",
            "--bench-args",
            "--mode lat --max 64 --reps 2 --iters 3",
        ],
        &out,
        &[],
    );
    let stderr = o.stderr.clone();
    assert!(o.success(), "madmpi-bench: {}", o.context());
    let run = out.join("latest");
    let md = std::fs::read_to_string(run.join("summary.md")).expect("summary.md");
    let ctx = || format!("--- summary.md\n{md}\n--- stderr\n{stderr}");

    for stem in ["tcp-pingpong-latency", "tcp-pingpong-bandwidth"] {
        let png = std::fs::read(run.join(format!("plots/{stem}.png"))).expect("PNG written");
        assert!(
            png.len() > 1000 && png.starts_with(b"\x89PNG\r\n\x1a\n"),
            "{stem}.png: {} bytes, not a PNG",
            png.len()
        );
        let svg = std::fs::read_to_string(run.join(format!("plots/{stem}.svg"))).expect("SVG");
        let root = svg
            .trim_start()
            .trim_start_matches(|c| c != '<')
            .split_once('>')
            .map(|(tag, _)| tag.to_string())
            .unwrap_or_default();
        assert!(root.starts_with("<svg"), "{stem}.svg root element: {root}");
        assert!(svg.trim_end().ends_with("</svg>"), "{stem}.svg is complete");
        assert!(svg.contains("raw TCP"), "{stem}.svg: legend names raw TCP");
        assert!(
            md.contains(&format!("(plots/{stem}.png)"))
                && md.contains(&format!("(plots/{stem}.svg)")),
            "summary.md links {stem}: {}",
            ctx()
        );
    }

    // The headline table: ours, raw TCP, our overhead over it, and no
    // ours/best-peer ratio (raw TCP is not a peer).
    let header = md
        .lines()
        .find(|l| l.starts_with("| measurement |") && l.contains("raw TCP"))
        .unwrap_or_else(|| panic!("no headline table with a raw TCP column: {}", ctx()));
    let cols: Vec<&str> = header.split('|').map(str::trim).collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no `{name}` column in {header}"))
    };
    let row = md
        .lines()
        .find(|l| l.starts_with("| ping-pong latency 8 B (µs) |"))
        .unwrap_or_else(|| panic!("no 8 B latency headline row: {}", ctx()));
    let cells: Vec<&str> = row.split('|').map(str::trim).collect();
    let number = |cell: &str| -> f64 {
        let first = cell.split_whitespace().next().unwrap_or("");
        first
            .parse()
            .unwrap_or_else(|_| panic!("`{cell}` is not a measurement in {row}"))
    };
    let ours = number(cells[col("ours")]);
    let raw = number(cells[col("raw TCP")]);
    assert!(ours > 0.0 && raw > 0.0, "{row}");
    let over = cells[col("ours vs raw")];
    let over_us: f64 = over
        .strip_suffix(" µs")
        .and_then(|v| v.trim_start_matches('+').parse().ok())
        .unwrap_or_else(|| panic!("`{over}` is not ours − raw in µs: {row}"));
    // (The cells carry 4 significant digits: the difference of two rounded figures is exact
    // to a fraction of the larger one, e.g. when a loaded machine slows one raw run to ms.)
    assert!(
        (over_us - (ours - raw)).abs() <= 0.01 * ours.abs().max(raw.abs()).max(1.0),
        "ours − raw = {over_us}, expected {}: {row}",
        ours - raw
    );
    assert!(
        cells[col("ours/best peer")].starts_with('–'),
        "raw TCP must not count as a peer: {row}"
    );

    // The raw data: rawtcp ran, succeeded and reported pingpong lat figures.
    let json = std::fs::read_to_string(run.join("results.json")).expect("results.json");
    let raw_run = json
        .split("\"impl\": ")
        .find(|r| r.starts_with("\"rawtcp\""))
        .unwrap_or_else(|| panic!("no rawtcp run in results.json:\n{json}"));
    assert!(raw_run.contains("\"status\": \"ok\""), "{raw_run}");
    assert!(raw_run.contains("\"metric\": \"lat_us\""), "{raw_run}");
    assert!(raw_run.contains("\"size\": 8,"), "{raw_run}");
    let _ = std::fs::remove_dir_all(&out);
}

/// The `"impl": ...` chunks of results.json, one per run: (impl id, text of
/// the run up to the next one).
fn json_runs(json: &str) -> Vec<(String, &str)> {
    json.split("\"impl\": ")
        .skip(1)
        .map(|r| {
            let id = r
                .strip_prefix('"')
                .and_then(|r| r.split_once('"'))
                .map(|(id, _)| id.to_string())
                .unwrap_or_default();
            (id, r)
        })
        .collect()
}

/// The runner with ours under both schedulers (`ours`, `ours-aggreg`) over
/// shared memory on tiny inputs, with `MADMPI_STRATEGY=bogus` in its own
/// environment (which would make MPI_Init fail if the runner did not set the
/// strategy of every run itself). ours-aggreg runs pingpong, multiseg and
/// msgrate but not barrier, appears in the headline and per-benchmark
/// tables, the scheduler section and the latency and multiseg figures, and
/// is not a peer.
#[test]
fn runner_compares_the_two_schedulers() {
    build_once();
    let out = scratch().join(format!("runner-aggreg-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let o = run_runner(
        &[
            "--impl",
            "ours-aggreg,ours",
            "--bench",
            "pingpong,barrier,multiseg,msgrate",
            "--ranks",
            "2",
            "--runs",
            "1",
            "--no-install",
            "--timeout",
            "100",
            "--bench-args",
            "--max 8 --reps 2 --iters 3 --window 4",
        ],
        &out,
        &[("MADMPI_STRATEGY", "bogus")],
    );
    let stderr = o.stderr.clone();
    assert!(o.success(), "madmpi-bench: {}", o.context());
    let run = out.join("latest");
    let md = std::fs::read_to_string(run.join("summary.md")).expect("summary.md");
    let ctx = || format!("--- summary.md\n{md}\n--- stderr\n{stderr}");
    assert!(md.contains("| ours (aggreg) | ok |"), "{}", ctx());
    assert!(
        md.contains("## Failed or timed-out runs\n\nNone ("),
        "every run succeeded: {}",
        ctx()
    );

    // Every run set its strategy explicitly; aggreg ran exactly the three
    // benchmarks where the scheduler matters.
    let json = std::fs::read_to_string(run.join("results.json")).expect("results.json");
    let runs = json_runs(&json);
    let bench_of = |r: &str| -> String {
        r.split_once("\"bench\": \"")
            .and_then(|(_, b)| b.split_once('"'))
            .map(|(b, _)| b.to_string())
            .unwrap_or_default()
    };
    let mut aggreg_benches: Vec<String> = Vec::new();
    for (id, r) in &runs {
        assert!(r.contains("\"status\": \"ok\""), "{id}: {r}");
        match id.as_str() {
            "ours" => assert!(r.contains("MADMPI_STRATEGY=adaptive "), "{r}"),
            "ours-aggreg" => {
                assert!(r.contains("MADMPI_STRATEGY=aggreg "), "{r}");
                aggreg_benches.push(bench_of(r));
            }
            other => panic!("unexpected implementation `{other}` in results.json"),
        }
    }
    aggreg_benches.sort();
    assert_eq!(
        aggreg_benches,
        ["msgrate", "multiseg", "pingpong"],
        "{json}"
    );
    assert!(json.contains("\"strategy\": \"aggreg\""), "{json}");

    // Headline: a column of its own, not a peer (no peer ran, so neither
    // ratio has a value), the multiseg target stated.
    let header = md
        .lines()
        .find(|l| l.starts_with("| measurement |"))
        .unwrap_or_else(|| panic!("no headline table: {}", ctx()));
    let cols: Vec<&str> = header.split('|').map(str::trim).collect();
    let col = |name: &str| {
        cols.iter()
            .position(|c| *c == name)
            .unwrap_or_else(|| panic!("no `{name}` column in {header}"))
    };
    let cells_of = |start: &str| -> Vec<&str> {
        md.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no row `{start}`: {}", ctx()))
            .split('|')
            .map(str::trim)
            .collect()
    };
    let number = |cell: &str| -> f64 {
        cell.split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("`{cell}` is not a measurement: {}", ctx()))
    };
    for label in ["| ping-pong latency 8 B (µs) |", "| multiseg 16×4 B (µs) |"] {
        let row = cells_of(label);
        assert!(number(row[col("ours")]) > 0.0, "{row:?}");
        assert!(number(row[col("ours (aggreg)")]) > 0.0, "{row:?}");
        assert!(row[col("ours/best peer")].starts_with('–'), "{row:?}");
        assert_eq!(row[col("aggreg/best peer")], "–", "{row:?}");
    }
    let row = cells_of("| barrier (µs), 2 ranks |");
    assert_eq!(row[col("ours (aggreg)")], "–", "{row:?}");
    assert!(md.contains("at least 1.2× faster"), "{}", ctx());

    // The scheduler section: latency default vs aggreg with the ratio and
    // the 3 % verdict, message rate, multiseg.
    let start = md
        .find("## Scheduler overhead (shm)")
        .unwrap_or_else(|| panic!("no scheduler section: {}", ctx()));
    let sched = &md[start
        ..md[start..]
            .find("## All results")
            .map_or(md.len(), |e| start + e)];
    let sub = |title: &str, size: &str| -> Vec<&str> {
        let at = sched
            .find(title)
            .unwrap_or_else(|| panic!("no `{title}` in the scheduler section: {}", ctx()));
        sched[at..]
            .lines()
            .find(|l| l.starts_with(&format!("| {size} |")))
            .unwrap_or_else(|| panic!("no {size} row under `{title}`: {}", ctx()))
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    };
    let lat = sub("### One-segment ping-pong latency", "8 B");
    let (d, a, r) = (number(lat[1]), number(lat[2]), number(lat[3]));
    assert!(d > 0.0 && a > 0.0, "{lat:?}");
    assert!((r - a / d).abs() <= 0.01 * r.max(1.0), "{lat:?}");
    // One round: the paired ratio is the ratio of that round's two runs.
    assert!((number(lat[4]) - r).abs() <= 0.01 * r.max(1.0), "{lat:?}");
    assert!(matches!(lat[6], "met" | "missed"), "{lat:?}");
    let rate = sub("### Message rate", "8 B");
    assert!(number(rate[1]) > 0.0 && number(rate[2]) > 0.0, "{rate:?}");
    let seg = sub("### Multi-segment", "4 B");
    assert!(number(seg[1]) > 0.0 && number(seg[2]) > 0.0, "{seg:?}");
    assert_eq!(seg[3], "–", "no peer ran: {seg:?}");

    // Per-benchmark tables: the column where it ran, not elsewhere.
    let table_header = |title: &str| -> &str {
        let at = md
            .find(title)
            .unwrap_or_else(|| panic!("no `{title}`: {}", ctx()));
        md[at..]
            .lines()
            .find(|l| l.starts_with("| size |"))
            .unwrap_or_else(|| panic!("no table under `{title}`"))
    };
    assert!(table_header("### msgrate / uni").contains("| ours (aggreg) |"));
    assert!(table_header("### pingpong / lat — lat_us").contains("| ours (aggreg) |"));
    assert!(!table_header("### barrier / barrier").contains("aggreg"));

    for stem in ["shm-pingpong-latency", "shm-multiseg"] {
        let svg = std::fs::read_to_string(run.join(format!("plots/{stem}.svg"))).expect("SVG");
        assert!(
            svg.contains("ours (aggreg)"),
            "{stem}.svg: legend names ours (aggreg)"
        );
    }
    let svg = std::fs::read_to_string(run.join("plots/shm-pingpong-bandwidth.svg")).expect("SVG");
    assert!(
        !svg.contains("aggreg"),
        "bandwidth figure without the aggreg curve"
    );
    let _ = std::fs::remove_dir_all(&out);
}
