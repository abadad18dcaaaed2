//! Capacity methods through the simulated channel: the reference path (a
//! 10 Gbit/s narrow link behind a 40 Gbit/s first hop, 30 % cross
//! traffic), and what they say when the receiver batches.

use tightlink_core::channel::{Channel, ChannelError, ChannelInfo, Probed, StreamRequest};
use tightlink_core::warning::WarningCode;
use tightlink_core::Bound;
use tightlink_probe::capacity::{CapacityMethod, CapacityParams, CapacityStop};
use tightlink_sim::SimChannel;

fn channel(spec: &str) -> SimChannel {
    SimChannel::new(tightlink_sim::parse_sim_target(spec).unwrap(), spec)
}

#[test]
fn both_methods_within_2_percent_behind_a_faster_first_hop() {
    for cross in ["bursty:3G", "poisson:3G", "cbr:3G"] {
        for seed in 1..=3 {
            let spec = format!("sim:hops=40G+10G,cross=none+{cross},coalescence=off,seed={seed}");
            for m in ["pathrate", "capprobe"] {
                let r = m
                    .parse::<CapacityMethod>()
                    .unwrap()
                    .run(&mut channel(&spec), CapacityParams::default())
                    .unwrap();
                let c = r.capacity_bps.unwrap();
                assert_eq!(r.bound, Bound::Exact, "{spec} {m}: {r:?}");
                assert_eq!(r.truth_bps, Some(10e9));
                assert!((c / 10e9 - 1.0).abs() <= 0.02, "{spec} {m}: {c}");
                assert!(r.low_bps <= c && c <= r.high_bps);
                assert!(r.warnings.is_empty(), "{spec} {m}: {:?}", r.warnings);
                if m == "capprobe" {
                    assert_eq!(r.stop, CapacityStop::Converged);
                    // The paper's point (Fig. 2): CapProbe needs far fewer probes.
                    assert!(r.pairs_sent <= 200, "{}", r.pairs_sent);
                } else {
                    // Pathrate's ADR is a lower bound below the capacity.
                    let adr = r.adr_bps.unwrap();
                    assert!(adr < 10e9 && adr > 5e9, "{adr}");
                }
            }
        }
    }
}

/// With 125 us interrupt coalescence the pairs are stamped in batches:
/// neither method may answer a pair figure; Pathrate falls back to the
/// trains' batch-robust dispersion rate as a lower bound.
#[test]
fn coalescence_is_named_not_answered() {
    let spec = "sim:hops=40G+10G,cross=none+bursty:3G";
    let p = "pathrate"
        .parse::<CapacityMethod>()
        .unwrap()
        .run(&mut channel(spec), CapacityParams::default())
        .unwrap();
    assert_eq!(
        (p.bound, p.stop),
        (Bound::AtLeast, CapacityStop::ReceiverBatching)
    );
    let lower = p.capacity_bps.unwrap();
    assert!(lower <= 10e9 * 1.01 && lower > 7e9, "{lower}");
    assert!(p
        .warnings
        .iter()
        .any(|w| w.code == WarningCode::SizeScaling && w.text.contains("coalescence")));
    let c = "capprobe"
        .parse::<CapacityMethod>()
        .unwrap()
        .run(&mut channel(spec), CapacityParams::default())
        .unwrap();
    assert_eq!((c.bound, c.capacity_bps), (Bound::None, None));
    assert!(c.warnings.iter().any(|w| w.text.contains("batch")));
    // It gave up after its first pair stream (after the shaper check),
    // and batches did not pass for a bucket.
    assert_eq!(c.cost.streams, CapacityParams::default().shaper_trains + 1);
    assert!(p.shaper.is_none() && c.shaper.is_none());
}

/// Quiet path without coalescence, a single hop: Pathrate's unimodal
/// quick termination skips phase II (only the shaper check's trains go).
#[test]
fn a_clean_path_ends_pathrate_early() {
    let spec = "sim:hops=10G,cross=none,coalescence=off";
    let r = "pathrate"
        .parse::<CapacityMethod>()
        .unwrap()
        .run(&mut channel(spec), CapacityParams::default())
        .unwrap();
    assert_eq!(r.stop, CapacityStop::Unimodal);
    assert_eq!(r.trains, CapacityParams::default().shaper_trains);
    assert_eq!(r.shaper, None);
    assert!((r.capacity_bps.unwrap() / 10e9 - 1.0).abs() < 0.005);
}

