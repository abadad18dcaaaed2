//! The UDP channel: probing strategies talk to a `tightlink server`
//! through it. Forward mode sends paced probes
//! and gets the server's kernel receive stamps back over the control
//! connection; reverse mode has the server send the schedule and stamps
//! arrivals here.
//!
//! Rates are counted on the Ethernet frame without preamble and FCS (the
//! IP packet plus 14 bytes), as tbf and the kernel's interface counters
//! count: a request's `size_bytes` is that frame, and the UDP payload is
//! 42 bytes less (62 over IPv6).
//!
//! Each stream's departures are judged ([`judge_departures`](crate::ledger::judge_departures)): a sender
//! that fell behind its schedule marks the stream host-limited; transmit
//! stamps spread wider than the schedule mean the sender's own interface
//! queued the probes, i.e. the tight link is the sender's own.

use std::io::{self, BufWriter};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::Duration;
use tightlink_core::warning::{Warning, WarningCode};

use tightlink_core::channel::{
    Channel, ChannelError, ChannelInfo, Probed, SideReport, StreamRequest,
};
use tightlink_core::ProbeStream;
use tightlink_wire::control::{
    read_message, write_message, Direction, Limits, Message, Padding, RecordKind, Scheduled,
    MAX_CREDIT, MAX_SCHEDULE, VERSION,
};
use tightlink_wire::twamp::ProbeRepr;
use tightlink_wire::DropCounters;

use crate::address::with_default_port;
use crate::backend::packet::PacketRing;
use crate::backend::{self, xdp};
use crate::backend::{send_paced, Backend, Transmit};
use crate::ctl::{ctl_err, io_err, refused};
use crate::ledger::SendLedger;
use crate::receiver::{collect_stream, Expect};
use crate::stamps::Departures;
use crate::udp::probe_payload_and_frame;
use crate::udp::{ProbeSocket, UdpTx};
use crate::{auth, clock, host, packets};

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub key: Option<Vec<u8>>,
    /// `stamp:` reflectors: STAMP's authenticated mode with this key.
    pub stamp_key: Option<crate::auth::StampKey>,
    pub direction: Direction,
    /// Never probe faster than this (bit/s), whatever the host could do.
    pub max_rate_bps: Option<f64>,
    /// Connect and per-step timeout of the control connection.
    pub timeout: Duration,
    /// How this end sends (forward) or receives (reverse) probes.
    pub backend: Backend,
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            key: None,
            stamp_key: None,
            direction: Direction::Forward,
            max_rate_bps: None,
            timeout: Duration::from_secs(5),
            backend: Backend::Udp,
        }
    }
}

pub struct UdpChannel {
    /// Unbuffered: the receive loop polls its fd, which must not hide
    /// bytes already read into a buffer.
    reader: TcpStream,
    writer: BufWriter<TcpStream>,
    ctrl_fd: i32,
    sock: ProbeSocket,
    /// The raw sender (forward mode, backends other than udp).
    raw_tx: Option<Box<dyn Transmit>>,
    /// The packet ring (reverse mode, packet backend).
    ring: Option<PacketRing>,
    backend: Backend,
    server_udp: SocketAddr,
    session: u64,
    limits: Limits,
    authenticated: bool,
    direction: Direction,
    /// Frame bytes beyond the UDP payload (Ethernet + IP + UDP headers).
    overhead: u32,
    frame_bytes: u32,
    next_stream: u32,
    sequence: u32,
    elapsed_ns: i64,
    max_rate_bps: f64,
    host_limit_bps: f64,
    /// Credit sent minus reverse bytes asked for (reverse without a key).
    credit_balance: i64,
    ledger: SendLedger,
    last_departures: Option<Departures>,
    /// Packets this end dropped while timestamping (reverse mode).
    pub drops: DropCounters,
    /// The server's drop counts, once the session is closed.
    pub server_drops: Option<DropCounters>,
    warnings: Vec<Warning>,
    description: String,
}

