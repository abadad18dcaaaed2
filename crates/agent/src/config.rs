//! The agent's configuration: a TOML file (unknown keys rejected with
//! file:line), overridden by flags and environment variables, checked
//! before anything runs: every target parses, every method is known,
//! every period is positive, names are unique, key files are readable.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use serde::Deserialize;
use tightlink_core::units::{parse_period_s, parse_rate};
use tightlink_measure::{Method, Target, UnknownMethod};

/// The config file as written (`deny_unknown_fields` everywhere: a typo
/// is an error, never a silently ignored setting).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    /// `ADDR:PORT` of the HTTP endpoint (`/metrics`, `/probe`); `off` for none.
    pub listen: Option<String>,
    /// The SQLite history file.
    pub database: Option<PathBuf>,
    /// Results older than this are deleted (`30d`).
    pub retention: Option<String>,
    /// Defaults for every target.
    pub interval: Option<String>,
    pub jitter: Option<f64>,
    pub timeout: Option<String>,
    pub methods: Option<Vec<String>>,
    /// Measurements the agent runs at once over all its targets (each
    /// target one at a time); default: as many as targets, at most 32.
    pub workers: Option<usize>,
    pub probe: Option<ProbeFile>,
    #[serde(default, rename = "target")]
    pub targets: Vec<TargetFile>,
    /// A mesh file every site shares, and this site's name in it: the
    /// site's turns of the mesh's schedule become targets.
    pub mesh: Option<PathBuf>,
    pub site: Option<String>,
}

/// `[probe]`: what `/probe?target=...` may measure and how often.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProbeFile {
    /// Targets beyond the configured ones, as patterns (`*` matches any
    /// run of characters): `sim:*`, `10.1.*:7447`, `twamp:192.0.2.*`.
    pub allow: Option<Vec<String>>,
    /// Measurements `/probe` runs at once; more get 503.
    pub max_concurrent: Option<usize>,
    /// Per target: a second `/probe` sooner than this gets 429.
    pub min_interval: Option<String>,
}

/// One `[[target]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetFile {
    /// The label in metrics and history; the target text by default.
    pub name: Option<String>,
    /// In the grammar `estimate` takes: `HOST[:PORT]` (server),
    /// `twamp:HOST[:PORT]` (reflector), `sim:...` (simulated path).
    pub target: String,
    pub methods: Option<Vec<String>>,
    pub interval: Option<String>,
    /// Random share of the interval added or taken away (0..0.5).
    pub jitter: Option<f64>,
    pub timeout: Option<String>,
    pub key_file: Option<PathBuf>,
    pub max_rate: Option<String>,
    pub max_streams: Option<usize>,
    /// The tight link's capacity, when the operator knows it (`10G`):
    /// `queue-fit` needs it; `igi` and `spruce` use it instead of
    /// measuring one.
    pub capacity: Option<String>,
    /// Measure from the far end toward this host.
    pub reverse: Option<bool>,
}

/// What flags and environment variables say; each wins over the file.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<String>,
    pub database: Option<PathBuf>,
    pub retention: Option<String>,
    pub interval: Option<String>,
    pub jitter: Option<f64>,
    pub timeout: Option<String>,
    pub methods: Option<Vec<String>>,
    pub workers: Option<usize>,
    /// Targets added to the file's (same defaults).
    pub targets: Vec<String>,
    pub probe_allow: Option<Vec<String>>,
    pub probe_max_concurrent: Option<usize>,
    pub probe_min_interval: Option<String>,
}

/// The checked configuration the agent runs.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub listen: Option<SocketAddr>,
    pub database: PathBuf,
    pub retention_s: f64,
    pub targets: Vec<TargetConfig>,
    /// Threads that take the targets' turns: measurements at once.
    pub workers: usize,
    pub probe: ProbePolicy,
    /// The mesh this agent's site belongs to, if any: its turns are
    /// among `targets`, and `/mesh` draws the whole grid.
    pub mesh: Option<MeshSite>,
}

/// A site's place in its mesh.
#[derive(Debug, Clone)]
pub struct MeshSite {
    pub mesh: crate::mesh::Mesh,
    /// This site's index in `mesh.sites`.
    pub me: usize,
}

