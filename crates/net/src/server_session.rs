//! One accepted session of `tightlink server`: what the server allows
//! (its configuration), the session's probe socket and limits, and the
//! streams it takes and sends (forward, reverse, transfer) with the
//! checks each announcement must pass. `server` accepts connections,
//! runs the handshake and hands the session here.

use std::io::{self, BufWriter};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Mutex;
use std::time::Duration;

use tightlink_sys::sockopt;
use tightlink_wire::control::{
    read_message, write_message, ControlError, Direction, Limits, Message, RecordKind, Scheduled,
    TransferFrom,
};
use tightlink_wire::twamp::ProbeRepr;
use tightlink_wire::DropCounters;

use crate::backend::send_paced;
use crate::ctl::{send_records, MAX_STREAM_NS};
use crate::receiver::{absorb, collect_stream, Collected, Expect};
use crate::udp::{ProbeSocket, UdpTx};
use crate::{clock, packets};

/// A session's probe socket's receive buffer unless configured: at
/// 10 Gbit/s, 12.8 ms of probes queued while the server's thread is away.
pub const DEFAULT_PROBE_RCVBUF_BYTES: i32 = 16_000_000;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    /// Pre-shared key; with it, keyed sessions get `keyed_limits`.
    pub key: Option<Vec<u8>>,
    /// Refuse sessions that do not prove the key.
    pub require_key: bool,
    pub max_sessions: usize,
    pub max_sessions_per_ip: usize,
    /// Of `max_sessions`, slots only clients that prove the key may take
    /// (none when no key is configured).
    pub reserved_keyed_sessions: usize,
    /// Connections that have not finished their handshake, in all and per
    /// client address; beyond these the oldest pending one is cut.
    pub max_pending: usize,
    pub max_pending_per_ip: usize,
    /// Limits of a session without a key.
    pub open_limits: Limits,
    /// Limits of a session that proved the key.
    pub keyed_limits: Limits,
    pub handshake_timeout: Duration,
    /// Longest wait for the client's next message.
    pub idle_timeout: Duration,
    /// Log one line per session on stderr.
    pub log: bool,
    /// Receive buffer asked for each session's probe socket (forced past
    /// `net.core.rmem_max` where the server may): what a stream can queue
    /// while the server's thread is away.
    pub probe_rcvbuf_bytes: i32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], crate::DEFAULT_PORT)),
            key: None,
            require_key: false,
            max_sessions: 8,
            max_sessions_per_ip: 2,
            reserved_keyed_sessions: 2,
            max_pending: 256,
            max_pending_per_ip: 8,
            open_limits: Limits {
                max_rate_bps: 1_000_000_000,
                max_session_bytes: 50_000_000,
                max_session_ms: 30_000,
                max_stream_packets: 10_000,
                max_packet_bytes: 9_000,
            },
            keyed_limits: Limits {
                max_rate_bps: 100_000_000_000,
                max_session_bytes: 1_000_000_000,
                max_session_ms: 300_000,
                max_stream_packets: 10_000,
                max_packet_bytes: 9_000,
            },
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
            log: true,
            probe_rcvbuf_bytes: DEFAULT_PROBE_RCVBUF_BYTES,
        }
    }
}

/// Why a session ended, for its log line.
#[derive(Default)]
pub(crate) struct Outcome {
    pub(crate) direction: Option<Direction>,
    pub(crate) authenticated: bool,
    pub(crate) streams: u32,
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    pub(crate) drops: DropCounters,
    /// Datagrams the probe socket dropped during forward streams (its
    /// receive buffer full).
    pub(crate) socket_dropped: u64,
    pub(crate) end: String,
}

/// Sends `Refused` and returns the reason as the session's error.
pub(crate) fn refuse(w: &mut impl io::Write, reason: String) -> String {
    let _ = write_message(
        w,
        &Message::Refused {
            reason: reason.clone(),
        },
    );
    format!("refused: {reason}")
}

/// Sends `Busy` and returns it as the session's error.
pub(crate) fn busy(w: &mut impl io::Write, reason: String, after: std::time::Duration) -> String {
    let retry_after_ms = after.as_millis().min(u32::MAX as u128) as u32;
    let _ = write_message(
        w,
        &Message::Busy {
            retry_after_ms,
            reason: reason.clone(),
        },
    );
    format!("busy: {reason}; retry within {retry_after_ms} ms")
}

