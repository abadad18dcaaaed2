//! The TWAMP-light channel: probing strategies use any TWAMP-light
//! Session-Reflector (RFC 5357 section 4.2.1; `tightlink reflector`, a
//! router's or a NIC's) as the far end, without a control session (cloud
//! paper section II: TWAMP framing of probe trains). Target
//! `twamp:HOST[:PORT]`, port 862 by default.
//!
//! This host sends the paced train (any backend, the same
//! [`crate::backend::send_paced`] as against a server); the reflector's receive timestamp
//! in each reply gives the receive gaps: the path toward the reflector is
//! measured. In reverse (`-R`), a `tightlink reflector` holds each train
//! and sends it back at its schedule (tightlink's extension; the hello
//! checks the reflector does it), and this host's kernel receive stamps
//! measure the way back; probes lost on the way there were never sent
//! back: they count as lost, and the replies' places among those sent
//! back tell that it happened, which is warned about. Replies are matched to probes by the
//! sender sequence number and timestamp they echo, never by our fields in
//! the padding, which reflectors that write their header over the request
//! destroy. Reflector stamps are on the reflector's clock: only their
//! differences are used, mapped once per session onto this host's clock.
//!
//! Reflectors differ, and the channel reads what each gives: replies from
//! 38 bytes up (receive stamp, echoed sequence number and timestamp are
//! all it needs), STAMP or RFC 5357 layout, padding echoed or not. The
//! hello finds the reflector, its layout and the largest probe it answers
//! (a full-size packet, else 1472 bytes). Every stream's replies are
//! checked against what was sent: the stamps' noise, a clock that stamps
//! in coarse steps or reads one time for both stamps, and trains that
//! "arrive faster than they were sent", which no path does beyond the
//! stamps' noise and a reflector stamping late in user space does. What
//! was found is said in [`HostFindings::far_end`] and its warnings; a
//! stream nobody answered while the warm-up was is an error, never an
//! estimate.
//!
//! What a reflector cannot tell: a probe lost on the way there and a reply
//! lost on the way back look alike (both are a lost probe).

use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::time::Duration;
use tightlink_core::warning::{Warning, WarningCode};
use tightlink_sys::sockopt;

use tightlink_core::channel::{
    Channel, ChannelError, ChannelInfo, HostFindings, Probed, SideReport, StreamRequest,
};
use tightlink_core::ProbeStream;
use tightlink_wire::control::Direction;
use tightlink_wire::twamp::{field, Echo, ProbeRepr, SenderPacket, FLAG_HELD, FLAG_HOLD};
use tightlink_wire::{stamp_auth, DropCounters, DropReason, NtpTimestamp, ReflectorPacket};

use crate::auth::StampKey;

use crate::address::with_port;
use crate::backend::xdp;
use crate::backend::{send_paced_stamped, Backend, Transmit};
use crate::client::ClientOptions;
use crate::ledger::{sender_fell_behind, SendLedger};
use crate::reflector::TWAMP_PORT;
use crate::stamps::Departures;
use crate::stamps::{BATCH, HEADER_COPY};
use crate::twamp_reply::*;
use crate::udp::path_mtu;
use crate::udp::{ProbeSocket, UdpTx};
use crate::{auth, clock, host, packets};

/// Test packets sent to find the reflector before giving up.
const HELLO_TRIES: usize = 3;
/// The UDP payload of a 1500-byte IPv4 packet: the probe size to fall back
/// to when full-size test packets go unanswered.
const FALLBACK_PAYLOAD: u32 = 1472;
/// After this many streams, a majority of trains "faster than sent" means
/// the reflector's stamps cannot be used.
const FASTER_STREAMS_TO_REFUSE: usize = 3;

pub struct TwampChannel {
    sock: ProbeSocket,
    raw_tx: Option<Box<dyn Transmit>>,
    backend: Backend,
    reflector: SocketAddr,
    /// Our id in the padding (for captures; replies are not matched by it).
    session: u64,
    sequence: u32,
    next_stream: u32,
    overhead: u32,
    frame_bytes: u32,
    max_payload: u32,
    timeout: Duration,
    /// Smallest round trip seen (this host's send to its receive stamp).
    rtt_min_ns: i64,
    rtt_max_ns: i64,
    /// The reflector's clock on ours: a reflector stamp and the time on
    /// this host it stands for, from the first reply.
    clock_map: Option<(NtpTimestamp, i64)>,
    elapsed_ns: i64,
    max_rate_bps: f64,
    host_limit_bps: f64,
    ledger: SendLedger,
    /// Replies not used, by reason.
    pub drops: DropCounters,
    /// Where the reflector returns our fields, if it does.
    pub echo: Option<Echo>,
    /// Reverse direction: the reflector holds each train and sends it
    /// back at its schedule; its transmit stamps and this host's kernel
    /// receive stamps give the stream.
    hold: bool,
    /// The reflector's clock on ours for its transmit stamps.
    tx_clock_map: Option<(NtpTimestamp, i64)>,
    /// Replies that came without a kernel receive stamp (reverse).
    unstamped: u64,
    /// Held trains the reflector sent back, and those of them behind
    /// their schedule.
    held_streams: usize,
    reflector_late_streams: usize,
    /// Held trains that lost probes on the way to the reflector.
    forward_lossy_streams: usize,
    /// Length of the hello's reply to a request of `hello_bytes`.
    reply_bytes: usize,
    hello_bytes: usize,
    /// The reflector's replies' stamps so far.
    stamps: StampStats,
    warnings: Vec<Warning>,
    /// STAMP's authenticated mode: packets are built in the plain layout,
    /// sealed before they leave and opened when they come back.
    auth: Option<StampKey>,
}

