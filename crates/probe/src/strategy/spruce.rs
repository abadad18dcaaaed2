//! Spruce's loop (Strauss, Katabi and Kaashoek, IMC 2003; Spruce 0.3;
//! \[HOST\] section 4): the capacity first, then `pairs` packet pairs at
//! it, exponentially spaced, averaged (`tightlink_core::decision::spruce`).
//!
//! Spruce takes the capacity from the user; ours measures it when not
//! given, as IGI/PTR does, from three back-to-back trains (their most
//! common receive gap). Pairs go out in streams of `pairs_per_stream`,
//! each pair `8 P / C` apart, the gaps between pairs exponential with mean
//! the larger of `mean_gap_ns` and the gap that keeps the pairs under 5 %
//! of the capacity (Spruce's rule). Ours: `mean_gap_ns` is 10 ms where
//! Spruce's is 100 ms, so that 100 pairs take a second, not ten; the
//! gaps come from a fixed seed so that a saved run replays. The answer is
//! the mean over all pairs received, its range the 95 % interval of that
//! mean; stop `converged` after `pairs`.

use super::chirp::mean_interval;
use super::session::{Method as Strategy, Report, Session, Stop, StrategyError};
use tightlink_core::channel::StreamRequest;
use tightlink_core::decision::igi::bottleneck_bps;
use tightlink_core::decision::spruce::pair_estimates;
use tightlink_core::rng::Rng;
use tightlink_core::schedule::{pair_schedule, single_rate_schedule};
use tightlink_core::{stats, AnalysisParams, Bound};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpruceParams {
    pub pairs: usize,
    pub pairs_per_stream: usize,
    pub mean_gap_ns: f64,
    pub size_bytes: u32,
}

impl Default for SpruceParams {
    fn default() -> Self {
        SpruceParams {
            pairs: 100,
            pairs_per_stream: 10,
            mean_gap_ns: 10e6,
            size_bytes: 9000,
        }
    }
}

/// Spruce with its default parameters.
pub(super) fn run_default(
    s: &mut Session,
    _method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = SpruceParams::default();
    p.size_bytes = size.unwrap_or(p.size_bytes);
    Ok((run(s, p, analysis)?, p.size_bytes))
}

pub fn run(
    s: &mut Session,
    params: SpruceParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    let method = Strategy::Spruce;
    let max = s.max_rate_bps();
    let size = params.size_bytes;
    let bits = 8.0 * size as f64;
    let capacity = match analysis.capacity_bps {
        Some(c) => Some(c),
        None => {
            let sched = single_rate_schedule(max, 60, size, 0);
            let request = StreamRequest::from_send_times(&sched, size);
            let mut c = Vec::new();
            for _ in 0..3 {
                if !s.fits(request.bytes()) {
                    break;
                }
                let t = s.send(&request)?;
                // Batched stamps (one batch counts) are not the bottleneck's gaps.
                if t.receive_batch_count().is_none() {
                    c.extend(bottleneck_bps(&t, &analysis.igi));
                }
            }
            stats::median(&c)
        }
    };
    let Some(capacity) = capacity.filter(|c| *c > 0.0) else {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableAdrTrain));
    };
    // Never faster than the sender can send.
    let pair_gap_ns = bits * 1e9 / capacity.min(max);
    let mean_gap_ns = params.mean_gap_ns.max(2.0 * pair_gap_ns / 0.05);
    let mut rng = Rng::new(0x5b_5ce);
    let mut estimates: Vec<f64> = Vec::new();
    while estimates.len() < params.pairs {
        let n = params.pairs_per_stream.min(params.pairs - estimates.len());
        let sched = pair_schedule(n, pair_gap_ns, mean_gap_ns, &mut rng);
        let request = StreamRequest::from_send_times(&sched, size);
        if !s.fits(request.bytes()) {
            break;
        }
        let stream = s.send(&request)?;
        if stream.receive_batch_count().is_some() {
            // Batched receive stamps are not pair gaps.
            continue;
        }
        estimates.extend(pair_estimates(&stream, capacity));
    }
    if estimates.is_empty() {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream));
    }
    let (mean, lo, _) = mean_interval(&estimates);
    let half = mean - lo;
    let a = mean.clamp(0.0, capacity);
    let stop = if estimates.len() >= params.pairs {
        Stop::Converged
    } else {
        Stop::Budget
    };
    Ok(s.report(method, a, Bound::Exact, (a - half).max(0.0), a + half, stop))
}
