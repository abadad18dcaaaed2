//! pathChirp (Ribeiro, Riedi, Baraniuk, Navratil and Cottrell, PAM 2003;
//! the chirp family of \[HOST\] section 4): one chirp's estimate of the
//! available bandwidth from its queuing-delay excursions.
//!
//! A chirp's gaps shrink by a spread factor, so each gap `k` probes its
//! own instantaneous rate `R_k`. While `R_k` stays under the available
//! bandwidth, a queue a packet finds drains before the next one; above it
//! the queuing delay `q` keeps growing. The chirp is cut into excursions:
//! one starts where `q` rises and ends at the first packet whose delay,
//! above the start's, has fallen under its peak over `decrease_factor`.
//! An excursion of at least `busy_period` packets that ends is a burst of
//! cross traffic the path absorbed: at each of its rising gaps the
//! available bandwidth was `R_k`. An excursion that never ends marks where
//! the chirp overtook the path: from its start `l` on, and at every gap
//! nothing else marked, the estimate is `R_l`. The chirp's answer is the
//! average of the per-gap values weighted by the send gaps,
//! `D = sum E_k g_k / sum g_k` (the paper's eq. 9).
//!
//! Constants are pathChirp 2.3.7's defaults (decrease factor 1.5, busy
//! period 5 packets, estimates averaged over 11 chirps). Packets it lost
//! spoil the chirp (pathChirp drops such chirps). Receive batches
//! (interrupt coalescence): pathChirp marks a receive gap under 10 us as
//! batched, skips such packets, and reads nothing from the first two
//! batched gaps in a row on. Ours: the threshold is half the chirp's
//! shortest send gap rather than 10 us, which was tuned for 1000-byte
//! probes under 1 Gbit/s and would mark every packet of a 10 Gbit/s path
//! as batched; a chirp with fewer than `busy_period` gaps before its
//! batches gives no answer, where pathChirp would answer from two.
//!
//! Jumbo chirps (pathChirp's `-J`): each chirp element is `J` packets
//! sent back to back, elements spaced as a chirp of `J`-packet probes, so
//! that each element lasts longer than a receive batch. Per element
//! pathChirp reads the packet that ends a receive batch (its stamp is its
//! own, not a later packet's interrupt); an element with none lies inside
//! one batch, and the chirp is read only up to the element before it. Ours
//! does the same, except that the batch must end inside the element: the
//! element's last packet, followed by the quiet before the next element,
//! waits out the coalescence timer, and pathChirp's rule would read that
//! wait as queueing. `ProbeStream::jumbo_elements` finds the elements from the send
//! gaps, [`per_element`] reduces the chirp to one packet per element, and
//! the excursions are read on that.
//!
//! Bounds (ours, as the other estimators answer them): no rising
//! excursion at all reads "at least" the top rate, an excursion that opens
//! at the first gap and never ends reads "at most" the lowest rate.

use super::Bound;
use crate::stream::{diff_ns, ProbePacket, ProbeStream};

/// pathChirp's tunables.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChirpParams {
    /// An excursion ends when its delay falls under its peak over this.
    pub decrease_factor: f64,
    /// Shortest excursion, in packets, that counts as a busy period.
    pub busy_period: usize,
    /// A receive gap under this share of the chirp's shortest send gap
    /// is two packets of one receive batch.
    pub batch_gap_share: f64,
    /// Batched gaps in a row from which the rest of the chirp is unread.
    pub batched_in_a_row: usize,
}

impl Default for ChirpParams {
    fn default() -> Self {
        ChirpParams {
            decrease_factor: 1.5,
            busy_period: 5,
            batch_gap_share: 0.5,
            batched_in_a_row: 2,
        }
    }
}

/// One chirp's answer.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChirpEstimate {
    pub abw_bps: f64,
    pub bound: Bound,
    /// Gaps read (those before the receive batches).
    pub gaps_used: usize,
    /// Excursions that ended and were long enough to count.
    pub excursions: usize,
}

/// Why a chirp gives no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChirpError {
    /// Packets lost (pathChirp reads only whole chirps).
    Lost(usize),
    /// Fewer packets than the given least.
    TooShort(usize),
    /// Receive batches from this packet on left less than a busy period.
    Batched(usize),
    NoAdvance,
}

