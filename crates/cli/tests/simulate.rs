//! `tightlink simulate` and `estimate --save-trace` / `trace:` replay, end
//! to end through real files.

mod common;
use common::{scratch, tightlink};

fn ok(o: &std::process::Output) -> String {
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn simulate_writes_a_trace_and_truth_that_analyze_reads() {
    let d = scratch("sim");
    let trace = d.path().join("t.csv.gz");
    let truth = d.path().join("truth.csv");
    ok(&tightlink(&[
        "simulate",
        "sim:capacity=10G,cross=cbr:3G,coalescence=off,seed=4",
        "-o",
        trace.to_str().unwrap(),
        "--truth",
        truth.to_str().unwrap(),
        "--kind",
        "single",
        "--rate",
        "5G,9G",
        "--streams",
        "4",
        "--packets",
        "100",
    ]));
    // Truth: one row per stream, about 10 - 3 = 7 Gbit/s under CBR.
    let rows: Vec<Vec<f64>> = std::fs::read_to_string(&truth)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(rows.len(), 4);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r[0], i as f64);
        assert!((r[1] / 7e9 - 1.0).abs() < 0.03, "{r:?}");
        assert!(r[2] <= r[1] && r[1] <= r[3], "{r:?}");
    }
    // The trace: 4 single-rate streams of 100 packets at 5 and 9 Gbit/s;
    // on a quiet path PRC-MT + BASS calls 5 below and 9 above 7 Gbit/s.
    let csv = ok(&tightlink(&[
        "analyze",
        trace.to_str().unwrap(),
        "--method",
        "prcmt+bass",
        "--format",
        "csv",
    ]));
    let lines: Vec<&str> = csv.lines().skip(1).collect();
    assert_eq!(lines.len(), 4, "{csv}");
    for (i, l) in lines.iter().enumerate() {
        let f: Vec<&str> = l.split(',').collect();
        let rate: f64 = f[3].parse().unwrap();
        let want = if i % 2 == 0 { 5e9 } else { 9e9 };
        assert!((rate / want - 1.0).abs() < 0.01, "{l}");
        assert_eq!(f[4], if i % 2 == 0 { "below" } else { "above" }, "{l}");
    }
}

#[test]
fn a_saved_estimate_replays_to_the_same_answer() {
    let d = scratch("replay");
    let trace = d.path().join("run.csv");
    let truth = d.path().join("truth.csv");
    let first = ok(&tightlink(&[
        "estimate",
        "sim:seed=3",
        "--json",
        "--save-trace",
        trace.to_str().unwrap(),
        "--save-truth",
        truth.to_str().unwrap(),
    ]));
    let target = format!("trace:{}", trace.display());
    let again = ok(&tightlink(&["estimate", &target, "--json"]));
    let a: serde_json::Value = serde_json::from_str(&first).unwrap();
    let b: serde_json::Value = serde_json::from_str(&again).unwrap();
    for key in [
        "available_bandwidth_bps",
        "bound",
        "low_bps",
        "high_bps",
        "probe_bytes",
        "streams",
    ] {
        assert_eq!(a[key], b[key], "{key}: {first} vs {again}");
    }
    assert!(b["truth_bps"].is_null(), "a replay has no truth");
    let rows = std::fs::read_to_string(&truth).unwrap().lines().count() - 1;
    assert_eq!(rows as u64, a["streams"].as_u64().unwrap());
    // Replaying with another method diverges at once, with a clear error.
    let o = tightlink(&["estimate", &target, "--method", "prcmt"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("diverges") || err.contains("stream"), "{err}");
}

#[test]
fn bad_simulate_flags_say_which() {
    let d = scratch("bad");
    let out = d.path().join("x.csv");
    let o = out.to_str().unwrap();
    for (args, needle) in [
        (
            vec!["simulate", "-o", o, "--kind", "single", "--rate", "20G"],
            "--rate: 20.000 Gbit/s is outside what the sender's link sends",
        ),
        (
            vec!["simulate", "-o", o, "--kind", "single", "--rate", "fast"],
            "'fast' for '--rate <RATE>': 'fast' is not a rate",
        ),
        (vec!["simulate", "-o", o, "--range", "1.5"], "--range"),
        // Another kind's flag would shape nothing: refused, not ignored.
        (
            vec!["simulate", "-o", o, "--rate", "5G"],
            "--rate shapes --kind single streams, not --kind multi",
        ),
        (
            vec!["simulate", "-o", o, "--kind", "chirp", "--mean-gap", "5ms"],
            "--mean-gap shapes --kind pairs streams",
        ),
        (vec!["simulate", "sim:capacity=oops", "-o", o], "capacity"),
        (
            vec!["estimate", "trace:/nonexistent/run.csv"],
            "/nonexistent/run.csv",
        ),
    ] {
        let r = tightlink(&args);
        assert!(!r.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&r.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
