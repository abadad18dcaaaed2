//! `tightlink lab run` and `lab compare`: methods and peer tools run
//! against a scenario's truth, the table, JSON and plot of their answers,
//! and a campaign's pooled rows.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::Args;
use tightlink_lab::run::{MethodSummary, RunOptions, RunRecord, Tool};
use tightlink_lab::Lab;
use tightlink_net::ledger::STOLEN_SHARE_WARNING;

use crate::lab_target::{lab_of, need_root, LabTarget};

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub target: LabTarget,
    /// Estimates per method (default: the scenario's, else 10).
    #[arg(long)]
    pub repeat: Option<usize>,
    /// Comma-separated tightlink methods (default: the scenario's).
    #[arg(long, short)]
    pub method: Option<String>,
    /// One JSON object per method on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// One JSON line per event as the runs go (iperf3's --json-stream
    /// shape): `start`, a `run` per estimate with its truth, then `end`
    /// with the per-method summaries `--json` prints.
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
    #[arg(long, default_value_t = 1000)]
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
    if a.plot.is_some() || a.json_stream {
        tightlink_measure::bad_input!(
            "--plot and --json-stream take one scenario, not {}",
            names.len()
        );
    }
    need_root()?;
    let mut all = Vec::new();
    for name in &names {
        let lab = lab_of(&LabTarget {
            scenario: name.clone(),
            name: a.target.name.clone(),
        })?;
        if !a.json {
            eprintln!("scenario {name}: {}", lab.scenario.description);
        }
        all.extend(run_scenario(&a, compare, &lab)?);
    }
    if a.json {
        for m in &all {
            println!("{}", serde_json::to_string(m)?);
        }
    } else {
        print_table(&all);
        print_campaign_summary(&all);
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

/// The methods to run: `--method` (`all`: every closed-loop method),
/// else `lab compare`'s set or the scenario's; each name checked.
fn methods_of(a: &RunArgs, compare: bool, lab: &Lab) -> Result<Vec<String>> {
    let methods: Vec<String> = match (&a.method, compare) {
        // Every closed-loop method (queue-fit given the scenario's tight
        // link capacity).
        (Some(m), _) if m == "all" => tightlink_measure::Method::ALL
            .iter()
            .map(|m| m.name().to_string())
            .collect(),
        (Some(m), _) => m.split(',').map(|s| s.trim().to_string()).collect(),
        (None, true) => tightlink_lab::run::COMPARE_METHODS
            .split(',')
            .map(str::to_string)
            .collect(),
        (None, false) => lab.scenario.methods.clone(),
    };
    for m in &methods {
        m.parse::<tightlink_measure::Method>()
            .map_err(|e| anyhow::anyhow!("--method {e}"))?;
    }
    Ok(methods)
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

/// One run as the progress line on stderr says it.
fn progress_line(r: &RunRecord) -> String {
    match (r.estimate_bps, r.truth_bps) {
        (Some(e), Some(t)) => format!(
            "  {} #{}: {:.1} Mbit/s, truth {:.1} ({:+.1} %), {:.2} s{}{}{}",
            r.method,
            r.run + 1,
            e / 1e6,
            t / 1e6,
            (e / t - 1.0) * 100.0,
            r.duration_s,
            match stolen(r) {
                Some(s) if s >= STOLEN_SHARE_WARNING =>
                    format!(", the hypervisor took {:.0} % of the CPU time", s * 100.0),
                _ => String::new(),
            },
            sender_fell_behind(r),
            line_drops(r.delay_line)
        ),
        _ => format!(
            "  {} #{}: no answer: {}",
            r.method,
            r.run + 1,
            r.error.as_deref().unwrap_or("?")
        ),
    }
}

/// The runs of one scenario, every method and tool interleaved.
fn run_scenario(a: &RunArgs, compare: bool, lab: &Lab) -> Result<Vec<MethodSummary>> {
    if let Some(n) = a.repeat.filter(|n| !(1..=1000).contains(n)) {
        tightlink_measure::bad_input!("--repeat {n}: must be within 1..1000");
    }
    if !(200..=100_000).contains(&a.sample_us) {
        tightlink_measure::bad_input!("--sample-us {}: must be within 200..100000", a.sample_us);
    }
    let methods = methods_of(a, compare, lab)?;
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
        let _ = crate::estimate::json_event(event, data);
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
        let _ = crate::estimate::json_event(event, data);
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
        print_table(results);
        let runs: Vec<&RunRecord> = results.iter().flat_map(|m| &m.per_run).collect();
        let stolen_runs: Vec<f64> = runs
            .iter()
            .filter_map(|r| stolen(r))
            .filter(|&s| s >= STOLEN_SHARE_WARNING)
            .collect();
        if !stolen_runs.is_empty() {
            println!(
                "\nThe hypervisor took {:.0} % or more of this host's CPU time during {} of {} runs (up to {:.0} %): the shapers stalled with it, so those runs' path was slower than the truth (configured rate minus cross traffic) says.",
                STOLEN_SHARE_WARNING * 100.0,
                stolen_runs.len(),
                runs.len(),
                stolen_runs.iter().copied().fold(0.0, f64::max) * 100.0
            );
        }
        if let Some(note) = sender_fell_behind_summary(&runs) {
            println!("\n{note}");
        }
    }
    Ok(())
}

/// Every method over every scenario of a campaign: its runs pooled into
/// one row each, and the silent misses counted over all of them.
fn print_campaign_summary(all: &[MethodSummary]) {
    let mut methods: Vec<&str> = Vec::new();
    for m in all {
        if !methods.contains(&m.method.as_str()) {
            methods.push(&m.method);
        }
    }
    let pooled: Vec<MethodSummary> = methods
        .iter()
        .map(|method| {
            let runs: Vec<RunRecord> = all
                .iter()
                .filter(|m| m.method == *method)
                .flat_map(|m| m.per_run.iter().cloned())
                .collect();
            tightlink_lab::run::summarise("all", method, runs)
        })
        .collect();
    println!("\nAll scenarios pooled:");
    print_table(&pooled);
    let silent: usize = pooled.iter().map(|m| m.silent_misses).sum();
    let runs: usize = pooled.iter().map(|m| m.runs).sum();
    println!(
        "\nSilent misses (more than 10 % off, `exact`, a range that misses the truth, no warning): {silent} of {runs} runs."
    );
}

/// "; the sender fell behind its schedule in N streams (K sent again)"
/// for a run whose sender did (streams, trains and resends alike).
fn sender_fell_behind(r: &RunRecord) -> String {
    match (r.sender_late_streams, r.resent_streams) {
        (Some(late), resent) if late > 0 => format!(
            "; the sender fell behind its schedule in {late} streams ({} sent again)",
            resent.unwrap_or(0)
        ),
        _ => String::new(),
    }
}

/// Where the sender fell behind in half or more of what it sent in some
/// run (its streams and the ones sent again), the range over the runs:
/// this host, not the path, set those runs' pace.
fn sender_fell_behind_summary(runs: &[&RunRecord]) -> Option<String> {
    let counted: Vec<(u64, u64, u64)> = runs
        .iter()
        .filter_map(|r| {
            let late = r.sender_late_streams?;
            let resent = r.resent_streams.unwrap_or(0);
            Some((late, r.streams? + resent, resent))
        })
        .collect();
    let behind = counted
        .iter()
        .filter(|&&(late, sent, _)| late >= 2 && 2 * late >= sent)
        .count();
    if behind == 0 {
        return None;
    }
    let range = |f: fn(&(u64, u64, u64)) -> u64| {
        let lo = counted.iter().map(f).min().unwrap_or(0);
        let hi = counted.iter().map(f).max().unwrap_or(0);
        if lo == hi {
            lo.to_string()
        } else {
            format!("{lo}-{hi}")
        }
    };
    Some(format!(
        "The sender fell behind its schedule in half or more of its streams in {behind} of {} runs ({} streams a run, {} sent again): this host could not pace its probes while it ran the lab, so those runs measure the host as much as the path, and every stream sent again costs its bytes.",
        counted.len(),
        range(|c| c.0),
        range(|c| c.2),
    ))
}

/// The share of CPU time stolen over a run's truth window.
fn stolen(r: &RunRecord) -> Option<f64> {
    r.truth.as_ref()?.stolen_share
}

pub(crate) fn pct(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1} %", v * 100.0))
}

