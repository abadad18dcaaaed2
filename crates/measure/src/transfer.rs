//! A rate-controlled bulk transfer (\[BASS\] section VII): to a
//! `tightlink server` over real packets (reliable UDP, digest checked),
//! or through the simulated path with its cross traffic and a round trip
//! of `sim_rtt_ns`, where the goodput is set beside the simulator's
//! available bandwidth. The same report either way.

use crate::bad_input;
use anyhow::{bail, Result};
use serde::Serialize;
use tightlink_core::rapid::{RapidEstimator, RapidParams, RapidUpdate};
use tightlink_core::stats::median;
use tightlink_net::transfer::{self as net_transfer, TransferEvent as NetEvent};
use tightlink_sim::cc::{BbeFlow, NewReno};
use tightlink_sim::flow::{run_flow, FlowController, FlowSpec, RapidFlow};

use crate::target::{read_key, RealOptions, Target};

/// What drives a transfer: Rapid or \[TCPW\] BBE's window (on real
/// servers and the simulated path), or NewReno, BBE's reference (the
/// simulator's model; on real packets the kernel's Reno is).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Controller {
    Rapid(RapidEstimator),
    Bbe,
    NewReno,
}

impl Controller {
    pub const NAMES: &'static str = "rapid, rapid-raw, bbe or newreno";

    pub fn name(self) -> &'static str {
        match self {
            Controller::Rapid(e) => e.name(),
            Controller::Bbe => "bbe",
            Controller::NewReno => "newreno",
        }
    }
}

impl std::str::FromStr for Controller {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Controller, String> {
        Ok(match s {
            "rapid" => Controller::Rapid(RapidEstimator::Bass),
            "rapid-raw" => Controller::Rapid(RapidEstimator::Raw),
            "bbe" => Controller::Bbe,
            "newreno" => Controller::NewReno,
            other => return Err(format!("{other}: expected {}", Controller::NAMES)),
        })
    }
}

#[derive(Debug, Clone)]
pub struct TransferOptions {
    pub cc: Controller,
    /// Bytes to deliver; `None`: for `duration_ns`.
    pub bytes: Option<u64>,
    pub duration_ns: Option<i64>,
    pub interval_ns: i64,
    pub real: RealOptions,
    /// Round trip of the simulated path (its hops carry no propagation).
    pub sim_rtt_ns: i64,
    /// The simulated flow's packets, bytes on the wire
    /// ([`SIM_PACKET_BYTES`] unless set; a kernel TCP flow on a
    /// 1500-byte MTU sends 1514).
    pub sim_packet_bytes: u32,
    pub seed: u64,
}

/// The simulated flow's packet size by default: jumbo frames, as the
/// BASS paper's 10 Gbit/s flows.
pub const SIM_PACKET_BYTES: u32 = 9000;
/// The sizes a simulated flow may take.
pub const SIM_PACKET_RANGE: std::ops::RangeInclusive<u32> = 576..=9000;

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions {
            cc: Controller::Rapid(RapidEstimator::Bass),
            bytes: None,
            duration_ns: Some(10_000_000_000),
            interval_ns: 500_000_000,
            real: RealOptions::default(),
            sim_rtt_ns: 30_000_000,
            sim_packet_bytes: SIM_PACKET_BYTES,
            seed: 1,
        }
    }
}

/// One progress interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TransferInterval {
    pub start_s: f64,
    pub end_s: f64,
    pub goodput_bps: f64,
    /// The simulator's available bandwidth over the interval (`sim:`).
    pub available_bps: Option<f64>,
    /// Bytes sent again (real servers; the simulated flow counts losses
    /// only over the whole run).
    pub retransmitted_bytes: Option<u64>,
    /// The controller's rate at the interval's end.
    pub rate_bps: Option<f64>,
    pub estimate_bps: Option<f64>,
    pub rtt_ms: Option<f64>,
}

