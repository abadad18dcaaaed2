//! Probe streams through the simulated path, kept with their ground
//! truth: what `tightlink simulate` writes as a trace, and what a
//! researcher feeds to the methods from a program.

use crate::bad_input;
use std::fmt;
use std::path::Path;

use anyhow::Result;
use tightlink_core::channel::{Channel, GroundTruth, Recorder, StreamRequest};
use tightlink_core::schedule::{
    jumbo_chirp_schedule, jumbo_top_rate, multi_rate_schedule, pair_schedule, rates_around,
    single_rate_schedule,
};
use tightlink_core::{ProbeStream, StreamKind};
use tightlink_sim::{PathSpec, SimChannel};

use crate::save;
use crate::target::Target;

/// The streams to send.
#[derive(Debug, Clone, PartialEq)]
pub enum Schedule {
    /// `packets` at each rate of `rates_bps`, the rates used in turn.
    Single { rates_bps: Vec<f64>, packets: usize },
    /// `rates` rates spread over `centre * (1 +- range)`, `per_rate`
    /// packets each; the centre defaults to the path's nominal available
    /// bandwidth (capacity minus mean cross traffic).
    Multi {
        centre_bps: Option<f64>,
        range: f64,
        rates: usize,
        per_rate: usize,
    },
    /// Chirps (pathChirp's): gaps from `low_bps` shrinking by `spread` up
    /// to `high_bps`; by default from a tenth of the sender's link rate
    /// to all of it.
    Chirp {
        low_bps: Option<f64>,
        high_bps: Option<f64>,
        spread: f64,
        /// Packets per chirp element, back to back (pathChirp's `-J`;
        /// 1: a plain chirp). The default top rate is then the highest
        /// that keeps the elements apart.
        jumbo: usize,
    },
    /// Spruce's packet pairs: `pairs` per stream, each pair's packets a
    /// `capacity_bps` gap apart (default: the path's narrow link), pair
    /// starts exponentially spaced with mean `mean_gap_ns` (at least the
    /// gap that keeps the pairs under 5 % of the capacity: Spruce's rule).
    Pairs {
        pairs: usize,
        capacity_bps: Option<f64>,
        mean_gap_ns: f64,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct SimulateOptions {
    pub streams: usize,
    /// Probe packet size, bytes.
    pub size_bytes: u32,
    pub schedule: Schedule,
}

/// A rate the sender's link cannot send: `index` of the single-rate list,
/// or `None` for a multi-rate stream's or a chirp's lowest or highest
/// rate.
#[derive(Debug, Clone, PartialEq)]
pub struct RateOutside {
    pub index: Option<usize>,
    pub rate_bps: f64,
    pub max_bps: f64,
}

impl fmt::Display for RateOutside {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.3} Gbit/s is outside what the sender's link sends (0-{:.3} Gbit/s)",
            self.rate_bps / 1e9,
            self.max_bps / 1e9
        )
    }
}

impl std::error::Error for RateOutside {}

/// What was sent and what came back, with the truth per stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Simulated {
    pub target: String,
    pub kind: StreamKind,
    pub streams: Vec<ProbeStream>,
    /// `None` where fewer than two packets of the stream arrived.
    pub truths: Vec<Option<GroundTruth>>,
    /// The tight link's capacity (a token bucket's rate where one is
    /// tightest), which the trace's `# capacity_bps=` carries: a path
    /// property the user set, as a testbed's traces would carry it.
    pub capacity_bps: f64,
}

impl Simulated {
    /// Writes the trace (gzip for `.gz`) and, if asked, the truth CSV;
    /// returns how many streams had no truth.
    pub fn write(&self, trace: &Path, truth: Option<&Path>) -> Result<usize> {
        let metadata = vec![
            ("source".to_string(), "tightlink simulate".to_string()),
            ("path".to_string(), self.target.clone()),
            ("stream_kinds".to_string(), self.kind.as_str().to_string()),
            ("size_layer".to_string(), "simulated packet".to_string()),
            (
                "capacity_bps".to_string(),
                format!("{:.0}", self.capacity_bps),
            ),
        ];
        save::write_trace(trace, metadata, &self.streams)?;
        match truth {
            Some(t) => save::write_truth(t, &self.streams, &self.truths),
            None => Ok(0),
        }
    }
}

