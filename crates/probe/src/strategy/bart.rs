//! BART-style probing (Ekelin et al., NOMS 2006; the cloud paper's BART
//! family): multi-rate streams as the multi-rate strategy sends them, each
//! one taken into a Kalman filter over TOPP's line
//! (`tightlink_core::decision::bart`), the next stream centred on the
//! filter's estimate.
//!
//! The first stream scans wide (10 % to 90 % of the sender's link rate);
//! while no rate has been strained the answer is "at least" the top rate
//! and the centre moves up by the range. Stopping rule (ours): once
//! `min_strained` strained rates are in, stop when the filter's ~95 %
//! interval, estimate +- 1.96 sd, is within `stable_tolerance` of the
//! estimate; the interval is the answer's range. Within one measurement
//! the path is taken as steady, so the filter allows its line's zero to
//! drift 0.2 % of the capacity per stream (when following a path for
//! minutes: 2 %), and its prior takes as the capacity the first strained
//! stream's slope, at most the lesser of the sender's link rate and what
//! the streams' fastest rate was delivered at allows
//! (`capacity_ceiling_bps`). On the lab, a 1 Gbit/s sender before a 200
//! Mbit/s link, the sender's rate as the capacity read every scenario
//! about 10 % low, and cbr60 15 %: its streams strain one rate each,
//! which leaves the filter no slope to learn from. An estimate that falls under half the
//! lowest rate the stream probed is a line drawn through a burst that
//! saturated the link (every rate strained, steeply): the next stream
//! scans wide again (+-80 %) around that lowest rate, so the filter can
//! climb back. A stream that the loss rule reads "at most" the rate where
//! its loss began overflowed a queue: the filter leaves it out and the next stream
//! is centred below it, as the multi-rate strategy does.
//!
//! The filter takes the path as steady; where it is not (one ON/OFF
//! source whose bursts saturate the link for milliseconds) it settled on
//! a burst or an idle moment and ran out of budget with a band that
//! missed the truth (4 of 10 runs, one at 0.3 Gbit/s with 7.9 free).
//! So each stream is also read alone, as TOPP reads it, and those
//! answers go through the multi-rate strategy's futility rule
//! ([`super::multirate::swing`]): when they scatter too widely to agree
//! within the budget or the next `swing_horizon` streams, the run stops
//! with `swings`, their mean and their 10th to 90th percentiles.
//!
//! Following (`follow`): no stable or ceiling stop, the filter allows the
//! long-run drift, and every stream's answer goes to the caller; the run
//! ends with the budget and reports the last answer. With `interval_ns`
//! the streams start that far apart and the channel idles between them,
//! so a path watched for long carries a probe load of one stream per
//! interval, not back-to-back streams.

use super::multirate::{per_rate_for_batches, swing, MultirateParams};
use super::session::{Ceiling, Method as Strategy, Report, Session, Stop, StrategyError};
use tightlink_core::analysis::{analyze, analyze_tracked};
use tightlink_core::channel::StreamRequest;
use tightlink_core::decision::bart::{
    top_rate_capacity_ceiling_bps, BartEstimate, BartParams, BartTracker,
};
use tightlink_core::schedule::{multi_rate_schedule, rates_around};
use tightlink_core::{AnalysisParams, Bound, Method, ProbeStream, StreamKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BartStrategyParams {
    /// Stream shape: rates, packets per rate, Range, packet size.
    pub streams: MultirateParams,
    /// Strained rates before the stopping rule is tried.
    pub min_strained: usize,
    /// Half-width of the filter's interval, relative, that stops.
    pub stable_tolerance: f64,
    /// Per-stream drift of `beta` within one measurement.
    pub beta_drift_sd: f64,
    /// Follow the path until the budget ends (no stable stop), with the
    /// drift a path watched for minutes needs (`BartParams`' default).
    pub follow: bool,
    /// Following: a stream starts every `interval_ns` of path time (the
    /// channel idles between them); 0 sends them back to back.
    pub interval_ns: i64,
}

/// The tracker after one stream, for continuous output.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BartUpdate {
    /// Streams sent so far.
    pub streams: usize,
    /// Time on the path at the stream's end (simulated on the simulator).
    pub elapsed_ns: i64,
    pub abw_bps: f64,
    /// Standard deviation of `abw_bps` from the filter.
    pub sd_bps: f64,
    pub bound: Bound,
    /// The stream's own truth, when the channel knows one.
    pub truth_bps: Option<f64>,
    /// The stream's first send and last receive time, on the channel's
    /// clock (CLOCK_REALTIME on real paths): the window its answer is of.
    pub window_ns: [i64; 2],
}