#[derive(Debug, Clone)]
pub struct TargetConfig {
    pub name: String,
    pub target: Target,
    pub methods: Vec<Method>,
    pub interval_s: f64,
    pub jitter: f64,
    pub timeout_s: f64,
    pub key_file: Option<PathBuf>,
    pub max_rate_bps: Option<f64>,
    pub max_streams: usize,
    pub reverse: bool,
    pub capacity_bps: Option<f64>,
    /// Where in each interval the target's turn falls, seconds from a
    /// multiple of the interval since the Unix epoch (a mesh's slot);
    /// `None`: start times spread, then the interval with jitter.
    pub phase_s: Option<f64>,
}

#[derive(Debug, Clone)]
pub struct ProbePolicy {
    pub allow: Vec<String>,
    pub max_concurrent: usize,
    pub min_interval_s: f64,
    /// Longest a `/probe` measurement may take (the scrape's own timeout,
    /// when Prometheus sends it, if shorter).
    pub timeout_s: f64,
}

/// Workers when the config does not say: one per target up to this.
pub const DEFAULT_MAX_WORKERS: usize = 32;
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9447";
pub const DEFAULT_INTERVAL: &str = "5m";
pub const DEFAULT_TIMEOUT: &str = "60s";
pub const DEFAULT_RETENTION: &str = "30d";
pub const DEFAULT_JITTER: f64 = 0.1;
/// Nothing measures a target more often than this.
pub const MIN_INTERVAL_S: f64 = 1.0;

/// Where the history lives unless told: systemd's `StateDirectory`, the
/// XDG state directory, `~/.local/state`, else the working directory.
pub fn default_database() -> PathBuf {
    let env = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    if let Some(d) = env("STATE_DIRECTORY") {
        // systemd may list several, separated by ':'.
        let first = d
            .to_string_lossy()
            .split(':')
            .next()
            .unwrap_or("")
            .to_string();
        return Path::new(&first).join("history.db");
    }
    if let Some(d) = env("XDG_STATE_HOME") {
        return Path::new(&d).join("tightlink/history.db");
    }
    if let Some(h) = env("HOME") {
        return Path::new(&h).join(".local/state/tightlink/history.db");
    }
    PathBuf::from("tightlink-history.db")
}

/// Reads `path` (when given) and applies the overrides.
pub fn load(path: Option<&Path>, over: &Overrides) -> Result<AgentConfig> {
    let text = match path {
        Some(p) => Some(
            std::fs::read_to_string(p)
                .with_context(|| format!("reading the config {}", p.display()))?,
        ),
        None => None,
    };
    let file = match (path, &text) {
        (Some(p), Some(t)) => parse_file(t).map_err(|e| anyhow::anyhow!("{}:{e}", p.display()))?,
        _ => FileConfig::default(),
    };
    resolve(file, over, path, text.as_deref())
}

/// A config file's TOML that does not parse, or a key it does not know:
/// displayed with its line first (`12: unknown field ...`) so the caller
/// can put the file name in front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{line}: {message}")]
pub struct ConfigSyntax {
    pub line: usize,
    pub message: String,
}

/// Parses the TOML text.
pub fn parse_file(text: &str) -> Result<FileConfig, ConfigSyntax> {
    toml::from_str(text).map_err(|e| ConfigSyntax {
        line: e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1)
            .unwrap_or(1),
        message: e.message().trim().to_string(),
    })
}

fn period(what: &str, s: &str) -> Result<f64> {
    let v = parse_period_s(s).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
    if v <= 0.0 {
        bail!("{what}: '{s}' must be longer than zero");
    }
    Ok(v)
}

fn methods(what: &str, names: &[String], capacity_known: bool) -> Result<Vec<Method>> {
    if names.is_empty() {
        bail!("{what}: an empty list (give at least one method)");
    }
    let mut out: Vec<Method> = Vec::new();
    for n in names {
        let m = agent_method(n, capacity_known).map_err(|e| anyhow::anyhow!("{what}: {e}"))?;
        if !out.contains(&m) {
            out.push(m);
        }
    }
    Ok(out)
}

/// Why a method name is not one the agent can run toward a target.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentMethodError {
    #[error(transparent)]
    Unknown(#[from] UnknownMethod),
    #[error("{0} needs the tight link's capacity: give the target `capacity = \"10G\"` (its rate, when known)")]
    NeedsCapacity(String),
}