/// Sends the streams of `options` through the simulated `target`.
pub fn simulate(target: &Target, options: &SimulateOptions) -> Result<Simulated> {
    let Target::Sim { text, spec } = target else {
        bad_input!("target {target}: simulate needs a simulated path (sim:...)");
    };
    if options.streams == 0 {
        bad_input!("--streams 0: must be 1 or more");
    }
    if options.size_bytes < 64 {
        bad_input!(
            "--size {}: probe packets must be at least 64 bytes",
            options.size_bytes
        );
    }
    let nominal = spec.nominal_available_bps();
    let mut channel = Recorder::new(SimChannel::new(spec.clone(), text.clone()));
    let max_bps = channel.info().max_rate_bps;
    let size = options.size_bytes;
    let (kind, schedules) = schedules(options, spec, max_bps, nominal)?;
    for sched in &schedules {
        channel.probe(&StreamRequest::from_send_times(sched, size))?;
    }
    Ok(Simulated {
        target: text.clone(),
        kind,
        streams: channel.streams,
        truths: channel.truths,
        capacity_bps: spec.tight_capacity_bps(),
    })
}

/// Whether `rate_bps` is a rate the simulated sender can probe at.
fn in_range(index: Option<usize>, rate_bps: f64, max_bps: f64) -> Result<(), RateOutside> {
    if rate_bps.is_nan() || rate_bps <= 0.0 || rate_bps > max_bps {
        return Err(RateOutside {
            index,
            rate_bps,
            max_bps,
        });
    }
    Ok(())
}

/// Each stream's send times, as `options.schedule` asks, checked.
fn schedules(
    options: &SimulateOptions,
    spec: &PathSpec,
    max_bps: f64,
    nominal: f64,
) -> Result<(StreamKind, Vec<Vec<i64>>)> {
    let size = options.size_bytes;
    let check = |index: Option<usize>, rate_bps: f64| in_range(index, rate_bps, max_bps);
    match &options.schedule {
        Schedule::Single { rates_bps, packets } => {
            if *packets < 2 {
                bad_input!("--packets {packets}: a stream needs at least 2");
            }
            if rates_bps.is_empty() {
                bad_input!("--rate: give at least one rate");
            }
            for (i, &r) in rates_bps.iter().enumerate() {
                check(Some(i), r)?;
            }
            let s = (0..options.streams)
                .map(|i| single_rate_schedule(rates_bps[i % rates_bps.len()], *packets, size, 0))
                .collect();
            Ok((StreamKind::SingleRate, s))
        }
        Schedule::Multi {
            centre_bps,
            range,
            rates,
            per_rate,
        } => {
            if !(0.0..1.0).contains(range) {
                bad_input!("--range {range}: must be in [0, 1)");
            }
            if *rates < 2 || *per_rate < 2 {
                bad_input!("--rates and --per-rate: at least 2 each");
            }
            let rates = rates_around(centre_bps.unwrap_or(nominal), *range, *rates);
            check(None, rates[0])?;
            check(None, rates[rates.len() - 1])?;
            let s = vec![multi_rate_schedule(&rates, *per_rate, size); options.streams];
            Ok((StreamKind::MultiRate, s))
        }
        &Schedule::Chirp {
            low_bps,
            high_bps,
            spread,
            jumbo,
        } => chirp_schedules(options, max_bps, (low_bps, high_bps), spread, jumbo),
        &Schedule::Pairs {
            pairs,
            capacity_bps,
            mean_gap_ns,
        } => pairs_schedules(options, spec, max_bps, pairs, capacity_bps, mean_gap_ns),
    }
}

