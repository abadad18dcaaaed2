//! Probe schedules: the send times of single-rate and multi-rate streams
//! (\[BASS\] section VI: a multi-rate stream probes `n` rates spread over
//! +-Range around an average, `per_rate` packets each). What the
//! strategies send and what the simulator, the tests and the benchmarks
//! replay.

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
    let mut out = Vec::with_capacity(rates_bps.len() * per_rate);
    let mut t = 1_000_000_000.0f64;
    for (k, &r) in rates_bps.iter().enumerate() {
        let gap = size_bytes as f64 * 8e9 / r;
        for i in 0..per_rate {
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

#[cfg(test)]
mod tests {
    use super::*;

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
