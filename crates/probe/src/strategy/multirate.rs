//! Repeated multi-rate probing (\[BASS\], section VI): each stream probes
//! `rates` rates of `per_rate` packets spread over +-Range around a centre;
//! after multi-pass smoothing it gives an estimate, the next stream is
//! centred on it.
//!
//! The first stream scans wide (10 % to 90 % of the sender's link rate;
//! [`wide_scan`], which `scan-pba` starts with too). When it shows
//! receive batches its sub-streams were too short to span (at 100
//! Gbit/s), it is sent once more, each rate for as long as the top rate
//! needs to span them.
//! An `at_least` answer moves the centre up by the range, `at_most` down.
//! Stopping rule: once `min_estimates` exact estimates (after the wide
//! scan) are in, stop when the ~95 % confidence interval of their median,
//! median +- 1.58 IQR / sqrt(n) (the box-plot notch of McGill, Tukey and
//! Larsen 1978), is within +-`stable_tolerance` of the median. The answer
//! is that median; when the budget runs out first, the same median with
//! stop reason `budget`, or the bound the last stream gave when no stream
//! gave an exact estimate. Exact answers that were the link less batches
//! of cross traffic (TCP windows, video frames) enter these at the share
//! the batches held over all such streams of the run ([`BatchCount`]). The range reported with it is where the
//! available bandwidth lies, not only where the median of the answers
//! does (see [`answer_range`]): the notch is narrower than the error of
//! one stream's method, and a tbf that every stream reads alike gives it
//! no width at all. It reaches out to any bound a stream after the scan
//! gave beyond it ([`reach_bounds`]): that stream's moment was part of
//! the run.
//!
//! Futility: the interval narrows as 1/sqrt(n), so `n` answers whose
//! interval is `h` wide reach the tolerance only after `n (h / tol m)^2`
//! streams. From `swing_min_answers` exact estimates (or twice as many
//! answers of any kind, bounds at their bound, while fewer are exact),
//! if that count exceeds what the budget has left, or more than
//! `swing_horizon` further streams, the run stops with reason `swings`:
//! the mean of the answers less a fifth at each end (`Swing::trimmed`:
//! each stream met the cross traffic of its own moment, and the
//! available bandwidth over the run is their mean, not their median: on
//! the lab's ON/OFF source the median read 10.6 % off, the mean 6.5 %;
//! but one stream's error is heavy-tailed), with the answers' 10th to
//! 90th percentiles as its range (how far the available bandwidth swung
//! between streams). The horizon keeps a swinging path from spending
//! the budget: the lab's bursty paths, whose answers scatter by 10-20 %
//! from stream to stream, went on to 16-40 streams before. Three answers
//! near the ceiling after one that found the path below it stop the
//! same way when they disagree. Without
//! this, a link that cross traffic saturates for milliseconds at a time
//! read "at least the ceiling" from three idle moments, or spent the
//! budget answering bounds up and down.
//!
//! Bursts faster than the link: where two streams or more, a quarter of
//! those after the scan at least, met one ([`met_burst_under_reading`]: the queue rose
//! past twice the probes' own spreading), the streams that agree did so
//! between bursts, and each burst-hit one read the moment its burst
//! came, or a bound. The run then never stops `stable`; from
//! `swing_min_answers` exact answers (or twice as many of any kind) it
//! stops with reason `swings`, answering the mean of every stream's
//! answer, the scan's too, bounds at their bound, with their 10th to
//! 90th percentiles as its range. On the lab's ON/OFF source (peaks four
//! times the link; 8 rounds of 10 runs, each against the build without,
//! in turn) the median error went 16.5 -> 9.1 %, the p90 34.3 -> 27.2 %,
//! runs answering `stable` more than 10 % off 29 -> 14 of 80 (14 more
//! rounds, beside a receiver change since reverted: 12.2 -> 9.1 % and
//! 10.9 -> 7.7 %); the mean of the exact answers alone read 11.4 %:
//! the streams that met bursts mostly answer bounds.
//! Once that count has held, calm streams after it no longer end the
//! run `stable`: on the ON/OFF source five streams that agree can fall
//! in one OFF period after two burst-hit ones (2 of 7 is under the
//! quarter), and such runs read 13-35 % high. The mean leaves out "at
//! most" answers over every exact one (`informative`). 16 rounds of
//! 10 runs, each against the build without both, in turn: median error
//! 10.1 -> 8.6 %, p90 27.1 -> 20.7 %, `stable` answers more than 10 %
//! off 33 -> 12 of 160, bytes 3.0 -> 3.2 MB. The lab's CBR generators
//! stall and catch up now and then, two bursts early in a run: there
//! 2 runs in 60 (`two-hop`, `cbr60`) swing instead (+9 % and -1 %).
//!
//! An idle reading is checked (`idle_watch`): where the streams agree
//! on a rate as fast as any of their sub-streams was delivered (the
//! link read idle) and each packet is stamped, 150 lone probes at
//! Poisson-spaced moments over 300 ms look for queues; where more than
//! the tolerance of them find one (or are lost), the answer is the idle
//! rate times the idle share, stop `swings`. On the lab's ON/OFF source
//! 57 of 58 `stable` stops had read the idle link, most 15-35 % high:
//! their streams all fell in one idle stretch.
//!
//! Stream length follows the receiver (ours): each sub-stream must span
//! at least `min_batches` of the receive batches the last stream showed
//! (interrupt coalescence), or BASS has too few events to smooth; at
//! 10 Gbit/s with 125 us coalescence the default 64 packets per rate
//! already span about four, at 100 Gbit/s they fit in one. Where the
//! receiver stamps each packet (the wide scan showed no batches), every
//! gap is an event, and a sub-stream needs only last long enough for a
//! rate one step over the available bandwidth to build a queue well
//! above the stamps' jitter: `min_sub_stream_ns` at the top rate,
//! `per_rate_unbatched` packets at least ([`per_rate_for_time`]). On the
//! lab's 200 Mbit/s paths (1514-byte packets) that is 32 packets, which
//! read as well as 64 (cbr60 1.2 % vs 1.3 % median, quiet 0.2-0.3 % vs
//! 0.1-0.2 %) for half the bytes; at 10 Gbit/s with 9000-byte packets
//! the default 64 (a 32-packet sub-stream lasts 0.2 ms there, and the
//! simulator's bursty path read 3.7 % where 64 read 2.7 %). Longer
//! sub-streams (`min_sub_stream_bytes`) cut the tail under a timer-paced
//! sender's UDP but read a capped TCP flow high: the flow gives way to
//! the longer rates over the available bandwidth while they run.

mod idle_watch;

