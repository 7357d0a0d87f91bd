//! The MPI implementations being compared: how to find, build with, and
//! launch each one, and how to force each onto TCP.

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::proc::{self, Outcome, Spec};

/// Which implementation; `OursAggreg` is ours with the aggregating packet
/// scheduler (`MADMPI_STRATEGY=aggreg`), same binaries and launcher, run
/// only where the strategy matters and never counted as a peer; `OursTcp` is
/// ours over its own `tcp` driver, run in `ofi` mode next to ours over
/// libfabric and never counted as a peer; `RawTcp` is the raw TCP baseline
/// (bench/c/rawtcp.c, no MPI), run in TCP mode next to the ping-pong, and
/// `FiPingpong` libfabric's own ping-pong (bench/c/fipingpong.c runs
/// `fi_pingpong`), run in `ofi` mode: the raw floors, never peers. The order
/// of the variants is the interleaving order of a round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Ours,
    OursAggreg,
    OursTcp,
    Mpich,
    OpenMpi,
    RawTcp,
    FiPingpong,
}

impl Kind {
    /// The MPI implementations (what `--impl` chooses from).
    pub const ALL: [Kind; 5] = [
        Kind::Ours,
        Kind::OursAggreg,
        Kind::OursTcp,
        Kind::Mpich,
        Kind::OpenMpi,
    ];

    /// Benchmarks the `ours-aggreg` variant runs: those whose messages the
    /// packet scheduler can aggregate or delay.
    pub const AGGREG_BENCHES: [&'static str; 4] = ["pingpong", "msgrate", "multiseg", "rma"];

    /// An MPI implementation, as opposed to a raw baseline.
    pub fn is_mpi(self) -> bool {
        !self.is_raw()
    }

    /// A raw floor under the ping-pong (no MPI): raw TCP, `fi_pingpong`.
    pub fn is_raw(self) -> bool {
        matches!(self, Kind::RawTcp | Kind::FiPingpong)
    }

    /// A variant of ours shown only in the tables that have its figures.
    pub fn is_variant(self) -> bool {
        matches!(self, Kind::OursAggreg | Kind::OursTcp)
    }

    /// A reference implementation ours is compared with (MPICH, Open MPI).
    pub fn is_peer(self) -> bool {
        matches!(self, Kind::Mpich | Kind::OpenMpi)
    }

    /// madmpi itself, with either packet scheduler or driver.
    pub fn is_ours(self) -> bool {
        matches!(self, Kind::Ours | Kind::OursAggreg | Kind::OursTcp)
    }

    /// The `MADMPI_STRATEGY` our runs get (None for the others).
    pub fn strategy(self) -> Option<&'static str> {
        match self {
            Kind::Ours | Kind::OursTcp => Some("adaptive"),
            Kind::OursAggreg => Some("aggreg"),
            _ => None,
        }
    }

    /// Short name used in paths, options and results.json.
    pub fn id(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            Kind::OursAggreg => "ours-aggreg",
            Kind::OursTcp => "ours-tcp",
            Kind::Mpich => "mpich",
            Kind::OpenMpi => "openmpi",
            Kind::RawTcp => "rawtcp",
            Kind::FiPingpong => "fi_pingpong",
        }
    }

    /// Human name for summary.md.
    pub fn title(self) -> &'static str {
        match self {
            Kind::Ours => "ours",
            Kind::OursAggreg => "ours (aggreg)",
            Kind::OursTcp => "ours (tcp driver)",
            Kind::Mpich => "MPICH",
            Kind::OpenMpi => "Open MPI",
            Kind::RawTcp => "raw TCP",
            Kind::FiPingpong => "fi_pingpong",
        }
    }

    pub fn from_id(s: &str) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.id() == s)
    }
}

/// The raw TCP baseline's program (bench/c/rawtcp.c).
pub const RAWTCP: &str = "rawtcp";
/// The `fi_pingpong` baseline's program (bench/c/fipingpong.c).
pub const FIPINGPONG: &str = "fipingpong";

