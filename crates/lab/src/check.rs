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
    let c = Checking {
        lab,
        exe,
        rcv_sink: format!("{RCV_IP}:{SINK_PORT}"),
        xr_sink: format!("{XR_IP}:{SINK_PORT}"),
    };
    c.start_sinks(&mut guard)?;
    std::thread::sleep(Duration::from_millis(200));
    let sampler = Sampler::start(lab, period).map_err(|e| err(format!("counters: {e}")))?;
    let floods = c.flood_hops(&sampler)?;
    let mut warnings = c.bucket_warnings(&floods);
    let has_delay = lab.scenario.hops.iter().any(|h| h.delay_ns > 0);
    let lines_before = fresh_line_counts(lab);
    let (cross_only, mut one_way_delay) = c.cross_alone(&sampler, has_delay)?;
    if has_delay && one_way_delay.is_none() {
        one_way_delay = Some(c.delay_probes()?);
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
    let loss = c.loss_train(&sampler)?;
    sampler
        .finish()
        .map_err(|e| err(format!("counters: {e}")))?;
    drop(guard);
    Ok(CheckReport {
        scenario: lab.scenario.name.clone(),
        saturated: floods.saturated,
        saturated_stolen_share: floods.stolen_share,
        saturated_larger_bucket: floods.larger_bucket,
        warnings,
        delay_line_late,
        cross_only,
        loss,
        one_way_delay,
    })
}

fn err(e: String) -> LabError {
    LabError::Command(e)
}

/// One check under way: the lab, the binary and the sinks' addresses.
struct Checking<'a> {
    lab: &'a Lab,
    exe: &'a PathBuf,
    rcv_sink: String,
    xr_sink: String,
}

/// What flooding each hop found, per hop.
struct Floods {
    /// (configured bit/s, measured bit/s when saturated).
    saturated: Vec<(f64, Option<f64>)>,
    stolen_share: Vec<Option<f64>>,
    /// (bucket bytes, bit/s) where the flood was sent again with a larger bucket.
    larger_bucket: Vec<Option<(u64, f64)>>,
}