use super::session::Method as Strategy;
use super::session::{Ceiling, Report, Session, Stop, StrategyError};
use super::shaper_train;
use idle_watch::{fastest_delivery_bps, idle_watch, IDLE_SHARE};
use tightlink_core::channel::StreamRequest;
use tightlink_core::decision::burst::{
    bursts_swing, met_burst_under_reading, pooled_share, BatchCount,
};
use tightlink_core::schedule::{equal_time_schedule, multi_rate_schedule, rates_around};
use tightlink_core::stats;
use tightlink_core::stream::GapTolerance;
use tightlink_core::{analyze, AnalysisParams, Bound, Method, StreamKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultirateParams {
    pub rates: usize,
    pub per_rate: usize,
    /// Range around the centre (0.3 = +-30 %).
    pub range: f64,
    pub size_bytes: u32,
    /// Exact estimates needed before the stopping rule is tried.
    pub min_estimates: usize,
    /// Half-width of the median's confidence interval, relative, that stops.
    pub stable_tolerance: f64,
    /// `multirate`, `multirate-single-pass`, `multirate-prcmt-dp1` or `-dp2`.
    pub method: Method,
    /// Receive batches each sub-stream must span (packets per rate grow
    /// to fit, up to `max_per_rate`).
    pub min_batches: f64,
    pub max_per_rate: usize,
    /// Exact estimates before the futility rule is tried (twice as many
    /// answers of any kind while too few are exact).
    pub swing_min_answers: usize,
    /// Further streams the futility rule looks ahead (fewer when the
    /// budget has fewer left).
    pub swing_horizon: usize,
    /// Where the receiver stamps each packet: each sub-stream lasts at
    /// least this long at the stream's top rate ...
    pub min_sub_stream_ns: f64,
    /// ... with at least this many packets (never more than `per_rate`)
    /// ...
    pub per_rate_unbatched: usize,
    /// ... and at least this many bytes (0: no floor in bytes). 72 KB
    /// lets a rate 5 % over the available bandwidth build more queue
    /// than two of a timer-paced sender's frames, which leave in ones and
    /// twos, but biases the reading high under TCP cross traffic.
    pub min_sub_stream_bytes: u64,
    /// The wide scan's slower rates as long in time as its top rate
    /// (packets in proportion to the rate, an eighth of `per_rate` at
    /// least) instead of `per_rate` packets each: they only have to show
    /// that nothing queues there.
    pub equal_time_scan: bool,
}

/// The strategy with its default parameters for `method` (the
/// `multirate` family, TOPP and the queue fit read its streams).
pub(super) fn run_default(
    s: &mut Session,
    method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = MultirateParams {
        method: method.per_stream(),
        ..Default::default()
    };
    p.size_bytes = size.unwrap_or(p.size_bytes);
    Ok((run(s, p, analysis)?, p.size_bytes))
}

impl Default for MultirateParams {
    fn default() -> Self {
        MultirateParams {
            rates: 5,
            per_rate: 64,
            range: 0.3,
            size_bytes: 9000,
            min_estimates: 5,
            stable_tolerance: 0.05,
            method: Method::Multirate,
            min_batches: 4.0,
            max_per_rate: 2048,
            swing_min_answers: 8,
            swing_horizon: 10,
            min_sub_stream_ns: 1e6,
            per_rate_unbatched: 32,
            min_sub_stream_bytes: 0,
            equal_time_scan: false,
        }
    }
}

pub fn run(
    s: &mut Session,
    params: MultirateParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    let scan = wide_scan(s, &params, analysis)?;
    after_scan(s, params, analysis, scan)
}

/// The strategy from its wide scan on (`None`: the budget had no room for
/// it), and whether a queue stood under the streams' lowest rates.
pub fn after_scan(
    s: &mut Session,
    params: MultirateParams,
    analysis: &AnalysisParams,
    scan: Option<WideScan>,
) -> Result<Report, StrategyError> {
    let mut r = search(s, params, analysis, scan)?;
    r.standing_queue = standing_under_low_rates(s, &r, params.size_bytes);
    Ok(r)
}

/// A queue that stood under the lowest rates of (nearly) every stream
/// after the scan ([`standing::LOW_RATES_STOOD_SHARE`]): cross traffic
/// that fills the buffer whatever the probes' rate. The answer stays
/// (the streams read the queue's growth with the rate, which a standing
/// queue does not hide as it hides a trend), but what such traffic
/// leaves free moves as the probes load the path: the warning says so.
fn standing_under_low_rates(
    s: &Session,
    r: &Report,
    size_bytes: u32,
) -> Option<tightlink_core::decision::standing::StandingQueue> {
    use tightlink_core::decision::standing;
    if r.bound != Bound::Exact || r.available_bandwidth_bps <= 0.0 {
        return None;
    }
    let streams = s.streams();
    let empty_ns = standing::empty_path_ns(streams.iter().filter_map(standing::delay_level))?;
    // After the scan, and not the shaper trains (back to back at the
    // line rate: no low rates).
    let low: Vec<standing::DelayLevel> = streams
        .iter()
        .enumerate()
        .filter(|(k, _)| *k > 0 && !r.check_streams.contains(k))
        .filter_map(|(_, st)| standing::first_part_level(st, 0.25))
        .collect();
    let scan = streams.first()?;
    let batch = scan.receive_batch_interval_ns();
    // Two of the packets sent (the channel may have sized them) at the
    // answer's rate: at most the dispersion rate, so no shallower than
    // the pathload search's depth.
    let size = scan.packets.first().map_or(size_bytes, |p| p.size_bytes);
    let depth_ns = standing::depth_threshold_ns(size, r.available_bandwidth_bps, batch);
    Some(standing::standing_queue(&low, empty_ns, depth_ns)).filter(|q| {
        q.held_at(
            standing::LOW_RATES_STOOD_SHARE,
            standing::LOW_RATES_MIN_STREAMS,
        )
    })
}

/// The search after the scan.
fn search(
    s: &mut Session,
    params: MultirateParams,
    analysis: &AnalysisParams,
    scan: Option<WideScan>,
) -> Result<Report, StrategyError> {
    let mut q = Search::new(s, params, Some(scan));
    while let Some(step) = q.next_stream(s, analysis)? {
        if let Some(r) = q.record(s, step) {
            return Ok(r);
        }
        q.recentre(step);
        if let Some(r) = q.shaper_check(s, step)? {
            return Ok(r);
        }
        // Never ask for more than the link can send.
        q.centre = q.centre.min(q.max / (1.0 + q.range)).max(q.max * 0.01);
        q.first = false;
        if let Some(r) = q.stop(s, step.request_bytes)? {
            return Ok(r);
        }
    }
    Ok(q.budget_spent(s))
}

/// What one stream answered.
#[derive(Debug, Clone, Copy)]
struct Step {
    bound: Bound,
    abw: Option<f64>,
    request_bytes: u64,
    /// The answer came from the top sub-stream's tail (a bucket's token
    /// rate, for the shaper check).
    at_tail: bool,
    /// The answer was the link less the batches that held it.
    batches: Option<BatchCount>,
}

/// The state of one run of the search after the wide scan.
struct Search {
    params: MultirateParams,
    method: Strategy,
    /// The sender's top rate.
    max: f64,
    /// Centre and range of the next stream; the top rate stays at the link rate.
    centre: f64,
    range: f64,
    exact: Vec<f64>,
    /// Every stream's answer, the scan's too, with its bound.
    answers: Vec<(Bound, f64)>,
    /// How many of `answers` the scan gave (0 or 1).
    scan_answers: usize,
    /// What each of `exact` counted as batches, where it was the link
    /// less them ([`Search::pooled_exact`]).
    exact_batches: Vec<Option<BatchCount>>,
    /// Whether a stream found the path below the ceiling (an exact
    /// answer or an "at most" under it; "at least" answers climbing
    /// towards it say nothing against it).
    found_below_ceiling: bool,
    last_bound: Option<(Bound, f64)>,
    /// The one before it (the budget rule reads the last two).
    bound_before: Option<(Bound, f64)>,
    first: bool,
    /// Streams in a row whose answer is near the top rate the sender can
    /// probe: after three the answer is "at least" that.
    at_ceiling: usize,
    per_rate: usize,
    /// Whether the receiver stamps each packet (the length of a
    /// sub-stream then follows the path's time, not receive batches).
    one_by_one: bool,
    shaper_checked: bool,
    /// The wide scan, until it is read as the first stream.
    scan: Option<Option<WideScan>>,
    /// Streams after the scan, and those of them that met a burst of
    /// cross traffic faster than the link (`met_burst`).
    centred: usize,
    bursts: usize,
    /// Whether the burst-hit ones have been a quarter of them at some
    /// point: the path swings then, however calm the streams after.
    swung: bool,
}

/// `answers` with each that was the link less the batches (`batches`,
/// in step) taken at `share` of the time instead of its own.
fn pooled(answers: &[f64], batches: &[Option<BatchCount>], share: Option<f64>) -> Vec<f64> {
    answers
        .iter()
        .zip(batches)
        .map(|(&e, b)| match (b, share) {
            (Some(b), Some(share)) => b.left_bps(share),
            _ => e,
        })
        .collect()
}

/// The answers at their bound, for the swing tests.
fn values(a: &[(Bound, f64)]) -> Vec<f64> {
    a.iter().map(|&(_, e)| e).collect()
}

impl Search {
    /// The share of the time batches held the link over every stream
    /// after the scan that read the link less them ([`BatchCount`]; one
    /// frame can take half the scan's 4 ms).
    fn pooled_share(&self) -> Option<f64> {
        pooled_share(self.exact_batches.iter().flatten().copied())
    }

    /// The exact answers, those that were the link less the batches
    /// taken again at the run's pooled share.
    fn pooled_exact(&self) -> Vec<f64> {
        pooled(&self.exact, &self.exact_batches, self.pooled_share())
    }

    fn new(s: &Session, params: MultirateParams, scan: Option<Option<WideScan>>) -> Search {
        let max = s.max_rate_bps();
        Search {
            method: Strategy::of_per_stream(params.method).unwrap_or(Strategy::Multirate),
            max,
            centre: 0.5 * max,
            range: 0.8,
            exact: Vec::new(),
            answers: Vec::new(),
            scan_answers: 0,
            exact_batches: Vec::new(),
            found_below_ceiling: false,
            last_bound: None,
            bound_before: None,
            first: true,
            at_ceiling: 0,
            per_rate: params.per_rate,
            one_by_one: false,
            shaper_checked: false,
            scan,
            centred: 0,
            bursts: 0,
            swung: false,
            params,
        }
    }

    /// The wide scan's answer first, then a stream around the centre;
    /// `None` when the budget has no room for it.
    fn next_stream(
        &mut self,
        s: &mut Session,
        analysis: &AnalysisParams,
    ) -> Result<Option<Step>, StrategyError> {
        let params = &self.params;
        match self.scan.take() {
            Some(None) => return Ok(None),
            Some(Some(w)) => {
                self.per_rate = w.per_rate;
                self.one_by_one = w.batch_interval_ns.is_none();
                return Ok(Some(Step {
                    bound: w.bound,
                    abw: w.abw_bps,
                    request_bytes: w.bytes,
                    at_tail: false,
                    batches: None,
                }));
            }
            None => {}
        }
        let rates = rates_around(self.centre, self.range, params.rates);
        if self.one_by_one {
            self.per_rate = per_rate_for_time(params, self.centre * (1.0 + self.range));
        }
        let sched = multi_rate_schedule(&rates, self.per_rate, params.size_bytes);
        let request = StreamRequest::from_send_times(&sched, params.size_bytes);
        if !s.fits(request.bytes()) {
            return Ok(None);
        }
        let stream = s.send(&request)?;
        if let Some(interval_ns) = stream.receive_batch_interval_ns() {
            self.per_rate =
                per_rate_for_batches(params, interval_ns, self.centre * (1.0 + self.range));
            self.one_by_one = false;
        }
        // Lossy streams read "at most" their lowest rate: the core's
        // `MultirateLoss` rule, the one place that decides it.
        let a = analyze(&stream, StreamKind::MultiRate, params.method, analysis);
        // An exact or "at least" reading is the capacity floor the burst
        // test needs; a late sender leaves the same signature.
        self.centred += 1;
        if !s.last_late() {
            self.bursts +=
                usize::from(met_burst_under_reading(&stream, a.bound, a.abw_bps).is_some());
        }
        Ok(Some(Step {
            bound: a.bound,
            abw: a.abw_bps,
            request_bytes: request.bytes(),
            at_tail: a.detail.top_tail_bps.is_some(),
            batches: a.detail.batches,
        }))
    }

    /// Keeps the answer; three in a row at the ceiling end the run
    /// ("at least" it, or a swing where a stream found the path below).
    fn record(&mut self, s: &Session, step: Step) -> Option<Report> {
        let (Bound::Exact | Bound::AtLeast | Bound::AtMost, Some(e)) = (step.bound, step.abw)
        else {
            return None;
        };
        self.answers.push((step.bound, e));
        if self.first {
            self.scan_answers = self.answers.len();
        }
        let near = Ceiling::default().reached(e, step.bound, self.max);
        self.found_below_ceiling |= step.bound != Bound::AtLeast && !near;
        self.at_ceiling = if near { self.at_ceiling + 1 } else { 0 };
        if self.at_ceiling < 3 {
            return None;
        }
        if !self.found_below_ceiling {
            return Some(s.report(self.method, e, Bound::AtLeast, e, e, Stop::Ceiling));
        }
        // At the ceiling now, below it before: the path swings, or the
        // streams go on until they agree.
        swing(&values(&self.answers), self.params.stable_tolerance, 0, 4)
            .map(|w| w.report(s, self.method))
    }

    /// The next stream's centre: on an exact answer, above an "at
    /// least", below an "at most".
    fn recentre(&mut self, step: Step) {
        let range = self.params.range;
        let Some(e) = step.abw else {
            return;
        };
        match step.bound {
            Bound::Exact => {
                if !self.first {
                    self.exact.push(e);
                    self.exact_batches.push(step.batches);
                }
                self.centre = e;
            }
            Bound::AtLeast => self.centre = (e * (1.0 + range)).max(self.centre),
            Bound::AtMost => self.centre = e * (1.0 - range),
            _ => return,
        }
        self.range = range;
        self.bound_before = self.last_bound.replace((step.bound, e));
    }

    /// Where each packet is stamped and no stream lost a packet, the
    /// shaper check goes once, at the first exact answer after the scan
    /// that its short train can test (twice the answer within the
    /// sender's reach): a bucket the streams pass on ends the run there;
    /// on a FIFO path the short train, sent now instead of after the
    /// answer, rules a bucket out for any answer up to a third over this
    /// one. A bucket as large as the streams passes them, the scan's
    /// rates up to 90 % of the sender's too, without a loss (the lab's
    /// 256 KB bucket: none in 18 streams), where the scan overflowed the
    /// lab's FIFO queues (12-27 % lost), and on such paths a check
    /// between the streams only disturbed them (`lab run lossy`: p90
    /// error 3.7 -> 6.4 % over five rounds).
    fn shaper_check(
        &mut self,
        s: &mut Session,
        step: Step,
    ) -> Result<Option<Report>, StrategyError> {
        let (Bound::Exact, Some(e)) = (step.bound, step.abw) else {
            return Ok(None);
        };
        if self.first || !self.one_by_one || self.shaper_checked || 2.0 * e > self.max {
            return Ok(None);
        }
        if !s.streams.iter().all(|st| st.loss_fraction() == 0.0) {
            return Ok(None);
        }
        self.shaper_checked = true;
        // A stream that read a bucket's token rate from its top
        // sub-stream's tail carried a faster rate whole on the bucket:
        // the trains go at twice that rate, since at twice the token rate
        // they pass a bucket longer than their head whole (a 256 KB
        // bucket at 200 Mbit/s whose stream read 200, having carried 248
        // whole: trains at 400 found nothing, and the run took 29.2 MB
        // for 7.1).
        let whole = s.streams.last().and_then(fastest_carried_whole_bps);
        let reference = match whole {
            Some(w) if step.at_tail => w.max(e),
            _ => e,
        };
        shaper_train::early_shaper_check(s, self.method, e, reference, self.params.size_bytes)
    }

    /// The stopping rules after a stream: a swinging path's mean, a
    /// stable median (checked for an idle reading), or futility.
    fn stop(
        &mut self,
        s: &mut Session,
        request_bytes: u64,
    ) -> Result<Option<Report>, StrategyError> {
        let (params, method) = (self.params, self.method);
        // Where a quarter of the streams met bursts, streams that agree
        // fell between them: no `stable` stop, and the answer is what
        // every stream met, its bound where it gave one (see the
        // module notes). Calm streams that come later do not undo it:
        // on an ON/OFF source they are one long OFF period.
        self.swung |= bursts_swing(self.bursts, self.centred);
        let enough = self.exact.len() >= params.swing_min_answers
            || self.answers.len() >= 2 * params.swing_min_answers;
        if self.swung && enough {
            if let Some(w) = Swing::of(&informative(&self.answers)) {
                return Ok(Some(w.report(s, method)));
            }
        }
        if self.exact.len() >= params.min_estimates && !self.swung {
            let exact = self.pooled_exact();
            let (m, lo, hi) = median_interval(&exact);
            if (hi - lo) / 2.0 <= params.stable_tolerance * m {
                // Streams that read the link idle may all have fallen in
                // one idle stretch: lone probes over a longer time look.
                if self.one_by_one && m >= IDLE_SHARE * fastest_delivery_bps(&s.streams) {
                    let tol = params.stable_tolerance;
                    if let Some(w) = idle_watch(s, method, m, params.size_bytes, tol)? {
                        return Ok(Some(w));
                    }
                }
                let (lo, hi) = self.range_of(&exact);
                return Ok(Some(s.report(
                    method,
                    m,
                    Bound::Exact,
                    lo,
                    hi,
                    Stop::Stable,
                )));
            }
        }
        let left = s.streams_left(request_bytes).min(params.swing_horizon);
        let tol = params.stable_tolerance;
        let mut judged = self.exact.clone();
        let mut futile = swing(&judged, tol, left, params.swing_min_answers);
        // Streams that mostly answer bounds, up and down: too few exact
        // answers to judge the swing by (with 5 to 7 of them, neither
        // test used to apply, and such a run could spend the budget in
        // silence).
        if futile.is_none() && self.exact.len() < params.swing_min_answers {
            judged = values(&self.answers);
            futile = swing(&judged, tol, left, 2 * params.swing_min_answers);
        }
        Ok(futile.map(|w| w.trimmed(&judged).report(s, method)))
    }

    /// The range of an answer from `exact` ([`answer_range`]), reaching
    /// the bounds the streams after the wide scan gave beyond it.
    fn range_of(&self, exact: &[f64]) -> (f64, f64) {
        let after_scan = &self.answers[self.scan_answers..];
        reach_bounds(answer_range(exact, &self.params), after_scan)
    }

    /// The answer when the budget ran out first.
    fn budget_spent(&self, s: &Session) -> Report {
        let method = self.method;
        if !self.exact.is_empty() {
            let exact = self.pooled_exact();
            let m = stats::median(&exact).unwrap_or(f64::NAN);
            let (lo, hi) = self.range_of(&exact);
            // The budget ran out while the streams still climbed (or fell)
            // past every exact answer: the last two streams' bounds are the
            // newer evidence. At 100 Gbit/s a scan misread at 10 Gbit/s left
            // the search climbing 30 % a stream, and the median of two early
            // answers, 28.6 Gbit/s "exact", stood against "at least 37.1"
            // and "at least 62.7" (79.7 free). One bound alone can be an idle
            // moment of a swinging path (it read "at least 85" with 66.7 free).
            if let Some((b, e)) = climbed_past(self.bound_before, self.last_bound, lo, hi) {
                return s.report(method, e, b, e, e, Stop::Budget);
            }
            return s.report(method, m, Bound::Exact, lo, hi, Stop::Budget);
        }
        match self.last_bound {
            Some((b, e)) => s.report(method, e, b, e, e, Stop::Budget),
            None => s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream),
        }
    }
}

