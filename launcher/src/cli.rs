//! Command-line parsing for `mpirun`/`mpiexec`. Pure: arguments in, [`Parsed`] out.
//!
//! Options follow Hydra's and Open MPI's spellings; each accepts one or two leading dashes and
//! `--opt=value` as well as `--opt value`. Options stop at the first non-option (the program)
//! or at `--`.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::time::Duration;

use crate::hosts::{self, HostEntry};

/// What to do.
#[derive(Debug)]
pub enum Parsed {
    /// Start a job.
    Run(Box<Options>),
    /// Print the help text.
    Help,
    /// Print the version.
    Version,
}

/// How the ranks' environment is built from mpirun's own.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct EnvSpec {
    /// Pass nothing from mpirun's environment (`-genvnone`).
    pub none: bool,
    /// Pass only these variables (`-genvlist a,b`), in addition to `set`.
    pub list: Option<Vec<OsString>>,
    /// Variables set explicitly (`-x VAR=VAL`, `-genv VAR VAL`), or passed explicitly
    /// (`-x VAR` when VAR is set in mpirun's environment), in order.
    pub set: Vec<(OsString, OsString)>,
}

/// Where the hosts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    /// `--host a,b:2` (repeatable: the lists add up).
    List(Vec<HostEntry>),
    /// `--hostfile F`.
    File(PathBuf),
}

/// A parsed command line.
#[derive(Debug)]
pub struct Options {
    /// Number of ranks (`None`: the hosts' slots, or 1 without hosts).
    pub np: Option<u32>,
    /// The hosts (`None`: this machine only).
    pub hosts: Option<HostSource>,
    /// Ranks per host, overriding slots (`-ppn`).
    pub ppn: Option<u32>,
    /// The remote-start command (`--launcher-exec`), split into words later.
    pub launcher_exec: Option<String>,
    /// Address or interface the PMI port listens on for remote ranks (`--pmi-bind`).
    pub pmi_bind: Option<String>,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Prefix every output line with `[rank] `.
    pub tag_output: bool,
    /// Environment passing.
    pub env: EnvSpec,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// Serve PMI on a TCP port (`PMI_PORT`/`PMI_ID`) instead of inherited sockets (`PMI_FD`).
    pub pmi_port: bool,
    /// Working directory of the ranks.
    pub wdir: Option<PathBuf>,
    /// Trace PMI traffic on stderr.
    pub verbose: bool,
    /// Binding of the local ranks to CPUs (`--bind-to`).
    pub bind: Bind,
}

/// How local ranks are bound to CPUs (`--bind-to`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    /// One CPU each when a host runs no more ranks than mpirun may use CPUs (Open MPI's
    /// default for small jobs), else none.
    Auto,
    /// One CPU each, round robin over mpirun's CPUs (shared when there are more ranks).
    Core,
    /// Not bound: every rank may run on all of mpirun's CPUs.
    None,
}

