//! Recorded streams through the per-stream methods: every stream of a
//! probe trace (or streams built in memory) analysed by the chosen
//! methods, each stream by its kind.

use crate::bad_input;
use std::str::FromStr;

use anyhow::{anyhow, Result};
use tightlink_core::decision::bart::BartTracker;
use tightlink_core::decision::burst::{held_under_reading, Held};
use tightlink_core::decision::multirate::Consistency;
use tightlink_core::smoothing::imr::ImrWindow;
use tightlink_core::{Analysis, AnalysisParams, Analyzer, Method, ProbeStream, StreamKind};
use tightlink_trace::Trace;

/// Which per-stream methods run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Methods {
    /// The best method for each stream's kind.
    Default,
    /// Every method.
    All,
    /// One method.
    One(Method),
}

impl Methods {
    /// The methods that run on a stream of `kind`.
    pub fn for_kind(self, kind: StreamKind) -> Vec<Method> {
        match self {
            Methods::Default => vec![Method::default_for(kind)],
            Methods::All => Method::ALL.to_vec(),
            Methods::One(m) => vec![m],
        }
    }

    /// Refuses a known capacity that one named method would never read
    /// (see [`Method::reads_capacity`]): the setting would change
    /// nothing. The default per kind and `all` take it (a trace's pairs
    /// may read it). `given` is the setting as its user spelled it
    /// (`--capacity 10G`, `capacity_bps=1e10`).
    pub fn check_capacity(self, given: Option<&str>) -> Result<()> {
        if let (Some(given), Methods::One(m)) = (given, self) {
            if !self.reads_capacity() {
                bad_input!(
                    "{given}: {} does not read a known capacity ({} do)",
                    m.name(),
                    Method::capacity_readers()
                );
            }
        }
        Ok(())
    }

    /// Whether some method of these reads a known capacity.
    pub fn reads_capacity(self) -> bool {
        match self {
            Methods::One(m) => m.reads_capacity(),
            Methods::Default | Methods::All => true,
        }
    }
}

impl FromStr for Methods {
    type Err = anyhow::Error;
    /// `default`, `all`, or a method's name.
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "default" => Methods::Default,
            "all" => Methods::All,
            name => match Method::from_name(name) {
                Some(m) => Methods::One(m),
                None => bad_input!(
                    "{name}: unknown; choose default, all, or one of {}",
                    Method::ALL.map(|m| m.name()).join(", ")
                ),
            },
        })
    }
}

/// The analysis knobs as users give them (the CLI's flags, the Python
/// package's keywords), turned into [`AnalysisParams`] by one checker so
/// that both refuse the same values with the same words.
#[derive(Debug, Clone, PartialEq)]
pub struct AnalysisSettings {
    /// BASS SPIKE_UP, in mean send gaps.
    pub spike_up: f64,
    /// BASS SPIKE_DOWN, in mean send gaps.
    pub spike_down: f64,
    /// Relative rate tolerance of PRC-MT and of the multi-rate "exceeds" test.
    pub tolerance: f64,
    /// IMR window: a packet count, or `tenth` for a tenth of the stream.
    pub imr_window: String,
    /// Sliding window after multi-rate smoothing, in gaps.
    pub window: usize,
    /// Most spike-smoothing passes for `multirate`.
    pub max_passes: usize,
    /// `bracket`, `every-gap` or `cumulative`.
    pub consistency: String,
    /// The tight link's capacity when known, bit/s (IGI).
    pub capacity_bps: Option<f64>,
}

impl Default for AnalysisSettings {
    fn default() -> Self {
        AnalysisSettings {
            spike_up: 1.0,
            spike_down: 0.5,
            tolerance: 0.005,
            imr_window: "10".into(),
            window: 16,
            max_passes: 8,
            consistency: "bracket".into(),
            capacity_bps: None,
        }
    }
}

