//! The emulator's clock: `CLOCK_MONOTONIC` in nanoseconds (one clock for every process of the
//! host, so a time written by the sender means the same to the receiver), and busy-waiting.

/// Now, in ns of `CLOCK_MONOTONIC`.
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Busy-wait until `t` (ns of [`now_ns`]): spin, and after ~20 µs of spinning yield the core
/// between looks at the clock (the tests run more processes than cores). Never sleeps: a
/// sleep here takes tens of microseconds more than asked.
pub fn spin_until(t: u64) {
    let mut spins = 0u32;
    while now_ns() < t {
        spins += 1;
        if spins > 1000 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_at_least_as_asked() {
        let t0 = now_ns();
        spin_until(t0 + 50_000);
        assert!(now_ns() >= t0 + 50_000);
        spin_until(t0); // the past: returns at once
    }
}
