//! `tightlink hops [TARGET]`: each link's capacity by variable packet size
//! (pathchar; host paper section 4.1), on the simulator (next to each
//! link's truth) or on a real path with TTL-limited UDP probes.

use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use serde::Serialize;
use tightlink_core::capacity::LinkCapacity;
use tightlink_core::channel::HopChannel;
use tightlink_core::units::{parse_bytes, parse_time_ns};
use tightlink_net::ttl::UdpTtlChannel;
use tightlink_probe::hops::{run_hops, HopsParams, HopsReport};
use tightlink_sim::parse_sim_target;
use tightlink_sim::SimHopChannel;

/// The default target: a pathchar-era path where VPS resolves every link
/// (the host paper: up to about OC-3 with 1500 B packets): 1 Gbit/s, an
/// OC-3 with 20 % Poisson cross traffic, a T3 with 10 %, and a 100 Mbit/s
/// last link.
pub const DEFAULT_TARGET: &str =
    "sim:hops=1G+155M+45M+100M,cross=none+poisson:31M+poisson:4.5M+none";

#[derive(Args)]
pub struct HopsArgs {
    /// `HOST[:PORT]` (UDP, default port 33434; any router on the way and
    /// the host's closed port answer), or `sim:` with a path description.
    #[arg(default_value = DEFAULT_TARGET)]
    pub target: String,
    /// Send each probe behind a head of N full-size packets (and of 1.5 N:
    /// two lengths tell where the head queued): makes token-bucket shapers
    /// visible, which lone probes pass on a full bucket. Loads the path.
    #[arg(long, value_name = "N")]
    pub behind: Option<u32>,
    /// Probe sizes at the IP layer, `LOW:HIGH:COUNT` (default 600 B to the
    /// MTU, 8 sizes).
    #[arg(long)]
    pub sizes: Option<String>,
    /// Probes per size (and head length).
    #[arg(long, default_value_t = 10)]
    pub repeats: usize,
    #[arg(long, default_value_t = 1)]
    pub first_ttl: u8,
    #[arg(long, default_value_t = 30)]
    pub max_ttl: u8,
    /// A probe without a reply by then counts as lost.
    #[arg(long, default_value = "1s")]
    pub timeout: String,
    /// Idle time after each probe's reply (routers rate-limit ICMP).
    #[arg(long, default_value = "1ms")]
    pub gap: String,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Run on this CPU only (the head must leave faster than the first
    /// shaped hop; on a 2-CPU lab whose routers use CPU 1, use 0).
    #[arg(long)]
    pub cpu: Option<usize>,
    /// One JSON object.
    #[arg(long)]
    pub json: bool,
    /// Write every answered probe as CSV (ttl, size_bytes, head_bytes,
    /// rtt_ns) for offline analysis.
    #[arg(long, value_name = "FILE")]
    pub save_samples: Option<std::path::PathBuf>,
}

#[derive(Serialize)]
struct JsonLink {
    /// Router the link starts at (0: this host) and ends at (the TTL).
    from_ttl: u8,
    ttl: u8,
    responder: Option<String>,
    /// `measured`, `at_least` or `inconsistent`.
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
    /// The simulator's link (its sustained rate: a shaper's when slower).
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
struct JsonHops<'a> {
    target: &'a str,
    method: &'static str,
    /// `lone` or `behind-head`.
    mode: &'static str,
    channel: String,
    sizes: &'a [u32],
    head_packets: &'a [u32],
    links: Vec<JsonLink>,
    hops: Vec<JsonHop>,
    reached_destination: bool,
    probes: usize,
    probe_bytes: u64,
    duration_s: f64,
}

fn rate(v: f64) -> String {
    if !v.is_finite() {
        "inf".into()
    } else if v >= 1e9 {
        format!("{:.2} Gbit/s", v / 1e9)
    } else {
        format!("{:.1} Mbit/s", v / 1e6)
    }
}

fn parse_sizes(s: &str, mtu: u32) -> Result<Vec<u32>> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || anyhow!("--sizes {s}: expected LOW:HIGH:COUNT, like 600:1500:8");
    if parts.len() != 3 {
        return Err(bad());
    }
    let low = parse_bytes(parts[0]).map_err(|_| bad())? as u32;
    let high = parse_bytes(parts[1]).map_err(|_| bad())? as u32;
    let count: usize = parts[2].parse().map_err(|_| bad())?;
    if low >= high || count < 2 {
        bail!("--sizes {s}: LOW must be below HIGH and COUNT at least 2");
    }
    if high > mtu {
        bail!("--sizes {s}: {high} B exceeds the first link's MTU ({mtu} B)");
    }
    Ok(HopsParams::even_sizes(low, high, count))
}