/// The help text (`name` is `mpirun` or `mpiexec`).
pub fn help(name: &str) -> String {
    format!(
        "\
Usage: {name} [options] [--] program [args...]

Starts N copies of program on this node or on several hosts, serves them PMI-1, forwards
stdin to rank 0 and every rank's stdout/stderr, and ends with the first non-zero exit code
of a rank (128+signal for a rank killed by a signal). A rank that dies ends the job.

Options:
  -n, -np, -c, --n N        number of ranks (default: the hosts' slots, or 1)
  --host, --hosts, -H LIST  hosts, comma-separated, each 'name' or 'name:slots'
  --hostfile, -f, -machinefile FILE
                            hosts, one per line: 'name', 'name:slots' or 'name slots=K';
                            '#' starts a comment
  -ppn, -perhost, --npernode K
                            K ranks per host (overrides slots)
  --launcher-exec CMD       remote-start command (default: $MADMPI_RSH, else 'ssh -x'),
                            run as 'CMD host command-line'; -launcher ssh|rsh also works
  --pmi-bind ADDR|IFACE|auto
                            where remote ranks reach mpirun's PMI port (default: auto, the
                            first interface that is up and not loopback)
  --tag-output, --prefix-rank, -prepend-rank, -l
                            prefix every output line with [rank]
  -x VAR[=VALUE]            pass VAR (set it to VALUE) to the ranks
  -genv VAR VALUE, -env VAR VALUE
                            set VAR=VALUE for the ranks
  -genvlist A,B,...         pass only these variables of mpirun's environment
  -genvnone                 pass none of mpirun's environment (-x/-genv still apply)
  -genvall                  pass all of mpirun's environment (the default)
  -wdir DIR                 working directory of the ranks
  --timeout SECONDS         kill the job after SECONDS (default: $MPIEXEC_TIMEOUT; 0: no
                            limit); exit code 124
  --pmi-port                serve PMI over TCP (PMI_PORT) to the local ranks too, instead
                            of PMI_FD (remote ranks always use it)
  --bind-to core|none|auto  bind each local rank to one CPU (core), or not (none); auto
                            (the default) binds when a host runs no more ranks than
                            mpirun may use CPUs
  -v, --verbose             trace PMI traffic on stderr
  -h, --help                this text
  -V, --version             version

Ranks are placed by blocks: each host gets as many consecutive ranks as it has slots
(1 when not given), in the order listed; then the round starts again. 'localhost', this
machine's name and 127.x.x.x start ranks directly; other hosts through the remote-start
command, which runs this same mpirun program (same path; $MADMPI_PROXY_PATH overrides) on
the host to start the rank. Remote ranks reach mpirun at PMI_PORT and prove they belong to
the job with MADMPI_PMI_TOKEN.

Exit status: 0 when every rank exits 0; else the code of the first failure: a rank's exit
code, 128+N for a rank killed by signal N (or mpirun receiving signal N), the MPI_Abort
code, 1 for a rank that used PMI and exited without finalize while others ran, 124 for
--timeout, 127/126 when the program cannot be started, 2 for a bad command line.

Each rank gets PMI_FD (or PMI_PORT, PMI_ID and MADMPI_PMI_TOKEN), PMI_RANK, PMI_SIZE,
PMI_JOBID, MADMPI_JOBID (the kvsname), MPI_LOCALNRANKS and MPI_LOCALRANKID (on its host).
See docs/launching.md.
"
    )
}

