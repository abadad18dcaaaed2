//! The receiving side, pure: data put back in order within a bounded
//! window (and hashed as it becomes contiguous), and each stream's
//! receive stamps held until the stream is over, then handed out in
//! stream order for the sender's rate controller. Memory is bounded by
//! the window and [`MAX_OPEN_STREAMS`] x the stream limit, whatever a
//! peer sends.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};
use tightlink_wire::data::DataRepr;
use tightlink_wire::DropReason;

/// Streams whose stamps may be held at once; a packet of a stream further
/// ahead keeps its data but not its stamp.
pub const MAX_OPEN_STREAMS: u32 = 256;

/// A sender announced a stream more than [`MAX_OPEN_STREAMS`] past the
/// oldest one still awaiting its stamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("stream {stream} announced while stream {oldest_open} is still open (at most {MAX_OPEN_STREAMS} open)")]
pub struct TooFarAhead {
    pub stream: u32,
    pub oldest_open: u32,
}

/// How long after a stream's end was signalled (a packet of a later
/// stream, or the sender saying it sent the stream) its missing packets
/// are taken as lost. A FIFO path delivers a stream's packets before the
/// next stream's; this is slack for paths that reorder a little. Timed on
/// the monotonic clock: a step of the wall clock must not hold streams
/// open (or close them early).
pub const CLOSE_GRACE_NS: i64 = 1_000_000;

#[derive(Debug)]
pub struct Reassembly {
    max_bytes: u64,
    window_bytes: u64,
    contiguous: u64,
    held: BTreeMap<u64, Vec<u8>>,
    held_bytes: u64,
    hasher: Sha256,
    pub duplicate_bytes: u64,
}

impl Reassembly {
    pub fn new(max_bytes: u64, window_bytes: u64) -> Self {
        Reassembly {
            max_bytes,
            window_bytes,
            contiguous: 0,
            held: BTreeMap::new(),
            held_bytes: 0,
            hasher: Sha256::new(),
            duplicate_bytes: 0,
        }
    }

    /// Bytes held in order from the start.
    pub fn contiguous(&self) -> u64 {
        self.contiguous
    }

    /// Takes `data` at `offset`. Bytes already held are duplicates;
    /// bytes beyond the window or the announced size are refused.
    pub fn put(&mut self, offset: u64, data: &[u8]) -> Result<(), DropReason> {
        let end = offset + data.len() as u64;
        if end > self.max_bytes || end > self.contiguous + self.window_bytes {
            return Err(DropReason::OverAnnounced);
        }
        if end <= self.contiguous || self.held.contains_key(&offset) {
            self.duplicate_bytes += data.len() as u64;
            return Ok(());
        }
        if offset > self.contiguous {
            self.held.insert(offset, data.to_vec());
            self.held_bytes += data.len() as u64;
            return Ok(());
        }
        self.take((self.contiguous - offset) as usize, data);
        while let Some(e) = self.held.first_entry() {
            if *e.key() > self.contiguous {
                break;
            }
            let (o, d) = e.remove_entry();
            self.held_bytes -= d.len() as u64;
            let skip = self.contiguous - o;
            if skip < d.len() as u64 {
                self.take(skip as usize, &d);
            }
        }
        Ok(())
    }

    fn take(&mut self, skip: usize, data: &[u8]) {
        self.hasher.update(&data[skip..]);
        self.contiguous += (data.len() - skip) as u64;
        self.duplicate_bytes += skip as u64;
    }

    /// Bytes held out of order.
    pub fn held_bytes(&self) -> u64 {
        self.held_bytes
    }

    /// SHA-256 of the bytes held in order.
    pub fn digest(&self) -> [u8; 32] {
        self.hasher.clone().finalize().into()
    }
}

/// One stream's stamps while it is open.
#[derive(Debug, Default)]
struct Open {
    count: u32,
    /// (position, kernel receive ns)
    stamps: Vec<(u32, i64)>,
    /// When its end was first signalled (monotonic ns).
    ended_at: Option<i64>,
}

