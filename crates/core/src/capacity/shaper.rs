//! Token-bucket shapers seen in back-to-back trains. Not in the papers:
//! their packet-pair methods assume every hop is a FIFO link, but rate
//! limits on real paths (Linux tbf, policers, a cloud VM's bandwidth cap)
//! are token buckets, and a bucket that holds two packets lets every pair
//! through at the line rate. A train longer than the bucket shows the
//! shaper: its head leaves at the sender's (or line) rate while the
//! bucket lasts, then the rest at the token rate. A FIFO link shows no
//! such head: its first gap is already `size / C`, and cross traffic only
//! widens gaps.
//!
//! Measured per train: the tail's rate `R` (least squares over the second
//! half), and the bytes that arrived beyond what `R` allows from the
//! head's first packet on, `excess_j = bytes(start..=j) - R (r_j -
//! r_start) / 8`. On a link it stays one packet; behind a bucket `B` it
//! climbs to `B` while the head passes and stays there (tokens pace the
//! rest); a sender that stalls only lowers it. So the bucket is its
//! maximum (over heads starting at any of the first four packets), and
//! the head is the packets up to where it first gets near that maximum
//! (tbf counts the bucket at its own layer: the estimate is at the
//! probes' layer).

use super::pairs::median;
use crate::stream::ProbeStream;

/// The head and tail of one train.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrainShape {
    /// Least-squares rate over the second half of the received packets,
    /// bit/s.
    pub tail_rate_bps: f64,
    /// Rate at which the head (from its start to where the excess first
    /// comes within half a packet of its maximum) arrived, bit/s; `None`
    /// when the head is one packet.
    pub head_rate_bps: Option<f64>,
    /// Most bytes ahead of the tail rate: the bucket, bytes.
    pub burst_bytes: f64,
    /// Size of the train's first packet, bytes.
    pub size_bytes: u32,
    /// 90th percentile of the distance of the tail's gaps from what the
    /// tail rate makes of their sizes: the shaper's (or link's) timing
    /// noise, ns. (The median hides it: on a tbf most gaps are within
    /// 0.5 us, one in ten is off by 3 us or more.)
    pub tail_jitter_ns: f64,
    /// Share of the tail's gaps under a quarter of what the tail rate
    /// makes of their sizes: packets stamped in one receive batch.
    pub tail_batched: f64,
}

/// The shape of one train; `None` with fewer than 8 received packets, a
/// lost first packet, or no time span in the tail.
pub fn train_shape(stream: &ProbeStream) -> Option<TrainShape> {
    let p = &stream.packets;
    let r0 = p.first()?.recv_ns?;
    // (bytes through this packet, receive time relative to the first)
    let mut points: Vec<(f64, f64)> = Vec::with_capacity(p.len());
    let mut cum = 0.0;
    for k in p {
        if let Some(r) = k.recv_ns {
            cum += k.size_bytes as f64;
            points.push((cum, (r as i128 - r0 as i128) as f64));
        }
    }
    shape_of(&points, p[0].size_bytes, true)
}

