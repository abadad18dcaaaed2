//! PRC-MT's decision (\[BASS\], section IV-B): a probing rate is above the
//! available bandwidth when the packet arrival rate at the receiver is lower
//! than the probing rate.
//!
//! Rates are taken over the same gaps. The send rate reported is the bytes
//! that went in over the send time (the probing rate). The decision reads
//! timing and loss apart:
//! - timing: the packets that arrived, over the send time and over the
//!   receive time between them. A queue that grows spreads them out at the
//!   receiver: `above` when `recv_rate < send_rate * (1 - tolerance)`, both
//!   over the arrived bytes. A gap across a loss therefore spans the lost
//!   packet's send time on both sides and says only whether the queue
//!   grew; a queue that overflowed grew first, and that growth shows.
//! - loss: a path that drops packets at random says nothing about the
//!   available bandwidth, so loss alone reads `above` only when it looks
//!   like a full queue or a policer: over 20 % of the bytes, or over 5 %
//!   and concentrated late in the stream (the later half of the send time
//!   lost more than twice the earlier half's share and 2 points more; a
//!   queue or a token bucket fills first and then drops). Before this rule
//!   a stream sent and received at 4 Gbit/s with 2 of 100 packets lost
//!   read "above".
//!
//! The tolerance absorbs timestamp quantisation (a 1 us receiver clock over
//! a 64-packet, 9000-byte stream at 6 Gbit/s is 0.13 % per end) and clock
//! drift (tens of ppm).

use super::Decision;
use crate::smoothing::bass::{
    bass_events_into, mean_send_gap_ns, smooth_events_into, BassEvents, BassParams,
};
use crate::stream::{rate_bps, Gap};

/// Default relative tolerance of the rate comparison.
pub const DEFAULT_TOLERANCE: f64 = 0.005;

/// Loss alone reads "above" beyond this share of the bytes sent.
pub const LOSS_ABOVE: f64 = 0.2;
/// Loss concentrated late in the stream reads "above" beyond this share.
pub const LATE_LOSS_ABOVE: f64 = 0.05;

/// How PRC-MT read the packets a stream lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LossReading {
    /// Nothing lost.
    None,
    /// Lost, but not like a full queue: left out of the decision.
    Random,
    /// Lost like a full queue or a policer: the rate is above.
    Congestion,
}

/// The rates PRC-MT compared and what it decided.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PrcmtOutcome {
    /// Bytes sent (lost ones included) over the send time.
    pub send_rate_bps: f64,
    /// Bytes received over the receive time.
    pub recv_rate_bps: f64,
    pub decision: Decision,
    /// Share of the bytes sent that were lost.
    pub loss_share: f64,
    pub loss: LossReading,
}

/// PRC-MT over a gap series (raw, or the gaps BASS kept). `None` when the
/// gaps cannot give both rates (fewer than two gaps, no receive time span).
pub fn prcmt(gaps: &[Gap], tolerance: f64) -> Option<PrcmtOutcome> {
    if gaps.len() < 2 {
        return None;
    }
    let (mut s, mut r, mut sb, mut rb) = (0.0, 0.0, 0.0, 0.0);
    for g in gaps {
        s += g.send_ns;
        r += g.recv_ns;
        sb += g.sent_bytes;
        rb += g.recv_bytes;
    }
    let send_rate_bps = rate_bps(sb, s)?;
    let recv_rate_bps = rate_bps(rb, r)?;
    // The arrived bytes over the send time: equal to `send_rate_bps` when
    // nothing was lost.
    let arrived_send_bps = rate_bps(rb, s)?;
    let queue_grew = recv_rate_bps < arrived_send_bps * (1.0 - tolerance);
    let loss_share = if sb > 0.0 { (sb - rb) / sb } else { 0.0 };
    let loss = if sb - rb <= 0.0 {
        LossReading::None
    } else if loss_share > LOSS_ABOVE || (loss_share > LATE_LOSS_ABOVE && loss_is_late(gaps, s)) {
        LossReading::Congestion
    } else {
        LossReading::Random
    };
    let decision = if queue_grew || loss == LossReading::Congestion {
        Decision::Above
    } else {
        Decision::Below
    };
    Some(PrcmtOutcome {
        send_rate_bps,
        recv_rate_bps,
        decision,
        loss_share,
        loss,
    })
}