/// A method the agent can run toward a target: any closed-loop method,
/// `queue-fit` only where the target's capacity is configured.
pub fn agent_method(name: &str, capacity_known: bool) -> Result<Method, AgentMethodError> {
    match name.parse::<Method>()? {
        Method::QueueFit if !capacity_known => Err(AgentMethodError::NeedsCapacity(name.into())),
        m => Ok(m),
    }
}

fn jitter(what: &str, j: f64) -> Result<f64> {
    if !(0.0..=0.5).contains(&j) {
        bail!("{what}: {j} is outside 0..0.5 (a share of the interval)");
    }
    Ok(j)
}

/// `what`, prefixed with the config file's path and the setting's line
/// where there are (`a.toml:12: ...`).
fn at(path: Option<&Path>, line: Option<usize>, what: &str) -> String {
    match (path, line) {
        (Some(p), Some(l)) => format!("{}:{l}: {what}", p.display()),
        (Some(p), None) => format!("{}: {what}", p.display()),
        _ => what.to_string(),
    }
}

/// A part of the config file: its top-level keys, the `n`-th
/// `[[target]]` table (from 0) or `[probe]`.
#[derive(Clone, Copy)]
enum Part {
    Top,
    Target(usize),
    Probe,
}

/// Where settings stand in the config file, for errors that give their
/// line: a key's line in its part, else the part's header line.
struct Lines<'a>(Vec<&'a str>);

