//! The experiments of \[BASS\]'s evaluation (sections V-VI), run on
//! the packet-level simulator: single-rate decision error vs stream length
//! (Fig. 6, 8, 11), multi-rate error distributions (Fig. 14, 15), the
//! Range / packets-per-rate sensitivity (Fig. 16), pathChirp's chirps on
//! the same paths, and the closed-loop strategies. Every cell is a set of independent work units (one simulated
//! path each, seeded from the cell and unit index), run in parallel; the
//! results do not depend on the number of threads.

use rayon::prelude::*;
use tightlink_core::decision::multirate::Consistency;
use tightlink_core::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
use tightlink_core::{analyze, AnalysisParams, Analyzer, Bound, Decision, Method, StreamKind};
use tightlink_sim::{parse_sim_target, PathSpec, SimPath};

/// Probe packet size of every experiment, bytes (the paper's jumbo frames).
pub const SIZE_BYTES: u32 = 9000;
/// Streams simulated per work unit (one path, its queues warmed up once).
const STREAMS_PER_UNIT: usize = 20;

/// A simulated path the experiments run on.
#[derive(Debug, Clone)]
pub struct PathCase {
    pub name: &'static str,
    pub target: &'static str,
    /// Stream lengths are multiplied by this (at 100 Gbit/s a 64-packet
    /// stream lasts 46 us, a third of one coalescence interval).
    pub length_scale: usize,
}

/// The four 10 Gbit/s paths of Fig. 6/8/11: bursty or smoothed cross
/// traffic (2.5 Gbit/s mean), with and without 125 us coalescence.
pub const TEN_GIG: [PathCase; 4] = [
    PathCase {
        name: "bursty, 125 us coalescence",
        target: "sim:cross=bursty:2.5G,coalescence=125us",
        length_scale: 1,
    },
    PathCase {
        name: "smoothed, 125 us coalescence",
        target: "sim:cross=smoothed:2.5G,coalescence=125us",
        length_scale: 1,
    },
    PathCase {
        name: "bursty, no coalescence",
        target: "sim:cross=bursty:2.5G,coalescence=off",
        length_scale: 1,
    },
    PathCase {
        name: "smoothed, no coalescence",
        target: "sim:cross=smoothed:2.5G,coalescence=off",
        length_scale: 1,
    },
];

/// 100 Gbit/s: the same load scaled (25 Gbit/s bursty), 125 us coalescence,
/// streams 10 times longer so they last as long as at 10 Gbit/s.
pub const HUNDRED_GIG: PathCase = PathCase {
    name: "100G, bursty 25G, 125 us coalescence",
    target: "sim:hops=100G+100G,cross=bursty:25G,coalescence=125us",
    length_scale: 10,
};

/// 100 Gbit/s with the load smoothed (S-CT scaled to 25 Gbit/s).
pub const HUNDRED_GIG_SMOOTHED: PathCase = PathCase {
    name: "100G, smoothed 25G, 125 us coalescence",
    target: "sim:hops=100G+100G,cross=smoothed:25G,coalescence=125us",
    length_scale: 10,
};

/// The bursty 10 Gbit/s path with 1 % of the probe packets lost at random
/// (a lossy link: the loss says nothing about the available bandwidth).
pub const LOSSY: PathCase = PathCase {
    name: "bursty, 125 us coalescence, 1 % random loss",
    target: "sim:cross=bursty:2.5G,coalescence=125us,loss=1%",
    length_scale: 1,
};

/// 100 Gbit/s without coalescence: where chirps can be read at all.
pub const HUNDRED_GIG_UNCOALESCED: PathCase = PathCase {
    name: "100G, bursty 25G, no coalescence",
    target: "sim:hops=100G+100G,cross=bursty:25G,coalescence=off",
    length_scale: 10,
};

/// Single-rate stream lengths of the decision tables at 10 Gbit/s.
pub const LENGTHS: [usize; 4] = [32, 64, 128, 320];

/// The decision tables' stream lengths on `case`: [`LENGTHS`] scaled, and
/// at 100 Gbit/s also 64 packets, a stream that lasts 46 us and so
/// arrives inside one or two 125 us receive batches (the length a
/// 10 Gbit/s tool would send).
pub fn decision_lengths(case: &PathCase) -> Vec<usize> {
    let scaled = LENGTHS.iter().map(|l| l * case.length_scale);
    if case.length_scale > 1 {
        std::iter::once(64).chain(scaled).collect()
    } else {
        scaled.collect()
    }
}

