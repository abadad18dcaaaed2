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

/// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns` (absolute, so a
/// wake-up's lateness does not add up); returns how late it woke (ns).
/// Lateness is the thread's timer slack (50 us unless
/// [`set_timer_slack_ns`] lowered it) plus the scheduler's wake-up.
pub fn sleep_until(deadline_ns: i64) -> i64 {
    let ts = libc::timespec {
        tv_sec: deadline_ns.div_euclid(1_000_000_000),
        tv_nsec: deadline_ns.rem_euclid(1_000_000_000),
    };
    loop {
        // SAFETY: a valid timespec; no remainder is asked for (absolute).
        let r = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_MONOTONIC,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        if r != libc::EINTR {
            break;
        }
    }
    monotonic_ns() - deadline_ns
}

/// The calling thread's timer slack: how much later than asked the kernel
/// may wake a sleep to batch wake-ups (default 50 us).
pub fn set_timer_slack_ns(slack_ns: u64) -> std::io::Result<()> {
    // SAFETY: PR_SET_TIMERSLACK takes one integer and changes only this
    // thread's slack.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, slack_ns as libc::c_ulong, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
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

    #[test]
    fn a_sleep_never_wakes_early() {
        set_timer_slack_ns(1).unwrap();
        let a = monotonic_ns();
        let late = sleep_until(a + 300_000);
        assert!(late >= 0, "woke {late} ns early");
        assert!(monotonic_ns() - a >= 300_000);
        // A deadline in the past returns at once, late by the difference.
        assert!(sleep_until(a) >= 300_000);
    }
}
