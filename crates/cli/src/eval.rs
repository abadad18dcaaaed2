//! `tightlink eval`: \[BASS\]'s evaluation on the simulator (tables
//! on stdout, PNGs with --plots). The work is in tightlink-eval.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{anyhow, Result};
use clap::Args;
use tightlink_eval::experiments::Scale;

#[derive(Args)]
pub struct EvalArgs {
    /// Fewer streams per cell: under a minute on 2 cores.
    #[arg(long)]
    pub quick: bool,
    /// Write PNG plots into this directory.
    #[arg(long)]
    pub plots: Option<PathBuf>,
    /// Base seed; the same seed gives the same tables on any core count.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Worker threads (default: all cores).
    #[arg(long, value_parser = crate::flags::count_within(1, 4096))]
    pub jobs: Option<usize>,
}

pub fn run(args: EvalArgs) -> Result<()> {
    if let Some(j) = args.jobs {
        rayon::ThreadPoolBuilder::new()
            .num_threads(j)
            .build_global()
            .map_err(|e| anyhow!("--jobs {j}: {e}"))?;
    }
    let scale = if args.quick {
        Scale::quick()
    } else {
        Scale::full()
    };
    let show = std::io::stderr().is_terminal();
    let mut progress = |what: &str| {
        if show {
            eprintln!("tightlink eval: {what}");
        }
    };
    let results = tightlink_eval::run(scale, args.seed, &mut progress);
    let mut out = std::io::stdout().lock();
    write!(out, "{}", tightlink_eval::markdown(&results))?;
    if let Some(dir) = &args.plots {
        let files = tightlink_eval::plots::draw_all(&results, dir)
            .map_err(|e| anyhow!("drawing plots into {}: {e}", dir.display()))?;
        for f in files {
            writeln!(out, "plot: {}", f.display())?;
        }
    }
    Ok(())
}
