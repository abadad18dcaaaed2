//! The shaper train every closed-loop method ends with (ours; not in the
//! papers): after the method answers, one back-to-back train at twice the
//! answer shows a token bucket larger than the method's streams, which
//! pass it whole and read its burst rate, and answers the rate the
//! bucket keeps once empty.
//!
//! A tbf or policer bucket of 256 KB (a common setting) passes a
//! 64-packet stream of 9000-byte probes, or a pathload fleet's streams,
//! without queueing: every method read such a bucket 17 to 85 % high, in
//! silence. A train long enough to empty the bucket arrives as a head at
//! the rate it was sent and a tail at the token rate (the core's
//! `capacity::shaper::train_shape_batched`). A train that arrived faster
//! than a FIFO path with the answer's available bandwidth could pass it met a
//! bucket longer than its head: one four times as long follows.
//!
//! The full train queues half its bytes on a FIFO path (256 KB into a
//! 100 KB queue drops other users' packets), so where it can be read an
//! eighth of it goes first: arriving no faster than such a path allows,
//! it rules the bucket out and the full train is not sent.
//!
//! Under receive batches a small bucket's head hides in the train's first
//! batch; two trains whose tails both arrived well under the answer then
//! refute it without a head (a FIFO path delivers a train sent faster
//! than its available bandwidth at no less than it).
//!
//! The multi-rate strategy, where each packet is stamped, sends the check
//! during its streams, at its first answer after the scan
//! ([`early_shaper_check`]): a bucket ends the run there, and on a FIFO
//! path the check is not sent again at the end.

use super::session::{Report, Session, Stop, StrategyError};
use tightlink_core::Bound;

mod check;
mod trains;

use check::shaper_check;
pub use trains::{bytes_held_back, shaper_train_bytes, shared_bucket, SLOW_TAIL_SHARE};
use trains::{MAX_REFILL_NS, TAIL_UNDER_ANSWER};

/// Whether a shaper check the strategy ran during its streams ruled a
/// bucket out (its short train queued) with a train fast enough for
/// `answer_bps` too: at 1.5 times it or more (a bucket whose token rate is
/// under the answer passes such a train's head at the rate it was sent).
/// The check is then not sent again after the answer.
pub fn ruled_out_for(s: &Session, answer_bps: f64) -> bool {
    s.shaper_ruled_out_bps
        .is_some_and(|rate| rate >= 1.5 * answer_bps)
}

/// The shaper check while a strategy's streams go on, at its answer so
/// far: `Some` (the trains' answer, `shaped`) when a bucket was found,
/// and the strategy stops there instead of spending streams that pass on
/// the bucket (on the lab's 256 KB bucket the multi-rate streams read
/// 540, 380, then 230-290 Mbit/s for a token rate of 200, for 9-17
/// streams, before the check at the end); `None` otherwise (the session
/// then knows whether the check ruled a bucket out,
/// [`ruled_out_for`]). Here two trains that show a bucket answer even
/// when their tails agree with the answer so far (up to 1.05 times it):
/// the streams had emptied the bucket and read its token rate, but the
/// waits for the trains refill it, and the streams after them pass on it
/// again (on the simulator, before the check waited for lossless streams,
/// a 1.5 MB bucket at 200 Mbit/s read 199, then answers up to 440 over 12
/// more streams before the check at the end found it).
pub fn early_shaper_check(
    s: &mut Session,
    method: super::session::Method,
    answer_bps: f64,
    reference_bps: f64,
    size_bytes: u32,
) -> Result<Option<Report>, StrategyError> {
    let so_far = s.report(
        method,
        answer_bps,
        Bound::Exact,
        answer_bps,
        answer_bps,
        Stop::Stable,
    );
    let bytes_before = s.bytes;
    let checked = shaper_check(s, so_far, reference_bps, size_bytes, EARLY_TAIL_SHARE)?;
    if checked.stop == Stop::Shaped {
        return Ok(Some(checked));
    }
    // The streams go on: first the queue the trains built drains (at
    // most their bytes at the answer's rate).
    let check_bytes = s.bytes.saturating_sub(bytes_before) as f64;
    s.idle((check_bytes * 8e9 / answer_bps.max(1.0)).min(MAX_REFILL_NS) as i64);
    Ok(None)
}

