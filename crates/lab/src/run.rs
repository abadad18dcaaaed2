//! `tightlink lab run`: bring a lab up, start `tightlink server` on the
//! receiver, the cross sink and sender, sample the counters, run each
//! method's `tightlink estimate` (or another tool's command) in the sender
//! namespace, take the truth over the window of the streams each answer
//! came from (the shaper trains that left it as it was are not), repeat, and
//! summarise per method. The lab comes down whatever happens (a guard).

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use regex::Regex;

use crate::generators::{self, Generator};
use crate::sampler::Sampler;
use crate::scenario::Cross;
use crate::topology::{Lab, LabError, RCV_IP, SND_IP, XR_IP, XS_IP};
use crate::truth::{self, Sample, Truth};
use tightlink_sys::clock::realtime_ns;

/// UDP/TCP port of the cross sink.
pub const SINK_PORT: u16 = 9000;
/// Longest a single estimate may take before it is killed (not answered).
pub const ESTIMATE_TIMEOUT: Duration = Duration::from_secs(30);

/// Another tool's command line and how to pick its number from its output.
#[derive(Debug, Clone)]
pub struct Tool {
    /// Shell command; `{server}` is replaced by the far end's address and
    /// `{capacity}` by the tight link's configured rate in bit/s (for
    /// tools that must be told it, as Spruce).
    pub command: String,
    /// Capture group 1: the number; optional group 2: its unit prefix
    /// (k, M, G; "Mbits/sec", "Gbps" ...; none means bit/s).
    pub pick: Regex,
    pub name: String,
    /// The tool's own far end, started in the receiver namespace beside
    /// `tightlink server` (e.g. `iperf3 -s`).
    pub server: Option<String>,
    /// The tool's client runs in the receiver namespace (`{server}`: the
    /// sender's address) and its server in the sender's, as pathload's.
    pub at_receiver: bool,
}

#[derive(Debug, Clone)]
pub struct RunOptions {
    pub repeat: usize,
    /// tightlink's methods, then other tools, each run in turn.
    pub methods: Vec<String>,
    pub tools: Vec<Tool>,
    /// The tightlink binary to run in the namespaces.
    pub exe: PathBuf,
    pub sample_period: Duration,
    /// Where each tightlink estimate keeps its streams as a probe trace.
    pub save_traces: Option<PathBuf>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunRecord {
    pub method: String,
    pub run: usize,
    pub estimate_bps: Option<f64>,
    pub bound: Option<String>,
    pub truth_bps: Option<f64>,
    pub truth: Option<Truth>,
    pub rel_error: Option<f64>,
    /// The available bandwidth against the cross traffic its sender
    /// offered: each hop it crosses less that rate. `truth_bps` counts
    /// what the hops carried, which is less where a queue dropped cross
    /// traffic, and the probes' own overflow is among the causes (the
    /// wide scan overflows a 100 KB tbf queue); where the cross traffic
    /// overflows the queue by itself (bursts above the link), this one
    /// reads low instead.
    pub truth_offered_bps: Option<f64>,
    pub rel_error_offered: Option<f64>,
    /// Cross traffic offered but not delivered while any of the run's
    /// probes were out (the trains that only checked the answer too),
    /// bytes: what the path dropped of other users' traffic.
    pub cross_dropped_bytes: Option<f64>,
    /// The tool's own wall time (tightlink: `wall_s`; others: the process).
    pub duration_s: f64,
    pub probe_bytes: Option<u64>,
    /// tightlink: the confidence range (or, stopped as `swings`, how far
    /// the streams' answers swung) and why the run stopped.
    pub low_bps: Option<f64>,
    pub high_bps: Option<f64>,
    pub stop: Option<String>,
    /// tightlink: its streams, those whose sender fell behind its
    /// schedule (a busy host; the estimate then warns it may read low),
    /// and those sent again because their sender stalled.
    pub streams: Option<u64>,
    pub sender_late_streams: Option<u64>,
    pub resent_streams: Option<u64>,
    /// What the lab's delay lines did from the previous estimate's end to
    /// this one's (`None` without delay lines): frames they dropped are
    /// this host's losses, probes among them read as the path's.
    pub delay_line: Option<LineCounts>,
    /// tightlink: the warnings its answer carried.
    pub warnings: Option<Vec<String>>,
    pub error: Option<String>,
}

impl RunRecord {
    /// Whether the answer holds the truth: an exact answer's range holds
    /// it, or a bound is on its right side with 10 % slack. `None` when
    /// the tool gave no range or there is no truth.
    pub fn holds_truth(&self) -> Option<bool> {
        let (t, e) = (self.truth_bps?, self.estimate_bps?);
        match self.bound.as_deref()? {
            "exact" => Some(self.low_bps? <= t && t <= self.high_bps?),
            "at_least" => Some(t >= 0.9 * e),
            "at_most" => Some(t <= 1.1 * e),
            _ => Some(false),
        }
    }