/// The same 2.5 Gbit/s ON/OFF mean at other burst time scales: more,
/// slower sources, or shorter ON periods (the paper's B-CT is web traffic
/// from 10 host pairs; how bursty it is below 10 ms is not given).
pub const LOAD_SCALES: [PathCase; 4] = [
    PathCase {
        name: "10 sources x 1 Gbit/s peak, ON 500 us (default)",
        target: "sim:cross=bursty:2.5G,coalescence=125us",
        length_scale: 1,
    },
    PathCase {
        name: "10 sources x 1 Gbit/s peak, ON 100 us",
        target: "sim:cross=bursty:2.5G:on=100us,coalescence=125us",
        length_scale: 1,
    },
    PathCase {
        name: "40 sources x 250 Mbit/s peak, ON 500 us",
        target: "sim:cross=bursty:2.5G:sources=40,coalescence=125us",
        length_scale: 1,
    },
    PathCase {
        name: "40 sources x 250 Mbit/s peak, ON 100 us",
        target: "sim:cross=bursty:2.5G:sources=40:on=100us,coalescence=125us",
        length_scale: 1,
    },
];

/// How many streams per cell.
#[derive(Debug, Clone, Copy)]
pub struct Scale {
    pub single_streams: usize,
    pub multi_streams: usize,
    pub sensitivity_streams: usize,
    pub strategy_seeds: u64,
    pub hundred_gig_streams: usize,
    /// Simulated seconds per rate-control flow.
    pub cc_seconds: f64,
    /// Simulated seconds per TCPW flow alone, and per pair.
    pub tcpw_seconds: f64,
    pub tcpw_pair_seconds: f64,
}

impl Scale {
    pub fn quick() -> Self {
        Scale {
            single_streams: 400,
            multi_streams: 400,
            sensitivity_streams: 200,
            strategy_seeds: 6,
            hundred_gig_streams: 100,
            cc_seconds: 3.0,
            tcpw_seconds: 5.0,
            tcpw_pair_seconds: 20.0,
        }
    }
    pub fn full() -> Self {
        Scale {
            single_streams: 2000,
            multi_streams: 2000,
            sensitivity_streams: 1000,
            strategy_seeds: 20,
            hundred_gig_streams: 400,
            cc_seconds: 10.0,
            tcpw_seconds: 60.0,
            tcpw_pair_seconds: 120.0,
        }
    }
}

pub(crate) fn spec_for(target: &str, seed: u64) -> PathSpec {
    let mut spec = parse_sim_target(target).expect("experiment targets are valid");
    spec.seed = seed;
    spec
}

/// A seed from the cell's label and the unit index (FNV-1a, stable).
pub(crate) fn unit_seed(base: u64, label: &str, unit: usize) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ base;
    for b in label.bytes().chain(unit.to_le_bytes()) {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A stream the simulator delivered, with its truth and what was asked.
pub struct Sample {
    pub stream: tightlink_core::ProbeStream,
    pub truth_bps: f64,
    /// Single-rate: the probing rate; multi-rate: the centre of the rates.
    pub rate_bps: f64,
    /// Multi-rate: each sub-stream's own truth (its time at the tight
    /// link); empty where not asked or a sub-stream had none.
    pub part_truths_bps: Vec<f64>,
}

/// Simulates `n` streams on `target`; `schedule(u)` gives the send times
/// and the rate for a uniform draw `u` in [0, 1). With `part_len` > 0 each
/// run of that many packets gets its own truth too.
pub(crate) fn simulate<F>(
    base_seed: u64,
    label: &str,
    target: &str,
    n: usize,
    part_len: usize,
    schedule: F,
) -> Vec<Sample>
where
    F: Fn(f64) -> (Vec<i64>, f64) + Sync,
{
    let units = n.div_ceil(STREAMS_PER_UNIT);
    let per_unit: Vec<Vec<Sample>> = (0..units)
        .into_par_iter()
        .map(|u| {
            let seed = unit_seed(base_seed, label, u);
            let mut path = SimPath::new(spec_for(target, seed));
            let mut draw = tightlink_core::rng::Rng::new(seed ^ 0x5eed);
            let count = STREAMS_PER_UNIT.min(n - u * STREAMS_PER_UNIT);
            (0..count)
                .filter_map(|i| {
                    let (sched, rate_bps) = schedule(draw.unit());
                    let offsets: Vec<i64> = sched.iter().map(|t| t - sched[0]).collect();
                    let sizes = vec![SIZE_BYTES; offsets.len()];
                    let part_starts: Vec<usize> = if part_len > 0 {
                        (0..offsets.len()).step_by(part_len).collect()
                    } else {
                        Vec::new()
                    };
                    let s = path.send_stream_in_parts(i as u64, &offsets, &sizes, &part_starts);
                    let truth_bps = s.truth?.available_bps;
                    Some(Sample {
                        stream: s.stream,
                        truth_bps,
                        rate_bps,
                        part_truths_bps: s
                            .part_truths_bps
                            .into_iter()
                            .collect::<Option<_>>()
                            .unwrap_or_default(),
                    })
                })
                .collect()
        })
        .collect();
    per_unit.into_iter().flatten().collect()
}

/// Decision error of one method in one cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DecisionCell {
    pub method: Method,
    pub length: usize,
    /// Wrong decisions over all streams (ambiguous ones are not wrong).
    pub wrong: f64,
    pub ambiguous: f64,
    pub streams: usize,
}

