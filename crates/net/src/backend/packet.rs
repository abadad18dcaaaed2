//! The `packet` backend: AF_PACKET sockets (\[CLOUD\] section III,
//! "LibPcap": headers built by the application, frames injected at the
//! Ethernet layer, past the IP stack).
//!
//! - [`PacketTx`] writes whole frames with `sendmsg` (the 42 header bytes
//!   and the payload as two iovecs, so nothing is copied in user space).
//!   Frames still pass the interface's qdisc, so a shaper on the sender's
//!   own link shapes them, and the kernel's software transmit stamp (the
//!   error queue, as for UDP) is taken after it.
//! - [`PacketRing`] receives through a TPACKET_V3 ring (measured: it loses
//!   nothing at these rates; its stamps equal SO_TIMESTAMPNS's). A
//!   classic BPF filter keeps only IPv4 UDP to the probe port and cuts
//!   each frame to its first 162 bytes, so the ring holds headers only.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{SocketAddr, SocketAddrV4};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use tightlink_sys::sockopt;

use tightlink_wire::udp4::{Udp4Header, Udp4View, HEADER_LEN};

use super::route::NextHop;
use crate::stamps::{drain_errqueue, Received, TxStamp, BATCH, HEADER_COPY, TX_STAMP_FLAGS};
use crate::transmit::{Backend, ProbeSource, Transmit};

use tightlink_sys::packet::{
    bind as bind_ll, socket as socket_packet, ETH_P_IP, PACKET_IGNORE_OUTGOING, PACKET_RX_RING,
    PACKET_VERSION, TPACKET_V3,
};

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;

/// Frames to one peer through an AF_PACKET socket.
pub struct PacketTx {
    fd: OwnedFd,
    header: Udp4Header,
    /// Frames handed to the kernel (the OPT_ID counter).
    sent: u32,
}

impl PacketTx {
    /// A sender from `src` (the bound probe socket's address: its port
    /// goes into the headers) to `dst` through `hop`.
    pub fn open(src: SocketAddrV4, dst: SocketAddrV4, hop: &NextHop) -> io::Result<Self> {
        // Protocol 0: this socket sends only, it is handed no frames.
        let fd = socket_packet(0)?;
        bind_ll(fd.as_raw_fd(), hop.ifindex, 0)?;
        sockopt::set_int(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            TX_STAMP_FLAGS as i32,
        )?;
        // Room for the error queue's stamps (~0.8 KB each; udp.rs).
        let rcv = 16 << 20;
        if sockopt::set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcv).is_err() {
            sockopt::set_int(fd.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, rcv)?;
        }
        // SAFETY: fcntl on an owned fd.
        unsafe {
            let fl = libc::fcntl(fd.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Ok(PacketTx {
            fd,
            header: hop.header(src, dst),
            sent: 0,
        })
    }
}

impl Transmit for PacketTx {
    fn backend(&self) -> Backend {
        Backend::Packet
    }

    fn send_now(&mut self, payload: &[u8]) -> io::Result<Option<u32>> {
        let mut head = [0u8; HEADER_LEN];
        self.header.ident = self.sent as u16;
        self.header.emit(&mut head, payload.len());
        let mut iov = [
            libc::iovec {
                iov_base: head.as_mut_ptr() as *mut libc::c_void,
                iov_len: HEADER_LEN,
            },
            libc::iovec {
                iov_base: payload.as_ptr() as *mut libc::c_void,
                iov_len: payload.len(),
            },
        ];
        loop {
            // SAFETY: a zeroed msghdr pointing at two live iovecs; the
            // socket is bound, so no address is needed.
            let r = unsafe {
                let mut msg: libc::msghdr = zeroed();
                msg.msg_iov = iov.as_mut_ptr();
                msg.msg_iovlen = 2;
                libc::sendmsg(self.fd.as_raw_fd(), &msg, 0)
            };
            if r >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The socket's send buffer is full: the interface queue
                // is, so the own link is the bottleneck; wait.
                Some(libc::EAGAIN) => {
                    sockopt::wait_fd(self.fd.as_raw_fd(), libc::POLLOUT, 10)?;
                }
                // The qdisc dropped it (its queue is full). Counted by
                // the receiver as a loss, like a drop anywhere else; the
                // stamp id was used.
                Some(libc::ENOBUFS) => break,
                _ => return Err(e),
            }
        }
        let id = self.sent;
        self.sent = self.sent.wrapping_add(1);
        Ok(Some(id))
    }

    fn drain_tx_stamps(&mut self, out: &mut Vec<TxStamp>) -> io::Result<()> {
        drain_errqueue(self.fd.as_raw_fd(), out)
    }
}

