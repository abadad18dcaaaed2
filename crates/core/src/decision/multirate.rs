//! Multi-rate estimates (\[BASS\], section VI): the available bandwidth
//! from one multi-rate stream, after single- or multi-pass smoothing, and
//! Multi-rate PRC-MT with decision policies DP1 and DP2 (section VI-D).
//!
//! "Consistently exceed" (section VI-A: "the largest probing rate beyond
//! which all receive gaps consistently exceed the corresponding sending
//! gaps"): after smoothing, find the unbroken run of gaps at the end of the
//! stream whose receive gap exceeds the send gap; the estimate is the
//! smoothed probing rate of the gap just before that run. The run must be at
//! least half a smoothing window long (8 gaps by default): a shorter run is
//! what one noisy gap leaves after the window average, not queueing. When no
//! such run exists, the available bandwidth is at least the highest smoothed
//! rate; when every gap exceeds, it is at most the lowest. A second rule,
//! [`Consistency::Cumulative`], asks instead that the cumulative excess stay
//! positive from the crossing on. On ON/OFF cross traffic the two bracket
//! the truth (every-gap above or near it, cumulative below), so the
//! default, [`Consistency::Bracket`], answers a point between them
//! ([`EVERY_GAP_WEIGHT`]) with both as its range.
//! A crossing inside a sub-stream is bracketed by the two sub-stream rates
//! around it (`bracket_interior_crossing`). Outside the probed rates: an
//! every-gap run must add up to at least one mean send gap of excess, or
//! it is coalescence beating with the send gap (the answer is then "at
//! least"); and when the run starts inside the lowest sub-stream while the
//! cumulative rule sees the queue growing from the first gap, the answer
//! is "at most" the lowest rate.
//! Sub-stream rates must increase through the stream (as in the paper and
//! in pathChirp); other orders are reported as unusable.

use super::{Bound, Decision};
use crate::smoothing::bass::{mean_send_gap_ns, BassParams};
use crate::smoothing::multipass::{exceeding_suffix, Multipass};
use crate::stream::{Gap, ProbeStream, SubStream};

use super::prcmt::prcmt_after_bass;

/// An available-bandwidth estimate with how it bounds the truth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimate {
    pub abw_bps: f64,
    pub bound: Bound,
    /// Range the estimate came from (the two crossings under
    /// [`Consistency::Bracket`]; `abw_bps` itself otherwise).
    pub low_bps: f64,
    pub high_bps: f64,
}

impl Estimate {
    pub fn single(abw_bps: f64, bound: Bound) -> Self {
        Estimate {
            abw_bps,
            bound,
            low_bps: abw_bps,
            high_bps: abw_bps,
        }
    }
}

/// Smoothed probing rate of a gap, bit/s.
fn smoothed_rate(g: &Gap) -> Option<f64> {
    g.send_rate_bps()
}

/// What "consistently exceed" means for the multi-rate estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Consistency {
    /// Every smoothed gap of the final run exceeds its send gap (the
    /// paper's wording). Bursty cross traffic that drains between bursts
    /// breaks the run, so it leans towards over-estimates.
    EveryGap,
    /// The cumulative excess (the relative one-way delay) stays above its
    /// level at the crossing: the queue never drains back. Near full
    /// utilisation a queue seldom drains, so it leans towards
    /// under-estimates.
    Cumulative,
    /// Both rules; the estimate lies between their two crossings
    /// ([`EVERY_GAP_WEIGHT`]) and the two are its range.
    #[default]
    Bracket,
}

/// The every-gap crossing's weight in [`Consistency::Bracket`]'s answer
/// for a stream stamped in receive batches ([`every_gap_weight`]; the
/// cumulative one's is the rest). Once, on ON/OFF cross traffic on
/// the simulator, the every-gap crossing sat above the truth and the
/// cumulative one below by as much (medians +8 % and -6 % over 10 seeds
/// x 8 streams), and the answer was their midpoint. Since the cap on a
/// run's delivered rate and the bracket inside a sub-stream they do not:
/// on `tightlink eval`'s cells of 2000 streams (5 x 64, Range 30 %) the
/// every-gap crossing's median error is -1.5 to +0.7 %, the cumulative
/// one's -5 to -10 %, and the midpoint read low in every cell of the
/// Range sensitivity grid but one (-0.4 to -5.8 % at 64 and 128 packets
/// a rate). At 0.7 the median moves to -4.3 to +0.9 %, the share within
/// +-10 % rises in every 5 x 32 and 5 x 64 cell (Range 50 %: 63.4 ->
/// 69.4 %) and in 5 x 128 at Range 40 and 50 %, and falls at 5 x 128,
/// Range 10-30 % (80.3 -> 78.5 % at 30 %), where the every-gap
/// crossing reads higher (+2.6 %); the every-gap crossing alone (the
/// paper's rule) lost 5.5 points there.
pub const EVERY_GAP_WEIGHT: f64 = 0.7;

/// [`Consistency::Bracket`]'s weight on the every-gap crossing: where
/// the receiver stamped in batches ([`Multipass::batched`]),
/// [`EVERY_GAP_WEIGHT`]; where it stamped packets one by one, the
/// midpoint, which reads such paths without bias: on the lab's real
/// packets (`lab run SC --repeat 10 --method auto`, two rounds of
/// bursty40, onoff4x, rtt5-bursty, rtt30-bursty and smoothed beside the
/// build before) the midpoint's signed median error was -0.4 to +1.6 %
/// and 0.7's -0.1 to +4.6 % (bursty40's p90 6.4-6.9 -> 11.0-11.4 %): a
/// drain between bursts that a batch hides breaks an every-gap run
/// where each packet is stamped.
pub fn every_gap_weight(batched: bool) -> f64 {
    if batched {
        EVERY_GAP_WEIGHT
    } else {
        0.5
    }
}