/// A control connection past its handshake: the session the server
/// accepted, and the limits it set.
pub(crate) struct ControlSession {
    /// Unbuffered: receive loops poll its fd, which must not hide bytes
    /// already read into a buffer.
    pub reader: TcpStream,
    pub writer: BufWriter<TcpStream>,
    pub addr: SocketAddr,
    pub local_ip: std::net::IpAddr,
    pub session: u64,
    pub udp_port: u16,
    pub authenticated: bool,
    pub limits: Limits,
}

/// Connects to `server` (`HOST[:PORT]`, port 7447 by default), proves the
/// key if given and opens a session in `direction`.
pub(crate) fn open_session(
    server: &str,
    key: Option<&[u8]>,
    direction: Direction,
    timeout: Duration,
) -> Result<ControlSession, ChannelError> {
    let with_port = with_default_port(server);
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| ChannelError::Unreachable(format!("server '{server}': {e}")))?
        .next()
        .ok_or_else(|| ChannelError::Unreachable(format!("server '{server}': no address")))?;
    let conn = TcpStream::connect_timeout(&addr, timeout)
        .map_err(|e| ChannelError::from_io(&format!("connect to {addr}"), &e))?;
    let setup = io_err("control connection");
    conn.set_nodelay(true).map_err(&setup)?;
    conn.set_read_timeout(Some(timeout)).map_err(&setup)?;
    conn.set_write_timeout(Some(timeout)).map_err(&setup)?;
    let mut reader = conn.try_clone().map_err(&setup)?;
    let mut writer = BufWriter::new(conn.try_clone().map_err(&setup)?);
    write_message(
        &mut writer,
        &Message::Hello {
            version: VERSION,
            wants_key: key.is_some(),
        },
    )
    .map_err(&setup)?;
    let nonce = match read_message(&mut reader).map_err(ctl_err)? {
        Message::Challenge {
            version,
            nonce,
            key_required,
            ..
        } => {
            if version != VERSION {
                return Err(ChannelError::Refused(format!(
                    "server speaks control protocol {version}, this client {VERSION}"
                )));
            }
            if key_required && key.is_none() {
                return Err(refused("this server requires a key (--key-file)"));
            }
            nonce
        }
        Message::Refused { reason } => return Err(refused(&reason)),
        other => {
            return Err(ChannelError::Protocol(format!(
                "expected Challenge, got {other:?}"
            )))
        }
    };
    write_message(
        &mut writer,
        &Message::Open {
            direction,
            auth: key.map(|k| auth::answer(k, &nonce, direction)),
        },
    )
    .map_err(&setup)?;
    let local_ip = conn.local_addr().map_err(&setup)?.ip();
    match read_message(&mut reader).map_err(ctl_err)? {
        Message::Accepted {
            session,
            udp_port,
            authenticated,
            limits,
        } => Ok(ControlSession {
            reader,
            writer,
            addr,
            local_ip,
            session,
            udp_port,
            authenticated,
            limits,
        }),
        Message::Refused { reason } => Err(refused(&reason)),
        Message::Busy {
            retry_after_ms,
            reason,
        } => Err(ChannelError::Busy {
            retry_after_ms: u64::from(retry_after_ms),
            reason,
        }),
        other => Err(ChannelError::Protocol(format!(
            "expected Accepted, got {other:?}"
        ))),
    }
}

