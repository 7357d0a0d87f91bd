//! The Madeleine API: Madeleine II's incremental message construction (Aumage et al., table 1)
//! over the engine. A message to one peer of a [`Channel`] is built by
//! [`Channel::begin_packing`], [`Packing::pack`] for each piece of data and
//! [`Packing::end_packing`]; the receiver mirrors it with [`Channel::begin_unpacking`],
//! [`Unpacking::unpack`] in the same order with the same sizes and receive modes, and
//! [`Unpacking::end_unpacking`].
//!
//! Each piece carries a pair of modes. On the sending side: [`SendMode::Safer`] (copied at once:
//! the caller may reuse the memory as soon as `pack` returns), [`SendMode::Later`] (read only
//! at `end_packing`: changes made before it are sent), [`SendMode::Cheaper`] (the library's
//! choice: left untouched until `end_packing` returns). On the receiving side:
//! [`RecvMode::Express`] (in place when `unpack` returns: a header that says how to unpack the
//! rest) and [`RecvMode::Cheaper`] (in place after `end_unpacking`).
//!
//! How a message travels (ordinary messages on the channel's own communicator, so every
//! transport and strategy carries it):
//! - the *head*, tag [`TAG_HEAD`]: 8 bytes giving the length of the body, then every `Express`
//!   piece and every `Cheaper` piece of at most [`INLINE_MAX`] bytes, in pack order, copied
//!   into one buffer at `end_packing` (`Safer` pieces were copied at `pack`). The receiver
//!   posts its receive for the head at `begin_unpacking`, before the message is there, into a
//!   buffer of [`HEAD_CAP`] bytes (any tag: the channel's communicator carries nothing else),
//!   so that a head arrives as an ordinary expected message: no probe, no unexpected copy. A
//!   longer head travels in two messages: tag [`TAG_HEAD_LONG`] with the body's and the head's
//!   lengths, then the head itself, tag [`TAG_HEAD_REST`];
//! - the *body*, tag [`TAG_BODY`], only when the message has larger `Cheaper` pieces: one
//!   message whose datatype lists those pieces where they lie in memory, so that the engine
//!   sends them without a copy (and, for large blocks, by rendezvous straight into the
//!   receiver's buffers), and the strategy aggregates what is small.
//!
//! The head leaves before the body and the engine keeps a peer's messages in order, so
//! `Express` data is there before the `Cheaper` data behind it. Both sides decide where a
//! piece goes from its receive mode and its size alone, which is why unpacking must repeat the
//! packing's sizes and receive modes (the send mode given to `unpack` is accepted for
//! symmetry with Madeleine and not used). A receiver that unpacks less or more than was packed
//! gets `MPI_ERR_TRUNCATE` at `end_unpacking` (the message is consumed all the same, so the
//! channel stays usable).
//!
//! This module reaches the engine through the raw point-to-point API only; it owns no state of
//! the engine and adds nothing to its paths.

mod pack;
mod unpack;

pub use pack::Packing;
pub use unpack::Unpacking;

use std::sync::OnceLock;

use madmpi_datatypes::{Basic, Datatype};

use crate::error::{err, ErrorClass, Result};
use crate::CommId;

/// How the sender's memory is read (Madeleine's `send_*` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendMode {
    /// Copied at once: the memory may be changed as soon as `pack` returns.
    Safer,
    /// Read at `end_packing`: changes made until then are part of the message.
    Later,
    /// The library's choice: the memory must stay unchanged until `end_packing` returns.
    Cheaper,
}

/// When received data is in place (Madeleine's `receive_*` flags).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvMode {
    /// In place as soon as `unpack` returns.
    Express,
    /// In place after `end_unpacking`.
    Cheaper,
}

/// Madeleine's `send_SAFER`.
pub const SEND_SAFER: SendMode = SendMode::Safer;
/// Madeleine's `send_LATER`.
pub const SEND_LATER: SendMode = SendMode::Later;
/// Madeleine's `send_CHEAPER`.
pub const SEND_CHEAPER: SendMode = SendMode::Cheaper;
/// Madeleine's `receive_EXPRESS`.
pub const RECV_EXPRESS: RecvMode = RecvMode::Express;
/// Madeleine's `receive_CHEAPER`.
pub const RECV_CHEAPER: RecvMode = RecvMode::Cheaper;

/// `Cheaper` pieces of at most this many bytes travel in the head (copied); larger ones in the
/// body (in place).
pub const INLINE_MAX: usize = 4096;

/// Tag of a message's head on the channel's communicator.
pub const TAG_HEAD: i32 = 1;
/// Tag of a message's body.
pub const TAG_BODY: i32 = 2;
/// Tag of the announcement of a head longer than [`HEAD_CAP`]: the body's length, then the
/// head's, 8 bytes each.
pub const TAG_HEAD_LONG: i32 = 3;
/// Tag of a head announced by [`TAG_HEAD_LONG`].
pub const TAG_HEAD_REST: i32 = 4;

/// The largest head sent as one message: what the receiver's pre-posted receive holds.
pub const HEAD_CAP: usize = 2 * INLINE_MAX + HEAD_PREFIX;

