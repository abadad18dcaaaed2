//! CapProbe (\[TCPW\], section 2.1; Kapoor, Chen, Sanadidi, Gerla):
//! a pair whose dispersion is wrong must have queued somewhere, so its
//! delay sum (one-way delay of the first packet plus that of the second)
//! is larger than that of a pair that crossed every link unqueued. The
//! pair with the minimum delay sum gives the capacity.
//!
//! Convergence (CapProbe's own test): the minimum delay sum equals the sum
//! of the minimum delay of first packets and the minimum delay of second
//! packets, so neither packet of the chosen pair queued. If one had
//! queued by `e` ns, the dispersion would be off by at most `e`; the test
//! accepts `e` up to `tolerance_rel` of the chosen dispersion plus
//! `tolerance_abs_ns` (timestamp noise of a real receiver).
//!
//! Delay sums of different packet sizes differ by their serialisation, so
//! [`capprobe`] uses only the largest size present (its dispersion is the
//! largest against timestamp noise), and [`capprobe_by_size`] runs it per
//! size. Why several sizes: when cross traffic gets between the packets of
//! *every* pair (1500-byte CBR packets every 4 us against a 9000-byte pair
//! that holds a 10 Gbit/s link for 7.2 us), the minima of first and second
//! delays are both from interleaved pairs and the test passes on a wrong
//! answer (seen on the simulator: -12.5 %). Smaller pairs slip between
//! cross packets; sizes that agree are the check.

use super::pairs::PairSample;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapProbeParams {
    pub tolerance_rel: f64,
    pub tolerance_abs_ns: f64,
}

impl Default for CapProbeParams {
    fn default() -> Self {
        CapProbeParams {
            tolerance_rel: 0.02,
            tolerance_abs_ns: 0.0,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CapProbeEstimate {
    pub capacity_bps: f64,
    /// The pair with the minimum delay sum.
    pub pair: PairSample,
    pub min_delay_sum_ns: f64,
    /// Minimum first-packet delay plus minimum second-packet delay.
    pub sum_of_min_delays_ns: f64,
    pub converged: bool,
    /// Pairs of the size used.
    pub samples: usize,
}

/// CapProbe on some pairs; `None` without any.
pub fn capprobe(samples: &[PairSample], p: CapProbeParams) -> Option<CapProbeEstimate> {
    let size = samples.iter().map(|s| s.size_bytes).max()?;
    let used = || samples.iter().filter(move |s| s.size_bytes == size);
    let best = *used().min_by(|a, b| a.delay_sum_ns().total_cmp(&b.delay_sum_ns()))?;
    let min_first = used().map(|s| s.owd_first_ns).fold(f64::INFINITY, f64::min);
    let min_second = used()
        .map(|s| s.owd_second_ns)
        .fold(f64::INFINITY, f64::min);
    let sum_of_min = min_first + min_second;
    let excess = best.delay_sum_ns() - sum_of_min;
    Some(CapProbeEstimate {
        capacity_bps: best.rate_bps(),
        pair: best,
        min_delay_sum_ns: best.delay_sum_ns(),
        sum_of_min_delays_ns: sum_of_min,
        converged: excess <= p.tolerance_rel * best.dispersion_ns + p.tolerance_abs_ns,
        samples: used().count(),
    })
}

/// [`capprobe`] for each packet size present, largest first.
pub fn capprobe_by_size(samples: &[PairSample], p: CapProbeParams) -> Vec<CapProbeEstimate> {
    let mut sizes: Vec<u32> = samples.iter().map(|s| s.size_bytes).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    sizes.dedup();
    sizes
        .into_iter()
        .filter_map(|z| {
            let same: Vec<PairSample> = samples
                .iter()
                .filter(|s| s.size_bytes == z)
                .copied()
                .collect();
            capprobe(&same, p)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(size: u32, d1: f64, d2: f64) -> PairSample {
        PairSample {
            pair: 0,
            size_bytes: size,
            send_gap_ns: 0.0,
            dispersion_ns: d2 - d1,
            owd_first_ns: d1,
            owd_second_ns: d2,
        }
    }

    /// 1250-byte pairs on a 1 Gbit/s narrow link (10 us dispersion), base
    /// delay 50 us. Pair a: unqueued (50, 60), sum 110. Pair b: cross
    /// traffic between them (50, 75): reads 667 Mbit/s, sum 125. Pair c:
    /// the first packet queued 8 us after the narrow link (58, 60): reads
    /// 5 Gbit/s, sum 118. The minimum sum is a's: 1 Gbit/s; min first 50 +
    /// min second 60 = 110 = its sum: converged.
    #[test]
    fn minimum_delay_sum_by_hand() {
        let a = pair(1250, 50_000.0, 60_000.0);
        let b = pair(1250, 50_000.0, 75_000.0);
        let c = pair(1250, 58_000.0, 60_000.0);
        let e = capprobe(&[b, c, a], CapProbeParams::default()).unwrap();
        assert!((e.capacity_bps - 1e9).abs() < 1.0);
        assert!(e.converged && e.samples == 3);
        assert_eq!(
            (e.min_delay_sum_ns, e.sum_of_min_delays_ns),
            (110_000.0, 110_000.0)
        );
        // Without a: the best sum is c's 118 against 50 + 60 = 110: 8 us
        // of queueing, more than 2 % of c's 2 us dispersion: not converged
        // (and its 5 Gbit/s is indeed wrong).
        let e = capprobe(&[b, c], CapProbeParams::default()).unwrap();
        assert!(!e.converged);
        assert!((e.capacity_bps - 5e9).abs() < 1.0);
        // Smaller packets are left out when larger ones exist.
        let small = pair(100, 0.0, 1.0);
        let e = capprobe(&[small, b, a], CapProbeParams::default()).unwrap();
        assert_eq!(e.samples, 2);
        assert!(capprobe(&[], CapProbeParams::default()).is_none());
        // Per size: the 1250-byte pairs' answer first, then the 100-byte one.
        let by = capprobe_by_size(&[small, b, a], CapProbeParams::default());
        assert_eq!(by.len(), 2);
        assert_eq!((by[0].pair.size_bytes, by[1].pair.size_bytes), (1250, 100));
        assert!((by[0].capacity_bps - 1e9).abs() < 1.0);
    }
}
