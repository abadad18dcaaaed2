//! What every method's reader shares: the answer it gives ([`Analysis`]),
//! the method names, the analyzer's reusable memory, and the crate's
//! decision and smoothing parts the readers are built from.

pub(super) use crate::decision::bart::{BartParams, BartTracker};
pub(super) use crate::decision::chirp::{chirp_estimate, ChirpParams};
pub(super) use crate::decision::igi::{igi_train, IgiParams};
pub(super) use crate::decision::multirate::{
    apply_policy, estimate_from_smoothed, per_rate_decisions, rates_increase, Consistency, Policy,
};
pub(super) use crate::decision::prcmt::{
    prcmt, prcmt_after_bass_with, BassPrcmtError, DEFAULT_TOLERANCE,
};
pub(super) use crate::decision::queue_fit::{queue_fit, MIN_F};
pub(super) use crate::decision::spruce::spruce_estimate;
pub(super) use crate::decision::topp::{topp, topp_points_with, SubStreamRatio};
pub(super) use crate::decision::trend::{
    pathload_trend, trend_of_series, PathloadParams, TrendOutcome,
};
pub(super) use crate::decision::{Bound, Decision};
pub(super) use crate::smoothing::bass::BassParams;
pub(super) use crate::smoothing::imr::{d4_approximation, window_average, ImrWindow};
pub(super) use crate::smoothing::multipass::{
    multipass_passes, multipass_smooth_into, single_pass_smooth_into, Multipass, MultipassParams,
    SmoothScratch,
};
pub(super) use crate::stream::{Gap, GapTolerance, ProbeStream, StreamKind, SubStream};

/// An analysis method (names as on the command line).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    Prcmt,
    PrcmtBass,
    Pathload,
    ImrAvg,
    ImrWavelet,
    Multirate,
    MultirateSinglePass,
    MultiratePrcmtDp1,
    MultiratePrcmtDp2,
    Topp,
    Pathchirp,
    Bart,
    Igi,
    Spruce,
    QueueFit,
}

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
    /// Multi-rate: what an answer read as the link less the batches of
    /// cross traffic counted, where nothing crossed between them.
    pub batches: Option<crate::decision::burst::BatchCount>,
}

pub(super) fn none_with(base: Analysis, reason: impl Into<String>) -> Analysis {
    Analysis {
        bound: Bound::None,
        reason: Some(reason.into()),
        ..base
    }
}

/// Bound implied by a single-rate decision, relative to the stream's rate.
pub(super) fn single_bound(d: Decision) -> Bound {
    match d {
        Decision::Above => Bound::AtMost,
        Decision::Below => Bound::AtLeast,
        Decision::Ambiguous => Bound::None,
    }
}

/// [`analyze`](super::analyze) for streams one after another, with the working memory
/// (gaps, smoothed gaps, BASS's events, sub-streams, arrivals) kept
/// between them. A multi-rate stream read by `multirate` or
/// `multirate-single-pass`, and a single-rate one read by `prcmt+bass`,
/// allocates nothing once that memory has grown to the longest stream's
/// needs, unless its answer carries a reason (a text); other methods
/// answer the same as through [`analyze`](super::analyze) and may allocate. For a rate
/// controller that reads a stream every few milliseconds, and for traces
/// of millions of packets.
#[derive(Debug, Clone, Default)]
pub struct Analyzer {
    pub(super) subs: Vec<SubStream>,
    pub(super) floors: Vec<Option<i64>>,
    pub(super) arrivals: Vec<(i64, u32)>,
    pub(super) gaps: GapsRoom,
    /// A stream with its steps taken out.
    pub(super) unstepped: crate::decision::burst::Unstepped,
}

/// The gaps' working memory: raw gaps; the smoothing's (BASS's events
/// and kept gaps, which PRC-MT+BASS reads too); the window's.
#[derive(Debug, Clone, Default)]
pub(super) struct GapsRoom {
    pub(super) raw: Vec<Gap>,
    pub(super) scratch: SmoothScratch,
    pub(super) smoothed: Multipass,
}

/// How a receiver that stamped `stream` in batches did it: "received in
/// batches every N us", or "received in N batches" when the stream was too
/// short to show their interval (at 100 Gbit/s a 60-packet train arrives
/// in one 125 us batch); `None` for a receiver that stamps packets one by
/// one.
pub(super) fn stamped_in_batches(stream: &ProbeStream) -> Option<String> {
    let count = stream.receive_batch_count()?;
    Some(match stream.receive_batch_interval_ns() {
        Some(every) => format!("received in batches every {:.0} us", every / 1e3),
        None if count == 1 => "received in one batch".to_string(),
        None => format!("received in {count} batches"),
    })
}
