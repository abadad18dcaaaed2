//! `tightlink lab cc`: rate controllers in turn over one lab path and its
//! cross traffic (\[BASS\] section VII on real packets): Rapid with and
//! without BASS and TCP Westwood BBE's window (\[TCPW\] section 4)
//! (`tightlink transfer` to the lab's server), and the
//! kernel's CUBIC, BBR and Reno (one TCP bulk flow to a sink on the
//! receiver; Reno is the reference TCPW BBE is judged against),
//! each for the same time; or several together (`bbe+reno`), each
//! flow's throughput from its own report and Jain's index over them
//! (\[TCPW\] section 4's friendliness). Throughput is what the last router delivered
//! to the receiver per bin (frames, as tbf counts); the available
//! bandwidth per bin is each shaped hop's rate minus the cross traffic
//! *offered* at its entry router, so a flow that only takes what the
//! cross traffic leaves reads 100 %, and one that pushes the
//! unresponsive UDP cross traffic out of the queue reads more.

use std::process::{Command, Stdio};
use std::time::Duration;

use crate::run::{
    fresh_line_counts, in_ns, line_counts_since, run_child, samples_until, start_services, Guard,
    LineCounts, SINK_PORT,
};
use crate::sampler::Sampler;
use crate::topology::{Lab, LabError, RCV_IP};
use crate::truth;
use tightlink_core::stats::{jain_index, median};
use tightlink_sys::clock::realtime_ns;

/// The controllers, in the order they run.
pub const CONTROLLERS: [&str; 6] = ["rapid", "rapid-raw", "bbe", "cubic", "bbr", "reno"];

/// Flows run together at most.
pub const MAX_TOGETHER: usize = 4;

/// Whether `controller` is one of tightlink's own (a `tightlink transfer`
/// run), not a kernel TCP flow.
fn is_tightlinks(controller: &str) -> bool {
    controller.starts_with("rapid") || controller == "bbe"
}

#[derive(Debug, Clone)]
pub struct CcOptions {
    /// The tightlink binary to run in the namespaces.
    pub exe: std::path::PathBuf,
    pub duration: Duration,
    pub repeat: usize,
    pub controllers: Vec<String>,
    pub bin: Duration,
    pub sample_period: Duration,
}

/// One controller's run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CcRun {
    pub controller: String,
    pub run: usize,
    /// (bin start s, throughput bit/s, available bit/s) per bin.
    pub bins: Vec<(f64, f64, f64)>,
    /// Means over the bins after the first (start-up).
    pub throughput_bps: Option<f64>,
    pub available_bps: Option<f64>,
    pub share: Option<f64>,
    /// Of its packets (Rapid and BBE: lost data packets; TCP: retransmitted
    /// segments, as TCP_INFO counts them).
    pub loss: Option<f64>,
    /// Rapid and BBE: median stream round trip (a stream's last packet
    /// sent to its report); TCP: the kernel's smoothed RTT.
    pub rtt_ms: Option<f64>,
    /// What the lab's delay lines did over the run (`None` without delay
    /// lines, or where a line's status did not come): frames they dropped
    /// are this host's losses, not the path's.
    pub delay_line: Option<LineCounts>,
    /// The delay lines fell over during this run and were started again
    /// after it: what each had logged last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_restarted: Option<String>,
    pub error: Option<String>,
    /// Flows run together (`A+B`): each one's throughput by its own
    /// report (payload delivered for tightlink's, bytes written for a
    /// kernel TCP flow), and Jain's index over them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowShare>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jain: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct FlowShare {
    pub controller: String,
    pub throughput_bps: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CcSummary {
    pub scenario: String,
    pub controller: String,
    pub runs: usize,
    pub median_share: Option<f64>,
    pub median_throughput_bps: Option<f64>,
    pub median_available_bps: Option<f64>,
    pub median_loss: Option<f64>,
    pub median_rtt_ms: Option<f64>,
    /// Flows run together: each one's median throughput, and the median
    /// of the runs' Jain's indices.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub median_flows: Vec<FlowShare>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median_jain: Option<f64>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CcReport {
    pub scenario: String,
    pub summaries: Vec<CcSummary>,
    pub runs: Vec<CcRun>,
}

