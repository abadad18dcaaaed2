//! Multi-rate streams (\[BASS\] VI): where the queue began to grow, the
//! bracket of rates around it, losses, and the answer's bound.

use super::base::*;
use super::delays::*;
use super::params::*;
use super::{multi_rate_gaps::multi_rate_gaps, queue_fit::with_the_queue_fit};

/// A multi-rate stream read as it came (TOPP's and BART's line).
pub(super) fn read_multi_rate(
    room: &mut Analyzer,
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    tracker: &mut BartTracker,
) -> Analysis {
    let a = multi_rate(stream, method, params, base, tracker, room);
    with_the_queue_fit(stream, method, params, a)
}

/// A multi-rate stream's analysis, with the loss rule applied last.
pub(super) fn multi_rate(
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    tracker: &mut BartTracker,
    room: &mut Analyzer,
) -> Analysis {
    let Analyzer {
        subs,
        floors,
        arrivals,
        gaps,
        ..
    } = room;
    stream.sub_streams_with_delay_floors_into(params.gap_tolerance, subs, floors);
    let (subs, floors): (&[SubStream], &[Option<i64>]) = (subs, floors);
    let loss = 1.0 - base.received as f64 / base.packets as f64;
    // BART reads the stream on a copy of its filter: a stream the loss
    // rule below calls "at most" is a queue that overflowed, whose
    // survivors' gaps are no offered-to-measured ratio; it must not move
    // the line.
    let mut trial = tracker.clone();
    let a = multi_rate_gaps(stream, subs, loss, method, params, base, &mut trial, gaps);
    let rule = params.multirate_loss;
    let share = rule.at_most_unless_congested_above;
    // Without loss no sub-stream overflowed: skip the count.
    let overflow = if loss > 0.0 {
        first_overflowing_rate(stream, subs, share)
    } else {
        None
    };
    // An exact crossing at or above the rate where the queue overflowed
    // was read through gaps that span the losses (they look uncongested):
    // the loss says the available bandwidth lies below that rate.
    let crossing_past_overflow =
        a.bound == Bound::Exact && matches!((a.abw_bps, overflow), (Some(e), Some(o)) if e >= o);
    let lossy = loss > rule.at_most_above
        || ((matches!(a.bound, Bound::AtLeast | Bound::None)
            && (loss > share || overflow.is_some())
            || crossing_past_overflow)
            && loss_grows_with_rate_in(stream, subs));
    if !lossy {
        *tracker = trial;
        return lossless(stream, subs, floors, arrivals, method, a);
    }
    lossy_reading(
        stream, subs, floors, method, a, loss, overflow, tracker, trial,
    )
}

