//! Probe packets as STAMP / TWAMP-light test packets, and the replies of
//! the reflectors that answer them.
//!
//! A sender packet is an unauthenticated STAMP test packet (RFC 8762
//! section 4.2.1, with RFC 8972's SSID) that carries tightlink's fields
//! in an Extra Padding TLV (RFC 8972 section 4.1). To an RFC 5357
//! TWAMP-light reflector everything after byte 14 is padding, so one
//! layout serves both kinds of reflector. All big-endian:
//!
//! ```text
//!  0..4    sequence number          (per session, counts every probe)
//!  4..12   timestamp (NTP format)   (the scheduled send time)
//! 12..14   error estimate
//! 14..16   SSID (RFC 8972)
//! 16..44   MBZ: zero, as STAMP wants them
//! 44       TLV flags (U, M, I; a sender writes 0)
//! 45       TLV type 1: Extra Padding
//! 46..48   TLV length: every byte after the TLV header
//! 48..52   "TLNK" magic             -- tightlink fields, in the TLV value --
//! 52       version (2)
//! 53       flags (bit 0: warm-up packet, not part of the stream;
//!          bit 1: hold the train and send it back at its schedule;
//!          bit 2: set by a reflector that did so)
//! 54..62   session id
//! 62..66   stream id
//! 66..70   position in the stream (0-based)
//! 70..74   packets in the stream
//! 74..82   schedule offset, ns from the stream's first packet
//! 82..     zeros up to the probe size
//! ```
//!
//! A reply starts with the reflector's header: its sequence number,
//! transmit timestamp and error estimate, then (STAMP) the SSID or (RFC
//! 5357) MBZ, the receive timestamp, the sender's sequence number,
//! timestamp and error estimate (byte 38), MBZ, the sender's TTL (byte
//! 40). A STAMP reflector echoes the TLVs from byte 44 (our fields at
//! 48); an RFC 6038 TWAMP-light reflector returns the sender's bytes from
//! 14 after its 41-byte header (our fields at 75); some reflectors stop
//! at byte 38 and echo nothing.

use crate::ntp::{ErrorEstimate, NtpTimestamp};
use crate::DropReason;

/// Byte ranges of the sender packet.
pub mod field {
    use std::ops::Range;
    pub const SEQUENCE: Range<usize> = 0..4;
    pub const TIMESTAMP: Range<usize> = 4..12;
    pub const ERROR_ESTIMATE: Range<usize> = 12..14;
    pub const SSID: Range<usize> = 14..16;
    /// Zero in an unauthenticated STAMP packet.
    pub const MBZ: Range<usize> = 16..44;
    /// Where STAMP TLVs begin, in sender and reflector packets alike.
    pub const TLVS: usize = 44;
    pub const TLV_FLAGS: usize = 44;
    pub const TLV_TYPE: usize = 45;
    pub const TLV_LENGTH: Range<usize> = 46..48;
    pub const MAGIC: Range<usize> = 48..52;
    pub const VERSION: usize = 52;
    pub const FLAGS: usize = 53;
    pub const SESSION: Range<usize> = 54..62;
    pub const STREAM: Range<usize> = 62..66;
    pub const POSITION: Range<usize> = 66..70;
    pub const STREAM_LEN: Range<usize> = 70..74;
    pub const OFFSET: Range<usize> = 74..82;
    /// The sender header with tightlink's fields.
    pub const HEADER_LEN: usize = 82;
    /// The smallest test packet RFC 5357 allows (unauthenticated).
    pub const TWAMP_MIN_LEN: usize = 14;
    /// STAMP's base packet, sender and reflector alike.
    pub const STAMP_BASE_LEN: usize = 44;

    /// Byte ranges of the reflector packet (RFC 5357 section 4.2.1,
    /// RFC 8762 section 4.3.1).
    pub mod reflector {
        use std::ops::Range;
        pub const SEQUENCE: Range<usize> = 0..4;
        pub const TIMESTAMP: Range<usize> = 4..12;
        pub const ERROR_ESTIMATE: Range<usize> = 12..14;
        /// STAMP's SSID; MBZ in RFC 5357.
        pub const SSID: Range<usize> = 14..16;
        pub const RECEIVE_TIMESTAMP: Range<usize> = 16..24;
        pub const SENDER_SEQUENCE: Range<usize> = 24..28;
        pub const SENDER_TIMESTAMP: Range<usize> = 28..36;
        pub const SENDER_ERROR_ESTIMATE: Range<usize> = 36..38;
        pub const SENDER_TTL: usize = 40;
        /// What a reply needs for its stamps: reflectors that drop the
        /// trailing MBZ and TTL send this much.
        pub const MIN_LEN: usize = 38;
        /// RFC 5357's reflector header; padding follows it.
        pub const HEADER_LEN: usize = 41;
        /// Where an RFC 6038 reflector puts the sender's byte 14.
        pub const PADDING: usize = 41;
    }
}

