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
//! Each stream's departures are judged ([`judge_departures`]): a sender
//! that fell behind its schedule marks the stream host-limited; transmit
//! stamps spread wider than the schedule mean the sender's own interface
//! queued the probes, i.e. the tight link is the sender's own.

use std::io::{self, BufWriter};
use std::net::{SocketAddr, SocketAddrV4, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tightlink_core::channel::{
    Channel, ChannelError, ChannelInfo, HostFindings, Probed, SideReport, StreamRequest,
};
use tightlink_core::{ProbePacket, ProbeStream};
use tightlink_wire::control::{
    read_message, write_message, Direction, Limits, Message, RecordKind, Scheduled, MAX_CREDIT,
    MAX_SCHEDULE, VERSION,
};
use tightlink_wire::twamp::ProbeRepr;
use tightlink_wire::DropCounters;

use crate::backend::packet::{PacketRing, PacketTx};
use crate::backend::route::next_hop;
use crate::backend::xdp::{self, XdpTx};
use crate::backend::{send_paced, Backend, Transmit};
use crate::receiver::{collect_stream, Expect};
use crate::udp::{Departures, ProbeSocket, UdpTx};
use crate::{auth, clock, host, packets};

/// Layer name used in reports.
pub const RATE_LAYER: &str =
    "Ethernet frame without preamble and FCS (IP packet + 14 B), as tbf and interface counters count";

#[derive(Debug, Clone)]
pub struct ClientOptions {
    pub key: Option<Vec<u8>>,
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
            direction: Direction::Forward,
            max_rate_bps: None,
            timeout: Duration::from_secs(5),
            backend: Backend::Udp,
        }
    }
}

/// One stream's departures, judged.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DepartureVerdict {
    /// The sender fell behind its schedule.
    pub late: bool,
    /// The sender's own interface queued the stream: the rate at which it
    /// left (bytes after the first stamped packet over the stamped span).
    pub queued_rate_bps: Option<f64>,
    pub tx_missing: usize,
}

/// Judges a stream's departures. `late`: the 90th percentile of send
/// lateness exceeds max(2 us, half the mean gap), so the host could not
/// keep the rate. `queued`: at least 90 % of packets have transmit stamps,
/// their span exceeds the scheduled span by 5 % + 5 us, and the lag of the
/// kernel stamp behind the user-space send grew by as much (last tenth of
/// the stream against the first), which a stalled sender does not do.
pub fn judge_departures(d: &Departures, sizes: &[u32]) -> DepartureVerdict {
    let n = d.scheduled_ns.len();
    let tx_missing = d.tx_ns.iter().filter(|t| t.is_none()).count();
    let mut v = DepartureVerdict {
        late: false,
        queued_rate_bps: None,
        tx_missing,
    };
    if n < 10 {
        return v;
    }
    let sched_span = (d.scheduled_ns[n - 1] - d.scheduled_ns[0]) as f64;
    let mean_gap = sched_span / (n - 1) as f64;
    if !d.user_ns.is_empty() {
        let mut late: Vec<i64> = d
            .user_ns
            .iter()
            .zip(&d.scheduled_ns)
            .map(|(u, s)| u - s)
            .collect();
        late.sort_unstable();
        let p90 = late[(late.len() * 9) / 10];
        v.late = p90 as f64 > (mean_gap / 2.0).max(2_000.0);
    }
    if tx_missing * 10 <= n {
        let stamped: Vec<(usize, i64)> = d
            .tx_ns
            .iter()
            .enumerate()
            .filter_map(|(i, t)| t.map(|t| (i, t)))
            .collect();
        if let (Some(&(i0, t0)), Some(&(i1, t1))) = (stamped.first(), stamped.last()) {
            let sched = (d.scheduled_ns[i1] - d.scheduled_ns[i0]) as f64;
            let tx = (t1 - t0) as f64;
            // A queue in the sender's own qdisc makes the kernel stamp lag
            // the user-space send more and more; a stall of the sending
            // thread delays both alike (a 1 ms VM stall near a loopback
            // stream's end once read as "own link at 93 Mbit/s").
            let queue_growth_ns = if d.user_ns.len() == n {
                let lag: Vec<i64> = stamped.iter().map(|&(i, t)| t - d.user_ns[i]).collect();
                let k = (lag.len() / 10).max(1);
                (median_i64(&lag[lag.len() - k..]) - median_i64(&lag[..k])) as f64
            } else {
                tx - sched
            };
            if i1 > i0 && tx > sched * 1.05 + 5_000.0 && queue_growth_ns > sched * 0.05 + 5_000.0 {
                // The rate the queue drained at: from the last packet that
                // left without a queue (lag within 2 us of the first
                // tenth's) to the end. Over the whole span, the unqueued
                // start of a multi-rate stream pulled it low (179 for a
                // 200 Mbit/s tbf once streams centred on the truth).
                let (q, tq) = if d.user_ns.len() == n {
                    let lag: Vec<i64> = stamped.iter().map(|&(i, t)| t - d.user_ns[i]).collect();
                    let base = median_i64(&lag[..(lag.len() / 10).max(1)]);
                    let last_free = lag.iter().rposition(|&l| l <= base + 2_000).unwrap_or(0);
                    let from = if stamped.len() - last_free >= 10 {
                        last_free
                    } else {
                        0
                    };
                    stamped[from]
                } else {
                    (i0, t0)
                };
                let bytes: u64 = sizes[q + 1..=i1].iter().map(|&s| s as u64).sum();
                v.queued_rate_bps = Some(bytes as f64 * 8e9 / (t1 - tq) as f64);
            }
        }
    }
    v
}

