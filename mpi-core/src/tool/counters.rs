//! What the engine counts for the tool interface: plain `u64` fields of the engine state,
//! added to under the engine lock (no atomics), read by the performance variables
//! ([`super::pvars`]). Each increment sits next to what it counts; the event hooks cost one
//! relaxed load when no event is registered ([`super::events::armed`]).

use super::events::{self, EventKind};

/// Counters of one driver (one instance: `tcp` and `tcp1` apart).
#[derive(Clone, Copy, Debug, Default)]
pub struct DriverCounters {
    /// Packets the driver took.
    pub packets_sent: u64,
    /// Bytes of those packets (headers included).
    pub bytes_sent: u64,
    /// Packets the driver delivered (whole or placed into a receive buffer).
    pub packets_received: u64,
    /// Bytes of those packets.
    pub bytes_received: u64,
    /// Bytes pulled from a peer's memory by `get` (rendezvous over shared memory).
    pub bytes_got: u64,
}

/// The engine's counters (`State::stats`).
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Chunks (messages, control and data chunks) in those packets.
    pub packet_chunks: u64,
    /// Most chunks in one packet.
    pub max_chunks: u64,
    /// Messages sent eagerly (payload in the first packet).
    pub eager_sends: u64,
    /// Of those, the ones copied into a packet being built when posted (aggregation).
    pub packed_sends: u64,
    /// Messages sent by rendezvous (RTS, then the data).
    pub rdv_sends: u64,
    /// Messages that arrived before their receive was posted.
    pub unexpected_total: u64,
    /// Messages in the unexpected queues now.
    pub unexpected_len: u64,
    /// Bytes of message data those hold now (eager payloads, starts sent with an RTS).
    pub unexpected_bytes: u64,
    /// Most messages the unexpected queues ever held at once.
    pub unexpected_len_hwm: u64,
    /// Most bytes the unexpected queues ever held at once.
    pub unexpected_bytes_hwm: u64,
    /// Per driver, indexed as the engine's drivers.
    pub drivers: Vec<DriverCounters>,
}

impl Counters {
    /// Counters for `n` drivers.
    pub(crate) fn with_drivers(n: usize) -> Counters {
        Counters {
            drivers: vec![DriverCounters::default(); n],
            ..Counters::default()
        }
    }

    /// Packets handed to drivers (each counted by its driver).
    pub fn packets(&self) -> u64 {
        self.drivers.iter().map(|d| d.packets_sent).sum()
    }

    /// A packet of `chunks` chunks and `bytes` bytes to `peer` left on driver `drv`.
    #[inline(always)]
    pub(crate) fn packet(&mut self, drv: u8, peer: u32, chunks: u64, bytes: usize) {
        self.packet_chunks += chunks;
        if chunks > self.max_chunks {
            self.max_chunks = chunks;
        }
        if let Some(d) = self.drivers.get_mut(drv as usize) {
            d.packets_sent += 1;
            d.bytes_sent += bytes as u64;
        }
        if events::armed() {
            events::emit(
                EventKind::PacketSent,
                [peer as u64, drv as u64, bytes as u64, chunks],
            );
        }
    }

    /// A packet of `bytes` bytes arrived on driver `drv`.
    #[inline(always)]
    pub(crate) fn received(&mut self, drv: u8, bytes: usize) {
        if let Some(d) = self.drivers.get_mut(drv as usize) {
            d.packets_received += 1;
            d.bytes_received += bytes as u64;
        }
    }

    /// A rendezvous of `bytes` bytes to `peer` with `tag` starts.
    #[inline]
    pub(crate) fn rendezvous(&mut self, peer: u32, tag: i32, bytes: usize) {
        self.rdv_sends += 1;
        if events::armed() {
            events::emit(
                EventKind::RendezvousStarted,
                [peer as u64, tag as u64, bytes as u64, 0],
            );
        }
    }

    /// A message from `peer` (world rank) with `tag` and `msg_len` bytes, `held` of which are
    /// kept, joined the unexpected queues.
    #[cold]
    pub(crate) fn unexpected_in(&mut self, peer: u32, tag: i32, msg_len: u64, held: usize) {
        self.unexpected_total += 1;
        self.unexpected_len += 1;
        self.unexpected_bytes += held as u64;
        self.unexpected_len_hwm = self.unexpected_len_hwm.max(self.unexpected_len);
        self.unexpected_bytes_hwm = self.unexpected_bytes_hwm.max(self.unexpected_bytes);
        if events::armed() {
            events::emit(
                EventKind::UnexpectedMessage,
                [peer as u64, tag as u64, msg_len, held as u64],
            );
        }
    }

    /// A message holding `held` bytes left the unexpected queues.
    #[inline]
    pub(crate) fn unexpected_out(&mut self, held: usize) {
        self.unexpected_len = self.unexpected_len.saturating_sub(1);
        self.unexpected_bytes = self.unexpected_bytes.saturating_sub(held as u64);
    }
}
