//! Real probing across network namespaces: sender -> router -> receiver,
//! joined by veth, a `tbf` bottleneck on the router, `tightlink server` in
//! the receiver namespace and `tightlink estimate` in the sender's, both
//! the real binary. Needs root (CI runs as root); elsewhere each test says
//! it was skipped, unless TIGHTLINK_REQUIRE_NETNS=1 makes that a failure.
//!
//! Addresses are 10.201.x.0/24 inside namespaces these tests create and
//! remove (also when a test fails: the guard's Drop). Routers' receive
//! work is steered to the other CPU with RPS (measured: without it the
//! forwarding path runs inside the sender's `send` and a paced sender
//! asking 300 Mbit/s got 210).

use std::io::Write;
use std::os::fd::AsRawFd;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

mod common;
use common::scratch;

static ONE_LAB_AT_A_TIME: Mutex<()> = Mutex::new(());

fn sh(cmd: &str) -> Result<String, String> {
    let o = Command::new("sh")
        .arg("-c")
        .arg(cmd)
        .output()
        .map_err(|e| format!("{cmd}: {e}"))?;
    if o.status.success() {
        Ok(String::from_utf8_lossy(&o.stdout).into_owned())
    } else {
        Err(format!(
            "{cmd}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))
    }
}

fn may_run() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let ip = sh("ip netns list").is_ok();
    if root && ip {
        return true;
    }
    let why = if root {
        "`ip netns` unusable"
    } else {
        "not root"
    };
    if std::env::var("TIGHTLINK_REQUIRE_NETNS").as_deref() == Ok("1") {
        panic!("namespace tests required but {why}");
    }
    eprintln!("skipped: namespace tests need root and iproute2 ({why})");
    false
}

/// Three namespaces `<p>s`, `<p>r`, `<p>d`; removed on drop, with the
/// server process.
struct Lab {
    prefix: String,
    server: Option<Child>,
}

const SENDER_IP: &str = "10.201.1.1";
const SERVER_IP: &str = "10.201.2.2";

impl Lab {
    /// `router_tbf`: tbf on the router's egress toward the receiver;
    /// `reverse_tbf`: toward the sender; `sender_tbf`: on the sender's
    /// own interface. Each `(rate, burst)`. Only the router's receive
    /// work is steered (to CPU 1), as `scripts/netns-200m.sh` does: with
    /// the sender's and receiver's also pinned to CPU 0 as well, a slow
    /// host reads the quiet 200 Mbit/s tbf well low where the script
    /// reads it right.
    fn up(router_tbf: Option<&str>, reverse_tbf: Option<&str>, sender_tbf: Option<&str>) -> Lab {
        let prefix = format!("tlt{}", std::process::id() % 100_000);
        let lab = Lab {
            prefix: prefix.clone(),
            server: None,
        };
        let (s, r, d) = (lab.ns("s"), lab.ns("r"), lab.ns("d"));
        let p = &prefix;
        let script = format!(
            "set -e
            ip netns add {s}; ip netns add {r}; ip netns add {d}
            ip link add {p}a type veth peer name {p}b
            ip link add {p}c type veth peer name {p}e
            ip link set {p}a netns {s}; ip link set {p}b netns {r}
            ip link set {p}c netns {r}; ip link set {p}e netns {d}
            ip -n {s} addr add {SENDER_IP}/24 dev {p}a
            ip -n {r} addr add 10.201.1.2/24 dev {p}b
            ip -n {r} addr add 10.201.2.1/24 dev {p}c
            ip -n {d} addr add {SERVER_IP}/24 dev {p}e
            for n in {s} {r} {d}; do ip -n $n link set lo up; done
            ip -n {s} link set {p}a up; ip -n {r} link set {p}b up
            ip -n {r} link set {p}c up; ip -n {d} link set {p}e up
            ip -n {s} route add default via 10.201.1.2
            ip -n {d} route add default via 10.201.2.1
            ip netns exec {r} sysctl -qw net.ipv4.ip_forward=1
            ip netns exec {r} sh -c 'echo 2 > /sys/class/net/{p}b/queues/rx-0/rps_cpus; echo 2 > /sys/class/net/{p}c/queues/rx-0/rps_cpus'
            "
        );
        sh(&script).unwrap();
        let tbf = |ns: &str, dev: &str, spec: &str| {
            sh(&format!(
                "ip netns exec {ns} tc qdisc add dev {dev} root tbf {spec}"
            ))
            .unwrap();
        };
        if let Some(t) = router_tbf {
            tbf(&r, &format!("{p}c"), t);
        }
        if let Some(t) = reverse_tbf {
            tbf(&r, &format!("{p}b"), t);
        }
        if let Some(t) = sender_tbf {
            tbf(&s, &format!("{p}a"), t);
        }
        lab
    }

    /// The usual asymmetric path: 200 Mbit/s toward the far end, 150
    /// Mbit/s back.
    fn up_200_100() -> Lab {
        Lab::up(
            Some("rate 200mbit burst 3000 limit 100000"),
            Some("rate 100mbit burst 3000 limit 100000"),
            None,
        )
    }

    fn up_200_150() -> Lab {
        Lab::up(
            Some("rate 200mbit burst 3000 limit 100000"),
            Some("rate 150mbit burst 3000 limit 100000"),
            None,
        )
    }

    fn ns(&self, which: &str) -> String {
        format!("{}{which}", self.prefix)
    }

    /// Packets the router's tbf toward the server has dropped so far.
    fn forward_tbf_drops(&self) -> u64 {
        let out = sh(&format!(
            "tc -n {} -s qdisc show dev {}c",
            self.ns("r"),
            self.prefix
        ))
        .unwrap();
        out.split("dropped ")
            .nth(1)
            .and_then(|t| t.split(',').next())
            .and_then(|n| n.trim().parse().ok())
            .unwrap_or_else(|| panic!("no drop count in: {out}"))
    }

    fn start_server(&mut self, extra: &[&str]) {
        let mut args = vec!["server", "--bind", SERVER_IP];
        args.extend_from_slice(extra);
        self.start_far_end(&args, &format!("ss -ltn | grep -q {SERVER_IP}:7447"));
    }

    /// `tightlink reflector` on the receiver's address, port 862.
    fn start_reflector(&mut self) {
        self.start_far_end(
            &["reflector", "--bind", SERVER_IP],
            &format!("ss -lun | grep -q {SERVER_IP}:862"),
        );
    }

    /// Runs `tightlink ARGS` in the receiver namespace until the lab is
    /// dropped; waits until `ready` (a shell test there) succeeds.
    fn start_far_end(&mut self, args: &[&str], ready: &str) {
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns("d"),
                env!("CARGO_BIN_EXE_tightlink"),
            ])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        self.server = Some(child);
        for _ in 0..100 {
            if sh(&format!("ip netns exec {} {ready}", self.ns("d"))).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("{args:?} did not start listening");
    }

    fn estimate(&self, args: &[&str]) -> (bool, String, String) {
        self.estimate_to(SERVER_IP, args)
    }

    fn estimate_to(&self, target: &str, args: &[&str]) -> (bool, String, String) {
        let o = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.ns("s"),
                env!("CARGO_BIN_EXE_tightlink"),
                "estimate",
                target,
            ])
            .args(args)
            .output()
            .unwrap();
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).into_owned(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    }

    fn estimate_json(&self, args: &[&str]) -> serde_json::Value {
        self.estimate_json_to(SERVER_IP, args)
    }

    fn estimate_json_to(&self, target: &str, args: &[&str]) -> serde_json::Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let (ok, out, err) = self.estimate_to(target, &a);
        assert!(ok, "estimate {args:?} failed: {err}");
        serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
    }

    fn server_pid(&self) -> u32 {
        self.server.as_ref().unwrap().id()
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Some(mut c) = self.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for n in ["s", "r", "d"] {
            let _ = sh(&format!("ip netns del {}", self.ns(n)));
        }
    }
}