/// Which transport the run must use between ranks of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Transport {
    /// Each implementation's default (shared memory on one node).
    Shm,
    /// TCP forced, even between ranks of one node.
    Tcp,
    /// libfabric forced, even between ranks of one node: ours with `MADMPI_TRANSPORTS=ofi`,
    /// Open MPI with its `cm` PML and `ofi` MTL, both on the provider [`ofi_provider`] names
    /// (MPICH's Debian build is ch4:ucx: it does not run in this mode).
    Ofi,
}

/// The libfabric provider of the `ofi` mode: `MADMPI_OFI_PROVIDER` if set, else `tcp;ofi_rxm`
/// (libfabric's TCP provider under its reliable-datagram layer, the one that runs anywhere).
pub fn ofi_provider() -> String {
    std::env::var("MADMPI_OFI_PROVIDER")
        .ok()
        .filter(|p| !p.trim().is_empty())
        .unwrap_or_else(|| "tcp;ofi_rxm".into())
}

impl Transport {
    pub fn id(self) -> &'static str {
        match self {
            Transport::Shm => "shm",
            Transport::Tcp => "tcp",
            Transport::Ofi => "ofi",
        }
    }
}

impl fmt::Display for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One implementation and what was found out about it.
#[derive(Debug, Clone)]
pub struct Impl {
    pub kind: Kind,
    /// Compiler wrapper (path or name on PATH).
    pub cc: String,
    /// Launcher (path or name on PATH).
    pub launcher: String,
    /// `Err(reason)` when it cannot be used in this run.
    pub status: Result<(), String>,
    /// What `MPI_Get_library_version` said (from the probe run).
    pub version: Option<String>,
    /// Where its benchmark binaries go (`ours-aggreg` shares ours's).
    pub build_dir: PathBuf,
    /// Benchmarks that failed to build, with the reason.
    pub build_failures: Vec<(String, String)>,
}

impl Impl {
    /// The implementation with its default commands; nothing checked yet.
    pub fn new(kind: Kind, repo: &Path, build_root: &Path) -> Impl {
        let (cc, launcher) = match kind {
            Kind::Ours | Kind::OursAggreg | Kind::OursTcp => (
                repo.join("bin/mpicc").display().to_string(),
                repo.join("bin/mpirun").display().to_string(),
            ),
            Kind::Mpich => ("mpicc.mpich".into(), "mpiexec.mpich".into()),
            Kind::OpenMpi => ("mpicc.openmpi".into(), "mpirun.openmpi".into()),
            // Not MPI: the plain C compiler, and the program runs directly.
            Kind::RawTcp | Kind::FiPingpong => (
                std::env::var("CC")
                    .ok()
                    .filter(|c| !c.trim().is_empty())
                    .unwrap_or_else(|| "cc".into()),
                String::new(),
            ),
        };
        Impl {
            kind,
            cc,
            launcher,
            status: Ok(()),
            version: None,
            // The aggreg variant runs ours's binaries: only the environment
            // differs.
            build_dir: build_root.join(if kind.is_ours() {
                Kind::Ours.id()
            } else {
                kind.id()
            }),
            build_failures: Vec::new(),
        }
    }

    pub fn usable(&self) -> bool {
        self.status.is_ok()
    }

    /// The program that stands for benchmark `bench`: the benchmark itself
    /// for an MPI implementation (`ours-aggreg`: only those of
    /// [`Kind::AGGREG_BENCHES`]); for the raw baselines, `rawtcp` or
    /// `fipingpong` for `pingpong` and nothing else.
    pub fn program(&self, bench: &str) -> Option<String> {
        match self.kind {
            Kind::RawTcp => (bench == "pingpong").then(|| RAWTCP.to_string()),
            Kind::FiPingpong => (bench == "pingpong").then(|| FIPINGPONG.to_string()),
            Kind::OursAggreg | Kind::OursTcp => Kind::AGGREG_BENCHES
                .contains(&bench)
                .then(|| bench.to_string()),
            _ => Some(bench.to_string()),
        }
    }

