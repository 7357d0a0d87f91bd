//! Aggregation of raw runs into `summary.md`.
//!
//! Each run reports, per (benchmark, mode, size, metric), the median over the
//! repetitions inside the program. Across the R runs of an implementation the
//! summary shows the median of those medians and their min–max, and the ratio
//! ours / best peer (best = lowest for lower-is-better metrics, highest for
//! higher-is-better ones). Where `ours (aggreg)` (ours with the aggregating
//! scheduler) ran, it gets its own column and ratio to the best peer, and a
//! section compares the two schedulers against the targets of issue #6.

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
    /// The machine's cache-line handoff (ns, `handoff::probe`) just before and just after
    /// the run: a run whose two probes disagree straddled a change of the machine's state.
    pub handoff_ns: [Option<f64>; 2],
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

/// One run's figures for one table row: the in-program median, min, max,
/// and the round it ran in.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Sample {
    pub med: f64,
    pub min: f64,
    pub max: f64,
    pub round: usize,
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
                    round: r.round,
                });
        }
    }
    out
}

/// ours / best peer, if both exist. Neither the raw TCP baseline nor
/// `ours (aggreg)` is a peer.
pub fn ratio(better: Better, cells: &BTreeMap<Kind, Cell>) -> Option<f64> {
    ratio_of(Kind::Ours, better, cells)
}

/// `kind` / best peer, if both exist.
pub fn ratio_of(kind: Kind, better: Better, cells: &BTreeMap<Kind, Cell>) -> Option<f64> {
    let mine = cells.get(&kind)?.med;
    let (_, best) = best_peer(better, cells)?;
    (best != 0.0).then(|| mine / best)
}

/// The best peer (MPICH or Open MPI) by median, and its median.
pub fn best_peer(better: Better, cells: &BTreeMap<Kind, Cell>) -> Option<(Kind, f64)> {
    cells
        .iter()
        .filter(|(k, _)| k.is_peer())
        .map(|(k, c)| (*k, c.med))
        .reduce(|a, b| {
            let b_wins = match better {
                Better::Lower => b.1 < a.1,
                Better::Higher => b.1 > a.1,
            };
            if b_wins {
                b
            } else {
                a
            }
        })
}

/// Issue #6: with the aggregating scheduler, `multiseg` with segments up to
/// [`MULTISEG_TARGET_MAX_SEG`] must be at least this many times faster than
/// the better of MPICH and Open MPI.
pub fn multiseg_target(t: Transport) -> f64 {
    match t {
        Transport::Tcp | Transport::Ofi => 4.0,
        Transport::Shm => 1.2,
    }
}

/// Largest segment size the multiseg target applies to.
pub const MULTISEG_TARGET_MAX_SEG: u64 = 1024;

/// Issue #6: one-segment latency with the aggregating scheduler at most this
/// times the default scheduler's (within 3 %).
pub const OVERHEAD_TARGET: f64 = 1.03;

/// Largest ping-pong size of the scheduler overhead table.
pub const OVERHEAD_MAX_SIZE: u64 = 1024;

/// `aggreg/best peer` text of a multiseg row: the ratio, and for segments
/// up to 1 KiB the speedup against the target and whether it is met.
pub fn multiseg_verdict(t: Transport, size: u64, cells: &BTreeMap<Kind, Cell>) -> Option<String> {
    let r = ratio_of(Kind::OursAggreg, Better::Lower, cells)?;
    if size > MULTISEG_TARGET_MAX_SEG {
        return Some(format!("{r:.2}"));
    }
    let target = multiseg_target(t);
    let speedup = if r > 0.0 { 1.0 / r } else { f64::INFINITY };
    Some(format!(
        "{r:.2} (speedup {speedup:.2}×, target ≥ {target}×: {})",
        if speedup >= target { "met" } else { "missed" }
    ))
}

/// aggreg / default of the medians and of the best repetitions, if both ran.
pub fn aggreg_over_ours(cells: &BTreeMap<Kind, Cell>) -> Option<(f64, f64)> {
    let d = cells.get(&Kind::Ours)?;
    let a = cells.get(&Kind::OursAggreg)?;
    (d.med != 0.0 && d.best != 0.0).then(|| (a.med / d.med, a.best / d.best))
}

