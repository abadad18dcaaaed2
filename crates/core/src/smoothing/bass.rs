//! Buffering-Aware Spike Smoothing, single pass (\[BASS\], section V-A,
//! Algorithm 1 / Fig. 9).
//!
//! A *buffering event* is a spike in the receive gaps (a packet that waited
//! while a resource was busy: interrupt coalescence, a cross-traffic burst)
//! followed by the dips of the packets queued behind it, up to the next
//! spike. BASS finds the events, drops the incomplete ones at both ends of the
//! stream (the head before the first spike never showed its spike; the tail
//! after the last spike never showed its end) and averages send and receive
//! gaps within each complete event. Averaging inside an event keeps each
//! event's total time, so sums over kept events are preserved exactly.
//!
//! Thresholds are scaled to the stream: `SPIKE_UP = spike_up * g` and
//! `SPIKE_DOWN = spike_down * g`, with `g` the mean send gap of the input
//! (the paper gives no values; docs/evaluation.md gives their sensitivity).
//!
//! Two readings of the garbled pseudo-code were settled from the text: the
//! head segment before the first spike is dropped, not averaged (text: "(ii)
//! eliminate data related to incomplete spikes at either ends"), and the
//! trailing event is dropped in a first pass (it cannot be shown complete).
//! A stream that shows no spike at all had no buffering event: it is kept
//! whole and unsmoothed.

use crate::stream::Gap;
use std::ops::Range;

/// SPIKE_UP / SPIKE_DOWN as multiples of the mean send gap.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BassParams {
    /// A receive gap that exceeds its predecessor by more than this many send
    /// gaps starts a spike.
    pub spike_up: f64,
    /// A spike becomes a buffering event once a later gap falls more than
    /// this many send gaps below the spike's maximum (the first dip).
    pub spike_down: f64,
}

impl Default for BassParams {
    fn default() -> Self {
        BassParams {
            spike_up: 1.0,
            spike_down: 0.5,
        }
    }
}

/// What a BASS pass found in a gap series.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BassEvents {
    /// Complete buffering events, as index ranges into the input gaps.
    pub events: Vec<Range<usize>>,
    /// Everything kept, in order: the events and the ordinary gaps between
    /// them (gaps outside any buffering event are kept as they are).
    pub kept: Vec<Range<usize>>,
    /// Whether any spike was seen at all.
    pub spikes_found: bool,
}

impl BassEvents {
    /// Number of input gaps kept.
    pub fn kept_gaps(&self) -> usize {
        self.kept.iter().map(|r| r.len()).sum()
    }
}

/// Spike detection state (Algorithm 1's `spike_state`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    None,
    Pending,
    Valid,
}

/// A head before the first spike whose receive time is under this share of
/// its send time is the dips of an earlier buffering event (incomplete).
pub const HEAD_DIP_SHARE: f64 = 0.5;

/// Finds buffering events given absolute thresholds (ns).
///
/// An event starts at a spike, becomes valid at its first dip, and ends at
/// the next spike (Algorithm 1), or at the first ordinary gap (not a dip:
/// receive gap at least half the send gap) after it has drained, i.e. once
/// the receive time since the spike no longer exceeds the send time: the
/// backlog the spike stood for is gone. Under coalescence every gap of a
/// batch is a dip, so events run to the next spike as in the paper; where
/// spikes are rare (a late-sent packet, one burst) this keeps one spike from
/// swallowing the rest of the stream. A trailing event is complete once it
/// has drained.
///
/// With `keep_ends` (later multi-pass passes, where the ends were already
/// cleaned) the head and a valid trailing event are kept; otherwise a head
/// that looks like dips and a trailing event that never drained are
/// dropped as incomplete.
pub fn find_events(
    gaps: &[Gap],
    spike_up_ns: f64,
    spike_down_ns: f64,
    keep_ends: bool,
) -> BassEvents {
    let mut out = BassEvents::default();
    find_events_into(gaps, spike_up_ns, spike_down_ns, keep_ends, &mut out);
    out
}

