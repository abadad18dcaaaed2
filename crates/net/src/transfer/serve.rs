//! The server's side of a transfer session: data packets in (kernel
//! receive stamps), each stream's stamps and the in-order byte count back
//! over the control connection, the digest checked at the end.
//!
//! Bounded like every session: the reassembly window (8 MB without a key,
//! 64 MB with one) and [`MAX_OPEN_STREAMS`](super::reassembly::MAX_OPEN_STREAMS)
//! streams of stamps; the session's byte and time limits; the idle
//! timeout on UDP and control alike. The server sends no UDP at all:
//! 8 bytes of stamp per data packet go back over TCP.

use std::io::{self, BufWriter};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tightlink_sys::sockopt;
use tightlink_wire::control::{read_message, write_message, Limits, Message, RecordKind};
use tightlink_wire::data::{DataRepr, HEADER_LEN};
use tightlink_wire::{DropCounters, DropReason};

use super::reassembly::{Reassembly, StreamStamps};
use crate::clock;
use crate::stamps::{cmsg_stamp, recv_mmsg, BATCH};
use crate::udp::ProbeSocket;

/// Reassembly window without a key and with one.
pub const OPEN_WINDOW_BYTES: u64 = 8 << 20;
pub const KEYED_WINDOW_BYTES: u64 = 64 << 20;

/// How a transfer ended early: the client is told why (`Refuse`), or the
/// connection broke (`Fail`).
pub enum ServeEnd {
    Refuse(String),
    Fail(String),
}

impl From<io::Error> for ServeEnd {
    fn from(e: io::Error) -> Self {
        ServeEnd::Fail(e.to_string())
    }
}

/// What a finished transfer session received.
#[derive(Debug, Default)]
pub struct Served {
    pub bytes: u64,
    pub packets: u64,
    pub streams: u32,
    pub digest_ok: bool,
    pub drops: DropCounters,
}

pub struct Session<'a> {
    pub conn: &'a TcpStream,
    pub sock: &'a ProbeSocket,
    pub session_id: u64,
    pub peer: SocketAddr,
    pub limits: Limits,
    pub authenticated: bool,
    /// Monotonic ns when the session's time is up.
    pub session_end_ns: i64,
    pub idle_timeout: Duration,
}

