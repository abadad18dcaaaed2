//! The human text of the library's reports: what `tightlink` prints
//! without `--json`, written once here so that every face (the CLI, the
//! Python package, a program that embeds the library) shows the same
//! lines. Each report implements `Display`; the JSON shapes of the
//! `--json-stream` events live here too.

use std::fmt::{self, Display, Formatter};

use tightlink_core::capacity::{LinkCapacity, LinkEstimate};
use tightlink_core::channel::{GroundTruth, HostFindings};
use tightlink_core::units::format_rate;
use tightlink_core::{Bound, ProbeStream};
use tightlink_probe::capacity::shaper_note;

use crate::estimate::{Capped, EstimateReport};
use crate::hops::HopsResult;
use crate::report::BartUpdate;
use crate::transfer::{TransferInterval, TransferReport};
use crate::CapacityResult;

fn gbit(v: f64) -> f64 {
    v / 1e9
}

impl Display for EstimateReport {
    /// The summary `tightlink estimate` prints: the answer with its
    /// bound and range, what the host found, warnings, the simulator's
    /// truth and the cost.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let e = &self.estimate;
        writeln!(f, "target      {}", self.target)?;
        let range = if e.high_bps.is_finite() {
            format!("range {:.3}-{:.3}", gbit(e.low_bps), gbit(e.high_bps))
        } else {
            "no upper limit measured".to_string()
        };
        let cap_reason = match self.capped {
            Some(Capped::HostLimited) => " (host-limited)",
            Some(Capped::FarEndOrMaxRate) => " (the most the far end or --max-rate allows)",
            None => "",
        };
        if e.bound == Bound::None {
            writeln!(
                f,
                "estimate    none: no answer ({}) by {}",
                e.stop, e.method
            )?;
        } else {
            writeln!(
                f,
                "estimate    {}{:.3} Gbit/s ({}, {range}) by {}{}",
                match e.bound {
                    Bound::AtLeast => "at least ",
                    Bound::AtMost => "at most ",
                    _ => "",
                },
                gbit(e.available_bandwidth_bps),
                e.bound.as_str(),
                e.method,
                cap_reason
            )?;
        }
        if let Some(h) = &self.host {
            write_host(f, self, h)?;
        }
        for w in &self.warnings {
            writeln!(f, "warning     {w}")?;
        }
        match (e.truth_bps, self.error()) {
            (Some(t), Some(err)) => writeln!(
                f,
                "truth       {:.3} Gbit/s (simulator; error {:+.1} %)",
                gbit(t),
                err * 100.0
            )?,
            (Some(t), None) => writeln!(f, "truth       {:.3} Gbit/s (simulator)", gbit(t))?,
            _ => {}
        }
        let c = &e.cost;
        let resent = match c.resent_streams {
            0 => String::new(),
            n => format!(" (and {n} sent again: {})", resent_because(self)),
        };
        writeln!(
            f,
            "cost        {} streams{resent}, {:.1} MB of probes, {:.3} s of path time, {:.2} s in all ({})",
            c.streams,
            c.probe_bytes as f64 / 1e6,
            c.duration_s,
            c.wall_s,
            e.stop
        )
    }
}

/// What the host found: its pacing, the far end, its own interface as
/// the bottleneck, late streams, drops and its warnings.
fn write_host(f: &mut Formatter<'_>, report: &EstimateReport, h: &HostFindings) -> fmt::Result {
    writeln!(
        f,
        "host        paces probes up to {}; this run probed up to {:.3} Gbit/s; rates counted on the {}",
        if h.host_limit_bps.is_finite() {
            format!("{:.3} Gbit/s", gbit(h.host_limit_bps))
        } else {
            "(the far end's host sends in reverse mode)".to_string()
        },
        gbit(report.probe_ceiling_bps.unwrap_or(f64::NAN)),
        h.rate_layer
    )?;
    if let Some(far) = &h.far_end {
        writeln!(f, "far end     {far}")?;
    }
    if let Some(own) = h.own_link_bps {
        // Only an answer near the own link's rate makes it the tight
        // link; a faster own link merely queued the fastest probes.
        let abw = report.estimate.available_bandwidth_bps;
        let tight = report.estimate.bound != Bound::None && abw > own * 0.9;
        writeln!(
            f,
            "bottleneck  the sender's own interface: its queue released {} {} at {:.3} Gbit/s (kernel transmit stamps), {}",
            h.queued_streams,
            if h.queued_streams == 1 { "stream" } else { "streams" },
            gbit(own),
            if tight {
                "so the tight link is the sender's own"
            } else {
                "faster than the path beyond it"
            }
        )?;
    }
    if h.late_streams > 0 {
        writeln!(
            f,
            "host        fell behind its schedule in {} {}",
            h.late_streams,
            if h.late_streams == 1 {
                "stream"
            } else {
                "streams"
            }
        )?;
    }
    if !h.drops.is_empty() {
        let d: Vec<String> = h.drops.iter().map(|(n, c)| format!("{n}={c}")).collect();
        writeln!(f, "dropped     {}", d.join(", "))?;
    }
    for w in &h.warnings {
        writeln!(f, "warning     {w}")?;
    }
    Ok(())
}

