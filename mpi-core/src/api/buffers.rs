//! The buffers of buffered sends: attach and detach (the process's, MPI_Buffer_attach, a
//! communicator's, MPI_Comm_attach_buffer, and a session's, MPI_Session_attach_buffer),
//! automatic buffers (MPI_BUFFER_AUTOMATIC), and flushing (MPI_Buffer_flush/iflush and their
//! communicator and session forms: wait until the messages buffered so far have left).

use super::engine_slot::with;
use super::wait::wait_until;
use crate::engine::{BsendBuffer, BufferOwner, Schedule, State};
use crate::error::Result;
use crate::request::RequestId;

/// A buffer attached: the user's memory, or automatic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttachedBuffer {
    /// `size` bytes at `base`.
    User {
        /// Start of the buffer.
        base: *mut u8,
        /// Its size in bytes.
        size: usize,
    },
    /// MPI_BUFFER_AUTOMATIC.
    Automatic,
}

/// Check that the communicator `owner` names, if any, exists.
fn check(st: &State, owner: BufferOwner) -> Result<()> {
    if let BufferOwner::Comm(c) = owner {
        st.comm(c)?;
    }
    Ok(())
}

/// MPI_Buffer_attach / MPI_Comm_attach_buffer / MPI_Session_attach_buffer: `MPI_ERR_BUFFER`
/// when one is attached already.
pub fn buffer_attach_to(owner: BufferOwner, b: AttachedBuffer) -> Result<()> {
    with(|e| {
        check(&e.st, owner)?;
        e.st.bsends.attach(
            owner,
            match b {
                AttachedBuffer::User { base, size } => BsendBuffer::user(base as usize, size),
                AttachedBuffer::Automatic => BsendBuffer::automatic(),
            },
        )
    })
}

/// MPI_Buffer_attach of `size` bytes at `base`.
pub fn buffer_attach(base: *mut u8, size: usize) -> Result<()> {
    buffer_attach_to(BufferOwner::Process, AttachedBuffer::User { base, size })
}

/// MPI_Buffer_detach / MPI_Comm_detach_buffer / MPI_Session_detach_buffer: waits until every
/// message buffered in it has left, then returns the buffer that was attached
/// (`MPI_ERR_BUFFER` when none is).
pub fn buffer_detach_from(owner: BufferOwner) -> Result<AttachedBuffer> {
    with(|e| check(&e.st, owner))?;
    let b = wait_until(|e| e.st.bsends.detach(owner))?;
    Ok(if b.automatic {
        AttachedBuffer::Automatic
    } else {
        AttachedBuffer::User {
            base: b.base as *mut u8,
            size: b.size,
        }
    })
}

/// MPI_Buffer_detach of a user buffer (an automatic one is reported as (NULL, 0)).
pub fn buffer_detach() -> Result<(*mut u8, usize)> {
    Ok(match buffer_detach_from(BufferOwner::Process)? {
        AttachedBuffer::User { base, size } => (base, size),
        AttachedBuffer::Automatic => (std::ptr::null_mut(), 0),
    })
}

/// MPI_Buffer_flush / MPI_Comm_flush_buffer / MPI_Session_flush_buffer: wait until every
/// message buffered so far in the buffer of `owner` has left. Nothing to wait for when none is
/// attached.
pub fn buffer_flush(owner: BufferOwner) -> Result<()> {
    with(|e| check(&e.st, owner))?;
    wait_until(|e| Ok((!e.st.bsends.in_use(owner)).then_some(())))
}

/// The schedule of MPI_Buffer_iflush: complete once the buffer has nothing in flight.
struct Flush {
    owner: BufferOwner,
}

impl Schedule for Flush {
    fn advance(&mut self, st: &mut State) -> Result<bool> {
        Ok(!st.bsends.in_use(self.owner))
    }
}

/// MPI_Buffer_iflush / MPI_Comm_iflush_buffer / MPI_Session_iflush_buffer: a request complete
/// when [`buffer_flush`] would return.
pub fn buffer_iflush(owner: BufferOwner) -> Result<RequestId> {
    with(|e| {
        check(&e.st, owner)?;
        e.st.start_schedule(Box::new(Flush { owner }))
    })
}
