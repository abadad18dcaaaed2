//! Each multi-rate method's reading of the gaps: multi-pass or single-pass
//! smoothing and the window (\[BASS\] VI-B), TOPP and BART's line, and
//! Multi-rate PRC-MT (\[BASS\] VI-D).

use super::base::*;
use super::delays::*;
use super::params::*;

/// What the gaps of a multi-rate stream say.
#[allow(clippy::too_many_arguments)]
pub(super) fn multi_rate_gaps(
    stream: &ProbeStream,
    subs: &[SubStream],
    loss: f64,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    tracker: &mut BartTracker,
    room: &mut GapsRoom,
) -> Analysis {
    if loss > params.max_loss {
        return none_with(base, "too many losses (over half the stream)");
    }
    if !rates_increase(subs) {
        return none_with(base, "sub-stream rates do not increase through the stream");
    }
    match method {
        Method::Multirate | Method::MultirateSinglePass => {
            smoothed_gaps(stream, subs, method, params, base, room)
        }
        Method::Topp | Method::Bart => topp_line(stream, subs, method, params, base, tracker),
        Method::MultiratePrcmtDp1 | Method::MultiratePrcmtDp2 => {
            prcmt_decisions(stream, subs, method, params, base)
        }
        _ => unreachable!("single-rate methods are dispatched by kind"),
    }
}

/// BASS's reading: the gaps smoothed in many passes (or one), then the
/// rate where they stay over their send gaps.
fn smoothed_gaps(
    stream: &ProbeStream,
    subs: &[SubStream],
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    room: &mut GapsRoom,
) -> Analysis {
    let mp_params = params.multipass_smoothing();
    let GapsRoom {
        raw: gaps,
        scratch,
        smoothed,
    } = room;
    stream.all_gaps_into(gaps);
    if method == Method::Multirate {
        multipass_smooth_into(gaps, mp_params, scratch, smoothed);
    } else {
        single_pass_smooth_into(gaps, mp_params, scratch, smoothed);
    }
    let (gaps, smoothed): (&[Gap], &Multipass) = (gaps, smoothed);
    let detail = Detail {
        kept_gaps: Some(smoothed.gaps.len()),
        gaps_total: Some(gaps.len()),
        passes: Some(smoothed.passes),
        ..Detail::default()
    };
    if smoothed.gaps.len() < 2 {
        return Analysis {
            detail,
            ..none_with(base, "no complete buffering event in the stream")
        };
    }
    let min_suffix = (mp_params.window / 2).max(1);
    match estimate_from_smoothed(
        smoothed,
        gaps,
        subs,
        params.consistency,
        mp_params.exceed_tolerance,
        min_suffix,
    ) {
        None => Analysis {
            detail,
            ..none_with(base, "smoothed gaps give no probing rate")
        },
        Some(e) => Analysis {
            abw_bps: Some(e.abw_bps),
            bound: e.bound,
            detail,
            ..base
        },
    }
}

/// TOPP's and BART's line through the offered-to-measured points.
fn topp_line(
    stream: &ProbeStream,
    subs: &[SubStream],
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    tracker: &mut BartTracker,
) -> Analysis {
    let mp_params = params.multipass_smoothing();
    let gaps = stream.gaps();
    let (smoothed, passes) = multipass_passes(&gaps, mp_params);
    // Half a sub-stream of gaps at the paper's 64 packets.
    // By floors for TOPP alone: BART's filter, which weighs each
    // stream against the ones before, read the 100 Gbit/s path
    // better from the gaps (7.8 % median error against 12.7 over
    // 30 seeds), TOPP's single line far worse (76 % against 37).
    let by_floors = method == Method::Topp;
    let points = topp_points_with(&smoothed, subs, 8, |s| {
        few_batches_ratio(stream, s.start, s.end, by_floors)
    });
    let detail = Detail {
        kept_gaps: Some(smoothed.len()),
        gaps_total: Some(gaps.len()),
        passes: Some(passes),
        ..Detail::default()
    };
    // Both read the same line through the points: TOPP from this
    // stream alone, BART from its filter carried across streams.
    let read = if method == Method::Bart {
        tracker.update(&points).map(|e| {
            let c = e.capacity_bps.is_finite().then_some(e.capacity_bps);
            (e.abw_bps, e.bound, c)
        })
    } else {
        topp(&points, mp_params.exceed_tolerance).map(|e| (e.abw_bps, e.bound, e.capacity_bps))
    };
    match read {
        None => Analysis {
            detail,
            ..none_with(base, "no sub-stream kept enough gaps after smoothing")
        },
        Some((abw_bps, bound, capacity_bps)) => Analysis {
            abw_bps: Some(abw_bps),
            bound,
            detail: Detail {
                capacity_bps,
                ..detail
            },
            ..base
        },
    }
}

/// Multi-rate PRC-MT: each rate's trend decision, then the policy.
fn prcmt_decisions(
    stream: &ProbeStream,
    subs: &[SubStream],
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
) -> Analysis {
    let mut decisions = per_rate_decisions(stream, subs, params.bass, params.prcmt_tolerance);
    // A sub-stream in few receive batches is decided by its lowest
    // delays, as a single-rate stream is (at 100 Gbit/s a
    // 640-packet sub-stream spans 4-7 batches).
    for (d, s) in decisions.iter_mut().zip(subs) {
        if let Some((_, grew)) = few_batches_queue_grew(stream, s.start, s.end) {
            *d = Some(if grew {
                Decision::Above
            } else {
                Decision::Below
            });
        }
    }
    let rates: Vec<f64> = subs.iter().map(|s| s.rate_bps).collect();
    let policy = if method == Method::MultiratePrcmtDp1 {
        Policy::Dp1
    } else {
        Policy::Dp2
    };
    let detail = Detail {
        per_rate: rates
            .iter()
            .copied()
            .zip(decisions.iter().copied())
            .collect(),
        ..Detail::default()
    };
    match apply_policy(&rates, &decisions, policy) {
        None => Analysis {
            detail,
            ..none_with(base, "no sub-stream could be decided")
        },
        Some(e) => Analysis {
            abw_bps: Some(e.abw_bps),
            bound: e.bound,
            detail,
            ..base
        },
    }
}