/// Why streams were sent again, as far as the host findings tell.
fn resent_because(report: &EstimateReport) -> &'static str {
    let Some(h) = &report.host else {
        return "the sender fell behind";
    };
    let late = h.late_streams > 0;
    let overflowed = h.drops.iter().any(|(name, _)| *name == "socket_overflow");
    match (late, overflowed) {
        (true, true) => "the sender fell behind, or the receiver's socket dropped probes",
        (false, true) => "the receiver's socket dropped probes",
        _ => "the sender fell behind",
    }
}

/// One `--follow` line: path time, estimate +- sd, truth.
pub fn update_line(u: &BartUpdate) -> String {
    let bound = match u.bound {
        Bound::AtLeast => ">=",
        Bound::AtMost => "<=",
        _ => "",
    };
    let mut line = format!(
        "{:9.3} s  stream {:4}  {bound}{:.3} Gbit/s +- {:.3}",
        u.elapsed_ns as f64 / 1e9,
        u.streams,
        gbit(u.abw_bps),
        gbit(u.sd_bps)
    );
    if let Some(t) = u.truth_bps {
        line += &format!("  truth {:.3}", gbit(t));
    }
    line
}

/// What an `update` event of `--json-stream` (and Python's `on_update`)
/// says: the tracker after a stream.
pub fn update_event_json(u: &BartUpdate) -> serde_json::Value {
    let mut v = serde_json::json!({
        "streams": u.streams,
        "elapsed_ns": u.elapsed_ns,
        "available_bandwidth_bps": u.abw_bps,
        "sd_bps": u.sd_bps,
        "bound": u.bound.as_str(),
        "window_ns": u.window_ns,
    });
    if let Some(t) = u.truth_bps.filter(|t| t.is_finite()) {
        v["truth_bps"] = serde_json::json!(t);
    }
    v
}

/// What a `stream` event of `--json-stream` says of one probe stream:
/// its packets, what came back, its average send rate (bytes after the
/// first packet over the send span) and, on the simulator, the truth
/// over its span.
pub fn stream_event_json(s: &ProbeStream, truth: Option<GroundTruth>) -> serde_json::Value {
    let bytes: u64 = s.packets.iter().map(|p| p.size_bytes as u64).sum();
    let mut v = serde_json::json!({
        "stream": s.id,
        "packets": s.len(),
        "received": s.received_count(),
        "bytes": bytes,
        "send_span_ns": s.send_span_ns() as i64,
        "rate_bps": s.avg_rate_bps().unwrap_or(0.0),
        "loss": s.loss_fraction(),
    });
    if let Some(t) = truth.filter(|t| t.available_bps.is_finite()) {
        v["truth_bps"] = serde_json::json!(t.available_bps);
    }
    v
}

/// A rate as the hop table prints it.
fn hop_rate(v: f64) -> String {
    if !v.is_finite() {
        "inf".into()
    } else if v >= 1e9 {
        format!("{:.2} Gbit/s", v / 1e9)
    } else {
        format!("{:.1} Mbit/s", v / 1e6)
    }
}

