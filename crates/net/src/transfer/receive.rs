//! The receiving end of a transfer, whichever side of the session it is
//! (the server, or the client for `transfer -R`): data packets in with
//! their kernel receive stamps, each stream's stamps and the in-order
//! byte count back over the control connection, and the closing digest
//! exchange. It sends no UDP: 8 bytes of stamp per data packet go back
//! over TCP.

use std::io::{self, BufWriter};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::fd::AsRawFd;

use tightlink_sys::sockopt;
use tightlink_wire::control::{read_message, write_message, Message, RecordKind};
use tightlink_wire::data::DataRepr;
use tightlink_wire::{DropCounters, DropReason};

use super::reassembly::{Reassembly, StreamStamps};
use crate::clock;
use crate::stamps::{cmsg_stamp, recv_mmsg, BATCH};
use crate::udp::ProbeSocket;

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

/// Where the data comes from and how long to wait for it.
pub(crate) struct RecvEnd<'a> {
    pub conn: &'a TcpStream,
    pub sock: &'a ProbeSocket,
    pub session_id: u64,
    pub peer_ip: IpAddr,
    /// The sender's UDP port when known (a client knows the server's); a
    /// server takes it from the first data packet of the session.
    pub peer_port: Option<u16>,
    pub max_stream_packets: u32,
    /// Monotonic ns when the session's time is up, and that limit in ms
    /// (for the message).
    pub end_ns: Option<(i64, u32)>,
    pub idle_ns: i64,
    /// Monotonic ns: tell the sender to offer no more (`TransferStop`).
    pub stop_at_ns: Option<i64>,
}

/// What the receiving end holds at the end.
#[derive(Debug, Default)]
pub(crate) struct Received {
    pub bytes: u64,
    pub packets: u64,
    pub streams: u32,
    pub duplicate_bytes: u64,
    pub digest: [u8; 32],
    /// What the sender said it sent.
    pub sender_bytes: u64,
    pub sender_digest: [u8; 32],
    pub drops: DropCounters,
}

impl Received {
    pub fn digest_ok(&self) -> bool {
        self.bytes == self.sender_bytes && self.digest == self.sender_digest
    }
}

/// What the receiving end's caller sees as it goes.
pub(crate) enum RecvEvent {
    /// What the sender says beside the data (a reverse transfer's
    /// `RateUpdate` and `SenderTotals`); the caller refuses what it does
    /// not expect.
    Message(Message),
    /// Bytes held in order, at every turn of the loop.
    Tick(u64),
}

/// Receives until the sender's `TransferEnd`, answers `TransferDone`.
pub(crate) fn receive(
    e: &RecvEnd,
    w: &mut BufWriter<&TcpStream>,
    re: &mut Reassembly,
    on: &mut dyn FnMut(RecvEvent) -> Result<(), ServeEnd>,
) -> Result<Received, ServeEnd> {
    let mut st = StreamStamps::new(e.max_stream_packets);
    let mut out = Received::default();
    let mut peer_port = e.peer_port;
    let mut bufs = vec![[0u8; 9216]; BATCH];
    let mut got: Vec<(usize, Option<SocketAddr>, Option<i64>)> = Vec::with_capacity(BATCH);
    let ctrl_fd = e.conn.as_raw_fd();
    let mut r = e.conn;
    let mut last_heard = clock::monotonic_ns();
    let mut stop_sent = false;
    loop {
        let now_mono = clock::monotonic_ns();
        if let Some((end, ms)) = e.end_ns {
            if now_mono > end {
                return Err(ServeEnd::Refuse(format!(
                    "session time limit of {ms} ms reached after {} bytes",
                    re.contiguous()
                )));
            }
        }
        if now_mono - last_heard > e.idle_ns {
            return Err(ServeEnd::Fail(format!(
                "nothing from the sender for {} ms mid-transfer",
                e.idle_ns / 1_000_000
            )));
        }
        if !stop_sent && e.stop_at_ns.is_some_and(|t| now_mono >= t) {
            write_message(w, &Message::TransferStop)?;
            stop_sent = true;
        }
        // Data: every batch queued now.
        if let Some(t) = read_data(
            e,
            &mut bufs,
            &mut got,
            re,
            &mut st,
            &mut out,
            &mut peer_port,
        )? {
            last_heard = t;
        }
        // Control: what the sender says.
        while sockopt::wait_fd(ctrl_fd, libc::POLLIN, 0)? {
            last_heard = clock::monotonic_ns();
            match read_message(&mut r) {
                Ok(Message::StreamSent { stream }) => {
                    st.sent(stream, clock::monotonic_ns())
                        .map_err(|e| ServeEnd::Refuse(e.to_string()))?;
                }
                Ok(Message::TransferEnd { bytes, digest }) => {
                    return finish(w, &mut st, re, out, bytes, digest);
                }
                Ok(Message::Refused { reason }) => {
                    return Err(ServeEnd::Fail(format!("the sender refused: {reason}")))
                }
                Ok(m) => on(RecvEvent::Message(m))?,
                Err(err) => return Err(ServeEnd::Fail(format!("control connection: {err}"))),
            }
        }
        close_streams(w, &mut st, re, clock::monotonic_ns(), &mut out)?;
        on(RecvEvent::Tick(re.contiguous()))?;
        // Wait for data or control, at most until the next stream is due.
        let wait_ms = match st.next_due_ns() {
            Some(t) => ((t - clock::monotonic_ns()) / 1_000_000).clamp(0, 20) as i32,
            None => 20,
        };
        sockopt::wait_any(&[e.sock.fd(), ctrl_fd], libc::POLLIN, wait_ms)?;
    }
}

