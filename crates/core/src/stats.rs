//! The one median and quantile of tightlink.
//!
//! Quantiles interpolate linearly between order statistics: for `n`
//! sorted values, quantile `q` sits at position `q (n - 1)` (Hyndman and
//! Fan's definition 7, the default of R and numpy). Why this one: it is
//! continuous in `q`, gives the usual median (the mean of the middle pair
//! for even `n`), the minimum at 0 and the maximum at 1, and so never
//! reports a value outside the sample; and readers can check a printed
//! figure with the tools they already use.
//!
//! NaN sorts last (`f64::total_cmp`); callers pass finite samples.

/// Least-squares line `y = slope x + intercept` through the points:
/// `(slope, intercept)`, NaN when the `x` do not vary (or no points).
pub fn line_fit<I>(points: I) -> (f64, f64)
where
    I: Iterator<Item = (f64, f64)> + Clone,
{
    let n = points.clone().count() as f64;
    let mx = points.clone().map(|p| p.0).sum::<f64>() / n;
    let my = points.clone().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = points.clone().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.map(|p| (p.0 - mx).powi(2)).sum();
    let slope = sxy / sxx;
    (slope, my - slope * mx)
}

/// Sorts a copy of `v`.
pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// Quantile `q` (clamped to 0..1) of an already sorted slice; `None` when
/// it is empty.
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let x = q.clamp(0.0, 1.0) * (n - 1) as f64;
    let (i, f) = (x.floor() as usize, x.fract());
    let hi = sorted[(i + 1).min(n - 1)];
    Some(if f == 0.0 {
        sorted[i]
    } else {
        sorted[i] + f * (hi - sorted[i])
    })
}

/// Quantile `q` of `v` (any order); `None` when empty.
pub fn quantile(v: &[f64], q: f64) -> Option<f64> {
    quantile_sorted(&sorted(v), q)
}

/// Median of `v` (any order); `None` when empty.
pub fn median(v: &[f64]) -> Option<f64> {
    quantile(v, 0.5)
}

/// The mean of a sorted slice less `round(share n)` values at each end
/// (a trimmed mean: one value far out moves it no more than a value at
/// the edge of the rest would), where at least three values stay; the
/// plain mean where fewer would. `None` when empty.
pub fn trimmed_mean_sorted(sorted: &[f64], share: f64) -> Option<f64> {
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let k = (share.clamp(0.0, 0.5) * n as f64).round() as usize;
    let kept = if n >= 2 * k + 3 {
        &sorted[k..n - k]
    } else {
        sorted
    };
    Some(kept.iter().sum::<f64>() / kept.len() as f64)
}

/// Median of integers (nanosecond gaps and the like), rounded toward
/// negative infinity for an even count; `None` when empty.
pub fn median_i64(v: &[i64]) -> Option<i64> {
    let mut s = v.to_vec();
    s.sort_unstable();
    let n = s.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(s[n / 2]),
        _ => Some((s[n / 2 - 1] + s[n / 2]).div_euclid(2)),
    }
}

/// A distribution-free interval for the median of the population a sorted
/// sample came from: the `k`-th smallest and `k`-th largest values, `k`
/// the largest whose coverage 1 - 2 P(Bin(n, 1/2) <= k - 1) is at least
/// `coverage` (the sign-test interval; any continuous distribution,
/// independent draws). `None` when even the whole sample covers less
/// (n = 4 covers 87.5 %, n = 5 93.75 %), or it is empty.
pub fn median_order_interval(sorted: &[f64], coverage: f64) -> Option<(f64, f64)> {
    let n = sorted.len();
    let miss = (1.0 - coverage) / 2.0;
    // P(Bin(n, 1/2) <= j), summed term by term (n is a count of probe
    // streams: tens at most, so the terms stay finite).
    let mut term = 0.5f64.powi(i32::try_from(n).ok()?);
    let mut below = 0.0;
    let mut k = 0;
    for j in 0..n.div_ceil(2) {
        below += term;
        if below > miss {
            break;
        }
        k = j + 1;
        term *= (n - j) as f64 / (j + 1) as f64;
    }
    (k >= 1).then(|| (sorted[k - 1], sorted[n - k]))
}

