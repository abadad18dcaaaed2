//! Passive estimators on one TCP flow seen at its sender (TCPW-BBE paper,
//! sections 3.1, 3.2 and 4): segments in, in capture order, with their
//! capture times; RTT samples, loss events, Westwood's estimates and the
//! BBE loss discrimination out. Reading captures lives elsewhere (the
//! `tightlink-capture` crate); nothing here touches files.
//!
//! - [`flow`]: replays the segments: sequence unwrapping, RTT samples by
//!   Karn's rule, loss events from retransmissions, ACK arrivals.
//! - [`westwood`]: BE (ACK pairs), RE (ACKed bytes over an RTT), ERE.
//! - [`bbe`]: RTTcong, the congestion level `c`, loss classes, the buffer.
//! - [`tcpprobe`]: capacity from data packets sent back to back whose ACKs
//!   came back one each (CapProbe's minimum delay sum on them).

pub mod bbe;
pub mod flow;
pub mod tcpprobe;
pub mod westwood;

pub use bbe::{discriminate, BbeParams, LossClass, LossVerdict};
pub use flow::{replay, AckEvent, Direction, Flow, LossEvent, RttSample, Segment};
pub use tcpprobe::{tcpprobe, TcpProbeEstimate};
pub use westwood::{westwood, WestwoodParams, WestwoodPoint};
