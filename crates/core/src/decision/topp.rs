//! TOPP, Trains of Packet Pairs (Melander, Björkman, Gunningberg,
//! GLOBECOM 2000; a rate-model method of \[HOST\] section 4 and \[BASS\]
//! section II), read on the sub-streams of a multi-rate stream: each
//! sub-stream is one offered rate `o` of the sweep.
//!
//! On a FIFO tight link of capacity `C` carrying cross traffic `X`, a
//! probe train offered at `o` leaves at `m = o` while `o <= A = C - X` and
//! at `m = o C / (o + X)` above it, so the ratio of offered to measured
//! rate is 1 up to the turning point and then a line,
//! `o / m = o / C + X / C`. A least-squares line through the points above
//! the turning point gives the tight link's capacity (`1 / slope`) and
//! the available bandwidth where the line meets `o / m = 1`:
//! `A = (1 - intercept) / slope`.
//!
//! Ours: `o / m` of a sub-stream is its smoothed receive time over its
//! send time (gaps after BASS's multi-pass spike
//! smoothing, before the window, so a coalescing receiver's batches do
//! not read as rate changes; a sub-stream stamped in a few receive
//! batches is read by the slope of its batches' lowest delays, or not at
//! all inside one or two: see `topp_points_with`); the turning point is the start of the
//! unbroken run of ratios above `1 + tolerance` at the fast end (as the
//! multi-rate rule's "consistently exceed"), less its slow points while
//! the line through the run meets 1 above the run's first rate (the
//! model's line passes through every point above the turning point, so
//! such a first point was over 1 by noise); the answer is kept between
//! the last rate below the turning point and the first above it (by
//! definition the turning point lies there; a line through two or three
//! noisy points can cross 1 elsewhere); with one point above, the
//! midpoint of those two rates; with none, at least the top rate.

use super::Bound;
use crate::stats::line_fit;
use crate::stream::{Gap, SubStream};

/// One offered rate of the sweep and what the path made of it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToppPoint {
    pub offered_bps: f64,
    /// Offered over measured rate (`o / m`, 1 when nothing queued).
    pub ratio: f64,
}

/// What TOPP read from one sweep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ToppEstimate {
    pub abw_bps: f64,
    pub bound: Bound,
    /// Tight-link capacity from the line's slope (two or more points above
    /// the turning point and a rising line), bit/s.
    pub capacity_bps: Option<f64>,
    /// Points at and above the turning point.
    pub points_above: usize,
}

/// Per sub-stream, from smoothed gaps (each carrying the index of the
/// packet it ends at): `o / m` as the gaps' receive time over their send
/// time (a gap across a lost packet spans the same packets both ways, so
/// loss does not count as a slower rate). Sub-streams with fewer than
/// `min_gaps` gaps left after smoothing give no point.
pub fn topp_points(gaps: &[Gap], subs: &[SubStream], min_gaps: usize) -> Vec<ToppPoint> {
    topp_points_with(gaps, subs, min_gaps, |_| SubStreamRatio::FromGaps)
}

/// How a sub-stream's `o / m` is read.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SubStreamRatio {
    /// From its smoothed gaps.
    FromGaps,
    /// Read another way (a sub-stream stamped in a few receive batches,
    /// whose gaps say little; see `analysis::few_batches_ratio`).
    Given(f64),
    /// Not at all: it gives no point (a sub-stream inside one or two
    /// receive batches).
    Unreadable,
}

