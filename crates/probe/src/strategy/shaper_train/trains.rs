//! The shaper check's trains: how long one is, sending it and reading its
//! head and tail, the third train's rate and length, and the lines and
//! bounds drawn through their tails.

use super::super::session::{
    single_rate_request, Method as Strategy, Report, Session, ShaperSeen, Stop, StrategyError,
};
use tightlink_core::capacity::shaper::{train_shape_batched, TrainShape};
use tightlink_core::stream::{self, ProbeStream};
use tightlink_core::Bound;

/// The back-to-back train sent after the answer lasts this long at its
/// rate, twice the answer or the sender's top rate if less (1.5 MB at
/// 10 Gbit/s with 9000-byte packets: the default's 9.2 MB median becomes
/// 11.3 with the second trains), and holds at least
/// [`SHAPER_TRAIN_MIN_BYTES`]. Behind a bucket of B bytes the head is
/// B r / (r - token rate) for a train sent at r: with a token rate half
/// of r, buckets up to about 400 KB leave a 10 Gbit/s train a tail of
/// eight or more 125 us receive batches to read the token rate from; at
/// 600 Mbit/s against 200, a 256 KB bucket's head is 384 KB.
pub(super) const SHAPER_TRAIN_NS: f64 = 1.2e6;

pub(super) const SHAPER_TRAIN_MIN_BYTES: f64 = 512e3;

/// The longest wait for a bucket to refill before the train.
pub(super) const MAX_REFILL_NS: f64 = 100e6;

/// A shaper train's bytes at `rate_bps`.
pub fn shaper_train_bytes(rate_bps: f64) -> f64 {
    (SHAPER_TRAIN_NS * rate_bps / 8e9).max(SHAPER_TRAIN_MIN_BYTES)
}

/// The bytes a method's streams leave for the trains, of a budget of
/// `max_bytes` with the sender's top rate `top_bps`: a search that
/// spends the whole budget (a bisection fighting a large bucket on the
/// lab spent its 60 streams) would leave none. Two trains where they
/// take at most a twentieth of the bytes (3 MB of the default 100 at
/// 10 Gbit/s), one where more (15 MB each at 100 Gbit/s): such a run
/// cannot confirm a first train that looked shaped, and answers as its
/// streams did. (Two streams are held back too.)
pub fn bytes_held_back(top_bps: f64, probe_bytes: u32, max_bytes: u64) -> u64 {
    let one = shaper_train_bytes(top_bps).ceil() as u64 + u64::from(probe_bytes);
    if 2 * one <= max_bytes / 20 {
        2 * one
    } else {
        one
    }
}

/// Whether one train looks shaped: its head arrived at 0.6 times the rate
/// it was sent at or more (a bucket passes it as sent; a train that met
/// cross traffic from its first packet arrives slower; at 0.8, 2 of 8
/// lab runs whose sender sent the head late missed the bucket), 1.25 times its
/// tail's rate or more, with 16 packets or more ahead of the tail. On the
/// simulator's FIFO paths (10 seeds each of the bursty and smoothed
/// 10 Gbit/s paths, batched and not, the 100 Gbit/s one and the single
/// ON/OFF source) heads read at most 1.17 times their tails, except one
/// ON/OFF train whose tail met an ON period (head 6.5, tail 2.8 Gbit/s:
/// its head had been slowed, at 0.65 of the send rate); a 5 Gbit/s
/// shaper's 256 KB bucket read 2.0 times, a 7 Gbit/s one's 1.27.
pub(super) fn looks_shaped(shape: &TrainShape, send_bps: f64) -> bool {
    head_at_send_rate(shape, send_bps, 16.0)
}

/// A head at 0.6 of the send rate or more and 1.25 times the tail's,
/// with `least_packets` packets or more ahead of the tail.
pub(super) fn head_at_send_rate(shape: &TrainShape, send_bps: f64, least_packets: f64) -> bool {
    shape
        .head_rate_bps
        .is_some_and(|h| h >= 0.6 * send_bps && h >= 1.25 * shape.tail_rate_bps)
        && shape.burst_bytes >= least_packets * shape.size_bytes as f64
}

/// One back-to-back train as it came back.
pub(super) struct ShaperTrain {
    pub(super) shape: TrainShape,
    /// The rate it was sent at, and the rate its first to last received
    /// packets arrived at, bit/s.
    pub(super) send_bps: f64,
    pub(super) recv_bps: f64,
    /// Its packets' size over the median gap between consecutive ones
    /// both received, bit/s: a host that stalls once in the train slows
    /// `recv_bps` but leaves most gaps as they were.
    pub(super) median_gap_bps: f64,
    pub(super) bytes: u64,
    pub(super) truth: Option<f64>,
    /// The train's stream id in the session.
    pub(super) id: u64,
    /// The receive batches' interval, ns, where stamped in batches
    /// (interrupt coalescence).
    pub(super) batch_ns: Option<f64>,
}