fn open(a: &HopsArgs, timeout_ns: i64, gap_ns: i64) -> Result<Box<dyn HopChannel>> {
    if a.target.starts_with("sim") {
        let spec = parse_sim_target(&a.target)?;
        return Ok(Box::new(SimHopChannel::new(spec, gap_ns, timeout_ns)));
    }
    let with_port = if a.target.contains(':') {
        a.target.clone()
    } else {
        format!("{}:33434", a.target)
    };
    let addr = with_port
        .to_socket_addrs()
        .with_context(|| format!("target {}: cannot resolve", a.target))?
        .find_map(|s| match s {
            SocketAddr::V4(v4) => Some(v4),
            SocketAddr::V6(_) => None,
        })
        .ok_or_else(|| {
            anyhow!(
                "target {}: no IPv4 address (IPv6 is not done yet)",
                a.target
            )
        })?;
    let ch = UdpTtlChannel::open(
        SocketAddrV4::new(*addr.ip(), addr.port()),
        Duration::from_nanos(timeout_ns as u64),
        Duration::from_nanos(gap_ns as u64),
    )?;
    Ok(Box::new(ch))
}

fn pin_to_cpu(cpu: usize) -> Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        bail!("--cpu {cpu}: no such CPU");
    }
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes inside it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        bail!("--cpu {cpu}: {}", std::io::Error::last_os_error());
    }
    Ok(())
}

pub fn run(a: HopsArgs) -> Result<()> {
    let timeout_ns = parse_time_ns(&a.timeout).map_err(|e| anyhow!("--timeout: {e}"))?;
    let gap_ns = parse_time_ns(&a.gap).map_err(|e| anyhow!("--gap: {e}"))?;
    if timeout_ns <= 0 {
        bail!("--timeout must be positive");
    }
    if a.first_ttl == 0 || a.first_ttl > a.max_ttl {
        bail!("--first-ttl must be between 1 and --max-ttl");
    }
    if a.repeats == 0 {
        bail!("--repeats must be at least 1");
    }
    if let Some(cpu) = a.cpu {
        pin_to_cpu(cpu)?;
    }
    let mut ch = open(&a, timeout_ns, gap_ns)?;
    let mtu = ch.mtu_bytes();
    let mut params = HopsParams::for_mtu(mtu);
    if let Some(s) = &a.sizes {
        params.sizes = parse_sizes(s, mtu)?;
    }
    params.repeats = a.repeats;
    params.first_ttl = a.first_ttl;
    params.max_ttl = a.max_ttl;
    params.seed = a.seed;
    if let Some(n) = a.behind {
        if n == 0 {
            bail!("--behind must be at least 1 packet");
        }
        params.head_packets = vec![n, n + n.div_ceil(2)];
    }
    let report = run_hops(&mut *ch, &params, |ttl, done, total| {
        if !a.json && done == total {
            eprintln!("ttl {ttl}: {total} probes sent");
        }
    })?;
    if let Some(path) = &a.save_samples {
        let mut out = String::from("ttl,size_bytes,head_bytes,rtt_ns\n");
        for s in &report.samples {
            out.push_str(&format!(
                "{},{},{},{:.0}\n",
                s.ttl, s.size_bytes, s.head_bytes, s.rtt_ns
            ));
        }
        std::fs::write(path, out).with_context(|| format!("--save-samples {}", path.display()))?;
    }
    print(&a, &*ch, &params, &report)
}