pub(crate) fn ctl<T>(r: Result<T, ControlError>) -> Result<T, String> {
    r.map_err(|e| match e {
        ControlError::Io(io)
            if matches!(
                io.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            ) =>
        {
            "timeout waiting for the client".to_string()
        }
        ControlError::Io(io) if io.kind() == io::ErrorKind::UnexpectedEof => {
            "client hung up".to_string()
        }
        e => e.to_string(),
    })
}

/// How a session ends early: refused (the client is told why) or failed
/// (the connection broke; nothing more can be said).
pub(crate) enum End {
    Refuse(String),
    /// No session slot: why, and when one is sure to be free.
    Busy(String, std::time::Duration),
    Fail(String),
}

impl From<io::Error> for End {
    fn from(e: io::Error) -> Self {
        End::Fail(e.to_string())
    }
}

impl From<crate::transfer::serve::ServeEnd> for End {
    fn from(e: crate::transfer::serve::ServeEnd) -> Self {
        use crate::transfer::serve::ServeEnd;
        match e {
            ServeEnd::Refuse(why) => End::Refuse(why),
            ServeEnd::Fail(why) => End::Fail(why),
        }
    }
}

/// A control message or why none came.
pub(crate) fn next_message(r: &mut impl io::Read) -> Result<Message, End> {
    ctl(read_message(r)).map_err(End::Fail)
}

pub(crate) fn send(w: &mut impl io::Write, m: &Message) -> Result<(), End> {
    write_message(w, m).map_err(End::from)
}

/// What the handshake settled.
pub(crate) struct Opened {
    pub(crate) direction: Direction,
    pub(crate) nonce: [u8; 32],
}

/// A forward stream's announcement.
pub(crate) struct StreamAsk {
    pub(crate) packets: u32,
    pub(crate) max_size: u64,
    pub(crate) bytes: u64,
    pub(crate) duration_ns: u64,
}

/// An accepted session: its probe socket, limits and running counts.
pub(crate) struct Session {
    pub(crate) peer: SocketAddr,
    pub(crate) direction: Direction,
    pub(crate) authenticated: bool,
    pub(crate) limits: Limits,
    pub(crate) session_id: u64,
    pub(crate) sock: ProbeSocket,
    pub(crate) session_end: i64,
    /// UDP bytes the client sent us, and the client's UDP address.
    pub(crate) seen: Collected,
    pub(crate) sent_udp_bytes: u64,
    pub(crate) tcp_credit: u64,
    pub(crate) sequence: u32,
}

impl Session {
    /// Opens the session's probe socket and tells the client its port.
    pub(crate) fn accept(
        conn: &TcpStream,
        w: &mut BufWriter<&TcpStream>,
        peer: SocketAddr,
        config: &ServerConfig,
        opened: Opened,
        authenticated: bool,
    ) -> Result<Session, End> {
        let limits = if authenticated {
            config.keyed_limits
        } else {
            config.open_limits
        };
        let local_ip = conn.local_addr()?.ip();
        let sock = ProbeSocket::bind(SocketAddr::new(local_ip, 0), config.probe_rcvbuf_bytes)?;
        let mut limits = limits;
        if opened.direction == Direction::Reverse {
            if let Some(pace) =
                reverse_pacing_limit_bps(&sock, peer, u32::from(limits.max_packet_bytes))
            {
                limits.max_rate_bps = limits.max_rate_bps.min(pace);
            }
        }
        let udp_port = sock.local_addr()?.port();
        let session_id = u64::from_be_bytes(opened.nonce[..8].try_into().unwrap());
        send(
            w,
            &Message::Accepted {
                session: session_id,
                udp_port,
                authenticated,
                limits,
            },
        )?;
        Ok(Session {
            peer,
            direction: opened.direction,
            authenticated,
            limits,
            session_id,
            sock,
            session_end: clock::monotonic_ns() + limits.max_session_ms as i64 * 1_000_000,
            seen: Collected::default(),
            sent_udp_bytes: 0,
            tcp_credit: 0,
            sequence: 0,
        })
    }

