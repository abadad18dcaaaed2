//! `scan-pba` (ours): multi-rate probing's wide scan (\[BASS\], section
//! VI), then probabilistic bisection over PRC-MT + BASS decisions
//! (\[BASS\], sections IV-B and V; as in `prcmt-pba`) from where the scan
//! put the available bandwidth.
//!
//! The scan's answer enters the posterior as an estimate with a normal
//! error (`scan_sd` of it; with chance `scan_lapse` it says nothing), a
//! bound as one decision at its rate. The bisection's streams are
//! single-rate, about four receive batches long (64 packets at least),
//! each at the posterior median, until the posterior's 90 % interval is
//! within `tolerance` of the median. A multi-rate stream after the scan
//! costs five single-rate streams and mostly repeats what the scan said;
//! a single-rate stream at the median halves what is left. It replaces
//! `prcmt-pba`'s ADR train and length rule (about 1.8 MB at 10 Gbit/s)
//! by the scan (2.9 MB), whose answer narrows the prior.
//!
//! Like every short single-rate method it reads a token bucket high: a
//! stream a few percent over the shaper's rate passes unqueued while the
//! bucket lasts, where the multi-rate streams read the receive rate of
//! the queue that builds. Where the receiver stamps packets one by one
//! the bucket is measured first and the decisions weighed for it (see
//! `prcmt-pba`); on the lab's 200 Mbit/s tbf with a 3000-byte bucket it
//! still reads 1-2 % high. A bucket as large as the streams passes them
//! whole, and they read its burst rate: like every closed-loop method,
//! `scan-pba` and `auto` end with the shaper trains of [`super::shaper_train`].

use super::multirate::{self, wide_scan, MultirateParams, WideScan};
use super::prcmt_search::{bucket_bytes, lengths_for_batches, probabilistic_bisection, Bisect};
use super::prcmt_search::{PrcmtSearchParams, ProbabilisticParams};
use super::session::Method as Strategy;
use super::session::{Report, Session, Stop, StrategyError};
use tightlink_core::decision::bisection::Bisection;
use tightlink_core::{AnalysisParams, Bound};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScanPbaParams {
    /// The scan's stream (its rates, packets per rate, probe size).
    pub scan: MultirateParams,
    pub bisection: ProbabilisticParams,
    /// A scan answer's error, relative standard deviation.
    pub scan_sd: f64,
    /// Chance that a scan answer says nothing of the path.
    pub scan_lapse: f64,
}

impl Default for ScanPbaParams {
    fn default() -> Self {
        ScanPbaParams {
            // The scan's rates equal in time, not in packets: as accurate
            // for fewer bytes (docs/evaluation.md, "Measurements behind the strategies' constants").
            scan: MultirateParams {
                equal_time_scan: true,
                ..MultirateParams::default()
            },
            // Tolerance and scan_sd: the pair with the least error for
            // the bytes on the simulator's default and smoothed paths
            // (docs/evaluation.md, "Measurements behind the strategies' constants").
            bisection: ProbabilisticParams {
                tolerance: 0.08,
                ..Default::default()
            },
            scan_sd: 0.2,
            scan_lapse: 0.1,
        }
    }
}

/// `scan-pba` or `auto` with their default parameters.
pub(super) fn run_default(
    s: &mut Session,
    method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = ScanPbaParams::default();
    p.scan.size_bytes = size.unwrap_or(p.scan.size_bytes);
    let auto = method == Strategy::Auto;
    Ok((run(s, p, analysis, auto)?, p.scan.size_bytes))
}

/// `scan-pba`, or with `auto` set the default `auto`: the wide scan;
/// then, where the receiver stamped it in batches (interrupt
/// coalescence) or too little of it arrived to tell
/// ([`multirate::STAMPING_PACKETS`]), this bisection, and where it
/// stamped each packet, the multi-rate strategy's streams. Under 125 us
/// batches a multi-rate stream's answer scatters by several percent (the
/// simulator's default path: 2.7 / 7.1 % median / p90 at 20.8 MB,
/// against 2.5 / 5.8 % at 9.2 MB for the bisection); stamped one by one
/// it reads a shaper to a few tenths of a percent, where the single-rate
/// streams read its bucket 1-2 % high. The report names the strategy
/// that ran.
pub fn run(
    s: &mut Session,
    p: ScanPbaParams,
    analysis: &AnalysisParams,
    auto: bool,
) -> Result<Report, StrategyError> {
    let scan = wide_scan(s, &p.scan, analysis)?;
    match scan {
        Some(w) if auto && w.batch_interval_ns.is_none() && w.stamping_seen => {
            multirate::after_scan(s, p.scan, analysis, Some(w))
        }
        _ => bisect_after_scan(s, p, analysis, scan),
    }
}

/// The bisection from the wide scan's answer on (`None`: no scan).
fn bisect_after_scan(
    s: &mut Session,
    p: ScanPbaParams,
    analysis: &AnalysisParams,
    scan: Option<WideScan>,
) -> Result<Report, StrategyError> {
    let method = Strategy::ScanPba;
    let Some(scan) = scan else {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream));
    };
    let Some(mut posterior) = Bisection::new(s.max_rate_bps(), p.bisection.model) else {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream));
    };
    let seen = match (scan.bound, scan.abw_bps) {
        (Bound::Exact, Some(e)) => {
            posterior.weigh_estimate(e, p.scan_sd, p.scan_lapse);
            (true, true)
        }
        (Bound::AtLeast, Some(e)) => {
            posterior.update(e, false);
            (false, true)
        }
        (Bound::AtMost, Some(e)) => {
            posterior.update(e, true);
            (true, false)
        }
        _ => (false, false),
    };
    // Streams about four receive batches long at the posterior median
    // (the length PRC-MT's rule takes where batches are long).
    let lengths = PrcmtSearchParams::default().lengths;
    let scaled = lengths_for_batches(
        lengths,
        posterior.median(),
        scan.batch_interval_ns,
        p.scan.size_bytes,
    );
    let len = if scaled != lengths { scaled[1] } else { 0 }.max(p.bisection.min_packets);
    let bucket_bytes = if scan.batch_interval_ns.is_none() {
        bucket_bytes(s, p.scan.size_bytes)?
    } else {
        0.0
    };
    let b = Bisect {
        size_bytes: p.scan.size_bytes,
        len,
        params: p.bisection,
        method,
        bucket_bytes,
        swing_top_bps: s.max_rate_bps(),
    };
    probabilistic_bisection(s, b, posterior, seen, analysis)
}