/// Whether the later half of the send time lost more than twice the
/// earlier half's share of bytes and 2 points more. A gap belongs to the
/// half its end falls in.
fn loss_is_late(gaps: &[Gap], send_total_ns: f64) -> bool {
    let (mut t, mut early, mut late) = (0.0, [0.0f64; 2], [0.0f64; 2]);
    for g in gaps {
        t += g.send_ns;
        let half = if t <= 0.5 * send_total_ns {
            &mut early
        } else {
            &mut late
        };
        half[0] += g.sent_bytes;
        half[1] += g.sent_bytes - g.recv_bytes;
    }
    let share = |h: [f64; 2]| if h[0] > 0.0 { h[1] / h[0] } else { 0.0 };
    share(late) > 2.0 * share(early) + 0.02
}

/// Whether the receiver stamped these gaps' packets in batches of two or
/// more on average (as `ProbeStream::receive_batch_count` counts them):
/// arrivals closer than half the send gap were stamped together, so
/// batches hold two or more packets on average when at least half the
/// gaps are such close arrivals. A receiver that stamps each packet shows
/// them too, where the sender ran late and caught up, but seldom. The
/// gaps of a single-rate stream are equal: half the mean send gap
/// stands for half the smallest, and the count stops once it is decided.
fn stamped_in_batches(gaps: &[Gap], mean_send_ns: f64) -> bool {
    let need = gaps.len().div_ceil(2).max(1);
    let close_ns = 0.5 * mean_send_ns;
    let mut close = 0;
    for g in gaps {
        close += usize::from(g.recv_ns < close_ns);
        if close >= need {
            return true;
        }
    }
    false
}

/// Why PRC-MT + BASS could not decide.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BassPrcmtError {
    /// Spikes were seen but no buffering event was complete.
    NoCompleteEvent,
    /// The kept gaps give no rates.
    NoRates,
}

/// PRC-MT on the gaps BASS kept, and how many it kept.
///
/// Under coalescence the kept span runs from the last packet of one batch
/// to the last packet of another, and each of those arrived somewhere in
/// the send gap before its interrupt: the kept receive span differs from the
/// send span by up to one send gap, plus the per-packet stamping cost of
/// unequal batches. So when BASS found buffering events the tolerance is
/// widened to `1.5 * mean send gap / kept send span` (one gap, and half a
/// gap for stamping costs). At 2.4 Gbit/s over 64 packets of 9000 bytes
/// that is 3 %, where a fixed 0.5 % called a third of clearly uncongested
/// sub-streams "above"; with exactly one gap, property tests still found
/// streams 15 % below the truth called "above".
///
/// A stream stamped one by one (no batches: fewer than half its gaps are
/// arrivals closer than half the send gap) is read on its raw gaps:
/// through the lab's veth a sender that ran late
/// now and then made BASS keep 31-38 of 127 gaps (the queue that grew
/// after the spike never drained), and streams 2-5 % above a 200 Mbit/s
/// tbf read "below"; the raw gaps read every one "above". On the
/// simulator's paths without coalescence the decision error moved from
/// 4.4-7.1 % wrong and 0.4-0.8 % undecided to 4.5-5.5 % and none
/// (bursty), 1.1-2.5 % and 1.0-1.4 % to 1.4-2.6 % and none (smoothed).
pub fn prcmt_after_bass(
    gaps: &[Gap],
    bass: BassParams,
    tolerance: f64,
) -> Result<(PrcmtOutcome, usize), BassPrcmtError> {
    prcmt_after_bass_with(
        gaps,
        bass,
        tolerance,
        &mut BassEvents::default(),
        &mut Vec::new(),
    )
}

