//! Multi-pass spike smoothing for multi-rate streams (\[BASS\], section
//! VI-B, Fig. 12-13), and the sliding-window average that follows it.
//!
//! Pass 1 is single-pass BASS (incomplete events at both ends dropped, each
//! complete event averaged). Interrupt coalescence is gone after it, but
//! bursty cross traffic still leaves spikes and dips at the scale of events;
//! each further pass runs the same spike detector over the already smoothed
//! gaps and averages every spike-and-dips it finds (the ends were cleaned in
//! pass 1, so a trailing event that reached a dip is averaged, not dropped).
//!
//! Stopping rule (the paper: "until a robust signature of queuing delays is
//! observed"): stop as soon as the window-averaged gaps show a robust
//! signature, i.e. the gaps whose receive gap exceeds the send gap form one
//! unbroken suffix (below the available bandwidth nothing queues, above it
//! every gap grows); otherwise stop when a pass finds nothing left to merge,
//! or after `max_passes`. `threshold_decay` can shrink the thresholds
//! pass by pass (what is left after pass 1 are event-level spikes); it is 1
//! by default: at 0.7 later passes merged across the congestion onset on
//! the simulator (docs/evaluation.md). Finally a centred sliding window of 16
//! averages all smoothed observations.

use super::bass::{
    any_spike, average_ranges, bass_smooth_into, find_events_into, mean_send_gap_ns, BassEvents,
    BassParams,
};
use crate::stream::{gaps_stamped_in_batches, Gap};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultipassParams {
    pub bass: BassParams,
    /// Sliding-window length applied after the passes (paper: 16).
    pub window: usize,
    /// Upper bound on spike-smoothing passes (pass 1 included).
    pub max_passes: usize,
    /// Each pass after the first multiplies SPIKE_UP and SPIKE_DOWN by this:
    /// after pass 1 the spikes left are event-level (a cross-traffic burst
    /// lifts an event's mean gap by tens of percent, not by a send gap).
    pub threshold_decay: f64,
    /// A smoothed receive gap "exceeds" its send gap when
    /// `recv > send * (1 + exceed_tolerance)`: 0.5 %, as PRC-MT, so that
    /// an interrupt interval that is nearly a whole number of send gaps
    /// (every event then reads 0.3 % slow) does not look like queueing.
    pub exceed_tolerance: f64,
}

impl Default for MultipassParams {
    fn default() -> Self {
        MultipassParams {
            bass: BassParams::default(),
            window: 16,
            max_passes: 8,
            threshold_decay: 1.0,
            exceed_tolerance: 0.005,
        }
    }
}

/// Result of multi-pass smoothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Multipass {
    /// Window-averaged gaps (same order as the kept input gaps).
    pub gaps: Vec<Gap>,
    /// Passes run (1 = single-pass BASS only).
    pub passes: usize,
    /// Whether the stopping rule saw a robust signature.
    pub robust: bool,
    /// Whether the receiver stamped the gaps' packets in batches
    /// (interrupt coalescence; [`crate::stream::gaps_stamped_in_batches`]).
    pub batched: bool,
}

/// Centred sliding-window average over send and receive gaps and bytes:
/// output `j` averages inputs `j - w/2 .. j + w - w/2`, clipped at the ends,
/// so the output has the input's length and index mapping.
pub fn window_average(gaps: &[Gap], window: usize) -> Vec<Gap> {
    let mut out = Vec::with_capacity(gaps.len());
    window_average_into(gaps, window, &mut out);
    out
}