/// A stream closed: the receive stamp of each position it had, `None`
/// where none came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Closed {
    pub stream: u32,
    pub recv_ns: Vec<Option<i64>>,
}

#[derive(Debug)]
pub struct StreamStamps {
    max_packets: u32,
    next_close: u32,
    highest_seen: Option<u32>,
    open: BTreeMap<u32, Open>,
    pub late: u64,
    pub beyond: u64,
}

impl StreamStamps {
    pub fn new(max_packets: u32) -> Self {
        StreamStamps {
            max_packets,
            next_close: 0,
            highest_seen: None,
            open: BTreeMap::new(),
            late: 0,
            beyond: 0,
        }
    }

    /// Streams below this are closed.
    pub fn next_close(&self) -> u32 {
        self.next_close
    }

    /// A packet's stamp (`recv_ns`: the kernel's, wall clock), taken at
    /// `now_ns` (monotonic). A stream already closed or too far ahead
    /// keeps no stamp (counted); a packet claiming more than the stream
    /// limit is refused.
    pub fn stamp(&mut self, r: &DataRepr, recv_ns: i64, now_ns: i64) -> Result<(), DropReason> {
        if r.count > self.max_packets {
            return Err(DropReason::OverAnnounced);
        }
        if r.stream < self.next_close {
            self.late += 1;
            return Ok(());
        }
        if r.stream - self.next_close >= MAX_OPEN_STREAMS {
            self.beyond += 1;
            return Ok(());
        }
        if self.highest_seen.is_none_or(|h| r.stream > h) {
            // Every open stream before this one has ended.
            let from = self.next_close;
            self.end_through(from, r.stream.saturating_sub(1), now_ns, r.stream > from);
            self.highest_seen = Some(r.stream);
        }
        let o = self.open.entry(r.stream).or_default();
        o.count = o.count.max(r.count);
        if o.stamps.len() < o.count as usize && !o.stamps.iter().any(|s| s.0 == r.index) {
            o.stamps.push((r.index, recv_ns));
        }
        Ok(())
    }

    /// The sender says it sent `stream` (and everything before it), at
    /// `now_ns` (monotonic). A sender keeps fewer than
    /// [`MAX_OPEN_STREAMS`] streams awaiting their stamps; one further
    /// ahead is refused.
    pub fn sent(&mut self, stream: u32, now_ns: i64) -> Result<(), TooFarAhead> {
        if stream < self.next_close {
            return Ok(());
        }
        if stream - self.next_close >= MAX_OPEN_STREAMS {
            return Err(TooFarAhead {
                stream,
                oldest_open: self.next_close,
            });
        }
        self.end_through(self.next_close, stream, now_ns, true);
        Ok(())
    }

    fn end_through(&mut self, from: u32, to: u32, now_ns: i64, any: bool) {
        if !any {
            return;
        }
        for s in from..=to {
            let o = self.open.entry(s).or_default();
            o.ended_at.get_or_insert(now_ns);
        }
    }

    /// Streams that are over at `now_ns` (monotonic), in order: every
    /// position received, or their end signalled [`CLOSE_GRACE_NS`] ago.
    pub fn close_due(&mut self, now_ns: i64) -> Vec<Closed> {
        let mut out = Vec::new();
        while let Some(e) = self.open.first_entry() {
            if *e.key() != self.next_close {
                break;
            }
            let o = e.get();
            let full = o.count > 0 && o.stamps.len() == o.count as usize;
            let ended = o.ended_at.is_some_and(|t| now_ns - t >= CLOSE_GRACE_NS);
            if !full && !ended {
                break;
            }
            let (s, o) = e.remove_entry();
            let mut recv_ns = vec![None; o.count as usize];
            for (i, t) in o.stamps {
                recv_ns[i as usize] = Some(t);
            }
            out.push(Closed { stream: s, recv_ns });
            self.next_close += 1;
        }
        out
    }

