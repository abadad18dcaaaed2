//! What happened to a stream's packets on the sending host, judged
//! without I/O: each stream's departures ([`judge_departures`]: a sender
//! that fell behind its schedule marks the stream host-limited; transmit
//! stamps spread wider than the schedule mean the sender's own interface
//! queued the probes, i.e. the tight link is the sender's own), the
//! session's tally of them (`SendLedger`), and the probe stream built
//! from a schedule and receive stamps.

use tightlink_core::channel::{HostFindings, STALL_TO_SEND_AGAIN_NS};
use tightlink_core::warning::{Warning, WarningCode};
use tightlink_core::{ProbePacket, ProbeStream};
pub use tightlink_sys::cpu_time::STOLEN_SHARE_WARNING;
use tightlink_sys::cpu_time::{self, CpuTimes};

use crate::stamps::Departures;

/// Layer name used in reports.
pub const RATE_LAYER: &str =
    "Ethernet frame without preamble and FCS (IP packet + 14 B), as tbf and interface counters count";

/// One stream's departures, judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepartureVerdict {
    /// The sender fell behind its schedule, and by how much at worst (ns;
    /// 0 where it cannot tell).
    pub late: bool,
    pub worst_lag_ns: i64,
    /// The sender's own interface queued the stream: the rate at which it
    /// left (bytes after the first stamped packet over the stamped span).
    pub queued_rate_bps: Option<f64>,
    pub tx_missing: usize,
}

/// Judges a stream's departures. `late`: the 90th percentile of send
/// lateness exceeds max(2 us, half the mean gap), so the host could not
/// keep the rate; when the far end sent (no user-space times), lateness is
/// the transmit stamp's lag behind the schedule over the lag of its
/// best-kept tenth, against max(20 us, half the mean gap): a sending
/// server's kernel stamps lag its schedule by 5-17 us at the 90th
/// percentile on the lab's veth path with nothing late (its sends carry the
/// forwarding work of the hops behind them). `queued`: at least 90 % of
/// packets have transmit stamps, their span exceeds the scheduled span by
/// 5 % + 5 us, and the lag of the kernel stamp behind the user-space send
/// grew by as much (last tenth of the stream against the first), which a
/// stalled sender does not do (when the far end sent and gave no user-space
/// times: a fifth of the transmit gaps or more stretched, where a stall
/// stretches one).
pub fn judge_departures(d: &Departures, sizes: &[u32]) -> DepartureVerdict {
    let n = d.scheduled_ns.len();
    let tx_missing = d.tx_ns.iter().filter(|t| t.is_none()).count();
    let mut v = DepartureVerdict {
        late: false,
        worst_lag_ns: 0,
        queued_rate_bps: None,
        tx_missing,
    };
    if n < 10 {
        return v;
    }
    let sched_span = (d.scheduled_ns[n - 1] - d.scheduled_ns[0]) as f64;
    let mean_gap = sched_span / (n - 1) as f64;
    if !d.user_ns.is_empty() {
        let mut late: Vec<i64> = d
            .user_ns
            .iter()
            .zip(&d.scheduled_ns)
            .map(|(u, s)| u - s)
            .collect();
        late.sort_unstable();
        let p90 = late[(late.len() * 9) / 10];
        v.late = p90 as f64 > (mean_gap / 2.0).max(2_000.0);
        v.worst_lag_ns = late[late.len() - 1].max(0);
    } else if tx_missing * 10 <= n {
        let mut lag: Vec<i64> = d
            .tx_ns
            .iter()
            .zip(&d.scheduled_ns)
            .filter_map(|(t, s)| t.map(|t| t - s))
            .collect();
        lag.sort_unstable();
        let p90 = lag[(lag.len() * 9) / 10] - lag[lag.len() / 10];
        v.late = p90 as f64 > (mean_gap / 2.0).max(20_000.0);
        v.worst_lag_ns = (lag[lag.len() - 1] - lag[lag.len() / 10]).max(0);
    }
    if tx_missing * 10 <= n {
        let stamped: Vec<(usize, i64)> = d
            .tx_ns
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|t| (i, t)))
            .collect();
        if let (Some(&(i0, t0)), Some(&(i1, t1))) = (stamped.first(), stamped.last()) {
            let sched = (d.scheduled_ns[i1] - d.scheduled_ns[i0]) as f64;
            let tx = (t1 - t0) as f64;
            // A queue in the sender's own qdisc makes the kernel stamp lag
            // the user-space send more and more; a stall of the sending
            // thread delays both alike (a 1 ms VM stall near a loopback
            // stream's end once read as "own link at 93 Mbit/s").
            let queue_growth_ns = if d.user_ns.len() == n {
                let lag: Vec<i64> = stamped.iter().map(|&(i, t)| t - d.user_ns[i]).collect();
                let k = (lag.len() / 10).max(1);
                (median_i64(&lag[lag.len() - k..]) - median_i64(&lag[..k])) as f64
            } else if spread_gaps(&stamped, &d.scheduled_ns) * 5 >= stamped.len() {
                // No user-space times (the far end sent): a queue stretches
                // many gaps, a stall of the sending thread one or two.
                tx - sched
            } else {
                0.0
            };
            if i1 > i0 && tx > sched * 1.05 + 5_000.0 && queue_growth_ns > sched * 0.05 + 5_000.0 {
                // The rate the queue drained at: from the last packet that
                // left without a queue (lag within 2 us of the first
                // tenth's) to the end. Over the whole span, the unqueued
                // start of a multi-rate stream pulled it low (179 for a
                // 200 Mbit/s tbf once streams centred on the truth).
                let (q, tq) = if d.user_ns.len() == n {
                    let lag: Vec<i64> = stamped.iter().map(|&(i, t)| t - d.user_ns[i]).collect();
                    let base = median_i64(&lag[..(lag.len() / 10).max(1)]);
                    let last_free = lag.iter().rposition(|&l| l <= base + 2_000).unwrap_or(0);
                    let from = if stamped.len() - last_free >= 10 {
                        last_free
                    } else {
                        0
                    };
                    stamped[from]
                } else {
                    (i0, t0)
                };
                let bytes: u64 = sizes[q + 1..=i1].iter().map(|&s| s as u64).sum();
                v.queued_rate_bps = Some(bytes as f64 * 8e9 / (t1 - tq) as f64);
            }
        }
    }
    v
}

