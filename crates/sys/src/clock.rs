//! Clocks. Pacing waits on CLOCK_MONOTONIC (never steps); send and receive
//! times are CLOCK_REALTIME, the clock the kernel's software receive
//! timestamps (SO_TIMESTAMPNS) are taken on, so both ends of a loopback
//! stream share one clock. About 22 ns per read on the
//! machines we measured (vDSO).

fn read(clock: libc::clockid_t) -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; these clock ids always exist.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

pub fn monotonic_ns() -> i64 {
    read(libc::CLOCK_MONOTONIC)
}

pub fn realtime_ns() -> i64 {
    read(libc::CLOCK_REALTIME)
}

/// Spins until CLOCK_MONOTONIC reaches `deadline_ns`; returns how late it
/// woke (ns). A busy wait: sleeping is 50 us too coarse for probe gaps.
pub fn spin_until(deadline_ns: i64) -> i64 {
    loop {
        let now = monotonic_ns();
        if now >= deadline_ns {
            return now - deadline_ns;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_spin_waits() {
        let a = monotonic_ns();
        let late = spin_until(a + 200_000);
        let b = monotonic_ns();
        assert!(b - a >= 200_000, "{}", b - a);
        assert!(late >= 0);
        assert!(realtime_ns() > 1_600_000_000_000_000_000);
    }
}
