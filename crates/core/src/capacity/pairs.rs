//! Packet-pair samples (\[HOST\], section 4.2, "single spacing"): the
//! dispersion of two packets sent back to back, and what a pair is
//! rejected for.
//!
//! Receiver batching (interrupt coalescence, GRO) stamps both packets of a
//! pair in one go, a few hundred ns apart: the pair would read a capacity
//! above anything the sender could even send. Such pairs are counted as
//! `batched` and dropped. A receiver that holds the second packet until
//! its next interrupt gives the opposite artefact: every pair reads the
//! interrupt interval whatever its size. [`size_scaling`] catches that:
//! on a real narrow link dispersion grows with packet size (Pathrate sends
//! several sizes for this reason), under coalescence it does not.

use crate::stream::ProbeStream;

/// One pair: packets `2 * pair` and `2 * pair + 1` of a pair stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairSample {
    pub pair: usize,
    /// Size of the second packet (the one whose serialisation the
    /// dispersion measures), bytes; for a bunch, of all but the first.
    pub size_bytes: u32,
    pub send_gap_ns: f64,
    /// Receive gap of the pair.
    pub dispersion_ns: f64,
    /// One-way delays of both packets (receiver clock minus sender clock:
    /// an unknown offset, the same for every packet of a measurement).
    pub owd_first_ns: f64,
    pub owd_second_ns: f64,
}

impl PairSample {
    /// The capacity this pair alone reads, bit/s.
    pub fn rate_bps(&self) -> f64 {
        self.size_bytes as f64 * 8e9 / self.dispersion_ns
    }

    /// CapProbe's delay sum (with twice the clock offset, which cancels in
    /// comparisons between pairs).
    pub fn delay_sum_ns(&self) -> f64 {
        self.owd_first_ns + self.owd_second_ns
    }
}

/// The usable pairs of some streams and what the rest were dropped for.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pairs {
    pub samples: Vec<PairSample>,
    /// Pairs with a packet lost.
    pub lost: usize,
    /// Pairs whose dispersion reads faster than `max_rate_bps` (the
    /// receiver stamped them in one batch), or not positive.
    pub batched: usize,
    /// Pairs the sender itself sent further apart than 80 % of their
    /// dispersion: they measure the sender, not the path.
    pub sender_limited: usize,
}

impl Pairs {
    pub fn total(&self) -> usize {
        self.samples.len() + self.lost + self.batched + self.sender_limited
    }

    /// Adds the pairs of one more stream.
    pub fn extend(&mut self, other: Pairs) {
        let base = self.total();
        self.samples
            .extend(other.samples.into_iter().map(|s| PairSample {
                pair: s.pair + base,
                ..s
            }));
        self.lost += other.lost;
        self.batched += other.batched;
        self.sender_limited += other.sender_limited;
    }
}

/// The pairs of a pair stream (packets `2i`, `2i + 1`; an odd last packet
/// is ignored). `max_rate_bps` is the fastest the pair could have left the
/// sender (its link rate): no narrow link is faster, so a pair that reads
/// more than 2 % above it was batched by the receiver.
pub fn pair_samples(stream: &ProbeStream, max_rate_bps: f64) -> Pairs {
    let firsts = (0..stream.packets.len() / 2).map(|i| 2 * i);
    pair_samples_at(stream, firsts, 2, max_rate_bps)
}

