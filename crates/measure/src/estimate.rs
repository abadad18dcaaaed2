//! Available bandwidth of a target: open its channel, run one closed-loop
//! method, decide what the answer may claim (the ceiling policy), save the
//! streams when asked, and report.

use crate::bad_input;
use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tightlink_core::warning::{Warning, WarningCode};

use anyhow::{Context, Result};
use tightlink_core::channel::{Channel, ChannelInfo, HostFindings, Recorder};
use tightlink_core::decision::burst::{bursts_swing, steps_met_often, steps_under_answer, Held};
use tightlink_core::units::format_rate;
use tightlink_core::{AnalysisParams, Bound, ProbeStream};
use tightlink_probe::strategy::bart::{self, BartStrategyParams, BartUpdate};
use tightlink_probe::strategy::{Ceiling, Method, Session, Stop};
use tightlink_probe::{Budget, Report};

use crate::report::{Cost, Event};
pub use crate::report_warnings::{
    shaper_warning, slow_trains_warning, small_head_warning, standing_queue_warning,
    whole_at_top_warning,
};
use crate::save;
use crate::target::{open_channel, RealOptions, Target};

/// What to measure and how.
#[derive(Debug, Clone)]
pub struct EstimateOptions {
    pub method: Method,
    /// Most probe streams to send.
    pub max_streams: usize,
    /// Most probe bytes to send (the far end's own limit, when lower,
    /// wins); `None`: the strategies' budget, 100 MB.
    pub max_bytes: Option<u64>,
    /// Toward real far ends: direction, key, rate limit, backend.
    pub real: RealOptions,
    /// Write every stream of the run as a probe trace (gzip for `.gz`).
    pub save_trace: Option<PathBuf>,
    /// With `save_trace` on a simulated path: the per-stream truth.
    pub save_truth: Option<PathBuf>,
    /// Smoothing and decision parameters.
    pub analysis: AnalysisParams,
    /// Track the available bandwidth (`bart` only) until `max_streams`,
    /// with an [`Event::Update`] per stream, instead of stopping once sure.
    pub follow: bool,
    /// Following: a stream every this many ns (the channel idles between
    /// streams); 0 sends them back to back. At most
    /// [`MAX_FOLLOW_INTERVAL_NS`]: a real session idle longer times out.
    pub follow_interval_ns: i64,
}

/// The longest pause between followed streams: the server cuts a session
/// idle for 10 s.
pub const MAX_FOLLOW_INTERVAL_NS: i64 = 5_000_000_000;

impl Default for EstimateOptions {
    fn default() -> Self {
        EstimateOptions {
            method: Method::Auto,
            max_streams: 60,
            max_bytes: None,
            real: RealOptions::default(),
            save_trace: None,
            save_truth: None,
            analysis: AnalysisParams::default(),
            follow: false,
            follow_interval_ns: 0,
        }
    }
}

/// Why an answer was capped at the probe ceiling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Capped {
    /// This host cannot pace probes any faster.
    HostLimited,
    /// The far end's limit or the caller's `max_rate_bps`.
    FarEndOrMaxRate,
}

/// One available-bandwidth measurement. Serialises to the JSON object
/// `tightlink estimate --json` prints; fields are added, never renamed.
#[derive(Debug, Clone, PartialEq)]
pub struct EstimateReport {
    pub target: String,
    /// The method's answer (after the ceiling policy on real paths):
    /// estimate, bound, confidence range (`high_bps` infinite when no
    /// upper limit was measured), cost, the simulator's truth, why it
    /// stopped.
    pub estimate: Report,
    /// The layer at which sizes and rates are counted.
    pub rate_layer: &'static str,
    /// Real targets: what the channel found about this host.
    pub host: Option<HostFindings>,
    /// Real targets: the fastest rate this run could probe at (host,
    /// far end's limit, `max_rate_bps`).
    pub probe_ceiling_bps: Option<f64>,
    /// The answer was capped at the ceiling, and why.
    pub capped: Option<Capped>,
    /// Real targets: first probe's scheduled send to last kernel receive
    /// stamp, Unix ns.
    pub probe_window_unix_ns: Option<[i64; 2]>,
    /// Real targets: the same over the streams the answer came from (the
    /// probe window less the checks that left the answer as it was:
    /// [`Report::check_streams`]).
    pub answer_window_unix_ns: Option<[i64; 2]>,
    /// What the reader must know about the path's answer (the host's own
    /// warnings are in `host`).
    pub warnings: Vec<Warning>,
}

impl EstimateReport {
    /// The host's warnings, then the path's: the order JSON and the CLI
    /// give them in.
    pub fn all_warnings(&self) -> impl Iterator<Item = &Warning> {
        self.host
            .iter()
            .flat_map(|h| h.warnings.iter())
            .chain(self.warnings.iter())
    }

    /// The host's pacing limit when it has one.
    pub fn host_limit_bps(&self) -> Option<f64> {
        self.host
            .as_ref()
            .map(|h| h.host_limit_bps)
            .filter(|l| l.is_finite())
    }

    /// Relative error against the simulator's truth; `None` without a
    /// truth or without an answer (`none` is no number to be wrong by).
    pub fn error(&self) -> Option<f64> {
        if self.estimate.bound == Bound::None {
            return None;
        }
        self.estimate
            .truth_bps
            .map(|t| self.estimate.available_bandwidth_bps / t - 1.0)
    }
}

/// The layer the simulator counts: its packets' `size_bytes`.
pub const SIM_RATE_LAYER: &str = "probe size_bytes (the simulator's packet size)";

/// Measures the available bandwidth of `target`. `on_event` sees progress
/// and every stream as it comes back; nothing is printed.
pub fn estimate(
    target: &Target,
    options: &EstimateOptions,
    on_event: &mut dyn FnMut(Event),
) -> Result<EstimateReport> {
    let started = Instant::now();
    check_options(options)?;
    let events = RefCell::new(on_event);
    let mut channel = Recorder::observed(open_channel(target, &options.real)?, |p| {
        (events.borrow_mut())(Event::Stream {
            stream: &p.stream,
            truth: p.truth,
        })
    });
    let info = channel.info();
    let budget = budget_of(options, &info)?;
    let report = {
        let mut progress = |f: f64| (events.borrow_mut())(Event::Progress(f));
        if options.follow {
            let mut p = BartStrategyParams {
                follow: true,
                interval_ns: options.follow_interval_ns,
                ..BartStrategyParams::default()
            };
            p.streams.size_bytes = info.probe_size_bytes.unwrap_or(p.streams.size_bytes);
            let mut update = |u: &BartUpdate| (events.borrow_mut())(Event::Update(*u));
            let mut s = Session::start(&mut channel, budget, &mut progress)?;
            bart::run_with_updates(&mut s, p, &options.analysis, &mut update)?
        } else {
            options
                .method
                .run(&mut channel, &options.analysis, budget, &mut progress)?
        }
    };
    channel.close().context("closing the session")?;
    // What the strategy used: the streams it did not send again.
    let kept: Vec<ProbeStream> = channel.kept().map(|(_, s)| s.clone()).collect();
    let mut host = channel.side_report().host;
    // Path loss is judged on the streams whose receiver kept up: what an
    // overflowing socket dropped has its own warning.
    let kept_up: Vec<ProbeStream> = channel
        .kept()
        .filter(|(i, _)| !channel.overflowed[*i])
        .map(|(_, s)| s.clone())
        .collect();
    if let (Some(h), Some(w)) = (host.as_mut(), loss_at_the_lowest_rates(&kept_up)) {
        h.warnings
            .push(Warning::new(WarningCode::LossAtLowestRates, w));
    }
    let wall_s = started.elapsed().as_secs_f64();
    let ceiling = info.max_rate_bps;
    let answer_window_unix_ns = host
        .as_ref()
        .and_then(|_| answer_window(&kept, &report.check_streams));
    let mut r = EstimateReport {
        target: target.to_string(),
        estimate: Report {
            // The whole measurement's wall time, session set-up and close too.
            cost: Cost {
                wall_s,
                ..report.cost
            },
            ..report
        },
        rate_layer: host.as_ref().map_or(SIM_RATE_LAYER, |h| h.rate_layer),
        probe_ceiling_bps: host.as_ref().map(|_| ceiling),
        probe_window_unix_ns: host.as_ref().and_then(|_| probe_window(&channel.streams)),
        answer_window_unix_ns,
        host,
        capped: None,
        warnings: Vec::new(),
    };
    let kept_late: Vec<bool> = channel
        .kept()
        .map(|(i, _)| channel.late.get(i).copied().unwrap_or(false))
        .collect();
    r.warnings = stream_warnings(options, &r.estimate, &kept, &kept_late);
    if r.host.is_some() {
        apply_ceiling(&mut r, ceiling);
        apply_host_pace(&mut r);
    }
    if let Some(path) = &options.save_trace {
        save_streams(options, path, &r.target, ceiling, &channel)?;
    }
    Ok(r)
}

