//! A simulated path: a sender with pacing jitter, FIFO hops with their own
//! cross traffic, and a receiver; probe streams in, recorded probe streams
//! and their ground truth out. Deterministic from its seed.
//!
//! Each hop is processed as a stream of arrivals in time order (probe
//! packets from the previous hop merged with the hop's own cross traffic),
//! which is exact for FIFO hops whose cross traffic leaves after one hop,
//! and costs O(1) per packet per hop. Cross traffic between probe streams
//! is generated when the next stream reaches the hop, so idle time costs
//! only the packets it holds.
//!
//! Truth for a stream: for each hop, capacity minus the cross
//! bits that arrived at the hop (and were accepted) while the stream's
//! packets were arriving there, over that window, and zero when a burst
//! brought more than the link carries in it; the path's available bandwidth is the smallest over the
//! hops (the tight link), with its min and max over `truth_splits` equal
//! sub-windows. A stream sent in parts (a multi-rate stream's sub-streams)
//! can have each part's truth at that link too: from its first packet's
//! arrival there to the next part's first.

use crate::cross::{CrossSpec, CrossTraffic};
use crate::hop::{Hop, HopSpec, HopStats};
use crate::receiver::{Receiver, ReceiverSpec};
use tightlink_core::channel::GroundTruth;
use tightlink_core::rng::Rng;
use tightlink_core::{ProbePacket, ProbeStream};

/// Pacing of the sender: most packets leave within a fraction of a
/// microsecond of schedule, a few several microseconds late (as measured
/// on these machines: 95 % within 1 us at 12 us gaps).
#[derive(Debug, Clone, PartialEq)]
pub struct JitterSpec {
    /// Spread of ordinary lateness (half-normal), ns.
    pub sigma_ns: f64,
    /// Share of packets that are late by much more.
    pub late_share: f64,
    /// Mean extra lateness of those (exponential), ns.
    pub late_mean_ns: f64,
}

impl JitterSpec {
    pub fn none() -> Self {
        JitterSpec {
            sigma_ns: 0.0,
            late_share: 0.0,
            late_mean_ns: 0.0,
        }
    }
}

