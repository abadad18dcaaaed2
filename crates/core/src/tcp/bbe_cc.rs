//! TCP Westwood BBE as a congestion controller (\[TCPW\], section 4): a
//! NewReno window whose reaction to a loss is set by the congestion
//! level at it. Pure: ACKs and losses in, with the time passed in; the
//! window out.
//!
//! - The estimates, online: BE (Westwood's low-pass filter over each
//!   ACK's delivered bytes per inter-ACK time, as in [`westwood`](mod@super::westwood),
//!   but only where the two packets were sent closer together than their
//!   ACKs came (by [`BbeCcParams::min_spread`]): a packet pair the
//!   bottleneck spread; a gap the sender
//!   left idle says nothing of the bottleneck, and a window-limited flow
//!   would otherwise read its own rate as the pipe's), RE (bytes
//!   acknowledged over the last `tau`), with `tau` four times RTTmin (at
//!   least 1 ms).
//! - RTTmin, the smallest RTT seen; the RTT at a loss, the median of the
//!   last three samples (one late ACK must not stand for the queue).
//! - RTTcong, the RTT expected at a congestion loss. The paper smooths
//!   the RTTs before congestion losses with "an adaptive moving average
//!   filter" and gives no details; ours: an exponential average with gain
//!   1/4 over the losses that met a queue (their RTT at least `floor`
//!   above RTTmin: 1 ms or 5 % of RTTmin, whichever is more; jitter alone
//!   is no queue). Losses on an empty pipe leave it; every loss with a
//!   queue moves it, so an estimate set too high (by a pause's RTT) comes
//!   down to where the queue overflows, and random losses with some queue
//!   make the flow more cautious, not less. Before the first such loss it
//!   is the largest RTT seen, and it never sits under the floor.
//! - The congestion level `c = min((RTT - RTTmin) / (RTTcong - RTTmin), 1)`.
//! - ERE = `(1 - c) BE + c RE`: near BE after a random loss on an empty
//!   pipe, RE as congestion grows.
//! - The window after a loss ([`loss_window`]): ERE x RTTmin, between
//!   NewReno's half and `cwnd (1 - c / 2)`, and at most BE x RTTcong (the
//!   window that fills the buffer the estimates imply). At `c = 1` that
//!   is NewReno's halving; at `c = 0` on a pipe not yet full, no cut.
//!   The window takes it; the slow start threshold is `(1 - c)` of the
//!   pipe ERE x RTTmin (never under the window) plus `c` of the window:
//!   after a random loss on an empty pipe the flow slow-starts back to
//!   the pipe, as Westwood's `ssthresh = BWE x RTTmin` does, and after an
//!   overflow it grows as NewReno does. The paper reacts to `c`
//!   continuously and gives no formula for the blend; the bounds are
//!   ours.
//! - Slow start under the threshold (once BE is known) grows by what the
//!   pipe and the buffer allow: each ACK adds `acked x s`, `s` the least
//!   of 1, the room left in the pipe `BE x RTTmin / cwnd - 1`, and half
//!   the buffer estimate over the window `BE (RTTcong - RTTmin) / 2 cwnd`.
//!   A window's ACKs come back at the bottleneck's rate and each sends
//!   `1 + s` packets at once, so a round queues `s cwnd` bytes: a
//!   doubling after a random loss overflowed a buffer a tenth of the pipe
//!   and the flow lost 5-13 % of its packets on the simulator. Where that
//!   growth falls under congestion avoidance's (one segment a window),
//!   slow start ends: it would only near the pipe, never probe past it.
//! - One reaction per window of data (NewReno's recovery): losses of
//!   packets sent before the last reaction are not reacted to again.

use std::collections::VecDeque;

/// The average's gain toward each queued loss's RTT.
pub const RTT_CONG_GAIN: f64 = 0.25;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbeCcParams {
    pub mss_bytes: u32,
    /// Linux's initial window: 10 segments.
    pub initial_window_segments: u32,
    /// BE counts an ACK pair only where the ACKs came at least this many
    /// times as far apart as the packets were sent. 1 for a sender that
    /// sends what each ACK frees at once; a paced sender's own gaps,
    /// stretched a little by jitter on the way, must not read as the
    /// bottleneck's (the transfer engine's pairs use 2).
    pub min_spread: f64,
}