    /// What the socket may hold between streams: warm-ups and credit from
    /// the client, counted; anything else, dropped with a reason.
    pub(crate) fn between_streams(&self) -> Expect {
        Expect {
            session: self.session_id,
            stream: u32::MAX,
            packets: 0,
            max_size: self.limits.max_packet_bytes as usize,
            peer_ip: self.peer.ip(),
            peer_port: self.seen.peer.map(|p| p.port()),
        }
    }

    /// The client sends a stream: stamp it, send the receive records.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn forward_stream(
        &mut self,
        conn: &TcpStream,
        r: &mut &TcpStream,
        w: &mut BufWriter<&TcpStream>,
        o: &mut Outcome,
        stream: u32,
        ask: StreamAsk,
        remaining_ns: i64,
    ) -> Result<(), End> {
        check_stream(
            &self.limits,
            ask.packets,
            ask.max_size,
            ask.bytes,
            o.bytes,
            ask.duration_ns,
            remaining_ns,
        )
        .map_err(End::Refuse)?;
        let dropped_before = self.sock.socket_drops()?;
        send(w, &Message::Ready { stream })?;
        let expect = Expect {
            session: self.session_id,
            stream,
            packets: ask.packets,
            max_size: ask.max_size as usize,
            peer_ip: self.peer.ip(),
            peer_port: self.seen.peer.map(|p| p.port()),
        };
        let deadline = clock::monotonic_ns() + ask.duration_ns as i64 + 2_000_000_000;
        let mut sender_done = false;
        let c = collect_stream(
            &mut &self.sock,
            &expect,
            Some(conn.as_raw_fd()),
            &mut || match read_message(r) {
                Ok(Message::StreamSent { stream: s }) if s == stream => {
                    sender_done = true;
                    Ok(true)
                }
                Ok(_) => Err(io::Error::other("expected StreamSent")),
                Err(e) => Err(io::Error::other(e.to_string())),
            },
            deadline,
        )?;
        if !sender_done {
            return Err(End::Refuse("stream not finished in time".into()));
        }
        o.streams += 1;
        o.packets += ask.packets as u64;
        o.bytes += ask.bytes;
        o.drops.merge(&c.drops);
        self.seen.peer = self.seen.peer.or(c.peer);
        send_records(w, stream, RecordKind::Receive, &c.recv_ns)?;
        // What the socket dropped: this host's losses, not the path's.
        let dropped = self.sock.socket_drops()?.wrapping_sub(dropped_before);
        o.socket_dropped += u64::from(dropped);
        send(w, &Message::SocketDrops { stream, dropped })?;
        Ok(())
    }

    /// The client asks for a stream: check its credit and address, send
    /// the schedule, then the transmit records.
    pub(crate) fn reverse_stream(
        &mut self,
        w: &mut BufWriter<&TcpStream>,
        o: &mut Outcome,
        stream: u32,
        schedule: &[Scheduled],
        remaining_ns: i64,
    ) -> Result<(), End> {
        let bytes: u64 = schedule.iter().map(|s| s.size_bytes as u64).sum();
        let max_size = schedule.iter().map(|s| s.size_bytes).max().unwrap_or(0);
        let duration_ns = schedule.last().map_or(0, |s| s.offset_ns as u64);
        check_stream(
            &self.limits,
            schedule.len() as u32,
            max_size as u64,
            bytes,
            o.bytes,
            duration_ns,
            remaining_ns,
        )
        .map_err(End::Refuse)?;
        if schedule.windows(2).any(|p| p[1].offset_ns < p[0].offset_ns) {
            return Err(End::Refuse("schedule offsets must not decrease".into()));
        }
        let client = self.await_credit(bytes)?;
        send(w, &Message::Ready { stream })?;
        let d = send_schedule(
            &mut self.sock,
            client,
            self.session_id,
            stream,
            schedule,
            &mut self.sequence,
        )?;
        self.sent_udp_bytes += bytes;
        o.streams += 1;
        o.packets += schedule.len() as u64;
        o.bytes += bytes;
        send(w, &Message::StreamSent { stream })?;
        send_records(w, stream, RecordKind::Transmit, &d.tx_ns)?;
        // How late each send call was: a stalled session thread is late by
        // exactly this, where the kernel stamps also carry the forwarding
        // work behind the sends.
        let lags: Vec<Option<i64>> = d
            .user_ns
            .iter()
            .zip(&d.scheduled_ns)
            .map(|(u, s)| Some(u - s))
            .collect();
        send_records(w, stream, RecordKind::SendLag, &lags)?;
        Ok(())
    }

    /// Learns the client's UDP address and counts its credit, waiting up
    /// to 200 ms for what it sent before asking for `bytes`: the server
    /// sends only where the client has sent from, and without a key no
    /// more than it received.
    pub(crate) fn await_credit(&mut self, bytes: u64) -> Result<SocketAddr, End> {
        let need = self.sent_udp_bytes + bytes;
        let until = clock::monotonic_ns() + 200_000_000;
        loop {
            let expect = self.between_streams();
            absorb(&self.sock, &expect, &mut self.seen)?;
            let enough = self.authenticated || self.seen.peer_bytes + self.tcp_credit >= need;
            if (self.seen.peer.is_some() && enough) || clock::monotonic_ns() > until {
                break;
            }
            sockopt::wait_fd(self.sock.fd(), libc::POLLIN, 5)?;
        }
        let Some(client) = self.seen.peer else {
            return Err(End::Refuse(
                "no UDP packet of this session arrived from the client's address: the server sends only where the client has sent from".into(),
            ));
        };
        if !self.authenticated && self.seen.peer_bytes + self.tcp_credit < need {
            return Err(End::Refuse(format!(
                "reverse stream of {bytes} bytes exceeds the client's credit ({} of {need} bytes received); without a key the server sends no more than it received",
                self.seen.peer_bytes + self.tcp_credit
            )));
        }
        Ok(client)
    }

    /// A transfer: data in, stamps and the in-order count out, the digest
    /// compared at the end.
    pub(crate) fn transfer(
        &mut self,
        conn: &TcpStream,
        w: &mut BufWriter<&TcpStream>,
        o: &mut Outcome,
        config: &ServerConfig,
        max_bytes: u64,
        packet_bytes: u16,
    ) -> Result<(), End> {
        let session = self.transfer_session(conn, o, config);
        let served =
            crate::transfer::serve::receive(&session, &self.sock, w, max_bytes, packet_bytes)?;
        o.streams += served.streams;
        o.packets += served.packets;
        o.bytes += served.bytes;
        o.drops.merge(&served.drops);
        if !served.digest_ok {
            return Err(End::Fail(format!(
                "transfer digest mismatch after {} bytes (the client was told)",
                served.bytes
            )));
        }
        Ok(())
    }

    /// What a transfer in this session may use: its limits less the
    /// bytes already moved.
    pub(crate) fn transfer_session<'a>(
        &self,
        conn: &'a TcpStream,
        o: &Outcome,
        config: &ServerConfig,
    ) -> crate::transfer::serve::Session<'a> {
        let mut limits = self.limits;
        limits.max_session_bytes = limits.max_session_bytes.saturating_sub(o.bytes);
        crate::transfer::serve::Session {
            conn,
            session_id: self.session_id,
            peer: self.peer,
            limits,
            authenticated: self.authenticated,
            session_end_ns: self.session_end,
            idle_timeout: config.idle_timeout,
        }
    }

    /// A reverse transfer: data out to the address the client's data
    /// socket spoke from, its stamps and acknowledgements in.
    pub(crate) fn transfer_reverse(
        &mut self,
        conn: &TcpStream,
        w: &mut BufWriter<&TcpStream>,
        o: &mut Outcome,
        config: &ServerConfig,
        ask: &TransferFrom,
    ) -> Result<(), End> {
        let session = self.transfer_session(conn, o, config);
        let served =
            crate::transfer::serve::send(&session, &mut self.sock, &mut self.seen, w, ask)?;
        self.sent_udp_bytes += served.bytes;
        o.streams += served.streams;
        o.packets += served.packets;
        o.bytes += served.bytes;
        Ok(())
    }

    /// Counts what arrived since the last stream and says goodbye with
    /// the drop counters.
    pub(crate) fn close(
        &mut self,
        w: &mut BufWriter<&TcpStream>,
        o: &mut Outcome,
    ) -> Result<(), End> {
        let expect = self.between_streams();
        absorb(&self.sock, &expect, &mut self.seen)?;
        o.drops.merge(&self.seen.drops);
        send(w, &Message::Bye { drops: o.drops })
    }
}

