//! The probe-stream model: packets with a size, a send time on the sender's
//! clock and an optional receive time on the receiver's clock (\[BASS\],
//! section II: probing rate `r_i = p_i / g_i`).
//!
//! The two clocks have an unknown offset and a small drift, so only
//! differences taken on one clock are used: send gaps, receive gaps, and
//! one-way delays relative to the stream's minimum. All differences are taken
//! in integer nanoseconds before any conversion to `f64`, so a clock offset
//! cancels exactly.
//!
//! Losses: a gap is always taken between two *received* packets. When packets
//! were lost in between, the gap spans them: its send gap is the sum of the
//! send gaps it covers, its `sent_bytes` counts the lost packets too and its
//! `recv_bytes` only the one that arrived. PRC-MT reads the timing of the
//! packets that arrived and the lost bytes apart (a loss is congestion only
//! when heavy or late, see `decision::prcmt`); gap smoothing (BASS) treats a
//! spanning gap as one observation. Trend tests (Pathload, IMR) use
//! the one-way delays of received packets only.

/// One probe packet as recorded in a probe trace (format v1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbePacket {
    /// Packet size used for rate arithmetic, in bytes (one layer per trace).
    pub size_bytes: u32,
    /// Departure time on the sender's clock, ns.
    pub send_ns: i64,
    /// Arrival time on the receiver's clock, ns; `None` when lost.
    pub recv_ns: Option<i64>,
}

/// Send gaps inside a jumbo element are this many times shorter, at
/// least, than the shortest gap between elements (a plain chirp's gaps
/// differ by its spread factor, 1.2 in pathChirp, from one to the next).
pub const JUMBO_GAP_RATIO: f64 = 3.0;

/// A probe stream: packets in send order.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProbeStream {
    pub id: u64,
    pub packets: Vec<ProbePacket>,
}

/// Single-rate streams ask "is this rate above the available bandwidth?";
/// multi-rate streams, chirps (every gap shorter than the last by one
/// spread factor, pathChirp's) and packet pairs (Spruce's: two packets a
/// capacity's gap apart, pairs far apart) ask "what is the available
/// bandwidth?".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    SingleRate,
    MultiRate,
    Chirp,
    Pairs,
}

impl StreamKind {
    pub fn as_str(self) -> &'static str {
        match self {
            StreamKind::SingleRate => "single",
            StreamKind::MultiRate => "multi",
            StreamKind::Chirp => "chirp",
            StreamKind::Pairs => "pairs",
        }
    }
}

/// Fewest packets a stream needs to be read as a chirp.
pub const MIN_CHIRP_PACKETS: usize = 6;

/// Relative slack on the ratio of consecutive send gaps of a chirp (the
/// trace rounds send times to 1 ns: 0.3 % on a 720 ns gap).
pub const CHIRP_RATIO_TOLERANCE: f64 = 0.01;

/// One observation between two consecutive *received* packets `j < k`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Gap {
    /// `send_ns[k] - send_ns[j]`.
    pub send_ns: f64,
    /// `recv_ns[k] - recv_ns[j]`.
    pub recv_ns: f64,
    /// Bytes of packets `j+1 ..= k`, lost ones included.
    pub sent_bytes: f64,
    /// Bytes of packet `k` (the one that arrived).
    pub recv_bytes: f64,
    /// Index of packet `k` in the stream.
    pub end_packet: u32,
}

impl Gap {
    /// Probing rate of this gap, bit/s (`None` for a zero send gap).
    pub fn send_rate_bps(&self) -> Option<f64> {
        rate_bps(self.sent_bytes, self.send_ns)
    }
}

/// Gaps with one send gap and the given receive gaps, 1000-byte packets:
/// hand-made streams for tests and examples.
pub fn uniform_gaps(send_ns: f64, recv_ns: &[f64]) -> Vec<Gap> {
    recv_ns
        .iter()
        .enumerate()
        .map(|(i, &r)| Gap {
            send_ns,
            recv_ns: r,
            sent_bytes: 1000.0,
            recv_bytes: 1000.0,
            end_packet: i as u32 + 1,
        })
        .collect()
}

/// `8 * bytes / ns` in bit/s, `None` when the time is not positive or the
/// result is not finite.
pub fn rate_bps(bytes: f64, ns: f64) -> Option<f64> {
    if ns > 0.0 {
        let r = bytes * 8.0e9 / ns;
        r.is_finite().then_some(r)
    } else {
        None
    }
}

/// Whether `arrivals` packets in `batches` receive batches, `singles` of
/// them of one packet, were stamped in batches: two packets or more per
/// batch on average, and as many batches of two or more as of one. A
/// receiver that stamps packets one by one but stalled once stamps all
/// that arrived meanwhile together, one large batch among singles, which
/// the average alone took for interrupt coalescence (a 4 ms stall in a
/// 180-packet scan on the lab: 100 packets in one batch, 80 alone).
fn stamped_in_batches(arrivals: usize, batches: usize, singles: usize) -> bool {
    arrivals >= 2 * batches && 2 * singles <= batches
}

/// Whether gap `g`'s packet starts a receive batch: its receive gap is at
/// least half its send gap (the sender spaced no two packets closer, so a
/// shorter one was stamped with the packet before it).
#[inline]
pub fn starts_batch(g: &Gap) -> bool {
    g.recv_ns >= 0.5 * g.send_ns
}

/// The stream read once per receive batch, without allocating: each item
/// runs from the last packet of the batch before to this batch's last,
/// received over the time between the two batches' first stamps (their
/// interrupts), with this batch's bytes. A coalescing receiver stamps a
/// batch's first packet at the interrupt and the others one after another
/// behind it, so their stamps carry the batch's own stamping time, which
/// grows with the batch, hence with the probing rate (the simulator's 300
/// ns a packet: 31 % of the receive time at 100 Gbit/s with 9000-byte
/// packets); the interrupt itself comes just after the batch's last
/// arrival, so the last packet's delay read at its batch's interrupt
/// carries neither that time nor the wait for the interrupt. The
/// stream's last batch is left out: no later packet was waiting when its
/// interrupt came, which may be up to a moderation interval after its
/// last arrival (on the simulator's 10 Gbit/s path the last item read
/// 100 us of excess, a queue that was not there). Where every packet was
/// stamped alone, each gap but the last is its own item. Gaps before the
/// first batch start (the stream's first packet stamped inside a batch)
/// form an item received in no time.
pub fn batch_level_gaps(gaps: &[Gap]) -> impl Iterator<Item = Gap> + '_ {
    let mut i = 0;
    // Receive time of the batch before, after its first stamp.
    let mut inside_before = 0.0;
    std::iter::from_fn(move || {
        let first = gaps.get(i)?;
        let opens = starts_batch(first);
        let mut item = Gap {
            recv_ns: if opens {
                first.recv_ns + inside_before
            } else {
                0.0
            },
            ..*first
        };
        let mut inside = if opens { 0.0 } else { first.recv_ns };
        i += 1;
        while let Some(g) = gaps.get(i).filter(|g| !starts_batch(g)) {
            item.send_ns += g.send_ns;
            item.sent_bytes += g.sent_bytes;
            item.recv_bytes += g.recv_bytes;
            item.end_packet = g.end_packet;
            inside += g.recv_ns;
            i += 1;
        }
        inside_before = inside;
        // The last batch's interrupt came when no later packet was
        // waiting: up to a moderation interval after its last arrival.
        (i < gaps.len()).then_some(item)
    })
}

