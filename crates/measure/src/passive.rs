//! Passive estimators on one TCP flow of a pcap/pcapng capture taken at
//! its sender (\[TCPW\] sections 3-4): RTTs, losses and their classes
//! (congestion or random), Westwood BE/RE/ERE, the bottleneck buffer and
//! TCPProbe's capacity from ACK pairs. Serialises to the JSON
//! `tightlink analyze-tcp --format json` prints.

use crate::bad_input;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;
use tightlink_capture::{find_flow, flows, read_capture, segments};
use tightlink_core::tcp::{analyze_flow, BbeParams, FlowReport, LossClass, WestwoodParams};

/// Which flow and what is known beside the capture.
#[derive(Debug, Clone, PartialEq)]
pub struct TcpOptions {
    /// `SENDER_IP:PORT-RECEIVER_IP:PORT` (either order) or its rank by
    /// data bytes (1 = most); `None`: the flow with most data.
    pub flow: Option<String>,
    /// The bottleneck capacity for the buffer estimate, when known better
    /// than the flow's own TCPProbe figure.
    pub capacity_bps: Option<f64>,
    /// Level of congestion `c` from which a loss counts as congestion.
    pub congested_level: f64,
}

impl Default for TcpOptions {
    fn default() -> Self {
        TcpOptions {
            flow: None,
            capacity_bps: None,
            congested_level: BbeParams::default().congested_level,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpLoss {
    pub t_s: f64,
    /// TCP sequence number of the first segment resent.
    pub seq: u32,
    pub segments: usize,
    pub rtt_before_ms: Option<f64>,
    pub rtt_cong_ms: Option<f64>,
    pub level: f64,
    pub class: &'static str,
    /// Its RTT came after a pause of the path (the ACKs stopped and the
    /// RTT jumped by about as long): judged, but not taken into RTTcong.
    pub after_pause: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpPoint {
    pub t_s: f64,
    pub rtt_ms: Option<f64>,
    pub be_bps: f64,
    pub re_bps: f64,
    pub ere_bps: f64,
    pub level: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TcpAnalysis {
    pub capture: String,
    pub flow: String,
    pub data_bytes: u64,
    pub duration_s: f64,
    pub throughput_bps: f64,
    pub rtt_samples: usize,
    pub rtt_min_ms: Option<f64>,
    pub rtt_median_ms: Option<f64>,
    pub rtt_max_ms: Option<f64>,
    pub rtt_cong_ms: Option<f64>,
    pub loss_events: usize,
    /// Retransmission events wholly D-SACKed (tail-loss probes, spurious
    /// timeouts): not losses.
    pub spurious_events: usize,
    pub retransmitted_segments: usize,
    pub congestion_losses: usize,
    pub random_losses: usize,
    pub capacity_bps: Option<f64>,
    pub capacity_source: &'static str,
    /// ACK pairs offered (nothing resent under them).
    pub ack_pairs_seen: usize,
    /// CapProbe over the back-to-back pairs of the most common size.
    pub back_to_back_pairs: usize,
    pub back_to_back_bps: Option<f64>,
    pub back_to_back_converged: bool,
    /// The median (and quartiles) of the queued pairs of that size.
    pub queued_pairs: usize,
    pub queued_bps: Option<f64>,
    pub queued_p25_bps: Option<f64>,
    pub queued_p75_bps: Option<f64>,
    pub buffer_bytes: Option<f64>,
    pub buffer_delay_ms: Option<f64>,
    pub be_median_bps: Option<f64>,
    pub re_median_bps: Option<f64>,
    pub ere_median_bps: Option<f64>,
    pub filter_tau_ms: f64,
    pub losses: Vec<TcpLoss>,
    pub series: Vec<TcpPoint>,
    /// Every RTT sample and those right before losses, ms (for plots).
    #[serde(skip)]
    pub rtt_ms: Vec<f64>,
    #[serde(skip)]
    pub rtt_before_loss_ms: Vec<f64>,
    /// Packets in the capture and TCP flows found there.
    #[serde(skip)]
    pub capture_packets: u64,
    #[serde(skip)]
    pub capture_flows: usize,
}

/// Analyses one flow of the capture at `path`.
pub fn analyze_tcp(path: &Path, options: &TcpOptions) -> Result<TcpAnalysis> {
    if !(0.0..=1.0).contains(&options.congested_level) {
        bad_input!(
            "--congested-level {}: must be within 0..1",
            options.congested_level
        );
    }
    let cap = read_capture(path)?;
    let all = flows(&cap);
    if all.is_empty() {
        bad_input!(
            "{}: no TCP flow in {} packets ({} not TCP)",
            path.display(),
            cap.packets,
            cap.non_tcp
        );
    }
    let flow = match &options.flow {
        Some(sel) => find_flow(&all, sel).with_context(|| {
            format!(
                "--flow {sel}: no such flow; the capture has {}",
                all.iter()
                    .take(10)
                    .enumerate()
                    .map(|(i, f)| format!("{} {} ({} bytes)", i + 1, f.name(), f.data_bytes))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })?,
        None => &all[0],
    };
    if flow.data_bytes == 0 {
        bad_input!("{}: flow {} carries no data", path.display(), flow.name());
    }
    let segs = segments(&cap, flow);
    let bp = BbeParams {
        congested_level: options.congested_level,
        ..BbeParams::default()
    };
    let r = analyze_flow(&segs, WestwoodParams::default(), bp);
    let (capacity, source) = match (options.capacity_bps, &r.tcpprobe) {
        (Some(c), _) => (Some(c), "--capacity"),
        (None, Some(t)) => match t.capacity() {
            Some((c, how)) => (Some(c), how),
            None => (None, "none"),
        },
        (None, None) => (None, "none"),
    };
    let mut a = report(path, flow.name(), &r, capacity, source);
    a.capture_packets = cap.packets;
    a.capture_flows = all.len();
    Ok(a)
}

fn median(v: Vec<f64>) -> Option<f64> {
    tightlink_core::stats::median(&v)
}

fn report(
    path: &Path,
    name: String,
    r: &FlowReport,
    capacity: Option<f64>,
    source: &'static str,
) -> TcpAnalysis {
    let f = &r.flow;
    let t0 = f.first_ns;
    let secs = |t: i64| (t as i128 - t0 as i128) as f64 / 1e9;
    let ms = |v: f64| v / 1e6;
    let rtts: Vec<f64> = f.rtt.iter().map(|s| s.rtt_ns).collect();
    let duration = secs(f.last_ns).max(1e-9);
    let (cong, _) = r.bbe.count(LossClass::Congestion);
    let (random, _) = r.bbe.count(LossClass::Random);
    let b2b = r.tcpprobe.and_then(|t| t.back_to_back);
    let queued = r.tcpprobe.and_then(|t| t.queued);
    TcpAnalysis {
        capture: path.display().to_string(),
        flow: name,
        data_bytes: f.data_bytes,
        duration_s: duration,
        throughput_bps: f.acks.last().map_or(0.0, |x| x.ack as f64 * 8.0 / duration),
        rtt_samples: rtts.len(),
        rtt_min_ms: rtts.iter().copied().reduce(f64::min).map(ms),
        rtt_median_ms: median(rtts.clone()).map(ms),
        rtt_max_ms: rtts.iter().copied().reduce(f64::max).map(ms),
        rtt_cong_ms: r.bbe.rtt_cong_ns.map(ms),
        loss_events: f.losses.len(),
        spurious_events: f.spurious.len(),
        retransmitted_segments: f.retransmitted_segments,
        congestion_losses: cong,
        random_losses: random,
        capacity_bps: capacity,
        capacity_source: source,
        ack_pairs_seen: r.tcpprobe.map_or(0, |t| t.pairs_seen),
        back_to_back_pairs: b2b.map_or(0, |c| c.samples),
        back_to_back_bps: b2b.map(|c| c.capacity_bps),
        back_to_back_converged: b2b.is_some_and(|c| c.converged),
        queued_pairs: queued.map_or(0, |q| q.pairs),
        queued_bps: queued.map(|q| q.capacity_bps),
        queued_p25_bps: queued.map(|q| q.p25_bps),
        queued_p75_bps: queued.map(|q| q.p75_bps),
        buffer_bytes: capacity.and_then(|c| r.bbe.buffer_bytes(c)),
        buffer_delay_ms: r.bbe.buffer_delay_ns().map(ms),
        be_median_bps: median(r.timeline.iter().map(|p| p.be_bps).collect()),
        re_median_bps: median(r.timeline.iter().map(|p| p.re_bps).collect()),
        ere_median_bps: median(r.timeline.iter().map(|p| p.ere_bps).collect()),
        filter_tau_ms: ms(r.tau_ns),
        losses: r
            .bbe
            .verdicts
            .iter()
            .map(|v| TcpLoss {
                t_s: secs(v.t_ns),
                seq: v.seq,
                segments: v.segments,
                rtt_before_ms: v.rtt_before_ns.map(ms),
                rtt_cong_ms: v.rtt_cong_ns.map(ms),
                level: v.level,
                class: v.class.as_str(),
                after_pause: v.after_pause,
            })
            .collect(),
        series: r
            .timeline
            .iter()
            .map(|p| TcpPoint {
                t_s: secs(p.t_ns),
                rtt_ms: p.rtt_ns.map(ms),
                be_bps: p.be_bps,
                re_bps: p.re_bps,
                ere_bps: p.ere_bps,
                level: p.level,
            })
            .collect(),
        rtt_ms: f.rtt.iter().map(|s| s.rtt_ns / 1e6).collect(),
        rtt_before_loss_ms: f
            .losses
            .iter()
            .filter_map(|l| l.rtt_before_ns.map(|v| v / 1e6))
            .collect(),
        capture_packets: 0,
        capture_flows: 0,
    }
}
