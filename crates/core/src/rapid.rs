//! Rate control driven by the estimates (\[BASS\] section VII, after
//! RAPID: Konda and Kaur, "RAPID: Shrinking the Congestion-Control
//! Timescale", IEEE INFOCOM 2009). A bulk sender sends all its data as
//! back-to-back logical multi-rate probe streams; when the receiver's
//! timestamps of a stream come back, the multi-rate estimator reads the
//! available bandwidth from them, and the streams sent from then on
//! average that rate. Pure: the caller says when it is and what came back.
//!
//! The rules and where they come from:
//! - Streams of `sub_streams` x `per_rate` packets at rates spread over
//!   +-`range` around a centre, increasing through the stream (\[BASS\]
//!   VII: Range 50 %, 4 rates of 32 segments).
//! - A stream's average rate (its bytes over its duration) is the current
//!   rate: the path is never loaded above the estimate on average (RAPID).
//!   Equal packet counts per rate make the average the rates' harmonic
//!   mean, so the centre is raised to put it there (ours).
//! - Estimator: the multi-rate estimate after BASS multi-pass smoothing
//!   (\[BASS\] VII-h), or the same "consistently exceed" rule on the raw
//!   gaps (`Raw`, the estimator without BASS of VII-g).
//! - Next rate: an exact estimate is the rate; "at least r" raises the
//!   rate to r (the stream saw no queue up to its top rate); "at most r"
//!   sets it to 0.9 r, below the lowest rate that built a queue (ours:
//!   the queue it built must drain); no answer keeps the rate (ours).
//! - Start-up (ours, in RAPID's spirit of finding the rate within a few
//!   round trips): until the first exact or "at most" answer, streams
//!   spread their rates by `startup_spread` from one sub-stream to the
//!   next (0.5, 1, 2, 4 times a base at the default 2), so each round trip
//!   can raise the rate up to 4 times.
//! - Loss (ours): a stream that lost packets to congestion caps the next
//!   rate at `loss_factor` times the rate it was sent at, at most once per
//!   round trip (streams sent before the last cut was applied do not cut
//!   again, as TCP reacts once per window), and the cap holds until a
//!   stream sent after the cut reports: the estimates of the streams in
//!   flight read the path as the cut found it, and when they set the rate
//!   the cut lasted one stream (on a 200 Mbit/s namespace hop, thirty
//!   streams in a row went at 224-289 Mbit/s, each losing 8 %, while the
//!   feedback lagged). A loss is congestion unless
//!   the estimate says no queue was building where it happened: a stream
//!   that read "at least" (no queue at any rate), or whose losses neither
//!   grow with the rate nor fall above an exact estimate, lost packets at
//!   random (a bad link), which a rate cut would not cure.
//! - Idle or application-limited (ours): after `idle_restart_ns` without
//!   sending, the estimate is stale; the next streams start up again from
//!   the last rate.
//! - Standing queue (ours): a stream whose least one-way delay is more
//!   than `standing_queue_ns` above the least any stream has seen crossed
//!   a queue that never emptied, so the path is loaded beyond what it
//!   carries whatever the gaps said (batched receive stamps after a busy
//!   queue read high); the next rate is at most `standing_queue_factor`
//!   times the rate it was sent at. Without it, Rapid kept the lab's
//!   30 ms queue full (3 % loss); with it, 0.02 %.
//! - Floor and ceiling: the rate stays within `floor_bps ..= max_bps`.

use std::collections::BTreeMap;

use crate::analysis::{analyze, loss_grows_with_rate, AnalysisParams, Method};
use crate::decision::multirate::estimate_from_smoothed;
use crate::decision::Bound;
use crate::schedule::{multi_rate_schedule, rates_around};
use crate::smoothing::multipass::Multipass;
use crate::stream::{ProbePacket, ProbeStream, StreamKind};

/// What reads a stream's timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RapidEstimator {
    /// BASS multi-pass smoothing, then the multi-rate estimate.
    Bass,
    /// The multi-rate rule on unsmoothed gaps.
    Raw,
}