/// Parses the arguments after argv[0]. `getenv` reads mpirun's own environment (for `-x VAR`
/// and `MPIEXEC_TIMEOUT`).
pub fn parse(
    args: &[OsString],
    getenv: &dyn Fn(&str) -> Option<OsString>,
) -> Result<Parsed, String> {
    let mut np: Option<u32> = None;
    let mut opts = Options {
        np: None,
        hosts: None,
        ppn: None,
        launcher_exec: None,
        pmi_bind: None,
        program: OsString::new(),
        args: Vec::new(),
        tag_output: false,
        env: EnvSpec::default(),
        timeout: None,
        pmi_port: false,
        wdir: None,
        verbose: false,
        bind: Bind::Auto,
    };
    if let Some(t) = getenv("MPIEXEC_TIMEOUT") {
        opts.timeout =
            parse_timeout(&t.to_string_lossy()).map_err(|e| format!("MPIEXEC_TIMEOUT: {e}"))?;
    }
    let mut i = 0;
    // Takes the value of an option: inline (`--opt=value`) or the next argument.
    let take = |inline: Option<OsString>, i: &mut usize, name: &str| -> Result<OsString, String> {
        if let Some(v) = inline {
            return Ok(v);
        }
        *i += 1;
        args.get(*i)
            .cloned()
            .ok_or_else(|| format!("option '{name}' needs a value"))
    };
    while i < args.len() {
        let arg = &args[i];
        let Some(text) = arg.to_str() else { break };
        if text == "--" {
            i += 1;
            break;
        }
        if !text.starts_with('-') || text == "-" {
            break;
        }
        let bare = text.trim_start_matches('-');
        let (name, inline) = match bare.split_once('=') {
            Some((n, v)) => (n, Some(OsString::from(v))),
            None => (bare, None),
        };
        let flag = |inline: &Option<OsString>| -> Result<(), String> {
            match inline {
                Some(_) => Err(format!("option '{name}' takes no value")),
                None => Ok(()),
            }
        };
        match name {
            "n" | "np" | "c" => {
                let v = take(inline, &mut i, text)?;
                let n = v
                    .to_str()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .filter(|&n| n > 0)
                    .ok_or_else(|| {
                        format!(
                            "'{text}' needs a positive number of ranks, got '{}'",
                            v.to_string_lossy()
                        )
                    })?;
                np = Some(n);
            }
            "tag-output" | "prefix-rank" | "prepend-rank" | "l" | "output-filename-rank" => {
                flag(&inline)?;
                opts.tag_output = true;
            }
            "x" => {
                let v = take(inline, &mut i, text)?;
                let s = v.to_string_lossy().into_owned();
                match s.split_once('=') {
                    Some((k, val)) if !k.is_empty() => opts.env.set.push((k.into(), val.into())),
                    Some(_) => return Err(format!("'-x {s}': empty variable name")),
                    None => {
                        if let Some(val) = getenv(&s) {
                            opts.env.set.push((s.into(), val));
                        }
                    }
                }
            }
            "genv" | "env" => {
                let k = take(None, &mut i, text)?;
                let v = take(None, &mut i, text)?;
                if inline.is_some() || k.is_empty() {
                    return Err(format!("usage: {text} VAR VALUE"));
                }
                opts.env.set.push((k, v));
            }
            "genvlist" | "envlist" => {
                let v = take(inline, &mut i, text)?;
                let list = v
                    .to_string_lossy()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(OsString::from)
                    .collect();
                opts.env.list = Some(list);
            }
            "genvnone" | "envnone" => {
                flag(&inline)?;
                opts.env.none = true;
            }
            "genvall" | "envall" => {
                flag(&inline)?;
                opts.env.none = false;
                opts.env.list = None;
            }
            "wdir" | "wd" | "cwd" => opts.wdir = Some(PathBuf::from(take(inline, &mut i, text)?)),
            "timeout" => {
                let v = take(inline, &mut i, text)?;
                opts.timeout =
                    parse_timeout(&v.to_string_lossy()).map_err(|e| format!("{text}: {e}"))?;
            }
            "pmi-port" => {
                flag(&inline)?;
                opts.pmi_port = true;
            }
            "host" | "hosts" | "H" => {
                let v = take(inline, &mut i, text)?;
                let list = hosts::parse_host_list(&v.to_string_lossy())?;
                match &mut opts.hosts {
                    None => opts.hosts = Some(HostSource::List(list)),
                    Some(HostSource::List(l)) => l.extend(list),
                    Some(HostSource::File(_)) => return Err(HOSTS_TWICE.into()),
                }
            }
            "hostfile" | "f" | "machinefile" | "machine" => {
                let v = take(inline, &mut i, text)?;
                if opts.hosts.is_some() {
                    return Err(HOSTS_TWICE.into());
                }
                opts.hosts = Some(HostSource::File(PathBuf::from(v)));
            }
            "ppn" | "perhost" | "npernode" => {
                let v = take(inline, &mut i, text)?;
                let k = v
                    .to_str()
                    .and_then(|s| s.trim().parse::<u32>().ok())
                    .filter(|&k| k > 0)
                    .ok_or_else(|| {
                        format!(
                            "'{text}' needs a positive number of ranks per host, got '{}'",
                            v.to_string_lossy()
                        )
                    })?;
                opts.ppn = Some(k);
            }
            "launcher-exec" => {
                let v = take(inline, &mut i, text)?.to_string_lossy().into_owned();
                if v.split_whitespace().next().is_none() {
                    return Err(format!("'{text}' needs a command"));
                }
                opts.launcher_exec = Some(v);
            }
            "launcher" | "bootstrap" => {
                let v = take(inline, &mut i, text)?.to_string_lossy().into_owned();
                match v.as_str() {
                    "ssh" => opts.launcher_exec = Some("ssh -x".into()),
                    "rsh" => opts.launcher_exec = Some("rsh".into()),
                    _ => {
                        return Err(format!(
                            "'{text} {v}' is not supported (ssh or rsh; or --launcher-exec CMD)"
                        ))
                    }
                }
            }
            "pmi-bind" | "iface" => {
                let v = take(inline, &mut i, text)?
                    .to_string_lossy()
                    .trim()
                    .to_owned();
                if v.is_empty() {
                    return Err(format!("'{text}' needs an address, an interface or 'auto'"));
                }
                opts.pmi_bind = Some(v);
            }
            "v" | "verbose" => {
                flag(&inline)?;
                opts.verbose = true;
            }
            // Common in scripts written for Open MPI; meaningless on one node without slots.
            "oversubscribe" | "allow-run-as-root" => flag(&inline)?,
            "h" | "help" | "?" => return Ok(Parsed::Help),
            "V" | "version" => return Ok(Parsed::Version),
            "bind-to" | "bind" => {
                let v = take(inline, &mut i, text)?.to_string_lossy().into_owned();
                opts.bind = match v.as_str() {
                    "core" | "cpu" | "hwthread" => Bind::Core,
                    "none" | "no" => Bind::None,
                    "auto" => Bind::Auto,
                    _ => {
                        return Err(format!(
                            "'{text} {v}' is not supported (core, none or auto)"
                        ))
                    }
                };
            }
            "N" | "map-by" | "rmk" => {
                return Err(format!("option '{text}' is not supported yet"));
            }
            _ => return Err(format!("unknown option '{text}'")),
        }
        i += 1;
    }
    let Some(program) = args.get(i) else {
        return Err("no program to run".into());
    };
    opts.program = program.clone();
    opts.args = args[i + 1..].to_vec();
    opts.np = np;
    Ok(Parsed::Run(Box::new(opts)))
}

