//! The `sim:` grammar and the unit parsers on any text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = tightlink_sim::parse_sim_target(s);
        let _ = tightlink_core::units::parse_rate(s);
        let _ = tightlink_core::units::parse_bytes(s);
        let _ = tightlink_core::units::parse_time_ns(s);
    }
});
