//! When waits look for dead peers. A peer reached over shared memory may die without any
//! driver noticing (`engine/liveness.rs`), so a wait that has found nothing for a while asks
//! the engine to look ([`Engine::watch_peers`](crate::engine::Engine)): at most once per
//! [`WATCH_EVERY`] of yielding. Only the yielding rounds of a wait pay for it (a counter, and
//! the clock every [`CLOCK_EVERY`] rounds, next to a `sched_yield`); a wait that succeeds
//! while it spins never reaches it.
//!
//! Blocking waits (`wait_until`) keep a [`Watch`] each. Polling calls (MPI_Test, MPI_Iprobe
//! and their kin in a loop, see `wait::IDLE_POLLS`) share one across calls: the fruitless
//! polls past the spin budget are its rounds ([`idle_yield`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::engine_slot::with;
use crate::error::Result;

/// How long a wait yields between two looks for dead peers. The look costs a few system calls
/// per local peer (`madmpi_transports::pid_alive`).
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Yielding rounds between two readings of the clock.
const CLOCK_EVERY: u32 = 16;

/// A blocking wait's clock for looking at its peers: see the module documentation.
pub(crate) struct Watch {
    rounds: u32,
    /// When the last look happened, or the wait started yielding.
    since: Option<Instant>,
}

impl Watch {
    pub(crate) const fn new() -> Watch {
        Watch {
            rounds: 0,
            since: None,
        }
    }

    /// One yielding round of a wait: whether it is time to look for dead peers.
    #[inline]
    pub(crate) fn due(&mut self) -> bool {
        self.rounds = self.rounds.wrapping_add(1);
        self.rounds % CLOCK_EVERY == 1 && self.due_at(Instant::now())
    }

    /// [`Watch::due`] on a round that reads the clock: `now`.
    #[cold]
    #[inline(never)]
    fn due_at(&mut self, now: Instant) -> bool {
        match self.since {
            Some(t) if now.saturating_duration_since(t) < WATCH_EVERY => false,
            Some(_) => {
                self.since = Some(now);
                true
            }
            None => {
                self.since = Some(now);
                false
            }
        }
    }
}

/// Look for dead peers now (the engine must be free: this takes it).
#[cold]
#[inline(never)]
pub(crate) fn look() -> Result<()> {
    with(|e| e.watch_peers())
}

/// Milliseconds since the first call (a clock the polling calls can keep in an atomic).
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

/// When the polling calls last looked, or their idle phase started yielding ([`now_ms`]).
static POLL_SINCE: AtomicU64 = AtomicU64::new(0);

/// A fruitless polling call yielded the CPU; `k` such calls in a row did before it. Looks for
/// dead peers once per [`WATCH_EVERY`] of these (errors are left to the next call, which
/// meets them, or the failed requests, itself).
#[cold]
#[inline(never)]
pub(super) fn idle_yield(k: u32) {
    if k % CLOCK_EVERY != 0 {
        return;
    }
    let now = now_ms();
    if k == 0 {
        POLL_SINCE.store(now, Ordering::Relaxed);
        return;
    }
    let since = POLL_SINCE.load(Ordering::Relaxed);
    if now.saturating_sub(since) >= WATCH_EVERY.as_millis() as u64 {
        POLL_SINCE.store(now, Ordering::Relaxed);
        let _ = look();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watch_looks_once_per_period_of_yielding() {
        let mut w = Watch::new();
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        assert!(
            !w.due_at(at(0)),
            "the first yielding round starts the clock"
        );
        assert!(!w.due_at(at(49)));
        assert!(w.due_at(at(50)), "due once the period has passed");
        assert!(!w.due_at(at(60)), "and not again at once");
        assert!(w.due_at(at(100)));
        // Only every CLOCK_EVERY-th round reads the clock (the first one among them).
        let mut w = Watch::new();
        assert!(!w.due());
        assert_eq!(w.rounds, 1);
        assert!(w.since.is_some());
        let first = w.since;
        for _ in 1..CLOCK_EVERY {
            assert!(!w.due());
        }
        assert_eq!(w.since, first, "no clock read between");
    }
}