fn rel(est: f64, truth: f64) -> f64 {
    est / truth - 1.0
}

/// An estimate's relative error, where a low reading is excused by what
/// the hypervisor took while it ran (its report's `host_stolen_share`):
/// the tbf runs on this host and stalls with it, delivering less than its
/// rate by about that share (`lab check` prints both), and the probes'
/// stalls read as queueing besides. Below the
/// warning's share the share itself is added back; from it on, the run
/// must say so (the warning) and a low reading is then what it warned of.
/// A high reading, or a low one with nothing stolen, counts in full.
fn off(v: &serde_json::Value, truth: f64) -> f64 {
    let r = rel(v["available_bandwidth_bps"].as_f64().unwrap(), truth);
    let stolen = v["host_stolen_share"].as_f64().unwrap_or(0.0);
    match r {
        r if r >= 0.0 => r,
        _ if common::host_spoiled(v) => 0.0,
        r => (r + stolen).min(0.0),
    }
}

/// The median of three or more `off` values, for a message too.
fn median_off(runs: &[serde_json::Value], truth: f64) -> f64 {
    let mut e: Vec<f64> = runs.iter().map(|v| off(v, truth)).collect();
    e.sort_by(f64::total_cmp);
    e[e.len() / 2]
}

/// Runs `round` up to twice, until it passes; fails with both rounds'
/// reasons. For the accuracy tests (median of three runs): on a 2-vCPU
/// host the sender falls behind its schedule in some streams (the
/// router's and the far end's receive work land on its core), and for
/// seconds at a time estimates can read 15-20 % low with nothing stolen,
/// most often toward the reflector. A reflector that measured the wrong
/// direction reads 150, not 200, in every round.
fn within_two_rounds(what: &str, round: impl FnMut() -> Result<(), String>) {
    common::within_attempts(2, what, round);
}

/// For tests whose point is that an estimate still comes right (after a
/// flood, with a key, behind a shaped sender), not its precision: within
/// 10 % (`off`), or an answer that says why it is not steady (a warning)
/// with a range that holds the truth (a run in a few seconds of bad
/// scheduling swings, and says so).
fn holds(v: &serde_json::Value, truth: f64) -> bool {
    let (lo, hi) = (
        v["low_bps"].as_f64().unwrap_or(f64::NAN),
        v["high_bps"].as_f64().unwrap_or(f64::NAN),
    );
    let warned = v["warnings"].as_array().is_some_and(|w| !w.is_empty());
    off(v, truth).abs() < 0.10 || (warned && lo <= truth && truth <= hi)
}