fn io_err(what: &str) -> impl Fn(std::io::Error) -> ChannelError + '_ {
    move |e| ChannelError::from_io(what, &e)
}

impl TwampChannel {
    /// Finds the reflector at `target` (`HOST[:PORT]`, port 862 by
    /// default): up to three test packets, `opts.timeout` in all.
    pub fn connect(target: &str, opts: &ClientOptions) -> Result<TwampChannel, ChannelError> {
        if opts.key.is_some() {
            return Err(ChannelError::BadRequest(
                "TWAMP-light test packets are unauthenticated here (TWAMP's authenticated mode needs TWAMP-Control): give stamp:HOST for STAMP's authenticated mode".into(),
            ));
        }
        let with = with_port(target, TWAMP_PORT);
        let reflector = with
            .to_socket_addrs()
            .map_err(|e| ChannelError::Unreachable(format!("reflector '{target}': {e}")))?
            .next()
            .ok_or_else(|| {
                ChannelError::Unreachable(format!("reflector '{target}': no address"))
            })?;
        // The local address routing picks toward the reflector.
        let unspec = SocketAddr::new(
            if reflector.is_ipv4() {
                std::net::Ipv4Addr::UNSPECIFIED.into()
            } else {
                std::net::Ipv6Addr::UNSPECIFIED.into()
            },
            0,
        );
        let route = UdpSocket::bind(unspec).map_err(io_err("socket"))?;
        route
            .connect(reflector)
            .map_err(|e| ChannelError::Unreachable(format!("no route to {reflector}: {e}")))?;
        let local_ip = route.local_addr().map_err(io_err("socket"))?.ip();
        // Replies of a whole train wait in the buffer while we pace.
        let sock = ProbeSocket::bind(SocketAddr::new(local_ip, 0), 64 << 20)
            .map_err(io_err("probe socket"))?;
        let nonce = auth::nonce().map_err(io_err("random session id"))?;
        let session = u64::from_be_bytes(nonce[..8].try_into().expect("8 bytes"));
        let overhead = if reflector.is_ipv4() { 42 } else { 62 };
        let mtu = path_mtu(&sock, reflector).unwrap_or(1500).min(9000);
        let mut max_payload = mtu - (overhead - 14);
        if opts.backend == Backend::Xdp {
            max_payload = max_payload.min(xdp::MAX_PAYLOAD as u32);
        }
        let mut ch = TwampChannel {
            sock,
            raw_tx: None,
            backend: opts.backend,
            reflector,
            session,
            sequence: 0,
            next_stream: 0,
            overhead,
            frame_bytes: max_payload + overhead,
            max_payload,
            timeout: opts.timeout,
            rtt_min_ns: i64::MAX,
            rtt_max_ns: 0,
            clock_map: None,
            elapsed_ns: 0,
            max_rate_bps: 0.0,
            host_limit_bps: 0.0,
            ledger: SendLedger::open(tightlink_sys::cpu_time::read().ok()),
            drops: DropCounters::default(),
            echo: None,
            hold: opts.direction == Direction::Reverse,
            tx_clock_map: None,
            unstamped: 0,
            held_streams: 0,
            reflector_late_streams: 0,
            forward_lossy_streams: 0,
            reply_bytes: 0,
            hello_bytes: 0,
            stamps: StampStats::default(),
            warnings: Vec::new(),
            auth: opts.stamp_key.clone(),
        };
        ch.hello()?;
        let mut warnings = Vec::new();
        let (raw_tx, _) = crate::backend::open_for_session(
            opts.backend,
            Direction::Forward,
            &ch.sock,
            reflector,
            session,
            &mut warnings,
        )?;
        ch.raw_tx = raw_tx;
        ch.warnings.extend(warnings);
        ch.host_limit_bps = host::pacing_limit_bps(opts.backend, max_payload, ch.frame_bytes);
        ch.max_rate_bps = ch
            .host_limit_bps
            .min(opts.max_rate_bps.unwrap_or(f64::INFINITY));
        Ok(ch)
    }

