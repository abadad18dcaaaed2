//! Each link's capacity by variable packet size (pathchar; \[HOST\] section
//! 4.1): TTL-limited probes of several sizes, on the simulator (next to
//! each link's truth) or on a real path with UDP and ICMP errors.

use crate::bad_input;
use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::path::PathBuf;
use std::time::Duration;
use tightlink_core::warning::{Warning, WarningCode};

use anyhow::{Context, Result};
use serde::Serialize;
use tightlink_core::capacity::{LinkCapacity, LinkEstimate};
use tightlink_core::channel::HopChannel;
use tightlink_net::ttl::UdpTtlChannel;
use tightlink_probe::hops::{run_hops, HeadFit, HopsParams, HopsReport};
use tightlink_sim::SimHopChannel;

use crate::target::Target;

/// The default target: a pathchar-era path where VPS resolves every link
/// (\[HOST\]: up to about OC-3 with 1500 B packets): 1 Gbit/s, an OC-3 with
/// 20 % Poisson cross traffic, a T3 with 10 %, and a 100 Mbit/s last link.
pub const DEFAULT_TARGET: &str =
    "sim:hops=1G+155M+45M+100M,cross=none+poisson:31M+poisson:4.5M+none";

/// The UDP port real probes go to when the target names none (traceroute's).
pub const DEFAULT_PORT: u16 = 33434;

#[derive(Debug, Clone, PartialEq)]
pub struct HopsOptions {
    /// Probe sizes at the IP layer, (low, high, count); `None`: 600 B to
    /// the first link's MTU, 8 sizes.
    pub sizes: Option<(u32, u32, usize)>,
    /// Probes per size (and head length).
    pub repeats: usize,
    pub first_ttl: u8,
    pub max_ttl: u8,
    /// A probe without a reply by then counts as lost.
    pub timeout_ns: i64,
    /// Idle time after each probe's reply (routers rate-limit ICMP).
    pub gap_ns: i64,
    pub seed: u64,
    /// Send each probe behind heads of N and 1.5 N full-size packets, so
    /// that token-bucket shapers show.
    pub behind: Option<u32>,
    /// Write every answered probe as CSV (ttl, size_bytes, head_bytes,
    /// rtt_ns).
    pub save_samples: Option<PathBuf>,
}

impl Default for HopsOptions {
    fn default() -> Self {
        HopsOptions {
            sizes: None,
            repeats: 10,
            first_ttl: 1,
            max_ttl: 30,
            timeout_ns: 1_000_000_000,
            gap_ns: 1_000_000,
            seed: 1,
            behind: None,
            save_samples: None,
        }
    }
}

/// What one run found, with what it sent. Serialises to the JSON object
/// `tightlink hops --json` prints.
#[derive(Debug, Clone)]
pub struct HopsResult {
    pub target: String,
    /// The channel's one-line description.
    pub channel: String,
    pub mtu_bytes: u32,
    pub params: HopsParams,
    pub report: HopsReport,
}

impl HopsResult {
    /// Who answered at `ttl`.
    pub fn responder(&self, ttl: u8) -> Option<String> {
        self.report
            .hops
            .iter()
            .find(|h| h.ttl == ttl)
            .and_then(|h| h.responder.clone())
    }

    /// The truth of a link from `from` to `ttl` (the simulator's): a link
    /// spanning silent hops is their series.
    pub fn truth_bps(&self, link: &LinkEstimate) -> Option<f64> {
        let t = self.report.truth_bps.as_ref()?;
        let span = t.get(link.from_ttl as usize..(link.ttl as usize).min(t.len()))?;
        (!span.is_empty()).then(|| 1.0 / span.iter().map(|c| 1.0 / c).sum::<f64>())
    }