/// [`train_shape`] for a receiver that may stamp in batches (interrupt
/// coalescence): each batch counts as one point, at its last packet, the
/// one stamped closest to its arrival (it came just before the
/// interrupt), with the bytes of every packet through it. A batch ends
/// where the next received packet's stamp lies a quarter of their send
/// gap or more later. The head starts at the first batch's end: when
/// that batch's packets arrived is not known, so its bytes are not
/// counted as passing ahead (a FIFO path then shows no burst, where
/// crediting them would show one batch). Where packets are stamped one
/// by one every packet is a point.
pub fn train_shape_batched(stream: &ProbeStream) -> Option<TrainShape> {
    let p = &stream.packets;
    let received: Vec<_> = p
        .iter()
        .filter_map(|k| k.recv_ns.map(|r| (k.send_ns, r, k.size_bytes)))
        .collect();
    let mut points: Vec<(f64, f64)> = Vec::new();
    let mut cum = 0.0;
    let mut r0 = None;
    let (mut in_batch, mut batches_held_more) = (0, false);
    for (j, &(send, recv, size)) in received.iter().enumerate() {
        cum += size as f64;
        in_batch += 1;
        let ends = match received.get(j + 1) {
            Some(&(next_send, next_recv, _)) => {
                4 * (next_recv as i128 - recv as i128) >= (next_send as i128 - send as i128)
            }
            None => true,
        };
        if ends {
            let r0 = *r0.get_or_insert(recv);
            points.push((cum, (recv as i128 - r0 as i128) as f64));
            batches_held_more |= in_batch > 1;
            in_batch = 0;
        }
    }
    // Where the receiver stamps in batches, the train's last batch was
    // stamped when the interrupt came, after its last packet had arrived
    // with nothing behind it: its stamp is late and would slow the tail
    // (a 7 Gbit/s tail read 6.64 with five packets in its last 125 us
    // batch).
    if batches_held_more {
        points.pop();
    }
    shape_of(&points, received.first()?.2, false)
}

/// The shape from (bytes through a point, its time from the first);
/// `credit_first`: a head's first point passes its own bytes ahead (the
/// head may start at any of the first four points), else heads start at
/// the first point with nothing ahead.
fn shape_of(points: &[(f64, f64)], size_bytes: u32, credit_first: bool) -> Option<TrainShape> {
    if points.len() < 8 {
        return None;
    }
    let half = points.len() / 2;
    let (mut shape, mut ends) = shape_with(points, size_bytes, credit_first, half)?;
    // A head that reaches into the second half (a bucket a third of the
    // train or more) bent the tail's line: the tail is read again after
    // the point with the most bytes ahead, where at least four points
    // remain, and again while that point moves (a bent line puts it
    // early: on a 200 Mbit/s bucket whose head ended 13 packets before
    // the train's end, one refit from the head's end still read the
    // tail 8 % fast). Only for [`train_shape_batched`]: `capacity`'s
    // trains are read as before.
    if !credit_first && ends.0 >= half {
        let mut from = half;
        for _ in 0..4 {
            let next = ends.1 + 1;
            // Along a tail read right the bytes ahead only jitter, and
            // their most can fall anywhere in it: a refit from there must
            // keep half of what follows the head's end (a lab train whose
            // 118-point tail read 181.0 Mbit/s was refit from its last 7
            // points and read 198.8).
            let kept = (points.len() - ends.0) / 2;
            if next <= from || points.len() - next < kept.max(4) {
                break;
            }
            let Some(again) = shape_with(points, size_bytes, credit_first, next) else {
                break;
            };
            (shape, ends) = again;
            from = next;
        }
    }
    Some(shape)
}

/// The shape with the tail's line fitted from `tail_from` on, and the
/// head's end: its knee, and the point with the most bytes ahead.
fn shape_with(
    points: &[(f64, f64)],
    size_bytes: u32,
    credit_first: bool,
    tail_from: usize,
) -> Option<(TrainShape, (usize, usize))> {
    let tail = &points[tail_from..];
    let (ns_per_byte, _) = crate::stats::line_fit(tail.iter().copied());
    if !(ns_per_byte > 0.0 && ns_per_byte.is_finite()) {
        return None;
    }
    let (burst_bytes, start, knee, most) = head_of(points, ns_per_byte, size_bytes, credit_first);
    let span = points[knee].1 - points[start].1;
    let head_rate_bps =
        (knee > start && span > 0.0).then(|| (points[knee].0 - points[start].0) * 8e9 / span);
    let shape = finish(tail, ns_per_byte, head_rate_bps, burst_bytes, size_bytes);
    Some((shape, (knee, most)))
}

