//! The order of a peer's messages: MPI's non-overtaking rule, restored from sequence numbers
//! whatever rail each message took.
//!
//! Every message chunk (Eager, Rts) a gate sends is numbered when it leaves, one counter per
//! peer. The receiver handles them in that order: a chunk that arrives before its turn (on a
//! faster rail) is held, a copy of it, until the ones before it have arrived. On a single rail
//! chunks always arrive in order (drivers deliver FIFO), and the check is one compare. One
//! counter per peer rather than per (peer, communicator) keeps the send fast path to one
//! counter; messages of different communicators then wait for each other on a gap, which MPI
//! allows and which lasts as long as one packet's head start on the other rail.

use crate::wire::Header;

/// Chunks held at most per peer, and how far ahead of the expected one a chunk may be: beyond
/// either, the peer is not following the protocol (memory stays bounded against a forged
/// sequence number).
const MAX_HELD: usize = 1 << 16;

/// The receiving order of one peer's messages.
pub(crate) struct Order {
    /// The sequence number of the next message chunk to handle.
    pub expect: u32,
    /// Chunks that came early, with their payloads.
    held: Vec<(Header, Vec<u8>)>,
}

impl Default for Order {
    fn default() -> Order {
        // Gates number their first message 1.
        Order {
            expect: 1,
            held: Vec::new(),
        }
    }
}

/// Why a chunk cannot be held.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Its number was handled already (or is so far behind that it wrapped).
    Old,
    /// Too far ahead, or too many held.
    TooFar,
}

impl Order {
    /// Whether no chunk is held.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Keep a chunk that came before its turn.
    pub fn hold(&mut self, h: Header, payload: &[u8]) -> Result<(), Refused> {
        let ahead = h.seq.wrapping_sub(self.expect);
        if ahead == 0 || ahead > u32::MAX / 2 {
            return Err(Refused::Old);
        }
        if ahead as usize > MAX_HELD || self.held.len() >= MAX_HELD {
            return Err(Refused::TooFar);
        }
        if self.held.iter().any(|(x, _)| x.seq == h.seq) {
            return Err(Refused::Old);
        }
        self.held.push((h, payload.to_vec()));
        Ok(())
    }

    /// The held chunk whose turn it is, if it has come; the turn moves on.
    pub fn next_held(&mut self) -> Option<(Header, Vec<u8>)> {
        let i = self.held.iter().position(|(h, _)| h.seq == self.expect)?;
        self.expect = self.expect.wrapping_add(1);
        Some(self.held.swap_remove(i))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(seq: u32) -> Header {
        Header {
            seq,
            ..Header::default()
        }
    }

    #[test]
    fn early_chunks_wait_for_their_turn() {
        let mut o = Order::default();
        o.hold(h(3), b"c").unwrap();
        o.hold(h(2), b"b").unwrap();
        assert!(o.next_held().is_none(), "1 has not come");
        o.expect = 2; // 1 arrived and was handled
        assert_eq!(o.next_held().unwrap().1, b"b");
        assert_eq!(o.next_held().unwrap().1, b"c");
        assert!(o.next_held().is_none() && o.is_empty());
        assert_eq!(o.expect, 4);
    }

    #[test]
    fn forged_numbers_are_refused() {
        let mut o = Order::default();
        assert_eq!(o.hold(h(1), b""), Err(Refused::Old), "its turn: not held");
        assert_eq!(o.hold(h(0), b""), Err(Refused::Old));
        assert_eq!(o.hold(h(1 << 20), b""), Err(Refused::TooFar));
        o.hold(h(5), b"").unwrap();
        assert_eq!(o.hold(h(5), b""), Err(Refused::Old), "a duplicate");
        // Around the wrap.
        let mut o = Order {
            expect: u32::MAX,
            held: Vec::new(),
        };
        o.hold(h(1), b"x").unwrap();
        o.expect = 1;
        assert_eq!(o.next_held().unwrap().1, b"x");
    }
}