    /// Whether this runs in `transport` mode (the raw TCP baseline: TCP only;
    /// `fi_pingpong` and ours over its tcp driver: `ofi` only).
    pub fn runs_on(&self, transport: Transport) -> bool {
        match self.kind {
            Kind::RawTcp => transport == Transport::Tcp,
            Kind::FiPingpong | Kind::OursTcp => transport == Transport::Ofi,
            // Debian's MPICH reaches networks through UCX, not libfabric.
            Kind::Mpich => transport != Transport::Ofi,
            _ => true,
        }
    }

    /// Path of the built program for benchmark `bench`, if it built.
    pub fn exe(&self, bench: &str) -> Option<PathBuf> {
        let prog = self.program(bench)?;
        let p = self.build_dir.join(&prog);
        (self.usable() && !self.build_failures.iter().any(|(b, _)| *b == prog) && p.is_file())
            .then_some(p)
    }

    /// The command that runs `exe args` on `nranks` ranks over `transport`
    /// (the raw TCP baseline: `exe args`, always 2 processes over TCP).
    pub fn launch(&self, transport: Transport, nranks: u32, exe: &Path, args: &[String]) -> Spec {
        let mut argv = vec![self.launcher.clone()];
        let mut env = Vec::new();
        // Ours over its own tcp driver (the comparison point of ofi mode) is ours in TCP mode.
        let transport = if self.kind == Kind::OursTcp {
            Transport::Tcp
        } else {
            transport
        };
        match self.kind {
            Kind::RawTcp => argv.clear(),
            Kind::FiPingpong => {
                argv.clear();
                env.push(("MADMPI_OFI_PROVIDER".into(), ofi_provider()));
            }
            Kind::Ours | Kind::OursAggreg | Kind::OursTcp => {
                // Always explicit, so the caller's environment cannot change
                // which scheduler `ours` measures.
                if let Some(s) = self.kind.strategy() {
                    env.push(("MADMPI_STRATEGY".into(), s.into()));
                }
                if transport == Transport::Tcp {
                    env.push(("MADMPI_TRANSPORTS".into(), "tcp".into()));
                    // Every peer treated as remote, as MPICH's NOLOCAL does: one-sided
                    // operations travel over TCP instead of the direct path on one node.
                    env.push(("MADMPI_RMA_DIRECT".into(), "0".into()));
                }
                if transport == Transport::Ofi {
                    env.push(("MADMPI_TRANSPORTS".into(), "ofi".into()));
                    env.push(("MADMPI_RMA_DIRECT".into(), "0".into()));
                    env.push(("MADMPI_OFI_PROVIDER".into(), ofi_provider()));
                }
            }
            Kind::Mpich => {
                if transport == Transport::Tcp {
                    // NOLOCAL makes MPICH treat every peer as remote (no
                    // shared-memory path); with the ch4:ucx device UCX would
                    // still pick its own shm/cma transports, hence UCX_TLS.
                    env.push(("MPIR_CVAR_NOLOCAL".into(), "1".into()));
                    env.push(("UCX_TLS".into(), "tcp,self".into()));
                }
            }
            Kind::OpenMpi => {
                // Harmless when not root; needed when root.
                env.push(("OMPI_ALLOW_RUN_AS_ROOT".into(), "1".into()));
                env.push(("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM".into(), "1".into()));
                argv.push("--oversubscribe".into());
                if transport == Transport::Tcp {
                    // ob1 is the PML that uses BTLs; a UCX PML would ignore
                    // the BTL list.
                    argv.extend(
                        ["--mca", "pml", "ob1", "--mca", "btl", "tcp,self"].map(String::from),
                    );
                    // One-sided too: osc/sm (load/store between the ranks of one host) and
                    // osc/ucx (UCX's own shared memory) would bypass TCP whatever the BTLs;
                    // osc/pt2pt sends every operation through the PML, over TCP (ours runs
                    // with MADMPI_RMA_DIRECT=0, MPICH with MPIR_CVAR_NOLOCAL=1).
                    argv.extend(["--mca", "osc", "pt2pt"].map(String::from));
                }
                if transport == Transport::Ofi {
                    // The cm PML with the ofi MTL: every message through libfabric, on the
                    // same provider as ours (its core name: the MTL picks the layering).
                    let prov = ofi_provider();
                    let core = prov.split(';').next().unwrap_or_default().to_string();
                    argv.extend(["--mca", "pml", "cm", "--mca", "mtl", "ofi"].map(String::from));
                    argv.extend(["--mca".into(), "mtl_ofi_provider_include".into(), core]);
                    env.push(("FI_PROVIDER".into(), prov));
                }
            }
        }
        if self.kind.is_mpi() {
            argv.extend(["-n".to_string(), nranks.to_string()]);
        }
        argv.push(exe.display().to_string());
        argv.extend(args.iter().cloned());
        Spec {
            argv,
            env,
            cwd: None,
            // bench/c/common.h: bench_finish() prints it before MPI_Finalize.
            done_line: Some("# done".into()),
            after_done: proc::AFTER_DONE_GRACE,
        }
    }

