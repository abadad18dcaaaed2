//! Per-hop capacity probing (pathchar's variable packet size; \[HOST\]
//! section 4.1) over a [`HopChannel`]: TTL-limited probes of several sizes
//! to each router in turn, the smallest RTT per size, and the per-link
//! estimates of [`tightlink_core::capacity::vps`].
//!
//! Each probe may go behind a head of back-to-back full-size packets that
//! cross the whole path (`head_packets`): that is what makes token-bucket
//! shapers visible (a lone packet passes on a full bucket). Two head
//! lengths are used, so that the core can tell at which hops the head
//! queued. The RTT is then counted from the head's first packet.
//!
//! Probes go one at a time, cells (size, head) in a shuffled order so
//! that slow drifts spread over all sizes; a hop that stays silent for
//! `discovery_tries` probes is skipped (its neighbours' link spans it),
//! and probing ends at the destination or after `max_silent` silent hops.

use crate::Cost;
use tightlink_core::capacity::{estimate_links, LinkEstimate, VpsParams, VpsSample};
use tightlink_core::channel::{ChannelError, HopChannel};

#[derive(Debug, Clone, PartialEq)]
pub struct HopsParams {
    /// Probe sizes, IP bytes.
    pub sizes: Vec<u32>,
    /// Probes per (size, head) cell.
    pub repeats: usize,
    /// Head lengths in packets; empty: lone probes (classic pathchar).
    pub head_packets: Vec<u32>,
    pub first_ttl: u8,
    pub max_ttl: u8,
    pub discovery_tries: usize,
    pub max_silent: usize,
    pub seed: u64,
    pub vps: VpsParams,
}

impl HopsParams {
    /// `count` sizes spread evenly from `low` to `high` bytes.
    pub fn even_sizes(low: u32, high: u32, count: usize) -> Vec<u32> {
        let count = count.max(2);
        (0..count)
            .map(|i| low + ((high - low) as u64 * i as u64 / (count - 1) as u64) as u32)
            .collect()
    }

    /// Defaults for a path whose first link carries `mtu` bytes: eight
    /// sizes from 600 B (Linux quotes at most 576 B of the probe in its
    /// ICMP error, so from about 548 B up the reply no longer grows with
    /// the probe) to the MTU, ten probes each.
    pub fn for_mtu(mtu: u32) -> Self {
        HopsParams {
            sizes: Self::even_sizes(600.min(mtu / 2), mtu, 8),
            repeats: 10,
            head_packets: Vec::new(),
            first_ttl: 1,
            max_ttl: 30,
            discovery_tries: 3,
            max_silent: 3,
            seed: 1,
            vps: VpsParams::default(),
        }
    }
}

