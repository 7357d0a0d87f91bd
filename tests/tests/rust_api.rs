//! The native Rust API under the real launcher: the `ring`, `pingpong`, `groups` and
//! `madeleine_rpc` examples of the `madmpi` crate (built by `make`) run under `bin/mpirun` on 1
//! to 4 ranks, over shared memory and over TCP.

use std::path::PathBuf;

use madmpi_tests::harness::{repo, toolchain, Job};

fn example(name: &str) -> Option<PathBuf> {
    if !toolchain().ours {
        return None; // the Rust examples link madmpi itself: nothing to compare with
    }
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target"));
    let p = target.join("release").join("examples").join(name);
    assert!(
        p.exists(),
        "{} was not built (make builds the examples)",
        p.display()
    );
    Some(p)
}

#[test]
fn ring_on_1_to_4_ranks() {
    let Some(ring) = example("ring") else { return };
    for n in 1..=4usize {
        let out = Job::new(&ring, n).run();
        assert!(out.success(), "ring on {n} ranks failed: {}", out.context());
        assert!(
            out.stdout.contains(&format!(
                "ring: 10 laps over {n} ranks, token = {}",
                n * (n - 1) / 2
            )),
            "unexpected output: {}",
            out.stdout
        );
    }
}

#[test]
fn ring_over_tcp() {
    let Some(ring) = example("ring") else { return };
    let out = Job::new(&ring, 3).env("MADMPI_TRANSPORTS", "tcp").run();
    assert!(out.success(), "ring over TCP failed: {}", out.context());
    assert!(
        out.stdout.contains("token = 3"),
        "unexpected output: {}",
        out.stdout
    );
}

/// `Communicator::group` and the group operations of the Rust API on 1 to 4 ranks.
#[test]
fn groups_on_1_to_4_ranks() {
    let Some(groups) = example("groups") else {
        return;
    };
    for n in 1..=4usize {
        let out = Job::new(&groups, n).run();
        assert!(
            out.success(),
            "groups on {n} ranks failed: {}",
            out.context()
        );
        assert!(
            out.stdout.contains(&format!(
                "groups: {n} ranks, {} even, {} odd",
                n.div_ceil(2),
                n / 2
            )),
            "unexpected output: {}",
            out.stdout
        );
    }
}

/// The Madeleine API's RPC example (a header unpacked EXPRESS gives the size of arrays
/// unpacked CHEAPER) on 2 to 4 ranks over shared memory, over TCP and under `aggreg`.
#[test]
fn madeleine_rpc_over_shm_and_tcp() {
    let Some(rpc) = example("madeleine_rpc") else {
        return;
    };
    let runs: &[(usize, &str, &str)] = &[
        (2, "MADMPI_TRANSPORTS", "shm,tcp"),
        (2, "MADMPI_TRANSPORTS", "tcp"),
        (3, "MADMPI_STRATEGY", "aggreg"),
        (4, "MADMPI_TRANSPORTS", "tcp"),
    ];
    for &(n, k, v) in runs {
        let out = Job::new(&rpc, n).env(k, v).run();
        assert!(
            out.success(),
            "madeleine_rpc on {n} ranks with {k}={v} failed: {}",
            out.context()
        );
        assert!(
            out.stdout.contains(&format!(
                "madeleine_rpc: {} calls to {} servers, every answer right",
                8 * (n - 1),
                n - 1
            )),
            "unexpected output: {}",
            out.stdout
        );
    }
}
