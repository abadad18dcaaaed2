//! AF_PACKET sockets: opening one (CAP_NET_RAW), binding it to an
//! interface, and reading its drop counters. The send backend, the
//! receive ring and `tightlink capture` build on these.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// `linux/if_packet.h` option numbers the libc crate lacks.
pub const PACKET_RX_RING: i32 = 5;
pub const PACKET_STATISTICS: i32 = 6;
pub const PACKET_VERSION: i32 = 10;
pub const PACKET_IGNORE_OUTGOING: i32 = 23;
/// Each frame read or written is preceded by a `virtio_net_hdr` (10 bytes:
/// the checksum-offload and segmentation state the kernel keeps beside
/// the bytes), so a frame passes from one interface to another unchanged.
pub const PACKET_VNET_HDR: i32 = 15;
pub const VNET_HDR_LEN: usize = 10;
pub const TPACKET_V3: i32 = 2;
/// Every protocol (`ETH_P_ALL`) and IPv4 (`ETH_P_IP`).
pub const ETH_P_ALL: u16 = 0x0003;
pub const ETH_P_IP: u16 = 0x0800;

/// A raw AF_PACKET socket for `protocol` (host order; 0 receives
/// nothing). Needs CAP_NET_RAW, which the error says.
pub fn socket(protocol: u16) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the fd is owned at once.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            protocol.to_be() as i32,
        )
    };
    if fd < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!("AF_PACKET socket (needs CAP_NET_RAW): {e}"),
        ));
    }
    // SAFETY: a fresh fd nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds an AF_PACKET socket to interface `ifindex` for `protocol`.
pub fn bind(fd: RawFd, ifindex: u32, protocol: u16) -> io::Result<()> {
    // SAFETY: a zeroed sockaddr_ll with family, protocol and ifindex set.
    let r = unsafe {
        let mut sll: libc::sockaddr_ll = zeroed();
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = protocol.to_be();
        sll.sll_ifindex = ifindex as i32;
        libc::bind(
            fd,
            &sll as *const libc::sockaddr_ll as *const libc::sockaddr,
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// (packets, drops) the socket counted since the last read; reading
/// resets them. Works for plain sockets and TPACKET_V3 rings alike (both
/// statistics start with these two counters).
pub fn statistics(fd: RawFd) -> io::Result<(u64, u64)> {
    let mut st = [0u32; 3];
    let mut len = size_of::<[u32; 3]>() as libc::socklen_t;
    // SAFETY: an out-buffer of the stated size.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_PACKET,
            PACKET_STATISTICS,
            st.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((st[0] as u64, st[1] as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    /// Root only (CAP_NET_RAW): bind to lo, counters start at zero.
    #[test]
    fn a_socket_on_loopback_counts_nothing_yet() {
        let fd = match socket(0) {
            Ok(fd) => fd,
            Err(e) => {
                assert!(e.to_string().contains("CAP_NET_RAW"), "{e}");
                return;
            }
        };
        let lo = crate::netif::index("lo").unwrap();
        bind(fd.as_raw_fd(), lo, 0).unwrap();
        assert_eq!(statistics(fd.as_raw_fd()).unwrap(), (0, 0));
        assert!(bind(fd.as_raw_fd(), 999_999, 0).is_err());
    }
}