impl Default for BbeCcParams {
    fn default() -> Self {
        BbeCcParams {
            mss_bytes: 1448,
            initial_window_segments: 10,
            min_spread: 1.0,
        }
    }
}

/// What the controller did at a loss it reacted to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LossReaction {
    pub t_ns: i64,
    pub rtt_ns: f64,
    pub rtt_min_ns: f64,
    pub rtt_cong_ns: f64,
    /// The congestion level at the loss.
    pub c: f64,
    pub be_bps: f64,
    pub re_bps: f64,
    pub ere_bps: f64,
    pub cwnd_before_bytes: f64,
    pub cwnd_after_bytes: f64,
    pub ssthresh_after_bytes: f64,
}

impl LossReaction {
    /// A congestion loss by the passive estimator's threshold
    /// ([`super::BbeParams::congested_level`]'s default).
    pub fn is_congestion(&self) -> bool {
        self.c >= super::BbeParams::default().congested_level
    }
}

/// `min((rtt - min) / (cong - min), 1)`, 0 where the RTT is at its
/// minimum; 1 where RTTcong is no higher than RTTmin.
pub fn congestion_level(rtt_ns: f64, rtt_min_ns: f64, rtt_cong_ns: f64) -> f64 {
    let span = rtt_cong_ns - rtt_min_ns;
    if span <= 0.0 {
        return 1.0;
    }
    ((rtt_ns - rtt_min_ns) / span).clamp(0.0, 1.0)
}

/// ERE: `(1 - c) BE + c RE`.
pub fn ere_bps(be_bps: f64, re_bps: f64, c: f64) -> f64 {
    (1.0 - c) * be_bps + c * re_bps
}

/// The window after a loss at congestion level `c`: ERE x RTTmin within
/// `[cwnd / 2, cwnd (1 - c / 2)]`, then at most BE x RTTcong (but not
/// under the half), and at least two segments. Bytes.
pub fn loss_window(
    cwnd_bytes: f64,
    c: f64,
    be_bps: f64,
    re_bps: f64,
    rtt_min_ns: f64,
    rtt_cong_ns: f64,
    mss_bytes: u32,
) -> f64 {
    let half = cwnd_bytes / 2.0;
    let high = cwnd_bytes * (1.0 - c / 2.0);
    let pipe = ere_bps(be_bps, re_bps, c) * rtt_min_ns / 8e9;
    let full = be_bps * rtt_cong_ns / 8e9;
    pipe.clamp(half, high)
        .min(full.max(half))
        .max(2.0 * mss_bytes as f64)
}

/// The least queueing delay that counts as a queue: 1 ms or 5 % of
/// RTTmin.
pub fn queue_floor_ns(rtt_min_ns: f64) -> f64 {
    (0.05 * rtt_min_ns).max(1e6)
}

/// The slow start threshold after a loss at level `c` that left the
/// window at `window_bytes`: `(1 - c) max(window, ERE x RTTmin) + c
/// window`.
pub fn loss_ssthresh(window_bytes: f64, c: f64, ere_bps: f64, rtt_min_ns: f64) -> f64 {
    let pipe = (ere_bps * rtt_min_ns / 8e9).max(window_bytes);
    (1.0 - c) * pipe + c * window_bytes
}

/// RTTcong's exponential average: a loss that met a queue moves it by
/// [`RTT_CONG_GAIN`] toward its RTT; one on an empty pipe leaves it.
pub fn update_rtt_cong(rtt_cong_ns: f64, rtt_loss_ns: f64, rtt_min_ns: f64) -> f64 {
    if rtt_loss_ns >= rtt_min_ns + queue_floor_ns(rtt_min_ns) {
        rtt_cong_ns + RTT_CONG_GAIN * (rtt_loss_ns - rtt_cong_ns)
    } else {
        rtt_cong_ns
    }
}

/// The controller's state after an ACK, for plots (TCPW's Figs. 6, 7).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BbeTracePoint {
    pub t_ns: i64,
    pub rtt_ns: f64,
    pub rtt_min_ns: f64,
    pub rtt_cong_ns: f64,
    pub cwnd_bytes: f64,
}