impl<'a> Lines<'a> {
    fn new(text: &'a str) -> Lines<'a> {
        Lines(text.lines().collect())
    }

    /// The part's lines, from its header (or the file's start) to the
    /// next header, as (index, line).
    fn part(&self, part: Part) -> Vec<(usize, &'a str)> {
        let header = |l: &str| l.trim_start().starts_with('[');
        let start = match part {
            Part::Top => Some(0),
            Part::Target(n) => self
                .0
                .iter()
                .enumerate()
                .filter(|(_, l)| l.trim() == "[[target]]")
                .nth(n)
                .map(|(i, _)| i),
            Part::Probe => self.0.iter().position(|l| l.trim() == "[probe]"),
        };
        let Some(start) = start else {
            return Vec::new();
        };
        let first = if matches!(part, Part::Top) {
            0
        } else {
            start + 1
        };
        let mut out: Vec<(usize, &'a str)> = self.0[start..first]
            .iter()
            .enumerate()
            .map(|(i, l)| (start + i, *l))
            .collect();
        for (i, l) in self.0.iter().enumerate().skip(first) {
            if header(l) {
                break;
            }
            out.push((i, l));
        }
        out
    }

    /// The 1-based line of `key = ...` in `part`, else of the part's
    /// header (the top level has none).
    fn of(&self, part: Part, key: &str) -> Option<usize> {
        let lines = self.part(part);
        let is_key = |l: &str| {
            l.trim_start()
                .strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with('='))
        };
        lines
            .iter()
            .find(|(_, l)| is_key(l))
            .or(lines.first().filter(|_| !matches!(part, Part::Top)))
            .map(|(i, _)| i + 1)
    }
}

/// What a target takes when it does not say.
struct TargetDefaults {
    interval: String,
    jitter: f64,
    timeout: String,
    methods: Vec<String>,
}

fn resolve(
    file: FileConfig,
    over: &Overrides,
    path: Option<&Path>,
    text: Option<&str>,
) -> Result<AgentConfig> {
    let lines = text.map(Lines::new);
    let line = |part: Part, key: &str| lines.as_ref().and_then(|l| l.of(part, key));
    // A top-level setting's error, at its line.
    let top = |key: &str, what: &str| at(path, line(Part::Top, key), what);
    let listen_text = over
        .listen
        .clone()
        .or(file.listen.clone())
        .unwrap_or_else(|| DEFAULT_LISTEN.to_string());
    let listen = match listen_text.as_str() {
        "off" | "" => None,
        l => Some(l.parse::<SocketAddr>().map_err(|_| {
            anyhow::anyhow!(
                "{}",
                top("listen", &format!("listen '{l}' is not ADDR:PORT (or off)"))
            )
        })?),
    };
    let retention = over
        .retention
        .clone()
        .or(file.retention.clone())
        .unwrap_or_else(|| DEFAULT_RETENTION.to_string());
    let retention_s = period(&top("retention", "retention"), &retention)?;
    let defaults = target_defaults(&file, over, &top)?;

    let mut entries: Vec<TargetFile> = file.targets;
    for t in &over.targets {
        entries.push(TargetFile {
            target: t.clone(),
            ..TargetFile::default()
        });
    }
    let mut targets = Vec::new();
    let mut names = BTreeSet::new();
    for (i, t) in entries.into_iter().enumerate() {
        let label = format!("target {} ('{}')", i + 1, t.target);
        // A target's setting at its line in the target's table (the
        // table's header where the setting is inherited or combined).
        let here = |key: &str, what: &str| {
            at(
                path,
                line(Part::Target(i), key),
                &format!("{label}: {what}"),
            )
        };
        targets.push(resolve_target(t, &defaults, &mut names, &here)?);
    }
    let mesh = match (&file.mesh, &file.site) {
        (Some(m), Some(site)) => {
            // A relative mesh path is the config file's neighbour.
            let m = match path.and_then(Path::parent) {
                Some(dir) if m.is_relative() => dir.join(m),
                _ => m.clone(),
            };
            let (site, turns) = mesh_targets(&m, site, &mut names, &top)?;
            targets.extend(turns);
            Some(site)
        }
        (None, None) => None,
        (Some(_), None) => bail!(
            "{}",
            top("mesh", "mesh given without site (this site's name in it)")
        ),
        (None, Some(_)) => bail!("{}", top("site", "site given without mesh (the mesh file)")),
    };
    let workers = match over.workers.or(file.workers) {
        Some(0) => bail!(
            "{}",
            top(
                "workers",
                "workers must be at least 1 (measurements at once)"
            )
        ),
        Some(w) => w,
        None => targets.len().clamp(1, DEFAULT_MAX_WORKERS),
    };
    let probe_at = |key: &str, what: &str| {
        let l = match key {
            "timeout" => line(Part::Top, key),
            _ => line(Part::Probe, key),
        };
        at(path, l, what)
    };
    let probe = resolve_probe(
        file.probe.unwrap_or_default(),
        over,
        &probe_at,
        &defaults.timeout,
    )?;
    Ok(AgentConfig {
        listen,
        database: over
            .database
            .clone()
            .or(file.database)
            .unwrap_or_else(default_database),
        retention_s,
        targets,
        workers,
        probe,
        mesh,
    })
}

/// What a target takes when it does not say: the flags', else the
/// file's, else the built-in defaults, each checked (at its line).
fn target_defaults(
    file: &FileConfig,
    over: &Overrides,
    top: &dyn Fn(&str, &str) -> String,
) -> Result<TargetDefaults> {
    let defaults = TargetDefaults {
        interval: over
            .interval
            .clone()
            .or(file.interval.clone())
            .unwrap_or_else(|| DEFAULT_INTERVAL.to_string()),
        jitter: jitter(
            &top("jitter", "jitter"),
            over.jitter.or(file.jitter).unwrap_or(DEFAULT_JITTER),
        )?,
        timeout: over
            .timeout
            .clone()
            .or(file.timeout.clone())
            .unwrap_or_else(|| DEFAULT_TIMEOUT.to_string()),
        methods: over
            .methods
            .clone()
            .or(file.methods.clone())
            .unwrap_or_else(|| vec!["auto".to_string()]),
    };
    // Checked here for the names; `queue-fit` is checked per target,
    // where a capacity may be given.
    methods(&top("methods", "methods"), &defaults.methods, true)?;
    // The file's own settings are its fault, not the first target's.
    period(&top("interval", "interval"), &defaults.interval)?;
    period(&top("timeout", "timeout"), &defaults.timeout)?;
    Ok(defaults)
}

/// One target's settings, each checked, its errors placed by `here`.
fn resolve_target(
    t: TargetFile,
    d: &TargetDefaults,
    names: &mut BTreeSet<String>,
    here: &dyn Fn(&str, &str) -> String,
) -> Result<TargetConfig> {
    let target = Target::parse(&t.target)
        .map_err(|e| anyhow::anyhow!("{}", here("target", &e.to_string())))?;
    if matches!(target, Target::Trace { .. }) {
        bail!(
            "{}",
            here(
                "target",
                "a recorded trace is not a path to watch (give a server, twamp: or sim: target)"
            )
        );
    }
    let name = t.name.clone().unwrap_or_else(|| t.target.clone());
    if name.is_empty() || name.chars().any(|c| c.is_control()) {
        bail!("{}", here("name", "name must be non-empty printable text"));
    }
    if !names.insert(name.clone()) {
        bail!(
            "{}",
            here(
                "name",
                &format!("the name '{name}' is used twice (names label metrics and history)")
            )
        );
    }
    let interval_s = period(
        &here("interval", "interval"),
        t.interval.as_deref().unwrap_or(&d.interval),
    )?;
    if interval_s < MIN_INTERVAL_S {
        bail!(
            "{}",
            here(
                "interval",
                &format!("interval {interval_s} s is shorter than {MIN_INTERVAL_S} s")
            )
        );
    }
    if let Some(k) = &t.key_file {
        std::fs::metadata(k)
            .with_context(|| here("key_file", &format!("key_file {}", k.display())))?;
    }
    // A rate setting (`500M`), its key named in the error.
    let rate = |key: &str, text: Option<&str>| -> Result<Option<f64>> {
        text.map(|r| {
            parse_rate(r).map_err(|e| anyhow::anyhow!("{}", here(key, &format!("{key}: {e}"))))
        })
        .transpose()
    };
    let max_rate_bps = rate("max_rate", t.max_rate.as_deref())?;
    let capacity_bps = rate("capacity", t.capacity.as_deref())?;
    if let Some(c) = capacity_bps.filter(|c| !(c.is_finite() && *c > 0.0)) {
        bail!(
            "{}",
            here(
                "capacity",
                &format!("capacity {c}: must be a positive rate")
            )
        );
    }
    // What the measurement would refuse, refused now, with the line.
    tightlink_measure::RealOptions {
        reverse: t.reverse.unwrap_or(false),
        key_file: t.key_file.clone(),
        max_rate_bps,
        ..tightlink_measure::RealOptions::default()
    }
    .check_for(&target)
    .map_err(|e| anyhow::anyhow!("{}", here("[[target]]", &e.to_string())))?;
    if t.max_streams == Some(0) {
        bail!("{}", here("max_streams", "max_streams must be at least 1"));
    }
    Ok(TargetConfig {
        name,
        methods: methods(
            &here("methods", "methods"),
            t.methods.as_ref().unwrap_or(&d.methods),
            capacity_bps.is_some(),
        )?,
        interval_s,
        jitter: jitter(&here("jitter", "jitter"), t.jitter.unwrap_or(d.jitter))?,
        timeout_s: period(
            &here("timeout", "timeout"),
            t.timeout.as_deref().unwrap_or(&d.timeout),
        )?,
        key_file: t.key_file,
        max_rate_bps,
        max_streams: t.max_streams.unwrap_or(60),
        reverse: t.reverse.unwrap_or(false),
        capacity_bps,
        target,
        phase_s: None,
    })
}

/// The turns of `site` in the mesh file `path` as targets: each far site
/// once a period, at its slot, for at most a slot, with the far site's
/// key file.
fn mesh_targets(
    path: &Path,
    site: &str,
    names: &mut BTreeSet<String>,
    top: &dyn Fn(&str, &str) -> String,
) -> Result<(MeshSite, Vec<TargetConfig>)> {
    let mesh =
        crate::mesh::load(path).map_err(|e| anyhow::anyhow!("{}", top("mesh", &e.to_string())))?;
    let Some(me) = mesh.sites.iter().position(|s| s.name == site) else {
        bail!(
            "{}",
            top(
                "site",
                &format!(
                    "site '{site}' is not in the mesh {} (sites: {})",
                    path.display(),
                    mesh.site_names()
                )
            )
        );
    };
    let schedule = crate::mesh::schedule(&mesh);
    let mut out = Vec::new();
    for (k, to) in schedule.turns_of(me) {
        let far = &mesh.sites[to];
        if !names.insert(far.name.clone()) {
            bail!(
                "{}",
                top(
                    "mesh",
                    &format!(
                        "the mesh's site '{}' has the name of a [[target]]",
                        far.name
                    )
                )
            );
        }
        out.push(TargetConfig {
            name: far.name.clone(),
            target: Target::parse(&far.address)?,
            methods: vec![mesh.method],
            interval_s: mesh.period_s,
            jitter: 0.0,
            timeout_s: mesh.slot_s,
            key_file: far.key_file.clone(),
            max_rate_bps: None,
            max_streams: 60,
            reverse: false,
            capacity_bps: None,
            phase_s: Some(k as f64 * mesh.slot_s),
        });
    }
    Ok((MeshSite { mesh, me }, out))
}

/// `[probe]`: who may ask this agent to probe, how many at once, how often.
fn resolve_probe(
    pf: ProbeFile,
    over: &Overrides,
    at: &dyn Fn(&str, &str) -> String,
    default_timeout: &str,
) -> Result<ProbePolicy> {
    let allow = over.probe_allow.clone().or(pf.allow).unwrap_or_default();
    for a in &allow {
        if a.is_empty() || a == "*" {
            bail!("{}", at("allow", &format!("probe.allow '{a}' would let anyone aim this host's probes anywhere; name targets or narrow the pattern")));
        }
    }
    let max_concurrent = over.probe_max_concurrent.or(pf.max_concurrent).unwrap_or(2);
    if max_concurrent == 0 {
        bail!(
            "{}",
            at("max_concurrent", "probe.max_concurrent must be at least 1")
        );
    }
    let min_interval = over
        .probe_min_interval
        .clone()
        .or(pf.min_interval)
        .unwrap_or_else(|| "10s".to_string());
    Ok(ProbePolicy {
        allow,
        max_concurrent,
        min_interval_s: parse_period_s(&min_interval).map_err(|e| {
            anyhow::anyhow!(
                "{}",
                at("min_interval", &format!("probe.min_interval: {e}"))
            )
        })?,
        timeout_s: period(&at("timeout", "timeout"), default_timeout)?,
    })
}

/// `*` matches any run of characters (none too); everything else itself.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = r#"
listen = "127.0.0.1:0"
database = "/tmp/x.db"
retention = "7d"
interval = "1m"

[probe]
allow = ["sim:*"]
min_interval = "5s"

[[target]]
name = "lab"
target = "10.0.0.2"
methods = ["multirate", "prcmt"]
interval = "30s"
max_rate = "500M"

[[target]]
target = "sim:cross=cbr:3G,seed=4"
"#;