/// The fastest sub-stream of `stream` the path carried whole
/// ([`tightlink_core::ProbeStream::carried_whole`]).
fn fastest_carried_whole_bps(stream: &tightlink_core::ProbeStream) -> Option<f64> {
    stream
        .sub_streams(GapTolerance::default())
        .iter()
        .filter(|sub| stream.carried_whole(sub))
        .map(|sub| sub.rate_bps)
        .reduce(f64::max)
}

/// The answers a swinging path's mean takes, bounds at their bound:
/// all but an "at most" over every exact answer. Such a bound comes from
/// a stream whose lowest rate was already too fast (a wide scan's, or
/// one re-centred after an "at least"); at its bound it puts a rate the
/// path never carried into the mean (a scan's "at most 300 Mbit/s"
/// beside exact answers of 56-83 read a CBR path 25 % high). "At least"
/// a rate under every exact answer stays: on an ON/OFF source those
/// are streams a burst hit, read where it came, and without them the
/// lab's `onoff4x` read 1-3 points worse (240 runs). Without an exact
/// answer, all.
fn informative(answers: &[(Bound, f64)]) -> Vec<f64> {
    let hi = answers
        .iter()
        .filter(|(b, _)| *b == Bound::Exact)
        .map(|&(_, e)| e)
        .fold(f64::NEG_INFINITY, f64::max);
    answers
        .iter()
        .filter(|&&(b, e)| b != Bound::AtMost || e < hi || hi == f64::NEG_INFINITY)
        .map(|&(_, e)| e)
        .collect()
}

