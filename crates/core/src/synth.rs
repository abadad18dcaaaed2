//! Closed-form probe streams for tests and benchmarks: one FIFO hop with
//! fluid constant-rate cross traffic, optional cross-traffic bursts, receiver
//! interrupt coalescence, and sender/receiver clock offset and drift.
//!
//! This is not the path simulator (packet-level, multi-hop, bursty sources):
//! it exists so that the core's algorithms can be checked against answers
//! known in closed form (available bandwidth = capacity - cross rate), with
//! no I/O and no randomness.

use crate::stream::{ProbePacket, ProbeStream};

/// One hop and a receiver.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthPath {
    pub capacity_bps: f64,
    /// Fluid cross traffic sharing the hop, bit/s.
    pub cross_bps: f64,
    /// Cross-traffic bursts: (time after the stream start in ns, bits) added
    /// to the queue at once.
    pub bursts: Vec<(f64, f64)>,
    /// Extra cross traffic as a rate that changes over time: (time after
    /// the stream start in ns, rate from then on in bit/s), in time order.
    pub rate_steps: Vec<(f64, f64)>,
    /// Interrupt interval: arrivals are stamped at the next interrupt.
    pub coalescence_ns: Option<f64>,
    /// Phase of the first interrupt after the stream starts, ns.
    pub coalescence_phase_ns: f64,
    /// Per-packet cost when a batch is stamped, ns.
    pub per_packet_ns: f64,
    pub propagation_ns: f64,
    /// Receiver clock offset against the sender's, ns.
    pub recv_offset_ns: i64,
    /// Receiver clock drift, parts per million.
    pub drift_ppm: f64,
}

impl SynthPath {
    /// A 10 Gbit/s hop with `cross_bps` of fluid cross traffic and ideal
    /// timestamps.
    pub fn ten_gig(cross_bps: f64) -> Self {
        SynthPath {
            capacity_bps: 10e9,
            cross_bps,
            bursts: Vec::new(),
            rate_steps: Vec::new(),
            coalescence_ns: None,
            coalescence_phase_ns: 37_000.0,
            per_packet_ns: 300.0,
            propagation_ns: 50_000.0,
            recv_offset_ns: 123_456_789,
            drift_ppm: 0.0,
        }
    }

    pub fn available_bps(&self) -> f64 {
        self.capacity_bps - self.cross_bps
    }

