//! Per-hop capacity by variable packet size (pathchar, clink, pchar; host
//! paper section 4.1, Figure 3): packets of several sizes sent with TTL k
//! come back as ICMP errors from router k; the smallest RTT per size grows
//! with the size by the per-byte store-and-forward time of every link up
//! to k, so the slope of a line through those minima, less the slope to
//! router k-1 (the hop differential), is one link's 1/capacity.
//!
//! Shapers (a token bucket, Linux tbf) and veth links add no per-byte
//! time to a lone packet: its bucket is full. So a probe may instead be
//! sent *behind a head* of large packets that empty the buckets: where the
//! head queues, the probe leaves that hop `size / rate` after the head's
//! last packet, whatever happened before, so the RTT to router k grows by
//! that hop's own 1/rate per byte of probe *and* per byte of head. Two
//! head lengths are sent: the head reaches router k later per head byte
//! than router k-1 exactly where it queued at hop k (elsewhere its timing
//! is carried unchanged), and there one slope over probe plus head bytes
//! is the hop's 1/rate (its lever is mostly the heads' difference, 12 kB
//! against 0.9 kB of probe sizes: in effect a train's dispersion, read
//! hop by hop). Elsewhere the hop differential of the probe-size slopes
//! applies.
//!
//! Pure: samples in, per-link estimates out. A link whose per-byte time
//! is not distinguishable from zero within `z` standard errors (the host
//! paper: at 1500 B, links above ~155 Mbit/s are 76 us or less of
//! difference, near the RTT noise) is answered "at least" a rate, never a
//! number that was not measured.

/// One answered probe.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VpsSample {
    /// TTL the probe was sent with (router `ttl` answered).
    pub ttl: u8,
    /// Probe size at the IP layer (the slope is per byte whatever the
    /// layer, as headers are constant).
    pub size_bytes: u32,
    /// Bytes of head sent in front of the probe (0 without a head).
    pub head_bytes: u64,
    /// From the probe's (or its head's first packet's) send to the reply.
    pub rtt_ns: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct VpsParams {
    /// Standard errors a per-byte time must clear to count as measured.
    pub z: f64,
    /// Fewest distinct probe sizes per hop for a fit.
    pub min_sizes: usize,
    /// Least relative rise of the head's per-byte time over the previous
    /// hop's that counts as the head queueing at this hop.
    pub min_head_rise: f64,
}

impl Default for VpsParams {
    fn default() -> Self {
        VpsParams {
            z: 2.0,
            min_sizes: 3,
            min_head_rise: 0.05,
        }
    }
}

/// Least-squares line (plane, with heads) through a hop's minimum RTT per
/// (size, head) cell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HopFit {
    pub ttl: u8,
    pub samples: usize,
    /// Distinct (size, head) cells, each reduced to its minimum RTT.
    pub cells: usize,
    pub slope_ns_per_byte: f64,
    pub slope_se: f64,
    pub intercept_ns: f64,
    /// RTT per head byte, with two or more head sizes.
    pub head_slope_ns_per_byte: Option<f64>,
    pub head_slope_se: Option<f64>,
    /// With heads: one per-byte time for probe and head bytes together
    /// (`rtt = a + slope * (size + head)`), what a hop where the head
    /// queued gives; its lever is mostly the head lengths' difference.
    pub joint_slope_ns_per_byte: Option<f64>,
    pub joint_slope_se: Option<f64>,
    /// Root mean square of the cell minima about the fit.
    pub residual_ns: f64,
}

/// What one link's capacity is, as far as the samples tell.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LinkCapacity {
    /// `capacity_bps` with a `z`-standard-error interval (`high_bps` is
    /// infinite when the lower per-byte bound reaches zero).
    Measured {
        capacity_bps: f64,
        low_bps: f64,
        high_bps: f64,
    },
    /// Per-byte time indistinguishable from zero: faster than this.
    AtLeast { bps: f64 },
    /// The per-byte time fell from the previous hop by more than the
    /// noise: routers answering at different speeds, or a previous hop
    /// queued differently (\[HOST\]: why pathchar gives negative
    /// results).
    Inconsistent { ns_per_byte: f64 },
}

