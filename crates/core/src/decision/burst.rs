//! Cross-traffic bursts a stream met: queue growth faster than any probe
//! rate the strategies send could cause, on the fluid FIFO model of
//! \[BASS\] section II.
//!
//! While a FIFO of capacity `C` stays busy, probes sent at `r` beside
//! cross traffic arriving at `x` leave it `(r + x) / C` times as far apart
//! as they were sent. A receive span more than twice its send span needs
//! `r + x > 2C`; with `r` at most the link's capacity, `x > C`: cross
//! traffic arriving faster than the link carries it, which only a burst
//! does, and only for a while. A stream that met one read the moment the
//! burst came (its crossing lands where the queue jumped), not the
//! available bandwidth over its own span: on the lab's ON/OFF source
//! (peaks four times the link) five streams in a row read 149 Mbit/s,
//! the rate at which a burst happened to arrive, over 110 free.
//!
//! The measure: the largest `(recv_j - recv_i) - 2 (send_j - send_i)`
//! over received packets `i < j`, the queue rise beyond what the probes
//! themselves explain. A coalescing receiver stamps a batch at once, which
//! shifts one stamp by up to a batch interval. A sender that stalls and
//! then catches up looks the same (its packets leave later than their
//! send times say): streams whose sender fell behind are judged by that
//! instead (the strategies send them again). So does a pause of the
//! path itself (a host or a shaper's timer holding every packet for a
//! while), which builds the rise in one step where a burst builds it
//! over the many gaps it interleaves with ([`met_burst`] tells them
//! apart).

use super::Bound;
use crate::stream::{GapTolerance, ProbePacket, ProbeStream};

/// Receive span over send span beyond which only a burst explains the
/// queue (see the module notes).
pub const BURST_SPREAD: f64 = 2.0;

/// A stream's largest queue rise beyond its own probes', and how it was
/// built.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rise {
    /// The rise (ns; 0 when the receive spans never exceeded twice the
    /// send spans, or fewer than two packets came back).
    pub rise_ns: f64,
    /// The widest single step of that rise, per packet sent across the
    /// step (ns; a gap over lost packets spreads over them).
    pub widest_step_ns: f64,
}

/// Share of the rise one step may carry for a burst (see [`met_burst`]).
pub const PAUSE_SHARE: f64 = 0.5;

/// The largest queue rise beyond the stream's own probes (see the module
/// notes). Only a burst where the stream's rates stay under twice the
/// tight link's capacity ([`met_burst`] checks).
pub fn burst_rise(stream: &ProbeStream) -> Rise {
    rise_and_widest_step(stream).0
}

/// [`burst_rise`], with the received packets either side of the rise's
/// widest step (`None` when it has none).
fn rise_and_widest_step(stream: &ProbeStream) -> (Rise, Option<(usize, usize)>) {
    let Some(t0) = stream.packets.first().map(|p| p.send_ns) else {
        return (Rise::default(), None);
    };
    let mut best = Rise::default();
    let mut best_step = None;
    // The lowest point so far, the widest step since it (and where), and
    // the last packet received (its index and height).
    let (mut lowest, mut widest) = (f64::INFINITY, 0.0f64);
    let mut widest_at = None;
    let mut last: Option<(usize, f64)> = None;
    for (i, p) in stream.packets.iter().enumerate() {
        let Some(recv) = p.recv_ns else { continue };
        // Relative to the first packet: i64 stamps lose nothing as f64
        // differences over a stream's milliseconds.
        let u =
            crate::stream::diff_ns(recv, t0) - BURST_SPREAD * crate::stream::diff_ns(p.send_ns, t0);
        if let Some((j, v)) = last {
            let step = (u - v) / (i - j) as f64;
            if step > widest {
                widest = step;
                widest_at = Some((j, i));
            }
        }
        if u - lowest > best.rise_ns {
            best = Rise {
                rise_ns: u - lowest,
                widest_step_ns: widest,
            };
            best_step = widest_at;
        }
        if u < lowest {
            lowest = u;
            widest = 0.0;
            widest_at = None;
        }
        last = Some((i, u));
    }
    (best, best_step)
}

/// Packets sent within which a queue rise counts as one step
/// ([`without_steps`]): a batch that reaches the queue faster than the
/// probes' gaps (a kernel TCP sender's window off a fast link) may land
/// across a few of them.
pub const AT_ONCE_PACKETS: usize = 4;

/// [`burst_rise`]'s rise, with the most of it any run of up to
/// [`AT_ONCE_PACKETS`] packets sent carried (a run over lost packets
/// counts in proportion) and that run's first and last received packets.
fn rise_and_steepest_run(stream: &ProbeStream) -> (f64, f64, Option<(usize, usize)>) {
    let Some(t0) = stream.packets.first().map(|p| p.send_ns) else {
        return (0.0, 0.0, None);
    };
    let (mut best, mut best_run, mut best_at) = (0.0f64, 0.0f64, None);
    let (mut lowest, mut steepest, mut steepest_at) = (f64::INFINITY, 0.0f64, None);
    // The last received packets (index, height), oldest first.
    let mut recent = [(0usize, 0.0f64); AT_ONCE_PACKETS];
    let mut held = 0usize;
    for (i, p) in stream.packets.iter().enumerate() {
        let Some(recv) = p.recv_ns else { continue };
        let u =
            crate::stream::diff_ns(recv, t0) - BURST_SPREAD * crate::stream::diff_ns(p.send_ns, t0);
        for &(j, v) in &recent[..held] {
            let sent = i - j;
            let run = (u - v) * (AT_ONCE_PACKETS as f64 / sent as f64).min(1.0);
            if run > steepest {
                steepest = run;
                steepest_at = Some((j, i));
            }
        }
        if u - lowest > best {
            (best, best_run, best_at) = (u - lowest, steepest, steepest_at);
        }
        if u < lowest {
            lowest = u;
            steepest = 0.0;
            steepest_at = None;
            held = 0;
        }
        if held == AT_ONCE_PACKETS {
            recent.rotate_left(1);
            held -= 1;
        }
        recent[held] = (i, u);
        held += 1;
    }
    (best, best_run, best_at)
}

