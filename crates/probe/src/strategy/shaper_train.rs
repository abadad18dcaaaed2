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
//! the rate it was sent and a tail at the token rate
//! ([`train_shape_batched`]). A train that arrived faster than a FIFO
//! path with the answer's available bandwidth could pass it met a
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

use super::session::{single_rate_request, Report, Session, ShaperSeen, Stop, StrategyError};
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
const SHAPER_TRAIN_NS: f64 = 1.2e6;
const SHAPER_TRAIN_MIN_BYTES: f64 = 512e3;
/// The longest wait for a bucket to refill before the train.
const MAX_REFILL_NS: f64 = 100e6;

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
fn looks_shaped(shape: &TrainShape, send_bps: f64) -> bool {
    shape
        .head_rate_bps
        .is_some_and(|h| h >= 0.6 * send_bps && h >= 1.25 * shape.tail_rate_bps)
        && shape.burst_bytes >= 16.0 * shape.size_bytes as f64
}

/// One back-to-back train as it came back.
struct ShaperTrain {
    shape: TrainShape,
    /// The rate it was sent at, and the rate its first to last received
    /// packets arrived at, bit/s.
    send_bps: f64,
    recv_bps: f64,
    /// Its packets' size over the median gap between consecutive ones
    /// both received, bit/s: a host that stalls once in the train slows
    /// `recv_bps` but leaves most gaps as they were.
    median_gap_bps: f64,
    bytes: u64,
    truth: Option<f64>,
    /// The train's stream id in the session.
    id: u64,
    /// The receive batches' interval, ns, where stamped in batches
    /// (interrupt coalescence).
    batch_ns: Option<f64>,
}

