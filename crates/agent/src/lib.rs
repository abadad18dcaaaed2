//! tightlink-agent: tightlink as a long-running service. It measures
//! many targets on their schedules through the library API (never two
//! measurements toward one target at once), keeps every result in a
//! SQLite history, and serves Prometheus: `/metrics` with the last result
//! per target and method, and blackbox_exporter's multi-target
//! `/probe?target=...` for measurements on demand, guarded so that it
//! cannot be turned into an attack tool.
//!
//! - [`config`]: the TOML file, flags and environment, checked.
//! - [`schedule`]: intervals, jitter, spread start times (pure).
//! - [`mesh`]: the mesh file every site shares and the slots no two
//!   measurements share an end or a bottleneck in (pure).
//! - [`store`]: the history (SQLite, WAL, versioned schema, retention).
//! - [`metrics`]: the Prometheus text format.
//! - [`grid`]: the mesh page (the N x N grid) and a path's history page.
//! - [`http`]: the small HTTP server, bounded per peer.
//! - [`agent`]: the running service that ties them together.

#[cfg(feature = "service")]
pub mod agent;
pub mod config;
#[cfg(feature = "service")]
pub mod grid;
#[cfg(feature = "service")]
pub mod history;
pub mod http;
pub mod mesh;
#[cfg(feature = "service")]
mod mesh_serve;
#[cfg(feature = "service")]
pub mod metrics;
pub mod schedule;
#[cfg(feature = "service")]
pub mod store;

#[cfg(feature = "service")]
pub use agent::{Agent, Summary};
pub use config::{AgentConfig, MeshSite, Overrides, TargetConfig};
#[cfg(feature = "service")]
pub use store::{Query, Row, Store};

/// SIGINT and SIGTERM as stop requests, for the faces that run the agent.
pub mod signal {
    pub use tightlink_sys::signal::{catch_stop_signals, stop_signals};
}