/// Two trains that both show a bucket, with tails up to this share of the
/// answer so far, answer during the streams.
const EARLY_TAIL_SHARE: f64 = 1.05;

/// After the strategy answered (exact or "at least"): one back-to-back
/// train at twice the answer (at most the top rate). The strategy's streams, a
/// few hundred KB each, pass unqueued on a token bucket as large as they
/// are and read its burst rate (a 5 Gbit/s shaper with a 256 KB bucket
/// read 9.27 Gbit/s "exact"); the train's head passes on the bucket and
/// its tail at the token rate. When the train looks shaped
/// (`looks_shaped`) and its tail is under 0.95 of the answer, a second
/// train after the bucket has had time to refill must look shaped too,
/// with a tail within 10 % of the first (a burst of cross traffic that
/// slowed one tail seldom slows the next the same way); the answer is
/// then the two tails' mean, a dispersion rate (on a FIFO path never
/// under the available bandwidth), its range ±5 %, and the report says
/// what the streams read. Under receive batches, which can hide a small
/// bucket's head, trains whose tails arrived at 0.5 to 0.9 of the answer
/// count without a head (`ShaperTrain::tail_refutes`).
pub fn after_shaper_train(
    s: &mut Session,
    report: Report,
    size_bytes: u32,
) -> Result<Report, StrategyError> {
    let reference_bps = report.available_bandwidth_bps;
    shaper_check(s, report, reference_bps, size_bytes, TAIL_UNDER_ANSWER)
}

#[cfg(test)]
mod tests {
    use super::trains::*;
    use tightlink_core::capacity::shaper::TrainShape;
    use tightlink_core::stream::ProbePacket;
    use tightlink_core::stream::ProbeStream;

    /// A train at 9.236 Gbit/s whose tail came at 4.926 where the streams
    /// read 4.618 free: a FIFO link of 4.926 x 4.618 / 4.310 = 5.278
    /// Gbit/s (0.71 of cross traffic), which would deliver a train at
    /// 5.648 at 5.648 x 5.278 / 6.308 = 4.726. Round trip: that link
    /// delivers the first train at its tail.
    #[test]
    fn a_narrow_link_by_hand() {
        let c = narrow_link_bps(9.236e9, 4.926e9, 4.618e9);
        assert!((c / 5.278e9 - 1.0).abs() < 1e-3, "{c}");
        let t3 = fifo_delivers_bps(5.648e9, c, 4.618e9);
        assert!((t3 / 4.726e9 - 1.0).abs() < 1e-3, "{t3}");
        let t1 = fifo_delivers_bps(9.236e9, c, 4.618e9);
        assert!((t1 / 4.926e9 - 1.0).abs() < 1e-9, "{t1}");
    }

    /// A train sent at 10 Gbit/s of 9000-byte packets whose tail came at
    /// `tail_bps`, with `head_bps` and `ahead_packets` packets' bytes ahead.
    fn train_with_head(tail_bps: f64, head_bps: f64, ahead_packets: f64) -> ShaperTrain {
        ShaperTrain {
            shape: TrainShape {
                tail_rate_bps: tail_bps,
                head_rate_bps: Some(head_bps),
                burst_bytes: ahead_packets * 9000.0,
                size_bytes: 9000,
                tail_jitter_ns: 0.0,
                tail_batched: 0.0,
            },
            send_bps: 10e9,
            recv_bps: 5.5e9,
            median_gap_bps: 5e9,
            bytes: 1_503_000,
            truth: None,
            id: 0,
            batch_ns: Some(125e3),
        }
    }

    /// Trains sent at 10 Gbit/s. Tail 5, head 7.5 with 16 packets ahead:
    /// looks shaped; 12 packets ahead: shows a head only; 11 ahead, or a
    /// head at 6.2 (1.24 times the tail): neither. Tail 4.5, head 5.9
    /// (1.31 times it, under 0.6 of the send rate): shows a head only.
    #[test]
    fn small_and_slowed_heads_by_hand() {
        let cases = [
            (5e9, 7.5e9, 16.0, true, true),
            (5e9, 7.5e9, 12.0, false, true),
            (5e9, 7.5e9, 11.0, false, false),
            (5e9, 6.2e9, 40.0, false, false),
            (4.5e9, 5.9e9, 40.0, false, true),
        ];
        for (tail, head, ahead, shaped, shows) in cases {
            let t = train_with_head(tail, head, ahead);
            let what = format!("tail {tail}, head {head}, {ahead} packets ahead");
            assert_eq!(t.looks_shaped(), shaped, "{what}");
            assert_eq!(t.shows_head(), shows, "{what}");
        }
    }

