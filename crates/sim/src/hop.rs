//! One FIFO hop: a link of given capacity behind a tail-drop buffer, and a
//! record of the cross traffic it accepted (for the ground truth). Cross
//! traffic is recorded by arrival: the probe's own queue delays cross
//! departures, and must not change what the path had available.
//!
//! A hop may carry a token-bucket shaper in front of its link (Linux tbf,
//! a cloud VM's rate limit): a packet starts on the link only when the
//! bucket holds its size in tokens, so bursts up to the bucket pass at
//! the line rate and anything longer at the token rate. A packet larger
//! than the bucket waits for a full bucket and leaves a debt (tbf would
//! drop it; the simulator keeps the rate right instead).

use std::collections::VecDeque;

#[derive(Debug, Clone, PartialEq)]
pub struct HopSpec {
    pub capacity_bps: f64,
    /// Bytes the hop holds, the packet in service included.
    pub buffer_bytes: u64,
    pub propagation_ns: f64,
    pub shaper: Option<TokenBucket>,
}

/// A token-bucket shaper: tokens arrive at `rate_bps`, at most
/// `bucket_bytes` are kept.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenBucket {
    pub rate_bps: f64,
    pub bucket_bytes: u64,
}

impl HopSpec {
    /// The rate the hop sustains: its link, or its shaper when slower.
    pub fn sustained_bps(&self) -> f64 {
        self.shaper
            .map_or(self.capacity_bps, |s| s.rate_bps.min(self.capacity_bps))
    }
}

/// Counters of one hop (for tests and reports).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HopStats {
    pub offered_packets: u64,
    pub offered_bytes: u64,
    pub dropped_packets: u64,
    pub dropped_bytes: u64,
    pub departed_bytes: u64,
    /// Largest backlog seen when a packet was accepted, bytes.
    pub max_backlog_bytes: u64,
    /// Backlog found by every dropped packet was above buffer - its size.
    pub drops_with_room: u64,
}

#[derive(Debug, Clone)]
pub struct Hop {
    pub spec: HopSpec,
    ns_per_byte: f64,
    /// Packets in the system, in departure order: (departure ns, bytes).
    in_system: VecDeque<(f64, u32)>,
    backlog_bytes: u64,
    last_departure_ns: f64,
    /// Cross traffic accepted, in arrival order: (arrival ns, bytes).
    cross_accepted: VecDeque<(f64, u32)>,
    /// Shaper tokens (bytes; negative after a packet larger than the
    /// bucket) as of `tokens_at_ns`.
    tokens_bytes: f64,
    tokens_at_ns: f64,
    pub stats: HopStats,
}

impl Hop {
    pub fn new(spec: HopSpec) -> Self {
        Hop {
            ns_per_byte: 8e9 / spec.capacity_bps,
            tokens_bytes: spec.shaper.map_or(0.0, |s| s.bucket_bytes as f64),
            spec,
            in_system: VecDeque::new(),
            backlog_bytes: 0,
            last_departure_ns: f64::NEG_INFINITY,
            cross_accepted: VecDeque::new(),
            tokens_at_ns: f64::NEG_INFINITY,
            stats: HopStats::default(),
        }
    }

    /// A packet arrives at `arrival_ns`; returns when it has left the link
    /// (transmission complete), or `None` when the buffer drops it.
    pub fn offer(&mut self, arrival_ns: f64, bytes: u32) -> Option<f64> {
        while let Some(&(d, b)) = self.in_system.front() {
            if d > arrival_ns {
                break;
            }
            self.in_system.pop_front();
            self.backlog_bytes -= b as u64;
            self.stats.departed_bytes += b as u64;
        }
        self.stats.offered_packets += 1;
        self.stats.offered_bytes += bytes as u64;
        if self.backlog_bytes + bytes as u64 > self.spec.buffer_bytes {
            self.stats.dropped_packets += 1;
            self.stats.dropped_bytes += bytes as u64;
            return None;
        }
        let mut start = arrival_ns.max(self.last_departure_ns);
        if let Some(tb) = self.spec.shaper {
            start = self.take_tokens(tb, start, bytes);
        }
        let departure = start + bytes as f64 * self.ns_per_byte;
        self.last_departure_ns = departure;
        self.in_system.push_back((departure, bytes));
        self.backlog_bytes += bytes as u64;
        self.stats.max_backlog_bytes = self.stats.max_backlog_bytes.max(self.backlog_bytes);
        Some(departure)
    }

    /// When a packet that could start at `start_ns` has its tokens; takes
    /// them.
    fn take_tokens(&mut self, tb: TokenBucket, start_ns: f64, bytes: u32) -> f64 {
        let bucket = tb.bucket_bytes as f64;
        let ns_per_token = 8e9 / tb.rate_bps;
        // Before the first packet (`at` is -inf) the bucket is full.
        let tokens_at = |t: f64, tok: f64, at: f64| (tok + (t - at) / ns_per_token).min(bucket);
        let need = (bytes as f64).min(bucket);
        let have = tokens_at(start_ns, self.tokens_bytes, self.tokens_at_ns);
        let start = if have >= need {
            start_ns
        } else {
            start_ns + (need - have) * ns_per_token
        };
        self.tokens_bytes = tokens_at(start, have, start_ns) - bytes as f64;
        self.tokens_at_ns = start;
        start
    }