/// Runs the transfer the client announced with `Transfer`, through its
/// `TransferEnd` and the server's `TransferDone`.
pub fn receive(
    s: &Session,
    w: &mut BufWriter<&TcpStream>,
    max_bytes: u64,
    packet_bytes: u16,
) -> Result<Served, ServeEnd> {
    if max_bytes > s.limits.max_session_bytes {
        return Err(ServeEnd::Refuse(format!(
            "transfer of {max_bytes} bytes exceeds the session's limit of {} bytes{}",
            s.limits.max_session_bytes,
            if s.authenticated {
                ""
            } else {
                " (without a key)"
            }
        )));
    }
    if (packet_bytes as usize) <= HEADER_LEN || packet_bytes > s.limits.max_packet_bytes {
        return Err(ServeEnd::Refuse(format!(
            "data packets of {packet_bytes} bytes; the limit is {}-{}",
            HEADER_LEN + 1,
            s.limits.max_packet_bytes
        )));
    }
    let window = if s.authenticated {
        KEYED_WINDOW_BYTES
    } else {
        OPEN_WINDOW_BYTES
    }
    .min(max_bytes.max(1));
    write_message(
        w,
        &Message::TransferReady {
            window_bytes: window,
        },
    )?;
    let mut re = Reassembly::new(max_bytes, window);
    let mut st = StreamStamps::new(s.limits.max_stream_packets);
    let mut out = Served::default();
    let mut client_port: Option<u16> = None;
    let mut bufs = vec![[0u8; 9216]; BATCH];
    let mut got: Vec<(usize, Option<SocketAddr>, Option<i64>)> = Vec::with_capacity(BATCH);
    let ctrl_fd = s.conn.as_raw_fd();
    let mut r = s.conn;
    let mut last_heard = clock::monotonic_ns();
    let idle_ns = s.idle_timeout.as_nanos() as i64;
    loop {
        let now_mono = clock::monotonic_ns();
        if now_mono > s.session_end_ns {
            return Err(ServeEnd::Refuse(format!(
                "session time limit of {} ms reached after {} bytes",
                s.limits.max_session_ms,
                re.contiguous()
            )));
        }
        if now_mono - last_heard > idle_ns {
            return Err(ServeEnd::Fail(format!(
                "nothing from the client for {} ms mid-transfer",
                idle_ns / 1_000_000
            )));
        }
        // Data: every batch queued now.
        loop {
            let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
            got.clear();
            let n = recv_mmsg(s.sock.fd(), &mut views, |_, len, from, msg| {
                // SAFETY: `msg` was just filled by recvmmsg.
                let (stamp, _) = unsafe { cmsg_stamp(msg) };
                got.push((len, from, stamp));
            })?;
            if n == 0 {
                break;
            }
            last_heard = clock::monotonic_ns();
            for (k, &(len, from, stamp)) in got.iter().enumerate() {
                let Some(from) = from else { continue };
                if from.ip() != s.peer.ip() || client_port.is_some_and(|p| p != from.port()) {
                    out.drops.count(DropReason::WrongPeer);
                    continue;
                }
                if len > bufs[k].len() {
                    out.drops.count(DropReason::Malformed);
                    continue;
                }
                let (repr, payload) = match DataRepr::parse(&bufs[k][..len]) {
                    Ok(x) => x,
                    Err(e) => {
                        out.drops.count(e);
                        continue;
                    }
                };
                if repr.session != s.session_id {
                    out.drops.count(DropReason::UnknownSession);
                    continue;
                }
                client_port.get_or_insert(from.port());
                if let Err(e) = re.put(repr.offset, payload) {
                    out.drops.count(e);
                    continue;
                }
                out.packets += 1;
                match stamp {
                    Some(t) => {
                        if let Err(e) = st.stamp(&repr, t) {
                            out.drops.count(e);
                        }
                    }
                    None => out.drops.count(DropReason::Malformed),
                }
            }
        }
        // Control: what the client says.
        while sockopt::wait_fd(ctrl_fd, libc::POLLIN, 0)? {
            last_heard = clock::monotonic_ns();
            match read_message(&mut r) {
                Ok(Message::StreamSent { stream }) => {
                    st.sent(stream, clock::realtime_ns())
                        .map_err(ServeEnd::Refuse)?;
                }
                Ok(Message::TransferEnd { bytes, digest }) => {
                    close_streams(w, &mut st, &re, i64::MAX, &mut out)?;
                    out.bytes = re.contiguous();
                    let ours = re.digest();
                    out.digest_ok = bytes == re.contiguous() && digest == ours;
                    write_message(
                        w,
                        &Message::TransferDone {
                            bytes: re.contiguous(),
                            digest: ours,
                        },
                    )?;
                    out.drops.add(DropReason::Late, st.late);
                    out.drops.add(DropReason::OverAnnounced, st.beyond);
                    return Ok(out);
                }
                Ok(other) => {
                    return Err(ServeEnd::Refuse(
                        format!("unexpected message mid-transfer: {other:?}")
                            .chars()
                            .take(200)
                            .collect(),
                    ))
                }
                Err(e) => return Err(ServeEnd::Fail(format!("control connection: {e}"))),
            }
        }
        close_streams(w, &mut st, &re, clock::realtime_ns(), &mut out)?;
        // Wait for data or control, at most until the next stream is due.
        let wait_ms = match st.next_due_ns() {
            Some(t) => ((t - clock::realtime_ns()) / 1_000_000).clamp(0, 20) as i32,
            None => 20,
        };
        sockopt::wait_any(&[s.sock.fd(), ctrl_fd], libc::POLLIN, wait_ms)?;
    }
}

/// Sends the stamps of every stream due to close, then the in-order count.
fn close_streams(
    w: &mut BufWriter<&TcpStream>,
    st: &mut StreamStamps,
    re: &Reassembly,
    now_ns: i64,
    out: &mut Served,
) -> io::Result<()> {
    let closed = st.close_due(now_ns);
    if closed.is_empty() {
        return Ok(());
    }
    for c in &closed {
        crate::server::send_records(w, c.stream, RecordKind::Receive, &c.recv_ns)?;
        out.streams += 1;
    }
    write_message(
        w,
        &Message::Delivered {
            bytes: re.contiguous(),
        },
    )
}