impl AnalysisSettings {
    /// Checked parameters. An error names the setting as `name` spells it
    /// (`spike-up` -> `--spike-up` for the CLI, `spike_up=` for Python).
    pub fn params(&self, name: &dyn Fn(&str) -> String) -> Result<AnalysisParams> {
        let fraction = |flag: &str, v: f64, max: f64| -> Result<f64> {
            if !v.is_finite() || !(0.0..=max).contains(&v) {
                bad_input!("{} {v}: must be a number from 0 to {max}", name(flag));
            }
            Ok(v)
        };
        let mut p = AnalysisParams::default();
        p.bass.spike_up = fraction("spike-up", self.spike_up, 1000.0)?;
        p.bass.spike_down = fraction("spike-down", self.spike_down, 1000.0)?;
        p.prcmt_tolerance = fraction("tolerance", self.tolerance, 0.5)?;
        p.multipass.exceed_tolerance = p.prcmt_tolerance;
        p.imr_window = match self.imr_window.as_str() {
            "tenth" => ImrWindow::TenthOfStream,
            n => match n.parse::<usize>() {
                Ok(k) if k >= 1 => ImrWindow::Packets(k),
                _ => bad_input!(
                    "{} {n}: must be a packet count of 1 or more, or `tenth`",
                    name("imr-window")
                ),
            },
        };
        if self.window == 0 {
            bad_input!("{} 0: must be 1 or more gaps", name("window"));
        }
        p.multipass.window = self.window;
        if self.max_passes == 0 {
            bad_input!("{} 0: must be 1 or more", name("max-passes"));
        }
        p.multipass.max_passes = self.max_passes;
        if let Some(c) = self.capacity_bps {
            if !(c.is_finite() && c > 0.0) {
                bad_input!("{} {c}: must be a positive rate", name("capacity"));
            }
            p.capacity_bps = Some(c);
        }
        p.consistency = match self.consistency.as_str() {
            "bracket" => Consistency::Bracket,
            "every-gap" => Consistency::EveryGap,
            "cumulative" => Consistency::Cumulative,
            c => bad_input!(
                "{} {c}: must be bracket, every-gap or cumulative",
                name("consistency")
            ),
        };
        Ok(p)
    }
}

/// `single`, `multi`, `chirp`, `pairs`, or `None` for "infer each
/// stream's kind".
pub fn parse_kind(s: &str) -> Result<Option<StreamKind>> {
    Ok(match s {
        "auto" => None,
        "single" | "single-rate" => Some(StreamKind::SingleRate),
        "multi" | "multi-rate" => Some(StreamKind::MultiRate),
        "chirp" => Some(StreamKind::Chirp),
        "pairs" => Some(StreamKind::Pairs),
        k => bad_input!("{k}: unknown stream kind; choose auto, single, multi, chirp or pairs"),
    })
}

/// Analyses `streams`: each of kind `kind`, or of the kind its send gaps
/// show when `None`; one result per (stream, method), in order. `bart`
/// tracks across the streams in their order: its answer for a stream is
/// the filter's after it.
pub fn analyze_streams(
    streams: &[ProbeStream],
    kind: Option<StreamKind>,
    methods: Methods,
    params: &AnalysisParams,
) -> Vec<Analysis> {
    let mut a = StreamAnalyzer::new(kind, methods, *params);
    streams.iter().flat_map(|s| a.push(s)).collect()
}

/// [`analyze_streams`] one stream at a time, for readers that do not hold
/// every stream at once.
pub struct StreamAnalyzer {
    kind: Option<StreamKind>,
    methods: Methods,
    params: AnalysisParams,
    tracker: BartTracker,
    /// Working memory reused from stream to stream.
    analyzer: Analyzer,
}

impl StreamAnalyzer {
    pub fn new(kind: Option<StreamKind>, methods: Methods, params: AnalysisParams) -> Self {
        StreamAnalyzer {
            kind,
            methods,
            tracker: BartTracker::new(params.bart),
            params,
            analyzer: Analyzer::new(),
        }
    }