/// Bytes of the head before its data: the body's length.
const HEAD_PREFIX: usize = 8;

/// `MPI_BYTE`, the type of heads (one reference for every message: no reference count
/// taken and dropped per message).
fn byte() -> &'static Datatype {
    static BYTE: OnceLock<Datatype> = OnceLock::new();
    BYTE.get_or_init(|| Datatype::basic(Basic::Byte))
}

thread_local! {
    /// A head buffer kept from one message to the next (a ping-pong alternates a packing and
    /// an unpacking, each holding one), so that a message does not allocate its head.
    static SPARE: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// An empty buffer with room for `cap` bytes: the spare one if there is one.
fn head_buffer(cap: usize) -> Vec<u8> {
    let mut v = SPARE.with(std::cell::Cell::take);
    v.clear();
    v.reserve(cap);
    v
}

/// Keep `v` as the spare head buffer (unless it is larger than a head usually is).
fn spare_head(v: Vec<u8>) {
    if v.capacity() <= HEAD_CAP {
        SPARE.with(|s| s.set(v));
    }
}

/// A channel: a closed world of communication over a group of processes, as in Madeleine II.
/// It owns a duplicate of the communicator it was opened on, so its messages never match
/// anything else. Closing it (or dropping it) frees that communicator.
#[derive(Debug)]
pub struct Channel {
    comm: CommId,
    /// Processes of the channel (a communicator's size never changes).
    size: i32,
    open: bool,
}

impl Channel {
    /// Open a channel over the processes of `comm`: collective over `comm` (it duplicates it).
    pub fn open(comm: CommId) -> Result<Channel> {
        let comm = crate::comm_dup(comm)?;
        let size = match crate::comm_size(comm) {
            Ok(n) => n,
            Err(e) => {
                let _ = crate::free_comm(comm);
                return Err(e);
            }
        };
        Ok(Channel {
            comm,
            size,
            open: true,
        })
    }

    /// The channel's own communicator (a duplicate of the one it was opened on).
    pub fn comm(&self) -> CommId {
        self.comm
    }

    /// This process's rank in the channel.
    pub fn rank(&self) -> Result<i32> {
        crate::comm_rank(self.comm)
    }

    /// The number of processes of the channel.
    pub fn size(&self) -> Result<i32> {
        Ok(self.size)
    }

    /// Close the channel (frees its communicator). Messages under construction must have been
    /// ended.
    pub fn close(mut self) -> Result<()> {
        self.open = false;
        crate::free_comm(self.comm)
    }

    /// `mad_begin_packing`: start a message to `dest` (a rank of the channel).
    pub fn begin_packing<'a>(&self, dest: i32) -> Result<Packing<'a>> {
        begin_packing_sized(self.comm, self.size, dest)
    }

    /// `mad_begin_unpacking`: wait for the next message from any process of the channel.
    pub fn begin_unpacking<'a>(&self) -> Result<Unpacking<'a>> {
        begin_unpacking_sized(self.comm, self.size, crate::ANY_SOURCE)
    }

    /// Wait for the next message from `source` (a rank of the channel).
    pub fn begin_unpacking_from<'a>(&self, source: i32) -> Result<Unpacking<'a>> {
        begin_unpacking_sized(self.comm, self.size, source)
    }
}

/// [`Channel::begin_packing`] on the communicator of a channel (`channel.comm()`), for callers
/// that keep the channel elsewhere (the C API).
pub fn begin_packing<'a>(channel: CommId, dest: i32) -> Result<Packing<'a>> {
    begin_packing_sized(channel, crate::comm_size(channel)?, dest)
}

/// [`begin_packing`] on a channel of `size` processes (its size known already: no visit of
/// the engine to learn it).
pub fn begin_packing_sized<'a>(channel: CommId, size: i32, dest: i32) -> Result<Packing<'a>> {
    if dest < 0 || dest >= size {
        return err(
            ErrorClass::Rank,
            format!("invalid destination {dest} (channel of {size} processes)"),
        );
    }
    Ok(Packing::new(channel, dest))
}

/// [`Channel::begin_unpacking_from`] (`source` a rank, or [`crate::ANY_SOURCE`]) on the
/// communicator of a channel.
pub fn begin_unpacking<'a>(channel: CommId, source: i32) -> Result<Unpacking<'a>> {
    begin_unpacking_sized(channel, crate::comm_size(channel)?, source)
}

/// [`begin_unpacking`] on a channel of `size` processes (its size known already: no visit of
/// the engine to learn it).
pub fn begin_unpacking_sized<'a>(channel: CommId, size: i32, source: i32) -> Result<Unpacking<'a>> {
    if source != crate::ANY_SOURCE && (source < 0 || source >= size) {
        return err(
            ErrorClass::Rank,
            format!("invalid source {source} (channel of {size} processes)"),
        );
    }
    Unpacking::begin(channel, source)
}

impl Drop for Channel {
    fn drop(&mut self) {
        if self.open && !crate::finalized() {
            let _ = crate::free_comm(self.comm);
        }
    }
}
