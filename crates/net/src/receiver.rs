//! The receiving end of one probe stream, on whichever host timestamps:
//! the server in forward mode, the client in reverse mode. Reads the UDP
//! socket in `recvmmsg` batches, keeps the kernel receive time of each
//! expected packet, and counts everything else by reason. Memory is one
//! slot per announced packet, whatever arrives.

use std::io;
use std::net::{IpAddr, SocketAddr};

use tightlink_wire::twamp::{ProbeRepr, SenderPacket};
use tightlink_wire::{DropCounters, DropReason};

use crate::backend::ProbeSource;
use crate::stamps::{Received, HEADER_COPY};
use crate::udp::ProbeSocket;
use tightlink_sys::clock;

/// How long to wait for stragglers once the sender says it is done.
pub const DRAIN_NS: i64 = 20_000_000;

/// What the receiver expects.
#[derive(Debug, Clone, Copy)]
pub struct Expect {
    pub session: u64,
    pub stream: u32,
    pub packets: u32,
    /// Largest payload announced; longer datagrams are over-announced.
    pub max_size: usize,
    /// Only this address may send (its port once known).
    pub peer_ip: IpAddr,
    pub peer_port: Option<u16>,
}

#[derive(Debug, Clone, Default)]
pub struct Collected {
    /// Kernel receive time per position (CLOCK_REALTIME ns).
    pub recv_ns: Vec<Option<i64>>,
    pub received: u32,
    /// Bytes of this session's valid datagrams from the peer (warm-ups and
    /// credit included): what the peer has sent us.
    pub peer_bytes: u64,
    /// The peer's UDP address as seen on the first valid datagram.
    pub peer: Option<SocketAddr>,
    pub drops: DropCounters,
    /// Datagrams that came without a kernel timestamp (must stay 0).
    pub unstamped: u32,
}

/// Sorts one datagram: returns `Some((position, stamp))` for an expected
/// probe, else counts why not.
fn classify(
    header: &[u8],
    r: &Received,
    e: &Expect,
    c: &mut Collected,
) -> Option<(usize, Option<i64>)> {
    let copied = &header[..r.len.min(HEADER_COPY)];
    let view = match SenderPacket::new_checked(copied) {
        Ok(v) => v,
        Err(reason) => {
            c.drops.count(reason);
            return None;
        }
    };
    let p = match ProbeRepr::parse(&view) {
        Ok(p) => p,
        Err(reason) => {
            c.drops.count(reason);
            return None;
        }
    };
    if p.session != e.session {
        c.drops.count(DropReason::UnknownSession);
        return None;
    }
    let port_ok = e
        .peer_port
        .or(c.peer.map(|p| p.port()))
        .is_none_or(|port| port == r.from.port());
    if r.from.ip() != e.peer_ip || !port_ok {
        c.drops.count(DropReason::WrongPeer);
        return None;
    }
    c.peer.get_or_insert(r.from);
    c.peer_bytes += r.len as u64;
    if p.warmup {
        return None;
    }
    if p.stream != e.stream {
        c.drops.count(DropReason::Late);
        return None;
    }
    if p.stream_len != e.packets || r.len > e.max_size {
        c.drops.count(DropReason::OverAnnounced);
        return None;
    }
    let i = p.position as usize;
    if c.recv_ns[i].is_some() {
        c.drops.count(DropReason::Duplicate);
        return None;
    }
    Some((i, r.kernel_ns))
}

/// Receives one stream. `control` is the control connection's fd (or
/// none): when it turns readable, `on_control` reads one message and
/// returns whether the sender has finished. Stops once every packet is in
/// and the sender has finished, [`DRAIN_NS`] after the sender finished, or
/// at `deadline_ns` (CLOCK_MONOTONIC), whichever comes first.
pub fn collect_stream(
    sock: &mut dyn ProbeSource,
    e: &Expect,
    control: Option<i32>,
    on_control: &mut dyn FnMut() -> io::Result<bool>,
    deadline_ns: i64,
) -> io::Result<Collected> {
    let mut c = Collected {
        recv_ns: vec![None; e.packets as usize],
        ..Default::default()
    };
    let mut headers = [[0u8; HEADER_COPY]; 32];
    let mut got = [None; 32];
    let mut sender_done = control.is_none();
    let mut drain_until = i64::MAX;
    loop {
        let now = clock::monotonic_ns();
        let complete = c.received == e.packets;
        if (complete && sender_done) || now > drain_until || now > deadline_ns {
            break;
        }
        let wait_ms = ((drain_until.min(deadline_ns) - now) / 1_000_000).clamp(0, 10) as i32;
        let mut fds = [
            libc::pollfd {
                fd: sock.fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: control.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds (fd -1 is ignored by poll).
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, wait_ms.max(1)) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        if fds[0].revents & libc::POLLIN != 0 {
            loop {
                let n = sock.recv_batch(&mut headers, &mut got)?;
                for k in 0..n {
                    let Some(r) = got[k].take() else {
                        c.drops.count(DropReason::WrongPeer);
                        continue;
                    };
                    if let Some((i, stamp)) = classify(&headers[k], &r, e, &mut c) {
                        match stamp {
                            Some(t) => {
                                c.recv_ns[i] = Some(t);
                                c.received += 1;
                            }
                            None => c.unstamped += 1,
                        }
                    }
                }
                if n < 32 {
                    break;
                }
            }
        }
        if !sender_done && fds[1].revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0 {
            sender_done = on_control()?;
            if sender_done {
                drain_until = clock::monotonic_ns() + DRAIN_NS;
            }
        }
    }
    Ok(c)
}

/// Reads whatever is queued on the socket without waiting, into `c`
/// (the client's credit, its UDP port, and drops); expects no stream.
pub fn absorb(sock: &ProbeSocket, e: &Expect, c: &mut Collected) -> io::Result<()> {
    let mut headers = [[0u8; HEADER_COPY]; 32];
    let mut got = [None; 32];
    loop {
        let n = sock.recv_batch(&mut headers, &mut got)?;
        for k in 0..n {
            match got[k].take() {
                Some(r) => {
                    classify(&headers[k], &r, e, c);
                }
                None => c.drops.count(DropReason::WrongPeer),
            }
        }
        if n < 32 {
            return Ok(());
        }
    }
}

/// Empties the socket's receive queue, without waiting; returns how many
/// datagrams it held. For a socket whose datagrams were read elsewhere
/// (the packet ring sees the same ones first).
pub fn discard(sock: &ProbeSocket) -> io::Result<usize> {
    let mut headers = [[0u8; HEADER_COPY]; 32];
    let mut got = [None; 32];
    let mut total = 0;
    loop {
        let n = sock.recv_batch(&mut headers, &mut got)?;
        total += n;
        if n < 32 {
            return Ok(total);
        }
    }
}
