//! `tightlink server`: the far end of real measurements.
//! A TCP control connection per session ([`tightlink_wire::control`]),
//! and a UDP socket of its own per session that timestamps the client's
//! probes (forward) or sends probes to the client (reverse).
//!
//! Safe to expose, in irtt's manner:
//! - every step has a timeout (handshake, idle, the session as a whole);
//! - limits on concurrent sessions (in all and per client address),
//!   per-session rate, bytes, stream length and packet size; lower without
//!   a key; a request beyond them is refused with the limit named;
//! - memory per session is one slot per announced packet (bounded by the
//!   stream limit) and a fixed set of counters, whatever arrives;
//! - the server sends UDP only to the client: the address of its TCP
//!   connection (which a spoofer cannot complete), at the port from which
//!   a packet carrying the session id arrived;
//! - no amplification for unauthenticated peers: in forward mode the
//!   reply is 8 bytes per received probe of at least 48; in reverse mode
//!   the server sends no more UDP bytes than it has received from the
//!   client in that session (UDP, or `Credit` padding over TCP, which
//!   the client sends first).
//!
//! Logs one line per session on stderr.

use std::collections::HashMap;
use std::io::{self, BufWriter};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tightlink_sys::sockopt;

use tightlink_wire::control::{
    read_message, write_message, ControlError, Direction, Limits, Message, Record, RecordKind,
    Scheduled, RECORDS_PER_FRAME, VERSION,
};
use tightlink_wire::twamp::ProbeRepr;
use tightlink_wire::DropCounters;

use crate::backend::send_paced;
use crate::receiver::{absorb, collect_stream, Collected, Expect};
use crate::udp::{ProbeSocket, UdpTx};
use crate::{auth, clock, packets};

/// Longest stream, so receive offsets fit the records' 32-bit ns.
pub const MAX_STREAM_NS: u64 = 2_000_000_000;

#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub bind: SocketAddr,
    /// Pre-shared key; with it, keyed sessions get `keyed_limits`.
    pub key: Option<Vec<u8>>,
    /// Refuse sessions that do not prove the key.
    pub require_key: bool,
    pub max_sessions: usize,
    pub max_sessions_per_ip: usize,
    /// Limits of a session without a key.
    pub open_limits: Limits,
    /// Limits of a session that proved the key.
    pub keyed_limits: Limits,
    pub handshake_timeout: Duration,
    /// Longest wait for the client's next message.
    pub idle_timeout: Duration,
    /// Log one line per session on stderr.
    pub log: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], crate::DEFAULT_PORT)),
            key: None,
            require_key: false,
            max_sessions: 8,
            max_sessions_per_ip: 2,
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
        }
    }
}

/// What the server has seen, for tests and logs.
#[derive(Debug, Default)]
pub struct ServerStats {
    pub sessions: AtomicU64,
    pub refused: AtomicU64,
    pub drops: Mutex<DropCounters>,
    open_per_ip: Mutex<HashMap<IpAddr, usize>>,
}