/// A stream the loss rule let stand: the gaps' answer, checked against
/// the delays (a crossing no queue backs, the onset bracket) and against
/// what the top sub-stream delivered.
fn lossless(
    stream: &ProbeStream,
    subs: &[SubStream],
    floors: &[Option<i64>],
    arrivals: &mut Vec<(i64, u32)>,
    method: Method,
    a: Analysis,
) -> Analysis {
    let onset = queue_onset(stream, subs, floors);
    // A crossing in the top step that no delay backs: neither did a
    // queue grow for good before the top sub-stream, nor did it grow
    // during it. The exceeding gaps were receive batches and bursts;
    // the path carried every rate probed.
    if let (Bound::Exact, Some(e), None, false) =
        (a.bound, a.abw_bps, onset, method == Method::Bart)
    {
        let second_bps = subs.len().checked_sub(2).map(|k| subs[k].rate_bps);
        if second_bps.is_some_and(|r| e > r) && top_queue_grew(stream, subs) == Some(false) {
            let top_bps = subs.iter().map(|s| s.rate_bps).fold(0.0, f64::max);
            return Analysis {
                bound: Bound::AtLeast,
                abw_bps: Some(top_bps),
                reason: Some(format!(
                    "the gaps crossed in the top sub-stream, but no queue grew: \
                     its delays stayed within {:.0} % of its send time",
                    100.0 / DELAY_RISE_DIVISOR as f64
                )),
                ..a
            };
        }
    }
    // The delay floors bracket the queue's start when they show it:
    // an exact crossing the gaps placed outside that bracket is moved
    // to its nearer end (BART answers from its filter instead).
    // Not under it when the sub-streams from the onset on were
    // delivered steadily slower than the one before it passed: a
    // token bucket hid that one's queue from the floors (the lab's
    // chain3, 12 KB buckets: a 32-packet sub-stream at 1.22 times
    // the 200 Mbit/s tbf passed whole, the gaps read 208, the floors
    // 245), where a burst leaves an unsteady delivery.
    if let (Bound::Exact, Some(e), Some((below, at)), false) = (
        a.bound,
        a.abw_bps,
        onset_bracket(onset, subs),
        method == Method::Bart,
    ) {
        let hidden = e < below
            && onset
                .and_then(|o| steady_delivery_bps(stream, &subs[o.index..], arrivals))
                .is_some_and(|d| d < below);
        // Placed in the bracket, it is still bounded by the top
        // sub-stream's delivery where the sub-stream under the top
        // one passed a head on a bucket's tokens and then queued at
        // that delivery (`head_then_tail_at`): the tokens let slower
        // sub-streams through whole, so the bracket can lie above the
        // token rate.
        if !hidden {
            let placed = Analysis {
                abw_bps: Some(e.clamp(below, at)),
                ..a
            };
            return at_most_the_top_delivered(stream, subs, placed, arrivals, true);
        }
    }
    if method == Method::Bart {
        return a;
    }
    at_most_the_top_delivered(stream, subs, a, arrivals, false)
}

/// A lossy stream: "at most" where the queue grew or overflowed, the
/// midpoint of the onset bracket, or the rate carried whole under it.
#[allow(clippy::too_many_arguments)]
fn lossy_reading(
    stream: &ProbeStream,
    subs: &[SubStream],
    floors: &[Option<i64>],
    method: Method,
    a: Analysis,
    loss: f64,
    overflow: Option<f64>,
    tracker: &mut BartTracker,
    trial: BartTracker,
) -> Analysis {
    let Some(lowest_bps) = subs
        .iter()
        .map(|s| s.rate_bps)
        .filter(|r| r.is_finite() && *r > 0.0)
        .reduce(f64::min)
    else {
        return a;
    };
    // The queue may have started growing well below where it overflowed
    // (a deep queue absorbs the first sub-streams above the available
    // bandwidth): the delays of the packets that got through show where.
    let onset = queue_onset(stream, subs, floors);
    let overflow_bps = overflow.unwrap_or(lowest_bps);
    // The queue grew for good from a sub-stream, not during the one before
    // it, and no later than the overflow: the available bandwidth lies
    // between their rates, and the midpoint is off by half a step at most.
    // (The receive rate of the later sub-stream, clamped to the two, read
    // worse on the simulator: a few receive batches make its time. BART's
    // answer is its filter's, which a lossy stream does not move.)
    let bracket = onset_bracket(onset, subs).filter(|&(_, at)| at <= overflow_bps);
    if let (Some((below, at)), false) = (bracket, method == Method::Bart) {
        if gaps_inside_bracket(a.bound, a.abw_bps, below, at) {
            *tracker = trial;
            return a;
        }
        return Analysis {
            bound: Bound::Exact,
            abw_bps: Some(0.5 * (below + at)),
            reason: Some(format!(
                "lost {:.0} % of the stream; the queue grew from the {:.3} Gbit/s \
                 sub-stream on and not before: between {:.3} and {:.3}",
                loss * 100.0,
                at / 1e9,
                below / 1e9,
                at / 1e9
            )),
            ..a
        };
    }
    let bound_bps = match onset {
        Some(o) => subs[o.index].rate_bps.min(overflow_bps),
        None => overflow_bps,
    };
    let lowest = bound_bps == lowest_bps;
    // The path carried a sub-stream under the bound whole, with a slower
    // one under it: the answer is that rate (BART keeps the bound).
    if let (Some(carried_bps), false) = (
        carried_whole_under(stream, subs, bound_bps),
        method == Method::Bart,
    ) {
        return Analysis {
            bound: Bound::Exact,
            abw_bps: Some(carried_bps),
            reason: Some(format!(
                "lost {:.0} % of the stream, from the {:.3} Gbit/s sub-stream on; \
                 the path carried the {:.3} Gbit/s one whole",
                loss * 100.0,
                bound_bps / 1e9,
                carried_bps / 1e9
            )),
            ..a
        };
    }
    if method == Method::Bart {
        tracker.at_most(bound_bps);
    }
    let reason = if lowest {
        format!(
            "lost {:.0} % of the stream: the path carried less than its lowest rate",
            loss * 100.0
        )
    } else {
        format!(
            "lost {:.0} % of the stream; a queue grew from the {:.3} Gbit/s sub-stream on",
            loss * 100.0,
            bound_bps / 1e9
        )
    };
    Analysis {
        bound: Bound::AtMost,
        abw_bps: Some(bound_bps),
        reason: Some(reason),
        ..a
    }
}

