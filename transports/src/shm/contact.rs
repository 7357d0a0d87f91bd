//! Reaching a receiver that has no ring of its own for this sender: the first contact, which
//! claims one of the receiver's pair rings while any is left, and the receiver's inbox, shared
//! by the senders that found none (see "Memory" in the module documentation).
//!
//! # What it must never do
//!
//! Block: a sender that finds the inbox's lock taken gets `WouldBlock`, as with a full ring.

use std::sync::atomic::Ordering;
use std::time::Instant;

use super::ring::{self, Consumer, Producer};
use super::{RxRing, ShmTransport, Stall, TxRing, PEER_CHECK_AFTER};
use crate::{Error, Result, SendOutcome};

impl ShmTransport {
    /// [`push_record`](Self::push_record) to local `j`, which has no pair ring from us: on
    /// first contact claim one of its pair rings (while any is left) and push there; else
    /// push to its inbox, under its producer lock (held by another sender: `WouldBlock`).
    #[cold]
    #[inline(never)]
    pub(super) fn push_far(
        &mut self,
        j: usize,
        push: impl FnOnce(&mut Producer, u64) -> bool,
    ) -> Result<SendOutcome> {
        let layout = self.seg.layout;
        let cap = layout.ring_bytes;
        // SAFETY: slots point into the mapping owned by `self.seg`; only atomics are accessed.
        let slot = unsafe { self.slots[j].as_ref() };
        if !self.far[j].inbox {
            let k = slot.claimed.0.fetch_add(1, Ordering::AcqRel) as usize;
            if k >= layout.pairs {
                self.far[j].inbox = true;
            } else {
                let (ctrl, data) = self.seg.ring(j, k);
                // SAFETY: the ring lies in the mapping owned by `self.seg`, and the claim
                // above made this process its only producer; nothing was written to it yet.
                let prod = unsafe { Producer::new(ctrl, data, cap) };
                // Release: the receiver that sees the owner sees an empty ring.
                // SAFETY: as above.
                unsafe { ctrl.as_ref() }
                    .owner
                    .0
                    .store(self.me as u32 + 1, Ordering::Release);
                self.tx[j] = Some(TxRing {
                    prod,
                    slot: self.slots[j],
                    stall: Stall::default(),
                });
                let t = self.tx[j].as_mut().expect("just set");
                if push(&mut t.prod, 0) {
                    if self.doorbell {
                        slot.doorbell.0.fetch_add(1, Ordering::Release);
                    }
                    return Ok(SendOutcome::Done);
                }
                return self.blocked(j);
            }
        }
        let lock = &slot.inbox_lock.0;
        let (ctrl, data) = self.seg.ring(j, layout.pairs);
        if let Err(holder) =
            lock.compare_exchange(0, self.me as u32 + 1, Ordering::Acquire, Ordering::Relaxed)
        {
            if !self.take_from_dead(j, holder)? {
                return self.blocked(j);
            }
        } else {
            self.far[j].lock_stall = Stall::default();
        }
        // SAFETY: the inbox lies in the mapping owned by `self.seg`; the lock makes this
        // process its only producer until the store below, and the Acquire above shows it the
        // previous holder's `tail` (repaired by `take_from_dead` when the holder died).
        let mut prod = unsafe { Producer::new(ctrl, data, cap) };
        let pushed = push(&mut prod, ring::from_bits(self.me));
        lock.store(0, Ordering::Release);
        if !pushed {
            return self.blocked(j);
        }
        if self.doorbell {
            slot.doorbell.0.fetch_add(1, Ordering::Release);
        }
        self.far[j].stall = Stall::default();
        Ok(SendOutcome::Done)
    }

    /// The inbox lock of local `j` was found held by `holder` (its local index + 1). After it
    /// has stayed held for [`PEER_CHECK_AFTER`], check (once per such period) whether the
    /// holder still lives; if it died holding the lock (its pid gone, or its driver closed,
    /// which never happens while it holds the lock), take the lock over and repair the
    /// inbox's `tail`, which the holder may have left behind the records it published.
    /// True when this process now holds the lock.
    #[cold]
    #[inline(never)]
    fn take_from_dead(&mut self, j: usize, holder: u32) -> Result<bool> {
        let s = &mut self.far[j].lock_stall;
        s.count = s.count.wrapping_add(1);
        // Read the clock once every 256 attempts only.
        if s.count & 0xff != 1 {
            return Ok(false);
        }
        let now = Instant::now();
        match s.since {
            Some(since) if now.duration_since(since) >= PEER_CHECK_AFTER => s.since = Some(now),
            None => {
                s.since = Some(now);
                return Ok(false);
            }
            Some(_) => return Ok(false),
        }
        let k = (holder as usize).wrapping_sub(1);
        // A holder that is no process of the node (a scribbled word) holds nothing.
        let dead = k >= self.peers.len() || k == self.me || self.gone(k);
        if !dead {
            return Ok(false);
        }
        // SAFETY: slots point into the mapping owned by `self.seg`; only atomics are accessed.
        let lock = unsafe { &self.slots[j].as_ref().inbox_lock.0 };
        // Only one of the senders that found the holder dead takes the lock over.
        if lock
            .compare_exchange(
                holder,
                self.me as u32 + 1,
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .is_err()
        {
            return Ok(false);
        }
        let (ctrl, data) = self.seg.ring(j, self.seg.layout.pairs);
        // SAFETY: the inbox lies in the mapping owned by `self.seg`; we hold its lock, and its
        // previous holder is gone.
        let fixed = unsafe { ring::repair_tail(ctrl, data, self.seg.layout.ring_bytes) };
        if let Err(e) = fixed {
            lock.store(0, Ordering::Release);
            return Err(e);
        }
        self.far[j].lock_stall = Stall::default();
        tracing::warn!(
            receiver = self.peers[j].0,
            holder = k,
            "shm: took over the inbox lock of a dead sender"
        );
        Ok(true)
    }

    /// Take into `rx` the pair rings of this process that senders have claimed since the
    /// last call (a ring whose owner is not written yet is taken at a later call).
    #[cold]
    #[inline(never)]
    pub(super) fn adopt(&mut self) -> Result<()> {
        // SAFETY: the slot lies in the mapping owned by `self.seg`; only atomics are accessed.
        let claimed = unsafe { self.my_slot.as_ref() }
            .claimed
            .0
            .load(Ordering::Acquire) as usize;
        let claimed = claimed.min(self.claimable);
        if claimed <= self.adopted_count {
            return Ok(());
        }
        let cap = self.seg.layout.ring_bytes;
        for k in 0..claimed {
            if self.adopted[k] {
                continue;
            }
            let (ctrl, data) = self.seg.ring(self.me, k);
            // SAFETY: the ring lies in the mapping owned by `self.seg`.
            let owner = unsafe { ctrl.as_ref() }.owner.0.load(Ordering::Acquire) as usize;
            if owner == 0 {
                continue;
            }
            let j = owner - 1;
            if j >= self.peers.len() || j == self.me {
                return Err(Error::Malformed(format!(
                    "shm: pair ring {k} claimed by local index {j} of {}",
                    self.peers.len()
                )));
            }
            self.rx.push(RxRing {
                // SAFETY: as above; we are the only consumer of our rings.
                cons: unsafe { Consumer::new(ctrl, data, cap) },
                peer: self.peers[j],
                inbox: false,
            });
            self.adopted[k] = true;
            self.adopted_count += 1;
        }
        Ok(())
    }
}
