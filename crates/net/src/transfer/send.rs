//! The sending end of a transfer, whichever side of the session it is
//! (the client, or the server for `transfer -R`): the controller's
//! streams out as data packets, the receiver's stamps and in-order count
//! back, lost packets sent again first, and the closing digest exchange.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};

use tightlink_core::channel::ChannelError;
use tightlink_core::rapid::{PacketTag, RapidUpdate};
use tightlink_core::stats::median_i64;
use tightlink_core::Bound;
use tightlink_sys::sockopt;
use tightlink_wire::control::{
    read_message, write_message, Message, RateBound, RateUpdate, SenderTotals,
};
use tightlink_wire::data::{DataRepr, HEADER_LEN};

use super::book::{DataSource, Next, SendBook};
use super::pacer::{Due, Pacer, SendCc};
use super::progress::{err, hex, TransferEvent, TransferInterval};
use crate::clock;
use crate::ctl::{ctl_err, io_err, refused};

/// Feedback is not read when a packet is due sooner than this...
const SEND_SLACK_NS: i64 = 150_000;
/// ...unless it has waited this long.
const MAX_FEEDBACK_DEFER_NS: i64 = 2_000_000;
/// No new stream starts while this many await their stamps: the receiver
/// holds at most `MAX_OPEN_STREAMS` open and refuses a sender further
/// ahead, and a receiver stalled for a moment (its vCPU descheduled)
/// must slow the sender, not end the transfer.
const MAX_STREAMS_AWAITING: u64 = super::reassembly::MAX_OPEN_STREAMS as u64 / 2;

/// What the sending end was asked to do.
pub(crate) struct SendPlan {
    pub session: u64,
    /// UDP payload of a full data packet, and its frame as rates count.
    pub payload: u32,
    pub frame_bytes: u32,
    /// The receiver holds this much past what it delivered in order.
    pub window: u64,
    pub max_bps: f64,
    pub cc: SendCc,
    /// Bytes to send; `None`: until `stop_at_ns` or the receiver's
    /// `TransferStop`.
    pub bytes: Option<u64>,
    pub seed: u64,
    /// Monotonic ns: offer no more bytes from then on.
    pub stop_at_ns: Option<i64>,
    /// Monotonic ns: the session's time is up (an error).
    pub end_ns: Option<i64>,
    /// Longest wait for feedback while packets are in flight.
    pub timeout_ns: i64,
    pub interval_ns: i64,
    /// Tell the receiver each controller update and the totals (it runs
    /// no controller of its own: `transfer -R`).
    pub tell_receiver: bool,
}

/// What the sending end did.
pub(crate) struct Sent {
    pub bytes: u64,
    pub duration_ns: i64,
    pub sent_bytes: u64,
    pub retransmitted_bytes: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub streams: u64,
    pub rtts: Vec<i64>,
    pub intervals: Vec<TransferInterval>,
    pub updates: Vec<RapidUpdate>,
    pub digest: [u8; 32],
}