/// The rate of the fastest sub-stream under `bound_bps` (where a lossy
/// stream's loss or queue began), when it lost no packet and a slower
/// sub-stream lies under it; `None` otherwise. The loss begins at about
/// the first rate above the available bandwidth, and the rate under it
/// is the better answer of the two: on the simulator's 100 Gbit/s
/// path (bursty, 125 us coalescence, streams centred within +-20 % of the
/// truth), the truth lay at a median 0.85 of such a bound, where the rate
/// under it lies, and that rate read within +-10 % in 58 of 83 streams
/// against 38 for the midpoint. With only the lowest sub-stream under the
/// bound the truth may lie under every rate (then the queue needs a
/// sub-stream or two to overflow), so the bound stands.
pub(super) fn carried_whole_under(
    stream: &ProbeStream,
    subs: &[crate::stream::SubStream],
    bound_bps: f64,
) -> Option<f64> {
    let under = |r: f64| r.is_finite() && r > 0.0 && r < bound_bps;
    let carried = subs
        .iter()
        .filter(|s| under(s.rate_bps))
        .max_by(|a, b| a.rate_bps.total_cmp(&b.rate_bps))?;
    let slower = subs
        .iter()
        .any(|s| under(s.rate_bps) && s.rate_bps < carried.rate_bps);
    let whole = stream.packets[carried.start..carried.end]
        .iter()
        .all(|p| p.recv_ns.is_some());
    (slower && whole).then_some(carried.rate_bps)
}

/// Whether the gaps' answer stands inside the bracket the delays of a
/// lossy stream gave: an exact crossing strictly between the two rates is
/// finer than their midpoint (on a bare tbf, where the loss begins at the
/// rate that crosses it). One at the lower rate is the gaps' run starting
/// inside the quiet sub-stream, not the queue's.
pub(super) fn gaps_inside_bracket(bound: Bound, abw_bps: Option<f64>, below: f64, at: f64) -> bool {
    matches!((bound, abw_bps), (Bound::Exact, Some(e)) if below < e && e < at)
}

/// How far the delay floor must rise during a sub-stream of `n >= 2`
/// packets sent over `span` ns to count as a queue's onset: two send gaps,
/// or 7.5 % of the span if more. In i64 where it fits (always, for real
/// clocks): i128 division is a slow software routine; both truncate
/// toward zero, so the answer is the same.
pub(super) fn onset_slack_ns(span: i128, n: usize) -> i128 {
    let narrow = i64::try_from(span)
        .ok()
        .and_then(|sp| Some((sp.checked_mul(2)? / (n as i64 - 1)).max(sp.checked_mul(3)? / 40)));
    narrow.map_or_else(
        || (2 * span / (n as i128 - 1)).max(span * 3 / 40),
        i128::from,
    )
}

