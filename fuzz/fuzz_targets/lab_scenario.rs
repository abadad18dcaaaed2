//! Lab scenario TOML on any text: a scenario or an error naming what.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = tightlink_lab::scenario::Scenario::parse("fuzz", s);
    }
});