    /// Checks that the compiler and launcher exist; sets `status`.
    pub fn detect(&mut self) {
        // `fi_pingpong` is what bench/c/fipingpong.c runs.
        let tool = if self.kind == Kind::FiPingpong {
            "fi_pingpong"
        } else {
            ""
        };
        let missing: Vec<&str> = [self.cc.as_str(), self.launcher.as_str(), tool]
            .into_iter()
            .filter(|c| !c.is_empty() && proc::which(c).is_none())
            .collect();
        if !missing.is_empty() {
            let hint = match self.kind {
                Kind::Ours | Kind::OursAggreg | Kind::OursTcp => {
                    "; run `make` at the repository root"
                }
                Kind::Mpich => "; apt-get install mpich libmpich-dev",
                Kind::OpenMpi => "; apt-get install openmpi-bin libopenmpi-dev",
                Kind::RawTcp => "; set CC or apt-get install gcc",
                Kind::FiPingpong => "; apt-get install libfabric-bin (and gcc, or set CC)",
            };
            self.status = Err(format!("{} not found{hint}", missing.join(" and ")));
        }
    }

    /// Builds every benchmark in `sources` (`name`, `path.c`) with this
    /// implementation's compiler. The implementation stays usable if at
    /// least one builds.
    pub fn build(&mut self, sources: &[(String, PathBuf)], include: &Path, log_dir: &Path) {
        if !self.usable() {
            return;
        }
        if let Err(e) = proc::mkdirs(&self.build_dir) {
            self.status = Err(format!("cannot create {}: {e}", self.build_dir.display()));
            return;
        }
        for (name, src) in sources {
            let out = self.build_dir.join(name);
            let _ = std::fs::remove_file(&out);
            let spec = Spec::new(&[
                self.cc.as_str(),
                "-std=c99",
                "-O2",
                "-Wall",
                "-Wextra",
                "-I",
                &include.display().to_string(),
                &src.display().to_string(),
                "-o",
                &out.display().to_string(),
            ]);
            let log = log_dir.join(format!("build-{}-{name}", self.kind.id()));
            let f = proc::run(&spec, Duration::from_secs(300), &log);
            if f.outcome != Outcome::Ok || !out.is_file() {
                let why = format!("{}: {}", f.outcome.detail(), proc::tail(&f.stderr, 5));
                self.build_failures.push((name.clone(), why));
            }
        }
        self.check_built(sources.len());
    }

    /// Takes over what `from` (sharing this build directory, already built)
    /// built: its failures among this implementation's `sources`.
    pub fn share_build(&mut self, from: &Impl, sources: &[(String, PathBuf)]) {
        if !self.usable() {
            return;
        }
        debug_assert_eq!(self.build_dir, from.build_dir);
        self.build_failures = from
            .build_failures
            .iter()
            .filter(|(b, _)| sources.iter().any(|(s, _)| s == b))
            .cloned()
            .collect();
        self.check_built(sources.len());
    }

    /// Unusable when none of its `n` programs built.
    fn check_built(&mut self, n: usize) {
        if self.build_failures.len() == n && n > 0 {
            let (_, why) = &self.build_failures[0];
            self.status = Err(format!("compiler failed: {why}"));
        }
    }

