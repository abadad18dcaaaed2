//! Cross-traffic generators: tightlink's own (`tightlink cross`, the
//! simulator's models) and tools this project did not write, started and
//! stopped by the lab the same way. A tool's traffic is judged by the same
//! kernel counters as ours (what the cross sender handed to its router,
//! what the shaped hop carried), never by what the tool says it sent.
//!
//! Facts of the tools (their manuals): iperf3's `-b` is the application's
//! rate and a UDP sender sends what it owes at each tick of its pacing
//! timer (`--pacing-timer`, microseconds, 1000 by default in 3.12), so its
//! datagrams leave in ones and twos; `-C` names a TCP congestion control
//! and `-b` caps a TCP flow's rate. iperf 2's `--isochronous=FPS:MEAN,STD`
//! sends a frame of MEAN/FPS bits (drawn with STD) at each of FPS ticks a
//! second, as video does: bursts of back-to-back datagrams.

use std::fmt;
use std::process::Command;

/// UDP/IPv4 header bytes plus the 14-byte Ethernet header: a datagram's
/// payload to its frame (the lab's rate layer).
pub const UDP_FRAME_OVERHEAD_BYTES: u64 = 42;

/// iperf3's default UDP datagram (its `-l` for UDP on a 1500-byte MTU).
pub const IPERF3_UDP_LENGTH_BYTES: u64 = 1448;
/// iperf3's default pacing timer (3.12: `--pacing-timer 1000`).
pub const IPERF3_PACING_TIMER_US: u64 = 1000;
/// iperf 2's default UDP datagram.
pub const IPERF2_UDP_LENGTH_BYTES: u64 = 1470;

#[derive(Debug, Clone, PartialEq)]
pub enum Generator {
    /// `tightlink cross --traffic` (the scenario's `traffic`).
    Tightlink,
    /// `iperf3 -u -b RATE -l LENGTH --pacing-timer US`.
    Iperf3Udp {
        rate_bps: f64,
        length_bytes: u64,
        pacing_timer_us: u64,
    },
    /// `iperf3 -b RATE -C CONGESTION -P FLOWS`: TCP flows capped by
    /// their own rate, so the capacity they leave stays defined.
    Iperf3Tcp {
        rate_bps: f64,
        congestion: String,
        flows: usize,
    },
    /// `iperf -u --isochronous=FPS:RATE,STDDEV` (iperf 2).
    Iperf2Isochronous {
        frames_per_second: u32,
        rate_bps: f64,
        stddev_bps: f64,
    },
}

impl Generator {
    /// The binary this generator needs on `PATH` (`None`: tightlink).
    pub fn binary(&self) -> Option<&'static str> {
        match self {
            Generator::Tightlink => None,
            Generator::Iperf3Udp { .. } | Generator::Iperf3Tcp { .. } => Some("iperf3"),
            Generator::Iperf2Isochronous { .. } => Some("iperf"),
        }
    }

    /// Its name in a scenario's `generator` key.
    pub fn name(&self) -> &'static str {
        match self {
            Generator::Tightlink => "tightlink",
            Generator::Iperf3Udp { .. } => "iperf3-udp",
            Generator::Iperf3Tcp { .. } => "iperf3-tcp",
            Generator::Iperf2Isochronous { .. } => "iperf2-isochronous",
        }
    }

    /// Mean rate of the frames it sends (IP + 14 B), where it is set by
    /// the tool's own rate: UDP datagrams carry their headers on top.
    /// TCP's rate is its payload's, and the headers and retransmissions
    /// around it are not known in advance: `None`.
    pub fn mean_frame_bps(&self) -> Option<f64> {
        match self {
            Generator::Tightlink | Generator::Iperf3Tcp { .. } => None,
            Generator::Iperf3Udp {
                rate_bps,
                length_bytes,
                ..
            } => Some(
                rate_bps * (length_bytes + UDP_FRAME_OVERHEAD_BYTES) as f64 / *length_bytes as f64,
            ),
            Generator::Iperf2Isochronous { rate_bps, .. } => Some(
                rate_bps * (IPERF2_UDP_LENGTH_BYTES + UDP_FRAME_OVERHEAD_BYTES) as f64
                    / IPERF2_UDP_LENGTH_BYTES as f64,
            ),
        }
    }

    /// The rate it is asked for, whatever layer: the cap of a TCP flow.
    pub fn asked_bps(&self) -> Option<f64> {
        match self {
            Generator::Tightlink => None,
            Generator::Iperf3Udp { rate_bps, .. }
            | Generator::Iperf3Tcp { rate_bps, .. }
            | Generator::Iperf2Isochronous { rate_bps, .. } => Some(*rate_bps),
        }
    }

    /// Whether it runs TCP (the available bandwidth is then what the
    /// counters say, never the configured rate).
    pub fn is_tcp(&self) -> bool {
        matches!(self, Generator::Iperf3Tcp { .. })
    }

    /// The sink's command in the cross receiver's namespace, listening on
    /// `ip:port` for `seconds` or more (`None`: tightlink's own sink,
    /// which the caller runs as the lab's binary).
    pub fn sink_argv(&self, ip: &str, port: u16) -> Option<Vec<String>> {
        let port = port.to_string();
        match self {
            Generator::Tightlink => None,
            Generator::Iperf3Udp { .. } | Generator::Iperf3Tcp { .. } => Some(
                ["iperf3", "-s", "-B", ip, "-p", &port]
                    .map(str::to_string)
                    .to_vec(),
            ),
            Generator::Iperf2Isochronous { .. } => Some(
                ["iperf", "-s", "-u", "-B", ip, "-p", &port]
                    .map(str::to_string)
                    .to_vec(),
            ),
        }
    }

    /// The sender's command in the cross sender's namespace, toward
    /// `ip:port` for `seconds` (`None`: tightlink's own).
    pub fn sender_argv(&self, ip: &str, port: u16, seconds: u64) -> Option<Vec<String>> {
        let mut v: Vec<String> = match self {
            Generator::Tightlink => return None,
            Generator::Iperf3Udp {
                rate_bps,
                length_bytes,
                pacing_timer_us,
            } => vec![
                "iperf3".into(),
                "-c".into(),
                ip.into(),
                "-u".into(),
                "-b".into(),
                format!("{}", rate_bps.round() as u64),
                "-l".into(),
                length_bytes.to_string(),
                "--pacing-timer".into(),
                pacing_timer_us.to_string(),
            ],
            Generator::Iperf3Tcp {
                rate_bps,
                congestion,
                flows,
            } => vec![
                "iperf3".into(),
                "-c".into(),
                ip.into(),
                "-b".into(),
                format!("{}", rate_bps.round() as u64),
                "-C".into(),
                congestion.clone(),
                "-P".into(),
                flows.to_string(),
            ],
            Generator::Iperf2Isochronous {
                frames_per_second,
                rate_bps,
                stddev_bps,
            } => vec![
                "iperf".into(),
                "-c".into(),
                ip.into(),
                "-u".into(),
                format!(
                    "--isochronous={frames_per_second}:{},{}",
                    rate_bps.round() as u64,
                    stddev_bps.round() as u64
                ),
            ],
        };
        v.extend([
            "-p".into(),
            port.to_string(),
            "-t".into(),
            seconds.max(1).to_string(),
        ]);
        Some(v)
    }
}

