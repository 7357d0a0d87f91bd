//! Command-line parsing for `mpirun`/`mpiexec`. Pure: arguments in, [`Parsed`] out.
//!
//! Options follow Hydra's and Open MPI's spellings; each accepts one or two leading dashes and
//! `--opt=value` as well as `--opt value`. Options stop at the first non-option (the program)
//! or at `--`.
//!
//! An MPMD command line has several parts separated by `:` (`-n 1 ./a : -n 2 ./b`), each with
//! its own program, arguments and local options (`-n`, `-x`, `-env`, `-envlist`, `-envnone`,
//! `-envall`, `-wdir`); every other option is global wherever it is written, as in Hydra.
//! `-configfile FILE` (Hydra) and `--app FILE` (Open MPI) read the parts from a file, one per
//! line, and are expanded in place before parsing.

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

/// One part of the command line (MPMD: the parts are separated by `:`): ranks running one
/// program. Ranks are numbered across the parts in order; a part's index is its ranks'
/// `MPI_APPNUM`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct App {
    /// Number of ranks (`None`: the hosts' slots, or 1 without hosts, as Hydra gives each part).
    pub np: Option<u32>,
    /// The program.
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables set for this part only (`-x`, `-env`), and its own filter of mpirun's
    /// environment when `filtered` (`-envnone`, `-envlist`, `-envall`).
    pub env: EnvSpec,
    /// `env.none` / `env.list` were given for this part and replace the global filter.
    pub filtered: bool,
    /// Working directory of this part's ranks (`-wdir`; else the global `-gwdir`).
    pub wdir: Option<PathBuf>,
}

/// A parsed command line.
#[derive(Debug)]
pub struct Options {
    /// The parts, in rank order (one unless MPMD).
    pub apps: Vec<App>,
    /// The hosts (`None`: this machine only).
    pub hosts: Option<HostSource>,
    /// Ranks per host, overriding slots (`-ppn`).
    pub ppn: Option<u32>,
    /// The remote-start command (`--launcher-exec`), split into words later.
    pub launcher_exec: Option<String>,
    /// Address or interface the PMI port listens on for remote ranks (`--pmi-bind`).
    pub pmi_bind: Option<String>,
    /// Prefix every output line with `[rank] `.
    pub tag_output: bool,
    /// Environment passing of every part (`-genv`, `-genvlist`, ...).
    pub env: EnvSpec,
    /// Kill the job after this long.
    pub timeout: Option<Duration>,
    /// Serve PMI on a TCP port (`PMI_PORT`/`PMI_ID`) instead of inherited sockets (`PMI_FD`).
    pub pmi_port: bool,
    /// Working directory of the ranks of parts without their own (`-gwdir`).
    pub wdir: Option<PathBuf>,
    /// Trace PMI traffic on stderr.
    pub verbose: bool,
    /// Binding of the local ranks to CPUs (`--bind-to`).
    pub bind: Bind,
    /// A rank that dies does not end the job (`--disable-auto-cleanup`).
    pub keep_going: bool,
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
       {name} [global options] [local options] prog [args] : [local options] prog [args] ...
       {name} [global options] -configfile FILE   (or --app FILE)

Starts N copies of program on this node or on several hosts, serves them PMI-1, forwards
stdin to rank 0 and every rank's stdout/stderr, and ends with the first non-zero exit code
of a rank (128+signal for a rank killed by a signal). A rank that dies ends the job.

Options:
  -n, -np, -c, --n N        number of ranks of the part (default: the hosts' slots, or 1)
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
  -x VAR[=VALUE]            pass VAR (set it to VALUE) to the part's ranks
  -env VAR VALUE            set VAR=VALUE for the part's ranks
  -genv VAR VALUE           set VAR=VALUE for every rank
  -genvlist A,B,...         pass only these variables of mpirun's environment
                            (-envlist: for the part's ranks only)
  -genvnone                 pass none of mpirun's environment (-x/-genv still apply;
                            -envnone: for the part's ranks only)
  -genvall                  pass all of mpirun's environment (the default; -envall:
                            for the part's ranks only)
  -wdir DIR                 working directory of the part's ranks (-gwdir: of every part
                            without its own)
  -configfile FILE, --app FILE
                            the parts, one per line ('#' starts a comment), as on the
                            command line
  --timeout SECONDS         kill the job after SECONDS (default: $MPIEXEC_TIMEOUT; 0: no
                            limit); exit code 124
  --pmi-port                serve PMI over TCP (PMI_PORT) to the local ranks too, instead
                            of PMI_FD (remote ranks always use it)
  --bind-to core|none|auto  bind each local rank to one CPU (core), or not (none); auto
                            (the default) binds when a host runs no more ranks than
                            mpirun may use CPUs
  --disable-auto-cleanup, --enable-recovery
                            a rank that dies (or fails) does not end the job: the failure
                            is reported, the others go on (MPI sees the dead rank as a lost
                            peer), and the exit status is still the first failure's
  -v, --verbose             trace PMI traffic on stderr
  -h, --help                this text
  -V, --version             version

MPMD: parts separated by ':' run different programs in one job; their ranks are numbered
in order across the parts, and a part's index (from 0) is its ranks' MPI_APPNUM. -n, -x,
-env, -envlist, -envnone, -envall and -wdir apply to the part they are written in; every
other option applies to the whole job wherever it is written.

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
    parse_with(args, getenv, &|p: &std::path::Path| {
        std::fs::read_to_string(p)
    })
}

/// The tokens of an MPMD file (`-configfile`, `--app`): each line that is not blank or a
/// comment is one part, split into words at white space; parts are joined with `:`.
fn app_file_tokens(text: &str) -> Vec<OsString> {
    let mut tokens = Vec::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        if !tokens.is_empty() {
            tokens.push(OsString::from(":"));
        }
        tokens.extend(words.into_iter().map(OsString::from));
    }
    tokens
}