/// The median of three or more runs within 10 % (`off`), or the runs.
fn median_within(runs: &[serde_json::Value], truth: f64) -> Result<(), String> {
    median_between(runs, truth, -0.10)
}

/// The median of three or more runs `off` by more than `low` (negative)
/// and less than +10 %, or the runs.
fn median_between(runs: &[serde_json::Value], truth: f64, low: f64) -> Result<(), String> {
    let m = median_off(runs, truth);
    if low < m && m < 0.10 {
        Ok(())
    } else {
        Err(format!("{:?} vs {truth}", brief(runs)))
    }
}

/// Every run exact: one that is not fails its round (on a loaded host a
/// run in a few has answered a range), not the test.
fn all_exact(runs: &[serde_json::Value]) -> Result<(), String> {
    match runs.iter().find(|v| v["bound"] != "exact") {
        Some(v) => Err(format!("not exact: {v}")),
        None => Ok(()),
    }
}

/// Every run `exact`, or `at_least` because this host fell behind its
/// schedule in half its streams (`host_limited`, the `host-lower-bound`
/// warning): the honest word on a loaded host, whose figure the median
/// check still holds to the truth. A clean-clone CI run on 2 cores had
/// one such run in each round toward the reflector (204.9 and 196.6
/// Mbit/s for 200).
fn exact_or_host_bound(runs: &[serde_json::Value]) -> Result<(), String> {
    let host_bound = |v: &serde_json::Value| {
        v["bound"] == "at_least"
            && v["host_limited"] == true
            && v["warning_codes"]
                .as_array()
                .is_some_and(|c| c.iter().any(|w| w == "host-lower-bound"))
    };
    match runs
        .iter()
        .find(|v| v["bound"] != "exact" && !host_bound(v))
    {
        Some(v) => Err(format!("neither exact nor a host-paced lower bound: {v}")),
        None => Ok(()),
    }
}

/// No run dropped a probe (a late sender's, a full ring's): one that did
/// fails its round. One clean-clone CI run (hypervisor steal 15-20 %)
/// dropped 29 late probes of a `--backend packet` run.
fn every_probe_kept(runs: &[serde_json::Value]) -> Result<(), String> {
    match runs
        .iter()
        .find(|v| !v["drops"].as_object().is_some_and(|d| d.is_empty()))
    {
        Some(v) => Err(format!("dropped probes: {v}")),
        None => Ok(()),
    }
}

/// How low the reflected forward estimates may read (see the reflector
/// tests).
const REFLECTED_LOW: f64 = -0.25;

/// Estimate and stolen share of each run, for failure messages.
fn brief(runs: &[serde_json::Value]) -> Vec<String> {
    runs.iter()
        .map(|v| {
            format!(
                "{:.1} Mbit/s ({:.1} % stolen)",
                v["available_bandwidth_bps"].as_f64().unwrap_or(f64::NAN) / 1e6,
                v["host_stolen_share"].as_f64().unwrap_or(0.0) * 100.0
            )
        })
        .collect()
}

/// The reference path: 200 Mbit/s tbf with a small burst on the router's
/// egress, no cross traffic. Every strategy that answers a number must be
/// within 10 % of 200 Mbit/s (tbf counts the frame without FCS, the layer
/// tightlink reports), and the byte budget stays small. The default
/// method's figure is the median of three runs, as everywhere here (a
/// single run can read 15-20 % low on a busy host, see
/// `within_two_rounds`).
#[test]
fn forward_estimate_through_a_200_mbit_tbf() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up(Some("rate 200mbit burst 3000 limit 100000"), None, None);
    lab.start_server(&[]);
    within_two_rounds("default", || {
        let mut runs = Vec::new();
        for _ in 0..3 {
            let v = lab.estimate_json(&[]);
            eprintln!("default: {v}");
            assert!(v["sender_bottleneck_bps"].is_null(), "{v}");
            assert!(v["rate_layer"].as_str().unwrap().contains("Ethernet frame"));
            // A host whose sender fell behind in most streams (17 of 20
            // once, with a fifth of its CPU time stolen) resends them
            // and may spend more: that round is tried again.
            let small = v["probe_bytes"].as_u64().unwrap() < 10_000_000;
            if v["bound"] != "exact" || !small || v["wall_s"].as_f64().unwrap() >= 2.0 {
                return Err(format!("not exact, small and quick: {v}"));
            }
            runs.push(v);
        }
        median_within(&runs, 200e6)
    });
    // PRC-MT's binary search may end on a bound, and one wrong decision
    // early sends it astray (seen: 1 run in 8 at half the rate; once in
    // CI 2 of 3 runs ended at 150 Mbit/s "exact"); the median of five
    // runs must be within 10 %, in up to two rounds (a clean-clone CI
    // run with senders late in 1-6 streams per run: 57.1, 147.4, 167.1,
    // 177.5, 186.3).
    within_two_rounds("prcmt", || {
        let prcmt: Vec<serde_json::Value> = (0..5)
            .map(|_| {
                let v = lab.estimate_json(&["--method", "prcmt"]);
                eprintln!("prcmt: {v}");
                v
            })
            .collect();
        if median_off(&prcmt, 200e6).abs() < 0.10 {
            Ok(())
        } else {
            Err(format!("prcmt runs {:?}", brief(&prcmt)))
        }
    });
}

