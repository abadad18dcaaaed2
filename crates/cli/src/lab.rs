//! `tightlink lab`: the namespace testbed (see [`tightlink_lab`]). Thin:
//! flags to scenarios, labs and runs; tables and JSON out.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use clap::{Args, Subcommand};
use tightlink_lab::Scenario;

use crate::flags::{bytes, count_within, ms, secs, within};
use crate::lab_run::{run_lab, RunArgs};
use crate::lab_target::{lab_of, need_root, LabTarget};
use tightlink_core::units::{Size, Time};
use tightlink_lab::text::{cc_progress_line, pct};

#[derive(Args)]
pub struct LabArgs {
    #[command(subcommand)]
    pub command: LabCommand,
}

#[derive(Subcommand)]
pub enum LabCommand {
    /// The shipped scenarios and what each builds.
    #[command(after_help = "Examples:\n  tightlink lab list")]
    List,
    /// Build a scenario's namespaces, links and shaped hops (root).
    #[command(
        after_help = "Examples:\n  sudo tightlink lab up cbr30 --name mine              # a lab of its own name: `lab status/down cbr30 --name mine`\n  sudo tightlink lab status cbr30 --name mine\n  sudo tightlink lab down --name mine"
    )]
    Up(LabTarget),
    /// Remove everything a lab made (also after a crash).
    ///
    /// The lab is found by its scenario, by `--name`, or every lab on
    /// this host with `--all`.
    #[command(
        after_help = "Examples:\n  sudo tightlink lab down cbr30\n  sudo tightlink lab down --all                        # every lab not in use"
    )]
    Down(DownArgs),
    /// Namespaces, processes and the shaped hops' counters.
    #[command(after_help = "Examples:\n  sudo tightlink lab status cbr30")]
    Status(LabTarget),
    /// Truth checks: each hop saturated delivers its rate; cross traffic
    /// alone leaves rate minus its rate. Run it before trusting a lab
    /// on a new host.
    #[command(
        after_help = "Examples:\n  sudo tightlink lab check cbr30\n  sudo tightlink lab check quiet --json"
    )]
    Check {
        #[command(flatten)]
        target: LabTarget,
        #[arg(long)]
        json: bool,
    },
    /// Up, server, cross traffic, estimates with truth, down; a table per
    /// method.
    #[command(
        after_help = "Examples:\n  sudo tightlink lab run cbr30 --repeat 2 --method auto,pathload\n  sudo tightlink lab run quiet --repeat 1 --json-stream   # a JSON line per run as it is made"
    )]
    Run(RunArgs),
    /// Every tightlink method family and every peer tool found on PATH
    /// (presets: pathload's `pathload_rcv`/`pathload_snd`, pathChirp's
    /// `pathchirp_rcv`/`pathchirp_snd`, `iperf3`) in
    /// turn on the same runs and the same truth: one table.
    ///
    /// The scenario may be a comma-separated list, or `third-party` for
    /// every shipped scenario whose cross traffic iperf3 or iperf 2
    /// makes: a campaign, each scenario in turn, then every method's runs
    /// pooled and the silent misses counted.
    #[command(
        after_help = "Examples:\n  sudo tightlink lab compare quiet --repeat 1            # every family, and the peer tools on PATH\n  sudo env PATH=/opt/pathload:$PATH tightlink lab compare third-party --method auto --peers peer:pathload"
    )]
    Compare(RunArgs),
    /// `estimate --follow` (bart) through the lab, each update against the
    /// kernel-counter truth over its stream and over 500 ms around it; a
    /// scenario whose cross traffic steps (`lab list`: step) shows how fast
    /// the tracker follows.
    #[command(after_help = "Examples:\n  sudo tightlink lab track step --plot track.png")]
    Track(TrackArgs),
    /// A user-space delay line between two interfaces of this namespace
    /// (what a hop's `delay` runs, so kernels without netem delay too).
    /// Prints "ready" once both sockets are bound, then runs until
    /// killed. The lab starts it; run it by hand only to debug one.
    #[command(
        after_help = "Examples:\n  ip netns exec tllab-rtt30-bursty-d1 tightlink lab delay-line from_prev to_next --delay 15ms"
    )]
    DelayLine(DelayLineArgs),
    /// A bulk TCP transfer (cubic) through the lab, captured at the sender:
    /// analyze-tcp's capacity, buffer and loss classes against the
    /// configured bottleneck and each loss's true cause.
    #[command(
        after_help = "Examples:\n  sudo tightlink lab tcp tcp-random-loss\n  sudo tightlink lab tcp quiet --congestion bbr --keep-captures caps   # caps/quiet-sender.pcap for analyze-tcp"
    )]
    Tcp(TcpArgs),
    /// Rate controllers in turn over the lab's path and cross traffic:
    /// Rapid with and without BASS or TCP Westwood BBE's window
    /// (`transfer`), the kernel's CUBIC, BBR or Reno (one TCP flow);
    /// throughput per bin and overall as a share of
    /// the available bandwidth (hop rate minus the cross traffic offered),
    /// loss and RTT.
    #[command(
        after_help = "Examples:\n  sudo tightlink lab cc rtt5-bursty --time 5s --cc rapid,cubic --plot cc.png"
    )]
    Cc(CcArgs),
    /// `estimate` on a quiet path of known truth under what makes an
    /// answer hard to trust: CPU hogs on this host, token buckets from 3
    /// to 64 KB, a tightlink server, tightlink's reflector and a plain
    /// user-space STAMP reflector as the far end, both directions. Counts
    /// silent misses (more than 10 % off, `exact`, the range missing the
    /// truth, no warning) and answers within 5 % that lost their `exact`.
    ///
    /// The way back is shaped at 150 Mbit/s (12 KB); a cell's truth is
    /// the configured rate or, where less, what a 1 s flood got through
    /// the same tbf beside the same hogs. The defaults run 210 estimates
    /// (a few minutes).
    #[command(
        after_help = "Examples:\n  sudo tightlink lab adversity quiet --runs 1 --hogs 2 --buckets 12KB --far-ends server,user-space\n  sudo tightlink lab adversity quiet --runs 1 --hogs 0 --buckets 64KB --far-ends reflector-reverse --json"
    )]
    Adversity(AdversityArgs),
}

