//! The running agent: one thread per target measuring it on its schedule,
//! the HTTP endpoint, and the shared state between them (the history, the
//! last result per target and method, counters, and which targets have a
//! measurement in flight: never two toward one target at once).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tightlink_core::rng::Rng;
use tightlink_measure::analysis::AnalysisParams;
use tightlink_measure::{estimate, EstimateOptions, Method, RealOptions, Target};

use crate::config::{glob_match, AgentConfig, TargetConfig};
use crate::http::{self, Request, Response};
use crate::metrics::{self, Counters, Exposition};
use crate::schedule::Schedule;
use crate::store::{Origin, Row, Store};

/// Prunes the history this often.
const PRUNE_EVERY: Duration = Duration::from_secs(600);
/// `/probe` waits this long for a scheduled measurement of the same
/// target to end before answering 503.
const PROBE_WAIT_BUSY: Duration = Duration::from_secs(2);
/// The counters' `name` for targets only an allow pattern admitted.
pub const PATTERN_LABEL: &str = "(allowed by pattern)";
/// Distinct targets `/probe` remembers for its per-target interval.
const PROBE_MEMORY: usize = 10_000;

/// Longest wait before trying a busy far end again (its session may end
/// sooner than the limit it gives).
pub const BUSY_WAIT_MAX: Duration = Duration::from_secs(2);
/// What a try must have left of its turn to be worth starting.
pub const BUSY_TRY_MIN: Duration = Duration::from_secs(1);

/// How long to wait before trying a busy far end again, given when it
/// says a session there ends and what is `left` of the turn: its word,
/// at most [`BUSY_WAIT_MAX`], if a try of [`BUSY_TRY_MIN`] still fits;
/// `None`: give up (the failure is stored with the far end's reason).
pub fn busy_wait(retry_after: Duration, left: Duration) -> Option<Duration> {
    let wait = retry_after.min(BUSY_WAIT_MAX);
    (wait + BUSY_TRY_MIN <= left).then_some(wait)
}

pub fn unix_ns() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as i64)
        .unwrap_or(0)
}

/// What a log line goes to (stderr from the command line; journald keeps it).
pub type Log = Arc<dyn Fn(&str) + Send + Sync>;

pub struct Agent {
    pub config: AgentConfig,
    pub(crate) store: Mutex<Store>,
    pub(crate) latest: Mutex<BTreeMap<(String, String), Row>>,
    /// The other mesh sites' rows, as last read from their agents.
    pub(crate) peer_rows: Mutex<Vec<crate::grid::RowState>>,
    counters: Mutex<Counters>,
    busy: Mutex<HashSet<String>>,
    busy_freed: Condvar,
    probe_last: Mutex<HashMap<String, Instant>>,
    probes_running: AtomicUsize,
    pub(crate) stop: Arc<AtomicBool>,
    start_unix_s: f64,
    log: Log,
}

/// Marks a target busy until dropped (also when a timed-out measurement's
/// thread finishes long after its caller gave up).
struct BusyGuard {
    agent: Arc<Agent>,
    key: String,
}

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let mut b = self.agent.busy.lock().unwrap_or_else(|p| p.into_inner());
        b.remove(&self.key);
        self.agent.busy_freed.notify_all();
    }
}

/// Of the newest stored result per target and method, those a scheduled
/// measurement of this config made: the latest by target name and
/// method, and the names of the others (results of targets the config no
/// longer names, or names another address now, and `/probe` results,
/// which are answered once and not exported again). A restart with a
/// changed config exports no frozen result of what is gone.
fn configured_latest(
    config: &AgentConfig,
    rows: Vec<Row>,
) -> (BTreeMap<(String, String), Row>, Vec<String>) {
    let configured: std::collections::BTreeSet<(String, String, String)> = config
        .targets
        .iter()
        .flat_map(|t| {
            t.methods
                .iter()
                .map(move |m| (t.name.clone(), m.name().to_string(), t.target.to_string()))
        })
        .collect();
    let mut latest = BTreeMap::new();
    let mut gone = Vec::new();
    for r in rows.into_iter().filter(|r| r.origin == "schedule") {
        if configured.contains(&(r.name.clone(), r.method.clone(), r.target.clone())) {
            latest.insert((r.name.clone(), r.method.clone()), r);
        } else {
            gone.push(format!("{} ({}, {})", r.name, r.target, r.method));
        }
    }
    (latest, gone)
}

