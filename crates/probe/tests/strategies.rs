//! Every strategy through the simulated channel, against the simulator's
//! ground truth.

use tightlink_core::channel::{
    Channel, ChannelError, ChannelInfo, Probed, Recorder, StreamRequest, TraceChannel,
};
use tightlink_core::{AnalysisParams, Bound, ProbeStream};
use tightlink_probe::strategy;
use tightlink_probe::strategy::{ShaperSeen, Stop};
use tightlink_probe::{Budget, Report};
use tightlink_sim::{parse_sim_target, SimChannel};

fn run(target: &str, strategy: &str) -> Report {
    run_recorded(target, strategy).0
}

/// The report and every stream the run sent.
fn run_recorded(target: &str, strategy: &str) -> (Report, Vec<ProbeStream>) {
    let spec = parse_sim_target(target).unwrap();
    // queue-fit is given the simulated tight link's capacity.
    let a = AnalysisParams {
        capacity_bps: (strategy == "queue-fit").then(|| spec.tight_capacity_bps()),
        ..AnalysisParams::default()
    };
    let mut ch = Recorder::new(SimChannel::new(spec, target));
    let mut progress = |_: f64| {};
    let method: strategy::Method = strategy.parse().expect("a known strategy");
    let r = method
        .run(&mut ch, &a, Budget::default(), &mut progress)
        .unwrap();
    (r, ch.streams)
}

fn rel(r: &Report) -> f64 {
    let t = r.truth_bps.expect("simulated targets have a truth");
    (r.available_bandwidth_bps - t) / t
}

#[test]
fn quiet_path_with_cbr_every_strategy_within_5_percent() {
    let target = "sim:capacity=10G,cross=cbr:2.4G,coalescence=off";
    for strategy in [
        "multirate",
        "prcmt",
        "prcmt-pba",
        "scan-pba",
        "pathload",
        "imr-avg",
        "topp",
        "bart",
        "igi",
        "ptr",
        "pathchirp",
        "spruce",
    ] {
        let r = run(target, strategy);
        eprintln!(
            "{strategy}: {:+.3} bytes {} streams {} {}",
            rel(&r),
            r.cost.probe_bytes,
            r.cost.streams,
            r.stop
        );
        assert_eq!(r.bound, Bound::Exact, "{strategy}: {r:?}");
        assert!(rel(&r).abs() <= 0.05, "{strategy}: {:.3} ({r:?})", rel(&r));
        assert!(r.low_bps <= r.available_bandwidth_bps && r.available_bandwidth_bps <= r.high_bps);
        assert!(r.cost.probe_bytes > 0 && r.cost.duration_s > 0.0);
    }
}

/// The lab's shape on the simulator: a 1 Gbit/s sender link before a
/// 200 Mbit/s tight link with 60 Mbit/s of CBR. BART's prior took the
/// sender's link as the capacity and read 114-117 for 140; the scan's
/// delivery bounds the capacity now (its top rate came out at about
/// 200).
#[test]
fn bart_reads_a_tight_link_far_under_the_sender_s() {
    for seed in 1..=2 {
        let r = run(
            &format!("sim:hops=1G+200M,cross=none+cbr:60M,coalescence=off,seed={seed}"),
            "bart",
        );
        assert_eq!(r.bound, Bound::Exact, "{r:?}");
        assert!(rel(&r).abs() <= 0.05, "{:.3} ({r:?})", rel(&r));
    }
}

/// IGI/PTR and Spruce read single receive gaps; a receiver that stamps
/// in 125 us batches leaves them none, and they answer nothing rather
/// than a number made of batches.
#[test]
fn gap_readers_answer_nothing_through_receive_batches() {
    for strategy in ["igi", "ptr", "spruce"] {
        let r = run("sim:cross=cbr:2.4G,coalescence=125us", strategy);
        assert_eq!(r.bound, Bound::None, "{strategy}: {r:?}");
        assert!(
            matches!(
                r.stop,
                strategy::Stop::NoUsableStream | strategy::Stop::NoUsableAdrTrain
            ),
            "{strategy}: {r:?}"
        );
    }
}

/// pathChirp through the same batches: its first chirp shows them, and
/// the next ones are jumbo chirps whose elements span a batch (19
/// packets of 9000 B at 8.6 Gbit/s and up), read one element at a time.
/// Measured -5.3 % (truth 7.60 Gbit/s) in 12 chirps.
#[test]
fn pathchirp_reads_through_receive_batches_with_jumbo_chirps() {
    let r = run("sim:cross=cbr:2.4G,coalescence=125us", "pathchirp");
    assert_eq!(r.bound, Bound::Exact, "{r:?}");
    assert!(rel(&r).abs() <= 0.10, "{:.3} ({r:?})", rel(&r));
    // Plain chirps here are 15 packets; jumbo ones hold 14 x 19.
    let per_chirp = r.cost.probe_packets as f64 / r.cost.streams as f64;
    assert!(per_chirp > 100.0, "{per_chirp} packets per chirp: {r:?}");
}

/// Bursty cross traffic (Pareto ON/OFF) and 125 us coalescence: the
/// target: at least 9 of 10 seeds within +-10 %.
#[test]
fn bursty_path_with_coalescence_multirate_tracks_the_truth() {
    let mut errs = Vec::new();
    for seed in 1..=10 {
        let r = run(
            &format!("sim:cross=bursty:2.5G,coalescence=125us,seed={seed}"),
            "multirate",
        );
        assert_eq!(r.bound, Bound::Exact, "seed {seed}: {r:?}");
        errs.push(rel(&r));
    }
    eprintln!("bursty multirate errors: {errs:?}");
    let good = errs.iter().filter(|e| e.abs() <= 0.10).count();
    assert!(good >= 9, "{good}/10 within 10 %: {errs:?}");
}

/// The path faster than the sender's top rate: "at least" the ceiling
/// after three streams near it.
#[test]
fn idle_path_answers_at_least_the_ceiling() {
    let r = run("sim:cross=none,seed=1", "multirate");
    assert_eq!(
        (r.bound, r.stop),
        (Bound::AtLeast, strategy::Stop::Ceiling),
        "{r:?}"
    );
    assert!(r.available_bandwidth_bps >= 0.85e10, "{r:?}");
}

/// One ON/OFF source, 2.5 Gbit/s on average at a 10 % duty cycle, so
/// its 25 Gbit/s peaks saturate the 10 Gbit/s link for milliseconds: the
/// available bandwidth swings between streams. No run may spend the
/// budget in silence or claim the ceiling after finding the path below
/// it; the answers must bound the truth (a `swings` range around it, or
/// the right bound) in most runs.
#[test]
fn swinging_path_is_reported_as_swinging() {
    let mut honest = 0;
    for seed in 1..=10 {
        let r = run(
            &format!("sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed={seed}"),
            "multirate",
        );
        let t = r.truth_bps.unwrap();
        eprintln!(
            "seed {seed}: {} {:?} {:.3e} [{:.3e}, {:.3e}] truth {t:.3e}",
            r.stop, r.bound, r.available_bandwidth_bps, r.low_bps, r.high_bps
        );
        assert_ne!(r.stop, strategy::Stop::Budget, "seed {seed}: {r:?}");
        honest += usize::from(match r.bound {
            Bound::Exact => r.low_bps <= t && t <= r.high_bps,
            Bound::AtLeast => t >= 0.9 * r.available_bandwidth_bps,
            _ => false,
        });
    }
    assert!(honest >= 8, "{honest}/10 runs bound the truth");
}

/// One ON/OFF source, each packet stamped: the streams meet the link
/// saturated or idle, and the runs stop with `swings`. Their answer is
/// the mean of what the streams met; the median of the same answers
/// (the answer before) sided with the idle moments or the bursts, 7.4 %
/// off in the median run of these seeds where the mean is 3.6 %.
#[test]
fn a_swinging_run_answers_the_mean_of_what_its_streams_met() {
    let mut errs = Vec::new();
    for seed in 1..=10 {
        let r = run(
            &format!(
                "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,coalescence=off,seed={seed}"
            ),
            "multirate",
        );
        if r.stop == strategy::Stop::Swings {
            errs.push(rel(&r).abs());
        }
    }
    errs.sort_by(f64::total_cmp);
    eprintln!("swinging runs' errors: {errs:?}");
    assert!(errs.len() >= 5, "{errs:?}");
    assert!(errs[errs.len() / 2] < 0.05, "{errs:?}");
}