    /// Runs one tiny benchmark to learn whether the launcher works and which
    /// library version this is: barrier if it was built, else a 1-byte
    /// ping-pong, else a tiny multiseg or msgrate (the raw TCP baseline:
    /// always the ping-pong, over TCP).
    pub fn probe(&mut self, log_dir: &Path) {
        let transport = if self.kind.is_mpi() {
            Transport::Shm
        } else {
            Transport::Tcp
        };
        let candidates: [(&str, &[&str]); 4] = [
            ("barrier", &[]),
            ("pingpong", &["--mode", "lat", "--max", "1"]),
            ("multiseg", &["--mode", "multiseg", "--max", "4"]),
            ("msgrate", &["--max", "1", "--window", "2"]),
        ];
        let Some((exe, extra)) = candidates
            .iter()
            .find_map(|(b, extra)| Some((self.exe(b)?, *extra)))
        else {
            return;
        };
        let args: Vec<String> = ["--iters", "2", "--reps", "1"]
            .iter()
            .chain(extra)
            .map(|s| s.to_string())
            .collect();
        let spec = self.launch(transport, 2, &exe, &args);
        let log = log_dir.join(format!("probe-{}", self.kind.id()));
        let f = proc::run(&spec, Duration::from_secs(60), &log);
        if f.outcome != Outcome::Ok {
            self.status = Err(format!(
                "{} failed: {} — {}",
                if self.kind.is_mpi() {
                    "launcher"
                } else {
                    "probe run"
                },
                f.outcome.detail(),
                proc::tail(&f.stderr, 3).replace('\n', " / ")
            ));
            return;
        }
        self.version = crate::parse::library_version(&f.stdout);
    }
}

/// Whether `mpicc.mpich` exists but none of the include directories it passes holds `mpi.h`:
/// Debian's `mpich` package brings the compiler wrapper, its headers come with `libmpich-dev`.
fn mpich_header_missing() -> bool {
    let Ok(out) = std::process::Command::new("mpicc.mpich")
        .arg("-show")
        .output()
    else {
        return false;
    };
    let line = String::from_utf8_lossy(&out.stdout);
    let mut dirs = line
        .split_whitespace()
        .filter_map(|w| w.strip_prefix("-I"))
        .peekable();
    dirs.peek().is_some() && !dirs.any(|d| Path::new(d).join("mpi.h").exists())
}

