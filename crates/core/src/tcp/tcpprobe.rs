//! TCPProbe-style capacity from a TCP flow (\[TCPW\], section 2.1):
//! data packets that left the bottleneck one behind the other and whose
//! ACKs came back one each form a packet pair whose ACK spacing is their
//! dispersion there. TCPProbe flips packets at the sender to get such
//! ACKs; passively we take the pairs the flow happened to make: two
//! consecutive ACKs that each advance the cumulative point, nothing they
//! cover resent, and one of:
//!
//! - back to back: the data were sent closer together than 80 % of the
//!   ACK spacing (else the sender, not the path, set the gap). CapProbe's
//!   minimum delay sum picks the one that queued least, as in TCPProbe.
//! - queued: the second's RTT exceeds the flow's minimum by at least
//!   twice the spacing: it waited longer than the spacing, so the queue it
//!   found held the first's data (FIFO) and the bottleneck stayed busy
//!   between them. This is what a bulk, ACK-clocked flow offers (it sends
//!   as ACKs arrive, so its send gaps match its ACK gaps): on a 200 Mbit/s
//!   tbf capture 8984 pairs were seen, 8181 queued. Every such pair
//!   measures the bottleneck's service time, so the answer is their
//!   median (200.3 Mbit/s there).
//!
//! Queued pairs come first when there are enough of them: a pair that
//! found no queue at a token-bucket shaper passes on the bucket at line
//! rate, so the back-to-back pair with the least delay is the one the
//! bucket let through: CapProbe read 276.8 Mbit/s (converged) on that
//! capture. Cross traffic that interleaves at the bottleneck stretches
//! queued pairs instead; the report gives both.
//!
//! An ACK covering two segments (delayed ACKs) makes a bunch of their
//! frames; sizes are Ethernet frame bytes (a link serialises headers too).
//! Both estimates use the most common size (two segments, with delayed
//! ACKs: 8185 of those 8963 pairs), the larger on a tie.

use super::flow::Flow;
use crate::capacity::{capprobe, CapProbeEstimate, CapProbeParams, PairSample};

/// The flow's ACK pairs, by kind (see the module doc). A pair may be both.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AckPairs {
    pub back_to_back: Vec<PairSample>,
    pub queued: Vec<PairSample>,
    /// Pairs the flow offered before either test.
    pub seen: usize,
}

/// The median rate of the queued pairs and its spread.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueuedPairsEstimate {
    pub capacity_bps: f64,
    pub p25_bps: f64,
    pub p75_bps: f64,
    pub pairs: usize,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpProbeEstimate {
    /// CapProbe over the back-to-back pairs.
    pub back_to_back: Option<CapProbeEstimate>,
    pub queued: Option<QueuedPairsEstimate>,
    pub pairs_seen: usize,
}

/// Fewest queued pairs whose median is trusted.
pub const MIN_QUEUED_PAIRS: usize = 20;

impl TcpProbeEstimate {
    /// The capacity to use: the queued pairs' median (with at least
    /// [`MIN_QUEUED_PAIRS`]), else CapProbe over the back-to-back pairs.
    /// With the source's name.
    pub fn capacity(&self) -> Option<(f64, &'static str)> {
        match (&self.back_to_back, &self.queued) {
            (_, Some(q)) if q.pairs >= MIN_QUEUED_PAIRS => Some((q.capacity_bps, "queued pairs")),
            (Some(c), _) if c.converged => Some((c.capacity_bps, "back-to-back pairs")),
            (Some(c), _) => Some((c.capacity_bps, "back-to-back pairs, not converged")),
            (None, Some(q)) => Some((q.capacity_bps, "queued pairs, too few")),
            (None, None) => None,
        }
    }
}

