//! Warnings read from what a strategy's report found beside its answer
//! (`tightlink estimate`'s JSON `warnings`, with their codes in
//! `warning_codes`): a token bucket the shaper trains showed, a train
//! that passed whole at the top rate, a small head, slow trains, and a
//! queue that stood under the streams.

use tightlink_core::units::format_rate;
use tightlink_core::Bound;
use tightlink_probe::Report;

/// A token bucket that back-to-back trains showed after the streams had
/// read its burst rate: what the streams read, and that the answer is the
/// rate the path sustains.
pub fn shaper_warning(e: &Report) -> Option<String> {
    let sh = e.shaper?;
    let streams = match sh.streams_bound {
        Bound::AtLeast => format!("at least {}", format_rate(sh.streams_bps)),
        _ => format_rate(sh.streams_bps),
    };
    if e.bound == Bound::AtMost && sh.shared_bucket.is_none() {
        // A train at r whose tail came at t leaves at least r (2 - r / t)
        // free: nothing where the tail came at half the rate or less.
        let floor = if e.low_bps > 0.0 {
            format!(
                "at least {} if the bucket's rate lies under the trains' (the streams passed \
                 on its bursts)",
                format_rate(e.low_bps)
            )
        } else {
            "the trains put no floor under it (their tails came at half their rate or less)"
                .to_string()
        };
        return Some(format!(
            "two back-to-back trains of {:.0} KB arrived at {} on average after their first \
             {:.0} KB, their tails {:.0} % apart, where the probe streams read {streams}: a \
             token bucket (shaper or policer) that cross traffic shares, and moves through. \
             A tail is the probes' share of the bucket's rate beside the cross traffic, \
             more than the cross traffic leaves free, so the available bandwidth is at \
             most that, and {floor}",
            sh.train_bytes as f64 / 1e3,
            format_rate(sh.tail_bps),
            sh.bucket_bytes / 1e3,
            sh.tail_spread * 100.0,
        ));
    }
    if let (false, Some((token, cross))) = (sh.head_seen, sh.shared_bucket) {
        return Some(format!(
            "back-to-back trains arrived at {} where the probe streams read {streams}: a token \
             bucket (shaper or policer) whose head hid in one receive batch (about {:.0} KB \
             ahead of the trains' tails) passed the streams at its burst rate. A train at \
             another rate puts the bucket's rate, on the line through the tails, at {} and \
             the cross traffic that shares it at {}: the answer is what that leaves",
            format_rate(sh.tail_bps),
            sh.bucket_bytes / 1e3,
            format_rate(token),
            format_rate(cross),
        ));
    }
    if !sh.head_seen {
        return Some(format!(
            "two back-to-back trains of {:.0} KB arrived at {} where the probe streams read \
             {streams}; a FIFO path delivers a train sent faster than its available bandwidth \
             at no less than that, so the streams' answer was too high: a token bucket \
             (shaper or policer) whose head hid in one receive batch passed them at its burst \
             rate, or they misread the path (or cross traffic rose for both trains). The \
             answer is the trains' rate",
            sh.train_bytes as f64 / 1e3,
            format_rate(sh.tail_bps),
        ));
    }
    let answer = match sh.shared_bucket {
        Some((token, cross)) => format!(
            "A third train at a lower rate puts the bucket's rate at {} and the cross \
             traffic that shares it at {}: the answer is what that leaves",
            format_rate(token),
            format_rate(cross),
        ),
        None => "The answer is the sustained rate".to_string(),
    };
    // Streams near the tail read what the cross traffic in the bucket
    // left them, as the tail did; faster ones passed on the bucket.
    let streams_read = if sh.streams_bps <= 1.05 * sh.tail_bps {
        format!(" read {streams}, as the tail did")
    } else {
        format!(", shorter than that head, read {streams}, the rate of its bursts")
    };
    Some(format!(
        "a token bucket (shaper or policer) of about {:.0} KB on the path: a back-to-back \
         train of {:.0} KB arrived at {} while the bucket lasted and at {} after; the probe \
         streams{streams_read}. {answer}",
        sh.bucket_bytes / 1e3,
        sh.train_bytes as f64 / 1e3,
        format_rate(sh.head_bps),
        format_rate(sh.tail_bps),
    ))
}

