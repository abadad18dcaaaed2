//! The simulated path end to end: FIFO order, conservation, truth, drops,
//! determinism and the shape of coalesced receive gaps.

use tightlink_sim::cross::{CrossModel, CrossSpec, OnOffParams, SizeMix};
use tightlink_sim::hop::HopSpec;
use tightlink_sim::path::{HopConfig, JitterSpec, PathSpec};
use tightlink_sim::receiver::ReceiverSpec;
use tightlink_sim::{parse_sim_target, IcmpSpec, SimPath, TtlOutcome, TtlPacket};

fn schedule(rate_bps: f64, n: usize, size: u32) -> (Vec<i64>, Vec<u32>) {
    let gap = size as f64 * 8e9 / rate_bps;
    (
        (0..n).map(|i| (i as f64 * gap).round() as i64).collect(),
        vec![size; n],
    )
}

fn one_hop(capacity: f64, cross: Option<CrossSpec>, buffer: u64) -> PathSpec {
    PathSpec {
        hops: vec![HopConfig {
            hop: HopSpec {
                capacity_bps: capacity,
                buffer_bytes: buffer,
                propagation_ns: 10_000.0,
                shaper: None,
            },
            cross,
        }],
        jitter: JitterSpec::none(),
        receiver: ReceiverSpec {
            coalescence_ns: None,
            ..Default::default()
        },
        ..PathSpec::default()
    }
}

#[test]
fn fifo_order_is_kept_through_every_hop() {
    let mut p = SimPath::new(
        parse_sim_target("sim:hops=40G+10G+10G,cross=poisson:5G+bursty:3G+cbr:2G,coalescence=off")
            .unwrap(),
    );
    for id in 0..20 {
        let (o, s) = schedule(9e9, 200, 9000);
        let st = p.send_stream(id, &o, &s).stream;
        let recv: Vec<i64> = st.packets.iter().filter_map(|x| x.recv_ns).collect();
        assert!(
            recv.windows(2).all(|w| w[0] <= w[1]),
            "stream {id} reordered"
        );
    }
}

#[test]
fn bits_are_conserved_at_every_hop() {
    let mut p = SimPath::new(
        parse_sim_target("sim:hops=10G+10G,cross=bursty:4G+smoothed:3G,buffer=200KB").unwrap(),
    );
    for id in 0..30 {
        let (o, s) = schedule(9.5e9, 300, 9000);
        p.send_stream(id, &o, &s);
    }
    let stats = p.hop_stats();
    for (k, h) in stats.iter().enumerate() {
        // Offered = departed + dropped + still queued; nothing appears or vanishes.
        let queued = h.offered_bytes - h.departed_bytes - h.dropped_bytes;
        assert!(queued <= 200_000, "hop {k}: {queued} bytes queued > buffer");
        assert!(h.offered_packets > 1000);
    }
    // What left hop 0 as probes is what hop 1 was offered as probes.
    let probe_out_0 = stats[0].offered_bytes - stats[0].dropped_bytes;
    assert!(stats[1].offered_bytes >= probe_out_0 - 300 * 9000 * 30);
}

#[test]
fn without_probe_load_the_truth_is_capacity_minus_cross() {
    for (model, tol) in [
        (CrossModel::Cbr { size_bytes: 1500 }, 0.01),
        (
            CrossModel::Poisson {
                sizes: SizeMix::web(),
            },
            0.02,
        ),
    ] {
        let spec = one_hop(
            10e9,
            Some(CrossSpec {
                model: model.clone(),
                rate_bps: 3e9,
                step: None,
            }),
            1_000_000,
        );
        let mut p = SimPath::new(spec);
        // Two packets 50 ms apart: a window of cross traffic, no probe load.
        let t = p.send_stream(0, &[0, 50_000_000], &[64, 64]).truth.unwrap();
        assert!(
            (t.available_bps / 7e9 - 1.0).abs() < tol,
            "{model:?}: {}",
            t.available_bps
        );
        assert!(t.min_bps <= t.available_bps && t.available_bps <= t.max_bps);
    }
}