impl RapidEstimator {
    pub fn name(self) -> &'static str {
        match self {
            RapidEstimator::Bass => "rapid",
            RapidEstimator::Raw => "rapid-raw",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct RapidParams {
    pub range: f64,
    pub sub_streams: usize,
    pub per_rate: usize,
    /// Size of every data packet, at the layer rates are counted on.
    pub packet_bytes: u32,
    pub estimator: RapidEstimator,
    pub start_bps: f64,
    pub floor_bps: f64,
    pub max_bps: f64,
    pub startup_spread: f64,
    pub loss_factor: f64,
    pub idle_restart_ns: i64,
    /// A stream whose least one-way delay is this much above the least
    /// ever seen crossed a standing queue...
    pub standing_queue_ns: i64,
    /// ...and the next rate is at most this times the rate it was sent at.
    pub standing_queue_factor: f64,
    pub analysis: AnalysisParams,
}

impl RapidParams {
    /// The paper's streams (Range 50 %, 4 x 32) for a sender whose link
    /// runs at `max_bps`, starting at a hundredth of it, or (ours) fast
    /// enough that the first stream lasts at most 100 ms, never above
    /// half of `max_bps`: a hundredth of a 100 Mbit/s ceiling sends
    /// 128 jumbo packets in 9 s, and a short transfer never leaves
    /// start-up.
    pub fn paper(max_bps: f64, packet_bytes: u32, estimator: RapidEstimator) -> Self {
        let first_stream_bits = (4 * 32) as f64 * packet_bytes as f64 * 8.0;
        let start_bps = (max_bps / 100.0)
            .max(first_stream_bits / 0.1)
            .min(max_bps / 2.0);
        RapidParams {
            range: 0.5,
            sub_streams: 4,
            per_rate: 32,
            packet_bytes,
            estimator,
            start_bps,
            floor_bps: max_bps / 1000.0,
            max_bps,
            startup_spread: 2.0,
            loss_factor: 0.7,
            idle_restart_ns: 200_000_000,
            standing_queue_ns: 250_000,
            standing_queue_factor: 0.9,
            analysis: AnalysisParams::default(),
        }
    }
}

/// Which packet of which stream a data packet is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketTag {
    pub stream: u64,
    pub index: u32,
}

/// What one stream's feedback did to the rate.
#[derive(Debug, Clone, PartialEq)]
pub struct RapidUpdate {
    pub stream: u64,
    /// When the last of its feedback came, on the sender's clock.
    pub at_ns: i64,
    /// The rate it was sent at on average.
    pub sent_bps: f64,
    pub abw_bps: Option<f64>,
    pub bound: Bound,
    pub lost: usize,
    /// The rate from then on.
    pub rate_bps: f64,
}

/// The stream being sent: its id and its next packet.
#[derive(Debug, Clone)]
struct Plan {
    id: u64,
    next: usize,
}

/// A stream sent (or being sent) and waiting for its feedback.
#[derive(Debug, Clone)]
struct Pending {
    avg_bps: f64,
    /// Send times (sender's clock): the schedule, shifted on from a late
    /// send.
    send_ns: Vec<i64>,
    /// The schedule as planned, before any late send shifted it.
    plan_ns: Vec<i64>,
    recv_ns: Vec<Option<i64>>,
    known: Vec<bool>,
    left: usize,
}

#[derive(Debug, Clone)]
pub struct RapidController {
    params: RapidParams,
    rate_bps: f64,
    starting: bool,
    plan: Option<Plan>,
    pending: BTreeMap<u64, Pending>,
    next_id: u64,
    /// Streams with ids below this do not cut the rate for loss again...
    cut_from_stream: u64,
    /// ...nor lift it over the last cut's rate.
    cut_bps: Option<f64>,
    last_send_ns: Option<i64>,
    /// The least one-way delay any stream has seen (receiver's clock minus
    /// sender's: only differences count): the path with no queue.
    base_owd_ns: Option<i64>,
}

impl RapidController {
    pub fn new(params: RapidParams) -> Self {
        let rate_bps = params.start_bps.clamp(params.floor_bps, params.max_bps);
        RapidController {
            params,
            rate_bps,
            starting: true,
            plan: None,
            pending: BTreeMap::new(),
            next_id: 0,
            cut_from_stream: 0,
            cut_bps: None,
            last_send_ns: None,
            base_owd_ns: None,
        }
    }

    pub fn params(&self) -> &RapidParams {
        &self.params
    }

    /// The average rate the streams sent from now on get.
    pub fn rate_bps(&self) -> f64 {
        self.rate_bps
    }

    /// Whether the controller is still starting up (wide streams).
    pub fn starting(&self) -> bool {
        self.starting
    }

