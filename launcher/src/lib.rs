//! `mpirun` / `mpiexec` for madmpi: starts N ranks on this node, serves them PMI-1, forwards
//! their stdio, propagates exit codes and aborts, and cleans up after them.
//!
//! - [`cli`]: the command line;
//! - [`job`]: one job's life, in a single-threaded poll(2) loop;
//! - `sys`: the OS calls (all the crate's `unsafe`).
#![deny(missing_docs)]
#![deny(unsafe_code)]

pub mod cli;
pub mod job;
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
        Ok(cli::Parsed::Run(o)) => o,
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
    let env = cli::build_env(&opts.env, std::env::vars_os());
    job::run(job::JobSpec {
        name: name.to_owned(),
        np: opts.np,
        program: opts.program,
        args: opts.args,
        env,
        tag_output: opts.tag_output,
        timeout: opts.timeout,
        pmi_port: opts.pmi_port,
        wdir: opts.wdir,
        verbose: opts.verbose,
    })
}