#[derive(Args)]
pub struct AdversityArgs {
    #[command(flatten)]
    pub target: LabTarget,
    /// Estimates per cell (1-100).
    #[arg(long, default_value_t = 7, value_parser = clap::value_parser!(u16).range(1..=100))]
    pub runs: u16,
    /// CPU hogs on this host, a pass each (0-64 each).
    #[arg(long, default_value = "0,2", value_delimiter = ',', value_parser = clap::value_parser!(u16).range(0..=64))]
    pub hogs: Vec<u16>,
    /// The bottleneck's token bucket, a pass each (1500 B to 10 MB each).
    #[arg(long, default_value = "3KB,12KB,64KB", value_delimiter = ',',
        value_parser = within(bytes(1500), bytes(10_000_000), "each from 1500 B to 10 MB"))]
    pub buckets: Vec<Size>,
    /// Far ends and directions, in turn.
    #[arg(
        long,
        default_value = "server,server-reverse,reflector,reflector-reverse,user-space",
        value_delimiter = ','
    )]
    pub far_ends: Vec<tightlink_lab::adversity::FarEnd>,
    /// Every record and the table as one JSON object.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct CcArgs {
    #[command(flatten)]
    pub target: LabTarget,
    /// How long each controller sends (e.g. 30s).
    #[arg(long, default_value = "30s", value_parser = within(secs(1), secs(3600), "must be within 1s..1h"))]
    pub time: Time,
    /// Runs of each controller (interleaved).
    #[arg(long, default_value_t = 1, value_parser = count_within(1, 100))]
    pub repeat: usize,
    /// Comma-separated: rapid, rapid-raw, bbe (TCP Westwood BBE's window),
    /// cubic, bbr, reno (the kernel's NewReno).
    #[arg(long, default_value = "rapid,rapid-raw,cubic,bbr")]
    pub cc: String,
    /// Bin width for throughput (e.g. 500ms).
    #[arg(long, default_value = "500ms", value_parser = within(ms(10), secs(3600), "must be within 10ms..--time"))]
    pub bin: Time,
    /// The whole report as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Each controller's first run, throughput as a share of the available
    /// bandwidth per bin, as a PNG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

