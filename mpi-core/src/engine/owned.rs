//! What the engine offers the one-sided layer (`crate::rma`), which lives outside it: chunks
//! whose payload the engine owns until a driver took them (`queue_owned`), completion of a
//! request, and a gate's limits. Off the point-to-point paths: nothing here runs unless a window
//! is used.

use super::gate::{OnSent, OutChunk};
use super::State;
use crate::request::RequestId;
use crate::wire::Header;

/// Payloads of queued chunks the engine owns, by slot (freed when the chunk leaves).
#[derive(Default)]
pub(crate) struct Owned {
    slots: Vec<Option<Vec<u8>>>,
    free: Vec<u32>,
}

impl Owned {
    /// Keep `body` in a slot (until `release_owned`); its number.
    pub(super) fn keep(&mut self, body: Vec<u8>) -> u32 {
        match self.free.pop() {
            Some(k) => {
                self.slots[k as usize] = Some(body);
                k
            }
            None => {
                self.slots.push(Some(body));
                self.slots.len() as u32 - 1
            }
        }
    }
}

impl State {
    /// Queue a chunk with header `hdr` (its `len` set here) and payload `body` to world rank
    /// `peer`; the engine keeps `body` until a driver took the chunk.
    pub(crate) fn queue_owned(&mut self, peer: u32, mut hdr: Header, body: Vec<u8>) {
        hdr.len = body.len() as u32;
        let (ptr, len) = (body.as_ptr(), body.len());
        let k = self.owned.keep(body);
        self.queue(
            peer,
            OutChunk {
                hdr,
                // (A Vec's heap buffer does not move when the Vec does.)
                ptr,
                len,
                sent: OnSent::Owned(k),
                gather: None,
            },
        );
    }

    /// The chunk that owned slot `k` left.
    pub(super) fn release_owned(&mut self, k: u32) {
        if let Some(s) = self.owned.slots.get_mut(k as usize) {
            if s.take().is_some() {
                self.owned.free.push(k);
            }
        }
    }

    /// Mark request `id` complete (with `error`, if any).
    pub(crate) fn complete_with(&mut self, id: RequestId, error: Option<crate::ErrorClass>) {
        if let Some(r) = self.reqs.get_mut(id) {
            if error.is_some() {
                r.status.error = error;
            }
        }
        self.complete(id);
    }

    /// The largest chunk payload to world rank `peer`.
    pub(crate) fn chunk_max(&self, peer: u32) -> usize {
        self.gates[peer as usize].frag_max
    }

    /// Whether world rank `peer` has died.
    pub(crate) fn peer_dead(&self, peer: u32) -> bool {
        self.gates[peer as usize].dead
    }
}
