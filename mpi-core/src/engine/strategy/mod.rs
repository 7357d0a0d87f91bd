//! Strategies: what the next packet of a gate is made of and on which rail it leaves, and how
//! the data of a rendezvous is cut over the rails (after NewMadeleine's `try_and_commit` and
//! `rdv_accept`).
//!
//! A strategy only reads a gate and answers; it never touches a driver, a request or the
//! clock, so the simulation in `sim.rs` drives it exactly as the progress loop does. What the
//! engine learns of the rails (their measured bandwidth, [`Rail::bw`]) is kept on the gate, for
//! every strategy to read.

mod adaptive;
mod aggreg;
mod default;
mod split_balance;

pub(crate) use adaptive::Adaptive;
pub(crate) use aggreg::Aggreg;
pub(crate) use default::Default;
pub(crate) use split_balance::SplitBalance;

use super::Gate;

/// The strategy of a job (`MADMPI_STRATEGY`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// The default: the first small send to a peer after a progress call leaves at once, the
    /// ones posted after it before the next progress call leave together (see `adaptive.rs`).
    Adaptive,
    /// One chunk per packet, sent as soon as the gate is idle.
    Default,
    /// Chunks accumulate until the next progress call, then as many as fit go in one packet.
    Aggreg,
    /// Small messages on the lowest-latency rail (as `default`), rendezvous data split across
    /// every rail that reaches the peer in proportion to their measured bandwidth.
    SplitBalance,
}

impl Strategy {
    /// Every strategy's name, as `MADMPI_STRATEGY` takes it.
    pub const NAMES: &'static str = "adaptive, default, aggreg, split_balance";

    /// Parse a strategy name.
    pub fn parse(s: &str) -> Option<Strategy> {
        match s {
            "adaptive" => Some(Strategy::Adaptive),
            "default" => Some(Strategy::Default),
            "aggreg" | "aggregation" => Some(Strategy::Aggreg),
            "split_balance" | "split" => Some(Strategy::SplitBalance),
            _ => None,
        }
    }

    /// Its implementation.
    pub(crate) fn make(self) -> Box<dyn PacketStrategy> {
        match self {
            Strategy::Adaptive => Box::new(Adaptive),
            Strategy::Default => Box::new(Default),
            Strategy::Aggreg => Box::new(Aggreg),
            Strategy::SplitBalance => Box::new(SplitBalance::from_env()),
        }
    }
}

/// The next packet of a gate's queue: its first `n` chunks, on rail `rail` (`n == 0`: none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Commit {
    pub n: usize,
    pub rail: usize,
}

impl Commit {
    pub const NONE: Commit = Commit { n: 0, rail: 0 };
}

/// A piece of a rendezvous: `len` bytes of the message from offset `off`, on rail `rail`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Piece {
    pub rail: usize,
    pub off: usize,
    pub len: usize,
}

/// A packet strategy. Implementations live in their own files; the engine holds one per
/// process.
pub(crate) trait PacketStrategy: Send {
    /// The name `MADMPI_STRATEGY` gives it.
    fn name(&self) -> &'static str;

    /// Small contiguous standard-mode sends are copied into the packet being built when they
    /// are posted (and leave together at the next progress call).
    fn packs_on_post(&self) -> bool {
        false
    }

    /// With `packs_on_post`: the first small send to a peer after a progress call leaves at
    /// once instead of opening a packet (the others posted before the next progress call are
    /// packed), and sends posted outside the fast path leave at once.
    fn lone_at_once(&self) -> bool {
        false
    }

    /// The next packet of `g`'s queue (`try_and_commit`): which chunks, on which rail; `busy`
    /// has bit `r` set for each rail `r` whose driver refused a packet in this pass (the
    /// engine stops when the strategy commits to one of them). Chunks leave in queue order,
    /// whatever their rails (the receiver restores the order of messages from their sequence
    /// numbers).
    fn try_and_commit(&self, g: &Gate, busy: u32) -> Commit;

    /// How the data `from..len` of a rendezvous from `g`'s peer is cut over the rails
    /// (`rdv_accept`, on the receiving side, as in NewMadeleine: the receiver knows the rates
    /// the rails deliver at): pieces, each asked for on its rail by a Cts of its own and pushed
    /// by the sender. The default asks for it all on the first rail.
    fn rdv_accept(&self, g: &Gate, from: usize, len: usize, out: &mut Vec<Piece>) {
        let _ = g;
        out.push(Piece {
            rail: 0,
            off: from,
            len: len - from,
        });
    }

    /// Whether the receiver should ask for the data of a rendezvous from this gate's peer to
    /// be pushed (Cts) even when it could pull it from the first rail: a strategy that spreads
    /// data over several rails asks for pieces on each.
    fn push_rendezvous(&self, g: &Gate) -> bool {
        let _ = g;
        false
    }

    /// A parameter of the strategy, by name (the tool interface's control variables).
    fn param(&self, name: &str) -> Option<usize> {
        let _ = name;
        None
    }

    /// Set a parameter at run time; `false` when the strategy has none of this name. Only
    /// parameters that each decision reads afresh are offered.
    fn set_param(&mut self, name: &str, v: usize) -> bool {
        let _ = (name, v);
        false
    }
}

/// Bit `r` of a busy mask.
#[inline(always)]
pub(crate) fn bit(r: usize) -> u32 {
    1u32.checked_shl(r as u32).unwrap_or(0)
}

/// The first chunk only, on the first rail: what `default` sends.
#[inline]
pub(crate) fn one_chunk(g: &Gate) -> Commit {
    if g.out.is_empty() {
        Commit::NONE
    } else {
        Commit { n: 1, rail: 0 }
    }
}