/// A 2 Gbit/s token bucket of 30 KB on a 10 Gbit/s hop with 30 % bursty
/// cross traffic: lone pairs would pass on the bucket at 10 Gbit/s; both
/// methods find the shaper in the trains and answer its rate.
#[test]
fn a_token_bucket_is_found_and_its_rate_answered() {
    for seed in 1..=2 {
        let spec = format!(
            "sim:hops=40G+10G,shaper=none+2G/30KB,cross=none+bursty:600M,coalescence=off,seed={seed}"
        );
        for m in ["pathrate", "capprobe"] {
            let r = m
                .parse::<CapacityMethod>()
                .unwrap()
                .run(&mut channel(&spec), CapacityParams::default())
                .unwrap();
            assert_eq!(r.truth_bps, Some(2e9));
            let c = r.capacity_bps.unwrap();
            assert_eq!(r.bound, Bound::Exact, "{spec} {m}: {r:?}");
            assert!((c / 2e9 - 1.0).abs() <= 0.02, "{spec} {m}: {c}");
            let s = r.shaper.expect("shaper found");
            // The trains' tails: the token rate less the cross share.
            assert!(s.rate_bps <= 2e9 * 1.01 && s.rate_bps > 1.5e9, "{s:?}");
            assert!((s.bucket_bytes / 30e3 - 1.0).abs() <= 0.2, "{s:?}");
        }
    }
}

/// CapProbe settles only when two pair streams in a row agree; with
/// pairs for one stream it runs out first and claims no number, saying
/// why, where it used to answer the last reading as exact.
#[test]
fn capprobe_out_of_pairs_claims_no_number() {
    let spec = "sim:hops=40G+10G,cross=none+bursty:3G,coalescence=off,seed=1";
    let p = CapacityParams::default();
    let one_stream = CapacityParams {
        capprobe_max_pairs: p.pairs_per_stream,
        ..p
    };
    let r = "capprobe"
        .parse::<CapacityMethod>()
        .unwrap()
        .run(&mut channel(spec), one_stream)
        .unwrap();
    assert_eq!(r.stop, CapacityStop::Budget);
    assert_eq!((r.bound, r.capacity_bps), (Bound::None, None), "{r:?}");
    assert_eq!(r.pairs_sent, p.pairs_per_stream);
    assert!(
        r.warnings.iter().any(|w| w.code == WarningCode::Unsettled),
        "{:?}",
        r.warnings
    );
}

/// A receiver whose stamps of every stream come `squeeze` times closer
/// together than the packets arrived (a host stalled while they came in,
/// stamping them in a rush after).
struct Squeezed {
    inner: SimChannel,
    squeeze: i64,
}

impl Channel for Squeezed {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let mut p = self.inner.probe(request)?;
        let first = p.stream.packets.iter().find_map(|k| k.recv_ns);
        for k in &mut p.stream.packets {
            if let (Some(r), Some(f)) = (k.recv_ns.as_mut(), first) {
                *r = f + (*r - f) / self.squeeze;
            }
        }
        Ok(p)
    }
    fn info(&self) -> ChannelInfo {
        self.inner.info()
    }
    fn elapsed_ns(&self) -> i64 {
        self.inner.elapsed_ns()
    }
}

/// Behind a 2 Gbit/s bucket, stamps squeezed 20 times: the trains' tails
/// read 40 Gbit/s from a sender of 10. No shaper is assumed at a rate no
/// train was sent at, and that is said; no capacity is claimed over the
/// shaper's. (Before, Pathrate answered "at least 40 Gbit/s".)
#[test]
fn tails_faster_than_the_sender_are_no_shaper() {
    let spec = "sim:hops=10G,shaper=2G/30KB,cross=none,coalescence=off,seed=1";
    for m in ["pathrate", "capprobe"] {
        let mut ch = Squeezed {
            inner: channel(spec),
            squeeze: 20,
        };
        assert_eq!(ch.info().max_rate_bps, 10e9);
        let r = m
            .parse::<CapacityMethod>()
            .unwrap()
            .run(&mut ch, CapacityParams::default())
            .unwrap();
        assert_eq!(r.shaper, None, "{m}: {r:?}");
        assert!(
            r.warnings.iter().any(|w| w.code == WarningCode::FastTails),
            "{m}: {:?}",
            r.warnings
        );
        // Nothing claimed, or a lower bound that holds the 2 Gbit/s.
        match r.bound {
            Bound::None => assert_eq!(r.capacity_bps, None),
            Bound::AtLeast => assert!(r.capacity_bps.unwrap() <= 2e9, "{m}: {r:?}"),
            _ => panic!("{m}: {r:?}"),
        }
    }
}