impl ShaperTrain {
    /// The train `train` (`bytes` sent) as it came back; `None` where
    /// its shape cannot be read ([`train_shape_batched`]).
    pub(super) fn read(train: &ProbeStream, bytes: u64, truth: Option<f64>) -> Option<ShaperTrain> {
        let send_bps = train.avg_rate_bps().unwrap_or(0.0);
        // Bytes after the first received packet over their span.
        let mut received = train
            .packets
            .iter()
            .filter_map(|k| k.recv_ns.map(|r| (r, k.size_bytes)));
        let recv_bps = received.next().map_or(0.0, |(r0, _)| {
            let (last, bytes) = received.fold((r0, 0.0), |(_, b), (r, size)| (r, b + size as f64));
            stream::rate_bps(bytes, (last - r0) as f64).unwrap_or(0.0)
        });
        train_shape_batched(train).map(|shape| ShaperTrain {
            shape,
            send_bps,
            recv_bps,
            median_gap_bps: median_gap_bps(train).unwrap_or(0.0),
            bytes,
            truth,
            id: train.id,
            batch_ns: train.receive_batch_interval_ns(),
        })
    }

    pub(super) fn looks_shaped(&self) -> bool {
        looks_shaped(&self.shape, self.send_bps)
    }

    /// A head, however short or slowed: 1.25 times the tail's rate or
    /// more, with [`SMALL_HEAD_PACKETS`] or more ahead of the tail. Cross
    /// traffic that moves through a bucket takes part of its burst, and
    /// one train of two that both met the bucket shows less (bursty
    /// 2 Gbit/s through a 6 Gbit/s bucket of 256 KB: 10 of 100 runs had
    /// one train with 12-15.9 packets ahead, or its head under 0.6 of the
    /// send rate, beside one that looked shaped).
    pub(super) fn shows_head(&self) -> bool {
        self.shape
            .head_rate_bps
            .is_some_and(|h| h >= 1.25 * self.shape.tail_rate_bps)
            && self.shape.burst_bytes >= SMALL_HEAD_PACKETS * f64::from(self.shape.size_bytes)
    }

    /// Under receive batches: sent as asked (`rate_bps`), and its tail
    /// arrived at `most_share` of `answer_bps` or less
    /// ([`HIDDEN_HEAD_TAIL_SHARE`], or [`HIDDEN_HEAD_CHECKED_SHARE`] where
    /// a third train can check it).
    pub(super) fn tail_refutes(&self, answer_bps: f64, rate_bps: f64, most_share: f64) -> bool {
        let share = self.shape.tail_rate_bps / answer_bps;
        self.batch_ns.is_some()
            && self.send_bps >= 0.9 * rate_bps
            && (HIDDEN_HEAD_LEAST_SHARE..=most_share).contains(&share)
    }
}

/// A bucket's head can hide in a train's first receive batch: a 64 KB
/// bucket at 5 Gbit/s passes 128 KB of a 10 Gbit/s train ahead of its
/// tail, 48 KB more than the tail's rate brings in one 125 us batch,
/// under the 16 packets [`looks_shaped`] asks for, and the multi-rate
/// streams, whose sub-streams up to 5.6 Gbit/s it passes whole, read
/// 5.7. A FIFO path delivers a train sent at r over its available
/// bandwidth A at r C / (r + C - A), never under A: two batched trains
/// whose tails both arrived at this share of the answer or less (and
/// within 10 % of each other) refute it without a head, as a bucket's
/// or a burst's. The share leaves room for cross traffic that rose
/// during both trains: on the simulator's bursty path (A 7.5 of 10
/// Gbit/s) a tail under 0.9 A needs 4.8 Gbit/s of it through a 1.2 ms
/// train, against 2.5 on average.
pub(super) const HIDDEN_HEAD_TAIL_SHARE: f64 = 0.9;

/// Packets ahead of the tail that count as a small head
/// ([`ShaperTrain::shows_head`]), against the 16 of [`looks_shaped`]. At
/// 8, two ON/OFF sources on a FIFO path (peaks over the link) left 8.6
/// and 9.9 packets ahead in one train beside a free moment's full head
/// in the other, in 2 of 1800 runs, and were taken for a bucket.
pub(super) const SMALL_HEAD_PACKETS: f64 = 12.0;

/// ... and this share where a third train can follow the two at another
/// rate over their tail (the budget holds it and its rate is a tenth or
/// more off theirs): it tells a bucket from a FIFO link (see
/// [`FLAT_TAILS`]), so the tails may lie nearer the answer. A 32 KB
/// bucket at 5 Gbit/s, whose streams read 5.33 (tails at 0.94 of it):
/// +6.5 -> -0.1 % in 195 of 200 `auto` runs; the 10 Gbit/s FIFO paths
/// said `shaped` in 1 more run of 1000 (+6.1 -> -0.4 %). Without the
/// check, 0.95 took 15 more FIFO runs of 1400 for
/// buckets, 9 of them on the 100 Gbit/s smoothed path, where the
/// budget leaves no room for a third 15 MB train.
pub(super) const HIDDEN_HEAD_CHECKED_SHARE: f64 = 0.95;

