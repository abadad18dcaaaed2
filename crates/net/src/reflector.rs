//! `tightlink reflector`: a TWAMP-light (RFC 5357 section 4.2.1) and
//! STAMP (RFC 8762 section 4.3.1, RFC 8972) Session-Reflector in
//! unauthenticated mode (\[CLOUD\]'s TWAMP framing). Any TWAMP-light or
//! STAMP sender, tightlink's own `twamp:` channel among them, can use this
//! host as its far end without a control session.
//!
//! Each test packet is answered with the reflector header (its own
//! sequence number per sender, its transmit time, the kernel's receive
//! time of the packet, then the sender's sequence number, timestamp, error
//! estimate and TTL), the way its sender speaks:
//! - a STAMP sender (bytes 16-43 zero, as RFC 8762 wants them): the SSID
//!   at 14-15, MBZ at 41-43, the TLVs from 44 echoed (an unknown type
//!   flagged U, a TLV running past the packet flagged M);
//! - any other (RFC 5357): MBZ at 14-15 and the sender's bytes from 14 on
//!   after the 41-byte header (RFC 6038's symmetric size), so padding,
//!   and tightlink's fields in it, come back.
//!
//! A tightlink probe that asks to be held (its hold flag; tightlink's
//! extension, in the manner of RFC 6802's reflector, which returns a
//! whole train) is answered once its train is in (or 50 ms after the
//! latest arrival): a pacing thread of its own sends the replies back at
//! the train's own schedule (at most 4 trains wait for it), each
//! transmit stamp read just before its send, with its place among those
//! sent back, so one reflector measures the way back too. Held bytes are
//! bounded in all ([`ReflectorConfig::hold_bytes`]) and a train's span by
//! [`MAX_HOLD_SPAN_NS`]; beyond them requests are answered at once.
//!
//! A request of 41 bytes or more gets a reply exactly as long. Receive
//! times are kernel software stamps (SO_TIMESTAMPING); the error estimate
//! follows the kernel's NTP state (adjtimex).
//!
//! Safe to expose. It keeps no state beyond a bounded table of senders
//! (a sequence counter and token buckets each), and:
//! - amplifies only short requests: RFC 5357 allows 14-byte test
//!   packets and its reply is 41 bytes; those are answered under their
//!   own small budget ([`ReflectorConfig::short_peer_pps`],
//!   [`ReflectorConfig::short_total_pps`]), or not at all
//!   (`short_packets: false`); every other reply is as long as its
//!   request, and requests under 14 bytes get nothing;
//! - answers only a packet's source, which a spoofer chooses: so the reply
//!   rate is capped per sender and in all by token buckets (defaults in
//!   [`ReflectorConfig::default`]), and sources on privileged ports other
//!   than 862 (DNS, NTP, ...) get nothing;
//! - memory is one batch of receive buffers and at most `max_peers`
//!   entries, whatever arrives; senders idle for `peer_idle` are dropped.
//!
//! Every packet it does not answer is counted by reason
//! ([`ReflectorStats`]); one log line per sender when it goes idle.

use std::collections::HashMap;
use std::io;
use std::mem::zeroed;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tightlink_sys::sockopt;

use tightlink_wire::twamp::{field, FLAG_HELD, FLAG_HOLD, TLV_INTEGRITY_FAILED};
use tightlink_wire::{stamp_auth, ProbeRepr, SenderPacket};
use tightlink_wire::{ErrorEstimate, NtpTimestamp};

use crate::auth::StampKey;
pub use crate::reflector_reply::{build_reply, echo_tlvs, layout_of, mark_tlvs, reply_len, Layout};

use crate::stamps::{cmsg_stamp, recv_mmsg};
use tightlink_sys::clock;

/// The TWAMP test port (RFC 5357 section 8.2 registers 862 for control;
/// TWAMP-light deployments use it for test packets too).
pub const TWAMP_PORT: u16 = 862;

/// Largest request answered: a 9000-byte jumbo frame's UDP payload.
pub const MAX_REQUEST: usize = 9_000;

const BATCH: usize = 32;
/// The test port's receive buffer: a 10 000-packet train of 3 KB frames.
pub const RCVBUF_BYTES: i32 = 32 << 20;

/// Where a held reply carries its index among the replies sent back and
/// their count (big-endian, after tightlink's fields in the echoed TLV).
pub const HELD_INDEX: std::ops::Range<usize> = 82..86;
pub const HELD_COUNT: std::ops::Range<usize> = 86..90;

/// Longest train (first to last scheduled send) a reflector holds: the
/// longest stream a server takes, so every stream tightlink sends can be
/// held whole (a train held in part comes back out of order). The pacing
/// thread sends one train at a time, so this also bounds how long a
/// train waits behind each other one.
pub const MAX_HOLD_SPAN_NS: u64 = crate::ctl::MAX_STREAM_NS;
/// A held train whose last packet never came is sent this long after
/// its latest arrival.
const HOLD_FLUSH_NS: i64 = 50_000_000;

/// Replies held for one sender's train, sent back at the train's own
/// schedule (the offsets in tightlink's fields) once its last packet is in.
#[derive(Debug)]
struct HeldTrain {
    session: u64,
    stream: u32,
    /// (schedule offset, reply bytes).
    replies: Vec<(u64, Vec<u8>)>,
    bytes: usize,
    last_ns: i64,
}

