//! The "networks" part (`--bench networks`): ping-pong latency and bandwidth of ours over each
//! emulated network (`MADMPI_TRANSPORTS=emu`, `MADMPI_EMU=<profile>`), next to the points the
//! papers publish and to what the emulator's model predicts, with the ratio; one figure per
//! network (`plots/networks-<id>.png|svg`). See `docs/networks.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use madmpi_transports::emu::profile;
use plotters::prelude::*;

use crate::parse::parse_line;
use crate::proc::{self, Outcome, Spec};

/// A published figure.
pub struct Point {
    /// `lat` (µs, the smallest message) or `bw` (MB/s, the largest).
    pub metric: &'static str,
    pub value: f64,
    /// Which layer was measured (raw network, Madeleine II, MPI).
    pub layer: &'static str,
    pub source: &'static str,
}

/// One measured curve.
pub struct Series {
    pub id: &'static str,
    pub emu: &'static str,
    pub env: &'static [(&'static str, &'static str)],
    pub points: &'static [Point],
}

const fn p(metric: &'static str, value: f64, layer: &'static str, source: &'static str) -> Point {
    Point {
        metric,
        value,
        layer,
        source,
    }
}

const S000: &str = "seed 000 (Madeleine II, INRIA RR-3976), §5.2";
const S002: &str = "seed 002 (Madeleine on top of VIA), §Performance";
const S004: &str = "seed 004 (BCL-3 on DAWNING-3000), §4 and table 1";
const ISSUE: &str = "era documentation as given in issue 18";

/// The curves and their published points.
pub const SERIES: &[Series] = &[
    Series {
        id: "bip",
        emu: "bip",
        env: &[],
        points: &[
            p("lat", 5.0, "raw BIP", S000),
            p("bw", 126.0, "raw BIP", S000),
            p("lat", 7.0, "Madeleine II / BIP", S000),
            p("bw", 122.0, "Madeleine II / BIP", S000),
        ],
    },
    Series {
        id: "sisci",
        emu: "sisci",
        env: &[],
        points: &[
            p("lat", 3.9, "Madeleine II / SISCI", S000),
            p("bw", 82.0, "Madeleine II / SISCI", S000),
        ],
    },
    Series {
        id: "via-pool",
        emu: "via",
        env: &[],
        points: &[
            p("lat", 35.0, "M-VIA, no data, no registration", S002),
            p("bw", 11.0, "Madeleine II / VIA, Fast Ethernet", S000),
        ],
    },
    Series {
        id: "via-dynamic",
        emu: "via",
        env: &[("MADMPI_EMU_OFF", "via-pool")],
        points: &[
            p("lat", 53.0, "Madeleine / M-VIA, dynamic registration", S002),
            p("bw", 11.0, "Madeleine II / VIA, Fast Ethernet", S000),
        ],
    },
    Series {
        id: "bcl3",
        emu: "bcl3",
        env: &[],
        points: &[
            p("lat", 18.3, "raw BCL-3, inter-node", S004),
            p("bw", 146.0, "raw BCL-3, inter-node", S004),
            p("lat", 23.7, "MPI / BCL-3, inter-node", S004),
            p("bw", 131.0, "MPI / BCL-3, inter-node", S004),
        ],
    },
    Series {
        id: "bcl3-lossy",
        emu: "bcl3",
        env: &[("MADMPI_EMU_LOSS", "1e-4")],
        points: &[
            p("lat", 23.7, "MPI / BCL-3, inter-node", S004),
            p("bw", 131.0, "MPI / BCL-3, inter-node", S004),
        ],
    },
    Series {
        id: "gm",
        emu: "gm",
        env: &[],
        points: &[
            p("lat", 13.37, "GM, best host", S004),
            p("bw", 140.0, "GM", S004),
        ],
    },
    Series {
        id: "mx",
        emu: "mx",
        env: &[],
        points: &[
            p("lat", 2.5, "Myri-10G MX", ISSUE),
            p("bw", 1150.0, "Myri-10G MX", ISSUE),
        ],
    },
    Series {
        id: "elan",
        emu: "elan",
        env: &[],
        points: &[
            p("lat", 1.5, "Quadrics Elan", ISSUE),
            p("bw", 835.0, "Quadrics Elan", ISSUE),
        ],
    },
];

