//! The closed-loop strategies and pathChirp's chirps on the evaluation's
//! paths, and one stream's gaps drawn as an example.

use rayon::prelude::*;
use tightlink_core::schedule::chirp_schedule;
use tightlink_core::{analyze, AnalysisParams, Bound, Method, StreamKind};
use tightlink_probe::strategy;
use tightlink_probe::Budget;
use tightlink_sim::{parse_sim_target, SimChannel};

use crate::experiments::*;

/// A closed-loop strategy run many times.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyRow {
    pub strategy: &'static str,
    /// Relative errors of the runs that answered exactly, sorted.
    pub errors: Vec<f64>,
    pub runs: usize,
    pub median_bytes: f64,
    pub median_duration_s: f64,
    pub median_streams: f64,
}

pub const STRATEGIES: [strategy::Method; 13] = [
    strategy::Method::Multirate,
    strategy::Method::QueueFit,
    strategy::Method::Prcmt,
    strategy::Method::PrcmtPba,
    strategy::Method::ScanPba,
    strategy::Method::Pathload,
    strategy::Method::ImrAvg,
    strategy::Method::Topp,
    strategy::Method::Pathchirp,
    strategy::Method::Bart,
    strategy::Method::Igi,
    strategy::Method::Ptr,
    strategy::Method::Spruce,
];

/// pathChirp on one path: each chirp's estimate, and the mean of
/// `CHIRP_SMOOTHING` chirps that answered (pathChirp's output) against
/// the mean of their truths.
#[derive(Debug, Clone, PartialEq)]
pub struct ChirpRow {
    pub chirps: usize,
    /// Chirps that gave a number (exact or a bound).
    pub answered: usize,
    /// Why the others gave none (the most common reason).
    pub unanswered_reason: Option<String>,
    pub per_chirp: ErrorDist,
    pub means: ErrorDist,
}

/// pathChirp 2.3.7 averages 11 chirps.
pub const CHIRP_SMOOTHING: usize = 11;

/// Chirps of 9000-byte packets from a tenth of the sender's link rate to
/// all of it, spread 1.2 (the `pathchirp` strategy's first range).
pub fn chirp_errors(base_seed: u64, case: &PathCase, n: usize) -> ChirpRow {
    let spec = parse_sim_target(case.target).expect("valid");
    let max = spec.hops.first().map_or(0.0, |h| h.hop.capacity_bps);
    let sched = chirp_schedule(max / 10.0, max, 1.2, SIZE_BYTES);
    let label = format!("chirp/{}", case.target);
    let samples = simulate(base_seed, &label, case.target, n, 0, |_| {
        (sched.clone(), max)
    });
    let params = AnalysisParams::default();
    let mut answers: Vec<(f64, f64, Bound)> = Vec::new();
    let mut reasons: Vec<String> = Vec::new();
    for s in &samples {
        let a = analyze(&s.stream, StreamKind::Chirp, Method::Pathchirp, &params);
        match a.abw_bps {
            Some(e) => answers.push((e, s.truth_bps, a.bound)),
            None => reasons.extend(a.reason),
        }
    }
    let unanswered_reason = {
        reasons.sort();
        let mut best: Option<(usize, &String)> = None;
        for r in &reasons {
            let k = reasons.iter().filter(|x| *x == r).count();
            if best.is_none_or(|(b, _)| k > b) {
                best = Some((k, r));
            }
        }
        best.map(|(_, r)| r.clone())
    };
    let rel = |e: f64, t: f64| (e - t) / t;
    let mut per: Vec<f64> = answers
        .iter()
        .filter(|a| a.2 == Bound::Exact)
        .map(|a| rel(a.0, a.1))
        .collect();
    per.sort_by(f64::total_cmp);
    let mut means: Vec<f64> = answers
        .chunks_exact(CHIRP_SMOOTHING)
        .map(|c| {
            let k = c.len() as f64;
            let e = c.iter().map(|a| a.0).sum::<f64>() / k;
            let t = c.iter().map(|a| a.1).sum::<f64>() / k;
            rel(e, t)
        })
        .collect();
    means.sort_by(f64::total_cmp);
    let groups = (samples.len() / CHIRP_SMOOTHING).max(1);
    ChirpRow {
        chirps: samples.len(),
        answered: answers.len(),
        unanswered_reason,
        per_chirp: ErrorDist {
            label: "per chirp".into(),
            errors: per,
            streams: samples.len(),
            wrong_bounds: None,
        },
        means: ErrorDist {
            label: format!("mean of {CHIRP_SMOOTHING}"),
            errors: means,
            streams: groups,
            wrong_bounds: None,
        },
    }
}

