//! STAMP's authenticated mode (RFC 8762 sections 4.2.2, 4.3.2 and 4.4;
//! RFC 8972 section 4.8): its packet layouts, and their translation to
//! and from the unauthenticated layouts the rest of tightlink reads, so
//! that authentication is a step at each edge (seal before sending, open
//! after receiving) and nothing between changes.
//!
//! Session-Sender packet, authenticated (112 bytes, then TLVs):
//!
//! ```text
//!  0..4    sequence number
//!  4..16   MBZ
//! 16..24   timestamp
//! 24..26   error estimate
//! 26..28   SSID (RFC 8972)
//! 28..96   MBZ
//! 96..112  HMAC over bytes 0..96
//! 112..    TLVs; the last, the HMAC TLV (type 8, 16 bytes), covers the
//!          sequence number and every TLV before it
//! ```
//!
//! Session-Reflector packet, authenticated: sequence number 0..4, MBZ,
//! timestamp 16..24, error estimate 24..26, SSID 26..28, MBZ, receive
//! timestamp 32..40, MBZ, the sender's sequence number 48..52, MBZ, its
//! timestamp 64..72 and error estimate 72..74, MBZ, its TTL at 80, MBZ,
//! HMAC 96..112 over bytes 0..96, then TLVs as the sender's.
//!
//! The HMAC is HMAC-SHA-256 truncated to 16 bytes (RFC 8762 section
//! 4.4). This crate has no hash: the caller passes the MAC as a function
//! of the byte slices to cover, in order.
//!
//! Translation keeps every field and TLV; lengths differ by
//! [`GROWTH`] bytes (68 more header bytes, and the 20-byte HMAC TLV when
//! there are TLVs), so a probe sealed from an unauthenticated packet of
//! `n` bytes is `n + GROWTH` long.

use std::ops::Range;

use crate::twamp::{field as plain, TLV_HEADER_LEN};
use crate::DropReason;

/// Bytes of the HMAC in the base packet and in the HMAC TLV.
pub const HMAC_LEN: usize = 16;
/// STAMP TLV type of the HMAC TLV (RFC 8972 section 4.8).
pub const TLV_HMAC: u8 = 8;
/// The authenticated base packet, sender and reflector alike.
pub const BASE_LEN: usize = 112;
/// The HMAC TLV, header and value.
pub const HMAC_TLV_LEN: usize = TLV_HEADER_LEN + HMAC_LEN;
/// What sealing adds to a packet with TLVs.
pub const GROWTH: usize = BASE_LEN - plain::TLVS + HMAC_TLV_LEN;

/// The MAC of the concatenated slices: HMAC-SHA-256 with the session's
/// key, truncated to 16 bytes.
pub type Mac<'a> = &'a dyn Fn(&[&[u8]]) -> [u8; HMAC_LEN];

/// Byte ranges of the authenticated layouts.
pub mod field {
    use std::ops::Range;
    pub const SEQUENCE: Range<usize> = 0..4;
    pub const TIMESTAMP: Range<usize> = 16..24;
    pub const ERROR_ESTIMATE: Range<usize> = 24..26;
    pub const SSID: Range<usize> = 26..28;
    /// What the base HMAC covers.
    pub const COVERED: Range<usize> = 0..96;
    pub const HMAC: Range<usize> = 96..112;
    pub const TLVS: usize = 112;

    pub mod reflector {
        use std::ops::Range;
        pub const RECEIVE_TIMESTAMP: Range<usize> = 32..40;
        pub const SENDER_SEQUENCE: Range<usize> = 48..52;
        pub const SENDER_TIMESTAMP: Range<usize> = 64..72;
        pub const SENDER_ERROR_ESTIMATE: Range<usize> = 72..74;
        pub const SENDER_TTL: usize = 80;
    }
}

/// (authenticated, unauthenticated) places of the sender packet's fields.
const SENDER_MAP: [(Range<usize>, Range<usize>); 4] = [
    (field::SEQUENCE, plain::SEQUENCE),
    (field::TIMESTAMP, plain::TIMESTAMP),
    (field::ERROR_ESTIMATE, plain::ERROR_ESTIMATE),
    (field::SSID, plain::SSID),
];