/// The BBE window controller.
#[derive(Debug, Clone)]
pub struct BbeController {
    p: BbeCcParams,
    cwnd: f64,
    ssthresh: f64,
    rtt_min_ns: f64,
    rtt_max_ns: f64,
    /// Set by the first loss that met a queue.
    rtt_cong_ns: Option<f64>,
    last_rtts: VecDeque<f64>,
    be_bps: f64,
    /// (ACK time, send time, sample) of the previous ACK.
    prev_ack: Option<(i64, i64, f64)>,
    re_window: VecDeque<(i64, u64)>,
    re_bytes: u64,
    next_seq: u64,
    recover_seq: u64,
    reactions: Vec<LossReaction>,
    /// Kept every this many ns, when asked for ([`Self::with_trace`]).
    trace_period_ns: Option<i64>,
    trace: Vec<BbeTracePoint>,
}

impl BbeController {
    pub fn new(p: BbeCcParams) -> BbeController {
        let w = (p.initial_window_segments * p.mss_bytes) as f64;
        BbeController {
            p,
            cwnd: w,
            ssthresh: f64::INFINITY,
            rtt_min_ns: f64::INFINITY,
            rtt_max_ns: 0.0,
            rtt_cong_ns: None,
            last_rtts: VecDeque::with_capacity(3),
            be_bps: 0.0,
            prev_ack: None,
            re_window: VecDeque::new(),
            re_bytes: 0,
            next_seq: 0,
            recover_seq: 0,
            reactions: Vec::new(),
            trace_period_ns: None,
            trace: Vec::new(),
        }
    }

    /// Keeps a [`BbeTracePoint`] at most every `period_ns` of ACKs.
    pub fn with_trace(mut self, period_ns: i64) -> BbeController {
        self.trace_period_ns = Some(period_ns.max(1));
        self
    }

    /// The points kept so far.
    pub fn trace(&self) -> &[BbeTracePoint] {
        &self.trace
    }

    pub fn cwnd_bytes(&self) -> f64 {
        self.cwnd
    }

    pub fn ssthresh_bytes(&self) -> f64 {
        self.ssthresh
    }

    pub fn be_bps(&self) -> f64 {
        self.be_bps
    }

    fn tau_ns(&self) -> f64 {
        if self.rtt_min_ns.is_finite() {
            (4.0 * self.rtt_min_ns).max(1e6)
        } else {
            1e6
        }
    }

    pub fn re_bps(&self) -> f64 {
        self.re_bytes as f64 * 8e9 / self.tau_ns()
    }

    pub fn rtt_min_ns(&self) -> f64 {
        self.rtt_min_ns
    }

    /// RTTcong in use: the estimate, or before one the largest RTT seen,
    /// at least the floor above RTTmin.
    pub fn rtt_cong_ns(&self) -> f64 {
        self.rtt_cong_ns
            .unwrap_or(self.rtt_max_ns)
            .max(self.rtt_min_ns + queue_floor_ns(self.rtt_min_ns))
    }

    /// The RTT standing for "now": the median of the last three samples.
    pub fn rtt_now_ns(&self) -> Option<f64> {
        let mut v: Vec<f64> = self.last_rtts.iter().copied().collect();
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied()
    }

    /// The congestion level at the current RTT.
    pub fn congestion_level_now(&self) -> Option<f64> {
        let rtt = self.rtt_now_ns()?;
        Some(congestion_level(rtt, self.rtt_min_ns, self.rtt_cong_ns()))
    }

    /// Every loss reacted to so far.
    pub fn reactions(&self) -> &[LossReaction] {
        &self.reactions
    }

    /// Packet `seq` (counting from 0) was sent.
    pub fn on_send(&mut self, seq: u64) {
        self.next_seq = self.next_seq.max(seq + 1);
    }