/// One target's place in the agent's timetable: when it is due next.
struct Turn {
    target: usize,
    schedule: Schedule,
    rng: Rng,
}

/// Every target's turn, the one due first on top, shared by the
/// workers: a bounded pool serves any number of targets.
struct Turns {
    waiting: Mutex<Vec<Turn>>,
    returned: Condvar,
}

impl Turns {
    fn new(turns: Vec<Turn>) -> Turns {
        Turns {
            waiting: Mutex::new(turns),
            returned: Condvar::new(),
        }
    }

    /// The turn due first, once it is due; `None` when stopping.
    fn take(&self, stop: &AtomicBool) -> Option<Turn> {
        let mut waiting = self.waiting.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if stop.load(Ordering::SeqCst) {
                return None;
            }
            let first = waiting
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| t.schedule.due_ns())
                .map(|(i, t)| (i, t.schedule.due_ns()));
            // Sleep at most 100 ms at a time: a stop is seen soon.
            let wait_ns = match first {
                Some((i, due)) if due <= unix_ns() => return Some(waiting.swap_remove(i)),
                Some((_, due)) => (due - unix_ns()).clamp(1, 100_000_000),
                None => 100_000_000,
            };
            waiting = self
                .returned
                .wait_timeout(waiting, Duration::from_nanos(wait_ns as u64))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// A turn back in the timetable, for its next due time.
    fn give_back(&self, turn: Turn) {
        self.waiting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(turn);
        self.returned.notify_one();
    }
}

/// What a finished agent did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    pub finished: u64,
    pub failed: u64,
    pub store_errors: u64,
}

impl Agent {
    /// Opens the history and loads the last results from it.
    pub fn new(config: AgentConfig, log: Log) -> Result<Arc<Agent>> {
        let store = Store::open(&config.database)?;
        let (latest, gone) = configured_latest(&config, store.latest()?);
        if !gone.is_empty() {
            log(&format!(
                "history: {} no longer configured (their results stay in the history; /metrics leaves them out): {}",
                if gone.len() == 1 { "1 target and method is" } else { "targets and methods are" },
                gone.join(", ")
            ));
        }
        // Every target's counters from the start, at 0: a series that
        // appears only with its first miss is one `increase()` and an
        // alert cannot see.
        let counters = Counters {
            missed_runs: config.targets.iter().map(|t| (t.name.clone(), 0)).collect(),
            probe_bytes: config.targets.iter().map(|t| (t.name.clone(), 0)).collect(),
            answers: config
                .targets
                .iter()
                .flat_map(|t| {
                    t.methods
                        .iter()
                        .map(move |m| ((t.name.clone(), m.name().to_string()), Default::default()))
                })
                .collect(),
            ..Counters::default()
        };
        Ok(Arc::new(Agent {
            config,
            store: Mutex::new(store),
            latest: Mutex::new(latest),
            peer_rows: Mutex::default(),
            counters: Mutex::new(counters),
            busy: Mutex::default(),
            busy_freed: Condvar::new(),
            probe_last: Mutex::default(),
            probes_running: AtomicUsize::new(0),
            stop: Arc::new(AtomicBool::new(false)),
            start_unix_s: unix_ns() as f64 / 1e9,
            log,
        }))
    }

