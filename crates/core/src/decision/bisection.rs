//! Probabilistic bisection over noisy rate decisions (Horstein, "Sequential
//! transmission using noiseless feedback", IEEE Trans. Inf. Theory 1963;
//! Waeber, Frazier and Henderson, "Bisection search with noisy responses",
//! SIAM J. Control Optim. 2013): a posterior over the available bandwidth
//! `A` that each single-rate decision ("above" / "below", PRC-MT's,
//! \[BASS\] section IV-B) updates, the next rate its median. Binary search
//! trusts every decision and never looks back; one wrong one near the
//! answer moves it for good. Here a decision only shifts weight.
//!
//! Ours: a decision's error depends on how far its rate `r` lies from
//! `A`: "above" with probability `lapse + (1 - 2 lapse) / (1 + exp(-(r -
//! A) / (s r)))`, a logistic in the relative distance (a psychometric
//! function: a coin flip at `A`, nearly sure a few `s` away) with a small
//! chance `lapse` of a wrong decision anywhere. The scale `s` is the
//! path's and not known: the posterior is kept jointly over `A` (a grid of
//! `bins` rates from 0 to `top_bps`) and a few scales, and read over `A`
//! alone, so that decisions that contradict each other widen the
//! interval, as they should. On the simulator's 10 Gbit/s paths the
//! decisions of 64-packet PRC-MT+BASS streams fit `s` about 0.07
//! (bursty cross traffic) and 0.03 (smoothed), and a lapse of 0-2 %.

/// The decision model and the grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BisectionParams {
    /// Candidate logistic scales, relative to the rate probed (equal
    /// entries are one scale).
    pub scales: [f64; 5],
    /// Chance of a wrong decision at any distance.
    pub lapse: f64,
    /// Grid points over `0..top_bps`.
    pub bins: usize,
}

impl Default for BisectionParams {
    fn default() -> Self {
        BisectionParams {
            scales: [0.02, 0.035, 0.05, 0.07, 0.1],
            lapse: 0.05,
            bins: 1000,
        }
    }
}

/// The posterior over the available bandwidth after some decisions.
#[derive(Debug, Clone, PartialEq)]
pub struct Bisection {
    top_bps: f64,
    params: BisectionParams,
    /// Weights, one row of `bins` per scale; they sum to 1.
    weights: Vec<f64>,
    decisions: usize,
}

impl Bisection {
    /// A flat prior over `0..top_bps` (and over the scales). `None` when
    /// `top_bps` is not a positive rate, there are no bins, a scale is not
    /// positive, or the lapse is not in `0..0.5`.
    pub fn new(top_bps: f64, params: BisectionParams) -> Option<Self> {
        let ok = top_bps.is_finite()
            && top_bps > 0.0
            && params.bins > 0
            && params.scales.iter().all(|s| s.is_finite() && *s > 0.0)
            && (0.0..0.5).contains(&params.lapse);
        if !ok {
            return None;
        }
        let n = params.bins * params.scales.len();
        Some(Bisection {
            top_bps,
            weights: vec![1.0 / n as f64; n],
            params,
            decisions: 0,
        })
    }

    /// The rate at the middle of grid cell `i`.
    fn rate_of(&self, i: usize) -> f64 {
        self.top_bps * (i as f64 + 0.5) / self.params.bins as f64
    }

    /// Weighs the posterior by one decision at `rate_bps`: `above` when
    /// the rate read above the available bandwidth. A rate that is not a
    /// positive number changes nothing.
    pub fn update(&mut self, rate_bps: f64, above: bool) {
        if !(rate_bps.is_finite() && rate_bps > 0.0) {
            return;
        }
        let bins = self.params.bins;
        let lapse = self.params.lapse;
        let mut total = 0.0;
        for (k, &scale) in self.params.scales.iter().enumerate() {
            let width = scale * rate_bps;
            for i in 0..bins {
                let a = self.rate_of(i);
                let p_above = lapse + (1.0 - 2.0 * lapse) / (1.0 + (-(rate_bps - a) / width).exp());
                let w = &mut self.weights[k * bins + i];
                *w *= if above { p_above } else { 1.0 - p_above };
                total += *w;
            }
        }
        // Renormalised every time: dozens of decisions would underflow.
        if total > 0.0 && total.is_finite() {
            self.weights.iter_mut().for_each(|w| *w /= total);
        }
        self.decisions += 1;
    }