/// Dispersion samples of `len` back-to-back packets starting at each `k`
/// of `firsts` (out-of-range ones are skipped), judged as
/// [`pair_samples`] does; sample `i` starts at `firsts[i]`. With `len`
/// above 2 (a packet bunch) a sample spans the first to the last packet
/// and its `size_bytes` is what the link carried between them (all but
/// the first packet): timestamp noise is spread over `len - 1` packets.
pub fn pair_samples_at(
    stream: &ProbeStream,
    firsts: impl IntoIterator<Item = usize>,
    len: usize,
    max_rate_bps: f64,
) -> Pairs {
    let mut out = Pairs::default();
    let len = len.max(2);
    for (i, k) in firsts.into_iter().enumerate() {
        let Some(bunch) = stream.packets.get(k..k + len) else {
            continue;
        };
        let (a, b) = (bunch[0], bunch[len - 1]);
        let (Some(ra), Some(rb)) = (a.recv_ns, b.recv_ns) else {
            out.lost += 1;
            continue;
        };
        if bunch.iter().any(|p| p.recv_ns.is_none()) {
            out.lost += 1;
            continue;
        }
        // i128: hostile or corrupt traces may hold any i64.
        let dispersion = (rb as i128 - ra as i128) as f64;
        let send_gap = (b.send_ns as i128 - a.send_ns as i128) as f64;
        let sample = PairSample {
            pair: i,
            size_bytes: bunch[1..].iter().map(|p| p.size_bytes).sum(),
            send_gap_ns: send_gap,
            dispersion_ns: dispersion,
            owd_first_ns: (ra as i128 - a.send_ns as i128) as f64,
            owd_second_ns: (rb as i128 - b.send_ns as i128) as f64,
        };
        if dispersion <= 0.0 || sample.rate_bps() > max_rate_bps * 1.02 {
            out.batched += 1;
        } else if send_gap > 0.8 * dispersion {
            out.sender_limited += 1;
        } else {
            out.samples.push(sample);
        }
    }
    out
}

/// Whether dispersion grows with packet size as a link of the pairs'
/// capacity would make it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeScaling {
    /// Distinct packet sizes among the pairs.
    pub sizes: usize,
    /// Least-squares slope of the median dispersion per size against
    /// size, ns per byte, and the capacity it implies, bit/s.
    pub slope_ns_per_byte: f64,
    pub implied_bps: f64,
    /// Median over sizes of the median pair rate, bit/s.
    pub median_rate_bps: f64,
    /// The slope's capacity is within a factor of two of the pairs'
    /// median rate. A batching receiver makes the slope near zero (the
    /// capacity near infinite); cross traffic that interleaves large
    /// pairs more often than small ones tilts it by tens of percent
    /// (simulator, 1500-byte CBR at 30 %: slope 15 Gbit/s, pairs 8.75),
    /// which a 25 % window took for batching.
    pub consistent: bool,
}

/// [`SizeScaling`] of some pairs; `None` with fewer than two sizes.
pub fn size_scaling(samples: &[PairSample]) -> Option<SizeScaling> {
    let mut sizes: Vec<u32> = samples.iter().map(|s| s.size_bytes).collect();
    sizes.sort_unstable();
    sizes.dedup();
    if sizes.len() < 2 {
        return None;
    }
    let per_size: Vec<(f64, f64, f64)> = sizes
        .iter()
        .map(|&z| {
            let mut d: Vec<f64> = samples
                .iter()
                .filter(|s| s.size_bytes == z)
                .map(|s| s.dispersion_ns)
                .collect();
            let mut r: Vec<f64> = samples
                .iter()
                .filter(|s| s.size_bytes == z)
                .map(|s| s.rate_bps())
                .collect();
            (z as f64, median(&mut d), median(&mut r))
        })
        .collect();
    let (slope, _) = crate::stats::line_fit(per_size.iter().map(|p| (p.0, p.1)));
    let implied = if slope > 0.0 {
        8e9 / slope
    } else {
        f64::INFINITY
    };
    let mut rates: Vec<f64> = per_size.iter().map(|p| p.2).collect();
    let median_rate = median(&mut rates);
    Some(SizeScaling {
        sizes: sizes.len(),
        slope_ns_per_byte: slope,
        implied_bps: implied,
        median_rate_bps: median_rate,
        consistent: implied.is_finite() && (0.5..=2.0).contains(&(implied / median_rate)),
    })
}

