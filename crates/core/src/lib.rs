//! tightlink-core: the pure estimation core of tightlink.
//!
//! Probe streams in; smoothed gaps, decisions and estimates out. No sockets,
//! clocks or files: every time is a number handed in by the caller, so every
//! result is deterministic and testable.
//!
//! - [`stream`]: the probe-stream model (send/receive gaps, rates, one-way
//!   delays, sub-streams, losses).
//! - [`smoothing`]: BASS, multi-pass spike smoothing, IMR window average
//!   and wavelet.
//! - [`decision`]: PRC-MT, Pathload's trend test, multi-rate estimates and
//!   Multi-rate PRC-MT (DP1, DP2).
//! - [`analysis`]: one entry point per method, as the CLI names them.
//! - [`capacity`]: narrow-link capacity from packet pairs and trains
//!   (Pathrate, CapProbe).
//! - [`rapid`]: rate control from the estimates (\[BASS\] VII, RAPID):
//!   data sent as multi-rate streams, the next rate from each stream's
//!   receive stamps.
//! - [`tcp`]: passive estimators on a TCP flow seen at its sender
//!   (Westwood BE/RE/ERE, BBE loss discrimination and buffer, TCPProbe).
//! - [`channel`]: the boundary a probing strategy talks to (`Channel`,
//!   `HopChannel`, requests, per-packet records, side reports); the
//!   simulator and the real backends implement it.
//! - [`units`], [`stats`], [`rng`]: rates, sizes and times as users type
//!   them; the one median and quantile; seeded random numbers.
//! - [`schedule`]: the send times of single- and multi-rate streams.
//! - [`synth`]: closed-form streams with known answers, for tests and
//!   benchmarks.

pub mod analysis;
pub mod capacity;
pub mod channel;
pub mod decision;
pub mod error;
pub mod rapid;
pub mod rng;
pub mod schedule;
pub mod smoothing;
pub mod stats;
pub mod stream;
pub mod synth;
pub mod tcp;
pub mod units;
pub mod warning;

pub use analysis::{analyze, Analysis, AnalysisParams, Analyzer, Method};
pub use decision::{Bound, Decision};
pub use stream::{ProbePacket, ProbeStream, StreamKind};
