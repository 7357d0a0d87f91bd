//! MPI_Ibarrier and MPI_Barrier_init (MPI_Barrier is in `comm.rs`).

// The argument lists are the C signatures.
#![allow(clippy::too_many_arguments)]

use super::*;

pub(super) fn barrier_impl(name: &str, comm: MPI_Comm, req: *mut MPI_Request, mode: Mode) -> c_int {
    issue(
        comm,
        req,
        mode,
        &|| format!("{name}(comm={})", cname(comm)),
        |c| match mode {
            Mode::Persistent => madmpi::barrier_init(c).map(Some),
            Mode::Nonblocking => madmpi::ibarrier(c).map(Some),
            Mode::Blocking => madmpi::barrier(c).map(|()| None),
        },
    )
}