/// The rate at which the packets of the batches that end in `start..end`
/// (packet indices) arrived, read between receive interrupts over
/// [`batch_level_gaps`]: the bytes of every such batch but the first
/// over the time from the first one's interrupt to the last one's.
/// Stamps inside batches and the wait for each interrupt do not enter
/// it, so a sub-stream of a few batches reads its rate to within a send
/// gap over its span (read from its stamps, within a batch's wait).
/// `None` with fewer than two such batches.
pub fn delivered_between_batches_bps(gaps: &[Gap], start: usize, end: usize) -> Option<f64> {
    // Items start at batch starts, so reading from the last batch start
    // before the first gap that ends in `start..` yields the same items
    // from there on. Not from that gap itself: the item after it adds
    // the receive time inside the batch before, all of it.
    let first = gaps.partition_point(|g| (g.end_packet as usize) < start);
    let from = gaps[..first].iter().rposition(starts_batch).unwrap_or(0);
    let (mut bytes, mut ns, mut seen) = (0.0, 0.0, 0usize);
    for b in batch_level_gaps(&gaps[from..]) {
        let p = b.end_packet as usize;
        if p >= end {
            break;
        }
        if p >= start {
            if seen > 0 {
                bytes += b.recv_bytes;
                ns += b.recv_ns;
            }
            seen += 1;
        }
    }
    rate_bps(bytes, ns)
}

/// [`ProbeStream::receive_batch_count`]'s test on a stream's gaps, each
/// against its own send gap: a gap whose receive time is under half its
/// send time lies inside a batch, every other one starts a batch (a
/// batch of one where the gap after it starts one too). One pass, no
/// allocation: the multi-rate estimate asks it of every stream.
pub fn gaps_stamped_in_batches(gaps: &[Gap]) -> bool {
    let starts = starts_batch;
    let Some(first) = gaps.first() else {
        return false;
    };
    let (mut batches, mut singles) = (1usize, usize::from(starts(first)));
    for w in gaps.windows(2) {
        let (a, b) = (starts(&w[0]), starts(&w[1]));
        batches += usize::from(a);
        singles += usize::from(a && b);
    }
    let last = starts(&gaps[gaps.len() - 1]);
    batches += usize::from(last);
    singles += usize::from(last);
    stamped_in_batches(gaps.len() + 1, batches, singles)
}

/// The smallest positive gap between consecutive send times, ns; `None`
/// when send times never advance. Arrivals closer than half of it were
/// stamped together: the sender spaced no two packets that closely.
pub(crate) fn min_send_gap_ns(packets: &[ProbePacket]) -> Option<f64> {
    packets
        .windows(2)
        .map(|w| w[1].send_ns.saturating_sub(w[0].send_ns))
        .filter(|&g| g > 0)
        .min()
        .map(|g| g as f64)
}

/// The received ones of `packets`, as `(recv_ns, size_bytes)` in send
/// order: what [`arrival_rate_bps`] reads.
pub fn arrivals(packets: &[ProbePacket]) -> Vec<(i64, u32)> {
    let mut out = Vec::new();
    arrivals_into(packets, &mut out);
    out
}

/// [`arrivals`] into `out` (cleared first), reusing its memory.
pub fn arrivals_into(packets: &[ProbePacket], out: &mut Vec<(i64, u32)>) {
    out.clear();
    // Sized for all of them at once: a filtered extend grows by doubling.
    out.reserve(packets.len());
    out.extend(
        packets
            .iter()
            .filter_map(|p| p.recv_ns.map(|r| (r, p.size_bytes))),
    );
}

/// The rate packets `(recv_ns, size_bytes)`, in send order, arrived at:
/// the bits after the first over the span from the first to the last;
/// `None` without a span.
pub fn arrival_rate_bps(arrived: &[(i64, u32)]) -> Option<f64> {
    let span = diff_ns(arrived.last()?.0, arrived.first()?.0);
    let bits: f64 = arrived[1..].iter().map(|&(_, b)| 8.0 * b as f64).sum();
    (span > 0.0).then(|| bits / span * 1e9)
}

/// Difference of two clock readings in ns, exact for any `i64` inputs.
#[inline]
pub fn diff_ns(later: i64, earlier: i64) -> f64 {
    // The i128 path converts through a slow software routine; clock
    // differences nearly always fit in an i64.
    match later.checked_sub(earlier) {
        Some(d) => d as f64,
        None => (later as i128 - earlier as i128) as f64,
    }
}

/// A run of consecutive packets sent at one rate inside a stream.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SubStream {
    /// First packet index (inclusive).
    pub start: usize,
    /// One past the last packet index.
    pub end: usize,
    /// Probing rate of the run, bit/s (bytes after the first packet of the
    /// run over the run's send span; the first gap of a run is at its rate).
    pub rate_bps: f64,
}

/// Tolerance for "equal send gaps" when splitting a stream into sub-streams:
/// the trace format rounds intended gaps to 1 ns, so allow a few ns plus a
/// small relative slack for senders that record rounded microseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GapTolerance {
    pub abs_ns: f64,
    pub rel: f64,
}

impl GapTolerance {
    /// How far a send gap may stray from a run's first, `gap_ns`, and
    /// still belong to the run.
    pub fn slack_ns(&self, gap_ns: f64) -> f64 {
        self.abs_ns.max(self.rel * gap_ns.abs())
    }
}

impl Default for GapTolerance {
    fn default() -> Self {
        GapTolerance {
            abs_ns: 2.0,
            rel: 0.002,
        }
    }
}

/// Sub-streams shorter than this many packets are not counted as a rate
/// step when inferring the kind (a jittery single-rate stream stays single).
pub const MIN_SUB_STREAM_PACKETS: usize = 4;

impl ProbeStream {
    pub fn new(id: u64, packets: Vec<ProbePacket>) -> Self {
        ProbeStream { id, packets }
    }

