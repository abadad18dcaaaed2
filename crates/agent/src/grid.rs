//! The mesh page: MaDDash's N x N grid of a mesh's paths (a row's site
//! measures toward a column's), each cell coloured by the available
//! share of the path's capacity, with stale and failed results marked;
//! the row each site's agent serves for it (`/mesh.json`); and one
//! path's history drawn as a page. Pure: results in, HTML out.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::mesh::Mesh;

/// A share of the capacity at or above this is green.
pub const GOOD_SHARE: f64 = 0.5;
/// At or above this (and below [`GOOD_SHARE`]) yellow; below, red.
pub const WARNING_SHARE: f64 = 0.2;
/// Most results a site's row may hold: one per other site, and a margin.
pub const MAX_ROW_RESULTS: usize = 4096;
/// Longest error text kept from a far agent.
const MAX_TEXT: usize = 200;

/// The latest result of one path, as a site's agent serves it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathResult {
    /// The far site's name.
    pub to: String,
    pub started_unix_s: f64,
    pub ok: bool,
    pub available_bps: Option<f64>,
    pub low_bps: Option<f64>,
    /// `None`: no upper limit was measured ("at least").
    pub high_bps: Option<f64>,
    pub bound: Option<String>,
    pub error: Option<String>,
}

/// A site's row of the grid: `/mesh.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteRow {
    pub site: String,
    pub results: Vec<PathResult>,
}

/// What a page knows of a site's row.
#[derive(Debug, Clone, PartialEq)]
pub enum RowState {
    /// Its results, and when they were read (Unix seconds).
    Known(SiteRow, f64),
    /// Its agent could not be read: why.
    Unreachable(String),
    /// The mesh file gives no agent for it.
    NoAgent,
}

/// A cell's colour class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shade {
    Good,
    Warning,
    Critical,
    /// Measured, with no capacity to judge the share by.
    Unjudged,
    Failed,
    Stale,
    /// Nothing measured yet, or the row could not be read.
    Unknown,
}

impl Shade {
    /// Background colour (CSS hex).
    pub fn colour(self) -> &'static str {
        match self {
            Shade::Good => "#2e9e44",
            Shade::Warning => "#f2c200",
            Shade::Critical => "#d7301f",
            Shade::Unjudged => "#4a90d9",
            Shade::Failed => "#f28e2b",
            Shade::Stale => "#9e9e9e",
            Shade::Unknown => "#ffffff",
        }
    }

    fn legend(self) -> String {
        match self {
            Shade::Good => format!("available at least {:.0} % of capacity", GOOD_SHARE * 100.0),
            Shade::Warning => format!(
                "{:.0}-{:.0} % of capacity",
                WARNING_SHARE * 100.0,
                GOOD_SHARE * 100.0
            ),
            Shade::Critical => format!("below {:.0} % of capacity", WARNING_SHARE * 100.0),
            Shade::Unjudged => {
                "measured; no capacity given, or a bound that leaves the colour open".into()
            }
            Shade::Failed => "the last measurement failed".into(),
            Shade::Stale => "no result for two periods".into(),
            Shade::Unknown => "not measured yet, or its agent unreadable".into(),
        }
    }

    const ALL: [Shade; 7] = [
        Shade::Good,
        Shade::Warning,
        Shade::Critical,
        Shade::Unjudged,
        Shade::Failed,
        Shade::Stale,
        Shade::Unknown,
    ];
}

