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
//! second, as video does: bursts of back-to-back datagrams. tcpreplay
//! sends a capture's frames at their recorded times (`--multiplier`
//! scales the pace) and tcpreplay-edit rewrites addresses
//! (`--srcipmap`, `--enet-dmac`, `--fixcsum`).

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
    /// `tcpreplay-edit` of a packet capture, looped, at `multiplier`
    /// times its own pace: its frames padded back to their length on the
    /// wire, their addresses rewritten to the cross path's.
    TcpReplay {
        /// `mix` (the shipped capture, [`MIX_CAPTURE`]) or a pcap file.
        capture: String,
        multiplier: f64,
        /// The capture's frames over its span, times `multiplier`.
        mean_frame_bps: f64,
    },
}

/// The shipped capture `capture = "mix"` replays: 4 s of a mix of real
/// flows in the lab, the cross sender's frames toward its router, headers
/// only (docs/lab.md says how it was made): kernel CUBIC and BBR flows
/// capped by iperf3, short TCP transfers, iperf3 UDP on its 1 ms timer.
pub const MIX_CAPTURE: &[u8] = include_bytes!("../captures/mix.pcap.gz");

/// Why a capture cannot be replayed: where in it, or what failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PcapError {
    #[error("cannot read: {0}")]
    Read(String),
    #[error("gzip: {0}")]
    Gzip(String),
    #[error("shorter than a pcap header (24 bytes)")]
    Short,
    #[error("byte 0: magic {0:02x?} is no classic pcap's (pcapng is not read)")]
    Magic([u8; 4]),
    #[error("byte {at}: record {record} cut short")]
    CutShort { at: usize, record: usize },
    #[error("byte {at}: record {record} runs past the end")]
    PastEnd { at: usize, record: usize },
}

/// The pcap bytes of `capture`: the shipped `mix`, or a file (gzip when
/// its name ends in `.gz`).
pub fn capture_bytes(capture: &str) -> Result<Vec<u8>, PcapError> {
    use std::io::Read;
    let (raw, gz) = if capture == "mix" {
        (MIX_CAPTURE.to_vec(), true)
    } else {
        let raw = std::fs::read(capture).map_err(|e| PcapError::Read(e.to_string()))?;
        (raw, capture.ends_with(".gz"))
    };
    if !gz {
        return Ok(raw);
    }
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&raw[..])
        .read_to_end(&mut out)
        .map_err(|e| PcapError::Gzip(e.to_string()))?;
    Ok(out)
}

/// What a classic pcap file holds: frames, their bytes on the wire (the
/// original lengths, whatever the capture kept) and the time from the
/// first to the last (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PcapSpan {
    pub frames: u64,
    pub wire_bytes: u64,
    pub span_ns: i64,
}

impl PcapSpan {
    /// Mean rate of its frames (bit/s; `None` over no time).
    pub fn mean_bps(&self) -> Option<f64> {
        (self.span_ns > 0).then(|| self.wire_bytes as f64 * 8e9 / self.span_ns as f64)
    }
}

/// One record of a classic pcap file: its stamp (ns), the bytes kept
/// (`data`) and its length on the wire.
struct Record<'a> {
    t_ns: i64,
    data: &'a [u8],
    wire_len: u32,
}

