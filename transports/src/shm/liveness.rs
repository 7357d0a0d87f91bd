//! Whether the local processes still live. A ring says nothing when its producer dies: the
//! records it published stay readable and no more come. So a receiver waiting for a dead peer
//! learns of the death only by looking at the peer's process, which costs system calls
//! ([`crate::pid_alive`]); the engine asks ([`Transport::check_peers`]) only from waits that
//! have found nothing for a while. A sender finds out by itself when the receiver's ring stays
//! full ([`ShmTransport::blocked`]), and the senders of an inbox when its lock stays taken
//! (`contact.rs`). A peer that closed its driver (finalized) is gone but not dead: it is never
//! reported by [`ShmTransport::check_peers`], as a TCP peer that closed cleanly is not.
//!
//! The processes of a node are assumed to share a pid namespace (as cross-memory attach and
//! the ring-full check already assume): a peer whose pid this process cannot see counts as
//! dead.
//!
//! [`Transport::check_peers`]: crate::Transport::check_peers

use std::sync::atomic::Ordering;

use super::segment::{STATE_ATTACHED, STATE_CLOSED};
use super::ShmTransport;
use crate::sys;
use crate::PeerId;

impl ShmTransport {
    /// Whether local process `j` is gone: its driver closed, or its process no longer exists.
    /// (System calls: for the slow paths only.)
    pub(super) fn gone(&self, j: usize) -> bool {
        let ident = self.ident(j);
        let state = ident.state.load(Ordering::Acquire);
        let pid = ident.pid.load(Ordering::Acquire);
        state == STATE_CLOSED || (pid > 0 && !sys::pid_alive(pid))
    }

    /// The local processes that died (attached, their driver not closed, and their process
    /// gone) since the last call, each reported once.
    pub(super) fn dead_peers(&mut self) -> Vec<PeerId> {
        let mut out = Vec::new();
        for j in 0..self.peers.len() {
            if j == self.me || self.reported[j] {
                continue;
            }
            let ident = self.ident(j);
            let pid = ident.pid.load(Ordering::Acquire);
            if ident.state.load(Ordering::Acquire) != STATE_ATTACHED || pid <= 0 {
                continue;
            }
            if !sys::pid_alive(pid)
                // Closed between the two looks: it finalized before exiting.
                && ident.state.load(Ordering::Acquire) == STATE_ATTACHED
            {
                self.reported[j] = true;
                out.push(self.peers[j]);
            }
        }
        out
    }
}