/// A 200 Mbit/s tbf with a 256 KB bucket (a shaper set up for bursts, as
/// policers and cloud rate limits are): a multi-rate stream of 5 x 32
/// frames of 1514 bytes (242 KB) passes on the bucket unqueued, and the
/// streams alone read 279-308 Mbit/s (measured by hand before the shaper
/// trains). The default's shaper trains see the bucket: the median of
/// three runs is 200 within 10 %, and at least two of them say `shaped`
/// with a warning that names the token bucket (a run whose second train
/// the sender sent late reads like the streams: 4 of 4 and 3 of 4 runs
/// said it by hand).
#[test]
fn a_tbf_with_a_large_bucket_reads_its_sustained_rate() {
    a_large_bucket_reads_its_sustained_rate("rate 200mbit burst 256k limit 400000");
}

/// The same with a 1 MB bucket, larger than the first train's head: by
/// hand the streams read 307-503 Mbit/s or "at least 1000" before, and
/// the longer train reads 199.4-200.2 in 10 of 10 runs.
#[test]
fn a_tbf_with_a_bucket_larger_than_the_train_reads_its_sustained_rate() {
    a_large_bucket_reads_its_sustained_rate("rate 200mbit burst 1mb limit 2000000");
}

fn a_large_bucket_reads_its_sustained_rate(tbf: &str) {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up(Some(tbf), None, None);
    lab.start_server(&[]);
    within_two_rounds(tbf, || {
        let runs: Vec<serde_json::Value> = (0..3)
            .map(|_| {
                let v = lab.estimate_json(&[]);
                eprintln!("{tbf}: {v}");
                v
            })
            .collect();
        let said = runs
            .iter()
            .filter(|v| {
                v["stop"] == "shaped"
                    && v["warnings"].as_array().is_some_and(|w| {
                        w.iter()
                            .any(|x| x.as_str().is_some_and(|x| x.contains("token bucket")))
                    })
            })
            .count();
        if said < 2 {
            return Err(format!("{said} of 3 said shaped: {:?}", brief(&runs)));
        }
        median_within(&runs, 200e6)
    });
}

/// Reverse mode measures the download direction: the router shapes it
/// at 150 Mbit/s while the upload is shaped at 200. Median of three runs,
/// as for the raw backends below: on a clean-clone CI run one run's
/// streams swung between 104 and 152 Mbit/s on this quiet path and it
/// answered their median, 128 Mbit/s, with the swing warning (alone,
/// four runs in four read 150-153 "stable").
#[test]
fn reverse_estimate_measures_the_other_direction() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up_200_150();
    lab.start_server(&[]);
    within_two_rounds("reverse", || {
        let runs: Vec<serde_json::Value> = (0..3)
            .map(|_| {
                let v = lab.estimate_json(&["-R"]);
                eprintln!("reverse: {v}");
                v
            })
            .collect();
        all_exact(&runs)?;
        median_within(&runs, 150e6)
    });
}

/// A TWAMP-light reflector as the far end: its receive stamps measure the
/// path toward it (200 Mbit/s), not the return path (100 Mbit/s here),
/// with the UDP and the AF_PACKET sender. Median of three runs each, in up
/// to two rounds (`within_two_rounds`), held to -25..+10 % of 200: on a
/// 2-vCPU host the reflected estimates can read 10-25 % low for minutes
/// at a time while the server's read right on the same path,
/// interleaved. Not explained: the replies cross the router during the
/// stream where a server's records come after it, but a flood through the
/// tbf delivered 198-200 with 200 Mbit/s going back as without.
/// The server-based tests hold the estimator itself to 10 %; a reflector
/// that measured the return path would read 100.
#[test]
fn a_twamp_reflector_measures_the_path_toward_it() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up_200_100();
    lab.start_reflector();
    let target = format!("twamp:{SERVER_IP}");
    for args in [&[][..], &["--backend", "packet"][..]] {
        within_two_rounds("twamp", || {
            let runs: Vec<serde_json::Value> = (0..3)
                .map(|_| {
                    let v = lab.estimate_json_to(&target, args);
                    eprintln!("twamp {args:?}: {v}");
                    v
                })
                .collect();
            exact_or_host_bound(&runs)?;
            every_probe_kept(&runs)?;
            median_between(&runs, 200e6, REFLECTED_LOW)
        });
    }
}

