//! One entry point for every method: a probe stream in, a decision (single-
//! rate streams) or an estimate (multi-rate streams) out, with the reason
//! when the stream cannot say.
//!
//! Methods and the paper sections they follow:
//! - `prcmt`: PRC-MT on raw gaps (BASS IV-B);
//! - `prcmt+bass`: PRC-MT on the gaps BASS kept (BASS V);
//! - `pathload`: Pathload's trend test (IMR-Pathload 3; Pathload 1.3.2);
//! - `imr-avg`, `imr-wavelet`: PCT/PDT after IMR de-noising (IMR 4);
//! - `multirate`: multi-pass smoothing + window (BASS VI-B); with the
//!   tight link's capacity known, met halfway by the queue fit;
//! - `multirate-single-pass`: single-pass BASS + window (BASS VI-B, Fig. 14);
//! - `multirate-prcmt-dp1`, `-dp2`: Multi-rate PRC-MT (BASS VI-D).

mod base;
mod chirp;
mod delays;
#[cfg(feature = "serde")]
mod json;
mod method;
mod multi_rate;
mod multi_rate_gaps;
mod pairs;
mod params;
mod queue_fit;
mod single_rate;
mod steps;
#[cfg(test)]
mod tests;

use base::{none_with, BartTracker, Bound, Decision, ProbeStream, StreamKind};
pub use base::{Analysis, Analyzer, Detail, Method};
pub use method::{Registered, REGISTRY};
pub use multi_rate::loss_grows_with_rate;
pub use params::{AnalysisParams, MultirateLoss};

/// Runs `method` on `stream`, read as a stream of `kind`. `bart` starts
/// a fresh tracker (see [`analyze_tracked`] to carry one across streams).
/// Many streams in a row: [`Analyzer`] reuses its memory between them.
pub fn analyze(
    stream: &ProbeStream,
    kind: StreamKind,
    method: Method,
    params: &AnalysisParams,
) -> Analysis {
    Analyzer::new().analyze(stream, kind, method, params)
}

/// [`analyze`], with `bart`'s tracker carried in from the streams before
/// (other methods leave it alone).
pub fn analyze_tracked(
    stream: &ProbeStream,
    kind: StreamKind,
    method: Method,
    params: &AnalysisParams,
    tracker: &mut BartTracker,
) -> Analysis {
    Analyzer::new().analyze_tracked(stream, kind, method, params, tracker)
}

impl Analyzer {
    /// An analyzer with no memory yet: it grows with the first streams.
    pub fn new() -> Self {
        Self::default()
    }

    /// [`analyze`], reusing this analyzer's memory.
    pub fn analyze(
        &mut self,
        stream: &ProbeStream,
        kind: StreamKind,
        method: Method,
        params: &AnalysisParams,
    ) -> Analysis {
        let mut tracker = BartTracker::new(params.bart);
        self.analyze_tracked(stream, kind, method, params, &mut tracker)
    }

    /// [`analyze_tracked`], reusing this analyzer's memory.
    pub fn analyze_tracked(
        &mut self,
        stream: &ProbeStream,
        kind: StreamKind,
        method: Method,
        params: &AnalysisParams,
        tracker: &mut BartTracker,
    ) -> Analysis {
        analyze_with(self, stream, kind, method, params, tracker)
    }
}

fn analyze_with(
    room: &mut Analyzer,
    stream: &ProbeStream,
    kind: StreamKind,
    method: Method,
    params: &AnalysisParams,
    tracker: &mut BartTracker,
) -> Analysis {
    let received = stream.received_count();
    let base = Analysis {
        stream_id: stream.id,
        method,
        kind,
        packets: stream.len(),
        received,
        avg_rate_bps: stream.avg_rate_bps(),
        decision: None,
        abw_bps: None,
        bound: Bound::None,
        reason: None,
        detail: Detail::default(),
    };
    if method.kind() != kind {
        return none_with(
            base,
            format!(
                "{} needs a {}-rate stream",
                method.name(),
                method.kind().as_str()
            ),
        );
    }
    if stream.len() < 3 || received < 2 {
        let b = none_with(base, "too short: needs 3 packets with 2 received");
        return match kind {
            StreamKind::SingleRate => Analysis {
                decision: Some(Decision::Ambiguous),
                ..b
            },
            StreamKind::MultiRate | StreamKind::Chirp | StreamKind::Pairs => b,
        };
    }
    if base.avg_rate_bps.is_none() {
        return none_with(base, "send times do not advance: no probing rate");
    }
    method
        .registered()
        .read(room, stream, params, base, tracker)
}
