//! TWAMP-light test packets (RFC 5357, unauthenticated mode) with
//! tightlink's fields at the start of the sender packet's padding.
//!
//! Sender packet (section 4.1.2), all big-endian:
//!
//! ```text
//!  0..4    sequence number          (per session, counts every probe)
//!  4..12   timestamp (NTP format)   (the scheduled send time)
//! 12..14   error estimate
//! 14..18   "TLNK" magic             -- tightlink fields, in the padding --
//! 18       version (1)
//! 19       flags (bit 0: warm-up packet, not part of the stream)
//! 20..28   session id
//! 28..32   stream id
//! 32..36   position in the stream (0-based)
//! 36..40   packets in the stream
//! 40..48   schedule offset, ns from the stream's first packet
//! 48..     padding (zeros) up to the probe size
//! ```
//!
//! A reflector's reply (section 4.2.1) puts its own 41-byte header first
//! (its sequence number, transmit timestamp and error estimate, MBZ, the
//! receive timestamp, then the sender's sequence number, timestamp, error
//! estimate, MBZ and TTL); reflectors that return the sender's padding
//! (RFC 6038 symmetric size) carry our fields at offset 41.

use crate::ntp::{ErrorEstimate, NtpTimestamp};
use crate::DropReason;

/// Byte ranges of the sender packet.
pub mod field {
    use std::ops::Range;
    pub const SEQUENCE: Range<usize> = 0..4;
    pub const TIMESTAMP: Range<usize> = 4..12;
    pub const ERROR_ESTIMATE: Range<usize> = 12..14;
    pub const MAGIC: Range<usize> = 14..18;
    pub const VERSION: usize = 18;
    pub const FLAGS: usize = 19;
    pub const SESSION: Range<usize> = 20..28;
    pub const STREAM: Range<usize> = 28..32;
    pub const POSITION: Range<usize> = 32..36;
    pub const STREAM_LEN: Range<usize> = 36..40;
    pub const OFFSET: Range<usize> = 40..48;
    /// The sender header with tightlink's fields.
    pub const HEADER_LEN: usize = 48;

    /// Byte ranges of the reflector packet (section 4.2.1).
    pub mod reflector {
        use std::ops::Range;
        pub const SEQUENCE: Range<usize> = 0..4;
        pub const TIMESTAMP: Range<usize> = 4..12;
        pub const ERROR_ESTIMATE: Range<usize> = 12..14;
        pub const RECEIVE_TIMESTAMP: Range<usize> = 16..24;
        pub const SENDER_SEQUENCE: Range<usize> = 24..28;
        pub const SENDER_TIMESTAMP: Range<usize> = 28..36;
        pub const SENDER_ERROR_ESTIMATE: Range<usize> = 36..38;
        pub const SENDER_TTL: usize = 40;
        pub const HEADER_LEN: usize = 41;
    }
}

pub const MAGIC: [u8; 4] = *b"TLNK";
pub const VERSION: u8 = 1;
pub const FLAG_WARMUP: u8 = 0x01;

fn be32(b: &[u8]) -> u32 {
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn be64(b: &[u8]) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    u64::from_be_bytes(a)
}

fn ntp(b: &[u8]) -> NtpTimestamp {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[..8]);
    NtpTimestamp::from_bytes(a)
}

/// A view of a TWAMP-light sender packet carrying tightlink's fields.
#[derive(Debug, Clone)]
pub struct SenderPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> SenderPacket<T> {
    pub fn new_unchecked(buffer: T) -> Self {
        SenderPacket { buffer }
    }

