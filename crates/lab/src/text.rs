//! The lab's reports as text: what `tightlink lab` prints without
//! `--json` (the tables of `run` and `compare`, their notes, each run's
//! progress line, and `check`, `track`, `cc` and `tcp`), written once
//! beside the reports they render.

use std::fmt::{self, Display, Formatter};

use tightlink_sys::cpu_time::STOLEN_SHARE_WARNING;

use crate::cc::{CcReport, CcRun};
use crate::check::CheckReport;
use crate::passive::TcpLabReport;
use crate::run::{LineCounts, MethodSummary, RunRecord};
use crate::track::TrackReport;

/// `12.3 %`, or `-`.
pub fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0))
}

fn mbit(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} Mbit/s", v / 1e6))
}

/// What a progress line says of the delay lines' drops (nothing where
/// they dropped none or the lab has none).
pub fn line_drops(d: Option<LineCounts>) -> String {
    d.filter(|d| d.dropped + d.dropped_back > 0)
        .map_or(String::new(), |d| {
            format!(
                "; the delay lines dropped {} of {} frames toward the receiver and {} back (this host could not run them on time: its losses, not the path's)",
                d.dropped,
                d.forwarded + d.dropped,
                d.dropped_back
            )
        })
}

/// The share of CPU time stolen over a run's truth window.
fn stolen(r: &RunRecord) -> Option<f64> {
    r.truth.as_ref()?.stolen_share
}

/// "; the sender fell behind its schedule in N streams (K sent again)"
/// for a run whose sender did (streams, trains and resends alike).
fn sender_fell_behind(r: &RunRecord) -> String {
    match (r.sender_late_streams, r.resent_streams) {
        (Some(late), resent) if late > 0 => format!(
            "; the sender fell behind its schedule in {late} streams ({} sent again)",
            resent.unwrap_or(0)
        ),
        _ => String::new(),
    }
}

/// One `lab run` as its progress line says it.
pub fn progress_line(r: &RunRecord) -> String {
    match (r.estimate_bps, r.truth_bps) {
        (Some(e), Some(t)) => format!(
            "  {} #{}: {:.1} Mbit/s, truth {:.1} ({:+.1} %), {:.2} s{}{}{}",
            r.method,
            r.run + 1,
            e / 1e6,
            t / 1e6,
            (e / t - 1.0) * 100.0,
            r.duration_s,
            match stolen(r) {
                Some(s) if s >= STOLEN_SHARE_WARNING =>
                    format!(", the hypervisor took {:.0} % of the CPU time", s * 100.0),
                _ => String::new(),
            },
            sender_fell_behind(r),
            line_drops(r.delay_line)
        ),
        _ => format!(
            "  {} #{}: no answer: {}",
            r.method,
            r.run + 1,
            r.error.as_deref().unwrap_or("?")
        ),
    }
}

/// Where the sender fell behind in half or more of what it sent in some
/// run (its streams and the ones sent again), the range over the runs:
/// the host, not the path, set those runs' pace.
fn sender_fell_behind_summary(runs: &[&RunRecord]) -> Option<String> {
    let counted: Vec<(u64, u64, u64)> = runs
        .iter()
        .filter_map(|r| {
            let late = r.sender_late_streams?;
            let resent = r.resent_streams.unwrap_or(0);
            Some((late, r.streams? + resent, resent))
        })
        .collect();
    let behind = counted
        .iter()
        .filter(|&&(late, sent, _)| late >= 2 && 2 * late >= sent)
        .count();
    if behind == 0 {
        return None;
    }
    let range = |f: fn(&(u64, u64, u64)) -> u64| {
        let lo = counted.iter().map(f).min().unwrap_or(0);
        let hi = counted.iter().map(f).max().unwrap_or(0);
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    };
    Some(format!(
        "The sender fell behind its schedule in half or more of its streams in {behind} of {} runs ({} streams a run, {} sent again): this host could not pace its probes while it ran the lab, so those runs measure the host as much as the path, and every stream sent again costs its bytes.",
        counted.len(),
        range(|c| c.0),
        range(|c| c.2),
    ))
}