    /// The sub-stream rates of a stream averaging `avg_bps`.
    pub fn stream_rates(&self, avg_bps: f64) -> Vec<f64> {
        let p = &self.params;
        let n = p.sub_streams.max(1);
        let shape: Vec<f64> = if self.starting {
            (0..n)
                .map(|k| p.startup_spread.powi(k as i32 - 1))
                .collect()
        } else {
            rates_around(1.0, p.range, n)
        };
        // Harmonic mean of the shape: equal bytes at each rate.
        let harmonic = n as f64 / shape.iter().map(|r| 1.0 / r).sum::<f64>();
        let top = p.max_bps;
        shape
            .iter()
            .map(|r| (r * avg_bps / harmonic).min(top))
            .collect()
    }

    /// When the next data packet is due (sender's clock, never before
    /// `now_ns`): the next packet of the current stream, or the first of a
    /// new one at the current rate. Call [`RapidController::sent`] when it
    /// has left.
    pub fn next_send_ns(&mut self, now_ns: i64) -> i64 {
        if let Some(last) = self.last_send_ns {
            if now_ns - last > self.params.idle_restart_ns && !self.starting {
                self.starting = true;
                self.abandon_plan();
            }
        }
        let p = match self.current() {
            Some(p) => p,
            None => self.plan_stream(now_ns),
        };
        self.pending[&p.id].send_ns[p.next].max(now_ns)
    }

    /// The application has nothing to send now: the stream being sent ends
    /// here, and its unsent packets are not waited for. The next packet
    /// starts a new stream (a receiver that closes streams on a pause
    /// never sees one resume).
    pub fn end_stream(&mut self) {
        self.abandon_plan();
    }

    /// Whether the next packet continues a stream already planned (it
    /// starts a new one otherwise).
    pub fn mid_stream(&self) -> bool {
        self.current().is_some()
    }

    /// Streams from the oldest whose feedback is not all in through the
    /// last planned: how far the sender is ahead of the receiver's
    /// reports, in streams (0 when every stream is accounted for).
    pub fn streams_awaiting_feedback(&self) -> u64 {
        self.pending
            .first_key_value()
            .map_or(0, |(&oldest, _)| self.next_id - oldest)
    }

    /// The stream being sent, unless it has no packet left.
    fn current(&self) -> Option<Plan> {
        let p = self.plan.clone()?;
        (p.next < self.pending.get(&p.id)?.send_ns.len()).then_some(p)
    }

    /// A stream cut short (idle): its unsent packets are not waited for.
    fn abandon_plan(&mut self) {
        let Some(p) = self.plan.take() else { return };
        if let Some(q) = self.pending.get_mut(&p.id) {
            let unsent = q.send_ns.len().saturating_sub(p.next);
            q.send_ns.truncate(p.next);
            q.plan_ns.truncate(p.next);
            q.recv_ns.truncate(p.next);
            q.known.truncate(p.next);
            q.left -= unsent;
            if q.left == 0 {
                self.pending.remove(&p.id);
            }
        }
    }

    /// Plans the next stream at the current rate, starting one gap at its
    /// first rate after the last send (or now).
    fn plan_stream(&mut self, now_ns: i64) -> Plan {
        let rates = self.stream_rates(self.rate_bps);
        let offsets = multi_rate_schedule(&rates, self.params.per_rate, self.params.packet_bytes);
        let first_gap_ns = (self.params.packet_bytes as f64 * 8e9 / rates[0]).round() as i64;
        let start = match self.last_send_ns {
            Some(l) => (l + first_gap_ns).max(now_ns),
            None => now_ns,
        };
        let o0 = offsets.first().copied().unwrap_or(0);
        let send_ns: Vec<i64> = offsets.iter().map(|o| start + o - o0).collect();
        let id = self.next_id;
        self.next_id += 1;
        let n = send_ns.len();
        let span = (send_ns[n - 1] - send_ns[0]).max(1) as f64;
        // Bytes after the first packet over the span: the rate the
        // stream loads the path with.
        let avg_bps = (n - 1) as f64 * self.params.packet_bytes as f64 * 8e9 / span;
        self.pending.insert(
            id,
            Pending {
                avg_bps,
                plan_ns: send_ns.clone(),
                send_ns,
                recv_ns: vec![None; n],
                known: vec![false; n],
                left: n,
            },
        );
        let p = Plan { id, next: 0 };
        self.plan = Some(p.clone());
        p
    }

