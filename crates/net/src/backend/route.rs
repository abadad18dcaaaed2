//! The next hop of an IPv4 destination, for backends that write their own
//! Ethernet header (\[CLOUD\] section V: "the Ethernet header of the
//! receiver is not commonly known to the user application ... perhaps
//! with some connection to the ARP functionality"). Reads the kernel's
//! main routing table and neighbour cache from /proc/thread-self/net and
//! interface addresses by ioctl, so all of it is the calling thread's
//! network namespace (/proc/net and /sys follow the process's, or the
//! mount's); policy routing (ip rule) is not followed.

use std::net::{Ipv4Addr, SocketAddrV4};

use std::time::Duration;
use tightlink_wire::udp4::Udp4Header;

use tightlink_sys::clock;

/// Where frames for a destination go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NextHop {
    pub ifname: String,
    pub ifindex: u32,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    /// The gateway, or `None` when the destination is on the link.
    pub gateway: Option<Ipv4Addr>,
}

impl NextHop {
    /// The headers of frames from `src` to `dst` over this hop (TTL 64,
    /// identification counted by the sender).
    pub fn header(&self, src: SocketAddrV4, dst: SocketAddrV4) -> Udp4Header {
        Udp4Header {
            dst_mac: self.dst_mac,
            src_mac: self.src_mac,
            src,
            dst,
            ttl: 64,
            ident: 0,
        }
    }
}

/// One row of /proc/net/route.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RouteRow {
    iface: String,
    dest: Ipv4Addr,
    gateway: Ipv4Addr,
    mask: Ipv4Addr,
    metric: u32,
}

/// /proc/net/route prints each address as the hex of a network-order u32
/// read natively (byte-reversed on little-endian hosts): its native bytes
/// are the address.
fn proc_addr(hex: &str) -> Option<Ipv4Addr> {
    let v = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(v.to_ne_bytes()))
}

fn parse_route_table(text: &str) -> Vec<RouteRow> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() < 8 {
                return None;
            }
            let flags = u32::from_str_radix(f[3], 16).ok()?;
            // RTF_UP
            if flags & 1 == 0 {
                return None;
            }
            Some(RouteRow {
                iface: f[0].to_string(),
                dest: proc_addr(f[1])?,
                gateway: proc_addr(f[2])?,
                metric: f[6].parse().ok()?,
                mask: proc_addr(f[7])?,
            })
        })
        .collect()
}

/// Longest prefix, then lowest metric.
fn best_route(rows: &[RouteRow], dst: Ipv4Addr) -> Option<&RouteRow> {
    rows.iter()
        .filter(|r| u32::from(dst) & u32::from(r.mask) == u32::from(r.dest))
        .max_by_key(|r| (u32::from(r.mask).count_ones(), std::cmp::Reverse(r.metric)))
}

/// The complete neighbour entry of `ip` on `iface` in /proc/net/arp text.
fn arp_lookup(text: &str, ip: Ipv4Addr, iface: &str) -> Option<[u8; 6]> {
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 6 || f[0].parse::<Ipv4Addr>().ok()? != ip || f[5] != iface {
            return None;
        }
        // ATF_COM: the entry is complete.
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        if flags & 0x2 == 0 {
            return None;
        }
        parse_mac(f[3])
    })
}

fn parse_mac(s: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = s.trim().split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

/// The interface's hardware address (SIOCGIFHWADDR), if it has one.
fn hw_addr(ifname: &str) -> Option<[u8; 6]> {
    let sock = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    // SAFETY: a zeroed ifreq with the name copied in (bounded to 15 bytes
    // and a NUL); the ioctl fills ifru_hwaddr.
    unsafe {
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, s) in ifr.ifr_name.iter_mut().zip(ifname.bytes().take(15)) {
            *d = s as libc::c_char;
        }
        if libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&sock),
            libc::SIOCGIFHWADDR as _,
            &mut ifr,
        ) != 0
        {
            return None;
        }
        let d = ifr.ifr_ifru.ifru_hwaddr.sa_data;
        Some([d[0], d[1], d[2], d[3], d[4], d[5]].map(|b| b as u8))
    }
}

fn ifindex(ifname: &str) -> Result<u32, NextHopError> {
    tightlink_sys::netif::index(ifname).map_err(|source| NextHopError::Interface {
        ifname: ifname.to_string(),
        source,
    })
}

/// Why the frames' next hop toward an address is not known.
#[derive(Debug, thiserror::Error)]
pub enum NextHopError {
    #[error("{file}: {source}")]
    Read {
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("no route to {0}")]
    NoRoute(Ipv4Addr),
    #[error("no Ethernet address for {0}")]
    NoEthernetAddress(String),
    #[error("interface {ifname}: {source}")]
    Interface {
        ifname: String,
        #[source]
        source: std::io::Error,
    },
    #[error("no neighbour entry for {neighbour} on {ifname} after 1 s (is it up?)")]
    Unresolved { neighbour: Ipv4Addr, ifname: String },
}

impl From<NextHopError> for std::io::Error {
    fn from(e: NextHopError) -> Self {
        std::io::Error::other(e.to_string())
    }
}

