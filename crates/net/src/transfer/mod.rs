//! `tightlink transfer`: a reliable bulk transfer over UDP whose data
//! packets are the rate controller's probe streams (\[BASS\] section VII,
//! after RAPID). The client sends each stream's packets when the core's
//! [`RapidController`](tightlink_core::rapid::RapidController) says; the server stamps them on arrival and
//! returns each stream's receive stamps and its in-order byte count over
//! the control connection; the controller reads the available bandwidth
//! from the stamps and sets the next streams' rate. Packets the server
//! did not see are sent again, first. At the end both sides compare the
//! SHA-256 of every byte: a transfer that does not match fails.
//!
//! With `-R` the roles swap: the server sends and runs the controller,
//! the client stamps and acknowledges, and the server tells it each
//! update and its totals.
//!
//! - [`book`]: the sender's bookkeeping (pure).
//! - [`reassembly`]: the receiver's order, digest and stamps (pure).
//! - `send`, `receive`: the two ends, whichever side runs them.
//! - [`serve`]: the server's side of the session.

pub mod book;
mod pacer;
mod progress;
pub mod reassembly;
mod receive;
mod send;
pub mod serve;

use std::io::{self, BufWriter};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tightlink_core::channel::ChannelError;
use tightlink_core::rapid::{RapidEstimator, RapidUpdate};
use tightlink_core::stats::median_i64;
use tightlink_sys::sockopt;
use tightlink_wire::control::{
    read_message, write_message, Direction, Limits, Message, SenderTotals, TransferFrom,
};
use tightlink_wire::data::HEADER_LEN;

use crate::client::open_session;
use crate::clock;
use crate::ctl::{ctl_err, io_err, refused};
pub use pacer::SendCc;
use progress::err;
pub use progress::{hex, TransferEvent, TransferInterval};
use reassembly::Reassembly;
use receive::{RecvEnd, RecvEvent};
use send::SendPlan;
use serve::ServeEnd;

