//! The "networks" part (`--bench networks`): ping-pong latency and bandwidth of ours over each
//! emulated network (`MADMPI_TRANSPORTS=emu`, `MADMPI_EMU=<profile>`), through MPI and through
//! the Madeleine API, next to the points the papers publish and to what the emulator's model
//! predicts; then the experiments of the NewMadeleine paper over the emulated MX and the
//! heterogeneous multi-rail (`extra`). Figures: one per network and one per paper (`figures`).
//! See `docs/networks.md`.

mod extra;
mod figures;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use madmpi_transports::emu::profile;

use crate::cli::Options;
use crate::parse::parse_line;
use crate::proc::{self, Outcome, Spec};
use Layer::{Madeleine, Mpi, Raw};

/// The software layer a figure measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layer {
    /// The network itself (its own test program, no middleware): compared with the model,
    /// which emulates it.
    Raw,
    /// Madeleine (II) over the network: compared with our curves through the Madeleine API.
    Madeleine,
    /// MPI over the network: compared with our curves through MPI.
    Mpi,
}

impl Layer {
    /// What a point of this layer is compared with, as the table says it.
    pub fn compared(self) -> &'static str {
        match self {
            Layer::Raw => "model (raw network)",
            Layer::Madeleine => "ours (Madeleine API)",
            Layer::Mpi => "ours (MPI)",
        }
    }
}

/// A published figure.
#[derive(Clone, Copy)]
pub struct Point {
    /// `lat` (µs, the smallest message) or `bw` (MB/s, the largest).
    pub metric: &'static str,
    pub value: f64,
    /// Which layer was measured, in words (raw network, Madeleine II, MPI).
    pub layer: &'static str,
    pub source: &'static str,
    /// The layer: a point is attached only to curves of its own layer (or, raw, to a curve of
    /// its network, and compared with the model).
    pub kind: Layer,
}

/// Which program measures a curve.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Prog {
    /// `bench/c/pingpong.c --mode lat`: `MPI_Send` / `MPI_Recv`.
    PingPong,
    /// `bench/c/networks/madpingpong.c`: the Madeleine API (an EXPRESS header and the payload
    /// CHEAPER per message).
    Madeleine,
}

impl Prog {
    /// The layer this program measures.
    pub fn layer(self) -> Layer {
        match self {
            Prog::PingPong => Layer::Mpi,
            Prog::Madeleine => Layer::Madeleine,
        }
    }
}

/// One measured curve.
pub struct Series {
    pub id: &'static str,
    /// `MADMPI_EMU`.
    pub emu: &'static str,
    pub env: &'static [(&'static str, &'static str)],
    pub prog: Prog,
    pub points: &'static [Point],
}

const fn p(
    metric: &'static str,
    value: f64,
    layer: &'static str,
    source: &'static str,
    kind: Layer,
) -> Point {
    Point {
        metric,
        value,
        layer,
        source,
        kind,
    }
}

const S000: &str = "seed 000 (Madeleine II, INRIA RR-3976), §5.2";
const S002: &str = "seed 002 (Madeleine on top of VIA), §Performance";
const S003: &str = "seed 003 (NewMadeleine), §5.1: MAD-MPI adds < 0.5 µs to MX/Elan";
const S004: &str = "seed 004 (BCL-3 on DAWNING-3000), §4 and table 1";
const ISSUE: &str = "era documentation as given in issue 18";

const BCL3_MPI: [Point; 2] = [
    p("lat", 23.7, "MPI / BCL-3, inter-node", S004, Mpi),
    p("bw", 131.0, "MPI / BCL-3, inter-node", S004, Mpi),
];