    #[test]
    fn a_full_file_resolves() {
        let f = parse_file(SAMPLE).unwrap();
        let c = resolve(f, &Overrides::default(), None, None).unwrap();
        assert_eq!(c.retention_s, 7.0 * 86_400.0);
        assert_eq!(c.targets.len(), 2);
        let lab = &c.targets[0];
        assert_eq!(lab.name, "lab");
        assert_eq!(lab.methods, vec![Method::Multirate, Method::Prcmt]);
        assert_eq!(lab.interval_s, 30.0);
        assert_eq!(lab.max_rate_bps, Some(500e6));
        let sim = &c.targets[1];
        assert_eq!(sim.name, "sim:cross=cbr:3G,seed=4");
        assert_eq!(sim.interval_s, 60.0, "the file's default interval");
        assert_eq!(sim.jitter, DEFAULT_JITTER);
        assert_eq!(c.probe.allow, vec!["sim:*".to_string()]);
        assert_eq!(c.probe.min_interval_s, 5.0);
        assert_eq!(c.probe.max_concurrent, 2);
    }

    #[test]
    fn unknown_keys_name_their_line() {
        let text = "interval = \"1m\"\n\n[[target]]\ntarget = \"sim:\"\ncolour = \"blue\"\n";
        let e = parse_file(text).unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(e.message.contains("colour"), "{e}");
        assert!(e.to_string().starts_with("5: "), "{e}");
        let e = load(
            Some(Path::new("/nonexistent/agent.toml")),
            &Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("/nonexistent/agent.toml"), "{e}");
    }

