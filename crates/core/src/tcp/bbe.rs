//! TCPW BBE's loss discrimination and buffer estimate (\[TCPW\],
//! sections 3.1 and 4).
//!
//! - RTTcong, the RTT expected when a packet is lost to congestion. The
//!   paper smooths the RTTs before congestion losses "with an adaptive
//!   moving average filter" without details. Here it is the second-highest
//!   RTT before a loss among the last `window` loss events (the highest
//!   while only one is known; the first event sets it: losses are "mainly
//!   due to congestion"). `RTT_j`, the RTT before event `j`, is the median
//!   of the last three samples (one late ACK must not stand for the queue).
//!   Why not a moving average of the congestion losses alone: a first loss
//!   whose RTT a busy host inflated (slow start's overshoot) set it half
//!   as high again as a full queue, every later overflow then read "random"
//!   and nothing brought it down. A drop-tail queue overflows at the same
//!   RTT each time, so the upper end of the recent loss RTTs is where it
//!   stands; the second-highest lets one outlier go, and random losses
//!   below it do not drag it down.
//! - The congestion level `c = min((RTT - RTTmin) / (RTTcong - RTTmin), 1)`
//!   with RTTmin the smallest RTT seen so far.
//! - A loss is congestion when `c >= congested_level` at it (ours: the
//!   paper reacts to `c` continuously), random otherwise.
//! - The bottleneck buffer: the RTT before congestion losses (their
//!   median: the peak of the paper's Fig. 3 histogram) minus RTTmin, times
//!   the capacity.

use std::collections::VecDeque;

use super::flow::Flow;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbeParams {
    /// Loss events RTTcong looks back over (ours: the paper does not give
    /// its filter).
    pub window: usize,
    /// Congestion level from which a loss counts as congestion.
    pub congested_level: f64,
}

