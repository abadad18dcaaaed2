//! How tightlink's reflector answers one test packet (RFC 5357 section
//! 4.2.1, RFC 6038's symmetric size, RFC 8762 section 4.3, RFC 8972
//! section 4): which layout the sender speaks, the reply's bytes, and the
//! TLVs echoed with their flags. Pure: bytes in, bytes out.

use tightlink_wire::twamp::{
    field, TLV_EXTRA_PADDING, TLV_HEADER_LEN, TLV_MALFORMED, TLV_UNRECOGNIZED,
};
use tightlink_wire::{ErrorEstimate, NtpTimestamp, ReflectorRepr};

/// How a request is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// STAMP (RFC 8762/8972): bytes 16-43 of the request are zero.
    Stamp,
    /// TWAMP-light (RFC 5357, RFC 6038 symmetric size).
    Twamp,
}

/// STAMP when the request has STAMP's zero bytes 16-43, else TWAMP-light.
/// (A TWAMP-light sender whose padding is all zeros gets the same bytes
/// either way: SSID and MBZ are both its zeros.)
pub fn layout_of(request: &[u8]) -> Layout {
    match request.get(field::MBZ) {
        Some(mbz) if mbz.iter().all(|&b| b == 0) => Layout::Stamp,
        _ => Layout::Twamp,
    }
}

/// A reply's length: the request's, but at least RFC 5357's 41 bytes.
pub fn reply_len(request_len: usize) -> usize {
    request_len.max(field::reflector::HEADER_LEN)
}

/// Writes the reply to `request` (at least 14 bytes) into `reply` (at
/// least [`reply_len`] long) and returns its length and layout. STAMP:
/// the header with the request's SSID, then its TLVs from byte 44 (see
/// [`echo_tlvs`]). TWAMP-light: the header, then the request from byte 14
/// on, cut by the 27 bytes the header adds.
pub fn build_reply(
    request: &[u8],
    sequence: u32,
    receive: NtpTimestamp,
    transmit: NtpTimestamp,
    error: ErrorEstimate,
    ttl: u8,
    reply: &mut [u8],
) -> (usize, Layout) {
    let len = reply_len(request.len());
    let layout = layout_of(request);
    let be16 =
        |r: std::ops::Range<usize>| u16::from_be_bytes([request[r.start], request[r.start + 1]]);
    let mut ts = [0u8; 8];
    ts.copy_from_slice(&request[field::TIMESTAMP]);
    ReflectorRepr {
        sequence,
        timestamp: transmit,
        error_estimate: error,
        ssid: match layout {
            Layout::Stamp => be16(field::SSID),
            Layout::Twamp => 0,
        },
        receive_timestamp: receive,
        sender_sequence: u32::from_be_bytes([request[0], request[1], request[2], request[3]]),
        sender_timestamp: NtpTimestamp::from_bytes(ts),
        sender_error_estimate: ErrorEstimate::from_u16(be16(field::ERROR_ESTIMATE)),
        sender_ttl: ttl,
    }
    .emit(&mut reply[..field::reflector::HEADER_LEN]);
    let tail = &mut reply[field::reflector::HEADER_LEN..len];
    match layout {
        Layout::Stamp => {
            tail[..field::TLVS - field::reflector::HEADER_LEN].fill(0);
            echo_tlvs(&request[field::TLVS..], &mut reply[field::TLVS..len]);
        }
        Layout::Twamp => {
            // Bytes of the request after 14 that fit; a short request's
            // reply is zero after them.
            let from = field::SSID.start;
            let n = (request.len() - from).min(tail.len());
            tail[..n].copy_from_slice(&request[from..from + n]);
            tail[n..].fill(0);
        }
    }
    (len, layout)
}

