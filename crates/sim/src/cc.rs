//! Reference models of the kernel's congestion controllers for the flow
//! simulation, so that Rapid (\[BASS\] VII) meets them on the same path:
//! CUBIC (RFC 9438: C = 0.4, beta = 0.7, fast convergence, the
//! TCP-friendly region; slow start left on delay as Linux's HyStart does,
//! its threshold an eighth of the minimum RTT clamped to 4..16 ms) and
//! BBR v1 (Cardwell et al., "BBR: Congestion-Based Congestion Control",
//! ACM Queue 2016, and the IETF draft of 2017: bottleneck bandwidth as
//! the windowed maximum delivery rate over 10 round trips, the minimum
//! RTT over 10 s, start-up at gain 2/ln 2 until the bandwidth grew less
//! than 25 % in three rounds, drain, the eight-phase 1.25/0.75/1 gain
//! cycle, cwnd twice the BDP, PROBE_RTT at 4 packets for 200 ms).
//! Models, not the kernel: no SACK scoreboard, no delayed ACKs, one loss
//! response per round trip.

use std::collections::VecDeque;

use crate::flow::{Feedback, FlowController};

/// A window controller's send rule: now, while one more segment fits in
/// the window beside what is in flight.
fn window_has_room(now_ns: f64, inflight_bytes: u64, mss: f64, cwnd: f64) -> Option<f64> {
    (inflight_bytes as f64 + mss <= cwnd).then_some(now_ns)
}

/// CUBIC's window, in bytes, driven by per-packet feedback.
#[derive(Debug, Clone)]
pub struct Cubic {
    mss: f64,
    cwnd: f64,
    ssthresh: f64,
    w_max: f64,
    epoch_start_ns: Option<f64>,
    /// Sequence numbers below this were sent before the last reduction.
    recover_seq: u64,
    next_seq: u64,
    min_rtt_ns: f64,
    /// HyStart: the current round's end and its first RTT samples.
    round_end_seq: u64,
    round_min_rtt_ns: f64,
    round_samples: usize,
    last_round_min_rtt_ns: f64,
}

const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

impl Cubic {
    pub fn new(mss_bytes: u32) -> Self {
        let mss = mss_bytes as f64;
        Cubic {
            mss,
            // Linux's initial window: 10 segments.
            cwnd: 10.0 * mss,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            epoch_start_ns: None,
            recover_seq: 0,
            next_seq: 0,
            min_rtt_ns: f64::INFINITY,
            round_end_seq: 0,
            round_min_rtt_ns: f64::INFINITY,
            round_samples: 0,
            last_round_min_rtt_ns: f64::INFINITY,
        }
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd
    }

    fn on_ack(&mut self, fb: &Feedback) {
        let rtt = fb.now_ns - fb.sent_ns;
        self.min_rtt_ns = self.min_rtt_ns.min(rtt);
        if self.cwnd < self.ssthresh {
            self.cwnd += fb.bytes as f64;
            self.hystart(fb.seq, rtt);
            return;
        }
        let now = fb.now_ns;
        let start = *self.epoch_start_ns.get_or_insert(now);
        let w_max = self.w_max.max(self.cwnd) / self.mss;
        let k = (w_max * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        let t = (now - start + self.min_rtt_ns) / 1e9;
        let target = CUBIC_C * (t - k).powi(3) + w_max;
        let cwnd = self.cwnd / self.mss;
        let mut grow = if target > cwnd {
            (target - cwnd) / cwnd
        } else {
            0.01 / cwnd
        };
        // The TCP-friendly region: at least what Reno would have.
        let rtt_s = self.min_rtt_ns / 1e9;
        let w_est = w_max * CUBIC_BETA
            + 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA) * ((now - start) / 1e9 / rtt_s);
        if w_est > cwnd {
            grow = grow.max((w_est - cwnd) / cwnd);
        }
        self.cwnd += grow * self.mss;
    }

    /// Leaves slow start when a round's RTT rose by the delay threshold.
    fn hystart(&mut self, seq: u64, rtt: f64) {
        if seq >= self.round_end_seq {
            self.last_round_min_rtt_ns = self.round_min_rtt_ns;
            self.round_min_rtt_ns = f64::INFINITY;
            self.round_samples = 0;
            self.round_end_seq = self.next_seq;
        }
        if self.round_samples < 8 {
            self.round_samples += 1;
            self.round_min_rtt_ns = self.round_min_rtt_ns.min(rtt);
            if self.round_samples == 8 && self.last_round_min_rtt_ns.is_finite() {
                let eta = (self.min_rtt_ns / 8.0).clamp(4e6, 16e6);
                if self.round_min_rtt_ns >= self.last_round_min_rtt_ns + eta {
                    self.ssthresh = self.cwnd;
                }
            }
        }
    }

