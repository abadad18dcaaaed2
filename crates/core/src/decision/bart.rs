//! BART-style tracking (Ekelin, Nilsson, Hartikainen, Johnsson, Mångs,
//! Melander and Björkman, "Real-Time Measurement of End-to-End Available
//! Bandwidth using Kalman Filtering", NOMS 2006; the cloud paper's BART
//! family): a Kalman filter over TOPP's linear model that follows the
//! available bandwidth from stream to stream.
//!
//! Above the available bandwidth `A` a FIFO tight link of capacity `C`
//! with cross traffic `X` stretches a train offered at `u` by the strain
//! `e = o/m - 1 = u / C + X / C - 1`, a line `e = alpha u + beta` whose
//! zero is `A = -beta / alpha` (and `C = 1 / alpha`). The filter's state
//! is `(alpha, beta)`; between streams it may drift (process noise `Q`,
//! mostly in `beta`: cross traffic moves, capacity rarely); each offered
//! rate whose strain is above the tolerance is one measurement
//! `z = e` with `H = (u, 1)` and noise `R` (BART's rule: only rates above
//! the turning point inform the line; the turning point is TOPP's, the
//! start of the unbroken run of strained rates at the fast end).
//!
//! Ours: the points are TOPP's (`decision::topp::topp_points`: each
//! sub-stream of a multi-rate stream is one offered rate, its strain from
//! the smoothed gaps), rates are in Gbit/s inside the filter so both
//! states are of order one; a rate that was *not* strained while above
//! the current estimate is a measurement `z = 0` at that rate (the line's
//! zero lies at or above it), so the filter also follows the available
//! bandwidth up; a stream with nothing strained up to a rate above the
//! estimate moves the zero to that rate and doubts it (where BART
//! re-scans its whole range); the prior comes from the first
//! stream with a strained rate (the line's zero at its turning rate, the
//! capacity its top rate, uncertain by all of it; or, where the caller
//! gives a hint such as the sender's link, the slope of that stream's
//! strained rates under the hint, uncertain by half; the available
//! bandwidth uncertain by the capacity). Noise figures: `R` is a strain
//! standard deviation of 0.05 (the spread of one 64-packet sub-stream's
//! ratio under the simulator's bursty load), `Q` lets `beta` move 0.02
//! (2 % of the capacity) per stream and `alpha` 0.2 % of itself (at 5 %
//! a bursty stream moved the answer by a third on the lab and the
//! simulator's bursty step was never held within 10 %; at 2 % it is after
//! 18 streams, and the smoothed step after 3 instead of 1).

use super::topp::ToppPoint;
use super::Bound;
use crate::stream::{arrival_rate_bps, ProbeStream};

/// Rates inside the filter are in this unit (Gbit/s).
const RATE_UNIT_BPS: f64 = 1e9;

/// The prior's doubt about the capacity: all of it without a hint, half
/// of it with one.
const PRIOR_ALPHA_REL: f64 = 1.0;
const HINTED_ALPHA_REL: f64 = 0.5;
/// How far a re-scanned estimate may be off, as a share of itself. A
/// third let the next bursty stream drag the line far down (on the lab's
/// bursty40, and on the simulator's bursty path: p90 24 % at a third,
/// 13.5 % at a tenth, `scripts/estimate-sweep.sh 20 bart`).
const RESCAN_DOUBT: f64 = 0.1;

/// The filter's noise figures and the strain that counts as "above".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BartParams {
    /// Standard deviation of one strain measurement.
    pub strain_sd: f64,
    /// Per-stream drift of `beta` (a share of the capacity).
    pub beta_drift_sd: f64,
    /// Per-stream drift of `alpha`, relative to itself.
    pub alpha_drift_rel: f64,
    /// A strain above this is above the turning point.
    pub tolerance: f64,
}

impl Default for BartParams {
    fn default() -> Self {
        BartParams {
            strain_sd: 0.05,
            beta_drift_sd: 0.02,
            alpha_drift_rel: 0.002,
            tolerance: 0.02,
        }
    }
}

