//! `tightlink lab check`: the truth checks of a scenario's lab. Each
//! shaped hop, flooded, must deliver its configured rate, and with only
//! cross traffic running the truth must be the rate less the configured
//! cross rate.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::delay::{self, OneWayDelay};
use crate::generators::Generator;
use crate::run::{
    cross_commands, fresh_line_counts, in_ns, kill_group, run_child, samples_until, Guard,
    SINK_PORT,
};
use crate::sampler::Sampler;
use crate::scenario::Qdisc;
use crate::topology::{Lab, LabError, RCV_IP, XR_IP};
use crate::truth;
use tightlink_sys::clock::realtime_ns;

/// How many times the configured bucket the check's second flood uses
/// where the first fell short.
const LARGER_BUCKET: u64 = 4;

/// The truth checks: does each shaped hop deliver its configured rate
/// when saturated, and does the truth equal rate minus the configured
/// cross rate when only cross traffic runs?
#[derive(Debug, Clone, serde::Serialize)]
pub struct CheckReport {
    pub scenario: String,
    /// Per hop: (configured bit/s, measured bit/s when saturated from its
    /// first sender), `None` where no sender enters there.
    pub saturated: Vec<(f64, Option<f64>)>,
    /// Per hop: the share of the host's CPU time the hypervisor stole
    /// while it was saturated (a stalled vCPU stalls the tbf: its small
    /// bucket loses the tokens of the stall).
    pub saturated_stolen_share: Vec<Option<f64>>,
    /// With the scenario's cross traffic alone: (rate - configured cross,
    /// truth measured) over a 1 s window.
    pub cross_only: Option<(f64, f64)>,
    /// Per hop whose flood fell 1 % or more short of a tbf's rate: the
    /// same flood with a bucket four times as large (bytes, bit/s sent).
    /// Where that sends the rate, the shortfall is the host's: the tbf's
    /// dequeue timer fires later than the small bucket lasts and the
    /// tokens of the wait overflow it. Anything else (a broken flood,
    /// counters, or a host that cannot forward the rate) falls short with
    /// either bucket.
    pub saturated_larger_bucket: Vec<Option<(u64, f64)>>,
    /// What the check found that the figures alone do not say.
    pub warnings: Vec<String>,
    /// With a delay on some hop: (frames the delay lines forwarded toward
    /// the receiver, of which released more than 100 us after their due
    /// time) between the last counter writes around the one-way delay
    /// measurement. The line's own account of being late: a delay that
    /// reads long without it is the line's error, not the host's.
    pub delay_line_late: Option<(u64, u64)>,
    /// With random loss configured: (configured share, measured share of
    /// a 1 s CBR train from the sender that did not reach the receiver).
    pub loss: Option<(f64, f64)>,
    /// With a delay on some hop: the one-way delay of 1000 small probes
    /// from the sender, 1 ms apart, beside the cross traffic (if any).
    pub one_way_delay: Option<OneWayDelay>,
}

