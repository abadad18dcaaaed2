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
use std::time::{Duration, Instant};

use tightlink_wire::control::{Direction, Message, VERSION};
use tightlink_wire::DropCounters;

use crate::udp::ProbeSocket;
use crate::{auth, clock};

pub use crate::ctl::MAX_STREAM_NS;
use crate::server_session::{
    busy, next_message, refuse, send, End, Opened, Outcome, Session, StreamAsk,
};
pub use crate::server_session::{ServerConfig, DEFAULT_PROBE_RCVBUF_BYTES};

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
    /// Each open session's address and the time limit it ends by: what
    /// a busy answer says to wait for.
    ends: Vec<(u64, IpAddr, Instant)>,
    next_id: u64,
}

/// No session slot for a client now: why, and the longest it may wait.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NoSlot {
    pub reason: String,
    pub retry_after: Duration,
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

    /// A session slot for a client at `ip` that has spoken, or why not
    /// and when one is sure to be free (the first of the sessions in its
    /// way to reach its time limit).
    fn take_slot(
        self: &Arc<Self>,
        ip: IpAddr,
        keyed: bool,
        config: &ServerConfig,
    ) -> Result<Slot, NoSlot> {
        let mut m = self.open.lock().unwrap();
        let now = Instant::now();
        let first_end = |of_ip: Option<IpAddr>| {
            m.ends
                .iter()
                .filter(|e| of_ip.is_none_or(|ip| e.1 == ip))
                .map(|e| e.2.saturating_duration_since(now))
                .min()
                .unwrap_or(Duration::ZERO)
                .max(Duration::from_millis(100))
        };
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
            return Err(NoSlot {
                reason: if keyed || reserved == 0 {
                    "server busy: session limit reached".into()
                } else {
                    "server busy: the free session slots are reserved for clients with the key"
                        .into()
                },
                retry_after: first_end(None),
            });
        }
        if here >= config.max_sessions_per_ip {
            return Err(NoSlot {
                reason: format!(
                    "server busy: {here} sessions from {ip} already (the limit per address)"
                ),
                retry_after: first_end(Some(ip)),
            });
        }
        *m.per_ip.entry(ip).or_insert(0) += 1;
        m.keyed += usize::from(keyed);
        let limits = if keyed {
            config.keyed_limits
        } else {
            config.open_limits
        };
        let id = m.next_id;
        m.next_id += 1;
        // The handshake's and the close's time beside the session's own.
        let ends_by = now
            + Duration::from_millis(u64::from(limits.max_session_ms))
            + config.handshake_timeout;
        m.ends.push((id, ip, ends_by));
        Ok(Slot {
            stats: self.clone(),
            ip,
            keyed,
            id,
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
    id: u64,
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
        m.ends.retain(|e| e.0 != self.id);
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
            .map_err(|b| End::Busy(b.reason, b.retry_after))?;
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
        Err(End::Busy(why, after)) => Err(busy(&mut w, why, after)),
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
        // The handshake alone takes no slot.
        Err(End::Busy(why, _)) | Err(End::Fail(why)) => Err(HandshakeError::Failed(why)),
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_wire::control::{read_message, write_message};

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
