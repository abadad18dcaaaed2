//! Builds a train's probe packets in advance (\[CLOUD\]'s habit:
//! fill every field before the train, so the paced loop only sends).

use tightlink_wire::twamp::{ProbeRepr, SenderPacket};
use tightlink_wire::{ErrorEstimate, NtpTimestamp};

/// The warm-up packet's payload: the header, and room for the 27 bytes an
/// RFC 6038 reflector's header adds, so its echo shows our fields.
pub const WARMUP_BYTES: usize = ProbeRepr::buffer_len() + 27;

/// The throw-away warm-up packet and the train's packets, payload sizes
/// `sizes` (each at least the 82-byte header). Sequence numbers continue
/// from `*sequence`. Every packet carries the time it was built as its
/// timestamp: the paced sender overwrites the train's with their
/// scheduled send times, and a warm-up sent as it is still carries a real
/// time (a far end that logs one-way delays must not see 1900).
pub fn build(
    session: u64,
    stream: u32,
    offsets_ns: &[i64],
    sizes: &[u32],
    sequence: &mut u32,
) -> (Vec<u8>, Vec<Vec<u8>>) {
    let n = offsets_ns.len() as u32;
    let now = now();
    let mut one = |position: u32, offset_ns: i64, size: u32, warmup: bool| {
        let repr = ProbeRepr {
            sequence: *sequence,
            timestamp: now,
            error_estimate: ErrorEstimate::from_ns(1_000, false),
            warmup,
            session,
            stream,
            position,
            stream_len: n.max(1),
            offset_ns: offset_ns.max(0) as u64,
        };
        *sequence = sequence.wrapping_add(1);
        packet(&repr, size as usize)
    };
    let warm = one(0, 0, WARMUP_BYTES as u32, true);
    let train = offsets_ns
        .iter()
        .zip(sizes)
        .enumerate()
        .map(|(i, (&off, &size))| one(i as u32, off, size, false))
        .collect();
    (warm, train)
}

/// One warm-up-flagged test packet of `size` payload bytes (at least the
/// header), stamped now: what the `twamp:` channel asks a reflector with.
pub fn single(session: u64, size: usize, sequence: &mut u32) -> Vec<u8> {
    let repr = ProbeRepr {
        sequence: *sequence,
        timestamp: now(),
        error_estimate: ErrorEstimate::from_ns(1_000, false),
        warmup: true,
        session,
        stream: u32::MAX,
        position: 0,
        stream_len: 1,
        offset_ns: 0,
    };
    *sequence = sequence.wrapping_add(1);
    packet(&repr, size)
}

fn now() -> NtpTimestamp {
    NtpTimestamp::from_unix_ns(tightlink_sys::clock::realtime_ns().max(0) as u64)
}

/// `repr` in a packet of `size` payload bytes (at least the header), zero
/// padded; the TLV's length covers the whole packet.
fn packet(repr: &ProbeRepr, size: usize) -> Vec<u8> {
    let mut buf = vec![0u8; size.max(ProbeRepr::buffer_len())];
    repr.emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
    buf
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_packet_carries_a_real_time() {
        let mut seq = 7;
        let before = tightlink_sys::clock::realtime_ns();
        let (warm, train) = build(1, 2, &[0, 1000], &[100, 100], &mut seq);
        assert_eq!(seq, 10);
        for p in std::iter::once(&warm).chain(&train) {
            let r = ProbeRepr::parse(&SenderPacket::new_checked(&p[..]).unwrap()).unwrap();
            let t = r
                .timestamp
                .ns_since(NtpTimestamp::from_unix_ns(before as u64));
            assert!(
                (0..1_000_000_000).contains(&t),
                "{t} ns after the build began"
            );
        }
    }
}