/// The first sub-stream (in send order) during which the queue grew for
/// good, and whether the one before it was quiet: the lowest one-way
/// delay (`floors`, as [`ProbeStream::sub_streams_with_delay_floors`]
/// gives them) of every later sub-stream lies
/// above this one's lowest by more than two of its send gaps and 7.5 % of
/// its send time (a rate 7.5 % of the capacity above the available
/// bandwidth; bursts of cross traffic left up to 6 % on the simulator's
/// 100 Gbit/s path, under a rate below the available bandwidth). The lowest
/// delay of a sub-stream is robust to receive batches (the packet stamped
/// just after it arrived) and to loss (only survivors count). `None` when
/// no sub-stream shows it, or with fewer than two sub-streams.
pub(super) fn queue_onset(
    stream: &ProbeStream,
    subs: &[crate::stream::SubStream],
    floors: &[Option<i64>],
) -> Option<Onset> {
    let floor_at = |j: usize| floors.get(j).copied().flatten().map(i128::from);
    // How far the floor must rise during sub-stream j to count.
    let slack = |j: usize| {
        let s = &subs[j];
        let n = s.end - s.start;
        if n < 2 || !(s.rate_bps.is_finite() && s.rate_bps > 0.0) {
            return None;
        }
        let span =
            stream.packets[s.end - 1].send_ns as i128 - stream.packets[s.start].send_ns as i128;
        Some(onset_slack_ns(span, n))
    };
    for j in 0..subs.len().saturating_sub(1) {
        let (Some(floor), Some(slack_j)) = (floor_at(j), slack(j)) else {
            continue;
        };
        if (j + 1..subs.len()).all(|k| floor_at(k).is_none_or(|f| f > floor + slack_j)) {
            // Sub-stream j - 1 was quiet if its floor rose by under a third
            // of what would have counted.
            let quiet_before = j >= 1
                && matches!(
                    (floor_at(j - 1), slack(j - 1)),
                    (Some(before), Some(s)) if 3 * (floor - before) < s
                );
            return Some(Onset {
                index: j,
                quiet_before,
            });
        }
    }
    None
}

/// [`queue_grew_over`] the last (top) sub-stream.
pub(super) fn top_queue_grew(
    stream: &ProbeStream,
    subs: &[crate::stream::SubStream],
) -> Option<bool> {
    let s = subs.last()?;
    queue_grew_over(stream, s.start, s.end)
}

/// The two rates the available bandwidth lies between when the queue grew
/// for good from a sub-stream after a quiet one: (r_(j-1), r_j).
pub(super) fn onset_bracket(
    onset: Option<Onset>,
    subs: &[crate::stream::SubStream],
) -> Option<(f64, f64)> {
    let o = onset.filter(|o| o.quiet_before && o.index >= 1)?;
    Some((subs[o.index - 1].rate_bps, subs[o.index].rate_bps))
}

/// The rate the packets of `subs` (consecutive, to the stream's end)
/// arrived at, when the two halves of them arrived within 5 % of each
/// other's rate (a queue the link drained steadily) and 33 or more came.
/// (`arrived` is room for their arrivals.)
pub(super) fn steady_delivery_bps(
    stream: &ProbeStream,
    subs: &[SubStream],
    arrived: &mut Vec<(i64, u32)>,
) -> Option<f64> {
    let from = subs.first()?.start;
    crate::stream::arrivals_into(&stream.packets[from..], arrived);
    if arrived.len() < 33 {
        return None;
    }
    steady_rate_bps(arrived)
}

