//! `tightlink doctor [--peer HOST]`: is this host the bottleneck? Prints
//! the measurements of [`tightlink_net::doctor`] and the verdict.

use anyhow::{anyhow, Result};
use clap::Args;
use tightlink_net::backend::Backend;

#[derive(Args)]
pub struct DoctorArgs {
    /// A `tightlink server` to measure the receiving side against
    /// (default: one started on loopback).
    #[arg(long)]
    pub peer: Option<String>,
    /// 200-packet trains instead of 1000.
    #[arg(long)]
    pub quick: bool,
    /// Pre-shared key of the --peer server (its keyed limits let the
    /// tables reach 10 Gbit/s; without a key a server allows 1 Gbit/s).
    #[arg(long, requires = "peer", env = "TIGHTLINK_KEY_FILE")]
    pub key_file: Option<std::path::PathBuf>,
}

pub fn run(args: DoctorArgs) -> Result<()> {
    let key = match &args.key_file {
        Some(f) => Some(
            tightlink_net::auth::read_key_file(f)
                .map_err(|e| anyhow!("--key-file {}: {e}", f.display()))?,
        ),
        None => None,
    };
    let d = tightlink_net::doctor::run(args.peer.as_deref(), key, args.quick)
        .map_err(|e| anyhow!(e))?;
    let g = |v: f64| v / 1e9;
    println!(
        "clock       CLOCK_MONOTONIC read {:.1} ns, resolution {} ns",
        d.clock_read_ns, d.clock_resolution_ns
    );
    for b in Backend::ALL {
        let costs: Vec<String> = d
            .send_cost_ns
            .iter()
            .filter(|(x, _, _)| *x == b)
            .map(|(_, f, c)| format!("{f} B {:.2} us", c / 1e3))
            .collect();
        if !costs.is_empty() {
            println!(
                "send        {b:<6} median cost per frame (back to back, loopback): {}",
                costs.join(", ")
            );
        }
    }
    println!(
        "cpu         frequency scaling: {}",
        d.cpu_governor
            .as_deref()
            .unwrap_or("not exposed (no cpufreq: the hypervisor decides)")
    );
    if let Some(s) = d.stolen_share {
        println!(
            "cpu         the hypervisor took {:.1} % of this host's CPU time while the doctor ran (steal){}",
            s * 100.0,
            if s >= tightlink_net::ledger::STOLEN_SHARE_WARNING {
                ": pacing stalls with it, and estimates taken now may read low"
            } else {
                ""
            }
        );
    }
    for (dev, gro, lro) in &d.offloads {
        let s = |v: &Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        };
        println!("offloads    {dev}: GRO {}, LRO {}", s(gro), s(lro));
    }
    println!();
    println!("Pacing (busy-wait, to a sink on loopback): share of sends within 1 us of schedule, rate sent");
    println!("| backend | frame | rate asked | within 1 us | rate sent |");
    println!("|---|---:|---:|---:|---:|");
    for r in &d.pacing {
        println!(
            "| {} | {} B | {:.1} Gbit/s | {:.1} % | {:.2} Gbit/s |",
            r.backend,
            r.frame_bytes,
            g(r.rate_bps),
            r.within_1us * 100.0,
            g(r.sent_rate_bps)
        );
    }
    println!();
    println!(
        "Sending backends against {} (cloud paper Table 1): {}-frame trains, median of repeats; actual = the receiver's kernel stamps",
        d.target,
        tightlink_net::doctor::TABLE_FRAME_BYTES
    );
    println!("| backend | rate asked | estimated send rate | actual rate | actual RSD | sends within 1 us | lost |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for r in &d.sends {
        println!(
            "| {} | {:.1} Gbit/s | {:.2} Gbit/s | {:.2} Gbit/s | {:.1} % | {:.1} % | {} |",
            r.backend,
            g(r.rate_bps),
            g(r.est_send_bps),
            g(r.act_bps),
            r.act_rsd * 100.0,
            r.within_1us * 100.0,
            r.lost
        );
    }
    println!();
    println!(
        "Receiving backends against {} (cloud paper Table 2): the server paces with UDP; its kernel transmit stamps against this host's receive stamps",
        d.target
    );
    println!("| backend | rate asked | send rate (sender's stamps) | receive rate | receive error | receive RSD | back-to-back gaps | mean batch | lost |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &d.receive {
        println!(
            "| {} | {:.1} Gbit/s | {:.2} Gbit/s | {:.2} Gbit/s | {:+.1} % | {:.1} % | {:.1} % | {:.2} | {} |",
            r.backend,
            g(r.rate_bps),
            g(r.send_rate_bps),
            g(r.recv_rate_bps),
            (r.recv_rate_bps / r.send_rate_bps - 1.0) * 100.0,
            r.recv_rsd * 100.0,
            r.back_to_back * 100.0,
            r.mean_batch,
            r.lost
        );
    }
    for (b, why) in &d.unavailable {
        println!("unavailable {b}: {why}");
    }
    println!();
    println!("verdict     {}", d.verdict());
    Ok(())
}