/// Sends the transfer through `TransferEnd` and the receiver's
/// `TransferDone`; a receiver holding other bytes is an error that says
/// so loudly. `send_udp` sends one data packet to the receiver.
pub(crate) fn send<R: Read, W: Write>(
    reader: &mut R,
    writer: &mut W,
    ctl_fd: i32,
    plan: &SendPlan,
    send_udp: &mut dyn FnMut(&[u8]) -> Result<(), ChannelError>,
    on_event: &mut dyn FnMut(TransferEvent),
) -> Result<Sent, ChannelError> {
    let chunk = (plan.payload as usize - HEADER_LEN) as u16;
    let start = clock::monotonic_ns();
    let mut x = Sending {
        reader,
        writer,
        ctl_fd,
        plan,
        ctl: Pacer::new(plan.cc, plan.max_bps, plan.frame_bytes),
        book: SendBook::new(
            DataSource { seed: plan.seed },
            chunk,
            plan.bytes,
            plan.window,
        ),
        l: Loop {
            pending: HashMap::new(),
            last_send_ns: BTreeMap::new(),
            rtts: Vec::new(),
            updates: Vec::new(),
            streams: 0,
            last_estimate: None,
            last_heard_ns: start,
            ctl_ready_since: None,
            open_stream: None,
        },
        start,
        packet: vec![0u8; plan.payload as usize],
        send_udp,
        on_event,
        intervals: Vec::new(),
        mark: Mark::default(),
    };
    let mut next_report = start + plan.interval_ns;
    loop {
        let now = clock::monotonic_ns();
        let held = !x.ctl.mid_stream() && x.ctl.streams_awaiting_feedback() >= MAX_STREAMS_AWAITING;
        if plan.end_ns.is_some_and(|e| now > e) {
            return Err(err(format!(
                "session time limit reached after {} bytes",
                x.book.delivered()
            )));
        }
        x.read_feedback(now, held)?;
        if x.book.complete() {
            break;
        }
        if plan.stop_at_ns.is_some_and(|d| now >= d) {
            x.book.stop_offering();
        }
        if now >= next_report {
            x.report_interval(now);
            next_report += plan.interval_ns;
        }
        x.check_answering(now)?;
        let Some(next) = x.book.peek().filter(|_| !held) else {
            x.nothing_to_send()?;
            continue;
        };
        let due = match x.ctl.next_send(now) {
            Due::At(t) => t,
            Due::WindowFull => {
                x.window_full()?;
                continue;
            }
        };
        if due > now {
            x.wait_until(now, due)?;
            continue;
        }
        x.send_packet(next)?;
    }
    let end = clock::monotonic_ns();
    if end > x.mark.at_ns.max(start) {
        x.report_interval(end);
    }
    let digest = x.close()?;
    let (book, l) = (&x.book, x.l);
    Ok(Sent {
        bytes: book.offered(),
        duration_ns: end - start,
        sent_bytes: book.sent_bytes,
        retransmitted_bytes: book.retransmitted_bytes,
        sent_packets: book.sent_packets,
        lost_packets: book.lost_packets,
        streams: l.streams,
        rtts: l.rtts,
        intervals: x.intervals,
        updates: l.updates,
        digest,
    })
}

/// One transfer's sending end under way: the control connection, the
/// controller, the book of bytes and the loop's state.
struct Sending<'a, R, W> {
    reader: &'a mut R,
    writer: &'a mut W,
    ctl_fd: i32,
    plan: &'a SendPlan,
    ctl: Pacer,
    book: SendBook,
    l: Loop,
    start: i64,
    packet: Vec<u8>,
    send_udp: &'a mut dyn FnMut(&[u8]) -> Result<(), ChannelError>,
    on_event: &'a mut dyn FnMut(TransferEvent),
    intervals: Vec<TransferInterval>,
    mark: Mark,
}

