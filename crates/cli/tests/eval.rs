//! `tightlink eval --quick --plots`, run once: its tables match the stored
//! snapshot (seeded: any difference is a change to the numbers), the PNGs
//! are drawn with the shipped font, and the headline figure holds.

mod common;
use common::scratch;

use std::process::Command;

#[test]
fn quick_eval_prints_tables_and_draws_plots() {
    let dir = scratch("eval");
    let o = Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args(["eval", "--quick", "--jobs", "2", "--plots"])
        .arg(dir.path())
        .env_remove("FONTCONFIG_PATH")
        .output()
        .expect("run tightlink eval");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8(o.stdout).unwrap();
    // The first line ends with the run time and thread count; the plot
    // lines name this run's directory.
    let tables: String = out
        .lines()
        .filter(|l| !l.starts_with("plot: "))
        .map(|l| l.to_owned() + "\n")
        .collect();
    let re = regex::Regex::new(r"; [0-9.]+ s on [0-9]+ threads").unwrap();
    common::check_snapshot("eval-quick.md", &re.replace(&tables, "; <time>"));
    for heading in [
        "## Decision error (wrong / ambiguous) vs stream length",
        "### bursty, 125 us coalescence",
        "### smoothed, no coalescence",
        "### 100G, bursty 25G, 125 us coalescence",
        "### 100G, smoothed 25G, 125 us coalescence",
        "### bursty, 125 us coalescence, 1 % random loss",
        "## Multi-rate estimates, Range 30 %",
        "## Truth outside the probed rates",
        "## Sensitivity to Range and packets per rate",
        "## Each sub-stream read by its own truth",
        "## pathChirp: chirps on the same paths",
        "## BART following a step",
        "## Closed-loop strategies",
    ] {
        assert!(out.contains(heading), "missing {heading}:\n{out}");
    }
    // prcmt+bass at 64 packets, bursty + 125 us: the target is <= 10 %,
    // and 1 % random loss must not change that (random loss is not
    // congestion). At 100 Gbit/s a 64-packet stream lasts 46 us, inside
    // one or two receive batches: prcmt+bass must not guess there either
    // (it leaves such streams undecided).
    for path in [
        "### bursty, 125 us coalescence\n",
        "### bursty, 125 us coalescence, 1 % random loss\n",
        "### 100G, bursty 25G, 125 us coalescence\n",
        "### 100G, smoothed 25G, 125 us coalescence\n",
    ] {
        let table = out.split(path).nth(1).unwrap();
        let head = table.lines().find(|l| l.starts_with("| method |")).unwrap();
        let column = head
            .split('|')
            .position(|c| c.trim() == "64")
            .unwrap_or_else(|| panic!("no 64-packet column, {path}: {head}"));
        let row = table
            .lines()
            .find(|l| l.starts_with("| prcmt+bass |"))
            .expect("prcmt+bass row");
        let cell = row.split('|').nth(column).unwrap().trim();
        let wrong: f64 = cell.split(' ').next().unwrap().parse().unwrap();
        assert!(wrong <= 10.0, "prcmt+bass at 64 packets, {path}: {cell}");
    }
    // Every plot is a real PNG of some size.
    let plots: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("plot: "))
        .collect();
    // Gaps, seven decision and four CDF plots, sensitivity, two tracking,
    // four rate-control cells, eight TCPW friendliness pairs, the BBE
    // trace.
    assert_eq!(plots.len(), 28, "{out}");
    for name in [
        "rate-control-bursty-rtt-30-ms.png",
        "tcpw-friendliness-bbe-newreno-loss-1.png",
        "tcpw-bbe-trace.png",
    ] {
        assert!(plots.iter().any(|p| p.ends_with(name)), "{name}: {out}");
    }
    for p in plots {
        let bytes = std::fs::read(p).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{p}");
        assert!(bytes.len() > 10_000, "{p}: {} bytes", bytes.len());
    }
}

#[test]
fn eval_flags_are_checked() {
    let o = Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args(["eval", "--quick", "--jobs", "0"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("'0' for '--jobs <JOBS>'"));
}
