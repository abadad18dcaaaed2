//! Cross traffic on real sockets (`tightlink cross`): the simulator's
//! traffic models (`tightlink_sim::cross`: CBR, Poisson, bursty Pareto
//! ON/OFF, smoothed) generate the packet times and sizes, and a UDP socket
//! sends them at those times; optional TCP bulk flows run beside. Sizes
//! are Ethernet frames (IP + 14 B), the lab's rate layer: the UDP payload
//! is the size less 42 B of headers (62 B over IPv6).
//!
//! Timing: the sender sleeps to each packet's absolute time (timer slack
//! set to 1 ns) rather than spinning, so it leaves the CPU to the probe
//! sender; a packet whose time has passed is sent at once, so the mean
//! rate is exact whatever the wake-up jitter.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tightlink_sys::sockopt;

use tightlink_core::rng::Rng;
use tightlink_sim::cross::{CrossSpec, CrossTraffic};

use tightlink_sys::clock::monotonic_ns;

/// Whether traffic `spec` with `tcp_flows` bulk flows would send no
/// packet at all (`none` or a rate of 0 that never steps up, and no TCP):
/// a run that reports zeros as if it had worked.
pub fn sends_nothing(spec: Option<&CrossSpec>, tcp_flows: usize) -> bool {
    let udp = spec.is_some_and(|s| s.rate_bps > 0.0 || s.step.is_some_and(|st| st.rate_bps > 0.0));
    !udp && tcp_flows == 0
}

#[derive(Debug, Clone)]
pub struct CrossOptions {
    pub to: SocketAddr,
    /// `None`: no UDP traffic (TCP flows only).
    pub spec: Option<CrossSpec>,
    pub duration: Duration,
    pub seed: u64,
    /// TCP bulk flows to the sink's TCP port (the same port number).
    pub tcp_flows: usize,
    /// Their congestion control (TCP_CONGESTION, e.g. "cubic"); `None`:
    /// the namespace's default (bbr on these machines, not cubic).
    pub tcp_congestion: Option<String>,
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct CrossReport {
    pub packets: u64,
    /// Frame bytes (IP + 14 B) handed to the kernel.
    pub frame_bytes: u64,
    pub send_errors: u64,
    /// Mean frame rate over the run.
    pub rate_bps: f64,
    /// Median and 99th percentile of lateness behind schedule, us.
    pub late_median_us: f64,
    pub late_p99_us: f64,
    pub tcp_bytes: u64,
    /// What the kernel said of the TCP flows when they ended (TCP_INFO):
    /// segments sent, of them retransmitted, and the mean smoothed RTT.
    pub tcp_segments: u64,
    pub tcp_retransmitted: u64,
    pub tcp_rtt_ms: Option<f64>,
    pub duration_s: f64,
}

pub const MAX_DURATION: Duration = Duration::from_secs(3600);

fn sleep_until(deadline_ns: i64) {
    let ts = libc::timespec {
        tv_sec: deadline_ns / 1_000_000_000,
        tv_nsec: deadline_ns % 1_000_000_000,
    };
    // SAFETY: absolute sleep on a valid timespec; EINTR just wakes early.
    unsafe {
        libc::clock_nanosleep(
            libc::CLOCK_MONOTONIC,
            libc::TIMER_ABSTIME,
            &ts,
            std::ptr::null_mut(),
        )
    };
}

/// Sets a TCP socket's congestion control by name.
pub fn set_congestion(s: &TcpStream, name: &str) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: TCP_CONGESTION takes the name's bytes and their length.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr() as *const libc::c_void,
            name.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        let e = io::Error::last_os_error();
        let avail = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
            .unwrap_or_default();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "congestion control '{name}': {e} (available: {})",
                avail.trim()
            ),
        ));
    }
    Ok(())
}

