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
//!
//! Receive batches: pathChirp leaves its `-J` (packets per "jumbo"
//! element) to the user. Ours sets it as the multi-rate strategy sets its
//! stream length: when a chirp showed receive batches, the next chirp's
//! elements hold enough packets to span `min_batches` of them at the top
//! rate, so that each element holds a packet that ends a batch (up to
//! `max_jumbo`; a chirp that arrived in one or two batches shows no
//! interval, and the next one's elements are twice as long); the chirp is
//! then read one element at a time.

use super::session::{Ceiling, Method as Strategy, Report, Session, Stop, StrategyError};
use tightlink_core::channel::StreamRequest;
use tightlink_core::schedule::{jumbo_chirp_schedule, jumbo_top_rate};
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
    /// Packets per chirp element at first (pathChirp's `-J`; 1: plain).
    pub jumbo: usize,
    /// Receive batches an element must span at the top rate, once a chirp
    /// showed them (0: keep `jumbo`).
    pub min_batches: f64,
    pub max_jumbo: usize,
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
            jumbo: 1,
            min_batches: 1.0,
            max_jumbo: 64,
        }
    }
}

/// pathChirp with its default parameters.
pub(super) fn run_default(
    s: &mut Session,
    _method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = PathchirpParams::default();
    p.size_bytes = size.unwrap_or(p.size_bytes);
    Ok((run(s, p, analysis)?, p.size_bytes))
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
    s: &mut Session,
    params: PathchirpParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    let method = Strategy::Pathchirp;
    let max = s.max_rate_bps();
    let mut high = max;
    let mut low = max / params.span;
    // Estimates of the chirps since the range last moved.
    let mut est: Vec<f64> = Vec::new();
    let (mut low_count, mut high_count) = (0, 0);
    let mut jumbo = params.jumbo.max(1);
    loop {
        // Elements must stay apart on the sender's link.
        let top = high.min(jumbo_top_rate(max, jumbo));
        let sched = jumbo_chirp_schedule(
            low.min(top / 2.0),
            top,
            params.spread,
            params.size_bytes,
            jumbo,
            max,
        );
        let request = StreamRequest::from_send_times(&sched, params.size_bytes);
        if sched.is_empty() || !s.fits(request.bytes()) {
            break;
        }
        let stream = s.send(&request)?;
        let a = analyze(&stream, StreamKind::Chirp, Method::Pathchirp, analysis);
        if params.min_batches > 0.0 {
            let next = match stream.receive_batch_interval_ns() {
                Some(interval_ns) => jumbo_for_batches(&params, interval_ns, high),
                // A chirp inside one or two batches shows no interval:
                // longer elements until one does.
                None if a.abw_bps.is_none() && stream.has_batched_arrivals() => {
                    (jumbo * 2).min(params.max_jumbo.max(1))
                }
                None => jumbo,
            };
            if next != jumbo {
                // Chirps of another element size are not averaged with
                // these.
                jumbo = next;
                est.clear();
                (low_count, high_count) = (0, 0);
            }
        }
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

/// Packets per element so that an element at `top_bps` spans
/// `min_batches` receive batches `interval_ns` apart, and one more (the
/// batch boundary falls anywhere in it); 1 when a packet already does,
/// at most `max_jumbo`.
pub fn jumbo_for_batches(params: &PathchirpParams, interval_ns: f64, top_bps: f64) -> usize {
    let bits = 8.0 * params.size_bytes as f64;
    let needed = (params.min_batches * interval_ns * 1e-9 * top_bps / bits).ceil();
    if !needed.is_finite() || needed < 1.0 {
        return params.jumbo.max(1);
    }
    (needed as usize + 1).clamp(1, params.max_jumbo.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_grow_to_span_a_receive_batch() {
        let p = PathchirpParams::default();
        // 125 us batches at 10 Gbit/s, 9000 B: 125e-6 * 1e10 / 72000 =
        // 17.4 -> 18 packets, and one more.
        assert_eq!(jumbo_for_batches(&p, 125_000.0, 10e9), 19);
        // 10 us batches at 1 Gbit/s, 1000 B: 1.25 -> 2, and one more.
        let small = PathchirpParams {
            size_bytes: 1000,
            ..p
        };
        assert_eq!(jumbo_for_batches(&small, 10_000.0, 1e9), 3);
        assert_eq!(jumbo_for_batches(&p, 1e9, 10e9), 64, "capped");
        assert_eq!(jumbo_for_batches(&p, f64::NAN, 10e9), 1);
    }

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
