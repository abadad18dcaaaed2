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
//! A head longer than a queue on the path overflows it, and the probe
//! behind it is dropped or queued behind a head cut short: the RTTs then
//! say nothing of the link (a 600 Mbit/s link read 2.8 Gbit/s behind
//! heads of 96 packets into a 100 KB queue on the simulator). Before the
//! hops are probed, probes to the destination behind the longest head are
//! compared with lone ones, and the heads shrink by a third until the
//! longest comes back (`fit_heads`).
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
    /// The heads the hops were probed behind (the ones asked, or fewer
    /// packets where those overflowed a queue); empty: lone probes.
    pub head_packets: Vec<u32>,
    /// How the heads were fitted to the path's queues, where asked.
    pub head_fit: Option<HeadFit>,
}

/// Probes to the destination behind the longest head, against lone ones.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadFit {
    /// The heads asked for.
    pub asked: Vec<u32>,
    /// Lone probes sent and answered.
    pub lone_sent: usize,
    pub lone_answered: usize,
    /// Per longest head tried, in order: (head packets, probes sent,
    /// answered).
    pub tries: Vec<(u32, usize, usize)>,
    /// Even the shortest heads tried lost their probes.
    pub gave_up: bool,
}

impl HeadFit {
    /// The heads were shrunk (or could not be made to fit).
    pub fn shrunk(&self) -> bool {
        self.tries.len() > 1 || self.gave_up
    }
}

/// Probes behind each longest head tried, and how many must come back.
const FIT_PROBES: usize = 6;
const FIT_ANSWERED: usize = 5;
/// Lone probes: the destination answers at all (two of three).
const FIT_LONE: usize = 3;
const FIT_LONE_ANSWERED: usize = 2;
/// Heads shrink no further than this (longest head, packets).
const FIT_MIN_HEAD: u32 = 4;

/// Shrinks `heads` by a third at a time until probes to the destination
/// (TTL `ttl`) behind the longest come back (`FIT_ANSWERED` of
/// `FIT_PROBES`) where lone probes do. Lone probes that do not come back
/// leave nothing to compare: the heads stay as asked. Random loss of 1 %
/// takes two of six once in 700 tries; a head that overflows a queue
/// half the time passes once in ten.
fn fit_heads<C: HopChannel + ?Sized>(
    channel: &mut C,
    heads: &[u32],
    ttl: u8,
    size: u32,
    mtu: u32,
    cost: &mut Cost,
) -> Result<(Vec<u32>, HeadFit), ChannelError> {
    let mut send = |head: u32| {
        let r = channel.probe_hop(ttl, size, head, mtu)?;
        count_probe(cost, size, head, mtu);
        Ok::<_, ChannelError>(r.rtt_ns.is_some())
    };
    let mut fit = HeadFit {
        asked: heads.to_vec(),
        lone_sent: 0,
        lone_answered: 0,
        tries: Vec::new(),
        gave_up: false,
    };
    (fit.lone_sent, fit.lone_answered) = until_known(FIT_LONE, FIT_LONE_ANSWERED, || send(0))?;
    let mut heads = heads.to_vec();
    if fit.lone_answered < FIT_LONE_ANSWERED {
        return Ok((heads, fit));
    }
    loop {
        let longest = heads.iter().copied().max().unwrap_or(0);
        let (sent, answered) = until_known(FIT_PROBES, FIT_ANSWERED, || send(longest))?;
        fit.tries.push((longest, sent, answered));
        if answered >= FIT_ANSWERED {
            return Ok((heads, fit));
        }
        let Some(shorter) = shrink(&heads) else {
            fit.gave_up = true;
            return Ok((heads, fit));
        };
        heads = shorter;
    }
}

/// Sends with `probe` (true: answered) until `need` of up to `most` are
/// answered or can no longer be: each lost probe waits out the timeout.
/// Returns (sent, answered).
fn until_known(
    most: usize,
    need: usize,
    mut probe: impl FnMut() -> Result<bool, ChannelError>,
) -> Result<(usize, usize), ChannelError> {
    let (mut sent, mut answered) = (0, 0);
    while sent < most && answered < need && sent - answered <= most - need {
        sent += 1;
        answered += usize::from(probe()?);
    }
    Ok((sent, answered))
}

