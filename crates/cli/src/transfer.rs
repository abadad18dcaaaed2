//! `tightlink transfer [TARGET]`: bulk data rate-controlled by the
//! estimates (Rapid, after the BASS paper's section VII), to a
//! `tightlink server` or through the simulated path.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use tightlink_core::units::{Rate, Size, Time};
use tightlink_measure::transfer::{
    transfer, Controller, TransferEvent, TransferInterval, TransferOptions,
};
use tightlink_measure::Target;

use crate::estimate::real_options;
use crate::flags::{bytes, within};
use crate::out::{self, json_event};

#[derive(Args)]
pub struct TransferArgs {
    /// `HOST[:PORT]` of a `tightlink server`; `sim:` with the path
    /// described, or nothing for the embedded simulated path.
    #[arg(default_value = "sim:")]
    pub target: String,
    /// rapid (BASS multi-pass smoothing before the multi-rate estimate),
    /// rapid-raw (the estimate on unsmoothed gaps), bbe (TCP Westwood
    /// BBE's window: the cut at a loss set by the congestion level; this
    /// end sends, so not with -R), or on the simulated path newreno.
    #[arg(long, default_value = "rapid")]
    pub cc: String,
    /// Bytes to send (e.g. 200MB, 1GB); without it, for --time.
    #[arg(long, value_parser = within(bytes(1), bytes(u64::MAX), "a transfer needs at least one byte"))]
    pub bytes: Option<Size>,
    /// How long to send (e.g. 10s); the default when --bytes is not given.
    #[arg(long, conflicts_with = "bytes", value_parser = within(Time { ns: 1 }, Time { ns: i64::MAX }, "a transfer needs some time"))]
    pub time: Option<Time>,
    /// Receive instead (the server sends).
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Seconds between progress lines.
    #[arg(long, default_value = "0.5")]
    pub interval: String,
    /// One JSON object on stdout at the end instead of the summary.
    #[arg(long)]
    pub json: bool,
    /// One JSON object per line as the run goes: `start`, an `interval`
    /// per --interval, an `update` per stream read, then `end` with the
    /// report `--json` prints, or `error`.
    #[arg(long, conflicts_with = "json")]
    pub json_stream: bool,
    /// Real servers: pre-shared key file (the server's keyed limits).
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Never send faster than this (e.g. 500M).
    #[arg(long)]
    pub max_rate: Option<Rate>,
    /// The simulated path's round-trip time.
    #[arg(long, default_value = "30ms", value_parser = within(Time { ns: 1 }, Time { ns: i64::MAX }, "the simulated path's round trip must be above zero"))]
    pub rtt: Time,
    /// The simulated flow's packets, bytes on the wire (576-9000; 1514
    /// to compare with a kernel TCP flow on a 1500-byte MTU).
    #[arg(long, default_value_t = tightlink_measure::transfer::SIM_PACKET_BYTES)]
    pub packet_bytes: u32,
    /// Seed of the data bytes (and of nothing else).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run on this CPU only: a sender that spins beside other busy work
    /// (a namespace lab's routers, say) paces unevenly and reads the
    /// path high; pin it to a quiet CPU.
    #[arg(long)]
    pub cpu: Option<usize>,
}

impl TransferArgs {
    fn options(&self) -> Result<TransferOptions> {
        let cc: Controller = match self.cc.parse() {
            Ok(c) => c,
            Err(e) => tightlink_measure::bad_input!("--cc {e}"),
        };
        let bytes = self.bytes.map(|b| b.bytes);
        let time_ns = self.time.map(|t| t.ns);
        let interval_s: f64 = self
            .interval
            .parse()
            .ok()
            .filter(|v: &f64| *v >= 0.01 && v.is_finite())
            .with_context(|| {
                format!(
                    "--interval {}: expected seconds, at least 0.01",
                    self.interval
                )
            })?;
        Ok(TransferOptions {
            cc,
            bytes,
            duration_ns: match (bytes, time_ns) {
                (None, None) => Some(10_000_000_000),
                (_, t) => t,
            },
            interval_ns: (interval_s * 1e9) as i64,
            real: real_options(self.reverse, &self.key_file, self.max_rate, "udp")?,
            sim_rtt_ns: self.rtt.ns,
            sim_packet_bytes: self.packet_bytes,
            seed: self.seed,
        })
    }
}

pub fn run(args: TransferArgs) -> Result<()> {
    let options = args.options()?;
    let target = Target::parse(&args.target)?;
    if let Some(cpu) = args.cpu {
        crate::hops::pin_to_cpu(cpu)?;
    }
    if args.json_stream {
        json_event(
            "start",
            serde_json::json!({"target": args.target, "cc": options.cc.name()}),
        )?;
        let r = transfer(&target, &options, &mut |e| {
            let _ = match e {
                TransferEvent::Interval(iv) => json_event("interval", serde_json::json!(iv)),
                TransferEvent::Update(u) => json_event(
                    "update",
                    serde_json::json!({"stream": u.stream, "sent_bps": u.sent_bps,
                        "abw_bps": u.abw_bps, "bound": format!("{:?}", u.bound).to_lowercase(),
                        "lost": u.lost, "rate_bps": u.rate_bps}),
                ),
            };
        });
        return out::json_end(r);
    }
    let bar = std::io::stderr().is_terminal() && !args.json;
    let total = options.bytes;
    let duration = options.duration_ns;
    let mut done_bytes = 0.0;
    let mut out = std::io::stdout().lock();
    if !args.json {
        writeln!(out, "{}", TransferInterval::TEXT_HEADER)?;
    }
    let r = transfer(&target, &options, &mut |e| {
        let TransferEvent::Interval(iv) = e else {
            return;
        };
        done_bytes += iv.goodput_bps * (iv.end_s - iv.start_s) / 8.0;
        if args.json {
            return;
        }
        if bar {
            out::clear_progress();
        }
        let _ = writeln!(out, "{iv}");
        if bar {
            out::progress_bar(match (total, duration) {
                (Some(t), _) => done_bytes / t as f64,
                (None, Some(d)) => iv.end_s * 1e9 / d as f64,
                _ => 0.0,
            });
        }
    });
    if bar {
        out::clear_progress();
    }
    let r = r?;
    if args.json {
        serde_json::to_writer(&mut out, &r)?;
        writeln!(out)?;
    } else {
        write!(out, "\n{r}")?;
    }
    Ok(())
}