    /// What the reader should know beyond the numbers: where a link may
    /// be a shaped hop that hid behind its bucket.
    pub fn warnings(&self) -> Vec<Warning> {
        let mut out: Vec<Warning> = self
            .report
            .head_fit
            .as_ref()
            .and_then(|f| head_fit_warning(f, &self.params.head_packets))
            .map(|text| Warning::new(WarningCode::HeadFit, text))
            .into_iter()
            .collect();
        let links: Vec<(u8, u8, Option<bool>)> = self
            .report
            .links
            .iter()
            .map(|l| (l.from_ttl, l.ttl, l.queued_behind_head))
            .collect();
        let hidden = passed_before_a_queue(&links);
        let (Some(&shortest), Some(&longest), false) = (
            self.params.head_packets.iter().min(),
            self.params.head_packets.iter().max(),
            hidden.is_empty(),
        ) else {
            return out;
        };
        let ttls: Vec<String> = hidden.iter().map(u8::to_string).collect();
        out.push(Warning::new(WarningCode::HeadFit, format!(
            "link(s) {} passed heads of up to {longest} packets that a later link queued: a shaped hop whose bucket outlasts the head's excess over its rate looks the same; --behind {} sends heads four times as long",
            ttls.join(", "),
            shortest.saturating_mul(4)
        )));
        out
    }

    /// `lone` (pathchar) or `behind-head`.
    pub fn mode(&self) -> &'static str {
        if self.params.head_packets.is_empty() {
            "lone"
        } else {
            "behind-head"
        }
    }
}

/// Why the heads are not the ones asked for, if they are not.
fn head_fit_warning(fit: &HeadFit, used: &[u32]) -> Option<String> {
    if !fit.shrunk() {
        return None;
    }
    let tried: Vec<String> = fit
        .tries
        .iter()
        .map(|(head, sent, answered)| format!("behind {head} packets {answered} of {sent}"))
        .collect();
    let asked = fit.asked.iter().max().copied().unwrap_or(0);
    Some(if fit.gave_up {
        format!(
            "probes to the destination came back seldom behind heads ({}) where {} of {} lone probes did: a queue on the path is shorter than even the shortest head, and these figures may be far off; lone probes (no --behind) cannot see shapers",
            tried.join(", "),
            fit.lone_answered,
            fit.lone_sent
        )
    } else {
        format!(
            "heads of {asked} packets overflowed a queue on the path (probes to the destination came back {}, lone {} of {}): the hops were probed behind heads of {} packets instead, and a shaped hop whose bucket outlasts their excess over its rate reads '>=' or 'passed'",
            tried.join(", "),
            fit.lone_answered,
            fit.lone_sent,
            used.iter().map(u32::to_string).collect::<Vec<_>>().join(" and ")
        )
    })
}

/// The links (`(from_ttl, ttl, queued_behind_head)`) past the first that
/// a head passed while a later link queued it. A head of N packets
/// leaving the host at H queues behind a bucket of B packets at rate R
/// only where N (1 - R/H) > B, so such a link may be a shaped hop the
/// host is barely faster than (a 504 Mbit/s sender, a 400 Mbit/s tbf with
/// a 12000 B bucket: heads of 16 and 24 passed it, of 64 and 96 queued).
/// Link 1 is the host's own; a last link that passed with nothing queued
/// after it is only faster than the head.
fn passed_before_a_queue(links: &[(u8, u8, Option<bool>)]) -> Vec<u8> {
    links
        .iter()
        .filter(|&&(from, ttl, queued)| {
            from > 0
                && queued == Some(false)
                && links
                    .iter()
                    .any(|&(_, later, q)| later > ttl && q == Some(true))
        })
        .map(|&(_, ttl, _)| ttl)
        .collect()
}