    /// Runs until `should_stop()` says so (polled every 100 ms): target
    /// threads, pruning, and the HTTP endpoint when configured. On stop,
    /// a measurement in flight is finished and stored (or, past its
    /// timeout, recorded as a failure); nothing is stored half.
    pub fn run(self: &Arc<Agent>, should_stop: &dyn Fn() -> bool) -> Result<Summary> {
        let mut threads = Vec::new();
        if let Some(addr) = self.config.listen {
            let listener =
                TcpListener::bind(addr).with_context(|| format!("listening on {addr}"))?;
            (self.log)(&format!(
                "serving /metrics and /probe on http://{}",
                listener.local_addr()?
            ));
            let me = self.clone();
            let handler: Arc<http::Handler> = Arc::new(move |r: &Request| me.handle(r));
            let me = self.clone();
            let on_done: Arc<http::OnDone> = Arc::new(move |path, code| {
                *me.counters().http_requests.entry((path, code)).or_insert(0) += 1;
            });
            let stop = self.stop.clone();
            threads.push(std::thread::spawn(move || {
                let _ = http::serve(listener, handler, on_done, stop);
            }));
            if self.config.mesh.is_some() {
                let me = self.clone();
                threads.push(std::thread::spawn(move || me.read_peer_rows()));
            }
        }
        let now = unix_ns();
        let n = self.config.targets.len();
        let turns = Arc::new(Turns::new(
            self.config
                .targets
                .iter()
                .enumerate()
                .map(|(i, t)| Turn {
                    target: i,
                    schedule: match t.phase_s {
                        Some(p) => {
                            Schedule::aligned(now, (t.interval_s * 1e9) as i64, (p * 1e9) as i64)
                        }
                        None => Schedule::new(now, i, n, (t.interval_s * 1e9) as i64, t.jitter),
                    },
                    rng: Rng::new(now as u64 ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                })
                .collect(),
        ));
        let workers = self.config.workers.min(n);
        for w in 0..workers {
            let me = self.clone();
            let turns = turns.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("agent-worker-{w}"))
                    .spawn(move || me.work(&turns))
                    .context("starting a worker thread")?,
            );
        }
        (self.log)(&format!(
            "watching {n} target(s) with {workers} worker(s); history in {}",
            self.config.database.display()
        ));
        let mut last_prune: Option<Instant> = None;
        while !should_stop() {
            if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
                self.prune();
                last_prune = Some(Instant::now());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (self.log)("stopping: finishing measurements in flight");
        self.stop.store(true, Ordering::SeqCst);
        for t in threads {
            let _ = t.join();
        }
        let c = self.counters().clone();
        let failed = c
            .measurements
            .iter()
            .filter(|(k, _)| k.3 == "error")
            .map(|(_, n)| n)
            .sum();
        let all: u64 = c.measurements.values().sum();
        Ok(Summary {
            finished: all,
            failed,
            store_errors: c.store_errors,
        })
    }

    fn counters(&self) -> std::sync::MutexGuard<'_, Counters> {
        self.counters.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn prune(&self) {
        let before = unix_ns() - (self.config.retention_s * 1e9) as i64;
        let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
        match s.prune(before) {
            Ok(0) => {}
            Ok(n) => (self.log)(&format!("retention: deleted {n} result(s)")),
            Err(e) => (self.log)(&format!("retention: {e:#}")),
        }
    }

    /// A worker: take the turn due first, measure that target's methods,
    /// store, give the turn back for its next time; until stopping. A
    /// target's turn is held by one worker at a time, so a target is
    /// never measured twice at once; a turn that comes late because every
    /// worker was busy skips the runs it missed (counted).
    fn work(self: &Arc<Agent>, turns: &Turns) {
        while let Some(mut turn) = turns.take(&self.stop) {
            let tc = &self.config.targets[turn.target];
            for &m in &tc.methods {
                let Some(guard) = self.claim(&tc.target, None) else {
                    return; // stopping
                };
                let row = self.measure(tc, m, "schedule", tc.timeout_s, guard, &mut turn.rng);
                self.record(row);
            }
            let missed = turn.schedule.advance(unix_ns(), &mut turn.rng);
            if missed > 0 {
                *self
                    .counters()
                    .missed_runs
                    .entry(tc.name.clone())
                    .or_insert(0) += missed;
            }
            turns.give_back(turn);
        }
    }