pub fn print_table(results: &[MethodSummary]) {
    println!("| scenario | method | truth: hop carried (median) | median err | p90 err | bias | bias (offered) | answered | holds truth | silent misses | swings | time (median) | probe bytes (median) | cross dropped (median) |");
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for m in results {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} | {} | {} | {} |",
            m.scenario,
            m.method,
            m.median_truth_bps
                .map_or("-".into(), |t| format!("{:.1} Mbit/s", t / 1e6)),
            pct(m.median_rel_error),
            pct(m.p90_rel_error),
            m.median_signed_rel_error
                .map_or("-".into(), |v| format!("{:+.1} %", v * 100.0)),
            m.median_signed_rel_error_offered
                .map_or("-".into(), |v| format!("{:+.1} %", v * 100.0)),
            (m.answered_share * m.runs as f64).round(),
            m.runs,
            if m.with_range > 0 {
                format!("{}/{}", m.held, m.with_range)
            } else {
                "-".into()
            },
            m.silent_misses,
            m.swings,
            m.median_duration_s
                .map_or("-".into(), |d| format!("{d:.2} s")),
            m.median_probe_bytes
                .map_or("-".into(), |b| format!("{:.1} MB", b / 1e6)),
            m.median_cross_dropped_bytes
                .map_or("-".into(), |b| format!("{:.0} KB", b / 1e3)),
        );
    }
}

