//! `tightlink doctor [--peer HOST]`: is this host the bottleneck? Prints
//! the measurements of [`tightlink_net::doctor`] and the verdict.

use anyhow::{anyhow, Result};
use clap::Args;

#[derive(Args)]
pub struct DoctorArgs {
    /// A `tightlink server` to measure the receiving side against
    /// (default: one started on loopback).
    #[arg(long)]
    pub peer: Option<String>,
    /// 200-packet trains instead of 1000.
    #[arg(long)]
    pub quick: bool,
    /// Pre-shared key of the --peer server (its keyed limits let the
    /// tables reach 10 Gbit/s; without a key a server allows 1 Gbit/s).
    #[arg(long, requires = "peer", env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
}

pub fn run(args: DoctorArgs) -> Result<()> {
    let key = match &args.key_file {
        Some(f) => Some(
            tightlink_net::auth::read_key_file(f)
                .map_err(|e| anyhow!("--key-file {}: {e}", f.display()))?,
        ),
        None => None,
    };
    let d = tightlink_net::doctor::run(args.peer.as_deref(), key, args.quick)
        .map_err(|e| anyhow!(e))?;
    print!("{d}");
    Ok(())
}