/// What held a stream's probes beyond their own queue ([`held`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Held {
    /// Cross traffic arriving faster than the link: the rise (ns).
    Burst { rise_ns: f64 },
    /// One step carried half the rise or more: a pause of the path, or a
    /// batch of cross traffic that came at once; the rise (ns).
    Pause { rise_ns: f64 },
}

impl Held {
    /// The rise, where it was a burst.
    pub fn burst_rise_ns(self) -> Option<f64> {
        match self {
            Held::Burst { rise_ns } => Some(rise_ns),
            Held::Pause { .. } => None,
        }
    }

    /// The rise, where it was a pause.
    pub fn pause_rise_ns(self) -> Option<f64> {
        match self {
            Held::Pause { rise_ns } => Some(rise_ns),
            Held::Burst { .. } => None,
        }
    }
}

/// The queue rise a stream met beyond its own probes', large enough to
/// move its reading: a twentieth of its send span (a quarter of one of
/// five sub-streams, which a rate 15 % under the available bandwidth on
/// a half-used link drains in no less than three sub-streams) and two
/// receive batches (one batch's stamp shift is no burst). `None` when it
/// met none, or when the stream was sent faster than twice
/// `capacity_at_least_bps` at any rate (its own packets could then spread
/// that far; an exact reading of the stream is such a floor).
///
/// A [`Held::Pause`] when one step between two packets carries half the
/// rise or more (beyond a receive batch's stamp shift). Cross traffic
/// arriving at a finite rate over `C` interleaves with the probes and
/// widens every gap while it lasts, so its rise builds over many steps
/// (the lab's ON/OFF source: the widest step 13-38 % of the rise, 10th
/// to 90th percentile of 240 streams); a hole the probes then leave at
/// the link's own spacing is the host or a shaper's timer holding the
/// path (the lab's path without cross traffic, on a VM losing 10-18 %
/// of its time to steal: holes of 0.4-1 ms, one step all of the rise),
/// or a batch of cross traffic that came at once, an event and no swing.
pub fn held(stream: &ProbeStream, capacity_at_least_bps: f64) -> Option<Held> {
    let fastest = stream
        .sub_streams(GapTolerance::default())
        .iter()
        .map(|s| s.rate_bps)
        .fold(0.0, f64::max);
    if !(fastest > 0.0 && fastest <= BURST_SPREAD * capacity_at_least_bps) {
        return None;
    }
    classify(stream, burst_rise(stream))
}

/// [`held`] for the stream's rise `r`, whatever the stream's rates.
fn classify(stream: &ProbeStream, r: Rise) -> Option<Held> {
    let batches = stream.receive_batch_interval_ns().unwrap_or(0.0);
    let least = (stream.send_span_ns() / 20.0).max(2.0 * batches);
    if !(least > 0.0 && r.rise_ns >= least) {
        return None;
    }
    Some(if r.widest_step_ns - batches >= PAUSE_SHARE * r.rise_ns {
        Held::Pause { rise_ns: r.rise_ns }
    } else {
        Held::Burst { rise_ns: r.rise_ns }
    })
}

/// Whether a rise of `rise_ns` came at once: a run of up to
/// [`AT_ONCE_PACKETS`] packets carried half of it or more (`run_ns`), and
/// it is two mean send gaps or more (one receive gap three send gaps at
/// least, where cross traffic at the link's own rate widens it to two).
/// Smaller than [`held`] asks: a step needs no share of the stream's
/// span to move the reading of the sub-stream it falls in.
fn came_at_once(stream: &ProbeStream, rise_ns: f64, run_ns: f64) -> bool {
    let n = stream.packets.len();
    if n < 2 {
        return false;
    }
    let least = 2.0 * stream.send_span_ns() / (n - 1) as f64;
    least > 0.0 && rise_ns >= least && run_ns >= PAUSE_SHARE * rise_ns
}

/// Most steps [`without_steps`] takes out of one stream.
pub const MOST_STEPS: usize = 64;

/// Gaps beside a step whose delay growth stands in for the step's own.
pub const STEP_NEIGHBOURS: usize = 8;

/// A stream with its steps taken out ([`without_steps`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Unstepped {
    /// The packets from each step on arrive earlier by its growth.
    pub stream: ProbeStream,
    /// Each step: the first packet after it, and the delay it added
    /// beyond the gaps beside it (ns).
    pub steps: Vec<(usize, f64)>,
}

impl Unstepped {
    /// The share of the stream's send span the steps held the queue:
    /// the link time the batches took (a pause of the path takes the
    /// same from the probes).
    pub fn held_share(&self) -> f64 {
        let span = self.stream.send_span_ns();
        if span <= 0.0 {
            return 0.0;
        }
        self.steps.iter().map(|&(_, ns)| ns).sum::<f64>() / span
    }