/// A hop's ns/B, its standard error, how it met the head and its link's
/// capacity, as the table shows them (`-` and why where no link was read).
fn link_columns(
    replies: usize,
    link: Option<&LinkEstimate>,
) -> (String, String, &'static str, String) {
    let Some(l) = link else {
        let why = if replies == 0 {
            "no reply"
        } else {
            "too few replies"
        };
        return ("-".into(), "-".into(), "-", why.to_string());
    };
    let cap = match l.capacity {
        LinkCapacity::Measured {
            capacity_bps,
            low_bps,
            high_bps,
        } => format!(
            "{} [{}, {}]",
            hop_rate(capacity_bps),
            hop_rate(low_bps),
            hop_rate(high_bps)
        ),
        LinkCapacity::AtLeast { bps } => format!(">= {} (too fast to see)", hop_rate(bps)),
        LinkCapacity::Inconsistent { ns_per_byte } => {
            format!("inconsistent ({ns_per_byte:.2} ns/B)")
        }
    };
    let cap = if l.from_ttl + 1 < l.ttl {
        format!("{cap} (links {}..{})", l.from_ttl + 1, l.ttl)
    } else {
        cap
    };
    let head = match l.queued_behind_head {
        Some(true) => "queued",
        Some(false) => "passed",
        None => "-",
    };
    (
        format!("{:.3}", l.ns_per_byte),
        format!("{:.3}", l.se),
        head,
        cap,
    )
}

impl Display for HopsResult {
    /// The per-hop table `tightlink hops` prints.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let (r, params) = (&self.report, &self.params);
        writeln!(f, "target   {}", self.target)?;
        writeln!(f, "channel  {}", self.channel)?;
        writeln!(
            f,
            "probes   {} sizes {}-{} B x {}{}",
            params.sizes.len(),
            params.sizes.first().unwrap_or(&0),
            params.sizes.last().unwrap_or(&0),
            params.repeats,
            if params.head_packets.is_empty() {
                ", lone (pathchar)".to_string()
            } else {
                format!(
                    ", behind heads of {:?} x {} B",
                    params.head_packets, self.mtu_bytes
                )
            }
        )?;
        writeln!(
            f,
            "{:>4} {:<16} {:>9}  {:>9} {:>7}  {:<5}  {:<44} {:>14}",
            "ttl", "responder", "replies", "ns/B", "+-", "head", "link capacity", "truth"
        )?;
        for h in &r.hops {
            let link = r.links.iter().find(|l| l.ttl == h.ttl);
            let (nsb, se, head, cap) = link_columns(h.replies, link);
            let truth = link
                .and_then(|l| self.truth_bps(l))
                .map_or(String::new(), hop_rate);
            writeln!(
                f,
                "{:>4} {:<16} {:>9}  {:>9} {:>7}  {:<5}  {:<44} {:>14}",
                h.ttl,
                h.responder.as_deref().unwrap_or("*"),
                format!("{}/{}", h.replies, h.probes),
                nsb,
                se,
                head,
                cap,
                truth
            )?;
        }
        if let Some(l) = r
            .links
            .iter()
            .find(|l| l.from_ttl == 0 && l.queued_behind_head == Some(true))
        {
            writeln!(
                f,
                "link 1 behind a head: the head left this host at {} (its own link, or its send path when slower); a shaped hop faster than that cannot queue it and reads '>=' or 'passed'",
                hop_rate(8e9 / l.ns_per_byte)
            )?;
        }
        if params.head_packets.is_empty()
            && r.links
                .iter()
                .any(|l| matches!(l.capacity, LinkCapacity::AtLeast { .. }))
        {
            writeln!(f, "'>=': the link adds less per-byte time than the RTT noise resolves (host paper 4.1: VPS reaches ~155 Mbit/s with 1500 B packets); token-bucket shapers look the same to lone probes: try --behind 16")?;
        }
        for w in self.warnings() {
            writeln!(f, "{w}")?;
        }
        writeln!(
            f,
            "{} probes, {:.2} MB, {:.2} s{}",
            r.probes,
            r.cost.probe_bytes as f64 / 1e6,
            r.cost.duration_s,
            if r.reached_destination {
                ""
            } else {
                " (destination not reached)"
            }
        )
    }
}

impl TransferInterval {
    /// The header of the interval lines `tightlink transfer` prints.
    pub const TEXT_HEADER: &'static str =
        "   interval s         goodput            rate        estimate     resent       rtt";
}

impl Display for TransferInterval {
    /// One interval line under [`TransferInterval::TEXT_HEADER`].
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:>6.1}-{:<6.1}  {:>14}  {:>14}  {:>14}  {:>9}  {:>8}",
            self.start_s,
            self.end_s,
            format_rate(self.goodput_bps),
            self.rate_bps.map_or("-".into(), format_rate),
            self.estimate_bps.map_or("-".into(), format_rate),
            self.retransmitted_bytes
                .map_or("-".into(), |b| format!("{b} B")),
            self.rtt_ms.map_or("-".into(), |r| format!("{r:.2} ms")),
        )
    }
}