/// Fig. 6/8/11: single-rate streams at rates drawn uniformly over 0.67 to
/// 1.2 times the path's nominal available bandwidth (5-9 Gbit/s at 10G),
/// `lengths` packets long (as given: not scaled).
pub fn decision_error(
    base_seed: u64,
    case: &PathCase,
    n: usize,
    lengths: &[usize],
) -> Vec<DecisionCell> {
    let spec = parse_sim_target(case.target).expect("valid");
    let nominal = spec.nominal_available_bps();
    let params = AnalysisParams::default();
    let mut out = Vec::new();
    for &len in lengths {
        let label = format!("single/{}/{len}", case.target);
        let samples = simulate(base_seed, &label, case.target, n, 0, |u| {
            let r = nominal * (0.67 + 0.53 * u);
            (single_rate_schedule(r, len, SIZE_BYTES, 0), r)
        });
        for m in Method::SINGLE_RATE {
            let (mut wrong, mut ambiguous) = (0usize, 0usize);
            for s in &samples {
                let want = if s.rate_bps > s.truth_bps {
                    Decision::Above
                } else {
                    Decision::Below
                };
                match analyze(&s.stream, StreamKind::SingleRate, m, &params).decision {
                    Some(Decision::Ambiguous) | None => ambiguous += 1,
                    Some(d) if d != want => wrong += 1,
                    Some(_) => {}
                }
            }
            let k = samples.len().max(1) as f64;
            out.push(DecisionCell {
                method: m,
                length: len,
                wrong: wrong as f64 / k,
                ambiguous: ambiguous as f64 / k,
                streams: samples.len(),
            });
        }
    }
    out
}

/// A multi-rate estimator variant: a method and its consistency rule.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Variant {
    pub label: &'static str,
    pub method: Method,
    pub consistency: Consistency,
    /// Given the tight link's capacity (the others are read without it).
    pub capacity_given: bool,
}

/// Fig. 14/15: single pass, multi-pass (with each consistency rule), DP1,
/// DP2; TOPP; and multirate and the queue fit given the tight link's
/// capacity, on the same streams.
pub const VARIANTS: [Variant; 9] = [
    Variant {
        label: "multirate-single-pass",
        method: Method::MultirateSinglePass,
        consistency: Consistency::Bracket,
        capacity_given: false,
    },
    Variant {
        label: "multirate (multi-pass)",
        method: Method::Multirate,
        consistency: Consistency::Bracket,
        capacity_given: false,
    },
    Variant {
        label: "multirate every-gap",
        method: Method::Multirate,
        consistency: Consistency::EveryGap,
        capacity_given: false,
    },
    Variant {
        label: "multirate cumulative",
        method: Method::Multirate,
        consistency: Consistency::Cumulative,
        capacity_given: false,
    },
    Variant {
        label: "multirate-prcmt-dp1",
        method: Method::MultiratePrcmtDp1,
        consistency: Consistency::Bracket,
        capacity_given: false,
    },
    Variant {
        label: "multirate-prcmt-dp2",
        method: Method::MultiratePrcmtDp2,
        consistency: Consistency::Bracket,
        capacity_given: false,
    },
    Variant {
        label: "topp",
        method: Method::Topp,
        consistency: Consistency::Bracket,
        capacity_given: false,
    },
    Variant {
        label: "multirate (capacity given)",
        method: Method::Multirate,
        consistency: Consistency::Bracket,
        capacity_given: true,
    },
    Variant {
        label: "queue-fit (capacity given)",
        method: Method::QueueFit,
        consistency: Consistency::Bracket,
        capacity_given: true,
    },
];

