//! A UDP probe socket with kernel software timestamps both ways
//! (SO_TIMESTAMPING; \[CLOUD\] "nativeUDP", \[HOST\] section 5):
//!
//! - receive: `recvmmsg` in batches, each datagram with its kernel receive
//!   time (CLOCK_REALTIME, taken when the packet reaches the socket layer).
//!   Only the probe header is copied; `MSG_TRUNC` gives the real
//!   length. Measured on loopback and veth: 96-99.5 % of such gaps within
//!   1 us of the sender's; a user-space clock after `recv` is off by up
//!   to 33 us.
//! - transmit: the kernel's software transmit time (taken in the driver's
//!   xmit, after the qdisc) from the error queue, matched to packets by
//!   SOF_TIMESTAMPING_OPT_ID. It matches the receiver's gaps to about
//!   0.1 us where the user-space send time is off by up to 1 us. The error
//!   queue is charged about 0.8 KB per stamp to the receive buffer, so the
//!   paced sender drains it whenever it has slack, or stamps are lost.

use std::io;

use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use tightlink_sys::sockopt;

use crate::stamps::{
    cmsg_stamp, drain_errqueue, recv_mmsg, Received, TxStamp, BATCH, HEADER_COPY,
    SOF_TIMESTAMPING_RX_SOFTWARE, SOF_TIMESTAMPING_SOFTWARE, TX_STAMP_FLAGS,
};
use crate::transmit::{Backend, ProbeSource, Transmit};

pub struct ProbeSocket {
    sock: UdpSocket,
    /// Datagrams sent since transmit stamping was switched on (OPT_ID
    /// numbers them from 0).
    sent: u32,
    rcvbuf_bytes: usize,
}

impl ProbeSocket {
    /// Binds, turns on software receive and transmit timestamps, and asks
    /// for a receive buffer of `rcvbuf_bytes` (forced past rmem_max when
    /// we may, else the most the kernel grants).
    pub fn bind(addr: SocketAddr, rcvbuf_bytes: i32) -> io::Result<Self> {
        let sock = UdpSocket::bind(addr)?;
        let fd = sock.as_raw_fd();
        let flags = SOF_TIMESTAMPING_RX_SOFTWARE | TX_STAMP_FLAGS;
        sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPING, flags as i32)?;
        if sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf_bytes).is_err() {
            sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf_bytes)?;
        }
        // The kernel reports twice what it reserves for data.
        let rcvbuf_bytes = sockopt::get_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF)? as usize;
        sock.set_nonblocking(true)?;
        Ok(ProbeSocket {
            sock,
            sent: 0,
            rcvbuf_bytes,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Turns transmit stamps off (receive stamps stay on): for a socket
    /// that sends much and reads none of its transmit stamps, which would
    /// otherwise fill its error queue.
    pub fn stop_tx_stamps(&self) -> io::Result<()> {
        let flags = SOF_TIMESTAMPING_RX_SOFTWARE | SOF_TIMESTAMPING_SOFTWARE;
        sockopt::set_int(
            self.fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            flags as i32,
        )
    }

    /// The receive buffer the kernel granted (bytes, as SO_RCVBUF says).
    pub fn rcvbuf_bytes(&self) -> usize {
        self.rcvbuf_bytes
    }

    /// Datagrams the kernel dropped at this socket since it opened (its
    /// receive buffer was full: this host read too slowly).
    pub fn socket_drops(&self) -> io::Result<u32> {
        sockopt::socket_drops(self.fd())
    }

    /// Whether UDP_GRO is on for this socket (it merges datagrams and
    /// their timestamps; we never turn it on, but say so if it is).
    pub fn udp_gro(&self) -> bool {
        sockopt::get_int(self.fd(), libc::SOL_UDP, libc::UDP_GRO).is_ok_and(|v| v != 0)
    }

    /// Sends one datagram; returns the OPT_ID number its transmit stamp
    /// will carry. A full socket buffer is waited out (the sender's own
    /// queue is full: its link is the bottleneck), never dropped.
    pub fn send_to(&mut self, buf: &[u8], to: SocketAddr) -> io::Result<u32> {
        loop {
            match self.sock.send_to(buf, to) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    sockopt::wait_fd(self.fd(), libc::POLLOUT, 10)?;
                }
                Err(e) => return Err(e),
            }
        }
        let id = self.sent;
        self.sent = self.sent.wrapping_add(1);
        Ok(id)
    }

    /// Receives what is queued, up to 32 datagrams, without waiting;
    /// `headers` gets the first [`HEADER_COPY`] bytes of each. Returns how
    /// many arrived (0 when none was queued).
    pub fn recv_batch(
        &self,
        headers: &mut [[u8; HEADER_COPY]; BATCH],
        out: &mut [Option<Received>; BATCH],
    ) -> io::Result<usize> {
        let mut bufs = headers.each_mut().map(|h| &mut h[..]);
        recv_mmsg(self.fd(), &mut bufs, |k, len, from, msg| {
            // SAFETY: `msg` was just filled by recvmmsg; its control
            // buffer is alive for the call.
            let (kernel_ns, _) = unsafe { cmsg_stamp(msg) };
            out[k] = from.map(|from| Received {
                len,
                from,
                kernel_ns,
            });
        })
    }

    /// Takes every transmit stamp waiting in the error queue, without
    /// waiting.
    pub fn drain_tx_stamps(&self, out: &mut Vec<TxStamp>) -> io::Result<()> {
        drain_errqueue(self.fd(), out)
    }
}