pub fn check(lab: &Lab, exe: &PathBuf, period: Duration) -> Result<CheckReport, LabError> {
    let _hold = lab.hold("check")?;
    lab.up(exe)?;
    let mut guard = Guard {
        lab,
        children: Vec::new(),
    };
    let err = |e: String| LabError::Command(e);
    // Sinks: on the receiver and (if any) the cross sink.
    let rcv_sink = format!("{RCV_IP}:{SINK_PORT}");
    guard.children.push(
        in_ns(lab, "rcv", exe)
            .args(["cross", "--sink", &rcv_sink, "--duration", "60s"])
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| err(format!("sink: {e}")))?,
    );
    let xr_sink = format!("{XR_IP}:{SINK_PORT}");
    if lab.scenario.cross.is_some() {
        guard.children.push(
            in_ns(lab, "xr", exe)
                .args(["cross", "--sink", &xr_sink, "--duration", "60s"])
                .stdout(Stdio::null())
                .spawn()
                .map_err(|e| err(format!("sink: {e}")))?,
        );
    }
    std::thread::sleep(Duration::from_millis(200));
    let sampler = Sampler::start(lab, period).map_err(|e| err(format!("counters: {e}")))?;
    let hops = &lab.scenario.hops;
    let mut saturated = vec![(0.0, None); hops.len()];
    let mut saturated_stolen_share = vec![None; hops.len()];
    for (k, h) in hops.iter().enumerate() {
        saturated[k].0 = h.rate_bps;
    }
    // Flood 25 % above the first hop's rate from the sender, and above the
    // entry hop's from the cross sender, for 1.5 s; measure 0.5-1.3 s.
    let mut floods = vec![(0usize, "snd", rcv_sink.clone())];
    if let Some(c) = &lab.scenario.cross {
        if c.entry_hop != 0 {
            floods.push((c.entry_hop, "xs", xr_sink.clone()));
        }
    }
    let mut larger_bucket = vec![None; hops.len()];
    for (k, role, to) in floods {
        let flood = || -> Result<(Option<f64>, Option<f64>), LabError> {
            let rate = format!("cbr:{}", (hops[k].rate_bps * 1.25).round());
            let t0 = realtime_ns();
            let out = run_child(
                {
                    let mut c = in_ns(lab, role, exe);
                    c.args(["cross", &to, "--traffic", &rate, "--duration", "1500ms"]);
                    c
                },
                Duration::from_secs(10),
            )
            .map_err(err)?;
            if !out.2 {
                return Err(err(format!("flood from {role}: {}", out.1.trim())));
            }
            let s = samples_until(&sampler, t0 + 1_300_000_000);
            let (a, b) = (t0 + 500_000_000, t0 + 1_300_000_000);
            std::thread::sleep(Duration::from_millis(100));
            Ok((
                truth::hop_send_rate(&s, k, a, b),
                truth::stolen_share(&s, a, b),
            ))
        };
        (saturated[k].1, saturated_stolen_share[k]) = flood()?;
        let short = saturated[k]
            .1
            .is_some_and(|got| got < 0.99 * hops[k].rate_bps);
        if short && hops[k].qdisc == Qdisc::Tbf {
            let bucket = hops[k].burst_bytes * LARGER_BUCKET;
            lab.set_tbf_bucket(k, bucket)?;
            let with_larger = flood();
            lab.set_tbf_bucket(k, hops[k].burst_bytes)?;
            larger_bucket[k] = with_larger?.0.map(|bps| (bucket, bps));
        }
    }
    let mut warnings = Vec::new();
    for (k, (&(rate, got), larger)) in saturated.iter().zip(&larger_bucket).enumerate() {
        if let (Some(got), Some((bucket, bps))) = (got, larger) {
            if *bps >= 0.98 * rate {
                warnings.push(format!(
                    "hop {}: saturated, its tbf sent {:.1} % of its rate with its {} B bucket and {:.1} % with {bucket} B: this host wakes the tbf's timer later than the small bucket lasts, so it loses tokens under a flood; probe streams, a lighter load, meet less of it, but where they do the truth reads up to {:.1} % high",
                    k + 1,
                    got / rate * 100.0,
                    hops[k].burst_bytes,
                    bps / rate * 100.0,
                    (1.0 - got / rate) * 100.0
                ));
            }
        }
    }
    let has_delay = hops.iter().any(|h| h.delay_ns > 0);
    let delay_probes = || {
        delay::measure_one_way(lab, 1000, Duration::from_millis(1))
            .map_err(|e| err(format!("one-way delay probes: {e}")))
    };
    let mut cross_only = None;
    let mut one_way_delay = None;
    let lines_before = fresh_line_counts(lab);
    if let Some(c) = &lab.scenario.cross {
        let t0 = realtime_ns();
        let (out, probes) = std::thread::scope(|s| {
            let probes = has_delay.then(|| s.spawn(delay_probes));
            // Another tool's sink listens beside ours, one port up.
            let (sink, sender) = match cross_commands(lab, exe, c, SINK_PORT + 1, 2000) {
                Ok(commands) => commands,
                Err(e) => return (Err(e), None),
            };
            let tool_sink = sink
                .filter(|_| c.generator != Generator::Tightlink)
                .map(|mut sink| {
                    let child = sink
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .process_group(0)
                        .spawn();
                    std::thread::sleep(Duration::from_millis(300));
                    child
                });
            let out = run_child(sender, Duration::from_secs(10));
            if let Some(Ok(mut child)) = tool_sink {
                kill_group(&mut child);
            }
            let probes = probes.map(|p| {
                p.join()
                    .unwrap_or_else(|_| Err(err("delay probes panicked".into())))
            });
            (out, probes)
        });
        let out = out.map_err(err)?;
        one_way_delay = probes.transpose()?;
        if !out.2 {
            return Err(err(format!("cross traffic: {}", out.1.trim())));
        }
        let (a, b) = (t0 + 500_000_000, t0 + 1_500_000_000);
        let s = samples_until(&sampler, b);
        let rates: Vec<f64> = hops.iter().map(|h| h.rate_bps).collect();
        let t = truth::truth(&s, &rates, a, b).map_err(|e| err(e.to_string()))?;
        let nominal = lab.scenario.nominal_available_bps().unwrap_or(f64::NAN);
        cross_only = Some((nominal, t.available_bps));
    }
    if has_delay && one_way_delay.is_none() {
        one_way_delay = Some(delay_probes()?);
    }
    let delay_line_late = lines_before.and_then(|a| {
        fresh_line_counts(lab).map(|b| {
            let d = b.since(a);
            (d.forwarded, d.late)
        })
    });
    if let Some((frames, late)) = delay_line_late {
        if late * 10 >= frames && frames > 0 {
            warnings.push(format!(
                "the delay lines released {late} of {frames} frames toward the receiver more than 100 us after their due time while the delay was measured: this host could not run them on time (busy or stolen CPUs), and the one-way delay reads long by that lateness"
            ));
        }
    }
    let mut loss = None;
    if lab.scenario.loss > 0.0 {
        let before = sampler.last().map_or(0, |s| s.rcv_bytes);
        let out = run_child(
            {
                let mut cmd = in_ns(lab, "snd", exe);
                cmd.args([
                    "cross",
                    &rcv_sink,
                    "--traffic",
                    "cbr:50M",
                    "--duration",
                    "1s",
                ]);
                cmd
            },
            Duration::from_secs(10),
        )
        .map_err(err)?;
        if !out.2 {
            return Err(err(format!("loss train: {}", out.1.trim())));
        }
        let sent: serde_json::Value = serde_json::from_str(out.0.trim())
            .map_err(|e| err(format!("loss train report: {e}")))?;
        let sent = sent["frame_bytes"].as_f64().unwrap_or(0.0);
        let s = samples_until(&sampler, realtime_ns() + 50_000_000);
        let got = s.last().map_or(0, |s| s.rcv_bytes) - before;
        if sent > 0.0 {
            loss = Some((lab.scenario.loss, 1.0 - got as f64 / sent));
        }
    }
    sampler
        .finish()
        .map_err(|e| err(format!("counters: {e}")))?;
    drop(guard);
    Ok(CheckReport {
        scenario: lab.scenario.name.clone(),
        saturated,
        saturated_stolen_share,
        saturated_larger_bucket: larger_bucket,
        warnings,
        delay_line_late,
        cross_only,
        loss,
        one_way_delay,
    })
}
