//! `tightlink lab cc`: rate controllers in turn over one lab path and its
//! cross traffic (\[BASS\] section VII on real packets): Rapid with and
//! without BASS and TCP Westwood BBE's window (\[TCPW\] section 4)
//! (`tightlink transfer` to the lab's server), and the
//! kernel's CUBIC, BBR and Reno (one TCP bulk flow to a sink on the
//! receiver; Reno is the reference TCPW BBE is judged against),
//! each for the same time. Throughput is what the last router delivered
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
use tightlink_core::stats::median;
use tightlink_sys::clock::realtime_ns;

/// The controllers, in the order they run.
pub const CONTROLLERS: [&str; 6] = ["rapid", "rapid-raw", "bbe", "cubic", "bbr", "reno"];

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
        if !CONTROLLERS.contains(&c.as_str()) {
            return Err(err(format!(
                "controller '{c}': expected one of {}",
                CONTROLLERS.join(", ")
            )));
        }
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
    };
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
    let lines_before = fresh_line_counts(lab);
    let start_ns = realtime_ns();
    let out = run_child(cmd, Duration::from_secs(secs * 2 + 30));
    let end_ns = realtime_ns();
    r.delay_line = line_counts_since(lab, lines_before);
    match out {
        Ok((out, _, true)) => match serde_json::from_str::<serde_json::Value>(out.trim()) {
            Ok(j) if is_tightlinks(controller) => {
                let (lost, sent) = (j["lost_packets"].as_f64(), j["sent_packets"].as_f64());
                r.loss = lost.zip(sent).map(|(l, s)| l / s.max(1.0));
                r.rtt_ms = j["rtt_median_ms"].as_f64();
            }
            Ok(j) => {
                let (re, segs) = (j["tcp_retransmitted"].as_f64(), j["tcp_segments"].as_f64());
                r.loss = re.zip(segs).map(|(x, s)| x / s.max(1.0));
                r.rtt_ms = j["tcp_rtt_ms"].as_f64();
            }
            Err(e) => r.error = Some(format!("its JSON: {e}")),
        },
        Ok((_, stderr, false)) => r.error = Some(format!("failed: {}", stderr.trim())),
        Err(e) => r.error = Some(e),
    }
    let samples = samples_until(sampler, end_ns);
    let bin_ns = opts.bin.as_nanos() as i64;
    let rates: Vec<f64> = lab.scenario.hops.iter().map(|h| h.rate_bps).collect();
    let crossed = |k: usize| {
        lab.scenario
            .cross
            .as_ref()
            .is_some_and(|c| k >= c.entry_hop)
    };
    let mut t = start_ns;
    while t + bin_ns <= end_ns {
        if let Some((delivered, offered)) = truth::delivered_and_offered(&samples, t, t + bin_ns) {
            let available = rates
                .iter()
                .enumerate()
                .map(|(k, &c)| if crossed(k) { c - offered } else { c })
                .fold(f64::INFINITY, f64::min)
                .max(0.0);
            r.bins
                .push(((t - start_ns) as f64 / 1e9, delivered, available));
        }
        t += bin_ns;
    }
    if let Some((thr, avail)) = means(&r.bins) {
        r.throughput_bps = Some(thr);
        r.available_bps = Some(avail);
        r.share = (avail > 0.0).then(|| thr / avail);
    }
    r
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
        }
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