/// BART's filter takes the path as steady: on one ON/OFF source it
/// settled on a burst or an idle moment and ran out of budget in 4 of
/// these 10 runs (one at 0.3 Gbit/s with 7.9 free, its band 0-0.9).
/// Each stream read alone now tells when the path swings.
#[test]
fn bart_says_when_the_path_swings() {
    let mut swings = 0;
    for seed in 1..=10 {
        let r = run(
            &format!("sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed={seed}"),
            "bart",
        );
        eprintln!(
            "seed {seed}: {} {:.3e} [{:.3e}, {:.3e}] {} B",
            r.stop, r.available_bandwidth_bps, r.low_bps, r.high_bps, r.cost.probe_bytes
        );
        assert_ne!(r.stop, strategy::Stop::Budget, "seed {seed}: {r:?}");
        if r.stop == strategy::Stop::Swings {
            swings += 1;
            assert!(
                r.low_bps < r.available_bandwidth_bps && r.available_bandwidth_bps < r.high_bps
            );
        }
    }
    assert!(swings >= 4, "{swings}");
}

/// The smoothed path's streams read about 3 % low together, and their
/// answers agree closely: the notch of their median (the range reported
/// before) was narrower than that and held the truth in 2 of these 10
/// runs. The range says where the truth lies: it must hold it in most
/// runs, without growing past what five answers of one method warrant.
#[test]
fn the_range_of_a_stable_run_holds_the_truth() {
    let mut holds = 0;
    for seed in 1..=10 {
        let r = run(&format!("sim:cross=smoothed:2.5G,seed={seed}"), "multirate");
        let t = r.truth_bps.unwrap();
        let e = r.available_bandwidth_bps;
        eprintln!(
            "seed {seed}: {} {e:.3e} [{:.3e}, {:.3e}] truth {t:.3e}",
            r.stop, r.low_bps, r.high_bps
        );
        assert_eq!((r.bound, r.stop), (Bound::Exact, strategy::Stop::Stable));
        assert!(
            r.low_bps <= 0.95 * e && 1.05 * e <= r.high_bps,
            "seed {seed}: {r:?}"
        );
        assert!(r.high_bps - r.low_bps <= 0.3 * e, "seed {seed}: {r:?}");
        holds += usize::from(r.low_bps <= t && t <= r.high_bps);
    }
    assert!(holds >= 7, "{holds}/10 ranges hold the truth");
}

/// At 100 Gbit/s with 125 us coalescence a 60-packet train arrives in one
/// or two receive batches: IGI and PTR answered 4.85 Gbit/s and Spruce
/// 0 bit/s (capacity "3.85 Tbit/s") on a path with 75 free. Gap methods
/// must say they cannot read such a receiver.
#[test]
fn gap_methods_refuse_a_100g_coalescing_receiver() {
    for method in ["igi", "ptr", "spruce"] {
        let r = run("sim:hops=100G+100G,cross=none+bursty:25G,seed=1", method);
        eprintln!(
            "{method}: {:?} {:.3e} {}",
            r.bound, r.available_bandwidth_bps, r.stop
        );
        assert_eq!(r.bound, Bound::None, "{method}: {r:?}");
    }
}

/// At 100 Gbit/s a 125 us receive batch holds 174 packets of 9000 B, and
/// the first (wide) stream's 64 packets per rate fit in less than one:
/// it read "at most" its lowest rate (10 Gbit/s), and the streams after it
/// climbed from there, 30 % at a time, until the budget ran out. The scan
/// is sent again, long enough to span the batches, and the next streams
/// start near the truth.
#[test]
fn a_scan_shorter_than_the_receive_batches_is_sent_again() {
    for seed in 1..=3 {
        let target = format!("sim:hops=100G+100G,cross=none+smoothed:25G,seed={seed}");
        let (r, streams) = run_recorded(&target, "multirate");
        let sizes: Vec<usize> = streams.iter().map(|s| s.packets.len()).collect();
        eprintln!("seed {seed}: {sizes:?} {:?} {:+.3}", r.bound, rel(&r));
        // The first scan: 5 x 64; the second: the same 10-90 Gbit/s, each
        // rate for the time 625 packets take at 90 (four batches): 70,
        // 209, 348, 487 and 625 packets.
        assert_eq!(&sizes[..2], &[320, 1739], "seed {seed}");
        // The third stream is centred near the truth (75 Gbit/s), not
        // below the scan's lowest rate.
        let third = &streams[2];
        let rates = third.sub_streams(AnalysisParams::default().gap_tolerance);
        let centre = rates[rates.len() / 2].rate_bps;
        assert!(
            centre > 40e9,
            "seed {seed}: third stream centred at {centre:.3e}"
        );
        assert_eq!(r.bound, Bound::Exact, "seed {seed}: {r:?}");
        assert!(rel(&r).abs() <= 0.15, "seed {seed}: {:+.3}", rel(&r));
    }
}

/// PRC-MT's search at 100 Gbit/s: a 125 us receive batch holds about 170
/// packets, so its 100-packet ADR train arrived at once and its 32-320
/// packet streams in one or two batches; it read 43 % off (median of 20
/// seeds). The ADR train is sent again until it spans eight batches, the
/// streams are lengthened to span the batches, and the answer must hold
/// the truth within 15 % or bound it from the right side.
#[test]
fn prcmt_at_100g_sends_streams_that_span_the_receive_batches() {
    let mut right = 0;
    for seed in 1..=5 {
        let target = format!("sim:hops=100G+100G,cross=none+bursty:25G,seed={seed}");
        let (r, streams) = run_recorded(&target, "prcmt");
        let sizes: Vec<usize> = streams.iter().map(|s| s.packets.len()).collect();
        let t = r.truth_bps.unwrap();
        eprintln!("seed {seed}: {sizes:?} {:?} {:+.3}", r.bound, rel(&r));
        assert_eq!(
            &sizes[..3],
            &[100, 400, 1600],
            "seed {seed}: the ADR trains"
        );
        assert!(
            sizes[3..].iter().all(|&n| n >= 256),
            "seed {seed}: {sizes:?}"
        );
        right += usize::from(match r.bound {
            Bound::Exact => rel(&r).abs() <= 0.15,
            Bound::AtLeast => t >= 0.9 * r.available_bandwidth_bps,
            _ => false,
        });
    }
    assert!(right >= 4, "{right}/5 runs hold or bound the truth");
}

/// The ADR is read through the same receive batches and bursts as the
/// search: on the default bursty path it lay under the truth in 8 of 20
/// seeds, every rate of the search read "below", and the answer was "at
/// least" the ADR (seeds 2, 3, 5 and 6 of these ten). The search now goes
/// on once from the ADR to the ADR plus one receive batch's share of it.
#[test]
fn prcmt_searches_above_an_adr_under_the_truth() {
    for seed in 1..=10 {
        let r = run(&format!("sim:seed={seed}"), "prcmt");
        eprintln!("seed {seed}: {:?} {:+.3} {:?}", r.bound, rel(&r), r.stop);
        assert_eq!(r.bound, Bound::Exact, "seed {seed}: {r:?}");
        assert!(rel(&r).abs() <= 0.15, "seed {seed}: {:+.3}", rel(&r));
    }
}

/// `method` on the default bursty path with 125 us coalescence, seeds
/// 1-8: exact answers within 10 %, ranges that held the truth, and the
/// probe bytes, sorted.
fn on_the_default_path(method: &str) -> (usize, usize, Vec<u64>) {
    let (mut within, mut held, mut bytes) = (0, 0, Vec::new());
    for seed in 1..=8 {
        let r = run(&format!("sim:,seed={seed}"), method);
        let t = r.truth_bps.unwrap();
        eprintln!(
            "{method} seed {seed}: {:?} {:+.3} [{:.3e}, {:.3e}] {} B {}",
            r.bound,
            rel(&r),
            r.low_bps,
            r.high_bps,
            r.cost.probe_bytes,
            r.stop
        );
        within += usize::from(r.bound == Bound::Exact && rel(&r).abs() <= 0.10);
        held += usize::from(r.low_bps <= t && t <= r.high_bps);
        bytes.push(r.cost.probe_bytes);
    }
    bytes.sort();
    (within, held, bytes)
}