/// ... and no less than this share: a bucket whose head fits in one
/// batch is small, and streams that pass it whole read little over its
/// token rate (a 64 KB one at 5 Gbit/s: 5.7), while a train that meets
/// an ON period of a source whose peaks exceed the link arrives at the
/// share that period leaves any train (the simulator's single ON/OFF
/// source, 25 Gbit/s peaks on 10: tails at 2.9 where the streams had
/// read "at least 8.8" in an OFF period; two trains 2.7 ms apart met the
/// same period, seed 391).
pub(super) const HIDDEN_HEAD_LEAST_SHARE: f64 = 0.5;

/// Size over the median receive gap of consecutive packets both
/// received (`None`: fewer than two such pairs, or a median gap of zero).
pub(super) fn median_gap_bps(train: &ProbeStream) -> Option<f64> {
    let mut gaps: Vec<(f64, u32)> = train
        .packets
        .windows(2)
        .filter_map(|w| Some(((w[1].recv_ns? - w[0].recv_ns?) as f64, w[1].size_bytes)))
        .collect();
    if gaps.len() < 2 {
        return None;
    }
    let mid = gaps.len() / 2;
    let (_, &mut (gap_ns, size), _) = gaps.select_nth_unstable_by(mid, |a, b| a.0.total_cmp(&b.0));
    (gap_ns > 0.0).then(|| f64::from(size) * 8e9 / gap_ns)
}

/// A back-to-back train of about `bytes` at `rate_bps`, after `wait_ns`
/// of idle for the bucket to refill (`None`: no room, or too few
/// batches). A sender that fell behind the train's schedule sent it
/// slower than its stamps say, and a bucket passed that as it came: on
/// the lab's 200 Mbit/s tbf three runs of 40 read a late train's head at
/// 75-440 Mbit/s for 369-568 sent, and answered 168, 178 and 284 for
/// 140. Such a train goes once more where there is room, after the same
/// wait, and the second copy is read whatever came of it (a sender
/// stalled in 30 % of its streams on the simulator left a 1 MB bucket
/// unread in 3 of 10 runs where a second late copy read nothing).
pub(super) fn shaper_train(
    s: &mut Session,
    size_bytes: u32,
    rate_bps: f64,
    bytes: f64,
    wait_ns: i64,
) -> Result<Option<ShaperTrain>, StrategyError> {
    let n = ((bytes / size_bytes as f64).ceil() as usize).max(16);
    let req = single_rate_request(rate_bps, n, size_bytes);
    let mut sent = None;
    for _ in 0..2 {
        if !s.fits(req.bytes()) {
            break;
        }
        s.idle(wait_ns);
        sent = Some(s.send_check(&req)?);
        if !s.last_late() {
            break;
        }
    }
    Ok(sent.and_then(|(train, truth)| ShaperTrain::read(&train, req.bytes(), truth)))
}

/// How much longer the train sent again is when the first passed whole.
pub(super) const LONGER_TRAIN: f64 = 4.0;

/// How much shorter the train sent first, to rule out a bucket on a FIFO
/// path, is than the full one: the shorter, the less cross traffic it
/// pushes out of the queue (docs/evaluation.md, "Measurements behind the
/// strategies' constants").
pub(super) const SHORT_TRAIN_SHARE: f64 = 8.0;

/// The trains change an answer only when their tails read this share of
/// it or less: streams that pass on a bucket read its burst rate, 1.11
/// to 2.5 times the token rate in the shaped cases measured (simulator
/// and namespaces), while a FIFO path whose two trains met a lull for
/// their first 200 KB showed a head too, with tails 0.3 and 3.6 % under
/// the streams' answer (`multirate` on the simulator's 1 % loss path,
/// seed 1: it was taken for a bucket, -4.5 %). A tail within a
/// twentieth of the answer does not contradict it.
pub(super) const TAIL_UNDER_ANSWER: f64 = 0.95;

/// Two trains whose tails both arrived at this share of an exact answer
/// or less, where nothing confirmed a bucket, widen its range down to
/// the slower tail ([`SlowTrains`](super::super::SlowTrains)). A FIFO path delivers a train
/// sent over its available bandwidth at no less than it, so such tails
/// mean heavier cross traffic while they ran, or a bucket that cross
/// traffic shares: with 2 Gbit/s of bursty cross traffic through an
/// 8 Gbit/s bucket of 256 KB behind a 10 Gbit/s sender (trains all but
/// head, read at 1.25 times their tails at best), 27 of 100 exact
/// answers had such tails, none holding the truth in its range, 10 once
/// widened; on eight FIFO paths (800 runs) 8 had them, 7 holding it, 8
/// once widened.
pub const SLOW_TAIL_SHARE: f64 = 0.9;

