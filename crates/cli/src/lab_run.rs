//! `tightlink lab run` and `lab compare`: methods and peer tools run
//! against a scenario's truth, the table, JSON and plot of their answers,
//! and a campaign's pooled rows.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use tightlink_lab::run::{MethodSummary, RunOptions, Tool};
use tightlink_lab::text::{campaign_summary, progress_line, run_notes, RunTable};
use tightlink_lab::Lab;

use crate::lab_target::{lab_of, need_root, LabTarget};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: LabTarget,
    /// Estimates per method (default: the scenario's, else 10).
    #[arg(long, value_parser = crate::flags::count_within(1, 1000))]
    pub repeat: Option<usize>,
    /// Comma-separated tightlink methods (default: the scenario's).
    #[arg(long, short)]
    pub method: Option<String>,
    /// One JSON object per method on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// One JSON line per event as the runs go (iperf3's --json-stream
    /// shape): `start`, a `run` per estimate with its truth, then `end`
    /// with the per-method summaries `--json` prints; a campaign gives
    /// each scenario's three in turn.
    #[arg(long, conflicts_with = "json")]
    pub json_stream: bool,
    /// Estimates and truths of every run as a PNG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Another tool's command line, run in the sender namespace instead of
    /// tightlink; `{server}` becomes the receiver's address and `{capacity}`
    /// the tight link's configured rate in bit/s.
    #[arg(long, requires = "pick")]
    pub tool: Option<String>,
    /// With --tool: a regex whose group 1 is the number and optional group
    /// 2 its unit prefix (k, M, G), e.g. '([\d.]+) (\w)bits/sec.*receiver'.
    #[arg(long, requires = "tool")]
    pub pick: Option<String>,
    /// With --tool: the tool's own server, started in the receiver
    /// namespace once the lab is up (e.g. 'iperf3 -s').
    #[arg(long, requires = "tool")]
    pub tool_server: Option<String>,
    /// With --tool: its client runs in the receiver namespace (`{server}`
    /// is then the sender's address) and its server in the sender's, as
    /// pathload's receiver and sender do.
    #[arg(long, requires = "tool")]
    pub tool_at_receiver: bool,
    /// Counter sampling period in microseconds.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(200..=100_000))]
    pub sample_us: u64,
    /// `lab compare`: the peer tools to run, comma-separated
    /// (`peer:pathload,peer:spruce`; `none` for none); default: every
    /// preset found on PATH.
    #[arg(long)]
    pub peers: Option<String>,
    /// Keep each tightlink estimate's streams as a probe trace in this
    /// directory (`SCENARIO-METHOD-RUN.trace.gz`), for `estimate trace:FILE`
    /// or Python's `read_trace` to replay.
    #[arg(long, value_name = "DIR")]
    pub save_traces: Option<PathBuf>,
}

pub(crate) fn run_lab(a: RunArgs, compare: bool) -> Result<()> {
    let names = scenario_names(&a.target.scenario, compare)?;
    if names.len() == 1 {
        return run_lab_one(&a, compare, &lab_of(&a.target)?);
    }
    if a.plot.is_some() {
        tightlink_measure::bad_input!("--plot takes one scenario, not {}", names.len());
    }
    need_root()?;
    let mut all = Vec::new();
    for name in &names {
        let lab = lab_of(&LabTarget {
            scenario: name.clone(),
            name: a.target.name.clone(),
        })?;
        if !a.json && !a.json_stream {
            eprintln!("scenario {name}: {}", lab.scenario.description);
        }
        let results = run_scenario(&a, compare, &lab)?;
        if a.json_stream {
            crate::out::json_event("end", serde_json::to_value(&results)?)?;
        }
        all.extend(results);
    }
    if a.json_stream {
        // Each scenario ended with its own `end`.
        return Ok(());
    }
    if a.json {
        for m in &all {
            println!("{}", serde_json::to_string(m)?);
        }
    } else {
        print!("{}", RunTable(&all));
        print!("{}", campaign_summary(&all));
    }
    Ok(())
}

/// The scenarios `lab run`/`lab compare` was given: one name or file,
/// or (compare) a comma-separated list, where `third-party` stands for
/// every shipped scenario whose cross traffic another tool makes.
fn scenario_names(arg: &str, compare: bool) -> Result<Vec<String>> {
    if !compare || !(arg.contains(',') || arg == "third-party") {
        return Ok(vec![arg.to_string()]);
    }
    Ok(tightlink_lab::presets::campaign(arg)?)
}