    /// Marks lost the packets that a later-sent packet overtook (received
    /// after it): the path reordered them (another queue, another route),
    /// so their receive times say nothing about the queue the stream saw,
    /// and kept they read as huge gaps. The stream keeps its length (the
    /// analyses index packets by position). Returns how many.
    pub fn drop_overtaken(&mut self) -> usize {
        // Earliest receive among the packets sent after each one.
        let mut later_min = i64::MAX;
        let mut overtaken = vec![false; self.packets.len()];
        for (i, p) in self.packets.iter().enumerate().rev() {
            if let Some(r) = p.recv_ns {
                overtaken[i] = r > later_min;
                later_min = later_min.min(r);
            }
        }
        for (p, &o) in self.packets.iter_mut().zip(&overtaken) {
            if o {
                p.recv_ns = None;
            }
        }
        overtaken.iter().filter(|&&o| o).count()
    }

    /// A stream of `size_bytes` packets from plain arrays of send and
    /// receive times (ns; `None` for a lost packet). The shorter array
    /// sets the length.
    pub fn from_times(id: u64, size_bytes: u32, send_ns: &[i64], recv_ns: &[Option<i64>]) -> Self {
        ProbeStream {
            id,
            packets: send_ns
                .iter()
                .zip(recv_ns)
                .map(|(&send_ns, &recv_ns)| ProbePacket {
                    size_bytes,
                    send_ns,
                    recv_ns,
                })
                .collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.packets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    pub fn received_count(&self) -> usize {
        self.packets.iter().filter(|p| p.recv_ns.is_some()).count()
    }

    /// Whether the path carried sub-stream `sub` whole: no packet lost,
    /// and its packets (from the one before it, whose gap is at its
    /// rate) arrived at 0.99 of its rate or faster. A FIFO queues every
    /// rate over its available bandwidth, so such a sub-stream lies under
    /// it, or passed on a token bucket or in a lull.
    pub fn carried_whole(&self, sub: &SubStream) -> bool {
        self.sub_stream_arrival_bps(sub)
            .is_some_and(|d| self.carried_whole_at(sub, d))
    }

    /// [`ProbeStream::carried_whole`] where `sub` arrived at `arrived_bps`
    /// ([`ProbeStream::sub_stream_arrival_bps`]).
    pub fn carried_whole_at(&self, sub: &SubStream, arrived_bps: f64) -> bool {
        let packets = &self.packets[sub.start.saturating_sub(1)..sub.end];
        packets.iter().all(|p| p.recv_ns.is_some()) && arrived_bps >= 0.99 * sub.rate_bps
    }

    /// The rate sub-stream `sub` arrived at, from the packet before it
    /// (whose gap to its first is at its rate); `None` without two
    /// arrivals apart.
    pub fn sub_stream_arrival_bps(&self, sub: &SubStream) -> Option<f64> {
        // [`arrival_rate_bps`] of the arrivals, read in one pass without
        // collecting them (the same sum in the same order).
        let mut received = self.packets[sub.start.saturating_sub(1)..sub.end]
            .iter()
            .filter_map(|p| p.recv_ns.map(|r| (r, p.size_bytes)));
        let (first_ns, _) = received.next()?;
        let (mut last_ns, mut bits) = (first_ns, 0.0f64);
        for (r, b) in received {
            last_ns = r;
            bits += 8.0 * b as f64;
        }
        let span = diff_ns(last_ns, first_ns);
        (span > 0.0).then(|| bits / span * 1e9)
    }

    /// Share of packets lost, 0 for an empty stream.
    pub fn loss_fraction(&self) -> f64 {
        if self.packets.is_empty() {
            0.0
        } else {
            1.0 - self.received_count() as f64 / self.packets.len() as f64
        }
    }

    /// Time from the first packet's send to the last's, ns (0 for fewer
    /// than two packets): the stream's time on the path.
    pub fn send_span_ns(&self) -> f64 {
        match (self.packets.first(), self.packets.last()) {
            (Some(a), Some(b)) => diff_ns(b.send_ns, a.send_ns),
            _ => 0.0,
        }
    }

    /// From the first send to the last receive (the last send when
    /// nothing arrived), ns on the stream's clock; `None` when empty.
    pub fn window_ns(&self) -> Option<[i64; 2]> {
        let first = self.packets.first()?.send_ns;
        let last = match self.packets.iter().filter_map(|p| p.recv_ns).max() {
            Some(r) => r,
            None => self.packets.last()?.send_ns,
        };
        Some([first, last.max(first)])
    }

    /// Send gaps `send_ns[i] - send_ns[i-1]` for `i >= 1`, ns.
    pub fn send_gaps_ns(&self) -> Vec<f64> {
        self.packets
            .windows(2)
            .map(|w| diff_ns(w[1].send_ns, w[0].send_ns))
            .collect()
    }

    /// Average probing rate: bytes after the first packet over the send span.
    pub fn avg_rate_bps(&self) -> Option<f64> {
        self.rate_of(0, self.packets.len())
    }

    /// Probing rate of packets `start..end` (bytes after `start` over span).
    pub fn rate_of(&self, start: usize, end: usize) -> Option<f64> {
        if end <= start + 1 || end > self.packets.len() {
            return None;
        }
        let span = diff_ns(self.packets[end - 1].send_ns, self.packets[start].send_ns);
        // Integer sum: exact, and the same f64 as summing in f64 would be.
        let bytes: u64 = self.packets[start + 1..end]
            .iter()
            .map(|p| p.size_bytes as u64)
            .sum();
        rate_bps(bytes as f64, span)
    }

    /// Gaps between consecutive received packets (see the module docs for
    /// gaps that span losses).
    pub fn gaps(&self) -> Vec<Gap> {
        let mut out = Vec::with_capacity(self.packets.len().saturating_sub(1));
        self.all_gaps_into(&mut out);
        out
    }

    /// [`ProbeStream::gaps`] into `out` (cleared first), reusing its memory.
    pub fn all_gaps_into(&self, out: &mut Vec<Gap>) {
        out.clear();
        self.gaps_into(0, self.packets.len(), out);
    }

    /// Gaps whose end packet lies in `start..end`, appended to `out`. The
    /// first gap may start before `start` (it links the run to the packet
    /// received before it), so a sub-stream's gaps are all at its own rate.
    pub fn gaps_into(&self, start: usize, end: usize, out: &mut Vec<Gap>) {
        let mut prev: Option<(usize, i64)> = None;
        // Find the last received packet before `start`.
        for j in (0..start.min(self.packets.len())).rev() {
            if let Some(r) = self.packets[j].recv_ns {
                prev = Some((j, r));
                break;
            }
        }
        let end = end.min(self.packets.len());
        // Every packet from the one before `start` received (nearly every
        // stream): each gap is one packet's, with no loss to account for.
        let first = prev.map_or(start, |(j, _)| j);
        if start < end && (start == 0 || first + 1 == start) {
            let run = &self.packets[first..end];
            if run.iter().all(|p| p.recv_ns.is_some()) {
                // Differences in i64, their overflow noted instead of
                // branching per gap ([`diff_ns`]); where any overflowed,
                // the general path below reads the run exactly.
                let before = out.len();
                let mut overflowed = false;
                out.extend(run.windows(2).enumerate().map(|(i, w)| {
                    let (send, o1) = w[1].send_ns.overflowing_sub(w[0].send_ns);
                    let (recv, o2) = w[1]
                        .recv_ns
                        .unwrap_or_default()
                        .overflowing_sub(w[0].recv_ns.unwrap_or_default());
                    overflowed |= o1 | o2;
                    Gap {
                        send_ns: send as f64,
                        recv_ns: recv as f64,
                        sent_bytes: w[1].size_bytes as f64,
                        recv_bytes: w[1].size_bytes as f64,
                        end_packet: (first + 1 + i) as u32,
                    }
                }));
                if !overflowed {
                    return;
                }
                out.truncate(before);
            }
        }
        let mut sent_bytes = 0.0;
        for k in start..end {
            let p = self.packets[k];
            sent_bytes += p.size_bytes as f64;
            let Some(recv) = p.recv_ns else { continue };
            if let Some((j, prev_recv)) = prev {
                out.push(Gap {
                    send_ns: diff_ns(p.send_ns, self.packets[j].send_ns),
                    recv_ns: diff_ns(recv, prev_recv),
                    sent_bytes: if j + 1 >= start {
                        sent_bytes
                    } else {
                        // Losses before `start` belong to the previous run.
                        sent_bytes
                            + self.packets[j + 1..start]
                                .iter()
                                .map(|q| q.size_bytes as f64)
                                .sum::<f64>()
                    },
                    recv_bytes: p.size_bytes as f64,
                    end_packet: k as u32,
                });
            }
            prev = Some((k, recv));
            sent_bytes = 0.0;
        }
    }

    /// One-way delays of received packets relative to the smallest, ns, with
    /// the packet index. Offset-free; drift shows as a tiny linear trend.
    pub fn relative_owds(&self) -> Vec<(usize, f64)> {
        let raw: Vec<(usize, i128)> = self
            .packets
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.recv_ns.map(|r| (i, r as i128 - p.send_ns as i128)))
            .collect();
        let min = raw.iter().map(|&(_, d)| d).min().unwrap_or(0);
        raw.into_iter()
            .map(|(i, d)| (i, (d - min) as f64))
            .collect()
    }

    /// Splits the stream into runs of equal send gaps (within `tol` of the
    /// run's first gap). Packet 0 belongs to the first run; the gap ending at
    /// packet `i` decides which run `i` belongs to.
    pub fn sub_streams(&self, tol: GapTolerance) -> Vec<SubStream> {
        self.sub_streams_with_delay_floors(tol).0
    }

    /// [`ProbeStream::sub_streams`], and in the same pass each run's lowest
    /// one-way delay (receive minus send stamp, ns; `None` when the run
    /// lost every packet). Packet 0 is left out of the first run's: after
    /// idle, a coalescing receiver stamps it at once, lower than any later
    /// packet's delay can be. Delays saturate in `i64` (a stream's two
    /// clocks are not centuries apart; a delay saturated at `i64::MAX`
    /// counts as none).
    pub fn sub_streams_with_delay_floors(
        &self,
        tol: GapTolerance,
    ) -> (Vec<SubStream>, Vec<Option<i64>>) {
        // Room for the usual multi-rate stream's steps without regrowing.
        let mut out = Vec::with_capacity(8);
        let mut floors = Vec::with_capacity(8);
        self.sub_streams_with_delay_floors_into(tol, &mut out, &mut floors);
        (out, floors)
    }

    /// [`ProbeStream::sub_streams_with_delay_floors`] into `out` and
    /// `floors` (cleared first), reusing their memory.
    pub fn sub_streams_with_delay_floors_into(
        &self,
        tol: GapTolerance,
        out: &mut Vec<SubStream>,
        floors: &mut Vec<Option<i64>>,
    ) {
        out.clear();
        floors.clear();
        let n = self.packets.len();
        if n == 0 {
            return;
        }
        // One pass: each run's rate is its bytes after the packet before it
        // (the run's first gap links it to the previous run's last packet)
        // over the send span from that packet, as `rate_of(from, end)`.
        let rate = |from: usize, end: usize, bytes: u64| {
            if end <= from + 1 {
                return 0.0;
            }
            let span = diff_ns(self.packets[end - 1].send_ns, self.packets[from].send_ns);
            rate_bps(bytes as f64, span).unwrap_or(0.0)
        };
        let mut start = 0usize;
        let mut bytes = 0u64;
        // The run's first send gap and how far another may stray from it
        // (set at the stream's first gap).
        let mut reference = f64::NAN;
        let mut slack = f64::NAN;
        // i64::MAX: no packet of the run received yet.
        let mut floor = i64::MAX;
        let as_floor = |f: i64| (f != i64::MAX).then_some(f);
        for (i, (p, before)) in self.packets[1..].iter().zip(&self.packets).enumerate() {
            let i = i + 1;
            let g = diff_ns(p.send_ns, before.send_ns);
            if i == 1 {
                reference = g;
                slack = tol.slack_ns(g);
            } else if (g - reference).abs() > slack {
                out.push(SubStream {
                    start,
                    end: i,
                    rate_bps: rate(start.saturating_sub(1), i, bytes),
                });
                floors.push(as_floor(floor));
                floor = i64::MAX;
                start = i;
                bytes = 0;
                reference = g;
                slack = tol.slack_ns(g);
            }
            bytes += p.size_bytes as u64;
            if let Some(r) = p.recv_ns {
                floor = floor.min(r.saturating_sub(p.send_ns));
            }
        }
        out.push(SubStream {
            start,
            end: n,
            rate_bps: rate(start.saturating_sub(1), n, bytes),
        });
        floors.push(as_floor(floor));
    }

    /// Whether any two packets arrived closer than half the smallest send
    /// gap: stamped together, in one receive batch.
    pub fn has_batched_arrivals(&self) -> bool {
        self.batch_counts_in(0, self.packets.len())
            .is_some_and(|(starts, arrivals, _)| starts < arrivals)
    }

    /// The first stamps of the receive batches (see
    /// [`ProbeStream::receive_batch_interval_ns`]), the number of packets
    /// received and of batches that hold one packet; `None` when send
    /// times never advance.
    fn batch_starts(&self) -> Option<(Vec<i64>, usize, usize)> {
        self.batch_starts_in(0, self.packets.len())
    }

    /// [`ProbeStream::batch_starts`] of packets `from..to` alone.
    fn batch_starts_in(&self, from: usize, to: usize) -> Option<(Vec<i64>, usize, usize)> {
        let mut starts = Vec::new();
        let (arrivals, singles) = self.scan_batches_in(from, to, |r| starts.push(r))?;
        Some((starts, arrivals, singles))
    }

    /// [`ProbeStream::batch_starts_in`] counted, not collected: (batches,
    /// arrivals, batches of one packet).
    fn batch_counts_in(&self, from: usize, to: usize) -> Option<(usize, usize, usize)> {
        let mut starts = 0;
        let (arrivals, singles) = self.scan_batches_in(from, to, |_| starts += 1)?;
        Some((starts, arrivals, singles))
    }

    /// The receive batches of packets `from..to`: `start(first stamp)` for
    /// each batch in order; (arrivals, batches of one packet). `None` when
    /// the range is outside the stream or its send times never advance.
    fn scan_batches_in(
        &self,
        from: usize,
        to: usize,
        mut start: impl FnMut(i64),
    ) -> Option<(usize, usize)> {
        let packets = self.packets.get(from..to)?;
        let min_send_gap = min_send_gap_ns(packets)?;
        let (mut arrivals, mut singles, mut size) = (0usize, 0usize, 0usize);
        let mut previous: Option<i64> = None;
        for r in packets.iter().filter_map(|p| p.recv_ns) {
            if previous.is_none_or(|q| diff_ns(r, q) >= 0.5 * min_send_gap) {
                singles += (size == 1) as usize;
                size = 0;
                start(r);
            }
            size += 1;
            arrivals += 1;
            previous = Some(r);
        }
        singles += (size == 1) as usize;
        Some((arrivals, singles))
    }

    #[cfg(test)]
    fn batch_starts_collected_in(
        &self,
        from: usize,
        to: usize,
    ) -> Option<(Vec<i64>, usize, usize)> {
        let packets = self.packets.get(from..to)?;
        let min_send_gap = min_send_gap_ns(packets)?;
        let arrivals: Vec<i64> = packets.iter().filter_map(|p| p.recv_ns).collect();
        let mut starts: Vec<i64> = Vec::new();
        let (mut singles, mut size) = (0usize, 0usize);
        for (i, &r) in arrivals.iter().enumerate() {
            if i == 0 || diff_ns(r, arrivals[i - 1]) >= 0.5 * min_send_gap {
                singles += (size == 1) as usize;
                size = 0;
                starts.push(r);
            }
            size += 1;
        }
        singles += (size == 1) as usize;
        Some((starts, arrivals.len(), singles))
    }

    /// For packets `from..to` stamped in receive batches: the lowest
    /// one-way delay of each batch, `(send_ns, delay_ns)` with send times
    /// relative to packet `from`. The packet a batch stamps with the least
    /// delay is the one that arrived last before the interrupt, so it
    /// carries its true delay to within one receive gap; the others only
    /// wait for the stamp. Batches are read whole (a batch that spills
    /// over either end of the range counts when its last arrival lies
    /// inside it): the range's packets of a batch that goes on past its
    /// end all waited. `None` when the range is outside the stream, its
    /// send times never advance, or it was not stamped in batches (two
    /// packets or more per batch on average).
    pub fn batch_floors_in(&self, from: usize, to: usize) -> Option<Vec<(f64, f64)>> {
        let inner = self.packets.get(from..to)?;
        let min_send_gap = min_send_gap_ns(inner)?;
        let t0 = inner.first()?.send_ns;
        let together = |later: i64, earlier: i64| diff_ns(later, earlier) < 0.5 * min_send_gap;
        // Widen the range to whole batches.
        let received = |i: usize| self.packets[i].recv_ns;
        let mut lo = from;
        while let Some(r) = received(lo) {
            match (0..lo).rev().find_map(|j| received(j).map(|x| (j, x))) {
                Some((j, x)) if together(r, x) => lo = j,
                _ => break,
            }
            if lo == 0 {
                break;
            }
        }
        let mut hi = to;
        let last_inside = (from..to).rev().find_map(received);
        if let Some(mut r) = last_inside {
            while let Some(x) = self.packets.get(hi).map(|p| p.recv_ns) {
                match x {
                    Some(x) if together(x, r) => r = x,
                    Some(_) => break,
                    None => {}
                }
                hi += 1;
            }
        }
        // Each batch's floor packet: (index, send_ns, delay_ns).
        let mut floors: Vec<(usize, i64, f64)> = Vec::new();
        let (mut count, mut batches, mut last_recv) = (0usize, 0usize, None::<i64>);
        let (mut singles, mut size) = (0usize, 0usize);
        for (i, p) in self.packets[lo..hi].iter().enumerate() {
            // The stream's first packet is stamped at once, without the
            // batch's per-packet cost the others carry.
            let Some(r) = p.recv_ns.filter(|_| lo + i > 0) else {
                continue;
            };
            let point = (lo + i, p.send_ns, diff_ns(r, p.send_ns));
            if last_recv.is_none_or(|l| !together(r, l)) {
                floors.push(point);
                batches += 1;
                singles += (size == 1) as usize;
                size = 0;
            } else if let Some(f) = floors.last_mut().filter(|f| point.2 < f.2) {
                *f = point;
            }
            size += 1;
            count += 1;
            last_recv = Some(r);
        }
        singles += (size == 1) as usize;
        if !stamped_in_batches(count, batches, singles) {
            return None;
        }
        Some(
            floors
                .into_iter()
                .filter(|f| (from..to).contains(&f.0))
                .map(|(_, send, delay)| (diff_ns(send, t0), delay))
                .collect(),
        )
    }

    /// How many receive batches the stream arrived in, when the receiver
    /// stamped it in batches of two packets or more on average (see
    /// [`ProbeStream::receive_batch_interval_ns`]); `None` otherwise.
    pub fn receive_batch_count(&self) -> Option<usize> {
        self.receive_batch_count_in(0, self.packets.len())
    }

    /// [`ProbeStream::receive_batch_count`] of packets `from..to` alone
    /// (a sub-stream); `None` also for a range outside the stream.
    pub fn receive_batch_count_in(&self, from: usize, to: usize) -> Option<usize> {
        let (starts, arrivals, singles) = self.batch_counts_in(from, to)?;
        stamped_in_batches(arrivals, starts, singles).then_some(starts)
    }

    /// How often the receiver stamped packets in batches (interrupt
    /// coalescence, \[BASS\] section III): arrivals closer than half the
    /// smallest send gap were stamped together, since the sender spaced
    /// no two packets that closely. The median time between the first
    /// stamps of consecutive batches, when the stream has at least three
    /// batches of two packets or more on average; `None` for a receiver
    /// that stamps packets one by one.
    pub fn receive_batch_interval_ns(&self) -> Option<f64> {
        let (starts, arrivals, singles) = self.batch_starts()?;
        if starts.len() < 3 || !stamped_in_batches(arrivals, starts.len(), singles) {
            return None;
        }
        let mut intervals: Vec<f64> = starts.windows(2).map(|w| diff_ns(w[1], w[0])).collect();
        intervals.sort_by(f64::total_cmp);
        crate::stats::quantile_sorted(&intervals, 0.5)
    }

    /// Kind inferred from the send gaps: a chirp when every gap is shorter
    /// than the one before by the same factor (over 1.02, within
    /// [`CHIRP_RATIO_TOLERANCE`]); multi-rate when it has at least two
    /// runs of equal gaps and every run is long enough to be a rate step.
    pub fn infer_kind(&self, tol: GapTolerance) -> StreamKind {
        if self.is_chirp() {
            return StreamKind::Chirp;
        }
        if self.is_pairs() {
            return StreamKind::Pairs;
        }
        let runs = self.sub_streams(tol);
        if runs.len() >= 2
            && runs
                .iter()
                .all(|r| r.end - r.start >= MIN_SUB_STREAM_PACKETS)
        {
            StreamKind::MultiRate
        } else {
            StreamKind::SingleRate
        }
    }

    /// Packets `2i`, `2i + 1` equally close (within 1 % and 2 ns of their
    /// median gap), every pair at least two such gaps after the last.
    fn is_pairs(&self) -> bool {
        let n = self.packets.len();
        if n < 4 || !n.is_multiple_of(2) {
            return false;
        }
        let gaps = self.send_gaps_ns();
        let intra: Vec<f64> = gaps.iter().step_by(2).copied().collect();
        let Some(g) = crate::stats::median(&intra) else {
            return false;
        };
        g > 0.0
            && intra.iter().all(|x| (x - g).abs() <= 2.0 + 0.01 * g)
            && gaps.iter().skip(1).step_by(2).all(|x| *x >= 2.0 * g)
    }

    /// The elements of a jumbo chirp, as packet ranges: the send gaps fall in
    /// two groups, short ones inside elements and long ones between, at least
    /// [`JUMBO_GAP_RATIO`] apart, and every element holds the same number of
    /// packets, two or more. `None` for any other stream.
    pub fn jumbo_elements(&self) -> Option<Vec<std::ops::Range<usize>>> {
        let pk = &self.packets;
        if pk.len() < 4 {
            return None;
        }
        let gaps: Vec<f64> = pk
            .windows(2)
            .map(|w| diff_ns(w[1].send_ns, w[0].send_ns))
            .collect();
        let mut sorted = gaps.clone();
        sorted.sort_by(f64::total_cmp);
        if sorted[0] <= 0.0 {
            return None;
        }
        // The widest step between neighbouring sorted gaps splits the groups.
        let (i, ratio) = sorted
            .windows(2)
            .enumerate()
            .map(|(i, w)| (i, w[1] / w[0]))
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        if ratio < JUMBO_GAP_RATIO {
            return None;
        }
        let split = (sorted[i] * sorted[i + 1]).sqrt();
        let mut elements = Vec::new();
        let mut start = 0;
        for (k, g) in gaps.iter().enumerate() {
            if *g >= split {
                elements.push(start..k + 1);
                start = k + 1;
            }
        }
        elements.push(start..pk.len());
        let j = elements[0].len();
        (j >= 2 && elements.len() >= 3 && elements.iter().all(|e| e.len() == j)).then_some(elements)
    }

    /// A chirp, plain or jumbo (its elements' first packets a chirp).
    fn is_chirp(&self) -> bool {
        if let Some(elements) = self.jumbo_elements() {
            let firsts = ProbeStream {
                id: self.id,
                packets: elements.iter().map(|e| self.packets[e.start]).collect(),
            };
            return firsts.is_plain_chirp();
        }
        self.is_plain_chirp()
    }

    fn is_plain_chirp(&self) -> bool {
        if self.packets.len() < MIN_CHIRP_PACKETS {
            return false;
        }
        let gaps = self.send_gaps_ns();
        if gaps.iter().any(|g| *g <= 0.0) {
            return false;
        }
        let ratios: Vec<f64> = gaps.windows(2).map(|w| w[0] / w[1]).collect();
        let Some(spread) = crate::stats::median(&ratios) else {
            return false;
        };
        spread > 1.02
            && ratios
                .iter()
                .all(|r| (r / spread - 1.0).abs() <= CHIRP_RATIO_TOLERANCE)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Packets sent 1 us apart (1000 bytes), arriving at once, an
    /// interrupt every 4 us and 300 ns to stamp each packet of a batch:
    /// packet 0 alone at 0 (idle), 1-4 at 4000, 4300, 4600, 4900, 5-8 at
    /// 8000 ... 8900, 9-12 at 12000 ... 12900. Raw gaps 4000, 300 x 3,
    /// 3100, 300 x 3, ...; once a batch: 4 us sent and received
    /// (3100 + 900), 4000 bytes, ending at packets 4 and 8; the last
    /// batch (9-12) is left out. Stamped one by one, each gap but the
    /// last. Starting inside a batch, the gaps before the first batch
    /// start are one item received in no time.
    #[test]
    fn batch_level_gaps_by_hand() {
        let send: Vec<i64> = (0..13).map(|i| i * 1000).collect();
        let stamps: Vec<Option<i64>> = (0..13)
            .map(|i| {
                Some(if i == 0 {
                    0
                } else {
                    4000 * ((i + 3) / 4) + 300 * ((i - 1) % 4)
                })
            })
            .collect();
        let gaps = ProbeStream::from_times(1, 1000, &send, &stamps).gaps();
        let raw: Vec<f64> = gaps.iter().map(|g| g.recv_ns).collect();
        assert_eq!(raw[..5], [4000.0, 300.0, 300.0, 300.0, 3100.0]);
        let items: Vec<Gap> = batch_level_gaps(&gaps).collect();
        assert_eq!(items.len(), 2);
        for (item, end) in items.iter().zip([4, 8]) {
            assert_eq!((item.send_ns, item.recv_ns), (4000.0, 4000.0));
            assert_eq!((item.sent_bytes, item.recv_bytes), (4000.0, 4000.0));
            assert_eq!(item.end_packet, end);
        }
        // Packets 1-8 between the interrupts at 0 and 8000 ns (the first
        // batch ending in 1..9 is the start): 4000 bytes in 4 us.
        assert_eq!(delivered_between_batches_bps(&gaps, 1, 9), Some(8e9));
        assert_eq!(delivered_between_batches_bps(&gaps, 5, 9), None);
        let alone: Vec<Option<i64>> = send.iter().map(|t| Some(t + 50)).collect();
        let gaps = ProbeStream::from_times(1, 1000, &send, &alone).gaps();
        assert_eq!(batch_level_gaps(&gaps).count(), gaps.len() - 1);
        assert!(batch_level_gaps(&gaps).zip(&gaps).all(|(a, b)| a == *b));
        let inside = &ProbeStream::from_times(1, 1000, &send, &stamps).gaps()[1..];
        let first = batch_level_gaps(inside).next().unwrap();
        assert_eq!(
            (first.send_ns, first.recv_ns, first.end_packet),
            (3000.0, 0.0, 4)
        );
    }

    /// 20 packets sent 1 us apart, stamped in batches every 5 us (at 4,
    /// 9, 14, 19 us: packets 0-4, 5-9, 10-14, 15-19), then the same
    /// packets stamped one by one.
    #[test]
    fn receive_batches_by_hand() {
        let send: Vec<i64> = (0..20).map(|i| i * 1000).collect();
        let batched: Vec<Option<i64>> = (0..20).map(|i| Some(4000 + (i / 5) * 5000)).collect();
        let s = ProbeStream::from_times(1, 1000, &send, &batched);
        assert_eq!(s.receive_batch_interval_ns(), Some(5000.0));
        assert_eq!(s.receive_batch_count(), Some(4));
        let one_by_one: Vec<Option<i64>> = send.iter().map(|t| Some(t + 300)).collect();
        let s = ProbeStream::from_times(1, 1000, &send, &one_by_one);
        assert_eq!(s.receive_batch_interval_ns(), None);
        assert_eq!(s.receive_batch_count(), None);
        // One stall of a receiver that stamps one by one: packets 5-14
        // stamped together at 15.3 us, the other 10 alone. 20 packets in
        // 11 batches is under two a batch anyway; with 30 stalled of 40
        // (1 us apart, stamped together at 35.3) it is 40 in 11, over two
        // a batch, yet 10 of the 11 batches hold one packet.
        let stalled = |n: i64, stall_end: i64| {
            let send: Vec<i64> = (0..n).map(|i| i * 1000).collect();
            let recv: Vec<Option<i64>> = (0..n)
                .map(|i| {
                    Some(if (5..stall_end).contains(&i) {
                        stall_end * 1000 + 300
                    } else {
                        i * 1000 + 300
                    })
                })
                .collect();
            ProbeStream::from_times(1, 1000, &send, &recv)
        };
        assert_eq!(stalled(20, 15).receive_batch_count(), None);
        let s = stalled(40, 35);
        assert_eq!(s.receive_batch_interval_ns(), None);
        assert_eq!(s.receive_batch_count(), None);
        assert!(s.has_batched_arrivals());
        // Two batches are not enough to say how often, but they are two.
        let two: Vec<Option<i64>> = (0..20).map(|i| Some(10_000 + (i / 10) * 10_000)).collect();
        let s = ProbeStream::from_times(1, 1000, &send, &two);
        assert_eq!(s.receive_batch_interval_ns(), None);
        assert_eq!(s.receive_batch_count(), Some(2));
    }

    /// 13 packets sent 1 us apart; packet 0 stamped at once, then batches
    /// of packets 1-4, 5-8 and 9-12 stamped 300 ns apart from 10, 14 and
    /// 18.4 us. Delays: 9000, 8300, 7600, 6900 in the first two batches
    /// (their last packet, 4 or 8, is the floor) and 9400 ... 7300 in the
    /// third. Whole: (4000, 6900), (8000, 6900), (12000, 7300). Packets
    /// 5-10: only batch 2's floor (packet 8, 3 us after packet 5): batch
    /// 3 goes on past packet 10, and its packets 9 and 10 (8700 ns) only
    /// waited for the stamp.
    #[test]
    fn batch_floors_by_hand() {
        let send: Vec<i64> = (0..13).map(|i| i * 1000).collect();
        let mut recv = vec![Some(5000)];
        for start in [10_000, 14_000, 18_400] {
            recv.extend((0..4).map(|k| Some(start + k * 300)));
        }
        let s = ProbeStream::from_times(1, 1000, &send, &recv);
        assert_eq!(
            s.batch_floors_in(0, 13),
            Some(vec![(4000.0, 6900.0), (8000.0, 6900.0), (12000.0, 7300.0)])
        );
        assert_eq!(s.batch_floors_in(5, 11), Some(vec![(3000.0, 6900.0)]));
        assert_eq!(s.batch_floors_in(5, 20), None);
        let one_by_one: Vec<Option<i64>> = send.iter().map(|t| Some(t + 300)).collect();
        let s = ProbeStream::from_times(1, 1000, &send, &one_by_one);
        assert_eq!(s.batch_floors_in(0, 13), None);
    }

    /// Sent 0, 10, 20, 30, 40; packet 1 arrives after 2 and 3, packet 4
    /// is lost. By hand: only packet 1 was overtaken; it becomes lost.
    #[test]
    fn overtaken_packets_are_taken_out() {
        let mut s = ProbeStream::from_times(
            1,
            100,
            &[0, 10, 20, 30, 40],
            &[Some(5), Some(50), Some(25), Some(35), None],
        );
        assert_eq!(s.drop_overtaken(), 1);
        let recv: Vec<Option<i64>> = s.packets.iter().map(|p| p.recv_ns).collect();
        assert_eq!(recv, [Some(5), None, Some(25), Some(35), None]);
        // In order, equal stamps (a receive batch) included: nothing.
        let mut s = ProbeStream::from_times(1, 100, &[0, 10, 20], &[Some(5), Some(5), Some(9)]);
        assert_eq!(s.drop_overtaken(), 0);
        assert_eq!(s.packets.len(), 3);
    }

    /// A stream from (send_ns, recv_ns) pairs, 1000-byte packets.
    pub(crate) fn stream_of(times: &[(i64, Option<i64>)]) -> ProbeStream {
        ProbeStream::new(
            0,
            times
                .iter()
                .map(|&(s, r)| ProbePacket {
                    size_bytes: 1000,
                    send_ns: s,
                    recv_ns: r,
                })
                .collect(),
        )
    }

    #[test]
    fn gaps_and_rates_of_a_simple_stream() {
        // 1000 B every 1000 ns = 8 Gbit/s.
        let s = stream_of(&[(0, Some(50)), (1000, Some(1100)), (2000, Some(2300))]);
        assert_eq!(s.send_gaps_ns(), vec![1000.0, 1000.0]);
        assert_eq!(s.avg_rate_bps(), Some(8.0e9));
        let g = s.gaps();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].recv_ns, 1050.0);
        assert_eq!(g[1].recv_ns, 1200.0);
        assert_eq!(g[1].end_packet, 2);
        let owd = s.relative_owds();
        assert_eq!(owd, vec![(0, 0.0), (1, 50.0), (2, 250.0)]);
    }

