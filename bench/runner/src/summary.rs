//! Aggregation of raw runs into `summary.md`.
//!
//! Each run reports, per (benchmark, mode, size, metric), the median over the
//! repetitions inside the program. Across the R runs of an implementation the
//! summary shows the median of those medians and their min–max, and the ratio
//! ours / best peer (best = lowest for lower-is-better metrics, highest for
//! higher-is-better ones).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::impls::{Impl, Kind, Transport};
use crate::parse::{Better, Measurement};
use crate::plots::Plot;
use crate::proc::Outcome;

/// One launch of one benchmark program.
#[derive(Debug, Clone)]
pub struct RunRecord {
    pub kind: Kind,
    pub transport: Transport,
    pub bench: String,
    pub ranks: u32,
    pub round: usize,
    pub command: String,
    pub outcome: Outcome,
    pub wall_s: f64,
    pub log: String,
    pub measurements: Vec<Measurement>,
    pub parse_errors: Vec<String>,
    pub stderr_tail: String,
}

/// Identifies one table: a metric of one mode of one benchmark.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct TableKey {
    pub transport: Transport,
    pub bench_order: usize,
    pub bench: String,
    pub mode: String,
    pub metric: String,
    pub ranks: u32,
    pub better: Better,
}

/// One run's figures for one table row: the in-program median, min, max.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub med: f64,
    pub min: f64,
    pub max: f64,
}

/// Median, min and max of the per-run medians, how many runs, and the best
/// single repetition seen in any run (lowest min or highest max).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub med: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
    pub best: f64,
}

impl Cell {
    pub fn of(samples: &[Sample], better: Better) -> Option<Cell> {
        let best = match better {
            Better::Lower => samples.iter().map(|s| s.min).reduce(f64::min)?,
            Better::Higher => samples.iter().map(|s| s.max).reduce(f64::max)?,
        };
        let mut v: Vec<f64> = samples.iter().map(|s| s.med).collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let med = if n % 2 == 1 {
            v[n / 2]
        } else {
            0.5 * (v[n / 2 - 1] + v[n / 2])
        };
        Some(Cell {
            med,
            min: v[0],
            max: v[n - 1],
            n,
            best,
        })
    }
}

/// size -> implementation -> per-run medians.
pub type Table = BTreeMap<u64, BTreeMap<Kind, Vec<Sample>>>;

/// Groups every measurement of every run into tables.
pub fn tables(runs: &[RunRecord], bench_order: &[&str]) -> BTreeMap<TableKey, Table> {
    let mut out: BTreeMap<TableKey, Table> = BTreeMap::new();
    for r in runs {
        for m in &r.measurements {
            let key = TableKey {
                transport: r.transport,
                bench_order: bench_order
                    .iter()
                    .position(|b| *b == m.bench)
                    .unwrap_or(usize::MAX),
                bench: m.bench.clone(),
                mode: m.mode.clone(),
                metric: m.metric.clone(),
                ranks: m.ranks,
                better: m.better,
            };
            out.entry(key)
                .or_default()
                .entry(m.size)
                .or_default()
                .entry(r.kind)
                .or_default()
                .push(Sample {
                    med: m.med,
                    min: m.min,
                    max: m.max,
                });
        }
    }
    out
}

/// ours / best peer, if both exist. The raw TCP baseline is not a peer.
pub fn ratio(better: Better, cells: &BTreeMap<Kind, Cell>) -> Option<f64> {
    let ours = cells.get(&Kind::Ours)?.med;
    let peers = cells
        .iter()
        .filter(|(k, _)| k.is_peer())
        .map(|(_, c)| c.med);
    let best = match better {
        Better::Lower => peers.fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x)))),
        Better::Higher => peers.fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x)))),
    }?;
    (best != 0.0).then(|| ours / best)
}

