//! `tightlink capacity [TARGET]`: the narrow link's capacity by Pathrate
//! and CapProbe, side by side (each with its own probes), next to the
//! simulator's truth for `sim:` targets.

use anyhow::{bail, Result};
use clap::Args;
use serde::Serialize;
use tightlink_core::channel::{Channel, Recorder};
use tightlink_probe::capacity::{
    run_capacity, shaper_note, CapacityParams, CapacityReport, METHODS,
};

use crate::estimate::{open_channel, EstimateArgs};

/// The default target: the path, a 10 Gbit/s narrow link behind a
/// 40 Gbit/s first hop with 30 % bursty cross traffic, no receiver
/// coalescence (with it, pair methods fail: see the README).
pub const DEFAULT_TARGET: &str = "sim:hops=40G+10G,cross=none+bursty:3G,coalescence=off";

#[derive(Args)]
pub struct CapacityArgs {
    /// As for `estimate`: `HOST[:PORT]` of a `tightlink server`, or `sim:`
    /// with a path description.
    #[arg(default_value = DEFAULT_TARGET)]
    pub target: String,
    /// Comma-separated: pathrate, capprobe.
    #[arg(long, short, default_value = "pathrate,capprobe")]
    pub method: String,
    /// One JSON object per method, one per line.
    #[arg(long)]
    pub json: bool,
    /// Real servers: the download direction.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Real servers: pre-shared key file.
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// Real servers: never send a stream faster on average than this.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Real servers: udp, packet or xdp (as for `estimate`).
    #[arg(long, default_value = "udp")]
    pub backend: String,
    /// Write every stream of every method as one probe trace (format v1),
    /// the methods' streams one after the other (metadata says how many).
    #[arg(long)]
    pub save_trace: Option<std::path::PathBuf>,
}

/// The `--json` object. Fields are only ever added, never renamed.
#[derive(Serialize)]
struct JsonCapacity<'a> {
    target: &'a str,
    method: &'a str,
    capacity_bps: Option<f64>,
    /// `exact`, `at_least` (a lower bound) or `none`.
    bound: &'a str,
    low_bps: f64,
    high_bps: f64,
    confidence: f64,
    pairs_sent: usize,
    pairs_used: usize,
    trains: usize,
    adr_bps: Option<f64>,
    /// A token-bucket shaper seen in the trains: its rate (the answer)
    /// and the bytes its bucket let through at the line rate.
    shaper_rate_bps: Option<f64>,
    shaper_bucket_bytes: Option<f64>,
    probe_bytes: u64,
    probe_packets: u64,
    streams: usize,
    duration_s: f64,
    truth_bps: Option<f64>,
    stop: &'a str,
    rate_layer: &'a str,
    warnings: &'a [String],
}

fn gbps(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.3} Gbit/s", v / 1e9)
    } else {
        format!("{:.1} Mbit/s", v / 1e6)
    }
}

pub fn run(a: CapacityArgs) -> Result<()> {
    let methods: Vec<&str> = a.method.split(',').map(str::trim).collect();
    for m in &methods {
        if !METHODS.contains(m) {
            bail!("--method {m}: not a capacity method (pathrate, capprobe)");
        }
    }
    let est = EstimateArgs {
        target: a.target.clone(),
        method: String::new(),
        json: a.json,
        max_streams: 0,
        save_trace: None,
        save_truth: None,
        reverse: a.reverse,
        key_file: a.key_file.clone(),
        max_rate: a.max_rate.clone(),
        backend: a.backend.clone(),
    };
    let mut reports: Vec<(CapacityReport, &'static str)> = Vec::new();
    let mut streams = Vec::new();
    let mut per_method = Vec::new();
    for m in &methods {
        // A fresh channel per method: each pays for its own probes.
        let mut ch = Recorder::new(open_channel(&a.target, &est)?);
        let mut params = CapacityParams::default();
        if let Some(s) = ch.info().probe_size_bytes {
            params.size_bytes = s;
        }
        let layer = ch
            .side_report()
            .host
            .map_or("simulated packet", |h| h.rate_layer);
        let r = run_capacity(m, &mut ch, params).expect("method checked above")?;
        ch.close()?;
        per_method.push(ch.streams.len().to_string());
        streams.append(&mut ch.streams);
        reports.push((r, layer));
    }
    if let Some(path) = &a.save_trace {
        for (i, s) in streams.iter_mut().enumerate() {
            s.id = i as u64;
        }
        let meta = vec![
            ("tool".to_string(), "tightlink capacity".to_string()),
            ("target".to_string(), a.target.clone()),
            ("methods".to_string(), methods.join(",")),
            ("streams_per_method".to_string(), per_method.join(",")),
        ];
        crate::save::write_trace(path, meta, &streams)?;
    }
    if a.json {
        for (r, layer) in &reports {
            let j = JsonCapacity {
                target: &a.target,
                method: r.method,
                capacity_bps: r.capacity_bps,
                bound: r.bound,
                low_bps: r.low_bps,
                high_bps: r.high_bps,
                confidence: r.confidence,
                pairs_sent: r.pairs_sent,
                pairs_used: r.pairs_used,
                trains: r.trains,
                adr_bps: r.adr_bps,
                shaper_rate_bps: r.shaper.map(|s| s.rate_bps),
                shaper_bucket_bytes: r.shaper.map(|s| s.bucket_bytes),
                probe_bytes: r.probe_bytes,
                probe_packets: r.probe_packets,
                streams: r.streams,
                duration_s: r.duration_s,
                truth_bps: r.truth_bps,
                stop: r.stop,
                rate_layer: layer,
                warnings: &r.warnings,
            };
            println!("{}", serde_json::to_string(&j)?);
        }
        return Ok(());
    }
    println!("target      {}", a.target);
    if let Some(t) = reports.iter().find_map(|r| r.0.truth_bps) {
        println!("truth       {} (narrow link, simulator)", gbps(t));
    }
    println!(
        "{:<10} {:>16} {:>30} {:>6} {:>12} {:>10} {:>9} {:>10}",
        "method", "capacity", "range", "conf", "pairs used", "probe MB", "time", "stop"
    );
    for (r, _) in &reports {
        let cap = match (r.capacity_bps, r.bound) {
            (Some(c), "at_least") => format!(">= {}", gbps(c)),
            (Some(c), _) => gbps(c),
            (None, _) => "none".to_string(),
        };
        let err = match (r.capacity_bps, r.truth_bps) {
            (Some(c), Some(t)) => format!(" ({:+.1} %)", (c / t - 1.0) * 100.0),
            _ => String::new(),
        };
        println!(
            "{:<10} {:>16} {:>30} {:>6.2} {:>12} {:>10.2} {:>8.3}s {:>10}{}",
            r.method,
            cap,
            if r.capacity_bps.is_some() && r.high_bps.is_finite() {
                format!("{} - {}", gbps(r.low_bps), gbps(r.high_bps))
            } else {
                "-".to_string()
            },
            r.confidence,
            format!("{}/{}", r.pairs_used, r.pairs_sent),
            r.probe_bytes as f64 / 1e6,
            r.duration_s,
            r.stop,
            err
        );
        if let Some(adr) = r.adr_bps {
            println!("{:<10} ADR of {} trains: {}", "", r.trains, gbps(adr));
        }
        if let Some(s) = &r.shaper {
            println!("{:<10} {}", "", shaper_note(s));
        }
        for w in &r.warnings {
            println!("{:<10} warning: {w}", "");
        }
    }
    Ok(())
}
