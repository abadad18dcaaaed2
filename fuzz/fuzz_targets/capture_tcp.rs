//! pcap/pcapng bytes through what `analyze-tcp` does: parse, flows,
//! segments of the largest, and the passive estimators.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_capture::{flows, parse_capture_bytes, segments};
use tightlink_core::tcp::{analyze_flow, BbeParams, WestwoodParams};

fuzz_target!(|data: &[u8]| {
    if let Ok(cap) = parse_capture_bytes("fuzz", data) {
        if let Some(f) = flows(&cap).first() {
            let segs = segments(&cap, f);
            let _ = analyze_flow(&segs, WestwoodParams::default(), BbeParams::default());
        }
    }
});