/// The UDP traffic of `spec` on its schedule, each packet's lateness
/// behind it kept (a million at most).
fn send_udp(
    opts: &CrossOptions,
    spec: &CrossSpec,
    stop: &AtomicBool,
    report: &mut CrossReport,
    lateness: &mut Vec<i64>,
) -> io::Result<()> {
    let bind: SocketAddr = if opts.to.is_ipv4() {
        "0.0.0.0:0".parse().expect("address")
    } else {
        "[::]:0".parse().expect("address")
    };
    let sock = UdpSocket::bind(bind)?;
    sock.connect(opts.to)?;
    let headers: u32 = if opts.to.is_ipv4() { 42 } else { 62 };
    let buf = vec![0u8; 9000];
    let mut traffic = CrossTraffic::new(spec, Rng::new(opts.seed));
    let start = monotonic_ns();
    let end = opts.duration.as_nanos() as i64;
    while !stop.load(Ordering::Relaxed) {
        let Some((t, size)) = traffic.pop() else {
            break;
        };
        let t = t as i64;
        if t >= end {
            break;
        }
        let deadline = start + t;
        if deadline > monotonic_ns() {
            sleep_until(deadline);
        }
        let late = monotonic_ns() - deadline;
        if lateness.len() < 1_000_000 {
            lateness.push(late);
        }
        let payload = (size.max(headers + 1) - headers).min(buf.len() as u32) as usize;
        match sock.send(&buf[..payload]) {
            Ok(_) => {
                report.packets += 1;
                report.frame_bytes += (payload as u32 + headers) as u64;
            }
            // No sink yet (ICMP port unreachable) or a full queue: the
            // packet is counted as an error, the schedule goes on.
            Err(_) => report.send_errors += 1,
        }
    }
    Ok(())
}

