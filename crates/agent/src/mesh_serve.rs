//! What a mesh site's agent serves beside `/metrics`: its own row of the
//! grid (`/mesh.json`), the grid with every site's row (`/mesh`, the
//! other rows read from their agents in the background, never on a
//! request, so a page load cannot make an agent fetch), and a path's
//! history (`/history?target=NAME`).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::agent::{unix_ns, Agent};
use crate::grid::{self, PathResult, Point, RowState, SiteRow};
use crate::http::{self, Request, Response};
use crate::store::{Query, Row};

/// How long one far agent may take to answer.
pub const PEER_DEADLINE: Duration = Duration::from_secs(2);
/// The most a far agent's row may weigh.
pub const PEER_MAX_BYTES: usize = 256 * 1024;
/// How often the other rows are read once each was read.
pub const PEER_REFRESH: Duration = Duration::from_secs(60);
/// How often until then.
pub const PEER_RETRY: Duration = Duration::from_secs(5);
/// How far back a history page goes, and its most answers.
const HISTORY_S: i64 = 7 * 86_400;
const HISTORY_ROWS: usize = 5000;

fn html(body: String) -> Response {
    Response {
        status: 200,
        content_type: "text/html; charset=utf-8",
        body,
        headers: Vec::new(),
    }
}

impl PathResult {
    fn of(to: &str, r: &Row) -> PathResult {
        PathResult {
            to: to.to_string(),
            started_unix_s: r.started_unix_ns as f64 / 1e9,
            ok: r.ok,
            available_bps: r.available_bps,
            low_bps: r.low_bps,
            high_bps: r.high_bps,
            bound: r.bound.clone(),
            error: r.error.clone(),
        }
    }
}

