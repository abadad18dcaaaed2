//! PRC-MT search (\[BASS\], section IV-B; improved with BASS, section V):
//!
//! 1. The asymptotic dispersion rate (ADR): the receive rate of a train
//!    sent at the sender's link rate, after BASS. It is at least the
//!    available bandwidth.
//! 2. Stream length: streams at the ADR of 32, 64, 128 and 320 packets;
//!    the shortest whose average receive rate the next longer one does not
//!    change by more than 5 % (PRC-MT's rule; the paper's testbed chose 320).
//! 3. Binary search between 0 and the ADR with PRC-MT + BASS decisions,
//!    one stream per step, until the interval is under 2 % of the ADR.
//!    The answer is the interval's middle, its ends the confidence range.

use super::Method as Strategy;
use super::{single_rate_request, Budget, Progress, Report, Session, Stop, StrategyError};
use tightlink_core::channel::Channel;
use tightlink_core::{analyze, AnalysisParams, Bound, Decision, Method, ProbeStream, StreamKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrcmtSearchParams {
    pub size_bytes: u32,
    pub adr_train: usize,
    pub lengths: [usize; 4],
    pub length_tolerance: f64,
    /// Stop when the interval is narrower than this share of the ADR.
    pub resolution: f64,
}

impl Default for PrcmtSearchParams {
    fn default() -> Self {
        PrcmtSearchParams {
            size_bytes: 9000,
            adr_train: 100,
            lengths: [32, 64, 128, 320],
            length_tolerance: 0.05,
            resolution: 0.02,
        }
    }
}

/// Receive rate of a stream after BASS (raw when BASS keeps nothing).
fn recv_rate(stream: &ProbeStream, analysis: &AnalysisParams) -> Option<f64> {
    [Method::PrcmtBass, Method::Prcmt]
        .into_iter()
        .find_map(|m| {
            analyze(stream, StreamKind::SingleRate, m, analysis)
                .detail
                .recv_rate_bps
        })
}

/// The ADR: a train at the sender's link rate.
pub fn measure_adr(
    s: &mut Session,
    size: u32,
    n: usize,
    analysis: &AnalysisParams,
) -> Result<Option<f64>, StrategyError> {
    let req = single_rate_request(s.max_rate_bps(), n, size);
    if !s.fits(req.bytes()) {
        return Ok(None);
    }
    let st = s.send(&req)?;
    Ok(recv_rate(&st, analysis).map(|r| r.min(s.max_rate_bps())))
}

pub fn run(
    channel: &mut dyn Channel,
    p: PrcmtSearchParams,
    analysis: &AnalysisParams,
    budget: Budget,
    progress: Progress,
) -> Result<Report, StrategyError> {
    let mut s = Session::start(channel, budget, progress)?;
    let Some(adr) = measure_adr(&mut s, p.size_bytes, p.adr_train, analysis)? else {
        return Ok(s.report(
            Strategy::Prcmt,
            0.0,
            Bound::None,
            0.0,
            0.0,
            Stop::NoUsableAdrTrain,
        ));
    };
    // Stream length.
    let mut len = p.lengths[p.lengths.len() - 1];
    let mut prev: Option<(usize, f64)> = None;
    for &n in &p.lengths {
        let req = single_rate_request(adr, n, p.size_bytes);
        if !s.fits(req.bytes()) {
            break;
        }
        let st = s.send(&req)?;
        if let Some(r) = recv_rate(&st, analysis) {
            if let Some((pn, pr)) = prev {
                if (r / pr - 1.0).abs() <= p.length_tolerance {
                    len = pn;
                    break;
                }
            }
            prev = Some((n, r));
        }
    }
    // Binary search.
    let (mut lo, mut hi) = (0.0f64, adr);
    let (mut seen_above, mut seen_below) = (false, false);
    let mut stop = Stop::Converged;
    while hi - lo > p.resolution * adr {
        let mid = 0.5 * (lo + hi);
        let req = single_rate_request(mid, len, p.size_bytes);
        if !s.fits(req.bytes()) {
            stop = Stop::Budget;
            break;
        }
        let st = s.send(&req)?;
        match analyze(&st, StreamKind::SingleRate, Method::PrcmtBass, analysis).decision {
            Some(Decision::Above) => {
                hi = mid;
                seen_above = true;
            }
            Some(Decision::Below) => {
                lo = mid;
                seen_below = true;
            }
            // Undecided: try the same rate again (the budget bounds it).
            _ => {}
        }
    }
    let estimate = 0.5 * (lo + hi);
    let bound = match (seen_above, seen_below) {
        (false, true) => Bound::AtLeast,
        (true, false) => Bound::AtMost,
        (false, false) => Bound::None,
        (true, true) => Bound::Exact,
    };
    let (value, bound) = match bound {
        Bound::AtLeast => (lo, bound),
        Bound::AtMost => (hi, bound),
        _ => (estimate, bound),
    };
    Ok(s.report(Strategy::Prcmt, value, bound, lo, hi, stop))
}