/// What the filter says after a stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BartEstimate {
    pub abw_bps: f64,
    /// Standard deviation of `abw_bps` from the filter's covariance.
    pub abw_sd_bps: f64,
    pub capacity_bps: f64,
    /// "at least" until a stream has shown a strained rate.
    pub bound: Bound,
    /// Strained rates the filter has used, in all.
    pub strained_points: usize,
}

/// The tracker: state `(alpha, beta)` and its covariance.
#[derive(Debug, Clone, PartialEq)]
pub struct BartTracker {
    params: BartParams,
    x: [f64; 2],
    p: [[f64; 2]; 2],
    started: bool,
    strained_points: usize,
    /// The highest rate any stream probed (Gbit/s), for "at least".
    top_probed: f64,
    /// A guess at the tight link's capacity (Gbit/s), for the prior.
    capacity_hint: Option<f64>,
}

impl BartTracker {
    pub fn new(params: BartParams) -> Self {
        BartTracker {
            params,
            x: [0.0; 2],
            p: [[0.0; 2]; 2],
            started: false,
            strained_points: 0,
            top_probed: 0.0,
            capacity_hint: None,
        }
    }

    /// A tracker whose prior takes `capacity_bps` as the tight link's
    /// capacity, give or take half (a strategy knows the sender's link).
    pub fn with_capacity_hint(params: BartParams, capacity_bps: f64) -> Self {
        BartTracker {
            capacity_hint: (capacity_bps.is_finite() && capacity_bps > 0.0)
                .then_some(capacity_bps / RATE_UNIT_BPS),
            ..BartTracker::new(params)
        }
    }

    /// Lowers the capacity hint to `capacity_bps` before the prior is
    /// drawn (a path shown slower than the sender's link); no effect
    /// after it, or without a hint, or where it would raise it.
    pub fn cap_capacity_hint(&mut self, capacity_bps: f64) {
        let c = capacity_bps / RATE_UNIT_BPS;
        if let (false, Some(h), true) = (self.started, self.capacity_hint, c > 0.0) {
            self.capacity_hint = Some(h.min(c));
        }
    }

    /// Takes in one stream's points (increasing offered rate) and returns
    /// the estimate after it; `None` before any usable point.
    pub fn update(&mut self, points: &[ToppPoint]) -> Option<BartEstimate> {
        let pts: Vec<(f64, f64)> = points
            .iter()
            .filter(|p| p.offered_bps > 0.0 && p.ratio.is_finite())
            .map(|p| (p.offered_bps / RATE_UNIT_BPS, p.ratio - 1.0))
            .collect();
        if pts.is_empty() {
            return self.estimate();
        }
        let top = pts.iter().map(|p| p.0).fold(0.0, f64::max);
        self.top_probed = self.top_probed.max(top);
        // The turning point as TOPP finds it: the unbroken run of strained
        // rates at the fast end. A strained rate below an unstrained one
        // is noise (a burst, a receive batch), not the line.
        let run = pts
            .iter()
            .rev()
            .take_while(|p| p.1 > self.params.tolerance)
            .count();
        let turning = pts.len() - run;
        if !self.started {
            if run == 0 {
                // Nothing to draw a line from yet: "at least" the top.
                return self.estimate();
            }
            // The prior: the line through zero at the turning rate with
            // the hinted capacity's slope (else the top rate's).
            let (capacity, doubt) = match self.capacity_hint {
                Some(c) => (prior_capacity(&pts[turning..], c), HINTED_ALPHA_REL),
                None => (top, PRIOR_ALPHA_REL),
            };
            let alpha = 1.0 / capacity;
            self.x = [alpha, -alpha * pts[turning].0];
            self.p = [[(doubt * alpha).powi(2), 0.0], [0.0, 1.0]];
            self.started = true;
        } else {
            let q = &self.params;
            self.p[0][0] += (q.alpha_drift_rel * self.x[0]).powi(2);
            self.p[1][1] += q.beta_drift_sd.powi(2);
            if run == 0 && top > self.abw() {
                // Nothing strained up to a rate above the estimate: the
                // estimate is stale (BART re-scans). Move the line's zero
                // to the top rate, slope kept, and doubt it by a third.
                self.move_zero_to(top);
                return self.estimate();
            }
        }
        let r = self.params.strain_sd.powi(2);
        for (i, &(u, strain)) in pts.iter().enumerate() {
            if i >= turning {
                self.strained_points += 1;
                self.measure(u, strain, r);
            } else if self.strained_points > 0 && u > self.abw() {
                // Not strained above the estimate: the zero is at or
                // above this rate.
                self.measure(u, 0.0, r);
            }
        }
        self.estimate()
    }

