//! `tightlink estimate [TARGET]`: run a probing strategy against a path and
//! print the estimate (next to the simulator's truth for `sim:` targets).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use tightlink_core::channel::GroundTruth;
use tightlink_core::units::parse_rate;
use tightlink_core::AnalysisParams;
use tightlink_measure::{
    estimate, estimate_both, Bound, Capped, EstimateOptions, EstimateReport, Event, HostFindings,
    Method, ProbeStream, RealOptions, Target,
};

#[derive(Args)]
pub struct EstimateArgs {
    /// `HOST[:PORT]` of a `tightlink server` (port 7447 by default);
    /// `twamp:HOST[:PORT]` (or `stamp:`) of a TWAMP-light or STAMP
    /// reflector (port 862 by default; its receive stamps measure the path
    /// toward it);
    /// `sim:` with the path described (`hops`, `cross`, `shaper`, `coalescence`,
    /// `loss`, `seed`, ...: the guide's command-line chapter lists them), or nothing for the
    /// embedded default: 10 Gbit/s, 2.5 Gbit/s bursty cross traffic,
    /// 125 us receiver coalescence; `trace:FILE` replays a saved run.
    #[arg(default_value = "sim:")]
    pub target: String,
    // Its help lists the strategies' registry (`method_help`).
    #[arg(
        long,
        short,
        default_value = "auto",
        env = "TIGHTLINK_METHOD",
        help = method_help()
    )]
    pub method: String,
    /// One JSON object on stdout instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// One JSON object per line as the run goes (iperf3's --json-stream
    /// convention, `{"event": ..., "data": ...}`): `start`, a `stream` for
    /// every probe stream as it comes back, then `end` with the report
    /// `--json` prints, or `error`.
    #[arg(long, conflicts_with_all = ["json", "both"])]
    pub json_stream: bool,
    /// Most probe streams to send.
    #[arg(long, default_value_t = 60)]
    pub max_streams: usize,
    /// Most probe bytes to send (e.g. 10MB; default 100 MB): a run that
    /// reaches it answers from the streams it has, with stop `budget`
    #[arg(long)]
    pub max_bytes: Option<String>,
    /// Track the available bandwidth with `bart` (implies --method bart)
    /// for --max-streams streams, one line per stream: path time, the
    /// tracker's estimate and its standard deviation (and the truth on
    /// `sim:`); `--json-stream` gives an `update` event per stream.
    #[arg(long, conflicts_with_all = ["both", "json"])]
    pub follow: bool,
    /// With --follow: start a stream every DURATION (e.g. 200ms, up to
    /// 5s) instead of back to back: the probe load of watching a path.
    #[arg(long, requires = "follow")]
    pub interval: Option<String>,
    /// Write every stream of the run as a probe trace (format v1; gzip when
    /// the name ends in `.gz`); `tightlink estimate trace:FILE` replays it.
    #[arg(long)]
    pub save_trace: Option<PathBuf>,
    /// With --save-trace on a simulated path: the per-stream ground truth.
    #[arg(long, requires = "save_trace")]
    pub save_truth: Option<PathBuf>,
    /// Real far ends: measure the download direction (the server sends,
    /// or `tightlink reflector` sends back the trains it held; this host
    /// timestamps), like iperf3 -R.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Real far ends: measure toward it, then back from it (two runs; JSON
    /// `{"forward": ..., "reverse": ...}`).
    #[arg(long, conflicts_with = "reverse")]
    pub both: bool,
    /// Real servers: pre-shared key file (higher limits; required by some
    /// servers).
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// The tight link's capacity when known (e.g. 10G): `queue-fit`
    /// needs it; `igi`, `ptr` and `spruce` use it instead of measuring
    /// one; the other methods refuse it (they would not read it).
    #[arg(long)]
    pub capacity: Option<String>,
    /// Never probe faster than this (e.g. 500M); on `sim:` a ceiling
    /// below the simulated sender's link.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Real servers: how this host sends (forward) or receives (-R)
    /// probes: udp (a UDP socket), packet (AF_PACKET; TPACKET_V3 ring to
    /// receive) or xdp (AF_XDP copy mode, send only). packet and xdp need
    /// root (CAP_NET_RAW) and IPv4; `tightlink doctor` compares them.
    #[arg(long, default_value = "udp")]
    pub backend: String,
}

