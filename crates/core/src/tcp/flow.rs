//! Replays one TCP flow as its sender saw it: which bytes went out when,
//! which ACKs came back when. What the TCPW-BBE estimators read (paper
//! section 3.1: "RTT values determined at the sender preceding a packet
//! loss"):
//!
//! - RTT samples: an ACK that moves the cumulative point onto the end of a
//!   segment gives `ack time - send time` of that segment, unless any
//!   segment it covers was retransmitted (Karn's rule: the ACK may answer
//!   the retransmission). An ACK that covers several segments (delayed
//!   ACKs) measures the newest of them.
//! - Loss events: a data segment starting below the highest byte sent is
//!   a retransmission; the first one starts a loss event that lasts until
//!   the ACKs pass the highest byte sent when it began (one event per
//!   window, as TCP reduces its window once per window).
//!   An event whose every resent segment the receiver reported as a
//!   duplicate (D-SACK, RFC 2883) lost nothing: a tail-loss probe or a
//!   spurious timeout. It is listed apart, not as a loss (the first lab
//!   capture's first "loss" was a tail-loss probe after a 40 ms receiver
//!   stall; as a congestion loss it set RTTcong to 40 ms).
//! - ACK arrivals: the bytes each ACK newly acknowledges.

/// Which way a segment went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Sender to receiver: data.
    Data,
    /// Receiver to sender: ACKs.
    Ack,
}

/// One captured segment of the flow (a TCP header's fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub t_ns: i64,
    pub direction: Direction,
    pub seq: u32,
    pub ack: u32,
    /// Whether the ACK flag is set.
    pub has_ack: bool,
    pub syn: bool,
    pub fin: bool,
    pub payload_bytes: u32,
    /// The packet on an Ethernet link: IP packet + 14-byte header, no FCS
    /// (what tbf and htb count, and what a link serialises).
    pub frame_bytes: u32,
    /// A D-SACK block the receiver sent (data it got twice).
    pub dsack: Option<(u32, u32)>,
    /// Position in the capture (1-based), for messages.
    pub packet: u64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RttSample {
    pub t_ns: i64,
    pub rtt_ns: f64,
}

/// An ACK that moved the cumulative point.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AckEvent {
    pub t_ns: i64,
    /// Bytes newly acknowledged.
    pub acked_bytes: u64,
    /// Cumulative point after it (bytes from the first data byte).
    pub ack: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct LossEvent {
    /// Time of the first retransmission of the event.
    pub t_ns: i64,
    /// Its TCP sequence number (as on the wire, to find it in a capture).
    pub seq: u32,
    /// Segments retransmitted during the event.
    pub segments: usize,
    pub bytes: u64,
    /// The RTT before the event: the median of the last three samples
    /// (fewer at the start), if any.
    pub rtt_before_ns: Option<f64>,
    /// The RTTs before it were lifted by a pause of the path (the ACKs
    /// stopped and the RTT jumped by about as long: a stalled host) and
    /// had not come back down when the event began.
    pub after_pause: bool,
}

/// A data segment as sent: (end offset, first send time, retransmitted).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sent {
    pub start: u64,
    pub end: u64,
    pub t_ns: i64,
    pub payload_bytes: u32,
    pub frame_bytes: u32,
    pub retransmitted: bool,
}

/// Everything the estimators read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Flow {
    pub rtt: Vec<RttSample>,
    pub acks: Vec<AckEvent>,
    pub losses: Vec<LossEvent>,
    /// Retransmission events the receiver showed were not losses (all
    /// their segments D-SACKed).
    pub spurious: Vec<LossEvent>,
    /// Data segments in first-send order.
    pub sent: Vec<Sent>,
    /// ACK arrivals: (time, cumulative point), every ACK including
    /// duplicates, in order.
    pub ack_arrivals: Vec<(i64, u64)>,
    pub data_bytes: u64,
    pub retransmitted_segments: usize,
    pub first_ns: i64,
    pub last_ns: i64,
}

