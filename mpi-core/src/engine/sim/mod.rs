//! A simulated network driving N engine states in one process, after quinn's habit: no drivers,
//! no clock. Packets travel on per-pair FIFO links (the only ordering a real driver promises),
//! and a seeded random scheduler interleaves transmissions, deliveries and rendezvous gets across
//! pairs, so cross-peer reordering and delays are explored while nothing is dropped.

use std::collections::{HashMap, VecDeque};

use madmpi_datatypes::{Basic, Datatype};

use super::drive;
use super::rails::DriverId;
use super::recv::apply_piece_table;
use super::*;
use crate::error::ErrorClass;
use crate::request::SendMode;
use crate::request::{RecvTarget, RequestId, Status};
use crate::wire::{Header, Kind, HDR_LEN};
use crate::{ANY_SOURCE, ANY_TAG, COMM_WORLD};

/// xorshift64*: deterministic, seedable, good enough to shuffle events.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

struct Net {
    ranks: Vec<State>,
    /// Per (sender, receiver, rail): packets in flight, in order.
    links: HashMap<(u32, u32, usize), VecDeque<Vec<u8>>>,
    rng: Rng,
    /// Payload bytes of the Data chunks transmitted so far.
    data_bytes: usize,
    /// Packets of message chunks leave on a rail drawn at random instead of the one the
    /// strategy chose: messages overtake each other on the way, as on rails of different
    /// speeds, and the receiver must restore their order.
    scatter: bool,
    /// Links that failed (`cut`): what is put on them is lost.
    dead_links: Vec<(u32, u32, usize)>,
}

/// The capabilities of a simulated driver: small limits so that rendezvous, fragmentation and
/// aggregation all happen with small data.
fn sim_caps(can_get: bool) -> madmpi_transports::Caps {
    madmpi_transports::Caps {
        name: "sim",
        latency_ns: 1000,
        bandwidth_mbps: 1000,
        max_packet: HDR_LEN + 200,
        eager_threshold: 64,
        max_iov: 64,
        can_get,
        preference: 50,
        aggreg_max: HDR_LEN + 200,
        solo_min: usize::MAX,
        pack_count: u32::MAX,
        registers_memory: false,
    }
}