/// The most bytes ahead of the tail's line (`ns_per_byte`), where that
/// head starts, the point where it first comes near that most, and the
/// point where it is most.
fn head_of(
    points: &[(f64, f64)],
    ns_per_byte: f64,
    size_bytes: u32,
    credit_first: bool,
) -> (f64, usize, usize, usize) {
    // Excess of packets i..=j: E_j - E_i + size_i with E as below; the
    // head may start at any of the first four packets (a sender that
    // stalls after its first packet delays the rest, and the bucket
    // refills meanwhile).
    let e: Vec<f64> = points.iter().map(|q| q.0 - q.1 / ns_per_byte).collect();
    let size_at = |k: usize| {
        if !credit_first {
            0.0
        } else {
            points[k].0 - if k == 0 { 0.0 } else { points[k - 1].0 }
        }
    };
    let starts = if credit_first { 4 } else { 1 };
    let mut best = (f64::NEG_INFINITY, 0, 0);
    for i in 0..starts.min(points.len()) {
        for j in i..points.len() {
            let x = e[j] - e[i] + size_at(i);
            if x > best.0 {
                best = (x, i, j);
            }
        }
    }
    let (burst_bytes, start, most) = best;
    // Within half the first packet of the most; with nothing credited,
    // within two packets (per-packet jitter keeps the excess creeping up
    // along the tail, and the head would end at its last creep).
    let slack = if credit_first {
        0.5 * size_at(start)
    } else {
        2.0 * size_bytes as f64
    };
    let knee = (start..points.len())
        .find(|&j| e[j] - e[start] + size_at(start) >= burst_bytes - slack)
        .unwrap_or(start);
    (burst_bytes, start, knee, most)
}

/// The shape from its parts, with the tail's jitter and batching.
fn finish(
    tail: &[(f64, f64)],
    ns_per_byte: f64,
    head_rate_bps: Option<f64>,
    burst_bytes: f64,
    size_bytes: u32,
) -> TrainShape {
    let mut jitter: Vec<f64> = tail
        .windows(2)
        .map(|w| ((w[1].1 - w[0].1) - (w[1].0 - w[0].0) * ns_per_byte).abs())
        .collect();
    let batched = tail
        .windows(2)
        .filter(|w| w[1].1 - w[0].1 < 0.25 * (w[1].0 - w[0].0) * ns_per_byte)
        .count() as f64
        / (tail.len() - 1) as f64;
    TrainShape {
        tail_rate_bps: 8e9 / ns_per_byte,
        head_rate_bps,
        burst_bytes,
        size_bytes,
        tail_jitter_ns: percentile(&mut jitter, 0.9),
        tail_batched: batched,
    }
}

/// A shaper found in most trains.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Shaper {
    /// Median tail rate of the shaped trains: the token rate less what
    /// cross traffic through the shaper took (a dispersion rate, at most
    /// the token rate), bit/s.
    pub rate_bps: f64,
    pub low_bps: f64,
    pub high_bps: f64,
    /// Median bytes that passed on the bucket.
    pub bucket_bytes: f64,
    /// Median head rate: how fast packets arrive while the bucket lasts
    /// (the sender or the line), bit/s.
    pub head_rate_bps: f64,
    /// Median of the shaped trains' tail jitter (90th percentile of each
    /// train's gap error): how exactly the shaper paces, ns.
    pub jitter_ns: f64,
    pub trains_shaped: usize,
    pub trains: usize,
}