    /// A view after [`Self::check_len`]: no accessor can panic.
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        let p = Self::new_unchecked(buffer);
        p.check_len()?;
        Ok(p)
    }

    pub fn check_len(&self) -> Result<(), DropReason> {
        if self.buffer.as_ref().len() < field::HEADER_LEN {
            Err(DropReason::TooShort)
        } else {
            Ok(())
        }
    }

    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn sequence(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::SEQUENCE])
    }
    pub fn timestamp(&self) -> NtpTimestamp {
        ntp(&self.buffer.as_ref()[field::TIMESTAMP])
    }
    pub fn error_estimate(&self) -> ErrorEstimate {
        let b = &self.buffer.as_ref()[field::ERROR_ESTIMATE];
        ErrorEstimate::from_u16(u16::from_be_bytes([b[0], b[1]]))
    }
    pub fn magic(&self) -> [u8; 4] {
        let b = &self.buffer.as_ref()[field::MAGIC];
        [b[0], b[1], b[2], b[3]]
    }
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }
    pub fn session(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::SESSION])
    }
    pub fn stream(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::STREAM])
    }
    pub fn position(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::POSITION])
    }
    pub fn stream_len(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::STREAM_LEN])
    }
    pub fn offset_ns(&self) -> u64 {
        be64(&self.buffer.as_ref()[field::OFFSET])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SenderPacket<T> {
    pub fn set_sequence(&mut self, v: u32) {
        self.buffer.as_mut()[field::SEQUENCE].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_timestamp(&mut self, t: NtpTimestamp) {
        self.buffer.as_mut()[field::TIMESTAMP].copy_from_slice(&t.to_bytes());
    }
    pub fn set_error_estimate(&mut self, e: ErrorEstimate) {
        self.buffer.as_mut()[field::ERROR_ESTIMATE].copy_from_slice(&e.to_u16().to_be_bytes());
    }
    pub fn set_tightlink_header(&mut self, flags: u8) {
        let b = self.buffer.as_mut();
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = VERSION;
        b[field::FLAGS] = flags;
    }
    pub fn set_session(&mut self, v: u64) {
        self.buffer.as_mut()[field::SESSION].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_stream(&mut self, v: u32) {
        self.buffer.as_mut()[field::STREAM].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_position(&mut self, v: u32) {
        self.buffer.as_mut()[field::POSITION].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_stream_len(&mut self, v: u32) {
        self.buffer.as_mut()[field::STREAM_LEN].copy_from_slice(&v.to_be_bytes());
    }
    pub fn set_offset_ns(&mut self, v: u64) {
        self.buffer.as_mut()[field::OFFSET].copy_from_slice(&v.to_be_bytes());
    }
}

/// What a tightlink probe says about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeRepr {
    pub sequence: u32,
    /// Scheduled send time.
    pub timestamp: NtpTimestamp,
    pub error_estimate: ErrorEstimate,
    pub warmup: bool,
    pub session: u64,
    pub stream: u32,
    pub position: u32,
    pub stream_len: u32,
    pub offset_ns: u64,
}

impl ProbeRepr {
    /// Parses and validates a sender packet: length, magic, version, and
    /// the position inside a non-empty stream.
    pub fn parse<T: AsRef<[u8]>>(p: &SenderPacket<T>) -> Result<Self, DropReason> {
        p.check_len()?;
        if p.magic() != MAGIC {
            return Err(DropReason::NotTightlink);
        }
        if p.version() != VERSION {
            return Err(DropReason::UnknownVersion);
        }
        if p.flags() & !FLAG_WARMUP != 0 {
            return Err(DropReason::Malformed);
        }
        let (position, stream_len) = (p.position(), p.stream_len());
        if stream_len == 0 || position >= stream_len {
            return Err(DropReason::Malformed);
        }
        Ok(ProbeRepr {
            sequence: p.sequence(),
            timestamp: p.timestamp(),
            error_estimate: p.error_estimate(),
            warmup: p.flags() & FLAG_WARMUP != 0,
            session: p.session(),
            stream: p.stream(),
            position,
            stream_len,
            offset_ns: p.offset_ns(),
        })
    }

    /// Bytes the header needs; a probe is padded beyond it to its size.
    pub const fn buffer_len() -> usize {
        field::HEADER_LEN
    }

    /// Writes the header into `p` (whose buffer is at least
    /// [`Self::buffer_len`] long); the padding after it is left as is.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SenderPacket<T>) {
        p.set_sequence(self.sequence);
        p.set_timestamp(self.timestamp);
        p.set_error_estimate(self.error_estimate);
        p.set_tightlink_header(if self.warmup { FLAG_WARMUP } else { 0 });
        p.set_session(self.session);
        p.set_stream(self.stream);
        p.set_position(self.position);
        p.set_stream_len(self.stream_len);
        p.set_offset_ns(self.offset_ns);
    }
}

/// A view of a TWAMP-light reflector packet.
#[derive(Debug, Clone)]
pub struct ReflectorPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ReflectorPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < field::reflector::HEADER_LEN {
            return Err(DropReason::TooShort);
        }
        Ok(ReflectorPacket { buffer })
    }

    pub fn sequence(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::reflector::SEQUENCE])
    }
    pub fn timestamp(&self) -> NtpTimestamp {
        ntp(&self.buffer.as_ref()[field::reflector::TIMESTAMP])
    }
    pub fn receive_timestamp(&self) -> NtpTimestamp {
        ntp(&self.buffer.as_ref()[field::reflector::RECEIVE_TIMESTAMP])
    }
    pub fn sender_sequence(&self) -> u32 {
        be32(&self.buffer.as_ref()[field::reflector::SENDER_SEQUENCE])
    }
    pub fn sender_timestamp(&self) -> NtpTimestamp {
        ntp(&self.buffer.as_ref()[field::reflector::SENDER_TIMESTAMP])
    }
    pub fn sender_ttl(&self) -> u8 {
        self.buffer.as_ref()[field::reflector::SENDER_TTL]
    }
    /// The sender's tightlink fields, when the reflector returned the
    /// sender's padding after its own header (RFC 6038 symmetric size).
    pub fn reflected_probe(&self) -> Result<ProbeRepr, DropReason> {
        let b = self.buffer.as_ref();
        // Reuse the sender layout: our fields start at 14 in the sender
        // packet and at 41 here, so view from 41 - 14 = 27.
        let start = field::reflector::HEADER_LEN - field::MAGIC.start;
        let view = SenderPacket::new_checked(&b[start..])?;
        let mut probe = ProbeRepr::parse(&view)?;
        probe.sequence = self.sender_sequence();
        probe.timestamp = self.sender_timestamp();
        let e = &b[field::reflector::SENDER_ERROR_ESTIMATE];
        probe.error_estimate = ErrorEstimate::from_u16(u16::from_be_bytes([e[0], e[1]]));
        Ok(probe)
    }
}

