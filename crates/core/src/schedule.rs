//! Probe schedules: the send times of single-rate and multi-rate streams
//! (\[BASS\] section VI: a multi-rate stream probes `n` rates spread over
//! +-Range around an average, `per_rate` packets each) and of chirps
//! (\[HOST\] section 4, pathChirp: gaps shrinking by a spread factor)
//! and of packet pairs (Spruce's: pairs a capacity gap apart at
//! exponential intervals).
//! What the strategies send and what the simulator, the tests and the
//! benchmarks replay.

/// Send times of a single-rate stream: `n` packets of `size_bytes` at
/// `rate_bps`, starting at `start_ns`.
pub fn single_rate_schedule(rate_bps: f64, n: usize, size_bytes: u32, start_ns: i64) -> Vec<i64> {
    let gap = size_bytes as f64 * 8e9 / rate_bps;
    (0..n)
        .map(|i| start_ns + (i as f64 * gap).round() as i64)
        .collect()
}

/// Send times of a multi-rate stream: `per_rate` packets at each rate in
/// turn; the gap ending at a packet is at that packet's rate.
pub fn multi_rate_schedule(rates_bps: &[f64], per_rate: usize, size_bytes: u32) -> Vec<i64> {
    schedule_with_counts(rates_bps, |_| per_rate, size_bytes)
}

/// Send times of a multi-rate stream whose sub-streams last about the
/// same time: the fastest rate gets `top_count` packets, each slower one
/// as many as fill the same time at its rate (rounded up), never fewer
/// than `min_count`. A wide scan with equal counts spends most of its
/// time in its slowest sub-stream (at 10 % of the link, 9 times longer
/// than at 90 %), where one burst of cross traffic decides it.
pub fn equal_time_schedule(
    rates_bps: &[f64],
    top_count: usize,
    min_count: usize,
    size_bytes: u32,
) -> Vec<i64> {
    let top = rates_bps.iter().copied().fold(0.0, f64::max);
    let count = |r: f64| ((top_count as f64 * r / top).ceil() as usize).max(min_count);
    schedule_with_counts(rates_bps, count, size_bytes)
}

/// `count(rate)` packets at each rate in turn; the gap ending at a packet
/// is at that packet's rate.
fn schedule_with_counts(
    rates_bps: &[f64],
    count: impl Fn(f64) -> usize,
    size_bytes: u32,
) -> Vec<i64> {
    let counts: Vec<usize> = rates_bps.iter().map(|&r| count(r)).collect();
    let mut out = Vec::with_capacity(counts.iter().sum());
    let mut t = 1_000_000_000.0f64;
    for (k, (&r, &n)) in rates_bps.iter().zip(&counts).enumerate() {
        let gap = size_bytes as f64 * 8e9 / r;
        for i in 0..n {
            if k > 0 || i > 0 {
                t += gap;
            }
            out.push(t.round() as i64);
        }
    }
    out
}

/// `n` rates spread evenly over `avg * (1 - range) ..= avg * (1 + range)`.
pub fn rates_around(avg_bps: f64, range: f64, n: usize) -> Vec<f64> {
    if n <= 1 {
        return vec![avg_bps];
    }
    (0..n)
        .map(|i| avg_bps * (1.0 - range + 2.0 * range * i as f64 / (n - 1) as f64))
        .collect()
}

/// Send times of a chirp (pathChirp, Ribeiro et al., PAM 2003): the last
/// gap at `high_bps`, each gap before it `spread` times longer, back to
/// the first at or below `low_bps`; the gap ending at a packet is at that
/// packet's instantaneous rate. The top rate is exact so that a chirp
/// never asks more of the sender's link than it has. Empty when the rates
/// or the spread make no chirp (`spread <= 1`, `high <= low`).
pub fn chirp_schedule(low_bps: f64, high_bps: f64, spread: f64, size_bytes: u32) -> Vec<i64> {
    if !(spread > 1.0 && low_bps > 0.0 && high_bps > low_bps && high_bps.is_finite()) {
        return Vec::new();
    }
    // Gaps k = 0 ..= steps at high / spread^(steps - k); the first one is
    // at or under `low` (a 0.1 % slack so rounding of the ratio does not
    // add a gap).
    let steps = ((high_bps / low_bps).ln() / spread.ln() - 1e-3).ceil() as i32;
    let last_gap = size_bytes as f64 * 8e9 / high_bps;
    let mut t = 1_000_000_000.0f64;
    let mut out = Vec::with_capacity(steps as usize + 2);
    out.push(t.round() as i64);
    for k in 0..=steps {
        t += last_gap * spread.powi(steps - k);
        out.push(t.round() as i64);
    }
    out
}