/// Chirps from `low` to `high` (10 % of the link to the top rate
/// elements of `jumbo` packets keep apart, by default).
fn chirp_schedules(
    options: &SimulateOptions,
    max_bps: f64,
    (low_bps, high_bps): (Option<f64>, Option<f64>),
    spread: f64,
    jumbo: usize,
) -> Result<(StreamKind, Vec<Vec<i64>>)> {
    let size = options.size_bytes;
    let check = |index: Option<usize>, rate_bps: f64| in_range(index, rate_bps, max_bps);
    if !(spread > 1.0 && spread <= 4.0) {
        bad_input!("--spread {spread}: must be above 1 and at most 4");
    }
    if !(1..=256).contains(&jumbo) {
        bad_input!("--jumbo {jumbo}: packets per chirp element, 1 to 256");
    }
    let top = jumbo_top_rate(max_bps, jumbo);
    let low = low_bps.unwrap_or(0.1 * max_bps);
    let high = high_bps.unwrap_or(top);
    if high > top {
        bad_input!(
            "--high {:.3} Gbit/s: elements of {jumbo} packets stay apart only up to {:.3} Gbit/s on this link",
            high / 1e9,
            top / 1e9
        );
    }
    check(None, low)?;
    check(None, high)?;
    if high <= low {
        bad_input!(
            "--low {:.3} and --high {:.3} Gbit/s: the top rate must be above the lowest",
            low / 1e9,
            high / 1e9
        );
    }
    let sched = jumbo_chirp_schedule(low, high, spread, size, jumbo, max_bps);
    Ok((StreamKind::Chirp, vec![sched; options.streams]))
}