/// The curves and their published points. Each point is attached to the curves of its own
/// layer only: Madeleine II's (and Madeleine over VIA's) to the `mad-` curves, measured through
/// the Madeleine API; MPI's (BCL-3's MPI, MAD-MPI over MX and Elan) to the MPI curves; the raw
/// network's to the MPI curve of that network, where the model (not ours) is compared with
/// it. A curve may have no point of its layer (MPI over SISCI): the table shows it without a
/// comparison. `layers_are_consistent` checks this and that every point is compared.
pub const SERIES: &[Series] = &[
    Series {
        id: "bip",
        emu: "bip",
        env: &[],
        prog: Prog::PingPong,
        points: &[
            p("lat", 5.0, "raw BIP", S000, Raw),
            p("bw", 126.0, "raw BIP", S000, Raw),
        ],
    },
    Series {
        id: "mad-bip",
        emu: "bip",
        env: &[],
        prog: Prog::Madeleine,
        points: &[
            p("lat", 7.0, "Madeleine II / BIP", S000, Madeleine),
            p("bw", 122.0, "Madeleine II / BIP", S000, Madeleine),
        ],
    },
    Series {
        id: "sisci",
        emu: "sisci",
        env: &[],
        prog: Prog::PingPong,
        points: &[],
    },
    Series {
        id: "mad-sisci",
        emu: "sisci",
        env: &[],
        prog: Prog::Madeleine,
        points: &[
            p("lat", 3.9, "Madeleine II / SISCI", S000, Madeleine),
            p("bw", 82.0, "Madeleine II / SISCI", S000, Madeleine),
        ],
    },
    Series {
        id: "via-pool",
        emu: "via",
        env: &[],
        prog: Prog::PingPong,
        points: &[p("lat", 35.0, "M-VIA, no data, no registration", S002, Raw)],
    },
    Series {
        id: "mad-via-pool",
        emu: "via",
        env: &[],
        prog: Prog::Madeleine,
        points: &[p(
            "bw",
            11.0,
            "Madeleine / M-VIA, Fast Ethernet",
            S002,
            Madeleine,
        )],
    },
    Series {
        id: "via-dynamic",
        emu: "via",
        env: &[("MADMPI_EMU_OFF", "via-pool")],
        prog: Prog::PingPong,
        points: &[],
    },
    Series {
        id: "mad-via-dynamic",
        emu: "via",
        env: &[("MADMPI_EMU_OFF", "via-pool")],
        prog: Prog::Madeleine,
        points: &[
            p(
                "lat",
                53.0,
                "Madeleine / M-VIA, dynamic registration",
                S002,
                Madeleine,
            ),
            p(
                "bw",
                11.0,
                "Madeleine / M-VIA, Fast Ethernet",
                S002,
                Madeleine,
            ),
        ],
    },
    Series {
        id: "bcl3",
        emu: "bcl3",
        env: &[],
        prog: Prog::PingPong,
        points: &[
            p("lat", 18.3, "raw BCL-3, inter-node", S004, Raw),
            p("bw", 146.0, "raw BCL-3, inter-node", S004, Raw),
            BCL3_MPI[0],
            BCL3_MPI[1],
        ],
    },
    Series {
        id: "bcl3-lossy",
        emu: "bcl3",
        env: &[("MADMPI_EMU_LOSS", "1e-4")],
        prog: Prog::PingPong,
        points: &BCL3_MPI,
    },
    Series {
        id: "gm",
        emu: "gm",
        env: &[],
        prog: Prog::PingPong,
        points: &[
            p("lat", 13.37, "raw GM, best host", S004, Raw),
            p("bw", 140.0, "raw GM", S004, Raw),
        ],
    },
    Series {
        id: "mx",
        emu: "mx",
        env: &[],
        prog: Prog::PingPong,
        points: &[
            p("lat", 2.5, "raw MX", ISSUE, Raw),
            p(
                "lat",
                3.0,
                "MAD-MPI / MX (raw + 0.5 µs, a bound)",
                S003,
                Mpi,
            ),
            p("bw", 1155.0, "MAD-MPI / MX", S003, Mpi),
        ],
    },
    Series {
        id: "elan",
        emu: "elan",
        env: &[],
        prog: Prog::PingPong,
        points: &[
            p("lat", 1.5, "raw Elan", ISSUE, Raw),
            p(
                "lat",
                2.0,
                "MAD-MPI / Elan (raw + 0.5 µs, a bound)",
                S003,
                Mpi,
            ),
            p("bw", 835.0, "MAD-MPI / Elan", S003, Mpi),
        ],
    },
    // Two emulated NICs to each peer, large messages cut over both (see `extra::rails`).
    Series {
        id: "rails",
        emu: "bip,sisci",
        env: &[("MADMPI_STRATEGY", "split_balance")],
        prog: Prog::PingPong,
        points: &[],
    },
];

/// The experiments besides the curves.
const EXPERIMENTS: [&str; 3] = ["multiseg", "indexed", "exactly_once"];

/// Every id `--networks` accepts.
pub fn ids() -> Vec<&'static str> {
    SERIES.iter().map(|s| s.id).chain(EXPERIMENTS).collect()
}

/// Whether `--networks` may name `id`.
pub fn known(id: &str) -> bool {
    ids().contains(&id)
}

/// One curve as measured: (size, median latency µs, median bandwidth MB/s).
pub type Curve = Vec<(u64, f64, f64)>;