    /// Finds the reflector with small test packets (its round trip,
    /// layout and echo), then the largest probe it answers: a full-size
    /// packet, else 1472 bytes, else an error that says so.
    fn hello(&mut self) -> Result<(), ChannelError> {
        let per_try = self.timeout / HELLO_TRIES as u32;
        let small = packets::WARMUP_BYTES + self.growth();
        if self.ask(small, HELLO_TRIES, per_try)?.is_none() {
            return Err(ChannelError::TimedOut(format!(
                "no TWAMP-light or STAMP reflector answered at {} within {:.1} s ({HELLO_TRIES} test packets of {small} bytes sent): is a reflector running there and UDP {} open on the way?{}",
                self.reflector,
                self.timeout.as_secs_f64(),
                self.reflector.port(),
                if self.auth.is_some() {
                    " The packets were authenticated (STAMP, HMAC-SHA-256): a reflector with another key, or in open mode, drops them unanswered."
                } else {
                    ""
                }
            )));
        }
        if self.hold {
            let held = self
                .ask_with(small, HELLO_TRIES, per_try, true)?
                .and_then(|r| r.echoed_flags)
                .is_some_and(|f| f & FLAG_HELD != 0);
            if !held {
                return Err(ChannelError::Refused(format!(
                    "the reflector at {} does not hold trains and send them back at their schedule (tightlink's extension): the reverse direction (-R) needs `tightlink reflector` there, or a tightlink server",
                    self.reflector
                )));
            }
        }
        if self.max_payload as usize <= small {
            return Ok(());
        }
        // A full-size probe: one round trip and 100 ms per try.
        let wait =
            Duration::from_nanos((4 * self.rtt_max_ns.max(0) + 100_000_000) as u64).min(per_try);
        let full = self.max_payload;
        if self.ask(full as usize, 2, wait)?.is_some() {
            return Ok(());
        }
        if full > FALLBACK_PAYLOAD && self.ask(FALLBACK_PAYLOAD as usize, 2, wait)?.is_some() {
            self.warnings.push(Warning::new(WarningCode::FallbackProbeSize, format!(
                "the reflector answered {FALLBACK_PAYLOAD}-byte test packets but not {full}-byte ones (its receive buffer, or the path's MTU): probes are {} bytes (frame)",
                FALLBACK_PAYLOAD + self.overhead
            )));
            self.max_payload = FALLBACK_PAYLOAD;
            self.frame_bytes = FALLBACK_PAYLOAD + self.overhead;
            return Ok(());
        }
        Err(ChannelError::Refused(format!(
            "the reflector at {} answers {small}-byte test packets but not {full}-byte{} ones: it cannot take probes of a useful size",
            self.reflector,
            if full > FALLBACK_PAYLOAD {
                format!(" or {FALLBACK_PAYLOAD}-byte")
            } else {
                String::new()
            }
        )))
    }

    /// Sends one test packet of `size` payload bytes up to `tries` times,
    /// `per_try` apart, until it is answered; learns the round trip, the
    /// reply's length and where our fields come back. The reply, if any.
    fn ask(
        &mut self,
        size: usize,
        tries: usize,
        per_try: Duration,
    ) -> Result<Option<Reply>, ChannelError> {
        self.ask_with(size, tries, per_try, false)
    }

    /// [`Self::ask`]; `held` sends a one-packet train that asks to be
    /// held instead of a warm-up.
    fn ask_with(
        &mut self,
        size: usize,
        tries: usize,
        per_try: Duration,
        held: bool,
    ) -> Result<Option<Reply>, ChannelError> {
        let plain_size = size - self.growth();
        for _ in 0..tries {
            let packet = if held {
                let (_, mut train) = packets::build(
                    self.session,
                    u32::MAX - 1,
                    &[0],
                    &[plain_size as u32],
                    &mut self.sequence,
                );
                SenderPacket::new_unchecked(&mut train[0][..]).set_flag(FLAG_HOLD);
                train.remove(0)
            } else {
                packets::single(self.session, plain_size, &mut self.sequence)
            };
            let packet = self.seal(packet);
            let seq = self.sequence.wrapping_sub(1);
            let sent_ns = clock::realtime_ns();
            self.sock
                .send_to(&packet, self.reflector)
                .map_err(io_err("send to the reflector"))?;
            let until = clock::monotonic_ns() + per_try.as_nanos() as i64;
            let mut answer = None;
            self.receive(until, i64::MAX, &mut |ch, reply, header| {
                if reply.sender_sequence != seq {
                    ch.drops.count(DropReason::Late);
                    return false;
                }
                let rtt = reply.here_ns.unwrap_or_else(clock::realtime_ns) - sent_ns;
                ch.rtt_min_ns = ch.rtt_min_ns.min(rtt);
                ch.rtt_max_ns = ch.rtt_max_ns.max(rtt);
                if ch.hello_bytes == 0 {
                    ch.hello_bytes = size;
                    ch.reply_bytes = reply.len;
                    // Our fields come back only from reflectors that
                    // return them: ours, for this very packet.
                    ch.echo = ReflectorPacket::new_checked(header).ok().and_then(|v| {
                        v.reflected_probe()
                            .is_ok_and(|p| p.session == ch.session && p.sequence == seq)
                            .then(|| v.echo())
                            .flatten()
                    });
                }
                answer = Some(*reply);
                true
            })
            .map_err(io_err("receive from the reflector"))?;
            if answer.is_some() {
                return Ok(answer);
            }
        }
        Ok(None)
    }

    /// Bytes sealing adds to a test packet (STAMP's authenticated mode).
    fn growth(&self) -> usize {
        if self.auth.is_some() {
            stamp_auth::GROWTH
        } else {
            0
        }
    }