/// One curve as measured: (size, median latency µs, median bandwidth MB/s).
type Curve = Vec<(u64, f64, f64)>;

/// Run every series (`only`: a subset of ids), write the figures into `plots`, and return
/// the markdown section.
pub fn run(
    repo: &Path,
    run_dir: &Path,
    log_dir: &Path,
    quick: bool,
    timeout: Duration,
) -> Result<String, String> {
    let dir = run_dir.join("networks");
    proc::mkdirs(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let exe = dir.join("pingpong");
    let build = Spec::new(&[
        repo.join("bin/mpicc").display().to_string(),
        "-O2".into(),
        "-o".into(),
        exe.display().to_string(),
        repo.join("bench/c/pingpong.c").display().to_string(),
    ]);
    let b = proc::run(&build, timeout, &log_dir.join("networks-build"));
    if b.outcome != Outcome::Ok {
        return Err(format!(
            "building pingpong with bin/mpicc: {}",
            b.outcome.detail()
        ));
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Emulated networks\n\nPing-pong of ours (`pingpong --mode lat`, 2 ranks, one host) \
         over each emulated NIC. *lat*: the smallest half round trip over the sizes; *bw*: the \
         largest size / half round trip. *model*: what the profile's arithmetic predicts for a \
         lone packet (no MPI). The published points are the papers'; the ratio is ours / \
         published. Measured on a shared machine: see the load note at the top.\n"
    );
    let _ = writeln!(
        md,
        "| network | metric | ours | model | published | layer | ours/published | source |\n\
         |---|---|---|---|---|---|---|---|"
    );
    let plots = run_dir.join("plots");
    proc::mkdirs(&plots).map_err(|e| format!("{}: {e}", plots.display()))?;
    let mut failures = Vec::new();
    for s in SERIES {
        eprintln!("madmpi-bench: networks: {}", s.id);
        let mut spec = Spec::new(&[
            repo.join("bin/mpirun").display().to_string(),
            "-n".into(),
            "2".into(),
            exe.display().to_string(),
            "--mode".into(),
            "lat".into(),
            "--max".into(),
            (1u64 << 20).to_string(),
        ]);
        if quick {
            spec.argv.push("--quick".into());
        }
        spec.env = [("MADMPI_TRANSPORTS", "emu"), ("MADMPI_EMU", s.emu)]
            .iter()
            .chain(s.env)
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec.done_line = Some("# done".into());
        let f = proc::run(&spec, timeout, &log_dir.join(format!("networks-{}", s.id)));
        let curve: Curve = {
            let mut lat = std::collections::BTreeMap::new();
            for l in f.stdout.lines() {
                if let Ok(Some(m)) = parse_line(l) {
                    let e = lat.entry(m.size).or_insert((f64::NAN, f64::NAN));
                    match m.metric.as_str() {
                        "lat_us" => e.0 = m.med,
                        "bw_MBps" => e.1 = m.med,
                        _ => {}
                    }
                }
            }
            lat.into_iter().map(|(k, (a, b))| (k, a, b)).collect()
        };
        if f.outcome != Outcome::Ok || curve.is_empty() {
            failures.push(format!("{}: {}", s.id, f.outcome.detail()));
            let _ = writeln!(md, "| {} | | {} | | | | | |", s.id, f.outcome.detail());
            continue;
        }
        let model = model_curve(s, &curve);
        let best_lat = curve.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
        let best_bw = curve
            .iter()
            .map(|c| c.2)
            .filter(|x| x.is_finite())
            .fold(0.0, f64::max);
        let model_lat = model.iter().map(|c| c.1).fold(f64::INFINITY, f64::min);
        let model_bw = model.iter().map(|c| c.2).fold(0.0, f64::max);
        for pt in s.points {
            let (ours, m, unit) = if pt.metric == "lat" {
                (best_lat, model_lat, "µs")
            } else {
                (best_bw, model_bw, "MB/s")
            };
            let ratio = ours / pt.value;
            let flag = if (0.85..=1.15).contains(&ratio) {
                ""
            } else {
                " (outside ±15 %)"
            };
            let _ = writeln!(
                md,
                "| {} | {} | {ours:.2} {unit} | {m:.2} | {} {unit} | {} | {ratio:.2}{flag} | {} |",
                s.id, pt.metric, pt.value, pt.layer, pt.source
            );
        }
        if let Err(e) = figure(&plots, s, &curve, &model) {
            failures.push(format!("{}: figure: {e}", s.id));
        }
    }
    for f in &failures {
        let _ = writeln!(md, "\n- not measured: {f}");
    }
    let _ = writeln!(
        md,
        "\nFigures: `plots/networks-<network>.png` (latency and bandwidth against size, ours, \
         the model, the published points as markers)."
    );
    Ok(md)
}

/// The model's prediction at the measured sizes: engine packets carry a header, ignored here.
fn model_curve(s: &Series, curve: &Curve) -> Curve {
    let Ok(p) = profile::find(s.emu) else {
        return Vec::new();
    };
    let mut on = p.default_modules();
    for (k, v) in s.env {
        if *k == "MADMPI_EMU_OFF" {
            for name in v.split(',') {
                if let Some(i) = p.modules.iter().position(|m| m.name == name) {
                    on &= !(1 << i);
                }
            }
        }
    }
    curve
        .iter()
        .map(|&(n, _, _)| {
            let t = p.one_way_ns(n as usize, on) as f64 / 1000.0;
            (n, t, if n == 0 { 0.0 } else { n as f64 / t })
        })
        .collect()
}

fn figure(dir: &Path, s: &Series, curve: &Curve, model: &Curve) -> Result<(), String> {
    crate::plots::fonts()?;
    let png: PathBuf = dir.join(format!("networks-{}.png", s.id));
    let root = BitMapBackend::new(&png, (1100, 450)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    let (left, right) = root.split_horizontally(550);
    for (area, bw) in [(left, false), (right, true)] {
        let pick = |c: &(u64, f64, f64)| if bw { c.2 } else { c.1 };
        let pts: Vec<(f64, f64)> = curve
            .iter()
            .filter(|c| c.0 > 0 && pick(c).is_finite() && pick(c) > 0.0)
            .map(|c| (c.0 as f64, pick(c)))
            .collect();
        let mpts: Vec<(f64, f64)> = model
            .iter()
            .filter(|c| c.0 > 0 && pick(c) > 0.0)
            .map(|c| (c.0 as f64, pick(c)))
            .collect();
        let published: Vec<f64> = s
            .points
            .iter()
            .filter(|p| (p.metric == "bw") == bw)
            .map(|p| p.value)
            .collect();
        let ys = pts
            .iter()
            .chain(&mpts)
            .map(|p| p.1)
            .chain(published.iter().copied());
        let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(a, b), y| (a.min(y), b.max(y)));
        if !lo.is_finite() || pts.is_empty() {
            continue;
        }
        let xmax = pts.iter().map(|p| p.0).fold(1.0, f64::max);
        let mut c = ChartBuilder::on(&area)
            .caption(
                format!(
                    "{} {}",
                    s.id,
                    if bw {
                        "bandwidth (MB/s)"
                    } else {
                        "latency (µs)"
                    }
                ),
                ("sans-serif", 18),
            )
            .margin(10)
            .x_label_area_size(30)
            .y_label_area_size(50)
            .build_cartesian_2d((1f64..xmax).log_scale(), (lo * 0.5..hi * 2.0).log_scale())
            .map_err(|e| e.to_string())?;
        c.configure_mesh()
            .x_desc("bytes")
            .draw()
            .map_err(|e| e.to_string())?;
        c.draw_series(LineSeries::new(pts.clone(), &BLUE))
            .map_err(|e| e.to_string())?
            .label("ours (MPI over emu)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], BLUE));
        c.draw_series(LineSeries::new(mpts, &GREEN))
            .map_err(|e| e.to_string())?
            .label("model (one packet)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 15, y)], GREEN));
        let at = if bw { xmax } else { 1.0 };
        c.draw_series(
            published
                .iter()
                .map(|&v| Circle::new((at, v), 5, RED.filled())),
        )
        .map_err(|e| e.to_string())?
        .label("published")
        .legend(|(x, y)| Circle::new((x + 7, y), 4, RED.filled()));
        c.configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()
            .map_err(|e| e.to_string())?;
    }
    root.present().map_err(|e| e.to_string())
}
