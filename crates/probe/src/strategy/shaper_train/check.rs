//! The shaper check's verdict: a short train first, then one or two full
//! trains at twice the answer (a longer one where the first passed faster
//! than a FIFO path allows) and a third at another rate, read against
//! what a FIFO path with the answer's available bandwidth could pass.

use super::super::session::{Report, Session, SmallHead, Stop, StrategyError};
use super::trains::*;
use tightlink_core::Bound;

/// A first train that looks shaped with its tail up to this share of
/// the answer brings the second (`near`), and two that show a head with
/// tails that moved bound the answer at their mean up to it. Stamped one
/// by one, streams through a bucket that bursty cross traffic shares
/// read 12-32 % high and a train's tail 1.05-1.11 times that (2 Gbit/s
/// through 6 Gbit/s and 256 KB: 56 -> 86 of 100 answers holding the
/// truth against 1.05; no answer on the FIFO paths moved).
const NEAR_TAIL_SHARE: f64 = 1.2;

/// Fewest packets ahead of a short train's tail that
/// [`small_head`] reads as a head: timing noise on a FIFO path
/// puts one or two there.
const SMALL_HEAD_LEAST_PACKETS: f64 = 4.0;

/// ... and a tail at this share of the answer or less: nearer, it is the
/// shaper's and the stamps' noise (with any tail under the answer, 36 of
/// the lab's 210 adversity runs showed a small head, most of them with
/// answers within 1 % of the truth).
const SMALL_HEAD_TAIL_SHARE: f64 = 0.97;

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
            busy: r.busy,
            standing_queue: r.standing_queue,
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
    /// `Some` where the short train ruled a bucket out, with the small
    /// head it showed where its tail came in under the answer.
    fn short_train_rules_out(
        &self,
        s: &mut Session,
        train_bytes: f64,
    ) -> Result<Option<Option<SmallHead>>, StrategyError> {
        let short_bytes = train_bytes / SHORT_TRAIN_SHARE;
        let short_readable = s
            .streams
            .iter()
            .filter_map(|st| st.receive_batch_interval_ns())
            .max_by(f64::total_cmp)
            .is_none_or(|b| short_bytes * 8e9 / self.rate >= 8.0 * b);
        if self.rate < 2.0 * self.answer || !short_readable {
            return Ok(None);
        }
        let wait = self.refill_ns(train_bytes);
        let Some(short) = shaper_train(s, self.size_bytes, self.rate, short_bytes, wait)? else {
            return Ok(None);
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
            return Ok(Some(small_head(&short, self.answer)));
        }
        Ok(None)
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
            r.slow_trains = Some(super::super::session::SlowTrains {
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

pub(super) fn shaper_check(
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
    if let Some(small_head) = c.short_train_rules_out(s, train_bytes)? {
        let mut r = c.unchanged(s);
        if let Some(h) = small_head {
            r.low_bps = r.low_bps.min(h.tail_bps);
            r.small_head = Some(h);
        }
        return Ok(r);
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

/// A head of [`SMALL_HEAD_LEAST_PACKETS`] or more at about the rate sent,
/// under what [`looks_shaped`] takes for a bucket, before a tail
/// [`SMALL_HEAD_TAIL_SHARE`] of `answer_bps` or less. On the lab's 200 Mbit/s tbf with a 12 KB bucket a short
/// train showed 8 packets at the rate sent, then 200 Mbit/s, where the
/// streams read 221 (their 48 KB sub-stream at 221 passes such a bucket
/// unqueued).
fn small_head(t: &ShaperTrain, answer_bps: f64) -> Option<SmallHead> {
    let sh = &t.shape;
    let head = head_at_send_rate(sh, t.send_bps, SMALL_HEAD_LEAST_PACKETS);
    let slow = sh.tail_rate_bps <= SMALL_HEAD_TAIL_SHARE * answer_bps;
    (head && slow).then_some(SmallHead {
        rate_bps: t.send_bps,
        head_packets: sh.burst_bytes / f64::from(sh.size_bytes.max(1)),
        tail_bps: sh.tail_rate_bps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_core::capacity::shaper::TrainShape;
    use tightlink_core::channel::{Channel, ChannelError, ChannelInfo, Probed, StreamRequest};

    /// A channel never probed: a session to build reports from.
    struct Unprobed;

    impl Channel for Unprobed {
        fn probe(&mut self, _: &StreamRequest) -> Result<Probed, ChannelError> {
            Err(ChannelError::Io("not probed".into()))
        }
        fn info(&self) -> ChannelInfo {
            ChannelInfo::without_limits("unprobed", 1e9)
        }
        fn elapsed_ns(&self) -> i64 {
            0
        }
    }

    /// Trains that leave the answer keep what the streams said of it:
    /// the swing, and a queue that stood under their lowest rates.
    #[test]
    fn an_unchanged_answer_keeps_what_the_streams_said() {
        let mut channel = Unprobed;
        let mut progress = |_: f64| {};
        let s = Session::start(&mut channel, crate::Budget::default(), &mut progress).unwrap();
        let mut r = s.report(
            super::super::super::Method::Multirate,
            75e6,
            Bound::Exact,
            60e6,
            90e6,
            Stop::Swings,
        );
        r.swung_bps = Some((60e6, 90e6));
        r.standing_queue = Some(tightlink_core::decision::standing::StandingQueue {
            stood: 8,
            streams: 8,
            median_depth_ns: 1.7e6,
        });
        let c = Check {
            report: &r,
            answer: 75e6,
            top: 1e9,
            rate: 150e6,
            size_bytes: 1514,
            tail_share: 0.97,
            fifo_most_bps: 1e9,
        };
        let u = c.unchanged(&s);
        assert_eq!(
            (u.available_bandwidth_bps, u.bound, u.stop),
            (75e6, Bound::Exact, Stop::Swings)
        );
        assert_eq!((u.low_bps, u.high_bps), (60e6, 90e6));
        assert_eq!(u.swung_bps, r.swung_bps);
        assert_eq!(u.standing_queue, r.standing_queue);
    }

    /// A short train sent at 442 Mbit/s of 1514-byte packets whose tail
    /// came at `tail_bps` after `ahead` packets at `head_bps`.
    fn short_train(tail_bps: f64, head_bps: f64, ahead: f64) -> ShaperTrain {
        ShaperTrain {
            shape: TrainShape {
                tail_rate_bps: tail_bps,
                head_rate_bps: Some(head_bps),
                burst_bytes: ahead * 1514.0,
                size_bytes: 1514,
                tail_jitter_ns: 0.0,
                tail_batched: 0.0,
            },
            send_bps: 442e6,
            recv_bps: 239e6,
            median_gap_bps: 200e6,
            bytes: 65_102,
            truth: None,
            id: 0,
            batch_ns: None,
        }
    }

    /// The lab's case: 8 packets at 430 Mbit/s, then 200, under an answer
    /// of 221: the range reaches down to 200. Three packets ahead is
    /// timing noise; a head at 250 (under 0.6 of 442) is no head; a tail
    /// at 216 (0.977 of the answer) is within its noise; 16 packets
    /// ahead looks shaped, and the check's other trains read it.
    #[test]
    fn small_heads_by_hand() {
        let h = small_head(&short_train(200e6, 430e6, 8.0), 221e6).expect("a small head");
        assert_eq!(
            (h.rate_bps, h.head_packets, h.tail_bps),
            (442e6, 8.0, 200e6)
        );
        assert_eq!(small_head(&short_train(200e6, 430e6, 3.0), 221e6), None);
        assert_eq!(small_head(&short_train(200e6, 250e6, 8.0), 221e6), None);
        assert_eq!(small_head(&short_train(216e6, 430e6, 8.0), 221e6), None);
        assert!(small_head(&short_train(214e6, 430e6, 8.0), 221e6).is_some());
        assert!(short_train(200e6, 430e6, 16.0).looks_shaped());
        assert!(!short_train(200e6, 430e6, 8.0).looks_shaped());
    }
}