impl EstimateArgs {
    /// The library's options from the flags.
    pub fn options(&self) -> Result<EstimateOptions> {
        let method: Method = if self.follow {
            Method::Bart
        } else {
            self.method
                .parse()
                .map_err(|e| anyhow::anyhow!("--method {e}"))?
        };
        Ok(EstimateOptions {
            method,
            max_streams: self.max_streams,
            max_bytes: self
                .max_bytes
                .as_deref()
                .map(|b| {
                    tightlink_core::units::parse_bytes(b)
                        .map_err(|e| anyhow::anyhow!("--max-bytes {b}: {e}"))
                })
                .transpose()?,
            real: real_options(self.reverse, &self.key_file, &self.max_rate, &self.backend)?,
            save_trace: self.save_trace.clone(),
            save_truth: self.save_truth.clone(),
            follow: self.follow,
            follow_interval_ns: self
                .interval
                .as_deref()
                .map(|i| {
                    tightlink_core::units::parse_time_ns(i)
                        .with_context(|| format!("--interval {i}"))
                })
                .transpose()?
                .unwrap_or(0),
            analysis: AnalysisParams {
                capacity_bps: self
                    .capacity
                    .as_deref()
                    .map(|c| parse_rate(c).with_context(|| format!("--capacity {c}")))
                    .transpose()?,
                ..AnalysisParams::default()
            },
        })
    }
}

/// The flags every command toward a real far end shares.
pub fn real_options(
    reverse: bool,
    key_file: &Option<PathBuf>,
    max_rate: &Option<String>,
    backend: &str,
) -> Result<RealOptions> {
    Ok(RealOptions {
        reverse,
        key_file: key_file.clone(),
        max_rate_bps: max_rate
            .as_deref()
            .map(|r| parse_rate(r).with_context(|| format!("--max-rate {r}")))
            .transpose()?,
        backend: backend
            .parse()
            .map_err(|e| anyhow::anyhow!("--backend: {e}"))?,
    })
}

pub fn run(args: EstimateArgs) -> Result<()> {
    let json = args.json;
    let mut printed = false;
    let result = run_estimate(args, &mut printed);
    // With --json, an error is a JSON object on stdout too (iperf3's
    // convention), unless the answer already printed carries it.
    if let (true, false, Err(e)) = (json, printed, &result) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", error_json(e));
    }
    result
}

/// `{"error": text, "kind": ...}`: what `--json` prints for an error.
fn error_json(e: &anyhow::Error) -> serde_json::Value {
    serde_json::json!({
        "error": format!("{e:#}"),
        "kind": tightlink_measure::kind_of(e).name(),
    })
}