/// Probabilistic bisection on PRC-MT+BASS decisions on the default
/// path: the binary search's answers on seeds 1-8 lay 0.4-13 % off (a
/// wrong decision near the answer is never revisited) and its 2 %
/// bracket held the truth in 2 of 8; the posterior's median lands within
/// 10 % and its 90 % interval holds the truth in most runs, for under
/// 12 MB each.
#[test]
fn probabilistic_bisection_reads_the_bursty_path() {
    let (within, held, bytes) = on_the_default_path("prcmt-pba");
    assert!(within >= 7, "{within} of 8 within 10 %");
    assert!(held >= 5, "{held} of 8 ranges held the truth");
    assert!(bytes[4] <= 12_000_000, "{bytes:?}");
}

/// `scan-pba`: the multi-rate scan, then bisection from its answer, then
/// the shaper train. On the default path it lands within 10 % with the
/// range holding the truth in most runs, for a median of at most 12 MB:
/// 8.6-10.4 MB for the scan and the bisection in the middle runs, 1.5 MB
/// per shaper train (1.2 ms at 10 Gbit/s; a second one only when the
/// first looked shaped: seed 8). The multi-rate strategy spends about
/// 21 MB there. Since the multi-rate cumulative crossing is placed by
/// the next sub-stream's delivery, 5 of the 8 ranges hold the truth
/// (6 before: seed 6 moved from -0.6 to -6.9 %, seed 1 from -7.9 to
/// -0.7 %).
#[test]
fn scan_then_bisection_reads_the_bursty_path() {
    let (within, held, bytes) = on_the_default_path("scan-pba");
    assert!(within >= 7, "{within} of 8 within 10 %");
    assert!(held >= 5, "{held} of 8 ranges held the truth");
    assert!(bytes[3] <= 12_000_000, "{bytes:?}");
}

/// One ON/OFF source at four times the link: the link is idle nine
/// tenths of the time and saturated the rest. Streams in an idle moment
/// read "below" near the link rate; one in a burst loses most of itself
/// or all. The bisections converge on the idle moments' threshold, so
/// the answer must say the path swings, with a range that holds the
/// streams' mean truth, or be a bound on the right side: in 8 of seeds
/// 1-10 at least. `scan-pba` says "swings" at least twice (seed 4 lost
/// whole streams at 6.8 and 9.2 Gbit/s and answered "exact 9.7,
/// 8.9-10" for 5.4 before the swing test); `prcmt-pba`'s streams met
/// fewer bursts in these seeds and mostly answer "at least".
#[test]
fn bisection_says_when_the_path_swings() {
    let target = "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2";
    for method in ["scan-pba", "prcmt-pba"] {
        let (mut held, mut swings) = (0, 0);
        for seed in 1..=10 {
            let r = run(&format!("{target},seed={seed}"), method);
            let t = r.truth_bps.unwrap();
            let e = r.available_bandwidth_bps;
            let ok = match r.bound {
                Bound::Exact => r.low_bps <= t && t <= r.high_bps,
                Bound::AtLeast => t >= 0.9 * e,
                Bound::AtMost => t <= 1.1 * e,
                Bound::None => false,
            };
            eprintln!(
                "{method} seed {seed}: {:?} {:.3e} [{:.3e}, {:.3e}] truth {t:.3e} {}",
                r.bound, e, r.low_bps, r.high_bps, r.stop
            );
            held += usize::from(ok);
            swings += usize::from(r.stop == Stop::Swings);
        }
        assert!(held >= 8, "{method}: {held} of 10 held the truth");
        assert!(
            method != "scan-pba" || swings >= 2,
            "{method}: {swings} swings"
        );
    }
}

/// Two ON/OFF sources whose peaks are 1.25 times the 10 Gbit/s link:
/// the link is idle or saturated for milliseconds. In these seeds one
/// bisection stream met an ON period and read "above" at 0.52-0.64 of
/// where the others, which met the link idle, put the answer: one
/// decision the search's threshold cannot hold by a quarter says the
/// path swung. Before, they answered what the idle moments showed,
/// 19-37 % over the mean truth, `converged`, with ranges that missed
/// it; now `swings`, the range where the decisions put the mean.
#[test]
fn one_stream_far_under_the_threshold_says_the_path_swings() {
    let target = "sim:cross=bursty:2.5G:sources=2:on=2ms:duty=0.1:shape=1.2";
    for seed in [41, 47, 96] {
        let r = run(&format!("{target},seed={seed}"), "scan-pba");
        let t = r.truth_bps.unwrap();
        eprintln!("seed {seed}: {r:?}");
        assert_eq!(
            (r.bound, r.stop),
            (Bound::Exact, Stop::Swings),
            "seed {seed}"
        );
        assert!(r.low_bps <= t && t <= r.high_bps, "seed {seed}: {r:?}");
        let (under, _) = r.swung_bps.expect("how far it swung");
        assert!(
            under < 0.75 * r.available_bandwidth_bps,
            "seed {seed}: {r:?}"
        );
    }
}

/// One ON/OFF source, seeds 13 and 20: the wide scan met the link idle,
/// the bisection's first stream (8.96 Gbit/s) was lost whole to an ON
/// period, and the next two read "below" at 8.96 and 9.48. A stream
/// lost whole counted as congestion only after one of the search's own
/// had arrived, so the run answered "at least 8.82" for a mean truth of
/// 7.5; now the scan counts as the stream that arrived: `swings`, from
/// 0, with the range where the decisions put the mean.
#[test]
fn a_first_search_stream_lost_whole_after_the_scan_says_swings() {
    let target = "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2";
    for seed in [13, 20] {
        let (r, streams) = run_recorded(&format!("{target},seed={seed}"), "scan-pba");
        let t = r.truth_bps.unwrap();
        eprintln!("seed {seed}: {r:?}");
        assert!(
            streams[0].received_count() > 0,
            "seed {seed}: the scan arrived"
        );
        assert_eq!(
            streams[1].received_count(),
            0,
            "seed {seed}: then one lost whole"
        );
        assert_eq!(
            (r.bound, r.stop),
            (Bound::Exact, Stop::Swings),
            "seed {seed}"
        );
        assert!(r.low_bps <= t && t <= r.high_bps, "seed {seed}: {r:?}");
        assert_eq!(r.swung_bps.map(|w| w.0), Some(0.0), "seed {seed}");
    }
}

/// PRC-MT's binary search on one ON/OFF source, seed 74: the first ADR
/// train met the link idle, the second (four times longer) an ON
/// period, and the search took the second's 7.05 Gbit/s, so its prior
/// reached 8.8. The streams that read "below" met 10 Gbit/s; a range
/// for the mean topped at 8.8 missed the truth (8.57). The top is now
/// what the faster train showed.
#[test]
fn a_swing_s_range_reaches_what_the_fastest_adr_train_showed() {
    let (r, streams) = run_recorded(
        "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed=74",
        "prcmt",
    );
    let t = r.truth_bps.unwrap();
    eprintln!("{r:?}");
    assert!(
        streams[1].len() > streams[0].len(),
        "the ADR train resent longer"
    );
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Swings));
    assert!(r.low_bps <= t && t <= r.high_bps, "{r:?}");
}

/// PRC-MT's binary search on the ON/OFF path, seed 4: every decided
/// stream met an idle moment and read "below", but one was lost whole
/// to a burst. It answered "at least 9.9 Gbit/s" for a mean truth of
/// 8.3; a stream lost whole is congestion seen, so it now says the path
/// swings from 0 (the lost stream) to the highest rate read "below",
/// answers the mean of what its streams met, and gives the range where
/// their decisions put that mean (7.1-10), which holds the truth.
#[test]
fn a_stream_lost_whole_makes_the_binary_search_say_swings() {
    let r = run(
        "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed=4",
        "prcmt",
    );
    let t = r.truth_bps.unwrap();
    eprintln!("{r:?}");
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Swings));
    assert!(r.low_bps <= t && t <= r.high_bps, "{r:?}");
    let (under, over) = r.swung_bps.expect("how far it swung");
    assert_eq!(under, 0.0, "{r:?}");
    assert!(over > t && under < r.low_bps, "{r:?}");
    assert!(rel(&r).abs() < 0.1, "{:+.3}", rel(&r));
}