/// Installs MPICH and Open MPI from Debian when they are missing and we are
/// root. Returns a note for the report (None when nothing was needed).
pub fn install_peers(log_dir: &Path) -> Option<String> {
    let needed = [
        "mpicc.mpich",
        "mpiexec.mpich",
        "mpicc.openmpi",
        "mpirun.openmpi",
    ]
    .into_iter()
    .any(|c| proc::which(c).is_none())
        || mpich_header_missing();
    if !needed {
        return None;
    }
    if !proc::is_root() {
        return Some("MPICH/Open MPI missing and not root: not installing".into());
    }
    let install = |tag: &str| {
        let mut spec = Spec::new(&[
            "apt-get",
            "install",
            "-y",
            "--no-install-recommends",
            "mpich",
            "libmpich-dev",
            "openmpi-bin",
            "libopenmpi-dev",
        ]);
        spec.env
            .push(("DEBIAN_FRONTEND".into(), "noninteractive".into()));
        proc::run(&spec, Duration::from_secs(900), &log_dir.join(tag))
    };
    eprintln!("madmpi-bench: installing mpich libmpich-dev openmpi-bin libopenmpi-dev ...");
    let mut f = install("apt-install");
    if f.outcome != Outcome::Ok {
        // A stale package index is the usual reason.
        let mut upd = Spec::new(&["apt-get", "update"]);
        upd.env
            .push(("DEBIAN_FRONTEND".into(), "noninteractive".into()));
        proc::run(&upd, Duration::from_secs(600), &log_dir.join("apt-update"));
        f = install("apt-install-retry");
    }
    Some(match f.outcome {
        Outcome::Ok => "installed mpich libmpich-dev openmpi-bin libopenmpi-dev".into(),
        o => format!(
            "apt-get install {}: {}",
            o.detail(),
            proc::tail(&f.stderr, 3).replace('\n', " / ")
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_forcing_per_implementation() {
        let repo = Path::new("/repo");
        let exe = Path::new("/b/pingpong");
        let args = vec!["--quick".to_string()];

        let ours = Impl::new(Kind::Ours, repo, Path::new("/b"));
        let s = ours.launch(Transport::Tcp, 2, exe, &args);
        assert_eq!(
            s.argv,
            ["/repo/bin/mpirun", "-n", "2", "/b/pingpong", "--quick"]
        );
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        assert_eq!(
            s.env,
            [
                pair("MADMPI_STRATEGY", "adaptive"),
                pair("MADMPI_TRANSPORTS", "tcp"),
                pair("MADMPI_RMA_DIRECT", "0")
            ]
        );
        assert_eq!(
            ours.launch(Transport::Shm, 2, exe, &args).env,
            [pair("MADMPI_STRATEGY", "adaptive")]
        );

        let mpich = Impl::new(Kind::Mpich, repo, Path::new("/b"));
        let s = mpich.launch(Transport::Tcp, 4, exe, &[]);
        assert_eq!(s.argv, ["mpiexec.mpich", "-n", "4", "/b/pingpong"]);
        assert!(s.env.contains(&("MPIR_CVAR_NOLOCAL".into(), "1".into())));

        let ompi = Impl::new(Kind::OpenMpi, repo, Path::new("/b"));
        let s = ompi.launch(Transport::Tcp, 2, exe, &[]);
        let line = s.argv.join(" ");
        assert!(line.contains("--oversubscribe"), "{line}");
        assert!(line.contains("--mca btl tcp,self"), "{line}");
        assert!(line.contains("--mca osc pt2pt"), "{line}");
        let s = ompi.launch(Transport::Shm, 2, exe, &[]);
        assert!(!s.argv.join(" ").contains("btl"));
    }

    /// `--transport ofi`: ours and Open MPI on libfabric's provider, MPICH (ch4:ucx) not run.
    #[test]
    fn ofi_mode() {
        let (repo, exe) = (Path::new("/repo"), Path::new("/b/pingpong"));
        let prov = ofi_provider();
        let ours = Impl::new(Kind::Ours, repo, Path::new("/b"));
        let env = ours.launch(Transport::Ofi, 2, exe, &[]).env;
        assert!(
            env.contains(&("MADMPI_TRANSPORTS".into(), "ofi".into())),
            "{env:?}"
        );
        assert!(
            env.contains(&("MADMPI_OFI_PROVIDER".into(), prov.clone())),
            "{env:?}"
        );
        // Ours over its own tcp driver: the environment of ours in TCP mode.
        let tcp = Impl::new(Kind::OursTcp, repo, Path::new("/b"));
        assert_eq!(
            tcp.launch(Transport::Ofi, 2, exe, &[]).env,
            ours.launch(Transport::Tcp, 2, exe, &[]).env
        );
        let ompi = Impl::new(Kind::OpenMpi, repo, Path::new("/b"));
        let s = ompi.launch(Transport::Ofi, 2, exe, &[]);
        let line = s.argv.join(" ");
        assert!(line.contains("--mca pml cm --mca mtl ofi"), "{line}");
        assert!(s.env.contains(&("FI_PROVIDER".into(), prov)), "{:?}", s.env);
        let mpich = Impl::new(Kind::Mpich, repo, Path::new("/b"));
        assert!(!mpich.runs_on(Transport::Ofi) && mpich.runs_on(Transport::Tcp));
        assert!(ours.runs_on(Transport::Ofi) && ompi.runs_on(Transport::Ofi));
    }

    #[test]
    fn raw_tcp_baseline_runs_directly_and_only_over_tcp() {
        let raw = Impl::new(Kind::RawTcp, Path::new("/repo"), Path::new("/b"));
        assert!(!raw.kind.is_mpi() && !raw.kind.is_peer());
        assert!(!Kind::ALL.contains(&Kind::RawTcp));
        assert!(raw.runs_on(Transport::Tcp) && !raw.runs_on(Transport::Shm));
        assert_eq!(raw.program("pingpong").as_deref(), Some(RAWTCP));
        assert_eq!(raw.program("coll"), None);
        let s = raw.launch(
            Transport::Tcp,
            2,
            Path::new("/b/rawtcp/rawtcp"),
            &["--quick".to_string()],
        );
        assert_eq!(s.argv, ["/b/rawtcp/rawtcp", "--quick"]);
        assert!(s.env.is_empty());
        assert_eq!(s.done_line.as_deref(), Some("# done"));
        let ours = Impl::new(Kind::Ours, Path::new("/repo"), Path::new("/b"));
        assert!(ours.runs_on(Transport::Shm) && !ours.kind.is_peer());
    }

    #[test]
    fn aggreg_variant_is_ours_with_another_scheduler() {
        let (repo, b) = (Path::new("/repo"), Path::new("/b"));
        let ours = Impl::new(Kind::Ours, repo, b);
        let ag = Impl::new(Kind::OursAggreg, repo, b);
        assert!(ag.kind.is_mpi() && ag.kind.is_ours() && !ag.kind.is_peer());
        assert_eq!(Kind::from_id("ours-aggreg"), Some(Kind::OursAggreg));
        assert_eq!(ag.kind.title(), "ours (aggreg)");
        // Same compiler, launcher and binaries.
        assert_eq!((&ag.cc, &ag.launcher), (&ours.cc, &ours.launcher));
        assert_eq!(ag.build_dir, Path::new("/b/ours"));
        assert_eq!(ag.build_dir, ours.build_dir);
        for bench in ["pingpong", "multiseg", "msgrate"] {
            assert_eq!(ag.program(bench).as_deref(), Some(bench));
        }
        for bench in ["barrier", "indexed", "overlap", "coll"] {
            assert_eq!(ag.program(bench), None, "{bench}");
        }
        let exe = Path::new("/b/ours/multiseg");
        let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
        let s = ag.launch(Transport::Tcp, 2, exe, &[]);
        assert_eq!(s.argv, ["/repo/bin/mpirun", "-n", "2", "/b/ours/multiseg"]);
        assert_eq!(
            s.env,
            [
                pair("MADMPI_STRATEGY", "aggreg"),
                pair("MADMPI_TRANSPORTS", "tcp"),
                pair("MADMPI_RMA_DIRECT", "0")
            ]
        );
        assert_eq!(
            ag.launch(Transport::Shm, 2, exe, &[]).env,
            [pair("MADMPI_STRATEGY", "aggreg")]
        );
        assert!(s.display().starts_with("MADMPI_STRATEGY=aggreg "));
    }

    #[test]
    fn aggreg_variant_shares_ours_build() {
        let srcs = |names: &[&str]| -> Vec<(String, PathBuf)> {
            names
                .iter()
                .map(|n| (n.to_string(), PathBuf::from(format!("{n}.c"))))
                .collect()
        };
        let (repo, b) = (Path::new("/repo"), Path::new("/b"));
        let mut ours = Impl::new(Kind::Ours, repo, b);
        ours.build_failures = vec![
            ("coll".into(), "exit 1: boom".into()),
            ("msgrate".into(), "exit 1: bang".into()),
        ];
        let mut ag = Impl::new(Kind::OursAggreg, repo, b);
        ag.share_build(&ours, &srcs(&["pingpong", "msgrate"]));
        assert!(ag.usable());
        assert_eq!(
            ag.build_failures,
            [("msgrate".to_string(), "exit 1: bang".to_string())]
        );
        let mut ag = Impl::new(Kind::OursAggreg, repo, b);
        ag.share_build(&ours, &srcs(&["msgrate"]));
        assert_eq!(ag.status, Err("compiler failed: exit 1: bang".into()));
    }

    #[test]
    fn missing_tools_are_reported_not_fatal() {
        let mut i = Impl::new(Kind::Ours, Path::new("/nonexistent"), Path::new("/tmp"));
        i.detect();
        let why = i.status.unwrap_err();
        assert!(why.contains("/nonexistent/bin/mpicc"), "{why}");
        assert!(why.contains("make"), "{why}");
    }
}
