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
