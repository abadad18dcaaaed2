//! Snapshots of what users see: `--help` of every command, the JSON that
//! `estimate`, `capacity` and `hops` print on their default simulated
//! targets and `analyze --method all` on the shipped traces (`eval --quick`
//! is checked in eval.rs, which runs it once for its tables and plots).
//! All of these are seeded, so any difference is a change to the interface
//! or to the numbers. Wall-clock figures are masked.
//!
//! After a deliberate change: `TIGHTLINK_BLESS=1 cargo test --release -p
//! tightlink --test snapshots --test eval` rewrites the files; review the
//! diff.

mod common;

use std::path::PathBuf;

use common::{check_snapshot as check, tightlink_text};

fn run_ok(args: &[&str]) -> String {
    let (ok, out, err) = tightlink_text(args);
    assert!(ok, "tightlink {args:?} failed: {err}");
    out
}

/// JSON lines with the wall-clock field `wall_s` replaced by null.
fn mask_wall(json_lines: &str) -> String {
    json_lines
        .lines()
        .map(|l| {
            let mut v: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            if let Some(w) = v.get_mut("wall_s") {
                *w = serde_json::Value::Null;
            }
            serde_json::to_string_pretty(&v).unwrap() + "\n"
        })
        .collect()
}

const COMMANDS: &[&[&str]] = &[
    &[],
    &["estimate"],
    &["capacity"],
    &["hops"],
    &["analyze"],
    &["analyze-tcp"],
    &["capture"],
    &["simulate"],
    &["eval"],
    &["server"],
    &["reflector"],
    &["doctor"],
    &["lab"],
    &["lab", "list"],
    &["lab", "up"],
    &["lab", "down"],
    &["lab", "status"],
    &["lab", "check"],
    &["lab", "run"],
    &["lab", "tcp"],
    &["cross"],
    &["agent"],
    &["history"],
];

#[test]
fn help_of_every_command() {
    for cmd in COMMANDS {
        let mut args = cmd.to_vec();
        args.push("--help");
        let name = if cmd.is_empty() {
            "help.txt".to_string()
        } else {
            format!("help-{}.txt", cmd.join("-"))
        };
        check(&name, &run_ok(&args));
    }
}

#[test]
fn estimate_json_on_the_default_path() {
    check(
        "estimate.json",
        &mask_wall(&run_ok(&["estimate", "--json"])),
    );
}

#[test]
fn capacity_json_on_the_default_path() {
    check(
        "capacity.json",
        &mask_wall(&run_ok(&["capacity", "--json"])),
    );
}

#[test]
fn hops_json_on_the_default_path() {
    check("hops.json", &mask_wall(&run_ok(&["hops", "--json"])));
}

#[test]
fn analyze_all_methods_on_the_shipped_traces() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../samples");
    for name in ["single-rate-10g", "multi-rate-10g"] {
        let file = root.join(format!("{name}.csv.gz"));
        let file = file.to_str().unwrap();
        let out = run_ok(&["analyze", "--method", "all", "--format", "csv", file]);
        check(&format!("analyze-{name}.csv"), &out);
    }
}