impl Display for TransferReport {
    /// The summary after the interval lines.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "target      {} ({}{})",
            self.target,
            self.cc,
            if self.reverse {
                ", the server sending: its counts below"
            } else {
                ""
            }
        )?;
        writeln!(
            f,
            "delivered   {} bytes in {:.2} s: {}{}",
            self.bytes,
            self.duration_s,
            format_rate(self.goodput_bps),
            self.available_bps.map_or(String::new(), |a| format!(
                " ({:.0} % of the {} available)",
                self.goodput_bps / a * 100.0,
                format_rate(a)
            ))
        )?;
        writeln!(
            f,
            "lost        {} of {} packets ({:.2} %), {} bytes sent again",
            self.lost_packets,
            self.sent_packets,
            self.loss() * 100.0,
            self.retransmitted_bytes
        )?;
        let window = matches!(self.cc, "bbe" | "newreno");
        let last = self.intervals.last();
        if let (true, Some(rate)) = (window, last.and_then(|iv| iv.rate_bps)) {
            // On real packets: the window over RTTmin and BE at the end.
            writeln!(
                f,
                "window      last rate {} (the window over the least RTT), BE {}",
                format_rate(rate),
                last.and_then(|iv| iv.estimate_bps)
                    .map_or("-".into(), format_rate)
            )?;
        } else if !window && (self.streams > 0 || self.final_rate_bps.is_some()) {
            writeln!(
                f,
                "estimates   {} streams read, median exact estimate {}, last rate {}",
                self.streams,
                self.estimate_median_bps.map_or("-".into(), format_rate),
                self.final_rate_bps.map_or("-".into(), format_rate)
            )?;
        }
        if let (Some(a), Some(b)) = (self.rtt_min_ms, self.rtt_median_ms) {
            writeln!(f, "rtt         min {a:.2} ms, median {b:.2} ms")?;
        }
        if let Some(d) = &self.sha256 {
            writeln!(f, "sha256      {d} (checked by both ends)")?;
        }
        Ok(())
    }
}

/// The table `tightlink capacity` prints: one row per method, with its
/// trains' rate, the shaper found and its warnings under it.
pub struct CapacityTable<'a> {
    pub target: &'a str,
    pub results: &'a [CapacityResult],
}

impl Display for CapacityTable<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "target      {}", self.target)?;
        if let Some(t) = self.results.iter().find_map(|r| r.report.truth_bps) {
            writeln!(f, "truth       {} (narrow link, simulator)", format_rate(t))?;
        }
        writeln!(
            f,
            "{:<10} {:>16} {:>30} {:>6} {:>12} {:>10} {:>9} {:>10}",
            "method", "capacity", "range", "conf", "pairs used", "probe MB", "time", "stop"
        )?;
        for r in self.results.iter().map(|r| &r.report) {
            let cap = match (r.capacity_bps, r.bound) {
                (Some(c), Bound::AtLeast) => format!(">= {}", format_rate(c)),
                (Some(c), _) => format_rate(c),
                (None, _) => "none".to_string(),
            };
            let err = match (r.capacity_bps, r.truth_bps) {
                (Some(c), Some(t)) => format!(" ({:+.1} %)", (c / t - 1.0) * 100.0),
                _ => String::new(),
            };
            writeln!(
                f,
                "{:<10} {:>16} {:>30} {:>6.2} {:>12} {:>10.2} {:>8.3}s {:>10}{}",
                r.method,
                cap,
                if r.capacity_bps.is_some() && r.high_bps.is_finite() {
                    format!("{} - {}", format_rate(r.low_bps), format_rate(r.high_bps))
                } else {
                    "-".to_string()
                },
                r.confidence,
                format!("{}/{}", r.pairs_used, r.pairs_sent),
                r.cost.probe_bytes as f64 / 1e6,
                r.cost.duration_s,
                r.stop,
                err
            )?;
            if let Some(adr) = r.adr_bps {
                writeln!(
                    f,
                    "{:<10} ADR of {} trains: {}",
                    "",
                    r.trains,
                    format_rate(adr)
                )?;
            }
            if let Some(s) = &r.shaper {
                writeln!(f, "{:<10} {}", "", shaper_note(s))?;
            }
            for w in &r.warnings {
                writeln!(f, "{:<10} warning: {w}", "")?;
            }
        }
        Ok(())
    }
}