    /// The next stream's results, one per method.
    pub fn push(&mut self, s: &ProbeStream) -> Vec<Analysis> {
        let p = &self.params;
        let kind = self.kind.unwrap_or_else(|| s.infer_kind(p.gap_tolerance));
        self.methods
            .for_kind(kind)
            .into_iter()
            .map(|m| {
                self.analyzer
                    .analyze_tracked(s, kind, m, p, &mut self.tracker)
            })
            .collect()
    }

    /// [`StreamAnalyzer::push`] for a stream the estimate sent again and
    /// did not read: `bart` reads it on a copy of its filter, so the
    /// streams after it are read as the estimate's filter read them.
    pub fn push_unread(&mut self, s: &ProbeStream) -> Vec<Analysis> {
        let kept = self.tracker.clone();
        let results = self.push(s);
        self.tracker = kept;
        results
    }
}

/// The tight link's capacity a trace's writer knew (`# capacity_bps=`,
/// bit/s): `None` where it gives none, an error naming the key where its
/// value is no positive rate.
pub fn trace_capacity_bps(trace: &Trace) -> Result<Option<f64>> {
    let Some(v) = trace.meta("capacity_bps") else {
        return Ok(None);
    };
    match v.trim().parse::<f64>() {
        Ok(c) if c.is_finite() && c > 0.0 => Ok(Some(c)),
        _ => bad_input!("metadata capacity_bps={v}: must be a positive rate in bit/s"),
    }
}

/// Analyses a trace: stream kinds from `kind`, else the trace's
/// `# stream_kinds=` metadata, else each stream's send gaps. Streams the
/// trace lists as late (`# late_streams=`: their sender stalled) carry a
/// note that says so, and whether the estimate sent them again. The
/// tight link's capacity is `params`', else the trace's
/// ([`trace_capacity_bps`]).
pub fn analyze_trace(
    trace: &Trace,
    kind: Option<StreamKind>,
    methods: Methods,
    params: &AnalysisParams,
) -> Result<Vec<Analysis>> {
    let params = &AnalysisParams {
        capacity_bps: match params.capacity_bps {
            Some(c) => Some(c),
            None => trace_capacity_bps(trace)?,
        },
        ..*params
    };
    let late = trace
        .stream_positions("late_streams")
        .map_err(|e| anyhow!(e))?;
    let superseded = trace
        .stream_positions("superseded_streams")
        .map_err(|e| anyhow!(e))?;
    let mut analyzer =
        StreamAnalyzer::new(kind.or_else(|| trace.declared_kind()), methods, *params);
    let mut results: Vec<Analysis> = Vec::new();
    for (i, s) in trace.streams.iter().enumerate() {
        results.extend(if superseded.contains(&i) {
            analyzer.push_unread(s)
        } else {
            analyzer.push(s)
        });
    }
    let overflowed = trace
        .stream_positions("overflowed_streams")
        .map_err(|e| anyhow!(e))?;
    for (positions, note, note_sent_again) in [
        (&late, STALLED, STALLED_AND_SENT_AGAIN),
        (&overflowed, OVERFLOWED, OVERFLOWED_AND_SENT_AGAIN),
    ] {
        for &i in positions {
            let id = trace.streams[i].id;
            let note = if superseded.contains(&i) {
                note_sent_again
            } else {
                note
            };
            for a in results.iter_mut().filter(|a| a.stream_id == id) {
                add_note(a, note);
            }
        }
    }
    // An exact or "at least" multi-rate reading is a floor under the
    // tight link's capacity, which the burst test needs. A late sender
    // leaves the same signature: those streams have their note.
    for (i, s) in trace.streams.iter().enumerate() {
        if late.contains(&i) {
            continue;
        }
        for a in results.iter_mut().filter(|a| a.stream_id == s.id) {
            match held_by(s, a) {
                Some(Held::Burst { rise_ns }) => add_note(a, &met_a_burst(rise_ns)),
                Some(Held::Pause { rise_ns }) => add_note(a, &held_at_once(rise_ns)),
                None => {}
            }
        }
    }
    Ok(results)
}

