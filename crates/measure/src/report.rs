//! What every report shares: its cost, and the events a measurement
//! sends its caller while it runs.

use std::cell::RefCell;

pub use tightlink_probe::Cost;

use tightlink_core::channel::{
    Channel, ChannelError, ChannelInfo, GroundTruth, Probed, SideReport, StreamRequest,
};
use tightlink_core::ProbeStream;

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
}

/// The caller's event sink, shared by the channel (streams) and the
/// strategy (progress), which never call it from inside each other.
pub(crate) type Sink<'e, 'f> = &'e RefCell<&'f mut dyn FnMut(Event)>;

/// A channel that tells the caller about every stream that comes back.
pub(crate) struct Observed<'e, 'f, C> {
    pub inner: C,
    pub events: Sink<'e, 'f>,
}

impl<C: Channel> Channel for Observed<'_, '_, C> {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let p = self.inner.probe(request)?;
        (self.events.borrow_mut())(Event::Stream {
            stream: &p.stream,
            truth: p.truth,
        });
        Ok(p)
    }
    fn info(&self) -> ChannelInfo {
        self.inner.info()
    }
    fn elapsed_ns(&self) -> i64 {
        self.inner.elapsed_ns()
    }
    fn close(&mut self) -> Result<(), ChannelError> {
        self.inner.close()
    }
    fn side_report(&self) -> SideReport {
        self.inner.side_report()
    }
}