const HOSTS_TWICE: &str = "give the hosts with --host or with --hostfile, not both";

/// A time limit in seconds; 0 or nothing is no limit (as Hydra's `MPIEXEC_TIMEOUT` and Open
/// MPI's `--timeout` take it).
fn parse_timeout(s: &str) -> Result<Option<Duration>, String> {
    if s.trim().is_empty() {
        return Ok(None);
    }
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number of seconds"))?;
    if !(secs.is_finite() && (0.0..1e9).contains(&secs)) {
        return Err(format!(
            "'{s}' is not a number of seconds (0 or more; 0: no limit)"
        ));
    }
    Ok((secs > 0.0).then(|| Duration::from_secs_f64(secs)))
}

/// Whether a variable from mpirun's own environment must not reach the ranks: the PMI
/// connection of an enclosing launcher (a nested `mpirun` under Hydra or Slurm) would confuse
/// the ranks' client, and these are set per rank anyway.
pub fn is_launcher_var(name: &OsStr) -> bool {
    let Some(n) = name.to_str() else { return false };
    n.starts_with("PMI_")
        || n.starts_with("HYDI_")
        || n == "MADMPI_PMI_TOKEN"
        || n == "MPI_LOCALNRANKS"
        || n == "MPI_LOCALRANKID"
        || n == "MADMPI_JOBID"
}

