//! `tightlink doctor [--peer HOST]`: is this host the bottleneck? Prints
//! the measurements of [`tightlink_net::doctor`] and the verdict.

use anyhow::{anyhow, Result};
use clap::Args;

#[derive(Args)]
pub struct DoctorArgs {
    /// A `tightlink server` to measure the receiving side against
    /// (default: one started on loopback).
    #[arg(long)]
    pub peer: Option<String>,
    /// 200-packet trains instead of 1000.
    #[arg(long)]
    pub quick: bool,
}

pub fn run(args: DoctorArgs) -> Result<()> {
    let d = tightlink_net::doctor::run(args.peer.as_deref(), args.quick).map_err(|e| anyhow!(e))?;
    let g = |v: f64| v / 1e9;
    println!(
        "clock       CLOCK_MONOTONIC read {:.1} ns, resolution {} ns",
        d.clock_read_ns, d.clock_resolution_ns
    );
    let costs: Vec<String> = d
        .send_cost_ns
        .iter()
        .map(|(f, c)| format!("{f} B {:.2} us", c / 1e3))
        .collect();
    println!(
        "send()      median cost per frame (UDP, back to back): {}",
        costs.join(", ")
    );
    println!(
        "cpu         frequency scaling: {}",
        d.cpu_governor
            .as_deref()
            .unwrap_or("not exposed (no cpufreq: the hypervisor decides)")
    );
    for (dev, gro, lro) in &d.offloads {
        let s = |v: &Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        };
        println!("offloads    {dev}: GRO {}, LRO {}", s(gro), s(lro));
    }
    println!();
    println!("Pacing (UDP backend, busy-wait): share of sends within 1 us of schedule, rate sent");
    println!("| frame | rate asked | within 1 us | rate sent |");
    println!("|---:|---:|---:|---:|");
    for r in &d.pacing {
        println!(
            "| {} B | {:.1} Gbit/s | {:.1} % | {:.2} Gbit/s |",
            r.frame_bytes,
            g(r.rate_bps),
            r.within_1us * 100.0,
            g(r.sent_rate_bps)
        );
    }
    println!();
    println!("Receiver ({}): paced train, kernel stamps at both ends (like the cloud paper's Tables 1-2)", d.target);
    println!("| backend | rate asked | send rate (schedule) | receive rate | receive error | back-to-back gaps | mean batch | lost |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for r in &d.receive {
        println!(
            "| {} | {:.1} Gbit/s | {:.2} Gbit/s | {:.2} Gbit/s | {:+.1} % | {:.1} % | {:.2} | {} |",
            r.backend,
            g(r.rate_bps),
            g(r.send_rate_bps),
            g(r.recv_rate_bps),
            (r.recv_rate_bps / r.send_rate_bps - 1.0) * 100.0,
            r.back_to_back * 100.0,
            r.mean_batch,
            r.lost
        );
    }
    println!("| packet socket (AF_PACKET) | not built yet | | | | | | |");
    println!("| AF_XDP | not built yet | | | | | | |");
    println!();
    println!("verdict     {}", d.verdict());
    Ok(())
}
