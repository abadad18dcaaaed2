//! tightlink-capture: TCP flows from packet captures, for the passive
//! estimators of `tightlink_core::tcp` (\[TCPW\], sections 3-4).
//!
//! Reads pcap (micro- or nanosecond) and pcapng (any `if_tsresol`) with
//! the `pcap-file` crate; link types Ethernet (with 802.1Q tags), Linux
//! cooked (SLL, SLL2) and raw IP; IPv4 and IPv6 (no extension headers)
//! carrying TCP. Every header is checked against what was captured: a
//! packet whose IP or TCP header is cut short or inconsistent is an error
//! naming its packet number, never skipped. Payload cut by the snap length
//! is fine (lengths come from the IP header). Non-TCP packets are counted
//! and left out.
//!
//! [`live`] writes such captures itself (AF_PACKET), for machines without
//! tcpdump.

use std::collections::HashMap;
use std::io::Read;
use std::net::IpAddr;
use std::path::Path;

use pcap_file::pcap::PcapReader;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;
use tightlink_core::tcp::{Direction, Segment};

pub mod live;

#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("{path}: {message}")]
    File { path: String, message: String },
    #[error("{path}: packet {packet}: {message}")]
    Packet {
        path: String,
        packet: u64,
        message: String,
    },
}

/// One TCP packet of a capture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpPacket {
    /// Position in the capture, 1-based (as Wireshark numbers frames).
    pub packet: u64,
    pub t_ns: i64,
    pub src: (IpAddr, u16),
    pub dst: (IpAddr, u16),
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload_bytes: u32,
    /// IP packet length (header included) + 14, the Ethernet frame
    /// without FCS, whatever link the capture was taken on.
    pub frame_bytes: u32,
    /// A D-SACK block (RFC 2883: the first SACK block below the ACK or
    /// inside the second): data that arrived twice.
    pub dsack: Option<(u32, u32)>,
}

/// A capture's TCP packets and what else it held.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Capture {
    pub tcp: Vec<TcpPacket>,
    pub packets: u64,
    pub non_tcp: u64,
}

/// One connection: both directions of a 4-tuple.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowSummary {
    /// The data sender's end and the receiver's end (the direction with
    /// more payload bytes is data).
    pub sender: (IpAddr, u16),
    pub receiver: (IpAddr, u16),
    pub packets: usize,
    pub data_bytes: u64,
}

impl FlowSummary {
    /// `SENDER_IP:PORT-RECEIVER_IP:PORT`, what `--flow` takes.
    pub fn name(&self) -> String {
        format!("{}-{}", endpoint(self.sender), endpoint(self.receiver))
    }
}

fn endpoint((ip, port): (IpAddr, u16)) -> String {
    match ip {
        IpAddr::V4(a) => format!("{a}:{port}"),
        IpAddr::V6(a) => format!("[{a}]:{port}"),
    }
}

const FIN: u8 = 0x01;
const SYN: u8 = 0x02;
const ACK: u8 = 0x10;

/// Reads a pcap or pcapng file.
pub fn read_capture(path: &Path) -> Result<Capture, CaptureError> {
    let name = path.display().to_string();
    let file_err = |m: String| CaptureError::File {
        path: name.clone(),
        message: m,
    };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .map_err(|e| file_err(e.to_string()))?;
    parse_capture_bytes(&name, &bytes)
}

/// Parses a pcap or pcapng file's bytes; errors name it `name`.
pub fn parse_capture_bytes(name: &str, bytes: &[u8]) -> Result<Capture, CaptureError> {
    parse_capture(bytes).map_err(|e| match e {
        Fail::File(message) => CaptureError::File {
            path: name.to_string(),
            message,
        },
        Fail::Packet(packet, message) => CaptureError::Packet {
            path: name.to_string(),
            packet,
            message,
        },
    })
}

enum Fail {
    File(String),
    Packet(u64, String),
}

const PCAPNG_MAGIC: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];