/// Two ON/OFF sources, seed 80: the wide scan met an ON period and 4 of
/// its 180 packets arrived, too few to show the 125 us receive batches.
/// `auto` took that for a receiver that stamps each packet and went on
/// with multi-rate streams: 23 of them, 57.5 MB, `swings` 1.71
/// (0.79-3.25) for a mean truth of 5.41. Stamping unknown, it goes on as
/// under batches, as `scan-pba`.
#[test]
fn auto_reads_a_scan_lost_to_a_burst_as_stamps_unknown() {
    let target = "sim:cross=bursty:2.5G:sources=2:on=2ms:duty=0.1:shape=1.2,seed=80";
    let (r, streams) = run_recorded(target, "auto");
    let t = r.truth_bps.unwrap();
    eprintln!("{r:?}");
    assert!(streams[0].received_count() < 16, "the scan was lost");
    assert_eq!(r.method, strategy::Method::ScanPba, "{r:?}");
    assert!(r.low_bps <= t && t <= r.high_bps, "{r:?}");
    assert!(r.cost.probe_bytes < 40_000_000, "{r:?}");
}

/// `auto` reads the wide scan's receive stamps: under 125 us batches it
/// goes on as `scan-pba` (the same streams, the same answer, the same
/// shaper train at the end), stamped one by one as `multirate` from that
/// scan; the report names the strategy that ran.
#[test]
fn auto_follows_the_receiver() {
    let target = "sim:seed=3";
    let (r, streams) = run_recorded(target, "auto");
    let (same, same_streams) = run_recorded(target, "scan-pba");
    assert_eq!(r.method, strategy::Method::ScanPba);
    assert_eq!(r.available_bandwidth_bps, same.available_bandwidth_bps);
    assert_eq!(streams.len(), same_streams.len());
    assert_eq!(r.cost.probe_bytes, same.cost.probe_bytes);
    assert_eq!(r.shaper, None);
    // The shaper train, the last stream, checked the answer and left it.
    assert_eq!(r.check_streams, vec![streams.len() - 1]);
    // Stamped one by one: the multi-rate strategy after the scan, whose
    // rates (1-9 Gbit/s) last as long as its top one: 8, 22, 36, 50 and
    // 64 packets, where `multirate`'s own scan sends 64 at each.
    let target = "sim:coalescence=off,seed=3";
    let (r, streams) = run_recorded(target, "auto");
    let (_, multirate_streams) = run_recorded(target, "multirate");
    assert_eq!(r.method, strategy::Method::Multirate);
    assert_eq!(streams[0].packets.len(), 8 + 22 + 36 + 50 + 64);
    assert_eq!(multirate_streams[0].packets.len(), 5 * 64);
    assert_eq!(r.bound, Bound::Exact, "{r:?}");
    assert!(rel(&r).abs() < 0.1, "{:+.3}", rel(&r));
    assert_eq!(r.shaper, None);
    assert_eq!(r.check_streams, vec![streams.len() - 1]);
}

/// A 6 Gbit/s token bucket with a 256 KB bucket that 2 Gbit/s of CBR
/// cross traffic shares: 4 Gbit/s free. The streams pass on the bucket;
/// the trains' tails, their share of its rate (10 x 6 / 12 = 5), read
/// 25 % high; a third train at 6 Gbit/s (tail 4.5) puts the bucket at 6
/// and the cross traffic at 2: the answer is 4 within 2 %. The same
/// bucket with nothing through it gives equal tails and stays at its
/// rate.
#[test]
fn cross_traffic_that_shares_a_bucket_is_taken_out_of_its_rate() {
    let r = run("sim:cross=cbr:2G,shaper=6G/256KB,seed=1", "auto");
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped), "{r:?}");
    assert!(rel(&r).abs() <= 0.02, "{:+.3}", rel(&r));
    let sh = r.shaper.expect("a bucket");
    let (token, cross) = sh.shared_bucket.expect("cross traffic in the bucket");
    assert!((token / 6e9 - 1.0).abs() < 0.03, "{sh:?}");
    assert!((cross / 2e9 - 1.0).abs() < 0.1, "{sh:?}");
    assert!(sh.tail_bps > 1.2 * 4e9, "{sh:?}");
    // Stamped one by one the streams read 5.05 and the trains' tails 5.0
    // (both the cross traffic's share, r R / (r + X), over 4): a head
    // with its tail near the answer still brings the third train, and
    // the line answers.
    let stamped = run(
        "sim:cross=cbr:2G,shaper=6G/256KB,coalescence=off,seed=1",
        "auto",
    );
    assert_eq!(stamped.stop, Stop::Shaped, "{stamped:?}");
    assert!(rel(&stamped).abs() <= 0.02, "{:+.3}", rel(&stamped));
    let sh = stamped.shaper.expect("a bucket");
    assert!(sh.head_seen && sh.shared_bucket.is_some(), "{sh:?}");
    assert!(sh.tail_bps > 0.95 * sh.streams_bps, "{sh:?}");
    let alone = run("sim:cross=none,shaper=6G/256KB,seed=1", "auto");
    assert_eq!(alone.stop, Stop::Shaped, "{alone:?}");
    assert_eq!(alone.shaper.and_then(|sh| sh.shared_bucket), None);
    assert!(rel(&alone).abs() <= 0.01, "{:+.3}", rel(&alone));
}

/// Bursty cross traffic (2 Gbit/s on average) through the same 6 Gbit/s
/// bucket of 256 KB: the streams pass on its bursts (7-8 Gbit/s for 4),
/// and the trains' tails, their share of the bucket beside cross
/// traffic that moves, lie 8-12 % apart, too far for a line: the answer
/// is "at most" their mean (5.2-5.4), which holds the truth, as does
/// the range's low end. Seed 1's tails lie over 10 % apart (the trains
/// did not agree on a rate, but both showed the head), seed 3's within.
#[test]
fn bursty_cross_traffic_through_a_bucket_is_answered_at_most_the_tails() {
    for seed in [1, 3] {
        let target = format!("sim:cross=bursty:2G,shaper=6G/256KB,seed={seed}");
        let (r, sh) = at_most_the_tails(&target, 1.4);
        assert!(sh.streams_bps > 1.3 * r.available_bandwidth_bps, "{sh:?}");
    }
}

/// `auto` on `target`: "at most" the trains' tails, `shaped`, with a
/// head seen in both and tails over 2 % apart, no line drawn; the range
/// holds the truth and the bound lies under `most_over_truth` times it.
fn at_most_the_tails(target: &str, most_over_truth: f64) -> (Report, ShaperSeen) {
    let r = run(target, "auto");
    assert_eq!(
        (r.bound, r.stop),
        (Bound::AtMost, Stop::Shaped),
        "{target}: {r:?}"
    );
    let truth = r.truth_bps.unwrap();
    assert!(
        r.low_bps <= truth && truth <= r.available_bandwidth_bps,
        "{target}: {r:?}"
    );
    assert!(
        r.available_bandwidth_bps < most_over_truth * truth,
        "{target}: {r:?}"
    );
    let sh = r.shaper.expect("a bucket");
    assert!(
        sh.head_seen && sh.shared_bucket.is_none(),
        "{target}: {sh:?}"
    );
    assert!(sh.tail_spread > 0.02, "{target}: {sh:?}");
    (r, sh)
}

/// The same bucket and bursty cross traffic, where the trains' heads
/// differ: seed 14's two heads (339 and 151 KB, tails 4.26 and 5.67)
/// lie 2.2 times apart, seed 9's first shows 15.9 packets ahead of its
/// tail (under the 16 that look shaped) beside a head of 261 KB. Both
/// are the bucket's, less what the cross traffic took: "at most" the
/// tails' mean, which holds the truth, where the streams read +75 to
/// +100 %. Stamped one by one (seed 2) the streams read 4.54 and the
/// trains' tails 4.95 and 5.58 (10 % apart, both heads seen): over the
/// answer, which was 20-30 % high; "at most" their mean holds it.
#[test]
fn heads_that_cross_traffic_cut_short_still_bound_the_answer() {
    for target in [
        "sim:cross=bursty:2G,shaper=6G/256KB,seed=14",
        "sim:cross=bursty:2G,shaper=6G/256KB,seed=9",
        "sim:cross=bursty:2G,shaper=6G/256KB,coalescence=off,seed=2",
    ] {
        at_most_the_tails(target, 1.5);
    }
}