/// The last of two bounds in a row on the same side beyond `lo..=hi`.
fn climbed_past(
    before: Option<(Bound, f64)>,
    last: Option<(Bound, f64)>,
    lo: f64,
    hi: f64,
) -> Option<(Bound, f64)> {
    let (Some((b0, e0)), Some((b1, e1))) = (before, last) else {
        return None;
    };
    let beyond = |b, e| match b {
        Bound::AtLeast => e > hi,
        Bound::AtMost => e < lo,
        _ => false,
    };
    (b0 == b1 && beyond(b0, e0) && beyond(b1, e1)).then_some((b1, e1))
}

/// Packets of a scan that must arrive for its receive stamps to say how
/// the receiver stamps: a 125 us batch of 9000-byte packets at
/// 10 Gbit/s. Under ON/OFF sources whose peaks exceed the link a scan
/// that met an ON period delivered none or 4 of 180, showed no batches,
/// and `auto` went on as if each packet were stamped (multi-rate
/// streams under 125 us batches, up to 57 MB). The lab's scans lose up
/// to 70 % (rates up to five times its 200 Mbit/s tbf; 52 of 180
/// arrived at least, over 45 `onoff4x` runs) and still show their
/// stamps.
pub const STAMPING_PACKETS: usize = 16;

/// What the first, wide stream found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WideScan {
    pub bound: Bound,
    pub abw_bps: Option<f64>,
    /// How far apart the receiver stamped batches, if it did.
    pub batch_interval_ns: Option<f64>,
    /// Packets per rate the next streams need to span the batches.
    pub per_rate: usize,
    /// Bytes of the stream that was read.
    pub bytes: u64,
    /// Enough of it arrived to tell how the receiver stamps packets
    /// ([`STAMPING_PACKETS`]).
    pub stamping_seen: bool,
}

/// The wide scan that starts the multi-rate strategy (and `scan-pba`):
/// one multi-rate stream over 10 % to 90 % of the sender's link rate.
/// When it shows receive batches its sub-streams were too short to span
/// (at 100 Gbit/s, 125 us coalescence: 64 packets at 90 Gbit/s are half
/// a batch; it answered "at most" its lowest rate, and the streams then
/// climbed from there by +30 % each until the budget ran out), it is sent
/// once more, long enough, each rate for the top rate's time, not its
/// packets (with 625 packets at each of 10-90 Gbit/s its slowest
/// sub-stream lasted 4.5 ms, and a burst there read 14 Gbit/s on a path
/// with 75 free). `None` when the budget has no room for it.
pub fn wide_scan(
    s: &mut Session,
    params: &MultirateParams,
    analysis: &AnalysisParams,
) -> Result<Option<WideScan>, StrategyError> {
    let (centre, range) = (0.5 * s.max_rate_bps(), 0.8);
    let rates = rates_around(centre, range, params.rates);
    let mut per_rate = params.per_rate;
    let mut rescanned = false;
    loop {
        let sched = if rescanned {
            equal_time_schedule(&rates, per_rate, params.per_rate, params.size_bytes)
        } else if params.equal_time_scan {
            equal_time_schedule(&rates, per_rate, per_rate / 8, params.size_bytes)
        } else {
            multi_rate_schedule(&rates, per_rate, params.size_bytes)
        };
        let request = StreamRequest::from_send_times(&sched, params.size_bytes);
        if !s.fits(request.bytes()) {
            return Ok(None);
        }
        let stream = s.send(&request)?;
        let sent_per_rate = per_rate;
        let batch_interval_ns = stream.receive_batch_interval_ns();
        if let Some(interval_ns) = batch_interval_ns {
            per_rate = per_rate_for_batches(params, interval_ns, centre * (1.0 + range));
        }
        if !rescanned && per_rate > sent_per_rate {
            rescanned = true;
            continue;
        }
        let a = analyze(&stream, StreamKind::MultiRate, params.method, analysis);
        return Ok(Some(WideScan {
            bound: a.bound,
            abw_bps: a.abw_bps,
            batch_interval_ns,
            per_rate,
            bytes: request.bytes(),
            stamping_seen: stream.received_count() >= STAMPING_PACKETS,
        }));
    }
}

/// How far the streams' answers swung.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Swing {
    /// The mean of the answers, a futile run's trimmed
    /// (`Swing::trimmed`): what the run met on average.
    pub mean: f64,
    /// 10th and 90th percentiles of the answers.
    pub low: f64,
    pub high: f64,
}

/// The share of a futile run's answers its mean leaves off at each end
/// ([`Swing::trimmed`]).
const FUTILE_TRIM_SHARE: f64 = 0.2;

impl Swing {
    /// The swing with its mean taken over `answers` less a fifth at each
    /// end. A futile run's answers scatter because the path's load
    /// moved between streams, and their mean is what the run met; but
    /// one stream's error is heavy-tailed (a stream a stall of the
    /// cross traffic's sender left idle reads the link less one batch,
    /// near the link's rate; one whose crossing a lone burst moved reads
    /// far under), and one such answer in eight moved the mean by a
    /// tenth. The bursts' swing keeps the plain mean: there the
    /// burst-hit streams are the ones to count.
    fn trimmed(self, answers: &[f64]) -> Swing {
        let mean = stats::trimmed_mean_sorted(&stats::sorted(answers), FUTILE_TRIM_SHARE);
        Swing {
            mean: mean.unwrap_or(self.mean),
            ..self
        }
    }

    fn report(&self, s: &Session, method: Strategy) -> Report {
        s.report(
            method,
            self.mean,
            Bound::Exact,
            self.low,
            self.high,
            Stop::Swings,
        )
    }
}

/// The futility rule: `Some` when at least `min_answers` answers are in
/// and their median's interval (see [`median_interval`]) could not reach
/// `tolerance` within the `streams_left` the budget allows.
pub fn swing(
    answers: &[f64],
    tolerance: f64,
    streams_left: usize,
    min_answers: usize,
) -> Option<Swing> {
    let n = answers.len();
    if n < min_answers.max(2) {
        return None;
    }
    let s = stats::sorted(answers);
    let (m, lo, hi) = median_interval_sorted(&s);
    let half = (hi - lo) / 2.0;
    let needed = n as f64 * (half / (tolerance * m)).powi(2);
    // NaN (all answers zero) is no evidence of a swing.
    if needed.is_nan() || needed <= (n + streams_left) as f64 {
        return None;
    }
    Swing::of_sorted(&s)
}