/// Options no session should be asked for (checked before a far end is).
fn check_options(options: &EstimateOptions) -> Result<()> {
    if options.max_streams == 0 {
        bad_input!("--max-streams 0: a measurement needs at least one stream");
    }
    if options.max_bytes == Some(0) {
        bad_input!("--max-bytes 0: a measurement needs some probe bytes");
    }
    if let Some(c) = options.analysis.capacity_bps {
        if !(c.is_finite() && c > 0.0) {
            bad_input!("--capacity {c}: must be a positive rate in bit/s");
        }
    }
    if options.analysis.capacity_bps.is_some() && !options.method.uses_capacity() {
        bad_input!(
            "--capacity: {} does not read a known capacity ({} do)",
            options.method,
            Method::capacity_users()
        );
    }
    Ok(())
}

/// The budget: the options' and the far end's limits; following runs as
/// long as its streams last, not a byte or time budget (the far end's
/// byte limit still holds).
fn budget_of(options: &EstimateOptions, info: &ChannelInfo) -> Result<Budget> {
    let mut budget = Budget {
        max_streams: options.max_streams,
        ..Budget::default()
    };
    if let Some(limit) = options.max_bytes {
        budget.max_bytes = budget.max_bytes.min(limit);
    }
    if let Some(limit) = info.byte_limit {
        budget.max_bytes = budget.max_bytes.min(limit);
    }
    if options.follow {
        if options.method != Method::Bart {
            bad_input!("--follow tracks with --method bart, not {}", options.method);
        }
        if !(0..=MAX_FOLLOW_INTERVAL_NS).contains(&options.follow_interval_ns) {
            bad_input!(
                "the interval between followed streams must be within 0..{} s, not {} ns",
                MAX_FOLLOW_INTERVAL_NS / 1_000_000_000,
                options.follow_interval_ns
            );
        }
        budget.max_bytes = info.byte_limit.unwrap_or(u64::MAX);
        budget.max_duration_ns = i64::MAX;
    }
    Ok(budget)
}

/// What the kept streams and the answer show that the number alone does
/// not say.
fn stream_warnings(
    options: &EstimateOptions,
    estimate: &Report,
    kept: &[ProbeStream],
    kept_late: &[bool],
) -> Vec<Warning> {
    let mut warnings = Vec::new();
    if estimate.stop == Stop::Swings {
        warnings.push((WarningCode::Swing, Some(swing_warning(estimate, kept))));
    }
    // Each stream is analysed once for both.
    let answer_bps = (estimate.bound != Bound::None && estimate.available_bandwidth_bps > 0.0)
        .then_some(estimate.available_bandwidth_bps);
    let held = held_streams(&options.analysis, kept, kept_late, answer_bps);
    warnings.extend([
        (WarningCode::Burst, held.burst_warning()),
        (WarningCode::Pause, held.pause_warning()),
        (WarningCode::SingleStep, held.single_step_warning()),
        (
            WarningCode::CoalescedTrend,
            coalesced_trend_streams(options.method, &options.analysis, kept),
        ),
        (WarningCode::JumboChirps, jumbo_chirps(options.method, kept)),
        (
            WarningCode::UnsettledBudget,
            unsettled_budget_stop(estimate),
        ),
        (WarningCode::Shaper, shaper_warning(estimate)),
        (WarningCode::WholeAtTop, whole_at_top_warning(estimate)),
        (WarningCode::SlowTrains, slow_trains_warning(estimate)),
        (WarningCode::StandingQueue, standing_queue_warning(estimate)),
        (WarningCode::SmallHead, small_head_warning(estimate)),
    ]);
    if matches!(estimate.stop, Stop::NoUsableStream | Stop::NoUsableAdrTrain) {
        warnings.push((
            WarningCode::Unusable,
            why_unusable(options.method, &options.analysis, kept),
        ));
    }
    warnings
        .into_iter()
        .filter_map(|(code, text)| Some(Warning::new(code, text?)))
        .collect()
}

/// Every stream sent, as a probe trace at `path` (and the simulator's
/// truths beside it where asked), with what the run knew of them.
fn save_streams<C>(
    options: &EstimateOptions,
    path: &Path,
    target: &str,
    ceiling: f64,
    channel: &Recorder<C>,
) -> Result<()> {
    let mut metadata = vec![
        ("source".to_string(), "tightlink estimate".to_string()),
        ("path".to_string(), target.to_string()),
        ("method".to_string(), options.method.to_string()),
        ("max_rate_bps".to_string(), format!("{ceiling:.0}")),
    ];
    if channel.late.contains(&true) {
        metadata.push(("late_streams".to_string(), channel.late_list()));
    }
    if channel.overflowed.contains(&true) {
        metadata.push(("overflowed_streams".to_string(), channel.overflowed_list()));
    }
    if channel.superseded.contains(&true) {
        metadata.push(("superseded_streams".to_string(), channel.superseded_list()));
    }
    save::write_trace(path, metadata, &channel.streams)?;
    if let Some(t) = &options.save_truth {
        save::write_truth(t, &channel.streams, &channel.truths)?;
    }
    Ok(())
}

/// Why no stream could be used, as the method read the last one.
fn why_unusable(
    method: Method,
    analysis: &AnalysisParams,
    streams: &[ProbeStream],
) -> Option<String> {
    let last = streams.last()?;
    let m = method.per_stream();
    let a = tightlink_core::analyze(last, m.kind(), m, analysis);
    a.reason.map(|r| {
        format!(
            "no stream gave an answer; {} said of the last one: {r}",
            m.name()
        )
    })
}

/// A method with a stopping rule (streams that agree, a bracket that
/// closes) that stopped on its byte, stream or time budget instead: the
/// answer is the reading so far, not one the rule accepted, and its range
/// only what those streams spanned (at 100 Gbit/s such DP1 runs read
/// 20-66 % low with ranges that missed the truth). IGI, PTR and BART end
/// on the budget by design: their answer is complete there.
pub fn unsettled_budget_stop(e: &Report) -> Option<String> {
    if e.stop != Stop::Budget || matches!(e.method, Method::Igi | Method::Ptr | Method::Bart) {
        return None;
    }
    let spent = format!(
        "the probe budget ran out after {} streams ({:.1} MB) before {} settled",
        e.cost.streams,
        e.cost.probe_bytes as f64 / 1e6,
        e.method.name()
    );
    let range = format!("{} to {}", format_rate(e.low_bps), format_rate(e.high_bps));
    Some(match e.bound {
        // The searches' range is their posterior's 90 % interval, which
        // had not narrowed to the width they stop at.
        Bound::Exact if is_search(e.method) => {
            format!(
                "{spent}: the estimate is its posterior's median so far, and the range ({range}) that posterior's 90 % interval, wider than the one it stops at (its decisions disagreed)"
            )
        }
        Bound::Exact => format!(
            "{spent}: the estimate is its reading so far, and the range ({range}) only what those streams spanned, not a confidence interval"
        ),
        Bound::AtLeast | Bound::AtMost => format!(
            "{spent}: the bound is the last stream's, not one the streams agreed on"
        ),
        Bound::None => format!("{spent}, with no answer"),
    })
}

/// The PRC-MT searches: a posterior over their single-rate decisions
/// gives their range, and their decisions say where a swing's mean lies.
fn is_search(m: Method) -> bool {
    matches!(m, Method::Prcmt | Method::PrcmtPba | Method::ScanPba)
}