/// The highest top rate of a jumbo chirp whose elements stay apart: the
/// quiet time between two elements, `jumbo * size / top - (jumbo - 1) *
/// size / line`, at least `JUMBO_GAP_RATIO + 1` packet times at the line
/// rate, so `top <= line * jumbo / (jumbo + JUMBO_GAP_RATIO)`; the line
/// rate for plain chirps.
pub fn jumbo_top_rate(line_bps: f64, jumbo: usize) -> f64 {
    if jumbo <= 1 {
        return line_bps;
    }
    line_bps * jumbo as f64 / (jumbo as f64 + JUMBO_GAP_RATIO)
}

/// Send times of a jumbo chirp (pathChirp's `-J`): the chirp of
/// `jumbo`-packet elements from `low_bps` to `high_bps` (each element's
/// first packet where [`chirp_schedule`] of `jumbo * size_bytes` puts a
/// packet), each element's packets `size_bytes` at `line_bps` apart, back
/// to back on the sender's link. `jumbo` 1 is the plain chirp. Empty
/// when no chirp fits, or when an element would not fit in its gap at
/// the line rate.
pub fn jumbo_chirp_schedule(
    low_bps: f64,
    high_bps: f64,
    spread: f64,
    size_bytes: u32,
    jumbo: usize,
    line_bps: f64,
) -> Vec<i64> {
    let jumbo = jumbo.max(1);
    let Ok(element_bytes) = u32::try_from(jumbo as u64 * u64::from(size_bytes)) else {
        return Vec::new();
    };
    let firsts = chirp_schedule(low_bps, high_bps, spread, element_bytes);
    if jumbo == 1 {
        return firsts;
    }
    let inner_ns = size_bytes as f64 * 8e9 / line_bps;
    if !(inner_ns.is_finite() && inner_ns > 0.0) || high_bps > jumbo_top_rate(line_bps, jumbo) {
        return Vec::new();
    }
    firsts
        .iter()
        .flat_map(|&t| (0..jumbo).map(move |k| t + (k as f64 * inner_ns).round() as i64))
        .collect()
}

use crate::stream::JUMBO_GAP_RATIO;

