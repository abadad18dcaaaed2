//! `tightlink hops [TARGET]`: each link's capacity by variable packet size
//! (pathchar; \[HOST\] section 4.1), on the simulator (next to each
//! link's truth) or on a real path with TTL-limited UDP probes.

use anyhow::{anyhow, Result};
use clap::Args;
use tightlink_core::units::{parse_bytes, Time};
use tightlink_measure::hops::{hops, HopsOptions, DEFAULT_TARGET};
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
    pub timeout: Time,
    /// Idle time after each probe's reply (routers rate-limit ICMP).
    #[arg(long, default_value = "1ms")]
    pub gap: Time,
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
        timeout_ns: a.timeout.ns,
        gap_ns: a.gap.ns,
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
    crate::out::report(a.json, &result)
}
