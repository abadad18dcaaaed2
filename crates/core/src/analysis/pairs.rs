//! Packet pairs: Spruce (the method families of the high-speed host
//! paper, section on packet pairs; Strauss, Katabi and Kaashoek 2003).

use super::base::*;
use super::params::*;

/// A stream of pairs ([`super::method::Read`]).
pub(super) fn read_pairs(
    _room: &mut Analyzer,
    stream: &ProbeStream,
    _method: Method,
    params: &AnalysisParams,
    base: Analysis,
    _tracker: &mut BartTracker,
) -> Analysis {
    pairs(stream, params, base)
}

/// Spruce over a stream of pairs: the capacity given, else the rate the
/// pairs were sent at (Spruce sends them at the capacity).
pub(super) fn pairs(stream: &ProbeStream, params: &AnalysisParams, base: Analysis) -> Analysis {
    if let Some(how) = stamped_in_batches(stream) {
        return none_with(
            base,
            format!("{how} (interrupt coalescence): a pair's gap is a batch's, not the path's"),
        );
    }
    let sent: Vec<f64> = crate::decision::spruce::pair_gaps(stream)
        .iter()
        .map(|g| g.0)
        .collect();
    let sent_at = crate::stats::median(&sent)
        .filter(|g| *g > 0.0)
        .map(|g| 8.0 * stream.packets[1].size_bytes as f64 * 1e9 / g);
    let Some(capacity) = params.capacity_bps.or(sent_at) else {
        return none_with(base, "no pair with both packets received");
    };
    match spruce_estimate(stream, capacity) {
        None => none_with(base, "no pair with both packets received"),
        Some(e) => Analysis {
            abw_bps: Some(e.abw_bps).filter(|a| *a > 0.0),
            bound: if e.abw_bps > 0.0 {
                Bound::Exact
            } else {
                Bound::None
            },
            reason: (e.abw_bps <= 0.0)
                .then(|| "the pairs' gaps grew by more than the capacity's gap".to_string()),
            detail: Detail {
                kept_gaps: Some(e.pairs_used),
                gaps_total: Some(stream.len() / 2),
                capacity_bps: Some(capacity),
                ..Detail::default()
            },
            ..base
        },
    }
}