impl<R: Read, W: Write> Sending<'_, R, W> {
    /// Feedback: it may free the window or ask for a resend. Reading a
    /// stream's stamps runs the estimator (tens of us), which would make
    /// the next packet late and bend the stream's gaps; so not while a
    /// packet is due within `SEND_SLACK_NS`, unless feedback has waited
    /// `MAX_FEEDBACK_DEFER_NS`.
    fn read_feedback(&mut self, now: i64, held: bool) -> Result<(), ChannelError> {
        let ready = |fd| sockopt::wait_fd(fd, libc::POLLIN, 0).map_err(io_err("control"));
        let read_now = if ready(self.ctl_fd)? {
            let since = *self.l.ctl_ready_since.get_or_insert(now);
            let due_soon = !held
                && self.book.peek().is_some()
                && matches!(self.ctl.next_send(now), Due::At(t) if t - now < SEND_SLACK_NS);
            !due_soon || now - since > MAX_FEEDBACK_DEFER_NS
        } else {
            self.l.ctl_ready_since = None;
            false
        };
        if !read_now {
            return Ok(());
        }
        self.l.ctl_ready_since = None;
        while ready(self.ctl_fd)? {
            let m = read_message(self.reader).map_err(ctl_err)?;
            let heard = clock::monotonic_ns();
            self.l.last_heard_ns = heard;
            for u in self.l.handle(m, &mut self.ctl, &mut self.book, heard)? {
                self.l.last_estimate = u.abw_bps.or(self.l.last_estimate);
                if self.plan.tell_receiver {
                    send_ctl(self.writer, &rate_update(&u, self.start))?;
                }
                (self.on_event)(TransferEvent::Update(&u));
                self.l.updates.push(u);
            }
        }
        Ok(())
    }

    /// The interval since the last one, told and kept.
    fn report_interval(&mut self, now: i64) {
        let (l, book, ctl) = (&self.l, &self.book, &self.ctl);
        let iv = self
            .mark
            .interval(self.start, now, book, ctl, l.last_estimate, &l.rtts);
        (self.on_event)(TransferEvent::Interval(&iv));
        self.intervals.push(iv);
    }

    /// An error once the receiver has said nothing for the plan's
    /// timeout while packets are in flight.
    fn check_answering(&self, now: i64) -> Result<(), ChannelError> {
        let book = &self.book;
        if book.in_flight() > 0 && now - self.l.last_heard_ns > self.plan.timeout_ns {
            return Err(err(format!(
                "the receiver stopped answering: no feedback for {} ms with {} packets in flight ({} of {} bytes delivered)",
                self.plan.timeout_ns / 1_000_000,
                book.in_flight(),
                book.delivered(),
                book.offered()
            )));
        }
        Ok(())
    }

    /// Nothing to send (window full, all sent, or too many streams await
    /// their stamps): the stream ends here, so the receiver closes it and
    /// its feedback comes; then a short wait for that feedback.
    fn nothing_to_send(&mut self) -> Result<(), ChannelError> {
        if let Some(s) = self.l.open_stream.take() {
            self.ctl.end_stream();
            send_ctl(self.writer, &Message::StreamSent { stream: s as u32 })?;
        }
        sockopt::wait_fd(self.ctl_fd, libc::POLLIN, 5).map_err(io_err("control"))?;
        Ok(())
    }

    /// The window is full: a report frees it. When everything in flight
    /// is the stream being sent, that stream ends so its report comes.
    fn window_full(&mut self) -> Result<(), ChannelError> {
        if self.ctl.waiting_on_open_stream() {
            return self.nothing_to_send();
        }
        sockopt::wait_fd(self.ctl_fd, libc::POLLIN, 5).map_err(io_err("control"))?;
        Ok(())
    }

    /// Towards the next packet's time: sleeping on the control socket
    /// when it is milliseconds away, spinning (100 us at most) when near.
    fn wait_until(&self, now: i64, due: i64) -> Result<(), ChannelError> {
        if due - now > 2_000_000 {
            let ms = ((due - now) / 1_000_000 - 1) as i32;
            sockopt::wait_fd(self.ctl_fd, libc::POLLIN, ms).map_err(io_err("control"))?;
        } else {
            clock::spin_until(due.min(now + 100_000));
        }
        Ok(())
    }

    /// One data packet, now: the controller tags it, the book fills it;
    /// a stream's last packet (or the first of the next) closes it.
    fn send_packet(&mut self, next: Next) -> Result<(), ChannelError> {
        let at = clock::monotonic_ns();
        let len = next.chunk.len as usize;
        // A short last chunk is a shorter frame.
        let frame = self.plan.frame_bytes - (self.plan.payload - (HEADER_LEN + len) as u32);
        let (tag, count): (PacketTag, u32) = self.ctl.sent(at, frame);
        if let Some(s) = self.l.open_stream {
            if s != tag.stream {
                send_ctl(self.writer, &Message::StreamSent { stream: s as u32 })?;
            }
        }
        DataRepr {
            session: self.plan.session,
            stream: tag.stream as u32,
            index: tag.index,
            count,
            offset: next.chunk.offset,
            len: next.chunk.len,
        }
        .emit(&mut self.packet[..HEADER_LEN]);
        let payload = &mut self.packet[HEADER_LEN..];
        self.book.sent(next, tag.stream, tag.index, payload);
        (self.send_udp)(&self.packet[..HEADER_LEN + len])?;
        self.l.last_send_ns.insert(tag.stream, at);
        if tag.index == 0 {
            self.l.streams += 1;
        }
        if tag.index + 1 == count {
            let stream = tag.stream as u32;
            send_ctl(self.writer, &Message::StreamSent { stream })?;
            self.l.open_stream = None;
        } else {
            self.l.open_stream = Some(tag.stream);
        }
        Ok(())
    }

    /// The totals (where the receiver runs no controller), `TransferEnd`,
    /// and the receiver's `TransferDone` checked against what was sent;
    /// the digest of the bytes sent.
    fn close(&mut self) -> Result<[u8; 32], ChannelError> {
        let (book, l) = (&self.book, &self.l);
        let digest = book.digest();
        if self.plan.tell_receiver {
            let ns = |v: Option<i64>| v.map_or(0, |x| x.max(1) as u64);
            let totals = SenderTotals {
                sent_bytes: book.sent_bytes,
                retransmitted_bytes: book.retransmitted_bytes,
                sent_packets: book.sent_packets,
                lost_packets: book.lost_packets,
                streams: l.streams,
                rtt_min_ns: ns(l.rtts.iter().min().copied()),
                rtt_median_ns: ns(median_i64(&l.rtts)),
            };
            send_ctl(self.writer, &Message::SenderTotals(totals))?;
        }
        let bytes = book.offered();
        send_ctl(self.writer, &Message::TransferEnd { bytes, digest })?;
        loop {
            match read_message(self.reader).map_err(ctl_err)? {
                Message::TransferDone {
                    bytes: theirs_bytes,
                    digest: theirs,
                } => {
                    if theirs_bytes != bytes || theirs != digest {
                        return Err(err(format!(
                            "DATA MISMATCH: the receiver holds {theirs_bytes} bytes with SHA-256 {}, this end sent {bytes} bytes with SHA-256 {}",
                            hex(&theirs),
                            hex(&digest)
                        )));
                    }
                    return Ok(digest);
                }
                Message::Refused { reason } => return Err(refused(&reason)),
                // Feedback still under way for the last streams.
                Message::Records { .. } | Message::Delivered { .. } | Message::TransferStop => {}
                other => return Err(err(format!("expected TransferDone, got {other:?}"))),
            }
        }
    }
}

