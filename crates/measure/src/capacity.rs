//! The narrow link's capacity of a target: each method on a channel of its
//! own (so each pays for its own probes), side by side.

use std::cell::RefCell;
use std::path::PathBuf;
use tightlink_core::warning::{Warning, WarningCode};

use anyhow::Result;
use serde::Serialize;
use tightlink_core::channel::{Channel, Recorder};
use tightlink_net::ledger::STOLEN_SHARE_WARNING;
use tightlink_probe::capacity::{CapacityMethod, CapacityParams, CapacityReport};

use crate::report::Event;
use crate::save;
use crate::target::{open_channel, RealOptions, Target};

/// The default target: a 10 Gbit/s narrow link behind a 40 Gbit/s first
/// hop with 30 % bursty cross traffic, no receiver coalescence (with it,
/// pair methods fail).
pub const DEFAULT_TARGET: &str = "sim:hops=40G+10G,cross=none+bursty:3G,coalescence=off";

#[derive(Debug, Clone)]
pub struct CapacityOptions {
    /// Methods, run in this order.
    pub methods: Vec<CapacityMethod>,
    pub real: RealOptions,
    /// Write every stream of every method as one probe trace, the
    /// methods' streams one after the other (metadata says how many).
    pub save_trace: Option<PathBuf>,
}

impl Default for CapacityOptions {
    fn default() -> Self {
        CapacityOptions {
            methods: CapacityMethod::ALL.to_vec(),
            real: RealOptions::default(),
            save_trace: None,
        }
    }
}

/// One method's answer on one target. Serialises to the JSON line
/// `tightlink capacity --json` prints per method.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityResult {
    pub target: String,
    pub report: CapacityReport,
    /// The layer at which sizes and rates are counted.
    pub rate_layer: &'static str,
    /// Real targets: the share of this host's CPU time the hypervisor
    /// took while the method ran (steal).
    pub host_stolen_share: Option<f64>,
}

/// The simulator counts its packets as they are.
const SIM_RATE_LAYER: &str = "simulated packet";

/// Runs every method of `options` against `target`.
pub fn capacity(
    target: &Target,
    options: &CapacityOptions,
    on_event: &mut dyn FnMut(Event),
) -> Result<Vec<CapacityResult>> {
    let events = RefCell::new(on_event);
    let mut results = Vec::new();
    let mut streams = Vec::new();
    let mut per_method = Vec::new();
    for m in &options.methods {
        let mut ch = Recorder::observed(open_channel(target, &options.real)?, |p| {
            (events.borrow_mut())(Event::Stream {
                stream: &p.stream,
                truth: p.truth,
            })
        });
        let mut params = CapacityParams::default();
        if let Some(s) = ch.info().probe_size_bytes {
            params.size_bytes = s;
        }
        let rate_layer = ch
            .side_report()
            .host
            .map_or(SIM_RATE_LAYER, |h| h.rate_layer);
        let mut report = m.run(&mut ch, params)?;
        ch.close()?;
        let host_stolen_share = ch.side_report().host.and_then(|h| h.stolen_share);
        if let Some(share) = host_stolen_share.filter(|&x| x >= STOLEN_SHARE_WARNING) {
            report.warnings.push(Warning::new(WarningCode::CpuStolen, format!(
                "the hypervisor took {:.0} % of this host's CPU time while it measured (steal time in /proc/stat): a stalled vCPU sends a pair's packets apart and stamps arrivals late, and a shaper on this host releases the tokens it missed together, so dispersions may read either way",
                share * 100.0
            )));
        }
        per_method.push(ch.streams.len().to_string());
        streams.append(&mut ch.streams);
        results.push(CapacityResult {
            target: target.to_string(),
            report,
            rate_layer,
            host_stolen_share,
        });
    }
    if let Some(path) = &options.save_trace {
        for (i, s) in streams.iter_mut().enumerate() {
            s.id = i as u64;
        }
        let names: Vec<&str> = options.methods.iter().map(|m| m.name()).collect();
        let meta = vec![
            ("tool".to_string(), "tightlink capacity".to_string()),
            ("target".to_string(), target.to_string()),
            ("methods".to_string(), names.join(",")),
            ("streams_per_method".to_string(), per_method.join(",")),
        ];
        save::write_trace(path, meta, &streams)?;
    }
    Ok(results)
}

/// The `--json` line, field for field.
#[derive(Serialize)]
struct Json<'a> {
    target: &'a str,
    method: &'a str,
    capacity_bps: Option<f64>,
    bound: &'a str,
    low_bps: f64,
    high_bps: f64,
    confidence: f64,
    pairs_sent: usize,
    pairs_used: usize,
    trains: usize,
    adr_bps: Option<f64>,
    shaper_rate_bps: Option<f64>,
    shaper_bucket_bytes: Option<f64>,
    probe_bytes: u64,
    probe_packets: u64,
    streams: usize,
    duration_s: f64,
    truth_bps: Option<f64>,
    stop: &'a str,
    rate_layer: &'a str,
    warnings: Vec<&'a str>,
    warning_codes: Vec<&'static str>,
    host_stolen_share: Option<f64>,
}

impl Serialize for CapacityResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = &self.report;
        Json {
            target: &self.target,
            method: r.method.name(),
            capacity_bps: r.capacity_bps,
            bound: r.bound.as_str(),
            low_bps: r.low_bps,
            high_bps: r.high_bps,
            confidence: r.confidence,
            pairs_sent: r.pairs_sent,
            pairs_used: r.pairs_used,
            trains: r.trains,
            adr_bps: r.adr_bps,
            shaper_rate_bps: r.shaper.map(|s| s.rate_bps),
            shaper_bucket_bytes: r.shaper.map(|s| s.bucket_bytes),
            probe_bytes: r.cost.probe_bytes,
            probe_packets: r.cost.probe_packets,
            streams: r.cost.streams,
            duration_s: r.cost.duration_s,
            truth_bps: r.truth_bps,
            stop: r.stop.as_str(),
            rate_layer: self.rate_layer,
            warnings: r.warnings.iter().map(|w| w.text.as_str()).collect(),
            warning_codes: r.warnings.iter().map(|w| w.code.name()).collect(),
            host_stolen_share: self.host_stolen_share,
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both methods on the default target, in the order asked, each within
    /// 2 % of the simulator's 10 Gbit/s narrow link; one Stream event per
    /// stream they sent.
    #[test]
    fn every_method_answers_in_order() {
        let mut events = 0;
        let options = CapacityOptions {
            methods: vec![CapacityMethod::Capprobe, CapacityMethod::Pathrate],
            ..CapacityOptions::default()
        };
        let target = Target::parse(DEFAULT_TARGET).unwrap();
        let r = capacity(&target, &options, &mut |e| {
            if let Event::Stream { .. } = e {
                events += 1
            }
        })
        .unwrap();
        let methods: Vec<_> = r.iter().map(|x| x.report.method).collect();
        assert_eq!(methods, options.methods);
        for x in &r {
            let c = x.report.capacity_bps.unwrap();
            assert!((c / 10e9 - 1.0).abs() < 0.02, "{x:?}");
            assert_eq!(x.report.truth_bps, Some(10e9));
        }
        assert_eq!(
            events,
            r.iter().map(|x| x.report.cost.streams).sum::<usize>()
        );
    }
}
