//! `adaptive` (the default): aggregate only when it pays. The first small send to a peer
//! after a progress call leaves at once, as under `default` (a lone message gains nothing from
//! waiting); the small sends posted to that peer after it, before the next progress call (a
//! burst: a window of non-blocking sends, one message per communicator of a multi-segment
//! exchange), are copied into the packet being built and leave together at the next progress
//! or completion call, or when the packet is full, as under `aggreg`. Chunks queued while the
//! driver refused (ring or socket full) leave together too, and a message larger than the
//! rail's `solo_min` travels alone. Sends posted outside the fast path (large, non-contiguous,
//! synchronous, persistent) leave at once. Packets are cut as `aggreg` cuts them.

use super::{aggreg::Aggreg, Commit, PacketStrategy};
use crate::engine::Gate;

/// See the [module documentation](self).
pub(crate) struct Adaptive;

impl PacketStrategy for Adaptive {
    fn name(&self) -> &'static str {
        "adaptive"
    }

    fn packs_on_post(&self) -> bool {
        true
    }

    fn lone_at_once(&self) -> bool {
        true
    }

    #[inline]
    fn try_and_commit(&self, g: &Gate, busy: u32) -> Commit {
        Aggreg.try_and_commit(g, busy)
    }
}