/// Bytes of the engine's header before an eager message (`mpi-core/src/wire.rs`,
/// `EAGER_HDR_LEN`): the emulated wire carries them too.
const EAGER_HDR: usize = 32;

/// Bytes of a `madpingpong` message besides its payload: the head's 8-byte body length and
/// the 8-byte EXPRESS header.
const MAD_HEAD: usize = 16;

/// Where programs are built and run from, and how long a run may take.
pub struct Ctx<'a> {
    pub repo: &'a Path,
    pub dir: PathBuf,
    pub log_dir: &'a Path,
    pub quick: bool,
    pub timeout: Duration,
}

impl Ctx<'_> {
    /// Build `src` (relative to the repository) with `bin/mpicc` into `name`.
    pub fn build(&self, name: &str, src: &str) -> Result<PathBuf, String> {
        let exe = self.dir.join(name);
        let build = Spec::new(&[
            self.repo.join("bin/mpicc").display().to_string(),
            "-O2".into(),
            "-o".into(),
            exe.display().to_string(),
            self.repo.join(src).display().to_string(),
        ]);
        let b = proc::run(
            &build,
            self.timeout,
            &self.log_dir.join(format!("networks-build-{name}")),
        );
        if b.outcome != Outcome::Ok {
            return Err(format!(
                "building {src} with bin/mpicc: {}",
                b.outcome.detail()
            ));
        }
        Ok(exe)
    }

    /// Run `exe args` on 2 ranks with `env`; the measurements of `metric` by (mode, size).
    pub fn measure(
        &self,
        log: &str,
        exe: &Path,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Vec<crate::parse::Measurement>, String> {
        let mut spec = Spec::new(&[
            self.repo.join("bin/mpirun").display().to_string(),
            "-n".into(),
            "2".into(),
            exe.display().to_string(),
        ]);
        spec.argv.extend(args.iter().map(|a| a.to_string()));
        if self.quick {
            spec.argv.push("--quick".into());
        }
        spec.env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        spec.done_line = Some("# done".into());
        let f = proc::run(&spec, self.timeout, &self.log_dir.join(log));
        let got: Vec<_> = f
            .stdout
            .lines()
            .filter_map(|l| parse_line(l).ok().flatten())
            .collect();
        if f.outcome != Outcome::Ok || got.is_empty() {
            return Err(f.outcome.detail());
        }
        Ok(got)
    }
}

