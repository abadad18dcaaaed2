//! Experiments over time on the simulator: the tracker following a step
//! in the available bandwidth, and rate controllers' goodput and queue
//! on a path they share with cross traffic.

use rayon::prelude::*;
use tightlink_core::AnalysisParams;
use tightlink_probe::strategy;
use tightlink_probe::Budget;
use tightlink_sim::SimChannel;

use crate::experiments::*;

/// Paths whose cross traffic steps from 2 to 5 Gbit/s at 1 s (available
/// bandwidth 8 to 5 Gbit/s), for the tracker.
pub const STEPS: [PathCase; 2] = [
    PathCase {
        name: "smoothed 2G stepping to 5G at 1 s, 125 us coalescence",
        target: "sim:cross=smoothed:2G:step=1s/5G,coalescence=125us",
        length_scale: 1,
    },
    PathCase {
        name: "bursty 2G stepping to 5G at 1 s, 125 us coalescence",
        target: "sim:cross=bursty:2G:step=1s/5G,coalescence=125us",
        length_scale: 1,
    },
];

/// The step's time on the traffic's clock; the path's warm-up comes
/// before the first stream (the simulator's 20 ms), so the step lands at
/// 0.98 s of path time.
pub const STEP_AT_S: f64 = 1.0;

/// BART following a path for `TRACK_STREAMS` streams.
#[derive(Debug, Clone, PartialEq)]
pub struct Tracking {
    /// (path time s, estimate, filter sd, truth) per stream, bit/s.
    pub points: Vec<(f64, f64, f64, f64)>,
    /// Streams after the step until the estimate stayed within +-10 % of
    /// the stream's truth for three streams in a row (the first of them).
    pub streams_to_follow: Option<usize>,
    /// Median |error| before the step and from the fifth stream after it.
    pub median_before: f64,
    pub median_after: f64,
}

pub const TRACK_STREAMS: usize = 150;

pub fn tracking(seed: u64, case: &PathCase) -> Tracking {
    use tightlink_probe::strategy::bart::{run_with_updates, BartStrategyParams};
    let mut ch = SimChannel::new(spec_for(case.target, seed), case.target);
    let params = BartStrategyParams {
        follow: true,
        ..BartStrategyParams::default()
    };
    let budget = Budget {
        max_streams: TRACK_STREAMS,
        max_bytes: u64::MAX,
        max_duration_ns: i64::MAX,
    };
    let mut points = Vec::new();
    let mut progress = |_: f64| {};
    let mut on = |u: &tightlink_probe::strategy::bart::BartUpdate| {
        if let Some(t) = u.truth_bps {
            points.push((u.elapsed_ns as f64 / 1e9, u.abw_bps, u.sd_bps, t));
        }
    };
    let mut s = strategy::Session::new(&mut ch, budget, &mut progress);
    let _ = run_with_updates(&mut s, params, &AnalysisParams::default(), &mut on);
    let step_s = STEP_AT_S - 0.02;
    let err = |p: &(f64, f64, f64, f64)| ((p.1 - p.3) / p.3).abs();
    let first_after = points.iter().position(|p| p.0 >= step_s);
    let streams_to_follow = first_after.and_then(|k| {
        (k..points.len().saturating_sub(2))
            .find(|&i| points[i..i + 3].iter().all(|p| err(p) <= 0.1))
            .map(|i| i - k + 1)
    });
    let mut before: Vec<f64> = points.iter().filter(|p| p.0 < step_s).map(err).collect();
    let mut after: Vec<f64> = first_after
        .map(|k| points.iter().skip(k + 4).map(err).collect())
        .unwrap_or_default();
    Tracking {
        streams_to_follow,
        median_before: median(&mut before),
        median_after: median(&mut after),
        points,
    }
}

/// The rate-control experiment of \[BASS\] VII (Figs. 17-18): one
/// long-lived flow on the 10 Gbit/s path beside bursty or smoothed cross
/// traffic (2.5 Gbit/s mean, 125 us coalescence), 5 and 30 ms round
/// trips, under each controller.
pub const CC_PATHS: [(&str, &str); 2] = [
    ("bursty", "sim:cross=bursty:2.5G,coalescence=125us"),
    ("smoothed", "sim:cross=smoothed:2.5G,coalescence=125us"),
];
pub const CC_RTTS_MS: [f64; 2] = [5.0, 30.0];
/// Throughput bins, as the paper plots them (Figs. 17, 18).
pub const CC_BIN_NS: f64 = 500e6;
pub const CC_CONTROLLERS: [&str; 4] = ["rapid", "rapid-raw", "cubic", "bbr"];

/// One path and round trip, every controller's flow on it.
#[derive(Debug, Clone)]
pub struct CcCell {
    pub cross: &'static str,
    pub rtt_ms: f64,
    pub flows: Vec<tightlink_sim::flow::FlowResult>,
}

/// Runs every controller over every path and round trip for
/// `duration_ns` of simulated time each (throughput in 500 ms bins).
pub fn congestion_control(seed: u64, duration_ns: f64) -> Vec<CcCell> {
    use tightlink_core::rapid::{RapidEstimator, RapidParams};
    use tightlink_sim::cc::{Bbr, Cubic};
    use tightlink_sim::flow::{run_flow, FlowController, FlowSpec, RapidFlow};
    let cells: Vec<(&'static str, &'static str, f64, &'static str)> = CC_PATHS
        .iter()
        .flat_map(|&(name, target)| {
            CC_RTTS_MS
                .iter()
                .flat_map(move |&rtt| CC_CONTROLLERS.iter().map(move |&c| (name, target, rtt, c)))
        })
        .collect();
    let flows: Vec<tightlink_sim::flow::FlowResult> = cells
        .par_iter()
        .map(|&(name, target, rtt_ms, controller)| {
            // The same cross traffic for every controller in a cell.
            let path = spec_for(target, unit_seed(seed, name, rtt_ms as usize));
            let link_bps = path.hops[0].hop.capacity_bps;
            let spec = FlowSpec {
                path,
                rtt_ns: rtt_ms * 1e6,
                duration_ns,
                bin_ns: CC_BIN_NS,
                packet_bytes: SIZE_BYTES,
            };
            let mut ctl: Box<dyn FlowController> = match controller {
                "rapid" => Box::new(RapidFlow::new(RapidParams::paper(
                    link_bps,
                    SIZE_BYTES,
                    RapidEstimator::Bass,
                ))),
                "rapid-raw" => Box::new(RapidFlow::new(RapidParams::paper(
                    link_bps,
                    SIZE_BYTES,
                    RapidEstimator::Raw,
                ))),
                "cubic" => Box::new(Cubic::new(SIZE_BYTES)),
                _ => Box::new(Bbr::new(SIZE_BYTES)),
            };
            run_flow(&spec, ctl.as_mut())
        })
        .collect();
    let mut out: Vec<CcCell> = Vec::new();
    for ((name, _, rtt_ms, _), f) in cells.into_iter().zip(flows) {
        match out.last_mut() {
            Some(c) if c.cross == name && c.rtt_ms == rtt_ms => c.flows.push(f),
            _ => out.push(CcCell {
                cross: name,
                rtt_ms,
                flows: vec![f],
            }),
        }
    }
    out
}