/// [`window_average`] into `out` (cleared first), reusing its memory.
/// Running sums over `[lo, hi)`: O(n) whatever the window. After output 0
/// each step adds at most the one gap entering the window, then drops at
/// most the one leaving it.
pub fn window_average_into(gaps: &[Gap], window: usize, out: &mut Vec<Gap>) {
    out.clear();
    if window <= 1 {
        out.extend_from_slice(gaps);
        return;
    }
    let n = gaps.len();
    out.reserve(n);
    let half = window / 2;
    let ahead = window - half;
    let mut acc = [0.0f64; 4];
    let add = |acc: &mut [f64; 4], x: &Gap| {
        acc[0] += x.send_ns;
        acc[1] += x.recv_ns;
        acc[2] += x.sent_bytes;
        acc[3] += x.recv_bytes;
    };
    let sub = |acc: &mut [f64; 4], x: &Gap| {
        acc[0] -= x.send_ns;
        acc[1] -= x.recv_ns;
        acc[2] -= x.sent_bytes;
        acc[3] -= x.recv_bytes;
    };
    // A full window of a power-of-two length (the paper's 16) divides
    // exactly by multiplying with its inverse.
    let full_inverse = window.is_power_of_two().then(|| 1.0 / window as f64);
    let emit = |out: &mut Vec<Gap>, acc: &[f64; 4], k: usize, end_packet: u32| {
        let avg = match full_inverse {
            Some(inv) if k == window => acc.map(|a| a * inv),
            _ => {
                let k = k as f64;
                acc.map(|a| a / k)
            }
        };
        out.push(Gap {
            send_ns: avg[0],
            recv_ns: avg[1],
            sent_bytes: avg[2],
            recv_bytes: avg[3],
            end_packet,
        });
    };
    let Some(first) = gaps.first() else {
        return;
    };
    let mut k = ahead.min(n);
    for x in &gaps[..k] {
        add(&mut acc, x);
    }
    emit(out, &acc, k, first.end_packet);
    let step = |out: &mut Vec<Gap>, acc: &mut [f64; 4], k: &mut usize, j: usize| {
        if j + ahead <= n {
            add(acc, &gaps[j + ahead - 1]);
            *k += 1;
        }
        if j > half {
            sub(acc, &gaps[j - half - 1]);
            *k -= 1;
        }
        emit(out, acc, *k, gaps[j].end_packet);
    };
    // Outputs whose window is full (one gap in, one out, the same sums in
    // the same order as `step`) go without its branches.
    let full_from = (half + 1).min(n);
    let full_to = (n + 1).saturating_sub(ahead).max(full_from);
    for j in 1..full_from {
        step(out, &mut acc, &mut k, j);
    }
    if full_to > full_from {
        let entering = &gaps[full_from + ahead - 1..full_to + ahead - 1];
        let leaving = &gaps[full_from - half - 1..full_to - half - 1];
        let ends = &gaps[full_from..full_to];
        let mut slide = |scale: f64, divide: bool| {
            for ((x, y), g) in entering.iter().zip(leaving).zip(ends) {
                add(&mut acc, x);
                sub(&mut acc, y);
                let avg = if divide {
                    acc.map(|a| a / scale)
                } else {
                    acc.map(|a| a * scale)
                };
                out.push(Gap {
                    send_ns: avg[0],
                    recv_ns: avg[1],
                    sent_bytes: avg[2],
                    recv_bytes: avg[3],
                    end_packet: g.end_packet,
                });
            }
        };
        match full_inverse {
            Some(inv) => slide(inv, false),
            None => slide(window as f64, true),
        }
        k = window;
    }
    for j in full_to..n {
        step(out, &mut acc, &mut k, j);
    }
}

/// Whether gap `g` shows queueing: its receive gap exceeds its send gap.
#[inline]
pub fn exceeds(g: &Gap, tolerance: f64) -> bool {
    g.recv_ns > g.send_ns * (1.0 + tolerance)
}

/// Length of the unbroken run of exceeding gaps at the end of `gaps`.
pub fn exceeding_suffix(gaps: &[Gap], tolerance: f64) -> usize {
    gaps.iter()
        .rev()
        .take_while(|g| exceeds(g, tolerance))
        .count()
}

/// A robust signature: every exceeding gap lies in the final unbroken run.
pub fn is_robust(gaps: &[Gap], tolerance: f64) -> bool {
    let suffix = exceeding_suffix(gaps, tolerance);
    gaps[..gaps.len() - suffix]
        .iter()
        .all(|g| !exceeds(g, tolerance))
}

/// Memory the smoothing reuses from one stream to the next: the passes'
/// gaps before the window and BASS's events. Streams analysed one after
/// another through one of these (and one [`Multipass`]) allocate nothing
/// once it has grown to the longest stream.
#[derive(Debug, Clone, Default)]
pub struct SmoothScratch {
    /// The gaps after the passes, before the window.
    smoothed: Vec<Gap>,
    events: BassEvents,
}