/// What the departures of every stream said about the sending host: the
/// part of [`HostFindings`] that any channel sending paced probes keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct SendLedger {
    /// Streams judged, and those the sender fell behind on.
    pub streams: usize,
    pub late_streams: usize,
    /// Late streams that its own interface's queue does not explain.
    pub late_unqueued: usize,
    /// Own-link rates of the streams the sender's interface queued.
    pub own_link: Vec<f64>,
    pub tx_missing: u64,
    /// Packets received after a later-sent one (taken out of their
    /// streams), and the streams that had any.
    pub overtaken: u64,
    pub overtaken_streams: usize,
    /// This host's CPU times when the session opened (`None` where
    /// `/proc/stat` cannot be read).
    pub cpu_at_open: Option<CpuTimes>,
    /// Datagrams the receiving end's socket (or packet ring) dropped, its
    /// buffer full, and the streams during which it did.
    pub receiver_dropped: u64,
    pub receiver_overflowed_streams: usize,
}

impl SendLedger {
    /// A session's ledger; `cpu_at_open` is this host's CPU times as the
    /// session opened (read by the channel: the ledger does no I/O).
    pub fn open(cpu_at_open: Option<CpuTimes>) -> SendLedger {
        SendLedger {
            cpu_at_open,
            ..SendLedger::default()
        }
    }

