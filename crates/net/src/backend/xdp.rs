//! The `xdp` backend: an AF_XDP socket's transmit ring (\[CLOUD\]
//! section III: the kernel-bypass rows, Netmap and DPDK: frames built in
//! pre-allocated shared memory, handed to the driver without the IP stack).
//!
//! Copy mode (`XDP_COPY`), the only mode veth and virtio offer here: each
//! `sendto` kick makes the kernel copy the ring's frames into skbs and
//! hand them straight to the driver (`dev_direct_xmit`), skipping the
//! qdisc. So no shaper on the sender's own link applies, and there is no
//! per-packet kernel transmit stamp: departures carry the schedule and
//! the user-space send time only. Sending needs no XDP program.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddrV4;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

use tightlink_wire::udp4::{Udp4Header, HEADER_LEN};

use super::route::NextHop;
use crate::stamps::TxStamp;
use crate::transmit::{Backend, Transmit};

/// UMEM chunk: one frame each; a page, the largest aligned chunk.
const CHUNK: u32 = 4096;
const FRAMES: u32 = 1024;
const RING: u32 = 1024;

/// Largest UDP payload this backend carries (a frame fits one chunk).
pub const MAX_PAYLOAD: usize = CHUNK as usize - HEADER_LEN;

/// One mapped ring: producer, consumer, descriptors.
struct Ring {
    map: *mut u8,
    map_len: usize,
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    desc: *mut u8,
}

