//! A window controller on a receiver that reports by stream: how TCP
//! Westwood BBE's window ([`BbeController`], \[TCPW\] section 4) drives
//! the transfer engine, whose receiver sends the kernel's receive stamp
//! of every packet a stream (a few dozen packets) at a time instead of
//! acknowledging each one. Pure: sends, reports and the time in; whether
//! a packet may go out now.
//!
//! - Each packet's ACK is made from its receive stamp: `recv + D`, with
//!   D the least (a report's arrival minus the last stamp in it) seen so
//!   far, the return path with no wait. The RTT is then the one-way delay
//!   plus the quickest return (the two hosts' clock offset cancels), and
//!   the time between ACKs is the spacing the bottleneck gave the
//!   packets, which is what BE reads. A TCP receiver that ACKs every
//!   packet at once gives the controller the same.
//! - A report frees the window: a packet counts in flight until its
//!   stream's report comes, so up to one stream more is held back than a
//!   TCP sender would hold.
//! - Streams are a sixteenth of the window in packets, 8 to 1024: a
//!   handful of reports a round trip, so the sender's limit on streams
//!   awaiting their reports (128) never caps the window, and a window is
//!   never one open stream (the sender ends a stream early only when it
//!   is).
//! - Packets are paced, as Linux paces TCP: at twice cwnd over the RTT
//!   in slow start and 1.2 times in congestion avoidance (the
//!   `tcp_pacing_ss_ratio` and `tcp_pacing_ca_ratio` defaults, 200 and
//!   120 %), in pairs: two packets back to back, then twice the gap. A
//!   report frees a stream's worth of window at once; sent back to back,
//!   those packets would queue at the bottleneck and read as congestion
//!   at the next loss. Sent evenly, they would arrive as they left and
//!   BE would read the sender's own rate, not the bottleneck's: a pair
//!   is what a TCP receiver's delayed ACK makes its sender send, and
//!   what Westwood's BE reads the bottleneck from.
//! - A packet a report says did not arrive is lost, at the stream's last
//!   ACK: one reaction per window of data, as NewReno's recovery (the
//!   controller's rule).

use std::collections::BTreeMap;

use super::bbe_cc::{BbeController, LossReaction};
use crate::rapid::PacketTag;

/// Pacing rate over cwnd / RTT in slow start and after it.
pub const PACING_SLOW_START_RATIO: f64 = 2.0;
pub const PACING_AVOIDANCE_RATIO: f64 = 1.2;

/// Stream length bounds, packets.
pub const MIN_STREAM_PACKETS: u32 = 8;
pub const MAX_STREAM_PACKETS: u32 = 1024;

#[derive(Debug, Clone, Copy)]
struct Flight {
    seq: u64,
    sent_ns: i64,
    bytes: u32,
}

/// The stream being sent.
#[derive(Debug, Clone, Copy)]
struct Open {
    id: u64,
    next: u32,
    count: u32,
}

/// What one stream's report did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamReport {
    pub acked: usize,
    pub lost: usize,
    /// The reaction to a loss in it, where the controller made one.
    pub reaction: Option<LossReaction>,
}

#[derive(Debug, Clone)]
pub struct StreamWindow {
    cc: BbeController,
    frame_bytes: u32,
    open: Option<Open>,
    next_stream: u64,
    in_flight: BTreeMap<(u64, u32), Flight>,
    in_flight_bytes: u64,
    next_seq: u64,
    /// The least report arrival minus its last stamp.
    return_ns: Option<i64>,
    /// The last ACK time given to the controller (ACKs never go back).
    clock_ns: i64,
}

impl StreamWindow {
    /// `frame_bytes`: a full packet as the window counts it.
    pub fn new(cc: BbeController, frame_bytes: u32) -> StreamWindow {
        StreamWindow {
            cc,
            frame_bytes: frame_bytes.max(1),
            open: None,
            next_stream: 0,
            in_flight: BTreeMap::new(),
            in_flight_bytes: 0,
            next_seq: 0,
            return_ns: None,
            clock_ns: i64::MIN,
        }
    }

    pub fn controller(&self) -> &BbeController {
        &self.cc
    }

    pub fn frame_bytes(&self) -> u32 {
        self.frame_bytes
    }

    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    /// Whether a full packet may go out now: the window has room for it,
    /// or nothing is in flight.
    pub fn may_send(&self) -> bool {
        self.in_flight_bytes == 0
            || (self.in_flight_bytes + self.frame_bytes as u64) as f64 <= self.cc.cwnd_bytes()
    }