impl Display for crate::passive::TcpAnalysis {
    /// The summary `tightlink analyze-tcp` prints.
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let j = self;
        let opt_ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3} ms"));
        writeln!(
            f,
            "capture     {}: {} packets, {} TCP flows",
            j.capture, j.capture_packets, j.capture_flows
        )?;
        writeln!(
            f,
            "flow        {}: {:.2} MB in {:.3} s ({})",
            j.flow,
            j.data_bytes as f64 / 1e6,
            j.duration_s,
            format_rate(j.throughput_bps)
        )?;
        writeln!(
            f,
            "rtt         min {}, median {}, max {} ({} samples)",
            opt_ms(j.rtt_min_ms),
            opt_ms(j.rtt_median_ms),
            opt_ms(j.rtt_max_ms),
            j.rtt_samples
        )?;
        writeln!(
            f,
            "losses      {} events ({} segments resent, {} spurious events): {} congestion, {} random; RTTcong {}",
            j.loss_events,
            j.retransmitted_segments,
            j.spurious_events,
            j.congestion_losses,
            j.random_losses,
            opt_ms(j.rtt_cong_ms)
        )?;
        match j.capacity_bps {
            Some(c) => writeln!(
                f,
                "capacity    {} (from {})",
                format_rate(c),
                j.capacity_source
            )?,
            None => writeln!(f, "capacity    none (no ACK pairs; give --capacity)")?,
        }
        writeln!(
            f,
            "ack pairs   {} seen; queued: {}; back to back: {}",
            j.ack_pairs_seen,
            match (j.queued_bps, j.queued_p25_bps, j.queued_p75_bps) {
                (Some(m), Some(lo), Some(hi)) => format!(
                    "median {} of {} (quartiles {} - {})",
                    format_rate(m),
                    j.queued_pairs,
                    format_rate(lo),
                    format_rate(hi)
                ),
                _ => "none".into(),
            },
            match j.back_to_back_bps {
                Some(c) => format!(
                    "{} by CapProbe over {} ({})",
                    format_rate(c),
                    j.back_to_back_pairs,
                    if j.back_to_back_converged {
                        "converged"
                    } else {
                        "not converged"
                    }
                ),
                None => "none".into(),
            }
        )?;
        match (j.buffer_bytes, j.buffer_delay_ms) {
            (Some(b), Some(d)) => writeln!(
                f,
                "buffer      {:.1} KB ({d:.3} ms of queue before congestion losses at the capacity)",
                b / 1e3
            )?,
            _ => writeln!(
                f,
                "buffer      unknown (no congestion loss with an RTT before it)"
            )?,
        }
        let r = |v: Option<f64>| v.map_or("-".into(), format_rate);
        writeln!(
            f,
            "westwood    median BE {}, RE {}, ERE {} (filter tau {:.3} ms)",
            r(j.be_median_bps),
            r(j.re_median_bps),
            r(j.ere_median_bps),
            j.filter_tau_ms
        )
    }
}

/// A TCP flow's time series per ACK as CSV (`analyze-tcp --format csv`).
pub struct TcpSeriesCsv<'a>(pub &'a crate::passive::TcpAnalysis);

impl Display for TcpSeriesCsv<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        writeln!(f, "t_s,rtt_ms,be_bps,re_bps,ere_bps,level")?;
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.6}"));
        for p in &self.0.series {
            writeln!(
                f,
                "{:.6},{},{:.0},{:.0},{:.0},{}",
                p.t_s,
                opt(p.rtt_ms),
                p.be_bps,
                p.re_bps,
                p.ere_bps,
                opt(p.level)
            )?;
        }
        Ok(())
    }
}

/// How `analyze` writes its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnalysisFormat {
    /// A human table with each row's note.
    Table,
    /// One JSON object: the trace, its metadata and every row.
    Json,
    /// CSV in [`ANALYSIS_CSV_HEADER`]'s column order.
    Csv,
}

/// The CSV columns of `analyze --format csv`, in order.
pub const ANALYSIS_CSV_HEADER: &str = "stream_id,method,kind,avg_rate_bps,decision,abw_bps,bound";

#[derive(serde::Serialize)]
struct AnalysisJson<'a> {
    trace: &'a str,
    metadata: serde_json::Map<String, serde_json::Value>,
    streams: usize,
    packets: usize,
    results: &'a [tightlink_core::Analysis],
}

