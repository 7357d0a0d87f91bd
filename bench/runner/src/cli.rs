//! Command-line options.

use std::path::PathBuf;
use std::time::Duration;

use crate::impls::{Kind, Transport};

pub const USAGE: &str = "\
usage: madmpi-bench [options]

Builds bench/c/*.c with every available MPI (ours: bin/mpicc + bin/mpirun,
MPICH: mpicc.mpich + mpiexec.mpich, Open MPI: mpicc.openmpi + mpirun.openmpi),
runs them interleaved and writes bench/results/<timestamp>/{results.json,
summary.md, plots/*.png, plots/*.svg} (and the bench/results/latest symlink).
In TCP mode the ping-pong also runs bench/c/rawtcp.c (built with $CC or cc),
a busy-polling TCP ping-pong without MPI: the `raw TCP` baseline. In ofi mode
it runs bench/c/fipingpong.c, libfabric's `fi_pingpong` on the same provider:
the `fi_pingpong` baseline, and ours over its own tcp driver (`ours-tcp`).

options:
  --quick              fewer sizes and iterations, 3 runs (under 3 minutes)
  --runs R             runs of every benchmark per implementation (default 5)
  --transport T        shm (default), tcp, both, or ofi (libfabric: ours and Open
                       MPI's cm/ofi on MADMPI_OFI_PROVIDER, default tcp;ofi_rxm;
                       MPICH's Debian build has no ofi device and does not run)
  --impl LIST          comma-separated subset of ours,ours-aggreg,ours-tcp,
                       mpich,openmpi (default: all; ours-aggreg is ours with
                       MADMPI_STRATEGY=aggreg, ours-tcp ours over its tcp
                       driver in ofi mode only; both run pingpong, multiseg,
                       msgrate and rma only, and are not peers)
  --bench LIST         comma-separated subset of the benchmarks
                       (pingpong,barrier,msgrate,multiseg,indexed,overlap,coll,
                       ringbcast,io,rma; only when named: allreduce, MPI_Allreduce
                       and MPI_Iallreduce 64 KiB-4 MiB on 2 and --ranks ranks;
                       scale, MPI_Init to the
                       first Allreduce and shared memory mapped, 16/64/128/256 ranks
                       on this node; networks: ours over each emulated network,
                       next to the papers' published points; see docs/networks.md)
  --networks LIST      with networks: only these curves and experiments (ids as
                       in docs/networks.md: bip, sisci, mad-bip, bcl3, mx, ...,
                       rails, multiseg, indexed, exactly_once); alone it implies
                       --bench networks
  --ranks N            ranks for barrier/coll/allreduce/ringbcast/io (default 4;
                       barrier and allreduce also run on 2)
  --timeout SECS       limit per run (default 300, 120 with --quick)
  --no-install         never apt-get install missing peers (default: install
                       when root and MPICH/Open MPI are missing)
  --repo DIR           repository root (default: the one this was built from)
  --out DIR            results root (default: <repo>/bench/results)
  --bench-args ARGS    extra arguments for every benchmark program, one string
                       (e.g. \"--reps 7\")
  -h, --help           this text
";

/// Parsed options.
#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub runs: usize,
    pub transports: Vec<Transport>,
    pub impls: Vec<Kind>,
    pub benches: Option<Vec<String>>,
    pub ranks: u32,
    pub timeout: Duration,
    pub install: bool,
    pub repo: PathBuf,
    pub out: Option<PathBuf>,
    pub bench_args: Vec<String>,
    /// `--bench` named `networks`: ping-pong over each emulated network (ours only).
    pub networks: bool,
    /// `--networks`: the curves and experiments of the networks part to run (all: `None`).
    pub networks_only: Option<Vec<String>>,
}

/// Benchmarks that exist, in the order they run.
pub const BENCHES: [&str; 12] = [
    "pingpong",
    "barrier",
    "msgrate",
    "multiseg",
    "indexed",
    "overlap",
    "coll",
    "allreduce",
    "ringbcast",
    "io",
    "rma",
    "scale",
];

/// Benchmarks that run only when `--bench` names them (`allreduce`: `coll`'s reductions over
/// 64 KiB-4 MiB on two rank counts; `scale`: jobs of up to 256 ranks).
pub const OPT_IN: [&str; 2] = ["allreduce", "scale"];

/// Ranks of the `scale` benchmark's jobs (all on this node).
pub const SCALE_RANKS: [u32; 4] = [16, 64, 128, 256];

/// What went wrong with the command line (or a request for help).
#[derive(Debug, PartialEq, Eq)]
pub enum CliError {
    Help,
    Bad(String),
}

pub fn parse(
    args: impl IntoIterator<Item = String>,
    default_repo: PathBuf,
) -> Result<Options, CliError> {
    let mut o = Options {
        quick: false,
        runs: 0,
        transports: vec![Transport::Shm],
        impls: Kind::ALL.to_vec(),
        benches: None,
        ranks: 4,
        timeout: Duration::ZERO,
        install: true,
        repo: default_repo,
        out: None,
        bench_args: Vec::new(),
        networks: false,
        networks_only: None,
    };
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .ok_or_else(|| CliError::Bad(format!("{name} needs a value")))
        };
        match a.as_str() {
            "-h" | "--help" => return Err(CliError::Help),
            "--quick" => o.quick = true,
            "--no-install" => o.install = false,
            "--runs" => o.runs = number(&value("--runs")?, "--runs", 1, 1000)?,
            "--ranks" => o.ranks = number(&value("--ranks")?, "--ranks", 2, 1024)? as u32,
            "--timeout" => {
                o.timeout = Duration::from_secs(number(
                    &value("--timeout")?,
                    "--timeout",
                    1,
                    86_400,
                )? as u64)
            }
            "--transport" => {
                o.transports = match value("--transport")?.as_str() {
                    "shm" => vec![Transport::Shm],
                    "tcp" => vec![Transport::Tcp],
                    "both" => vec![Transport::Shm, Transport::Tcp],
                    "ofi" => vec![Transport::Ofi],
                    other => {
                        return Err(CliError::Bad(format!(
                            "--transport: `{other}` is not shm, tcp, ofi or both"
                        )))
                    }
                }
            }
            "--impl" => {
                let mut v = Vec::new();
                for s in value("--impl")?.split(',').filter(|s| !s.is_empty()) {
                    let k = Kind::from_id(s).ok_or_else(|| {
                        CliError::Bad(format!(
                            "--impl: unknown `{s}` (ours, ours-aggreg, mpich, openmpi)"
                        ))
                    })?;
                    if !v.contains(&k) {
                        v.push(k);
                    }
                }
                if v.is_empty() {
                    return Err(CliError::Bad("--impl: empty list".into()));
                }
                // Always ours, ours (aggreg), MPICH, Open MPI: the
                // interleaving order.
                v.sort();
                o.impls = v;
            }
            "--bench" => {
                let mut v = Vec::new();
                for s in value("--bench")?.split(',').filter(|s| !s.is_empty()) {
                    if s == "networks" {
                        o.networks = true;
                        continue;
                    }
                    if !BENCHES.contains(&s) {
                        return Err(CliError::Bad(format!(
                            "--bench: unknown `{s}` ({}, networks)",
                            BENCHES.join(", ")
                        )));
                    }
                    v.push(s.to_string());
                }
                if v.is_empty() && !o.networks {
                    return Err(CliError::Bad("--bench: empty list".into()));
                }
                o.benches = Some(v);
            }
            "--networks" => {
                let mut v = Vec::new();
                for s in value("--networks")?.split(',').filter(|s| !s.is_empty()) {
                    if !crate::networks::known(s) {
                        return Err(CliError::Bad(format!(
                            "--networks: unknown `{s}` ({})",
                            crate::networks::ids().join(", ")
                        )));
                    }
                    v.push(s.to_string());
                }
                o.networks = true;
                o.networks_only = Some(v);
                o.benches.get_or_insert_with(Vec::new);
            }
            "--repo" => o.repo = PathBuf::from(value("--repo")?),
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            "--bench-args" => {
                o.bench_args = value("--bench-args")?
                    .split_whitespace()
                    .map(String::from)
                    .collect()
            }
            other => return Err(CliError::Bad(format!("unknown option `{other}`"))),
        }
    }
    if o.runs == 0 {
        o.runs = if o.quick { 3 } else { 5 };
    }
    if o.timeout.is_zero() {
        o.timeout = Duration::from_secs(if o.quick { 120 } else { 300 });
    }
    Ok(o)
}

fn number(s: &str, name: &str, lo: usize, hi: usize) -> Result<usize, CliError> {
    match s.parse::<usize>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(n),
        _ => Err(CliError::Bad(format!(
            "{name}: `{s}` is not a number in {lo}..={hi}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Result<Options, CliError> {
        parse(args.iter().map(|s| s.to_string()), PathBuf::from("/repo"))
    }

    #[test]
    fn defaults() {
        let o = p(&[]).unwrap();
        assert_eq!(o.runs, 5);
        assert_eq!(o.transports, [Transport::Shm]);
        assert_eq!(o.impls, Kind::ALL);
        assert!(o.impls.contains(&Kind::OursAggreg));
        assert_eq!(o.timeout, Duration::from_secs(300));
        assert!(o.install);
        let q = p(&["--quick"]).unwrap();
        assert_eq!(q.runs, 3);
        assert_eq!(q.timeout, Duration::from_secs(120));
    }

    #[test]
    fn options() {
        let o = p(&[
            "--transport",
            "both",
            "--impl",
            "mpich,openmpi",
            "--bench",
            "pingpong,coll",
            "--runs",
            "2",
            "--no-install",
            "--bench-args",
            "--reps 7",
        ])
        .unwrap();
        assert_eq!(o.transports, [Transport::Shm, Transport::Tcp]);
        assert_eq!(o.impls, [Kind::Mpich, Kind::OpenMpi]);
        assert_eq!(o.benches.unwrap(), ["pingpong", "coll"]);
        assert_eq!(o.runs, 2);
        assert!(!o.install);
        assert_eq!(o.bench_args, ["--reps", "7"]);
        assert_eq!(
            p(&["--transport", "ofi"]).unwrap().transports,
            [Transport::Ofi]
        );
        let o = p(&["--impl", "openmpi,ours-aggreg,ours,ours"]).unwrap();
        assert_eq!(o.impls, [Kind::Ours, Kind::OursAggreg, Kind::OpenMpi]);
    }

    #[test]
    fn errors() {
        assert_eq!(p(&["--help"]).unwrap_err(), CliError::Help);
        assert!(matches!(p(&["--transport", "ib"]), Err(CliError::Bad(_))));
        assert!(matches!(p(&["--impl", "lam"]), Err(CliError::Bad(_))));
        assert!(matches!(p(&["--bench", "hpl"]), Err(CliError::Bad(_))));
        assert!(matches!(p(&["--runs"]), Err(CliError::Bad(_))));
        assert!(matches!(p(&["--runs", "0"]), Err(CliError::Bad(_))));
        assert!(matches!(p(&["--frobnicate"]), Err(CliError::Bad(_))));
    }
}
