//! IGI and PTR (Hu and Steenkiste, "Evaluation and Characterization of
//! Available Bandwidth Probing Techniques", IEEE JSAC 2003; the gap-model
//! family of \[HOST\] section 4): one train of equal send gaps read two
//! ways.
//!
//! - IGI (initial gap increasing): at the tight link of capacity `C` a
//!   gap grows by the cross traffic that arrived within it. With `g_B =
//!   8 P / C` the gap at the capacity and `m = max(g_B, send gap)`, every
//!   receive gap above `m` (by a slack) carries `g - g_B` of cross traffic,
//!   so the cross rate is `C * sum(g - g_B over those gaps) / sum(all
//!   gaps)` and the available bandwidth `C` minus it.
//! - PTR (packet transmission rate): the rate the train came out at,
//!   `8 P / mean receive gap`; at the turning point (the smallest send gap
//!   whose receive gaps stay equal to it) it is the available bandwidth.
//!
//! The capacity is given, or read from the train's own receive gaps as
//! IGI/PTR 2.1 does from a back-to-back train: the most common receive
//! gap (a histogram, the fullest bin and its two neighbours averaged).
//! Constants from IGI/PTR 2.1: 60-packet trains, three per send gap, the
//! turning point where the mean receive gap is no longer above the mean
//! send gap. Ours: IGI's slacks are absolute (5 us, 25 us histogram bins,
//! set for 500-byte probes under 1 Gbit/s); here they are shares of the
//! gaps themselves (5 %, bins of a twentieth of the median gap), so they
//! mean the same at 10 and 100 Gbit/s. Only gaps between two packets
//! received in order count, as in IGI.

use crate::stream::{diff_ns, ProbeStream};

/// IGI's slacks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IgiParams {
    /// A train is stretched (above the turning point) when its mean
    /// receive gap exceeds its mean send gap by this share.
    pub turning_tolerance: f64,
    /// A receive gap counts as increased above `m` by this share of `m`.
    pub increase_slack: f64,
    /// Histogram bin width for the capacity, as a share of the median gap.
    pub bin_share: f64,
}

impl Default for IgiParams {
    fn default() -> Self {
        IgiParams {
            turning_tolerance: 0.05,
            increase_slack: 0.05,
            bin_share: 0.05,
        }
    }
}

/// What one train says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IgiTrain {
    pub src_gap_ns: f64,
    /// Mean of the in-order receive gaps.
    pub dst_gap_ns: f64,
    pub capacity_bps: f64,
    /// IGI's cross traffic estimate.
    pub competing_bps: f64,
    /// IGI's available bandwidth, `capacity - competing` (not below 0).
    pub igi_bps: f64,
    /// PTR: the rate the train came out at.
    pub ptr_bps: f64,
    /// Mean receive gap above the mean send gap (by the tolerance): the
    /// train was sent above the turning point.
    pub stretched: bool,
}

/// In-order receive gaps (both packets received) with the arriving
/// packet's size.
fn in_order_gaps(stream: &ProbeStream) -> Vec<(f64, u32)> {
    stream
        .packets
        .windows(2)
        .filter_map(|w| match (w[0].recv_ns, w[1].recv_ns) {
            (Some(a), Some(b)) => Some((diff_ns(b, a), w[1].size_bytes)),
            _ => None,
        })
        .collect()
}

/// The capacity a train's receive gaps show: the fullest histogram bin
/// and its neighbours, averaged (IGI/PTR's bottleneck estimate). Only
/// meaningful for a train sent faster than the bottleneck.
pub fn bottleneck_bps(stream: &ProbeStream, p: &IgiParams) -> Option<f64> {
    let gaps = in_order_gaps(stream);
    let positive: Vec<f64> = gaps.iter().map(|g| g.0).filter(|g| *g > 0.0).collect();
    let median = crate::stats::median(&positive)?;
    let width = p.bin_share * median;
    if width.is_nan() || width <= 0.0 {
        return None;
    }
    let bin = |g: f64| (g / width).floor() as i64;
    let mut counts: std::collections::BTreeMap<i64, usize> = Default::default();
    for &g in &positive {
        *counts.entry(bin(g)).or_default() += 1;
    }
    // The fullest bin; ties go to the narrower gap (the earlier bin).
    let (&mode, _) = counts
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))?;
    let (mut sum, mut bits, mut n) = (0.0, 0.0, 0usize);
    for &(g, size) in &gaps {
        if g > 0.0 && (bin(g) - mode).abs() <= 1 {
            sum += g;
            bits += 8.0 * size as f64;
            n += 1;
        }
    }
    (n > 0 && sum > 0.0).then(|| bits * 1e9 / sum)
}