/// A train is shaped when its head arrived at more than 1.2 times the
/// path's steady rate (the larger of its own tail rate and the
/// second-fastest tail of all trains: cross traffic, or a sender that
/// falls behind, only slows a tail, so the fastest tails are the link or
/// the token rate), more than 1.3 packets passed ahead of the tail rate,
/// and under a quarter of its tail's gaps were batched (a receiver that
/// stamps in batches makes any train look like a burst then a pause; a
/// tbf whose timer woke late sends a few packets back to back, seen as
/// 5-10 % of gaps). A train with no excess beyond its first packet is
/// evidence of a plain link; any other train (excess without a fast
/// head: the tail slowed after the head) says nothing either way. A path
/// is shaped when at least two of at least three trains are, and more
/// than are plain.
///
/// Why not a majority of all trains: the sender here is paced at 1 Gbit/s
/// (a keyless server's cap) against a 500 Mbit/s tbf, so a bucket head
/// reads only 1.3-2.5 times the tail (tbf's timer delays the second
/// packet by up to 7 us), and in one train of five the sender fell behind
/// mid-train: tail 440-490 Mbit/s, head at the tail's rate, excess 3-12
/// packets. With 1.4 times the train's own tail, more than half of five
/// trains missed the shaper in 5 runs of 30; with this rule none did,
/// and no FIFO path of the simulator (50 runs, 3-8 Gbit/s of cross
/// traffic on 10 Gbit/s; its heads reach 1.08 times the tail) had more
/// than one shaped train.
pub fn shaper_from_trains(shapes: &[TrainShape]) -> Option<Shaper> {
    if shapes.len() < 3 {
        return None;
    }
    let (shaped, plain) = votes(shapes);
    if !shaped_path(shaped.len(), plain) {
        return None;
    }
    let mut rates: Vec<f64> = shaped.iter().map(|s| s.tail_rate_bps).collect();
    let mut buckets: Vec<f64> = shaped.iter().map(|s| s.burst_bytes).collect();
    let mut heads: Vec<f64> = shaped.iter().filter_map(|s| s.head_rate_bps).collect();
    let mut jitter: Vec<f64> = shaped.iter().map(|s| s.tail_jitter_ns).collect();
    Some(Shaper {
        rate_bps: median(&mut rates),
        low_bps: rates[0],
        high_bps: rates[rates.len() - 1],
        bucket_bytes: median(&mut buckets),
        head_rate_bps: median(&mut heads),
        jitter_ns: median(&mut jitter),
        trains_shaped: shaped.len(),
        trains: shapes.len(),
    })
}

/// Whether more trains could still show a shaper: at least three trains
/// judged, no shaper yet, but some train was shaped. (A sender that
/// cannot keep pace slows most trains' tails: on a loaded 2-core machine
/// four runs in fifteen had one shaped train of five, the rest slowed.)
pub fn shaper_undecided(shapes: &[TrainShape]) -> bool {
    let (shaped, plain) = votes(shapes);
    shapes.len() >= 3 && !shaped.is_empty() && !shaped_path(shaped.len(), plain)
}

/// The vote: at least two shaped trains, and more than plain ones.
fn shaped_path(shaped: usize, plain: usize) -> bool {
    shaped >= 2 && shaped > plain
}

/// The shaped trains and the number of plain ones (see
/// [`shaper_from_trains`]).
fn votes(shapes: &[TrainShape]) -> (Vec<&TrainShape>, usize) {
    let mut tails: Vec<f64> = shapes.iter().map(|s| s.tail_rate_bps).collect();
    tails.sort_by(|a, b| b.total_cmp(a));
    let steady_bps = tails.get(1).copied().unwrap_or(f64::INFINITY);
    let shaped = shapes
        .iter()
        .filter(|s| {
            s.head_rate_bps
                .is_some_and(|h| h > 1.2 * s.tail_rate_bps.max(steady_bps))
                && s.burst_bytes > 1.3 * s.size_bytes as f64
                && s.tail_batched < 0.25
        })
        .collect();
    let plain = shapes
        .iter()
        .filter(|s| s.burst_bytes <= 1.3 * s.size_bytes as f64)
        .count();
    (shaped, plain)
}