/// Analysis parameters with the tight link's capacity of `target` (the
/// queue fit needs it; multirate meets the queue fit halfway with it, so
/// its rows are read without it unless they say so).
pub(crate) fn params_for(target: &str) -> AnalysisParams {
    AnalysisParams {
        capacity_bps: Some(
            parse_sim_target(target)
                .expect("valid")
                .tight_capacity_bps(),
        ),
        ..AnalysisParams::default()
    }
}

/// Relative errors of one variant's exact estimates, sorted.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorDist {
    pub label: String,
    /// Sorted relative errors of the exact estimates.
    pub errors: Vec<f64>,
    pub streams: usize,
    /// Streams answered with a bound on the wrong side of their own truth
    /// (at least a rate 10 % above it, at most one 10 % below it); `None`
    /// where not counted.
    pub wrong_bounds: Option<usize>,
}

impl ErrorDist {
    /// Share of all streams with an exact estimate within +-`tol`.
    pub fn within(&self, tol: f64) -> f64 {
        let k = self.errors.iter().filter(|e| e.abs() <= tol).count();
        k as f64 / self.streams.max(1) as f64
    }
    pub fn answered(&self) -> f64 {
        self.errors.len() as f64 / self.streams.max(1) as f64
    }
    /// The `f` quantile of the exact estimates' errors (NaN when none).
    pub fn quantile(&self, f: f64) -> f64 {
        tightlink_core::stats::quantile_sorted(&self.errors, f).unwrap_or(f64::NAN)
    }
}

pub(crate) fn multi_samples(
    base_seed: u64,
    target: &str,
    n: usize,
    range: f64,
    per_rate: usize,
) -> Vec<Sample> {
    let nominal = parse_sim_target(target)
        .expect("valid")
        .nominal_available_bps();
    let label = format!("multi/{target}/{range}/{per_rate}");
    simulate(base_seed, &label, target, n, per_rate, |u| {
        // Centres within +-20 % of the nominal available bandwidth, as a
        // strategy's re-centred streams would be.
        let centre = nominal * (0.8 + 0.4 * u);
        let rates = rates_around(centre, range, 5);
        (multi_rate_schedule(&rates, per_rate, SIZE_BYTES), centre)
    })
}

/// `method`'s answers to `samples`: the exact estimates' sorted relative
/// errors, and the bounds on the wrong side of their stream's truth.
fn dist_of(
    samples: &[Sample],
    method: Method,
    params: &AnalysisParams,
    label: String,
) -> ErrorDist {
    let mut wrong = 0;
    let mut analyzer = Analyzer::new();
    let mut errs: Vec<f64> = samples
        .iter()
        .filter_map(|s| {
            let a = analyzer.analyze(&s.stream, StreamKind::MultiRate, method, params);
            let e = a.abw_bps?;
            match a.bound {
                Bound::Exact => return Some((e - s.truth_bps) / s.truth_bps),
                Bound::AtLeast if s.truth_bps < 0.9 * e => wrong += 1,
                Bound::AtMost if s.truth_bps > 1.1 * e => wrong += 1,
                _ => {}
            }
            None
        })
        .collect();
    errs.sort_by(f64::total_cmp);
    ErrorDist {
        label,
        errors: errs,
        streams: samples.len(),
        wrong_bounds: Some(wrong),
    }
}

/// Fig. 14/15 on one path: 5 rates x 64 packets, Range 30 %.
pub fn multirate_errors(base_seed: u64, case: &PathCase, n: usize) -> Vec<ErrorDist> {
    let samples = multi_samples(base_seed, case.target, n, 0.3, 64 * case.length_scale);
    VARIANTS
        .iter()
        .map(|v| {
            let given = params_for(case.target);
            let params = AnalysisParams {
                consistency: v.consistency,
                capacity_bps: given.capacity_bps.filter(|_| v.capacity_given),
                ..given
            };
            dist_of(&samples, v.method, &params, v.label.to_string())
        })
        .collect()
}