/// `--both` toward `tightlink reflector`: forward its receive stamps read
/// the 200 Mbit/s upload (held to -25..+10 %, as above); reverse it holds
/// each train and sends it back at its schedule, so this host's stamps
/// read the 100 Mbit/s download (within 10 %). Median of three runs, in
/// up to two rounds (`within_two_rounds`).
#[test]
fn a_reflector_holding_trains_measures_both_directions() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up_200_100();
    lab.start_reflector();
    let target = format!("twamp:{SERVER_IP}");
    within_two_rounds("both", || {
        let runs: Vec<serde_json::Value> = (0..3)
            .map(|_| {
                let v = lab.estimate_json_to(&target, &["--both"]);
                eprintln!("both: {v}");
                v
            })
            .collect();
        let mut why = Vec::new();
        for (dir, truth, low) in [("forward", 200e6, REFLECTED_LOW), ("reverse", 100e6, -0.10)] {
            let one_way: Vec<serde_json::Value> = runs.iter().map(|v| v[dir].clone()).collect();
            if let Err(e) =
                exact_or_host_bound(&one_way).and_then(|()| median_between(&one_way, truth, low))
            {
                why.push(format!("{dir}: {e}"));
            }
        }
        if why.is_empty() {
            Ok(())
        } else {
            Err(why.join("; "))
        }
    });
}

/// The raw backends through the same path: AF_PACKET and AF_XDP senders
/// (forward) and the TPACKET_V3 ring (reverse) give estimates within 10 %
/// of the tbf rates, with every probe stamped. Each backend gets the
/// median of three runs: on a shared 2-core CI machine one multirate run
/// in a few has ended a bucket away.
#[test]
fn raw_backends_estimate_through_the_same_tbf() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up_200_150();
    lab.start_server(&[]);
    for (args, truth) in [
        (&["--backend", "packet"][..], 200e6),
        (&["--backend", "xdp"][..], 200e6),
        (&["--backend", "packet", "-R"][..], 150e6),
    ] {
        within_two_rounds(&format!("{args:?}"), || {
            let runs: Vec<serde_json::Value> = (0..3)
                .map(|_| {
                    let v = lab.estimate_json(args);
                    eprintln!("{args:?}: {v}");
                    v
                })
                .collect();
            every_probe_kept(&runs)?;
            median_within(&runs, truth)
        });
    }
    // xdp cannot receive: reverse mode says so instead of measuring.
    let (ok, _, err) = lab.estimate(&["--backend", "xdp", "-R"]);
    assert!(!ok && err.contains("use --backend packet or udp"), "{err}");
}

/// A server with a key refuses a wrong one and one without, and serves
/// the right one.
#[test]
fn a_wrong_key_is_refused() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let dir = scratch("keys");
    let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
    std::fs::write(&good, "s3cret-key\n").unwrap();
    std::fs::write(&bad, "guess\n").unwrap();
    let mut lab = Lab::up(Some("rate 200mbit burst 3000 limit 100000"), None, None);
    lab.start_server(&["--key-file", good.to_str().unwrap(), "--require-key"]);
    let (ok, _, err) = lab.estimate(&["--key-file", bad.to_str().unwrap()]);
    assert!(!ok && err.contains("wrong key"), "{err}");
    let (ok, _, err) = lab.estimate(&[]);
    assert!(!ok && err.contains("requires a key"), "{err}");
    // Two rounds for the served estimate: one clean-clone CI run read
    // 165.7 Mbit/s "swings" with 4 of 13 streams held at once (a pause of
    // the hosts), its range 129.9-195.3 short of the truth.
    within_two_rounds("the right key", || {
        let v = lab.estimate_json(&["--key-file", good.to_str().unwrap()]);
        if holds(&v, 200e6) {
            Ok(())
        } else {
            Err(v.to_string())
        }
    });
}

