//! When waits look for dead peers. A peer reached over shared memory may die without any
//! driver noticing (`engine/liveness.rs`), so a wait that has found nothing for a while asks
//! the engine to look ([`look`]): at most once per [`WATCH_EVERY`] of yielding.
//!
//! Only the yielding rounds of a wait pay for it, next to their `sched_yield`: each tells
//! [`after_yield`] how many times it has yielded (a blocking wait counts them, when its
//! [`Backoff`](super::Backoff) says it yielded; the polling calls, MPI_Test, MPI_Iprobe and their kin in a loop, count their
//! fruitless calls past the spin budget across calls: `wait::IDLE_POLLS`), and every
//! [`CLOCK_EVERY`]-th one reads the clock. A wait that succeeds while it spins never gets here,
//! and one that succeeds within its first `CLOCK_EVERY` yields (a ping-pong on ranks that
//! share a CPU yields once or twice per message) reads no clock and keeps no state: the
//! clock's reading lives in a thread-local, touched only on those rounds.

use std::cell::Cell;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::engine_slot::with;
use crate::error::Result;

/// How long a wait yields between two looks for dead peers. The look costs a few system calls
/// per local peer (`madmpi_transports::pid_alive`).
pub(crate) const WATCH_EVERY: Duration = Duration::from_millis(50);

/// Yielding rounds between two readings of the clock.
const CLOCK_EVERY: u32 = 16;

/// Look for dead peers now (the engine must be free: this takes it).
#[cold]
#[inline(never)]
pub(crate) fn look() -> Result<()> {
    with(|e| e.watch_peers())
}

/// A wait has yielded the CPU `k` times in a row (counting this one): look for dead peers if
/// it is time.
#[inline]
pub(crate) fn after_yield(k: u32) -> Result<()> {
    if k.is_multiple_of(CLOCK_EVERY) {
        return on_clock_round(k);
    }
    Ok(())
}

/// [`after_yield`] on a round that reads the clock.
#[cold]
#[inline(never)]
fn on_clock_round(k: u32) -> Result<()> {
    thread_local! {
        /// When this thread's wait last looked, or began to read the clock ([`now_ms`]).
        static SINCE: Cell<u64> = const { Cell::new(0) };
    }
    let mut since = SINCE.get();
    let due = due(k, now_ms(), &mut since);
    SINCE.set(since);
    if due {
        look()?;
    }
    Ok(())
}

/// Whether the round `k` of a wait (a multiple of [`CLOCK_EVERY`]) at time `now` (ms) is due
/// for a look; `since` is when the last look happened or the wait's first clock round.
fn due(k: u32, now: u64, since: &mut u64) -> bool {
    if k == CLOCK_EVERY {
        // (A new wait: `since` is an earlier one's.)
        *since = now;
        return false;
    }
    if now.saturating_sub(*since) >= WATCH_EVERY.as_millis() as u64 {
        *since = now;
        return true;
    }
    false
}

/// Milliseconds since the first call.
fn now_ms() -> u64 {
    static START: OnceLock<Instant> = OnceLock::new();
    START.get_or_init(Instant::now).elapsed().as_millis() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_looks_once_per_period_of_yielding() {
        let mut since = 12_345;
        let c = CLOCK_EVERY;
        assert!(
            !due(c, 1000, &mut since),
            "the first clock round starts the clock"
        );
        assert_eq!(since, 1000);
        assert!(!due(2 * c, 1049, &mut since));
        assert!(
            due(3 * c, 1050, &mut since),
            "due once the period has passed"
        );
        assert!(!due(4 * c, 1060, &mut since), "and not again at once");
        assert!(due(5 * c, 1100, &mut since));
        // A new wait starts its own period, whatever the last one left.
        assert!(!due(c, 5000, &mut since));
        assert!(!due(2 * c, 5001, &mut since));
    }
}
