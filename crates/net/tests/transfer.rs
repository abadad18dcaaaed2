//! `transfer` end to end through this host's loopback: a real server, the
//! data as rate-controlled probe streams, the digest compared at the end,
//! the server's limits and a server that goes away. The lossy path and
//! the round-trip delay are in the lab's tests (namespaces).

use std::time::Duration;

use tightlink_net::loopback::spawn_server;
use tightlink_net::transfer::{self, TransferEvent, TransferOptions};
use tightlink_net::ServerConfig;

fn quiet() -> ServerConfig {
    ServerConfig {
        log: false,
        ..ServerConfig::default()
    }
}

#[test]
fn bytes_arrive_intact_and_the_rate_is_controlled() {
    let (addr, stats) = spawn_server(quiet()).unwrap();
    let mut updates = 0;
    let mut intervals = 0;
    let s = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            bytes: Some(20_000_000),
            duration: None,
            max_rate_bps: Some(400e6),
            interval: Duration::from_millis(100),
            ..TransferOptions::default()
        },
        &mut |e| match e {
            TransferEvent::Update(_) => updates += 1,
            TransferEvent::Interval(_) => intervals += 1,
        },
    )
    .unwrap();
    assert_eq!(s.bytes, 20_000_000);
    assert!(s.sent_bytes >= s.bytes);
    // Every stream's stamps came back and moved the controller.
    assert!(updates >= 10, "{updates} updates");
    assert_eq!(updates, s.updates.len());
    assert!(intervals >= 1);
    // The rate never went above the ceiling asked for.
    assert!(s.updates.iter().all(|u| u.rate_bps <= 400e6 + 1.0));
    assert!(s.rtt_min_ns.is_some());
    // The server's own count of the session.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(stats.sessions.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn a_transfer_beyond_the_servers_limit_is_refused_before_it_starts() {
    let (addr, _) = spawn_server(quiet()).unwrap();
    let e = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            bytes: Some(60_000_000),
            duration: None,
            ..TransferOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("session limit of 50000000 bytes"), "{e}");
}

#[test]
fn a_timed_transfer_stops_offering_and_still_checks_every_byte() {
    let (addr, _) = spawn_server(quiet()).unwrap();
    let s = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            bytes: None,
            duration: Some(Duration::from_millis(700)),
            max_rate_bps: Some(100e6),
            ..TransferOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(s.bytes > 0);
    assert!(s.duration_ns >= 700_000_000, "{}", s.duration_ns);
}
