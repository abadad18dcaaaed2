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
use crate::stream::{GapTolerance, ProbeStream};

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
    let Some(t0) = stream.packets.first().map(|p| p.send_ns) else {
        return Rise::default();
    };
    let mut best = Rise::default();
    // The lowest point so far, the widest step since it, and the last
    // packet received (its index and height).
    let (mut lowest, mut widest) = (f64::INFINITY, 0.0f64);
    let mut last: Option<(usize, f64)> = None;
    for (i, p) in stream.packets.iter().enumerate() {
        let Some(recv) = p.recv_ns else { continue };
        // Relative to the first packet: i64 stamps lose nothing as f64
        // differences over a stream's milliseconds.
        let u =
            crate::stream::diff_ns(recv, t0) - BURST_SPREAD * crate::stream::diff_ns(p.send_ns, t0);
        if let Some((j, v)) = last {
            widest = widest.max((u - v) / (i - j) as f64);
        }
        if u - lowest > best.rise_ns {
            best = Rise {
                rise_ns: u - lowest,
                widest_step_ns: widest,
            };
        }
        if u < lowest {
            lowest = u;
            widest = 0.0;
        }
        last = Some((i, u));
    }
    best
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
    let batches = stream.receive_batch_interval_ns().unwrap_or(0.0);
    let least = (stream.send_span_ns() / 20.0).max(2.0 * batches);
    let r = burst_rise(stream);
    if !(least > 0.0 && r.rise_ns >= least) {
        return None;
    }
    Some(if r.widest_step_ns - batches >= PAUSE_SHARE * r.rise_ns {
        Held::Pause { rise_ns: r.rise_ns }
    } else {
        Held::Burst { rise_ns: r.rise_ns }
    })
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
}