/// The same for the reflector packet.
fn reflector_map() -> [(Range<usize>, Range<usize>); 9] {
    use plain::reflector as p;
    let ttl = field::reflector::SENDER_TTL;
    [
        (field::SEQUENCE, p::SEQUENCE),
        (field::TIMESTAMP, p::TIMESTAMP),
        (field::ERROR_ESTIMATE, p::ERROR_ESTIMATE),
        (field::SSID, p::SSID),
        (field::reflector::RECEIVE_TIMESTAMP, p::RECEIVE_TIMESTAMP),
        (field::reflector::SENDER_SEQUENCE, p::SENDER_SEQUENCE),
        (field::reflector::SENDER_TIMESTAMP, p::SENDER_TIMESTAMP),
        (
            field::reflector::SENDER_ERROR_ESTIMATE,
            p::SENDER_ERROR_ESTIMATE,
        ),
        (ttl..ttl + 1, p::SENDER_TTL..p::SENDER_TTL + 1),
    ]
}

/// Equal in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn seal(plain_packet: &[u8], map: &[(Range<usize>, Range<usize>)], mac: Mac) -> Vec<u8> {
    let tlvs = plain_packet.get(plain::TLVS..).unwrap_or(&[]);
    let hmac_tlv = if tlvs.is_empty() { 0 } else { HMAC_TLV_LEN };
    let mut out = vec![0u8; BASE_LEN + tlvs.len() + hmac_tlv];
    for (a, p) in map {
        if p.end <= plain_packet.len() {
            out[a.clone()].copy_from_slice(&plain_packet[p.clone()]);
        }
    }
    out[field::TLVS..field::TLVS + tlvs.len()].copy_from_slice(tlvs);
    if hmac_tlv > 0 {
        let at = field::TLVS + tlvs.len();
        out[at + 1] = TLV_HMAC;
        out[at + 2..at + 4].copy_from_slice(&(HMAC_LEN as u16).to_be_bytes());
        let m = mac(&[&out[field::SEQUENCE], &out[field::TLVS..at]]);
        out[at + TLV_HEADER_LEN..].copy_from_slice(&m);
    }
    reseal(&mut out, mac);
    out
}

/// Writes the base HMAC again, after a field it covers changed (a
/// timestamp written at send time).
pub fn reseal(packet: &mut [u8], mac: Mac) {
    let m = mac(&[&packet[field::COVERED]]);
    packet[field::HMAC].copy_from_slice(&m);
}

/// A checked packet in the unauthenticated layout, and whether its TLVs
/// passed their HMAC TLV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    pub packet: Vec<u8>,
    /// False where the packet has TLVs and no HMAC TLV at their end, or
    /// one that does not match (RFC 8972 section 4.8: the reflector then
    /// sets the I flag of every TLV it returns). True for a truncated
    /// view, whose TLVs could not be checked.
    pub tlvs_intact: bool,
}

/// Checks an authenticated packet and returns its unauthenticated form.
/// The base HMAC is always checked; the HMAC TLV where the packet is
/// whole (`whole`: `packet` is the datagram, not its first bytes) and has
/// TLVs: then the TLVs returned are those before it (all of them where
/// the last is not an HMAC TLV). A truncated view keeps its TLVs as they
/// are.
fn open(
    packet: &[u8],
    whole: bool,
    map: &[(Range<usize>, Range<usize>)],
    plain_len: usize,
    mac: Mac,
) -> Result<Opened, DropReason> {
    if packet.len() < BASE_LEN {
        return Err(DropReason::TooShort);
    }
    if !same(&mac(&[&packet[field::COVERED]]), &packet[field::HMAC]) {
        return Err(DropReason::BadHmac);
    }
    let mut tlvs = &packet[field::TLVS..];
    let mut tlvs_intact = true;
    if whole && !tlvs.is_empty() {
        let at = tlvs.len().checked_sub(HMAC_TLV_LEN);
        let hmac_tlv = at.filter(|&at| {
            let h = &tlvs[at..];
            h[1] == TLV_HMAC && u16::from_be_bytes([h[2], h[3]]) as usize == HMAC_LEN
        });
        tlvs_intact = match hmac_tlv {
            Some(at) => {
                let m = mac(&[&packet[field::SEQUENCE], &tlvs[..at]]);
                let ok = same(&m, &tlvs[at + TLV_HEADER_LEN..]);
                tlvs = &tlvs[..at];
                ok
            }
            None => false,
        };
    }
    let mut out = vec![0u8; plain_len.max(plain::TLVS) + tlvs.len()];
    for (a, p) in map {
        if p.end <= plain_len {
            out[p.clone()].copy_from_slice(&packet[a.clone()]);
        }
    }
    let from = plain_len.max(plain::TLVS);
    out[from..].copy_from_slice(tlvs);
    Ok(Opened {
        packet: out,
        tlvs_intact,
    })
}

