//! The kernel's side of the lab: running code inside a network namespace
//! (a thread that `setns`es; sockets it opens stay in that namespace),
//! reading qdisc and interface counters over rtnetlink (no `tc` process
//! per sample: a dump costs tens of microseconds, so counters can be read
//! every millisecond), and setting offloads with the ethtool ioctl
//! (the `ethtool` program is not installed on these machines).
//!
//! Message layouts are Linux UAPI: `linux/netlink.h`, `linux/rtnetlink.h`,
//! `linux/if_link.h` (rtnl_link_stats64), `linux/gen_stats.h`,
//! `linux/ethtool.h`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Runs `f` on a thread inside network namespace `ns` (a name under
/// /run/netns) and returns its result.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> io::Result<T> + Send) -> io::Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            enter_netns(ns)?;
            f()
        })
        .join()
        .map_err(|_| io::Error::other("namespace thread panicked"))?
    })
}

/// Moves the calling thread into namespace `ns` (for good: use a thread
/// of its own).
pub fn enter_netns(ns: &str) -> io::Result<()> {
    let path = format!("/run/netns/{ns}");
    let file =
        std::fs::File::open(&path).map_err(|e| io::Error::new(e.kind(), format!("{path}: {e}")))?;
    // SAFETY: setns on a valid namespace fd only changes this thread's
    // network namespace.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("setns {path}: {e}")));
    }
    Ok(())
}

/// An rtnetlink socket of the namespace the calling thread is in.
pub struct Rtnl {
    fd: OwnedFd,
    seq: u32,
    buf: Vec<u8>,
}

/// One qdisc's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct QdiscStats {
    pub ifindex: i32,
    pub parent: u32,
    pub bytes: u64,
    pub packets: u32,
    pub drops: u32,
    pub backlog_bytes: u32,
    pub overlimits: u32,
}

/// One interface's counters (`rtnl_link_stats64`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkStats {
    pub ifindex: i32,
    pub name: String,
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
}

const RTM_NEWLINK: u16 = 16;
const RTM_GETLINK: u16 = 18;
const RTM_NEWQDISC: u16 = 36;
const RTM_GETQDISC: u16 = 38;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
const IFLA_IFNAME: u16 = 3;
const IFLA_STATS64: u16 = 23;
const TCA_STATS2: u16 = 7;
const TCA_STATS_BASIC: u16 = 1;
const TCA_STATS_QUEUE: u16 = 3;
pub const TC_H_ROOT: u32 = 0xFFFF_FFFF;

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes(b[i..i + 4].try_into().expect("4 bytes"))
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    u64::from_ne_bytes(b[i..i + 8].try_into().expect("8 bytes"))
}

/// Netlink attributes (type, payload) in `b`; stops at a malformed one.
fn attributes(b: &[u8]) -> Vec<(u16, &[u8])> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 4 <= b.len() {
        let len = u16_at(b, i) as usize;
        if len < 4 || i + len > b.len() {
            break;
        }
        out.push((u16_at(b, i + 2) & 0x3fff, &b[i + 4..i + len]));
        i += (len + 3) & !3;
    }
    out
}

