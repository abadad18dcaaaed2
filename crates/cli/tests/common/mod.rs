//! What the CLI's integration tests share: running the built binary.
// Each test crate uses part of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// A fresh directory for one test's files, under the system's temporary
/// directory; it is removed when the value drops, pass or fail.
pub fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("tl-{name}-"))
        .tempdir()
        .expect("create a scratch directory")
}

/// Runs `tightlink ARGS` to completion.
pub fn tightlink(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args(args)
        .output()
        .expect("run tightlink")
}

/// Runs `tightlink ARGS`: (succeeded, stdout, stderr) as text.
pub fn tightlink_text(args: &[&str]) -> (bool, String, String) {
    let o = tightlink(args);
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Whether a real-path run lost 5 % or more of the host's CPU time to the
/// hypervisor (its `host_stolen_share`, the tool's own warning share); if
/// so the run must say so in a warning. Its answer may then read low, by
/// more than the share (a stalled vCPU stalls the pacing and any shaper
/// on the host): tests of a bound or a figure accept such a low answer,
/// never a high one.
pub fn host_spoiled(v: &serde_json::Value) -> bool {
    let stolen = v["host_stolen_share"].as_f64().unwrap_or(0.0);
    if stolen < 0.05 {
        return false;
    }
    let warned = v["warnings"].as_array().is_some_and(|w| {
        w.iter().any(|w| {
            w.as_str()
                .is_some_and(|w| w.contains("the hypervisor took"))
        })
    });
    assert!(warned, "{:.1} % stolen and no warning: {v}", stolen * 100.0);
    true
}

/// Runs `one` up to `n` times, until it passes; fails with every
/// attempt's reason. For measurements on real packets that a stalled
/// core can spoil in one run (small VMs change speed from hour to hour);
/// a wrong method or truth is wrong in every attempt. After a failed attempt the host is read
/// ([`host_after_a_failure`]) and, while the hypervisor takes its CPU,
/// the next attempt waits: each failure says what the host did then.
pub fn within_attempts(n: usize, what: &str, mut one: impl FnMut() -> Result<(), String>) {
    let mut failures = Vec::new();
    for attempt in 1..=n {
        match one() {
            Ok(()) => {
                if !failures.is_empty() {
                    eprintln!("{what}: passed in attempt {attempt} after {failures:?}");
                }
                return;
            }
            Err(e) => {
                let host = if attempt < n {
                    host_after_a_failure()
                } else {
                    stolen_over(HOST_READ).map_or_else(String::new, |s| {
                        format!(" (then {:.1} % of the CPU time stolen)", s * 100.0)
                    })
                };
                failures.push(format!("attempt {attempt}: {e}{host}"));
            }
        }
    }
    panic!("{what}: {failures:#?}");
}

/// How long the host is read after a failed attempt; also the least
/// pause before the next (degraded stretches last seconds to minutes).
const HOST_READ: std::time::Duration = std::time::Duration::from_secs(5);

/// The longest wait for the host after one failed attempt, and in all the
/// tests of one binary: a VM whose CPU the hypervisor takes degrades for
/// minutes, and attempts made in that stretch fail together whatever the
/// code does; CI must still end within its time.
const HOST_WAIT_PER_FAILURE: std::time::Duration = std::time::Duration::from_secs(30);
const HOST_WAIT_PER_BINARY: std::time::Duration = std::time::Duration::from_secs(120);

static HOST_WAITED_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The share of CPU time the hypervisor took over `span`; `None` where
/// `/proc/stat` cannot tell.
fn stolen_over(span: std::time::Duration) -> Option<f64> {
    stolen_and_late_over(span).map(|(share, _)| share)
}

/// As [`stolen_over`], with how late this thread woke from 1 ms sleeps
/// meanwhile (the longest delay, in ms): a host can stall its threads
/// while reporting nothing stolen.
fn stolen_and_late_over(span: std::time::Duration) -> Option<(f64, f64)> {
    let before = tightlink_sys::cpu_time::read().ok()?;
    let start = std::time::Instant::now();
    let mut latest_ms = 0.0f64;
    while start.elapsed() < span {
        let asked = std::time::Duration::from_millis(1);
        let t = std::time::Instant::now();
        std::thread::sleep(asked);
        latest_ms = latest_ms.max((t.elapsed().saturating_sub(asked)).as_secs_f64() * 1e3);
    }
    let after = tightlink_sys::cpu_time::read().ok()?;
    Some((
        tightlink_sys::cpu_time::stolen_share(before, after)?,
        latest_ms,
    ))
}

/// After a failed attempt: reads the CPU time stolen over [`HOST_READ`]
/// and, while it is at least the tool's warning share, reads again, up
/// to [`HOST_WAIT_PER_FAILURE`] (within [`HOST_WAIT_PER_BINARY`]). The
/// next attempt is judged as the first was; only when it starts moves.
/// Says what it saw, for the failure's message.
fn host_after_a_failure() -> String {
    use std::sync::atomic::Ordering;
    let limit = tightlink_sys::cpu_time::STOLEN_SHARE_WARNING;
    let start = std::time::Instant::now();
    let mut seen = Vec::new();
    let mut latest_ms = 0.0f64;
    loop {
        let Some((share, late_ms)) = stolen_and_late_over(HOST_READ) else {
            return String::new();
        };
        seen.push(share);
        latest_ms = latest_ms.max(late_ms);
        let waited = start.elapsed();
        let budget_left = HOST_WAIT_PER_BINARY
            .as_millis()
            .saturating_sub(u128::from(HOST_WAITED_MS.load(Ordering::Relaxed)));
        if share < limit || waited >= HOST_WAIT_PER_FAILURE || waited.as_millis() >= budget_left {
            HOST_WAITED_MS.fetch_add(waited.as_millis() as u64, Ordering::Relaxed);
            let shares: Vec<String> = seen.iter().map(|s| format!("{:.1}", s * 100.0)).collect();
            return format!(
                " (then {} % of the CPU time stolen, over {} s; 1 ms sleeps woke up to {latest_ms:.1} ms late)",
                shares.join(", "),
                waited.as_secs()
            );
        }
    }
}

/// Where the stored snapshots of what users see live.
pub fn snapshot_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots")
}

/// Compares `actual` with the stored snapshot `name` (or writes it when
/// blessing), with a diff of the first differing line on failure.
pub fn check_snapshot(name: &str, actual: &str) {
    let path = snapshot_dir().join(name);
    if std::env::var_os("TIGHTLINK_BLESS").is_some() {
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with TIGHTLINK_BLESS=1)", path.display()));
    if expected != actual {
        let line = expected
            .lines()
            .zip(actual.lines())
            .position(|(a, b)| a != b)
            .unwrap_or(expected.lines().count().min(actual.lines().count()));
        panic!(
            "{name} changed at line {}:\n  was: {:?}\n  now: {:?}",
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}
