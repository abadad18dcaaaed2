//! `tightlink cross`: cross traffic on real sockets with the simulator's
//! models, or (`--sink`) the receiver that counts it. Thin: flags to
//! [`tightlink_lab::cross`].

use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

use anyhow::{Context, Result};
use clap::Args;
use tightlink_core::units::Time;

use crate::flags::{secs, within};

#[derive(Args)]
pub struct CrossArgs {
    /// `ADDR:PORT` to send to (UDP, and TCP for --tcp flows).
    #[arg(required_unless_present = "sink")]
    pub to: Option<SocketAddr>,
    /// Traffic model and mean rate at the Ethernet-frame layer, in the
    /// simulator's syntax: `cbr:60M`, `poisson:50M`, `bursty:80M`,
    /// `smoothed:80M:sources=20`, or `none` (TCP flows only).
    #[arg(long, default_value = "cbr:10M")]
    pub traffic: String,
    /// How long to send (or listen), e.g. 10s or 1500ms; at most 1 hour.
    #[arg(long, default_value = "10s", value_parser = within(Time { ns: 1 }, secs(3600), "cross traffic needs some time, at most 1 hour"))]
    pub duration: Time,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// TCP bulk flows beside the UDP traffic.
    #[arg(long, default_value_t = 0)]
    pub tcp: usize,
    /// Congestion control of the TCP flows (e.g. cubic, reno, bbr);
    /// default: the system's.
    #[arg(long)]
    pub tcp_congestion: Option<String>,
    /// Count what arrives on this UDP and TCP `ADDR:PORT` instead of sending.
    #[arg(long, conflicts_with = "to")]
    pub sink: Option<SocketAddr>,
}

pub fn run(args: CrossArgs) -> Result<()> {
    let duration = args.duration.duration();
    let stop = AtomicBool::new(false);
    if let Some(bind) = args.sink {
        let r = tightlink_lab::cross::sink(bind, duration, &stop)
            .with_context(|| format!("sink on {bind}"))?;
        println!("{}", serde_json::to_string(&r)?);
        return Ok(());
    }
    let to = args.to.expect("clap: required unless --sink");
    let spec = tightlink_sim::spec::parse_cross(&args.traffic)
        .with_context(|| format!("--traffic {}", args.traffic))?;
    if spec.as_ref().is_some_and(|s| s.rate_bps > 10e9) {
        tightlink_measure::bad_input!("--traffic {}: at most 10 Gbit/s", args.traffic);
    }
    if tightlink_lab::cross::sends_nothing(spec.as_ref(), args.tcp) {
        tightlink_measure::bad_input!(
            "--traffic {}: sends nothing; give a positive rate (or a step to one) or --tcp flows",
            args.traffic
        );
    }
    let r = tightlink_lab::cross::send(
        &tightlink_lab::cross::CrossOptions {
            to,
            spec,
            duration,
            seed: args.seed,
            tcp_flows: args.tcp,
            tcp_congestion: args.tcp_congestion,
        },
        &stop,
    )
    .with_context(|| format!("cross traffic to {to}"))?;
    println!("{}", serde_json::to_string(&r)?);
    Ok(())
}