impl Rtnl {
    pub fn open() -> io::Result<Rtnl> {
        // SAFETY: plain socket(2); the fd is owned below.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_ROUTE,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh socket we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        tightlink_sys::sockopt::set_recv_timeout(
            fd.as_raw_fd(),
            std::time::Duration::from_secs(1),
        )?;
        Ok(Rtnl {
            fd,
            seq: 1,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Sends a dump request of `kind` with `header` (the family struct)
    /// and returns each reply message's body of type `reply`.
    fn dump(&mut self, kind: u16, header: &[u8], reply: u16) -> io::Result<Vec<Vec<u8>>> {
        self.seq = self.seq.wrapping_add(1);
        let len = 16 + header.len();
        let mut req = Vec::with_capacity(len);
        req.extend_from_slice(&(len as u32).to_ne_bytes());
        req.extend_from_slice(&kind.to_ne_bytes());
        req.extend_from_slice(&(NLM_F_REQUEST | NLM_F_DUMP).to_ne_bytes());
        req.extend_from_slice(&self.seq.to_ne_bytes());
        req.extend_from_slice(&0u32.to_ne_bytes());
        req.extend_from_slice(header);
        // SAFETY: sending an initialised buffer.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), req.as_ptr() as *const _, req.len(), 0) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut out = Vec::new();
        loop {
            // SAFETY: receiving into our own buffer of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    self.buf.as_mut_ptr() as *mut _,
                    self.buf.len(),
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            let b = &self.buf[..n as usize];
            let mut i = 0;
            while i + 16 <= b.len() {
                let mlen = u32_at(b, i) as usize;
                let mtype = u16_at(b, i + 4);
                let mseq = u32_at(b, i + 8);
                if mlen < 16 || i + mlen > b.len() {
                    return Err(io::Error::other("rtnetlink: truncated message"));
                }
                if mseq == self.seq {
                    match mtype {
                        NLMSG_DONE => return Ok(out),
                        NLMSG_ERROR => {
                            let errno = -(u32_at(b, i + 16) as i32);
                            if errno != 0 {
                                return Err(io::Error::from_raw_os_error(errno));
                            }
                        }
                        t if t == reply => out.push(b[i + 16..i + mlen].to_vec()),
                        _ => {}
                    }
                }
                i += (mlen + 3) & !3;
            }
        }
    }

    /// Every qdisc's counters in this namespace.
    pub fn qdiscs(&mut self) -> io::Result<Vec<QdiscStats>> {
        let msgs = self.dump(RTM_GETQDISC, &[0u8; 20], RTM_NEWQDISC)?;
        let mut out = Vec::new();
        for m in msgs {
            if m.len() < 20 {
                continue;
            }
            let mut q = QdiscStats {
                ifindex: u32_at(&m, 4) as i32,
                parent: u32_at(&m, 12),
                ..QdiscStats::default()
            };
            for (t, v) in attributes(&m[20..]) {
                if t != TCA_STATS2 {
                    continue;
                }
                for (t2, v2) in attributes(v) {
                    if t2 == TCA_STATS_BASIC && v2.len() >= 12 {
                        q.bytes = u64_at(v2, 0);
                        q.packets = u32_at(v2, 8);
                    } else if t2 == TCA_STATS_QUEUE && v2.len() >= 20 {
                        q.backlog_bytes = u32_at(v2, 4);
                        q.drops = u32_at(v2, 8);
                        q.overlimits = u32_at(v2, 16);
                    }
                }
            }
            out.push(q);
        }
        Ok(out)
    }

    /// Every interface's counters in this namespace.
    pub fn links(&mut self) -> io::Result<Vec<LinkStats>> {
        let msgs = self.dump(RTM_GETLINK, &[0u8; 16], RTM_NEWLINK)?;
        let mut out = Vec::new();
        for m in msgs {
            if m.len() < 16 {
                continue;
            }
            let mut l = LinkStats {
                ifindex: u32_at(&m, 4) as i32,
                ..LinkStats::default()
            };
            for (t, v) in attributes(&m[16..]) {
                match t {
                    IFLA_IFNAME => {
                        l.name = String::from_utf8_lossy(v.split(|&c| c == 0).next().unwrap_or(v))
                            .into_owned()
                    }
                    IFLA_STATS64 if v.len() >= 32 => {
                        l.rx_packets = u64_at(v, 0);
                        l.tx_packets = u64_at(v, 8);
                        l.rx_bytes = u64_at(v, 16);
                        l.tx_bytes = u64_at(v, 24);
                    }
                    _ => {}
                }
            }
            out.push(l);
        }
        Ok(out)
    }

    pub fn ifindex(&mut self, name: &str) -> io::Result<i32> {
        self.links()?
            .into_iter()
            .find(|l| l.name == name)
            .map(|l| l.ifindex)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}")))
    }

    /// The root qdisc of interface `ifindex`.
    pub fn root_qdisc(&mut self, ifindex: i32) -> io::Result<QdiscStats> {
        self.qdiscs()?
            .into_iter()
            .find(|q| q.ifindex == ifindex && q.parent == TC_H_ROOT)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("no root qdisc on ifindex {ifindex}"),
                )
            })
    }
}

/// Merging offloads the lab sets on every veth (legacy ethtool commands;
/// the kernel maps them onto netdev features).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offload {
    Tso,
    Gso,
    Gro,
}

impl Offload {
    pub const ALL: [Offload; 3] = [Offload::Tso, Offload::Gso, Offload::Gro];

    pub fn name(self) -> &'static str {
        match self {
            Offload::Tso => "tso",
            Offload::Gso => "gso",
            Offload::Gro => "gro",
        }
    }

    /// (get, set) ethtool commands.
    fn commands(self) -> (u32, u32) {
        use tightlink_sys::ethtool::*;
        match self {
            Offload::Tso => (GTSO, STSO),
            Offload::Gso => (GGSO, SGSO),
            Offload::Gro => (GGRO, SGRO),
        }
    }
}

/// Sets an offload on `dev` (in the calling thread's namespace) and reads
/// it back.
pub fn set_offload(dev: &str, o: Offload, on: bool) -> io::Result<bool> {
    let (get, set) = o.commands();
    tightlink_sys::ethtool::command(dev, set, on as u32)?;
    Ok(tightlink_sys::ethtool::command(dev, get, 0)? != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_walked_with_padding_and_stop_at_garbage() {
        // len 5 ("abc\0" + 1 pad byte of alignment), then len 8, then junk.
        let mut b = vec![];
        b.extend_from_slice(&5u16.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        b.extend_from_slice(b"a\0\0\0");
        b.extend_from_slice(&8u16.to_ne_bytes());
        b.extend_from_slice(&(2u16 | 0x8000).to_ne_bytes());
        b.extend_from_slice(&7u32.to_ne_bytes());
        b.extend_from_slice(&200u16.to_ne_bytes());
        b.extend_from_slice(&1u16.to_ne_bytes());
        let a = attributes(&b);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0], (1, &b"a"[..]));
        assert_eq!(a[1].0, 2, "nested flag masked");
        assert_eq!(u32_at(a[1].1, 0), 7);
    }

    /// The loopback interface of this namespace is listed with counters
    /// (no privileges needed to dump links).
    #[test]
    fn links_of_this_namespace_include_loopback() {
        let mut r = Rtnl::open().unwrap();
        let links = r.links().unwrap();
        assert!(
            links.iter().any(|l| l.name == "lo" && l.ifindex == 1),
            "{links:?}"
        );
        // Qdisc dumps parse too (whatever qdiscs exist here).
        r.qdiscs().unwrap();
    }
}