/// Multi-pass smoothing (\[BASS\] VI-B) with the spike thresholds shrunk
/// by `threshold_decay` per pass after the first (1 = the same thresholds
/// every pass), on one path's 5 x 64 streams: how many passes ran, how
/// often the robust signature was found, and the estimates.
#[derive(Debug, Clone, PartialEq)]
pub struct MultipassRow {
    /// `None`: single-pass BASS (the reference row).
    pub threshold_decay: Option<f64>,
    /// Streams whose pass 2 or later merged something.
    pub merged: f64,
    pub mean_passes: f64,
    /// Streams whose window-averaged gaps show the robust signature.
    pub robust: f64,
    pub errors: ErrorDist,
}

pub const THRESHOLD_DECAYS: [f64; 4] = [1.0, 0.5, 0.25, 0.1];

pub fn multipass_report(base_seed: u64, case: &PathCase, n: usize) -> Vec<MultipassRow> {
    use tightlink_core::smoothing::multipass::{multipass_smooth, single_pass_smooth};
    let samples = multi_samples(base_seed, case.target, n, 0.3, 64 * case.length_scale);
    let gaps: Vec<_> = samples.par_iter().map(|s| s.stream.gaps()).collect();
    std::iter::once(None)
        .chain(THRESHOLD_DECAYS.iter().map(|&d| Some(d)))
        .map(|decay| {
            let mut params = AnalysisParams::default();
            params.multipass.threshold_decay = decay.unwrap_or(1.0);
            let mp = params.multipass_smoothing();
            let runs: Vec<(usize, bool)> = gaps
                .par_iter()
                .map(|g| {
                    let m = match decay {
                        None => single_pass_smooth(g, mp),
                        Some(_) => multipass_smooth(g, mp),
                    };
                    (m.passes, m.robust)
                })
                .collect();
            let count = runs.len().max(1) as f64;
            let method = match decay {
                None => Method::MultirateSinglePass,
                Some(_) => Method::Multirate,
            };
            let errors = dist_of(&samples, method, &params, String::new());
            MultipassRow {
                threshold_decay: decay,
                merged: runs.iter().filter(|r| r.0 >= 2).count() as f64 / count,
                mean_passes: runs.iter().map(|r| r.0 as f64).sum::<f64>() / count,
                robust: runs.iter().filter(|r| r.1).count() as f64 / count,
                errors,
            }
        })
        .collect()
}

/// Multi-rate streams whose truth lies outside the rates they probed:
/// how the default method answered them.
#[derive(Debug, Clone, PartialEq)]
pub struct OutOfRange {
    /// The method that answered (`multirate`, or `queue-fit` given the
    /// capacity).
    pub method: &'static str,
    /// "above" (truth above the top rate) or "below" (under the lowest).
    pub side: &'static str,
    /// Streams whose truth lay on that side.
    pub streams: usize,
    /// Answered the right bound (at least above, at most below).
    pub right_bound: f64,
    /// Answered an exact number (inside the range: wrong by construction).
    pub exact: f64,
    /// Answered the opposite bound.
    pub wrong_bound: f64,
    /// No answer.
    pub none: f64,
}

