//! The buffers of buffered sends: attach and detach (the process's, MPI_Buffer_attach, and a
//! communicator's, MPI_Comm_attach_buffer), automatic buffers (MPI_BUFFER_AUTOMATIC), and
//! flushing (MPI_Buffer_flush/iflush, MPI_Comm_flush_buffer/iflush_buffer: wait until the
//! messages buffered so far have left).

use super::engine_slot::with;
use super::wait::wait_until;
use crate::engine::{BsendBuffer, Schedule, State};
use crate::error::Result;
use crate::request::RequestId;
use crate::CommId;

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

/// MPI_Buffer_attach / MPI_Comm_attach_buffer (`comm`: `None` for the process's buffer):
/// `MPI_ERR_BUFFER` when one is attached already.
pub fn buffer_attach_to(comm: Option<CommId>, b: AttachedBuffer) -> Result<()> {
    with(|e| {
        if let Some(c) = comm {
            e.st.comm(c)?;
        }
        e.st.bsends.attach(
            comm,
            match b {
                AttachedBuffer::User { base, size } => BsendBuffer::user(base as usize, size),
                AttachedBuffer::Automatic => BsendBuffer::automatic(),
            },
        )
    })
}

/// MPI_Buffer_attach of `size` bytes at `base`.
pub fn buffer_attach(base: *mut u8, size: usize) -> Result<()> {
    buffer_attach_to(None, AttachedBuffer::User { base, size })
}

/// MPI_Buffer_detach / MPI_Comm_detach_buffer: waits until every message buffered in it has
/// left, then returns the buffer that was attached (`MPI_ERR_BUFFER` when none is).
pub fn buffer_detach_from(comm: Option<CommId>) -> Result<AttachedBuffer> {
    if let Some(c) = comm {
        with(|e| e.st.comm(c).map(|_| ()))?;
    }
    let b = wait_until(|e| e.st.bsends.detach(comm))?;
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
    Ok(match buffer_detach_from(None)? {
        AttachedBuffer::User { base, size } => (base, size),
        AttachedBuffer::Automatic => (std::ptr::null_mut(), 0),
    })
}

/// MPI_Buffer_flush / MPI_Comm_flush_buffer: wait until every message buffered so far in the
/// buffer of `comm` (`None`: the process's) has left. Nothing to wait for when none is
/// attached.
pub fn buffer_flush(comm: Option<CommId>) -> Result<()> {
    if let Some(c) = comm {
        with(|e| e.st.comm(c).map(|_| ()))?;
    }
    wait_until(|e| Ok((!e.st.bsends.in_use(comm)).then_some(())))
}

/// The schedule of MPI_Buffer_iflush: complete once the buffer has nothing in flight.
struct Flush {
    comm: Option<CommId>,
}

impl Schedule for Flush {
    fn advance(&mut self, st: &mut State) -> Result<bool> {
        Ok(!st.bsends.in_use(self.comm))
    }
}

/// MPI_Buffer_iflush / MPI_Comm_iflush_buffer: a request complete when
/// [`buffer_flush`] would return.
pub fn buffer_iflush(comm: Option<CommId>) -> Result<RequestId> {
    with(|e| {
        if let Some(c) = comm {
            e.st.comm(c)?;
        }
        e.st.start_schedule(Box::new(Flush { comm }))
    })
}
