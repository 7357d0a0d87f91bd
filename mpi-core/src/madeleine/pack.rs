//! The sending side of a Madeleine message: [`Packing`] records pieces and sends the head and
//! the body at `end_packing`.

use std::marker::PhantomData;

use madmpi_datatypes::Datatype;

use super::{
    RecvMode, SendMode, HEAD_CAP, HEAD_PREFIX, INLINE_MAX, TAG_BODY, TAG_HEAD, TAG_HEAD_LONG,
    TAG_HEAD_REST,
};
use crate::error::{err, ErrorClass, Result};
use crate::safe::Equivalence;
use crate::CommId;

thread_local! {
    /// The list of a message's head pieces, kept from one message to the next (cleared) so
    /// that packing a message does not allocate it.
    static SPARE_PIECES: std::cell::Cell<Vec<Piece>> = const { std::cell::Cell::new(Vec::new()) };
}

/// A piece of memory of the message: the user's (borrowed for the message's lifetime) or one
/// of the message's own copies.
#[derive(Clone, Copy)]
pub(super) struct Piece {
    pub ptr: *const u8,
    pub len: usize,
}

/// A message being built (Madeleine's connection object on the sending side). Pieces borrow
/// their memory for `'a`; nothing is sent before [`end_packing`](Packing::end_packing).
/// Dropping a message that was not ended ends it (its errors are then lost).
#[must_use = "a message is sent by end_packing"]
pub struct Packing<'a> {
    comm: CommId,
    dest: i32,
    /// Pieces of the head, in pack order.
    head: Vec<Piece>,
    /// Bytes of the head's pieces.
    head_len: usize,
    /// Pieces of the body, in pack order.
    body: Vec<Piece>,
    /// Copies made by `Safer` packs (their heap buffers do not move with the vector).
    copies: Vec<Box<[u8]>>,
    ended: bool,
    _data: PhantomData<&'a [u8]>,
}