    /// The pacing gap before the next packet: 0 for a pair's second;
    /// else two packets' time at the window over the latest RTT, times
    /// the ratio of the phase (0 before an RTT), and at least twice
    /// `least_gap_ns` (a rate cap holds over each pair, not each packet,
    /// so a pair still leaves back to back).
    pub fn send_gap_ns(&self, least_gap_ns: i64) -> i64 {
        if self.next_seq % 2 == 1 {
            return 0;
        }
        let floor = 2 * least_gap_ns.max(0);
        let Some(rtt) = self.cc.rtt_now_ns().filter(|r| *r > 0.0) else {
            return floor;
        };
        let ratio = if self.cc.cwnd_bytes() < self.cc.ssthresh_bytes() {
            PACING_SLOW_START_RATIO
        } else {
            PACING_AVOIDANCE_RATIO
        };
        let rate_bps = ratio * self.cc.cwnd_bytes() * 8e9 / rtt;
        ((2.0 * self.frame_bytes as f64 * 8e9 / rate_bps) as i64).max(floor)
    }

    /// Packets in the next stream: a sixteenth of the window.
    fn stream_packets(&self) -> u32 {
        let w = (self.cc.cwnd_bytes() / self.frame_bytes as f64 / 16.0) as u32;
        w.clamp(MIN_STREAM_PACKETS, MAX_STREAM_PACKETS)
    }

    /// A packet of `bytes` left at `at_ns`: its tag, and the length of its
    /// stream (what the receiver is told to expect).
    pub fn sent(&mut self, at_ns: i64, bytes: u32) -> (PacketTag, u32) {
        let mut o = match self.open {
            Some(o) if o.next < o.count => o,
            _ => {
                let o = Open {
                    id: self.next_stream,
                    next: 0,
                    count: self.stream_packets(),
                };
                self.next_stream += 1;
                o
            }
        };
        let tag = PacketTag {
            stream: o.id,
            index: o.next,
        };
        o.next += 1;
        self.open = Some(o);
        self.cc.on_send(self.next_seq);
        self.in_flight.insert(
            (tag.stream, tag.index),
            Flight {
                seq: self.next_seq,
                sent_ns: at_ns,
                bytes,
            },
        );
        self.next_seq += 1;
        self.in_flight_bytes += bytes as u64;
        (tag, o.count)
    }

    /// Whether the next packet continues a stream begun.
    pub fn mid_stream(&self) -> bool {
        self.open.is_some_and(|o| o.next < o.count)
    }

    /// The stream being sent ends here; the next packet starts another.
    pub fn end_stream(&mut self) {
        self.open = None;
    }

    /// Whether everything in flight is in the stream still being sent:
    /// no report can free the window until that stream is ended.
    pub fn waiting_on_open_stream(&self) -> bool {
        match (self.open, self.in_flight.keys().next()) {
            (Some(o), Some(&(oldest, _))) => oldest == o.id,
            _ => false,
        }
    }

    /// Streams from the oldest with a packet in flight to the last begun.
    pub fn streams_awaiting_feedback(&self) -> u64 {
        self.in_flight
            .keys()
            .next()
            .map_or(0, |&(oldest, _)| self.next_stream - oldest)
    }

    /// The window's rate: cwnd over RTTmin (0 before an RTT).
    pub fn rate_bps(&self) -> f64 {
        let rtt = self.cc.rtt_min_ns();
        if rtt.is_finite() && rtt > 0.0 {
            self.cc.cwnd_bytes() * 8e9 / rtt
        } else {
            0.0
        }
    }