/// The `q` quantile (of [`crate::stats`]) of `v`, left sorted; NaN when
/// empty.
fn percentile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    crate::stats::quantile_sorted(v, q).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::ProbePacket;

    fn train(recv: &[i64]) -> ProbeStream {
        ProbeStream::new(
            0,
            recv.iter()
                .map(|&r| ProbePacket {
                    size_bytes: 1000,
                    send_ns: 0,
                    recv_ns: Some(r),
                })
                .collect(),
        )
    }

    /// 1000-byte packets through a 1 Gbit/s bucket (8000 ns per packet)
    /// of 3000 bytes, sent 1000 ns apart: packets 0-2 pass on the bucket
    /// (0, 1000, 2000; 250 tokens left at 2000, one per 8 ns coming in),
    /// packet 3 waits for 750 more: 2000 + 750 x 8 = 8000, then every
    /// 8000 ns. Excess: 1000, 2000 - 125, 3000 - 250, then 4000 - 1000
    /// = 3000 for good: bucket 3000; the first within 500 of it is packet
    /// 2, so the head is 2000 bytes in 2000 ns (8 Gbit/s).
    #[test]
    fn a_bucket_by_hand() {
        let mut recv = vec![0, 1000, 2000];
        recv.extend((0..13).map(|k| 8000 + 8000 * k));
        let s = train_shape(&train(&recv)).unwrap();
        assert!((s.tail_rate_bps - 1e9).abs() < 1.0, "{s:?}");
        assert!((s.burst_bytes - 3000.0).abs() < 1e-6, "{s:?}");
        assert!((s.head_rate_bps.unwrap() - 8e9).abs() < 1.0);
        assert!(s.tail_jitter_ns.abs() < 1e-6);
    }

    /// A sender that stalls 30 us after packet 0 of the same train: the
    /// bucket refills meanwhile (it was full anyway) and the rest passes
    /// as before, 30 us later; the excess still peaks at the bucket.
    #[test]
    fn a_stalled_sender_does_not_hide_the_bucket() {
        let mut recv = vec![0, 31_000, 32_000, 33_000];
        recv.extend((0..12).map(|k| 33_000 + 6000 + 8000 * k));
        let s = train_shape(&train(&recv)).unwrap();
        assert!((s.tail_rate_bps - 1e9).abs() < 1.0, "{s:?}");
        assert!(s.burst_bytes > 2000.0 && s.head_rate_bps.is_some(), "{s:?}");
    }

    /// The same packets on a 1 Gbit/s FIFO link: every gap 8000 ns, the
    /// excess stays one packet, no head; not shaped.
    #[test]
    fn a_link_has_no_head() {
        let recv: Vec<i64> = (0..16).map(|k| 8000 * k).collect();
        let s = train_shape(&train(&recv)).unwrap();
        assert_eq!(s.head_rate_bps, None);
        assert!((s.burst_bytes - 1000.0).abs() < 1e-6);
        assert_eq!(shaper_from_trains(&[s; 5]), None);
    }

    /// 1000-byte packets sent 1000 ns apart (8 Gbit/s), received through
    /// an interrupt every 4000 ns (each packet stamped at the next
    /// multiple of 4000 at or after its arrival).
    fn batched(arrivals: &[i64]) -> ProbeStream {
        ProbeStream::new(
            0,
            arrivals
                .iter()
                .enumerate()
                .map(|(k, &a)| ProbePacket {
                    size_bytes: 1000,
                    send_ns: 1000 * k as i64,
                    recv_ns: Some((a + 3999) / 4000 * 4000),
                })
                .collect(),
        )
    }

    /// Packets 0-15 pass on a bucket as sent (arrivals 0..15 000), the
    /// rest at 1 Gbit/s (15 000 + 8000 (k - 15)). Batch ends: {0} at 0,
    /// {1-4} at 4000, {5-8} 8000, {9-12} 12 000, {13-15} 16 000, then
    /// each tail packet alone at 24 000 + 8000 j. Bytes through them
    /// 1000, 5000, 9000, 13 000, 16 000, 17 000 + 1000 j. The tail's line:
    /// 8 ns per byte; bytes ahead of it (bytes - t / 8): 1000, 4500,
    /// 8000, 11 500, 14 000, then 14 000 for good. Burst 14 000 - 1000 =
    /// 13 000 (the first batch's bytes are not credited); the head ends
    /// at the first point within two packets of it (16 000 at 16 000 ns):
    /// 15 000 bytes in 16 000 ns, 7.5 Gbit/s.
    #[test]
    fn a_bucket_through_receive_batches_by_hand() {
        let mut arrivals: Vec<i64> = (0..16).map(|k| 1000 * k).collect();
        arrivals.extend((16..64).map(|k| 15_000 + 8000 * (k - 15)));
        let s = train_shape_batched(&batched(&arrivals)).unwrap();
        assert!((s.tail_rate_bps - 1e9).abs() < 1.0, "{s:?}");
        assert!((s.burst_bytes - 13_000.0).abs() < 1e-6, "{s:?}");
        assert!((s.head_rate_bps.unwrap() - 7.5e9).abs() < 1.0, "{s:?}");
    }

    /// A tail of two packets a batch, and a last batch of one: packets
    /// 0-15 as sent (1000 k), 16-62 at 4 Gbit/s (15 000 + 2000 (k - 15)).
    /// Batch ends: 0 at 0, 4000, 8000, 12 000, 16 000 (bytes 1000, 5000,
    /// 9000, 13 000, 16 000), then pairs at 20 000 + 4000 m with
    /// 18 000 + 2000 m bytes (2 ns a byte), and packet 62 alone,
    /// arrived at 109 000 and stamped at the interrupt at 112 000, 2000 ns
    /// after the pairs' line puts it. Without it the tail is 4 Gbit/s
    /// exactly; the bytes ahead (bytes - t / 2) are 1000, 3000, 5000,
    /// 7000, then 8000 for good: burst 7000, the head ending at 7000
    /// (13 000 bytes at 12 000 ns), 12 000 bytes in 12 000 ns, 8 Gbit/s.
    #[test]
    fn the_last_batch_of_a_train_is_left_out() {
        let mut arrivals: Vec<i64> = (0..16).map(|k| 1000 * k).collect();
        arrivals.extend((16..63).map(|k| 15_000 + 2000 * (k - 15)));
        let s = train_shape_batched(&batched(&arrivals)).unwrap();
        assert!((s.tail_rate_bps - 4e9).abs() < 1.0, "{s:?}");
        assert!((s.burst_bytes - 7000.0).abs() < 1e-6, "{s:?}");
        assert!((s.head_rate_bps.unwrap() - 8e9).abs() < 1.0, "{s:?}");
    }

    /// The same receiver behind a 1 Gbit/s FIFO link: arrivals 8000 k,
    /// each packet its own batch; nothing passes ahead of the tail, and
    /// there is no head (crediting the first batch would have made one).
    #[test]
    fn a_link_through_receive_batches_has_no_head() {
        let arrivals: Vec<i64> = (0..64).map(|k| 8000 * k).collect();
        let s = train_shape_batched(&batched(&arrivals)).unwrap();
        assert!((s.tail_rate_bps - 1e9).abs() < 1.0, "{s:?}");
        assert!(s.burst_bytes.abs() < 1e-6, "{s:?}");
        assert_eq!(s.head_rate_bps, None);
    }

    /// A head longer than the tail: packets 0-79 as sent, 80-91 at
    /// 1 Gbit/s (79 000 + 8000 (k - 79), stamped 88 000 + 8000 j). 21
    /// head points and 12 tail points: the second half's line starts
    /// inside the head and reads too fast, the head ends in that half,
    /// and the tail is read again from after it: 1 Gbit/s exactly. Bytes
    /// ahead: 80 000 - 80 000 / 8 = 70 000 at the head's end, and
    /// (81 000 + 1000 j) - (88 000 + 8000 j) / 8 = 70 000 along the tail:
    /// burst 69 000; head 79 000 bytes in 80 000 ns, 7.9 Gbit/s.
    #[test]
    fn a_long_head_has_its_tail_read_after_it() {
        let mut arrivals: Vec<i64> = (0..80).map(|k| 1000 * k).collect();
        arrivals.extend((80..92).map(|k| 79_000 + 8000 * (k - 79)));
        let s = train_shape_batched(&batched(&arrivals)).unwrap();
        assert!((s.tail_rate_bps - 1e9).abs() < 1.0, "{s:?}");
        assert!((s.burst_bytes - 69_000.0).abs() < 1e-6, "{s:?}");
        assert!((s.head_rate_bps.unwrap() - 7.9e9).abs() < 1.0, "{s:?}");
    }

    /// A head slower than the sender, ending late: packets 0-43 arrive
    /// 4000 ns apart (2 Gbit/s, each its own batch), 44-56 at 1 Gbit/s
    /// (172 000 + 8000 (k - 43)). Against the tail's line (8 ns a byte)
    /// the bytes ahead are 1000 + 500 k along the head and 22 500 along
    /// the tail: most first at packet 43, burst 21 500 (the first
    /// point's 1000 not credited); the head ends at the first point
    /// within two packets of that, packet 39: 39 000 bytes in
    /// 156 000 ns, 2 Gbit/s. The second half's line starts 15 packets
    /// into the head, and one refit from the head's end (packet 39)
    /// still has four head points: the tail is read from after the
    /// most-ahead point until that point stays put, 1 Gbit/s exactly.
    #[test]
    fn a_slow_head_ending_late_is_refit_until_it_stays_put() {
        let mut arrivals: Vec<i64> = (0..44).map(|k| 4000 * k).collect();
        arrivals.extend((44..57).map(|k| 172_000 + 8000 * (k - 43)));
        let s = train_shape_batched(&batched(&arrivals)).unwrap();
        assert!((s.tail_rate_bps - 1e9).abs() < 1.0, "{s:?}");
        assert!((s.burst_bytes - 21_500.0).abs() < 1e-6, "{s:?}");
        assert!((s.head_rate_bps.unwrap() - 2e9).abs() < 1.0, "{s:?}");
    }

    /// A long head and a jittered tail, stamped one by one: packets 0-29
    /// pass 1000 ns apart, 30-49 follow 8000 ns apart (1 Gbit/s), but
    /// packet 44 came 1500 ns early and 48 came 3000 ns late. The second
    /// half's line bends through the head; its refit from the head's end
    /// puts the most bytes ahead at the early packet 44, and a refit from
    /// there would read the last five points alone (963.9 Mbit/s). It
    /// must keep half of the 22 points after the head's end, so the tail
    /// is the line through points 30-49: 996.49 Mbit/s (least squares).
    #[test]
    fn a_jittered_tail_is_read_over_all_of_it() {
        let mut arrivals: Vec<i64> = (0..30).map(|k| 1000 * k).collect();
        arrivals.extend((30..50).map(|k| 29_000 + 8000 * (k - 29)));
        arrivals[44] -= 1500;
        arrivals[48] += 3000;
        let s = train_shape_batched(&train(&arrivals)).unwrap();
        assert!((s.tail_rate_bps - 996.488e6).abs() < 0.01e6, "{s:?}");
    }

    /// Three shaped trains of five: a shaper; two of four with two plain,
    /// or two of two: not.
    #[test]
    fn most_trains_must_agree() {
        let mut recv = vec![0, 1000, 2000];
        recv.extend((0..13).map(|k| 8000 + 8000 * k));
        let shaped = train_shape(&train(&recv)).unwrap();
        let link = train_shape(&train(&(0..16).map(|k| 8000 * k).collect::<Vec<_>>())).unwrap();
        let found = shaper_from_trains(&[shaped, link, link, shaped, shaped]).unwrap();
        assert!((found.rate_bps - 1e9).abs() < 1.0);
        assert!((found.bucket_bytes - 3000.0).abs() < 1e-6);
        // Head gaps of 1000 ns: 8 Gbit/s while the bucket lasts.
        assert!((found.head_rate_bps - 8e9).abs() < 1.0);
        assert_eq!((found.trains_shaped, found.trains), (3, 5));
        assert_eq!(shaper_from_trains(&[shaped, link, shaped, link]), None);
        assert_eq!(shaper_from_trains(&[shaped, shaped]), None);
    }

    /// 16 packets of 1000 bytes: eight 8000 ns apart (1 Gbit/s), then
    /// eight `tail_gap_ns` apart: a sender that fell behind mid-train.
    fn slowed(tail_gap_ns: i64) -> TrainShape {
        let recv: Vec<i64> = (0..16)
            .map(|k| {
                if k < 8 {
                    8000 * k
                } else {
                    56_000 + tail_gap_ns * (k - 7)
                }
            })
            .collect();
        train_shape(&train(&recv)).unwrap()
    }

    /// Two buckets (heads at 8 Gbit/s), two trains whose tails slowed to
    /// 0.9 Gbit/s (excess 1000 + 100 j bytes, at most 1700 at packet 7;
    /// the head, packets 0-2, at 1 Gbit/s: not faster than the steady
    /// 1 Gbit/s of the two fastest tails), one plain link: the slowed
    /// trains abstain, two shaped outnumber one plain. (A majority of
    /// five would have missed it.)
    #[test]
    fn trains_whose_tail_slowed_abstain() {
        let mut recv = vec![0, 1000, 2000];
        recv.extend((0..13).map(|k| 8000 + 8000 * k));
        let shaped = train_shape(&train(&recv)).unwrap();
        let link = train_shape(&train(&(0..16).map(|k| 8000 * k).collect::<Vec<_>>())).unwrap();
        let late = slowed(8889);
        assert!((late.tail_rate_bps / 0.9e9 - 1.0).abs() < 1e-3, "{late:?}");
        assert!((late.burst_bytes - 1700.0).abs() < 10.0, "{late:?}");
        assert!((late.head_rate_bps.unwrap() - 1e9).abs() < 1e3, "{late:?}");
        let found = shaper_from_trains(&[shaped, late, late, shaped, link]).unwrap();
        assert_eq!((found.trains_shaped, found.trains), (2, 5));
        // One bucket among them is not enough, but more trains may tell;
        // none among slowed and plain trains: nothing to look for.
        assert_eq!(shaper_from_trains(&[shaped, late, late, link]), None);
        assert!(shaper_undecided(&[shaped, late, late, link]));
        assert!(!shaper_undecided(&[late, late, link]));
        assert!(!shaper_undecided(&[shaped, late, late, shaped, link]));
    }

    /// Three trains whose tails halved (0.5 Gbit/s) after a head at the
    /// link's 1 Gbit/s, and two plain 1 Gbit/s trains: against its own
    /// tail each head is twice as fast, but not against the path's
    /// steady 1 Gbit/s: no shaper.
    #[test]
    fn a_sender_that_falls_behind_is_not_a_bucket() {
        let half = slowed(16_000);
        assert!((half.tail_rate_bps / 0.5e9 - 1.0).abs() < 1e-3, "{half:?}");
        assert!(half.head_rate_bps.unwrap() > 1.4 * half.tail_rate_bps);
        let link = train_shape(&train(&(0..16).map(|k| 8000 * k).collect::<Vec<_>>())).unwrap();
        assert_eq!(shaper_from_trains(&[half, link, half, link, half]), None);
    }

    /// A receiver that stamps in batches every 40 us (five packets each,
    /// 100 ns apart, the first alone): it has a "head", but four in five
    /// of its tail's gaps are batched; not shaped.
    #[test]
    fn a_batching_receiver_is_not_a_shaper() {
        let recv: Vec<i64> = (0..41)
            .map(|k| {
                if k == 0 {
                    0
                } else {
                    40_000 * ((k - 1) / 5 + 1) + 100 * ((k - 1) % 5)
                }
            })
            .collect();
        let s = train_shape(&train(&recv)).unwrap();
        assert!(s.tail_batched > 0.7, "{s:?}");
        assert_eq!(shaper_from_trains(&[s; 5]), None);
    }

    #[test]
    fn short_or_headless_trains_have_no_shape() {
        assert_eq!(train_shape(&train(&[0, 1, 2, 3, 4, 5, 6])), None);
        assert_eq!(train_shape(&train(&[5; 16])), None);
        let mut t = train(&(0..16).map(|k| 8000 * k).collect::<Vec<_>>());
        t.packets[0].recv_ns = None;
        assert_eq!(train_shape(&t), None);
    }
}
