//! A TWAMP-light or STAMP reflector's replies read back: each reply's
//! place in the stream and its four timestamps, and the checks a stream's
//! stamps must pass before they are believed.

use std::net::SocketAddr;
use tightlink_wire::twamp::FLAG_HELD;
use tightlink_wire::{DropReason, NtpTimestamp, ReflectorPacket};

use crate::stamps::Received;

/// A reply sorted: the probe it answers (by sequence number) and its
/// stamps, or why it is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub sender_sequence: u32,
    pub sender_timestamp: NtpTimestamp,
    pub receive_timestamp: NtpTimestamp,
    pub transmit_timestamp: NtpTimestamp,
    /// The reflector's transmit stamp equals its receive stamp: one
    /// clock read for both.
    pub one_read: bool,
    /// Our flags as the reflector echoed them, if it did.
    pub echoed_flags: Option<u8>,
    /// A held train's reply: its index among the replies sent back and
    /// their count.
    pub held: Option<(u32, u32)>,
    /// The reply's length.
    pub len: usize,
    /// This host's kernel receive stamp of the reply.
    pub here_ns: Option<i64>,
}

/// What the replies said about the reflector's clock, over the session.
#[derive(Debug, Clone, Default)]
pub(crate) struct StampStats {
    pub(crate) replies: u64,
    /// Replies whose transmit stamp equals their receive stamp.
    pub(crate) one_read: u64,
    /// Per stream: the receive stamps' noise (ns).
    pub(crate) noise_ns: Vec<i64>,
    /// The coarsest step every stamp difference was a multiple of.
    pub(crate) step_ns: Option<i64>,
    pub(crate) streams: usize,
    /// Streams that arrived faster than they were sent, and the worst
    /// such (compression, send span), ns.
    pub(crate) faster: usize,
    pub(crate) worst_faster: Option<(i64, i64)>,
}

impl StampStats {
    /// The stamps' quality in words, as the far end's line shows it.
    pub(crate) fn describe(&self) -> String {
        let noise = tightlink_core::stats::median_i64(&self.noise_ns);
        let mut words = Vec::new();
        if self.replies >= 10 && self.one_read == self.replies {
            words.push("one clock read for both stamps".to_string());
        }
        match (self.step_ns, noise) {
            (Some(q), _) => words.push(format!("receive stamps in {} us steps", q / 1_000)),
            (None, Some(n)) if n >= 5_000 => words.push(format!(
                "jittery receive stamps (noise {:.0} us: user-space stamps?)",
                n as f64 / 1e3
            )),
            (None, Some(n)) => words.push(format!(
                "kernel-like receive stamps (noise {:.1} us)",
                n as f64 / 1e3
            )),
            (None, None) => words.push("receive stamps not yet judged".to_string()),
        }
        words.join(", ")
    }
}

/// Parses a reply (`header`: its first bytes, 38 at least): only the
/// reflector's address is taken.
pub fn parse_reply(
    header: &[u8],
    r: &Received,
    reflector: SocketAddr,
) -> Result<Reply, DropReason> {
    if r.from != reflector {
        return Err(DropReason::WrongPeer);
    }
    let v = ReflectorPacket::new_checked(header)?;
    Ok(Reply {
        sender_sequence: v.sender_sequence(),
        sender_timestamp: v.sender_timestamp(),
        receive_timestamp: v.receive_timestamp(),
        transmit_timestamp: v.timestamp(),
        one_read: v.transmit_equals_receive(),
        echoed_flags: v.reflected_flags(),
        held: held_place(header, v.reflected_flags()),
        len: r.len,
        here_ns: r.kernel_ns,
    })
}

/// Index and count of a held train's reply (STAMP echo, flag set).
pub(crate) fn held_place(header: &[u8], flags: Option<u8>) -> Option<(u32, u32)> {
    use crate::reflector::{HELD_COUNT, HELD_INDEX};
    if flags? & FLAG_HELD == 0 {
        return None;
    }
    let be = |r: std::ops::Range<usize>| -> Option<u32> {
        Some(u32::from_be_bytes(header.get(r)?.try_into().ok()?))
    };
    let (j, k) = (be(HELD_INDEX)?, be(HELD_COUNT)?);
    (j < k).then_some((j, k))
}