    #[test]
    fn flags_win_over_the_file() {
        let f = parse_file(SAMPLE).unwrap();
        let over = Overrides {
            interval: Some("10s".into()),
            listen: Some("off".into()),
            targets: vec!["sim:seed=9".into()],
            ..Overrides::default()
        };
        let c = resolve(f, &over, None, None).unwrap();
        assert!(c.listen.is_none());
        assert_eq!(c.targets.len(), 3);
        assert_eq!(
            c.targets[1].interval_s, 10.0,
            "the flag's default beats the file's"
        );
        assert_eq!(
            c.targets[0].interval_s, 30.0,
            "a target's own interval stays"
        );
    }

    #[test]
    fn a_target_with_a_capacity_may_run_queue_fit() {
        let f = parse_file(
            "[[target]]\ntarget = \"sim:\"\nmethods = [\"queue-fit\", \"auto\"]\ncapacity = \"10G\"\n",
        )
        .unwrap();
        let c = resolve(f, &Overrides::default(), None, None).unwrap();
        assert_eq!(c.targets[0].methods, vec![Method::QueueFit, Method::Auto]);
        assert_eq!(c.targets[0].capacity_bps, Some(10e9));
    }

    #[test]
    fn bad_settings_say_what_and_where() {
        let bad = |text: &str| {
            resolve(
                parse_file(text).unwrap(),
                &Overrides::default(),
                Some(Path::new("a.toml")),
                Some(text),
            )
            .unwrap_err()
            .to_string()
        };
        let e = bad("[[target]]\ntarget = \"sim:colour=blue\"\n");
        assert!(
            e.starts_with("a.toml:2: target 1") && e.contains("colour"),
            "{e}"
        );
        // Each setting's error at its line: an unknown method, a key file
        // that is not there, a bad target further down.
        let e = bad("[[target]]\ntarget = \"sim:\"\nmethods = [\"guess\"]\n");
        assert!(
            e.starts_with("a.toml:3: target 1") && e.contains("methods"),
            "{e}"
        );
        let e = bad("interval = \"1m\"\n\n[[target]]\nname = \"far\"\ntarget = \"10.0.0.1\"\nkey_file = \"/nonexistent/k\"\n");
        assert!(
            e.starts_with("a.toml:6: target 1 ('10.0.0.1'): key_file /nonexistent/k"),
            "{e}"
        );
        let e = bad("[[target]]\ntarget = \"sim:\"\n[probe]\nallow = [\"sim:*\"]\n[[target]]\n# a comment\ntarget = \"twamp:\"\n");
        assert!(e.starts_with("a.toml:7: target 2"), "{e}");
        let e = bad("[[target]]\ntarget = \"sim:\"\nmethods = [\"queue-fit\"]\n");
        assert!(e.contains("target 1") && e.contains("capacity"), "{e}");
        let e = bad("[[target]]\ntarget = \"sim:\"\ncapacity = \"fast\"\n");
        assert!(e.contains("target 1") && e.contains("capacity: "), "{e}");
        // The global default list names queue-fit: a target with no
        // capacity is the one at fault.
        let e = bad("methods = [\"queue-fit\"]\n[[target]]\ntarget = \"sim:\"\ncapacity = \"10G\"\n[[target]]\ntarget = \"sim:seed=2\"\n");
        // No methods of its own: the error stands at its table's header.
        assert!(
            e.starts_with("a.toml:5: target 2") && e.contains("capacity"),
            "{e}"
        );
        let e = bad("[[target]]\ntarget = \"sim:\"\ninterval = \"100ms\"\n");
        assert!(e.contains("shorter than 1 s"), "{e}");
        let e = bad("[[target]]\ntarget = \"sim:\"\n[[target]]\ntarget = \"sim:\"\n");
        assert!(e.contains("target 2") && e.contains("used twice"), "{e}");
        let e = bad("[probe]\nallow = [\"*\"]\n");
        assert!(e.starts_with("a.toml:2: ") && e.contains("anyone"), "{e}");
        let e = bad("listen = \"localhost\"\n");
        assert!(
            e.starts_with("a.toml:1: ") && e.contains("ADDR:PORT"),
            "{e}"
        );
        let e = bad("[[target]]\ntarget = \"trace:x.csv\"\n");
        assert!(e.contains("not a path to watch"), "{e}");
        let e = bad("jitter = 0.9\n");
        assert!(e.contains("0..0.5"), "{e}");
        let e = bad("interval = \"soon\"\n[[target]]\ntarget = \"sim:\"\n");
        assert!(e.starts_with("a.toml:1: interval"), "{e}");
        assert!(!e.contains("target 1"), "{e}");
        // What a measurement would refuse is refused at load, with where.
        let e = bad("[[target]]\ntarget = \"sim:\"\nreverse = true\n");
        assert!(
            e.contains("target 1") && e.contains("real servers only"),
            "{e}"
        );
        let e = bad("[[target]]\ntarget = \"sim:\"\nmax_rate = \"0\"\n");
        assert!(e.contains("target 1") && e.contains("positive rate"), "{e}");
        let e = bad("[[target]]\ntarget = \"sim:\"\nmethods = [\"queue-fit\"]\ncapacity = \"0\"\n");
        assert!(
            e.contains("target 1") && e.contains("capacity 0: must be a positive rate"),
            "{e}"
        );
    }