/// One TTL as probed.
#[derive(Debug, Clone, PartialEq)]
pub struct HopRecord {
    pub ttl: u8,
    pub responder: Option<String>,
    pub destination: bool,
    pub probes: usize,
    pub replies: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HopsReport {
    pub hops: Vec<HopRecord>,
    pub samples: Vec<VpsSample>,
    pub links: Vec<LinkEstimate>,
    /// Probes sent (each behind its head, if any).
    pub probes: usize,
    /// Bytes and packets include the heads; a probe with its head is one
    /// stream.
    pub cost: Cost,
    /// Each link's sustained rate, where the channel knows it.
    pub truth_bps: Option<Vec<f64>>,
    pub reached_destination: bool,
}

/// Fisher-Yates with a xorshift: the cell order of one hop.
fn shuffle<T>(v: &mut [T], seed: &mut u64) {
    for i in (1..v.len()).rev() {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        let j = (*seed % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// Probes every hop in turn; `progress(ttl, done, total)` after each probe.
pub fn run_hops<C: HopChannel + ?Sized>(
    channel: &mut C,
    params: &HopsParams,
    mut progress: impl FnMut(u8, usize, usize),
) -> Result<HopsReport, ChannelError> {
    if params.sizes.len() < 2 || params.repeats == 0 {
        return Err(ChannelError::Io(
            "per-hop capacity needs at least two probe sizes and one repeat".into(),
        ));
    }
    let mtu = channel.mtu_bytes();
    if let Some(&s) = params.sizes.iter().find(|&&s| s > mtu || s < 64) {
        return Err(ChannelError::Io(format!(
            "probe size {s} B is outside 64..={mtu} B (the first link's MTU)"
        )));
    }
    let start_ns = channel.elapsed_ns();
    let started = std::time::Instant::now();
    let heads: Vec<u32> = if params.head_packets.is_empty() {
        vec![0]
    } else {
        params.head_packets.clone()
    };
    let mut seed = params.seed.max(1);
    let mut report = HopsReport {
        hops: Vec::new(),
        samples: Vec::new(),
        links: Vec::new(),
        probes: 0,
        cost: Cost::default(),
        truth_bps: channel.side_report().truth.map(|t| t.link_bps),
        reached_destination: false,
    };
    let mut silent = 0;
    let max_size = *params.sizes.iter().max().expect("two sizes");
    for ttl in params.first_ttl.max(1)..=params.max_ttl {
        let mut rec = HopRecord {
            ttl,
            responder: None,
            destination: false,
            probes: 0,
            replies: 0,
        };
        let mut send = |rec: &mut HopRecord, report: &mut HopsReport, size: u32, head: u32| {
            let r = channel.probe_hop(ttl, size, head, mtu)?;
            rec.probes += 1;
            report.probes += 1;
            report.cost.streams += 1;
            report.cost.probe_packets += 1 + head as u64;
            report.cost.probe_bytes += size as u64 + head as u64 * mtu as u64;
            if r.rtt_ns.is_some() {
                rec.replies += 1;
                rec.destination |= r.destination;
                if rec.responder.is_none() {
                    rec.responder = r.responder.clone();
                }
            }
            Ok::<_, ChannelError>(r)
        };
        // Discovery: does this TTL answer at all?
        let mut answered = false;
        for _ in 0..params.discovery_tries.max(1) {
            if send(&mut rec, &mut report, max_size, heads[0])?
                .rtt_ns
                .is_some()
            {
                answered = true;
                break;
            }
        }
        if !answered {
            report.hops.push(rec);
            silent += 1;
            if silent >= params.max_silent {
                break;
            }
            continue;
        }
        silent = 0;
        let mut cells: Vec<(u32, u32)> = params
            .sizes
            .iter()
            .flat_map(|&s| heads.iter().map(move |&h| (s, h)))
            .flat_map(|c| std::iter::repeat_n(c, params.repeats))
            .collect();
        shuffle(&mut cells, &mut seed);
        let total = cells.len();
        for (i, &(size, head)) in cells.iter().enumerate() {
            let r = send(&mut rec, &mut report, size, head)?;
            if let Some(rtt_ns) = r.rtt_ns {
                report.samples.push(VpsSample {
                    ttl,
                    size_bytes: size,
                    head_bytes: head as u64 * mtu as u64,
                    rtt_ns: rtt_ns as f64,
                });
            }
            progress(ttl, i + 1, total);
        }
        let done = rec.destination;
        report.hops.push(rec);
        if done {
            report.reached_destination = true;
            break;
        }
    }
    report.links = estimate_links(&report.samples, &params.vps);
    report.cost.duration_s = (channel.elapsed_ns() - start_ns) as f64 / 1e9;
    report.cost.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_core::capacity::LinkCapacity;
    use tightlink_sim::{parse_sim_target, PathSpec, SimHopChannel};

    fn measured(l: &LinkEstimate) -> f64 {
        match l.capacity {
            LinkCapacity::Measured { capacity_bps, .. } => capacity_bps,
            c => panic!("link to ttl {}: {c:?}", l.ttl),
        }
    }

    /// pathchar's own ground: links of 100, 40 and 10 Mbit/s with
    /// Poisson cross traffic on the middle one; every link within 5 %.
    #[test]
    fn classic_vps_finds_each_link_of_a_slow_path() {
        let spec =
            parse_sim_target("sim:hops=100M+40M+10M,cross=none+poisson:10M+none,seed=3").unwrap();
        let mut ch = SimHopChannel::new(spec, 1_000_000, 1_000_000_000);
        let report = run_hops(&mut ch, &HopsParams::for_mtu(1500), |_, _, _| {}).unwrap();
        assert!(report.reached_destination);
        assert_eq!(report.hops.len(), 3);
        assert_eq!(report.links.len(), 3);
        for (l, truth) in report.links.iter().zip([100e6, 40e6, 10e6]) {
            let c = measured(l);
            assert!(
                (c / truth - 1.0).abs() < 0.05,
                "ttl {}: {c} vs {truth}",
                l.ttl
            );
        }
        assert_eq!(report.hops[2].responder.as_deref(), Some("receiver"));
    }

    /// \[HOST\]'s limit: on a 10 Gbit/s link the 900 B size span is
    /// 0.72 us, below the reply jitter; the answer is "at least", not a
    /// number.
    #[test]
    fn a_fast_link_is_answered_at_least() {
        let spec = parse_sim_target("sim:hops=1G+10G,cross=none,seed=5").unwrap();
        let mut ch = SimHopChannel::new(spec, 1_000_000, 1_000_000_000);
        let report = run_hops(&mut ch, &HopsParams::for_mtu(1500), |_, _, _| {}).unwrap();
        let l = &report.links[1];
        assert!(
            matches!(l.capacity, LinkCapacity::AtLeast { bps } if bps < 10e9),
            "{:?}",
            l.capacity
        );
    }

    /// Shapers at 600, 400 and 200 Mbit/s on 10 Gbit/s links (the lab's
    /// chain): behind a head each shaped hop reads its own rate within
    /// 2 % (the head's packets follow each other at the token rate).
    #[test]
    fn behind_a_head_shaped_hops_read_their_rates() {
        let target = "sim:hops=10G+10G+10G+10G,shaper=none+600M/3000B+400M/3000B+200M/3000B,cross=none,seed=7";
        let mut params = HopsParams::for_mtu(1500);
        params.head_packets = vec![16, 24];
        params.repeats = 6;
        let mut ch =
            SimHopChannel::new(parse_sim_target(target).unwrap(), 1_000_000, 1_000_000_000);
        let report = run_hops(&mut ch, &params, |_, _, _| {}).unwrap();
        let links = &report.links;
        assert_eq!(links.len(), 4);
        // The head queues on the first 10 Gbit/s link too (the sender
        // puts it there at once); the sender's jitter makes that one the
        // least precise.
        assert_eq!(links[0].queued_behind_head, Some(true));
        let first = measured(&links[0]);
        assert!((first / 10e9 - 1.0).abs() < 0.2, "{first}");
        for (l, rate) in links[1..].iter().zip([600e6, 400e6, 200e6]) {
            assert_eq!(l.queued_behind_head, Some(true), "ttl {}", l.ttl);
            let c = measured(l);
            assert!(
                (c / rate - 1.0).abs() < 0.02,
                "ttl {}: {c} vs {rate}",
                l.ttl
            );
        }
        // Lone probes pass every bucket full: the shapers are invisible,
        // no link reads as slow as a shaper.
        params.head_packets.clear();
        let mut ch =
            SimHopChannel::new(parse_sim_target(target).unwrap(), 1_000_000, 1_000_000_000);
        let lone = run_hops(&mut ch, &params, |_, _, _| {}).unwrap();
        for l in &lone.links {
            let low = match l.capacity {
                LinkCapacity::Measured { low_bps, .. } => low_bps,
                LinkCapacity::AtLeast { bps } => bps,
                LinkCapacity::Inconsistent { .. } => f64::INFINITY,
            };
            assert!(low > 700e6, "ttl {}: {:?}", l.ttl, l.capacity);
        }
        assert_eq!(report.truth_bps, Some(vec![10e9, 600e6, 400e6, 200e6]));
    }

    #[test]
    fn bad_sizes_are_refused() {
        let mut ch = SimHopChannel::new(PathSpec::default(), 1_000_000, 1_000_000_000);
        let mut p = HopsParams::for_mtu(1500);
        p.sizes = vec![600, 9000];
        let e = run_hops(&mut ch, &p, |_, _, _| {}).unwrap_err();
        assert!(e.to_string().contains("9000 B"), "{e}");
    }
}