fn rss_kb(pid: u32) -> u64 {
    // `ip netns exec` execs the server in place: same pid.
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Enters a namespace on this thread only (setns affects the calling
/// thread; threads it spawns inherit it).
fn enter_netns(name: &str) {
    let f = std::fs::File::open(format!("/var/run/netns/{name}")).unwrap();
    // SAFETY: a valid namespace fd.
    let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns {name}: {}", std::io::Error::last_os_error());
}

/// While a session measures, a flood of malformed datagrams and of
/// well-formed probes of an unknown session hits its UDP port (from a host
/// beside the server, so the flood does not also congest the path): both are
/// counted by reason, the stream is still measured, the server's memory
/// stays flat, and it serves the next client.
#[test]
fn a_flood_leaves_the_server_serving_with_bounded_memory() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up(Some("rate 200mbit burst 3000 limit 100000"), None, None);
    lab.start_server(&[]);
    let pid = lab.server_pid();
    let rss_before = rss_kb(pid);
    // One round: a 400-probe stream under the flood, then the session's
    // drop counts. Two rounds: one clean-clone CI run received 353 of 400
    // (alone here 400 of 400 in every run, beside two busy loops too).
    let flooded_stream = || {
        let sender_ns = lab.ns("s");
        let server_ns = lab.ns("d");
        std::thread::spawn(move || {
            use tightlink_core::channel::{Channel, StreamRequest};
            use tightlink_wire::twamp::{ProbeRepr, SenderPacket};
            enter_netns(&sender_ns);
            let mut ch = tightlink_net::UdpChannel::connect(
                SERVER_IP,
                &tightlink_net::ClientOptions::default(),
            )
            .unwrap();
            let to = ch.server_udp();
            let req = |n: usize| {
                let gap = 1514.0 * 8e9 / 100e6;
                StreamRequest::from_send_times(
                    &(0..n).map(|i| (i as f64 * gap) as i64).collect::<Vec<_>>(),
                    1514,
                )
            };
            ch.probe(&req(20)).unwrap();
            // From the server's own namespace, so the flood does not share
            // the bottleneck with the probes (that would only test tbf).
            let flood = std::thread::spawn(move || {
                enter_netns(&server_ns);
                let s = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
                let mut unknown = vec![0u8; 200];
                ProbeRepr {
                    sequence: 0,
                    timestamp: Default::default(),
                    error_estimate: tightlink_wire::ErrorEstimate::from_u16(0),
                    warmup: false,
                    session: 7,
                    stream: 0,
                    position: 3,
                    stream_len: 10,
                    offset_ns: 0,
                }
                .emit(&mut SenderPacket::new_unchecked(&mut unknown[..]));
                let junk = vec![0xa5u8; 300];
                for i in 0..30_000u32 {
                    let _ = s.send_to(if i % 2 == 0 { &junk } else { &unknown }, to);
                }
            });
            let p = ch.probe(&req(400)).unwrap();
            flood.join().unwrap();
            // What the server's socket dropped over the two streams (the
            // flood fills it: those losses are the server host's).
            let socket_dropped = ch.side_report().host.map_or(0, |h| {
                h.drops
                    .iter()
                    .filter(|(name, _)| *name == "socket_overflow")
                    .map(|&(_, n)| n)
                    .sum::<u64>()
            });
            let d = ch.close_session().unwrap();
            (d, p.stream.received_count(), p.sender_late, socket_dropped)
        })
        .join()
        .unwrap()
    };
    let mut rounds = Vec::new();
    let drops = loop {
        let tbf_before = lab.forward_tbf_drops();
        let (drops, received, sender_late, socket_dropped) = flooded_stream();
        let tbf_drops = lab.forward_tbf_drops() - tbf_before;
        eprintln!(
            "drops {:?}, received {received}/400, sender late: {sender_late}, \
             tbf drops: {tbf_drops}, server socket dropped: {socket_dropped}",
            drops.nonzero()
        );
        rounds.push((received, sender_late, tbf_drops, socket_dropped));
        if received >= 380 || rounds.len() == 2 {
            break drops;
        }
    };
    // 380 or more of 400 received in one of two rounds. Where a round lost
    // more, whether the client's sender fell behind (its catch-up burst
    // can overflow the tbf's queue), the tbf's drops and the server
    // socket's say where.
    assert!(
        rounds.iter().any(|r| r.0 >= 380),
        "(received, sender late, tbf drops, server socket dropped): {rounds:?}"
    );
    use tightlink_wire::DropReason;
    assert!(drops.get(DropReason::NotTightlink) > 1_000, "{drops:?}");
    assert!(drops.get(DropReason::UnknownSession) > 1_000, "{drops:?}");
    let rss_after = rss_kb(pid);
    assert!(
        rss_after < rss_before + 20_000,
        "server memory grew from {rss_before} kB to {rss_after} kB"
    );
    // The next clients are served and read the path as the forward test
    // does, the median of three in up to two rounds: a single estimate on
    // this lab, flood or no flood, can read `swings`, and a clean-clone
    // CI run once had two of three read 18 % low after it.
    within_two_rounds("after the flood", || {
        let runs: Vec<serde_json::Value> = (0..3).map(|_| lab.estimate_json(&[])).collect();
        median_within(&runs, 200e6)
    });
}

/// Up to three runs, until one `holds`: the runs made, the last the one
/// to judge.
fn until_one_holds(
    mut run: impl FnMut() -> serde_json::Value,
    holds: impl Fn(&serde_json::Value) -> bool,
    what: &str,
) -> Vec<serde_json::Value> {
    let mut runs = Vec::new();
    for _ in 0..3 {
        let v = run();
        eprintln!("{what}: {v}");
        let done = holds(&v);
        runs.push(v);
        if done {
            break;
        }
    }
    runs
}

/// tbf on the sender's own interface: the kernel's transmit stamps are
/// taken after that queue, so they show the shaped gaps. The estimate is
/// still the shaped rate (send times are the schedule, not the stamps),
/// and the tool says the tight link is the sender's own.
#[test]
fn a_shaped_sender_interface_is_reported() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up(None, None, Some("rate 200mbit burst 3000 limit 200000"));
    lab.start_server(&[]);
    // Up to three runs, the first that holds the truth and reads the own
    // link within 10 % counts (one clean run in a stalled period read the
    // drain of its own queue off by more).
    let own_near = |v: &serde_json::Value| {
        v["sender_bottleneck_bps"]
            .as_f64()
            .is_some_and(|o| rel(o, 200e6).abs() < 0.10)
    };
    let runs = until_one_holds(
        || lab.estimate_json(&[]),
        |v| holds(v, 200e6) && own_near(v),
        "sender tbf",
    );
    let v = runs.last().unwrap();
    assert!(holds(v, 200e6), "{runs:#?}");
    let own = v["sender_bottleneck_bps"]
        .as_f64()
        .unwrap_or_else(|| panic!("the sender's own bottleneck was not reported: {runs:#?}"));
    assert!(rel(own, 200e6).abs() < 0.10, "{own}: {runs:#?}");
    // The verdict needs the answer near the own link's rate; a run that
    // read low (a stalled vCPU) says the own link was "faster than the
    // path beyond it". Up to three runs for the text.
    let humans: Vec<String> = (0..3)
        .map(|_| lab.estimate(&[]).1)
        .scan(false, |found, h| {
            (!*found).then(|| {
                *found = h.contains("so the tight link is the sender's own");
                h
            })
        })
        .collect();
    assert!(
        humans
            .last()
            .is_some_and(|h| h.contains("so the tight link is the sender's own")),
        "{humans:#?}"
    );
    // AF_PACKET frames pass the same qdisc and are stamped after it; up
    // to three runs, as above.
    let packet = until_one_holds(
        || lab.estimate_json(&["--backend", "packet"]),
        own_near,
        "sender tbf, packet backend",
    );
    assert!(
        own_near(packet.last().unwrap()),
        "packet backend: own bottleneck not reported or not within 10 %: {packet:#?}"
    );
    let _ = std::io::stderr().flush();
}

