//! The engine: gates, strategies, matching and the eager / rendezvous / synchronous protocols.
//!
//! Structure after NewMadeleine: an operation becomes a request plus chunks queued on the gate of
//! its peer (*collect*); when the gate's driver can take a packet, the strategy builds it from the
//! queued chunks (*schedule*); the driver moves it (*transfer*). Incoming packets are cut into
//! chunks and handled by [`State::handle_packet`], which only changes state and queues replies:
//! it never calls a driver. The few operations that need a driver after a packet was handled
//! (rendezvous `get`s) are queued in [`State::gets`] and run by [`Engine::progress`].
//!
//! One module per concept:
//!
//! - `state`: [`State`], [`Engine`], communicators, completion, persistent requests, schedules,
//!   the loss of a peer;
//! - `gate`: the per-peer queues of outgoing chunks, numbering and what a driver took;
//! - `send`: `isend`, buffered sends, `aggreg`'s copy on post, cancellation;
//! - `recv`: `irecv`, delivery of a matched message, the receiving side of the rendezvous;
//! - `matching`: posted and unexpected queues, probes;
//! - `input`: the packets of peers (`handle_packet`) and the driver's receive sink;
//! - `order`: restoring the order of a peer's messages;
//! - `rails`: the drivers and the rails of a gate;
//! - `strategy`: what the next packet is made of and on which rail;
//! - `drive`: the module that calls drivers (packet building, progress);
//! - `resilience`: losing one of a peer's several rails without losing what it carried;
//! - `liveness`: peers that die without their driver noticing (`shm`), looked for by idle
//!   waits; receives that only a lost peer could satisfy;
//! - `owned`: what the one-sided layer (`crate::rma`) uses: chunks with owned payloads.
//!
//! Only `drive` calls a driver (and `liveness` its check of the peers' processes). This module
//! never blocks and never sleeps; waiting lives in `api`.

use crate::wire;

mod bsend;
mod drive;
mod dynamic;
mod gate;
mod input;
mod liveness;
mod matching;
mod order;
mod owned;
#[cfg(test)]
pub(crate) use owned::tests as owned_tests;
pub(crate) mod rails;
mod recv;
mod resilience;
mod send;
mod state;
pub(crate) mod strategy;

pub(crate) use bsend::BsendBuffer;
use bsend::Buffers;
pub use bsend::{BufferOwner, BSEND_OVERHEAD};
use gate::{gate_for, Gate, NotPacked, OnSent, OutChunk, Route, KIND_PACKED};
use input::SPLIT_MIN;
pub(crate) use matching::CTX_LIMIT;
#[cfg(test)]
pub(crate) use matching::CTX_WIRE_LIMIT;
use matching::{matches, MatchQ, UBody, Unexpected};
pub(crate) use owned::Owned;
pub(crate) use rails::Drivers;
use recv::{check_src_tag, PendingGet};
use send::{check_dest_tag, check_type, gather_worthy};
use state::bad_request;
pub(crate) use state::{Comm, Engine, Schedule, State};
pub use strategy::Strategy;

/// The sender's request named by a message whose send has no request record (a blocking send
/// that left at once, a send complete at its posting): no cancel or acknowledgement can name
/// it, where 0 would be a live request's id (slot 0 at generation 0) and a cancel of that
/// request could take such a message for its own.
pub(crate) const NO_SREQ: u64 = crate::request::RequestId::COMPLETE.0;

const PAD: [u8; 8] = [0; 8];

/// Padding after a chunk of `len` payload bytes (both header lengths are multiples of 8).
#[inline]
fn pad_len(len: usize) -> usize {
    wire::pad8(len) - len
}

/// # Safety
/// `ptr` must be valid for `len` bytes (or `len == 0`).
#[inline]
unsafe fn raw_slice<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        &[]
    } else {
        std::slice::from_raw_parts(ptr, len)
    }
}

#[cfg(test)]
mod sim;