    /// An ACK at `now_ns` for `acked_bytes` of a packet sent at
    /// `sent_ns`.
    pub fn on_ack(&mut self, now_ns: i64, sent_ns: i64, acked_bytes: u64) {
        let rtt_ns = (now_ns - sent_ns) as f64;
        self.rtt_min_ns = self.rtt_min_ns.min(rtt_ns);
        self.rtt_max_ns = self.rtt_max_ns.max(rtt_ns);
        if self.last_rtts.len() == 3 {
            self.last_rtts.pop_front();
        }
        self.last_rtts.push_back(rtt_ns);
        self.estimate(now_ns, sent_ns, acked_bytes);
        let avoidance = self.p.mss_bytes as f64 / self.cwnd;
        if self.cwnd < self.ssthresh && self.slow_start_share() <= avoidance {
            // Slow start would now grow slower than congestion avoidance
            // (it only nears the pipe): avoidance from here, which probes
            // past it.
            self.ssthresh = self.cwnd;
        }
        if self.cwnd < self.ssthresh {
            self.cwnd += acked_bytes as f64 * self.slow_start_share();
        } else {
            self.cwnd += self.p.mss_bytes as f64 * acked_bytes as f64 / self.cwnd;
        }
        if let Some(period) = self.trace_period_ns {
            if self.trace.last().is_none_or(|p| now_ns - p.t_ns >= period) {
                self.trace.push(BbeTracePoint {
                    t_ns: now_ns,
                    rtt_ns,
                    rtt_min_ns: self.rtt_min_ns,
                    rtt_cong_ns: self.rtt_cong_ns(),
                    cwnd_bytes: self.cwnd,
                });
            }
        }
    }

    /// What an ACK adds in slow start, as a share of the bytes it
    /// acknowledged: 1 until BE is known, then the least of 1, the room
    /// the pipe leaves and half the buffer estimate over the window.
    fn slow_start_share(&self) -> f64 {
        if self.be_bps <= 0.0 || !self.rtt_min_ns.is_finite() {
            return 1.0;
        }
        let pipe = self.be_bps * self.rtt_min_ns / 8e9;
        let buffer = self.be_bps * (self.rtt_cong_ns() - self.rtt_min_ns) / 8e9;
        (pipe / self.cwnd - 1.0)
            .min(buffer / (2.0 * self.cwnd))
            .clamp(0.0, 1.0)
    }

    /// BE and RE after an ACK (Westwood's filter; see the module).
    fn estimate(&mut self, now_ns: i64, sent_ns: i64, acked_bytes: u64) {
        let tau = self.tau_ns();
        self.re_window.push_back((now_ns, acked_bytes));
        self.re_bytes += acked_bytes;
        while self
            .re_window
            .front()
            .is_some_and(|&(t, _)| (now_ns - t) as f64 > tau)
        {
            let (_, b) = self.re_window.pop_front().expect("non-empty");
            self.re_bytes -= b;
        }
        let Some((t_prev, sent_prev, s_prev)) = self.prev_ack else {
            self.prev_ack = Some((now_ns, sent_ns, 0.0));
            return;
        };
        let dt = (now_ns - t_prev) as f64;
        if dt <= 0.0 {
            return;
        }
        if (sent_ns - sent_prev) as f64 * self.p.min_spread >= dt {
            // Sent as far apart as acknowledged: the sender's gap.
            self.prev_ack = Some((now_ns, sent_ns, s_prev));
            return;
        }
        let sample = acked_bytes as f64 * 8e9 / dt;
        let a = ((2.0 * tau - dt) / (2.0 * tau + dt)).max(0.0);
        self.be_bps = if self.be_bps == 0.0 {
            sample
        } else {
            a * self.be_bps + (1.0 - a) * (sample + s_prev) / 2.0
        };
        self.prev_ack = Some((now_ns, sent_ns, sample));
    }

