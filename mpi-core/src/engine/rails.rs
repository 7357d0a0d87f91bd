//! Rails: the drivers that reach one peer, each with its limits, and what the engine learns
//! of their bandwidth.
//!
//! A gate holds its rails best first (lowest latency, then the registry's preference). By
//! default only the best driver that reaches a peer is a rail; `MADMPI_RAILS` lets several carry
//! traffic to the same peer. The drivers themselves live in [`Drivers`], indexed by
//! [`DriverId`]; a rail names its driver by that index, never by type.

use std::collections::VecDeque;

use madmpi_transports::registry::Driver;
use madmpi_transports::Caps;

use super::OutChunk;
use crate::wire::HDR_LEN;

/// Index of a driver in [`Drivers::list`].
pub(crate) type DriverId = u8;

/// No driver reaches the peer.
pub(crate) const NO_DRIVER: DriverId = DriverId::MAX;

/// The drivers of this process, kept apart from the engine state so that a driver's receive
/// callback can borrow the state mutably. The first is always `self`.
pub(crate) struct Drivers {
    pub list: Vec<Driver>,
    /// The registry entry each driver is an instance of (`tcp` for every TCP interface).
    pub families: Vec<&'static str>,
}

impl Drivers {
    /// The driver `id`, if there is one.
    #[inline(always)]
    pub fn get(&mut self, id: DriverId) -> Option<&mut Driver> {
        self.list.get_mut(id as usize)
    }
}

/// Pieces of fewer bytes than this teach nothing of a rail's bandwidth (latency dominates).
pub(crate) const LEARN_MIN: usize = 256 << 10;

/// One driver reaching one peer.
pub(crate) struct Rail {
    pub drv: DriverId,
    pub name: &'static str,
    pub eager_max: usize,
    /// Largest chunk payload (packet minus header).
    pub frag_max: usize,
    pub max_iov: usize,
    pub can_get: bool,
    /// Its driver's `get` reads only registered memory (`Caps::registers_memory`).
    pub registers: bool,
    /// Bandwidth in MB/s: the driver's figure, then what this process measured receiving
    /// pieces of rendezvous messages from the peer on this rail ([`Rail::learn`]).
    pub bw: f64,
    /// Bandwidth measurements taken (0: `bw` is still the driver's figure).
    pub samples: u32,
    /// Data fragments pinned to this rail (pieces a Cts asked for on it).
    pub out: VecDeque<OutChunk>,
    /// Its link failed (`resilience`): nothing is sent on it and its input is ignored.
    pub dead: bool,
}

impl Rail {
    pub fn new(drv: DriverId, c: &Caps) -> Rail {
        let frag_max = c.max_packet.saturating_sub(HDR_LEN).max(1);
        Rail {
            drv,
            name: c.name,
            eager_max: c.eager_threshold.min(frag_max),
            frag_max,
            max_iov: c.max_iov.max(2),
            can_get: c.can_get,
            registers: c.registers_memory,
            bw: c.bandwidth_mbps as f64,
            samples: 0,
            out: VecDeque::new(),
            dead: false,
        }
    }

    /// A piece of `bytes` came in on this rail `ns` nanoseconds after it was asked for: `bw`
    /// takes the rate seen (the first time), then moves halfway to each new one.
    pub fn learn(&mut self, bytes: usize, ns: u64) {
        if bytes < LEARN_MIN || ns == 0 {
            return;
        }
        // bytes per µs = MB/s.
        let rate = bytes as f64 * 1000.0 / ns as f64;
        self.bw = if self.samples == 0 {
            rate
        } else {
            (self.bw + rate) / 2.0
        };
        self.samples += 1;
        tracing::debug!(rail = self.name, mbps = self.bw as u64, "rail bandwidth");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_is_learned_from_large_pieces() {
        let caps = madmpi_transports::Caps {
            name: "t",
            latency_ns: 1,
            bandwidth_mbps: 1000,
            max_packet: 1 << 16,
            eager_threshold: 1024,
            max_iov: 8,
            can_get: false,
            preference: 1,
            aggreg_max: 1 << 16,
            solo_min: usize::MAX,
            pack_count: u32::MAX,
            registers_memory: false,
        };
        let mut r = Rail::new(0, &caps);
        r.learn(1000, 1);
        assert_eq!((r.bw, r.samples), (1000.0, 0), "too small to teach");
        // 1 MiB in 10 ms: ~105 MB/s.
        r.learn(1 << 20, 10_000_000);
        assert_eq!(r.samples, 1);
        assert!((r.bw - 104.8576).abs() < 0.01, "{}", r.bw);
        r.learn(1 << 20, 5_000_000);
        assert!(
            (r.bw - (104.8576 + 209.7152) / 2.0).abs() < 0.01,
            "{}",
            r.bw
        );
    }
}