/// What a `swings` stop means, with the time scale the streams probed.
pub fn swing_warning(e: &Report, streams: &[ProbeStream]) -> String {
    if let Some(b) = e.busy {
        return format!(
            "{} of {} lone probes over {:.0} ms found the tight link busy (queued or lost), where the streams read it idle at {}: it swings between idle and saturated; the estimate is the idle rate times the idle share, and the range ({} to {}) that share's 90 % interval",
            b.busy,
            b.probes,
            b.span_ns as f64 / 1e6,
            format_rate(b.idle_bps),
            format_rate(e.low_bps),
            format_rate(e.high_bps)
        );
    }
    let spans: Vec<f64> = streams.iter().map(|s| s.send_span_ns()).collect();
    let span_ms = tightlink_core::stats::median(&spans).unwrap_or(f64::NAN) / 1e6;
    let (low, high) = (format_rate(e.low_bps), format_rate(e.high_bps));
    match e.method {
        // The searches' range is where their decisions contradicted the
        // threshold they converged on, not percentiles of answers, and
        // their answer the mean of what the streams met.
        m if is_search(m) => {
            let (under, over) = e.swung_bps.unwrap_or((e.low_bps, e.high_bps));
            // Rate 0 stands for a stream lost whole.
            let congestion = if under > 0.0 {
                format!("congestion at {}", format_rate(under))
            } else {
                "congestion (one lost whole)".to_string()
            };
            format!(
                "the available bandwidth swung from stream to stream: streams of about {span_ms:.1} ms met {congestion} and room at {} or more, against the rate the others agreed on; the estimate is the mean of what the streams met, not a steady rate, and their decisions put that mean between {low} and {high}",
                format_rate(over),
            )
        }
        _ => format!(
            "the available bandwidth swung between {low} and {high} from stream to stream (10th to 90th percentile of {} streams of about {span_ms:.1} ms each); the estimate is their mean, not a steady rate",
            streams.len().saturating_sub(1),
        ),
    }
}

/// Multi-rate streams that met bursts of cross traffic faster than the
/// link (`analyze`'s note; streams whose sender fell behind, flagged in
/// `late`, show the same signature and are left out), said when two or
/// more did, a quarter of them at least (the lab's smoothed cross
/// traffic, whose generator now and then stalls and catches up, had 2
/// of 15 in one run). A stream that met one reads the moment it came, and the
/// streams between bursts read the quiet moments: on the lab's ON/OFF
/// source (peaks four times the link) 41-45 % of the streams met one,
/// and runs whose streams fell between bursts answered the link rate
/// `stable` where the counters showed 10-25 % of it taken.
pub fn burst_warning(
    analysis: &AnalysisParams,
    streams: &[ProbeStream],
    late: &[bool],
) -> Option<String> {
    held_streams(analysis, streams, late, None).burst_warning()
}

/// Multi-rate streams the path held at once (`analyze`'s note: one step
/// carried half the queue's rise or more), said under the same count as
/// bursts: two or more, a quarter at least. Such a stream's reading
/// counts the pause as cross traffic. On the lab's path without cross
/// traffic, on a VM losing 10-18 % of its time to steal, 4 streams of 6
/// runs met holes of 0.4-1 ms (the host, or tbf's timer), 2 in one run.
pub fn pause_warning(
    analysis: &AnalysisParams,
    streams: &[ProbeStream],
    late: &[bool],
) -> Option<String> {
    held_streams(analysis, streams, late, None).pause_warning()
}

/// The multi-rate streams of a run, and what held those of them whose
/// sender kept to schedule; the single-rate streams, and how many of
/// those that kept to schedule met a step of queue (`without_steps`),
/// over all and among those sent under the answer.
struct HeldStreams {
    multi: usize,
    held: Vec<Held>,
    single: usize,
    stepped_single: usize,
    under_answer: usize,
    stepped_under_answer: usize,
}

impl HeldStreams {
    /// How many were held `how` (the rise where they were), and the
    /// largest rise in ms, where the count says the path swings.
    fn counted(&self, how: fn(Held) -> Option<f64>) -> Option<(usize, f64)> {
        let rises: Vec<f64> = self.held.iter().filter_map(|&h| how(h)).collect();
        bursts_swing(rises.len(), self.multi)
            .then(|| (rises.len(), rises.iter().copied().fold(0.0, f64::max) / 1e6))
    }

    fn burst_warning(&self) -> Option<String> {
        let (n, most_ms) = self.counted(Held::burst_rise_ns)?;
        Some(format!(
            "{n} of {} multi-rate streams met bursts of cross traffic faster than the link (the queue rose up to {most_ms:.2} ms beyond what their rates explain): the available bandwidth swings within a stream's time, and over longer times it may be lower than streams between the bursts read",
            self.multi
        ))
    }

    fn pause_warning(&self) -> Option<String> {
        let (n, most_ms) = self.counted(Held::pause_rise_ns)?;
        Some(format!(
            "{n} of {} multi-rate streams were held at once (the queue rose up to {most_ms:.2} ms in one step): batches of cross traffic that came at once, or a pause of the path (the measuring hosts, a hypervisor taking their CPUs, or a shaper's timer); the readings count each step's time as a batch's, which a pause is not",
            self.multi
        ))
    }

    fn single_step_warning(&self) -> Option<String> {
        let n = self.stepped_single;
        if steps_met_often(n, self.single) {
            return Some(format!(
                "{n} of {} single-rate streams met the queue rising in steps: batches of cross traffic that came at once, or pauses of the path; the decisions count each step's time as a batch's, which a pause is not, and the trend tests were not made for either",
                self.single
            ));
        }
        let u = self.stepped_under_answer;
        steps_under_answer(u, self.under_answer).then(|| format!(
            "{u} of the {} single-rate streams sent under the answer met the queue rising in steps, where the probes alone build none: batches of cross traffic that came at once, or pauses of the path; which streams they hit decided the answer",
            self.under_answer
        ))
    }
}

/// The multi-rate streams among `streams`, and what held those of them
/// whose sender kept to schedule (`late` flags the others). A
/// single-rate stream is under `answer_bps` when sent more than
/// [`UNDER_ANSWER`] below it (the pathload mode's resolution is 2 %).
fn held_streams(
    analysis: &AnalysisParams,
    streams: &[ProbeStream],
    late: &[bool],
    answer_bps: Option<f64>,
) -> HeldStreams {
    let mut held = Vec::new();
    let (mut multi, mut single, mut stepped_single) = (0usize, 0usize, 0usize);
    let (mut under_answer, mut stepped_under_answer) = (0usize, 0usize);
    for (k, s) in streams.iter().enumerate() {
        let on_time = !late.get(k).copied().unwrap_or(false);
        match s.infer_kind(analysis.gap_tolerance) {
            tightlink_core::StreamKind::MultiRate => {}
            tightlink_core::StreamKind::SingleRate => {
                single += 1;
                let window = analysis.multipass.window;
                let stepped =
                    on_time && tightlink_core::decision::burst::without_steps(s, window).is_some();
                stepped_single += usize::from(stepped);
                let under = matches!(
                    (answer_bps, s.avg_rate_bps()),
                    (Some(a), Some(r)) if r < (1.0 - UNDER_ANSWER) * a
                );
                if under && on_time {
                    under_answer += 1;
                    stepped_under_answer += usize::from(stepped);
                }
                continue;
            }
            _ => continue,
        }
        multi += 1;
        if !on_time {
            continue;
        }
        let a = tightlink_core::analyze(
            s,
            tightlink_core::StreamKind::MultiRate,
            tightlink_core::Method::Multirate,
            analysis,
        );
        held.extend(crate::analyze::held_by(s, &a));
    }
    HeldStreams {
        multi,
        held,
        single,
        stepped_single,
        under_answer,
        stepped_under_answer,
    }
}

/// How far under the answer a single-rate stream is sent to count as
/// under it.
const UNDER_ANSWER: f64 = 0.03;

/// Pathload's trend tests on streams a coalescing receiver stamped in
/// batches: after its burst filter the kept delays beat with the
/// interrupt interval, and PCT/PDT read trends where none is or miss one
/// (\[IMR\] section 3: with 125 us interrupt delays Pathload gave no
/// estimate on any path; the simulator's 100 Gbit/s path read "at most
/// 1.4 Gbit/s" with 75 free). IMR's de-noising is built for such streams
/// but leaves part of each batch's sawtooth: a window average removes it
/// only when the window spans whole batches (\[IMR\] leaves the window's
/// size to future work). On the simulator's 10 Gbit/s paths with 125 us
/// coalescence 70-80 % of imr-avg's streams read grey, so its fleets
/// mostly answer "at least"; on the smoothed path its search stopped at
/// 5.8 Gbit/s with 7.6 free in half the seeds, the rate at which a batch
/// holds 10 packets, its window: the averaged delays beat into a false
/// trend there. Said when most streams arrived in batches.
pub fn coalesced_trend_streams(
    method: Method,
    analysis: &AnalysisParams,
    streams: &[ProbeStream],
) -> Option<String> {
    let imr = matches!(method, Method::ImrAvg | Method::ImrWavelet);
    if method != Method::Pathload && !imr {
        return None;
    }
    // (interval, packets per batch) of each stream stamped in batches.
    let batched: Vec<(f64, f64)> = streams
        .iter()
        .filter_map(|s| {
            let interval = s.receive_batch_interval_ns()?;
            let batches = s.receive_batch_count()?;
            Some((interval, s.received_count() as f64 / batches as f64))
        })
        .collect();
    if 2 * batched.len() <= streams.len() {
        return None;
    }
    let median = |v: Vec<f64>| tightlink_core::stats::median(&v).unwrap_or(f64::NAN);
    let us = median(batched.iter().map(|b| b.0).collect()) / 1e3;
    let per_batch = median(batched.iter().map(|b| b.1).collect());
    let head = format!(
        "the receiver stamped {} of {} streams in batches about {us:.0} us apart (interrupt coalescence)",
        batched.len(),
        streams.len()
    );
    Some(if imr {
        let denoise = if method == Method::ImrAvg {
            format!(
                "a {}-packet window average",
                // The search's streams all have one length.
                analysis
                    .imr_window
                    .length(streams.last().map_or(0, ProbeStream::len))
            )
        } else {
            "a wavelet approximation".to_string()
        };
        format!(
            "{head}, {per_batch:.0} packets each (median): IMR's de-noising ({denoise}) leaves part of each batch's sawtooth, so its fleets mostly read grey (an \"at least\" answer) and, where a batch holds about as many packets as its window, a false trend: this answer may be far off; multirate (the default) smooths such streams"
        )
    } else {
        format!(
            "{head}: Pathload's trend tests misread such streams, so this answer may be far off; multirate (the default) smooths them"
        )
    })
}

