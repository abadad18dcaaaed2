//! What every strategy works with: the method names, the session over a
//! channel (streams sent, bytes spent, the budget), the report and why a
//! run stopped. The strategies and their registry sit above this.

use crate::Cost;
use std::fmt;
use tightlink_core::channel::{Channel, ChannelError, StreamRequest};
use tightlink_core::{Bound, ProbeStream};

/// The closed-loop methods `estimate` runs, listed once: parse them from
/// the names users type, display them by the same names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// Multi-rate streams with multi-pass smoothing.
    Multirate,
    /// Multi-rate streams, one smoothing pass.
    MultirateSinglePass,
    /// Multi-rate streams decided by Multi-rate PRC-MT, DP1.
    MultiratePrcmtDp1,
    /// Multi-rate streams decided by Multi-rate PRC-MT, DP2.
    MultiratePrcmtDp2,
    /// PRC-MT's binary search with BASS smoothing.
    Prcmt,
    /// The same decisions in a probabilistic bisection.
    PrcmtPba,
    /// A multi-rate scan, then that bisection from its answer.
    ScanPba,
    /// The scan, then the bisection under receive batches, multi-rate
    /// streams where packets are stamped one by one (the default).
    Auto,
    /// Pathload's fleets with its own trend test.
    Pathload,
    /// Pathload's fleets with IMR-Pathload's window-average trend test.
    ImrAvg,
    /// Pathload's fleets with IMR-Pathload's wavelet trend test.
    ImrWavelet,
    /// Multi-rate streams read as TOPP rate sweeps.
    Topp,
    /// Multi-rate streams read by the fluid queue fitted to their delays
    /// (needs the tight link's capacity).
    QueueFit,
    /// pathChirp's chirps and excursions.
    Pathchirp,
    /// Multi-rate streams tracked by BART's Kalman filter.
    Bart,
    /// IGI/PTR's gap search, answering IGI.
    Igi,
    /// The same search, answering PTR.
    Ptr,
    /// Spruce's packet pairs.
    Spruce,
}

/// When an answer is "near the ceiling": the fastest rate the sender can
/// probe at (its link, its host's pacing, the far end's limit). Near it,
/// a number is not a measurement of the path, and the answer becomes "at
/// least" the ceiling. The one definition: the multi-rate strategy stops
/// on it and the library caps real-path answers with it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ceiling {
    /// Any answer at or above this share of the ceiling.
    pub exact_share: f64,
    /// An "at least" answer at or above this share.
    pub at_least_share: f64,
}

impl Default for Ceiling {
    fn default() -> Self {
        Ceiling {
            exact_share: 0.95,
            at_least_share: 0.85,
        }
    }
}

impl Ceiling {
    /// Whether `estimate_bps` with `bound` is near `ceiling_bps`.
    pub fn reached(&self, estimate_bps: f64, bound: Bound, ceiling_bps: f64) -> bool {
        estimate_bps >= self.exact_share * ceiling_bps
            || (bound == Bound::AtLeast && estimate_bps >= self.at_least_share * ceiling_bps)
    }
}

/// Why a strategy stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// The estimates' confidence interval became narrow enough.
    Stable,
    /// The search's bracket closed.
    Converged,
    /// Streams, bytes or path time ran out.
    Budget,
    /// The path was faster than the top rate the sender can probe.
    Ceiling,
    /// The streams' answers scatter more widely than the rest of the
    /// budget could narrow to the tolerance: the available bandwidth
    /// swings on the streams' time scale. The answer is the mean of what
    /// the streams met; the range says how far they spread (`multirate`)
    /// or where the searches' decisions put that mean (`swung_bps` then
    /// says how far they spread).
    Swings,
    /// No stream could be used (all lost or too short).
    NoUsableStream,
    /// The first train, which sets the search's range, could not be used.
    NoUsableAdrTrain,
    /// The streams read a token bucket's bursts; the answer is the rate
    /// two back-to-back trains' tails kept after its bucket ran out
    /// ([`Report::shaper`] says what the streams read). Under receive
    /// batches, which can hide a small bucket's head, also two trains
    /// whose tails alone showed the streams' answer too high
    /// ([`ShaperSeen::head_seen`] false).
    Shaped,
}