#[derive(Debug, Clone)]
pub struct TransferOptions {
    pub key: Option<Vec<u8>>,
    /// Connect timeout, and the longest wait for the server's feedback.
    pub timeout: Duration,
    /// The sending end's controller (the server's, on `-R`, runs Rapid).
    pub cc: SendCc,
    /// Bytes to send; `None`: as many as `duration` allows (at most the
    /// server's session limit).
    pub bytes: Option<u64>,
    pub duration: Option<Duration>,
    /// Never faster than this (bit/s, on the Ethernet frame).
    pub max_rate_bps: Option<f64>,
    /// Progress reports this often.
    pub interval: Duration,
    /// The data's seed (the bytes are a seeded sequence).
    pub seed: u64,
    /// The server sends, the client receives (`transfer -R`).
    pub reverse: bool,
}

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions {
            key: None,
            timeout: Duration::from_secs(5),
            cc: SendCc::Rapid(RapidEstimator::Bass),
            bytes: None,
            duration: Some(Duration::from_secs(10)),
            max_rate_bps: None,
            interval: Duration::from_millis(500),
            seed: 1,
            reverse: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct TransferSummary {
    pub server: SocketAddr,
    /// The server sent (`-R`); the counts below are then the server's.
    pub reverse: bool,
    pub authenticated: bool,
    pub limits: Limits,
    pub cc: SendCc,
    /// Payload bytes delivered (and digest-checked).
    pub bytes: u64,
    pub duration_ns: i64,
    pub sent_bytes: u64,
    pub retransmitted_bytes: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub streams: u64,
    /// Frame bytes of a full data packet, as rates are counted.
    pub frame_bytes: u32,
    pub rtt_min_ns: Option<i64>,
    pub rtt_median_ns: Option<i64>,
    pub intervals: Vec<TransferInterval>,
    pub updates: Vec<RapidUpdate>,
    /// SHA-256 of the bytes, as both sides computed it.
    pub digest: [u8; 32],
}

impl TransferSummary {
    pub fn goodput_bps(&self) -> f64 {
        self.bytes as f64 * 8e9 / self.duration_ns.max(1) as f64
    }
}

/// Runs one transfer with the server at `server` (`HOST[:PORT]`): to it,
/// or with `opts.reverse` from it.
pub fn run(
    server: &str,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferSummary, ChannelError> {
    if opts.bytes.is_none() && opts.duration.is_none() {
        return Err(err("a transfer needs a size or a time"));
    }
    if opts.reverse && !matches!(opts.cc, SendCc::Rapid(_)) {
        return Err(err(format!(
            "{}: a server sends with Rapid only; run the transfer from this end (without -R)",
            opts.cc.name()
        )));
    }
    let direction = if opts.reverse {
        Direction::TransferReverse
    } else {
        Direction::Transfer
    };
    let mut cs = open_session(server, opts.key.as_deref(), direction, opts.timeout)?;
    let limits = cs.limits;
    let max_bytes = opts.bytes.unwrap_or(limits.max_session_bytes);
    if max_bytes > limits.max_session_bytes {
        return Err(err(format!(
            "--bytes {max_bytes} exceeds the server's session limit of {} bytes{}",
            limits.max_session_bytes,
            if cs.authenticated {
                ""
            } else {
                " without a key (--key-file)"
            }
        )));
    }
    let server_udp = SocketAddr::new(cs.addr.ip(), cs.udp_port);
    let overhead: u32 = if cs.addr.is_ipv4() { 42 } else { 62 };
    let probe_mtu = |s: &UdpSocket| -> u32 {
        let _ = s.connect(server_udp);
        crate::udp::connected_mtu(s).unwrap_or(1500).min(9000)
    };
    let summary = if opts.reverse {
        // The MTU toward the server stands in for the way back.
        let mtu = UdpSocket::bind(SocketAddr::new(cs.local_ip, 0))
            .map(|s| probe_mtu(&s))
            .unwrap_or(1500);
        let payload = payload_bytes(mtu, overhead, &limits)?;
        receive_from(
            &mut cs, server_udp, max_bytes, payload, overhead, opts, on_event,
        )?
    } else {
        let udp =
            UdpSocket::bind(SocketAddr::new(cs.local_ip, 0)).map_err(io_err("data socket"))?;
        let mtu = probe_mtu(&udp);
        udp.connect(server_udp).map_err(io_err("data socket"))?;
        udp.set_nonblocking(true).map_err(io_err("data socket"))?;
        let _ = sockopt::set_int(udp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);
        let payload = payload_bytes(mtu, overhead, &limits)?;
        send_to(&mut cs, &udp, max_bytes, payload, overhead, opts, on_event)?
    };
    write_message(&mut cs.writer, &Message::Close).map_err(io_err("control connection"))?;
    loop {
        match read_message(&mut cs.reader).map_err(ctl_err)? {
            Message::Bye { .. } => break,
            Message::Refused { reason } => return Err(refused(&reason)),
            _ => continue,
        }
    }
    Ok(summary)
}

/// The UDP payload of a full data packet on an `mtu`-byte path.
fn payload_bytes(mtu: u32, overhead: u32, limits: &Limits) -> Result<u32, ChannelError> {
    let payload = (mtu - (overhead - 14)).min(limits.max_packet_bytes as u32);
    if payload as usize <= HEADER_LEN {
        return Err(err(format!(
            "the server allows {payload}-byte packets; data packets need more than {HEADER_LEN}"
        )));
    }
    Ok(payload)
}

/// The server's answer to a transfer's request: the window it holds.
fn transfer_ready(cs: &mut crate::client::ControlSession) -> Result<u64, ChannelError> {
    match read_message(&mut cs.reader).map_err(ctl_err)? {
        Message::TransferReady { window_bytes } => Ok(window_bytes),
        Message::Refused { reason } => Err(refused(&reason)),
        other => Err(err(format!("expected TransferReady, got {other:?}"))),
    }
}

/// The client sends; the server stamps.
fn send_to(
    cs: &mut crate::client::ControlSession,
    udp: &UdpSocket,
    max_bytes: u64,
    payload: u32,
    overhead: u32,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferSummary, ChannelError> {
    write_message(
        &mut cs.writer,
        &Message::Transfer {
            max_bytes,
            packet_bytes: payload as u16,
        },
    )
    .map_err(io_err("control connection"))?;
    let window = transfer_ready(cs)?;
    let frame_bytes = payload + overhead;
    let host_limit =
        crate::host::pacing_limit_bps(crate::backend::Backend::Udp, payload, frame_bytes);
    let plan = SendPlan {
        session: cs.session,
        payload,
        frame_bytes,
        window,
        max_bps: (cs.limits.max_rate_bps as f64)
            .min(opts.max_rate_bps.unwrap_or(f64::INFINITY))
            .min(host_limit),
        cc: opts.cc,
        // A timed transfer ends at the session's limit too: the server
        // takes no byte past it.
        bytes: Some(max_bytes),
        seed: opts.seed,
        stop_at_ns: opts
            .duration
            .map(|d| clock::monotonic_ns() + d.as_nanos() as i64),
        end_ns: None,
        timeout_ns: opts.timeout.as_nanos() as i64,
        interval_ns: opts.interval.as_nanos().max(1_000_000) as i64,
        tell_receiver: false,
    };
    let fd = cs.reader.as_raw_fd();
    let sent = send::send(
        &mut cs.reader,
        &mut cs.writer,
        fd,
        &plan,
        &mut |b| send_udp(udp, b),
        on_event,
    )?;
    Ok(TransferSummary {
        server: cs.addr,
        reverse: false,
        authenticated: cs.authenticated,
        limits: cs.limits,
        cc: opts.cc,
        bytes: sent.bytes,
        duration_ns: sent.duration_ns,
        sent_bytes: sent.sent_bytes,
        retransmitted_bytes: sent.retransmitted_bytes,
        sent_packets: sent.sent_packets,
        lost_packets: sent.lost_packets,
        streams: sent.streams,
        frame_bytes,
        rtt_min_ns: sent.rtts.iter().min().copied(),
        rtt_median_ns: median_i64(&sent.rtts),
        intervals: sent.intervals,
        updates: sent.updates,
        digest: sent.digest,
    })
}

/// Opens this end's data socket (a first datagram tells the server where
/// to send, and opens any NAT on the way) and asks the server to send;
/// the socket and the receive window the server granted.
fn ask_transfer_from(
    cs: &mut crate::client::ControlSession,
    server_udp: SocketAddr,
    max_bytes: u64,
    payload: u32,
    opts: &TransferOptions,
) -> Result<(crate::udp::ProbeSocket, u64), ChannelError> {
    let mut sock = crate::udp::ProbeSocket::bind(SocketAddr::new(cs.local_ip, 0), 16 << 20)
        .map_err(io_err("data socket"))?;
    let mut sequence = 0;
    let (hello, _) = crate::packets::build(cs.session, u32::MAX, &[], &[], &mut sequence);
    sock.send_to(&hello, server_udp)
        .map_err(io_err("data socket"))?;
    write_message(
        &mut cs.writer,
        &Message::TransferFrom(TransferFrom {
            max_bytes,
            packet_bytes: payload as u16,
            max_rate_bps: opts.max_rate_bps.map_or(0, |r| r.max(1.0) as u64),
            raw: opts.cc == SendCc::Rapid(RapidEstimator::Raw),
            seed: opts.seed,
        }),
    )
    .map_err(io_err("control connection"))?;
    let window = transfer_ready(cs)?;
    Ok((sock, window))
}

/// The bytes this end holds must be the bytes the server sent.
fn check_digest(got: &receive::Received) -> Result<(), ChannelError> {
    if got.digest_ok() {
        return Ok(());
    }
    Err(err(format!(
        "DATA MISMATCH: this end holds {} bytes with SHA-256 {}, the server sent {} bytes with SHA-256 {}",
        got.bytes,
        hex(&got.digest),
        got.sender_bytes,
        hex(&got.sender_digest)
    )))
}

/// `-R`: the server sends; this end stamps, acknowledges and checks.
fn receive_from(
    cs: &mut crate::client::ControlSession,
    server_udp: SocketAddr,
    max_bytes: u64,
    payload: u32,
    overhead: u32,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferSummary, ChannelError> {
    let (sock, window) = ask_transfer_from(cs, server_udp, max_bytes, payload, opts)?;
    let start = clock::monotonic_ns();
    let interval_ns = opts.interval.as_nanos().max(1_000_000) as i64;
    let end = RecvEnd {
        conn: &cs.reader,
        sock: &sock,
        session_id: cs.session,
        peer_ip: server_udp.ip(),
        peer_port: None,
        max_stream_packets: cs.limits.max_stream_packets,
        end_ns: None,
        idle_ns: opts.timeout.as_nanos() as i64,
        stop_at_ns: opts.duration.map(|d| start + d.as_nanos() as i64),
    };
    let mut re = Reassembly::new(max_bytes, window);
    let writer = cs
        .reader
        .try_clone()
        .map_err(io_err("control connection"))?;
    let mut w = BufWriter::new(&writer);
    let mut st = ReverseState::default();
    let mut totals: Option<SenderTotals> = None;
    let mut next_report = start + interval_ns;
    let got = receive::receive(&end, &mut w, &mut re, &mut |ev| match ev {
        RecvEvent::Message(Message::RateUpdate(r)) => {
            let u = send::update_of(&r);
            st.estimate = u.abw_bps.or(st.estimate);
            st.rate_bps = u.rate_bps;
            on_event(TransferEvent::Update(&u));
            st.updates.push(u);
            Ok(())
        }
        RecvEvent::Message(Message::SenderTotals(t)) => {
            totals = Some(t);
            Ok(())
        }
        RecvEvent::Message(other) => Err(ServeEnd::Fail(format!(
            "unexpected message mid-transfer: {other:?}"
        ))),
        RecvEvent::Tick(delivered) => {
            let now = clock::monotonic_ns();
            if now >= next_report {
                let iv = st.interval(start, now, delivered);
                on_event(TransferEvent::Interval(&iv));
                st.intervals.push(iv);
                next_report += interval_ns;
            }
            Ok(())
        }
    })
    .map_err(|e| match e {
        ServeEnd::Refuse(why) | ServeEnd::Fail(why) => err(why),
    })?;
    let now = clock::monotonic_ns();
    if now > st.mark_ns.max(start) {
        let iv = st.interval(start, now, got.bytes);
        on_event(TransferEvent::Interval(&iv));
        st.intervals.push(iv);
    }
    check_digest(&got)?;
    let Some(totals) = totals else {
        return Err(err("the server ended the transfer without its totals"));
    };
    let rtt = |v: u64| (v > 0).then_some(v.min(i64::MAX as u64) as i64);
    Ok(TransferSummary {
        server: cs.addr,
        reverse: true,
        authenticated: cs.authenticated,
        limits: cs.limits,
        cc: opts.cc,
        bytes: got.bytes,
        duration_ns: now - start,
        sent_bytes: totals.sent_bytes,
        retransmitted_bytes: totals.retransmitted_bytes,
        sent_packets: totals.sent_packets,
        lost_packets: totals.lost_packets,
        streams: totals.streams,
        frame_bytes: payload + overhead,
        rtt_min_ns: rtt(totals.rtt_min_ns),
        rtt_median_ns: rtt(totals.rtt_median_ns),
        intervals: st.intervals,
        updates: st.updates,
        digest: got.digest,
    })
}

/// What the receiving client of `-R` knows between intervals.
#[derive(Default)]
struct ReverseState {
    updates: Vec<RapidUpdate>,
    intervals: Vec<TransferInterval>,
    estimate: Option<f64>,
    rate_bps: f64,
    mark_ns: i64,
    mark_delivered: u64,
}

impl ReverseState {
    /// The sender's counts are not known until the end: an interval here
    /// has the bytes delivered and the sender's rate and estimate.
    fn interval(&mut self, start: i64, now: i64, delivered: u64) -> TransferInterval {
        let iv = TransferInterval {
            start_ns: self.mark_ns.max(start) - start,
            end_ns: now - start,
            delivered_bytes: delivered - self.mark_delivered,
            sent_bytes: 0,
            retransmitted_bytes: 0,
            rate_bps: self.rate_bps,
            estimate_bps: self.estimate,
            rtt_ns: None,
            total_delivered_bytes: delivered,
        };
        self.mark_ns = now;
        self.mark_delivered = delivered;
        iv
    }
}

fn send_udp(udp: &UdpSocket, b: &[u8]) -> Result<(), ChannelError> {
    loop {
        match udp.send(b) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                sockopt::wait_fd(udp.as_raw_fd(), libc::POLLOUT, 10).map_err(io_err("data socket"))?;
            }
            // The server's port is gone (ICMP unreachable): it stopped.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                return Err(err(format!(
                    "the server's data port refused packets mid-transfer (the server stopped or restarted): {e}"
                )))
            }
            Err(e) => return Err(err(format!("data socket: {e}"))),
        }
    }
}
