//! Single-rate streams: PRC-MT on raw gaps (\[BASS\] IV-B) and on the gaps
//! BASS kept (\[BASS\] V), Pathload's trend test (IMR-Pathload 3), PCT/PDT
//! after IMR de-noising (IMR 4), and IGI/PTR trains.

use super::base::*;
use super::delays::*;
use super::params::*;

/// A single-rate stream read as it came (IGI/PTR: its trains' gaps).
pub(super) fn read_single_rate(
    room: &mut Analyzer,
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    _tracker: &mut BartTracker,
) -> Analysis {
    single_rate(stream, method, params, base, &mut room.gaps)
}

/// What PRC-MT made of the packets it saw lost, when any.
pub(super) fn loss_reason(o: &crate::decision::prcmt::PrcmtOutcome) -> Option<String> {
    use crate::decision::prcmt::LossReading;
    let pct = o.loss_share * 100.0;
    match o.loss {
        LossReading::None => None,
        LossReading::Random => Some(format!(
            "lost {pct:.1} % of the bytes, not like a full queue: read as random loss"
        )),
        LossReading::Congestion => Some(format!(
            "lost {pct:.1} % of the bytes, heavy or late in the stream: a full queue"
        )),
    }
}

pub(super) fn from_trend(base: Analysis, t: TrendOutcome) -> Analysis {
    Analysis {
        decision: Some(t.decision),
        bound: single_bound(t.decision),
        reason: t.reason.map(str::to_string),
        detail: Detail {
            pct: t.pct,
            pdt: t.pdt,
            kept_gaps: Some(t.values),
            ..Detail::default()
        },
        ..base
    }
}

/// A single-rate stream that arrived in few receive batches but is long
/// enough for the delay test: it is above the available bandwidth when
/// its queue grew ([`queue_grew_over`]), below otherwise.
pub(super) fn decided_by_delay(stream: &ProbeStream, base: &Analysis) -> Option<Analysis> {
    let (batches, grew) = few_batches_queue_grew(stream, 0, stream.len())?;
    let decision = if grew {
        Decision::Above
    } else {
        Decision::Below
    };
    Some(Analysis {
        decision: Some(decision),
        bound: single_bound(decision),
        reason: Some(format!(
            "{batches} receive batches, too few for BASS: read from the lowest delays, \
             which {} by {:.0} % of the stream's time",
            if grew { "rose" } else { "did not rise" },
            100.0 / DELAY_RISE_DIVISOR as f64
        )),
        detail: Detail {
            send_rate_bps: stream.avg_rate_bps(),
            ..Detail::default()
        },
        ..base.clone()
    })
}

pub(super) fn single_rate(
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    room: &mut GapsRoom,
) -> Analysis {
    match method {
        Method::Prcmt | Method::PrcmtBass => prcmt_stream(stream, method, params, base, room),
        Method::Igi => igi_stream(stream, params, base),
        Method::Pathload => from_trend(base, pathload_trend(stream, &params.pathload)),
        Method::ImrAvg | Method::ImrWavelet => {
            if stream.loss_fraction() >= params.pathload.high_loss {
                // IMR-Pathload keeps Pathload's fleet logic.
                return from_trend(base, pathload_trend(stream, &params.pathload));
            }
            let owd: Vec<f64> = stream.relative_owds().into_iter().map(|o| o.1).collect();
            let series = if method == Method::ImrAvg {
                window_average(&owd, params.imr_window.length(owd.len()))
            } else {
                d4_approximation(&owd, params.wavelet_levels)
            };
            from_trend(base, trend_of_series(&series, &params.pathload))
        }
        _ => unreachable!("multi-rate methods are dispatched by kind"),
    }
}

/// No answer, the decision ambiguous, and why.
fn ambiguous(b: Analysis, why: &str) -> Analysis {
    Analysis {
        decision: Some(Decision::Ambiguous),
        ..none_with(b, why)
    }
}