/// A classic pcap file's header and records (microsecond or nanosecond
/// stamps, either byte order), or where it is malformed.
fn pcap_records(bytes: &[u8]) -> Result<(&[u8], Vec<Record<'_>>, bool), PcapError> {
    if bytes.len() < 24 {
        return Err(PcapError::Short);
    }
    let magic = &bytes[..4];
    let (big, nanos) = match magic {
        [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
        [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
        [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
        [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
        _ => return Err(PcapError::Magic(magic.try_into().expect("4 bytes"))),
    };
    let word = |at: usize| -> Option<u32> {
        let b: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
        Some(if big {
            u32::from_be_bytes(b)
        } else {
            u32::from_le_bytes(b)
        })
    };
    let mut records = Vec::new();
    let mut at = 24usize;
    while at < bytes.len() {
        let n = records.len() + 1;
        let (Some(sec), Some(frac), Some(incl), Some(wire_len)) =
            (word(at), word(at + 4), word(at + 8), word(at + 12))
        else {
            return Err(PcapError::CutShort { at, record: n });
        };
        let data = bytes
            .get(at + 16..at + 16 + incl as usize)
            .ok_or(PcapError::PastEnd { at, record: n })?;
        let frac_ns = if nanos {
            frac as i64
        } else {
            frac as i64 * 1000
        };
        records.push(Record {
            t_ns: sec as i64 * 1_000_000_000 + frac_ns,
            data,
            wire_len,
        });
        at += 16 + incl as usize;
    }
    Ok((&bytes[..24], records, big))
}

/// Reads a classic pcap file's records: what a replay of it sends.
pub fn pcap_span(bytes: &[u8]) -> Result<PcapSpan, PcapError> {
    let (_, records, _) = pcap_records(bytes)?;
    let (first, last) = match (records.first(), records.last()) {
        (Some(f), Some(l)) => (f.t_ns, l.t_ns),
        _ => (0, 0),
    };
    Ok(PcapSpan {
        frames: records.len() as u64,
        wire_bytes: records.iter().map(|r| r.wire_len as u64).sum(),
        span_ns: last - first,
    })
}

/// The same pcap file with every frame a capture cut short padded with
/// zeros to its length on the wire (tcpreplay 4.4's own `--fixlen=pad`
/// fails on such captures; its `--fixcsum` then mends the checksums).
pub fn pad_to_wire(bytes: &[u8]) -> Result<Vec<u8>, PcapError> {
    let (header, records, big) = pcap_records(bytes)?;
    let mut out = header.to_vec();
    let put = |out: &mut Vec<u8>, w: u32| {
        out.extend(if big {
            w.to_be_bytes()
        } else {
            w.to_le_bytes()
        })
    };
    // The header's snapshot length (bytes 16-19) must hold the frames.
    let most = records
        .iter()
        .map(|r| r.wire_len)
        .max()
        .unwrap_or(0)
        .max(65535);
    out.truncate(16);
    put(&mut out, most);
    out.extend_from_slice(&header[20..24]);
    for r in &records {
        let keep = r.data.len().max(r.wire_len as usize);
        let (sec, frac) = (
            r.t_ns.div_euclid(1_000_000_000),
            r.t_ns.rem_euclid(1_000_000_000),
        );
        let nanos = matches!(
            header[..4],
            [0x4d, 0x3c, 0xb2, 0xa1] | [0xa1, 0xb2, 0x3c, 0x4d]
        );
        put(&mut out, sec as u32);
        put(
            &mut out,
            if nanos {
                frac as u32
            } else {
                (frac / 1000) as u32
            },
        );
        put(&mut out, keep as u32);
        put(&mut out, r.wire_len.max(r.data.len() as u32));
        out.extend_from_slice(r.data);
        out.resize(out.len() + keep - r.data.len(), 0);
    }
    Ok(out)
}

/// Where a replay sends from and to: the cross sender's interface and
/// MAC, its router's MAC, and the two addresses the frames take.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplayPath {
    pub interface: String,
    pub source_mac: String,
    pub router_mac: String,
    pub source_ip: String,
    pub destination_ip: String,
}

impl Generator {
    /// The binary this generator needs on `PATH` (`None`: tightlink).
    pub fn binary(&self) -> Option<&'static str> {
        match self {
            Generator::Tightlink => None,
            Generator::Iperf3Udp { .. } | Generator::Iperf3Tcp { .. } => Some("iperf3"),
            Generator::Iperf2Isochronous { .. } => Some("iperf"),
            Generator::TcpReplay { .. } => Some("tcpreplay-edit"),
        }
    }

    /// Its name in a scenario's `generator` key.
    pub fn name(&self) -> &'static str {
        match self {
            Generator::Tightlink => "tightlink",
            Generator::Iperf3Udp { .. } => "iperf3-udp",
            Generator::Iperf3Tcp { .. } => "iperf3-tcp",
            Generator::Iperf2Isochronous { .. } => "iperf2-isochronous",
            Generator::TcpReplay { .. } => "tcpreplay",
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
            Generator::TcpReplay { mean_frame_bps, .. } => Some(*mean_frame_bps),
        }
    }

    /// The rate it is asked for, whatever layer: the cap of a TCP flow.
    pub fn asked_bps(&self) -> Option<f64> {
        match self {
            Generator::Tightlink => None,
            Generator::Iperf3Udp { rate_bps, .. }
            | Generator::Iperf3Tcp { rate_bps, .. }
            | Generator::Iperf2Isochronous { rate_bps, .. } => Some(*rate_bps),
            Generator::TcpReplay { mean_frame_bps, .. } => Some(*mean_frame_bps),
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
            // Replayed frames need no listener: the cross receiver's
            // kernel drops them (or answers a reset, the other way).
            Generator::TcpReplay { .. } => None,
        }
    }

    /// The replay's command (`None` for other generators): `pcap` (its
    /// frames padded to their length on the wire, [`pad_to_wire`]) looped
    /// for `seconds` out of `path`'s interface, addressed from `path`'s
    /// sender to its receiver through the router (checksums fixed).
    pub fn replay_argv(&self, pcap: &str, path: &ReplayPath, seconds: u64) -> Option<Vec<String>> {
        let Generator::TcpReplay { multiplier, .. } = self else {
            return None;
        };
        Some(vec![
            "tcpreplay-edit".into(),
            format!("--intf1={}", path.interface),
            format!("--multiplier={multiplier}"),
            "--loop=0".into(),
            format!("--duration={}", seconds.max(1)),
            "--preload-pcap".into(),
            format!("--enet-smac={}", path.source_mac),
            format!("--enet-dmac={}", path.router_mac),
            format!("--srcipmap=0.0.0.0/0:{}/32", path.source_ip),
            format!("--dstipmap=0.0.0.0/0:{}/32", path.destination_ip),
            "--fixcsum".into(),
            "--quiet".into(),
            pcap.into(),
        ])
    }

    /// The sender's command in the cross sender's namespace, toward
    /// `ip:port` for `seconds` (`None`: tightlink's own).
    pub fn sender_argv(&self, ip: &str, port: u16, seconds: u64) -> Option<Vec<String>> {
        let mut v: Vec<String> = match self {
            Generator::Tightlink | Generator::TcpReplay { .. } => return None,
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
            Generator::TcpReplay {
                capture,
                multiplier,
                mean_frame_bps,
            } => write!(
                f,
                "tcpreplay of capture {capture} at {multiplier}x ({:.1} Mbit/s of frames)",
                mean_frame_bps / 1e6
            ),
        }
    }
}

/// Whether `binary` is an executable on `PATH`.
pub fn on_path(binary: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| {
        std::env::split_paths(&p).any(|d| {
            let f = d.join(binary);
            std::fs::metadata(&f).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    })
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

    /// A classic little-endian pcap: `(sec, usec, kept, on the wire)`.
    fn pcap(records: &[(u32, u32, u32, u32)]) -> Vec<u8> {
        let mut b = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
        b.extend([0u8; 8]);
        b.extend(65535u32.to_le_bytes());
        b.extend(1u32.to_le_bytes());
        for &(sec, usec, kept, wire) in records {
            for w in [sec, usec, kept, wire] {
                b.extend(w.to_le_bytes());
            }
            b.extend(vec![0u8; kept as usize]);
        }
        b
    }

    #[test]
    fn a_capture_replays_its_frames_on_the_wire_over_its_span() {
        // Three frames cut to 64 B of 1514, 66 and 1514 on the wire, over
        // 1.5 ms: 3094 B in 1.5 ms is 16.5 Mbit/s.
        let b = pcap(&[(10, 0, 64, 1514), (10, 500, 64, 66), (10, 1500, 64, 1514)]);
        let span = pcap_span(&b).unwrap();
        assert_eq!(
            span,
            PcapSpan {
                frames: 3,
                wire_bytes: 3094,
                span_ns: 1_500_000
            }
        );
        assert!((span.mean_bps().unwrap() - 3094.0 * 8.0 / 1.5e-3).abs() < 1e-6);
        // Padded, each frame holds its bytes on the wire, zeros after
        // the 64 kept; the same records otherwise.
        let padded = pad_to_wire(&b).unwrap();
        assert_eq!(padded.len(), 24 + 3 * 16 + 3094);
        assert_eq!(pcap_span(&padded).unwrap(), span);
        assert_eq!(&padded[24 + 8..24 + 16], &[0xea, 5, 0, 0, 0xea, 5, 0, 0]);
        assert!(padded[24 + 16 + 64..24 + 16 + 1514].iter().all(|&x| x == 0));
        // Errors say where.
        assert_eq!(pcap_span(&b[..10]), Err(PcapError::Short));
        let cut = &b[..b.len() - 3];
        assert_eq!(
            pcap_span(cut).unwrap_err().to_string(),
            "byte 184: record 3 runs past the end"
        );
        assert!(pcap_span(b"\x0a\x0d\x0d\x0a and more bytes than a header")
            .unwrap_err()
            .to_string()
            .starts_with("byte 0: magic [0a, 0d, 0d, 0a]"));
    }

    #[test]
    fn the_shipped_mix_is_a_capture_of_tens_of_megabits() {
        let span = pcap_span(&capture_bytes("mix").unwrap()).unwrap();
        assert!(span.frames > 10_000, "{span:?}");
        let mbps = span.mean_bps().unwrap() / 1e6;
        assert!((30.0..80.0).contains(&mbps), "{mbps} Mbit/s");
        assert!(capture_bytes("/nonexistent.pcap")
            .unwrap_err()
            .to_string()
            .starts_with("cannot read: "));
    }

    #[test]
    fn a_replay_is_addressed_to_the_cross_path() {
        let g = Generator::TcpReplay {
            capture: "mix".into(),
            multiplier: 1.5,
            mean_frame_bps: 75e6,
        };
        let path = ReplayPath {
            interface: "eth0".into(),
            source_mac: "02:00:00:00:00:01".into(),
            router_mac: "02:00:00:00:00:02".into(),
            source_ip: "10.77.3.1".into(),
            destination_ip: "10.77.4.2".into(),
        };
        assert_eq!(
            g.replay_argv("/run/x.pcap", &path, 12).unwrap().join(" "),
            "tcpreplay-edit --intf1=eth0 --multiplier=1.5 --loop=0 --duration=12 \
             --preload-pcap --enet-smac=02:00:00:00:00:01 \
             --enet-dmac=02:00:00:00:00:02 --srcipmap=0.0.0.0/0:10.77.3.1/32 \
             --dstipmap=0.0.0.0/0:10.77.4.2/32 --fixcsum --quiet /run/x.pcap"
        );
        assert_eq!(g.sink_argv("h", 1), None);
        assert_eq!(g.sender_argv("h", 1, 1), None);
        assert_eq!(g.mean_frame_bps(), Some(75e6));
        assert_eq!(g.binary(), Some("tcpreplay-edit"));
    }
}