/// Two trains whose tails both came out well under an exact answer they
/// could not change widen its range down to the slower tail. 2 Gbit/s of
/// bursty cross traffic through an 8 Gbit/s bucket of 256 KB behind the
/// 10 Gbit/s sender, seed 11: the streams read 7.55 for 5.70 (they pass
/// on the bucket and read the link), trains at 10 Gbit/s came out at 5.42
/// and 6.50 (under 0.9 x 7.55 = 6.80) with no bucket confirmed; the
/// range now starts at 5.42 and holds the truth. On the FIFO path with
/// 1 % loss, seed 85, two trains met heavier cross traffic (6.16 and
/// 6.11 under 7.83; truth 7.62): the range reaches 6.11 and still holds.
#[test]
fn slow_tails_under_an_answer_widen_its_range() {
    for (target, answer_bps, slower_bps) in [
        (
            "sim:cross=bursty:2G,shaper=8G/256KB,seed=11",
            7.55e9,
            5.42e9,
        ),
        ("sim:loss=1%,seed=85", 7.83e9, 6.11e9),
    ] {
        let r = run(target, "auto");
        assert_eq!(r.bound, Bound::Exact, "{target}: {r:?}");
        assert!(
            (r.available_bandwidth_bps / answer_bps - 1.0).abs() < 0.01,
            "{target}: {r:?}"
        );
        let slow = r.slow_trains.expect("two slow tails");
        assert_eq!(slow.rate_bps, 10e9, "{target}: {slow:?}");
        let least = slow.tails_bps[0].min(slow.tails_bps[1]);
        assert!(
            (least / slower_bps - 1.0).abs() < 0.01,
            "{target}: {slow:?}"
        );
        assert!(slow
            .tails_bps
            .iter()
            .all(|&t| t <= 0.9 * r.available_bandwidth_bps));
        assert_eq!(r.low_bps, least, "{target}: {r:?}");
        let truth = r.truth_bps.unwrap();
        assert!(r.low_bps <= truth && truth <= r.high_bps, "{target}: {r:?}");
    }
    // Tails at or over the answer leave the range alone.
    let plain = run("sim:seed=1", "auto");
    assert_eq!(plain.slow_trains, None, "{plain:?}");
}

/// The single ON/OFF source (25 Gbit/s peaks on the 10 Gbit/s link),
/// seed 456: two trains at 10 Gbit/s each met an ON period after
/// 700-850 KB and came out at 2.88 from there on, like a bucket's head
/// and tail; a third train at 6 Gbit/s came out at 5.99 with no head. A
/// bucket delivers a slower train slower (r R / (r + X) falls with r),
/// so that one refutes it: the streams' answer stands (before: 2.88
/// "shaped", 63 % low).
#[test]
fn a_slower_train_that_came_out_faster_refutes_a_bucket() {
    let r = run(
        "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed=456",
        "auto",
    );
    assert_ne!(r.stop, Stop::Shaped, "{r:?}");
    assert_eq!(r.shaper, None, "{r:?}");
    let truth = r.truth_bps.unwrap();
    assert!(r.low_bps <= truth && truth <= r.high_bps, "{r:?}");
}

/// A 6 Gbit/s token bucket of 64 KB that 2 Gbit/s of CBR shares, under
/// 125 us receive batches: 4 Gbit/s free, the streams read 4.62. The
/// bucket's head hides in the first batch of a train at 9.2 Gbit/s,
/// whose tail (4.9) puts a FIFO link's capacity at 5.3, so a train at
/// 5.6 follows: such a link would deliver it at 4.73, it came at 4.45
/// with 38 KB ahead of its tail. Each rate read again, the line through
/// the tails puts the bucket at 6 and the cross traffic at 2: the answer
/// is 4 within 3 %, `shaped` with no head seen at the faster rate. A
/// 5 Gbit/s FIFO link with 1 Gbit/s of CBR behind the same sender (the
/// same first tail's shape, the train at the other rate where the link
/// puts it) keeps the streams' answer.
#[test]
fn a_small_bucket_shared_with_cross_traffic_is_read_by_trains_at_two_rates() {
    let r = run("sim:cross=cbr:2G,shaper=6G/64KB,seed=1", "auto");
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped), "{r:?}");
    assert!(rel(&r).abs() <= 0.03, "{:+.3}", rel(&r));
    let sh = r.shaper.expect("the line's bucket");
    assert!(!sh.head_seen, "{sh:?}");
    assert!(sh.streams_bps > 1.1 * 4e9, "{sh:?}");
    let (token, cross) = sh.shared_bucket.expect("cross traffic in the bucket");
    assert!((token / 6e9 - 1.0).abs() < 0.05, "{sh:?}");
    assert!((cross / 2e9 - 1.0).abs() < 0.15, "{sh:?}");
    // Where the tails refuted the streams (1 Gbit/s of CBR through a
    // 7 Gbit/s bucket of 64 KB: tails at 6.43, streams at 6.79), the
    // line through a third train's tail takes the cross traffic out too.
    let seven = run("sim:cross=cbr:1G,shaper=7G/64KB,seed=1", "auto");
    assert_eq!(seven.stop, Stop::Shaped, "{seven:?}");
    assert!(rel(&seven).abs() <= 0.03, "{:+.3}", rel(&seven));
    assert!(
        seven.shaper.and_then(|sh| sh.shared_bucket).is_some(),
        "{seven:?}"
    );
    let narrow = run("sim:hops=10G+5G,cross=cbr:1G,seed=1", "auto");
    assert_ne!(narrow.stop, Stop::Shaped, "{narrow:?}");
    assert!(rel(&narrow).abs() <= 0.03, "{:+.3}", rel(&narrow));
}

/// A 5 Gbit/s token bucket with a 64 KB bucket on the 10 Gbit/s link:
/// sub-streams up to 5.6 Gbit/s pass it whole, and `auto` read 5.70
/// (+14 %). Its head, 128 KB of a 10 Gbit/s train, hides in one 125 us
/// receive batch, but the two trains' tails arrive at 5.01, under 0.9
/// of the answer, where a FIFO path delivers them at no less than its
/// available bandwidth: the answer is theirs, `shaped` with no head
/// seen. Stamped one by one the streams see the queue and read 5 within
/// 3 %; no tail answers alone there.
#[test]
fn a_bucket_whose_head_hides_in_one_receive_batch_is_read_from_the_tails() {
    let r = run("sim:cross=none,shaper=5G/64KB,seed=1", "auto");
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped), "{r:?}");
    assert!(rel(&r).abs() <= 0.01, "{:+.3}", rel(&r));
    let sh = r.shaper.expect("what the streams read");
    assert!(!sh.head_seen, "{sh:?}");
    assert!(sh.streams_bps > 1.1 * 5e9, "{sh:?}");
    let stamped = run(
        "sim:cross=none,shaper=5G/64KB,coalescence=off,seed=1",
        "auto",
    );
    assert_ne!(stamped.stop, Stop::Shaped, "{stamped:?}");
    assert!(rel(&stamped).abs() <= 0.03, "{:+.3}", rel(&stamped));
}