    /// An answer more than 10 % off the truth that said `exact`, with a
    /// range that misses the truth and no warning: a user had no reason
    /// to doubt it.
    pub fn is_silent_miss(&self) -> bool {
        self.rel_error.is_some_and(|e| e.abs() > 0.10)
            && self.bound.as_deref() == Some("exact")
            && self.holds_truth() == Some(false)
            && self.warnings.as_ref().is_some_and(|w| w.is_empty())
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct MethodSummary {
    pub scenario: String,
    pub method: String,
    pub runs: usize,
    pub answered_share: f64,
    /// Of |estimate - truth| / truth over answered runs.
    pub median_rel_error: Option<f64>,
    pub p90_rel_error: Option<f64>,
    /// Signed median: the bias.
    pub median_signed_rel_error: Option<f64>,
    /// The bias against [`RunRecord::truth_offered_bps`].
    pub median_signed_rel_error_offered: Option<f64>,
    /// Median of [`RunRecord::cross_dropped_bytes`].
    pub median_cross_dropped_bytes: Option<f64>,
    pub median_duration_s: Option<f64>,
    pub median_probe_bytes: Option<f64>,
    pub median_truth_bps: Option<f64>,
    /// Answered runs whose answer holds the truth ([`RunRecord::holds_truth`]),
    /// of those that gave a range.
    pub held: usize,
    pub with_range: usize,
    /// Runs that stopped as `swings`.
    pub swings: usize,
    /// Runs that are [`RunRecord::is_silent_miss`].
    pub silent_misses: usize,
    pub per_run: Vec<RunRecord>,
}

/// Processes started in the lab, killed on drop; and the lab brought down.
pub(crate) struct Guard<'a> {
    pub(crate) lab: &'a Lab,
    pub(crate) children: Vec<Child>,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        for c in &mut self.children {
            kill_group(c);
        }
        let _ = self.lab.down();
    }
}

/// Kills `child` and, when it leads a process group (tools' shells are
/// started in their own), everything it started, so that no peer tool
/// outlives the lab; then reaps it.
pub(crate) fn kill_group(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals that process group
        // only; a child that leads none gets ESRCH, which is ignored.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
}

pub(crate) fn in_ns(lab: &Lab, role: &str, exe: &PathBuf) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &lab.ns(role)]).arg(exe);
    c
}

/// Quantile of an already sorted slice ([`tightlink_core::stats`]).
pub fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    tightlink_core::stats::quantile_sorted(sorted, q)
}

fn median_of(v: Vec<f64>) -> Option<f64> {
    tightlink_core::stats::median(&v)
}

/// Every method's runs over every scenario of a campaign, pooled into
/// one summary each (scenario `all`), in the order the methods first
/// appear.
pub fn pool(all: &[MethodSummary]) -> Vec<MethodSummary> {
    let mut methods: Vec<&str> = Vec::new();
    for m in all {
        if !methods.contains(&m.method.as_str()) {
            methods.push(&m.method);
        }
    }
    methods
        .iter()
        .map(|method| {
            let runs: Vec<RunRecord> = all
                .iter()
                .filter(|m| m.method == *method)
                .flat_map(|m| m.per_run.iter().cloned())
                .collect();
            summarise("all", method, runs)
        })
        .collect()
}

pub fn summarise(scenario: &str, method: &str, runs: Vec<RunRecord>) -> MethodSummary {
    let answered: Vec<&RunRecord> = runs.iter().filter(|r| r.rel_error.is_some()).collect();
    let mut abs: Vec<f64> = answered
        .iter()
        .filter_map(|r| r.rel_error)
        .map(f64::abs)
        .collect();
    abs.sort_by(f64::total_cmp);
    MethodSummary {
        scenario: scenario.to_string(),
        method: method.to_string(),
        runs: runs.len(),
        answered_share: answered.len() as f64 / runs.len().max(1) as f64,
        median_rel_error: median_of(abs.clone()),
        p90_rel_error: quantile(&abs, 0.9),
        median_signed_rel_error: median_of(answered.iter().filter_map(|r| r.rel_error).collect()),
        median_signed_rel_error_offered: median_of(
            answered
                .iter()
                .filter_map(|r| r.rel_error_offered)
                .collect(),
        ),
        median_cross_dropped_bytes: median_of(
            answered
                .iter()
                .filter_map(|r| r.cross_dropped_bytes)
                .collect(),
        ),
        median_duration_s: median_of(answered.iter().map(|r| r.duration_s).collect()),
        median_probe_bytes: median_of(
            answered
                .iter()
                .filter_map(|r| r.probe_bytes.map(|b| b as f64))
                .collect(),
        ),
        median_truth_bps: median_of(answered.iter().filter_map(|r| r.truth_bps).collect()),
        held: answered
            .iter()
            .filter(|r| r.holds_truth() == Some(true))
            .count(),
        with_range: answered
            .iter()
            .filter(|r| r.holds_truth().is_some())
            .count(),
        silent_misses: runs.iter().filter(|r| r.is_silent_miss()).count(),
        swings: runs
            .iter()
            .filter(|r| r.stop.as_deref() == Some("swings"))
            .count(),
        per_run: runs,
    }
}

/// Why `--pick` found no rate in a tool's output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PickError {
    #[error("--pick '{pattern}' matched nothing in the output: {head:?}")]
    NoMatch { pattern: String, head: String },
    #[error("--pick captured '{0}', not a number")]
    NotANumber(String),
    #[error("--pick needs a capture group for the number")]
    NoGroup,
    #[error("--pick matched neither lo and hi nor value")]
    NoValueGroup,
    #[error("--pick unit starting '{0}': expected k, M, G or T")]
    Unit(char),
}