impl Stop {
    pub fn as_str(self) -> &'static str {
        match self {
            Stop::Stable => "stable",
            Stop::Converged => "converged",
            Stop::Budget => "budget",
            Stop::Ceiling => "ceiling",
            Stop::Swings => "swings",
            Stop::NoUsableStream => "no usable stream",
            Stop::NoUsableAdrTrain => "no usable ADR train",
            Stop::Shaped => "shaped",
        }
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Limits of one measurement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    pub max_streams: usize,
    pub max_bytes: u64,
    /// Time on the path (simulated time on the simulator).
    pub max_duration_ns: i64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max_streams: 60,
            max_bytes: 100_000_000,
            max_duration_ns: 2_000_000_000,
        }
    }
}

/// What a strategy found.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub method: Method,
    pub available_bandwidth_bps: f64,
    pub bound: Bound,
    /// Confidence range of the estimate.
    pub low_bps: f64,
    pub high_bps: f64,
    pub cost: Cost,
    /// Mean of the simulator's per-stream truths (simulated targets only).
    pub truth_bps: Option<f64>,
    /// Why the strategy stopped.
    pub stop: Stop,
    /// A token bucket that a back-to-back train showed after the
    /// strategy's streams; `None` when none was seen or none was sent.
    pub shaper: Option<ShaperSeen>,
    /// Streams (by index in the order sent) that checked the answer and
    /// left it as it was (the shaper trains): not in the truth, as the
    /// answer did not come from them.
    pub check_streams: Vec<usize>,
    /// Where the answer is "at least" the top rate: the bytes of the
    /// longest shaper train that passed whole at it. A token bucket
    /// holding more than these bytes times (1 - r / top), at a sustained
    /// rate r under the top, would have passed it too.
    pub whole_at_top_bytes: Option<u64>,
    /// Two shaper trains whose tails both arrived well under an exact
    /// answer that they could not change (no bucket confirmed): the
    /// range reaches down to the slower tail.
    pub slow_trains: Option<SlowTrains>,
    /// Where a search stopped `swings`: the lowest rate a stream read
    /// "above" at and the highest it read "below" at, among the decisions
    /// that contradicted the rest (the path swung at least that far).
    pub swung_bps: Option<(f64, f64)>,
    /// Where lone probes found a link the streams read idle busy part
    /// of the time: what they found (the answer is then the idle rate
    /// times the idle share).
    pub busy: Option<BusyWatch>,
    /// Where a queue stood under (nearly) every stream of Pathload's
    /// fleets: how many stood, and how deep. The trend tests read a full
    /// queue as no trend, so the search's answer is none.
    pub standing_queue: Option<tightlink_core::decision::standing::StandingQueue>,
    /// The shaper check's short train showed a head too small to take
    /// for a bucket, then a tail under the answer: the range reaches down
    /// to that tail.
    pub small_head: Option<SmallHead>,
}

/// A short train at twice the answer whose first packets arrived at about
/// the rate sent and the rest under the answer: a token bucket a few
/// packets deep (tbf's burst) passes a sub-stream of the streams
/// unqueued while it lasts, so they may have read its head. A FIFO path
/// delivers such a train at no less than its available bandwidth, so a
/// tail under the answer says the answer is too high either way.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmallHead {
    /// The rate the train was sent at.
    pub rate_bps: f64,
    /// Packets that arrived ahead of the tail's rate.
    pub head_packets: f64,
    /// The rate its tail arrived at.
    pub tail_bps: f64,
}