#[test]
fn probe_congestion_does_not_change_the_truth() {
    // CBR 2.4 Gbit/s: truth 7.6 whether the probe is at 5 or at 9.5 Gbit/s.
    let spec = one_hop(
        10e9,
        Some(CrossSpec {
            model: CrossModel::Cbr { size_bytes: 1500 },
            rate_bps: 2.4e9,
            step: None,
        }),
        10_000_000,
    );
    let mut p = SimPath::new(spec);
    for rate in [5e9, 9.5e9] {
        let (o, s) = schedule(rate, 500, 9000);
        let t = p.send_stream(0, &o, &s).truth.unwrap();
        assert!(
            (t.available_bps / 7.6e9 - 1.0).abs() < 0.01,
            "{rate}: {}",
            t.available_bps
        );
    }
}

#[test]
fn drops_happen_only_when_the_buffer_is_full() {
    // 20 Gbit/s of probes into 10 Gbit/s: a 90 KB buffer overflows, 10 MB does not.
    for (buffer, want_drops) in [(90_000u64, true), (10_000_000, false)] {
        let mut p = SimPath::new(one_hop(10e9, None, buffer));
        let (o, s) = schedule(20e9, 400, 9000);
        let st = p.send_stream(0, &o, &s).stream;
        let lost = st.packets.iter().filter(|x| x.recv_ns.is_none()).count();
        let h = p.hop_stats()[0];
        assert_eq!(lost > 0, want_drops, "buffer {buffer}: {lost} lost");
        assert!(h.max_backlog_bytes <= buffer);
        if want_drops {
            // A drop leaves the buffer within one packet of full.
            assert!(
                h.max_backlog_bytes > buffer - 9000,
                "{}",
                h.max_backlog_bytes
            );
            // The first loss comes once the queue has grown: 400 packets at
            // twice the capacity queue half of what arrived.
            let first_lost = st.packets.iter().position(|x| x.recv_ns.is_none()).unwrap();
            assert!(
                first_lost >= (buffer / 9000) as usize,
                "first loss at {first_lost}"
            );
        }
    }
}