impl std::fmt::Display for ChirpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChirpError::Lost(n) => write!(
                f,
                "{n} packets of the chirp were lost: pathChirp reads only whole chirps"
            ),
            ChirpError::TooShort(n) => write!(f, "a chirp needs {n} packets or more"),
            ChirpError::Batched(j) => write!(
                f,
                "receive batches (interrupt coalescence) from packet {j} on: \
                 fewer gaps before them than one busy period"
            ),
            ChirpError::NoAdvance => f.write_str("send times do not advance"),
        }
    }
}

/// A jumbo chirp as one packet per element, for [`chirp_estimate`]: the
/// element's first send time and its bytes (the rate of the gap before
/// it), and a receive time that keeps the one-way delay of the element's
/// last packet that ends a receive batch inside the element (a receive
/// gap before the element's next packet of at least `batch_gap_share` of
/// the in-element send gap). Elements from the first with no such packet
/// on are left out; a lost packet is kept (as lost) so that the estimate
/// refuses the chirp. On a receiver that stamps packets one by one every
/// gap is a batch's end, and the element's last but one packet is read.
pub fn per_element(
    stream: &ProbeStream,
    elements: &[std::ops::Range<usize>],
    p: &ChirpParams,
) -> ProbeStream {
    let pk = &stream.packets;
    let inner = elements
        .iter()
        .flat_map(|e| pk[e.clone()].windows(2))
        .map(|w| diff_ns(w[1].send_ns, w[0].send_ns))
        .fold(f64::INFINITY, f64::min);
    let threshold = p.batch_gap_share * inner;
    let mut out = Vec::with_capacity(elements.len());
    for e in elements {
        let first = pk[e.start];
        let bytes: u32 = pk[e.clone()].iter().map(|x| x.size_bytes).sum();
        if pk[e.clone()].iter().any(|x| x.recv_ns.is_none()) {
            out.push(ProbePacket {
                size_bytes: bytes,
                send_ns: first.send_ns,
                recv_ns: None,
            });
            continue;
        }
        // The last packet followed by a receive gap inside the element:
        // the interrupt came while the element was still arriving, so it
        // was stamped as it arrived. The element's last packet may wait
        // out a whole coalescence timer in the quiet after it.
        let ends_batch = |k: usize| {
            let (Some(r), Some(next)) = (pk[k].recv_ns, pk[k + 1].recv_ns) else {
                return false;
            };
            diff_ns(next, r) >= threshold
        };
        let Some(k) = (e.start..e.end - 1).rev().find(|&k| ends_batch(k)) else {
            break;
        };
        let delay = diff_ns(pk[k].recv_ns.unwrap_or_default(), pk[k].send_ns);
        out.push(ProbePacket {
            size_bytes: bytes,
            send_ns: first.send_ns,
            recv_ns: Some(first.send_ns + delay.round() as i64),
        });
    }
    ProbeStream {
        id: stream.id,
        packets: out,
    }
}

/// The estimate of one chirp (every packet received, in send order); a
/// jumbo chirp is read one element at a time.
pub fn chirp_estimate(stream: &ProbeStream, p: &ChirpParams) -> Result<ChirpEstimate, ChirpError> {
    if let Some(elements) = stream.jumbo_elements() {
        let reduced = per_element(stream, &elements, p);
        let min_packets = p.busy_period.max(2) + 1;
        if reduced.len() < min_packets && reduced.len() < elements.len() {
            return Err(ChirpError::Batched(elements[reduced.len()].start));
        }
        return plain_chirp_estimate(&reduced, p);
    }
    plain_chirp_estimate(stream, p)
}

