//! The shared-memory driver with many ranks on one node (oversubscribed here), where most
//! receivers have more senders than pair rings and the others share the receiver's inbox
//! (`docs/architecture.md`, "Shared memory at scale"): `tests/c/shm/many.c` sends messages
//! of 0 to 40 KiB to each rank's next 12 ranks, received with `MPI_ANY_SOURCE` and
//! `MPI_ANY_TAG` (bytes and per-sender order checked), then runs collectives with byte checks.

use std::time::Duration;

use madmpi_tests::harness::{c_program, Job};

fn many(ranks: usize, per: usize) -> Job {
    Job::new(&c_program("shm", "many", &[]), ranks)
        .args(&[&per.to_string()])
        .timeout(Duration::from_secs(300))
}

fn ok(job: Job, ranks: usize) {
    let o = job.run();
    o.assert_ok("many");
    assert!(
        o.stdout.contains(&format!("ranks {ranks}\n")),
        "{}",
        o.context()
    );
}

/// 64 ranks with the defaults: 8 pair rings per receiver, 12 senders each.
#[test]
fn ranks_64_pair_rings_and_inbox() {
    ok(many(64, 10), 64);
}

/// Every message through the inboxes, and every pair with its own ring.
#[test]
fn ranks_64_inbox_only_and_all_pairs() {
    ok(many(64, 4).env("MADMPI_SHM_PAIR_RINGS", "0"), 64);
    ok(many(64, 4).env("MADMPI_SHM_PAIR_RINGS", "63"), 64);
}

/// 128 ranks (16 GiB of per-pair rings before; a few hundred MiB now).
#[test]
fn ranks_128() {
    ok(many(128, 2), 128);
}
