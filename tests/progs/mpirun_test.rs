//! The launcher under test: the same code as the `mpirun` binary, built as a bin of this crate so
//! that `cargo test` always runs a fresh one (`CARGO_BIN_EXE_mpirun-test`). Set `MADMPI_MPIRUN`
//! to test another build (e.g. an installed one) instead.

fn main() {
    std::process::exit(madmpi_launcher::main());
}
