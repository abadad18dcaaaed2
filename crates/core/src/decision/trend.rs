//! Pathload's one-way-delay trend test (\[IMR\], section 3;
//! Pathload 1.3.2): the pairwise comparison test (PCT) and pairwise
//! difference test (PDT), its removal of back-to-back (coalesced) packets,
//! and its median-based sampling.
//!
//! Constants are Pathload 1.3.2's (`pathload_rcv.h`): PCT threshold 0.55 and
//! PDT threshold 0.4, each with a grey band of +-10 % around it; a receive
//! gap below MIN_TIME_INTERVAL = 7 us is back-to-back; coalescence is
//! declared when more than 60 % of gaps are back-to-back, and then only the
//! last packet of each burst of at least 3 back-to-back gaps is kept; without
//! coalescence a stream needs more than 36 packets after removing
//! back-to-back ones and is sampled as medians of groups of floor(sqrt n);
//! a metric needs at least 5 values; a loss rate of 15 % or more aborts the
//! fleet, which Pathload then treats as a rate above the available bandwidth.
//!
//! One change for 10 Gbit/s: the 7 us back-to-back limit is capped at half
//! the stream's send gap, since at 10 Gbit/s a 9000-byte packet already takes
//! 7.2 us on the wire and link-rate spacing must not look coalesced.
//! PCT divides by `n - 1` as in \[IMR\]'s equation (1) (Pathload's code
//! divides by `n`).

use super::Decision;
use crate::stream::ProbeStream;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathloadParams {
    pub pct_threshold: f64,
    pub pdt_threshold: f64,
    /// Grey band around each threshold, relative (0.1 = +-10 %).
    pub grey_band: f64,
    pub b2b_gap_ns: f64,
    /// Cap on the back-to-back limit as a fraction of the mean send gap.
    pub b2b_max_send_gap_fraction: f64,
    /// Share of back-to-back gaps above which coalescence is declared.
    pub coalescence_share: f64,
    /// Back-to-back gaps that make a coalescence burst.
    pub min_burst_gaps: usize,
    /// Pathload asks for a longer stream when it sees this many bursts or
    /// fewer; a recorded stream cannot be lengthened, so it is ambiguous.
    pub max_too_few_bursts: usize,
    /// Without coalescence, packets needed after removing back-to-back ones
    /// (more than this many).
    pub min_stream_len: usize,
    /// Values a PCT/PDT metric needs.
    pub min_metric_len: usize,
    pub high_loss: f64,
}

impl Default for PathloadParams {
    fn default() -> Self {
        PathloadParams {
            pct_threshold: 0.55,
            pdt_threshold: 0.4,
            grey_band: 0.1,
            b2b_gap_ns: 7_000.0,
            b2b_max_send_gap_fraction: 0.5,
            coalescence_share: 0.6,
            min_burst_gaps: 3,
            max_too_few_bursts: 5,
            min_stream_len: 36,
            min_metric_len: 5,
            high_loss: 0.15,
        }
    }
}

/// Trend of one metric or of a stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trend {
    Increasing,
    NoTrend,
    Unclear,
}

/// PCT: the share of consecutive pairs that increase, `1/(n-1) sum I(x_j > x_(j-1))`.
pub fn pct(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let up = x.windows(2).filter(|w| w[1] > w[0]).count();
    Some(up as f64 / (x.len() - 1) as f64)
}

/// PDT: `(x_n - x_1) / sum |x_j - x_(j-1)|`, 0 for a flat series.
pub fn pdt(x: &[f64]) -> Option<f64> {
    if x.len() < 2 {
        return None;
    }
    let total: f64 = x.windows(2).map(|w| (w[1] - w[0]).abs()).sum();
    if total > 0.0 && total.is_finite() {
        Some((x[x.len() - 1] - x[0]) / total)
    } else {
        Some(0.0)
    }
}

fn classify_metric(value: f64, threshold: f64, band: f64) -> Trend {
    if value > threshold * (1.0 + band) {
        Trend::Increasing
    } else if value < threshold * (1.0 - band) {
        Trend::NoTrend
    } else {
        Trend::Unclear
    }
}