/// Streams of 5 x 64 packets (times the case's scale), Range 30 %, centred
/// at 0.45-0.65 or 1.45-1.8 times the nominal available bandwidth, so the
/// truth usually lies outside the probed rates; each stream is judged
/// against its own truth and its actual top and lowest rate (streams whose
/// truth fell inside are left out).
pub fn out_of_range(base_seed: u64, case: &PathCase, n: usize) -> Vec<OutOfRange> {
    let nominal = parse_sim_target(case.target)
        .expect("valid")
        .nominal_available_bps();
    let per_rate = 64 * case.length_scale;
    let label = format!("outside/{}", case.target);
    let samples = simulate(base_seed, &label, case.target, n, 0, |u| {
        let centre = if u < 0.5 {
            nominal * (0.45 + 0.4 * u)
        } else {
            nominal * (1.45 + 0.7 * (u - 0.5))
        };
        let rates = rates_around(centre, 0.3, 5);
        (multi_rate_schedule(&rates, per_rate, SIZE_BYTES), centre)
    });
    let given = params_for(case.target);
    let mut cells = Vec::new();
    let mut analyzer = Analyzer::new();
    for method in [Method::Multirate, Method::QueueFit] {
        let params = if method == Method::QueueFit {
            given
        } else {
            AnalysisParams::default()
        };
        let mut tally = [[0usize; 5]; 2];
        for s in &samples {
            let subs = s.stream.sub_streams(params.gap_tolerance);
            let lowest = subs
                .iter()
                .map(|x| x.rate_bps)
                .fold(f64::INFINITY, f64::min);
            let top = subs.iter().map(|x| x.rate_bps).fold(0.0, f64::max);
            let (side, right, wrong) = if s.truth_bps > top {
                (0, Bound::AtLeast, Bound::AtMost)
            } else if s.truth_bps < lowest {
                (1, Bound::AtMost, Bound::AtLeast)
            } else {
                continue;
            };
            let a = analyzer.analyze(&s.stream, StreamKind::MultiRate, method, &params);
            let k = match a.bound {
                b if b == right => 1,
                Bound::Exact => 2,
                b if b == wrong => 3,
                _ => 4,
            };
            tally[side][0] += 1;
            tally[side][k] += 1;
        }
        cells.extend(["above", "below"].into_iter().zip(tally).map(|(side, t)| {
            let share = |k: usize| t[k] as f64 / t[0].max(1) as f64;
            OutOfRange {
                method: method.name(),
                side,
                streams: t[0],
                right_bound: share(1),
                exact: share(2),
                wrong_bound: share(3),
                none: share(4),
            }
        }));
    }
    cells
}

/// The capacity `queue-fit` and `multirate` are given, as a share of the
/// true one.
pub const CAPACITY_ERRORS: [f64; 7] = [0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 3.0];

/// The same streams read with the capacity given times `factor`.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityOff {
    pub factor: f64,
    pub queue_fit: ErrorDist,
    pub multirate: ErrorDist,
}

/// One path's multi-rate streams (5 rates, Range `range`) read with the
/// capacity given off by each of [`CAPACITY_ERRORS`].
pub fn capacity_off(base_seed: u64, case: &PathCase, n: usize, range: f64) -> Vec<CapacityOff> {
    let samples = multi_samples(base_seed, case.target, n, range, 64 * case.length_scale);
    let true_bps = parse_sim_target(case.target)
        .expect("valid")
        .tight_capacity_bps();
    CAPACITY_ERRORS
        .iter()
        .map(|&k| {
            let params = AnalysisParams {
                capacity_bps: Some(k * true_bps),
                ..AnalysisParams::default()
            };
            CapacityOff {
                factor: k,
                queue_fit: dist_of(&samples, Method::QueueFit, &params, format!("{k} x")),
                multirate: dist_of(&samples, Method::Multirate, &params, format!("{k} x")),
            }
        })
        .collect()
}

/// One cell of Fig. 16.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SensitivityCell {
    pub range: f64,
    pub per_rate: usize,
    pub within_10: f64,
    pub median_error: f64,
    /// The same streams read by the queue fit, given the capacity.
    pub queue_fit_within_10: f64,
    pub queue_fit_median_error: f64,
}

pub const RANGES: [f64; 5] = [0.1, 0.2, 0.3, 0.4, 0.5];
pub const PER_RATE: [usize; 3] = [32, 64, 128];

/// Fig. 16: multi-pass multirate's share within +-10 % over Range and
/// packets per rate, on one path.
pub fn sensitivity(base_seed: u64, case: &PathCase, n: usize) -> Vec<SensitivityCell> {
    let given = params_for(case.target);
    let grid: Vec<(f64, usize)> = RANGES
        .iter()
        .flat_map(|&r| PER_RATE.iter().map(move |&p| (r, p)))
        .collect();
    grid.into_iter()
        .map(|(range, per_rate)| {
            let samples = multi_samples(base_seed, case.target, n, range, per_rate);
            let dist = |method, p| dist_of(&samples, method, p, String::new());
            let unknown = AnalysisParams::default();
            let d = dist(Method::Multirate, &unknown);
            let q = dist(Method::QueueFit, &given);
            SensitivityCell {
                range,
                per_rate,
                within_10: d.within(0.10),
                median_error: d.quantile(0.5),
                queue_fit_within_10: q.within(0.10),
                queue_fit_median_error: q.quantile(0.5),
            }
        })
        .collect()
}

