//! Which lab a `tightlink lab` command acts on: a scenario and an
//! optional lab name, and the root check every command that touches
//! namespaces makes first.

use anyhow::{bail, Result};
use clap::Args;
use tightlink_lab::{Lab, Scenario};

#[derive(Args)]
pub struct LabTarget {
    /// A shipped scenario (`tightlink lab list`) or a TOML file.
    pub scenario: String,
    /// Lab name (namespaces `tllab-NAME-*`); default: the scenario's name.
    #[arg(long)]
    pub name: Option<String>,
}

pub(crate) fn lab_of(t: &LabTarget) -> Result<Lab> {
    let scenario = Scenario::load(&t.scenario)?;
    let name = t.name.clone().unwrap_or_else(|| scenario.name.clone());
    Ok(Lab::new(&name, scenario)?)
}

pub(crate) fn need_root() -> Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        bail!("tightlink lab needs root (network namespaces, veth, tc); run it with sudo");
    }
    Ok(())
}
