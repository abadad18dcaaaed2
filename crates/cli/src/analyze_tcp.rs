//! `tightlink analyze-tcp CAPTURE`: the passive estimators of the TCPW-BBE
//! paper (sections 3-4) on one TCP flow of a pcap/pcapng capture taken at
//! its sender: summary, time series (`--format csv|json`).

use anyhow::Result;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use tightlink_core::tcp::BbeParams;
use tightlink_core::units::Rate;
use tightlink_measure::passive::{analyze_tcp, TcpOptions};
use tightlink_measure::text::TcpSeriesCsv;

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
    pub capacity: Option<Rate>,
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
        capacity_bps: a.capacity.map(|c| c.bps),
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
        Format::Csv => print!("{}", TcpSeriesCsv(&j)),
        Format::Summary => print!("{j}"),
    }
    Ok(())
}