/// A packet's iovec as one buffer (what the driver would carry).
fn concat(iov: &[std::io::IoSlice<'_>]) -> Vec<u8> {
    iov.iter().flat_map(|s| s.iter().copied()).collect()
}

/// A gate of `rails` simulated rails.
fn sim_gate(can_get: bool, rails: usize) -> Gate {
    let caps = sim_caps(can_get);
    gate_for((0..rails).map(|r| (r as DriverId, &caps)).collect())
}

impl Net {
    fn new(n: u32, strategy: Strategy, can_get: bool, seed: u64) -> Net {
        Net::with_rails(n, strategy, can_get, seed, 1)
    }

    fn with_rails(n: u32, strategy: Strategy, can_get: bool, seed: u64, rails: usize) -> Net {
        let ranks = (0..n)
            .map(|me| {
                let gates = (0..n).map(|_| sim_gate(can_get, rails)).collect();
                let mut st = State::new(me, n, gates, strategy);
                st.zcopy_min = 128;
                if strategy == Strategy::SplitBalance {
                    // Messages of the tests are small: cut from 256 bytes.
                    st.strat = Box::new(strategy::SplitBalance::with_min(256));
                }
                st
            })
            .collect();
        Net {
            ranks,
            links: HashMap::new(),
            rng: Rng(seed | 1),
            data_bytes: 0,
            scatter: false,
            dead_links: Vec::new(),
        }
    }

    /// Put a packet on the link from `i` to `j` on `rail` (lost if the link failed).
    fn put(&mut self, i: u32, j: u32, rail: usize, pkt: Vec<u8>) {
        if !self.dead_links.contains(&(i, j, rail)) {
            self.links.entry((i, j, rail)).or_default().push_back(pkt);
        }
    }

    /// Rail `rail` between `a` and `b` fails: what is on it is lost, and so is what is put on
    /// it later. `a`'s driver notices at once; `b`'s too if `both`, else `b` learns it from
    /// `a` (RailDown).
    fn cut(&mut self, a: u32, b: u32, rail: usize, both: bool) {
        for k in [(a, b, rail), (b, a, rail)] {
            self.dead_links.push(k);
            self.links.remove(&k);
        }
        // (The simulated rails' drivers are numbered as the rails.)
        self.ranks[a as usize].driver_lost(b, rail as DriverId);
        if both {
            self.ranks[b as usize].driver_lost(a, rail as DriverId);
        }
    }

    /// Build one packet from rank `i`'s gate to `j` with the strategy, as the progress loop
    /// does ([`drive::with_packet`]), and put it on its rail's link.
    fn transmit(&mut self, i: usize, j: u32) -> bool {
        let st = &mut self.ranks[i];
        if let Some(pkt) = st.gates[j as usize].resil.resend.pop_front() {
            // Copies a failed rail may have swallowed go first (as `Engine::resend`).
            let rail = st.gates[j as usize].live_rail(0);
            self.put(i as u32, j, rail, pkt);
            return true;
        }
        let g = &st.gates[j as usize];
        let dead = (g.rails.iter().enumerate())
            .filter(|(_, r)| r.dead)
            .fold(0, |m, (r, _)| m | strategy::bit(r));
        let c = st.pick(j, dead);
        let nrails = st.gates[j as usize].rails.len();
        let (pkt, rail) = if c.n > 0 {
            st.number(j, c.n);
            let g = &st.gates[j as usize];
            let pkt = drive::with_packet(&g.out, &g.packed, c.n, 64, concat);
            self.data_bytes += g
                .out
                .iter()
                .take(c.n)
                .filter(|c| c.hdr.kind == Kind::Data as u8)
                .map(|c| c.len)
                .sum::<usize>();
            st.sent(j, c.n);
            if st.gates[j as usize].resilient() {
                st.retain(j, &pkt);
            }
            let g = &st.gates[j as usize];
            let rail = if self.scatter {
                g.live_rail(self.rng.below(nrails))
            } else {
                g.live_rail(c.rail)
            };
            (pkt, rail)
        } else if let Some(r) = (0..nrails).find(|&r| !st.gates[j as usize].rails[r].out.is_empty())
        {
            let q = &st.gates[j as usize].rails[r].out;
            let pkt = drive::with_packet(q, &[], 1, 64, concat);
            self.data_bytes += q.front().map_or(0, |c| c.len);
            st.sent_pinned(j, r);
            (pkt, r)
        } else {
            st.gates[j as usize].queued = false;
            st.dirty.retain(|&p| p != j);
            return false;
        };
        self.put(i as u32, j, rail, pkt);
        true
    }

    /// One random event; false when nothing is left to do anywhere.
    fn step(&mut self) -> bool {
        let mut events: Vec<(u8, usize, u32)> = Vec::new();
        for (i, st) in self.ranks.iter().enumerate() {
            for &j in &st.dirty {
                events.push((0, i, j));
            }
            if !st.gets.is_empty() {
                events.push((2, i, 0));
            }
        }
        let mut links: Vec<(u32, u32, usize)> = self
            .links
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
            .collect();
        // (The map's order is not deterministic: the seed alone must decide.)
        links.sort_unstable();
        for (k, _) in links.iter().enumerate() {
            events.push((1, k, 0));
        }
        if events.is_empty() {
            return false;
        }
        let (kind, i, j) = events[self.rng.below(events.len())];
        match kind {
            0 => {
                self.transmit(i, j);
            }
            1 => {
                let (from, to, rail) = links[i];
                let pkt = self
                    .links
                    .get_mut(&(from, to, rail))
                    .unwrap()
                    .pop_front()
                    .unwrap();
                // (The simulated rails' drivers are numbered as the rails.)
                self.ranks[to as usize].polling = rail as DriverId;
                self.ranks[to as usize].handle_packet(from, &pkt);
            }
            _ => {
                // Every address is in this process: a get is a memcpy.
                self.ranks[i]
                    .run_gets(&mut |_, _, remote, local| {
                        // SAFETY: the sender's buffer is alive (its request waits for Fin).
                        let mut src = unsafe {
                            std::slice::from_raw_parts(
                                remote.addr as *const u8,
                                remote.len as usize,
                            )
                        };
                        for l in local.iter_mut() {
                            let (a, b) = src.split_at(l.len());
                            l.copy_from_slice(a);
                            src = b;
                        }
                        assert!(
                            src.is_empty(),
                            "local iovecs shorter than the remote region"
                        );
                        Ok(())
                    })
                    .unwrap();
            }
        }
        true
    }

    fn run(&mut self) {
        let mut guard = 0;
        while self.step() {
            guard += 1;
            assert!(guard < 10_000_000, "simulation does not converge");
        }
    }

    /// Post a receive on `rank` for a message from `src` with `tag`, run to the end, and check
    /// that `want` arrived whole.
    fn recv_expect(&mut self, rank: usize, src: i32, tag: i32, want: &[u8], what: &str) {
        let mut b = vec![0xeeu8; want.len()];
        // SAFETY: `b` outlives the request, which completes in `run`.
        let r = unsafe {
            self.ranks[rank]
                .irecv(
                    b.as_mut_ptr(),
                    b.len(),
                    &byte(),
                    src,
                    tag,
                    COMM_WORLD,
                    false,
                )
                .unwrap()
        };
        self.run();
        assert_eq!(self.status(rank, r).bytes as usize, want.len(), "{what}");
        assert_eq!(b, want, "{what}");
    }

    fn status(&mut self, rank: usize, r: RequestId) -> Status {
        let req = self.ranks[rank].reqs.get(r).expect("request alive");
        assert!(req.complete, "request of rank {rank} did not complete");
        req.status
    }
}

fn byte() -> Datatype {
    Datatype::basic(Basic::Byte)
}

/// `aggreg`'s packed send of the bytes `d` on the world communicator, if it packs them.
///
/// # Safety
/// `d` outlives the request.
unsafe fn send_packed(st: &mut State, d: &[u8], dest: i32, tag: i32) -> Option<RequestId> {
    let r = st.fast_route(d.len(), &byte(), dest, tag, COMM_WORLD, false)?;
    // SAFETY: forwarded caller contract.
    unsafe { st.pack_routed(r, d.as_ptr()) }.ok()
}

/// A standard-mode non-blocking send of the bytes `d` on the world communicator.
///
/// # Safety
/// `d` outlives the request.
unsafe fn send_bytes(st: &mut State, d: &[u8], dest: i32, tag: i32) -> RequestId {
    // SAFETY: forwarded caller contract.
    unsafe {
        st.isend(
            d.as_ptr(),
            d.len(),
            &byte(),
            dest,
            tag,
            COMM_WORLD,
            SendMode::Standard,
            false,
        )
    }
    .unwrap()
}

/// Payload of message `k` from `src`: its sequence number in the first 8 bytes, then a pattern.
fn payload(src: u32, k: u64, len: usize) -> Vec<u8> {
    let mut v: Vec<u8> = (0..len)
        .map(|x| (x as u64 * 31 + k * 7 + src as u64) as u8)
        .collect();
    if len >= 8 {
        v[..8].copy_from_slice(&k.to_le_bytes());
    }
    v
}

mod loss;
mod messages;
mod rendezvous;
