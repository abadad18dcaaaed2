//! Report types for `analyze` output, kept apart from the core's types:
//! CSV (fixed column order), JSON (documented fields, never NaN) and a
//! human table.

use std::io::Write;

use anyhow::Result;
use clap::ValueEnum;
use serde::Serialize;
use tightlink_core::Analysis;
use tightlink_measure::analyze::AnalysisRow;
use tightlink_trace::Trace;

#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// The CSV columns, in order.
pub const CSV_HEADER: &str = "stream_id,method,kind,avg_rate_bps,decision,abw_bps,bound";

#[derive(Serialize)]
struct JsonReport<'a> {
    trace: &'a str,
    metadata: serde_json::Map<String, serde_json::Value>,
    streams: usize,
    packets: usize,
    results: Vec<AnalysisRow>,
}

/// Finite values only.
fn finite(v: Option<f64>) -> Option<f64> {
    v.filter(|x| x.is_finite())
}

fn int_or_empty(v: Option<f64>) -> String {
    finite(v).map(|x| format!("{:.0}", x)).unwrap_or_default()
}

fn gbps(v: Option<f64>) -> String {
    finite(v)
        .map(|x| format!("{:.3}", x / 1e9))
        .unwrap_or_else(|| "-".into())
}

pub fn write<W: Write>(
    out: &mut W,
    format: Format,
    name: &str,
    trace: &Trace,
    results: &[Analysis],
) -> Result<()> {
    match format {
        Format::Csv => {
            writeln!(out, "{CSV_HEADER}")?;
            for a in results {
                writeln!(
                    out,
                    "{},{},{},{},{},{},{}",
                    a.stream_id,
                    a.method.name(),
                    a.kind.as_str(),
                    int_or_empty(a.avg_rate_bps),
                    a.decision.map(|d| d.as_str()).unwrap_or(""),
                    int_or_empty(a.abw_bps),
                    a.bound.as_str()
                )?;
            }
        }
        Format::Json => {
            let report = JsonReport {
                trace: name,
                metadata: trace
                    .metadata
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
                streams: trace.streams.len(),
                packets: trace.packet_count(),
                results: results.iter().map(AnalysisRow::from).collect(),
            };
            serde_json::to_writer_pretty(&mut *out, &report)?;
            writeln!(out)?;
        }
        Format::Table => {
            writeln!(
                out,
                "{}: {} streams, {} packets (rates in Gbit/s, at the trace's size_bytes layer)",
                name,
                trace.streams.len(),
                trace.packet_count()
            )?;
            writeln!(
                out,
                "{:>6}  {:<22} {:<6} {:>9}  {:<9} {:>9}  {:<8} note",
                "stream", "method", "kind", "avg_rate", "decision", "abw", "bound"
            )?;
            for a in results {
                writeln!(
                    out,
                    "{:>6}  {:<22} {:<6} {:>9}  {:<9} {:>9}  {:<8} {}",
                    a.stream_id,
                    a.method.name(),
                    a.kind.as_str(),
                    gbps(a.avg_rate_bps),
                    a.decision.map(|d| d.as_str()).unwrap_or("-"),
                    gbps(a.abw_bps),
                    a.bound.as_str(),
                    a.reason.as_deref().unwrap_or("")
                )?;
            }
        }
    }
    Ok(())
}
