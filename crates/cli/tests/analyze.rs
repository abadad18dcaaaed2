//! `tightlink analyze` end to end: the real binary on the shipped sample
//! traces and on broken files.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use tightlink_core::Method;

fn sample(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../samples")
        .join(name)
}

mod common;
use common::{scratch, tightlink};

fn stdout(o: &Output) -> String {
    assert!(
        o.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).unwrap()
}

#[test]
fn csv_has_the_documented_columns_and_one_row_per_stream() {
    let p = sample("multi-rate-10g.csv.gz");
    let out = stdout(&tightlink(&[
        "analyze",
        p.to_str().unwrap(),
        "--format",
        "csv",
    ]));
    let mut lines = out.lines();
    assert_eq!(
        lines.next(),
        Some("stream_id,method,kind,avg_rate_bps,decision,abw_bps,bound")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 12);
    for r in &rows {
        assert_eq!(r.len(), 7);
        assert_eq!(r[1], "multirate");
        assert_eq!(r[2], "multi");
        assert_eq!(r[4], "", "no decision for multi-rate streams");
        assert!(["exact", "at_least", "at_most", "none"].contains(&r[6]));
        if r[6] != "none" {
            let abw: f64 = r[5].parse().unwrap();
            assert!(abw > 1e9 && abw < 2e10, "{abw}");
        }
    }
}

#[test]
fn single_rate_default_is_prcmt_bass_and_all_lists_every_method() {
    let p = sample("single-rate-10g.csv.gz");
    let out = stdout(&tightlink(&["analyze", p.to_str().unwrap(), "-f", "csv"]));
    for l in out.lines().skip(1) {
        let r: Vec<&str> = l.split(',').collect();
        assert_eq!(r[1], "prcmt+bass");
        assert!(["above", "below", "ambiguous"].contains(&r[4]), "{l}");
        assert_eq!(r[5], "");
    }
    let out = stdout(&tightlink(&[
        "analyze",
        p.to_str().unwrap(),
        "-f",
        "csv",
        "-m",
        "all",
    ]));
    assert_eq!(out.lines().count(), 1 + 12 * Method::ALL.len());
}

#[test]
fn json_is_valid_and_carries_the_fields() {
    let p = sample("single-rate-10g.csv.gz");
    let out = stdout(&tightlink(&[
        "analyze",
        p.to_str().unwrap(),
        "-f",
        "json",
        "-m",
        "all",
    ]));
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["streams"], 12);
    assert_eq!(v["metadata"]["capacity_bps"], "10000000000");
    let results = v["results"].as_array().unwrap();
    assert_eq!(results.len(), 12 * Method::ALL.len());
    for r in results {
        for key in [
            "stream_id",
            "method",
            "kind",
            "avg_rate_bps",
            "decision",
            "abw_bps",
            "bound",
            "reason",
        ] {
            assert!(r.get(key).is_some(), "missing {key} in {r}");
        }
    }
    let prcmt = results.iter().find(|r| r["method"] == "prcmt").unwrap();
    assert!(prcmt["send_rate_bps"].as_f64().unwrap() > 1e9);
}

#[test]
fn kind_can_be_forced() {
    let p = sample("multi-rate-10g.csv.gz");
    let out = stdout(&tightlink(&[
        "analyze",
        p.to_str().unwrap(),
        "-f",
        "csv",
        "--kind",
        "single",
    ]));
    assert!(out
        .lines()
        .skip(1)
        .all(|l| l.contains(",prcmt+bass,single,")));
}

#[test]
fn bad_input_names_file_line_and_reason() {
    let dir = scratch("cli");
    let f = dir.path().join("bad.csv");
    std::fs::write(
        &f,
        "# x=1\nstream_id,seq,size_bytes,send_ns,recv_ns\n0,0,9000,10,20\n0,1,9000,20\n",
    )
    .unwrap();
    let o = tightlink(&["analyze", f.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.csv:4: expected 5 columns, found 4"),
        "{err}"
    );

    let o = tightlink(&["analyze", dir.path().join("missing.csv").to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("cannot read"));
    let o = tightlink(&["analyze", f.to_str().unwrap(), "--method", "nope"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--method nope"));
    let o = tightlink(&["analyze", f.to_str().unwrap(), "--spike-up", "-1"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("--spike-up"));
}

#[test]
fn reads_standard_input() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args(["analyze", "-", "-f", "csv"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut trace = String::from("stream_id,seq,size_bytes,send_ns,recv_ns\n");
    // 40 packets at 8 Gbit/s received at 6.4 Gbit/s: above.
    for i in 0..40 {
        trace.push_str(&format!("5,{i},1000,{},{}\n", i * 1000, 7 + i * 1250));
    }
    child
        .stdin
        .take()
        .unwrap()
        .write_all(trace.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        s.lines().nth(1),
        Some("5,prcmt+bass,single,8000000000,above,,at_most")
    );
}

#[test]
fn queue_fit_reads_simulated_streams_given_the_capacity_and_asks_for_it_otherwise() {
    let dir = scratch("queue-fit");
    let trace = dir.path().join("m.trace");
    let truth = dir.path().join("t.csv");
    // Smoothed cross traffic (2.5 of 10 Gbit/s): rates 5.25-9.75 around 7.5.
    stdout(&tightlink(&[
        "simulate",
        "sim:cross=smoothed:2.5G,seed=3",
        "--streams",
        "20",
        "--centre",
        "7.5G",
        "-o",
        trace.to_str().unwrap(),
        "--truth",
        truth.to_str().unwrap(),
    ]));
    let truths: Vec<f64> = std::fs::read_to_string(&truth)
        .unwrap()
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(1).unwrap().parse().unwrap())
        .collect();
    let t = trace.to_str().unwrap();
    let out = stdout(&tightlink(&[
        "analyze",
        t,
        "-m",
        "queue-fit",
        "--capacity",
        "10G",
        "-f",
        "csv",
    ]));
    let mut within = 0;
    for (l, truth) in out.lines().skip(1).zip(&truths) {
        let r: Vec<&str> = l.split(',').collect();
        assert_eq!(r[1], "queue-fit");
        if r[6] == "exact" && (r[5].parse::<f64>().unwrap() / truth - 1.0).abs() <= 0.1 {
            within += 1;
        }
    }
    assert!(within >= 18, "{within} of 20 within 10 %:\n{out}");
    // The simulator wrote the tight link's capacity into the trace: read
    // without the flag, the same answers, and a note on where it came from.
    let o = tightlink(&["analyze", t, "-m", "queue-fit", "-f", "csv"]);
    assert_eq!(String::from_utf8_lossy(&o.stdout), out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("capacity is 10.000 Gbit/s, from the trace's metadata"),
        "{err}"
    );
    // Without one anywhere it answers nothing, and says why.
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(text.contains("# capacity_bps=10000000000\n"));
    let bare = dir.path().join("bare.trace");
    std::fs::write(&bare, text.replace("# capacity_bps=10000000000\n", "")).unwrap();
    let b = bare.to_str().unwrap();
    let out = stdout(&tightlink(&["analyze", b, "-m", "queue-fit", "-f", "json"]));
    assert!(out.contains("--capacity"), "{out}");
    assert!(!out.contains("\"exact\""), "{out}");
    // Named for a method that never reads it, the capacity is refused.
    let o = tightlink(&["analyze", b, "-m", "topp", "--capacity", "10G"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success() && err.contains("topp does not read"),
        "{err}"
    );
}