/// BART with its default parameters.
pub(super) fn run_default(
    s: &mut Session,
    _method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = BartStrategyParams::default();
    p.streams.size_bytes = size.unwrap_or(p.streams.size_bytes);
    Ok((run(s, p, analysis)?, p.streams.size_bytes))
}

impl Default for BartStrategyParams {
    fn default() -> Self {
        BartStrategyParams {
            streams: MultirateParams {
                method: Method::Bart,
                ..MultirateParams::default()
            },
            min_strained: 6,
            stable_tolerance: 0.05,
            beta_drift_sd: 0.002,
            follow: false,
            interval_ns: 0,
        }
    }
}

pub fn run(
    s: &mut Session,
    params: BartStrategyParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    run_with_updates(s, params, analysis, &mut |_| {})
}

/// [`run`], telling `on_update` the tracker's answer after every stream.
pub fn run_with_updates(
    s: &mut Session,
    params: BartStrategyParams,
    analysis: &AnalysisParams,
    on_update: &mut dyn FnMut(&BartUpdate),
) -> Result<Report, StrategyError> {
    let method = Strategy::Bart;
    let sp = params.streams;
    let max = s.max_rate_bps();
    let analysis = filter_params(&params, analysis);
    let mut tracker = BartTracker::with_capacity_hint(analysis.bart, max);
    let mut centre = 0.5 * max;
    let mut range = 0.8;
    let mut per_rate = sp.per_rate;
    let mut at_ceiling = 0;
    // Each stream's own answer (TOPP on its points), for the swing test.
    let mut own: Vec<f64> = Vec::new();
    loop {
        let rates = rates_around(centre, range, sp.rates);
        let sched = multi_rate_schedule(&rates, per_rate, sp.size_bytes);
        let per_rate_sent = per_rate;
        let request = StreamRequest::from_send_times(&sched, sp.size_bytes);
        if !s.fits(request.bytes()) {
            break;
        }
        let began_ns = s.elapsed_ns();
        let stream = s.send(&request)?;
        if params.follow && params.interval_ns > 0 {
            s.idle(params.interval_ns - (s.elapsed_ns() - began_ns));
        }
        if let Some(interval_ns) = stream.receive_batch_interval_ns() {
            per_rate = per_rate_for_batches(&sp, interval_ns, centre * (1.0 + range));
        }
        // The fastest rate's delivery bounds the capacity from above:
        // the prior's slope then need not be the sender's link's.
        if let Some(c) =
            top_rate_capacity_ceiling_bps(&stream, per_rate_sent, rates[rates.len() - 1])
        {
            tracker.cap_capacity_hint(c);
        }
        let a = analyze_tracked(
            &stream,
            StreamKind::MultiRate,
            Method::Bart,
            &analysis,
            &mut tracker,
        );
        // A stream the loss rule reads "at most" its lowest rate overflowed
        // a queue: the filter left it out; probe below it next, as the
        // multi-rate strategy does.
        let overflowed = match (a.bound, a.abw_bps) {
            (Bound::AtMost, Some(lowest)) if a.reason.is_some() => Some(lowest),
            _ => None,
        };
        if let Some(lowest) = overflowed {
            range = sp.range;
            centre = (lowest * (1.0 - sp.range)).max(max * 0.01);
        }
        if !params.follow {
            let bytes = request.bytes();
            if let Some(r) = own_swing(s, &stream, &analysis, &mut own, &params, bytes) {
                return Ok(r);
            }
        }
        let Some(e) = tracker.estimate() else {
            continue;
        };
        on_update(&BartUpdate {
            streams: s.streams.len(),
            elapsed_ns: s.elapsed_ns(),
            abw_bps: e.abw_bps,
            sd_bps: e.abw_sd_bps,
            bound: e.bound,
            truth_bps: s.last_truth,
            window_ns: stream.window_ns().unwrap_or_default(),
        });
        let near = Ceiling::default().reached(e.abw_bps, e.bound, max);
        at_ceiling = if near { at_ceiling + 1 } else { 0 };
        if at_ceiling >= 3 && e.bound == Bound::AtLeast && !params.follow {
            let a = e.abw_bps;
            return Ok(s.report(method, a, Bound::AtLeast, a, a, Stop::Ceiling));
        }
        (centre, range) = next_centre(&e, overflowed.is_some(), rates[0], centre, &sp, max);
        if range > sp.range {
            continue;
        }
        let half = 1.96 * e.abw_sd_bps;
        if !params.follow
            && e.bound == Bound::Exact
            && e.strained_points >= params.min_strained
            && half <= params.stable_tolerance * e.abw_bps
        {
            let a = e.abw_bps;
            return Ok(s.report(method, a, Bound::Exact, a - half, a + half, Stop::Stable));
        }
    }
    Ok(budget_spent(s, &tracker, params.follow))
}