/// pathChirp through a coalescing receiver reads jumbo chirps (pathChirp's
/// `-J`): each element is J packets at the line rate, a burst that
/// queues behind cross traffic on its own, so its delays carry some of
/// its own queue. On the simulator's 10 Gbit/s paths with 125 us
/// coalescence the closed loop read 11 % low (median; 20 of 20 runs
/// low) on bursty and smoothed traffic and 23 % under one ON/OFF source,
/// where with plain chirps and a receiver that stamps each packet it
/// read 3-6 %. Said when most chirps were jumbo.
pub fn jumbo_chirps(method: Method, streams: &[ProbeStream]) -> Option<String> {
    if method != Method::Pathchirp {
        return None;
    }
    let sizes: Vec<f64> = streams
        .iter()
        .filter_map(|s| {
            let elements = s.jumbo_elements()?;
            Some(s.len() as f64 / elements.len().max(1) as f64)
        })
        .collect();
    (2 * sizes.len() > streams.len()).then(|| {
        let j = tightlink_core::stats::median(&sizes).unwrap_or(f64::NAN);
        format!(
            "{} of {} chirps were sent as elements of about {j:.0} packets (pathChirp's -J) to read through the receiver's batches (interrupt coalescence); each element queues as a burst of its own, and on the simulator such chirps read 11 % low (23 % under one ON/OFF source): this answer is likely low; multirate (the default) smooths batched streams",
            sizes.len(),
            streams.len()
        )
    })
}

/// Loss where no queue should overflow: the slowest quarter of the
/// streams (at least one) lost 1 % of their packets or more (and at least
/// two). Random loss on the path, a policer below every rate probed, or
/// cross traffic that bursts past the link and fills its queue (the
/// lab's ON/OFF source: 19 % of the slowest streams' probes in one run)
/// reads as congestion to every method here, so the answer may be low.
pub fn loss_at_the_lowest_rates(streams: &[ProbeStream]) -> Option<String> {
    let mut by_rate: Vec<(f64, usize, usize)> = streams
        .iter()
        .filter(|s| s.packets.len() >= 2)
        .map(|s| {
            // Every packet's bytes over the send span, as the warning says
            // it (ProbeStream::avg_rate_bps leaves the first packet out).
            let bytes: u64 = s.packets.iter().map(|p| p.size_bytes as u64).sum();
            let rate = tightlink_core::stream::rate_bps(bytes as f64, s.send_span_ns());
            (
                rate.unwrap_or(f64::INFINITY),
                s.len(),
                s.len() - s.received_count(),
            )
        })
        .collect();
    by_rate.sort_by(|a, b| a.0.total_cmp(&b.0));
    let slow = &by_rate[..by_rate.len().div_ceil(4)];
    let (sent, lost) = slow.iter().fold((0, 0), |(s, l), x| (s + x.1, l + x.2));
    let top = slow.last()?.0;
    (lost >= 2 && lost * 100 >= sent).then(|| {
        format!(
            "probes were lost even at the lowest rates probed ({lost} of {sent}, {:.1} %, in streams up to {:.1} Mbit/s): the path loses packets at random, polices below those rates, or its queue overflows under bursts of cross traffic; loss reads as congestion, so the estimate may read low",
            100.0 * lost as f64 / sent as f64,
            top / 1e6
        )
    })
}

/// Both directions of one far end, the forward first. The far end is
/// asked first whether it can send the reverse direction (a reverse
/// session opened and closed: its hello tells, as a reflector that does
/// not hold trains says at once), so such a far end refuses before any
/// forward probe goes. The reverse run's result is its own: where it
/// fails after the forward one answered, the forward answer is kept.
pub fn estimate_both(
    target: &Target,
    options: &EstimateOptions,
    on_event: &mut dyn FnMut(Event),
) -> Result<(EstimateReport, Result<EstimateReport>)> {
    if matches!(target, Target::Sim { .. } | Target::Trace { .. }) {
        bad_input!("both directions need a real far end (HOST or twamp:HOST), not {target}");
    }
    let one = |reverse: bool| {
        let mut o = options.clone();
        o.real.reverse = reverse;
        let tag = if reverse { "reverse" } else { "forward" };
        o.save_trace = options.save_trace.as_ref().map(|p| tagged(p, tag));
        o
    };
    let (forward_options, reverse_options) = (one(false), one(true));
    let reverse_context = "reverse (from the far end)";
    open_channel(target, &reverse_options.real)
        .context(reverse_context)?
        .close()
        .context(reverse_context)?;
    let forward =
        estimate(target, &forward_options, on_event).context("forward (toward the far end)")?;
    let reverse = estimate(target, &reverse_options, on_event).context(reverse_context);
    Ok((forward, reverse))
}

/// `run.csv.gz` -> `run.forward.csv.gz`.
fn tagged(path: &std::path::Path, tag: &str) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let (stem, ext) = match name.find('.') {
        Some(i) => (&name[..i], &name[i..]),
        None => (name.as_str(), ""),
    };
    path.with_file_name(format!("{stem}.{tag}{ext}"))
}

/// Never a number the sender did not measure: on a real path, an answer
/// near the fastest rate the sender could probe at (its host's pacing, the
/// far end's limit or `max_rate_bps`; [`Ceiling`] says what "near" is)
/// becomes "at least" that rate, with no upper limit.
pub fn apply_ceiling(report: &mut EstimateReport, ceiling_bps: f64) {
    let host_limited = report
        .host_limit_bps()
        .is_some_and(|l| l <= ceiling_bps * 1.001);
    let r = &mut report.estimate;
    if !Ceiling::default().reached(r.available_bandwidth_bps, r.bound, ceiling_bps) {
        return;
    }
    r.available_bandwidth_bps = r.available_bandwidth_bps.min(ceiling_bps);
    r.bound = Bound::AtLeast;
    r.low_bps = r.low_bps.min(r.available_bandwidth_bps);
    r.high_bps = f64::INFINITY;
    report.capped = Some(if host_limited {
        Capped::HostLimited
    } else {
        Capped::FarEndOrMaxRate
    });
}

/// An exact answer from streams the sending host could not pace (it fell
/// behind its schedule in half of them or more, with no queue of its own
/// to explain it: the `sender-late` finding) measured the host as much
/// as the path: late packets leave in catch-up bursts that the path
/// disperses, so such streams read low, and a range around them may
/// leave out the truth. The answer becomes what the streams still show:
/// a lower bound, the host named as what limited it. An answer the
/// shaper trains gave (`shaped`: the tail of two back-to-back trains that
/// agreed) does not rest on the paced streams and stands.
pub fn apply_host_pace(report: &mut EstimateReport) {
    let late = report
        .host
        .as_ref()
        .is_some_and(|h| h.warnings.iter().any(|w| w.code == WarningCode::SenderLate));
    let r = &mut report.estimate;
    if !late || r.bound != Bound::Exact || r.stop == Stop::Shaped {
        return;
    }
    r.bound = Bound::AtLeast;
    r.low_bps = r.low_bps.min(r.available_bandwidth_bps);
    r.high_bps = f64::INFINITY;
    report.capped.get_or_insert(Capped::HostLimited);
    report.warnings.push(Warning::new(
        WarningCode::HostLowerBound,
        format!(
            "so the answer is a lower bound, at least {:.3} Gbit/s, not an exact figure: the streams read this host's pace as much as the path's; measure again when the host is idle, or from one that `tightlink doctor` finds able to pace",
            r.available_bandwidth_bps / 1e9
        ),
    ));
}

