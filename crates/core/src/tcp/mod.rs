//! Passive estimators on one TCP flow seen at its sender (\[TCPW\],
//! sections 3.1, 3.2 and 4): segments in, in capture order, with their
//! capture times; RTT samples, loss events, Westwood's estimates and the
//! BBE loss discrimination out. Reading captures lives elsewhere (the
//! `tightlink-capture` crate); nothing here touches files.
//!
//! - [`flow`]: replays the segments: sequence unwrapping, RTT samples by
//!   Karn's rule, loss events from retransmissions, ACK arrivals.
//! - [`westwood`](mod@westwood): BE (ACK pairs), RE (ACKed bytes over an RTT), ERE.
//! - [`bbe`]: RTTcong, the congestion level `c`, loss classes, the buffer.
//! - [`bbe_cc`]: BBE as a window controller, the same estimates online.
//! - [`stream_window`]: that controller on a receiver that reports by stream.
//! - [`tcpprobe`](mod@tcpprobe): capacity from data packets sent back to back whose ACKs
//!   came back one each (CapProbe's minimum delay sum on them).

pub mod bbe;
pub mod bbe_cc;
pub mod flow;
pub mod stream_window;
pub mod tcpprobe;
pub mod westwood;

pub use bbe::{discriminate, Bbe, BbeParams, LossClass, LossVerdict};
pub use flow::{replay, AckEvent, Direction, Flow, LossEvent, RttSample, Segment};
pub use tcpprobe::{tcpprobe, TcpProbeEstimate};
pub use westwood::{westwood, WestwoodParams, WestwoodPoint};

use crate::capacity::CapProbeParams;

/// One point of the time series after an ACK arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimelinePoint {
    pub t_ns: i64,
    /// The latest RTT sample, ns.
    pub rtt_ns: Option<f64>,
    pub be_bps: f64,
    pub re_bps: f64,
    /// `(1 - c) BE + c RE`; before the first loss (no RTTcong) `c` is
    /// taken as 1: ERE = RE, the conservative choice.
    pub ere_bps: f64,
    pub level: Option<f64>,
}

/// Everything `analyze-tcp` reports on one flow.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowReport {
    pub flow: Flow,
    pub bbe: bbe::Bbe,
    pub timeline: Vec<TimelinePoint>,
    pub tcpprobe: Option<TcpProbeEstimate>,
    pub tau_ns: f64,
}

/// Replays `segments` and runs every estimator.
pub fn analyze_flow(segments: &[Segment], ww: WestwoodParams, bp: BbeParams) -> FlowReport {
    let flow = replay(segments);
    let bbe = discriminate(&flow, bp);
    let points = westwood(&flow, ww);
    let mut timeline = Vec::with_capacity(points.len());
    let (mut ri, mut li) = (0, 0);
    let (mut rtt, mut level) = (None, None);
    for p in &points {
        while ri < flow.rtt.len() && flow.rtt[ri].t_ns <= p.t_ns {
            rtt = Some(flow.rtt[ri].rtt_ns);
            ri += 1;
        }
        while li < bbe.levels.len() && bbe.levels[li].0 <= p.t_ns {
            level = bbe.levels[li].1;
            li += 1;
        }
        let c = level.unwrap_or(1.0);
        timeline.push(TimelinePoint {
            t_ns: p.t_ns,
            rtt_ns: rtt,
            be_bps: p.be_bps,
            re_bps: p.re_bps,
            ere_bps: (1.0 - c) * p.be_bps + c * p.re_bps,
            level,
        });
    }
    FlowReport {
        tcpprobe: tcpprobe(&flow, CapProbeParams::default()),
        tau_ns: westwood::tau_ns(&flow, ww),
        flow,
        bbe,
        timeline,
    }
}