/// Two back-to-back trains at one rate whose tails both arrived at
/// [`super::shaper_train::SLOW_TAIL_SHARE`] of the answer or less, where
/// nothing confirmed a bucket: cross traffic heavier while they ran than
/// while the streams did, or a token bucket that cross traffic shares
/// and whose head the trains could not show (one at 8 Gbit/s with 2
/// Gbit/s through it, behind a 10 Gbit/s sender).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SlowTrains {
    /// The rate both were sent at.
    pub rate_bps: f64,
    /// Their tails' rates, in the order sent.
    pub tails_bps: [f64; 2],
}

/// Lone probes at Poisson-spaced moments after streams that read the
/// tight link idle (`multirate`'s idle check).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BusyWatch {
    /// The rate the streams read, the link's when idle.
    pub idle_bps: f64,
    /// Probes delayed past the threshold, or lost, of those sent.
    pub busy: usize,
    pub probes: usize,
    /// From the first probe sent to the last.
    pub span_ns: i64,
}

/// A back-to-back train (at twice the answer, or the top rate if less) whose head passed on a
/// token bucket faster than its tail: streams shorter than that head read
/// the bucket's burst rate, and the answer is the tail's. Under receive
/// batches, where a head can hide in the first batch, two trains whose
/// tails arrived well under the streams' answer (a FIFO path delivers
/// them at no less than its available bandwidth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ShaperSeen {
    /// What the strategy's streams had answered.
    pub streams_bps: f64,
    pub streams_bound: Bound,
    /// The train's head rate, tail rate and bytes ahead of the tail.
    pub head_bps: f64,
    pub tail_bps: f64,
    pub bucket_bytes: f64,
    /// The train's bytes.
    pub train_bytes: u64,
    /// Both trains showed the head; `false` where their tails alone,
    /// under receive batches that hide a head, refuted the streams.
    pub head_seen: bool,
    /// Cross traffic that shares the bucket: its token rate and the
    /// cross traffic's rate, from a third train at a lower rate; the
    /// answer is then their difference, not the tail.
    pub shared_bucket: Option<(f64, f64)>,
    /// How far the two trains' tails at one rate lay apart, relative.
    pub tail_spread: f64,
}

/// Progress as a share of the budget or of the convergence (0..1).
pub type Progress<'a> = &'a mut dyn FnMut(f64);

/// A measurement in progress: counts what was sent, keeps the streams.
pub struct Session<'a> {
    channel: &'a mut dyn Channel,
    /// The channel's ceiling, fixed once it is open.
    max_rate_bps: f64,
    pub budget: Budget,
    pub bytes: u64,
    pub packets: u64,
    pub streams: Vec<ProbeStream>,
    truths: Vec<f64>,
    /// Streams sent by [`Session::send_check`] and not counted.
    checks: Vec<usize>,
    /// The last stream's truth, when the channel knows one.
    pub last_truth: Option<f64>,
    /// The rate of a shaper check whose short train queued (no bucket
    /// there), when one did.
    pub shaper_ruled_out_bps: Option<f64>,
    /// Streams sent again because a host spoiled them (the sender fell
    /// behind, or the receiver's socket overflowed and packets went
    /// missing: [`tightlink_core::channel::Probed::spoiled_by_host`]), and those of them that came
    /// back spoiled again.
    pub resent: usize,
    resent_late_again: usize,
    /// Whether the last stream kept was one whose sender fell behind.
    last_late: bool,
    progress: Progress<'a>,
    started: std::time::Instant,
}

/// Most times one stream goes again after a host spoiled it.
pub const MAX_RESENDS_PER_STREAM: usize = 2;

/// What decides whether a stream a host spoiled goes again. Counts only,
/// so that a replay (which knows which streams were late or overflowed)
/// decides the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resends {
    /// Times this stream went again already.
    pub attempt: usize,
    /// Streams sent again so far, and those of them that came back
    /// spoiled again.
    pub resent: usize,
    pub late_again: usize,
    /// Streams kept so far.
    pub kept: usize,
}