/// Sends cross traffic until `duration` has passed or `stop` is set.
pub fn send(opts: &CrossOptions, stop: &AtomicBool) -> io::Result<CrossReport> {
    if opts.duration > MAX_DURATION {
        return Err(io::Error::other("cross traffic lasts at most an hour"));
    }
    // SAFETY: prctl with an integer argument; only this thread's slack.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let tcp_bytes = Arc::new(AtomicU64::new(0));
    let tcp_stop = Arc::new(AtomicBool::new(false));
    let mut flows = Vec::new();
    for _ in 0..opts.tcp_flows {
        // Connected and configured here, so a refused connection or an
        // unknown congestion control fails at once.
        let mut s = TcpStream::connect_timeout(&opts.to, Duration::from_secs(3))?;
        if let Some(cc) = &opts.tcp_congestion {
            set_congestion(&s, cc)?;
        }
        s.set_write_timeout(Some(Duration::from_millis(200)))?;
        let (bytes, stop) = (tcp_bytes.clone(), tcp_stop.clone());
        flows.push(std::thread::spawn(move || -> io::Result<libc::tcp_info> {
            let buf = vec![0u8; 64 * 1024];
            while !stop.load(Ordering::Relaxed) {
                match s.write(&buf) {
                    Ok(n) => {
                        bytes.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Err(e)
                        if e.kind() == io::ErrorKind::WouldBlock
                            || e.kind() == io::ErrorKind::TimedOut => {}
                    Err(e) => return Err(e),
                }
            }
            use std::os::fd::AsRawFd;
            sockopt::tcp_info(s.as_raw_fd())
        }));
    }
    let started = Instant::now();
    let mut report = CrossReport::default();
    let mut lateness = Vec::new();
    if let Some(spec) = &opts.spec {
        send_udp(opts, spec, stop, &mut report, &mut lateness)?;
    } else {
        while !stop.load(Ordering::Relaxed) && started.elapsed() < opts.duration {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    tcp_stop.store(true, Ordering::Relaxed);
    let mut rtts_us = Vec::new();
    for f in flows {
        let info = f
            .join()
            .map_err(|_| io::Error::other("TCP flow panicked"))??;
        report.tcp_segments += info.tcpi_segs_out as u64;
        report.tcp_retransmitted += info.tcpi_total_retrans as u64;
        rtts_us.push(info.tcpi_rtt as f64);
    }
    if !rtts_us.is_empty() {
        report.tcp_rtt_ms = Some(rtts_us.iter().sum::<f64>() / rtts_us.len() as f64 / 1e3);
    }
    report.duration_s = started.elapsed().as_secs_f64();
    report.rate_bps = report.frame_bytes as f64 * 8.0 / report.duration_s.max(1e-9);
    report.tcp_bytes = tcp_bytes.load(Ordering::Relaxed);
    lateness.sort_unstable();
    if !lateness.is_empty() {
        report.late_median_us = lateness[lateness.len() / 2] as f64 / 1e3;
        report.late_p99_us = lateness[lateness.len() * 99 / 100] as f64 / 1e3;
    }
    Ok(report)
}

#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SinkReport {
    pub udp_packets: u64,
    pub udp_bytes: u64,
    pub tcp_bytes: u64,
    pub tcp_connections: u64,
}

/// Counts what arrives on UDP and TCP port `bind` until `duration` passed
/// or `stop` is set. At most 16 TCP connections at a time; memory is a
/// fixed buffer per connection.
pub fn sink(bind: SocketAddr, duration: Duration, stop: &AtomicBool) -> io::Result<SinkReport> {
    let udp = UdpSocket::bind(bind)?;
    udp.set_read_timeout(Some(Duration::from_millis(10)))?;
    // Room for a burst while this process waits for a CPU (a delay line
    // releases frames in batches; the default 208 KB overflowed).
    let fd = std::os::fd::AsRawFd::as_raw_fd(&udp);
    if sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, 8 << 20).is_err() {
        sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 8 << 20)?;
    }
    let tcp = TcpListener::bind(bind)?;
    tcp.set_nonblocking(true)?;
    let tcp_bytes = Arc::new(AtomicU64::new(0));
    let open = Arc::new(AtomicU64::new(0));
    let mut report = SinkReport::default();
    let started = Instant::now();
    let mut buf = vec![0u8; 65536];
    let mut next_accept = Instant::now();
    while !stop.load(Ordering::Relaxed) && started.elapsed() < duration {
        match udp.recv(&mut buf) {
            Ok(n) => {
                report.udp_packets += 1;
                report.udp_bytes += n as u64;
            }
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
        // New connections every 10 ms, not a syscall per datagram.
        if Instant::now() < next_accept {
            continue;
        }
        next_accept = Instant::now() + Duration::from_millis(10);
        if let Ok((mut s, _)) = tcp.accept() {
            if open.load(Ordering::Relaxed) >= 16 {
                continue;
            }
            report.tcp_connections += 1;
            open.fetch_add(1, Ordering::Relaxed);
            let (bytes, open, left) = (
                tcp_bytes.clone(),
                open.clone(),
                duration.saturating_sub(started.elapsed()),
            );
            std::thread::spawn(move || {
                let _ = s.set_nonblocking(false);
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let t0 = Instant::now();
                let mut b = vec![0u8; 65536];
                while t0.elapsed() < left {
                    match s.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            bytes.fetch_add(n as u64, Ordering::Relaxed);
                        }
                    }
                }
                open.fetch_sub(1, Ordering::Relaxed);
            });
        }
    }
    report.tcp_bytes = tcp_bytes.load(Ordering::Relaxed);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_sim::spec::parse_cross;

    /// 20 Mbit/s of 1500 B frames for 0.3 s over loopback: the sink gets
    /// every packet, each 1458 B of payload, and the mean rate is right.
    #[test]
    fn cbr_over_loopback_reaches_the_sink_at_its_rate() {
        let stop = AtomicBool::new(false);
        let probe = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = probe.local_addr().unwrap();
        drop(probe);
        std::thread::scope(|s| {
            let sink = s.spawn(|| sink(addr, Duration::from_millis(800), &stop));
            std::thread::sleep(Duration::from_millis(50));
            let r = send(
                &CrossOptions {
                    to: addr,
                    spec: parse_cross("cbr:20M").unwrap(),
                    duration: Duration::from_millis(300),
                    seed: 1,
                    tcp_flows: 0,
                    tcp_congestion: None,
                },
                &AtomicBool::new(false),
            )
            .unwrap();
            let got = sink.join().unwrap().unwrap();
            // 20e6 * 0.3 / (1500 * 8) = 500 packets (the first at a random
            // phase within the first interval).
            assert!((499..=500).contains(&r.packets), "{r:?}");
            assert_eq!(got.udp_packets, r.packets);
            assert_eq!(got.udp_bytes, r.packets * 1458);
            assert_eq!(r.frame_bytes, r.packets * 1500);
        });
    }
}
