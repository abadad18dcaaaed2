//! TCP Westwood's estimates from the ACK stream (\[TCPW\], section
//! 3.2; the filter and the duplicate-ACK accounting are Westwood's, from
//! Mascolo et al., MobiCom 2001, and Linux `tcp_westwood.c`):
//!
//! - BE, the bandwidth estimate: each ACK's delivered bytes over the time
//!   since the previous ACK (packet-pair like: the ACK spacing mirrors
//!   the bottleneck's), smoothed by Westwood's low-pass filter
//!   `b_k = a_k b_(k-1) + (1 - a_k) (s_k + s_(k-1)) / 2`,
//!   `a_k = (2 tau - dt_k) / (2 tau + dt_k)`. A duplicate ACK counts one
//!   segment delivered; the cumulative ACK that ends a recovery counts
//!   only what the duplicates did not already.
//! - RE, the rate estimate: bytes acknowledged over the last `tau` (a
//!   packet-train measurement: what the flow achieved).
//! - ERE (BBE, section 4): `(1 - c) BE + c RE` with the congestion level
//!   `c` from [`super::bbe`]: near BE after random losses, RE when
//!   congested.

use super::flow::Flow;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WestwoodParams {
    /// Filter time constant and RE window, ns; 0 picks four times the
    /// smallest RTT, at least 1 ms.
    pub tau_ns: f64,
}

impl Default for WestwoodParams {
    fn default() -> Self {
        WestwoodParams { tau_ns: 0.0 }
    }
}

/// The estimates after one ACK arrival.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WestwoodPoint {
    pub t_ns: i64,
    pub be_bps: f64,
    pub re_bps: f64,
}

/// The time constant in use for `flow`.
pub fn tau_ns(flow: &Flow, p: WestwoodParams) -> f64 {
    if p.tau_ns > 0.0 {
        return p.tau_ns;
    }
    let min_rtt = flow
        .rtt
        .iter()
        .map(|r| r.rtt_ns)
        .fold(f64::INFINITY, f64::min);
    if min_rtt.is_finite() {
        (4.0 * min_rtt).max(1e6)
    } else {
        1e6
    }
}

/// BE and RE after every ACK arrival (duplicates included) but the first.
pub fn westwood(flow: &Flow, p: WestwoodParams) -> Vec<WestwoodPoint> {
    let tau = tau_ns(flow, p);
    let mss = {
        let mut s: Vec<u32> = flow.sent.iter().map(|s| s.payload_bytes).collect();
        s.sort_unstable();
        s.get(s.len() / 2).copied().unwrap_or(1460) as u64
    };
    let mut out = Vec::with_capacity(flow.ack_arrivals.len());
    let mut una = 0u64;
    let mut accounted = 0u64;
    let mut prev: Option<(i64, f64)> = None; // (time, sample)
    let mut be = 0.0f64;
    // RE window: (time, bytes) of recent deliveries.
    let mut window: std::collections::VecDeque<(i64, u64)> = Default::default();
    let mut window_bytes = 0u64;
    for &(t, ack) in &flow.ack_arrivals {
        let delivered = if ack > una {
            let mut cumul = ack - una;
            una = ack;
            if accounted >= cumul {
                accounted -= cumul;
                cumul = mss.min(cumul);
            } else {
                cumul -= accounted;
                accounted = 0;
            }
            cumul
        } else {
            accounted += mss;
            mss
        };
        window.push_back((t, delivered));
        window_bytes += delivered;
        while window
            .front()
            .is_some_and(|&(w, _)| ((t as i128 - w as i128) as f64) > tau)
        {
            let (_, b) = window.pop_front().expect("non-empty");
            window_bytes -= b;
        }
        let Some((t_prev, s_prev)) = prev else {
            prev = Some((t, 0.0));
            continue;
        };
        let dt = (t as i128 - t_prev as i128) as f64;
        if dt <= 0.0 {
            // Same timestamp: fold into the next sample's interval.
            continue;
        }
        let sample = delivered as f64 * 8e9 / dt;
        let a = ((2.0 * tau - dt) / (2.0 * tau + dt)).max(0.0);
        be = if out.is_empty() {
            sample
        } else {
            a * be + (1.0 - a) * (sample + s_prev) / 2.0
        };
        prev = Some((t, sample));
        out.push(WestwoodPoint {
            t_ns: t,
            be_bps: be,
            re_bps: window_bytes as f64 * 8e9 / tau,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::flow::{replay, tests::ack, tests::data};
    use super::*;

    /// 1000-byte segments ACKed one each every 8 us (1 Gbit/s at the
    /// bottleneck), RTT 100 us: tau = 1 ms (4 x 100 us is less). Every
    /// sample is 8000 bits / 8 us = 1 Gbit/s, so BE stays exactly 1
    /// Gbit/s; RE over the 1 ms window holds 126 ACKs once full
    /// (arrivals within 1000 us of the last: 1000 / 8 + 1), 1.008 Gbit/s.
    #[test]
    fn steady_acks_by_hand() {
        let mut segs = Vec::new();
        for k in 0..300u32 {
            segs.push(data(8 * k as i64, 1000 + 1000 * k, 1000));
        }
        for k in 0..300u32 {
            segs.push(ack(100 + 8 * k as i64, 2000 + 1000 * k));
        }
        segs.sort_by_key(|s| s.t_ns);
        let f = replay(&segs);
        assert_eq!(tau_ns(&f, WestwoodParams::default()), 1e6);
        let w = westwood(&f, WestwoodParams::default());
        assert_eq!(w.len(), 299);
        assert!(w.iter().all(|p| (p.be_bps - 1e9).abs() < 1.0));
        let last = w.last().unwrap();
        assert!((last.re_bps - 1.008e9).abs() < 1.0, "{last:?}");
    }

    /// Three duplicate ACKs count one segment each; the ACK ending the
    /// recovery, 4000 bytes, counts only 1000 beyond them.
    #[test]
    fn duplicates_are_accounted_once() {
        let segs = [
            data(0, 1000, 1000),
            data(1, 2000, 1000),
            data(2, 3000, 1000),
            data(3, 4000, 1000),
            data(4, 5000, 1000),
            ack(100, 2000),
            ack(110, 2000),
            ack(120, 2000),
            ack(130, 2000),
            ack(140, 6000),
        ];
        let f = replay(&segs);
        let w = westwood(&f, WestwoodParams { tau_ns: 1e9 });
        // In the 1 s window: 1000 (first ACK) + 3 x 1000 (duplicates) +
        // 1000 (the rest of the final ACK) bytes: 40 000 bits over 1 s.
        let last_re = w.last().unwrap().re_bps;
        assert!((last_re - 40_000.0).abs() < 1e-6, "{w:?}");
    }
}