impl Resends {
    /// At most [`MAX_RESENDS_PER_STREAM`] times a stream, at most two plus
    /// half the streams kept in all, and no more once over three quarters
    /// of at least three resends came back late as well: a host late on
    /// nearly every stream is not helped by sending again (the warning
    /// says so).
    pub fn allowed(&self) -> bool {
        let futile = self.late_again >= 3 && self.late_again * 4 > self.resent * 3;
        self.attempt < MAX_RESENDS_PER_STREAM && self.resent < 2 + self.kept / 2 && !futile
    }
}

#[derive(Debug, thiserror::Error)]
pub enum StrategyError {
    #[error(transparent)]
    Channel(#[from] ChannelError),
    #[error("the sender cannot probe: its link rate is {0} bit/s")]
    NoRate(f64),
    #[error("{0} needs the tight link's capacity (--capacity)")]
    NeedsCapacity(&'static str),
}

impl<'a> Session<'a> {
    pub fn new(channel: &'a mut dyn Channel, budget: Budget, progress: Progress<'a>) -> Self {
        Session {
            max_rate_bps: channel.info().max_rate_bps,
            channel,
            budget,
            bytes: 0,
            packets: 0,
            streams: Vec::new(),
            truths: Vec::new(),
            checks: Vec::new(),
            last_truth: None,
            shaper_ruled_out_bps: None,
            resent: 0,
            resent_late_again: 0,
            last_late: false,
            progress,
            started: std::time::Instant::now(),
        }
    }

    /// A session on a channel whose sender can probe at all.
    pub fn start(
        channel: &'a mut dyn Channel,
        budget: Budget,
        progress: Progress<'a>,
    ) -> Result<Self, StrategyError> {
        let max = channel.info().max_rate_bps;
        if max.is_nan() || max <= 0.0 {
            return Err(StrategyError::NoRate(max));
        }
        Ok(Session::new(channel, budget, progress))
    }

    pub fn max_rate_bps(&self) -> f64 {
        self.max_rate_bps
    }

    /// Time on the path so far (simulated time on the simulator), ns.
    pub fn elapsed_ns(&self) -> i64 {
        self.channel.elapsed_ns()
    }

    /// Lets `ns` pass without probing ([`Channel::idle`]); nothing when
    /// `ns` is not positive.
    pub fn idle(&mut self, ns: i64) {
        if ns > 0 {
            self.channel.idle(ns);
        }
    }

    /// Whether another stream of `bytes` fits the budget.
    pub fn fits(&self, bytes: u64) -> bool {
        self.streams.len() < self.budget.max_streams
            && self.bytes + bytes <= self.budget.max_bytes
            && self.channel.elapsed_ns() < self.budget.max_duration_ns
    }

    /// How many more streams of `bytes` the budget allows (streams and
    /// bytes; path time is checked by [`Session::fits`]).
    pub fn streams_left(&self, bytes: u64) -> usize {
        let by_count = self.budget.max_streams.saturating_sub(self.streams.len());
        let by_bytes = self.budget.max_bytes.saturating_sub(self.bytes) / bytes.max(1);
        by_count.min(usize::try_from(by_bytes).unwrap_or(usize::MAX))
    }

    /// [`Session::send`] for a stream that checks an answer the other
    /// streams gave: its truth (simulated targets) is returned, not
    /// counted in the report's, and the report lists it among the
    /// [`Report::check_streams`], unless [`Session::count_check`] counts
    /// it (when the check changed the answer). A check is never sent
    /// again: what it reads depends on what the path held before it (a
    /// shaper train's second copy meets the bucket the first emptied).
    pub fn send_check(
        &mut self,
        request: &StreamRequest,
    ) -> Result<(ProbeStream, Option<f64>), StrategyError> {
        let before = self.truths.len();
        let stream = self.send_once_or_again(request, false)?;
        let truth = (self.truths.len() > before)
            .then(|| self.truths.pop())
            .flatten();
        self.checks.push(self.streams.len() - 1);
        Ok((stream, truth))
    }

    /// Counts the checking stream `id` (its [`ProbeStream::id`]) and its
    /// truth in the report's.
    pub fn count_check(&mut self, id: u64, truth: Option<f64>) {
        self.checks.retain(|&i| i as u64 != id);
        self.truths.extend(truth);
    }

    /// The streams kept so far, in the order sent.
    pub fn streams(&self) -> &[ProbeStream] {
        &self.streams
    }

    /// Sends `request` and keeps what came back; a stream a host spoiled
    /// ([`tightlink_core::channel::Probed::spoiled_by_host`]) goes again while [`Resends::allowed`]
    /// (its bytes count, the stream does not).
    pub fn send(&mut self, request: &StreamRequest) -> Result<ProbeStream, StrategyError> {
        self.send_once_or_again(request, true)
    }

    fn send_once_or_again(
        &mut self,
        request: &StreamRequest,
        may_send_again: bool,
    ) -> Result<ProbeStream, StrategyError> {
        let mut attempt = 0;
        let p = loop {
            let p = self.channel.probe(request)?;
            self.bytes += request.bytes();
            self.packets += request.sizes.len() as u64;
            let spoiled = p.spoiled_by_host();
            if attempt > 0 && spoiled {
                self.resent_late_again += 1;
            }
            let room = self.bytes + request.bytes() <= self.budget.max_bytes;
            let again = Resends {
                attempt,
                resent: self.resent,
                late_again: self.resent_late_again,
                kept: self.streams.len(),
            };
            if !(may_send_again && spoiled && room && again.allowed()) {
                break p;
            }
            self.channel.supersede_last();
            self.resent += 1;
            attempt += 1;
        };
        self.last_late = p.sender_late;
        self.last_truth = p.truth.map(|t| t.available_bps);
        if let Some(t) = self.last_truth {
            self.truths.push(t);
        }
        let mut s = p.stream;
        s.id = self.streams.len() as u64;
        self.streams.push(s.clone());
        let used = [
            self.streams.len() as f64 / self.budget.max_streams as f64,
            self.bytes as f64 / self.budget.max_bytes as f64,
            self.channel.elapsed_ns() as f64 / self.budget.max_duration_ns as f64,
        ];
        (self.progress)(used.into_iter().fold(0.0, f64::max).min(1.0));
        Ok(s)
    }

    /// Whether the sender fell behind in the last stream kept (a burst
    /// of its own then looks like one of cross traffic).
    pub fn last_late(&self) -> bool {
        self.last_late
    }

    /// Builds the report.
    #[allow(clippy::too_many_arguments)]
    pub fn report(
        &self,
        method: Method,
        estimate: f64,
        bound: Bound,
        low: f64,
        high: f64,
        stop: Stop,
    ) -> Report {
        Report {
            method,
            available_bandwidth_bps: estimate,
            bound,
            low_bps: low.min(estimate),
            high_bps: high.max(estimate),
            cost: Cost {
                probe_bytes: self.bytes,
                probe_packets: self.packets,
                streams: self.streams.len(),
                resent_streams: self.resent,
                duration_s: self.channel.elapsed_ns() as f64 / 1e9,
                wall_s: self.started.elapsed().as_secs_f64(),
            },
            truth_bps: (!self.truths.is_empty())
                .then(|| self.truths.iter().sum::<f64>() / self.truths.len() as f64),
            stop,
            shaper: None,
            check_streams: self.checks.clone(),
            whole_at_top_bytes: None,
            slow_trains: None,
            swung_bps: None,
            busy: None,
            standing_queue: None,
            small_head: None,
        }
    }
}

/// Send times of a single-rate stream of `n` packets of `size` at `rate`.
pub fn single_rate_request(rate_bps: f64, n: usize, size: u32) -> StreamRequest {
    let gap = size as f64 * 8e9 / rate_bps;
    StreamRequest {
        offsets_ns: (0..n).map(|i| (i as f64 * gap).round() as i64).collect(),
        sizes: vec![size; n],
    }
}
