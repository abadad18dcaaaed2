//! `tightlink estimate [TARGET]`: run a probing strategy against a path and
//! print the estimate (next to the simulator's truth for `sim:` targets).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use tightlink_core::units::{Rate, Size, Time};
use tightlink_core::AnalysisParams;
use tightlink_measure::text::{stream_event_json, update_event_json, update_line};
use tightlink_measure::{
    estimate, estimate_both, EstimateOptions, Event, Method, RealOptions, Target,
};

use crate::out::{self, json_event};

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
    pub max_bytes: Option<Size>,
    /// Track the available bandwidth with `bart` (implies --method bart)
    /// for --max-streams streams, one line per stream: path time, the
    /// tracker's estimate and its standard deviation (and the truth on
    /// `sim:`); `--json-stream` gives an `update` event per stream.
    #[arg(long, conflicts_with_all = ["both", "json"])]
    pub follow: bool,
    /// With --follow: start a stream every DURATION (e.g. 200ms, up to
    /// 5s) instead of back to back: the probe load of watching a path.
    #[arg(long, requires = "follow")]
    pub interval: Option<Time>,
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
    /// servers). `stamp:` reflectors: STAMP's authenticated mode (RFC
    /// 8762), the key in hex, at least 16 bytes.
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// The tight link's capacity when known (e.g. 10G): `queue-fit`
    /// needs it; `igi`, `ptr` and `spruce` use it instead of measuring
    /// one; the other methods refuse it (they would not read it).
    #[arg(long)]
    pub capacity: Option<Rate>,
    /// Never probe faster than this (e.g. 500M); on `sim:` a ceiling
    /// below the simulated sender's link.
    #[arg(long)]
    pub max_rate: Option<Rate>,
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
            max_bytes: self.max_bytes.map(|b| b.bytes),
            real: real_options(self.reverse, &self.key_file, self.max_rate, &self.backend)?,
            save_trace: self.save_trace.clone(),
            save_truth: self.save_truth.clone(),
            follow: self.follow,
            follow_interval_ns: self.interval.map_or(0, |i| i.ns),
            analysis: AnalysisParams {
                capacity_bps: self.capacity.map(|c| c.bps),
                ..AnalysisParams::default()
            },
        })
    }
}

/// The flags every command toward a real far end shares.
pub fn real_options(
    reverse: bool,
    key_file: &Option<PathBuf>,
    max_rate: Option<Rate>,
    backend: &str,
) -> Result<RealOptions> {
    Ok(RealOptions {
        reverse,
        key_file: key_file.clone(),
        max_rate_bps: max_rate.map(|r| r.bps),
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
            out::progress_bar(f);
        }
    };
    if args.both {
        let both = estimate_both(&target, &options, &mut on_event);
        if show {
            out::clear_progress();
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
            write!(out, "{forward}")?;
            if let Ok(r) = &reverse {
                writeln!(out, "\ndirection   reverse (from the far end)")?;
                write!(out, "{r}")?;
            }
        }
        return reverse.map(|_| ());
    }
    let report = estimate(&target, &options, &mut on_event);
    if show {
        out::clear_progress();
    }
    out::report(args.json, &report?)
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
                json_event("stream", stream_event_json(stream, truth))
            }
            (Event::Update(u), None) => json_event("update", update_event_json(&u)),
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
    out::json_end(report)
}

/// `--method`'s help: every registered strategy.
fn method_help() -> String {
    format!("{} (queue-fit needs --capacity)", Method::names())
}
