//! TTL-limited UDP probes and their ICMP errors, for per-hop capacity
//! (pathchar's variable packet size, \[HOST\] section 4.1): the
//! [`HopChannel`] on real packets.
//!
//! No raw socket and no CAP_NET_RAW: an ordinary UDP socket with
//! IP_RECVERR gets every ICMP error its datagrams caused on its error
//! queue (`MSG_ERRQUEUE`), with the answering router's address
//! (SO_EE_OFFENDER), the ICMP type and code, the start of our own payload
//! (to match the probe), and with SO_TIMESTAMPNS the kernel's receive time
//! of the ICMP packet. The probe's send time is the user-space
//! CLOCK_REALTIME just before `sendmmsg` (the same clock as the kernel
//! stamp): it precedes the kernel's transmit by about a microsecond,
//! which the minimum over repeats takes as a constant.
//!
//! A probe and its head leave in one `sendmmsg`, each message with its own
//! TTL (an IP_TTL control message): the head with TTL 64 to the same
//! port (the destination answers it port-unreachable; those replies are
//! recognised by their payload and ignored), the probe with the TTL asked.
//! DF is set (IP_PMTUDISC_PROBE) so that no probe is fragmented; a
//! "fragmentation needed" reply is an error naming the size and the MTU.
//!
//! Routers rate-limit ICMP errors (Linux: `net.ipv4.icmp_ratelimit`,
//! 1000 ms per destination after a burst of 6, and a global
//! `icmp_msgs_per_sec`): missing replies are counted, and `gap_ns`
//! spaces probes out.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tightlink_sys::sockopt;

use tightlink_core::channel::{ChannelError, HopChannel, HopReply};

use tightlink_sys::clock::realtime_ns;

const MAGIC: &[u8; 8] = b"TLHOPS01";
const KIND_HEAD: u8 = 1;
const KIND_PROBE: u8 = 2;
/// IPv4 + UDP headers: a probe of `size` IP bytes carries `size - 28`.
const IP_UDP_HEADERS: u32 = 28;
const SO_EE_ORIGIN_ICMP: u8 = 2;
const ICMP_DEST_UNREACH: u8 = 3;
const ICMP_PORT_UNREACH: u8 = 3;
const ICMP_FRAG_NEEDED: u8 = 4;
const ICMP_TIME_EXCEEDED: u8 = 11;
/// TTL of head packets: far enough to cross any path.
const HEAD_TTL: i32 = 64;

/// What one error-queue message said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct IcmpError {
    from: Option<Ipv4Addr>,
    icmp_type: u8,
    icmp_code: u8,
    /// ee_info: the next-hop MTU for "fragmentation needed".
    info: u32,
    kernel_ns: Option<i64>,
    seq: Option<u32>,
    kind: Option<u8>,
}

/// Counters of what the error queue held besides our probes' replies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TtlCounters {
    pub head_replies: u64,
    /// Replies to an earlier probe (after its timeout).
    pub late_replies: u64,
    /// Error-queue messages that were not ICMP or not ours.
    pub foreign: u64,
    pub no_kernel_stamp: u64,
}

pub struct UdpTtlChannel {
    sock: UdpSocket,
    dst: SocketAddrV4,
    mtu: u32,
    timeout: Duration,
    gap: Duration,
    seq: u32,
    start_ns: i64,
    pub counters: TtlCounters,
}

fn io_err(what: &str, e: io::Error) -> ChannelError {
    ChannelError::from_io(what, &e)
}

