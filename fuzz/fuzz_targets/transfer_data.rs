//! What a transfer's receiver takes from any sender: data packets, parsed
//! and then put into the reassembly window and the streams' stamps, with
//! the sender's "stream sent" notices between them. Nothing may panic,
//! and the bytes held out of order never exceed the window.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_net::transfer::reassembly::{Reassembly, StreamStamps};
use tightlink_wire::data::DataRepr;

const WINDOW: u64 = 64 << 10;

fuzz_target!(|data: &[u8]| {
    let mut re = Reassembly::new(1 << 20, WINDOW);
    let mut st = StreamStamps::new(10_000);
    // Packets separated by 0xfe, a millisecond apart.
    for (k, packet) in data.split(|&b| b == 0xfe).enumerate() {
        let now = k as i64 * 1_000_000;
        if let Ok((r, payload)) = DataRepr::parse(packet) {
            let _ = re.put(r.offset, payload);
            let _ = st.stamp(&r, now, now);
            assert!(re.held_bytes() <= WINDOW);
            assert!(re.contiguous() <= 1 << 20);
        } else if let Some(&s) = packet.first() {
            let _ = st.sent(s as u32, now);
        }
        for c in st.close_due(now) {
            assert!(c.recv_ns.len() <= 10_000);
        }
    }
});