    /// The packet due at [`RapidController::next_send_ns`] has left at
    /// `at_ns`; its tag comes back with its feedback.
    pub fn sent(&mut self, at_ns: i64) -> PacketTag {
        let p = match self.current() {
            Some(p) => p,
            None => self.plan_stream(at_ns),
        };
        let q = self.pending.get_mut(&p.id).expect("planned");
        // A late send is recorded as it happened, so the estimator sees
        // the gaps the path saw, and the rest of the stream keeps its
        // gaps from there.
        let late = at_ns - q.send_ns[p.next];
        if late > 0 {
            for t in &mut q.send_ns[p.next..] {
                *t += late;
            }
        }
        self.plan = Some(Plan {
            id: p.id,
            next: p.next + 1,
        });
        self.last_send_ns = Some(at_ns);
        PacketTag {
            stream: p.id,
            index: p.next as u32,
        }
    }

    /// Feedback for one packet: its receive stamp on the receiver's clock,
    /// or `None` when it was lost. When the last packet of a stream is
    /// accounted for, the stream is read and the rate updated.
    pub fn feedback(
        &mut self,
        tag: PacketTag,
        recv_ns: Option<i64>,
        now_ns: i64,
    ) -> Option<RapidUpdate> {
        let q = self.pending.get_mut(&tag.stream)?;
        let i = tag.index as usize;
        if i >= q.known.len() || q.known[i] {
            return None;
        }
        q.known[i] = true;
        q.recv_ns[i] = recv_ns;
        q.left -= 1;
        if q.left > 0 {
            return None;
        }
        let q = self.pending.remove(&tag.stream)?;
        Some(self.read(tag.stream, q, now_ns))
    }

