//! `tightlink analyze-tcp` on captures written here: a hand-made flow
//! whose answers are worked out in the test, and broken captures that
//! must name the packet.

use tightlink_capture::write::{pcap, Tcp4};

mod common;
use common::tightlink_text as tightlink;

/// Writes `bytes` to `name` in a fresh scratch directory: (the directory,
/// removed when it drops; the file's path).
fn file(name: &str, bytes: &[u8]) -> (tempfile::TempDir, String) {
    let dir = common::scratch("atcp");
    let p = dir.path().join(name);
    std::fs::write(&p, bytes).unwrap();
    (dir, p.to_string_lossy().into_owned())
}

fn seg(t_us: u64, data: bool, seq: u32, ack: u32, len: u16) -> Tcp4 {
    let (a, b) = (([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 5201));
    Tcp4 {
        t_ns: t_us * 1000,
        src: if data { a } else { b },
        dst: if data { b } else { a },
        seq,
        ack,
        flags: 0x10,
        payload_bytes: len,
    }
}

/// 1000-byte segments sent every 4 us, ACKed one each every 9 us from
/// 100 us on (a bottleneck of one 1054-byte frame per 9 us, its queue
/// growing: segment k's RTT is 100 + 5k us); segment 50 is lost: the
/// rest are duplicate ACKs, it is resent at 1000 us and the ACK at 1100
/// covers everything. So: RTTmin 100 us, RTT before the loss 340 us
/// (the median of segments 47-49's 335, 340, 345), one loss event, judged
/// congestion (the first sets RTTcong), buffer delay 240 us. ACK pairs: 49 before the loss (the
/// recovery's ACK is none), all back to back (data 4 us apart, ACKs 9);
/// those whose second segment k waited >= 18 us over the minimum (5k >= 18,
/// 46 pairs) are queued; each is one 1054-byte frame per 9 us = 936.9
/// Mbit/s, which is the answer (queued pairs, >= 20 of them). CapProbe
/// over the back-to-back ones agrees (first pair, delay sum 100 + 105).
#[test]
fn a_hand_made_flow() {
    let mut pkts = Vec::new();
    for k in 0..100u32 {
        pkts.push(seg(4 * k as u64, true, 1000 + 1000 * k, 1, 1000));
        if k == 50 {
            continue;
        }
        let t_ack = 100 + 9 * k as u64;
        let ack = if k > 50 {
            1000 + 1000 * 50
        } else {
            2000 + 1000 * k
        };
        pkts.push(seg(t_ack, false, 1, ack, 0));
    }
    pkts.push(seg(1000, true, 1000 + 1000 * 50, 1, 1000));
    pkts.push(seg(1100, false, 1, 1000 + 1000 * 100, 0));
    pkts.sort_by_key(|p| p.t_ns);
    let (_dir, f) = file("flow.pcap", &pcap(&pkts));
    let (ok, out, err) = tightlink(&["analyze-tcp", &f, "--format", "json"]);
    assert!(ok, "{err}");
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(j["flow"], "10.0.0.1:40000-10.0.0.2:5201");
    assert_eq!(j["data_bytes"], 100_000);
    assert_eq!(j["loss_events"], 1);
    assert_eq!(j["congestion_losses"], 1);
    assert!((j["rtt_min_ms"].as_f64().unwrap() - 0.1).abs() < 1e-9);
    assert!((j["losses"][0]["rtt_before_ms"].as_f64().unwrap() - 0.340).abs() < 1e-9);
    assert!((j["buffer_delay_ms"].as_f64().unwrap() - 0.240).abs() < 1e-9);
    let c = j["capacity_bps"].as_f64().unwrap();
    assert!((c - 1054.0 * 8.0 / 9e-6).abs() < 1.0, "{c}");
    assert_eq!(j["capacity_source"], "queued pairs");
    assert_eq!(j["ack_pairs_seen"], 49);
    assert_eq!(j["queued_pairs"], 46);
    assert_eq!(j["back_to_back_pairs"], 49);
    assert_eq!(j["back_to_back_converged"], true);
    assert!((j["back_to_back_bps"].as_f64().unwrap() - c).abs() < 1.0);
    // Buffer = 240 us at 936.9 Mbit/s = 28 107 bytes.
    assert!((j["buffer_bytes"].as_f64().unwrap() - 240e-6 * c / 8.0).abs() < 1e-6);
    let series = j["series"].as_array().unwrap();
    assert!(!series.is_empty());
    // Summary and CSV print too.
    let (ok, out, _) = tightlink(&["analyze-tcp", &f]);
    assert!(ok && out.contains("1 congestion, 0 random"), "{out}");
    let (ok, out, _) = tightlink(&["analyze-tcp", &f, "--format", "csv"]);
    assert!(ok && out.starts_with("t_s,rtt_ms,be_bps,re_bps,ere_bps,level\n"));
    assert_eq!(out.lines().count(), series.len() + 1);
    // --plot writes a PNG; an unwritable path is an error naming it.
    let png = format!("{f}.png");
    let (ok, _, err) = tightlink(&["analyze-tcp", &f, "--plot", &png]);
    assert!(ok, "{err}");
    assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
    let (ok, _, err) = tightlink(&["analyze-tcp", &f, "--plot", "/nonexistent/dir/x.png"]);
    assert!(
        !ok && err.contains("--plot /nonexistent/dir/x.png"),
        "{err}"
    );
    // A capacity given overrides TCPProbe's.
    let (ok, out, _) = tightlink(&["analyze-tcp", &f, "--format", "json", "--capacity", "1G"]);
    let j: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert!(ok && j["capacity_source"] == "--capacity");
    assert!((j["buffer_bytes"].as_f64().unwrap() - 240e-6 * 1e9 / 8.0).abs() < 1e-6);
}

#[test]
fn broken_or_empty_captures_are_refused_with_reasons() {
    let good = seg(0, true, 1, 1, 100);
    let mut bytes = pcap(&[good, good]);
    bytes.truncate(bytes.len() - 10);
    let (_dir, f) = file("cut.pcap", &bytes);
    let (ok, _, err) = tightlink(&["analyze-tcp", &f]);
    assert!(!ok && err.contains("cut.pcap: packet 2"), "{err}");
    // An IPv4 packet that is UDP: no TCP flow.
    let mut frame = tightlink_capture::write::frame(&good);
    frame[14 + 9] = 17;
    let mut w = pcap_file_write(&frame);
    let (_dir, f) = file("udp.pcap", &std::mem::take(&mut w));
    let (ok, _, err) = tightlink(&["analyze-tcp", &f]);
    assert!(
        !ok && err.contains("no TCP flow in 1 packets (1 not TCP)"),
        "{err}"
    );
    let (_dir, f) = file("junk.pcap", b"this is not a capture");
    let (ok, _, err) = tightlink(&["analyze-tcp", &f]);
    assert!(
        !ok && err.contains("junk.pcap") && err.contains("neither pcap nor pcapng"),
        "{err}"
    );
    let (ok, _, err) = tightlink(&["analyze-tcp", "/nonexistent.pcap"]);
    assert!(!ok && err.contains("/nonexistent.pcap"), "{err}");
    let (_dir, f) = file("one.pcap", &pcap(&[good]));
    let (ok, _, err) = tightlink(&["analyze-tcp", &f, "--flow", "7"]);
    assert!(
        !ok && err.contains("--flow 7") && err.contains("10.0.0.1:40000"),
        "{err}"
    );
}

fn pcap_file_write(frame: &[u8]) -> Vec<u8> {
    let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
    w.write_packet(&pcap_file::pcap::PcapPacket::new(
        std::time::Duration::ZERO,
        frame.len() as u32,
        frame,
    ))
    .unwrap();
    w.into_writer()
}
