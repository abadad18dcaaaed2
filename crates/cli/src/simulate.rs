//! `tightlink simulate`: probe streams of given kinds, lengths and rates
//! through a simulated path, written as a probe trace (format v1), with the
//! ground truth per stream in a separate CSV.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use tightlink_core::units::{Rate, Time};
use tightlink_measure::simulate::{simulate, RateOutside, Schedule, SimulateOptions};
use tightlink_measure::Target;

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SimKind {
    Single,
    Multi,
    // pathChirp's chirps: gaps shrinking by `--spread`.
    Chirp,
    // Spruce's packet pairs.
    Pairs,
}

#[derive(Args)]
pub struct SimulateArgs {
    /// The simulated path (`sim:...`: the guide's command-line chapter lists its keys); nothing for the default.
    #[arg(default_value = "sim:")]
    pub target: String,
    /// Probe trace to write (gzip when the name ends in `.gz`).
    #[arg(long, short)]
    pub output: PathBuf,
    /// Ground truth CSV to write (stream_id,available_bps,min_bps,max_bps).
    #[arg(long)]
    pub truth: Option<PathBuf>,
    /// Stream kind (chirp: pathChirp's, gaps shrinking by `--spread`;
    /// pairs: Spruce's, `--pairs` pairs per stream).
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
    pub rate: Vec<Rate>,
    /// Single-rate: packets per stream.
    #[arg(long, default_value_t = 64)]
    pub packets: usize,
    /// Multi-rate: centre of the rates (default: the path's nominal
    /// available bandwidth, capacity minus mean cross traffic).
    #[arg(long)]
    pub centre: Option<Rate>,
    /// Multi-rate: Range, the rates spread over centre * (1 +- range).
    #[arg(long, default_value_t = 0.3)]
    pub range: f64,
    /// Multi-rate: number of rates.
    #[arg(long, default_value_t = 5)]
    pub rates: usize,
    /// Multi-rate: packets per rate.
    #[arg(long, default_value_t = 64)]
    pub per_rate: usize,
    /// Chirp: the first gap's rate (default: a tenth of the sender's link).
    #[arg(long)]
    pub low: Option<Rate>,
    /// Chirp: the last gap's rate at least (default: the sender's link).
    #[arg(long)]
    pub high: Option<Rate>,
    /// Chirp: each gap this many times shorter than the one before
    /// (pathChirp's spread factor).
    #[arg(long, default_value_t = 1.2)]
    pub spread: f64,
    /// Chirp: packets per chirp element, sent back to back (pathChirp's
    /// -J, for receivers that stamp in batches; the default top rate is
    /// then the highest that keeps the elements apart)
    #[arg(long, default_value_t = 1)]
    pub jumbo: usize,
    /// Pairs: pairs per stream.
    #[arg(long, default_value_t = 10)]
    pub pairs: usize,
    /// Pairs: the rate a pair's gap stands for (default: the path's
    /// narrow link, as Spruce sends at the capacity).
    #[arg(long)]
    pub capacity: Option<Rate>,
    /// Pairs: mean time between pair starts, exponentially spread (at
    /// least what keeps the pairs under 5 % of the capacity; Spruce's
    /// default is 100ms).
    #[arg(long, default_value = "10ms")]
    pub mean_gap: Time,
}

/// Each kind's own flags (clap's ids) and the kind they shape.
const KIND_FLAGS: [(&str, SimKind); 13] = [
    ("rate", SimKind::Single),
    ("packets", SimKind::Single),
    ("centre", SimKind::Multi),
    ("range", SimKind::Multi),
    ("rates", SimKind::Multi),
    ("per_rate", SimKind::Multi),
    ("low", SimKind::Chirp),
    ("high", SimKind::Chirp),
    ("spread", SimKind::Chirp),
    ("jumbo", SimKind::Chirp),
    ("pairs", SimKind::Pairs),
    ("capacity", SimKind::Pairs),
    ("mean_gap", SimKind::Pairs),
];

/// `typed(id)`: whether the user gave that flag (a default does not
/// count). A flag of another kind than `--kind` is refused: it would
/// shape nothing.
pub fn run(args: SimulateArgs, typed: &dyn Fn(&str) -> bool) -> Result<()> {
    for (id, kind) in KIND_FLAGS {
        if typed(id) && kind != args.kind {
            tightlink_measure::bad_input!(
                "--{} shapes --kind {} streams, not --kind {} (the stream kind is {} by default)",
                id.replace('_', "-"),
                kind_name(kind),
                kind_name(args.kind),
                kind_name(SimKind::Multi)
            );
        }
    }
    let target = Target::parse(&args.target)?;
    let schedule = match args.kind {
        SimKind::Single => Schedule::Single {
            rates_bps: args.rate.iter().map(|r| r.bps).collect(),
            packets: args.packets,
        },
        SimKind::Multi => Schedule::Multi {
            centre_bps: args.centre.map(|r| r.bps),
            range: args.range,
            rates: args.rates,
            per_rate: args.per_rate,
        },
        SimKind::Chirp => Schedule::Chirp {
            low_bps: args.low.map(|r| r.bps),
            high_bps: args.high.map(|r| r.bps),
            spread: args.spread,
            jumbo: args.jumbo,
        },
        SimKind::Pairs => Schedule::Pairs {
            pairs: args.pairs,
            capacity_bps: args.capacity.map(|r| r.bps),
            mean_gap_ns: args.mean_gap.ns as f64,
        },
    };
    let options = SimulateOptions {
        streams: args.streams,
        size_bytes: args.size,
        schedule,
    };
    let sim = simulate(&target, &options).map_err(|e| {
        // Name the flag; the message names the rate.
        let index = e.downcast_ref::<RateOutside>().map(|r| r.index);
        match index {
            Some(Some(_)) => e.context("--rate"),
            Some(None) if args.kind == SimKind::Chirp => e.context("--low/--high"),
            Some(None) if args.kind == SimKind::Pairs => e.context("--capacity"),
            Some(None) => e.context("--centre/--range (lowest or highest rate)"),
            None => e,
        }
    })?;
    let missing = sim.write(&args.output, args.truth.as_deref())?;
    eprintln!(
        "tightlink: wrote {} streams ({} packets) to {}{}",
        sim.streams.len(),
        sim.streams.iter().map(|s| s.len()).sum::<usize>(),
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

fn kind_name(k: SimKind) -> &'static str {
    match k {
        SimKind::Single => "single",
        SimKind::Multi => "multi",
        SimKind::Chirp => "chirp",
        SimKind::Pairs => "pairs",
    }
}
