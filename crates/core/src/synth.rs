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
                backlog = (backlog - (c - x) * (tb - last_t)).max(0.0) + bursts[next_burst].1;
                last_t = tb;
                next_burst += 1;
            }
            // Cross traffic fills at x while the link drains at c.
            backlog = (backlog - (c - x) * (t - last_t)).max(0.0);
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
