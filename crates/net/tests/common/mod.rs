//! Helpers the loopback and interop tests share.
#![allow(dead_code)]

use tightlink_core::channel::{Channel, StreamRequest};
use tightlink_core::schedule::single_rate_schedule;
use tightlink_net::TwampChannel;

/// Paced senders spin on a CPU: two at once on a 2-core machine disturb
/// each other's gaps, so these tests take turns.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn turn() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn median(v: Vec<f64>) -> f64 {
    tightlink_core::stats::median(&v).expect("samples")
}

pub fn request(rate_bps: f64, n: usize, size: u32) -> StreamRequest {
    StreamRequest::from_send_times(&single_rate_schedule(rate_bps, n, size, 0), size)
}

/// Median |receive gap - send gap| of the best of three 200-packet
/// streams at 100 Mbit/s of `size`-byte frames, every probe answered and
/// sent at its schedule's first gap. Best of three: the VM takes the
/// sending thread away for a millisecond now and then.
pub fn best_gap_error_ns(ch: &mut TwampChannel, size: u32) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let req = request(100e6, 200, size);
        let s = ch.probe(&req).unwrap().stream;
        assert_eq!(s.received_count(), 200, "{:?}", ch.side_report().host);
        assert_eq!(
            s.packets[1].send_ns - s.packets[0].send_ns,
            req.offsets_ns[1]
        );
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