/// Send times of `n` pairs `pair_gap_ns` apart, exponential gaps of mean
/// `mean_gap_ns` between pair starts.
pub fn pair_schedule(
    n: usize,
    pair_gap_ns: f64,
    mean_gap_ns: f64,
    rng: &mut crate::rng::Rng,
) -> Vec<i64> {
    let mut t = 0.0f64;
    let mut out = Vec::with_capacity(2 * n);
    for i in 0..n {
        if i > 0 {
            // Never closer than two pair lengths.
            t += rng.exp(mean_gap_ns).max(2.0 * pair_gap_ns);
        }
        out.push(t.round() as i64);
        out.push((t + pair_gap_ns).round() as i64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_a_capacity_gap_apart_and_exponentially_spaced() {
        let mut rng = crate::rng::Rng::new(1);
        let t = pair_schedule(2000, 7_200.0, 1e6, &mut rng);
        assert_eq!(t.len(), 4000);
        assert!(t.chunks(2).all(|p| p[1] - p[0] == 7_200));
        let starts: Vec<f64> = t.chunks(2).map(|p| p[0] as f64).collect();
        let gaps: Vec<f64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        // Exponential with mean 1 ms: the sample mean within 5 %, and the
        // standard deviation about the mean.
        assert!((mean / 1e6 - 1.0).abs() < 0.05, "{mean}");
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / mean - 1.0).abs() < 0.1, "{sd}");
    }

    #[test]
    fn equal_time_by_hand() {
        // 1000 B at 1, 2 and 4 Gbit/s (gaps 8, 4, 2 us), 40 packets at the
        // top: 10, 20 and 40 packets, each about 80 us long; with a floor
        // of 16, the slowest gets 16.
        let t = equal_time_schedule(&[1e9, 2e9, 4e9], 40, 1, 1000);
        assert_eq!(t.len(), 70);
        let gaps: Vec<i64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps[..9].iter().all(|&g| g == 8000), "{gaps:?}");
        assert!(gaps[9..29].iter().all(|&g| g == 4000), "{gaps:?}");
        assert!(gaps[29..].iter().all(|&g| g == 2000), "{gaps:?}");
        assert_eq!(
            equal_time_schedule(&[1e9, 2e9, 4e9], 40, 16, 1000).len(),
            76
        );
        // 1/3 of 40 is 13.3: rounded up to 14.
        assert_eq!(equal_time_schedule(&[1e9, 3e9], 40, 1, 1000).len(), 54);
    }

    #[test]
    fn chirp_by_hand() {
        // 1000 B from 10 to 20 Mbit/s, spread 1.2: log(2) / log(1.2) =
        // 3.8 -> 4 steps down from 20 Mbit/s (400 us): 480, 576, 691.2,
        // 829.44 us (9.65 Mbit/s, the first at or under 10).
        let t = chirp_schedule(10e6, 20e6, 1.2, 1000);
        let gaps: Vec<i64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        // Send times are rounded, not the gaps.
        assert_eq!(gaps, vec![829_440, 691_200, 576_000, 480_000, 400_000]);
        // pathChirp's defaults, 10 to 200 Mbit/s: 16.4 -> 17 steps, 18
        // gaps, 19 packets.
        assert_eq!(chirp_schedule(10e6, 200e6, 1.2, 1000).len(), 19);
        assert!(chirp_schedule(10e6, 200e6, 1.0, 1000).is_empty());
        assert!(chirp_schedule(20e6, 10e6, 1.2, 1000).is_empty());
    }

    #[test]
    fn jumbo_chirp_by_hand() {
        // Elements of 3 x 1000 B from 10 to 20 Mbit/s: the chirp of
        // 3000 B probes (1200 us at 20 Mbit/s, then 1440, 1728, 2073.6,
        // 2488.32 us), each element's packets 8 us apart at 1 Gbit/s.
        let t = jumbo_chirp_schedule(10e6, 20e6, 1.2, 1000, 3, 1e9);
        let firsts = chirp_schedule(10e6, 20e6, 1.2, 3000);
        assert_eq!(t.len(), 3 * firsts.len());
        for (k, f) in firsts.iter().enumerate() {
            assert_eq!(&t[3 * k..3 * k + 3], &[*f, f + 8000, f + 16000]);
        }
        let gaps: Vec<i64> = firsts.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps[gaps.len() - 1], 1_200_000);
        // One packet per element is the plain chirp.
        assert_eq!(
            jumbo_chirp_schedule(10e6, 20e6, 1.2, 1000, 1, 1e9),
            chirp_schedule(10e6, 20e6, 1.2, 1000)
        );
        // The top rate that keeps 4 packet times of quiet between
        // 3-packet elements: 1 Gbit/s * 3 / 6 = 500 Mbit/s.
        assert_eq!(jumbo_top_rate(1e9, 3), 0.5e9);
        assert_eq!(jumbo_top_rate(1e9, 1), 1e9);
        assert!(!jumbo_chirp_schedule(50e6, 0.5e9, 1.2, 1000, 3, 1e9).is_empty());
        assert!(jumbo_chirp_schedule(50e6, 0.6e9, 1.2, 1000, 3, 1e9).is_empty());
    }

    #[test]
    fn schedules_by_hand() {
        // 9000 B at 6 Gbit/s: 12 us apart.
        assert_eq!(
            single_rate_schedule(6e9, 4, 9000, 100),
            vec![100, 12_100, 24_100, 36_100]
        );
        // Two packets at 9 Gbit/s (8 us), then two at 4.5 (16 us); the gap
        // that ends at a packet is at that packet's rate.
        let t = multi_rate_schedule(&[9e9, 4.5e9], 2, 9000);
        let gaps: Vec<i64> = t.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(gaps, vec![8_000, 16_000, 16_000]);
        // +-30 % around 5 Gbit/s in five rates.
        let r = rates_around(5e9, 0.3, 5);
        let want = [3.5e9, 4.25e9, 5e9, 5.75e9, 6.5e9];
        assert!(
            r.iter().zip(want).all(|(a, b)| (a - b).abs() < 1.0),
            "{r:?}"
        );
        assert_eq!(rates_around(5e9, 0.3, 1), vec![5e9]);
    }
}
