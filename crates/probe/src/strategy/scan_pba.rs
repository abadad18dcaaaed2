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
//! whole, and they read its burst rate: `scan-pba` and `auto` (either
//! branch) end with back-to-back trains that show such a bucket and
//! answer its sustained rate (`after_shaper_train`; not in the papers).

use super::multirate::{self, wide_scan, MultirateParams, WideScan};
use super::prcmt_search::{bucket_bytes, lengths_for_batches, probabilistic_bisection, Bisect};
use super::prcmt_search::{PrcmtSearchParams, ProbabilisticParams};
use super::Method as Strategy;
use super::{single_rate_request, ShaperSeen};
use super::{Budget, Progress, Report, Session, Stop, StrategyError};
use tightlink_core::capacity::shaper::{train_shape_batched, TrainShape};
use tightlink_core::channel::Channel;
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
            scan: MultirateParams::default(),
            // Measured 2026-11-26, 40 seeds of the simulator's default and
            // smoothed 10 Gbit/s paths (median / p90 error, probe MB):
            // tolerance 0.08 and scan_sd 0.15: 3.3 / 8.0 % at 8.9 MB,
            // 1.5 / 2.7 % at 7.5; 0.08 and 0.2 (these): 2.6 / 6.1 % at
            // 9.5, 1.5 / 4.0 % at 8.1; 0.08 and 0.3: 2.5 / 6.7 % at 9.8;
            // 0.07 and 0.2: 2.8 / 6.6 % at 10.9; 0.07 and 0.3: 1.9 /
            // 7.0 % at 11.2. 20 seeds: 0.1 and 0.1: 4.7 / 13.0 % at 5.8;
            // 0.06 and 0.1: 3.5 / 5.5 % at 10.9; 0.04: over 20 MB.
            // Tried and not kept: four packets at the sender's top rate
            // before each stream, left out of its reading, to empty a
            // token bucket (simulator 4.1 % and 4.6 % where 2.5 and
            // 1.8 %: the queue they leave drains into the stream); 128
            // or 192 packets at least on the lab (quiet still +2.1 and
            // +1.7 %, 3.6 and 5.1 MB); scan_sd 0.03-0.05 there (the wide
            // scan's rates are 200 Mbit/s apart on a 1 Gbit/s sender:
            // it is not precise there either).
            bisection: ProbabilisticParams {
                tolerance: 0.08,
                ..Default::default()
            },
            scan_sd: 0.2,
            scan_lapse: 0.1,
        }
    }
}

/// `scan-pba`, or with `auto` set the default `auto`: the wide scan;
/// then, where the receiver stamped it in batches (interrupt
/// coalescence), this bisection, and where it stamped each packet, the
/// multi-rate strategy's streams. Under 125 us batches a multi-rate
/// stream's answer scatters by several percent (the simulator's default
/// path: 2.7 / 7.1 % median / p90 at 20.8 MB, against 2.5 / 5.8 % at
/// 9.2 MB for the bisection); stamped one by one it reads a shaper to a
/// few tenths of a percent, where the single-rate streams read its
/// bucket 1-2 % high. The report names the strategy that ran.
pub fn run(
    channel: &mut dyn Channel,
    p: ScanPbaParams,
    analysis: &AnalysisParams,
    budget: Budget,
    progress: Progress,
    auto: bool,
) -> Result<Report, StrategyError> {
    let mut s = Session::start(channel, budget, progress)?;
    // The streams leave room for one shaper train and two streams: a
    // search that spends the whole budget (a bisection fighting a large
    // bucket on the lab spent its 60 streams) would leave none for it.
    let train = shaper_train_bytes(s.max_rate_bps()).ceil() as u64 + u64::from(p.scan.size_bytes);
    s.budget.max_bytes = budget.max_bytes.saturating_sub(train);
    s.budget.max_streams = budget.max_streams.saturating_sub(2);
    let scan = wide_scan(&mut s, &p.scan, analysis)?;
    let report = match scan {
        Some(w) if auto && w.batch_interval_ns.is_none() => {
            multirate::after_scan(&mut s, p.scan, analysis, Some(w))?
        }
        _ => bisect_after_scan(&mut s, p, analysis, scan)?,
    };
    s.budget = budget;
    after_shaper_train(&mut s, report, p.scan.size_bytes)
}