/// A warning where the kernel granted a socket less receive buffer than
/// `asked` (no CAP_NET_ADMIN to force it past `net.core.rmem_max`):
/// bursts that outrun this host's reading are then dropped sooner.
/// `reported` is what SO_RCVBUF says, twice what the kernel reserves for
/// data; `who` starts the sentence ("probe sockets get").
pub fn rcvbuf_shortfall(who: &str, asked: i32, reported: usize) -> Option<String> {
    let asked = asked.max(0) as usize;
    let granted = reported / 2;
    (granted < asked).then(|| {
        let rmem_max = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok());
        format!(
            "{who} a receive buffer of {:.1} MB, not the {:.1} MB asked (without CAP_NET_ADMIN the kernel caps it at net.core.rmem_max{}): it holds {:.1} ms of probes at 10 Gbit/s, and what arrives beyond it is dropped; raise it with `sysctl -w net.core.rmem_max={asked}`",
            granted as f64 / 1e6,
            asked as f64 / 1e6,
            rmem_max.map_or(String::new(), |m| format!(" = {m}")),
            granted as f64 * 8.0 / 10e9 * 1e3,
        )
    })
}

/// The UDP backend's transmitter: the probe socket and the peer.
pub struct UdpTx<'a> {
    pub sock: &'a mut ProbeSocket,
    pub to: SocketAddr,
}

impl Transmit for UdpTx<'_> {
    fn backend(&self) -> Backend {
        Backend::Udp
    }
    fn send_now(&mut self, payload: &[u8]) -> io::Result<Option<u32>> {
        self.sock.send_to(payload, self.to).map(Some)
    }
    fn drain_tx_stamps(&mut self, out: &mut Vec<TxStamp>) -> io::Result<()> {
        self.sock.drain_tx_stamps(out)
    }
}

impl ProbeSource for &ProbeSocket {
    fn fd(&self) -> RawFd {
        ProbeSocket::fd(self)
    }
    fn recv_batch(
        &mut self,
        headers: &mut [[u8; HEADER_COPY]; BATCH],
        out: &mut [Option<Received>; BATCH],
    ) -> io::Result<usize> {
        ProbeSocket::recv_batch(self, headers, out)
    }
}
/// The probe payload of a session with `peer` and the frame it makes at
/// the Ethernet layer (IP packet + 14 B), bytes: the largest the route's
/// MTU carries (1500 when unknown, 9000 at most), at most `max_payload`.
/// The client sends such probes; a server sending in reverse measures
/// its pacing with them.
pub(crate) fn probe_payload_and_frame(
    sock: &ProbeSocket,
    peer: SocketAddr,
    max_payload: u32,
) -> (u32, u32) {
    let overhead = if peer.is_ipv4() { 42 } else { 62 };
    let mtu = path_mtu(sock, peer).unwrap_or(1500).min(9000);
    let payload = mtu.saturating_sub(overhead - 14).min(max_payload);
    (payload, payload + overhead)
}

/// IP_MTU of a connected UDP socket (the path MTU the kernel knows).
pub(crate) fn path_mtu(sock: &ProbeSocket, to: SocketAddr) -> Option<u32> {
    // Connect a throw-away socket of the same family: connecting the probe
    // socket itself would filter what it receives.
    let probe = std::net::UdpSocket::bind(SocketAddr::new(sock.local_addr().ok()?.ip(), 0)).ok()?;
    probe.connect(to).ok()?;
    connected_mtu(&probe)
}

/// IP_MTU of a UDP socket already connected.
pub(crate) fn connected_mtu(sock: &std::net::UdpSocket) -> Option<u32> {
    let (level, name) = if sock.peer_addr().ok()?.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    let v = sockopt::get_int(sock.as_raw_fd(), level, name).ok()?;
    (v > 0).then_some(v as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 16 MB asked, SO_RCVBUF reports 8 388 608 (4 194 304 for data): a
    /// warning with both sizes and 4 194 304 x 8 / 10 Gbit/s = 3.4 ms;
    /// reported 32 000 000 (all 16 MB): none.
    #[test]
    fn rcvbuf_shortfall_by_hand() {
        let w = rcvbuf_shortfall("probe sockets get", 16_000_000, 8_388_608).unwrap();
        assert!(
            w.starts_with("probe sockets get a receive buffer of 4.2 MB, not the 16.0 MB asked"),
            "{w}"
        );
        assert!(w.contains("it holds 3.4 ms of probes at 10 Gbit/s"), "{w}");
        assert!(w.ends_with("`sysctl -w net.core.rmem_max=16000000`"), "{w}");
        assert_eq!(rcvbuf_shortfall("x", 16_000_000, 32_000_000), None);
    }
}
