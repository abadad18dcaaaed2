//! What every report shares: its cost, and the events a measurement
//! sends its caller while it runs.

pub use tightlink_probe::Cost;

use tightlink_core::channel::GroundTruth;
use tightlink_core::ProbeStream;
pub use tightlink_probe::strategy::bart::BartUpdate;

/// What a running measurement tells its caller. The library prints
/// nothing: a command line draws a progress bar from these, an agent or
/// a Python caller streams them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Event<'a> {
    /// Share of the budget or of the convergence used so far (0..1).
    Progress(f64),
    /// A stream came back (with its truth on the simulator).
    Stream {
        stream: &'a ProbeStream,
        truth: Option<GroundTruth>,
    },
    /// Following (`EstimateOptions::follow`): the tracker's answer after a
    /// stream.
    Update(BartUpdate),
}
