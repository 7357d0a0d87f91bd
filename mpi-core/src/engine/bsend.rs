//! The buffers of buffered sends: the process's (MPI_Buffer_attach) and, from MPI-4.1, each
//! communicator's (MPI_Comm_attach_buffer) and each session's (MPI_Session_attach_buffer),
//! given by the user (first-fit allocation of reservations) or automatic
//! (MPI_BUFFER_AUTOMATIC: each buffered message is copied into memory of its own). A buffered
//! send on a communicator uses the communicator's buffer if one is attached, else the buffer of
//! the session the communicator derives from (`Comm::session`) if one is attached, else the
//! process's (MPI-4.1 §3.6). Each buffer counts what is in flight, for flush and detach.
//!
//! State only: nothing here waits (the waiting calls are in `api/buffers.rs`).

use madmpi_datatypes::Datatype;

use super::State;
use crate::error::{err, Error, ErrorClass, Result};
use crate::{CommId, SessionId};

/// Bytes reserved per buffered message beyond its data (MPI_BSEND_OVERHEAD).
pub const BSEND_OVERHEAD: usize = 512;

/// The offset of a message of an automatic buffer (it has none).
const AUTO_OFF: usize = usize::MAX;

/// The id of the process's buffer (communicators' and sessions' buffers get ids from 1).
const PROCESS: usize = 0;

/// Whose buffer: what a buffer is attached to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferOwner {
    /// The process (MPI_Buffer_attach).
    Process,
    /// A communicator (MPI_Comm_attach_buffer).
    Comm(CommId),
    /// A session (MPI_Session_attach_buffer).
    Session(SessionId),
}

/// One attached buffer and its first-fit allocator.
#[derive(Default)]
pub(crate) struct BsendBuffer {
    pub base: usize,
    pub size: usize,
    pub attached: bool,
    /// MPI_BUFFER_AUTOMATIC: messages are copied into memory of their own.
    pub automatic: bool,
    /// Allocated (offset, len), sorted by offset.
    used: Vec<(usize, usize)>,
    /// Messages of an automatic buffer in flight.
    auto_inflight: usize,
}

impl BsendBuffer {
    /// The user's `size` bytes at `base`.
    pub fn user(base: usize, size: usize) -> BsendBuffer {
        BsendBuffer {
            base,
            size,
            attached: true,
            ..BsendBuffer::default()
        }
    }

    /// MPI_BUFFER_AUTOMATIC.
    pub fn automatic() -> BsendBuffer {
        BsendBuffer {
            attached: true,
            automatic: true,
            ..BsendBuffer::default()
        }
    }

    fn alloc(&mut self, len: usize) -> Option<usize> {
        let mut at = 0usize;
        for (i, &(off, l)) in self.used.iter().enumerate() {
            if off - at >= len {
                self.used.insert(i, (at, len));
                return Some(at);
            }
            at = off + l;
        }
        if self.size.saturating_sub(at) >= len {
            self.used.push((at, len));
            Some(at)
        } else {
            None
        }
    }

    fn release(&mut self, off: usize) {
        if off == AUTO_OFF {
            self.auto_inflight = self.auto_inflight.saturating_sub(1);
        } else if let Some(i) = self.used.iter().position(|&(o, _)| o == off) {
            self.used.remove(i);
        }
    }

    fn free_bytes(&self) -> usize {
        self.size - self.used.iter().map(|&(_, l)| l).sum::<usize>()
    }

    /// Whether buffered messages of this buffer are still in flight.
    pub fn in_use(&self) -> bool {
        !self.used.is_empty() || self.auto_inflight > 0
    }
}

/// The process's buffer, the communicators' and the sessions'.
#[derive(Default)]
pub(crate) struct Buffers {
    process: BsendBuffer,
    /// (communicator or session, buffer id, buffer).
    others: Vec<(BufferOwner, usize, BsendBuffer)>,
    last_id: usize,
}

impl Buffers {
    /// The buffer attached to `owner`, if any.
    pub fn get(&self, owner: BufferOwner) -> Option<&BsendBuffer> {
        match owner {
            BufferOwner::Process => Some(&self.process).filter(|b| b.attached),
            o => self.others.iter().find(|e| e.0 == o).map(|e| &e.2),
        }
    }

    /// Attach a buffer to `owner`.
    pub fn attach(&mut self, owner: BufferOwner, b: BsendBuffer) -> Result<()> {
        if self.get(owner).is_some() {
            return err(
                ErrorClass::Buffer,
                "a buffer is already attached (detach it first)",
            );
        }
        match owner {
            BufferOwner::Process => self.process = b,
            o => {
                self.last_id += 1;
                self.others.push((o, self.last_id, b));
            }
        }
        Ok(())
    }