/// A cell's shade: stale when the result is older than two periods and a
/// slot (one missed turn is allowed), else failed, else by the share of
/// `capacity_bps` the answer leaves. A bound is judged only where it
/// settles the colour: "at least" a share of 50 % is green, "at most"
/// 20 % red; a bound that leaves the colour open is measured, not judged.
pub fn shade(r: Option<&PathResult>, capacity_bps: Option<f64>, now_s: f64, mesh: &Mesh) -> Shade {
    let Some(r) = r else {
        return Shade::Unknown;
    };
    if now_s - r.started_unix_s > 2.0 * mesh.period_s + mesh.slot_s {
        return Shade::Stale;
    }
    if !r.ok {
        return Shade::Failed;
    }
    let Some(c) = capacity_bps else {
        return Shade::Unjudged;
    };
    let by_share = |v: f64| {
        if v >= GOOD_SHARE * c {
            Shade::Good
        } else if v >= WARNING_SHARE * c {
            Shade::Warning
        } else {
            Shade::Critical
        }
    };
    let at_least = r.bound.as_deref() == Some("at_least") || r.high_bps.is_none();
    match (
        at_least,
        r.bound.as_deref(),
        r.low_bps,
        r.high_bps,
        r.available_bps,
    ) {
        (true, _, Some(low), _, _) if low >= GOOD_SHARE * c => Shade::Good,
        (true, ..) => Shade::Unjudged,
        (false, Some("at_most"), _, Some(high), _) if high < WARNING_SHARE * c => Shade::Critical,
        (false, Some("at_most"), ..) => Shade::Unjudged,
        (false, _, _, _, Some(v)) => by_share(v),
        (false, ..) => Shade::Failed,
    }
}

/// Checks a far agent's row before it is shown: its site, at most one
/// result per other site of the mesh, names of sites, texts cut short.
pub fn checked_row(mesh: &Mesh, site: usize, mut row: SiteRow) -> Result<SiteRow, String> {
    let want = &mesh.sites[site].name;
    if &row.site != want {
        return Err(format!(
            "it says it is site '{}', not '{want}'",
            cut(&row.site)
        ));
    }
    if row.results.len() >= mesh.sites.len() {
        return Err(format!(
            "{} results for {} other sites",
            row.results.len(),
            mesh.sites.len() - 1
        ));
    }
    for r in &mut row.results {
        if !mesh.sites.iter().any(|s| s.name == r.to) {
            return Err(format!(
                "a result toward '{}', not a site of the mesh",
                cut(&r.to)
            ));
        }
        r.error = r.error.as_deref().map(cut);
        r.bound = r.bound.as_deref().map(cut);
    }
    Ok(row)
}

fn cut(s: &str) -> String {
    s.chars().take(MAX_TEXT).collect()
}

/// `&`, `<`, `>`, quotes: text that cannot open markup.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A query value, percent-encoded.
fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

/// `24 h`, `90 min`, `45 s`: a period as people say it.
fn period_text(s: f64) -> String {
    if s >= 3600.0 && s % 3600.0 == 0.0 {
        format!("{} h", s / 3600.0)
    } else if s >= 60.0 && s % 60.0 == 0.0 {
        format!("{} min", s / 60.0)
    } else {
        format!("{s} s")
    }
}

/// `6.2G`, `950M`: a rate in a cell.
fn short_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.1}G", bps / 1e9)
    } else {
        format!("{:.0}M", bps / 1e6)
    }
}

fn cell_text(r: Option<&PathResult>, shade: Shade) -> String {
    match (r, shade) {
        (None, _) => String::new(),
        (Some(_), Shade::Failed) => "failed".into(),
        (Some(r), _) => match (r.available_bps, r.high_bps, r.low_bps) {
            (_, None, Some(low)) => format!("&ge; {}", short_rate(low)),
            (Some(a), _, _) => short_rate(a),
            _ => String::new(),
        },
    }
}