/// Run the curves and experiments `o` asks for, write the figures into `plots`, and return the
/// markdown section.
pub fn run(repo: &Path, run_dir: &Path, log_dir: &Path, o: &Options) -> Result<String, String> {
    let want = |id: &str| {
        o.networks_only
            .as_ref()
            .map_or(true, |l| l.iter().any(|x| x == id))
    };
    let cx = Ctx {
        repo,
        dir: run_dir.join("networks"),
        log_dir,
        quick: o.quick,
        timeout: o.timeout,
    };
    proc::mkdirs(&cx.dir).map_err(|e| format!("{}: {e}", cx.dir.display()))?;
    let plots = run_dir.join("plots");
    proc::mkdirs(&plots).map_err(|e| format!("{}: {e}", plots.display()))?;
    let mut md = String::new();
    let _ = writeln!(
        md,
        "## Emulated networks\n\nPing-pong of ours (2 ranks, one host) over each emulated NIC: \
         through MPI (`pingpong --mode lat`) and, for the `mad-` curves, through the Madeleine \
         API (`madpingpong`: an 8-byte EXPRESS header and the payload CHEAPER per message). \
         *lat*: the smallest half round trip over the sizes; *bw*: the largest size / half \
         round trip. *model*: what the profile's arithmetic predicts for a lone packet of the \
         message and the engine's 32-byte header (and, for the `mad-` curves, the Madeleine \
         message's 16 bytes of head): the raw network, no middleware. *model + host*: the \
         model with the profile's host model (the per-message software of the paper's \
         middleware on the paper's machine, which the emulated NIC charges with every data \
         packet): what a curve of the paper's layer should show. Each published point is \
         compared with what measures its own layer (column *compared*): a point of Madeleine \
         II (or Madeleine over VIA) with our Madeleine API curve, a point of MPI over the \
         network with our MPI curve, a point of the raw network with the model. A curve with \
         no published point of its layer is listed without a comparison. Measured on a shared \
         machine: see the load note at the top.\n"
    );
    let _ = writeln!(
        md,
        "| curve | metric | ours | model | model + host | published | layer | compared | ratio | source |\n\
         |---|---|---|---|---|---|---|---|---|---|"
    );
    let mut curves: BTreeMap<&'static str, (Curve, Curve)> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut exes: BTreeMap<&'static str, PathBuf> = BTreeMap::new();
    for s in SERIES.iter().filter(|s| want(s.id)) {
        eprintln!("madmpi-bench: networks: {}", s.id);
        let (name, src) = match s.prog {
            Prog::PingPong => ("pingpong", "bench/c/pingpong.c"),
            Prog::Madeleine => ("madpingpong", "bench/c/networks/madpingpong.c"),
        };
        let exe = match exes.get(name) {
            Some(e) => e.clone(),
            None => {
                let e = cx.build(name, src)?;
                exes.insert(name, e.clone());
                e
            }
        };
        let env: Vec<(&str, &str)> = [("MADMPI_TRANSPORTS", "emu"), ("MADMPI_EMU", s.emu)]
            .into_iter()
            .chain(s.env.iter().copied())
            .collect();
        let max = (1u64 << 20).to_string();
        let mut args = vec!["--max", max.as_str()];
        if s.prog == Prog::PingPong {
            args.extend(["--mode", "lat"]);
        }
        let curve: Curve = match cx.measure(&format!("networks-{}", s.id), &exe, &args, &env) {
            Ok(ms) => {
                let mut by = BTreeMap::new();
                for m in ms {
                    let e = by.entry(m.size).or_insert((f64::NAN, f64::NAN));
                    match m.metric.as_str() {
                        "lat_us" => e.0 = m.med,
                        "bw_MBps" => e.1 = m.med,
                        _ => {}
                    }
                }
                by.into_iter().map(|(k, (a, b))| (k, a, b)).collect()
            }
            Err(e) => {
                failures.push(format!("{}: {e}", s.id));
                let _ = writeln!(md, "| {} | | {e} | | | | | | | |", s.id);
                continue;
            }
        };
        let model = model_curve(s, &curve);
        let best = |c: &Curve, lat: bool| -> f64 {
            if lat {
                c.iter().map(|c| c.1).fold(f64::INFINITY, f64::min)
            } else {
                c.iter()
                    .map(|c| c.2)
                    .filter(|x| x.is_finite())
                    .fold(0.0, f64::max)
            }
        };
        // The host's software per one-way message (both sides), µs.
        let h = profile::find(s.emu).map_or(0.0, |p| p.host.per_message_ns() as f64 / 1000.0);
        let hosted: Curve = model
            .iter()
            .map(|&(n, t, _)| (n, t + h, if n == 0 { f64::NAN } else { n as f64 / (t + h) }))
            .collect();
        let (ours_lat, model_lat) = (best(&curve, true), best(&model, true));
        let (ours_bw, model_bw) = (best(&curve, false), best(&model, false));
        let (host_lat, host_bw) = (best(&hosted, true), best(&hosted, false));
        for metric in ["lat", "bw"] {
            let lat = metric == "lat";
            let unit = if lat { "µs" } else { "MB/s" };
            let (ours, m, mh) = if lat {
                (ours_lat, model_lat, host_lat)
            } else {
                (ours_bw, model_bw, host_bw)
            };
            let mut any = false;
            for pt in s.points.iter().filter(|pt| pt.metric == metric) {
                any = true;
                let cmp = if pt.kind == Raw { m } else { ours };
                let ratio = cmp / pt.value;
                let flag = if (0.85..=1.15).contains(&ratio) {
                    ""
                } else {
                    " (outside ±15 %)"
                };
                let _ = writeln!(
                    md,
                    "| {} | {metric} | {ours:.2} {unit} | {m:.2} | {mh:.2} | {} {unit} | {} | {} | {ratio:.2}{flag} | {} |",
                    s.id,
                    pt.value,
                    pt.layer,
                    pt.kind.compared(),
                    pt.source
                );
            }
            if !any && s.id != "rails" {
                let _ = writeln!(
                    md,
                    "| {} | {metric} | {ours:.2} {unit} | {m:.2} | {mh:.2} | – | no published point of \
                     this layer ({}) | – | – | |",
                    s.id,
                    match s.prog.layer() {
                        Madeleine => "Madeleine API",
                        _ => "MPI",
                    }
                );
            }
        }
        if s.id != "rails" {
            if let Err(e) = figures::network(&plots, s, &curve, &model) {
                failures.push(format!("{}: figure: {e}", s.id));
            }
        }
        curves.insert(s.id, (curve, model));
    }
    for f in figures::PAPERS {
        if f.curves.iter().any(|c| curves.contains_key(c)) {
            if let Err(e) = figures::paper(&plots, f, &curves) {
                failures.push(format!("{}: figure: {e}", f.id));
            }
        }
    }
    let _ = writeln!(
        md,
        "\nFigures: `plots/networks-<curve>.png` (latency and bandwidth against size: ours, the \
         model, the published points as markers) and one per paper, `plots/paper-<seed>.png` \
         ({}).",
        figures::PAPERS
            .iter()
            .map(|f| format!("`{}`: {}", f.id, f.title))
            .collect::<Vec<_>>()
            .join("; ")
    );
    if want("rails") {
        md.push_str(&extra::rails(&curves));
    }
    if want("multiseg") {
        md.push_str(&extra::multiseg(&cx).unwrap_or_else(|e| {
            failures.push(format!("multiseg: {e}"));
            String::new()
        }));
    }
    if want("indexed") {
        md.push_str(&extra::indexed(&cx).unwrap_or_else(|e| {
            failures.push(format!("indexed: {e}"));
            String::new()
        }));
    }
    if want("exactly_once") {
        md.push_str(&extra::exactly_once(&cx).unwrap_or_else(|e| {
            failures.push(format!("exactly_once: {e}"));
            String::new()
        }));
    }
    for f in &failures {
        let _ = writeln!(md, "\n- not measured: {f}");
    }
    Ok(md)
}