/// The range of the line's answer R - X through tails `tail1_bps` at
/// `rate1_bps` and `tail2_bps` at `rate2_bps` ([`shared_bucket`]): what
/// it answers with each tail moved by [`STEADY_TAILS`] either way, and
/// at least 5 % each side. The line is steep in the tails: on the lab's
/// 200 Mbit/s tbf with 60 Mbit/s of CBR through its bucket (trains at
/// 371 and 619 Mbit/s, tails near 173 and 182) a third tail 1.5-4 % off
/// moved the answer from 140 to 107-155, and 4 of 20 answers' ranges
/// of +-5 % missed the truth.
pub(super) fn line_range(
    rate1_bps: f64,
    tail1_bps: f64,
    rate2_bps: f64,
    tail2_bps: f64,
) -> (f64, f64) {
    let line = |t1: f64, t2: f64| {
        tails_line(rate1_bps, t1, rate2_bps, t2).map(|(token, cross)| token - cross)
    };
    let centre = line(tail1_bps, tail2_bps).unwrap_or(0.0);
    let (mut low, mut high) = (0.95 * centre, 1.05 * centre);
    for a in [1.0 - STEADY_TAILS, 1.0 + STEADY_TAILS] {
        for b in [1.0 - STEADY_TAILS, 1.0 + STEADY_TAILS] {
            if let Some(v) = line(a * tail1_bps, b * tail2_bps) {
                low = low.min(v);
                high = high.max(v);
            }
        }
    }
    (low.max(0.0), high)
}

/// Two trains at `rate_bps` that showed a bucket's head, whose tails
/// lay too far apart to be its token rate: cross traffic that moves
/// shares the bucket. A tail keeps its share of the token rate R,
/// t = r R / (r + X), which lies over R - X for any r over that (and a
/// FIFO path delivers a train at no less than what was free), so the
/// tails' mean bounds what was free while they ran from above (the
/// faster tail held the truth no more often, 177 of 177 such runs on
/// the simulator each, and read further from it). With R between the tail and
/// the trains' rate (their head queued at the bucket), R - X = r - R (r
/// / t - 1) lies between r (2 - r / t) and t: the range.
pub(super) fn at_most_the_tails(
    s: &Session,
    streams: &Report,
    first: &ShaperTrain,
    second: &ShaperTrain,
    rate_bps: f64,
    head_seen: bool,
) -> Report {
    let high_bps = 0.5 * (first.shape.tail_rate_bps + second.shape.tail_rate_bps);
    Report {
        shaper: Some(seen_in_two_trains(
            streams, first, second, high_bps, head_seen, None,
        )),
        ..s.report(
            streams.method,
            high_bps,
            Bound::AtMost,
            least_free_bps(rate_bps, high_bps),
            high_bps,
            Stop::Shaped,
        )
    }
}

/// What two trains after the streams' answer showed, for the report.
pub(super) fn seen_in_two_trains(
    streams: &Report,
    first: &ShaperTrain,
    second: &ShaperTrain,
    tail_bps: f64,
    head_seen: bool,
    shared_bucket: Option<(f64, f64)>,
) -> ShaperSeen {
    let (t1, t2) = (first.shape.tail_rate_bps, second.shape.tail_rate_bps);
    ShaperSeen {
        streams_bps: streams.available_bandwidth_bps,
        streams_bound: streams.bound,
        head_bps: first.shape.head_rate_bps.unwrap_or(t1),
        tail_bps,
        bucket_bytes: 0.5 * (first.shape.burst_bytes + second.shape.burst_bytes),
        train_bytes: first.bytes,
        head_seen,
        shared_bucket,
        tail_spread: (t2 / t1 - 1.0).abs(),
    }
}

/// The least a bucket of token rate R, between `tail_bps` and
/// `rate_bps`, leaves free where a train sent at r came out at t:
/// R - X = r - R (r / t - 1), least at R = r.
pub(super) fn least_free_bps(rate_bps: f64, tail_bps: f64) -> f64 {
    (rate_bps * (2.0 - rate_bps / tail_bps)).clamp(0.0, tail_bps)
}