impl Default for JitterSpec {
    fn default() -> Self {
        JitterSpec {
            sigma_ns: 300.0,
            late_share: 0.03,
            late_mean_ns: 4_000.0,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct HopConfig {
    pub hop: HopSpec,
    pub cross: Option<CrossSpec>,
}

/// ICMP replies to TTL-limited probes: the router's slow path and the
/// way back (links in reverse, idle but for random queueing).
#[derive(Debug, Clone, PartialEq)]
pub struct IcmpSpec {
    /// Time a router takes to generate an ICMP error, ns.
    pub reply_delay_ns: f64,
    /// Mean of an exponential extra on top (a busy control plane).
    pub reply_jitter_mean_ns: f64,
    /// Share of replies queued on each reverse link, and the mean of that
    /// queueing (exponential), ns.
    pub reverse_queue_share: f64,
    pub reverse_queue_mean_ns: f64,
}

impl Default for IcmpSpec {
    fn default() -> Self {
        IcmpSpec {
            reply_delay_ns: 20_000.0,
            reply_jitter_mean_ns: 5_000.0,
            reverse_queue_share: 0.2,
            reverse_queue_mean_ns: 20_000.0,
        }
    }
}

/// One packet of a TTL-limited stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtlPacket {
    pub offset_ns: i64,
    pub size_bytes: u32,
    pub ttl: u8,
}

/// An ICMP reply as the sender stamps it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtlReply {
    /// Sender's clock, ns.
    pub at_ns: i64,
    /// Hops the packet crossed before the answer (= the TTL, or the path
    /// length at the destination).
    pub hop: usize,
    /// The receiver answered (port unreachable), not a router.
    pub destination: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtlOutcome {
    /// Scheduled send on the sender's clock, ns.
    pub send_ns: i64,
    pub reply: Option<TtlReply>,
}

/// A hop's first and last packet arrival of a stream (none: no packet).
type Window = (Option<f64>, Option<f64>);

/// What one hop saw of a stream: its whole window and each part's.
struct HopWindows {
    whole: Window,
    parts: Vec<Window>,
}

/// Everything that defines a simulated path.
#[derive(Debug, Clone, PartialEq)]
pub struct PathSpec {
    pub hops: Vec<HopConfig>,
    pub jitter: JitterSpec,
    pub receiver: ReceiverSpec,
    /// Sender clock offset against simulation time, ns.
    pub sender_offset_ns: i64,
    pub seed: u64,
    /// Simulated time before the first stream (queues reach steady state).
    pub warmup_ns: f64,
    /// Idle time after each stream (the paper: 10 ms).
    pub idle_ns: f64,
    pub truth_splits: usize,
    /// Share of probe packets lost at random after the last hop (a lossy
    /// link or a bad cable: independent of load, so it says nothing about
    /// the available bandwidth).
    pub random_loss: f64,
    /// Replies to TTL-limited probes (`tightlink hops`).
    pub icmp: IcmpSpec,
    /// A sending host descheduled now and then (another process on its
    /// CPUs): the share of streams in which the sender stalls once, and
    /// for how long, ns. Packets due during the stall leave together at
    /// its end.
    pub stall_share: f64,
    pub stall_ns: f64,
}

impl PathSpec {
    /// The smallest capacity on the path (the narrow link; a shaped hop
    /// counts at its token rate).
    pub fn narrow_capacity_bps(&self) -> f64 {
        self.hops
            .iter()
            .map(|h| h.hop.sustained_bps())
            .fold(f64::INFINITY, f64::min)
    }

    /// Long-run available bandwidth: min over hops of capacity minus the
    /// mean cross rate.
    pub fn nominal_available_bps(&self) -> f64 {
        self.hops
            .iter()
            .map(nominal_free_bps)
            .fold(f64::INFINITY, f64::min)
    }

    /// The sustained capacity of the tight link: the hop with the least
    /// nominal available bandwidth (the first such).
    pub fn tight_capacity_bps(&self) -> f64 {
        self.hops
            .iter()
            .min_by(|a, b| nominal_free_bps(a).total_cmp(&nominal_free_bps(b)))
            .map_or(0.0, |h| h.hop.sustained_bps())
    }
}

/// A hop's capacity minus its mean cross rate.
fn nominal_free_bps(h: &HopConfig) -> f64 {
    h.hop.sustained_bps() - h.cross.as_ref().map_or(0.0, |c| c.rate_bps)
}

/// A probe stream as the simulator delivered it.
#[derive(Debug, Clone, PartialEq)]
pub struct SimStream {
    pub stream: ProbeStream,
    /// `None` when fewer than two packets crossed the path.
    pub truth: Option<GroundTruth>,
    /// The most any packet left behind its schedule, ns.
    pub worst_lag_ns: f64,
    /// Each part's available bandwidth at the tight link, bit/s
    /// ([`SimPath::send_stream_in_parts`]; empty otherwise). `None` for a
    /// part none of whose packets reached it.
    pub part_truths_bps: Vec<Option<f64>>,
}

pub struct SimPath {
    spec: PathSpec,
    hops: Vec<Hop>,
    cross: Vec<Option<CrossTraffic>>,
    receiver: Receiver,
    rng: Rng,
    now_ns: f64,
    last_departure_ns: f64,
    events: u64,
    /// Cross-traffic bits offered at each hop so far.
    cross_offered_bits: Vec<f64>,
}

impl SimPath {
    pub fn new(spec: PathSpec) -> Self {
        let mut rng = Rng::new(spec.seed);
        let hops = spec.hops.iter().map(|h| Hop::new(h.hop.clone())).collect();
        let cross = spec
            .hops
            .iter()
            .map(|h| h.cross.as_ref().map(|c| CrossTraffic::new(c, rng.fork())))
            .collect();
        SimPath {
            receiver: Receiver::new(spec.receiver.clone()),
            now_ns: spec.warmup_ns,
            hops,
            cross,
            rng,
            last_departure_ns: f64::NEG_INFINITY,
            cross_offered_bits: vec![0.0; spec.hops.len()],
            spec,
            events: 0,
        }
    }

    pub fn spec(&self) -> &PathSpec {
        &self.spec
    }

    /// Simulated time now (sender side), ns.
    pub fn now_ns(&self) -> f64 {
        self.now_ns
    }

    /// Packet events simulated so far (one arrival and one departure or
    /// drop per packet per hop).
    pub fn events(&self) -> u64 {
        self.events
    }

    pub fn hop_stats(&self) -> Vec<HopStats> {
        self.hops.iter().map(|h| h.stats).collect()
    }

    /// Lets simulated time pass (no probes), e.g. between measurements.
    pub fn idle(&mut self, ns: f64) {
        self.now_ns += ns.max(0.0);
    }

    fn lateness(&mut self) -> f64 {
        let j = &self.spec.jitter;
        let mut late = (self.rng.normal() * j.sigma_ns).abs();
        if j.late_share > 0.0 && self.rng.unit() < j.late_share {
            late += self.rng.exp(j.late_mean_ns);
        }
        late
    }

    /// Sends one probe stream: packets at `offsets_ns` (non-decreasing,
    /// from the stream's start) with the given sizes. Returns what the
    /// receiver recorded and the truth; simulated time then moves past the
    /// stream and the idle gap.
    pub fn send_stream(&mut self, id: u64, offsets_ns: &[i64], sizes: &[u32]) -> SimStream {
        self.send_stream_in_parts(id, offsets_ns, sizes, &[])
    }

    /// [`Self::send_stream`], and the truth of each part: `part_starts`
    /// are the indices of the parts' first packets (increasing, the first
    /// 0), e.g. a multi-rate stream's sub-streams.
    pub fn send_stream_in_parts(
        &mut self,
        id: u64,
        offsets_ns: &[i64],
        sizes: &[u32],
        part_starts: &[usize],
    ) -> SimStream {
        assert_eq!(offsets_ns.len(), sizes.len(), "one size per packet");
        assert!(
            part_starts.windows(2).all(|w| w[0] < w[1])
                && part_starts.first().is_none_or(|&f| f == 0)
                && part_starts.last().is_none_or(|&l| l < offsets_ns.len()),
            "parts start at 0 and increase within the stream"
        );
        let n = offsets_ns.len();
        let start = self.now_ns;
        let mut send_ns = Vec::with_capacity(n);
        // Actual departures from the sender: never before schedule, never
        // overtaking (one NIC queue).
        let mut times: Vec<f64> = Vec::with_capacity(n);
        // Drawn only where stalls are asked for, so other paths keep
        // their seeds' streams.
        let stall =
            (self.spec.stall_share > 0.0 && self.rng.unit() < self.spec.stall_share).then(|| {
                let span = offsets_ns.last().copied().unwrap_or(0) as f64;
                let from = start + self.rng.unit() * span;
                (from, from + self.spec.stall_ns)
            });
        let mut worst_lag_ns: f64 = 0.0;
        for &off in offsets_ns {
            let intended = start + off as f64;
            send_ns.push(intended.round() as i64 + self.spec.sender_offset_ns);
            let mut t = (intended + self.lateness()).max(self.last_departure_ns);
            if let Some((from, to)) = stall {
                if (from..to).contains(&t) {
                    t = to;
                }
            }
            worst_lag_ns = worst_lag_ns.max(t - intended);
            self.last_departure_ns = t;
            times.push(t);
        }
        let hops = self.hops.len();
        let (mut alive, windows) = self.forward(&mut times, sizes, &vec![hops; n], part_starts);
        if self.spec.random_loss > 0.0 {
            // Drawn only on lossy paths, so other paths keep their seeds' streams.
            for a in alive.iter_mut().filter(|a| **a) {
                *a = self.rng.unit() >= self.spec.random_loss;
            }
        }
        let mut packets = Vec::with_capacity(n);
        for i in 0..n {
            let recv_ns = alive[i].then(|| {
                let stamp = self.receiver.stamp(times[i]);
                self.receiver.clock(stamp)
            });
            packets.push(ProbePacket {
                size_bytes: sizes[i],
                send_ns: send_ns[i],
                recv_ns,
            });
        }
        let whole: Vec<Window> = windows.iter().map(|w| w.whole).collect();
        let truth = self.truth(&whole);
        let part_truths_bps = match self.tight_hop(&whole) {
            Some(k) if !part_starts.is_empty() => self.part_truths(k, &windows[k].parts),
            _ => vec![None; part_starts.len()],
        };
        let end = start + offsets_ns.last().copied().unwrap_or(0) as f64;
        self.now_ns = end + self.spec.idle_ns;
        SimStream {
            stream: ProbeStream::new(id, packets),
            truth,
            worst_lag_ns,
            part_truths_bps,
        }
    }

    /// Carries packets (actual send times in `times`) through the first
    /// `cross_hops[i]` hops each; `times` become arrival times at the end
    /// of the last hop crossed. Returns which were not dropped and each
    /// hop's (first, last) arrival window, whole and of each part that
    /// starts at `part_starts`.
    fn forward(
        &mut self,
        times: &mut [f64],
        sizes: &[u32],
        cross_hops: &[usize],
        part_starts: &[usize],
    ) -> (Vec<bool>, Vec<HopWindows>) {
        let n = times.len();
        let mut alive = vec![true; n];
        let mut windows = Vec::with_capacity(self.hops.len());
        for k in 0..self.hops.len() {
            let here = |i: usize| alive[i] && cross_hops[i] > k;
            let window = |from: usize, to: usize| -> Window {
                (
                    (from..to).find(|&i| here(i)).map(|i| times[i]),
                    (from..to).rev().find(|&i| here(i)).map(|i| times[i]),
                )
            };
            let (first, last) = window(0, n);
            let parts: Vec<Window> = part_starts
                .iter()
                .enumerate()
                .map(|(j, &from)| window(from, part_starts.get(j + 1).copied().unwrap_or(n)))
                .collect();
            if let Some(f) = first {
                self.hops[k].forget_cross_before(f);
            }
            let prop = self.hops[k].spec.propagation_ns;
            for i in 0..n {
                if !alive[i] || cross_hops[i] <= k {
                    continue;
                }
                let arrival = times[i];
                self.offer_cross_until(k, arrival);
                self.events += 2;
                match self.hops[k].offer(arrival, sizes[i]) {
                    Some(d) => times[i] = d + prop,
                    None => alive[i] = false,
                }
            }
            windows.push(HopWindows {
                whole: (first, last),
                parts,
            });
        }
        (alive, windows)
    }

    /// Offers hop `k`'s cross traffic that arrives up to `until_ns`.
    fn offer_cross_until(&mut self, k: usize, until_ns: f64) {
        if let Some(c) = self.cross[k].as_mut() {
            while c.peek_ns() <= until_ns {
                let (t, b) = c.pop().expect("peeked");
                self.hops[k].offer_cross(t, b);
                self.cross_offered_bits[k] += b as f64 * 8.0;
                self.events += 2;
            }
        }
    }

    /// Carries one packet of a long-lived flow that leaves the sender at
    /// `send_ns` (sim time, in send order, not mixed with probe streams)
    /// through every hop; returns its arrival at the receiver's NIC, or
    /// `None` where a hop dropped it. Random loss applies as to probes.
    pub fn carry(&mut self, send_ns: f64, bytes: u32) -> Option<f64> {
        let mut t = send_ns;
        for k in 0..self.hops.len() {
            // No stream window asks for the truth here: keep no history.
            self.hops[k].forget_cross_before(t);
            self.offer_cross_until(k, t);
            self.events += 2;
            t = self.hops[k].offer(t, bytes)? + self.hops[k].spec.propagation_ns;
        }
        if self.spec.random_loss > 0.0 && self.rng.unit() < self.spec.random_loss {
            return None;
        }
        Some(t)
    }

    /// Offers every hop's cross traffic up to `until_ns`, so that
    /// [`SimPath::cross_offered_bits`] counts it (call with times no
    /// packet still to be carried arrives before).
    pub fn advance_cross(&mut self, until_ns: f64) {
        for k in 0..self.hops.len() {
            self.offer_cross_until(k, until_ns);
            self.hops[k].forget_cross_before(until_ns);
        }
    }

    /// Cross-traffic bits offered at each hop so far.
    pub fn cross_offered_bits(&self) -> &[f64] {
        &self.cross_offered_bits
    }

    /// The receiver's stamp for a packet that reached its NIC at
    /// `arrival_ns`: when software saw it (sim time) and that time on the
    /// receiver's clock. Arrivals in time order.
    pub fn receive(&mut self, arrival_ns: f64) -> (f64, i64) {
        let t = self.receiver.stamp(arrival_ns);
        (t, self.receiver.clock(t))
    }

    /// Sends TTL-limited packets (per-hop capacity, \[HOST\] 4.1): a
    /// packet with TTL k < hops crosses k hops and the router there
    /// answers with an ICMP time-exceeded; TTL >= hops reaches the
    /// receiver, which answers port-unreachable. Returns the stream's
    /// start on the sender's clock and, per packet, its scheduled send
    /// and the reply (or `None`: dropped on the way).
    pub fn send_ttl_stream(&mut self, packets: &[TtlPacket]) -> Vec<TtlOutcome> {
        let n = packets.len();
        let start = self.now_ns;
        let hops = self.hops.len();
        let mut times = Vec::with_capacity(n);
        let mut out = Vec::with_capacity(n);
        for p in packets {
            let intended = start + p.offset_ns as f64;
            let t = (intended + self.lateness()).max(self.last_departure_ns);
            self.last_departure_ns = t;
            times.push(t);
            out.push(TtlOutcome {
                send_ns: intended.round() as i64 + self.spec.sender_offset_ns,
                reply: None,
            });
        }
        let sizes: Vec<u32> = packets.iter().map(|p| p.size_bytes).collect();
        let cross_hops: Vec<usize> = packets
            .iter()
            .map(|p| (p.ttl.max(1) as usize).min(hops))
            .collect();
        let (alive, _) = self.forward(&mut times, &sizes, &cross_hops, &[]);
        let icmp = self.spec.icmp.clone();
        for i in 0..n {
            if !alive[i] {
                continue;
            }
            let k = cross_hops[i];
            // Linux quotes at most 576 bytes of IP packet in an ICMP error
            // (icmp_send: 576 minus its own headers) behind 28 bytes of
            // IP and ICMP headers.
            let reply_bytes = 28 + sizes[i].min(548);
            let mut at = times[i] + icmp.reply_delay_ns + self.rng.exp(icmp.reply_jitter_mean_ns);
            for j in (0..k).rev() {
                let h = &self.hops[j].spec;
                at += reply_bytes as f64 * 8e9 / h.capacity_bps + h.propagation_ns;
                if icmp.reverse_queue_share > 0.0 && self.rng.unit() < icmp.reverse_queue_share {
                    at += self.rng.exp(icmp.reverse_queue_mean_ns);
                }
            }
            out[i].reply = Some(TtlReply {
                at_ns: at.round() as i64 + self.spec.sender_offset_ns,
                hop: k,
                destination: k == hops,
            });
        }
        let end = start + packets.iter().map(|p| p.offset_ns).max().unwrap_or(0) as f64;
        self.now_ns = end + self.spec.idle_ns;
        out
    }

    /// Hop `k`'s available bandwidth over `[a, b)`: its sustained rate
    /// less the cross bits that arrived there then. A burst may bring more
    /// cross bits than the link carries in the window (the rest waits in
    /// the buffer): nothing is left for the probe then, not less than
    /// nothing.
    fn available_between(&self, k: usize, a: f64, b: f64) -> f64 {
        let hop = &self.hops[k];
        (hop.spec.sustained_bps() - hop.cross_bits_between(a, b) / (b - a) * 1e9).max(0.0)
    }

    fn truth(&self, windows: &[Window]) -> Option<GroundTruth> {
        let splits = self.spec.truth_splits.max(1);
        let mut best: Option<GroundTruth> = None;
        for (k, w) in windows.iter().enumerate() {
            let (Some(a), Some(b)) = *w else { return None };
            if b <= a {
                return None;
            }
            let step = (b - a) / splits as f64;
            let parts: Vec<f64> = (0..splits)
                .map(|j| self.available_between(k, a + j as f64 * step, a + (j + 1) as f64 * step))
                .collect();
            let t = GroundTruth {
                available_bps: self.available_between(k, a, b),
                min_bps: parts.iter().copied().fold(f64::INFINITY, f64::min),
                max_bps: parts.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            };
            if best.is_none_or(|x| t.available_bps < x.available_bps) {
                best = Some(t);
            }
        }
        best
    }

    /// The hop whose window left the least available bandwidth (the one
    /// [`Self::truth`] reads), if every hop saw two packets or more apart.
    fn tight_hop(&self, windows: &[Window]) -> Option<usize> {
        let mut best: Option<(usize, f64)> = None;
        for (k, w) in windows.iter().enumerate() {
            let (Some(a), Some(b)) = *w else { return None };
            if b <= a {
                return None;
            }
            let avail = self.available_between(k, a, b);
            if best.is_none_or(|(_, x)| avail < x) {
                best = Some((k, avail));
            }
        }
        best.map(|(k, _)| k)
    }

    /// Each part's available bandwidth at hop `k`, from its first packet's
    /// arrival to the next part's first (the last part: to its own last),
    /// so that the parts tile the stream's window.
    fn part_truths(&self, k: usize, parts: &[Window]) -> Vec<Option<f64>> {
        (0..parts.len())
            .map(|j| {
                let a = parts[j].0?;
                let b = parts[j + 1..].iter().find_map(|w| w.0).or(parts[j].1)?;
                (b > a).then(|| self.available_between(k, a, b))
            })
            .collect()
    }
}