    /// A plain test packet as it leaves.
    fn seal(&self, packet: Vec<u8>) -> Vec<u8> {
        match &self.auth {
            Some(k) => stamp_auth::seal_sender(&packet, &|p| k.mac(p)),
            None => packet,
        }
    }

    /// The reflector's layout, as the hello found it.
    fn layout(&self) -> String {
        let (asked, got) = (self.hello_bytes, self.reply_bytes);
        if self.auth.is_some() {
            return "STAMP, authenticated (HMAC-SHA-256)".to_string();
        }
        match self.echo {
            Some(Echo::StampTlvs) => "STAMP (our TLV echoed)".to_string(),
            Some(Echo::TwampPadding) => "TWAMP-light, padding echoed (RFC 6038)".to_string(),
            None if got < field::reflector::HEADER_LEN => {
                format!("TWAMP-light, {got}-byte replies (no TTL), padding not echoed")
            }
            None if got == asked => {
                "TWAMP-light, replies as long as requests, padding not echoed".to_string()
            }
            None => format!(
                "TWAMP-light, {got}-byte replies to {asked}-byte requests, padding not echoed"
            ),
        }
    }

    /// What the replies said about the reflector's clock so far.
    fn stamp_quality(&self) -> String {
        if self.hold {
            return "held trains sent back at their schedule, this host's kernel receive stamps"
                .to_string();
        }
        self.stamps.describe()
    }

    /// Reads replies until `on_reply` returns true, `until` (monotonic)
    /// passes, or nothing has arrived for `quiet_ns`. `on_reply` gets each
    /// parsed reply and its first bytes.
    fn receive(
        &mut self,
        until: i64,
        quiet_ns: i64,
        on_reply: &mut dyn FnMut(&mut Self, &Reply, &[u8]) -> bool,
    ) -> std::io::Result<()> {
        let mut headers = [[0u8; HEADER_COPY]; BATCH];
        let mut got = [None; BATCH];
        let mut last_arrival = clock::monotonic_ns();
        let auth = self.auth.clone();
        loop {
            let now = clock::monotonic_ns();
            if now >= until || now - last_arrival > quiet_ns {
                return Ok(());
            }
            let wait_ms = ((until - now) / 1_000_000).clamp(1, 10) as i32;
            if !sockopt::wait_fd(self.sock.fd(), libc::POLLIN, wait_ms)? {
                continue;
            }
            last_arrival = clock::monotonic_ns();
            loop {
                let n = self.sock.recv_batch(&mut headers, &mut got)?;
                let mut done = false;
                for k in 0..n {
                    let Some(r) = got[k].take() else {
                        self.drops.count(DropReason::WrongPeer);
                        continue;
                    };
                    let header = &headers[k][..r.len.min(HEADER_COPY)];
                    let opened;
                    let header = match &auth {
                        None => header,
                        Some(key) => {
                            let whole = r.len <= HEADER_COPY;
                            match stamp_auth::open_reflector(header, whole, &|p| key.mac(p)) {
                                Ok(plain) => {
                                    opened = plain;
                                    &opened[..]
                                }
                                Err(why) => {
                                    self.drops.count(why);
                                    continue;
                                }
                            }
                        }
                    };
                    match parse_reply(header, &r, self.reflector) {
                        Ok(reply) => done |= on_reply(self, &reply, header),
                        Err(why) => self.drops.count(why),
                    }
                }
                if done {
                    return Ok(());
                }
                if n < BATCH {
                    break;
                }
            }
        }
    }

    /// The reflector's receive stamp on this host's clock.
    fn on_our_clock(&mut self, stamp: NtpTimestamp, here_ns: i64) -> i64 {
        let (t0, ns0) = *self.clock_map.get_or_insert((stamp, here_ns));
        ns0 + stamp.ns_since(t0)
    }

    fn payload_sizes(&self, request: &StreamRequest) -> Result<Vec<u32>, ChannelError> {
        request
            .sizes
            .iter()
            .map(|&s| {
                let p = s.saturating_sub(self.overhead);
                let least = (ProbeRepr::buffer_len() + self.growth()) as u32;
                if p < least || p > self.max_payload {
                    Err(ChannelError::BadRequest(format!(
                        "probe size {s} bytes (frame): frames toward {} must be {}-{} bytes",
                        self.reflector,
                        ProbeRepr::buffer_len() as u32 + self.overhead,
                        self.max_payload + self.overhead
                    )))
                } else {
                    Ok(p)
                }
            })
            .collect()
    }