/// First scheduled send to last receive stamp over all streams.
fn probe_window(streams: &[ProbeStream]) -> Option<[i64; 2]> {
    window_of(streams.iter())
}

/// First scheduled send to last receive stamp of `streams`.
fn window_of<'a>(streams: impl Iterator<Item = &'a ProbeStream> + Clone) -> Option<[i64; 2]> {
    let first = streams
        .clone()
        .filter_map(|s| s.packets.first().map(|p| p.send_ns))
        .min()?;
    let last = streams
        .flat_map(|s| s.packets.iter().filter_map(|p| p.recv_ns))
        .max()?;
    (last > first).then_some([first, last])
}

/// [`probe_window`] over the streams not among `checks` (indices in the
/// order sent); over all of them where every stream was a check.
fn answer_window(streams: &[ProbeStream], checks: &[usize]) -> Option<[i64; 2]> {
    let answering = streams
        .iter()
        .enumerate()
        .filter(|(i, _)| !checks.contains(i))
        .map(|(_, s)| s);
    if answering.clone().next().is_none() {
        return probe_window(streams);
    }
    window_of(answering)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate_json::EstimateJson;
    use tightlink_probe::strategy::Stop;

    /// Three streams sent 0-10, 20-30 and 40-50 ns (first send to last
    /// receive): the answer's window leaves out the checks, not the
    /// streams between them; with every stream a check, all count.
    /// A capacity of nothing, less than nothing or not a number is refused
    /// before any probe goes (it used to spend the whole budget).
    #[test]
    fn a_capacity_that_is_no_rate_is_refused() {
        for c in [0.0, -5e9, f64::NAN, f64::INFINITY] {
            let options = EstimateOptions {
                method: Method::QueueFit,
                analysis: AnalysisParams {
                    capacity_bps: Some(c),
                    ..AnalysisParams::default()
                },
                ..EstimateOptions::default()
            };
            let target = Target::parse("sim:").unwrap();
            let e = estimate(&target, &options, &mut |_| {}).unwrap_err();
            let text = format!("{e:#}");
            assert!(text.starts_with("--capacity "), "{text}");
            assert!(text.contains("must be a positive rate"), "{text}");
            assert_eq!(crate::kind_of(&e), crate::ErrorKind::BadInput, "{text}");
        }
    }

    #[test]
    fn the_answer_window_leaves_out_the_checks() {
        let stream = |id: u64, from: i64| {
            ProbeStream::new(
                id,
                (0..3)
                    .map(|k| tightlink_core::ProbePacket {
                        size_bytes: 1500,
                        send_ns: from + 2 * k,
                        recv_ns: Some(from + 4 + 3 * k),
                    })
                    .collect(),
            )
        };
        let streams = [stream(0, 0), stream(1, 20), stream(2, 40)];
        assert_eq!(probe_window(&streams), Some([0, 50]));
        assert_eq!(answer_window(&streams, &[]), Some([0, 50]));
        assert_eq!(answer_window(&streams, &[2]), Some([0, 30]));
        assert_eq!(answer_window(&streams, &[1]), Some([0, 50]));
        assert_eq!(answer_window(&streams, &[0, 1, 2]), Some([0, 50]));
    }

    /// A bucket the line through trains at two rates found (no head at
    /// the faster rate): the warning says what the streams read, the
    /// slower trains' head and the line's rate and cross traffic.
    #[test]
    fn a_bucket_found_by_the_line_says_so() {
        let mut e = report(4.06e9, Bound::Exact, 4e9).estimate;
        e.shaper = Some(tightlink_probe::strategy::ShaperSeen {
            streams_bps: 4.618e9,
            streams_bound: Bound::Exact,
            head_bps: 7.3e9,
            tail_bps: 4.911e9,
            bucket_bytes: 38e3,
            train_bytes: 1_386_000,
            head_seen: false,
            shared_bucket: Some((5.878e9, 1.817e9)),
            tail_spread: 0.004,
        });
        let w = shaper_warning(&e).unwrap();
        for part in [
            format!(
                "arrived at {} where the probe streams read {}",
                format_rate(4.911e9),
                format_rate(4.618e9)
            ),
            "about 38 KB ahead".to_string(),
            format!("on the line through the tails, at {}", format_rate(5.878e9)),
            format!("shares it at {}", format_rate(1.817e9)),
        ] {
            assert!(w.contains(&part), "{part}: {w}");
        }
    }

    /// Bursty cross traffic through a bucket: two trains' tails 12 %
    /// apart, at most their mean; the warning names the spread, the mean
    /// and the range's low end.
    #[test]
    fn a_bucket_with_moving_cross_traffic_says_at_most() {
        let mut e = report(5.18e9, Bound::AtMost, 10e9).estimate;
        e.low_bps = 0.7e9;
        e.shaper = Some(tightlink_probe::strategy::ShaperSeen {
            streams_bps: 8.17e9,
            streams_bound: Bound::Exact,
            head_bps: 10e9,
            tail_bps: 5.18e9,
            bucket_bytes: 209e3,
            train_bytes: 1_386_000,
            head_seen: true,
            shared_bucket: None,
            tail_spread: 0.123,
        });
        let w = shaper_warning(&e).unwrap();
        for part in [
            format!("arrived at {} on average", format_rate(5.18e9)),
            "their tails 12 % apart".to_string(),
            format!("where the probe streams read {}", format_rate(8.17e9)),
            format!("at least {} if", format_rate(0.7e9)),
        ] {
            assert!(w.contains(&part), "{part}: {w}");
        }
        // Tails at half the trains' rate or less leave no floor.
        e.low_bps = 0.0;
        let w = shaper_warning(&e).unwrap();
        assert!(w.contains("the trains put no floor under it"), "{w}");
        assert!(!w.contains("at least"), "{w}");
    }

    /// "At least 8 Gbit/s" after a 6 MB train passed whole at it: a
    /// bucket of 6 MB x (1 - 0.9) = 600 KB at 7.2 Gbit/s would have passed
    /// it too; no such train, nothing said.
    #[test]
    fn a_train_whole_at_the_top_rate_says_what_bucket_it_cannot_rule_out() {
        let mut e = report(8e9, Bound::AtLeast, 10e9).estimate;
        assert_eq!(whole_at_top_warning(&e), None);
        e.whole_at_top_bytes = Some(6_000_000);
        let w = whole_at_top_warning(&e).unwrap();
        assert!(
            w.starts_with(&format!(
                "a back-to-back train of 6000 KB passed whole at {}",
                format_rate(8e9)
            )) && w.contains(&format!("e.g. 600 KB at {}", format_rate(7.2e9))),
            "{w}"
        );
    }

    /// Two trains at 10 Gbit/s whose tails read 5.42 and 6.50 under an
    /// exact 7.55: the warning names both and the slower one as where the
    /// range now starts; without them, nothing said.
    #[test]
    fn slow_trains_say_what_they_read() {
        let mut r = report(7.55e9, Bound::Exact, 10e9);
        assert_eq!(slow_trains_warning(&r.estimate), None);
        assert!(serde_json::to_value(&r).unwrap()["slow_trains"].is_null());
        r.estimate.slow_trains = Some(tightlink_probe::strategy::SlowTrains {
            rate_bps: 10e9,
            tails_bps: [6.5e9, 5.42e9],
        });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["slow_trains"]["rate_bps"], 10e9);
        assert_eq!(v["slow_trains"]["tails_bps"][1], 5.42e9);
        let e = &r.estimate;
        let w = slow_trains_warning(e).unwrap();
        let sent = format!("sent at {}", format_rate(10e9));
        let read = format!("at {} and {}", format_rate(6.5e9), format_rate(5.42e9));
        let reach = format!("the range reaches down to {}", format_rate(5.42e9));
        for part in [sent, read, reach] {
            assert!(w.contains(&part), "{part}: {w}");
        }
    }

    #[test]
    fn a_small_head_says_how_far_the_range_reaches() {
        let mut r = report(221e6, Bound::Exact, 1.67e9);
        assert_eq!(small_head_warning(&r.estimate), None);
        r.estimate.small_head = Some(tightlink_probe::strategy::SmallHead {
            rate_bps: 442e6,
            head_packets: 8.0,
            tail_bps: 200e6,
        });
        let w = small_head_warning(&r.estimate).unwrap();
        let reach = format!("the range reaches down to {}", format_rate(200e6));
        for part in [
            format!("sent at {}", format_rate(442e6)),
            "8 packets".to_string(),
            reach,
        ] {
            assert!(w.contains(&part), "{part}: {w}");
        }
    }

    #[test]
    fn a_standing_queue_says_why_there_is_no_answer() {
        let mut r = report(107e6, Bound::None, 200e6);
        assert_eq!(standing_queue_warning(&r.estimate), None);
        r.estimate.standing_queue = Some(tightlink_core::decision::standing::StandingQueue {
            stood: 42,
            streams: 43,
            median_depth_ns: 2_560_000.0,
        });
        let w = standing_queue_warning(&r.estimate).unwrap();
        for part in ["42 of 43 streams", "2.56 ms", "no answer"] {
            assert!(w.contains(part), "{part}: {w}");
        }
        // An exact answer over it (multi-rate streams) stays, and says why
        // it may be off.
        r.estimate.bound = Bound::Exact;
        let w = standing_queue_warning(&r.estimate).unwrap();
        for part in ["lowest rates of 42 of 43 streams", "well off either way"] {
            assert!(w.contains(part), "{part}: {w}");
        }
    }

    /// A search that stopped `swings`: streams met congestion down to 0
    /// and room up to 5.8 Gbit/s or more, and their decisions put the
    /// mean of what they met between 2.4 and 8.9 (the range): the warning
    /// gives both, the JSON the swing.
    #[test]
    fn a_search_that_swung_says_how_far_and_where_the_mean_lies() {
        let mut r = report(3.8e9, Bound::Exact, 10e9);
        r.estimate.method = Method::ScanPba;
        r.estimate.stop = Stop::Swings;
        (r.estimate.low_bps, r.estimate.high_bps) = (2.4e9, 8.9e9);
        r.estimate.swung_bps = Some((0.0, 5.8e9));
        let w = swing_warning(&r.estimate, &[]);
        let swung = format!(
            "met congestion (one lost whole) and room at {} or more",
            format_rate(5.8e9)
        );
        let mean = format!(
            "put that mean between {} and {}",
            format_rate(2.4e9),
            format_rate(8.9e9)
        );
        for part in [swung, mean] {
            assert!(w.contains(&part), "{part}: {w}");
        }
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["swung_bps"][1], 5.8e9);
        r.estimate.swung_bps = Some((3.1e9, 5.8e9));
        let w = swing_warning(&r.estimate, &[]);
        let at = format!("met congestion at {} and room", format_rate(3.1e9));
        assert!(w.contains(&at), "{w}");
    }

    /// A multirate run stopped on its budget after 20 streams and 12.5 MB
    /// says so, with its range's ends; the same run stopped as stable, and
    /// PTR (which always ends on its budget), say nothing.
    #[test]
    fn an_unsettled_budget_stop_is_said() {
        let mut e = report(5.5e9, Bound::Exact, f64::INFINITY).estimate;
        e.stop = Stop::Budget;
        e.cost = Cost {
            streams: 20,
            probe_bytes: 12_500_000,
            ..Cost::default()
        };
        let w = unsettled_budget_stop(&e).unwrap();
        assert!(
            w.starts_with("the probe budget ran out after 20 streams (12.5 MB) before multirate settled: the estimate is its reading so far"),
            "{w}"
        );
        assert!(
            w.contains(&format_rate(4.95e9)) && w.contains(&format_rate(6.05e9)),
            "{w}"
        );
        e.method = Method::ScanPba;
        let w = unsettled_budget_stop(&e).unwrap();
        assert!(
            w.contains("posterior's median so far") && w.contains(&format_rate(4.95e9)),
            "{w}"
        );
        assert!(!w.contains("only what those streams spanned"), "{w}");
        e.method = Method::Multirate;
        e.bound = Bound::AtLeast;
        assert!(unsettled_budget_stop(&e)
            .unwrap()
            .contains("the last stream's"));
        e.stop = Stop::Stable;
        assert_eq!(unsettled_budget_stop(&e), None);
        e.stop = Stop::Budget;
        e.method = Method::Ptr;
        assert_eq!(unsettled_budget_stop(&e), None);
    }

    fn report(estimate: f64, bound: Bound, host_limit_bps: f64) -> EstimateReport {
        EstimateReport {
            target: "h".into(),
            estimate: Report {
                method: Method::Multirate,
                available_bandwidth_bps: estimate,
                bound,
                low_bps: estimate * 0.9,
                high_bps: estimate * 1.1,
                cost: Cost::default(),
                truth_bps: None,
                stop: Stop::Stable,
                shaper: None,
                check_streams: Vec::new(),
                whole_at_top_bytes: None,
                slow_trains: None,
                swung_bps: None,
                busy: None,
                standing_queue: None,
                small_head: None,
            },
            rate_layer: "x",
            host: Some(HostFindings {
                host_limit_bps,
                ..HostFindings::default()
            }),
            probe_ceiling_bps: Some(1e9),
            capped: None,
            probe_window_unix_ns: None,
            answer_window_unix_ns: None,
            warnings: Vec::new(),
        }
    }

    /// Four streams: 10, 20, 40 and 80 Mbit/s (100 packets of 1250 B
    /// sent 1, 0.5, 0.25, 0.125 ms apart). The slowest quarter is the 10
    /// Mbit/s stream: 2 of its 100 lost is 2 %, a warning; 1 is not.
    #[test]
    fn loss_at_the_lowest_rates_by_hand() {
        let stream = |gap: i64, lost: usize| {
            let send: Vec<i64> = (0..100).map(|i| i * gap).collect();
            let recv: Vec<Option<i64>> = (0..100)
                .map(|i| (i >= lost).then_some(i as i64 * gap + 5))
                .collect();
            ProbeStream::from_times(0, 1250, &send, &recv)
        };
        let run = |lost_slow: usize| {
            vec![
                stream(1_000_000, lost_slow),
                stream(500_000, 0),
                stream(250_000, 0),
                stream(125_000, 30),
            ]
        };
        let w = loss_at_the_lowest_rates(&run(2)).unwrap();
        assert!(
            w.contains("(2 of 100, 2.0 %, in streams up to 10.1 Mbit/s)"),
            "{w}"
        );
        assert_eq!(loss_at_the_lowest_rates(&run(1)), None);
        assert_eq!(loss_at_the_lowest_rates(&[]), None);
    }

    /// Multi-rate streams over a 10 Gbit/s hop with 5 Gbit/s of fluid
    /// cross traffic (3.5-6.5 Gbit/s, 64 packets a rate); a "burst" one
    /// meets 10 Mbit at 20 Gbit/s 1.5 ms in (a 0.45 ms rise beyond the
    /// probes' own, as in `analyze`'s test). Two of three met
    /// one: said; one of three, or two where one's sender fell behind:
    /// not.
    /// The same streams, but the 10 Mbit comes at once (a 1 ms hole):
    /// a pause, said by its own warning and not as a burst.
    #[test]
    fn pause_warning_by_hand() {
        use tightlink_core::schedule::{multi_rate_schedule, rates_around};
        use tightlink_core::synth::SynthPath;
        let send = multi_rate_schedule(&rates_around(5e9, 0.3, 5), 64, 9000);
        let calm = SynthPath::ten_gig(5e9);
        let mut pause = calm.clone();
        pause.bursts = vec![(1.5e6, 10e6)];
        let (h, c) = (pause.stream(1, &send, 9000), calm.stream(2, &send, 9000));
        let p = AnalysisParams::default();
        let three = [h.clone(), c.clone(), h.clone()];
        let w = pause_warning(&p, &three, &[]).unwrap();
        assert!(
            w.starts_with("2 of 3 multi-rate streams were held at once (the queue rose up to 0.9"),
            "{w}"
        );
        assert_eq!(burst_warning(&p, &three, &[]), None);
        assert_eq!(pause_warning(&p, &[h.clone(), c.clone(), c], &[]), None);
        assert_eq!(pause_warning(&p, &three, &[true, false, false]), None);
    }

    /// Single-rate streams at 3 Gbit/s over a 10 Gbit/s hop with 5
    /// Gbit/s of fluid cross traffic; a stepped one meets 10 Mbit at
    /// once 0.5 ms in. Two of nine is a fifth: said (a quarter would not
    /// be); two of eleven, or one, is not.
    #[test]
    fn single_step_warning_by_hand() {
        use tightlink_core::schedule::single_rate_schedule;
        use tightlink_core::synth::SynthPath;
        let send = single_rate_schedule(3e9, 100, 9000, 0);
        let calm = SynthPath::ten_gig(5e9);
        let mut pause = calm.clone();
        pause.bursts = vec![(0.5e6, 10e6)];
        let (h, c) = (pause.stream(1, &send, 9000), calm.stream(2, &send, 9000));
        let p = AnalysisParams::default();
        let run = |stepped: usize, calm: usize| {
            let mut v = vec![h.clone(); stepped];
            v.extend(std::iter::repeat_n(c.clone(), calm));
            held_streams(&p, &v, &[], None).single_step_warning()
        };
        let w = run(2, 7).unwrap();
        assert!(
            w.starts_with("2 of 9 single-rate streams met the queue rising in steps"),
            "{w}"
        );
        assert_eq!(run(2, 9), None);
        assert_eq!(run(1, 0), None);
        assert_eq!(run(0, 9), None);
        let late = [true, false, false, false, false];
        assert_eq!(
            held_streams(
                &p,
                &[h.clone(), h.clone(), c.clone(), c.clone(), c.clone()],
                &late,
                None
            )
            .single_step_warning(),
            None,
            "a stream whose sender fell behind does not count"
        );
        // Under the answer a sixth is the bar: two of eleven streams at 3
        // Gbit/s under an answer of 5 are said, not under one of 3.05.
        let mut v = vec![h.clone(); 2];
        v.extend(std::iter::repeat_n(c.clone(), 9));
        let w = held_streams(&p, &v, &[], Some(5e9))
            .single_step_warning()
            .unwrap();
        assert!(
            w.starts_with("2 of the 11 single-rate streams sent under the answer met the queue rising in steps"),
            "{w}"
        );
        assert_eq!(
            held_streams(&p, &v, &[], Some(3.05e9)).single_step_warning(),
            None
        );
        v.extend([c.clone(), c.clone()]);
        assert_eq!(
            held_streams(&p, &v, &[], Some(5e9)).single_step_warning(),
            None,
            "2 of 13"
        );
    }

    #[test]
    fn burst_warning_by_hand() {
        use tightlink_core::schedule::{multi_rate_schedule, rates_around};
        use tightlink_core::synth::SynthPath;
        let send = multi_rate_schedule(&rates_around(5e9, 0.3, 5), 64, 9000);
        let calm = SynthPath::ten_gig(5e9);
        let mut burst = calm.clone();
        burst.rate_steps = vec![(1.5e6, 20e9), (2.0e6, 0.0)];
        let (b, c) = (burst.stream(1, &send, 9000), calm.stream(2, &send, 9000));
        let p = AnalysisParams::default();
        let w = burst_warning(&p, &[b.clone(), c.clone(), b.clone()], &[]).unwrap();
        assert!(
            w.starts_with("2 of 3 multi-rate streams met bursts of cross traffic faster than the link (the queue rose up to 0.45"),
            "{w}"
        );
        assert_eq!(
            burst_warning(&p, &[b.clone(), c.clone(), c.clone()], &[]),
            None
        );
        assert_eq!(
            burst_warning(
                &p,
                &[b.clone(), c.clone(), b.clone()],
                &[false, false, true]
            ),
            None
        );
        assert_eq!(burst_warning(&p, &[], &[]), None);
        // Two of nine: under a quarter.
        let mut nine = vec![b.clone(), b.clone()];
        nine.extend(std::iter::repeat_n(c.clone(), 7));
        assert_eq!(burst_warning(&p, &nine, &[]), None);
        nine[2] = b.clone();
        assert!(burst_warning(&p, &nine, &[]).is_some(), "3 of 9");
    }

    /// 100 packets 10 us apart; a coalescing receiver stamps them at the
    /// next multiple of 125 us (batches of 12 or 13), another one by one.
    #[test]
    fn coalesced_trend_streams_by_hand() {
        let stream = |batched: bool| {
            let send: Vec<i64> = (0..100).map(|i| i * 10_000).collect();
            let recv: Vec<Option<i64>> = send
                .iter()
                .map(|&t| {
                    Some(if batched {
                        (t / 125_000 + 1) * 125_000
                    } else {
                        t + 5
                    })
                })
                .collect();
            ProbeStream::from_times(0, 1250, &send, &recv)
        };
        let p = AnalysisParams::default();
        let two_of_three = [stream(true), stream(false), stream(true)];
        let w = coalesced_trend_streams(Method::Pathload, &p, &two_of_three).unwrap();
        assert!(
            w.contains("2 of 3 streams in batches about 125 us apart"),
            "{w}"
        );
        // 100 packets in 8 batches (the first at 125 us holds 13, packet
        // 0 to 12; the last, at 1 ms, packets 88-99): 12.5 a batch,
        // printed to even.
        let w = coalesced_trend_streams(Method::ImrAvg, &p, &two_of_three).unwrap();
        assert!(w.contains("12 packets each (median)"), "{w}");
        assert!(w.contains("a 10-packet window average"), "{w}");
        let w = coalesced_trend_streams(Method::ImrWavelet, &p, &two_of_three).unwrap();
        assert!(w.contains("a wavelet approximation"), "{w}");
        // One of two is not most; other methods read batches their own way.
        let one_of_two = [stream(true), stream(false)];
        assert_eq!(
            coalesced_trend_streams(Method::Pathload, &p, &one_of_two),
            None
        );
        assert_eq!(
            coalesced_trend_streams(Method::ImrAvg, &p, &one_of_two),
            None
        );
        assert_eq!(
            coalesced_trend_streams(Method::Multirate, &p, &two_of_three),
            None
        );
        assert_eq!(coalesced_trend_streams(Method::Pathload, &p, &[]), None);
    }

    /// Two chirps of 8-packet elements (1-7 Gbit/s on a 10 Gbit/s line)
    /// and one plain chirp: most were jumbo, 8 packets an element. One
    /// jumbo of two is not most; other methods are not pathChirp.
    #[test]
    fn jumbo_chirps_by_hand() {
        use tightlink_core::schedule::jumbo_chirp_schedule;
        let chirp = |jumbo: usize| {
            let send = jumbo_chirp_schedule(1e9, 7e9, 1.2, 9000, jumbo, 10e9);
            assert!(!send.is_empty());
            let recv: Vec<Option<i64>> = send.iter().map(|t| Some(t + 5000)).collect();
            ProbeStream::from_times(0, 9000, &send, &recv)
        };
        let two_of_three = [chirp(8), chirp(1), chirp(8)];
        let w = jumbo_chirps(Method::Pathchirp, &two_of_three).unwrap();
        assert!(
            w.starts_with("2 of 3 chirps were sent as elements of about 8 packets"),
            "{w}"
        );
        assert_eq!(jumbo_chirps(Method::Pathchirp, &[chirp(8), chirp(1)]), None);
        assert_eq!(jumbo_chirps(Method::Multirate, &two_of_three), None);
    }

    #[test]
    fn both_directions_tag_their_traces() {
        assert_eq!(
            tagged(std::path::Path::new("/t/run.csv.gz"), "reverse"),
            PathBuf::from("/t/run.reverse.csv.gz")
        );
        assert_eq!(
            tagged(std::path::Path::new("run"), "forward"),
            PathBuf::from("run.forward")
        );
        let sim = Target::parse("sim:").unwrap();
        let err = estimate_both(&sim, &EstimateOptions::default(), &mut |_| {}).unwrap_err();
        assert!(err.to_string().contains("need a real far end"), "{err}");
    }

    #[test]
    fn the_ceiling_policy_by_hand() {
        // 940 Mbit/s exact under a 1 Gbit/s ceiling: below 95 %, kept.
        let mut r = report(940e6, Bound::Exact, 1e9);
        apply_ceiling(&mut r, 1e9);
        assert_eq!((r.estimate.bound, r.capped), (Bound::Exact, None));
        // 960 exact: within 5 %, "at least" 960 with no upper limit; the
        // host paces up to exactly the ceiling, so it is host-limited.
        let mut r = report(960e6, Bound::Exact, 1e9);
        apply_ceiling(&mut r, 1e9);
        assert_eq!(r.estimate.bound, Bound::AtLeast);
        assert_eq!(r.estimate.available_bandwidth_bps, 960e6);
        assert!(r.estimate.high_bps.is_infinite());
        assert_eq!(r.capped, Some(Capped::HostLimited));
        // 1.2 G "at least" over a 1 G ceiling set by the far end (host
        // could do 2 G): capped at the ceiling, not host-limited.
        let mut r = report(1.2e9, Bound::AtLeast, 2e9);
        apply_ceiling(&mut r, 1e9);
        assert_eq!(r.estimate.available_bandwidth_bps, 1e9);
        assert_eq!(r.estimate.low_bps, 1e9);
        assert_eq!(r.capped, Some(Capped::FarEndOrMaxRate));
        // 860 M "at least": within 15 %, capped; 840 M is not.
        let mut r = report(860e6, Bound::AtLeast, 1e9);
        apply_ceiling(&mut r, 1e9);
        assert!(r.capped.is_some());
        let mut r = report(840e6, Bound::AtLeast, 1e9);
        apply_ceiling(&mut r, 1e9);
        assert!(r.capped.is_none());
    }

    /// 113 Mbit/s exact from streams the sender could not pace (the
    /// `sender-late` finding): at least 113, no upper limit, host-limited,
    /// and said so. Without the finding, or already a bound, it stands;
    /// other host warnings do not make it a bound.
    #[test]
    fn a_host_that_could_not_pace_gives_a_lower_bound() {
        let late = |code: WarningCode| {
            let mut r = report(113e6, Bound::Exact, 2e9);
            r.host.as_mut().unwrap().warnings = vec![Warning::new(code, "x")];
            r
        };
        let mut r = late(WarningCode::SenderLate);
        apply_host_pace(&mut r);
        assert_eq!(r.estimate.bound, Bound::AtLeast);
        assert_eq!(r.estimate.available_bandwidth_bps, 113e6);
        assert_eq!(r.estimate.low_bps, 113e6 * 0.9);
        assert!(r.estimate.high_bps.is_infinite());
        assert_eq!(r.capped, Some(Capped::HostLimited));
        assert_eq!(r.warnings.len(), 1);
        assert_eq!(r.warnings[0].code, WarningCode::HostLowerBound);
        assert!(
            r.warnings[0].text.contains("at least 0.113 Gbit/s"),
            "{}",
            r.warnings[0].text
        );
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["bound"], "at_least");
        assert_eq!(json["host_limited"], true);
        // Not late: stands.
        let mut r = late(WarningCode::CpuStolen);
        apply_host_pace(&mut r);
        assert_eq!((r.estimate.bound, r.capped), (Bound::Exact, None));
        assert!(r.warnings.is_empty());
        // Late, but the answer is a bound already: stands.
        let mut r = late(WarningCode::SenderLate);
        r.estimate.bound = Bound::AtMost;
        apply_host_pace(&mut r);
        assert_eq!(r.estimate.bound, Bound::AtMost);
        assert!(r.warnings.is_empty());
        // The shaper trains' answer does not rest on the paced streams.
        let mut r = late(WarningCode::SenderLate);
        r.estimate.stop = Stop::Shaped;
        apply_host_pace(&mut r);
        assert_eq!(r.estimate.bound, Bound::Exact);
        // Capped at the far end's ceiling first: that reason stays.
        let mut r = late(WarningCode::SenderLate);
        r.capped = Some(Capped::FarEndOrMaxRate);
        apply_host_pace(&mut r);
        assert_eq!(r.capped, Some(Capped::FarEndOrMaxRate));
    }

    /// On the simulator: one Stream event per stream the report counts,
    /// each with its truth; progress rises within 0..1.
    #[test]
    fn events_follow_the_measurement() {
        let mut streams = 0;
        let mut truths = 0;
        let mut progress = Vec::new();
        let r = estimate(
            &Target::default_sim(),
            &EstimateOptions::default(),
            &mut |e| match e {
                Event::Progress(f) => progress.push(f),
                Event::Stream { stream, truth } => {
                    streams += 1;
                    truths += usize::from(truth.is_some());
                    assert!(stream.len() >= 2);
                }
                Event::Update(u) => panic!("an update without --follow: {u:?}"),
            },
        )
        .unwrap();
        assert_eq!(streams, r.estimate.cost.streams);
        assert_eq!(truths, streams);
        assert_eq!(progress.len(), streams);
        assert!(progress.windows(2).all(|w| w[0] <= w[1]), "{progress:?}");
        assert!(progress.iter().all(|f| (0.0..=1.0).contains(f)));
    }

    /// Following: one update per stream for as many streams as asked,
    /// each with its stream's truth, path time rising; the report's truth
    /// is the last stream's. Only `bart` follows.
    #[test]
    fn following_updates_once_per_stream() {
        let target = Target::parse("sim:cross=cbr:3G:step=100ms/5G,coalescence=off").unwrap();
        let options = EstimateOptions {
            method: Method::Bart,
            max_streams: 20,
            follow: true,
            ..EstimateOptions::default()
        };
        let mut updates = Vec::new();
        let r = estimate(&target, &options, &mut |e| {
            if let Event::Update(u) = e {
                updates.push(u);
            }
        })
        .unwrap();
        assert_eq!(r.estimate.cost.streams, 20, "follows to the last stream");
        assert_eq!(updates.len(), 20);
        assert!(updates
            .windows(2)
            .all(|w| w[0].elapsed_ns < w[1].elapsed_ns));
        assert!(updates.iter().all(|u| u.truth_bps.is_some()));
        assert_eq!(r.estimate.truth_bps, updates[19].truth_bps);
        // After the step (from about the 8th stream: 10 ms idle each) the
        // path has 5 Gbit/s; the last answer follows it.
        let last = updates[19];
        assert!((last.abw_bps / 5e9 - 1.0).abs() < 0.1, "{last:?}");
        let e = estimate(
            &target,
            &EstimateOptions {
                method: Method::Multirate,
                ..options
            },
            &mut |_| {},
        )
        .unwrap_err();
        assert!(e.to_string().contains("--method bart"), "{e}");
    }

    #[test]
    fn json_has_no_infinity() {
        let mut r = report(960e6, Bound::Exact, 1e9);
        apply_ceiling(&mut r, 1e9);
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["high_bps"], 960e6);
        assert_eq!(v["bound"], "at_least");
        assert_eq!(v["host_limited"], true);
        assert_eq!(v["host_limit_bps"], 1e9);
        assert_eq!(v["sender_late_streams"], 0);
        // The sender's late streams as the channel counted them; none
        // known without a real sender (the simulator).
        r.host.as_mut().unwrap().late_streams = 7;
        assert_eq!(serde_json::to_value(&r).unwrap()["sender_late_streams"], 7);
        r.host = None;
        assert!(serde_json::to_value(&r).unwrap()["sender_late_streams"].is_null());
    }

    /// The JSON reads back as the typed report, field for field, and
    /// writes again to the same text; a report from an older version
    /// (fields missing) reads with their defaults, a wrong type is an
    /// error that says where.
    #[test]
    fn the_json_reads_back_as_the_typed_report() {
        let mut r = report(140e6, Bound::Exact, 1e9);
        r.estimate.busy = Some(tightlink_probe::strategy::BusyWatch {
            idle_bps: 200e6,
            busy: 45,
            probes: 150,
            span_ns: 301_000_000,
        });
        r.host.as_mut().unwrap().late_streams = 3;
        let text = serde_json::to_string(&r).unwrap();
        let j: EstimateJson = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&j).unwrap(), text);
        assert_eq!(j.available_bandwidth_bps, 140e6);
        assert_eq!(j.bound, "exact");
        assert_eq!(j.sender_late_streams, Some(3));
        assert_eq!(j.busy.as_ref().map(|b| b.probes), Some(150));
        let old: EstimateJson =
            serde_json::from_str(r#"{"available_bandwidth_bps": 5e9, "bound": "at_least"}"#)
                .unwrap();
        assert_eq!(
            (old.available_bandwidth_bps, old.bound.as_str()),
            (5e9, "at_least")
        );
        assert!(old.warning_codes.is_empty() && old.shaper.is_none());
        let e = serde_json::from_str::<EstimateJson>(r#"{"probe_bytes": "many"}"#).unwrap_err();
        assert!(
            e.to_string().contains("expected u64 at line 1 column"),
            "{e}"
        );
    }

    /// The idle check in the JSON and in the swing warning.
    #[test]
    fn a_busy_idle_check_is_reported() {
        let mut r = report(140e6, Bound::Exact, 1e9);
        assert!(serde_json::to_value(&r).unwrap()["busy"].is_null());
        r.estimate.stop = Stop::Swings;
        r.estimate.low_bps = 120e6;
        r.estimate.high_bps = 160e6;
        r.estimate.busy = Some(tightlink_probe::strategy::BusyWatch {
            idle_bps: 200e6,
            busy: 45,
            probes: 150,
            span_ns: 301_000_000,
        });
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["busy"]["idle_bps"], 200e6);
        assert_eq!(v["busy"]["busy"], 45);
        assert_eq!(v["busy"]["probes"], 150);
        assert_eq!(v["busy"]["span_ns"], 301_000_000);
        let w = swing_warning(&r.estimate, &[]);
        assert!(
            w.starts_with("45 of 150 lone probes over 301 ms found the tight link busy"),
            "{w}"
        );
        assert!(w.contains("idle at 200.0 Mbit/s"), "{w}");
    }
}