impl Default for BbeParams {
    fn default() -> Self {
        BbeParams {
            window: 20,
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

/// RTTcong from the RTTs before the recent loss events: the second
/// highest, the highest while there is only one, none before the first.
fn rtt_cong(recent: &VecDeque<f64>) -> Option<f64> {
    let mut top = [f64::NEG_INFINITY; 2];
    for &r in recent {
        if r > top[0] {
            top = [r, top[0]];
        } else if r > top[1] {
            top[1] = r;
        }
    }
    match recent.len() {
        0 => None,
        1 => Some(top[0]),
        _ => Some(top[1]),
    }
}

/// Replays the flow's RTT samples and loss events in time order.
pub fn discriminate(flow: &Flow, p: BbeParams) -> Bbe {
    let mut out = Bbe::default();
    let mut min: Option<f64> = None;
    let window = p.window.max(1);
    let mut recent: VecDeque<f64> = VecDeque::with_capacity(window);
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
        let cong = rtt_cong(&recent);
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
        if let Some(r) = loss.rtt_before_ns {
            if recent.len() == window {
                recent.pop_front();
            }
            recent.push_back(r);
        }
    }
    let cong = rtt_cong(&recent);
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

    /// RTTmin 100 (ms, say). Loss 1 at RTT 300 (a queue inflated by a
    /// busy host) sets RTTcong = 300 (congestion). Loss 2 at 200 (the
    /// full queue): c = 100 / 200 = 0.5, random. Loss 3 at 198: RTTcong is
    /// now the second highest of {300, 200} = 200, c = 98 / 100 = 0.98,
    /// congestion. Loss 4 at 140: RTTcong 200 (second of {300, 200, 198}),
    /// c = 0.4, random. Loss 5 at 201: c = min(101 / 100, 1) = 1,
    /// congestion; afterwards RTTcong = 201. A moving average of the
    /// congestion losses alone would have stayed at 300 and called losses
    /// 2-5 random. Buffer delay: median of {198, 201, 300} - 100 = 101.
    #[test]
    fn losses_by_hand() {
        let f = flow(
            &[
                (0, 100.0),
                (10, 300.0),
                (20, 200.0),
                (30, 198.0),
                (40, 140.0),
                (50, 201.0),
            ],
            &[
                (15, 300.0),
                (25, 200.0),
                (35, 198.0),
                (45, 140.0),
                (55, 201.0),
            ],
        );
        let b = discriminate(&f, BbeParams::default());
        let classes: Vec<LossClass> = b.verdicts.iter().map(|v| v.class).collect();
        use LossClass::{Congestion as C, Random as R};
        assert_eq!(classes, vec![C, R, C, R, C]);
        let cong: Vec<Option<f64>> = b.verdicts.iter().map(|v| v.rtt_cong_ns).collect();
        assert_eq!(
            cong,
            vec![None, Some(300.0), Some(200.0), Some(200.0), Some(200.0)]
        );
        let levels: Vec<f64> = b.verdicts.iter().map(|v| v.level).collect();
        for (got, want) in levels.iter().zip([1.0, 0.5, 0.98, 0.4, 1.0]) {
            assert!((got - want).abs() < 1e-12, "{levels:?}");
        }
        assert_eq!(b.rtt_cong_ns, Some(201.0));
        assert_eq!(b.rtt_min_ns, Some(100.0));
        assert_eq!(b.buffer_delay_ns(), Some(101.0));
        // 101 ns of queue at 8 Gbit/s: 101 bytes.
        assert_eq!(b.buffer_bytes(8e9), Some(101.0));
        assert_eq!(b.count(LossClass::Congestion), (3, 3));
        // Levels: none before the first loss, then against the RTTcong
        // known at each sample (300 before loss 2, 200 before loss 3).
        assert_eq!(b.levels[1], (10, None));
        assert_eq!(b.levels[2], (20, Some(0.5)));
        assert_eq!(b.levels[3], (30, Some(0.98)));
    }

    /// Two inflated losses hold RTTcong up only while they are in the
    /// window: with a window of 3, losses at 300, 300, then 200 four
    /// times (RTTmin 100): RTTcong 300, 300, 300, 300 (second of {300,
    /// 300, 200}), then 200 (second of {300, 200, 200}) and 200, so the
    /// last two losses read congestion.
    #[test]
    fn old_losses_leave_the_window() {
        let losses = [
            (15, 300.0),
            (25, 300.0),
            (35, 200.0),
            (45, 200.0),
            (55, 200.0),
            (65, 200.0),
        ];
        let f = flow(&[(0, 100.0)], &losses);
        let p = BbeParams {
            window: 3,
            ..BbeParams::default()
        };
        let b = discriminate(&f, p);
        let cong: Vec<Option<f64>> = b.verdicts.iter().map(|v| v.rtt_cong_ns).collect();
        let want = [
            None,
            Some(300.0),
            Some(300.0),
            Some(300.0),
            Some(200.0),
            Some(200.0),
        ];
        assert_eq!(cong, want);
        let classes: Vec<LossClass> = b.verdicts.iter().map(|v| v.class).collect();
        use LossClass::{Congestion as C, Random as R};
        assert_eq!(classes, vec![C, C, R, R, C, C]);
    }

    proptest::proptest! {
        /// Whatever came before, and however high one earlier loss's RTT
        /// read: two losses in a row at an RTT no other loss in the window
        /// exceeded, the second is called congestion (the queue overflows
        /// at the same RTT each time).
        #[test]
        fn one_outlier_cannot_hide_a_full_queue(
            before in proptest::collection::vec(110.0f64..200.0, 0..30),
            outlier in 200.0f64..1e6,
            at in 0usize..30,
        ) {
            let p = BbeParams::default();
            let mut rtts = before.clone();
            rtts.insert(at.min(rtts.len()), outlier);
            // The last `window - 2` losses before the pair, so all sit in
            // the window the second of the pair is judged against.
            let keep = p.window - 2;
            let rtts = rtts[rtts.len().saturating_sub(keep)..].to_vec();
            let full = rtts.iter().copied().filter(|&r| r != outlier).fold(150.0, f64::max);
            let mut losses: Vec<(i64, f64)> =
                rtts.iter().enumerate().map(|(i, &r)| (10 + 10 * i as i64, r)).collect();
            let n = losses.len() as i64;
            losses.push((10 + 10 * n, full));
            losses.push((20 + 10 * n, full));
            let b = discriminate(&flow(&[(0, 100.0)], &losses), p);
            let last = b.verdicts.last().unwrap();
            proptest::prop_assert_eq!(last.class, LossClass::Congestion, "{:?}", b.verdicts);
        }
    }

    #[test]
    fn no_losses_no_buffer() {
        let b = discriminate(&flow(&[(0, 100.0)], &[]), BbeParams::default());
        assert!(b.verdicts.is_empty() && b.buffer_delay_ns().is_none());
        assert_eq!(b.levels, vec![(0, None)]);
    }
}
