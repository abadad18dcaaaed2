//! `tightlink simulate`: probe streams of given kinds, lengths and rates
//! through a simulated path, written as a probe trace (format v1), with the
//! ground truth per stream in a separate CSV.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};
use tightlink_core::channel::{Channel, Recorder, StreamRequest};
use tightlink_core::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
use tightlink_core::units::parse_rate;
use tightlink_sim::SimChannel;

use tightlink_measure as save;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimKind {
    Single,
    Multi,
}

#[derive(Args)]
pub struct SimulateArgs {
    /// The simulated path (`sim:...`, see README); nothing for the default.
    #[arg(default_value = "sim:")]
    pub target: String,
    /// Probe trace to write (gzip when the name ends in `.gz`).
    #[arg(long, short)]
    pub output: PathBuf,
    /// Ground truth CSV to write (stream_id,available_bps,min_bps,max_bps).
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Stream kind.
    #[arg(long, value_enum, default_value_t = SimKind::Multi)]
    pub kind: SimKind,
    /// Streams to send.
    #[arg(long, default_value_t = 10)]
    pub streams: usize,
    /// Probe packet size, bytes.
    #[arg(long, default_value_t = 9000)]
    pub size: u32,
    /// Single-rate: the probing rates (e.g. `5G,6G,7G`), used in turn.
    #[arg(long, value_delimiter = ',', default_value = "7G")]
    pub rate: Vec<String>,
    /// Single-rate: packets per stream.
    #[arg(long, default_value_t = 64)]
    pub packets: usize,
    /// Multi-rate: centre of the rates (default: the path's nominal
    /// available bandwidth, capacity minus mean cross traffic).
    #[arg(long)]
    pub centre: Option<String>,
    /// Multi-rate: Range, the rates spread over centre * (1 +- range).
    #[arg(long, default_value_t = 0.3)]
    pub range: f64,
    /// Multi-rate: number of rates.
    #[arg(long, default_value_t = 5)]
    pub rates: usize,
    /// Multi-rate: packets per rate.
    #[arg(long, default_value_t = 64)]
    pub per_rate: usize,
}

pub fn run(args: SimulateArgs) -> Result<()> {
    let spec = tightlink_sim::parse_sim_target(&args.target)?;
    if args.streams == 0 {
        bail!("--streams 0: must be 1 or more");
    }
    if args.size < 64 {
        bail!(
            "--size {}: probe packets must be at least 64 bytes",
            args.size
        );
    }
    let nominal = spec.nominal_available_bps();
    let mut channel = Recorder::new(SimChannel::new(spec, args.target.clone()));
    let max = channel.info().max_rate_bps;
    let check = |flag: &str, r: f64| -> Result<f64> {
        if r.is_nan() || r <= 0.0 || r > max {
            bail!(
                "{flag}: {:.3} Gbit/s is outside what the sender's link sends (0-{:.3} Gbit/s)",
                r / 1e9,
                max / 1e9
            );
        }
        Ok(r)
    };
    let schedules: Vec<Vec<i64>> = match args.kind {
        SimKind::Single => {
            if args.packets < 2 {
                bail!("--packets {}: a stream needs at least 2", args.packets);
            }
            let rates = args
                .rate
                .iter()
                .map(|s| {
                    let r = parse_rate(s).with_context(|| format!("--rate {s}"))?;
                    check(&format!("--rate {s}"), r)
                })
                .collect::<Result<Vec<f64>>>()?;
            (0..args.streams)
                .map(|i| single_rate_schedule(rates[i % rates.len()], args.packets, args.size, 0))
                .collect()
        }
        SimKind::Multi => {
            if !(0.0..1.0).contains(&args.range) {
                bail!("--range {}: must be in [0, 1)", args.range);
            }
            if args.rates < 2 || args.per_rate < 2 {
                bail!("--rates and --per-rate: at least 2 each");
            }
            let centre = match &args.centre {
                Some(s) => parse_rate(s).with_context(|| format!("--centre {s}"))?,
                None => nominal,
            };
            let rates = rates_around(centre, args.range, args.rates);
            check("--centre/--range (lowest rate)", rates[0])?;
            check("--centre/--range (highest rate)", rates[rates.len() - 1])?;
            let sched = multi_rate_schedule(&rates, args.per_rate, args.size);
            vec![sched; args.streams]
        }
    };
    for sched in &schedules {
        channel.probe(&StreamRequest::from_send_times(sched, args.size))?;
    }
    let metadata = vec![
        ("source".to_string(), "tightlink simulate".to_string()),
        ("path".to_string(), args.target.clone()),
        (
            "stream_kinds".to_string(),
            match args.kind {
                SimKind::Single => "single",
                SimKind::Multi => "multi",
            }
            .to_string(),
        ),
        ("size_layer".to_string(), "simulated packet".to_string()),
    ];
    save::write_trace(&args.output, metadata, &channel.streams)?;
    let mut missing = 0;
    if let Some(t) = &args.truth {
        missing = save::write_truth(t, &channel.streams, &channel.truths)?;
    }
    eprintln!(
        "tightlink: wrote {} streams ({} packets) to {}{}",
        channel.streams.len(),
        channel.streams.iter().map(|s| s.len()).sum::<usize>(),
        args.output.display(),
        match &args.truth {
            Some(t) if missing > 0 => format!(
                ", truth to {} ({missing} streams without truth: fewer than 2 packets arrived)",
                t.display()
            ),
            Some(t) => format!(", truth to {}", t.display()),
            None => String::new(),
        }
    );
    Ok(())
}