/// Whether a request asks to be held: a STAMP-layout tightlink probe
/// (not a warm-up) with the hold flag; its schedule offset and position.
fn hold_request(request: &[u8]) -> Option<ProbeRepr> {
    if layout_of(request) != Layout::Stamp {
        return None;
    }
    let v = SenderPacket::new_checked(request).ok()?;
    let p = ProbeRepr::parse(&v).ok()?;
    (v.flags() & FLAG_HOLD != 0 && !p.warmup).then_some(p)
}

#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    pub bind: SocketAddr,
    /// Senders (address and port) tracked at once; packets of more are
    /// dropped as `peers_full` until one goes idle.
    pub max_peers: usize,
    /// Reply rate per sender, bit/s at the frame layer, and its burst.
    pub peer_rate_bps: f64,
    pub peer_burst_bytes: f64,
    /// Reply rate over all senders, and its burst.
    pub total_rate_bps: f64,
    pub total_burst_bytes: f64,
    /// A sender silent this long is forgotten (and logged).
    pub peer_idle: Duration,
    /// Whether requests of 14-40 bytes (whose reply, 41 bytes, is longer)
    /// are answered at all ...
    pub short_packets: bool,
    /// ... and at most this many a second per sender and in all (their
    /// bytes count against the byte buckets above too).
    pub short_peer_pps: f64,
    pub short_total_pps: f64,
    /// Bytes of replies held for trains that asked to be sent back at
    /// their schedule, over all senders; a train that does not fit is
    /// answered packet by packet.
    pub hold_bytes: usize,
    pub log: bool,
    /// STAMP's authenticated mode (RFC 8762 section 4.4): with a key,
    /// only test packets whose HMACs match it are answered, in the
    /// authenticated layout; none other is.
    pub key: Option<StampKey>,
}

impl Default for ReflectorConfig {
    /// 1 Gbit/s per sender with a 16 MB burst (a 10 000-packet train of
    /// 1514-byte frames at any rate), 4 Gbit/s and 32 MB in all, 64
    /// senders, idle after 30 s; short requests answered at 100 a second
    /// per sender and 1000 in all (latency probes send 1-100 a second).
    fn default() -> Self {
        ReflectorConfig {
            bind: SocketAddr::from(([0, 0, 0, 0], TWAMP_PORT)),
            max_peers: 64,
            peer_rate_bps: 1e9,
            peer_burst_bytes: 16e6,
            total_rate_bps: 4e9,
            total_burst_bytes: 32e6,
            peer_idle: Duration::from_secs(30),
            short_packets: true,
            short_peer_pps: 100.0,
            short_total_pps: 1000.0,
            hold_bytes: 32 << 20,
            log: true,
            key: None,
        }
    }
}

/// What the reflector did with what arrived.
#[derive(Debug, Default)]
pub struct ReflectorStats {
    pub received: AtomicU64,
    pub reflected: AtomicU64,
    /// Of those, answered the STAMP way.
    pub reflected_stamp: AtomicU64,
    /// Of those, short requests (14-40 bytes) answered with 41 bytes.
    pub reflected_short: AtomicU64,
    /// Shorter than RFC 5357's 14-byte test packet.
    pub too_short: AtomicU64,
    /// 14-40 bytes while short requests are off.
    pub short_refused: AtomicU64,
    /// 14-40 bytes over the short-request budget.
    pub short_limited: AtomicU64,
    /// Longer than [`MAX_REQUEST`].
    pub too_long: AtomicU64,
    /// From a port below 1024 other than 862, or port 0.
    pub privileged_port: AtomicU64,
    /// Over a sender's or the total reply rate.
    pub rate_limited: AtomicU64,
    /// From a new sender while the table was full.
    pub peers_full: AtomicU64,
    /// Replies the socket would not take.
    pub send_failed: AtomicU64,
    /// Requests without a kernel receive stamp (stamped in user space).
    pub unstamped: AtomicU64,
    /// Replies held and sent back at their train's schedule.
    pub held: AtomicU64,
    /// Asked to be held, answered at once: over `hold_bytes` or a train
    /// longer than [`MAX_HOLD_SPAN_NS`].
    pub hold_refused: AtomicU64,
    /// Authenticated mode: test packets whose HMAC did not match the key
    /// (or that were not in the authenticated layout).
    pub bad_hmac: AtomicU64,
}

