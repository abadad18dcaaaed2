//! The Prometheus text exposition format (version 0.0.4): the last result
//! of each target and method, and the agent's own counters. Names follow
//! Prometheus's conventions: base units in the name (`_bps`, `_bytes`,
//! `_seconds`), `_total` on counters, one `# HELP` and `# TYPE` per family.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::store::Row;

/// The content type Prometheus expects of this format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A label value with `\`, `"` and newlines escaped.
pub fn escape(v: &str) -> String {
    let mut s = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => s.push_str("\\\\"),
            '"' => s.push_str("\\\""),
            '\n' => s.push_str("\\n"),
            c => s.push(c),
        }
    }
    s
}

/// A sample value: Go's float formatting reads `+Inf`, `-Inf`, `NaN`.
pub fn value(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v == f64::INFINITY {
        "+Inf".into()
    } else if v == f64::NEG_INFINITY {
        "-Inf".into()
    } else {
        format!("{v}")
    }
}

/// Label pairs in the order given.
pub fn labels(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let inner: Vec<String> = pairs
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    format!("{{{}}}", inner.join(","))
}

/// Families written in order, each with its samples.
#[derive(Default)]
pub struct Exposition {
    families: Vec<(&'static str, &'static str, &'static str, Vec<String>)>,
}

impl Exposition {
    /// Adds a histogram to family `name` (declared on first use): its
    /// cumulative `_bucket` lines, `_sum` and `_count`.
    pub fn histogram(
        &mut self,
        name: &'static str,
        help: &'static str,
        base: &[(&str, &str)],
        h: &AnswerHistogram,
    ) {
        let mut lines = Vec::new();
        let mut cumulative = 0;
        let bounds = ANSWER_BUCKETS_BPS.iter().map(|b| value(*b));
        for (le, n) in bounds
            .chain(["+Inf".to_string()])
            .zip(h.counts.iter().chain([&0]))
        {
            cumulative += n;
            let count = if le == "+Inf" { h.count } else { cumulative };
            let mut l = base.to_vec();
            l.push(("le", &le));
            lines.push(format!("{name}_bucket{} {count}", labels(&l)));
        }
        lines.push(format!("{name}_sum{} {}", labels(base), value(h.sum_bps)));
        lines.push(format!("{name}_count{} {}", labels(base), h.count));
        match self.families.iter_mut().find(|f| f.0 == name) {
            Some(f) => f.3.extend(lines),
            None => self.families.push((name, "histogram", help, lines)),
        }
    }

