//! `tightlink estimate [TARGET]`: run a probing strategy against a path and
//! print the estimate (next to the simulator's truth for `sim:` targets).

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;
use tightlink_core::channel::{Channel, Recorder, TraceChannel};
use tightlink_core::{AnalysisParams, Bound};
use tightlink_net::backend::Backend;
use tightlink_net::{ClientOptions, TwampChannel, UdpChannel};
use tightlink_probe::strategy;
use tightlink_probe::{Budget, Report};
use tightlink_sim::SimChannel;
use tightlink_wire::control::Direction;

use crate::save;

#[derive(Args)]
pub struct EstimateArgs {
    /// `HOST[:PORT]` of a `tightlink server` (port 7447 by default);
    /// `twamp:HOST[:PORT]` of a TWAMP-light reflector (port 862 by
    /// default; its receive stamps measure the path toward it);
    /// `sim:` with the path described (see README), or nothing for the
    /// embedded default: 10 Gbit/s, 2.5 Gbit/s bursty cross traffic,
    /// 125 us receiver coalescence; `trace:FILE` replays a saved run.
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
    /// Real servers: measure the download direction (the server sends,
    /// this host timestamps), like iperf3 -R.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Real servers: pre-shared key file (higher limits; required by some
    /// servers).
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Real servers: never probe faster than this (e.g. 500M).
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Real servers: how this host sends (forward) or receives (-R)
    /// probes: udp (a UDP socket), packet (AF_PACKET; TPACKET_V3 ring to
    /// receive) or xdp (AF_XDP copy mode, send only). packet and xdp need
    /// root (CAP_NET_RAW) and IPv4; `tightlink doctor` compares them.
    #[arg(long, default_value = "udp")]
    pub backend: String,
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
    /// Real targets: what this host can probe at; `null` elsewhere.
    host_limit_bps: Option<f64>,
    /// The estimate was capped at the host's limit ("at least").
    host_limited: bool,
    /// Real targets: the fastest rate this run could probe at (host,
    /// server limit, --max-rate); an answer there is "at least".
    probe_ceiling_bps: Option<f64>,
    /// Real targets: the sender's own interface queued probes at this
    /// rate (its own link is the tight link); `null` if it never did.
    sender_bottleneck_bps: Option<f64>,
    /// Wall-clock time of the whole measurement, control included.
    wall_s: f64,
    /// Packets the timestamping end dropped, by reason.
    drops: std::collections::BTreeMap<&'static str, u64>,
    warnings: Vec<String>,
    /// Real targets: [first probe's scheduled send, last probe's kernel
    /// receive stamp], Unix ns (what `tightlink lab` takes the truth over).
    probe_window_unix_ns: Option<[i64; 2]>,
}

/// The channel a target names: `sim:...`, `trace:FILE`, `twamp:HOST` (a
/// TWAMP-light reflector) or a server.
pub fn open_channel(target: &str, args: &EstimateArgs) -> Result<Box<dyn Channel>> {
    let backend: Backend = args
        .backend
        .parse()
        .map_err(|e| anyhow::anyhow!("--backend: {e}"))?;
    let real = !target.starts_with("sim:") && target != "sim" && !target.starts_with("trace:");
    if backend != Backend::Udp && !real {
        bail!("--backend {backend} applies to real servers only; '{target}' sends no packets");
    }
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
    if real {
        let mut opts = ClientOptions {
            backend,
            direction: if args.reverse {
                Direction::Reverse
            } else {
                Direction::Forward
            },
            ..ClientOptions::default()
        };
        if let Some(f) = &args.key_file {
            opts.key = Some(
                tightlink_net::auth::read_key_file(f)
                    .with_context(|| format!("--key-file {}", f.display()))?,
            );
        }
        if let Some(r) = &args.max_rate {
            opts.max_rate_bps = Some(
                tightlink_core::units::parse_rate(r).with_context(|| format!("--max-rate {r}"))?,
            );
        }
        if let Some(host) = target.strip_prefix("twamp:") {
            let ch =
                TwampChannel::connect(host, &opts).with_context(|| format!("target '{target}'"))?;
            return Ok(Box::new(ch));
        }
        let ch =
            UdpChannel::connect(target, &opts).with_context(|| format!("target '{target}'"))?;
        return Ok(Box::new(ch));
    }
    let spec = tightlink_sim::parse_sim_target(target)?;
    Ok(Box::new(SimChannel::new(spec, target.to_string())))
}

/// First scheduled send to last receive stamp over all streams.
fn probe_window(streams: &[tightlink_core::ProbeStream]) -> Option<[i64; 2]> {
    let first = streams
        .iter()
        .filter_map(|s| s.packets.first().map(|p| p.send_ns))
        .min()?;
    let last = streams
        .iter()
        .flat_map(|s| s.packets.iter().filter_map(|p| p.recv_ns))
        .max()?;
    (last > first).then_some([first, last])
}

