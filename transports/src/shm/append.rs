//! Packets built in place in a pair ring: the engine writes the chunks of small sends straight
//! into the record being built at the ring's tail ([`ShmTransport::append`]) instead of into a
//! packet of its own that is copied into the ring later, and the record becomes visible to the
//! receiver once it holds [`ShmConfig::publish_min`](super::ShmConfig::publish_min) bytes, at
//! the next whole packet to the same peer, or at [`ShmTransport::publish_all`] (the engine's
//! next progress call). One copy per chunk instead of two, and the receiver works on the
//! first chunks of a burst while the sender writes the next.
//!
//! Only towards a receiver this process has a pair ring to (the usual case: every pair has one
//! up to 9 processes per node): an inbox is shared by several senders under a lock taken per
//! packet, which a record held open would keep. Elsewhere [`Appended::Unsupported`] sends the
//! engine back to its packet.

use std::sync::atomic::Ordering;

use super::ShmTransport;
use crate::PeerId;

/// What became of bytes offered to [`ShmTransport::append`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Appended {
    /// Written.
    Done {
        /// They begin a new packet (the one before them, if any, is visible now).
        begun: bool,
        /// The packet is not visible yet: until a later [`ShmTransport::publish_all`], a
        /// whole packet towards the same peer, or enough bytes appended after them.
        held: bool,
    },
    /// No room in the ring now: nothing written (the packet being built, if any, was made
    /// visible). Poll and try again, or send another way.
    WouldBlock,
    /// This driver builds no packet in place towards this peer (no pair ring of its own, or
    /// more bytes than a packet holds): nothing written.
    Unsupported,
}

impl ShmTransport {
    /// Append `len` bytes (a multiple of 8, at least 8), which `fill` writes at the pointer it
    /// is given, to the packet being built towards `peer`, or begin one with them. The
    /// packet is a ring record like any other: the receiver's poll hands it over whole, so
    /// what is appended must be what the receiver expects packets to be made of (the engine:
    /// whole chunks). Packets to `peer` stay in the order they were begun, with those of
    /// [`Transport::try_send`](crate::Transport::try_send) and
    /// [`ShmTransport::try_send2`], which make the packet being built visible first.
    #[inline(always)]
    pub fn append(&mut self, peer: PeerId, len: usize, fill: impl FnOnce(*mut u8)) -> Appended {
        debug_assert!(len >= 8 && len % 8 == 0);
        let max = self.caps.aggreg_max;
        let Some(j) = self.local_index(peer) else {
            return Appended::Unsupported;
        };
        let Some(t) = self.tx.get_mut(j).and_then(Option::as_mut) else {
            return Appended::Unsupported;
        };
        if len > max {
            return Appended::Unsupported;
        }
        let tail = t.prod.tail();
        let res = match t.prod.append(len, max, fill) {
            None => Appended::WouldBlock,
            Some(begun) => {
                if t.prod.open_len() >= self.publish_min {
                    t.prod.publish();
                    Appended::Done { begun, held: false }
                } else {
                    if !t.listed {
                        t.listed = true;
                        self.held.push(j as u32);
                    }
                    Appended::Done { begun, held: true }
                }
            }
        };
        if self.doorbell && t.prod.tail() != tail {
            // SAFETY: the slot lies in the mapping owned by `self.seg`.
            let slot = unsafe { t.slot.as_ref() };
            // Release: a receiver that sees the new count also sees the record.
            slot.doorbell.0.fetch_add(1, Ordering::Release);
        }
        res
    }

    /// Make every packet being built visible to its receiver.
    #[inline(never)]
    pub fn publish_all(&mut self) {
        let mut held = std::mem::take(&mut self.held);
        for j in held.drain(..) {
            let Some(t) = self.tx.get_mut(j as usize).and_then(Option::as_mut) else {
                continue;
            };
            t.listed = false;
            let tail = t.prod.tail();
            t.prod.publish();
            if self.doorbell && t.prod.tail() != tail {
                // SAFETY: the slot lies in the mapping owned by `self.seg`.
                let slot = unsafe { t.slot.as_ref() };
                slot.doorbell.0.fetch_add(1, Ordering::Release);
            }
        }
        self.held = held;
    }
}

#[cfg(test)]
#[path = "append_tests.rs"]
mod tests;
