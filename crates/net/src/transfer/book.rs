//! The sending side's bookkeeping, pure: which bytes each data packet
//! carried, which must be sent again, how far the receiver holds the data
//! in order, and the digest of everything offered. The loop around it
//! owns the socket and the clock.

use std::collections::{BTreeMap, VecDeque};

use sha2::{Digest, Sha256};

/// The transfer's bytes: a seeded pseudo-random sequence, so any byte can
/// be made again for a retransmission without keeping it, and a receiver
/// that put a chunk at the wrong offset gets a different digest.
#[derive(Debug, Clone, Copy)]
pub struct DataSource {
    pub seed: u64,
}

impl DataSource {
    /// Fills `out` with the transfer's bytes from `offset` on.
    pub fn fill(&self, offset: u64, out: &mut [u8]) {
        let mut block = u64::MAX;
        let mut word = [0u8; 8];
        for (k, b) in out.iter_mut().enumerate() {
            let p = offset + k as u64;
            if p / 8 != block {
                block = p / 8;
                word =
                    splitmix64(self.seed ^ block.wrapping_mul(0x9e37_79b9_7f4a_7c15)).to_le_bytes();
            }
            *b = word[(p % 8) as usize];
        }
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A run of the transfer's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chunk {
    pub offset: u64,
    pub len: u16,
}

impl Chunk {
    pub fn end(&self) -> u64 {
        self.offset + self.len as u64
    }
}

/// What to send next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Next {
    pub chunk: Chunk,
    pub retransmission: bool,
}

#[derive(Debug, Clone)]
pub struct SendBook {
    source: DataSource,
    chunk_bytes: u16,
    /// Bytes the transfer offers in all (`None`: until told to stop).
    total: Option<u64>,
    window_bytes: u64,
    next_new: u64,
    delivered: u64,
    resend: VecDeque<Chunk>,
    /// Chunk carried by each (stream, index) awaiting its feedback.
    carried: BTreeMap<(u64, u32), Chunk>,
    hasher: Sha256,
    pub sent_bytes: u64,
    pub retransmitted_bytes: u64,
    pub lost_packets: u64,
    pub sent_packets: u64,
}

impl SendBook {
    pub fn new(
        source: DataSource,
        chunk_bytes: u16,
        total: Option<u64>,
        window_bytes: u64,
    ) -> Self {
        SendBook {
            source,
            chunk_bytes: chunk_bytes.max(1),
            total,
            window_bytes,
            next_new: 0,
            delivered: 0,
            resend: VecDeque::new(),
            carried: BTreeMap::new(),
            hasher: Sha256::new(),
            sent_bytes: 0,
            retransmitted_bytes: 0,
            lost_packets: 0,
            sent_packets: 0,
        }
    }

    /// No new bytes from now on (a `--time` transfer whose time is up).
    pub fn stop_offering(&mut self) {
        self.total = Some(self.next_new);
    }

    /// Bytes offered so far (all of them once the transfer is complete).
    pub fn offered(&self) -> u64 {
        self.next_new
    }

    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Whether the receiver holds every byte offered and nothing more will
    /// be.
    pub fn complete(&self) -> bool {
        self.total == Some(self.next_new) && self.delivered >= self.next_new
    }

    /// The next chunk to send: a lost one first, else new bytes within
    /// the receiver's window; `None` when there is nothing to send now.
    pub fn peek(&mut self) -> Option<Next> {
        while let Some(c) = self.resend.front() {
            if c.end() <= self.delivered {
                self.resend.pop_front();
                continue;
            }
            return Some(Next {
                chunk: *c,
                retransmission: true,
            });
        }
        let limit = self.total.unwrap_or(u64::MAX);
        if self.next_new >= limit || self.next_new >= self.delivered + self.window_bytes {
            return None;
        }
        let len = (self.chunk_bytes as u64)
            .min(limit - self.next_new)
            .min(self.delivered + self.window_bytes - self.next_new) as u16;
        Some(Next {
            chunk: Chunk {
                offset: self.next_new,
                len,
            },
            retransmission: false,
        })
    }

    /// `next` (from [`SendBook::peek`]) left as packet `index` of
    /// `stream`; `payload` gets its bytes.
    pub fn sent(&mut self, next: Next, stream: u64, index: u32, payload: &mut [u8]) {
        let c = next.chunk;
        self.source.fill(c.offset, &mut payload[..c.len as usize]);
        if next.retransmission {
            self.resend.pop_front();
            self.retransmitted_bytes += c.len as u64;
        } else {
            self.hasher.update(&payload[..c.len as usize]);
            self.next_new = c.end();
        }
        self.sent_bytes += c.len as u64;
        self.sent_packets += 1;
        self.carried.insert((stream, index), c);
    }

