//! `split_balance`: small messages and control chunks on the first rail (the lowest latency,
//! one chunk per packet as under `default`); the data of a rendezvous cut over every rail
//! that reaches the peer, in proportion to the rails' bandwidth as this process measures it
//! receiving ([`Rail::bw`](crate::engine::rails::Rail::bw): the caps' figure until pieces on
//! the rail have been timed). A message too small to be worth cutting
//! (`MADMPI_SPLIT_BALANCE_MIN` per rail, default 64 KiB) goes whole on the fastest rail.
//!
//! The receiver cuts (it asks for each piece on its rail with a Cts of its own), so it asks a
//! gate with several rails for pushed data even where it could pull it from the first rail.

use super::{one_chunk, Commit, PacketStrategy, Piece};
use crate::engine::Gate;

/// Pieces are cut at multiples of this many bytes (pages: the receiver's copies stay aligned).
const ALIGN: usize = 4096;

/// See the [module documentation](self).
pub(crate) struct SplitBalance {
    /// Smallest piece worth a rail of its own.
    min_piece: usize,
}

impl SplitBalance {
    pub(crate) fn from_env() -> SplitBalance {
        SplitBalance {
            min_piece: std::env::var("MADMPI_SPLIT_BALANCE_MIN")
                .ok()
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(64 << 10),
        }
    }

    #[cfg(test)]
    pub(crate) fn with_min(min_piece: usize) -> SplitBalance {
        SplitBalance { min_piece }
    }
}

impl PacketStrategy for SplitBalance {
    fn name(&self) -> &'static str {
        "split_balance"
    }

    fn param(&self, name: &str) -> Option<usize> {
        (name == "split_balance_min").then_some(self.min_piece)
    }

    fn set_param(&mut self, name: &str, v: usize) -> bool {
        // Read by each `rdv_accept`: a new value applies from the next rendezvous on.
        if name == "split_balance_min" {
            self.min_piece = v;
        }
        name == "split_balance_min"
    }

    #[inline]
    fn try_and_commit(&self, g: &Gate, _busy: u32) -> Commit {
        one_chunk(g)
    }

    fn rdv_accept(&self, g: &Gate, from: usize, len: usize, out: &mut Vec<Piece>) {
        let total = len - from;
        // The rails that get a piece: the fastest first, as many as the size allows.
        let mut rails: Vec<(usize, f64)> = (g.rails.iter().enumerate())
            .map(|(i, r)| (i, r.bw.max(1.0)))
            .collect();
        rails.sort_by(|a, b| b.1.total_cmp(&a.1));
        let fit = (total / self.min_piece.max(1)).max(1);
        rails.truncate(fit);
        if rails.len() <= 1 {
            let rail = rails.first().map_or(0, |r| r.0);
            out.push(Piece {
                rail,
                off: from,
                len: total,
            });
            return;
        }
        let sum: f64 = rails.iter().map(|r| r.1).sum();
        let mut off = from;
        let last = rails.len() - 1;
        for (k, &(rail, bw)) in rails.iter().enumerate() {
            let n = if k == last {
                len - off
            } else {
                let share = (total as f64 * bw / sum) as usize;
                ((share + ALIGN / 2) / ALIGN * ALIGN).min(len - off)
            };
            if n > 0 {
                out.push(Piece { rail, off, len: n });
                off += n;
            }
        }
    }

    fn push_rendezvous(&self, g: &Gate) -> bool {
        g.rails.len() > 1
    }
}
