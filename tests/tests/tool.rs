//! The tool information interface (MPI_T): `tests/c/tool/mpit.c`, a program that uses it as a
//! simple profiler would (enumeration, control variables read and written, a performance
//! variable session around a point-to-point exchange with exact counts, event callbacks,
//! error codes), on 2 to 4 ranks, over shared memory and TCP, under every strategy.

use madmpi_tests::harness::{c_program, toolchain, Job};

fn prog() -> std::path::PathBuf {
    c_program("tool", "mpit", &[])
}

/// Over shared memory and TCP, 2 to 4 ranks.
#[test]
fn mpit_2_to_4() {
    if !toolchain().ours {
        return; // the variables checked are madmpi's own
    }
    let p = prog();
    for n in 2..=4 {
        Job::new(&p, n).run().assert_ok("mpit");
        Job::new(&p, n)
            .env("MADMPI_TRANSPORTS", "tcp")
            .run()
            .assert_ok("mpit");
    }
}

/// Under every strategy (the counts are the same; `split_balance`'s parameter is writable).
#[test]
fn mpit_strategies() {
    if !toolchain().ours {
        return;
    }
    let p = prog();
    for s in ["default", "aggreg", "split_balance"] {
        Job::new(&p, 2)
            .env("MADMPI_STRATEGY", s)
            .run()
            .assert_ok("mpit");
    }
}

/// The emulated BCL-3 link's retransmissions, over a lossy wire (seeded).
#[test]
fn emu_retransmissions() {
    if !toolchain().ours {
        return;
    }
    Job::new(&c_program("tool", "retransmit", &[]), 2)
        .env("MADMPI_TRANSPORTS", "emu")
        .env("MADMPI_EMU", "bcl3")
        .env("MADMPI_EMU_LOSS", "0.01")
        .env("MADMPI_EMU_SEED", "7")
        .run()
        .assert_ok("retransmit");
}