    /// Judges one stream's departures; `stamps_expected` is false where
    /// the backend gets no transmit stamps (said once, not per stream).
    /// True where the sender fell behind with no queue of its own to
    /// explain it and stalled for [`STALL_TO_SEND_AGAIN_NS`] or more (a
    /// stream worth sending again).
    pub fn note(&mut self, d: &Departures, sizes: &[u32], stamps_expected: bool) -> bool {
        let v = judge_departures(d, sizes);
        self.streams += 1;
        self.late_streams += v.late as usize;
        self.late_unqueued += (v.late && v.queued_rate_bps.is_none()) as usize;
        if stamps_expected {
            self.tx_missing += v.tx_missing as u64;
        }
        // Late or not: a sender whose own qdisc is full blocks in `send`,
        // so the queued streams are the late ones; the kernel stamp lag
        // that grew (not the lateness) says the queue was its own.
        if let Some(r) = v.queued_rate_bps {
            self.own_link.push(r);
        }
        v.late && v.queued_rate_bps.is_none() && v.worst_lag_ns >= STALL_TO_SEND_AGAIN_NS
    }

    /// Counts what the receiving end's socket dropped while one stream
    /// came in; true where it dropped any (the stream's losses may then
    /// be the receiving host's).
    pub fn note_receiver_drops(&mut self, dropped: u32) -> bool {
        self.receiver_dropped += u64::from(dropped);
        self.receiver_overflowed_streams += usize::from(dropped > 0);
        dropped > 0
    }

    /// The stream model of one probed stream (see [`probe_stream`]), with
    /// the packets the path reordered marked lost and counted.
    pub fn stream(
        &mut self,
        stream: u32,
        sizes: &[u32],
        send_ns: &[i64],
        recv_ns: &[Option<i64>],
    ) -> ProbeStream {
        let mut s = probe_stream(stream, sizes, send_ns, recv_ns);
        let n = s.drop_overtaken();
        if n > 0 {
            self.overtaken += n as u64;
            self.overtaken_streams += 1;
        }
        s
    }