/// A burst faster than the link, or a pause, that multi-rate stream `s`
/// met ([`held_under_reading`]), with its analysis `a` as the capacity
/// floor the test needs: an exact or "at least" reading.
pub fn held_by(s: &ProbeStream, a: &Analysis) -> Option<Held> {
    (a.kind == StreamKind::MultiRate)
        .then(|| held_under_reading(s, a.bound, a.abw_bps))
        .flatten()
}

/// Puts `note` before what the analysis already said.
fn add_note(a: &mut Analysis, note: &str) {
    a.reason = Some(match a.reason.take() {
        Some(r) => format!("{note}; {r}"),
        None => note.to_string(),
    });
}

/// The note on a multi-rate stream that met cross traffic arriving
/// faster than the link carries it.
fn met_a_burst(rise_ns: f64) -> String {
    format!(
        "met a burst of cross traffic faster than the link (the queue rose {:.2} ms beyond what the stream's rates explain): the reading is where it came, not the stream's average",
        rise_ns / 1e6
    )
}

/// The note on a multi-rate stream the path held at once.
fn held_at_once(rise_ns: f64) -> String {
    format!(
        "held at once (the queue rose {:.2} ms in one step, beyond what the stream's rates explain): a pause of the path (the host, or a shaper's timer) or a batch of cross traffic that came at once; the reading counts it as cross traffic",
        rise_ns / 1e6
    )
}

/// Notes on the streams a trace lists as late.
const STALLED: &str =
    "its sender stalled (0.5 ms or more behind schedule): the path met a burst these send times do not show";
const STALLED_AND_SENT_AGAIN: &str =
    "its sender stalled (0.5 ms or more behind schedule): the path met a burst these send times do not show; the estimate sent it again and did not read it";
/// Notes on the streams a trace lists as overflowed.
const OVERFLOWED: &str =
    "the receiving host's socket dropped datagrams while it came in (receive buffer full): its lost packets may be the host's, not the path's";
