//! A queue that stood under every stream: the case Pathload's trend test
//! (\[IMR\], section 3) cannot read. PCT and PDT compare the delays within
//! one stream, so a stream that met a queue already full and left it full
//! shows no trend, whatever its rate. Cross traffic that fills the buffer
//! whenever it can (a loss-based TCP flow with bytes to send: the
//! traffic "responsive to the bandwidth used by the probe packets" that
//! \[BASS\], section III, replays from a trace to keep out) keeps
//! the queue standing under streams below the available bandwidth as
//! well as above it; the fleets then read "no trend" at rates well above
//! what the path leaves free, and the search converges on a number the
//! streams never measured.
//!
//! A stream stood on a queue when more than half of its received packets
//! waited more than `depth_ns` beyond the lowest one-way delay of all the
//! streams compared (the empty path's). Delays are raw receive minus send
//! stamps: any clock offset between the ends cancels in the difference.

use crate::stream::{ProbePacket, ProbeStream};

/// Share of the streams at or under a search's answer (those that said
/// there was room) that must have stood for the answer to count as read
/// over a standing queue: on a lab path a capped TCP flow kept full,
/// every one did; under constant-rate, paced UDP, ON/OFF, video and BBR
/// cross traffic at most three in five did.
pub const STOOD_SHARE: f64 = 0.9;

/// Fewest streams that can show it: one of Pathload's fleets.
pub const MIN_STREAMS: usize = 6;

/// Share of multi-rate streams whose lowest rates (their first quarter of
/// packets, under the answer when a stream is centred on it) must have
/// stood, queued more than two packets at the answer's rate: on the lab's
/// path a capped TCP flow kept full, 78-100 % of them did in each of 8
/// runs; under constant-rate, paced UDP, ON/OFF, video, BBR, a capped
/// CUBIC flow with room beside it and a replayed mix, at most 44 % (54
/// runs).
pub const LOW_RATES_STOOD_SHARE: f64 = 0.75;

/// Fewest multi-rate streams after the scan that can show it: the
/// multi-rate strategy often stops after five or six.
pub const LOW_RATES_MIN_STREAMS: usize = 5;

/// One stream's one-way delays (receive minus send stamp, ns): the lowest
/// and the median of its received packets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DelayLevel {
    pub floor_ns: i64,
    pub median_ns: i64,
}

/// `None` for a stream with fewer than two received packets.
pub fn delay_level(stream: &ProbeStream) -> Option<DelayLevel> {
    level_of(stream.packets.iter())
}

fn level_of<'a>(packets: impl Iterator<Item = &'a ProbePacket>) -> Option<DelayLevel> {
    let mut owd: Vec<i64> = packets
        .filter_map(|p| p.recv_ns.map(|r| r.saturating_sub(p.send_ns)))
        .collect();
    if owd.len() < 2 {
        return None;
    }
    owd.sort_unstable();
    Some(DelayLevel {
        floor_ns: owd[0],
        median_ns: owd[owd.len() / 2],
    })
}

/// The delay level of the first `share` of a stream's packets in send
/// order (at least 8): a multi-rate stream's lowest rates, which it sends
/// first. `None` with fewer than two of them received.
pub fn first_part_level(stream: &ProbeStream, share: f64) -> Option<DelayLevel> {
    let mut order: Vec<&ProbePacket> = stream.packets.iter().collect();
    order.sort_by_key(|p| p.send_ns);
    let n = ((order.len() as f64 * share).ceil() as usize)
        .max(8)
        .min(order.len());
    level_of(order[..n].iter().copied())
}

/// How many of a search's streams stood on a queue, and how deep.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StandingQueue {
    pub stood: usize,
    pub streams: usize,
    /// The median, over the streams that stood, of their median queue
    /// above the empty path's delay (ns).
    pub median_depth_ns: f64,
}

impl StandingQueue {
    /// Whether the queue stood under (nearly) every stream: the trend
    /// tests' verdicts then say nothing of the available bandwidth.
    pub fn held_throughout(&self) -> bool {
        self.held_at(STOOD_SHARE, MIN_STREAMS)
    }

    /// Whether at least `min_streams` were compared and `share` of them
    /// stood.
    pub fn held_at(&self, share: f64, min_streams: usize) -> bool {
        self.streams >= min_streams && self.stood as f64 >= share * self.streams as f64
    }
}

/// The streams' levels compared with the empty path's delay, `empty_ns`
/// (the lowest floor among every stream of the run: [`empty_path_ns`]);
/// a stream stood when its median lay more than `depth_ns` above it.
pub fn standing_queue(levels: &[DelayLevel], empty_ns: i64, depth_ns: f64) -> StandingQueue {
    let mut depths: Vec<f64> = levels
        .iter()
        .map(|l| l.median_ns.saturating_sub(empty_ns) as f64)
        .filter(|&d| d > depth_ns)
        .collect();
    depths.sort_by(f64::total_cmp);
    StandingQueue {
        stood: depths.len(),
        streams: levels.len(),
        median_depth_ns: depths.get(depths.len() / 2).copied().unwrap_or(0.0),
    }
}

/// The lowest one-way delay among `levels`: the empty path's, as near as
/// the streams came to it.
pub fn empty_path_ns(levels: impl IntoIterator<Item = DelayLevel>) -> Option<i64> {
    levels.into_iter().map(|l| l.floor_ns).min()
}

