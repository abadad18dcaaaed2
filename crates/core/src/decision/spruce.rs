//! Spruce (Strauss, Katabi and Kaashoek, "A Measurement Study of Available
//! Bandwidth Estimation Tools", IMC 2003; the gap-model family of \[HOST\]
//! section 4): packet pairs sent at the tight link's capacity, Poisson
//! spaced, each read by the probe gap model.
//!
//! A pair leaves `g_in = 8 P / C` apart, the time the tight link of
//! capacity `C` takes to send one probe. Cross traffic that arrives in
//! between is served between the two, so the pair comes out `g_out`
//! apart and that interval carried `C (g_out - g_in)` bits of cross
//! traffic: the available bandwidth over it is `C (1 - (g_out - g_in) /
//! g_in)`. Spruce averages this over its pairs (100 by default) and sends
//! them with exponential gaps so that they sample the cross traffic at
//! random times (Poisson arrivals see time averages).
//!
//! Constants from Spruce 0.3: 100 pairs, exponential gaps of mean the
//! larger of 100 ms and the gap that keeps the pairs under 5 % of the
//! capacity; pairs with a lost packet are left out. Ours: a pair's
//! estimate is kept as it comes (negative ones too, as the average needs
//! them), the answer is clamped to `[0, C]`; a receiver that stamps in
//! batches (interrupt coalescence) makes `g_out` either 0 or a batch
//! interval, and such a stream gives no answer.

use crate::stream::{diff_ns, ProbeStream};

/// What a stream of pairs says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpruceEstimate {
    /// Mean of the pairs' estimates, clamped to `[0, capacity]`.
    pub abw_bps: f64,
    /// Pairs with both packets received.
    pub pairs_used: usize,
    /// Sum of the pairs' unclamped estimates, for averaging across
    /// streams.
    pub sum_bps: f64,
}

/// The pairs of a stream: packets `2i` and `2i + 1`.
pub fn pair_gaps(stream: &ProbeStream) -> Vec<(f64, f64, u32)> {
    stream
        .packets
        .chunks_exact(2)
        .filter_map(|p| {
            let (a, b) = (p[0].recv_ns?, p[1].recv_ns?);
            Some((
                diff_ns(p[1].send_ns, p[0].send_ns),
                diff_ns(b, a),
                p[1].size_bytes,
            ))
        })
        .collect()
}

/// Each received pair's estimate by the probe gap model, unclamped.
pub fn pair_estimates(stream: &ProbeStream, capacity_bps: f64) -> Vec<f64> {
    pair_gaps(stream)
        .into_iter()
        .map(|(_, g_out, size)| {
            // The model's g_in is the capacity's gap, whatever the sender
            // managed (Spruce computes it from C, not from its send times).
            let g_in = 8.0 * size as f64 * 1e9 / capacity_bps;
            capacity_bps * (1.0 - (g_out - g_in) / g_in)
        })
        .collect()
}

/// Spruce over the pairs of one stream, with the tight link's capacity.
/// `None` without a received pair or a positive capacity.
pub fn spruce_estimate(stream: &ProbeStream, capacity_bps: f64) -> Option<SpruceEstimate> {
    if !(capacity_bps.is_finite() && capacity_bps > 0.0) {
        return None;
    }
    let each = pair_estimates(stream, capacity_bps);
    let n = each.len();
    let sum: f64 = each.iter().sum();
    (n > 0).then(|| SpruceEstimate {
        abw_bps: (sum / n as f64).clamp(0.0, capacity_bps),
        pairs_used: n,
        sum_bps: sum,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pairs of 1000-byte packets at 100 Mbit/s (80 us apart), 10 ms
    /// between pairs, received with these gaps (us); `None`: the second
    /// packet lost.
    fn pairs(out_us: &[Option<i64>]) -> ProbeStream {
        let mut send = Vec::new();
        let mut recv = Vec::new();
        for (i, o) in out_us.iter().enumerate() {
            let t = i as i64 * 10_000_000;
            send.push(t);
            send.push(t + 80_000);
            recv.push(Some(t + 500_000));
            recv.push(o.map(|g| t + 500_000 + g * 1000));
        }
        ProbeStream::from_times(0, 1000, &send, &recv)
    }

    #[test]
    fn probe_gap_model_by_hand() {
        // g_in = 80 us. Out 80 (nothing between: 100 Mbit/s free), 100
        // (20 us of cross traffic: 75), 120 (50), 60 (queue drained
        // between them: 125 before clamping). Mean of 100, 75, 50, 125 =
        // 87.5 Mbit/s; the lost pair is left out.
        let s = pairs(&[Some(80), Some(100), Some(120), Some(60), None]);
        let e = spruce_estimate(&s, 100e6).unwrap();
        assert_eq!(e.pairs_used, 4);
        assert!((e.abw_bps - 87.5e6).abs() < 1.0, "{e:?}");
        assert!((e.sum_bps - 350e6).abs() < 1.0);
        // Cross traffic that doubles every gap: 0, clamped.
        let e = spruce_estimate(&pairs(&[Some(200), Some(240)]), 100e6).unwrap();
        assert_eq!(e.abw_bps, 0.0);
        assert_eq!(spruce_estimate(&pairs(&[None]), 100e6), None);
        assert_eq!(spruce_estimate(&s, 0.0), None);
    }
}
