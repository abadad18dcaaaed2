//! `tightlink analyze-tcp CAPTURE`: the passive estimators of the TCPW-BBE
//! paper (sections 3-4) on one TCP flow of a pcap/pcapng capture taken at
//! its sender: summary, time series (`--format csv|json`).

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use serde::Serialize;
use std::path::PathBuf;
use tightlink_capture::{find_flow, flows, read_capture, segments};
use tightlink_core::tcp::{analyze_flow, BbeParams, FlowReport, LossClass, WestwoodParams};

#[derive(Args)]
pub struct AnalyzeTcpArgs {
    /// A pcap or pcapng capture taken at the sender.
    pub capture: PathBuf,
    /// Which connection: `SENDER_IP:PORT-RECEIVER_IP:PORT` (either order)
    /// or its rank by data bytes (1 = most); default the one with most
    /// data.
    #[arg(long)]
    pub flow: Option<String>,
    /// Summary (default), or the time series per ACK as CSV, or
    /// everything as one JSON object.
    #[arg(long, value_enum, default_value = "summary")]
    pub format: Format,
    /// The bottleneck capacity for the buffer estimate (e.g. 200M), when
    /// known better than the flow's own TCPProbe figure.
    #[arg(long)]
    pub capacity: Option<String>,
    /// Also draw the paper's figures into this PNG: RTT histograms overall
    /// and right before losses; BE, RE and ERE over time.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Level of congestion `c` from which a loss counts as congestion.
    #[arg(long, default_value_t = BbeParams::default().congested_level)]
    pub congested_level: f64,
}

#[derive(Clone, Copy, ValueEnum, PartialEq)]
pub enum Format {
    Summary,
    Csv,
    Json,
}

#[derive(Serialize)]
struct JsonLoss {
    t_s: f64,
    /// TCP sequence number of the first segment resent.
    seq: u32,
    segments: usize,
    rtt_before_ms: Option<f64>,
    rtt_cong_ms: Option<f64>,
    level: f64,
    class: &'static str,
}

#[derive(Serialize)]
struct JsonPoint {
    t_s: f64,
    rtt_ms: Option<f64>,
    be_bps: f64,
    re_bps: f64,
    ere_bps: f64,
    level: Option<f64>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    capture: String,
    flow: String,
    data_bytes: u64,
    duration_s: f64,
    throughput_bps: f64,
    rtt_samples: usize,
    rtt_min_ms: Option<f64>,
    rtt_median_ms: Option<f64>,
    rtt_max_ms: Option<f64>,
    rtt_cong_ms: Option<f64>,
    loss_events: usize,
    /// Retransmission events wholly D-SACKed (tail-loss probes, spurious
    /// timeouts): not losses.
    spurious_events: usize,
    retransmitted_segments: usize,
    congestion_losses: usize,
    random_losses: usize,
    capacity_bps: Option<f64>,
    capacity_source: &'a str,
    /// ACK pairs offered (nothing resent under them).
    ack_pairs_seen: usize,
    /// CapProbe over the back-to-back pairs of the most common size.
    back_to_back_pairs: usize,
    back_to_back_bps: Option<f64>,
    back_to_back_converged: bool,
    /// The median (and quartiles) of the queued pairs of that size.
    queued_pairs: usize,
    queued_bps: Option<f64>,
    queued_p25_bps: Option<f64>,
    queued_p75_bps: Option<f64>,
    buffer_bytes: Option<f64>,
    buffer_delay_ms: Option<f64>,
    be_median_bps: Option<f64>,
    re_median_bps: Option<f64>,
    ere_median_bps: Option<f64>,
    filter_tau_ms: f64,
    losses: Vec<JsonLoss>,
    series: Vec<JsonPoint>,
}

fn median(v: Vec<f64>) -> Option<f64> {
    tightlink_core::stats::median(&v)
}

fn rate(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.3} Gbit/s", v / 1e9)
    } else {
        format!("{:.1} Mbit/s", v / 1e6)
    }
}

