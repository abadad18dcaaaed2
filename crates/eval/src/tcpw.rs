//! TCP Westwood BBE's two experiments (\[TCPW\] section 4) on the
//! simulator: efficiency (4.1, Fig. 8: one flow alone on a large pipe
//! that loses packets at random) and friendliness (4.2, Fig. 9: BBE
//! beside NewReno, and beside CUBIC, on one bottleneck).
//!
//! The paper's path was a trans-Pacific one (80 Mbit/s, 133 ms, a 150 KB
//! buffer, random loss of about 0.005 %); here the pipes are larger (1
//! and 10 Gbit/s, 30 and 100 ms) and the loss rates span 0.01 to 1 %, as
//! asked of a controller for the field's rates. Every path: a sender link
//! four times the bottleneck, then the bottleneck with a buffer of a
//! tenth of its bandwidth-delay product; 9000-byte packets; no cross
//! traffic.

use rayon::prelude::*;
use tightlink_core::rapid::{RapidEstimator, RapidParams};
use tightlink_sim::cc::{BbeFlow, Cubic, NewReno};
use tightlink_sim::flow::{run_flows, FlowController, FlowResult, FlowSpec, RapidFlow};

use crate::experiments::{spec_for, unit_seed, SIZE_BYTES};

pub const EFFICIENCY_CAPACITIES_BPS: [f64; 2] = [1e9, 10e9];
pub const EFFICIENCY_RTTS_MS: [f64; 2] = [30.0, 100.0];
pub const EFFICIENCY_LOSSES: [f64; 3] = [1e-4, 1e-3, 1e-2];
pub const EFFICIENCY_CONTROLLERS: [&str; 4] = ["bbe", "newreno", "cubic", "rapid"];
/// The friendliness path: 1 Gbit/s, 30 ms, and the pairs run on it.
pub const FRIENDLY_CAPACITY_BPS: f64 = 1e9;
pub const FRIENDLY_RTT_MS: f64 = 30.0;
pub const FRIENDLY_LOSSES: [f64; 2] = [0.0, 1e-4];
pub const FRIENDLY_PAIRS: [(&str, &str); 4] = [
    ("bbe", "newreno"),
    ("bbe", "cubic"),
    ("newreno", "newreno"),
    ("bbe", "bbe"),
];
const BIN_NS: f64 = 500e6;

/// The path string of a bottleneck of `capacity_bps` at `rtt_ms` losing
/// `loss` of the packets at random.
pub fn path_target(capacity_bps: f64, rtt_ms: f64, loss: f64) -> String {
    let buffer_bytes = (capacity_bps * rtt_ms / 1e3 / 8.0 / 10.0).round() as u64;
    format!(
        "sim:hops={}+{},buffer=10MB+{buffer_bytes}B,cross=none,coalescence=off,jitter=off,loss={loss}",
        (4.0 * capacity_bps).round() as u64,
        capacity_bps.round() as u64,
    )
}

/// One of these experiments' flows: `duration_ns` on `path` at
/// `rtt_ms`, in 500 ms bins, 9000-byte packets.
fn flow_spec(path: tightlink_sim::PathSpec, rtt_ms: f64, duration_ns: f64) -> FlowSpec {
    FlowSpec {
        path,
        rtt_ns: rtt_ms * 1e6,
        duration_ns,
        bin_ns: BIN_NS,
        packet_bytes: SIZE_BYTES,
    }
}

fn controller(name: &str, link_bps: f64) -> Box<dyn FlowController> {
    match name {
        "bbe" => Box::new(BbeFlow::new(SIZE_BYTES)),
        "newreno" => Box::new(NewReno::new(SIZE_BYTES)),
        "cubic" => Box::new(Cubic::new(SIZE_BYTES)),
        _ => Box::new(RapidFlow::new(RapidParams::paper(
            link_bps,
            SIZE_BYTES,
            RapidEstimator::Bass,
        ))),
    }
}

/// One flow alone: its goodput as a share of the bottleneck, loss and
/// queueing.
#[derive(Debug, Clone)]
pub struct EfficiencyCell {
    pub capacity_bps: f64,
    pub rtt_ms: f64,
    pub loss: f64,
    pub flow: FlowResult,
}