/// [`prcmt_after_bass`] with room for BASS's events and the gaps it kept,
/// reused from one stream to the next.
pub fn prcmt_after_bass_with(
    gaps: &[Gap],
    bass: BassParams,
    tolerance: f64,
    events: &mut BassEvents,
    kept: &mut Vec<Gap>,
) -> Result<(PrcmtOutcome, usize), BassPrcmtError> {
    // Stamped one by one, the stream has none of the batches BASS smooths:
    // its spikes are a sender that ran late or a burst, and a queue that
    // grows to the end after one makes an event that never drains, which
    // BASS drops as incomplete. The raw gaps are read instead, with the
    // floor check over all of them.
    let mean_send_ns = mean_send_gap_ns(gaps);
    if !stamped_in_batches(gaps, mean_send_ns) {
        let slack = |later_ns: f64| tolerance * later_ns;
        return prcmt(gaps, tolerance)
            .map(|o| (floor_check(o, gaps, 1..gaps.len(), slack), gaps.len()))
            .ok_or(BassPrcmtError::NoRates);
    }
    bass_events_into(gaps, bass, events);
    if events.kept.is_empty()
        || (events.spikes_found && events.events.is_empty() && events.kept_gaps() < 2)
    {
        return Err(BassPrcmtError::NoCompleteEvent);
    }
    smooth_events_into(gaps, events, kept);
    let (events, kept): (&BassEvents, &[Gap]) = (events, kept);
    // A delay read at a batch boundary is known to about one send gap.
    let batch_slack = mean_send_ns;
    // The rules below read batch boundaries, where BASS found spikes.
    let batched = events.spikes_found;
    let tol = if batched {
        let span: f64 = kept.iter().map(|g| g.send_ns).sum();
        if span > 0.0 {
            tolerance.max(1.5 * mean_send_ns / span)
        } else {
            tolerance
        }
    } else {
        tolerance
    };
    // Measure from the first packet of the first kept batch to the first
    // packet of the batch after the last kept one: both are stamped at an
    // interrupt, so the per-packet stamping cost of the end batches (up to
    // 26 us for 87-packet batches at 100 Gbit/s) does not count as queueing.
    // The sums are what PRC-MT reads; BASS's averaging does not change them.
    // When the stream ends inside the last kept batch, end at that batch's
    // first packet instead.
    if let (Some(first), Some(last), true) = (events.kept.first(), events.kept.last(), batched) {
        let (a, b) = (first.start, last.end);
        let starts_with_event = events.events.first().is_some_and(|e| e.start == a);
        let end = if b < gaps.len() {
            Some(b)
        } else {
            events.events.last().map(|e| e.start).filter(|&s| s > a)
        };
        if let Some(end) = end.filter(|&e| starts_with_event && e > a + 1) {
            let span = &gaps[a + 1..=end];
            // Split where a batch starts, nearest the middle of the send
            // time: both halves run between first packets of batches.
            let splits = events
                .events
                .iter()
                .map(|e| e.start)
                .filter(|&m| m > a + 1 && m < end)
                .map(|m| m - (a + 1));
            return prcmt(span, tol)
                .map(|o| (floor_check(o, span, splits, |_| batch_slack), kept.len()))
                .ok_or(BassPrcmtError::NoRates);
        }
    }
    prcmt(kept, tol)
        .map(|o| {
            // Without batches, delays are known to the stamps: PRC-MT's
            // own tolerance over the later half.
            let slack = |later_ns: f64| {
                if batched {
                    batch_slack
                } else {
                    tolerance * later_ns
                }
            };
            (floor_check(o, kept, 1..kept.len(), slack), kept.len())
        })
        .ok_or(BassPrcmtError::NoRates)
}

/// Batches (or gaps, without batches) each half of a stream must hold for
/// its delay floor to be read: a floor is a minimum, and a few samples of
/// it are the batches' phase, not the queue (4 and 6 read 128-packet
/// streams worse than 5 on the simulator: 7.3 % and 8.3 % wrong against
/// 5.3 %).
pub const FLOOR_MIN_BATCHES: usize = 5;

