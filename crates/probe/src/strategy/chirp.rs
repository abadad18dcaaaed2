//! pathChirp's loop (Ribeiro et al., PAM 2003; \[HOST\] section 4, the
//! chirp family): chirps one after another, each read by its excursions
//! (`tightlink_core::decision::chirp`), the answer the mean of the chirps'
//! estimates.
//!
//! pathChirp 2.3.7 averages the last 11 chirps and moves its rate range
//! when that mean sits near an end of it: under 1.5 times the lowest rate
//! or over 0.66 times the top rate, three chirps in a row. Ours keeps
//! those rules, with a range from a tenth of the sender's link rate to
//! all of it at first (pathChirp starts at 10-200 Mbit/s and widens by 7
//! each way) and re-centred around the mean, a factor `span` wide, when
//! it moves. pathChirp runs until told to stop; ours stops as the
//! multi-rate strategy does: once `smoothing` chirps of one range answered,
//! when the ~95 % interval of their mean, mean +- 1.96 sd / sqrt(n), is
//! within `stable_tolerance` of it; `ceiling` when the lower end of that
//! interval reaches the top rate the sender can probe (the multi-rate
//! strategy's share of it); else when the budget runs out, with
//! that mean and interval, or no answer when fewer than `smoothing`
//! chirps of the last range answered (pathChirp prints nothing before it
//! has them to average). One chirp's estimate scatters widely even on a
//! steady path (it reads a few hundred microseconds, in steps of the
//! spread factor), so scatter is not read as the path swinging.

use super::{Budget, Ceiling, Method as Strategy, Progress, Report, Session, Stop, StrategyError};
use tightlink_core::channel::{Channel, StreamRequest};
use tightlink_core::schedule::chirp_schedule;
use tightlink_core::{analyze, AnalysisParams, Bound, Method, StreamKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathchirpParams {
    /// Each gap this many times shorter than the one before.
    pub spread: f64,
    pub size_bytes: u32,
    /// Top rate over lowest rate of a chirp.
    pub span: f64,
    /// Chirps averaged (pathChirp: 11).
    pub smoothing: usize,
    /// Chirps in a row near an end of the range before it moves.
    pub edge_chirps: usize,
    /// Half-width of the mean's interval, relative, that stops.
    pub stable_tolerance: f64,
}

impl Default for PathchirpParams {
    fn default() -> Self {
        PathchirpParams {
            spread: 1.2,
            size_bytes: 9000,
            span: 10.0,
            smoothing: 11,
            edge_chirps: 3,
            stable_tolerance: 0.05,
        }
    }
}

/// Mean of `v` and its ~95 % interval, mean +- 1.96 sd / sqrt(n).
pub fn mean_interval(v: &[f64]) -> (f64, f64, f64) {
    let n = v.len() as f64;
    let m = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let half = 1.96 * (var / n).sqrt();
    (m, m - half, m + half)
}

pub fn run(
    channel: &mut dyn Channel,
    params: PathchirpParams,
    analysis: &AnalysisParams,
    budget: Budget,
    progress: Progress,
) -> Result<Report, StrategyError> {
    let method = Strategy::Pathchirp;
    let mut s = Session::start(channel, budget, progress)?;
    let max = s.max_rate_bps();
    let mut high = max;
    let mut low = max / params.span;
    // Estimates of the chirps since the range last moved.
    let mut est: Vec<f64> = Vec::new();
    let (mut low_count, mut high_count) = (0, 0);
    loop {
        let sched = chirp_schedule(low, high, params.spread, params.size_bytes);
        let request = StreamRequest::from_send_times(&sched, params.size_bytes);
        if sched.is_empty() || !s.fits(request.bytes()) {
            break;
        }
        let stream = s.send(&request)?;
        let a = analyze(&stream, StreamKind::Chirp, Method::Pathchirp, analysis);
        let Some(e) = a.abw_bps else { continue };
        est.push(e);
        let recent = &est[est.len().saturating_sub(params.smoothing)..];
        let mean = recent.iter().sum::<f64>() / recent.len() as f64;
        low_count = if mean < 1.5 * low { low_count + 1 } else { 0 };
        high_count = if mean > 0.66 * high {
            high_count + 1
        } else {
            0
        };
        let at_top = high >= max * 0.999;
        // Near the top rate the sender can probe, and sure of it: the
        // interval of the mean, not the mean, must reach the ceiling.
        if est.len() >= params.smoothing && high_count >= params.edge_chirps && at_top {
            let (m, lo, _) = mean_interval(recent);
            if Ceiling::default().reached(lo, Bound::AtLeast, max) {
                return Ok(s.report(method, m, Bound::AtLeast, m, m, Stop::Ceiling));
            }
        }
        let moves = low_count >= params.edge_chirps
            || (high_count >= params.edge_chirps && !at_top && low > max * 1e-4);
        if moves {
            // Around the mean, geometrically, never above the link.
            high = (mean * params.span.sqrt()).min(max);
            low = high / params.span;
            est.clear();
            (low_count, high_count) = (0, 0);
            continue;
        }
        if est.len() >= params.smoothing {
            let (m, lo, hi) = mean_interval(&est);
            if (hi - lo) / 2.0 <= params.stable_tolerance * m {
                return Ok(s.report(method, m, Bound::Exact, lo, hi, Stop::Stable));
            }
        }
    }
    // pathChirp prints nothing before it has `smoothing` chirps to average.
    if est.len() >= params.smoothing {
        let (m, lo, hi) = mean_interval(&est);
        return Ok(s.report(method, m, Bound::Exact, lo, hi, Stop::Budget));
    }
    Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_interval_by_hand() {
        // 1..=5: mean 3, sample variance 2.5, half 1.96 * sqrt(0.5).
        let (m, lo, hi) = mean_interval(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        let half = 1.96 * 0.5f64.sqrt();
        assert_eq!(m, 3.0);
        assert!((lo - (3.0 - half)).abs() < 1e-12 && (hi - (3.0 + half)).abs() < 1e-12);
        assert_eq!(mean_interval(&[4.0]), (4.0, 4.0, 4.0));
    }
}