impl SmoothScratch {
    /// The same room for single-pass readers of BASS (PRC-MT+BASS): its
    /// events and the gaps it kept.
    pub(crate) fn bass_room(&mut self) -> (&mut BassEvents, &mut Vec<Gap>) {
        (&mut self.events, &mut self.smoothed)
    }
}

/// Single-pass BASS followed by the window (the paper's "single-pass" arm).
pub fn single_pass_smooth(gaps: &[Gap], params: MultipassParams) -> Multipass {
    let mut out = Multipass::default();
    single_pass_smooth_into(gaps, params, &mut SmoothScratch::default(), &mut out);
    out
}

/// [`single_pass_smooth`] into `out`, reusing its memory and `scratch`'s.
pub fn single_pass_smooth_into(
    gaps: &[Gap],
    params: MultipassParams,
    scratch: &mut SmoothScratch,
    out: &mut Multipass,
) {
    bass_smooth_into(
        gaps,
        params.bass,
        &mut scratch.events,
        &mut scratch.smoothed,
    );
    window_average_into(&scratch.smoothed, params.window, &mut out.gaps);
    out.robust = is_robust(&out.gaps, params.exceed_tolerance);
    out.batched = gaps_stamped_in_batches(gaps);
    out.passes = 1;
}

/// Multi-pass spike smoothing followed by the window.
pub fn multipass_smooth(gaps: &[Gap], params: MultipassParams) -> Multipass {
    let mut out = Multipass::default();
    multipass_smooth_into(gaps, params, &mut SmoothScratch::default(), &mut out);
    out
}

/// [`multipass_smooth`] into `out`, reusing its memory and `scratch`'s.
pub fn multipass_smooth_into(
    gaps: &[Gap],
    params: MultipassParams,
    scratch: &mut SmoothScratch,
    out: &mut Multipass,
) {
    let (passes, robust) = run_passes(gaps, params, scratch, &mut out.gaps);
    out.batched = gaps_stamped_in_batches(gaps);
    out.passes = passes;
    out.robust = robust;
}

/// The spike-smoothing passes alone, before the window: the kept gaps and
/// the number of passes. Each pass only averages, so the total send and
/// receive time of what pass 1 kept never changes.
pub fn multipass_passes(gaps: &[Gap], params: MultipassParams) -> (Vec<Gap>, usize) {
    let mut scratch = SmoothScratch::default();
    let (passes, _) = run_passes(gaps, params, &mut scratch, &mut Vec::new());
    (scratch.smoothed, passes)
}