/// The table of `lab run` and `lab compare`: one row per method.
pub struct RunTable<'a>(pub &'a [MethodSummary]);

impl Display for RunTable<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "| scenario | method | truth: hop carried (median) | median err | p90 err | bias | bias (offered) | answered | holds truth | silent misses | swings | time (median) | probe bytes (median) | cross dropped (median) |")?;
        writeln!(
            f,
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        )?;
        let signed = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:+.1} %", v * 100.0));
        for m in self.0 {
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} |",
                m.scenario,
                m.method,
                mbit(m.median_truth_bps),
                pct(m.median_rel_error),
                pct(m.p90_rel_error),
                signed(m.median_signed_rel_error),
                signed(m.median_signed_rel_error_offered),
                (m.answered_share * m.runs as f64).round(),
                m.runs,
                if m.with_range > 0 {
                    format!("{}/{}", m.held, m.with_range)
                } else {
                    "-".into()
                },
                m.silent_misses,
                m.swings,
                m.median_duration_s
                    .map_or("-".into(), |d| format!("{d:.2} s")),
                m.median_probe_bytes
                    .map_or("-".into(), |b| format!("{:.1} MB", b / 1e6)),
                m.median_cross_dropped_bytes
                    .map_or("-".into(), |b| format!("{:.0} KB", b / 1e3)),
            )?;
        }
        Ok(())
    }
}

/// The notes under one scenario's table: runs the hypervisor stalled,
/// runs whose sender could not keep its schedule (empty when neither).
pub fn run_notes(results: &[MethodSummary]) -> String {
    let runs: Vec<&RunRecord> = results.iter().flat_map(|m| &m.per_run).collect();
    let stolen_runs: Vec<f64> = runs
        .iter()
        .filter_map(|r| stolen(r))
        .filter(|&s| s >= STOLEN_SHARE_WARNING)
        .collect();
    let mut out = String::new();
    if !stolen_runs.is_empty() {
        out += &format!(
            "\nThe hypervisor took {:.0} % or more of this host's CPU time during {} of {} runs (up to {:.0} %): the shapers stalled with it, so those runs' path was slower than the truth (configured rate minus cross traffic) says.\n",
            STOLEN_SHARE_WARNING * 100.0,
            stolen_runs.len(),
            runs.len(),
            stolen_runs.iter().copied().fold(0.0, f64::max) * 100.0
        );
    }
    if let Some(note) = sender_fell_behind_summary(&runs) {
        out += &format!("\n{note}\n");
    }
    out
}

/// A campaign's close: every method's runs over every scenario pooled
/// into one row each, and the silent misses counted over all of them.
pub fn campaign_summary(all: &[MethodSummary]) -> String {
    let pooled = crate::run::pool(all);
    let silent: usize = pooled.iter().map(|m| m.silent_misses).sum();
    let runs: usize = pooled.iter().map(|m| m.runs).sum();
    format!(
        "\nAll scenarios pooled:\n{}\nSilent misses (more than 10 % off, `exact`, a range that misses the truth, no warning): {silent} of {runs} runs.\n",
        RunTable(&pooled)
    )
}