    /// Stream `stream`'s report at `now_ns` (sender's clock): the receive
    /// stamp (receiver's clock) of each position that arrived. Every
    /// packet of it still in flight and not stamped was lost.
    pub fn report(&mut self, stream: u64, stamps: &[(u32, i64)], now_ns: i64) -> StreamReport {
        let mut out = StreamReport::default();
        if let Some(&last) = stamps.iter().map(|(_, t)| t).max() {
            let d = now_ns - last;
            self.return_ns = Some(self.return_ns.map_or(d, |r| r.min(d)));
        }
        let back = self.return_ns.unwrap_or(0);
        let mut arrived: Vec<(i64, u32)> = stamps.iter().map(|&(i, t)| (t, i)).collect();
        arrived.sort_unstable();
        for (recv_ns, index) in arrived {
            let Some(f) = self.in_flight.remove(&(stream, index)) else {
                continue;
            };
            self.in_flight_bytes -= f.bytes as u64;
            let ack_ns = (recv_ns + back).max(self.clock_ns).max(f.sent_ns);
            self.clock_ns = ack_ns;
            self.cc.on_ack(ack_ns, f.sent_ns, f.bytes as u64);
            out.acked += 1;
        }
        let missing: Vec<(u32, Flight)> = self
            .in_flight
            .range((stream, 0)..=(stream, u32::MAX))
            .map(|(&(_, i), &f)| (i, f))
            .collect();
        // A stream still being sent is reported only once ended.
        if self.open.is_some_and(|o| o.id == stream) {
            self.open = None;
        }
        let at = if self.clock_ns == i64::MIN {
            now_ns
        } else {
            self.clock_ns
        };
        for (i, f) in missing {
            self.in_flight.remove(&(stream, i));
            self.in_flight_bytes -= f.bytes as u64;
            out.lost += 1;
            if let Some(r) = self.cc.on_loss(at, f.seq) {
                out.reaction = Some(r);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::bbe_cc::BbeCcParams;
    use proptest::prelude::*;

    const FRAME: u32 = 1000;
    const MS: i64 = 1_000_000;

    fn window() -> StreamWindow {
        let cc = BbeController::new(BbeCcParams {
            mss_bytes: FRAME,
            initial_window_segments: 10,
            min_spread: 2.0,
        });
        StreamWindow::new(cc, FRAME)
    }

    /// Ten packets fill the initial window of 10 x 1000 bytes; the
    /// streams are 8 long (a sixteenth of 10 packets is under the least).
    #[test]
    fn the_initial_window_by_hand() {
        let mut w = window();
        for k in 0..10 {
            assert!(w.may_send(), "packet {k}");
            let (tag, count) = w.sent(k * 100_000, FRAME);
            assert_eq!(count, 8);
            assert_eq!((tag.stream, tag.index), ((k / 8) as u64, (k % 8) as u32));
        }
        assert!(!w.may_send());
        assert_eq!(w.in_flight_bytes(), 10_000);
        assert_eq!(w.streams_awaiting_feedback(), 2);
        // Stream 1 holds 2 of its 8: still being sent, but stream 0 is
        // older, so its report will free the window.
        assert!(w.mid_stream());
        assert!(!w.waiting_on_open_stream());
    }

    /// ACKs come from the stamps: sent 0.05 ms apart, received 0.15 ms
    /// apart from 20 ms on (the receiver's clock 5 ms ahead), the report
    /// at 16.05 ms: D = 16.05 - 21.05 = -5 ms, so packet i's RTT is
    /// 20 + 0.15 i - 5 - 0.05 i = 15 + 0.1 i ms, and the bottleneck's
    /// 0.15 ms spacing (three times the sender's, over the least spread
    /// of 2) is BE's: 1000 bytes in 0.15 ms = 53.3 Mbit/s.
    #[test]
    fn acks_from_stamps_by_hand() {
        let w = reported();
        assert_eq!(w.in_flight_bytes(), 0);
        assert_eq!(w.controller().rtt_min_ns(), 15e6);
        assert!((w.controller().be_bps() - 8e9 / 0.15e6 * 1000.0).abs() < 1e-3);
        // Slow start: the first ACK adds its 1000 bytes (no BE yet); each
        // later one 1000 x 3333 / cwnd, half the buffer the estimates
        // imply (53.3 Mbit/s x (16 - 15) ms = 6.67 KB, RTTcong at its 1 ms
        // floor) over the window; the pipe (100 KB) leaves more room.
        let mut cwnd = 11_000.0;
        for _ in 1..8 {
            cwnd += 1000.0 * (20_000.0 / 6.0) / cwnd;
        }
        assert!((w.controller().cwnd_bytes() - cwnd).abs() < 1e-6);
        assert!((12_900.0..13_100.0).contains(&cwnd));
    }

    /// Pacing after the report of the ACK test: cwnd 12,5xx bytes over
    /// the latest RTT (the median of the last three, 15.6 ms), twice in
    /// slow start: a pair of 1000-byte packets every
    /// 15.6 ms x 2000 / (2 cwnd), its second at once.
    #[test]
    fn the_pacing_gap_by_hand() {
        assert_eq!(window().send_gap_ns(0), 0, "no RTT yet: no pacing");
        assert_eq!(window().send_gap_ns(7), 14, "but the rate cap, over a pair");
        let mut w = reported();
        let cwnd = w.controller().cwnd_bytes();
        assert!(cwnd < w.controller().ssthresh_bytes());
        let want = 15.6e6 * 2000.0 / (2.0 * cwnd);
        assert!((w.send_gap_ns(0) as f64 - want).abs() <= 1.0);
        assert!((1_150_000..1_250_000).contains(&w.send_gap_ns(0)));
        assert_eq!(
            w.send_gap_ns(1_000_000),
            2_000_000,
            "a cap above the pacing"
        );
        w.sent(17 * MS, FRAME);
        assert_eq!(w.send_gap_ns(1_000_000), 0, "the pair's second");
        w.sent(17 * MS, FRAME);
        assert!(w.send_gap_ns(0) > 0);
    }

    /// Eight packets sent 0.05 ms apart and reported (see
    /// `acks_from_stamps_by_hand`).
    fn reported() -> StreamWindow {
        let mut w = window();
        for k in 0..8 {
            w.sent(k * 50_000, FRAME);
        }
        let stamps: Vec<(u32, i64)> = (0..8).map(|i| (i, 20 * MS + i as i64 * 150_000)).collect();
        let r = w.report(0, &stamps, 16 * MS + 50_000);
        assert_eq!((r.acked, r.lost), (8, 0));
        w
    }

    /// Sent as evenly as they came (a paced sender's gaps, stretched
    /// under twice by the way): no BE.
    #[test]
    fn a_paced_senders_own_gaps_are_not_the_bottlenecks() {
        let mut w = window();
        for k in 0..8 {
            w.sent(k * 100_000, FRAME);
        }
        let stamps: Vec<(u32, i64)> = (0..8).map(|i| (i, 20 * MS + i as i64 * 150_000)).collect();
        w.report(0, &stamps, 16 * MS);
        assert_eq!(w.controller().be_bps(), 0.0);
    }

    /// A stamp missing from a report is a loss, reacted to once, and the
    /// window it held is free.
    #[test]
    fn a_missing_stamp_is_a_loss() {
        let mut w = window();
        for k in 0..8 {
            w.sent(k * 100_000, FRAME);
        }
        let stamps: Vec<(u32, i64)> = [0u32, 1, 2, 4, 5, 7]
            .iter()
            .map(|&i| (i, 15 * MS + i as i64 * 200_000))
            .collect();
        let r = w.report(0, &stamps, 16 * MS);
        assert_eq!((r.acked, r.lost), (6, 2));
        let reaction = r.reaction.expect("one reaction");
        assert_eq!(w.controller().reactions().len(), 1);
        assert_eq!(w.in_flight_bytes(), 0);
        assert!(reaction.cwnd_after_bytes <= reaction.cwnd_before_bytes);
        // A report for a stream with nothing in flight changes nothing.
        assert_eq!(w.report(0, &stamps, 17 * MS), StreamReport::default());
    }

    /// A window held by the open stream alone: the sender must end it.
    #[test]
    fn a_window_that_is_one_open_stream() {
        let mut w = window();
        for k in 0..5 {
            w.sent(k, FRAME);
        }
        assert!(w.waiting_on_open_stream());
        w.end_stream();
        assert!(!w.mid_stream());
        let (tag, _) = w.sent(10, FRAME);
        assert_eq!((tag.stream, tag.index), (1, 0));
    }

    proptest! {
        /// Whatever arrives, the bytes in flight are the bytes sent less
        /// the bytes reported, and ACK times never go back.
        #[test]
        fn in_flight_is_sent_less_reported(
            plan in proptest::collection::vec((1u32..=FRAME, any::<bool>(), 0i64..3_000_000), 1..300)
        ) {
            let mut w = window();
            let mut sent: Vec<(u64, u32, i64)> = Vec::new();
            let mut t = 0i64;
            for &(bytes, arrives, delay) in &plan {
                t += 50_000;
                let (tag, _) = w.sent(t, bytes);
                sent.push((tag.stream, tag.index, if arrives { t + 1_000_000 + delay } else { -1 }));
            }
            let total: u64 = plan.iter().map(|p| p.0 as u64).sum();
            prop_assert_eq!(w.in_flight_bytes(), total);
            let last_stream = sent.last().map_or(0, |s| s.0);
            let mut reported = 0u64;
            for s in 0..=last_stream {
                let stamps: Vec<(u32, i64)> = sent
                    .iter()
                    .filter(|x| x.0 == s && x.2 >= 0)
                    .map(|x| (x.1, x.2))
                    .collect();
                let before = w.clock_ns;
                let r = w.report(s, &stamps, t + 10_000_000);
                prop_assert!(w.clock_ns >= before);
                let n = sent.iter().filter(|x| x.0 == s).count();
                prop_assert_eq!(r.acked + r.lost, n);
                reported += plan
                    .iter()
                    .zip(&sent)
                    .filter(|(_, x)| x.0 == s)
                    .map(|(p, _)| p.0 as u64)
                    .sum::<u64>();
                prop_assert_eq!(w.in_flight_bytes(), total - reported);
            }
            prop_assert_eq!(w.in_flight_bytes(), 0);
            prop_assert!(w.controller().cwnd_bytes() >= 2.0 * FRAME as f64);
        }
    }
}
