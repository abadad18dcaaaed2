//! Kernel timestamps and what they produce: the SO_TIMESTAMPING flags,
//! reading a stamp from a message's control data, receiving a batch of
//! stamped datagrams, draining transmit stamps from the error queue, and
//! the per-packet records every backend fills ([`Received`], [`TxStamp`],
//! [`Departures`]). Shared by the UDP socket, the AF_PACKET and AF_XDP
//! backends and the reflector.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::RawFd;

use tightlink_sys::sockopt;

// linux/net_tstamp.h and linux/errqueue.h; the libc crate lacks them.
const SOF_TIMESTAMPING_TX_SOFTWARE: u32 = 1 << 1;
pub(crate) const SOF_TIMESTAMPING_RX_SOFTWARE: u32 = 1 << 3;
pub(crate) const SOF_TIMESTAMPING_SOFTWARE: u32 = 1 << 4;
const SOF_TIMESTAMPING_OPT_ID: u32 = 1 << 7;
const SOF_TIMESTAMPING_OPT_TSONLY: u32 = 1 << 11;
const SO_EE_ORIGIN_TIMESTAMPING: u8 = 4;
// linux/if_packet.h: how an AF_PACKET socket's error queue labels stamps.
const PACKET_TX_TIMESTAMP: i32 = 16;
/// Transmit stamping flags shared by every socket that stamps sends.
pub(crate) const TX_STAMP_FLAGS: u32 = SOF_TIMESTAMPING_TX_SOFTWARE
    | SOF_TIMESTAMPING_SOFTWARE
    | SOF_TIMESTAMPING_OPT_ID
    | SOF_TIMESTAMPING_OPT_TSONLY;

/// Datagrams per receive batch.
pub const BATCH: usize = 32;

/// Bytes of each datagram copied out: the 82-byte probe header, or a
/// reflector's reply with our fields where an RFC 6038 reflector returns
/// them (bytes 75-108), or where an authenticated STAMP reply does
/// (bytes 116-158).
pub const HEADER_COPY: usize = 160;

/// One received datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Received {
    /// The datagram's real length (it may be longer than what was copied).
    pub len: usize,
    pub from: SocketAddr,
    /// Kernel receive time (CLOCK_REALTIME ns); `None` if the kernel gave
    /// none, which the caller must count, not paper over.
    pub kernel_ns: Option<i64>,
}

/// One transmit timestamp from the error queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStamp {
    /// The OPT_ID counter: the socket's n-th datagram since stamping began.
    pub id: u32,
    pub kernel_ns: i64,
}

/// Reads the kernel timestamp out of a received message's control data.
///
/// # Safety
/// `msg` must be a message filled by `recvmsg`/`recvmmsg` whose control
/// buffer is still alive.
pub(crate) unsafe fn cmsg_stamp(msg: &libc::msghdr) -> (Option<i64>, Option<u32>) {
    let mut stamp = None;
    let mut id = None;
    let mut cmsg = libc::CMSG_FIRSTHDR(msg);
    while !cmsg.is_null() {
        let (level, ty) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
        if level == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPING {
            // struct scm_timestamping { struct timespec ts[3]; }: [0] is
            // the software stamp.
            let ts: libc::timespec =
                std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
            if ts.tv_sec != 0 || ts.tv_nsec != 0 {
                stamp = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
            }
        } else if level == libc::SOL_SOCKET && ty == libc::SCM_TIMESTAMPNS {
            let ts: libc::timespec =
                std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::timespec);
            stamp = Some(ts.tv_sec * 1_000_000_000 + ts.tv_nsec);
        } else if (level == libc::SOL_IP && ty == libc::IP_RECVERR)
            || (level == libc::SOL_IPV6 && ty == libc::IPV6_RECVERR)
            || (level == libc::SOL_PACKET && ty == PACKET_TX_TIMESTAMP)
        {
            let ee: libc::sock_extended_err =
                std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const libc::sock_extended_err);
            if ee.ee_errno == libc::ENOMSG as u32 && ee.ee_origin == SO_EE_ORIGIN_TIMESTAMPING {
                id = Some(ee.ee_data);
            }
        }
        cmsg = libc::CMSG_NXTHDR(msg, cmsg);
    }
    (stamp, id)
}