impl UdpTtlChannel {
    /// A probe socket toward `dst` (UDP port, traceroute's 33434 by
    /// default). Fails with a message naming the option the kernel
    /// refused.
    pub fn open(dst: SocketAddrV4, timeout: Duration, gap: Duration) -> Result<Self, ChannelError> {
        let sock = UdpSocket::bind("0.0.0.0:0").map_err(|e| io_err("UDP socket", e))?;
        // Every read is a poll of what is there; waiting is done by poll().
        sock.set_nonblocking(true)
            .map_err(|e| io_err("UDP socket", e))?;
        let fd = sock.as_raw_fd();
        sockopt::set_int(fd, libc::SOL_IP, libc::IP_RECVERR, 1)
            .map_err(|e| io_err("IP_RECVERR (ICMP errors on a UDP socket)", e))?;
        sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)
            .map_err(|e| io_err("SO_TIMESTAMPNS", e))?;
        sockopt::set_int(
            fd,
            libc::SOL_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_PROBE,
        )
        .map_err(|e| io_err("IP_MTU_DISCOVER (DF on probes)", e))?;
        // Many head packets' replies may queue: room for them.
        let _ = sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
        // The first link's MTU, from a connected twin socket's route.
        let probe = UdpSocket::bind("0.0.0.0:0").map_err(|e| io_err("UDP socket", e))?;
        probe
            .connect(dst)
            .map_err(|e| io_err(&format!("no route to {dst}"), e))?;
        let mtu = match sockopt::get_int(probe.as_raw_fd(), libc::SOL_IP, libc::IP_MTU) {
            Ok(m) if m >= 576 => m,
            _ => 1500,
        };
        let mut ch = UdpTtlChannel {
            sock,
            dst,
            mtu: mtu as u32,
            timeout,
            gap,
            seq: 0,
            start_ns: realtime_ns(),
            counters: TtlCounters::default(),
        };
        ch.drain(None);
        Ok(ch)
    }

    fn payload(&self, size: u32, kind: u8) -> Vec<u8> {
        let mut p = vec![0u8; (size - IP_UDP_HEADERS) as usize];
        p[..8].copy_from_slice(MAGIC);
        p[8..12].copy_from_slice(&self.seq.to_be_bytes());
        p[12] = kind;
        p
    }

    /// Sends the head and the probe in one `sendmmsg`.
    fn send(&self, ttl: u8, size: u32, heads: u32, head_size: u32) -> io::Result<i64> {
        let head = self.payload(head_size, KIND_HEAD);
        let probe = self.payload(size, KIND_PROBE);
        let n = heads as usize + 1;
        let mut addr: libc::sockaddr_in = unsafe { zeroed() };
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_port = self.dst.port().to_be();
        addr.sin_addr.s_addr = u32::from(*self.dst.ip()).to_be();
        // SAFETY: CMSG_SPACE is a pure size computation.
        let space = unsafe { libc::CMSG_SPACE(size_of::<i32>() as u32) } as usize;
        let mut controls = vec![0u8; space * n];
        let mut iovs: Vec<libc::iovec> = Vec::with_capacity(n);
        for i in 0..n {
            let buf = if i + 1 == n { &probe } else { &head };
            iovs.push(libc::iovec {
                iov_base: buf.as_ptr() as *mut libc::c_void,
                iov_len: buf.len(),
            });
        }
        // SAFETY: zeroed mmsghdr is valid; every pointer below points into
        // vectors that outlive the sendmmsg call.
        let mut msgs: Vec<libc::mmsghdr> = (0..n).map(|_| unsafe { zeroed() }).collect();
        for i in 0..n {
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = &mut addr as *mut _ as *mut libc::c_void;
            h.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = controls[i * space..].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = space as _;
            let ttl_value: i32 = if i + 1 == n { ttl as i32 } else { HEAD_TTL };
            unsafe {
                let c = libc::CMSG_FIRSTHDR(h);
                (*c).cmsg_level = libc::SOL_IP;
                (*c).cmsg_type = libc::IP_TTL;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<i32>() as u32) as _;
                std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut i32, ttl_value);
            }
        }
        self.clear_pending_error();
        let t0 = realtime_ns();
        let mut done = 0;
        let mut retried = 0;
        while done < n {
            // SAFETY: msgs[done..] are valid headers (see above).
            let r = unsafe {
                libc::sendmmsg(
                    self.sock.as_raw_fd(),
                    msgs[done..].as_mut_ptr(),
                    (n - done) as u32,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                // With IP_RECVERR every ICMP error also becomes the
                // socket's pending error, which the next send returns
                // (ECONNREFUSED after a head's port-unreachable); the
                // failed send consumed it, so sending again goes on.
                if retried < 16
                    && matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNREFUSED)
                            | Some(libc::EHOSTUNREACH)
                            | Some(libc::ENETUNREACH)
                    )
                {
                    retried += 1;
                    continue;
                }
                // The socket is non-blocking: a full send buffer waits.
                if e.kind() == io::ErrorKind::WouldBlock {
                    sockopt::wait_fd(self.sock.as_raw_fd(), libc::POLLOUT, 10)?;
                    continue;
                }
                return Err(e);
            }
            done += r as usize;
        }
        Ok(t0)
    }

    /// Reads (and so clears) the socket's pending error.
    fn clear_pending_error(&self) {
        let _ = sockopt::get_int(self.sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_ERROR);
    }

    /// Reads one error-queue message, if any.
    fn read_error(&mut self) -> Option<IcmpError> {
        let mut data = [0u8; 64];
        let mut control = [0u8; 512];
        let mut name: libc::sockaddr_in = unsafe { zeroed() };
        let mut iov = libc::iovec {
            iov_base: data.as_mut_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: a zeroed msghdr whose pointers are set to live buffers.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = &mut name as *mut _ as *mut libc::c_void;
        msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = control.len() as _;
        // SAFETY: msg is valid for the call.
        let n = unsafe {
            libc::recvmsg(
                self.sock.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            return None;
        }
        let n = n as usize;
        let mut e = IcmpError {
            from: None,
            icmp_type: 0,
            icmp_code: 0,
            info: 0,
            kernel_ns: None,
            seq: None,
            kind: None,
        };
        let mut origin = 0u8;
        // SAFETY: the control buffer was filled by recvmsg above.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                let (level, ty) = ((*c).cmsg_level, (*c).cmsg_type);
                if level == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPNS {
                    let ts: libc::timespec =
                        std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                    e.kernel_ns = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
                } else if level == libc::SOL_IP && ty == libc::IP_RECVERR {
                    let ee_ptr = libc::CMSG_DATA(c) as *const libc::sock_extended_err;
                    let ee: libc::sock_extended_err = std::ptr::read_unaligned(ee_ptr);
                    origin = ee.ee_origin;
                    e.icmp_type = ee.ee_type;
                    e.icmp_code = ee.ee_code;
                    e.info = ee.ee_info;
                    // SO_EE_OFFENDER: the sockaddr right after the struct.
                    let off: libc::sockaddr_in =
                        std::ptr::read_unaligned(ee_ptr.add(1) as *const libc::sockaddr_in);
                    if off.sin_family == libc::AF_INET as libc::sa_family_t {
                        e.from = Some(Ipv4Addr::from(u32::from_be(off.sin_addr.s_addr)));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        if origin == SO_EE_ORIGIN_ICMP && n >= 13 && &data[..8] == MAGIC {
            e.seq = Some(u32::from_be_bytes([data[8], data[9], data[10], data[11]]));
            e.kind = Some(data[12]);
        } else {
            self.counters.foreign += 1;
        }
        Some(e)
    }

    /// Empties the error queue (and any datagram that came back), counting
    /// what was there; returns the reply to probe `want` if it was there.
    fn drain(&mut self, want: Option<u32>) -> Option<IcmpError> {
        let mut found = None;
        // Bounded: a flood of ICMP errors toward this port must not keep
        // the prober here past its timeout.
        let mut budget = 4096;
        while let Some(e) = self.read_error().filter(|_| budget > 0) {
            budget -= 1;
            match (e.seq, e.kind) {
                (Some(s), Some(KIND_PROBE)) if Some(s) == want && found.is_none() => {
                    found = Some(e)
                }
                (Some(_), Some(KIND_HEAD)) => self.counters.head_replies += 1,
                (Some(_), _) => self.counters.late_replies += 1,
                _ => {}
            }
        }
        // Datagrams a far end may send back: not ours to read.
        let mut buf = [0u8; 64];
        while budget > 0 && self.sock.recv(&mut buf).is_ok() {
            budget -= 1;
            self.counters.foreign += 1;
        }
        found
    }
}

impl HopChannel for UdpTtlChannel {
    fn probe_hop(
        &mut self,
        ttl: u8,
        size_bytes: u32,
        head_packets: u32,
        head_bytes: u32,
    ) -> Result<HopReply, ChannelError> {
        let mtu = self.mtu;
        for (what, s) in [("probe", size_bytes), ("head", head_bytes)] {
            if !(64..=mtu).contains(&s) {
                return Err(ChannelError::BadRequest(format!(
                    "{what} size {s} B is outside 64..={mtu} B (the route's MTU)"
                )));
            }
        }
        self.drain(None);
        self.seq = self.seq.wrapping_add(1);
        let want = self.seq;
        let t0 = self
            .send(ttl, size_bytes, head_packets, head_bytes)
            .map_err(|e| io_err(&format!("sending to {}", self.dst), e))?;
        let deadline = t0 + self.timeout.as_nanos() as i64;
        let mut reply = None;
        loop {
            if let Some(e) = self.drain(Some(want)) {
                reply = Some(e);
                break;
            }
            let now = realtime_ns();
            if now >= deadline {
                break;
            }
            let wait_ms = ((deadline - now) / 1_000_000).clamp(1, 100) as i32;
            // POLLERR (an ICMP error queued) is reported unasked; a failed
            // poll only ends this wait early.
            let _ = sockopt::wait_fd(self.sock.as_raw_fd(), libc::POLLIN, wait_ms);
        }
        let out = match reply {
            None => HopReply {
                rtt_ns: None,
                responder: None,
                destination: false,
            },
            Some(e) => {
                if e.icmp_type == ICMP_DEST_UNREACH && e.icmp_code == ICMP_FRAG_NEEDED {
                    return Err(ChannelError::BadRequest(format!(
                        "a {size_bytes} B probe needs fragmenting at {} (next-hop MTU {}): use smaller --sizes",
                        e.from.map_or("?".into(), |a| a.to_string()),
                        e.info
                    )));
                }
                if e.icmp_type != ICMP_TIME_EXCEEDED
                    && !(e.icmp_type == ICMP_DEST_UNREACH && e.icmp_code == ICMP_PORT_UNREACH)
                {
                    return Err(ChannelError::Refused(format!(
                        "ICMP type {} code {} from {} (not time-exceeded or port-unreachable): the path refuses the probes",
                        e.icmp_type,
                        e.icmp_code,
                        e.from.map_or("?".into(), |a| a.to_string())
                    )));
                }
                let at = match e.kernel_ns {
                    Some(t) => t,
                    None => {
                        self.counters.no_kernel_stamp += 1;
                        realtime_ns()
                    }
                };
                HopReply {
                    rtt_ns: Some(at - t0),
                    responder: e.from.map(|a| a.to_string()),
                    destination: e.icmp_type == ICMP_DEST_UNREACH,
                }
            }
        };
        if !self.gap.is_zero() {
            std::thread::sleep(self.gap);
        }
        Ok(out)
    }

    fn mtu_bytes(&self) -> u32 {
        self.mtu
    }

    fn elapsed_ns(&self) -> i64 {
        realtime_ns() - self.start_ns
    }

    fn describe(&self) -> String {
        format!("UDP to {} (TTL-limited, ICMP errors)", self.dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loopback has no router: a probe with any TTL reaches the local
    /// destination, whose closed port answers port-unreachable; the reply
    /// comes from 127.0.0.1, with a kernel stamp, in well under a second.
    #[test]
    fn a_closed_port_on_loopback_answers_port_unreachable() {
        // A port nobody listens on: bind one, learn it, close it.
        let port = UdpSocket::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dst = SocketAddrV4::new(Ipv4Addr::LOCALHOST, port);
        let mut ch = UdpTtlChannel::open(dst, Duration::from_secs(1), Duration::ZERO).unwrap();
        assert!(ch.mtu_bytes() >= 1500);
        let r = ch.probe_hop(1, 600, 2, 1500).unwrap();
        assert!(r.destination, "{r:?}");
        assert_eq!(r.responder.as_deref(), Some("127.0.0.1"));
        let rtt = r.rtt_ns.unwrap();
        assert!(rtt > 0 && rtt < 1_000_000_000, "{rtt}");
        assert_eq!(ch.counters.no_kernel_stamp, 0);
        let e = ch.probe_hop(1, 70_000, 0, 1500).unwrap_err();
        assert!(e.to_string().contains("70000 B"), "{e}");
    }
}