/// Pathload's combination: both agree, or one is unclear and the other
/// decides; a conflict or two unclear metrics give an unclear stream.
pub fn combine(pct_trend: Trend, pdt_trend: Trend) -> Trend {
    use Trend::*;
    match (pct_trend, pdt_trend) {
        (Increasing, Increasing) | (Increasing, Unclear) | (Unclear, Increasing) => Increasing,
        (NoTrend, NoTrend) | (NoTrend, Unclear) | (Unclear, NoTrend) => NoTrend,
        _ => Unclear,
    }
}

/// What a trend test saw.
#[derive(Debug, Clone, PartialEq)]
pub struct TrendOutcome {
    pub decision: Decision,
    pub pct: Option<f64>,
    pub pdt: Option<f64>,
    /// Values the metrics were computed on.
    pub values: usize,
    pub coalescence: bool,
    /// Why the test could not decide, when it could not.
    pub reason: Option<&'static str>,
}

impl TrendOutcome {
    fn undecided(reason: &'static str, values: usize, coalescence: bool) -> Self {
        TrendOutcome {
            decision: Decision::Ambiguous,
            pct: None,
            pdt: None,
            values,
            coalescence,
            reason: Some(reason),
        }
    }
}

/// PCT and PDT on a series, classified with Pathload's thresholds.
pub fn trend_of_series(x: &[f64], params: &PathloadParams) -> TrendOutcome {
    if x.len() < params.min_metric_len {
        return TrendOutcome::undecided(
            "too few values for PCT/PDT (Pathload needs 5)",
            x.len(),
            false,
        );
    }
    let (Some(c), Some(d)) = (pct(x), pdt(x)) else {
        return TrendOutcome::undecided("too few values for PCT/PDT", x.len(), false);
    };
    let t = combine(
        classify_metric(c, params.pct_threshold, params.grey_band),
        classify_metric(d, params.pdt_threshold, params.grey_band),
    );
    TrendOutcome {
        decision: match t {
            Trend::Increasing => Decision::Above,
            Trend::NoTrend => Decision::Below,
            Trend::Unclear => Decision::Ambiguous,
        },
        pct: Some(c),
        pdt: Some(d),
        values: x.len(),
        coalescence: false,
        reason: (t == Trend::Unclear).then_some("PCT and PDT do not agree on a trend"),
    }
}

/// Medians of consecutive groups of `floor(sqrt n)` values (the last group
/// takes what is left), Pathload's median-based sampling.
pub fn median_sample(x: &[f64]) -> Vec<f64> {
    let group = ((x.len() as f64).sqrt().floor() as usize).max(1);
    x.chunks(group)
        .map(|c| {
            let mut v = c.to_vec();
            v.sort_by(f64::total_cmp);
            let m = v.len() / 2;
            if v.len() % 2 == 0 {
                (v[m - 1] + v[m]) / 2.0
            } else {
                v[m]
            }
        })
        .collect()
}

