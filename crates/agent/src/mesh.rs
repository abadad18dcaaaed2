//! A mesh of sites measured pair by pair, from one file every site shares
//! (perfSONAR's meshes, with pScheduler's rule that tests needing the
//! path to themselves never overlap, and without its coordinator): the
//! file, and the schedule derived from it by a pure function, so every
//! agent computes the same one.
//!
//! ```toml
//! period = "1h"        # every ordered pair measured once a period
//! slot = "10s"         # one measurement's turn
//! method = "auto"
//!
//! [[site]]
//! name = "ams"
//! address = "ams.example.net"     # its tightlink server
//! key_file = "/etc/tightlink/mesh.key"
//! agent = "ams.example.net:9447"  # its agent's HTTP address (the /mesh page)
//! capacity = "10G"                # its access link, when known
//!
//! [[bottleneck]]                  # a link some sites share, when known
//! name = "ams-fra uplink"
//! sites = ["ams", "fra"]          # a test crosses it when one end is behind it
//! ```
//!
//! The schedule: each ordered pair (a measures toward b) gets a slot so
//! that in one slot no site is an end of two tests and no declared
//! bottleneck is crossed by two. Pairs come in the rounds of the circle
//! method (a round-robin tournament: every site meets every other once
//! in N - 1 rounds, N even, a bye for the odd one out), each round's
//! pairs first one way and then the other; each test then takes the
//! first slot from its round's on where its ends and bottlenecks are
//! free. Without bottlenecks that is 2 (N - 1) slots for N even and 2 N
//! for N odd, the fewest possible (each site is an end of 2 (N - 1)
//! tests).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use tightlink_core::units::parse_period_s;
use tightlink_measure::{Method, Target};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct MeshFile {
    period: Spanned<String>,
    slot: Option<Spanned<String>>,
    method: Option<Spanned<String>>,
    #[serde(default, rename = "site")]
    sites: Vec<Spanned<SiteFile>>,
    #[serde(default, rename = "bottleneck")]
    bottlenecks: Vec<Spanned<BottleneckFile>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SiteFile {
    name: Spanned<String>,
    address: Spanned<String>,
    key_file: Option<Spanned<PathBuf>>,
    agent: Option<Spanned<String>>,
    capacity: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BottleneckFile {
    name: Spanned<String>,
    sites: Spanned<Vec<String>>,
}

/// A mesh file's error: the line and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}:{line}: {message}")]
pub struct MeshError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Site {
    pub name: String,
    /// Its tightlink server, as a target (`HOST[:PORT]`).
    pub address: String,
    pub key_file: Option<PathBuf>,
    /// `HOST:PORT` of its agent's HTTP endpoint: where the `/mesh` page
    /// reads its row of the grid and links to its history.
    pub agent: Option<String>,
    /// Its access link's capacity, bit/s: a path's is the smaller of its
    /// ends' (the grid's colours are the available share of it).
    pub capacity_bps: Option<f64>,
}

impl Mesh {
    /// The sites' names, `ams, fra, nyc`: what errors list.
    pub fn site_names(&self) -> String {
        let names: Vec<&str> = self.sites.iter().map(|s| s.name.as_str()).collect();
        names.join(", ")
    }

    /// The capacity of the path from site `from` to site `to`, as far as
    /// the file says.
    pub fn path_capacity_bps(&self, from: usize, to: usize) -> Option<f64> {
        match (self.sites[from].capacity_bps, self.sites[to].capacity_bps) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bottleneck {
    pub name: String,
    /// Indices of the sites behind it.
    pub sites: BTreeSet<usize>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Mesh {
    pub period_s: f64,
    pub slot_s: f64,
    pub method: Method,
    pub sites: Vec<Site>,
    pub bottlenecks: Vec<Bottleneck>,
}

/// One measurement: site `from` measures the path toward site `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Test {
    pub from: usize,
    pub to: usize,
}

impl Bottleneck {
    /// A test crosses the bottleneck when one of its ends is behind it.
    pub fn crossed_by(&self, t: Test) -> bool {
        self.sites.contains(&t.from) != self.sites.contains(&t.to)
    }
}

/// The slots of one period, each the tests run at once.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    pub slots: Vec<Vec<Test>>,
}

impl Schedule {
    /// `site`'s own tests: (slot, the site it measures toward).
    pub fn turns_of(&self, site: usize) -> Vec<(usize, usize)> {
        self.slots
            .iter()
            .enumerate()
            .flat_map(|(k, s)| s.iter().filter(|t| t.from == site).map(move |t| (k, t.to)))
            .collect()
    }

    pub fn tests(&self) -> usize {
        self.slots.iter().map(Vec::len).sum()
    }
}

/// Where slot `k` of the period that holds `now_s` (Unix seconds) starts:
/// periods are aligned to the Unix epoch, so every site agrees.
pub fn slot_start_s(mesh: &Mesh, now_s: f64, k: usize) -> f64 {
    (now_s / mesh.period_s).floor() * mesh.period_s + k as f64 * mesh.slot_s
}

/// The rounds of the circle method: every pair of `n` sites once, a round
/// holding each site at most once.
pub fn rounds(n: usize) -> Vec<Vec<(usize, usize)>> {
    if n < 2 {
        return Vec::new();
    }
    // An odd count gets a bye: a site paired with `n` sits the round out.
    let m = n + n % 2;
    let mut ring: Vec<usize> = (1..m).collect();
    let mut out = Vec::with_capacity(m - 1);
    for _ in 0..m - 1 {
        let mut round = Vec::with_capacity(m / 2);
        let first = (0, ring[0]);
        for (a, b) in std::iter::once(first).chain((1..m / 2).map(|i| (ring[i], ring[m - 1 - i]))) {
            if a < n && b < n {
                round.push((a.min(b), a.max(b)));
            }
        }
        out.push(round);
        ring.rotate_right(1);
    }
    out
}

/// The schedule of `mesh` (see the module): the same for every site.
pub fn schedule(mesh: &Mesh) -> Schedule {
    let n = mesh.sites.len();
    // Each slot's busy sites and bottlenecks.
    let mut slots: Vec<(Vec<Test>, BTreeSet<usize>, BTreeSet<usize>)> = Vec::new();
    let mut start = 0;
    // Per bottleneck, the first slot it may be free in (all before hold
    // it): tests that cross it start looking there.
    let mut cursor = vec![0usize; mesh.bottlenecks.len()];
    for round in rounds(n) {
        let mut first_used = usize::MAX;
        for (a, b) in round
            .iter()
            .copied()
            .chain(round.iter().map(|&(a, b)| (b, a)))
        {
            let t = Test { from: a, to: b };
            let crossed: BTreeSet<usize> = mesh
                .bottlenecks
                .iter()
                .enumerate()
                .filter(|(_, bn)| bn.crossed_by(t))
                .map(|(i, _)| i)
                .collect();
            let mut k = crossed.iter().map(|&c| cursor[c]).fold(start, usize::max);
            loop {
                if k == slots.len() {
                    slots.push((Vec::new(), BTreeSet::new(), BTreeSet::new()));
                }
                let (tests, ends, bns) = &mut slots[k];
                if !ends.contains(&a) && !ends.contains(&b) && bns.is_disjoint(&crossed) {
                    tests.push(t);
                    ends.extend([a, b]);
                    bns.extend(crossed.iter().copied());
                    first_used = first_used.min(k);
                    break;
                }
                k += 1;
            }
            for &c in &crossed {
                while slots.get(cursor[c]).is_some_and(|s| s.2.contains(&c)) {
                    cursor[c] += 1;
                }
            }
        }
        // The next round starts where this one's first test went: its
        // slots are not full if a bottleneck split them.
        start = first_used.min(slots.len());
    }
    Schedule {
        slots: slots.into_iter().map(|(t, _, _)| t).collect(),
    }
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Parses and checks a mesh file's text; `file` names it in errors.
pub fn parse(file: &str, text: &str) -> Result<Mesh, MeshError> {
    let err = |at: usize, message: String| MeshError {
        file: file.to_string(),
        line: line_of(text, at),
        message,
    };
    let raw: MeshFile = toml::from_str(text).map_err(|e| {
        err(
            e.span().map_or(0, |s| s.start),
            e.message().trim().to_string(),
        )
    })?;
    let period = |s: &Spanned<String>, key: &str| -> Result<f64, MeshError> {
        match parse_period_s(s.get_ref()) {
            Ok(v) if v > 0.0 => Ok(v),
            Ok(_) => Err(err(
                s.span().start,
                format!("{key} '{}' must be longer than zero", s.get_ref()),
            )),
            Err(e) => Err(err(s.span().start, format!("{key}: {e}"))),
        }
    };
    let period_s = period(&raw.period, "period")?;
    let slot_s = match &raw.slot {
        Some(s) => period(s, "slot")?,
        None => 10.0,
    };
    let method = match &raw.method {
        None => Method::Auto,
        Some(m) => match m.get_ref().parse::<Method>() {
            Ok(Method::QueueFit) => {
                return Err(err(
                    m.span().start,
                    "method: queue-fit needs each path's capacity, which a mesh does not give"
                        .into(),
                ))
            }
            Ok(x) => x,
            Err(e) => return Err(err(m.span().start, format!("method: {e}"))),
        },
    };
    let sites = sites_of(&raw.sites, &err, text.len())?;
    let bottlenecks = bottlenecks_of(&raw.bottlenecks, &sites, &err)?;
    let mesh = Mesh {
        period_s,
        slot_s,
        method,
        sites,
        bottlenecks,
    };
    let slots = schedule(&mesh).slots.len();
    if slots as f64 * slot_s > period_s {
        return Err(err(
            raw.period.span().start,
            format!(
                "period {}: the {} sites need {slots} slots of {slot_s} s a period ({:.0} s); give a longer period or a shorter slot",
                raw.period.get_ref(),
                mesh.sites.len(),
                slots as f64 * slot_s
            ),
        ));
    }
    Ok(mesh)
}

/// The `[[site]]` tables, checked: names unique and not empty, each
/// address a tightlink server's; two at least.
fn sites_of(
    raw: &[Spanned<SiteFile>],
    err: &dyn Fn(usize, String) -> MeshError,
    end: usize,
) -> Result<Vec<Site>, MeshError> {
    let mut sites = Vec::new();
    for s in raw {
        let f = s.get_ref();
        let name = f.name.get_ref().trim().to_string();
        if name.is_empty() {
            return Err(err(f.name.span().start, "site name: empty".into()));
        }
        if sites.iter().any(|x: &Site| x.name == name) {
            return Err(err(
                f.name.span().start,
                format!("site '{name}' is named twice"),
            ));
        }
        match Target::parse(f.address.get_ref()) {
            Ok(Target::Server { .. }) => {}
            Ok(_) => {
                return Err(err(
                    f.address.span().start,
                    format!(
                        "site '{name}': address '{}' is not a tightlink server's HOST[:PORT]",
                        f.address.get_ref()
                    ),
                ))
            }
            Err(e) => return Err(err(f.address.span().start, format!("site '{name}': {e:#}"))),
        }
        let agent = match &f.agent {
            Some(a) => Some(agent_address(a.get_ref()).map_err(|m| {
                err(
                    a.span().start,
                    format!("site '{name}': agent '{}': {m}", a.get_ref()),
                )
            })?),
            None => None,
        };
        let capacity_bps = match &f.capacity {
            Some(c) => match tightlink_core::units::parse_rate(c.get_ref()) {
                Ok(v) if v > 0.0 => Some(v),
                Ok(_) => {
                    return Err(err(
                        c.span().start,
                        format!("site '{name}': capacity must be above zero"),
                    ))
                }
                Err(e) => return Err(err(c.span().start, format!("site '{name}': capacity: {e}"))),
            },
            None => None,
        };
        sites.push(Site {
            name,
            address: f.address.get_ref().clone(),
            key_file: f.key_file.as_ref().map(|k| k.get_ref().clone()),
            agent,
            capacity_bps,
        });
    }
    if sites.len() < 2 {
        return Err(err(
            end,
            format!("{} sites: a mesh needs two at least", sites.len()),
        ));
    }
    Ok(sites)
}

/// An agent's `HOST:PORT`, checked for its shape (a name or address and
/// a port); resolved when it is read.
fn agent_address(text: &str) -> Result<String, String> {
    let t = text.trim();
    let (host, port) = t
        .rsplit_once(':')
        .ok_or_else(|| "not HOST:PORT (the agent's listen address)".to_string())?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host.is_empty() || host.contains(['/', ' ', '?', '#', '@']) {
        return Err("not HOST:PORT (the agent's listen address)".into());
    }
    match port.parse::<u16>() {
        Ok(p) if p > 0 => Ok(t.to_string()),
        _ => Err(format!("port '{port}' is not 1-65535")),
    }
}

/// The `[[bottleneck]]` tables, checked: every site named exists, and
/// some sites are behind the link and some not.
fn bottlenecks_of(
    raw: &[Spanned<BottleneckFile>],
    sites: &[Site],
    err: &dyn Fn(usize, String) -> MeshError,
) -> Result<Vec<Bottleneck>, MeshError> {
    let mut bottlenecks = Vec::new();
    for b in raw {
        let f = b.get_ref();
        let mut members = BTreeSet::new();
        for s in f.sites.get_ref() {
            let Some(i) = sites.iter().position(|x| &x.name == s) else {
                return Err(err(
                    f.sites.span().start,
                    format!("bottleneck '{}': no site named '{s}'", f.name.get_ref()),
                ));
            };
            members.insert(i);
        }
        if members.is_empty() || members.len() == sites.len() {
            return Err(err(
                f.sites.span().start,
                format!(
                    "bottleneck '{}': no test crosses it (it needs some sites behind it and some not)",
                    f.name.get_ref()
                ),
            ));
        }
        bottlenecks.push(Bottleneck {
            name: f.name.get_ref().clone(),
            sites: members,
        });
    }
    Ok(bottlenecks)
}

/// Reads and checks a mesh file.
pub fn load(path: &Path) -> Result<Mesh, MeshError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| MeshError {
        file: file.clone(),
        line: 0,
        message: format!("cannot read it: {e}"),
    })?;
    parse(&file, &text)
}

/// A mesh of `n` sites named `s0`.. with no bottleneck, for figures and
/// tests.
pub fn uniform(n: usize, slot_s: f64) -> Mesh {
    Mesh {
        period_s: f64::INFINITY,
        slot_s,
        method: Method::Auto,
        sites: (0..n)
            .map(|i| Site {
                name: format!("s{i}"),
                address: format!("10.{}.{}.1", i / 256, i % 256),
                key_file: None,
                agent: None,
                capacity_bps: None,
            })
            .collect(),
        bottlenecks: Vec::new(),
    }
}

/// Prometheus's file-based service discovery for the mesh's agents
/// (`file_sd_configs`): one group per site with an `agent` address,
/// labelled `site`; a JSON array.
pub fn prometheus_targets(mesh: &Mesh) -> serde_json::Value {
    serde_json::Value::Array(
        mesh.sites
            .iter()
            .filter_map(|s| {
                let agent = s.agent.as_ref()?;
                Some(serde_json::json!({"targets": [agent], "labels": {"site": s.name}}))
            })
            .collect(),
    )
}

/// What `tightlink mesh check` prints: the mesh, its schedule and, for
/// one site, its turns.
pub struct Report<'a> {
    pub mesh: &'a Mesh,
    pub schedule: &'a Schedule,
    pub site: Option<usize>,
}

impl std::fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (m, s) = (self.mesh, self.schedule);
        let n = m.sites.len();
        let busy = s.slots.len() as f64 * m.slot_s;
        writeln!(
            f,
            "sites       {n} ({}), {} bottleneck{} declared",
            m.sites
                .iter()
                .map(|x| x.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            m.bottlenecks.len(),
            if m.bottlenecks.len() == 1 { "" } else { "s" }
        )?;
        writeln!(
            f,
            "tests       {} a period (every ordered pair), method {}",
            s.tests(),
            m.method
        )?;
        writeln!(
            f,
            "slots       {} of {} s: {:.0} s of the {} s period ({:.0} %); at most {} at once",
            s.slots.len(),
            m.slot_s,
            busy,
            m.period_s,
            100.0 * busy / m.period_s,
            match s.slots.iter().map(Vec::len).max().unwrap_or(0) {
                1 => "1 test".to_string(),
                k => format!("{k} tests"),
            }
        )?;
        writeln!(
            f,
            "per site    {} tests toward the others and {} from them a period; never two at once",
            n - 1,
            n - 1
        )?;
        if let Some(me) = self.site {
            writeln!(f, "\nsite {} measures:", m.sites[me].name)?;
            for (k, to) in s.turns_of(me) {
                writeln!(
                    f,
                    "  slot {k:>4} (+{:.0} s)  toward {} ({})",
                    k as f64 * m.slot_s,
                    m.sites[to].name,
                    m.sites[to].address
                )?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// No slot has a site twice or a bottleneck crossed twice; every
    /// ordered pair is in exactly one slot.
    fn check(mesh: &Mesh, s: &Schedule) {
        let n = mesh.sites.len();
        let mut seen = BTreeSet::new();
        for slot in &s.slots {
            let mut ends = BTreeSet::new();
            let mut bns = BTreeSet::new();
            for &t in slot {
                assert!(t.from != t.to && t.from < n && t.to < n);
                assert!(ends.insert(t.from) && ends.insert(t.to), "{slot:?}");
                for (i, b) in mesh.bottlenecks.iter().enumerate() {
                    if b.crossed_by(t) {
                        assert!(bns.insert(i), "bottleneck {i} twice in {slot:?}");
                    }
                }
                assert!(seen.insert(t), "{t:?} twice");
            }
        }
        assert_eq!(seen.len(), n * (n - 1));
    }

    #[test]
    fn four_sites_by_hand() {
        // Circle method, 4 sites: rounds {0-1, 2-3}, {0-3, 1-2}, {0-2,
        // 3-1}; each round one way, then the other: 6 slots of 2 tests.
        assert_eq!(
            rounds(4),
            vec![
                vec![(0, 1), (2, 3)],
                vec![(0, 3), (1, 2)],
                vec![(0, 2), (1, 3)]
            ]
        );
        let s = schedule(&uniform(4, 10.0));
        assert_eq!(s.slots.len(), 6);
        assert_eq!(
            s.slots[0],
            vec![Test { from: 0, to: 1 }, Test { from: 2, to: 3 }]
        );
        assert_eq!(
            s.slots[1],
            vec![Test { from: 1, to: 0 }, Test { from: 3, to: 2 }]
        );
        check(&uniform(4, 10.0), &s);
        // Site 2 measures toward 3, 1 and 0 in slots 0, 3 and 5.
        assert_eq!(s.turns_of(2), vec![(0, 3), (3, 1), (5, 0)]);
    }

    #[test]
    fn a_shared_bottleneck_splits_a_slot() {
        // Sites 0 and 1 behind one uplink: 0->2 and 1->3 both cross it and
        // may not share a slot (0-1 inside does not cross).
        let mut m = uniform(4, 10.0);
        m.bottlenecks.push(Bottleneck {
            name: "uplink".into(),
            sites: [0, 1].into(),
        });
        let s = schedule(&m);
        check(&m, &s);
        // 8 tests cross it (each of 0, 1 toward 2, 3 and back): 8 slots at
        // least.
        assert!(s.slots.len() >= 8, "{}", s.slots.len());
        assert!(s.slots.len() <= 10, "{}", s.slots.len());
    }

    #[test]
    fn the_report_by_hand() {
        let m = parse("mesh.toml", FILE).unwrap();
        let s = schedule(&m);
        let text = Report {
            mesh: &m,
            schedule: &s,
            site: Some(2),
        }
        .to_string();
        assert!(
            text.contains("sites       3 (ams, fra, nyc), 1 bottleneck declared"),
            "{text}"
        );
        assert!(text.contains("tests       6 a period"), "{text}");
        // Three sites: a bye each round, 6 slots of 20 s in the hour.
        assert!(
            text.contains("slots       6 of 20 s: 120 s of the 3600 s period (3 %)"),
            "{text}"
        );
        assert!(text.contains("site nyc measures:"), "{text}");
        assert!(
            text.contains("slot    3 (+60 s)  toward fra (10.0.0.2:7447)"),
            "{text}"
        );
        assert!(
            text.contains("slot    5 (+100 s)  toward ams (10.0.0.1)"),
            "{text}"
        );
    }

    #[test]
    fn slots_start_on_the_period_grid() {
        let m = Mesh {
            period_s: 3600.0,
            ..uniform(4, 10.0)
        };
        assert_eq!(slot_start_s(&m, 7300.0, 0), 7200.0);
        assert_eq!(slot_start_s(&m, 7300.0, 5), 7250.0);
    }

    #[test]
    fn the_fewest_slots_without_bottlenecks() {
        for n in [2, 3, 5, 10, 11, 100] {
            let s = schedule(&uniform(n, 1.0));
            let want = if n % 2 == 0 { 2 * (n - 1) } else { 2 * n };
            assert_eq!(s.slots.len(), want, "{n} sites");
        }
    }

    const FILE: &str = r#"period = "1h"
slot = "20s"

[[site]]
name = "ams"
address = "10.0.0.1"

[[site]]
name = "fra"
address = "10.0.0.2:7447"

[[site]]
name = "nyc"
address = "10.0.1.1"

[[bottleneck]]
name = "eu uplink"
sites = ["ams", "fra"]
"#;

    #[test]
    fn a_file_parses() {
        let m = parse("mesh.toml", FILE).unwrap();
        assert_eq!(
            (m.period_s, m.slot_s, m.method),
            (3600.0, 20.0, Method::Auto)
        );
        assert_eq!(m.sites.len(), 3);
        assert_eq!(m.sites[1].address, "10.0.0.2:7447");
        assert_eq!(m.bottlenecks[0].sites, [0, 1].into());
        check(&m, &schedule(&m));
        assert_eq!(
            (m.sites[0].agent.as_deref(), m.path_capacity_bps(0, 1)),
            (None, None)
        );
        let text = FILE
            .replacen(
                "address = \"10.0.0.1\"",
                "address = \"10.0.0.1\"\nagent = \"ams.example.net:9447\"\ncapacity = \"10G\"",
                1,
            )
            .replacen(
                "address = \"10.0.1.1\"",
                "address = \"10.0.1.1\"\ncapacity = \"1G\"",
                1,
            );
        let m = parse("mesh.toml", &text).unwrap();
        assert_eq!(m.sites[0].agent.as_deref(), Some("ams.example.net:9447"));
        // A path's capacity is the smaller end's, or the one end known.
        assert_eq!(m.path_capacity_bps(0, 2), Some(1e9));
        assert_eq!(m.path_capacity_bps(1, 0), Some(10e9));
        assert_eq!(m.path_capacity_bps(1, 1), None);
    }

    #[test]
    fn prometheus_finds_the_agents() {
        let text = FILE
            .replacen(
                "address = \"10.0.0.1\"",
                "address = \"10.0.0.1\"\nagent = \"10.0.0.1:9447\"",
                1,
            )
            .replacen(
                "address = \"10.0.1.1\"",
                "address = \"10.0.1.1\"\nagent = \"[2001:db8::1]:9447\"",
                1,
            );
        let m = parse("mesh.toml", &text).unwrap();
        assert_eq!(
            prometheus_targets(&m).to_string(),
            r#"[{"labels":{"site":"ams"},"targets":["10.0.0.1:9447"]},{"labels":{"site":"nyc"},"targets":["[2001:db8::1]:9447"]}]"#
        );
    }

    #[test]
    fn errors_give_file_and_line() {
        for (edit, says) in [
            (
                ("slot = \"20s\"", "slot = \"0s\""),
                "mesh.toml:2: slot '0s' must be longer than zero",
            ),
            (
                ("slot = \"20s\"", "colour = 1"),
                "mesh.toml:2: unknown field `colour`",
            ),
            (
                ("\"fra\"\naddress", "\"ams\"\naddress"),
                "mesh.toml:9: site 'ams' is named twice",
            ),
            (
                ("10.0.1.1", "twamp:10.0.1.1"),
                "mesh.toml:14: site 'nyc': address 'twamp:10.0.1.1' is not a tightlink server",
            ),
            (
                ("[\"ams\", \"fra\"]", "[\"ams\", \"lon\"]"),
                "mesh.toml:18: bottleneck 'eu uplink': no site named 'lon'",
            ),
            (
                ("[\"ams\", \"fra\"]", "[\"ams\", \"fra\", \"nyc\"]"),
                "mesh.toml:18: bottleneck 'eu uplink': no test crosses it",
            ),
            (
                ("period = \"1h\"", "period = \"1m\""),
                "mesh.toml:1: period 1m: the 3 sites need 6 slots of 20 s a period (120 s)",
            ),
            (
                (
                    "address = \"10.0.1.1\"",
                    "address = \"10.0.1.1\"\nagent = \"10.0.1.1\"",
                ),
                "mesh.toml:15: site 'nyc': agent '10.0.1.1': not HOST:PORT",
            ),
            (
                (
                    "address = \"10.0.1.1\"",
                    "address = \"10.0.1.1\"\nagent = \"h:99999\"",
                ),
                "mesh.toml:15: site 'nyc': agent 'h:99999': port '99999' is not 1-65535",
            ),
            (
                (
                    "address = \"10.0.1.1\"",
                    "address = \"10.0.1.1\"\ncapacity = \"fast\"",
                ),
                "mesh.toml:15: site 'nyc': capacity: 'fast' is not a rate",
            ),
            (
                (
                    "address = \"10.0.1.1\"",
                    "address = \"10.0.1.1\"\ncapacity = \"0\"",
                ),
                "mesh.toml:15: site 'nyc': capacity must be above zero",
            ),
        ] {
            let text = FILE.replacen(edit.0, edit.1, 1);
            let e = parse("mesh.toml", &text).unwrap_err().to_string();
            assert!(e.starts_with(says), "{e}\n  wanted {says}");
        }
    }

    proptest! {
        #[test]
        fn any_mesh_schedules_without_overlap(
            n in 2usize..40,
            groups in proptest::collection::vec(proptest::collection::btree_set(0usize..40, 1..6), 0..4),
        ) {
            let mut m = uniform(n, 1.0);
            for (i, g) in groups.into_iter().enumerate() {
                let sites: BTreeSet<usize> = g.into_iter().filter(|&s| s < n).collect();
                if !sites.is_empty() && sites.len() < n {
                    m.bottlenecks.push(Bottleneck { name: format!("b{i}"), sites });
                }
            }
            let s = schedule(&m);
            check(&m, &s);
            // No worse than one test a slot, no better than the ends allow.
            prop_assert!(s.slots.len() <= n * (n - 1));
            prop_assert!(s.slots.len() >= 2 * (n - 1));
        }
    }
}
