//! `madmpi-bench`: builds the C benchmarks under `bench/c/` with every
//! available MPI implementation (ours, MPICH, Open MPI), runs them
//! interleaved R times each, and writes `bench/results/<timestamp>/`
//! (`results.json` with every raw run, `summary.md`, `plots/` with PNG and
//! SVG figures) plus the `bench/results/latest` symlink. In TCP mode the
//! raw TCP baseline (`bench/c/rawtcp.c`, no MPI) runs next to the ping-pong.
//!
//! It never fails because a peer is missing: an implementation that cannot
//! be found, built or launched is reported and the others are compared. It
//! does not judge correctness beyond what the benchmark programs check
//! themselves; a run that fails or hangs is killed, recorded and skipped.

mod cli;
mod handoff;
mod impls;
mod json;
mod networks;
mod parse;
mod plots;
mod proc;
mod summary;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use cli::{CliError, Options, BENCHES, OPT_IN, SCALE_RANKS};
use impls::{Impl, Kind, Transport};
use json::Json;
use summary::RunRecord;

/// One benchmark launch configuration: program, rank count, arguments.
#[derive(Debug, Clone)]
struct Job {
    bench: &'static str,
    ranks: u32,
    args: Vec<String>,
}

fn main() -> ExitCode {
    proc::watch_from_above();
    let default_repo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let default_repo = default_repo.canonicalize().unwrap_or(default_repo);
    let opts = match cli::parse(std::env::args().skip(1), default_repo) {
        Ok(o) => o,
        Err(CliError::Help) => {
            print!("{}", cli::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(CliError::Bad(why)) => {
            eprintln!("madmpi-bench: {why}\n\n{}", cli::USAGE);
            return ExitCode::from(2);
        }
    };
    match run(&opts) {
        Ok(code) => code,
        Err(why) => {
            eprintln!("madmpi-bench: {why}");
            ExitCode::FAILURE
        }
    }
}

fn run(o: &Options) -> Result<ExitCode, String> {
    let src_dir = o.repo.join("bench/c");
    if !src_dir.join("common.h").is_file() {
        return Err(format!(
            "{} has no bench/c/common.h (use --repo)",
            o.repo.display()
        ));
    }
    let results_root = o
        .out
        .clone()
        .unwrap_or_else(|| o.repo.join("bench/results"));
    let stamp = timestamp();
    let run_dir = unique_dir(&results_root, &stamp);
    let log_dir = run_dir.join("logs");
    proc::mkdirs(&log_dir).map_err(|e| format!("cannot create {}: {e}", log_dir.display()))?;
    let build_root = results_root.join("build");
    let run_name = run_dir
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or(stamp);
    eprintln!("madmpi-bench: results in {}", run_dir.display());

    let mut notes = Vec::new();
    if o.install {
        if let Some(n) = impls::install_peers(&log_dir) {
            eprintln!("madmpi-bench: {n}");
            notes.push(n);
        }
    }

    if o.networks {
        let md = networks::run(&o.repo, &run_dir, &log_dir, o)
            .unwrap_or_else(|e| format!("## Emulated networks\n\nnot measured: {e}\n"));
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let text = format!(
            "# madmpi networks benchmark, {run_name}\n\nhost {}, {} CPUs, load average at \
             the end (1, 5, 15 min): {}\n\n{md}",
            hostname(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        );
        let path = run_dir.join("networks.md");
        std::fs::write(&path, &text).map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{text}");
        eprintln!("madmpi-bench: wrote {}", path.display());
        if o.benches.as_ref().is_some_and(|b| b.is_empty()) {
            update_latest(&results_root, &run_name);
            return Ok(ExitCode::SUCCESS);
        }
    }

    let wanted: Vec<&'static str> = BENCHES
        .into_iter()
        .filter(|b| {
            o.benches
                .as_ref()
                .map_or(!OPT_IN.contains(b), |l| l.iter().any(|x| x == b))
        })
        .collect();
    let sources: Vec<(String, PathBuf)> = wanted
        .iter()
        .map(|b| (b.to_string(), src_dir.join(format!("{b}.c"))))
        .collect();

    let mut impls: Vec<Impl> = Vec::new();
    for &kind in &o.impls {
        if kind == Kind::OursTcp && !o.transports.contains(&Transport::Ofi) {
            continue; // ours over its tcp driver is the comparison point of ofi mode only
        }
        let mut i = Impl::new(kind, &o.repo, &build_root);
        // Only the programs it runs (ours-aggreg: a subset).
        let mine: Vec<(String, PathBuf)> = sources
            .iter()
            .filter(|(b, _)| i.program(b).is_some())
            .cloned()
            .collect();
        if mine.is_empty() {
            eprintln!(
                "madmpi-bench: {}: skipped (runs only {})",
                kind.id(),
                Kind::AGGREG_BENCHES.join(", ")
            );
            continue;
        }
        // ours-aggreg runs ours's binaries: built once, by ours, when both
        // are selected.
        let built = impls.iter().find(|j| j.build_dir == i.build_dir);
        prepare(&mut i, &mine, built, &src_dir, &log_dir);
        impls.push(i);
    }
    // The raw floors under the ping-pong, not peers: raw TCP in TCP mode,
    // libfabric's fi_pingpong in ofi mode.
    for (kind, transport, prog) in [
        (Kind::RawTcp, Transport::Tcp, impls::RAWTCP),
        (Kind::FiPingpong, Transport::Ofi, impls::FIPINGPONG),
    ] {
        if o.transports.contains(&transport) && wanted.contains(&"pingpong") {
            let mut raw = Impl::new(kind, &o.repo, &build_root);
            let src = vec![(prog.to_string(), src_dir.join(format!("{prog}.c")))];
            prepare(&mut raw, &src, None, &src_dir, &log_dir);
            impls.push(raw);
        }
    }

    let jobs = plan(o, &wanted);
    let usable = impls
        .iter()
        .filter(|i| i.kind.is_mpi() && i.usable())
        .count();
    let total: usize = o
        .transports
        .iter()
        .map(|&t| {
            o.runs
                * jobs
                    .iter()
                    .map(|j| {
                        impls
                            .iter()
                            .filter(|i| i.runs_on(t) && i.exe(j.bench).is_some())
                            .count()
                    })
                    .sum::<usize>()
        })
        .sum();

    let mut runs: Vec<RunRecord> = Vec::new();
    let mut n = 0;
    for &t in &o.transports {
        for round in 0..o.runs {
            for job in &jobs {
                // Interleaved: ours, ours (aggreg), MPICH, Open MPI (, raw TCP), and the
                // reverse in odd rounds, so that slow drifts of the machine hit every
                // implementation alike, and a drift within a round favours none of them (in
                // particular not whichever of `ours` and `ours (aggreg)`, paired by round,
                // runs second).
                let order: Vec<_> = if round % 2 == 0 {
                    impls.iter().collect()
                } else {
                    impls.iter().rev().collect()
                };
                for i in order {
                    let Some(exe) = i.exe(job.bench).filter(|_| i.runs_on(t)) else {
                        continue;
                    };
                    n += 1;
                    let rec = run_one(i, t, job, round, &exe, o, &log_dir, &run_dir);
                    eprintln!(
                        "[{n}/{total}] {t} run {} {} ({} ranks) {}: {} in {:.1} s{}",
                        round + 1,
                        job.bench,
                        job.ranks,
                        i.kind.id(),
                        rec.outcome.label(),
                        rec.wall_s,
                        if rec.parse_errors.is_empty() {
                            String::new()
                        } else {
                            format!(", {} unparsable line(s)", rec.parse_errors.len())
                        }
                    );
                    runs.push(rec);
                    // Rewritten after every run so an interrupted suite keeps
                    // what it measured.
                    write_json(&run_dir, &run_name, o, &impls, &notes, &runs)?;
                }
            }
        }
    }
    // The machine's handoff latency around the runs, summed up for the reader.
    notes.extend(handoff::note(&runs));
    write_json(&run_dir, &run_name, o, &impls, &notes, &runs)?;

    // Figures never fail the run: a problem is reported (stderr and a note
    // in summary.md) and summary.md shows the figures that exist.
    let all = summary::tables(&runs, &BENCHES);
    let (plots, plot_errors) =
        plots::write_all(&run_dir.join("plots"), &all, &o.transports, o.ranks);
    for e in plot_errors {
        eprintln!("madmpi-bench: plot not written: {e}");
        notes.push(format!("plot not written: {e}"));
    }

    let ctx = summary::Context {
        timestamp: &run_name,
        host: &hostname(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        impls: &impls,
        transports: &o.transports,
        runs_per_impl: o.runs,
        quick: o.quick,
        nranks: o.ranks,
        notes: &notes,
        bench_order: &BENCHES,
        plots: &plots,
    };
    let md = summary::render(&ctx, &runs);
    let md_path = run_dir.join("summary.md");
    std::fs::write(&md_path, &md).map_err(|e| format!("{}: {e}", md_path.display()))?;
    update_latest(&results_root, &run_name);
    println!("{md}");
    eprintln!("madmpi-bench: wrote {} and results.json", md_path.display());
    if usable == 0 {
        eprintln!("madmpi-bench: no MPI implementation could be used");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

/// Finds, builds (or takes over what `built`, sharing its build directory,
/// built) and probes one implementation, and says how it went.
fn prepare(
    i: &mut Impl,
    sources: &[(String, PathBuf)],
    built: Option<&Impl>,
    src_dir: &Path,
    log_dir: &Path,
) {
    i.detect();
    match built {
        Some(b) => i.share_build(b, sources),
        None => i.build(sources, src_dir, log_dir),
    }
    i.probe(log_dir);
    let id = i.kind.id();
    match &i.status {
        Ok(()) => {
            eprintln!(
                "madmpi-bench: {id}: ready ({})",
                i.version.as_deref().unwrap_or("version unknown")
            );
            for (b, why) in &i.build_failures {
                eprintln!("madmpi-bench: {id}: {b} not built: {why}");
            }
        }
        Err(why) => eprintln!("madmpi-bench: {id}: not built ({why})"),
    }
}

/// The launches of one round, in order. Barrier and the large allreduce run on 2 and on N
/// ranks; the other collectives and the ring broadcasts on N; the point-to-point benchmarks
/// on 2.
fn plan(o: &Options, wanted: &[&'static str]) -> Vec<Job> {
    let mut base = Vec::new();
    if o.quick {
        base.push("--quick".to_string());
    }
    base.extend(o.bench_args.iter().cloned());
    let mut jobs = Vec::new();
    for &b in wanted {
        let ranks: Vec<u32> = match b {
            "barrier" | "allreduce" if o.ranks != 2 => vec![2, o.ranks],
            "barrier" | "allreduce" | "coll" | "ringbcast" | "io" => vec![o.ranks],
            "scale" => SCALE_RANKS.to_vec(),
            _ => vec![2],
        };
        for r in ranks {
            jobs.push(Job {
                bench: b,
                ranks: r,
                args: base.clone(),
            });
        }
    }
    jobs
}

#[allow(clippy::too_many_arguments)]
fn run_one(
    i: &Impl,
    t: Transport,
    job: &Job,
    round: usize,
    exe: &Path,
    o: &Options,
    log_dir: &Path,
    run_dir: &Path,
) -> RunRecord {
    let spec = i.launch(t, job.ranks, exe, &job.args);
    let log = log_dir.join(format!(
        "{}-{}-n{}-{}-r{}",
        t.id(),
        job.bench,
        job.ranks,
        i.kind.id(),
        round + 1
    ));
    let before = handoff::probe();
    let f = proc::run(&spec, o.timeout, &log);
    let after = handoff::probe();
    let (measurements, parse_errors) = parse::parse_output(&f.stdout);
    let rel = log
        .strip_prefix(run_dir)
        .unwrap_or(&log)
        .display()
        .to_string();
    RunRecord {
        kind: i.kind,
        transport: t,
        bench: job.bench.to_string(),
        ranks: job.ranks,
        round,
        command: spec.display(),
        outcome: f.outcome,
        wall_s: f.wall.as_secs_f64(),
        log: format!("{rel}.out / .err"),
        measurements,
        parse_errors,
        stderr_tail: proc::tail(&f.stderr, 3),
        handoff_ns: [before, after],
    }
}

fn write_json(
    run_dir: &Path,
    stamp: &str,
    o: &Options,
    impls: &[Impl],
    notes: &[String],
    runs: &[RunRecord],
) -> Result<(), String> {
    let options = Json::obj([
        ("quick", Json::Bool(o.quick)),
        ("runs", Json::Num(o.runs as f64)),
        (
            "transports",
            Json::Arr(o.transports.iter().map(|t| Json::str(t.id())).collect()),
        ),
        (
            "implementations",
            Json::Arr(o.impls.iter().map(|k| Json::str(k.id())).collect()),
        ),
        ("ranks", Json::Num(f64::from(o.ranks))),
        ("timeout_s", Json::Num(o.timeout.as_secs_f64())),
        (
            "bench_args",
            Json::Arr(o.bench_args.iter().map(Json::str).collect()),
        ),
    ]);
    let impls_json = impls
        .iter()
        .map(|i| {
            Json::obj([
                ("id", Json::str(i.kind.id())),
                ("name", Json::str(i.kind.title())),
                ("cc", Json::str(&i.cc)),
                ("launcher", Json::str(&i.launcher)),
                ("strategy", i.kind.strategy().map_or(Json::Null, Json::str)),
                (
                    "status",
                    Json::str(if i.usable() { "ok" } else { "unavailable" }),
                ),
                (
                    "reason",
                    i.status.as_ref().err().map_or(Json::Null, Json::str),
                ),
                ("version", i.version.as_ref().map_or(Json::Null, Json::str)),
                (
                    "build_failures",
                    Json::Arr(
                        i.build_failures
                            .iter()
                            .map(|(b, w)| {
                                Json::obj([("bench", Json::str(b)), ("reason", Json::str(w))])
                            })
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let runs_json = runs
        .iter()
        .map(|r| {
            let results = r
                .measurements
                .iter()
                .map(|m| {
                    Json::Obj(
                        m.fields
                            .iter()
                            .map(|(k, v)| (k.clone(), Json::guess(v)))
                            .collect(),
                    )
                })
                .collect();
            Json::obj([
                ("impl", Json::str(r.kind.id())),
                ("transport", Json::str(r.transport.id())),
                ("bench", Json::str(&r.bench)),
                ("ranks", Json::Num(f64::from(r.ranks))),
                ("run", Json::Num((r.round + 1) as f64)),
                ("command", Json::str(&r.command)),
                ("status", Json::str(r.outcome.label())),
                ("detail", Json::str(r.outcome.detail())),
                ("wall_s", Json::Num((r.wall_s * 1000.0).round() / 1000.0)),
                ("log", Json::str(&r.log)),
                ("stderr_tail", Json::str(&r.stderr_tail)),
                (
                    "parse_errors",
                    Json::Arr(r.parse_errors.iter().map(Json::str).collect()),
                ),
                ("results", Json::Arr(results)),
                (
                    "handoff_ns",
                    Json::Arr(
                        r.handoff_ns
                            .iter()
                            .map(|h| h.map_or(Json::Null, |ns| Json::Num(ns.round())))
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let doc = Json::obj([
        ("format", Json::str("madmpi-bench results v1")),
        ("timestamp", Json::str(stamp)),
        ("host", Json::str(hostname())),
        (
            "cpus",
            Json::Num(std::thread::available_parallelism().map_or(1, |n| n.get()) as f64),
        ),
        ("options", options),
        ("notes", Json::Arr(notes.iter().map(Json::str).collect())),
        ("implementations", Json::Arr(impls_json)),
        ("runs", Json::Arr(runs_json)),
    ]);
    let path = run_dir.join("results.json");
    let tmp = run_dir.join("results.json.tmp");
    std::fs::write(&tmp, format!("{doc}\n"))
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Points `<root>/latest` at the run directory (relative link).
fn update_latest(root: &Path, name: &str) {
    let link = root.join("latest");
    if link
        .symlink_metadata()
        .is_ok_and(|m| m.file_type().is_symlink())
    {
        let _ = std::fs::remove_file(&link);
    }
    if let Err(e) = std::os::unix::fs::symlink(name, &link) {
        eprintln!("madmpi-bench: cannot update {}: {e}", link.display());
    }
}

/// `<root>/<stamp>`, or `<stamp>-2`, ... if that exists.
fn unique_dir(root: &Path, stamp: &str) -> PathBuf {
    let mut p = root.join(stamp);
    let mut k = 2;
    while p.exists() {
        p = root.join(format!("{stamp}-{k}"));
        k += 1;
    }
    p
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into())
}

/// UTC `YYYYMMDD-HHMMSS`.
fn timestamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format_utc(secs)
}

fn format_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_formatting() {
        assert_eq!(format_utc(0), "19700101-000000");
        assert_eq!(format_utc(951_782_400), "20000229-000000");
        assert_eq!(format_utc(1_700_000_000), "20231114-221320");
    }

    #[test]
    fn plan_runs_barrier_on_two_and_n() {
        let o = cli::parse(["--quick".to_string()], PathBuf::from("/r")).unwrap();
        let jobs = plan(&o, &BENCHES);
        let barrier: Vec<u32> = jobs
            .iter()
            .filter(|j| j.bench == "barrier")
            .map(|j| j.ranks)
            .collect();
        assert_eq!(barrier, [2, 4]);
        assert!(jobs.iter().all(|j| j.args == ["--quick"]));
        assert_eq!(jobs.iter().find(|j| j.bench == "coll").unwrap().ranks, 4);
        assert_eq!(
            jobs.iter().find(|j| j.bench == "ringbcast").unwrap().ranks,
            4
        );
        assert_eq!(
            jobs.iter().find(|j| j.bench == "pingpong").unwrap().ranks,
            2
        );
        let scale: Vec<u32> = jobs
            .iter()
            .filter(|j| j.bench == "scale")
            .map(|j| j.ranks)
            .collect();
        assert_eq!(scale, SCALE_RANKS);
        let allreduce: Vec<u32> = jobs
            .iter()
            .filter(|j| j.bench == "allreduce")
            .map(|j| j.ranks)
            .collect();
        assert_eq!(allreduce, [2, 4]);
        let two = cli::parse(["--ranks".into(), "2".into()], PathBuf::from("/r")).unwrap();
        let on_two: Vec<u32> = plan(&two, &["allreduce"]).iter().map(|j| j.ranks).collect();
        assert_eq!(on_two, [2]);
    }
}