    fn on_loss(&mut self, fb: &Feedback) {
        if fb.seq < self.recover_seq {
            return;
        }
        self.recover_seq = self.next_seq;
        // Fast convergence: a flow whose window shrank since the last
        // loss gives up more.
        self.w_max = if self.cwnd < self.w_max {
            self.cwnd * (1.0 + CUBIC_BETA) / 2.0
        } else {
            self.cwnd
        };
        self.cwnd = (self.cwnd * CUBIC_BETA).max(2.0 * self.mss);
        self.ssthresh = self.cwnd;
        self.epoch_start_ns = None;
    }
}

impl FlowController for Cubic {
    fn name(&self) -> String {
        "cubic".into()
    }

    fn next_send_ns(&mut self, now_ns: f64, inflight_bytes: u64) -> Option<f64> {
        window_has_room(now_ns, inflight_bytes, self.mss, self.cwnd)
    }

    fn on_send(&mut self, seq: u64, _bytes: u32, _at_ns: f64, _delivered: u64) {
        self.next_seq = seq + 1;
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        match fb.recv_stamp_ns {
            Some(_) => self.on_ack(fb),
            None => self.on_loss(fb),
        }
    }
}

/// NewReno (RFC 6582's window; RFC 5681's slow start and congestion
/// avoidance): the reference TCPW BBE is judged against. Slow start
/// from 10 segments, one segment a round trip after, half the window at
/// a loss (once per window of data), as in the CUBIC model above.
#[derive(Debug, Clone)]
pub struct NewReno {
    mss: f64,
    cwnd: f64,
    ssthresh: f64,
    recover_seq: u64,
    next_seq: u64,
}

impl NewReno {
    pub fn new(mss_bytes: u32) -> Self {
        let mss = mss_bytes as f64;
        NewReno {
            mss,
            cwnd: 10.0 * mss,
            ssthresh: f64::INFINITY,
            recover_seq: 0,
            next_seq: 0,
        }
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd
    }
}

impl FlowController for NewReno {
    fn name(&self) -> String {
        "newreno".into()
    }

    fn next_send_ns(&mut self, now_ns: f64, inflight_bytes: u64) -> Option<f64> {
        window_has_room(now_ns, inflight_bytes, self.mss, self.cwnd)
    }

    fn on_send(&mut self, seq: u64, _bytes: u32, _at_ns: f64, _delivered: u64) {
        self.next_seq = seq + 1;
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        match fb.recv_stamp_ns {
            Some(_) if self.cwnd < self.ssthresh => self.cwnd += fb.bytes as f64,
            Some(_) => self.cwnd += self.mss * fb.bytes as f64 / self.cwnd,
            None if fb.seq >= self.recover_seq => {
                self.recover_seq = self.next_seq;
                self.cwnd = (self.cwnd / 2.0).max(2.0 * self.mss);
                self.ssthresh = self.cwnd;
            }
            None => {}
        }
    }
}

/// TCP Westwood BBE (\[TCPW\] section 4) on the simulator: the core's
/// controller ([`tightlink_core::tcp::bbe_cc`]), fed each packet's RTT
/// and losses.
#[derive(Debug, Clone)]
pub struct BbeFlow {
    pub controller: tightlink_core::tcp::bbe_cc::BbeController,
    mss: f64,
}

impl BbeFlow {
    /// Keeping the controller's trace every `period_ns` of ACKs.
    pub fn with_trace(mut self, period_ns: i64) -> Self {
        self.controller = self.controller.with_trace(period_ns);
        self
    }

    pub fn new(mss_bytes: u32) -> Self {
        BbeFlow {
            controller: tightlink_core::tcp::bbe_cc::BbeController::new(
                tightlink_core::tcp::bbe_cc::BbeCcParams {
                    mss_bytes,
                    ..Default::default()
                },
            ),
            mss: mss_bytes as f64,
        }
    }
}

impl FlowController for BbeFlow {
    fn name(&self) -> String {
        "bbe".into()
    }