/// The stream read alone (TOPP on its points) into `own`; `swings` when
/// those answers scatter too far to settle within the budget.
fn own_swing(
    s: &Session,
    stream: &ProbeStream,
    analysis: &AnalysisParams,
    own: &mut Vec<f64>,
    params: &BartStrategyParams,
    request_bytes: u64,
) -> Option<Report> {
    let sp = &params.streams;
    let alone = analyze(stream, StreamKind::MultiRate, Method::Topp, analysis);
    if let (Bound::Exact, Some(a)) = (alone.bound, alone.abw_bps) {
        own.push(a);
    }
    let left = s.streams_left(request_bytes).min(sp.swing_horizon);
    let w = swing(own, params.stable_tolerance, left, sp.swing_min_answers)?;
    Some(s.report(
        Strategy::Bart,
        w.mean,
        Bound::Exact,
        w.low,
        w.high,
        Stop::Swings,
    ))
}

/// The filter's drift: the follower's own, else the strategy's.
fn filter_params(params: &BartStrategyParams, analysis: &AnalysisParams) -> AnalysisParams {
    AnalysisParams {
        bart: BartParams {
            beta_drift_sd: if params.follow {
                analysis.bart.beta_drift_sd
            } else {
                params.beta_drift_sd
            },
            ..analysis.bart
        },
        ..*analysis
    }
}

/// The next stream's (centre, range) from the filter's estimate `e`:
/// below a stream that overflowed (already set), above an "at least",
/// wide around the rates just probed when the estimate fell far under
/// them (on a real path the sender's link may be many times the path's,
/// and a scan up to it only overflows the queue), else on the estimate.
fn next_centre(
    e: &BartEstimate,
    overflowed: bool,
    lowest: f64,
    centre: f64,
    sp: &MultirateParams,
    max: f64,
) -> (f64, f64) {
    let (centre, range) = match e.bound {
        _ if overflowed => (centre, sp.range),
        Bound::AtLeast => ((e.abw_bps * (1.0 + sp.range)).max(centre), sp.range),
        _ if e.abw_bps < 0.5 * lowest => (lowest, 0.8),
        _ => (e.abw_bps, sp.range),
    };
    (centre.min(max / (1.0 + range)).max(max * 0.01), range)
}

/// The filter's answer when the budget ran out.
fn budget_spent(s: &Session, tracker: &BartTracker, follow: bool) -> Report {
    let method = Strategy::Bart;
    let mut r = match tracker.estimate() {
        Some(e) => {
            let half = 1.96 * e.abw_sd_bps;
            let a = e.abw_bps;
            // A filter that has not settled can have a band wider than
            // its estimate; no path has less than nothing free.
            s.report(
                method,
                a,
                e.bound,
                (a - half).max(0.0),
                a + half,
                Stop::Budget,
            )
        }
        None => s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream),
    };
    // Following, the answer is the path's now: compare it with the last
    // stream's truth, not the mean over a path that moved.
    if follow {
        r.truth_bps = s.last_truth.or(r.truth_bps);
    }
    r
}