    /// Detach the buffer of `owner` if nothing of it is in flight: `Ok(None)` while something
    /// is, `Err` when none is attached.
    pub fn detach(&mut self, owner: BufferOwner) -> Result<Option<BsendBuffer>> {
        let Some(b) = self.get(owner) else {
            return err(ErrorClass::Buffer, "no buffer is attached");
        };
        if b.in_use() {
            return Ok(None);
        }
        Ok(self.forget(owner))
    }

    /// Detach the buffer of `owner` (if any) without waiting: a communicator freed, a session
    /// finalized. Messages of it in flight still leave (their releases find no buffer).
    pub fn forget(&mut self, owner: BufferOwner) -> Option<BsendBuffer> {
        match owner {
            BufferOwner::Process => Some(std::mem::take(&mut self.process)),
            o => {
                let i = self.others.iter().position(|e| e.0 == o)?;
                Some(self.others.swap_remove(i).2)
            }
        }
    }

    /// Whether messages of the buffer of `owner` are in flight.
    pub fn in_use(&self, owner: BufferOwner) -> bool {
        self.get(owner).is_some_and(|b| b.in_use())
    }

    /// The buffer a buffered send on `comm`, derived from `session`, uses, with its id.
    fn for_send(&mut self, comm: CommId, session: Option<SessionId>) -> (usize, &mut BsendBuffer) {
        let find = |o: BufferOwner| self.others.iter().position(|e| e.0 == o);
        let i = find(BufferOwner::Comm(comm))
            .or_else(|| session.and_then(|s| find(BufferOwner::Session(s))));
        match i {
            Some(i) => {
                let e = &mut self.others[i];
                (e.1, &mut e.2)
            }
            None => (PROCESS, &mut self.process),
        }
    }

    /// A message of buffer `id` at `off` has left.
    pub fn release(&mut self, (id, off): (usize, usize)) {
        let b = if id == PROCESS {
            Some(&mut self.process)
        } else {
            self.others.iter_mut().find(|e| e.1 == id).map(|e| &mut e.2)
        };
        if let Some(b) = b {
            b.release(off);
        }
    }
}

/// A buffered message copied: where its data is, its reservation (buffer id, offset) and the
/// memory of its own of a message of an automatic buffer.
pub(super) type Reserved = (*const u8, (usize, usize), Option<Vec<u8>>);

impl State {
    /// Copy a buffered message of `count` elements of `dt` at `buf` (`bytes` packed) into the
    /// buffer its communicator uses (its own, its session's, or the process's). Returns where the data now is, the reservation to release
    /// when it has left, and the memory of its own of a message of an automatic buffer.
    ///
    /// # Safety
    /// `buf` must hold `count` elements of `dt`.
    pub(super) unsafe fn bsend_reserve(
        &mut self,
        comm: CommId,
        buf: *const u8,
        count: usize,
        dt: &Datatype,
        bytes: usize,
    ) -> Result<Reserved> {
        let session = self.comm(comm)?.session;
        let (id, b) = self.bsends.for_send(comm, session);
        if b.automatic {
            let mut v = vec![0u8; bytes];
            // SAFETY: the caller's contract.
            unsafe { dt.pack(buf, count, 0, &mut v) };
            b.auto_inflight += 1;
            return Ok((v.as_ptr(), (id, AUTO_OFF), Some(v)));
        }
        // Exactly what MPI_Pack_size + MPI_BSEND_OVERHEAD promises the user suffices, for
        // each message in the buffer at once: no padding (the data is bytes, copied and sent
        // as bytes; nothing reads it aligned).
        let need = bytes + BSEND_OVERHEAD;
        let off = b.alloc(need).ok_or_else(|| {
            Error::new(
                ErrorClass::BufferSpace,
                format!(
                    "attached buffer too small for a buffered send of {bytes} bytes: needs \
                     {need} (data + MPI_BSEND_OVERHEAD), {} free of {}",
                    b.free_bytes(),
                    b.size
                ),
            )
        })?;
        let dst = (b.base + off) as *mut u8;
        // SAFETY: [off, off+need) lies inside the attached buffer, reserved for this message.
        let out = unsafe { std::slice::from_raw_parts_mut(dst, bytes) };
        if dt.is_contiguous() {
            // SAFETY: the caller's contract; a contiguous type's data starts at its true lb.
            unsafe { std::ptr::copy_nonoverlapping(buf.offset(dt.true_lb()), dst, bytes) };
        } else {
            // SAFETY: the caller's contract.
            unsafe { dt.pack(buf, count, 0, out) };
        }
        Ok((dst, (id, off), None))
    }
}
