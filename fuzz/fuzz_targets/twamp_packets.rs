//! Sender and reflector packets from any bytes: the views either refuse
//! with a reason or parse; a request the reflector would answer
//! (14..=9000 bytes) builds a reply of the request's length, or 41 bytes
//! for a shorter one, and never longer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_net::reflector::{build_reply, reply_len};
use tightlink_wire::twamp::{ProbeRepr, ReflectorPacket, ReflectorRepr, SenderPacket};
use tightlink_wire::{ErrorEstimate, NtpTimestamp};

fuzz_target!(|data: &[u8]| {
    if let Ok(p) = SenderPacket::new_checked(data) {
        let _ = ProbeRepr::parse(&p);
    }
    if let Ok(p) = ReflectorPacket::new_checked(data) {
        let _ = ReflectorRepr::parse(&p);
        let _ = p.echo();
        let _ = p.reflected_probe();
    }
    if (14..=9000).contains(&data.len()) {
        let mut reply = vec![0u8; reply_len(data.len())];
        let (n, _) = build_reply(
            data,
            1,
            NtpTimestamp::from_unix_ns(1),
            NtpTimestamp::from_unix_ns(2),
            ErrorEstimate::from_ns(1_000, false),
            64,
            &mut reply,
        );
        assert_eq!(n, data.len().max(41), "no amplification beyond 41 bytes");
    }
});