    #[test]
    fn the_shipped_sample_config_resolves() {
        let text = include_str!("../../../deploy/agent.toml");
        let c = resolve(
            parse_file(text).unwrap(),
            &Overrides::default(),
            None,
            Some(text),
        )
        .unwrap();
        assert_eq!(c.listen, Some("127.0.0.1:9447".parse().unwrap()));
        assert_eq!(c.targets.len(), 1);
        assert_eq!(c.targets[0].name, "simulated 10G");
        assert_eq!(c.targets[0].methods, vec![Method::Multirate, Method::Prcmt]);
        assert_eq!(c.probe.allow, vec!["sim:*".to_string()]);
    }

    #[test]
    fn patterns() {
        assert!(glob_match("sim:*", "sim:"));
        assert!(glob_match("sim:*", "sim:seed=3"));
        assert!(!glob_match("sim:*", "10.0.0.1"));
        assert!(glob_match("10.1.*:7447", "10.1.2.3:7447"));
        assert!(!glob_match("10.1.*:7447", "10.1.2.3:7448"));
        assert!(glob_match("a*b*c", "aXbYc"));
        assert!(!glob_match("a*b*c", "aXcYb"));
        assert!(
            !glob_match("ab*ba", "aba"),
            "prefix and suffix may not overlap"
        );
        assert!(glob_match("host", "host"));
        assert!(!glob_match("host", "host2"));
    }

