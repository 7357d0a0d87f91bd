//! The receiving side of a Madeleine message: [`Unpacking`] receives the head at once, copies
//! from it at each head piece's `unpack`, and receives the body into the recorded pieces at
//! `end_unpacking`.

use std::marker::PhantomData;

use madmpi_datatypes::Datatype;

use super::pack::{in_head, layout, Piece};
use super::{
    RecvMode, SendMode, HEAD_CAP, HEAD_PREFIX, TAG_BODY, TAG_HEAD, TAG_HEAD_LONG, TAG_HEAD_REST,
};
use crate::error::{err, Error, ErrorClass, Result};
use crate::safe::Equivalence;
use crate::CommId;

/// A message being received (Madeleine's connection object on the receiving side). Pieces
/// unpacked [`RecvMode::Cheaper`] borrow their memory for `'a`. Dropping a message that was
/// not ended ends it (its errors are then lost), so that the channel stays in step.
#[must_use = "a message is completed by end_unpacking"]
pub struct Unpacking<'a> {
    comm: CommId,
    source: i32,
    /// The head as received (prefix included).
    head: Vec<u8>,
    /// Next unread byte of the head.
    cursor: usize,
    /// Bytes of the body the sender sent (0: none).
    body_len: usize,
    /// Where the body goes, in unpack order.
    body: Vec<Piece>,
    /// An unpack asked for more than the head holds: the message did not match.
    overrun: bool,
    ended: bool,
    _data: PhantomData<&'a mut [u8]>,
}