    /// The rate the queue drained at behind the steps: each probe's
    /// bytes over its receive gap, the [`STEP_NEIGHBOURS`] gaps after
    /// each step, their median. The queue is busy there, so this is the
    /// tight link's capacity (less what other cross traffic took of it).
    pub fn drain_bps(&self) -> Option<f64> {
        let mut rates = [0.0f64; MOST_STEPS * STEP_NEIGHBOURS];
        let mut n = 0;
        for &(i, _) in &self.steps {
            let received = self.stream.packets[i..]
                .iter()
                .filter_map(|p| Some((p.recv_ns?, p.size_bytes)));
            let mut last: Option<i64> = None;
            for (r, size) in received.take(STEP_NEIGHBOURS + 1) {
                if let Some(gap) = last.map(|l| crate::stream::diff_ns(r, l)) {
                    if gap > 0.0 && n < rates.len() {
                        rates[n] = size as f64 * 8e9 / gap;
                        n += 1;
                    }
                }
                last = Some(r);
            }
        }
        let rates = &mut rates[..n];
        rates.sort_by(f64::total_cmp);
        crate::stats::quantile_sorted(rates, 0.5)
    }

    /// What an exact or "at least" reading of the unstepped stream
    /// (`bound`, `reading_bps`) leaves once the batches behind the steps
    /// are counted: their link time, [`Unstepped::held_share`], at the
    /// link's rate, the faster of the drain rate and the reading (the
    /// link carries at least what it leaves free). Between the batches
    /// the path left the reading; the batches took their share on top.
    ///
    /// An "at least" reading (no queue grew between the batches up to
    /// the fastest rate sent) lies between that rate and the drain rate,
    /// which the path cannot beat: the answer is the drain rate less the
    /// batches, exact (a lone kernel TCP flow capped by its sender leaves
    /// the link idle between its windows). The next stream, centred
    /// there, probes past it and reads the crossing where there is one.
    ///
    /// `None` where the packets behind the steps came faster than twice
    /// the stream's fastest rate (`fastest_bps`) or no drain rate shows:
    /// no queue the probes crossed drained there (a receiver that
    /// stamped late and then caught up, after the tight link), and the
    /// stream is better read as it came.
    pub fn less_the_batches(
        &self,
        bound: Bound,
        reading_bps: f64,
        fastest_bps: f64,
    ) -> Option<(Bound, f64)> {
        let count = self.batch_count(reading_bps, fastest_bps)?;
        let share = self.held_share();
        Some(match bound {
            Bound::AtLeast => (Bound::Exact, count.left_bps(share)),
            _ => (bound, reading_bps - count.link_bps * share),
        })
    }

    /// What [`Unstepped::less_the_batches`] counts for a reading of
    /// `reading_bps` (`None` where it reads nothing).
    pub fn batch_count(&self, reading_bps: f64, fastest_bps: f64) -> Option<BatchCount> {
        let drain = self.drain_bps()?;
        if drain.is_nan() || fastest_bps.is_nan() || drain > BURST_SPREAD * fastest_bps {
            return None;
        }
        Some(BatchCount {
            held_ns: self.steps.iter().map(|&(_, ns)| ns).sum(),
            span_ns: self.stream.send_span_ns(),
            link_bps: drain.max(reading_bps),
        })
    }
}

/// The batches an answer read as "the link less the batches" counted:
/// their link time, the stream's send span and the link's rate.
///
/// One stream's count is its own span's: where a sender's windows or
/// frames come further apart than a stream lasts, a stream holds one
/// whole or none, and those that hold a whole one are the streams that
/// read this way (the others read "at least" as sent, or the part they
/// caught as a queue the rates built). Under iperf3's TCP capped at 60
/// Mbit/s (a 128 KB write every 17 ms, sent in bursts over about 6 ms,
/// streams of 15 ms) such streams held 34 % of the link where the flow
/// took 31 %, and a capture of the cross traffic read 35 % over those
/// streams' own spans: each count was right, the choice of streams was
/// not. A run therefore pools its counts ([`pooled_share`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BatchCount {
    pub held_ns: f64,
    pub span_ns: f64,
    /// The faster of the drain rate behind the steps and the reading
    /// between them.
    pub link_bps: f64,
}

impl BatchCount {
    /// The link less batches that hold it `share` of the time.
    pub fn left_bps(&self, share: f64) -> f64 {
        self.link_bps * (1.0 - share)
    }
}

/// The share of the time the batches of `counts` held the link, over
/// all their streams' spans together (`None` for no span).
pub fn pooled_share(counts: impl IntoIterator<Item = BatchCount>) -> Option<f64> {
    let (held, span) = counts
        .into_iter()
        .fold((0.0, 0.0), |(h, s), c| (h + c.held_ns, s + c.span_ns));
    (span > 0.0).then(|| held / span)
}

/// The stream with each queue rise that came in one step taken out: the
/// packets from the step on arrive earlier by the step's growth beyond
/// what the gaps before it grew (the gaps after it when it opens the
/// stream). `None` when it met no such step.
///
/// A batch of cross traffic that reaches the queue at once (a kernel
/// TCP sender's window, a paced sender's frames owed after its timer
/// stalled) and a pause of the path add the same delay to every packet
/// behind them, and the queue then drains at the rate the probes and
/// the rest of the cross traffic leave free. Read as it is, the step is
/// a queue the sub-stream it fell in built: the crossing lands at
/// whatever rate was being sent when the batch came, under the
/// available bandwidth wherever that rate was. Taken out, the
/// gaps say what the path left between the batches; the batches' link
/// time is then taken off that ([`Unstepped::less_the_batches`]). Up to
/// one step per `window` gaps (the smoothing window, over which
/// frequent batches average out like any cross traffic; more, and the
/// stream is left as it is), and [`MOST_STEPS`], the widest first; a
/// rise built over many gaps (a burst faster than the link) is left
/// alone.
pub fn without_steps(stream: &ProbeStream, window: usize) -> Option<Unstepped> {
    let mut u = Unstepped::default();
    without_steps_into(stream, window, &mut u).then_some(u)
}

