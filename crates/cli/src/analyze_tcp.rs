//! `tightlink analyze-tcp CAPTURE`: the passive estimators of the TCPW-BBE
//! paper (sections 3-4) on one TCP flow of a pcap/pcapng capture taken at
//! its sender: summary, time series (`--format csv|json`).

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tightlink_core::tcp::BbeParams;
use tightlink_core::units::format_rate;
use tightlink_core::units::parse_rate;
use tightlink_measure::passive::{analyze_tcp, TcpAnalysis, TcpOptions};

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

pub fn run(a: AnalyzeTcpArgs) -> Result<()> {
    let options = TcpOptions {
        flow: a.flow.clone(),
        capacity_bps: a
            .capacity
            .as_deref()
            .map(|s| parse_rate(s).map_err(|e| anyhow::anyhow!("--capacity {s}: {e}")))
            .transpose()?,
        congested_level: a.congested_level,
    };
    let j = analyze_tcp(&a.capture, &options)?;
    if let Some(file) = &a.plot {
        let rates: Vec<(f64, f64, f64, f64)> = j
            .series
            .iter()
            .map(|p| (p.t_s, p.be_bps, p.re_bps, p.ere_bps))
            .collect();
        tightlink_plot::draw_tcp_flow(
            file,
            &tightlink_plot::TcpFlowPlot {
                title: &j.flow,
                rtt_ms: &j.rtt_ms,
                rtt_before_loss_ms: &j.rtt_before_loss_ms,
                rates: &rates,
                capacity_bps: j.capacity_bps,
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
        Format::Summary => print_summary(&j),
    }
    Ok(())
}

fn print_summary(j: &TcpAnalysis) {
    let (packets, n_flows) = (j.capture_packets, j.capture_flows);
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
        format_rate(j.throughput_bps)
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
        Some(c) => println!(
            "capacity    {} (from {})",
            format_rate(c),
            j.capacity_source
        ),
        None => println!("capacity    none (no ACK pairs; give --capacity)"),
    }
    println!(
        "ack pairs   {} seen; queued: {}; back to back: {}",
        j.ack_pairs_seen,
        match (j.queued_bps, j.queued_p25_bps, j.queued_p75_bps) {
            (Some(m), Some(lo), Some(hi)) => format!(
                "median {} of {} (quartiles {} - {})",
                format_rate(m),
                j.queued_pairs,
                format_rate(lo),
                format_rate(hi)
            ),
            _ => "none".into(),
        },
        match j.back_to_back_bps {
            Some(c) => format!(
                "{} by CapProbe over {} ({})",
                format_rate(c),
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
    let r = |v: Option<f64>| v.map_or("-".into(), format_rate);
    println!(
        "westwood    median BE {}, RE {}, ERE {} (filter tau {:.3} ms)",
        r(j.be_median_bps),
        r(j.re_median_bps),
        r(j.ere_median_bps),
        j.filter_tau_ms
    );
}
