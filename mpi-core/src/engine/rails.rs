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

/// Transfers of fewer bytes than this on a rail teach nothing of its bandwidth (start-up and
/// socket buffers dominate).
const LEARN_MIN: usize = 256 << 10;

/// One driver reaching one peer.
pub(crate) struct Rail {
    pub drv: DriverId,
    pub name: &'static str,
    pub eager_max: usize,
    /// Largest chunk payload (packet minus header).
    pub frag_max: usize,
    pub max_iov: usize,
    pub can_get: bool,
    /// Bandwidth in MB/s: the driver's figure, then what the engine measures on this rail
    /// (bytes the driver accepted while the rail had data pinned to it, over that time).
    pub bw: f64,
    /// Bandwidth measurements taken (0: `bw` is still the driver's figure).
    pub samples: u32,
    /// Data fragments the strategy pinned to this rail.
    pub out: VecDeque<OutChunk>,
    /// When the pinned queue last became non-empty (ns on the trace clock), and the bytes
    /// accepted since.
    busy_since: u64,
    busy_bytes: usize,
    /// The driver reported the peer lost on this rail.
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
            bw: c.bandwidth_mbps as f64,
            samples: 0,
            out: VecDeque::new(),
            busy_since: 0,
            busy_bytes: 0,
            dead: false,
        }
    }

    /// A fragment is pinned to this rail at time `now`.
    pub fn pinned(&mut self, c: OutChunk, now: u64) {
        if self.out.is_empty() && self.busy_bytes == 0 {
            self.busy_since = now;
        }
        self.out.push_back(c);
    }

    /// The driver accepted `bytes` of pinned data at time `now`; when the queue is empty, the
    /// burst is over and, if it was long enough, measured: `bw` moves halfway to the rate seen.
    pub fn accepted(&mut self, bytes: usize, now: u64) {
        self.busy_bytes += bytes;
        if !self.out.is_empty() {
            return;
        }
        let (b, t) = (self.busy_bytes, now.saturating_sub(self.busy_since));
        self.busy_bytes = 0;
        if b >= LEARN_MIN && t > 0 {
            // bytes per µs = MB/s.
            let rate = b as f64 * 1000.0 / t as f64;
            self.bw = if self.samples == 0 {
                rate
            } else {
                (self.bw + rate) / 2.0
            };
            self.samples += 1;
            tracing::debug!(rail = self.name, mbps = self.bw as u64, "rail bandwidth");
        }
    }
}