    #[test]
    fn send_span_is_first_to_last_send() {
        let p = |send_ns| ProbePacket {
            size_bytes: 1500,
            send_ns,
            recv_ns: None,
        };
        assert_eq!(
            ProbeStream::new(0, vec![p(-5), p(10), p(95)]).send_span_ns(),
            100.0
        );
        assert_eq!(ProbeStream::new(0, vec![p(7)]).send_span_ns(), 0.0);
        assert_eq!(ProbeStream::new(0, vec![]).send_span_ns(), 0.0);
    }

    #[test]
    fn a_gap_spans_a_loss() {
        let s = stream_of(&[(0, Some(0)), (1000, None), (2000, Some(2500))]);
        let g = s.gaps();
        assert_eq!(g.len(), 1);
        assert_eq!(g[0].send_ns, 2000.0);
        assert_eq!(g[0].recv_ns, 2500.0);
        assert_eq!(g[0].sent_bytes, 2000.0);
        assert_eq!(g[0].recv_bytes, 1000.0);
        assert!((s.loss_fraction() - 1.0 / 3.0).abs() < 1e-12);
    }

    /// A stream from drawn (size, send gap, delay, lost if 0) tuples.
    fn stream_of_draws(draws: &[(u32, i64, i64, u8)]) -> ProbeStream {
        let mut send = 0i64;
        let packets = draws
            .iter()
            .map(|&(size_bytes, gap, delay, lost)| {
                send += gap;
                let recv_ns = (lost != 0).then_some(send + delay);
                ProbePacket {
                    size_bytes,
                    send_ns: send,
                    recv_ns,
                }
            })
            .collect();
        ProbeStream::new(0, packets)
    }