#[derive(Args)]
pub struct TcpArgs {
    #[command(flatten)]
    pub target: LabTarget,
    /// Transfer length (e.g. 3s).
    #[arg(long, default_value = "3s", value_parser = within(ms(200), secs(60), "must be within 200ms..60s"))]
    pub duration: Time,
    /// The transfer's congestion control.
    #[arg(long, default_value = "cubic")]
    pub congestion: String,
    /// Transfers, one after the other (a fresh lab each).
    #[arg(long, default_value_t = 1, value_parser = count_within(1, 100))]
    pub repeat: usize,
    /// Keep the captures in this directory.
    #[arg(long)]
    pub keep_captures: Option<PathBuf>,
    /// One JSON object per transfer instead of the summary.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct DelayLineArgs {
    /// One interface.
    pub a: String,
    /// The other.
    pub b: String,
    /// One way, each direction (e.g. 15ms).
    #[arg(long)]
    pub delay: Time,
    /// Each frame's delay uniform in delay +- jitter; frames keep their
    /// order.
    #[arg(long, default_value = "0")]
    pub jitter: Time,
    /// Most bytes held per direction; beyond, frames are dropped.
    #[arg(long, default_value = "64MB")]
    pub queue_limit: Size,
    /// Rewrite the counters to this JSON file every second.
    #[arg(long)]
    pub status: Option<PathBuf>,
}

#[derive(Args)]
pub struct TrackArgs {
    #[command(flatten)]
    pub target: LabTarget,
    /// Streams to follow for.
    #[arg(long, default_value_t = 160, value_parser = count_within(3, 10_000))]
    pub streams: usize,
    /// A stream every DURATION (estimate --interval).
    #[arg(long, default_value = "100ms", value_parser = within(ms(1), Time { ns: tightlink_measure::estimate::MAX_FOLLOW_INTERVAL_NS }, "must be within 1ms..5s"))]
    pub interval: Time,
    /// The whole series and summary as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// The series against the truth as a PNG.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// The tracker's probe streams as a probe trace (estimate
    /// --save-trace), to replay with other methods; a point's `t_s` is
    /// its stream's first send, counted from the first point's.
    #[arg(long)]
    pub save_trace: Option<PathBuf>,
}

#[derive(Args)]
pub struct DownArgs {
    /// A shipped scenario (`tightlink lab list`) or a TOML file: the lab
    /// of its name, unless `--name` gives another.
    pub scenario: Option<String>,
    /// Lab name (namespaces `tllab-NAME-*`).
    #[arg(long)]
    pub name: Option<String>,
    /// Every lab on this host (every namespace `tllab-*`).
    #[arg(long, conflicts_with_all = ["scenario", "name"])]
    pub all: bool,
}

fn delay_line(a: DelayLineArgs) -> Result<()> {
    use std::io::Write;
    use tightlink_lab::delay::{self, DelaySpec};
    let spec = DelaySpec {
        queue_limit_bytes: usize::try_from(a.queue_limit.bytes).context("--queue-limit")?,
        ..DelaySpec::new(a.delay.ns, a.jitter.ns)
    };
    let status = a.status.clone();
    delay::run(
        &a.a,
        &a.b,
        spec,
        || {
            let mut out = std::io::stdout();
            let _ = out.write_all(b"ready\n").and_then(|_| out.flush());
            let _ = delay::detach_stdout();
        },
        |counters| {
            if let Some(p) = &status {
                if let Ok(j) = serde_json::to_string(counters) {
                    // Written whole, then renamed: a reader never sees half.
                    let tmp = p.with_extension("tmp");
                    if std::fs::write(&tmp, j).is_ok() {
                        let _ = std::fs::rename(&tmp, p);
                    }
                }
            }
        },
    )
    .with_context(|| format!("delay line between {} and {}", a.a, a.b))
}