/// Every data datagram queued now, into the reassembly and the
/// stamps; when the last batch came (`None`: nothing did).
#[allow(clippy::type_complexity)]
fn read_data(
    e: &RecvEnd,
    bufs: &mut [[u8; 9216]],
    got: &mut Vec<(usize, Option<SocketAddr>, Option<i64>)>,
    re: &mut Reassembly,
    st: &mut StreamStamps,
    out: &mut Received,
    peer_port: &mut Option<u16>,
) -> Result<Option<i64>, ServeEnd> {
    let mut heard = None;
    loop {
        let mut views: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
        got.clear();
        let n = recv_mmsg(e.sock.fd(), &mut views, |_, len, from, msg| {
            // SAFETY: `msg` was just filled by recvmmsg.
            let (stamp, _) = unsafe { cmsg_stamp(msg) };
            got.push((len, from, stamp));
        })?;
        if n == 0 {
            return Ok(heard);
        }
        let now = clock::monotonic_ns();
        heard = Some(now);
        for (k, &(len, from, stamp)) in got.iter().enumerate() {
            let Some(from) = from else { continue };
            if from.ip() != e.peer_ip || peer_port.is_some_and(|p| p != from.port()) {
                out.drops.count(DropReason::WrongPeer);
                continue;
            }
            if len > bufs[k].len() {
                out.drops.count(DropReason::Malformed);
                continue;
            }
            let (repr, payload) = match DataRepr::parse(&bufs[k][..len]) {
                Ok(x) => x,
                Err(err) => {
                    out.drops.count(err);
                    continue;
                }
            };
            if repr.session != e.session_id {
                out.drops.count(DropReason::UnknownSession);
                continue;
            }
            peer_port.get_or_insert(from.port());
            if let Err(err) = re.put(repr.offset, payload) {
                out.drops.count(err);
                continue;
            }
            out.packets += 1;
            match stamp {
                Some(t) => {
                    if let Err(err) = st.stamp(&repr, t, now) {
                        out.drops.count(err);
                    }
                }
                None => out.drops.count(DropReason::Malformed),
            }
        }
    }
}

/// The sender's `TransferEnd`: the last streams closed, `TransferDone`
/// with what this end holds.
fn finish(
    w: &mut BufWriter<&TcpStream>,
    st: &mut StreamStamps,
    re: &mut Reassembly,
    mut out: Received,
    bytes: u64,
    digest: [u8; 32],
) -> Result<Received, ServeEnd> {
    close_streams(w, st, re, i64::MAX, &mut out)?;
    out.bytes = re.contiguous();
    out.digest = re.digest();
    out.sender_bytes = bytes;
    out.sender_digest = digest;
    out.duplicate_bytes = re.duplicate_bytes;
    write_message(
        w,
        &Message::TransferDone {
            bytes: out.bytes,
            digest: out.digest,
        },
    )?;
    out.drops.add(DropReason::Late, st.late);
    out.drops.add(DropReason::OverAnnounced, st.beyond);
    Ok(out)
}

/// Sends the stamps of every stream due to close, then the in-order count.
fn close_streams(
    w: &mut BufWriter<&TcpStream>,
    st: &mut StreamStamps,
    re: &Reassembly,
    now_ns: i64,
    out: &mut Received,
) -> io::Result<()> {
    let closed = st.close_due(now_ns);
    if closed.is_empty() {
        return Ok(());
    }
    for c in &closed {
        crate::ctl::send_records(w, c.stream, RecordKind::Receive, &c.recv_ns)?;
        out.streams += 1;
    }
    write_message(
        w,
        &Message::Delivered {
            bytes: re.contiguous(),
        },
    )
}
