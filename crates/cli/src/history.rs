//! `tightlink history`: what the agent stored, as a table, JSON or CSV,
//! or a plot of the estimate and its range over time.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use tightlink_agent::agent::{unix_ns, utc_text};
use tightlink_agent::config::default_database;
use tightlink_agent::{Query, Row, Store};
use tightlink_core::units::{format_rate, parse_period_s};
use tightlink_plot::{HistoryPoint, HistorySeries};

#[derive(Args)]
pub struct HistoryArgs {
    /// A target's name (as the agent's config gives it) or its target text;
    /// all targets when left out.
    pub target: Option<String>,
    /// The agent's SQLite history (the agent's default when left out).
    #[arg(long, env = "TIGHTLINK_AGENT_DATABASE")]
    pub database: Option<PathBuf>,
    /// Only results from this long ago on (`1h`, `7d`).
    #[arg(long)]
    pub since: Option<String>,
    /// Only this method's results.
    #[arg(long, short)]
    pub method: Option<String>,
    /// table, json or csv.
    #[arg(long, default_value = "table")]
    pub format: String,
    /// At most this many results (the newest).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Draw the estimate with its range over time, one panel line per
    /// target and method (PNG; SVG when the name ends in .svg).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

pub fn run(args: HistoryArgs) -> Result<()> {
    let path = args.database.clone().unwrap_or_else(default_database);
    let store = Store::open_read_only(&path)?;
    let since_unix_ns = args
        .since
        .as_deref()
        .map(|s| {
            parse_period_s(s)
                .map(|p| unix_ns() - (p * 1e9) as i64)
                .map_err(|e| anyhow::anyhow!("--since {e}"))
        })
        .transpose()?;
    if let Some(m) = &args.method {
        m.parse::<tightlink_measure::Method>()
            .map_err(|e| anyhow::anyhow!("--method {e}"))?;
    }
    let rows = store.rows(&Query {
        target: args.target.clone(),
        method: args.method.clone(),
        since_unix_ns,
        limit: args.limit,
    })?;
    if let Some(file) = &args.plot {
        plot(file, &rows)?;
        eprintln!("wrote {} ({} results)", file.display(), rows.len());
    }
    let mut out = std::io::stdout().lock();
    match args.format.as_str() {
        "table" => table(&mut out, &rows)?,
        "json" => json(&mut out, &rows)?,
        "csv" => csv(&mut out, &rows)?,
        f => tightlink_measure::bad_input!("--format {f}: expected table, json or csv"),
    }
    Ok(())
}

fn answer(r: &Row) -> String {
    let Some(v) = r.available_bps else {
        return "-".into();
    };
    let sign = match r.bound.as_deref() {
        Some("at_least") => ">= ",
        Some("at_most") => "<= ",
        _ => "",
    };
    format!("{sign}{}", format_rate(v))
}

fn table(out: &mut dyn Write, rows: &[Row]) -> Result<()> {
    if rows.is_empty() {
        writeln!(out, "no results")?;
        return Ok(());
    }
    writeln!(
        out,
        "{:<20}  {:<16}  {:<10}  {:>19}  {:>29}  {:>15}  {:>9}  {:>7}  result",
        "time (UTC)", "name", "method", "available", "range", "truth", "probe MB", "wall s"
    )?;
    for r in rows {
        let range = match (r.low_bps, r.high_bps, r.ok) {
            (Some(l), Some(h), _) => format!("{} - {}", format_rate(l), format_rate(h)),
            (Some(l), None, true) => format!("{} - (no limit)", format_rate(l)),
            _ => "-".into(),
        };
        let result = if r.ok {
            "ok".to_string()
        } else {
            format!("failed: {}", r.error.as_deref().unwrap_or("?"))
        };
        writeln!(
            out,
            "{:<20}  {:<16}  {:<10}  {:>19}  {:>29}  {:>15}  {:>9}  {:>7.2}  {result}",
            utc_text(r.started_unix_ns),
            r.name,
            r.method,
            answer(r),
            range,
            r.truth_bps.map_or("-".into(), format_rate),
            r.probe_bytes
                .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1e6)),
            r.wall_s,
        )?;
    }
    Ok(())
}

fn json(out: &mut dyn Write, rows: &[Row]) -> Result<()> {
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).expect("a row serialises");
            // The stored report as an object, not a string.
            if let Some(rep) = &r.report {
                v["report"] = serde_json::from_str(rep).unwrap_or(serde_json::Value::Null);
            }
            v["time"] = utc_text(r.started_unix_ns).into();
            v
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &items)?;
    writeln!(out)?;
    Ok(())
}

/// A CSV field, quoted when it holds a comma, quote or line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(out: &mut dyn Write, rows: &[Row]) -> Result<()> {
    writeln!(out, "id,time,started_unix_ns,name,target,kind,method,origin,ok,available_bps,low_bps,high_bps,bound,truth_bps,probe_bytes,streams,host_limited,seed,wall_s,error")?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.0}"));
    for r in rows {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{}",
            r.id,
            utc_text(r.started_unix_ns),
            r.started_unix_ns,
            field(&r.name),
            field(&r.target),
            r.kind,
            r.method,
            r.origin,
            r.ok as u8,
            opt(r.available_bps),
            opt(r.low_bps),
            opt(r.high_bps),
            r.bound.as_deref().unwrap_or(""),
            opt(r.truth_bps),
            r.probe_bytes.map_or(String::new(), |b| b.to_string()),
            r.streams.map_or(String::new(), |b| b.to_string()),
            r.host_limited
                .map_or(String::new(), |b| (b as u8).to_string()),
            r.seed.map_or(String::new(), |b| b.to_string()),
            r.wall_s,
            field(r.error.as_deref().unwrap_or("")),
        )?;
    }
    Ok(())
}

fn plot(file: &std::path::Path, rows: &[Row]) -> Result<()> {
    if rows.is_empty() {
        bail!("--plot: no results to draw (check the target, --since and --method)");
    }
    let mut series: Vec<HistorySeries> = Vec::new();
    for r in rows {
        let name = format!("{} {}", r.name, r.method);
        let i = match series.iter().position(|s| s.name == name) {
            Some(i) => i,
            None => {
                series.push(HistorySeries {
                    name,
                    points: Vec::new(),
                    failures_unix_s: Vec::new(),
                });
                series.len() - 1
            }
        };
        let t = r.started_unix_ns as f64 / 1e9;
        match (r.ok, r.available_bps) {
            (true, Some(v)) => series[i].points.push(HistoryPoint {
                unix_s: t,
                available_bps: v,
                low_bps: r.low_bps.unwrap_or(v),
                high_bps: r.high_bps,
                truth_bps: r.truth_bps,
            }),
            _ => series[i].failures_unix_s.push(t),
        }
    }
    let first = rows[0].started_unix_ns;
    let title = format!("available bandwidth from {}", utc_text(first));
    tightlink_plot::draw_history(file, &title, &series)
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("--plot {}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_they_must_be() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
    }
}