impl ReflectorStats {
    /// Every counter by name, for logs and tests.
    pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let l = |c: &AtomicU64| c.load(Ordering::Relaxed);
        vec![
            ("received", l(&self.received)),
            ("reflected", l(&self.reflected)),
            ("reflected_stamp", l(&self.reflected_stamp)),
            ("reflected_short", l(&self.reflected_short)),
            ("too_short", l(&self.too_short)),
            ("short_refused", l(&self.short_refused)),
            ("short_limited", l(&self.short_limited)),
            ("too_long", l(&self.too_long)),
            ("privileged_port", l(&self.privileged_port)),
            ("rate_limited", l(&self.rate_limited)),
            ("peers_full", l(&self.peers_full)),
            ("send_failed", l(&self.send_failed)),
            ("unstamped", l(&self.unstamped)),
            ("held", l(&self.held)),
            ("hold_refused", l(&self.hold_refused)),
            ("bad_hmac", l(&self.bad_hmac)),
        ]
    }

    /// The refusals that happened, as `name=count` words.
    pub fn refused_summary(&self) -> String {
        let shown = [
            "too_short",
            "short_refused",
            "short_limited",
            "too_long",
            "privileged_port",
            "rate_limited",
            "peers_full",
            "send_failed",
            "hold_refused",
            "bad_hmac",
        ];
        self.snapshot()
            .into_iter()
            .filter(|(n, v)| *v > 0 && shown.contains(n))
            .map(|(n, v)| format!("{n}={v}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Why a request gets no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoReply {
    TooShort,
    ShortRefused,
    ShortLimited,
    TooLong,
    PrivilegedPort,
    RateLimited,
    PeersFull,
}

/// A token bucket in bytes.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    last_ns: i64,
}

impl Bucket {
    fn full(burst: f64, now_ns: i64) -> Self {
        Bucket {
            tokens: burst,
            last_ns: now_ns,
        }
    }

    fn refill(&mut self, rate_bps: f64, burst: f64, now_ns: i64) {
        self.refill_per_s(rate_bps / 8.0, burst, now_ns);
    }

    /// Tokens (bytes, or packets) accrue at `per_s` a second.
    fn refill_per_s(&mut self, per_s: f64, burst: f64, now_ns: i64) {
        let dt = (now_ns - self.last_ns).max(0) as f64;
        self.tokens = (self.tokens + dt * per_s / 1e9).min(burst);
        self.last_ns = now_ns;
    }
}

#[derive(Debug)]
struct Peer {
    sequence: u32,
    bucket: Bucket,
    /// Short requests, in packets.
    short: Bucket,
    first_ns: i64,
    last_ns: i64,
    reflected: u64,
    limited: u64,
}

/// The reflector's decisions, apart from sockets and clocks: the sender
/// table and both buckets, with the time passed in.
#[derive(Debug)]
pub struct Policy {
    config: ReflectorConfig,
    peers: HashMap<SocketAddr, Peer>,
    total: Bucket,
    short_total: Bucket,
}

impl Policy {
    pub fn new(config: ReflectorConfig, now_ns: i64) -> Self {
        let total = Bucket::full(config.total_burst_bytes, now_ns);
        let short_total = Bucket::full(config.short_total_pps, now_ns);
        Policy {
            config,
            peers: HashMap::new(),
            total,
            short_total,
        }
    }

    /// Decides whether a `len`-byte request from `from` is answered; if
    /// so, returns the reflector sequence number to use and charges the
    /// reply's frame bytes ([`reply_len`] + `frame_overhead`) to both byte
    /// buckets, and a short request to both short buckets.
    pub fn admit(
        &mut self,
        from: SocketAddr,
        len: usize,
        frame_overhead: usize,
        now_ns: i64,
    ) -> Result<u32, NoReply> {
        if len < field::TWAMP_MIN_LEN {
            return Err(NoReply::TooShort);
        }
        let short = len < field::reflector::HEADER_LEN;
        if short && !self.config.short_packets {
            return Err(NoReply::ShortRefused);
        }
        if len > MAX_REQUEST {
            return Err(NoReply::TooLong);
        }
        let port = from.port();
        if port == 0 || (port < 1024 && port != TWAMP_PORT) {
            return Err(NoReply::PrivilegedPort);
        }
        let c = &self.config;
        if !self.peers.contains_key(&from) {
            if self.peers.len() >= c.max_peers {
                return Err(NoReply::PeersFull);
            }
            self.peers.insert(
                from,
                Peer {
                    sequence: 0,
                    bucket: Bucket::full(c.peer_burst_bytes, now_ns),
                    short: Bucket::full(c.short_peer_pps, now_ns),
                    first_ns: now_ns,
                    last_ns: now_ns,
                    reflected: 0,
                    limited: 0,
                },
            );
        }
        let peer = self.peers.get_mut(&from).expect("inserted above");
        peer.last_ns = now_ns;
        let bytes = (reply_len(len) + frame_overhead) as f64;
        peer.bucket
            .refill(c.peer_rate_bps, c.peer_burst_bytes, now_ns);
        self.total
            .refill(c.total_rate_bps, c.total_burst_bytes, now_ns);
        if short {
            peer.short
                .refill_per_s(c.short_peer_pps, c.short_peer_pps, now_ns);
            self.short_total
                .refill_per_s(c.short_total_pps, c.short_total_pps, now_ns);
            if peer.short.tokens < 1.0 || self.short_total.tokens < 1.0 {
                peer.limited += 1;
                return Err(NoReply::ShortLimited);
            }
        }
        if peer.bucket.tokens < bytes || self.total.tokens < bytes {
            peer.limited += 1;
            return Err(NoReply::RateLimited);
        }
        if short {
            peer.short.tokens -= 1.0;
            self.short_total.tokens -= 1.0;
        }
        peer.bucket.tokens -= bytes;
        self.total.tokens -= bytes;
        peer.reflected += 1;
        let s = peer.sequence;
        peer.sequence = s.wrapping_add(1);
        Ok(s)
    }

    /// Forgets senders idle for `peer_idle`; returns one line per sender.
    pub fn expire(&mut self, now_ns: i64) -> Vec<String> {
        let idle = self.config.peer_idle.as_nanos() as i64;
        let mut lines = Vec::new();
        self.peers.retain(|addr, p| {
            let keep = now_ns - p.last_ns < idle;
            if !keep {
                lines.push(format!(
                    "tightlink reflector: {addr}: {} reflected, {} over the rate limit, over {:.1} s",
                    p.reflected,
                    p.limited,
                    (p.last_ns - p.first_ns) as f64 / 1e9
                ));
            }
            keep
        });
        lines
    }

    pub fn peers(&self) -> usize {
        self.peers.len()
    }
}

/// This host clock's error estimate from the kernel's NTP state: S set
/// when synchronised, the estimated error (at least 1 us, the software
/// stamp's own spread) otherwise the maximum error.
pub fn clock_error_estimate() -> ErrorEstimate {
    // SAFETY: a zeroed timex with modes 0 only reads the kernel's state.
    let (state, tx) = unsafe {
        let mut tx: libc::timex = zeroed();
        let state = libc::adjtimex(&mut tx);
        (state, tx)
    };
    let synced = state >= 0 && state != libc::TIME_ERROR && tx.status & libc::STA_UNSYNC == 0;
    let error_us = if synced { tx.esterror } else { tx.maxerror };
    ErrorEstimate::from_ns((error_us.max(1) as u64).saturating_mul(1_000), synced)
}

/// One received request.
struct Request {
    len: usize,
    from: SocketAddr,
    kernel_ns: Option<i64>,
    ttl: Option<u8>,
}

/// The TTL (IPv4) or hop limit (IPv6) in a received message's control data.
///
/// # Safety
/// `msg` must be a message filled by `recvmmsg` whose control buffer is
/// still alive.
unsafe fn cmsg_ttl(msg: &libc::msghdr) -> Option<u8> {
    let mut cmsg = libc::CMSG_FIRSTHDR(msg);
    while !cmsg.is_null() {
        let (level, ty) = ((*cmsg).cmsg_level, (*cmsg).cmsg_type);
        if (level == libc::IPPROTO_IP && ty == libc::IP_TTL)
            || (level == libc::IPPROTO_IPV6 && ty == libc::IPV6_HOPLIMIT)
        {
            let v: i32 = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg) as *const i32);
            return u8::try_from(v).ok();
        }
        cmsg = libc::CMSG_NXTHDR(msg, cmsg);
    }
    None
}

