//! `tightlink lab track`: `tightlink estimate --follow` (BART-style
//! tracking, \[CLOUD\] reference 2) on a lab path whose cross traffic may
//! step, each update set against the kernel-counter truth over time: over
//! the stream the update came from, and over a 500 ms window around it
//! (the slower truth a user watching the path sees).

use std::process::Command;
use std::time::Duration;

use crate::run::{
    fresh_line_counts, in_ns, line_counts_since, run_child, samples_until, start_services, Guard,
    LineCounts,
};
use crate::sampler::Sampler;
use crate::topology::{Lab, LabError, RCV_IP};
use crate::truth;
use tightlink_core::stats::median;

/// The window of the slower truth series.
pub const TRUTH_WINDOW_NS: i64 = 500_000_000;
/// Within this relative error an update "follows" the truth.
pub const FOLLOW_TOLERANCE: f64 = 0.10;

#[derive(Debug, Clone)]
pub struct TrackOptions {
    /// The tightlink binary to run in the namespaces.
    pub exe: std::path::PathBuf,
    pub streams: usize,
    /// A stream every this long (`estimate --interval`).
    pub interval: Duration,
    pub sample_period: Duration,
    /// Where the tracker saves its probe streams (`estimate --save-trace`).
    pub save_trace: Option<std::path::PathBuf>,
}

/// One update of the tracker with its truths (bit/s; time in seconds from
/// the first stream's start).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TrackPoint {
    pub t_s: f64,
    pub estimate_bps: f64,
    pub sd_bps: f64,
    pub bound: String,
    /// Over the stream's own window (first send to last receive).
    pub stream_truth_bps: Option<f64>,
    /// Over [`TRUTH_WINDOW_NS`] centred on the stream.
    pub truth_bps: Option<f64>,
    /// The cross traffic offered at its entry router over the stream's
    /// window, and the frames the hops dropped then: what separates the
    /// stream truth from the slower one (a stream that overflows a queue
    /// drops cross traffic; a cross sender that shares the host's CPUs
    /// with the probes falls behind during a stream and catches up after).
    pub stream_offered_cross_bps: Option<f64>,
    pub stream_hop_drops: Option<u64>,
}

/// How well the tracker followed, against the 500 ms truth.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct TrackSummary {
    /// Median |error| of the updates before the step (all of them when
    /// there is no step).
    pub median_before: Option<f64>,
    /// From the fifth update after the step on.
    pub median_after: Option<f64>,
    /// Updates after the step until three in a row are within
    /// [`FOLLOW_TOLERANCE`] (counting the first of the three).
    pub updates_to_follow: Option<usize>,
    /// Share of all updates within [`FOLLOW_TOLERANCE`].
    pub within_tolerance: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TrackReport {
    pub scenario: String,
    pub points: Vec<TrackPoint>,
    /// When the cross traffic stepped, on the same axis as the points.
    pub step_at_s: Option<f64>,
    /// The 500 ms truth every 100 ms over the run, for plotting.
    pub truth_series: Vec<(f64, f64)>,
    /// Against the 500 ms truth.
    pub summary: TrackSummary,
    /// Against the truth over each update's own stream: what the probes
    /// met. The two part where the cross traffic does not keep its rate
    /// while the streams run (a sender that shares the host's CPUs with
    /// the probes falls behind, or a stream that fills the queue holds it
    /// back).
    pub stream_summary: TrackSummary,
    pub probe_bytes: Option<u64>,
    pub wall_s: Option<f64>,
    /// What the lab's delay lines did over the follow (none where the lab
    /// has none): frames they dropped are this host's losses, not the
    /// path's.
    pub delay_line: Option<LineCounts>,
}

/// The summary of a series of (time s, estimate, truth) against a step at
/// `step_at_s` (none: everything is "before").
pub fn summarise(points: &[(f64, f64, f64)], step_at_s: Option<f64>) -> TrackSummary {
    let err = |p: &(f64, f64, f64)| ((p.1 - p.2) / p.2).abs();
    let first_after = step_at_s.map_or(points.len(), |s| {
        points.iter().position(|p| p.0 >= s).unwrap_or(points.len())
    });
    let updates_to_follow = step_at_s.and_then(|_| {
        (first_after..points.len().saturating_sub(2))
            .find(|&i| points[i..i + 3].iter().all(|p| err(p) <= FOLLOW_TOLERANCE))
            .map(|i| i - first_after + 1)
    });
    let within = points.iter().filter(|p| err(p) <= FOLLOW_TOLERANCE).count();
    TrackSummary {
        median_before: median(&points[..first_after].iter().map(err).collect::<Vec<_>>()),
        median_after: step_at_s.and_then(|_| {
            median(
                &points
                    .iter()
                    .skip(first_after + 4)
                    .map(err)
                    .collect::<Vec<_>>(),
            )
        }),
        updates_to_follow,
        within_tolerance: within as f64 / points.len().max(1) as f64,
    }
}