/// The back-to-back train sent after the answer lasts this long at its
/// rate, twice the answer or the sender's top rate if less (1.5 MB at
/// 10 Gbit/s with 9000-byte packets: the default's 9.2 MB median becomes
/// 11.3 with the second trains), and holds at least
/// [`SHAPER_TRAIN_MIN_BYTES`]. Behind a bucket of B bytes the head is
/// B r / (r - token rate) for a train sent at r: with a token rate half
/// of r, buckets up to about 400 KB leave a 10 Gbit/s train a tail of
/// eight or more 125 us receive batches to read the token rate from; at
/// 600 Mbit/s against 200, a 256 KB bucket's head is 384 KB.
const SHAPER_TRAIN_NS: f64 = 1.2e6;
const SHAPER_TRAIN_MIN_BYTES: f64 = 512e3;
/// The longest wait for a bucket to refill before the train.
const MAX_REFILL_NS: f64 = 100e6;

/// A shaper train's bytes at `rate_bps`.
fn shaper_train_bytes(rate_bps: f64) -> f64 {
    (SHAPER_TRAIN_NS * rate_bps / 8e9).max(SHAPER_TRAIN_MIN_BYTES)
}

/// Whether one train looks shaped: its head arrived at 0.6 times the rate
/// it was sent at or more (a bucket passes it as sent; a train that met
/// cross traffic from its first packet arrives slower; at 0.8, 2 of 8
/// lab runs whose sender sent the head late missed the bucket), 1.25 times its
/// tail's rate or more, with 16 packets or more ahead of the tail. On the
/// simulator's FIFO paths (10 seeds each of the bursty and smoothed
/// 10 Gbit/s paths, batched and not, the 100 Gbit/s one and the single
/// ON/OFF source) heads read at most 1.17 times their tails, except one
/// ON/OFF train whose tail met an ON period (head 6.5, tail 2.8 Gbit/s:
/// its head had been slowed, at 0.65 of the send rate); a 5 Gbit/s
/// shaper's 256 KB bucket read 2.0 times, a 7 Gbit/s one's 1.27.
fn looks_shaped(shape: &TrainShape, send_bps: f64) -> bool {
    shape
        .head_rate_bps
        .is_some_and(|h| h >= 0.6 * send_bps && h >= 1.25 * shape.tail_rate_bps)
        && shape.burst_bytes >= 16.0 * shape.size_bytes as f64
}

/// One back-to-back train at `rate_bps`: its shape, the rate
/// it was sent at, its bytes and its truth (`None`: no room, or too few
/// batches).
type ShaperTrain = (TrainShape, f64, u64, Option<f64>);

fn shaper_train(
    s: &mut Session,
    size_bytes: u32,
    rate_bps: f64,
) -> Result<Option<ShaperTrain>, StrategyError> {
    let n = ((shaper_train_bytes(rate_bps) / size_bytes as f64).ceil() as usize).max(16);
    let req = single_rate_request(rate_bps, n, size_bytes);
    if !s.fits(req.bytes()) {
        return Ok(None);
    }
    let (train, truth) = s.send_check(&req)?;
    let p = &train.packets;
    let span_ns = (p[p.len() - 1].send_ns - p[0].send_ns) as f64;
    let sent_bytes: f64 = p[1..].iter().map(|k| k.size_bytes as f64).sum();
    let send_bps = sent_bytes * 8e9 / span_ns.max(1.0);
    Ok(train_shape_batched(&train).map(|sh| (sh, send_bps, req.bytes(), truth)))
}

