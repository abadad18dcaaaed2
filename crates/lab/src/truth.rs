//! Ground truth from kernel counters, not from the tool: the bytes each
//! shaped hop's qdisc sent, and the bytes the last router delivered to the
//! probe receiver and to the cross sink, sampled about every millisecond
//! (see [`crate::sampler`]).
//!
//! Over a window, what crossed hop k that was not tool traffic is its
//! qdisc's bytes minus the bytes delivered to the receiver's link (probes
//! and control, at the same layer); the hop's available bandwidth is its
//! rate minus that over the window, and the path's is the minimum over
//! hops. Rates are Ethernet frames without preamble and FCS (IP + 14 B):
//! what tbf and the interface counters count, and what tightlink prints.
//! Min and max are over four equal sub-windows.

use tightlink_sys::cpu_time::CpuTimes;

/// Counters at one instant (CLOCK_REALTIME ns: the same clock the tool's
/// probe timestamps use in every namespace).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub t_ns: i64,
    /// Bytes sent by each shaped hop's root qdisc.
    pub hop_bytes: Vec<u64>,
    /// Packets each shaped hop's qdisc dropped.
    pub hop_drops: Vec<u64>,
    /// Bytes the last router sent toward the probe receiver.
    pub rcv_bytes: u64,
    /// Bytes the last router sent toward the cross sink.
    pub cross_bytes: u64,
    /// Bytes the cross sender handed to its entry router: the cross
    /// traffic offered, whether or not the bottleneck then kept it.
    pub offered_cross_bytes: u64,
    /// The host's CPU times (all CPUs; read every 10 ms, the kernel's
    /// tick): the share the hypervisor stole stalls the qdiscs too.
    pub cpu: CpuTimes,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Truth {
    pub available_bps: f64,
    pub min_bps: f64,
    pub max_bps: f64,
    /// 0-based index of the hop with the least available bandwidth.
    pub tight_hop: usize,
    /// Non-tool traffic through each hop, bit/s.
    pub hop_cross_bps: Vec<f64>,
    /// Cross traffic delivered to the cross sink, bit/s (a check on
    /// `hop_cross_bps` of the last hop).
    pub sink_bps: f64,
    /// Tool traffic delivered to the receiver, bit/s.
    pub receiver_bps: f64,
    /// Cross traffic its sender handed to its entry router, bit/s: more
    /// than the hops carried when a queue dropped some of it (the
    /// probes' own overflow among the causes).
    pub offered_cross_bps: f64,
    pub hop_drops: Vec<u64>,
    pub window_s: f64,
    /// Share of the host's CPU time the hypervisor took over the window
    /// (`None` where no tick passed): a stalled vCPU stalls the shapers,
    /// so the path was slower than its configured rate by up to that.
    pub stolen_share: Option<f64>,
}

#[derive(Debug, Clone)]
struct At {
    hop_bytes: Vec<f64>,
    hop_drops: Vec<f64>,
    rcv: f64,
    cross: f64,
    offered_cross: f64,
    cpu_total: f64,
    cpu_steal: f64,
}

/// Counters at `t`, interpolated between the samples around it.
fn at(samples: &[Sample], t: i64) -> Option<At> {
    let i = samples.partition_point(|s| s.t_ns <= t);
    if i == 0 || (i == samples.len() && samples[i - 1].t_ns < t) {
        return None;
    }
    let a = &samples[i - 1];
    let (b, f) = if a.t_ns == t || i == samples.len() {
        (a, 0.0)
    } else {
        let b = &samples[i];
        (b, (t - a.t_ns) as f64 / (b.t_ns - a.t_ns) as f64)
    };
    let lerp = |x: u64, y: u64| x as f64 + (y as f64 - x as f64) * f;
    Some(At {
        hop_bytes: a
            .hop_bytes
            .iter()
            .zip(&b.hop_bytes)
            .map(|(&x, &y)| lerp(x, y))
            .collect(),
        hop_drops: a
            .hop_drops
            .iter()
            .zip(&b.hop_drops)
            .map(|(&x, &y)| lerp(x, y))
            .collect(),
        rcv: lerp(a.rcv_bytes, b.rcv_bytes),
        cross: lerp(a.cross_bytes, b.cross_bytes),
        offered_cross: lerp(a.offered_cross_bytes, b.offered_cross_bytes),
        cpu_total: lerp(a.cpu.total_ticks, b.cpu.total_ticks),
        cpu_steal: lerp(a.cpu.steal_ticks, b.cpu.steal_ticks),
    })
}