    /// A site's agent takes its turns of the mesh: each far site at its
    /// slot, once a period, for at most a slot; a site not in the mesh
    /// is named with the line of `site`.
    #[test]
    fn a_mesh_site_takes_its_turns() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mesh.toml"),
            "period = \"1h\"\nslot = \"20s\"\n\n[[site]]\nname = \"ams\"\naddress = \"10.0.0.1\"\n\n[[site]]\nname = \"fra\"\naddress = \"10.0.0.2\"\nkey_file = \"/etc/k\"\n\n[[site]]\nname = \"nyc\"\naddress = \"10.0.1.1\"\n",
        )
        .unwrap();
        let cfg = dir.path().join("agent.toml");
        std::fs::write(
            &cfg,
            "listen = \"off\"\nmesh = \"mesh.toml\"\nsite = \"nyc\"\n",
        )
        .unwrap();
        let c = load(Some(&cfg), &Overrides::default()).unwrap();
        // Three sites (a bye each round): nyc measures toward fra in slot
        // 3 and ams in slot 5 of 20 s.
        let got: Vec<(&str, f64, f64, f64)> = c
            .targets
            .iter()
            .map(|t| {
                (
                    t.name.as_str(),
                    t.phase_s.unwrap(),
                    t.interval_s,
                    t.timeout_s,
                )
            })
            .collect();
        assert_eq!(
            got,
            vec![("fra", 60.0, 3600.0, 20.0), ("ams", 100.0, 3600.0, 20.0)]
        );
        assert_eq!(c.targets[0].key_file.as_deref(), Some(Path::new("/etc/k")));
        assert_eq!(c.targets[0].jitter, 0.0);
        std::fs::write(
            &cfg,
            "listen = \"off\"\nmesh = \"mesh.toml\"\nsite = \"lon\"\n",
        )
        .unwrap();
        let e = load(Some(&cfg), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("agent.toml:3: site 'lon' is not in the mesh")
                && e.contains("ams, fra, nyc"),
            "{e}"
        );
        std::fs::write(&cfg, "listen = \"off\"\nmesh = \"mesh.toml\"\n").unwrap();
        let e = load(Some(&cfg), &Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("agent.toml:2: mesh given without site"), "{e}");
    }
}