pub fn run(args: EstimateArgs) -> Result<()> {
    let started = std::time::Instant::now();
    let mut channel = Recorder::new(open_channel(&args.target, &args)?);
    let analysis = AnalysisParams::default();
    let mut budget = Budget {
        max_streams: args.max_streams.max(1),
        ..Budget::default()
    };
    if let Some(limit) = channel.info().byte_limit {
        budget.max_bytes = budget.max_bytes.min(limit);
    }
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
    channel.close().context("closing the session")?;
    let host = channel.side_report().host;
    let wall_s = started.elapsed().as_secs_f64();
    let mut report = report;
    // Never a number the sender did not measure: above the fastest rate
    // it could probe at (its host's pacing, the server's limit or
    // --max-rate), the answer is "at least" that rate.
    let ceiling = channel.info().max_rate_bps;
    let host_limit = host
        .as_ref()
        .map(|h| h.host_limit_bps)
        .filter(|l| l.is_finite());
    let capped = host.is_some()
        && (report.available_bandwidth_bps >= 0.95 * ceiling
            || (report.bound == Bound::AtLeast
                && report.available_bandwidth_bps >= 0.85 * ceiling));
    if capped {
        report.available_bandwidth_bps = report.available_bandwidth_bps.min(ceiling);
        report.bound = Bound::AtLeast;
        report.low_bps = report.low_bps.min(report.available_bandwidth_bps);
        report.high_bps = f64::INFINITY;
    }
    let host_limited = capped && host_limit.is_some_and(|l| l <= ceiling * 1.001);
    let cap_reason = if host_limited {
        " (host-limited)"
    } else if capped {
        " (the most the far end or --max-rate allows)"
    } else {
        ""
    };
    if let Some(path) = &args.save_trace {
        let metadata = vec![
            ("source".to_string(), "tightlink estimate".to_string()),
            ("path".to_string(), args.target.clone()),
            ("method".to_string(), args.method.clone()),
            (
                "max_rate_bps".to_string(),
                format!("{:.0}", channel.info().max_rate_bps),
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
            high_bps: if report.high_bps.is_finite() {
                report.high_bps
            } else {
                report.available_bandwidth_bps
            },
            probe_bytes: report.probe_bytes,
            probe_packets: report.probe_packets,
            streams: report.streams,
            duration_s: report.duration_s,
            truth_bps: report.truth_bps.filter(|t| t.is_finite()),
            stop: report.stop,
            rate_layer: host
                .as_ref()
                .map_or("probe size_bytes (the simulator's packet size)", |h| {
                    h.rate_layer
                }),
            host_limit_bps: host_limit,
            host_limited,
            probe_ceiling_bps: host.as_ref().map(|_| ceiling),
            sender_bottleneck_bps: host.as_ref().and_then(|h| h.own_link_bps),
            wall_s,
            drops: host
                .as_ref()
                .map(|h| h.drops.iter().copied().collect())
                .unwrap_or_default(),
            warnings: host
                .as_ref()
                .map(|h| h.warnings.clone())
                .unwrap_or_default(),
            probe_window_unix_ns: host.as_ref().and_then(|_| probe_window(&channel.streams)),
        };
        serde_json::to_writer(&mut out, &j)?;
        writeln!(out)?;
    } else {
        let g = |v: f64| v / 1e9;
        writeln!(out, "target      {}", args.target)?;
        let range = if report.high_bps.is_finite() {
            format!("range {:.3}-{:.3}", g(report.low_bps), g(report.high_bps))
        } else {
            "no upper limit measured".to_string()
        };
        writeln!(
            out,
            "estimate    {}{:.3} Gbit/s ({}, {range}) by {}{}",
            if report.bound == Bound::AtLeast {
                "at least "
            } else if report.bound == Bound::AtMost {
                "at most "
            } else {
                ""
            },
            g(report.available_bandwidth_bps),
            report.bound.as_str(),
            report.method,
            cap_reason
        )?;
        if let Some(h) = &host {
            writeln!(
                out,
                "host        paces probes up to {}; this run probed up to {:.3} Gbit/s; rates counted on the {}",
                if h.host_limit_bps.is_finite() {
                    format!("{:.3} Gbit/s", g(h.host_limit_bps))
                } else {
                    "(the server's host sends in reverse mode)".to_string()
                },
                g(ceiling),
                h.rate_layer
            )?;
            if let Some(own) = h.own_link_bps {
                writeln!(
                    out,
                    "bottleneck  the sender's own interface: its queue released {} streams at {:.3} Gbit/s (kernel transmit stamps), so the tight link is the sender's own",
                    h.queued_streams,
                    g(own)
                )?;
            }
            if h.late_streams > 0 {
                writeln!(
                    out,
                    "host        fell behind its schedule in {} streams",
                    h.late_streams
                )?;
            }
            if !h.drops.is_empty() {
                let d: Vec<String> = h.drops.iter().map(|(n, c)| format!("{n}={c}")).collect();
                writeln!(out, "dropped     {}", d.join(", "))?;
            }
            for w in &h.warnings {
                writeln!(out, "warning     {w}")?;
            }
        }
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
            "cost        {} streams, {:.1} MB of probes, {:.3} s of path time, {:.2} s in all ({})",
            report.streams,
            report.probe_bytes as f64 / 1e6,
            report.duration_s,
            wall_s,
            report.stop
        )?;
    }
    Ok(())
}