/// PRC-MT's decision on one stream (after BASS for `prcmt-bass`).
fn prcmt_stream(
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    room: &mut GapsRoom,
) -> Analysis {
    // PRC-MT's loss rule reads over 20 % lost as a full queue; over half
    // lost leaves too few gaps to time, but is the same evidence, only
    // stronger: "above". (Left out as undecided, every stream sent while
    // one ON/OFF source saturated the link was dropped from the search,
    // which then read only the idle moments: "at least 8.8 Gbit/s" where
    // the streams' mean truth was 4.7.)
    if stream.loss_fraction() > params.max_loss {
        return Analysis {
            decision: Some(Decision::Above),
            bound: single_bound(Decision::Above),
            ..none_with(
                base,
                "over half the stream lost: a full queue or a policer (PRC-MT's loss rule)",
            )
        };
    }
    let GapsRoom {
        raw: gaps, scratch, ..
    } = room;
    let (events, kept) = scratch.bass_room();
    stream.all_gaps_into(gaps);
    let gaps: &[Gap] = gaps;
    let total = gaps.len();
    let outcome = if method == Method::PrcmtBass {
        match prcmt_after_bass_with(gaps, params.bass, params.prcmt_tolerance, events, kept) {
            Ok(x) => Some(x),
            Err(BassPrcmtError::NoCompleteEvent) => {
                return ambiguous(base, "no complete buffering event in the stream")
            }
            Err(BassPrcmtError::NoRates) => None,
        }
    } else {
        prcmt(gaps, params.prcmt_tolerance).map(|o| (o, total))
    };
    if method == Method::PrcmtBass {
        if let Some(a) = decided_by_delay(stream, &base) {
            return a;
        }
    }
    match outcome {
        None => ambiguous(base, "receive times do not advance"),
        Some((o, kept)) => Analysis {
            decision: Some(o.decision),
            bound: single_bound(o.decision),
            reason: loss_reason(&o),
            detail: Detail {
                send_rate_bps: Some(o.send_rate_bps),
                recv_rate_bps: Some(o.recv_rate_bps),
                kept_gaps: Some(kept),
                gaps_total: Some(total),
                ..Detail::default()
            },
            ..base
        },
    }
}

/// IGI's turning point and estimate on one train (PTR beside it).
fn igi_stream(stream: &ProbeStream, params: &AnalysisParams, base: Analysis) -> Analysis {
    if stream.receive_batch_count().is_some() {
        let how = stamped_in_batches(stream).unwrap_or_default();
        return ambiguous(
            base,
            &format!(
                "{how} (interrupt coalescence): IGI reads single gaps, and the batches \
                 replace them"
            ),
        );
    }
    match igi_train(stream, params.capacity_bps, &params.igi) {
        None => ambiguous(base, "no two packets received in order, or no capacity"),
        Some(t) if t.igi_bps <= 0.0 => Analysis {
            decision: Some(Decision::Above),
            detail: Detail {
                recv_rate_bps: Some(t.ptr_bps),
                capacity_bps: Some(t.capacity_bps),
                ..Detail::default()
            },
            ..none_with(
                base,
                "the increased gaps carry the whole capacity: IGI reads no available bandwidth",
            )
        },
        Some(t) => {
            let decision = if t.stretched {
                Decision::Above
            } else {
                Decision::Below
            };
            // The decision is the turning-point test; the number is
            // IGI's estimate (PTR in recv_rate_bps), whatever side.
            Analysis {
                decision: Some(decision),
                bound: Bound::Exact,
                abw_bps: Some(t.igi_bps),
                detail: Detail {
                    send_rate_bps: stream.avg_rate_bps(),
                    recv_rate_bps: Some(t.ptr_bps),
                    capacity_bps: Some(t.capacity_bps),
                    ..Detail::default()
                },
                ..base
            }
        }
    }
}
