//! The `--json` report as types: what an estimate serialises to and what
//! a reader of that JSON deserialises it into.

use serde::{Deserialize, Serialize};

use crate::estimate::{Capped, EstimateReport};

/// The `--json` object, field for field: what [`EstimateReport`]
/// serialises to, and what a reader of that JSON (the lab, a test, a
/// script in Rust) deserialises it into. Fields are added, never renamed;
/// a field an older report lacks reads as its default.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct EstimateJson {
    pub target: String,
    pub method: String,
    pub available_bandwidth_bps: f64,
    pub bound: String,
    pub low_bps: f64,
    pub high_bps: f64,
    pub probe_bytes: u64,
    pub probe_packets: u64,
    pub streams: usize,
    /// Streams sent again because their sender fell behind (their bytes
    /// are in `probe_bytes`).
    pub resent_streams: usize,
    pub duration_s: f64,
    pub truth_bps: Option<f64>,
    pub stop: String,
    pub rate_layer: String,
    pub host_limit_bps: Option<f64>,
    pub host_limited: bool,
    /// Streams whose sender fell behind its schedule (real targets).
    pub sender_late_streams: Option<usize>,
    pub probe_ceiling_bps: Option<f64>,
    pub sender_bottleneck_bps: Option<f64>,
    pub wall_s: f64,
    pub drops: std::collections::BTreeMap<String, u64>,
    /// Each warning's text, and in the same order its stable code.
    pub warnings: Vec<String>,
    pub warning_codes: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub far_end: Option<String>,
    pub host_stolen_share: Option<f64>,
    pub probe_window_unix_ns: Option<[i64; 2]>,
    pub answer_window_unix_ns: Option<[i64; 2]>,
    pub shaper: Option<ShaperJson>,
    pub busy: Option<BusyJson>,
    pub slow_trains: Option<SlowTrainsJson>,
    /// Where a search stopped `swings`: the lowest rate a stream met
    /// congestion at and the highest it met room at, among the decisions
    /// that contradicted the rest (`null` otherwise).
    pub swung_bps: Option<[f64; 2]>,
}

/// Two shaper trains whose tails both came out well under an exact answer
/// they could not change (`null` otherwise): the range reaches down to
/// the slower tail.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SlowTrainsJson {
    pub rate_bps: f64,
    pub tails_bps: [f64; 2],
}

/// The idle check's lone probes, where they found the link busy (`null`
/// otherwise).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct BusyJson {
    /// The rate the streams read, the link's when idle.
    pub idle_bps: f64,
    /// Probes that waited or were lost, of those sent, over `span_ns`.
    pub busy: usize,
    pub probes: usize,
    pub span_ns: i64,
}

/// A token bucket the shaper trains showed (`null` when none).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ShaperJson {
    /// What the probe streams had answered, and its bound.
    pub streams_bps: f64,
    pub streams_bound: String,
    /// The trains' head and tail rates, and the bytes ahead of the tail.
    pub head_bps: f64,
    pub tail_bps: f64,
    pub bucket_bytes: f64,
    pub train_bytes: u64,
    /// False where the trains' tails alone refuted the streams (a head
    /// hidden in one receive batch).
    pub head_seen: bool,
    /// Where cross traffic shares the bucket (a third train at a lower
    /// rate): the bucket's rate and the cross traffic's; `null` otherwise.
    pub token_bps: Option<f64>,
    pub cross_bps: Option<f64>,
    /// How far the two trains' tails at one rate lay apart, relative:
    /// over 2 % with no line drawn, cross traffic moves through the
    /// bucket and the answer is "at most" the tail.
    pub tail_spread: f64,
}

impl Serialize for EstimateReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        EstimateJson::from(self).serialize(s)
    }
}

impl From<&EstimateReport> for EstimateJson {
    fn from(r: &EstimateReport) -> Self {
        let host = r.host.as_ref();
        let e = &r.estimate;
        EstimateJson {
            target: r.target.clone(),
            method: e.method.name().to_string(),
            available_bandwidth_bps: e.available_bandwidth_bps,
            bound: e.bound.as_str().to_string(),
            low_bps: e.low_bps,
            // JSON has no infinity: no upper limit reads as the estimate.
            high_bps: if e.high_bps.is_finite() {
                e.high_bps
            } else {
                e.available_bandwidth_bps
            },
            probe_bytes: e.cost.probe_bytes,
            probe_packets: e.cost.probe_packets,
            streams: e.cost.streams,
            resent_streams: e.cost.resent_streams,
            duration_s: e.cost.duration_s,
            truth_bps: e.truth_bps.filter(|t| t.is_finite()),
            stop: e.stop.as_str().to_string(),
            rate_layer: r.rate_layer.to_string(),
            host_limit_bps: r.host_limit_bps(),
            host_limited: r.capped == Some(Capped::HostLimited),
            sender_late_streams: host.map(|h| h.late_streams),
            probe_ceiling_bps: r.probe_ceiling_bps,
            sender_bottleneck_bps: host.and_then(|h| h.own_link_bps),
            wall_s: e.cost.wall_s,
            drops: host
                .map(|h| h.drops.iter().map(|&(k, v)| (k.to_string(), v)).collect())
                .unwrap_or_default(),
            warnings: r.all_warnings().map(|w| w.text.clone()).collect(),
            warning_codes: r
                .all_warnings()
                .map(|w| w.code.name().to_string())
                .collect(),
            far_end: host.and_then(|h| h.far_end.clone()),
            host_stolen_share: host.and_then(|h| h.stolen_share),
            probe_window_unix_ns: r.probe_window_unix_ns,
            answer_window_unix_ns: r.answer_window_unix_ns,
            shaper: e.shaper.map(|sh| ShaperJson {
                streams_bps: sh.streams_bps,
                streams_bound: sh.streams_bound.as_str().to_string(),
                head_bps: sh.head_bps,
                tail_bps: sh.tail_bps,
                bucket_bytes: sh.bucket_bytes,
                train_bytes: sh.train_bytes,
                head_seen: sh.head_seen,
                token_bps: sh.shared_bucket.map(|(t, _)| t),
                cross_bps: sh.shared_bucket.map(|(_, c)| c),
                tail_spread: sh.tail_spread,
            }),
            busy: e.busy.map(|b| BusyJson {
                idle_bps: b.idle_bps,
                busy: b.busy,
                probes: b.probes,
                span_ns: b.span_ns,
            }),
            slow_trains: e.slow_trains.map(|t| SlowTrainsJson {
                rate_bps: t.rate_bps,
                tails_bps: t.tails_bps,
            }),
            swung_bps: e.swung_bps.map(|(a, z)| [a, z]),
        }
    }
}
