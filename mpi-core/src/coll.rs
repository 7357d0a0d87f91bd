//! Collective operations over point-to-point, on each communicator's collective context
//! (`ctx + 1`), so they never match user messages.

use madmpi_datatypes::{Basic, Datatype};

use crate::api::{wait, with};
use crate::error::Result;
use crate::request::SendMode;
use crate::CommId;

/// MPI_Barrier: dissemination algorithm, ⌈log2 n⌉ rounds of zero-byte messages; works for any
/// communicator size.
pub fn barrier(comm: CommId) -> Result<()> {
    let (rank, size) = with(|e| {
        let c = e.st.comm(comm)?;
        Ok((c.rank, c.size))
    })?;
    if size == 1 {
        return Ok(());
    }
    let dt = Datatype::basic(Basic::Byte);
    let mut dist = 1;
    let mut round = 0;
    while dist < size {
        let to = (rank + dist) % size;
        let from = (rank - dist + size) % size;
        let (r, s) = with(|e| {
            // SAFETY: zero-byte operations touch no memory.
            let r = unsafe {
                e.st.irecv(
                    std::ptr::NonNull::dangling().as_ptr(),
                    0,
                    &dt,
                    from,
                    round,
                    comm,
                    true,
                )?
            };
            let s = unsafe {
                e.st.isend(
                    std::ptr::NonNull::dangling().as_ptr(),
                    0,
                    &dt,
                    to,
                    round,
                    comm,
                    SendMode::Standard,
                    true,
                )?
            };
            e.flush()?;
            Ok((r, s))
        })?;
        wait(s)?;
        wait(r)?;
        dist *= 2;
        round += 1;
    }
    Ok(())
}