    proptest::proptest! {
        /// A run's gaps, with or without losses, are the definition's:
        /// from each received packet in the run back to the one received
        /// before it, the bytes sent in between included.
        #[test]
        fn run_gaps_are_the_definitions(
            pk in proptest::collection::vec((1u32..9000, 1i64..50_000, 0i64..90_000, 0u8..10), 0..60),
            a in 0usize..65,
            len in 0usize..65,
        ) {
            let s = stream_of_draws(&pk);
            let (start, end) = (a, a + len);
            let mut want = Vec::new();
            for k in start..end.min(s.len()) {
                let Some(recv) = s.packets[k].recv_ns else { continue };
                let Some(j) = (0..k).rev().find(|&j| s.packets[j].recv_ns.is_some()) else {
                    continue;
                };
                want.push(Gap {
                    send_ns: (s.packets[k].send_ns - s.packets[j].send_ns) as f64,
                    recv_ns: (recv - s.packets[j].recv_ns.unwrap()) as f64,
                    sent_bytes: s.packets[j + 1..=k].iter().map(|p| p.size_bytes as f64).sum(),
                    recv_bytes: s.packets[k].size_bytes as f64,
                    end_packet: k as u32,
                });
            }
            let mut got = Vec::new();
            s.gaps_into(start, end, &mut got);
            proptest::prop_assert_eq!(got, want);
        }

        /// The receive batches found in one pass over the received
        /// packets are those of their collected arrivals, and counting
        /// them agrees.
        #[test]
        fn batches_scanned_are_those_of_the_arrivals(
            pk in proptest::collection::vec((1u32..9000, 1i64..50_000, 0i64..90_000, 0u8..4), 0..80),
            batch_ns in 1i64..200_000,
            a in 0usize..85,
            len in 0usize..85,
        ) {
            // Arrivals stamped at the next multiple of `batch_ns`.
            let mut s = stream_of_draws(&pk);
            for p in &mut s.packets {
                p.recv_ns = p.recv_ns.map(|r| (r / batch_ns + 1) * batch_ns);
            }
            let (from, to) = (a.min(s.len()), (a + len).min(s.len()));
            let want = s.batch_starts_collected_in(from, to);
            proptest::prop_assert_eq!(s.batch_starts_in(from, to), want.clone());
            proptest::prop_assert_eq!(
                s.batch_counts_in(from, to),
                want.map(|(starts, arrivals, singles)| (starts.len(), arrivals, singles))
            );
        }

        /// A sub-stream's arrival rate, read in one pass, is the rate of
        /// its collected arrivals.
        #[test]
        fn sub_stream_arrival_rate_is_its_arrivals_rate(
            pk in proptest::collection::vec((1u32..9000, 1i64..50_000, 0i64..90_000, 0u8..4), 0..60),
            a in 0usize..65,
            len in 0usize..65,
        ) {
            let s = stream_of_draws(&pk);
            let (start, end) = (a.min(s.len()), (a + len).min(s.len()));
            let sub = SubStream { start, end, rate_bps: 1e9 };
            let want = arrival_rate_bps(&arrivals(&s.packets[start.saturating_sub(1)..end]));
            proptest::prop_assert_eq!(s.sub_stream_arrival_bps(&sub), want);
        }
    }