    /// A stream that overflowed a queue at `rate_bps` and above says only
    /// that the available bandwidth is under that rate: if the line's zero
    /// is above it, move the zero there (slope kept) and doubt it, as a
    /// stream with nothing strained moves it up.
    pub fn at_most(&mut self, rate_bps: f64) {
        let u = rate_bps / RATE_UNIT_BPS;
        if !self.started || u.is_nan() || u <= 0.0 || self.abw() <= u {
            return;
        }
        self.move_zero_to(u);
    }

    /// Moves the line's zero to `u` (Gbit/s), slope kept, and doubts it by
    /// [`RESCAN_DOUBT`] of itself.
    fn move_zero_to(&mut self, u: f64) {
        let a = self.x[0];
        self.x[1] = -a * u;
        self.p[0][1] = 0.0;
        self.p[1][0] = 0.0;
        self.p[1][1] += (RESCAN_DOUBT * a * u).powi(2);
    }

    /// One Kalman measurement update with `H = (u, 1)`.
    fn measure(&mut self, u: f64, z: f64, r: f64) {
        let p = self.p;
        let ph = [p[0][0] * u + p[0][1], p[1][0] * u + p[1][1]];
        let s = u * ph[0] + ph[1] + r;
        // NaN or not positive: nothing to learn from this rate.
        if s.is_nan() || s <= 0.0 {
            return;
        }
        let k = [ph[0] / s, ph[1] / s];
        let innovation = z - (self.x[0] * u + self.x[1]);
        self.x[0] += k[0] * innovation;
        self.x[1] += k[1] * innovation;
        // P = (I - K H) P, kept symmetric.
        let hp = [u * p[0][0] + p[1][0], u * p[0][1] + p[1][1]];
        let mut n = [[0.0; 2]; 2];
        for (i, row) in n.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = p[i][j] - k[i] * hp[j];
            }
        }
        let off = 0.5 * (n[0][1] + n[1][0]);
        self.p = [[n[0][0].max(0.0), off], [off, n[1][1].max(0.0)]];
        // A line that falls with the rate is no tight link: keep the slope
        // positive (a capacity at most a thousand times the prior's).
        self.x[0] = self.x[0].max(1e-3 / self.top_probed.max(1e-9));
    }

    /// The zero of the line, Gbit/s.
    fn abw(&self) -> f64 {
        -self.x[1] / self.x[0]
    }

    /// The filter's current answer.
    pub fn estimate(&self) -> Option<BartEstimate> {
        if self.top_probed <= 0.0 {
            return None;
        }
        let [a, b] = self.x;
        if !self.started {
            let top = self.top_probed * RATE_UNIT_BPS;
            return Some(BartEstimate {
                abw_bps: top,
                abw_sd_bps: 0.0,
                capacity_bps: f64::NAN,
                bound: Bound::AtLeast,
                strained_points: 0,
            });
        }
        let abw = (-b / a).max(0.0);
        // Gradient of -b/a: (b / a^2, -1 / a).
        let g = [b / (a * a), -1.0 / a];
        let p = &self.p;
        let var = g[0] * g[0] * p[0][0] + 2.0 * g[0] * g[1] * p[0][1] + g[1] * g[1] * p[1][1];
        Some(BartEstimate {
            abw_bps: abw * RATE_UNIT_BPS,
            abw_sd_bps: var.max(0.0).sqrt() * RATE_UNIT_BPS,
            capacity_bps: RATE_UNIT_BPS / a,
            bound: Bound::Exact,
            strained_points: self.strained_points,
        })
    }
}

