//! TCPProbe-style capacity from a TCP flow (TCPW-BBE paper, section 2.1):
//! data packets that left the sender back to back and whose ACKs came
//! back one each form a packet pair whose ACK spacing is their dispersion
//! at the bottleneck; CapProbe's minimum delay sum (the two RTTs) picks
//! the pair that queued least. TCPProbe flips packets at the sender to
//! get such ACKs; passively we take the pairs the flow happened to make:
//! consecutive ACKs that each advance the cumulative point, for data sent
//! closer together than 80 % of the ACK spacing (else the sender, not the
//! path, set the gap). An ACK covering two segments (delayed ACKs) makes
//! a bunch of their bytes; CapProbe keeps the largest size present.

use super::flow::Flow;
use crate::capacity::{capprobe, CapProbeEstimate, CapProbeParams, PairSample};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TcpProbeEstimate {
    pub capprobe: CapProbeEstimate,
    /// Pairs the flow offered (before the sender-limited check).
    pub pairs_seen: usize,
}

/// The flow's ACK pairs as pair samples (see the module doc).
pub fn ack_pairs(flow: &Flow) -> (Vec<PairSample>, usize) {
    let mut out = Vec::new();
    let mut seen = 0;
    // Sent segments by end: (send time, retransmitted).
    let ends: std::collections::BTreeMap<u64, (i64, bool)> = flow
        .sent
        .iter()
        .map(|s| (s.end, (s.t_ns, s.retransmitted)))
        .collect();
    for (i, w) in flow.acks.windows(2).enumerate() {
        let (a, b) = (w[0], w[1]);
        let (Some(&(ta, ra)), Some(&(tb, _))) = (ends.get(&a.ack), ends.get(&b.ack)) else {
            continue;
        };
        // Nothing either ACK covers was sent twice (a recovery's ACK
        // spacing is not a dispersion).
        if ra || ends.range(a.ack + 1..=b.ack).any(|(_, &(_, r))| r) {
            continue;
        }
        seen += 1;
        let dispersion = (b.t_ns as i128 - a.t_ns as i128) as f64;
        let send_gap = (tb as i128 - ta as i128) as f64;
        if dispersion <= 0.0 || send_gap > 0.8 * dispersion || b.acked_bytes > u32::MAX as u64 {
            continue;
        }
        out.push(PairSample {
            pair: i,
            size_bytes: b.acked_bytes as u32,
            send_gap_ns: send_gap,
            dispersion_ns: dispersion,
            owd_first_ns: (a.t_ns as i128 - ta as i128) as f64,
            owd_second_ns: (b.t_ns as i128 - tb as i128) as f64,
        });
    }
    (out, seen)
}

/// CapProbe on the flow's ACK pairs; `None` without any.
pub fn tcpprobe(flow: &Flow, p: CapProbeParams) -> Option<TcpProbeEstimate> {
    let (pairs, seen) = ack_pairs(flow);
    Some(TcpProbeEstimate {
        capprobe: capprobe(&pairs, p)?,
        pairs_seen: seen,
    })
}

#[cfg(test)]
mod tests {
    use super::super::flow::{replay, tests::ack, tests::data};
    use super::*;

    /// Three 1000-byte segments sent 1 us apart, ACKed one each at 100,
    /// 108 and 116 us (1 Gbit/s at the bottleneck): two pairs, both 8 us
    /// apart, delay sums 100 + 107 and 107 + 114; the first has the
    /// minimum: 1 Gbit/s. A fourth segment sent 50 us later (ACK at 170)
    /// pairs with nothing: its send gap (48 us) exceeds 80 % of the 54 us
    /// ACK spacing.
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
        let (pairs, seen) = ack_pairs(&f);
        assert_eq!((pairs.len(), seen), (2, 3));
        let e = tcpprobe(&f, CapProbeParams::default()).unwrap();
        assert!((e.capprobe.capacity_bps - 1e9).abs() < 1.0);
        assert_eq!(e.capprobe.min_delay_sum_ns, 207_000.0);
        assert!(e.capprobe.converged);
    }
}