/// Where the persistent-queueing run starts under the cumulative rule:
/// the first gap `k` after which the cumulative excess
/// `sum_(i=k..j) (recv_i - send_i (1 + tol))` stays positive for every
/// `j`, provided the run is at least `min_suffix` gaps long and its total
/// excess is at least two mean send gaps (the quantisation left by
/// coalescence is about one send gap). `g.len()` when there is none.
pub fn cumulative_crossing(g: &[Gap], tol: f64, min_suffix: usize) -> usize {
    // With prefix sums P[0..=n] of the excess, the first k whose P[k] lies
    // below every later P is the last place the global minimum is reached
    // (any earlier k has that minimum after it); when that place is n,
    // no run exists. No allocation. The sums run once in order (so each P
    // is the same number whatever the block size); each block's minimum
    // is kept in four lanes, off the chain of sums, and only the last
    // block that reaches the global minimum is summed again to find where.
    const BLOCK: usize = 32;
    let n = g.len();
    let excess = |x: &Gap| x.recv_ns - x.send_ns * (1.0 + tol);
    let mut acc = 0.0f64;
    // P[0] = 0 is the minimum until a block goes as low.
    let (mut min, mut best_start, mut best_acc) = (0.0f64, None, 0.0f64);
    for (b, block) in g.chunks(BLOCK).enumerate() {
        let start_acc = acc;
        let mut lanes = [f64::INFINITY; 4];
        for (i, x) in block.iter().enumerate() {
            acc += excess(x);
            lanes[i % 4] = lanes[i % 4].min(acc);
        }
        let block_min = lanes[0].min(lanes[1]).min(lanes[2].min(lanes[3]));
        if block_min <= min {
            min = block_min;
            best_start = Some(b * BLOCK);
            best_acc = start_acc;
        }
    }
    let mut k = 0usize;
    if let Some(start) = best_start {
        let mut p = best_acc;
        for (i, x) in g[start..(start + BLOCK).min(n)].iter().enumerate() {
            p += excess(x);
            if p <= min {
                k = start + i + 1;
            }
        }
    }
    if k >= n {
        return n;
    }
    let len = n - k;
    let send: f64 = g[k..].iter().map(|x| x.send_ns).sum();
    let excess = acc - min;
    if len >= min_suffix.min(n) && excess >= 2.0 * send / len as f64 {
        k
    } else {
        n
    }
}

/// Total excess of receive over send time, `sum(recv - send (1 + tol))`.
fn excess_ns(g: &[Gap], tol: f64) -> f64 {
    g.iter().map(|x| x.recv_ns - x.send_ns * (1.0 + tol)).sum()
}

/// The estimate from smoothed gaps (see the module docs).
pub fn estimate_from_smoothed(
    smoothed: &Multipass,
    subs: &[SubStream],
    rule: Consistency,
    exceed_tolerance: f64,
    min_suffix: usize,
) -> Option<Estimate> {
    // Both rules may need the extreme rates: found once.
    let mut extremes = None;
    let mut one = |r, skip| {
        estimate_one_rule(
            smoothed,
            subs,
            r,
            exceed_tolerance,
            min_suffix,
            skip,
            &mut extremes,
        )
    };
    let skip = smoothed.first_batch_gaps;
    match rule {
        Consistency::EveryGap | Consistency::Cumulative => one(rule, skip),
        Consistency::Bracket => {
            let every = one(Consistency::EveryGap, 0);
            let cumulative = one(Consistency::Cumulative, skip);
            // Whether the queue grew from the first packet on, read with
            // the first receive batch in: a truth under the lowest rate
            // reads "at most" as it did before that batch was left out
            // (left out, a few of those streams crossed a few gaps into
            // the lowest sub-stream and answered it exact: 96.2 -> 94.7 %
            // of such streams bounded right on the bursty path).
            // (Read only where it can decide: the every-gap run starts in
            // the lowest sub-stream.)
            let from_start = (skip > 0
                && every.is_some_and(|e| e.bound == Bound::Exact)
                && every_gap_run_starts_in_first_sub_stream(
                    &smoothed.gaps,
                    subs,
                    exceed_tolerance,
                ))
            .then(|| one(Consistency::Cumulative, 0))
            .flatten()
            .filter(|c| c.bound == Bound::AtMost);
            if from_start.is_some() {
                return from_start;
            }
            match (every, cumulative) {
                (Some(e), Some(c)) if e.bound == Bound::Exact && c.bound == Bound::Exact => {
                    Some(Estimate {
                        abw_bps: {
                            let w = every_gap_weight(smoothed.batched);
                            w * e.abw_bps + (1.0 - w) * c.abw_bps
                        },
                        bound: Bound::Exact,
                        low_bps: e.low_bps.min(c.low_bps),
                        high_bps: e.high_bps.max(c.high_bps),
                    })
                }
                // Only the cumulative rule found a crossing (a drain broke
                // every run): its crossing stands.
                (Some(e), Some(c)) if c.bound == Bound::Exact && e.bound == Bound::AtLeast => {
                    Some(c)
                }
                // The every-gap run starts inside the lowest sub-stream
                // and the cumulative rule says the queue grew from the
                // first gap and never drained back: both put the queue's
                // start at the lowest rate, so the available bandwidth
                // is at most that rate (answered as a rate inside the
                // first sub-stream, this was an exact number for a third
                // of the streams whose truth lay under the lowest rate).
                (Some(e), Some(c))
                    if e.bound == Bound::Exact
                        && c.bound == Bound::AtMost
                        && every_gap_run_starts_in_first_sub_stream(
                            &smoothed.gaps,
                            subs,
                            exceed_tolerance,
                        ) =>
                {
                    Some(c)
                }
                (e, _) => e,
            }
        }
    }
}

