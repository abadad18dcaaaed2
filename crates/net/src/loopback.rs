//! A `tightlink server` on 127.0.0.1 and a [`UdpChannel`] to it: real
//! packets through the kernel's loopback path, real control protocol and
//! kernel timestamps, no peer needed. Loopback has no link rate: streams
//! measure this host's pacing and stamping, which is what `doctor` and
//! the CI tests want from it.

use std::net::SocketAddr;
use std::sync::Arc;

use tightlink_core::channel::ChannelError;

use crate::client::{ClientOptions, UdpChannel};
use crate::server::{Server, ServerConfig, ServerStats};

/// A server on an ephemeral loopback port, serving on a background thread.
pub fn spawn_server(mut config: ServerConfig) -> std::io::Result<(SocketAddr, Arc<ServerStats>)> {
    config.bind = SocketAddr::from(([127, 0, 0, 1], 0));
    Server::bind(config)?.spawn()
}

/// A quiet loopback server (no log lines) and a channel to it.
pub fn channel(opts: &ClientOptions) -> Result<(UdpChannel, Arc<ServerStats>), ChannelError> {
    let (addr, stats) = spawn_server(ServerConfig {
        log: false,
        ..ServerConfig::default()
    })
    .map_err(|e| ChannelError::Io(format!("loopback server: {e}")))?;
    Ok((UdpChannel::connect(&addr.to_string(), opts)?, stats))
}