/// After the strategy answered (exact or "at least"): one back-to-back
/// train at twice the answer (at most the top rate). The strategy's streams, a
/// few hundred KB each, pass unqueued on a token bucket as large as they
/// are and read its burst rate (a 5 Gbit/s shaper with a 256 KB bucket
/// read 9.27 Gbit/s "exact"); the train's head passes on the bucket and
/// its tail at the token rate. When the train looks shaped
/// ([`looks_shaped`]) and its tail is slower than the answer, a second
/// train after the bucket has had time to refill must look shaped too,
/// with a tail within 10 % of the first (a burst of cross traffic that
/// slowed one tail seldom slows the next the same way); the answer is
/// then the two tails' mean, a dispersion rate (on a FIFO path never
/// under the available bandwidth), its range ±5 %, and the report says
/// what the streams read.
fn after_shaper_train(
    s: &mut Session,
    report: Report,
    size_bytes: u32,
) -> Result<Report, StrategyError> {
    if !matches!(report.bound, Bound::Exact | Bound::AtLeast) {
        return Ok(report);
    }
    // The same answer, with the trains in its cost.
    let unchanged = |s: &Session| {
        s.report(
            report.method,
            report.available_bandwidth_bps,
            report.bound,
            report.low_bps,
            report.high_bps,
            report.stop,
        )
    };
    // Twice the answer, at most the top rate: a bucket the answer
    // overstates passes a head of at most twice its bytes at that rate,
    // and a FIFO path queues one answer's worth of the train, not the
    // sender's whole rate.
    let rate = (2.0 * report.available_bandwidth_bps).min(s.max_rate_bps());
    // The streams just sent may have emptied the bucket: time for one
    // as large as the train to refill at half the answer's rate (on the
    // lab's 200 Mbit/s tbf with a 256 KB bucket a train sent at once
    // showed 18 KB).
    let refill_ns = 2.0 * shaper_train_bytes(rate) * 8e9 / report.available_bandwidth_bps.max(1.0);
    s.idle(refill_ns.min(MAX_REFILL_NS) as i64);
    let Some((first, send_bps, bytes, truth_1)) = shaper_train(s, size_bytes, rate)? else {
        return Ok(unchanged(s));
    };
    if !looks_shaped(&first, send_bps) || first.tail_rate_bps >= report.available_bandwidth_bps {
        return Ok(unchanged(s));
    }
    // Twice what the bucket needs to refill at the token rate.
    s.idle((2.0 * first.burst_bytes * 8e9 / first.tail_rate_bps) as i64);
    let Some((second, send_bps, _, truth_2)) = shaper_train(s, size_bytes, rate)? else {
        return Ok(unchanged(s));
    };
    let (t1, t2) = (first.tail_rate_bps, second.tail_rate_bps);
    if !looks_shaped(&second, send_bps) || (t2 / t1 - 1.0).abs() > 0.1 {
        return Ok(unchanged(s));
    }
    let tail = 0.5 * (t1 + t2);
    if tail >= report.available_bandwidth_bps {
        return Ok(unchanged(s));
    }
    // The answer is now the trains': their moments count in the truth.
    s.count_truth(truth_1);
    s.count_truth(truth_2);
    Ok(Report {
        shaper: Some(ShaperSeen {
            streams_bps: report.available_bandwidth_bps,
            streams_bound: report.bound,
            head_bps: first.head_rate_bps.unwrap_or(t1),
            tail_bps: tail,
            bucket_bytes: 0.5 * (first.burst_bytes + second.burst_bytes),
            train_bytes: bytes,
        }),
        ..s.report(
            report.method,
            tail,
            Bound::Exact,
            0.95 * tail,
            1.05 * tail,
            Stop::Shaped,
        )
    })
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
    };
    probabilistic_bisection(s, b, posterior, seen, analysis)
}