#[test]
fn the_same_seed_gives_the_same_trace() {
    let run = |seed: u64| {
        let mut p = SimPath::new(parse_sim_target(&format!("sim:seed={seed}")).unwrap());
        (0..5)
            .map(|id| {
                let (o, s) = schedule(7e9, 64, 9000);
                p.send_stream(id, &o, &s)
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(run(3), run(3));
    assert_ne!(run(3), run(4));
}

#[test]
fn coalescence_makes_spikes_and_dips() {
    let mut spec = one_hop(10e9, None, 1_000_000);
    spec.receiver = ReceiverSpec {
        coalescence_ns: Some(125_000.0),
        per_packet_ns: 300.0,
        ..Default::default()
    };
    let mut p = SimPath::new(spec);
    // 6 Gbit/s, 9000 B: 12 us send gaps, about 10 packets per interrupt.
    let (o, s) = schedule(6e9, 320, 9000);
    let st = p.send_stream(0, &o, &s).stream;
    let gaps: Vec<f64> = st.gaps().iter().map(|g| g.recv_ns).collect();
    let spikes = gaps.iter().filter(|&&g| g > 100_000.0).count();
    let dips = gaps.iter().filter(|&&g| (g - 300.0).abs() < 1.0).count();
    // Every gap is one or the other.
    assert_eq!(spikes + dips, gaps.len());
    // One spike per interrupt interval: span 3.83 ms / 125 us = 30.6.
    assert!((29..=32).contains(&spikes), "{spikes} spikes");
    // Each spike is followed by dips: a spike never follows a spike.
    assert!(gaps
        .windows(2)
        .all(|w| !(w[0] > 100_000.0 && w[1] > 100_000.0)));
}

#[test]
fn an_overloaded_link_leaves_nothing_not_less() {
    // 15 Gbit/s of CBR into a 10 Gbit/s link with room to queue it all:
    // 5 Gbit/s more arrives than leaves, and the truth is zero, as are
    // its sub-windows' ends.
    let spec = one_hop(
        10e9,
        Some(CrossSpec {
            model: CrossModel::Cbr { size_bytes: 1500 },
            rate_bps: 15e9,
            step: None,
        }),
        1_000_000_000,
    );
    let mut p = SimPath::new(spec);
    let (o, s) = schedule(1e9, 100, 1500);
    let t = p.send_stream(0, &o, &s).truth.unwrap();
    assert_eq!((t.available_bps, t.min_bps, t.max_bps), (0.0, 0.0, 0.0));
}

#[test]
fn bursty_cross_traffic_moves_the_truth_between_streams() {
    let spec = one_hop(
        10e9,
        Some(CrossSpec {
            model: CrossModel::Bursty(OnOffParams::default()),
            rate_bps: 2.5e9,
            step: None,
        }),
        1_000_000,
    );
    let mut p = SimPath::new(spec);
    let truths: Vec<f64> = (0..200)
        .map(|id| {
            let (o, s) = schedule(5e9, 64, 9000);
            p.send_stream(id, &o, &s).truth.unwrap().available_bps
        })
        .collect();
    let mean = truths.iter().sum::<f64>() / truths.len() as f64;
    let spread = truths.iter().map(|t| (t - mean).abs()).sum::<f64>() / truths.len() as f64;
    // Around 7.5 on average, and visibly varying from stream to stream.
    assert!((mean / 7.5e9 - 1.0).abs() < 0.08, "mean {mean}");
    assert!(spread > 0.2e9, "mean deviation {spread}");
}

/// Two links, 100 then 50 Mbit/s, 1 us each, no cross traffic or jitter;
/// routers answer in exactly 10 us. A 1000 B probe with TTL 1: 80 us on
/// link 1 + 1 us, 10 us, then the 576 B reply back over link 1 (46.08 us
/// plus 1 us) = 138.08 us. TTL 2 reaches the receiver: 81 + 160 + 1 +
/// 10, back over link 2 (92.16 + 1) and link 1 (47.08) = 392.24 us.
#[test]
fn ttl_limited_probes_are_answered_by_the_hop_they_expire_at() {
    let mut spec = one_hop(100e6, None, 1_000_000);
    let mut second = spec.hops[0].clone();
    second.hop.capacity_bps = 50e6;
    second.hop.propagation_ns = 1_000.0;
    spec.hops[0].hop.propagation_ns = 1_000.0;
    spec.hops.push(second);
    spec.icmp = IcmpSpec {
        reply_delay_ns: 10_000.0,
        reply_jitter_mean_ns: 0.0,
        reverse_queue_share: 0.0,
        reverse_queue_mean_ns: 0.0,
    };
    let mut p = SimPath::new(spec);
    let packets = [
        TtlPacket {
            offset_ns: 0,
            size_bytes: 1000,
            ttl: 1,
        },
        TtlPacket {
            offset_ns: 1_000_000,
            size_bytes: 1000,
            ttl: 2,
        },
        TtlPacket {
            offset_ns: 2_000_000,
            size_bytes: 1000,
            ttl: 9,
        },
    ];
    let out = p.send_ttl_stream(&packets);
    let rtt = |o: &TtlOutcome| o.reply.expect("answered").at_ns - o.send_ns;
    assert_eq!(rtt(&out[0]), 138_080);
    assert_eq!(out[0].reply.unwrap().hop, 1);
    assert!(!out[0].reply.unwrap().destination);
    assert_eq!(rtt(&out[1]), 392_240);
    assert!(out[1].reply.unwrap().destination);
    // Any TTL beyond the path ends at the receiver too.
    assert_eq!(rtt(&out[2]), 392_240);
    assert_eq!(out[2].reply.unwrap().hop, 2);
}

/// A probe behind a head on a 600 Mbit/s token bucket (3000 B) in front of
/// a 10 Gbit/s link: the head of 10 x 1500 B empties the bucket, so the
/// probe waits for its own tokens before its 10 Gbit/s serialisation:
/// 13.33 + 0.8 ns per byte, where a lone probe sees the link's 0.8 ns/B
/// (900 B apart: 12.72 us vs 0.72 us).
#[test]
fn a_probe_behind_a_head_waits_for_its_own_tokens() {
    let mut spec = one_hop(10e9, None, 1_000_000);
    spec.hops[0].hop.shaper = Some(tightlink_sim::hop::TokenBucket {
        rate_bps: 600e6,
        bucket_bytes: 3000,
    });
    spec.hops[0].hop.propagation_ns = 0.0;
    spec.icmp = IcmpSpec {
        reply_delay_ns: 0.0,
        reply_jitter_mean_ns: 0.0,
        reverse_queue_share: 0.0,
        reverse_queue_mean_ns: 0.0,
    };
    let mut p = SimPath::new(spec);
    let arrival = |p: &mut SimPath, size: u32, heads: usize| {
        let mut v: Vec<TtlPacket> = (0..heads)
            .map(|_| TtlPacket {
                offset_ns: 0,
                size_bytes: 1500,
                ttl: 255,
            })
            .collect();
        v.push(TtlPacket {
            offset_ns: 0,
            size_bytes: size,
            ttl: 1,
        });
        let out = p.send_ttl_stream(&v);
        let o = out.last().unwrap();
        // Less the reply's 576 B back over 10 Gbit/s (460.8 ns).
        (o.reply.unwrap().at_ns - o.send_ns) as f64 - 460.8
    };
    // 600 B, not less: smaller probes get smaller replies (the quote).
    let lone = arrival(&mut p, 1500, 0) - arrival(&mut p, 600, 0);
    assert!((lone - 720.0).abs() < 2.0, "{lone}");
    let behind = arrival(&mut p, 1500, 10) - arrival(&mut p, 600, 10);
    assert!(
        (behind - 900.0 * (40.0 / 3.0 + 0.8)).abs() < 2.0,
        "{behind}"
    );
}

/// Random loss on an idle path: 5 % of 20 x 200 packets lost (binomial:
/// mean 200, sd 13.8, so 150..250 is over 3.6 sd either way), spread over
/// the streams, and the truth untouched. Without `loss` nothing is lost.
#[test]
fn random_loss_drops_its_share_and_leaves_the_truth() {
    let (offsets, sizes) = schedule(1e9, 200, 1500);
    let lost = |spec: PathSpec| {
        let mut p = SimPath::new(spec);
        let (mut lost, mut streams_with_loss) = (0, 0);
        for id in 0..20 {
            let s = p.send_stream(id, &offsets, &sizes);
            let l = s.stream.len() - s.stream.received_count();
            lost += l;
            streams_with_loss += usize::from(l > 0);
            let t = s.truth.expect("packets crossed");
            assert!((t.available_bps - 10e9).abs() < 1.0, "{t:?}");
        }
        (lost, streams_with_loss)
    };
    let quiet = || one_hop(10e9, None, 1_000_000);
    let (l, spread) = lost(PathSpec {
        random_loss: 0.05,
        ..quiet()
    });
    assert!(
        (150..=250).contains(&l) && spread >= 18,
        "{l} lost in {spread} streams"
    );
    assert_eq!(lost(quiet()).0, 0);
}

/// CBR cross traffic steps from 2 to 5 Gbit/s 10 ms into a 10 Gbit/s
/// link; a light stream (64-byte packets every 100 us) sent in two parts
/// of 10 ms, one either side of the step: the parts read 8 and 5 Gbit/s,
/// the whole stream their mean, 6.5.
#[test]
fn each_part_of_a_stream_has_its_own_truth() {
    let mut spec = one_hop(
        10e9,
        Some(CrossSpec {
            model: CrossModel::Cbr { size_bytes: 1500 },
            rate_bps: 2e9,
            step: Some(tightlink_sim::cross::Step {
                at_ns: 10e6,
                rate_bps: 5e9,
            }),
        }),
        1_000_000,
    );
    spec.warmup_ns = 0.0;
    let mut p = SimPath::new(spec);
    let offsets: Vec<i64> = (0..200).map(|i| i * 100_000).collect();
    let s = p.send_stream_in_parts(0, &offsets, &[64; 200], &[0, 100]);
    let parts: Vec<f64> = s.part_truths_bps.iter().map(|t| t.unwrap()).collect();
    let whole = s.truth.unwrap().available_bps;
    for (got, want) in parts.iter().chain([&whole]).zip([8e9, 5e9, 6.5e9]) {
        assert!((got / want - 1.0).abs() < 0.01, "{parts:?} {whole}");
    }
    // Without parts, none; the same stream's truth either way.
    let mut q = SimPath::new(p.spec().clone());
    let t = q.send_stream(0, &offsets, &[64; 200]);
    assert!(t.part_truths_bps.is_empty());
    assert_eq!(t.truth.unwrap().available_bps, whole);
}

/// The parts tile the stream's window at the tight link, so the whole
/// stream's truth is a time-weighted mean of its parts' and lies between
/// them (bursty cross traffic, five sub-streams at 5-9 Gbit/s).
#[test]
fn a_streams_truth_lies_between_its_parts_truths() {
    let mut p = SimPath::new(parse_sim_target("sim:seed=3").unwrap());
    for id in 0..100 {
        let mut offsets = Vec::new();
        let mut t = 0.0f64;
        for rate in [5e9, 6e9, 7e9, 8e9, 9e9] {
            for _ in 0..64 {
                offsets.push(t.round() as i64);
                t += 9000.0 * 8e9 / rate;
            }
        }
        let s = p.send_stream_in_parts(id, &offsets, &[9000; 320], &[0, 64, 128, 192, 256]);
        let whole = s.truth.unwrap().available_bps;
        let parts: Vec<f64> = s.part_truths_bps.iter().map(|t| t.unwrap()).collect();
        assert_eq!(parts.len(), 5);
        let lo = parts.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = parts.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        assert!(
            lo * 0.999 <= whole && whole <= hi * 1.001,
            "{whole} {parts:?}"
        );
    }
}

/// A sender that stalls 1 ms in every stream: 10 packets of 1500 B every
/// 100 us on a free 10 Gbit/s hop. The packets due during the stall
/// leave together at its end, so they arrive 1.2 us apart (their
/// serialisation), and the worst lag is 0.9-1 ms (the stall starts
/// within a gap before the first packet it holds); without stalls
/// nothing lags.
#[test]
fn a_stalled_sender_sends_what_fell_due_together() {
    let (offsets, sizes) = schedule(120e6, 10, 1500);
    let mut spec = one_hop(10e9, None, 1_000_000);
    spec.stall_share = 1.0;
    spec.stall_ns = 1e6;
    let mut p = SimPath::new(spec.clone());
    for id in 0..5 {
        let s = p.send_stream(id, &offsets, &sizes);
        assert!(
            (900e3..=1e6).contains(&s.worst_lag_ns),
            "{}",
            s.worst_lag_ns
        );
        let recv: Vec<i64> = s
            .stream
            .packets
            .iter()
            .map(|k| k.recv_ns.unwrap())
            .collect();
        let gaps: Vec<i64> = recv.windows(2).map(|w| w[1] - w[0]).collect();
        // The held packets: every gap after the first one shortened.
        let first_held = gaps.iter().position(|&g| g > 100_000).map_or(0, |i| i + 1);
        assert!(gaps[first_held..].iter().all(|&g| g == 1_200), "{gaps:?}");
    }
    spec.stall_share = 0.0;
    let mut p = SimPath::new(spec);
    assert_eq!(p.send_stream(0, &offsets, &sizes).worst_lag_ns, 0.0);
}
