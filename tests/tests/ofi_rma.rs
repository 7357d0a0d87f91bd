//! One-sided communication over the `ofi` transport (libfabric's `tcp;ofi_rxm` on one host,
//! every peer treated as remote with `MADMPI_RMA_DIRECT=0`): puts and gets by RDMA (`fi_write`,
//! `fi_read` into the target's registered window, `mpi-core/src/rma/rdma.rs`) with
//! `MADMPI_OFI_RMA=1` (the default; with `MADMPI_OFI_RMA_MIN=0` for every size, else from
//! 64 KiB on over this provider), by active messages with `MADMPI_OFI_RMA=0`; the trace's
//! driver counters say which path the data took.
//!
//! - `rdma`: fence, lock/flush/flush_local, shared locks, derived datatypes on origin, target
//!   and result (8 runs: RDMA; 100 runs: messages), `MPI_Rput`/`MPI_Rget`, and a target that
//!   computes without MPI calls while the others put and get 1 MiB under a lock (served by
//!   its asynchronous progress thread: `tcp;ofi_rxm` progresses its RDMA in software), on 2
//!   and 4 ranks, byte checked.
//! - The RMA suite's `fence`, `passive`, `pscw`, `large` and `async` programs over `ofi`
//!   with RDMA on: accumulates, atomics and synchronisation on messages next to RDMA puts and
//!   gets on the same windows.
//!
//! Skipped, with the reason printed, when the library was built without libfabric.
//! madmpi-specific: skipped under another MPI.

use madmpi_tests::harness::{c_program, scratch, Job};

fn ofi() -> bool {
    madmpi_tests::harness::have_ofi()
}

/// `min`: `MADMPI_OFI_RMA_MIN` (`None`: the driver's default, 64 KiB over `tcp;ofi_rxm`).
fn job(name: &str, ranks: usize, rma: &str, min: Option<&str>) -> Job {
    let j = Job::new(&c_program("rma", name, &[]), ranks)
        .env("MADMPI_TRANSPORTS", "ofi")
        .env("MADMPI_OFI_PROVIDER", "tcp;ofi_rxm")
        .env("MADMPI_RMA_DIRECT", "0")
        .env("MADMPI_OFI_RMA", rma);
    match min {
        Some(m) => j.env("MADMPI_OFI_RMA_MIN", m),
        None => j,
    }
}

fn counter_sum(dir: &std::path::Path, ranks: usize, name: &str) -> u64 {
    madmpi_tests::harness::ofi_counter_sum(dir, ranks, name)
}

/// Run `name` on `ranks` with `MADMPI_OFI_RMA=rma`, traced: (RDMA writes, RDMA reads,
/// registered windows), summed over the ranks.
fn run_counted(name: &str, ranks: usize, rma: &str, min: Option<&str>) -> (u64, u64, u64) {
    let dir = scratch().join(format!(
        "ofi-win-{name}-{ranks}-{rma}-{}-{}",
        min.unwrap_or("default"),
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let o = job(name, ranks, rma, min)
        .env("MADMPI_TRACE", &dir.display().to_string())
        .run();
    o.assert_ok(name);
    assert!(
        !o.stderr.contains("madmpi: dropped"),
        "a chunk was dropped: {}",
        o.context()
    );
    let c = (
        counter_sum(&dir, ranks, "rma_writes"),
        counter_sum(&dir, ranks, "rma_reads"),
        counter_sum(&dir, ranks, "rma_windows"),
    );
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "{name} on {ranks} ranks, MADMPI_OFI_RMA={rma}, MADMPI_OFI_RMA_MIN={min:?}: {} writes, \
         {} reads, {} windows registered ({:?})",
        c.0, c.1, c.2, o.elapsed
    );
    c
}

fn rdma_on_and_off(name: &str, ranks: usize, min: Option<&str>) {
    if !ofi() {
        return;
    }
    let (w, r, regs) = run_counted(name, ranks, "1", min);
    assert!(
        w > 0 && r > 0 && regs > 0,
        "{name}: RDMA on, but {w} writes, {r} reads, {regs} windows registered"
    );
    let (w, r, regs) = run_counted(name, ranks, "0", min);
    assert_eq!(
        (w, r, regs),
        (0, 0, 0),
        "{name}: MADMPI_OFI_RMA=0 does no RDMA"
    );
}

/// Every put and get by RDMA, whatever its size.
#[test]
fn rdma_2() {
    rdma_on_and_off("rdma", 2, Some("0"));
}

/// The default: over `tcp;ofi_rxm`, puts and gets from 64 KiB on by RDMA, smaller ones as
/// messages.
#[test]
fn rdma_4() {
    rdma_on_and_off("rdma", 4, None);
}

/// The RMA suite's programs over `ofi` with RDMA on for every size (their puts and gets by
/// RDMA, the rest by messages on the same windows).
#[test]
fn rma_suite_over_ofi_with_rdma() {
    if !ofi() {
        return;
    }
    for (name, ranks) in [
        ("fence", 4),
        ("passive", 3),
        ("pscw", 4),
        ("large", 3),
        ("async", 3),
    ] {
        let (w, r, _) = run_counted(name, ranks, "1", Some("0"));
        assert!(w + r > 0, "{name}: no RDMA transfer");
    }
}

/// Dynamic windows: each attached region registered (three attaches and one re-attach at
/// the same address per rank), origins asking for a region's key on first access, then
/// putting and getting by RDMA; a region detached and attached again at the same address is
/// reached with its new key (the old one deregistered: using it would fail the transfer).
/// With `MADMPI_OFI_RMA=0`: the same by messages, nothing registered.
#[test]
fn rdma_dynamic() {
    if !ofi() {
        return;
    }
    for ranks in [2, 3] {
        let (w, r, regs) = run_counted("rdmadyn", ranks, "1", None);
        assert_eq!(
            regs,
            4 * ranks as u64,
            "rdmadyn on {ranks}: every attach registered"
        );
        // Per rank and round (4): at least the second put of the lock_all epoch and its get.
        assert!(
            w >= 4 * ranks as u64 && r >= 4 * ranks as u64,
            "rdmadyn on {ranks}: {w} RDMA writes, {r} reads"
        );
    }
    let (w, r, regs) = run_counted("rdmadyn", 2, "0", None);
    assert_eq!((w, r, regs), (0, 0, 0), "MADMPI_OFI_RMA=0 does no RDMA");
}