/// Whether the last gap before the final exceeding run ends inside the
/// first sub-stream.
fn every_gap_run_starts_in_first_sub_stream(g: &[Gap], subs: &[SubStream], tol: f64) -> bool {
    let k = g.len() - exceeding_suffix(g, tol);
    k > 0 && subs.len() >= 2 && (g[k - 1].end_packet as usize) < subs[1].start
}

/// When the crossing lies inside a sub-stream `j` (the smoothed rate just
/// before the exceeding run is that sub-stream's own rate, not a blend of
/// two neighbours), the queue at rate `r_j` took a while to show (a token
/// bucket's burst or an idle queue absorbed the start), so the stream only
/// says the truth lies between `r_{j-1}` (no queue) and `r_j` (queue).
/// Within that bracket, the receive rate over the exceeding run is an
/// upper bound nearer the truth: a FIFO of capacity C shared with cross
/// traffic X delivers probes at `r C / (r + X)`, which lies between
/// `C - X` and `r` for `r > C - X`, and equals C on an idle tight link.
/// Answering `r_j` itself biased every answer up by up to one rate step
/// (+5 % on a bare tbf in the lab, the same on every run, because the next
/// stream is centred on the answer and has a rate exactly there).
/// `k` is the last gap before the run.
fn bracket_interior_crossing(g: &[Gap], k: usize, subs: &[SubStream], e: Estimate) -> Estimate {
    let packet = g[k].end_packet as usize;
    let Some(j) = subs
        .iter()
        .position(|s| s.start <= packet && packet < s.end)
    else {
        return e;
    };
    if j == 0 {
        return e;
    }
    let (below, at) = (subs[j - 1].rate_bps, subs[j].rate_bps);
    // "Its own rate": within a quarter of the step to the rate below.
    if (e.abw_bps - at).abs() > 0.25 * (at - below) {
        return e;
    }
    let Some(recv_bps) = delivered_bps(&g[k + 1..]) else {
        return e;
    };
    Estimate {
        abw_bps: recv_bps.clamp(below, at),
        bound: Bound::Exact,
        low_bps: below,
        high_bps: at,
    }
}

/// Runs shorter than this many gaps do not cap the answer: a run's
/// receive rate then moves by a cross frame more or less (the lab's CBR
/// frames: a 16-gap run on cbr60 delivered at 66.7 Mbit/s where 80 were
/// free).
const CAP_MIN_RUN_GAPS: usize = 32;
/// Nor does a run whose halves were delivered at rates this far apart:
/// it met a burst, and what it delivered is the burst's share, under the
/// stream's mean available bandwidth.
const CAP_HALVES_AGREE: f64 = 0.05;

/// The rate `run`'s packets arrived at: their bits over its receive gaps.
fn delivered_bps(run: &[Gap]) -> Option<f64> {
    let ns: f64 = run.iter().map(|x| x.recv_ns).sum();
    let bits: f64 = run.iter().map(|x| 8.0 * x.recv_bytes).sum();
    (ns > 0.0).then(|| bits / ns * 1e9)
}

/// A crossing on a sub-stream boundary answers the rate before the
/// exceeding run, capped at the rate the run was delivered at: a FIFO of
/// capacity C with cross traffic X delivers probes sent at r > C - X at
/// r C / (r + X), never under C - X, so that rate bounds the available
/// bandwidth from above. A token bucket can hide the queue of the
/// sub-stream one step above the truth (a 3000-byte tbf bucket takes a
/// 32-packet sub-stream at 5 % over 200 Mbit/s whole), and the answer
/// was that step: on the lab's bare 200 Mbit/s tbf runs read 205-212
/// Mbit/s, the run's receive rate 200. Not under the lowest rate probed
/// (`subs` in rising order); the range then runs from the capped answer
/// to the rate before the run.
fn at_most_the_run_delivered(run: &[Gap], subs: &[SubStream], e: Estimate) -> Estimate {
    let Some(lowest) = subs.first().map(|s| s.rate_bps) else {
        return e;
    };
    if run.len() < CAP_MIN_RUN_GAPS {
        return e;
    }
    let (first, second) = run.split_at(run.len() / 2);
    let (Some(all), Some(a), Some(b)) = (
        delivered_bps(run),
        delivered_bps(first),
        delivered_bps(second),
    ) else {
        return e;
    };
    if (a - b).abs() > CAP_HALVES_AGREE * a.max(b) {
        return e;
    }
    let capped = all.max(lowest);
    if capped < e.abw_bps {
        Estimate {
            abw_bps: capped,
            low_bps: capped.min(e.low_bps),
            ..e
        }
    } else {
        e
    }
}