fn parse_capture(bytes: &[u8]) -> Result<Capture, Fail> {
    if bytes.len() < 4 {
        return Err(Fail::File("too short for a capture file".into()));
    }
    let mut cap = Capture::default();
    if bytes[..4] == PCAPNG_MAGIC {
        let mut r = PcapNgReader::new(bytes).map_err(|e| Fail::File(format!("pcapng: {e}")))?;
        // (link type, if_tsresol) per interface, in order of description.
        let mut ifaces: Vec<(DataLink, u8)> = Vec::new();
        while let Some(block) = r.next_block() {
            let block = block.map_err(|e| {
                Fail::Packet(cap.packets + 1, format!("unreadable pcapng block: {e}"))
            })?;
            let epb = match block {
                Block::SectionHeader(_) => {
                    ifaces.clear();
                    continue;
                }
                Block::InterfaceDescription(idb) => {
                    let resol = idb
                        .options
                        .iter()
                        .find_map(|o| match o {
                            InterfaceDescriptionOption::IfTsResol(v) => Some(*v),
                            _ => None,
                        })
                        .unwrap_or(6);
                    ifaces.push((idb.linktype, resol));
                    continue;
                }
                Block::EnhancedPacket(epb) => epb,
                _ => continue,
            };
            cap.packets += 1;
            let &(link, resol) = ifaces.get(epb.interface_id as usize).ok_or_else(|| {
                Fail::Packet(
                    cap.packets,
                    format!("no interface {} described", epb.interface_id),
                )
            })?;
            // pcap-file hands the raw tick count over as nanoseconds.
            let t_ns = ticks_to_ns(epb.timestamp.as_nanos(), resol)
                .ok_or_else(|| Fail::Packet(cap.packets, "timestamp out of range".into()))?;
            decode(&mut cap, link, &epb.data, t_ns)?;
        }
    } else {
        let mut r = PcapReader::new(bytes)
            .map_err(|e| Fail::File(format!("neither pcap nor pcapng ({e})")))?;
        let header = r.header();
        let frac_ns: u64 = match header.ts_resolution {
            pcap_file::TsResolution::MicroSecond => 1000,
            pcap_file::TsResolution::NanoSecond => 1,
        };
        // Raw records, checked here: pcap-file's own check refuses a
        // record whose original length exceeds the snap length, which is
        // every full-size packet of a `tcpdump -s 96` capture.
        while let Some(p) = r.next_raw_packet() {
            let p = p.map_err(|e| {
                Fail::Packet(cap.packets + 1, format!("truncated or corrupt record: {e}"))
            })?;
            cap.packets += 1;
            if p.incl_len > p.orig_len || p.incl_len > header.snaplen.max(65535) {
                return Err(Fail::Packet(
                    cap.packets,
                    format!(
                        "record keeps {} bytes of a {}-byte packet (snap length {})",
                        p.incl_len, p.orig_len, header.snaplen
                    ),
                ));
            }
            if p.ts_frac as u64 * frac_ns >= 1_000_000_000 {
                return Err(Fail::Packet(
                    cap.packets,
                    format!("timestamp fraction {} out of range", p.ts_frac),
                ));
            }
            let t_ns = p.ts_sec as i64 * 1_000_000_000 + (p.ts_frac as u64 * frac_ns) as i64;
            decode(&mut cap, header.datalink, &p.data, t_ns)?;
        }
    }
    Ok(cap)
}

/// pcapng ticks at `if_tsresol` (high bit clear: 10^-v s; set: 2^-v s).
fn ticks_to_ns(ticks: u128, resol: u8) -> Option<i64> {
    let ns = if resol & 0x80 == 0 {
        let v = resol as u32;
        if v <= 9 {
            ticks.checked_mul(10u128.pow(9 - v))?
        } else {
            ticks / 10u128.checked_pow(v - 9)?
        }
    } else {
        let v = (resol & 0x7f) as u32;
        ticks.checked_mul(1_000_000_000)? >> v.min(127)
    };
    i64::try_from(ns).ok()
}

