//! The sending end of a transfer, whichever side of the session it is
//! (the client, or the server for `transfer -R`): the controller's
//! streams out as data packets, the receiver's stamps and in-order count
//! back, lost packets sent again first, and the closing digest exchange.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};

use tightlink_core::channel::ChannelError;
use tightlink_core::rapid::{PacketTag, RapidController, RapidEstimator, RapidParams, RapidUpdate};
use tightlink_core::stats::median_i64;
use tightlink_core::Bound;
use tightlink_sys::sockopt;
use tightlink_wire::control::{
    read_message, write_message, Message, RateBound, RateUpdate, SenderTotals,
};
use tightlink_wire::data::{DataRepr, HEADER_LEN};

use super::book::{DataSource, SendBook};
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
    pub estimator: RapidEstimator,
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
    let params = RapidParams::paper(plan.max_bps, plan.frame_bytes, plan.estimator);
    let per_stream = (params.sub_streams * params.per_rate) as u32;
    let mut ctl = RapidController::new(params);
    let chunk = (plan.payload as usize - HEADER_LEN) as u16;
    let mut book = SendBook::new(
        DataSource { seed: plan.seed },
        chunk,
        plan.bytes,
        plan.window,
    );
    let mut l = Loop {
        pending: HashMap::new(),
        last_send_ns: BTreeMap::new(),
        rtts: Vec::new(),
        updates: Vec::new(),
        streams: 0,
    };
    let start = clock::monotonic_ns();
    let mut next_report = start + plan.interval_ns;
    let mut intervals: Vec<TransferInterval> = Vec::new();
    let mut mark = Mark::default();
    let mut last_heard = start;
    let mut open_stream: Option<u64> = None;
    let mut packet = vec![0u8; plan.payload as usize];
    let mut last_estimate: Option<f64> = None;
    let mut ctl_ready_since: Option<i64> = None;
    loop {
        let now = clock::monotonic_ns();
        let held = !ctl.mid_stream() && ctl.streams_awaiting_feedback() >= MAX_STREAMS_AWAITING;
        if plan.end_ns.is_some_and(|e| now > e) {
            return Err(err(format!(
                "session time limit reached after {} bytes",
                book.delivered()
            )));
        }
        // Feedback: it may free the window or ask for a resend. Reading a
        // stream's stamps runs the estimator (tens of us), which would
        // make the next packet late and bend the stream's gaps; so not
        // while a packet is due within `SEND_SLACK_NS`, unless feedback
        // has waited `MAX_FEEDBACK_DEFER_NS`.
        let read_now = if sockopt::wait_fd(ctl_fd, libc::POLLIN, 0).map_err(io_err("control"))? {
            let since = *ctl_ready_since.get_or_insert(now);
            let due_soon =
                !held && book.peek().is_some() && ctl.next_send_ns(now) - now < SEND_SLACK_NS;
            !due_soon || now - since > MAX_FEEDBACK_DEFER_NS
        } else {
            ctl_ready_since = None;
            false
        };
        if read_now {
            ctl_ready_since = None;
        }
        while read_now && sockopt::wait_fd(ctl_fd, libc::POLLIN, 0).map_err(io_err("control"))? {
            let m = read_message(reader).map_err(ctl_err)?;
            last_heard = clock::monotonic_ns();
            for u in l.handle(m, &mut ctl, &mut book, last_heard)? {
                last_estimate = u.abw_bps.or(last_estimate);
                if plan.tell_receiver {
                    send_ctl(writer, &rate_update(&u, start))?;
                }
                on_event(TransferEvent::Update(&u));
                l.updates.push(u);
            }
        }
        if book.complete() {
            break;
        }
        if plan.stop_at_ns.is_some_and(|d| now >= d) {
            book.stop_offering();
        }
        if now >= next_report {
            let iv = mark.interval(start, now, &book, &ctl, last_estimate, &l.rtts);
            on_event(TransferEvent::Interval(&iv));
            intervals.push(iv);
            next_report += plan.interval_ns;
        }
        if book.in_flight() > 0 && now - last_heard > plan.timeout_ns {
            return Err(err(format!(
                "the receiver stopped answering: no feedback for {} ms with {} packets in flight ({} of {} bytes delivered)",
                plan.timeout_ns / 1_000_000,
                book.in_flight(),
                book.delivered(),
                book.offered()
            )));
        }
        let Some(next) = book.peek().filter(|_| !held) else {
            // Nothing to send (window full, all sent, or too many streams
            // await their stamps): the stream ends here, so the receiver
            // closes it and its feedback comes.
            if let Some(s) = open_stream.take() {
                ctl.end_stream();
                send_ctl(writer, &Message::StreamSent { stream: s as u32 })?;
            }
            sockopt::wait_fd(ctl_fd, libc::POLLIN, 5).map_err(io_err("control"))?;
            continue;
        };
        let due = ctl.next_send_ns(now);
        if due > now {
            if due - now > 2_000_000 {
                sockopt::wait_fd(ctl_fd, libc::POLLIN, ((due - now) / 1_000_000 - 1) as i32)
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
                send_ctl(writer, &Message::StreamSent { stream: s as u32 })?;
            }
        }
        let len = next.chunk.len as usize;
        DataRepr {
            session: plan.session,
            stream: tag.stream as u32,
            index: tag.index,
            count: per_stream,
            offset: next.chunk.offset,
            len: next.chunk.len,
        }
        .emit(&mut packet[..HEADER_LEN]);
        book.sent(next, tag.stream, tag.index, &mut packet[HEADER_LEN..]);
        send_udp(&packet[..HEADER_LEN + len])?;
        l.last_send_ns.insert(tag.stream, at);
        if tag.index == 0 {
            l.streams += 1;
        }
        if tag.index + 1 == per_stream {
            send_ctl(
                writer,
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
    if plan.tell_receiver {
        let ns = |v: Option<i64>| v.map_or(0, |x| x.max(1) as u64);
        send_ctl(
            writer,
            &Message::SenderTotals(SenderTotals {
                sent_bytes: book.sent_bytes,
                retransmitted_bytes: book.retransmitted_bytes,
                sent_packets: book.sent_packets,
                lost_packets: book.lost_packets,
                streams: l.streams,
                rtt_min_ns: ns(l.rtts.iter().min().copied()),
                rtt_median_ns: ns(median_i64(&l.rtts)),
            }),
        )?;
    }
    send_ctl(
        writer,
        &Message::TransferEnd {
            bytes: book.offered(),
            digest,
        },
    )?;
    loop {
        match read_message(reader).map_err(ctl_err)? {
            Message::TransferDone {
                bytes,
                digest: theirs,
            } => {
                if bytes != book.offered() || theirs != digest {
                    return Err(err(format!(
                        "DATA MISMATCH: the receiver holds {bytes} bytes with SHA-256 {}, this end sent {} bytes with SHA-256 {}",
                        hex(&theirs),
                        book.offered(),
                        hex(&digest)
                    )));
                }
                break;
            }
            Message::Refused { reason } => return Err(refused(&reason)),
            // Feedback still under way for the last streams.
            Message::Records { .. } | Message::Delivered { .. } | Message::TransferStop => {}
            other => return Err(err(format!("expected TransferDone, got {other:?}"))),
        }
    }
    Ok(Sent {
        bytes: book.offered(),
        duration_ns: end - start,
        sent_bytes: book.sent_bytes,
        retransmitted_bytes: book.retransmitted_bytes,
        sent_packets: book.sent_packets,
        lost_packets: book.lost_packets,
        streams: l.streams,
        rtts: l.rtts,
        intervals,
        updates: l.updates,
        digest,
    })
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