/// One link: from router `from_ttl` (0: the sender) to router `ttl`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinkEstimate {
    pub from_ttl: u8,
    pub ttl: u8,
    pub fit: HopFit,
    /// With heads: whether the head was found queued at this hop, in which
    /// case the slope itself is the hop's per-byte time.
    pub queued_behind_head: Option<bool>,
    /// The link's per-byte time and its standard error.
    pub ns_per_byte: f64,
    pub se: f64,
    pub capacity: LinkCapacity,
}

/// Fits one hop's samples; `None` with fewer than `min_sizes` sizes or
/// too few cells to estimate the noise.
pub fn fit_hop(samples: &[VpsSample], ttl: u8, params: &VpsParams) -> Option<HopFit> {
    let mut cells: Vec<(u32, u64, f64)> = Vec::new();
    let mut n = 0;
    for s in samples
        .iter()
        .filter(|s| s.ttl == ttl && s.rtt_ns.is_finite())
    {
        n += 1;
        match cells
            .iter_mut()
            .find(|c| c.0 == s.size_bytes && c.1 == s.head_bytes)
        {
            Some(c) => c.2 = c.2.min(s.rtt_ns),
            None => cells.push((s.size_bytes, s.head_bytes, s.rtt_ns)),
        }
    }
    let mut sizes: Vec<u32> = cells.iter().map(|c| c.0).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut heads: Vec<u64> = cells.iter().map(|c| c.1).collect();
    heads.sort_unstable();
    heads.dedup();
    if sizes.len() < params.min_sizes.max(2) {
        return None;
    }
    let with_heads = heads.len() >= 2;
    let p = if with_heads { 3 } else { 2 };
    if cells.len() < p + 2 {
        return None;
    }
    // Centre the regressors: better conditioned normal equations.
    let m = cells.len() as f64;
    let xs = cells.iter().map(|c| c.0 as f64).sum::<f64>() / m;
    let xh = cells.iter().map(|c| c.1 as f64).sum::<f64>() / m;
    let ym = cells.iter().map(|c| c.2).sum::<f64>() / m;
    let (mut sss, mut shh, mut ssh, mut sy, mut hy) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for c in &cells {
        let (ds, dh, dy) = (c.0 as f64 - xs, c.1 as f64 - xh, c.2 - ym);
        sss += ds * ds;
        shh += dh * dh;
        ssh += ds * dh;
        sy += ds * dy;
        hy += dh * dy;
    }
    let (b, c, inv_bb, inv_cc) = if with_heads {
        let det = sss * shh - ssh * ssh;
        if det <= 0.0 {
            return None;
        }
        (
            (shh * sy - ssh * hy) / det,
            (sss * hy - ssh * sy) / det,
            shh / det,
            sss / det,
        )
    } else {
        (sy / sss, 0.0, 1.0 / sss, 0.0)
    };
    let a = ym - b * xs - c * xh;
    let rss: f64 = cells
        .iter()
        .map(|cl| {
            let e = cl.2 - (a + b * cl.0 as f64 + c * cl.1 as f64);
            e * e
        })
        .sum();
    let sigma2 = rss / (cells.len() - p) as f64;
    let joint = with_heads.then(|| {
        let x: Vec<f64> = cells.iter().map(|c| (c.0 as u64 + c.1) as f64).collect();
        let xm = x.iter().sum::<f64>() / m;
        let sxx: f64 = x.iter().map(|v| (v - xm).powi(2)).sum();
        let sxy: f64 = x
            .iter()
            .zip(&cells)
            .map(|(v, c)| (v - xm) * (c.2 - ym))
            .sum();
        let slope = sxy / sxx;
        let rss: f64 = x
            .iter()
            .zip(&cells)
            .map(|(v, c)| (c.2 - ym - slope * (v - xm)).powi(2))
            .sum();
        (slope, (rss / (cells.len() - 2) as f64 / sxx).sqrt())
    });
    Some(HopFit {
        ttl,
        samples: n,
        cells: cells.len(),
        slope_ns_per_byte: b,
        slope_se: (sigma2 * inv_bb).sqrt(),
        intercept_ns: a,
        head_slope_ns_per_byte: with_heads.then_some(c),
        head_slope_se: with_heads.then(|| (sigma2 * inv_cc).sqrt()),
        joint_slope_ns_per_byte: joint.map(|j| j.0),
        joint_slope_se: joint.map(|j| j.1),
        residual_ns: (rss / m).sqrt(),
    })
}