    /// Weighs the posterior by one estimate of `A` (another method's, a
    /// multi-rate stream's): a normal error of `rel_sd` times the
    /// estimate, and with probability `lapse` an estimate that says
    /// nothing (uniform over the grid). Not counted as a decision; an
    /// estimate that is not a positive number, or settings out of range
    /// (`rel_sd` not positive, `lapse` not in `0..1`), change nothing.
    pub fn weigh_estimate(&mut self, estimate_bps: f64, rel_sd: f64, lapse: f64) {
        let ok = estimate_bps.is_finite()
            && estimate_bps > 0.0
            && rel_sd.is_finite()
            && rel_sd > 0.0
            && (0.0..1.0).contains(&lapse);
        if !ok {
            return;
        }
        let bins = self.params.bins;
        let sd = rel_sd * estimate_bps;
        // Densities per grid cell: the normal's over the cell's width,
        // the lapse's spread evenly.
        let cell = self.top_bps / bins as f64;
        let norm = cell / (sd * (2.0 * std::f64::consts::PI).sqrt());
        let likelihood: Vec<f64> = (0..bins)
            .map(|i| {
                let z = (self.rate_of(i) - estimate_bps) / sd;
                lapse / bins as f64 + (1.0 - lapse) * norm * (-0.5 * z * z).exp()
            })
            .collect();
        let mut total = 0.0;
        for row in self.weights.chunks_mut(bins) {
            for (w, l) in row.iter_mut().zip(&likelihood) {
                *w *= l;
                total += *w;
            }
        }
        if total > 0.0 && total.is_finite() {
            self.weights.iter_mut().for_each(|w| *w /= total);
        }
    }

    /// Decisions weighed so far.
    pub fn decisions(&self) -> usize {
        self.decisions
    }

    /// The posterior over the available bandwidth alone (summed over the
    /// scales), one weight per grid cell.
    pub fn marginal(&self) -> Vec<f64> {
        let bins = self.params.bins;
        let mut m = vec![0.0; bins];
        for row in self.weights.chunks(bins) {
            for (x, w) in m.iter_mut().zip(row) {
                *x += w;
            }
        }
        m
    }

    /// The `q` quantile (clamped to 0..1) of the available bandwidth,
    /// linear within a grid cell.
    pub fn quantile(&self, q: f64) -> f64 {
        let q = q.clamp(0.0, 1.0);
        let m = self.marginal();
        let total: f64 = m.iter().sum();
        let cell = self.top_bps / self.params.bins as f64;
        let mut below = 0.0;
        for (i, w) in m.iter().enumerate() {
            let w = w / total;
            if below + w >= q && w > 0.0 {
                return (cell * (i as f64 + (q - below) / w)).min(self.top_bps);
            }
            below += w;
        }
        self.top_bps
    }

    /// The posterior median: the next rate to probe, and the answer.
    pub fn median(&self) -> f64 {
        self.quantile(0.5)
    }