impl ServerStats {
    pub fn open_sessions(&self) -> usize {
        self.open_per_ip.lock().unwrap().values().sum()
    }
    pub fn drops(&self) -> DropCounters {
        *self.drops.lock().unwrap()
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
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut m = self.stats.open_per_ip.lock().unwrap();
        if let Some(c) = m.get_mut(&self.ip) {
            *c -= 1;
            if *c == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

impl Server {
    pub fn bind(config: ServerConfig) -> io::Result<Server> {
        let listener = TcpListener::bind(config.bind)?;
        Ok(Server {
            listener,
            config: Arc::new(config),
            stats: Arc::new(ServerStats::default()),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn stats(&self) -> Arc<ServerStats> {
        self.stats.clone()
    }

    /// Accepts sessions until the listener fails; each runs on a thread
    /// of its own, at most `max_sessions` at once.
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
            let slot = {
                let mut m = self.stats.open_per_ip.lock().unwrap();
                let total: usize = m.values().sum();
                let here = m.get(&peer.ip()).copied().unwrap_or(0);
                if total >= self.config.max_sessions || here >= self.config.max_sessions_per_ip {
                    None
                } else {
                    *m.entry(peer.ip()).or_insert(0) += 1;
                    Some(Slot {
                        stats: self.stats.clone(),
                        ip: peer.ip(),
                    })
                }
            };
            let (config, stats) = (self.config.clone(), self.stats.clone());
            std::thread::spawn(move || {
                let Some(slot) = slot else {
                    stats.refused.fetch_add(1, Ordering::Relaxed);
                    let _ = conn.set_write_timeout(Some(Duration::from_secs(1)));
                    let _ = write_message(
                        &mut &conn,
                        &Message::Refused {
                            reason: "server busy: session limit reached, try again later".into(),
                        },
                    );
                    return;
                };
                let line = run_session(conn, peer, &config, &stats);
                drop(slot);
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
struct Outcome {
    direction: Option<Direction>,
    authenticated: bool,
    streams: u32,
    packets: u64,
    bytes: u64,
    drops: DropCounters,
    end: String,
}

fn run_session(
    conn: TcpStream,
    peer: SocketAddr,
    config: &ServerConfig,
    stats: &ServerStats,
) -> String {
    let started = clock::monotonic_ns();
    let mut o = Outcome {
        direction: None,
        authenticated: false,
        streams: 0,
        packets: 0,
        bytes: 0,
        drops: DropCounters::default(),
        end: String::new(),
    };
    let result = session(conn, peer, config, &mut o);
    stats.sessions.fetch_add(1, Ordering::Relaxed);
    stats.drops.lock().unwrap().merge(&o.drops);
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
        "tightlink server: session peer={peer} direction={} auth={} streams={} packets={} bytes={} duration_ms={} drops=[{}] end={}",
        match o.direction {
            Some(Direction::Forward) => "forward",
            Some(Direction::Reverse) => "reverse",
            None => "-",
        },
        o.authenticated,
        o.streams,
        o.packets,
        o.bytes,
        (clock::monotonic_ns() - started) / 1_000_000,
        drops.join(","),
        o.end
    )
}

/// Sends `Refused` and returns the reason as the session's error.
fn refuse(w: &mut BufWriter<&TcpStream>, reason: String) -> Result<(), String> {
    let _ = write_message(
        w,
        &Message::Refused {
            reason: reason.clone(),
        },
    );
    Err(format!("refused: {reason}"))
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

fn session(
    conn: TcpStream,
    peer: SocketAddr,
    config: &ServerConfig,
    o: &mut Outcome,
) -> Result<(), String> {
    let io_err = |e: io::Error| e.to_string();
    conn.set_nodelay(true).map_err(io_err)?;
    conn.set_read_timeout(Some(config.handshake_timeout))
        .map_err(io_err)?;
    conn.set_write_timeout(Some(config.handshake_timeout))
        .map_err(io_err)?;
    // Unbuffered: the receive loop polls the fd, which must not hide bytes
    // already read into a buffer.
    let mut r = &conn;
    let mut w = BufWriter::new(&conn);
    let wants_key = match ctl(read_message(&mut r))? {
        Message::Hello { version, wants_key } if version == VERSION => wants_key,
        Message::Hello { version, .. } => {
            return refuse(
                &mut w,
                format!("protocol version {version}; this server speaks {VERSION}"),
            )
        }
        _ => return refuse(&mut w, "expected Hello".into()),
    };
    let nonce = auth::nonce().map_err(io_err)?;
    write_message(
        &mut w,
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
    )
    .map_err(io_err)?;
    let (direction, answer) = match ctl(read_message(&mut r))? {
        Message::Open { direction, auth } => (direction, auth),
        _ => return refuse(&mut w, "expected Open".into()),
    };
    o.direction = Some(direction);
    o.authenticated = match (&config.key, answer) {
        (Some(key), Some(a)) => {
            if !auth::verify(key, &nonce, direction, &a) {
                return refuse(&mut w, "wrong key".into());
            }
            true
        }
        (None, Some(_)) => return refuse(&mut w, "this server has no key configured".into()),
        (_, None) if config.require_key => {
            return refuse(&mut w, "this server requires a key (--key-file)".into())
        }
        (_, None) => false,
    };
    let limits = if o.authenticated {
        config.keyed_limits
    } else {
        config.open_limits
    };
    let local_ip = conn.local_addr().map_err(io_err)?.ip();
    let mut sock = ProbeSocket::bind(SocketAddr::new(local_ip, 0), 16 << 20).map_err(io_err)?;
    let udp_port = sock.local_addr().map_err(io_err)?.port();
    let session_id = u64::from_be_bytes(nonce[..8].try_into().unwrap());
    write_message(
        &mut w,
        &Message::Accepted {
            session: session_id,
            udp_port,
            authenticated: o.authenticated,
            limits,
        },
    )
    .map_err(io_err)?;
    conn.set_read_timeout(Some(config.idle_timeout))
        .map_err(io_err)?;
    conn.set_write_timeout(Some(config.idle_timeout))
        .map_err(io_err)?;
    let session_end = clock::monotonic_ns() + limits.max_session_ms as i64 * 1_000_000;
    // UDP bytes the client sent us, and the client's UDP address.
    let mut seen = Collected::default();
    let mut sent_udp_bytes: u64 = 0;
    let mut tcp_credit: u64 = 0;
    // What the socket may hold between streams: warm-ups and credit from
    // the client, counted; anything else, dropped with a reason.
    let between_streams = |seen: &Collected| Expect {
        session: session_id,
        stream: u32::MAX,
        packets: 0,
        max_size: limits.max_packet_bytes as usize,
        peer_ip: peer.ip(),
        peer_port: seen.peer.map(|p| p.port()),
    };
    let mut sequence = 0u32;
    loop {
        let msg = ctl(read_message(&mut r))?;
        let remaining_ns = session_end - clock::monotonic_ns();
        if remaining_ns <= 0 {
            return refuse(
                &mut w,
                format!("session time limit of {} ms reached", limits.max_session_ms),
            );
        }
        match msg {
            Message::Forward {
                stream,
                packets,
                max_size,
                bytes,
                duration_ns,
            } if direction == Direction::Forward => {
                if let Err(why) = check_stream(
                    &limits,
                    packets,
                    max_size as u64,
                    bytes,
                    o.bytes,
                    duration_ns,
                    remaining_ns,
                ) {
                    return refuse(&mut w, why);
                }
                write_message(&mut w, &Message::Ready { stream }).map_err(io_err)?;
                let expect = Expect {
                    session: session_id,
                    stream,
                    packets,
                    max_size: max_size as usize,
                    peer_ip: peer.ip(),
                    peer_port: seen.peer.map(|p| p.port()),
                };
                let deadline = clock::monotonic_ns() + duration_ns as i64 + 2_000_000_000;
                let mut sender_done = false;
                let c = collect_stream(
                    &mut &sock,
                    &expect,
                    Some(conn.as_raw_fd()),
                    &mut || match read_message(&mut r) {
                        Ok(Message::StreamSent { stream: s }) if s == stream => {
                            sender_done = true;
                            Ok(true)
                        }
                        Ok(_) => Err(io::Error::other("expected StreamSent")),
                        Err(e) => Err(io::Error::other(e.to_string())),
                    },
                    deadline,
                )
                .map_err(io_err)?;
                if !sender_done {
                    return refuse(&mut w, "stream not finished in time".into());
                }
                o.streams += 1;
                o.packets += packets as u64;
                o.bytes += bytes;
                o.drops.merge(&c.drops);
                seen.peer = seen.peer.or(c.peer);
                send_records(&mut w, stream, RecordKind::Receive, &c.recv_ns).map_err(io_err)?;
            }
            Message::Reverse { stream, schedule } if direction == Direction::Reverse => {
                let bytes: u64 = schedule.iter().map(|s| s.size_bytes as u64).sum();
                let max_size = schedule.iter().map(|s| s.size_bytes).max().unwrap_or(0);
                let duration_ns = schedule.last().map_or(0, |s| s.offset_ns as u64);
                if let Err(why) = check_stream(
                    &limits,
                    schedule.len() as u32,
                    max_size as u64,
                    bytes,
                    o.bytes,
                    duration_ns,
                    remaining_ns,
                ) {
                    return refuse(&mut w, why);
                }
                if schedule.windows(2).any(|p| p[1].offset_ns < p[0].offset_ns) {
                    return refuse(&mut w, "schedule offsets must not decrease".into());
                }
                // Learn the client's port and count its credit: wait up to
                // 200 ms for what it sent before this request.
                let need = sent_udp_bytes + bytes;
                let until = clock::monotonic_ns() + 200_000_000;
                loop {
                    absorb(&sock, &between_streams(&seen), &mut seen).map_err(io_err)?;
                    let enough = o.authenticated || seen.peer_bytes + tcp_credit >= need;
                    if (seen.peer.is_some() && enough) || clock::monotonic_ns() > until {
                        break;
                    }
                    sockopt::wait_fd(sock.fd(), libc::POLLIN, 5).map_err(io_err)?;
                }
                let Some(client) = seen.peer else {
                    return refuse(
                        &mut w,
                        "no UDP packet of this session arrived from the client's address: the server sends only where the client has sent from".into(),
                    );
                };
                if !o.authenticated && seen.peer_bytes + tcp_credit < need {
                    return refuse(
                        &mut w,
                        format!(
                            "reverse stream of {bytes} bytes exceeds the client's credit ({} of {need} bytes received); without a key the server sends no more than it received",
                            seen.peer_bytes + tcp_credit
                        ),
                    );
                }
                write_message(&mut w, &Message::Ready { stream }).map_err(io_err)?;
                let d = send_schedule(
                    &mut sock,
                    client,
                    session_id,
                    stream,
                    &schedule,
                    &mut sequence,
                )
                .map_err(io_err)?;
                sent_udp_bytes += bytes;
                o.streams += 1;
                o.packets += schedule.len() as u64;
                o.bytes += bytes;
                write_message(&mut w, &Message::StreamSent { stream }).map_err(io_err)?;
                send_records(&mut w, stream, RecordKind::Transmit, &d).map_err(io_err)?;
            }
            Message::Credit { len } if direction == Direction::Reverse => {
                tcp_credit += len as u64;
            }
            Message::Close => {
                absorb(&sock, &between_streams(&seen), &mut seen).map_err(io_err)?;
                o.drops.merge(&seen.drops);
                write_message(&mut w, &Message::Bye { drops: o.drops }).map_err(io_err)?;
                return Ok(());
            }
            other => {
                return refuse(
                    &mut w,
                    format!("unexpected message in a {direction:?} session: {other:?}")
                        .chars()
                        .take(200)
                        .collect(),
                )
            }
        }
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

/// Sends a reverse schedule to the client; returns each packet's kernel
/// transmit time.
fn send_schedule(
    sock: &mut ProbeSocket,
    to: SocketAddr,
    session: u64,
    stream: u32,
    schedule: &[Scheduled],
    sequence: &mut u32,
) -> io::Result<Vec<Option<i64>>> {
    let offsets: Vec<i64> = schedule.iter().map(|s| s.offset_ns as i64).collect();
    let sizes: Vec<u32> = schedule.iter().map(|s| s.size_bytes as u32).collect();
    let (warm, mut pk) = packets::build(session, stream, &offsets, &sizes, sequence);
    let d = send_paced(
        &mut UdpTx { sock, to },
        &warm,
        &mut pk,
        &offsets,
        clock::monotonic_ns() + 200_000,
    )?;
    Ok(d.tx_ns)
}

/// Sends per-packet timestamps as `Records` frames: a base (the earliest
/// stamp) and 32-bit offsets; positions without a stamp are left out.
pub(crate) fn send_records(
    w: &mut BufWriter<&TcpStream>,
    stream: u32,
    kind: RecordKind,
    stamps: &[Option<i64>],
) -> io::Result<()> {
    let base_ns = stamps.iter().flatten().copied().min().unwrap_or(0);
    let records: Vec<Record> = stamps
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.map(|t| Record {
                position: i as u32,
                offset_ns: (t - base_ns).clamp(0, u32::MAX as i64) as u32,
            })
        })
        .collect();
    let mut chunks = records.chunks(RECORDS_PER_FRAME).peekable();
    if chunks.peek().is_none() {
        return write_message(
            w,
            &Message::Records {
                stream,
                kind,
                base_ns,
                last: true,
                records: vec![],
            },
        );
    }
    while let Some(chunk) = chunks.next() {
        write_message(
            w,
            &Message::Records {
                stream,
                kind,
                base_ns,
                last: chunks.peek().is_none(),
                records: chunk.to_vec(),
            },
        )?;
    }
    Ok(())
}