/// One fault's outcome: the estimate (or the error's first line) and the
/// time to answer.
struct FaultRun {
    fault: &'static str,
    target: &'static str,
    estimate_bps: Option<f64>,
    warnings: usize,
    reason: String,
    seconds: f64,
}

impl Lab {
    /// A `tightlink server` for "server", else a reflector.
    fn start_for(&mut self, target: &str) {
        if target == "server" {
            self.start_server(&[]);
        } else {
            self.start_reflector();
        }
    }

    fn nft(&self, rules: &str) {
        sh(&format!(
            "ip netns exec {} nft -f - <<'EOF'\n{rules}\nEOF",
            self.ns("r")
        ))
        .unwrap();
    }

    /// An estimate toward `target`, with `during` run 150 ms after it
    /// starts (a fault that strikes mid-session: those runs use Pathload's
    /// method, whose many streams take seconds).
    fn run_fault(
        &mut self,
        fault: &'static str,
        target: &'static str,
        during: Option<&dyn Fn(&mut Lab)>,
    ) -> FaultRun {
        let method = if during.is_some() {
            "pathload"
        } else {
            "multirate"
        };
        let to = if target == "server" {
            SERVER_IP.to_string()
        } else {
            format!("twamp:{SERVER_IP}")
        };
        let started = std::time::Instant::now();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.ns("s")])
            .arg(env!("CARGO_BIN_EXE_tightlink"))
            .args(["estimate", &to, "--json", "--method", method])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        if let Some(f) = during {
            std::thread::sleep(Duration::from_millis(150));
            f(self);
        }
        let o = child.wait_with_output().unwrap();
        let seconds = started.elapsed().as_secs_f64();
        let out = String::from_utf8_lossy(&o.stdout);
        let err = String::from_utf8_lossy(&o.stderr);
        let v: Option<serde_json::Value> = serde_json::from_str(&out).ok();
        FaultRun {
            fault,
            target,
            estimate_bps: v
                .as_ref()
                .and_then(|v| v["available_bandwidth_bps"].as_f64())
                .filter(|_| o.status.success()),
            warnings: v
                .as_ref()
                .and_then(|v| v["warnings"].as_array().map(|w| w.len()))
                .unwrap_or(0),
            reason: err.lines().last().unwrap_or("").to_string(),
            seconds,
        }
    }
}