fn run_estimate(args: EstimateArgs, printed: &mut bool) -> Result<()> {
    let options = args.options()?;
    let target = Target::parse(&args.target)?;
    if args.json_stream {
        return run_json_stream(&target, &options);
    }
    let show = std::io::stderr().is_terminal() && !args.json && !args.follow;
    let mut on_event = |e: Event| {
        if let Event::Update(u) = e {
            // Best effort: a closed stdout ends the run at the next write.
            let _ = writeln!(std::io::stdout().lock(), "{}", update_line(&u));
        }
        if let (true, Event::Progress(f)) = (show, e) {
            let n = (f * 30.0).round() as usize;
            eprint!(
                "\r[{}{}] {:3.0} %",
                "=".repeat(n),
                " ".repeat(30 - n.min(30)),
                f * 100.0
            );
        }
    };
    if args.both {
        let both = estimate_both(&target, &options, &mut on_event);
        if show {
            eprint!("\r{}\r", " ".repeat(40));
        }
        let (forward, reverse) = both?;
        let mut out = std::io::stdout().lock();
        if args.json {
            // A reverse run that failed is an error object beside the
            // forward answer, which is not lost.
            let reverse_json = match &reverse {
                Ok(r) => serde_json::to_value(r)?,
                Err(e) => error_json(e),
            };
            serde_json::to_writer(
                &mut out,
                &serde_json::json!({"forward": forward, "reverse": reverse_json}),
            )?;
            writeln!(out)?;
            *printed = true;
        } else {
            writeln!(out, "direction   forward (toward the far end)")?;
            render(&mut out, &forward)?;
            if let Ok(r) = &reverse {
                writeln!(out, "\ndirection   reverse (from the far end)")?;
                render(&mut out, r)?;
            }
        }
        return reverse.map(|_| ());
    }
    let report = estimate(&target, &options, &mut on_event);
    if show {
        eprint!("\r{}\r", " ".repeat(40));
    }
    let report = report?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        render(&mut out, &report)?;
    }
    Ok(())
}

/// One `--json-stream` line (`{"event": ..., "data": ...}`), flushed: a
/// reader sees it as it happens.
pub(crate) fn json_event(event: &str, data: serde_json::Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &serde_json::json!({"event": event, "data": data}))?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// One `--follow` line: path time, estimate +- sd, truth.
fn update_line(u: &tightlink_measure::BartUpdate) -> String {
    let bound = match u.bound {
        Bound::AtLeast => ">=",
        Bound::AtMost => "<=",
        _ => "",
    };
    let mut line = format!(
        "{:9.3} s  stream {:4}  {bound}{:.3} Gbit/s +- {:.3}",
        u.elapsed_ns as f64 / 1e9,
        u.streams,
        u.abw_bps / 1e9,
        u.sd_bps / 1e9
    );
    if let Some(t) = u.truth_bps {
        line += &format!("  truth {:.3}", t / 1e9);
    }
    line
}