/// The ethertype and the bytes after the link header (`None`: raw IP of
/// another version, not TCP).
fn link_layer(link: DataLink, data: &[u8], n: u64) -> Result<Option<(u16, &[u8])>, Fail> {
    let bad = |m: String| Fail::Packet(n, m);
    Ok(Some(match link {
        DataLink::ETHERNET => {
            if data.len() < 14 {
                return Err(bad(format!("Ethernet header cut at {} bytes", data.len())));
            }
            let mut et = u16::from_be_bytes([data[12], data[13]]);
            let mut off = 14;
            while et == 0x8100 || et == 0x88a8 {
                if data.len() < off + 4 {
                    return Err(bad("VLAN tag cut short".into()));
                }
                et = u16::from_be_bytes([data[off + 2], data[off + 3]]);
                off += 4;
            }
            (et, &data[off..])
        }
        DataLink::LINUX_SLL => {
            if data.len() < 16 {
                return Err(bad(format!(
                    "Linux cooked header cut at {} bytes",
                    data.len()
                )));
            }
            (u16::from_be_bytes([data[14], data[15]]), &data[16..])
        }
        DataLink::LINUX_SLL2 => {
            if data.len() < 20 {
                return Err(bad(format!(
                    "Linux cooked v2 header cut at {} bytes",
                    data.len()
                )));
            }
            (u16::from_be_bytes([data[0], data[1]]), &data[20..])
        }
        DataLink::RAW | DataLink::IPV4 | DataLink::IPV6 => match data.first().map(|b| b >> 4) {
            Some(4) => (0x0800, data),
            Some(6) => (0x86dd, data),
            _ => return Ok(None),
        },
        other => {
            return Err(Fail::File(format!(
                "link type {other:?} is not supported (Ethernet, Linux cooked, raw IP are)"
            )))
        }
    }))
}

/// What the IP header says of a TCP segment.
struct IpPart<'a> {
    src: IpAddr,
    dst: IpAddr,
    /// The IP payload as captured (the TCP header on).
    tcp: &'a [u8],
    /// The IP payload's length as the header gives it, and the header's.
    payload_len: usize,
    header_len: usize,
}

/// The IPv4 or IPv6 header (`None`: not TCP, or a later fragment).
fn ip_layer(ethertype: u16, ip: &[u8], n: u64) -> Result<Option<IpPart<'_>>, Fail> {
    let bad = |m: String| Fail::Packet(n, m);
    match ethertype {
        0x0800 => {
            if ip.len() < 20 {
                return Err(bad(format!("IPv4 header cut at {} bytes", ip.len())));
            }
            if ip[0] >> 4 != 4 {
                return Err(bad(format!("IPv4 version field is {}", ip[0] >> 4)));
            }
            let ihl = (ip[0] & 0x0f) as usize * 4;
            let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
            if ihl < 20 || total < ihl {
                return Err(bad(format!(
                    "IPv4 header length {ihl} / total length {total} inconsistent"
                )));
            }
            if ip[9] != 6 {
                return Ok(None);
            }
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x1fff;
            if frag != 0 {
                // A later fragment carries no TCP header.
                return Ok(None);
            }
            if ip.len() < ihl {
                return Err(bad(format!(
                    "IPv4 options cut at {} of {ihl} bytes",
                    ip.len()
                )));
            }
            Ok(Some(IpPart {
                src: IpAddr::from([ip[12], ip[13], ip[14], ip[15]]),
                dst: IpAddr::from([ip[16], ip[17], ip[18], ip[19]]),
                tcp: &ip[ihl..],
                payload_len: total - ihl,
                header_len: ihl,
            }))
        }
        0x86dd => {
            if ip.len() < 40 {
                return Err(bad(format!("IPv6 header cut at {} bytes", ip.len())));
            }
            if ip[6] != 6 {
                return Ok(None);
            }
            let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
            let s: [u8; 16] = ip[8..24].try_into().expect("16 bytes");
            let d: [u8; 16] = ip[24..40].try_into().expect("16 bytes");
            Ok(Some(IpPart {
                src: IpAddr::from(s),
                dst: IpAddr::from(d),
                tcp: &ip[40..],
                payload_len: plen,
                header_len: 40,
            }))
        }
        _ => Ok(None),
    }
}