/// The rate `arrived` (`(recv_ns, size_bytes)`, in send order) came at,
/// when its two halves came within 5 % of each other's rate.
pub(super) fn steady_rate_bps(arrived: &[(i64, u32)]) -> Option<f64> {
    let rate = crate::stream::arrival_rate_bps;
    let mid = arrived.len() / 2;
    let (all, first, second) = (
        rate(arrived)?,
        rate(&arrived[..=mid])?,
        rate(&arrived[mid..])?,
    );
    ((first - second).abs() <= 0.05 * first.max(second)).then_some(all)
}

/// A queued sub-stream delivered at `d` bounds the available bandwidth
/// from above (a FIFO of capacity C with cross traffic X delivers probes
/// sent at r > C - X at r C / (r + X) >= C - X; a token bucket at its
/// rate). An exact answer above where the top sub-stream's second half
/// was delivered is moved down to it: a bucket took the sub-streams under
/// the top one whole, and its head too, so the gaps' run began late or
/// not at a queue (the lab's chain3, 12 KB buckets at 200 Mbit/s:
/// 32-packet sub-streams at 239 passed whole, the one at 270 was
/// delivered at 200 from its middle on, the gaps answered 208 or 244).
/// Only where the sub-stream under the top one shows a bucket (below;
/// `head_then_tail_only`: the head-then-tail signature alone, for an
/// answer the delay floors placed), the stream met no burst, and not
/// under the lowest rate probed: a top sub-stream that met a long burst
/// is delivered at the burst's share, under the mean.
pub(super) fn at_most_the_top_delivered(
    stream: &ProbeStream,
    subs: &[SubStream],
    a: Analysis,
    arrived: &mut Vec<(i64, u32)>,
    head_then_tail_only: bool,
) -> Analysis {
    let (Bound::Exact, Some(e)) = (a.bound, a.abw_bps) else {
        return a;
    };
    let (Some(lowest), Some(top)) = (subs.first(), subs.last().filter(|_| rates_increase(subs)))
    else {
        return a;
    };
    // From the packet before the top sub-stream: its first gap is at the
    // top rate.
    let from = top.start.saturating_sub(1);
    let Some(d) = queued_tail_bps(&stream.packets[from..top.end], arrived) else {
        return a;
    };
    let queued = d < (1.0 - TOP_QUEUED_SHARE) * top.rate_bps;
    if !queued || d >= e || d <= lowest.rate_bps {
        return a;
    }
    // A bucket's signature in the sub-stream under the top one: it passed
    // whole, faster than the top's tail (a FIFO with that tail's
    // available bandwidth queues it), or it queued too and arrived within
    // 2 % of the tail (a bucket delivers its token rate whatever the
    // rate sent; a loaded FIFO delivers a faster rate faster). A burst
    // that met the top's tail after a queued sub-stream is left alone
    // (the lab's rtt5-bursty: a tail at 0.79 of the truth under gaps that
    // read it within 2 %, the sub-stream under it at 0.985 of its rate,
    // 22 % over the tail).
    let Some(under) = subs.len().checked_sub(2).map(|k| &subs[k]) else {
        return a;
    };
    let Some(under_bps) = stream.sub_stream_arrival_bps(under) else {
        return a;
    };
    let signature = if head_then_tail_only {
        head_then_tail_at(stream, under, d, arrived)
    } else {
        let passed_whole = under.rate_bps > d && stream.carried_whole_at(under, under_bps);
        passed_whole || (under_bps / d - 1.0).abs() <= 0.02
    };
    if !signature {
        return a;
    }
    // Quarters of a sub-stream stamped in receive batches are a batch
    // each or less: no steadiness to read (on the simulator's 125 us
    // batches the rule cost a point within +-10 %). Tested late: it is
    // a pass over the stream, and the tests above seldom hold.
    if stream.receive_batch_interval_ns().is_some() {
        return a;
    }
    // A burst faster than the link (or a pause of the path) leaves a
    // steady tail at its share, not at the path's mean (the simulator's
    // single ON/OFF source: a wide first stream's top sub-stream at 9
    // Gbit/s met a 25 Gbit/s peak and arrived at 2.6 for a truth of 8).
    if crate::decision::burst::held_under_reading(stream, a.bound, a.abw_bps).is_some() {
        return a;
    }
    let mut a = a;
    a.detail.top_tail_bps = Some(d);
    Analysis {
        abw_bps: Some(d),
        reason: Some(format!(
            "the top sub-stream's second half was delivered steadily at {:.3} \
             Gbit/s, under the gaps' {:.3}",
            d / 1e9,
            e / 1e9
        )),
        ..a
    }
}