/// Mean of the bins after the first: (throughput, available).
fn means(bins: &[(f64, f64, f64)]) -> Option<(f64, f64)> {
    let tail = bins.get(1..).filter(|t| !t.is_empty())?;
    let n = tail.len() as f64;
    Some((
        tail.iter().map(|b| b.1).sum::<f64>() / n,
        tail.iter().map(|b| b.2).sum::<f64>() / n,
    ))
}

/// The summaries of runs, per controller in `order`.
pub fn summarise(scenario: &str, order: &[String], runs: &[CcRun]) -> Vec<CcSummary> {
    order
        .iter()
        .map(|c| {
            // A run whose delay line fell over measured this host, not
            // the controller: it is listed, not summarised.
            let mine: Vec<&CcRun> = runs
                .iter()
                .filter(|r| &r.controller == c && !r.delay_line.is_some_and(|d| d.fell_over()))
                .collect();
            let med = |f: &dyn Fn(&CcRun) -> Option<f64>| {
                let v: Vec<f64> = mine.iter().filter_map(|r| f(r)).collect();
                median(&v)
            };
            CcSummary {
                scenario: scenario.to_string(),
                controller: c.clone(),
                runs: mine.len(),
                median_share: med(&|r| r.share),
                median_throughput_bps: med(&|r| r.throughput_bps),
                median_available_bps: med(&|r| r.available_bps),
                median_loss: med(&|r| r.loss),
                median_rtt_ms: med(&|r| r.rtt_ms),
                median_flows: flows_of(c)
                    .ok()
                    .filter(|f| f.len() > 1)
                    .map(|f| {
                        (0..f.len())
                            .map(|k| FlowShare {
                                controller: f[k].to_string(),
                                throughput_bps: med(&|r| {
                                    r.flows.get(k).and_then(|x| x.throughput_bps)
                                }),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
                median_jain: med(&|r| r.jain),
            }
        })
        .collect()
}

/// Runs every controller `repeat` times, interleaved; `progress` hears
/// each run as it ends.
pub fn cc(
    lab: &Lab,
    opts: &CcOptions,
    progress: &mut dyn FnMut(&CcRun),
) -> Result<CcReport, LabError> {
    let err = LabError::Command;
    for c in &opts.controllers {
        flows_of(c).map_err(err)?;
    }
    let secs = opts.duration.as_secs().max(1);
    let total = secs * (opts.repeat * opts.controllers.len()) as u64 + 30;
    let _hold = lab.hold("cc")?;
    lab.up(&opts.exe)?;
    let mut guard = Guard {
        lab,
        children: Vec::new(),
    };
    // The lab's own server: keyless limits lifted so a long transfer is
    // not cut (nothing else reaches this namespace).
    let limits = ["--max-session-bytes", "4000MB", "--max-duration", "3600"];
    guard.children = start_services(lab, &opts.exe, &[], &limits, total)
        .map_err(err)?
        .children;
    let tcp_sink = format!("{RCV_IP}:{SINK_PORT}");
    guard.children.push(
        in_ns(lab, "rcv", &opts.exe)
            .args(["cross", "--sink", &tcp_sink, "--duration"])
            .arg(format!("{}s", total + 5))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| err(format!("TCP sink: {e}")))?,
    );
    let sampler =
        Sampler::start(lab, opts.sample_period).map_err(|e| err(format!("counters: {e}")))?;
    // Let the cross traffic reach its pace and the queues settle.
    std::thread::sleep(Duration::from_millis(500));
    let mut runs = Vec::new();
    for run in 0..opts.repeat {
        for c in &opts.controllers {
            let mut r = one_run(lab, opts, &sampler, c, run, &tcp_sink);
            // A delay line that fell over spoils every run after it:
            // start it again (the run that saw it says so), or stop.
            if r.delay_line.is_some_and(|d| d.fell_over()) {
                let said = lab.restart_delay_lines(&opts.exe).map_err(|e| {
                    err(format!(
                        "{c} run {}: the delay line fell over and did not start again: {e}",
                        run + 1
                    ))
                })?;
                r.line_restarted = Some(said.join("; "));
            }
            progress(&r);
            runs.push(r);
            // The queue drains between flows.
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    sampler
        .finish()
        .map_err(|e| err(format!("counters: {e}")))?;
    drop(guard);
    Ok(CcReport {
        scenario: lab.scenario.name.clone(),
        summaries: summarise(&lab.scenario.name, &opts.controllers, &runs),
        runs,
    })
}

/// The controllers of a `--cc` entry: one, or up to [`MAX_TOGETHER`]
/// joined by `+` to run together.
fn flows_of(entry: &str) -> Result<Vec<&str>, String> {
    let flows: Vec<&str> = entry.split('+').collect();
    if flows.len() > MAX_TOGETHER {
        return Err(format!(
            "'{entry}': at most {MAX_TOGETHER} controllers run together"
        ));
    }
    for f in &flows {
        if !CONTROLLERS.contains(f) {
            return Err(format!(
                "controller '{f}'{}: expected one of {} (or several joined by '+' to run together)",
                if flows.len() > 1 {
                    format!(" in '{entry}'")
                } else {
                    String::new()
                },
                CONTROLLERS.join(", ")
            ));
        }
    }
    Ok(flows)
}

/// One flow's command: a `tightlink transfer` to the lab's server or a
/// kernel TCP flow to its sink, for `secs`.
fn flow_command(lab: &Lab, opts: &CcOptions, controller: &str, tcp_sink: &str) -> Command {
    let secs = opts.duration.as_secs().max(1);
    let mut cmd: Command = in_ns(lab, "snd", &opts.exe);
    if is_tightlinks(controller) {
        // CPU 0: the routers' receive work is on CPU 1 (RPS), and a
        // sender spinning there read the path 30 % high.
        cmd.args(["transfer", RCV_IP, "--cpu", "0", "--cc", controller])
            .args(["--json", "--time"])
            .arg(format!("{secs}s"));
    } else {
        cmd.args(["cross", tcp_sink, "--traffic", "none", "--tcp", "1"])
            .args(["--tcp-congestion", controller])
            .args(["--duration", &format!("{secs}s")]);
    }
    cmd
}

/// What one flow's report said.
#[derive(Debug, Default, PartialEq)]
struct FlowOutcome {
    throughput_bps: Option<f64>,
    loss: Option<f64>,
    rtt_ms: Option<f64>,
    error: Option<String>,
}

/// Reads a flow's JSON report (`transfer --json` or `cross`'s).
fn flow_outcome(
    controller: &str,
    secs: u64,
    out: Result<(String, String, bool), String>,
) -> FlowOutcome {
    let mut o = FlowOutcome::default();
    match out {
        Ok((out, _, true)) => match serde_json::from_str::<serde_json::Value>(out.trim()) {
            Ok(j) if is_tightlinks(controller) => {
                let (lost, sent) = (j["lost_packets"].as_f64(), j["sent_packets"].as_f64());
                o.loss = lost.zip(sent).map(|(l, s)| l / s.max(1.0));
                o.rtt_ms = j["rtt_median_ms"].as_f64();
                o.throughput_bps = j["goodput_bps"].as_f64();
            }
            Ok(j) => {
                let (re, segs) = (j["tcp_retransmitted"].as_f64(), j["tcp_segments"].as_f64());
                o.loss = re.zip(segs).map(|(x, s)| x / s.max(1.0));
                o.rtt_ms = j["tcp_rtt_ms"].as_f64();
                o.throughput_bps = j["tcp_bytes"].as_f64().map(|b| b * 8.0 / secs as f64);
            }
            Err(e) => o.error = Some(format!("its JSON: {e}")),
        },
        Ok((_, stderr, false)) => o.error = Some(format!("failed: {}", stderr.trim())),
        Err(e) => o.error = Some(e),
    }
    o
}

fn one_run(
    lab: &Lab,
    opts: &CcOptions,
    sampler: &Sampler,
    controller: &str,
    run: usize,
    tcp_sink: &str,
) -> CcRun {
    let secs = opts.duration.as_secs().max(1);
    let mut r = CcRun {
        controller: controller.to_string(),
        run,
        bins: Vec::new(),
        throughput_bps: None,
        available_bps: None,
        share: None,
        loss: None,
        rtt_ms: None,
        delay_line: None,
        line_restarted: None,
        error: None,
        flows: Vec::new(),
        jain: None,
    };
    // Checked before the runs.
    let flows = flows_of(controller).unwrap_or_default();
    let lines_before = fresh_line_counts(lab);
    let start_ns = realtime_ns();
    let outs: Vec<FlowOutcome> = std::thread::scope(|s| {
        let running: Vec<_> = flows
            .iter()
            .map(|&c| {
                let cmd = flow_command(lab, opts, c, tcp_sink);
                s.spawn(move || {
                    let out = run_child(cmd, Duration::from_secs(secs * 2 + 30));
                    flow_outcome(c, secs, out)
                })
            })
            .collect();
        running
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| FlowOutcome {
                    error: Some("its thread panicked".into()),
                    ..FlowOutcome::default()
                })
            })
            .collect()
    });
    let end_ns = realtime_ns();
    r.delay_line = line_counts_since(lab, lines_before);
    let errors: Vec<String> = flows
        .iter()
        .zip(&outs)
        .filter_map(|(c, o)| Some(format!("{c}: {}", o.error.as_ref()?)))
        .collect();
    if let [one] = outs.as_slice() {
        (r.loss, r.rtt_ms, r.error) = (one.loss, one.rtt_ms, one.error.clone());
    } else {
        r.error = (!errors.is_empty()).then(|| errors.join("; "));
        r.flows = flows
            .iter()
            .zip(&outs)
            .map(|(c, o)| FlowShare {
                controller: c.to_string(),
                throughput_bps: o.throughput_bps,
            })
            .collect();
        let each: Option<Vec<f64>> = outs.iter().map(|o| o.throughput_bps).collect();
        r.jain = each.map(|x| jain_index(&x));
    }
    r.bins = bins(lab, sampler, opts.bin, start_ns, end_ns);
    if let Some((thr, avail)) = means(&r.bins) {
        r.throughput_bps = Some(thr);
        r.available_bps = Some(avail);
        r.share = (avail > 0.0).then(|| thr / avail);
    }
    r
}

/// (bin start s, delivered bit/s, available bit/s) over the run, from
/// the hops' counters: each shaped hop's rate less the cross traffic
/// offered at its entry router, the least of them.
fn bins(
    lab: &Lab,
    sampler: &Sampler,
    bin: Duration,
    start_ns: i64,
    end_ns: i64,
) -> Vec<(f64, f64, f64)> {
    let samples = samples_until(sampler, end_ns);
    let bin_ns = bin.as_nanos() as i64;
    let rates: Vec<f64> = lab.scenario.hops.iter().map(|h| h.rate_bps).collect();
    let crossed = |k: usize| {
        lab.scenario
            .cross
            .as_ref()
            .is_some_and(|c| k >= c.entry_hop)
    };
    let mut out = Vec::new();
    let mut t = start_ns;
    while t + bin_ns <= end_ns {
        if let Some((delivered, offered)) = truth::delivered_and_offered(&samples, t, t + bin_ns) {
            let available = rates
                .iter()
                .enumerate()
                .map(|(k, &c)| if crossed(k) { c - offered } else { c })
                .fold(f64::INFINITY, f64::min)
                .max(0.0);
            out.push(((t - start_ns) as f64 / 1e9, delivered, available));
        }
        t += bin_ns;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(c: &str, share: f64, loss: f64) -> CcRun {
        CcRun {
            controller: c.into(),
            run: 0,
            bins: vec![],
            throughput_bps: Some(share * 100.0),
            available_bps: Some(100.0),
            share: Some(share),
            loss: Some(loss),
            rtt_ms: None,
            delay_line: None,
            line_restarted: None,
            error: None,
            flows: Vec::new(),
            jain: None,
        }
    }

    /// `A+B` runs together; a name it does not know, or too many, is
    /// refused with what it takes.
    #[test]
    fn entries_name_one_flow_or_several_together() {
        assert_eq!(flows_of("bbe"), Ok(vec!["bbe"]));
        assert_eq!(flows_of("bbe+reno"), Ok(vec!["bbe", "reno"]));
        let e = flows_of("bbe+vegas").unwrap_err();
        assert!(
            e.contains("controller 'vegas' in 'bbe+vegas': expected one of rapid"),
            "{e}"
        );
        let e = flows_of("reno+reno+reno+reno+reno").unwrap_err();
        assert!(e.contains("at most 4"), "{e}");
    }

    /// Each flow's throughput from its own report: a transfer's goodput,
    /// a TCP flow's bytes over the run's seconds; a failed flow says why.
    #[test]
    fn each_flow_reads_its_own_report() {
        let transfer = r#"{"goodput_bps": 1.5e8, "lost_packets": 10, "sent_packets": 1000, "rtt_median_ms": 30.5}"#;
        let o = flow_outcome("bbe", 20, Ok((transfer.into(), String::new(), true)));
        assert_eq!(
            (o.throughput_bps, o.loss, o.rtt_ms),
            (Some(1.5e8), Some(0.01), Some(30.5))
        );
        let cross = r#"{"tcp_bytes": 25000000, "tcp_segments": 2000, "tcp_retransmitted": 4, "tcp_rtt_ms": 31.0}"#;
        let o = flow_outcome("reno", 20, Ok((cross.into(), String::new(), true)));
        assert_eq!(
            (o.throughput_bps, o.loss, o.rtt_ms),
            (Some(10e6), Some(0.002), Some(31.0))
        );
        let o = flow_outcome("reno", 20, Ok((String::new(), "no route".into(), false)));
        assert_eq!(o.error.as_deref(), Some("failed: no route"));
    }

    /// Runs of flows together: each flow's median throughput and the
    /// median Jain's index, in the entry's order.
    #[test]
    fn summaries_of_flows_together() {
        let pair = |a: f64, b: f64| {
            let mut r = run("bbe+reno", 0.9, 0.0);
            r.flows = vec![
                FlowShare {
                    controller: "bbe".into(),
                    throughput_bps: Some(a),
                },
                FlowShare {
                    controller: "reno".into(),
                    throughput_bps: Some(b),
                },
            ];
            r.jain = Some(jain_index(&[a, b]));
            r
        };
        let runs = vec![pair(120.0, 60.0), pair(100.0, 100.0), pair(150.0, 30.0)];
        let s = summarise("x", &["bbe+reno".into()], &runs);
        let each: Vec<_> = s[0].median_flows.iter().map(|f| f.throughput_bps).collect();
        assert_eq!(each, vec![Some(120.0), Some(60.0)]);
        // 180^2 / (2 (120^2 + 60^2)) = 0.9
        assert!((s[0].median_jain.unwrap() - 0.9).abs() < 1e-12);
        let one = summarise("x", &["bbe".into()], &[run("bbe", 0.9, 0.0)]);
        assert!(one[0].median_flows.is_empty() && one[0].median_jain.is_none());
    }

    /// The first bin is start-up and left out: bins 50, 90, 110 of 100
    /// available average 100 %.
    #[test]
    fn means_leave_out_the_first_bin() {
        let bins = [(0.0, 50.0, 100.0), (0.5, 90.0, 100.0), (1.0, 110.0, 100.0)];
        assert_eq!(means(&bins), Some((100.0, 100.0)));
        assert_eq!(means(&bins[..1]), None);
    }

    /// Medians per controller, in the order asked, over its runs only.
    #[test]
    fn summaries_take_each_controllers_medians() {
        let runs = vec![
            run("rapid", 0.9, 0.01),
            run("cubic", 0.5, 0.0),
            run("rapid", 0.8, 0.02),
            run("rapid", 0.95, 0.0),
        ];
        let s = summarise("x", &["rapid".into(), "cubic".into()], &runs);
        assert_eq!(s[0].runs, 3);
        assert_eq!(s[0].median_share, Some(0.9));
        assert_eq!(s[0].median_loss, Some(0.01));
        assert_eq!(s[1].median_share, Some(0.5));
        assert_eq!(s[1].median_rtt_ms, None);
    }

    /// A delay line that dropped a twentieth of what reached it (or all)
    /// fell over; a few frames late does not. Its run is left out.
    #[test]
    fn a_run_whose_delay_line_fell_over_is_left_out() {
        let line = |forwarded, dropped, dropped_back| LineCounts {
            forwarded,
            late: 0,
            dropped,
            dropped_back,
        };
        assert!(!line(200_000, 29, 7).fell_over());
        assert!(!line(19_000, 1_000, 0).fell_over()); // exactly 5 %
        assert!(line(19_000, 1_001, 0).fell_over());
        assert!(line(8_437, 14_301, 0).fell_over());
        assert!(line(0, 14_462, 0).fell_over());
        assert!(line(0, 0, 3).fell_over());
        assert!(!line(0, 0, 0).fell_over());
        let mut spoiled = run("cubic", 0.003, 0.0);
        spoiled.delay_line = Some(line(8_437, 14_301, 0));
        let runs = vec![run("cubic", 0.9, 0.01), spoiled];
        let s = summarise("x", &["cubic".into()], &runs);
        assert_eq!((s[0].runs, s[0].median_share), (1, Some(0.9)));
    }
}
