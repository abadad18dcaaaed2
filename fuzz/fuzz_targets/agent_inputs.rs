//! What the agent reads from outside: HTTP request heads from any client
//! (`/metrics`, `/probe`) and its TOML config. Neither may panic; a head
//! that parses keeps its query decoded.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_agent::{config, http};

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    if which % 2 == 0 {
        let peer = "192.0.2.1:40000".parse().unwrap();
        if let Ok(r) = http::parse_head(text, peer) {
            assert!(!r.method.is_empty() && !r.path.is_empty());
        }
        let _ = http::percent_decode(text);
    } else {
        let _ = config::parse_file(text);
    }
});
