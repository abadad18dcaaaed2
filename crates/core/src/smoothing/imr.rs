//! IMR-Pathload de-noising of one-way delays (\[IMR\], section 4;
//! \[BASS\], section IV-B): a k-packet sliding-window average, and a
//! 3-level Daubechies-4 discrete wavelet decomposition keeping the scale
//! (approximation) coefficients.

/// Window length for IMR window averaging.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImrWindow {
    /// A fixed number of packets (\[IMR\] uses k = 10).
    Packets(usize),
    /// One tenth of the stream (the variant \[BASS\] evaluates).
    TenthOfStream,
}

impl Default for ImrWindow {
    fn default() -> Self {
        ImrWindow::Packets(10)
    }
}

impl ImrWindow {
    /// Window length for a series of `n` values (at least 1).
    pub fn length(self, n: usize) -> usize {
        match self {
            ImrWindow::Packets(k) => k.max(1),
            ImrWindow::TenthOfStream => (n / 10).max(1),
        }
    }
}

/// k-packet sliding-window average: `n - k + 1` means of consecutive values
/// (the whole-series mean when `k >= n`; empty for an empty input).
pub fn window_average(values: &[f64], k: usize) -> Vec<f64> {
    let n = values.len();
    if n == 0 {
        return Vec::new();
    }
    let k = k.clamp(1, n);
    let mut out = Vec::with_capacity(n - k + 1);
    let mut sum: f64 = values[..k].iter().sum();
    out.push(sum / k as f64);
    for i in k..n {
        sum += values[i] - values[i - k];
        out.push(sum / k as f64);
    }
    out
}

/// Daubechies length-4 scale filter, from \[IMR\]:
/// h0 = (1+sqrt3)/(4 sqrt2), h1 = (3+sqrt3)/(4 sqrt2),
/// h2 = (3-sqrt3)/(4 sqrt2), h3 = (1-sqrt3)/(4 sqrt2).
pub fn d4_scale_filter() -> [f64; 4] {
    let s3 = 3f64.sqrt();
    let d = 4.0 * 2f64.sqrt();
    [
        (1.0 + s3) / d,
        (3.0 + s3) / d,
        (3.0 - s3) / d,
        (1.0 - s3) / d,
    ]
}

/// Wavelet filter: g0 = h3, g1 = -h2, g2 = h1, g3 = -h0.
pub fn d4_wavelet_filter() -> [f64; 4] {
    let h = d4_scale_filter();
    [h[3], -h[2], h[1], -h[0]]
}

/// One level of the D4 transform: `ceil(n/2)` scale and wavelet
/// coefficients, `cA_k = sum_i h_i s_(2k+i)`. Past the end of the input the
/// last value is repeated (the paper's boundary rule).
pub fn d4_level(s: &[f64]) -> (Vec<f64>, Vec<f64>) {
    let n = s.len();
    if n == 0 {
        return (Vec::new(), Vec::new());
    }
    let h = d4_scale_filter();
    let g = d4_wavelet_filter();
    let at = |i: usize| s[i.min(n - 1)];
    let m = n.div_ceil(2);
    let mut ca = Vec::with_capacity(m);
    let mut cd = Vec::with_capacity(m);
    for k in 0..m {
        let x = [at(2 * k), at(2 * k + 1), at(2 * k + 2), at(2 * k + 3)];
        ca.push(h.iter().zip(&x).map(|(a, b)| a * b).sum());
        cd.push(g.iter().zip(&x).map(|(a, b)| a * b).sum());
    }
    (ca, cd)
}

/// Scale coefficients after `levels` levels (the trend component); the
/// wavelet coefficients are the noise and are discarded.
pub fn d4_approximation(values: &[f64], levels: usize) -> Vec<f64> {
    let mut cur = values.to_vec();
    for _ in 0..levels {
        if cur.len() <= 1 {
            break;
        }
        cur = d4_level(&cur).0;
    }
    cur
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_of_three_by_hand() {
        assert_eq!(
            window_average(&[1.0, 2.0, 3.0, 4.0, 8.0], 3),
            vec![2.0, 3.0, 5.0]
        );
        assert_eq!(window_average(&[1.0, 3.0], 10), vec![2.0]);
        assert!(window_average(&[], 3).is_empty());
        assert_eq!(ImrWindow::TenthOfStream.length(64), 6);
    }

    /// Level-1 D4 of [1, 2, 3, 4] worked by hand. With s3 = sqrt 3 and
    /// d = 4 sqrt 2:
    ///   cA0 = (1(1+s3) + 2(3+s3) + 3(3-s3) + 4(1-s3)) / d
    ///       = (20 - 4 s3) / d                        = 2.31079...
    ///   cA1 = s = [3, 4, 4, 4] (last value repeated)
    ///       = (3(1+s3) + 4(3+s3) + 4(3-s3) + 4(1-s3)) / d
    ///       = (31 - s3) / d                          = 5.17393...
    ///   cD0 = (1(1-s3) - 2(3-s3) + 3(3+s3) - 4(1+s3)) / d = 0
    ///   cD1 = (3(1-s3) - 4(3-s3) + 4(3+s3) - 4(1+s3)) / d = (-1 + s3)/d
    #[test]
    fn d4_level_one_of_a_known_vector() {
        let s3 = 3f64.sqrt();
        let d = 4.0 * 2f64.sqrt();
        let (ca, cd) = d4_level(&[1.0, 2.0, 3.0, 4.0]);
        assert!((ca[0] - (20.0 - 4.0 * s3) / d).abs() < 1e-12);
        assert!((ca[1] - (31.0 - s3) / d).abs() < 1e-12);
        assert!(cd[0].abs() < 1e-12);
        assert!((cd[1] - (s3 - 1.0) / d).abs() < 1e-12);
        assert!((ca[0] - 2.310_789).abs() < 1e-6);
    }

    #[test]
    fn d4_filters_are_orthonormal() {
        let h = d4_scale_filter();
        let g = d4_wavelet_filter();
        let dot = |a: &[f64; 4], b: &[f64; 4]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
        assert!((dot(&h, &h) - 1.0).abs() < 1e-12);
        assert!((dot(&g, &g) - 1.0).abs() < 1e-12);
        assert!(dot(&h, &g).abs() < 1e-12);
        // A constant passes through scaled by sqrt 2; its detail is zero.
        let (ca, cd) = d4_level(&[5.0; 8]);
        assert!(ca.iter().all(|v| (v - 5.0 * 2f64.sqrt()).abs() < 1e-12));
        assert!(cd.iter().all(|v| v.abs() < 1e-12));
    }

    #[test]
    fn three_levels_shrink_64_to_8() {
        let v: Vec<f64> = (0..64).map(|i| i as f64).collect();
        assert_eq!(d4_approximation(&v, 3).len(), 8);
        assert_eq!(d4_approximation(&v[..32], 3).len(), 4);
    }
}
