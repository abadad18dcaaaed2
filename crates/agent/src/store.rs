//! The history: one SQLite file (WAL mode), one row per measurement with
//! the whole report, failures included with their reason. Each row is
//! written in one transaction, so a crash or `kill -9` leaves either the
//! whole row or none. The schema carries its version (`PRAGMA
//! user_version`) and upgrades itself one migration at a time.

use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use rusqlite::{params, Connection, OpenFlags};
use serde::Serialize;
use tightlink_measure::{EstimateReport, Target};

/// Migrations in order; migration `i` takes the schema from version `i`
/// to `i + 1`. Never edit a shipped one: add the next.
const MIGRATIONS: &[&str] = &[
    // 1: the results table.
    "CREATE TABLE results (
        id INTEGER PRIMARY KEY,
        name TEXT NOT NULL,
        target TEXT NOT NULL,
        kind TEXT NOT NULL,
        method TEXT NOT NULL,
        origin TEXT NOT NULL,
        started_unix_ns INTEGER NOT NULL,
        wall_s REAL NOT NULL,
        ok INTEGER NOT NULL,
        available_bps REAL,
        low_bps REAL,
        high_bps REAL,
        bound TEXT,
        truth_bps REAL,
        probe_bytes INTEGER,
        streams INTEGER,
        host_limited INTEGER,
        seed INTEGER,
        error TEXT,
        report TEXT,
        CHECK (ok IN (0, 1)),
        CHECK (ok = 0 OR (available_bps IS NOT NULL AND report IS NOT NULL)),
        CHECK (ok = 1 OR error IS NOT NULL)
    );
    CREATE INDEX results_by_time ON results(started_unix_ns);
    CREATE INDEX results_by_name ON results(name, method, started_unix_ns);",
    // 2: the share of CPU time the hypervisor took while a real estimate ran.
    "ALTER TABLE results ADD COLUMN host_stolen_share REAL;",
    // 3: a token bucket the shaper trains showed: what the streams read
    // (its burst rate) and its bytes.
    "ALTER TABLE results ADD COLUMN shaper_streams_bps REAL;
     ALTER TABLE results ADD COLUMN shaper_bucket_bytes REAL;",
    // 4: real targets: streams whose sender fell behind its schedule.
    "ALTER TABLE results ADD COLUMN sender_late_streams INTEGER;",
    // 5: streams sent again because their sender stalled.
    "ALTER TABLE results ADD COLUMN resent_streams INTEGER;",
    // 6: real targets: datagrams the receiving end's socket dropped (its
    // receive buffer full).
    "ALTER TABLE results ADD COLUMN receiver_socket_drops INTEGER;",
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// One measurement as stored.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub id: i64,
    /// The target's name in the configuration (the metrics label).
    pub name: String,
    pub target: String,
    /// `server`, `twamp` or `sim`.
    pub kind: String,
    pub method: String,
    /// `schedule` or `probe` (asked for over HTTP).
    pub origin: String,
    pub started_unix_ns: i64,
    pub wall_s: f64,
    pub ok: bool,
    pub available_bps: Option<f64>,
    pub low_bps: Option<f64>,
    /// `None` on a success: no upper limit was measured ("at least").
    pub high_bps: Option<f64>,
    pub bound: Option<String>,
    pub truth_bps: Option<f64>,
    pub probe_bytes: Option<u64>,
    pub streams: Option<u64>,
    pub host_limited: Option<bool>,
    /// Real targets: the share of this host's CPU time the hypervisor
    /// took while the estimate ran (steal).
    pub host_stolen_share: Option<f64>,
    /// A token bucket the shaper trains showed (the answer is then its
    /// sustained rate): what the probe streams had read, bit/s, and the
    /// bucket's bytes.
    pub shaper_streams_bps: Option<f64>,
    pub shaper_bucket_bytes: Option<f64>,
    /// Real targets: streams this host sent behind their schedule (too
    /// busy to pace them); from half of the streams on the answer may
    /// read low.
    pub sender_late_streams: Option<u64>,
    /// Streams sent again because a host spoiled them: the sender
    /// stalled, or the receiver's socket dropped probes (their bytes are
    /// in `probe_bytes`).
    pub resent_streams: Option<u64>,
    /// Real targets: datagrams the receiving end's socket dropped while
    /// the streams came in (its receive buffer full): that host's losses,
    /// not the path's.
    pub receiver_socket_drops: Option<u64>,
    /// The simulated path's seed for this run.
    pub seed: Option<u64>,
    pub error: Option<String>,
    /// The whole report, as `estimate --json` prints it.
    pub report: Option<String>,
    /// The codes of the report's warnings, for the agent's counters (the
    /// stored report holds them; rows read back leave this empty).
    pub warning_codes: Vec<&'static str>,
    /// A failed measurement's kind (`bad-input`, `unreachable`, ...), as
    /// the library gives it; like the codes, counted, not stored.
    pub error_kind: Option<&'static str>,
}