    /// 1000-byte packets received 10 us apart but for one 980 us stall,
    /// and one lost (its neighbours' gap is not a gap): gaps 10, 10, 980,
    /// 10, 10, so 1000 B per 10 us = 800 Mbit/s, where first to last
    /// (6000 B after the first over 1040 us) reads 46.2.
    #[test]
    fn one_stall_leaves_the_median_gap() {
        let recv = [
            Some(0),
            Some(10),
            Some(20),
            Some(1000),
            Some(1010),
            Some(1020),
            None,
            Some(1040),
        ];
        let packets = recv
            .iter()
            .enumerate()
            .map(|(k, r)| ProbePacket {
                size_bytes: 1000,
                send_ns: k as i64 * 10_000,
                recv_ns: r.map(|us: i64| us * 1000),
            })
            .collect();
        let train = ProbeStream::new(0, packets);
        let rate = median_gap_bps(&train).unwrap();
        assert!((rate - 800e6).abs() < 1.0, "{rate}");
        // Fewer than two gaps: nothing to take a median of.
        let two = ProbeStream::new(1, train.packets[..2].to_vec());
        assert_eq!(median_gap_bps(&two), None);
    }

    /// A 10 Gbit/s train of 200 9000-byte packets (7.2 us apart) through
    /// a 5 Gbit/s bucket that passes its first 15 packets as sent (a
    /// 64 KB bucket's head: 15 x 9000 B less what 5 Gbit/s drains in
    /// 14 x 7.2 us, 72 KB) and the rest 14.4 us apart; `batch_ns`
    /// stamps each packet at the end of its receive batch (0: each as it
    /// arrived).
    fn bucket_train(batch_ns: i64) -> ProbeStream {
        let packets = (0..200i64)
            .map(|k| {
                let arrived = if k < 15 {
                    k * 7200
                } else {
                    14 * 7200 + (k - 14) * 14_400
                };
                let stamp = if batch_ns > 0 {
                    (arrived / batch_ns + 1) * batch_ns
                } else {
                    arrived
                };
                ProbePacket {
                    size_bytes: 9000,
                    send_ns: k * 7200,
                    recv_ns: Some(stamp),
                }
            })
            .collect();
        ProbeStream::new(0, packets)
    }

    /// Under 125 us batches 16 packets arrived by the first batch's end
    /// (the 16th at 115.2 us), when is hidden, so nothing passes ahead
    /// that the tail does not explain (8 KB, under a packet: no head);
    /// the tail, one point per batch of 8 or 9 packets, reads 4.99
    /// Gbit/s, which refutes streams that read 5.7 (0.9 x 5.7 = 5.13)
    /// but not 5.5 (4.95) nor 10.5 (under half). Stamped one by one the head shows, 15 packets
    /// at the send rate with 63 KB ahead of a 5 Gbit/s tail (under the
    /// 16 packets a head needs), and a tail never answers alone there.
    #[test]
    fn a_tail_under_the_answer_refutes_it_where_batches_hide_the_head() {
        let batched = ShaperTrain::read(&bucket_train(125_000), 1_800_000, None).unwrap();
        assert!(batched.batch_ns.is_some());
        assert!(!batched.looks_shaped(), "{:?}", batched.shape);
        let tail = batched.shape.tail_rate_bps;
        assert!((tail / 5e9 - 1.0).abs() < 0.01, "{tail}");
        let (unchecked, checked) = (HIDDEN_HEAD_TAIL_SHARE, HIDDEN_HEAD_CHECKED_SHARE);
        assert!(batched.tail_refutes(5.7e9, 10e9, unchecked));
        assert!(!batched.tail_refutes(5.5e9, 10e9, unchecked));
        // Where a third train can check it, 5.5 and 5.4 are refuted too
        // (0.95 x 5.4 = 5.13), 5.1 not (4.85).
        assert!(batched.tail_refutes(5.5e9, 10e9, checked));
        assert!(batched.tail_refutes(5.4e9, 10e9, checked));
        assert!(!batched.tail_refutes(5.1e9, 10e9, checked));
        // Under half the answer: an ON period's share, not a small
        // bucket's (4.99 of 10.5).
        assert!(!batched.tail_refutes(10.5e9, 10e9, checked));
        // A train the sender sent at 8 of the 10 Gbit/s asked for: its
        // tail says nothing of a train at 10.
        assert!(!batched.tail_refutes(5.7e9, 12e9, checked));
        let stamped = ShaperTrain::read(&bucket_train(0), 1_800_000, None).unwrap();
        assert!(stamped.batch_ns.is_none());
        let sh = stamped.shape;
        assert_eq!(sh.head_rate_bps, Some(10e9), "{sh:?}");
        assert!((sh.tail_rate_bps / 5e9 - 1.0).abs() < 1e-9, "{sh:?}");
        assert!((sh.burst_bytes - 63_000.0).abs() < 1.0, "{sh:?}");
        assert!(!stamped.looks_shaped());
        assert!(!stamped.tail_refutes(5.7e9, 10e9, checked));
    }

