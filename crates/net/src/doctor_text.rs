//! The doctor's findings as text: the lines and the cloud paper's tables
//! 1 and 2 that `tightlink doctor` prints, then the verdict.

use std::fmt::{self, Display, Formatter};

use crate::backend::Backend;
use crate::doctor::{Doctor, TABLE_FRAME_BYTES};
use crate::ledger::STOLEN_SHARE_WARNING;

fn gbit(v: f64) -> f64 {
    v / 1e9
}

impl Display for Doctor {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let d = self;
        writeln!(
            f,
            "clock       CLOCK_MONOTONIC read {:.1} ns, resolution {} ns",
            d.clock_read_ns, d.clock_resolution_ns
        )?;
        for b in Backend::ALL {
            let costs: Vec<String> = d
                .send_cost_ns
                .iter()
                .filter(|(x, _, _)| *x == b)
                .map(|(_, size, c)| format!("{size} B {:.2} us", c / 1e3))
                .collect();
            if !costs.is_empty() {
                writeln!(
                    f,
                    "send        {b:<6} median cost per frame (back to back, loopback): {}",
                    costs.join(", ")
                )?;
            }
        }
        writeln!(
            f,
            "cpu         frequency scaling: {}",
            d.cpu_governor
                .as_deref()
                .unwrap_or("not exposed (no cpufreq: the hypervisor decides)")
        )?;
        if let Some(s) = d.stolen_share {
            writeln!(
                f,
                "cpu         the hypervisor took {:.1} % of this host's CPU time while the doctor ran (steal){}",
                s * 100.0,
                if s >= STOLEN_SHARE_WARNING {
                    ": pacing stalls with it, and estimates taken now may read low"
                } else {
                    ""
                }
            )?;
        }
        for (dev, gro, lro) in &d.offloads {
            let s = |v: &Option<bool>| match v {
                Some(true) => "on",
                Some(false) => "off",
                None => "unknown",
            };
            writeln!(f, "offloads    {dev}: GRO {}, LRO {}", s(gro), s(lro))?;
        }
        writeln!(f)?;
        write_tables(f, d)?;
        for (b, why) in &d.unavailable {
            writeln!(f, "unavailable {b}: {why}")?;
        }
        writeln!(f)?;
        writeln!(f, "verdict     {}", d.verdict())
    }
}

/// The pacing table and the cloud paper's tables 1 (sending) and 2
/// (receiving).
fn write_tables(f: &mut Formatter<'_>, d: &Doctor) -> fmt::Result {
    writeln!(f, "Pacing (busy-wait, to a sink on loopback): share of sends within 1 us of schedule, rate sent")?;
    writeln!(
        f,
        "| backend | frame | rate asked | within 1 us | rate sent |"
    )?;
    writeln!(f, "|---|---:|---:|---:|---:|")?;
    for r in &d.pacing {
        writeln!(
            f,
            "| {} | {} B | {:.1} Gbit/s | {:.1} % | {:.2} Gbit/s |",
            r.backend,
            r.frame_bytes,
            gbit(r.rate_bps),
            r.within_1us * 100.0,
            gbit(r.sent_rate_bps)
        )?;
    }
    writeln!(f)?;
    writeln!(
            f,
            "Sending backends against {} (cloud paper Table 1): {}-frame trains, median of repeats; actual = the receiver's kernel stamps",
            d.target, TABLE_FRAME_BYTES
        )?;
    writeln!(f, "| backend | rate asked | estimated send rate | actual rate | actual RSD | sends within 1 us | lost |")?;
    writeln!(f, "|---|---:|---:|---:|---:|---:|---:|")?;
    for r in &d.sends {
        writeln!(
            f,
            "| {} | {:.1} Gbit/s | {:.2} Gbit/s | {:.2} Gbit/s | {:.1} % | {:.1} % | {} |",
            r.backend,
            gbit(r.rate_bps),
            gbit(r.est_send_bps),
            gbit(r.act_bps),
            r.act_rsd * 100.0,
            r.within_1us * 100.0,
            r.lost
        )?;
    }
    writeln!(f)?;
    writeln!(
            f,
            "Receiving backends against {} (cloud paper Table 2): the server paces with UDP; its kernel transmit stamps against this host's receive stamps",
            d.target
        )?;
    writeln!(f, "| backend | rate asked | send rate (sender's stamps) | receive rate | receive error | receive RSD | back-to-back gaps | mean batch | lost |")?;
    writeln!(f, "|---|---:|---:|---:|---:|---:|---:|---:|---:|")?;
    for r in &d.receive {
        writeln!(
                f,
                "| {} | {:.1} Gbit/s | {:.2} Gbit/s | {:.2} Gbit/s | {:+.1} % | {:.1} % | {:.1} % | {:.2} | {} |",
                r.backend,
                gbit(r.rate_bps),
                gbit(r.send_rate_bps),
                gbit(r.recv_rate_bps),
                (r.recv_rate_bps / r.send_rate_bps - 1.0) * 100.0,
                r.recv_rsd * 100.0,
                r.back_to_back * 100.0,
                r.mean_batch,
                r.lost
            )?;
    }
    Ok(())
}