/// One scenario's runs and its own table (or JSON).
fn run_lab_one(a: &RunArgs, compare: bool, lab: &Lab) -> Result<()> {
    let results = run_scenario(a, compare, lab)?;
    render_one(a, lab, &results)
}

/// Other tools: the user's `--tool`, and for `lab compare` the peer
/// presets found on PATH (what is missing said on stderr).
fn tools_of(a: &RunArgs, compare: bool) -> Result<Vec<Tool>> {
    let mut tools = Vec::new();
    if let (Some(c), Some(p)) = (&a.tool, &a.pick) {
        let t = tightlink_lab::presets::user_tool(c, p, a.tool_server.clone(), a.tool_at_receiver)?;
        tools.push(t);
    }
    if compare {
        let (found, missing) = tightlink_lab::presets::choose(a.peers.as_deref())?;
        for p in &missing {
            eprintln!(
                "peer {}: `{}` is not on PATH (build {}), left out",
                p.name, p.binary, p.source
            );
        }
        for p in &found {
            eprintln!(
                "peer {}: `{}` found; it measures {}",
                p.name, p.binary, p.measures
            );
        }
        tools.extend(found.iter().map(|p| p.tool()));
    }
    Ok(tools)
}

/// The runs of one scenario, every method and tool interleaved.
fn run_scenario(a: &RunArgs, compare: bool, lab: &Lab) -> Result<Vec<MethodSummary>> {
    let methods = tightlink_lab::presets::methods(a.method.as_deref(), compare, &lab.scenario)?;
    let tools = tools_of(a, compare)?;
    // `lab run --tool` runs the tool alone; `lab compare` runs it beside
    // the methods and the presets found.
    let methods = if compare || tools.is_empty() {
        methods
    } else {
        Vec::new()
    };
    need_root()?;
    if let Some(dir) = &a.save_traces {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--save-traces {}: cannot create it", dir.display()))?;
    }
    let opts = RunOptions {
        repeat: a.repeat.unwrap_or(lab.scenario.repeat).max(1),
        methods,
        tools,
        exe: std::env::current_exe()?,
        sample_period: Duration::from_micros(a.sample_us),
        save_traces: a.save_traces.clone(),
    };
    let quiet = a.json || a.json_stream;
    let line = |event: &str, data: serde_json::Value| {
        let _ = crate::out::json_event(event, data);
    };
    if a.json_stream {
        line(
            "start",
            serde_json::json!({
                "scenario": lab.scenario.name,
                "methods": opts.methods,
                "tools": opts.tools.iter().map(|t| t.name.clone()).collect::<Vec<_>>(),
                "repeat": opts.repeat,
            }),
        );
    }
    let results = tightlink_lab::run::run(lab, &opts, &mut |r| {
        if a.json_stream {
            line("run", serde_json::to_value(r).unwrap_or_default());
        }
        if !quiet {
            eprintln!("{}", progress_line(r));
        }
    });
    let results = match results {
        Ok(r) => r,
        Err(e) => {
            if a.json_stream {
                line("error", serde_json::json!(e.to_string()));
            }
            return Err(e.into());
        }
    };
    Ok(results)
}

/// `lab run`/`lab compare` on one scenario: the plot, then the JSON or
/// the table and its notes.
fn render_one(a: &RunArgs, lab: &Lab, results: &[MethodSummary]) -> Result<()> {
    let line = |event: &str, data: serde_json::Value| {
        let _ = crate::out::json_event(event, data);
    };
    if let Some(p) = &a.plot {
        let series: Vec<(String, Vec<(f64, f64)>)> = results
            .iter()
            .map(|m| {
                let pts = m
                    .per_run
                    .iter()
                    .filter_map(|r| Some((r.truth_bps?, r.estimate_bps?)))
                    .collect();
                (m.method.clone(), pts)
            })
            .collect();
        tightlink_plot::draw_estimate_vs_truth(p, &format!("lab {}", lab.scenario.name), &series)
            .map_err(|e| anyhow!("--plot {}: {e}", p.display()))?;
    }
    if a.json_stream {
        line("end", serde_json::to_value(results)?);
    } else if a.json {
        for m in results {
            println!("{}", serde_json::to_string(m)?);
        }
    } else {
        println!(
            "scenario {}: {}",
            lab.scenario.name, lab.scenario.description
        );
        print!("{}{}", RunTable(results), run_notes(results));
    }
    Ok(())
}
