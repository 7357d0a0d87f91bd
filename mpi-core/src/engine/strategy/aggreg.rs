//! `aggreg`: chunks queued while the gate is busy leave together, across communicators and
//! tags, as many as fit in a packet of the first rail (its `aggreg_max`) and in its iovec
//! limit. A gathered fragment, and a message larger than the rail's `solo_min`, travel alone.
//! Small standard-mode sends are copied into the packet being built when they are posted
//! (`packs_on_post`; the engine's `pack_routed`). With several rails, a packet the first rail
//! cannot take now (its driver is busy) leaves on the next one.

use super::{bit, Commit, PacketStrategy};
use crate::engine::{Gate, KIND_PACKED};
use crate::wire;

/// See the [module documentation](self).
pub(crate) struct Aggreg;

impl PacketStrategy for Aggreg {
    fn name(&self) -> &'static str {
        "aggreg"
    }

    fn packs_on_post(&self) -> bool {
        true
    }

    #[inline]
    fn try_and_commit(&self, g: &Gate, busy: u32) -> Commit {
        let rail = if busy == 0 {
            0
        } else {
            match (0..g.rails.len()).find(|&r| busy & bit(r) == 0) {
                Some(r) => r,
                None => return Commit::NONE,
            }
        };
        let mut total = 0usize;
        let mut n = 0usize;
        for c in g.out.iter() {
            let packed = c.hdr.kind == KIND_PACKED;
            // A gathered fragment, and a large message, travel alone.
            if c.gather.is_some() || (!packed && c.len > g.solo_min) {
                return Commit { n: n.max(1), rail };
            }
            let sz = if packed {
                g.packed.len()
            } else {
                wire::pad8(c.hdr.wire_len() + c.len)
            };
            if n > 0 && (total + sz > g.aggreg_max || (n + 1) * 3 > g.max_iov) {
                break;
            }
            total += sz;
            n += 1;
        }
        Commit { n, rail }
    }
}
