//! `tightlink server`: the far end of real measurements. Thin: flags to a
//! [`tightlink_net::ServerConfig`], then serve until killed.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use tightlink_net::{Server, ServerConfig};

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
    #[arg(long, default_value_t = 8)]
    pub max_sessions: usize,
    #[arg(long, default_value_t = 2)]
    pub max_sessions_per_ip: usize,
    /// Of --max-sessions, slots only clients with the key may take (with
    /// --key-file).
    #[arg(long, default_value_t = 2)]
    pub reserved_keyed_sessions: usize,
    /// Connections still in their handshake, in all / per client address;
    /// beyond these the oldest is cut.
    #[arg(long, default_value_t = 256)]
    pub max_pending: usize,
    #[arg(long, default_value_t = 8)]
    pub max_pending_per_ip: usize,
    /// Most probe rate of a session without a key (e.g. 1G).
    #[arg(long, default_value = "1G")]
    pub max_rate: String,
    /// Most probe bytes of a session without a key (e.g. 50MB).
    #[arg(long, default_value = "50MB")]
    pub max_session_bytes: String,
    /// Longest session without a key, seconds.
    #[arg(long, default_value_t = 30)]
    pub max_duration: u32,
    /// Receive buffer of each session's probe socket (e.g. 16MB): what a
    /// stream may queue while this host is busy elsewhere; datagrams it
    /// cannot hold are dropped, counted and reported to the client as this
    /// host's losses.
    #[arg(long, default_value = "16MB")]
    pub probe_rcvbuf: String,
}

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
    config.open_limits.max_rate_bps = tightlink_core::units::parse_rate(&args.max_rate)
        .with_context(|| format!("--max-rate {}", args.max_rate))?
        as u64;
    config.open_limits.max_session_bytes =
        tightlink_core::units::parse_bytes(&args.max_session_bytes)
            .with_context(|| format!("--max-session-bytes {}", args.max_session_bytes))?;
    config.open_limits.max_session_ms = args.max_duration.saturating_mul(1000);
    let rcvbuf = tightlink_core::units::parse_bytes(&args.probe_rcvbuf)
        .with_context(|| format!("--probe-rcvbuf {}", args.probe_rcvbuf))?;
    config.probe_rcvbuf_bytes = i32::try_from(rcvbuf).ok().with_context(|| {
        format!(
            "--probe-rcvbuf {}: a socket buffer holds at most {} bytes",
            args.probe_rcvbuf,
            i32::MAX
        )
    })?;
    refuse_empty_limits(&args, &config)?;
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

/// A limit of zero serves nobody: say so rather than start a server that
/// refuses every session (`--require-key` is how to turn keyless clients
/// away).
fn refuse_empty_limits(args: &ServerArgs, config: &ServerConfig) -> Result<()> {
    let l = &config.open_limits;
    let zero = [
        ("--max-rate", &args.max_rate, l.max_rate_bps == 0),
        (
            "--max-session-bytes",
            &args.max_session_bytes,
            l.max_session_bytes == 0,
        ),
    ];
    for (flag, text, is_zero) in zero {
        if is_zero {
            tightlink_measure::bad_input!(
                "{flag} {text}: must be above zero (--require-key turns keyless clients away)"
            );
        }
    }
    if config.probe_rcvbuf_bytes <= 0 {
        tightlink_measure::bad_input!(
            "--probe-rcvbuf {}: must be above zero (the kernel's smallest is about 2 KB)",
            args.probe_rcvbuf
        );
    }
    let counts = [
        ("--max-duration", args.max_duration as usize),
        ("--max-sessions", config.max_sessions),
        ("--max-sessions-per-ip", config.max_sessions_per_ip),
        ("--max-pending", config.max_pending),
        ("--max-pending-per-ip", config.max_pending_per_ip),
    ];
    for (flag, n) in counts {
        if n == 0 {
            tightlink_measure::bad_input!("{flag} 0: must be at least 1");
        }
    }
    Ok(())
}