/// The fault campaign: through the 200 Mbit/s router, random loss (1 %
/// and 5 % of UDP, nftables `numgen`), 10 % duplicated (nftables `dup`),
/// reordering (5 % of UDP through a 20 Mbit/s htb class beside the 200
/// Mbit/s one), the server restarted, the control connection cut and the
/// reflector stopped mid-session. Each ends with an estimate within 15 %
/// (or one that carries a warning) or an error that gives the reason,
/// within 15 s (control steps time out after 5 s); the table is printed.
#[test]
fn fault_campaign() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    if sh("which nft").is_err() {
        if std::env::var("TIGHTLINK_REQUIRE_NETNS").as_deref() == Ok("1") {
            panic!("the fault campaign needs nft (Debian: nftables)");
        }
        eprintln!("skipped: no nft");
        return;
    }
    let mut runs = Vec::new();
    let loss = |pct: u32| {
        format!(
            "table inet fault {{ chain faults {{ type filter hook forward priority 0;
 meta l4proto udp numgen random mod 100 < {pct} drop\n }}\n }}"
        )
    };
    for (fault, rules) in [
        ("loss 1 %", loss(1)),
        ("loss 5 %", loss(5)),
        (
            "duplicates 10 %",
            format!(
                "table ip fault {{ chain faults {{ type filter hook forward priority 0;
 ip daddr {SERVER_IP} meta l4proto udp numgen random mod 10 == 0 dup to {SERVER_IP}\n }}\n }}"
            ),
        ),
    ] {
        for target in ["server", "twamp"] {
            let mut lab = Lab::up(Some("rate 200mbit burst 3000 limit 100000"), None, None);
            lab.nft(&rules);
            lab.start_for(target);
            runs.push(lab.run_fault(fault, target, None));
        }
    }
    // Reordering: htb instead of tbf, 5 % of UDP toward the far end in a
    // 20 Mbit/s class (nftables sets the priority htb classifies by; this
    // kernel has no fw classifier), the rest at 200 Mbit/s.
    for target in ["server", "twamp"] {
        let mut lab = Lab::up(None, None, None);
        let (r, c) = (lab.ns("r"), format!("{}c", lab.prefix));
        sh(&format!(
            "set -e
            ip netns exec {r} tc qdisc add dev {c} root handle 1: htb default 10
            ip netns exec {r} tc class add dev {c} parent 1: classid 1:10 htb rate 200mbit ceil 200mbit burst 3000
            ip netns exec {r} tc class add dev {c} parent 1: classid 1:20 htb rate 20mbit ceil 20mbit burst 3000"
        ))
        .unwrap();
        lab.nft(&format!(
            "table ip fault {{ chain faults {{ type filter hook forward priority 0;
 ip daddr {SERVER_IP} meta l4proto udp numgen random mod 20 == 0 meta priority set 1:20\n }}\n }}"
        ));
        lab.start_for(target);
        runs.push(lab.run_fault("reordering 5 %", target, None));
    }
    let restart = |lab: &mut Lab| {
        if let Some(mut c) = lab.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        lab.start_server(&[]);
    };
    let cut = |lab: &mut Lab| {
        lab.nft(
            "table inet cut { chain faults { type filter hook forward priority 0;
 tcp dport 7447 drop\n tcp sport 7447 drop\n }\n }",
        );
    };
    let stop = |lab: &mut Lab| {
        if let Some(mut c) = lab.server.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    };
    for (fault, target, f) in [
        ("server restarted", "server", &restart as &dyn Fn(&mut Lab)),
        ("control connection cut", "server", &cut),
        ("reflector stopped", "twamp", &stop),
    ] {
        let mut lab = Lab::up(Some("rate 200mbit burst 3000 limit 100000"), None, None);
        lab.start_for(target);
        runs.push(lab.run_fault(fault, target, Some(f)));
    }
    eprintln!("| fault | far end | answer | time |\n|---|---|---|---|");
    for r in &runs {
        let answer = match r.estimate_bps {
            Some(e) => format!(
                "{:.1} Mbit/s ({:+.1} %){}",
                e / 1e6,
                rel(e, 200e6) * 100.0,
                if r.warnings > 0 {
                    format!(", {} warnings", r.warnings)
                } else {
                    String::new()
                }
            ),
            None => format!("error: {}", r.reason),
        };
        eprintln!(
            "| {} | {} | {answer} | {:.1} s |",
            r.fault, r.target, r.seconds
        );
    }
    for r in &runs {
        assert!(r.seconds < 15.0, "{}: {:.1} s", r.fault, r.seconds);
        match r.estimate_bps {
            Some(e) => assert!(
                rel(e, 200e6).abs() < 0.15 || r.warnings > 0,
                "{} ({}): {:.1} Mbit/s without a warning",
                r.fault,
                r.target,
                e / 1e6
            ),
            None => assert!(
                r.reason.len() > 20,
                "{} ({}): no reason given",
                r.fault,
                r.target
            ),
        }
    }
}

/// `-R` through a reflector when the way there (100 Mbit/s) is narrower
/// than the way back (200): held trains lose probes before the reflector,
/// which sends back only what arrived. Those count as lost in the stream
/// measured (taking them out broke every stream's structure: 0 of 4 runs
/// answered), a warning says so, and an answer comes (median of three
/// above 60 Mbit/s: the way back is probed with what the way there let
/// through, 88-121 Mbit/s when this was written).
#[test]
fn held_trains_that_lose_probes_on_the_way_there_still_answer() {
    let _turn = ONE_LAB_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    if !may_run() {
        return;
    }
    let mut lab = Lab::up(
        Some("rate 100mbit burst 3000 limit 100000"),
        Some("rate 200mbit burst 3000 limit 100000"),
        None,
    );
    lab.start_reflector();
    let target = format!("twamp:{SERVER_IP}");
    let mut est: Vec<f64> = (0..3)
        .map(|_| {
            let v = lab.estimate_json_to(&target, &["-R"]);
            eprintln!("reverse, narrow way there: {v}");
            assert_ne!(v["bound"], "none", "{v}");
            assert!(
                v["warnings"].as_array().unwrap().iter().any(|w| w
                    .as_str()
                    .unwrap()
                    .contains("lost probes on the way to the reflector")),
                "{v}"
            );
            v["available_bandwidth_bps"].as_f64().unwrap()
        })
        .collect();
    est.sort_by(f64::total_cmp);
    assert!(est[1] > 60e6, "{est:?}");
}