impl Display for CheckReport {
    /// What `lab check` found, a line per check.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let r = self;
        for (k, (rate, got)) in r.saturated.iter().enumerate() {
            match got {
                Some(g) => writeln!(
                    f,
                    "hop {} saturated: {:.2} Mbit/s sent for {:.2} configured ({:+.2} %){}",
                    k + 1,
                    g / 1e6,
                    rate / 1e6,
                    (g / rate - 1.0) * 100.0,
                    match r.saturated_stolen_share.get(k).copied().flatten() {
                        Some(s) => format!(
                            "; the hypervisor took {:.1} % of the host's CPU time meanwhile",
                            s * 100.0
                        ),
                        None => String::new(),
                    }
                )?,
                None => writeln!(f, "hop {}: no sender enters here, not saturated", k + 1)?,
            }
            if let Some(Some((bucket, bps))) = r.saturated_larger_bucket.get(k) {
                writeln!(
                    f,
                    "hop {} saturated again with a {bucket} B bucket: {:.2} Mbit/s ({:+.2} %)",
                    k + 1,
                    bps / 1e6,
                    (bps / rate - 1.0) * 100.0
                )?;
            }
        }
        if let Some((nominal, truth)) = r.cross_only {
            writeln!(
                f,
                "cross traffic alone: truth {:.2} Mbit/s for rate - cross = {:.2} ({:+.2} %)",
                truth / 1e6,
                nominal / 1e6,
                (truth / nominal - 1.0) * 100.0
            )?;
        }
        if let Some((want, got)) = r.loss {
            writeln!(
                f,
                "random loss on the access link: {:.2} % of a 1 s train lost ({:.2} % configured)",
                got * 100.0,
                want * 100.0
            )?;
        }
        if let Some(d) = &r.one_way_delay {
            let ms = |ns: i64| ns as f64 / 1e6;
            writeln!(
                f,
                "one-way delay: {:.3} ms median (p5 {:.3}, p95 {:.3}, max {:.3}) for {:.3} ms asked ({:+.0} us); {} of {} probes arrived",
                ms(d.median_ns),
                ms(d.p5_ns),
                ms(d.p95_ns),
                ms(d.max_ns),
                ms(d.asked_ns),
                (d.median_ns - d.asked_ns) as f64 / 1e3,
                d.received,
                d.sent
            )?;
        }
        if let Some((frames, late)) = r.delay_line_late {
            writeln!(
                f,
                "delay lines meanwhile: {late} of {frames} frames toward the receiver left more than 100 us after their due time"
            )?;
        }
        for w in &r.warnings {
            writeln!(f, "warning: {w}")?;
        }
        Ok(())
    }
}

/// One `lab cc` run as its progress line says it.
pub fn cc_progress_line(run: &CcRun) -> String {
    format!(
        "{} run {}: {} of {} available{}{}{}",
        run.controller,
        run.run + 1,
        run.throughput_bps
            .map_or("-".into(), |t| format!("{:.1} Mbit/s", t / 1e6)),
        run.available_bps
            .map_or("-".into(), |t| format!("{:.1} Mbit/s", t / 1e6)),
        line_drops(run.delay_line),
        flow_shares(&run.flows, run.jain),
        run.error
            .as_ref()
            .map_or(String::new(), |e| format!(" ({e})"))
    ) + &run.line_restarted.as_ref().map_or(String::new(), |said| {
        format!("; the delay line fell over: this run is left out of the table, and the line was started again (it had logged: {said})")
    })
}

/// Flows run together: " (bbe 120.1, reno 60.2 Mbit/s; Jain's index
/// 0.90)"; nothing for one flow.
fn flow_shares(flows: &[crate::cc::FlowShare], jain: Option<f64>) -> String {
    if flows.is_empty() {
        return String::new();
    }
    format!(
        " ({}; Jain's index {})",
        each_flow(flows),
        jain.map_or("-".into(), |j| format!("{j:.3}"))
    )
}

/// "bbe 120.1, reno 60.2 Mbit/s".
fn each_flow(flows: &[crate::cc::FlowShare]) -> String {
    let each: Vec<String> = flows
        .iter()
        .map(|f| {
            let t = f
                .throughput_bps
                .map_or("-".into(), |t| format!("{:.1}", t / 1e6));
            format!("{} {t}", f.controller)
        })
        .collect();
    format!("{} Mbit/s", each.join(", "))
}

impl Display for CcReport {
    /// `lab cc`'s table: one row per controller (or flows run together),
    /// then, where flows ran together, each one's throughput.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "| scenario | controller | runs | throughput (median) | available (median) | share (median) | loss (median) | RTT (median) |")?;
        writeln!(f, "|---|---|---:|---:|---:|---:|---:|---:|")?;
        for s in &self.summaries {
            writeln!(
                f,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                s.scenario,
                s.controller,
                s.runs,
                mbit(s.median_throughput_bps),
                mbit(s.median_available_bps),
                pct(s.median_share),
                s.median_loss
                    .map_or("-".into(), |v| format!("{:.2} %", v * 100.0)),
                s.median_rtt_ms.map_or("-".into(), |v| format!("{v:.2} ms")),
            )?;
        }
        let together: Vec<_> = self
            .summaries
            .iter()
            .filter(|s| !s.median_flows.is_empty())
            .collect();
        if !together.is_empty() {
            writeln!(f)?;
            writeln!(f, "| scenario | flows together | runs | each flow's throughput (median) | Jain's index (median) |")?;
            writeln!(f, "|---|---|---:|---|---:|")?;
            for s in together {
                writeln!(
                    f,
                    "| {} | {} | {} | {} | {} |",
                    s.scenario,
                    s.controller,
                    s.runs,
                    each_flow(&s.median_flows),
                    s.median_jain.map_or("-".into(), |j| format!("{j:.3}"))
                )?;
            }
        }
        Ok(())
    }
}