/// The environment of the ranks (before the per-rank PMI variables are added).
pub fn build_env(
    spec: &EnvSpec,
    own: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = if spec.none {
        Vec::new()
    } else {
        own.filter(|(k, _)| !is_launcher_var(k))
            .filter(|(k, _)| match &spec.list {
                None => true,
                Some(l) => l.contains(k),
            })
            .collect()
    };
    for (k, v) in &spec.set {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<OsString> {
        s.iter().map(OsString::from).collect()
    }

    fn run(s: &[&str]) -> Result<Options, String> {
        let env = |k: &str| {
            if k == "HOME" {
                Some(OsString::from("/root"))
            } else {
                None
            }
        };
        match parse(&args(s), &env)? {
            Parsed::Run(o) => Ok(*o),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn counts_and_program() {
        for form in [
            &["-n", "4"][..],
            &["-np", "4"],
            &["-c", "4"],
            &["--n", "4"],
            &["--np=4"],
            &["-n=4"],
        ] {
            let mut a = form.to_vec();
            a.extend(["prog", "-n", "x"]);
            let o = run(&a).unwrap();
            assert_eq!(o.np, Some(4));
            assert_eq!(o.program, "prog");
            assert_eq!(o.args, args(&["-n", "x"]));
        }
        let o = run(&["--", "-weird-prog", "a"]).unwrap();
        assert_eq!((o.np, o.program.to_str().unwrap()), (None, "-weird-prog"));
        assert!(run(&["-n", "0", "p"]).is_err());
        assert!(run(&["-n", "x", "p"]).is_err());
        assert!(run(&["-n"]).unwrap_err().contains("needs a value"));
        assert!(run(&["-n", "2"]).unwrap_err().contains("no program"));
    }

    #[test]
    fn flags_env_timeout() {
        let o = run(&[
            "--tag-output",
            "-x",
            "A=1",
            "-x",
            "HOME",
            "-x",
            "UNSET",
            "-genv",
            "B",
            "2 3",
            "--timeout",
            "1.5",
            "p",
        ])
        .unwrap();
        assert!(o.tag_output);
        assert_eq!(
            o.env.set,
            vec![
                ("A".into(), "1".into()),
                ("HOME".into(), "/root".into()),
                ("B".into(), "2 3".into())
            ]
        );
        assert_eq!(o.timeout, Some(Duration::from_millis(1500)));
        assert!(run(&["--timeout", "-1", "p"]).is_err());
        // 0 is no limit, as in Hydra and Open MPI.
        assert_eq!(run(&["--timeout", "0", "p"]).unwrap().timeout, None);
        assert!(run(&["--prefix-rank", "-l", "p"]).unwrap().tag_output);
    }

    #[test]
    fn errors_and_specials() {
        assert!(run(&["--bogus", "p"])
            .unwrap_err()
            .contains("unknown option '--bogus'"));
        for o in ["-N", "--map-by"] {
            assert!(
                run(&[o, "x", "p"])
                    .unwrap_err()
                    .contains("not supported yet"),
                "{o}"
            );
        }
        let env = |_: &str| None;
        assert!(matches!(parse(&args(&["-h"]), &env), Ok(Parsed::Help)));
        assert!(matches!(
            parse(&args(&["--help", "p"]), &env),
            Ok(Parsed::Help)
        ));
        assert!(matches!(
            parse(&args(&["--version"]), &env),
            Ok(Parsed::Version)
        ));
        assert!(run(&["--tag-output=yes", "p"]).is_err());
    }

    #[test]
    fn hosts_and_remote_start() {
        let o = run(&[
            "--host",
            "a,b:2",
            "-H",
            "c",
            "-ppn",
            "3",
            "--launcher-exec",
            "./rsh -v",
            "--pmi-bind=eth1",
            "p",
        ])
        .unwrap();
        let entry = |n: &str, s| HostEntry {
            name: n.into(),
            slots: s,
        };
        assert_eq!(
            o.hosts,
            Some(HostSource::List(vec![
                entry("a", None),
                entry("b", Some(2)),
                entry("c", None)
            ]))
        );
        assert_eq!(o.ppn, Some(3));
        assert_eq!(o.launcher_exec.as_deref(), Some("./rsh -v"));
        assert_eq!(o.pmi_bind.as_deref(), Some("eth1"));
        let o = run(&["-f", "/tmp/hf", "-launcher", "ssh", "p"]).unwrap();
        assert_eq!(o.hosts, Some(HostSource::File("/tmp/hf".into())));
        assert_eq!(o.launcher_exec.as_deref(), Some("ssh -x"));
        assert!(run(&["-f", "x", "--host", "a", "p"])
            .unwrap_err()
            .contains("not both"));
        assert!(run(&["--host", "a:0", "p"]).is_err());
        assert!(run(&["-ppn", "0", "p"]).is_err());
        assert!(run(&["--launcher-exec", " ", "p"]).is_err());
        assert!(run(&["-launcher", "slurm", "p"]).is_err());
    }

    #[test]
    fn environment_building() {
        let own = || {
            vec![
                ("PATH".into(), "/bin".into()),
                ("PMI_FD".into(), "9".into()),
                ("HOME".into(), "/root".into()),
                ("MADMPI_JOBID".into(), "old".into()),
            ]
            .into_iter()
        };
        let spec = EnvSpec::default();
        assert_eq!(
            build_env(&spec, own()),
            vec![
                ("PATH".into(), "/bin".into()),
                ("HOME".into(), "/root".into())
            ]
        );
        let spec = EnvSpec {
            list: Some(vec!["HOME".into()]),
            set: vec![("X".into(), "1".into())],
            none: false,
        };
        assert_eq!(
            build_env(&spec, own()),
            vec![("HOME".into(), "/root".into()), ("X".into(), "1".into())]
        );
        let spec = EnvSpec {
            none: true,
            set: vec![("PATH".into(), "/x".into())],
            list: None,
        };
        assert_eq!(build_env(&spec, own()), vec![("PATH".into(), "/x".into())]);
    }
}