pub const MAGIC: [u8; 4] = *b"TLNK";
pub const VERSION: u8 = 2;
pub const FLAG_WARMUP: u8 = 0x01;
/// Asks a `tightlink reflector` to hold the train and send the replies
/// back at the train's own schedule (tightlink's extension, in the manner
/// of RFC 6802's reflector that returns a whole train): the replies then
/// measure the path back too.
pub const FLAG_HOLD: u8 = 0x02;
/// Written into the echoed TLV by a reflector that held the train.
pub const FLAG_HELD: u8 = 0x04;
/// STAMP TLV flag bits (RFC 8972 section 4).
pub const TLV_UNRECOGNIZED: u8 = 0x80;
pub const TLV_MALFORMED: u8 = 0x40;
/// Set by a reflector on every TLV it returns when their HMAC TLV failed.
pub const TLV_INTEGRITY_FAILED: u8 = 0x20;
/// STAMP TLV type of the Extra Padding TLV (RFC 8972 section 4.1).
pub const TLV_EXTRA_PADDING: u8 = 1;
/// Bytes of a STAMP TLV header.
pub const TLV_HEADER_LEN: usize = 4;

fn be16(b: &[u8]) -> u16 {
    u16::from_be_bytes([b[0], b[1]])
}

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

/// A view of a sender packet carrying tightlink's fields.
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
        ErrorEstimate::from_u16(be16(&self.buffer.as_ref()[field::ERROR_ESTIMATE]))
    }
    pub fn ssid(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::SSID])
    }
    /// Whether bytes 16-43 are zero, as STAMP wants them.
    pub fn mbz_is_zero(&self) -> bool {
        self.buffer.as_ref()[field::MBZ].iter().all(|&b| b == 0)
    }
    pub fn tlv_type(&self) -> u8 {
        self.buffer.as_ref()[field::TLV_TYPE]
    }
    pub fn tlv_length(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::TLV_LENGTH])
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
    pub fn set_ssid(&mut self, v: u16) {
        self.buffer.as_mut()[field::SSID].copy_from_slice(&v.to_be_bytes());
    }
    /// Zeroes bytes 16-43 and writes the Extra Padding TLV's header
    /// (covering the rest of the buffer), the magic, version and flags.
    pub fn set_tightlink_header(&mut self, flags: u8) {
        let b = self.buffer.as_mut();
        let tlv_len = (b.len() - field::TLVS - TLV_HEADER_LEN).min(u16::MAX as usize) as u16;
        b[field::MBZ].fill(0);
        b[field::TLV_FLAGS] = 0;
        b[field::TLV_TYPE] = TLV_EXTRA_PADDING;
        b[field::TLV_LENGTH].copy_from_slice(&tlv_len.to_be_bytes());
        b[field::MAGIC].copy_from_slice(&MAGIC);
        b[field::VERSION] = VERSION;
        b[field::FLAGS] = flags;
    }
    /// Sets flag bits (after [`Self::set_tightlink_header`]).
    pub fn set_flag(&mut self, bit: u8) {
        self.buffer.as_mut()[field::FLAGS] |= bit;
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
    /// Parses and validates a sender packet: length, the Extra Padding
    /// TLV that holds our fields, magic, version, and the position inside
    /// a non-empty stream.
    pub fn parse<T: AsRef<[u8]>>(p: &SenderPacket<T>) -> Result<Self, DropReason> {
        p.check_len()?;
        if p.magic() != MAGIC {
            return Err(DropReason::NotTightlink);
        }
        if p.version() != VERSION {
            return Err(DropReason::UnknownVersion);
        }
        let fields = (field::HEADER_LEN - field::MAGIC.start) as u16;
        if p.tlv_type() != TLV_EXTRA_PADDING || p.tlv_length() < fields {
            return Err(DropReason::Malformed);
        }
        if p.flags() & !(FLAG_WARMUP | FLAG_HOLD | FLAG_HELD) != 0 {
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
    /// [`Self::buffer_len`] long and as long as the packet: the TLV's
    /// length covers it); the padding after the header is left as is.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, p: &mut SenderPacket<T>) {
        p.set_sequence(self.sequence);
        p.set_timestamp(self.timestamp);
        p.set_error_estimate(self.error_estimate);
        p.set_ssid(ssid_of(self.session));
        p.set_tightlink_header(if self.warmup { FLAG_WARMUP } else { 0 });
        p.set_session(self.session);
        p.set_stream(self.stream);
        p.set_position(self.position);
        p.set_stream_len(self.stream_len);
        p.set_offset_ns(self.offset_ns);
    }
}

/// The STAMP session-sender identifier a session's probes carry: the
/// session id's low 16 bits, never 0.
pub fn ssid_of(session: u64) -> u16 {
    (session as u16).max(1)
}

/// A view of a reflector packet: STAMP or TWAMP-light, 38 bytes or more.
#[derive(Debug, Clone)]
pub struct ReflectorPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ReflectorPacket<T> {
    pub fn new_checked(buffer: T) -> Result<Self, DropReason> {
        if buffer.as_ref().len() < field::reflector::MIN_LEN {
            return Err(DropReason::TooShort);
        }
        Ok(ReflectorPacket { buffer })
    }

    pub fn len(&self) -> usize {
        self.buffer.as_ref().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
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
    pub fn transmit_equals_receive(&self) -> bool {
        let b = self.buffer.as_ref();
        b[field::reflector::TIMESTAMP] == b[field::reflector::RECEIVE_TIMESTAMP]
    }
    pub fn ssid(&self) -> u16 {
        be16(&self.buffer.as_ref()[field::reflector::SSID])
    }
    /// The sender's TTL, when the reply is long enough to carry it.
    pub fn sender_ttl(&self) -> Option<u8> {
        self.buffer
            .as_ref()
            .get(field::reflector::SENDER_TTL)
            .copied()
    }
    /// Our flags as the reflector echoed them (where it echoed them).
    pub fn reflected_flags(&self) -> Option<u8> {
        let start = self.echo()?.view_start();
        self.buffer.as_ref().get(start + field::FLAGS).copied()
    }
    /// Where the sender's fields came back, if they did: echoed as STAMP
    /// TLVs, or as RFC 6038 padding after the 41-byte header.
    pub fn echo(&self) -> Option<Echo> {
        [Echo::StampTlvs, Echo::TwampPadding]
            .into_iter()
            .find(|&e| self.reflected_probe_at(e).is_ok())
    }
    /// The sender's tightlink fields, wherever the reflector returned them.
    pub fn reflected_probe(&self) -> Result<ProbeRepr, DropReason> {
        self.reflected_probe_at(Echo::StampTlvs)
            .or_else(|_| self.reflected_probe_at(Echo::TwampPadding))
    }
    fn reflected_probe_at(&self, echo: Echo) -> Result<ProbeRepr, DropReason> {
        let b = self.buffer.as_ref();
        let view = SenderPacket::new_checked(b.get(echo.view_start()..).unwrap_or(&[]))?;
        let mut probe = ProbeRepr::parse(&view)?;
        probe.sequence = self.sender_sequence();
        probe.timestamp = self.sender_timestamp();
        let e = &b[field::reflector::SENDER_ERROR_ESTIMATE];
        probe.error_estimate = ErrorEstimate::from_u16(u16::from_be_bytes([e[0], e[1]]));
        Ok(probe)
    }
}

/// Where a reflector returned the sender's bytes after its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Echo {
    /// TLVs from byte 44, at the sender's offsets (STAMP, RFC 8972).
    StampTlvs,
    /// The sender's bytes from 14 on, after the 41-byte header (RFC 6038).
    TwampPadding,
}

impl Echo {
    /// Where a sender-layout view of the reply starts: a STAMP reflector
    /// keeps our offsets; an RFC 6038 one moves the sender's byte 14 to
    /// 41, so view from 27.
    pub fn view_start(self) -> usize {
        match self {
            Echo::StampTlvs => 0,
            Echo::TwampPadding => field::reflector::PADDING - field::SSID.start,
        }
    }
}

/// What a reflector reply carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReflectorRepr {
    pub sequence: u32,
    pub timestamp: NtpTimestamp,
    pub error_estimate: ErrorEstimate,
    /// STAMP's SSID (bytes 14-15); zero (MBZ) in an RFC 5357 reply.
    pub ssid: u16,
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
        buf[f::SSID].copy_from_slice(&self.ssid.to_be_bytes());
        buf[f::RECEIVE_TIMESTAMP].copy_from_slice(&self.receive_timestamp.to_bytes());
        buf[f::SENDER_SEQUENCE].copy_from_slice(&self.sender_sequence.to_be_bytes());
        buf[f::SENDER_TIMESTAMP].copy_from_slice(&self.sender_timestamp.to_bytes());
        buf[f::SENDER_ERROR_ESTIMATE]
            .copy_from_slice(&self.sender_error_estimate.to_u16().to_be_bytes());
        buf[38..40].fill(0);
        buf[f::SENDER_TTL] = self.sender_ttl;
    }

    /// The whole header; a 38-40-byte reply has no TTL: `TooShort`.
    pub fn parse<T: AsRef<[u8]>>(p: &ReflectorPacket<T>) -> Result<Self, DropReason> {
        let b = p.buffer.as_ref();
        let sender_ttl = p.sender_ttl().ok_or(DropReason::TooShort)?;
        let e = |r: std::ops::Range<usize>| ErrorEstimate::from_u16(be16(&b[r]));
        Ok(ReflectorRepr {
            sequence: p.sequence(),
            timestamp: p.timestamp(),
            error_estimate: e(field::reflector::ERROR_ESTIMATE),
            ssid: p.ssid(),
            receive_timestamp: p.receive_timestamp(),
            sender_sequence: p.sender_sequence(),
            sender_timestamp: p.sender_timestamp(),
            sender_error_estimate: e(field::reflector::SENDER_ERROR_ESTIMATE),
            sender_ttl,
        })
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

    /// The bytes worked out by hand from the layout in the module docs:
    /// a 100-byte probe, so the TLV covers 100 - 48 = 52 bytes.
    #[test]
    fn emit_gives_the_documented_bytes() {
        let mut buf = [0xAAu8; 100];
        probe().emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        let mut want = vec![
            1, 2, 3, 4, // sequence
            0x83, 0xAA, 0x7E, 0x81, 0x80, 0, 0, 0, // timestamp
            0x85, 0x87, // error estimate
            0x77, 0x88, // SSID: the session's low 16 bits
        ];
        want.extend([0u8; 28]); // MBZ, 16..44
        want.extend([
            0, 1, 0, 52, // TLV: flags 0, Extra Padding, length 52
            b'T', b'L', b'N', b'K', 2, 0, // magic, version, flags
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // session
            0, 0, 0, 7, // stream
            0, 0, 0, 63, // position
            0, 0, 0, 64, // stream length
            0, 0, 0, 0, 0, 0x0B, 0x89, 0x20, // offset 756 000 ns = 0x0B8920
        ]);
        assert_eq!(want.len(), 82);
        assert_eq!(&buf[..82], &want[..]);
        // Padding beyond the header is left alone.
        assert!(buf[82..].iter().all(|&b| b == 0xAA));
        // A session whose low bits are zero still gets a non-zero SSID.
        assert_eq!(ssid_of(0x1_0000), 1);
    }

    #[test]
    fn parse_reads_back_what_emit_wrote() {
        let mut buf = [0u8; 100];
        let mut p = SenderPacket::new_checked(&mut buf[..]).unwrap();
        let mut r = probe();
        r.warmup = true;
        r.emit(&mut p);
        assert_eq!(ProbeRepr::parse(&p), Ok(r));
    }

    #[test]
    fn bad_packets_get_their_reason() {
        let mut buf = [0u8; 100];
        probe().emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        assert_eq!(
            SenderPacket::new_checked(&buf[..81]).unwrap_err(),
            DropReason::TooShort
        );
        let check = |mutate: &dyn Fn(&mut [u8]), want: DropReason| {
            let mut b = buf;
            mutate(&mut b);
            let p = SenderPacket::new_checked(&b[..]).unwrap();
            assert_eq!(ProbeRepr::parse(&p), Err(want));
        };
        check(&|b| b[48] = b'X', DropReason::NotTightlink);
        check(&|b| b[52] = 1, DropReason::UnknownVersion);
        check(&|b| b[53] = 0x80, DropReason::Malformed);
        check(&|b| b[53] = 0x08, DropReason::Malformed);
        check(&|b| b[45] = 2, DropReason::Malformed); // not Extra Padding
        check(
            &|b| b[46..48].copy_from_slice(&[0, 33]),
            DropReason::Malformed,
        );
        check(&|b| b[73] = 63, DropReason::Malformed); // position 63 of 63
        check(&|b| b[70..74].fill(0), DropReason::Malformed); // empty stream
    }

    fn reflector_header() -> ReflectorRepr {
        ReflectorRepr {
            sequence: 9,
            timestamp: NtpTimestamp {
                seconds: 0x83AA_7E82,
                fraction: 1,
            },
            error_estimate: ErrorEstimate::from_u16(0x0001),
            ssid: 0,
            receive_timestamp: NtpTimestamp {
                seconds: 0x83AA_7E82,
                fraction: 0,
            },
            sender_sequence: 0x0102_0304,
            sender_timestamp: probe().timestamp,
            sender_error_estimate: probe().error_estimate,
            sender_ttl: 255,
        }
    }

    /// An RFC 6038 reply, by hand: the sender's packet from byte 14 after
    /// the 41-byte header, so our magic lands at 41 + 48 - 14 = 75.
    #[test]
    fn twamp_reply_round_trips_and_carries_our_fields() {
        let mut sender = [0u8; 128];
        probe().emit(&mut SenderPacket::new_unchecked(&mut sender[..]));
        let refl = reflector_header();
        let mut reply = vec![0u8; 128];
        refl.emit(&mut reply);
        reply[41..].copy_from_slice(&sender[14..128 - 27]);
        assert_eq!(&reply[24..28], &[1, 2, 3, 4]);
        assert_eq!(reply[40], 255);
        assert_eq!(&reply[75..79], b"TLNK");
        let view = ReflectorPacket::new_checked(&reply[..]).unwrap();
        assert_eq!(ReflectorRepr::parse(&view), Ok(refl));
        assert_eq!(view.reflected_probe(), Ok(probe()));
        assert_eq!(view.echo(), Some(Echo::TwampPadding));
        // A reflector that does not return the padding: a clear reason.
        let short = ReflectorPacket::new_checked(&reply[..41]).unwrap();
        assert_eq!(short.reflected_probe(), Err(DropReason::TooShort));
        assert_eq!(short.echo(), None);
    }

    /// A STAMP reply, by hand: SSID at 14, MBZ 41-43, the TLVs echoed at
    /// the sender's offsets (our magic at 48).
    #[test]
    fn stamp_reply_carries_the_ssid_and_our_tlv() {
        let mut sender = [0u8; 100];
        probe().emit(&mut SenderPacket::new_unchecked(&mut sender[..]));
        let refl = ReflectorRepr {
            ssid: 0x7788,
            ..reflector_header()
        };
        let mut reply = vec![0u8; 100];
        refl.emit(&mut reply);
        reply[44..].copy_from_slice(&sender[44..]);
        assert_eq!(&reply[14..16], &[0x77, 0x88]);
        assert_eq!(&reply[41..44], &[0, 0, 0]);
        let view = ReflectorPacket::new_checked(&reply[..]).unwrap();
        assert_eq!(view.ssid(), 0x7788);
        assert_eq!(view.echo(), Some(Echo::StampTlvs));
        assert_eq!(view.reflected_probe(), Ok(probe()));
    }

    /// A 38-byte reply (no MBZ, no TTL) still gives its stamps; the full
    /// header (with TTL) needs 41.
    #[test]
    fn a_38_byte_reply_is_read() {
        let mut reply = vec![0u8; 41];
        reflector_header().emit(&mut reply);
        let view = ReflectorPacket::new_checked(&reply[..38]).unwrap();
        assert_eq!(view.sender_sequence(), 0x0102_0304);
        assert_eq!(
            view.receive_timestamp(),
            reflector_header().receive_timestamp
        );
        assert_eq!(view.sender_ttl(), None);
        assert_eq!(ReflectorRepr::parse(&view), Err(DropReason::TooShort));
        assert_eq!(
            ReflectorPacket::new_checked(&reply[..37]).unwrap_err(),
            DropReason::TooShort
        );
    }
}
