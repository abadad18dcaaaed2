//! `tightlink server`: the far end of real measurements. Thin: flags to a
//! [`tightlink_net::ServerConfig`], then serve until killed.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use tightlink_core::units::{Rate, Size};
use tightlink_net::{Server, ServerConfig};

use crate::flags::{bytes, count_within, rate_above_zero, within};

#[derive(Args)]
pub struct ServerArgs {
    /// Address to listen on (TCP control; each session gets its own UDP
    /// port on the same address).
    #[arg(long, default_value = "0.0.0.0", env = "TIGHTLINK_BIND")]
    pub bind: IpAddr,
    #[arg(long, short, default_value_t = tightlink_net::DEFAULT_PORT, env = "TIGHTLINK_PORT")]
    pub port: u16,
    /// Pre-shared key file: clients that prove it get the keyed limits.
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<PathBuf>,
    /// Refuse clients without the key.
    #[arg(long, requires = "key_file")]
    pub require_key: bool,
    /// Concurrent sessions in all / per client address.
    #[arg(long, default_value_t = 8, value_parser = count_within(1, MANY))]
    pub max_sessions: usize,
    #[arg(long, default_value_t = 2, value_parser = count_within(1, MANY))]
    pub max_sessions_per_ip: usize,
    /// Of --max-sessions, slots only clients with the key may take (with
    /// --key-file).
    #[arg(long, default_value_t = 2)]
    pub reserved_keyed_sessions: usize,
    /// Connections still in their handshake, in all / per client address;
    /// beyond these the oldest is cut.
    #[arg(long, default_value_t = 256, value_parser = count_within(1, MANY))]
    pub max_pending: usize,
    #[arg(long, default_value_t = 8, value_parser = count_within(1, MANY))]
    pub max_pending_per_ip: usize,
    /// Most probe rate of a session without a key (e.g. 1G).
    #[arg(long, default_value = "1G", value_parser = rate_above_zero(KEYLESS_ZERO))]
    pub max_rate: Rate,
    /// Most probe bytes of a session without a key (e.g. 50MB).
    #[arg(long, default_value = "50MB", value_parser = within(bytes(1), bytes(u64::MAX), KEYLESS_ZERO))]
    pub max_session_bytes: Size,
    /// Longest session without a key, seconds.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_duration: u32,
    /// Receive buffer of each session's probe socket (e.g. 16MB): what a
    /// stream may queue while this host is busy elsewhere; datagrams it
    /// cannot hold are dropped, counted and reported to the client as this
    /// host's losses.
    #[arg(long, default_value = "16MB", value_parser = within(bytes(1), bytes(i32::MAX as u64), "must be above zero (the kernel's smallest is about 2 KB), and a socket buffer holds at most 2147483647 bytes"))]
    pub probe_rcvbuf: Size,
}

/// What a limit of zero hears: it would serve nobody.
const KEYLESS_ZERO: &str = "must be above zero (--require-key turns keyless clients away)";

/// No bound of our own on a count but that it is one or more.
const MANY: u64 = u32::MAX as u64;

pub fn run(args: ServerArgs) -> Result<()> {
    // As PID 1 in a container the kernel would drop SIGTERM: stop on it.
    tightlink_net::exit_on_stop_signals().context("stop signals")?;
    let mut config = ServerConfig {
        bind: SocketAddr::new(args.bind, args.port),
        require_key: args.require_key,
        max_sessions: args.max_sessions,
        max_sessions_per_ip: args.max_sessions_per_ip,
        reserved_keyed_sessions: args.reserved_keyed_sessions,
        max_pending: args.max_pending,
        max_pending_per_ip: args.max_pending_per_ip,
        ..ServerConfig::default()
    };
    if let Some(f) = &args.key_file {
        config.key = Some(
            tightlink_net::auth::read_key_file(f)
                .with_context(|| format!("--key-file {}", f.display()))?,
        );
    }
    config.open_limits.max_rate_bps = args.max_rate.bps as u64;
    config.open_limits.max_session_bytes = args.max_session_bytes.bytes;
    config.open_limits.max_session_ms = args.max_duration.saturating_mul(1000);
    // Within i32 by the flag's range.
    config.probe_rcvbuf_bytes = args.probe_rcvbuf.bytes as i32;
    let server =
        Server::bind(config.clone()).with_context(|| format!("listen on {}", config.bind))?;
    let l = config.open_limits;
    eprintln!(
        "tightlink server: listening on {} (TCP control); without a key: {} Mbit/s, {} MB, {} s per session; {} sessions ({} per address{}){}",
        server.local_addr()?,
        l.max_rate_bps / 1_000_000,
        l.max_session_bytes / 1_000_000,
        l.max_session_ms / 1000,
        config.max_sessions,
        config.max_sessions_per_ip,
        if config.key.is_some() {
            format!(", {} kept for keyed clients", config.reserved_keyed_sessions)
        } else {
            String::new()
        },
        match (&config.key, config.require_key) {
            (Some(_), true) => "; key required",
            (Some(_), false) => "; key optional",
            _ => "",
        }
    );
    if let Some(w) = server
        .probe_buffer_warning()
        .context("a trial probe socket")?
    {
        eprintln!("tightlink server: warning: {w}");
    }
    server.serve().context("server")?;
    Ok(())
}