/// [`topp_points`], with each sub-stream read as `ratio_of` says.
pub fn topp_points_with(
    gaps: &[Gap],
    subs: &[SubStream],
    min_gaps: usize,
    ratio_of: impl Fn(&SubStream) -> SubStreamRatio,
) -> Vec<ToppPoint> {
    let mut out = Vec::with_capacity(subs.len());
    let mut i = 0;
    for s in subs {
        // Gaps are in packet order: skip those before this sub-stream.
        while i < gaps.len() && (gaps[i].end_packet as usize) < s.start {
            i += 1;
        }
        let (mut n, mut send, mut recv) = (0, 0.0, 0.0);
        while i < gaps.len() && (gaps[i].end_packet as usize) < s.end {
            n += 1;
            send += gaps[i].send_ns;
            recv += gaps[i].recv_ns;
            i += 1;
        }
        let ratio = match ratio_of(s) {
            SubStreamRatio::Given(r) => r,
            SubStreamRatio::Unreadable => continue,
            SubStreamRatio::FromGaps if n < min_gaps.max(1) || send <= 0.0 => continue,
            SubStreamRatio::FromGaps => recv / send,
        };
        if ratio.is_finite() && s.rate_bps.is_finite() && s.rate_bps > 0.0 {
            out.push(ToppPoint {
                offered_bps: s.rate_bps,
                ratio,
            });
        }
    }
    out
}

