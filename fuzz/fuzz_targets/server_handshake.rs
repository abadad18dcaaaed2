//! The server's handshake state machine (Hello, Challenge, Open, the key
//! check) fed from any bytes, with and without a key configured: it
//! accepts, refuses with a reason or fails, never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_net::server::handshake_over;
use tightlink_net::ServerConfig;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let config = ServerConfig {
        key: (mode & 1 == 1).then(|| b"correct horse".to_vec()),
        require_key: mode & 2 == 2,
        log: false,
        ..ServerConfig::default()
    };
    let mut out = Vec::new();
    let _ = handshake_over(&mut &rest[..], &mut out, &config);
});
