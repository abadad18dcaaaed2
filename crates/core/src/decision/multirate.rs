//! Multi-rate estimates (BASS paper, section VI): the available bandwidth
//! from one multi-rate stream, after single- or multi-pass smoothing, and
//! Multi-rate PRC-MT with decision policies DP1 and DP2 (section VI-D).
//!
//! "Consistently exceed" (section VI-A: "the largest probing rate beyond
//! which all receive gaps consistently exceed the corresponding sending
//! gaps"): after smoothing, find the unbroken run of gaps at the end of the
//! stream whose receive gap exceeds the send gap; the estimate is the
//! smoothed probing rate of the gap just before that run. The run must be at
//! least half a smoothing window long (8 gaps by default): a shorter run is
//! what one noisy gap leaves after the window average, not queueing. When no
//! such run exists, the available bandwidth is at least the highest smoothed
//! rate; when every gap exceeds, it is at most the lowest.
//! Sub-stream rates must increase through the stream (as in the paper and
//! in pathChirp); other orders are reported as unusable.

use super::{Bound, Decision};
use crate::smoothing::bass::BassParams;
use crate::smoothing::multipass::{exceeding_suffix, Multipass};
use crate::stream::{Gap, ProbeStream, SubStream};

use super::prcmt::prcmt_after_bass;

/// An available-bandwidth estimate with how it bounds the truth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub abw_bps: f64,
    pub bound: Bound,
}

/// Smoothed probing rate of a gap, bit/s.
fn smoothed_rate(g: &Gap) -> Option<f64> {
    g.send_rate_bps()
}

/// The estimate from smoothed gaps (see the module docs).
pub fn estimate_from_smoothed(
    smoothed: &Multipass,
    exceed_tolerance: f64,
    min_suffix: usize,
) -> Option<Estimate> {
    let g = &smoothed.gaps;
    if g.len() < 2 {
        return None;
    }
    let mut suffix = exceeding_suffix(g, exceed_tolerance);
    if suffix < min_suffix.min(g.len()) {
        suffix = 0;
    }
    let k = g.len() - suffix;
    let rates = || g.iter().filter_map(smoothed_rate);
    if suffix == 0 {
        let max = rates().fold(f64::NAN, f64::max);
        return max.is_finite().then_some(Estimate {
            abw_bps: max,
            bound: Bound::AtLeast,
        });
    }
    if k == 0 {
        let min = rates().fold(f64::NAN, f64::min);
        return min.is_finite().then_some(Estimate {
            abw_bps: min,
            bound: Bound::AtMost,
        });
    }
    smoothed_rate(&g[k - 1]).map(|abw_bps| Estimate {
        abw_bps,
        bound: Bound::Exact,
    })
}

/// Whether sub-stream rates strictly increase through the stream.
pub fn rates_increase(subs: &[SubStream]) -> bool {
    subs.windows(2).all(|w| w[1].rate_bps > w[0].rate_bps)
}

/// PRC-MT + BASS on each sub-stream, in rate order. `None` where a
/// sub-stream could not be decided.
pub fn per_rate_decisions(
    stream: &ProbeStream,
    subs: &[SubStream],
    bass: BassParams,
    tolerance: f64,
) -> Vec<Option<Decision>> {
    let mut buf = Vec::new();
    subs.iter()
        .map(|s| {
            buf.clear();
            stream.gaps_into(s.start, s.end, &mut buf);
            prcmt_after_bass(&buf, bass, tolerance)
                .ok()
                .map(|(o, _)| o.decision)
        })
        .collect()
}

/// Decision policy for Multi-rate PRC-MT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The last rate before the first rate judged above.
    Dp1,
    /// The last rate judged below.
    Dp2,
}

/// Applies a policy to per-rate decisions (`rates` ascending). Undecided
/// rates are skipped; with no decided rate there is no estimate.
pub fn apply_policy(
    rates: &[f64],
    decisions: &[Option<Decision>],
    policy: Policy,
) -> Option<Estimate> {
    let decided: Vec<(f64, Decision)> = rates
        .iter()
        .zip(decisions)
        .filter_map(|(&r, d)| d.map(|d| (r, d)))
        .collect();
    let (&(lowest, _), &(highest, _)) = (decided.first()?, decided.last()?);
    let exact = |abw_bps| Estimate {
        abw_bps,
        bound: Bound::Exact,
    };
    match policy {
        Policy::Dp1 => match decided.iter().position(|&(_, d)| d == Decision::Above) {
            None => Some(Estimate {
                abw_bps: highest,
                bound: Bound::AtLeast,
            }),
            Some(0) => Some(Estimate {
                abw_bps: lowest,
                bound: Bound::AtMost,
            }),
            Some(f) => Some(exact(decided[f - 1].0)),
        },
        Policy::Dp2 => match decided.iter().rposition(|&(_, d)| d == Decision::Below) {
            None => Some(Estimate {
                abw_bps: lowest,
                bound: Bound::AtMost,
            }),
            Some(l) if l == decided.len() - 1 => Some(Estimate {
                abw_bps: highest,
                bound: Bound::AtLeast,
            }),
            Some(l) => Some(exact(decided[l].0)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::*;

    /// Fig. 12(b): rates 1 and 3 below, 2 above, 4 and 5 above.
    /// DP1 picks rate 1 (the last before the first above); DP2 rate 3.
    #[test]
    fn dp1_and_dp2_on_fig_12b() {
        let rates = [5e9, 6e9, 7e9, 8e9, 9e9];
        let d = [
            Some(Below),
            Some(Above),
            Some(Below),
            Some(Above),
            Some(Above),
        ];
        let e1 = apply_policy(&rates, &d, Policy::Dp1).unwrap();
        let e2 = apply_policy(&rates, &d, Policy::Dp2).unwrap();
        assert_eq!((e1.abw_bps, e1.bound), (5e9, Bound::Exact));
        assert_eq!((e2.abw_bps, e2.bound), (7e9, Bound::Exact));
    }

    #[test]
    fn policies_at_the_edges() {
        let rates = [5e9, 6e9, 7e9];
        let all_below = [Some(Below); 3];
        let all_above = [Some(Above); 3];
        for p in [Policy::Dp1, Policy::Dp2] {
            let e = apply_policy(&rates, &all_below, p).unwrap();
            assert_eq!((e.abw_bps, e.bound), (7e9, Bound::AtLeast));
            let e = apply_policy(&rates, &all_above, p).unwrap();
            assert_eq!((e.abw_bps, e.bound), (5e9, Bound::AtMost));
            assert!(apply_policy(&rates, &[None; 3], p).is_none());
        }
        // An undecided rate is skipped: below, ?, above -> DP1 picks 5.
        let e = apply_policy(&rates, &[Some(Below), None, Some(Above)], Policy::Dp1).unwrap();
        assert_eq!(e.abw_bps, 5e9);
    }
}
