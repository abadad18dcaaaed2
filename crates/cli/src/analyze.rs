//! `tightlink analyze TRACE`: every stream of a probe trace through the
//! chosen methods.

use std::io::{self, Read, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, ValueEnum};
use tightlink_core::units::Rate;
use tightlink_core::{AnalysisParams, StreamKind};
use tightlink_measure::analyze::{analyze_trace, trace_capacity_bps, AnalysisSettings, Methods};

use tightlink_measure::text::{write_analysis, AnalysisFormat};

/// `--format`: a table, JSON or CSV.
#[derive(Clone, Copy, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

#[derive(Args)]
pub struct AnalyzeArgs {
    /// Probe trace file (v1, plain or gzip); `-` reads standard input.
    pub trace: PathBuf,
    /// Method: prcmt, prcmt+bass, pathload, imr-avg, imr-wavelet, multirate,
    /// multirate-single-pass, multirate-prcmt-dp1, multirate-prcmt-dp2,
    /// topp, pathchirp, bart (tracked across the trace's streams in order;
    /// a stream the estimate sent again does not move its filter),
    /// igi (single-rate trains: IGI, with PTR as the receive rate), spruce
    /// (packet pairs), queue-fit (multi-rate streams, the fluid queue fitted
    /// to the delays; needs the capacity: `--capacity` or the trace's);
    /// `default` picks the best for each stream's kind; `all` runs every one.
    #[arg(long, short, default_value = "default", env = "TIGHTLINK_METHOD")]
    pub method: String,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Format::Table, env = "TIGHTLINK_FORMAT")]
    pub format: Format,
    /// Stream kind: `auto` takes the trace's `# stream_kinds=` metadata, else
    /// infers each stream's kind from its send gaps.
    #[arg(long, value_enum, default_value_t = KindArg::Auto)]
    pub kind: KindArg,
    /// BASS SPIKE_UP, in mean send gaps.
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub spike_up: f64,
    /// BASS SPIKE_DOWN, in mean send gaps.
    #[arg(long, default_value_t = 0.5, allow_negative_numbers = true)]
    pub spike_down: f64,
    /// Relative rate tolerance of PRC-MT and of the multi-rate "exceeds" test.
    #[arg(long, default_value_t = 0.005, allow_negative_numbers = true)]
    pub tolerance: f64,
    /// IMR window: a packet count, or `tenth` for a tenth of the stream.
    #[arg(long, default_value = "10")]
    pub imr_window: String,
    /// Sliding window after multi-rate smoothing, in gaps.
    #[arg(long, default_value_t = 16)]
    pub window: usize,
    /// Most spike-smoothing passes for `multirate`.
    #[arg(long, default_value_t = 8)]
    pub max_passes: usize,
    /// What "smoothed receive gaps consistently exceed send gaps" means for
    /// multi-rate estimates: the midpoint of the two rules below (bracket),
    /// every gap of the final run (the paper's wording), or the cumulative
    /// excess staying positive (the queue never drains back).
    #[arg(long, value_enum, default_value_t = ConsistencyArg::Bracket)]
    pub consistency: ConsistencyArg,
    /// The tight link's capacity when known, e.g. `10G` (default: the
    /// trace's `# capacity_bps=`, if any): `queue-fit` needs it; `igi` and
    /// `spruce` take it over their own reading (each train's receive
    /// gaps, the rate the pairs were sent at); `multirate` meets the queue
    /// fit halfway with it.
    #[arg(long)]
    pub capacity: Option<Rate>,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ConsistencyArg {
    Bracket,
    EveryGap,
    Cumulative,
}

#[derive(Clone, Copy, ValueEnum)]
pub enum KindArg {
    Auto,
    Single,
    Multi,
    Chirp,
    Pairs,
}

fn params_from(args: &AnalyzeArgs) -> Result<AnalysisParams> {
    AnalysisSettings {
        spike_up: args.spike_up,
        spike_down: args.spike_down,
        tolerance: args.tolerance,
        imr_window: args.imr_window.clone(),
        window: args.window,
        max_passes: args.max_passes,
        consistency: match args.consistency {
            ConsistencyArg::Bracket => "bracket",
            ConsistencyArg::EveryGap => "every-gap",
            ConsistencyArg::Cumulative => "cumulative",
        }
        .into(),
        capacity_bps: args.capacity.map(|c| c.bps),
    }
    .params(&|n| format!("--{n}"))
}

pub fn run(args: AnalyzeArgs) -> Result<()> {
    let params = params_from(&args)?;
    // Validate the method before reading a possibly large file.
    let methods: Methods = args
        .method
        .parse()
        .map_err(|e| anyhow::anyhow!("--method {e}"))?;
    methods.check_capacity(
        args.capacity
            .as_ref()
            .map(|c| format!("--capacity {c}"))
            .as_deref(),
    )?;
    let trace = if args.trace.as_os_str() == "-" {
        let mut buf = Vec::new();
        io::stdin()
            .read_to_end(&mut buf)
            .context("reading standard input")?;
        tightlink_trace::parse_bytes("<stdin>", &buf)?
    } else {
        tightlink_trace::read_path(&args.trace)?
    };
    if args.capacity.is_none() && methods.reads_capacity() {
        if let Some(c) =
            trace_capacity_bps(&trace).with_context(|| args.trace.display().to_string())?
        {
            eprintln!(
                "tightlink: the tight link's capacity is {:.3} Gbit/s, from the trace's metadata (capacity_bps; --capacity overrides)",
                c / 1e9
            );
        }
    }
    let kind = match args.kind {
        KindArg::Auto => None,
        KindArg::Single => Some(StreamKind::SingleRate),
        KindArg::Multi => Some(StreamKind::MultiRate),
        KindArg::Chirp => Some(StreamKind::Chirp),
        KindArg::Pairs => Some(StreamKind::Pairs),
    };
    let results = analyze_trace(&trace, kind, methods, &params)
        .with_context(|| args.trace.display().to_string())?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::new(stdout.lock());
    let format = match args.format {
        Format::Table => AnalysisFormat::Table,
        Format::Json => AnalysisFormat::Json,
        Format::Csv => AnalysisFormat::Csv,
    };
    write_analysis(
        &mut out,
        format,
        &args.trace.display().to_string(),
        &trace,
        &results,
    )?;
    out.flush()?;
    Ok(())
}