/// Jain's fairness index of the flows' throughputs,
/// `(sum x)^2 / (n sum x^2)`: 1 when all are equal, `1/n` when one has
/// everything; 1 for none (or all zero).
pub fn jain_index(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        return 1.0;
    }
    s * s / (x.len() as f64 * s2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_by_hand() {
        assert_eq!(jain_index(&[1.0, 1.0]), 1.0);
        assert_eq!(jain_index(&[1.0, 0.0]), 0.5);
        // (3 + 1)^2 / (2 (9 + 1)) = 0.8
        assert!((jain_index(&[3.0, 1.0]) - 0.8).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
    }

    #[test]
    fn medians_by_hand() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[7.0]), Some(7.0));
        assert_eq!(median(&[]), None);
        assert_eq!(median_i64(&[10, 30, 20]), Some(20));
        assert_eq!(median_i64(&[10, 20, 30, 41]), Some(25));
        assert_eq!(median_i64(&[-3, 0]), Some(-2));
        assert_eq!(median_i64(&[]), None);
    }

    #[test]
    fn quantiles_by_hand() {
        // 1..=5: positions q * 4.
        let v = [5.0, 1.0, 4.0, 2.0, 3.0];
        assert_eq!(quantile(&v, 0.0), Some(1.0));
        assert_eq!(quantile(&v, 0.25), Some(2.0));
        assert_eq!(quantile(&v, 0.9), Some(4.6));
        assert_eq!(quantile(&v, 1.0), Some(5.0));
        assert_eq!(quantile(&v, 7.0), Some(5.0));
        // Two values: the line between them.
        assert_eq!(quantile(&[10.0, 20.0], 0.1), Some(11.0));
    }

    #[test]
    fn trimmed_means_by_hand() {
        // 10 values, a fifth: 2 left off at each end, 3..=8 stay.
        let s: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(trimmed_mean_sorted(&s, 0.2), Some(5.5));
        let far = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 100.0];
        assert_eq!(trimmed_mean_sorted(&far, 0.2), Some(5.5));
        assert_eq!(trimmed_mean_sorted(&far, 0.0), Some(14.5));
        // 8 values: round(1.6) = 2 at each end, 4 stay.
        assert_eq!(
            trimmed_mean_sorted(&[1.0, 2.0, 4.0, 4.0, 6.0, 6.0, 9.0, 50.0], 0.2),
            Some(5.0)
        );
        // 4 values: leaving 1 at each end would keep 2, so none is left off.
        assert_eq!(trimmed_mean_sorted(&[1.0, 2.0, 3.0, 10.0], 0.2), Some(4.0));
        assert_eq!(trimmed_mean_sorted(&[], 0.2), None);
    }

    #[test]
    fn median_order_interval_by_hand() {
        let s: Vec<f64> = (1..=20).map(f64::from).collect();
        // n = 4: the whole sample covers 1 - 2/16 = 87.5 % only.
        assert_eq!(median_order_interval(&s[..4], 0.9), None);
        assert_eq!(median_order_interval(&s[..4], 0.85), Some((1.0, 4.0)));
        // n = 5: 1 - 2/32 = 93.75 %; k = 2 would cover 1 - 12/32.
        assert_eq!(median_order_interval(&s[..5], 0.9), Some((1.0, 5.0)));
        // n = 10: P(<= 1) = 11/1024 <= 5 %, P(<= 2) = 56/1024 > 5 %: k = 2.
        assert_eq!(median_order_interval(&s[..10], 0.9), Some((2.0, 9.0)));
        // n = 20: P(<= 5) = 21700/2^20 = 2.07 %, P(<= 6) = 5.77 %: k = 6.
        assert_eq!(median_order_interval(&s, 0.9), Some((6.0, 15.0)));
        assert_eq!(median_order_interval(&[], 0.9), None);
    }

    proptest::proptest! {
        #[test]
        fn a_trimmed_mean_stays_in_the_sample_and_ignores_how_far_its_ends_go(
            v in proptest::collection::vec(-1e9f64..1e9, 1..60),
            share in 0.0f64..0.5,
            out in 0.0f64..1e12,
        ) {
            let s = sorted(&v);
            let m = trimmed_mean_sorted(&s, share).unwrap();
            let eps = 1e-9 * (1.0 + s[0].abs().max(s[s.len() - 1].abs()));
            proptest::prop_assert!(s[0] - eps <= m && m <= s[s.len() - 1] + eps);
            let n = s.len();
            let k = (share * n as f64).round() as usize;
            if k >= 1 && n >= 2 * k + 3 {
                // The largest value moved further out leaves it as it was.
                let mut t = s.clone();
                t[n - 1] += out;
                let moved = trimmed_mean_sorted(&t, share).unwrap();
                proptest::prop_assert!((moved - m).abs() <= eps, "{moved} {m}");
            }
        }

        #[test]
        fn median_order_interval_holds_the_median_and_stays_in_the_sample(
            v in proptest::collection::vec(-1e12f64..1e12, 5..60),
            // Five values cover 93.75 %.
            coverage in 0.5f64..0.93,
        ) {
            let s = sorted(&v);
            let (lo, hi) = median_order_interval(&s, coverage).unwrap();
            let m = quantile_sorted(&s, 0.5).unwrap();
            proptest::prop_assert!(s[0] <= lo && lo <= m && m <= hi && hi <= s[s.len() - 1]);
        }

        #[test]
        fn quantiles_stay_in_the_sample_and_rise_with_q(
            v in proptest::collection::vec(-1e12f64..1e12, 1..60),
            a in 0.0f64..1.0,
            b in 0.0f64..1.0,
        ) {
            let s = sorted(&v);
            let (lo, hi) = (a.min(b), a.max(b));
            let ql = quantile_sorted(&s, lo).unwrap();
            let qh = quantile_sorted(&s, hi).unwrap();
            proptest::prop_assert!(ql >= s[0] && qh <= s[s.len() - 1]);
            proptest::prop_assert!(ql <= qh);
        }
    }
}