impl UdpChannel {
    /// Connects to `server` (`HOST[:PORT]`, port 7447 by default), proves
    /// the key if given, opens a session in `opts.direction`.
    pub fn connect(server: &str, opts: &ClientOptions) -> Result<UdpChannel, ChannelError> {
        if opts.direction == Direction::Transfer {
            return Err(ChannelError::BadRequest(
                "a transfer session is not a probe channel (see transfer)".into(),
            ));
        }
        let cs = open_session(server, opts.key.as_deref(), opts.direction, opts.timeout)?;
        let (addr, session, authenticated, limits) =
            (cs.addr, cs.session, cs.authenticated, cs.limits);
        let (reader, writer) = (cs.reader, cs.writer);
        let ctrl_fd = reader.as_raw_fd();
        let sock = ProbeSocket::bind(SocketAddr::new(cs.local_ip, 0), 16 << 20)
            .map_err(io_err("probe socket"))?;
        let server_udp = SocketAddr::new(addr.ip(), cs.udp_port);
        let (mut payload, frame) =
            probe_payload_and_frame(&sock, server_udp, u32::from(limits.max_packet_bytes));
        let overhead = frame - payload;
        if opts.backend == Backend::Xdp {
            payload = payload.min(xdp::MAX_PAYLOAD as u32);
        }
        if payload < ProbeRepr::buffer_len() as u32 {
            return Err(ChannelError::Refused(format!(
                "the server allows {payload}-byte payloads; probes need {}",
                ProbeRepr::buffer_len()
            )));
        }
        let frame_bytes = payload + overhead;
        let mut warnings = Vec::new();
        if sock.udp_gro() {
            warnings.push(Warning::new(
                WarningCode::MergingOffloads,
                "UDP_GRO is on for the probe socket: it merges packets and their timestamps",
            ));
        }
        warnings.extend(host::merging_offloads(cs.local_ip));
        let (raw_tx, ring) = backend::open_for_session(
            opts.backend,
            opts.direction,
            &sock,
            server_udp,
            session,
            &mut warnings,
        )?;
        let host_limit_bps = match opts.direction {
            Direction::Forward => host::pacing_limit_bps(opts.backend, payload, frame_bytes),
            // The server sends; its limit is in its clamped max rate.
            Direction::Reverse | Direction::Transfer | Direction::TransferReverse => f64::INFINITY,
        };
        let max_rate_bps = host_limit_bps
            .min(limits.max_rate_bps as f64)
            .min(opts.max_rate_bps.unwrap_or(f64::INFINITY));
        let mut ch = UdpChannel {
            reader,
            writer,
            ctrl_fd,
            sock,
            raw_tx,
            ring,
            backend: opts.backend,
            server_udp,
            session,
            limits,
            authenticated,
            direction: opts.direction,
            overhead,
            frame_bytes,
            next_stream: 0,
            sequence: 0,
            elapsed_ns: 0,
            max_rate_bps,
            host_limit_bps,
            credit_balance: 0,
            ledger: SendLedger::open(tightlink_sys::cpu_time::read().ok()),
            last_departures: None,
            drops: DropCounters::default(),
            server_drops: None,
            warnings,
            description: format!(
                "tightlink server {addr} ({}{}, {} backend)",
                opts.direction.name(),
                if authenticated { ", key" } else { "" },
                opts.backend
            ),
        };
        if opts.direction == Direction::Reverse {
            // Tell the server where to send (and open any NAT on the way).
            ch.register_udp()?;
        }
        Ok(ch)
    }

    pub fn limits(&self) -> Limits {
        self.limits
    }

    pub fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// The server's UDP address for this session.
    pub fn server_udp(&self) -> SocketAddr {
        self.server_udp
    }

