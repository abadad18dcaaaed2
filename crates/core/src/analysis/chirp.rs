//! Chirps: pathChirp's excursion reading (the high-speed host paper,
//! section on chirps; Ribeiro et al. 2003).

use super::base::*;
use super::params::*;

/// A chirp ([`super::method::Read`]).
pub(super) fn read_chirp(
    _room: &mut Analyzer,
    stream: &ProbeStream,
    _method: Method,
    params: &AnalysisParams,
    base: Analysis,
    _tracker: &mut BartTracker,
) -> Analysis {
    chirp(stream, params, base)
}

/// One chirp read by pathChirp's excursions; `kept_gaps` counts the gaps
/// before any receive batches.
pub(super) fn chirp(stream: &ProbeStream, params: &AnalysisParams, base: Analysis) -> Analysis {
    let gaps_total = Some(stream.len().saturating_sub(1));
    match chirp_estimate(stream, &params.chirp) {
        Err(e) => Analysis {
            detail: Detail {
                gaps_total,
                ..Detail::default()
            },
            ..none_with(base, e.to_string())
        },
        Ok(e) => Analysis {
            abw_bps: Some(e.abw_bps),
            bound: e.bound,
            detail: Detail {
                kept_gaps: Some(e.gaps_used),
                gaps_total,
                ..Detail::default()
            },
            ..base
        },
    }
}
