//! What several readers take from the one-way delays: whether a queue
//! grew over a stretch of packets or batches, the rate where sub-streams
//! began to overflow, and how loss grows with the rate. The single-rate,
//! multi-rate and queue-fit readers share these.

use super::base::*;

/// `subs` in the order of their rates (a stable sort); borrowed when they
/// are in it already, as the sub-streams of a multi-rate stream are.
pub(super) fn sorted_by_rate(subs: &[SubStream]) -> std::borrow::Cow<'_, [SubStream]> {
    let by_rate = |a: &SubStream, b: &SubStream| a.rate_bps.total_cmp(&b.rate_bps);
    if subs.is_sorted_by(|a, b| by_rate(a, b).is_le()) {
        return std::borrow::Cow::Borrowed(subs);
    }
    let mut sorted = subs.to_vec();
    sorted.sort_by(by_rate);
    std::borrow::Cow::Owned(sorted)
}

/// [`first_overflowing_rate`](crate::decision::multirate::first_overflowing_rate)
/// over the sub-streams' packets, slowest first.
pub(super) fn first_overflowing_rate(
    stream: &ProbeStream,
    subs: &[crate::stream::SubStream],
    min_share: f64,
) -> Option<f64> {
    let by_rate = sorted_by_rate(subs);
    let per_sub = by_rate
        .iter()
        .filter(|s| s.rate_bps.is_finite() && s.rate_bps > 0.0)
        .map(|s| {
            let pk = &stream.packets[s.start..s.end];
            let lost = pk.iter().filter(|p| p.recv_ns.is_none()).count();
            (s.rate_bps, pk.len() as f64, lost as f64)
        });
    crate::decision::multirate::first_overflowing_rate(per_sub, min_share)
}

/// A queue that grows at 2 % of the capacity's rate grows by 2 % of the
/// elapsed time; on the simulator's 100 Gbit/s path the top sub-streams
/// of streams whose truth lay above every rate rose by at most 1.8 %
/// (90th percentile), those crossing inside the top step mostly by more.
pub(super) const DELAY_RISE_DIVISOR: i128 = 50;

/// Whether the queue grew while packets `from..to` were sent: the lowest
/// one-way delay of the second half lies more than 2 % of that half's
/// send time above the lowest of the first half (lowest delays: robust to
/// receive batches, whose stamps only add delay). `None` when the run is
/// too short for 2 % to exceed two send gaps (the stamping noise a batch
/// leaves: at 10 Gbit/s a 64-packet run never is; the hundreds of packets
/// a 100 Gbit/s run needs to span its receive batches are), or a half
/// lost every packet.
pub(super) fn queue_grew_over(stream: &ProbeStream, from: usize, to: usize) -> Option<bool> {
    if !delay_test_fits(from, to) || to > stream.packets.len() {
        return None;
    }
    // The stream's first packet is stamped at once by a coalescing receiver.
    let start = from.max(1);
    let mid = start + (to - start) / 2;
    let lowest = |a: usize, b: usize| {
        stream.packets[a..b]
            .iter()
            .filter_map(|p| p.recv_ns.map(|r| i128::from(r) - i128::from(p.send_ns)))
            .min()
    };
    let half_ns =
        i128::from(stream.packets[to - 1].send_ns) - i128::from(stream.packets[mid].send_ns);
    if half_ns <= 0 {
        return None;
    }
    Some(lowest(mid, to)? - lowest(start, mid)? > half_ns / DELAY_RISE_DIVISOR)
}

/// How TOPP and BART read `o / m` for packets `from..to` stamped in
/// receive batches:
/// - in fewer than three, not at all: their gaps are one interrupt
///   interval and zeros (on the simulator's 100 Gbit/s path BART's
///   filter read 5 Gbit/s with 75 free from such points);
/// - with `by_floors`, in three to [`FEW_RECEIVE_BATCHES`] and long
///   enough for the delay test ([`delay_test_fits`]): one plus the slope
///   of the batches' lowest delays over send time
///   ([`ProbeStream::batch_floors_in`]). A queue that drains at `m` while
///   filling at `o` delays each packet by `o / m - 1` of the time since
///   the first, while the gaps' sum is off by up to a batch (at
///   100 Gbit/s a 640-packet sub-stream spans 4-7 batches);
/// - from the gaps otherwise.
pub(super) fn few_batches_ratio(
    stream: &ProbeStream,
    from: usize,
    to: usize,
    by_floors: bool,
) -> SubStreamRatio {
    let Some(batches) = stream.receive_batch_count_in(from, to) else {
        return SubStreamRatio::FromGaps;
    };
    if batches < 3 {
        return SubStreamRatio::Unreadable;
    }
    if !by_floors || batches >= FEW_RECEIVE_BATCHES || !delay_test_fits(from, to) {
        return SubStreamRatio::FromGaps;
    }
    let floors = stream.batch_floors_in(from, to).unwrap_or_default();
    let (slope, _) = crate::stats::line_fit(floors.iter().copied());
    if floors.len() >= 3 && slope.is_finite() {
        SubStreamRatio::Given(1.0 + slope)
    } else {
        SubStreamRatio::FromGaps
    }
}

/// Whether packets `from..to` are enough for [`queue_grew_over`]: 2 % of
/// the later half's send time exceeds two of its mean send gaps only when
/// it holds 100 gaps or more. Checked before anything is read.
pub(super) fn delay_test_fits(from: usize, to: usize) -> bool {
    let start = from.max(1);
    let mid = start + to.saturating_sub(start) / 2;
    to.saturating_sub(mid + 1) as i128 >= 2 * DELAY_RISE_DIVISOR
}

pub(super) fn loss_grows_with_rate_in(
    stream: &ProbeStream,
    subs: &[crate::stream::SubStream],
) -> bool {
    if subs.len() < 2 {
        return false;
    }
    let subs = sorted_by_rate(subs);
    let half = subs.len() / 2;
    let share = |group: &[crate::stream::SubStream]| {
        let (mut sent, mut lost) = (0usize, 0usize);
        for s in group {
            let pk = &stream.packets[s.start..s.end];
            sent += pk.len();
            lost += pk.iter().filter(|p| p.recv_ns.is_none()).count();
        }
        lost as f64 / sent.max(1) as f64
    };
    let (low, high) = (share(&subs[..half]), share(&subs[subs.len() - half..]));
    high > 2.0 * low + 0.02
}

/// BASS averages the gaps over buffering events (receive batches); a
/// stream that arrived in fewer than this many batches gives it too few:
/// on the simulator's 100 Gbit/s path with 125 us coalescence, PRC-MT
/// after BASS was wrong about 25-31 % of streams of 320-640 packets (2-5
/// batches) and 12 % at 1280 (9), where the delays were wrong 7-10 %;
/// at 3200 packets (23 batches) BASS was the better (6 % against 9 %).
pub(super) const FEW_RECEIVE_BATCHES: usize = 16;

/// For packets `from..to` that arrived in fewer than
/// [`FEW_RECEIVE_BATCHES`] receive batches and are long enough for the
/// delay test: the batches, and whether the queue grew
/// ([`queue_grew_over`]). `None` otherwise.
pub(super) fn few_batches_queue_grew(
    stream: &ProbeStream,
    from: usize,
    to: usize,
) -> Option<(usize, bool)> {
    // The length first: counting batches reads every packet.
    if !delay_test_fits(from, to) {
        return None;
    }
    let batches = stream.receive_batch_count_in(from, to)?;
    if batches >= FEW_RECEIVE_BATCHES {
        return None;
    }
    Some((batches, queue_grew_over(stream, from, to)?))
}