/// Our overhead over the raw TCP baseline, if both exist: ours − raw for
/// lower-is-better metrics (times: `+12.3`), ours / raw otherwise
/// (rates: `×0.85`).
pub fn over_raw(better: Better, cells: &BTreeMap<Kind, Cell>) -> Option<String> {
    let ours = cells.get(&Kind::Ours)?.med;
    let raw = cells.get(&Kind::RawTcp)?.med;
    match better {
        Better::Lower => Some(format!(
            "{}{}",
            if ours >= raw { "+" } else { "" },
            num(ours - raw)
        )),
        Better::Higher => (raw != 0.0).then(|| format!("×{:.2}", ours / raw)),
    }
}

/// Column title of [`over_raw`] for a metric.
fn over_raw_title(better: Better, metric: &str) -> String {
    match better {
        Better::Lower if metric == "lat_us" => "ours − raw (µs)".into(),
        Better::Lower => "ours − raw".into(),
        Better::Higher => "ours / raw".into(),
    }
}

/// Whether any row of `table` has a raw TCP figure.
fn has_raw(table: &Table) -> bool {
    table.values().any(|row| row.contains_key(&Kind::RawTcp))
}

/// Number formatting with about four significant digits.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1000.0 {
        format!("{x:.0}")
    } else if a >= 100.0 {
        format!("{x:.1}")
    } else if a >= 10.0 {
        format!("{x:.2}")
    } else if a >= 0.01 || a == 0.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.2e}")
    }
}

/// 8 B, 1 KiB, 4 MiB; sizes that are not whole KiB/MiB stay in bytes.
pub fn human_size(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1 << 10 && n % (1 << 10) == 0 {
        format!("{} KiB", n >> 10)
    } else {
        format!("{n} B")
    }
}

fn cell_text(c: Option<&Cell>, runs: usize, with_best: bool) -> String {
    match c {
        None => "–".into(),
        Some(c) => {
            let mut s = format!("{} ({}–{})", num(c.med), num(c.min), num(c.max));
            if c.n < runs {
                let _ = write!(s, " n={}", c.n);
            }
            if with_best {
                let _ = write!(s, "; best {}", num(c.best));
            }
            s
        }
    }
}

fn better_note(b: Better) -> &'static str {
    match b {
        Better::Lower => "lower is better; ratio < 1 means ours is faster",
        Better::Higher => "higher is better; ratio > 1 means ours is better",
    }
}

/// What summary.md needs besides the runs.
pub struct Context<'a> {
    pub timestamp: &'a str,
    pub host: &'a str,
    pub cpus: usize,
    pub impls: &'a [Impl],
    pub transports: &'a [Transport],
    pub runs_per_impl: usize,
    pub quick: bool,
    pub nranks: u32,
    pub notes: &'a [String],
    pub bench_order: &'a [&'a str],
    /// Figures written into `plots/`.
    pub plots: &'a [Plot],
}

/// Rows of the headline table: (bench, mode, metric, size, ranks or 0 for
/// "the run's rank count", label).
const HEADLINES: &[(&str, &str, &str, u64, u32, &str)] = &[
    (
        "pingpong",
        "lat",
        "lat_us",
        8,
        2,
        "ping-pong latency 8 B (µs)",
    ),
    (
        "pingpong",
        "lat",
        "bw_MBps",
        1 << 20,
        2,
        "ping-pong bandwidth 1 MiB (MB/s)",
    ),
    (
        "pingpong",
        "bw",
        "bw_MBps",
        1 << 20,
        2,
        "windowed bandwidth 1 MiB (MB/s)",
    ),
    ("barrier", "barrier", "lat_us", 0, 0, "barrier (µs)"),
    (
        "msgrate",
        "uni",
        "msg_rate_M",
        8,
        2,
        "message rate 8 B (Mmsg/s)",
    ),
    (
        "multiseg",
        "multiseg",
        "lat_us",
        4,
        2,
        "multiseg 16×4 B (µs)",
    ),
    (
        "multiseg",
        "multiseg",
        "lat_us",
        1024,
        2,
        "multiseg 16×1 KiB (µs)",
    ),
    (
        "multiseg",
        "multiseg",
        "lat_us",
        8192,
        2,
        "multiseg 16×8 KiB (µs)",
    ),
    (
        "indexed",
        "indexed",
        "lat_us",
        64 + 262_144,
        2,
        "indexed 64 B + 256 KiB (µs)",
    ),
    (
        "indexed",
        "indexed_contig",
        "lat_us",
        64 + 262_144,
        2,
        "same payload contiguous (µs)",
    ),
    (
        "overlap",
        "nocall",
        "overlap_pct",
        1 << 20,
        2,
        "overlap 1 MiB, no MPI calls (%)",
    ),
    ("coll", "allreduce", "lat_us", 8, 0, "allreduce 8 B (µs)"),
];

