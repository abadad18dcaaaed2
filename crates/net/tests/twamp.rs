//! The TWAMP-light channel against reflectors on this host's loopback:
//! tightlink's own reflector, and a hand-written one in the manner of
//! reflectors that write their header over the request and stamp in user
//! space (it destroys our fields in the padding: replies must be matched
//! by the sequence number and timestamp alone). No namespaces needed.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tightlink_core::synth::single_rate_schedule;
use tightlink_net::reflector::{Reflector, ReflectorConfig};
use tightlink_net::{clock, ClientOptions, TwampChannel};
use tightlink_probe::{Channel, StreamRequest};
use tightlink_wire::control::Direction;
use tightlink_wire::NtpTimestamp;

static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn request(rate_bps: f64, n: usize, size: u32) -> StreamRequest {
    StreamRequest::from_send_times(&single_rate_schedule(rate_bps, n, size, 0), size)
}

/// Median |receive gap - send gap| of the best of three 200-packet
/// streams at 100 Mbit/s (1042-byte frames, 83.36 us apart), with every
/// packet answered. Best of three: the VM takes the sending thread away
/// for a millisecond now and then.
fn best_gap_error_ns(ch: &mut TwampChannel) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let s = ch.probe(&request(100e6, 200, 1042)).unwrap().stream;
        assert_eq!(s.received_count(), 200, "{:?}", ch.host());
        assert_eq!(s.packets[1].send_ns - s.packets[0].send_ns, 83_360);
        let e = median(
            s.packets
                .windows(2)
                .map(|w| {
                    let send = (w[1].send_ns - w[0].send_ns) as f64;
                    let recv = (w[1].recv_ns.unwrap() - w[0].recv_ns.unwrap()) as f64;
                    (recv - send).abs()
                })
                .collect(),
        );
        best = best.min(e);
    }
    best
}

/// tightlink's reflector stamps with the kernel: its gaps follow the send
/// gaps within 2 us (the bound the server's stamps meet on loopback), our
/// fields come back in the padding, nothing is dropped.
#[test]
fn our_reflector_gives_the_gaps_toward_it() {
    let _t = turn();
    let h = Reflector::bind(ReflectorConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        log: false,
        ..ReflectorConfig::default()
    })
    .unwrap()
    .spawn()
    .unwrap();
    let mut ch = TwampChannel::connect(&h.addr.to_string(), &ClientOptions::default()).unwrap();
    assert!(ch.reflects_padding);
    assert!(
        ch.rtt_min_ns() > 0 && ch.rtt_min_ns() < 5_000_000,
        "{}",
        ch.rtt_min_ns()
    );
    let e = best_gap_error_ns(&mut ch);
    assert!(e < 2_000.0, "median gap error {e} ns");
    let host = ch.host().unwrap();
    assert!(host.drops.is_empty(), "{:?}", host.drops);
    assert!(ch.describe().contains("TWAMP-light reflector 127.0.0.1"));
    assert_eq!(h.stats.unstamped.load(Ordering::Relaxed), 0);
}

/// A reflector in the other common manner: the reply is the request with
/// the 41-byte reflector header written over its start, stamped in user
/// space after a blocking `recv`. After its reply to the probe with
/// sender sequence 2 (the first stream's first probe: 0 is the hello, 1
/// the warm-up) it sends that reply again and a 10-byte datagram: both
/// are counted, not used.
fn in_place_reflector(stop: Arc<AtomicBool>) -> SocketAddr {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 9000];
        let mut seq = 0u32;
        while !stop.load(Ordering::Relaxed) {
            let Ok((n, from)) = sock.recv_from(&mut buf) else {
                continue;
            };
            let rx = NtpTimestamp::from_unix_ns(clock::realtime_ns() as u64);
            if n < 41 {
                continue;
            }
            let mut sender = [0u8; 14];
            sender.copy_from_slice(&buf[..14]);
            let sender_seq = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
            buf[0..4].copy_from_slice(&seq.to_be_bytes());
            buf[12..14].copy_from_slice(&[0, 1]);
            buf[14..16].fill(0);
            buf[16..24].copy_from_slice(&rx.to_bytes());
            buf[24..38].copy_from_slice(&sender);
            buf[38..40].fill(0);
            buf[40] = 255;
            let tx = NtpTimestamp::from_unix_ns(clock::realtime_ns() as u64);
            buf[4..12].copy_from_slice(&tx.to_bytes());
            sock.send_to(&buf[..n], from).unwrap();
            if sender_seq == 2 {
                sock.send_to(&buf[..n], from).unwrap();
                sock.send_to(&[7u8; 10], from).unwrap();
            }
            seq += 1;
        }
    });
    addr
}

#[test]
fn an_in_place_reflector_with_user_space_stamps_works_too() {
    let _t = turn();
    let stop = Arc::new(AtomicBool::new(false));
    let addr = in_place_reflector(stop.clone());
    let mut ch = TwampChannel::connect(&addr.to_string(), &ClientOptions::default()).unwrap();
    assert!(!ch.reflects_padding, "the header overwrote our fields");
    let e = best_gap_error_ns(&mut ch);
    stop.store(true, Ordering::Relaxed);
    // User-space stamps after a blocking recv: a few us of wake-up noise.
    eprintln!("in-place reflector: median gap error {e} ns");
    assert!(e < 10_000.0, "median gap error {e} ns");
    let drops = ch.host().unwrap().drops;
    assert_eq!(drops, vec![("too_short", 1), ("malformed", 1)]);
}

#[test]
fn no_reflector_reverse_and_keys_are_clear_errors() {
    let _t = turn();
    // A port nobody listens on.
    let free = UdpSocket::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let opts = ClientOptions {
        timeout: Duration::from_millis(300),
        ..ClientOptions::default()
    };
    let err = TwampChannel::connect(&free.to_string(), &opts)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("no TWAMP-light reflector answered at 127.0.0.1"),
        "{err}"
    );
    let reverse = ClientOptions {
        direction: Direction::Reverse,
        ..opts.clone()
    };
    let err = TwampChannel::connect(&free.to_string(), &reverse)
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("needs a tightlink server"), "{err}");
    let keyed = ClientOptions {
        key: Some(b"k".to_vec()),
        ..opts
    };
    let err = TwampChannel::connect(&free.to_string(), &keyed)
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("--key-file applies to tightlink servers"),
        "{err}"
    );
}