    /// Marks the target busy, waiting for a measurement in flight toward
    /// it to end (at most `wait`, or until stopping, when `None`).
    fn claim(self: &Arc<Agent>, target: &Target, wait: Option<Duration>) -> Option<BusyGuard> {
        let key = target.to_string();
        let started = Instant::now();
        let mut b = self.busy.lock().unwrap_or_else(|p| p.into_inner());
        while b.contains(&key) {
            if self.stop.load(Ordering::SeqCst) || wait.is_some_and(|w| started.elapsed() >= w) {
                return None;
            }
            b = self
                .busy_freed
                .wait_timeout(b, Duration::from_millis(100))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        b.insert(key.clone());
        Some(BusyGuard {
            agent: self.clone(),
            key,
        })
    }

    /// Runs one measurement on its own thread and waits at most
    /// `timeout_s`; past it, a failure row (the thread keeps the target
    /// busy until it ends).
    fn measure(
        self: &Arc<Agent>,
        tc: &TargetConfig,
        method: Method,
        origin: &str,
        timeout_s: f64,
        guard: BusyGuard,
        rng: &mut Rng,
    ) -> Row {
        let (target, seed) = fresh_seed(&tc.target, rng);
        let options = EstimateOptions {
            method,
            max_streams: tc.max_streams,
            real: RealOptions {
                reverse: tc.reverse,
                key_file: tc.key_file.clone(),
                max_rate_bps: tc.max_rate_bps,
                ..RealOptions::default()
            },
            analysis: AnalysisParams {
                // Only to the methods that read it (the estimate refuses
                // it for the others).
                capacity_bps: tc.capacity_bps.filter(|_| method.uses_capacity()),
                ..AnalysisParams::default()
            },
            ..EstimateOptions::default()
        };
        let started_unix_ns = unix_ns();
        let started = Instant::now();
        let (tx, rx) = mpsc::channel();
        self.counters().in_flight += 1;
        let me = self.clone();
        let t = target.clone();
        let deadline = started + Duration::from_secs_f64(timeout_s);
        let label = tc.name.clone();
        let spawned = std::thread::Builder::new()
            .name("agent-measure".into())
            .spawn(move || {
                let _guard = guard;
                let mut r = estimate(&t, &options, &mut |_| {});
                // A busy far end says when a session there ends: try
                // again then (or sooner) while the turn lasts, rather
                // than overlap another site's measurement.
                while let Some(wait) = r.as_ref().err().and_then(|e| {
                    let after = tightlink_measure::busy_retry_after(e)?;
                    busy_wait(after, deadline.saturating_duration_since(Instant::now()))
                }) {
                    (me.log)(&format!(
                        "{label}: the far end is busy; trying again in {:.1} s",
                        wait.as_secs_f64()
                    ));
                    std::thread::sleep(wait);
                    r = estimate(&t, &options, &mut |_| {});
                }
                me.counters().in_flight -= 1;
                let _ = tx.send(r);
            });
        let name = method.name();
        let origin = |wall_s: f64| Origin {
            name: &tc.name,
            target: &target,
            method: name,
            origin,
            started_unix_ns,
            wall_s,
            seed,
        };
        if let Err(e) = spawned {
            self.counters().in_flight -= 1;
            return Row::failure(
                &origin(0.0),
                &format!("cannot start a measurement thread: {e}"),
                tightlink_measure::ErrorKind::Io,
            );
        }
        match rx.recv_timeout(Duration::from_secs_f64(timeout_s)) {
            Ok(Ok(report)) => Row::success(&origin(started.elapsed().as_secs_f64()), &report),
            Ok(Err(e)) => Row::failure(
                &origin(started.elapsed().as_secs_f64()),
                &format!("{e:#}"),
                tightlink_measure::kind_of(&e),
            ),
            Err(_) => Row::failure(
                &origin(started.elapsed().as_secs_f64()),
                &format!("timed out after {timeout_s} s"),
                tightlink_measure::ErrorKind::TimedOut,
            ),
        }
    }

    /// Stores a row and makes it the latest of its target and method.
    fn record(&self, mut row: Row) -> Option<i64> {
        let result = if row.ok { "ok" } else { "error" };
        if let Some(e) = &row.error {
            (self.log)(&format!("{} {}: {e}", row.name, row.method));
        }
        let id = {
            let mut s = self.store.lock().unwrap_or_else(|p| p.into_inner());
            s.insert(&row)
        };
        {
            // Targets that only an allow pattern admitted share one label
            // value: a client naming endless targets must not grow the
            // counters without bound.
            let label = if self.config.targets.iter().any(|t| t.name == row.name) {
                row.name.clone()
            } else {
                PATTERN_LABEL.to_string()
            };
            let mut c = self.counters();
            *c.measurements
                .entry((
                    label.clone(),
                    row.method.clone(),
                    row.origin.clone(),
                    result,
                ))
                .or_insert(0) += 1;
            for &code in &row.warning_codes {
                *c.warnings
                    .entry((label.clone(), row.method.clone(), code))
                    .or_insert(0) += 1;
            }
            if let Some(kind) = row.error_kind {
                *c.errors
                    .entry((label.clone(), row.method.clone(), kind))
                    .or_insert(0) += 1;
            }
            if let (true, "schedule", Some(v)) = (row.ok, row.origin.as_str(), row.available_bps) {
                c.answers
                    .entry((label.clone(), row.method.clone()))
                    .or_default()
                    .add(v);
            }
            if let Some(b) = row.probe_bytes {
                *c.probe_bytes.entry(label).or_insert(0) += b;
            }
            if id.is_err() {
                c.store_errors += 1;
            }
        }
        let id = match id {
            Ok(id) => id,
            Err(e) => {
                (self.log)(&format!(
                    "history: cannot store a result of {}: {e:#}",
                    row.name
                ));
                return None;
            }
        };
        row.id = id;
        if row.origin == "schedule" {
            self.latest
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert((row.name.clone(), row.method.clone()), row);
        }
        Some(id)
    }

    /// The HTTP endpoint.
    pub fn handle(self: &Arc<Agent>, r: &Request) -> Response {
        match r.path.as_str() {
            "/metrics" => {
                let mut x = Exposition::default();
                for row in self
                    .latest
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .values()
                {
                    metrics::result_samples(&mut x, row);
                }
                metrics::counter_samples(&mut x, &self.counters(), self.start_unix_s);
                Response {
                    status: 200,
                    content_type: metrics::CONTENT_TYPE,
                    body: x.render(),
                    headers: Vec::new(),
                }
            }
            "/probe" => self.probe(r),
            "/healthz" => Response::text(200, "ok\n"),
            "/" => Response::text(200, self.index()),
            p => self.handle_mesh(r).unwrap_or_else(|| {
                Response::text(
                    404,
                    format!("{p}: not here; try /metrics or /probe?target=...\n"),
                )
            }),
        }
    }

    /// 429 when `key` was probed less than `min_interval` ago; otherwise,
    /// with `start`, notes that it is probed now (503 when too many
    /// distinct targets were probed recently to remember them all).
    fn probe_too_soon(&self, key: &str, start: bool) -> Option<Response> {
        let min_s = self.config.probe.min_interval_s;
        let min = Duration::from_secs_f64(min_s);
        let mut last = self.probe_last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = last.get(key) {
            if t.elapsed() < min {
                let wait = (min - t.elapsed()).as_secs_f64().ceil().max(1.0);
                return Some(
                    Response::text(429, format!("'{key}' was probed less than {min_s} s ago\n"))
                        .with_header("Retry-After", format!("{wait}")),
                );
            }
        }
        if start {
            if last.len() >= PROBE_MEMORY {
                last.retain(|_, t| t.elapsed() < min);
                if last.len() >= PROBE_MEMORY {
                    return Some(
                        Response::text(503, "too many distinct targets probed recently\n")
                            .with_header("Retry-After", format!("{}", min_s.ceil().max(1.0))),
                    );
                }
            }
            last.insert(key.to_string(), Instant::now());
        }
        None
    }

    fn index(&self) -> String {
        let mut s = String::from(
            "tightlink agent\n\n/metrics  the last result of every target and method\n/probe?target=NAME_OR_TARGET[&method=M]  measure now (blackbox_exporter's multi-target pattern)\n/history?target=NAME  a target's answers of the last week\n/mesh, /mesh.json  the mesh's grid, this site's row of it (a mesh site)\n\ntargets:\n",
        );
        for t in &self.config.targets {
            let ms: Vec<&str> = t.methods.iter().map(|m| m.name()).collect();
            s.push_str(&format!(
                "  {}  {}  every {} s  {}\n",
                t.name,
                t.target,
                t.interval_s,
                ms.join(",")
            ));
        }
        if !self.config.probe.allow.is_empty() {
            s.push_str(&format!(
                "/probe also allows: {}\n",
                self.config.probe.allow.join(" ")
            ));
        }
        s
    }

    /// `/probe?target=...&method=...`: one measurement now, its metrics
    /// back. Only configured targets or the allowed patterns (403), one
    /// per target per `min_interval` (429), `max_concurrent` at once (503).
    fn probe(self: &Arc<Agent>, r: &Request) -> Response {
        let policy = &self.config.probe;
        let (target_text, method_text) = match probe_query(r) {
            Ok(q) => q,
            Err(response) => return response,
        };
        let tc = match self.probe_target(&target_text) {
            Ok(tc) => tc,
            Err(response) => return response,
        };
        let method = match &method_text {
            None => tc.methods[0],
            Some(m) => match crate::config::agent_method(m, tc.capacity_bps.is_some()) {
                Ok(m) => m,
                Err(e) => return Response::text(400, format!("method: {e}\n")),
            },
        };
        // The per-target interval, then the concurrency, then the target;
        // the interval is checked again once the target is ours (a
        // request for it may have run while this one waited).
        let key = tc.target.to_string();
        if let Some(r) = self.probe_too_soon(&key, false) {
            return r;
        }
        let running = self.probes_running.fetch_add(1, Ordering::SeqCst);
        struct Running<'a>(&'a AtomicUsize);
        impl Drop for Running<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::SeqCst);
            }
        }
        let _running = Running(&self.probes_running);
        if running >= policy.max_concurrent {
            return Response::text(
                503,
                format!(
                    "{} measurements already running; try again later\n",
                    policy.max_concurrent
                ),
            )
            .with_header("Retry-After", "5".into());
        }
        let Some(guard) = self.claim(&tc.target, Some(PROBE_WAIT_BUSY)) else {
            return Response::text(
                503,
                format!("a measurement toward '{key}' is in flight; try again later\n"),
            )
            .with_header("Retry-After", "5".into());
        };
        if let Some(r) = self.probe_too_soon(&key, true) {
            return r;
        }
        // Prometheus says how long it waits; answer before that.
        let scrape_s = r
            .header("x-prometheus-scrape-timeout-seconds")
            .and_then(|v| v.parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 1.0)
            .map(|v| v - 0.5);
        let timeout_s = scrape_s.map_or(tc.timeout_s, |s| s.min(tc.timeout_s));
        let seed = unix_ns() as u64 ^ self.probes_running.load(Ordering::SeqCst) as u64;
        let row = self.measure(&tc, method, "probe", timeout_s, guard, &mut Rng::new(seed));
        let mut x = Exposition::default();
        metrics::result_samples(&mut x, &row);
        self.record(row);
        // A failed measurement is still a good scrape: tightlink_up says 0
        // (blackbox_exporter's convention).
        Response {
            status: 200,
            content_type: metrics::CONTENT_TYPE,
            body: x.render(),
            headers: Vec::new(),
        }
    }

    /// A configured target by name or text, or one the patterns allow
    /// (403 otherwise), measured with `auto` unless asked.
    fn probe_target(&self, target_text: &str) -> Result<TargetConfig, Response> {
        let policy = &self.config.probe;
        let configured = self
            .config
            .targets
            .iter()
            .find(|t| t.name == target_text || t.target.to_string() == target_text);
        if let Some(t) = configured {
            return Ok(t.clone());
        }
        if !policy.allow.iter().any(|p| glob_match(p, target_text)) {
            return Err(Response::text(
                403,
                format!("target '{target_text}' is not one this agent may probe\n"),
            ));
        }
        let target = match Target::parse(target_text) {
            Ok(Target::Trace { .. }) => {
                return Err(Response::text(
                    400,
                    "trace: targets are not probed over HTTP\n",
                ))
            }
            Ok(t) => t,
            Err(e) => {
                return Err(Response::text(
                    400,
                    format!("target '{target_text}': {e:#}\n"),
                ))
            }
        };
        Ok(TargetConfig {
            name: target_text.to_string(),
            target,
            methods: vec![Method::Auto],
            interval_s: 0.0,
            jitter: 0.0,
            timeout_s: policy.timeout_s,
            key_file: None,
            max_rate_bps: None,
            max_streams: 60,
            reverse: false,
            capacity_bps: None,
            phase_s: None,
        })
    }
}