    #[test]
    fn offset_cancels_exactly_even_at_the_clock_limits() {
        let s = stream_of(&[(i64::MIN, Some(i64::MAX - 10)), (i64::MAX, Some(i64::MAX))]);
        let g = s.gaps();
        assert_eq!(g[0].recv_ns, 10.0);
        assert_eq!(g[0].send_ns, u64::MAX as f64);
    }

    #[test]
    fn sub_streams_follow_the_send_gaps() {
        // 3 packets at gap 1000 (pkt 0..3), then 3 at gap 500 (pkt 3..6).
        let times = [0, 1000, 2000, 2500, 3000, 3501];
        let s = stream_of(&times.map(|t| (t, Some(t))));
        let runs = s.sub_streams(GapTolerance::default());
        assert_eq!(runs.len(), 2);
        assert_eq!((runs[0].start, runs[0].end), (0, 3));
        assert_eq!((runs[1].start, runs[1].end), (3, 6));
        assert_eq!(runs[0].rate_bps, 8.0e9);
        // 3000 bytes over 1501 ns (packet 2 -> 5).
        assert!((runs[1].rate_bps - 3000.0 * 8.0e9 / 1501.0).abs() < 1.0);
        // Runs of 3 packets are too short to call this multi-rate.
        assert_eq!(
            s.infer_kind(GapTolerance::default()),
            StreamKind::SingleRate
        );
    }

