//! tightlink-net: probe packets on real sockets (issue 6; host paper
//! sections 3, 5-7 and the cloud paper's "native UDP" row).
//!
//! - [`clock`]: the clocks we pace with and stamp with.
//! - [`udp`]: a UDP probe socket with kernel software receive timestamps
//!   (SO_TIMESTAMPNS, read from the control messages of `recvmsg`) and a
//!   busy-wait paced sender that records the user-space send time.
//! - [`loopback`]: a [`tightlink_probe::Channel`] whose far end is a second
//!   socket on this host: real packets and kernel timestamps with no peer,
//!   for tests and for `doctor`.
//!
//! The server, the TWAMP-light reflector channel, transmit timestamps and
//! the packet-socket / AF_XDP backends come next behind the same channel.

pub mod clock;
pub mod loopback;
pub mod udp;

pub use loopback::LoopbackChannel;