/// Dispersion rate of one back-to-back train, bit/s, robust to receiver
/// batching. Arrivals closer than `batch_gap_ns` (less than the sender's
/// own spacing could produce) were stamped in one batch; a batch's first
/// stamp is when the receiver looked, and by then every packet of the
/// batch had arrived and none of the next (they would be in it). So the
/// bytes delivered by each batch's first stamp are known to within one
/// packet, and the rate between the first and the second-to-last batch
/// is exact to two packets over the span. The last batch is left out: a
/// receiver that moderates interrupts stamps it up to an interval after
/// the train ended. Without batching every packet is its own batch and
/// this is the usual dispersion rate over all but the last packet.
/// `None` with fewer than three batches or no span.
pub fn train_dispersion_bps(stream: &ProbeStream, batch_gap_ns: f64) -> Option<f64> {
    let arrived = crate::stream::arrivals(&stream.packets);
    // (first stamp of the batch, bytes of the batch)
    let mut batches: Vec<(i64, u64)> = Vec::new();
    let mut prev: Option<i64> = None;
    for &(r, size) in &arrived {
        match (prev, batches.last_mut()) {
            (Some(p), Some(b)) if ((r as i128 - p as i128) as f64) < batch_gap_ns => {
                b.1 += size as u64;
            }
            _ => batches.push((r, size as u64)),
        }
        prev = Some(r);
    }
    if batches.len() < 3 {
        return None;
    }
    let last = batches.len() - 2;
    let bytes: u64 = batches[1..=last].iter().map(|b| b.1).sum();
    let span = (batches[last].0 as i128 - batches[0].0 as i128) as f64;
    (span > 0.0).then(|| bytes as f64 * 8e9 / span)
}