/// The depth a stream's median must pass to have stood: two of its
/// packets' service times at the path's dispersion rate, and twice the
/// receiver's batch interval where it stamps in batches (a batch holds
/// its packets' stamps back by up to one interval, with no queue).
pub fn depth_threshold_ns(size_bytes: u32, adr_bps: f64, batch_interval_ns: Option<f64>) -> f64 {
    let service_ns = size_bytes as f64 * 8.0 / adr_bps.max(1.0) * 1e9;
    (2.0 * service_ns).max(2.0 * batch_interval_ns.unwrap_or(0.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::ProbeStream;
    use proptest::prelude::*;

    fn stream(owd_ns: &[i64]) -> ProbeStream {
        // A clock offset of a day between the ends: it must cancel.
        let offset = 86_400_000_000_000i64;
        let send: Vec<i64> = (0..owd_ns.len() as i64).map(|i| i * 100_000).collect();
        let recv: Vec<Option<i64>> = send
            .iter()
            .zip(owd_ns)
            .map(|(s, d)| Some(s + d + offset))
            .collect();
        ProbeStream::from_times(0, 9000, &send, &recv)
    }

    /// Sixteen packets: the first quarter is the first 8 (the least);
    /// their delays 100..800 put the median at 500, whatever the later
    /// packets (the higher rates' queue) did. The held-at share by hand.
    #[test]
    fn the_first_part_by_hand() {
        let owd: Vec<i64> = (1..=8).map(|k| k * 100).chain([9_000; 8]).collect();
        let offset = 86_400_000_000_000i64;
        let l = first_part_level(&stream(&owd), 0.25).unwrap();
        assert_eq!((l.floor_ns, l.median_ns), (100 + offset, 500 + offset));
        let q = StandingQueue {
            stood: 6,
            streams: 8,
            median_depth_ns: 1e6,
        };
        assert!(q.held_at(0.75, 6) && !q.held_at(0.9, 6));
        let five = StandingQueue {
            streams: 5,
            stood: 4,
            ..q
        };
        assert!(five.held_at(0.75, 5) && !five.held_at(0.75, 6));
    }

    #[test]
    fn levels_by_hand() {
        let l = delay_level(&stream(&[500, 300, 900, 400, 700])).unwrap();
        let offset = 86_400_000_000_000i64;
        assert_eq!(l.floor_ns, 300 + offset);
        // Sorted 300 400 500 700 900: the median is 500.
        assert_eq!(l.median_ns, 500 + offset);
        assert_eq!(delay_level(&stream(&[500])), None);
    }

    #[test]
    fn a_queue_that_stood_by_hand() {
        // The empty path: 1,000 ns. Stream a stays near it; b rises through
        // the stream (a trend: half its packets deep); c stood 2.5 ms deep.
        let a = delay_level(&stream(&[1_000, 1_200, 1_100, 1_300, 1_000])).unwrap();
        let b = delay_level(&stream(&[1_000, 200_000, 400_000, 800_000, 1_600_000])).unwrap();
        let c = delay_level(&stream(&[2_400_000, 2_600_000, 2_500_000, 2_700_000])).unwrap();
        // 9000 B at 200 Mbit/s: 360 us a packet, so deeper than 720 us.
        let depth = depth_threshold_ns(9000, 200e6, None);
        assert!((depth - 720_000.0).abs() < 1e-6);
        let empty = empty_path_ns([a, b, c]).unwrap();
        assert_eq!(empty, a.floor_ns);
        let q = standing_queue(&[a, b, c], empty, depth);
        // b's median (400 us) is within two packets; c's (2.6 ms) is not.
        assert_eq!((q.stood, q.streams), (1, 3));
        assert!((q.median_depth_ns - 2_599_000.0).abs() < 1e-6);
        assert!(!q.held_throughout(), "three streams are too few");
        assert!(!standing_queue(&[c; 5], empty, depth).held_throughout());
        assert!(standing_queue(&[c; 6], empty, depth).held_throughout());
        // A receiver batching every 500 us: the depth is a millisecond.
        assert!((depth_threshold_ns(9000, 200e6, Some(500_000.0)) - 1e6).abs() < 1e-6);
    }

    #[test]
    fn the_share_that_decides() {
        let empty = DelayLevel {
            floor_ns: 0,
            median_ns: 10,
        };
        let full = DelayLevel {
            floor_ns: 2_000_000,
            median_ns: 2_500_000,
        };
        // 11 of 12 stood: over 90 %.
        let mut levels = vec![full; 11];
        levels.push(empty);
        assert!(standing_queue(&levels, 0, 720e3).held_throughout());
        // 10 of 12: not.
        levels[0] = empty;
        assert!(!standing_queue(&levels, 0, 720e3).held_throughout());
        assert_eq!(standing_queue(&[], 0, 1.0).streams, 0);
        assert_eq!(empty_path_ns([]), None);
    }

    proptest! {
        /// Moving every delay by one offset changes nothing; raising the
        /// depth never makes more streams stand.
        #[test]
        fn offset_free_and_monotone_in_depth(
            medians in proptest::collection::vec(0i64..5_000_000, 1..40),
            offset in -1_000_000_000_000i64..1_000_000_000_000,
            depth in 0.0f64..3e6,
            more in 0.0f64..3e6,
        ) {
            let levels: Vec<DelayLevel> = medians
                .iter()
                .map(|&m| DelayLevel { floor_ns: m / 2, median_ns: m })
                .collect();
            let moved: Vec<DelayLevel> = levels
                .iter()
                .map(|l| DelayLevel { floor_ns: l.floor_ns + offset, median_ns: l.median_ns + offset })
                .collect();
            let empty = empty_path_ns(levels.iter().copied()).unwrap();
            let a = standing_queue(&levels, empty, depth);
            let moved_empty = empty_path_ns(moved.iter().copied()).unwrap();
            prop_assert_eq!(moved_empty, empty + offset);
            prop_assert_eq!(a, standing_queue(&moved, moved_empty, depth));
            prop_assert!(standing_queue(&levels, empty, depth + more).stood <= a.stood);
            prop_assert!(a.stood <= a.streams);
        }
    }
}
