//! `tightlink mesh check FILE`: a mesh file checked, and the schedule
//! every site's agent derives from it (see [`tightlink_agent::mesh`]).

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use tightlink_agent::mesh::{load, schedule, Report};

#[derive(Args)]
pub struct MeshArgs {
    #[command(subcommand)]
    command: MeshCommand,
}

#[derive(Subcommand)]
enum MeshCommand {
    /// Check a mesh file (errors with FILE:LINE) and print its schedule:
    /// the slots in which no site is an end of two tests and no declared
    /// bottleneck is crossed by two, every ordered pair once a period.
    #[command(
        after_help = "Examples:\n  tightlink mesh check deploy/mesh.toml\n  tightlink mesh check deploy/mesh.toml --site ams    # the slots ams measures in"
    )]
    Check {
        file: PathBuf,
        /// Also list this site's turns: slot, start within the period, far end.
        #[arg(long)]
        site: Option<String>,
    },
}

pub fn run(args: MeshArgs) -> Result<()> {
    let MeshCommand::Check { file, site } = args.command;
    let mesh = match load(&file) {
        Ok(m) => m,
        Err(e) => tightlink_measure::bad_input!("{e}"),
    };
    let site = match site {
        None => None,
        Some(name) => match mesh.sites.iter().position(|s| s.name == name) {
            Some(i) => Some(i),
            None => tightlink_measure::bad_input!(
                "--site {name}: no such site in {} (sites: {})",
                file.display(),
                mesh.sites
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        },
    };
    let schedule = schedule(&mesh);
    print!(
        "{}",
        Report {
            mesh: &mesh,
            schedule: &schedule,
            site
        }
    );
    Ok(())
}
