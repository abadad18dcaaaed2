//! Pathrate's capacity estimate (\[TCPW\], section 2.1: "a
//! relatively large number of packet pair samples to reveal capacity
//! modes, and an extra statistical Asymptotic Dispersion Rate estimate to
//! reject wrong modes"; the method of Dovrolis, Ramanathan and Moore).
//!
//! The pair rates go into a histogram of bins `bin_rel` times their
//! median wide. Modes are found greedily: the fullest bin not yet taken
//! opens a mode, which extends outwards while the counts do not rise by
//! more than `bump_tolerance` (and stops at an empty bin). Cross traffic
//! makes modes below the capacity (a packet got between the pair) and, at
//! later links, above it (the first packet waited); the ADR of long trains
//! lies below the capacity and above the sub-capacity modes, so only modes
//! at or above it are candidates. Among those, the answer is the mode with
//! the highest figure of merit: its share of all samples times its
//! peakedness (central-bin count over the mode's count), our stand-in for
//! Pathrate's strength-times-kurtosis.

use super::pairs::median;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathrateParams {
    /// Bin width, relative to the median pair rate.
    pub bin_rel: f64,
    /// A mode holds at least this share of the samples (and 3 samples).
    pub min_mode_share: f64,
    /// Samples a count may rise by while a mode extends outwards.
    pub bump_tolerance: usize,
}