/// [`without_steps`] into `out`, reusing its memory; whether the stream
/// met a step (`out` is then the unstepped stream).
pub fn without_steps_into(stream: &ProbeStream, window: usize, out: &mut Unstepped) -> bool {
    out.steps.clear();
    // A receiver that stamps in batches makes a step of every batch: the
    // smoothing reads such streams batch by batch.
    if stream.receive_batch_count().is_some() {
        return false;
    }
    // One step per smoothing window at most: more often, the window
    // averages the batches as it averages any cross traffic.
    let rare = (stream.packets.len().saturating_sub(1) / window.max(1)).clamp(1, MOST_STEPS);
    loop {
        if out.steps.len() > rare {
            out.steps.clear();
            return false;
        }
        let s = if out.steps.is_empty() {
            stream
        } else {
            &out.stream
        };
        let (rise, run, at) = rise_and_steepest_run(s);
        let (true, Some((j, i))) = (came_at_once(s, rise, run), at) else {
            break;
        };
        let (delta, usual) = step_growth_ns(s, j, i);
        if delta.is_nan() || delta < 1.0 {
            break;
        }
        if out.steps.is_empty() {
            out.stream.id = stream.id;
            out.stream.packets.clone_from(&stream.packets);
        }
        // Inside the run, each packet keeps what the gaps beside it
        // would have grown; from its end on, all of the step goes.
        let first = out.stream.packets[j];
        for (k, p) in out.stream.packets.iter_mut().enumerate().skip(j + 1) {
            let Some(r) = p.recv_ns.as_mut() else {
                continue;
            };
            let shift = if k < i {
                let Some(r0) = first.recv_ns else { continue };
                let grew = crate::stream::diff_ns(*r, r0)
                    - crate::stream::diff_ns(p.send_ns, first.send_ns);
                (grew - usual * (k - j) as f64).clamp(0.0, delta)
            } else {
                delta
            };
            *r = r.saturating_sub(shift.round() as i64);
        }
        out.steps.push((i, delta.round()));
    }
    // Gaps left that grew half as much as the smallest step taken out
    // count as steps too: where they make the steps frequent, the steps
    // were the tall end of cross traffic that comes in bunches of every
    // size, which the window averages.
    let smallest = out
        .steps
        .iter()
        .map(|&(_, ns)| ns)
        .fold(f64::INFINITY, f64::min);
    if !out.steps.is_empty()
        && out.steps.len() + gaps_growing_ns(&out.stream, STEPS_APART * smallest) > rare
    {
        out.steps.clear();
    }
    !out.steps.is_empty()
}

/// How much less than the smallest step taken out a gap left must grow
/// not to count as one ([`without_steps`]).
const STEPS_APART: f64 = 0.5;

/// How many gaps between two received packets grew by `least_ns` or
/// more (their receive gap less their send gap).
fn gaps_growing_ns(stream: &ProbeStream, least_ns: f64) -> usize {
    let mut last: Option<(i64, i64)> = None;
    let mut count = 0;
    for p in &stream.packets {
        let Some(r) = p.recv_ns else { continue };
        if let Some((send, recv)) = last {
            let growth = crate::stream::diff_ns(r, recv) - crate::stream::diff_ns(p.send_ns, send);
            count += usize::from(growth >= least_ns);
        }
        last = Some((p.send_ns, r));
    }
    count
}

/// How much more the delay grew from received packet `j` to `i` than
/// the [`STEP_NEIGHBOURS`] gaps before (or, at the stream's start, after)
/// grew over as many packets sent, and that usual growth per packet
/// (their median).
fn step_growth_ns(stream: &ProbeStream, j: usize, i: usize) -> (f64, f64) {
    let Some(step) = delay_growth_ns(&stream.packets[j], &stream.packets[i]) else {
        return (0.0, 0.0);
    };
    // Per packet sent, over received neighbours: before the step, or
    // after it when it opens the stream.
    let mut beside = [0.0f64; STEP_NEIGHBOURS];
    let mut n = neighbour_growths(stream, j, (0..j).rev(), &mut beside);
    if n == 0 {
        n = neighbour_growths(stream, i, i + 1..stream.packets.len(), &mut beside);
    }
    let beside = &mut beside[..n];
    beside.sort_by(f64::total_cmp);
    let usual = crate::stats::quantile_sorted(beside, 0.5).unwrap_or(0.0);
    (step - usual * (i - j) as f64, usual)
}

/// How much more the receive gap from `a` to `b` is than their send
/// gap (ns; `None` unless both arrived).
fn delay_growth_ns(a: &ProbePacket, b: &ProbePacket) -> Option<f64> {
    let recv = crate::stream::diff_ns(b.recv_ns?, a.recv_ns?);
    Some(recv - crate::stream::diff_ns(b.send_ns, a.send_ns))
}

/// The delay growth per packet sent between consecutive received
/// packets, walking from packet `from` through `walk` (either way),
/// into `out` until it is full; how many.
fn neighbour_growths(
    stream: &ProbeStream,
    from: usize,
    walk: impl Iterator<Item = usize>,
    out: &mut [f64; STEP_NEIGHBOURS],
) -> usize {
    let packets = &stream.packets;
    let (mut n, mut last) = (0, from);
    for k in walk.filter(|&k| packets[k].recv_ns.is_some()) {
        let (a, b) = (k.min(last), k.max(last));
        if let Some(g) = delay_growth_ns(&packets[a], &packets[b]) {
            out[n] = g / (b - a) as f64;
            n += 1;
        }
        if n == STEP_NEIGHBOURS {
            break;
        }
        last = k;
    }
    n
}

/// The rise of a burst faster than the link the stream met ([`held`];
/// `None` for a pause).
pub fn met_burst(stream: &ProbeStream, capacity_at_least_bps: f64) -> Option<f64> {
    held(stream, capacity_at_least_bps)?.burst_rise_ns()
}

