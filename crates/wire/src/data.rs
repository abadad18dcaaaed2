//! Data packets of `tightlink transfer` (\[BASS\] section VII: the data
//! are the probe streams). A fixed header, then `len` bytes of the
//! transfer at byte `offset`. Each packet is one position of one logical
//! probe stream, so the receiver's kernel stamp of it feeds the rate
//! controller exactly as a probe's would.
//!
//! Layout, all big-endian:
//!
//! ```text
//!  0  magic "TLDT"      4  version (1)   5  flags (0)
//!  6  session u64      14  stream u32    18  index u32 (position in the stream)
//! 22  count u32 (packets the stream was planned with)
//! 26  offset u64 (of the first payload byte in the transfer)
//! 34  len u16 (payload bytes)           36  payload
//! ```

use crate::DropReason;

pub const MAGIC: [u8; 4] = *b"TLDT";
pub const VERSION: u8 = 1;
pub const HEADER_LEN: usize = 36;

/// One data packet's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataRepr {
    pub session: u64,
    pub stream: u32,
    pub index: u32,
    pub count: u32,
    pub offset: u64,
    pub len: u16,
}

impl DataRepr {
    /// Parses a datagram: the header, and the payload it announces. The
    /// datagram must hold the whole payload; extra bytes after it are
    /// refused (a packet is what it says it is).
    pub fn parse(b: &[u8]) -> Result<(DataRepr, &[u8]), DropReason> {
        if b.len() < HEADER_LEN {
            return Err(DropReason::TooShort);
        }
        if b[0..4] != MAGIC {
            return Err(DropReason::NotTightlink);
        }
        if b[4] != VERSION || b[5] != 0 {
            return Err(DropReason::UnknownVersion);
        }
        let u32_at = |i: usize| u32::from_be_bytes(b[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap());
        let r = DataRepr {
            session: u64_at(6),
            stream: u32_at(14),
            index: u32_at(18),
            count: u32_at(22),
            offset: u64_at(26),
            len: u16::from_be_bytes([b[34], b[35]]),
        };
        if r.count == 0 || r.index >= r.count || r.len == 0 {
            return Err(DropReason::Malformed);
        }
        if r.offset.checked_add(r.len as u64).is_none() {
            return Err(DropReason::Malformed);
        }
        let payload = &b[HEADER_LEN..];
        if payload.len() != r.len as usize {
            return Err(if payload.len() < r.len as usize {
                DropReason::TooShort
            } else {
                DropReason::Malformed
            });
        }
        Ok((r, payload))
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `out`.
    pub fn emit(&self, out: &mut [u8]) {
        out[0..4].copy_from_slice(&MAGIC);
        out[4] = VERSION;
        out[5] = 0;
        out[6..14].copy_from_slice(&self.session.to_be_bytes());
        out[14..18].copy_from_slice(&self.stream.to_be_bytes());
        out[18..22].copy_from_slice(&self.index.to_be_bytes());
        out[22..26].copy_from_slice(&self.count.to_be_bytes());
        out[26..34].copy_from_slice(&self.offset.to_be_bytes());
        out[34..36].copy_from_slice(&self.len.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(r: &DataRepr, payload: &[u8]) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_LEN];
        r.emit(&mut b);
        b.extend_from_slice(payload);
        b
    }

    const R: DataRepr = DataRepr {
        session: 0x0102_0304_0506_0708,
        stream: 7,
        index: 3,
        count: 128,
        offset: 1_000_000,
        len: 4,
    };

    #[test]
    fn round_trips_with_its_payload() {
        let b = packet(&R, b"abcd");
        // Hand-checked bytes: magic, version, session, offset.
        assert_eq!(&b[0..6], b"TLDT\x01\x00");
        assert_eq!(&b[6..14], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[26..34], &1_000_000u64.to_be_bytes());
        let (r, p) = DataRepr::parse(&b).unwrap();
        assert_eq!(r, R);
        assert_eq!(p, b"abcd");
    }

    #[test]
    fn refuses_what_is_not_a_data_packet() {
        assert_eq!(DataRepr::parse(&[0; 10]), Err(DropReason::TooShort));
        let mut b = packet(&R, b"abcd");
        b[0] = b'X';
        assert_eq!(DataRepr::parse(&b), Err(DropReason::NotTightlink));
        let b = packet(&R, b"abc");
        assert_eq!(DataRepr::parse(&b), Err(DropReason::TooShort));
        let b = packet(&R, b"abcde");
        assert_eq!(DataRepr::parse(&b), Err(DropReason::Malformed));
        let b = packet(&DataRepr { index: 128, ..R }, b"abcd");
        assert_eq!(DataRepr::parse(&b), Err(DropReason::Malformed));
        let b = packet(
            &DataRepr {
                offset: u64::MAX - 1,
                ..R
            },
            b"abcd",
        );
        assert_eq!(DataRepr::parse(&b), Err(DropReason::Malformed));
        let mut b = packet(&R, b"abcd");
        b[4] = 2;
        assert_eq!(DataRepr::parse(&b), Err(DropReason::UnknownVersion));
    }
}
