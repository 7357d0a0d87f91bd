//! Locks held by a process that died. A dead origin's window locks are given back at every
//! target, so that the origins waiting for them go on (`State::rma_peer_lost` calls
//! [`State::rma_release_locks`]): on the direct path the lock words of the control block
//! (`Direct::release_dead`), on the active-message path the lock each target keeps.
//!
//! The engine learns of a death from its transports, but a shared-memory ring reports a dead
//! peer only when a send to it finds its ring full: a process waiting for a lock, or a target
//! whose lock has waiters, may never send anything to the dead holder; nor may an origin
//! waiting for a dead target's grant or answers find its ring full. So they also look
//! ([`State::rma_watch`], part of the engine's look for dead peers that every wait makes once
//! per 50 ms of idle waiting: `api/watch.rs`): a lock holder on this host whose process no
//! longer exists (its id, published when the window was created) is a lost peer.

use super::direct::pid_alive;
use super::target::give_back;
use super::Held;
use crate::engine::State;

impl State {
    /// Look for lock holders on this host whose process has died (on the direct path, the
    /// holders recorded in every slot of the control block; on the active-message path, the
    /// holders of this process's lock while origins wait for it, and the targets this process
    /// waits for), and treat each as a lost peer: its locks are given back, the operations
    /// involving it fail.
    pub(crate) fn rma_watch(&mut self) {
        let mut dead: Vec<u32> = Vec::new();
        for w in self.rma.wins.iter().flatten() {
            if let Some(d) = &w.direct {
                dead.extend(
                    (0..w.world.len())
                        .filter_map(|t| d.dead_holder(t))
                        .map(|o| w.world[o]),
                );
            } else {
                // The holders of this process's lock, while origins wait for it; the targets
                // this process waits for (a grant, answers).
                let shared = (w.shared_by.iter().enumerate()).filter_map(|(o, &s)| s.then_some(o));
                let holders = (!w.waiting.is_empty())
                    .then(|| w.excl.map(|o| o as usize).into_iter().chain(shared))
                    .into_iter()
                    .flatten();
                let targets = (0..w.world.len())
                    .filter(|&t| w.pending[t] > 0 || matches!(w.held[t], Held::Asked(_)));
                dead.extend(
                    (holders.chain(targets))
                        .filter(|&o| w.pids[o] > 0 && !pid_alive(w.pids[o]))
                        .map(|o| w.world[o]),
                );
            }
        }
        dead.sort_unstable();
        dead.dedup();
        for p in dead {
            if !self.peer_dead(p) {
                tracing::warn!("rank {p} died holding a window lock: its locks are given back");
                self.peer_lost(p);
            }
        }
    }

    /// World rank `peer` died: on the active-message path, give back the lock it held on this
    /// process's part of each window (exclusive, or its share of a shared one), forget its
    /// requests for it, and grant the lock to the origins waiting. (The direct path's lock
    /// words: `Direct::release_dead`.)
    pub(crate) fn rma_release_locks(&mut self, peer: u32) {
        let mut serve = Vec::new();
        for (i, w) in self.rma.wins.iter_mut().enumerate() {
            let Some(w) = w.as_mut().filter(|w| w.direct.is_none()) else {
                continue;
            };
            let Some(r) = w.world.iter().position(|&x| x == peer) else {
                continue;
            };
            let before = (w.excl, w.shared, w.waiting.len());
            w.waiting.retain(|x| x.0 != r as i32);
            give_back(w, r as i32);
            if (w.excl, w.shared, w.waiting.len()) != before {
                tracing::debug!("gave back the lock dead rank {peer} held or asked for");
                serve.push(i);
            }
        }
        for i in serve {
            self.serve_lock(i);
        }
    }
}