impl Display for TrackReport {
    /// `lab track`'s updates against the truth, and how it followed.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let r = self;
        let m = |v: Option<f64>| v.map_or("-".into(), |v| format!("{:.1}", v / 1e6));
        writeln!(
            f,
            "  time s   estimate Mbit/s   +- sd   truth(stream)  truth(500 ms)"
        )?;
        for p in &r.points {
            writeln!(
                f,
                "{:7.2}   {:8.1} {:>8}   {:6.1}   {:>12}   {:>12}",
                p.t_s,
                p.estimate_bps / 1e6,
                if p.bound == "exact" {
                    ""
                } else {
                    p.bound.as_str()
                },
                p.sd_bps / 1e6,
                m(p.stream_truth_bps),
                m(p.truth_bps)
            )?;
        }
        for (s, truth) in [
            (&r.summary, "the 500 ms truth"),
            (&r.stream_summary, "the truth over each stream"),
        ] {
            writeln!(
                f,
                "{} updates, {:.0} % within +-10 % of {truth}; median error {} before{}",
                r.points.len(),
                s.within_tolerance * 100.0,
                pct(s.median_before),
                match r.step_at_s {
                    Some(t) => format!(
                        " the step at {t:.2} s, {} from the fifth update after it; followed (3 in a row within 10 %) {}",
                        pct(s.median_after),
                        s.updates_to_follow
                            .map_or("never".into(), |n| format!("from the {n}. update after the step"))
                    ),
                    None => String::new(),
                }
            )?;
        }
        writeln!(
            f,
            "probe bytes {}, wall {}{}",
            r.probe_bytes
                .map_or("-".into(), |b| format!("{:.1} MB", b as f64 / 1e6)),
            r.wall_s.map_or("-".into(), |w| format!("{w:.1} s")),
            line_drops(r.delay_line)
        )
    }
}

impl Display for TcpLabReport {
    /// One `lab tcp` transfer: the flow, the estimators against the
    /// bottleneck, and the losses against their true causes.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let r = self;
        let signed = |v: Option<f64>| v.map_or("-".into(), |e| format!("{:+.1} %", e * 100.0));
        writeln!(
            f,
            "{} ({}): {:.1} MB at {:.1} Mbit/s, RTT min {} ms; bottleneck hop {} {:.0} Mbit/s (sent {}), queue {} B, loss {} %",
            r.scenario,
            r.congestion,
            r.data_bytes as f64 / 1e6,
            r.throughput_bps / 1e6,
            r.rtt_min_ms.map_or("-".into(), |v| format!("{v:.3}")),
            r.bottleneck_hop,
            r.rate_bps / 1e6,
            r.bottleneck_sent_bps
                .map_or("-".into(), |b| format!("{:.1}", b / 1e6)),
            r.buffer_bytes,
            r.loss * 100.0
        )?;
        writeln!(
            f,
            "  capacity {} ({}: {}); buffer {} ({})",
            r.capacity_bps
                .map_or("-".into(), |c| format!("{:.1} Mbit/s", c / 1e6)),
            signed(r.capacity_error),
            r.capacity_source,
            r.buffer_estimate_bytes
                .map_or("-".into(), |b| format!("{:.1} KB", b / 1e3)),
            signed(r.buffer_error)
        )?;
        write!(
            f,
            "  losses {} ({} congestion, {} random, {} spurious left out; the bottleneck dropped {} packets)",
            r.loss_events, r.congestion_losses, r.random_losses, r.spurious_events, r.bottleneck_drops
        )?;
        match r.truth {
            Some(t) => writeln!(
                f,
                "; truth: random {}/{} called random, overflow {}/{} called congestion{}",
                t.random_as_random,
                t.random_as_random + t.random_as_congestion,
                t.overflow_as_congestion,
                t.overflow_as_congestion + t.overflow_as_random,
                if r.unmatched > 0 {
                    format!(", {} unmatched", r.unmatched)
                } else {
                    String::new()
                }
            ),
            None => writeln!(
                f,
                "; truth: unknown (random loss and the bottleneck are both at router 1)"
            ),
        }
    }
}

