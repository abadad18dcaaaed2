//! Buffering-Aware Spike Smoothing, single pass (BASS paper, section V-A,
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
//! (the paper gives no values; see the README for their sensitivity).
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
    /// Whether any spike was seen at all.
    pub spikes_found: bool,
}

impl BassEvents {
    /// Number of input gaps covered by complete events.
    pub fn kept_gaps(&self) -> usize {
        self.events.iter().map(|r| r.len()).sum()
    }
}

/// Spike detection state (Algorithm 1's `spike_state`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    None,
    Pending,
    Valid,
}

/// Finds buffering events in `recv` given absolute thresholds (ns).
/// With `keep_tail`, a trailing event that reached a dip is reported too
/// (used by later passes of multi-pass smoothing, where the ends were already
/// cleaned).
pub fn find_events(
    recv: impl Fn(usize) -> f64,
    n: usize,
    spike_up_ns: f64,
    spike_down_ns: f64,
    keep_tail: bool,
) -> BassEvents {
    let mut out = BassEvents::default();
    if n < 2 {
        return out;
    }
    let mut state = State::None;
    let mut begin = 0usize;
    let mut spike_max = 0.0f64;
    let mut start = 0usize;
    // The stream may open on a spike: gap 0 followed by a dip is complete.
    if recv(0) > recv(1) + spike_down_ns {
        state = State::Valid;
        spike_max = recv(0);
        out.spikes_found = true;
        start = 1;
    }
    for i in start..n {
        let r = recv(i);
        match state {
            State::None => {
                if i + 1 < n && r + spike_up_ns < recv(i + 1) {
                    state = State::Pending;
                    begin = i + 1;
                    spike_max = recv(i + 1);
                    out.spikes_found = true;
                }
            }
            State::Pending => {
                spike_max = spike_max.max(r);
                if r + spike_down_ns < spike_max {
                    state = State::Valid;
                }
            }
            State::Valid => {}
        }
        // A new spike closes a valid event (checked after the dip test so a
        // gap can be the dip of one event and the prelude of the next).
        if state == State::Valid && i + 1 < n && r + spike_up_ns < recv(i + 1) {
            out.events.push(begin..i + 1);
            state = State::Pending;
            begin = i + 1;
            spike_max = recv(i + 1);
        }
    }
    if keep_tail && state == State::Valid && begin < n {
        out.events.push(begin..n);
    }
    out
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
    let scale = mean_send_gap_ns(gaps).abs();
    find_events(
        |i| gaps[i].recv_ns,
        gaps.len(),
        params.spike_up * scale,
        params.spike_down * scale,
        false,
    )
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
    let k = r.len() as f64;
    let (mut s, mut v, mut sb, mut rb) = (0.0, 0.0, 0.0, 0.0);
    for g in &gaps[r.clone()] {
        s += g.send_ns;
        v += g.recv_ns;
        sb += g.sent_bytes;
        rb += g.recv_bytes;
    }
    for g in &mut gaps[r] {
        g.send_ns = s / k;
        g.recv_ns = v / k;
        g.sent_bytes = sb / k;
        g.recv_bytes = rb / k;
    }
}

/// BASS as a smoother: the gaps of complete events, each averaged within its
/// event. A stream with no spike comes back whole; a stream with spikes but
/// no complete event comes back empty.
pub fn bass_smooth(gaps: &[Gap], params: BassParams) -> Vec<Gap> {
    let found = bass_events(gaps, params);
    if !found.spikes_found {
        return gaps.to_vec();
    }
    let mut out = Vec::with_capacity(found.kept_gaps());
    for r in &found.events {
        let start = out.len();
        out.extend_from_slice(&gaps[r.clone()]);
        let end = out.len();
        average_range(&mut out, start..end);
    }
    out
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
    ///   gaps 0-1: head before the first spike (incomplete, dropped);
    ///   gap 2 = 40 > 1 + 10: spike; gap 3 = 1 < 40 - 5: dip -> valid;
    ///   gap 6 = 36 > 1 + 10: next spike closes event 2..6 (complete);
    ///   gaps 6..10: a second spike with dips but the stream ends: dropped.
    #[test]
    fn one_complete_and_two_incomplete_events() {
        let recv = [1.0, 1.0, 40.0, 1.0, 1.0, 1.0, 36.0, 2.0, 1.0, 1.0];
        let g = gaps_of(&recv, 10.0);
        let ev = bass_events(&g, BassParams::default());
        assert!(ev.spikes_found);
        assert_eq!(ev.events, vec![2..6]);
        let s = bass_smooth(&g, BassParams::default());
        assert_eq!(s.len(), 4);
        // (40 + 1 + 1 + 1) / 4 = 10.75, send stays 10.
        for x in &s {
            assert_eq!(x.recv_ns, 10.75);
            assert_eq!(x.send_ns, 10.0);
        }
    }

    #[test]
    fn a_stream_opening_on_a_spike_keeps_its_first_event() {
        // gap 0 = 50 > gap 1 + 5: the first event starts at 0.
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

    #[test]
    fn keep_tail_reports_a_valid_trailing_event() {
        let recv = [1.0, 40.0, 1.0, 1.0];
        let ev = find_events(|i| recv[i], recv.len(), 10.0, 5.0, true);
        assert_eq!(ev.events, vec![1..4]);
    }
}