impl Checking<'_> {
    /// Sinks on the receiver and (if any) the cross sink.
    fn start_sinks(&self, guard: &mut Guard) -> Result<(), LabError> {
        let mut sinks = vec![("rcv", &self.rcv_sink)];
        if self.lab.scenario.cross.is_some() {
            sinks.push(("xr", &self.xr_sink));
        }
        for (role, at) in sinks {
            guard.children.push(
                in_ns(self.lab, role, self.exe)
                    .args(["cross", "--sink", at, "--duration", "60s"])
                    .stdout(Stdio::null())
                    .spawn()
                    .map_err(|e| err(format!("sink: {e}")))?,
            );
        }
        Ok(())
    }

    /// Floods 25 % above the first hop's rate from the sender, and above
    /// the entry hop's from the cross sender, for 1.5 s; measures
    /// 0.5-1.3 s. A tbf that falls short is flooded again with a larger
    /// bucket.
    fn flood_hops(&self, sampler: &Sampler) -> Result<Floods, LabError> {
        let (lab, hops) = (self.lab, &self.lab.scenario.hops);
        let mut f = Floods {
            saturated: hops.iter().map(|h| (h.rate_bps, None)).collect(),
            stolen_share: vec![None; hops.len()],
            larger_bucket: vec![None; hops.len()],
        };
        let mut floods = vec![(0usize, "snd", &self.rcv_sink)];
        if let Some(c) = &lab.scenario.cross {
            if c.entry_hop != 0 {
                floods.push((c.entry_hop, "xs", &self.xr_sink));
            }
        }
        for (k, role, to) in floods {
            (f.saturated[k].1, f.stolen_share[k]) = self.flood(sampler, k, role, to)?;
            let short = f.saturated[k]
                .1
                .is_some_and(|got| got < 0.99 * hops[k].rate_bps);
            if short && hops[k].qdisc == Qdisc::Tbf {
                let bucket = hops[k].burst_bytes * LARGER_BUCKET;
                lab.set_tbf_bucket(k, bucket)?;
                let with_larger = self.flood(sampler, k, role, to);
                lab.set_tbf_bucket(k, hops[k].burst_bytes)?;
                f.larger_bucket[k] = with_larger?.0.map(|bps| (bucket, bps));
            }
        }
        Ok(f)
    }

    /// One flood of hop `k` from `role` to `to`: the rate the hop sent
    /// and the share of CPU time stolen meanwhile.
    fn flood(
        &self,
        sampler: &Sampler,
        k: usize,
        role: &str,
        to: &str,
    ) -> Result<(Option<f64>, Option<f64>), LabError> {
        let rate = format!(
            "cbr:{}",
            (self.lab.scenario.hops[k].rate_bps * 1.25).round()
        );
        let t0 = realtime_ns();
        let mut c = in_ns(self.lab, role, self.exe);
        c.args(["cross", to, "--traffic", &rate, "--duration", "1500ms"]);
        let out = run_child(c, Duration::from_secs(10)).map_err(err)?;
        if !out.2 {
            return Err(err(format!("flood from {role}: {}", out.1.trim())));
        }
        let s = samples_until(sampler, t0 + 1_300_000_000);
        let (a, b) = (t0 + 500_000_000, t0 + 1_300_000_000);
        std::thread::sleep(Duration::from_millis(100));
        Ok((
            truth::hop_send_rate(&s, k, a, b),
            truth::stolen_share(&s, a, b),
        ))
    }

    /// A hop that sends its rate only with the larger bucket: the host
    /// loses the small bucket's tokens.
    fn bucket_warnings(&self, f: &Floods) -> Vec<String> {
        let hops = &self.lab.scenario.hops;
        let mut warnings = Vec::new();
        for (k, (&(rate, got), larger)) in f.saturated.iter().zip(&f.larger_bucket).enumerate() {
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
        warnings
    }

    fn delay_probes(&self) -> Result<OneWayDelay, LabError> {
        delay::measure_one_way(self.lab, 1000, Duration::from_millis(1))
            .map_err(|e| err(format!("one-way delay probes: {e}")))
    }

    /// The scenario's cross traffic alone for 2 s (another tool's sink
    /// beside ours, one port up), the one-way delay measured beside it
    /// where a hop delays: (rate less the configured cross, the truth
    /// over 0.5-1.5 s) and the delay.
    #[allow(clippy::type_complexity)]
    fn cross_alone(
        &self,
        sampler: &Sampler,
        has_delay: bool,
    ) -> Result<(Option<(f64, f64)>, Option<OneWayDelay>), LabError> {
        let (lab, exe) = (self.lab, self.exe);
        let Some(c) = &lab.scenario.cross else {
            return Ok((None, None));
        };
        let t0 = realtime_ns();
        let (out, probes) = std::thread::scope(|s| {
            let probes = has_delay.then(|| s.spawn(|| self.delay_probes()));
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
        let one_way_delay = probes.transpose()?;
        if !out.2 {
            return Err(err(format!("cross traffic: {}", out.1.trim())));
        }
        let (a, b) = (t0 + 500_000_000, t0 + 1_500_000_000);
        let s = samples_until(sampler, b);
        let rates: Vec<f64> = lab.scenario.hops.iter().map(|h| h.rate_bps).collect();
        let t = truth::truth(&s, &rates, a, b).map_err(|e| err(e.to_string()))?;
        let nominal = lab.scenario.nominal_available_bps().unwrap_or(f64::NAN);
        Ok((Some((nominal, t.available_bps)), one_way_delay))
    }

    /// With random loss configured: a 1 s CBR train at 50 Mbit/s from the
    /// sender, (configured share, share that did not reach the receiver).
    fn loss_train(&self, sampler: &Sampler) -> Result<Option<(f64, f64)>, LabError> {
        let lab = self.lab;
        if lab.scenario.loss <= 0.0 {
            return Ok(None);
        }
        let before = sampler.last().map_or(0, |s| s.rcv_bytes);
        let mut cmd = in_ns(lab, "snd", self.exe);
        let train = [
            "cross",
            &self.rcv_sink,
            "--traffic",
            "cbr:50M",
            "--duration",
            "1s",
        ];
        cmd.args(train);
        let out = run_child(cmd, Duration::from_secs(10)).map_err(err)?;
        if !out.2 {
            return Err(err(format!("loss train: {}", out.1.trim())));
        }
        let sent: serde_json::Value = serde_json::from_str(out.0.trim())
            .map_err(|e| err(format!("loss train report: {e}")))?;
        let sent = sent["frame_bytes"].as_f64().unwrap_or(0.0);
        let s = samples_until(sampler, realtime_ns() + 50_000_000);
        let got = s.last().map_or(0, |s| s.rcv_bytes) - before;
        Ok((sent > 0.0).then(|| (lab.scenario.loss, 1.0 - got as f64 / sent)))
    }
}