/// A 5 Gbit/s token bucket with a 256 KB bucket on the 10 Gbit/s link,
/// nothing else: a 64-packet stream (576 KB) at 9.3 Gbit/s passes
/// unqueued, so under receive batches the streams read the bursts (9.27
/// Gbit/s "exact"); with each packet stamped the last stream's top
/// sub-stream drained the bucket and its tail arrived at 5. The shaper
/// trains' heads pass at the sender's rate and their tails at 5: the
/// answer is 5 within 2 %, said as `shaped`, with what the streams read
/// and a bucket near 256 KB. On the default path no run of seeds 1-8 is
/// taken for shaped, nor `multirate` on the lossy path's seed 1.
#[test]
fn a_bucket_larger_than_the_streams_reads_its_sustained_rate() {
    for target in [
        "sim:cross=none,shaper=5G/256KB,seed=1",
        "sim:cross=none,shaper=5G/256KB,coalescence=off,seed=1",
    ] {
        let r = run(target, "auto");
        eprintln!(
            "{target}: {:?} {:+.4} {} {:?}",
            r.bound,
            rel(&r),
            r.stop,
            r.shaper
        );
        assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped), "{target}");
        assert!(rel(&r).abs() <= 0.02, "{target}: {:+.3}", rel(&r));
        let sh = r.shaper.expect("what the streams read");
        if target.contains("coalescence=off") {
            assert!(
                (sh.streams_bps / 5e9 - 1.0).abs() < 0.02,
                "{target}: {sh:?}"
            );
        } else {
            assert!(sh.streams_bps > 1.15 * 5e9, "{target}: {sh:?}");
        }
        assert!(
            (sh.bucket_bytes / 256e3 - 1.0).abs() < 0.2,
            "{target}: {sh:?}"
        );
        assert!(r.low_bps <= 5e9 && 5e9 <= r.high_bps, "{target}");
        // Both trains gave the answer: neither is left out of it; the
        // third, at 0.6 of their rate, found no cross traffic in the
        // bucket (equal tails) and is left out. Stamped one by one, the
        // streams read 5, so the check went at the top rate, twice that,
        // with the short train first: it passed whole (a bucket's head),
        // left out; the two full trains answered.
        let left_out = 1 + usize::from(target.contains("coalescence=off"));
        assert_eq!(
            r.check_streams.len(),
            left_out,
            "{target}: {:?}",
            r.check_streams
        );
    }
    for seed in 1..=8 {
        let r = run(&format!("sim:,seed={seed}"), "auto");
        assert_eq!(
            (r.shaper, r.stop == Stop::Shaped),
            (None, false),
            "seed {seed}"
        );
    }
    // Both trains met a lull of the cross traffic for their first
    // 200 KB (head 1.3 times the tail, as a 7 Gbit/s bucket's): their
    // tails, 0.3 and 3.6 % under the streams' answer, do not change it.
    let r = run("sim:loss=0.01,seed=1", "multirate");
    assert_eq!(r.shaper, None);
    assert_ne!(r.stop, Stop::Shaped);
}

/// The default path's cross traffic ran heavy through both shaper trains
/// of these runs (their tails 0.79-0.82 of the streams' answers, within
/// 1 % of each other, heads of 3 to 5 packets: a small bucket's head
/// hidden in a receive batch looks so). The third train, at another
/// rate, came back off their tail (a bucket alone keeps its token rate
/// at any rate over it): the path is a FIFO link, the streams' answer
/// stands (it was the tail, 13 and 27 % low).
#[test]
fn heavy_cross_traffic_through_the_trains_is_not_a_hidden_bucket() {
    for seed in [48, 130] {
        let r = run(&format!("sim:,seed={seed}"), "auto");
        assert_ne!(r.stop, Stop::Shaped, "seed {seed}: {r:?}");
        assert_eq!(r.shaper, None, "seed {seed}");
        assert!(rel(&r).abs() <= 0.1, "seed {seed}: {:+.3}", rel(&r));
    }
}

/// A single smoothed source holds its rate for tens of milliseconds:
/// both shaper trains of these runs (at the sender's 10 Gbit/s) met it
/// and arrived at 7.9 where the streams read about 9 (tails at 0.87 of
/// the answer, no head). No third train could go a tenth apart from
/// theirs, so nothing tells a bucket from that long heavy period: the
/// streams' answer stands (the trains' was 6-13 % low).
#[test]
fn a_long_heavy_period_through_headless_trains_is_not_a_bucket() {
    for seed in [84, 116, 149, 177] {
        let r = run(
            &format!("sim:cross=smoothed:2.5G:sources=1,seed={seed}"),
            "auto",
        );
        assert_ne!(r.stop, Stop::Shaped, "seed {seed}: {r:?}");
        assert_eq!(r.shaper, None, "seed {seed}");
        assert!(rel(&r).abs() <= 0.05, "seed {seed}: {:+.3}", rel(&r));
    }
}

/// A single ON/OFF source whose 25 Gbit/s ON periods saturate the
/// 10 Gbit/s link: each of these runs' two shaper trains met one after a
/// head at the send rate, and both tails read the share an ON period
/// leaves (2.88 Gbit/s in both of seed 28's). Their heads, 658 and
/// 1684 KB, 747 and 297 KB, are not one bucket's (a refilled bucket
/// passes the same head): the streams' answer stands (the trains' was 28
/// and 59 % low).
#[test]
fn heads_an_on_period_cut_short_are_not_a_bucket() {
    for seed in [24, 28] {
        let r = run(
            &format!("sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed={seed}"),
            "auto",
        );
        assert_ne!(r.stop, Stop::Shaped, "seed {seed}: {r:?}");
        assert_eq!(r.shaper, None, "seed {seed}");
        // Seed 24 answers "at least" 8.8 for a truth of 10.0.
        let holds = r.bound == Bound::AtLeast && r.available_bandwidth_bps <= r.truth_bps.unwrap();
        assert!(holds || rel(&r).abs() <= 0.1, "seed {seed}: {r:?}");
    }
}

/// A FIFO path of 200 Mbit/s with 120 Mbit/s of CBR behind a 1 Gbit/s
/// sender, each packet stamped: the answer is about 81 Mbit/s, so the
/// shaper check goes at 162. A FIFO carries that at 162 x 200 / (162 +
/// 120) = 115 Mbit/s, under the 150 a FIFO with that answer allows
/// (162 x 1000 / (162 + 1000 - 81)): the short train (an eighth, 64 KB:
/// the 16 packets a train holds at least here) rules out a bucket, and
/// the 512 KB one, which would queue 256 KB, is not sent. The scan lost
/// packets in the path's queue, so the check waits for the answer (no
/// bucket as large as the streams was passing them).
#[test]
fn a_fifo_path_is_checked_with_the_short_train_alone() {
    let (r, streams) = run_recorded(
        "sim:hops=1G+200M,cross=none+cbr:120M,coalescence=off,seed=1",
        "auto",
    );
    assert_eq!(
        (r.bound, r.stop, r.shaper),
        (Bound::Exact, Stop::Stable, None)
    );
    assert!(rel(&r).abs() < 0.05, "{:+.3}", rel(&r));
    let n = streams.len();
    assert_eq!(r.check_streams, vec![n - 1]);
    assert_eq!(streams[n - 1].packets.len(), 16);
    // Each stream before it is a multi-rate stream of 1.4 MB or more.
    assert!(streams[..n - 1].iter().all(|s| s.packets.len() >= 160));
}

/// A 256 KB bucket at 200 Mbit/s behind a 1 Gbit/s sender, each packet
/// stamped: the multi-rate streams pass on the bucket and read 237-290
/// Mbit/s. The shaper check at the first exact answer after the scan
/// (the fourth stream) finds the bucket, and the run ends there with the
/// trains' 200 within 2 %, `shaped`: four streams and four trains (the
/// last faster, for cross traffic in the bucket; with the check only
/// after the answer it took eight streams).
#[test]
fn a_bucket_found_between_the_streams_ends_the_run() {
    let (r, streams) = run_recorded(
        "sim:hops=1G,cross=none,shaper=200M/256KB,coalescence=off,seed=1",
        "auto",
    );
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped));
    assert!(rel(&r).abs() <= 0.02, "{:+.3}", rel(&r));
    let sizes: Vec<usize> = streams.iter().map(|s| s.packets.len()).collect();
    // The scan (180 packets), three streams, then the short train, the
    // two full ones and a third at their rate over 0.6 with its head and
    // their tail, 48 packets (no cross traffic in the bucket: the tails
    // answer); nothing after them.
    assert_eq!(sizes, vec![180, 160, 160, 160, 16, 57, 57, 48]);
    let sh = r.shaper.expect("what the streams read");
    assert!(sh.streams_bps > 1.15 * 200e6, "{sh:?}");
}

