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
    /// Payload buffers of chunks that left, kept for the next ones (`owned_buffer`): a large
    /// one-sided operation is cut into many chunks of the gate's largest packet, and
    /// allocating them afresh each time made the allocator give the memory back to the
    /// system and fault it in again, page by page, for every operation.
    spare: Vec<Vec<u8>>,
    /// Bytes held by `spare` (at most `SPARE_BYTES`).
    spare_bytes: usize,
}

/// Payload buffers smaller than this are not kept (the allocator serves them well).
const SPARE_MIN: usize = 4096;
/// At most this many bytes of payload buffers are kept.
const SPARE_BYTES: usize = 8 << 20;

impl Owned {
    /// A chunk with header `hdr` (its `len` set here) and payload `body`, which is kept in a
    /// slot until a driver took the chunk (`release_owned`).
    pub(super) fn chunk(&mut self, mut hdr: Header, body: Vec<u8>) -> OutChunk {
        hdr.len = body.len() as u32;
        // (A Vec's heap buffer does not move when the Vec does.)
        let (ptr, len) = (body.as_ptr(), body.len());
        let k = match self.free.pop() {
            Some(k) => {
                self.slots[k as usize] = Some(body);
                k
            }
            None => {
                self.slots.push(Some(body));
                self.slots.len() as u32 - 1
            }
        };
        OutChunk {
            hdr,
            ptr,
            len,
            sent: OnSent::Owned(k),
            gather: None,
        }
    }
}

impl State {
    /// Queue a chunk with header `hdr` (its `len` set here) and payload `body` to world rank
    /// `peer`; the engine keeps `body` until a driver took the chunk.
    pub(crate) fn queue_owned(&mut self, peer: u32, hdr: Header, body: Vec<u8>) {
        let c = self.owned.chunk(hdr, body);
        self.queue(peer, c);
    }

    /// The chunk that owned slot `k` left.
    pub(super) fn release_owned(&mut self, k: u32) {
        let o = &mut self.owned;
        if let Some(s) = o.slots.get_mut(k as usize) {
            if let Some(mut v) = s.take() {
                o.free.push(k);
                let cap = v.capacity();
                if cap >= SPARE_MIN && o.spare_bytes + cap <= SPARE_BYTES {
                    v.clear();
                    o.spare_bytes += cap;
                    o.spare.push(v);
                }
            }
        }
    }

    /// An empty buffer for the payload of a chunk of about `cap` bytes (`queue_owned`): one
    /// a chunk that left gave back, or a new one.
    pub(crate) fn owned_buffer(&mut self, cap: usize) -> Vec<u8> {
        let o = &mut self.owned;
        if cap >= SPARE_MIN {
            if let Some(mut v) = o.spare.pop() {
                o.spare_bytes -= v.capacity();
                v.reserve(cap);
                return v;
            }
        }
        Vec::with_capacity(cap)
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

    /// The index of the driver of world rank `peer`'s first rail (in `Engine::drv`; `u8::MAX`:
    /// none), which one-sided RDMA (`rma::rdma`) must match.
    pub(crate) fn first_driver(&self, peer: u32) -> u8 {
        self.gates[peer as usize].driver
    }

    /// Whether world rank `peer` has died.
    pub(crate) fn peer_dead(&self, peer: u32) -> bool {
        self.gates[peer as usize].dead
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::collections::VecDeque;

    use super::super::{gate_for, State, Strategy};
    use crate::error::ErrorClass;
    use crate::request::{Op, Request};
    use crate::rma::{Held, Peer, Track, Win, WinId};
    use crate::wire::{Header, Kind};
    use crate::CommId;

    pub(crate) fn caps() -> madmpi_transports::Caps {
        madmpi_transports::Caps {
            name: "test",
            latency_ns: 1000,
            bandwidth_mbps: 1000,
            max_packet: 4096,
            eager_threshold: 1024,
            max_iov: 16,
            can_get: false,
            preference: 50,
            aggreg_max: 4096,
            solo_min: usize::MAX,
            pack_count: u32::MAX,
            registers_memory: false,
        }
    }

    /// The engine state of world rank 0 of two (for the one-sided layer's tests).
    pub(crate) fn two_ranks() -> State {
        let c = caps();
        let gates = (0..2).map(|_| gate_for(vec![(0, &c)])).collect();
        State::new(0, 2, gates, Strategy::Adaptive)
    }

    /// The headers of the chunks queued to `peer`, in order.
    pub(crate) fn queued(st: &State, peer: u32) -> Vec<Header> {
        st.gates[peer as usize].out.iter().map(|c| c.hdr).collect()
    }

    /// The gates marked for the next progress.
    pub(crate) fn dirty(st: &State) -> Vec<u32> {
        st.dirty.clone()
    }

    /// A two-member window of rank 0 (world ranks 0 and 1).
    pub(crate) fn window() -> Win {
        Win {
            comm: CommId(0),
            world: vec![0, 1].into(),
            rank: 0,
            base: std::ptr::null_mut(),
            size: 0,
            disp_unit: 1,
            flavor: crate::rma::Flavor::Create,
            _mem: None,
            segment: None,
            direct: None,
            regions: Vec::new(),
            peers: vec![Peer::default(); 2],
            pending: vec![0; 2],
            error: None,
            fence: false,
            held: vec![Held::None; 2],
            lock_all: false,
            start: None,
            posts: vec![0; 2],
            post: None,
            completes: 0,
            unlocks_sent: vec![0; 2],
            unlocks_seen: vec![0; 2],
            excl: None,
            shared: 0,
            shared_by: vec![false; 2],
            pids: vec![0; 2],
            waiting: VecDeque::new(),
        }
    }

    /// A peer dies with one-sided chunks queued to it and operations in flight: the payloads
    /// are freed, the operations fail with MPI_ERR_PROC_ABORTED (their requests complete),
    /// and the window reports it.
    #[test]
    fn queued_one_sided_chunks_to_a_dead_peer_are_freed_and_fail() {
        let c = caps();
        let gates = (0..2).map(|_| gate_for(vec![(0, &c)])).collect();
        let mut st = State::new(0, 2, gates, Strategy::Adaptive);
        st.rma.wins.push(Some(window()));
        let req = st.reqs.insert(Request::new(Op::None));
        st.rma.ops.insert(
            7,
            Track {
                win: WinId(0),
                target: 1,
                left: 3,
                result: None,
                req: Some(req),
                error: None,
            },
        );
        st.rma.wins[0].as_mut().unwrap().pending[1] = 1;
        for _ in 0..3 {
            let hdr = Header {
                kind: Kind::Rma as u8,
                sreq: 7,
                ..Default::default()
            };
            st.queue_owned(1, hdr, vec![0xab; 100]);
        }
        assert_eq!(st.owned.slots.iter().filter(|s| s.is_some()).count(), 3);
        st.peer_lost(1);
        assert!(st.owned.slots.iter().all(|s| s.is_none()), "payloads freed");
        assert_eq!(st.owned.free.len(), st.owned.slots.len());
        assert!(st.rma.ops.is_empty());
        let r = st.reqs.get(req).unwrap();
        assert!(r.complete);
        assert_eq!(r.status.error, Some(ErrorClass::ProcAborted));
        let w = st.rma.wins[0].as_ref().unwrap();
        assert_eq!(w.pending[1], 0);
        assert_eq!(
            w.error.as_ref().map(|e| e.class),
            Some(ErrorClass::ProcAborted)
        );
    }
}
