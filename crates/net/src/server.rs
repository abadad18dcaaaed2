//! `tightlink server`: the far end of real measurements.
//! A TCP control connection per session ([`tightlink_wire::control`]),
//! and a UDP socket of its own per session that timestamps the client's
//! probes (forward) or sends probes to the client (reverse).
//!
//! Safe to expose, in irtt's manner:
//! - every step has a timeout (handshake, idle, the session as a whole);
//! - a connection holds a session slot only once the client has spoken:
//!   a valid Hello and Open (with the key's proof when it claims one).
//!   Until then it is a pending handshake: bounded per client address and
//!   in all, the oldest cut first when a new one needs room, so idle
//!   connections cannot lock real clients out;
//! - limits on concurrent sessions (in all and per client address), with
//!   slots reserved for clients that prove the key, per-session rate,
//!   bytes, stream length and packet size; lower without a key; a request
//!   beyond them is refused with the limit named;
//! - memory per session is one slot per announced packet (bounded by the
//!   stream limit) and a fixed set of counters, whatever arrives;
//! - the server sends UDP only to the client: the address of its TCP
//!   connection (which a spoofer cannot complete), at the port from which
//!   a packet carrying the session id arrived;
//! - no amplification for unauthenticated peers: in forward mode the
//!   reply is 8 bytes per received probe of at least 82; in reverse mode
//!   the server sends no more UDP bytes than it has received from the
//!   client in that session (UDP, or `Credit` padding over TCP, which
//!   the client sends first).
//!
//! In reverse sessions the rate limit it answers is also the rate this
//! host paces probes at (\[HOST\] section 3, as a client does for its own
//! sends: one frame of the path's MTU per median send cost, 25 % slack),
//! so a client's search never asks for streams the server would send late.
//!
//! Logs one line per session on stderr.

use std::collections::{HashMap, VecDeque};
use std::io::{self, BufWriter};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tightlink_sys::sockopt;

use tightlink_wire::control::{
    read_message, write_message, ControlError, Direction, Limits, Message, RecordKind, Scheduled,
    TransferFrom, VERSION,
};
use tightlink_wire::twamp::ProbeRepr;
use tightlink_wire::DropCounters;

use crate::backend::send_paced;
use crate::receiver::{absorb, collect_stream, Collected, Expect};
use crate::udp::{ProbeSocket, UdpTx};
use crate::{auth, clock, packets};

/// A session's probe socket's receive buffer unless configured: at
/// 10 Gbit/s, 12.8 ms of probes queued while the server's thread is away.
pub const DEFAULT_PROBE_RCVBUF_BYTES: i32 = 16_000_000;

use crate::ctl::send_records;
pub use crate::ctl::MAX_STREAM_NS;

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

/// What the server has seen, for tests and logs.
#[derive(Debug, Default)]
pub struct ServerStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    pub sessions: AtomicU64,
    pub refused: AtomicU64,
    /// Pending handshakes cut to make room for newer connections.
    pub cut: AtomicU64,
    pub drops: Mutex<DropCounters>,
    /// Datagrams the sessions' probe sockets dropped while forward
    /// streams came in (receive buffers full: this host read too slowly).
    pub socket_dropped: AtomicU64,
    open: Mutex<OpenSessions>,
    pending: Mutex<Pending>,
}

#[derive(Debug, Default)]
struct OpenSessions {
    per_ip: HashMap<IpAddr, usize>,
    /// Sessions that proved the key.
    keyed: usize,
}

/// Connections accepted whose client has not finished its handshake,
/// oldest first; each with a handle that can cut it.
#[derive(Debug, Default)]
struct Pending {
    entries: VecDeque<(u64, IpAddr, TcpStream)>,
    next_id: u64,
}

impl ServerStats {
    pub fn open_sessions(&self) -> usize {
        self.open.lock().unwrap().per_ip.values().sum()
    }
    pub fn pending_handshakes(&self) -> usize {
        self.pending.lock().unwrap().entries.len()
    }
    pub fn drops(&self) -> DropCounters {
        *self.drops.lock().unwrap()
    }

