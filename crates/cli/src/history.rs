//! `tightlink history`: what the agent stored, as a table, JSON or CSV,
//! or a plot of the estimate and its range over time.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use tightlink_agent::agent::unix_ns;
use tightlink_agent::config::default_database;
use tightlink_agent::history::utc_text;
use tightlink_agent::history::{write_history, HistoryFormat};
use tightlink_agent::{Query, Row, Store};
use tightlink_core::units::parse_period_s;
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
    /// table (the default), json or csv. With --plot, the results are
    /// printed only when a format is given.
    #[arg(long)]
    pub format: Option<String>,
    /// At most this many results (the newest).
    #[arg(long)]
    pub limit: Option<usize>,
    /// Draw the estimate with its range over time, one panel line per
    /// target and method (PNG; SVG when the name ends in .svg).
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

pub fn run(args: HistoryArgs) -> Result<()> {
    let format: Option<HistoryFormat> = match args.format.as_deref().map(str::parse) {
        Some(Err(e)) => tightlink_measure::bad_input!("--format {e}"),
        Some(Ok(f)) => Some(f),
        None if args.plot.is_some() => None,
        None => Some(HistoryFormat::Table),
    };
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
    if let Some(format) = format {
        write_history(&mut std::io::stdout().lock(), format, &rows)?;
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
                at_least: r.bound.as_deref() == Some("at_least"),
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