fn plain_chirp_estimate(
    stream: &ProbeStream,
    p: &ChirpParams,
) -> Result<ChirpEstimate, ChirpError> {
    let pk = &stream.packets;
    let min_packets = p.busy_period.max(2) + 1;
    if pk.len() < min_packets {
        return Err(ChirpError::TooShort(min_packets));
    }
    let lost = pk.iter().filter(|x| x.recv_ns.is_none()).count();
    if lost > 0 {
        return Err(ChirpError::Lost(lost));
    }
    let recv: Vec<i64> = pk.iter().map(|x| x.recv_ns.unwrap_or_default()).collect();
    let send_gap: Vec<f64> = pk
        .windows(2)
        .map(|w| diff_ns(w[1].send_ns, w[0].send_ns))
        .collect();
    if send_gap.iter().any(|g| *g <= 0.0) {
        return Err(ChirpError::NoAdvance);
    }
    // Gap k (packets k to k+1) probes packet k+1's bytes over its gap.
    let rate: Vec<f64> = send_gap
        .iter()
        .zip(&pk[1..])
        .map(|(g, x)| x.size_bytes as f64 * 8e9 / g)
        .collect();
    // Queuing delay relative to the first packet; the clocks' offset cancels.
    let q: Vec<f64> = (0..pk.len())
        .map(|j| diff_ns(recv[j], recv[0]) - diff_ns(pk[j].send_ns, pk[0].send_ns))
        .collect();

    // Receive batches: which packets arrived in one with the previous,
    // and where the run of batched gaps cuts the chirp.
    let shortest = send_gap.iter().copied().fold(f64::INFINITY, f64::min);
    let threshold = p.batch_gap_share * shortest;
    let mut good = vec![true; pk.len()];
    let mut last = pk.len() - 1;
    let mut run = 0;
    for j in 1..pk.len() {
        if diff_ns(recv[j], recv[j - 1]) < threshold {
            good[j] = false;
            run += 1;
            if run >= p.batched_in_a_row.max(1) {
                last = j - run;
                break;
            }
        } else {
            run = 0;
        }
    }
    if last < p.busy_period {
        return Err(ChirpError::Batched(last + 1));
    }

    let rising = |k: usize| k < last && good[k] && good[k + 1] && q[k + 1] > q[k];
    let next_rise = |from: usize| (from..last).find(|&k| rising(k)).unwrap_or(last);
    let mut per_gap: Vec<Option<f64>> = vec![None; last];
    let mut excursions = 0;
    let mut start = next_rise(0);
    let mut j = start + 1;
    let mut peak = 0.0f64;
    while j <= last {
        if good[j] {
            let above = q[j] - q[start];
            peak = peak.max(above);
            if above < peak / p.decrease_factor {
                if j - start >= p.busy_period {
                    excursions += 1;
                    for k in start..j {
                        if rising(k) {
                            per_gap[k] = Some(rate[k]);
                        }
                    }
                }
                start = next_rise(j);
                j = start;
                peak = 0.0;
            }
        }
        j += 1;
    }
    // The excursion still open at the end (or, with none, the last gap)
    // sets the rest.
    let open = start < last;
    let tail = if open { start } else { last - 1 };
    for e in per_gap.iter_mut().skip(tail) {
        *e = Some(rate[tail]);
    }
    let (mut num, mut den) = (0.0, 0.0);
    for k in 0..last {
        num += per_gap[k].unwrap_or(rate[tail]) * send_gap[k];
        den += send_gap[k];
    }
    let abw_bps = num / den;
    let bound = if !open && excursions == 0 {
        Bound::AtLeast
    } else if open && start == 0 {
        Bound::AtMost
    } else {
        Bound::Exact
    };
    Ok(ChirpEstimate {
        abw_bps,
        bound,
        gaps_used: last,
        excursions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1000-byte packets with these send gaps (us) and queuing delays (us),
    /// 5 ms of fixed delay and a clock offset.
    fn chirp(gaps_us: &[i64], q_us: &[i64]) -> ProbeStream {
        assert_eq!(gaps_us.len() + 1, q_us.len());
        let mut send = vec![1_000_000i64];
        for g in gaps_us {
            send.push(send.last().unwrap() + g * 1000);
        }
        let recv: Vec<Option<i64>> = send
            .iter()
            .zip(q_us)
            .map(|(s, q)| Some(s + 5_000_000 + 777 + q * 1000))
            .collect();
        ProbeStream::from_times(0, 1000, &send, &recv)
    }

    // Rates 8000 bits over each gap: 8, 10, 12.5 ... 74.8 Mbit/s.
    const GAPS: [i64; 11] = [1000, 800, 640, 512, 410, 328, 262, 210, 168, 134, 107];

    fn mbps(gap_us: i64) -> f64 {
        8000.0 / gap_us as f64 * 1e6
    }

    #[test]
    fn one_excursion_that_ends_and_one_that_does_not() {
        // Rising at gaps 2, 3, 4 (packets 2-5), falling back under 30/1.5
        // at packet 7: an excursion of 5 packets, which counts. Then rising
        // from gap 9 to the end: open, so gaps 9, 10 and every unmarked gap
        // read R_9 = 8000 bits / 134 us.
        let q = [0, 0, 0, 10, 20, 30, 25, 12, 5, 5, 15, 30];
        let e = chirp_estimate(&chirp(&GAPS, &q), &ChirpParams::default()).unwrap();
        // Marked gaps each give R_k g_k = 8000 bits; the other 3009 us of
        // the 4571 us read R_9: (3 * 8000 + 8000 / 134 * 3009) / 4571
        // bits/us = 44.55 Mbit/s.
        let want = (3.0 * 8000.0 + 8000.0 / 134.0 * 3009.0) / 4571.0 * 1e6;
        assert!((e.abw_bps - want).abs() < 1.0, "{e:?} vs {want}");
        assert!((e.abw_bps - 44.55e6).abs() < 0.01e6);
        assert_eq!((e.bound, e.excursions, e.gaps_used), (Bound::Exact, 1, 11));
    }

    #[test]
    fn a_short_excursion_is_not_a_busy_period() {
        // The same rise falls back at packet 5 after 3 packets: too short
        // to count; with no open excursion at the end every gap reads the
        // last gap's rate, and the answer is "at least" the top rate.
        let q = [0, 0, 0, 10, 20, 2, 2, 2, 2, 2, 2, 2];
        let e = chirp_estimate(&chirp(&GAPS, &q), &ChirpParams::default()).unwrap();
        assert_eq!(e.bound, Bound::AtLeast);
        assert_eq!(e.excursions, 0);
        assert!((e.abw_bps - mbps(107)).abs() < 1.0, "{e:?}");
    }

    #[test]
    fn a_queue_from_the_first_gap_is_at_most_the_lowest_rate() {
        let q: Vec<i64> = (0..12).map(|j| j * 50).collect();
        let e = chirp_estimate(&chirp(&GAPS, &q), &ChirpParams::default()).unwrap();
        assert_eq!(e.bound, Bound::AtMost);
        assert!((e.abw_bps - mbps(1000)).abs() < 1.0, "{e:?}");
    }

    #[test]
    fn receive_batches_cut_the_chirp() {
        // Packets 8-11 arrive together with packet 8 (gaps 0 at 9, 10,
        // 11): two batched gaps in a row at packet 10 leave packets 0-8.
        // The excursion of packets 2-7 still ends; none opens after it, so
        // gap 7 (the last read) sets the rest: (3 * 8000 + 8000 / 210 *
        // 2600) / 4162 bits/us = 29.56 Mbit/s.
        let q = [0, 0, 0, 10, 20, 30, 25, 12, 5, 5, 15, 30];
        let mut s = chirp(&GAPS, &q);
        let at8 = s.packets[8].recv_ns;
        for p in &mut s.packets[9..] {
            p.recv_ns = at8;
        }
        let e = chirp_estimate(&s, &ChirpParams::default()).unwrap();
        let want = (3.0 * 8000.0 + 8000.0 / 210.0 * 2600.0) / 4162.0 * 1e6;
        assert!((e.abw_bps - want).abs() < 1.0, "{e:?} vs {want}");
        assert_eq!((e.gaps_used, e.excursions), (8, 1));
        // Packets 3-11 in one batch: gaps 4 and 5 are batched, packets
        // 0-3 are left, too few for a busy period.
        for p in &mut s.packets[3..] {
            p.recv_ns = at8;
        }
        assert_eq!(
            chirp_estimate(&s, &ChirpParams::default()),
            Err(ChirpError::Batched(4))
        );
    }

    #[test]
    fn loss_spoils_the_chirp() {
        let mut s = chirp(&GAPS, &[0; 12]);
        s.packets[4].recv_ns = None;
        assert_eq!(
            chirp_estimate(&s, &ChirpParams::default()),
            Err(ChirpError::Lost(1))
        );
        let short = chirp(&GAPS[..3], &[0; 4]);
        assert_eq!(
            chirp_estimate(&short, &ChirpParams::default()),
            Err(ChirpError::TooShort(6))
        );
    }

    proptest::proptest! {
        /// The answer is a weighted mean of the chirp's rates, so it lies
        /// between the lowest and the top rate whatever the delays.
        #[test]
        fn answers_stay_within_the_rates_probed(q in proptest::collection::vec(0i64..300, 12)) {
            if let Ok(e) = chirp_estimate(&chirp(&GAPS, &q), &ChirpParams::default()) {
                proptest::prop_assert!(
                    e.abw_bps >= mbps(1000) - 1.0 && e.abw_bps <= mbps(107) + 1.0,
                    "{:?}", e
                );
            }
        }
    }

    /// The plain chirp above as a jumbo chirp of 2 x 500 B elements (the
    /// same 8000 bits per element gap), the second packet 4 us after the
    /// first; both packets of an element see the element's delay.
    fn jumbo(q_us: &[i64], recv_of: impl Fn(usize, i64, i64) -> i64) -> ProbeStream {
        let mut send = vec![1_000_000i64];
        for g in GAPS {
            send.push(send.last().unwrap() + g * 1000);
        }
        let mut s = Vec::new();
        let mut r = Vec::new();
        for (e, t) in send.iter().enumerate() {
            for k in 0..2 {
                let at = t + k * 4000;
                s.push(at);
                r.push(Some(recv_of(e, k, at + 5_000_000 + 777 + q_us[e] * 1000)));
            }
        }
        ProbeStream::from_times(0, 500, &s, &r)
    }

    #[test]
    fn a_jumbo_chirp_reads_as_its_elements() {
        let q = [0, 0, 0, 10, 20, 30, 25, 12, 5, 5, 15, 30];
        // Stamped one by one: the element's first packet ends a "batch"
        // inside the element and is read; the answer is the plain chirp's.
        let s = jumbo(&q, |_, _, r| r);
        let elements = s.jumbo_elements().expect("12 elements of 2");
        assert_eq!(elements.len(), 12);
        assert!(elements.iter().all(|e| e.len() == 2));
        assert_eq!(
            s.infer_kind(Default::default()),
            crate::stream::StreamKind::Chirp
        );
        let e = chirp_estimate(&s, &ChirpParams::default()).unwrap();
        assert!((e.abw_bps - 44.55e6).abs() < 0.01e6, "{e:?}");
        assert_eq!((e.bound, e.excursions, e.gaps_used), (Bound::Exact, 1, 11));
        // A plain chirp is no jumbo chirp.
        assert_eq!(chirp(&GAPS, &q).jumbo_elements(), None);
    }

    #[test]
    fn a_jumbo_element_inside_one_batch_ends_the_chirp() {
        let q = [0, 0, 0, 10, 20, 30, 25, 12, 5, 5, 15, 30];
        // From element 9 on, each element's two packets are stamped 300 ns
        // apart 50 us after the second arrived (one batch, its interrupt in the
        // quiet after it): no packet of theirs is read, and the chirp ends
        // after element 8, before the open excursion of the plain chirp.
        let batched = |from: usize| {
            move |e: usize, k: i64, r: i64| {
                if e >= from {
                    r - k * 4000 + 54_000 + k * 300
                } else {
                    r
                }
            }
        };
        let s = jumbo(&q, batched(9));
        let reduced = per_element(&s, &s.jumbo_elements().unwrap(), &ChirpParams::default());
        assert_eq!(reduced.len(), 9);
        // Element 4's delay is its first packet's: 5 ms + 777 ns + 20 us.
        let p4 = reduced.packets[4];
        assert_eq!(p4.recv_ns.unwrap() - p4.send_ns, 5_000_000 + 777 + 20_000);
        assert_eq!(p4.size_bytes, 1000);
        // Read up to element 8: one excursion (2-7) that ended and none
        // open, so the unmarked gaps read the last gap's rate: exact.
        let e = chirp_estimate(&s, &ChirpParams::default()).unwrap();
        assert_eq!((e.bound, e.excursions, e.gaps_used), (Bound::Exact, 1, 8));
        // Batched from element 2 on: fewer elements than a busy period.
        let early = jumbo(&q, batched(2));
        assert_eq!(
            chirp_estimate(&early, &ChirpParams::default()),
            Err(ChirpError::Batched(4))
        );
    }
}