/// Sequence numbers as offsets from a base, across wrap-around (a flow
/// moves less than 2 GB between two segments of one direction).
#[derive(Debug, Clone, Copy)]
struct Unwrap {
    base: u32,
    last: u64,
}

impl Unwrap {
    fn new(base: u32) -> Self {
        Unwrap { base, last: 0 }
    }

    fn offset(&mut self, seq: u32) -> u64 {
        let rel = seq.wrapping_sub(self.base);
        let last_rel = self.last as u32;
        let delta = rel.wrapping_sub(last_rel) as i32 as i64;
        let v = (self.last as i64 + delta).max(0) as u64;
        self.last = self.last.max(v);
        v
    }
}

/// ACK silences that lifted the RTT: a host that stalls (a descheduled
/// VM, a busy CPU between the sender and the bottleneck) stops the ACKs
/// for milliseconds and every packet then in flight comes back that much
/// later, beyond what any queue of the path holds (a lab capture: a
/// 3.8 ms silence, the RTT 4.28 -> 8.08 ms where the full queue is
/// 4.1 ms; a second 2.9 ms later, 10.65 ms before a loss). A burst of
/// cross traffic through a FIFO looks the same from the sender, so this
/// only marks the samples; BBE keeps such losses out of RTTcong, which a
/// queue's own losses set well enough.
#[derive(Debug, Clone, Default)]
struct Pause {
    /// The last ACK gaps (ns), for the usual spacing.
    gaps: std::collections::VecDeque<i64>,
    /// The RTT before the first jump of the pause still in effect.
    from_rtt_ns: Option<f64>,
}

/// An ACK silence at least this long, and [`PAUSE_GAPS`] times the
/// usual spacing, can be a pause (a scheduler tick is 1-4 ms).
const PAUSE_MIN_NS: i64 = 1_000_000;
const PAUSE_GAPS: i64 = 8;
/// ACK gaps the usual spacing is the median of.
const PAUSE_HISTORY: usize = 16;
/// The RTT must jump by this share of the silence (a stall lifts it by
/// about all of it; one lab capture's by 0.41, after ACKs that had come
/// unevenly before).
const PAUSE_JUMP: f64 = 0.3;

impl Pause {
    /// Takes in an ACK arriving `gap_ns` after the one before.
    fn ack_gap(&mut self, gap_ns: i64) {
        if self.gaps.len() == PAUSE_HISTORY {
            self.gaps.pop_front();
        }
        self.gaps.push_back(gap_ns);
    }

    /// Takes in an RTT sample `rtt_ns` whose ACK came `gap_ns` after the
    /// ACK before it (the history's last gap), `prev_ns` the sample
    /// before.
    fn sample(&mut self, gap_ns: i64, rtt_ns: f64, prev_ns: Option<f64>) {
        let Some(prev) = prev_ns else {
            return;
        };
        // The usual spacing only matters after a silence long enough.
        let silent = gap_ns >= PAUSE_MIN_NS && {
            let before = self.gaps.len().saturating_sub(1);
            let mut g: Vec<i64> = self.gaps.iter().take(before).copied().collect();
            g.sort_unstable();
            let usual = g.get(g.len() / 2).copied().unwrap_or(i64::MAX / PAUSE_GAPS);
            gap_ns >= PAUSE_GAPS.saturating_mul(usual)
        };
        if silent && rtt_ns - prev >= PAUSE_JUMP * gap_ns as f64 {
            self.from_rtt_ns.get_or_insert(prev);
        } else if self.from_rtt_ns.is_some_and(|f| rtt_ns <= f) {
            self.from_rtt_ns = None;
        }
    }
}