fn classify(d: f64, se: f64, z: f64) -> LinkCapacity {
    if d > z * se && d > 0.0 {
        let lo = d - z * se;
        LinkCapacity::Measured {
            capacity_bps: 8e9 / d,
            low_bps: 8e9 / (d + z * se),
            high_bps: if lo > 0.0 { 8e9 / lo } else { f64::INFINITY },
        }
    } else if d < -z * se {
        LinkCapacity::Inconsistent { ns_per_byte: d }
    } else {
        LinkCapacity::AtLeast {
            bps: 8e9 / (d.max(0.0) + z * se).max(1e-12),
        }
    }
}

/// Per-link estimates for every hop that has a fit, in TTL order. A hop
/// without a fit (silent router, too few replies) is skipped, and the next
/// link then spans it (`from_ttl` < `ttl - 1`: in series, so its capacity
/// is below either of the hidden links').
pub fn estimate_links(samples: &[VpsSample], params: &VpsParams) -> Vec<LinkEstimate> {
    let mut ttls: Vec<u8> = samples.iter().map(|s| s.ttl).collect();
    ttls.sort_unstable();
    ttls.dedup();
    let mut out = Vec::new();
    // The sender itself: zero per-byte time, known exactly; the head
    // leaves it at once.
    let mut prev: (u8, f64, f64) = (0, 0.0, 0.0);
    let mut prev_head: (f64, f64) = (0.0, 0.0);
    for ttl in ttls {
        let Some(fit) = fit_hop(samples, ttl, params) else {
            continue;
        };
        // The head queued at this hop iff it reached the router later per
        // head byte than it reached the previous one: where it passed,
        // its timing is the previous hop's plus a constant. A rise of
        // less than `min_head_rise` is not queueing: a head that barely
        // outpaces a hop cannot empty its bucket, and a destination that
        // answers every head packet (port unreachable) adds its own small
        // per-packet time (lab: +1.5 %).
        let queued = match (
            fit.head_slope_ns_per_byte,
            fit.head_slope_se,
            fit.joint_slope_ns_per_byte,
            fit.joint_slope_se,
        ) {
            (Some(c), Some(c_se), Some(j), Some(j_se)) => {
                let rise = c - prev_head.0;
                let noise = (c_se.powi(2) + prev_head.1.powi(2)).sqrt();
                let q = rise > params.z * noise && rise > params.min_head_rise * prev_head.0;
                prev_head = (c, c_se);
                Some((q, j, j_se))
            }
            _ => None,
        };
        let (d, se) = match queued {
            Some((true, j, j_se)) => (j, j_se),
            _ => (
                fit.slope_ns_per_byte - prev.1,
                (fit.slope_se.powi(2) + prev.2.powi(2)).sqrt(),
            ),
        };
        out.push(LinkEstimate {
            from_ttl: prev.0,
            ttl,
            fit,
            queued_behind_head: queued.map(|q| q.0),
            ns_per_byte: d,
            se,
            capacity: classify(d, se, params.z),
        });
        prev = (ttl, fit.slope_ns_per_byte, fit.slope_se);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(ttl: u8, size: u32, head: u64, rtt: f64) -> VpsSample {
        VpsSample {
            ttl,
            size_bytes: size,
            head_bytes: head,
            rtt_ns: rtt,
        }
    }

    /// Two store-and-forward links, 100 Mbit/s (80 ns/B) then 50 Mbit/s
    /// (160 ns/B): router 1 at 10 us + 80 s, router 2 at 30 us + 240 s.
    /// Each cell also has a queued sample that the minimum must drop.
    fn two_links() -> Vec<VpsSample> {
        let mut v = Vec::new();
        for &s in &[500u32, 800, 1100, 1400] {
            v.push(sample(1, s, 0, 10_000.0 + 80.0 * s as f64));
            v.push(sample(1, s, 0, 10_000.0 + 80.0 * s as f64 + 7_000.0));
            v.push(sample(2, s, 0, 30_000.0 + 240.0 * s as f64 + 3_000.0));
            v.push(sample(2, s, 0, 30_000.0 + 240.0 * s as f64));
        }
        v
    }

    #[test]
    fn hop_differential_on_exact_minima() {
        let links = estimate_links(&two_links(), &VpsParams::default());
        assert_eq!(links.len(), 2);
        assert_eq!((links[0].from_ttl, links[0].ttl), (0, 1));
        assert!((links[0].fit.slope_ns_per_byte - 80.0).abs() < 1e-9);
        assert!((links[0].fit.intercept_ns - 10_000.0).abs() < 1e-6);
        assert!((links[1].ns_per_byte - 160.0).abs() < 1e-9);
        match links[1].capacity {
            LinkCapacity::Measured { capacity_bps, .. } => {
                assert!((capacity_bps - 50e6).abs() < 1.0, "{capacity_bps}")
            }
            c => panic!("{c:?}"),
        }
        assert_eq!(links[0].fit.cells, 4);
        assert_eq!(links[0].fit.samples, 8);
        assert_eq!(links[1].queued_behind_head, None);
    }

    #[test]
    fn a_link_without_per_byte_time_is_at_least() {
        // Router 2 adds 5 us and no per-byte time; the minima carry
        // +-100 ns of alternating noise. Sizes 500..1400: centred sizes
        // -450,-150,150,450, noise +100,-100,+100,-100 -> slope
        // -2e4/... small; se about 0.2 ns/B -> at least ~ 8/(0.4) Gbit/s.
        let mut v = two_links();
        v.retain(|s| s.ttl == 1);
        for (i, &s) in [500u32, 800, 1100, 1400].iter().enumerate() {
            let noise = if i % 2 == 0 { 100.0 } else { -100.0 };
            v.push(sample(2, s, 0, 15_000.0 + 80.0 * s as f64 + noise));
        }
        let links = estimate_links(&v, &VpsParams::default());
        match links[1].capacity {
            LinkCapacity::AtLeast { bps } => assert!(bps > 5e9 && bps < 1e11, "{bps}"),
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn a_falling_slope_is_inconsistent_not_negative_capacity() {
        let mut v = two_links();
        v.retain(|s| s.ttl == 1);
        for &s in &[500u32, 800, 1100, 1400] {
            v.push(sample(2, s, 0, 30_000.0 + 40.0 * s as f64));
        }
        let links = estimate_links(&v, &VpsParams::default());
        assert!(matches!(
            links[1].capacity,
            LinkCapacity::Inconsistent { ns_per_byte } if (ns_per_byte + 40.0).abs() < 1e-9
        ));
    }

    /// Behind a head: a 600 Mbit/s shaper (13.33 ns/B) then 200 Mbit/s
    /// (40 ns/B), heads of 24 or 36 kB. Router 1: RTT = 5 us + 13.33
    /// (size + head). Router 2, where the head queued again: 9 us + 40
    /// (size + head). Router 3 behind a 1 ns/B link where the head did
    /// not queue: 11 us + 41 size + 40 head. The destination behind an
    /// unshaped link answers every head packet too, 1.5 % more per head
    /// byte: not queueing.
    #[test]
    fn behind_a_head_the_queued_hop_reads_its_own_rate() {
        let mut v = Vec::new();
        let per = [
            (1u8, 5_000.0, 40.0 / 3.0, 40.0 / 3.0),
            (2, 9_000.0, 40.0, 40.0),
            (3, 11_000.0, 41.0, 40.0),
            (4, 12_000.0, 41.0, 40.6),
        ];
        for &(ttl, a, b, c) in &per {
            for &s in &[600u32, 900, 1200, 1500] {
                for &h in &[24_000u64, 36_000] {
                    v.push(sample(ttl, s, h, a + b * s as f64 + c * h as f64));
                    v.push(sample(ttl, s, h, a + b * s as f64 + c * h as f64 + 2_500.0));
                }
            }
        }
        let links = estimate_links(&v, &VpsParams::default());
        assert_eq!(links.len(), 4);
        // Exact data: zero residual, zero standard errors.
        assert_eq!(links[0].queued_behind_head, Some(true));
        assert_eq!(links[1].queued_behind_head, Some(true));
        assert_eq!(links[2].queued_behind_head, Some(false));
        let cap = |l: &LinkEstimate| match l.capacity {
            LinkCapacity::Measured { capacity_bps, .. } => capacity_bps,
            c => panic!("{c:?}"),
        };
        assert!((cap(&links[0]) - 600e6).abs() < 10.0);
        // The hop differential would have said 8/(40-13.3) = 300 Mbit/s.
        assert!((cap(&links[1]) - 200e6).abs() < 10.0);
        // Not queued: 41 - 40 = 1 ns/B = 8 Gbit/s.
        assert!((cap(&links[2]) - 8e9).abs() < 1e3);
        assert_eq!(links[3].queued_behind_head, Some(false));
        assert!(matches!(links[3].capacity, LinkCapacity::AtLeast { .. }));
    }

    #[test]
    fn too_few_sizes_give_no_fit_and_the_next_link_spans_the_gap() {
        let mut v = two_links();
        // Router 1 answered at one size only.
        v.retain(|s| s.ttl == 2 || s.size_bytes == 500);
        assert!(fit_hop(&v, 1, &VpsParams::default()).is_none());
        let links = estimate_links(&v, &VpsParams::default());
        assert_eq!(links.len(), 1);
        assert_eq!((links[0].from_ttl, links[0].ttl), (0, 2));
        // Both links in series: 1/(1/100 + 1/50) Mbit/s = 33.3.
        match links[0].capacity {
            LinkCapacity::Measured { capacity_bps, .. } => {
                assert!((capacity_bps - 33.333e6).abs() < 1e3)
            }
            c => panic!("{c:?}"),
        }
    }

    #[test]
    fn interval_brackets_the_estimate() {
        // Noisy minima: slope 80 +- a few ns/B.
        let mut v = Vec::new();
        let noise = [300.0, -500.0, 200.0, 0.0, -100.0, 400.0];
        for (i, s) in (0..6).map(|i| (i, 400 + 200 * i as u32)) {
            v.push(sample(1, s, 0, 10_000.0 + 80.0 * s as f64 + noise[i]));
        }
        let l = estimate_links(&v, &VpsParams::default())[0];
        match l.capacity {
            LinkCapacity::Measured {
                capacity_bps,
                low_bps,
                high_bps,
            } => {
                assert!(low_bps < capacity_bps && capacity_bps < high_bps);
                assert!((capacity_bps - 100e6).abs() < 2e6, "{capacity_bps}");
            }
            c => panic!("{c:?}"),
        }
        assert!(l.se > 0.0 && l.fit.residual_ns > 0.0);
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            /// Any per-byte times and any non-negative queueing added to
            /// extra samples: the minima are exact, so each link's
            /// capacity comes back.
            #[test]
            fn exact_minima_recover_every_link(
                ns_per_byte in prop::collection::vec(2.0f64..200.0, 1..5),
                queueing in prop::collection::vec(0.0f64..50_000.0, 16),
            ) {
                let mut v = Vec::new();
                let mut cum = 0.0;
                for (k, d) in ns_per_byte.iter().enumerate() {
                    cum += d;
                    for (i, s) in [300u32, 700, 1100, 1500].iter().enumerate() {
                        let base = 1_000.0 * (k + 1) as f64 + cum * *s as f64;
                        v.push(sample(k as u8 + 1, *s, 0, base));
                        v.push(sample(k as u8 + 1, *s, 0, base + queueing[(i + 4 * k) % 16]));
                    }
                }
                let links = estimate_links(&v, &VpsParams::default());
                prop_assert_eq!(links.len(), ns_per_byte.len());
                for (l, d) in links.iter().zip(&ns_per_byte) {
                    match l.capacity {
                        LinkCapacity::Measured { capacity_bps, .. } => {
                            prop_assert!((capacity_bps * d / 8e9 - 1.0).abs() < 1e-6)
                        }
                        c => prop_assert!(false, "{:?}", c),
                    }
                }
            }
        }
    }
}
