//! Socket options, addresses and waiting on descriptors: the few libc
//! calls every socket user here needs, each checked, errors as
//! `io::Error`.

use std::io;
use std::mem::size_of;
use std::net::{SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::RawFd;

/// Sets an `int` socket option.
pub fn set_int(fd: RawFd, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: a valid fd and a pointer to an int of the stated size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            &value as *const i32 as *const libc::c_void,
            size_of::<i32>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Reads an `int` socket option.
pub fn get_int(fd: RawFd, level: i32, name: i32) -> io::Result<i32> {
    let mut v: i32 = 0;
    let mut len = size_of::<i32>() as libc::socklen_t;
    // SAFETY: a valid fd, an int-sized out-pointer and its length.
    let r = unsafe {
        libc::getsockopt(
            fd,
            level,
            name,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    if r == 0 {
        Ok(v)
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The address in a `sockaddr_storage` the kernel filled, if IPv4 or IPv6.
pub fn sockaddr_to_std(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the family says this storage holds a sockaddr_in.
            let a: &libc::sockaddr_in = unsafe { &*(ss as *const _ as *const libc::sockaddr_in) };
            Some(SocketAddr::V4(SocketAddrV4::new(
                u32::from_be(a.sin_addr.s_addr).into(),
                u16::from_be(a.sin_port),
            )))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says this storage holds a sockaddr_in6.
            let a: &libc::sockaddr_in6 = unsafe { &*(ss as *const _ as *const libc::sockaddr_in6) };
            Some(SocketAddr::V6(SocketAddrV6::new(
                a.sin6_addr.s6_addr.into(),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            )))
        }
        _ => None,
    }
}

/// Waits until `fd` is ready for `events` or `timeout_ms` passes; returns
/// whether it is ready.
pub fn wait_fd(fd: RawFd, events: i16, timeout_ms: i32) -> io::Result<bool> {
    wait_any(&[fd], events, timeout_ms)
}

/// Waits until any of `fds` is ready for `events` or `timeout_ms` passes;
/// returns whether one is.
pub fn wait_any(fds: &[RawFd], events: i16, timeout_ms: i32) -> io::Result<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` holds `p.len()` valid pollfds.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

/// The kernel's view of a TCP connection (TCP_INFO): retransmissions,
/// segments sent, smoothed RTT.
pub fn tcp_info(fd: RawFd) -> io::Result<libc::tcp_info> {
    // SAFETY: a zeroed plain-old-data struct and its size as the buffer.
    unsafe {
        let mut info: libc::tcp_info = std::mem::zeroed();
        let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
        let r = libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut _ as *mut libc::c_void,
            &mut len,
        );
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(info)
    }
}

/// Datagrams the kernel dropped at this socket since it opened, mostly
/// because its receive buffer was full (SO_MEMINFO's SK_MEMINFO_DROPS,
/// Linux 4.6 on): lost to the receiving host, not to the path.
pub fn socket_drops(fd: RawFd) -> io::Result<u32> {
    let mut info = [0u32; libc::SK_MEMINFO_DROPS as usize + 1];
    let mut len = size_of::<[u32; libc::SK_MEMINFO_DROPS as usize + 1]>() as libc::socklen_t;
    // SAFETY: a valid fd, an out-buffer and its length in bytes.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            info.as_mut_ptr() as *mut libc::c_void,
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    if (len as usize) < info.len() * size_of::<u32>() {
        return Err(io::Error::other(format!(
            "SO_MEMINFO gave {len} bytes, too few for the drop count"
        )));
    }
    Ok(info[libc::SK_MEMINFO_DROPS as usize])
}

/// Sets SO_RCVTIMEO: a blocking receive returns `WouldBlock` after
/// `timeout` (zero would mean "never", so it is raised to 1 us).
pub fn set_recv_timeout(fd: RawFd, timeout: std::time::Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: timeout.as_secs() as _,
        tv_usec: (timeout.subsec_micros().max(u32::from(timeout.is_zero()))) as _,
    };
    // SAFETY: a timeval option of the stated size on a valid fd.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// One `recvmsg` into `buf`: (length, the SO_TIMESTAMPNS stamp if the
/// socket asked for it, whether the message was cut to fit).
pub fn recv_stamped(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<i64>, bool)> {
    let mut control = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: msghdr points at live `iov` and `control` buffers of the
    // stated lengths for the duration of the call.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        let n = libc::recvmsg(fd, &mut msg, 0);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut stamp = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS
            {
                let ts: libc::timespec =
                    std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
                stamp = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        let truncated = msg.msg_flags & libc::MSG_TRUNC != 0;
        Ok((n as usize, stamp, truncated))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsRawFd;

    #[test]
    fn options_round_trip_and_waits_time_out() {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        let fd = s.as_raw_fd();
        set_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).unwrap();
        assert_eq!(
            get_int(fd, libc::SOL_SOCKET, libc::SO_REUSEADDR).unwrap(),
            1
        );
        assert!(set_int(-1, libc::SOL_SOCKET, libc::SO_REUSEADDR, 1).is_err());
        // Nothing to read: not ready after 1 ms.
        assert!(!wait_fd(fd, libc::POLLIN, 1).unwrap());
        s.send_to(b"x", s.local_addr().unwrap()).unwrap();
        assert!(wait_fd(fd, libc::POLLIN, 1000).unwrap());
        // A 20 ms receive timeout: an empty socket gives WouldBlock.
        let mut buf = [0u8; 4];
        s.recv(&mut buf).unwrap();
        set_recv_timeout(fd, std::time::Duration::from_millis(20)).unwrap();
        assert_eq!(
            s.recv(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
    }

    /// 100 datagrams of 1400 bytes into a receive buffer of a few KB that
    /// nobody reads: each one is either queued (read later) or counted as
    /// dropped, none is neither, and most are dropped.
    #[test]
    fn a_full_receive_buffer_counts_its_drops() {
        let r = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_int(r.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF, 4096).unwrap();
        assert_eq!(socket_drops(r.as_raw_fd()).unwrap(), 0);
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..100 {
            s.send_to(&[7u8; 1400], r.local_addr().unwrap()).unwrap();
        }
        r.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2048];
        let (mut received, mut dropped) = (0u32, 0u32);
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while received + dropped < 100 && std::time::Instant::now() < give_up {
            while r.recv(&mut buf).is_ok() {
                received += 1;
            }
            dropped = socket_drops(r.as_raw_fd()).unwrap();
        }
        assert_eq!(
            received + dropped,
            100,
            "{received} read, {dropped} dropped"
        );
        assert!(dropped >= 80, "{received} read, {dropped} dropped");
        assert!(socket_drops(-1).is_err());
    }
}