/// Bytes of each frame the filter keeps: Ethernet, IP with options (up to
/// 60), UDP and the [`HEADER_COPY`] bytes of payload: 14 + 60 + 8 + 128.
const SNAP_BYTES: u32 = 14 + 60 + 8 + HEADER_COPY as u32;
/// 16 blocks of 256 KB: at ~200 bytes a frame, 20 000 frames in flight.
const BLOCK_BYTES: u32 = 1 << 18;
const BLOCKS: u32 = 16;
/// A block is handed over at most this long after its first frame.
const RETIRE_MS: u32 = 1;

/// Classic BPF for "IPv4, UDP, not a fragment, destination port `port`",
/// keeping [`SNAP_BYTES`] of each frame (the shape `tcpdump -dd` prints).
fn udp_port_filter(port: u16) -> [libc::sock_filter; 11] {
    let op = |code: u16, jt: u8, jf: u8, k: u32| libc::sock_filter { code, jt, jf, k };
    [
        op(0x28, 0, 0, 12),              // ldh [12]         ethertype
        op(0x15, 0, 8, ETH_P_IP as u32), // jeq #0x800       else drop
        op(0x30, 0, 0, 23),              // ldb [23]         protocol
        op(0x15, 0, 6, 17),              // jeq #17 (UDP)    else drop
        op(0x28, 0, 0, 20),              // ldh [20]         flags+fragment
        op(0x45, 4, 0, 0x1fff),          // jset #0x1fff     fragment: drop
        op(0xb1, 0, 0, 14),              // ldxb 4*([14]&0xf) IP header length
        op(0x48, 0, 0, 16),              // ldh [x+16]       UDP dst port
        op(0x15, 0, 1, port as u32),     // jeq #port        else drop
        op(0x06, 0, 0, SNAP_BYTES),      // ret #162
        op(0x06, 0, 0, 0),               // ret #0
    ]
}

/// tpacket_req3 (linux/if_packet.h).
#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

/// Offsets into struct tpacket_block_desc and struct tpacket3_hdr.
const BLOCK_STATUS: usize = 8;
const BLOCK_NUM_PKTS: usize = 12;
const BLOCK_FIRST_PKT: usize = 16;
const PKT_NEXT: usize = 0;
const PKT_SEC: usize = 4;
const PKT_NSEC: usize = 8;
const PKT_SNAPLEN: usize = 12;
const PKT_LEN: usize = 16;
const PKT_MAC: usize = 24;
const PKT_NET: usize = 26;

/// A TPACKET_V3 receive ring for the probe port of one interface.
pub struct PacketRing {
    fd: OwnedFd,
    map: *mut u8,
    /// Block being read and how far into it.
    block: u32,
    next_pkt: u32,
    next_off: usize,
    /// Frames the ring held that did not parse as IPv4 UDP (the filter
    /// should let none through; counted, never silently dropped).
    pub malformed: u64,
}

// The mapping is owned by this struct alone and only touched through
// &mut self.
unsafe impl Send for PacketRing {}