fn send_ctl<W: Write>(w: &mut W, m: &Message) -> Result<(), ChannelError> {
    write_message(w, m).map_err(|e| {
        err(format!(
            "the peer closed the control connection mid-transfer (restarted, killed, or it ended the session): {e}"
        ))
    })
}

/// One controller update as the receiver of a reverse transfer is told.
fn rate_update(u: &RapidUpdate, start_ns: i64) -> Message {
    Message::RateUpdate(RateUpdate {
        stream: u.stream as u32,
        at_ns: (u.at_ns - start_ns).max(0) as u64,
        sent_bps: u.sent_bps.max(0.0) as u64,
        abw_bps: u.abw_bps.map_or(0, |a| a.max(1.0) as u64),
        bound: match u.bound {
            Bound::Exact => RateBound::Exact,
            Bound::AtLeast => RateBound::AtLeast,
            Bound::AtMost => RateBound::AtMost,
            Bound::None => RateBound::None,
        },
        lost: u.lost.min(u32::MAX as usize) as u32,
        rate_bps: u.rate_bps.max(0.0) as u64,
    })
}

/// The inverse of [`rate_update`], on the receiver (times since the
/// transfer began).
pub(crate) fn update_of(u: &RateUpdate) -> RapidUpdate {
    RapidUpdate {
        stream: u.stream as u64,
        at_ns: u.at_ns.min(i64::MAX as u64) as i64,
        sent_bps: u.sent_bps as f64,
        abw_bps: (u.abw_bps > 0).then_some(u.abw_bps as f64),
        bound: match u.bound {
            RateBound::Exact => Bound::Exact,
            RateBound::AtLeast => Bound::AtLeast,
            RateBound::AtMost => Bound::AtMost,
            RateBound::None => Bound::None,
        },
        lost: u.lost as usize,
        rate_bps: u.rate_bps as f64,
    }
}

/// The loop's state beside the controller and the book.
struct Loop {
    /// Records of a stream still arriving (a stream's may span frames).
    pending: HashMap<u32, Vec<(u32, i64)>>,
    last_send_ns: BTreeMap<u64, i64>,
    rtts: Vec<i64>,
    updates: Vec<RapidUpdate>,
    streams: u64,
    /// The controller's last estimate, for the intervals.
    last_estimate: Option<f64>,
    /// When feedback was last read, and since when it has been waiting.
    last_heard_ns: i64,
    ctl_ready_since: Option<i64>,
    /// The stream whose packets are going out, until its `StreamSent`.
    open_stream: Option<u64>,
}

impl Loop {
    /// One control message during the transfer; the controller's updates
    /// it caused.
    fn handle(
        &mut self,
        m: Message,
        ctl: &mut Pacer,
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
                for &(i, _) in &got {
                    book.feedback(s, i, true);
                }
                let missing = book.unreported(s);
                for &i in &missing {
                    book.feedback(s, i, false);
                }
                out.extend(ctl.report(s, &got, &missing, now));
                if let Some(t) = self.last_send_ns.remove(&s) {
                    self.rtts.push(now - t);
                }
                // Older streams' send times are of no more use.
                self.last_send_ns = self.last_send_ns.split_off(&s);
            }
            Message::Delivered { bytes } => book.delivered_to(bytes),
            Message::TransferStop => book.stop_offering(),
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
        ctl: &Pacer,
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
            estimate_bps: estimate.or(ctl.estimate_bps()),
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
