//! Builds a train's probe packets in advance (\[CLOUD\]'s habit:
//! fill every field before the train, so the paced loop only sends).

use tightlink_wire::twamp::{ProbeRepr, SenderPacket};
use tightlink_wire::{ErrorEstimate, NtpTimestamp};

/// The throw-away warm-up packet and the train's packets, payload sizes
/// `sizes` (each at least the 48-byte header). Sequence numbers continue
/// from `*sequence`.
pub fn build(
    session: u64,
    stream: u32,
    offsets_ns: &[i64],
    sizes: &[u32],
    sequence: &mut u32,
) -> (Vec<u8>, Vec<Vec<u8>>) {
    let n = offsets_ns.len() as u32;
    let mut one = |position: u32, offset_ns: i64, size: u32, warmup: bool| {
        let mut buf = vec![0u8; (size as usize).max(ProbeRepr::buffer_len())];
        ProbeRepr {
            sequence: *sequence,
            timestamp: NtpTimestamp::default(),
            error_estimate: ErrorEstimate::from_ns(1_000, false),
            warmup,
            session,
            stream,
            position,
            stream_len: n.max(1),
            offset_ns: offset_ns.max(0) as u64,
        }
        .emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        *sequence = sequence.wrapping_add(1);
        buf
    };
    let warm = one(0, 0, ProbeRepr::buffer_len() as u32, true);
    let train = offsets_ns
        .iter()
        .zip(sizes)
        .enumerate()
        .map(|(i, (&off, &size))| one(i as u32, off, size, false))
        .collect();
    (warm, train)
}