/// The most capacity a FIFO can have that delivered a train sent at
/// `offered_bps` at only `delivered_bps`: it leaves at `C u / (u + x)`
/// with `x` the cross traffic it met, at most `C` on average, so
/// `C <= d u / (u - d)`. `None` where nothing queued. A scan's top
/// rate of 900 Mbit/s delivered at 176 bounds a 200 Mbit/s tbf by 219;
/// 9 Gbit/s delivered at 7.8 bounds a 10 Gbit/s link by 58.
pub fn capacity_ceiling_bps(offered_bps: f64, delivered_bps: f64) -> Option<f64> {
    let (u, d) = (offered_bps, delivered_bps);
    (d > 0.0 && d < u).then(|| d * u / (u - d))
}

/// [`capacity_ceiling_bps`] from a stream's last `per_rate` packets (its
/// fastest sub-stream, sent at `offered_bps`); `None` with fewer than 8
/// of them received.
pub fn top_rate_capacity_ceiling_bps(
    stream: &ProbeStream,
    per_rate: usize,
    offered_bps: f64,
) -> Option<f64> {
    let tail = &stream.packets[stream.packets.len().saturating_sub(per_rate)..];
    let arrived = crate::stream::arrivals(tail);
    if arrived.len() < 8 {
        return None;
    }
    capacity_ceiling_bps(offered_bps, arrival_rate_bps(&arrived)?)
}

