//! `tightlink reflector`: a TWAMP-light reflector. Thin: flags to a
//! [`tightlink_net::ReflectorConfig`], then reflect until killed.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::Args;
use tightlink_core::units::{Rate, Size};
use tightlink_net::reflector::TWAMP_PORT;

use crate::flags::{bytes, count_within, rate_above_zero, within};
use tightlink_net::{Reflector, ReflectorConfig};

#[derive(Args)]
pub struct ReflectorArgs {
    /// Address to listen on.
    #[arg(long, default_value = "0.0.0.0")]
    pub bind: IpAddr,
    /// UDP port of the test packets (862 needs root or
    /// CAP_NET_BIND_SERVICE).
    #[arg(long, short, default_value_t = TWAMP_PORT)]
    pub port: u16,
    /// Reply rate per sender (frame layer, e.g. 1G) ...
    #[arg(long, default_value = "1G", value_parser = rate_above_zero(ZERO))]
    pub peer_rate: Rate,
    /// ... and the burst a sender may reply-to at once (e.g. 16MB).
    #[arg(long, default_value = "16MB", value_parser = within(bytes(1), bytes(u64::MAX), ZERO))]
    pub peer_burst: Size,
    /// Reply rate over all senders (e.g. 4G).
    #[arg(long, default_value = "4G", value_parser = rate_above_zero(ZERO))]
    pub total_rate: Rate,
    /// Senders tracked at once.
    #[arg(long, default_value_t = 64, value_parser = count_within(1, u32::MAX as u64))]
    pub max_peers: usize,
    /// Seconds after which a silent sender is forgotten (and logged).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..))]
    pub idle: u64,
    /// Do not answer test packets of 14-40 bytes (their 41-byte reply is
    /// longer than the request).
    #[arg(long)]
    pub no_short_packets: bool,
    /// Short test packets answered per second per sender ...
    #[arg(long, default_value_t = 100.0)]
    pub short_rate: f64,
    /// ... and in all.
    #[arg(long, default_value_t = 1000.0)]
    pub short_total_rate: f64,
    /// STAMP's authenticated mode (RFC 8762): the key in hex, at least 16
    /// bytes (e.g. `openssl rand -hex 32 > FILE`); only test packets whose
    /// HMACs match it are answered, and TWAMP-light ones are not.
    #[arg(long, env = "TIGHTLINK_STAMP_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
}

/// A limit of zero reflects nothing: a mistake, not a setting.
const ZERO: &str = "must be above zero";

pub fn run(args: ReflectorArgs) -> Result<()> {
    // As PID 1 in a container the kernel would drop SIGTERM: stop on it.
    tightlink_net::exit_on_stop_signals().context("stop signals")?;
    let peer_rate_bps = args.peer_rate.bps;
    let total_rate_bps = args.total_rate.bps;
    let peer_burst_bytes = args.peer_burst.bytes as f64;
    for (flag, v) in [
        ("--short-rate", args.short_rate),
        ("--short-total-rate", args.short_total_rate),
    ] {
        if !(v >= 0.0 && v.is_finite()) {
            tightlink_measure::bad_input!("{flag} {v}: packets per second, 0 or more");
        }
    }
    let config = ReflectorConfig {
        bind: SocketAddr::new(args.bind, args.port),
        max_peers: args.max_peers,
        peer_rate_bps,
        peer_burst_bytes,
        total_rate_bps,
        total_burst_bytes: peer_burst_bytes.max(ReflectorConfig::default().total_burst_bytes),
        peer_idle: Duration::from_secs(args.idle),
        short_packets: !args.no_short_packets,
        short_peer_pps: args.short_rate,
        short_total_pps: args.short_total_rate,
        hold_bytes: ReflectorConfig::default().hold_bytes,
        log: true,
        key: match &args.key_file {
            None => None,
            Some(f) => match tightlink_net::auth::StampKey::read_file(f) {
                Ok(k) => Some(k),
                Err(e) => tightlink_measure::bad_input!("--key-file {e}"),
            },
        },
    };
    let r = Reflector::bind(config.clone()).with_context(|| format!("bind {}", config.bind))?;
    eprintln!(
        "tightlink reflector: {} on {} (UDP); replies as long as requests, {} Mbit/s and {} MB burst per sender, {} Mbit/s in all, {} senders; {}",
        if config.key.is_some() {
            "authenticated STAMP (HMAC-SHA-256)"
        } else {
            "TWAMP-light and STAMP"
        },
        r.local_addr()?,
        (peer_rate_bps / 1e6).round(),
        (peer_burst_bytes / 1e6).round(),
        (total_rate_bps / 1e6).round(),
        config.max_peers,
        if config.short_packets {
            format!(
                "14-40-byte requests get 41 bytes, {}/s per sender and {}/s in all",
                config.short_peer_pps, config.short_total_pps
            )
        } else {
            "14-40-byte requests refused".to_string()
        }
    );
    if let Some(w) = r
        .receive_buffer_warning()
        .context("the test port's receive buffer")?
    {
        eprintln!("tightlink reflector: warning: {w}");
    }
    r.serve().context("reflector")
}
