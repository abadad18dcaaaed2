//! The server's session after the handshake, fed from any bytes: a real
//! `tightlink server` on loopback (one per fuzzing process, small limits
//! so a stream that never comes ends fast), a client that completes an
//! unkeyed handshake (the first byte picks the direction) and then writes
//! the input as its control messages and closes. The server must answer,
//! refuse or end the session, never panic or hang (each connection is
//! read to its end under a 5 s timeout, which libFuzzer's -timeout=10
//! would report).
#![no_main]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use tightlink_net::{Server, ServerConfig};
use tightlink_wire::control::{read_message, write_message, Direction, Limits, Message, VERSION};

fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let limits = Limits {
            max_rate_bps: 100_000_000,
            max_session_bytes: 1_000_000,
            max_session_ms: 2_000,
            max_stream_packets: 200,
            max_packet_bytes: 1500,
        };
        let server = Server::bind(ServerConfig {
            bind: "127.0.0.1:0".parse().unwrap(),
            open_limits: limits,
            keyed_limits: limits,
            handshake_timeout: Duration::from_millis(500),
            idle_timeout: Duration::from_millis(500),
            log: false,
            ..ServerConfig::default()
        })
        .expect("bind a loopback server");
        server.spawn().expect("spawn the server").0
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(mut c) = TcpStream::connect(server()) else {
        return;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = c.set_write_timeout(Some(Duration::from_secs(5)));
    let direction = if mode & 1 == 0 {
        Direction::Forward
    } else {
        Direction::Reverse
    };
    let mut hello = Vec::new();
    write_message(
        &mut hello,
        &Message::Hello {
            version: VERSION,
            wants_key: false,
        },
    )
    .unwrap();
    write_message(
        &mut hello,
        &Message::Open {
            direction,
            auth: None,
        },
    )
    .unwrap();
    if c.write_all(&hello).is_err() {
        return;
    }
    // Challenge, then Accepted (or a refusal: the server is busy).
    for _ in 0..2 {
        match read_message(&mut c) {
            Ok(Message::Challenge { .. }) | Ok(Message::Accepted { .. }) => {}
            _ => return,
        }
    }
    let _ = c.write_all(rest);
    let _ = c.shutdown(Shutdown::Write);
    let mut sink = [0u8; 4096];
    while let Ok(n) = c.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
});
