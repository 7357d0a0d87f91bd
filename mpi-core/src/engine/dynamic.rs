//! Peers outside the world (dynamic processes): gates and order state for engine peer ids
//! beyond `nprocs`, reached through a driver of their own (`Driver::Dyn`: one TCP driver per
//! intercommunicator made by MPI_Comm_accept/connect, spawn or join).
//!
//! `COMM_WORLD` keeps its group; the new peers appear only in the groups of the
//! intercommunicators (and of what is derived from them). Nothing here is on a fast path: the
//! gates are appended once, and the progress loop polls the new driver like any other.

use madmpi_transports::registry::Driver;
use madmpi_transports::Transport;

use super::rails::{DriverId, NO_DRIVER};
use super::{gate_for, order, Engine};
use crate::error::{err, ErrorClass, Result};

impl Engine {
    /// The engine peer id the next [`add_peers`](Self::add_peers) gives its first peer.
    pub(crate) fn next_peer(&self) -> u32 {
        self.st.gates.len() as u32
    }

    /// Add `n` peers reached only through `driver` (made for peers `next_peer()..+n`): their
    /// gates and order state, the driver polled from now on. Returns the first new peer id.
    pub(crate) fn add_peers(&mut self, driver: Driver, n: u32) -> Result<u32> {
        let id = self.drv.list.len();
        if id >= NO_DRIVER as usize {
            return err(
                ErrorClass::Other,
                format!(
                    "too many connections to other jobs: a process keeps at most {} drivers",
                    NO_DRIVER
                ),
            );
        }
        let base = self.next_peer();
        for _ in 0..n {
            let mut g = gate_for(vec![(id as DriverId, driver.caps())]);
            if self.st.strat.push_rendezvous(&g) {
                g.can_get = false;
            }
            self.st.gates.push(g);
            self.st.order.push(order::Order::default());
        }
        self.drv.list.push(driver);
        self.drv.families.push("tcp");
        self.st.stats.drivers.push(Default::default());
        tracing::debug!(base, n, driver = id, "dynamic peers");
        Ok(base)
    }
}