fn decode(cap: &mut Capture, link: DataLink, data: &[u8], t_ns: i64) -> Result<(), Fail> {
    let n = cap.packets;
    let bad = |m: String| Fail::Packet(n, m);
    let Some((ethertype, ip)) = link_layer(link, data, n)? else {
        cap.non_tcp += 1;
        return Ok(());
    };
    let Some(IpPart {
        src,
        dst,
        tcp,
        payload_len: ip_payload_len,
        header_len: ip_header_len,
    }) = ip_layer(ethertype, ip, n)?
    else {
        cap.non_tcp += 1;
        return Ok(());
    };
    if tcp.len() < 20 {
        return Err(bad(format!("TCP header cut at {} bytes", tcp.len())));
    }
    let data_off = (tcp[12] >> 4) as usize * 4;
    if data_off < 20 || data_off > ip_payload_len {
        return Err(bad(format!(
            "TCP data offset {data_off} inconsistent with {ip_payload_len} bytes of IP payload"
        )));
    }
    if tcp.len() < data_off {
        return Err(bad(format!(
            "TCP header cut at {} of its {data_off} bytes (capture with a larger snap length)",
            tcp.len()
        )));
    }
    let ack = u32::from_be_bytes([tcp[8], tcp[9], tcp[10], tcp[11]]);
    let dsack = dsack_block(&tcp[20..data_off], ack);
    cap.tcp.push(TcpPacket {
        packet: n,
        t_ns,
        src: (src, u16::from_be_bytes([tcp[0], tcp[1]])),
        dst: (dst, u16::from_be_bytes([tcp[2], tcp[3]])),
        seq: u32::from_be_bytes([tcp[4], tcp[5], tcp[6], tcp[7]]),
        ack,
        flags: tcp[13],
        payload_bytes: (ip_payload_len - data_off) as u32,
        frame_bytes: (ip_header_len + ip_payload_len + 14) as u32,
        dsack,
    });
    Ok(())
}

/// The D-SACK block among TCP options, if any (RFC 2883 section 4: the
/// first SACK block reports a duplicate when it lies below the cumulative
/// ACK or inside the second block). Malformed options end the walk.
fn dsack_block(options: &[u8], ack: u32) -> Option<(u32, u32)> {
    let mut i = 0;
    while i < options.len() {
        match options[i] {
            0 => return None,
            1 => i += 1,
            kind => {
                let len = *options.get(i + 1)? as usize;
                if len < 2 || i + len > options.len() {
                    return None;
                }
                if kind == 5 && len >= 10 {
                    let word = |o: usize| {
                        u32::from_be_bytes([
                            options[o],
                            options[o + 1],
                            options[o + 2],
                            options[o + 3],
                        ])
                    };
                    let (l1, r1) = (word(i + 2), word(i + 6));
                    // Sequence comparisons modulo 2^32.
                    let before = |a: u32, b: u32| (a.wrapping_sub(b) as i32) < 0;
                    let below_ack = before(l1, ack);
                    let inside_second = len >= 18 && {
                        let (l2, r2) = (word(i + 10), word(i + 14));
                        !before(l1, l2) && !before(r2, r1)
                    };
                    return (below_ack || inside_second).then_some((l1, r1));
                }
                i += len;
            }
        }
    }
    None
}

type Key = ((IpAddr, u16), (IpAddr, u16));

fn key(p: &TcpPacket) -> Key {
    if p.src <= p.dst {
        (p.src, p.dst)
    } else {
        (p.dst, p.src)
    }
}

/// The capture's connections, most data first.
pub fn flows(cap: &Capture) -> Vec<FlowSummary> {
    // key -> (packets, bytes from the lower end, bytes from the higher)
    let mut m: HashMap<Key, (usize, u64, u64)> = HashMap::new();
    let mut order: Vec<Key> = Vec::new();
    for p in &cap.tcp {
        let k = key(p);
        let e = m.entry(k).or_insert_with(|| {
            order.push(k);
            (0, 0, 0)
        });
        e.0 += 1;
        if p.src == k.0 {
            e.1 += p.payload_bytes as u64;
        } else {
            e.2 += p.payload_bytes as u64;
        }
    }
    let mut out: Vec<FlowSummary> = order
        .into_iter()
        .map(|k| {
            let (packets, lo, hi) = m[&k];
            let (sender, receiver, data_bytes) = if lo >= hi {
                (k.0, k.1, lo)
            } else {
                (k.1, k.0, hi)
            };
            FlowSummary {
                sender,
                receiver,
                packets,
                data_bytes,
            }
        })
        .collect();
    out.sort_by_key(|f| std::cmp::Reverse(f.data_bytes));
    out
}

/// The segments of one flow, as the estimators take them.
pub fn segments(cap: &Capture, flow: &FlowSummary) -> Vec<Segment> {
    cap.tcp
        .iter()
        .filter(|p| {
            (p.src == flow.sender && p.dst == flow.receiver)
                || (p.src == flow.receiver && p.dst == flow.sender)
        })
        .map(|p| Segment {
            t_ns: p.t_ns,
            direction: if p.src == flow.sender {
                Direction::Data
            } else {
                Direction::Ack
            },
            seq: p.seq,
            ack: p.ack,
            has_ack: p.flags & ACK != 0,
            syn: p.flags & SYN != 0,
            fin: p.flags & FIN != 0,
            payload_bytes: p.payload_bytes,
            frame_bytes: p.frame_bytes,
            dsack: p.dsack,
            packet: p.packet,
        })
        .collect()
}