/// The flow's ACK pairs (see the module doc).
pub fn ack_pairs(flow: &Flow) -> AckPairs {
    let mut out = AckPairs::default();
    let rtt_min = flow
        .rtt
        .iter()
        .map(|r| r.rtt_ns)
        .fold(f64::INFINITY, f64::min);
    // Sent segments by end: (send time, retransmitted, frame bytes).
    let ends: std::collections::BTreeMap<u64, (i64, bool, u32)> = flow
        .sent
        .iter()
        .map(|s| (s.end, (s.t_ns, s.retransmitted, s.frame_bytes)))
        .collect();
    for (i, w) in flow.acks.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        let (Some(&(ta, ra, _)), Some(&(tb, _, _))) = (ends.get(&a.ack), ends.get(&b.ack)) else {
            continue;
        };
        // Nothing either ACK covers was sent twice (a recovery's ACK
        // spacing is not a dispersion).
        if ra || ends.range(a.ack + 1..=b.ack).any(|(_, &(_, r, _))| r) {
            continue;
        }
        out.seen += 1;
        let dispersion = (b.t_ns as i128 - a.t_ns as i128) as f64;
        let frames: u64 = ends
            .range(a.ack + 1..=b.ack)
            .map(|(_, &(_, _, f))| f as u64)
            .sum();
        if dispersion <= 0.0 || frames > u32::MAX as u64 {
            continue;
        }
        let sample = PairSample {
            pair: i,
            size_bytes: frames as u32,
            send_gap_ns: (tb as i128 - ta as i128) as f64,
            dispersion_ns: dispersion,
            owd_first_ns: (a.t_ns as i128 - ta as i128) as f64,
            owd_second_ns: (b.t_ns as i128 - tb as i128) as f64,
        };
        if sample.send_gap_ns <= 0.8 * dispersion {
            out.back_to_back.push(sample);
        }
        if sample.owd_second_ns - rtt_min >= 2.0 * dispersion {
            out.queued.push(sample);
        }
    }
    out
}

/// The most common size among `pairs` (the larger on a tie).
fn modal_size(pairs: &[PairSample]) -> Option<u32> {
    let mut counts = std::collections::BTreeMap::new();
    for s in pairs {
        *counts.entry(s.size_bytes).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(z, n)| (n, z))
        .map(|(z, _)| z)
}

/// Both estimates on the flow's ACK pairs; `None` without any pair.
pub fn tcpprobe(flow: &Flow, p: CapProbeParams) -> Option<TcpProbeEstimate> {
    let pairs = ack_pairs(flow);
    let back_to_back = modal_size(&pairs.back_to_back).and_then(|z| {
        let same: Vec<PairSample> = pairs
            .back_to_back
            .iter()
            .filter(|s| s.size_bytes == z)
            .copied()
            .collect();
        capprobe(&same, p)
    });
    let queued = modal_size(&pairs.queued).map(|z| {
        let mut rates: Vec<f64> = pairs
            .queued
            .iter()
            .filter(|s| s.size_bytes == z)
            .map(PairSample::rate_bps)
            .collect();
        rates.sort_by(f64::total_cmp);
        let at = |q: f64| rates[((rates.len() - 1) as f64 * q).round() as usize];
        QueuedPairsEstimate {
            capacity_bps: at(0.5),
            p25_bps: at(0.25),
            p75_bps: at(0.75),
            pairs: rates.len(),
        }
    });
    if back_to_back.is_none() && queued.is_none() {
        return None;
    }
    Some(TcpProbeEstimate {
        back_to_back,
        queued,
        pairs_seen: pairs.seen,
    })
}

#[cfg(test)]
mod tests {
    use super::super::flow::{replay, tests::ack, tests::data};
    use super::*;