/// The median over rounds of `a`'s per-run median divided by `b`'s of the
/// same round, over the rounds where both ran: a paired comparison. The two
/// run back to back in a round, so what the machine was doing then weighs on
/// both, and the ratio of a round cancels most of it (unlike the ratio of
/// the two medians taken separately).
pub fn paired_ratio(row: &BTreeMap<Kind, Vec<Sample>>, a: Kind, b: Kind) -> Option<f64> {
    let (va, vb) = (row.get(&a)?, row.get(&b)?);
    let mut r: Vec<f64> = va
        .iter()
        .filter_map(|x| {
            let y = vb.iter().find(|y| y.round == x.round)?;
            (y.med != 0.0).then(|| x.med / y.med)
        })
        .collect();
    if r.is_empty() {
        return None;
    }
    r.sort_by(f64::total_cmp);
    let n = r.len();
    Some(if n % 2 == 1 {
        r[n / 2]
    } else {
        0.5 * (r[n / 2 - 1] + r[n / 2])
    })
}

/// ours / best peer paired by round ([`paired_ratio`]), against the peer that is best by
/// median (not the better of the two in each round, which would favour the peers: the lower
/// of two noisy figures is lower than either's typical one).
pub fn paired_to_best_peer(
    better: Better,
    row: &BTreeMap<Kind, Vec<Sample>>,
    cells: &BTreeMap<Kind, Cell>,
) -> Option<f64> {
    let (peer, _) = best_peer(better, cells)?;
    paired_ratio(row, Kind::Ours, peer)
}

/// Our overhead over the raw baseline `raw`, if both exist: ours − raw for
/// lower-is-better metrics (times: `+12.3`), ours / raw otherwise
/// (rates: `×0.85`).
pub fn over_raw(raw: Kind, better: Better, cells: &BTreeMap<Kind, Cell>) -> Option<String> {
    let ours = cells.get(&Kind::Ours)?.med;
    let raw = cells.get(&raw)?.med;
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

/// The raw baseline (raw TCP, `fi_pingpong`) of which `table` has figures.
fn raw_of(table: &Table) -> Option<Kind> {
    [Kind::RawTcp, Kind::FiPingpong]
        .into_iter()
        .find(|&k| has_kind(table, k))
}

/// What the headline says of the raw baseline `raw`.
fn raw_note(raw: Kind) -> &'static str {
    match raw {
        Kind::FiPingpong => {
            "`fi_pingpong` is the floor measured in the same run by `bench/c/fipingpong.c`, which \
             runs libfabric's own ping-pong (`fi_pingpong -e rdm`) on the same provider, server \
             and client on one host, for the sizes of `pingpong --mode lat`. It is not a peer: \
             `ours/best peer` ignores it. `ours vs raw` is our overhead over it: ours − raw in \
             µs for times, ours / raw for bandwidths. `ours (tcp driver)` is ours over its own \
             `tcp` driver in the same rounds, not a peer either.\n"
        }
        _ => {
            "`raw TCP` is the floor measured in the same run by `bench/c/rawtcp.c`, a minimal \
             busy-polling TCP ping-pong over loopback (same sizes and iteration policy as \
             `pingpong --mode lat`). It is not a peer: `ours/best peer` ignores it. \
             `ours vs raw` is our overhead over it: ours − raw in µs for times, ours / raw \
             for bandwidths.\n"
        }
    }
}

/// Whether any row of `table` has a figure of `kind`.
fn has_kind(table: &Table, kind: Kind) -> bool {
    table.values().any(|row| row.contains_key(&kind))
}

/// One table row's cells.
fn cells_of(row: &BTreeMap<Kind, Vec<Sample>>, better: Better) -> BTreeMap<Kind, Cell> {
    row.iter()
        .filter_map(|(k, v)| Some((*k, Cell::of(v, better)?)))
        .collect()
}