impl Agent {
    /// This site's row: the latest scheduled result toward each far site.
    pub fn own_row(&self) -> Option<SiteRow> {
        let ms = self.config.mesh.as_ref()?;
        let method = ms.mesh.method.name();
        let latest = self.latest.lock().unwrap_or_else(|p| p.into_inner());
        let results = ms
            .mesh
            .sites
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != ms.me)
            .filter_map(|(_, s)| {
                let r = latest.get(&(s.name.clone(), method.to_string()))?;
                Some(PathResult::of(&s.name, r))
            })
            .collect();
        Some(SiteRow {
            site: ms.mesh.sites[ms.me].name.clone(),
            results,
        })
    }

    /// `/mesh`, `/mesh.json` and `/history`; `None` for other paths.
    pub(crate) fn handle_mesh(&self, r: &Request) -> Option<Response> {
        let not_mesh = || {
            Response::text(
                404,
                "this agent's site is in no mesh (config: mesh, site)\n",
            )
        };
        match r.path.as_str() {
            "/mesh.json" => Some(match self.own_row() {
                Some(row) => Response {
                    status: 200,
                    content_type: "application/json",
                    body: serde_json::to_string(&row).unwrap_or_default(),
                    headers: Vec::new(),
                },
                None => not_mesh(),
            }),
            "/mesh" => Some(match (&self.config.mesh, self.own_row()) {
                (Some(ms), Some(own)) => {
                    let mut rows = self
                        .peer_rows
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .clone();
                    rows.resize(ms.mesh.sites.len(), RowState::NoAgent);
                    rows[ms.me] = RowState::Known(own, unix_ns() as f64 / 1e9);
                    html(grid::page(&ms.mesh, ms.me, &rows, unix_ns() as f64 / 1e9))
                }
                _ => not_mesh(),
            }),
            "/history" => Some(self.history(r)),
            _ => None,
        }
    }

    /// `/history?target=NAME`: a configured target's answers of the last
    /// week as a page.
    fn history(&self, r: &Request) -> Response {
        let name = match r.query.as_slice() {
            [(k, v)] if k == "target" => v,
            _ => return Response::text(400, "want ?target=NAME (a configured target)\n"),
        };
        if !self.config.targets.iter().any(|t| &t.name == name) {
            return Response::text(404, "no configured target of that name\n");
        }
        let q = Query {
            target: Some(name.clone()),
            method: None,
            since_unix_ns: Some(unix_ns() - HISTORY_S * 1_000_000_000),
            limit: Some(HISTORY_ROWS),
        };
        let rows = match self
            .store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .rows(&q)
        {
            Ok(rows) => rows,
            Err(e) => return Response::text(500, format!("history: {e:#}\n")),
        };
        let points: Vec<Point> = rows
            .iter()
            .filter_map(|r| {
                Some(Point {
                    t_unix_s: r.started_unix_ns as f64 / 1e9,
                    available_bps: r.available_bps?,
                    low_bps: r.low_bps?,
                    high_bps: r.high_bps,
                })
            })
            .collect();
        let failures = rows.iter().filter(|r| !r.ok).count();
        html(grid::history_page(name, &points, failures))
    }

    /// Reads the other sites' rows from their agents until stopping: every
    /// few seconds until each answered once, then every minute; one at a
    /// time, each bounded in time and size and checked.
    pub(crate) fn read_peer_rows(self: &Arc<Agent>) {
        let Some(ms) = &self.config.mesh else {
            return;
        };
        let sites = &ms.mesh.sites;
        {
            let mut rows = self.peer_rows.lock().unwrap_or_else(|p| p.into_inner());
            *rows = sites
                .iter()
                .map(|s| match &s.agent {
                    Some(_) => RowState::Unreachable("not read yet".into()),
                    None => RowState::NoAgent,
                })
                .collect();
        }
        while !self.stop.load(Ordering::SeqCst) {
            let mut all_read = true;
            for (i, s) in sites.iter().enumerate() {
                let Some(addr) = s.agent.as_deref().filter(|_| i != ms.me) else {
                    continue;
                };
                let state = match http::get(addr, "/mesh.json", PEER_DEADLINE, PEER_MAX_BYTES)
                    .and_then(|body| {
                        serde_json::from_str::<SiteRow>(&body).map_err(|e| format!("{addr}: {e}"))
                    })
                    .and_then(|row| grid::checked_row(&ms.mesh, i, row))
                {
                    Ok(row) => RowState::Known(row, unix_ns() as f64 / 1e9),
                    Err(e) => {
                        all_read = false;
                        RowState::Unreachable(e)
                    }
                };
                let mut rows = self.peer_rows.lock().unwrap_or_else(|p| p.into_inner());
                // A row read once stays shown (its cells go stale) while
                // its agent is away for a while.
                let keep = matches!(
                    (&rows[i], &state),
                    (RowState::Known(_, t), RowState::Unreachable(_))
                        if unix_ns() as f64 / 1e9 - t < 2.0 * ms.mesh.period_s
                );
                if !keep {
                    rows[i] = state;
                }
            }
            let wait = if all_read { PEER_REFRESH } else { PEER_RETRY };
            let until = std::time::Instant::now() + wait;
            while std::time::Instant::now() < until && !self.stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Origin, Store};
    use tightlink_measure::Target;

    fn get(agent: &Arc<Agent>, path: &str, query: &[(&str, &str)]) -> Response {
        agent.handle(&Request::get(path, query))
    }

    /// An agent in no mesh says so at /mesh and /mesh.json; /history
    /// shows a configured target's answers (here one failure) and no
    /// other name, and wants exactly `?target=`.
    #[test]
    fn the_pages_answer_by_hand() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("h.db");
        let sim = Target::parse("sim:").unwrap();
        let o = Origin {
            name: "a",
            target: &sim,
            method: "auto",
            origin: "schedule",
            started_unix_ns: unix_ns(),
            wall_s: 0.1,
            seed: None,
        };
        let row = Row::failure(&o, "x", tightlink_measure::ErrorKind::Unreachable);
        Store::open(&db).unwrap().insert(&row).unwrap();
        let file = dir.path().join("agent.toml");
        std::fs::write(
            &file,
            format!(
                "database = {:?}\n[[target]]\nname = \"a\"\ntarget = \"sim:\"\n",
                db.display()
            ),
        )
        .unwrap();
        let config = crate::config::load(Some(&file), &Default::default()).unwrap();
        let agent = Agent::new(config, Arc::new(|_: &str| {})).unwrap();
        for path in ["/mesh", "/mesh.json"] {
            let r = get(&agent, path, &[]);
            assert_eq!(r.status, 404, "{path}");
            assert!(r.body.contains("in no mesh"), "{}", r.body);
        }
        let r = get(&agent, "/history", &[("target", "a")]);
        assert_eq!(
            (r.status, r.content_type),
            (200, "text/html; charset=utf-8")
        );
        assert!(r.body.contains("No answer stored; 1 failed."), "{}", r.body);
        assert_eq!(get(&agent, "/history", &[("target", "b")]).status, 404);
        assert_eq!(get(&agent, "/history", &[]).status, 400);
        assert_eq!(
            get(&agent, "/history", &[("target", "a"), ("x", "1")]).status,
            400
        );
    }
}