/// What a reflector reply carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReflectorRepr {
    pub sequence: u32,
    pub timestamp: NtpTimestamp,
    pub error_estimate: ErrorEstimate,
    pub receive_timestamp: NtpTimestamp,
    pub sender_sequence: u32,
    pub sender_timestamp: NtpTimestamp,
    pub sender_error_estimate: ErrorEstimate,
    pub sender_ttl: u8,
}

impl ReflectorRepr {
    pub const fn buffer_len() -> usize {
        field::reflector::HEADER_LEN
    }

    /// Writes the reflector header (MBZ fields zeroed) into `buf`, which
    /// must be at least [`Self::buffer_len`] long.
    pub fn emit(&self, buf: &mut [u8]) {
        use field::reflector as f;
        buf[f::SEQUENCE].copy_from_slice(&self.sequence.to_be_bytes());
        buf[f::TIMESTAMP].copy_from_slice(&self.timestamp.to_bytes());
        buf[f::ERROR_ESTIMATE].copy_from_slice(&self.error_estimate.to_u16().to_be_bytes());
        buf[14..16].fill(0);
        buf[f::RECEIVE_TIMESTAMP].copy_from_slice(&self.receive_timestamp.to_bytes());
        buf[f::SENDER_SEQUENCE].copy_from_slice(&self.sender_sequence.to_be_bytes());
        buf[f::SENDER_TIMESTAMP].copy_from_slice(&self.sender_timestamp.to_bytes());
        buf[f::SENDER_ERROR_ESTIMATE]
            .copy_from_slice(&self.sender_error_estimate.to_u16().to_be_bytes());
        buf[38..40].fill(0);
        buf[f::SENDER_TTL] = self.sender_ttl;
    }

