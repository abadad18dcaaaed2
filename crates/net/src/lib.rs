//! tightlink-net: probe packets on real sockets (\[HOST\]
//! sections 3, 5-7 and \[CLOUD\]'s "nativeUDP" row).
//!
//! - [`clock`]: the clocks we pace with and stamp with.
//! - [`udp`]: the probe socket: kernel software receive and transmit
//!   timestamps, `recvmmsg` batches.
//! - [`backend`]: the busy-wait paced sender and the backends it sends
//!   through (`udp`, `packet` = AF_PACKET + TPACKET_V3 ring, `xdp` =
//!   AF_XDP), each measured by `doctor`.
//! - [`packets`]: a train's packets, built before it is sent.
//! - [`receiver`]: the receiving end of a stream (server forward, client
//!   reverse): stamps kept per position, everything else counted by reason.
//! - [`server`]: `tightlink server`, safe to expose.
//! - [`client`]: [`UdpChannel`], the channel strategies use against a server.
//! - [`reflector`]: `tightlink reflector`, a TWAMP-light reflector.
//! - [`twamp_light`]: [`TwampChannel`], the channel strategies use against
//!   any TWAMP-light reflector (its receive stamps give the gaps).
//! - [`auth`]: the optional pre-shared key (HMAC-SHA256 challenge).
//! - [`host`]: the measuring host's own limits (send cost, offloads).
//! - [`doctor`]: `tightlink doctor`, all of the host's limits and a verdict.
//! - [`ttl`]: TTL-limited probes and their ICMP errors (per-hop capacity).
//! - [`transfer`]: `tightlink transfer`, reliable bulk data as rate-controlled
//!   probe streams, both ends.
//! - [`loopback`]: a server and a client on this host, for tests and
//!   `doctor`.

pub mod address;
pub mod auth;
pub mod backend;
pub mod client;
mod ctl;
pub use tightlink_sys::clock;
pub mod doctor;
mod doctor_text;
pub mod host;
pub mod ledger;
pub mod loopback;
pub mod packets;
pub mod receiver;
pub mod reflector;
pub mod reflector_reply;
pub mod server;
mod server_session;
pub mod stamps;
pub mod transfer;
mod transmit;
pub mod ttl;
pub mod twamp_light;
mod twamp_reply;
pub mod udp;

pub use client::{ClientOptions, UdpChannel};
pub use reflector::{Reflector, ReflectorConfig};
pub use server::{Server, ServerConfig};
pub use twamp_light::TwampChannel;

/// For the faces that run the server or the reflector as a process:
/// SIGINT and SIGTERM end it, also as a container's PID 1.
pub use tightlink_sys::signal::exit_on_stop_signals;

/// The server's default TCP control port.
pub const DEFAULT_PORT: u16 = 7447;
