//! Lab scenarios: the path a lab builds, as a TOML file (unknown keys are
//! errors). The shipped ones are embedded, so `tightlink lab run cbr30`
//! works in any clone; any other name is read as a file.
//!
//! ```toml
//! description = "200 Mbit/s tbf, CBR cross traffic at 30 %"
//! [[hop]]                 # one shaped hop per entry, in path order
//! rate = "200M"           # at the Ethernet-frame layer, as tbf counts
//! burst = "3000B"         # tbf/htb bucket
//! buffer = "100KB"        # queue limit
//! delay = "15ms"          # after the queue, one way, each direction
//! jitter = "1ms"          # delay uniform in 15 +- 1 ms, no reordering
//! [cross]
//! traffic = "cbr:60M"     # the simulator's cross syntax (sim spec)
//! hop = 1                 # enters before this hop (default: the last)
//! # or a generator this project did not write (crate::generators):
//! # generator = "iperf3-udp"   rate = "60M"  length = "1400B"  pacing_timer = "100us"
//! # generator = "iperf3-tcp"   rate = "60M"  congestion = "cubic"  flows = 1
//! # generator = "iperf2-isochronous"  rate = "50M"  frames_per_second = 60  rate_stddev = "5M"
//! # generator = "tcpreplay"    capture = "mix" (shipped) or "FILE.pcap[.gz]"  multiplier = 1.0
//! [path]
//! loss = 0.01             # random drop share on the sender's access link
//! ```

use serde::Deserialize;
use tightlink_core::units::{parse_bytes, parse_rate, parse_time_ns};
use tightlink_sim::cross::CrossSpec;
use tightlink_sim::spec::parse_cross;

use crate::generators::{self, Generator};

/// The shipped scenarios: (name, TOML).
pub const BUILT_IN: &[(&str, &str)] = &[
    ("quiet", include_str!("../scenarios/quiet.toml")),
    ("cbr30", include_str!("../scenarios/cbr30.toml")),
    ("cbr60", include_str!("../scenarios/cbr60.toml")),
    ("bursty40", include_str!("../scenarios/bursty40.toml")),
    ("onoff4x", include_str!("../scenarios/onoff4x.toml")),
    ("smoothed", include_str!("../scenarios/smoothed.toml")),
    ("step", include_str!("../scenarios/step.toml")),
    ("two-hop", include_str!("../scenarios/two-hop.toml")),
    ("lossy", include_str!("../scenarios/lossy.toml")),
    ("shaper500", include_str!("../scenarios/shaper500.toml")),
    ("bucket256k", include_str!("../scenarios/bucket256k.toml")),
    (
        "bucket-cbr60",
        include_str!("../scenarios/bucket-cbr60.toml"),
    ),
    ("chain3", include_str!("../scenarios/chain3.toml")),
    ("rtt5-bursty", include_str!("../scenarios/rtt5-bursty.toml")),
    (
        "rtt5-smoothed",
        include_str!("../scenarios/rtt5-smoothed.toml"),
    ),
    (
        "rtt30-bursty",
        include_str!("../scenarios/rtt30-bursty.toml"),
    ),
    (
        "rtt30-smoothed",
        include_str!("../scenarios/rtt30-smoothed.toml"),
    ),
    (
        "tcp-random-loss",
        include_str!("../scenarios/tcp-random-loss.toml"),
    ),
    (
        "rtt30-random-loss",
        include_str!("../scenarios/rtt30-random-loss.toml"),
    ),
    (
        "iperf3-udp60",
        include_str!("../scenarios/iperf3-udp60.toml"),
    ),
    (
        "iperf3-udp60-fine",
        include_str!("../scenarios/iperf3-udp60-fine.toml"),
    ),
    (
        "iperf3-udp120-fine",
        include_str!("../scenarios/iperf3-udp120-fine.toml"),
    ),
    (
        "iperf3-cubic60",
        include_str!("../scenarios/iperf3-cubic60.toml"),
    ),
    (
        "iperf3-cubic120",
        include_str!("../scenarios/iperf3-cubic120.toml"),
    ),
    (
        "iperf3-bbr60",
        include_str!("../scenarios/iperf3-bbr60.toml"),
    ),
    (
        "iperf2-video",
        include_str!("../scenarios/iperf2-video.toml"),
    ),
    (
        "tcpreplay-mix",
        include_str!("../scenarios/tcpreplay-mix.toml"),
    ),
];