/// What the departures of every stream said about the sending host: the
/// part of [`HostFindings`] that any channel sending paced probes keeps.
#[derive(Debug, Clone, Default)]
pub(crate) struct SendLedger {
    pub late_streams: usize,
    /// Own-link rates of the streams the sender's interface queued.
    pub own_link: Vec<f64>,
    pub tx_missing: u64,
}

impl SendLedger {
    /// Judges one stream's departures; `stamps_expected` is false where
    /// the backend gets no transmit stamps (said once, not per stream).
    pub fn note(&mut self, d: &Departures, sizes: &[u32], stamps_expected: bool) {
        let v = judge_departures(d, sizes);
        self.late_streams += v.late as usize;
        if stamps_expected {
            self.tx_missing += v.tx_missing as u64;
        }
        if let Some(r) = v.queued_rate_bps.filter(|_| !v.late) {
            self.own_link.push(r);
        }
    }

    pub fn findings(
        &self,
        host_limit_bps: f64,
        drops: Vec<(&'static str, u64)>,
        warnings: Vec<String>,
    ) -> HostFindings {
        let mut own = self.own_link.clone();
        own.sort_by(f64::total_cmp);
        HostFindings {
            host_limit_bps,
            late_streams: self.late_streams,
            queued_streams: own.len(),
            own_link_bps: own.get(own.len() / 2).copied(),
            tx_stamps_missing: self.tx_missing,
            drops,
            rate_layer: RATE_LAYER,
            warnings,
        }
    }
}

fn median_i64(xs: &[i64]) -> i64 {
    tightlink_core::stats::median_i64(xs).unwrap_or(0)
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
    warnings: Vec<String>,
    description: String,
}

fn io_err(what: &str) -> impl Fn(io::Error) -> ChannelError + '_ {
    move |e| ChannelError::Io(format!("{what}: {e}"))
}

fn ctl_err(e: tightlink_wire::control::ControlError) -> ChannelError {
    ChannelError::Io(format!("server control connection: {e}"))
}

fn refused(reason: &str) -> ChannelError {
    ChannelError::Io(format!("the server refused: {reason}"))
}

/// IP_MTU of a connected UDP socket (the path MTU the kernel knows).
pub(crate) fn path_mtu(sock: &ProbeSocket, to: SocketAddr) -> Option<u32> {
    let (level, name) = if to.is_ipv4() {
        (libc::IPPROTO_IP, libc::IP_MTU)
    } else {
        (libc::IPPROTO_IPV6, libc::IPV6_MTU)
    };
    // Connect a throw-away socket of the same family: connecting the probe
    // socket itself would filter what it receives.
    let probe = std::net::UdpSocket::bind(SocketAddr::new(sock.local_addr().ok()?.ip(), 0)).ok()?;
    probe.connect(to).ok()?;
    let mut v: i32 = 0;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: an int-sized out-pointer and its length on a valid fd.
    let r = unsafe {
        libc::getsockopt(
            probe.as_raw_fd(),
            level,
            name,
            &mut v as *mut i32 as *mut libc::c_void,
            &mut len,
        )
    };
    (r == 0 && v > 0).then_some(v as u32)
}

