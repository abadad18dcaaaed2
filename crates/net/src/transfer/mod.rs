//! `tightlink transfer`: a reliable bulk transfer over UDP whose data
//! packets are the rate controller's probe streams (\[BASS\] section VII,
//! after RAPID). The client sends each stream's packets when the core's
//! [`RapidController`] says; the server stamps them on arrival and
//! returns each stream's receive stamps and its in-order byte count over
//! the control connection; the controller reads the available bandwidth
//! from the stamps and sets the next streams' rate. Packets the server
//! did not see are sent again, first. At the end both sides compare the
//! SHA-256 of every byte: a transfer that does not match fails.
//!
//! - [`book`]: the sender's bookkeeping (pure).
//! - [`reassembly`]: the receiver's order, digest and stamps (pure).
//! - [`serve`]: the server's side of the session.

pub mod book;
pub mod reassembly;
pub mod serve;

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tightlink_core::channel::ChannelError;
use tightlink_core::rapid::{PacketTag, RapidController, RapidEstimator, RapidParams, RapidUpdate};
use tightlink_core::stats::median_i64;
use tightlink_sys::sockopt;
use tightlink_wire::control::{read_message, write_message, Direction, Limits, Message};
use tightlink_wire::data::{DataRepr, HEADER_LEN};

use crate::client::{ctl_err, io_err, open_session, refused};
use crate::clock;
use book::{DataSource, SendBook};

#[derive(Debug, Clone)]
pub struct TransferOptions {
    pub key: Option<Vec<u8>>,
    /// Connect timeout, and the longest wait for the server's feedback.
    pub timeout: Duration,
    pub estimator: RapidEstimator,
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
}

impl Default for TransferOptions {
    fn default() -> Self {
        TransferOptions {
            key: None,
            timeout: Duration::from_secs(5),
            estimator: RapidEstimator::Bass,
            bytes: None,
            duration: Some(Duration::from_secs(10)),
            max_rate_bps: None,
            interval: Duration::from_millis(500),
            seed: 1,
        }
    }
}

/// One progress interval.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferInterval {
    /// Since the first data packet, ns.
    pub start_ns: i64,
    pub end_ns: i64,
    /// Bytes the server came to hold in order during the interval.
    pub delivered_bytes: u64,
    pub sent_bytes: u64,
    pub retransmitted_bytes: u64,
    /// The controller's rate at the interval's end (frame bit/s).
    pub rate_bps: f64,
    /// The last estimate read in the interval, if any.
    pub estimate_bps: Option<f64>,
    /// Median round trip of the streams whose stamps came back.
    pub rtt_ns: Option<i64>,
    /// Bytes delivered in all so far.
    pub total_delivered_bytes: u64,
}

impl TransferInterval {
    /// Goodput over the interval (payload bit/s).
    pub fn goodput_bps(&self) -> f64 {
        self.delivered_bytes as f64 * 8e9 / (self.end_ns - self.start_ns).max(1) as f64
    }
}

