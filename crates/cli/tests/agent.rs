//! `tightlink agent` and `tightlink history` end to end: the built binary
//! watching simulated targets and a loopback server, its SQLite history
//! read back, `/metrics` and `/probe` over real HTTP (hostile clients
//! included), `kill -9` in the middle of a measurement, and a real
//! Prometheus scraping it (Debian's `prometheus`; skipped when missing
//! unless TIGHTLINK_REQUIRE_PROMETHEUS=1, which CI sets).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use tightlink_agent::{Query, Store};

mod common;
use common::{scratch, tightlink, tightlink_text};

/// Writes `agent.toml` in `dir`: listening on a free loopback port, the
/// history in `dir/h.db`, then `body`. Returns (history, config).
fn agent_config(dir: &Path, body: &str) -> (PathBuf, PathBuf) {
    let db = dir.join("h.db");
    let cfg = dir.join("agent.toml");
    let head = format!(
        "listen = \"127.0.0.1:0\"\ndatabase = \"{}\"\n",
        db.display()
    );
    std::fs::write(&cfg, head + body).unwrap();
    (db, cfg)
}

/// A TCP connection to `to` from the loopback address `from`.
fn connect_from(from: Ipv4Addr, to: SocketAddr) -> std::io::Result<TcpStream> {
    let SocketAddr::V4(to) = to else {
        panic!("IPv4 only")
    };
    // SAFETY: a fresh socket, bound and connected with well-formed
    // sockaddr_in values; its descriptor is owned by the TcpStream.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let stream = TcpStream::from_raw_fd(fd);
        let sa = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let local = sa(from, 0);
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let remote = sa(*to.ip(), to.port());
        if libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(stream)
    }
}

/// `GET path` from `from`: (status, body).
fn get_from(from: Ipv4Addr, addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
    let mut s = connect_from(from, addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{headers}\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read the answer");
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text:?}"));
    let body = text
        .split_once("\r\n\r\n")
        .map(|x| x.1)
        .unwrap_or("")
        .to_string();
    (status, body)
}

fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    get_from(Ipv4Addr::LOCALHOST, addr, path, "")
}

/// The value of the first sample of `metric` whose labels contain `with`.
fn sample(text: &str, metric: &str, with: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| {
            (l.starts_with(&format!("{metric}{{")) || l.starts_with(&format!("{metric} ")))
                && l.contains(with)
        })
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

struct AgentProc {
    child: Child,
    addr: SocketAddr,
    log: Arc<Mutex<String>>,
}