/// The passes into `scratch.smoothed`, their window average into
/// `windowed`: (passes, robust).
fn run_passes(
    gaps: &[Gap],
    params: MultipassParams,
    scratch: &mut SmoothScratch,
    windowed: &mut Vec<Gap>,
) -> (usize, bool) {
    let SmoothScratch {
        smoothed: cur,
        events: found,
    } = scratch;
    bass_smooth_into(gaps, params.bass, found, cur);
    let mut passes = 1;
    let mut factor = 1.0;
    loop {
        window_average_into(cur, params.window, windowed);
        if is_robust(windowed, params.exceed_tolerance) {
            return (passes, true);
        }
        if passes >= params.max_passes || cur.len() < 2 {
            return (passes, false);
        }
        factor *= params.threshold_decay;
        let scale = mean_send_gap_ns(cur).abs() * factor;
        let (up, down) = (params.bass.spike_up * scale, params.bass.spike_down * scale);
        // After pass 1 most streams show no spike at all: nothing to merge.
        if !any_spike(cur, up, down) {
            return (passes, false);
        }
        find_events_into(cur, up, down, true, found);
        // Only events that merge more than one distinct value change anything.
        found.events.retain(|r| {
            let first = cur[r.start].recv_ns;
            cur[r.clone()].iter().any(|g| g.recv_ns != first)
        });
        if found.events.is_empty() {
            return (passes, false);
        }
        average_ranges(cur, &found.events);
        passes += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap(send: f64, recv: f64, i: u32) -> Gap {
        Gap {
            send_ns: send,
            recv_ns: recv,
            sent_bytes: 1000.0,
            recv_bytes: 1000.0,
            end_packet: i,
        }
    }

    #[test]
    fn window_of_four_by_hand() {
        // recv 0,4,8,12,16 ; window 4 => half 2: j covers j-2 .. j+2.
        let g: Vec<_> = (0..5).map(|i| gap(1.0, 4.0 * i as f64, i)).collect();
        let w = window_average(&g, 4);
        // j=0: [0,2) -> (0+4)/2 = 2 ; j=2: [0,4) -> 6 ; j=4: [2,5) -> 12.
        assert_eq!(w[0].recv_ns, 2.0);
        assert_eq!(w[2].recv_ns, 6.0);
        assert_eq!(w[4].recv_ns, 12.0);
        assert_eq!(w[4].end_packet, 4);
    }

    proptest::proptest! {
        /// The stepped window is the plain running-sum loop's (add every
        /// gap up to the window's end, then drop every gap before its
        /// start, then divide), bit for bit, for any window and length.
        #[test]
        fn the_window_is_the_plain_loops(
            recv in proptest::collection::vec(0.0f64..50.0, 0..70),
            window in 1usize..24,
        ) {
            let g: Vec<Gap> = recv
                .iter()
                .enumerate()
                .map(|(i, &r)| gap(1.0 + r / 7.0, r, i as u32))
                .collect();
            let n = g.len();
            let (half, mut want) = (window / 2, Vec::new());
            let (mut lo, mut hi, mut acc) = (0usize, 0usize, [0.0f64; 4]);
            for (j, x) in g.iter().enumerate() {
                while hi < (j + window - half).min(n) {
                    let y = &g[hi];
                    for (a, v) in acc.iter_mut().zip([y.send_ns, y.recv_ns, y.sent_bytes, y.recv_bytes]) {
                        *a += v;
                    }
                    hi += 1;
                }
                while lo < j.saturating_sub(half) {
                    let y = &g[lo];
                    for (a, v) in acc.iter_mut().zip([y.send_ns, y.recv_ns, y.sent_bytes, y.recv_bytes]) {
                        *a -= v;
                    }
                    lo += 1;
                }
                let k = (hi - lo) as f64;
                want.push(Gap {
                    send_ns: acc[0] / k,
                    recv_ns: acc[1] / k,
                    sent_bytes: acc[2] / k,
                    recv_bytes: acc[3] / k,
                    end_packet: x.end_packet,
                });
            }
            if window <= 1 {
                want = g.clone();
            }
            proptest::prop_assert_eq!(window_average(&g, window), want);
        }
    }

    #[test]
    fn suffix_and_robustness() {
        let g = vec![gap(10.0, 9.0, 1), gap(10.0, 11.0, 2), gap(10.0, 12.0, 3)];
        assert_eq!(exceeding_suffix(&g, 0.0), 2);
        assert!(is_robust(&g, 0.0));
        let h = vec![gap(10.0, 11.0, 1), gap(10.0, 9.0, 2), gap(10.0, 12.0, 3)];
        assert_eq!(exceeding_suffix(&h, 0.0), 1);
        assert!(!is_robust(&h, 0.0));
    }

    /// Coalesced multi-rate stream (rates 5..9 Gbit/s, abw 7.5 Gbit/s):
    /// after multi-pass smoothing the exceeding suffix starts in the
    /// sub-streams above 7.5 Gbit/s, and not before.
    #[test]
    fn multipass_finds_the_congested_suffix() {
        use crate::schedule::multi_rate_schedule;
        use crate::synth::SynthPath;
        let path = SynthPath {
            coalescence_ns: Some(125_000.0),
            ..SynthPath::ten_gig(2.5e9)
        };
        let sched = multi_rate_schedule(&[5e9, 6e9, 7e9, 8e9, 9e9], 64, 9000);
        let s = path.stream(0, &sched, 9000);
        let m = multipass_smooth(&s.gaps(), MultipassParams::default());
        let k = m.gaps.len() - exceeding_suffix(&m.gaps, 0.0);
        assert!(k > 0 && k < m.gaps.len());
        // The gap just before the suffix is in the 7 Gbit/s run (128..192)
        // or at the 7 -> 8 boundary, after window smoothing.
        let p = m.gaps[k - 1].end_packet;
        assert!((150..=215).contains(&p), "crossing at packet {p}");
    }
}