    fn next_send_ns(&mut self, now_ns: f64, inflight_bytes: u64) -> Option<f64> {
        window_has_room(
            now_ns,
            inflight_bytes,
            self.mss,
            self.controller.cwnd_bytes(),
        )
    }

    fn on_send(&mut self, seq: u64, _bytes: u32, _at_ns: f64, _delivered: u64) {
        self.controller.on_send(seq);
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        let now = fb.now_ns.round() as i64;
        match fb.recv_stamp_ns {
            Some(_) => self
                .controller
                .on_ack(now, fb.sent_ns.round() as i64, u64::from(fb.bytes)),
            None => {
                self.controller.on_loss(now, fb.seq);
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BbrMode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// BBR v1's model of the path and its pacing.
#[derive(Debug, Clone)]
pub struct Bbr {
    mss: f64,
    mode: BbrMode,
    /// Delivery-rate samples per round: (round, max rate) of the last 10.
    bw_rounds: VecDeque<(u64, f64)>,
    min_rtt_ns: f64,
    min_rtt_at_ns: f64,
    round: u64,
    round_end_seq: u64,
    next_seq: u64,
    /// Per packet sent: (seq, sent_ns, delivered bytes when sent, time of
    /// that delivery).
    sent: VecDeque<(u64, f64, u64, f64)>,
    last_delivered_ns: f64,
    full_bw: f64,
    full_bw_rounds: u32,
    cycle_index: usize,
    cycle_start_ns: f64,
    probe_rtt_done_ns: Option<f64>,
    next_send_ns: f64,
    inflight: u64,
}

const BBR_HIGH_GAIN: f64 = 2.885;
const BBR_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];

impl Bbr {
    pub fn new(mss_bytes: u32) -> Self {
        Bbr {
            mss: mss_bytes as f64,
            mode: BbrMode::Startup,
            bw_rounds: VecDeque::new(),
            min_rtt_ns: f64::INFINITY,
            min_rtt_at_ns: 0.0,
            round: 0,
            round_end_seq: 0,
            next_seq: 0,
            sent: VecDeque::new(),
            last_delivered_ns: 0.0,
            full_bw: 0.0,
            full_bw_rounds: 0,
            cycle_index: 0,
            cycle_start_ns: 0.0,
            probe_rtt_done_ns: None,
            next_send_ns: 0.0,
            inflight: 0,
        }
    }

    /// The windowed maximum delivery rate, bit/s.
    pub fn btl_bw_bps(&self) -> f64 {
        self.bw_rounds.iter().map(|r| r.1).fold(0.0, f64::max)
    }

    fn pacing_gain(&self) -> f64 {
        match self.mode {
            BbrMode::Startup => BBR_HIGH_GAIN,
            BbrMode::Drain => 1.0 / BBR_HIGH_GAIN,
            BbrMode::ProbeBw => BBR_CYCLE[self.cycle_index],
            BbrMode::ProbeRtt => 1.0,
        }
    }

    fn bdp_bytes(&self) -> f64 {
        if !self.min_rtt_ns.is_finite() || self.btl_bw_bps() <= 0.0 {
            return 10.0 * self.mss;
        }
        self.btl_bw_bps() / 8.0 * self.min_rtt_ns / 1e9
    }

    fn cwnd_bytes(&self) -> f64 {
        match self.mode {
            BbrMode::ProbeRtt => 4.0 * self.mss,
            BbrMode::Startup | BbrMode::Drain => {
                (BBR_HIGH_GAIN * self.bdp_bytes()).max(10.0 * self.mss)
            }
            BbrMode::ProbeBw => (2.0 * self.bdp_bytes()).max(4.0 * self.mss),
        }
    }

    fn pacing_bps(&self) -> f64 {
        let bw = self.btl_bw_bps();
        if bw <= 0.0 {
            // Before a sample: the initial window over a guessed 1 ms.
            return 10.0 * self.mss * 8.0 / 1e-3;
        }
        self.pacing_gain() * bw
    }

    fn on_ack(&mut self, fb: &Feedback) {
        let now = fb.now_ns;
        let rtt = now - fb.sent_ns;
        // Rate sample: data delivered since this packet was sent over the
        // time since the delivery then.
        while self.sent.front().is_some_and(|s| s.0 < fb.seq) {
            self.sent.pop_front();
        }
        if let Some(&(_, _, delivered_then, at)) = self.sent.front().filter(|s| s.0 == fb.seq) {
            self.sent.pop_front();
            let interval = (now - at).max(fb.now_ns - fb.sent_ns);
            if interval > 0.0 {
                let rate = (fb.delivered_bytes - delivered_then) as f64 * 8e9 / interval;
                match self.bw_rounds.back_mut() {
                    Some(r) if r.0 == self.round => r.1 = r.1.max(rate),
                    _ => self.bw_rounds.push_back((self.round, rate)),
                }
                while self
                    .bw_rounds
                    .front()
                    .is_some_and(|r| r.0 + 10 <= self.round)
                {
                    self.bw_rounds.pop_front();
                }
            }
        }
        self.last_delivered_ns = now;
        if rtt <= self.min_rtt_ns || now - self.min_rtt_at_ns > 10e9 {
            if self.mode != BbrMode::ProbeRtt
                && now - self.min_rtt_at_ns > 10e9
                && self.min_rtt_ns.is_finite()
            {
                self.mode = BbrMode::ProbeRtt;
                self.probe_rtt_done_ns = None;
            }
            self.min_rtt_ns = rtt;
            self.min_rtt_at_ns = now;
        }
        let round_ended = fb.seq >= self.round_end_seq;
        if round_ended {
            self.round += 1;
            self.round_end_seq = self.next_seq;
        }
        match self.mode {
            BbrMode::Startup => {
                if round_ended {
                    let bw = self.btl_bw_bps();
                    if bw >= self.full_bw * 1.25 {
                        self.full_bw = bw;
                        self.full_bw_rounds = 0;
                    } else {
                        self.full_bw_rounds += 1;
                        if self.full_bw_rounds >= 3 {
                            self.mode = BbrMode::Drain;
                        }
                    }
                }
            }
            BbrMode::Drain => {
                if (self.inflight as f64) <= self.bdp_bytes() {
                    self.mode = BbrMode::ProbeBw;
                    // The kernel starts the cycle at a random phase other
                    // than the 0.75 one; the 1.0 after it is ours.
                    self.cycle_index = 2;
                    self.cycle_start_ns = now;
                }
            }
            BbrMode::ProbeBw => {
                if now - self.cycle_start_ns > self.min_rtt_ns {
                    self.cycle_index = (self.cycle_index + 1) % BBR_CYCLE.len();
                    self.cycle_start_ns = now;
                }
            }
            BbrMode::ProbeRtt => match self.probe_rtt_done_ns {
                None if (self.inflight as f64) <= 4.0 * self.mss => {
                    self.probe_rtt_done_ns = Some(now + 200e6);
                }
                Some(done) if now >= done => {
                    self.min_rtt_at_ns = now;
                    self.mode = BbrMode::ProbeBw;
                    self.cycle_index = 2;
                    self.cycle_start_ns = now;
                }
                _ => {}
            },
        }
    }
}

impl FlowController for Bbr {
    fn name(&self) -> String {
        "bbr".into()
    }

    fn next_send_ns(&mut self, now_ns: f64, inflight_bytes: u64) -> Option<f64> {
        self.inflight = inflight_bytes;
        (inflight_bytes as f64 + self.mss <= self.cwnd_bytes())
            .then(|| self.next_send_ns.max(now_ns))
    }

    fn on_send(&mut self, seq: u64, bytes: u32, at_ns: f64, delivered: u64) {
        self.next_seq = seq + 1;
        let at_delivery = if self.sent.is_empty() && self.last_delivered_ns < at_ns {
            // Nothing in flight: the interval starts now.
            at_ns
        } else {
            self.last_delivered_ns
        };
        self.sent.push_back((seq, at_ns, delivered, at_delivery));
        self.next_send_ns = at_ns + bytes as f64 * 8e9 / self.pacing_bps();
    }

    fn on_feedback(&mut self, fb: &Feedback) {
        if fb.recv_stamp_ns.is_some() {
            self.on_ack(fb);
        }
        // BBR v1 does not respond to loss beyond what the delivery rate
        // shows (packet conservation in recovery is not modelled).
    }

    fn target_bps(&self) -> Option<f64> {
        Some(self.pacing_bps())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(seq: u64, sent_ns: f64, now_ns: f64, delivered: u64) -> Feedback {
        Feedback {
            seq,
            bytes: 1000,
            sent_ns,
            now_ns,
            recv_stamp_ns: Some(0),
            delivered_bytes: delivered,
        }
    }

    /// Slow start doubles the window per round (10 -> 20 segments of
    /// 1000 B after ten acks); a loss then cuts it to 0.7 x 20 = 14 and
    /// a second loss from the same window does not cut again.
    #[test]
    fn cubic_slow_start_and_one_cut_per_window() {
        let mut c = Cubic::new(1000);
        for s in 0..10 {
            c.on_send(s, 1000, 0.0, 0);
        }
        for s in 0..10 {
            c.on_feedback(&ack(s, 0.0, 10e6, (s + 1) * 1000));
        }
        assert_eq!(c.cwnd_bytes(), 20_000.0);
        for s in 10..30 {
            c.on_send(s, 1000, 10e6, 0);
        }
        let lost = |seq| Feedback {
            recv_stamp_ns: None,
            ..ack(seq, 10e6, 20e6, 10_000)
        };
        c.on_feedback(&lost(12));
        assert_eq!(c.cwnd_bytes(), 14_000.0);
        c.on_feedback(&lost(15));
        assert_eq!(c.cwnd_bytes(), 14_000.0);
    }

    /// After a loss at W_max = 1000 segments the window is 700; on a
    /// 100 ms round trip (where the TCP-friendly window grows only 5.3
    /// segments a second) it follows CUBIC's curve, which looks one RTT
    /// ahead: W(t) = 0.4 (t + 0.1 - K)^3 + 1000 segments with
    /// K = cbrt(1000 x 0.3 / 0.4) = 9.086 s: 796 at 1 s, 964 at 4.5 s,
    /// 1000 at 9 s (each within 2 %: the window trails the curve by the
    /// growth of about one round trip).
    #[test]
    fn cubic_follows_its_curve_back_to_w_max() {
        let mut c = Cubic::new(1000);
        c.cwnd = 1_000_000.0;
        c.ssthresh = 500_000.0;
        c.next_seq = 1;
        c.on_feedback(&Feedback {
            recv_stamp_ns: None,
            ..ack(0, 0.0, 1e6, 0)
        });
        assert_eq!(c.cwnd_bytes(), 700_000.0);
        let rtt = 100e6;
        let mut t = 1e6;
        let mut seq = 1;
        let mut at = Vec::new();
        // An ack every 100 us: about a window's worth per round trip.
        for check_s in [1.0, 4.5, 9.0] {
            while t - 1e6 < check_s * 1e9 {
                t += 100_000.0;
                c.on_send(seq, 1000, t - rtt, 0);
                c.on_feedback(&ack(seq, t - rtt, t, 0));
                seq += 1;
            }
            at.push(c.cwnd_bytes() / 1000.0);
        }
        for (w, want) in at.iter().zip([796.0, 964.0, 1000.0]) {
            assert!((w / want - 1.0).abs() < 0.02, "{at:?}");
        }
    }

    /// BBR's rate sample: 10 packets, each sent when the one before was
    /// acknowledged and acknowledged 1 ms later, 1000 B each: 8 Mbit/s,
    /// the bottleneck bandwidth it keeps. Each ack ends a round (one
    /// packet in flight); three rounds without 25 % more bandwidth end
    /// start-up, and drain paces at 8 / 2.885 Mbit/s.
    #[test]
    fn bbr_measures_the_delivery_rate_and_leaves_start_up() {
        let mut b = Bbr::new(1000);
        let mut delivered = 0;
        for s in 0..3u64 {
            let at = s as f64 * 1e6;
            b.on_send(s, 1000, at, delivered);
            delivered += 1000;
            b.on_feedback(&ack(s, at, at + 1e6, delivered));
        }
        let bw = b.btl_bw_bps();
        assert!((bw / 8e6 - 1.0).abs() < 0.01, "{bw}");
        assert_eq!(b.mode, BbrMode::Startup);
        assert!((b.pacing_bps() / (2.885 * 8e6) - 1.0).abs() < 0.01);
        for s in 3..10u64 {
            let at = s as f64 * 1e6;
            b.on_send(s, 1000, at, delivered);
            delivered += 1000;
            b.on_feedback(&ack(s, at, at + 1e6, delivered));
        }
        assert_ne!(b.mode, BbrMode::Startup);
        assert!((b.btl_bw_bps() / 8e6 - 1.0).abs() < 0.01);
    }
}