impl<'a> Unpacking<'a> {
    /// Receive the head of the next message from `source` (or any) on `comm`.
    pub(super) fn begin(comm: CommId, source: i32) -> Result<Unpacking<'a>> {
        let byte = super::byte();
        // Posted before the message is there, so that it lands straight in `head` (any tag:
        // the channel's communicator carries only Madeleine messages, and a sender's body
        // always follows the head that this process has already taken).
        let mut head: Vec<u8> = super::head_buffer(HEAD_CAP);
        // A blocking receive (posted and polled in one visit of the engine by its fast path).
        // SAFETY: `head` has room for HEAD_CAP bytes and outlives the receive; only the bytes
        // received are read (set_len to the received count).
        let st = unsafe {
            match crate::recv_now(
                head.as_mut_ptr(),
                HEAD_CAP,
                byte,
                source,
                crate::ANY_TAG,
                comm,
            ) {
                Some(r) => r?,
                None => crate::recv(
                    head.as_mut_ptr(),
                    HEAD_CAP,
                    byte,
                    source,
                    crate::ANY_TAG,
                    comm,
                )?,
            }
        };
        if let Some(class) = st.error {
            return err(
                class,
                "the head of a Madeleine message could not be received",
            );
        }
        // SAFETY: the receive wrote `st.bytes` (at most HEAD_CAP) bytes.
        unsafe { head.set_len(st.bytes as usize) };
        let not_madeleine = || {
            Err(Error::new(
                ErrorClass::Other,
                format!(
                    "a message of {} bytes with tag {} from rank {} is not the head of a \
                     Madeleine message",
                    st.bytes, st.tag, st.source
                ),
            ))
        };
        match st.tag {
            TAG_HEAD if head.len() >= HEAD_PREFIX => {}
            TAG_HEAD_LONG if head.len() == 2 * HEAD_PREFIX => {
                // A long head follows: its length is in the announcement.
                let mut len = [0u8; 8];
                len.copy_from_slice(&head[HEAD_PREFIX..]);
                let len = u64::from_le_bytes(len) as usize;
                if len < HEAD_PREFIX {
                    return not_madeleine();
                }
                super::spare_head(std::mem::replace(&mut head, vec![0u8; len]));
                // SAFETY: `head` holds `len` bytes and outlives the wait.
                let r = unsafe {
                    crate::irecv(head.as_mut_ptr(), len, byte, st.source, TAG_HEAD_REST, comm)?
                };
                let rest = crate::wait(r)?;
                if rest.error.is_some() || rest.bytes as usize != len {
                    return not_madeleine();
                }
            }
            _ => return not_madeleine(),
        }
        let mut prefix = [0u8; HEAD_PREFIX];
        prefix.copy_from_slice(&head[..HEAD_PREFIX]);
        Ok(Unpacking {
            comm,
            source: st.source,
            head,
            cursor: HEAD_PREFIX,
            body_len: u64::from_le_bytes(prefix) as usize,
            body: Vec::new(),
            overrun: false,
            ended: false,
            _data: PhantomData,
        })
    }

    /// The sender's rank in the channel.
    pub fn source(&self) -> i32 {
        self.source
    }

    /// `mad_unpack`: the next piece of the message, of `buf`'s size, unpacked as the sender
    /// packed it (`recv` must be the packing's receive mode; `send` is not used).
    /// [`RecvMode::Express`] data is in `buf` when this returns, [`RecvMode::Cheaper`] data
    /// after [`end_unpacking`](Unpacking::end_unpacking).
    pub fn unpack<T: Equivalence>(
        &mut self,
        buf: &'a mut [T],
        send: SendMode,
        recv: RecvMode,
    ) -> Result<()> {
        // SAFETY: `buf` is borrowed mutably for `'a`, which the message does not outlive.
        unsafe {
            self.unpack_raw(
                buf.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(buf),
                send,
                recv,
            )
        }
    }

    /// [`unpack`](Unpacking::unpack) with [`RecvMode::Express`], borrowing `buf` only for the
    /// call: the data is read as soon as this returns (a header saying how to unpack the rest).
    pub fn unpack_express<T: Equivalence>(&mut self, buf: &mut [T]) -> Result<()> {
        // SAFETY: an express piece is written before this returns, while `buf` is borrowed.
        unsafe {
            self.unpack_raw(
                buf.as_mut_ptr() as *mut u8,
                std::mem::size_of_val(buf),
                SendMode::Cheaper,
                RecvMode::Express,
            )
        }
    }

    /// [`unpack`](Unpacking::unpack) into raw memory (the C API).
    ///
    /// # Safety
    /// `ptr` must be valid for writes of `len` bytes: until `unpack_raw` returns for
    /// [`RecvMode::Express`], else until `end_unpacking` returns.
    pub unsafe fn unpack_raw(
        &mut self,
        ptr: *mut u8,
        len: usize,
        _send: SendMode,
        recv: RecvMode,
    ) -> Result<()> {
        if self.ended {
            return err(ErrorClass::Other, "mad_unpack after mad_end_unpacking");
        }
        if ptr.is_null() && len > 0 {
            return err(ErrorClass::Buffer, "mad_unpack into a NULL buffer");
        }
        if len == 0 {
            return Ok(());
        }
        if !in_head(len, recv) {
            self.body.push(Piece { ptr, len });
            return Ok(());
        }
        let left = self.head.len() - self.cursor;
        if len > left || self.overrun {
            self.overrun = true;
            return err(
                ErrorClass::Truncate,
                format!(
                    "mad_unpack of {len} bytes: the message from rank {} has {left} bytes \
                     left (unpack with the sizes and receive modes it was packed with)",
                    self.source
                ),
            );
        }
        let src = &self.head[self.cursor..self.cursor + len];
        // SAFETY: the caller's contract: `len` writable bytes at `ptr`, not in `head`.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), ptr, len) };
        self.cursor += len;
        Ok(())
    }

    /// `mad_end_unpacking`: the message is complete, every piece in place.
    pub fn end_unpacking(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        let expected: usize = self.body.iter().map(|p| p.len).sum();
        let mut body_err = None;
        if self.body_len > 0 {
            let byte = super::byte();
            let mut scratch = Vec::new();
            let (ptr, dt) = if expected == self.body_len {
                let (base, dt) = layout(&self.body)?;
                (base as *mut u8, dt)
            } else {
                // Consume the body all the same, so that the channel's next message is read.
                scratch = vec![0u8; self.body_len];
                let dt = Datatype::contiguous(self.body_len, byte)?;
                dt.commit();
                (scratch.as_mut_ptr(), dt)
            };
            // SAFETY: the pieces are writable until the message ends (unpack_raw's contract),
            // `scratch` lives past the wait.
            let r = unsafe { crate::irecv(ptr, 1, &dt, self.source, TAG_BODY, self.comm)? };
            let st = crate::wait(r)?;
            drop(scratch);
            body_err = st.error;
        }
        let head_len = self.head.len();
        super::spare_head(std::mem::take(&mut self.head));
        if expected != self.body_len || self.overrun || self.cursor != head_len {
            return Err(Error::new(
                ErrorClass::Truncate,
                format!(
                    "the message from rank {} does not match its unpacking: {} bytes packed \
                     in place and {} unpacked so, {} bytes of small or express pieces packed \
                     and {} unpacked",
                    self.source,
                    self.body_len,
                    expected,
                    head_len - HEAD_PREFIX,
                    self.cursor - HEAD_PREFIX
                ),
            ));
        }
        match body_err {
            Some(class) => err(class, "the body of the message could not be received"),
            None => Ok(()),
        }
    }
}

impl Drop for Unpacking<'_> {
    fn drop(&mut self) {
        if !self.ended && !crate::finalized() {
            let _ = self.finish();
        }
    }
}