/// One `recvmmsg` without waiting: up to [`BATCH`] datagrams, one into each
/// of `bufs`, with source address and control data (room for a timestamp
/// and a TTL). Calls `each(k, real length, source, message)` per datagram
/// (`MSG_TRUNC`: the length may exceed the buffer); returns how many came.
pub(crate) fn recv_mmsg(
    fd: RawFd,
    bufs: &mut [&mut [u8]],
    mut each: impl FnMut(usize, usize, Option<SocketAddr>, &libc::msghdr),
) -> io::Result<usize> {
    let count = bufs.len().min(BATCH);
    // SAFETY: zeroed plain-old-data structs; every pointer in `msgs`
    // points at a live local or into `bufs`, with its length.
    unsafe {
        let mut names: [libc::sockaddr_storage; BATCH] = zeroed();
        let mut iovs: [libc::iovec; BATCH] = zeroed();
        let mut controls = [[0u64; 16]; BATCH];
        let mut msgs: [libc::mmsghdr; BATCH] = zeroed();
        for i in 0..count {
            iovs[i] = libc::iovec {
                iov_base: bufs[i].as_mut_ptr() as *mut libc::c_void,
                iov_len: bufs[i].len(),
            };
            let h = &mut msgs[i].msg_hdr;
            h.msg_name = &mut names[i] as *mut _ as *mut libc::c_void;
            h.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            h.msg_iov = &mut iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = controls[i].as_mut_ptr() as *mut libc::c_void;
            h.msg_controllen = size_of::<[u64; 16]>() as _;
        }
        let n = libc::recvmmsg(
            fd,
            msgs.as_mut_ptr(),
            count as u32,
            (libc::MSG_DONTWAIT | libc::MSG_TRUNC) as _,
            std::ptr::null_mut(),
        );
        if n < 0 {
            let e = io::Error::last_os_error();
            return match e.kind() {
                io::ErrorKind::WouldBlock => Ok(0),
                _ => Err(e),
            };
        }
        let n = n as usize;
        for i in 0..n {
            each(
                i,
                msgs[i].msg_len as usize,
                sockopt::sockaddr_to_std(&names[i]),
                &msgs[i].msg_hdr,
            );
        }
        Ok(n)
    }
}

/// Takes every transmit stamp waiting in `fd`'s error queue (a UDP or an
/// AF_PACKET socket stamping with [`TX_STAMP_FLAGS`]), without waiting.
pub(crate) fn drain_errqueue(fd: RawFd, out: &mut Vec<TxStamp>) -> io::Result<()> {
    loop {
        // SAFETY: zeroed plain-old-data structs; the message's pointers
        // point at live locals with their lengths.
        let got = unsafe {
            let mut data = [0u8; 64];
            let mut iov = libc::iovec {
                iov_base: data.as_mut_ptr() as *mut libc::c_void,
                iov_len: data.len(),
            };
            let mut control = [0u64; 32];
            let mut msg: libc::msghdr = zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr() as *mut libc::c_void;
            msg.msg_controllen = size_of::<[u64; 32]>() as _;
            let n = libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT);
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::WouldBlock {
                    return Ok(());
                }
                return Err(e);
            }
            cmsg_stamp(&msg)
        };
        if let (Some(kernel_ns), Some(id)) = got {
            out.push(TxStamp { id, kernel_ns });
        }
    }
}

/// What happened to each packet of a paced train on the sending host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Departures {
    /// Scheduled send time (CLOCK_REALTIME ns).
    pub scheduled_ns: Vec<i64>,
    /// User-space time just before `send` (CLOCK_REALTIME ns).
    pub user_ns: Vec<i64>,
    /// Kernel software transmit time, after the sender's qdisc.
    pub tx_ns: Vec<Option<i64>>,
}

impl Departures {
    /// Share of packets whose `send` began more than `tol_ns` after its
    /// schedule.
    pub fn late_share(&self, tol_ns: i64) -> f64 {
        if self.user_ns.is_empty() {
            return 0.0;
        }
        let late = self
            .user_ns
            .iter()
            .zip(&self.scheduled_ns)
            .filter(|(u, s)| **u - **s > tol_ns)
            .count();
        late as f64 / self.user_ns.len() as f64
    }
}