    /// A 6 Gbit/s bucket that 2 Gbit/s of cross traffic shares: a train
    /// at 10 arrives at 10 x 6 / 12 = 5.0, one at 6 at 6 x 6 / 8 = 4.5.
    /// 1/t against 1/r: slope (1/4.5 - 1/5) / (1/6 - 1/10) = 0.3333 =
    /// X / R, 1/R = 1/5 - 0.3333 / 10: R = 6, X = 2, 4 free. A bucket
    /// alone gives equal tails (no cross traffic: none); tails that rise
    /// as the rate falls fit no bucket; a fit whose free rate leaves
    /// half to all of the faster tail is refused.
    #[test]
    fn a_shared_bucket_by_hand() {
        let (token, cross) = shared_bucket(10e9, 5e9, 6e9, 4.5e9).unwrap();
        assert!((token / 6e9 - 1.0).abs() < 1e-9, "{token}");
        assert!((cross / 2e9 - 1.0).abs() < 1e-9, "{cross}");
        assert_eq!(shared_bucket(10e9, 6e9, 6e9, 6e9), None);
        // 3 % of the token rate: under the 5 % that counts.
        assert_eq!(
            shared_bucket(10e9, 6e9 * 10.0 / 10.18, 6e9, 6e9 * 6.0 / 6.18),
            None
        );
        assert_eq!(shared_bucket(10e9, 5e9, 6e9, 5.2e9), None);
        // R 6, X 4: 2 free, under half the faster tail (10 x 6 / 14 = 4.29).
        assert_eq!(shared_bucket(10e9, 60e9 / 14.0, 6e9, 3.6e9), None);
        // The third train faster than the first two: the same line.
        let (token, cross) = shared_bucket(6e9, 4.5e9, 10e9, 5e9).unwrap();
        assert!((token / 6e9 - 1.0).abs() < 1e-9, "{token}");
        assert!((cross / 2e9 - 1.0).abs() < 1e-9, "{cross}");
    }

    /// The lab's trains at 371.4 Mbit/s through a 200 Mbit/s bucket with
    /// 60 of CBR: tails 172.2, 220 000 bytes ahead. With a 1 Gbit/s
    /// sender the third goes at 371.4 / 0.6 = 619; at most 500 it goes
    /// under, at 0.6 x 371.4 = 222.84 (over 1.15 x 172.2 = 198.03), and
    /// at 0.6 x 250 = 150 the tail's 1.15 x 172.2 holds. The first train's
    /// head held 220 000 x 371.4 / 199.2 = 410 181 of its 513 246 bytes
    /// (tail 103 065); at 619 the head holds 220 000 x 619 / 446.8 =
    /// 304 790: 407 855 bytes in all.
    #[test]
    fn the_third_train_by_hand() {
        assert!((third_train_rate(371.4e6, 172.2e6, 1e9) - 619e6).abs() < 1.0);
        assert!((third_train_rate(371.4e6, 172.2e6, 500e6) - 222.84e6).abs() < 1.0);
        assert!((third_train_rate(250e6, 172.2e6, 300e6) - 198.03e6).abs() < 1.0);
        let b = head_and_tail_bytes(220e3, 371.4e6, 513_246.0, 172.2e6, 619e6).unwrap();
        assert!((b - 407_855.0).abs() < 2.0, "{b}");
        // A head as long as the train leaves no tail to copy.
        assert_eq!(
            head_and_tail_bytes(300e3, 371.4e6, 513_246.0, 172.2e6, 619e6),
            None
        );
        assert_eq!(
            head_and_tail_bytes(220e3, 371.4e6, 513_246.0, 172.2e6, 170e6),
            None
        );
    }