/// An unauthenticated sender packet (tightlink's layout, TLVs from byte
/// 44) in the authenticated layout.
pub fn seal_sender(plain_packet: &[u8], mac: Mac) -> Vec<u8> {
    seal(plain_packet, &SENDER_MAP, mac)
}

/// A received authenticated sender packet, checked, in the
/// unauthenticated layout (TLVs from byte 44, the HMAC TLV left out).
pub fn open_sender(packet: &[u8], mac: Mac) -> Result<Opened, DropReason> {
    open(packet, true, &SENDER_MAP, plain::TLVS, mac)
}

/// An unauthenticated reply (RFC 8762 section 4.3.1, TLVs from byte 44)
/// in the authenticated layout.
pub fn seal_reflector(plain_reply: &[u8], mac: Mac) -> Vec<u8> {
    seal(plain_reply, &reflector_map(), mac)
}

/// A received authenticated reply, checked, in the unauthenticated
/// layout. `whole`: `reply` is the whole datagram, so its HMAC TLV is
/// checked too, and a reply whose TLVs fail it is refused.
pub fn open_reflector(reply: &[u8], whole: bool, mac: Mac) -> Result<Vec<u8>, DropReason> {
    let o = open(reply, whole, &reflector_map(), plain::TLVS, mac)?;
    if !o.tlvs_intact {
        return Err(DropReason::BadHmac);
    }
    Ok(o.packet)
}

/// Writes a timestamp into an authenticated sender packet and seals it
/// again.
pub fn set_sender_timestamp(packet: &mut [u8], stamp: [u8; 8], mac: Mac) {
    packet[field::TIMESTAMP].copy_from_slice(&stamp);
    reseal(packet, mac);
}