/// Available bandwidth per hop over [start, end): rate minus non-tool bits.
fn per_hop(
    samples: &[Sample],
    rates_bps: &[f64],
    start: i64,
    end: i64,
) -> Option<(Vec<f64>, At, At)> {
    let (a, b) = (at(samples, start)?, at(samples, end)?);
    let secs = (end - start) as f64 / 1e9;
    let rcv = b.rcv - a.rcv;
    let avail = rates_bps
        .iter()
        .enumerate()
        .map(|(k, &c)| {
            let other = (b.hop_bytes[k] - a.hop_bytes[k] - rcv).max(0.0);
            c - other * 8.0 / secs
        })
        .collect();
    Some((avail, a, b))
}

/// Why the counters give no truth over a window.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoTruth {
    #[error("empty window {start_ns}..{end_ns}")]
    EmptyWindow { start_ns: i64, end_ns: i64 },
    #[error("samples and hops disagree")]
    HopsDisagree,
    #[error("counters sampled {first_ns}..{last_ns} do not cover the window {start_ns}..{end_ns}")]
    NotCovered {
        first_ns: i64,
        last_ns: i64,
        start_ns: i64,
        end_ns: i64,
    },
}

/// The truth over `[start_ns, end_ns]`, or why there is none.
pub fn truth(
    samples: &[Sample],
    rates_bps: &[f64],
    start_ns: i64,
    end_ns: i64,
) -> Result<Truth, NoTruth> {
    if end_ns <= start_ns {
        return Err(NoTruth::EmptyWindow { start_ns, end_ns });
    }
    if samples.iter().any(|s| s.hop_bytes.len() != rates_bps.len()) {
        return Err(NoTruth::HopsDisagree);
    }
    let (avail, a, b) =
        per_hop(samples, rates_bps, start_ns, end_ns).ok_or_else(|| NoTruth::NotCovered {
            first_ns: samples.first().map_or(0, |s| s.t_ns),
            last_ns: samples.last().map_or(0, |s| s.t_ns),
            start_ns,
            end_ns,
        })?;
    let (tight_hop, available_bps) = avail
        .iter()
        .copied()
        .enumerate()
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .expect("at least one hop");
    let quarter = (end_ns - start_ns) / 4;
    let mut subs = Vec::new();
    for q in 0..4 {
        let s = start_ns + q * quarter;
        if let Some((v, _, _)) = per_hop(samples, rates_bps, s, s + quarter) {
            subs.push(v.into_iter().fold(f64::INFINITY, f64::min));
        }
    }
    let secs = (end_ns - start_ns) as f64 / 1e9;
    Ok(Truth {
        available_bps,
        min_bps: subs.iter().copied().fold(available_bps, f64::min),
        max_bps: subs.iter().copied().fold(available_bps, f64::max),
        tight_hop,
        hop_cross_bps: rates_bps.iter().zip(&avail).map(|(c, a)| c - a).collect(),
        sink_bps: (b.cross - a.cross) * 8.0 / secs,
        receiver_bps: (b.rcv - a.rcv) * 8.0 / secs,
        offered_cross_bps: (b.offered_cross - a.offered_cross) * 8.0 / secs,
        hop_drops: a
            .hop_drops
            .iter()
            .zip(&b.hop_drops)
            .map(|(x, y)| (y - x).round() as u64)
            .collect(),
        window_s: secs,
        stolen_share: share_stolen(&a, &b),
    })
}

