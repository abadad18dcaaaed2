//! An [`Analysis`] as JSON (the `serde` feature): one row of `tightlink
//! analyze --format json`, its method, kind, decision and bound by name,
//! the [`Detail`](super::Detail) fields beside the answer, and finite
//! numbers only (JSON has no NaN, and a report must not invent one).

use serde::ser::{Serialize, SerializeStruct, Serializer};

use super::base::Analysis;

/// Finite values only.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

/// One sub-stream's rate and decision (multi-rate PRC-MT).
struct PerRate {
    rate_bps: f64,
    decision: Option<&'static str>,
}

impl Serialize for PerRate {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut st = s.serialize_struct("PerRate", 2)?;
        st.serialize_field("rate_bps", &self.rate_bps)?;
        st.serialize_field("decision", &self.decision)?;
        st.end()
    }
}

impl Serialize for Analysis {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let d = &self.detail;
        let per_rate: Vec<PerRate> = d
            .per_rate
            .iter()
            .filter(|(r, _)| r.is_finite())
            .map(|&(rate_bps, decision)| PerRate {
                rate_bps,
                decision: decision.map(|d| d.as_str()),
            })
            .collect();
        let mut st = s.serialize_struct("Analysis", 19)?;
        st.serialize_field("stream_id", &self.stream_id)?;
        st.serialize_field("method", self.method.name())?;
        st.serialize_field("kind", self.kind.as_str())?;
        st.serialize_field("packets", &self.packets)?;
        st.serialize_field("received", &self.received)?;
        st.serialize_field("avg_rate_bps", &finite(self.avg_rate_bps))?;
        st.serialize_field("decision", &self.decision.map(|d| d.as_str()))?;
        st.serialize_field("abw_bps", &finite(self.abw_bps))?;
        st.serialize_field("bound", self.bound.as_str())?;
        st.serialize_field("reason", &self.reason)?;
        st.serialize_field("send_rate_bps", &finite(d.send_rate_bps))?;
        st.serialize_field("recv_rate_bps", &finite(d.recv_rate_bps))?;
        st.serialize_field("pct", &finite(d.pct))?;
        st.serialize_field("pdt", &finite(d.pdt))?;
        st.serialize_field("kept_gaps", &d.kept_gaps)?;
        st.serialize_field("gaps_total", &d.gaps_total)?;
        st.serialize_field("passes", &d.passes)?;
        if per_rate.is_empty() {
            st.skip_field("per_rate")?;
        } else {
            st.serialize_field("per_rate", &per_rate)?;
        }
        st.serialize_field("capacity_bps", &finite(d.capacity_bps))?;
        st.end()
    }
}