/// The shipped scenarios whose cross traffic tools this project did not
/// write make (`lab compare third-party`).
pub const THIRD_PARTY: &[&str] = &[
    "iperf3-udp60",
    "iperf3-udp60-fine",
    "iperf3-udp120-fine",
    "iperf3-cubic60",
    "iperf3-cubic120",
    "iperf3-bbr60",
    "iperf2-video",
    "tcpreplay-mix",
];

#[derive(Debug, thiserror::Error)]
#[error("scenario {source_name}: {message}")]
pub struct ScenarioError {
    pub source_name: String,
    pub message: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    description: Option<String>,
    hop: Vec<RawHop>,
    cross: Option<RawCross>,
    path: Option<RawPath>,
    run: Option<RawRun>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawHop {
    rate: String,
    burst: Option<String>,
    buffer: Option<String>,
    qdisc: Option<String>,
    delay: Option<String>,
    jitter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCross {
    traffic: Option<String>,
    hop: Option<usize>,
    tcp_flows: Option<usize>,
    seed: Option<u64>,
    generator: Option<String>,
    rate: Option<String>,
    length: Option<String>,
    pacing_timer: Option<String>,
    congestion: Option<String>,
    flows: Option<usize>,
    frames_per_second: Option<u32>,
    rate_stddev: Option<String>,
    capture: Option<String>,
    multiplier: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPath {
    loss: Option<f64>,
    delay: Option<String>,
    offloads: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRun {
    methods: Option<Vec<String>>,
    repeat: Option<usize>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Qdisc {
    Tbf,
    Htb,
}

impl Qdisc {
    pub fn as_str(self) -> &'static str {
        match self {
            Qdisc::Tbf => "tbf",
            Qdisc::Htb => "htb",
        }
    }
}

/// One shaped hop: a router's egress toward the next node.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    /// Ethernet frame without preamble and FCS (IP + 14 B): tbf's layer.
    pub rate_bps: f64,
    pub burst_bytes: u64,
    pub buffer_bytes: u64,
    pub qdisc: Qdisc,
    /// Propagation delay after the queue, one way, in each direction
    /// (a user-space delay line: the kernel has no netem); 0 for none.
    pub delay_ns: i64,
    /// Each frame's delay is uniform in `delay_ns ± jitter_ns`.
    pub jitter_ns: i64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Cross {
    /// What sends it: tightlink's own models or another tool.
    pub generator: Generator,
    /// Text as given (passed to `tightlink cross --traffic`); for another
    /// tool, a summary of its settings.
    pub traffic: String,
    pub spec: Option<CrossSpec>,
    /// Index (0-based) of the first shaped hop it crosses; it leaves the
    /// path after the last hop.
    pub entry_hop: usize,
    pub tcp_flows: usize,
    pub seed: u64,
}

impl Cross {
    /// Its mean rate as configured: the model's frames, a tool's datagram
    /// frames, or a capped TCP flow's cap (`None`: TCP bulk flows alone).
    pub fn configured_bps(&self) -> Option<f64> {
        self.spec
            .as_ref()
            .map(|s| s.rate_bps)
            .or(self.generator.mean_frame_bps())
            .or(self.generator.asked_bps())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    pub hops: Vec<Hop>,
    pub cross: Option<Cross>,
    /// Share of packets dropped at random on the sender's access link.
    pub loss: f64,
    /// Merging offloads (GRO, GSO, TSO) on every veth.
    pub offloads_on: bool,
    pub methods: Vec<String>,
    pub repeat: usize,
}

/// Default methods of `lab run`: every tightlink method that answers in
/// a few hundred milliseconds.
pub const DEFAULT_METHODS: &[&str] = &["multirate", "prcmt-pba", "pathload", "imr-avg", "prcmt"];

impl Scenario {
    /// A shipped scenario by name, or a TOML file by path.
    pub fn load(name_or_path: &str) -> Result<Scenario, ScenarioError> {
        if let Some((name, text)) = BUILT_IN.iter().find(|(n, _)| *n == name_or_path) {
            return Scenario::parse(name, text);
        }
        let text = std::fs::read_to_string(name_or_path).map_err(|e| ScenarioError {
            source_name: name_or_path.to_string(),
            message: format!(
                "{e} (not a file, and not a shipped scenario: {})",
                BUILT_IN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        })?;
        let name = std::path::Path::new(name_or_path)
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("lab");
        Scenario::parse(name, &text).map_err(|mut e| {
            e.source_name = name_or_path.to_string();
            e
        })
    }

    pub fn parse(name: &str, text: &str) -> Result<Scenario, ScenarioError> {
        let fail = |message: String| ScenarioError {
            source_name: name.to_string(),
            message,
        };
        let raw: RawScenario = toml::from_str(text).map_err(|e| fail(e.to_string()))?;
        if raw.hop.is_empty() {
            return Err(fail("needs at least one [[hop]]".into()));
        }
        if raw.hop.len() > 4 {
            return Err(fail(format!("{} hops: at most 4", raw.hop.len())));
        }
        let mut hops = Vec::new();
        for (i, h) in raw.hop.iter().enumerate() {
            hops.push(
                parse_hop(h).map_err(|(what, e)| fail(format!("hop {}: {what}: {e}", i + 1)))?,
            );
        }
        let cross = match raw.cross {
            None => None,
            Some(c) => Some(parse_cross_table(c, &hops).map_err(fail)?),
        };
        let path = raw.path.unwrap_or(RawPath {
            loss: None,
            delay: None,
            offloads: None,
        });
        let loss = path.loss.unwrap_or(0.0);
        if !(0.0..0.5).contains(&loss) {
            return Err(fail(format!(
                "path.loss = {loss}: expected 0 <= loss < 0.5"
            )));
        }
        if let Some(d) = &path.delay {
            return Err(fail(format!(
                "path.delay = \"{d}\": a delay belongs to a hop (`delay = \"{d}\"` under [[hop]], one way in each direction)"
            )));
        }
        let offloads_on = match path.offloads.as_deref().unwrap_or("off") {
            "off" => false,
            "on" => true,
            o => return Err(fail(format!("path.offloads = \"{o}\": expected off or on"))),
        };
        let run = raw.run.unwrap_or(RawRun {
            methods: None,
            repeat: None,
        });
        Ok(Scenario {
            name: name.to_string(),
            description: raw.description.unwrap_or_default(),
            hops,
            cross,
            loss,
            offloads_on,
            methods: run
                .methods
                .unwrap_or_else(|| DEFAULT_METHODS.iter().map(|m| m.to_string()).collect()),
            repeat: run.repeat.unwrap_or(10).max(1),
        })
    }

    /// Mean cross rate crossing hop `i` (bit/s), as configured.
    pub fn cross_bps_on(&self, i: usize) -> f64 {
        match &self.cross {
            Some(c) if i >= c.entry_hop => c.configured_bps().unwrap_or(0.0),
            _ => 0.0,
        }
    }

    /// A hop's rate minus the cross rate meant for it.
    fn free_bps_on(&self, i: usize) -> f64 {
        self.hops[i].rate_bps - self.cross_bps_on(i)
    }

    /// The tight hop: the least rate left after its cross traffic.
    fn tight_hop(&self) -> Option<usize> {
        (0..self.hops.len()).min_by(|&a, &b| self.free_bps_on(a).total_cmp(&self.free_bps_on(b)))
    }

    /// The capacity of the tight link (`queue-fit` needs it).
    pub fn tight_capacity_bps(&self) -> f64 {
        self.tight_hop().map_or(0.0, |i| self.hops[i].rate_bps)
    }

    /// The available bandwidth the scenario intends: min over hops of rate
    /// minus the cross rate on it (TCP flows make it unknowable: `None`).
    pub fn nominal_available_bps(&self) -> Option<f64> {
        if self
            .cross
            .as_ref()
            .is_some_and(|c| c.tcp_flows > 0 || c.generator.is_tcp())
        {
            return None;
        }
        self.tight_hop().map(|i| self.free_bps_on(i))
    }
}

/// One `[[hop]]`, or the key at fault and why.
fn parse_hop(h: &RawHop) -> Result<Hop, (&'static str, String)> {
    let rate_bps = parse_rate(&h.rate).map_err(|e| ("rate", e.to_string()))?;
    if !(1e6..=10e9).contains(&rate_bps) {
        return Err(("rate", "must be 1 Mbit/s to 10 Gbit/s".into()));
    }
    let burst_bytes = match &h.burst {
        Some(b) => parse_bytes(b).map_err(|e| ("burst", e.to_string()))?,
        None => 3000,
    };
    if burst_bytes < 1600 {
        return Err((
            "burst",
            "below one 1514-byte frame plus slack (1600 B)".into(),
        ));
    }
    let buffer_bytes = match &h.buffer {
        Some(b) => parse_bytes(b).map_err(|e| ("buffer", e.to_string()))?,
        None => 100_000,
    };
    if buffer_bytes < 3000 {
        return Err(("buffer", "below two frames (3000 B)".into()));
    }
    let qdisc = match h.qdisc.as_deref().unwrap_or("tbf") {
        "tbf" => Qdisc::Tbf,
        "htb" => Qdisc::Htb,
        q => return Err(("qdisc", format!("'{q}': expected tbf or htb"))),
    };
    let time = |what: &'static str, v: &Option<String>| match v {
        None => Ok(0),
        Some(t) => parse_time_ns(t).map_err(|e| (what, e.to_string())),
    };
    let delay_ns = time("delay", &h.delay)?;
    let jitter_ns = time("jitter", &h.jitter)?;
    if !(0..=1_000_000_000).contains(&delay_ns) {
        return Err(("delay", "must be 0 to 1 s".into()));
    }
    if jitter_ns < 0 || jitter_ns > delay_ns {
        return Err(("jitter", "must be 0 to the hop's delay".into()));
    }
    Ok(Hop {
        rate_bps,
        burst_bytes,
        buffer_bytes,
        qdisc,
        delay_ns,
        jitter_ns,
    })
}

/// `[cross]`: tightlink's own traffic (`traffic`, `tcp_flows`, `seed`) or
/// another tool's (`generator` and its keys); each key is checked against
/// the generator it belongs to.
fn parse_cross_table(c: RawCross, hops: &[Hop]) -> Result<Cross, String> {
    let hop = c.hop.unwrap_or(hops.len());
    if hop == 0 || hop > hops.len() {
        return Err(format!(
            "cross.hop = {hop}: hops are numbered 1 to {}",
            hops.len()
        ));
    }
    let entry_hop = hop - 1;
    let generator_name = c.generator.as_deref().unwrap_or("tightlink");
    check_key_owners(&c, generator_name)?;
    let (generator, spec, tcp_flows, traffic) = match generator_name {
        "tightlink" => tightlink_cross(&c)?,
        "iperf3-udp" => (iperf3_udp(&c, generator_name)?, None, 0, None),
        "iperf3-tcp" => (iperf3_tcp(&c, generator_name)?, None, 0, None),
        "iperf2-isochronous" => (iperf2_isochronous(&c, generator_name)?, None, 0, None),
        "tcpreplay" => (tcpreplay(&c)?, None, 0, None),
        other => {
            return Err(format!(
                "cross.generator = \"{other}\": expected tightlink, iperf3-udp, iperf3-tcp, \
                 iperf2-isochronous or tcpreplay"
            ))
        }
    };
    let traffic = traffic.unwrap_or_else(|| generator.to_string());
    let cross = Cross {
        generator,
        traffic,
        spec,
        entry_hop,
        tcp_flows,
        seed: c.seed.unwrap_or(1),
    };
    if let Some(m) = cross.configured_bps() {
        for (i, h) in hops.iter().enumerate().skip(entry_hop) {
            if m >= h.rate_bps {
                return Err(format!(
                    "cross traffic of {:.0} Mbit/s fills hop {} ({:.0} Mbit/s)",
                    m / 1e6,
                    i + 1,
                    h.rate_bps / 1e6
                ));
            }
        }
    }
    Ok(cross)
}

/// Keys that belong to one generator only are errors on another.
fn check_key_owners(c: &RawCross, generator_name: &str) -> Result<(), String> {
    let iperf_rate: &[&str] = &["iperf3-udp", "iperf3-tcp", "iperf2-isochronous"];
    let keys: [(&str, bool, &[&str]); 12] = [
        ("traffic", c.traffic.is_some(), &["tightlink"]),
        ("tcp_flows", c.tcp_flows.is_some(), &["tightlink"]),
        ("seed", c.seed.is_some(), &["tightlink"]),
        ("rate", c.rate.is_some(), iperf_rate),
        ("length", c.length.is_some(), &["iperf3-udp"]),
        ("pacing_timer", c.pacing_timer.is_some(), &["iperf3-udp"]),
        ("congestion", c.congestion.is_some(), &["iperf3-tcp"]),
        ("flows", c.flows.is_some(), &["iperf3-tcp"]),
        (
            "frames_per_second",
            c.frames_per_second.is_some(),
            &["iperf2-isochronous"],
        ),
        (
            "rate_stddev",
            c.rate_stddev.is_some(),
            &["iperf2-isochronous"],
        ),
        ("capture", c.capture.is_some(), &["tcpreplay"]),
        ("multiplier", c.multiplier.is_some(), &["tcpreplay"]),
    ];
    for (key, given, owners) in keys {
        if given && !owners.contains(&generator_name) {
            return Err(format!(
                "cross.{key}: belongs to generator {} (this one is {generator_name})",
                owners.join(" or ")
            ));
        }
    }
    Ok(())
}

/// `rate` of an iperf generator: required, above 0, 10 Gbit/s at most.
fn cross_rate(c: &RawCross, generator_name: &str) -> Result<f64, String> {
    let r = c
        .rate
        .as_deref()
        .ok_or_else(|| format!("cross.rate: generator {generator_name} needs one"))?;
    let bps = parse_rate(r).map_err(|e| format!("cross.rate: {e}"))?;
    if !(bps > 0.0 && bps <= 10e9) {
        return Err(format!(
            "cross.rate = \"{r}\": must be above 0 and at most 10 Gbit/s"
        ));
    }
    Ok(bps)
}

/// tightlink's own generator: its traffic spec and TCP flows.
#[allow(clippy::type_complexity)]
fn tightlink_cross(
    c: &RawCross,
) -> Result<(Generator, Option<CrossSpec>, usize, Option<String>), String> {
    let traffic = c
        .traffic
        .clone()
        .ok_or("cross.traffic: missing (or name another `generator`)")?;
    let spec = parse_cross(&traffic).map_err(|e| format!("cross.traffic: {e}"))?;
    let tcp_flows = c.tcp_flows.unwrap_or(0);
    if crate::cross::sends_nothing(spec.as_ref(), tcp_flows) {
        return Err(format!(
            "cross.traffic = {traffic:?}: sends nothing (no rate, no tcp_flows); \
             leave [cross] out for an idle path"
        ));
    }
    Ok((Generator::Tightlink, spec, tcp_flows, Some(traffic)))
}

fn iperf3_udp(c: &RawCross, generator_name: &str) -> Result<Generator, String> {
    let length_bytes = match &c.length {
        None => generators::IPERF3_UDP_LENGTH_BYTES,
        Some(l) => parse_bytes(l).map_err(|e| format!("cross.length: {e}"))?,
    };
    if !(64..=1472).contains(&length_bytes) {
        return Err(format!(
            "cross.length = {length_bytes} B: a datagram of 64 to 1472 B fits one frame"
        ));
    }
    let pacing_timer_us = match &c.pacing_timer {
        None => generators::IPERF3_PACING_TIMER_US,
        Some(t) => {
            let ns = parse_time_ns(t).map_err(|e| format!("cross.pacing_timer: {e}"))?;
            if !(1_000..=1_000_000_000).contains(&ns) {
                return Err(format!("cross.pacing_timer = \"{t}\": must be 1 us to 1 s"));
            }
            (ns / 1_000) as u64
        }
    };
    Ok(Generator::Iperf3Udp {
        rate_bps: cross_rate(c, generator_name)?,
        length_bytes,
        pacing_timer_us,
    })
}

fn iperf3_tcp(c: &RawCross, generator_name: &str) -> Result<Generator, String> {
    let congestion = c.congestion.clone().unwrap_or_else(|| "cubic".into());
    if !["cubic", "bbr", "reno"].contains(&congestion.as_str()) {
        return Err(format!(
            "cross.congestion = \"{congestion}\": expected cubic, bbr or reno"
        ));
    }
    let flows = c.flows.unwrap_or(1);
    if !(1..=16).contains(&flows) {
        return Err(format!("cross.flows = {flows}: must be 1 to 16"));
    }
    Ok(Generator::Iperf3Tcp {
        rate_bps: cross_rate(c, generator_name)?,
        congestion,
        flows,
    })
}

fn iperf2_isochronous(c: &RawCross, generator_name: &str) -> Result<Generator, String> {
    let frames_per_second = c.frames_per_second.unwrap_or(60);
    if !(1..=10_000).contains(&frames_per_second) {
        return Err(format!(
            "cross.frames_per_second = {frames_per_second}: must be 1 to 10000"
        ));
    }
    let stddev_bps = match &c.rate_stddev {
        None => 0.0,
        Some(r) => parse_rate(r).map_err(|e| format!("cross.rate_stddev: {e}"))?,
    };
    Ok(Generator::Iperf2Isochronous {
        frames_per_second,
        rate_bps: cross_rate(c, generator_name)?,
        stddev_bps,
    })
}

/// A capture replayed at `multiplier` times its pace; its mean rate from
/// the capture's span.
fn tcpreplay(c: &RawCross) -> Result<Generator, String> {
    let capture = c.capture.clone().unwrap_or_else(|| "mix".into());
    let multiplier = c.multiplier.unwrap_or(1.0);
    if !(multiplier > 0.0 && multiplier <= 100.0) {
        return Err(format!(
            "cross.multiplier = {multiplier}: must be above 0 and at most 100"
        ));
    }
    let bytes = generators::capture_bytes(&capture)
        .map_err(|e| format!("cross.capture = \"{capture}\": {e}"))?;
    let span =
        generators::pcap_span(&bytes).map_err(|e| format!("cross.capture = \"{capture}\": {e}"))?;
    let mean = span.mean_bps().ok_or_else(|| {
        format!(
            "cross.capture = \"{capture}\": {} frames over no time: nothing to pace",
            span.frames
        )
    })?;
    Ok(Generator::TcpReplay {
        capture,
        multiplier,
        mean_frame_bps: mean * multiplier,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_scenario_parses() {
        for (name, _) in BUILT_IN {
            let s = Scenario::load(name).unwrap_or_else(|e| panic!("{e}"));
            assert!(!s.description.is_empty(), "{name} has no description");
            // Inside the range a small VM shapes precisely (docs/evaluation.md);
            // shaper500 is the 500 Mbit/s capacity lab (its trains
            // read 499-501 Mbit/s: docs/capacity.md). tcp-random-loss's
            // 1 Gbit/s hop only forwards a 200 Mbit/s flow: its rate is
            // never reached, so its precision does not matter. chain3's
            // 600 Mbit/s first hop is still in the precise range (tbf
            // within 0.2 % up to 600 Mbit/s).
            let top = match *name {
                "shaper500" => 500e6,
                "chain3" => 600e6,
                "tcp-random-loss" => 1e9,
                _ => 300e6,
            };
            assert!(s.hops.iter().all(|h| h.rate_bps <= top), "{name}");
        }
    }

    #[test]
    fn cbr30_is_200m_with_60m_of_cbr() {
        let s = Scenario::load("cbr30").unwrap();
        assert_eq!(s.hops[0].rate_bps, 200e6);
        assert_eq!(s.nominal_available_bps(), Some(140e6));
    }

    #[test]
    fn two_hop_tight_link_is_not_the_narrow_one() {
        let s = Scenario::load("two-hop").unwrap();
        let narrow = (0..s.hops.len())
            .min_by(|&a, &b| s.hops[a].rate_bps.total_cmp(&s.hops[b].rate_bps))
            .unwrap();
        let tight = (0..s.hops.len())
            .min_by(|&a, &b| {
                (s.hops[a].rate_bps - s.cross_bps_on(a))
                    .total_cmp(&(s.hops[b].rate_bps - s.cross_bps_on(b)))
            })
            .unwrap();
        assert_ne!(narrow, tight);
        // The 250 Mbit/s hop with 150 of CBR, not the 150 Mbit/s one.
        assert_eq!(s.tight_capacity_bps(), 250e6);
        assert_eq!(Scenario::load("cbr30").unwrap().tight_capacity_bps(), 200e6);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_named() {
        let e = Scenario::parse("t", "[[hop]]\nrate = \"200M\"\nburts = \"3KB\"\n").unwrap_err();
        assert!(e.to_string().contains("burts"), "{e}");
        assert!(e.to_string().contains("line 3"), "{e}");
        let e = Scenario::parse("t", "[[hop]]\nrate = \"fast\"\n").unwrap_err();
        assert!(e.to_string().contains("hop 1: rate"), "{e}");
        let e = Scenario::parse(
            "t",
            "[[hop]]\nrate = \"100M\"\n[cross]\ntraffic = \"cbr:100M\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("fills hop 1"), "{e}");
        let e = Scenario::parse(
            "t",
            "[[hop]]\nrate = \"100M\"\n[cross]\ntraffic = \"cbr:0\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("sends nothing"), "{e}");
        let s = "[[hop]]\nrate = \"100M\"\n[cross]\ntraffic = \"none\"\ntcp_flows = 1\n";
        assert_eq!(Scenario::parse("t", s).unwrap().cross.unwrap().tcp_flows, 1);
        let e = Scenario::parse("t", "[[hop]]\nrate = \"100M\"\n[path]\ndelay = \"10ms\"\n")
            .unwrap_err();
        assert!(e.to_string().contains("under [[hop]]"), "{e}");
        let e = Scenario::parse(
            "t",
            "[[hop]]\nrate = \"100M\"\ndelay = \"1ms\"\njitter = \"2ms\"\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("hop 1: jitter"), "{e}");
        let s = Scenario::parse(
            "t",
            "[[hop]]\nrate = \"100M\"\ndelay = \"15ms\"\njitter = \"500us\"\n",
        )
        .unwrap();
        assert_eq!(
            (s.hops[0].delay_ns, s.hops[0].jitter_ns),
            (15_000_000, 500_000)
        );
        let e = Scenario::parse("t", "description = \"x\"\n").unwrap_err();
        assert!(e.to_string().contains("hop"), "{e}");
        let e = Scenario::load("/nonexistent/x.toml").unwrap_err();
        assert!(e.to_string().contains("cbr30"), "{e}");
    }

    #[test]
    fn third_party_generators_parse_and_their_keys_are_checked() {
        let s = Scenario::load("iperf3-udp60-fine").unwrap();
        let c = s.cross.as_ref().unwrap();
        assert_eq!(
            c.generator,
            Generator::Iperf3Udp {
                rate_bps: 60e6,
                length_bytes: 1400,
                pacing_timer_us: 100
            }
        );
        // 200 less 60 * 1442 / 1400 of frames.
        assert!((s.nominal_available_bps().unwrap() - 138.2e6).abs() < 1.0);
        assert_eq!(
            Scenario::load("iperf3-udp60")
                .unwrap()
                .cross
                .unwrap()
                .generator,
            Generator::Iperf3Udp {
                rate_bps: 60e6,
                length_bytes: 1400,
                pacing_timer_us: 1000
            }
        );
        // TCP's share is the counters' to say.
        let t = Scenario::load("iperf3-bbr60").unwrap();
        assert_eq!(t.nominal_available_bps(), None);
        assert_eq!(t.tight_capacity_bps(), 200e6);
        for name in THIRD_PARTY {
            let s = Scenario::load(name).unwrap();
            assert!(s.cross.unwrap().generator.binary().is_some(), "{name}");
        }
        let base = "[[hop]]\nrate = \"200M\"\n[cross]\n";
        let bad = |extra: &str, says: &str| {
            let e = Scenario::parse("t", &format!("{base}{extra}")).unwrap_err();
            assert!(e.to_string().contains(says), "{extra}: {e}");
        };
        bad(
            "generator = \"iperf3-udp\"\n",
            "cross.rate: generator iperf3-udp needs one",
        );
        bad(
            "generator = \"tcpreplay\"\ncapture = \"/nonexistent.pcap\"\n",
            "cross.capture = \"/nonexistent.pcap\": cannot read",
        );
        bad(
            "generator = \"tcpreplay\"\nmultiplier = 0.0\n",
            "cross.multiplier = 0: must be above 0",
        );
        bad(
            "generator = \"iperf3-udp\"\nrate = \"60M\"\ncapture = \"mix\"\n",
            "cross.capture: belongs to generator tcpreplay",
        );
        // At 4x the shipped mix fills the 200 Mbit/s hop.
        bad(
            "generator = \"tcpreplay\"\nmultiplier = 4.0\n",
            "fills hop 1",
        );
        bad(
            "generator = \"iperf3-udp\"\nrate = \"60M\"\ncongestion = \"bbr\"\n",
            "cross.congestion: belongs to generator iperf3-tcp",
        );
        bad(
            "generator = \"iperf3-tcp\"\nrate = \"60M\"\ntraffic = \"cbr:60M\"\n",
            "cross.traffic: belongs to generator tightlink",
        );
        bad(
            "generator = \"iperf3-udp\"\nrate = \"250M\"\n",
            "fills hop 1",
        );
        bad(
            "generator = \"iperf3-udp\"\nrate = \"60M\"\nlength = \"9000B\"\n",
            "cross.length = 9000 B",
        );
        bad(
            "generator = \"iperf3-udp\"\nrate = \"60M\"\npacing_timer = \"10ns\"\n",
            "cross.pacing_timer",
        );
        bad(
            "generator = \"iperf3-tcp\"\nrate = \"60M\"\ncongestion = \"vegas\"\n",
            "expected cubic, bbr or reno",
        );
        bad(
            "generator = \"ostinato\"\n",
            "cross.generator = \"ostinato\"",
        );
        bad("rate = \"60M\"\n", "cross.rate: belongs to generator");
        bad(
            "hop = 2\ntraffic = \"cbr:1M\"\n",
            "hops are numbered 1 to 1",
        );
    }
}