/// Copies STAMP TLVs (RFC 8972 section 4) into the reply, each TLV's
/// flags set as the reflector must set them: U for a type this reflector
/// does not act on (all but Extra Padding), M for a TLV whose length runs
/// past the packet (the last one read), I clear (in authenticated mode
/// the caller sets it where the HMAC TLV failed: [`mark_tlvs`]), the
/// reserved bits zero. A sender's U on an Extra Padding TLV does not
/// come back. A tail too short for a TLV header is copied as it came.
/// `out` is as long as `tlvs`.
pub fn echo_tlvs(tlvs: &[u8], out: &mut [u8]) {
    out.copy_from_slice(tlvs);
    let mut at = 0;
    while at + TLV_HEADER_LEN <= tlvs.len() {
        let ty = tlvs[at + 1];
        let value_len = u16::from_be_bytes([tlvs[at + 2], tlvs[at + 3]]) as usize;
        let unrecognized = if ty == TLV_EXTRA_PADDING {
            0
        } else {
            TLV_UNRECOGNIZED
        };
        if at + TLV_HEADER_LEN + value_len > tlvs.len() {
            out[at] = unrecognized | TLV_MALFORMED;
            return;
        }
        out[at] = unrecognized;
        at += TLV_HEADER_LEN + value_len;
    }
}