/// Where a measurement came from and when: the fields every row has.
#[derive(Debug, Clone)]
pub struct Origin<'a> {
    pub name: &'a str,
    pub target: &'a Target,
    pub method: &'a str,
    pub origin: &'a str,
    pub started_unix_ns: i64,
    pub wall_s: f64,
    pub seed: Option<u64>,
}

pub fn kind_of(t: &Target) -> &'static str {
    match t {
        Target::Sim { .. } => "sim",
        Target::Server { .. } => "server",
        Target::Twamp { .. } => "twamp",
        Target::Trace { .. } => "trace",
    }
}

impl Row {
    fn base(o: &Origin<'_>, ok: bool) -> Row {
        Row {
            id: 0,
            name: o.name.to_string(),
            target: o.target.to_string(),
            kind: kind_of(o.target).to_string(),
            method: o.method.to_string(),
            origin: o.origin.to_string(),
            started_unix_ns: o.started_unix_ns,
            wall_s: o.wall_s,
            ok,
            available_bps: None,
            low_bps: None,
            high_bps: None,
            bound: None,
            truth_bps: None,
            probe_bytes: None,
            streams: None,
            host_limited: None,
            host_stolen_share: None,
            shaper_streams_bps: None,
            shaper_bucket_bytes: None,
            sender_late_streams: None,
            resent_streams: None,
            receiver_socket_drops: None,
            seed: o.seed,
            error: None,
            report: None,
            warning_codes: Vec::new(),
            error_kind: None,
        }
    }

    pub fn success(o: &Origin<'_>, r: &EstimateReport) -> Row {
        let e = &r.estimate;
        Row {
            available_bps: Some(e.available_bandwidth_bps),
            low_bps: Some(e.low_bps),
            high_bps: Some(e.high_bps).filter(|h| h.is_finite()),
            bound: Some(e.bound.as_str().to_string()),
            truth_bps: e.truth_bps.filter(|t| t.is_finite()),
            probe_bytes: Some(e.cost.probe_bytes),
            streams: Some(e.cost.streams as u64),
            host_limited: Some(r.capped == Some(tightlink_measure::Capped::HostLimited)),
            host_stolen_share: r.host.as_ref().and_then(|h| h.stolen_share),
            shaper_streams_bps: e.shaper.map(|sh| sh.streams_bps),
            shaper_bucket_bytes: e.shaper.map(|sh| sh.bucket_bytes),
            sender_late_streams: r.host.as_ref().map(|h| h.late_streams as u64),
            resent_streams: Some(e.cost.resent_streams as u64),
            receiver_socket_drops: r.host.as_ref().map(|h| {
                h.drops
                    .iter()
                    .filter(|(name, _)| *name == "socket_overflow")
                    .map(|&(_, n)| n)
                    .sum()
            }),
            report: Some(serde_json::to_string(r).expect("a report serialises")),
            warning_codes: r.all_warnings().map(|w| w.code.name()).collect(),
            ..Row::base(o, true)
        }
    }

    pub fn failure(o: &Origin<'_>, reason: &str, kind: tightlink_measure::ErrorKind) -> Row {
        Row {
            error: Some(reason.to_string()),
            error_kind: Some(kind.name()),
            ..Row::base(o, false)
        }
    }
}

/// Which rows to read back.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// A target's name or its target text.
    pub target: Option<String>,
    pub method: Option<String>,
    pub since_unix_ns: Option<i64>,
    /// Most rows, newest kept.
    pub limit: Option<usize>,
}

pub struct Store {
    conn: Connection,
}