/// The lowest and highest smoothed probing rate of `g` (`None` when no gap
/// has one). Four independent lanes: `min` and `max` are exact in any
/// order, and the divisions need not wait for one another.
fn rate_extremes(g: &[Gap]) -> Option<(f64, f64)> {
    let mut lo = [f64::INFINITY; 4];
    let mut hi = [f64::NEG_INFINITY; 4];
    let mut take = |l: usize, x: &Gap| {
        if let Some(r) = smoothed_rate(x) {
            lo[l] = lo[l].min(r);
            hi[l] = hi[l].max(r);
        }
    };
    let mut chunks = g.chunks_exact(4);
    for c in &mut chunks {
        for (l, x) in c.iter().enumerate() {
            take(l, x);
        }
    }
    for (l, x) in chunks.remainder().iter().enumerate() {
        take(l, x);
    }
    let lo = lo.into_iter().fold(f64::INFINITY, f64::min);
    let hi = hi.into_iter().fold(f64::NEG_INFINITY, f64::max);
    // Rates are finite, so an infinite extreme means none was seen.
    (hi.is_finite()).then_some((lo, hi))
}

/// One rule's estimate; the cumulative rule takes its level after the
/// first `skip` smoothed gaps ([`Multipass::first_batch_gaps`]).
fn estimate_one_rule(
    smoothed: &Multipass,
    subs: &[SubStream],
    rule: Consistency,
    exceed_tolerance: f64,
    min_suffix: usize,
    skip: usize,
    extremes: &mut Option<Option<(f64, f64)>>,
) -> Option<Estimate> {
    let g = &smoothed.gaps;
    if g.len() < 2 {
        return None;
    }
    let shortest = min_suffix.min(g.len());
    let suffix = match rule {
        Consistency::EveryGap | Consistency::Bracket => {
            let run = exceeding_suffix(g, exceed_tolerance);
            // As for the cumulative rule: a run must add up to some
            // excess. An interrupt interval beating with the send gap
            // reads a few percent slow for a dozen gaps and then fast
            // again; such a run at the end of a stream (under one mean
            // send gap of excess in all) answered an exact rate inside
            // the range for 40 % of streams whose truth lay above it.
            // (A run shorter than `shortest` is dropped below anyway.)
            let k = g.len() - run;
            if run < shortest || excess_ns(&g[k..], exceed_tolerance) < mean_send_gap_ns(g) {
                0
            } else {
                run
            }
        }
        Consistency::Cumulative => {
            // Where the first receive batch's stamps came late against
            // a first packet stamped at once, the level to return to is
            // taken after that batch; a crossing there is the start.
            let skip = skip.min(g.len());
            let k = skip + cumulative_crossing(&g[skip..], exceed_tolerance, min_suffix);
            if k == skip {
                g.len()
            } else {
                g.len() - k
            }
        }
    };
    let suffix = if suffix < shortest { 0 } else { suffix };
    let k = g.len() - suffix;
    if suffix == 0 || k == 0 {
        let (min, max) = (*extremes.get_or_insert_with(|| rate_extremes(g)))?;
        return Some(if suffix == 0 {
            Estimate::single(max, Bound::AtLeast)
        } else {
            Estimate::single(min, Bound::AtMost)
        });
    }
    smoothed_rate(&g[k - 1]).map(|abw_bps| {
        let e = bracket_interior_crossing(g, k - 1, subs, Estimate::single(abw_bps, Bound::Exact));
        if e.abw_bps == abw_bps {
            at_most_the_run_delivered(&g[k..], subs, e)
        } else {
            e
        }
    })
}

/// Whether sub-stream rates strictly increase through the stream.
pub fn rates_increase(subs: &[SubStream]) -> bool {
    subs.windows(2).all(|w| w[1].rate_bps > w[0].rate_bps)
}

/// PRC-MT + BASS on each sub-stream, in rate order. `None` where a
/// sub-stream could not be decided.
pub fn per_rate_decisions(
    stream: &ProbeStream,
    subs: &[SubStream],
    bass: BassParams,
    tolerance: f64,
) -> Vec<Option<Decision>> {
    let mut buf = Vec::new();
    subs.iter()
        .map(|s| {
            buf.clear();
            stream.gaps_into(s.start, s.end, &mut buf);
            prcmt_after_bass(&buf, bass, tolerance)
                .ok()
                .map(|(o, _)| o.decision)
        })
        .collect()
}

/// Decision policy for Multi-rate PRC-MT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// The last rate before the first rate judged above.
    Dp1,
    /// The last rate judged below.
    Dp2,
}