    /// The line through tails 5 at 10 and 4.5 at 6 answers 4 (R 6, X 2);
    /// with each tail moved 2 %: 5.1 and 4.41 give 1 / R = (1 / 5.1 -
    /// 0.1 s) with s = (1 / 4.41 - 1 / 5.1) / (1 / 6 - 1 / 10), 3.597 at
    /// the least; 4.9 and 4.59, 4.325 at the most. The lab's miss (tails
    /// 173.57 at 371.43, 179.76 at 619.06 Mbit/s: 154.9 for 140.5) gets a
    /// range from 125.7 to 179.4, which holds it.
    #[test]
    fn the_lines_range_by_hand() {
        let (lo, hi) = line_range(10e9, 5e9, 6e9, 4.5e9);
        assert!((lo / 3.5973e9 - 1.0).abs() < 1e-4, "{lo}");
        assert!((hi / 4.3251e9 - 1.0).abs() < 1e-4, "{hi}");
        let (lo, hi) = line_range(371.43e6, 173.57e6, 619.06e6, 179.76e6);
        assert!((lo / 125.7e6 - 1.0).abs() < 2e-3, "{lo}");
        assert!((hi / 179.4e6 - 1.0).abs() < 2e-3, "{hi}");
    }

    /// Trains at 8 Gbit/s whose tails came at 5: a bucket of 5 with
    /// nothing through it leaves 5, one of 8 with 4.8 of cross traffic
    /// (8 x 8 / 12.8 = 5) leaves 3.2 = 8 (2 - 1.6); at 10 the bucket
    /// could be 10 with 10 of cross traffic: nothing. A train at 9 out at
    /// 6: 9 (2 - 1.5) = 4.5. One that came out at its rate: all of it.
    #[test]
    fn the_least_a_shared_bucket_leaves_by_hand() {
        assert!((least_free_bps(8e9, 5e9) - 3.2e9).abs() < 1.0);
        assert_eq!(least_free_bps(10e9, 5e9), 0.0);
        assert!((least_free_bps(9e9, 6e9) - 4.5e9).abs() < 1.0);
        assert_eq!(least_free_bps(5e9, 5e9), 5e9);
    }

    #[test]
    fn heads_agree_by_hand() {
        // 250 and 240 KB (one bucket, refilled): agree; 300 and 740 KB
        // (the first cut short by an ON period): not; 1.5 times, the edge.
        assert!(heads_agree(250e3, 240e3));
        assert!(heads_agree(240e3, 250e3));
        assert!(!heads_agree(300e3, 740e3));
        assert!(!heads_agree(740e3, 300e3));
        assert!(heads_agree(200e3, 300e3));
        assert!(!heads_agree(200e3, 301e3));
        assert!(!heads_agree(0.0, 1.0));
    }

    /// A 10 Gbit/s FIFO link whose train at 10 arrived at 8: X = 100/8
    /// less 10 = 2.5 Gbit/s of cross traffic. A train at 9 arrives at
    /// 90/11.5 = 7.826 (2.17 % off 8: too near to tell), one at 6 at
    /// 60/8.5 = 7.059 (11.8 %: a flat tail there is a bucket's).
    #[test]
    fn a_fifo_moves_the_tail_by_hand() {
        let m9 = fifo_tail_move(10e9, 8e9, 9e9, 10e9);
        assert!((m9 - (1.0 - 90.0 / 11.5 / 8.0)).abs() < 1e-9, "{m9}");
        assert!(m9 < 2.0 * FLAT_TAILS);
        let m6 = fifo_tail_move(10e9, 8e9, 6e9, 10e9);
        assert!((m6 - (1.0 - 60.0 / 8.5 / 8.0)).abs() < 1e-9, "{m6}");
        assert!(m6 >= 2.0 * FLAT_TAILS);
        // No cross traffic: a FIFO carries any train at the same rate.
        assert_eq!(fifo_tail_move(10e9, 10e9, 6e9, 10e9), 0.0);
    }
}