/// What a table says of the traffic (the tool and its settings).
impl fmt::Display for Generator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Generator::Tightlink => write!(f, "tightlink cross"),
            Generator::Iperf3Udp {
                rate_bps,
                length_bytes,
                pacing_timer_us,
            } => write!(
                f,
                "iperf3 UDP {} Mbit/s of {length_bytes} B datagrams, pacing timer {pacing_timer_us} us",
                rate_bps / 1e6
            ),
            Generator::Iperf3Tcp {
                rate_bps,
                congestion,
                flows,
            } => write!(
                f,
                "iperf3 TCP ({congestion}), {flows} flow(s) capped at {} Mbit/s each",
                rate_bps / 1e6
            ),
            Generator::Iperf2Isochronous {
                frames_per_second,
                rate_bps,
                stddev_bps,
            } => write!(
                f,
                "iperf 2 isochronous, {frames_per_second} frames/s, {} Mbit/s (sd {} Mbit/s)",
                rate_bps / 1e6,
                stddev_bps / 1e6
            ),
        }
    }
}

/// A command for `argv` run in namespace `ns`.
pub fn in_netns(ns: &str, argv: &[String]) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).args(argv);
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_udp_frames_carry_their_headers() {
        let g = Generator::Iperf3Udp {
            rate_bps: 60e6,
            length_bytes: 1400,
            pacing_timer_us: 100,
        };
        // 1400 B datagrams leave as 1442 B frames: 60 * 1442 / 1400.
        assert!((g.mean_frame_bps().unwrap() - 61.8e6).abs() < 1.0);
        let argv = g.sender_argv("10.77.4.2", 9000, 30).unwrap().join(" ");
        assert_eq!(
            argv,
            "iperf3 -c 10.77.4.2 -u -b 60000000 -l 1400 --pacing-timer 100 -p 9000 -t 30"
        );
        assert_eq!(
            g.sink_argv("10.77.4.2", 9000).unwrap().join(" "),
            "iperf3 -s -B 10.77.4.2 -p 9000"
        );
    }

    #[test]
    fn tcp_rates_are_caps_not_frame_rates() {
        let g = Generator::Iperf3Tcp {
            rate_bps: 120e6,
            congestion: "bbr".into(),
            flows: 2,
        };
        assert_eq!(g.mean_frame_bps(), None);
        assert!(g.is_tcp());
        assert_eq!(
            g.sender_argv("h", 1, 0).unwrap().join(" "),
            "iperf3 -c h -b 120000000 -C bbr -P 2 -p 1 -t 1"
        );
    }

    #[test]
    fn iperf2_isochronous_names_its_frames() {
        let g = Generator::Iperf2Isochronous {
            frames_per_second: 60,
            rate_bps: 50e6,
            stddev_bps: 5e6,
        };
        assert!(g
            .sender_argv("h", 9000, 5)
            .unwrap()
            .contains(&"--isochronous=60:50000000,5000000".to_string()));
        assert_eq!(g.binary(), Some("iperf"));
        assert_eq!(Generator::Tightlink.sender_argv("h", 1, 1), None);
    }
}