/// [`find_events`] into `out` (cleared first), reusing its memory.
pub fn find_events_into(
    gaps: &[Gap],
    spike_up_ns: f64,
    spike_down_ns: f64,
    keep_ends: bool,
    out: &mut BassEvents,
) {
    let n = gaps.len();
    out.events.clear();
    out.kept.clear();
    out.spikes_found = false;
    // Under coalescence an event every 5-15 gaps: room for them up front.
    out.events.reserve(n / 4 + 1);
    out.kept.reserve(n / 2 + 2);
    if n < 2 {
        out.kept.push(0..n);
        return;
    }
    let recv = |i: usize| gaps[i].recv_ns;
    let mut state = State::None;
    let mut begin = 0usize;
    let mut spike_max = 0.0f64;
    let mut excess = 0.0f64;
    let mut drained = false;
    // Start of the ordinary run in progress (outside events).
    let mut plain_start = 0usize;
    let mut first_spike: Option<usize> = None;
    let mut start = 0usize;
    // The stream may open on a spike: gap 0 followed by a dip is complete.
    if recv(0) > recv(1) + spike_down_ns {
        state = State::Valid;
        spike_max = recv(0);
        excess = gaps[0].recv_ns - gaps[0].send_ns;
        first_spike = Some(0);
        start = 1;
    }
    let close_plain = |out: &mut BassEvents, from: usize, to: usize| {
        if to > from {
            out.kept.push(from..to);
        }
    };
    for i in start..n {
        let r = recv(i);
        match state {
            State::None => {}
            State::Pending => {
                if i > begin {
                    excess += gaps[i].recv_ns - gaps[i].send_ns;
                }
                spike_max = spike_max.max(r);
                if r + spike_down_ns < spike_max {
                    state = State::Valid;
                }
            }
            State::Valid => {
                if drained && gaps[i].recv_ns >= HEAD_DIP_SHARE * gaps[i].send_ns {
                    // Drained and no longer dipping: ordinary gaps again.
                    out.events.push(begin..i);
                    out.kept.push(begin..i);
                    state = State::None;
                    plain_start = i;
                } else {
                    if i > begin {
                        excess += gaps[i].recv_ns - gaps[i].send_ns;
                    }
                    drained |= excess <= 0.0;
                }
            }
        }
        // A new spike ends what came before it.
        if i + 1 < n && r + spike_up_ns < recv(i + 1) && state != State::Pending {
            match state {
                State::Valid => {
                    out.events.push(begin..i + 1);
                    out.kept.push(begin..i + 1);
                }
                State::None => {
                    if first_spike.is_none() {
                        // The head: incomplete if it looks like dips.
                        let (s, v) = gaps[..i + 1]
                            .iter()
                            .fold((0.0, 0.0), |(s, v), g| (s + g.send_ns, v + g.recv_ns));
                        if keep_ends || v >= HEAD_DIP_SHARE * s {
                            close_plain(out, 0, i + 1);
                        }
                    } else {
                        close_plain(out, plain_start, i + 1);
                    }
                }
                State::Pending => unreachable!(),
            }
            first_spike.get_or_insert(i + 1);
            out.spikes_found = true;
            state = State::Pending;
            begin = i + 1;
            spike_max = recv(i + 1);
            excess = gaps[i + 1].recv_ns - gaps[i + 1].send_ns;
            drained = false;
        }
    }
    match state {
        State::None => {
            if first_spike.is_none() {
                out.kept.push(0..n);
            } else {
                close_plain(out, plain_start, n);
            }
        }
        // A trailing event is complete once drained; else incomplete.
        State::Valid if keep_ends || drained => {
            out.events.push(begin..n);
            out.kept.push(begin..n);
        }
        _ => {}
    }
    out.spikes_found |= first_spike.is_some();
}

/// Whether [`find_events`] with these thresholds would see any spike:
/// a gap that opens the series above its successor by `spike_down_ns`, or
/// one that exceeds its predecessor by `spike_up_ns`. Without one, it finds
/// no event; this scan costs a fraction of the state machine's.
pub fn any_spike(gaps: &[Gap], spike_up_ns: f64, spike_down_ns: f64) -> bool {
    if gaps.len() < 2 {
        return false;
    }
    gaps[0].recv_ns > gaps[1].recv_ns + spike_down_ns
        || gaps
            .windows(2)
            .any(|w| w[0].recv_ns + spike_up_ns < w[1].recv_ns)
}

/// Mean send gap of a series, ns (0 for an empty one).
pub fn mean_send_gap_ns(gaps: &[Gap]) -> f64 {
    if gaps.is_empty() {
        0.0
    } else {
        gaps.iter().map(|g| g.send_ns).sum::<f64>() / gaps.len() as f64
    }
}

/// One BASS pass over `gaps`: complete buffering events, ends dropped.
pub fn bass_events(gaps: &[Gap], params: BassParams) -> BassEvents {
    let mut out = BassEvents::default();
    bass_events_into(gaps, params, &mut out);
    out
}

/// [`bass_events`] into `out`, reusing its memory.
pub fn bass_events_into(gaps: &[Gap], params: BassParams, out: &mut BassEvents) {
    let scale = mean_send_gap_ns(gaps).abs();
    find_events_into(
        gaps,
        params.spike_up * scale,
        params.spike_down * scale,
        false,
        out,
    );
}

