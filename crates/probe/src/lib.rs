//! tightlink-probe: probing strategies and the channels they talk to.
//!
//! A strategy sends probe streams through a [`tightlink_core::channel::Channel`] and turns
//! what comes back into an estimate with a confidence range, counting the
//! probe bytes and time it spent. Channels here: the simulated path and a
//! recorded trace; on real packets (crate `tightlink-net`): a tightlink
//! server over UDP and any TWAMP-light reflector, behind the same trait.

pub mod capacity;
pub mod hops;
pub mod strategy;

pub use strategy::{Budget, Report};

/// What a measurement spent, the same in every report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Cost {
    pub probe_bytes: u64,
    pub probe_packets: u64,
    /// Streams kept, and those sent again because their sender fell
    /// behind its schedule (their bytes are in `probe_bytes`).
    pub streams: usize,
    pub resent_streams: usize,
    /// Time on the path, s (simulated time on the simulator; a replay
    /// counts its streams' own spans).
    pub duration_s: f64,
    /// Wall-clock time the measurement took, s (the library adds the
    /// session set-up and close on real paths).
    pub wall_s: f64,
}
