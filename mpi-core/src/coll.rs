//! Collective operations over point-to-point, on each communicator's collective context
//! (`ctx + 1`), so they never match user messages.
//!
//! Each collective is a [`Schedule`]: a small state machine that posts its point-to-point steps
//! and is advanced by the progress engine, so the non-blocking form (MPI_Ibarrier, …) is the
//! natural one and the blocking form is "start, then wait".

use madmpi_datatypes::{Basic, Datatype};

use crate::api::{wait, with};
use crate::engine::{Schedule, State};
use crate::error::{Error, Result};
use crate::request::{RequestId, SendMode};
use crate::CommId;

/// Take the completion of an internal step if it is done: `Ok(None)` while pending, the step's
/// error if it failed.
pub(crate) fn step_done(st: &mut State, id: RequestId) -> Result<Option<crate::Status>> {
    let Some(r) = st.reqs.get(id) else {
        return Err(Error::new(
            crate::ErrorClass::Intern,
            "collective step vanished",
        ));
    };
    if !r.complete {
        return Ok(None);
    }
    let status = r.status;
    st.reqs.remove(id);
    if let Some(class) = status.error {
        return Err(Error::new(
            class,
            "a point-to-point step of the collective failed",
        ));
    }
    Ok(Some(status))
}

/// Dissemination barrier: ⌈log2 n⌉ rounds; in round k each rank signals rank + 2^k and waits
/// for rank - 2^k. Works for any communicator size.
struct Barrier {
    comm: CommId,
    rank: i32,
    size: i32,
    dist: i32,
    round: i32,
    pending: Vec<RequestId>,
}

impl Schedule for Barrier {
    fn advance(&mut self, st: &mut State) -> Result<bool> {
        loop {
            while let Some(&id) = self.pending.last() {
                if step_done(st, id)?.is_none() {
                    return Ok(false);
                }
                self.pending.pop();
            }
            if self.dist >= self.size {
                return Ok(true);
            }
            let to = (self.rank + self.dist) % self.size;
            let from = (self.rank - self.dist + self.size) % self.size;
            let dt = Datatype::basic(Basic::Byte);
            let nothing = std::ptr::NonNull::<u8>::dangling().as_ptr();
            // SAFETY: zero-byte operations touch no memory.
            let r = unsafe { st.irecv(nothing, 0, &dt, from, self.round, self.comm, true)? };
            let s = unsafe {
                st.isend(
                    nothing,
                    0,
                    &dt,
                    to,
                    self.round,
                    self.comm,
                    SendMode::Standard,
                    true,
                )?
            };
            // Checked last-first: the receive completes last.
            self.pending = vec![r, s];
            self.dist *= 2;
            self.round += 1;
        }
    }
}

/// MPI_Ibarrier.
pub fn ibarrier(comm: CommId) -> Result<RequestId> {
    with(|e| {
        let c = e.st.comm(comm)?;
        let b = Barrier {
            comm,
            rank: c.rank,
            size: c.size,
            dist: 1,
            round: 0,
            pending: Vec::new(),
        };
        let r = e.st.start_schedule(Box::new(b))?;
        e.flush()?;
        Ok(r)
    })
}

/// MPI_Barrier.
pub fn barrier(comm: CommId) -> Result<()> {
    let r = ibarrier(comm)?;
    wait(r).map(|_| ())
}