impl Swing {
    /// The mean and 10th to 90th percentiles of `answers` (`None` when
    /// there are none).
    pub fn of(answers: &[f64]) -> Option<Swing> {
        Swing::of_sorted(&stats::sorted(answers))
    }

    fn of_sorted(s: &[f64]) -> Option<Swing> {
        let q = |p: f64| stats::quantile_sorted(s, p);
        Some(Swing {
            mean: s.iter().sum::<f64>() / s.len() as f64,
            low: q(0.1)?,
            high: q(0.9)?,
        })
    }
}

/// The range an exact run reports around the median of its `exact`
/// answers (any order, at least one):
/// - the sign-test interval of the median with 90 % coverage
///   ([`stats::median_order_interval`]; five answers or more);
/// - with fewer, the span of the answers widened on each side by half
///   the step between neighbouring rates (a stream places its crossing
///   within one step; on the simulator's 100 Gbit/s path, where the
///   budget leaves one to three answers, their span alone held the truth
///   in a fifth of the runs);
/// - never narrower than +-`stable_tolerance` (the precision the run was
///   asked for): streams on a bare tbf all give the same number, which
///   says nothing of the method's own error.
pub fn answer_range(exact: &[f64], params: &MultirateParams) -> (f64, f64) {
    let s = stats::sorted(exact);
    let m = stats::quantile_sorted(&s, 0.5).unwrap_or(f64::NAN);
    let (lo, hi) = stats::median_order_interval(&s, 0.9).unwrap_or_else(|| {
        let half_step = params.range / params.rates.saturating_sub(1).max(1) as f64;
        let end = |v: Option<&f64>| v.copied().unwrap_or(f64::NAN);
        (
            end(s.first()) - half_step * m,
            end(s.last()) + half_step * m,
        )
    });
    let tol = params.stable_tolerance;
    (lo.min(m * (1.0 - tol)), hi.max(m * (1.0 + tol)))
}

/// `(lo, hi)` reaching out to every bound in `answers` beyond it: "at
/// least" a rate over `hi` says the path carried that rate whole at that
/// stream's moment, "at most" one under `lo` that it did not. The range
/// says where the available bandwidth lay over the run, and those
/// moments were part of it. Under bursty cross traffic the exact answers
/// can agree on a rate a tenth under what the path's counters saw while
/// a stream between them carried more (docs/evaluation.md: most of the
/// lab's silent misses were such runs).
pub fn reach_bounds((lo, hi): (f64, f64), answers: &[(Bound, f64)]) -> (f64, f64) {
    answers
        .iter()
        .fold((lo, hi), |(lo, hi), &(bound, e)| match bound {
            Bound::AtLeast => (lo, hi.max(e)),
            Bound::AtMost => (lo.min(e), hi),
            _ => (lo, hi),
        })
}

/// Packets per rate so that a sub-stream at `top_bps` spans
/// `min_batches` receive batches `interval_ns` apart; never below the
/// configured `per_rate`, never above `max_per_rate`.
pub fn per_rate_for_batches(params: &MultirateParams, interval_ns: f64, top_bps: f64) -> usize {
    let bits = 8.0 * params.size_bytes as f64;
    let needed = (params.min_batches * interval_ns * 1e-9 * top_bps / bits).ceil();
    if !needed.is_finite() {
        return params.per_rate;
    }
    (needed as usize).clamp(params.per_rate, params.max_per_rate.max(params.per_rate))
}

/// Packets per rate where the receiver stamps each packet: a sub-stream
/// at `top_bps` lasts `min_sub_stream_ns`, at least
/// `per_rate_unbatched` packets and `min_sub_stream_bytes`, and at most
/// `per_rate` packets. A rate one step
/// (15 % at Range 30 %) over the available bandwidth then builds about
/// 0.15 ms of queue on a path it shares half with cross traffic.
pub fn per_rate_for_time(params: &MultirateParams, top_bps: f64) -> usize {
    let bits = 8.0 * params.size_bytes as f64;
    let needed = (params.min_sub_stream_ns * 1e-9 * top_bps / bits).ceil();
    let by_bytes = params
        .min_sub_stream_bytes
        .div_ceil(u64::from(params.size_bytes.max(1)));
    let floor = params
        .per_rate_unbatched
        .max(by_bytes as usize)
        .min(params.per_rate);
    if !needed.is_finite() {
        return params.per_rate;
    }
    (needed as usize).clamp(floor, params.per_rate)
}

/// Median of `v` and its ~95 % confidence interval, median +- 1.58 IQR /
/// sqrt(n) (McGill, Tukey and Larsen 1978), clamped to the sample's range.
pub fn median_interval(v: &[f64]) -> (f64, f64, f64) {
    median_interval_sorted(&stats::sorted(v))
}

fn median_interval_sorted(s: &[f64]) -> (f64, f64, f64) {
    let q = |p: f64| stats::quantile_sorted(s, p).unwrap_or(f64::NAN);
    let m = q(0.5);
    let half = 1.58 * (q(0.75) - q(0.25)) / (s.len() as f64).sqrt();
    let (min, max) = (s[0], s[s.len() - 1]);
    (m, (m - half).max(min), (m + half).min(max))
}

#[cfg(test)]
mod tests {
    use super::idle_watch::WATCH_PROBES;
    use super::*;
    use crate::strategy::session::BusyWatch;
    use tightlink_core::decision::standing;

    /// A 10 Gbit/s hop with 5 Gbit/s of fluid cross traffic (no receive
    /// batches); the streams `hit` picks by their index (the scan is 0)
    /// meet 10 Mbit of cross traffic at 20 Gbit/s 40 % into them (twice
    /// the link for 0.5 ms).
    struct BurstyHop {
        hit: fn(usize) -> bool,
        /// The 10 Mbit comes at once instead (a pause of the path).
        at_once: bool,
        sent: usize,
        now_ns: i64,
    }

    impl tightlink_core::channel::Channel for BurstyHop {
        fn probe(
            &mut self,
            req: &StreamRequest,
        ) -> Result<tightlink_core::channel::Probed, tightlink_core::channel::ChannelError>
        {
            let mut path = tightlink_core::synth::SynthPath::ten_gig(5e9);
            let span = req.offsets_ns.last().copied().unwrap_or(0) as f64;
            if (self.hit)(self.sent) {
                if self.at_once {
                    path.bursts = vec![(0.4 * span, 10e6)];
                } else {
                    path.rate_steps = vec![(0.4 * span, 20e9), (0.4 * span + 0.5e6, 0.0)];
                }
            }
            self.sent += 1;
            Ok(through(&path, req, &mut self.now_ns, 20_000_000))
        }
        fn info(&self) -> tightlink_core::channel::ChannelInfo {
            hop_info("bursty hop")
        }
        fn elapsed_ns(&self) -> i64 {
            self.now_ns
        }
    }

    /// A test hop behind a 10 Gbit/s sender, no other limits.
    fn hop_info(description: &str) -> tightlink_core::channel::ChannelInfo {
        tightlink_core::channel::ChannelInfo::without_limits(description, 10e9)
    }

    /// Sends `req` through `path` from the test clock's `now_ns`, then
    /// moves the clock on by `step_ns`.
    fn through(
        path: &tightlink_core::synth::SynthPath,
        req: &StreamRequest,
        now_ns: &mut i64,
        step_ns: i64,
    ) -> tightlink_core::channel::Probed {
        let send: Vec<i64> = req.offsets_ns.iter().map(|o| *now_ns + o).collect();
        *now_ns += step_ns;
        tightlink_core::channel::Probed::on_time(path.stream(0, &send, req.sizes[0]), None)
    }

    /// The 10 Gbit/s hop with 5 Gbit/s of fluid cross traffic; with
    /// `standing`, from the second stream on a flow that fills the buffer
    /// keeps 2 ms of queue under every packet (a standing queue: no gap
    /// changes, every delay does).
    struct StandingHop {
        standing: bool,
        sent: usize,
        now_ns: i64,
    }

    impl tightlink_core::channel::Channel for StandingHop {
        fn probe(
            &mut self,
            req: &StreamRequest,
        ) -> Result<tightlink_core::channel::Probed, tightlink_core::channel::ChannelError>
        {
            let path = tightlink_core::synth::SynthPath::ten_gig(5e9);
            let send: Vec<i64> = req.offsets_ns.iter().map(|o| self.now_ns + o).collect();
            let mut st = path.stream(0, &send, req.sizes[0]);
            if self.standing && self.sent > 0 {
                for p in &mut st.packets {
                    p.recv_ns = p.recv_ns.map(|r| r + 2_000_000);
                }
            }
            self.sent += 1;
            self.now_ns += 20_000_000;
            Ok(tightlink_core::channel::Probed::on_time(st, None))
        }
        fn info(&self) -> tightlink_core::channel::ChannelInfo {
            hop_info("standing hop")
        }
        fn elapsed_ns(&self) -> i64 {
            self.now_ns
        }
    }