/// IGI and PTR of one train; `capacity_bps` when known, else the train's
/// own [`bottleneck_bps`]. `None` without two in-order received packets
/// or without a capacity.
pub fn igi_train(
    stream: &ProbeStream,
    capacity_bps: Option<f64>,
    p: &IgiParams,
) -> Option<IgiTrain> {
    let gaps = in_order_gaps(stream);
    if gaps.is_empty() || stream.len() < 2 {
        return None;
    }
    let capacity = capacity_bps.or_else(|| bottleneck_bps(stream, p))?;
    if !(capacity > 0.0 && capacity.is_finite()) {
        return None;
    }
    let src_gap_ns = stream.send_span_ns() / (stream.len() - 1) as f64;
    let gap_sum: f64 = gaps.iter().map(|g| g.0).sum();
    let bits: f64 = gaps.iter().map(|g| 8.0 * g.1 as f64).sum();
    if gap_sum.is_nan() || gap_sum <= 0.0 {
        return None;
    }
    let dst_gap_ns = gap_sum / gaps.len() as f64;
    let mut increased = 0.0;
    for &(g, size) in &gaps {
        let b_gap = 8.0 * size as f64 * 1e9 / capacity;
        let m = b_gap.max(src_gap_ns);
        if g > m * (1.0 + p.increase_slack) {
            increased += g - b_gap;
        }
    }
    let competing_bps = capacity * increased / gap_sum;
    Some(IgiTrain {
        src_gap_ns,
        dst_gap_ns,
        capacity_bps: capacity,
        competing_bps,
        igi_bps: (capacity - competing_bps).max(0.0),
        ptr_bps: bits * 1e9 / gap_sum,
        stretched: dst_gap_ns > src_gap_ns * (1.0 + p.turning_tolerance),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1000-byte packets sent `send_us` apart, received with these gaps (us).
    fn train(send_us: i64, recv_gaps_us: &[i64]) -> ProbeStream {
        let n = recv_gaps_us.len() + 1;
        let send: Vec<i64> = (0..n as i64).map(|i| 5_000 + i * send_us * 1000).collect();
        let mut t = 9_000_000i64;
        let mut recv = vec![Some(t)];
        for g in recv_gaps_us {
            t += g * 1000;
            recv.push(Some(t));
        }
        ProbeStream::from_times(0, 1000, &send, &recv)
    }

    #[test]
    fn igi_and_ptr_by_hand() {
        // C = 100 Mbit/s: g_B = 80 us. Sent 100 us apart; receive gaps
        // 100, 140, 100, 180 (two gaps grew by cross traffic).
        // m = max(80, 100) = 100; increased gaps 140 and 180 carry
        // (140 - 80) + (180 - 80) = 160 us of 520: competing 100 * 160 /
        // 520 = 30.77 Mbit/s, IGI 69.23. PTR: 4 * 8000 bits / 520 us =
        // 61.54 Mbit/s. Mean receive gap 130 > 100 * 1.05: stretched.
        let s = train(100, &[100, 140, 100, 180]);
        let t = igi_train(&s, Some(100e6), &IgiParams::default()).unwrap();
        assert!(
            (t.competing_bps - 100e6 * 160.0 / 520.0).abs() < 1.0,
            "{t:?}"
        );
        assert!((t.igi_bps - 69.23e6).abs() < 0.01e6, "{t:?}");
        assert!((t.ptr_bps - 32_000.0 / 520.0 * 1e6).abs() < 1.0, "{t:?}");
        assert!((t.src_gap_ns, t.dst_gap_ns) == (100_000.0, 130_000.0));
        assert!(t.stretched);
        // Received as sent: nothing competing, PTR the send rate, not
        // stretched.
        let t = igi_train(&train(100, &[100; 8]), Some(100e6), &IgiParams::default()).unwrap();
        assert_eq!((t.competing_bps, t.igi_bps), (0.0, 100e6));
        assert!((t.ptr_bps - 80e6).abs() < 1.0);
        assert!(!t.stretched);
    }

    #[test]
    fn a_back_to_back_train_shows_the_capacity() {
        // Sent 10 us apart into an 80 us (100 Mbit/s) bottleneck: most
        // gaps 80 us, some 79 or 81 (neighbour bins), two stretched by
        // cross traffic; the mode and its neighbours average 80 us.
        let s = train(10, &[80, 81, 79, 80, 200, 80, 80, 150, 80, 81, 79]);
        let c = bottleneck_bps(&s, &IgiParams::default()).unwrap();
        assert!((c / 100e6 - 1.0).abs() < 0.001, "{c}");
        // Without a known capacity IGI takes the train's own.
        let t = igi_train(&s, None, &IgiParams::default()).unwrap();
        assert!((t.capacity_bps / 100e6 - 1.0).abs() < 0.001);
        // Lost packets leave only in-order gaps.
        let mut lossy = s.clone();
        lossy.packets[5].recv_ns = None;
        let t = igi_train(&lossy, Some(100e6), &IgiParams::default()).unwrap();
        assert!(t.dst_gap_ns < 100_000.0, "{t:?}");
    }

    proptest::proptest! {
        /// IGI stays within [0, C]; PTR is the bits over the receive time.
        #[test]
        fn estimates_stay_in_range(gaps in proptest::collection::vec(1i64..500, 2..60), send in 1i64..300) {
            let s = train(send, &gaps);
            if let Some(t) = igi_train(&s, Some(100e6), &IgiParams::default()) {
                proptest::prop_assert!(t.igi_bps >= 0.0 && t.igi_bps <= 100e6);
                let total: i64 = gaps.iter().sum();
                let ptr = 8000.0 * gaps.len() as f64 / (total as f64 * 1e-6);
                proptest::prop_assert!((t.ptr_bps / ptr - 1.0).abs() < 1e-9);
            }
        }
    }
}