/// [`parse`], with the reader of `-configfile`/`--app` files given (tests pass their own).
pub fn parse_with(
    args: &[OsString],
    getenv: &dyn Fn(&str) -> Option<OsString>,
    read_file: &dyn Fn(&std::path::Path) -> std::io::Result<String>,
) -> Result<Parsed, String> {
    let mut args: Vec<OsString> = args.to_vec();
    let mut opts = Options {
        apps: Vec::new(),
        hosts: None,
        ppn: None,
        launcher_exec: None,
        pmi_bind: None,
        tag_output: false,
        env: EnvSpec::default(),
        timeout: None,
        pmi_port: false,
        wdir: None,
        verbose: false,
        bind: Bind::Auto,
        keep_going: false,
    };
    if let Some(t) = getenv("MPIEXEC_TIMEOUT") {
        opts.timeout =
            parse_timeout(&t.to_string_lossy()).map_err(|e| format!("MPIEXEC_TIMEOUT: {e}"))?;
    }
    let new_app = || App {
        np: None,
        program: OsString::new(),
        args: Vec::new(),
        env: EnvSpec::default(),
        filtered: false,
        wdir: None,
    };
    // The part being parsed; `from_file` names the file it came from, for messages.
    let mut app = new_app();
    let mut from_file: Option<String> = None;
    let mut files_read = 0;
    let mut i = 0;
    // Takes the value of an option: inline (`--opt=value`) or the next argument.
    let take = |args: &[OsString],
                inline: Option<OsString>,
                i: &mut usize,
                name: &str|
     -> Result<OsString, String> {
        if let Some(v) = inline {
            return Ok(v);
        }
        *i += 1;
        args.get(*i)
            .cloned()
            .ok_or_else(|| format!("option '{name}' needs a value"))
    };
    // Ends the part being parsed at a `:` or at the end: it must have a program.
    let no_program = |apps: &[App], from_file: &Option<String>| -> String {
        let n = apps.len() + 1;
        match from_file {
            Some(f) => format!("part {n} of the command line (from {f}) has no program"),
            None if n == 1 => "no program to run".to_owned(),
            None => format!(
                "part {n} of the command line (after ':' number {}) has no program",
                n - 1
            ),
        }
    };
    loop {
        // The options of a part, up to its program.
        let mut program_found = false;
        while i < args.len() {
            let arg = args[i].clone();
            let Some(text) = arg.to_str() else {
                program_found = true;
                break;
            };
            if text == ":" {
                break;
            }
            if text == "--" {
                i += 1;
                program_found = i < args.len();
                break;
            }
            if !text.starts_with('-') || text == "-" {
                program_found = true;
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
            let at = i;
            match name {
                "configfile" | "app" => {
                    let v = take(&args, inline, &mut i, text)?;
                    let path = PathBuf::from(&v);
                    files_read += 1;
                    if files_read > 16 {
                        return Err(format!(
                            "'{text}': too many nested files (a file that reads itself?)"
                        ));
                    }
                    let content = read_file(&path).map_err(|e| {
                        format!("cannot read the {text} file {}: {e}", path.display())
                    })?;
                    let tokens = app_file_tokens(&content);
                    if tokens.is_empty() {
                        return Err(format!(
                            "the {text} file {} names no program",
                            path.display()
                        ));
                    }
                    // The file's parts replace the option, where it stood.
                    args.splice(at..=i, tokens);
                    i = at;
                    from_file = Some(path.display().to_string());
                    continue;
                }
                "n" | "np" | "c" => {
                    let v = take(&args, inline, &mut i, text)?;
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
                    app.np = Some(n);
                }
                "disable-auto-cleanup" | "enable-recovery" => {
                    flag(&inline)?;
                    opts.keep_going = true;
                }
                "tag-output" | "prefix-rank" | "prepend-rank" | "l" | "output-filename-rank" => {
                    flag(&inline)?;
                    opts.tag_output = true;
                }
                "x" => {
                    let v = take(&args, inline, &mut i, text)?;
                    let s = v.to_string_lossy().into_owned();
                    match s.split_once('=') {
                        Some((k, val)) if !k.is_empty() => app.env.set.push((k.into(), val.into())),
                        Some(_) => return Err(format!("'-x {s}': empty variable name")),
                        None => {
                            if let Some(val) = getenv(&s) {
                                app.env.set.push((s.into(), val));
                            }
                        }
                    }
                }
                "genv" | "env" => {
                    let k = take(&args, None, &mut i, text)?;
                    let v = take(&args, None, &mut i, text)?;
                    if inline.is_some() || k.is_empty() {
                        return Err(format!("usage: {text} VAR VALUE"));
                    }
                    let spec = if name == "env" {
                        &mut app.env
                    } else {
                        &mut opts.env
                    };
                    spec.set.push((k, v));
                }
                "genvlist" | "envlist" => {
                    let v = take(&args, inline, &mut i, text)?;
                    let list = v
                        .to_string_lossy()
                        .split(',')
                        .filter(|s| !s.is_empty())
                        .map(OsString::from)
                        .collect();
                    let spec = if name == "envlist" {
                        app.filtered = true;
                        &mut app.env
                    } else {
                        &mut opts.env
                    };
                    spec.none = false;
                    spec.list = Some(list);
                }
                "genvnone" | "envnone" => {
                    flag(&inline)?;
                    let spec = if name == "envnone" {
                        app.filtered = true;
                        &mut app.env
                    } else {
                        &mut opts.env
                    };
                    spec.none = true;
                }
                "genvall" | "envall" => {
                    flag(&inline)?;
                    let spec = if name == "envall" {
                        app.filtered = true;
                        &mut app.env
                    } else {
                        &mut opts.env
                    };
                    spec.none = false;
                    spec.list = None;
                }
                "wdir" | "wd" | "cwd" => {
                    app.wdir = Some(PathBuf::from(take(&args, inline, &mut i, text)?))
                }
                "gwdir" => opts.wdir = Some(PathBuf::from(take(&args, inline, &mut i, text)?)),
                "timeout" => {
                    let v = take(&args, inline, &mut i, text)?;
                    opts.timeout =
                        parse_timeout(&v.to_string_lossy()).map_err(|e| format!("{text}: {e}"))?;
                }
                "pmi-port" => {
                    flag(&inline)?;
                    opts.pmi_port = true;
                }
                "host" | "hosts" | "H" => {
                    let v = take(&args, inline, &mut i, text)?;
                    let list = hosts::parse_host_list(&v.to_string_lossy())?;
                    match &mut opts.hosts {
                        None => opts.hosts = Some(HostSource::List(list)),
                        Some(HostSource::List(l)) => l.extend(list),
                        Some(HostSource::File(_)) => return Err(HOSTS_TWICE.into()),
                    }
                }
                "hostfile" | "f" | "machinefile" | "machine" => {
                    let v = take(&args, inline, &mut i, text)?;
                    if opts.hosts.is_some() {
                        return Err(HOSTS_TWICE.into());
                    }
                    opts.hosts = Some(HostSource::File(PathBuf::from(v)));
                }
                "ppn" | "perhost" | "npernode" => {
                    let v = take(&args, inline, &mut i, text)?;
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
                    let v = take(&args, inline, &mut i, text)?
                        .to_string_lossy()
                        .into_owned();
                    if v.split_whitespace().next().is_none() {
                        return Err(format!("'{text}' needs a command"));
                    }
                    opts.launcher_exec = Some(v);
                }
                "launcher" | "bootstrap" => {
                    let v = take(&args, inline, &mut i, text)?
                        .to_string_lossy()
                        .into_owned();
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
                    let v = take(&args, inline, &mut i, text)?
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
                    let v = take(&args, inline, &mut i, text)?
                        .to_string_lossy()
                        .into_owned();
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
        if !program_found {
            return Err(no_program(&opts.apps, &from_file));
        }
        // The program and its arguments, up to the next `:` or the end.
        let end = args[i..]
            .iter()
            .position(|a| a == ":")
            .map_or(args.len(), |p| i + p);
        app.program = args[i].clone();
        app.args = args[i + 1..end].to_vec();
        opts.apps.push(std::mem::replace(&mut app, new_app()));
        if end == args.len() {
            break;
        }
        i = end + 1;
        if i == args.len() {
            // A trailing ':' opens a part that has nothing.
            return Err(no_program(&opts.apps, &from_file));
        }
    }
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

/// The environment of one part's ranks (before the per-rank PMI variables are added): mpirun's
/// own, filtered by the part's `-envnone`/`-envlist`/`-envall` if it has one, else by the
/// global ones; then the global `-genv`s, then the part's `-x`/`-env`s.
pub fn build_env(
    global: &EnvSpec,
    app: Option<&App>,
    own: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let filter = match app {
        Some(a) if a.filtered => &a.env,
        _ => global,
    };
    let mut env: Vec<(OsString, OsString)> = if filter.none {
        Vec::new()
    } else {
        own.filter(|(k, _)| !is_launcher_var(k))
            .filter(|(k, _)| match &filter.list {
                None => true,
                Some(l) => l.contains(k),
            })
            .collect()
    };
    let local = app.map(|a| a.env.set.as_slice()).unwrap_or_default();
    for (k, v) in global.set.iter().chain(local) {
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
            assert_eq!(o.apps.len(), 1);
            assert_eq!(o.apps[0].np, Some(4));
            assert_eq!(o.apps[0].program, "prog");
            assert_eq!(o.apps[0].args, args(&["-n", "x"]));
        }
        let o = run(&["--", "-weird-prog", "a"]).unwrap();
        assert_eq!(
            (o.apps[0].np, o.apps[0].program.to_str().unwrap()),
            (None, "-weird-prog")
        );
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
        assert_eq!(o.env.set, vec![("B".into(), "2 3".into())]);
        let mut set = o.apps[0].env.set.clone();
        set.extend(o.env.set.clone());
        assert_eq!(
            set,
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
        assert!(!run(&["p"]).unwrap().keep_going);
        assert!(run(&["--disable-auto-cleanup", "p"]).unwrap().keep_going);
        assert!(run(&["-disable-auto-cleanup", "p"]).unwrap().keep_going);
        assert!(run(&["--enable-recovery", "p"]).unwrap().keep_going);
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
            build_env(&spec, None, own()),
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
            build_env(&spec, None, own()),
            vec![("HOME".into(), "/root".into()), ("X".into(), "1".into())]
        );
        let spec = EnvSpec {
            none: true,
            set: vec![("PATH".into(), "/x".into())],
            list: None,
        };
        assert_eq!(
            build_env(&spec, None, own()),
            vec![("PATH".into(), "/x".into())]
        );
        // A part's own filter replaces the global one; its variables come last and win.
        let app = App {
            np: None,
            program: "p".into(),
            args: Vec::new(),
            env: EnvSpec {
                none: false,
                list: Some(vec!["HOME".into()]),
                set: vec![("PATH".into(), "/mine".into()), ("Y".into(), "2".into())],
            },
            filtered: true,
            wdir: None,
        };
        assert_eq!(
            build_env(&spec, Some(&app), own()),
            vec![
                ("HOME".into(), "/root".into()),
                ("PATH".into(), "/mine".into()),
                ("Y".into(), "2".into())
            ]
        );
    }

    fn run_files(s: &[&str], files: &[(&str, &str)]) -> Result<Options, String> {
        let env = |_: &str| None;
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect();
        let read = move |p: &std::path::Path| {
            files
                .iter()
                .find(|(n, _)| std::path::Path::new(n) == p)
                .map(|(_, t)| t.clone())
                .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))
        };
        match parse_with(&args(s), &env, &read)? {
            Parsed::Run(o) => Ok(*o),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mpmd_parts() {
        let o = run(&[
            "-genv",
            "G",
            "1",
            "-n",
            "1",
            "-env",
            "A",
            "a",
            "-wdir",
            "/w",
            "./a",
            "x",
            ":",
            "-n",
            "2",
            "-x",
            "B=b",
            "--tag-output",
            "./b",
            "y",
            "-n",
            "z",
            ":",
            "./c",
        ])
        .unwrap();
        let parts: Vec<(Option<u32>, &str, Vec<OsString>)> = o
            .apps
            .iter()
            .map(|a| (a.np, a.program.to_str().unwrap(), a.args.clone()))
            .collect();
        assert_eq!(
            parts,
            vec![
                (Some(1), "./a", args(&["x"])),
                (Some(2), "./b", args(&["y", "-n", "z"])),
                (None, "./c", vec![])
            ]
        );
        // -env, -x and -wdir belong to their part; -genv and --tag-output to the job.
        assert_eq!(o.apps[0].env.set, vec![("A".into(), "a".into())]);
        assert_eq!(o.apps[1].env.set, vec![("B".into(), "b".into())]);
        assert!(o.apps[2].env.set.is_empty());
        assert_eq!(o.env.set, vec![("G".into(), "1".into())]);
        assert_eq!(o.apps[0].wdir, Some("/w".into()));
        assert_eq!(o.apps[1].wdir, None);
        assert!(o.tag_output);
        let o = run(&["-envnone", "./a", ":", "./b"]).unwrap();
        assert!(o.apps[0].filtered && o.apps[0].env.none);
        assert!(!o.apps[1].filtered && !o.env.none);
        // Empty parts are refused, naming the part.
        assert!(run(&["-n", "1", "./a", ":"])
            .unwrap_err()
            .contains("part 2 of the command line (after ':' number 1) has no program"));
        assert!(run(&["./a", ":", ":", "./b"])
            .unwrap_err()
            .contains("part 2"));
        assert!(run(&["./a", ":", "-n", "2", ":", "./b"])
            .unwrap_err()
            .contains("part 2"));
        assert_eq!(run(&[":", "./b"]).unwrap_err(), "no program to run");
    }

    #[test]
    fn mpmd_files() {
        let file = "# two parts\n-n 1 ./a x   # the first\n\n  -n 2 -env V v ./b y\n";
        for opt in ["-configfile", "--app"] {
            let o = run_files(&["--tag-output", opt, "/f"], &[("/f", file)]).unwrap();
            assert!(o.tag_output);
            assert_eq!(o.apps.len(), 2);
            assert_eq!(
                (o.apps[0].np, o.apps[0].program.to_str(), &o.apps[0].args),
                (Some(1), Some("./a"), &args(&["x"]))
            );
            assert_eq!(
                (o.apps[1].np, o.apps[1].program.to_str(), &o.apps[1].args),
                (Some(2), Some("./b"), &args(&["y"]))
            );
            assert_eq!(o.apps[1].env.set, vec![("V".into(), "v".into())]);
        }
        let o = run_files(&["--app=/f", ":", "./c"], &[("/f", file)]).unwrap();
        assert_eq!(o.apps.len(), 3);
        assert!(run_files(&["-configfile", "/nope"], &[])
            .unwrap_err()
            .contains("cannot read the -configfile file /nope"));
        assert!(
            run_files(&["-configfile", "/e"], &[("/e", "# nothing\n\n")])
                .unwrap_err()
                .contains("names no program")
        );
        assert!(run_files(&["-configfile", "/o"], &[("/o", "./a\n-n 2\n")])
            .unwrap_err()
            .contains("part 2 of the command line (from /o) has no program"));
        assert!(
            run_files(&["-configfile", "/s"], &[("/s", "-configfile /s\n")])
                .unwrap_err()
                .contains("too many nested files")
        );
    }
}