    /// Registers a new connection as pending; cuts the oldest pending one
    /// of the same address when that address is at its limit, else the
    /// oldest of all when all are. Returns its id.
    fn admit_pending(&self, ip: IpAddr, cutter: TcpStream, config: &ServerConfig) -> u64 {
        let mut p = self.pending.lock().unwrap();
        let here = p.entries.iter().filter(|e| e.1 == ip).count();
        let victim = if here >= config.max_pending_per_ip.max(1) {
            p.entries.iter().position(|e| e.1 == ip)
        } else if p.entries.len() >= config.max_pending.max(1) {
            Some(0)
        } else {
            None
        };
        if let Some(i) = victim {
            if let Some((_, _, conn)) = p.entries.remove(i) {
                // Its thread's next read fails at once and it ends.
                let _ = conn.shutdown(std::net::Shutdown::Both);
                self.cut.fetch_add(1, Ordering::Relaxed);
            }
        }
        let id = p.next_id;
        p.next_id += 1;
        p.entries.push_back((id, ip, cutter));
        id
    }

    /// The handshake of `id` is over (done, failed or cut).
    fn leave_pending(&self, id: u64) {
        let mut p = self.pending.lock().unwrap();
        if let Some(i) = p.entries.iter().position(|e| e.0 == id) {
            p.entries.remove(i);
        }
    }

    /// A session slot for a client at `ip` that has spoken, or why not.
    fn take_slot(
        self: &Arc<Self>,
        ip: IpAddr,
        keyed: bool,
        config: &ServerConfig,
    ) -> Result<Slot, String> {
        let mut m = self.open.lock().unwrap();
        let total: usize = m.per_ip.values().sum();
        let here = m.per_ip.get(&ip).copied().unwrap_or(0);
        let reserved = if config.key.is_some() {
            config
                .reserved_keyed_sessions
                .min(config.max_sessions)
                .saturating_sub(m.keyed)
        } else {
            0
        };
        let room = if keyed {
            config.max_sessions
        } else {
            config.max_sessions.saturating_sub(reserved)
        };
        if total >= room {
            return Err(if keyed || reserved == 0 {
                "server busy: session limit reached, try again later".into()
            } else {
                "server busy: the free session slots are reserved for clients with the key, try again later".into()
            });
        }
        if here >= config.max_sessions_per_ip {
            return Err(format!(
                "server busy: {here} sessions from {ip} already (the limit per address), try again later"
            ));
        }
        *m.per_ip.entry(ip).or_insert(0) += 1;
        m.keyed += usize::from(keyed);
        Ok(Slot {
            stats: self.clone(),
            ip,
            keyed,
        })
    }
}

pub struct Server {
    listener: TcpListener,
    config: Arc<ServerConfig>,
    stats: Arc<ServerStats>,
}

/// Releases a session's slot when the session ends, however it ends.
struct Slot {
    stats: Arc<ServerStats>,
    ip: IpAddr,
    keyed: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = self.stats.open.lock().unwrap();
        if let Some(c) = m.per_ip.get_mut(&self.ip) {
            *c -= 1;
            if *c == 0 {
                m.per_ip.remove(&self.ip);
            }
        }
        m.keyed -= usize::from(self.keyed);
    }
}

/// Takes a connection out of the pending table when its thread ends.
struct PendingGuard {
    stats: Arc<ServerStats>,
    id: u64,
}

impl Drop for PendingGuard {
    fn drop(&mut self) {
        self.stats.leave_pending(self.id);
    }
}

