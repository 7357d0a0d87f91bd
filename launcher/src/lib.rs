//! `mpirun` / `mpiexec` for madmpi: starts N ranks on this node or on several hosts, serves them
//! PMI-1, forwards their stdio, propagates exit codes and aborts, and cleans up after them.
//!
//! - [`cli`]: the command line;
//! - [`hosts`]: host lists, host files and the placement of ranks;
//! - [`job`]: one job's life, in a single-threaded poll(2) loop;
//! - [`proxy`]: the far end of a remote rank (`mpirun --madmpi-proxy` on the other host);
//! - `sys`: the OS calls (all the crate's `unsafe`).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod cli;
pub mod hosts;
pub mod job;
pub mod proxy;
pub mod spawn;
mod sys;

use std::ffi::OsString;

/// The launcher's entry point: parses `std::env::args_os()`, runs the job, returns the exit code.
pub fn main() -> i32 {
    let mut argv = std::env::args_os();
    let argv0 = argv.next().unwrap_or_default();
    let args: Vec<OsString> = argv.collect();
    run(&argv0, &args)
}

/// Runs with explicit arguments (`args` excludes argv[0], which only names us in messages).
pub fn run(argv0: &std::ffi::OsStr, args: &[OsString]) -> i32 {
    if args.first().is_some_and(|a| a == proxy::FLAG) {
        return proxy::main();
    }
    let base = std::path::Path::new(argv0)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let name = if base.as_deref() == Some("mpiexec") {
        "mpiexec"
    } else {
        "mpirun"
    };
    sys::ensure_std_fds();
    let getenv = |k: &str| std::env::var_os(k);
    let opts = match cli::parse(args, &getenv) {
        Ok(cli::Parsed::Run(o)) => *o,
        Ok(cli::Parsed::Help) => {
            print!("{}", cli::help(name));
            return 0;
        }
        Ok(cli::Parsed::Version) => {
            println!("{name} (madmpi) {}", env!("CARGO_PKG_VERSION"));
            return 0;
        }
        Err(e) => {
            eprintln!("{name}: {e}\n{name}: try '{name} --help'");
            return 2;
        }
    };
    sys::raise_nofile_limit();
    let (placement, rsh, proxy_path) = match remote_setup(&opts, &getenv) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("{name}: {e}");
            return 2;
        }
    };
    let apps = opts
        .apps
        .iter()
        .zip(&placement.1)
        .map(|(a, &np)| job::AppSpec {
            np,
            program: a.program.clone(),
            args: a.args.clone(),
            env: cli::build_env(&opts.env, Some(a), std::env::vars_os()),
            wdir: a.wdir.clone().or_else(|| opts.wdir.clone()),
        })
        .collect();
    let (placement, _) = placement;
    job::run(job::JobSpec {
        name: name.to_owned(),
        placement,
        rsh,
        pmi_bind: opts.pmi_bind,
        proxy_path,
        apps,
        tag_output: opts.tag_output,
        timeout: opts.timeout,
        pmi_port: opts.pmi_port,
        verbose: opts.verbose,
        bind: opts.bind,
        keep_going: opts.keep_going,
    })
}

/// The placement of the ranks with the number of ranks of each part, the remote-start command,
/// and the path of this program on the remote hosts.
#[allow(clippy::type_complexity)]
fn remote_setup(
    opts: &cli::Options,
    getenv: &dyn Fn(&str) -> Option<OsString>,
) -> Result<
    (
        (hosts::Placement, Vec<u32>),
        Vec<String>,
        std::path::PathBuf,
    ),
    String,
> {
    let hostname = sys::hostname();
    let is_local = |n: &str| hosts::is_local_name(n, &hostname);
    let entries = match &opts.hosts {
        None => None,
        Some(cli::HostSource::List(l)) => Some(l.clone()),
        Some(cli::HostSource::File(f)) => {
            let text = std::fs::read_to_string(f)
                .map_err(|e| format!("cannot read the host file {}: {e}", f.display()))?;
            Some(hosts::parse_hostfile(&text, &f.display().to_string())?)
        }
    };
    // A part without -n gets the hosts' slots (1 without hosts), as Hydra gives each part.
    let default_np = match &entries {
        None => 1,
        Some(e) => hosts::default_np(e, opts.ppn, &is_local),
    };
    let nps: Vec<u32> = opts
        .apps
        .iter()
        .map(|a| a.np.unwrap_or(default_np))
        .collect();
    let np = nps
        .iter()
        .try_fold(0u32, |t, &n| t.checked_add(n))
        .ok_or("too many ranks in total")?;
    let placement = match &entries {
        None => hosts::Placement::single(np),
        Some(e) => hosts::Placement::plan(e, np, opts.ppn, &is_local)?,
    };
    let rsh_text = opts
        .launcher_exec
        .clone()
        .or_else(|| getenv("MADMPI_RSH").map(|v| v.to_string_lossy().into_owned()))
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| "ssh -x".to_owned());
    let rsh: Vec<String> = rsh_text.split_whitespace().map(str::to_owned).collect();
    let proxy_path = match getenv("MADMPI_PROXY_PATH").filter(|p| !p.is_empty()) {
        Some(p) => std::path::PathBuf::from(p),
        None => std::env::current_exe()
            .map_err(|e| format!("cannot find this program's path (set MADMPI_PROXY_PATH): {e}"))?,
    };
    Ok(((placement, nps), rsh, proxy_path))
}
