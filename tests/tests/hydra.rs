//! The same unmodified binaries under MPICH's Hydra (`mpiexec.hydra`): programs built with our
//! `bin/mpicc` bootstrap through Hydra's PMI-1, over the inherited socket (`PMI_FD`, Hydra's
//! default) and over its TCP port (`-pmi-port`); with `MADMPI_TRANSPORTS=tcp` the ranks'
//! connections are authenticated with a secret rank 0 draws and publishes in the KVS, since
//! Hydra serves no `madmpi_secret`.
//!
//! Skips with a printed reason when `mpiexec.hydra` is not installed (Debian package `mpich`).

use std::process::Command;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

#[path = "../progs/launch_helpers.rs"]
mod helpers;

use helpers::{program, run, Finished};

const LIMIT: Duration = Duration::from_secs(60);

fn serial() -> MutexGuard<'static, ()> {
    static L: Mutex<()> = Mutex::new(());
    L.lock().unwrap_or_else(|e| e.into_inner())
}

fn hydra(test: &str) -> Option<String> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("mpiexec.hydra"))
            .find(|p| p.is_file())
    });
    match found {
        Some(p) => Some(p.display().to_string()),
        None => {
            println!("SKIP {test}: mpiexec.hydra is not installed (Debian package mpich)");
            None
        }
    }
}

/// `mpiexec.hydra [mode] -n 4 prog args` with `env` added.
fn under_hydra(
    hydra: &str,
    mode: &[&str],
    prog: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> Finished {
    let exe = program(prog);
    let mut cmd = Command::new(hydra);
    cmd.args(mode).args(["-n", "4"]).arg(&exe).args(args);
    // Our own launcher's variables must not leak into the ranks Hydra starts.
    for k in [
        "MADMPI_PMI_TOKEN",
        "PMI_FD",
        "PMI_PORT",
        "PMI_ID",
        "MADMPI_TRANSPORTS",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    run(cmd, LIMIT)
}

fn check(o: &Finished, ok: &str, what: &str) {
    assert_eq!(o.code, Some(0), "{what}\n{}", o.dump());
    assert!(
        o.stdout.lines().any(|l| l.trim() == ok),
        "{what}: no '{ok}' line\n{}",
        o.dump()
    );
}

const MODES: [&[&str]; 2] = [&[], &["-pmi-port"]];
const TRANSPORTS: [&[(&str, &str)]; 2] = [&[], &[("MADMPI_TRANSPORTS", "tcp")]];

fn examples_under_hydra(prog: &str, args: &[&str], ok: &str) {
    let _one = serial();
    let Some(h) = hydra(prog) else { return };
    for mode in MODES {
        for env in TRANSPORTS {
            let o = under_hydra(&h, mode, prog, args, env);
            println!("{prog} {mode:?} {env:?}: {:.2?}", o.elapsed);
            check(&o, ok, &format!("{prog} under Hydra {mode:?} {env:?}"));
        }
    }
}

#[test]
fn ring_under_hydra() {
    examples_under_hydra("examples-c/ring.c", &[], "ring: OK (4 ranks)");
}

#[test]
fn pingpong_under_hydra() {
    examples_under_hydra(
        "examples-c/pingpong.c",
        &["262144"],
        "pingpong: OK (4 ranks)",
    );
}

#[test]
fn nonblocking_under_hydra() {
    examples_under_hydra("examples-c/nonblocking.c", &[], "nonblocking: OK (4 ranks)");
}

#[test]
fn point_to_point_traffic_under_hydra() {
    examples_under_hydra("tests/c/faults/traffic.c", &["100"], "OK traffic");
}

/// The name service (MPI_Publish_name and its kin) through Hydra's PMI-1 `publish_name`,
/// `lookup_name` and `unpublish_name` (Hydra's own table without `-nameserver`).
#[test]
fn name_service_under_hydra() {
    examples_under_hydra("tests/c/dpm/names.c", &[], "OK names");
}

/// MPI_Comm_spawn and MPI_Comm_spawn_multiple through Hydra's PMI-1 `spawn`: Hydra starts the
/// children and puts the parents' port (preput as `PARENT_ROOT_PORT_NAME`) in their KVS, where
/// their MPI_Init finds it. Hydra accepts a spawn of a missing program and only its proxy
/// fails to start it, so that part of `spawn.c` ends with MPI_ERR_SPAWN after
/// `MADMPI_DPM_TIMEOUT`.
#[test]
fn spawn_under_hydra() {
    let _one = serial();
    let Some(h) = hydra("spawn_under_hydra") else {
        return;
    };
    let o = under_hydra(
        &h,
        &[],
        "tests/c/dpm/spawn.c",
        &[],
        &[("MADMPI_DPM_TIMEOUT", "15")],
    );
    println!("spawn under Hydra: {:.2?}", o.elapsed);
    check(&o, "OK spawn", "spawn under Hydra");
}

#[test]
fn tcp_secret_comes_from_rank_0_through_the_kvs() {
    let _one = serial();
    let Some(h) = hydra("tcp_secret_comes_from_rank_0_through_the_kvs") else {
        return;
    };
    for mode in MODES {
        let o = under_hydra(
            &h,
            mode,
            "tests/c/faults/traffic.c",
            &["20"],
            &[("MADMPI_TRANSPORTS", "tcp"), ("MADMPI_PMI_TRACE", "1")],
        );
        check(&o, "OK traffic", &format!("traffic {mode:?} traced"));
        // Hydra has no madmpi_secret; rank 0 published one, the others read it.
        assert!(
            o.stderr.contains("key=madmpi_secret rc=-1")
                || o.stderr
                    .contains("get_result rc=-1 msg=key_madmpi_secret_not_found"),
            "Hydra should not know madmpi_secret\n{}",
            o.dump()
        );
        let puts = o
            .stderr
            .lines()
            .filter(|l| l.contains("cmd=put") && l.contains("key=madmpi_secret_r0"))
            .count();
        assert_eq!(puts, 1, "exactly rank 0 publishes the secret\n{}", o.dump());
        let gets = o
            .stderr
            .lines()
            .filter(|l| l.contains("cmd=get") && l.contains("key=madmpi_secret_r0"))
            .count();
        assert!(gets >= 3, "the other ranks read it\n{}", o.dump());
    }
}
