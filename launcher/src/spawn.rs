//! PMI-1 `spawn` (MPI_Comm_spawn, MPI_Comm_spawn_multiple): a rank asks the launcher to start
//! new processes. They form a job of their own, with its own PMI server, KVS and world: this
//! program starts itself again (`mpirun -n N prog args : -n M prog2 ...`), with the parent's
//! port (the `PARENT_ROOT_PORT_NAME` key the request preputs) in `MADMPI_PARENT_PORT`; the
//! children's MPI_Init connects to it, which gives MPI_Comm_get_parent.
//!
//! Info keys served: `wdir` (the children's working directory), `path` (directories searched
//! for the program, before `PATH`), `host` (a host list, as `--host`, for the whole request);
//! others are ignored, as the standard allows. A program that cannot be found is refused
//! before anything starts (the parent's MPI_Comm_spawn then fails with MPI_ERR_SPAWN instead of
//! waiting for children that never come).
//!
//! The spawned jobs are this job's children: the launcher waits for them at its end, and
//! kills them if the job failed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use madmpi_pmi::SpawnBlock;

/// The key MPICH's clients read their parent's port from (we pass it on as
/// `MADMPI_PARENT_PORT`).
pub const PARENT_KEY: &str = "PARENT_ROOT_PORT_NAME";

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn info<'a>(b: &'a SpawnBlock, key: &str) -> Option<&'a str> {
    b.info
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .filter(|v| !v.trim().is_empty())
}

/// The program of `b`, resolved: relative to its working directory when it names a path,
/// else in the info's `path` and then `PATH`.
fn resolve(b: &SpawnBlock, cwd: &Path) -> Result<PathBuf, String> {
    let name = b.execname.trim();
    if name.is_empty() {
        return Err("spawn: no program named".into());
    }
    let wdir = info(b, "wdir").map_or_else(|| cwd.to_path_buf(), |w| cwd.join(w));
    if name.contains('/') {
        let p = wdir.join(name);
        return if executable(&p) {
            Ok(p)
        } else {
            Err(format!("spawn: {} is not an executable file", p.display()))
        };
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(path) = info(b, "path") {
        dirs.extend(path.split(':').map(|d| wdir.join(d)));
    }
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| executable(p))
        .ok_or_else(|| format!("spawn: program {name:?} not found"))
}

/// The command line of the spawned job: `-n N [-wdir D] prog args` per block, `:` between.
pub fn command_line(blocks: &[SpawnBlock], cwd: &Path) -> Result<Vec<String>, String> {
    if blocks.is_empty() {
        return Err("spawn: an empty request".into());
    }
    let mut argv: Vec<String> = Vec::new();
    let hosts: Vec<&str> = blocks.iter().filter_map(|b| info(b, "host")).collect();
    if let Some(h) = hosts.first() {
        argv.extend(["--host".to_owned(), h.to_string()]);
    }
    for (i, b) in blocks.iter().enumerate() {
        if b.nprocs < 1 {
            return Err(format!("spawn: {} processes", b.nprocs));
        }
        if i > 0 {
            argv.push(":".into());
        }
        argv.extend(["-n".to_owned(), b.nprocs.to_string()]);
        if let Some(w) = info(b, "wdir") {
            let w = cwd.join(w);
            if !w.is_dir() {
                return Err(format!("spawn: wdir {} is not a directory", w.display()));
            }
            argv.extend(["-wdir".to_owned(), w.to_string_lossy().into_owned()]);
        }
        argv.push(resolve(b, cwd)?.to_string_lossy().into_owned());
        argv.extend(b.args.iter().cloned());
    }
    Ok(argv)
}

/// Start the job a spawn request asks for (see the module documentation).
pub fn start(blocks: &[SpawnBlock]) -> Result<Child, String> {
    let me = std::env::current_exe().map_err(|e| format!("spawn: this program's path: {e}"))?;
    start_with(&me, blocks)
}

/// Start the job a spawn request asks for with the launcher `mpirun` (a singleton, which has no
/// launcher of its own, starts one this way).
pub fn start_with(mpirun: &Path, blocks: &[SpawnBlock]) -> Result<Child, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("spawn: {e}"))?;
    let argv = command_line(blocks, &cwd)?;
    let port = blocks
        .iter()
        .flat_map(|b| b.preput.iter())
        .find(|(k, _)| k == PARENT_KEY)
        .map(|(_, v)| v.clone())
        .ok_or_else(|| format!("spawn: no {PARENT_KEY} in the request"))?;
    Command::new(mpirun)
        .args(&argv)
        .env("MADMPI_PARENT_PORT", port)
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawn: starting the launcher {}: {e}", mpirun.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(n: i32, exe: &str, info: &[(&str, &str)]) -> SpawnBlock {
        SpawnBlock {
            nprocs: n,
            execname: exe.into(),
            args: vec!["a b".into()],
            preput: vec![],
            info: info
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }
    }

    #[test]
    fn command_lines() {
        let cwd = Path::new("/");
        let argv = command_line(
            &[
                block(2, "sh", &[]),
                block(1, "/bin/sh", &[("wdir", "/tmp")]),
            ],
            cwd,
        )
        .unwrap();
        assert_eq!(argv[0..2], ["-n", "2"]);
        assert!(argv[2].ends_with("/sh"), "{argv:?}");
        assert_eq!(argv[3], "a b");
        assert_eq!(
            argv[4..],
            [":", "-n", "1", "-wdir", "/tmp", "/bin/sh", "a b"]
        );
        let argv = command_line(&[block(1, "sh", &[("host", "localhost")])], cwd).unwrap();
        assert_eq!(argv[0..2], ["--host", "localhost"]);
        assert!(command_line(&[block(1, "no-such-program-x", &[])], cwd)
            .unwrap_err()
            .contains("not found"));
        assert!(command_line(&[block(1, "sh", &[("path", "/nonexistent")])], cwd).is_ok());
        assert!(command_line(&[block(0, "sh", &[])], cwd).is_err());
        assert!(command_line(&[block(1, "sh", &[("wdir", "/nonexistent")])], cwd).is_err());
        assert!(command_line(&[], cwd).is_err());
    }
}
