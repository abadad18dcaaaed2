//! `tightlink hops [TARGET]`: each link's capacity by variable packet size
//! (pathchar; \[HOST\] section 4.1), on the simulator (next to each
//! link's truth) or on a real path with TTL-limited UDP probes.

use anyhow::{anyhow, Result};
use clap::Args;
use tightlink_core::capacity::{LinkCapacity, LinkEstimate};
use tightlink_core::units::{parse_bytes, parse_time_ns};
use tightlink_measure::hops::{hops, HopsOptions, HopsResult, DEFAULT_TARGET};
use tightlink_measure::Target;

#[derive(Args)]
pub struct HopsArgs {
    /// `HOST[:PORT]` (UDP, default port 33434; any router on the way and
    /// the host's closed port answer), or `sim:` with a path description.
    #[arg(default_value = DEFAULT_TARGET)]
    pub target: String,
    /// Send each probe behind a head of N full-size packets (and of 1.5 N:
    /// two lengths tell where the head queued): makes token-bucket shapers
    /// visible, which lone probes pass on a full bucket. Loads the path.
    /// Heads whose probes a queue on the path drops are shrunk by a third
    /// until they fit (said in a warning).
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
    /// Run on this CPU only: the head must leave faster than the first
    /// shaped hop, so keep the sender off a CPU other work keeps busy
    /// (a namespace lab's routers, say).
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

fn rate(v: f64) -> String {
    if !v.is_finite() {
        "inf".into()
    } else if v >= 1e9 {
        format!("{:.2} Gbit/s", v / 1e9)
    } else {
        format!("{:.1} Mbit/s", v / 1e6)
    }
}

/// `LOW:HIGH:COUNT`, sizes with units.
fn parse_sizes(s: &str) -> Result<(u32, u32, usize)> {
    let parts: Vec<&str> = s.split(':').collect();
    let bad = || anyhow!("--sizes {s}: expected LOW:HIGH:COUNT, like 600:1500:8");
    if parts.len() != 3 {
        return Err(bad());
    }
    let low = parse_bytes(parts[0]).map_err(|_| bad())? as u32;
    let high = parse_bytes(parts[1]).map_err(|_| bad())? as u32;
    let count: usize = parts[2].parse().map_err(|_| bad())?;
    Ok((low, high, count))
}

/// Runs this process on `cpu` only (`--cpu`).
pub(crate) fn pin_to_cpu(cpu: usize) -> Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        tightlink_measure::bad_input!("--cpu {cpu}: no such CPU");
    }
    // SAFETY: a zeroed cpu_set_t is empty; CPU_SET writes inside it.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        // EINVAL: no CPU of the set is online (or allowed here).
        let have = std::thread::available_parallelism().map_or(0, |n| n.get());
        tightlink_measure::bad_input!(
            "--cpu {cpu}: {e} (this process may run on {have} CPUs here)"
        );
    }
    Ok(())
}

pub fn run(a: HopsArgs) -> Result<()> {
    let options = HopsOptions {
        sizes: a.sizes.as_deref().map(parse_sizes).transpose()?,
        repeats: a.repeats,
        first_ttl: a.first_ttl,
        max_ttl: a.max_ttl,
        timeout_ns: parse_time_ns(&a.timeout).map_err(|e| anyhow!("--timeout: {e}"))?,
        gap_ns: parse_time_ns(&a.gap).map_err(|e| anyhow!("--gap: {e}"))?,
        seed: a.seed,
        behind: a.behind,
        save_samples: a.save_samples.clone(),
    };
    let target = Target::parse(&a.target)?;
    if let Some(cpu) = a.cpu {
        pin_to_cpu(cpu)?;
    }
    let result = hops(&target, &options, &mut |ttl, done, total| {
        if !a.json && done == total {
            eprintln!("ttl {ttl}: {total} probes sent");
        }
    })?;
    if a.json {
        println!("{}", serde_json::to_string(&result)?);
        return Ok(());
    }
    render(&result)
}

/// A hop's ns/B, its standard error, how it met the head and its link's
/// capacity, as the table shows them (`-` and why where no link was read).
fn link_columns(
    replies: usize,
    link: Option<&LinkEstimate>,
) -> (String, String, &'static str, String) {
    match link {
        None => (
            "-".into(),
            "-".into(),
            "-",
            if replies == 0 {
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
    }
}

/// The human table.
fn render(res: &HopsResult) -> Result<()> {
    let (r, params) = (&res.report, &res.params);
    println!("target   {}", res.target);
    println!("channel  {}", res.channel);
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
                params.head_packets, res.mtu_bytes
            )
        }
    );
    println!(
        "{:>4} {:<16} {:>9}  {:>9} {:>7}  {:<5}  {:<44} {:>14}",
        "ttl", "responder", "replies", "ns/B", "+-", "head", "link capacity", "truth"
    );
    for h in &r.hops {
        let link = r.links.iter().find(|l| l.ttl == h.ttl);
        let (nsb, se, head, cap) = link_columns(h.replies, link);
        let truth = link
            .and_then(|l| res.truth_bps(l))
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
    for w in res.warnings() {
        println!("{w}");
    }
    println!(
        "{} probes, {:.2} MB, {:.2} s{}",
        r.probes,
        r.cost.probe_bytes as f64 / 1e6,
        r.cost.duration_s,
        if r.reached_destination {
            ""
        } else {
            " (destination not reached)"
        }
    );
    Ok(())
}