    /// Packet `seq` was lost (three later ones acknowledged, or a
    /// timeout): the reaction, unless one was made for this window.
    pub fn on_loss(&mut self, now_ns: i64, seq: u64) -> Option<LossReaction> {
        if seq < self.recover_seq {
            return None;
        }
        self.recover_seq = self.next_seq;
        let rtt = self.rtt_now_ns().unwrap_or(self.rtt_min_ns);
        let rtt_min = if self.rtt_min_ns.is_finite() {
            self.rtt_min_ns
        } else {
            rtt
        };
        let cong = self.rtt_cong_ns();
        let c = congestion_level(rtt, rtt_min, cong);
        let (be, re) = (self.be_bps, self.re_bps());
        let before = self.cwnd;
        let after = if be > 0.0 && rtt.is_finite() {
            loss_window(before, c, be, re, rtt_min, cong, self.p.mss_bytes)
        } else {
            // No estimate yet: NewReno.
            (before / 2.0).max(2.0 * self.p.mss_bytes as f64)
        };
        if rtt.is_finite() && rtt >= rtt_min + queue_floor_ns(rtt_min) {
            self.rtt_cong_ns = Some(match self.rtt_cong_ns {
                None => rtt,
                Some(old) => update_rtt_cong(old, rtt, rtt_min),
            });
        }
        let ssthresh = loss_ssthresh(after, c, ere_bps(be, re, c), rtt_min);
        self.cwnd = after;
        self.ssthresh = ssthresh;
        let r = LossReaction {
            t_ns: now_ns,
            rtt_ns: rtt,
            rtt_min_ns: rtt_min,
            rtt_cong_ns: cong,
            c,
            be_bps: be,
            re_bps: re,
            ere_bps: ere_bps(be, re, c),
            cwnd_before_bytes: before,
            cwnd_after_bytes: after,
            ssthresh_after_bytes: ssthresh,
        };
        self.reactions.push(r);
        Some(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KB: f64 = 1000.0;

    /// RTTmin 30 ms, RTTcong 40 ms; BE 100 Mbit/s (a 375 KB pipe at
    /// RTTmin, 500 KB at RTTcong), RE 50 Mbit/s; cwnd 300 KB.
    fn reaction_at(rtt_ms: f64) -> (f64, f64) {
        let c = congestion_level(rtt_ms * 1e6, 30e6, 40e6);
        (c, loss_window(300.0 * KB, c, 100e6, 50e6, 30e6, 40e6, 1448))
    }

    #[test]
    fn the_loss_reaction_at_c_0_half_and_1_by_hand() {
        // A random loss on an empty pipe: c = 0, ERE = BE = 100 Mbit/s,
        // ERE x RTTmin = 375 KB, above cwnd: no cut.
        assert_eq!(reaction_at(30.0), (0.0, 300.0 * KB));
        // Half way up the queue: c = 0.5, ERE = 75 Mbit/s, 281.25 KB,
        // above cwnd x (1 - 0.25) = 225 KB: 225 KB.
        assert_eq!(reaction_at(35.0), (0.5, 225.0 * KB));
        // At RTTcong: c = 1, ERE = RE = 50 Mbit/s, 187.5 KB, capped at
        // NewReno's half: 150 KB.
        assert_eq!(reaction_at(40.0), (1.0, 150.0 * KB));
        // Past RTTcong still 1.
        assert_eq!(reaction_at(55.0).0, 1.0);
        // Never under the half: cwnd 800 KB at c = 0 keeps 400, not 375.
        let w = loss_window(800.0 * KB, 0.0, 100e6, 50e6, 30e6, 40e6, 1448);
        assert_eq!(w, 400.0 * KB);
        // RE over BE (a burst of ACKs): at c = 0.5 ERE is 150 Mbit/s,
        // 562.5 KB, but the buffer the estimates imply fills at BE x
        // RTTcong = 500 KB: 500 KB of cwnd 1000.
        let w = loss_window(1000.0 * KB, 0.5, 100e6, 200e6, 30e6, 40e6, 1448);
        assert_eq!(w, 500.0 * KB);
    }

    #[test]
    fn the_threshold_after_a_loss_by_hand() {
        // A random loss left 300 KB with a 375 KB pipe: slow start back
        // to 375. At c = 0.5 with ERE 75 Mbit/s (281.25 KB) and 225 KB
        // left: 0.5 x 281.25 + 0.5 x 225 = 253.125 KB. At c = 1: the
        // window, as NewReno.
        assert_eq!(loss_ssthresh(300.0 * KB, 0.0, 100e6, 30e6), 375.0 * KB);
        assert_eq!(loss_ssthresh(225.0 * KB, 0.5, 75e6, 30e6), 253.125 * KB);
        assert_eq!(loss_ssthresh(150.0 * KB, 1.0, 50e6, 30e6), 150.0 * KB);
        // Never under the window.
        assert_eq!(loss_ssthresh(400.0 * KB, 0.0, 50e6, 30e6), 400.0 * KB);
    }

    #[test]
    fn ere_blends_be_and_re_by_hand() {
        assert_eq!(ere_bps(100e6, 50e6, 0.0), 100e6);
        assert_eq!(ere_bps(100e6, 50e6, 0.2), 90e6);
        assert_eq!(ere_bps(100e6, 50e6, 1.0), 50e6);
    }

    #[test]
    fn rtt_cong_moves_a_quarter_toward_each_queued_loss() {
        // RTTmin 30 ms (floor 1.5 ms). 40 ms, a loss at 36 ms: 39 ms.
        assert_eq!(update_rtt_cong(40e6, 36e6, 30e6), 39e6);
        // A loss at 31 ms met no queue: left at 40.
        assert_eq!(update_rtt_cong(40e6, 31e6, 30e6), 40e6);
        // Set too high by a pause (90 ms), overflows at 40 ms bring it
        // down: 77.5, 68.1, 61.1 ms ... within 1 ms of 40 after 14.
        let mut r = 90e6;
        for _ in 0..14 {
            r = update_rtt_cong(r, 40e6, 30e6);
        }
        assert!((r - 40e6).abs() < 1e6, "{r}");
        // Floors: RTTmin 5 ms gives 1 ms, 100 ms gives 5 ms.
        assert_eq!((queue_floor_ns(5e6), queue_floor_ns(100e6)), (1e6, 5e6));
    }

    /// ACKs of 1448 bytes every 115.84 us: 100 Mbit/s at the bottleneck.
    /// The packets went in pairs, the second 28.96 us after the first
    /// (400 Mbit/s), so every second ACK is a packet pair the bottleneck
    /// spread; the first of each pair has an RTT of `rtt_ms`, the second
    /// 86.88 us more.
    fn feed(c: &mut BbeController, from_ns: i64, n: usize, rtt_ms: f64) -> i64 {
        let rtt = (rtt_ms * 1e6) as i64;
        let mut t = from_ns;
        let mut first_sent = 0;
        for k in 0..n {
            t += 115_840;
            let sent = if k % 2 == 0 {
                first_sent = t - rtt;
                first_sent
            } else {
                first_sent + 28_960
            };
            c.on_ack(t, sent, 1448);
        }
        t
    }

    /// Tolerance for the pairs' second RTTs.
    const PAIR_NS: f64 = 86_880.0;

    #[test]
    fn be_reads_the_ack_spacing_and_re_the_acked_bytes() {
        let mut c = BbeController::new(BbeCcParams::default());
        feed(&mut c, 0, 2000, 30.0);
        assert!((c.be_bps() / 100e6 - 1.0).abs() < 1e-6, "{}", c.be_bps());
        // tau = 120 ms: 1036 ACKs within it (120 / 0.11584 + 1).
        assert!((c.re_bps() / 100e6 - 1.0).abs() < 0.01, "{}", c.re_bps());
        assert_eq!(c.rtt_min_ns(), 30e6);
    }

    #[test]
    fn a_random_loss_keeps_the_window_and_an_overflow_halves_it() {
        let p = BbeCcParams::default();
        let mut c = BbeController::new(p);
        // Slow start, then the queue builds to 40 ms.
        let t = feed(&mut c, 0, 200, 30.0);
        let t = feed(&mut c, t, 50, 40.0);
        c.on_send(1000);
        // An overflow at 40 ms: RTTcong (the largest seen, 40) gives c = 1.
        let before = c.cwnd_bytes();
        let r = c.on_loss(t, 900).unwrap();
        assert_eq!(r.c, 1.0);
        assert_eq!(r.cwnd_after_bytes, before / 2.0);
        assert_eq!(r.ssthresh_after_bytes, before / 2.0);
        assert!(
            (c.rtt_cong_ns() - 40e6).abs() <= PAIR_NS,
            "{}",
            c.rtt_cong_ns()
        );
        // Another loss of the same window: no second reaction.
        assert!(c.on_loss(t + 1, 950).is_none());
        // The queue drains; a random loss at RTTmin in the next window.
        let t = feed(&mut c, t, 300, 30.0);
        c.on_send(2000);
        let before = c.cwnd_bytes();
        let r = c.on_loss(t, 1500).unwrap();
        assert!(r.c < 0.01, "{r:?}");
        assert!(r.cwnd_after_bytes > 0.9 * before, "{r:?}");
        // The threshold is nearly the pipe (ERE x RTTmin, about 373 KB of
        // BE x RTTmin = 375 KB): slow start back to it.
        let pipe = r.ere_bps * 30e6 / 8e9;
        let want = (1.0 - r.c) * pipe + r.c * r.cwnd_after_bytes;
        assert!((r.ssthresh_after_bytes - want).abs() < 1.0, "{r:?}");
        assert!((pipe - 375_000.0).abs() < 4_000.0, "{r:?}");
        // RTTcong did not move for it.
        assert!((c.rtt_cong_ns() - 40e6).abs() <= PAIR_NS);
    }

    #[test]
    fn the_trace_keeps_a_point_a_period() {
        let mut c = BbeController::new(BbeCcParams::default()).with_trace(1_000_000);
        // 100 ACKs 115.84 us apart, the first at 0.116 ms: a point there
        // and at every ninth ACK after it (9 x 115.84 = 1.04 ms, the first
        // past the period), the last at 11.584 ms: 12.
        feed(&mut c, 0, 100, 30.0);
        let t = c.trace();
        assert_eq!(t.len(), 12, "{t:?}");
        assert_eq!(t[11].t_ns, 11_584_000);
        assert!(t.windows(2).all(|w| w[1].t_ns - w[0].t_ns >= 1_000_000));
        assert_eq!(t[0].rtt_min_ns, 30e6);
        // Not asked for: none kept.
        let mut quiet = BbeController::new(BbeCcParams::default());
        feed(&mut quiet, 0, 100, 30.0);
        assert!(quiet.trace().is_empty());
    }

    #[test]
    fn jitter_alone_is_no_queue() {
        // RTTs of 30 and 30.2 ms only: RTTcong is at least 31.5 ms (5 %),
        // so a loss at 30.2 ms reads c = 0.13, not 1.
        let mut c = BbeController::new(BbeCcParams::default());
        let t = feed(&mut c, 0, 100, 30.0);
        let t = feed(&mut c, t, 3, 30.2);
        c.on_send(200);
        let r = c.on_loss(t, 150).unwrap();
        assert!((r.rtt_cong_ns - 31.5e6).abs() < 1.0, "{r:?}");
        assert!((r.c - 0.2 / 1.5).abs() < PAIR_NS / 1.5e6, "{r:?}");
    }

    proptest! {
        #[test]
        fn the_window_after_a_loss_stays_between_the_half_and_the_window(
            cwnd in 3000.0f64..1e9,
            c in 0.0f64..=1.0,
            be in 1e3f64..1e11,
            re in 0.0f64..1e11,
            min_ms in 0.01f64..500.0,
            extra_ms in 0.0f64..500.0,
        ) {
            let w = loss_window(cwnd, c, be, re, min_ms * 1e6, (min_ms + extra_ms) * 1e6, 1448);
            prop_assert!(w >= (cwnd / 2.0).max(2896.0) - 1e-6, "{w}");
            prop_assert!(w <= cwnd.max(2896.0) + 1e-6, "{w}");
            // More congestion never leaves a larger window, other things equal.
            let w2 = loss_window(cwnd, (c + 0.1).min(1.0), be, re, min_ms * 1e6, (min_ms + extra_ms) * 1e6, 1448);
            prop_assert!(w2 <= w + 1e-6 || re > be, "{w2} > {w}");
        }

        #[test]
        fn the_level_is_a_share(rtt in 0.0f64..1e9, min in 0.0f64..1e9, cong in 0.0f64..1e9) {
            let c = congestion_level(rtt, min, cong);
            prop_assert!((0.0..=1.0).contains(&c));
        }
    }
}
