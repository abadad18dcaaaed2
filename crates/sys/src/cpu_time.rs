//! CPU time the hypervisor took from this (virtual) host: the `steal`
//! column of `/proc/stat`. A guest's vCPU that the hypervisor deschedules
//! for milliseconds stalls everything on it at once: the sender's pacing,
//! the receiver's stamps and any qdisc timer on this host (a tbf whose
//! watchdog fires late loses the tokens its small bucket cannot hold).
//! So a measurement taken while time was stolen may read low, and the
//! tool must say so (\[HOST\] section 3: say when the host, not the path,
//! is the bottleneck). The kernel counts in USER_HZ ticks (10 ms), so a
//! share is only as fine as the window is long.

use std::io;

/// From this share of CPU time stolen by the hypervisor on, a measurement
/// says it may read low: from about this share on, a tbf on the same
/// host flooded by `tightlink lab check quiet` delivers measurably under
/// its rate (docs/evaluation.md, "The measuring host").
pub const STOLEN_SHARE_WARNING: f64 = 0.05;

/// The all-CPU line of `/proc/stat`, in ticks summed over CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CpuTimes {
    /// user + nice + system + idle + iowait + irq + softirq + steal
    /// (guest time is already inside user and nice).
    pub total_ticks: u64,
    pub steal_ticks: u64,
}

/// Reads the all-CPU line of `/proc/stat`.
pub fn read() -> io::Result<CpuTimes> {
    let text = std::fs::read_to_string("/proc/stat")?;
    parse_proc_stat(&text)
}

/// The all-CPU line (`cpu  user nice system idle iowait irq softirq
/// steal ...`) of a `/proc/stat` text. Kernels before 2.6.11 had no steal
/// column: it reads as 0 there.
pub fn parse_proc_stat(text: &str) -> io::Result<CpuTimes> {
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let (n, line) = text
        .lines()
        .enumerate()
        .find(|(_, l)| l.split_whitespace().next() == Some("cpu"))
        .ok_or_else(|| bad("/proc/stat: no all-CPU (\"cpu \") line".into()))?;
    let mut fields = Vec::with_capacity(8);
    for (i, f) in line.split_whitespace().skip(1).take(8).enumerate() {
        fields.push(f.parse::<u64>().map_err(|e| {
            bad(format!(
                "/proc/stat:{}: column {} ({f:?}) is not a tick count: {e}",
                n + 1,
                i + 2
            ))
        })?);
    }
    if fields.len() < 4 {
        return Err(bad(format!(
            "/proc/stat:{}: the cpu line has {} counters, at least 4 expected",
            n + 1,
            fields.len()
        )));
    }
    Ok(CpuTimes {
        total_ticks: fields.iter().sum(),
        steal_ticks: fields.get(7).copied().unwrap_or(0),
    })
}

/// The share of CPU time stolen between two readings (0..=1); `None`
/// when no tick passed between them (or the counters went backwards).
pub fn stolen_share(before: CpuTimes, after: CpuTimes) -> Option<f64> {
    let total = after.total_ticks.checked_sub(before.total_ticks)?;
    let steal = after.steal_ticks.checked_sub(before.steal_ticks)?;
    (total > 0).then(|| (steal as f64 / total as f64).min(1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2-CPU guest's file, cut to what matters: the all-CPU line sums
    /// 100 + 0 + 20 + 800 + 5 + 0 + 15 + 60 = 1000 ticks, 60 stolen.
    const TWO_CPUS: &str = "cpu  100 0 20 800 5 0 15 60 0 0\n\
        cpu0 50 0 10 400 3 0 8 30 0 0\n\
        cpu1 50 0 10 400 2 0 7 30 0 0\n\
        intr 12345 0 0\n\
        ctxt 999\n";

    #[test]
    fn the_all_cpu_line_by_hand() {
        let t = parse_proc_stat(TWO_CPUS).unwrap();
        assert_eq!(
            t,
            CpuTimes {
                total_ticks: 1000,
                steal_ticks: 60
            }
        );
    }

    /// 200 ticks later, 30 of them stolen: 15 %.
    #[test]
    fn share_between_two_readings_by_hand() {
        let a = parse_proc_stat(TWO_CPUS).unwrap();
        let b = parse_proc_stat("cpu  150 0 30 900 5 0 25 90 0 0\n").unwrap();
        assert_eq!(b.total_ticks - a.total_ticks, 200);
        assert_eq!(stolen_share(a, b), Some(0.15));
        assert_eq!(stolen_share(a, a), None, "no tick passed");
        assert_eq!(stolen_share(b, a), None, "counters went backwards");
    }

    #[test]
    fn old_kernels_without_steal_read_zero() {
        let t = parse_proc_stat("cpu 10 0 5 85\n").unwrap();
        assert_eq!((t.total_ticks, t.steal_ticks), (100, 0));
    }

    #[test]
    fn bad_files_say_what_and_where() {
        let e = parse_proc_stat("intr 1\nctxt 2\n").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
        assert!(e.to_string().contains("no all-CPU"), "{e}");
        let e = parse_proc_stat("ctxt 2\ncpu 1 2 x 4\n").unwrap_err();
        assert!(e.to_string().contains("/proc/stat:2: column 4"), "{e}");
        let e = parse_proc_stat("cpu 1 2\n").unwrap_err();
        assert!(e.to_string().contains("2 counters"), "{e}");
    }

    /// The host's own file parses, and time passes in it.
    #[test]
    fn this_hosts_file_reads() {
        let a = read().unwrap();
        assert!(a.total_ticks > 0 && a.steal_ticks <= a.total_ticks);
    }
}