/// Which probes of a held train the reflector sent back, from the
/// replies' places (`held[i]`: index among those sent back and their
/// count): every answered probe, and for each run of unanswered ones as
/// many as the indices skip there (replies lost on the way back; placed
/// first in the run, the rest were lost on the way to the reflector and
/// never sent back). `None` without any place.
pub fn sent_back(held: &[Option<(u32, u32)>]) -> Option<Vec<bool>> {
    let count = held.iter().flatten().map(|&(_, k)| k).max()? as i64;
    let mut out = vec![false; held.len()];
    // (position, index) of the answered probes, with sentinels.
    let mut marks: Vec<(i64, i64)> = vec![(-1, -1)];
    marks.extend(
        held.iter()
            .enumerate()
            .filter_map(|(i, h)| h.map(|(j, _)| (i as i64, j as i64))),
    );
    marks.push((held.len() as i64, count));
    for w in marks.windows(2) {
        let ((pa, ja), (pb, jb)) = (w[0], w[1]);
        if pa >= 0 {
            out[pa as usize] = true;
        }
        let lost_back = (jb - ja - 1).max(0);
        let room = pb - pa - 1;
        for p in (pa + 1)..(pa + 1 + lost_back.min(room)) {
            out[p as usize] = true;
        }
    }
    Some(out)
}

/// One stream's receive stamps against its send times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamStamps {
    /// Median absolute deviation of (receive gap - send gap) over
    /// consecutive received packets: the stamps' noise.
    pub noise_ns: i64,
    /// First to last received packet: send span minus receive span
    /// (positive: the train arrived in less time than it was sent over).
    pub compression_ns: i64,
    pub send_span_ns: i64,
    /// Compressed beyond what noise explains: more than 4 noise widths
    /// and 1 us, and more than 5 % of the span (a reflector's interrupt
    /// coalescence bunches arrivals by up to its interval, ~125 us, and
    /// a path's queue that drains during a train arrives compressed by a
    /// little).
    pub faster_than_sent: bool,
}

/// Checks a stream's stamps; `None` with fewer than 5 packets received.
/// `send_ns` is when each probe left this host, `recv_ns` the
/// reflector's stamp on this host's clock.
pub fn check_stream_stamps(send_ns: &[i64], recv_ns: &[Option<i64>]) -> Option<StreamStamps> {
    let got: Vec<(i64, i64)> = send_ns
        .iter()
        .zip(recv_ns)
        .filter_map(|(&s, r)| r.map(|r| (s, r)))
        .collect();
    if got.len() < 5 {
        return None;
    }
    let dd: Vec<f64> = got
        .windows(2)
        .map(|w| ((w[1].1 - w[0].1) - (w[1].0 - w[0].0)) as f64)
        .collect();
    let mid = tightlink_core::stats::median(&dd)?;
    let dev: Vec<f64> = dd.iter().map(|d| (d - mid).abs()).collect();
    let noise_ns = tightlink_core::stats::median(&dev)?.round() as i64;
    let (first, last) = (got[0], got[got.len() - 1]);
    let send_span_ns = last.0 - first.0;
    let compression_ns = send_span_ns - (last.1 - first.1);
    let faster_than_sent =
        compression_ns > (4 * noise_ns).max(1_000) && compression_ns * 20 > send_span_ns;
    Some(StreamStamps {
        noise_ns,
        compression_ns,
        send_span_ns,
        faster_than_sent,
    })
}

/// The coarsest step (1 ms, 100 us, 10 us or 1 us) that every one of at
/// least 20 differences between stamps is a multiple of, within 2 ns
/// (NTP fractions round): a reflector that stamps that coarsely.
pub fn stamp_step_ns(deltas_ns: &[i64]) -> Option<i64> {
    if deltas_ns.len() < 20 || deltas_ns.iter().all(|&d| d == 0) {
        return None;
    }
    [1_000_000, 100_000, 10_000, 1_000].into_iter().find(|&q| {
        deltas_ns.iter().all(|&d| {
            let r = d.rem_euclid(q);
            r <= 2 || r >= q - 2
        })
    })
}