/// Sets `flag` on every TLV header in `tlvs` (as far as lengths lead).
pub fn mark_tlvs(tlvs: &mut [u8], flag: u8) {
    let mut at = 0;
    while at + TLV_HEADER_LEN <= tlvs.len() {
        tlvs[at] |= flag;
        at += TLV_HEADER_LEN + u16::from_be_bytes([tlvs[at + 2], tlvs[at + 3]]) as usize;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_wire::twamp::TLV_INTEGRITY_FAILED;

    /// A 60-byte request and its reply worked out by hand: the 41-byte
    /// reflector header, then request bytes 14..33 (60 - 41 = 19 of them).
    #[test]
    fn reply_is_the_request_size_with_the_header_first() {
        let mut req = [0u8; 60];
        req[0..4].copy_from_slice(&[0, 0, 1, 2]); // sequence 258
        req[4..12].copy_from_slice(&[0x83, 0xAA, 0x7E, 0x81, 0x80, 0, 0, 0]);
        req[12..14].copy_from_slice(&[0x85, 0x87]);
        for (i, b) in req[14..].iter_mut().enumerate() {
            *b = 100 + i as u8;
        }
        let recv = NtpTimestamp {
            seconds: 0x83AA_7E82,
            fraction: 0x4000_0000,
        };
        let xmit = NtpTimestamp {
            seconds: 0x83AA_7E82,
            fraction: 0x4000_1000,
        };
        let mut reply = [0xEEu8; 100];
        let err = ErrorEstimate::from_u16(0x0A01);
        let (len, layout) = build_reply(&req, 7, recv, xmit, err, 61, &mut reply);
        assert_eq!((len, layout), (60, Layout::Twamp));
        let want_head: [u8; 41] = [
            0, 0, 0, 7, // reflector sequence
            0x83, 0xAA, 0x7E, 0x82, 0x40, 0, 0x10, 0, // transmit time
            0x0A, 0x01, // error estimate
            0, 0, // MBZ
            0x83, 0xAA, 0x7E, 0x82, 0x40, 0, 0, 0, // receive time
            0, 0, 1, 2, // sender sequence
            0x83, 0xAA, 0x7E, 0x81, 0x80, 0, 0, 0, // sender timestamp
            0x85, 0x87, // sender error estimate
            0, 0,  // MBZ
            61, // sender TTL
        ];
        assert_eq!(&reply[..41], &want_head);
        let want_tail: Vec<u8> = (100..119).collect();
        assert_eq!(&reply[41..60], &want_tail[..]);
        assert_eq!(reply[60], 0xEE, "nothing written past the request's length");
    }

    /// A 60-byte STAMP request (bytes 16-43 zero, SSID 0x0102, one
    /// 12-byte Extra Padding TLV) and its reply, by hand: the SSID at 14,
    /// MBZ at 38-39 and 41-43, the TLV echoed at 44 as it came.
    #[test]
    fn a_stamp_request_gets_a_stamp_reply() {
        let mut req = [0u8; 60];
        req[0..4].copy_from_slice(&[0, 0, 0, 5]);
        req[4..12].copy_from_slice(&[0x83, 0xAA, 0x7E, 0x81, 0x80, 0, 0, 0]);
        req[14..16].copy_from_slice(&[0x01, 0x02]);
        req[44..48].copy_from_slice(&[0, 1, 0, 12]);
        for (i, b) in req[48..].iter_mut().enumerate() {
            *b = 200 + i as u8;
        }
        let t = NtpTimestamp {
            seconds: 0x83AA_7E82,
            fraction: 0,
        };
        let mut reply = [0xEEu8; 60];
        let (len, layout) = build_reply(&req, 3, t, t, ErrorEstimate::from_u16(1), 64, &mut reply);
        assert_eq!((len, layout), (60, Layout::Stamp));
        assert_eq!(&reply[14..16], &[0x01, 0x02], "SSID");
        assert_eq!(&reply[24..28], &[0, 0, 0, 5], "sender sequence");
        assert_eq!(&reply[38..44], &[0, 0, 64, 0, 0, 0], "MBZ, TTL, MBZ");
        assert_eq!(&reply[44..], &req[44..], "the TLV as it came");
    }

    /// The I flag set on every TLV header, as far as the lengths lead.
    #[test]
    fn every_tlv_is_marked_by_hand() {
        // Extra Padding of 2 bytes, an unknown type of 0 bytes, a header
        // whose length runs past the end.
        let mut t = [0, 1, 0, 2, 9, 9, 0x80, 5, 0, 0, 0, 1, 0, 40];
        mark_tlvs(&mut t, TLV_INTEGRITY_FAILED);
        assert_eq!(t, [0x20, 1, 0, 2, 9, 9, 0xa0, 5, 0, 0, 0x20, 1, 0, 40]);
        let mut short = [0u8, 1, 0];
        mark_tlvs(&mut short, TLV_INTEGRITY_FAILED);
        assert_eq!(short, [0, 1, 0], "no room for a header: untouched");
    }

    /// TLV flags worked out by hand (RFC 8972 section 4): an Extra
    /// Padding TLV sent with U, M, I and a reserved bit set comes back
    /// with none, an unknown type 7 flagged U (0x80) only, a TLV claiming
    /// 9 bytes of the 2 left flagged M (0x40); a trailing 2 bytes copied.
    #[test]
    fn unknown_and_overlong_tlvs_are_flagged() {
        let tlvs = [
            0xF0, 1, 0, 2, 0xA, 0xB, // Extra Padding, 2 bytes, U M I and a reserved bit
            0x40, 7, 0, 1, 0xC, // type 7, 1 byte, sent with M
            0, 1, 0, 9, 0xD, 0xE, // claims 9, has 2
        ];
        let mut out = [0u8; 17];
        echo_tlvs(&tlvs, &mut out);
        let mut want = tlvs;
        want[0] = 0;
        want[6] = 0x80;
        want[11] = 0x40;
        assert_eq!(out, want);
        let mut out = [0u8; 6];
        echo_tlvs(&[0, 1, 0, 0, 9, 9], &mut out);
        assert_eq!(out, [0, 1, 0, 0, 9, 9], "a 2-byte tail is copied as is");
    }

    /// RFC 5357's 14-byte minimum packet gets the 41-byte header back:
    /// the request's bytes 0-13 in the sender fields, zeros after.
    #[test]
    fn a_14_byte_request_gets_the_41_byte_reply() {
        let mut req = [0u8; 14];
        req[0..4].copy_from_slice(&[0, 0, 0, 9]);
        req[12..14].copy_from_slice(&[0x80, 0x01]);
        let t = NtpTimestamp::from_unix_ns(1);
        let mut reply = [0xEEu8; 60];
        let (len, layout) = build_reply(&req, 0, t, t, ErrorEstimate::from_u16(1), 64, &mut reply);
        assert_eq!((len, layout), (41, Layout::Twamp));
        assert_eq!(&reply[24..28], &[0, 0, 0, 9]);
        assert_eq!(&reply[36..38], &[0x80, 0x01]);
        assert_eq!(reply[40], 64);
        assert_eq!(reply[41], 0xEE, "nothing past 41 bytes");
    }
}