/// Checks an announced stream against the session's limits; the error
/// names the limit.
pub(crate) fn check_stream(
    l: &Limits,
    packets: u32,
    max_size: u64,
    bytes: u64,
    used_bytes: u64,
    duration_ns: u64,
    remaining_ns: i64,
) -> Result<(), String> {
    if packets == 0 || packets > l.max_stream_packets {
        return Err(format!(
            "{packets} packets per stream; the limit is 1-{}",
            l.max_stream_packets
        ));
    }
    if max_size < ProbeRepr::buffer_len() as u64 || max_size > l.max_packet_bytes as u64 {
        return Err(format!(
            "packet size {max_size} bytes; the limit is {}-{}",
            ProbeRepr::buffer_len(),
            l.max_packet_bytes
        ));
    }
    if bytes > packets as u64 * max_size {
        return Err(format!(
            "{bytes} bytes announced for {packets} packets of at most {max_size}"
        ));
    }
    if bytes.saturating_add(used_bytes) > l.max_session_bytes {
        return Err(format!(
            "session bytes limit of {} reached",
            l.max_session_bytes
        ));
    }
    if duration_ns > MAX_STREAM_NS || duration_ns as i64 > remaining_ns {
        return Err(format!(
            "stream of {duration_ns} ns is longer than {MAX_STREAM_NS} ns or the session's remaining time"
        ));
    }
    if packets > 1 {
        // Bytes after the first packet over the span: the stream's rate.
        let rate = (bytes - bytes / packets as u64) as f64 * 8e9 / duration_ns.max(1) as f64;
        if rate > l.max_rate_bps as f64 * 1.01 {
            return Err(format!(
                "stream rate {:.0} bit/s exceeds the session's limit of {} bit/s",
                rate, l.max_rate_bps
            ));
        }
    }
    Ok(())
}

