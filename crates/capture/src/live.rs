//! Live capture of one interface into a pcap file, for `tightlink capture`
//! where tcpdump is not installed (\[TCPW\] section 4: the passive
//! estimators read a capture taken at the sender). An AF_PACKET socket
//! sees both directions of every frame the interface carries, outgoing
//! ones after its qdisc; kernel software receive stamps (SO_TIMESTAMPNS)
//! in nanoseconds. Needs CAP_NET_RAW.
//!
//! Bounded: a duration, an optional packet count, a snap length; the
//! socket's receive buffer is what the kernel holds while we write. What
//! the kernel dropped for want of buffer is read back (PACKET_STATISTICS)
//! and reported: a capture with drops misses segments, and the passive
//! estimators would take them for losses.

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use std::os::fd::IntoRawFd;
use tightlink_sys::{packet, sockopt};

/// What to capture and for how long.
#[derive(Debug, Clone)]
pub struct LiveOptions {
    pub interface: String,
    /// Bytes kept of each frame (lengths come from the IP header, so the
    /// headers are enough: 128 holds Ethernet + IPv6 + TCP with options).
    pub snaplen: u32,
    pub duration: Duration,
    /// Stop after this many packets.
    pub max_packets: Option<u64>,
    /// Socket receive buffer, bytes (asked with SO_RCVBUFFORCE when root).
    pub buffer_bytes: usize,
}

/// What a capture saw.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LiveReport {
    pub packets: u64,
    pub bytes_on_wire: u64,
    /// Frames the kernel dropped because the socket's buffer was full.
    pub kernel_drops: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("interface {0}: no such interface")]
    NoInterface(String),
    #[error("{what}: {source} (a packet capture needs root or CAP_NET_RAW)")]
    Permission {
        what: String,
        source: std::io::Error,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("interface {interface}: link type {hatype} (ARPHRD) is not supported: Ethernet, loopback and raw-IP interfaces are")]
    LinkType { interface: String, hatype: u16 },
    #[error("{path}: writing the capture: {message}")]
    Write { path: String, message: String },
}

/// Set by SIGINT/SIGTERM: the capture ends and the file is complete.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

struct Fd(libc::c_int);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: we own the descriptor.
        unsafe { libc::close(self.0) };
    }
}

fn os_err(what: impl Into<String>) -> LiveError {
    let source = std::io::Error::last_os_error();
    let what = what.into();
    match source.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => LiveError::Permission { what, source },
        _ => LiveError::Io { what, source },
    }
}

/// An error of the system layer, classed as `os_err` classes errno.
fn io_err(what: impl Into<String>, source: std::io::Error) -> LiveError {
    let what = what.into();
    match source.kind() {
        std::io::ErrorKind::PermissionDenied => LiveError::Permission { what, source },
        _ => LiveError::Io { what, source },
    }
}

fn set_int(fd: &Fd, level: i32, name: i32, v: libc::c_int, what: &str) -> Result<(), LiveError> {
    sockopt::set_int(fd.0, level, name, v).map_err(|e| io_err(what, e))
}

/// The pcap link type for an interface's ARPHRD type.
fn data_link(interface: &str, hatype: u16) -> Result<DataLink, LiveError> {
    match hatype {
        // Ethernet; loopback frames carry a zeroed Ethernet header.
        libc::ARPHRD_ETHER | libc::ARPHRD_LOOPBACK => Ok(DataLink::ETHERNET),
        // tun and the like: frames start at the IP header.
        libc::ARPHRD_NONE => Ok(DataLink::RAW),
        _ => Err(LiveError::LinkType {
            interface: interface.to_string(),
            hatype,
        }),
    }
}