fn run_strategy(
    method: strategy::Method,
    target: &str,
    seed: u64,
) -> Option<tightlink_probe::Report> {
    let mut ch = SimChannel::new(spec_for(target, seed), target);
    // queue-fit is given the simulated tight link's capacity.
    let a = if method == strategy::Method::QueueFit {
        params_for(target)
    } else {
        AnalysisParams::default()
    };
    let mut progress = |_: f64| {};
    method
        .run(&mut ch, &a, Budget::default(), &mut progress)
        .ok()
}

/// Every strategy over `seeds` seeds of `case` (in parallel).
pub fn strategies(base_seed: u64, case: &PathCase, seeds: u64) -> Vec<StrategyRow> {
    STRATEGIES
        .iter()
        .map(|&method| {
            let runs: Vec<tightlink_probe::Report> = (0..seeds)
                .into_par_iter()
                .filter_map(|i| {
                    let seed =
                        unit_seed(base_seed, &format!("strategy/{}", case.target), i as usize);
                    run_strategy(method, case.target, seed)
                })
                .collect();
            let mut errors: Vec<f64> = runs
                .iter()
                .filter(|r| r.bound == tightlink_core::Bound::Exact)
                .filter_map(|r| {
                    let t = r.truth_bps?;
                    Some((r.available_bandwidth_bps - t) / t)
                })
                .collect();
            errors.sort_by(f64::total_cmp);
            StrategyRow {
                strategy: method.name(),
                errors,
                runs: runs.len(),
                median_bytes: median(
                    &mut runs
                        .iter()
                        .map(|r| r.cost.probe_bytes as f64)
                        .collect::<Vec<_>>(),
                ),
                median_duration_s: median(
                    &mut runs.iter().map(|r| r.cost.duration_s).collect::<Vec<_>>(),
                ),
                median_streams: median(
                    &mut runs
                        .iter()
                        .map(|r| r.cost.streams as f64)
                        .collect::<Vec<_>>(),
                ),
            }
        })
        .collect()
}

/// One multi-rate stream on `case` with its raw, BASS-smoothed and
/// multi-pass-smoothed gaps, for the Fig. 10/13-style plot:
/// (packet index, send gap us, receive gap us) per series.
pub struct GapExample {
    pub send: Vec<(f64, f64)>,
    pub raw: Vec<(f64, f64)>,
    pub bass: Vec<(f64, f64)>,
    pub multipass: Vec<(f64, f64)>,
    pub truth_bps: f64,
    pub estimate_bps: Option<f64>,
}

pub fn gap_example(base_seed: u64, case: &PathCase) -> GapExample {
    use tightlink_core::smoothing::{bass::bass_smooth, multipass::multipass_smooth};
    let s = multi_samples(base_seed, case.target, 1, 0.3, 64)
        .pop()
        .expect("one stream crosses the path");
    let params = AnalysisParams::default();
    let gaps = s.stream.gaps();
    let series = |g: &[tightlink_core::stream::Gap], recv: bool| -> Vec<(f64, f64)> {
        g.iter()
            .map(|x| {
                let v = if recv { x.recv_ns } else { x.send_ns };
                (x.end_packet as f64, v / 1e3)
            })
            .collect()
    };
    let est = analyze(&s.stream, StreamKind::MultiRate, Method::Multirate, &params);
    GapExample {
        send: series(&gaps, false),
        raw: series(&gaps, true),
        bass: series(&bass_smooth(&gaps, params.bass), true),
        multipass: series(&multipass_smooth(&gaps, params.multipass).gaps, true),
        truth_bps: s.truth_bps,
        estimate_bps: est.abw_bps,
    }
}