/// Finds `--flow NAME` (as [`FlowSummary::name`] prints it, either
/// direction) or `--flow N` (1-based rank by data bytes).
pub fn find_flow<'a>(flows: &'a [FlowSummary], sel: &str) -> Option<&'a FlowSummary> {
    if let Ok(n) = sel.parse::<usize>() {
        return n.checked_sub(1).and_then(|i| flows.get(i));
    }
    flows.iter().find(|f| {
        f.name() == sel || format!("{}-{}", endpoint(f.receiver), endpoint(f.sender)) == sel
    })
}

/// Writes a pcap (nanosecond, Ethernet) file of IPv4/TCP packets, for
/// tests and examples: `(t_ns, src, dst, seq, ack, flags, payload)`.
pub mod write {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::{DataLink, TsResolution};
    use std::time::Duration;

    #[derive(Debug, Clone, Copy)]
    pub struct Tcp4 {
        pub t_ns: u64,
        pub src: ([u8; 4], u16),
        pub dst: ([u8; 4], u16),
        pub seq: u32,
        pub ack: u32,
        pub flags: u8,
        pub payload_bytes: u16,
    }

    /// The frame for one packet (payload zeros, not captured past 64
    /// bytes of it: lengths come from the IP header).
    pub fn frame(p: &Tcp4) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x08, 0x00]);
        let total = 20 + 20 + p.payload_bytes;
        let mut ip = vec![0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 6, 0, 0];
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip.extend(p.src.0);
        ip.extend(p.dst.0);
        f.extend(ip);
        f.extend(p.src.1.to_be_bytes());
        f.extend(p.dst.1.to_be_bytes());
        f.extend(p.seq.to_be_bytes());
        f.extend(p.ack.to_be_bytes());
        f.extend([0x50, p.flags, 0xff, 0xff, 0, 0, 0, 0]);
        f.extend(std::iter::repeat_n(0u8, p.payload_bytes.min(64) as usize));
        f
    }

    pub fn pcap(packets: &[Tcp4]) -> Vec<u8> {
        // Snap length = what `frame` keeps (Ethernet, IPv4, TCP, 64 bytes
        // of payload), so long packets are cut as `tcpdump -s 118` cuts.
        let header = PcapHeader {
            datalink: DataLink::ETHERNET,
            ts_resolution: TsResolution::NanoSecond,
            snaplen: 14 + 20 + 20 + 64,
            ..PcapHeader::default()
        };
        let mut w = PcapWriter::with_header(Vec::new(), header).expect("in memory");
        for p in packets {
            let f = frame(p);
            let orig = f.len() as u32 + p.payload_bytes.saturating_sub(64) as u32;
            w.write_packet(&PcapPacket::new(Duration::from_nanos(p.t_ns), orig, &f))
                .expect("in memory");
        }
        w.into_writer()
    }
}

#[cfg(test)]
mod tests {
    use super::write::{pcap, Tcp4};
    use super::*;

    fn pkt(t_ns: u64, from_sender: bool, seq: u32, ack: u32, len: u16) -> Tcp4 {
        let (a, b) = (([10, 0, 0, 1], 40000), ([10, 0, 0, 2], 5201));
        Tcp4 {
            t_ns,
            src: if from_sender { a } else { b },
            dst: if from_sender { b } else { a },
            seq,
            ack,
            flags: 0x10,
            payload_bytes: len,
        }
    }