/// A packet socket bound to `opts.interface`, kernel stamps on, its
/// receive buffer as asked; the interface's index and link type.
fn open_socket(opts: &LiveOptions) -> Result<(Fd, u32, DataLink), LiveError> {
    let name = std::ffi::CString::new(opts.interface.as_str())
        .map_err(|_| LiveError::NoInterface(opts.interface.clone()))?;
    let ifindex = tightlink_sys::netif::index(&opts.interface)
        .map_err(|_| LiveError::NoInterface(opts.interface.clone()))?;
    let fd = Fd(packet::socket(packet::ETH_P_ALL)
        .map_err(|e| io_err("opening an AF_PACKET socket", e))?
        .into_raw_fd());
    let buf = opts.buffer_bytes.min(i32::MAX as usize) as libc::c_int;
    if set_int(
        &fd,
        libc::SOL_SOCKET,
        libc::SO_RCVBUFFORCE,
        buf,
        "SO_RCVBUFFORCE",
    )
    .is_err()
    {
        set_int(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, buf, "SO_RCVBUF")?;
    }
    set_int(
        &fd,
        libc::SOL_SOCKET,
        libc::SO_TIMESTAMPNS,
        1,
        "SO_TIMESTAMPNS",
    )?;
    sockopt::set_recv_timeout(fd.0, Duration::from_millis(100))
        .map_err(|e| io_err("SO_RCVTIMEO", e))?;
    packet::bind(fd.0, ifindex, packet::ETH_P_ALL)
        .map_err(|e| io_err(format!("binding to {}", opts.interface), e))?;
    // Drops counted so far (frames of any interface queued before the
    // bind) are not ours: reading the statistics resets them.
    read_stats(&fd)?;
    let link = data_link(&opts.interface, hardware_type(&fd, &name)?)?;
    Ok((fd, ifindex, link))
}

/// One frame into `frame` (cut at its length): its kernel stamp and full
/// length; `None` for a timeout, a signal, or another interface's frame.
fn receive_frame(
    fd: &Fd,
    ifindex: u32,
    frame: &mut [u8],
    interface: &str,
) -> Result<Option<(Duration, isize)>, LiveError> {
    // SAFETY: zeroed sockaddr_ll / msghdr are valid; set below.
    let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut cmsg = [0u64; 16];
    let mut iov = libc::iovec {
        iov_base: frame.as_mut_ptr() as *mut libc::c_void,
        iov_len: frame.len(),
    };
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_name = &mut from as *mut libc::sockaddr_ll as *mut libc::c_void;
    msg.msg_namelen = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cmsg.as_mut_ptr() as *mut libc::c_void;
    msg.msg_controllen = std::mem::size_of_val(&cmsg) as _;
    // MSG_TRUNC: the return value is the frame's full length.
    // SAFETY: msg points at live buffers of the stated sizes.
    let n = unsafe { libc::recvmsg(fd.0, &mut msg, libc::MSG_TRUNC) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => return Ok(None),
            _ => {
                return Err(LiveError::Io {
                    what: format!("receiving on {interface}"),
                    source: e,
                })
            }
        }
    }
    if from.sll_ifindex != ifindex as i32 {
        return Ok(None);
    }
    // No stamp would be a kernel without SO_TIMESTAMPNS support; the
    // option was accepted, so this does not happen: count it as now.
    let t = stamp(&msg).unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    });
    Ok(Some((t, n)))
}

