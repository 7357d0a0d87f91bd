//! `mpirun` (also installed as `mpiexec`).

fn main() {
    std::process::exit(madmpi_launcher::main());
}