impl Default for PathrateParams {
    fn default() -> Self {
        PathrateParams {
            bin_rel: 0.01,
            min_mode_share: 0.02,
            bump_tolerance: 1,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mode {
    /// Median of the samples in the mode's central bin, bit/s.
    pub capacity_bps: f64,
    /// Edges of the mode's range of bins, bit/s.
    pub low_bps: f64,
    pub high_bps: f64,
    /// Samples in the range and in the central bin.
    pub samples: usize,
    pub central: usize,
    pub merit: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PathrateEstimate {
    pub capacity_bps: f64,
    /// The chosen mode.
    pub mode: Mode,
    /// Every mode, highest merit first.
    pub modes: Vec<Mode>,
    pub adr_bps: Option<f64>,
    /// No mode reached the ADR: the highest mode was answered.
    pub below_adr: bool,
}

/// Pathrate on pair rates (bit/s) with the trains' ADR when known.
/// `None` without a finite positive rate.
pub fn pathrate(
    pair_rates: &[f64],
    adr_bps: Option<f64>,
    p: PathrateParams,
) -> Option<PathrateEstimate> {
    let mut rates: Vec<f64> = pair_rates
        .iter()
        .copied()
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    if rates.is_empty() {
        return None;
    }
    let n = rates.len();
    let width = median(&mut rates) * p.bin_rel.max(1e-6);
    // `rates` is sorted now: bins are runs of equal index.
    let index = |r: f64| (r / width).floor() as i64;
    let mut bins: Vec<(i64, usize)> = Vec::new();
    for &r in &rates {
        match bins.last_mut() {
            Some((i, c)) if *i == index(r) => *c += 1,
            _ => bins.push((index(r), 1)),
        }
    }
    let mut taken = vec![false; bins.len()];
    let pos = |i: i64| bins.binary_search_by_key(&i, |b| b.0).ok();
    let mut modes = Vec::new();
    while let Some(k) = (0..bins.len())
        .filter(|&k| !taken[k])
        .max_by(|&a, &b| bins[a].1.cmp(&bins[b].1).then(b.cmp(&a)))
    {
        let centre = bins[k].0;
        let (mut lo, mut hi) = (centre, centre);
        for dir in [-1i64, 1] {
            let mut prev = bins[k].1;
            let mut j = centre + dir;
            while let Some(q) = pos(j) {
                let c = bins[q].1;
                if taken[q] || c > prev + p.bump_tolerance {
                    break;
                }
                prev = c;
                if dir < 0 {
                    lo = j;
                } else {
                    hi = j;
                }
                j += dir;
            }
        }
        let mut samples = 0;
        for (q, b) in bins.iter().enumerate() {
            if (lo..=hi).contains(&b.0) {
                taken[q] = true;
                samples += b.1;
            }
        }
        let central = bins[k].1;
        if samples >= 3 && samples as f64 >= p.min_mode_share * n as f64 {
            let mut in_centre: Vec<f64> = rates
                .iter()
                .copied()
                .filter(|&r| index(r) == centre)
                .collect();
            modes.push(Mode {
                capacity_bps: median(&mut in_centre),
                low_bps: lo as f64 * width,
                high_bps: (hi + 1) as f64 * width,
                samples,
                central,
                merit: (samples as f64 / n as f64) * (central as f64 / samples as f64),
            });
        }
    }
    if modes.is_empty() {
        return None;
    }
    modes.sort_by(|a, b| b.merit.total_cmp(&a.merit));
    // A mode whose range reaches the ADR is a candidate.
    let candidate = |m: &&Mode| adr_bps.is_none_or(|a| m.high_bps >= a);
    let (mode, below_adr) = match modes.iter().find(candidate) {
        Some(m) => (*m, false),
        None => (
            *modes
                .iter()
                .max_by(|a, b| a.capacity_bps.total_cmp(&b.capacity_bps))
                .expect("modes is not empty"),
            true,
        ),
    };
    Some(PathrateEstimate {
        capacity_bps: mode.capacity_bps,
        mode,
        modes,
        adr_bps,
        below_adr,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 14 pairs around 60 Mbit/s (cross traffic got between the packets),
    /// 9 at exactly 100 Mbit/s, 7 at 130 Mbit/s: 30 samples, median
    /// (samples 14 and 15) 100 Mbit/s; with `bin_rel` 1/64 the bins are
    /// exactly 1.5625 Mbit/s wide. The 60 Mbit/s mode is bins 37 (58.7,
    /// 2 samples), 38 (60.2, 10) and 39 (61.7, 2): merit 14/30 x 10/14 =
    /// 10/30, above the 100 Mbit/s mode's 9/30 x 9/9 and the 130's 7/30.
    /// Without an ADR it wins; trains at 80 Mbit/s reject it (its range
    /// ends at 40 x 1.5625 = 62.5 Mbit/s) and 100 Mbit/s is the answer.
    #[test]
    fn adr_rejects_the_sub_capacity_mode() {
        let mut r = vec![60.2e6; 10];
        r.extend([58.7e6; 2]);
        r.extend([61.7e6; 2]);
        r.extend([100e6; 9]);
        r.extend([130e6; 7]);
        let p = PathrateParams {
            bin_rel: 1.0 / 64.0,
            ..Default::default()
        };
        let free = pathrate(&r, None, p).unwrap();
        assert_eq!(free.modes.len(), 3);
        assert_eq!(free.capacity_bps, 60.2e6);
        assert_eq!((free.mode.samples, free.mode.central), (14, 10));
        assert!((free.mode.merit - 10.0 / 30.0).abs() < 1e-12);
        assert_eq!(
            (free.mode.low_bps, free.mode.high_bps),
            (37.0 * 1.5625e6, 40.0 * 1.5625e6)
        );
        let with_adr = pathrate(&r, Some(80e6), p).unwrap();
        assert_eq!(with_adr.capacity_bps, 100e6);
        assert!(!with_adr.below_adr);
        assert!((with_adr.mode.merit - 9.0 / 30.0).abs() < 1e-12);
        // An ADR above every mode: the highest mode, flagged.
        let high = pathrate(&r, Some(200e6), p).unwrap();
        assert!(high.capacity_bps == 130e6 && high.below_adr);
    }

    /// Modes under 2 % of the samples (or 3 samples) are noise.
    #[test]
    fn small_modes_are_dropped() {
        let mut r = vec![1e9; 200];
        r.extend([3e8, 5e8]);
        let e = pathrate(&r, None, PathrateParams::default()).unwrap();
        assert_eq!(e.modes.len(), 1);
        assert_eq!(e.capacity_bps, 1e9);
        assert!(pathrate(&[], None, PathrateParams::default()).is_none());
        assert!(pathrate(&[f64::NAN, -1.0], None, PathrateParams::default()).is_none());
    }
}