pub struct Reflector {
    sock: UdpSocket,
    config: ReflectorConfig,
    stats: Arc<ReflectorStats>,
    stop: Arc<AtomicBool>,
}

/// A reflector running on its own thread; dropping it stops it.
pub struct ReflectorHandle {
    pub addr: SocketAddr,
    pub stats: Arc<ReflectorStats>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<io::Result<()>>>,
}

impl Drop for ReflectorHandle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Reflector {
    /// Binds the test port with kernel receive stamps and TTLs on, and a
    /// receive buffer for a 10 000-packet train ([`RCVBUF_BYTES`]).
    pub fn bind(config: ReflectorConfig) -> io::Result<Reflector> {
        let sock = UdpSocket::bind(config.bind)?;
        let fd = sock.as_raw_fd();
        // linux/net_tstamp.h: RX_SOFTWARE | SOFTWARE.
        sockopt::set_int(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPING,
            (1 << 3) | (1 << 4),
        )?;
        if config.bind.is_ipv4() {
            sockopt::set_int(fd, libc::IPPROTO_IP, libc::IP_RECVTTL, 1)?;
        } else {
            sockopt::set_int(fd, libc::IPPROTO_IPV6, libc::IPV6_RECVHOPLIMIT, 1)?;
        }
        if sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, RCVBUF_BYTES).is_err() {
            sockopt::set_int(fd, libc::SOL_SOCKET, libc::SO_RCVBUF, RCVBUF_BYTES)?;
        }
        sock.set_nonblocking(true)?;
        Ok(Reflector {
            sock,
            config,
            stats: Arc::default(),
            stop: Arc::default(),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// `Some(warning)` where the kernel granted the test port less
    /// receive buffer than [`RCVBUF_BYTES`] ([`crate::udp::rcvbuf_shortfall`]):
    /// requests beyond it are dropped unanswered, and senders read them as
    /// path loss.
    pub fn receive_buffer_warning(&self) -> io::Result<Option<String>> {
        let reported = sockopt::get_int(self.sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_RCVBUF)?;
        Ok(crate::udp::rcvbuf_shortfall(
            "the test port gets",
            RCVBUF_BYTES,
            reported.max(0) as usize,
        ))
    }

    pub fn stats(&self) -> Arc<ReflectorStats> {
        self.stats.clone()
    }

    /// Runs on a thread of its own until the handle is dropped.
    pub fn spawn(self) -> io::Result<ReflectorHandle> {
        let addr = self.local_addr()?;
        let stats = self.stats.clone();
        let stop = self.stop.clone();
        let thread = std::thread::Builder::new()
            .name("tightlink-reflector".into())
            .spawn(move || self.serve())?;
        Ok(ReflectorHandle {
            addr,
            stats,
            stop,
            thread: Some(thread),
        })
    }

    /// Answers test packets until stopped (forever from the CLI).
    pub fn serve(self) -> io::Result<()> {
        let fd = self.sock.as_raw_fd();
        let overhead = if self.config.bind.is_ipv4() { 42 } else { 62 };
        let mut policy = Policy::new(self.config.clone(), clock::monotonic_ns());
        let mut bufs = vec![[0u8; MAX_REQUEST + 1]; BATCH];
        let mut reply = vec![0u8; MAX_REQUEST];
        let mut got: Vec<Option<Request>> = (0..BATCH).map(|_| None).collect();
        let mut error = clock_error_estimate();
        let mut next_housekeeping = clock::monotonic_ns() + 1_000_000_000;
        // Refusals are logged when they change, at most once a minute.
        let mut refusals = (String::new(), 0i64);
        let mut held: HashMap<SocketAddr, HeldTrain> = HashMap::new();
        let (pacer, in_flight) = self.spawn_pacer()?;
        let key = self.config.key.as_ref();
        let give = |to: SocketAddr, t: HeldTrain| {
            hand_over(&pacer, &in_flight, &self.sock, &self.stats, key, to, t)
        };
        while !self.stop.load(Ordering::Relaxed) {
            let now = clock::monotonic_ns();
            // Trains whose last packet was lost go back as they are.
            let stale: Vec<SocketAddr> = held
                .iter()
                .filter(|(_, t)| now - t.last_ns > HOLD_FLUSH_NS)
                .map(|(a, _)| *a)
                .collect();
            for a in stale {
                if let Some(t) = held.remove(&a) {
                    give(a, t);
                }
            }
            if now >= next_housekeeping {
                self.housekeeping(&mut policy, now, &mut refusals);
                error = clock_error_estimate();
                next_housekeeping = now + 1_000_000_000;
            }
            let wait_ms = if held.is_empty() { 200 } else { 5 };
            if !sockopt::wait_fd(fd, libc::POLLIN, wait_ms)? {
                continue;
            }
            loop {
                let n = recv_full_batch(fd, &mut bufs, &mut got)?;
                for (buf, slot) in bufs.iter().zip(got.iter_mut()).take(n) {
                    let Some(r) = slot.take() else { continue };
                    // A longer datagram keeps its real length in `r` (refused as
                    // too long); the view stops at the buffer.
                    let request = &buf[..r.len.min(buf.len())];
                    let opened;
                    let mut tlvs_intact = true;
                    let request = match &self.config.key {
                        None => request,
                        Some(k) => match stamp_auth::open_sender(request, &|p| k.mac(p)) {
                            Ok(o) => {
                                tlvs_intact = o.tlvs_intact;
                                opened = o.packet;
                                &opened[..]
                            }
                            Err(_) => {
                                self.stats.bad_hmac.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                        },
                    };
                    let Some(len) =
                        self.answer(&mut policy, request, &r, overhead, error, &mut reply)
                    else {
                        continue;
                    };
                    if !tlvs_intact {
                        mark_tlvs(&mut reply[field::TLVS.min(len)..len], TLV_INTEGRITY_FAILED);
                    }
                    match hold_request(request) {
                        Some(p) => {
                            let in_flight = in_flight.load(Ordering::Relaxed);
                            self.hold(&mut held, in_flight, &give, &p, &reply[..len], r.from)
                        }
                        None => send_now(&self.sock, &self.stats, key, &reply[..len], r.from),
                    }
                }
                if n < BATCH {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Held trains are paced out on a thread of their own: its queue, and
    /// the bytes handed to it and not yet sent.
    #[allow(clippy::type_complexity)]
    fn spawn_pacer(
        &self,
    ) -> io::Result<(
        std::sync::mpsc::SyncSender<(SocketAddr, HeldTrain)>,
        Arc<std::sync::atomic::AtomicUsize>,
    )> {
        let in_flight = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (pacer, queue) = std::sync::mpsc::sync_channel::<(SocketAddr, HeldTrain)>(PACER_QUEUE);
        let (sock, stats, stop, sent, key) = (
            self.sock.try_clone()?,
            self.stats.clone(),
            self.stop.clone(),
            in_flight.clone(),
            self.config.key.clone(),
        );
        std::thread::Builder::new()
            .name("tightlink-reflector-pacer".into())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match queue.recv_timeout(Duration::from_millis(200)) {
                        Ok((to, t)) => {
                            let bytes = t.bytes;
                            send_held(&sock, &stats, key.as_ref(), to, t);
                            sent.fetch_sub(bytes, Ordering::Relaxed);
                        }
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(_) => return,
                    }
                }
            })?;
        Ok((pacer, in_flight))
    }

    /// Once a second: expired sessions out of the policy, and the
    /// refusals logged where they changed (`refusals`: the last logged,
    /// and when the next may be).
    fn housekeeping(&self, policy: &mut Policy, now: i64, refusals: &mut (String, i64)) {
        for line in policy.expire(now) {
            if self.config.log {
                eprintln!("{line}");
            }
        }
        let refused = self.stats.refused_summary();
        if self.config.log && refused != refusals.0 && now >= refusals.1 {
            eprintln!("tightlink reflector: not answered since start: {refused}");
            *refusals = (refused, now + 60_000_000_000);
        }
    }

    /// A reply to a probe of a train to hold: kept with its train (a new
    /// train from the same sender hands the old one over), sent at once
    /// where holding it would pass the span or the bytes allowed, and
    /// the train handed over at its last probe.
    fn hold(
        &self,
        held: &mut HashMap<SocketAddr, HeldTrain>,
        in_flight: usize,
        give: &dyn Fn(SocketAddr, HeldTrain),
        p: &ProbeRepr,
        reply: &[u8],
        from: SocketAddr,
    ) {
        let len = reply.len();
        let in_hold: usize = held.values().map(|t| t.bytes).sum::<usize>() + in_flight;
        let same = held
            .get(&from)
            .is_some_and(|t| t.session == p.session && t.stream == p.stream);
        if !same {
            if let Some(t) = held.remove(&from) {
                give(from, t);
            }
        }
        if p.offset_ns > MAX_HOLD_SPAN_NS || in_hold + len > self.config.hold_bytes {
            self.stats.hold_refused.fetch_add(1, Ordering::Relaxed);
            send_now(
                &self.sock,
                &self.stats,
                self.config.key.as_ref(),
                reply,
                from,
            );
            return;
        }
        let mut bytes = reply.to_vec();
        bytes[field::FLAGS] |= FLAG_HELD;
        let t = held.entry(from).or_insert_with(|| HeldTrain {
            session: p.session,
            stream: p.stream,
            replies: Vec::new(),
            bytes: 0,
            last_ns: 0,
        });
        t.replies.push((p.offset_ns, bytes));
        t.bytes += len;
        t.last_ns = clock::monotonic_ns();
        if p.position + 1 == p.stream_len {
            if let Some(t) = held.remove(&from) {
                give(from, t);
            }
        }
    }

    /// Admits and builds the reply to one request; its length, or
    /// `None` (counted by reason) when it gets none.
    fn answer(
        &self,
        policy: &mut Policy,
        request: &[u8],
        r: &Request,
        overhead: usize,
        error: ErrorEstimate,
        reply: &mut [u8],
    ) -> Option<usize> {
        let s = &self.stats;
        s.received.fetch_add(1, Ordering::Relaxed);
        let sequence = match policy.admit(r.from, r.len, overhead, clock::monotonic_ns()) {
            Ok(seq) => seq,
            Err(why) => {
                let c = match why {
                    NoReply::TooShort => &s.too_short,
                    NoReply::ShortRefused => &s.short_refused,
                    NoReply::ShortLimited => &s.short_limited,
                    NoReply::TooLong => &s.too_long,
                    NoReply::PrivilegedPort => &s.privileged_port,
                    NoReply::RateLimited => &s.rate_limited,
                    NoReply::PeersFull => &s.peers_full,
                };
                c.fetch_add(1, Ordering::Relaxed);
                return None;
            }
        };
        let receive_ns = match r.kernel_ns {
            Some(t) => t,
            None => {
                s.unstamped.fetch_add(1, Ordering::Relaxed);
                clock::realtime_ns()
            }
        };
        let receive = NtpTimestamp::from_unix_ns(receive_ns.max(0) as u64);
        let transmit = NtpTimestamp::from_unix_ns(clock::realtime_ns().max(0) as u64);
        let (len, layout) = build_reply(
            request,
            sequence,
            receive,
            transmit,
            error,
            r.ttl.unwrap_or(0),
            reply,
        );
        if layout == Layout::Stamp {
            s.reflected_stamp.fetch_add(1, Ordering::Relaxed);
        }
        if request.len() < field::reflector::HEADER_LEN {
            s.reflected_short.fetch_add(1, Ordering::Relaxed);
        }
        Some(len)
    }
}

/// Sends one reply (sealed first in authenticated mode), waiting up to
/// 10 ms for room in the socket.
fn send_now(
    sock: &UdpSocket,
    stats: &ReflectorStats,
    key: Option<&StampKey>,
    reply: &[u8],
    to: SocketAddr,
) {
    let sealed;
    let reply = match key {
        None => reply,
        Some(k) => {
            sealed = stamp_auth::seal_reflector(reply, &|p| k.mac(p));
            &sealed[..]
        }
    };
    let sent = loop {
        match sock.send_to(reply, to) {
            Ok(_) => break true,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if !sockopt::wait_fd(sock.as_raw_fd(), libc::POLLOUT, 10).unwrap_or(false) {
                    break false;
                }
            }
            Err(_) => break false,
        }
    };
    let c = if sent {
        &stats.reflected
    } else {
        &stats.send_failed
    };
    c.fetch_add(1, Ordering::Relaxed);
}

/// Sends a held train back at its own schedule (offsets from its first
/// packet), each reply's transmit stamp taken just before its send and,
/// after tightlink's fields, its place in what was sent back (index and
/// count, so the sender tells a reply lost on the way back from a probe
/// lost on the way here). Runs on the pacing thread.
fn send_held(
    sock: &UdpSocket,
    stats: &ReflectorStats,
    key: Option<&StampKey>,
    to: SocketAddr,
    mut train: HeldTrain,
) {
    train.replies.sort_by_key(|(off, _)| *off);
    let base = train.replies.first().map_or(0, |(off, _)| *off) as i64;
    let count = train.replies.len() as u32;
    let start = clock::monotonic_ns() + 200_000;
    for (j, (off, reply)) in train.replies.iter_mut().enumerate() {
        if let Some(b) = reply.get_mut(HELD_INDEX.start..HELD_COUNT.end) {
            b[..4].copy_from_slice(&(j as u32).to_be_bytes());
            b[4..].copy_from_slice(&count.to_be_bytes());
        }
        let due = start + (*off as i64 - base);
        loop {
            let left = due - clock::monotonic_ns();
            if left <= 0 {
                break;
            }
            if left > 200_000 {
                std::thread::sleep(Duration::from_nanos((left - 100_000) as u64));
            } else {
                std::hint::spin_loop();
            }
        }
        let transmit = NtpTimestamp::from_unix_ns(clock::realtime_ns().max(0) as u64);
        reply[field::reflector::TIMESTAMP].copy_from_slice(&transmit.to_bytes());
        send_now(sock, stats, key, reply, to);
        stats.held.fetch_add(1, Ordering::Relaxed);
    }
}

/// Trains waiting for the pacing thread, at most.
const PACER_QUEUE: usize = 4;

/// Hands a complete held train to the pacing thread, so the receive loop
/// never waits for a train's span; with the queue full the replies go
/// at once, unpaced (counted `hold_refused`).
fn hand_over(
    pacer: &std::sync::mpsc::SyncSender<(SocketAddr, HeldTrain)>,
    in_flight: &std::sync::atomic::AtomicUsize,
    sock: &UdpSocket,
    stats: &ReflectorStats,
    key: Option<&StampKey>,
    to: SocketAddr,
    train: HeldTrain,
) {
    let bytes = train.bytes;
    in_flight.fetch_add(bytes, Ordering::Relaxed);
    if let Err(e) = pacer.try_send((to, train)) {
        in_flight.fetch_sub(bytes, Ordering::Relaxed);
        let (std::sync::mpsc::TrySendError::Full((to, train))
        | std::sync::mpsc::TrySendError::Disconnected((to, train))) = e;
        for (_, r) in &train.replies {
            stats.hold_refused.fetch_add(1, Ordering::Relaxed);
            send_now(sock, stats, key, r, to);
        }
    }
}

/// Up to [`BATCH`] whole datagrams with their kernel receive stamps and
/// TTLs, without waiting. A datagram longer than its buffer keeps its real
/// length (MSG_TRUNC), so [`Policy::admit`] refuses it.
fn recv_full_batch(
    fd: i32,
    bufs: &mut [[u8; MAX_REQUEST + 1]],
    out: &mut [Option<Request>],
) -> io::Result<usize> {
    let mut slices: Vec<&mut [u8]> = bufs.iter_mut().map(|b| &mut b[..]).collect();
    recv_mmsg(fd, &mut slices, |k, len, from, msg| {
        // SAFETY: `msg` was just filled by recvmmsg; its control buffer
        // is alive for the call.
        let (kernel_ns, ttl) = unsafe { (cmsg_stamp(msg).0, cmsg_ttl(msg)) };
        out[k] = from.map(|from| Request {
            len,
            from,
            kernel_ns,
            ttl,
        });
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tightlink_wire::ReflectorRepr;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn config() -> ReflectorConfig {
        ReflectorConfig {
            max_peers: 2,
            peer_rate_bps: 8e6, // 1 byte per us
            peer_burst_bytes: 3_000.0,
            total_rate_bps: 16e6,
            total_burst_bytes: 4_500.0,
            peer_idle: Duration::from_secs(1),
            log: false,
            ..ReflectorConfig::default()
        }
    }

    /// Short requests: 100/s per sender and 1000/s in all by default;
    /// here 2 per second per sender and 3 in all, by hand.
    #[test]
    fn short_requests_have_their_own_budget() {
        let mut p = Policy::new(
            ReflectorConfig {
                short_peer_pps: 2.0,
                short_total_pps: 3.0,
                ..config()
            },
            0,
        );
        let a = addr("192.0.2.1:40000");
        let b = addr("192.0.2.2:40000");
        assert_eq!(p.admit(a, 14, 42, 0), Ok(0));
        assert_eq!(p.admit(a, 14, 42, 0), Ok(1));
        assert_eq!(p.admit(a, 14, 42, 0), Err(NoReply::ShortLimited));
        // Full-size requests from a are not held back by the short budget.
        assert_eq!(p.admit(a, 100, 42, 0), Ok(2));
        assert_eq!(p.admit(b, 40, 42, 0), Ok(0));
        assert_eq!(p.admit(b, 40, 42, 0), Err(NoReply::ShortLimited), "total");
        // Half a second later: one more for a (1 per 0.5 s), total 1.5.
        assert_eq!(p.admit(a, 14, 42, 500_000_000), Ok(3));
        assert_eq!(p.admit(a, 14, 42, 500_000_000), Err(NoReply::ShortLimited));
        let mut off = Policy::new(
            ReflectorConfig {
                short_packets: false,
                ..config()
            },
            0,
        );
        assert_eq!(off.admit(a, 14, 42, 0), Err(NoReply::ShortRefused));
        assert_eq!(off.admit(a, 41, 42, 0), Ok(0));
    }

    #[test]
    fn short_long_and_privileged_requests_get_no_reply() {
        let mut p = Policy::new(config(), 0);
        let ok = addr("192.0.2.1:40000");
        assert_eq!(p.admit(ok, 13, 42, 0), Err(NoReply::TooShort));
        assert_eq!(p.admit(ok, MAX_REQUEST + 1, 42, 0), Err(NoReply::TooLong));
        assert_eq!(
            p.admit(addr("192.0.2.1:53"), 100, 42, 0),
            Err(NoReply::PrivilegedPort)
        );
        assert_eq!(
            p.admit(addr("192.0.2.1:0"), 100, 42, 0),
            Err(NoReply::PrivilegedPort)
        );
        assert_eq!(p.admit(addr("192.0.2.1:862"), 14, 42, 0), Ok(0));
        // None of the refused ones took a table slot.
        assert_eq!(p.peers(), 1);
    }

    /// Per sender: burst 3000 B, 1 B/us; in all: 4500 B, 2 B/us. Replies
    /// of 1458 B cost 1500 B (frame). Worked out by hand below.
    #[test]
    fn each_sender_has_its_own_bucket_and_sequence() {
        let mut p = Policy::new(config(), 0);
        let a = addr("192.0.2.1:40000");
        let b = addr("192.0.2.2:40000");
        assert_eq!(p.admit(a, 1458, 42, 0), Ok(0));
        assert_eq!(p.admit(a, 1458, 42, 0), Ok(1));
        // a's bucket is empty (total: 1500 left).
        assert_eq!(p.admit(a, 1458, 42, 0), Err(NoReply::RateLimited));
        // b has its own full bucket and its own sequence; it takes the
        // total's last 1500, so its second reply is over the total.
        assert_eq!(p.admit(b, 1458, 42, 0), Ok(0));
        assert_eq!(p.admit(b, 1458, 42, 0), Err(NoReply::RateLimited));
        // After 1499 us a has 1499 B; after 1500 us enough (total: 3000).
        assert_eq!(p.admit(a, 1458, 42, 1_499_000), Err(NoReply::RateLimited));
        assert_eq!(p.admit(a, 1458, 42, 1_500_000), Ok(2));
    }

    #[test]
    fn the_table_is_bounded_and_idle_senders_leave_it() {
        let mut p = Policy::new(config(), 0);
        assert!(p.admit(addr("192.0.2.1:40000"), 100, 42, 0).is_ok());
        assert!(p
            .admit(addr("192.0.2.2:40000"), 100, 42, 500_000_000)
            .is_ok());
        assert_eq!(
            p.admit(addr("192.0.2.3:40000"), 100, 42, 600_000_000),
            Err(NoReply::PeersFull)
        );
        // At 1.2 s the first (last seen at 0) is idle, the second not.
        let lines = p.expire(1_200_000_000);
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("192.0.2.1:40000: 1 reflected"),
            "{}",
            lines[0]
        );
        assert!(p
            .admit(addr("192.0.2.3:40000"), 100, 42, 1_200_000_000)
            .is_ok());
        assert_eq!(p.peers(), 2);
    }

    /// On loopback: a 48-byte TWAMP packet comes back as 48 bytes with
    /// our sequence, timestamp and TTL and a kernel receive stamp; a
    /// 10-byte and a 9500-byte one get nothing and are counted.
    #[test]
    fn reflects_on_loopback_and_counts_what_it_drops() {
        let r = Reflector::bind(ReflectorConfig {
            bind: addr("127.0.0.1:0"),
            log: false,
            ..ReflectorConfig::default()
        })
        .unwrap();
        let h = r.spawn().unwrap();
        let c = UdpSocket::bind("127.0.0.1:0").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let mut buf = [0u8; 100];
        // The first socket on a host to ask for receive stamps switches
        // them on from a kernel work queue (net_enable_timestamp): a
        // packet before that has none. One exchange and a pause first.
        c.send_to(&[0u8; 48], h.addr).unwrap();
        c.recv_from(&mut buf).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let unstamped_before = h.stats.unstamped.load(Ordering::Relaxed);
        c.send_to(&[1u8; 10], h.addr).unwrap();
        // Longer than any buffer: its real length is kept and refused.
        c.send_to(&[2u8; 9_500], h.addr).unwrap();
        let mut req = [0u8; 48];
        req[0..4].copy_from_slice(&9u32.to_be_bytes());
        req[4..12].copy_from_slice(&[0x83, 0xAA, 0x7E, 0x81, 0, 0, 0, 5]);
        let before = clock::realtime_ns();
        c.send_to(&req, h.addr).unwrap();
        let (n, from) = c.recv_from(&mut buf).unwrap();
        assert_eq!((n, from), (48, h.addr));
        let view = tightlink_wire::ReflectorPacket::new_checked(&buf[..n]).unwrap();
        let rep = ReflectorRepr::parse(&view).unwrap();
        assert_eq!(rep.sender_sequence, 9);
        assert_eq!(
            rep.sender_timestamp.to_bytes(),
            [0x83, 0xAA, 0x7E, 0x81, 0, 0, 0, 5]
        );
        assert_eq!(rep.sender_ttl, 64, "loopback keeps the default TTL");
        // The kernel's receive stamp lies between our send and now.
        let recv = rep.receive_timestamp.to_unix_ns().unwrap() as i64;
        assert!(
            recv >= before - 1_000 && recv <= clock::realtime_ns(),
            "{recv} vs {before}"
        );
        // The counter moves just after the send: give it a moment.
        let until = clock::monotonic_ns() + 1_000_000_000;
        while h.stats.reflected.load(Ordering::Relaxed) < 2 && clock::monotonic_ns() < until {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(h.stats.too_short.load(Ordering::Relaxed), 1);
        assert_eq!(h.stats.too_long.load(Ordering::Relaxed), 1);
        assert_eq!(h.stats.reflected.load(Ordering::Relaxed), 2);
        assert_eq!(h.stats.unstamped.load(Ordering::Relaxed), unstamped_before);
    }
}