/// Measures each link's capacity toward `target` (`sim:...` or a host,
/// UDP port 33434 unless it names one). `progress(ttl, done, total)`
/// after each probe.
pub fn hops(
    target: &Target,
    options: &HopsOptions,
    progress: &mut dyn FnMut(u8, usize, usize),
) -> Result<HopsResult> {
    if options.timeout_ns <= 0 {
        bad_input!("--timeout must be positive");
    }
    if options.first_ttl == 0 || options.first_ttl > options.max_ttl {
        bad_input!("--first-ttl must be between 1 and --max-ttl");
    }
    if options.repeats == 0 {
        bad_input!("--repeats must be at least 1");
    }
    let mut ch = open(target, options)?;
    let mtu = ch.mtu_bytes();
    let mut params = HopsParams::for_mtu(mtu);
    if let Some((low, high, count)) = options.sizes {
        if low >= high || count < 2 {
            bad_input!("--sizes {low}:{high}:{count}: LOW must be below HIGH and COUNT at least 2");
        }
        if high > mtu {
            bad_input!(
                "--sizes {low}:{high}:{count}: {high} B exceeds the first link's MTU ({mtu} B)"
            );
        }
        params.sizes = HopsParams::even_sizes(low, high, count);
    }
    params.repeats = options.repeats;
    params.first_ttl = options.first_ttl;
    params.max_ttl = options.max_ttl;
    params.seed = options.seed;
    if let Some(n) = options.behind {
        if n == 0 {
            bad_input!("--behind must be at least 1 packet");
        }
        params.head_packets = vec![n, n + n.div_ceil(2)];
    }
    let report = run_hops(&mut *ch, &params, progress)?;
    // The heads the hops were probed behind (fewer packets where the
    // asked ones overflowed a queue); `head_fit` keeps what was asked.
    params.head_packets = report.head_packets.clone();
    if let Some(path) = &options.save_samples {
        let mut out = String::from("ttl,size_bytes,head_bytes,rtt_ns\n");
        for s in &report.samples {
            out.push_str(&format!(
                "{},{},{},{:.0}\n",
                s.ttl, s.size_bytes, s.head_bytes, s.rtt_ns
            ));
        }
        std::fs::write(path, out).with_context(|| format!("--save-samples {}", path.display()))?;
    }
    Ok(HopsResult {
        target: target.to_string(),
        channel: ch.describe(),
        mtu_bytes: mtu,
        params,
        report,
    })
}

fn open(target: &Target, options: &HopsOptions) -> Result<Box<dyn HopChannel>> {
    let host = match target {
        Target::Sim { spec, .. } => {
            return Ok(Box::new(SimHopChannel::new(
                spec.clone(),
                options.gap_ns,
                options.timeout_ns,
            )))
        }
        Target::Server { host } => host,
        Target::Twamp { .. } | Target::Trace { .. } => {
            bad_input!(
                "target {target}: per-hop capacity needs a host (UDP to a closed port) or sim:"
            )
        }
    };
    let addr = tightlink_net::address::with_port(host, DEFAULT_PORT)
        .to_socket_addrs()
        .with_context(|| format!("target {host}: cannot resolve"))?
        .find_map(|s| match s {
            SocketAddr::V4(v4) => Some(v4),
            SocketAddr::V6(_) => None,
        })
        .ok_or_else(|| {
            crate::error::BadInput(format!(
                "target {host}: no IPv4 address (IPv6 is not done yet)"
            ))
        })?;
    let ch = UdpTtlChannel::open(
        SocketAddrV4::new(*addr.ip(), addr.port()),
        Duration::from_nanos(options.timeout_ns as u64),
        Duration::from_nanos(options.gap_ns.max(0) as u64),
    )?;
    Ok(Box::new(ch))
}

#[derive(Serialize)]
struct JsonLink {
    from_ttl: u8,
    ttl: u8,
    responder: Option<String>,
    status: &'static str,
    capacity_bps: Option<f64>,
    low_bps: Option<f64>,
    high_bps: Option<f64>,
    at_least_bps: Option<f64>,
    ns_per_byte: f64,
    ns_per_byte_se: f64,
    slope_ns_per_byte: f64,
    head_slope_ns_per_byte: Option<f64>,
    queued_behind_head: Option<bool>,
    cells: usize,
    samples: usize,
    residual_ns: f64,
    truth_bps: Option<f64>,
}

#[derive(Serialize)]
struct JsonHop {
    ttl: u8,
    responder: Option<String>,
    destination: bool,
    probes: usize,
    replies: usize,
}