impl EfficiencyCell {
    pub fn utilisation(&self) -> f64 {
        self.flow.goodput_bps() / self.capacity_bps
    }
}

/// Every controller alone on every path for `duration_ns`.
pub fn efficiency(seed: u64, duration_ns: f64) -> Vec<EfficiencyCell> {
    let cells: Vec<(f64, f64, f64, &str)> = EFFICIENCY_CAPACITIES_BPS
        .iter()
        .flat_map(|&c| {
            EFFICIENCY_RTTS_MS.iter().flat_map(move |&rtt| {
                EFFICIENCY_LOSSES.iter().flat_map(move |&loss| {
                    EFFICIENCY_CONTROLLERS
                        .iter()
                        .map(move |&ctl| (c, rtt, loss, ctl))
                })
            })
        })
        .collect();
    cells
        .par_iter()
        .map(|&(capacity_bps, rtt_ms, loss, name)| {
            let target = path_target(capacity_bps, rtt_ms, loss);
            let label = format!("{capacity_bps} {rtt_ms} {loss}");
            let path = spec_for(&target, unit_seed(seed, &label, 0));
            let link_bps = path.hops[0].hop.capacity_bps;
            let spec = flow_spec(path, rtt_ms, duration_ns);
            let mut ctl = controller(name, link_bps);
            let flow = run_flows(&spec, &mut [ctl.as_mut()]).remove(0);
            EfficiencyCell {
                capacity_bps,
                rtt_ms,
                loss,
                flow,
            }
        })
        .collect()
}

/// Two flows sharing the bottleneck from the start.
#[derive(Debug, Clone)]
pub struct FriendlinessCell {
    pub loss: f64,
    pub flows: [FlowResult; 2],
}

impl FriendlinessCell {
    /// Each flow's share of what the two delivered.
    pub fn shares(&self) -> [f64; 2] {
        let [a, b] = [&self.flows[0], &self.flows[1]].map(|f| f.delivered_bytes as f64);
        let total = (a + b).max(1.0);
        [a / total, b / total]
    }

    /// Jain's fairness index of the two goodputs: 1 for an even split,
    /// 0.5 where one flow has everything.
    pub fn jain(&self) -> f64 {
        tightlink_core::stats::jain_index(&self.flows.each_ref().map(|f| f.delivered_bytes as f64))
    }

    /// Both flows' delivered bytes so far at the end of each bin.
    pub fn cumulative_bytes(&self) -> [Vec<f64>; 2] {
        self.flows.each_ref().map(|f| {
            f.bins_bps
                .iter()
                .scan(0.0, |sum, b| {
                    *sum += b * BIN_NS / 8e9;
                    Some(*sum)
                })
                .collect()
        })
    }

    /// The utilisation of the bottleneck by both.
    pub fn utilisation(&self) -> f64 {
        (self.flows[0].goodput_bps() + self.flows[1].goodput_bps()) / FRIENDLY_CAPACITY_BPS
    }
}

/// Every pair on the friendliness path, at each loss rate.
pub fn friendliness(seed: u64, duration_ns: f64) -> Vec<FriendlinessCell> {
    let cells: Vec<(f64, (&str, &str))> = FRIENDLY_LOSSES
        .iter()
        .flat_map(|&loss| FRIENDLY_PAIRS.iter().map(move |&p| (loss, p)))
        .collect();
    cells
        .par_iter()
        .map(|&(loss, (a, b))| {
            let target = path_target(FRIENDLY_CAPACITY_BPS, FRIENDLY_RTT_MS, loss);
            let path = spec_for(&target, unit_seed(seed, &format!("friendly {loss}"), 0));
            let link_bps = path.hops[0].hop.capacity_bps;
            let spec = flow_spec(path, FRIENDLY_RTT_MS, duration_ns);
            let (mut x, mut y) = (controller(a, link_bps), controller(b, link_bps));
            let mut r = run_flows(&spec, &mut [x.as_mut(), y.as_mut()]);
            let second = r.pop().expect("two flows");
            let first = r.pop().expect("two flows");
            FriendlinessCell {
                loss,
                flows: [first, second],
            }
        })
        .collect()
}