/// [`held`] with the stream's own multi-rate reading as the capacity
/// floor: an exact or "at least" one (other bounds give none).
pub fn held_under_reading(
    stream: &ProbeStream,
    bound: Bound,
    reading_bps: Option<f64>,
) -> Option<Held> {
    match (bound, reading_bps) {
        (Bound::Exact | Bound::AtLeast, Some(r)) => held(stream, r),
        _ => None,
    }
}

/// [`met_burst`] with the stream's own multi-rate reading as the
/// capacity floor: an exact or "at least" one (other bounds give none).
pub fn met_burst_under_reading(
    stream: &ProbeStream,
    bound: Bound,
    reading_bps: Option<f64>,
) -> Option<f64> {
    held_under_reading(stream, bound, reading_bps)?.burst_rise_ns()
}

/// Whether `bursts` of `streams` say the path swings on the streams'
/// own time scale: two or more, and a quarter of them at least (the
/// lab's smoothed cross traffic, whose generator now and then stalls
/// and catches up, had 2 of 15 in one run; the ON/OFF source 36-83 %).
pub fn bursts_swing(bursts: usize, streams: usize) -> bool {
    bursts >= 2 && 4 * bursts >= streams
}

/// Whether `stepped` of `streams` single-rate streams met steps of queue
/// ([`without_steps`]) often enough to say so: two or more, and a fifth
/// of them at least. A single-rate stream holds one rate, so a step in
/// it is a batch or a pause, never the probes' own queue. The pathload
/// mode's fleets met steps in at most 8 % of their streams on the lab's
/// CBR and timer-paced UDP paths (one CBR run in 28 more, when its
/// generator stalled) and in 23-36 % under a replayed capture of real
/// flows, where their answer read a quarter high; with a quarter as the
/// bar, one such run in ten said nothing.
pub fn steps_met_often(stepped: usize, streams: usize) -> bool {
    stepped >= 2 && 5 * stepped >= streams
}