    /// Three 1000-byte segments (1054-byte frames) sent 1 us apart, ACKed
    /// one each at 100, 108 and 116 us (1054 B per 8 us: 1.054 Gbit/s at
    /// the bottleneck): two back-to-back pairs, delay sums 100 + 107 and
    /// 107 + 114; the first has the minimum. A fourth segment sent 50 us
    /// later (ACK at 170) pairs with nothing: its send gap (48 us) exceeds
    /// 80 % of the 54 us ACK spacing, and it waited 20 us more than the
    /// minimum RTT, not 2 x 54. None of the pairs queued (waits 7 and 14
    /// us < 2 x 8).
    #[test]
    fn ack_pairs_by_hand() {
        let mut segs = vec![
            data(0, 1000, 1000),
            data(1, 2000, 1000),
            data(2, 3000, 1000),
            data(50, 4000, 1000),
            ack(100, 2000),
            ack(108, 3000),
            ack(116, 4000),
            ack(170, 5000),
        ];
        segs.sort_by_key(|s| s.t_ns);
        let f = replay(&segs);
        let pairs = ack_pairs(&f);
        assert_eq!(
            (pairs.back_to_back.len(), pairs.queued.len(), pairs.seen),
            (2, 0, 3)
        );
        let e = tcpprobe(&f, CapProbeParams::default()).unwrap();
        let c = e.back_to_back.unwrap();
        assert!((c.capacity_bps - 1.054e9).abs() < 1.0, "{c:?}");
        assert_eq!(c.min_delay_sum_ns, 207_000.0);
        assert!(c.converged);
        assert_eq!(e.queued, None);
        assert_eq!(e.capacity(), Some((c.capacity_bps, "back-to-back pairs")));
    }

    /// An ACK-clocked flow: one segment alone (RTT 100 us, the minimum),
    /// then four 1000-byte segments 70 us apart into a standing queue at a
    /// bottleneck serving one 1054-byte frame per 80 us (105.4 Mbit/s):
    /// ACKs 80 us apart, RTTs 400-430. Send gaps (70) exceed 80 % of the
    /// spacing (64), so none is back to back, but each second packet
    /// waited 300+ us >= 2 x 80: three queued pairs, all 105.4 Mbit/s.
    /// The pair (ACK at 100, ACK at 2400) is seen and fails both tests
    /// (2000 > 0.8 x 2300; 300 < 2 x 2300). Three pairs are fewer than
    /// the 20 a median is trusted with, and the answer says so.
    #[test]
    fn queued_ack_clocked_pairs_by_hand() {
        let mut segs = vec![
            data(0, 1000, 1000),
            ack(100, 2000),
            data(2000, 2000, 1000),
            data(2070, 3000, 1000),
            data(2140, 4000, 1000),
            data(2210, 5000, 1000),
            ack(2400, 3000),
            ack(2480, 4000),
            ack(2560, 5000),
            ack(2640, 6000),
        ];
        segs.sort_by_key(|s| s.t_ns);
        let f = replay(&segs);
        let pairs = ack_pairs(&f);
        assert_eq!(
            (pairs.back_to_back.len(), pairs.queued.len(), pairs.seen),
            (0, 3, 4)
        );
        let e = tcpprobe(&f, CapProbeParams::default()).unwrap();
        assert_eq!(e.back_to_back, None);
        let q = e.queued.unwrap();
        assert_eq!(q.pairs, 3);
        for r in [q.capacity_bps, q.p25_bps, q.p75_bps] {
            assert!((r - 105.4e6).abs() < 1.0, "{q:?}");
        }
        assert_eq!(
            e.capacity(),
            Some((q.capacity_bps, "queued pairs, too few"))
        );
    }

    /// The most common size wins; on a tie the larger.
    #[test]
    fn modal_size_by_hand() {
        let p = |z| PairSample {
            pair: 0,
            size_bytes: z,
            send_gap_ns: 0.0,
            dispersion_ns: 1.0,
            owd_first_ns: 0.0,
            owd_second_ns: 0.0,
        };
        assert_eq!(modal_size(&[p(3), p(2), p(2), p(9)]), Some(2));
        assert_eq!(modal_size(&[p(3), p(2), p(2), p(3)]), Some(3));
        assert_eq!(modal_size(&[]), None);
    }
}