/// Packet pairs at exponential gaps (Spruce's schedule), their gap the
/// tight link's transmission time.
fn pairs_schedules(
    options: &SimulateOptions,
    spec: &PathSpec,
    max_bps: f64,
    pairs: usize,
    capacity_bps: Option<f64>,
    mean_gap_ns: f64,
) -> Result<(StreamKind, Vec<Vec<i64>>)> {
    let size = options.size_bytes;
    let check = |index: Option<usize>, rate_bps: f64| in_range(index, rate_bps, max_bps);
    if pairs == 0 {
        bad_input!("--pairs 0: a stream needs at least one pair");
    }
    if !(mean_gap_ns.is_finite() && mean_gap_ns > 0.0) {
        bad_input!("--mean-gap {mean_gap_ns} ns: must be above 0");
    }
    let capacity = capacity_bps.unwrap_or(spec.narrow_capacity_bps());
    check(None, capacity)?;
    let pair_gap_ns = 8.0 * size as f64 * 1e9 / capacity;
    let mean = mean_gap_ns.max(2.0 * pair_gap_ns / 0.05);
    // A fixed seed, as the spruce strategy's: one schedule, one run.
    let mut rng = tightlink_core::rng::Rng::new(0x5b_5ce);
    let s = (0..options.streams)
        .map(|_| pair_schedule(pairs, pair_gap_ns, mean, &mut rng))
        .collect();
    Ok((StreamKind::Pairs, s))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `streams` streams of 9000-byte probes by `schedule` through `target`.
    fn sim(target: &Target, streams: usize, schedule: Schedule) -> Result<Simulated> {
        simulate(
            target,
            &SimulateOptions {
                streams,
                size_bytes: 9000,
                schedule,
            },
        )
    }

    #[test]
    fn streams_come_back_with_their_truth() {
        let target = Target::parse("sim:capacity=10G,cross=cbr:3G,coalescence=off").unwrap();
        let s = sim(
            &target,
            3,
            Schedule::Multi {
                centre_bps: None,
                range: 0.3,
                rates: 5,
                per_rate: 16,
            },
        )
        .unwrap();
        assert_eq!(s.kind, StreamKind::MultiRate);
        assert_eq!(s.streams.len(), 3);
        assert!(s.streams.iter().all(|x| x.len() == 80));
        // CBR 3G on 10G: the truth is 7 Gbit/s within a percent.
        for t in s.truths.iter().flatten() {
            assert!((t.available_bps / 7e9 - 1.0).abs() < 0.01, "{t:?}");
        }
    }

    /// Pairs on 10 Gbit/s with 3 Gbit/s of CBR: each stream 20 pairs of
    /// 9000-byte packets 7.2 us apart (the capacity's gap), pair starts
    /// 10 ms apart on average; Spruce's mean over the 100 pairs reads the
    /// 7 Gbit/s left within 15 %.
    #[test]
    fn pairs_are_a_capacity_gap_apart_and_spruce_reads_them() {
        let target = Target::parse("sim:capacity=10G,cross=cbr:3G,coalescence=off").unwrap();
        let s = sim(
            &target,
            5,
            Schedule::Pairs {
                pairs: 20,
                capacity_bps: None,
                mean_gap_ns: 10e6,
            },
        )
        .unwrap();
        assert_eq!(s.kind, StreamKind::Pairs);
        let mut est = Vec::new();
        for st in &s.streams {
            assert_eq!(st.len(), 40);
            let p = &st.packets;
            for pair in p.chunks(2) {
                assert_eq!(pair[1].send_ns - pair[0].send_ns, 7_200);
            }
            let starts: Vec<i64> = p.iter().step_by(2).map(|x| x.send_ns).collect();
            let mean = (starts[19] - starts[0]) as f64 / 19.0;
            assert!((2e6..40e6).contains(&mean), "{mean} ns between pairs");
            est.extend(tightlink_core::decision::spruce::pair_estimates(st, 10e9));
        }
        let mean = est.iter().sum::<f64>() / est.len() as f64;
        assert!(est.len() >= 90, "{} pairs answered", est.len());
        assert!((mean / 7e9 - 1.0).abs() < 0.15, "{mean}");
    }

    #[test]
    fn chirps_come_back_as_chirps() {
        let target = Target::parse("sim:capacity=10G,cross=cbr:3G,coalescence=off").unwrap();
        let s = sim(
            &target,
            2,
            Schedule::Chirp {
                low_bps: None,
                high_bps: None,
                spread: 1.2,
                jumbo: 1,
            },
        )
        .unwrap();
        // 10 Gbit/s down to 1 at 1.2: 12.6 -> 13 steps, 15 packets.
        assert_eq!(s.kind, StreamKind::Chirp);
        assert!(s.streams.iter().all(|x| x.len() == 15));
        let k = s.streams[0].infer_kind(tightlink_core::stream::GapTolerance::default());
        assert_eq!(k, StreamKind::Chirp);
        // Jumbo chirps of 4 packets: the top rate 10 * 4 / 7 = 5.71
        // Gbit/s, down to 1 at 1.2: 9.6 -> 10 steps, 12 elements.
        let jumbo = |high_bps| {
            sim(
                &target,
                2,
                Schedule::Chirp {
                    low_bps: None,
                    high_bps,
                    spread: 1.2,
                    jumbo: 4,
                },
            )
        };
        let s = jumbo(None).unwrap();
        assert!(
            s.streams.iter().all(|x| x.len() == 48),
            "{}",
            s.streams[0].len()
        );
        assert_eq!(s.streams[0].jumbo_elements().map(|e| e.len()), Some(12));
        let k = s.streams[0].infer_kind(tightlink_core::stream::GapTolerance::default());
        assert_eq!(k, StreamKind::Chirp);
        let e = jumbo(Some(8e9)).unwrap_err().to_string();
        assert!(e.contains("--high 8.000") && e.contains("5.714"), "{e}");
    }

    #[test]
    fn rates_the_link_cannot_send_are_named() {
        let target = Target::default_sim();
        let e = sim(
            &target,
            1,
            Schedule::Single {
                rates_bps: vec![5e9, 20e9],
                packets: 10,
            },
        )
        .unwrap_err();
        let r = e.downcast_ref::<RateOutside>().expect("a rate error");
        assert_eq!((r.index, r.rate_bps, r.max_bps), (Some(1), 20e9, 10e9));
        let e = simulate(
            &Target::parse("twamp:h").unwrap(),
            &SimulateOptions {
                streams: 1,
                size_bytes: 9000,
                schedule: Schedule::Single {
                    rates_bps: vec![1e9],
                    packets: 10,
                },
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("simulated path"), "{e}");
    }
}
