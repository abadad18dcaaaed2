//! TCPW BBE's loss discrimination and buffer estimate (\[TCPW\],
//! sections 3.1 and 4).
//!
//! - RTTcong, the RTT expected when a packet is lost to congestion:
//!   `RTTcong_j = (1 - a) RTTcong_(j-1) + a RTT_j` at loss event `j`, with
//!   `RTT_j` the RTT before the event (the median of the last three
//!   samples: one late ACK must not stand for the queue). The paper shields it
//!   "with an adaptive moving average filter" without details; here only
//!   events judged congestion update it (a random loss at a low RTT would
//!   drag it down), and the first event sets it (losses are "mainly due to
//!   congestion").
//! - The congestion level `c = min((RTT - RTTmin) / (RTTcong - RTTmin), 1)`
//!   with RTTmin the smallest RTT seen so far.
//! - A loss is congestion when `c >= congested_level` at it (ours: the
//!   paper reacts to `c` continuously), random otherwise.
//! - The bottleneck buffer: the RTT before congestion losses (their
//!   median: the peak of the paper's Fig. 3 histogram) minus RTTmin, times
//!   the capacity.

use super::flow::Flow;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbeParams {
    /// RTTcong's smoothing factor `a` (ours: the paper does not give it).
    pub smoothing: f64,
    /// Congestion level from which a loss counts as congestion.
    pub congested_level: f64,
}

impl Default for BbeParams {
    fn default() -> Self {
        BbeParams {
            smoothing: 0.25,
            congested_level: 0.8,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossClass {
    Congestion,
    Random,
}

impl LossClass {
    pub fn as_str(self) -> &'static str {
        match self {
            LossClass::Congestion => "congestion",
            LossClass::Random => "random",
        }
    }
}

/// What one loss event was judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossVerdict {
    pub t_ns: i64,
    /// Sequence number of the first segment resent.
    pub seq: u32,
    pub segments: usize,
    pub rtt_before_ns: Option<f64>,
    pub rtt_min_ns: Option<f64>,
    /// RTTcong the event was judged against (before it updated it).
    pub rtt_cong_ns: Option<f64>,
    pub level: f64,
    pub class: LossClass,
}

#[derive(Debug, Clone, PartialEq, Default)]
pub struct Bbe {
    pub verdicts: Vec<LossVerdict>,
    /// The congestion level at every RTT sample: (time, c); `None` before
    /// the first loss (no RTTcong yet).
    pub levels: Vec<(i64, Option<f64>)>,
    /// RTTcong after the last event.
    pub rtt_cong_ns: Option<f64>,
    pub rtt_min_ns: Option<f64>,
}

impl Bbe {
    /// Median RTT before congestion losses minus the smallest RTT, ns.
    pub fn buffer_delay_ns(&self) -> Option<f64> {
        let mut before: Vec<f64> = self
            .verdicts
            .iter()
            .filter(|v| v.class == LossClass::Congestion)
            .filter_map(|v| v.rtt_before_ns)
            .collect();
        if before.is_empty() {
            return None;
        }
        before.sort_by(f64::total_cmp);
        let median = before[before.len() / 2];
        Some((median - self.rtt_min_ns?).max(0.0))
    }

    /// The bottleneck buffer at `capacity_bps`, bytes.
    pub fn buffer_bytes(&self, capacity_bps: f64) -> Option<f64> {
        Some(self.buffer_delay_ns()? * capacity_bps / 8e9)
    }