/// A 1 MB bucket at 200 Mbit/s behind a 1 Gbit/s sender, each packet
/// stamped: the streams read 270 Mbit/s (they pass on the bucket), and
/// the first trains, 144 KB then 512 KB at 540 Mbit/s, pass whole (the
/// bucket's head would be 1 MB x 540 / 340 = 1.6 MB). A train at twice the answer
/// cannot pass a FIFO path whole, so one four times as long is sent: its
/// head ends and its tail reads 200 within 2 %, `shaped`.
#[test]
fn a_bucket_larger_than_the_train_is_read_with_a_longer_one() {
    let (r, streams) = run_recorded(
        "sim:hops=1G,cross=none,shaper=200M/1MB,coalescence=off,seed=1",
        "auto",
    );
    // The first two trains passed whole and answered nothing; the longer
    // one and the one that confirmed it gave the answer.
    let n = streams.len();
    assert_eq!(r.check_streams, vec![n - 4, n - 3]);
    // The short train: the 16 packets a train holds at least.
    assert_eq!(streams[n - 4].packets.len(), 16);
    assert_eq!(streams[n - 3].packets.len(), 57);
    eprintln!("{:?} {:+.4} {} {:?}", r.bound, rel(&r), r.stop, r.shaper);
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped));
    assert!(rel(&r).abs() <= 0.02, "{:+.3}", rel(&r));
    let sh = r.shaper.expect("what the streams read");
    assert!(sh.streams_bps > 1.2 * 200e6, "{sh:?}");
    assert!(sh.train_bytes > 2_000_000, "{sh:?}");
    assert!((sh.bucket_bytes / 1e6 - 1.0).abs() < 0.2, "{sh:?}");
}

/// A 5 Gbit/s shaper with a 1 MB bucket behind a 10 Gbit/s sender: the
/// streams pass on the bucket and answer "at least" the top rate, and the
/// train at the top rate (1.5 MB: a head of 1 MB x 10 / 5 = 2 MB) passes
/// whole, as it would on a free path. There the longer train goes (6 MB:
/// a 2 MB head, then 5 Gbit/s), and a second confirms it: 5 within 2 %,
/// `shaped`, where the answer was "at least 8.8". On the free path the
/// longer train goes too and the answer stays "at least".
#[test]
fn an_answer_at_the_top_rate_sends_the_longer_train() {
    let (r, streams) = run_recorded("sim:cross=none,shaper=5G/1MB,seed=1", "auto");
    eprintln!("{:?} {:+.4} {} {:?}", r.bound, rel(&r), r.stop, r.shaper);
    assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped));
    assert!(rel(&r).abs() <= 0.02, "{:+.3}", rel(&r));
    let sh = r.shaper.expect("what the streams read");
    assert!(sh.train_bytes > 5_000_000, "{sh:?}");
    assert!((sh.bucket_bytes / 1e6 - 1.0).abs() < 0.2, "{sh:?}");
    let n = streams.len();
    // The train at the top rate answered nothing; the longer one and the
    // one that confirmed it gave the answer.
    assert_eq!(r.check_streams, vec![n - 3]);
    let (free, streams) = run_recorded("sim:cross=none,seed=1", "auto");
    assert_eq!(free.bound, Bound::AtLeast);
    let last: u64 = streams[streams.len() - 1]
        .packets
        .iter()
        .map(|p| u64::from(p.size_bytes))
        .sum();
    assert!(last > 5_000_000, "the longer train went: {last} bytes");
}

/// The same bucket under every closed-loop method: each ends with the
/// shaper trains, so each answers 5 Gbit/s within 2 %, `shaped`, where
/// its streams alone read 5.8 (pathload) to 9.3 (the bisections).
/// IGI/PTR and Spruce answer nothing on a path without cross traffic
/// (no turning point, no pairs spread), so they send no train.
#[test]
fn every_method_ends_with_the_shaper_trains() {
    let target = "sim:cross=none,shaper=5G/256KB,seed=2";
    for m in strategy::Method::ALL {
        let r = run(target, m.name());
        eprintln!(
            "{m}: {:?} {:+.4} {} {:?}",
            r.bound,
            rel(&r),
            r.stop,
            r.shaper
        );
        if matches!(
            m,
            strategy::Method::Igi | strategy::Method::Ptr | strategy::Method::Spruce
        ) {
            assert_eq!((r.bound, r.shaper), (Bound::None, None), "{m}");
            continue;
        }
        assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Shaped), "{m}");
        assert!(rel(&r).abs() <= 0.02, "{m}: {:+.3}", rel(&r));
        let sh = r.shaper.expect("what the streams read");
        assert!(sh.streams_bps > 1.15 * 5e9, "{m}: {sh:?}");
    }
}

/// One ON/OFF source at four times the link: on seed 2 the first ADR
/// train ran into a burst and lost most of its packets, and both
/// searches answered nothing. The train is sent again as it was.
#[test]
fn an_adr_train_lost_to_a_burst_is_sent_again() {
    let target = "sim:cross=bursty:2.5G:sources=1:on=2ms:duty=0.1:shape=1.2,seed=2";
    for method in ["prcmt", "prcmt-pba"] {
        let (r, streams) = run_recorded(target, method);
        let first = &streams[0];
        eprintln!(
            "{method}: {:?} {:.3e} {}",
            r.bound, r.available_bandwidth_bps, r.stop
        );
        assert!(2 * first.received_count() < first.len(), "{method}");
        assert_eq!(streams[1].len(), first.len(), "{method}");
        assert_ne!(r.bound, Bound::None, "{method}: {r:?}");
    }
}

/// PRC-MT's binary search reports its bracket's middle as before, but its
/// range is what its decisions support: the 90 % interval of the
/// posterior over them (about +-15 %). Its 2 % bracket held the truth in
/// 2 of seeds 1-8 on the default path.
#[test]
fn the_binary_search_s_range_is_what_its_decisions_support() {
    let mut held = 0;
    for seed in 1..=8 {
        let r = run(&format!("sim:,seed={seed}"), "prcmt");
        let t = r.truth_bps.unwrap();
        let half = (r.high_bps - r.low_bps) / 2.0 / r.available_bandwidth_bps;
        eprintln!("seed {seed}: {:+.3} half-width {half:.3}", rel(&r));
        assert_eq!(r.bound, Bound::Exact, "seed {seed}");
        assert!(half < 0.25, "seed {seed}: {half}");
        held += usize::from(r.low_bps <= t && t <= r.high_bps);
    }
    assert!(held >= 6, "{held} of 8");
}

#[test]
fn queue_fit_needs_the_capacity_and_reads_the_bursty_path_with_it() {
    let target = "sim:";
    let mut ch = SimChannel::new(parse_sim_target(target).unwrap(), target);
    let mut progress = |_: f64| {};
    let r = strategy::Method::QueueFit.run(
        &mut ch,
        &AnalysisParams::default(),
        Budget::default(),
        &mut progress,
    );
    assert!(
        matches!(r, Err(strategy::StrategyError::NeedsCapacity("queue-fit"))),
        "{r:?}"
    );
    // Given the 10 Gbit/s link, seeds 1-5 of the default (bursty) path.
    let a = AnalysisParams {
        capacity_bps: Some(10e9),
        ..AnalysisParams::default()
    };
    for seed in 1..=5 {
        let target = format!("sim:seed={seed}");
        let mut ch = SimChannel::new(parse_sim_target(&target).unwrap(), &target);
        let r = strategy::Method::QueueFit
            .run(&mut ch, &a, Budget::default(), &mut progress)
            .unwrap();
        assert_eq!(r.bound, Bound::Exact, "{r:?}");
        assert!(rel(&r).abs() < 0.1, "seed {seed}: {:+.3} ({r:?})", rel(&r));
    }
}

/// A channel whose hosts spoil the sends at given positions (0-based,
/// over every send): `late` ones come back with their sender late and
/// every packet lost, as no answer should be read from; `overflowed`
/// ones with the receiver's socket overflowed and the second half of the
/// stream lost there; `overflowed_lossless` ones overflowed with none of
/// the stream's packets among what the socket dropped.
struct Spoiled<C> {
    inner: C,
    sends: usize,
    late: Vec<usize>,
    overflowed: Vec<usize>,
    overflowed_lossless: Vec<usize>,
}

