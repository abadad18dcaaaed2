//! Ethernet II + IPv4 + UDP headers, for the backends that send and
//! receive whole frames (AF_PACKET and AF_XDP; \[CLOUD\] section III:
//! "UDP, IP and MAC headers are calculated and filled in advance").
//!
//! The sender fills a 42-byte header once per train ([`Udp4Header::emit`])
//! and only the TWAMP timestamp changes per packet, so the UDP checksum is
//! sent as zero ("no checksum", allowed over IPv4 by RFC 768). The
//! receiver side ([`Udp4View`]) reads a frame from its IP header on, with
//! any IP options, and refuses fragments and anything not UDP.

use std::net::{Ipv4Addr, SocketAddrV4};

/// Ethernet + IPv4 (no options) + UDP header bytes.
pub const HEADER_LEN: usize = 14 + 20 + 8;
const ETHERTYPE_IPV4: u16 = 0x0800;
const PROTO_UDP: u8 = 17;

/// What the header of every frame in a train says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp4Header {
    pub dst_mac: [u8; 6],
    pub src_mac: [u8; 6],
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub ttl: u8,
    /// The IPv4 identification field (DF is set, so it only tells frames
    /// apart in a capture).
    pub ident: u16,
}

/// The Internet checksum (RFC 1071) of `bytes`.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum = 0u32;
    let mut chunks = bytes.chunks_exact(2);
    for c in &mut chunks {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    if let [last] = chunks.remainder() {
        sum += (*last as u32) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

impl Udp4Header {
    /// Writes the 42 header bytes for a UDP payload of `payload_len` bytes
    /// into `frame[..HEADER_LEN]`. Panics only if `frame` is shorter than
    /// [`HEADER_LEN`] or the payload cannot fit an IPv4 packet (callers size
    /// frames from the path MTU).
    pub fn emit(&self, frame: &mut [u8], payload_len: usize) {
        assert!(payload_len <= 65_535 - 28, "UDP payload too long for IPv4");
        let f = &mut frame[..HEADER_LEN];
        f[0..6].copy_from_slice(&self.dst_mac);
        f[6..12].copy_from_slice(&self.src_mac);
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip = &mut f[14..34];
        ip[0] = 0x45; // version 4, 5 words
        ip[1] = 0; // DSCP/ECN
        ip[2..4].copy_from_slice(&((20 + 8 + payload_len) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&self.ident.to_be_bytes());
        ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
        ip[8] = self.ttl;
        ip[9] = PROTO_UDP;
        ip[10..12].copy_from_slice(&[0, 0]);
        ip[12..16].copy_from_slice(&self.src.ip().octets());
        ip[16..20].copy_from_slice(&self.dst.ip().octets());
        let c = internet_checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let udp = &mut f[34..42];
        udp[0..2].copy_from_slice(&self.src.port().to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst.port().to_be_bytes());
        udp[4..6].copy_from_slice(&((8 + payload_len) as u16).to_be_bytes());
        udp[6..8].copy_from_slice(&[0, 0]); // no checksum (RFC 768)
    }
}

/// Why a frame handed to [`Udp4View::parse`] is not a usable datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Udp4Error {
    #[error("shorter than its IPv4 and UDP headers")]
    Truncated,
    #[error("not IPv4")]
    NotIpv4,
    #[error("not UDP")]
    NotUdp,
    #[error("an IPv4 fragment")]
    Fragment,
    #[error("IPv4 header checksum wrong")]
    BadChecksum,
    #[error("lengths in the headers disagree with the frame")]
    BadLength,
}

/// A received IPv4 UDP datagram, read from its IP header on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Udp4View<'a> {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    /// The UDP payload as far as it was captured.
    pub payload: &'a [u8],
    /// The payload's real length (from the UDP header), which may exceed
    /// what was captured.
    pub payload_len: usize,
}

impl<'a> Udp4View<'a> {
    /// Parses `ip` (captured bytes from the IPv4 header on); `wire_len`
    /// is the packet's real length from the IP header on, of which `ip` may
    /// hold only a snapshot.
    pub fn parse(ip: &'a [u8], wire_len: usize) -> Result<Self, Udp4Error> {
        if ip.len() < 20 {
            return Err(Udp4Error::Truncated);
        }
        if ip[0] >> 4 != 4 {
            return Err(Udp4Error::NotIpv4);
        }
        let ihl = (ip[0] & 0x0f) as usize * 4;
        if ihl < 20 || ip.len() < ihl + 8 {
            return Err(Udp4Error::Truncated);
        }
        if ip[9] != PROTO_UDP {
            return Err(Udp4Error::NotUdp);
        }
        let frag = u16::from_be_bytes([ip[6], ip[7]]);
        if frag & 0x3fff != 0 {
            return Err(Udp4Error::Fragment);
        }
        if internet_checksum(&ip[..ihl]) != 0 {
            return Err(Udp4Error::BadChecksum);
        }
        let total = u16::from_be_bytes([ip[2], ip[3]]) as usize;
        let udp = &ip[ihl..];
        let udp_len = u16::from_be_bytes([udp[4], udp[5]]) as usize;
        if total > wire_len || udp_len < 8 || ihl + udp_len > total {
            return Err(Udp4Error::BadLength);
        }
        let addr = |o: usize, p: usize| {
            SocketAddrV4::new(
                Ipv4Addr::new(ip[o], ip[o + 1], ip[o + 2], ip[o + 3]),
                u16::from_be_bytes([udp[p], udp[p + 1]]),
            )
        };
        let payload_len = udp_len - 8;
        let captured = (ip.len() - ihl - 8).min(payload_len);
        Ok(Udp4View {
            src: addr(12, 0),
            dst: addr(16, 2),
            payload: &udp[8..8 + captured],
            payload_len,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Udp4Header {
        Udp4Header {
            dst_mac: [2, 0, 0, 0, 0, 2],
            src_mac: [2, 0, 0, 0, 0, 1],
            src: "10.0.0.1:40000".parse().unwrap(),
            dst: "10.0.0.2:7448".parse().unwrap(),
            ttl: 64,
            ident: 0x1c46,
        }
    }

    #[test]
    fn checksum_of_a_worked_example() {
        // The IPv4 header worked by hand in many texts (Wikipedia's "IPv4
        // header checksum" example): 45 00 00 73 00 00 40 00 40 11 ....
        // c0 a8 00 01 c0 a8 00 c7 sums to checksum b861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(internet_checksum(&h), 0xb861);
        // Odd length pads with a zero byte.
        assert_eq!(internet_checksum(&[0x01]), !0x0100);
    }

    #[test]
    fn emitted_header_has_the_fields_and_a_valid_checksum() {
        let mut f = vec![0u8; HEADER_LEN + 100];
        header().emit(&mut f, 100);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        assert_eq!(u16::from_be_bytes([f[16], f[17]]), 128); // 20 + 8 + 100
        assert_eq!(f[14 + 8], 64);
        assert_eq!(internet_checksum(&f[14..34]), 0);
        assert_eq!(u16::from_be_bytes([f[38], f[39]]), 108);
        let v = Udp4View::parse(&f[14..], f.len() - 14).unwrap();
        assert_eq!(v.src, header().src);
        assert_eq!(v.dst, header().dst);
        assert_eq!(v.payload_len, 100);
        assert_eq!(v.payload.len(), 100);
    }

    #[test]
    fn a_snapshot_keeps_the_real_length() {
        let mut f = vec![0u8; HEADER_LEN + 1000];
        header().emit(&mut f, 1000);
        let v = Udp4View::parse(&f[14..14 + 28 + 64], 1028).unwrap();
        assert_eq!(v.payload.len(), 64);
        assert_eq!(v.payload_len, 1000);
    }

    #[test]
    fn bad_frames_say_why() {
        let mut f = vec![0u8; HEADER_LEN + 10];
        header().emit(&mut f, 10);
        let ip = |f: &[u8]| Udp4View::parse(&f[14..], f.len() - 14).map(|_| ());
        assert_eq!(Udp4View::parse(&f[14..30], 16), Err(Udp4Error::Truncated));
        let mut g = f.clone();
        g[14 + 9] = 6;
        assert_eq!(ip(&g), Err(Udp4Error::NotUdp));
        let mut g = f.clone();
        g[14] = 0x65;
        assert_eq!(ip(&g), Err(Udp4Error::NotIpv4));
        let mut g = f.clone();
        g[14 + 6] = 0x20; // more fragments
        assert_eq!(ip(&g), Err(Udp4Error::Fragment));
        let mut g = f.clone();
        g[14 + 12] ^= 1;
        assert_eq!(ip(&g), Err(Udp4Error::BadChecksum));
        let mut g = f.clone();
        g[38..40].copy_from_slice(&200u16.to_be_bytes());
        assert_eq!(ip(&g), Err(Udp4Error::BadLength));
        // A frame shorter than its IP header says.
        assert_eq!(
            Udp4View::parse(&f[14..], f.len() - 20).map(|_| ()),
            Err(Udp4Error::BadLength)
        );
    }
}
