//! Peers that die without a word. A TCP connection reports its peer's death (EOF, reset), and
//! the engine fails what involves the peer after that poll (`poll_lost`). A shared-memory ring
//! says nothing: the dead process's records stay readable and no more come, so a rank waiting
//! for it would wait forever. Waits that have found nothing for a while therefore ask the
//! drivers to look at their peers' processes ([`Engine::watch_peers`], from
//! `api::watch`: every 50 ms of idle waiting, never on the fast path), together with the
//! one-sided layer's look at its lock holders (`State::rma_watch`).
//!
//! A peer found dead is lost as one whose connection broke ([`State::peer_lost`]). Receives
//! posted *after* the loss are failed here too ([`State::fail_lost_receives`]): one from the
//! dead rank, or with MPI_ANY_SOURCE on a communicator the dead rank belongs to, when nothing
//! has matched it (MPICH's rule for MPI_ANY_SOURCE: a possible sender has died).
//!
//! This module calls the drivers' `check_peers` (besides `drive`, the only module that calls
//! a driver); it never blocks.

use madmpi_transports::Transport;

use super::{Comm, Engine, State, CTX_LIMIT};
use crate::error::{ErrorClass, Result};
use crate::request::Op;
use crate::ANY_SOURCE;

impl Engine {
    /// Look for peers that died: the drivers' check of their peers' processes
    /// (`Transport::check_peers`) and the one-sided layer's lock holders
    /// (`State::rma_watch`); each dead peer is lost (after one more poll, so that what it
    /// wrote before dying is read first). Then fail the receives posted since a loss that only
    /// a lost peer could satisfy. System calls per local peer: call it rarely.
    pub(crate) fn watch_peers(&mut self) -> Result<()> {
        let mut dead = Vec::new();
        for d in &mut self.drv.list {
            dead.extend(d.check_peers().into_iter().map(|p| p.0));
        }
        dead.retain(|&p| (p as usize) < self.st.gates.len() && !self.st.peer_dead(p));
        if !dead.is_empty() {
            self.progress()?;
            for p in dead {
                if !self.st.peer_dead(p) {
                    tracing::warn!("rank {p} has died: the operations involving it fail");
                    self.st.peer_lost(p);
                }
            }
        }
        self.st.rma_watch();
        if !self.st.lost.is_empty() {
            self.st.fail_lost_receives();
        }
        Ok(())
    }
}

impl State {
    /// Fail every posted receive that only a lost peer could satisfy: from a lost rank, or
    /// from MPI_ANY_SOURCE on a communicator with a lost member (see the module documentation).
    /// Their requests complete with MPI_ERR_PROC_ABORTED.
    pub(crate) fn fail_lost_receives(&mut self) {
        let mut failed = Vec::new();
        let (comms, lost) = (&self.comms, &self.lost);
        for (ctx, q) in self.mq.iter_mut().enumerate() {
            if q.posted.is_empty() {
                continue;
            }
            let Some(peers) = ctx_peers(comms, ctx) else {
                continue;
            };
            q.posted.retain(|&(src, _, rid)| {
                let hit = lost_source(lost, peers, src).is_some();
                if hit {
                    failed.push(rid);
                }
                !hit
            });
        }
        for rid in failed {
            self.fail_request(rid);
        }
    }

    /// Complete request `rid` with MPI_ERR_PROC_ABORTED: a peer it involves has died.
    pub(super) fn fail_request(&mut self, rid: crate::request::RequestId) {
        if let Some(r) = self.reqs.get_mut(rid) {
            r.status.error = Some(ErrorClass::ProcAborted);
            if let Op::Send(s) = &mut r.op {
                s.queued = false;
                s.await_ack = false;
                s.cancel_wait = false;
                s.fragmenting = false;
            }
        }
        self.complete(rid);
    }

    /// The lost peer that keeps a receive or probe from `src` on a communicator of ranks
    /// `peers` from ever matching, when nothing has matched yet: `src` itself, or for
    /// MPI_ANY_SOURCE the first lost member. (For errors; `None` while `lost` is empty.)
    pub(crate) fn lost_source_in(&self, peers: &[u32], src: i32) -> Option<u32> {
        lost_source(&self.lost, peers, src)
    }
}

/// The world ranks of the communicator a matching context belongs to (its collective context
/// and its shadow included), if it still exists.
fn ctx_peers(comms: &[Option<Comm>], ctx: usize) -> Option<&[u32]> {
    let base = (ctx as u32 % CTX_LIMIT) & !1;
    (comms.iter().flatten())
        .find(|c| c.ctx == base)
        .map(|c| c.peers())
}

/// See [`State::lost_source_in`].
fn lost_source(lost: &[u32], peers: &[u32], src: i32) -> Option<u32> {
    if lost.is_empty() {
        return None;
    }
    if src == ANY_SOURCE {
        peers.iter().find(|p| lost.contains(p)).copied()
    } else {
        (peers.get(src as usize))
            .filter(|p| lost.contains(p))
            .copied()
    }
}