    /// The stream the reflector sent back. Send times are the train's
    /// schedule, placed by the first reply's transmit stamp (mapped onto
    /// this host's clock: it stands for this host's receive minus half the
    /// smallest round trip), as a server's reverse streams are; receive
    /// times are this host's kernel stamps. The transmit stamps say whether
    /// the reflector kept to the schedule: a stream with more than a tenth
    /// of its replies over 20 us late counts as late (host-limited: the
    /// reflector's, not the path).
    fn reverse_stream(
        &mut self,
        stream: u32,
        request: &StreamRequest,
        tx_stamps: &[Option<NtpTimestamp>],
        held: &[Option<(u32, u32)>],
        here: &[Option<i64>],
    ) -> (ProbeStream, bool) {
        let n = tx_stamps.len();
        // Probes lost on the way to the reflector were never sent back:
        // marked lost on the way back too (the analyses index packets by
        // position), and warned about.
        if sent_back(held).is_some_and(|kept| kept.contains(&false)) {
            self.forward_lossy_streams += 1;
        }
        let mut actual = vec![None; n];
        let mut recv_ns = vec![None; n];
        let half_rtt = self.rtt_min_ns.max(0) / 2;
        for i in 0..n {
            let (Some(t), Some(h)) = (tx_stamps[i], here[i]) else {
                if tx_stamps[i].is_some() {
                    self.unstamped += 1;
                }
                continue;
            };
            let (t0, ns0) = *self.tx_clock_map.get_or_insert((t, h - half_rtt));
            actual[i] = Some(ns0 + t.ns_since(t0));
            recv_ns[i] = Some(h);
        }
        // The schedule, anchored where the earliest-started reply says.
        let anchor = (0..n)
            .filter_map(|i| actual[i].map(|a| a - request.offsets_ns[i]))
            .min()
            .unwrap_or(0);
        let send_ns: Vec<i64> = request.offsets_ns.iter().map(|o| anchor + o).collect();
        let sent = actual.iter().flatten().count();
        let late = (0..n)
            .filter(|&i| actual[i].is_some_and(|a| a - send_ns[i] > 20_000))
            .count();
        let reflector_late = sent > 0 && late * 10 > sent;
        self.held_streams += 1;
        self.reflector_late_streams += reflector_late as usize;
        let s = self
            .ledger
            .stream(stream, &request.sizes, &send_ns, &recv_ns);
        (s, reflector_late)
    }

    /// Adds a stream's stamps to the session's judgement; refuses once a
    /// majority of at least [`FASTER_STREAMS_TO_REFUSE`] streams arrived
    /// faster than they were sent.
    fn judge_stamps(
        &mut self,
        stream: u32,
        sent_ns: &[i64],
        recv_ns: &[Option<i64>],
        deltas: &[i64],
    ) -> Result<(), ChannelError> {
        let st = &mut self.stamps;
        if st.step_ns.is_none() {
            st.step_ns = stamp_step_ns(deltas);
        }
        let Some(c) = check_stream_stamps(sent_ns, recv_ns) else {
            return Ok(());
        };
        st.streams += 1;
        st.noise_ns.push(c.noise_ns);
        if c.faster_than_sent {
            st.faster += 1;
            if st
                .worst_faster
                .is_none_or(|(w, span)| c.compression_ns * span > w * c.send_span_ns)
            {
                st.worst_faster = Some((c.compression_ns, c.send_span_ns));
            }
        }
        let (faster, streams) = (st.faster, st.streams);
        if faster >= FASTER_STREAMS_TO_REFUSE && 2 * faster > streams {
            return Err(ChannelError::Io(format!(
                "cannot measure toward {}: {faster} of {streams} trains (up to stream {stream}) arrived at the reflector faster than they were sent ({}): its receive stamps lag behind the arrivals (stamped in user space under load?), so their gaps would read a rate the path does not have",
                self.reflector,
                self.faster_words()
            )));
        }
        Ok(())
    }

    fn faster_words(&self) -> String {
        let (c, span) = self.stamps.worst_faster.unwrap_or((0, 1));
        format!(
            "worst: a {:.0} us train in {:.0} us, {:.0} % faster, beyond the stamps' noise of {:.1} us",
            span as f64 / 1e3,
            (span - c) as f64 / 1e3,
            100.0 * c as f64 / (span - c).max(1) as f64,
            tightlink_core::stats::median_i64(&self.stamps.noise_ns).unwrap_or(0) as f64 / 1e3
        )
    }

    /// Smallest round trip seen to the reflector, ns.
    pub fn rtt_min_ns(&self) -> i64 {
        self.rtt_min_ns
    }