/// An answer "at least" the top rate whose longest shaper train passed
/// whole at it: a free path and a token bucket larger than what that
/// train drained look alike there, so say how large such a bucket would
/// be (at 90 % of the top rate, for a figure).
pub fn whole_at_top_warning(e: &Report) -> Option<String> {
    let bytes = e.whole_at_top_bytes? as f64;
    let top = format_rate(e.available_bandwidth_bps);
    Some(format!(
        "a back-to-back train of {:.0} KB passed whole at {top}: a token bucket (shaper or \
         policer) with a sustained rate r under that would have passed it too if it held \
         more than {:.0} KB x (1 - r / {top}), e.g. {:.0} KB at {}; the answer is what \
         bursts of that size met, and a longer measurement would tell the two apart",
        bytes / 1e3,
        bytes / 1e3,
        0.1 * bytes / 1e3,
        format_rate(0.9 * e.available_bandwidth_bps),
    ))
}

/// A short shaper train whose small head and slow tail widened the range.
pub fn small_head_warning(e: &Report) -> Option<String> {
    let h = e.small_head?;
    Some(format!(
        "a train sent at {} passed {:.0} packets at about that rate, then arrived at {}, \
         under the answer: a token bucket a few packets deep (a shaper's burst) lets a \
         stream through unqueued while it lasts, and a path without one delivers such a \
         train at no less than its available bandwidth; the range reaches down to {}",
        format_rate(h.rate_bps),
        h.head_packets,
        format_rate(h.tail_bps),
        format_rate(h.tail_bps),
    ))
}

/// Pathload's fleets over a queue that stood under nearly every stream:
/// why there is no answer; multi-rate streams whose lowest rates met it:
/// why the answer may be well off.
pub fn standing_queue_warning(e: &Report) -> Option<String> {
    let q = e.standing_queue?;
    if e.bound != Bound::None {
        return Some(format!(
            "a queue stood under the lowest rates of {} of {} streams (their median delay \
             {:.2} ms above the empty path's): cross traffic that fills the buffer whatever \
             the probes' rate, as a TCP flow with data to send does; what it leaves free \
             moves as the probes load the path, so the answer is what the streams met and \
             may be well off either way",
            q.stood,
            q.streams,
            q.median_depth_ns / 1e6,
        ));
    }
    Some(format!(
        "a queue stood under {} of {} streams (their median delay {:.2} ms above the \
         empty path's, at every rate tried): cross traffic that fills the buffer whatever \
         the probes' rate, as a TCP flow with data to send does; the trend tests read a \
         full queue as no trend, so their search cannot say what such traffic leaves \
         free (no answer; `multirate` reads a queue's growth with the rate)",
        q.stood,
        q.streams,
        q.median_depth_ns / 1e6,
    ))
}

/// An exact answer whose two shaper trains both arrived well under it
/// and could not change it: say what they read and why the range now
/// reaches down to them.
pub fn slow_trains_warning(e: &Report) -> Option<String> {
    let t = e.slow_trains?;
    let [t1, t2] = t.tails_bps;
    Some(format!(
        "two back-to-back trains sent at {} arrived at {} and {} after their first \
         packets, under the answer, where a path whose available bandwidth is the answer \
         delivers them at no less: cross traffic rose while they ran, or a token bucket \
         (shaper or policer) that cross traffic shares holds less than the streams read \
         and the trains were too short to show its burst; the range reaches down to {}",
        format_rate(t.rate_bps),
        format_rate(t1),
        format_rate(t2),
        format_rate(t1.min(t2)),
    ))
}