    /// The local probe socket's address.
    pub fn local_udp(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Ends the session; the server answers with its drop counters.
    pub fn close_session(&mut self) -> Result<DropCounters, ChannelError> {
        write_message(&mut self.writer, &Message::Close).map_err(io_err("close"))?;
        loop {
            match read_message(&mut self.reader).map_err(ctl_err)? {
                Message::Bye { drops } => {
                    self.server_drops = Some(drops);
                    return Ok(drops);
                }
                Message::Refused { reason } => return Err(refused(&reason)),
                _ => continue,
            }
        }
    }

    /// Sends one warm-up packet to the server's UDP port: it learns where
    /// to send (only there), and any NAT on the way opens.
    fn register_udp(&mut self) -> Result<(), ChannelError> {
        let (warm, _) = packets::build(self.session, u32::MAX, &[], &[], &mut self.sequence);
        self.sock
            .send_to(&warm, self.server_udp)
            .map_err(io_err("register"))?;
        self.credit_balance += warm.len() as i64;
        Ok(())
    }

    /// Tops up the credit an unauthenticated reverse session needs (the
    /// server sends no more than it received) with `Credit` padding over
    /// the control connection.
    fn send_credit(&mut self, bytes: u64) -> Result<(), ChannelError> {
        self.credit_balance -= bytes as i64;
        while self.credit_balance < 0 {
            let len = (-self.credit_balance).min(MAX_CREDIT as i64) as u32;
            write_message(
                &mut self.writer,
                &Message::Credit {
                    padding: Padding { len },
                },
            )
            .map_err(io_err("credit"))?;
            self.credit_balance += len as i64;
        }
        Ok(())
    }

    fn expect_ready(&mut self, stream: u32) -> Result<(), ChannelError> {
        match read_message(&mut self.reader).map_err(ctl_err)? {
            Message::Ready { stream: s } if s == stream => Ok(()),
            Message::Refused { reason } => Err(refused(&reason)),
            other => Err(ChannelError::Protocol(format!(
                "expected Ready, got {other:?}"
            ))),
        }
    }

    /// Reads `Records` frames of `kind` until the last one; stamps by
    /// position.
    fn read_records(
        &mut self,
        stream: u32,
        kind: RecordKind,
        n: usize,
    ) -> Result<Vec<Option<i64>>, ChannelError> {
        let mut out = vec![None; n];
        loop {
            match read_message(&mut self.reader).map_err(ctl_err)? {
                Message::Records {
                    stream: s,
                    kind: k,
                    base_ns,
                    last,
                    records,
                } if s == stream && k == kind => {
                    for r in records {
                        let slot = out.get_mut(r.position as usize).ok_or_else(|| {
                            ChannelError::Protocol(format!(
                                "server sent a record for packet {} of a {n}-packet stream",
                                r.position
                            ))
                        })?;
                        *slot = Some(base_ns + r.offset_ns as i64);
                    }
                    if last {
                        return Ok(out);
                    }
                }
                Message::Refused { reason } => return Err(refused(&reason)),
                other => {
                    return Err(ChannelError::Protocol(format!(
                        "expected Records, got {other:?}"
                    )))
                }
            }
        }
    }

    fn payload_sizes(&self, request: &StreamRequest) -> Result<Vec<u32>, ChannelError> {
        request
            .sizes
            .iter()
            .map(|&s| {
                let payload = s.saturating_sub(self.overhead);
                if payload < ProbeRepr::buffer_len() as u32 || payload > self.limits.max_packet_bytes as u32 {
                    Err(ChannelError::BadRequest(format!(
                        "probe size {s} bytes (frame): the UDP payload must be {}-{} bytes, i.e. frames of {}-{}",
                        ProbeRepr::buffer_len(),
                        self.limits.max_packet_bytes,
                        ProbeRepr::buffer_len() as u32 + self.overhead,
                        self.limits.max_packet_bytes as u32 + self.overhead
                    )))
                } else {
                    Ok(payload)
                }
            })
            .collect()
    }

    /// The departures of the last stream: this host's sends (forward) or
    /// the server's transmit stamps on its schedule (reverse).
    pub fn last_departures(&self) -> Option<&Departures> {
        self.last_departures.as_ref()
    }

    /// The backend this end sends or receives with.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Judges a stream's departures; true where its sender fell behind
    /// with no queue of its own to explain it.
    fn note(&mut self, d: &Departures, sizes: &[u32]) -> bool {
        // xdp has no transmit stamps to miss (said once at connect).
        let stamps = self.backend != Backend::Xdp || self.direction == Direction::Reverse;
        self.ledger.note(d, sizes, stamps)
    }

    fn forward(&mut self, request: &StreamRequest, stream: u32) -> Result<Sent, ChannelError> {
        let n = request.offsets_ns.len();
        let payloads = self.payload_sizes(request)?;
        let duration = request.offsets_ns.last().copied().unwrap_or(0).max(0) as u64;
        write_message(
            &mut self.writer,
            &Message::Forward {
                stream,
                packets: n as u32,
                max_size: payloads.iter().copied().max().unwrap_or(0) as u16,
                bytes: payloads.iter().map(|&p| p as u64).sum(),
                duration_ns: duration,
            },
        )
        .map_err(io_err("announce stream"))?;
        self.expect_ready(stream)?;
        let (warm, mut pk) = packets::build(
            self.session,
            stream,
            &request.offsets_ns,
            &payloads,
            &mut self.sequence,
        );
        let mut udp = UdpTx {
            sock: &mut self.sock,
            to: self.server_udp,
        };
        let tx: &mut dyn Transmit = match self.raw_tx.as_mut() {
            Some(t) => t.as_mut(),
            None => &mut udp,
        };
        let d = send_paced(
            tx,
            &warm,
            &mut pk,
            &request.offsets_ns,
            clock::monotonic_ns() + 200_000,
        )
        .map_err(io_err("send"))?;
        write_message(&mut self.writer, &Message::StreamSent { stream })
            .map_err(io_err("stream sent"))?;
        let recv = self.read_records(stream, RecordKind::Receive, n)?;
        let dropped = self.read_socket_drops(stream)?;
        let late = self.note(&d, &request.sizes);
        let overflowed = self.ledger.note_receiver_drops(dropped);
        let s = self
            .ledger
            .stream(stream, &request.sizes, &d.scheduled_ns, &recv);
        self.last_departures = Some(d);
        Ok(Sent {
            stream: s,
            late,
            overflowed,
        })
    }

    /// Reads what the server's socket dropped while `stream` came in.
    fn read_socket_drops(&mut self, stream: u32) -> Result<u32, ChannelError> {
        match read_message(&mut self.reader).map_err(ctl_err)? {
            Message::SocketDrops { stream: s, dropped } if s == stream => Ok(dropped),
            Message::Refused { reason } => Err(refused(&reason)),
            other => Err(ChannelError::Protocol(format!(
                "expected SocketDrops for stream {stream}, got {other:?}"
            ))),
        }
    }

    fn reverse(&mut self, request: &StreamRequest, stream: u32) -> Result<Sent, ChannelError> {
        let n = request.offsets_ns.len();
        if n > MAX_SCHEDULE {
            return Err(ChannelError::BadRequest(format!(
                "reverse streams hold at most {MAX_SCHEDULE} packets, {n} asked"
            )));
        }
        let payloads = self.payload_sizes(request)?;
        let schedule: Vec<Scheduled> = request
            .offsets_ns
            .iter()
            .zip(&payloads)
            .map(|(&o, &p)| Scheduled {
                offset_ns: o.clamp(0, u32::MAX as i64) as u32,
                size_bytes: p as u16,
            })
            .collect();
        let bytes: u64 = payloads.iter().map(|&p| p as u64).sum();
        if !self.authenticated {
            self.send_credit(bytes)?;
        }
        write_message(&mut self.writer, &Message::Reverse { stream, schedule })
            .map_err(io_err("announce reverse stream"))?;
        self.expect_ready(stream)?;
        let expect = Expect {
            session: self.session,
            stream,
            packets: n as u32,
            max_size: payloads.iter().copied().max().unwrap_or(0) as usize,
            peer_ip: self.server_udp.ip(),
            peer_port: Some(self.server_udp.port()),
        };
        let duration = request.offsets_ns.last().copied().unwrap_or(0);
        let deadline = clock::monotonic_ns() + duration + 2_000_000_000;
        let dropped_before = self.socket_drops()?;
        let reader = &mut self.reader;
        let mut udp = &self.sock;
        let source: &mut dyn crate::backend::ProbeSource = match self.ring.as_mut() {
            Some(r) => r,
            None => &mut udp,
        };
        let c = collect_stream(
            source,
            &expect,
            Some(self.ctrl_fd),
            &mut || match read_message(reader) {
                Ok(Message::StreamSent { stream: s }) if s == stream => Ok(true),
                Ok(Message::Refused { reason }) => {
                    Err(io::Error::other(format!("the server refused: {reason}")))
                }
                Ok(other) => Err(io::Error::other(format!(
                    "expected StreamSent, got {other:?}"
                ))),
                Err(e) => Err(io::Error::other(e.to_string())),
            },
            deadline,
        )
        .map_err(io_err("receive"))?;
        let mut dropped = self.socket_drops()?.wrapping_sub(dropped_before);
        self.drops.merge(&c.drops);
        if let Some(r) = &self.ring {
            // The socket got the same datagrams the ring did: discard them.
            crate::receiver::discard(&self.sock).map_err(io_err("receive"))?;
            // A full ring drops frames as a full socket buffer does: this
            // host's losses (the count is since the last read).
            let lost = r.dropped().map_err(io_err("packet ring"))?;
            dropped = dropped.saturating_add(u32::try_from(lost).unwrap_or(u32::MAX));
            if r.malformed > 0 {
                self.warnings.push(Warning::new(
                    WarningCode::MalformedFrames,
                    format!("packet ring: {} frames not IPv4 UDP", r.malformed),
                ));
            }
        }
        if c.unstamped > 0 {
            return Err(ChannelError::Io(format!(
                "{} packets came without a kernel receive timestamp",
                c.unstamped
            )));
        }
        let tx = self.read_records(stream, RecordKind::Transmit, n)?;
        let lags = self.read_records(stream, RecordKind::SendLag, n)?;
        // Schedule on the server's clock, anchored at its first stamp.
        let first_stamped = tx.iter().position(|t| t.is_some()).unwrap_or(0);
        let anchor = tx.get(first_stamped).copied().flatten().unwrap_or(0)
            - request.offsets_ns.get(first_stamped).copied().unwrap_or(0);
        let scheduled_ns: Vec<i64> = request.offsets_ns.iter().map(|o| anchor + o).collect();
        // The server's send calls on that schedule, late by what it said
        // (every packet has one, or none is used).
        let user_ns = scheduled_ns
            .iter()
            .zip(&lags)
            .map(|(s, l)| l.map(|l| s + l))
            .collect::<Option<Vec<i64>>>()
            .unwrap_or_default();
        let d = Departures {
            scheduled_ns,
            user_ns,
            tx_ns: tx,
        };
        let late = self.note(&d, &request.sizes);
        let overflowed = self.ledger.note_receiver_drops(dropped);
        let s = self
            .ledger
            .stream(stream, &request.sizes, &d.scheduled_ns, &c.recv_ns);
        self.last_departures = Some(d);
        Ok(Sent {
            stream: s,
            late,
            overflowed,
        })
    }

    /// What this end's probe socket has dropped since it opened; with the
    /// packet ring the socket's copies are discarded unread (the ring's
    /// own drops count instead), so none of its drops count.
    fn socket_drops(&self) -> Result<u32, ChannelError> {
        if self.ring.is_some() {
            return Ok(0);
        }
        self.sock
            .socket_drops()
            .map_err(io_err("socket drop count"))
    }
}

/// One stream as it came back, and what the hosts did to it.
struct Sent {
    stream: ProbeStream,
    late: bool,
    overflowed: bool,
}

impl Channel for UdpChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let stream = self.next_stream;
        self.next_stream += 1;
        let sent = match self.direction {
            Direction::Forward => self.forward(request, stream)?,
            Direction::Reverse | Direction::Transfer | Direction::TransferReverse => {
                self.reverse(request, stream)?
            }
        };
        self.elapsed_ns += sent.stream.send_span_ns() as i64;
        Ok(Probed {
            stream: sent.stream,
            truth: None,
            sender_late: sent.late,
            receiver_overflowed: sent.overflowed,
        })
    }

    fn info(&self) -> ChannelInfo {
        ChannelInfo {
            description: self.description.clone(),
            max_rate_bps: self.max_rate_bps,
            probe_size_bytes: Some(self.frame_bytes),
            // The session's byte limit, less the credit that reverse mode
            // without a key spends on the way out.
            byte_limit: Some(self.limits.max_session_bytes * 9 / 10),
            stream_packet_limit: Some(self.limits.max_stream_packets as usize),
            stream_span_limit_ns: Some(crate::ctl::MAX_STREAM_NS as i64),
        }
    }

    fn elapsed_ns(&self) -> i64 {
        self.elapsed_ns
    }

    fn idle(&mut self, ns: i64) {
        if ns > 0 {
            std::thread::sleep(std::time::Duration::from_nanos(ns as u64));
            self.elapsed_ns += ns;
        }
    }

    fn close(&mut self) -> Result<(), ChannelError> {
        if self.server_drops.is_none() {
            self.close_session()?;
        }
        Ok(())
    }

    fn side_report(&self) -> SideReport {
        let mut drops = self.drops;
        if let Some(s) = &self.server_drops {
            drops.merge(s);
        }
        SideReport {
            host: Some(self.ledger.findings(
                tightlink_sys::cpu_time::read().ok(),
                self.host_limit_bps,
                drops.nonzero(),
                self.warnings.clone(),
            )),
            truth: None,
        }
    }
}