/// One `lab adversity` estimate as a progress line.
pub fn adversity_progress_line(r: &crate::adversity::AdversityRecord) -> String {
    let what = match (&r.error, r.estimate_bps) {
        (Some(e), _) => format!("no answer: {}", e.lines().next().unwrap_or("")),
        (None, Some(v)) => format!(
            "{} {} ({}){}",
            mbit(Some(v)),
            r.bound,
            pct(r.rel_error()),
            if r.warning_codes.is_empty() {
                String::new()
            } else {
                format!(" [{}]", r.warning_codes.join(", "))
            }
        ),
        (None, None) => "no answer".to_string(),
    };
    format!(
        "{} hogs, {} KB, {}, run {}: {what}; truth {}",
        r.hogs,
        r.bucket_bytes / 1000,
        r.far_end.name(),
        r.run + 1,
        mbit(Some(r.truth_bps))
    )
}

/// The adversity campaign's table.
pub struct AdversityTable<'a>(pub &'a [crate::adversity::AdversityRow]);

impl Display for AdversityTable<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:24} {:>5} {:>11} {:>7} {:>7} {:>10} {:>8} {:>7}",
            "condition", "runs", "median err", "silent", "exact", "lost exact", "holding", "errors"
        )?;
        writeln!(
            f,
            "{:24} {:>5} {:>11} {:>7} {:>7} {:>10} {:>8} {:>7}",
            "", "", "(abs.)", "misses", "misses", "(of <=5 %)", "truth", ""
        )?;
        for r in self.0 {
            writeln!(
                f,
                "{:24} {:>5} {:>11} {:>7} {:>7} {:>10} {:>8} {:>7}",
                r.condition,
                r.runs,
                pct(r.median_abs_error),
                r.silent_misses,
                r.exact_misses,
                format!("{}/{}", r.lost_exact, r.within_5_percent),
                r.holding_truth,
                r.errors
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(streams: u64, late: u64, resent: u64) -> RunRecord {
        RunRecord {
            method: "auto".into(),
            run: 0,
            estimate_bps: Some(1e8),
            bound: None,
            truth_bps: Some(1e8),
            truth: None,
            rel_error: Some(0.0),
            truth_offered_bps: None,
            rel_error_offered: None,
            cross_dropped_bytes: None,
            duration_s: 0.5,
            probe_bytes: None,
            low_bps: None,
            high_bps: None,
            stop: None,
            streams: Some(streams),
            sender_late_streams: Some(late),
            delay_line: None,
            resent_streams: Some(resent),
            warnings: None,
            error: None,
        }
    }

    #[test]
    fn a_sender_behind_in_half_its_streams_is_summed_up() {
        // 12 streams and 2 resends: 7 late is half of 14, 6 is not.
        let (a, b, c) = (run(12, 7, 2), run(12, 6, 2), run(10, 0, 0));
        assert_eq!(sender_fell_behind_summary(&[&b, &c]), None);
        let s = sender_fell_behind_summary(&[&a, &b, &c]).unwrap();
        assert!(
            s.contains("in 1 of 3 runs (0-7 streams a run, 0-2 sent again)"),
            "{s}"
        );
        assert_eq!(
            sender_fell_behind(&a),
            "; the sender fell behind its schedule in 7 streams (2 sent again)"
        );
        assert_eq!(sender_fell_behind(&c), "");
        // One late stream of two is no pattern.
        assert_eq!(sender_fell_behind_summary(&[&run(2, 1, 0)]), None);
    }
}