    /// The receiver's word on one packet: arrived, or lost (its chunk is
    /// sent again unless the receiver already holds it).
    pub fn feedback(&mut self, stream: u64, index: u32, arrived: bool) {
        let Some(c) = self.carried.remove(&(stream, index)) else {
            return;
        };
        if !arrived {
            self.lost_packets += 1;
            if c.end() > self.delivered {
                self.resend.push_back(c);
            }
        }
    }

    /// Packets of `stream` the receiver did not mention: it never saw them.
    pub fn unreported(&self, stream: u64) -> Vec<u32> {
        self.carried
            .range((stream, 0)..=(stream, u32::MAX))
            .map(|(&(_, i), _)| i)
            .collect()
    }

    /// The receiver holds `bytes` in order from the start.
    pub fn delivered_to(&mut self, bytes: u64) {
        self.delivered = self.delivered.max(bytes.min(self.next_new));
    }

    /// Packets awaiting feedback.
    pub fn in_flight(&self) -> usize {
        self.carried.len()
    }

    /// SHA-256 of every byte offered, in order.
    pub fn digest(&self) -> [u8; 32] {
        self.hasher.clone().finalize().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_source_gives_the_same_bytes_from_any_offset() {
        let s = DataSource { seed: 7 };
        let mut all = vec![0u8; 100];
        s.fill(0, &mut all);
        let mut part = vec![0u8; 37];
        s.fill(13, &mut part);
        assert_eq!(&all[13..50], &part[..]);
        let mut other = vec![0u8; 100];
        DataSource { seed: 8 }.fill(0, &mut other);
        assert_ne!(all, other);
    }

    #[test]
    fn a_lost_chunk_is_sent_again_before_new_bytes() {
        // 10-byte chunks of a 35-byte transfer, window 100.
        let mut b = SendBook::new(DataSource { seed: 1 }, 10, Some(35), 100);
        let mut buf = [0u8; 10];
        for i in 0..3 {
            let n = b.peek().unwrap();
            assert_eq!(n.chunk.offset, 10 * i as u64);
            assert!(!n.retransmission);
            b.sent(n, 0, i, &mut buf);
        }
        b.feedback(0, 0, true);
        b.feedback(0, 1, false);
        b.feedback(0, 2, true);
        b.delivered_to(10);
        assert_eq!(
            b.peek(),
            Some(Next {
                chunk: Chunk {
                    offset: 10,
                    len: 10
                },
                retransmission: true
            })
        );
        let n = b.peek().unwrap();
        b.sent(n, 1, 0, &mut buf);
        // Then the last 5 bytes.
        let n = b.peek().unwrap();
        assert_eq!(n.chunk, Chunk { offset: 30, len: 5 });
        b.sent(n, 1, 1, &mut buf);
        assert_eq!(b.peek(), None);
        assert!(!b.complete());
        b.feedback(1, 0, true);
        b.feedback(1, 1, true);
        b.delivered_to(35);
        assert!(b.complete());
        assert_eq!(b.retransmitted_bytes, 10);
        assert_eq!(b.sent_bytes, 45);
        assert_eq!(b.lost_packets, 1);
        // The digest covers each offered byte once, in order.
        let mut all = vec![0u8; 35];
        DataSource { seed: 1 }.fill(0, &mut all);
        let want: [u8; 32] = Sha256::digest(&all).into();
        assert_eq!(b.digest(), want);
    }

    #[test]
    fn the_window_holds_new_bytes_back_until_delivery() {
        let mut b = SendBook::new(DataSource { seed: 1 }, 10, None, 25);
        let mut buf = [0u8; 10];
        for i in 0..3 {
            let n = b.peek().unwrap();
            b.sent(n, 0, i, &mut buf);
        }
        // 25 bytes out: the third chunk was cut to 5.
        assert_eq!(b.offered(), 25);
        assert_eq!(b.peek(), None);
        b.delivered_to(10);
        assert_eq!(
            b.peek().unwrap().chunk,
            Chunk {
                offset: 25,
                len: 10
            }
        );
        // A loss already delivered (a late arrival) is not sent again.
        b.feedback(0, 0, false);
        assert!(!b.peek().unwrap().retransmission);
    }
}