impl<'a> Packing<'a> {
    pub(super) fn new(comm: CommId, dest: i32) -> Packing<'a> {
        Packing {
            comm,
            dest,
            head: SPARE_PIECES.with(std::cell::Cell::take),
            head_len: 0,
            body: Vec::new(),
            copies: Vec::new(),
            ended: false,
            _data: PhantomData,
        }
    }

    /// The destination's rank in the channel.
    pub fn dest(&self) -> i32 {
        self.dest
    }

    /// `mad_pack`: append `data` to the message. `data` stays borrowed until the message is
    /// ended; with [`SendMode::Later`] it is read then (in Rust the borrow already forbids
    /// changing it: the difference shows through [`pack_raw`](Packing::pack_raw)).
    pub fn pack<T: Equivalence>(
        &mut self,
        data: &'a [T],
        send: SendMode,
        recv: RecvMode,
    ) -> Result<()> {
        // SAFETY: `data` is borrowed for `'a`, which the message does not outlive.
        unsafe {
            self.pack_raw(
                data.as_ptr() as *const u8,
                std::mem::size_of_val(data),
                send,
                recv,
            )
        }
    }

    /// [`pack`](Packing::pack) of raw memory (the C API).
    ///
    /// # Safety
    /// `ptr` must be valid for reads of `len` bytes: until `pack_raw` returns for
    /// [`SendMode::Safer`], else until `end_packing` returns (and, for
    /// [`SendMode::Cheaper`], unchanged until then).
    pub unsafe fn pack_raw(
        &mut self,
        ptr: *const u8,
        len: usize,
        send: SendMode,
        recv: RecvMode,
    ) -> Result<()> {
        if self.ended {
            return err(ErrorClass::Other, "mad_pack after mad_end_packing");
        }
        if ptr.is_null() && len > 0 {
            return err(ErrorClass::Buffer, "mad_pack of a NULL buffer");
        }
        let mut piece = Piece { ptr, len };
        if len == 0 {
            return Ok(());
        }
        if send == SendMode::Safer {
            // SAFETY: the caller's contract: `len` readable bytes at `ptr`.
            let copy: Box<[u8]> = unsafe { std::slice::from_raw_parts(ptr, len) }.into();
            piece.ptr = copy.as_ptr();
            self.copies.push(copy);
        }
        if in_head(len, recv) {
            self.head.push(piece);
            self.head_len += len;
        } else {
            self.body.push(piece);
        }
        Ok(())
    }

    /// `mad_end_packing`: send the message; its memory may be reused when this returns.
    pub fn end_packing(mut self) -> Result<()> {
        self.finish()
    }

    fn finish(&mut self) -> Result<()> {
        if self.ended {
            return Ok(());
        }
        self.ended = true;
        let r = self.send();
        let mut pieces = std::mem::take(&mut self.head);
        pieces.clear();
        SPARE_PIECES.with(|s| s.set(pieces));
        r
    }

    /// Send the head (and the body, if any), and wait until their memory may be reused.
    fn send(&mut self) -> Result<()> {
        let byte = super::byte();
        let body_len: usize = self.body.iter().map(|p| p.len).sum();
        let mut head = super::head_buffer(HEAD_PREFIX + self.head_len);
        head.extend_from_slice(&(body_len as u64).to_le_bytes());
        for p in &self.head {
            // SAFETY: each piece is readable until the message ends (pack_raw's contract, or
            // our own copy); `Later` pieces are read now, as their mode says.
            head.extend_from_slice(unsafe { std::slice::from_raw_parts(p.ptr, p.len) });
        }
        if self.body.is_empty() && head.len() <= HEAD_CAP {
            // One message: a blocking send, whose fast path sends it at once, without a
            // request, when the gate is idle.
            // SAFETY: `head` lives until the send returns.
            let r = unsafe {
                if crate::send_now(
                    head.as_ptr(),
                    head.len(),
                    byte,
                    self.dest,
                    TAG_HEAD,
                    self.comm,
                ) {
                    Ok(())
                } else {
                    crate::send(
                        head.as_ptr(),
                        head.len(),
                        byte,
                        self.dest,
                        TAG_HEAD,
                        self.comm,
                        crate::SendMode::Standard,
                    )
                }
            };
            super::spare_head(head);
            return r;
        }
        let mut reqs = [None, None, None];
        // A head longer than the receiver's pre-posted buffer is announced first: the body's
        // length, then the head's.
        let announce: [u8; 16];
        let pieces: &[(&[u8], i32)] = if head.len() > HEAD_CAP {
            let lens = [body_len as u64, head.len() as u64];
            announce = announcement(lens);
            &[(&announce, TAG_HEAD_LONG), (&head, TAG_HEAD_REST)]
        } else {
            &[(&head, TAG_HEAD)]
        };
        for (i, &(bytes, tag)) in pieces.iter().enumerate() {
            // SAFETY: `head` and `announce` live until the requests are waited for below.
            let r = unsafe {
                crate::isend(
                    bytes.as_ptr(),
                    bytes.len(),
                    byte,
                    self.dest,
                    tag,
                    self.comm,
                    crate::SendMode::Standard,
                )
            };
            match r {
                Ok(r) => reqs[i] = Some(r),
                Err(e) => {
                    for r in reqs.iter_mut().filter_map(Option::take) {
                        let _ = crate::wait(r);
                    }
                    return Err(e);
                }
            }
        }
        if !self.body.is_empty() {
            let (base, dt) = layout(&self.body)?;
            // SAFETY: the pieces stay readable until the message ends, i.e. past the wait.
            let r = unsafe {
                crate::isend(
                    base,
                    1,
                    &dt,
                    self.dest,
                    TAG_BODY,
                    self.comm,
                    crate::SendMode::Standard,
                )
            };
            match r {
                Ok(r) => reqs[2] = Some(r),
                Err(e) => {
                    for r in reqs.iter_mut().filter_map(Option::take) {
                        let _ = crate::wait(r);
                    }
                    return Err(e);
                }
            }
        }
        let mut out = [None, None, None];
        crate::wait_all(&reqs, &mut out)?;
        super::spare_head(head);
        for c in out.iter().flatten() {
            if let Some(class) = c.status.error {
                return err(class, "a piece of the message could not be sent");
            }
        }
        Ok(())
    }
}

impl Drop for Packing<'_> {
    fn drop(&mut self) {
        if !self.ended && !crate::finalized() {
            let _ = self.finish();
        }
    }
}

/// Whether a piece of `len` bytes unpacked with `recv` travels in the head (both sides decide
/// alike).
pub(super) fn in_head(len: usize, recv: RecvMode) -> bool {
    recv == RecvMode::Express || len <= INLINE_MAX
}

/// One datatype covering `pieces` where they lie: the first piece's address and the type of
/// the others' offsets from it (one contiguous run when there is one piece).
pub(super) fn layout(pieces: &[Piece]) -> Result<(*const u8, Datatype)> {
    let byte = super::byte();
    let base = pieces[0].ptr;
    if pieces.len() == 1 {
        let dt = Datatype::contiguous(pieces[0].len, byte)?;
        dt.commit();
        return Ok((base, dt));
    }
    let lens: Vec<usize> = pieces.iter().map(|p| p.len).collect();
    let displs: Vec<isize> = pieces
        .iter()
        .map(|p| (p.ptr as isize).wrapping_sub(base as isize))
        .collect();
    let dt = Datatype::create_hindexed(&lens, &displs, byte)?;
    dt.commit();
    Ok((base, dt))
}

/// Two lengths as 16 little-endian bytes (a long head's announcement).
fn announcement(v: [u64; 2]) -> [u8; 16] {
    let mut b = [0u8; 16];
    b[..8].copy_from_slice(&v[0].to_le_bytes());
    b[8..].copy_from_slice(&v[1].to_le_bytes());
    b
}
