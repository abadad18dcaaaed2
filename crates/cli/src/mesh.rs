//! `tightlink mesh check FILE`: a mesh file checked, and the schedule
//! every site's agent derives from it (see [`tightlink_agent::mesh`]);
//! `tightlink mesh targets FILE`: its agents for Prometheus.

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, Subcommand};
use tightlink_agent::mesh::{load, prometheus_targets, schedule, Mesh, Report};

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
    /// The mesh's agents as Prometheus file-based service discovery
    /// (JSON for `file_sd_configs`, each labelled with its site): one
    /// Prometheus scrapes every site (deploy/prometheus-mesh.yml).
    #[command(
        after_help = "Examples:\n  tightlink mesh targets deploy/mesh.toml > mesh-agents.json"
    )]
    Targets { file: PathBuf },
}

fn load_checked(file: &std::path::Path) -> Result<Mesh> {
    match load(file) {
        Ok(m) => Ok(m),
        Err(e) => tightlink_measure::bad_input!("{e}"),
    }
}

pub fn run(args: MeshArgs) -> Result<()> {
    let (file, site) = match args.command {
        MeshCommand::Check { file, site } => (file, site),
        MeshCommand::Targets { file } => {
            let mesh = load_checked(&file)?;
            for s in mesh.sites.iter().filter(|s| s.agent.is_none()) {
                eprintln!(
                    "site {}: no agent address in {}, left out",
                    s.name,
                    file.display()
                );
            }
            println!("{:#}", prometheus_targets(&mesh));
            return Ok(());
        }
    };
    let mesh = load_checked(&file)?;
    let site = match site {
        None => None,
        Some(name) => match mesh.sites.iter().position(|s| s.name == name) {
            Some(i) => Some(i),
            None => tightlink_measure::bad_input!(
                "--site {name}: no such site in {} (sites: {})",
                file.display(),
                mesh.site_names()
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