    pub fn count(&self, class: LossClass) -> (usize, usize) {
        let v = self.verdicts.iter().filter(|v| v.class == class);
        (v.clone().count(), v.map(|v| v.segments).sum())
    }
}

fn level(rtt: f64, min: f64, cong: f64) -> f64 {
    if cong <= min {
        // No queue between the two: any RTT at or above is congested.
        return if rtt >= cong { 1.0 } else { 0.0 };
    }
    ((rtt - min) / (cong - min)).clamp(0.0, 1.0)
}

/// Replays the flow's RTT samples and loss events in time order.
pub fn discriminate(flow: &Flow, p: BbeParams) -> Bbe {
    let mut out = Bbe::default();
    let mut min: Option<f64> = None;
    let mut cong: Option<f64> = None;
    let mut rtt_i = 0;
    // Takes in the RTT samples up to `until`: RTTmin and the level each
    // sample had against the RTTcong known then.
    let mut take_samples = |until: i64, min: &mut Option<f64>, cong: Option<f64>, out: &mut Bbe| {
        while rtt_i < flow.rtt.len() && flow.rtt[rtt_i].t_ns <= until {
            let r = flow.rtt[rtt_i];
            let m = min.map_or(r.rtt_ns, |m| m.min(r.rtt_ns));
            *min = Some(m);
            out.levels
                .push((r.t_ns, cong.map(|c| level(r.rtt_ns, m, c))));
            rtt_i += 1;
        }
    };
    for loss in &flow.losses {
        take_samples(loss.t_ns, &mut min, cong, &mut out);
        let (lvl, class) = match (loss.rtt_before_ns, min, cong) {
            (Some(r), Some(m), Some(c)) => {
                let l = level(r, m, c);
                let class = if l >= p.congested_level {
                    LossClass::Congestion
                } else {
                    LossClass::Random
                };
                (l, class)
            }
            // The first event with an RTT sets RTTcong.
            (Some(_), _, None) => (1.0, LossClass::Congestion),
            // No RTT sample yet: nothing to judge by.
            (None, _, _) => (0.0, LossClass::Random),
            // Capture times out of order: the sample is "after" the loss.
            (Some(_), None, Some(_)) => (0.0, LossClass::Random),
        };
        out.verdicts.push(LossVerdict {
            t_ns: loss.t_ns,
            seq: loss.seq,
            segments: loss.segments,
            rtt_before_ns: loss.rtt_before_ns,
            rtt_min_ns: min,
            rtt_cong_ns: cong,
            level: lvl,
            class,
        });
        if class == LossClass::Congestion {
            if let Some(r) = loss.rtt_before_ns {
                cong = Some(cong.map_or(r, |c| (1.0 - p.smoothing) * c + p.smoothing * r));
            }
        }
    }
    take_samples(i64::MAX, &mut min, cong, &mut out);
    out.rtt_cong_ns = cong;
    out.rtt_min_ns = min;
    out
}

#[cfg(test)]
mod tests {
    use super::super::flow::{Flow, LossEvent, RttSample};
    use super::*;

    fn flow(rtts: &[(i64, f64)], losses: &[(i64, f64)]) -> Flow {
        Flow {
            rtt: rtts
                .iter()
                .map(|&(t, r)| RttSample { t_ns: t, rtt_ns: r })
                .collect(),
            losses: losses
                .iter()
                .map(|&(t, r)| LossEvent {
                    t_ns: t,
                    seq: 0,
                    segments: 1,
                    bytes: 1000,
                    rtt_before_ns: Some(r),
                })
                .collect(),
            ..Flow::default()
        }
    }

    /// RTTmin 100 (ms, say). Loss 1 at RTT 200 sets RTTcong = 200
    /// (congestion). Loss 2 at 120: c = 20 / 100 = 0.2, random, RTTcong
    /// stays. Loss 3 at 196: c = 0.96, congestion; RTTcong = 0.75 x 200 +
    /// 0.25 x 196 = 199. Buffer delay: median of {196, 200} (the upper
    /// of two) - 100 = 100.
    #[test]
    fn losses_by_hand() {
        let f = flow(
            &[(0, 100.0), (10, 200.0), (20, 120.0), (30, 196.0)],
            &[(15, 200.0), (25, 120.0), (35, 196.0)],
        );
        let b = discriminate(&f, BbeParams::default());
        let classes: Vec<LossClass> = b.verdicts.iter().map(|v| v.class).collect();
        assert_eq!(
            classes,
            vec![
                LossClass::Congestion,
                LossClass::Random,
                LossClass::Congestion
            ]
        );
        assert!((b.verdicts[1].level - 0.2).abs() < 1e-12);
        assert!((b.verdicts[2].level - 0.96).abs() < 1e-12);
        assert_eq!(b.rtt_cong_ns, Some(199.0));
        assert_eq!(b.rtt_min_ns, Some(100.0));
        assert_eq!(b.buffer_delay_ns(), Some(100.0));
        // 100 ns of queue at 8 Gbit/s: 100 bytes.
        assert_eq!(b.buffer_bytes(8e9), Some(100.0));
        assert_eq!(b.count(LossClass::Congestion), (2, 2));
        // Levels: none before the first loss, then against RTTcong 200.
        assert_eq!(b.levels[0], (0, None));
        assert_eq!(b.levels[2], (20, Some(0.2)));
    }

    #[test]
    fn no_losses_no_buffer() {
        let b = discriminate(&flow(&[(0, 100.0)], &[]), BbeParams::default());
        assert!(b.verdicts.is_empty() && b.buffer_delay_ns().is_none());
        assert_eq!(b.levels, vec![(0, None)]);
    }
}