pub fn run(a: AnalyzeTcpArgs) -> Result<()> {
    if !(0.0..=1.0).contains(&a.congested_level) {
        bail!(
            "--congested-level {}: must be within 0..1",
            a.congested_level
        );
    }
    let capacity_flag = a
        .capacity
        .as_deref()
        .map(|s| {
            tightlink_core::units::parse_rate(s).map_err(|e| anyhow::anyhow!("--capacity {s}: {e}"))
        })
        .transpose()?;
    let cap = read_capture(&a.capture)?;
    let all = flows(&cap);
    if all.is_empty() {
        bail!(
            "{}: no TCP flow in {} packets ({} not TCP)",
            a.capture.display(),
            cap.packets,
            cap.non_tcp
        );
    }
    let flow = match &a.flow {
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
        bail!(
            "{}: flow {} carries no data",
            a.capture.display(),
            flow.name()
        );
    }
    let segs = segments(&cap, flow);
    let bp = BbeParams {
        congested_level: a.congested_level,
        ..BbeParams::default()
    };
    let r = analyze_flow(&segs, WestwoodParams::default(), bp);
    let (capacity, source) = match (capacity_flag, &r.tcpprobe) {
        (Some(c), _) => (Some(c), "--capacity"),
        (None, Some(t)) => match t.capacity() {
            Some((c, how)) => (Some(c), how),
            None => (None, "none"),
        },
        (None, None) => (None, "none"),
    };
    let j = json_report(&a, flow.name(), &r, capacity, source);
    if let Some(file) = &a.plot {
        let rtt_ms: Vec<f64> = r.flow.rtt.iter().map(|s| s.rtt_ns / 1e6).collect();
        let before: Vec<f64> = r
            .flow
            .losses
            .iter()
            .filter_map(|l| l.rtt_before_ns.map(|v| v / 1e6))
            .collect();
        let rates: Vec<(f64, f64, f64, f64)> = j
            .series
            .iter()
            .map(|p| (p.t_s, p.be_bps, p.re_bps, p.ere_bps))
            .collect();
        let title = j.flow.clone();
        tightlink_plot::draw_tcp_flow(
            file,
            &tightlink_plot::TcpFlowPlot {
                title: &title,
                rtt_ms: &rtt_ms,
                rtt_before_loss_ms: &before,
                rates: &rates,
                capacity_bps: capacity,
            },
        )
        .map_err(|e| anyhow::anyhow!("--plot {}: {e}", file.display()))?;
    }
    match a.format {
        Format::Json => println!("{}", serde_json::to_string(&j)?),
        Format::Csv => {
            println!("t_s,rtt_ms,be_bps,re_bps,ere_bps,level");
            let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.6}"));
            for p in &j.series {
                println!(
                    "{:.6},{},{:.0},{:.0},{:.0},{}",
                    p.t_s,
                    opt(p.rtt_ms),
                    p.be_bps,
                    p.re_bps,
                    p.ere_bps,
                    opt(p.level)
                );
            }
        }
        Format::Summary => print_summary(&j, cap.packets, all.len()),
    }
    Ok(())
}

fn json_report<'a>(
    a: &AnalyzeTcpArgs,
    name: String,
    r: &FlowReport,
    capacity: Option<f64>,
    source: &'a str,
) -> JsonReport<'a> {
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
    JsonReport {
        capture: a.capture.display().to_string(),
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
            .map(|v| JsonLoss {
                t_s: secs(v.t_ns),
                seq: v.seq,
                segments: v.segments,
                rtt_before_ms: v.rtt_before_ns.map(ms),
                rtt_cong_ms: v.rtt_cong_ns.map(ms),
                level: v.level,
                class: v.class.as_str(),
            })
            .collect(),
        series: r
            .timeline
            .iter()
            .map(|p| JsonPoint {
                t_s: secs(p.t_ns),
                rtt_ms: p.rtt_ns.map(ms),
                be_bps: p.be_bps,
                re_bps: p.re_bps,
                ere_bps: p.ere_bps,
                level: p.level,
            })
            .collect(),
    }
}

fn print_summary(j: &JsonReport, packets: u64, n_flows: usize) {
    let opt_ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.3} ms"));
    println!(
        "capture     {}: {packets} packets, {n_flows} TCP flows",
        j.capture
    );
    println!(
        "flow        {}: {:.2} MB in {:.3} s ({})",
        j.flow,
        j.data_bytes as f64 / 1e6,
        j.duration_s,
        rate(j.throughput_bps)
    );
    println!(
        "rtt         min {}, median {}, max {} ({} samples)",
        opt_ms(j.rtt_min_ms),
        opt_ms(j.rtt_median_ms),
        opt_ms(j.rtt_max_ms),
        j.rtt_samples
    );
    println!(
        "losses      {} events ({} segments resent, {} spurious events): {} congestion, {} random; RTTcong {}",
        j.loss_events,
        j.retransmitted_segments,
        j.spurious_events,
        j.congestion_losses,
        j.random_losses,
        opt_ms(j.rtt_cong_ms)
    );
    match j.capacity_bps {
        Some(c) => println!("capacity    {} (from {})", rate(c), j.capacity_source),
        None => println!("capacity    none (no ACK pairs; give --capacity)"),
    }
    println!(
        "ack pairs   {} seen; queued: {}; back to back: {}",
        j.ack_pairs_seen,
        match (j.queued_bps, j.queued_p25_bps, j.queued_p75_bps) {
            (Some(m), Some(lo), Some(hi)) => format!(
                "median {} of {} (quartiles {} - {})",
                rate(m),
                j.queued_pairs,
                rate(lo),
                rate(hi)
            ),
            _ => "none".into(),
        },
        match j.back_to_back_bps {
            Some(c) => format!(
                "{} by CapProbe over {} ({})",
                rate(c),
                j.back_to_back_pairs,
                if j.back_to_back_converged {
                    "converged"
                } else {
                    "not converged"
                }
            ),
            None => "none".into(),
        }
    );
    match (j.buffer_bytes, j.buffer_delay_ms) {
        (Some(b), Some(d)) => println!(
            "buffer      {:.1} KB ({d:.3} ms of queue before congestion losses at the capacity)",
            b / 1e3
        ),
        _ => println!("buffer      unknown (no congestion loss with an RTT before it)"),
    }
    let r = |v: Option<f64>| v.map_or("-".into(), rate);
    println!(
        "westwood    median BE {}, RE {}, ERE {} (filter tau {:.3} ms)",
        r(j.be_median_bps),
        r(j.re_median_bps),
        r(j.ere_median_bps),
        j.filter_tau_ms
    );
}
