//! When each target is measured next: its interval with random jitter
//! (so many agents, or many targets, do not probe in lockstep), start
//! times spread over the first interval, and runs that fell behind
//! skipped and counted rather than fired in a burst. Pure: time is passed
//! in as Unix nanoseconds.

use tightlink_core::rng::Rng;

/// Start times are spread over at most this much of the first interval,
/// so the first results come soon after the agent starts.
pub const SPREAD_MAX_NS: i64 = 30_000_000_000;

#[derive(Debug, Clone)]
pub struct Schedule {
    interval_ns: i64,
    /// Share of the interval added or taken away at random, 0..0.5.
    jitter: f64,
    next_ns: i64,
}

impl Schedule {
    /// Target `index` of `count` starting at `now_ns`: its first run
    /// `index / count` of the way into the spread window.
    pub fn new(now_ns: i64, index: usize, count: usize, interval_ns: i64, jitter: f64) -> Schedule {
        let window = interval_ns.min(SPREAD_MAX_NS);
        let offset = (window as i128 * index as i128 / count.max(1) as i128) as i64;
        Schedule {
            interval_ns: interval_ns.max(1),
            jitter: jitter.clamp(0.0, 0.5),
            next_ns: now_ns + offset,
        }
    }

    /// Runs at `phase_ns` into each interval, intervals counted from the
    /// Unix epoch (every host that agrees on the clock agrees on the
    /// turns); the first at or after `now_ns`. No jitter.
    pub fn aligned(now_ns: i64, interval_ns: i64, phase_ns: i64) -> Schedule {
        let interval_ns = interval_ns.max(1);
        let since = (now_ns - phase_ns).rem_euclid(interval_ns);
        let next = if since == 0 {
            now_ns
        } else {
            now_ns - since + interval_ns
        };
        Schedule {
            interval_ns,
            jitter: 0.0,
            next_ns: next,
        }
    }

    /// When the next run is due.
    pub fn due_ns(&self) -> i64 {
        self.next_ns
    }

    /// After a run that ended at `now_ns`: the next due time is one
    /// jittered interval after the last due time; due times already past
    /// are skipped. Returns how many were skipped.
    pub fn advance(&mut self, now_ns: i64, rng: &mut Rng) -> u64 {
        let step = |rng: &mut Rng| {
            let j = self.jitter * (2.0 * rng.unit() - 1.0);
            ((self.interval_ns as f64) * (1.0 + j)).round().max(1.0) as i64
        };
        self.next_ns += step(rng);
        let mut skipped = 0;
        if self.next_ns < now_ns {
            let behind = now_ns - self.next_ns;
            skipped = (behind / self.interval_ns + 1) as u64;
            self.next_ns += skipped as i64 * self.interval_ns;
        }
        skipped
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tightlink_core::rng::Rng;

    const S: i64 = 1_000_000_000;

    #[test]
    fn aligned_turns_by_hand() {
        // An hour's interval, the turn 40 s in; at 7300 s the next turn is
        // 7240 + 3600 = 10 840 s; at 7240 s exactly, 7240.
        let h = 3600 * S;
        assert_eq!(Schedule::aligned(7300 * S, h, 40 * S).due_ns(), 10_840 * S);
        assert_eq!(Schedule::aligned(7240 * S, h, 40 * S).due_ns(), 7240 * S);
        // It keeps the beat.
        let mut s = Schedule::aligned(7300 * S, h, 40 * S);
        s.advance(10_841 * S, &mut Rng::new(1));
        assert_eq!(s.due_ns(), 14_440 * S);
    }

    #[test]
    fn starts_are_spread() {
        // Four targets every 60 s: first runs 0, 7.5, 15 and 22.5 s in
        // (the 30 s window split four ways).
        let due: Vec<i64> = (0..4)
            .map(|i| Schedule::new(0, i, 4, 60 * S, 0.0).due_ns())
            .collect();
        assert_eq!(due, vec![0, 7_500_000_000, 15 * S, 22_500_000_000]);
        // A 10 s interval spreads over its own 10 s.
        assert_eq!(Schedule::new(100, 1, 2, 10 * S, 0.0).due_ns(), 100 + 5 * S);
    }

    #[test]
    fn without_jitter_runs_keep_the_beat_and_skip_what_is_past() {
        let mut rng = Rng::new(1);
        let mut s = Schedule::new(0, 0, 1, 10 * S, 0.0);
        assert_eq!(s.advance(2 * S, &mut rng), 0);
        assert_eq!(s.due_ns(), 10 * S);
        // A run that took 35 s: due times 20 and 30 s are past; the next
        // is 40 s, two skipped.
        assert_eq!(s.advance(45 * S - 10 * S, &mut rng), 2);
        assert_eq!(s.due_ns(), 40 * S);
    }

    proptest! {
        #[test]
        fn jittered_steps_stay_within_the_share(seed in 0u64..1000, jitter in 0.0f64..0.5) {
            let mut rng = Rng::new(seed);
            let mut s = Schedule::new(0, 0, 1, 10 * S, jitter);
            let mut last = s.due_ns();
            for _ in 0..50 {
                prop_assert_eq!(s.advance(last, &mut rng), 0);
                let step = s.due_ns() - last;
                prop_assert!(step as f64 >= 10e9 * (1.0 - jitter) - 1.0);
                prop_assert!(step as f64 <= 10e9 * (1.0 + jitter) + 1.0);
                last = s.due_ns();
            }
        }

        #[test]
        fn the_next_run_is_never_in_the_past(now in 0i64..1_000_000_000_000, jitter in 0.0f64..0.5) {
            let mut rng = Rng::new(7);
            let mut s = Schedule::new(0, 0, 1, 10 * S, jitter);
            s.advance(now, &mut rng);
            prop_assert!(s.due_ns() >= now);
        }
    }
}
