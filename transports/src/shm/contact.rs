//! Reaching a receiver that has no ring of its own for this sender: the first contact, which
//! claims one of the receiver's pair rings while any is left, and the receiver's inbox, shared
//! by the senders that found none (see "Memory" in the module documentation).
//!
//! # What it must never do
//!
//! Block: a sender that finds the inbox's lock taken gets `WouldBlock`, as with a full ring.

use std::sync::atomic::Ordering;

use super::ring::{self, Consumer, Producer};
use super::{RxRing, ShmTransport, Stall, TxRing};
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
        if lock
            .compare_exchange(0, self.me as u32 + 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return self.blocked(j);
        }
        let (ctrl, data) = self.seg.ring(j, layout.pairs);
        // SAFETY: the inbox lies in the mapping owned by `self.seg`; the lock makes this
        // process its only producer until the store below, and the Acquire above shows it the
        // previous holder's `tail`.
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