/// Renders summary.md.
pub fn render(ctx: &Context<'_>, runs: &[RunRecord]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# madmpi benchmark summary — {}\n", ctx.timestamp);
    let _ = writeln!(
        s,
        "Host `{}` ({} CPUs), transports: {}, {} run(s) per implementation{}, interleaved. \
         Each cell is the median over runs of the in-program median (min–max over runs); \
         `n=` marks cells with fewer runs than planned; in the headline table `best` is the \
         best single repetition of any run (lowest time / highest rate), the figure least \
         disturbed by other load on the machine. Raw data: `results.json`.\n",
        ctx.host,
        ctx.cpus,
        ctx.transports
            .iter()
            .map(|t| t.id())
            .collect::<Vec<_>>()
            .join(", "),
        ctx.runs_per_impl,
        if ctx.quick { " (--quick)" } else { "" },
    );

    let _ = writeln!(s, "## Implementations\n");
    let _ = writeln!(s, "| implementation | status | library |");
    let _ = writeln!(s, "|---|---|---|");
    for i in ctx.impls {
        let status = match &i.status {
            Ok(()) if i.build_failures.is_empty() => "ok".to_string(),
            Ok(()) => format!(
                "ok; not built: {}",
                i.build_failures
                    .iter()
                    .map(|(b, _)| b.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            Err(why) => format!("not built ({})", why.replace('|', "/").replace('\n', " ")),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} |",
            i.kind.title(),
            status,
            i.version.as_deref().unwrap_or("–").replace('|', "/")
        );
    }
    for n in ctx.notes {
        let _ = writeln!(s, "\nNote: {n}");
    }
    s.push('\n');

    // Columns: the MPI implementations; the raw TCP baseline is added to
    // the tables that have its figures.
    let kinds: Vec<Kind> = ctx
        .impls
        .iter()
        .map(|i| i.kind)
        .filter(|k| k.is_mpi())
        .collect();
    let all = tables(runs, ctx.bench_order);

    for &t in ctx.transports {
        let raw_here = all
            .iter()
            .any(|(k, table)| k.transport == t && has_raw(table));
        let _ = writeln!(s, "## Headline numbers ({t})\n");
        if raw_here {
            let _ = writeln!(
                s,
                "`raw TCP` is the floor measured in the same run by `bench/c/rawtcp.c`, a minimal \
                 busy-polling TCP ping-pong over loopback (same sizes and iteration policy as \
                 `pingpong --mode lat`). It is not a peer: `ours/best peer` ignores it. \
                 `ours vs raw` is our overhead over it: ours − raw in µs for times, ours / raw \
                 for bandwidths.\n"
            );
        }
        let _ = write!(s, "| measurement |");
        for k in &kinds {
            let _ = write!(s, " {} |", k.title());
        }
        if raw_here {
            let _ = write!(s, " raw TCP | ours vs raw |");
        }
        let _ = writeln!(s, " ours/best peer |");
        let extra = if raw_here { 2 } else { 0 };
        let _ = writeln!(s, "|---|{}---|", "---|".repeat(kinds.len() + extra));
        let mut any = false;
        for &(bench, mode, metric, size, ranks, label) in HEADLINES {
            let want_ranks = if ranks == 0 { ctx.nranks } else { ranks };
            let found = all.iter().find(|(k, _)| {
                k.transport == t
                    && k.bench == bench
                    && k.mode == mode
                    && k.metric == metric
                    && k.ranks == want_ranks
            });
            let Some((key, table)) = found else { continue };
            let Some(row) = table.get(&size) else {
                continue;
            };
            any = true;
            let cells: BTreeMap<Kind, Cell> = row
                .iter()
                .filter_map(|(k, v)| Some((*k, Cell::of(v, key.better)?)))
                .collect();
            let label = if ranks == 0 {
                format!("{label}, {want_ranks} ranks")
            } else {
                label.to_string()
            };
            let _ = write!(s, "| {label} |");
            for k in &kinds {
                let _ = write!(s, " {} |", cell_text(cells.get(k), ctx.runs_per_impl, true));
            }
            if raw_here {
                let over = over_raw(key.better, &cells).map_or("–".into(), |o| {
                    if key.metric == "lat_us" {
                        format!("{o} µs")
                    } else {
                        o
                    }
                });
                let _ = write!(
                    s,
                    " {} | {over} |",
                    cell_text(cells.get(&Kind::RawTcp), ctx.runs_per_impl, true)
                );
            }
            let r = ratio(key.better, &cells).map_or("–".into(), |r| format!("{r:.2}"));
            let _ = writeln!(s, " {r} ({}) |", key.better.as_str());
        }
        if !any {
            let _ = writeln!(
                s,
                "| (no measurements) |{}  |",
                " |".repeat(kinds.len() + extra)
            );
        }
        s.push('\n');

        let mine: Vec<&Plot> = ctx.plots.iter().filter(|p| p.transport == t).collect();
        if !mine.is_empty() {
            let _ = writeln!(s, "## Plots ({t})\n");
            let _ = writeln!(
                s,
                "Median over runs at each size; log₂ size axis (size 0 is left out). \
                 PNG shown, SVG linked.\n"
            );
            for p in mine {
                let _ = writeln!(
                    s,
                    "![{title}](plots/{stem}.png)\n\n[{title} (SVG)](plots/{stem}.svg)\n",
                    title = p.title.replace(['[', ']'], ""),
                    stem = p.stem
                );
            }
        }

        let _ = writeln!(s, "## All results ({t})\n");
        for (key, table) in all.iter().filter(|(k, _)| k.transport == t) {
            let _ = writeln!(
                s,
                "### {} / {} — {}, {} ranks\n\n{}.\n",
                key.bench,
                key.mode,
                key.metric,
                key.ranks,
                better_note(key.better)
            );
            let raw = has_raw(table);
            let mut cols = kinds.clone();
            if raw {
                cols.push(Kind::RawTcp);
            }
            let _ = write!(s, "| size |");
            for k in &cols {
                let _ = write!(s, " {} |", k.title());
            }
            if raw {
                let _ = write!(s, " {} |", over_raw_title(key.better, &key.metric));
            }
            let _ = writeln!(s, " ours/best peer |");
            let _ = writeln!(
                s,
                "|---:|{}---:|",
                "---:|".repeat(cols.len() + usize::from(raw))
            );
            for (size, row) in table {
                let cells: BTreeMap<Kind, Cell> = row
                    .iter()
                    .filter_map(|(k, v)| Some((*k, Cell::of(v, key.better)?)))
                    .collect();
                let _ = write!(s, "| {} |", human_size(*size));
                for k in &cols {
                    let _ = write!(
                        s,
                        " {} |",
                        cell_text(cells.get(k), ctx.runs_per_impl, false)
                    );
                }
                if raw {
                    let o = over_raw(key.better, &cells).unwrap_or_else(|| "–".into());
                    let _ = write!(s, " {o} |");
                }
                let r = ratio(key.better, &cells).map_or("–".into(), |r| format!("{r:.2}"));
                let _ = writeln!(s, " {r} |");
            }
            s.push('\n');
        }
    }

    let bad: Vec<&RunRecord> = runs.iter().filter(|r| r.outcome != Outcome::Ok).collect();
    let _ = writeln!(s, "## Failed or timed-out runs\n");
    if bad.is_empty() {
        let _ = writeln!(s, "None ({} runs).", runs.len());
    } else {
        for r in bad {
            let _ = writeln!(
                s,
                "- {} {} {} ({} ranks, run {}): {} after {:.1} s — log `{}`{}",
                r.kind.title(),
                r.transport,
                r.bench,
                r.ranks,
                r.round + 1,
                r.outcome.detail(),
                r.wall_s,
                r.log,
                if r.stderr_tail.is_empty() {
                    String::new()
                } else {
                    format!(
                        ": `{}`",
                        r.stderr_tail.replace('\n', " / ").replace('`', "'")
                    )
                }
            );
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::parse_line;

    fn run(kind: Kind, round: usize, lines: &[&str]) -> RunRecord {
        RunRecord {
            kind,
            transport: Transport::Shm,
            bench: "pingpong".into(),
            ranks: 2,
            round,
            command: String::new(),
            outcome: Outcome::Ok,
            wall_s: 1.0,
            log: String::new(),
            measurements: lines
                .iter()
                .map(|l| parse_line(l).unwrap().unwrap())
                .collect(),
            parse_errors: vec![],
            stderr_tail: String::new(),
        }
    }

    fn lat(med: f64) -> String {
        format!(
            "RESULT bench=pingpong mode=lat size=8 ranks=2 iters=1 reps=1 metric=lat_us \
             better=lower min={med} med={med} max={med}"
        )
    }

    #[test]
    fn cells_and_ratios() {
        let sample = |med: f64| Sample {
            med,
            min: med - 0.5,
            max: med + 0.5,
        };
        let runs: Vec<Sample> = [3.0, 1.0, 2.0, 10.0].map(sample).to_vec();
        let c = Cell::of(&runs, Better::Lower).unwrap();
        assert_eq!((c.med, c.min, c.max, c.n, c.best), (2.5, 1.0, 10.0, 4, 0.5));
        assert_eq!(Cell::of(&runs, Better::Higher).unwrap().best, 10.5);
        assert_eq!(Cell::of(&[], Better::Lower), None);
        let mut cells = BTreeMap::new();
        cells.insert(Kind::Ours, Cell::of(&[sample(2.0)], Better::Lower).unwrap());
        cells.insert(
            Kind::Mpich,
            Cell::of(&[sample(4.0)], Better::Lower).unwrap(),
        );
        cells.insert(
            Kind::OpenMpi,
            Cell::of(&[sample(1.0)], Better::Lower).unwrap(),
        );
        assert_eq!(ratio(Better::Lower, &cells), Some(2.0));
        assert_eq!(ratio(Better::Higher, &cells), Some(0.5));
        cells.remove(&Kind::Ours);
        assert_eq!(ratio(Better::Lower, &cells), None);
    }

    #[test]
    fn renders_tables_without_ours() {
        let runs: Vec<RunRecord> = [(Kind::Mpich, 0.4), (Kind::OpenMpi, 0.3), (Kind::Mpich, 0.5)]
            .iter()
            .enumerate()
            .map(|(i, (k, v))| run(*k, i, &[&lat(*v)]))
            .collect();
        let mut ours = Impl::new(
            Kind::Ours,
            std::path::Path::new("/x"),
            std::path::Path::new("/b"),
        );
        ours.status = Err("bin/mpicc not found".into());
        let impls = vec![
            ours,
            Impl::new(
                Kind::Mpich,
                std::path::Path::new("/x"),
                std::path::Path::new("/b"),
            ),
            Impl::new(
                Kind::OpenMpi,
                std::path::Path::new("/x"),
                std::path::Path::new("/b"),
            ),
        ];
        let ctx = Context {
            timestamp: "t",
            host: "h",
            cpus: 2,
            impls: &impls,
            transports: &[Transport::Shm],
            runs_per_impl: 2,
            quick: false,
            nranks: 4,
            notes: &[],
            bench_order: &["pingpong"],
            plots: &[],
        };
        let md = render(&ctx, &runs);
        assert!(!md.contains("raw TCP"), "{md}");
        assert!(!md.contains("## Plots"), "{md}");
        assert!(md.contains("not built (bin/mpicc not found)"), "{md}");
        assert!(
            md.contains("| 8 B | – | 0.450 (0.400–0.500) | 0.300 (0.300–0.300) n=1 | – |"),
            "{md}"
        );
        assert!(md.contains("ping-pong latency 8 B"), "{md}");
        assert!(md.contains("lower is better"), "{md}");
    }

    #[test]
    fn raw_tcp_is_a_baseline_not_a_peer() {
        let bw = |v: f64| {
            format!(
                "RESULT bench=pingpong mode=lat size=1048576 ranks=2 iters=1 reps=1 \
                 metric=bw_MBps better=higher min={v} med={v} max={v}"
            )
        };
        let mut runs: Vec<RunRecord> = [
            (Kind::Ours, 30.0, 900.0),
            (Kind::Mpich, 40.0, 800.0),
            (Kind::RawTcp, 20.0, 1000.0),
        ]
        .iter()
        .map(|&(k, l, b)| run(k, 0, &[&lat(l), &bw(b)]))
        .collect();
        for r in &mut runs {
            r.transport = Transport::Tcp;
        }
        let p = std::path::Path::new("/x");
        let impls: Vec<Impl> = [Kind::Ours, Kind::Mpich, Kind::RawTcp]
            .map(|k| Impl::new(k, p, p))
            .to_vec();
        let plots = [Plot {
            transport: Transport::Tcp,
            stem: "tcp-pingpong-latency".into(),
            title: "Ping-pong latency — tcp".into(),
        }];
        let ctx = Context {
            timestamp: "t",
            host: "h",
            cpus: 2,
            impls: &impls,
            transports: &[Transport::Tcp],
            runs_per_impl: 1,
            quick: false,
            nranks: 4,
            notes: &[],
            bench_order: &["pingpong"],
            plots: &plots,
        };
        let md = render(&ctx, &runs);
        // ours/best peer = 30/40, not 30/20; overhead over raw: +10 µs, ×0.90.
        assert!(
            md.contains("| 8 B | 30.00 (30.00–30.00) | 40.00 (40.00–40.00) | 20.00 (20.00–20.00) | +10.00 | 0.75 |"),
            "{md}"
        );
        assert!(md.contains("| 1 MiB | 900.0 (900.0–900.0) | 800.0 (800.0–800.0) | 1000 (1000–1000) | ×0.90 | 1.12 |"), "{md}");
        assert!(
            md.contains("| ours | MPICH | raw TCP | ours vs raw | ours/best peer |"),
            "{md}"
        );
        assert!(md.contains("| +10.00 µs | 0.75 (lower) |"), "{md}");
        assert!(md.contains("ours − raw (µs)"), "{md}");
        assert!(
            md.contains("![Ping-pong latency — tcp](plots/tcp-pingpong-latency.png)"),
            "{md}"
        );
        assert!(md.contains("(plots/tcp-pingpong-latency.svg)"), "{md}");
        let mut cells = BTreeMap::new();
        cells.insert(
            Kind::Ours,
            Cell::of(
                &[Sample {
                    med: 1.0,
                    min: 1.0,
                    max: 1.0,
                }],
                Better::Lower,
            )
            .unwrap(),
        );
        cells.insert(
            Kind::RawTcp,
            Cell::of(
                &[Sample {
                    med: 0.5,
                    min: 0.5,
                    max: 0.5,
                }],
                Better::Lower,
            )
            .unwrap(),
        );
        assert_eq!(ratio(Better::Lower, &cells), None);
        assert_eq!(over_raw(Better::Lower, &cells).as_deref(), Some("+0.500"));
        assert_eq!(over_raw(Better::Higher, &cells).as_deref(), Some("×2.00"));
    }

    #[test]
    fn formats() {
        assert_eq!(human_size(8), "8 B");
        assert_eq!(human_size(1024), "1 KiB");
        assert_eq!(human_size(4 << 20), "4 MiB");
        assert_eq!(human_size(262_208), "262208 B");
        assert_eq!(num(0.1534), "0.153");
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(0.0), "0.000");
    }
}