impl<C> Spoiled<C> {
    fn around(inner: C) -> Self {
        Spoiled {
            inner,
            sends: 0,
            late: Vec::new(),
            overflowed: Vec::new(),
            overflowed_lossless: Vec::new(),
        }
    }
}

impl<C: Channel> Channel for Spoiled<C> {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let mut p = self.inner.probe(request)?;
        let n = self.sends;
        self.sends += 1;
        let lost_from = if self.late.contains(&n) {
            p.sender_late = true;
            0
        } else if self.overflowed.contains(&n) {
            p.receiver_overflowed = true;
            p.stream.packets.len() / 2
        } else {
            p.receiver_overflowed = self.overflowed_lossless.contains(&n);
            p.stream.packets.len()
        };
        for k in &mut p.stream.packets[lost_from..] {
            k.recv_ns = None;
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

/// `multirate` over the resend tests' path (10 Gbit/s, 2.4 Gbit/s of
/// CBR cross traffic) through the [`Spoiled`] channel `spoil` sets up,
/// recorded: the recording and the report.
fn multirate_through(
    spoil: impl FnOnce(Spoiled<SimChannel>) -> Spoiled<SimChannel>,
) -> (Recorder<'static, Spoiled<SimChannel>>, Report) {
    let target = "sim:capacity=10G,cross=cbr:2.4G,coalescence=off";
    let spec = parse_sim_target(target).unwrap();
    let mut ch = Recorder::new(spoil(Spoiled::around(SimChannel::new(spec, target))));
    let r = multirate_on(&mut ch);
    (ch, r)
}

/// `multirate` with its defaults on `ch`.
fn multirate_on(ch: &mut dyn Channel) -> Report {
    let method: strategy::Method = "multirate".parse().unwrap();
    method
        .run(
            ch,
            &AnalysisParams::default(),
            Budget::default(),
            &mut |_: f64| {},
        )
        .unwrap()
}

/// `multirate` over a replay: the report and the streams it sent again.
fn multirate_replayed(replay: TraceChannel) -> (Report, String) {
    let mut ch = Recorder::new(replay);
    let r = multirate_on(&mut ch);
    (r, ch.superseded_list())
}

/// Sends 1 and 2 (the second stream and its first resend) and send 5
/// are late: the second stream goes three times, a later one twice; the
/// spoiled streams are paid for but never read, the answer is the
/// path's, and a replay of the recording (which knows which streams
/// were late) answers the same from the same streams.
#[test]
fn a_stream_whose_sender_fell_behind_is_sent_again() {
    let (ch, r) = multirate_through(|s| Spoiled {
        late: vec![1, 2, 5],
        ..s
    });
    assert_eq!(r.cost.resent_streams, 3, "{r:?}");
    assert_eq!(ch.superseded_list(), "1,2,5");
    assert_eq!(ch.late_list(), "1,2,5");
    assert_eq!(r.cost.streams + 3, ch.streams.len());
    let all_bytes: u64 = ch
        .streams
        .iter()
        .flat_map(|s| &s.packets)
        .map(|k| k.size_bytes as u64)
        .sum();
    assert_eq!(r.cost.probe_bytes, all_bytes);
    assert!(ch.kept().all(|(_, s)| s.received_count() > 0));
    // Seeds 1-3 of this path read -1.5 to -7.9 % with no sender late.
    assert!(rel(&r).abs() < 0.10, "{r:?}");

    let (again, superseded) = multirate_replayed(
        TraceChannel::new(ch.streams.clone(), ch.info().max_rate_bps).with_late_streams(&[1, 2, 5]),
    );
    assert_eq!(again.available_bandwidth_bps, r.available_bandwidth_bps);
    assert_eq!(again.cost.probe_bytes, r.cost.probe_bytes);
    assert_eq!(superseded, "1,2,5");
}

/// A sender late on every stream: the first streams go again, and once
/// three of the resends came back late too, no stream goes again.
#[test]
fn a_sender_late_on_every_stream_stops_being_sent_again() {
    let (ch, r) = multirate_through(|s| Spoiled {
        late: (0..1000).collect(),
        ..s
    });
    // The first stream goes three times (sends 0-2) and is kept; the
    // second (send 3) is kept too: two plus half of one kept stream
    // allow two resends in all; the third (send 4) goes again once
    // (two kept allow three), and that third resend late again ends it.
    assert_eq!(r.cost.resent_streams, 3, "{r:?}");
    assert_eq!(ch.superseded_list(), "0,1,4");
}

/// The receiver's socket overflows during sends 1, 3 and 4; 1 and 4 lost
/// half their packets there, 3 none: 1 and 4 go again (their losses may
/// be the host's), 3 is read as it came; the answer is the path's, and a
/// replay that knows which streams overflowed answers the same.
#[test]
fn a_stream_whose_receiver_dropped_probes_is_sent_again() {
    let (ch, r) = multirate_through(|s| Spoiled {
        overflowed: vec![1, 4],
        overflowed_lossless: vec![3],
        ..s
    });
    assert_eq!(r.cost.resent_streams, 2, "{r:?}");
    assert_eq!(ch.superseded_list(), "1,4");
    assert_eq!(ch.overflowed_list(), "1,3,4");
    assert_eq!(ch.late_list(), "");
    assert_eq!(r.cost.streams + 2, ch.streams.len());
    assert!(rel(&r).abs() < 0.10, "{r:?}");

    let (again, superseded) = multirate_replayed(
        TraceChannel::new(ch.streams.clone(), ch.info().max_rate_bps)
            .with_overflowed_streams(&[1, 3, 4]),
    );
    assert_eq!(again.available_bandwidth_bps, r.available_bandwidth_bps);
    assert_eq!(again.cost.probe_bytes, r.cost.probe_bytes);
    assert_eq!(superseded, "1,4");
}

/// The default path with a sender stalled 1 ms in 30 % of its streams:
/// every run sends some again, and 8 of seeds 1-10 read within +-10 %
/// (with no stream sent again, far fewer do).
#[test]
fn a_stalling_sender_still_reads_the_default_path() {
    let mut within = 0;
    for seed in 1..=10 {
        let r = run(&format!("sim:stalls=30%:1ms,seed={seed}"), "auto");
        assert!(r.cost.resent_streams > 0, "seed {seed}: {r:?}");
        within += (rel(&r).abs() <= 0.10) as usize;
    }
    assert!(within >= 7, "{within} of 10 within 10 %");
}

/// A 1 MB bucket at 200 Mbit/s behind a sender stalled 1 ms in 30 % of
/// its streams: a late shaper train goes again only after the wait for
/// the bucket to refill (a copy sent at once meets the bucket the first
/// emptied: when the trains went again so, 1 of seeds 1-6 read the
/// sustained rate), and 9 of seeds 1-10 read it.
#[test]
fn a_stalling_sender_still_finds_the_bucket() {
    let mut right = 0;
    for seed in 1..=10 {
        let target = format!(
            "sim:hops=1G,cross=none,shaper=200M/1MB,coalescence=off,stalls=30%:1ms,seed={seed}"
        );
        let r = run(&target, "auto");
        right += ((r.available_bandwidth_bps / 200e6 - 1.0).abs() <= 0.05) as usize;
    }
    assert!(right >= 8, "{right} of 10 read 200 Mbit/s");
}

/// An "at least" the top rate whose longer train passed whole says so
/// (the bytes a bucket would have to hold), whether the path is free or
/// holds a 1 MB bucket at 8.5 Gbit/s, which it cannot tell apart; a
/// bucket the trains found (5 Gbit/s) leaves nothing to say.
#[test]
fn a_train_whole_at_the_top_rate_is_reported() {
    for target in ["sim:cross=none", "sim:cross=none,shaper=8.5G/1MB"] {
        let r = run(target, "auto");
        assert_eq!(r.bound, Bound::AtLeast, "{target}: {r:?}");
        let bytes = r.whole_at_top_bytes.expect(target);
        assert!(bytes >= 4_000_000, "{target}: {bytes}");
    }
    let r = run("sim:cross=none,shaper=5G/1MB", "auto");
    assert_eq!((r.stop, r.whole_at_top_bytes), (Stop::Shaped, None));
}