/// A path narrower than the sender, or a bucket whose head hid: under
/// receive batches, a first train at r whose tail arrived at t, no head
/// seen, where the streams answered A. A FIFO link of capacity C with A
/// free delivers it at r C / (r + C - A), so the tail puts C at
/// t (r - A) / (r - t); where that lies well under the sender's top rate
/// ([`NARROW_SHARE`]) the tail says as much of a small token bucket
/// shared with cross traffic as of a narrow link. A train at another
/// rate r3 tells: such a link delivers it at r3 C / (r3 + C - A), and
/// one that came that fast (within [`NARROW_LINK_MISS`]), or showed no
/// bytes ahead of its tail, leaves the answer alone. Otherwise a second
/// train at each rate must read its tail again (steady cross traffic,
/// [`STEADY_TAILS`]) and the slower one show a head too; TOPP's line
/// through the tails at the two rates (`shared_bucket`) then leaves
/// R - X free, and under [`TAIL_UNDER_ANSWER`] of the streams' answer
/// that is the answer (`shaped`, no head seen at the faster rate, the
/// line's R and X). On the simulator, 2 Gbit/s of CBR through a
/// 6 Gbit/s bucket read 4.29, 4.62 and 5.18 for 4 with 32, 64 and 128 KB
/// buckets (a first train at 9.2 Gbit/s left a tail at 4.9: C 5.3 by
/// the formula, for a 10 Gbit/s sender). The slower trains' heads are
/// at most what one receive batch hid of the first's, (r - t) times the
/// batch interval, at their rate. `None`: not such a train, a train
/// could not be sent or read, the tails disagree, or the line leaves the
/// streams' answer; the trains sent stay in the cost. Only where two
/// trains take a twentieth of the budget or less.
pub(super) fn headless_shared_bucket(
    s: &mut Session,
    report: &Report,
    first: &ShaperTrain,
    rate_bps: f64,
    train_bytes: f64,
    wait_ns: i64,
) -> Result<Option<Report>, StrategyError> {
    let answer = report.available_bandwidth_bps;
    let tail = first.shape.tail_rate_bps;
    let top = s.max_rate_bps();
    let sent_as_asked = |t: &ShaperTrain| t.send_bps >= 0.9 * rate_bps;
    let Some((batch_ns, capacity_bps)) =
        headless_candidate(s, answer, first, rate_bps, train_bytes)
    else {
        return Ok(None);
    };
    // First a train at another rate: a narrow link with the streams'
    // answer free delivers it at r3 C / (r3 + C - A), and one that does
    // is left alone at the cost of this train (on a 5 Gbit/s link with
    // 1 Gbit/s of CBR behind a 10 Gbit/s sender: 1.3 % under that).
    let rate3 = third_train_rate(rate_bps, tail, top);
    let hidden_bytes = (rate_bps - tail) * batch_ns / 8e9;
    let first_bytes = first.bytes as f64;
    let bytes3 = head_and_tail_bytes(hidden_bytes, rate_bps, first_bytes, tail, rate3)
        .map_or(SHARED_TRAIN_BYTES * first_bytes, |b| {
            b.min(SHARED_TRAIN_BYTES * first_bytes)
        });
    let refill_ns = (2.0 * bytes3 * 8e9 / answer.max(1.0)).min(MAX_REFILL_NS) as i64;
    let size_bytes = first.shape.size_bytes;
    let slow_train =
        |s: &mut Session| third_train(s, size_bytes, rate_bps, rate3, bytes3, refill_ns);
    let Some(third) = slow_train(s)? else {
        return Ok(None);
    };
    // At the slower rate a bucket's head lasts longer, B r3 / (r3 + X -
    // R), and shows: bytes ahead of the tail. A narrow FIFO link shows
    // none, and is left alone (on a 2 Gbit/s link with 500 Mbit/s of
    // CBR the line read 1.44-1.54 for 1.50 where the streams read 1.57:
    // better, but nothing said a bucket).
    let slow_head =
        |t: &ShaperTrain| t.shape.burst_bytes >= SLOW_HEAD_PACKETS * f64::from(t.shape.size_bytes);
    let fifo_tail_bps = fifo_delivers_bps(third.send_bps, capacity_bps, answer);
    if !slow_head(&third) || third.shape.tail_rate_bps >= (1.0 - NARROW_LINK_MISS) * fifo_tail_bps {
        return Ok(None);
    }
    // It arrived slower: a bucket whose rate the streams overstated, or
    // cross traffic that changed. Each rate's tail is read again (two
    // trains at one rate agree by chance under bursty cross traffic: on
    // a 5 Gbit/s link behind a 10 Gbit/s sender with 1 Gbit/s of bursty
    // cross traffic, lines through two trains at the first rate and one
    // at the other read 2.4 and 3.1 for 4, in 2 of 20 runs).
    let Some(second) = shaper_train(s, first.shape.size_bytes, rate_bps, train_bytes, wait_ns)?
    else {
        return Ok(None);
    };
    let t2 = second.shape.tail_rate_bps;
    if second.looks_shaped() || !sent_as_asked(&second) || (t2 / tail - 1.0).abs() > STEADY_TAILS {
        return Ok(None);
    }
    let tail = 0.5 * (tail + t2);
    let Some(fourth) = slow_train(s)? else {
        return Ok(None);
    };
    let t3 = third.shape.tail_rate_bps;
    if (fourth.shape.tail_rate_bps / t3 - 1.0).abs() > STEADY_TAILS {
        return Ok(None);
    }
    // A bucket leaves some bytes ahead in the faster trains too (part
    // of its head outside the first batch: 12-100 KB in the cases above)
    // and the same head in both slower ones; a FIFO link met by heavier
    // cross traffic in the slower trains leaves neither (on the 5 Gbit/s
    // link with bursty cross traffic: none, and 14 against 40 KB, where
    // the line read 3.2 for 4).
    let ahead = |t: &ShaperTrain| t.shape.burst_bytes >= f64::from(t.shape.size_bytes);
    if !(slow_head(&fourth)
        && ahead(first)
        && ahead(&second)
        && heads_agree(third.shape.burst_bytes, fourth.shape.burst_bytes))
    {
        return Ok(None);
    }
    let t3 = 0.5 * (t3 + fourth.shape.tail_rate_bps);
    let rate3 = 0.5 * (third.send_bps + fourth.send_bps);
    let Some((token, cross)) = shared_bucket(rate_bps, tail, rate3, t3) else {
        return Ok(None);
    };
    let available = token - cross;
    if available >= TAIL_UNDER_ANSWER * answer {
        return Ok(None);
    }
    let (low_bps, high_bps) = line_range(rate_bps, tail, rate3, t3);
    for t in [first, &second, &third, &fourth] {
        s.count_check(t.id, t.truth);
    }
    let seen = ShaperSeen {
        streams_bps: answer,
        streams_bound: report.bound,
        head_bps: first.shape.head_rate_bps.unwrap_or(tail),
        tail_bps: tail,
        bucket_bytes: 0.5 * (third.shape.burst_bytes + fourth.shape.burst_bytes),
        train_bytes: first.bytes,
        head_seen: false,
        shared_bucket: Some((token, cross)),
        tail_spread: (t2 / tail - 1.0).abs(),
    };
    let range = (low_bps, high_bps);
    Ok(Some(shaped_report(
        s,
        report.method,
        available,
        range,
        seen,
    )))
}