/// Captures `opts.interface` into a pcap file at `path` (nanosecond
/// stamps) until the duration passes, the count is reached or SIGINT or
/// SIGTERM arrives. `ready` is called once the socket is bound: frames
/// from then on are in the file.
pub fn capture_to_pcap(
    opts: &LiveOptions,
    path: &Path,
    ready: impl FnOnce(),
) -> Result<LiveReport, LiveError> {
    let (fd, ifindex, link) = open_socket(opts)?;

    let file = File::create(path).map_err(|e| LiveError::Io {
        what: path.display().to_string(),
        source: e,
    })?;
    let werr = |e: pcap_file::PcapError| LiveError::Write {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let snaplen = opts.snaplen.max(64) as usize;
    let header = PcapHeader {
        snaplen: snaplen as u32,
        datalink: link,
        ts_resolution: TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let mut writer = PcapWriter::with_header(BufWriter::new(file), header).map_err(werr)?;
    let mut frame = vec![0u8; snaplen];
    let mut report = LiveReport::default();
    STOP.store(false, Ordering::Relaxed);
    // SAFETY: installing an async-signal-safe handler (one atomic store).
    unsafe {
        libc::signal(libc::SIGINT, on_signal as *const () as libc::sighandler_t);
        libc::signal(libc::SIGTERM, on_signal as *const () as libc::sighandler_t);
    }
    ready();
    let started = Instant::now();
    while started.elapsed() < opts.duration
        && !STOP.load(Ordering::Relaxed)
        && opts.max_packets.is_none_or(|m| report.packets < m)
    {
        let Some((t, n)) = receive_frame(&fd, ifindex, &mut frame, &opts.interface)? else {
            continue;
        };
        let orig = n as usize;
        let kept = orig.min(frame.len());
        writer
            .write_packet(&PcapPacket::new(t, orig as u32, &frame[..kept]))
            .map_err(werr)?;
        report.packets += 1;
        report.bytes_on_wire += orig as u64;
    }
    // SAFETY: restoring the default dispositions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_DFL);
        libc::signal(libc::SIGTERM, libc::SIG_DFL);
    }
    report.kernel_drops = read_stats(&fd)?.1;
    {
        use std::io::Write;
        writer.into_writer().flush().map_err(|e| LiveError::Write {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    }
    Ok(report)
}

/// The interface's ARPHRD type (SIOCGIFHWADDR).
fn hardware_type(fd: &Fd, name: &std::ffi::CStr) -> Result<u16, LiveError> {
    // SAFETY: a zeroed ifreq is valid; the name fits (if_nametoindex
    // accepted it, so it is shorter than IFNAMSIZ).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.to_bytes()) {
        *d = *s as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR fills the ifreq we pass.
    let r = unsafe { libc::ioctl(fd.0, libc::SIOCGIFHWADDR as _, &mut ifr) };
    if r != 0 {
        return Err(os_err("SIOCGIFHWADDR"));
    }
    // SAFETY: the kernel filled the hwaddr member of the union.
    Ok(unsafe { ifr.ifr_ifru.ifru_hwaddr.sa_family })
}

/// The SCM_TIMESTAMPNS stamp of a received message.
fn stamp(msg: &libc::msghdr) -> Option<Duration> {
    // SAFETY: walking the control buffer recvmsg filled, with the libc
    // macros that bound every step by msg_controllen.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = std::ptr::read_unaligned(libc::CMSG_DATA(c) as *const libc::timespec);
                return Some(Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// (packets, drops) since the last read; reading resets them.
fn read_stats(fd: &Fd) -> Result<(u64, u64), LiveError> {
    packet::statistics(fd.0).map_err(|e| io_err("PACKET_STATISTICS", e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_types() {
        assert_eq!(
            data_link("x", libc::ARPHRD_ETHER).unwrap(),
            DataLink::ETHERNET
        );
        assert_eq!(
            data_link("x", libc::ARPHRD_LOOPBACK).unwrap(),
            DataLink::ETHERNET
        );
        assert_eq!(data_link("x", libc::ARPHRD_NONE).unwrap(), DataLink::RAW);
        let e = data_link("wg0", 0xffff).unwrap_err().to_string();
        assert!(e.contains("wg0") && e.contains("65535"), "{e}");
    }

    #[test]
    fn a_missing_interface_is_named() {
        let o = LiveOptions {
            interface: "nosuchif0".into(),
            snaplen: 128,
            duration: Duration::from_millis(10),
            max_packets: None,
            buffer_bytes: 1 << 20,
        };
        let e = capture_to_pcap(&o, Path::new("/nonexistent/x.pcap"), || {}).unwrap_err();
        assert_eq!(e.to_string(), "interface nosuchif0: no such interface");
    }
}
