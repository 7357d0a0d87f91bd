//! `default`: one chunk per packet, sent as soon as the gate is idle, on the first rail.

use super::{one_chunk, Commit, PacketStrategy};
use crate::engine::Gate;

/// See the [module documentation](self).
pub(crate) struct Default;

impl PacketStrategy for Default {
    fn name(&self) -> &'static str {
        "default"
    }

    #[inline]
    fn try_and_commit(&self, g: &Gate, _busy: u32) -> Commit {
        one_chunk(g)
    }
}
