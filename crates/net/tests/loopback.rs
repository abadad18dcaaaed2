//! Real packets through this host's loopback: kernel receive timestamps,
//! paced sends, the wire format, drop counting. No namespaces needed.

use tightlink_core::synth::single_rate_schedule;
use tightlink_core::{analyze, AnalysisParams, Decision, Method, StreamKind};
use tightlink_net::LoopbackChannel;
use tightlink_probe::{Channel, StreamRequest};
use tightlink_wire::twamp::{ProbeRepr, SenderPacket};
use tightlink_wire::DropReason;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// 200 packets of 1000 bytes at 100 Mbit/s (80 us apart): every packet
/// arrives with a kernel timestamp, the receive gaps follow the send gaps
/// (median difference under 2 us; loopback delivers inside `send`), and
/// PRC-MT sees no congestion.
#[test]
fn a_paced_stream_arrives_stamped_and_uncongested() {
    let mut ch = LoopbackChannel::new(1e9).unwrap();
    let sched = single_rate_schedule(100e6, 200, 1000, 0);
    assert_eq!(sched[1] - sched[0], 80_000);
    let p = ch
        .probe(&StreamRequest::from_send_times(&sched, 1000))
        .unwrap();
    let s = &p.stream;
    assert_eq!(s.len(), 200);
    assert_eq!(s.received_count(), 200, "lost on loopback: {:?}", ch.drops);
    let diffs: Vec<f64> = s
        .packets
        .windows(2)
        .map(|w| {
            let send = (w[1].send_ns - w[0].send_ns) as f64;
            let recv = (w[1].recv_ns.unwrap() - w[0].recv_ns.unwrap()) as f64;
            (recv - send).abs()
        })
        .collect();
    assert!(
        median(diffs.clone()) < 2_000.0,
        "median |recv - send| gap {} ns",
        median(diffs)
    );
    // The sender kept the schedule on average (stalls are rare and short).
    let span = (s.packets[199].send_ns - s.packets[0].send_ns) as f64;
    assert!(
        (span / (199.0 * 80_000.0) - 1.0).abs() < 0.05,
        "span {span}"
    );
    let a = analyze(
        s,
        StreamKind::SingleRate,
        Method::PrcmtBass,
        &AnalysisParams::default(),
    );
    assert_eq!(a.decision, Some(Decision::Below), "{a:?}");
    assert_eq!(ch.drops.total(), 0);
}

/// Garbage, foreign datagrams and another session's probes are counted by
/// reason and do not disturb the stream.
#[test]
fn foreign_packets_are_counted_not_used() {
    let mut ch = LoopbackChannel::new(1e9).unwrap();
    let to = ch.receiver_addr();
    let other = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    other.send_to(&[1, 2, 3], to).unwrap(); // too short
    other.send_to(&[0u8; 100], to).unwrap(); // no magic
    let mut foreign = vec![0u8; 100];
    ProbeRepr {
        sequence: 1,
        timestamp: Default::default(),
        error_estimate: tightlink_wire::ErrorEstimate::from_u16(1),
        warmup: false,
        session: 42,
        stream: 0,
        position: 0,
        stream_len: 10,
        offset_ns: 0,
    }
    .emit(&mut SenderPacket::new_unchecked(&mut foreign[..]));
    other.send_to(&foreign, to).unwrap(); // unknown session
    let sched = single_rate_schedule(50e6, 20, 500, 0);
    let p = ch
        .probe(&StreamRequest::from_send_times(&sched, 500))
        .unwrap();
    assert_eq!(p.stream.received_count(), 20);
    assert_eq!(ch.drops.get(DropReason::TooShort), 1);
    assert_eq!(ch.drops.get(DropReason::NotTightlink), 1);
    assert_eq!(ch.drops.get(DropReason::UnknownSession), 1);
    assert_eq!(ch.drops.total(), 3);
}

#[test]
fn probes_smaller_than_the_header_are_refused() {
    let mut ch = LoopbackChannel::new(1e9).unwrap();
    let sched = single_rate_schedule(50e6, 5, 40, 0);
    let e = ch
        .probe(&StreamRequest::from_send_times(&sched, 40))
        .unwrap_err();
    assert!(e.to_string().contains("48-byte header"), "{e}");
}