/// The rate (bit/s, frame layer) at which this host paces probes of the
/// largest payload the path to `peer` carries (its route MTU, at most
/// `max_payload`): [`crate::host::pacing_limit_bps`] for the UDP backend,
/// measured once per payload size and kept. `None` when it cannot be
/// measured (no loopback in this namespace): the policy limit stands.
pub(crate) fn reverse_pacing_limit_bps(
    sock: &ProbeSocket,
    peer: SocketAddr,
    max_payload: u32,
) -> Option<u64> {
    static MEASURED: Mutex<Vec<(u32, f64)>> = Mutex::new(Vec::new());
    let (payload, frame) = crate::udp::probe_payload_and_frame(sock, peer, max_payload);
    let mut m = MEASURED.lock().unwrap_or_else(|e| e.into_inner());
    let bps = match m.iter().find(|(p, _)| *p == payload) {
        Some(&(_, bps)) => bps,
        None => {
            let bps = crate::host::pacing_limit_bps(crate::backend::Backend::Udp, payload, frame);
            m.push((payload, bps));
            bps
        }
    };
    (bps.is_finite() && bps >= 1e6).then_some(bps as u64)
}

/// Sends a reverse schedule to the client; returns its departures
/// (scheduled and user-space send times, kernel transmit stamps).
pub(crate) fn send_schedule(
    sock: &mut ProbeSocket,
    to: SocketAddr,
    session: u64,
    stream: u32,
    schedule: &[Scheduled],
    sequence: &mut u32,
) -> io::Result<crate::stamps::Departures> {
    let offsets: Vec<i64> = schedule.iter().map(|s| s.offset_ns as i64).collect();
    let sizes: Vec<u32> = schedule.iter().map(|s| s.size_bytes as u32).collect();
    let (warm, mut pk) = packets::build(session, stream, &offsets, &sizes, sequence);
    send_paced(
        &mut UdpTx { sock, to },
        &warm,
        &mut pk,
        &offsets,
        clock::monotonic_ns() + 200_000,
    )
}