/// Every head a third shorter; `None` once the longest would fall under
/// [`FIT_MIN_HEAD`] or nothing shrinks.
fn shrink(heads: &[u32]) -> Option<Vec<u32>> {
    let shorter: Vec<u32> = heads.iter().map(|&h| (h * 2).div_ceil(3)).collect();
    (shorter.iter().copied().max().unwrap_or(0) >= FIT_MIN_HEAD && shorter != heads)
        .then_some(shorter)
}

/// Counts one probe behind a head of `head` packets in `cost`.
fn count_probe(cost: &mut Cost, size: u32, head: u32, mtu: u32) {
    cost.streams += 1;
    cost.probe_packets += 1 + head as u64;
    cost.probe_bytes += size as u64 + head as u64 * mtu as u64;
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
        return Err(ChannelError::BadRequest(
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
    let mut report = HopsReport {
        hops: Vec::new(),
        samples: Vec::new(),
        links: Vec::new(),
        probes: 0,
        cost: Cost::default(),
        truth_bps: channel.side_report().truth.map(|t| t.link_bps),
        reached_destination: false,
        head_packets: params.head_packets.clone(),
        head_fit: None,
    };
    let max_size = *params.sizes.iter().max().expect("two sizes");
    if !params.head_packets.is_empty() {
        let (heads, fit) = fit_heads(
            channel,
            &params.head_packets,
            params.max_ttl,
            max_size,
            mtu,
            &mut report.cost,
        )?;
        report.head_packets = heads;
        report.head_fit = Some(fit);
    }
    let mut heads: Vec<u32> = if report.head_packets.is_empty() {
        vec![0]
    } else {
        report.head_packets.clone()
    };
    // Probe every hop; where the longest head's probes go missing at a
    // hop while the shortest's come back, the heads overflow a queue the
    // destination probes did not find full: shrink them and start again.
    let mut restarts = 0;
    loop {
        report.hops.clear();
        report.samples.clear();
        report.reached_destination = false;
        let overflow = probe_each_hop(
            channel,
            params,
            &heads,
            mtu,
            max_size,
            &mut report,
            &mut progress,
        )?;
        let Some(tried) = overflow else { break };
        let fit = report.head_fit.as_mut().expect("heads were fitted");
        fit.tries.push(tried);
        let Some(shorter) = shrink(&heads).filter(|_| restarts < MAX_RESTARTS) else {
            fit.gave_up = true;
            // The run stands as probed: its links say what they can.
            break;
        };
        restarts += 1;
        heads = shorter;
        report.head_packets = heads.clone();
    }
    report.links = estimate_links(&report.samples, &params.vps);
    report.cost.duration_s = (channel.elapsed_ns() - start_ns) as f64 / 1e9;
    report.cost.wall_s = started.elapsed().as_secs_f64();
    Ok(report)
}

/// Restarts with shorter heads after the first probing of the hops.
const MAX_RESTARTS: usize = 3;

/// Probes each TTL in turn behind `heads` (`[0]`: lone). Returns the
/// longest head's (packets, sent, answered) at a hop where more than a
/// third of its probes went missing (three or more) while the shortest
/// head's came back (nine in ten, three or more sent): that head
/// overflows a queue, and the run is to start again with shorter ones.
/// Probes behind the longest head go unanswered (3 lost at least, over a
/// third of them) where those behind the shortest come back (9 in 10 of
/// 3 at least): (sent, answered) for each.
fn longest_head_lost(short: (usize, usize), long: (usize, usize)) -> bool {
    let long_lost = long.0 - long.1;
    long_lost >= 3 && long_lost * 3 > long.0 && short.0 >= 3 && short.1 * 10 >= short.0 * 9
}

fn probe_each_hop<C: HopChannel + ?Sized>(
    channel: &mut C,
    params: &HopsParams,
    heads: &[u32],
    mtu: u32,
    max_size: u32,
    report: &mut HopsReport,
    progress: &mut impl FnMut(u8, usize, usize),
) -> Result<Option<(u32, usize, usize)>, ChannelError> {
    let mut seed = params.seed.max(1);
    let mut silent = 0;
    let (shortest, longest) = (
        heads.iter().copied().min().unwrap_or(0),
        heads.iter().copied().max().unwrap_or(0),
    );
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
            count_probe(&mut report.cost, size, head, mtu);
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
            if send(&mut rec, report, max_size, heads[0])?.rtt_ns.is_some() {
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
        // (sent, answered) behind the shortest and the longest head.
        let (mut short, mut long) = ((0usize, 0usize), (0usize, 0usize));
        for (i, &(size, head)) in cells.iter().enumerate() {
            let r = send(&mut rec, report, size, head)?;
            if let Some(rtt_ns) = r.rtt_ns {
                report.samples.push(VpsSample {
                    ttl,
                    size_bytes: size,
                    head_bytes: head as u64 * mtu as u64,
                    rtt_ns: rtt_ns as f64,
                });
            }
            progress(ttl, i + 1, total);
            let back = usize::from(r.rtt_ns.is_some());
            if shortest < longest {
                if head == shortest {
                    short = (short.0 + 1, short.1 + back);
                } else if head == longest {
                    long = (long.0 + 1, long.1 + back);
                }
                if longest_head_lost(short, long) {
                    report.hops.push(rec);
                    return Ok(Some((longest, long.0, long.1)));
                }
            }
        }
        let done = rec.destination;
        report.hops.push(rec);
        if done {
            report.reached_destination = true;
            break;
        }
    }
    Ok(None)
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

    /// `run_hops` on a simulated `target` behind `heads`, `repeats` probes
    /// a cell; the report and the parameters it ran with.
    fn behind_heads(target: &str, heads: Vec<u32>, repeats: usize) -> (HopsReport, HopsParams) {
        let mut params = HopsParams::for_mtu(1500);
        params.head_packets = heads;
        params.repeats = repeats;
        let mut ch =
            SimHopChannel::new(parse_sim_target(target).unwrap(), 1_000_000, 1_000_000_000);
        (run_hops(&mut ch, &params, |_, _, _| {}).unwrap(), params)
    }

    /// Shapers at 600, 400 and 200 Mbit/s on 10 Gbit/s links (the lab's
    /// chain): behind a head each shaped hop reads its own rate within
    /// 2 % (the head's packets follow each other at the token rate).
    #[test]
    fn behind_a_head_shaped_hops_read_their_rates() {
        let target = "sim:hops=10G+10G+10G+10G,shaper=none+600M/3000B+400M/3000B+200M/3000B,cross=none,seed=7";
        let (report, mut params) = behind_heads(target, vec![16, 24], 6);
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

    /// The lab's chain on a 10 Gbit/s sender with 100 KB queues: heads
    /// of 96 packets overflow the 600 Mbit/s hop's queue (90 of them
    /// queue there, 66 fit), and behind them this path read 2.77, 1.87 and
    /// 0.91 Gbit/s for 600, 400 and 200 Mbit/s before heads were fitted.
    /// Shrunk by a third (43 and 64: 60 queue) every link reads within
    /// 2 % and every probe comes back.
    #[test]
    fn heads_that_overflow_a_queue_are_shrunk() {
        let target =
            "sim:hops=10G+600M+400M+200M,cross=none,buffer=10MB+100KB+100KB+100KB,coalescence=off";
        let (report, _) = behind_heads(target, vec![64, 96], 5);
        assert_eq!(report.head_packets, vec![43, 64]);
        let fit = report.head_fit.as_ref().unwrap();
        assert!(fit.shrunk() && !fit.gave_up, "{fit:?}");
        assert_eq!(fit.asked, vec![64, 96]);
        assert_eq!((fit.lone_sent, fit.lone_answered), (2, 2));
        assert_eq!(fit.tries.len(), 2, "{fit:?}");
        assert!(fit.tries[0].0 == 96 && fit.tries[0].2 < FIT_ANSWERED);
        assert_eq!(fit.tries[1], (64, 5, 5));
        for h in &report.hops {
            assert_eq!(h.replies, h.probes, "ttl {}", h.ttl);
        }
        for (l, rate) in report.links[1..].iter().zip([600e6, 400e6, 200e6]) {
            let c = measured(l);
            assert!((c / rate - 1.0).abs() < 0.02, "ttl {}: {c}", l.ttl);
        }
    }

    /// A hand-made path for the fitting rules: three hops, each adding
    /// 10 ns per byte; `lost(ttl, head, n)` drops the n-th probe.
    struct Lossy<F: FnMut(u8, u32, usize) -> bool> {
        lost: F,
        sent: usize,
    }

    impl<F: FnMut(u8, u32, usize) -> bool> HopChannel for Lossy<F> {
        fn probe_hop(
            &mut self,
            ttl: u8,
            size: u32,
            head: u32,
            head_bytes: u32,
        ) -> Result<tightlink_core::channel::HopReply, ChannelError> {
            self.sent += 1;
            let hops = ttl.min(3) as f64;
            let rtt = hops * (10.0 * size as f64 + 10.0 * (head * head_bytes) as f64) + 1e5;
            let back = !(self.lost)(ttl, head, self.sent);
            Ok(tightlink_core::channel::HopReply {
                rtt_ns: back.then_some(rtt as i64),
                responder: back.then(|| format!("hop {}", ttl.min(3))),
                destination: back && ttl >= 3,
            })
        }
        fn mtu_bytes(&self) -> u32 {
            1500
        }
        fn elapsed_ns(&self) -> i64 {
            self.sent as i64 * 1_000_000
        }
        fn describe(&self) -> String {
            "hand-made".into()
        }
    }

    /// A queue the destination probes found with room (heads of 96 came
    /// back 5 of 5, enough) but that the 96-packet heads overflow at hop 2 while
    /// hops are probed: the run starts again behind 43 and 64, whose
    /// probes all come back.
    #[test]
    fn an_overflow_seen_while_probing_starts_again_with_shorter_heads() {
        let mut ch = Lossy {
            lost: |ttl, head, _| (2..=3).contains(&ttl) && head > 64,
            sent: 0,
        };
        let mut params = HopsParams::for_mtu(1500);
        params.head_packets = vec![64, 96];
        params.repeats = 3;
        let report = run_hops(&mut ch, &params, |_, _, _| {}).unwrap();
        assert_eq!(report.head_packets, vec![43, 64]);
        let fit = report.head_fit.unwrap();
        assert_eq!(fit.tries[0], (96, 5, 5));
        let (head, sent, answered) = fit.tries[1];
        assert_eq!((head, answered), (96, 0));
        assert!((3..=24).contains(&sent), "{sent}");
        assert!(!fit.gave_up);
        assert!(report.reached_destination);
        assert_eq!(report.hops.len(), 3);
        for h in &report.hops {
            assert_eq!(h.replies, h.probes, "ttl {}", h.ttl);
        }
    }

    /// Where lone probes do not come back either, loss behind heads says
    /// nothing about queues: the heads stay as asked. Where every head
    /// loses its probe and lone probes come back, the heads shrink to
    /// the floor and the fit says it gave up.
    #[test]
    fn heads_stay_where_nothing_comes_back_and_give_up_at_the_floor() {
        let mut params = HopsParams::for_mtu(1500);
        params.head_packets = vec![64, 96];
        params.repeats = 1;
        params.max_ttl = 4;
        let mut silent = Lossy {
            lost: |ttl, _, _| ttl >= 4,
            sent: 0,
        };
        let report = run_hops(&mut silent, &params, |_, _, _| {}).unwrap();
        assert_eq!(report.head_packets, vec![64, 96]);
        let fit = report.head_fit.unwrap();
        assert_eq!((fit.lone_sent, fit.lone_answered), (2, 0));
        assert!(fit.tries.is_empty() && !fit.shrunk());

        let mut heads_lost = Lossy {
            lost: |_, head, _| head > 0,
            sent: 0,
        };
        let report = run_hops(&mut heads_lost, &params, |_, _, _| {}).unwrap();
        let fit = report.head_fit.unwrap();
        assert!(fit.gave_up, "{fit:?}");
        // A third off each time, rounded up, down to a longest head of 4
        // (the next, 3, is under the floor).
        let longest: Vec<u32> = fit.tries.iter().map(|t| t.0).collect();
        assert_eq!(longest, vec![96, 64, 43, 29, 20, 14, 10, 7, 5, 4]);
        assert!(fit.tries.iter().all(|t| t.2 == 0 && t.1 == 2));
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
