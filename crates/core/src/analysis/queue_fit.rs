//! `queue-fit`: the fluid queue fitted to a multi-rate stream's delays
//! with the tight link's capacity known, and `multirate` met halfway by it.

use super::base::*;
use super::delays::*;
use super::params::*;

/// A multi-rate stream read by `queue-fit` ([`super::method::Read`]).
pub(super) fn read_queue_fit(
    _room: &mut Analyzer,
    stream: &ProbeStream,
    _method: Method,
    params: &AnalysisParams,
    base: Analysis,
    _tracker: &mut BartTracker,
) -> Analysis {
    queue_fit_analysis(stream, params, base)
}

/// Where the tight link's capacity is known, `multirate`'s exact answer
/// and the queue fit's meet halfway. The two read a stream differently
/// (where the queue starts, at the rates' resolution; every delay pulling
/// on one fluid model) and miss different streams: on `tightlink eval`'s
/// streams the midpoint is within 10 % more often than the bracket rule
/// everywhere and than the fit on bursty paths and at 100 Gbit/s (the fit
/// alone leads on smoothed ones), and it loses less than the fit where
/// the capacity given is too high (docs/evaluation.md). Bounds stay
/// `multirate`'s: the fit's "at least" is the weaker above the rates.
pub(super) fn with_the_queue_fit(
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    a: Analysis,
) -> Analysis {
    let (Method::Multirate, Consistency::Bracket, Some(_), Bound::Exact, Some(e)) = (
        method,
        params.consistency,
        params.capacity_bps,
        a.bound,
        a.abw_bps,
    ) else {
        return a;
    };
    let fit = queue_fit_analysis(stream, params, a.clone());
    match (fit.bound, fit.abw_bps) {
        (Bound::Exact, Some(q)) => Analysis {
            abw_bps: Some(0.5 * (e + q)),
            detail: Detail {
                capacity_bps: fit.detail.capacity_bps,
                ..a.detail
            },
            ..a
        },
        _ => a,
    }
}

/// `queue-fit`: the fluid FIFO fitted to a multi-rate stream's delays
/// with the capacity given (see [`crate::decision::queue_fit`]). The loss
/// rules of the gap methods do not apply: a lost packet is a missing
/// delay, and the queue the fit builds counts every packet sent.
pub(super) fn queue_fit_analysis(
    stream: &ProbeStream,
    params: &AnalysisParams,
    base: Analysis,
) -> Analysis {
    let Some(capacity) = params.capacity_bps else {
        return none_with(
            base,
            "queue-fit needs the tight link's capacity (--capacity, or the trace's capacity_bps)",
        );
    };
    if stream.loss_fraction() > params.max_loss {
        return none_with(base, "too many losses (over half the stream)");
    }
    let subs = stream.sub_streams(params.gap_tolerance);
    if !rates_increase(&subs) {
        return none_with(base, "sub-stream rates do not increase through the stream");
    }
    let (Some(low), Some(high)) = (subs.first(), subs.last()) else {
        return none_with(base, "no probing rate");
    };
    let detail = Detail {
        capacity_bps: Some(capacity),
        ..Detail::default()
    };
    // A queue that overflowed keeps its delays at the buffer's depth: the
    // fit sees them flat. Drop-tail loss that starts at one sub-stream
    // and grows with the rate puts the available bandwidth under it.
    let overflow = (stream.loss_fraction() > 0.0)
        .then(|| {
            first_overflowing_rate(
                stream,
                &subs,
                params.multirate_loss.at_most_unless_congested_above,
            )
        })
        .flatten()
        .filter(|_| loss_grows_with_rate_in(stream, &subs));
    // Packets lost from that sub-stream on were dropped by the full
    // buffer, so their bits never queued; losses before it were random.
    let overflow_from =
        overflow.and_then(|o| subs.iter().find(|s| s.rate_bps >= o).map(|s| s.start));
    let fit = queue_fit(stream, capacity, low.rate_bps, high.rate_bps, overflow_from);
    if let (Some(o), Some(f)) = (overflow, fit) {
        if f.bound == Bound::AtLeast || f.abw_bps >= o {
            return Analysis {
                abw_bps: Some(o),
                bound: Bound::AtMost,
                reason: Some(format!(
                    "a queue overflowed from {:.3} Gbit/s on (its loss grows with the rate)",
                    o / 1e9
                )),
                detail,
                ..base
            };
        }
    }
    match fit {
        None => Analysis {
            detail,
            ..none_with(base, "fewer than four delays received")
        },
        Some(f) => Analysis {
            abw_bps: Some(f.abw_bps),
            bound: f.bound,
            reason: (f.bound != Bound::Exact).then(|| {
                if f.lost_in_noise(low.rate_bps, high.rate_bps) {
                    format!(
                        "no queue stands out of the delays' noise (F {:.1}, under {}; \
                         the fit read {:.3} Gbit/s free)",
                        f.f_stat,
                        MIN_F,
                        f.fitted_bps / 1e9
                    )
                } else {
                    format!(
                        "the delays fit {:.3} Gbit/s free, outside the rates probed",
                        f.fitted_bps / 1e9
                    )
                }
            }),
            detail,
            ..base
        },
    }
}