    /// When the next stream will be due to close, if its end is known.
    pub fn next_due_ns(&self) -> Option<i64> {
        let o = self.open.get(&self.next_close)?;
        o.ended_at.map(|t| t + CLOSE_GRACE_NS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr(stream: u32, index: u32, count: u32) -> DataRepr {
        DataRepr {
            session: 1,
            stream,
            index,
            count,
            offset: 0,
            len: 1,
        }
    }

    #[test]
    fn bytes_come_out_in_order_whatever_order_they_arrive_in() {
        let mut r = Reassembly::new(100, 50);
        r.put(10, b"klmnopqrst").unwrap();
        r.put(20, b"uvwxyz").unwrap();
        assert_eq!(r.contiguous(), 0);
        assert_eq!(r.held_bytes(), 16);
        r.put(0, b"abcdefghij").unwrap();
        assert_eq!(r.contiguous(), 26);
        assert_eq!(r.held_bytes(), 0);
        let want: [u8; 32] = Sha256::digest(b"abcdefghijklmnopqrstuvwxyz").into();
        assert_eq!(r.digest(), want);
        // A second copy changes nothing; past the window is refused.
        r.put(0, b"abcdefghij").unwrap();
        assert_eq!(r.duplicate_bytes, 10);
        assert_eq!(r.put(76, b"x"), Err(DropReason::OverAnnounced));
        assert_eq!(r.put(99, b"xy"), Err(DropReason::OverAnnounced));
        assert_eq!(r.digest(), want);
    }

    #[test]
    fn overlapping_chunks_are_hashed_once() {
        let mut r = Reassembly::new(100, 100);
        r.put(0, b"abcd").unwrap();
        r.put(2, b"cdef").unwrap();
        let want: [u8; 32] = Sha256::digest(b"abcdef").into();
        assert_eq!(r.digest(), want);
        assert_eq!(r.duplicate_bytes, 2);
    }

    #[test]
    fn a_full_stream_closes_at_once_and_a_short_one_after_the_grace() {
        // Kernel stamps on the wall clock, far from the monotonic times
        // the grace is counted in.
        const WALL: i64 = 1_700_000_000_000_000_000;
        let mut s = StreamStamps::new(100);
        for i in 0..3 {
            s.stamp(&repr(0, i, 3), WALL + 1000 + i as i64, 1000 + i as i64)
                .unwrap();
        }
        let c = s.close_due(1003);
        assert_eq!(
            c,
            vec![Closed {
                stream: 0,
                recv_ns: vec![Some(WALL + 1000), Some(WALL + 1001), Some(WALL + 1002)]
            }]
        );
        // Stream 1 loses position 1; stream 2's first packet ends it.
        s.stamp(&repr(1, 0, 3), WALL + 2000, 2000).unwrap();
        s.stamp(&repr(1, 2, 3), WALL + 2002, 2002).unwrap();
        // The wall clock stepped back a second: the grace runs from the
        // monotonic 3000 all the same.
        s.stamp(&repr(2, 0, 3), WALL - 1_000_000_000, 3000).unwrap();
        assert!(s.close_due(3000 + CLOSE_GRACE_NS - 1).is_empty());
        assert_eq!(s.next_due_ns(), Some(3000 + CLOSE_GRACE_NS));
        let c = s.close_due(3000 + CLOSE_GRACE_NS);
        assert_eq!(
            c[0].recv_ns,
            vec![Some(WALL + 2000), None, Some(WALL + 2002)]
        );
        // A straggler of a closed stream keeps no stamp.
        s.stamp(&repr(1, 1, 3), WALL + 4000, 4000).unwrap();
        assert_eq!(s.late, 1);
    }

    #[test]
    fn a_stream_never_seen_closes_empty_when_the_sender_says_it_sent_it() {
        let mut s = StreamStamps::new(100);
        s.sent(0, 10).unwrap();
        let c = s.close_due(10 + CLOSE_GRACE_NS);
        assert_eq!(
            c,
            vec![Closed {
                stream: 0,
                recv_ns: vec![]
            }]
        );
        // Too far ahead is refused; past the stream limit too.
        assert!(s.sent(1 + MAX_OPEN_STREAMS, 0).is_err());
        assert_eq!(
            s.stamp(&repr(1, 0, 101), 0, 0),
            Err(DropReason::OverAnnounced)
        );
    }
}