/// Whether `stepped` of the `under` single-rate streams sent under the
/// answer met steps of queue often enough to say the answer rests on
/// which streams the batches hit: two or more, and a sixth of them at
/// least. Under the answer the probes alone build no queue. On the lab's
/// CBR and timer-paced UDP paths at most 2 of 24 such streams per run of
/// the pathload mode met a step (a stall of the host or generator);
/// under a replayed capture of real flows 3 of 12 to 7 of 30, in runs
/// whose share over all streams could fall under the fifth above.
pub fn steps_under_answer(stepped: usize, under: usize) -> bool {
    stepped >= 2 && 6 * stepped >= under
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(send_ns: &[i64], recv_ns: &[Option<i64>]) -> ProbeStream {
        ProbeStream::from_times(0, 1500, send_ns, recv_ns)
    }

    /// 40 packets sent 100 us apart, packet `i` delayed `delay_ns(i)`.
    fn delayed(delay_ns: impl Fn(i64) -> i64) -> ProbeStream {
        let send: Vec<i64> = (0..40).map(|i| i * 100_000).collect();
        let recv: Vec<Option<i64>> = (0..40).map(|i| Some(i * 100_000 + delay_ns(i))).collect();
        stream(&send, &recv)
    }

    #[test]
    fn a_queue_the_probes_build_is_no_burst() {
        // Sent 100 us apart, received 150 us apart (a rate half again the
        // available bandwidth): spans 1.5x, never 2x.
        let send: Vec<i64> = (0..40).map(|i| i * 100_000).collect();
        let recv: Vec<Option<i64>> = (0..40).map(|i| Some(5_000 + i * 150_000)).collect();
        let s = stream(&send, &recv);
        assert_eq!(burst_rise(&s).rise_ns, 0.0);
        assert_eq!(met_burst(&s, 100e6), None);
    }

    #[test]
    fn a_burst_by_hand() {
        // 40 packets 100 us apart (120 Mbit/s, span 3.9 ms) through a
        // 150 Mbit/s link (80 us a packet). Packets 0-9 pass with a 10 us
        // delay; cross traffic at 300 Mbit/s then arrives for 1 ms:
        // packets 10-19 leave (120 + 300) / 150 = 2.8 times as far apart
        // as sent, each 180 us later than the one before; after it the
        // link drains the queue 20 us a packet.
        let s = delayed(|i| match i {
            0..=9 => 10_000,
            10..=19 => 10_000 + (i - 9) * 180_000,
            _ => 1_810_000 - (i - 19) * 20_000,
        });
        // u = recv - 2 send = delay - send: lowest at packet 9 (10 us -
        // 900 us = -890 us), then +80 us a packet to packet 19 (1810 -
        // 1900 = -90 us): a rise of 800 us in ten steps of 80.
        assert_eq!(
            burst_rise(&s),
            Rise {
                rise_ns: 800_000.0,
                widest_step_ns: 80_000.0
            }
        );
        // A twentieth of 3.9 ms is 195 us: a burst, on a link of at
        // least 61 Mbit/s (sent at 120: 1500 B every 100 us).
        assert_eq!(met_burst(&s, 61e6), Some(800_000.0));
        assert_eq!(held(&s, 61e6), Some(Held::Burst { rise_ns: 800_000.0 }));
        // Sent over twice a 50 Mbit/s floor: the probes could do it.
        assert_eq!(met_burst(&s, 50e6), None);
    }

    #[test]
    fn a_pause_is_no_burst() {
        // The same stream, but the path holds packet 10 for 1 ms at once
        // (a host's stall), and the queue drains at 10 us a packet.
        let s = delayed(|i| {
            if i < 10 {
                10_000
            } else {
                (1_010_000 - (i - 10) * 10_000).max(10_000)
            }
        });
        // From packet 9 (-890 us) to packet 10 (1010 - 1000 = 10 us) in
        // one step: a 900 us rise, all of it one gap.
        assert_eq!(
            burst_rise(&s),
            Rise {
                rise_ns: 900_000.0,
                widest_step_ns: 900_000.0
            }
        );
        assert_eq!(met_burst(&s, 61e6), None);
        assert_eq!(held(&s, 61e6), Some(Held::Pause { rise_ns: 900_000.0 }));
    }

    #[test]
    fn lost_packets_are_skipped_and_small_rises_are_not_bursts() {
        // Packet 5 lost; packet 6 held 300 us over its 10 us neighbours.
        let send: Vec<i64> = (0..40).map(|i| i * 100_000).collect();
        let recv: Vec<Option<i64>> = (0..40)
            .map(|i| match i {
                5 => None,
                6 => Some(i * 100_000 + 310_000),
                _ => Some(i * 100_000 + 10_000),
            })
            .collect();
        let s = stream(&send, &recv);
        // u: packet 4: 10 - 400 = -390 us; packet 6: 310 - 600 = -290
        // us; packet 0 (10 us) came before and lies higher: 100 us, in
        // one gap over two packets sent: 50 us a packet.
        assert_eq!(
            burst_rise(&s),
            Rise {
                rise_ns: 100_000.0,
                widest_step_ns: 50_000.0
            }
        );
        assert_eq!(met_burst(&s, 100e6), None, "100 us < 195 us");
        assert_eq!(burst_rise(&stream(&[0], &[Some(5)])).rise_ns, 0.0);
        assert_eq!(met_burst(&stream(&[0, 1], &[None, None]), 100e6), None);
    }

    /// Receive times through a FIFO of `capacity_bps` that is idle but
    /// for `batches` (arrival ns, bytes) of cross traffic, for probes of
    /// `size` bytes sent at `send_ns`.
    fn fifo(send_ns: &[i64], size: u32, capacity_bps: f64, batches: &[(i64, u32)]) -> Vec<i64> {
        let per_byte = 8e9 / capacity_bps;
        let mut free_at = 0.0f64;
        let mut next = 0;
        send_ns
            .iter()
            .map(|&t| {
                while next < batches.len() && batches[next].0 <= t {
                    let (at, bytes) = batches[next];
                    free_at = free_at.max(at as f64) + bytes as f64 * per_byte;
                    next += 1;
                }
                free_at = free_at.max(t as f64) + size as f64 * per_byte;
                free_at.round() as i64
            })
            .collect()
    }

    /// Two 15 ms streams behind a 200 Mbit/s link: one held 5.1 ms by a
    /// whole window, one 1.2 ms by part of the next; together 6.3 ms of
    /// 30, 21 %, where each alone reads 34 % and 8 %.
    #[test]
    fn batch_counts_pool_over_their_spans() {
        let a = BatchCount {
            held_ns: 5.1e6,
            span_ns: 15e6,
            link_bps: 200e6,
        };
        let b = BatchCount {
            held_ns: 1.2e6,
            ..a
        };
        let share = pooled_share([a, b]).unwrap();
        assert!((share - 0.21).abs() < 1e-12, "{share}");
        assert!((a.left_bps(share) - 158e6).abs() < 1e-3);
        assert!((a.left_bps(a.held_ns / a.span_ns) - 132e6).abs() < 1e-3);
        assert_eq!(pooled_share([]), None);
    }

    #[test]
    fn a_batch_by_hand() {
        // 64 probes of 1500 B 100 us apart (120 Mbit/s) through an idle
        // 200 Mbit/s FIFO (60 us a probe); 25,000 B of cross traffic
        // (1 ms of the link) arrive just before probe 21.
        let send: Vec<i64> = (0..64).map(|i| i * 100_000).collect();
        let recv = fifo(&send, 1500, 200e6, &[(2_099_000, 25_000)]);
        // Probe 21 waits out the batch: 1 ms more than probe 20; the
        // queue then drains 40 us a gap (100 us sent, 60 us served).
        assert_eq!(recv[20] - send[20], 60_000);
        assert_eq!(recv[21] - send[21], 1_059_000);
        assert_eq!(recv[22] - recv[21], 60_000);
        let s = stream(&send, &recv.iter().map(|&r| Some(r)).collect::<Vec<_>>());
        let u = without_steps(&s, 16).expect("a step");
        // One step after probe 20: 999 us (the batch came 1 us before
        // probe 21 was sent), nothing usual beside it.
        assert_eq!(u.steps, vec![(21, 999_000.0)]);
        assert_eq!(u.stream.packets[21].recv_ns, Some(recv[21] - 999_000));
        assert_eq!(u.stream.packets[20], s.packets[20]);
        // The queue behind it drained at the link's 200 Mbit/s.
        assert_eq!(u.drain_bps(), Some(200e6));
        // It held the link 999 us of the 6.3 ms sent: 15.9 %.
        assert!((u.held_share() - 0.999 / 6.3).abs() < 1e-9);
        // Between the batches the probes built no queue up to their
        // 120 Mbit/s: at least that, and at most the 200 the queue
        // drained at; the answer is the link less the batch, which is
        // the truth over the stream (200 less 25,000 B in 6.3 ms).
        let (bound, left) = u.less_the_batches(Bound::AtLeast, 120e6, 120e6).unwrap();
        assert_eq!(bound, Bound::Exact);
        let truth = 200e6 - 25_000.0 * 8.0 / 6.3e-3;
        assert!((left / truth - 1.0).abs() < 0.001, "{left} vs {truth}");
        // An exact reading between them loses the batch's link time.
        let (bound, left) = u.less_the_batches(Bound::Exact, 150e6, 120e6).unwrap();
        assert_eq!(bound, Bound::Exact);
        assert!((left - (150e6 - 200e6 * 0.999 / 6.3)).abs() < 1.0);
    }

    #[test]
    fn a_receiver_that_stamped_late_takes_nothing_from_the_path() {
        // Probes 100 us apart on an idle path, but the receiver stamps
        // probes 21-30 at once, 1 us apart, 1 ms late: they drained at
        // 12 Gbit/s, which no queue the 120 Mbit/s probes crossed does.
        let send: Vec<i64> = (0..64).map(|i| i * 100_000).collect();
        let recv: Vec<Option<i64>> = (0..64)
            .map(|i| {
                Some(match i {
                    21..=30 => 3_100_000 + (i - 21) * 1_000,
                    _ => i * 100_000 + 60_000,
                })
            })
            .collect();
        let s = stream(&send, &recv);
        let u = without_steps(&s, 16).expect("a step");
        assert_eq!(u.drain_bps(), Some(12e9));
        assert_eq!(u.less_the_batches(Bound::AtLeast, 120e6, 120e6), None);
    }

    #[test]
    fn frequent_batches_are_left_to_the_window() {
        // A batch of 12,500 B (500 us of the link) every 8 probes: 8
        // steps in 64 probes, over the one per 16 gaps the window leaves
        // to steps.
        let send: Vec<i64> = (0..64).map(|i| i * 100_000).collect();
        let batches: Vec<(i64, u32)> = (0..8).map(|k| (k * 800_000 + 350_000, 12_500)).collect();
        let recv = fifo(&send, 1500, 200e6, &batches);
        let s = stream(&send, &recv.iter().map(|&r| Some(r)).collect::<Vec<_>>());
        assert_eq!(without_steps(&s, 16), None);
        // Two of them are rare enough.
        let recv = fifo(&send, 1500, 200e6, &batches[..2]);
        let s = stream(&send, &recv.iter().map(|&r| Some(r)).collect::<Vec<_>>());
        assert_eq!(without_steps(&s, 16).map(|u| u.steps.len()), Some(2));
    }

    #[test]
    fn a_rise_over_many_gaps_is_no_step() {
        // The burst of `a_burst_by_hand`: 800 us over ten steps of 80.
        let s = delayed(|i| match i {
            0..=9 => 10_000,
            10..=19 => 10_000 + (i - 9) * 180_000,
            _ => 1_810_000 - (i - 19) * 20_000,
        });
        assert_eq!(without_steps(&s, 16), None);
        // A pause (`a_pause_is_no_burst`) is one.
        let s = delayed(|i| {
            if i < 10 {
                10_000
            } else {
                (1_010_000 - (i - 10) * 10_000).max(10_000)
            }
        });
        assert_eq!(without_steps(&s, 16).map(|u| u.steps.len()), Some(1));
    }

    #[test]
    fn multirate_reads_the_path_between_and_with_the_batches() {
        // A multi-rate stream (5 rates of 32 probes, 98-182 Mbit/s) through
        // an idle 200 Mbit/s FIFO that two 37,500 B batches of cross
        // traffic (1.5 ms of the link each) reach in the second and the
        // fourth sub-stream, as a kernel TCP flow's windows do. Read as it
        // came, the batches' queue passed for the probes' own and the
        // stream said only "at least 149 Mbit/s"; read with the steps
        // taken out, the path left at least the top rate between them,
        // and the answer is the link less the batches: the truth over
        // the stream.
        use crate::schedule::{multi_rate_schedule, rates_around};
        use crate::{analyze, AnalysisParams, Method, StreamKind};
        let send = multi_rate_schedule(&rates_around(140e6, 0.3, 5), 32, 1500);
        let batches = [(send[40] - 1_000, 37_500), (send[100] - 1_000, 37_500)];
        let recv = fifo(&send, 1500, 200e6, &batches);
        let s = stream(&send, &recv.iter().map(|&r| Some(r)).collect::<Vec<_>>());
        let span_s = (send[159] - send[0]) as f64 / 1e9;
        let truth = 200e6 - 2.0 * 37_500.0 * 8.0 / span_s;
        let a = analyze(
            &s,
            StreamKind::MultiRate,
            Method::Multirate,
            &AnalysisParams::default(),
        );
        assert_eq!(a.bound, Bound::Exact, "{a:?}");
        let e = a.abw_bps.unwrap();
        assert!((e / truth - 1.0).abs() < 0.02, "{e} vs {truth}: {a:?}");
        assert!(a.reason.unwrap().contains("2 steps of queue at once"));
    }

    #[test]
    fn single_rate_decisions_count_the_batches() {
        // 100 probes of 1500 B 100 us apart (120 Mbit/s) through an idle
        // 200 Mbit/s FIFO that three batches reach, 30 probes apart.
        // Between them the path carries the stream; with them it leaves
        // 200 less their link time over the stream's 9.9 ms: three of
        // 12,500 B (0.5 ms each) leave 170 Mbit/s, "below"; three of
        // 62,500 B (2.5 ms each) leave 48, "above".
        use crate::{analyze, AnalysisParams, Decision, Method, StreamKind};
        let send: Vec<i64> = (0..100).map(|i| i * 100_000).collect();
        let p = AnalysisParams::default();
        for (bytes, want) in [(12_500, Decision::Below), (62_500, Decision::Above)] {
            let batches: Vec<(i64, u32)> =
                (0..3).map(|k| (k * 3_000_000 + 1_050_000, bytes)).collect();
            let recv = fifo(&send, 1500, 200e6, &batches);
            let s = stream(&send, &recv.iter().map(|&r| Some(r)).collect::<Vec<_>>());
            assert_eq!(without_steps(&s, 16).map(|u| u.steps.len()), Some(3));
            for m in [Method::PrcmtBass, Method::Pathload] {
                let a = analyze(&s, StreamKind::SingleRate, m, &p);
                assert_eq!(a.decision, Some(want), "{bytes} B, {}: {a:?}", m.name());
            }
        }
    }

    #[test]
    fn steps_met_often_by_hand() {
        // Two or more, and a fifth at least.
        assert!(steps_met_often(2, 10));
        assert!(!steps_met_often(2, 11));
        assert!(!steps_met_often(1, 2));
        assert!(steps_met_often(9, 44));
        assert!(!steps_met_often(8, 44));
        assert!(!steps_met_often(0, 0));
    }

    #[test]
    fn steps_under_answer_by_hand() {
        assert!(steps_under_answer(3, 18));
        assert!(!steps_under_answer(3, 19));
        assert!(!steps_under_answer(2, 24), "a host's stall or two");
        assert!(!steps_under_answer(1, 1));
        assert!(steps_under_answer(2, 2));
        assert!(!steps_under_answer(0, 0));
    }

    proptest::proptest! {
        #[test]
        fn steps_met_often_holds_for_more_steps(stepped in 0usize..200, more in 0usize..50, streams in 0usize..400) {
            // More steps of the same streams never say less; fewer streams
            // with the same steps never say less.
            if steps_met_often(stepped, streams) {
                proptest::prop_assert!(steps_met_often(stepped + more, streams));
                proptest::prop_assert!(steps_met_often(stepped, streams.saturating_sub(more)));
            }
            if steps_under_answer(stepped, streams) {
                proptest::prop_assert!(steps_under_answer(stepped + more, streams));
                proptest::prop_assert!(steps_under_answer(stepped, streams.saturating_sub(more)));
            }
            // The bar under the answer is the lower one: the whole run's
            // count never says what the count under it would not.
            if stepped <= streams && steps_met_often(stepped, streams) {
                proptest::prop_assert!(steps_under_answer(stepped, streams));
            }
        }

        #[test]
        fn unstepping_moves_only_receive_stamps_earlier(
            gaps in proptest::collection::vec(20_000i64..200_000, 8..200),
            delays in proptest::collection::vec(proptest::option::weighted(0.95, 0i64..3_000_000), 8..200),
        ) {
            let n = gaps.len().min(delays.len());
            let send: Vec<i64> = gaps[..n].iter().scan(0, |t, g| { *t += g; Some(*t) }).collect();
            let recv: Vec<Option<i64>> = (0..n).map(|i| delays[i].map(|d| send[i] + d)).collect();
            let s = stream(&send, &recv);
            if let Some(u) = without_steps(&s, 16) {
                proptest::prop_assert!(!u.steps.is_empty());
                proptest::prop_assert!(u.steps.len() <= (n - 1) / 16 + 1);
                proptest::prop_assert!(u.steps.iter().all(|&(_, ns)| ns >= 1.0));
                proptest::prop_assert_eq!(u.stream.packets.len(), n);
                for (a, b) in s.packets.iter().zip(&u.stream.packets) {
                    proptest::prop_assert_eq!(a.send_ns, b.send_ns);
                    proptest::prop_assert_eq!(a.recv_ns.is_some(), b.recv_ns.is_some());
                    if let (Some(x), Some(y)) = (a.recv_ns, b.recv_ns) {
                        proptest::prop_assert!(y <= x);
                    }
                }
                proptest::prop_assert!(u.held_share() > 0.0);
                // One count pooled alone reads what the stream read.
                let (reading, fastest) = (150e6, 200e6);
                if let Some(c) = u.batch_count(reading, fastest) {
                    let share = pooled_share([c]).unwrap();
                    proptest::prop_assert!((share - u.held_share()).abs() < 1e-12);
                    let (b, left) = u.less_the_batches(Bound::AtLeast, reading, fastest).unwrap();
                    proptest::prop_assert_eq!(b, Bound::Exact);
                    proptest::prop_assert!((c.left_bps(share) - left).abs() < 1e-3);
                }
            }
        }

        /// The pooled share lies between the counts' own shares.
        #[test]
        fn a_pooled_share_lies_between_its_counts(
            counts in proptest::collection::vec((0.0f64..5e6, 1e6f64..20e6), 1..12),
        ) {
            let counts: Vec<BatchCount> = counts
                .iter()
                .map(|&(held_ns, span_ns)| BatchCount { held_ns, span_ns, link_bps: 200e6 })
                .collect();
            let share = pooled_share(counts.iter().copied()).unwrap();
            let own = counts.iter().map(|c| c.held_ns / c.span_ns);
            let (lo, hi) = own.fold((f64::INFINITY, 0.0f64), |(l, h), x| (l.min(x), h.max(x)));
            proptest::prop_assert!(lo - 1e-12 <= share && share <= hi + 1e-12);
        }

        #[test]
        fn a_path_without_cross_traffic_has_no_steps(
            gap in 20_000i64..200_000,
            jitter in proptest::collection::vec(0i64..10_000, 16..200),
        ) {
            // Stamps wander by less than a tenth of the gap.
            let jitter: Vec<i64> = jitter.iter().map(|j| j * gap / 100_000).collect();
            let send: Vec<i64> = (0..jitter.len() as i64).map(|i| i * gap).collect();
            let recv: Vec<Option<i64>> = send.iter().zip(&jitter).map(|(s, j)| Some(s + 50_000 + j)).collect();
            proptest::prop_assert_eq!(without_steps(&stream(&send, &recv), 16), None);
        }
    }
}