/// Applies a policy to per-rate decisions (`rates` ascending). Undecided
/// rates are skipped; with no decided rate there is no estimate.
pub fn apply_policy(
    rates: &[f64],
    decisions: &[Option<Decision>],
    policy: Policy,
) -> Option<Estimate> {
    let decided: Vec<(f64, Decision)> = rates
        .iter()
        .zip(decisions)
        .filter_map(|(&r, d)| d.map(|d| (r, d)))
        .collect();
    let (&(lowest, _), &(highest, _)) = (decided.first()?, decided.last()?);
    let exact = |abw_bps| Estimate::single(abw_bps, Bound::Exact);
    match policy {
        Policy::Dp1 => match decided.iter().position(|&(_, d)| d == Decision::Above) {
            None => Some(Estimate::single(highest, Bound::AtLeast)),
            Some(0) => Some(Estimate::single(lowest, Bound::AtMost)),
            Some(f) => Some(exact(decided[f - 1].0)),
        },
        Policy::Dp2 => match decided.iter().rposition(|&(_, d)| d == Decision::Below) {
            None => Some(Estimate::single(lowest, Bound::AtMost)),
            Some(l) if l == decided.len() - 1 => Some(Estimate::single(highest, Bound::AtLeast)),
            Some(l) => Some(exact(decided[l].0)),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Decision::*;

    /// Two sub-streams of 1000-byte packets: ten gaps of 100 ns (80
    /// Gbit/s, packets 1..=10) and twenty of 80 ns (100 Gbit/s, packets
    /// 11..=30). The queue shows only from gap 15 on, inside the second
    /// sub-stream, with receive gaps of `recv` ns (16 gaps of 8.9 ns
    /// excess at 90 Gbit/s: 142 ns, over one mean send gap). Every-gap alone would
    /// answer 100 Gbit/s (the rate just before the run); the stream says
    /// the truth is in (80, 100], and the run's receive rate, 8000 bits per
    /// `recv` ns, is the answer when it falls inside, clamped otherwise.
    /// Gaps of 1000-byte packets 1..=`n`, `(send_ns, recv_ns)` of each
    /// from `at`, read as one smoothing pass.
    fn gaps_1000(n: u32, at: impl Fn(u32) -> (f64, f64)) -> Multipass {
        let gaps = (1..=n)
            .map(|p| {
                let (send_ns, recv_ns) = at(p);
                Gap {
                    send_ns,
                    recv_ns,
                    sent_bytes: 1000.0,
                    recv_bytes: 1000.0,
                    end_packet: p,
                }
            })
            .collect();
        Multipass {
            gaps,
            passes: 1,
            robust: true,
            batched: false,
            first_batch_gaps: 0,
        }
    }

    /// Sub-streams from `(start, end, rate_bps)`.
    fn sub_streams<const N: usize>(s: [(usize, usize, f64); N]) -> [SubStream; N] {
        s.map(|(start, end, rate_bps)| SubStream {
            start,
            end,
            rate_bps,
        })
    }

    #[test]
    fn a_crossing_inside_a_sub_stream_is_bracketed() {
        let stream = |recv: f64| {
            gaps_1000(30, |p| {
                let send = if p <= 10 { 100.0 } else { 80.0 };
                (send, if p >= 15 { recv } else { send })
            })
        };
        let subs = sub_streams([(0, 11, 80e9), (11, 31, 100e9)]);
        let rule = Consistency::EveryGap;
        let plain = estimate_from_smoothed(&stream(8000.0 / 90.0), &[], rule, 0.0, 2).unwrap();
        assert!((plain.abw_bps - 100e9).abs() < 1.0);
        let e = estimate_from_smoothed(&stream(8000.0 / 90.0), &subs, rule, 0.0, 2).unwrap();
        assert_eq!(e.bound, Bound::Exact);
        assert!((e.abw_bps - 90e9).abs() < 1e3, "{e:?}");
        assert!((e.low_bps - 80e9).abs() < 1.0 && (e.high_bps - 100e9).abs() < 1.0);
        // A run that delivers slower than the lower rate: clamped to it.
        let slow = estimate_from_smoothed(&stream(200.0), &subs, rule, 0.0, 2).unwrap();
        assert!((slow.abw_bps - 80e9).abs() < 1.0);
        // A crossing at the boundary (the queue shows from gap 11, the
        // first of the faster sub-stream): the answer stays 80 Gbit/s,
        // the rate just before, as in the paper.
        let mut m = stream(8000.0 / 90.0);
        for g in &mut m.gaps[10..14] {
            g.recv_ns = 8000.0 / 90.0;
        }
        let at_edge = estimate_from_smoothed(&m, &subs, rule, 0.0, 2).unwrap();
        assert!((at_edge.abw_bps - 80e9).abs() < 1.0, "{at_edge:?}");
    }

    /// A bucket hid the queue of the middle sub-stream: 1000-byte
    /// packets, 10 gaps at 80 Gbit/s (100 ns), 10 at 100 (80 ns) that
    /// passed whole, the last of them smoothed towards the next rate (75
    /// ns, 106.7 Gbit/s: not the sub-stream's own rate, so the bracket
    /// above does not apply), then `n` at 120 (66.7 ns) delivered at 90
    /// (88.9 ns each). The answer was 106.7, the rate before the run;
    /// with 40 gaps it is the run's 90; with 20 (under the 32 that
    /// count) it stays 106.7, and so it does when the run's second half
    /// was delivered at 80 (100 ns), a burst's doing.
    #[test]
    fn a_boundary_answer_is_at_most_what_the_run_delivered() {
        let stream = |n: u32, second_half_ns: f64| {
            gaps_1000(20 + n, |p| {
                let send = match p {
                    1..=10 => 100.0,
                    11..=19 => 80.0,
                    20 => 75.0,
                    _ => 8000.0 / 120.0,
                };
                let recv = match p {
                    1..=20 => send,
                    _ if p > 20 + n / 2 => second_half_ns,
                    _ => 8000.0 / 90.0,
                };
                (send, recv)
            })
        };
        let subs = |n: usize| sub_streams([(0, 11, 80e9), (11, 21, 100e9), (21, 21 + n, 120e9)]);
        let rule = Consistency::EveryGap;
        let steady = 8000.0 / 90.0;
        let e = estimate_from_smoothed(&stream(40, steady), &subs(40), rule, 0.0, 2).unwrap();
        assert_eq!(e.bound, Bound::Exact);
        assert!((e.abw_bps - 90e9).abs() < 1e3, "{e:?}");
        assert!(e.low_bps <= e.abw_bps && e.abw_bps <= e.high_bps, "{e:?}");
        let before = 8000.0 / 75.0 * 1e9;
        let e = estimate_from_smoothed(&stream(20, steady), &subs(20), rule, 0.0, 2).unwrap();
        assert!((e.abw_bps - before).abs() < 1e3, "{e:?}");
        let e = estimate_from_smoothed(&stream(40, 100.0), &subs(40), rule, 0.0, 2).unwrap();
        assert!((e.abw_bps - before).abs() < 1e3, "{e:?}");
    }

    /// Fig. 12(b): rates 1 and 3 below, 2 above, 4 and 5 above.
    /// DP1 picks rate 1 (the last before the first above); DP2 rate 3.
    #[test]
    fn dp1_and_dp2_on_fig_12b() {
        let rates = [5e9, 6e9, 7e9, 8e9, 9e9];
        let d = [
            Some(Below),
            Some(Above),
            Some(Below),
            Some(Above),
            Some(Above),
        ];
        let e1 = apply_policy(&rates, &d, Policy::Dp1).unwrap();
        let e2 = apply_policy(&rates, &d, Policy::Dp2).unwrap();
        assert_eq!((e1.abw_bps, e1.bound), (5e9, Bound::Exact));
        assert_eq!((e2.abw_bps, e2.bound), (7e9, Bound::Exact));
    }

    /// Excess per gap (send 10): [+5, -6, +1, +3, -1, +9, +9] -> prefix
    /// sums 0, 5, -1, 0, 3, 2, 11, 20. The first k whose prefix stays below
    /// every later one is k = 2 (prefix -1 < 0); the run 2..7 is 5 gaps long
    /// with excess 21 >= 2 mean send gaps (20). The every-gap rule only sees
    /// the last two.
    #[test]
    fn cumulative_rule_by_hand() {
        let excess = [5.0, -6.0, 1.0, 3.0, -1.0, 9.0, 9.0];
        let g: Vec<Gap> = excess
            .iter()
            .enumerate()
            .map(|(i, e)| Gap {
                send_ns: 10.0,
                recv_ns: 10.0 + e,
                sent_bytes: 1000.0,
                recv_bytes: 1000.0,
                end_packet: i as u32 + 1,
            })
            .collect();
        assert_eq!(cumulative_crossing(&g, 0.0, 3), 2);
        assert_eq!(crate::smoothing::multipass::exceeding_suffix(&g, 0.0), 2);
        // A run shorter than min_suffix, or with too little excess (first 4
        // gaps: k = 2, excess 4 < 20), is none.
        assert_eq!(cumulative_crossing(&g, 0.0, 6), 7);
        assert_eq!(cumulative_crossing(&g[..4], 0.0, 1), 4);
    }

    /// The same excess pattern with rising rates (send gaps 100, 95, ...
    /// ns of 1000 bytes): every-gap crosses after gap 4 (80 ns, 100 Gbit/s),
    /// cumulative after gap 1 (95 ns, 84.2 Gbit/s); the bracket answers
    /// their midpoint, 92.11 Gbit/s, with the two as its range, and,
    /// read as receive batches, 0.7 x 100 + 0.3 x 84.21 = 95.26.
    #[test]
    fn bracket_weighs_both_rules() {
        // Scaled by 15 so the run's excess clears two mean send gaps.
        let excess = [75.0, -90.0, 15.0, 45.0, -15.0, 135.0, 135.0];
        let gaps: Vec<Gap> = excess
            .iter()
            .enumerate()
            .map(|(i, e)| {
                let send = 100.0 - 5.0 * i as f64;
                Gap {
                    send_ns: send,
                    recv_ns: send + e,
                    sent_bytes: 1000.0,
                    recv_bytes: 1000.0,
                    end_packet: i as u32 + 1,
                }
            })
            .collect();
        let m = Multipass {
            gaps,
            passes: 1,
            robust: true,
            batched: false,
            first_batch_gaps: 0,
        };
        let (lo, hi) = (8000.0 / 95.0 * 1e9, 8000.0 / 80.0 * 1e9);
        let every = estimate_from_smoothed(&m, &[], Consistency::EveryGap, 0.0, 2).unwrap();
        let cum = estimate_from_smoothed(&m, &[], Consistency::Cumulative, 0.0, 2).unwrap();
        let both = estimate_from_smoothed(&m, &[], Consistency::Bracket, 0.0, 2).unwrap();
        assert!((every.abw_bps - hi).abs() < 1.0 && (cum.abw_bps - lo).abs() < 1.0);
        assert_eq!(both.bound, Bound::Exact);
        assert!((both.abw_bps - (lo + hi) / 2.0).abs() < 1.0);
        assert!((both.abw_bps - 92.105e9).abs() < 1e6, "{both:?}");
        let batched = Multipass {
            batched: true,
            first_batch_gaps: 0,
            ..m.clone()
        };
        let b = estimate_from_smoothed(&batched, &[], Consistency::Bracket, 0.0, 2).unwrap();
        assert!((b.abw_bps - (0.7 * hi + 0.3 * lo)).abs() < 1.0);
        assert!((b.abw_bps - 95.263e9).abs() < 1e6, "{b:?}");
        assert_eq!((b.low_bps, b.high_bps), (both.low_bps, both.high_bps));
        assert!((both.low_bps - lo).abs() < 1.0 && (both.high_bps - hi).abs() < 1.0);
        // When the final gap drains, every-gap finds no run (at least) and
        // the cumulative crossing stands alone.
        let mut m2 = m.clone();
        m2.gaps[6].recv_ns = m2.gaps[6].send_ns - 1.0;
        let e2 = estimate_from_smoothed(&m2, &[], Consistency::EveryGap, 0.0, 2).unwrap();
        assert_eq!(e2.bound, Bound::AtLeast);
        let b2 = estimate_from_smoothed(&m2, &[], Consistency::Bracket, 0.0, 2).unwrap();
        let c2 = estimate_from_smoothed(&m2, &[], Consistency::Cumulative, 0.0, 2).unwrap();
        assert_eq!(b2, c2);
        assert_eq!(b2.bound, Bound::Exact);
    }

    proptest::proptest! {
        /// The one-pass crossing equals the definition: the first k whose
        /// prefix sum of excess lies below every later prefix sum (then the
        /// length and excess checks), by brute force.
        #[test]
        fn cumulative_crossing_matches_its_definition(
            excess in proptest::collection::vec(-4i32..5, 0..100),
            min_suffix in 1usize..10,
        ) {
            let g: Vec<Gap> = excess
                .iter()
                .enumerate()
                .map(|(i, &e)| Gap {
                    send_ns: 10.0,
                    recv_ns: 10.0 + e as f64,
                    sent_bytes: 1000.0,
                    recv_bytes: 1000.0,
                    end_packet: i as u32 + 1,
                })
                .collect();
            let n = g.len();
            let prefix: Vec<f64> = std::iter::once(0.0)
                .chain(excess.iter().scan(0.0, |a, &e| {
                    *a += e as f64;
                    Some(*a)
                }))
                .collect();
            let first = (0..n).find(|&k| prefix[k + 1..].iter().all(|&p| prefix[k] < p));
            let want = match first {
                Some(k) if n - k >= min_suffix.min(n)
                    && prefix[n] - prefix[k] >= 2.0 * 10.0 => k,
                _ => n,
            };
            proptest::prop_assert_eq!(cumulative_crossing(&g, 0.0, min_suffix), want);
        }
    }

    proptest::proptest! {
        /// The blocked crossing is the plain one-pass loop's, bit for bit,
        /// on gaps with fractional times across several blocks.
        #[test]
        fn blocked_crossing_equals_the_plain_loop(
            gaps in proptest::collection::vec((1.0f64..20.0, 0.0f64..30.0), 0..150),
            tol in 0.0f64..0.01,
        ) {
            let g: Vec<Gap> = gaps
                .iter()
                .enumerate()
                .map(|(i, &(send_ns, recv_ns))| Gap {
                    send_ns,
                    recv_ns,
                    sent_bytes: 1000.0,
                    recv_bytes: 1000.0,
                    end_packet: i as u32 + 1,
                })
                .collect();
            let (mut acc, mut min, mut k) = (0.0f64, 0.0f64, 0usize);
            for (i, x) in g.iter().enumerate() {
                acc += x.recv_ns - x.send_ns * (1.0 + tol);
                if acc <= min {
                    min = acc;
                    k = i + 1;
                }
            }
            let n = g.len();
            let want = if k >= n {
                n
            } else {
                let send: f64 = g[k..].iter().map(|x| x.send_ns).sum();
                if n - k >= 4.min(n) && acc - min >= 2.0 * send / (n - k) as f64 { k } else { n }
            };
            proptest::prop_assert_eq!(cumulative_crossing(&g, tol, 4), want);
        }

        /// The four-lane extremes are the plain folds'.
        #[test]
        fn rate_extremes_are_the_plain_folds(
            gaps in proptest::collection::vec((0.0f64..20.0, 500.0f64..9000.0), 0..40),
        ) {
            let g: Vec<Gap> = gaps
                .iter()
                .map(|&(send_ns, sent_bytes)| Gap {
                    send_ns,
                    recv_ns: send_ns,
                    sent_bytes,
                    recv_bytes: sent_bytes,
                    end_packet: 0,
                })
                .collect();
            let rates: Vec<f64> = g.iter().filter_map(smoothed_rate).collect();
            let want = (!rates.is_empty()).then(|| {
                (rates.iter().copied().fold(f64::NAN, f64::min),
                 rates.iter().copied().fold(f64::NAN, f64::max))
            });
            proptest::prop_assert_eq!(rate_extremes(&g), want);
        }
    }

    /// Gaps of 1000 B sent 100 ns apart (80 Gbit/s), receive gaps
    /// `100 * (1 + excess_pct / 100)`, gap `i` ending at packet `i + 1`.
    fn gaps_with_excess(excess_pct: &[f64]) -> Multipass {
        Multipass {
            gaps: excess_pct
                .iter()
                .enumerate()
                .map(|(i, e)| Gap {
                    send_ns: 100.0,
                    recv_ns: 100.0 + e,
                    sent_bytes: 1000.0,
                    recv_bytes: 1000.0,
                    end_packet: i as u32 + 1,
                })
                .collect(),
            passes: 1,
            robust: false,
            batched: false,
            first_batch_gaps: 0,
        }
    }

    /// The first receive batch stamped late against a first packet
    /// stamped at once: gaps 0-3 at +40 ns each (160 ns ahead), 4-23 at
    /// the send gap (100 ns), 24-39 at +20 ns (a queue growing from gap
    /// 24). From the first packet the level never comes back to 0 (with
    /// the 0.5 % tolerance the sums are 158 at gap 3 and 148 at gap 23),
    /// so the cumulative rule says "at most" from the start; with the
    /// first four gaps left out the level falls to -10 at gap 23, the
    /// queue adds 16 x 19.5 = 312 ns (over two send gaps) and the crossing
    /// is gap 24, as the every-gap rule's. A queue from the first gap
    /// after the batch still reads "at most".
    #[test]
    fn the_cumulative_rule_leaves_out_the_first_batch() {
        let mut excess = vec![40.0; 4];
        excess.extend([0.0; 20]);
        excess.extend([20.0; 16]);
        let mut m = gaps_with_excess(&excess);
        let rule = Consistency::Cumulative;
        let plain = estimate_from_smoothed(&m, &[], rule, 0.005, 8).unwrap();
        assert_eq!(plain.bound, Bound::AtMost);
        m.first_batch_gaps = 4;
        let left_out = estimate_from_smoothed(&m, &[], rule, 0.005, 8).unwrap();
        assert_eq!(left_out.bound, Bound::Exact);
        let every = estimate_from_smoothed(&m, &[], Consistency::EveryGap, 0.005, 8).unwrap();
        assert_eq!(left_out, every);
        let mut from_start = vec![40.0; 4];
        from_start.extend([20.0; 36]);
        let mut m = gaps_with_excess(&from_start);
        m.first_batch_gaps = 4;
        let e = estimate_from_smoothed(&m, &[], rule, 0.005, 8).unwrap();
        assert_eq!(e.bound, Bound::AtMost);
    }

    /// 30 gaps swinging +-3 %, then 10 at +3 %: the run is 10 gaps long
    /// (over the 8 asked) but adds up to 10 x (103 - 100.5) = 25 ns, under
    /// one mean send gap (100 ns): what coalescence leaves, not a queue,
    /// so at least the top rate. At +20 % it adds up to 195 ns: exact.
    #[test]
    fn a_run_must_add_up_to_a_send_gap_of_excess() {
        let mut excess: Vec<f64> = (0..30)
            .map(|i| if i % 6 < 3 { 3.0 } else { -3.0 })
            .collect();
        excess.extend([3.0; 10]);
        let every_gap = |excess: &[f64]| {
            estimate_from_smoothed(
                &gaps_with_excess(excess),
                &[],
                Consistency::EveryGap,
                0.005,
                8,
            )
            .unwrap()
        };
        assert_eq!(every_gap(&excess).bound, Bound::AtLeast);
        excess[30..].fill(20.0);
        let e = every_gap(&excess);
        assert_eq!(e.bound, Bound::Exact);
    }

    /// Two sub-streams, packets 0-19 and 20-40. Gap 0 +20 %, gap 1 -1 %,
    /// gaps 2-39 +10 %: the every-gap run starts after gap 1 (packet 2, in
    /// the first sub-stream) and the cumulative excess (19.5, 18, then
    /// rising) never falls back to 0: at most. The bracket answers at
    /// most. With gaps 1-24 at -1 % after a +200 % gap 0 the cumulative
    /// rule still says at most (199.5 - 24 x 1.5 > 0), but the run starts
    /// after packet 25, in the second sub-stream: the every-gap crossing
    /// stands.
    #[test]
    fn a_queue_from_the_lowest_rate_on_is_at_most() {
        let subs = [
            SubStream {
                start: 0,
                end: 20,
                rate_bps: 80e9,
            },
            SubStream {
                start: 20,
                end: 41,
                rate_bps: 90e9,
            },
        ];
        let mut excess = vec![10.0; 40];
        excess[0] = 20.0;
        excess[1] = -1.0;
        let m = gaps_with_excess(&excess);
        let c = estimate_from_smoothed(&m, &subs, Consistency::Cumulative, 0.005, 8).unwrap();
        assert_eq!(c.bound, Bound::AtMost);
        let every = estimate_from_smoothed(&m, &subs, Consistency::EveryGap, 0.005, 8).unwrap();
        assert_eq!(every.bound, Bound::Exact);
        let b = estimate_from_smoothed(&m, &subs, Consistency::Bracket, 0.005, 8).unwrap();
        assert_eq!(b.bound, Bound::AtMost);
        excess[0] = 200.0;
        excess[1..25].fill(-1.0);
        let m = gaps_with_excess(&excess);
        let c = estimate_from_smoothed(&m, &subs, Consistency::Cumulative, 0.005, 8).unwrap();
        assert_eq!(c.bound, Bound::AtMost);
        let b = estimate_from_smoothed(&m, &subs, Consistency::Bracket, 0.005, 8).unwrap();
        assert_eq!(b.bound, Bound::Exact);
    }

    #[test]
    fn policies_at_the_edges() {
        let rates = [5e9, 6e9, 7e9];
        let all_below = [Some(Below); 3];
        let all_above = [Some(Above); 3];
        for p in [Policy::Dp1, Policy::Dp2] {
            let e = apply_policy(&rates, &all_below, p).unwrap();
            assert_eq!((e.abw_bps, e.bound), (7e9, Bound::AtLeast));
            let e = apply_policy(&rates, &all_above, p).unwrap();
            assert_eq!((e.abw_bps, e.bound), (5e9, Bound::AtMost));
            assert!(apply_policy(&rates, &[None; 3], p).is_none());
        }
        // An undecided rate is skipped: below, ?, above -> DP1 picks 5.
        let e = apply_policy(&rates, &[Some(Below), None, Some(Above)], Policy::Dp1).unwrap();
        assert_eq!(e.abw_bps, 5e9);
    }
}