impl Store {
    /// Opens (creating when missing) the history and brings its schema up
    /// to date.
    pub fn open(path: &Path) -> Result<Store> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the directory of {}", path.display()))?;
        }
        let conn = Connection::open(path).with_context(|| format!("opening {}", path.display()))?;
        let mut s = Store { conn };
        s.setup().with_context(|| format!("{}", path.display()))?;
        Ok(s)
    }

    /// Opens an existing history to read (`tightlink history`).
    pub fn open_read_only(path: &Path) -> Result<Store> {
        if !path.exists() {
            bail!(
                "{}: no history there (the agent writes it; --database says where)",
                path.display()
            );
        }
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .with_context(|| format!("opening {}", path.display()))?;
        conn.busy_timeout(Duration::from_secs(5))?;
        let s = Store { conn };
        let v = s.schema_version()?;
        if v != SCHEMA_VERSION {
            bail!(
                "{}: history schema version {v}, this tightlink reads {SCHEMA_VERSION} (run the agent once to upgrade it)",
                path.display()
            );
        }
        Ok(s)
    }

    fn schema_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))?)
    }

    fn setup(&mut self) -> Result<()> {
        self.conn.busy_timeout(Duration::from_secs(5))?;
        let mode: String = self
            .conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
        if mode != "wal" {
            bail!("cannot switch to WAL mode (journal_mode is {mode})");
        }
        // WAL with synchronous=NORMAL survives a crash of the process
        // (the case that matters here) and costs no fsync per row.
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        let v = self.schema_version()?;
        if v > SCHEMA_VERSION {
            bail!(
                "history schema version {v} is newer than this tightlink knows ({SCHEMA_VERSION}); use a newer tightlink"
            );
        }
        for (i, m) in MIGRATIONS.iter().enumerate().skip(v as usize) {
            let tx = self.conn.transaction()?;
            tx.execute_batch(m)
                .with_context(|| format!("schema migration to version {}", i + 1))?;
            tx.pragma_update(None, "user_version", (i + 1) as i64)?;
            tx.commit()?;
        }
        Ok(())
    }

    /// Stores one row in one transaction; returns its id.
    pub fn insert(&mut self, r: &Row) -> Result<i64> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "INSERT INTO results (name, target, kind, method, origin, started_unix_ns, wall_s, ok,
                available_bps, low_bps, high_bps, bound, truth_bps, probe_bytes, streams,
                host_limited, seed, error, report, host_stolen_share, shaper_streams_bps,
                shaper_bucket_bytes, sender_late_streams, resent_streams, receiver_socket_drops)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20,
                ?21, ?22, ?23, ?24, ?25)",
            params![
                r.name,
                r.target,
                r.kind,
                r.method,
                r.origin,
                r.started_unix_ns,
                r.wall_s,
                r.ok,
                r.available_bps,
                r.low_bps,
                r.high_bps,
                r.bound,
                r.truth_bps,
                r.probe_bytes.map(|b| b as i64),
                r.streams.map(|b| b as i64),
                r.host_limited,
                r.seed.map(|s| s as i64),
                r.error,
                r.report,
                r.host_stolen_share,
                r.shaper_streams_bps,
                r.shaper_bucket_bytes,
                r.sender_late_streams.map(|n| n as i64),
                r.resent_streams.map(|n| n as i64),
                r.receiver_socket_drops.map(|n| n as i64),
            ],
        )?;
        let id = tx.last_insert_rowid();
        tx.commit()?;
        Ok(id)
    }

    /// Deletes rows that started before `before_unix_ns`; how many.
    pub fn prune(&mut self, before_unix_ns: i64) -> Result<usize> {
        Ok(self.conn.execute(
            "DELETE FROM results WHERE started_unix_ns < ?1",
            params![before_unix_ns],
        )?)
    }

    /// Rows oldest first.
    pub fn rows(&self, q: &Query) -> Result<Vec<Row>> {
        let mut sql = String::from("SELECT * FROM (SELECT * FROM results WHERE 1=1");
        let mut args: Vec<rusqlite::types::Value> = Vec::new();
        if let Some(t) = &q.target {
            sql.push_str(" AND (name = ? OR target = ?)");
            args.push(t.clone().into());
            args.push(t.clone().into());
        }
        if let Some(m) = &q.method {
            sql.push_str(" AND method = ?");
            args.push(m.clone().into());
        }
        if let Some(s) = q.since_unix_ns {
            sql.push_str(" AND started_unix_ns >= ?");
            args.push(s.into());
        }
        sql.push_str(" ORDER BY started_unix_ns DESC, id DESC");
        if let Some(l) = q.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        sql.push_str(") ORDER BY started_unix_ns, id");
        let mut st = self.conn.prepare(&sql)?;
        let rows = st
            .query_map(rusqlite::params_from_iter(args), row_from_sql)?
            .collect::<rusqlite::Result<Vec<Row>>>()?;
        Ok(rows)
    }

    /// The newest scheduled row of each (name, method): what `/metrics`
    /// may show after a restart (a `/probe` result is answered once).
    pub fn latest(&self) -> Result<Vec<Row>> {
        let mut st = self.conn.prepare(
            "SELECT * FROM results WHERE id IN (SELECT MAX(id) FROM results WHERE origin = 'schedule' GROUP BY name, method) ORDER BY id",
        )?;
        let rows = st
            .query_map([], row_from_sql)?
            .collect::<rusqlite::Result<Vec<Row>>>()?;
        Ok(rows)
    }

    pub fn count(&self) -> Result<u64> {
        let n: i64 = self
            .conn
            .query_row("SELECT COUNT(*) FROM results", [], |r| r.get(0))?;
        Ok(n as u64)
    }

    /// `PRAGMA integrity_check`: `ok` or what is wrong.
    pub fn integrity_check(&self) -> Result<String> {
        Ok(self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))?)
    }
}