/// Replaces the gaps of each range by the range's mean send and receive gap
/// (Algorithm 1's AVERAGEPROBESTREAM). Byte counts are averaged too, so the
/// rate of every gap in an event is the event's rate.
pub fn average_ranges(gaps: &mut [Gap], ranges: &[Range<usize>]) {
    for r in ranges {
        average_range(gaps, r.clone());
    }
}

/// Averages one range in place (see [`average_ranges`]).
pub fn average_range(gaps: &mut [Gap], r: Range<usize>) {
    if r.len() < 2 {
        return;
    }
    let mean = range_mean(&gaps[r.clone()]);
    for g in &mut gaps[r] {
        *g = Gap {
            end_packet: g.end_packet,
            ..mean
        };
    }
}

/// The mean send and receive gap and byte counts of `gaps` (non-empty);
/// `end_packet` is the last one's.
fn range_mean(gaps: &[Gap]) -> Gap {
    let k = gaps.len() as f64;
    let (mut s, mut v, mut sb, mut rb) = (0.0, 0.0, 0.0, 0.0);
    for g in gaps {
        s += g.send_ns;
        v += g.recv_ns;
        sb += g.sent_bytes;
        rb += g.recv_bytes;
    }
    Gap {
        send_ns: s / k,
        recv_ns: v / k,
        sent_bytes: sb / k,
        recv_bytes: rb / k,
        end_packet: gaps[gaps.len() - 1].end_packet,
    }
}

/// BASS as a smoother: what BASS kept, each complete event averaged
/// within itself, ordinary gaps as they were. Incomplete events at the ends
/// are gone.
pub fn bass_smooth(gaps: &[Gap], params: BassParams) -> Vec<Gap> {
    let mut out = Vec::new();
    bass_smooth_into(gaps, params, &mut BassEvents::default(), &mut out);
    out
}

/// [`bass_smooth`] into `out` (cleared first), with `found` as room for
/// the events; both reuse their memory.
pub fn bass_smooth_into(
    gaps: &[Gap],
    params: BassParams,
    found: &mut BassEvents,
    out: &mut Vec<Gap>,
) {
    bass_events_into(gaps, params, found);
    smooth_events_into(gaps, found, out);
}