/// The queue a loss met, from the RTT samples before it: the median of
/// the last three. A host that stalls (a busy CPU, a descheduled VM)
/// hands the capture one ACK late, and that one sample can read several
/// times the path's RTT; taken alone it would stand for the queue at the
/// loss and lift RTTcong far above where losses happen.
fn rtt_before(rtt: &[RttSample]) -> Option<f64> {
    let last = &rtt[rtt.len().saturating_sub(3)..];
    let mut v: Vec<f64> = last.iter().map(|r| r.rtt_ns).collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// Replays `segments` (capture order) of one flow seen at its sender.
pub fn replay(segments: &[Segment]) -> Flow {
    let flow = Flow {
        first_ns: segments.first().map_or(0, |s| s.t_ns),
        last_ns: segments.last().map_or(0, |s| s.t_ns),
        ..Flow::default()
    };
    // The first data byte: after the SYN if we saw it, else the first
    // data segment's sequence number.
    let base = segments
        .iter()
        .find(|s| s.direction == Direction::Data && (s.syn || s.payload_bytes > 0))
        .map(|s| if s.syn { s.seq.wrapping_add(1) } else { s.seq });
    let Some(base) = base else {
        return flow;
    };
    let mut r = Replay {
        flow,
        seq_u: Unwrap::new(base),
        ack_u: Unwrap::new(base),
        by_end: Default::default(),
        snd_nxt: 0,
        snd_una: 0,
        recovery_until: None,
        resent: Vec::new(),
        dsacked: Vec::new(),
        pause: Pause::default(),
    };
    for s in segments {
        match s.direction {
            Direction::Data if !(s.syn || s.payload_bytes == 0) => r.data(s),
            Direction::Ack if s.has_ack && !s.syn => r.ack(s),
            _ => {}
        }
    }
    let mut flow = r.flow;
    let events = std::mem::take(&mut flow.losses);
    for (l, d) in events.into_iter().zip(r.dsacked) {
        if d >= l.bytes {
            flow.spurious.push(l);
        } else {
            flow.losses.push(l);
        }
    }
    flow
}

/// The sender's state as the capture replays.
struct Replay {
    flow: Flow,
    seq_u: Unwrap,
    ack_u: Unwrap,
    /// Sent segments by end offset, for RTT samples.
    by_end: std::collections::BTreeMap<u64, usize>,
    snd_nxt: u64,
    snd_una: u64,
    recovery_until: Option<u64>,
    /// Resent ranges not yet D-SACKed: (start, end, event), and the bytes
    /// of each event D-SACKed so far.
    resent: Vec<(u64, u64, usize)>,
    dsacked: Vec<u64>,
    pause: Pause,
}

impl Replay {
    /// A data segment: new bytes, or a retransmission (a loss event's
    /// first, or one more of the event under way).
    fn data(&mut self, s: &Segment) {
        let flow = &mut self.flow;
        let start = self.seq_u.offset(s.seq);
        let end = start + s.payload_bytes as u64;
        if start >= self.snd_nxt {
            self.by_end.insert(end, flow.sent.len());
            flow.sent.push(Sent {
                start,
                end,
                t_ns: s.t_ns,
                payload_bytes: s.payload_bytes,
                frame_bytes: s.frame_bytes,
                retransmitted: false,
            });
            flow.data_bytes += s.payload_bytes as u64;
            self.snd_nxt = end;
            return;
        }
        // A retransmission (of bytes sent before).
        flow.retransmitted_segments += 1;
        for (_, &i) in self.by_end.range(start + 1..=end.min(self.snd_nxt)) {
            flow.sent[i].retransmitted = true;
        }
        match (self.recovery_until, flow.losses.last_mut()) {
            (Some(r), Some(l)) if self.snd_una < r => {
                l.segments += 1;
                l.bytes += s.payload_bytes as u64;
            }
            _ => {
                self.recovery_until = Some(self.snd_nxt);
                self.dsacked.push(0);
                flow.losses.push(LossEvent {
                    t_ns: s.t_ns,
                    seq: s.seq,
                    segments: 1,
                    bytes: s.payload_bytes as u64,
                    rtt_before_ns: rtt_before(&flow.rtt),
                    // The event's window cut drains the path.
                    after_pause: self.pause.from_rtt_ns.take().is_some(),
                });
            }
        }
        self.resent.push((start, end, flow.losses.len() - 1));
        if end > self.snd_nxt {
            self.snd_nxt = end;
        }
    }

    /// An ACK: D-SACKs of resent ranges, then, where it moves
    /// `snd_una`, an RTT sample (Karn) and the segments it completes.
    fn ack(&mut self, s: &Segment) {
        let flow = &mut self.flow;
        let ack = self.ack_u.offset(s.ack);
        let gap_ns = flow.ack_arrivals.last().map(|&(t, _)| s.t_ns - t);
        flow.ack_arrivals.push((s.t_ns, ack));
        if let Some(g) = gap_ns {
            self.pause.ack_gap(g);
        }
        if let Some((l, r)) = s.dsack {
            let (l, r) = (self.ack_u.offset(l), self.ack_u.offset(r));
            let dsacked = &mut self.dsacked;
            self.resent.retain(|&(a, b, e)| {
                let dup = a >= l && b <= r;
                if dup {
                    dsacked[e] += b - a;
                }
                !dup
            });
        }
        if ack <= self.snd_una {
            return;
        }
        flow.acks.push(AckEvent {
            t_ns: s.t_ns,
            acked_bytes: ack - self.snd_una,
            ack,
        });
        self.snd_una = ack;
        // Karn: the newest segment the ACK covers, if nothing it
        // covers was sent twice.
        let clean = self
            .by_end
            .range(..=ack)
            .all(|(_, &i)| !flow.sent[i].retransmitted);
        if let Some((_, &i)) = self.by_end.range(..=ack).next_back() {
            let seg = flow.sent[i];
            if clean && seg.end == ack {
                let rtt_ns = (s.t_ns as i128 - seg.t_ns as i128) as f64;
                let prev = flow.rtt.last().map(|r| r.rtt_ns);
                self.pause.sample(gap_ns.unwrap_or(0), rtt_ns, prev);
                flow.rtt.push(RttSample {
                    t_ns: s.t_ns,
                    rtt_ns,
                });
            }
        }
        // Segments wholly acknowledged are done with.
        let done: Vec<u64> = self.by_end.range(..=ack).map(|(&e, _)| e).collect();
        for e in done {
            self.by_end.remove(&e);
        }
        if self.recovery_until.is_some_and(|r| self.snd_una >= r) {
            self.recovery_until = None;
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub fn data(t_us: i64, seq: u32, len: u32) -> Segment {
        Segment {
            t_ns: t_us * 1000,
            direction: Direction::Data,
            seq,
            ack: 1,
            has_ack: true,
            syn: false,
            fin: false,
            payload_bytes: len,
            // IPv4 + TCP without options + Ethernet.
            frame_bytes: len + 54,
            dsack: None,
            packet: 0,
        }
    }

    pub fn ack(t_us: i64, ack: u32) -> Segment {
        Segment {
            t_ns: t_us * 1000,
            direction: Direction::Ack,
            seq: 1,
            ack,
            has_ack: true,
            syn: false,
            fin: false,
            payload_bytes: 0,
            frame_bytes: 54,
            dsack: None,
            packet: 0,
        }
    }

    /// Four 1000-byte segments from sequence 1000 at 0, 10, 20, 30 us;
    /// ACKs at 100 (2000: segment 0, RTT 100), 125 (4000: two segments,
    /// the newest sent at 20, RTT 105), a duplicate at 130 (no sample),
    /// 140 (5000: RTT 110).
    #[test]
    fn rtt_samples_by_hand() {
        let segs = [
            data(0, 1000, 1000),
            data(10, 2000, 1000),
            data(20, 3000, 1000),
            data(30, 4000, 1000),
            ack(100, 2000),
            ack(125, 4000),
            ack(130, 4000),
            ack(140, 5000),
        ];
        let f = replay(&segs);
        let rtts: Vec<f64> = f.rtt.iter().map(|r| r.rtt_ns / 1000.0).collect();
        assert_eq!(rtts, vec![100.0, 105.0, 110.0]);
        let acked: Vec<u64> = f.acks.iter().map(|a| a.acked_bytes).collect();
        assert_eq!(acked, vec![1000, 2000, 1000]);
        assert_eq!(f.ack_arrivals.len(), 4);
        assert_eq!(f.data_bytes, 4000);
        assert!(f.losses.is_empty());
    }

    /// Segment 1 (2000..3000) is lost: duplicate ACKs, then it is resent
    /// at 200 us and again at 210 (one event, two segments); the event's
    /// RTT before is the only sample (100 us); the ACK at 300 covers the
    /// retransmitted segment and the one after: no sample from it (Karn).
    /// A later retransmission starts a second event.
    #[test]
    fn loss_events_by_hand() {
        let segs = [
            data(0, 1000, 1000),
            data(10, 2000, 1000),
            data(20, 3000, 1000),
            ack(100, 2000),
            ack(130, 2000),
            data(200, 2000, 1000),
            data(210, 2000, 1000),
            ack(300, 4000),
            data(310, 4000, 1000),
            data(320, 4000, 1000),
        ];
        let f = replay(&segs);
        assert_eq!(f.losses.len(), 2);
        assert_eq!(f.losses[0].segments, 2);
        assert_eq!(f.losses[0].t_ns, 200_000);
        assert_eq!(f.losses[0].rtt_before_ns, Some(100_000.0));
        assert_eq!(f.rtt.len(), 1);
        assert_eq!(f.retransmitted_segments, 3);
        assert_eq!(f.losses[1].segments, 1);
    }

    /// The ACKs for the first three segments give RTTs 100, 105 and (a
    /// stalled host) 880 us; the fourth is lost and resent at 950 us. The
    /// RTT before the loss is the median of the three: 105 us.
    #[test]
    fn one_stalled_ack_does_not_stand_for_the_queue() {
        let segs = [
            data(0, 1000, 1000),
            data(10, 2000, 1000),
            data(20, 3000, 1000),
            data(30, 4000, 1000),
            data(40, 5000, 1000),
            ack(100, 2000),
            ack(115, 3000),
            ack(900, 4000),
            ack(905, 4000),
            data(950, 4000, 1000),
        ];
        let f = replay(&segs);
        let rtts: Vec<f64> = f.rtt.iter().map(|r| r.rtt_ns).collect();
        assert_eq!(rtts, [100_000.0, 105_000.0, 880_000.0]);
        assert_eq!(f.losses.len(), 1);
        assert_eq!(f.losses[0].rtt_before_ns, Some(105_000.0));
    }

    /// Twenty 1000-byte segments every 100 us from sequence 1000, each
    /// ACKed 1 ms after it left (RTT 1 ms, ACKs 100 us apart, the last
    /// at 2.9 ms); then `more`, sorted into time order.
    fn steady_then(more: &[Segment]) -> Vec<Segment> {
        let mut segs: Vec<Segment> = (0..20)
            .flat_map(|i| {
                let seq = 1000 + 1000 * i as u32;
                [data(100 * i, seq, 1000), ack(1000 + 100 * i, seq + 1000)]
            })
            .chain(more.iter().copied())
            .collect();
        segs.sort_by_key(|s| s.t_ns);
        segs
    }

    /// The path pauses: segments 20-24 (sent at 2.0-2.4 ms) are ACKed
    /// at 6.0-6.4 ms, RTT 4 ms, after 3.1 ms without an ACK (31 times
    /// the usual 100 us, over 1 ms) and an RTT jump of 3 ms (over 0.3
    /// of the silence). Segment 25 is lost (a duplicate ACK, resent at
    /// 6.6 ms): its event's RTT (4 ms) came after the pause.
    #[test]
    fn a_pause_of_the_path_marks_the_loss_after_it() {
        let mut more: Vec<Segment> = (20..26)
            .map(|i| data(100 * i, 1000 + 1000 * i as u32, 1000))
            .collect();
        more.extend((20..25).map(|i| ack(100 * i + 4000, 2000 + 1000 * i as u32)));
        more.extend([ack(6500, 26000), data(6600, 26000, 1000)]);
        let f = replay(&steady_then(&more));
        assert_eq!(f.losses.len(), 1);
        assert_eq!(f.losses[0].rtt_before_ns, Some(4_000_000.0));
        assert!(f.losses[0].after_pause);
    }

    /// Not a pause, or over: (a) the sender idles from 2.0 to 5.0 ms and
    /// the ACKs stop as long, but the RTT stays 1 ms; (b) the path
    /// pauses (segment 20's ACK at 6.0 ms, RTT 4 ms) but the next
    /// segments come back at 1 ms again, under the RTT before the jump.
    /// A loss after either is not marked.
    #[test]
    fn a_silence_without_a_jump_or_a_pause_that_ended_marks_nothing() {
        let lost = |sent: i64, dup: i64| {
            [
                data(sent, 26000, 1000),
                ack(dup, 26000),
                data(dup + 100, 26000, 1000),
            ]
        };
        let mut idle: Vec<Segment> = (20..25)
            .flat_map(|i| {
                let (t, seq) = (5000 + 100 * (i - 20), 1000 + 1000 * i as u32);
                [data(t, seq, 1000), ack(t + 1000, seq + 1000)]
            })
            .collect();
        idle.extend(lost(5500, 6500));
        let mut ended = vec![data(2000, 21000, 1000), ack(6000, 22000)];
        ended.extend((21..25).flat_map(|i| {
            let (t, seq) = (6000 + 100 * (i - 20), 1000 + 1000 * i as u32);
            [data(t, seq, 1000), ack(t + 1000, seq + 1000)]
        }));
        ended.extend(lost(6500, 7500));
        for (what, more) in [("idle", idle), ("ended", ended)] {
            let f = replay(&steady_then(&more));
            assert_eq!(f.losses.len(), 1, "{what}");
            assert_eq!(f.losses[0].rtt_before_ns, Some(1_000_000.0), "{what}");
            assert!(!f.losses[0].after_pause, "{what}");
        }
    }

    /// A tail-loss probe: segments 1000-2999 sent; the ACK for the first
    /// arrives; the second is resent at 200 us (an event); the ACK at 300
    /// covers it and D-SACKs 2000-3000 (the receiver got it twice): the
    /// event is spurious, no loss. A real loss later (resent at 500, no
    /// D-SACK) stays one. A D-SACK for half an event's bytes keeps it.
    #[test]
    fn dsacked_retransmissions_are_not_losses() {
        let dsack = |t, a, l, r| Segment {
            dsack: Some((l, r)),
            ..ack(t, a)
        };
        let segs = [
            data(0, 1000, 1000),
            data(10, 2000, 1000),
            ack(100, 2000),
            data(200, 2000, 1000),
            dsack(300, 3000, 2000, 3000),
            data(310, 3000, 1000),
            data(320, 4000, 1000),
            data(500, 3000, 1000),
            data(510, 4000, 1000),
            // Only 3000-4000 of the second event's 2000 bytes reported.
            dsack(600, 5000, 3000, 4000),
        ];
        let f = replay(&segs);
        assert_eq!(f.spurious.len(), 1);
        assert_eq!(f.spurious[0].t_ns, 200_000);
        assert_eq!(f.losses.len(), 1);
        assert_eq!((f.losses[0].t_ns, f.losses[0].segments), (500_000, 2));
        assert_eq!(f.retransmitted_segments, 3);
    }

    /// Sequence numbers that wrap: base 4294967000, 1000-byte segments.
    #[test]
    fn sequence_wrap() {
        let b = 4_294_967_000u32;
        let segs = [
            data(0, b, 1000),
            data(10, b.wrapping_add(1000), 1000),
            ack(100, b.wrapping_add(2000)),
        ];
        let f = replay(&segs);
        assert_eq!(f.sent[1].end, 2000);
        assert_eq!(f.acks[0].ack, 2000);
        assert_eq!(f.rtt.len(), 1);
    }
}
