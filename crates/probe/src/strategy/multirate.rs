//! Repeated multi-rate probing (BASS paper, section VI): each stream probes
//! `rates` rates of `per_rate` packets spread over +-Range around a centre;
//! after multi-pass smoothing it gives an estimate, the next stream is
//! centred on it.
//!
//! The first stream scans wide (10 % to 90 % of the sender's link rate).
//! An `at_least` answer moves the centre up by the range, `at_most` down.
//! Stability rule: stop when the last `stable_count` exact estimates lie
//! within +-`stable_tolerance` of their median; the answer is that median,
//! the confidence range their min and max. When the budget runs out first,
//! the answer is the median of every exact estimate after the wide scan
//! (range: their quartiles), or the bound the last streams kept giving.

use super::{median, Budget, Progress, Report, Session, StrategyError};
use crate::channel::{Channel, StreamRequest};
use tightlink_core::synth::{multi_rate_schedule, rates_around};
use tightlink_core::{analyze, AnalysisParams, Bound, Method, StreamKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultirateParams {
    pub rates: usize,
    pub per_rate: usize,
    /// Range around the centre (0.3 = +-30 %).
    pub range: f64,
    pub size_bytes: u32,
    pub stable_count: usize,
    pub stable_tolerance: f64,
    /// `multirate`, `multirate-single-pass`, `multirate-prcmt-dp1` or `-dp2`.
    pub method: Method,
}

impl Default for MultirateParams {
    fn default() -> Self {
        MultirateParams {
            rates: 5,
            per_rate: 64,
            range: 0.3,
            size_bytes: 9000,
            stable_count: 4,
            stable_tolerance: 0.05,
            method: Method::Multirate,
        }
    }
}

pub fn run(
    channel: &mut dyn Channel,
    params: MultirateParams,
    analysis: &AnalysisParams,
    budget: Budget,
    progress: Progress,
) -> Result<Report, StrategyError> {
    let mut s = Session::start(channel, budget, progress)?;
    let max = s.max_rate_bps();
    // Centre and range of the next stream; the top rate stays at the link rate.
    let mut centre = 0.5 * max;
    let mut range = 0.8;
    let mut exact: Vec<f64> = Vec::new();
    let mut last_bound: Option<(Bound, f64)> = None;
    let mut first = true;
    loop {
        let rates = rates_around(centre, range, params.rates);
        let sched = multi_rate_schedule(&rates, params.per_rate, params.size_bytes);
        let request = StreamRequest::from_send_times(&sched, params.size_bytes);
        if !s.fits(request.bytes()) {
            break;
        }
        let stream = s.send(&request)?;
        let a = analyze(&stream, StreamKind::MultiRate, params.method, analysis);
        match (a.bound, a.abw_bps) {
            (Bound::Exact, Some(e)) => {
                if !first {
                    exact.push(e);
                }
                centre = e;
                range = params.range;
                last_bound = Some((Bound::Exact, e));
            }
            (Bound::AtLeast, Some(e)) => {
                centre = (e * (1.0 + params.range)).max(centre);
                range = params.range;
                last_bound = Some((Bound::AtLeast, e));
            }
            (Bound::AtMost, Some(e)) => {
                centre = e * (1.0 - params.range);
                range = params.range;
                last_bound = Some((Bound::AtMost, e));
            }
            _ => {}
        }
        // Never ask for more than the link can send.
        centre = centre.min(max / (1.0 + range)).max(max * 0.01);
        first = false;
        if exact.len() >= params.stable_count {
            let last = &exact[exact.len() - params.stable_count..];
            let m = median(last);
            if last
                .iter()
                .all(|e| (e / m - 1.0).abs() <= params.stable_tolerance)
            {
                let (lo, hi) = last
                    .iter()
                    .fold((f64::INFINITY, 0.0f64), |(l, h), &e| (l.min(e), h.max(e)));
                return Ok(s.report(params.method.name(), m, Bound::Exact, lo, hi, "stable"));
            }
        }
    }
    if !exact.is_empty() {
        let m = median(&exact);
        let mut v = exact.clone();
        v.sort_by(f64::total_cmp);
        let (lo, hi) = (v[(v.len() - 1) / 4], v[(v.len() - 1) * 3 / 4]);
        return Ok(s.report(params.method.name(), m, Bound::Exact, lo, hi, "budget"));
    }
    match last_bound {
        Some((b, e)) => Ok(s.report(params.method.name(), e, b, e, e, "budget")),
        None => Ok(s.report(
            params.method.name(),
            0.0,
            Bound::None,
            0.0,
            0.0,
            "no usable stream",
        )),
    }
}