fn print(a: &HopsArgs, ch: &dyn HopChannel, params: &HopsParams, r: &HopsReport) -> Result<()> {
    let truth_of = |ttl: u8, from: u8| -> Option<f64> {
        let t = r.truth_bps.as_ref()?;
        // A link spanning silent hops is their series.
        let span = t.get(from as usize..(ttl as usize).min(t.len()))?;
        (!span.is_empty()).then(|| 1.0 / span.iter().map(|c| 1.0 / c).sum::<f64>())
    };
    let responder = |ttl: u8| {
        r.hops
            .iter()
            .find(|h| h.ttl == ttl)
            .and_then(|h| h.responder.clone())
    };
    if a.json {
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
                    responder: responder(l.ttl),
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
                    truth_bps: truth_of(l.ttl, l.from_ttl),
                }
            })
            .collect();
        let j = JsonHops {
            target: &a.target,
            method: "vps",
            mode: if params.head_packets.is_empty() {
                "lone"
            } else {
                "behind-head"
            },
            channel: ch.describe(),
            sizes: &params.sizes,
            head_packets: &params.head_packets,
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
            probe_bytes: r.probe_bytes,
            duration_s: r.duration_s,
        };
        println!("{}", serde_json::to_string(&j)?);
        return Ok(());
    }
    println!("target   {}", a.target);
    println!("channel  {}", ch.describe());
    println!(
        "probes   {} sizes {}-{} B x {}{}",
        params.sizes.len(),
        params.sizes.first().unwrap_or(&0),
        params.sizes.last().unwrap_or(&0),
        params.repeats,
        if params.head_packets.is_empty() {
            ", lone (pathchar)".to_string()
        } else {
            format!(
                ", behind heads of {:?} x {} B",
                params.head_packets,
                ch.mtu_bytes()
            )
        }
    );
    println!(
        "{:>4} {:<16} {:>9}  {:>9} {:>7}  {:<5}  {:<44} {:>14}",
        "ttl", "responder", "replies", "ns/B", "+-", "head", "link capacity", "truth"
    );
    for h in &r.hops {
        let link = r.links.iter().find(|l| l.ttl == h.ttl);
        let (nsb, se, head, cap) = match link {
            None => (
                "-".into(),
                "-".into(),
                "-",
                if h.replies == 0 {
                    "no reply".to_string()
                } else {
                    "too few replies".to_string()
                },
            ),
            Some(l) => {
                let cap = match l.capacity {
                    LinkCapacity::Measured {
                        capacity_bps,
                        low_bps,
                        high_bps,
                    } => format!(
                        "{} [{}, {}]",
                        rate(capacity_bps),
                        rate(low_bps),
                        rate(high_bps)
                    ),
                    LinkCapacity::AtLeast { bps } => format!(">= {} (too fast to see)", rate(bps)),
                    LinkCapacity::Inconsistent { ns_per_byte } => {
                        format!("inconsistent ({ns_per_byte:.2} ns/B)")
                    }
                };
                let cap = if l.from_ttl + 1 < l.ttl {
                    format!("{cap} (links {}..{})", l.from_ttl + 1, l.ttl)
                } else {
                    cap
                };
                (
                    format!("{:.3}", l.ns_per_byte),
                    format!("{:.3}", l.se),
                    match l.queued_behind_head {
                        Some(true) => "queued",
                        Some(false) => "passed",
                        None => "-",
                    },
                    cap,
                )
            }
        };
        let truth = link
            .and_then(|l| truth_of(l.ttl, l.from_ttl))
            .map_or(String::new(), rate);
        println!(
            "{:>4} {:<16} {:>9}  {:>9} {:>7}  {:<5}  {:<44} {:>14}",
            h.ttl,
            h.responder.as_deref().unwrap_or("*"),
            format!("{}/{}", h.replies, h.probes),
            nsb,
            se,
            head,
            cap,
            truth
        );
    }
    if let Some(l) = r
        .links
        .iter()
        .find(|l| l.from_ttl == 0 && l.queued_behind_head == Some(true))
    {
        println!(
            "link 1 behind a head: the head left this host at {} (its own link, or its send path when slower); a shaped hop faster than that cannot queue it and reads '>=' or 'passed'",
            rate(8e9 / l.ns_per_byte)
        );
    }
    if params.head_packets.is_empty()
        && r.links
            .iter()
            .any(|l| matches!(l.capacity, LinkCapacity::AtLeast { .. }))
    {
        println!("'>=': the link adds less per-byte time than the RTT noise resolves (host paper 4.1: VPS reaches ~155 Mbit/s with 1500 B packets); token-bucket shapers look the same to lone probes: try --behind 16");
    }
    println!(
        "{} probes, {:.2} MB, {:.2} s{}",
        r.probes,
        r.probe_bytes as f64 / 1e6,
        r.duration_s,
        if r.reached_destination {
            ""
        } else {
            " (destination not reached)"
        }
    );
    Ok(())
}