    fn read(&mut self, id: u64, q: Pending, now_ns: i64) -> RapidUpdate {
        let p = &self.params;
        // Read as if every packet left on schedule: a late send's delay
        // (and the shift it gave the rest of the stream) is taken off the
        // receive times. The rates then stay the ones the stream was
        // built of, which its sub-streams are found by; one late packet
        // must not split a sub-stream into a slower piece (ours).
        let packets: Vec<ProbePacket> = q
            .plan_ns
            .iter()
            .zip(&q.send_ns)
            .zip(&q.recv_ns)
            .map(|((&plan, &sent), &r)| ProbePacket {
                size_bytes: p.packet_bytes,
                send_ns: plan,
                recv_ns: r.map(|r| r - (sent - plan)),
            })
            .collect();
        let lost = packets.iter().filter(|x| x.recv_ns.is_none()).count();
        let owd_min = packets
            .iter()
            .filter_map(|x| Some(x.recv_ns? - x.send_ns))
            .min();
        let base = match (self.base_owd_ns, owd_min) {
            (Some(b), Some(o)) => Some(b.min(o)),
            (b, o) => b.or(o),
        };
        self.base_owd_ns = base;
        let standing = owd_min.zip(base).map_or(0, |(o, b)| o - b) > p.standing_queue_ns;
        let stream = ProbeStream::new(id, packets);
        let (abw, bound) = match p.estimator {
            RapidEstimator::Bass => {
                let a = analyze(
                    &stream,
                    StreamKind::MultiRate,
                    Method::Multirate,
                    &p.analysis,
                );
                (a.abw_bps, a.bound)
            }
            RapidEstimator::Raw => raw_estimate(&stream, &p.analysis),
        };
        let mut rate = self.rate_bps;
        match (abw, bound) {
            (Some(a), Bound::Exact) => {
                rate = between_rates(&stream, a, &p.analysis);
                self.starting = false;
            }
            (Some(a), Bound::AtLeast) => rate = rate.max(a),
            (Some(a), Bound::AtMost) => {
                rate = 0.9 * a;
                self.starting = false;
            }
            _ => {}
        }
        if standing {
            // The queue never emptied while the stream crossed: the path
            // is loaded above what it can carry, whatever the gaps said.
            rate = rate.min(p.standing_queue_factor * q.avg_bps);
        }
        if congestion_loss(&stream, abw, bound, &p.analysis) && id >= self.cut_from_stream {
            rate = rate.min(p.loss_factor * q.avg_bps);
            self.starting = false;
            // Streams already planned were sent before this cut.
            self.cut_from_stream = self.next_id;
            self.cut_bps = Some(rate);
        } else if id < self.cut_from_stream {
            // Sent before the cut: what they read is what the cut answered,
            // so they neither cut again nor lift the rate over the cut.
            if let Some(cut) = self.cut_bps {
                rate = rate.min(cut);
            }
        } else {
            self.cut_bps = None;
        }
        self.rate_bps = rate.clamp(p.floor_bps, p.max_bps);
        RapidUpdate {
            stream: id,
            at_ns: now_ns,
            sent_bps: q.avg_bps,
            abw_bps: abw,
            bound,
            lost,
            rate_bps: self.rate_bps,
        }
    }
}

/// Whether a stream's losses say a queue overflowed: losses that grow with
/// the rate (the overflow signature the multi-rate analysis reads too), or
/// any loss where the stream was sent above an exact estimate; every loss
/// when the estimate says "at most" or nothing; none when it read "at
/// least". The rate test alone trusted estimates that heavy loss had
/// already bent (on the lab: "exact 479 Mbit/s" on a 200 Mbit/s path
/// after 25 of 128 packets were lost at the top rates).
fn congestion_loss(
    stream: &ProbeStream,
    abw: Option<f64>,
    bound: Bound,
    params: &AnalysisParams,
) -> bool {
    let p = &stream.packets;
    let lost: Vec<usize> = (0..p.len()).filter(|&i| p[i].recv_ns.is_none()).collect();
    if lost.is_empty() {
        return false;
    }
    match (bound, abw) {
        (Bound::AtLeast, Some(_)) => false,
        (Bound::Exact, Some(_)) if loss_grows_with_rate(stream, params.gap_tolerance) => true,
        (Bound::Exact, Some(a)) => lost.iter().any(|&i| {
            // The rate a packet was sent at: its gap from the previous one
            // (the next one's for the first).
            let (x, y) = if i == 0 { (0, 1) } else { (i - 1, i) };
            match (p.get(x), p.get(y)) {
                (Some(a0), Some(b0)) if b0.send_ns > a0.send_ns => {
                    b0.size_bytes as f64 * 8e9 / (b0.send_ns - a0.send_ns) as f64 > a
                }
                _ => true,
            }
        }),
        _ => true,
    }
}

/// Where in its bracket a crossing between two probed rates puts the
/// rate. The multi-rate estimate answers the last rate that built no
/// queue when the queue starts at the next sub-stream; the available
/// bandwidth lies anywhere between the two. Taken as the rate, the lower
/// end settles the controller a third of a rate step low (steady streams
/// are re-centred on it, so the crossing stays above the second rate:
/// 85 % of a fluid path's available bandwidth); the midpoint loads the
/// path at the truth on average (ours).
fn between_rates(stream: &ProbeStream, abw_bps: f64, params: &AnalysisParams) -> f64 {
    let mut rates: Vec<f64> = stream
        .sub_streams(params.gap_tolerance)
        .iter()
        .map(|s| s.rate_bps)
        .filter(|r| r.is_finite() && *r > 0.0)
        .collect();
    rates.sort_by(f64::total_cmp);
    let at_a_rate = rates.iter().any(|r| (abw_bps / r - 1.0).abs() < 0.02);
    match rates.iter().find(|&&r| r > abw_bps * 1.02) {
        Some(&next) if at_a_rate => 0.5 * (abw_bps + next),
        _ => abw_bps,
    }
}

/// The multi-rate "consistently exceed" rule on unsmoothed gaps (no BASS,
/// no window average).
fn raw_estimate(stream: &ProbeStream, params: &AnalysisParams) -> (Option<f64>, Bound) {
    if stream.loss_fraction() > params.max_loss {
        return (None, Bound::None);
    }
    let subs = stream.sub_streams(params.gap_tolerance);
    let raw = Multipass {
        gaps: stream.gaps(),
        passes: 0,
        robust: false,
        batched: false,
    };
    if raw.gaps.len() < 2 {
        return (None, Bound::None);
    }
    let min_suffix = (params.multipass.window / 2).max(1);
    match estimate_from_smoothed(
        &raw,
        &raw.gaps,
        &subs,
        params.consistency,
        params.multipass.exceed_tolerance,
        min_suffix,
    ) {
        Some(e) => (Some(e.abw_bps), e.bound),
        None => (None, Bound::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fluid path: a FIFO of `capacity_bps` carrying `cross_bps` of
    /// smooth cross traffic; a packet of size S sent at time t leaves at
    /// max(t, last) + S / (share of capacity left to the probe when the
    /// probe rate exceeds the available bandwidth). Receive = departure.
    struct Fluid {
        capacity_bps: f64,
        cross_bps: f64,
        last_ns: f64,
    }

    impl Fluid {
        fn carry(&mut self, send_ns: i64, bytes: u32) -> i64 {
            // The probe gets capacity minus cross while the queue lasts.
            let service = bytes as f64 * 8e9 / (self.capacity_bps - self.cross_bps);
            let t = (send_ns as f64).max(self.last_ns) + service;
            self.last_ns = t;
            t.round() as i64
        }
    }

    /// Runs the controller for `streams` streams with feedback after
    /// `rtt_ns`, returning the updates.
    fn run(
        c: &mut RapidController,
        path: &mut Fluid,
        streams: usize,
        rtt_ns: i64,
    ) -> Vec<RapidUpdate> {
        let mut now = 0i64;
        let mut acks: std::collections::VecDeque<(i64, PacketTag, Option<i64>)> =
            Default::default();
        let mut updates = Vec::new();
        while updates.len() < streams {
            let due = c.next_send_ns(now);
            while acks.front().is_some_and(|a| a.0 <= due) {
                let (t, tag, r) = acks.pop_front().unwrap();
                now = now.max(t);
                updates.extend(c.feedback(tag, r, t));
            }
            let due = c.next_send_ns(now);
            now = due;
            let tag = c.sent(now);
            let recv = path.carry(now, c.params.packet_bytes);
            acks.push_back((recv + rtt_ns / 2, tag, Some(recv)));
        }
        updates
    }

    /// Start-up from 10 Mbit/s on a 1 Gbit/s path carrying 400 Mbit/s of
    /// smooth cross traffic (600 Mbit/s available). Start-up rates are
    /// 0.5, 1, 2 and 4 times a base whose harmonic mean, 4 / 3.75 = 1.067
    /// times the base, is the rate: the top rate is 3.75 times the rate,
    /// so each "at least" reading raises the rate 3.75-fold until the
    /// probes cross 600 Mbit/s. Then the rate stays within 10 % of 600
    /// (median of the later streams: it moves between the midpoints of
    /// the rate brackets around 600).
    /// Start rates worked by hand: 10 Gbit/s of 9000-byte packets
    /// starts at a hundredth (100 Mbit/s; 128 x 72 000 bits in 100 ms
    /// would be 92.2); 1 Gbit/s of 1542-byte frames at 128 x 12 336 bits
    /// / 0.1 s = 15.79 Mbit/s (a hundredth: 10); a 100 Mbit/s ceiling
    /// with 9042-byte frames at half of it (92.6 would be 100 ms).
    #[test]
    fn the_first_stream_lasts_at_most_100_ms_within_half_the_ceiling() {
        let start = |max, bytes| RapidParams::paper(max, bytes, RapidEstimator::Bass).start_bps;
        assert_eq!(start(10e9, 9000), 100e6);
        assert!((start(1e9, 1542) - 15_790_080.0).abs() < 1.0);
        assert_eq!(start(100e6, 9042), 50e6);
    }

    #[test]
    fn starts_up_and_settles_on_the_available_bandwidth() {
        let mut p = RapidParams::paper(1e9, 1500, RapidEstimator::Bass);
        p.start_bps = 10e6;
        let mut c = RapidController::new(p);
        assert!((c.stream_rates(10e6)[3] / 10e6 - 3.75).abs() < 1e-9);
        let mut path = Fluid {
            capacity_bps: 1e9,
            cross_bps: 400e6,
            last_ns: 0.0,
        };
        let u = run(&mut c, &mut path, 200, 1_000_000);
        assert!(!c.starting());
        let tail: Vec<f64> = u[150..].iter().map(|u| u.rate_bps).collect();
        let med = crate::stats::median(&tail).unwrap();
        assert!((med / 600e6 - 1.0).abs() < 0.10, "median rate {med}");
    }

    /// Once settled, the steady streams spread +-50 % around a centre
    /// raised so that their harmonic mean is the rate: for 4 rates
    /// 0.5, 0.833, 1.167, 1.5 the harmonic mean is 4 / 4.724 = 0.847.
    #[test]
    fn steady_streams_average_the_rate() {
        let mut c = RapidController::new(RapidParams::paper(10e9, 9000, RapidEstimator::Bass));
        c.starting = false;
        c.rate_bps = 1e9;
        let r = c.stream_rates(1e9);
        let h = 4.0 / r.iter().map(|x| 1.0 / x).sum::<f64>();
        assert!((h / 1e9 - 1.0).abs() < 1e-9, "{h}");
        assert!((r[0] / r[3] - 0.5 / 1.5).abs() < 1e-9);
        // And the planned stream's bytes over its span are the rate.
        let t0 = c.next_send_ns(0);
        let mut last = t0;
        for _ in 0..128 {
            last = c.next_send_ns(last);
            c.sent(last);
        }
        let avg = 127.0 * 9000.0 * 8e9 / (last - t0) as f64;
        // Bytes after the first packet over the span: the first gap of
        // the stream is not in the span, so this is within a packet.
        assert!((avg / 1e9 - 1.0).abs() < 0.03, "{avg}");
    }

    /// Two streams around 5 Gbit/s on a path with 5 Gbit/s available (a
    /// 10 Gbit/s fluid FIFO with 5 Gbit/s of cross traffic): each reads an
    /// exact estimate near 5. Stream 0 loses its 121st packet (top rate,
    /// 7.5 Gbit/s, above the estimate: the queue overflowed), which caps
    /// the rate at 0.7 times the rate it was sent at. Stream 1, already in
    /// flight when the cut was made, loses a packet up there too: it does
    /// not cut again, nor does its estimate (near 5) lift the rate over
    /// the cut. Stream 2, sent after the cut at its rate, loses nothing:
    /// its estimate sets the rate again.
    #[test]
    fn a_congestion_loss_cuts_once_per_round_trip_and_holds_until_then() {
        let mut c = RapidController::new(RapidParams::paper(10e9, 9000, RapidEstimator::Bass));
        c.starting = false;
        c.rate_bps = 5e9;
        let mut path = Fluid {
            capacity_bps: 10e9,
            cross_bps: 5e9,
            last_ns: 0.0,
        };
        let mut tags = Vec::new();
        let mut now = 0;
        for _ in 0..256 {
            now = c.next_send_ns(now);
            let tag = c.sent(now);
            tags.push((tag, path.carry(now, 9000)));
        }
        let sent = c.pending[&0].avg_bps;
        let mut updates = Vec::new();
        for (tag, r) in &tags {
            let lost = tag.index == 120;
            updates.extend(c.feedback(*tag, (!lost).then_some(*r), r + 1_000_000));
        }
        assert_eq!(updates.len(), 2);
        assert_eq!(updates[0].lost, 1);
        assert_eq!(updates[0].bound, Bound::Exact, "{:?}", updates[0]);
        let cut = 0.7 * sent;
        assert!((updates[0].rate_bps - cut).abs() < 1.0, "{:?}", updates[0]);
        assert_eq!(updates[1].lost, 1);
        assert!(
            updates[1].abw_bps.is_some_and(|a| a > 1.2 * cut),
            "{:?}",
            updates[1]
        );
        assert_eq!(updates[1].rate_bps, updates[0].rate_bps, "{updates:?}");
        let mut now = tags.last().unwrap().1 + 2_000_000;
        let mut after = Vec::new();
        for _ in 0..128 {
            now = c.next_send_ns(now);
            let tag = c.sent(now);
            after.push((tag, path.carry(now, 9000)));
        }
        assert_eq!(after[0].0.stream, 2);
        for (tag, r) in &after {
            updates.extend(c.feedback(*tag, Some(*r), r + 1_000_000));
        }
        assert_eq!(updates.len(), 3);
        assert_eq!(updates[2].lost, 0);
        assert!(updates[2].rate_bps > 1.2 * cut, "{updates:?}");
    }

    /// A loss where the stream saw no queue is a bad link, not congestion:
    /// receive = send + 1 ms ("at least" the top rate) with the 10th
    /// packet lost raises the rate as if nothing was lost.
    #[test]
    fn a_random_loss_does_not_cut() {
        let mut c = RapidController::new(RapidParams::paper(10e9, 9000, RapidEstimator::Bass));
        c.starting = false;
        c.rate_bps = 2e9;
        let mut tags = Vec::new();
        let mut now = 0;
        for _ in 0..128 {
            now = c.next_send_ns(now);
            tags.push((c.sent(now), now));
        }
        let mut updates = Vec::new();
        for (tag, s) in &tags {
            let r = (tag.index != 10).then_some(s + 1_000_000);
            updates.extend(c.feedback(*tag, r, s + 2_000_000));
        }
        assert_eq!(updates.len(), 1);
        assert_eq!(updates[0].lost, 1);
        assert_eq!(updates[0].bound, Bound::AtLeast);
        assert!(updates[0].rate_bps > 2e9, "{:?}", updates[0]);
    }

    /// A standing queue caps the rate below what the stream was sent at,
    /// whatever its gaps say. Stream 0 crosses an empty path (receive =
    /// send + 1 ms: "at least", the rate rises); stream 1 keeps its gaps
    /// but every packet is 2 ms later (receive = send + 3 ms): the queue
    /// never emptied while it crossed, so the next rate is at most 0.9
    /// times its average rate, though it read "at least" too.
    #[test]
    fn a_standing_queue_caps_the_rate() {
        let mut c = RapidController::new(RapidParams::paper(10e9, 9000, RapidEstimator::Bass));
        c.starting = false;
        c.rate_bps = 2e9;
        let mut tags = Vec::new();
        let mut now = 0;
        for _ in 0..256 {
            now = c.next_send_ns(now);
            tags.push((c.sent(now), now));
        }
        let sent_1 = c.pending[&1].avg_bps;
        let mut updates = Vec::new();
        for (tag, s) in &tags {
            let owd = if tag.stream == 0 {
                1_000_000
            } else {
                3_000_000
            };
            updates.extend(c.feedback(*tag, Some(s + owd), s + 4_000_000));
        }
        assert_eq!(updates.len(), 2);
        assert_eq!(updates[0].bound, Bound::AtLeast);
        assert!(updates[0].rate_bps > 2e9, "{:?}", updates[0]);
        assert_eq!(updates[1].bound, Bound::AtLeast);
        assert!(
            (updates[1].rate_bps - 0.9 * sent_1).abs() < 1.0,
            "{updates:?}"
        );
    }

    /// After more than `idle_restart_ns` without sending, the controller
    /// starts up again from the rate it had.
    #[test]
    fn idle_restarts_the_start_up() {
        let mut c = RapidController::new(RapidParams::paper(10e9, 9000, RapidEstimator::Bass));
        c.starting = false;
        c.rate_bps = 2e9;
        let t = c.next_send_ns(0);
        c.sent(t);
        let later = t + 300_000_000;
        let due = c.next_send_ns(later);
        assert_eq!(due, later);
        assert!(c.starting());
        assert_eq!(c.rate_bps(), 2e9);
    }

    /// Three streams cut short after two packets each (ids 0, 1, 2): all
    /// three await feedback. Stream 0's two packets answered: 1 and 2
    /// are left (2 streams). Stream 2's answered before 1's (a receiver
    /// closes in order, but the count must not trust that): still 2,
    /// from stream 1. Then stream 1: none. Mid-stream only between a
    /// stream's first packet and its end.
    #[test]
    fn streams_awaiting_feedback_count_from_the_oldest_unanswered() {
        let mut c = RapidController::new(RapidParams::paper(10e9, 9000, RapidEstimator::Bass));
        assert_eq!(c.streams_awaiting_feedback(), 0);
        assert!(!c.mid_stream());
        let mut now = 0;
        let mut tags = Vec::new();
        for _ in 0..3 {
            for _ in 0..2 {
                now = c.next_send_ns(now);
                tags.push(c.sent(now));
                assert!(c.mid_stream());
            }
            c.end_stream();
            assert!(!c.mid_stream());
        }
        assert_eq!(
            tags.iter().map(|t| t.stream).collect::<Vec<_>>(),
            [0, 0, 1, 1, 2, 2]
        );
        assert_eq!(c.streams_awaiting_feedback(), 3);
        let answer = |c: &mut RapidController, k: usize| {
            c.feedback(tags[k], Some(now + k as i64), now + 10);
        };
        answer(&mut c, 0);
        assert_eq!(c.streams_awaiting_feedback(), 3);
        answer(&mut c, 1);
        assert_eq!(c.streams_awaiting_feedback(), 2);
        answer(&mut c, 4);
        answer(&mut c, 5);
        assert_eq!(c.streams_awaiting_feedback(), 2);
        answer(&mut c, 2);
        answer(&mut c, 3);
        assert_eq!(c.streams_awaiting_feedback(), 0);
    }

    /// The raw rule answers from unsmoothed gaps: on the fluid path at a
    /// 600 Mbit/s available bandwidth, a steady stream around 600 crosses
    /// inside the probed rates.
    #[test]
    fn the_raw_estimator_reads_a_clean_path() {
        let mut c = RapidController::new(RapidParams::paper(1e9, 1500, RapidEstimator::Raw));
        c.starting = false;
        c.rate_bps = 600e6;
        let mut path = Fluid {
            capacity_bps: 1e9,
            cross_bps: 400e6,
            last_ns: 0.0,
        };
        let u = run(&mut c, &mut path, 1, 1_000_000);
        assert_eq!(u[0].bound, Bound::Exact, "{u:?}");
        let a = u[0].abw_bps.unwrap();
        assert!((a / 600e6 - 1.0).abs() < 0.15, "{a}");
    }
}