fn row_from_sql(r: &rusqlite::Row<'_>) -> rusqlite::Result<Row> {
    Ok(Row {
        id: r.get("id")?,
        name: r.get("name")?,
        target: r.get("target")?,
        kind: r.get("kind")?,
        method: r.get("method")?,
        origin: r.get("origin")?,
        started_unix_ns: r.get("started_unix_ns")?,
        wall_s: r.get("wall_s")?,
        ok: r.get("ok")?,
        available_bps: r.get("available_bps")?,
        low_bps: r.get("low_bps")?,
        high_bps: r.get("high_bps")?,
        bound: r.get("bound")?,
        truth_bps: r.get("truth_bps")?,
        probe_bytes: r.get::<_, Option<i64>>("probe_bytes")?.map(|b| b as u64),
        streams: r.get::<_, Option<i64>>("streams")?.map(|b| b as u64),
        host_limited: r.get("host_limited")?,
        host_stolen_share: r.get("host_stolen_share")?,
        shaper_streams_bps: r.get("shaper_streams_bps")?,
        shaper_bucket_bytes: r.get("shaper_bucket_bytes")?,
        sender_late_streams: r
            .get::<_, Option<i64>>("sender_late_streams")?
            .map(|n| n as u64),
        resent_streams: r.get::<_, Option<i64>>("resent_streams")?.map(|n| n as u64),
        receiver_socket_drops: r
            .get::<_, Option<i64>>("receiver_socket_drops")?
            .map(|n| n as u64),
        seed: r.get::<_, Option<i64>>("seed")?.map(|b| b as u64),
        error: r.get("error")?,
        report: r.get("report")?,
        warning_codes: Vec::new(),
        error_kind: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_measure::{estimate, EstimateOptions};

    /// A history file in a fresh directory that goes when the first
    /// value drops.
    fn temp(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::Builder::new()
            .prefix(&format!("tl-store-{name}-"))
            .tempdir()
            .unwrap();
        let path = d.path().join("h.db");
        (d, path)
    }

    fn origin<'a>(t: &'a Target, at: i64) -> Origin<'a> {
        Origin {
            name: "n",
            target: t,
            method: "multirate",
            origin: "schedule",
            started_unix_ns: at,
            wall_s: 0.5,
            seed: Some(3),
        }
    }

    #[test]
    fn rows_go_in_and_come_back_whole() {
        let (_dir, path) = temp("roundtrip");
        let mut s = Store::open(&path).unwrap();
        let t = Target::parse("sim:seed=3").unwrap();
        let report = estimate(&t, &EstimateOptions::default(), &mut |_| {}).unwrap();
        let ok = Row::success(&origin(&t, 1_000), &report);
        let bad = Row::failure(
            &origin(&t, 2_000),
            "cannot measure: no reply",
            tightlink_measure::ErrorKind::TimedOut,
        );
        let id1 = s.insert(&ok).unwrap();
        let id2 = s.insert(&bad).unwrap();
        assert!(id2 > id1);
        let rows = s.rows(&Query::default()).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(
            rows[0],
            Row {
                id: id1,
                ..ok.clone()
            }
        );
        assert_eq!(
            rows[1],
            Row {
                id: id2,
                error_kind: None,
                ..bad
            }
        );
        assert_eq!(rows[0].kind, "sim");
        let json: serde_json::Value =
            serde_json::from_str(rows[0].report.as_ref().unwrap()).unwrap();
        assert_eq!(json["available_bandwidth_bps"].as_f64(), ok.available_bps);
        // Filters and the newest per name and method.
        let q = Query {
            since_unix_ns: Some(1_500),
            ..Query::default()
        };
        assert_eq!(s.rows(&q).unwrap().len(), 1);
        let q = Query {
            target: Some("other".into()),
            ..Query::default()
        };
        assert!(s.rows(&q).unwrap().is_empty());
        let q = Query {
            limit: Some(1),
            ..Query::default()
        };
        assert_eq!(s.rows(&q).unwrap()[0].id, id2, "the limit keeps the newest");
        assert_eq!(s.latest().unwrap().len(), 1);
        assert_eq!(s.prune(1_500).unwrap(), 1);
        assert_eq!(s.count().unwrap(), 1);
        assert_eq!(s.integrity_check().unwrap(), "ok");
    }

    #[test]
    fn the_schema_is_versioned() {
        let (_dir, path) = temp("version");
        drop(Store::open(&path).unwrap());
        // Opening again applies nothing twice.
        let s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        s.conn
            .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(s);
        let e = format!("{:#}", Store::open(&path).err().unwrap());
        assert!(e.contains("newer than this tightlink"), "{e}");
        let e = Store::open_read_only(&path.with_file_name("missing.db"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no history there"), "{e}");
    }

    /// A history written by a tightlink of schema version 1 (no stolen
    /// share, no shaper, late-stream, resent-stream or socket-drop
    /// columns) is upgraded in place through versions 2 to 6: its rows
    /// stay, with none of them.
    #[test]
    fn a_version_1_history_is_upgraded() {
        let (_dir, path) = temp("v1");
        {
            let c = Connection::open(&path).unwrap();
            c.execute_batch(MIGRATIONS[0]).unwrap();
            c.pragma_update(None, "user_version", 1).unwrap();
            c.execute(
                "INSERT INTO results (name, target, kind, method, origin, started_unix_ns, wall_s, ok, error)
                 VALUES ('old', 'sim:', 'sim', 'auto', 'schedule', 1000, 0.1, 0, 'x')",
                [],
            )
            .unwrap();
        }
        let mut s = Store::open(&path).unwrap();
        assert_eq!(s.schema_version().unwrap(), 6);
        let old = &s.rows(&Query::default()).unwrap()[0];
        assert_eq!((old.name.as_str(), old.host_stolen_share), ("old", None));
        assert_eq!(
            (
                old.shaper_streams_bps,
                old.shaper_bucket_bytes,
                old.sender_late_streams,
                old.resent_streams,
                old.receiver_socket_drops
            ),
            (None, None, None, None, None)
        );
        let t = Target::default_sim();
        let mut r = Row::failure(&origin(&t, 2_000), "y", tightlink_measure::ErrorKind::Io);
        r.host_stolen_share = Some(0.07);
        r.shaper_streams_bps = Some(9.27e9);
        r.shaper_bucket_bytes = Some(243e3);
        r.sender_late_streams = Some(9);
        r.resent_streams = Some(4);
        r.receiver_socket_drops = Some(1345);
        s.insert(&r).unwrap();
        let new = &s.rows(&Query::default()).unwrap()[1];
        assert_eq!(new.host_stolen_share, Some(0.07));
        assert_eq!(
            (new.shaper_streams_bps, new.shaper_bucket_bytes),
            (Some(9.27e9), Some(243e3))
        );
        assert_eq!(new.sender_late_streams, Some(9));
        assert_eq!(new.resent_streams, Some(4));
        assert_eq!(new.receiver_socket_drops, Some(1345));
    }

    #[test]
    fn a_success_without_its_number_is_refused() {
        let (_dir, path) = temp("check");
        let mut s = Store::open(&path).unwrap();
        let t = Target::default_sim();
        let mut r = Row::failure(&origin(&t, 1), "x", tightlink_measure::ErrorKind::Io);
        r.ok = true;
        assert!(
            s.insert(&r).is_err(),
            "the table's CHECK refuses half a row"
        );
        assert_eq!(s.count().unwrap(), 0);
    }
}