fn cell_title(r: Option<&PathResult>, row: &RowState, now_s: f64) -> String {
    match (r, row) {
        (_, RowState::Unreachable(why)) => format!("its agent could not be read: {why}"),
        (_, RowState::NoAgent) => "the mesh file gives no agent for this site".into(),
        (None, _) => "not measured yet".into(),
        (Some(r), _) => {
            let age = (now_s - r.started_unix_s).max(0.0);
            match (&r.error, r.low_bps, r.high_bps) {
                (Some(e), _, _) => format!("{:.0} s ago: {e}", age),
                (None, Some(lo), Some(hi)) => format!(
                    "{:.0} s ago: {} ({} .. {}), {}",
                    age,
                    short_rate(r.available_bps.unwrap_or(lo)),
                    short_rate(lo),
                    short_rate(hi),
                    r.bound.as_deref().unwrap_or("")
                ),
                (None, Some(lo), None) => format!("{:.0} s ago: at least {}", age, short_rate(lo)),
                _ => format!("{:.0} s ago", age),
            }
        }
    }
}

/// The `/mesh` page: `rows[i]` is what is known of site `i`'s row; the
/// page's own site `me` links its cells to `/history` here, the others
/// to their agents'.
pub fn page(mesh: &Mesh, me: usize, rows: &[RowState], now_s: f64) -> String {
    let mut h = String::from(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">\n<meta http-equiv=\"refresh\" content=\"60\">\n<title>tightlink mesh</title>\n<style>\nbody{font-family:sans-serif;margin:16px}\ntable{border-collapse:collapse}\nth,td{border:1px solid #555;padding:0}\nth{padding:4px 8px;background:#eee}\ntd.cell{width:110px;height:44px;text-align:center}\ntd.cell a,td.cell span{display:block;line-height:44px;color:#000;text-decoration:none}\ntd.self{background:#333}\n.swatch{display:inline-block;width:18px;height:14px;border:1px solid #555;margin-right:6px;vertical-align:middle}\n</style></head><body>\n",
    );
    let _ = writeln!(
        h,
        "<h1>Available bandwidth, site to site</h1>\n<p>A row's site measures toward a column's; {} sites, every path once every {}.</p>",
        mesh.sites.len(),
        period_text(mesh.period_s)
    );
    h.push_str("<table id=\"grid\">\n<tr><th>from \\ to</th>");
    for s in &mesh.sites {
        let _ = write!(h, "<th>{}</th>", escape(&s.name));
    }
    h.push_str("</tr>\n");
    for (i, from) in mesh.sites.iter().enumerate() {
        let _ = write!(h, "<tr><th>{}</th>", escape(&from.name));
        let state = rows.get(i).unwrap_or(&RowState::NoAgent);
        for (j, to) in mesh.sites.iter().enumerate() {
            if i == j {
                h.push_str("<td class=\"cell self\"></td>");
                continue;
            }
            let r = match state {
                RowState::Known(row, _) => row.results.iter().find(|r| r.to == to.name),
                _ => None,
            };
            let shade = shade(r, mesh.path_capacity_bps(i, j), now_s, mesh);
            let text = cell_text(r, shade);
            let title = escape(&cell_title(r, state, now_s));
            let link = match (i == me, &from.agent) {
                (true, _) => Some(format!("/history?target={}", query_value(&to.name))),
                (false, Some(a)) => Some(format!(
                    "http://{}/history?target={}",
                    escape(a),
                    query_value(&to.name)
                )),
                (false, None) => None,
            };
            let inner = match link {
                Some(l) if r.is_some() => format!("<a href=\"{l}\" title=\"{title}\">{text}</a>"),
                _ => format!("<span title=\"{title}\">{text}</span>"),
            };
            let _ = write!(
                h,
                "<td class=\"cell\" data-shade=\"{shade:?}\" style=\"background:{}\">{inner}</td>",
                shade.colour()
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n<p>");
    for s in Shade::ALL {
        let _ = writeln!(
            h,
            "<span class=\"swatch\" style=\"background:{}\"></span>{}<br>",
            s.colour(),
            s.legend()
        );
    }
    h.push_str("</p></body></html>\n");
    h
}

/// One stored answer of a path, for its history page.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub t_unix_s: f64,
    pub available_bps: f64,
    pub low_bps: f64,
    /// `None`: at least `low_bps`.
    pub high_bps: Option<f64>,
}

/// A path's history as a page: its answers over time as an SVG chart
/// (each answer's range a vertical bar, an "at least" answer an upward
/// triangle), failures counted below it.
pub fn history_page(name: &str, points: &[Point], failures: usize) -> String {
    let (w, ht, pad) = (800.0, 320.0, 48.0);
    let mut h = format!(
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tightlink: {0}</title></head>\n<body style=\"font-family:sans-serif\">\n<h1>{0}</h1>\n",
        escape(name)
    );
    if points.is_empty() {
        let _ = writeln!(
            h,
            "<p>No answer stored; {failures} failed.</p></body></html>"
        );
        return h;
    }
    let t0 = points
        .iter()
        .map(|p| p.t_unix_s)
        .fold(f64::INFINITY, f64::min);
    let t1 = points
        .iter()
        .map(|p| p.t_unix_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let top = points
        .iter()
        .map(|p| p.high_bps.unwrap_or(p.low_bps).max(p.available_bps))
        .fold(0.0, f64::max)
        .max(1.0)
        * 1.1;
    let x = |t: f64| pad + (t - t0) / (t1 - t0).max(1.0) * (w - 2.0 * pad);
    let y = |v: f64| ht - pad - v / top * (ht - 2.0 * pad);
    let _ = writeln!(
        h,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{ht}\">\n<rect width=\"{w}\" height=\"{ht}\" fill=\"#fff\"/>\n<line x1=\"{pad}\" y1=\"{0}\" x2=\"{1}\" y2=\"{0}\" stroke=\"#000\"/>\n<line x1=\"{pad}\" y1=\"{pad}\" x2=\"{pad}\" y2=\"{0}\" stroke=\"#000\"/>\n<text x=\"4\" y=\"{2}\" font-size=\"12\">{3}</text>\n<text x=\"4\" y=\"{0}\" font-size=\"12\">0</text>",
        ht - pad,
        w - pad,
        pad + 4.0,
        short_rate(top)
    );
    for p in points {
        let px = x(p.t_unix_s);
        match p.high_bps {
            Some(hi) => {
                let _ = writeln!(
                    h,
                    "<line x1=\"{px:.1}\" y1=\"{:.1}\" x2=\"{px:.1}\" y2=\"{:.1}\" stroke=\"#9ecae1\" stroke-width=\"3\"/>\n<circle cx=\"{px:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"#08519c\"/>",
                    y(p.low_bps),
                    y(hi),
                    y(p.available_bps)
                );
            }
            None => {
                let py = y(p.low_bps);
                let _ = writeln!(
                    h,
                    "<path d=\"M{:.1} {:.1} L{:.1} {:.1} L{px:.1} {:.1} Z\" fill=\"#08519c\"/>",
                    px - 4.0,
                    py,
                    px + 4.0,
                    py,
                    py - 8.0
                );
            }
        }
    }
    let _ = writeln!(
        h,
        "</svg>\n<p>{} answers from {} to {}; {failures} failed. Bars: each answer's range; triangles: at least.</p></body></html>",
        points.len(),
        utc(t0),
        utc(t1)
    );
    h
}

fn utc(t_s: f64) -> String {
    crate::history::utc_text((t_s * 1e9) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mesh::uniform;
    use proptest::prelude::*;

    fn mesh3() -> Mesh {
        let mut m = uniform(3, 10.0);
        m.period_s = 600.0;
        m.sites[0].capacity_bps = Some(10e9);
        m.sites[1].capacity_bps = Some(1e9);
        m.sites[2].agent = Some("10.0.2.1:9447".into());
        m
    }

    fn ok(to: &str, t: f64, a: f64, high: Option<f64>) -> PathResult {
        PathResult {
            to: to.into(),
            started_unix_s: t,
            ok: true,
            available_bps: Some(a),
            low_bps: Some(a * 0.9),
            high_bps: high,
            bound: Some("exact".into()),
            error: None,
        }
    }

    #[test]
    fn shades_by_hand() {
        let m = mesh3();
        let now = 10_000.0;
        let cap = m.path_capacity_bps(0, 1); // 1 Gbit/s, the smaller end
        assert_eq!(cap, Some(1e9));
        let at = |a: f64| shade(Some(&ok("s1", now - 5.0, a, Some(a * 1.1))), cap, now, &m);
        assert_eq!(at(500e6), Shade::Good); // 50 %: the boundary is green
        assert_eq!(at(499e6), Shade::Warning);
        assert_eq!(at(200e6), Shade::Warning);
        assert_eq!(at(199e6), Shade::Critical);
        // "At least": green when its lower end (0.9 x 600 M = 540 M) is
        // half the capacity; below, the colour is open.
        assert_eq!(
            shade(Some(&ok("s1", now, 600e6, None)), cap, now, &m),
            Shade::Good
        );
        assert_eq!(
            shade(Some(&ok("s1", now, 300e6, None)), cap, now, &m),
            Shade::Unjudged
        );
        // "At most": red when its upper end is under a fifth.
        let at_most = |high: f64| PathResult {
            bound: Some("at_most".into()),
            ..ok("s1", now, high, Some(high))
        };
        assert_eq!(shade(Some(&at_most(150e6)), cap, now, &m), Shade::Critical);
        assert_eq!(shade(Some(&at_most(400e6)), cap, now, &m), Shade::Unjudged);
        // No capacity given: measured, not judged.
        assert_eq!(
            shade(Some(&ok("s1", now, 1e9, Some(2e9))), None, now, &m),
            Shade::Unjudged
        );
        // Two periods and a slot old (1210 s): stale, even if it failed.
        let mut old = ok("s1", now - 1211.0, 900e6, Some(1e9));
        assert_eq!(shade(Some(&old), cap, now, &m), Shade::Stale);
        old.started_unix_s = now - 1209.0;
        assert_eq!(shade(Some(&old), cap, now, &m), Shade::Good);
        let failed = PathResult {
            ok: false,
            available_bps: None,
            error: Some("connection refused".into()),
            ..ok("s1", now, 0.0, None)
        };
        assert_eq!(shade(Some(&failed), cap, now, &m), Shade::Failed);
        assert_eq!(shade(None, cap, now, &m), Shade::Unknown);
    }

    #[test]
    fn the_page_by_hand() {
        let m = mesh3();
        let now = 10_000.0;
        let rows = vec![
            RowState::Known(
                SiteRow {
                    site: "s0".into(),
                    results: vec![
                        ok("s1", now, 800e6, Some(900e6)),
                        ok("s2", now, 3e9, Some(4e9)),
                    ],
                },
                now,
            ),
            RowState::NoAgent,
            RowState::Unreachable("10.0.2.1:9447: connection refused".into()),
        ];
        let h = page(&m, 0, &rows, now);
        // s0 -> s1: 80 % of 1 G, green, linked to this agent's history.
        assert!(
            h.contains("<td class=\"cell\" data-shade=\"Good\" style=\"background:#2e9e44\"><a href=\"/history?target=s1\""),
            "{h}"
        );
        assert!(h.contains(">800M</a>"), "{h}");
        // s0 -> s2: 3 G against s0's 10 G: 30 %, yellow.
        assert!(h.contains(
            "data-shade=\"Warning\" style=\"background:#f2c200\"><a href=\"/history?target=s2\""
        ));
        // Rows not read: white, saying why; no link.
        assert!(h.contains("<span title=\"its agent could not be read: 10.0.2.1:9447: connection refused\"></span>"));
        assert!(h.contains("<span title=\"the mesh file gives no agent for this site\"></span>"));
        assert_eq!(h.matches("data-shade=\"Unknown\"").count(), 4);
        assert_eq!(h.matches("class=\"cell self\"").count(), 3);
        // The legend lists every shade.
        assert_eq!(h.matches("class=\"swatch\"").count(), Shade::ALL.len());
        assert!(h.contains("3 sites, every path once every 10 min."), "{h}");
    }

    #[test]
    fn a_far_row_is_checked_and_its_text_cut() {
        let m = mesh3();
        let row = |site: &str, tos: &[&str]| SiteRow {
            site: site.into(),
            results: tos.iter().map(|t| ok(t, 0.0, 1e9, None)).collect(),
        };
        assert!(checked_row(&m, 1, row("s1", &["s0", "s2"])).is_ok());
        let e = checked_row(&m, 1, row("s2", &["s0"])).unwrap_err();
        assert_eq!(e, "it says it is site 's2', not 's1'");
        let e = checked_row(&m, 1, row("s1", &["s0", "s2", "s0"])).unwrap_err();
        assert_eq!(e, "3 results for 2 other sites");
        let e = checked_row(&m, 1, row("s1", &["lon"])).unwrap_err();
        assert_eq!(e, "a result toward 'lon', not a site of the mesh");
        let mut long = row("s1", &["s0"]);
        long.results[0].error = Some("x".repeat(10_000));
        let r = checked_row(&m, 1, long).unwrap();
        assert_eq!(r.results[0].error.as_ref().unwrap().len(), MAX_TEXT);
    }

    #[test]
    fn markup_from_a_far_agent_stays_text() {
        let m = mesh3();
        let evil = PathResult {
            ok: false,
            error: Some("<script>alert(1)</script>\"".into()),
            ..ok("s0", 100.0, 0.0, None)
        };
        let rows = vec![
            RowState::NoAgent,
            RowState::Known(
                SiteRow {
                    site: "s1".into(),
                    results: vec![evil],
                },
                100.0,
            ),
        ];
        let h = page(&m, 0, &rows, 100.0);
        assert!(!h.contains("<script>"), "{h}");
        assert!(
            h.contains("&lt;script&gt;alert(1)&lt;/script&gt;&quot;"),
            "{h}"
        );
    }

    #[test]
    fn a_history_page_by_hand() {
        let pts = [
            Point {
                t_unix_s: 1000.0,
                available_bps: 5e8,
                low_bps: 4e8,
                high_bps: Some(6e8),
            },
            Point {
                t_unix_s: 1600.0,
                available_bps: 9e8,
                low_bps: 9e8,
                high_bps: None,
            },
        ];
        let h = history_page("fra <1>", &pts, 1);
        assert!(h.contains("<h1>fra &lt;1&gt;</h1>"), "{h}");
        // One bar and its dot, one triangle.
        assert_eq!(h.matches("stroke=\"#9ecae1\"").count(), 1);
        assert_eq!(h.matches("<circle").count(), 1);
        assert_eq!(h.matches("<path d=").count(), 1);
        assert!(
            h.contains("2 answers from 1970-01-01T00:16:40Z to 1970-01-01T00:26:40Z; 1 failed"),
            "{h}"
        );
        assert!(history_page("x", &[], 3).contains("No answer stored; 3 failed."));
    }

    proptest! {
        /// Whatever a far agent sends, the page holds no markup of it.
        #[test]
        fn escaped_text_opens_no_markup(s in ".{0,40}") {
            let e = escape(&s);
            prop_assert!(!e.contains('<') && !e.contains('>') && !e.contains('"'));
        }

        /// Shades order with the share: more available is never worse.
        #[test]
        fn more_available_is_never_a_worse_shade(a in 0.0f64..2e9, b in 0.0f64..2e9) {
            let m = mesh3();
            let rank = |s: Shade| match s { Shade::Good => 2, Shade::Warning => 1, _ => 0 };
            let (lo, hi) = (a.min(b), a.max(b));
            let at = |v: f64| shade(Some(&ok("s1", 0.0, v, Some(v))), Some(1e9), 0.0, &m);
            prop_assert!(rank(at(lo)) <= rank(at(hi)));
        }
    }
}
