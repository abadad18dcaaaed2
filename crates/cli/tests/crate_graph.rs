//! The crate graph of the workspace, as ARCHITECTURE.md draws it: every
//! edge between workspace crates (normal and build dependencies; tests
//! may use more) must be one the architecture allows. A new crate or a
//! new edge means updating both this list and ARCHITECTURE.md.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// Allowed dependencies of each workspace crate on the others.
const ALLOWED: &[(&str, &[&str])] = &[
    // The pure core: probe streams in, estimates out; the channel traits.
    ("tightlink-core", &[]),
    ("tightlink-wire", &[]),
    // The Linux system layer: libc calls, nothing of ours.
    ("tightlink-sys", &[]),
    ("tightlink-trace", &["tightlink-core"]),
    ("tightlink-capture", &["tightlink-core", "tightlink-sys"]),
    // The simulator implements the core's channels; it knows no strategy
    // and no real backend.
    ("tightlink-sim", &["tightlink-core"]),
    // Strategies talk to the core's Channel alone.
    ("tightlink-probe", &["tightlink-core"]),
    // Real backends: the core's channels on sockets; never the simulator.
    (
        "tightlink-net",
        &["tightlink-core", "tightlink-wire", "tightlink-sys"],
    ),
    ("tightlink-plot", &[]),
    // The namespace lab drives real traffic with the simulator's models,
    // and reads the estimates it runs as the library's typed reports.
    (
        "tightlink-lab",
        &[
            "tightlink-core",
            "tightlink-sim",
            "tightlink-capture",
            "tightlink-sys",
            "tightlink-measure",
        ],
    ),
    (
        "tightlink-eval",
        &[
            "tightlink-core",
            "tightlink-sim",
            "tightlink-probe",
            "tightlink-plot",
        ],
    ),
    // The library API: targets, methods, reports over every channel.
    (
        "tightlink-measure",
        &[
            "tightlink-core",
            "tightlink-trace",
            "tightlink-sim",
            "tightlink-probe",
            "tightlink-net",
            "tightlink-wire",
            "tightlink-capture",
        ],
    ),
    // The service: schedules, history and exporter over the library API;
    // sys only for the stop signals.
    (
        "tightlink-agent",
        &["tightlink-core", "tightlink-measure", "tightlink-sys"],
    ),
    // The command line: flags and rendering over the library.
    (
        "tightlink",
        &[
            "tightlink-core",
            "tightlink-trace",
            "tightlink-sim",
            "tightlink-probe",
            "tightlink-eval",
            "tightlink-net",
            "tightlink-wire",
            "tightlink-lab",
            "tightlink-capture",
            "tightlink-measure",
            "tightlink-plot",
            "tightlink-agent",
        ],
    ),
];

/// Workspace crate -> its workspace dependencies (normal and build).
fn workspace_graph() -> BTreeMap<String, BTreeSet<String>> {
    let cargo = option_env!("CARGO").unwrap_or("cargo");
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages = meta["packages"].as_array().expect("packages");
    let members: BTreeSet<String> = packages
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect();
    packages
        .iter()
        .map(|p| {
            let deps = p["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| d["kind"].as_str() != Some("dev"))
                .map(|d| d["name"].as_str().unwrap().to_string())
                .filter(|n| members.contains(n))
                .collect();
            (p["name"].as_str().unwrap().to_string(), deps)
        })
        .collect()
}

#[test]
fn every_edge_is_one_the_architecture_allows() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut wrong = Vec::new();
    for (krate, deps) in workspace_graph() {
        let Some(ok) = allowed.get(krate.as_str()) else {
            wrong.push(format!(
                "{krate} is not in the architecture (add it here and to ARCHITECTURE.md)"
            ));
            continue;
        };
        for d in deps {
            if !ok.contains(&d.as_str()) {
                wrong.push(format!("{krate} -> {d} is not an allowed edge"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_rules_that_matter_most_hold_in_the_list_itself() {
    // The list above cannot drift into allowing these.
    for (krate, deps) in ALLOWED {
        let forbidden = |d: &&str| {
            *krate == "tightlink-core"
                || *d == "tightlink"
                || (*krate == "tightlink-probe" && *d == "tightlink-sim")
                || (*krate == "tightlink-net" && *d == "tightlink-sim")
                || (*krate == "tightlink-sim" && *d == "tightlink-net")
        };
        assert!(
            !deps.iter().any(forbidden),
            "{krate}: {deps:?} breaks a rule of ARCHITECTURE.md"
        );
    }
}