/// What a rule that reads every sub-stream right could reach: each
/// sub-stream of a multi-rate stream judged against its own truth (its
/// rate above what it met at the tight link, or not), the stream answered
/// from the bracket between two rates that best fits those judgements,
/// and scored against the whole stream's truth as the rows above are.
#[derive(Debug, Clone, PartialEq)]
pub struct SubStreamCeiling {
    pub range: f64,
    pub per_rate: usize,
    pub streams: usize,
    /// Streams with a sub-stream whose rate lies on the other side of its
    /// own truth than of the stream's: reading it right moves the bracket.
    pub split: f64,
    /// Within +-10 %: the best-fitting bracket's midpoint (the mean of
    /// tied brackets' midpoints).
    pub midpoint_within: f64,
    /// Within +-10 % for the best point of any best-fitting bracket: no
    /// rule that answers inside the bracket its sub-streams' states imply
    /// does better on these streams.
    pub best_within: f64,
    /// `multirate`, then `multirate` and `queue-fit` given the capacity,
    /// on the same streams.
    pub multirate_within: f64,
    pub multirate_given_within: f64,
    pub queue_fit_within: f64,
}

/// The thresholds `k` (rates `..k` below what they met, `k..` above) that
/// disagree with the fewest of the sub-streams' states `above` (rates in
/// increasing order); `0` and `above.len()` say every rate was above or
/// below.
pub fn best_thresholds(above: &[bool]) -> Vec<usize> {
    let misses = |k: usize| {
        above[..k].iter().filter(|&&a| a).count() + above[k..].iter().filter(|&&a| !a).count()
    };
    let fewest = (0..=above.len()).map(misses).min().unwrap_or(0);
    (0..=above.len()).filter(|&k| misses(k) == fewest).collect()
}