    /// What the session found; `cpu_now` is this host's CPU times now (for
    /// the share the hypervisor stole since the session opened).
    pub fn findings(
        &self,
        cpu_now: Option<CpuTimes>,
        host_limit_bps: f64,
        mut drops: Vec<(&'static str, u64)>,
        mut warnings: Vec<Warning>,
    ) -> HostFindings {
        if self.receiver_dropped > 0 {
            drops.push(("socket_overflow", self.receiver_dropped));
            warnings.push(Warning::new(WarningCode::ReceiverDrops, format!(
                "the receiving host's socket dropped {} datagrams in {} of {} streams (its receive buffer or packet ring was full: that host read too slowly); probes lost there are the host's, not the path's: streams that lost probes then were sent again while the resend limits allowed, and any kept read those losses as congestion",
                self.receiver_dropped, self.receiver_overflowed_streams, self.streams
            )));
        }
        if self.overtaken > 0 {
            warnings.push(Warning::new(WarningCode::Reordered, format!(
                "the path reordered probes: {} packets in {} streams arrived after later-sent ones and count as lost (their times say nothing of the queue the rest saw; loss reads as congestion, so the estimate may read low)",
                self.overtaken, self.overtaken_streams
            )));
        }
        if sender_fell_behind(self.late_unqueued, self.streams) {
            warnings.push(Warning::new(WarningCode::SenderLate, format!(
                "the sending host fell behind its schedule in {} of {} streams with no queue of its own to explain it (another process on its CPUs?): late packets leave in catch-up bursts that the path disperses, so the estimate may read low",
                self.late_unqueued, self.streams
            )));
        }
        let stolen_share = self
            .cpu_at_open
            .zip(cpu_now)
            .and_then(|(a, b)| cpu_time::stolen_share(a, b));
        if let Some(s) = stolen_share.filter(|&s| s >= STOLEN_SHARE_WARNING) {
            warnings.push(Warning::new(WarningCode::CpuStolen, stolen_warning(s)));
        }
        if let Some(&(_, n)) = drops.iter().find(|(name, _)| *name == "duplicate") {
            warnings.push(Warning::new(WarningCode::Duplicated, format!(
                "the path duplicated {n} probes: the copies were not used, but they load the path, so the estimate is what is left beside them"
            )));
        }
        let mut own = self.own_link.clone();
        own.sort_by(f64::total_cmp);
        HostFindings {
            host_limit_bps,
            late_streams: self.late_streams,
            queued_streams: own.len(),
            own_link_bps: own.get(own.len() / 2).copied(),
            tx_stamps_missing: self.tx_missing,
            drops,
            rate_layer: RATE_LAYER,
            warnings,
            far_end: None,
            stolen_share,
        }
    }
}

/// What a share of stolen CPU time means for the answer.
pub fn stolen_warning(share: f64) -> String {
    format!(
        "the hypervisor took {:.0} % of this host's CPU time while it measured (steal time in /proc/stat): stalled vCPUs send paced probes late and in bursts, stamp arrivals late, and stall any shaper on this host, so the estimate may read low",
        share * 100.0
    )
}

/// Consecutive stamped packets whose transmit gap exceeds their
/// scheduled gap by more than 5 % and 1 us.
fn spread_gaps(stamped: &[(usize, i64)], scheduled_ns: &[i64]) -> usize {
    stamped
        .windows(2)
        .filter(|w| {
            let sched = (scheduled_ns[w[1].0] - scheduled_ns[w[0].0]) as f64;
            (w[1].1 - w[0].1) as f64 > sched * 1.05 + 1_000.0
        })
        .count()
}

fn median_i64(xs: &[i64]) -> i64 {
    tightlink_core::stats::median_i64(xs).unwrap_or(0)
}

/// The stream model of one probed stream: sizes at the frame layer, the
/// schedule as send times, kernel receive stamps.
pub(crate) fn probe_stream(
    stream: u32,
    sizes: &[u32],
    send_ns: &[i64],
    recv_ns: &[Option<i64>],
) -> ProbeStream {
    ProbeStream::new(
        stream as u64,
        sizes
            .iter()
            .zip(send_ns)
            .zip(recv_ns)
            .map(|((&size_bytes, &send_ns), &recv_ns)| ProbePacket {
                size_bytes,
                send_ns,
                recv_ns,
            })
            .collect(),
    )
}

/// Whether a sender late in `late` of `streams` streams fell behind:
/// in two or more, and half of them or more. This host's own rule, and
/// a reflector's that sends held trains back.
pub(crate) fn sender_fell_behind(late: usize, streams: usize) -> bool {
    late >= 2 && late * 2 >= streams
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Late in 2 of 4 streams: fell behind; 2 of 5, or 1 of 1, did not.
    #[test]
    fn a_sender_late_in_half_its_streams_fell_behind() {
        assert!(sender_fell_behind(2, 4));
        assert!(sender_fell_behind(5, 6));
        assert!(!sender_fell_behind(2, 5));
        assert!(!sender_fell_behind(1, 1));
        assert!(!sender_fell_behind(0, 0));
    }

    fn departures(gap_ns: i64, n: usize, late_ns: i64, tx_gap_ns: i64) -> Departures {
        Departures {
            scheduled_ns: (0..n as i64).map(|i| i * gap_ns).collect(),
            user_ns: (0..n as i64).map(|i| i * gap_ns + late_ns).collect(),
            tx_ns: (0..n as i64).map(|i| Some(2_000 + i * tx_gap_ns)).collect(),
        }
    }

    /// 100 packets of 1514 B every 60.56 us (200 Mbit/s), sent on time
    /// and stamped on time: neither late nor queued.
    #[test]
    fn on_time_departures_are_clean() {
        let d = departures(60_560, 100, 500, 60_560);
        let v = judge_departures(&d, &[1514; 100]);
        assert_eq!(
            v,
            DepartureVerdict {
                late: false,
                worst_lag_ns: 500,
                queued_rate_bps: None,
                tx_missing: 0
            }
        );
    }

    /// Scheduled at 300 Mbit/s (40.37 us) but the kernel stamped them
    /// 60.56 us apart: queued in the sender's own qdisc; the rate it left
    /// at is 1514 * 8 / 60.56 us = 200 Mbit/s.
    /// The far end sent (no user-space times): 100 packets scheduled
    /// 83.36 us apart with one 2 ms stall of its thread after packet 50 is
    /// not a queue; the same stream leaving 100 us apart throughout (a
    /// queue draining 1042-byte frames at 83.36 Mbit/s) is.
    #[test]
    fn without_user_times_a_stall_is_not_a_queue() {
        let mut d = departures(83_360, 100, 0, 83_360);
        d.user_ns.clear();
        for t in d.tx_ns.iter_mut().skip(51) {
            *t = t.map(|t| t + 2_000_000);
        }
        assert_eq!(judge_departures(&d, &[1042; 100]).queued_rate_bps, None);
        let mut q = departures(83_360, 100, 0, 100_000);
        q.user_ns.clear();
        let r = judge_departures(&q, &[1042; 100]).queued_rate_bps.unwrap();
        assert!((r / 83.36e6 - 1.0).abs() < 0.01, "{r}");
    }

    /// The far end sent (no user-space times): its thread stalled 400 us
    /// at packet 40 of a 200 Mbit/s stream (60.56 us gaps) and caught up
    /// 10 us a packet, so packets 40-47 left 400, 349, ..., 43 us late:
    /// 8 of 100 late is under the tenth that `late` asks. The same stall
    /// at packets 40 and 70 makes 16 late: late, and not a queue of its
    /// own. Stamps that lag 0-15 us behind the schedule are not late.
    #[test]
    fn without_user_times_a_stalled_far_end_is_late() {
        let stall = |d: &mut Departures, at: usize| {
            let mut lag = 400_000i64;
            for i in at..100 {
                if lag <= 0 {
                    break;
                }
                d.tx_ns[i] = d.tx_ns[i].map(|t| t + lag);
                lag -= 60_560 - 10_000;
            }
        };
        let mut once = departures(60_560, 100, 0, 60_560);
        once.user_ns.clear();
        stall(&mut once, 40);
        assert_eq!(once.tx_ns[47].unwrap() - once.tx_ns[46].unwrap(), 10_000);
        assert!(!judge_departures(&once, &[1514; 100]).late);
        let mut twice = once.clone();
        stall(&mut twice, 70);
        let v = judge_departures(&twice, &[1514; 100]);
        assert!(v.late, "{v:?}");
        assert_eq!(v.queued_rate_bps, None);
        let mut jitter = departures(60_560, 100, 0, 60_560);
        jitter.user_ns.clear();
        for (i, t) in jitter.tx_ns.iter_mut().enumerate() {
            *t = t.map(|t| t + [0, 15_000, 7_000][i % 3]);
        }
        assert!(!judge_departures(&jitter, &[1514; 100]).late);
    }

    /// 100 packets every 60.56 us; the sending thread stalls at packet
    /// 30 and catches up 10 us a packet. A 400 us stall leaves packets
    /// 30-37 late (400, 349.4, ... us): 8 of 100, not late; 600 us leaves
    /// 12 late: late, by 600 us at worst, so worth sending again; 300 us
    /// at packets 30 and 60 (12 late) is late too, but under 500 us.
    #[test]
    fn a_stall_of_half_a_millisecond_sends_the_stream_again() {
        let stalled = |stalls: &[(usize, i64)]| {
            let mut d = departures(60_560, 100, 0, 60_560);
            for &(at, by) in stalls {
                let mut lag = by;
                for i in at..100 {
                    if lag <= 0 {
                        break;
                    }
                    d.user_ns[i] += lag;
                    d.tx_ns[i] = d.tx_ns[i].map(|t| t + lag);
                    lag -= 60_560 - 10_000;
                }
            }
            d
        };
        let mut ledger = SendLedger::default();
        let once = stalled(&[(30, 400_000)]);
        assert!(!judge_departures(&once, &[1514; 100]).late);
        assert!(!ledger.note(&once, &[1514; 100], true));
        let long = stalled(&[(30, 600_000)]);
        let v = judge_departures(&long, &[1514; 100]);
        assert!(v.late && v.worst_lag_ns == 600_000, "{v:?}");
        assert!(ledger.note(&long, &[1514; 100], true));
        let short_twice = stalled(&[(30, 300_000), (60, 300_000)]);
        let v = judge_departures(&short_twice, &[1514; 100]);
        assert!(v.late && v.worst_lag_ns == 300_000, "{v:?}");
        assert!(!ledger.note(&short_twice, &[1514; 100], true));
        assert_eq!(ledger.late_streams, 2);
    }

    #[test]
    fn a_shaped_own_link_is_seen_in_transmit_stamps() {
        let d = departures(40_373, 100, 500, 60_560);
        let v = judge_departures(&d, &[1514; 100]);
        assert!(!v.late);
        let r = v.queued_rate_bps.unwrap();
        assert!((r / 200e6 - 1.0).abs() < 0.001, "{r}");
    }

    /// A multi-rate stream through the sender's own 200 Mbit/s tbf: 50
    /// packets at 150 Mbit/s (80.75 us) leave on time, then 50 at 300
    /// Mbit/s (40.37 us) queue and leave 60.56 us apart. The rate it left
    /// at is measured from packet 49 (the last unqueued) on: 50 x 1514 B
    /// over 50 x 60.56 us = 200 Mbit/s, where the whole span would read
    /// 99 x 1514 B over 49 x 80.75 + 50 x 60.56 us = 169 Mbit/s.
    #[test]
    fn only_the_queued_part_gives_the_own_link_rate() {
        let mut sched = Vec::new();
        let mut tx = Vec::new();
        let (mut s, mut t) = (0i64, 2_000i64);
        for i in 0..100 {
            if i > 0 {
                s += if i < 50 { 80_750 } else { 40_373 };
                t += if i < 50 { 80_750 } else { 60_560 };
            }
            sched.push(s);
            tx.push(Some(t));
        }
        let d = Departures {
            user_ns: sched.iter().map(|s| s + 500).collect(),
            scheduled_ns: sched,
            tx_ns: tx,
        };
        let r = judge_departures(&d, &[1514; 100]).queued_rate_bps.unwrap();
        assert!((r / 200e6 - 1.0).abs() < 0.001, "{r}");
    }

    /// The sending thread stalls 1.2 ms before the last 5 packets of a
    /// 100 Mbit/s stream: user-space and kernel stamps are late alike, the
    /// stamped span is 7 % too long, but nothing queued (loopback CI flake).
    #[test]
    fn a_stalled_sender_is_not_a_queued_link() {
        let mut d = departures(121_120, 100, 500, 121_120);
        for i in 95..100 {
            d.user_ns[i] += 1_200_000;
            d.tx_ns[i] = d.tx_ns[i].map(|t| t + 1_200_000);
        }
        let v = judge_departures(&d, &[1514; 100]);
        assert_eq!(v.queued_rate_bps, None, "{v:?}");
    }

    /// A host that cannot keep 4 us gaps falls further behind every packet
    /// (here 1 us per packet): late.
    #[test]
    fn a_host_falling_behind_is_late() {
        let mut d = departures(4_000, 100, 0, 5_000);
        for (i, u) in d.user_ns.iter_mut().enumerate() {
            *u += i as i64 * 1_000;
        }
        assert!(judge_departures(&d, &[1514; 100]).late);
    }

    /// Scheduled at 300 Mbit/s into the sender's own 200 Mbit/s qdisc
    /// whose queue fills after 30 packets: from then on `send` blocks, so
    /// the sender is late by as much as the queue drains behind schedule,
    /// and the lag of kernel stamp behind `send` stays at 30 x (60.56 -
    /// 40.37) us. Late, yet the own link (200 Mbit/s) is what it found.
    fn blocked_on_own_queue() -> Departures {
        let mut d = departures(40_373, 100, 500, 60_560);
        for i in 30..100 {
            d.user_ns[i] = d.tx_ns[i].unwrap() - 30 * (60_560 - 40_373) - 1_500;
        }
        d
    }

    #[test]
    fn a_sender_blocked_on_its_own_queue_is_late_and_queued() {
        let d = blocked_on_own_queue();
        let v = judge_departures(&d, &[1514; 100]);
        assert!(v.late);
        let r = v.queued_rate_bps.unwrap();
        assert!((r / 200e6 - 1.0).abs() < 0.01, "{r}");
        let mut ledger = SendLedger::default();
        ledger.note(&d, &[1514; 100], true);
        let f = ledger.findings(None, 1e9, Vec::new(), Vec::new());
        assert_eq!(f.queued_streams, 1);
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    }

    /// 40 of 400 ticks stolen (10 %) since the session opened: the
    /// findings carry the share and warn; 8 of 400 (2 %) is carried but
    /// not warned of; without a reading neither.
    #[test]
    fn stolen_cpu_time_is_reported_and_warned_of_from_five_percent() {
        let at = |total_ticks, steal_ticks| {
            Some(CpuTimes {
                total_ticks,
                steal_ticks,
            })
        };
        let ledger = SendLedger::open(at(1_000, 100));
        let f = ledger.findings(at(1_400, 140), 1e9, Vec::new(), Vec::new());
        assert_eq!(f.stolen_share, Some(0.1));
        assert_eq!(f.warnings.len(), 1);
        assert_eq!(f.warnings[0].code, WarningCode::CpuStolen);
        assert!(f.warnings[0]
            .text
            .contains("took 10 % of this host's CPU time"));
        let f = ledger.findings(at(1_400, 108), 1e9, Vec::new(), Vec::new());
        assert_eq!(f.stolen_share, Some(0.02));
        assert!(f.warnings.is_empty(), "{:?}", f.warnings);
        let f = SendLedger::open(None).findings(at(1_400, 140), 1e9, Vec::new(), Vec::new());
        assert_eq!(f.stolen_share, None);
        assert!(f.warnings.is_empty());
    }

    /// Late streams with no own queue behind them: 2 of 4 is half, so the
    /// findings warn that the estimate may read low; 1 of 4 does not.
    #[test]
    fn a_sender_late_in_half_its_streams_is_warned_of() {
        let mut late = departures(4_000, 100, 0, 4_000);
        for (i, u) in late.user_ns.iter_mut().enumerate() {
            *u += i as i64 * 1_000;
        }
        for (i, t) in late.tx_ns.iter_mut().enumerate() {
            *t = t.map(|t| t + i as i64 * 1_000);
        }
        assert_eq!(judge_departures(&late, &[1514; 100]).queued_rate_bps, None);
        let on_time = departures(4_000, 100, 500, 4_000);
        let mut ledger = SendLedger::default();
        for d in [&late, &on_time, &on_time, &on_time] {
            ledger.note(d, &[1514; 100], true);
        }
        assert!(ledger
            .findings(None, 1e9, Vec::new(), Vec::new())
            .warnings
            .is_empty());
        let mut ledger = SendLedger::default();
        for d in [&late, &late, &on_time, &on_time] {
            ledger.note(d, &[1514; 100], true);
        }
        let w = ledger.findings(None, 1e9, Vec::new(), Vec::new()).warnings;
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!(w[0].code, WarningCode::SenderLate);
        assert!(w[0].text.contains("2 of 4 streams"), "{w:?}");
    }

    /// Missing stamps are counted; with more than 10 % missing no queue
    /// verdict is drawn.
    #[test]
    fn missing_stamps_block_the_queue_verdict() {
        let mut d = departures(40_373, 100, 0, 60_560);
        for t in d.tx_ns.iter_mut().step_by(5) {
            *t = None;
        }
        let v = judge_departures(&d, &[1514; 100]);
        assert_eq!(v.tx_missing, 20);
        assert_eq!(v.queued_rate_bps, None);
    }
}