    fn forward(
        &mut self,
        request: &StreamRequest,
        stream: u32,
    ) -> Result<(ProbeStream, bool, bool), ChannelError> {
        let n = request.offsets_ns.len();
        // Replies this host's socket drops are lost to this host, not the
        // path (the reflector's own drops it cannot say).
        let dropped_before = self
            .sock
            .socket_drops()
            .map_err(io_err("socket drop count"))?;
        let first_seq = self.sequence.wrapping_add(1); // after the warm-up
        let (warm, mut pk) = self.build_probes(request, stream)?;
        let span_ns = request.offsets_ns.last().copied().unwrap_or(0);
        let to = self.reflector;
        let mut udp = UdpTx {
            sock: &mut self.sock,
            to,
        };
        let tx: &mut dyn Transmit = match self.raw_tx.as_mut() {
            Some(t) => t.as_mut(),
            None => &mut udp,
        };
        let key = self.auth.clone();
        let stamp = |p: &mut [u8], t: NtpTimestamp| match &key {
            Some(k) => stamp_auth::set_sender_timestamp(p, t.to_bytes(), &|x| k.mac(x)),
            None => SenderPacket::new_unchecked(p).set_timestamp(t),
        };
        let d = send_paced_stamped(
            tx,
            &warm,
            &mut pk,
            &request.offsets_ns,
            clock::monotonic_ns() + 200_000,
            &stamp,
        )
        .map_err(io_err("send"))?;
        // Wait for the replies: four of the longest round trips seen and
        // 200 ms for queues, at most the timeout; but probes lost on the
        // way (a queue over its limit) never answer, so stop once none has
        // come for two of the longest round trips (20 ms at least).
        // A held train comes back over its own span after its last packet.
        let held_span = if self.hold { span_ns } else { 0 };
        let wait =
            (4 * self.rtt_max_ns + 200_000_000).min(self.timeout.as_nanos() as i64) + held_span;
        let r = self.collect_replies(&d, first_seq, n, wait)?;
        let dropped = self
            .sock
            .socket_drops()
            .map_err(io_err("socket drop count"))?
            .wrapping_sub(dropped_before);
        let overflowed = self.ledger.note_receiver_drops(dropped);
        if r.got == 0 {
            return Err(self.no_reply(request, stream, r.warm_answered, wait));
        }
        // Round trips from this host's send (kernel stamp where there is
        // one) to the reply's kernel receive stamp.
        for (i, h) in r.here.iter().enumerate() {
            let sent = d.tx_ns[i].or(d.user_ns.get(i).copied());
            if let (Some(s), Some(h)) = (sent, *h) {
                self.rtt_min_ns = self.rtt_min_ns.min(h - s);
                self.rtt_max_ns = self.rtt_max_ns.max(h - s);
            }
        }
        if self.hold {
            let (s, late) = self.reverse_stream(stream, request, &r.sent_back, &r.held, &r.here);
            return Ok((s, late, overflowed));
        }
        let (s, late) = self.forward_stream(stream, request, &d, &r.stamps)?;
        Ok((s, late, overflowed))
    }

    /// The warm-up and the stream's test packets, flagged to be held
    /// where the reflector holds trains.
    fn build_probes(
        &mut self,
        request: &StreamRequest,
        stream: u32,
    ) -> Result<(Vec<u8>, Vec<Vec<u8>>), ChannelError> {
        let payloads = self.payload_sizes(request)?;
        let growth = self.growth() as u32;
        let plain_sizes: Vec<u32> = payloads.iter().map(|p| p - growth).collect();
        let (warm, mut pk) = packets::build(
            self.session,
            stream,
            &request.offsets_ns,
            &plain_sizes,
            &mut self.sequence,
        );
        if self.hold {
            let span = request.offsets_ns.last().copied().unwrap_or(0);
            if span as u64 > crate::reflector::MAX_HOLD_SPAN_NS {
                return Err(ChannelError::BadRequest(format!(
                    "stream {stream} spans {:.2} s: a reflector holds trains of at most {:.1} s",
                    span as f64 / 1e9,
                    crate::reflector::MAX_HOLD_SPAN_NS as f64 / 1e9
                )));
            }
            for p in &mut pk {
                SenderPacket::new_unchecked(&mut p[..]).set_flag(FLAG_HOLD);
            }
        }
        if self.auth.is_some() {
            let warm = self.seal(warm);
            let pk = pk.into_iter().map(|p| self.seal(p)).collect();
            return Ok((warm, pk));
        }
        Ok((warm, pk))
    }

    /// The replies to the `n` probes from `first_seq` on, until `wait`
    /// has passed or none came for the quiet time.
    fn collect_replies(
        &mut self,
        d: &Departures,
        first_seq: u32,
        n: usize,
        wait: i64,
    ) -> Result<Replies, ChannelError> {
        let until = clock::monotonic_ns() + wait;
        // A held train waits at the reflector until its last probe is in,
        // or 50 ms after the latest when that one was lost.
        let quiet = (2 * self.rtt_max_ns).max(20_000_000) + if self.hold { 60_000_000 } else { 0 };
        let mut r = Replies {
            stamps: vec![None; n],
            sent_back: vec![None; n],
            held: vec![None; n],
            here: vec![None; n],
            got: 0,
            warm_answered: false,
        };
        let warm_seq = first_seq.wrapping_sub(1);
        self.receive(until, quiet, &mut |ch, reply, _| {
            let i = reply.sender_sequence.wrapping_sub(first_seq) as usize;
            if reply.sender_sequence == warm_seq {
                r.warm_answered = true;
                return false;
            }
            if i >= n {
                ch.drops.count(DropReason::Late);
                return false;
            }
            let sent = NtpTimestamp::from_unix_ns(d.scheduled_ns[i].max(0) as u64);
            if reply.sender_timestamp != sent {
                // A sequence number we used with another timestamp.
                ch.drops.count(DropReason::Malformed);
                return false;
            }
            if r.stamps[i].is_some() {
                ch.drops.count(DropReason::Duplicate);
                return false;
            }
            ch.stamps.replies += 1;
            ch.stamps.one_read += reply.one_read as u64;
            r.stamps[i] = Some(reply.receive_timestamp);
            r.sent_back[i] = Some(reply.transmit_timestamp);
            r.held[i] = reply.held;
            r.here[i] = reply.here_ns;
            r.got += 1;
            r.got == n
        })
        .map_err(io_err("receive replies"))?;
        Ok(r)
    }

