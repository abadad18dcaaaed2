//! tightlink-sim: a packet-level simulated network path, deterministic from
//! a seed. The embedded default target of tightlink: every probing strategy
//! runs here before it meets real packets.
//!
//! - [`cross`]: cross-traffic models (CBR, Poisson, bursty Pareto ON/OFF,
//!   smoothed by token buckets).
//! - [`hop`]: a FIFO hop with a tail-drop buffer, optionally behind a
//!   token-bucket shaper.
//! - [`receiver`]: receiver timestamping (coalescence, quantisation,
//!   clock offset and drift).
//! - [`path`]: sender jitter + hops + receiver, streams in, recorded streams
//!   and ground truth out.
//! - [`flow`]: a long-lived flow driven by a congestion controller
//!   (Rapid, or the [`cc`] models of CUBIC and BBR) through a path, with
//!   per-packet feedback a round trip later.
//! - [`spec`]: the `sim:` target syntax.
//! - [`channel`]: the path behind the core's `Channel` and `HopChannel`.

pub mod cc;
pub mod channel;
pub mod cross;
pub mod flow;
pub mod hop;
pub mod path;
pub mod receiver;

pub mod spec;

pub use channel::{SimChannel, SimHopChannel};
pub use path::{IcmpSpec, PathSpec, SimPath, SimStream, TtlOutcome, TtlPacket, TtlReply};
pub use spec::parse_sim_target;