/// The answer a bucket the trains found gives: `available` exact, stop
/// `shaped`, with what the trains saw.
fn shaped_report(
    s: &Session,
    method: Strategy,
    available: f64,
    (low_bps, high_bps): (f64, f64),
    seen: ShaperSeen,
) -> Report {
    Report {
        shaper: Some(seen),
        ..s.report(
            method,
            available,
            Bound::Exact,
            low_bps,
            high_bps,
            Stop::Shaped,
        )
    }
}

/// Whether the first train is one [`headless_shared_bucket`] reads: sent
/// as asked well over the streams' `answer`, no head, a tail under
/// `answer` that puts a narrow link well under the sender's top rate,
/// and room in the budget for three more trains (a twentieth of it for
/// two, not the 15 MB trains of 100 Gbit/s). `Some((batch interval,
/// that link's capacity))`.
fn headless_candidate(
    s: &Session,
    answer: f64,
    first: &ShaperTrain,
    rate_bps: f64,
    train_bytes: f64,
) -> Option<(f64, f64)> {
    let tail = first.shape.tail_rate_bps;
    let batch_ns = first.batch_ns?;
    if first.looks_shaped()
        || first.send_bps < 0.9 * rate_bps
        || rate_bps <= FIRST_RATE_OVER_ANSWER * answer
        || rate_bps <= tail
        || tail < HIDDEN_HEAD_TAIL_SHARE * answer
    {
        return None;
    }
    let capacity_bps = narrow_link_bps(rate_bps, tail, answer);
    if capacity_bps > NARROW_SHARE * s.max_rate_bps() {
        return None;
    }
    if 2.0 * train_bytes > s.budget.max_bytes as f64 / 20.0 {
        return None;
    }
    Some((batch_ns, capacity_bps))
}

/// The capacity C of a FIFO link with `available_bps` A free that
/// delivers a train sent at r over A at `tail_bps` t: t = r C / (r + C -
/// A) gives C = t (r - A) / (r - t).
pub(super) fn narrow_link_bps(rate_bps: f64, tail_bps: f64, available_bps: f64) -> f64 {
    tail_bps * (rate_bps - available_bps) / (rate_bps - tail_bps)
}

/// What a FIFO link of `capacity_bps` C with `available_bps` A free
/// delivers a train sent at `rate_bps` r over A at: r C / (r + C - A).
pub(super) fn fifo_delivers_bps(rate_bps: f64, capacity_bps: f64, available_bps: f64) -> f64 {
    rate_bps * capacity_bps / (rate_bps + capacity_bps - available_bps)
}

/// A first train's tail that puts a FIFO link's capacity under this
/// share of the sender's top rate ([`headless_shared_bucket`]). The
/// shared buckets above put it at 0.48-0.57 of a 10 Gbit/s sender, a
/// 5 Gbit/s link at 0.49; on the simulator's default path (a 10 Gbit/s
/// link with bursty cross traffic) a train that met heavy traffic put it
/// under 0.8 in about a third of 40 runs, each of which paid a train
/// more, and under 0.7 in some; under 0.6 in none.
pub(super) const NARROW_SHARE: f64 = 0.6;

/// A third train's tail this share or more under what a narrow link
/// with the streams' answer free would deliver ([`headless_shared_bucket`]):
/// 2 Gbit/s of CBR through a 6 Gbit/s bucket, 3.1 to 12 % under it
/// (32 to 128 KB buckets); narrow FIFO links with CBR, 1.3 % under to
/// 0.1 % over.
pub(super) const NARROW_LINK_MISS: f64 = 0.02;

/// Bytes ahead of the tail, in packets, that count as a head in the
/// slower trains of [`headless_shared_bucket`]: 2 Gbit/s of CBR through
/// a 6 Gbit/s bucket left 15-88 KB ahead in trains at 5.6 Gbit/s (32 to
/// 128 KB buckets), a 2 Gbit/s FIFO link 1.2 KB.
pub(super) const SLOW_HEAD_PACKETS: f64 = 1.5;

