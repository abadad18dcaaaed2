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

use crate::decision::bart::{BartParams, BartTracker};
use crate::decision::chirp::{chirp_estimate, ChirpParams};
use crate::decision::igi::{igi_train, IgiParams};
use crate::decision::multirate::{
    apply_policy, estimate_from_smoothed, per_rate_decisions, rates_increase, Consistency, Policy,
};
use crate::decision::prcmt::{prcmt, prcmt_after_bass_with, BassPrcmtError, DEFAULT_TOLERANCE};
use crate::decision::queue_fit::{queue_fit, MIN_F};
use crate::decision::spruce::spruce_estimate;
use crate::decision::topp::{topp, topp_points_with, SubStreamRatio};
use crate::decision::trend::{pathload_trend, trend_of_series, PathloadParams, TrendOutcome};
use crate::decision::{Bound, Decision};
use crate::smoothing::bass::BassParams;
use crate::smoothing::imr::{d4_approximation, window_average, ImrWindow};
use crate::smoothing::multipass::{
    multipass_passes, multipass_smooth_into, single_pass_smooth_into, Multipass, MultipassParams,
    SmoothScratch,
};
use crate::stream::{Gap, GapTolerance, ProbeStream, StreamKind, SubStream};

mod chirp;
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

use chirp::*;
pub use method::{Method, Registered, REGISTRY};
pub use multi_rate::loss_grows_with_rate;
use multi_rate::*;
use multi_rate_gaps::*;
use pairs::*;
pub use params::{AnalysisParams, MultirateLoss};
use queue_fit::*;
use single_rate::*;
use steps::*;

/// What a method said about one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Analysis {
    pub stream_id: u64,
    pub method: Method,
    pub kind: StreamKind,
    pub packets: usize,
    pub received: usize,
    pub avg_rate_bps: Option<f64>,
    /// Single-rate streams only.
    pub decision: Option<Decision>,
    /// Multi-rate streams only.
    pub abw_bps: Option<f64>,
    pub bound: Bound,
    /// Why the stream could not say, or what limited the answer.
    pub reason: Option<String>,
    pub detail: Detail,
}

/// What the method measured on the way (for JSON output and debugging).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Detail {
    pub send_rate_bps: Option<f64>,
    pub recv_rate_bps: Option<f64>,
    pub pct: Option<f64>,
    pub pdt: Option<f64>,
    /// Gaps the smoother kept (of `gaps_total`).
    pub kept_gaps: Option<usize>,
    pub gaps_total: Option<usize>,
    pub passes: Option<usize>,
    /// Multi-rate PRC-MT: (rate, decision) per sub-stream.
    pub per_rate: Vec<(f64, Option<Decision>)>,
    /// TOPP and BART: the tight link's capacity from the line's slope.
    pub capacity_bps: Option<f64>,
    /// Multi-rate: the rate the top sub-stream's second half arrived at,
    /// where it bounded the answer (a token bucket's rate).
    pub top_tail_bps: Option<f64>,
}

fn none_with(base: Analysis, reason: impl Into<String>) -> Analysis {
    Analysis {
        bound: Bound::None,
        reason: Some(reason.into()),
        ..base
    }
}

/// Bound implied by a single-rate decision, relative to the stream's rate.
fn single_bound(d: Decision) -> Bound {
    match d {
        Decision::Above => Bound::AtMost,
        Decision::Below => Bound::AtLeast,
        Decision::Ambiguous => Bound::None,
    }
}

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

/// [`analyze`] for streams one after another, with the working memory
/// (gaps, smoothed gaps, BASS's events, sub-streams, arrivals) kept
/// between them. A multi-rate stream read by `multirate` or
/// `multirate-single-pass`, and a single-rate one read by `prcmt+bass`,
/// allocates nothing once that memory has grown to the longest stream's
/// needs, unless its answer carries a reason (a text); other methods
/// answer the same as through [`analyze`] and may allocate. For a rate
/// controller that reads a stream every few milliseconds, and for traces
/// of millions of packets.
#[derive(Debug, Clone, Default)]
pub struct Analyzer {
    subs: Vec<SubStream>,
    floors: Vec<Option<i64>>,
    arrivals: Vec<(i64, u32)>,
    gaps: GapsRoom,
    /// A stream with its steps taken out.
    unstepped: crate::decision::burst::Unstepped,
}

/// The gaps' working memory: raw gaps; the smoothing's (BASS's events
/// and kept gaps, which PRC-MT+BASS reads too); the window's.
#[derive(Debug, Clone, Default)]
struct GapsRoom {
    raw: Vec<Gap>,
    scratch: SmoothScratch,
    smoothed: Multipass,
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

/// How a receiver that stamped `stream` in batches did it: "received in
/// batches every N us", or "received in N batches" when the stream was too
/// short to show their interval (at 100 Gbit/s a 60-packet train arrives
/// in one 125 us batch); `None` for a receiver that stamps packets one by
/// one.
fn stamped_in_batches(stream: &ProbeStream) -> Option<String> {
    let count = stream.receive_batch_count()?;
    Some(match stream.receive_batch_interval_ns() {
        Some(every) => format!("received in batches every {:.0} us", every / 1e3),
        None if count == 1 => "received in one batch".to_string(),
        None => format!("received in {count} batches"),
    })
}
