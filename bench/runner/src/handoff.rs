//! The machine's floor for small-message latency: how long one CPU takes to see a cache line
//! another CPU wrote (one way), measured by two threads pinned to two CPUs of this process
//! that bounce a counter between two lines.
//!
//! On a virtual machine this moves by several times from one hour to the next (seen here:
//! 62 ns, then 270 ns on the same VM, as its two vCPUs were placed on nearby or distant host
//! cores), and every shared-memory latency moves with it. The runner probes it just before and
//! after each run and records it with the run, so that ratios can be read
//! against the machine they ran on.

use std::hint::spin_loop;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::summary::RunRecord;

/// Round trips timed (after as many again for warm-up).
const TRIPS: u64 = 20_000;

/// One counter per 128 bytes, so that the adjacent-line prefetcher does not pair them.
#[repr(align(128))]
struct Line(AtomicU64);

/// The first two CPUs this process may run on, if it may run on two.
fn two_cpus() -> Option<(usize, usize)> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return None;
        }
        set
    };
    // SAFETY: `set` is initialised; CPU_ISSET reads it.
    let mut cpus = (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) });
    Some((cpus.next()?, cpus.next()?))
}

/// Pin the calling thread to `cpu` (best effort: unpinned, the probe still ends, and measures
/// wherever the scheduler put the two threads).
fn pin(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET writes inside it; the call reads it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// One-way handoff in nanoseconds, or `None` with fewer than two CPUs. Each side spins on the
/// other's counter; a waiting thread yields after a long spin, so that a probe on a machine
/// whose other CPU is taken still ends.
pub fn probe() -> Option<f64> {
    let (a, b) = two_cpus()?;
    let lines = Arc::new([Line(AtomicU64::new(0)), Line(AtomicU64::new(0))]);
    let wait = |l: &Line, v: u64| {
        let mut n = 0u32;
        while l.0.load(Ordering::Acquire) != v {
            n += 1;
            if n < 1 << 20 {
                spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    };
    let theirs = Arc::clone(&lines);
    let echo = std::thread::spawn(move || {
        pin(b);
        for i in 1..=2 * TRIPS {
            wait(&theirs[0], i);
            theirs[1].0.store(i, Ordering::Release);
        }
    });
    let timed = std::thread::spawn(move || {
        pin(a);
        let mut t0 = Instant::now();
        for i in 1..=2 * TRIPS {
            if i == TRIPS + 1 {
                t0 = Instant::now();
            }
            lines[0].0.store(i, Ordering::Release);
            wait(&lines[1], i);
        }
        t0.elapsed().as_secs_f64() * 1e9 / TRIPS as f64 / 2.0
    });
    let ns = timed.join().ok()?;
    echo.join().ok()?;
    Some(ns)
}

/// The note for the report: the range of the probes taken around the runs, and how many
/// runs straddled a change of state (their two probes more than 2× apart). `None` when
/// nothing was probed (fewer than two CPUs).
pub fn note(runs: &[RunRecord]) -> Option<String> {
    let pairs: Vec<(f64, f64)> = runs
        .iter()
        .filter_map(|r| Some((r.handoff_ns[0]?, r.handoff_ns[1]?)))
        .collect();
    let all = pairs.iter().flat_map(|&(a, b)| [a, b]);
    let lo = all.clone().fold(f64::INFINITY, f64::min);
    let hi = all.fold(0.0, f64::max);
    if pairs.is_empty() {
        return None;
    }
    let straddled = pairs
        .iter()
        .filter(|&&(a, b)| a.max(b) > 2.0 * a.min(b))
        .count();
    Some(format!(
        "cache-line handoff between two CPUs, one way, probed before and after each run          (`handoff_ns` in results.json; the floor of every shared-memory latency here, which          moves with where the machine's CPUs sit): {lo:.0}–{hi:.0} ns; {straddled} of {} runs          saw it change by more than 2×",
        pairs.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_measures_a_positive_handoff_or_none() {
        // One CPU: None. Two or more: a positive figure (its size is the machine's).
        match two_cpus() {
            None => assert!(probe().is_none()),
            Some(_) => assert!(probe().is_some_and(|ns| ns > 0.0 && ns.is_finite())),
        }
    }

    #[test]
    fn note_gives_the_range_and_the_runs_that_straddled_a_change() {
        let run = |h: [Option<f64>; 2]| RunRecord {
            handoff_ns: h,
            ..crate::summary::tests::run_record()
        };
        assert_eq!(note(&[run([None, None])]), None);
        let n = note(&[
            run([Some(61.6), Some(55.0)]),
            run([Some(58.0), Some(270.2)]),
            run([None, Some(10.0)]),
        ])
        .expect("a note");
        assert!(n.contains(": 55–270 ns; 1 of 2 runs"), "{n}");
    }
}