#[derive(Serialize)]
struct Json<'a> {
    target: &'a str,
    method: &'static str,
    mode: &'static str,
    channel: &'a str,
    sizes: &'a [u32],
    head_packets: &'a [u32],
    links: Vec<JsonLink>,
    hops: Vec<JsonHop>,
    reached_destination: bool,
    probes: usize,
    probe_bytes: u64,
    duration_s: f64,
    warnings: Vec<String>,
    warning_codes: Vec<&'static str>,
}

impl Serialize for HopsResult {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let r = &self.report;
        let links = r
            .links
            .iter()
            .map(|l| {
                let (status, cap, low, high, at_least) = match l.capacity {
                    LinkCapacity::Measured {
                        capacity_bps,
                        low_bps,
                        high_bps,
                    } => (
                        "measured",
                        Some(capacity_bps),
                        Some(low_bps),
                        high_bps.is_finite().then_some(high_bps),
                        None,
                    ),
                    LinkCapacity::AtLeast { bps } => ("at_least", None, None, None, Some(bps)),
                    LinkCapacity::Inconsistent { .. } => ("inconsistent", None, None, None, None),
                };
                JsonLink {
                    from_ttl: l.from_ttl,
                    ttl: l.ttl,
                    responder: self.responder(l.ttl),
                    status,
                    capacity_bps: cap,
                    low_bps: low,
                    high_bps: high,
                    at_least_bps: at_least,
                    ns_per_byte: l.ns_per_byte,
                    ns_per_byte_se: l.se,
                    slope_ns_per_byte: l.fit.slope_ns_per_byte,
                    head_slope_ns_per_byte: l.fit.head_slope_ns_per_byte,
                    queued_behind_head: l.queued_behind_head,
                    cells: l.fit.cells,
                    samples: l.fit.samples,
                    residual_ns: l.fit.residual_ns,
                    truth_bps: self.truth_bps(l),
                }
            })
            .collect();
        Json {
            target: &self.target,
            method: "vps",
            mode: self.mode(),
            channel: &self.channel,
            sizes: &self.params.sizes,
            head_packets: &self.params.head_packets,
            links,
            hops: r
                .hops
                .iter()
                .map(|h| JsonHop {
                    ttl: h.ttl,
                    responder: h.responder.clone(),
                    destination: h.destination,
                    probes: h.probes,
                    replies: h.replies,
                })
                .collect(),
            reached_destination: r.reached_destination,
            probes: r.probes,
            probe_bytes: r.cost.probe_bytes,
            duration_s: r.cost.duration_s,
            warnings: self.warnings().into_iter().map(|w| w.text).collect(),
            warning_codes: self.warnings().iter().map(|w| w.code.name()).collect(),
        }
        .serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::passed_before_a_queue;

    /// The 504 Mbit/s sender on chain3 with heads of 16 and 24: link 1
    /// (the host's own) queued, links 2 and 3 (600 and 400) passed, link
    /// 4 (200) queued, link 5 (the far veth) passed: 2 and 3 may hide a
    /// bucket, 5 is only faster than the head. Nothing queued after a
    /// pass, lone probes (no head) or a link spanning a silent hop from
    /// the host (from 0): none.
    #[test]
    fn links_passed_before_a_later_queue_by_hand() {
        let chain = [
            (0, 1, Some(true)),
            (1, 2, Some(false)),
            (2, 3, Some(false)),
            (3, 4, Some(true)),
            (4, 5, Some(false)),
        ];
        assert_eq!(passed_before_a_queue(&chain), vec![2, 3]);
        assert!(passed_before_a_queue(&[(0, 1, Some(true)), (1, 2, Some(false))]).is_empty());
        assert!(passed_before_a_queue(&[(1, 2, None), (2, 3, None)]).is_empty());
        assert!(passed_before_a_queue(&[(0, 2, Some(false)), (2, 3, Some(true))]).is_empty());
    }
}
