//! Recorded streams through the per-stream methods: every stream of a
//! probe trace (or streams built in memory) analysed by the chosen
//! methods, each stream by its kind.

use std::str::FromStr;

use anyhow::{bail, Result};
use serde::Serialize;
use tightlink_core::{analyze, Analysis, AnalysisParams, Method, ProbeStream, StreamKind};
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
                None => bail!(
                    "{name}: unknown; choose default, all, or one of {}",
                    Method::ALL.map(|m| m.name()).join(", ")
                ),
            },
        })
    }
}

/// Analyses `streams`: each of kind `kind`, or of the kind its send gaps
/// show when `None`; one result per (stream, method), in order.
pub fn analyze_streams(
    streams: &[ProbeStream],
    kind: Option<StreamKind>,
    methods: Methods,
    params: &AnalysisParams,
) -> Vec<Analysis> {
    let mut out = Vec::new();
    for s in streams {
        let kind = kind.unwrap_or_else(|| s.infer_kind(params.gap_tolerance));
        for m in methods.for_kind(kind) {
            out.push(analyze(s, kind, m, params));
        }
    }
    out
}

/// Analyses a trace: stream kinds from `kind`, else the trace's
/// `# stream_kinds=` metadata, else each stream's send gaps.
pub fn analyze_trace(
    trace: &Trace,
    kind: Option<StreamKind>,
    methods: Methods,
    params: &AnalysisParams,
) -> Vec<Analysis> {
    analyze_streams(
        &trace.streams,
        kind.or_else(|| trace.declared_kind()),
        methods,
        params,
    )
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerRate {
    pub rate_bps: f64,
    pub decision: Option<&'static str>,
}

/// One (stream, method) result as the JSON `analyze --format json`
/// prints it: finite numbers only (JSON has no NaN).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisRow {
    pub stream_id: u64,
    pub method: &'static str,
    pub kind: &'static str,
    pub packets: usize,
    pub received: usize,
    pub avg_rate_bps: Option<f64>,
    pub decision: Option<&'static str>,
    pub abw_bps: Option<f64>,
    pub bound: &'static str,
    pub reason: Option<String>,
    pub send_rate_bps: Option<f64>,
    pub recv_rate_bps: Option<f64>,
    pub pct: Option<f64>,
    pub pdt: Option<f64>,
    pub kept_gaps: Option<usize>,
    pub gaps_total: Option<usize>,
    pub passes: Option<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_rate: Vec<PerRate>,
}

/// Finite values only: JSON has no NaN and a report must not invent one.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

impl From<&Analysis> for AnalysisRow {
    fn from(a: &Analysis) -> Self {
        AnalysisRow {
            stream_id: a.stream_id,
            method: a.method.name(),
            kind: a.kind.as_str(),
            packets: a.packets,
            received: a.received,
            avg_rate_bps: finite(a.avg_rate_bps),
            decision: a.decision.map(|d| d.as_str()),
            abw_bps: finite(a.abw_bps),
            bound: a.bound.as_str(),
            reason: a.reason.clone(),
            send_rate_bps: finite(a.detail.send_rate_bps),
            recv_rate_bps: finite(a.detail.recv_rate_bps),
            pct: finite(a.detail.pct),
            pdt: finite(a.detail.pdt),
            kept_gaps: a.detail.kept_gaps,
            gaps_total: a.detail.gaps_total,
            passes: a.detail.passes,
            per_rate: a
                .detail
                .per_rate
                .iter()
                .filter(|(r, _)| r.is_finite())
                .map(|&(rate_bps, d)| PerRate {
                    rate_bps,
                    decision: d.map(|d| d.as_str()),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_core::schedule::single_rate_schedule;

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
}