/// The table of one metric of one mode of one benchmark, if measured.
fn find<'a>(
    all: &'a BTreeMap<TableKey, Table>,
    t: Transport,
    bench: &str,
    mode: &str,
    metric: &str,
    ranks: u32,
) -> Option<(&'a TableKey, &'a Table)> {
    all.iter().find(|(k, _)| {
        k.transport == t
            && k.bench == bench
            && k.mode == mode
            && k.metric == metric
            && k.ranks == ranks
    })
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
        Better::Lower => {
            "lower is better; ratio < 1 means ours is faster. `paired` is the median over \
             rounds of ours / that peer within the round (runs of one round follow each other, \
             so a slow spell of the machine weighs on both)"
        }
        Better::Higher => {
            "higher is better; ratio > 1 means ours is better. `paired` is the median over \
             rounds of ours / that peer within the round (runs of one round follow each other, \
             so a slow spell of the machine weighs on both)"
        }
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
    (
        "ringbcast",
        "iprobe",
        "lat_us",
        1 << 20,
        0,
        "ring broadcast 1 MiB, Iprobe polling (µs)",
    ),
    (
        "io",
        "write",
        "bw_MBps",
        16 << 20,
        0,
        "collective write, 3-D subarray 16 MiB (MB/s)",
    ),
    (
        "rma",
        "put_lat_lock",
        "lat_us",
        8,
        2,
        "put + flush 8 B (µs)",
    ),
    (
        "rma",
        "acc_lat_lock",
        "lat_us",
        8,
        2,
        "accumulate + flush 8 B (µs)",
    ),
    (
        "rma",
        "put_rate",
        "msg_rate_M",
        8,
        2,
        "8 B puts then one flush (Mputs/s)",
    ),
    (
        "rma",
        "put_rate_many",
        "msg_rate_M",
        8,
        2,
        "1024 puts of 8 B then one flush (Mputs/s)",
    ),
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

    // Columns: the MPI implementations (`ours (aggreg)` only in the tables
    // that have its figures, likewise `ours (tcp driver)`); the raw baseline
    // (raw TCP, fi_pingpong) is added to the tables
    // that have its figures.
    let kinds: Vec<Kind> = ctx
        .impls
        .iter()
        .map(|i| i.kind)
        .filter(|k| k.is_mpi())
        .collect();
    let all = tables(runs, ctx.bench_order);

    for &t in ctx.transports {
        let here = |kind: Kind| {
            all.iter()
                .any(|(k, table)| k.transport == t && has_kind(table, kind))
        };
        let raw_here = all
            .iter()
            .filter(|(k, _)| k.transport == t)
            .find_map(|(_, table)| raw_of(table));
        let aggreg_here = here(Kind::OursAggreg);
        let head_kinds: Vec<Kind> = kinds
            .iter()
            .copied()
            .filter(|&k| !k.is_variant() || here(k))
            .collect();
        let _ = writeln!(s, "## Headline numbers ({t})\n");
        if aggreg_here {
            let _ = writeln!(
                s,
                "`ours (aggreg)` is ours with the aggregating packet scheduler \
                 (`MADMPI_STRATEGY=aggreg`; `ours` runs with `MADMPI_STRATEGY=adaptive`, the default), same \
                 binaries, run on the ping-pong, multiseg and msgrate benchmarks only. It is not \
                 a peer: `ours/best peer` ignores it; `aggreg/best peer` is its own ratio. \
                 Target (issue #6): for segments up to 1 KiB, multiseg with aggreg at least {}× \
                 faster than the better of MPICH and Open MPI (aggreg/best peer ≤ {:.2}); the \
                 verdict compares medians. Scheduler overhead: see below.\n",
                multiseg_target(t),
                1.0 / multiseg_target(t)
            );
        }
        if let Some(raw) = raw_here {
            let _ = writeln!(s, "{}", raw_note(raw));
        }
        let _ = write!(s, "| measurement |");
        for k in &head_kinds {
            let _ = write!(s, " {} |", k.title());
        }
        if let Some(raw) = raw_here {
            let _ = write!(s, " {} | ours vs raw |", raw.title());
        }
        let _ = write!(s, " ours/best peer |");
        if aggreg_here {
            let _ = write!(s, " aggreg/best peer |");
        }
        s.push('\n');
        let extra = 2 * usize::from(raw_here.is_some()) + usize::from(aggreg_here);
        let _ = writeln!(s, "|---|{}---|", "---|".repeat(head_kinds.len() + extra));
        let mut any = false;
        for &(bench, mode, metric, size, ranks, label) in HEADLINES {
            let want_ranks = if ranks == 0 { ctx.nranks } else { ranks };
            let Some((key, table)) = find(&all, t, bench, mode, metric, want_ranks) else {
                continue;
            };
            let Some(row) = table.get(&size) else {
                continue;
            };
            any = true;
            let cells = cells_of(row, key.better);
            let label = if ranks == 0 {
                format!("{label}, {want_ranks} ranks")
            } else {
                label.to_string()
            };
            let _ = write!(s, "| {label} |");
            for k in &head_kinds {
                let _ = write!(s, " {} |", cell_text(cells.get(k), ctx.runs_per_impl, true));
            }
            if let Some(raw) = raw_here {
                let over = over_raw(raw, key.better, &cells).map_or("–".into(), |o| {
                    if key.metric == "lat_us" {
                        format!("{o} µs")
                    } else {
                        o
                    }
                });
                let _ = write!(
                    s,
                    " {} | {over} |",
                    cell_text(cells.get(&raw), ctx.runs_per_impl, true)
                );
            }
            let r = ratio(key.better, &cells).map_or("–".into(), |r| format!("{r:.2}"));
            let _ = write!(s, " {r} ({}) |", key.better.as_str());
            if aggreg_here {
                let a = if bench == "multiseg" && mode == "multiseg" {
                    multiseg_verdict(t, size, &cells)
                } else {
                    ratio_of(Kind::OursAggreg, key.better, &cells).map(|r| format!("{r:.2}"))
                };
                let _ = write!(s, " {} |", a.as_deref().unwrap_or("–"));
            }
            s.push('\n');
        }
        if !any {
            let _ = writeln!(
                s,
                "| (no measurements) |{}  |",
                " |".repeat(head_kinds.len() + extra)
            );
        }
        s.push('\n');

        if aggreg_here {
            scheduler_section(&mut s, t, &all, ctx.runs_per_impl);
        }

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
            let raw = raw_of(table);
            let aggreg = has_kind(table, Kind::OursAggreg);
            let mut cols: Vec<Kind> = kinds
                .iter()
                .copied()
                .filter(|&k| !k.is_variant() || has_kind(table, k))
                .collect();
            cols.extend(raw);
            let _ = write!(s, "| size |");
            for k in &cols {
                let _ = write!(s, " {} |", k.title());
            }
            if raw.is_some() {
                let _ = write!(s, " {} |", over_raw_title(key.better, &key.metric));
            }
            let _ = write!(s, " ours/best peer | paired |");
            if aggreg {
                let _ = write!(s, " aggreg/best peer |");
            }
            s.push('\n');
            let _ = writeln!(
                s,
                "|---:|{}---:|",
                "---:|".repeat(cols.len() + 1 + usize::from(raw.is_some()) + usize::from(aggreg))
            );
            for (size, row) in table {
                let cells = cells_of(row, key.better);
                let _ = write!(s, "| {} |", human_size(*size));
                for k in &cols {
                    let _ = write!(
                        s,
                        " {} |",
                        cell_text(cells.get(k), ctx.runs_per_impl, false)
                    );
                }
                if let Some(raw) = raw {
                    let o = over_raw(raw, key.better, &cells).unwrap_or_else(|| "–".into());
                    let _ = write!(s, " {o} |");
                }
                let r = ratio(key.better, &cells).map_or("–".into(), |r| format!("{r:.2}"));
                let p = paired_to_best_peer(key.better, row, &cells)
                    .map_or("–".into(), |r| format!("{r:.2}"));
                let _ = write!(s, " {r} | {p} |");
                if aggreg {
                    let a = ratio_of(Kind::OursAggreg, key.better, &cells)
                        .map_or("–".into(), |r| format!("{r:.2}"));
                    let _ = write!(s, " {a} |");
                }
                s.push('\n');
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

/// `## Scheduler overhead (<t>)`: ours with the default scheduler against
/// ours with the aggregating one: one-segment ping-pong latency (target:
/// within 3 %), message rate, and multiseg against the best peer (target:
/// [`multiseg_target`] up to 1 KiB per segment). Subsections without both
/// schedulers' figures are left out.
fn scheduler_section(s: &mut String, t: Transport, all: &BTreeMap<TableKey, Table>, runs: usize) {
    let _ = writeln!(s, "## Scheduler overhead ({t})\n");
    let _ = writeln!(
        s,
        "`ours (adaptive)` runs with `MADMPI_STRATEGY=adaptive` (the default: the first send to a \
         peer after a progress call leaves at once, those posted after it before the next one \
         leave together), \
         `ours (aggreg)` with `MADMPI_STRATEGY=aggreg` (NewMadeleine's aggregation: \
         non-blocking sends stay queued until the next progress call, and the chunks queued \
         for one peer, across communicators, leave in one packet); same binaries, interleaved \
         in the same rounds, back to back (which runs first alternates from round to round). Cells: median over runs (min–max over runs). \
         `aggreg/adaptive` compares medians, `paired` is the median over rounds of the ratio of \
         the two runs of a round (what the machine did during a round weighs on both), `best` \
         compares the best single repetitions (least disturbed by other load).\n"
    );
    let both = |row: &BTreeMap<Kind, Vec<Sample>>| {
        row.contains_key(&Kind::Ours) && row.contains_key(&Kind::OursAggreg)
    };
    let pair = |cells: &BTreeMap<Kind, Cell>| {
        format!(
            "{} | {}",
            cell_text(cells.get(&Kind::Ours), runs, false),
            cell_text(cells.get(&Kind::OursAggreg), runs, false)
        )
    };

    if let Some((key, table)) = find(all, t, "pingpong", "lat", "lat_us", 2) {
        let rows: Vec<_> = table
            .iter()
            .filter(|(size, row)| **size <= OVERHEAD_MAX_SIZE && both(row))
            .collect();
        if !rows.is_empty() {
            let _ = writeln!(
                s,
                "### One-segment ping-pong latency (`pingpong` `lat`, µs, lower is better)\n\n\
                 Target (issue #6): aggreg within 3 % of adaptive, aggreg/adaptive ≤ \
                 {OVERHEAD_TARGET:.2}; the verdict uses the paired ratio.\n"
            );
            let _ = writeln!(
                s,
                "| size | ours (adaptive) | ours (aggreg) | aggreg/adaptive | paired | best | target ≤ \
                 {OVERHEAD_TARGET:.2} |\n|---:|---:|---:|---:|---:|---:|---|"
            );
            for (size, row) in rows {
                let cells = cells_of(row, key.better);
                let paired = paired_ratio(row, Kind::OursAggreg, Kind::Ours);
                let (r, p, b, v) = match (aggreg_over_ours(&cells), paired) {
                    (Some((r, b)), Some(p)) => (
                        format!("{r:.3}"),
                        format!("{p:.3}"),
                        format!("{b:.3}"),
                        if p <= OVERHEAD_TARGET {
                            "met"
                        } else {
                            "missed"
                        },
                    ),
                    _ => ("–".into(), "–".into(), "–".into(), "–"),
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {r} | {p} | {b} | {v} |",
                    human_size(*size),
                    pair(&cells)
                );
            }
            s.push('\n');
        }
    }

    if let Some((key, table)) = find(all, t, "msgrate", "uni", "msg_rate_M", 2) {
        let rows: Vec<_> = table.iter().filter(|(_, row)| both(row)).collect();
        if !rows.is_empty() {
            let _ = writeln!(
                s,
                "### Message rate (`msgrate` `uni`, 10⁶ messages/s, higher is better)\n\n\
                 aggreg/adaptive > 1 means aggregation sends more messages per second.\n"
            );
            let _ = writeln!(
                s,
                "| size | ours (adaptive) | ours (aggreg) | aggreg/adaptive | best |\n\
                 |---:|---:|---:|---:|---:|"
            );
            for (size, row) in rows {
                let cells = cells_of(row, key.better);
                let (r, b) = aggreg_over_ours(&cells)
                    .map_or(("–".into(), "–".into()), |(r, b)| {
                        (format!("{r:.3}"), format!("{b:.3}"))
                    });
                let _ = writeln!(
                    s,
                    "| {} | {} | {r} | {b} |",
                    human_size(*size),
                    pair(&cells)
                );
            }
            s.push('\n');
        }
    }

    if let Some((key, table)) = find(all, t, "multiseg", "multiseg", "lat_us", 2) {
        let rows: Vec<_> = table
            .iter()
            .filter(|(_, row)| row.contains_key(&Kind::OursAggreg))
            .collect();
        if !rows.is_empty() {
            let target = multiseg_target(t);
            let _ = writeln!(
                s,
                "### Multi-segment (`multiseg`, 16 segments on 16 communicators, µs, lower is \
                 better)\n\n\
                 Target (issue #6, {t}): for segments up to 1 KiB, aggreg at least {target}× \
                 faster than the better of MPICH and Open MPI (aggreg/best peer ≤ {:.2}).\n",
                1.0 / target
            );
            let _ = writeln!(
                s,
                "| segment | ours (adaptive) | ours (aggreg) | best peer | aggreg/adaptive | \
                 aggreg/best peer |\n|---:|---:|---:|---:|---:|---|"
            );
            for (size, row) in rows {
                let cells = cells_of(row, key.better);
                let peer = best_peer(key.better, &cells).map_or("–".into(), |(k, _)| {
                    format!("{}: {}", k.title(), cell_text(cells.get(&k), runs, false))
                });
                let r = aggreg_over_ours(&cells).map_or("–".into(), |(r, _)| format!("{r:.3}"));
                let v = multiseg_verdict(t, *size, &cells).unwrap_or_else(|| "–".into());
                let _ = writeln!(
                    s,
                    "| {} | {} | {peer} | {r} | {v} |",
                    human_size(*size),
                    pair(&cells)
                );
            }
            s.push('\n');
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::parse::parse_line;

    /// A run of ours with no measurements, for other modules' tests.
    pub(crate) fn run_record() -> RunRecord {
        run(Kind::Ours, 0, &[])
    }

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
            handoff_ns: [None, None],
        }
    }

    fn lat(med: f64) -> String {
        format!(
            "RESULT bench=pingpong mode=lat size=8 ranks=2 iters=1 reps=1 metric=lat_us \
             better=lower min={med} med={med} max={med}"
        )
    }

    /// A run's median `med` in round `round`.
    fn in_round(round: usize, med: f64) -> Sample {
        Sample {
            med,
            round,
            ..Sample::default()
        }
    }

    /// The paired ratio takes the two runs of each round together: a round
    /// where the machine was slow for both gives 1, not an outlier.
    #[test]
    fn paired_ratio_per_round() {
        let s = in_round;
        let mut row = BTreeMap::new();
        row.insert(Kind::Ours, vec![s(0, 1.0), s(1, 2.0), s(2, 1.0), s(3, 1.0)]);
        // Round 4 of aggreg has no default run to pair with: left out.
        row.insert(
            Kind::OursAggreg,
            vec![s(0, 1.02), s(1, 2.0), s(2, 1.0), s(3, 1.04), s(4, 9.0)],
        );
        let p = paired_ratio(&row, Kind::OursAggreg, Kind::Ours).unwrap();
        assert!((p - 1.01).abs() < 1e-9, "{p}");
        assert_eq!(paired_ratio(&row, Kind::Ours, Kind::Mpich), None);
    }

    /// The paired column pairs ours with the peer that is best by median, in every round,
    /// even in rounds where the other peer happened to be faster.
    #[test]
    fn paired_against_the_best_peer_by_median() {
        let s = in_round;
        let mut row = BTreeMap::new();
        row.insert(Kind::Ours, vec![s(0, 2.0), s(1, 4.0), s(2, 2.2)]);
        row.insert(Kind::Mpich, vec![s(0, 2.0), s(1, 2.0), s(2, 2.0)]);
        row.insert(Kind::OpenMpi, vec![s(0, 1.0), s(1, 4.0), s(2, 4.0)]);
        let cells = cells_of(&row, Better::Lower);
        assert_eq!(best_peer(Better::Lower, &cells).unwrap().0, Kind::Mpich);
        // Against MPICH each round: 1.0, 2.0, 1.1 -> 1.1 (the better of the two peers in
        // each round would give 2.0, 2.0, 1.1).
        let p = paired_to_best_peer(Better::Lower, &row, &cells).unwrap();
        assert!((p - 1.1).abs() < 1e-9, "{p}");
        row.remove(&Kind::Mpich);
        row.remove(&Kind::OpenMpi);
        let cells = cells_of(&row, Better::Lower);
        assert_eq!(paired_to_best_peer(Better::Lower, &row, &cells), None);
    }

    #[test]
    fn cells_and_ratios() {
        let sample = |med: f64| Sample {
            med,
            min: med - 0.5,
            max: med + 0.5,
            ..Sample::default()
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
        assert!(!md.contains("aggreg"), "{md}");
        assert!(!md.contains("Scheduler"), "{md}");
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
            md.contains("| 8 B | 30.00 (30.00–30.00) | 40.00 (40.00–40.00) | 20.00 (20.00–20.00) | +10.00 | 0.75 | 0.75 |"),
            "{md}"
        );
        assert!(md.contains("| 1 MiB | 900.0 (900.0–900.0) | 800.0 (800.0–800.0) | 1000 (1000–1000) | ×0.90 | 1.12 | 1.12 |"), "{md}");
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
                    ..Sample::default()
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
                    ..Sample::default()
                }],
                Better::Lower,
            )
            .unwrap(),
        );
        assert_eq!(ratio(Better::Lower, &cells), None);
        assert_eq!(
            over_raw(Kind::RawTcp, Better::Lower, &cells).as_deref(),
            Some("+0.500")
        );
        assert_eq!(
            over_raw(Kind::RawTcp, Better::Higher, &cells).as_deref(),
            Some("×2.00")
        );
        assert_eq!(over_raw(Kind::FiPingpong, Better::Lower, &cells), None);
    }

    /// A `RESULT` line of `bench`/`mode` with one value.
    fn line(bench: &str, mode: &str, size: u64, metric: &str, better: &str, v: f64) -> String {
        format!(
            "RESULT bench={bench} mode={mode} size={size} ranks=2 iters=1 reps=1 \
             metric={metric} better={better} min={v} med={v} max={v}"
        )
    }

    /// One run per implementation of pingpong (lat 8 B, 1 KiB, 4 KiB),
    /// msgrate (8 B), multiseg (4 B, 1 KiB, 8 KiB) and, without aggreg,
    /// barrier, over `t`. Values: (pingpong 8 B latency, msgrate, multiseg
    /// 4 B) per kind; the other sizes scale from them.
    fn scheduler_runs(t: Transport, values: &[(Kind, f64, f64, f64)]) -> Vec<RunRecord> {
        let mut runs = Vec::new();
        for &(k, lat, rate, seg) in values {
            let mut add = |bench: &str, lines: Vec<String>| {
                let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
                let mut r = run(k, 0, &refs);
                r.bench = bench.into();
                r.transport = t;
                runs.push(r);
            };
            add(
                "pingpong",
                [8, 1024, 4096]
                    .iter()
                    .map(|&n| {
                        line(
                            "pingpong",
                            "lat",
                            n,
                            "lat_us",
                            "lower",
                            lat * n as f64 / 8.0,
                        )
                    })
                    .collect(),
            );
            add(
                "msgrate",
                vec![line("msgrate", "uni", 8, "msg_rate_M", "higher", rate)],
            );
            add(
                "multiseg",
                [4, 1024, 8192]
                    .iter()
                    .map(|&n| {
                        line(
                            "multiseg",
                            "multiseg",
                            n,
                            "lat_us",
                            "lower",
                            seg * n as f64 / 4.0,
                        )
                    })
                    .chain([line("multiseg", "contig", 4, "lat_us", "lower", seg / 2.0)])
                    .collect(),
            );
            if k != Kind::OursAggreg {
                add(
                    "barrier",
                    vec![line("barrier", "barrier", 0, "lat_us", "lower", lat)],
                );
            }
        }
        runs
    }

    fn impls(kinds: &[Kind]) -> Vec<Impl> {
        let p = std::path::Path::new("/x");
        kinds.iter().map(|&k| Impl::new(k, p, p)).collect()
    }

    fn render_with(t: Transport, impls: &[Impl], runs: &[RunRecord]) -> String {
        let ctx = Context {
            timestamp: "t",
            host: "h",
            cpus: 2,
            impls,
            transports: &[t],
            runs_per_impl: 1,
            quick: false,
            nranks: 2,
            notes: &[],
            bench_order: &["pingpong", "barrier", "msgrate", "multiseg"],
            plots: &[],
        };
        render(&ctx, runs)
    }

    /// The cells of the first table row starting with `start`.
    fn row<'a>(md: &'a str, start: &str) -> Vec<&'a str> {
        md.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("no row `{start}` in:\n{md}"))
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect()
    }

    #[test]
    fn aggreg_variant_columns_targets_and_scheduler_section() {
        let kinds = [Kind::Ours, Kind::OursAggreg, Kind::Mpich, Kind::OpenMpi];
        // Over TCP: aggreg 0.2 µs slower at 8 B (1 % — within target),
        // multiseg 4 B: aggreg 10 µs vs best peer 50 µs (5× — met); at
        // 1 KiB: the same ratio; rate: aggreg 2.0 vs default 1.6.
        let runs = scheduler_runs(
            Transport::Tcp,
            &[
                (Kind::Ours, 20.0, 1.6, 40.0),
                (Kind::OursAggreg, 20.2, 2.0, 10.0),
                (Kind::Mpich, 30.0, 1.0, 50.0),
                (Kind::OpenMpi, 25.0, 1.2, 60.0),
            ],
        );
        let md = render_with(Transport::Tcp, &impls(&kinds), &runs);

        // Headline: aggreg column and its own ratio; ours/best peer unchanged
        // (aggreg is not a peer: 20/25, not 20/20.2).
        assert!(
            md.contains(
                "| measurement | ours | ours (aggreg) | MPICH | Open MPI | ours/best peer | \
                 aggreg/best peer |"
            ),
            "{md}"
        );
        let lat = row(&md, "| ping-pong latency 8 B (µs) |");
        assert_eq!(lat[5], "0.80 (lower)", "{lat:?}");
        assert_eq!(lat[6], "0.81", "{lat:?}");
        let seg = row(&md, "| multiseg 16×4 B (µs) |");
        assert_eq!(seg[5], "0.80 (lower)", "{seg:?}");
        assert_eq!(seg[6], "0.20 (speedup 5.00×, target ≥ 4×: met)", "{seg:?}");
        let seg = row(&md, "| multiseg 16×1 KiB (µs) |");
        assert!(seg[6].ends_with("target ≥ 4×: met)"), "{seg:?}");
        // Beyond 1 KiB per segment: the ratio, no target.
        let seg = row(&md, "| multiseg 16×8 KiB (µs) |");
        assert_eq!(seg[6], "0.20", "{seg:?}");
        // Barrier: aggreg did not run there.
        let bar = row(&md, "| barrier (µs), 2 ranks |");
        assert_eq!(bar[2], "–", "{bar:?}");
        assert_eq!(bar[6], "–", "{bar:?}");
        assert!(md.contains("at least 4× faster"), "{md}");

        // Scheduler overhead section.
        assert!(md.contains("## Scheduler overhead (tcp)"), "{md}");
        assert!(md.contains("MADMPI_STRATEGY=aggreg"), "{md}");
        let sched =
            &md[md.find("## Scheduler overhead").unwrap()..md.find("## All results").unwrap()];
        let r = row(sched, "| 8 B |");
        assert_eq!(
            r,
            [
                "8 B",
                "20.00 (20.00–20.00)",
                "20.20 (20.20–20.20)",
                "1.010",
                "1.010",
                "1.010",
                "met"
            ]
        );
        let r = row(sched, "| 1 KiB |");
        assert_eq!(r[3..], ["1.010", "1.010", "1.010", "met"]);
        assert!(
            !sched.contains("| 4 KiB |"),
            "sizes up to 1 KiB only: {sched}"
        );
        // Message rate: aggreg/adaptive 1.25.
        let r = row(&sched[sched.find("### Message rate").unwrap()..], "| 8 B |");
        assert_eq!(r[3..], ["1.250", "1.250"]);
        // Multiseg: best peer MPICH (50 µs), aggreg/adaptive 0.25, target met.
        let ms = &sched[sched.find("### Multi-segment").unwrap()..];
        let r = row(ms, "| 4 B |");
        assert_eq!(r[3], "MPICH: 50.00 (50.00–50.00)");
        assert_eq!(r[4], "0.250");
        assert_eq!(r[5], "0.20 (speedup 5.00×, target ≥ 4×: met)");
        assert_eq!(row(ms, "| 8 KiB |")[5], "0.20");

        // Per-benchmark tables: the aggreg column where it ran only.
        assert!(
            md.contains(
                "| size | ours | ours (aggreg) | MPICH | Open MPI | ours/best peer | paired | \
                 aggreg/best peer |"
            ),
            "{md}"
        );
        let barrier = &md[md.find("### barrier / barrier").unwrap()..];
        let header = barrier.lines().find(|l| l.starts_with("| size |")).unwrap();
        assert_eq!(
            header,
            "| size | ours | MPICH | Open MPI | ours/best peer | paired |"
        );
        // multiseg contig: aggreg ran there too (same program).
        let contig = &md[md.find("### multiseg / contig").unwrap()..];
        assert!(contig.contains("ours (aggreg)"), "{contig}");

        // Shared memory: 1.2× target; a slow aggreg misses both targets.
        let runs = scheduler_runs(
            Transport::Shm,
            &[
                (Kind::Ours, 1.0, 2.0, 4.0),
                (Kind::OursAggreg, 1.1, 1.5, 4.5),
                (Kind::Mpich, 1.2, 3.0, 5.0),
            ],
        );
        let md = render_with(
            Transport::Shm,
            &impls(&[Kind::Ours, Kind::OursAggreg, Kind::Mpich]),
            &runs,
        );
        let seg = row(&md, "| multiseg 16×4 B (µs) |");
        assert_eq!(
            seg[5], "0.90 (speedup 1.11×, target ≥ 1.2×: missed)",
            "{seg:?}"
        );
        let sched = &md[md.find("## Scheduler overhead (shm)").unwrap()..];
        assert_eq!(
            row(sched, "| 8 B |")[3..],
            ["1.100", "1.100", "1.100", "missed"]
        );
        assert!(sched.contains("target ≥ 1.2×") || sched.contains("at least 1.2×"));
    }

    #[test]
    fn aggreg_alone_has_no_peer_ratio() {
        let runs = scheduler_runs(
            Transport::Shm,
            &[
                (Kind::Ours, 1.0, 2.0, 4.0),
                (Kind::OursAggreg, 1.0, 2.0, 2.0),
            ],
        );
        let md = render_with(
            Transport::Shm,
            &impls(&[Kind::Ours, Kind::OursAggreg]),
            &runs,
        );
        let seg = row(&md, "| multiseg 16×4 B (µs) |");
        assert_eq!(seg[3..], ["– (lower)", "–"], "{seg:?}");
        let ms = &md[md.find("### Multi-segment").unwrap()..];
        let r = row(ms, "| 4 B |");
        assert_eq!(r[3..], ["–", "0.500", "–"], "{r:?}");
        let mut cells = BTreeMap::new();
        let c = |v: f64| {
            Cell::of(
                &[Sample {
                    med: v,
                    min: v,
                    max: v,
                    ..Sample::default()
                }],
                Better::Lower,
            )
            .unwrap()
        };
        cells.insert(Kind::OursAggreg, c(1.0));
        cells.insert(Kind::RawTcp, c(0.5));
        assert_eq!(best_peer(Better::Lower, &cells), None);
        assert_eq!(ratio_of(Kind::OursAggreg, Better::Lower, &cells), None);
        cells.insert(Kind::OpenMpi, c(4.0));
        cells.insert(Kind::Mpich, c(2.0));
        assert_eq!(best_peer(Better::Lower, &cells), Some((Kind::Mpich, 2.0)));
        assert_eq!(
            best_peer(Better::Higher, &cells),
            Some((Kind::OpenMpi, 4.0))
        );
        assert_eq!(ratio_of(Kind::OursAggreg, Better::Lower, &cells), Some(0.5));
        assert_eq!(ratio(Better::Lower, &cells), None);
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