    /// A cross packet: offered, and remembered for the truth if accepted.
    pub fn offer_cross(&mut self, arrival_ns: f64, bytes: u32) {
        if self.offer(arrival_ns, bytes).is_some() {
            self.cross_accepted.push_back((arrival_ns, bytes));
        }
    }

    /// Forgets cross arrivals before `t_ns` (they precede any window still
    /// to be asked about).
    pub fn forget_cross_before(&mut self, t_ns: f64) {
        while self.cross_accepted.front().is_some_and(|&(a, _)| a < t_ns) {
            self.cross_accepted.pop_front();
        }
    }

    /// Cross-traffic bits accepted onto the link that arrived in `[a, b)`.
    pub fn cross_bits_between(&self, a: f64, b: f64) -> f64 {
        let start = self.cross_accepted.partition_point(|&(d, _)| d < a);
        self.cross_accepted
            .range(start..)
            .take_while(|&&(d, _)| d < b)
            .map(|&(_, bytes)| bytes as f64 * 8.0)
            .sum()
    }

    /// Packets still in the system at the latest arrival (for tests).
    pub fn backlog_bytes(&self) -> u64 {
        self.backlog_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(buffer: u64) -> Hop {
        // 1 byte per ns = 8 Gbit/s.
        Hop::new(HopSpec {
            capacity_bps: 8e9,
            buffer_bytes: buffer,
            propagation_ns: 0.0,
            shaper: None,
        })
    }

    /// 8 Gbit/s line (1 ns per byte) behind a 1 Gbit/s bucket (8 ns per
    /// token) of 2500 bytes, 1000-byte packets all arriving at 0: two
    /// leave on the bucket back to back (done at 1000, 2000; tokens keep
    /// coming while they are sent: 625 left at 1000); the third finds
    /// 750 at 2000, waits 250 x 8 ns and starts at 4000; the fourth finds
    /// 125 at 5000 and starts at 12 000. After a long idle the bucket is
    /// full again (capped at 2500).
    #[test]
    fn token_bucket_by_hand() {
        let mut h = Hop::new(HopSpec {
            shaper: Some(TokenBucket {
                rate_bps: 1e9,
                bucket_bytes: 2500,
            }),
            ..hop(100_000).spec
        });
        assert_eq!(h.offer(0.0, 1000), Some(1000.0));
        assert_eq!(h.offer(0.0, 1000), Some(2000.0));
        assert_eq!(h.offer(0.0, 1000), Some(5000.0));
        assert_eq!(h.offer(0.0, 1000), Some(13_000.0));
        assert_eq!(h.spec.sustained_bps(), 1e9);
        assert_eq!(h.offer(1e6, 1000), Some(1e6 + 1000.0));
        assert_eq!(h.offer(1e6, 1000), Some(1e6 + 2000.0));
        assert_eq!(h.offer(1e6, 1000), Some(1e6 + 5000.0));
    }

    #[test]
    fn fifo_by_hand() {
        let mut h = hop(10_000);
        assert_eq!(h.offer(0.0, 1000), Some(1000.0));
        // Arrives while the first is in service: waits.
        assert_eq!(h.offer(500.0, 1000), Some(2000.0));
        // Arrives after both left: served at once.
        assert_eq!(h.offer(5000.0, 100), Some(5100.0));
    }

    #[test]
    fn drops_only_when_full() {
        let mut h = hop(2500);
        assert!(h.offer(0.0, 1000).is_some());
        assert!(h.offer(0.0, 1000).is_some());
        // 2000 in the system + 1000 > 2500: dropped.
        assert!(h.offer(0.0, 1000).is_none());
        // 2000 + 500 fits.
        assert!(h.offer(0.0, 500).is_some());
        // At t = 1000 the first has left: 1500 + 1000 fits.
        assert!(h.offer(1000.0, 1000).is_some());
        assert_eq!(h.stats.dropped_packets, 1);
    }

    #[test]
    fn cross_bits_are_counted_by_arrival_and_drops_do_not_count() {
        let mut h = hop(2500);
        h.offer_cross(0.0, 1000);
        h.offer_cross(500.0, 1000);
        h.offer_cross(600.0, 1000); // 2000 queued + 1000 > 2500: dropped
        h.offer_cross(2000.0, 1000);
        assert_eq!(h.cross_bits_between(0.0, 501.0), 16000.0);
        assert_eq!(h.cross_bits_between(501.0, 3000.0), 8000.0);
        h.forget_cross_before(100.0);
        assert_eq!(h.cross_bits_between(0.0, 5000.0), 16000.0);
    }
}