/// What an `update` event says: the tracker after a stream.
fn update_event(u: &tightlink_measure::BartUpdate) -> serde_json::Value {
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

/// What a `stream` event says of one probe stream: its packets, what
/// came back, its average send rate (bytes after the first packet over
/// the send span) and, on the simulator, the truth over its span.
fn stream_event(s: &ProbeStream, truth: Option<GroundTruth>) -> serde_json::Value {
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

fn run_json_stream(target: &Target, options: &EstimateOptions) -> Result<()> {
    json_event(
        "start",
        serde_json::json!({
            "target": target.to_string(),
            "method": options.method.to_string(),
            "max_streams": options.max_streams,
        }),
    )?;
    let mut failed: Option<anyhow::Error> = None;
    let mut on_event = |e: Event| {
        let line = match (e, &failed) {
            (Event::Stream { stream, truth }, None) => {
                json_event("stream", stream_event(stream, truth))
            }
            (Event::Update(u), None) => json_event("update", update_event(&u)),
            _ => Ok(()),
        };
        if let Err(err) = line {
            failed = Some(err);
        }
    };
    let report = estimate(target, options, &mut on_event);
    if let Some(e) = failed {
        return Err(e.context("writing --json-stream"));
    }
    match report {
        Ok(r) => json_event("end", serde_json::to_value(&r)?),
        Err(e) => {
            json_event("error", serde_json::json!(format!("{e:#}")))?;
            Err(e)
        }
    }
}

/// `--method`'s help: every registered strategy.
fn method_help() -> String {
    format!("{} (queue-fit needs --capacity)", Method::names())
}

/// The human summary.
fn render(out: &mut impl Write, report: &EstimateReport) -> Result<()> {
    let g = |v: f64| v / 1e9;
    writeln!(out, "target      {}", report.target)?;
    let range = if report.estimate.high_bps.is_finite() {
        format!(
            "range {:.3}-{:.3}",
            g(report.estimate.low_bps),
            g(report.estimate.high_bps)
        )
    } else {
        "no upper limit measured".to_string()
    };
    let cap_reason = match report.capped {
        Some(Capped::HostLimited) => " (host-limited)",
        Some(Capped::FarEndOrMaxRate) => " (the most the far end or --max-rate allows)",
        None => "",
    };
    if report.estimate.bound == Bound::None {
        writeln!(
            out,
            "estimate    none: no answer ({}) by {}",
            report.estimate.stop, report.estimate.method
        )?;
    } else {
        writeln!(
            out,
            "estimate    {}{:.3} Gbit/s ({}, {range}) by {}{}",
            match report.estimate.bound {
                Bound::AtLeast => "at least ",
                Bound::AtMost => "at most ",
                _ => "",
            },
            g(report.estimate.available_bandwidth_bps),
            report.estimate.bound.as_str(),
            report.estimate.method,
            cap_reason
        )?;
    }
    if let Some(h) = &report.host {
        render_host(out, report, h)?;
    }
    for w in &report.warnings {
        writeln!(out, "warning     {w}")?;
    }
    match (report.estimate.truth_bps, report.error()) {
        (Some(t), Some(e)) => writeln!(
            out,
            "truth       {:.3} Gbit/s (simulator; error {:+.1} %)",
            g(t),
            e * 100.0
        )?,
        (Some(t), None) => writeln!(out, "truth       {:.3} Gbit/s (simulator)", g(t))?,
        _ => {}
    }
    let c = &report.estimate.cost;
    let resent = match c.resent_streams {
        0 => String::new(),
        n => format!(" (and {n} sent again: {})", resent_because(report)),
    };
    writeln!(
        out,
        "cost        {} streams{resent}, {:.1} MB of probes, {:.3} s of path time, {:.2} s in all ({})",
        c.streams,
        c.probe_bytes as f64 / 1e6,
        c.duration_s,
        c.wall_s,
        report.estimate.stop
    )?;
    Ok(())
}

/// What the host found: its pacing, the far end, its own interface as
/// the bottleneck, late streams, drops and its warnings.
fn render_host(out: &mut impl Write, report: &EstimateReport, h: &HostFindings) -> Result<()> {
    let g = |v: f64| v / 1e9;
    writeln!(
        out,
        "host        paces probes up to {}; this run probed up to {:.3} Gbit/s; rates counted on the {}",
        if h.host_limit_bps.is_finite() {
            format!("{:.3} Gbit/s", g(h.host_limit_bps))
        } else {
            "(the far end's host sends in reverse mode)".to_string()
        },
        g(report.probe_ceiling_bps.unwrap_or(f64::NAN)),
        h.rate_layer
    )?;
    if let Some(f) = &h.far_end {
        writeln!(out, "far end     {f}")?;
    }
    if let Some(own) = h.own_link_bps {
        // Only an answer near the own link's rate makes it the tight
        // link; a faster own link merely queued the fastest probes.
        let abw = report.estimate.available_bandwidth_bps;
        let tight = report.estimate.bound != Bound::None && abw > own * 0.9;
        writeln!(
            out,
            "bottleneck  the sender's own interface: its queue released {} {} at {:.3} Gbit/s (kernel transmit stamps), {}",
            h.queued_streams,
            if h.queued_streams == 1 { "stream" } else { "streams" },
            g(own),
            if tight {
                "so the tight link is the sender's own"
            } else {
                "faster than the path beyond it"
            }
        )?;
    }
    if h.late_streams > 0 {
        writeln!(
            out,
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
        writeln!(out, "dropped     {}", d.join(", "))?;
    }
    for w in &h.warnings {
        writeln!(out, "warning     {w}")?;
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