/// Writes the transmit timestamp into an authenticated reply and seals
/// it again.
pub fn set_reflector_timestamp(packet: &mut [u8], stamp: [u8; 8], mac: Mac) {
    set_sender_timestamp(packet, stamp, mac)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A stand-in MAC: a keyed sum, enough to see what is covered.
    fn toy(parts: &[&[u8]]) -> [u8; HMAC_LEN] {
        let mut m = [0x5au8; HMAC_LEN];
        let mut i = 0usize;
        for p in parts {
            for &b in *p {
                m[i % HMAC_LEN] = m[i % HMAC_LEN].wrapping_mul(31).wrapping_add(b);
                i += 1;
            }
        }
        m
    }

    fn plain_sender() -> Vec<u8> {
        let mut p = vec![0u8; 60];
        p[0..4].copy_from_slice(&[0, 0, 0, 7]);
        p[4..12].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        p[12..14].copy_from_slice(&[0x80, 0x01]);
        p[14..16].copy_from_slice(&[0xab, 0xcd]);
        // One Extra Padding TLV of 12 bytes.
        p[44..48].copy_from_slice(&[0, 1, 0, 12]);
        p[48..52].copy_from_slice(b"TLNK");
        p
    }

    #[test]
    fn a_sealed_sender_packet_has_the_rfc_layout_by_hand() {
        let a = seal_sender(&plain_sender(), &toy);
        assert_eq!(a.len(), 60 + GROWTH);
        assert_eq!(GROWTH, 88);
        assert_eq!(&a[0..4], &[0, 0, 0, 7]);
        assert!(a[4..16].iter().all(|&b| b == 0));
        assert_eq!(&a[16..24], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&a[24..26], &[0x80, 0x01]);
        assert_eq!(&a[26..28], &[0xab, 0xcd]);
        assert!(a[28..96].iter().all(|&b| b == 0));
        assert_eq!(&a[96..112], &toy(&[&a[0..96]]));
        assert_eq!(&a[112..116], &[0, 1, 0, 12]);
        assert_eq!(&a[116..120], b"TLNK");
        // The HMAC TLV last: flags, type 8, length 16, then the MAC of
        // the sequence number and the TLVs before it.
        assert_eq!(&a[128..132], &[0, 8, 0, 16]);
        assert_eq!(&a[132..148], &toy(&[&a[0..4], &a[112..128]]));
    }

    #[test]
    fn opening_checks_both_macs_and_gives_the_plain_layout_back() {
        let p = plain_sender();
        let a = seal_sender(&p, &toy);
        let o = open_sender(&a, &toy).unwrap();
        assert_eq!((o.packet, o.tlvs_intact), (p.clone(), true));
        // A byte changed under the base HMAC, or a MAC from another key:
        // refused.
        for at in [2, 20] {
            let mut bad = a.clone();
            bad[at] ^= 1;
            assert_eq!(open_sender(&bad, &toy), Err(DropReason::BadHmac), "{at}");
        }
        // A TLV changed: opened, its TLVs marked as failing (I flag).
        let mut tlv_changed = a.clone();
        tlv_changed[120] ^= 1;
        let o = open_sender(&tlv_changed, &toy).unwrap();
        assert!(!o.tlvs_intact);
        assert_eq!(o.packet[44 + 8], p[44 + 8] ^ 1);
        // A reply whose TLVs fail is refused outright.
        let r = seal_reflector(&p, &toy);
        let mut r_changed = r.clone();
        r_changed[120] ^= 1;
        assert!(open_reflector(&r, true, &toy).is_ok());
        assert_eq!(
            open_reflector(&r_changed, true, &toy),
            Err(DropReason::BadHmac)
        );
        let other = |parts: &[&[u8]]| {
            let mut m = toy(parts);
            m[0] ^= 0xff;
            m
        };
        assert_eq!(open_sender(&a, &other), Err(DropReason::BadHmac));
        // TLVs with no HMAC TLV at the end: all kept, not intact.
        let mut no_hmac_tlv = a[..128].to_vec();
        reseal(&mut no_hmac_tlv, &toy);
        let o = open_sender(&no_hmac_tlv, &toy).unwrap();
        assert_eq!((o.packet, o.tlvs_intact), (p.clone(), false));
        assert_eq!(open_sender(&a[..100], &toy), Err(DropReason::TooShort));
    }

    #[test]
    fn a_base_packet_without_tlvs_is_112_bytes() {
        let a = seal_sender(&plain_sender()[..44], &toy);
        assert_eq!(a.len(), 112);
        assert_eq!(
            open_sender(&a, &toy).unwrap().packet,
            plain_sender()[..44].to_vec()
        );
    }

    #[test]
    fn a_reply_maps_every_field_by_hand() {
        let mut p = vec![0u8; 44 + 8];
        for (i, b) in p[..41].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        // The unauthenticated reply's MBZ bytes stay zero.
        p[38..40].fill(0);
        p[16 - 2..16].copy_from_slice(&[0xab, 0xcd]);
        p[44..48].copy_from_slice(&[0, 1, 0, 4]);
        let a = seal_reflector(&p, &toy);
        assert_eq!(&a[0..4], &p[0..4]);
        assert_eq!(&a[16..24], &p[4..12]);
        assert_eq!(&a[24..26], &p[12..14]);
        assert_eq!(&a[26..28], &p[14..16]);
        assert_eq!(&a[32..40], &p[16..24]);
        assert_eq!(&a[48..52], &p[24..28]);
        assert_eq!(&a[64..72], &p[28..36]);
        assert_eq!(&a[72..74], &p[36..38]);
        assert_eq!(a[80], p[40]);
        for zero in [4..16, 28..32, 40..48, 52..64, 74..80, 81..96] {
            assert!(a[zero.clone()].iter().all(|&b| b == 0), "{zero:?}");
        }
        assert_eq!(open_reflector(&a, true, &toy).unwrap(), p);
        // Only the first bytes read: the base HMAC is checked, the TLVs
        // come as far as they reach.
        let first = open_reflector(&a[..116], false, &toy).unwrap();
        assert_eq!(&first[..48], &p[..48]);
    }

    #[test]
    fn a_timestamp_written_at_send_time_is_sealed_again() {
        let mut a = seal_sender(&plain_sender(), &toy);
        set_sender_timestamp(&mut a, [9; 8], &toy);
        let p = open_sender(&a, &toy).unwrap().packet;
        assert_eq!(&p[4..12], &[9; 8]);
    }

    proptest! {
        #[test]
        fn sealing_then_opening_gives_the_packet_back(
            head in proptest::collection::vec(any::<u8>(), 16),
            tlvs in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let mut p = vec![0u8; 44];
            p[..16].copy_from_slice(&head);
            p.extend_from_slice(&tlvs);
            let a = seal_sender(&p, &toy);
            prop_assert_eq!(a.len(), p.len() + if tlvs.is_empty() { 68 } else { GROWTH });
            prop_assert_eq!(open_sender(&a, &toy).unwrap().packet, p);
        }

        #[test]
        fn opening_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = open_sender(&bytes, &toy);
            let _ = open_reflector(&bytes, true, &toy);
            let _ = open_reflector(&bytes, false, &toy);
        }
    }
}
