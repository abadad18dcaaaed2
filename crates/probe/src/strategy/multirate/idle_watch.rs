//! The idle check of the multi-rate strategy: where its streams agree on
//! a rate as fast as the link delivered any of them, lone probes at
//! Poisson-spaced moments look for the queues the streams may all have
//! missed (an ON/OFF source's idle stretches). See the strategy's notes.

use super::super::session::Method as Strategy;
use super::super::session::{BusyWatch, Report, Session, Stop, StrategyError};
use tightlink_core::channel::StreamRequest;
use tightlink_core::decision::busy::{busy_share, BusyShare};
use tightlink_core::stream::{arrival_rate_bps, arrivals, GapTolerance};
use tightlink_core::Bound;

/// A stable answer this close to the fastest any sub-stream of the run
/// was delivered at reads the tight link idle ([`idle_watch`]).
pub(super) const IDLE_SHARE: f64 = 0.97;

/// Lone probes the idle check sends, and their mean spacing: 300 ms,
/// about fifteen ON/OFF cycles of the lab's source (2 ms ON a tenth of
/// the time), for 227 KB of 1514-byte probes.
pub(super) const WATCH_PROBES: usize = 150;
const WATCH_MEAN_GAP_NS: f64 = 2e6;

/// The least queueing a busy probe shows: stamps on one host jitter by a
/// few microseconds.
const WATCH_LEAST_THRESHOLD_NS: f64 = 20_000.0;

/// The fastest any sub-stream of `streams` was delivered at (8 packets
/// received at least): the tight link's capacity where one crossed it in
/// an idle moment, under it otherwise.
pub(super) fn fastest_delivery_bps(streams: &[tightlink_core::ProbeStream]) -> f64 {
    let mut fastest = 0.0f64;
    for st in streams {
        for sub in st.sub_streams(GapTolerance::default()) {
            let arrived = arrivals(&st.packets[sub.start..sub.end]);
            if arrived.len() >= 8 {
                fastest = fastest.max(arrival_rate_bps(&arrived).unwrap_or(0.0));
            }
        }
    }
    fastest
}

/// After streams that agree on the idle link (`idle_bps`, as fast as any
/// sub-stream was delivered): lone probes ([`lone_probes`]). Where more
/// than `tol` of them found a queue or were lost, the streams fell in
/// idle stretches of a link that is busy that share of the time: the
/// answer is [`busy_report`]. `None` (the stable answer stands)
/// otherwise, or where the budget has no room. On the lab's ON/OFF
/// source 57 of 58 `stable` runs read the idle link, most 15-35 % over
/// the truth; lone probes over 0.7-0.9 s (Spruce's pairs' first
/// packets, six runs) found it busy 13-38 % of the time against 17-39 %
/// the counters showed, and `quiet` at most 1 %, a tbf under CBR at 60 %
/// (whose bucket lets a lone probe through) 0-10 %.
pub(super) fn idle_watch(
    s: &mut Session,
    method: Strategy,
    idle_bps: f64,
    size_bytes: u32,
    tol: f64,
) -> Result<Option<Report>, StrategyError> {
    let Some((b, span_ns)) = lone_probes(s, idle_bps, size_bytes)? else {
        return Ok(None);
    };
    Ok((b.share() > tol).then(|| busy_report(s, method, idle_bps, b, span_ns)))
}

/// 150 lone probes at exponential gaps of 2 ms mean
/// (`tightlink_core::decision::busy`): their busy share (a queue of two
/// probes' service at `line_bps`, 20 us at least, or lost) and their
/// span. `None` where the budget has no room or too few came back.
fn lone_probes(
    s: &mut Session,
    line_bps: f64,
    size_bytes: u32,
) -> Result<Option<(BusyShare, i64)>, StrategyError> {
    let mut rng = tightlink_core::rng::Rng::new(0x1d1e);
    let mut t = 0.0f64;
    let mut times = Vec::with_capacity(WATCH_PROBES);
    for _ in 0..WATCH_PROBES {
        times.push(t.round() as i64);
        t += rng.exp(WATCH_MEAN_GAP_NS);
    }
    let request = StreamRequest::from_send_times(&times, size_bytes);
    if !(line_bps > 0.0 && s.fits(request.bytes())) {
        return Ok(None);
    }
    let stream = s.send(&request)?;
    let threshold_ns = (2.0 * 8e9 * size_bytes as f64 / line_bps).max(WATCH_LEAST_THRESHOLD_NS);
    let span_ns = times.last().copied().unwrap_or(0);
    Ok(busy_share(&stream, threshold_ns).map(|b| (b, span_ns)))
}

/// The idle rate times the idle share, stop `swings`, its range from the
/// share's 90 % interval.
fn busy_report(s: &Session, method: Strategy, idle_bps: f64, b: BusyShare, span_ns: i64) -> Report {
    let (lo, hi) = b.interval(1.645);
    Report {
        busy: Some(BusyWatch {
            idle_bps,
            busy: b.busy,
            probes: b.samples,
            span_ns,
        }),
        ..s.report(
            method,
            idle_bps * (1.0 - b.share()),
            Bound::Exact,
            idle_bps * (1.0 - hi),
            idle_bps * (1.0 - lo),
            Stop::Swings,
        )
    }
}