/// What a progress line says of the delay lines' drops (nothing where
/// they dropped none or the lab has none).
pub(crate) fn line_drops(d: Option<tightlink_lab::run::LineCounts>) -> String {
    d.filter(|d| d.dropped + d.dropped_back > 0)
        .map_or(String::new(), |d| {
            format!(
                "; the delay lines dropped {} of {} frames toward the receiver and {} back (this host could not run them on time: its losses, not the path's)",
                d.dropped,
                d.forwarded + d.dropped,
                d.dropped_back
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(streams: u64, late: u64, resent: u64) -> RunRecord {
        RunRecord {
            method: "auto".into(),
            run: 0,
            estimate_bps: Some(1e8),
            bound: None,
            truth_bps: Some(1e8),
            truth: None,
            rel_error: Some(0.0),
            truth_offered_bps: None,
            rel_error_offered: None,
            cross_dropped_bytes: None,
            duration_s: 0.5,
            probe_bytes: None,
            low_bps: None,
            high_bps: None,
            stop: None,
            streams: Some(streams),
            sender_late_streams: Some(late),
            delay_line: None,
            resent_streams: Some(resent),
            warnings: None,
            error: None,
        }
    }

    #[test]
    fn a_sender_behind_in_half_its_streams_is_summed_up() {
        // 12 streams and 2 resends: 7 late is half of 14, 6 is not.
        let (a, b, c) = (run(12, 7, 2), run(12, 6, 2), run(10, 0, 0));
        assert_eq!(sender_fell_behind_summary(&[&b, &c]), None);
        let s = sender_fell_behind_summary(&[&a, &b, &c]).unwrap();
        assert!(
            s.contains("in 1 of 3 runs (0-7 streams a run, 0-2 sent again)"),
            "{s}"
        );
        assert_eq!(
            sender_fell_behind(&a),
            "; the sender fell behind its schedule in 7 streams (2 sent again)"
        );
        assert_eq!(sender_fell_behind(&c), "");
        // One late stream of two is no pattern.
        assert_eq!(sender_fell_behind_summary(&[&run(2, 1, 0)]), None);
    }
}