/// [`SubStreamCeiling`] of one path's multi-rate streams.
pub fn sub_stream_ceiling(
    base_seed: u64,
    case: &PathCase,
    n: usize,
    range: f64,
) -> SubStreamCeiling {
    let per_rate = 64 * case.length_scale;
    let samples = multi_samples(base_seed, case.target, n, range, per_rate);
    let (mut split, mut midpoint, mut best) = (0usize, 0usize, 0usize);
    for s in &samples {
        let rates = rates_around(s.rate_bps, range, 5);
        if s.part_truths_bps.len() != rates.len() {
            continue;
        }
        let t = s.truth_bps;
        let above: Vec<bool> = rates
            .iter()
            .zip(&s.part_truths_bps)
            .map(|(r, a)| r > a)
            .collect();
        split += usize::from(rates.iter().zip(&above).any(|(&r, &a)| a != (r > t)));
        let brackets: Vec<(f64, f64)> = best_thresholds(&above)
            .into_iter()
            .filter(|&k| k > 0 && k < rates.len())
            .map(|k| (rates[k - 1], rates[k]))
            .collect();
        if brackets.is_empty() {
            continue;
        }
        let mid =
            brackets.iter().map(|(lo, hi)| (lo + hi) / 2.0).sum::<f64>() / brackets.len() as f64;
        midpoint += usize::from((mid - t).abs() <= 0.1 * t);
        best += usize::from(
            brackets
                .iter()
                .any(|&(lo, hi)| lo <= 1.1 * t && hi >= 0.9 * t),
        );
    }
    let given = params_for(case.target);
    let unknown = AnalysisParams::default();
    let within = |method, p| dist_of(&samples, method, p, String::new()).within(0.10);
    let share = |k: usize| k as f64 / samples.len().max(1) as f64;
    SubStreamCeiling {
        range,
        per_rate,
        streams: samples.len(),
        split: share(split),
        midpoint_within: share(midpoint),
        best_within: share(best),
        multirate_within: within(Method::Multirate, &unknown),
        multirate_given_within: within(Method::Multirate, &given),
        queue_fit_within: within(Method::QueueFit, &given),
    }
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    tightlink_core::stats::quantile_sorted(v, 0.5).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_are_stable_and_distinct() {
        assert_eq!(unit_seed(1, "a", 0), unit_seed(1, "a", 0));
        assert_ne!(unit_seed(1, "a", 0), unit_seed(1, "a", 1));
        assert_ne!(unit_seed(1, "a", 0), unit_seed(1, "b", 0));
        assert_ne!(unit_seed(1, "a", 0), unit_seed(2, "a", 0));
    }

    #[test]
    fn results_do_not_depend_on_threads() {
        let case = &TEN_GIG[0];
        let one = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .unwrap()
            .install(|| decision_error(7, case, 45, &[64]));
        let many = rayon::ThreadPoolBuilder::new()
            .num_threads(3)
            .build()
            .unwrap()
            .install(|| decision_error(7, case, 45, &[64]));
        assert_eq!(one, many);
        assert_eq!(one[0].streams, 45);
    }

    /// With no cross traffic and no coalescence every single-rate stream
    /// is decided right by PRC-MT: rates below 10 Gbit/s pass untouched.
    #[test]
    fn quiet_path_has_no_decision_error() {
        let case = PathCase {
            name: "quiet",
            target: "sim:capacity=10G,cross=cbr:2G,coalescence=off,jitter=off",
            length_scale: 1,
        };
        let cells = decision_error(3, &case, 40, &[64]);
        let prcmt = cells.iter().find(|c| c.method == Method::Prcmt).unwrap();
        // Streams within a hair of the truth may go either way.
        assert!(prcmt.wrong <= 0.05, "{prcmt:?}");
        assert_eq!(prcmt.streams, 40);
    }

    /// On 60 bursty streams: the default multi-pass (same thresholds)
    /// answers as single pass does; a pass merges something only when
    /// the thresholds shrink, and more often the more they shrink.
    #[test]
    fn multipass_report_rows() {
        let rows = multipass_report(3, &TEN_GIG[0], 60);
        assert_eq!(rows.len(), 1 + THRESHOLD_DECAYS.len());
        assert_eq!(rows[0].threshold_decay, None);
        assert_eq!(rows[1].errors.errors, rows[0].errors.errors);
        assert_eq!(rows[1].merged, 0.0);
        assert!(rows[1].mean_passes >= 1.0);
        let merged: Vec<f64> = rows[1..].iter().map(|r| r.merged).collect();
        assert!(merged.windows(2).all(|w| w[0] <= w[1]), "{merged:?}");
        assert!(merged[merged.len() - 1] > 0.5, "{merged:?}");
    }

    /// States worked out by hand: a clean step; one sub-stream that read
    /// the other way (two thresholds one miss each; the middle one two);
    /// all above, all below.
    #[test]
    fn best_thresholds_by_hand() {
        let (f, t) = (false, true);
        assert_eq!(best_thresholds(&[f, f, t, t, t]), vec![2]);
        assert_eq!(best_thresholds(&[f, t, f, t, t]), vec![1, 3]);
        assert_eq!(best_thresholds(&[t, t, t, t, t]), vec![0]);
        assert_eq!(best_thresholds(&[f, f, f, f, f]), vec![5]);
        // Above then below: "all above" and "all below" miss one each, the
        // threshold between them both.
        assert_eq!(best_thresholds(&[t, f]), vec![0, 2]);
    }

    /// Under CBR cross traffic every sub-stream meets the stream's truth:
    /// no split, and the best point of the bracket is within 10 % of it
    /// wherever the truth lies inside the rates (Range 30 % around
    /// 0.8-1.2 times it: always); the ceiling bounds the midpoint.
    #[test]
    fn cbr_streams_are_not_split() {
        let case = PathCase {
            name: "cbr",
            target: "sim:capacity=10G,cross=cbr:2.5G,coalescence=off,jitter=off",
            length_scale: 1,
        };
        let c = sub_stream_ceiling(3, &case, 40, 0.3);
        assert_eq!(c.streams, 40);
        assert_eq!(c.split, 0.0, "{c:?}");
        assert_eq!(c.best_within, 1.0, "{c:?}");
        assert!(c.midpoint_within <= c.best_within, "{c:?}");
    }

    #[test]
    fn error_dist_shares_by_hand() {
        let d = ErrorDist {
            label: "x".into(),
            errors: vec![-0.2, -0.05, 0.0, 0.08, 0.3],
            streams: 10,
            wrong_bounds: None,
        };
        assert_eq!(d.within(0.10), 0.3);
        assert_eq!(d.answered(), 0.5);
        assert_eq!(d.quantile(0.5), 0.0);
        assert_eq!(d.quantile(0.0), -0.2);
        assert_eq!(d.quantile(1.0), 0.3);
    }
}