    /// Adds cross-traffic bursts of `min_bytes..max_bytes` at exponential
    /// intervals averaging `mean_bps`, over `horizon_ns` after the stream
    /// start; deterministic from `seed`.
    pub fn with_bursts(
        mut self,
        seed: u64,
        mean_bps: f64,
        min_bytes: f64,
        max_bytes: f64,
        horizon_ns: f64,
    ) -> Self {
        let mut rng = XorShift(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mean_bits = 4.0 * (min_bytes + max_bytes);
        let mean_interval_ns = mean_bits / mean_bps * 1e9;
        let mut t = 0.0;
        loop {
            t += -mean_interval_ns * (1.0 - rng.unit()).ln();
            if t > horizon_ns {
                break;
            }
            let bytes = min_bytes + (max_bytes - min_bytes) * rng.unit();
            self.bursts.push((t, bytes * 8.0));
        }
        self
    }

    /// Adds `sources` ON/OFF sources, each sending at `peak_bps` while ON,
    /// with exponential ON and OFF periods (means in ns), over `horizon_ns`;
    /// deterministic from `seed`. Like the paper's cross traffic from 1
    /// Gbit/s hosts, no single source can build a queue on its own.
    pub fn with_on_off(
        mut self,
        seed: u64,
        sources: usize,
        peak_bps: f64,
        mean_on_ns: f64,
        mean_off_ns: f64,
        horizon_ns: f64,
    ) -> Self {
        let mut rng = XorShift(seed.wrapping_mul(0xD1B5_4A32_D192_ED03) | 1);
        let mut changes: Vec<(f64, f64)> = Vec::new();
        for _ in 0..sources {
            // Start in a random phase of the cycle.
            let mut on = rng.unit() < mean_on_ns / (mean_on_ns + mean_off_ns);
            let mut t = 0.0;
            if on {
                changes.push((0.0, peak_bps));
            }
            while t < horizon_ns {
                let mean = if on { mean_on_ns } else { mean_off_ns };
                t += -mean * (1.0 - rng.unit()).ln();
                on = !on;
                changes.push((t, if on { peak_bps } else { -peak_bps }));
            }
        }
        changes.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut rate = 0.0;
        self.rate_steps = changes
            .into_iter()
            .map(|(t, d)| {
                rate += d;
                (t, rate.max(0.0))
            })
            .collect();
        self
    }

    /// Bits the time-varying cross traffic sends in `[a, b]` after the start.
    fn step_bits(&self, a: f64, b: f64) -> f64 {
        let mut bits = 0.0;
        for (i, &(t, r)) in self.rate_steps.iter().enumerate() {
            let end = self.rate_steps.get(i + 1).map_or(f64::INFINITY, |x| x.0);
            let (lo, hi) = (t.max(a), end.min(b));
            if hi > lo {
                bits += r * (hi - lo) / 1e9;
            }
        }
        bits
    }

    /// Ground truth over `[0, span_ns]` after the stream start: capacity
    /// minus the cross-traffic bits that arrived in it, over its length.
    pub fn available_over_bps(&self, span_ns: f64) -> f64 {
        let burst_bits: f64 = self
            .bursts
            .iter()
            .filter(|b| b.0 >= 0.0 && b.0 <= span_ns)
            .map(|b| b.1)
            .sum();
        self.capacity_bps
            - self.cross_bps
            - (burst_bits + self.step_bits(0.0, span_ns)) / span_ns * 1e9
    }

    /// Sends packets of `size_bytes` at the given send times (ns, sender
    /// clock) and returns the stream with receive times on the receiver's
    /// clock.
    pub fn stream(&self, id: u64, send_ns: &[i64], size_bytes: u32) -> ProbeStream {
        let c = self.capacity_bps / 1e9; // bits per ns
        let x = self.cross_bps / 1e9;
        let bits = size_bytes as f64 * 8.0;
        let t0 = send_ns.first().copied().unwrap_or(0) as f64;
        let mut bursts = self.bursts.clone();
        bursts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut next_burst = 0;
        // Unfinished work (bits) of the hop just after the last event.
        let mut backlog = 0.0f64;
        let mut last_t = t0;
        let mut arrivals = Vec::with_capacity(send_ns.len());
        for &s in send_ns {
            let t = s as f64;
            while next_burst < bursts.len() && t0 + bursts[next_burst].0 <= t {
                let tb = t0 + bursts[next_burst].0;
                backlog = self.advance(backlog, last_t - t0, tb - t0, c, x) + bursts[next_burst].1;
                last_t = tb;
                next_burst += 1;
            }
            // Cross traffic fills at x (plus any time-varying part) while the
            // link drains at c.
            backlog = self.advance(backlog, last_t - t0, t - t0, c, x);
            last_t = t;
            // Our packet leaves once the backlog ahead of it and itself are
            // served; the cross traffic arriving meanwhile queues behind.
            backlog += bits;
            arrivals.push(t + backlog / c + self.propagation_ns);
        }
        let stamps: Vec<f64> = match self.coalescence_ns {
            None => arrivals,
            Some(delta) => {
                let phase = t0 + self.coalescence_phase_ns;
                let mut out = Vec::with_capacity(arrivals.len());
                let mut batch_at = f64::NEG_INFINITY;
                let mut in_batch = 0.0;
                for a in arrivals {
                    let k = ((a - phase) / delta).ceil();
                    let irq = phase + k * delta;
                    if irq != batch_at {
                        batch_at = irq;
                        in_batch = 0.0;
                    }
                    out.push(irq + in_batch * self.per_packet_ns);
                    in_batch += 1.0;
                }
                out
            }
        };
        let packets = send_ns
            .iter()
            .zip(stamps)
            .map(|(&s, r)| ProbePacket {
                size_bytes,
                send_ns: s,
                recv_ns: Some(
                    (r * (1.0 + self.drift_ppm * 1e-6)).round() as i64 + self.recv_offset_ns,
                ),
            })
            .collect();
        ProbeStream::new(id, packets)
    }
}

/// A small deterministic generator (xorshift64*), so synthetic streams need
/// no randomness crate and are the same on every machine.
pub struct XorShift(pub u64);

impl XorShift {
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl SynthPath {
    /// Backlog at `b` given the backlog at `a` (times after the start, ns),
    /// with fluid cross traffic `x` plus the rate steps, drained at `c`
    /// (bits per ns).
    fn advance(&self, mut backlog: f64, a: f64, b: f64, c: f64, x: f64) -> f64 {
        let mut t = a;
        // Rate in force at `a`, then each change up to `b`.
        let idx = self.rate_steps.partition_point(|s| s.0 <= a);
        let mut rate = if idx == 0 {
            0.0
        } else {
            self.rate_steps[idx - 1].1 / 1e9
        };
        for &(ts, r) in &self.rate_steps[idx..] {
            if ts >= b {
                break;
            }
            backlog = (backlog - (c - x - rate) * (ts - t)).max(0.0);
            t = ts;
            rate = r / 1e9;
        }
        (backlog - (c - x - rate) * (b - t)).max(0.0)
    }
}

/// The analysis benchmark's streams (`benches/analysis.rs`, and the
/// instruction-counting example `analysis_work`): `count` streams of
/// 9000-byte probes on the 10 Gbit/s path with 125 us coalescence (its
/// phase and the cross traffic varying by stream), multi-rate 5 x 64 at
/// Range 30 % or single-rate 64 packets. One definition, so that the
/// benchmark and the instruction counts measure the same work.
pub fn benchmark_streams(multi_rate: bool, count: usize) -> Vec<ProbeStream> {
    use crate::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
    (0..count)
        .map(|i| {
            let path = SynthPath {
                coalescence_ns: Some(125_000.0),
                coalescence_phase_ns: (i as f64 * 7_919.0) % 125_000.0,
                ..SynthPath::ten_gig(1.5e9 + (i % 20) as f64 * 1e8)
            };
            let sched = if multi_rate {
                multi_rate_schedule(&rates_around(5e9 + (i % 30) as f64 * 1e8, 0.3, 5), 64, 9000)
            } else {
                single_rate_schedule(5e9 + (i % 40) as f64 * 1e8, 64, 9000, 0)
            };
            path.stream(i as u64, &sched, 9000)
        })
        .collect()
}

/// Stream `i` of a varied set of closed-form streams (9000-byte probes):
/// each packet stamped (one in three) or in 125 us batches, fluid cross
/// traffic of 1.5-3.4 Gbit/s with bursts (one in four) or ten ON/OFF
/// sources (one in four), multi-rate 5 x 16-300 packets at Range 10-50 %
/// or single-rate 32-600, every fifth with a packet in 23 lost. What
/// `answers_digest` reads every method on and the allocation test reads
/// the multi-rate ones of: one definition, so both cover the same
/// streams.
pub fn varied_stream(i: u64, multi_rate: bool) -> ProbeStream {
    use crate::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
    let mut path = SynthPath {
        coalescence_ns: if i.is_multiple_of(3) {
            None
        } else {
            Some(125_000.0)
        },
        coalescence_phase_ns: (i as f64 * 7_919.0) % 125_000.0,
        ..SynthPath::ten_gig(1.5e9 + (i % 20) as f64 * 1e8)
    };
    if i.is_multiple_of(2) {
        path = if i.is_multiple_of(4) {
            path.with_bursts(i, 1.0e9, 1500.0, 64000.0, 5e6)
        } else {
            path.with_on_off(i, 10, 1e9, 500e3, 1500e3, 5e6)
        };
    }
    let n = [16usize, 64, 128, 300][(i / 4 % 4) as usize];
    let sched = if multi_rate {
        multi_rate_schedule(
            &rates_around(5e9 + (i % 30) as f64 * 1e8, 0.1 + (i % 5) as f64 * 0.1, 5),
            n,
            9000,
        )
    } else {
        single_rate_schedule(5e9 + (i % 40) as f64 * 1e8, n * 2, 9000, 0)
    };
    let mut s = path.stream(i, &sched, 9000);
    if i.is_multiple_of(5) {
        for (k, pk) in s.packets.iter_mut().enumerate() {
            if (k as u64 * 7 + i).is_multiple_of(23) {
                pk.recv_ns = None;
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::single_rate_schedule;

    #[test]
    fn below_the_available_bandwidth_nothing_queues() {
        // 5 Gbit/s into 7.5 Gbit/s available: every receive gap = send gap.
        let p = SynthPath::ten_gig(2.5e9);
        let s = p.stream(0, &single_rate_schedule(5e9, 10, 9000, 0), 9000);
        for g in s.gaps() {
            assert!((g.recv_ns - g.send_ns).abs() <= 1.0, "{g:?}");
        }
    }

    #[test]
    fn above_it_the_output_rate_is_the_fluid_one() {
        // r = 9, C = 10, A = 7.5: the output rate is r*C/(r + C - A) = 7.826.
        let p = SynthPath::ten_gig(2.5e9);
        let s = p.stream(0, &single_rate_schedule(9e9, 200, 9000, 0), 9000);
        let g = s.gaps();
        let late = &g[100..];
        let out = late.iter().map(|g| g.recv_bytes).sum::<f64>() * 8e9
            / late.iter().map(|g| g.recv_ns).sum::<f64>();
        assert!((out / 1e9 - 90.0 / 11.5).abs() < 0.01, "{out}");
    }

    #[test]
    fn bursts_average_their_mean_rate_and_count_in_the_truth() {
        let p = SynthPath::ten_gig(1e9).with_bursts(7, 1e9, 9_000.0, 63_000.0, 1e9);
        let bits: f64 = p.bursts.iter().map(|b| b.1).sum();
        assert!((bits / 1.0 - 1e9).abs() < 0.05e9, "{bits}");
        let truth = p.available_over_bps(1e9);
        assert!((truth - 8e9).abs() < 0.05e9, "{truth}");
        assert_eq!(SynthPath::ten_gig(1e9).available_over_bps(1e6), 9e9);
    }

    #[test]
    fn on_off_sources_average_their_duty_cycle() {
        // 10 sources of 1 Gbit/s, ON 25 % of the time: 2.5 Gbit/s on average.
        let p = SynthPath::ten_gig(0.0).with_on_off(3, 10, 1e9, 200_000.0, 600_000.0, 1e9);
        let truth = p.available_over_bps(1e9);
        assert!((truth - 7.5e9).abs() < 0.1e9, "{truth}");
        // With the steps taking 2.5 Gbit/s on average, a 6 Gbit/s stream
        // mostly passes unqueued.
        let s = p.stream(0, &single_rate_schedule(6e9, 200, 9000, 0), 9000);
        let same = s
            .gaps()
            .iter()
            .filter(|g| (g.recv_ns - g.send_ns).abs() < 1.0)
            .count();
        assert!(same > 100, "{same}");
    }

    #[test]
    fn coalescence_stamps_batches() {
        let p = SynthPath {
            coalescence_ns: Some(100_000.0),
            ..SynthPath::ten_gig(0.0)
        };
        let s = p.stream(0, &single_rate_schedule(6e9, 40, 9000, 0), 9000);
        let small = s.gaps().iter().filter(|g| g.recv_ns <= 300.0).count();
        let spikes = s.gaps().iter().filter(|g| g.recv_ns > 50_000.0).count();
        assert!(small > 25 && spikes >= 3, "{small} {spikes}");
    }
}