    /// No reply to a stream: the reflector drops the probes (it answered
    /// the warm-up), or it stopped answering.
    fn no_reply(
        &self,
        request: &StreamRequest,
        stream: u32,
        warm_answered: bool,
        wait: i64,
    ) -> ChannelError {
        let n = request.offsets_ns.len();
        let largest = request.sizes.iter().max().copied().unwrap_or(0);
        ChannelError::TimedOut(if warm_answered {
            format!(
                "the reflector at {} answered the warm-up packet but none of the {n} probes of stream {stream} ({largest}-byte frames, {:.0} Mbit/s on average): it drops them (receive buffer, rate limit) or the path does; not an estimate",
                self.reflector,
                request.bytes() as f64 * 8e3
                    / request.offsets_ns.last().copied().unwrap_or(0).max(1) as f64
            )
        } else {
            format!(
                "the reflector at {} stopped answering: no reply to stream {stream}'s warm-up or any of its {n} probes within {:.1} s",
                self.reflector,
                wait as f64 / 1e9
            )
        })
    }

    /// The forward stream from the reflector's receive stamps, mapped to
    /// this host's clock, once the stamps are judged usable.
    fn forward_stream(
        &mut self,
        stream: u32,
        request: &StreamRequest,
        d: &Departures,
        stamps: &[Option<NtpTimestamp>],
    ) -> Result<(ProbeStream, bool), ChannelError> {
        let n = stamps.len();
        let mut recv_ns = vec![None; n];
        let mut deltas = Vec::with_capacity(n);
        let mut prev: Option<NtpTimestamp> = None;
        let sent_ns: Vec<i64> = (0..n)
            .map(|i| d.tx_ns[i].unwrap_or(d.scheduled_ns[i]))
            .collect();
        for i in 0..n {
            let Some(t) = stamps[i] else { continue };
            // The first reply of the session maps the reflector's clock:
            // its stamp stands for our send time plus half a round trip.
            let anchor = sent_ns[i] + self.rtt_min_ns.max(0) / 2;
            recv_ns[i] = Some(self.on_our_clock(t, anchor));
            if let Some(p) = prev {
                deltas.push(t.ns_since(p));
            }
            prev = Some(t);
        }
        self.judge_stamps(stream, &sent_ns, &recv_ns, &deltas)?;
        let late = self
            .ledger
            .note(d, &request.sizes, self.backend != Backend::Xdp);
        let s = self
            .ledger
            .stream(stream, &request.sizes, &d.scheduled_ns, &recv_ns);
        Ok((s, late))
    }
}

/// What came back for one stream, by position.
struct Replies {
    /// The reflector's receive and transmit stamps.
    stamps: Vec<Option<NtpTimestamp>>,
    sent_back: Vec<Option<NtpTimestamp>>,
    /// A held train's reply: its index among the replies sent back and
    /// their count.
    held: Vec<Option<(u32, u32)>>,
    /// This host's kernel receive stamp of the reply.
    here: Vec<Option<i64>>,
    got: usize,
    warm_answered: bool,
}