impl PacketRing {
    /// A ring on interface `ifindex` for UDP to `local`'s port.
    pub fn open(ifindex: u32, local: SocketAddr) -> io::Result<Self> {
        let fd = socket_packet(0)?;
        let raw = fd.as_raw_fd();
        let filter = udp_port_filter(local.port());
        let prog = libc::sock_fprog {
            len: filter.len() as u16,
            filter: filter.as_ptr() as *mut libc::sock_filter,
        };
        // SAFETY: a valid program that outlives the call (the kernel
        // copies it).
        let r = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_SOCKET,
                libc::SO_ATTACH_FILTER,
                &prog as *const libc::sock_fprog as *const libc::c_void,
                size_of::<libc::sock_fprog>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        sockopt::set_int(raw, libc::SOL_PACKET, PACKET_VERSION, TPACKET_V3)?;
        // Our own outgoing frames (lo shows both directions) are not probes
        // to us.
        sockopt::set_int(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
        let req = TpacketReq3 {
            block_size: BLOCK_BYTES,
            block_nr: BLOCKS,
            frame_size: 2048,
            frame_nr: BLOCK_BYTES / 2048 * BLOCKS,
            retire_blk_tov: RETIRE_MS,
            sizeof_priv: 0,
            feature_req_word: 0,
        };
        // SAFETY: a tpacket_req3 of the size stated.
        let r = unsafe {
            libc::setsockopt(
                raw,
                libc::SOL_PACKET,
                PACKET_RX_RING,
                &req as *const TpacketReq3 as *const libc::c_void,
                size_of::<TpacketReq3>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = (BLOCK_BYTES * BLOCKS) as usize;
        // SAFETY: mapping the ring the kernel just allocated for this fd.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                raw,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ring = PacketRing {
            fd,
            map: map as *mut u8,
            block: 0,
            next_pkt: 0,
            next_off: 0,
            malformed: 0,
        };
        // Bound last: with the filter in place before any frame arrives.
        bind_ll(raw, ifindex, ETH_P_IP)?;
        Ok(ring)
    }

    /// Frames the kernel dropped because the ring was full, since the
    /// last call (PACKET_STATISTICS resets on read).
    pub fn dropped(&self) -> io::Result<u64> {
        Ok(tightlink_sys::packet::statistics(self.fd.as_raw_fd())?.1)
    }

    fn block_ptr(&self) -> *mut u8 {
        // SAFETY: block < BLOCKS, inside the mapping.
        unsafe { self.map.add((self.block * BLOCK_BYTES) as usize) }
    }

    fn read_u32(p: *const u8, off: usize) -> u32 {
        // SAFETY: callers pass offsets inside a block header or frame
        // header in the mapping.
        unsafe { std::ptr::read_unaligned(p.add(off) as *const u32) }
    }

    fn read_u16(p: *const u8, off: usize) -> u16 {
        // SAFETY: as read_u32.
        unsafe { std::ptr::read_unaligned(p.add(off) as *const u16) }
    }

    fn status(&self) -> u32 {
        // SAFETY: the block header's status word, shared with the kernel:
        // read it with acquire ordering before the frames it guards.
        unsafe {
            let a = &*(self.block_ptr().add(BLOCK_STATUS) as *const std::sync::atomic::AtomicU32);
            a.load(std::sync::atomic::Ordering::Acquire)
        }
    }

    fn release_block(&mut self) {
        // SAFETY: as `status`; release so our reads finish first.
        unsafe {
            let a = &*(self.block_ptr().add(BLOCK_STATUS) as *const std::sync::atomic::AtomicU32);
            a.store(TP_STATUS_KERNEL, std::sync::atomic::Ordering::Release);
        }
        self.block = (self.block + 1) % BLOCKS;
        self.next_pkt = 0;
        self.next_off = 0;
    }
}

impl Drop for PacketRing {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `open`, unmapped once.
        unsafe {
            libc::munmap(
                self.map as *mut libc::c_void,
                (BLOCK_BYTES * BLOCKS) as usize,
            )
        };
    }
}

impl ProbeSource for PacketRing {
    fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn recv_batch(
        &mut self,
        headers: &mut [[u8; HEADER_COPY]; BATCH],
        out: &mut [Option<Received>; BATCH],
    ) -> io::Result<usize> {
        let mut n = 0;
        while n < BATCH && self.status() & TP_STATUS_USER != 0 {
            let b = self.block_ptr();
            let num = Self::read_u32(b, BLOCK_NUM_PKTS);
            if self.next_pkt >= num {
                self.release_block();
                continue;
            }
            if self.next_pkt == 0 {
                self.next_off = Self::read_u32(b, BLOCK_FIRST_PKT) as usize;
            }
            if self.next_off + 32 > BLOCK_BYTES as usize {
                // A frame header past the block: the kernel's bookkeeping
                // and ours disagree; count and drop the rest of the block.
                self.malformed += (num - self.next_pkt) as u64;
                self.release_block();
                continue;
            }
            let start = self.next_off;
            // SAFETY: start lies inside this block (checked above).
            let p = unsafe { b.add(start) };
            let snap = Self::read_u32(p, PKT_SNAPLEN) as usize;
            let wire = Self::read_u32(p, PKT_LEN) as usize;
            let mac = Self::read_u16(p, PKT_MAC) as usize;
            let net = Self::read_u16(p, PKT_NET) as usize;
            let kernel_ns = Self::read_u32(p, PKT_SEC) as i64 * 1_000_000_000
                + Self::read_u32(p, PKT_NSEC) as i64;
            self.next_pkt += 1;
            self.next_off += Self::read_u32(p, PKT_NEXT) as usize;
            if net < mac || start + mac + snap > BLOCK_BYTES as usize {
                self.malformed += 1;
                continue;
            }
            // SAFETY: [mac, mac + snap) of this frame lies inside the block.
            let frame = unsafe { std::slice::from_raw_parts(p.add(mac), snap) };
            let ip_off = net - mac;
            match frame
                .get(ip_off..)
                .ok_or(())
                .and_then(|ip| Udp4View::parse(ip, wire.saturating_sub(ip_off)).map_err(|_| ()))
            {
                Ok(v) => {
                    let k = v.payload.len().min(HEADER_COPY);
                    headers[n][..k].copy_from_slice(&v.payload[..k]);
                    out[n] = Some(Received {
                        len: v.payload_len,
                        from: SocketAddr::V4(v.src),
                        kernel_ns: Some(kernel_ns),
                    });
                    n += 1;
                }
                Err(()) => self.malformed += 1,
            }
            if self.next_pkt >= num {
                self.release_block();
            }
        }
        Ok(n)
    }
}

/// Whether this process may open packet sockets (CAP_NET_RAW).
pub fn available() -> io::Result<()> {
    socket_packet(0).map(|_| ())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::net::{Ipv4Addr, UdpSocket};

    use crate::backend::route::next_hop;
    use tightlink_sys::clock;

    #[test]
    fn filter_jumps_land_on_the_returns() {
        let f = udp_port_filter(7448);
        let drop = f.len() - 1;
        for (i, ins) in f.iter().enumerate() {
            if ins.code & 0x07 == 0x05 {
                // Conditional jumps count from the next instruction.
                for t in [ins.jt, ins.jf] {
                    let to = i + 1 + t as usize;
                    assert!(to <= drop, "instruction {i} jumps past the end");
                }
            }
        }
        assert_eq!((f[drop].code, f[drop].k), (0x06, 0));
        assert_eq!((f[1].code, 1 + 1 + f[1].jf as usize), (0x15, drop));
        assert_eq!(1 + 3 + f[3].jf as usize, drop);
        assert_eq!(1 + 5 + f[5].jt as usize, drop);
        assert_eq!(1 + 8 + f[8].jf as usize, drop);
        assert_eq!(f[8].k, 7448);
    }

    fn v4(a: SocketAddr) -> SocketAddrV4 {
        match a {
            SocketAddr::V4(a) => a,
            SocketAddr::V6(_) => unreachable!(),
        }
    }

    /// Reads `want` datagrams off a ring within a second.
    pub(crate) fn read_ring(
        ring: &mut PacketRing,
        want: usize,
    ) -> Vec<(Received, [u8; HEADER_COPY])> {
        let mut headers = [[0u8; HEADER_COPY]; BATCH];
        let mut got = [None; BATCH];
        let mut have = Vec::new();
        let until = clock::monotonic_ns() + 1_000_000_000;
        while have.len() < want && clock::monotonic_ns() < until {
            sockopt::wait_fd(ring.fd(), libc::POLLIN, 10).unwrap();
            let n = ring.recv_batch(&mut headers, &mut got).unwrap();
            for k in 0..n {
                have.push((got[k].take().unwrap(), headers[k]));
            }
        }
        have
    }

    /// Frames PacketTx sends over lo come back in through lo, where a ring
    /// sees each once with its kernel stamp, and the transmit stamps come
    /// back by id. (IP input then drops them: a frame from 127.0.0.1 that
    /// enters at layer 2 is a martian unless route_localnet is set, so
    /// delivery to a socket is tested across namespaces, in the CLI's
    /// netns tests.)
    #[test]
    fn frames_over_loopback_reach_the_ring_with_stamps() {
        if let Err(e) = available() {
            eprintln!("skipped: {e}");
            return;
        }
        let dst_sock = UdpSocket::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let dst = v4(dst_sock.local_addr().unwrap());
        let src = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_002);
        let hop = next_hop(*dst.ip(), &mut || {}).unwrap();
        let mut ring = PacketRing::open(hop.ifindex, SocketAddr::V4(dst)).unwrap();
        let mut tx = PacketTx::open(src, dst, &hop).unwrap();
        let mut seq = 0;
        let (_, pk) = crate::packets::build(9, 0, &[0, 1, 2], &[100, 200, 1000], &mut seq);
        for p in &pk {
            tx.send_now(p).unwrap();
        }
        let have = read_ring(&mut ring, 3);
        assert_eq!(have.len(), 3, "the ring saw each frame once");
        for ((r, h), p) in have.iter().zip(&pk) {
            assert_eq!(r.len, p.len());
            assert_eq!(r.from, SocketAddr::V4(src));
            let k = p.len().min(HEADER_COPY);
            assert_eq!(&h[..k], &p[..k]);
            assert!(r.kernel_ns.unwrap() > 1_600_000_000_000_000_000);
        }
        assert_eq!(ring.malformed, 0);
        assert_eq!(ring.dropped().unwrap(), 0);
        let mut stamps = Vec::new();
        let until = clock::monotonic_ns() + 100_000_000;
        while stamps.len() < 3 && clock::monotonic_ns() < until {
            tx.drain_tx_stamps(&mut stamps).unwrap();
        }
        let ids: Vec<u32> = stamps.iter().map(|s| s.id).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        // Stamps are taken in order, before the ring's receive stamps.
        assert!(stamps[0].kernel_ns <= stamps[2].kernel_ns);
        assert!(stamps[0].kernel_ns <= have[0].0.kernel_ns.unwrap());
    }
}