/// The stream model of one probed stream: sizes at the frame layer, the
/// schedule as send times, kernel receive stamps.
pub(crate) fn probe_stream(
    stream: u32,
    sizes: &[u32],
    send_ns: &[i64],
    recv_ns: &[Option<i64>],
) -> ProbeStream {
    ProbeStream::new(
        stream as u64,
        sizes
            .iter()
            .zip(send_ns)
            .zip(recv_ns)
            .map(|((&size_bytes, &send_ns), &recv_ns)| ProbePacket {
                size_bytes,
                send_ns,
                recv_ns,
            })
            .collect(),
    )
}

/// `HOST[:PORT]` with the server's default port added where none is given
/// (`::1` and `[::1]` are hosts; `[::1]:9` has a port).
pub fn with_default_port(server: &str) -> String {
    with_port(server, crate::DEFAULT_PORT)
}

/// `HOST[:PORT]` with `default` added where no port is given.
pub fn with_port(server: &str, default: u16) -> String {
    if server.parse::<SocketAddr>().is_ok() {
        return server.to_string();
    }
    if server.parse::<std::net::Ipv6Addr>().is_ok() {
        return format!("[{server}]:{default}");
    }
    if server.starts_with('[') && server.ends_with(']') {
        return format!("{server}:{default}");
    }
    match server.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') && port.parse::<u16>().is_ok() => {
            server.to_string()
        }
        _ => format!("{server}:{default}"),
    }
}

/// A raw sender (forward) or a packet ring (reverse), or neither (udp).
pub(crate) type BackendParts = (Option<Box<dyn Transmit>>, Option<PacketRing>);

/// The raw sender or the packet ring that `opts.backend` asks for.
pub(crate) fn open_backend(
    opts: &ClientOptions,
    sock: &ProbeSocket,
    server_udp: SocketAddr,
    session: u64,
    warnings: &mut Vec<String>,
) -> Result<BackendParts, ChannelError> {
    let berr = |e: String| ChannelError::Io(format!("--backend {}: {e}", opts.backend));
    if opts.backend == Backend::Udp {
        return Ok((None, None));
    }
    let local = sock.local_addr().map_err(io_err("probe socket"))?;
    let (SocketAddr::V4(local4), SocketAddr::V4(peer4)) = (local, server_udp) else {
        return Err(berr("IPv4 only (its frames carry IPv4 headers)".into()));
    };
    match opts.direction {
        Direction::Forward => {
            // Resolving the next hop may need one ordinary packet out: a
            // warm-up of this session, which the server takes.
            let mut seq = u32::MAX / 2;
            let (warm, _) = packets::build(session, u32::MAX, &[], &[], &mut seq);
            let hop = next_hop(*peer4.ip(), &mut || {
                let _ =
                    std::net::UdpSocket::bind(SocketAddr::V4(SocketAddrV4::new(*local4.ip(), 0)))
                        .and_then(|u| u.send_to(&warm, server_udp));
            })
            .map_err(berr)?;
            if hop.ifname == "lo" {
                return Err(berr(format!(
                    "cannot send to {}: {}; use --backend udp for a server on this host",
                    peer4.ip(),
                    crate::backend::LOCAL_FRAMES_DROPPED
                )));
            }
            let tx: Box<dyn Transmit> = match opts.backend {
                Backend::Packet => {
                    Box::new(PacketTx::open(local4, peer4, &hop).map_err(|e| berr(e.to_string()))?)
                }
                _ => {
                    warnings.push(format!(
                        "the xdp backend hands frames to {}'s driver past the qdisc and gets no transmit stamps: a shaper on this host's own link neither applies nor shows",
                        hop.ifname
                    ));
                    Box::new(XdpTx::open(local4, peer4, &hop).map_err(|e| berr(e.to_string()))?)
                }
            };
            Ok((Some(tx), None))
        }
        Direction::Reverse => {
            if !opts.backend.receives() {
                return Err(berr(
                    "receives nothing here: AF_XDP would need an XDP program and stamps in user space after batching; use --backend packet or udp in reverse mode".into(),
                ));
            }
            let dev = host::interface_of(local.ip())
                .ok_or_else(|| berr(format!("no interface holds {}", local.ip())))?;
            let c = std::ffi::CString::new(dev.clone())
                .map_err(|_| berr("bad interface name".into()))?;
            // SAFETY: a NUL-terminated name.
            let ifindex = unsafe { libc::if_nametoindex(c.as_ptr()) };
            let ring = PacketRing::open(ifindex, local)
                .map_err(|e| berr(format!("ring on {dev}: {e}")))?;
            Ok((None, Some(ring)))
        }
    }
}