    /// The central interval holding `coverage` of the posterior.
    pub fn interval(&self, coverage: f64) -> (f64, f64) {
        let tail = (1.0 - coverage.clamp(0.0, 1.0)) / 2.0;
        (self.quantile(tail), self.quantile(1.0 - tail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One very steep scale and no lapse: plain bisection. On 0-100,
    /// "above" at 50 leaves 0-50 (median 25, 10th percentile 5); "below"
    /// at 25 then leaves 25-50 (median 37.5).
    #[test]
    fn sure_decisions_bisect() {
        let p = BisectionParams {
            scales: [1e-6; 5],
            lapse: 0.0,
            bins: 1000,
        };
        let mut b = Bisection::new(100.0, p).unwrap();
        assert!((b.median() - 50.0).abs() < 1e-9);
        b.update(50.0, true);
        assert!((b.median() - 25.0).abs() < 1e-6, "{}", b.median());
        assert!((b.quantile(0.1) - 5.0).abs() < 1e-6);
        b.update(25.0, false);
        assert!((b.median() - 37.5).abs() < 1e-6, "{}", b.median());
        let (lo, hi) = b.interval(1.0);
        assert!(
            (lo - 25.0).abs() < 1e-9 && (hi - 50.0).abs() < 1e-9,
            "{lo} {hi}"
        );
        assert_eq!(b.decisions(), 2);
    }

    /// A lapse of 0.2 and a steep scale: "above" at 50 on 0-100 leaves
    /// 0.8 of the weight under 50 (0.016 per unit) and 0.2 over it. The
    /// median is where 0.016 x reaches 0.5: 31.25; the 90th percentile
    /// lies over 50, where 0.8 + 0.004 (x - 50) = 0.9: 75.
    #[test]
    fn a_lapse_keeps_weight_on_the_far_side() {
        let p = BisectionParams {
            scales: [1e-6; 5],
            lapse: 0.2,
            bins: 1000,
        };
        let mut b = Bisection::new(100.0, p).unwrap();
        b.update(50.0, true);
        assert!((b.median() - 31.25).abs() < 1e-6, "{}", b.median());
        assert!((b.quantile(0.9) - 75.0).abs() < 1e-6, "{}", b.quantile(0.9));
    }

    /// Decisions that contradict each other leave a wider interval than
    /// the same decisions agreeing: the scales that explain them (wide
    /// ones) gain weight.
    #[test]
    fn contradictions_widen_the_interval() {
        let steady = |flip: bool| {
            let mut b = Bisection::new(10e9, BisectionParams::default()).unwrap();
            for k in 0..12 {
                let r = b.median();
                // The truth is 6 Gbit/s; one early decision is wrong.
                let above = (r > 6e9) != (flip && k == 3);
                b.update(r, above);
            }
            let (lo, hi) = b.interval(0.9);
            (b.median(), hi - lo)
        };
        let (m, w) = steady(false);
        let (mf, wf) = steady(true);
        assert!((m / 6e9 - 1.0).abs() < 0.05, "{m}");
        assert!((mf / 6e9 - 1.0).abs() < 0.1, "{mf}");
        assert!(wf > w, "{wf} vs {w}");
    }

    /// An estimate of 50 with a 10 % error on a flat 0-100 prior: the
    /// posterior is N(50, 5), median 50, 95th percentile 50 + 1.645 x 5 =
    /// 58.22. With a lapse of 0.2 it is 0.2 of the flat prior plus 0.8 of
    /// that normal: the 5th percentile is where the flat part alone holds
    /// 0.05 (the normal's mass under 25 is 3e-7): 25. Nonsense changes
    /// nothing, and no decision is counted.
    #[test]
    fn an_estimate_weighs_like_a_normal_error() {
        let p = BisectionParams {
            scales: [1e-6; 5],
            lapse: 0.0,
            bins: 1000,
        };
        let mut b = Bisection::new(100.0, p).unwrap();
        b.weigh_estimate(50.0, 0.1, 0.0);
        assert!((b.median() - 50.0).abs() < 0.01, "{}", b.median());
        assert!(
            (b.quantile(0.95) - 58.22).abs() < 0.05,
            "{}",
            b.quantile(0.95)
        );
        assert_eq!(b.decisions(), 0);
        let mut l = Bisection::new(100.0, p).unwrap();
        l.weigh_estimate(50.0, 0.1, 0.2);
        assert!((l.median() - 50.0).abs() < 0.01, "{}", l.median());
        assert!(
            (l.quantile(0.05) - 25.0).abs() < 0.05,
            "{}",
            l.quantile(0.05)
        );
        let before = l.clone();
        for (e, sd, lapse) in [
            (f64::NAN, 0.1, 0.0),
            (-1.0, 0.1, 0.0),
            (50.0, 0.0, 0.0),
            (50.0, 0.1, 1.0),
        ] {
            l.weigh_estimate(e, sd, lapse);
        }
        assert_eq!(l, before);
    }

    #[test]
    fn bad_settings_are_refused() {
        let p = BisectionParams::default();
        assert!(Bisection::new(0.0, p).is_none());
        assert!(Bisection::new(f64::NAN, p).is_none());
        let zero_scale = BisectionParams {
            scales: [0.02, 0.0, 0.05, 0.07, 0.1],
            ..p
        };
        assert!(Bisection::new(1e9, zero_scale).is_none());
        let no_bins = BisectionParams { bins: 0, ..p };
        assert!(Bisection::new(1e9, no_bins).is_none());
        let lapse = BisectionParams { lapse: 0.5, ..p };
        assert!(Bisection::new(1e9, lapse).is_none());
    }

    proptest! {
        /// Whatever the decisions, quantiles stay in 0..top and rise with
        /// q, the median sits in its 90 % interval, and consistent sure
        /// decisions from a threshold converge on it.
        #[test]
        fn posterior_invariants(
            truth in 0.05f64..0.95,
            flips in proptest::collection::vec(any::<bool>(), 1..20),
        ) {
            let mut b = Bisection::new(1.0, BisectionParams::default()).unwrap();
            for f in &flips {
                let r = b.median();
                b.update(r, (r > truth) != *f);
            }
            let qs: Vec<f64> = [0.0, 0.05, 0.5, 0.95, 1.0].iter().map(|&q| b.quantile(q)).collect();
            prop_assert!(qs.windows(2).all(|w| w[0] <= w[1] + 1e-12), "{qs:?}");
            prop_assert!(qs[0] >= 0.0 && qs[4] <= 1.0);
            let (lo, hi) = b.interval(0.9);
            prop_assert!(lo <= b.median() && b.median() <= hi);
            let total: f64 = b.marginal().iter().sum();
            prop_assert!((total - 1.0).abs() < 1e-9);
            let mut sure = Bisection::new(1.0, BisectionParams::default()).unwrap();
            for _ in 0..40 {
                let r = sure.median();
                sure.update(r, r > truth);
            }
            prop_assert!((sure.median() - truth).abs() < 0.03, "{} vs {truth}", sure.median());
        }
    }
}