    /// A 10 Gbit/s hop whose one cross sender, like a kernel TCP flow
    /// its application caps, sends a window every `period_ns` as three
    /// equal bursts 0.6 ms apart, each at once; the link is idle
    /// otherwise. Each stream meets the windows at a phase a golden
    /// ratio of the period on from the last one's, so that a few streams
    /// sample the period about evenly.
    struct WindowedHop {
        period_ns: f64,
        window_bits: f64,
        sent: usize,
        now_ns: i64,
    }

    impl tightlink_core::channel::Channel for WindowedHop {
        fn probe(
            &mut self,
            req: &StreamRequest,
        ) -> Result<tightlink_core::channel::Probed, tightlink_core::channel::ChannelError>
        {
            const BURSTS: usize = 3;
            const BURST_GAP_NS: f64 = 0.6e6;
            let mut path = tightlink_core::synth::SynthPath::ten_gig(0.0);
            let span = req.offsets_ns.last().copied().unwrap_or(0) as f64;
            let phase = (self.sent as f64 * 0.618_034).fract() * self.period_ns;
            self.sent += 1;
            let mut start = phase - self.period_ns;
            while start < span {
                for b in 0..BURSTS {
                    let t = start + b as f64 * BURST_GAP_NS;
                    if (0.0..span).contains(&t) {
                        path.bursts.push((t, self.window_bits / BURSTS as f64));
                    }
                }
                start += self.period_ns;
            }
            Ok(through(&path, req, &mut self.now_ns, 20_000_000))
        }
        fn info(&self) -> tightlink_core::channel::ChannelInfo {
            hop_info("windowed hop")
        }
        fn elapsed_ns(&self) -> i64 {
            self.now_ns
        }
    }