/// One parsed `update` event: (window start ns, window end ns, estimate,
/// sd, bound).
type Update = (i64, i64, f64, f64, String);

/// What `estimate --follow --json-stream` printed: the updates, and the
/// end report's probe bytes and wall time.
type Followed = (Vec<Update>, Option<u64>, Option<f64>);

fn parse_stream(out: &str) -> Result<Followed, String> {
    let mut updates = Vec::new();
    let (mut bytes, mut wall) = (None, None);
    for (n, line) in out.lines().enumerate() {
        let v: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("estimate --json-stream line {}: {e}", n + 1))?;
        let d = &v["data"];
        match v["event"].as_str() {
            Some("update") => {
                let w = |i: usize| d["window_ns"][i].as_i64();
                let (Some(a), Some(b), Some(e), Some(sd)) = (
                    w(0),
                    w(1),
                    d["available_bandwidth_bps"].as_f64(),
                    d["sd_bps"].as_f64(),
                ) else {
                    return Err(format!(
                        "estimate --json-stream line {}: an update without window_ns, available_bandwidth_bps or sd_bps",
                        n + 1
                    ));
                };
                let bound = d["bound"].as_str().unwrap_or("?").to_string();
                updates.push((a, b, e, sd, bound));
            }
            Some("end") => {
                bytes = d["probe_bytes"].as_u64();
                wall = d["wall_s"].as_f64();
            }
            Some("error") => return Err(format!("estimate: {}", d.as_str().unwrap_or("?"))),
            _ => {}
        }
    }
    Ok((updates, bytes, wall))
}

/// Brings the lab up, follows the path for `streams` streams, and sets
/// every update against the counters' truth.
pub fn track(lab: &Lab, opts: &TrackOptions) -> Result<TrackReport, LabError> {
    let err = LabError::Command;
    let interval_ns = opts.interval.as_nanos() as i64;
    let run_s = (opts.streams as f64 * opts.interval.as_secs_f64()).ceil() as u64;
    let _hold = lab.hold("track")?;
    lab.up(&opts.exe)?;
    let mut guard = Guard {
        lab,
        children: Vec::new(),
    };
    // The lab's own server: lift the keyless byte and time limits so a
    // long follow is not cut (nothing else reaches this namespace).
    let limits = ["--max-session-bytes", "4000MB", "--max-duration", "3600"];
    let services = start_services(lab, &opts.exe, &[], &limits, run_s + 40).map_err(err)?;
    guard.children = services.children;
    let sampler =
        Sampler::start(lab, opts.sample_period).map_err(|e| err(format!("counters: {e}")))?;
    std::thread::sleep(Duration::from_millis(500));
    let lines_before = fresh_line_counts(lab);
    let mut cmd: Command = in_ns(lab, "snd", &opts.exe);
    cmd.args(["estimate", RCV_IP, "--follow", "--json-stream"])
        .args(["--max-streams", &opts.streams.to_string()])
        .args(["--interval", &format!("{interval_ns}ns")]);
    if let Some(p) = &opts.save_trace {
        cmd.arg("--save-trace").arg(p);
    }
    let (out, stderr, ok) = run_child(cmd, Duration::from_secs(run_s * 2 + 30))
        .map_err(|e| err(format!("estimate: {e}")))?;
    let delay_line = line_counts_since(lab, lines_before);
    let (updates, probe_bytes, wall_s) = parse_stream(&out).map_err(err)?;
    if !ok && updates.is_empty() {
        return Err(err(format!("estimate --follow failed: {}", stderr.trim())));
    }
    let Some(t0) = updates.first().map(|u| u.0) else {
        return Err(err("estimate --follow gave no update".into()));
    };
    let last = updates.iter().map(|u| u.1).max().unwrap_or(t0);
    samples_until(&sampler, last + TRUTH_WINDOW_NS / 2);
    let samples = sampler
        .finish()
        .map_err(|e| err(format!("counters: {e}")))?;
    drop(guard);
    let rates: Vec<f64> = lab.scenario.hops.iter().map(|h| h.rate_bps).collect();
    let truth_over = |a: i64, b: i64| truth::truth(&samples, &rates, a, b).ok();
    let truth_at = |a: i64, b: i64| truth_over(a, b).map(|t| t.available_bps);
    let secs = |ns: i64| (ns - t0) as f64 / 1e9;
    let points: Vec<TrackPoint> = updates
        .iter()
        .map(|(a, b, e, sd, bound)| {
            let mid = (a + b) / 2;
            let st = truth_over(*a, *b);
            TrackPoint {
                t_s: secs(*a),
                estimate_bps: *e,
                sd_bps: *sd,
                bound: bound.clone(),
                stream_truth_bps: st.as_ref().map(|t| t.available_bps),
                truth_bps: truth_at(mid - TRUTH_WINDOW_NS / 2, mid + TRUTH_WINDOW_NS / 2),
                stream_offered_cross_bps: st.as_ref().map(|t| t.offered_cross_bps),
                stream_hop_drops: st.as_ref().map(|t| t.hop_drops.iter().sum()),
            }
        })
        .collect();
    let mut truth_series = Vec::new();
    let mut t = t0;
    while t <= last {
        if let Some(v) = truth_at(t - TRUTH_WINDOW_NS / 2, t + TRUTH_WINDOW_NS / 2) {
            truth_series.push((secs(t), v));
        }
        t += 100_000_000;
    }
    let step_at_s = step_at_ns(lab, services.cross_started_ns).map(secs);
    let scored_by = |truth: fn(&TrackPoint) -> Option<f64>| {
        let scored: Vec<(f64, f64, f64)> = points
            .iter()
            .filter_map(|p| Some((p.t_s, p.estimate_bps, truth(p)?)))
            .collect();
        summarise(&scored, step_at_s)
    };
    Ok(TrackReport {
        scenario: lab.scenario.name.clone(),
        summary: scored_by(|p| p.truth_bps),
        stream_summary: scored_by(|p| p.stream_truth_bps),
        points,
        step_at_s,
        truth_series,
        probe_bytes,
        wall_s,
        delay_line,
    })
}

