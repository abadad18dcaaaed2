//! `tightlink estimate [TARGET]`: run a probing strategy against a path and
//! print the estimate (next to the simulator's truth for `sim:` targets).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use tightlink_core::AnalysisParams;
use tightlink_probe::strategy;
use tightlink_probe::{Budget, Channel, Recorder, Report, SimChannel, TraceChannel};

use crate::save;

#[derive(Args)]
pub struct EstimateArgs {
    /// `sim:` with the path described (see README), or nothing for the
    /// embedded default: 10 Gbit/s, 2.5 Gbit/s bursty cross traffic,
    /// 125 us receiver coalescence. Real hosts come with `tightlink server`.
    #[arg(default_value = "sim:")]
    pub target: String,
    /// multirate, multirate-single-pass, multirate-prcmt-dp1,
    /// multirate-prcmt-dp2, prcmt, pathload, imr-avg, imr-wavelet.
    #[arg(long, short, default_value = "multirate", env = "TIGHTLINK_METHOD")]
    pub method: String,
    /// One JSON object on stdout instead of the human summary.
    #[arg(long)]
    pub json: bool,
    /// Most probe streams to send.
    #[arg(long, default_value_t = 60)]
    pub max_streams: usize,
    /// Write every stream of the run as a probe trace (format v1; gzip when
    /// the name ends in `.gz`); `tightlink estimate trace:FILE` replays it.
    #[arg(long)]
    pub save_trace: Option<PathBuf>,
    /// With --save-trace on a simulated path: the per-stream ground truth.
    #[arg(long, requires = "save_trace")]
    pub save_truth: Option<PathBuf>,
}

/// The `--json` object. Fields are only ever added, never renamed.
#[derive(Serialize)]
struct JsonReport<'a> {
    target: &'a str,
    method: &'a str,
    available_bandwidth_bps: f64,
    bound: &'static str,
    low_bps: f64,
    high_bps: f64,
    probe_bytes: u64,
    probe_packets: u64,
    streams: usize,
    duration_s: f64,
    truth_bps: Option<f64>,
    stop: &'static str,
    rate_layer: &'static str,
}

/// The channel a target names: `sim:...` or `trace:FILE`.
fn open_channel(target: &str) -> Result<Box<dyn Channel>> {
    if let Some(file) = target.strip_prefix("trace:") {
        let trace = tightlink_trace::read_path(Path::new(file))?;
        let max_rate_bps = match trace.meta("max_rate_bps") {
            Some(v) => v.parse::<f64>().ok().filter(|r| *r > 0.0).with_context(|| {
                format!("{file}: metadata max_rate_bps={v} is not a positive rate in bit/s")
            })?,
            None => bail!(
                "{file}: replay needs the sender's link rate (metadata `# max_rate_bps=...`, written by --save-trace)"
            ),
        };
        return Ok(Box::new(TraceChannel::new(trace.streams, max_rate_bps)));
    }
    if !target.starts_with("sim:") && target != "sim" {
        bail!(
            "target '{target}': only simulated paths (sim:...) and replays (trace:FILE) can be probed yet; real hosts need `tightlink server`, which is not built yet"
        );
    }
    let spec = tightlink_sim::parse_sim_target(target)?;
    Ok(Box::new(SimChannel::new(spec, target.to_string())))
}

pub fn run(args: EstimateArgs) -> Result<()> {
    let mut channel = Recorder::new(open_channel(&args.target)?);
    let analysis = AnalysisParams::default();
    let budget = Budget {
        max_streams: args.max_streams.max(1),
        ..Budget::default()
    };
    let show = std::io::stderr().is_terminal() && !args.json;
    let mut progress = |f: f64| {
        if show {
            let n = (f * 30.0).round() as usize;
            eprint!(
                "\r[{}{}] {:3.0} %",
                "=".repeat(n),
                " ".repeat(30 - n.min(30)),
                f * 100.0
            );
        }
    };
    let report: Report =
        match strategy::run_named(&args.method, &mut channel, &analysis, budget, &mut progress) {
            Some(r) => r?,
            None => bail!("--method {}: choose {}", args.method, strategy::NAMES),
        };
    if show {
        eprint!("\r{}\r", " ".repeat(40));
    }
    if let Some(path) = &args.save_trace {
        let metadata = vec![
            ("source".to_string(), "tightlink estimate".to_string()),
            ("path".to_string(), args.target.clone()),
            ("method".to_string(), args.method.clone()),
            (
                "max_rate_bps".to_string(),
                format!("{:.0}", channel.max_rate_bps()),
            ),
        ];
        save::write_trace(path, metadata, &channel.streams)?;
        if let Some(t) = &args.save_truth {
            save::write_truth(t, &channel.streams, &channel.truths)?;
        }
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        let j = JsonReport {
            target: &args.target,
            method: report.method,
            available_bandwidth_bps: report.available_bandwidth_bps,
            bound: report.bound.as_str(),
            low_bps: report.low_bps,
            high_bps: report.high_bps,
            probe_bytes: report.probe_bytes,
            probe_packets: report.probe_packets,
            streams: report.streams,
            duration_s: report.duration_s,
            truth_bps: report.truth_bps.filter(|t| t.is_finite()),
            stop: report.stop,
            rate_layer: "probe size_bytes (the simulator's packet size)",
        };
        serde_json::to_writer(&mut out, &j)?;
        writeln!(out)?;
    } else {
        let g = |v: f64| v / 1e9;
        writeln!(out, "target      {}", args.target)?;
        writeln!(
            out,
            "estimate    {:.3} Gbit/s ({}, range {:.3}-{:.3}) by {}",
            g(report.available_bandwidth_bps),
            report.bound.as_str(),
            g(report.low_bps),
            g(report.high_bps),
            report.method
        )?;
        if let Some(t) = report.truth_bps {
            writeln!(
                out,
                "truth       {:.3} Gbit/s (simulator; error {:+.1} %)",
                g(t),
                (report.available_bandwidth_bps / t - 1.0) * 100.0
            )?;
        }
        writeln!(
            out,
            "cost        {} streams, {:.1} MB of probes, {:.3} s of path time ({})",
            report.streams,
            report.probe_bytes as f64 / 1e6,
            report.duration_s,
            report.stop
        )?;
    }
    Ok(())
}