    pub fn parse<T: AsRef<[u8]>>(p: &ReflectorPacket<T>) -> Self {
        let b = p.buffer.as_ref();
        let e = |r: std::ops::Range<usize>| {
            ErrorEstimate::from_u16(u16::from_be_bytes([b[r.start], b[r.start + 1]]))
        };
        ReflectorRepr {
            sequence: p.sequence(),
            timestamp: p.timestamp(),
            error_estimate: e(field::reflector::ERROR_ESTIMATE),
            receive_timestamp: p.receive_timestamp(),
            sender_sequence: p.sender_sequence(),
            sender_timestamp: p.sender_timestamp(),
            sender_error_estimate: e(field::reflector::SENDER_ERROR_ESTIMATE),
            sender_ttl: p.sender_ttl(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe() -> ProbeRepr {
        ProbeRepr {
            sequence: 0x0102_0304,
            timestamp: NtpTimestamp {
                seconds: 0x83AA_7E81,
                fraction: 0x8000_0000,
            },
            error_estimate: ErrorEstimate::from_u16(0x8587),
            warmup: false,
            session: 0x1122_3344_5566_7788,
            stream: 7,
            position: 63,
            stream_len: 64,
            offset_ns: 756_000,
        }
    }

    /// The bytes worked out by hand from the layout in the module docs.
    #[test]
    fn emit_gives_the_documented_bytes() {
        let mut buf = [0xAAu8; 60];
        probe().emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        let want: [u8; 48] = [
            1, 2, 3, 4, // sequence
            0x83, 0xAA, 0x7E, 0x81, 0x80, 0, 0, 0, // timestamp
            0x85, 0x87, // error estimate
            b'T', b'L', b'N', b'K', 1, 0, // magic, version, flags
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // session
            0, 0, 0, 7, // stream
            0, 0, 0, 63, // position
            0, 0, 0, 64, // stream length
            0, 0, 0, 0, 0, 0x0B, 0x89, 0x20, // offset 756 000 ns = 0x0B8920
        ];
        assert_eq!(&buf[..48], &want);
        // Padding beyond the header is left alone.
        assert!(buf[48..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn parse_reads_back_what_emit_wrote() {
        let mut buf = [0u8; 64];
        let mut p = SenderPacket::new_checked(&mut buf[..]).unwrap();
        let mut r = probe();
        r.warmup = true;
        r.emit(&mut p);
        assert_eq!(ProbeRepr::parse(&p), Ok(r));
    }

    #[test]
    fn bad_packets_get_their_reason() {
        let mut buf = [0u8; 64];
        probe().emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        assert_eq!(
            SenderPacket::new_checked(&buf[..47]).unwrap_err(),
            DropReason::TooShort
        );
        let check = |mutate: &dyn Fn(&mut [u8]), want: DropReason| {
            let mut b = buf;
            mutate(&mut b);
            let p = SenderPacket::new_checked(&b[..]).unwrap();
            assert_eq!(ProbeRepr::parse(&p), Err(want));
        };
        check(&|b| b[14] = b'X', DropReason::NotTightlink);
        check(&|b| b[18] = 2, DropReason::UnknownVersion);
        check(&|b| b[19] = 0x80, DropReason::Malformed);
        check(&|b| b[39] = 63, DropReason::Malformed); // position 63 of 63
        check(&|b| b[36..40].fill(0), DropReason::Malformed); // empty stream
    }

    /// A reflector reply, by hand, with the sender's packet (our fields
    /// included) returned after the 41-byte header.
    #[test]
    fn reflector_reply_round_trips_and_carries_our_fields() {
        let mut sender = [0u8; 64];
        probe().emit(&mut SenderPacket::new_unchecked(&mut sender[..]));
        let refl = ReflectorRepr {
            sequence: 9,
            timestamp: NtpTimestamp {
                seconds: 0x83AA_7E82,
                fraction: 1,
            },
            error_estimate: ErrorEstimate::from_u16(0x0001),
            receive_timestamp: NtpTimestamp {
                seconds: 0x83AA_7E82,
                fraction: 0,
            },
            sender_sequence: 0x0102_0304,
            sender_timestamp: probe().timestamp,
            sender_error_estimate: probe().error_estimate,
            sender_ttl: 255,
        };
        let mut reply = vec![0u8; 41 + 64 - 14];
        refl.emit(&mut reply);
        reply[41..].copy_from_slice(&sender[14..]);
        assert_eq!(&reply[24..28], &[1, 2, 3, 4]);
        assert_eq!(reply[40], 255);
        let view = ReflectorPacket::new_checked(&reply[..]).unwrap();
        assert_eq!(ReflectorRepr::parse(&view), refl);
        assert_eq!(view.reflected_probe(), Ok(probe()));
        // A reflector that does not return the padding: a clear reason.
        let short = ReflectorPacket::new_checked(&reply[..41]).unwrap();
        assert_eq!(short.reflected_probe(), Err(DropReason::TooShort));
        assert_eq!(
            ReflectorPacket::new_checked(&reply[..40]).unwrap_err(),
            DropReason::TooShort
        );
    }
}