impl Channel for TwampChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let stream = self.next_stream;
        self.next_stream += 1;
        let (s, sender_late, receiver_overflowed) = self.forward(request, stream)?;
        self.elapsed_ns += s.send_span_ns() as i64;
        Ok(Probed {
            stream: s,
            truth: None,
            sender_late,
            receiver_overflowed,
        })
    }

    fn info(&self) -> ChannelInfo {
        ChannelInfo {
            description: format!(
                "TWAMP-light reflector {} ({}, {} backend; round trip {:.0} us)",
                self.reflector,
                if self.hold {
                    "from it: trains it held and sent back, this host's receive stamps"
                } else {
                    "toward it: its receive stamps"
                },
                self.backend,
                self.rtt_min_ns as f64 / 1e3
            ),
            max_rate_bps: self.max_rate_bps,
            probe_size_bytes: Some(self.frame_bytes),
            byte_limit: None,
            stream_packet_limit: None,
            stream_span_limit_ns: self
                .hold
                .then_some(crate::reflector::MAX_HOLD_SPAN_NS as i64),
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

    /// Drops are replies this end did not use; probes without a reply
    /// are losses in their streams (as a server's missing stamps are).
    fn side_report(&self) -> SideReport {
        let mut warnings = self.warnings.clone();
        if let Some(q) = self.stamps.step_ns {
            warnings.push(Warning::new(WarningCode::CoarseStamps, format!(
                "the reflector's receive stamps come in {} us steps: gaps finer than that are not seen",
                q / 1_000
            )));
        }
        if self.stamps.faster > 0 {
            warnings.push(Warning::new(WarningCode::LaggingStamps, format!(
                "{} of {} trains arrived at the reflector faster than they were sent ({}): its receive stamps lag at times (user-space stamps under load?); estimates may read high",
                self.stamps.faster,
                self.stamps.streams,
                self.faster_words()
            )));
        }
        if self.unstamped > 0 {
            warnings.push(Warning::new(
                WarningCode::UnstampedReplies,
                format!(
                    "{} replies came without a kernel receive stamp: counted as lost",
                    self.unstamped
                ),
            ));
        }
        if self.reflector_late_streams > 0 {
            warnings.push(Warning::new(WarningCode::ReflectorLate, format!(
                "the reflector sent {} held trains back behind their schedule (over a tenth of the replies 20 us late or more): its host limits those streams, not the path",
                self.reflector_late_streams
            )));
        }
        // The reflector sends this direction: late in most held trains,
        // it is the sender that fell behind, as a late host is forward.
        let late = self.reflector_late_streams;
        if self.hold && sender_fell_behind(late, self.held_streams) {
            warnings.push(Warning::new(WarningCode::SenderLate, format!(
                "the reflector, which sends in this direction, fell behind its schedule in {late} of {} held trains (another process on its CPUs?): late packets leave in catch-up bursts that the path disperses, so the estimate may read low",
                self.held_streams
            )));
        }
        if self.forward_lossy_streams > 0 {
            warnings.push(Warning::new(WarningCode::ForwardLoss, format!(
                "{} held trains lost probes on the way to the reflector: the reflector sent back only what arrived, so those streams probed the way back below their schedule and the missing ones count as lost",
                self.forward_lossy_streams
            )));
        }
        // Sent back by the reflector: its host, not ours, paces the train.
        let host_limit_bps = if self.hold {
            f64::INFINITY
        } else {
            self.host_limit_bps
        };
        let findings = HostFindings {
            far_end: Some(format!(
                "{}: {}; {}",
                self.reflector,
                self.layout(),
                self.stamp_quality()
            )),
            ..self.ledger.findings(
                tightlink_sys::cpu_time::read().ok(),
                host_limit_bps,
                self.drops.nonzero(),
                warnings,
            )
        };
        SideReport {
            host: Some(findings),
            truth: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::stamps::Received;

    /// Ten probes; the reflector got 0-3 and 6-9 (two lost on the way
    /// there) and sent back 8, of which index 2 (probe 2) and index 7
    /// (probe 9) were lost on the way back. By hand: the run 4-5 skips no
    /// index (forward losses, not sent back); probe 2's index 2 is skipped
    /// between 1 and 3; the tail misses index 7 after index 6.
    #[test]
    fn held_replies_tell_which_probes_were_sent_back() {
        let k = 8;
        let held: Vec<Option<(u32, u32)>> = [
            Some(0),
            Some(1),
            None,
            Some(3),
            None,
            None,
            Some(4),
            Some(5),
            Some(6),
            None,
        ]
        .iter()
        .map(|j| j.map(|j| (j, k)))
        .collect();
        let got = sent_back(&held).unwrap();
        assert_eq!(
            got,
            [true, true, true, true, false, false, true, true, true, true]
        );
        assert_eq!(sent_back(&[None, None]), None);
        // Nothing lost: all sent back.
        let all: Vec<_> = (0..4).map(|j| Some((j, 4))).collect();
        assert_eq!(sent_back(&all).unwrap(), vec![true; 4]);
    }

    #[test]
    fn coarse_reflector_stamps_are_recognised() {
        // 12 us gaps from a clock in 1 us steps (NTP rounding: +-1 ns).
        let us: Vec<i64> = (0..20).map(|i| 12_000 + (i % 3) - 1).collect();
        assert_eq!(stamp_step_ns(&us), Some(1_000));
        // 100 us steps (a stream at a low rate on such a clock).
        assert_eq!(stamp_step_ns(&[100_000; 25]), Some(100_000));
        // Nanosecond stamps: 83.36 us gaps with jitter.
        let ns: Vec<i64> = (0..20).map(|i| 83_360 + 37 * i).collect();
        assert_eq!(stamp_step_ns(&ns), None);
        // Too few differences, or all zero, say nothing.
        assert_eq!(stamp_step_ns(&[12_000; 19]), None);
        assert_eq!(stamp_step_ns(&[0; 30]), None);
    }

    #[test]
    fn replies_from_elsewhere_or_too_short_are_not_used() {
        let reflector: SocketAddr = "192.0.2.9:862".parse().unwrap();
        let mut buf = [0u8; 41];
        buf[24..28].copy_from_slice(&77u32.to_be_bytes());
        buf[16..24].copy_from_slice(&[0x83, 0xAA, 0x7E, 0x81, 0x40, 0, 0, 0]);
        let r = |from: &str, len| Received {
            len,
            from: from.parse().unwrap(),
            kernel_ns: Some(5),
        };
        let got = parse_reply(&buf, &r("192.0.2.9:862", 41), reflector).unwrap();
        assert_eq!(got.sender_sequence, 77);
        assert_eq!(got.receive_timestamp.fraction, 0x4000_0000);
        assert_eq!(got.here_ns, Some(5));
        assert_eq!(
            parse_reply(&buf, &r("192.0.2.9:863", 41), reflector),
            Err(DropReason::WrongPeer)
        );
        // 38 bytes carry the stamps; 37 do not.
        assert!(parse_reply(&buf[..38], &r("192.0.2.9:862", 38), reflector).is_ok());
        assert_eq!(
            parse_reply(&buf[..37], &r("192.0.2.9:862", 37), reflector),
            Err(DropReason::TooShort)
        );
    }
}