/// The model's prediction at the measured sizes, for a lone packet of the message (with a
/// Madeleine message's head) behind the engine's eager header (a rendezvous's own control messages are not modelled).
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
    // A Madeleine message's head starts with the body's length, then madpingpong's 8-byte
    // EXPRESS header (`mpi-core/src/madeleine`); small payloads travel in it too.
    let head = match s.prog {
        Prog::PingPong => 0,
        Prog::Madeleine => MAD_HEAD,
    };
    curve
        .iter()
        .map(|&(n, _, _)| {
            let bytes = EAGER_HDR + head + (n as usize).div_ceil(8) * 8;
            let t = p.one_way_ns(bytes, on) as f64 / 1000.0;
            (n, t, if n == 0 { f64::NAN } else { n as f64 / t })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every published point is compared with what measures its own layer: a non-raw point
    /// only on curves of that layer, a raw point on a curve of its network (against the
    /// model); and no point of the sources is left without a curve of its layer.
    #[test]
    fn layers_are_consistent() {
        for s in SERIES {
            for pt in s.points {
                assert!(
                    pt.kind == Raw || pt.kind == s.prog.layer(),
                    "{}: the {} point {} ({}) is not of the curve's layer",
                    s.id,
                    pt.metric,
                    pt.value,
                    pt.layer
                );
                if pt.kind == Raw {
                    assert!(profile::find(s.emu).is_ok(), "{}: no model", s.id);
                }
            }
        }
        // Madeleine II's points over BIP and SISCI, and Madeleine's over VIA, are on the
        // Madeleine API curves; the MPI points on MPI curves.
        let on = |id: &str, value: f64| {
            SERIES
                .iter()
                .find(|s| s.id == id)
                .is_some_and(|s| s.points.iter().any(|p| p.value == value))
        };
        for (id, v) in [
            ("mad-bip", 7.0),
            ("mad-bip", 122.0),
            ("mad-sisci", 3.9),
            ("mad-sisci", 82.0),
            ("mad-via-dynamic", 53.0),
            ("mad-via-pool", 11.0),
            ("bcl3", 23.7),
            ("bcl3-lossy", 131.0),
            ("mx", 3.0),
            ("elan", 835.0),
            ("bip", 5.0),
        ] {
            assert!(on(id, v), "{id} lacks the published point {v}");
        }
        for s in SERIES.iter().filter(|s| s.prog == Prog::PingPong) {
            assert!(
                s.points.iter().all(|p| p.kind != Madeleine),
                "{}: a Madeleine point on an MPI curve",
                s.id
            );
        }
    }

    /// A Madeleine message carries 16 bytes more than the MPI one: over BIP (per byte) the
    /// model of `mad-bip` is slower than that of `bip` by their wire time.
    #[test]
    fn the_madeleine_model_counts_its_head() {
        let get = |id: &str| SERIES.iter().find(|s| s.id == id).expect("series");
        let c: Curve = vec![(0, 0.0, 0.0)];
        let mpi = model_curve(get("bip"), &c)[0].1;
        let mad = model_curve(get("mad-bip"), &c)[0].1;
        assert!(mad > mpi, "mad-bip model {mad} <= bip model {mpi}");
    }
}
