//! The share of time the tight link was busy, from lone probes sent at
//! Poisson-spaced moments (ours; the sampling argument is PASTA: Poisson
//! arrivals see time averages). A probe that finds the link busy waits
//! behind what it serves; one that finds it idle crosses at the stream's
//! least delay. On a work-conserving link the busy share is the
//! utilization, so `C (1 - share)` is the available bandwidth over the
//! time the probes spanned.
//!
//! What it is for: multi-rate streams a few milliseconds long can all
//! fall in one idle stretch of a link that a bursty source saturates now
//! and then (the lab's ON/OFF source: 57 of 58 runs that stopped
//! `stable` read the idle link). Lone probes spread over a few hundred
//! milliseconds sample those stretches in proportion to their length.
//! It sees only queues: a shaper whose bucket absorbs smooth cross
//! traffic (a tbf under CBR at 60 % of its rate) lets most lone probes
//! through at once, busy or not, so it confirms an idle reading or
//! refutes it and never replaces the streams' own reading of a loaded
//! path.

use crate::stream::ProbeStream;

/// Lone probes that found the link busy, of those sent.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyShare {
    /// Probes delayed past the threshold over the least delay, and lost
    /// ones (a probe a full queue dropped met it busy; random loss is
    /// counted too, so the share is an upper bound).
    pub busy: usize,
    /// Probes sent.
    pub samples: usize,
}

impl BusyShare {
    pub fn share(&self) -> f64 {
        self.busy as f64 / self.samples as f64
    }

    /// Wilson score interval of the share at `z` standard deviations
    /// (1.645 for 90 %).
    pub fn interval(&self, z: f64) -> (f64, f64) {
        let n = self.samples as f64;
        let p = self.share();
        let z2 = z * z;
        let centre = (p + z2 / (2.0 * n)) / (1.0 + z2 / n);
        let half = z / (1.0 + z2 / n) * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
        ((centre - half).max(0.0), (centre + half).min(1.0))
    }
}

/// The busy share of `stream`'s probes: a probe is busy when its one-way
/// delay exceeds the stream's least by more than `threshold_ns`, or when
/// it was lost. `None` without two received probes.
pub fn busy_share(stream: &ProbeStream, threshold_ns: f64) -> Option<BusyShare> {
    let delays: Vec<Option<f64>> = stream
        .packets
        .iter()
        .map(|p| p.recv_ns.map(|r| crate::stream::diff_ns(r, p.send_ns)))
        .collect();
    let received = delays.iter().flatten().count();
    if received < 2 {
        return None;
    }
    let least = delays
        .iter()
        .flatten()
        .copied()
        .fold(f64::INFINITY, f64::min);
    let busy = delays
        .iter()
        .filter(|d| d.is_none_or(|d| d - least > threshold_ns))
        .count();
    Some(BusyShare {
        busy,
        samples: delays.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn stream(delays_ns: &[Option<i64>]) -> ProbeStream {
        let send: Vec<i64> = (0..delays_ns.len() as i64).map(|i| i * 2_000_000).collect();
        let recv: Vec<Option<i64>> = delays_ns
            .iter()
            .zip(&send)
            .map(|(d, s)| d.map(|d| s + d))
            .collect();
        ProbeStream::from_times(0, 1514, &send, &recv)
    }

    #[test]
    fn busy_share_by_hand() {
        // Ten probes: least delay 50 us; three wait 200-900 us more (busy
        // past a 121 us threshold), one waits 100 us more (not), one is
        // lost (busy): 4 of 10.
        let d = [
            Some(50_000),
            Some(250_000),
            Some(55_000),
            Some(950_000),
            None,
            Some(150_000),
            Some(60_000),
            Some(400_000),
            Some(52_000),
            Some(51_000),
        ];
        let b = busy_share(&stream(&d), 121_000.0).unwrap();
        assert_eq!(
            b,
            BusyShare {
                busy: 4,
                samples: 10
            }
        );
        assert_eq!(b.share(), 0.4);
        // Wilson at z = 1.645, n = 10, p = 0.4: centre (0.4 + 0.1353) /
        // 1.2706 = 0.4213, half 1.2947 * sqrt(0.024 + 0.00677) = 0.2271.
        let (lo, hi) = b.interval(1.645);
        assert!((lo - 0.1942).abs() < 1e-3, "{lo}");
        assert!((hi - 0.6484).abs() < 1e-3, "{hi}");
        assert_eq!(busy_share(&stream(&[Some(1), None]), 1.0), None);
    }

    proptest! {
        /// The share lies in [0, 1], inside its own interval, and a
        /// higher threshold never counts more probes busy.
        #[test]
        fn share_and_interval_hold_their_order(
            d in proptest::collection::vec(proptest::option::weighted(0.9, 0i64..5_000_000), 2..200),
            t in 0.0f64..2e6,
        ) {
            let s = stream(&d);
            if let Some(b) = busy_share(&s, t) {
                let p = b.share();
                prop_assert!((0.0..=1.0).contains(&p));
                let (lo, hi) = b.interval(1.645);
                prop_assert!(lo <= p + 1e-12 && p <= hi + 1e-12);
                let more = busy_share(&s, t * 2.0 + 1.0).unwrap();
                prop_assert!(more.busy <= b.busy);
            }
        }
    }
}