pub enum TransferEvent<'a> {
    Interval(&'a TransferInterval),
    Update(&'a RapidUpdate),
}

#[derive(Debug, Clone)]
pub struct TransferSummary {
    pub server: SocketAddr,
    pub authenticated: bool,
    pub limits: Limits,
    pub estimator: RapidEstimator,
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

/// Feedback is not read when a packet is due sooner than this...
const SEND_SLACK_NS: i64 = 150_000;
/// ...unless it has waited this long.
const MAX_FEEDBACK_DEFER_NS: i64 = 2_000_000;

fn err(what: impl Into<String>) -> ChannelError {
    ChannelError::Io(what.into())
}

/// Runs one transfer to the server at `server` (`HOST[:PORT]`).
pub fn run(
    server: &str,
    opts: &TransferOptions,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<TransferSummary, ChannelError> {
    if opts.bytes.is_none() && opts.duration.is_none() {
        return Err(err("a transfer needs a size or a time"));
    }
    let cs = open_session(
        server,
        opts.key.as_deref(),
        Direction::Transfer,
        opts.timeout,
    )?;
    let (addr, session, authenticated, limits) = (cs.addr, cs.session, cs.authenticated, cs.limits);
    let (mut reader, mut writer) = (cs.reader, cs.writer);
    let max_bytes = opts.bytes.unwrap_or(limits.max_session_bytes);
    if max_bytes > limits.max_session_bytes {
        return Err(err(format!(
            "--bytes {max_bytes} exceeds the server's session limit of {} bytes{}",
            limits.max_session_bytes,
            if authenticated {
                ""
            } else {
                " without a key (--key-file)"
            }
        )));
    }
    let server_udp = SocketAddr::new(addr.ip(), cs.udp_port);
    let udp = UdpSocket::bind(SocketAddr::new(cs.local_ip, 0)).map_err(io_err("data socket"))?;
    udp.connect(server_udp).map_err(io_err("data socket"))?;
    udp.set_nonblocking(true).map_err(io_err("data socket"))?;
    let _ = sockopt::set_int(udp.as_raw_fd(), libc::SOL_SOCKET, libc::SO_SNDBUF, 4 << 20);
    let overhead: u32 = if addr.is_ipv4() { 42 } else { 62 };
    let mtu = crate::udp::connected_mtu(&udp).unwrap_or(1500).min(9000);
    let payload = (mtu - (overhead - 14)).min(limits.max_packet_bytes as u32);
    if payload as usize <= HEADER_LEN {
        return Err(err(format!(
            "the server allows {payload}-byte packets; data packets need more than {HEADER_LEN}"
        )));
    }
    let frame_bytes = payload + overhead;
    write_message(
        &mut writer,
        &Message::Transfer {
            max_bytes,
            packet_bytes: payload as u16,
        },
    )
    .map_err(io_err("control connection"))?;
    let window = match read_message(&mut reader).map_err(ctl_err)? {
        Message::TransferReady { window_bytes } => window_bytes,
        Message::Refused { reason } => return Err(refused(&reason)),
        other => return Err(err(format!("expected TransferReady, got {other:?}"))),
    };
    let host_limit =
        crate::host::pacing_limit_bps(crate::backend::Backend::Udp, payload, frame_bytes);
    let max_bps = (limits.max_rate_bps as f64)
        .min(opts.max_rate_bps.unwrap_or(f64::INFINITY))
        .min(host_limit);
    let params = RapidParams::paper(max_bps, frame_bytes, opts.estimator);
    let per_stream = (params.sub_streams * params.per_rate) as u32;
    let mut ctl = RapidController::new(params);
    let chunk = (payload as usize - HEADER_LEN) as u16;
    let mut book = SendBook::new(DataSource { seed: opts.seed }, chunk, opts.bytes, window);
    let mut l = Loop {
        ctl_fd: reader.as_raw_fd(),
        pending: HashMap::new(),
        last_send_ns: BTreeMap::new(),
        rtts: Vec::new(),
        updates: Vec::new(),
        streams: 0,
    };
    let start = clock::monotonic_ns();
    let deadline = opts.duration.map(|d| start + d.as_nanos() as i64);
    let interval_ns = opts.interval.as_nanos().max(1_000_000) as i64;
    let mut next_report = start + interval_ns;
    let mut intervals: Vec<TransferInterval> = Vec::new();
    let mut mark = Mark::default();
    let mut last_heard = start;
    let timeout_ns = opts.timeout.as_nanos() as i64;
    let mut open_stream: Option<u64> = None;
    let mut packet = vec![0u8; payload as usize];
    let mut last_estimate: Option<f64> = None;
    let mut ctl_ready_since: Option<i64> = None;
    loop {
        let now = clock::monotonic_ns();
        // Feedback: it may free the window or ask for a resend. Reading a
        // stream's stamps runs the estimator (tens of us), which would
        // make the next packet late and bend the stream's gaps; so not
        // while a packet is due within `SEND_SLACK_NS`, unless feedback
        // has waited `MAX_FEEDBACK_DEFER_NS`.
        let read_now = if sockopt::wait_fd(l.ctl_fd, libc::POLLIN, 0).map_err(io_err("control"))? {
            let since = *ctl_ready_since.get_or_insert(now);
            let due_soon = book.peek().is_some() && ctl.next_send_ns(now) - now < SEND_SLACK_NS;
            !due_soon || now - since > MAX_FEEDBACK_DEFER_NS
        } else {
            ctl_ready_since = None;
            false
        };
        if read_now {
            ctl_ready_since = None;
        }
        while read_now && sockopt::wait_fd(l.ctl_fd, libc::POLLIN, 0).map_err(io_err("control"))? {
            let m = read_message(&mut reader).map_err(ctl_err)?;
            last_heard = clock::monotonic_ns();
            for u in l.handle(m, &mut ctl, &mut book, last_heard)? {
                last_estimate = u.abw_bps.or(last_estimate);
                on_event(TransferEvent::Update(&u));
                l.updates.push(u);
            }
        }
        if book.complete() {
            break;
        }
        if deadline.is_some_and(|d| now >= d) {
            book.stop_offering();
        }
        if now >= next_report {
            let iv = mark.interval(start, now, &book, &ctl, last_estimate, &l.rtts);
            on_event(TransferEvent::Interval(&iv));
            intervals.push(iv);
            next_report += interval_ns;
        }
        if book.in_flight() > 0 && now - last_heard > timeout_ns {
            return Err(err(format!(
                "the server stopped answering: no feedback for {} ms with {} packets in flight ({} of {} bytes delivered)",
                timeout_ns / 1_000_000,
                book.in_flight(),
                book.delivered(),
                book.offered()
            )));
        }
        let Some(next) = book.peek() else {
            // Nothing to send (window full, or all sent): the stream ends
            // here, so the server closes it and its feedback comes.
            if let Some(s) = open_stream.take() {
                ctl.end_stream();
                send_ctl(&mut writer, &Message::StreamSent { stream: s as u32 })?;
            }
            sockopt::wait_fd(l.ctl_fd, libc::POLLIN, 5).map_err(io_err("control"))?;
            continue;
        };
        let due = ctl.next_send_ns(now);
        if due > now {
            if due - now > 2_000_000 {
                sockopt::wait_fd(l.ctl_fd, libc::POLLIN, ((due - now) / 1_000_000 - 1) as i32)
                    .map_err(io_err("control"))?;
            } else {
                clock::spin_until(due.min(now + 100_000));
            }
            continue;
        }
        let at = clock::monotonic_ns();
        let tag: PacketTag = ctl.sent(at);
        if let Some(s) = open_stream {
            if s != tag.stream {
                send_ctl(&mut writer, &Message::StreamSent { stream: s as u32 })?;
            }
        }
        let len = next.chunk.len as usize;
        DataRepr {
            session,
            stream: tag.stream as u32,
            index: tag.index,
            count: per_stream,
            offset: next.chunk.offset,
            len: next.chunk.len,
        }
        .emit(&mut packet[..HEADER_LEN]);
        book.sent(next, tag.stream, tag.index, &mut packet[HEADER_LEN..]);
        send_udp(&udp, &packet[..HEADER_LEN + len])?;
        l.last_send_ns.insert(tag.stream, at);
        if tag.index == 0 {
            l.streams += 1;
        }
        if tag.index + 1 == per_stream {
            send_ctl(
                &mut writer,
                &Message::StreamSent {
                    stream: tag.stream as u32,
                },
            )?;
            open_stream = None;
        } else {
            open_stream = Some(tag.stream);
        }
    }
    let end = clock::monotonic_ns();
    if end > mark.at_ns.max(start) {
        let iv = mark.interval(start, end, &book, &ctl, last_estimate, &l.rtts);
        on_event(TransferEvent::Interval(&iv));
        intervals.push(iv);
    }
    let digest = book.digest();
    send_ctl(
        &mut writer,
        &Message::TransferEnd {
            bytes: book.offered(),
            digest,
        },
    )?;
    loop {
        match read_message(&mut reader).map_err(ctl_err)? {
            Message::TransferDone {
                bytes,
                digest: theirs,
            } => {
                if bytes != book.offered() || theirs != digest {
                    return Err(err(format!(
                        "DATA MISMATCH: the server holds {bytes} bytes with SHA-256 {}, this end sent {} bytes with SHA-256 {}",
                        hex(&theirs),
                        book.offered(),
                        hex(&digest)
                    )));
                }
                break;
            }
            Message::Refused { reason } => return Err(refused(&reason)),
            // Feedback still under way for the last streams.
            Message::Records { .. } | Message::Delivered { .. } => {}
            other => return Err(err(format!("expected TransferDone, got {other:?}"))),
        }
    }
    send_ctl(&mut writer, &Message::Close)?;
    loop {
        match read_message(&mut reader).map_err(ctl_err)? {
            Message::Bye { .. } => break,
            Message::Refused { reason } => return Err(refused(&reason)),
            _ => continue,
        }
    }
    Ok(TransferSummary {
        server: addr,
        authenticated,
        limits,
        estimator: opts.estimator,
        bytes: book.offered(),
        duration_ns: end - start,
        sent_bytes: book.sent_bytes,
        retransmitted_bytes: book.retransmitted_bytes,
        sent_packets: book.sent_packets,
        lost_packets: book.lost_packets,
        streams: l.streams,
        frame_bytes,
        rtt_min_ns: l.rtts.iter().min().copied(),
        rtt_median_ns: median_i64(&l.rtts),
        intervals,
        updates: l.updates,
        digest,
    })
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn send_ctl(w: &mut io::BufWriter<std::net::TcpStream>, m: &Message) -> Result<(), ChannelError> {
    write_message(w, m).map_err(|e| {
        err(format!(
            "the server closed the control connection mid-transfer (restarted, killed, or it ended the session): {e}"
        ))
    })
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

/// The loop's state beside the controller and the book.
struct Loop {
    ctl_fd: i32,
    /// Records of a stream still arriving (a stream's may span frames).
    pending: HashMap<u32, Vec<(u32, i64)>>,
    last_send_ns: BTreeMap<u64, i64>,
    rtts: Vec<i64>,
    updates: Vec<RapidUpdate>,
    streams: u64,
}

impl Loop {
    /// One control message during the transfer; the controller's updates
    /// it caused.
    fn handle(
        &mut self,
        m: Message,
        ctl: &mut RapidController,
        book: &mut SendBook,
        now: i64,
    ) -> Result<Vec<RapidUpdate>, ChannelError> {
        let mut out = Vec::new();
        match m {
            Message::Records {
                stream,
                base_ns,
                last,
                records,
                ..
            } => {
                let v = self.pending.entry(stream).or_default();
                v.extend(
                    records
                        .iter()
                        .map(|r| (r.position, base_ns + r.offset_ns as i64)),
                );
                if !last {
                    return Ok(out);
                }
                let got = self.pending.remove(&stream).unwrap_or_default();
                let s = stream as u64;
                for &(i, t) in &got {
                    book.feedback(s, i, true);
                    let tag = PacketTag {
                        stream: s,
                        index: i,
                    };
                    out.extend(ctl.feedback(tag, Some(t), now));
                }
                for i in book.unreported(s) {
                    book.feedback(s, i, false);
                    out.extend(ctl.feedback(
                        PacketTag {
                            stream: s,
                            index: i,
                        },
                        None,
                        now,
                    ));
                }
                if let Some(t) = self.last_send_ns.remove(&s) {
                    self.rtts.push(now - t);
                }
                // Older streams' send times are of no more use.
                self.last_send_ns = self.last_send_ns.split_off(&s);
            }
            Message::Delivered { bytes } => book.delivered_to(bytes),
            Message::Refused { reason } => return Err(refused(&reason)),
            other => return Err(err(format!("unexpected message mid-transfer: {other:?}"))),
        }
        Ok(out)
    }
}

/// Counters at the last interval's end.
#[derive(Default)]
struct Mark {
    at_ns: i64,
    delivered: u64,
    sent: u64,
    retransmitted: u64,
    rtts_seen: usize,
}

impl Mark {
    fn interval(
        &mut self,
        start: i64,
        now: i64,
        book: &SendBook,
        ctl: &RapidController,
        estimate: Option<f64>,
        rtts: &[i64],
    ) -> TransferInterval {
        let iv = TransferInterval {
            start_ns: self.at_ns.max(start) - start,
            end_ns: now - start,
            delivered_bytes: book.delivered() - self.delivered,
            sent_bytes: book.sent_bytes - self.sent,
            retransmitted_bytes: book.retransmitted_bytes - self.retransmitted,
            rate_bps: ctl.rate_bps(),
            estimate_bps: estimate,
            rtt_ns: median_i64(&rtts[self.rtts_seen.min(rtts.len())..]),
            total_delivered_bytes: book.delivered(),
        };
        *self = Mark {
            at_ns: now,
            delivered: book.delivered(),
            sent: book.sent_bytes,
            retransmitted: book.retransmitted_bytes,
            rtts_seen: rtts.len(),
        };
        iv
    }
}