impl ShaperTrain {
    /// The train `train` (`bytes` sent) as it came back; `None` where
    /// its shape cannot be read ([`train_shape_batched`]).
    fn read(train: &ProbeStream, bytes: u64, truth: Option<f64>) -> Option<ShaperTrain> {
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

    fn looks_shaped(&self) -> bool {
        looks_shaped(&self.shape, self.send_bps)
    }

    /// A head, however short or slowed: 1.25 times the tail's rate or
    /// more, with [`SMALL_HEAD_PACKETS`] or more ahead of the tail. Cross
    /// traffic that moves through a bucket takes part of its burst, and
    /// one train of two that both met the bucket shows less (bursty
    /// 2 Gbit/s through a 6 Gbit/s bucket of 256 KB: 10 of 100 runs had
    /// one train with 12-15.9 packets ahead, or its head under 0.6 of the
    /// send rate, beside one that looked shaped).
    fn shows_head(&self) -> bool {
        self.shape
            .head_rate_bps
            .is_some_and(|h| h >= 1.25 * self.shape.tail_rate_bps)
            && self.shape.burst_bytes >= SMALL_HEAD_PACKETS * f64::from(self.shape.size_bytes)
    }

    /// Under receive batches: sent as asked (`rate_bps`), and its tail
    /// arrived at `most_share` of `answer_bps` or less
    /// ([`HIDDEN_HEAD_TAIL_SHARE`], or [`HIDDEN_HEAD_CHECKED_SHARE`] where
    /// a third train can check it).
    fn tail_refutes(&self, answer_bps: f64, rate_bps: f64, most_share: f64) -> bool {
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
const HIDDEN_HEAD_TAIL_SHARE: f64 = 0.9;
/// Packets ahead of the tail that count as a small head
/// ([`ShaperTrain::shows_head`]), against the 16 of [`looks_shaped`]. At
/// 8, two ON/OFF sources on a FIFO path (peaks over the link) left 8.6
/// and 9.9 packets ahead in one train beside a free moment's full head
/// in the other, in 2 of 1800 runs, and were taken for a bucket.
const SMALL_HEAD_PACKETS: f64 = 12.0;
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
const HIDDEN_HEAD_CHECKED_SHARE: f64 = 0.95;
/// ... and no less than this share: a bucket whose head fits in one
/// batch is small, and streams that pass it whole read little over its
/// token rate (a 64 KB one at 5 Gbit/s: 5.7), while a train that meets
/// an ON period of a source whose peaks exceed the link arrives at the
/// share that period leaves any train (the simulator's single ON/OFF
/// source, 25 Gbit/s peaks on 10: tails at 2.9 where the streams had
/// read "at least 8.8" in an OFF period; two trains 2.7 ms apart met the
/// same period, seed 391).
const HIDDEN_HEAD_LEAST_SHARE: f64 = 0.5;

/// Size over the median receive gap of consecutive packets both
/// received (`None`: fewer than two such pairs, or a median gap of zero).
fn median_gap_bps(train: &ProbeStream) -> Option<f64> {
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
fn shaper_train(
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
const LONGER_TRAIN: f64 = 4.0;
/// How much shorter the train sent first, to rule out a bucket on a FIFO
/// path, is than the full one: the shorter, the less cross traffic it
/// pushes out of the queue (docs/simulator.md, "Tuning scan-pba").
const SHORT_TRAIN_SHARE: f64 = 8.0;

/// The trains change an answer only when their tails read this share of
/// it or less: streams that pass on a bucket read its burst rate, 1.11
/// to 2.5 times the token rate in the shaped cases measured (simulator
/// and namespaces), while a FIFO path whose two trains met a lull for
/// their first 200 KB showed a head too, with tails 0.3 and 3.6 % under
/// the streams' answer (`multirate` on the simulator's 1 % loss path,
/// seed 1: it was taken for a bucket, -4.5 %). A tail within a
/// twentieth of the answer does not contradict it.
const TAIL_UNDER_ANSWER: f64 = 0.95;

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
/// A first train that looks shaped with its tail up to this share of
/// the answer brings the second (`near`), and two that show a head with
/// tails that moved bound the answer at their mean up to it. Stamped one
/// by one, streams through a bucket that bursty cross traffic shares
/// read 12-32 % high and a train's tail 1.05-1.11 times that (2 Gbit/s
/// through 6 Gbit/s and 256 KB: 56 -> 86 of 100 answers holding the
/// truth against 1.05; no answer on the FIFO paths moved).
const NEAR_TAIL_SHARE: f64 = 1.2;

/// Two trains whose tails both arrived at this share of an exact answer
/// or less, where nothing confirmed a bucket, widen its range down to
/// the slower tail ([`super::SlowTrains`]). A FIFO path delivers a train
/// sent over its available bandwidth at no less than it, so such tails
/// mean heavier cross traffic while they ran, or a bucket that cross
/// traffic shares: with 2 Gbit/s of bursty cross traffic through an
/// 8 Gbit/s bucket of 256 KB behind a 10 Gbit/s sender (trains all but
/// head, read at 1.25 times their tails at best), 27 of 100 exact
/// answers had such tails, none holding the truth in its range, 10 once
/// widened; on eight FIFO paths (800 runs) 8 had them, 7 holding it, 8
/// once widened.
pub const SLOW_TAIL_SHARE: f64 = 0.9;

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

/// The check, with trains at twice `reference_bps` (the answer, or a
/// faster rate the path carried whole), which answer when their tails
/// are `tail_share` of the answer or less.
/// What one shaper check knows before its first train: the streams'
/// answer, the rate its trains go at and what a FIFO path could pass
/// there.
struct Check<'r> {
    report: &'r Report,
    answer: f64,
    top: f64,
    rate: f64,
    size_bytes: u32,
    tail_share: f64,
    /// The fastest a FIFO path with the answer's available bandwidth A
    /// and capacity C, at most the sender's top rate T, carries a train at
    /// r over A: r C / (r + C - A), at most r T / (r + T - A).
    fifo_most_bps: f64,
}

/// The first train (or the longer one sent in its place) and what it
/// leaves for the second.
struct FirstTrain {
    train: ShaperTrain,
    longer: bool,
    most_share: f64,
    whole_at_the_top: bool,
}

/// What the first train (or the longer one after it) left for the
/// second to decide.
struct AfterFirst {
    first_head: bool,
    longer: bool,
    near: bool,
    most_share: f64,
}

impl Check<'_> {
    /// The same answer, with the trains in its cost.
    fn unchanged(&self, s: &Session) -> Report {
        let r = self.report;
        Report {
            swung_bps: r.swung_bps,
            ..s.report(
                r.method,
                r.available_bandwidth_bps,
                r.bound,
                r.low_bps,
                r.high_bps,
                r.stop,
            )
        }
    }

    /// The streams just sent may have emptied the bucket: time for one
    /// as large as the train to refill at half the answer's rate (on the
    /// lab's 200 Mbit/s tbf with a 256 KB bucket a train sent at once
    /// showed 18 KB).
    fn refill_ns(&self, bytes: f64) -> i64 {
        (2.0 * bytes * 8e9 / self.answer.max(1.0)).min(MAX_REFILL_NS) as i64
    }

    fn faster_than_fifo(&self, bps: f64) -> bool {
        bps >= 1.05 * self.fifo_most_bps
    }

    fn head_seen(&self, t: &ShaperTrain) -> bool {
        t.looks_shaped() && t.shape.tail_rate_bps <= self.tail_share * self.answer
    }

    fn answers(&self, t: &ShaperTrain, most: f64) -> bool {
        self.head_seen(t) || t.tail_refutes(self.answer, self.rate, most)
    }

    /// Where the train goes at twice the answer, an eighth of it first
    /// (64 KB at least, 16 packets at least): on a FIFO path that one
    /// queues from its first packet and arrives no faster than the bound,
    /// and the full train, which would have queued half its bytes (256 KB
    /// into the lab's 100 KB queues, dropping other users' packets), is
    /// not sent. A bucket as large as the short train passes it whole,
    /// faster than the bound, if it had time to refill as for the full
    /// train (after a wait for the short train alone a 256 KB bucket the
    /// streams had emptied held less than it, and its mixed rate read
    /// under the bound); a smaller one shows a head. Under receive batches
    /// it must span eight of them to be read (at 10 Gbit/s it spans one or
    /// two 125 us batches, and the full train goes first as before).
    /// True where the short train ruled a bucket out.
    fn short_train_rules_out(
        &self,
        s: &mut Session,
        train_bytes: f64,
    ) -> Result<bool, StrategyError> {
        let short_bytes = train_bytes / SHORT_TRAIN_SHARE;
        let short_readable = s
            .streams
            .iter()
            .filter_map(|st| st.receive_batch_interval_ns())
            .max_by(f64::total_cmp)
            .is_none_or(|b| short_bytes * 8e9 / self.rate >= 8.0 * b);
        if self.rate < 2.0 * self.answer || !short_readable {
            return Ok(false);
        }
        let wait = self.refill_ns(train_bytes);
        let Some(short) = shaper_train(s, self.size_bytes, self.rate, short_bytes, wait)? else {
            return Ok(false);
        };
        // A sender that fell behind (a busy host) sent it too slowly for
        // a bucket to show: the full train decides then.
        let sent_as_asked = short.send_bps >= 0.9 * self.rate;
        // Its median gap too: a receiving host that stalled once in the
        // train slowed its first-to-last rate under the bound (`lab run
        // bucket256k` beside a busy loop: 1 of 15).
        let queued =
            !self.faster_than_fifo(short.recv_bps) && !self.faster_than_fifo(short.median_gap_bps);
        if sent_as_asked && !short.looks_shaped() && queued {
            // Only this verdict rules a bucket out for a later answer: a
            // full train that found none may have met a bucket the short
            // train had half emptied (`lab run bucket256k`: one early
            // check in ten found no bucket, and the run answered 316 for
            // 200 without the check after it).
            s.shaper_ruled_out_bps = Some(self.rate);
            return Ok(true);
        }
        Ok(false)
    }

    /// The first full train at the check's rate, and the longer one in
    /// its place where the first cannot answer but passed faster than a
    /// FIFO path allows (`None`: the session had no room for it).
    fn first_train(
        &self,
        s: &mut Session,
        train_bytes: &mut f64,
    ) -> Result<Option<FirstTrain>, StrategyError> {
        let (rate, top, answer) = (self.rate, self.top, self.answer);
        let wait = self.refill_ns(*train_bytes);
        let Some(mut first) = shaper_train(s, self.size_bytes, rate, *train_bytes, wait)? else {
            return Ok(None);
        };
        // Where a third train could follow the two (not after the longer
        // train, which goes without one), a tail nearer the answer counts.
        let third_rate_bps = third_train_rate(rate, first.shape.tail_rate_bps, top);
        let room = s.fits(((1.0 + SHARED_TRAIN_BYTES) * *train_bytes) as u64);
        let most_share = if room && third_rate_apart(rate, third_rate_bps) {
            HIDDEN_HEAD_CHECKED_SHARE
        } else {
            HIDDEN_HEAD_TAIL_SHARE
        };
        // A train at twice the answer that cannot answer itself but arrived
        // faster than a FIFO path with that answer could pass it
        // contradicts the answer. A bucket larger than the train's head
        // passes it at the send rate or at what the hosts forward: a train
        // four times as long is sent once (a 1 MB bucket at 200 Mbit/s
        // behind a 1 Gbit/s sender read +35 % on the simulator, +95 % and
        // "at least 1000" on namespaces, where trains at 630-850 Mbit/s
        // came out at 550-850: more than the 480-600 a FIFO allows; one
        // that showed a 66 KB head and then the hosts' 561 Mbit/s, over the
        // answer, could not answer and was not followed, 366 for 200). Not
        // where the train went at the top rate, under twice the answer: an
        // "at least" near the top and an idle moment pass it whole alike
        // (with those too, the single ON/OFF source's path sent the longer
        // train in 11 of 20 `auto` runs, 5.5 -> 11.5 MB median, and no
        // answer changed). But where the answer is "at least" the top rate
        // and the train passed whole at it, the longer train goes: a free
        // path and a bucket longer than the train look alike there, and the
        // answer would be the bucket's burst rate in silence (a 5 Gbit/s
        // shaper with a 1 MB bucket read "at least 8.8" at 10 Gbit/s).
        let whole_at_the_top = self.report.bound == Bound::AtLeast
            && rate >= 0.99 * top
            && first.recv_bps >= 0.9 * first.send_bps;
        let longer = !self.answers(&first, most_share)
            && ((rate >= 2.0 * answer && self.faster_than_fifo(first.recv_bps))
                || whole_at_the_top);
        if longer {
            *train_bytes *= LONGER_TRAIN;
            let wait = self.refill_ns(*train_bytes);
            let Some(longer) = shaper_train(s, self.size_bytes, rate, *train_bytes, wait)? else {
                return Ok(None);
            };
            first = longer;
        }
        let most_share = if longer {
            HIDDEN_HEAD_TAIL_SHARE
        } else {
            most_share
        };
        Ok(Some(FirstTrain {
            train: first,
            longer,
            most_share,
            whole_at_the_top,
        }))
    }

    /// The answer left as it was; where both tails arrived well under an
    /// exact answer, its range reaches down to the slower one.
    fn kept(&self, s: &Session, first: &ShaperTrain, second: &ShaperTrain) -> Report {
        let (t1, t2) = (first.shape.tail_rate_bps, second.shape.tail_rate_bps);
        let mut r = self.unchanged(s);
        let sent_as_asked = [first, second]
            .iter()
            .all(|t| t.send_bps >= 0.9 * self.rate);
        if r.bound == Bound::Exact && sent_as_asked && t1.max(t2) <= SLOW_TAIL_SHARE * self.answer {
            r.low_bps = r.low_bps.min(t1.min(t2));
            r.slow_trains = Some(super::session::SlowTrains {
                rate_bps: self.rate,
                tails_bps: [t1, t2],
            });
        }
        r
    }

    /// The verdict of the first two trains at one rate (and a third
    /// train's, where they leave it open).
    fn two_trains(
        &self,
        s: &mut Session,
        first: &ShaperTrain,
        second: &ShaperTrain,
        after: &AfterFirst,
    ) -> Result<Report, StrategyError> {
        let answer = self.answer;
        let (t1, t2) = (first.shape.tail_rate_bps, second.shape.tail_rate_bps);
        let spread = (t2 / t1 - 1.0).abs();
        let heads = after.first_head
            && second.looks_shaped()
            && heads_agree(first.shape.burst_bytes, second.shape.burst_bytes);
        let agrees =
            second.looks_shaped() || second.tail_refutes(answer, self.rate, after.most_share);
        if !agrees {
            return Ok(self.kept(s, first, second));
        }
        // Both trains showed a head, of sizes further apart than one bucket
        // refilled passes: cross traffic that moves through the bucket takes
        // a varying share of its burst (bursty 2 Gbit/s through a 6 Gbit/s
        // bucket of 256 KB: heads of 150-500 KB, up to 2.2 times apart, in 15
        // of 100 runs). Enough for the upper bound below, never for an exact
        // answer; not after the longer train, where an ON period of a source
        // whose peaks exceed the link leaves a head and a tail in each train
        // at the top rate alike.
        let heads_unequal = !heads
            && !after.longer
            && (first.looks_shaped() || second.looks_shaped())
            && first.shows_head()
            && second.shows_head();
        let tail = 0.5 * (t1 + t2);
        // Tails further apart than a burst of cross traffic moves one, where
        // both trains showed the same head: cross traffic that moves shares
        // the bucket (bursty cross traffic through a 6 Gbit/s bucket of
        // 256 KB: tails 10-15 % apart, both 0.7-0.8 of the streams' answer,
        // which the streams' bursts left at +70-100 %). Each tail keeps its
        // share of the token rate, over what was free while it ran
        // (`at_most_the_tails`), whether it lies under the streams' answer
        // or a little over it (`NEAR_TAIL_SHARE`). Tails more than steady
        // cross traffic leaves apart count as moving where both trains
        // showed a head.
        let moving = spread > 0.1 || (heads || heads_unequal) && spread > STEADY_TAILS;
        if moving {
            if (heads || heads_unequal) && tail <= NEAR_TAIL_SHARE * answer {
                s.count_check(first.id, first.truth);
                s.count_check(second.id, second.truth);
                return Ok(at_most_the_tails(
                    s,
                    self.report,
                    first,
                    second,
                    self.rate,
                    true,
                ));
            }
            return Ok(self.kept(s, first, second));
        }
        let share = if heads {
            self.tail_share
        } else {
            self.tail_share.min(after.most_share)
        };
        let near = after.near;
        if near && !(heads && spread <= STEADY_TAILS) || !near && tail > share * answer {
            return Ok(self.kept(s, first, second));
        }
        self.steady_tails(s, first, second, tail, spread, heads, after)
    }

    /// Whether a third train (or its absence) leaves the two trains'
    /// tail standing as a bucket's.
    fn third_train_tells_a_bucket(
        &self,
        third: Option<&ShaperTrain>,
        tail: f64,
        heads: bool,
    ) -> bool {
        // A link's own FIFO queue, with cross traffic heavier through the
        // trains than through the streams, reads like a bucket whose head hid
        // in a receive batch (the simulator's bursty 10 Gbit/s path: heads
        // of 3 to 13 packets, tails 0.79-0.90 of the answer and within 1 %
        // of each other, in 3 of 200 runs, answered 9-27 % low as `shaped`).
        // A bucket alone keeps its token rate at any rate over it; a FIFO
        // link delivers a slower train slower, r C / (r + X), and a tail read
        // in heavy cross traffic comes back up when it ends. (A small bucket
        // shared with cross traffic, whose tails do not refute the streams,
        // is read by `headless_shared_bucket`.)
        let moved = third.is_some_and(|t| (t.shape.tail_rate_bps / tail - 1.0).abs() > FLAT_TAILS);
        // A bucket shared with steady cross traffic delivers a slower train
        // slower and a faster one faster (r R / (r + X) grows with r), as a
        // FIFO link does: a third train whose tail moved the other way met
        // other cross traffic than the first two, and neither their tail nor
        // a line through it stands (the single ON/OFF source: two trains at
        // 10 Gbit/s that met one ON period each, heads of 700-850 KB, tails
        // 2.88; a third at 6 after it, 5.99 and no head). The third train
        // goes faster where the sender can (the lab's 200 Mbit/s tbf: 370,
        // then 620 Mbit/s).
        if third.is_some_and(|t| {
            let moved_by = t.shape.tail_rate_bps / tail - 1.0;
            moved_by * (t.send_bps - self.rate).signum() < -FLAT_TAILS
        }) {
            return false;
        }
        // Without a head only a third train proves a bucket, and only one a
        // FIFO link would have moved clearly: cross traffic X that left the
        // tail at r C / (r + X) (C at most the sender's top rate) moves it at
        // the third train's rate by `fifo_tail_move`. A third train too near
        // the first two's rate, or none (no room, or no rate between the
        // tail and the top), cannot tell a bucket from a long heavy period
        // of cross traffic: the simulator's single smoothed source (a
        // 10 Gbit/s path, trains at the top rate, tails at 0.87 of the
        // streams' answer with none sent) said `shaped` 7-13 % low in 5 of
        // 200 runs.
        let telling = third.is_some_and(|t| {
            fifo_tail_move(self.rate, tail, t.send_bps, self.top) >= 2.0 * FLAT_TAILS
        });
        heads || !moved && telling
    }

    /// Two trains whose tails agree: a third train at a lower rate tells
    /// a bucket shared with cross traffic from a FIFO link, and the line
    /// through the tails takes the cross traffic out.
    #[allow(clippy::too_many_arguments)]
    fn steady_tails(
        &self,
        s: &mut Session,
        first: &ShaperTrain,
        second: &ShaperTrain,
        tail: f64,
        spread: f64,
        heads: bool,
        after: &AfterFirst,
    ) -> Result<Report, StrategyError> {
        let rate = self.rate;
        // Cross traffic that shares the bucket: where the two tails agree
        // closely (steady cross traffic), a third train at a lower rate. And
        // where no head showed, always, to tell a bucket from a FIFO link
        // (below). Not after the longer train: a bucket longer than a train
        // is rare, and its third train would be twice that long (12 MB at
        // 10 Gbit/s).
        let third = if !after.longer && (spread <= STEADY_TAILS || !heads) {
            let rate3 = third_train_rate(rate, tail, self.top);
            let bytes3 = third_train_bytes(first, second, tail, rate3);
            third_train(
                s,
                self.size_bytes,
                rate,
                rate3,
                bytes3,
                self.refill_ns(bytes3),
            )?
        } else {
            None
        };
        if !self.third_train_tells_a_bucket(third.as_ref(), tail, heads) {
            return Ok(self.kept(s, first, second));
        }
        // Steady tails and a third train: the line through them takes out
        // the cross traffic that shares the bucket, with a head seen or
        // without (a tail that moved under 5 % still carries it: 1 Gbit/s of
        // CBR through a 7 Gbit/s bucket of 64 KB read 6.43 for 6 from the
        // tails alone, +7.0 % median over 40 seeds, and 1.5 % with the line;
        // 500 Mbit/s through 5 Gbit/s, 5.7 -> 0.2 %).
        let shared = if spread <= STEADY_TAILS {
            third
                .as_ref()
                .and_then(|t| shared_bucket(rate, tail, t.send_bps, t.shape.tail_rate_bps))
        } else {
            None
        };
        if after.near
            && shared.is_none_or(|(token, cross)| token - cross >= TAIL_UNDER_ANSWER * self.answer)
        {
            return Ok(self.kept(s, first, second));
        }
        // The answer is now the trains': their moments count in the truth.
        s.count_check(first.id, first.truth);
        s.count_check(second.id, second.truth);
        if let (Some(t), Some(_)) = (&third, shared) {
            s.count_check(t.id, t.truth);
        }
        // Tails further apart than steady cross traffic leaves them, with no
        // line drawn: cross traffic that moves goes through the bucket.
        if shared.is_none() && spread > STEADY_TAILS {
            return Ok(at_most_the_tails(
                s,
                self.report,
                first,
                second,
                rate,
                heads,
            ));
        }
        let answer_bps = shared.map_or(tail, |(token, cross)| token - cross);
        let (low_bps, high_bps) = match (&third, shared) {
            (Some(t), Some(_)) => line_range(rate, tail, t.send_bps, t.shape.tail_rate_bps),
            _ => (0.95 * answer_bps, 1.05 * answer_bps),
        };
        Ok(Report {
            shaper: Some(seen_in_two_trains(
                self.report,
                first,
                second,
                tail,
                heads,
                shared,
            )),
            ..s.report(
                self.report.method,
                answer_bps,
                Bound::Exact,
                low_bps,
                high_bps,
                Stop::Shaped,
            )
        })
    }
}

fn shaper_check(
    s: &mut Session,
    report: Report,
    reference_bps: f64,
    size_bytes: u32,
    tail_share: f64,
) -> Result<Report, StrategyError> {
    if !matches!(report.bound, Bound::Exact | Bound::AtLeast) {
        return Ok(report);
    }
    // Twice the answer, at most the top rate: a bucket the answer
    // overstates passes a head of at most twice its bytes at that rate,
    // and a FIFO path queues one answer's worth of the train, not the
    // sender's whole rate.
    let answer = report.available_bandwidth_bps;
    let top = s.max_rate_bps();
    let rate = (2.0 * reference_bps.max(answer)).min(top);
    let c = Check {
        report: &report,
        answer,
        top,
        rate,
        size_bytes,
        tail_share,
        fifo_most_bps: rate * top / (rate + top - answer).max(1.0),
    };
    let mut train_bytes = shaper_train_bytes(rate);
    if c.short_train_rules_out(s, train_bytes)? {
        return Ok(c.unchanged(s));
    }
    let Some(FirstTrain {
        train: first,
        longer,
        most_share,
        whole_at_the_top,
    }) = c.first_train(s, &mut train_bytes)?
    else {
        return Ok(c.unchanged(s));
    };
    // A head whose tail lies near the streams' answer: a bucket that
    // cross traffic shares leaves trains and streams alike its share,
    // r R / (r + X), over R - X (2 Gbit/s of CBR through a 6 Gbit/s
    // bucket of 256 KB, stamped one by one: streams 5.05, tails 5.0, for
    // 4; every seed). Only the line through a third train's tail can
    // contradict the streams there.
    let answered = c.answers(&first, most_share);
    let near = !longer
        && !answered
        && first.looks_shaped()
        && first.shape.tail_rate_bps <= NEAR_TAIL_SHARE * answer;
    if !answered && !near {
        if !longer {
            let wait = c.refill_ns(train_bytes);
            if let Some(r) = headless_shared_bucket(s, &report, &first, rate, train_bytes, wait)? {
                return Ok(r);
            }
        }
        let mut r = c.unchanged(s);
        if whole_at_the_top && first.recv_bps >= 0.9 * first.send_bps {
            r.whole_at_top_bytes = Some(first.bytes);
        }
        return Ok(r);
    }
    let first_head = c.head_seen(&first) || near;
    // Twice what the bucket needs to refill at the token rate; where
    // no head showed, as long as before the first, so that the two
    // trains meet cross traffic apart.
    let wait = if first_head {
        (2.0 * first.shape.burst_bytes * 8e9 / first.shape.tail_rate_bps) as i64
    } else {
        c.refill_ns(train_bytes)
    };
    let Some(second) = shaper_train(s, size_bytes, rate, train_bytes, wait)? else {
        return Ok(c.unchanged(s));
    };
    let after = AfterFirst {
        first_head,
        longer,
        near,
        most_share,
    };
    c.two_trains(s, &first, &second, &after)
}

/// The range of the line's answer R - X through tails `tail1_bps` at
/// `rate1_bps` and `tail2_bps` at `rate2_bps` ([`shared_bucket`]): what
/// it answers with each tail moved by [`STEADY_TAILS`] either way, and
/// at least 5 % each side. The line is steep in the tails: on the lab's
/// 200 Mbit/s tbf with 60 Mbit/s of CBR through its bucket (trains at
/// 371 and 619 Mbit/s, tails near 173 and 182) a third tail 1.5-4 % off
/// moved the answer from 140 to 107-155, and 4 of 20 answers' ranges
/// of +-5 % missed the truth.
fn line_range(rate1_bps: f64, tail1_bps: f64, rate2_bps: f64, tail2_bps: f64) -> (f64, f64) {
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
fn at_most_the_tails(
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
fn seen_in_two_trains(
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
fn least_free_bps(rate_bps: f64, tail_bps: f64) -> f64 {
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
fn headless_shared_bucket(
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
    let Some(batch_ns) = first.batch_ns else {
        return Ok(None);
    };
    let sent_as_asked = |t: &ShaperTrain| t.send_bps >= 0.9 * rate_bps;
    if first.looks_shaped()
        || !sent_as_asked(first)
        || rate_bps <= FIRST_RATE_OVER_ANSWER * answer
        || rate_bps <= tail
        || tail < HIDDEN_HEAD_TAIL_SHARE * answer
    {
        return Ok(None);
    }
    let capacity_bps = narrow_link_bps(rate_bps, tail, answer);
    if capacity_bps > NARROW_SHARE * top {
        return Ok(None);
    }
    // Three more trains may follow: only where two take a twentieth of
    // the budget or less (not the 15 MB trains of 100 Gbit/s).
    if 2.0 * train_bytes > s.budget.max_bytes as f64 / 20.0 {
        return Ok(None);
    }
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
    Ok(Some(Report {
        shaper: Some(ShaperSeen {
            streams_bps: answer,
            streams_bound: report.bound,
            head_bps: first.shape.head_rate_bps.unwrap_or(tail),
            tail_bps: tail,
            bucket_bytes: 0.5 * (third.shape.burst_bytes + fourth.shape.burst_bytes),
            train_bytes: first.bytes,
            head_seen: false,
            shared_bucket: Some((token, cross)),
            tail_spread: (t2 / tail - 1.0).abs(),
        }),
        ..s.report(
            report.method,
            available,
            Bound::Exact,
            low_bps,
            high_bps,
            Stop::Shaped,
        )
    }))
}

/// The capacity C of a FIFO link with `available_bps` A free that
/// delivers a train sent at r over A at `tail_bps` t: t = r C / (r + C -
/// A) gives C = t (r - A) / (r - t).
fn narrow_link_bps(rate_bps: f64, tail_bps: f64, available_bps: f64) -> f64 {
    tail_bps * (rate_bps - available_bps) / (rate_bps - tail_bps)
}

/// What a FIFO link of `capacity_bps` C with `available_bps` A free
/// delivers a train sent at `rate_bps` r over A at: r C / (r + C - A).
fn fifo_delivers_bps(rate_bps: f64, capacity_bps: f64, available_bps: f64) -> f64 {
    rate_bps * capacity_bps / (rate_bps + capacity_bps - available_bps)
}

/// A first train's tail that puts a FIFO link's capacity under this
/// share of the sender's top rate ([`headless_shared_bucket`]). The
/// shared buckets above put it at 0.48-0.57 of a 10 Gbit/s sender, a
/// 5 Gbit/s link at 0.49; on the simulator's default path (a 10 Gbit/s
/// link with bursty cross traffic) a train that met heavy traffic put it
/// under 0.8 in about a third of 40 runs, each of which paid a train
/// more, and under 0.7 in some; under 0.6 in none.
const NARROW_SHARE: f64 = 0.6;
/// A third train's tail this share or more under what a narrow link
/// with the streams' answer free would deliver ([`headless_shared_bucket`]):
/// 2 Gbit/s of CBR through a 6 Gbit/s bucket, 3.1 to 12 % under it
/// (32 to 128 KB buckets); narrow FIFO links with CBR, 1.3 % under to
/// 0.1 % over.
const NARROW_LINK_MISS: f64 = 0.02;
/// Bytes ahead of the tail, in packets, that count as a head in the
/// slower trains of [`headless_shared_bucket`]: 2 Gbit/s of CBR through
/// a 6 Gbit/s bucket left 15-88 KB ahead in trains at 5.6 Gbit/s (32 to
/// 128 KB buckets), a 2 Gbit/s FIFO link 1.2 KB.
const SLOW_HEAD_PACKETS: f64 = 1.5;
/// The first train must go this much faster than the answer for its
/// tail to say anything of the capacity.
const FIRST_RATE_OVER_ANSWER: f64 = 1.1;

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
fn third_train_rate(rate_bps: f64, tail_bps: f64, top_bps: f64) -> f64 {
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
fn third_train_bytes(
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
fn head_and_tail_bytes(
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
fn third_train(
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
const HEADS_AGREE: f64 = 1.5;

/// Whether two heads of `a_bytes` and `b_bytes` are one bucket's.
fn heads_agree(a_bytes: f64, b_bytes: f64) -> bool {
    a_bytes.max(b_bytes) <= HEADS_AGREE * a_bytes.min(b_bytes)
}

/// Two trains' tails within this share of each other: the cross traffic
/// was steady enough for a third train to fit it.
const STEADY_TAILS: f64 = 0.02;
/// The third train goes at the first two's rate over this share where
/// the sender can, else at this share of it and over
/// [`SHARED_OVER_TAIL`] times their tail (the bucket must still empty
/// under it) ([`third_train_rate`]), with its head and the first train's
/// tail, at most [`SHARED_TRAIN_BYTES`] times the first train's bytes
/// ([`third_train_bytes`]: a slower train's head is longer).
const SHARED_SECOND_RATE: f64 = 0.6;
const SHARED_OVER_TAIL: f64 = 1.15;
const SHARED_TRAIN_BYTES: f64 = 2.0;
/// Cross traffic under this share of the token rate is none.
const SHARED_LEAST_CROSS: f64 = 0.05;
/// Where no head showed, a third train at another rate whose tail read
/// more than this share off the first two's: a bucket alone keeps its
/// token rate whatever the train's (the simulator's 5 Gbit/s tbf with a
/// 64 KB bucket: the same tail to 1 %), where a FIFO link delivers a
/// slower train slower, r C / (r + X) (at 10 Gbit/s with 2 of cross
/// traffic, a train at 6 a tenth slower than one at 10), and a tail read
/// while cross traffic ran heavy comes back up with it.
const FLAT_TAILS: f64 = 0.05;
/// A third train within this share of the first two's rate is not sent.
const THIRD_RATE_APART: f64 = 0.1;

/// How far a FIFO link of capacity `capacity_bps` would move a train's
/// tail from `tail_bps` at `rate_bps` to one at `rate3_bps`, as a share:
/// the first gives the cross traffic X = r C / tail - r, and a train at
/// r3 arrives at r3 C / (r3 + X).
fn fifo_tail_move(rate_bps: f64, tail_bps: f64, rate3_bps: f64, capacity_bps: f64) -> f64 {
    let cross = (rate_bps * capacity_bps / tail_bps.max(1.0) - rate_bps).max(0.0);
    let tail3 = rate3_bps * capacity_bps / (rate3_bps + cross);
    (tail3 / tail_bps.max(1.0) - 1.0).abs()
}

/// Whether a third train at `rate3_bps` lies far enough from the first
/// two's `rate_bps` to be sent ([`THIRD_RATE_APART`]).
fn third_rate_apart(rate_bps: f64, rate3_bps: f64) -> bool {
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
fn tails_line(
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

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_core::stream::ProbePacket;

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