    /// Adds a sample to family `name` (declared on first use).
    pub fn sample(
        &mut self,
        name: &'static str,
        kind: &'static str,
        help: &'static str,
        labels: &str,
        v: f64,
    ) {
        let line = format!("{name}{labels} {}", value(v));
        match self.families.iter_mut().find(|f| f.0 == name) {
            Some(f) => f.3.push(line),
            None => self.families.push((name, kind, help, vec![line])),
        }
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (name, kind, help, lines) in &self.families {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            for l in lines {
                out.push_str(l);
                out.push('\n');
            }
        }
        out
    }
}

/// A gauge: its name, help and value (`None`: no sample).
type Gauge = (&'static str, &'static str, Option<f64>);

/// The gauges of one stored result.
pub fn result_samples(x: &mut Exposition, r: &Row) {
    let l = labels(&[
        ("name", &r.name),
        ("target", &r.target),
        ("kind", &r.kind),
        ("method", &r.method),
    ]);
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    let gauges = |x: &mut Exposition, list: &[Gauge]| {
        for &(name, help, v) in list {
            if let Some(v) = v {
                x.sample(name, "gauge", help, &l, v);
            }
        }
    };
    gauges(
        x,
        &[
            (
                "tightlink_up",
                "Whether the last measurement of the target answered (1) or failed (0).",
                Some(flag(r.ok)),
            ),
            (
                "tightlink_measurement_timestamp_seconds",
                "When the last measurement started, Unix seconds.",
                Some(r.started_unix_ns as f64 / 1e9),
            ),
            (
                "tightlink_measurement_duration_seconds",
                "Wall-clock time the last measurement took.",
                Some(r.wall_s),
            ),
        ],
    );
    if !r.ok {
        return;
    }
    gauges(
        x,
        &[
            (
                "tightlink_available_bandwidth_bps",
                "Available bandwidth of the path, bit/s (the last measurement's answer).",
                r.available_bps,
            ),
            (
                "tightlink_available_bandwidth_low_bps",
                "Low end of the answer's confidence range, bit/s.",
                r.low_bps,
            ),
            (
                "tightlink_available_bandwidth_high_bps",
                "High end of the answer's confidence range, bit/s (+Inf: no upper limit measured).",
                Some(r.high_bps.unwrap_or(f64::INFINITY)),
            ),
        ],
    );
    if let Some(b) = &r.bound {
        let lb = labels(&[
            ("name", &r.name),
            ("target", &r.target),
            ("kind", &r.kind),
            ("method", &r.method),
            ("bound", b),
        ]);
        x.sample(
            "tightlink_estimate_info",
            "gauge",
            "What the answer claims: exact, at_least or at_most (value 1).",
            &lb,
            1.0,
        );
    }
    let count = |n: Option<u64>| n.map(|n| n as f64);
    gauges(x, &[
        ("tightlink_truth_bps", "Simulated targets: the simulator's true available bandwidth, bit/s.", r.truth_bps),
        ("tightlink_measurement_probe_bytes", "Probe bytes the last measurement sent.", count(r.probe_bytes)),
        ("tightlink_host_limited", "1 when this host, not the path, capped the answer (it could not probe faster).", r.host_limited.map(flag)),
        ("tightlink_path_shaped", "1 when the last measurement found a token bucket that its probe streams passed whole: the available bandwidth is the bucket's sustained rate, bursts pass faster.", Some(flag(r.shaper_bucket_bytes.is_some()))),
        ("tightlink_shaper_bucket_bytes", "The token bucket the last measurement found, bytes (as its trains read it).", r.shaper_bucket_bytes),
        ("tightlink_shaper_burst_bps", "What the probe streams read on a path with a token bucket (its burst rate), bit/s.", r.shaper_streams_bps),
        ("tightlink_sender_late_streams", "Probe streams of the last measurement that this host sent behind their schedule (too busy to pace them); from half of the streams on it may read low.", count(r.sender_late_streams)),
        ("tightlink_resent_streams", "Probe streams of the last measurement sent again because a host spoiled them: their sender stalled (0.5 ms or more behind their schedule), or the receiver's socket dropped probes.", count(r.resent_streams)),
        ("tightlink_receiver_socket_drops", "Datagrams the receiving end's socket dropped during the last measurement (its receive buffer full): that host's losses, not the path's.", count(r.receiver_socket_drops)),
        ("tightlink_host_stolen_ratio", "Share of this host's CPU time the hypervisor took (steal) while the last measurement ran; from 0.05 on it may read low.", r.host_stolen_share),
    ]);
}

/// The agent's own counters.
#[derive(Debug, Default, Clone)]
pub struct Counters {
    /// (name, method) -> the scheduled answers so far, by size: none
    /// lost between two scrapes, where the gauges keep only the last.
    pub answers: BTreeMap<(String, String), AnswerHistogram>,
    /// (name, method, origin, result) -> count.
    pub measurements: BTreeMap<(String, String, String, &'static str), u64>,
    /// (name, method, warning code) -> warnings given.
    pub warnings: BTreeMap<(String, String, &'static str), u64>,
    /// (name, method, error kind) -> measurements that failed so.
    pub errors: BTreeMap<(String, String, &'static str), u64>,
    /// name -> probe bytes sent.
    pub probe_bytes: BTreeMap<String, u64>,
    /// name -> runs skipped because the previous one overran.
    pub missed_runs: BTreeMap<String, u64>,
    /// (path, status) -> count.
    pub http_requests: BTreeMap<(&'static str, u16), u64>,
    pub store_errors: u64,
    pub in_flight: u64,
}

/// Upper bounds of the answer histogram's buckets, bit/s: 1-2-5 steps
/// from 1 Mbit/s to 100 Gbit/s (the `+Inf` bucket holds the rest).
pub const ANSWER_BUCKETS_BPS: [f64; 16] = [
    1e6, 2e6, 5e6, 1e7, 2e7, 5e7, 1e8, 2e8, 5e8, 1e9, 2e9, 5e9, 1e10, 2e10, 5e10, 1e11,
];

/// The answers of one target and method: counts per bucket (each
/// answer in the first bucket whose bound holds it), their sum and count.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnswerHistogram {
    pub counts: [u64; 16],
    pub sum_bps: f64,
    pub count: u64,
}

impl AnswerHistogram {
    pub fn add(&mut self, bps: f64) {
        if !bps.is_finite() || bps < 0.0 {
            return;
        }
        if let Some(i) = ANSWER_BUCKETS_BPS.iter().position(|&b| bps <= b) {
            self.counts[i] += 1;
        }
        self.sum_bps += bps;
        self.count += 1;
    }
}

pub fn counter_samples(x: &mut Exposition, c: &Counters, start_unix_s: f64) {
    x.sample(
        "tightlink_agent_build_info",
        "gauge",
        "The agent's version (value 1).",
        &labels(&[("version", env!("CARGO_PKG_VERSION"))]),
        1.0,
    );
    x.sample(
        "tightlink_agent_start_time_seconds",
        "gauge",
        "When the agent started, Unix seconds.",
        "",
        start_unix_s,
    );
    x.sample(
        "tightlink_agent_measurements_in_flight",
        "gauge",
        "Measurements running now.",
        "",
        c.in_flight as f64,
    );
    for ((name, method), h) in &c.answers {
        x.histogram(
            "tightlink_agent_available_bandwidth_bps",
            "Scheduled answers by size (bit/s), every one counted: the gauge tightlink_available_bandwidth_bps keeps only the last between two scrapes.",
            &[("name", name), ("method", method)],
            h,
        );
    }
    for ((name, method, origin, result), n) in &c.measurements {
        x.sample(
            "tightlink_agent_measurements_total",
            "counter",
            "Measurements finished, by target, method, origin (schedule or probe) and result (ok or error).",
            &labels(&[("name", name), ("method", method), ("origin", origin), ("result", result)]),
            *n as f64,
        );
    }
    for ((name, method, code), n) in &c.warnings {
        x.sample(
            "tightlink_agent_warnings_total",
            "counter",
            "Warnings the measurements gave, by target, method and warning code (the `warning_codes` of the JSON report).",
            &labels(&[("name", name), ("method", method), ("code", code)]),
            *n as f64,
        );
    }
    for ((name, method, kind), n) in &c.errors {
        x.sample(
            "tightlink_agent_errors_total",
            "counter",
            "Failed measurements, by target, method and kind (bad-input, unreachable, refused, timed-out, protocol, io).",
            &labels(&[("name", name), ("method", method), ("kind", kind)]),
            *n as f64,
        );
    }
    for (map, metric, help) in [
        (
            &c.probe_bytes,
            "tightlink_agent_probe_bytes_total",
            "Probe bytes sent toward the target.",
        ),
        (
            &c.missed_runs,
            "tightlink_agent_missed_runs_total",
            "Scheduled runs skipped because the previous one overran its interval.",
        ),
    ] {
        for (name, n) in map {
            x.sample(
                metric,
                "counter",
                help,
                &labels(&[("name", name)]),
                *n as f64,
            );
        }
    }
    for ((path, code), n) in &c.http_requests {
        x.sample(
            "tightlink_agent_http_requests_total",
            "counter",
            "HTTP requests answered, by path and status.",
            &labels(&[("path", path), ("code", &code.to_string())]),
            *n as f64,
        );
    }
    x.sample(
        "tightlink_agent_store_errors_total",
        "counter",
        "Results the history could not store.",
        "",
        c.store_errors as f64,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_by_hand() {
        let mut x = Exposition::default();
        x.sample(
            "a_bps",
            "gauge",
            "A.",
            &labels(&[("t", "x\"y\\z\nw")]),
            1.5e9,
        );
        x.sample(
            "a_bps",
            "gauge",
            "A.",
            &labels(&[("t", "b")]),
            f64::INFINITY,
        );
        x.sample("b_total", "counter", "B.", "", 3.0);
        assert_eq!(
            x.render(),
            "# HELP a_bps A.\n# TYPE a_bps gauge\na_bps{t=\"x\\\"y\\\\z\\nw\"} 1500000000\na_bps{t=\"b\"} +Inf\n\
             # HELP b_total B.\n# TYPE b_total counter\nb_total 3\n"
        );
    }

    /// A scheduled `multirate` measurement of `t` named `n`, started 2 s
    /// after the epoch.
    fn origin(t: &tightlink_measure::Target) -> crate::store::Origin<'_> {
        crate::store::Origin {
            name: "n",
            target: t,
            method: "multirate",
            origin: "schedule",
            started_unix_ns: 2_000_000_000,
            wall_s: 0.25,
            seed: None,
        }
    }

    #[test]
    fn a_failure_exports_no_numbers() {
        let t = tightlink_measure::Target::default_sim();
        let o = origin(&t);
        let mut x = Exposition::default();
        result_samples(
            &mut x,
            &Row::failure(&o, "no reply", tightlink_measure::ErrorKind::TimedOut),
        );
        let text = x.render();
        assert!(
            text.contains(
                "tightlink_up{name=\"n\",target=\"sim:\",kind=\"sim\",method=\"multirate\"} 0\n"
            ),
            "{text}"
        );
        assert!(text.contains("tightlink_measurement_timestamp_seconds{name=\"n\",target=\"sim:\",kind=\"sim\",method=\"multirate\"} 2\n"), "{text}");
        assert!(!text.contains("available_bandwidth"), "{text}");
        assert!(!text.contains("tightlink_path_shaped"), "{text}");
    }

    /// The samples of one default estimate of `t`, stored as `method`.
    pub(super) fn estimated(
        t: &tightlink_measure::Target,
        method: &str,
        seed: Option<u64>,
    ) -> Exposition {
        let o = crate::store::Origin {
            name: "n",
            target: t,
            method,
            origin: "schedule",
            started_unix_ns: 0,
            wall_s: 0.1,
            seed,
        };
        let report = tightlink_measure::estimate(
            t,
            &tightlink_measure::EstimateOptions::default(),
            &mut |_| {},
        )
        .unwrap();
        let mut x = Exposition::default();
        result_samples(&mut x, &Row::success(&o, &report));
        x
    }

    /// A simulated 5 Gbit/s shaper with a 256 KB bucket: the path is
    /// shaped, the bucket is near 256 KB and the streams read over 5.75
    /// Gbit/s; on the default path `tightlink_path_shaped` is 0 and the
    /// bucket's metrics are absent.
    #[test]
    fn a_shaped_path_is_exported() {
        let render = |target: &str| {
            let t = tightlink_measure::Target::parse(target).unwrap();
            estimated(&t, "auto", None).render()
        };
        let value = |text: &str, metric: &str| -> Option<f64> {
            let line = text
                .lines()
                .find(|l| l.starts_with(&format!("{metric}{{")))?;
            line.rsplit(' ').next()?.parse().ok()
        };
        let shaped = render("sim:cross=none,shaper=5G/256KB");
        assert_eq!(
            value(&shaped, "tightlink_path_shaped"),
            Some(1.0),
            "{shaped}"
        );
        let bucket = value(&shaped, "tightlink_shaper_bucket_bytes").unwrap();
        assert!((bucket / 256e3 - 1.0).abs() < 0.2, "{shaped}");
        assert!(value(&shaped, "tightlink_shaper_burst_bps").unwrap() > 5.75e9);
        let plain = render("sim:");
        assert_eq!(value(&plain, "tightlink_path_shaped"), Some(0.0), "{plain}");
        assert_eq!(value(&plain, "tightlink_shaper_bucket_bytes"), None);
    }

    /// Streams the sender fell behind in, streams sent again and the
    /// receiver's socket drops are exported when the row has them (a real
    /// target) and absent otherwise.
    #[test]
    fn late_streams_are_exported_for_real_targets_only() {
        let t = tightlink_measure::Target::default_sim();
        let mut row = Row::failure(&origin(&t), "x", tightlink_measure::ErrorKind::Io);
        row.ok = true;
        row.available_bps = Some(1e9);
        let mut x = Exposition::default();
        result_samples(&mut x, &row);
        assert!(!x.render().contains("tightlink_sender_late_streams"));
        assert!(!x.render().contains("tightlink_resent_streams"));
        assert!(!x.render().contains("tightlink_receiver_socket_drops"));
        row.sender_late_streams = Some(9);
        row.resent_streams = Some(2);
        row.receiver_socket_drops = Some(1345);
        let mut x = Exposition::default();
        result_samples(&mut x, &row);
        let text = x.render();
        assert!(
            text.contains(
                "# TYPE tightlink_sender_late_streams gauge
tightlink_sender_late_streams{name=\"n\",target=\"sim:\",kind=\"sim\",method=\"multirate\"} 9\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "tightlink_resent_streams{name=\"n\",target=\"sim:\",kind=\"sim\",method=\"multirate\"} 2\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "tightlink_receiver_socket_drops{name=\"n\",target=\"sim:\",kind=\"sim\",method=\"multirate\"} 1345\n"
            ),
            "{text}"
        );
    }
}

#[cfg(test)]
mod shipped {
    use super::*;

    /// Every metric the shipped Grafana dashboard queries is one the agent
    /// exports.
    #[test]
    fn the_dashboard_queries_only_metrics_that_exist() {
        let dashboard = include_str!("../../../deploy/grafana-dashboard.json");
        let t = tightlink_measure::Target::default_sim();
        let mut x = super::tests::estimated(&t, "multirate", Some(1));
        let mut c = Counters::default();
        c.measurements.insert(
            ("n".into(), "multirate".into(), "schedule".into(), "error"),
            1,
        );
        c.probe_bytes.insert("n".into(), 1);
        c.missed_runs.insert("n".into(), 1);
        counter_samples(&mut x, &c, 0.0);
        let exported = x.render();
        let v: serde_json::Value = serde_json::from_str(dashboard).unwrap();
        let mut used = 0;
        for p in v["panels"].as_array().unwrap() {
            for t in p["targets"].as_array().unwrap() {
                let expr = t["expr"].as_str().unwrap();
                for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if word.starts_with("tightlink_") {
                        used += 1;
                        assert!(
                            exported.contains(&format!("# TYPE {word} ")),
                            "the dashboard queries {word}, which the agent does not export"
                        );
                    }
                }
            }
        }
        assert!(used >= 10, "{used}");
    }
}