impl Server {
    pub fn bind(config: ServerConfig) -> io::Result<Server> {
        let listener = TcpListener::bind(config.bind)?;
        // A deeper accept queue than the standard library's 128: under a
        // connection flood, real clients' SYNs must not wait for retries.
        // SAFETY: listen(2) again on our own listening socket only
        // changes its backlog.
        unsafe { libc::listen(listener.as_raw_fd(), 4096) };
        Ok(Server {
            listener,
            config: Arc::new(config),
            stats: Arc::new(ServerStats::default()),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// What a session's probe socket gets: a trial socket on the listening
    /// address asks for the configured receive buffer; `Some(warning)`
    /// where the kernel granted less ([`crate::udp::rcvbuf_shortfall`]).
    pub fn probe_buffer_warning(&self) -> io::Result<Option<String>> {
        let ip = self.local_addr()?.ip();
        let trial = ProbeSocket::bind(SocketAddr::new(ip, 0), self.config.probe_rcvbuf_bytes)?;
        Ok(crate::udp::rcvbuf_shortfall(
            "probe sockets get",
            self.config.probe_rcvbuf_bytes,
            trial.rcvbuf_bytes(),
        ))
    }

    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Accepts connections until the listener fails; each runs on a
    /// thread of its own: at most `max_pending` handshakes and
    /// `max_sessions` sessions at once.
    pub fn serve(self) -> io::Result<()> {
        loop {
            let (conn, peer) = match self.listener.accept() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => {
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
                Err(e) => return Err(e),
            };
            self.stats.accepted.fetch_add(1, Ordering::Relaxed);
            let Ok(cutter) = conn.try_clone() else {
                continue;
            };
            let id = self.stats.admit_pending(peer.ip(), cutter, &self.config);
            let (config, stats) = (self.config.clone(), self.stats.clone());
            std::thread::spawn(move || {
                let pending = PendingGuard {
                    stats: stats.clone(),
                    id,
                };
                let line = run_session(conn, peer, &config, &stats, pending);
                if config.log {
                    eprintln!("{line}");
                }
            });
        }
    }

    /// Serves on a background thread (tests, `doctor`, loopback).
    pub fn spawn(self) -> io::Result<(SocketAddr, Arc<ServerStats>)> {
        let addr = self.local_addr()?;
        let stats = self.stats();
        std::thread::spawn(move || self.serve());
        Ok((addr, stats))
    }
}

/// Why a session ended, for its log line.
#[derive(Default)]
struct Outcome {
    direction: Option<Direction>,
    authenticated: bool,
    streams: u32,
    packets: u64,
    bytes: u64,
    drops: DropCounters,
    /// Datagrams the probe socket dropped during forward streams (its
    /// receive buffer full).
    socket_dropped: u64,
    end: String,
}

fn run_session(
    conn: TcpStream,
    peer: SocketAddr,
    config: &ServerConfig,
    stats: &Arc<ServerStats>,
    pending: PendingGuard,
) -> String {
    let started = clock::monotonic_ns();
    let mut o = Outcome::default();
    let result = session(conn, peer, config, stats, pending, &mut o);
    stats.sessions.fetch_add(1, Ordering::Relaxed);
    stats.drops.lock().unwrap().merge(&o.drops);
    stats
        .socket_dropped
        .fetch_add(o.socket_dropped, Ordering::Relaxed);
    o.end = match result {
        Ok(()) => "closed".into(),
        Err(e) => {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            e
        }
    };
    let drops: Vec<String> = o
        .drops
        .nonzero()
        .iter()
        .map(|(n, c)| format!("{n}={c}"))
        .collect();
    format!(
        "tightlink server: session peer={peer} direction={} auth={} streams={} packets={} bytes={} duration_ms={} drops=[{}] socket_dropped={} end={}",
        o.direction.map_or("-", Direction::name),
        o.authenticated,
        o.streams,
        o.packets,
        o.bytes,
        (clock::monotonic_ns() - started) / 1_000_000,
        drops.join(","),
        o.socket_dropped,
        o.end
    )
}

/// Sends `Refused` and returns the reason as the session's error.
fn refuse(w: &mut impl io::Write, reason: String) -> String {
    let _ = write_message(
        w,
        &Message::Refused {
            reason: reason.clone(),
        },
    );
    format!("refused: {reason}")
}

fn ctl<T>(r: Result<T, ControlError>) -> Result<T, String> {
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
enum End {
    Refuse(String),
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
fn next_message(r: &mut impl io::Read) -> Result<Message, End> {
    ctl(read_message(r)).map_err(End::Fail)
}

fn send(w: &mut impl io::Write, m: &Message) -> Result<(), End> {
    write_message(w, m).map_err(End::from)
}

/// One session: the handshake, a probe socket, then streams until Close.
fn session(
    conn: TcpStream,
    peer: SocketAddr,
    config: &ServerConfig,
    stats: &Arc<ServerStats>,
    pending: PendingGuard,
    o: &mut Outcome,
) -> Result<(), String> {
    // Unbuffered reads: the receive loop polls the fd, which must not hide
    // bytes already read into a buffer.
    let mut r = &conn;
    let mut w = BufWriter::new(&conn);
    let result = (|| -> Result<(), End> {
        conn.set_nodelay(true)?;
        set_timeouts(&conn, config.handshake_timeout)?;
        let opened = handshake(&mut r, &mut w, config, o)?;
        // The client has spoken: a session slot, or a refusal.
        drop(pending);
        let _slot = stats
            .take_slot(peer.ip(), o.authenticated, config)
            .map_err(End::Refuse)?;
        let mut s = Session::accept(&conn, &mut w, peer, config, opened, o.authenticated)?;
        set_timeouts(&conn, config.idle_timeout)?;
        loop {
            let msg = next_message(&mut r)?;
            let remaining_ns = s.session_end - clock::monotonic_ns();
            if remaining_ns <= 0 {
                return Err(End::Refuse(format!(
                    "session time limit of {} ms reached",
                    s.limits.max_session_ms
                )));
            }
            match msg {
                Message::Forward {
                    stream,
                    packets,
                    max_size,
                    bytes,
                    duration_ns,
                } if s.direction == Direction::Forward => {
                    let asked = StreamAsk {
                        packets,
                        max_size: max_size as u64,
                        bytes,
                        duration_ns,
                    };
                    s.forward_stream(&conn, &mut r, &mut w, o, stream, asked, remaining_ns)?
                }
                Message::Reverse { stream, schedule } if s.direction == Direction::Reverse => {
                    s.reverse_stream(&mut w, o, stream, &schedule, remaining_ns)?
                }
                Message::Credit { padding } if s.direction == Direction::Reverse => {
                    s.tcp_credit += padding.len as u64;
                }
                Message::Transfer {
                    max_bytes,
                    packet_bytes,
                } if s.direction == Direction::Transfer => {
                    s.transfer(&conn, &mut w, o, config, max_bytes, packet_bytes)?
                }
                Message::TransferFrom(ask) if s.direction == Direction::TransferReverse => {
                    s.transfer_reverse(&conn, &mut w, o, config, &ask)?
                }
                Message::Close => return s.close(&mut w, o),
                other => {
                    return Err(End::Refuse(
                        format!(
                            "unexpected message in a {:?} session: {other:?}",
                            s.direction
                        )
                        .chars()
                        .take(200)
                        .collect(),
                    ))
                }
            }
        }
    })();
    match result {
        Ok(()) => Ok(()),
        Err(End::Refuse(why)) => Err(refuse(&mut w, why)),
        Err(End::Fail(e)) => Err(e),
    }
}

fn set_timeouts(conn: &TcpStream, t: Duration) -> io::Result<()> {
    conn.set_read_timeout(Some(t))?;
    conn.set_write_timeout(Some(t))
}

/// What a handshake over byte streams settled: the direction and whether
/// the client proved the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    pub direction: Direction,
    pub authenticated: bool,
}

/// Why a handshake did not open a session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandshakeError {
    /// The client asked for something this server does not give (a
    /// version, a key); the refusal was sent to it.
    #[error("refused: {0}")]
    Refused(String),
    /// The bytes or the connection failed.
    #[error("{0}")]
    Failed(String),
}

/// The server's side of the handshake (Hello, Challenge, Open, the key
/// check) over any byte streams: what a session would then accept, or
/// the refusal or failure it would end with. The session runs exactly
/// this before it takes a slot; tests and the fuzzer feed it bytes.
pub fn handshake_over(
    r: &mut impl io::Read,
    w: &mut impl io::Write,
    config: &ServerConfig,
) -> Result<Handshake, HandshakeError> {
    let mut o = Outcome::default();
    match handshake(r, w, config, &mut o) {
        Ok(opened) => Ok(Handshake {
            direction: opened.direction,
            authenticated: o.authenticated,
        }),
        Err(End::Refuse(why)) => {
            refuse(w, why.clone());
            Err(HandshakeError::Refused(why))
        }
        Err(End::Fail(e)) => Err(HandshakeError::Failed(e)),
    }
}

/// What the handshake settled.
struct Opened {
    direction: Direction,
    nonce: [u8; 32],
}

/// Hello, Challenge, Open and the key check; sets `o.direction` and
/// `o.authenticated`.
fn handshake(
    r: &mut impl io::Read,
    w: &mut impl io::Write,
    config: &ServerConfig,
    o: &mut Outcome,
) -> Result<Opened, End> {
    let wants_key = match next_message(r)? {
        Message::Hello { version, wants_key } if version == VERSION => wants_key,
        Message::Hello { version, .. } => {
            return Err(End::Refuse(format!(
                "protocol version {version}; this server speaks {VERSION}"
            )))
        }
        _ => return Err(End::Refuse("expected Hello".into())),
    };
    let nonce = auth::nonce()?;
    send(
        w,
        &Message::Challenge {
            version: VERSION,
            nonce,
            key_required: config.require_key,
            limits: if wants_key {
                config.keyed_limits
            } else {
                config.open_limits
            },
        },
    )?;
    let (direction, answer) = match next_message(r)? {
        Message::Open { direction, auth } => (direction, auth),
        _ => return Err(End::Refuse("expected Open".into())),
    };
    o.direction = Some(direction);
    o.authenticated = match (&config.key, answer) {
        (Some(key), Some(a)) => {
            if !auth::verify(key, &nonce, direction, &a) {
                return Err(End::Refuse("wrong key".into()));
            }
            true
        }
        (None, Some(_)) => return Err(End::Refuse("this server has no key configured".into())),
        (_, None) if config.require_key => {
            return Err(End::Refuse(
                "this server requires a key (--key-file)".into(),
            ))
        }
        (_, None) => false,
    };
    Ok(Opened { direction, nonce })
}

/// A forward stream's announcement.
struct StreamAsk {
    packets: u32,
    max_size: u64,
    bytes: u64,
    duration_ns: u64,
}

/// An accepted session: its probe socket, limits and running counts.
struct Session {
    peer: SocketAddr,
    direction: Direction,
    authenticated: bool,
    limits: Limits,
    session_id: u64,
    sock: ProbeSocket,
    session_end: i64,
    /// UDP bytes the client sent us, and the client's UDP address.
    seen: Collected,
    sent_udp_bytes: u64,
    tcp_credit: u64,
    sequence: u32,
}

impl Session {
    /// Opens the session's probe socket and tells the client its port.
    fn accept(
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
    fn between_streams(&self) -> Expect {
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
    fn forward_stream(
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
    fn reverse_stream(
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
    fn await_credit(&mut self, bytes: u64) -> Result<SocketAddr, End> {
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
    fn transfer(
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
    fn transfer_session<'a>(
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
    fn transfer_reverse(
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
    fn close(&mut self, w: &mut BufWriter<&TcpStream>, o: &mut Outcome) -> Result<(), End> {
        let expect = self.between_streams();
        absorb(&self.sock, &expect, &mut self.seen)?;
        o.drops.merge(&self.seen.drops);
        send(w, &Message::Bye { drops: o.drops })
    }
}

/// Checks an announced stream against the session's limits; the error
/// names the limit.
fn check_stream(
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
fn reverse_pacing_limit_bps(sock: &ProbeSocket, peer: SocketAddr, max_payload: u32) -> Option<u64> {
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
fn send_schedule(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(msgs: &[Message]) -> Vec<u8> {
        let mut b = Vec::new();
        for m in msgs {
            write_message(&mut b, m).unwrap();
        }
        b
    }

    /// Hello then Open without a key: forward, unauthenticated, and the
    /// server wrote its Challenge. A wrong version, a missing key where
    /// one is required, and bytes that are no message end it with the
    /// reason.
    #[test]
    fn handshakes_over_bytes() {
        let hello = Message::Hello {
            version: VERSION,
            wants_key: false,
        };
        let open = Message::Open {
            direction: Direction::Forward,
            auth: None,
        };
        let config = ServerConfig::default();
        let mut out = Vec::new();
        let input = frames(&[hello.clone(), open.clone()]);
        let h = handshake_over(&mut &input[..], &mut out, &config).unwrap();
        assert_eq!(
            h,
            Handshake {
                direction: Direction::Forward,
                authenticated: false
            }
        );
        assert!(matches!(
            read_message(&mut &out[..]).unwrap(),
            Message::Challenge { .. }
        ));
        let old = frames(&[Message::Hello {
            version: VERSION + 1,
            wants_key: false,
        }]);
        let e = handshake_over(&mut &old[..], &mut Vec::new(), &config).unwrap_err();
        assert!(
            matches!(&e, HandshakeError::Refused(why) if why.contains("protocol version")),
            "{e}"
        );
        let keyed = ServerConfig {
            key: Some(b"k".to_vec()),
            require_key: true,
            ..ServerConfig::default()
        };
        let e = handshake_over(&mut &input[..], &mut Vec::new(), &keyed).unwrap_err();
        assert!(
            matches!(&e, HandshakeError::Refused(why) if why.contains("requires a key")),
            "{e}"
        );
        let junk: &[u8] = b"GET / HTTP/1.1";
        assert!(handshake_over(&mut &junk[..], &mut Vec::new(), &config).is_err());
    }
}