/// Finite values only.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// `analyze`'s output of `results` read from `trace` (named `name`):
/// CSV (fixed column order), JSON (documented fields, never NaN) or a
/// human table.
pub fn write_analysis(
    out: &mut dyn std::io::Write,
    format: AnalysisFormat,
    name: &str,
    trace: &tightlink_trace::Trace,
    results: &[tightlink_core::Analysis],
) -> std::io::Result<()> {
    let int_or_empty = |v: Option<f64>| finite(v).map(|x| format!("{x:.0}")).unwrap_or_default();
    let gbps = |v: Option<f64>| {
        finite(v)
            .map(|x| format!("{:.3}", x / 1e9))
            .unwrap_or_else(|| "-".into())
    };
    match format {
        AnalysisFormat::Csv => {
            writeln!(out, "{ANALYSIS_CSV_HEADER}")?;
            for a in results {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    a.stream_id,
                    a.method.name(),
                    a.kind.as_str(),
                    int_or_empty(a.avg_rate_bps),
                    a.decision.map(|d| d.as_str()).unwrap_or(""),
                    int_or_empty(a.abw_bps),
                    a.bound.as_str()
                )?;
            }
        }
        AnalysisFormat::Json => {
            let report = AnalysisJson {
                trace: name,
                metadata: trace
                    .metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
                streams: trace.streams.len(),
                packets: trace.packet_count(),
                results,
            };
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        AnalysisFormat::Table => {
            writeln!(
                out,
                "{}: {} streams, {} packets (rates in Gbit/s, at the trace's size_bytes layer)",
                name,
                trace.streams.len(),
                trace.packet_count()
            )?;
            writeln!(
                out,
                "{:>6}  {:<22} {:<6} {:>9}  {:<9} {:>9}  {:<8} note",
                "stream", "method", "kind", "avg_rate", "decision", "abw", "bound"
            )?;
            for a in results {
                writeln!(
                    out,
                    "{:>6}  {:<22} {:<6} {:>9}  {:<9} {:>9}  {:<8} {}",
                    a.stream_id,
                    a.method.name(),
                    a.kind.as_str(),
                    gbps(a.avg_rate_bps),
                    a.decision.map(|d| d.as_str()).unwrap_or("-"),
                    gbps(a.abw_bps),
                    a.bound.as_str(),
                    a.reason.as_deref().unwrap_or("")
                )?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_core::analysis::Detail;
    use tightlink_core::{Analysis, Decision, Method, StreamKind};

    /// The JSON row of an answer, by hand: names for the method, kind,
    /// decision and bound, the detail beside the answer, `null` where a
    /// number is not finite, and sub-streams whose rate is not finite
    /// left out (`per_rate` only where one remains).
    #[test]
    fn an_analysis_row_as_json_by_hand() {
        let a = Analysis {
            stream_id: 7,
            method: Method::MultiratePrcmtDp1,
            kind: StreamKind::MultiRate,
            packets: 320,
            received: 318,
            avg_rate_bps: Some(f64::NAN),
            decision: Some(Decision::Above),
            abw_bps: Some(6.5e9),
            bound: Bound::AtMost,
            reason: Some("why".into()),
            detail: Detail {
                pdt: Some(f64::INFINITY),
                kept_gaps: Some(12),
                per_rate: vec![(5e9, Some(Decision::Below)), (f64::NAN, None)],
                capacity_bps: Some(1e10),
                ..Detail::default()
            },
        };
        assert_eq!(
            serde_json::to_string(&a).unwrap(),
            "{\"stream_id\":7,\"method\":\"multirate-prcmt-dp1\",\"kind\":\"multi\",\
             \"packets\":320,\"received\":318,\"avg_rate_bps\":null,\"decision\":\"above\",\
             \"abw_bps\":6500000000.0,\"bound\":\"at_most\",\"reason\":\"why\",\
             \"send_rate_bps\":null,\"recv_rate_bps\":null,\"pct\":null,\"pdt\":null,\
             \"kept_gaps\":12,\"gaps_total\":null,\"passes\":null,\
             \"per_rate\":[{\"rate_bps\":5000000000.0,\"decision\":\"below\"}],\
             \"capacity_bps\":10000000000.0}"
        );
        let plain = Analysis {
            detail: Detail::default(),
            ..a
        };
        let json = serde_json::to_string(&plain).unwrap();
        assert!(!json.contains("per_rate"), "{json}");
    }
}