/// Median (the one definition of [`crate::stats`]) of `v`, which is left
/// sorted (callers bin the sorted values next); NaN when empty.
pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::stats::quantile_sorted(v, 0.5).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::ProbePacket;

    fn pkt(size: u32, send: i64, recv: Option<i64>) -> ProbePacket {
        ProbePacket {
            size_bytes: size,
            send_ns: send,
            recv_ns: recv,
        }
    }

    /// Four pairs of 1250-byte packets (10 000 bits), max rate 10 Gbit/s:
    /// pair 0 arrives 1000 ns apart (10 Gbit/s, kept); pair 1 lost its
    /// second packet; pair 2 arrives 300 ns apart (33 Gbit/s: batched);
    /// pair 3 was sent 2000 ns apart and arrives 2000 ns apart (sender
    /// limited).
    #[test]
    fn pairs_by_hand() {
        let s = ProbeStream::new(
            0,
            vec![
                pkt(1250, 0, Some(5_000)),
                pkt(1250, 0, Some(6_000)),
                pkt(1250, 100_000, Some(105_000)),
                pkt(1250, 100_000, None),
                pkt(1250, 200_000, Some(205_000)),
                pkt(1250, 200_000, Some(205_300)),
                pkt(1250, 300_000, Some(305_000)),
                pkt(1250, 302_000, Some(307_000)),
                pkt(1250, 400_000, Some(405_000)), // odd one out: ignored
            ],
        );
        let p = pair_samples(&s, 10e9);
        assert_eq!(
            (p.samples.len(), p.lost, p.batched, p.sender_limited),
            (1, 1, 1, 1)
        );
        let s0 = p.samples[0];
        assert_eq!(s0.pair, 0);
        assert!((s0.rate_bps() - 10e9).abs() < 1.0);
        assert_eq!(s0.delay_sum_ns(), 11_000.0);
        assert_eq!(p.total(), 4);
    }

    /// A head of two packets, then a bunch of three 1000-byte packets
    /// arriving 1000 ns apart, then a trailer: the bunch at index 2 spans
    /// 2000 ns carrying 2000 bytes (8 Gbit/s); one starting at 4 runs off
    /// the end and is skipped; a bunch with a lost middle packet is lost.
    #[test]
    fn bunches_by_hand() {
        let recv = [0, 500, 3000, 4000, 5000, 6000];
        let mut s = ProbeStream::new(0, recv.iter().map(|&r| pkt(1000, 0, Some(r))).collect());
        let b = pair_samples_at(&s, [2, 4], 3, 100e9);
        assert_eq!((b.samples.len(), b.total()), (1, 1));
        assert_eq!(b.samples[0].size_bytes, 2000);
        assert!((b.samples[0].rate_bps() - 8e9).abs() < 1.0);
        assert_eq!(b.samples[0].delay_sum_ns(), 8000.0);
        s.packets[3].recv_ns = None;
        assert_eq!(pair_samples_at(&s, [2], 3, 100e9).lost, 1);
    }

    /// Sizes 500 and 1500 bytes on a 1 Gbit/s link: dispersions 4000 and
    /// 12 000 ns, slope 8 ns/byte = 1 Gbit/s, consistent. A receiver that
    /// shows 125 us for every pair: slope 0, not consistent.
    #[test]
    fn dispersion_must_grow_with_size() {
        let sample = |size: u32, d: f64| PairSample {
            pair: 0,
            size_bytes: size,
            send_gap_ns: 0.0,
            dispersion_ns: d,
            owd_first_ns: 0.0,
            owd_second_ns: d,
        };
        let link = [
            sample(500, 4000.0),
            sample(1500, 12_000.0),
            sample(1500, 12_000.0),
        ];
        let s = size_scaling(&link).unwrap();
        assert_eq!(s.sizes, 2);
        assert!((s.slope_ns_per_byte - 8.0).abs() < 1e-9);
        assert!((s.implied_bps - 1e9).abs() < 1.0 && s.consistent);
        let irq = [sample(500, 125_000.0), sample(1500, 125_000.0)];
        let s = size_scaling(&irq).unwrap();
        assert!(!s.consistent && s.implied_bps.is_infinite());
        assert!(size_scaling(&link[1..]).is_none());
    }

    /// A train of six 1000-byte packets arriving 1000 ns apart, the
    /// third lost, no batching: batches at 0, 1000, 3000, 4000, 5000; the
    /// last is left out, so 3 x 8000 bits over 4000 ns = 6 Gbit/s (the
    /// loss shows as a slower train, as a link that dropped it would).
    #[test]
    fn train_rate_by_hand() {
        let recv = [
            Some(0),
            Some(1000),
            None,
            Some(3000),
            Some(4000),
            Some(5000),
        ];
        let s = ProbeStream::new(0, recv.iter().map(|&r| pkt(1000, 0, r)).collect());
        assert!((train_dispersion_bps(&s, 100.0).unwrap() - 6e9).abs() < 1.0);
        let two = ProbeStream::new(0, vec![pkt(1000, 0, Some(5)), pkt(1000, 0, Some(900))]);
        assert_eq!(train_dispersion_bps(&two, 100.0), None);
    }

    /// 1000-byte packets arriving every 1000 ns (8 Gbit/s) at a receiver
    /// that stamps in batches every 10 us, 100 ns per packet: packet 0 at
    /// once (idle), packets 1-10 (arrived 1000..=10_000) at 10 000 +
    /// 100 k, packets 11-20 at 20 000 + 100 k, 21-25 (the train ends at
    /// 25 000) at 30 000 + 100 k. Batches start at 0, 10 000, 20 000,
    /// 30 000; leaving out the last: 20 packets over 20 000 ns = 8 Gbit/s
    /// exactly, where first-to-last stamps would read 25 x 8000 bits over
    /// 30 400 ns = 6.6 Gbit/s.
    #[test]
    fn batched_train_rate_by_hand() {
        let stamp = |k: i64| -> i64 {
            match k {
                0 => 0,
                1..=10 => 10_000 + 100 * (k - 1),
                11..=20 => 20_000 + 100 * (k - 11),
                _ => 30_000 + 100 * (k - 21),
            }
        };
        let s = ProbeStream::new(0, (0..26).map(|k| pkt(1000, 0, Some(stamp(k)))).collect());
        assert!((train_dispersion_bps(&s, 500.0).unwrap() - 8e9).abs() < 1.0);
    }
}