/// The interface, MACs and gateway for frames to `dst`. `poke` sends one
/// ordinary packet toward `dst` (through the IP stack) so that the kernel
/// resolves the neighbour; it is called when the neighbour cache has no
/// complete entry, and the cache is read again for up to a second.
pub fn next_hop(dst: Ipv4Addr, poke: &mut dyn FnMut()) -> Result<NextHop, NextHopError> {
    let local = tightlink_sys::netif::interface_of(dst.into()).is_some();
    if dst.is_loopback() || local {
        // The kernel delivers to its own addresses over lo, whose
        // "Ethernet" addresses are all zero.
        return Ok(NextHop {
            ifname: "lo".into(),
            ifindex: ifindex("lo")?,
            src_mac: [0; 6],
            dst_mac: [0; 6],
            gateway: None,
        });
    }
    let read = |file: &'static str| {
        std::fs::read_to_string(file).map_err(|source| NextHopError::Read { file, source })
    };
    let table = read("/proc/thread-self/net/route")?;
    let rows = parse_route_table(&table);
    let r = best_route(&rows, dst).ok_or(NextHopError::NoRoute(dst))?;
    let gateway = (!r.gateway.is_unspecified()).then_some(r.gateway);
    let neighbour = gateway.unwrap_or(dst);
    let ifname = r.iface.clone();
    let src_mac =
        hw_addr(&ifname).ok_or_else(|| NextHopError::NoEthernetAddress(ifname.clone()))?;
    let deadline = clock::monotonic_ns() + 1_000_000_000;
    let mut poked = false;
    loop {
        let arp = read("/proc/thread-self/net/arp")?;
        if let Some(dst_mac) = arp_lookup(&arp, neighbour, &ifname) {
            return Ok(NextHop {
                ifindex: ifindex(&ifname)?,
                ifname,
                src_mac,
                dst_mac,
                gateway,
            });
        }
        if clock::monotonic_ns() > deadline {
            return Err(NextHopError::Unresolved { neighbour, ifname });
        }
        if !poked {
            poke();
            poked = true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Shaped like a namespace's /proc/net/route: a default route via
    // 10.77.1.1 and two on-link networks (addresses byte-reversed).
    const ROUTES: &str =
        "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
veth0\t00000000\t01014D0A\t0003\t0\t0\t0\t00000000\t0\t0\t0
veth0\t00014D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
veth1\t00024D0A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
dead0\t00034D0A\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    const ARP: &str =
        "IP address       HW type     Flags       HW address            Mask     Device
10.77.1.1        0x1         0x2         aa:bb:cc:00:11:22     *        veth0
10.77.2.9        0x1         0x0         00:00:00:00:00:00     *        veth1
10.77.2.5        0x1         0x2         02:00:00:00:00:05     *        veth1
";

    #[test]
    #[cfg(target_endian = "little")]
    fn proc_addresses_read_byte_reversed() {
        assert_eq!(proc_addr("01014D0A"), Some(Ipv4Addr::new(10, 77, 1, 1)));
        assert_eq!(proc_addr("00FFFFFF"), Some(Ipv4Addr::new(255, 255, 255, 0)));
        assert_eq!(proc_addr("zz"), None);
    }

    #[test]
    #[cfg(target_endian = "little")]
    fn longest_prefix_wins_and_down_routes_are_skipped() {
        let rows = parse_route_table(ROUTES);
        assert_eq!(rows.len(), 3, "the route without RTF_UP is left out");
        let r = best_route(&rows, Ipv4Addr::new(10, 77, 2, 5)).unwrap();
        assert_eq!(
            (r.iface.as_str(), r.gateway),
            ("veth1", Ipv4Addr::UNSPECIFIED)
        );
        let r = best_route(&rows, Ipv4Addr::new(10, 77, 3, 5)).unwrap();
        assert_eq!(
            (r.iface.as_str(), r.gateway),
            ("veth0", Ipv4Addr::new(10, 77, 1, 1))
        );
        assert!(best_route(&rows[1..], Ipv4Addr::new(192, 0, 2, 1)).is_none());
    }

    #[test]
    fn only_complete_neighbours_on_the_right_interface() {
        let a = Ipv4Addr::new(10, 77, 1, 1);
        assert_eq!(
            arp_lookup(ARP, a, "veth0"),
            Some([0xaa, 0xbb, 0xcc, 0, 0x11, 0x22])
        );
        assert_eq!(arp_lookup(ARP, a, "veth1"), None);
        assert_eq!(arp_lookup(ARP, Ipv4Addr::new(10, 77, 2, 9), "veth1"), None);
        assert_eq!(
            arp_lookup(ARP, Ipv4Addr::new(10, 77, 2, 5), "veth1"),
            Some([2, 0, 0, 0, 0, 5])
        );
    }

    #[test]
    fn macs_parse_strictly() {
        assert_eq!(parse_mac("02:00:00:00:00:0a\n"), Some([2, 0, 0, 0, 0, 10]));
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:00:01"), None);
    }

    #[test]
    fn loopback_needs_no_neighbour() {
        let h = next_hop(Ipv4Addr::LOCALHOST, &mut || panic!("no poke on lo")).unwrap();
        assert_eq!(h.ifname, "lo");
        assert_eq!(h.dst_mac, [0; 6]);
    }
}
