//! `tightlink capacity [TARGET]`: the narrow link's capacity by Pathrate
//! and CapProbe, side by side (each with its own probes), next to the
//! simulator's truth for `sim:` targets.

use anyhow::Result;
use clap::Args;
use tightlink_measure::capacity::DEFAULT_TARGET;
use tightlink_measure::text::CapacityTable;
use tightlink_measure::{capacity, CapacityMethod, CapacityOptions, Target};

use crate::estimate::real_options;

#[derive(Args)]
pub struct CapacityArgs {
    /// As for `estimate`: `HOST[:PORT]` of a `tightlink server`, or `sim:`
    /// with a path description.
    #[arg(default_value = DEFAULT_TARGET)]
    pub target: String,
    /// Comma-separated: pathrate, capprobe.
    #[arg(long, short, default_value = "pathrate,capprobe")]
    pub method: String,
    /// One JSON object per method, one per line.
    #[arg(long)]
    pub json: bool,
    /// Real servers: the download direction.
    #[arg(long, short = 'R')]
    pub reverse: bool,
    /// Real servers: pre-shared key file.
    #[arg(long, env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
    /// Never send a stream faster on average than this (on `sim:` too).
    #[arg(long)]
    pub max_rate: Option<tightlink_core::units::Rate>,
    /// Real servers: udp, packet or xdp (as for `estimate`).
    #[arg(long, default_value = "udp")]
    pub backend: String,
    /// Write every stream of every method as one probe trace (format v1),
    /// the methods' streams one after the other (metadata says how many).
    #[arg(long)]
    pub save_trace: Option<std::path::PathBuf>,
}

pub fn run(a: CapacityArgs) -> Result<()> {
    let methods = a
        .method
        .split(',')
        .map(|m| m.trim().parse::<CapacityMethod>())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow::anyhow!("--method {e}"))?;
    let options = CapacityOptions {
        methods,
        real: real_options(a.reverse, &a.key_file, a.max_rate, &a.backend)?,
        save_trace: a.save_trace.clone(),
    };
    let target = Target::parse(&a.target)?;
    let results = capacity(&target, &options, &mut |_| {})?;
    if a.json {
        for r in &results {
            println!("{}", serde_json::to_string(r)?);
        }
        return Ok(());
    }
    print!(
        "{}",
        CapacityTable {
            target: &a.target,
            results: &results
        }
    );
    Ok(())
}