impl Ring {
    /// Maps the ring at `pgoff` given its offsets.
    fn map(
        fd: i32,
        off: &libc::xdp_ring_offset,
        entries: u32,
        entry: usize,
        pgoff: i64,
    ) -> io::Result<Ring> {
        let map_len = off.desc as usize + entries as usize * entry;
        // SAFETY: mapping a ring the kernel created for this socket.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd,
                pgoff,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let m = map as *mut u8;
        // SAFETY: the offsets the kernel gave lie inside the mapping.
        unsafe {
            Ok(Ring {
                map: m,
                map_len,
                producer: m.add(off.producer as usize) as *const AtomicU32,
                consumer: m.add(off.consumer as usize) as *const AtomicU32,
                desc: m.add(off.desc as usize),
            })
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: inside the mapping, which lives as long as self.
        unsafe { &*self.producer }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as producer.
        unsafe { &*self.consumer }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once.
        unsafe { libc::munmap(self.map as *mut libc::c_void, self.map_len) };
    }
}

/// Frames to one peer through an AF_XDP socket's transmit ring.
pub struct XdpTx {
    // Field order is drop order: rings before the socket, the UMEM last.
    tx: Ring,
    completion: Ring,
    _fill: Ring,
    fd: OwnedFd,
    umem: *mut u8,
    header: Udp4Header,
    /// Frames queued and frames the kernel has completed.
    queued: u32,
    completed: u32,
}

// The mappings are owned by this struct alone and used through &mut self.
unsafe impl Send for XdpTx {}

fn sockopt<T>(fd: i32, name: i32, v: &T) -> io::Result<()> {
    // SAFETY: a pointer to a live T and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            v as *const T as *const libc::c_void,
            size_of::<T>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The fill, completion and TX rings of AF_XDP socket `raw`, sized,
/// then mapped: (tx, completion, fill).
fn map_rings(raw: i32) -> io::Result<(Ring, Ring, Ring)> {
    sockopt(raw, libc::XDP_UMEM_FILL_RING, &RING)?;
    sockopt(raw, libc::XDP_UMEM_COMPLETION_RING, &RING)?;
    sockopt(raw, libc::XDP_TX_RING, &RING)?;
    // SAFETY: zeroed POD out-buffer and its size.
    let mut off: libc::xdp_mmap_offsets = unsafe { zeroed() };
    let mut len = size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: as above.
    let r = unsafe {
        libc::getsockopt(
            raw,
            libc::SOL_XDP,
            libc::XDP_MMAP_OFFSETS,
            &mut off as *mut _ as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    let fill = Ring::map(raw, &off.fr, RING, 8, libc::XDP_UMEM_PGOFF_FILL_RING as i64)?;
    let completion = Ring::map(
        raw,
        &off.cr,
        RING,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING as i64,
    )?;
    let tx = Ring::map(
        raw,
        &off.tx,
        RING,
        size_of::<libc::xdp_desc>(),
        libc::XDP_PGOFF_TX_RING,
    )?;
    Ok((tx, completion, fill))
}

/// Binds AF_XDP socket `raw` to `hop`'s interface, queue 0, in copy
/// mode. A socket closed just before on the same queue lets go of it in
/// a kernel work queue: EBUSY for a few ms, retried for half a second.
fn bind_queue0(raw: i32, hop: &NextHop) -> io::Result<()> {
    // SAFETY: a zeroed sockaddr_xdp with family, flags, ifindex.
    let sa = unsafe {
        let mut sa: libc::sockaddr_xdp = zeroed();
        sa.sxdp_family = libc::AF_XDP as u16;
        sa.sxdp_flags = libc::XDP_COPY;
        sa.sxdp_ifindex = hop.ifindex;
        sa.sxdp_queue_id = 0;
        sa
    };
    let until = tightlink_sys::clock::monotonic_ns() + 500_000_000;
    loop {
        // SAFETY: a valid sockaddr_xdp and its size.
        let r = unsafe {
            libc::bind(
                raw,
                &sa as *const libc::sockaddr_xdp as *const libc::sockaddr,
                size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EBUSY) && tightlink_sys::clock::monotonic_ns() < until {
            std::thread::sleep(std::time::Duration::from_millis(2));
            continue;
        }
        return Err(io::Error::new(
            e.kind(),
            format!("bind AF_XDP to {} queue 0 (copy mode): {e}", hop.ifname),
        ));
    }
}

impl XdpTx {
    /// A sender from `src` to `dst` through `hop`, on the interface's
    /// queue 0 in copy mode.
    pub fn open(src: SocketAddrV4, dst: SocketAddrV4, hop: &NextHop) -> io::Result<Self> {
        // SAFETY: plain socket(2); owned at once.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(
                e.kind(),
                format!("AF_XDP socket (needs CAP_NET_RAW and a kernel with XDP sockets): {e}"),
            ));
        }
        // SAFETY: a fresh fd nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let umem_len = (CHUNK * FRAMES) as usize;
        // SAFETY: an anonymous private mapping.
        let umem = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let umem = umem as *mut u8;
        let unmap_on_err = |e: io::Error| {
            // SAFETY: the mapping made above, not yet owned by anything.
            unsafe { libc::munmap(umem as *mut libc::c_void, umem_len) };
            e
        };
        // SAFETY: zeroed POD.
        let mut reg: libc::xdp_umem_reg = unsafe { zeroed() };
        reg.addr = umem as u64;
        reg.len = umem_len as u64;
        reg.chunk_size = CHUNK;
        let setup = || -> io::Result<(Ring, Ring, Ring)> {
            sockopt(raw, libc::XDP_UMEM_REG, &reg)?;
            let rings = map_rings(raw)?;
            bind_queue0(raw, hop)?;
            Ok(rings)
        };
        let (tx, completion, fill) = setup().map_err(unmap_on_err)?;
        Ok(XdpTx {
            tx,
            completion,
            _fill: fill,
            fd,
            umem,
            header: hop.header(src, dst),
            queued: 0,
            completed: 0,
        })
    }

    /// Takes what the kernel has finished with off the completion ring.
    fn reap(&mut self) {
        let prod = self.completion.producer().load(Ordering::Acquire);
        let cons = self.completion.consumer().load(Ordering::Relaxed);
        let done = prod.wrapping_sub(cons);
        if done > 0 {
            self.completed = self.completed.wrapping_add(done);
            self.completion.consumer().store(prod, Ordering::Release);
        }
    }

    fn kick(&self) -> io::Result<()> {
        loop {
            // SAFETY: sendto with no data is AF_XDP's "transmit now".
            let r = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    std::ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    std::ptr::null(),
                    0,
                )
            };
            if r >= 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The driver's queue is busy or full: try again at once
                // (the frame is still in the ring).
                Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                    std::hint::spin_loop()
                }
                _ => return Err(e),
            }
        }
    }
}