impl AgentProc {
    fn start(config: &Path) -> AgentProc {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tightlink"))
            .args(["agent", "--config"])
            .arg(config)
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start the agent");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let l = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(a) = line.split("on http://").nth(1) {
                    let _ = tx.send(a.trim().to_string());
                }
                let mut l = l.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| {
                panic!(
                    "the agent did not say where it listens: {}",
                    log.lock().unwrap()
                )
            });
        AgentProc {
            child,
            addr: addr.parse().unwrap(),
            log,
        }
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// SIGTERM, then the exit status within `within`.
    fn terminate(mut self, within: Duration) -> (bool, String) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let started = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                std::thread::sleep(Duration::from_millis(100));
                return (st.success(), self.log());
            }
            if started.elapsed() > within {
                let _ = self.child.kill();
                panic!(
                    "the agent did not stop within {within:?} of SIGTERM: {}",
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A child process killed when the test ends, passed or not.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let started = Instant::now();
    while !f() {
        assert!(started.elapsed() < within, "waited {within:?} for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn rows(db: &Path) -> Vec<tightlink_agent::Row> {
    Store::open_read_only(db)
        .unwrap()
        .rows(&Query::default())
        .unwrap()
}

#[test]
fn the_agent_measures_on_schedule_stores_every_result_and_exports_the_last() {
    let dir = scratch("agent-schedule");
    let (db, cfg) = agent_config(
        dir.path(),
        r#"interval = "1s"
jitter = 0.2

[[target]]
name = "default"
target = "sim:"
methods = ["multirate", "prcmt"]

[[target]]
name = "cbr 3G"
target = "sim:cross=cbr:3G"

[[target]]
name = "fixed"
target = "sim:capacity=1G,cross=poisson:300M,seed=7"
"#,
    );
    let agent = AgentProc::start(&cfg);
    wait_for(
        "every target and method measured twice",
        Duration::from_secs(30),
        || {
            let r = rows(&db);
            ["default", "cbr 3G", "fixed"]
                .iter()
                .all(|n| r.iter().filter(|x| x.name == *n).count() >= 2)
        },
    );
    let (status, metrics) = get(agent.addr, "/metrics");
    assert_eq!(status, 200);
    // Every target's counters are there from the start, before any miss.
    for name in ["default", "cbr 3G", "fixed"] {
        for counter in [
            "tightlink_agent_missed_runs_total",
            "tightlink_agent_probe_bytes_total",
        ] {
            let series = format!("{counter}{{name=\"{name}\"}} ");
            assert!(metrics.contains(&series), "{series}missing:\n{metrics}");
        }
    }
    let (ok, log) = agent.terminate(Duration::from_secs(20));
    assert!(ok, "{log}");
    assert!(log.contains("stopped:"), "{log}");

    let all = rows(&db);
    assert!(all.iter().all(|r| r.ok && r.report.is_some()), "{all:?}");
    // The gauges hold the newest stored result of each name and method
    // (the agent stopped after this scrape, so a newer row may follow it:
    // the gauge equals one of the stored answers).
    // Targets without methods of their own are measured by the default,
    // `auto`, and labelled so.
    for (name, method) in [
        ("default", "multirate"),
        ("default", "prcmt"),
        ("cbr 3G", "auto"),
        ("fixed", "auto"),
    ] {
        let with = format!("name=\"{name}\",");
        let with = format!("{with}target=");
        let lines: Vec<&str> = metrics
            .lines()
            .filter(|l| {
                l.starts_with("tightlink_available_bandwidth_bps{")
                    && l.contains(&with)
                    && l.contains(&format!("method=\"{method}\""))
            })
            .collect();
        assert_eq!(lines.len(), 1, "{name} {method}: {metrics}");
        let v: f64 = lines[0].rsplit(' ').next().unwrap().parse().unwrap();
        assert!(
            all.iter()
                .any(|r| r.name == name && r.method == method && r.available_bps == Some(v)),
            "{name} {method}: gauge {v} is no stored answer"
        );
    }
    assert!(sample(&metrics, "tightlink_truth_bps", "name=\"fixed\"").is_some());
    // A simulated path without a seed of its own is a new run each time;
    // one with a seed repeats itself.
    let seeds = |n: &str| {
        let mut s: Vec<u64> = all
            .iter()
            .filter(|r| r.name == n && r.method != "prcmt")
            .filter_map(|r| r.seed)
            .collect();
        s.dedup();
        s.len()
    };
    assert!(seeds("default") >= 2);
    assert_eq!(seeds("fixed"), 1);
    // Starts spread and jittered: no two targets started together.
    let mut starts: Vec<i64> = all
        .iter()
        .filter(|r| r.method != "prcmt")
        .map(|r| r.started_unix_ns)
        .collect();
    starts.sort();
    assert!(
        starts.windows(2).all(|w| w[1] - w[0] > 1_000_000),
        "{starts:?}"
    );

    // history reads the same rows back in every format.
    let d = db.to_str().unwrap();
    let (ok, csv, err) = tightlink_text(&["history", "--database", d, "--format", "csv"]);
    assert!(ok, "{err}");
    assert_eq!(csv.lines().count(), all.len() + 1, "{csv}");
    let (ok, json, err) =
        tightlink_text(&["history", "fixed", "--database", d, "--format", "json"]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let fixed = all.iter().filter(|r| r.name == "fixed").count();
    assert_eq!(v.as_array().unwrap().len(), fixed);
    assert!(v[0]["report"]["available_bandwidth_bps"].is_f64(), "{json}");
    let (ok, table, err) = tightlink_text(&[
        "history",
        "--database",
        d,
        "--method",
        "prcmt",
        "--since",
        "1h",
    ]);
    assert!(ok, "{err}");
    assert!(
        table.lines().skip(1).all(|l| l.contains("prcmt")),
        "{table}"
    );
    for plot in ["h.png", "h.svg"] {
        let f = dir.path().join(plot);
        let (ok, out, err) =
            tightlink_text(&["history", "--database", d, "--plot", f.to_str().unwrap()]);
        assert!(ok, "{err}");
        // The plot alone: the table only when a format is asked for.
        assert!(out.is_empty(), "{out}");
        let bytes = std::fs::read(&f).unwrap();
        if plot.ends_with("png") {
            assert_eq!(&bytes[..4], b"\x89PNG");
        } else {
            assert!(String::from_utf8_lossy(&bytes).contains("<svg"), "an SVG");
        }
    }
    let f = dir.path().join("both.png");
    let (ok, out, err) = tightlink_text(&[
        "history",
        "--database",
        d,
        "--plot",
        f.to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(ok && out.starts_with("id,time,"), "{out}{err}");
    let (ok, _, err) = tightlink_text(&["history", "--database", d, "--format", "xml"]);
    assert!(!ok && err.contains("--format xml"), "{err}");
    let (ok, _, err) = tightlink_text(&["history", "--database", "/nonexistent/h.db"]);
    assert!(!ok && err.contains("no history there"), "{err}");
}

/// Warnings are counted by their stable code, and each stored report
/// gives a code beside every warning's text. A simulated 5 Gbit/s shaper
/// with a 256 KB bucket warns `shaper` at every run; the unshaped path
/// does not.
#[test]
fn the_agent_counts_warnings_by_code() {
    let dir = scratch("agent-warnings");
    let (db, cfg) = agent_config(
        dir.path(),
        r#"interval = "1s"

[[target]]
name = "shaped"
target = "sim:cross=none,shaper=5G/256KB"

[[target]]
name = "plain"
target = "sim:cross=none"
"#,
    );
    let agent = AgentProc::start(&cfg);
    wait_for(
        "both targets measured twice",
        Duration::from_secs(30),
        || {
            let r = rows(&db);
            ["shaped", "plain"]
                .iter()
                .all(|n| r.iter().filter(|x| x.name == *n).count() >= 2)
        },
    );
    let (_, metrics) = get(agent.addr, "/metrics");
    let (ok, log) = agent.terminate(Duration::from_secs(20));
    assert!(ok, "{log}");
    let all = rows(&db);
    let shaped_rows = all.iter().filter(|r| r.name == "shaped").count();
    let shaper_warnings = sample(
        &metrics,
        "tightlink_agent_warnings_total",
        "name=\"shaped\",method=\"auto\",code=\"shaper\"",
    )
    .unwrap_or_else(|| panic!("no shaper warning counted: {metrics}"));
    // The scrape came before the last rows were stored.
    assert!(
        shaper_warnings >= 2.0 && shaper_warnings <= shaped_rows as f64,
        "{shaper_warnings} of {shaped_rows}: {metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            "tightlink_agent_warnings_total",
            "name=\"plain\",method=\"auto\",code=\"shaper\""
        ),
        None,
        "{metrics}"
    );
    for r in &all {
        let report: serde_json::Value = serde_json::from_str(r.report.as_deref().unwrap()).unwrap();
        let texts = report["warnings"].as_array().unwrap();
        let codes = report["warning_codes"].as_array().unwrap();
        assert_eq!(texts.len(), codes.len(), "{report}");
        let has_shaper = codes.iter().any(|c| c == "shaper");
        assert_eq!(has_shaper, r.name == "shaped", "{report}");
    }
}

/// Failed measurements are counted by kind: a server that nothing
/// listens for is `unreachable`; a path that measures counts none.
#[test]
fn the_agent_counts_errors_by_kind() {
    let dir = scratch("agent-errors");
    let (db, cfg) = agent_config(
        dir.path(),
        r#"interval = "1s"

[[target]]
name = "closed"
target = "127.0.0.1:9"
timeout = "5s"

[[target]]
name = "plain"
target = "sim:cross=none"
"#,
    );
    let agent = AgentProc::start(&cfg);
    wait_for(
        "every target measured twice",
        Duration::from_secs(30),
        || {
            let r = rows(&db);
            ["closed", "plain"]
                .iter()
                .all(|n| r.iter().filter(|x| x.name == *n).count() >= 2)
        },
    );
    let (_, metrics) = get(agent.addr, "/metrics");
    let (ok, log) = agent.terminate(Duration::from_secs(20));
    assert!(ok, "{log}");
    let errors = |labels: &str| sample(&metrics, "tightlink_agent_errors_total", labels);
    let closed = errors("name=\"closed\",method=\"auto\",kind=\"unreachable\"");
    assert!(closed.is_some_and(|n| n >= 2.0), "{metrics}");
    assert!(
        !metrics
            .lines()
            .any(|l| l.starts_with("tightlink_agent_errors_total{name=\"plain\"")),
        "{metrics}"
    );
}

#[test]
fn bad_configs_are_refused_with_file_and_line() {
    let dir = scratch("agent-badcfg");
    let cfg = dir.path().join("agent.toml");
    std::fs::write(
        &cfg,
        "interval = \"1m\"\n[[target]]\ntarget = \"sim:\"\nintervall = \"5m\"\n",
    )
    .unwrap();
    let (ok, _, err) = tightlink_text(&["agent", "--config", cfg.to_str().unwrap()]);
    assert!(!ok);
    assert!(
        err.contains(&format!("{}:4:", cfg.display())) && err.contains("intervall"),
        "{err}"
    );
    // Flags and environment variables win over the file.
    std::fs::write(
        &cfg,
        "listen = \"127.0.0.1:1\"\n[[target]]\ntarget = \"sim:\"\n",
    )
    .unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_tightlink"))
        .args([
            "agent",
            "--check",
            "--config",
            cfg.to_str().unwrap(),
            "--interval",
            "7s",
        ])
        .env("TIGHTLINK_AGENT_LISTEN", "off")
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(out.contains("listen     off"), "{out}");
    assert!(out.contains("every 7 s"), "{out}");
}

/// A free TCP port on loopback (closed again; a race-free enough choice
/// for a test).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn kill_9_in_the_middle_of_a_measurement_leaves_a_sound_history_and_the_agent_resumes() {
    let dir = scratch("agent-kill9");
    let port = free_port();
    let server = Reaped(
        Command::new(env!("CARGO_BIN_EXE_tightlink"))
            .args(["server", "--bind", "127.0.0.1", "--port", &port.to_string()])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_millis(300));
    let (db, cfg) = agent_config(
        dir.path(),
        &format!("interval = \"1s\"\njitter = 0\n\n[[target]]\nname = \"loopback\"\ntarget = \"127.0.0.1:{port}\"\n\n[[target]]\nname = \"sim\"\ntarget = \"sim:\"\n"),
    );
    let mut killed_mid = 0;
    let mut before = 0;
    for round in 0..3 {
        let mut agent = AgentProc::start(&cfg);
        wait_for("more results", Duration::from_secs(30), || {
            Store::open_read_only(&db)
                .map(|s| s.count().unwrap())
                .unwrap_or(0) as usize
                > before + 2
        });
        // Catch a measurement in flight (the loopback one takes ~0.2 s of
        // every second), then kill -9.
        let started = Instant::now();
        loop {
            let (_, m) = get(agent.addr, "/metrics");
            if sample(&m, "tightlink_agent_measurements_in_flight", "") == Some(1.0) {
                killed_mid += 1;
                break;
            }
            if started.elapsed() > Duration::from_secs(20) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        agent.child.kill().unwrap();
        agent.child.wait().unwrap();
        let s = Store::open_read_only(&db).unwrap();
        assert_eq!(s.integrity_check().unwrap(), "ok", "round {round}");
        let all = s.rows(&Query::default()).unwrap();
        for r in &all {
            if r.ok {
                let rep: serde_json::Value =
                    serde_json::from_str(r.report.as_ref().unwrap()).unwrap();
                let (a, b) = (
                    rep["available_bandwidth_bps"].as_f64().unwrap(),
                    r.available_bps.unwrap(),
                );
                assert!((a / b - 1.0).abs() < 1e-12, "{a} vs {b}");
            } else {
                assert!(r.error.is_some());
            }
        }
        assert!(
            all.len() > before,
            "round {round}: the agent resumed and stored more"
        );
        assert!(all.iter().any(|r| r.name == "loopback" && r.ok), "{all:?}");
        before = all.len();
    }
    drop(server);
    assert!(
        killed_mid >= 2,
        "caught a measurement in flight only {killed_mid} of 3 times"
    );
}

#[test]
fn probe_is_bounded_under_a_flood_and_only_for_allowed_targets() {
    let dir = scratch("agent-probe");
    let (db, cfg) = agent_config(
        dir.path(),
        r#"interval = "1h"

[probe]
allow = ["sim:*"]
max_concurrent = 2
min_interval = "30s"

[[target]]
name = "default"
target = "sim:"

[[target]]
name = "known"
target = "sim:seed=3"
capacity = "10G"
"#,
    );
    let agent = AgentProc::start(&cfg);
    let addr = agent.addr;
    let lo = Ipv4Addr::LOCALHOST;
    assert_eq!(get(addr, "/probe?target=10.0.0.1").0, 403);
    assert_eq!(get(addr, "/probe?target=twamp:192.0.2.1").0, 403);
    assert_eq!(get(addr, "/probe").0, 400);
    assert_eq!(get(addr, "/probe?target=sim:&method=guess").0, 400);
    assert_eq!(get(addr, "/probe?target=sim:&colour=blue").0, 400);
    assert_eq!(get(addr, "/probe?target=sim:colour=blue").0, 400);
    // Numbers in a simulated path are checked before any work: a second
    // of simulated delay is simulated traffic.
    for (query, says) in [
        (
            "sim:delay=1000s",
            "delay=1000s: expected a one-way delay of at most 10 s",
        ),
        (
            "sim:capacity=1e30",
            "capacity=1e30: expected capacities from 1 kbit/s",
        ),
        ("sim:loss=2", "loss=2: expected a share below 1"),
        ("sim:seed=-1", "seed=-1: expected an unsigned integer"),
    ] {
        let (st, body) = get(addr, &format!("/probe?target={query}"));
        assert!(st == 400 && body.contains(says), "{query}: {st} {body}");
    }
    assert_eq!(get(addr, "/nothing").0, 404);
    let (st, body) = get(addr, "/probe?target=default&method=prcmt");
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        sample(&body, "tightlink_up", "method=\"prcmt\""),
        Some(1.0),
        "{body}"
    );
    assert!(
        sample(&body, "tightlink_available_bandwidth_bps", "").is_some(),
        "{body}"
    );
    assert_eq!(
        get(addr, "/probe?target=default&method=prcmt").0,
        429,
        "again within min_interval"
    );
    // queue-fit only toward a target whose capacity is configured.
    let (st, body) = get(addr, "/probe?target=default&method=queue-fit");
    assert!(st == 400 && body.contains("capacity"), "{st} {body}");
    let (st, body) = get(addr, "/probe?target=known&method=queue-fit");
    assert_eq!(st, 200, "{body}");
    assert_eq!(
        sample(&body, "tightlink_up", "method=\"queue-fit\""),
        Some(1.0),
        "{body}"
    );

    // Eight idle connections from one address hold its share of slots
    // (a ninth is refused at once)...
    let idle: Vec<TcpStream> = (0..8).map(|_| connect_from(lo, addr).unwrap()).collect();
    let mut refused = String::new();
    wait_for("a ninth connection refused", Duration::from_secs(5), || {
        let (st, body) = get(addr, "/healthz");
        refused = body;
        st == 503
    });
    assert!(refused.contains("too many connections"), "{refused}");
    // ...and 100 concurrent probes from 100 other addresses, each of a
    // target of its own.
    let in_flight_max = Arc::new(Mutex::new(0.0f64));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let watcher = {
        let (m, stop) = (in_flight_max.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                let (_, t) = get_from(Ipv4Addr::new(127, 0, 1, 1), addr, "/metrics", "");
                if let Some(v) = sample(&t, "tightlink_agent_measurements_in_flight", "") {
                    let mut m = m.lock().unwrap();
                    *m = m.max(v);
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let flood: Vec<_> = (0..100u32)
        .map(|i| {
            std::thread::spawn(move || {
                let from = Ipv4Addr::new(127, 0, 2, 1 + i as u8);
                get_from(from, addr, &format!("/probe?target=sim:seed={i}"), "").0
            })
        })
        .collect();
    let codes: Vec<u16> = flood.into_iter().map(|h| h.join().unwrap()).collect();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    watcher.join().unwrap();
    let count = |c: u16| codes.iter().filter(|&&x| x == c).count();
    eprintln!(
        "100 concurrent /probe: {} answered 200, {} got 503, {} got 429; most in flight {}",
        count(200),
        count(503),
        count(429),
        in_flight_max.lock().unwrap()
    );
    assert_eq!(count(200) + count(503) + count(429), 100, "{codes:?}");
    assert!(count(200) >= 2, "{codes:?}");
    // Two /probe measurements at once, plus at most the scheduled one.
    assert!(*in_flight_max.lock().unwrap() <= 3.0);
    // Work done only for what was answered: one stored row per 200.
    let probes = rows(&db).iter().filter(|r| r.origin == "probe").count();
    assert_eq!(
        probes,
        count(200) + 2,
        "the flood's 200s, the first probe and the queue-fit one"
    );
    // A hundred targets named by clients share one counter label.
    let (_, m) = get_from(Ipv4Addr::new(127, 0, 3, 2), addr, "/metrics", "");
    let by_probe: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("tightlink_agent_measurements_total{"))
        .filter(|l| l.contains("origin=\"probe\""))
        .collect();
    assert_eq!(
        by_probe.len(),
        3,
        "'default', 'known' and the pattern's: {m}"
    );
    assert_eq!(
        sample(
            &m,
            "tightlink_agent_measurements_total",
            "name=\"(allowed by pattern)\""
        ),
        Some(count(200) as f64)
    );
    // The idle connections did not lock this address out for long: they
    // are cut after 5 s, and another address is served meanwhile.
    assert_eq!(
        get_from(Ipv4Addr::new(127, 0, 3, 1), addr, "/metrics", "").0,
        200
    );
    drop(idle);
    wait_for("this address served again", Duration::from_secs(10), || {
        get(addr, "/healthz").0 == 200
    });
    let (ok, log) = agent.terminate(Duration::from_secs(20));
    assert!(ok, "{log}");
}

/// Debian's Prometheus scraping the agent's `/metrics` and `/probe`
/// (blackbox_exporter's relabelling), read back through its HTTP API.
#[test]
fn prometheus_scrapes_the_agent() {
    let have = Command::new("prometheus").arg("--version").output().is_ok();
    if !have {
        if std::env::var("TIGHTLINK_REQUIRE_PROMETHEUS").as_deref() == Ok("1") {
            panic!("the Prometheus test is required but `prometheus` is not installed");
        }
        eprintln!("skipped: no prometheus (Debian package `prometheus`)");
        return;
    }
    let dir = scratch("agent-prometheus");
    let (db, cfg) = agent_config(
        dir.path(),
        "interval = \"1s\"\n[probe]\nallow = [\"sim:*\"]\nmin_interval = \"1s\"\n[[target]]\nname = \"default\"\ntarget = \"sim:\"\n",
    );
    let agent = AgentProc::start(&cfg);
    let prom_port = free_port();
    let prom_cfg = dir.path().join("prometheus.yml");
    // The scrape config shipped in deploy/, pointed at this agent.
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../deploy/prometheus.yml"
    ))
    .unwrap();
    let text = shipped
        .replace("scrape_interval: 1m", "scrape_interval: 1s")
        .replace("scrape_timeout: 30s", "scrape_timeout: 1s")
        .replace("localhost:9447", &agent.addr.to_string())
        .replace("- sim:cross=cbr:3G", "- sim:cross=cbr:3G,seed=5");
    assert!(text.contains(&agent.addr.to_string()), "{text}");
    std::fs::write(&prom_cfg, text).unwrap();
    let prom = Command::new("prometheus")
        .arg(format!("--config.file={}", prom_cfg.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.path().join("tsdb").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("prometheus.log")).unwrap())
        .spawn()
        .expect("start prometheus");
    let prom = Reaped(prom);
    let paddr: SocketAddr = format!("127.0.0.1:{prom_port}").parse().unwrap();
    let query = |q: &str| -> Option<serde_json::Value> {
        // Not up yet: nothing listens.
        TcpStream::connect(paddr).ok()?;
        let (st, body) = get(paddr, &format!("/api/v1/query?query={q}"));
        (st == 200)
            .then(|| serde_json::from_str(&body).ok())
            .flatten()
    };
    let mut scheduled = None;
    let mut probed = None;
    let mut counted = None;
    let started = Instant::now();
    while (scheduled.is_none() || probed.is_none() || counted.is_none())
        && started.elapsed() < Duration::from_secs(90)
    {
        std::thread::sleep(Duration::from_millis(500));
        // The histogram of answers, read by Prometheus as one.
        if let Some(v) = query(
            "histogram_quantile(0.5%2Ctightlink_agent_available_bandwidth_bps_bucket%7Bname%3D%22default%22%7D)",
        ) {
            if let Some(r) = v["data"]["result"].as_array().and_then(|a| a.first()) {
                counted = Some(r.clone());
            }
        }
        if let Some(v) = query("tightlink_available_bandwidth_bps%7Bname%3D%22default%22%7D") {
            if let Some(r) = v["data"]["result"].as_array().and_then(|a| a.first()) {
                scheduled = Some(r.clone());
            }
        }
        if let Some(v) = query("tightlink_up%7Bjob%3D%22tightlink_probe%22%7D") {
            if let Some(r) = v["data"]["result"].as_array().and_then(|a| a.first()) {
                probed = Some(r.clone());
            }
        }
    }
    drop(prom);
    let plog = std::fs::read_to_string(dir.path().join("prometheus.log")).unwrap_or_default();
    let scheduled =
        scheduled.unwrap_or_else(|| panic!("Prometheus never had the gauge; its log:\n{plog}"));
    let probed = probed.unwrap_or_else(|| panic!("Prometheus never probed; its log:\n{plog}"));
    let counted =
        counted.unwrap_or_else(|| panic!("Prometheus never had the histogram; its log:\n{plog}"));
    let median: f64 = counted["value"][1].as_str().unwrap().parse().unwrap();
    assert!((1e9..=10e9).contains(&median), "{counted}");
    // The value Prometheus holds is one the agent stored.
    let v: f64 = scheduled["value"][1].as_str().unwrap().parse().unwrap();
    let stored = rows(&db);
    assert!(
        stored
            .iter()
            .any(|r| r.name == "default" && r.available_bps == Some(v)),
        "Prometheus read {v}, not a stored answer"
    );
    assert!((1e9..10e9).contains(&v), "{v}");
    assert_eq!(probed["value"][1], "1", "{probed}");
    assert_eq!(
        probed["metric"]["instance"], "sim:cross=cbr:3G,seed=5",
        "{probed}"
    );
    let (ok, log) = agent.terminate(Duration::from_secs(20));
    assert!(ok, "{log}");
}

/// `mesh check`: the shipped mesh file checks and prints its schedule;
/// a broken one says FILE:LINE and exits 2.
#[test]
fn mesh_check_prints_the_schedule_and_says_where_a_file_is_wrong() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shipped = repo.join("deploy/mesh.toml");
    let (ok, out, err) =
        tightlink_text(&["mesh", "check", shipped.to_str().unwrap(), "--site", "ams"]);
    assert!(ok, "{err}");
    assert!(out.contains("tests       12 a period"), "{out}");
    assert!(out.contains("site ams measures:"), "{out}");
    assert_eq!(out.matches("  slot ").count(), 3, "{out}");
    let dir = scratch("mesh");
    let bad = dir.path().join("bad.toml");
    let text = std::fs::read_to_string(&shipped).unwrap().replacen(
        "address = \"127.0.0.3\"",
        "address = \"sim:\"",
        1,
    );
    std::fs::write(&bad, text).unwrap();
    let o = tightlink(&["mesh", "check", bad.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!(
            "{}:22: site 'lon': address 'sim:' is not a tightlink server",
            bad.display()
        )),
        "{err}"
    );
    // The agents, as Prometheus's file-based discovery reads them.
    let o = tightlink(&["mesh", "targets", shipped.to_str().unwrap()]);
    assert!(o.status.success());
    let sd: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sites: Vec<(&str, &str)> = sd
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            (
                g["labels"]["site"].as_str().unwrap(),
                g["targets"][0].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        sites,
        [
            ("ams", "127.0.0.1:9447"),
            ("fra", "127.0.0.2:9447"),
            ("lon", "127.0.0.3:9447"),
            ("nyc", "127.0.0.4:9447")
        ]
    );
}