/// When the cross traffic's step came (CLOCK_REALTIME ns), where it has
/// one and its start is known.
fn step_at_ns(lab: &Lab, cross_started_ns: Option<i64>) -> Option<i64> {
    let step = lab.scenario.cross.as_ref()?.spec.as_ref()?.step?;
    Some(cross_started_ns? + step.at_ns as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Truth 100 until t = 5 s, then 50. The tracker reads 100, 100, then
    /// after the step 90 (80 % high), 60 (20 %), 52, 49, 51, 50, 50, 50:
    /// three in a row within 10 % start at the third update after the
    /// step; median after (fifth on: 51, 50, 50, 50) is 0 %.
    #[test]
    fn a_step_followed_by_hand() {
        let mut pts = vec![(1.0, 100.0, 100.0), (3.0, 104.0, 100.0)];
        for (i, e) in [90.0, 60.0, 52.0, 49.0, 51.0, 50.0, 50.0, 50.0]
            .into_iter()
            .enumerate()
        {
            pts.push((5.0 + i as f64, e, 50.0));
        }
        let s = summarise(&pts, Some(5.0));
        assert_eq!(s.updates_to_follow, Some(3));
        assert!((s.median_before.unwrap() - 0.02).abs() < 1e-12, "{s:?}");
        assert!(s.median_after.unwrap().abs() < 1e-12, "{s:?}");
        // 8 of 10 within 10 %: all but 90 and 60.
        assert!((s.within_tolerance - 0.8).abs() < 1e-12);
    }

    /// No step: every update is "before"; a tracker that never settles
    /// never follows.
    #[test]
    fn without_a_step_everything_is_before() {
        let pts = [(0.0, 120.0, 100.0), (1.0, 80.0, 100.0), (2.0, 100.0, 100.0)];
        let s = summarise(&pts, None);
        assert_eq!(s.updates_to_follow, None);
        assert_eq!(s.median_after, None);
        assert!((s.median_before.unwrap() - 0.2).abs() < 1e-12);
        let never = [(6.0, 100.0, 50.0); 5];
        assert_eq!(summarise(&never, Some(5.0)).updates_to_follow, None);
    }

    #[test]
    fn json_stream_updates_are_read_and_errors_named() {
        let out = concat!(
            r#"{"event":"start","data":{}}"#,
            "\n",
            r#"{"event":"update","data":{"window_ns":[10,20],"available_bandwidth_bps":1e8,"sd_bps":1e6,"bound":"exact"}}"#,
            "\n",
            r#"{"event":"end","data":{"probe_bytes":5000,"wall_s":1.5}}"#,
            "\n"
        );
        let (u, b, w) = parse_stream(out).unwrap();
        assert_eq!(u, vec![(10, 20, 1e8, 1e6, "exact".to_string())]);
        assert_eq!((b, w), (Some(5000), Some(1.5)));
        let bad = r#"{"event":"update","data":{"available_bandwidth_bps":1e8}}"#;
        assert!(parse_stream(bad).unwrap_err().contains("line 1"));
        assert!(parse_stream("not json").unwrap_err().contains("line 1"));
    }
}