pub fn run(args: LabArgs) -> Result<()> {
    match args.command {
        LabCommand::List => {
            for (name, _) in tightlink_lab::scenario::BUILT_IN {
                let s = Scenario::load(name)?;
                println!("{name:14} {}", s.description);
            }
            Ok(())
        }
        LabCommand::Up(t) => up(&t),
        LabCommand::Down(d) => down(d),
        LabCommand::Status(t) => {
            let lab = lab_of(&t)?;
            let status = lab.status()?;
            println!("{}", status.trim_end());
            Ok(())
        }
        LabCommand::Check { target, json } => check(&target, json),
        LabCommand::Run(a) => run_lab(a, false),
        LabCommand::Compare(a) => run_lab(a, true),
        LabCommand::Tcp(a) => tcp_lab(a),
        LabCommand::DelayLine(a) => delay_line(a),
        LabCommand::Track(a) => track_lab(a),
        LabCommand::Cc(a) => cc_lab(a),
        LabCommand::Adversity(a) => adversity_lab(a),
    }
}

fn up(t: &LabTarget) -> Result<()> {
    need_root()?;
    let lab = lab_of(t)?;
    // Held while it builds; the lab then stays up with no holder.
    let _hold = lab.hold("up")?;
    let r = lab.up(&std::env::current_exe()?)?;
    println!("lab {} up: {}", lab.name, r.namespaces.join(" "));
    let on = lab.scenario.offloads_on;
    println!(
        "offloads: tso/gso/gro {} on all {} veth ends (read back)",
        if on { "on" } else { "off" },
        r.offloads.len()
    );
    println!("probe receiver {} (server: `ip netns exec {} tightlink server --bind {}`), sender namespace {}",
        tightlink_lab::topology::RCV_IP, lab.ns("rcv"), tightlink_lab::topology::RCV_IP, lab.ns("snd"));
    Ok(())
}

fn down(d: DownArgs) -> Result<()> {
    // Which labs, before root is asked for: a bad call says so.
    let named = match (d.all, d.name, d.scenario) {
        (true, _, _) => None,
        (false, Some(name), _) => Some(name),
        (false, None, Some(scenario)) => Some(
            lab_of(&LabTarget {
                scenario,
                name: None,
            })?
            .name,
        ),
        (false, None, None) => {
            tightlink_measure::bad_input!("lab down: give a scenario, --name NAME or --all")
        }
    };
    need_root()?;
    let (what, gone) = match named {
        None => {
            let (gone, in_use) = tightlink_lab::topology::down_all()?;
            for (name, holder) in &in_use {
                eprintln!("lab {name}: left up, in use by {holder}");
            }
            ("every lab not in use".to_string(), gone)
        }
        Some(name) => {
            let _hold = tightlink_lab::topology::LabHold::take(&name, "down")?;
            (
                format!("lab {name}"),
                tightlink_lab::topology::down_named(&name)?,
            )
        }
    };
    println!("{what}: removed {} namespaces", gone.len());
    Ok(())
}

fn check(target: &LabTarget, json: bool) -> Result<()> {
    need_root()?;
    let lab = lab_of(target)?;
    let exe = std::env::current_exe()?;
    let r = tightlink_lab::check::check(&lab, &exe, Duration::from_millis(1))?;
    crate::out::report(json, &r)
}

fn cc_lab(a: CcArgs) -> Result<()> {
    if a.bin > a.time {
        tightlink_measure::bad_input!("--bin: must be within 10ms..--time");
    }
    let lab = lab_of(&a.target)?;
    need_root()?;
    let opts = tightlink_lab::cc::CcOptions {
        exe: std::env::current_exe()?,
        duration: a.time.duration(),
        repeat: a.repeat,
        controllers: a.cc.split(',').map(|c| c.trim().to_string()).collect(),
        bin: a.bin.duration(),
        sample_period: Duration::from_millis(1),
    };
    let quiet = a.json;
    let r = tightlink_lab::cc::cc(&lab, &opts, &mut |run| {
        if !quiet {
            eprintln!("{}", cc_progress_line(run));
        }
    })?;
    if let Some(p) = &a.plot {
        plot_cc(p, &r)?;
    }
    if !a.json {
        println!(
            "scenario {}: {}",
            lab.scenario.name, lab.scenario.description
        );
    }
    crate::out::report(a.json, &r)
}

