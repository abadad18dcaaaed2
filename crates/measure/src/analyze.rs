//! Recorded streams through the per-stream methods: every stream of a
//! probe trace (or streams built in memory) analysed by the chosen
//! methods, each stream by its kind.

use std::str::FromStr;

use anyhow::{bail, Result};
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