/// `/probe`'s query: `target` (required) and `method`, each once, nothing
/// else (400 otherwise).
fn probe_query(r: &Request) -> Result<(String, Option<String>), Response> {
    let mut target_text = None;
    let mut method_text = None;
    for (k, v) in &r.query {
        match k.as_str() {
            "target" if target_text.is_none() => target_text = Some(v.clone()),
            "method" if method_text.is_none() => method_text = Some(v.clone()),
            "target" | "method" => return Err(Response::text(400, format!("'{k}' given twice\n"))),
            _ => {
                return Err(Response::text(
                    400,
                    format!("unknown parameter '{k}' (known: target, method)\n"),
                ))
            }
        }
    }
    let Some(target_text) = target_text.filter(|t| !t.is_empty()) else {
        return Err(Response::text(
            400,
            "missing ?target= (a configured name or target)\n",
        ));
    };
    Ok((target_text, method_text))
}

/// A simulated path without a seed of its own gets a fresh one per run
/// (a path watched over time, not one replay); others are unchanged.
pub fn fresh_seed(t: &Target, rng: &mut Rng) -> (Target, Option<u64>) {
    match t {
        Target::Sim { text, spec } => {
            let mut spec = spec.clone();
            if !text.contains("seed=") {
                spec.seed = rng.next_u64() >> 1;
            }
            let seed = spec.seed;
            (
                Target::Sim {
                    text: text.clone(),
                    spec,
                },
                Some(seed),
            )
        }
        other => (other.clone(), None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_far_end_is_tried_again_while_the_turn_lasts() {
        let s = Duration::from_secs_f64;
        // Its word when short, else the longest wait.
        assert_eq!(busy_wait(s(0.5), s(10.0)), Some(s(0.5)));
        assert_eq!(busy_wait(s(29.0), s(10.0)), Some(BUSY_WAIT_MAX));
        // A try must still fit: 2 s of wait and 1 s of try in 3 s.
        assert_eq!(busy_wait(s(29.0), s(3.0)), Some(s(2.0)));
        assert_eq!(busy_wait(s(29.0), s(2.9)), None);
        assert_eq!(busy_wait(s(0.2), s(1.1)), None);
    }

    /// What `/metrics` answers now.
    fn metrics_of(agent: &Arc<Agent>) -> String {
        agent.handle(&Request::get("/metrics", &[])).body
    }

    /// A history with results of targets `a` (sim:, auto and multirate),
    /// `b` and a `/probe` of `a`; the config now names `a` (auto only)
    /// and `b` at another address. /metrics exports `a`'s auto result
    /// and nothing of the rest, and the log names what is gone.
    #[test]
    fn a_restart_exports_only_what_the_config_still_names() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let mut store = Store::open(&db).unwrap();
        let sim = Target::parse("sim:").unwrap();
        let cbr = Target::parse("sim:cross=cbr:3G").unwrap();
        for (name, target, method, origin) in [
            ("a", &sim, "auto", "schedule"),
            ("a", &sim, "multirate", "schedule"),
            ("b", &sim, "auto", "schedule"),
            ("a", &sim, "auto", "probe"),
        ] {
            let o = Origin {
                name,
                target,
                method,
                origin,
                started_unix_ns: 1,
                wall_s: 0.0,
                seed: None,
            };
            let row = Row::failure(&o, "x", tightlink_measure::ErrorKind::Unreachable);
            store.insert(&row).unwrap();
        }
        drop(store);
        let file = dir.path().join("a.toml");
        std::fs::write(
            &file,
            format!(
                "database = {:?}\nmethods = [\"auto\"]\n[[target]]\nname = \"a\"\ntarget = \"sim:\"\n[[target]]\nname = \"b\"\ntarget = \"{cbr}\"\n",
                db.display()
            ),
        )
        .unwrap();
        let config = crate::config::load(Some(&file), &Default::default()).unwrap();
        let said = Arc::new(Mutex::new(Vec::<String>::new()));
        let log_to = said.clone();
        let agent = Agent::new(
            config,
            Arc::new(move |l: &str| log_to.lock().unwrap().push(l.to_string())),
        )
        .unwrap();
        let body = metrics_of(&agent);
        let up: Vec<&str> = body
            .lines()
            .filter(|l| l.starts_with("tightlink_up{"))
            .collect();
        assert_eq!(up.len(), 1, "{body}\n{:?}", said.lock().unwrap());
        assert!(
            up[0].contains("name=\"a\"") && up[0].contains("method=\"auto\""),
            "{}",
            up[0]
        );
        let said = said.lock().unwrap().join("\n");
        assert!(said.contains("a (sim:, multirate)"), "{said}");
        assert!(said.contains("b (sim:, auto)"), "{said}");
        // The /probe result, newer than a's scheduled one, hides nothing.
        assert!(!said.contains("probe"), "{said}");
    }

    /// Two answers of one target stored between two scrapes: the gauge
    /// shows the last, the histogram counts both (150 Mbit/s in the 200M
    /// bucket, 3 Gbit/s in the 5G one), and a failure counts in neither.
    #[test]
    fn every_answer_counts_in_the_histogram() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a.toml");
        std::fs::write(
            &file,
            format!(
                "database = {:?}\nmethods = [\"auto\"]\n[[target]]\nname = \"a\"\ntarget = \"sim:\"\n",
                dir.path().join("h.db").display()
            ),
        )
        .unwrap();
        let config = crate::config::load(Some(&file), &Default::default()).unwrap();
        let agent = Agent::new(config, Arc::new(|_: &str| {})).unwrap();
        let scrape = || metrics_of(&agent);
        // From the start, at zero.
        assert!(scrape().contains(
            "tightlink_agent_available_bandwidth_bps_count{name=\"a\",method=\"auto\"} 0"
        ));
        let sim = Target::parse("sim:").unwrap();
        let o = Origin {
            name: "a",
            target: &sim,
            method: "auto",
            origin: "schedule",
            started_unix_ns: 1,
            wall_s: 0.0,
            seed: None,
        };
        let failed = Row::failure(&o, "x", tightlink_measure::ErrorKind::TimedOut);
        for v in [150e6, 3e9] {
            agent.record(Row {
                ok: true,
                available_bps: Some(v),
                error: None,
                error_kind: None,
                ..failed.clone()
            });
        }
        agent.record(failed);
        let body = scrape();
        let line = |l: &str| body.lines().any(|x| x == l);
        let h = "tightlink_agent_available_bandwidth_bps";
        assert!(
            line(&format!(
                "{h}_bucket{{name=\"a\",method=\"auto\",le=\"100000000\"}} 0"
            )),
            "{body}"
        );
        assert!(
            line(&format!(
                "{h}_bucket{{name=\"a\",method=\"auto\",le=\"200000000\"}} 1"
            )),
            "{body}"
        );
        assert!(
            line(&format!(
                "{h}_bucket{{name=\"a\",method=\"auto\",le=\"5000000000\"}} 2"
            )),
            "{body}"
        );
        assert!(
            line(&format!(
                "{h}_bucket{{name=\"a\",method=\"auto\",le=\"+Inf\"}} 2"
            )),
            "{body}"
        );
        assert!(
            line(&format!("{h}_sum{{name=\"a\",method=\"auto\"}} 3150000000")),
            "{body}"
        );
        assert!(
            line(&format!("{h}_count{{name=\"a\",method=\"auto\"}} 2")),
            "{body}"
        );
        assert!(body.contains(&format!("# TYPE {h} histogram")), "{body}");
    }

    /// Three turns due 2 s ago, now and in an hour: taken earliest first,
    /// the one not due yet held back (a stop ends the wait), and a turn
    /// given back is taken again.
    #[test]
    fn turns_are_taken_earliest_first_and_only_when_due() {
        let now = unix_ns();
        let turn = |target: usize, due_ns: i64| Turn {
            target,
            schedule: Schedule::new(due_ns, 0, 1, 3_600_000_000_000, 0.0),
            rng: Rng::new(1),
        };
        let turns = Turns::new(vec![
            turn(0, now),
            turn(1, now + 3_600_000_000_000),
            turn(2, now - 2_000_000_000),
        ]);
        let go = AtomicBool::new(false);
        assert_eq!(turns.take(&go).unwrap().target, 2);
        let t0 = turns.take(&go).unwrap();
        assert_eq!(t0.target, 0);
        // Only target 1 waits, an hour away: a stop ends the wait.
        let stop = AtomicBool::new(true);
        assert!(turns.take(&stop).is_none());
        turns.give_back(t0);
        assert_eq!(turns.take(&go).unwrap().target, 0);
    }

    #[test]
    fn a_simulated_path_gets_a_fresh_seed_unless_it_names_one() {
        let mut rng = Rng::new(1);
        let (a, sa) = fresh_seed(&Target::parse("sim:").unwrap(), &mut rng);
        let (b, sb) = fresh_seed(&Target::parse("sim:").unwrap(), &mut rng);
        assert_ne!(sa, sb);
        assert_eq!(a.to_string(), "sim:", "the label stays what the user typed");
        assert_eq!(b.to_string(), "sim:");
        let (_, s) = fresh_seed(&Target::parse("sim:seed=5").unwrap(), &mut rng);
        assert_eq!(s, Some(5));
        let (_, s) = fresh_seed(&Target::parse("10.0.0.1").unwrap(), &mut rng);
        assert_eq!(s, None);
    }
}