fn share_stolen(a: &At, b: &At) -> Option<f64> {
    let total = b.cpu_total - a.cpu_total;
    (total > 0.0).then(|| ((b.cpu_steal - a.cpu_steal) / total).clamp(0.0, 1.0))
}

/// Share of the host's CPU time stolen over the window (see
/// [`Truth::stolen_share`]).
pub fn stolen_share(samples: &[Sample], start_ns: i64, end_ns: i64) -> Option<f64> {
    share_stolen(&at(samples, start_ns)?, &at(samples, end_ns)?)
}

/// Over the window: the rate delivered to the receiver (tool traffic,
/// or a flow under test) and the cross traffic offered at its entry
/// router (bit/s).
pub fn delivered_and_offered(samples: &[Sample], start_ns: i64, end_ns: i64) -> Option<(f64, f64)> {
    let (a, b) = (at(samples, start_ns)?, at(samples, end_ns)?);
    let secs = (end_ns - start_ns) as f64 / 1e9;
    Some((
        (b.rcv - a.rcv) * 8.0 / secs,
        (b.offered_cross - a.offered_cross) * 8.0 / secs,
    ))
}

/// Rate at which hop `k`'s qdisc sent bytes over the window (bit/s).
pub fn hop_send_rate(samples: &[Sample], k: usize, start_ns: i64, end_ns: i64) -> Option<f64> {
    let (a, b) = (at(samples, start_ns)?, at(samples, end_ns)?);
    Some((b.hop_bytes[k] - a.hop_bytes[k]) * 8.0 / ((end_ns - start_ns) as f64 / 1e9))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// One 200 Mbit/s hop; every millisecond the qdisc sends 15 000 B
    /// (120 Mbit/s), of which 7 500 B go to the receiver (60 Mbit/s of
    /// probes) and 7 500 B to the cross sink.
    fn steady(ms: i64) -> Vec<Sample> {
        (0..=ms)
            .map(|i| Sample {
                t_ns: 1_000_000_000 + i * 1_000_000,
                hop_bytes: vec![15_000 * i as u64],
                hop_drops: vec![0],
                rcv_bytes: 7_500 * i as u64,
                cross_bytes: 7_500 * i as u64,
                offered_cross_bytes: 0,
                cpu: CpuTimes::default(),
            })
            .collect()
    }

    /// Two CPUs (2 ticks per ms here, for round numbers); the hypervisor
    /// steals one tick per ms from 50 ms on: nothing over the first
    /// half, half over the second, a quarter over the whole.
    #[test]
    fn stolen_share_by_hand() {
        let s: Vec<Sample> = steady(100)
            .into_iter()
            .enumerate()
            .map(|(i, mut x)| {
                x.cpu = CpuTimes {
                    total_ticks: 2 * i as u64,
                    steal_ticks: i.saturating_sub(50) as u64,
                };
                x
            })
            .collect();
        let ms = |m: i64| 1_000_000_000 + m * 1_000_000;
        assert_eq!(stolen_share(&s, ms(0), ms(50)), Some(0.0));
        assert_eq!(stolen_share(&s, ms(50), ms(100)), Some(0.5));
        assert_eq!(stolen_share(&s, ms(0), ms(100)), Some(0.25));
        let t = truth(&s, &[200e6], ms(0), ms(100)).unwrap();
        assert_eq!(t.stolen_share, Some(0.25));
        // No tick counted (counters never read): no share, not 0.
        assert_eq!(
            truth(&steady(100), &[200e6], ms(0), ms(100))
                .unwrap()
                .stolen_share,
            None
        );
    }

    /// 200 - 60 = 140 Mbit/s, the same in every sub-window; the window
    /// edges fall between samples (interpolated).
    #[test]
    fn steady_cross_traffic_by_hand() {
        let s = steady(100);
        let t = truth(&s, &[200e6], 1_010_500_000, 1_090_500_000).unwrap();
        assert!((t.available_bps - 140e6).abs() < 1.0, "{t:?}");
        assert!((t.min_bps - 140e6).abs() < 1.0 && (t.max_bps - 140e6).abs() < 1.0);
        assert!((t.sink_bps - 60e6).abs() < 1.0);
        assert!((t.receiver_bps - 60e6).abs() < 1.0);
        assert!((t.window_s - 0.08).abs() < 1e-9);
    }

    /// Cross traffic only in the second half: 200 over the first half,
    /// 200 - 120 = 80 over the second, 140 over the whole.
    #[test]
    fn sub_windows_show_the_spread() {
        let s: Vec<Sample> = (0..=100i64)
            .map(|i| {
                let cross = 15_000 * (i - 50).max(0) as u64;
                Sample {
                    t_ns: i * 1_000_000,
                    hop_bytes: vec![cross],
                    hop_drops: vec![0],
                    rcv_bytes: 0,
                    cross_bytes: cross,
                    offered_cross_bytes: 0,
                    cpu: CpuTimes::default(),
                }
            })
            .collect();
        let t = truth(&s, &[200e6], 0, 100_000_000).unwrap();
        assert!((t.available_bps - 140e6).abs() < 1.0, "{t:?}");
        assert!((t.max_bps - 200e6).abs() < 1.0);
        assert!((t.min_bps - 80e6).abs() < 1.0);
    }

    /// Two hops: 150 Mbit/s carrying only probes, 250 Mbit/s with 150 of
    /// cross traffic: the tight hop is the second, at 100.
    #[test]
    fn the_tight_hop_is_the_least_available() {
        let s: Vec<Sample> = (0..=10u64)
            .map(|i| Sample {
                t_ns: i as i64 * 1_000_000,
                hop_bytes: vec![1_000 * i, 1_000 * i + 18_750 * i],
                hop_drops: vec![0, 0],
                rcv_bytes: 1_000 * i,
                cross_bytes: 18_750 * i,
                offered_cross_bytes: 0,
                cpu: CpuTimes::default(),
            })
            .collect();
        let t = truth(&s, &[150e6, 250e6], 0, 10_000_000).unwrap();
        assert_eq!(t.tight_hop, 1);
        assert!((t.available_bps - 100e6).abs() < 1.0, "{t:?}");
        assert!((t.hop_cross_bps[0]).abs() < 1.0);
    }

    #[test]
    fn windows_outside_the_samples_are_refused() {
        let s = steady(10);
        assert!(truth(&s, &[200e6], 900_000_000, 1_005_000_000).is_err());
        assert!(truth(&s, &[200e6], 1_005_000_000, 1_020_000_000).is_err());
        assert!(truth(&s, &[200e6], 1_005_000_000, 1_005_000_000).is_err());
        assert!(truth(&s, &[200e6, 1e9], 1_001_000_000, 1_005_000_000).is_err());
    }

    proptest! {
        /// Whatever the traffic, truth lies within [min, max] of its
        /// sub-windows and never above the hop rate.
        #[test]
        fn truth_is_bracketed(steps in prop::collection::vec((0u64..30_000, 0u64..30_000), 20..200)) {
            let mut hop = 0;
            let mut rcv = 0;
            let s: Vec<Sample> = steps.iter().enumerate().map(|(i, &(a, b))| {
                rcv += a.min(b);
                hop += a.max(b);
                Sample { t_ns: i as i64 * 1_000_000, hop_bytes: vec![hop], hop_drops: vec![0], rcv_bytes: rcv, cross_bytes: 0, offered_cross_bytes: 0, cpu: CpuTimes::default() }
            }).collect();
            let end = (steps.len() as i64 - 1) * 1_000_000;
            let t = truth(&s, &[300e6], 0, end).unwrap();
            prop_assert!(t.min_bps <= t.available_bps + 1e-6 && t.available_bps <= t.max_bps + 1e-6);
            prop_assert!(t.max_bps <= 300e6 + 1e-6);
        }
    }
}