/// The path of the traced run (TCPW's Figs. 6 and 7): 1 Gbit/s, 30 ms,
/// 0.005 % random loss (the paper's path's rate); the buffer fills now
/// and then, so both
/// kinds of loss come.
pub const TRACE_CAPACITY_BPS: f64 = 1e9;
pub const TRACE_RTT_MS: f64 = 30.0;
pub const TRACE_LOSS: f64 = 5e-5;

/// One BBE flow alone, its controller's state every 10 ms and each loss
/// it reacted to.
#[derive(Debug, Clone)]
pub struct BbeTrace {
    pub points: Vec<tightlink_core::tcp::bbe_cc::BbeTracePoint>,
    pub reactions: Vec<tightlink_core::tcp::bbe_cc::LossReaction>,
    pub flow: FlowResult,
}

pub fn bbe_trace(seed: u64, duration_ns: f64) -> BbeTrace {
    let target = path_target(TRACE_CAPACITY_BPS, TRACE_RTT_MS, TRACE_LOSS);
    let spec = flow_spec(
        spec_for(&target, unit_seed(seed, "bbe trace", 0)),
        TRACE_RTT_MS,
        duration_ns,
    );
    let mut f = BbeFlow::new(SIZE_BYTES).with_trace(10_000_000);
    let flow = run_flows(&spec, &mut [&mut f]).remove(0);
    BbeTrace {
        points: f.controller.trace().to_vec(),
        reactions: f.controller.reactions().to_vec(),
        flow,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_paths_are_what_they_say() {
        let t = path_target(1e9, 30.0, 1e-3);
        let p = spec_for(&t, 1);
        // A 4 Gbit/s sender link, then 1 Gbit/s with a tenth of its
        // 3.75 MB bandwidth-delay product as buffer.
        assert_eq!(p.hops.len(), 2);
        assert_eq!(p.hops[0].hop.capacity_bps, 4e9);
        assert_eq!(p.hops[1].hop.capacity_bps, 1e9);
        assert_eq!(p.hops[1].hop.buffer_bytes, 375_000);
        assert_eq!(p.random_loss, 1e-3);
        assert!(p.hops.iter().all(|h| h.cross.is_none()));
    }

    /// Over 20 s of the traced path both kinds of loss come: random ones
    /// on an empty pipe (c near 0, the window kept) and overflows (c = 1,
    /// the window halved).
    #[test]
    fn the_trace_shows_both_kinds_of_loss() {
        let t = bbe_trace(1, 20e9);
        assert!(t.points.len() > 1500, "{}", t.points.len());
        let random = t.reactions.iter().filter(|r| r.c < 0.2).count();
        let overflow = t.reactions.iter().filter(|r| r.c >= 0.99).count();
        assert!(
            random >= 2 && overflow >= 2,
            "{random} random, {overflow} overflows"
        );
        for r in &t.reactions {
            if r.c >= 0.99 {
                assert!(
                    (r.cwnd_after_bytes / r.cwnd_before_bytes - 0.5).abs() < 1e-9,
                    "{r:?}"
                );
            }
        }
    }

    /// On a 1 Gbit/s, 30 ms pipe losing 0.1 % at random, BBE keeps its
    /// window through the random losses and NewReno halves at each: over
    /// 20 s BBE delivers several times what NewReno does (the paper's
    /// 70 % was at 0.005 % on a smaller pipe).
    #[test]
    fn bbe_outruns_newreno_where_losses_are_random() {
        let t = path_target(1e9, 30.0, 1e-3);
        let run = |name: &str| {
            let spec = flow_spec(spec_for(&t, 7), 30.0, 20e9);
            let mut c = controller(name, 4e9);
            run_flows(&spec, &mut [c.as_mut()]).remove(0).goodput_bps()
        };
        let (bbe, reno) = (run("bbe"), run("newreno"));
        assert!(bbe > 2.0 * reno, "bbe {bbe} newreno {reno}");
        assert!(bbe > 0.5e9, "bbe {bbe}");
    }
}
