//! Property tests: any header round-trips; any bytes parse to a value or a
//! reason, never a panic.

use proptest::prelude::*;
use tightlink_wire::ntp::{ErrorEstimate, NtpTimestamp};
use tightlink_wire::{ProbeRepr, ReflectorPacket, SenderPacket};

proptest! {
    #[test]
    fn probe_headers_round_trip(
        sequence: u32, seconds: u32, fraction: u32, ee in 0u16..0x4000,
        warmup: bool, session: u64, stream: u32, len in 1u32.., pos_frac in 0.0f64..1.0,
        offset_ns: u64, extra in 0usize..9000,
    ) {
        let position = ((len as f64 * pos_frac) as u32).min(len - 1);
        let r = ProbeRepr {
            sequence,
            timestamp: NtpTimestamp { seconds, fraction },
            error_estimate: ErrorEstimate::from_u16(ee),
            warmup, session, stream, position, stream_len: len, offset_ns,
        };
        let mut buf = vec![0u8; ProbeRepr::buffer_len() + extra];
        r.emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        let p = SenderPacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(ProbeRepr::parse(&p), Ok(r));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        if let Ok(p) = SenderPacket::new_checked(&bytes[..]) {
            let _ = ProbeRepr::parse(&p);
        }
        if let Ok(r) = ReflectorPacket::new_checked(&bytes[..]) {
            let _ = r.reflected_probe();
        }
    }

    #[test]
    fn ntp_round_trips_within_a_nanosecond(ns in 0u64..2_085_978_495_000_000_000) {
        let back = NtpTimestamp::from_unix_ns(ns).to_unix_ns().unwrap();
        prop_assert!(back.abs_diff(ns) <= 1);
    }

    #[test]
    fn error_estimate_never_under_states(ns in 0u64..1_000_000_000_000) {
        let e = ErrorEstimate::from_ns(ns, true);
        prop_assert!(e.to_ns() >= ns as u128);
        prop_assert!(e.multiplier >= 1);
    }
}

proptest! {
    /// Any control frame, however hostile, parses to a message or an error.
    #[test]
    fn control_frames_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = tightlink_wire::control::Message::parse(&bytes);
        let _ = tightlink_wire::control::read_message(&mut &bytes[..]);
    }

    /// Receive records of any stream round-trip through a frame.
    #[test]
    fn records_round_trip(stream: u32, base: i64, last: bool,
                          recs in proptest::collection::vec((any::<u32>(), any::<u32>()), 0..200)) {
        use tightlink_wire::control::{Message, Record, RecordKind};
        let m = Message::Records {
            stream, kind: RecordKind::Receive, base_ns: base, last,
            records: recs.iter().map(|&(position, offset_ns)| Record { position, offset_ns }).collect(),
        };
        let mut out = Vec::new();
        m.emit(&mut out);
        prop_assert_eq!(Message::parse(&out[4..]).unwrap(), m);
    }
}