/// PRC-MT compares the stream's two ends: a queue longer at the last
/// packet than at the first reads "above". Under bursty cross traffic
/// near full load the queue at any moment is a burst's backlog, and a
/// stream that starts in an idle moment and ends inside a burst reads
/// "above" at a rate under the available bandwidth: the longer the
/// stream, the more such endings at rates near the truth (on the
/// simulator's bursty load with 125 us coalescence, 320-packet streams at
/// 0.85-0.95 of the truth read "above" 14-50 % of the time). Above the
/// available bandwidth the queue never drains back, so its floor rises;
/// below it, the link idles now and then and the floor stays. So a
/// timing "above" stands only when the lowest delay of the later half of
/// the span (split at the batch start in `splits`, indices into `span`,
/// nearest the middle of the send time) is above the lowest of the
/// earlier half by more than `slack_ns` of the later half's send time (one
/// mean send gap under receive batches: a batch-boundary delay is known to
/// about that; PRC-MT's tolerance without them); otherwise it reads
/// "below". Halves with fewer
/// than [`FLOOR_MIN_BATCHES`] batch starts keep the ends' answer. Loss
/// read as congestion stands.
fn floor_check(
    o: PrcmtOutcome,
    span: &[Gap],
    splits: impl Iterator<Item = usize> + Clone,
    slack_ns: impl Fn(f64) -> f64,
) -> PrcmtOutcome {
    if o.decision != Decision::Above || o.loss == LossReading::Congestion {
        return o;
    }
    // Read again where needed rather than collected (no allocation).
    let splits = splits.filter(|&m| m > 0 && m < span.len());
    // Two halves of FLOOR_MIN_BATCHES need this many batches in all.
    if splits.clone().count() + 1 < 2 * FLOOR_MIN_BATCHES {
        return o;
    }
    let total: f64 = span.iter().map(|g| g.send_ns).sum();
    // The split whose send time before it is nearest half the total (the
    // first of equals); `splits` ascend.
    let mut best: Option<(usize, f64, f64)> = None;
    let mut next = splits.clone().peekable();
    let mut before = 0.0f64;
    for (i, g) in span.iter().enumerate() {
        if next.peek() == Some(&i) {
            next.next();
            let off = (before - 0.5 * total).abs();
            if best.is_none_or(|(_, b, _)| off < b) {
                best = Some((i, off, before));
            }
        }
        before += g.send_ns;
    }
    let Some((m, _, sent_before)) = best else {
        return o;
    };
    let early = splits.clone().filter(|&x| x < m).count() + 1;
    let later = splits.filter(|&x| x > m).count() + 1;
    if early < FLOOR_MIN_BATCHES || later < FLOOR_MIN_BATCHES {
        return o;
    }
    // The relative delay of each packet, and its floor in each half (the
    // packet at the split opens the later half).
    let (mut d, mut floor_early, mut floor_later) = (0.0f64, 0.0f64, f64::INFINITY);
    for (i, g) in span.iter().enumerate() {
        d += g.recv_ns - g.send_ns;
        if i + 1 < m {
            floor_early = floor_early.min(d);
        } else {
            floor_later = floor_later.min(d);
        }
    }
    if floor_later > floor_early + slack_ns(total - sent_before) {
        o
    } else {
        PrcmtOutcome {
            decision: Decision::Below,
            ..o
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::stream::uniform_gaps as gaps;

    /// An uncongested stream (1000 B every 1000 ns, nothing queued) under
    /// coalescence every 40 us with 300 ns stamping per packet, where the
    /// first batch holds one packet and the rest 40. Spans taken between
    /// last-of-batch packets would add 39 x 300 ns of stamping to 200 us
    /// (5.9 %, "above"); between first-of-batch packets they add nothing.
    #[test]
    fn stamping_cost_of_big_batches_is_not_queueing() {
        let (send, period, stamp) = (1000.0, 40_000.0, 300.0);
        let n = 1 + 40 * 6;
        let mut recv = Vec::new();
        for i in 0..n {
            let arrival = i as f64 * send;
            // Interrupts at 1 ns, 40001 ns, ...: packet 0 is alone.
            let k = ((arrival - 1.0) / period).ceil().max(0.0);
            let first = if k == 0.0 {
                0
            } else {
                ((k - 1.0) * period / send) as usize + 1
            };
            recv.push(k * period + 1.0 + (i - first) as f64 * stamp);
        }
        let recv_gaps: Vec<f64> = recv.windows(2).map(|w| w[1] - w[0]).collect();
        let g = gaps(send, &recv_gaps);
        let (o, _) = prcmt_after_bass(&g, BassParams::default(), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Below, "{o:?}");
    }

    /// Receive gaps of a stream stamped in batches: 1000 B every 1000 ns,
    /// packet `i` arriving `q(i)` ns late, interrupts every 40 us, 300 ns
    /// of stamping per packet in a batch.
    fn batched(n: usize, q: impl Fn(usize) -> f64) -> Vec<Gap> {
        let (send, period, stamp) = (1000.0, 40_000.0, 300.0);
        let arrival: Vec<f64> = (0..n).map(|i| i as f64 * send + q(i)).collect();
        let mut recv = Vec::new();
        let (mut batch_start, mut last_k) = (0, f64::NAN);
        for (i, a) in arrival.iter().enumerate() {
            // The first interrupt at or after the arrival (at 1, 40001 ns ...).
            let k = ((a - 1.0) / period).ceil().max(0.0);
            if k != last_k {
                (batch_start, last_k) = (i, k);
            }
            recv.push(k * period + 1.0 + (i - batch_start) as f64 * stamp);
        }
        let recv_gaps: Vec<f64> = recv.windows(2).map(|w| w[1] - w[0]).collect();
        gaps(send, &recv_gaps)
    }

    #[test]
    fn a_burst_at_the_end_is_not_a_rate_above() {
        // No batches. 30 gaps arrive as sent, then 10 arrive 150 ns late
        // each: the last packet is 1500 ns late, over the 0.5 % of the
        // 40 us span (200 ns), so the ends read "above". The floor of the
        // later half (from gap 20, the middle) is the 0 ns of gaps 19-29:
        // no higher than the earlier half's, so "below".
        let mut recv = vec![1000.0; 30];
        recv.extend([1150.0; 10]);
        let g = gaps(1000.0, &recv);
        assert_eq!(
            prcmt(&g, DEFAULT_TOLERANCE).unwrap().decision,
            Decision::Above
        );
        let (o, _) = prcmt_after_bass(&g, BassParams::default(), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Below, "{o:?}");
        // Arriving 100 ns late per gap throughout: the later half's floor
        // is the 2000 ns of its first packet, over the earlier half's 0
        // by more than 0.5 % of 20 us: above.
        let g = gaps(1000.0, &[1100.0; 40]);
        let (o, _) = prcmt_after_bass(&g, BassParams::default(), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Above, "{o:?}");
    }

    /// Stamped one by one, 127 gaps of 1000 ns: 20 arrive as sent, then
    /// the sender runs 20 us late once (a spike of 21 us and the next
    /// packet right behind it), then each packet arrives 30 ns later than
    /// the one before (a queue growing at 3 %). BASS's event from the
    /// spike never drains and was dropped with everything after it: the
    /// 20 flat gaps read "below". The raw gaps: received over 3 % slower,
    /// the later half's floor about 1.9 us over the earlier half's,
    /// above 0.5 % of the later half's 63 us: "above".
    #[test]
    fn a_late_sender_does_not_hide_a_growing_queue() {
        let mut recv = vec![1000.0; 20];
        recv.extend([21_000.0, 0.0]);
        recv.extend([1030.0; 105]);
        let g = gaps(1000.0, &recv);
        assert!(!stamped_in_batches(&g, 1000.0));
        let (o, kept) = prcmt_after_bass(&g, BassParams::default(), DEFAULT_TOLERANCE).unwrap();
        assert_eq!((o.decision, kept), (Decision::Above, 127), "{o:?}");
        // The same stream under batches of 10 packets (every tenth gap
        // the interval, the others 0) counts as batched.
        let batched: Vec<f64> = (0..127)
            .map(|i| if i % 10 == 9 { 10_000.0 } else { 0.0 })
            .collect();
        assert!(stamped_in_batches(&gaps(1000.0, &batched), 1000.0));
    }

    #[test]
    fn a_burst_at_the_end_under_receive_batches_is_not_a_rate_above() {
        // 12 batches of 40 packets. Idle until packet 400, then each packet
        // 50 ns later than the one before: the last is 4 us late, over the
        // 0.5 % of the 480 us span, and the ends read "above"; the later
        // half's floor is the idle 0, so "below".
        let g = batched(481, |i| {
            if i < 400 {
                0.0
            } else {
                50.0 * (i - 400) as f64
            }
        });
        let (o, _) = prcmt_after_bass(&g, BassParams::default(), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Below, "{o:?}");
        // 20 ns later per packet throughout (2 % over the path): the later
        // half's floor is about 4.8 us up, more than one send gap: above.
        let g = batched(481, |i| 20.0 * i as f64);
        let (o, _) = prcmt_after_bass(&g, BassParams::default(), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Above, "{o:?}");
    }

    #[test]
    fn self_congested_stream_is_above() {
        // 1000 B every 1000 ns (8 Gbit/s) out at 1250 ns (6.4 Gbit/s).
        let o = prcmt(&gaps(1000.0, &[1250.0; 10]), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Above);
        assert_eq!(o.send_rate_bps, 8e9);
        assert_eq!(o.recv_rate_bps, 6.4e9);
    }

    #[test]
    fn flat_stream_is_below_and_tolerance_holds() {
        let o = prcmt(&gaps(1000.0, &[1000.0; 10]), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Below);
        // 0.4 % slower out: inside the 0.5 % tolerance.
        let o = prcmt(&gaps(1000.0, &[1004.0; 10]), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Below);
        let o = prcmt(&gaps(1000.0, &[1006.0; 10]), DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Above);
    }

    /// 100 packets of 1000 B every 1000 ns (8 Gbit/s), received with the
    /// same spacing, packets 30 and 70 lost: two gaps of 2000 ns each way
    /// carry two packets' bytes in and one out. Timing: 98 kB over 99 us
    /// both ways, no queue. Loss 2 % (2000 of 99000 B after packet 0),
    /// under 5 %: random, below. Before the loss rule the receive rate
    /// (97 kB over 99 us, 7.84 Gbit/s) read "above".
    #[test]
    fn random_loss_is_not_congestion() {
        let mut g = gaps(1000.0, &[1000.0; 99]);
        for i in [29, 69] {
            g[i].send_ns = 2000.0;
            g[i].recv_ns = 2000.0;
            g[i].sent_bytes = 2000.0;
        }
        // The gaps after a lost packet are gone (the loss is inside the
        // gap before them).
        g.remove(70);
        g.remove(30);
        let o = prcmt(&g, DEFAULT_TOLERANCE).unwrap();
        assert_eq!(o.decision, Decision::Below, "{o:?}");
        assert_eq!(o.loss, LossReading::Random);
        assert!((o.loss_share - 2000.0 / 99_000.0).abs() < 1e-12);
        assert_eq!(o.send_rate_bps, 8e9);
        // Spread loss of 8 % (every 12th gap spans a loss): still random.
        let mut g = gaps(1000.0, &[1000.0; 100]);
        for x in g.iter_mut().step_by(12) {
            x.send_ns = 2000.0;
            x.recv_ns = 2000.0;
            x.sent_bytes = 2000.0;
        }
        let o = prcmt(&g, DEFAULT_TOLERANCE).unwrap();
        assert!(o.loss_share > 0.05);
        assert_eq!((o.decision, o.loss), (Decision::Below, LossReading::Random));
    }

    /// A queue that fills and overflows: 40 gaps of 1000 ns sent, 1250 ns
    /// received (the queue grows by 250 ns per packet), then 40 gaps that
    /// each span one lost packet (2000 ns sent, 2000 received: the full
    /// queue serves one in two). Timing over the arrived bytes: 80 kB over
    /// 120 us sent, 130 us received: the queue grew, above. The loss (40
    /// of 120 kB, 33 %) says the same. With only the first 4 of the lossy
    /// gaps (4 of 48 kB, 8.3 %, all in the later half) both still do, and
    /// the growth alone, without any loss, reads above too.
    #[test]
    fn overflow_grew_the_queue_first() {
        let mut g = gaps(1000.0, &[1250.0; 40]);
        for _ in 0..40 {
            g.push(Gap {
                send_ns: 2000.0,
                recv_ns: 2000.0,
                sent_bytes: 2000.0,
                recv_bytes: 1000.0,
                end_packet: 0,
            });
        }
        let o = prcmt(&g, DEFAULT_TOLERANCE).unwrap();
        assert_eq!(
            (o.decision, o.loss),
            (Decision::Above, LossReading::Congestion)
        );
        let o = prcmt(&g[..44], DEFAULT_TOLERANCE).unwrap();
        assert_eq!(
            (o.decision, o.loss),
            (Decision::Above, LossReading::Congestion)
        );
        let o = prcmt(&g[..40], DEFAULT_TOLERANCE).unwrap();
        assert_eq!((o.decision, o.loss), (Decision::Above, LossReading::None));
    }

    /// A policer with no queue: the first 50 gaps pass untouched, then
    /// every second packet is dropped (20 gaps spanning one loss each).
    /// Timing is flat; the loss is 20 of 90 packets = 22 % of the bytes:
    /// above by loss. With 6 late gaps spanning a loss instead (6 of 62
    /// kB, 9.7 %, early half 0 %, late half 6 of 31 kB = 19 %): late,
    /// above. The same 6 losses spread over the whole stream: random.
    #[test]
    fn late_or_heavy_loss_is_congestion() {
        let lossy = |x: &mut Gap| {
            x.send_ns = 2000.0;
            x.recv_ns = 2000.0;
            x.sent_bytes = 2000.0;
        };
        let mut g = gaps(1000.0, &[1000.0; 70]);
        g[50..].iter_mut().for_each(lossy);
        let o = prcmt(&g, DEFAULT_TOLERANCE).unwrap();
        assert!((o.loss_share - 20.0 / 90.0).abs() < 1e-12);
        assert_eq!(
            (o.decision, o.loss),
            (Decision::Above, LossReading::Congestion)
        );
        let mut g = gaps(1000.0, &[1000.0; 56]);
        g[50..].iter_mut().for_each(lossy);
        let o = prcmt(&g, DEFAULT_TOLERANCE).unwrap();
        assert!((o.loss_share - 6.0 / 62.0).abs() < 1e-12);
        assert_eq!(
            (o.decision, o.loss),
            (Decision::Above, LossReading::Congestion)
        );
        let mut g = gaps(1000.0, &[1000.0; 56]);
        g.iter_mut().step_by(10).for_each(lossy);
        let o = prcmt(&g, DEFAULT_TOLERANCE).unwrap();
        assert_eq!((o.decision, o.loss), (Decision::Below, LossReading::Random));
    }

    #[test]
    fn degenerate_inputs_give_none() {
        assert!(prcmt(&[], DEFAULT_TOLERANCE).is_none());
        assert!(prcmt(&gaps(1000.0, &[5.0]), DEFAULT_TOLERANCE).is_none());
        assert!(prcmt(&gaps(1000.0, &[0.0, 0.0]), DEFAULT_TOLERANCE).is_none());
    }
}