impl Drop for XdpTx {
    fn drop(&mut self) {
        // SAFETY: the UMEM mapping made in `open`. The socket (and with it
        // the kernel's pin on these pages) is closed after this runs, which
        // is fine: munmap only drops our mapping, the kernel holds its own
        // page references until the socket goes.
        unsafe { libc::munmap(self.umem as *mut libc::c_void, (CHUNK * FRAMES) as usize) };
    }
}

impl Transmit for XdpTx {
    fn backend(&self) -> Backend {
        Backend::Xdp
    }

    fn send_now(&mut self, payload: &[u8]) -> io::Result<Option<u32>> {
        if payload.len() > MAX_PAYLOAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the xdp backend carries UDP payloads up to {MAX_PAYLOAD} bytes (one {CHUNK}-byte UMEM chunk), {} asked",
                    payload.len()
                ),
            ));
        }
        // Every frame in flight holds a chunk and a ring slot.
        self.reap();
        while self.queued.wrapping_sub(self.completed) >= RING.min(FRAMES) {
            self.kick()?;
            self.reap();
        }
        let frame = self.queued % FRAMES;
        let addr = (frame * CHUNK) as usize;
        self.header.ident = self.queued as u16;
        let len = HEADER_LEN + payload.len();
        // SAFETY: the chunk [addr, addr + len) lies in the UMEM (len <=
        // CHUNK) and the kernel is done with it (reaped above).
        unsafe {
            let chunk = std::slice::from_raw_parts_mut(self.umem.add(addr), len);
            self.header.emit(chunk, payload.len());
            chunk[HEADER_LEN..].copy_from_slice(payload);
        }
        let prod = self.tx.producer().load(Ordering::Relaxed);
        let desc = libc::xdp_desc {
            addr: addr as u64,
            len: len as u32,
            options: 0,
        };
        // SAFETY: slot prod % RING of the descriptor array; it is free
        // because fewer than RING frames are in flight.
        unsafe {
            let slot = self
                .tx
                .desc
                .add((prod % RING) as usize * size_of::<libc::xdp_desc>())
                as *mut libc::xdp_desc;
            std::ptr::write_unaligned(slot, desc);
        }
        self.tx
            .producer()
            .store(prod.wrapping_add(1), Ordering::Release);
        self.queued = self.queued.wrapping_add(1);
        self.kick()?;
        Ok(None)
    }

    fn drain_tx_stamps(&mut self, _out: &mut Vec<TxStamp>) -> io::Result<()> {
        self.reap();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, SocketAddr};

    use crate::backend::packet::tests::read_ring;
    use crate::backend::packet::PacketRing;
    use crate::backend::route::next_hop;

    /// Frames sent through AF_XDP on lo come back in through lo intact,
    /// more of them than the ring has slots (chunks are reused once
    /// completed); a ring on lo reads them (see the packet backend's test
    /// for why not a socket).
    #[test]
    fn frames_over_loopback_arrive_intact() {
        let dst = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_003);
        let src = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 40_004);
        let hop = next_hop(*dst.ip(), &mut || {}).unwrap();
        let (mut tx, mut ring) = match (
            XdpTx::open(src, dst, &hop),
            PacketRing::open(hop.ifindex, SocketAddr::V4(dst)),
        ) {
            (Ok(t), Ok(r)) => (t, r),
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let mut seq = 0;
        let sizes: Vec<u32> = (0..1500).map(|i| 48 + (i % 7) * 200).collect();
        let offsets = vec![0; sizes.len()];
        let (_, pk) = crate::packets::build(9, 0, &offsets, &sizes, &mut seq);
        for chunk in pk.chunks(100) {
            for p in chunk {
                assert_eq!(tx.send_now(p).unwrap(), None);
            }
            let have = read_ring(&mut ring, chunk.len());
            assert_eq!(have.len(), chunk.len());
            for ((r, h), p) in have.iter().zip(chunk) {
                assert_eq!(r.len, p.len());
                assert_eq!(r.from, SocketAddr::V4(src));
                let k = h.len().min(p.len());
                assert_eq!(&h[..k], &p[..k]);
            }
        }
        let big = vec![0u8; MAX_PAYLOAD + 1];
        let e = tx.send_now(&big).unwrap_err();
        assert!(e.to_string().contains("xdp backend"), "{e}");
    }
}