/// Pathload's per-stream trend test on a probe stream.
pub fn pathload_trend(stream: &ProbeStream, params: &PathloadParams) -> TrendOutcome {
    if stream.len() >= 2 && stream.loss_fraction() >= params.high_loss {
        return TrendOutcome {
            decision: Decision::Above,
            pct: None,
            pdt: None,
            values: 0,
            coalescence: false,
            reason: Some(
                "loss >= 15 %: Pathload aborts the fleet as above the available bandwidth",
            ),
        };
    }
    let owd = stream.relative_owds();
    if owd.len() < 2 {
        return TrendOutcome::undecided("fewer than two packets received", owd.len(), false);
    }
    let send_gaps = stream.send_gaps_ns();
    let mean_send = send_gaps.iter().sum::<f64>() / send_gaps.len().max(1) as f64;
    let b2b_limit = params
        .b2b_gap_ns
        .min(params.b2b_max_send_gap_fraction * mean_send.abs());
    // Receive gap after each received packet (to the next received one).
    let recv_gap_after: Vec<f64> = owd
        .windows(2)
        .map(|w| {
            let a = stream.packets[w[0].0].recv_ns.unwrap_or(0);
            let b = stream.packets[w[1].0].recv_ns.unwrap_or(0);
            crate::stream::diff_ns(b, a)
        })
        .collect();
    let b2b = recv_gap_after.iter().filter(|&&g| g < b2b_limit).count();
    let coalescence = b2b as f64 > params.coalescence_share * owd.len() as f64;
    if coalescence {
        // Keep the last packet of each burst of >= min_burst_gaps b2b gaps.
        let mut kept = Vec::new();
        let mut run = 0usize;
        let mut bursts = 0usize;
        for (i, &g) in recv_gap_after.iter().enumerate() {
            if g < b2b_limit {
                run += 1;
            } else {
                if run >= params.min_burst_gaps {
                    kept.push(owd[i].1);
                    bursts += 1;
                }
                run = 0;
            }
        }
        if run >= params.min_burst_gaps {
            kept.push(owd[owd.len() - 1].1);
            bursts += 1;
        }
        if bursts <= params.max_too_few_bursts {
            return TrendOutcome::undecided(
                "coalescence with too few bursts: Pathload would ask for a longer stream",
                kept.len(),
                true,
            );
        }
        let mut t = trend_of_series(&kept, params);
        t.coalescence = true;
        t
    } else {
        // Drop packets followed by a back-to-back arrival; the last stays.
        let mut kept: Vec<f64> = owd
            .iter()
            .zip(&recv_gap_after)
            .filter(|(_, &g)| g >= b2b_limit)
            .map(|(o, _)| o.1)
            .collect();
        kept.push(owd[owd.len() - 1].1);
        if kept.len() <= params.min_stream_len {
            return TrendOutcome::undecided(
                "too short for Pathload: 36 packets or fewer after removing back-to-back ones",
                kept.len(),
                false,
            );
        }
        trend_of_series(&median_sample(&kept), params)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pct_pdt_on_monotone_flat_and_sawtooth() {
        let up: Vec<f64> = (0..10).map(|i| i as f64).collect();
        assert_eq!(pct(&up), Some(1.0));
        assert_eq!(pdt(&up), Some(1.0));
        let flat = [3.0; 10];
        assert_eq!(pct(&flat), Some(0.0));
        assert_eq!(pdt(&flat), Some(0.0));
        // Saw-tooth 0,5,0,5,0,5,0: 3 rises of 6 pairs; net 0 over total 30.
        let saw = [0.0, 5.0, 0.0, 5.0, 0.0, 5.0, 0.0];
        assert_eq!(pct(&saw), Some(0.5));
        assert_eq!(pdt(&saw), Some(0.0));
        // Rising saw-tooth 0,3,1,4,2,5,3: rises 3 of 6; net 3 over 3+2+3+2+3+2 = 15.
        let rising = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0, 3.0];
        assert_eq!(pct(&rising), Some(0.5));
        assert_eq!(pdt(&rising), Some(0.2));
    }

    #[test]
    fn pathload_thresholds_and_grey_band() {
        let p = PathloadParams::default();
        let up: Vec<f64> = (0..10).map(|i| i as f64).collect();
        assert_eq!(trend_of_series(&up, &p).decision, Decision::Above);
        assert_eq!(trend_of_series(&[3.0; 10], &p).decision, Decision::Below);
        // Saw-tooth: PCT 0.5 in the grey band (0.495..0.605), PDT 0 NoTrend
        // => NoTrend (unclear + no-trend).
        let saw = [0.0, 5.0, 0.0, 5.0, 0.0, 5.0, 0.0];
        assert_eq!(trend_of_series(&saw, &p).decision, Decision::Below);
        // Rising saw-tooth: PCT 0.5 unclear, PDT 0.2 no trend => below, the
        // failure mode [IMR] shows for coalesced delays.
        let rising = [0.0, 3.0, 1.0, 4.0, 2.0, 5.0, 3.0];
        assert_eq!(trend_of_series(&rising, &p).decision, Decision::Below);
        assert_eq!(combine(Trend::Increasing, Trend::NoTrend), Trend::Unclear);
        assert_eq!(combine(Trend::Unclear, Trend::Unclear), Trend::Unclear);
        assert_eq!(trend_of_series(&up[..4], &p).decision, Decision::Ambiguous);
    }

    #[test]
    fn median_sampling_by_hand() {
        // 10 values, groups of 3: [1,9,2] [8,3,7] [4,6,5] [10] -> 2, 7, 5, 10.
        let x = [1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 5.0, 10.0];
        assert_eq!(median_sample(&x), vec![2.0, 7.0, 5.0, 10.0]);
    }
}
