//! `tightlink capacity [TARGET]`: the narrow link's capacity by Pathrate
//! and CapProbe, side by side (each with its own probes), next to the
//! simulator's truth for `sim:` targets.

use anyhow::Result;
use clap::Args;
use tightlink_core::units::format_rate;
use tightlink_core::Bound;
use tightlink_measure::capacity::DEFAULT_TARGET;
use tightlink_measure::{capacity, CapacityMethod, CapacityOptions, Target};
use tightlink_probe::capacity::shaper_note;

use crate::estimate::real_options;

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
    /// Never send a stream faster on average than this (on `sim:` too).
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

pub fn run(a: CapacityArgs) -> Result<()> {
    let methods = a
        .method
        .split(',')
        .map(|m| m.trim().parse::<CapacityMethod>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--method {e}"))?;
    let options = CapacityOptions {
        methods,
        real: real_options(a.reverse, &a.key_file, &a.max_rate, &a.backend)?,
        save_trace: a.save_trace.clone(),
    };
    let target = Target::parse(&a.target)?;
    let results = capacity(&target, &options, &mut |_| {})?;
    if a.json {
        for r in &results {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    let reports: Vec<_> = results.iter().map(|r| (&r.report, r.rate_layer)).collect();
    println!("target      {}", a.target);
    if let Some(t) = reports.iter().find_map(|r| r.0.truth_bps) {
        println!("truth       {} (narrow link, simulator)", format_rate(t));
    }
    println!(
        "{:<10} {:>16} {:>30} {:>6} {:>12} {:>10} {:>9} {:>10}",
        "method", "capacity", "range", "conf", "pairs used", "probe MB", "time", "stop"
    );
    for (r, _) in &reports {
        let cap = match (r.capacity_bps, r.bound) {
            (Some(c), Bound::AtLeast) => format!(">= {}", format_rate(c)),
            (Some(c), _) => format_rate(c),
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
        );
        if let Some(adr) = r.adr_bps {
            println!(
                "{:<10} ADR of {} trains: {}",
                "",
                r.trains,
                format_rate(adr)
            );
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