    /// Windows that take 30 % of the link (7 Gbit/s free), 5.5 ms
    /// apart, where a stream lasts about 4 ms: a stream holds a whole
    /// window, part of one or parts of two, and reads 4.7 to 8.5 Gbit/s
    /// over its own span. Each count is right for its span; pooled, the
    /// first five read the period's share and agree (7.0, stable). Taken
    /// one by one, they never agreed: the run swung over eight streams
    /// to their mean, 6.68 (-4.6 %).
    #[test]
    fn windows_further_apart_than_a_stream_are_pooled() {
        let period_ns = 5.5e6;
        let r = run_over(&mut WindowedHop {
            period_ns,
            window_bits: 0.3 * 10e9 * period_ns * 1e-9,
            sent: 0,
            now_ns: 0,
        });
        assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Stable), "{r:?}");
        let e = r.available_bandwidth_bps;
        assert!((e / 7e9 - 1.0).abs() < 0.02, "{r:?}");
        assert!(r.low_bps < 7e9 && 7e9 < r.high_bps, "{r:?}");
    }

    /// The strategy with its defaults over `channel`.
    fn run_over(channel: &mut dyn tightlink_core::channel::Channel) -> Report {
        let mut progress = |_: f64| {};
        let mut s = Session::start(channel, crate::Budget::default(), &mut progress).unwrap();
        run(
            &mut s,
            MultirateParams::default(),
            &AnalysisParams::default(),
        )
        .unwrap()
    }

    fn run_standing(standing: bool) -> Report {
        run_over(&mut StandingHop {
            standing,
            sent: 0,
            now_ns: 0,
        })
    }

    /// The same answer either way (a standing queue changes no gap), but
    /// over the standing queue every stream after the scan met it under
    /// its lowest rates, 2 ms deep, and the report says so; on the free
    /// path the lowest rates met none.
    #[test]
    fn a_queue_that_stood_under_the_lowest_rates_is_said() {
        let free = run_standing(false);
        let held = run_standing(true);
        assert_eq!(free.standing_queue, None, "{free:?}");
        assert_eq!(held.bound, Bound::Exact, "{held:?}");
        assert!(
            (held.available_bandwidth_bps - 5e9).abs() < 0.25e9,
            "{held:?}"
        );
        assert_eq!(held.available_bandwidth_bps, free.available_bandwidth_bps);
        let q = held
            .standing_queue
            .unwrap_or_else(|| panic!("the queue stood: {held:?}"));
        assert_eq!(q.stood, q.streams, "{q:?}");
        assert!(q.streams >= standing::LOW_RATES_MIN_STREAMS, "{q:?}");
        assert!((q.median_depth_ns - 2e6).abs() < 0.1e6, "{q:?}");
        // Through the whole method, the shaper trains after the streams
        // included: the trains leave the answer and keep what it said.
        let mut hop = StandingHop {
            standing: true,
            sent: 0,
            now_ns: 0,
        };
        let whole = super::super::Method::Multirate
            .run(
                &mut hop,
                &AnalysisParams::default(),
                crate::Budget::default(),
                &mut |_| {},
            )
            .unwrap();
        assert!(!whole.check_streams.is_empty(), "the trains ran: {whole:?}");
        assert_eq!(whole.standing_queue, held.standing_queue, "{whole:?}");
    }

    fn run_on(hit: fn(usize) -> bool) -> Report {
        run_on_hop(hit, false)
    }

    fn run_on_hop(hit: fn(usize) -> bool, at_once: bool) -> Report {
        run_over(&mut BurstyHop {
            hit,
            at_once,
            sent: 0,
            now_ns: 0,
        })
    }

    /// Without bursts the streams agree on 5 Gbit/s and stop `stable`.
    /// With every second one hit, those read "at least" the rate their
    /// burst came at (under 5): no `stable` stop, and the answer is the
    /// mean of every answer, under the calm streams' and over the
    /// lowest rate probed.
    #[test]
    fn streams_between_bursts_do_not_stop_stable() {
        let calm = run_on(|_| false);
        assert_eq!(calm.stop, Stop::Stable, "{calm:?}");
        assert!(
            (calm.available_bandwidth_bps / 5e9 - 1.0).abs() < 0.05,
            "{calm:?}"
        );
        let hit = run_on(|i| i % 2 == 1);
        assert_eq!(hit.stop, Stop::Swings, "{hit:?}");
        assert!(
            hit.available_bandwidth_bps < 0.97 * calm.available_bandwidth_bps
                && hit.available_bandwidth_bps > 3.5e9,
            "{hit:?}"
        );
        assert!(hit.low_bps < hit.high_bps, "{hit:?}");
    }

    /// The first two streams after the scan meet bursts, every one after
    /// is calm: two of two once, two of seven when five calm ones agree.
    /// The calm ones may have fallen in one lull, so the run does not
    /// stop `stable` on them: it goes on to eight exact answers and
    /// answers the mean of every answer.
    #[test]
    fn calm_streams_after_bursts_do_not_stop_stable() {
        let calm = run_on(|_| false);
        let after = run_on(|i| i == 1 || i == 2);
        assert_eq!(after.stop, Stop::Swings, "{after:?}");
        assert!(after.cost.streams > calm.cost.streams, "{after:?} {calm:?}");
        assert!(
            (after.available_bandwidth_bps / 5e9 - 1.0).abs() < 0.05,
            "{after:?}"
        );
    }

    /// Every second stream is held 1 ms at once (10 Mbit in one step): a
    /// batch of cross traffic, or a pause of the path, which a stream
    /// cannot tell apart. Those streams read the path less the batch's
    /// link time (1 ms of a stream about 4.6 ms long: about 2.8 Gbit/s),
    /// the others 5: the answers alternate, so the run swings and
    /// answers their mean, between the two.
    #[test]
    fn streams_held_at_once_count_the_batch() {
        let calm = run_on(|_| false);
        let held = run_on_hop(|i| i % 2 == 1, true);
        assert_eq!(held.stop, Stop::Swings, "{held:?}");
        let share = held.available_bandwidth_bps / calm.available_bandwidth_bps;
        assert!((0.6..0.9).contains(&share), "{held:?} {calm:?}");
    }

    /// A 5 Gbit/s hop behind a 10 Gbit/s sender, no cross traffic while
    /// the streams go; with `busy`, cross traffic at 10 Gbit/s (twice
    /// the hop) comes 1 ms in every 4 while the idle check's lone probes
    /// go: a 5 Mbit queue that drains in 1 ms, the hop busy half the
    /// time, 2.5 Gbit/s free on average.
    struct IdleHop {
        busy: bool,
        /// Fluid cross traffic all the time (none: the hop is idle).
        cross_bps: f64,
        /// Idle checks sent.
        watched: usize,
        now_ns: i64,
    }

    impl IdleHop {
        fn new(busy: bool, cross_bps: f64) -> IdleHop {
            IdleHop {
                busy,
                cross_bps,
                watched: 0,
                now_ns: 0,
            }
        }
    }

    impl tightlink_core::channel::Channel for IdleHop {
        fn probe(
            &mut self,
            req: &StreamRequest,
        ) -> Result<tightlink_core::channel::Probed, tightlink_core::channel::ChannelError>
        {
            let mut path = tightlink_core::synth::SynthPath::ten_gig(self.cross_bps);
            path.capacity_bps = 5e9;
            self.watched += usize::from(req.offsets_ns.len() == WATCH_PROBES);
            if self.busy && req.offsets_ns.len() == WATCH_PROBES {
                path.rate_steps = (0..100)
                    .flat_map(|k| [(k as f64 * 4e6, 10e9), (k as f64 * 4e6 + 1e6, 0.0)])
                    .collect();
            }
            let step_ns = req.offsets_ns.last().copied().unwrap_or(0) + 10_000_000;
            Ok(through(&path, req, &mut self.now_ns, step_ns))
        }
        fn info(&self) -> tightlink_core::channel::ChannelInfo {
            hop_info("idle hop")
        }
        fn elapsed_ns(&self) -> i64 {
            self.now_ns
        }
    }

    /// Eight answers that swing by a tenth each way around 5 Gbit/s,
    /// one of them far under the rest (a stream a lone burst or a pause
    /// held): the run is futile, and its answer is the mean of the
    /// middle ones. Sorted, 2, 4.5 three times, 5.5 four times; a fifth
    /// of eight (two) left off at each end leaves 4.5, 4.5, 5.5, 5.5:
    /// 5.0, where the plain mean read 4.69.
    #[test]
    fn a_futile_swing_leaves_off_the_answers_far_out() {
        let mut hop = IdleHop::new(false, 0.0);
        let mut progress = |_: f64| {};
        let mut s = Session::start(&mut hop, crate::Budget::default(), &mut progress).unwrap();
        let mut q = Search::new(&s, MultirateParams::default(), None);
        let answers = [5.5e9, 4.5e9, 5.5e9, 4.5e9, 5.5e9, 4.5e9, 5.5e9, 2.0e9];
        q.exact = answers.to_vec();
        q.exact_batches = vec![None; answers.len()];
        q.answers = answers.iter().map(|&e| (Bound::Exact, e)).collect();
        let r = q.stop(&mut s, 1_000_000).unwrap().expect("futile");
        assert_eq!(r.stop, Stop::Swings, "{r:?}");
        assert!((r.available_bandwidth_bps - 5.0e9).abs() < 1.0, "{r:?}");
        // The range is still where the answers swung: 10th to 90th percentiles.
        assert!(r.low_bps < 4.5e9 && r.high_bps == 5.5e9, "{r:?}");
    }

    fn run_idle(busy: bool, cross_bps: f64) -> (Report, usize) {
        let mut hop = IdleHop::new(busy, cross_bps);
        let mut progress = |_: f64| {};
        let mut s = Session::start(&mut hop, crate::Budget::default(), &mut progress).unwrap();
        let r = run(
            &mut s,
            MultirateParams::default(),
            &AnalysisParams::default(),
        )
        .unwrap();
        drop(s);
        (r, hop.watched)
    }

    /// Streams that read the hop idle (5 Gbit/s, as fast as any was
    /// delivered) are followed by lone probes; where those find it idle
    /// too the answer stands `stable`, where they find it busy half the
    /// time it is 2.5 Gbit/s, `swings`, its range the share's interval.
    #[test]
    fn lone_probes_check_an_idle_reading() {
        let (idle, watched) = run_idle(false, 0.0);
        assert_eq!(watched, 1);
        assert_eq!(idle.stop, Stop::Stable, "{idle:?}");
        assert!(
            (idle.available_bandwidth_bps / 5e9 - 1.0).abs() < 0.03,
            "{idle:?}"
        );
        assert_eq!(idle.busy, None);
        let (busy, _) = run_idle(true, 0.0);
        assert_eq!(busy.stop, Stop::Swings, "{busy:?}");
        let w = busy.busy.expect("watched");
        assert_eq!(w.probes, WATCH_PROBES);
        assert!(
            (busy.available_bandwidth_bps / 2.5e9 - 1.0).abs() < 0.15,
            "{busy:?}"
        );
        assert!(busy.low_bps < 2.5e9 && 2.5e9 < busy.high_bps, "{busy:?}");
        // The watch was the only stream more.
        assert_eq!(busy.cost.streams, idle.cost.streams);
    }

    /// What the lone probes found stays in the report through the shaper
    /// trains that close every strategy: a train that leaves the answer
    /// as it was rebuilds the report, and dropped it before.
    #[test]
    fn the_busy_watch_outlives_the_closing_shaper_trains() {
        let mut hop = IdleHop::new(false, 0.0);
        let mut progress = |_: f64| {};
        let mut s = Session::start(&mut hop, crate::Budget::default(), &mut progress).unwrap();
        let watch = BusyWatch {
            idle_bps: 5e9,
            busy: 75,
            probes: 150,
            span_ns: 300_000_000,
        };
        let answer = Report {
            busy: Some(watch),
            ..s.report(
                Strategy::Multirate,
                2.5e9,
                Bound::Exact,
                2e9,
                3e9,
                Stop::Swings,
            )
        };
        let r = super::super::shaper_train::after_shaper_train(&mut s, answer, 9000).unwrap();
        assert_eq!(r.stop, Stop::Swings, "{r:?}");
        assert!(r.cost.streams > 0, "a train went: {r:?}");
        assert_eq!(r.busy, Some(watch), "{r:?}");
    }

    /// A hop with half its 5 Gbit/s taken all the time delivers the
    /// streams' faster rates at more than the 2.5 free: it is not read
    /// idle, and no lone probes go.
    #[test]
    fn a_loaded_link_gets_no_idle_check() {
        let (loaded, watched) = run_idle(false, 2.5e9);
        assert_eq!(watched, 0);
        assert_eq!(loaded.stop, Stop::Stable, "{loaded:?}");
        assert!(
            (loaded.available_bandwidth_bps / 2.5e9 - 1.0).abs() < 0.15,
            "{loaded:?}"
        );
    }

    #[test]
    fn sub_streams_grow_to_span_the_receive_batches() {
        let p = MultirateParams::default();
        // 125 us batches, top rate 97.5 Gbit/s, 9000 B: four batches hold
        // 4 * 125e-6 * 97.5e9 / 72000 = 677.08 -> 678 packets.
        assert_eq!(per_rate_for_batches(&p, 125_000.0, 97.5e9), 678);
        // At 9.1 Gbit/s they need 63.2 -> 64: the default stands.
        assert_eq!(per_rate_for_batches(&p, 125_000.0, 9.1e9), 64);
        assert_eq!(per_rate_for_batches(&p, 10e6, 97.5e9), 2048, "capped");
        assert_eq!(per_rate_for_batches(&p, f64::NAN, 97.5e9), 64);
    }

    #[test]
    fn bounds_that_repeat_the_exact_answers_leave_the_mean() {
        use Bound::{AtLeast, AtMost, Exact};
        // Exact 56-83: "at most 300" and "at most 147" lie over them all
        // and leave; "at most 60", "at least 70" and "at least 56" stay.
        let a = [
            (AtMost, 300.0),
            (AtMost, 147.0),
            (Exact, 80.0),
            (AtLeast, 56.0),
            (Exact, 56.0),
            (AtMost, 60.0),
            (AtLeast, 70.0),
            (Exact, 83.0),
        ];
        assert_eq!(informative(&a), vec![80.0, 56.0, 56.0, 60.0, 70.0, 83.0]);
        let w = Swing::of(&informative(&a)).unwrap();
        assert!((w.mean - 67.5).abs() < 1e-9, "{}", w.mean);
        // Bounds alone all count.
        let b = [(AtMost, 300.0), (AtLeast, 56.0)];
        assert_eq!(informative(&b), vec![300.0, 56.0]);
        assert!(informative(&[]).is_empty());
    }

    #[test]
    fn two_bounds_past_the_answers_range_stand() {
        let (lo, hi) = (26.4, 30.7);
        let at_least = |e| Some((Bound::AtLeast, e));
        // Climbing past it twice: the last bound.
        assert_eq!(
            climbed_past(at_least(37.1), at_least(62.7), lo, hi),
            Some((Bound::AtLeast, 62.7))
        );
        // Once, after an exact answer; or once inside the range.
        assert_eq!(
            climbed_past(Some((Bound::Exact, 28.0)), at_least(85.0), lo, hi),
            None
        );
        assert_eq!(climbed_past(at_least(29.0), at_least(62.7), lo, hi), None);
        // Opposite sides, or nothing yet.
        assert_eq!(
            climbed_past(Some((Bound::AtMost, 20.0)), at_least(62.7), lo, hi),
            None
        );
        assert_eq!(climbed_past(None, at_least(62.7), lo, hi), None);
        assert_eq!(
            climbed_past(
                Some((Bound::AtMost, 20.0)),
                Some((Bound::AtMost, 12.0)),
                lo,
                hi
            ),
            Some((Bound::AtMost, 12.0))
        );
    }

    #[test]
    fn sub_streams_stamped_one_by_one_last_a_millisecond() {
        let mut p = MultirateParams::default();
        // 10 Gbit/s path, 9000 B, top rate 6.5 Gbit/s: 1 ms holds
        // 1e-3 * 6.5e9 / 72000 = 90.3 packets; capped at the default 64.
        assert_eq!(per_rate_for_time(&p, 6.5e9), 64);
        // The lab: 1514 B at 195 Mbit/s, 16.1 -> 17: the floor, 32.
        p.size_bytes = 1514;
        assert_eq!(per_rate_for_time(&p, 195e6), 32);
        // 500 Mbit/s: 41.3 -> 42.
        assert_eq!(per_rate_for_time(&p, 500e6), 42);
    }

    #[test]
    fn a_floor_in_bytes_lengthens_small_packets_only() {
        let mut p = MultirateParams {
            min_sub_stream_bytes: 72_000,
            ..MultirateParams::default()
        };
        // 9000 B at 195 Mbit/s: 2.7 packets in 1 ms, 72 KB in 8: the
        // floor of 32 packets.
        assert_eq!(per_rate_for_time(&p, 195e6), 32);
        // The lab: 1514 B at 195 Mbit/s, 16.1 -> 17 packets in 1 ms;
        // 72000 / 1514 = 47.6 -> 48 packets carry 72 KB.
        p.size_bytes = 1514;
        assert_eq!(per_rate_for_time(&p, 195e6), 48);
        // 800 Mbit/s: 1e-3 * 800e6 / 12112 = 66.1: capped at 64.
        assert_eq!(per_rate_for_time(&p, 800e6), 64);
        // 700 Mbit/s: 57.8 -> 58, over the 48 of the bytes.
        assert_eq!(per_rate_for_time(&p, 700e6), 58);
        assert_eq!(per_rate_for_time(&p, f64::NAN), 64);
    }

    #[test]
    fn swing_by_hand() {
        // 1..=8: median 4.5, quartiles 2.75 and 6.25, half-width
        // 1.58 * 3.5 / sqrt(8) = 1.955; at 5 % the interval needs
        // 8 * (1.955 / 0.225)^2 = 604 streams: more than 8 + 50.
        let v: Vec<f64> = (1..=8).map(f64::from).collect();
        let w = swing(&v, 0.05, 50, 8).expect("futile");
        assert_eq!(w.mean, 4.5);
        // 10th and 90th percentiles: positions 0.7 and 6.3 of 0..7.
        assert!(
            (w.low - 1.7).abs() < 1e-12 && (w.high - 7.3).abs() < 1e-12,
            "{w:?}"
        );
        // Too few answers to judge.
        assert_eq!(swing(&v, 0.05, 50, 9), None);
        // At 30 %: 8 * (1.955 / 1.35)^2 = 16.8 streams needed; 8 + 10
        // left is enough, 8 + 8 is not.
        assert_eq!(swing(&v, 0.3, 10, 8), None);
        assert!(swing(&v, 0.3, 8, 8).is_some());
        // Answers that agree: 98..102, IQR 1.25, half 0.698; needed
        // 8 * (0.698 / 5)^2 = 0.16 streams.
        let agree = [100.0, 101.0, 99.0, 100.0, 102.0, 98.0, 100.0, 101.0];
        assert_eq!(swing(&agree, 0.05, 0, 8), None);
        // Three streams of eight met a burst: median 100, quartiles 40
        // and 100, half 1.58 * 60 / sqrt(8) = 33.5, the interval [66.5,
        // 100] once clamped (half-width 16.8), needed 8 * (16.8 / 5)^2 =
        // 90 > 8 + 10. The answer is what the streams met on average,
        // 77.5, not the idle moments' 100.
        let burst = [100.0, 100.0, 40.0, 100.0, 100.0, 40.0, 40.0, 100.0];
        let w = swing(&burst, 0.05, 10, 8).expect("futile");
        assert!((w.mean - 77.5).abs() < 1e-12, "{w:?}");
    }

    #[test]
    fn median_interval_by_hand() {
        // Sorted 1..=9: median 5, quartiles 3 and 7, half = 1.58*4/3.
        let v: Vec<f64> = (1..=9).rev().map(f64::from).collect();
        let (m, lo, hi) = median_interval(&v);
        assert_eq!(m, 5.0);
        let half = 1.58 * 4.0 / 3.0;
        assert!((lo - (5.0 - half)).abs() < 1e-12 && (hi - (5.0 + half)).abs() < 1e-12);
        // Identical estimates: a zero-width interval.
        assert_eq!(median_interval(&[7.0; 5]), (7.0, 7.0, 7.0));
        // One value: the interval is the value.
        assert_eq!(median_interval(&[3.0]), (3.0, 3.0, 3.0));
    }

    #[test]
    fn answer_range_by_hand() {
        let p = MultirateParams::default();
        let close = |(lo, hi): (f64, f64), (a, b): (f64, f64)| {
            assert!((lo - a).abs() < 1e-9 && (hi - b).abs() < 1e-9, "{lo} {hi}");
        };
        // Five answers: the sign-test interval is the whole sample
        // (93.75 %), inside the +-5 % floor around 102: the floor.
        close(
            answer_range(&[104.0, 100.0, 102.0, 101.0, 103.0], &p),
            (96.9, 107.1),
        );
        // A wider spread: the sample's ends.
        close(
            answer_range(&[80.0, 120.0, 100.0, 90.0, 110.0], &p),
            (80.0, 120.0),
        );
        // Identical answers (a bare tbf): the floor, not zero width.
        close(answer_range(&[200.0; 6], &p), (190.0, 210.0));
        // Two answers: their span plus half a rate step (0.3 / 4 of the
        // median 100) on each side.
        close(answer_range(&[90.0, 110.0], &p), (82.5, 117.5));
        close(answer_range(&[100.0], &p), (92.5, 107.5));
    }

    #[test]
    fn the_range_reaches_bounds_beyond_it() {
        use Bound::{AtLeast, AtMost, Exact};
        // "At least 124" over a range that ends at 112, "at most 70"
        // under one that starts at 78: both moments belong to the run.
        let a = [
            (Exact, 97.0),
            (AtLeast, 124.0),
            (AtLeast, 69.0),
            (AtMost, 70.0),
        ];
        assert_eq!(reach_bounds((78.0, 112.0), &a), (70.0, 124.0));
        // Bounds inside the range, exact answers anywhere, none at all:
        // the range as it was.
        let inside = [
            (AtLeast, 100.0),
            (AtMost, 90.0),
            (Exact, 300.0),
            (Exact, 1.0),
        ];
        assert_eq!(reach_bounds((78.0, 112.0), &inside), (78.0, 112.0));
        assert_eq!(reach_bounds((78.0, 112.0), &[]), (78.0, 112.0));
    }

    proptest::proptest! {
        /// The range only grows, holds every bound on its own side, and
        /// no exact answer moves it.
        #[test]
        fn reached_ranges_hold_their_bounds(
            lo in 1.0f64..1e9,
            width in 0.0f64..1e9,
            a in proptest::collection::vec((0u8..3, 1.0f64..2e9), 0..12),
        ) {
            let to_bound = |k: u8| [Bound::Exact, Bound::AtLeast, Bound::AtMost][k as usize];
            let answers: Vec<(Bound, f64)> = a.iter().map(|&(k, e)| (to_bound(k), e)).collect();
            let (l, h) = reach_bounds((lo, lo + width), &answers);
            proptest::prop_assert!(l <= lo && h >= lo + width);
            for &(b, e) in &answers {
                match b {
                    Bound::AtLeast => proptest::prop_assert!(h >= e),
                    Bound::AtMost => proptest::prop_assert!(l <= e),
                    _ => {}
                }
            }
            let bounds_only: Vec<(Bound, f64)> =
                answers.iter().copied().filter(|&(b, _)| b != Bound::Exact).collect();
            proptest::prop_assert_eq!(reach_bounds((lo, lo + width), &bounds_only), (l, h));
        }
    }
}