/// A number with an optional unit prefix from a tool's output: group 1
/// and group 2, or with named groups, `lo` and `hi` (a range: its
/// midpoint) or `value`, and `unit` or `vunit`.
pub fn pick_rate(pick: &Regex, output: &str) -> Result<f64, PickError> {
    let caps = pick.captures(output).ok_or_else(|| PickError::NoMatch {
        pattern: pick.as_str().to_string(),
        head: output.chars().take(300).collect(),
    })?;
    let number = |m: regex::Match| -> Result<f64, PickError> {
        m.as_str()
            .parse()
            .map_err(|_| PickError::NotANumber(m.as_str().to_string()))
    };
    let named = pick.capture_names().flatten().next().is_some();
    let v = if !named {
        number(caps.get(1).ok_or(PickError::NoGroup)?)?
    } else if let (Some(lo), Some(hi)) = (caps.name("lo"), caps.name("hi")) {
        (number(lo)? + number(hi)?) / 2.0
    } else {
        number(caps.name("value").ok_or(PickError::NoValueGroup)?)?
    };
    let unit = if named {
        caps.name("unit").or_else(|| caps.name("vunit"))
    } else {
        caps.get(2)
    };
    let scale = match unit.map(|m| m.as_str().chars().next()) {
        None | Some(None) => 1.0,
        Some(Some('k' | 'K')) => 1e3,
        Some(Some('M')) => 1e6,
        Some(Some('G' | 'g')) => 1e9,
        Some(Some('T')) => 1e12,
        Some(Some('b' | 'B')) => 1.0,
        Some(Some(c)) => return Err(PickError::Unit(c)),
    };
    Ok(v * scale)
}

/// A tool's command line with its placeholders filled in.
pub fn tool_command(command: &str, far: &str, hop_rates_bps: &[f64]) -> String {
    let capacity = hop_rates_bps.iter().copied().fold(f64::INFINITY, f64::min);
    command
        .replace("{server}", far)
        .replace("{capacity}", &format!("{capacity:.0}"))
}

/// Runs a child to completion with a deadline; (stdout, stderr, success).
pub(crate) fn run_child(
    mut cmd: Command,
    timeout: Duration,
) -> Result<(String, String, bool), String> {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("start: {e}"))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(s);
        }
        if started.elapsed() > timeout {
            kill_group(&mut child);
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let (o, e) = (
        t_out.join().unwrap_or_default(),
        t_err.join().unwrap_or_default(),
    );
    match status {
        None => Err(format!("killed after {} s", timeout.as_secs())),
        // A failure must carry a reason: one that printed none (killed
        // by a signal, its namespace gone) is named by how it ended.
        Some(s) if !s.success() && e.trim().is_empty() => Ok((
            o,
            format!("it ended with {s} and printed nothing on its standard error"),
            false,
        )),
        Some(s) => Ok((o, e, s.success())),
    }
}