    #[test]
    fn kind_inference() {
        let mut t = 0;
        let mut times = vec![];
        for gap in [1000, 800, 600] {
            for _ in 0..8 {
                t += gap;
                times.push((t, Some(t)));
            }
        }
        assert_eq!(
            stream_of(&times).infer_kind(GapTolerance::default()),
            StreamKind::MultiRate
        );
        let chirp = crate::schedule::chirp_schedule(1e9, 10e9, 1.2, 9000);
        let chirp: Vec<_> = chirp.iter().map(|&t| (t, Some(t))).collect();
        assert_eq!(
            stream_of(&chirp).infer_kind(GapTolerance::default()),
            StreamKind::Chirp
        );
        // Pairs 7.2 us apart, 1 ms between them.
        let pairs: Vec<_> = (0..6)
            .flat_map(|i| [i * 1_000_000, i * 1_000_000 + 7_200])
            .map(|t| (t, Some(t)))
            .collect();
        assert_eq!(
            stream_of(&pairs).infer_kind(GapTolerance::default()),
            StreamKind::Pairs
        );
        // Five packets are too few to tell a chirp.
        assert_eq!(
            stream_of(&chirp[..5]).infer_kind(GapTolerance::default()),
            StreamKind::SingleRate
        );
        let single: Vec<_> = (0..20).map(|i| (i * 1000 + i % 2, Some(0))).collect();
        assert_eq!(
            stream_of(&single).infer_kind(GapTolerance::default()),
            StreamKind::SingleRate
        );
    }
}
