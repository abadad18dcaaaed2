//! IPv4/UDP packets as the AF_PACKET ring delivers them: the view refuses
//! or parses, whatever the claimed lengths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_wire::udp4::Udp4View;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let wire_len = u16::from_be_bytes([data[0], data[1]]) as usize;
    let _ = Udp4View::parse(&data[2..], wire_len);
});