/// The rate the second half of `packets` arrived at, when 33 or more came,
/// the quarters of that half within 5 % of each other's rate, and the
/// first half no slower (within 5 %): a queue that held from the middle
/// on, or a bucket's head passing first; not a burst that ended on the way
/// (a slower first half) or began in the second half (unequal quarters).
/// (`arrived` is room for their arrivals.)
pub(super) fn queued_tail_bps(
    packets: &[crate::stream::ProbePacket],
    arrived: &mut Vec<(i64, u32)>,
) -> Option<f64> {
    let (first, tail) = halves_bps(packets, 33, arrived)?;
    (first >= 0.95 * tail).then_some(tail)
}

/// The rates the first and the second half of `packets` arrived at, the
/// second only when steady (its quarters within 5 %), where `least` or
/// more arrived. (`arrived` is room for their arrivals.)
pub(super) fn halves_bps(
    packets: &[crate::stream::ProbePacket],
    least: usize,
    arrived: &mut Vec<(i64, u32)>,
) -> Option<(f64, f64)> {
    crate::stream::arrivals_into(packets, arrived);
    if arrived.len() < least {
        return None;
    }
    let mid = arrived.len() / 2;
    let first = crate::stream::arrival_rate_bps(&arrived[..=mid])?;
    Some((first, steady_rate_bps(&arrived[mid..])?))
}

/// Whether sub-stream `sub` passed a head and then queued, its second
/// half arriving steadily within 2 % of `tail_bps` (the top sub-stream's
/// tail) and 5 % or more under its own rate: a bucket that had tokens
/// left for its first packets and delivered the rest at its token rate,
/// as it did the top's (the lab's chain3 on a host whose 12 KB buckets
/// passed 11 of 32 packets at 265 Mbit/s, the rest at 200, and the top
/// sub-stream's tail at 200: the gaps answered 230).
pub(super) fn head_then_tail_at(
    stream: &ProbeStream,
    sub: &SubStream,
    tail_bps: f64,
    arrived: &mut Vec<(i64, u32)>,
) -> bool {
    let packets = &stream.packets[sub.start.saturating_sub(1)..sub.end];
    halves_bps(packets, 17, arrived).is_some_and(|(head, t)| {
        (t / tail_bps - 1.0).abs() <= 0.02
            && t < (1.0 - TOP_QUEUED_SHARE) * sub.rate_bps
            && head >= 1.1 * t
    })
}

/// How much slower than it was sent a top sub-stream must arrive to count
/// as queued (a FIFO delivers the top rate r at r C / (r + X)).
pub(super) const TOP_QUEUED_SHARE: f64 = 0.05;

/// Where a multi-rate stream's queue began to grow for good.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Onset {
    /// The sub-stream during which it grew.
    pub(super) index: usize,
    /// Whether the sub-stream before it showed no growth to speak of.
    pub(super) quiet_before: bool,
}

/// Whether the upper half of a multi-rate stream's sub-streams (by rate)
/// lost more than twice the lower half's share and 2 points more (with an
/// odd count the middle one is in neither half).
pub fn loss_grows_with_rate(stream: &ProbeStream, tol: GapTolerance) -> bool {
    loss_grows_with_rate_in(stream, &stream.sub_streams(tol))
}
