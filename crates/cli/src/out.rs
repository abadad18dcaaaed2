//! What every command prints the same way: a report as one JSON line or
//! as its text, `--json-stream` lines, and the progress bar on a
//! terminal's stderr.

use std::fmt::Display;
use std::io::Write;

use anyhow::Result;
use serde::Serialize;

/// `report` as one JSON line (`json`) or as its text.
pub fn report(json: bool, report: &(impl Serialize + Display)) -> Result<()> {
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer(&mut out, report)?;
        writeln!(out)?;
    } else {
        write!(out, "{report}")?;
    }
    Ok(())
}

/// One `--json-stream` line (`{"event": ..., "data": ...}`), flushed: a
/// reader sees it as it happens.
pub fn json_event(event: &str, data: serde_json::Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, &serde_json::json!({"event": event, "data": data}))?;
    writeln!(out)?;
    out.flush()?;
    Ok(())
}

/// A `--json-stream`'s last line: `end` with the report, or `error`
/// with its text (the error still ends the command).
pub fn json_end<T: Serialize>(result: Result<T>) -> Result<()> {
    match result {
        Ok(r) => json_event("end", serde_json::to_value(&r)?),
        Err(e) => {
            json_event("error", serde_json::json!(format!("{e:#}")))?;
            Err(e)
        }
    }
}

/// The progress bar at `done` (0 to 1), drawn over itself on stderr.
pub fn progress_bar(done: f64) {
    let f = done.clamp(0.0, 1.0);
    let n = (f * 30.0).round() as usize;
    eprint!(
        "\r[{}{}] {:3.0} %",
        "=".repeat(n),
        " ".repeat(30 - n),
        f * 100.0
    );
}

/// Clears the progress bar's line.
pub fn clear_progress() {
    eprint!("\r{}\r", " ".repeat(40));
}