/// The capacity the prior takes from a hint `hint` (Gbit/s: the
/// sender's link, an upper bound) and the first stream's strained rates
/// `(offered, strain)`: the slope of their line where two or more give
/// one under the hint, never under the fastest rate they were delivered
/// at (a FIFO delivers no faster than its capacity). A sender's link
/// five times the path's (the lab's 1 Gbit/s beside a 200 Mbit/s tbf)
/// made a prior whose slope the filter could not unlearn within a run:
/// every lab scenario read about 10 % low.
fn prior_capacity(strained: &[(f64, f64)], hint: f64) -> f64 {
    let delivered = strained
        .iter()
        .map(|&(u, e)| u / (1.0 + e))
        .fold(0.0, f64::max);
    if strained.len() < 2 {
        return hint;
    }
    let n = strained.len() as f64;
    let mu = strained.iter().map(|p| p.0).sum::<f64>() / n;
    let me = strained.iter().map(|p| p.1).sum::<f64>() / n;
    let cov: f64 = strained.iter().map(|p| (p.0 - mu) * (p.1 - me)).sum();
    let var: f64 = strained.iter().map(|p| (p.0 - mu).powi(2)).sum();
    let slope = cov / var;
    if !slope.is_finite() || slope <= 0.0 {
        return hint;
    }
    (1.0 / slope).min(hint).max(delivered.min(hint))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decision::topp::tests::fluid;
    use crate::schedule::rates_around;

    /// A deterministic noise of standard deviation about `sd`.
    fn noisy(mut p: Vec<ToppPoint>, k: usize, sd: f64) -> Vec<ToppPoint> {
        for (i, q) in p.iter_mut().enumerate() {
            if q.ratio > 1.0 {
                let phase = ((k * 7 + i * 13) % 17) as f64 / 16.0 - 0.5;
                q.ratio += sd * 3.4 * phase;
            }
        }
        p
    }

    #[test]
    fn two_strained_rates_give_the_line() {
        // C = 10, X = 4 (A = 6): rates 5, 7, 9 read 1, 1.1, 1.3. With a
        // wide prior and small noise the filter lands on the line.
        let mut t = BartTracker::new(BartParams {
            strain_sd: 0.001,
            ..BartParams::default()
        });
        let e = t.update(&fluid(10e9, 4e9, &[5e9, 7e9, 9e9])).unwrap();
        assert_eq!((e.bound, e.strained_points), (Bound::Exact, 2));
        assert!((e.abw_bps / 6e9 - 1.0).abs() < 0.01, "{e:?}");
        assert!((e.capacity_bps / 10e9 - 1.0).abs() < 0.02, "{e:?}");
    }

    #[test]
    fn nothing_strained_is_at_least_the_top_rate() {
        let mut t = BartTracker::new(BartParams::default());
        assert_eq!(t.update(&[]), None);
        let e = t.update(&fluid(10e9, 1e9, &[4e9, 6e9, 8e9])).unwrap();
        assert_eq!((e.bound, e.abw_bps), (Bound::AtLeast, 8e9));
    }

    /// A tracker re-centring its streams on its own estimate, as the
    /// strategy does: 5 rates +-30 % around it.
    fn follow(t: &mut BartTracker, c: f64, x: f64, k: usize, centre: &mut f64) -> BartEstimate {
        let pts = noisy(fluid(c, x, &rates_around(*centre, 0.3, 5)), k, 0.02);
        let e = t.update(&pts).unwrap();
        *centre = e.abw_bps;
        e
    }

    /// A 200 Mbit/s FIFO with nothing else on it: points at 0.21, 0.25
    /// and 0.29 Gbit/s strain 0.05, 0.25, 0.45 (`u / 0.2 - 1`), a line of
    /// slope 5: capacity 0.2, whatever the 1 Gbit/s hint says. One point
    /// gives no slope (the hint); a flat or falling line neither; the
    /// delivered rate (0.2) is a floor under a noisy steep line.
    #[test]
    fn the_prior_capacity_by_hand() {
        let line = [(0.21, 0.05), (0.25, 0.25), (0.29, 0.45)];
        assert!((prior_capacity(&line, 1.0) - 0.2).abs() < 1e-12);
        assert_eq!(prior_capacity(&line[..1], 1.0), 1.0);
        assert_eq!(prior_capacity(&[(0.2, 0.3), (0.3, 0.1)], 1.0), 1.0);
        // Under the hint's slope: the hint.
        assert_eq!(prior_capacity(&line, 0.1), 0.1);
        // Slope 20 (capacity 0.05) from strains the rates cannot have
        // met at 0.05: never under the 0.21 / 1.05 = 0.2 delivered.
        let steep = [(0.21, 0.05), (0.25, 0.85)];
        assert!((prior_capacity(&steep, 1.0) - 0.2).abs() < 1e-12);
    }

    /// 900 Mbit/s delivered at 176: C <= 176 x 900 / 724 = 218.78; 9
    /// Gbit/s at 7.8: 58.5; nothing queued, nothing to bound.
    #[test]
    fn the_capacity_ceiling_by_hand() {
        let c = capacity_ceiling_bps(900e6, 176e6).unwrap();
        assert!((c - 176e6 * 900.0 / 724.0).abs() < 1.0, "{c}");
        assert!((c / 1e6 - 218.78).abs() < 0.01, "{c}");
        let c = capacity_ceiling_bps(9e9, 7.8e9).unwrap();
        assert!((c / 1e9 - 58.5).abs() < 1e-9, "{c}");
        assert_eq!(capacity_ceiling_bps(9e9, 9e9), None);
        assert_eq!(capacity_ceiling_bps(9e9, 0.0), None);
        // The hint only comes down, and only before the prior.
        let mut t = BartTracker::with_capacity_hint(BartParams::default(), 1e9);
        t.cap_capacity_hint(2e9);
        assert_eq!(t.capacity_hint, Some(1.0));
        t.cap_capacity_hint(0.25e9);
        assert_eq!(t.capacity_hint, Some(0.25));
        t.update(&fluid(0.2e9, 0.0, &[0.15e9, 0.25e9, 0.3e9]));
        t.cap_capacity_hint(0.1e9);
        assert_eq!(t.capacity_hint, Some(0.25));
    }

    /// The lab's shape: the sender's 1 Gbit/s link as the hint, a 200
    /// Mbit/s tight link with nothing else on it. Followed stream by
    /// stream, the estimate settles at 200 (it read 9-11 % low when the
    /// prior took the hint's slope).
    #[test]
    fn a_tight_link_far_under_the_hint_reads_right() {
        let mut t = BartTracker::with_capacity_hint(BartParams::default(), 1e9);
        let mut centre = 0.15e9;
        let mut e = None;
        for k in 0..10 {
            e = Some(follow(&mut t, 0.2e9, 0.0, k, &mut centre));
        }
        let e = e.unwrap();
        assert!((e.abw_bps / 0.2e9 - 1.0).abs() < 0.02, "{e:?}");
    }

    #[test]
    fn follows_a_step_from_6_to_3_gbit_s_within_five_streams() {
        let mut t = BartTracker::new(BartParams::default());
        let mut centre = 5e9;
        for k in 0..20 {
            follow(&mut t, 10e9, 4e9, k, &mut centre);
        }
        assert!((centre / 6e9 - 1.0).abs() < 0.05, "{centre}");
        // Cross traffic steps from 4 to 7 Gbit/s.
        let mut within = None;
        for k in 0..20 {
            let e = follow(&mut t, 10e9, 7e9, 20 + k, &mut centre);
            if within.is_none() && (e.abw_bps / 3e9 - 1.0).abs() < 0.1 {
                within = Some(k + 1);
            }
        }
        let n = within.expect("never followed the step");
        assert!(n <= 5, "within 10 % of 3 Gbit/s after {n} streams");
        assert!((centre / 3e9 - 1.0).abs() < 0.05, "{centre}");
        // And back up from 3 to 6.
        let mut up = None;
        for k in 0..20 {
            let e = follow(&mut t, 10e9, 4e9, 40 + k, &mut centre);
            if up.is_none() && (e.abw_bps / 6e9 - 1.0).abs() < 0.1 {
                up = Some(k + 1);
            }
        }
        assert!(up.is_some_and(|n| n <= 8), "up after {up:?} streams");
    }

    #[test]
    fn does_not_wander_on_a_stationary_path() {
        let mut t = BartTracker::new(BartParams::default());
        let mut centre = 5e9;
        let mut after: Vec<f64> = Vec::new();
        for k in 0..60 {
            let e = follow(&mut t, 10e9, 4e9, k, &mut centre);
            if k >= 10 {
                after.push(e.abw_bps);
            }
        }
        let lo = after.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = after.iter().copied().fold(0.0, f64::max);
        assert!(lo > 0.95 * 6e9 && hi < 1.05 * 6e9, "{lo} - {hi}");
        // The filter's own doubt settles where the drift it allows per
        // stream balances what a stream tells it: about 4.5 %.
        let tracking = t.estimate().unwrap();
        assert!(
            tracking.abw_sd_bps < 0.07 * tracking.abw_bps,
            "{tracking:?}"
        );
        // Allowing a fifth of the drift (one measurement of a steady
        // path), it is surer: 3.1 % against 4.5 % (two strained rates a
        // stream tell it little).
        let mut t = BartTracker::new(BartParams {
            beta_drift_sd: 0.004,
            ..BartParams::default()
        });
        let mut centre = 5e9;
        for k in 0..30 {
            follow(&mut t, 10e9, 4e9, k, &mut centre);
        }
        let e = t.estimate().unwrap();
        assert!((e.abw_bps / 6e9 - 1.0).abs() < 0.03, "{e:?}");
        assert!(
            e.abw_sd_bps < 0.85 * tracking.abw_sd_bps,
            "{e:?} vs {tracking:?}"
        );
    }

    proptest::proptest! {
        /// On any fluid path, noise-free streams around the estimate bring
        /// the tracker to the available bandwidth.
        #[test]
        fn converges_on_fluid_paths(c in 1e9f64..100e9, load in 0.1f64..0.8, start in 0.5f64..1.5) {
            let x = c * load;
            let a = c - x;
            let mut t = BartTracker::new(BartParams::default());
            let mut centre = (a * start).min(c / 1.3);
            for _ in 0..40 {
                let e = t.update(&fluid(c, x, &rates_around(centre, 0.3, 5))).unwrap();
                centre = e.abw_bps.min(c / 1.3);
            }
            let e = t.estimate().unwrap();
            proptest::prop_assert!((e.abw_bps / a - 1.0).abs() < 0.03, "{:?} vs {}", e, a);
        }
    }
}
