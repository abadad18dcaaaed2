//! Writing what a run sent and got back: a probe trace (format v1) and,
//! apart from it, the ground truth per stream.

use std::path::Path;

use anyhow::{Context, Result};
use tightlink_core::channel::GroundTruth;
use tightlink_core::ProbeStream;
use tightlink_trace::Trace;

/// Writes `streams` as a trace at `path` (gzip when it ends in `.gz`).
pub fn write_trace(
    path: &Path,
    metadata: Vec<(String, String)>,
    streams: &[ProbeStream],
) -> Result<()> {
    let trace = Trace {
        metadata,
        streams: streams.to_vec(),
    };
    tightlink_trace::write_path(path, &trace)
        .with_context(|| format!("writing the probe trace {}", path.display()))
}

/// Writes the truth CSV; streams without a truth (fewer than two packets
/// crossed) are left out, and the count left out is returned.
pub fn write_truth(
    path: &Path,
    streams: &[ProbeStream],
    truths: &[Option<GroundTruth>],
) -> Result<usize> {
    let rows: Vec<(u64, GroundTruth)> = streams
        .iter()
        .zip(truths)
        .filter_map(|(s, t)| t.map(|t| (s.id, t)))
        .collect();
    tightlink_trace::write_truth_path(path, &rows)
        .with_context(|| format!("writing the truth file {}", path.display()))?;
    Ok(streams.len() - rows.len())
}