impl UdpChannel {
    /// Connects to `server` (`HOST[:PORT]`, port 7447 by default), proves
    /// the key if given, opens a session in `opts.direction`.
    pub fn connect(server: &str, opts: &ClientOptions) -> Result<UdpChannel, ChannelError> {
        let with_port = with_default_port(server);
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| ChannelError::Io(format!("server '{server}': {e}")))?
            .next()
            .ok_or_else(|| ChannelError::Io(format!("server '{server}': no address")))?;
        let conn = TcpStream::connect_timeout(&addr, opts.timeout)
            .map_err(|e| ChannelError::Io(format!("connect to {addr}: {e}")))?;
        let setup = io_err("control connection");
        conn.set_nodelay(true).map_err(&setup)?;
        conn.set_read_timeout(Some(opts.timeout)).map_err(&setup)?;
        conn.set_write_timeout(Some(opts.timeout)).map_err(&setup)?;
        let mut reader = conn.try_clone().map_err(&setup)?;
        let ctrl_fd = reader.as_raw_fd();
        let mut writer = BufWriter::new(conn.try_clone().map_err(&setup)?);
        write_message(
            &mut writer,
            &Message::Hello {
                version: VERSION,
                wants_key: opts.key.is_some(),
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
                    return Err(ChannelError::Io(format!(
                        "server speaks control protocol {version}, this client {VERSION}"
                    )));
                }
                if key_required && opts.key.is_none() {
                    return Err(refused("this server requires a key (--key-file)"));
                }
                nonce
            }
            Message::Refused { reason } => return Err(refused(&reason)),
            other => {
                return Err(ChannelError::Io(format!(
                    "expected Challenge, got {other:?}"
                )))
            }
        };
        write_message(
            &mut writer,
            &Message::Open {
                direction: opts.direction,
                auth: opts
                    .key
                    .as_ref()
                    .map(|k| auth::answer(k, &nonce, opts.direction)),
            },
        )
        .map_err(&setup)?;
        let (session, udp_port, authenticated, limits) =
            match read_message(&mut reader).map_err(ctl_err)? {
                Message::Accepted {
                    session,
                    udp_port,
                    authenticated,
                    limits,
                } => (session, udp_port, authenticated, limits),
                Message::Refused { reason } => return Err(refused(&reason)),
                other => {
                    return Err(ChannelError::Io(format!(
                        "expected Accepted, got {other:?}"
                    )))
                }
            };
        let local_ip = conn.local_addr().map_err(&setup)?.ip();
        let sock = ProbeSocket::bind(SocketAddr::new(local_ip, 0), 16 << 20)
            .map_err(io_err("probe socket"))?;
        let server_udp = SocketAddr::new(addr.ip(), udp_port);
        let overhead = if addr.is_ipv4() { 42 } else { 62 };
        let mtu = path_mtu(&sock, server_udp).unwrap_or(1500).min(9000);
        let mut payload = (mtu - (overhead - 14)).min(limits.max_packet_bytes as u32);
        if opts.backend == Backend::Xdp {
            payload = payload.min(xdp::MAX_PAYLOAD as u32);
        }
        if payload < ProbeRepr::buffer_len() as u32 {
            return Err(ChannelError::Io(format!(
                "the server allows {payload}-byte payloads; probes need {}",
                ProbeRepr::buffer_len()
            )));
        }
        let frame_bytes = payload + overhead;
        let mut warnings = Vec::new();
        if sock.udp_gro() {
            warnings.push(
                "UDP_GRO is on for the probe socket: it merges packets and their timestamps".into(),
            );
        }
        warnings.extend(host::merging_offloads(local_ip));
        let (raw_tx, ring) = open_backend(opts, &sock, server_udp, session, &mut warnings)?;
        let host_limit_bps = match opts.direction {
            Direction::Forward => host::pacing_limit_bps(opts.backend, payload, frame_bytes),
            // The server sends; its limit is in its clamped max rate.
            Direction::Reverse => f64::INFINITY,
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
            ledger: SendLedger::default(),
            last_departures: None,
            drops: DropCounters::default(),
            server_drops: None,
            warnings,
            description: format!(
                "tightlink server {addr} ({}{}, {} backend)",
                match opts.direction {
                    Direction::Forward => "forward",
                    Direction::Reverse => "reverse",
                },
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
            write_message(&mut self.writer, &Message::Credit { len }).map_err(io_err("credit"))?;
            self.credit_balance += len as i64;
        }
        Ok(())
    }

    fn expect_ready(&mut self, stream: u32) -> Result<(), ChannelError> {
        match read_message(&mut self.reader).map_err(ctl_err)? {
            Message::Ready { stream: s } if s == stream => Ok(()),
            Message::Refused { reason } => Err(refused(&reason)),
            other => Err(ChannelError::Io(format!("expected Ready, got {other:?}"))),
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
                            ChannelError::Io(format!(
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
                other => return Err(ChannelError::Io(format!("expected Records, got {other:?}"))),
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
                    Err(ChannelError::Io(format!(
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

    fn note(&mut self, d: &Departures, sizes: &[u32]) {
        // xdp has no transmit stamps to miss (said once at connect).
        let stamps = self.backend != Backend::Xdp || self.direction == Direction::Reverse;
        self.ledger.note(d, sizes, stamps);
    }

    fn forward(
        &mut self,
        request: &StreamRequest,
        stream: u32,
    ) -> Result<ProbeStream, ChannelError> {
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
        self.note(&d, &request.sizes);
        let s = probe_stream(stream, &request.sizes, &d.scheduled_ns, &recv);
        self.last_departures = Some(d);
        Ok(s)
    }

    fn reverse(
        &mut self,
        request: &StreamRequest,
        stream: u32,
    ) -> Result<ProbeStream, ChannelError> {
        let n = request.offsets_ns.len();
        if n > MAX_SCHEDULE {
            return Err(ChannelError::Io(format!(
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
        self.drops.merge(&c.drops);
        if let Some(r) = &self.ring {
            // The socket got the same datagrams the ring did: discard them.
            crate::receiver::discard(&self.sock).map_err(io_err("receive"))?;
            let lost = r.dropped().map_err(io_err("packet ring"))?;
            if lost > 0 || r.malformed > 0 {
                self.warnings.push(format!(
                    "packet ring: {lost} frames dropped (ring full), {} not IPv4 UDP",
                    r.malformed
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
        // Schedule on the server's clock, anchored at its first stamp.
        let first_stamped = tx.iter().position(|t| t.is_some()).unwrap_or(0);
        let anchor = tx.get(first_stamped).copied().flatten().unwrap_or(0)
            - request.offsets_ns.get(first_stamped).copied().unwrap_or(0);
        let d = Departures {
            scheduled_ns: request.offsets_ns.iter().map(|o| anchor + o).collect(),
            user_ns: Vec::new(),
            tx_ns: tx,
        };
        self.note(&d, &request.sizes);
        let s = probe_stream(stream, &request.sizes, &d.scheduled_ns, &c.recv_ns);
        self.last_departures = Some(d);
        Ok(s)
    }
}

impl Channel for UdpChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let stream = self.next_stream;
        self.next_stream += 1;
        let s = match self.direction {
            Direction::Forward => self.forward(request, stream)?,
            Direction::Reverse => self.reverse(request, stream)?,
        };
        self.elapsed_ns += s.send_span_ns() as i64;
        Ok(Probed {
            stream: s,
            truth: None,
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
        }
    }

    fn elapsed_ns(&self) -> i64 {
        self.elapsed_ns
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
                self.host_limit_bps,
                drops.nonzero(),
                self.warnings.clone(),
            )),
            truth: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn departures(gap_ns: i64, n: usize, late_ns: i64, tx_gap_ns: i64) -> Departures {
        Departures {
            scheduled_ns: (0..n as i64).map(|i| i * gap_ns).collect(),
            user_ns: (0..n as i64).map(|i| i * gap_ns + late_ns).collect(),
            tx_ns: (0..n as i64).map(|i| Some(2_000 + i * tx_gap_ns)).collect(),
        }
    }

    /// 100 packets of 1514 B every 60.56 us (200 Mbit/s), sent on time
    /// and stamped on time: neither late nor queued.
    #[test]
    fn on_time_departures_are_clean() {
        let d = departures(60_560, 100, 500, 60_560);
        let v = judge_departures(&d, &[1514; 100]);
        assert_eq!(
            v,
            DepartureVerdict {
                late: false,
                queued_rate_bps: None,
                tx_missing: 0
            }
        );
    }

    /// Scheduled at 300 Mbit/s (40.37 us) but the kernel stamped them
    /// 60.56 us apart: queued in the sender's own qdisc; the rate it left
    /// at is 1514 * 8 / 60.56 us = 200 Mbit/s.
    #[test]
    fn a_shaped_own_link_is_seen_in_transmit_stamps() {
        let d = departures(40_373, 100, 500, 60_560);
        let v = judge_departures(&d, &[1514; 100]);
        assert!(!v.late);
        let r = v.queued_rate_bps.unwrap();
        assert!((r / 200e6 - 1.0).abs() < 0.001, "{r}");
    }

    /// A multi-rate stream through the sender's own 200 Mbit/s tbf: 50
    /// packets at 150 Mbit/s (80.75 us) leave on time, then 50 at 300
    /// Mbit/s (40.37 us) queue and leave 60.56 us apart. The rate it left
    /// at is measured from packet 49 (the last unqueued) on: 50 x 1514 B
    /// over 50 x 60.56 us = 200 Mbit/s, where the whole span would read
    /// 99 x 1514 B over 49 x 80.75 + 50 x 60.56 us = 169 Mbit/s.
    #[test]
    fn only_the_queued_part_gives_the_own_link_rate() {
        let mut sched = Vec::new();
        let mut tx = Vec::new();
        let (mut s, mut t) = (0i64, 2_000i64);
        for i in 0..100 {
            if i > 0 {
                s += if i < 50 { 80_750 } else { 40_373 };
                t += if i < 50 { 80_750 } else { 60_560 };
            }
            sched.push(s);
            tx.push(Some(t));
        }
        let d = Departures {
            user_ns: sched.iter().map(|s| s + 500).collect(),
            scheduled_ns: sched,
            tx_ns: tx,
        };
        let r = judge_departures(&d, &[1514; 100]).queued_rate_bps.unwrap();
        assert!((r / 200e6 - 1.0).abs() < 0.001, "{r}");
    }

    /// The sending thread stalls 1.2 ms before the last 5 packets of a
    /// 100 Mbit/s stream: user-space and kernel stamps are late alike, the
    /// stamped span is 7 % too long, but nothing queued (loopback CI flake).
    #[test]
    fn a_stalled_sender_is_not_a_queued_link() {
        let mut d = departures(121_120, 100, 500, 121_120);
        for i in 95..100 {
            d.user_ns[i] += 1_200_000;
            d.tx_ns[i] = d.tx_ns[i].map(|t| t + 1_200_000);
        }
        let v = judge_departures(&d, &[1514; 100]);
        assert_eq!(v.queued_rate_bps, None, "{v:?}");
    }

    /// A host that cannot keep 4 us gaps falls further behind every packet
    /// (here 1 us per packet): late.
    #[test]
    fn a_host_falling_behind_is_late() {
        let mut d = departures(4_000, 100, 0, 5_000);
        for (i, u) in d.user_ns.iter_mut().enumerate() {
            *u += i as i64 * 1_000;
        }
        assert!(judge_departures(&d, &[1514; 100]).late);
    }

    #[test]
    fn default_port_is_added_only_where_missing() {
        let p = crate::DEFAULT_PORT;
        assert_eq!(with_default_port("10.0.0.1"), format!("10.0.0.1:{p}"));
        assert_eq!(with_default_port("10.0.0.1:9"), "10.0.0.1:9");
        assert_eq!(
            with_default_port("host.example"),
            format!("host.example:{p}")
        );
        assert_eq!(with_default_port("host.example:80"), "host.example:80");
        assert_eq!(with_default_port("::1"), format!("[::1]:{p}"));
        assert_eq!(with_default_port("[::1]"), format!("[::1]:{p}"));
        assert_eq!(with_default_port("[::1]:9"), "[::1]:9");
    }

    /// Missing stamps are counted; with more than 10 % missing no queue
    /// verdict is drawn.
    #[test]
    fn missing_stamps_block_the_queue_verdict() {
        let mut d = departures(40_373, 100, 0, 60_560);
        for t in d.tx_ns.iter_mut().step_by(5) {
            *t = None;
        }
        let v = judge_departures(&d, &[1514; 100]);
        assert_eq!(v.tx_missing, 20);
        assert_eq!(v.queued_rate_bps, None);
    }
}