const OVERFLOWED_AND_SENT_AGAIN: &str =
    "the receiving host's socket dropped datagrams while it came in (receive buffer full): its lost packets may be the host's, not the path's; the estimate sent it again and did not read it";

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_core::schedule::single_rate_schedule;
    use tightlink_core::Bound;

    #[test]
    fn a_capacity_only_one_named_reader_takes() {
        let given = Some("--capacity 10G");
        for m in [
            Method::QueueFit,
            Method::Igi,
            Method::Spruce,
            Method::Multirate,
        ] {
            Methods::One(m).check_capacity(given).unwrap();
        }
        for m in [Methods::Default, Methods::All] {
            m.check_capacity(given).unwrap();
        }
        let e = Methods::One(Method::Topp)
            .check_capacity(given)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("--capacity 10G: topp does not read"), "{e}");
        // Nothing given: nothing to refuse.
        Methods::One(Method::Topp).check_capacity(None).unwrap();
    }

    #[test]
    fn settings_are_checked_with_the_caller_s_names() {
        let flag = |n: &str| format!("--{n}");
        assert_eq!(
            AnalysisSettings::default().params(&flag).unwrap(),
            AnalysisParams::default()
        );
        let bad = |s: AnalysisSettings| s.params(&flag).unwrap_err().to_string();
        let e = bad(AnalysisSettings {
            spike_up: -1.0,
            ..Default::default()
        });
        assert_eq!(e, "--spike-up -1: must be a number from 0 to 1000");
        let e = bad(AnalysisSettings {
            imr_window: "0".into(),
            ..Default::default()
        });
        assert!(e.starts_with("--imr-window 0"), "{e}");
        let e = bad(AnalysisSettings {
            consistency: "sometimes".into(),
            ..Default::default()
        });
        assert!(e.contains("every-gap"), "{e}");
        let py = |n: &str| format!("{}=", n.replace('-', "_"));
        let e = AnalysisSettings {
            window: 0,
            ..Default::default()
        }
        .params(&py)
        .unwrap_err()
        .to_string();
        assert_eq!(e, "window= 0: must be 1 or more gaps");
        assert_eq!(parse_kind("multi").unwrap(), Some(StreamKind::MultiRate));
        assert!(parse_kind("both").is_err());
    }

    #[test]
    fn method_choices_parse_and_expand() {
        assert_eq!("all".parse::<Methods>().unwrap(), Methods::All);
        assert_eq!(
            "prcmt+bass".parse::<Methods>().unwrap(),
            Methods::One(Method::PrcmtBass)
        );
        let e = "nope".parse::<Methods>().unwrap_err().to_string();
        assert!(
            e.contains("nope: unknown") && e.contains("imr-wavelet"),
            "{e}"
        );
        assert_eq!(
            Methods::Default.for_kind(StreamKind::MultiRate),
            vec![Method::Multirate]
        );
        assert_eq!(
            Methods::All.for_kind(StreamKind::SingleRate).len(),
            Method::ALL.len()
        );
    }

    /// A trace whose writer knew the tight link's capacity: the queue fit
    /// reads it there (10 Gbit/s with 3.7 of fluid cross traffic: 6.3
    /// free, exactly), a capacity the caller gives wins, and a value that
    /// is no rate stops with the key named.
    #[test]
    fn the_trace_s_capacity_is_read_unless_one_is_given() {
        use tightlink_core::schedule::{multi_rate_schedule, rates_around};
        use tightlink_core::synth::SynthPath;
        let send = multi_rate_schedule(&rates_around(6.5e9, 0.3, 5), 64, 9000);
        let mut trace = Trace {
            metadata: vec![("capacity_bps".into(), "10000000000".into())],
            streams: vec![SynthPath::ten_gig(3.7e9).stream(1, &send, 9000)],
        };
        let fit = |trace: &Trace, p: &AnalysisParams| {
            analyze_trace(trace, None, Methods::One(Method::QueueFit), p)
                .map(|rows| (rows[0].bound, rows[0].abw_bps, rows[0].detail.capacity_bps))
        };
        let (bound, abw, capacity) = fit(&trace, &AnalysisParams::default()).unwrap();
        assert_eq!((bound, capacity), (Bound::Exact, Some(10e9)));
        assert!((abw.unwrap() / 6.3e9 - 1.0).abs() < 1e-3, "{abw:?}");
        let given = AnalysisParams {
            capacity_bps: Some(12e9),
            ..AnalysisParams::default()
        };
        assert_eq!(fit(&trace, &given).unwrap().2, Some(12e9));
        trace.metadata[0].1 = "ten".into();
        let e = fit(&trace, &AnalysisParams::default()).unwrap_err();
        assert!(e.to_string().contains("metadata capacity_bps=ten"), "{e}");
        assert!(fit(&trace, &given).is_ok());
    }

    /// Two multi-rate streams over a 10 Gbit/s hop with 5 Gbit/s of fluid
    /// cross traffic (3.5 to 6.5 Gbit/s, 64 packets a rate, 4.6 ms): the
    /// second meets 10 Mbit of cross traffic at 20 Gbit/s (twice the
    /// link) 1.5 ms in, in its second sub-stream (4.25 Gbit/s: probes
    /// then leave (4.25 + 25) / 10 times as far apart as sent, 0.925
    /// more than twice, for 0.5 ms: 0.45 ms in the whole gaps it spans):
    /// it reads "at least" that rate, and its note says why; the first
    /// has none.
    #[test]
    fn a_stream_that_met_a_burst_carries_a_note() {
        use tightlink_core::schedule::{multi_rate_schedule, rates_around};
        use tightlink_core::synth::SynthPath;
        let send = multi_rate_schedule(&rates_around(5e9, 0.3, 5), 64, 9000);
        let calm = SynthPath::ten_gig(5e9);
        let mut burst = calm.clone();
        burst.rate_steps = vec![(1.5e6, 20e9), (2.0e6, 0.0)];
        let trace = Trace {
            metadata: Vec::new(),
            streams: vec![calm.stream(1, &send, 9000), burst.stream(2, &send, 9000)],
        };
        let p = AnalysisParams::default();
        let rows = analyze_trace(&trace, None, Methods::One(Method::Multirate), &p).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].bound, Bound::Exact);
        assert!(
            (rows[0].abw_bps.unwrap() / 5e9 - 1.0).abs() < 0.1,
            "{rows:?}"
        );
        assert!(rows[0].reason.is_none(), "{rows:?}");
        // "At least" the sub-stream rate the burst came at (4.25 Gbit/s).
        assert_eq!(rows[1].bound, Bound::AtLeast, "{rows:?}");
        assert!(
            (rows[1].abw_bps.unwrap() / 4.25e9 - 1.0).abs() < 0.01,
            "{rows:?}"
        );
        let note = rows[1].reason.as_deref().unwrap_or("");
        assert!(
            note.starts_with(
                "met a burst of cross traffic faster than the link (the queue rose 0.45"
            ),
            "{note}"
        );
    }

    /// The same second stream, but its 10 Mbit comes at once (a 1 ms
    /// hole in one step): noted as held at once, not as a burst.
    #[test]
    fn a_stream_held_at_once_carries_its_note() {
        use tightlink_core::schedule::{multi_rate_schedule, rates_around};
        use tightlink_core::synth::SynthPath;
        let send = multi_rate_schedule(&rates_around(5e9, 0.3, 5), 64, 9000);
        let mut held = SynthPath::ten_gig(5e9);
        held.bursts = vec![(1.5e6, 10e6)];
        let trace = Trace {
            metadata: Vec::new(),
            streams: vec![held.stream(2, &send, 9000)],
        };
        let p = AnalysisParams::default();
        let rows = analyze_trace(&trace, None, Methods::One(Method::Multirate), &p).unwrap();
        let note = rows[0].reason.as_deref().unwrap_or("");
        assert!(
            note.starts_with("held at once (the queue rose 0.9"),
            "{note}"
        );
    }

    /// A trace of five streams (ids 3-7) whose second and third were
    /// late, the second sent again, and whose fourth and fifth met a
    /// receiver's socket that overflowed, the fourth sent again: their
    /// results say so, the first's do not; a position past the end is an
    /// error.
    #[test]
    fn late_streams_of_a_trace_carry_a_note() {
        let send = single_rate_schedule(5e9, 50, 9000, 0);
        let recv: Vec<Option<i64>> = send.iter().map(|t| Some(t + 1000)).collect();
        let mut trace = Trace {
            metadata: vec![
                ("late_streams".into(), "1,2".into()),
                ("superseded_streams".into(), "1,3".into()),
                ("overflowed_streams".into(), "3,4".into()),
            ],
            streams: (3..8)
                .map(|id| ProbeStream::from_times(id, 9000, &send, &recv))
                .collect(),
        };
        let p = AnalysisParams::default();
        let rows = analyze_trace(&trace, None, Methods::One(Method::PrcmtBass), &p).unwrap();
        let notes: Vec<(u64, Option<&str>)> = rows
            .iter()
            .map(|a| (a.stream_id, a.reason.as_deref()))
            .collect();
        assert_eq!(
            notes,
            vec![
                (3, None),
                (4, Some(STALLED_AND_SENT_AGAIN)),
                (5, Some(STALLED)),
                (6, Some(OVERFLOWED_AND_SENT_AGAIN)),
                (7, Some(OVERFLOWED)),
            ]
        );
        trace.metadata[2].1 = "1,5".into();
        let e = analyze_trace(&trace, None, Methods::One(Method::PrcmtBass), &p).unwrap_err();
        assert!(
            e.to_string().contains("stream 5 is not in the trace"),
            "{e}"
        );
    }

    /// Two single-rate streams, one method each, kinds inferred: one
    /// result per stream, in order, each naming its stream.
    #[test]
    fn streams_in_order() {
        let send = single_rate_schedule(5e9, 50, 9000, 0);
        let recv: Vec<Option<i64>> = send.iter().map(|t| Some(t + 1000)).collect();
        let streams = [
            ProbeStream::from_times(3, 9000, &send, &recv),
            ProbeStream::from_times(4, 9000, &send, &recv),
        ];
        let r = analyze_streams(&streams, None, Methods::Default, &AnalysisParams::default());
        assert_eq!(
            r.iter().map(|a| a.stream_id).collect::<Vec<_>>(),
            vec![3, 4]
        );
        assert!(r.iter().all(|a| a.kind == StreamKind::SingleRate));
    }

    /// `bart` carries its filter from stream to stream: on a steady CBR
    /// path its answer after ten streams is within 3 % of the truth, and
    /// the same streams one at a time (a fresh filter each) answer
    /// differently from the tracked ones.
    #[test]
    fn bart_tracks_across_the_streams_in_order() {
        use crate::simulate::{simulate, Schedule, SimulateOptions};
        let target = crate::Target::parse("sim:cross=cbr:3G,coalescence=off").unwrap();
        let sim = simulate(
            &target,
            &SimulateOptions {
                streams: 10,
                size_bytes: 9000,
                schedule: Schedule::Multi {
                    centre_bps: None,
                    range: 0.3,
                    rates: 5,
                    per_rate: 64,
                },
            },
        )
        .unwrap();
        let p = AnalysisParams::default();
        let tracked = analyze_streams(&sim.streams, None, Methods::One(Method::Bart), &p);
        assert_eq!(tracked.len(), 10);
        let last = tracked[9].abw_bps.unwrap();
        assert!((last / 7e9 - 1.0).abs() < 0.03, "{last}");
        let alone: Vec<f64> = sim
            .streams
            .iter()
            .map(|s| {
                tightlink_core::analyze(s, StreamKind::MultiRate, Method::Bart, &p)
                    .abw_bps
                    .unwrap()
            })
            .collect();
        assert_eq!(
            alone[0],
            tracked[0].abw_bps.unwrap(),
            "the first is the same"
        );
        assert_ne!(alone[9], last, "the tenth carries nine streams before it");
        // One at a time through StreamAnalyzer: the same as all at once.
        let mut a = StreamAnalyzer::new(None, Methods::One(Method::Bart), p);
        let one_by_one: Vec<Analysis> = sim.streams.iter().flat_map(|s| a.push(s)).collect();
        assert_eq!(one_by_one, tracked);
        // A trace whose fourth stream the estimate sent again: its filter
        // never read it, and neither does the replay's. The streams after
        // it read as the nine without it do, and it reads as the filter
        // of the three before it would.
        let trace = Trace {
            metadata: vec![("superseded_streams".into(), "3".into())],
            streams: sim.streams.clone(),
        };
        let replayed = analyze_trace(&trace, None, Methods::One(Method::Bart), &p).unwrap();
        let without: Vec<ProbeStream> = sim
            .streams
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != 3)
            .map(|(_, s)| s.clone())
            .collect();
        let nine = analyze_streams(&without, None, Methods::One(Method::Bart), &p);
        let abw = |r: &[Analysis]| r.iter().map(|a| a.abw_bps).collect::<Vec<_>>();
        assert_eq!(abw(&replayed[4..]), abw(&nine[3..]));
        assert_eq!(replayed[3].abw_bps, tracked[3].abw_bps);
        assert_ne!(abw(&replayed[4..]), abw(&tracked[4..]));
    }
}
