//! tightlink-probe: probing strategies and the channels they talk to.
//!
//! A strategy sends probe streams through a [`channel::Channel`] and turns
//! what comes back into an estimate with a confidence range, counting the
//! probe bytes and time it spent. Channels today: the simulated path and a
//! recorded trace; the UDP server and TWAMP-light reflector come next,
//! behind the same trait.

pub mod capacity;
pub mod channel;
pub mod hops;
pub mod strategy;

pub use channel::{
    Channel, GroundTruth, HostFindings, Probed, Recorder, SimChannel, StreamRequest, TraceChannel,
};
pub use strategy::{Budget, Report};
