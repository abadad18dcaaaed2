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

/// `-R`: the server sends, runs the controller and tells the client each
/// update; the client stamps, acknowledges and checks the digest. The
/// data is the same seeded sequence either way, so its SHA-256 is the
/// forward transfer's.
#[test]
fn a_reverse_transfer_arrives_intact_with_the_servers_updates() {
    let (addr, stats) = spawn_server(quiet()).unwrap();
    let opts = TransferOptions {
        bytes: Some(20_000_000),
        duration: None,
        max_rate_bps: Some(400e6),
        interval: Duration::from_millis(100),
        seed: 7,
        ..TransferOptions::default()
    };
    let mut updates = 0;
    let mut intervals = 0;
    let r = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            reverse: true,
            ..opts.clone()
        },
        &mut |e| match e {
            TransferEvent::Update(u) => {
                assert!(u.rate_bps <= 400e6 + 1.0, "{u:?}");
                updates += 1
            }
            TransferEvent::Interval(_) => intervals += 1,
        },
    )
    .unwrap();
    assert!(r.reverse);
    assert_eq!(r.bytes, 20_000_000);
    assert!(updates >= 10, "{updates} updates");
    assert_eq!(updates, r.updates.len());
    assert!(intervals >= 1);
    // The server's counts, told at the end.
    assert!(r.sent_bytes >= r.bytes, "{} sent", r.sent_bytes);
    assert!(r.streams >= 10 && r.rtt_min_ns.is_some());
    let f = transfer::run(&addr.to_string(), &opts, &mut |_| {}).unwrap();
    assert_eq!(f.digest, r.digest);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(stats.sessions.load(std::sync::atomic::Ordering::Relaxed), 2);
}

/// A timed `-R`: the client tells the server to stop offering when its
/// time is up; what was offered still arrives whole.
#[test]
fn a_timed_reverse_transfer_stops_when_the_client_says() {
    let (addr, _) = spawn_server(quiet()).unwrap();
    let r = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            bytes: None,
            duration: Some(Duration::from_millis(700)),
            max_rate_bps: Some(100e6),
            reverse: true,
            ..TransferOptions::default()
        },
        &mut |_| {},
    )
    .unwrap();
    assert!(r.bytes > 1_000_000, "{} bytes", r.bytes);
    assert!(r.duration_ns >= 700_000_000, "{}", r.duration_ns);
    // At 100 Mbit/s for 0.7 s, then a drain: nowhere near the 50 MB
    // session limit.
    assert!(r.bytes < 20_000_000, "{} bytes", r.bytes);
}

/// The server's limits hold for `-R` as for uploads.
#[test]
fn a_reverse_transfer_beyond_the_servers_limit_is_refused() {
    let (addr, _) = spawn_server(quiet()).unwrap();
    let e = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            bytes: Some(60_000_000),
            duration: None,
            reverse: true,
            ..TransferOptions::default()
        },
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("session limit of 50000000 bytes"), "{e}");
}

/// Without a UDP packet from the client's data socket the server has no
/// address to send to and sends nothing: the reverse transfer is refused
/// within about a second, saying why.
#[test]
fn a_reverse_transfer_with_no_udp_from_the_client_is_refused() {
    use tightlink_wire::control::{
        read_message, write_message, Direction, Message, TransferFrom, VERSION,
    };
    let (addr, _) = spawn_server(quiet()).unwrap();
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write_message(
        &mut c,
        &Message::Hello {
            version: VERSION,
            wants_key: false,
        },
    )
    .unwrap();
    assert!(matches!(
        read_message(&mut c).unwrap(),
        Message::Challenge { .. }
    ));
    write_message(
        &mut c,
        &Message::Open {
            direction: Direction::TransferReverse,
            auth: None,
        },
    )
    .unwrap();
    assert!(matches!(
        read_message(&mut c).unwrap(),
        Message::Accepted { .. }
    ));
    let t0 = std::time::Instant::now();
    write_message(
        &mut c,
        &Message::TransferFrom(TransferFrom {
            max_bytes: 1_000_000,
            packet_bytes: 1400,
            max_rate_bps: 0,
            raw: false,
            seed: 1,
        }),
    )
    .unwrap();
    match read_message(&mut c).unwrap() {
        Message::Refused { reason } => {
            assert!(
                reason.contains("sends only where the client has sent from"),
                "{reason}"
            )
        }
        other => panic!("expected Refused, got {other:?}"),
    }
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(900) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

/// A timed transfer that reaches the server's byte limit first ends
/// there, whole, both ways (it once sent on past the limit, and every
/// byte beyond it was refused and sent again until the timeout).
#[test]
fn a_timed_transfer_ends_at_the_session_limit_both_ways() {
    let mut config = quiet();
    config.open_limits.max_session_bytes = 5_000_000;
    let (addr, _) = spawn_server(config).unwrap();
    for reverse in [false, true] {
        let t0 = std::time::Instant::now();
        let s = transfer::run(
            &addr.to_string(),
            &TransferOptions {
                bytes: None,
                duration: Some(Duration::from_secs(5)),
                max_rate_bps: Some(300e6),
                reverse,
                ..TransferOptions::default()
            },
            &mut |_| {},
        )
        .unwrap();
        assert_eq!(s.bytes, 5_000_000, "reverse {reverse}");
        assert!(t0.elapsed() < Duration::from_secs(4), "reverse {reverse}");
    }
}

/// BBE's window drives the same engine: every byte arrives, the window's
/// pacing keeps under the rate asked for, and the intervals carry its
/// rate; the server does not send with it (`-R` is refused before a
/// session opens). (BE needs a bottleneck that spreads a pair: the
/// lab's tests.)
#[test]
fn a_bbe_transfer_arrives_intact_under_the_rate_asked_for() {
    let (addr, _) = spawn_server(quiet()).unwrap();
    let mut intervals = Vec::new();
    let opts = TransferOptions {
        cc: transfer::SendCc::Bbe,
        bytes: Some(20_000_000),
        duration: None,
        max_rate_bps: Some(200e6),
        interval: Duration::from_millis(100),
        ..TransferOptions::default()
    };
    let s = transfer::run(&addr.to_string(), &opts, &mut |e| {
        if let TransferEvent::Interval(iv) = e {
            intervals.push(iv.clone());
        }
    })
    .unwrap();
    assert_eq!((s.bytes, s.cc), (20_000_000, transfer::SendCc::Bbe));
    assert!(s.updates.is_empty(), "a window makes no Rapid updates");
    // 20 MB (and each packet's headers) at 200 Mbit/s takes 0.8 s at least.
    assert!(s.duration_ns >= 800_000_000, "{} ns", s.duration_ns);
    assert!(s.goodput_bps() <= 200e6, "{}", s.goodput_bps());
    assert!(
        intervals.iter().all(|iv| iv.rate_bps > 0.0),
        "{intervals:?}"
    );
    let e = transfer::run(
        &addr.to_string(),
        &TransferOptions {
            reverse: true,
            ..opts
        },
        &mut |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("a server sends with Rapid only"), "{e}");
}