/// What [`bass_smooth`] makes of `gaps` once `found` holds their events
/// ([`bass_events`]), into `out` (cleared first): each complete event
/// averaged within itself, the other kept gaps as they were.
pub fn smooth_events_into(gaps: &[Gap], found: &BassEvents, out: &mut Vec<Gap>) {
    out.clear();
    out.reserve(found.kept_gaps());
    let mut events = found.events.iter().peekable();
    for r in &found.kept {
        let part = &gaps[r.clone()];
        if events.peek() == Some(&r) && part.len() >= 2 {
            events.next();
            let mean = range_mean(part);
            out.extend(part.iter().map(|g| Gap {
                end_packet: g.end_packet,
                ..mean
            }));
        } else {
            if events.peek() == Some(&r) {
                events.next();
            }
            out.extend_from_slice(part);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::stream::uniform_gaps;

    fn gaps_of(recv: &[f64], send: f64) -> Vec<Gap> {
        uniform_gaps(send, recv)
    }

    /// Worked by hand: send gap 10, so SPIKE_UP = 10 and SPIKE_DOWN = 5.
    /// recv: [1, 1 | 40, 1, 1, 1 | 36, 2, 1, 1]
    ///   gaps 0-1: head before the first spike, receive time 2 of send
    ///   time 20: the dips of an earlier event (incomplete, dropped);
    ///   gap 2 = 40 > 1 + 10: spike; gap 3 = 1 < 40 - 5: dip -> valid;
    ///   excess 30, 21, 12, 3: never drained; gap 6 = 36 > 1 + 10: the next
    ///   spike closes event 2..6 (complete);
    ///   gaps 6..10: excess 26, 18, 9, 0 drains only at the last gap:
    ///   complete too (drained), so 6..10 is kept.
    #[test]
    fn one_complete_and_two_incomplete_events() {
        let recv = [1.0, 1.0, 40.0, 1.0, 1.0, 1.0, 36.0, 2.0, 1.0, 1.0];
        let g = gaps_of(&recv, 10.0);
        let ev = bass_events(&g, BassParams::default());
        assert!(ev.spikes_found);
        assert_eq!(ev.events, vec![2..6, 6..10]);
        let s = bass_smooth(&g, BassParams::default());
        assert_eq!(s.len(), 8);
        // (40 + 1 + 1 + 1) / 4 = 10.75, send stays 10.
        for x in &s[..4] {
            assert_eq!(x.recv_ns, 10.75);
            assert_eq!(x.send_ns, 10.0);
        }
        // (36 + 2 + 1 + 1) / 4 = 10.
        assert_eq!(s[4].recv_ns, 10.0);
        // With a longer last spike the tail never drains: dropped.
        let mut g2 = g.clone();
        g2[6].recv_ns = 60.0;
        assert_eq!(bass_events(&g2, BassParams::default()).events, vec![2..6]);
    }

    /// No coalescence, packet 5 sent 15 late (send gap 10): it holds up
    /// packet 6 too, so recv = [10 x 5, 25, 0, 5, 10 x 4]. Spike at gap 5
    /// (25 > 10 + 10), excess 15, then 5 after the dip (valid), then
    /// 5 - 5 = 0 at gap 7: drained, one event 5..8; the ordinary gaps on
    /// both sides are kept, not swallowed.
    #[test]
    fn a_lone_spike_drains_and_keeps_the_stream() {
        let mut recv = [10.0; 12];
        recv[5] = 25.0;
        recv[6] = 0.0;
        recv[7] = 5.0;
        let g = gaps_of(&recv, 10.0);
        let ev = bass_events(&g, BassParams::default());
        assert_eq!(ev.events, vec![5..8]);
        assert_eq!(ev.kept, vec![0..5, 5..8, 8..12]);
        let s = bass_smooth(&g, BassParams::default());
        assert_eq!(s.len(), 12);
        assert_eq!(s[5].recv_ns, 10.0);
    }

    #[test]
    fn a_stream_opening_on_a_spike_keeps_its_first_event() {
        // gap 0 = 50 > gap 1 + 5: the first event starts at 0.
        // Excess 40, 31, 22: not drained when gap 3 = 30 > 1 + 10 spikes;
        // the trailing event 3..5 (excess 20, 11) never drains: dropped.
        let recv = [50.0, 1.0, 1.0, 30.0, 1.0];
        let ev = bass_events(&gaps_of(&recv, 10.0), BassParams::default());
        assert_eq!(ev.events, vec![0..3]);
    }

    #[test]
    fn a_spike_without_a_dip_is_not_an_event() {
        // Spike at 2 and the gaps stay high: pending, never valid; then the
        // stream ends. No complete event.
        let recv = [1.0, 1.0, 40.0, 40.0, 40.0, 60.0];
        let ev = bass_events(&gaps_of(&recv, 10.0), BassParams::default());
        assert!(ev.spikes_found);
        assert!(ev.events.is_empty());
        assert!(bass_smooth(&gaps_of(&recv, 10.0), BassParams::default()).is_empty());
    }

    #[test]
    fn a_flat_stream_has_no_event_and_is_kept_whole() {
        let recv = [10.0; 8];
        let g = gaps_of(&recv, 10.0);
        let ev = bass_events(&g, BassParams::default());
        assert!(!ev.spikes_found);
        assert_eq!(bass_smooth(&g, BassParams::default()), g);
    }

    /// send 10, up 10, down 5: [10, 15, 24] rises by 5 and 9, no spike;
    /// [10, 15, 26] rises by 11 at the end: a spike; [20, 14, 14] opens
    /// 6 above its successor: a spike (an event from gap 0).
    #[test]
    fn any_spike_by_hand() {
        assert!(!any_spike(&gaps_of(&[10.0, 15.0, 24.0], 10.0), 10.0, 5.0));
        assert!(any_spike(&gaps_of(&[10.0, 15.0, 26.0], 10.0), 10.0, 5.0));
        assert!(any_spike(&gaps_of(&[20.0, 14.0, 14.0], 10.0), 10.0, 5.0));
        assert!(!any_spike(&gaps_of(&[40.0], 10.0), 10.0, 5.0));
    }

    proptest::proptest! {
        /// Where `any_spike` sees none, `find_events` finds no event (with
        /// or without the ends kept), and the reverse.
        #[test]
        fn no_spike_means_no_event(
            recv in proptest::collection::vec(0.0f64..40.0, 0..60),
            keep_ends: bool,
        ) {
            let g = gaps_of(&recv, 10.0);
            let found = find_events(&g, 10.0, 5.0, keep_ends);
            if !any_spike(&g, 10.0, 5.0) {
                proptest::prop_assert!(found.events.is_empty() && !found.spikes_found);
            } else {
                proptest::prop_assert!(found.spikes_found);
            }
        }
    }

    #[test]
    fn keep_ends_reports_the_head_and_a_valid_trailing_event() {
        let g = gaps_of(&[1.0, 40.0, 1.0, 1.0], 10.0);
        let ev = find_events(&g, 10.0, 5.0, true);
        assert_eq!(ev.events, vec![1..4]);
        assert_eq!(ev.kept, vec![0..1, 1..4]);
    }
}