pub enum TransferEvent<'a> {
    Interval(&'a TransferInterval),
    Update(&'a RapidUpdate),
}

#[derive(Debug, Clone, Serialize)]
pub struct TransferReport {
    pub target: String,
    pub cc: &'static str,
    /// The server sent (`-R`): the counts of packets, losses, streams
    /// and RTTs are the server's, told at the end.
    pub reverse: bool,
    /// Payload bytes delivered in order.
    pub bytes: u64,
    pub duration_s: f64,
    pub goodput_bps: f64,
    /// The simulator's available bandwidth over the run (`sim:`).
    pub available_bps: Option<f64>,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub retransmitted_bytes: u64,
    pub streams: u64,
    pub rtt_min_ms: Option<f64>,
    pub rtt_median_ms: Option<f64>,
    /// Median of the exact estimates the controller read.
    pub estimate_median_bps: Option<f64>,
    pub final_rate_bps: Option<f64>,
    /// SHA-256 of the data, checked by both ends (real servers).
    pub sha256: Option<String>,
    pub intervals: Vec<TransferInterval>,
}

impl TransferReport {
    pub fn loss(&self) -> f64 {
        self.lost_packets as f64 / self.sent_packets.max(1) as f64
    }
}

fn exact_median(updates: &[RapidUpdate]) -> Option<f64> {
    let exact: Vec<f64> = updates
        .iter()
        .filter(|u| u.bound == tightlink_core::Bound::Exact)
        .filter_map(|u| u.abw_bps)
        .collect();
    median(&exact)
}

/// Runs a transfer to `target`: a server or the simulated path.
pub fn transfer(
    target: &Target,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferReport> {
    if opts.bytes.is_none() && opts.duration_ns.is_none() {
        bad_input!("a transfer needs --bytes or --time");
    }
    match target {
        Target::Sim { .. } if opts.real.reverse => bad_input!(
            "-R: the simulated path has one direction; a transfer from the far end needs a tightlink server (HOST[:PORT])"
        ),
        Target::Sim { text, spec } => {
            opts.real.check_for(target)?;
            sim_transfer(text, spec, opts, on_event)
        }
        Target::Server { .. } if opts.sim_packet_bytes != SIM_PACKET_BYTES => bad_input!(
            "--packet-bytes: the simulated flow's; a transfer to a server sends what the path's MTU carries"
        ),
        Target::Server { host } => {
            let cc = match opts.cc {
                Controller::Rapid(estimator) => net_transfer::SendCc::Rapid(estimator),
                Controller::Bbe => net_transfer::SendCc::Bbe,
                Controller::NewReno => bad_input!(
                    "--cc newreno: the simulator's model (sim:); on real packets the kernel's Reno is the reference (tightlink cross HOST:PORT --tcp 1 --tcp-congestion reno)"
                ),
            };
            real_transfer(host, cc, opts, on_event)
        }
        Target::Twamp { .. } | Target::Trace { .. } => bad_input!(
            "{target}: a transfer needs a tightlink server (HOST[:PORT]) or the simulated path (sim:)"
        ),
    }
}

fn real_transfer(
    host: &str,
    cc: net_transfer::SendCc,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferReport> {
    let net_opts = net_transfer::TransferOptions {
        key: read_key(&opts.real)?,
        cc,
        bytes: opts.bytes,
        duration: opts
            .duration_ns
            .map(|d| std::time::Duration::from_nanos(d.max(0) as u64)),
        max_rate_bps: opts.real.max_rate_bps,
        interval: std::time::Duration::from_nanos(opts.interval_ns.max(1) as u64),
        seed: opts.seed,
        reverse: opts.real.reverse,
        ..net_transfer::TransferOptions::default()
    };
    let reverse = opts.real.reverse;
    let s = net_transfer::run(host, &net_opts, &mut |e| match e {
        NetEvent::Interval(iv) => on_event(TransferEvent::Interval(&interval_of(iv, reverse))),
        NetEvent::Update(u) => on_event(TransferEvent::Update(u)),
    })
    .map_err(|e| anyhow::Error::new(e).context(host.to_string()))?;
    Ok(TransferReport {
        target: host.to_string(),
        cc: cc.name(),
        reverse,
        bytes: s.bytes,
        duration_s: s.duration_ns as f64 / 1e9,
        goodput_bps: s.goodput_bps(),
        available_bps: None,
        sent_packets: s.sent_packets,
        lost_packets: s.lost_packets,
        retransmitted_bytes: s.retransmitted_bytes,
        streams: s.streams,
        rtt_min_ms: s.rtt_min_ns.map(|r| r as f64 / 1e6),
        rtt_median_ms: s.rtt_median_ns.map(|r| r as f64 / 1e6),
        estimate_median_bps: exact_median(&s.updates),
        final_rate_bps: s.updates.last().map(|u| u.rate_bps),
        sha256: Some(net_transfer::hex(&s.digest)),
        intervals: s
            .intervals
            .iter()
            .map(|iv| interval_of(iv, reverse))
            .collect(),
    })
}

/// On `-R` the receiving client learns the server's retransmissions and
/// RTTs only at the end: its intervals have none.
fn interval_of(iv: &net_transfer::TransferInterval, reverse: bool) -> TransferInterval {
    TransferInterval {
        start_s: iv.start_ns as f64 / 1e9,
        end_s: iv.end_ns as f64 / 1e9,
        goodput_bps: iv.goodput_bps(),
        available_bps: None,
        retransmitted_bytes: (!reverse).then_some(iv.retransmitted_bytes),
        rate_bps: Some(iv.rate_bps),
        estimate_bps: iv.estimate_bps,
        rtt_ms: iv.rtt_ns.map(|r| r as f64 / 1e6),
    }
}

/// The simulated flow: Rapid, BBE or NewReno through the path's hops and
/// cross traffic.
/// With `bytes`, the run lasts until the goodput bins hold them (at most
/// four times as long as the available bandwidth would need).
fn sim_transfer(
    text: &str,
    spec: &tightlink_sim::PathSpec,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferReport> {
    if !SIM_PACKET_RANGE.contains(&opts.sim_packet_bytes) {
        crate::bad_input!(
            "packet size {} bytes: a simulated flow's packets take {}-{} bytes",
            opts.sim_packet_bytes,
            SIM_PACKET_RANGE.start(),
            SIM_PACKET_RANGE.end()
        );
    }
    let packet_bytes = opts.sim_packet_bytes;
    let link_bps = spec.hops.first().map_or(10e9, |h| h.hop.sustained_bps());
    let max_bps = opts.real.max_rate_bps.unwrap_or(link_bps).min(link_bps);
    let duration_ns = match (opts.duration_ns, opts.bytes) {
        (Some(d), _) => d as f64,
        (None, Some(b)) => {
            let avail = spec.nominal_available_bps().max(1e6);
            (b as f64 * 8e9 / avail * 4.0).max(1e9)
        }
        (None, None) => unreachable!("checked by transfer"),
    };
    let flow = FlowSpec {
        path: spec.clone(),
        rtt_ns: opts.sim_rtt_ns as f64,
        duration_ns,
        bin_ns: opts.interval_ns.max(1_000_000) as f64,
        packet_bytes,
    };
    let mut rapid = match opts.cc {
        Controller::Rapid(e) => Some(RapidFlow::new(RapidParams::paper(max_bps, packet_bytes, e))),
        _ => None,
    };
    let (mut bbe, mut reno) = (BbeFlow::new(packet_bytes), NewReno::new(packet_bytes));
    let ctl: &mut dyn FlowController = match (&mut rapid, opts.cc) {
        (Some(r), _) => r,
        (None, Controller::Bbe) => &mut bbe,
        (None, _) => &mut reno,
    };
    let r = run_flow(&flow, ctl);
    let no_updates = Vec::new();
    let updates = rapid.as_ref().map_or(&no_updates, |c| &c.updates);
    let rate_now = || rapid.as_ref().map(|c| c.controller.rate_bps());
    let bin_s = flow.bin_ns / 1e9;
    let mut intervals = Vec::new();
    let mut delivered = 0.0;
    let mut end_s = duration_ns / 1e9;
    for (i, (&g, &a)) in r.bins_bps.iter().zip(&r.available_bins_bps).enumerate() {
        let start_s = i as f64 * bin_s;
        let bin_bytes = g * bin_s / 8.0;
        let at = ((i + 1) as f64 * bin_s * 1e9) as i64;
        let u_before: Vec<&RapidUpdate> = updates.iter().filter(|u| u.at_ns <= at).collect();
        let iv = TransferInterval {
            start_s,
            end_s: start_s + bin_s,
            goodput_bps: g,
            available_bps: Some(a),
            retransmitted_bytes: None,
            rate_bps: u_before.last().map(|u| u.rate_bps).or_else(rate_now),
            estimate_bps: u_before.iter().rev().find_map(|u| u.abw_bps),
            rtt_ms: None,
        };
        on_event(TransferEvent::Interval(&iv));
        intervals.push(iv);
        if let Some(b) = opts.bytes {
            if delivered + bin_bytes >= b as f64 {
                end_s = start_s + (b as f64 - delivered) / bin_bytes.max(1.0) * bin_s;
                delivered = b as f64;
                break;
            }
        }
        delivered += bin_bytes;
    }
    if let Some(b) = opts.bytes {
        if delivered < b as f64 {
            bail!(
                "{text}: the simulated flow delivered {:.0} of {b} bytes in {:.1} s (four times what the available bandwidth needs)",
                delivered,
                duration_ns / 1e9
            );
        }
    }
    for u in updates {
        on_event(TransferEvent::Update(u));
    }
    let available: Vec<f64> = intervals.iter().filter_map(|i| i.available_bps).collect();
    let available = median(&available);
    Ok(TransferReport {
        target: text.to_string(),
        cc: opts.cc.name(),
        reverse: false,
        bytes: delivered as u64,
        duration_s: end_s,
        goodput_bps: delivered * 8.0 / end_s.max(1e-9),
        available_bps: available,
        sent_packets: r.sent_packets,
        lost_packets: r.lost_packets,
        retransmitted_bytes: r.reported_losses * u64::from(packet_bytes),
        streams: updates.len() as u64,
        rtt_min_ms: Some(opts.sim_rtt_ns as f64 / 1e6),
        rtt_median_ms: Some((opts.sim_rtt_ns as f64 + r.queue_delay_median_ns) / 1e6),
        estimate_median_bps: exact_median(updates),
        final_rate_bps: rate_now(),
        sha256: None,
        intervals,
    })
}