/// Counters covering `end_ns`: waits for the sampler to pass it.
pub(crate) fn samples_until(sampler: &Sampler, end_ns: i64) -> Vec<Sample> {
    for _ in 0..200 {
        if sampler.last().is_some_and(|l| l.t_ns >= end_ns) {
            break;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    sampler.snapshot()
}

/// What runs in the lab besides the tool under test.
pub(crate) struct Services {
    pub(crate) children: Vec<Child>,
    /// When the cross traffic sender was started (CLOCK_REALTIME ns): its
    /// clock's zero, to within the process start (milliseconds).
    pub(crate) cross_started_ns: Option<i64>,
}

/// Starts the far end (`tightlink server` with `server_args` beside the
/// defaults, and the tools' own servers: in the sender's namespace for a
/// tool whose client runs at the receiver) and the cross traffic.
pub(crate) fn start_services(
    lab: &Lab,
    exe: &PathBuf,
    tool_servers: &[(bool, &str)],
    server_args: &[&str],
    seconds: u64,
) -> Result<Services, String> {
    let mut children = Vec::new();
    let mut cross_started_ns = None;
    for &(at_receiver, cmd) in tool_servers {
        let ns = if at_receiver { "snd" } else { "rcv" };
        children.push(
            Command::new("ip")
                .args(["netns", "exec", &lab.ns(ns), "sh", "-c", cmd])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| format!("start the tool's server: {e}"))?,
        );
    }
    let mut server = in_ns(lab, "rcv", exe)
        .args(["server", "--bind", RCV_IP, "--max-sessions-per-ip", "8"])
        .args(server_args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("start server: {e}"))?;
    let mut lines = BufReader::new(server.stderr.take().expect("piped"));
    let mut first = String::new();
    let _ = lines.read_line(&mut first);
    if !first.contains("listening") {
        let _ = server.kill();
        return Err(format!("server did not start: {}", first.trim()));
    }
    // Keep reading its log so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines.lines() {});
    children.push(server);
    if let Some(c) = &lab.scenario.cross {
        if let Some(b) = c.generator.binary().filter(|b| !generators::on_path(b)) {
            return Err(format!(
                "cross.generator = \"{}\" needs `{b}` on PATH (Debian: apt install {b})",
                c.generator.name()
            ));
        }
        let (sink, mut sender) = cross_commands(lab, exe, c, SINK_PORT, seconds * 1000)?;
        if let Some(mut sink) = sink {
            children.push(
                sink.stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .process_group(0)
                    .spawn()
                    .map_err(|e| format!("start cross sink: {e}"))?,
            );
        }
        // iperf's servers take longer than ours to listen.
        let settle_ms = if c.generator == Generator::Tightlink {
            100
        } else {
            300
        };
        std::thread::sleep(Duration::from_millis(settle_ms));
        cross_started_ns = Some(realtime_ns());
        children.push(
            sender
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .spawn()
                .map_err(|e| format!("start cross traffic ({}): {e}", c.generator.name()))?,
        );
    }
    Ok(Services {
        children,
        cross_started_ns,
    })
}

/// The cross sink's and the cross sender's commands (in the `xr` and
/// `xs` namespaces) for the scenario's generator, the sender running for
/// `millis` and the sink 5 s longer. A replay has no sink; its capture is
/// written out for tcpreplay first.
pub(crate) fn cross_commands(
    lab: &Lab,
    exe: &PathBuf,
    c: &Cross,
    port: u16,
    millis: u64,
) -> Result<(Option<Command>, Command), String> {
    let to = format!("{XR_IP}:{port}");
    let seconds = millis.div_ceil(1000);
    if let Generator::TcpReplay { capture, .. } = &c.generator {
        let pcap = replay_file(lab, capture)?;
        let path = generators::ReplayPath {
            interface: "eth0".into(),
            source_mac: interface_mac(&lab.ns("xs"), "eth0")?,
            router_mac: interface_mac(&lab.router(c.entry_hop), "from_xs")?,
            source_ip: XS_IP.into(),
            destination_ip: XR_IP.into(),
        };
        let argv = c
            .generator
            .replay_argv(&pcap, &path, seconds)
            .expect("a replay");
        return Ok((None, generators::in_netns(&lab.ns("xs"), &argv)));
    }
    Ok(
        match (
            c.generator.sink_argv(XR_IP, port),
            c.generator.sender_argv(XR_IP, port, seconds),
        ) {
            (Some(sink), Some(sender)) => (
                Some(generators::in_netns(&lab.ns("xr"), &sink)),
                generators::in_netns(&lab.ns("xs"), &sender),
            ),
            _ => {
                let mut sink = in_ns(lab, "xr", exe);
                sink.args([
                    "cross",
                    "--sink",
                    &to,
                    "--duration",
                    &format!("{}ms", millis + 5000),
                ]);
                let mut sender = in_ns(lab, "xs", exe);
                sender.args([
                    "cross",
                    &to,
                    "--traffic",
                    &c.traffic,
                    "--duration",
                    &format!("{millis}ms"),
                    "--seed",
                    &c.seed.to_string(),
                    "--tcp",
                    &c.tcp_flows.to_string(),
                ]);
                (Some(sink), sender)
            }
        },
    )
}

/// The pcap tcpreplay reads for `capture`: the shipped one or a file,
/// unpacked and its frames padded to their length on the wire, written
/// into the lab's run directory.
fn replay_file(lab: &Lab, capture: &str) -> Result<String, String> {
    let bytes = generators::capture_bytes(capture)
        .and_then(|b| generators::pad_to_wire(&b))
        .map_err(|e| format!("cross.capture = \"{capture}\": {e}"))?;
    let dir = std::path::Path::new(crate::topology::DELAY_STATUS_DIR);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let file = lab.replay_path();
    std::fs::write(&file, bytes).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(file.display().to_string())
}

/// The MAC address of `interface` in namespace `ns`.
fn interface_mac(ns: &str, interface: &str) -> Result<String, String> {
    let argv = [
        "cat".to_string(),
        format!("/sys/class/net/{interface}/address"),
    ];
    let out = generators::in_netns(ns, &argv)
        .output()
        .map_err(|e| format!("read {interface}'s address in {ns}: {e}"))?;
    let mac = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || mac.len() != 17 {
        return Err(format!(
            "read {interface}'s address in {ns}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(mac)
}

/// One estimate by `method` (or the tool), with its truth.
/// One thing `lab run` measures with.
enum Entry<'a> {
    Method(&'a str),
    Tool(&'a Tool),
}

impl Entry<'_> {
    fn name(&self) -> &str {
        match self {
            Entry::Method(m) => m,
            Entry::Tool(t) => &t.name,
        }
    }
}

/// What `lab compare` runs of tightlink's own by default: one method of
/// each family.
pub const COMPARE_METHODS: &str = "multirate,prcmt+bass,pathload,topp,pathchirp,igi,spruce,bart";

/// Unix ns windows: (every probe sent, the streams the answer came from).
type Windows = ((i64, i64), (i64, i64));

fn one_run(
    lab: &Lab,
    opts: &RunOptions,
    sampler: &Sampler,
    entry: &Entry,
    run: usize,
) -> RunRecord {
    let mut rec = RunRecord {
        method: entry.name().to_string(),
        run,
        ..RunRecord::default()
    };
    let rates: Vec<f64> = lab.scenario.hops.iter().map(|h| h.rate_bps).collect();
    // The truth is taken over the streams the answer came from, the
    // cross traffic lost over every probe sent (checks that left the
    // answer as it was, the shaper trains, drop it too).
    let (windows, result) = match entry {
        Entry::Tool(tool) => run_tool(lab, tool, &rates, &mut rec),
        Entry::Method(method) => run_method(lab, opts, method, run, &mut rec),
    };
    match result {
        // 0 is an answer ("at most" the lowest rate: a full path).
        Ok(v) if v.is_finite() && v >= 0.0 => rec.estimate_bps = Some(v),
        Ok(v) => rec.error = Some(format!("answer {v} is not a rate")),
        Err(e) => rec.error = Some(e),
    }
    let (window, answer_window) = windows;
    let samples = samples_until(sampler, window.1.max(answer_window.1));
    record_truth(lab, &mut rec, &samples, &rates, windows);
    rec
}

/// A report's number, or why it has none: a `none` bound is no answer
/// to be wrong by, whatever figure the report carries beside it.
fn answer_of(j: &tightlink_measure::EstimateJson) -> Result<f64, String> {
    if j.bound == tightlink_core::Bound::None.as_str() {
        let why = j.warnings.first().map_or(j.stop.as_str(), String::as_str);
        return Err(format!("no answer: {why}"));
    }
    Ok(j.available_bandwidth_bps)
}

/// Another tool's run in its namespace; its answer picked from its output.
fn run_tool(
    lab: &Lab,
    tool: &Tool,
    rates: &[f64],
    rec: &mut RunRecord,
) -> (Windows, Result<f64, String>) {
    let start_ns = realtime_ns();
    let t0 = Instant::now();
    let (ns, far) = if tool.at_receiver {
        ("rcv", SND_IP)
    } else {
        ("snd", RCV_IP)
    };
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &lab.ns(ns), "sh", "-c"])
        .arg(tool_command(&tool.command, far, rates));
    let r = run_child(cmd, ESTIMATE_TIMEOUT);
    rec.duration_s = t0.elapsed().as_secs_f64();
    let window = (start_ns, realtime_ns());
    let v = r.and_then(|(out, err, ok)| {
        if !ok {
            return Err(format!("exited with failure: {}", err.trim()));
        }
        pick_rate(&tool.pick, &out).map_err(|e| e.to_string())
    });
    ((window, window), v)
}

/// `tightlink estimate --json` with `method` from the sender's
/// namespace; the report's figures into `rec`, its windows for the truth.
fn run_method(
    lab: &Lab,
    opts: &RunOptions,
    method: &str,
    run: usize,
    rec: &mut RunRecord,
) -> (Windows, Result<f64, String>) {
    let start_ns = realtime_ns();
    let mut cmd = in_ns(lab, "snd", &opts.exe);
    cmd.args(["estimate", RCV_IP, "--method", method, "--json"]);
    if let Some(dir) = &opts.save_traces {
        let file = format!("{}-{method}-{}.trace.gz", lab.scenario.name, run + 1);
        cmd.arg("--save-trace").arg(dir.join(file));
    }
    if method == "queue-fit" {
        // The lab knows its tight link: tbf's rate, at the layer
        // real paths are measured at.
        let c = lab.scenario.tight_capacity_bps().round() as u64;
        cmd.args(["--capacity", &c.to_string()]);
    }
    let r = run_child(cmd, ESTIMATE_TIMEOUT);
    let end = realtime_ns();
    let mut window = (start_ns, end);
    let mut answer_window = None;
    let v = r.and_then(|(out, err, ok)| {
        if !ok {
            return Err(err.trim().to_string());
        }
        let j: tightlink_measure::EstimateJson =
            serde_json::from_str(out.trim()).map_err(|e| format!("estimate --json: {e}"))?;
        let answer = answer_of(&j);
        rec.duration_s = j.wall_s;
        rec.probe_bytes = Some(j.probe_bytes);
        rec.bound = Some(j.bound);
        rec.low_bps = Some(j.low_bps);
        rec.high_bps = Some(j.high_bps);
        rec.stop = Some(j.stop);
        rec.streams = Some(j.streams as u64);
        rec.sender_late_streams = j.sender_late_streams.map(|n| n as u64);
        rec.resent_streams = Some(j.resent_streams as u64);
        rec.warnings = Some(j.warnings);
        let unix_window = |w: Option<[i64; 2]>| w.map(|[a, z]| (a, z));
        window = unix_window(j.probe_window_unix_ns).unwrap_or(window);
        answer_window = unix_window(j.answer_window_unix_ns);
        answer
    });
    ((window, answer_window.unwrap_or(window)), v)
}

/// The counters' truth over the answer's window into `rec`: the error
/// against what the hops carried and against what the cross traffic
/// offered, and the cross traffic lost over every probe sent.
fn record_truth(
    lab: &Lab,
    rec: &mut RunRecord,
    samples: &[crate::truth::Sample],
    rates: &[f64],
    (window, answer_window): Windows,
) {
    let dropped_bytes =
        |t: &truth::Truth| ((t.offered_cross_bps - t.sink_bps) * t.window_s / 8.0).max(0.0);
    let whole_dropped = (window != answer_window)
        .then(|| truth::truth(samples, rates, window.0, window.1).ok())
        .flatten()
        .map(|t| dropped_bytes(&t));
    let t = match truth::truth(samples, rates, answer_window.0, answer_window.1) {
        Ok(t) => t,
        Err(e) => {
            rec.error.get_or_insert(format!("truth: {e}"));
            return;
        }
    };
    rec.truth_bps = Some(t.available_bps);
    match rec.estimate_bps {
        // A relative error needs room on the path (TCP cross flows
        // can fill it: then the record keeps both numbers).
        Some(_) if t.available_bps < 1e6 => {
            rec.error = Some(format!(
                "truth {:.0} bit/s: the path is full, no relative error",
                t.available_bps
            ))
        }
        Some(e) => rec.rel_error = Some((e - t.available_bps) / t.available_bps),
        None => {}
    }
    if let Some(cross) = &lab.scenario.cross {
        let offered = rates
            .iter()
            .enumerate()
            .map(|(k, &c)| {
                if k >= cross.entry_hop {
                    c - t.offered_cross_bps
                } else {
                    c
                }
            })
            .fold(f64::INFINITY, f64::min);
        rec.truth_offered_bps = Some(offered);
        rec.rel_error_offered = rec
            .estimate_bps
            .filter(|_| offered >= 1e6)
            .map(|e| (e - offered) / offered);
        rec.cross_dropped_bytes = Some(whole_dropped.unwrap_or_else(|| dropped_bytes(&t)));
    }
    rec.truth = Some(t);
}

/// Runs the scenario; `progress` hears one line per estimate.
pub fn run(
    lab: &Lab,
    opts: &RunOptions,
    progress: &mut dyn FnMut(&RunRecord),
) -> Result<Vec<MethodSummary>, LabError> {
    let entries: Vec<Entry> = opts
        .methods
        .iter()
        .map(|m| Entry::Method(m))
        .chain(opts.tools.iter().map(Entry::Tool))
        .collect();
    let methods: Vec<String> = entries.iter().map(|e| e.name().to_string()).collect();
    // Held until `guard` below has taken the lab down (locals drop in
    // reverse order).
    let _hold = lab.hold("run")?;
    lab.up(&opts.exe)?;
    let mut guard = Guard {
        lab,
        children: Vec::new(),
    };
    // Generous: every estimate at its timeout would still be covered.
    let seconds = 10 + (opts.repeat * methods.len()) as u64 * 5;
    let tool_servers: Vec<(bool, &str)> = opts
        .tools
        .iter()
        .filter_map(|t| Some((t.at_receiver, t.server.as_deref()?)))
        .collect();
    guard.children = start_services(lab, &opts.exe, &tool_servers, &[], seconds)
        .map_err(LabError::Command)?
        .children;
    let sampler = Sampler::start(lab, opts.sample_period)
        .map_err(|e| LabError::Command(format!("counters: {e}")))?;
    // Let the cross traffic reach its pace and the queues settle.
    std::thread::sleep(Duration::from_millis(500));
    let mut per_method: Vec<Vec<RunRecord>> = vec![Vec::new(); methods.len()];
    let mut lines = fresh_line_counts(lab);
    for run in 0..opts.repeat {
        for (i, e) in entries.iter().enumerate() {
            let mut rec = one_run(lab, opts, &sampler, e, run);
            let now = fresh_line_counts(lab);
            rec.delay_line = lines.zip(now).map(|(before, after)| after.since(before));
            lines = now;
            progress(&rec);
            per_method[i].push(rec);
            // Queues drain between estimates (100 KB at 200 Mbit/s: 4 ms).
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    let samples = sampler.finish();
    drop(guard);
    samples.map_err(|e| LabError::Command(format!("counters: {e}")))?;
    Ok(methods
        .iter()
        .zip(per_method)
        .map(|(m, runs)| summarise(&lab.scenario.name, m, runs))
        .collect())
}

/// What the lab's delay lines did, summed over its hops: toward the
/// receiver, frames forwarded, of them released more than 100 us late,
/// and frames dropped (over 5 ms behind, the line's socket or queue
/// full); toward the sender, frames dropped. A dropped frame is this
/// host's loss (it could not run the line on time), not the path's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct LineCounts {
    pub forwarded: u64,
    pub late: u64,
    pub dropped: u64,
    pub dropped_back: u64,
}

impl LineCounts {
    /// The lines fell over: more than a twentieth of the frames that
    /// reached them either way dropped (a working line drops a few in ten
    /// thousand when this host is busiest), or some dropped and none
    /// went through.
    pub fn fell_over(&self) -> bool {
        let dropped = self.dropped + self.dropped_back;
        dropped * 20 > self.forwarded + dropped || (dropped > 0 && self.forwarded == 0)
    }

    /// What happened between `before` and these.
    pub fn since(self, before: LineCounts) -> LineCounts {
        LineCounts {
            forwarded: self.forwarded.saturating_sub(before.forwarded),
            late: self.late.saturating_sub(before.late),
            dropped: self.dropped.saturating_sub(before.dropped),
            dropped_back: self.dropped_back.saturating_sub(before.dropped_back),
        }
    }
}

/// The delay lines' [`LineCounts`], read just after a line wrote its
/// counters (each writes them every second, the first a second after it
/// starts), so that two reads bracket what happened between them. `None`
/// without delay lines, or when a line wrote nothing new within 3.5 s (a
/// host so busy that the line's status thread did not run).
/// What the delay lines did since `before` (a [`fresh_line_counts`]
/// reading), if both readings came.
pub fn line_counts_since(lab: &Lab, before: Option<LineCounts>) -> Option<LineCounts> {
    before.and_then(|b| fresh_line_counts(lab).map(|a| a.since(b)))
}

pub fn fresh_line_counts(lab: &Lab) -> Option<LineCounts> {
    let paths: Vec<_> = (0..lab.scenario.hops.len())
        .filter_map(|k| lab.delay_line(k))
        .map(|ns| Lab::delay_status_path(&ns))
        .collect();
    // Not there yet when the line started less than a second ago.
    let first = std::fs::read_to_string(paths.first()?).ok();
    let deadline = Instant::now() + Duration::from_millis(3500);
    loop {
        let now = std::fs::read_to_string(&paths[0]).ok();
        if now.is_some() && now != first {
            break;
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut sum = LineCounts::default();
    for p in &paths {
        let text = std::fs::read_to_string(p).ok()?;
        let v: serde_json::Value = serde_json::from_str(&text).ok()?;
        let dropped = |d: &serde_json::Value| -> Option<u64> {
            Some(
                d["dropped_late"].as_u64()?
                    + d["socket_drops"].as_u64()?
                    + d["dropped_queue_full"].as_u64()?,
            )
        };
        let (forward, back) = (&v["a_to_b"], &v["b_to_a"]);
        sum.forwarded += forward["forwarded_packets"].as_u64()?;
        sum.late += forward["late_over_100us"].as_u64()?;
        sum.dropped += dropped(forward)?;
        sum.dropped_back += dropped(back)?;
    }
    Some(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `none` report is no answer, even with a figure beside it (the
    /// pathload mode over a standing queue keeps its search's middle);
    /// its first warning, or its stop, says why.
    #[test]
    fn a_none_bound_is_no_answer() {
        let mut j = tightlink_measure::EstimateJson {
            bound: "none".into(),
            available_bandwidth_bps: 104e6,
            stop: "converged".into(),
            warnings: vec!["a queue stood under 18 of 18 streams".into()],
            ..Default::default()
        };
        assert_eq!(
            answer_of(&j),
            Err("no answer: a queue stood under 18 of 18 streams".to_string())
        );
        j.warnings.clear();
        assert_eq!(answer_of(&j), Err("no answer: converged".to_string()));
        j.bound = "exact".into();
        assert_eq!(answer_of(&j), Ok(104e6));
    }

    /// A child that fails silently still gives a reason: its exit status
    /// or signal; one that speaks keeps its own words.
    #[test]
    fn a_silent_failure_is_named_by_how_it_ended() {
        let mut silent = Command::new("sh");
        silent.args(["-c", "exit 3"]);
        let (_, err, ok) = run_child(silent, Duration::from_secs(5)).unwrap();
        assert!(!ok);
        assert_eq!(
            err,
            "it ended with exit status: 3 and printed nothing on its standard error"
        );
        let mut killed = Command::new("sh");
        killed.args(["-c", "kill -9 $$"]);
        let (_, err, _) = run_child(killed, Duration::from_secs(5)).unwrap();
        assert!(err.contains("signal: 9"), "{err}");
        let mut speaks = Command::new("sh");
        speaks.args(["-c", "echo no route >&2; exit 1"]);
        let (_, err, _) = run_child(speaks, Duration::from_secs(5)).unwrap();
        assert_eq!(err.trim(), "no route");
    }

    /// Two reads of the lines' counters: what happened between them, each
    /// field on its own; a line restarted in between (counters lower than
    /// before) reads zero, not a wrapped count.
    #[test]
    fn line_counts_since_by_hand() {
        let before = LineCounts {
            forwarded: 1000,
            late: 10,
            dropped: 5,
            dropped_back: 0,
        };
        let after = LineCounts {
            forwarded: 71_370,
            late: 2135,
            dropped: 13_887,
            dropped_back: 3,
        };
        assert_eq!(
            after.since(before),
            LineCounts {
                forwarded: 70_370,
                late: 2125,
                dropped: 13_882,
                dropped_back: 3,
            }
        );
        assert_eq!(before.since(after), LineCounts::default());
    }

    #[test]
    fn quantiles_and_medians_by_hand() {
        let v = [0.01, 0.02, 0.03, 0.04, 0.05, 0.06, 0.07, 0.08, 0.09, 0.10];
        // Position 0.9 x 9 = 8.1: a tenth of the way from 0.09 to 0.10.
        assert!((quantile(&v, 0.9).unwrap() - 0.091).abs() < 1e-12);
        assert_eq!(quantile(&v, 1.0), Some(0.10));
        assert_eq!(quantile(&v[..1], 0.9), Some(0.01));
        assert_eq!(median_of(vec![3.0, 1.0, 2.0, 10.0]), Some(2.5));
        assert_eq!(median_of(vec![]), None);
    }

    #[test]
    fn a_tools_placeholders_are_filled() {
        // Two hops, 250 and 150 Mbit/s: the tight link is the second.
        let c = tool_command(
            "spruce_snd -h {server} -c {capacity}",
            "10.77.2.2",
            &[250e6, 150e6],
        );
        assert_eq!(c, "spruce_snd -h 10.77.2.2 -c 150000000");
        assert_eq!(tool_command("x {server}", "a", &[1e6]), "x a");
    }

    #[test]
    fn a_timed_out_tool_leaves_no_process_behind() {
        // The shell's child holds the pipes: killing the shell alone
        // would leave it running and the readers waiting for it.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "sleep 30; echo done"]);
        let t0 = Instant::now();
        let r = run_child(cmd, Duration::from_millis(200));
        assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
        assert!(r.is_err(), "a killed run is no answer: {r:?}");
    }

    fn rec(err: Option<f64>, d: f64) -> RunRecord {
        RunRecord {
            method: "m".into(),
            run: 0,
            estimate_bps: err.map(|e| 100e6 * (1.0 + e)),
            bound: None,
            truth_bps: Some(100e6),
            truth: None,
            rel_error: err,
            truth_offered_bps: Some(96e6),
            rel_error_offered: err.map(|e| (100e6 * (1.0 + e) - 96e6) / 96e6),
            cross_dropped_bytes: Some(d * 1000.0),
            duration_s: d,
            probe_bytes: Some(1000),
            low_bps: None,
            high_bps: None,
            stop: None,
            streams: None,
            sender_late_streams: None,
            delay_line: None,
            resent_streams: None,
            warnings: Some(Vec::new()),
            error: None,
        }
    }

    /// Errors +2 %, -4 %, +6 % and one unanswered run: 3/4 answered,
    /// median |e| 4 %, p90 5.6 % (0.9 x 2 = 1.8: eight tenths of the way
    /// from 4 % to 6 %), signed median +2 %.
    #[test]
    fn summary_by_hand() {
        let s = summarise(
            "x",
            "m",
            vec![
                rec(Some(0.02), 0.2),
                rec(Some(-0.04), 0.4),
                rec(Some(0.06), 0.3),
                rec(None, 9.0),
            ],
        );
        assert_eq!(s.answered_share, 0.75);
        assert!((s.median_rel_error.unwrap() - 0.04).abs() < 1e-12);
        assert!((s.p90_rel_error.unwrap() - 0.056).abs() < 1e-12);
        assert!((s.median_signed_rel_error.unwrap() - 0.02).abs() < 1e-12);
        // Against 96 Mbit/s offered: 102 / 96 - 1 = +6.25 %, the median
        // of 0, +6.25 and +10.4 %.
        assert!((s.median_signed_rel_error_offered.unwrap() - 0.0625).abs() < 1e-12);
        // 200, 400 and 300 bytes dropped over the answered runs.
        assert_eq!(s.median_cross_dropped_bytes, Some(300.0));
        assert_eq!(s.median_duration_s, Some(0.3));
        // No run gave a range: nothing to hold.
        assert_eq!((s.held, s.with_range, s.swings), (0, 0, 0));
    }

    /// Truth 100 Mbit/s: a range 95-105 holds it, 101-105 does not; "at
    /// least 105" holds (within 10 %), "at least 120" does not; "at most
    /// 95" holds, "at most 80" does not.
    #[test]
    fn answers_hold_the_truth_by_hand() {
        let with = |bound: &str, e: f64, low: f64, high: f64, stop: &str| RunRecord {
            bound: Some(bound.into()),
            estimate_bps: Some(e),
            low_bps: Some(low),
            high_bps: Some(high),
            stop: Some(stop.into()),
            streams: None,
            sender_late_streams: None,
            delay_line: None,
            resent_streams: None,
            ..rec(Some(0.0), 0.1)
        };
        let runs = vec![
            with("exact", 100e6, 95e6, 105e6, "stable"),
            with("exact", 103e6, 101e6, 105e6, "swings"),
            with("at_least", 105e6, 105e6, 105e6, "ceiling"),
            with("at_least", 120e6, 120e6, 120e6, "ceiling"),
            with("at_most", 95e6, 95e6, 95e6, "budget"),
            with("at_most", 80e6, 80e6, 80e6, "budget"),
        ];
        let held: Vec<Option<bool>> = runs.iter().map(RunRecord::holds_truth).collect();
        let (t, f) = (Some(true), Some(false));
        assert_eq!(held, vec![t, f, t, f, t, f]);
        let s = summarise("x", "m", runs);
        assert_eq!((s.held, s.with_range, s.swings), (3, 6, 1));
    }

    /// Truth 100 Mbit/s (`rec`'s): 115 said `exact` with 110-120 and no
    /// warning is a silent miss; the same with a warning, a range that
    /// holds the truth, "at least", or 108 (8 % off) is not.
    #[test]
    fn silent_misses_by_hand() {
        let with = |e: f64, low: f64, high: f64, bound: &str, warned: bool| RunRecord {
            bound: Some(bound.into()),
            estimate_bps: Some(e),
            rel_error: Some(e / 100e6 - 1.0),
            low_bps: Some(low),
            high_bps: Some(high),
            warnings: Some(if warned { vec!["swung".into()] } else { vec![] }),
            ..rec(None, 0.1)
        };
        let runs = vec![
            with(115e6, 110e6, 120e6, "exact", false),
            with(115e6, 110e6, 120e6, "exact", true),
            with(115e6, 95e6, 120e6, "exact", false),
            with(115e6, 115e6, 115e6, "at_least", false),
            with(108e6, 105e6, 110e6, "exact", false),
            with(85e6, 80e6, 89e6, "exact", false),
        ];
        let silent: Vec<bool> = runs.iter().map(RunRecord::is_silent_miss).collect();
        assert_eq!(silent, vec![true, false, false, false, false, true]);
        assert_eq!(summarise("x", "m", runs).silent_misses, 2);
    }

    #[test]
    fn numbers_are_picked_with_their_units() {
        let iperf = Regex::new(r"([\d.]+) (\w)bits/sec.*receiver").unwrap();
        let out = "[  5]   0.00-1.00   sec  17.1 MBytes   143 Mbits/sec  0.012 ms  0/12345 (0%)  receiver\n";
        assert_eq!(pick_rate(&iperf, out).unwrap(), 143e6);
        let plain = Regex::new(r"avail=([\d.e+]+)").unwrap();
        assert_eq!(pick_rate(&plain, "avail=1.5e8").unwrap(), 1.5e8);
        assert!(matches!(
            pick_rate(&plain, "nothing"),
            Err(PickError::NoMatch { .. })
        ));
        assert!(pick_rate(&plain, "nothing")
            .unwrap_err()
            .to_string()
            .contains("matched nothing"));
        let bad = Regex::new(r"(x)").unwrap();
        assert_eq!(
            pick_rate(&bad, "x"),
            Err(PickError::NotANumber("x".to_string()))
        );
    }
}