    /// Two data segments of 1448 bytes and one ACK: one flow, 10.0.0.1
    /// sends 2896 bytes; the segments come out in order with directions,
    /// lengths from the IP header (the capture holds 64 bytes of each
    /// payload), times in ns.
    #[test]
    fn a_flow_by_hand() {
        let bytes = pcap(&[
            pkt(1_000, true, 100, 1, 1448),
            pkt(2_000, true, 1548, 1, 1448),
            pkt(90_000, false, 1, 2996, 0),
        ]);
        let cap = parse_capture(&bytes).ok().unwrap();
        assert_eq!((cap.packets, cap.tcp.len(), cap.non_tcp), (3, 3, 0));
        let f = flows(&cap);
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].data_bytes, 2896);
        assert_eq!(f[0].name(), "10.0.0.1:40000-10.0.0.2:5201");
        assert_eq!(find_flow(&f, "1"), Some(&f[0]));
        assert_eq!(find_flow(&f, "10.0.0.2:5201-10.0.0.1:40000"), Some(&f[0]));
        assert_eq!(find_flow(&f, "2"), None);
        let s = segments(&cap, &f[0]);
        assert_eq!(s[1].payload_bytes, 1448);
        assert_eq!(s[2].direction, Direction::Ack);
        assert_eq!((s[2].t_ns, s[2].ack, s[2].packet), (90_000, 2996, 3));
    }

    /// A record cut inside its TCP header names packet 2; a bad IP header
    /// length names its packet too; garbage is neither pcap nor pcapng.
    #[test]
    fn broken_captures_name_the_packet() {
        let good = pkt(1_000, true, 100, 1, 10);
        // Packet 2 captured only 40 bytes: Ethernet + IPv4 + 6 of TCP.
        let mut w = pcap_file::pcap::PcapWriter::new(Vec::new()).unwrap();
        for (i, f) in [
            super::write::frame(&good),
            super::write::frame(&good)[..40].to_vec(),
        ]
        .iter()
        .enumerate()
        {
            let t = std::time::Duration::from_micros(i as u64);
            w.write_packet(&pcap_file::pcap::PcapPacket::new(t, 64, f))
                .unwrap();
        }
        match parse_capture(&w.into_writer()) {
            Err(Fail::Packet(2, m)) => assert!(m.contains("TCP header cut at 6"), "{m}"),
            _ => panic!("expected packet 2 to fail"),
        }
        let mut bad_ihl = pcap(&[good]);
        let ip0 = 24 + 16 + 14;
        bad_ihl[ip0] = 0x43; // IHL 12 bytes
        assert!(
            matches!(parse_capture(&bad_ihl), Err(Fail::Packet(1, m)) if m.contains("IPv4 header length"))
        );
        assert!(
            matches!(parse_capture(b"hello world!"), Err(Fail::File(m)) if m.contains("neither"))
        );
        // A record header promising more than the file holds.
        let mut short = pcap(&[good]);
        short.truncate(short.len() - 5);
        assert!(
            matches!(parse_capture(&short), Err(Fail::Packet(1, m)) if m.contains("truncated"))
        );
    }

    /// SACK option layouts by hand: NOP NOP SACK(l1 r1 [l2 r2]).
    #[test]
    fn dsack_blocks() {
        let opts = |blocks: &[(u32, u32)]| {
            let mut o = vec![1u8, 1, 5, 2 + 8 * blocks.len() as u8];
            for (l, r) in blocks {
                o.extend(l.to_be_bytes());
                o.extend(r.to_be_bytes());
            }
            o
        };
        // Below the ACK: a duplicate.
        assert_eq!(dsack_block(&opts(&[(100, 200)]), 300), Some((100, 200)));
        // Above: ordinary SACK.
        assert_eq!(dsack_block(&opts(&[(400, 500)]), 300), None);
        // Above the ACK but inside the second block: a duplicate.
        assert_eq!(
            dsack_block(&opts(&[(450, 500), (400, 600)]), 300),
            Some((450, 500))
        );
        // Across the sequence wrap: 4294967000 is below 200.
        assert_eq!(
            dsack_block(&opts(&[(4_294_967_000, 100)]), 200),
            Some((4_294_967_000, 100))
        );
        // Timestamps before the SACK, and a length running past the end.
        let mut ts = vec![8u8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        ts.extend(opts(&[(1, 2)]));
        assert_eq!(dsack_block(&ts, 9), Some((1, 2)));
        assert_eq!(dsack_block(&[5, 40, 0, 0], 9), None);
        assert_eq!(dsack_block(&[5], 9), None);
        assert_eq!(dsack_block(&[0, 5, 10], 9), None);
    }

    #[test]
    fn pcapng_resolutions() {
        assert_eq!(ticks_to_ns(1_500_000, 6), Some(1_500_000_000));
        assert_eq!(ticks_to_ns(7, 9), Some(7));
        assert_eq!(ticks_to_ns(1 << 30, 0x80 | 30), Some(1_000_000_000));
        assert_eq!(ticks_to_ns(u128::MAX, 6), None);
    }
}