/// The first train must go this much faster than the answer for its
/// tail to say anything of the capacity.
pub(super) const FIRST_RATE_OVER_ANSWER: f64 = 1.1;

/// The third train's rate after two at `rate_bps` whose tails read
/// `tail_bps`, with the sender's top rate `top_bps`: as far above theirs
/// as [`SHARED_SECOND_RATE`] is under it, where the sender can (the line
/// through the tails is as steep either way, and the faster train is
/// shorter: its head B r / (r - A) holds fewer bytes and its tail
/// queues fewer, for less time), else that far under it, over
/// [`SHARED_OVER_TAIL`] times their tail. On the lab's 200 Mbit/s tbf
/// with 60 Mbit/s of CBR through its 256 KB bucket, trains at 371
/// Mbit/s left a third at 223 a head of 25 ms and 660 KB, and two runs
/// of 25 met a receiving-host stall in its tail (read 154 and 162
/// Mbit/s for 140).
pub(super) fn third_train_rate(rate_bps: f64, tail_bps: f64, top_bps: f64) -> f64 {
    let above = rate_bps / SHARED_SECOND_RATE;
    if above <= top_bps {
        above
    } else {
        (SHARED_SECOND_RATE * rate_bps).max(SHARED_OVER_TAIL * tail_bps)
    }
}

/// The third train's bytes: its head at `rate3_bps` and as long a tail
/// as the first two trains had. A bucket of B bytes with available
/// bandwidth A under its token rate empties under a train at r in
/// B / (r - A); the first trains' heads gathered their bytes ahead of
/// their tail (`tail_bps`, at least A) at their head rate less the
/// tail, so the slower train's head lasts at most those bytes over
/// `rate3_bps - tail_bps`. At most [`SHARED_TRAIN_BYTES`] times the
/// first train, and that where the heads cannot be read (hidden in a
/// receive batch). Twice the first train's bytes went before: on the
/// lab's 200 Mbit/s tbf with 60 Mbit/s of CBR through its 256 KB
/// bucket, a 1 MB third train queued 14-16 ms of its 16 ms buffer and
/// its tail sped up as the CBR frames were dropped, where 600 KB would
/// have done.
pub(super) fn third_train_bytes(
    first: &ShaperTrain,
    second: &ShaperTrain,
    tail_bps: f64,
    rate3_bps: f64,
) -> f64 {
    let first_bytes = first.bytes as f64;
    let most = SHARED_TRAIN_BYTES * first_bytes;
    let (Some(h1), Some(h2)) = (first.shape.head_rate_bps, second.shape.head_rate_bps) else {
        return most;
    };
    let ahead_bytes = 0.5 * (first.shape.burst_bytes + second.shape.burst_bytes);
    head_and_tail_bytes(
        ahead_bytes,
        0.5 * (h1 + h2),
        first_bytes,
        tail_bps,
        rate3_bps,
    )
    .map_or(most, |b| b.min(most))
}

/// [`third_train_bytes`] from the first trains' bytes ahead of their
/// tail, head rate, bytes (the first's) and tail rate: the head at
/// `rate3_bps` and the first train's tail; `None` where the numbers
/// make no head or no tail.
pub(super) fn head_and_tail_bytes(
    ahead_bytes: f64,
    head_bps: f64,
    first_bytes: f64,
    tail_bps: f64,
    rate3_bps: f64,
) -> Option<f64> {
    if !(head_bps > tail_bps && rate3_bps > tail_bps) {
        return None;
    }
    let head1_bytes = ahead_bytes * head_bps / (head_bps - tail_bps);
    let tail1_bytes = first_bytes - head1_bytes;
    let head3_bytes = ahead_bytes * rate3_bps / (rate3_bps - tail_bps);
    (tail1_bytes > 0.0).then_some(head3_bytes + tail1_bytes)
}

/// The third train after two at `rate_bps`, at `rate3`, `bytes` after
/// `refill_ns` of idle; `None` where its rate is too near the first's,
/// it cannot be read, or its sender fell behind.
pub(super) fn third_train(
    s: &mut Session,
    size_bytes: u32,
    rate_bps: f64,
    rate3: f64,
    bytes: f64,
    refill_ns: i64,
) -> Result<Option<ShaperTrain>, StrategyError> {
    if !third_rate_apart(rate_bps, rate3) {
        return Ok(None);
    }
    let third = shaper_train(s, size_bytes, rate3, bytes, refill_ns)?;
    Ok(third.filter(|t| t.send_bps >= 0.9 * rate3))
}

/// Two trains' heads (bytes before the tail) within this factor of each
/// other. A bucket refilled before each train passes the same head, less
/// what cross traffic through it took (the lab's 256 KB tbf: within 4 %
/// alone, 1.4 times at most with 60 Mbit/s of CBR through it, 12 and 9
/// runs); a head cut short by an ON period of cross traffic that
/// saturates the link lasts until it began, at any moment (the
/// simulator's single ON/OFF source: 2.5 and 2.6 times, in the only 2 of
/// 200 runs that said `shaped`, 28 and 59 % low).
pub(super) const HEADS_AGREE: f64 = 1.5;