/// TOPP over points in increasing offered rate; `None` without points.
pub fn topp(points: &[ToppPoint], tolerance: f64) -> Option<ToppEstimate> {
    let n = points.len();
    let last = points.last()?;
    let above = points
        .iter()
        .rev()
        .take_while(|p| p.ratio > 1.0 + tolerance)
        .count();
    let mut k = n - above;
    if above == 0 {
        return Some(ToppEstimate {
            abw_bps: last.offered_bps,
            bound: Bound::AtLeast,
            capacity_bps: None,
            points_above: 0,
        });
    }
    let fit = |k: usize| {
        (n - k >= 2)
            .then(|| line_fit(points[k..].iter().map(|p| (p.offered_bps, p.ratio))))
            .filter(|&(slope, _)| slope > 0.0)
    };
    let mut line = fit(k);
    // Above the turning point `o / m` is the line, so the line through
    // the run meets 1 at or below the run's first rate. Where it meets 1
    // above it, that first point lay over 1 + tolerance by noise, not a
    // queue (at 100 Gbit/s through receive batches ratios scatter by 1-2
    // %, and a run of five read "at most" the sweep's lowest rate with
    // the path 80 % free): it is left out of the run.
    while let Some((slope, intercept)) = line {
        if (1.0 - intercept) / slope <= points[k].offered_bps {
            break;
        }
        k += 1;
        line = fit(k);
    }
    let above = n - k;
    let first_above = points[k].offered_bps;
    let below = k.checked_sub(1).map(|j| points[j].offered_bps);
    let Some((slope, intercept)) = line else {
        return Some(match below {
            Some(b) => ToppEstimate {
                abw_bps: 0.5 * (b + first_above),
                bound: Bound::Exact,
                capacity_bps: None,
                points_above: above,
            },
            None => ToppEstimate {
                abw_bps: first_above,
                bound: Bound::AtMost,
                capacity_bps: None,
                points_above: above,
            },
        });
    };
    let capacity_bps = 1.0 / slope;
    let crossing = (1.0 - intercept) / slope;
    let (abw_bps, bound) = match below {
        Some(b) => (crossing.clamp(b, first_above), Bound::Exact),
        // Congested from the first rate on: the line's crossing below the
        // sweep is an extrapolation; it stands when positive.
        None if crossing > 0.0 && crossing < first_above => (crossing, Bound::Exact),
        None => (first_above, Bound::AtMost),
    };
    Some(ToppEstimate {
        abw_bps,
        bound,
        capacity_bps: Some(capacity_bps),
        points_above: above,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The fluid model: `o / m = 1` up to `C - X`, then `(o + X) / C`
    /// (BART's tests use it too).
    pub(crate) fn fluid(c: f64, x: f64, rates: &[f64]) -> Vec<ToppPoint> {
        rates
            .iter()
            .map(|&o| ToppPoint {
                offered_bps: o,
                ratio: if o <= c - x { 1.0 } else { (o + x) / c },
            })
            .collect()
    }

    /// 10 Gbit/s with 4 Gbit/s of cross traffic, sweep 4-8 Gbit/s: the
    /// points above 6 Gbit/s are 7 -> 11/10, 8 -> 12/10: slope 1/10 G,
    /// intercept 0.4: capacity 10 G, crossing (1 - 0.4) x 10 G = 6 G.
    #[test]
    fn a_fluid_path_by_hand() {
        let p = fluid(10e9, 4e9, &[4e9, 5e9, 6e9, 7e9, 8e9]);
        assert_eq!(p[2].ratio, 1.0);
        assert!((p[4].ratio - 1.2).abs() < 1e-12);
        let e = topp(&p, 0.005).unwrap();
        assert_eq!((e.bound, e.points_above), (Bound::Exact, 2));
        assert!((e.abw_bps / 6e9 - 1.0).abs() < 1e-9, "{e:?}");
        assert!((e.capacity_bps.unwrap() / 10e9 - 1.0).abs() < 1e-9, "{e:?}");
    }

    /// Nothing queued: at least the top rate. Everything queued on a
    /// 10 G link with 7 G of cross traffic, sweep 4-8 G: the line still
    /// meets 1 at 3 G, below the sweep. One point above: the midpoint.
    #[test]
    fn outside_the_sweep_and_one_point_above() {
        let idle = fluid(10e9, 0.0, &[4e9, 6e9, 8e9]);
        let e = topp(&idle, 0.005).unwrap();
        assert_eq!((e.abw_bps, e.bound), (8e9, Bound::AtLeast));
        let busy = fluid(10e9, 7e9, &[4e9, 6e9, 8e9]);
        let e = topp(&busy, 0.005).unwrap();
        assert_eq!(e.bound, Bound::Exact);
        assert!((e.abw_bps / 3e9 - 1.0).abs() < 1e-9, "{e:?}");
        let one = fluid(10e9, 2.5e9, &[4e9, 6e9, 8e9]);
        let e = topp(&one, 0.005).unwrap();
        assert_eq!(
            (e.abw_bps, e.bound, e.capacity_bps),
            (7e9, Bound::Exact, None)
        );
        assert_eq!(topp(&[], 0.005), None);
    }

    /// The answer is held to the turning point's bracket [4 G, 6 G]:
    /// points (6 G, 1.01) and (8 G, 1.05) meet 1 at 5.5 G, inside it;
    /// (6 G, 1.10) and (8 G, 1.11) at -14 G: 4 G.
    #[test]
    fn the_answer_stays_in_the_turning_points_bracket() {
        let pts = |a: f64, b: f64| {
            vec![
                ToppPoint {
                    offered_bps: 4e9,
                    ratio: 1.0,
                },
                ToppPoint {
                    offered_bps: 6e9,
                    ratio: a,
                },
                ToppPoint {
                    offered_bps: 8e9,
                    ratio: b,
                },
            ]
        };
        let e = topp(&pts(1.01, 1.05), 0.005).unwrap();
        assert!((e.abw_bps / 5.5e9 - 1.0).abs() < 1e-9, "{e:?}");
        let e = topp(&pts(1.10, 1.11), 0.005).unwrap();
        assert_eq!(e.abw_bps, 4e9);
    }

    /// A 100 Gbit/s sweep read through receive batches (a simulator
    /// stream, 80 % free): every ratio over 1.005, so the run was all
    /// five and its line, through (10 G, 1.012) ... (90 G, 1.1292),
    /// meets 1 at 14.5 G, above the run's first rate: "at most 10 G".
    /// Left out from the slow end while that holds: from 30 G it meets 1
    /// at 30.1 G, from 50 G at 51.7 G, from 70 G at
    /// 70 - 0.0085 / (0.1207 / 20 G) = 68.59 G, inside [50 G, 70 G].
    #[test]
    fn a_run_whose_line_meets_one_above_its_first_rate_starts_later() {
        let p = |g: f64, ratio: f64| ToppPoint {
            offered_bps: g * 1e9,
            ratio,
        };
        let sweep = [
            p(10.0, 1.0120),
            p(30.0, 1.0261),
            p(50.0, 1.0166),
            p(70.0, 1.0085),
            p(90.0, 1.1292),
        ];
        let e = topp(&sweep, 0.005).unwrap();
        assert_eq!((e.bound, e.points_above), (Bound::Exact, 2));
        let want = 70e9 - 0.0085 / (0.1207 / 20e9);
        assert!((e.abw_bps / want - 1.0).abs() < 1e-9, "{e:?}");
        // Run 60-80 G (1.01, 1.006, 1.09): slope 0.004 per G, the line is
        // 0.99533 at 60 G and meets 1 at 61.17 G. From 70 G: 70 - 0.006 /
        // 0.0084 = 69.29 G. A line through two points meets 1 below the
        // first (it passes through it), so two are never cut to one.
        let e = topp(
            &[p(50.0, 1.0), p(60.0, 1.01), p(70.0, 1.006), p(80.0, 1.09)],
            0.005,
        );
        let e = e.unwrap();
        let want = 70e9 - 0.006 / (0.084 / 10e9);
        assert_eq!((e.bound, e.points_above), (Bound::Exact, 2));
        assert!((e.abw_bps / want - 1.0).abs() < 1e-9, "{e:?}");
    }

    /// Gaps of two sub-streams (packets 0-3 at 1000 ns, 4-7 at 500 ns):
    /// the first received at its send gaps, the second at 750 ns per gap:
    /// ratios 1 and 1.5.
    #[test]
    fn points_from_gaps_by_hand() {
        let gap = |end: u32, send: f64, recv: f64| Gap {
            send_ns: send,
            recv_ns: recv,
            sent_bytes: 1000.0,
            recv_bytes: 1000.0,
            end_packet: end,
        };
        let gaps: Vec<Gap> = (1..8)
            .map(|e| {
                if e < 4 {
                    gap(e, 1000.0, 1000.0)
                } else {
                    gap(e, 500.0, 750.0)
                }
            })
            .collect();
        let subs = [
            SubStream {
                start: 0,
                end: 4,
                rate_bps: 8e9,
            },
            SubStream {
                start: 4,
                end: 8,
                rate_bps: 16e9,
            },
        ];
        let p = topp_points(&gaps, &subs, 2);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].offered_bps, p[0].ratio), (8e9, 1.0));
        assert_eq!((p[1].offered_bps, p[1].ratio), (16e9, 1.5));
        // Too few gaps: no point.
        assert_eq!(topp_points(&gaps, &subs, 4).len(), 1);
    }

    proptest! {
        /// On any fluid path whose turning point lies inside a sweep
        /// with two rates above it, TOPP reads the available bandwidth
        /// and the capacity exactly.
        #[test]
        fn fluid_paths_are_read_exactly(c in 1e9f64..100e9, load in 0.05f64..0.9, n in 5usize..12) {
            let x = c * load;
            let a = c - x;
            let rates: Vec<f64> = (0..n).map(|i| a * (0.5 + 1.2 * i as f64 / (n - 1) as f64)).collect();
            let p = fluid(c, x, &rates);
            prop_assume!(p.iter().filter(|q| q.ratio > 1.005).count() >= 2);
            prop_assume!(p[0].ratio == 1.0);
            // A point within the tolerance above 1 reads as uncongested.
            prop_assume!(p.iter().all(|q| q.ratio == 1.0 || q.ratio > 1.005));
            let e = topp(&p, 0.005).unwrap();
            prop_assert_eq!(e.bound, Bound::Exact);
            prop_assert!((e.abw_bps / a - 1.0).abs() < 1e-6, "{:?} vs {}", e, a);
            prop_assert!((e.capacity_bps.unwrap() / c - 1.0).abs() < 1e-6);
        }
    }
}