/// The first run of each controller: its throughput per bin as a share
/// of the available bandwidth, as a PNG.
fn plot_cc(p: &std::path::Path, r: &tightlink_lab::cc::CcReport) -> Result<()> {
    let series: Vec<(String, Vec<(f64, f64)>)> = r
        .runs
        .iter()
        .filter(|run| run.run == 0)
        .map(|run| {
            let pts = run
                .bins
                .iter()
                .filter(|b| b.2 > 0.0)
                .map(|b| (b.0, 100.0 * b.1 / b.2))
                .collect();
            (format!("{} ({})", run.controller, pct(run.share)), pts)
        })
        .collect();
    let end = series
        .iter()
        .flat_map(|s| s.1.iter().map(|p| p.0))
        .fold(0.0f64, f64::max);
    let full = [(0.0, 100.0), (end, 100.0)];
    tightlink_plot::draw_bins(
        p,
        &tightlink_plot::Bins {
            title: &format!(
                "lab cc {}: throughput per bin as a share of the available",
                r.scenario
            ),
            y_desc: "% of available",
            reference: Some(("available", &full)),
            series: &series,
        },
    )
    .map_err(|e| anyhow!("--plot {}: {e}", p.display()))?;
    Ok(())
}

fn track_lab(a: TrackArgs) -> Result<()> {
    let lab = lab_of(&a.target)?;
    need_root()?;
    let opts = tightlink_lab::track::TrackOptions {
        exe: std::env::current_exe()?,
        streams: a.streams,
        interval: a.interval.duration(),
        sample_period: Duration::from_millis(1),
        save_trace: a.save_trace.clone(),
    };
    let r = tightlink_lab::track::track(&lab, &opts)?;
    if let Some(p) = &a.plot {
        let points: Vec<(f64, f64, f64, f64)> = r
            .points
            .iter()
            .filter_map(|p| Some((p.t_s, p.estimate_bps, p.sd_bps, p.stream_truth_bps?)))
            .collect();
        tightlink_plot::draw_tracking(
            p,
            &tightlink_plot::Tracking {
                title: &format!("lab {}: estimate --follow against the counters", r.scenario),
                x_desc: "time from the first stream (s)",
                points: &points,
                truth_line: Some(("truth over 500 ms", &r.truth_series)),
                step_at_s: r.step_at_s,
            },
        )
        .map_err(|e| anyhow!("--plot {}: {e}", p.display()))?;
    }
    if !a.json {
        println!(
            "scenario {}: {}",
            lab.scenario.name, lab.scenario.description
        );
    }
    crate::out::report(a.json, &r)
}

fn tcp_lab(a: TcpArgs) -> Result<()> {
    need_root()?;
    let duration = a.duration.duration();
    let lab = lab_of(&a.target)?;
    let exe = std::env::current_exe()?;
    for i in 0..a.repeat {
        let o = tightlink_lab::passive::TcpLabOptions {
            duration,
            congestion: a.congestion.clone(),
            keep_captures: a.keep_captures.as_ref().map(|d| {
                if a.repeat > 1 {
                    d.join(format!("run{}", i + 1))
                } else {
                    d.clone()
                }
            }),
        };
        crate::out::report(a.json, &tightlink_lab::passive::tcp_run(&lab, &exe, &o)?)?;
    }
    Ok(())
}

fn adversity_lab(a: AdversityArgs) -> Result<()> {
    use tightlink_lab::adversity::{adversity, table, AdversityOptions};
    use tightlink_lab::text::{adversity_progress_line, AdversityTable};
    let lab = lab_of(&a.target)?;
    need_root()?;
    let opts = AdversityOptions {
        exe: std::env::current_exe()?,
        runs: a.runs as usize,
        hogs: a.hogs.iter().map(|&h| h as usize).collect(),
        buckets_bytes: a.buckets.iter().map(|b| b.bytes).collect(),
        far_ends: a.far_ends.clone(),
    };
    let quiet = a.json;
    let records = adversity(&lab, &opts, &mut |r| {
        if !quiet {
            eprintln!("{}", adversity_progress_line(r));
        }
    })?;
    let rows = table(&records);
    if a.json {
        println!(
            "{}",
            serde_json::json!({"scenario": lab.scenario.name, "records": records, "table": rows})
        );
        return Ok(());
    }
    print!("{}", AdversityTable(&rows));
    Ok(())
}