/// Whether two heads of `a_bytes` and `b_bytes` are one bucket's.
pub(super) fn heads_agree(a_bytes: f64, b_bytes: f64) -> bool {
    a_bytes.max(b_bytes) <= HEADS_AGREE * a_bytes.min(b_bytes)
}

/// Two trains' tails within this share of each other: the cross traffic
/// was steady enough for a third train to fit it.
pub(super) const STEADY_TAILS: f64 = 0.02;

/// The third train goes at the first two's rate over this share where
/// the sender can, else at this share of it and over
/// [`SHARED_OVER_TAIL`] times their tail (the bucket must still empty
/// under it) ([`third_train_rate`]), with its head and the first train's
/// tail, at most [`SHARED_TRAIN_BYTES`] times the first train's bytes
/// ([`third_train_bytes`]: a slower train's head is longer).
pub(super) const SHARED_SECOND_RATE: f64 = 0.6;

pub(super) const SHARED_OVER_TAIL: f64 = 1.15;

pub(super) const SHARED_TRAIN_BYTES: f64 = 2.0;

/// Cross traffic under this share of the token rate is none.
pub(super) const SHARED_LEAST_CROSS: f64 = 0.05;

/// Where no head showed, a third train at another rate whose tail read
/// more than this share off the first two's: a bucket alone keeps its
/// token rate whatever the train's (the simulator's 5 Gbit/s tbf with a
/// 64 KB bucket: the same tail to 1 %), where a FIFO link delivers a
/// slower train slower, r C / (r + X) (at 10 Gbit/s with 2 of cross
/// traffic, a train at 6 a tenth slower than one at 10), and a tail read
/// while cross traffic ran heavy comes back up with it.
pub(super) const FLAT_TAILS: f64 = 0.05;

/// A third train within this share of the first two's rate is not sent.
pub(super) const THIRD_RATE_APART: f64 = 0.1;

/// How far a FIFO link of capacity `capacity_bps` would move a train's
/// tail from `tail_bps` at `rate_bps` to one at `rate3_bps`, as a share:
/// the first gives the cross traffic X = r C / tail - r, and a train at
/// r3 arrives at r3 C / (r3 + X).
pub(super) fn fifo_tail_move(
    rate_bps: f64,
    tail_bps: f64,
    rate3_bps: f64,
    capacity_bps: f64,
) -> f64 {
    let cross = (rate_bps * capacity_bps / tail_bps.max(1.0) - rate_bps).max(0.0);
    let tail3 = rate3_bps * capacity_bps / (rate3_bps + cross);
    (tail3 / tail_bps.max(1.0) - 1.0).abs()
}

/// Whether a third train at `rate3_bps` lies far enough from the first
/// two's `rate_bps` to be sent ([`THIRD_RATE_APART`]).
pub(super) fn third_rate_apart(rate_bps: f64, rate3_bps: f64) -> bool {
    (rate3_bps / rate_bps - 1.0).abs() > THIRD_RATE_APART
}

/// A token bucket of rate R that cross traffic X shares (it enters the
/// bucket's queue beside the train) passes a train sent at r over its
/// rate at a tail of r R / (r + X): TOPP's line, 1 / t = 1 / R + (X / R)
/// / r. From tails `tail1_bps` at `rate1_bps` and `tail2_bps` at
/// `rate2_bps` (another rate): `Some((R, X))` where X is at least
/// a twentieth of R and R - X, the available bandwidth, lies
/// between half the faster train's tail and that tail; `None` otherwise
/// (no cross traffic in the bucket, or tails that do not fit the line).
pub fn shared_bucket(
    rate1_bps: f64,
    tail1_bps: f64,
    rate2_bps: f64,
    tail2_bps: f64,
) -> Option<(f64, f64)> {
    let (token, cross) = tails_line(rate1_bps, tail1_bps, rate2_bps, tail2_bps)?;
    let available = token - cross;
    let fast_tail = if rate1_bps > rate2_bps {
        tail1_bps
    } else {
        tail2_bps
    };
    (cross >= SHARED_LEAST_CROSS * token && available >= 0.5 * fast_tail && available <= fast_tail)
        .then_some((token, cross))
}

/// TOPP's line through two tails, 1 / t = 1 / R + (X / R) / r: the
/// bucket's rate R and the cross traffic X, whatever they come to;
/// `None` where the line puts no positive R.
pub(super) fn tails_line(
    rate1_bps: f64,
    tail1_bps: f64,
    rate2_bps: f64,
    tail2_bps: f64,
) -> Option<(f64, f64)> {
    let inv = |v: f64| 1.0 / v;
    let slope = (inv(tail2_bps) - inv(tail1_bps)) / (inv(rate2_bps) - inv(rate1_bps));
    let inv_token = inv(tail1_bps) - slope / rate1_bps;
    if !(slope.is_finite() && inv_token > 0.0) {
        return None;
    }
    let token = 1.0 / inv_token;
    Some((token, slope * token))
}
