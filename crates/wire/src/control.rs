//! The control protocol between a tightlink client and `tightlink server`,
//! carried over TCP. Probe packets themselves travel over
//! UDP as TWAMP-light test packets ([`crate::twamp`]); this channel opens a
//! session, announces each stream before it is sent, and returns the
//! per-packet timestamps in compact binary batches.
//!
//! Framing, all big-endian: `u32 length` (of what follows), `u8 type`, body.
//! A frame is at most [`MAX_FRAME`] bytes, so a reader's memory is bounded
//! whatever the peer sends. Exchange:
//!
//! ```text
//! client                                   server
//! Hello {version, wants_key}        ->
//!                                   <-     Challenge {version, nonce, key_required, limits}
//! Open {direction, auth}            ->     (auth = HMAC-SHA256(key, nonce, direction))
//!                                   <-     Accepted {session, udp_port, limits} | Refused
//! forward:  Forward {stream, ...}   ->     <- Ready; client sends UDP; StreamSent ->
//!                                   <-     Records {receive stamps}...  (last = true)
//!                                   <-     SocketDrops {stream, dropped}
//! reverse:  Reverse {schedule}      ->     <- Ready; server sends UDP; <- StreamSent
//!                                   <-     Records {transmit stamps}... (last = true)
//!                                   <-     Records {send lags}...       (last = true)
//! Credit {padding}                  ->     (reverse without a key: see server)
//! transfer: Transfer {max_bytes}    ->     <- TransferReady {window}
//!           client sends data packets ([`crate::data`]), StreamSent -> after each stream
//!                                   <-     Records {receive stamps} + Delivered, per stream
//!           TransferEnd {bytes, digest} -> <- TransferDone {bytes, digest}
//! transfer-reverse: a UDP packet from the client's data socket (where to send), then
//!           TransferFrom {max_bytes, ...} -> <- TransferReady {window}
//!           the server sends data packets; StreamSent, RateUpdate, <- per stream
//!           Records + Delivered ->          (TransferStop -> when the client's time is up)
//!                                   <-     SenderTotals, TransferEnd; TransferDone ->
//! Close                             ->     <- Bye {drop counters}
//! ```
//! Any step may be answered with `Refused {reason}` instead, after which
//! the server closes the connection.

use std::io::{self, Read, Write};

use crate::{DropCounters, DropReason};

pub const MAGIC: [u8; 4] = *b"TLCP";
/// Version 4 of this protocol (a forward stream's records are followed by
/// the server socket's drops over the stream, [`Message::SocketDrops`];
/// version 3's reverse stream records added how late the server's send
/// calls were, [`RecordKind::SendLag`]; version 2
/// gave its kernel transmit stamps only; version 1 sent the probes in the
/// RFC 5357 padding instead of the STAMP layout of [`crate::twamp`]); a
/// server refuses any other.
pub const VERSION: u16 = 4;
/// Largest frame (type + body), either direction.
pub const MAX_FRAME: usize = 65_536;
/// Timestamp records per `Records` frame (8 bytes each).
pub const RECORDS_PER_FRAME: usize = 8_000;
/// Packets a `Reverse` schedule can hold in one frame (6 bytes each).
pub const MAX_SCHEDULE: usize = 10_000;
/// Most padding one `Credit` frame carries.
pub const MAX_CREDIT: u32 = (MAX_FRAME - 1) as u32;
/// Longest reason text in `Refused`.
pub const MAX_REASON: usize = 512;

/// Which way probes go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    /// Client sends, server timestamps (upload).
    Forward,
    /// Server sends to the client, client timestamps (download, like
    /// `iperf3 -R`).
    Reverse,
    /// A reliable bulk transfer from the client, its data sent as probe
    /// streams and rate-controlled from the server's receive stamps.
    Transfer,
    /// The same transfer from the server to the client (`transfer -R`),
    /// rate-controlled at the server from the client's receive stamps.
    TransferReverse,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Forward => "forward",
            Direction::Reverse => "reverse",
            Direction::Transfer => "transfer",
            Direction::TransferReverse => "transfer-reverse",
        }
    }
}

/// What a server allows one session; sent in `Challenge` (the defaults for
/// this peer) and in `Accepted` (clamped to this session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_rate_bps: u64,
    pub max_session_bytes: u64,
    pub max_session_ms: u32,
    pub max_stream_packets: u32,
    pub max_packet_bytes: u16,
}

/// Which clock a `Records` frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Kernel receive timestamps.
    Receive,
    /// Kernel transmit timestamps (after the sender's qdisc).
    Transmit,
    /// How far each packet's send call came after its scheduled time on
    /// the sender's clock, ns (`base_ns` may then be negative): a sender
    /// that stalled is late by exactly this, where its kernel stamps lag
    /// the schedule by the forwarding work behind them too.
    SendLag,
}

/// One packet's timestamp: `base_ns + offset_ns`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Record {
    pub position: u32,
    pub offset_ns: u32,
}

/// One packet of a reverse schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scheduled {
    pub offset_ns: u32,
    pub size_bytes: u16,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    Hello {
        version: u16,
        wants_key: bool,
    },
    Challenge {
        version: u16,
        nonce: [u8; 32],
        key_required: bool,
        limits: Limits,
    },
    Open {
        direction: Direction,
        auth: Option<[u8; 32]>,
    },
    Accepted {
        session: u64,
        udp_port: u16,
        authenticated: bool,
        limits: Limits,
    },
    Refused {
        reason: String,
    },
    /// The client will send `packets` UDP probes of at most `max_size`
    /// payload bytes, `bytes` in all, over `duration_ns`.
    Forward {
        stream: u32,
        packets: u32,
        max_size: u16,
        bytes: u64,
        duration_ns: u64,
    },
    /// The client asks the server to send this schedule to it.
    Reverse {
        stream: u32,
        schedule: Vec<Scheduled>,
    },
    Ready {
        stream: u32,
    },
    StreamSent {
        stream: u32,
    },
    Records {
        stream: u32,
        kind: RecordKind,
        base_ns: i64,
        last: bool,
        records: Vec<Record>,
    },
    /// Datagrams the server's probe socket dropped (its receive buffer
    /// full) while `stream` came in: probes the server's host lost, which
    /// the records show as lost.
    SocketDrops {
        stream: u32,
        dropped: u32,
    },
    Close,
    Bye {
        drops: DropCounters,
    },
    /// `len` bytes of zeros: credit for an unauthenticated reverse
    /// session, which gets no more UDP bytes than it sent (TCP, so credit
    /// is never lost on a narrow upload path).
    Credit {
        len: u32,
    },
    /// The client will send at most `max_bytes` of data in packets of at
    /// most `packet_bytes` (UDP payload).
    Transfer {
        max_bytes: u64,
        packet_bytes: u16,
    },
    /// The server takes data up to `window_bytes` past what it has
    /// delivered in order.
    TransferReady {
        window_bytes: u64,
    },
    /// Bytes the server holds in order from the start.
    Delivered {
        bytes: u64,
    },
    /// The client has sent everything: its length and SHA-256.
    TransferEnd {
        bytes: u64,
        digest: [u8; 32],
    },
    /// What the receiver holds: its length and SHA-256.
    TransferDone {
        bytes: u64,
        digest: [u8; 32],
    },
    /// Reverse transfer: the server sends at most `max_bytes` in packets
    /// of at most `packet_bytes` (UDP payload), never faster than
    /// `max_rate_bps` (0: the session's limit), its controller reading
    /// streams with BASS smoothing or without (`raw`); the bytes are the
    /// sequence `seed` gives.
    TransferFrom {
        max_bytes: u64,
        packet_bytes: u16,
        max_rate_bps: u64,
        raw: bool,
        seed: u64,
    },
    /// The receiver's time is up: offer no more bytes, finish those
    /// offered.
    TransferStop,
    /// Reverse transfer: what the server's controller read from one
    /// stream's stamps and the rate it set (bit/s; `abw_bps` 0: none;
    /// `bound` 0 exact, 1 at least, 2 at most, 3 none; `at_ns` since the
    /// transfer began).
    RateUpdate {
        stream: u32,
        at_ns: u64,
        sent_bps: u64,
        abw_bps: u64,
        bound: u8,
        lost: u32,
        rate_bps: u64,
    },
    /// Reverse transfer: the sender's counts, before `TransferEnd`
    /// (RTTs in ns, 0: none measured).
    SenderTotals {
        sent_bytes: u64,
        retransmitted_bytes: u64,
        sent_packets: u64,
        lost_packets: u64,
        streams: u64,
        rtt_min_ns: u64,
        rtt_median_ns: u64,
    },
}

/// A control frame that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("control frame of {0} bytes exceeds the {MAX_FRAME}-byte limit")]
    TooLong(usize),
    #[error("empty control frame")]
    Empty,
    #[error("control message type {0} is not known")]
    UnknownType(u8),
    #[error("control message {what}: {reason}")]
    Malformed { what: &'static str, reason: String },
    #[error("control connection: {0}")]
    Io(#[from] io::Error),
}

fn malformed(what: &'static str, reason: impl Into<String>) -> ControlError {
    ControlError::Malformed {
        what,
        reason: reason.into(),
    }
}

mod ty {
    pub const HELLO: u8 = 1;
    pub const CHALLENGE: u8 = 2;
    pub const OPEN: u8 = 3;
    pub const ACCEPTED: u8 = 4;
    pub const REFUSED: u8 = 5;
    pub const FORWARD: u8 = 6;
    pub const REVERSE: u8 = 7;
    pub const READY: u8 = 8;
    pub const STREAM_SENT: u8 = 9;
    pub const RECORDS: u8 = 10;
    pub const CLOSE: u8 = 11;
    pub const BYE: u8 = 12;
    pub const CREDIT: u8 = 13;
    pub const TRANSFER: u8 = 14;
    pub const TRANSFER_READY: u8 = 15;
    pub const DELIVERED: u8 = 16;
    pub const TRANSFER_END: u8 = 17;
    pub const TRANSFER_DONE: u8 = 18;
    pub const TRANSFER_FROM: u8 = 19;
    pub const TRANSFER_STOP: u8 = 20;
    pub const RATE_UPDATE: u8 = 21;
    pub const SENDER_TOTALS: u8 = 22;
    pub const SOCKET_DROPS: u8 = 23;
}

/// A cursor over a frame body: every read is bounds-checked.
struct Body<'a> {
    what: &'static str,
    b: &'a [u8],
}

impl<'a> Body<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], ControlError> {
        if self.b.len() < n {
            return Err(malformed(self.what, "frame ends early"));
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8, ControlError> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, ControlError> {
        Ok(u16::from_be_bytes(self.take(2)?.try_into().unwrap()))
    }
    fn u32(&mut self) -> Result<u32, ControlError> {
        Ok(u32::from_be_bytes(self.take(4)?.try_into().unwrap()))
    }
    fn u64(&mut self) -> Result<u64, ControlError> {
        Ok(u64::from_be_bytes(self.take(8)?.try_into().unwrap()))
    }
    fn bool(&mut self) -> Result<bool, ControlError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(malformed(self.what, format!("flag byte {v} is not 0 or 1"))),
        }
    }
    fn limits(&mut self) -> Result<Limits, ControlError> {
        Ok(Limits {
            max_rate_bps: self.u64()?,
            max_session_bytes: self.u64()?,
            max_session_ms: self.u32()?,
            max_stream_packets: self.u32()?,
            max_packet_bytes: self.u16()?,
        })
    }
    fn end(self) -> Result<(), ControlError> {
        if self.b.is_empty() {
            Ok(())
        } else {
            Err(malformed(
                self.what,
                format!("{} bytes after the end", self.b.len()),
            ))
        }
    }
}

fn put_limits(out: &mut Vec<u8>, l: &Limits) {
    out.extend_from_slice(&l.max_rate_bps.to_be_bytes());
    out.extend_from_slice(&l.max_session_bytes.to_be_bytes());
    out.extend_from_slice(&l.max_session_ms.to_be_bytes());
    out.extend_from_slice(&l.max_stream_packets.to_be_bytes());
    out.extend_from_slice(&l.max_packet_bytes.to_be_bytes());
}

impl Message {
    /// Appends the whole frame (length, type, body) to `out`. Panics only
    /// on a message that breaks this module's own size limits (a caller
    /// bug: `Records` over [`RECORDS_PER_FRAME`], a schedule over
    /// [`MAX_SCHEDULE`]).
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        match self {
            Message::Hello { version, wants_key } => {
                out.push(ty::HELLO);
                out.extend_from_slice(&MAGIC);
                out.extend_from_slice(&version.to_be_bytes());
                out.push(*wants_key as u8);
            }
            Message::Challenge {
                version,
                nonce,
                key_required,
                limits,
            } => {
                out.push(ty::CHALLENGE);
                out.extend_from_slice(&version.to_be_bytes());
                out.extend_from_slice(nonce);
                out.push(*key_required as u8);
                put_limits(out, limits);
            }
            Message::Open { direction, auth } => {
                out.push(ty::OPEN);
                out.push(match direction {
                    Direction::Forward => 0,
                    Direction::Reverse => 1,
                    Direction::Transfer => 2,
                    Direction::TransferReverse => 3,
                });
                match auth {
                    Some(a) => {
                        out.push(1);
                        out.extend_from_slice(a);
                    }
                    None => out.push(0),
                }
            }
            Message::Accepted {
                session,
                udp_port,
                authenticated,
                limits,
            } => {
                out.push(ty::ACCEPTED);
                out.extend_from_slice(&session.to_be_bytes());
                out.extend_from_slice(&udp_port.to_be_bytes());
                out.push(*authenticated as u8);
                put_limits(out, limits);
            }
            Message::Refused { reason } => {
                out.push(ty::REFUSED);
                let mut end = reason.len().min(MAX_REASON);
                while !reason.is_char_boundary(end) {
                    end -= 1;
                }
                out.extend_from_slice(&reason.as_bytes()[..end]);
            }
            Message::Forward {
                stream,
                packets,
                max_size,
                bytes,
                duration_ns,
            } => {
                out.push(ty::FORWARD);
                out.extend_from_slice(&stream.to_be_bytes());
                out.extend_from_slice(&packets.to_be_bytes());
                out.extend_from_slice(&max_size.to_be_bytes());
                out.extend_from_slice(&bytes.to_be_bytes());
                out.extend_from_slice(&duration_ns.to_be_bytes());
            }
            Message::Reverse { stream, schedule } => {
                assert!(schedule.len() <= MAX_SCHEDULE, "schedule over one frame");
                out.push(ty::REVERSE);
                out.extend_from_slice(&stream.to_be_bytes());
                out.extend_from_slice(&(schedule.len() as u32).to_be_bytes());
                for s in schedule {
                    out.extend_from_slice(&s.offset_ns.to_be_bytes());
                    out.extend_from_slice(&s.size_bytes.to_be_bytes());
                }
            }
            Message::Ready { stream } => {
                out.push(ty::READY);
                out.extend_from_slice(&stream.to_be_bytes());
            }
            Message::StreamSent { stream } => {
                out.push(ty::STREAM_SENT);
                out.extend_from_slice(&stream.to_be_bytes());
            }
            Message::Records {
                stream,
                kind,
                base_ns,
                last,
                records,
            } => {
                assert!(records.len() <= RECORDS_PER_FRAME, "records over one frame");
                out.push(ty::RECORDS);
                out.extend_from_slice(&stream.to_be_bytes());
                out.push(match kind {
                    RecordKind::Receive => 0,
                    RecordKind::Transmit => 1,
                    RecordKind::SendLag => 2,
                });
                out.extend_from_slice(&base_ns.to_be_bytes());
                out.push(*last as u8);
                out.extend_from_slice(&(records.len() as u32).to_be_bytes());
                for r in records {
                    out.extend_from_slice(&r.position.to_be_bytes());
                    out.extend_from_slice(&r.offset_ns.to_be_bytes());
                }
            }
            Message::Close => out.push(ty::CLOSE),
            Message::Credit { len } => {
                assert!(*len <= MAX_CREDIT, "credit over one frame");
                out.push(ty::CREDIT);
                out.resize(out.len() + *len as usize, 0);
            }
            Message::Transfer {
                max_bytes,
                packet_bytes,
            } => {
                out.push(ty::TRANSFER);
                out.extend_from_slice(&max_bytes.to_be_bytes());
                out.extend_from_slice(&packet_bytes.to_be_bytes());
            }
            Message::TransferReady { window_bytes } => {
                out.push(ty::TRANSFER_READY);
                out.extend_from_slice(&window_bytes.to_be_bytes());
            }
            Message::Delivered { bytes } => {
                out.push(ty::DELIVERED);
                out.extend_from_slice(&bytes.to_be_bytes());
            }
            Message::TransferEnd { bytes, digest } => {
                out.push(ty::TRANSFER_END);
                out.extend_from_slice(&bytes.to_be_bytes());
                out.extend_from_slice(digest);
            }
            Message::TransferDone { bytes, digest } => {
                out.push(ty::TRANSFER_DONE);
                out.extend_from_slice(&bytes.to_be_bytes());
                out.extend_from_slice(digest);
            }
            Message::TransferFrom {
                max_bytes,
                packet_bytes,
                max_rate_bps,
                raw,
                seed,
            } => {
                out.push(ty::TRANSFER_FROM);
                out.extend_from_slice(&max_bytes.to_be_bytes());
                out.extend_from_slice(&packet_bytes.to_be_bytes());
                out.extend_from_slice(&max_rate_bps.to_be_bytes());
                out.push(*raw as u8);
                out.extend_from_slice(&seed.to_be_bytes());
            }
            Message::TransferStop => out.push(ty::TRANSFER_STOP),
            Message::RateUpdate {
                stream,
                at_ns,
                sent_bps,
                abw_bps,
                bound,
                lost,
                rate_bps,
            } => {
                out.push(ty::RATE_UPDATE);
                out.extend_from_slice(&stream.to_be_bytes());
                out.extend_from_slice(&at_ns.to_be_bytes());
                out.extend_from_slice(&sent_bps.to_be_bytes());
                out.extend_from_slice(&abw_bps.to_be_bytes());
                out.push(*bound);
                out.extend_from_slice(&lost.to_be_bytes());
                out.extend_from_slice(&rate_bps.to_be_bytes());
            }
            Message::SenderTotals {
                sent_bytes,
                retransmitted_bytes,
                sent_packets,
                lost_packets,
                streams,
                rtt_min_ns,
                rtt_median_ns,
            } => {
                out.push(ty::SENDER_TOTALS);
                for v in [
                    sent_bytes,
                    retransmitted_bytes,
                    sent_packets,
                    lost_packets,
                    streams,
                    rtt_min_ns,
                    rtt_median_ns,
                ] {
                    out.extend_from_slice(&v.to_be_bytes());
                }
            }
            Message::SocketDrops { stream, dropped } => {
                out.push(ty::SOCKET_DROPS);
                out.extend_from_slice(&stream.to_be_bytes());
                out.extend_from_slice(&dropped.to_be_bytes());
            }
            Message::Bye { drops } => {
                out.push(ty::BYE);
                let nonzero: Vec<_> = DropReason::ALL
                    .iter()
                    .enumerate()
                    .filter(|(_, r)| drops.get(**r) > 0)
                    .collect();
                out.push(nonzero.len() as u8);
                for (i, r) in nonzero {
                    out.push(i as u8);
                    out.extend_from_slice(&drops.get(*r).to_be_bytes());
                }
            }
        }
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// Parses one frame's type and body (the length prefix removed).
    pub fn parse(frame: &[u8]) -> Result<Message, ControlError> {
        let (&t, body) = frame.split_first().ok_or(ControlError::Empty)?;
        let what = match t {
            ty::HELLO => "Hello",
            ty::CHALLENGE => "Challenge",
            ty::OPEN => "Open",
            ty::ACCEPTED => "Accepted",
            ty::REFUSED => "Refused",
            ty::FORWARD => "Forward",
            ty::REVERSE => "Reverse",
            ty::READY => "Ready",
            ty::STREAM_SENT => "StreamSent",
            ty::RECORDS => "Records",
            ty::CLOSE => "Close",
            ty::BYE => "Bye",
            ty::CREDIT => "Credit",
            ty::TRANSFER => "Transfer",
            ty::TRANSFER_READY => "TransferReady",
            ty::DELIVERED => "Delivered",
            ty::TRANSFER_END => "TransferEnd",
            ty::TRANSFER_DONE => "TransferDone",
            ty::TRANSFER_FROM => "TransferFrom",
            ty::TRANSFER_STOP => "TransferStop",
            ty::RATE_UPDATE => "RateUpdate",
            ty::SENDER_TOTALS => "SenderTotals",
            ty::SOCKET_DROPS => "SocketDrops",
            other => return Err(ControlError::UnknownType(other)),
        };
        let mut b = Body { what, b: body };
        let m = match t {
            ty::HELLO => {
                if b.take(4)? != MAGIC {
                    return Err(malformed(what, "not a tightlink control connection"));
                }
                Message::Hello {
                    version: b.u16()?,
                    wants_key: b.bool()?,
                }
            }
            ty::CHALLENGE => Message::Challenge {
                version: b.u16()?,
                nonce: b.take(32)?.try_into().unwrap(),
                key_required: b.bool()?,
                limits: b.limits()?,
            },
            ty::OPEN => Message::Open {
                direction: match b.u8()? {
                    0 => Direction::Forward,
                    1 => Direction::Reverse,
                    2 => Direction::Transfer,
                    3 => Direction::TransferReverse,
                    v => return Err(malformed(what, format!("direction {v}"))),
                },
                auth: if b.bool()? {
                    Some(b.take(32)?.try_into().unwrap())
                } else {
                    None
                },
            },
            ty::ACCEPTED => Message::Accepted {
                session: b.u64()?,
                udp_port: b.u16()?,
                authenticated: b.bool()?,
                limits: b.limits()?,
            },
            ty::REFUSED => {
                let raw = b.take(b.b.len())?;
                if raw.len() > MAX_REASON {
                    return Err(malformed(what, "reason too long"));
                }
                Message::Refused {
                    reason: String::from_utf8_lossy(raw).into_owned(),
                }
            }
            ty::FORWARD => Message::Forward {
                stream: b.u32()?,
                packets: b.u32()?,
                max_size: b.u16()?,
                bytes: b.u64()?,
                duration_ns: b.u64()?,
            },
            ty::REVERSE => {
                let stream = b.u32()?;
                let n = b.u32()? as usize;
                if n > MAX_SCHEDULE {
                    return Err(malformed(
                        what,
                        format!("{n} packets, at most {MAX_SCHEDULE}"),
                    ));
                }
                if b.b.len() != n * 6 {
                    return Err(malformed(what, "length does not match the packet count"));
                }
                let mut schedule = Vec::with_capacity(n);
                for _ in 0..n {
                    schedule.push(Scheduled {
                        offset_ns: b.u32()?,
                        size_bytes: b.u16()?,
                    });
                }
                Message::Reverse { stream, schedule }
            }
            ty::READY => Message::Ready { stream: b.u32()? },
            ty::STREAM_SENT => Message::StreamSent { stream: b.u32()? },
            ty::RECORDS => {
                let stream = b.u32()?;
                let kind = match b.u8()? {
                    0 => RecordKind::Receive,
                    1 => RecordKind::Transmit,
                    2 => RecordKind::SendLag,
                    v => return Err(malformed(what, format!("record kind {v}"))),
                };
                let base_ns = b.u64()? as i64;
                let last = b.bool()?;
                let n = b.u32()? as usize;
                if n > RECORDS_PER_FRAME || b.b.len() != n * 8 {
                    return Err(malformed(what, "length does not match the record count"));
                }
                let mut records = Vec::with_capacity(n);
                for _ in 0..n {
                    records.push(Record {
                        position: b.u32()?,
                        offset_ns: b.u32()?,
                    });
                }
                Message::Records {
                    stream,
                    kind,
                    base_ns,
                    last,
                    records,
                }
            }
            ty::CLOSE => Message::Close,
            ty::CREDIT => {
                let len = b.b.len() as u32;
                b.take(len as usize)?;
                Message::Credit { len }
            }
            ty::TRANSFER => Message::Transfer {
                max_bytes: b.u64()?,
                packet_bytes: b.u16()?,
            },
            ty::TRANSFER_READY => Message::TransferReady {
                window_bytes: b.u64()?,
            },
            ty::DELIVERED => Message::Delivered { bytes: b.u64()? },
            ty::TRANSFER_END => Message::TransferEnd {
                bytes: b.u64()?,
                digest: b.take(32)?.try_into().unwrap(),
            },
            ty::TRANSFER_DONE => Message::TransferDone {
                bytes: b.u64()?,
                digest: b.take(32)?.try_into().unwrap(),
            },
            ty::TRANSFER_FROM => Message::TransferFrom {
                max_bytes: b.u64()?,
                packet_bytes: b.u16()?,
                max_rate_bps: b.u64()?,
                raw: b.bool()?,
                seed: b.u64()?,
            },
            ty::TRANSFER_STOP => Message::TransferStop,
            ty::RATE_UPDATE => Message::RateUpdate {
                stream: b.u32()?,
                at_ns: b.u64()?,
                sent_bps: b.u64()?,
                abw_bps: b.u64()?,
                bound: match b.u8()? {
                    v @ 0..=3 => v,
                    v => return Err(malformed(what, format!("bound {v}"))),
                },
                lost: b.u32()?,
                rate_bps: b.u64()?,
            },
            ty::SENDER_TOTALS => Message::SenderTotals {
                sent_bytes: b.u64()?,
                retransmitted_bytes: b.u64()?,
                sent_packets: b.u64()?,
                lost_packets: b.u64()?,
                streams: b.u64()?,
                rtt_min_ns: b.u64()?,
                rtt_median_ns: b.u64()?,
            },
            ty::SOCKET_DROPS => Message::SocketDrops {
                stream: b.u32()?,
                dropped: b.u32()?,
            },
            _ => {
                let n = b.u8()? as usize;
                let mut drops = DropCounters::default();
                for _ in 0..n {
                    let i = b.u8()? as usize;
                    let reason = *DropReason::ALL
                        .get(i)
                        .ok_or_else(|| malformed(what, format!("drop reason {i}")))?;
                    drops.add(reason, b.u64()?);
                }
                Message::Bye { drops }
            }
        };
        b.end()?;
        Ok(m)
    }
}

/// Writes one message as a frame.
pub fn write_message<W: Write>(w: &mut W, m: &Message) -> io::Result<()> {
    let mut out = Vec::with_capacity(64);
    m.emit(&mut out);
    w.write_all(&out)?;
    w.flush()
}

/// Reads one frame (at most [`MAX_FRAME`] bytes, whatever the length
/// prefix claims) and parses it.
pub fn read_message<R: Read>(r: &mut R) -> Result<Message, ControlError> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(ControlError::TooLong(len));
    }
    let mut frame = vec![0u8; len];
    r.read_exact(&mut frame)?;
    Message::parse(&frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_rate_bps: 1_000_000_000,
            max_session_bytes: 50_000_000,
            max_session_ms: 30_000,
            max_stream_packets: 10_000,
            max_packet_bytes: 9_000,
        }
    }

    fn round_trip(m: Message) {
        let mut out = Vec::new();
        m.emit(&mut out);
        let back = read_message(&mut &out[..]).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn every_message_round_trips() {
        let mut drops = DropCounters::default();
        drops.add(DropReason::TooShort, 7);
        drops.add(DropReason::Late, 1);
        for m in [
            Message::Hello {
                version: VERSION,
                wants_key: true,
            },
            Message::Challenge {
                version: VERSION,
                nonce: [9; 32],
                key_required: false,
                limits: limits(),
            },
            Message::Open {
                direction: Direction::Reverse,
                auth: Some([3; 32]),
            },
            Message::Open {
                direction: Direction::Forward,
                auth: None,
            },
            Message::Accepted {
                session: u64::MAX - 1,
                udp_port: 4242,
                authenticated: true,
                limits: limits(),
            },
            Message::Refused {
                reason: "wrong key".into(),
            },
            Message::Forward {
                stream: 3,
                packets: 320,
                max_size: 1472,
                bytes: 471_040,
                duration_ns: 12_345_678,
            },
            Message::Reverse {
                stream: 4,
                schedule: vec![
                    Scheduled {
                        offset_ns: 0,
                        size_bytes: 1472,
                    },
                    Scheduled {
                        offset_ns: 60_000,
                        size_bytes: 100,
                    },
                ],
            },
            Message::Ready { stream: 5 },
            Message::StreamSent { stream: 5 },
            Message::Records {
                stream: 5,
                kind: RecordKind::Transmit,
                base_ns: -12,
                last: true,
                records: vec![
                    Record {
                        position: 0,
                        offset_ns: 0,
                    },
                    Record {
                        position: 2,
                        offset_ns: 99,
                    },
                ],
            },
            Message::Records {
                stream: 5,
                kind: RecordKind::SendLag,
                base_ns: -300,
                last: true,
                records: vec![Record {
                    position: 1,
                    offset_ns: 4_000_000,
                }],
            },
            Message::SocketDrops {
                stream: 7,
                dropped: u32::MAX,
            },
            Message::Close,
            Message::Bye { drops },
            Message::Credit { len: 1000 },
            Message::Open {
                direction: Direction::Transfer,
                auth: None,
            },
            Message::Transfer {
                max_bytes: 200_000_000,
                packet_bytes: 1472,
            },
            Message::TransferReady {
                window_bytes: 8 << 20,
            },
            Message::Delivered { bytes: 123_456 },
            Message::TransferEnd {
                bytes: 5,
                digest: [0xab; 32],
            },
            Message::TransferDone {
                bytes: 5,
                digest: [0xcd; 32],
            },
            Message::Open {
                direction: Direction::TransferReverse,
                auth: None,
            },
            Message::TransferFrom {
                max_bytes: 1 << 40,
                packet_bytes: 8972,
                max_rate_bps: 0,
                raw: true,
                seed: u64::MAX,
            },
            Message::TransferStop,
            Message::RateUpdate {
                stream: 7,
                at_ns: 1_500_000_000,
                sent_bps: 190_000_000,
                abw_bps: 0,
                bound: 3,
                lost: 2,
                rate_bps: 171_000_000,
            },
            Message::SenderTotals {
                sent_bytes: 1,
                retransmitted_bytes: 2,
                sent_packets: 3,
                lost_packets: 4,
                streams: 5,
                rtt_min_ns: 6,
                rtt_median_ns: 7,
            },
        ] {
            round_trip(m);
        }
    }

    #[test]
    fn a_rate_update_with_an_unknown_bound_is_refused() {
        let mut out = Vec::new();
        Message::RateUpdate {
            stream: 1,
            at_ns: 0,
            sent_bps: 0,
            abw_bps: 0,
            bound: 3,
            lost: 0,
            rate_bps: 0,
        }
        .emit(&mut out);
        // type, stream (4), at (8), sent (8), abw (8), then the bound.
        let at = 4 + 1 + 4 + 8 + 8 + 8;
        assert_eq!(out[at], 3);
        out[at] = 4;
        let e = Message::parse(&out[4..]).unwrap_err().to_string();
        assert!(e.contains("RateUpdate") && e.contains("bound 4"), "{e}");
    }

    #[test]
    fn delivered_bytes_by_hand() {
        let mut out = Vec::new();
        Message::Delivered { bytes: 258 }.emit(&mut out);
        assert_eq!(out, [0, 0, 0, 9, 16, 0, 0, 0, 0, 0, 0, 1, 2]);
    }

    #[test]
    fn hello_bytes_by_hand() {
        let mut out = Vec::new();
        Message::Hello {
            version: 1,
            wants_key: false,
        }
        .emit(&mut out);
        // length 8 = type + "TLCP" + version (2) + flag (1)
        assert_eq!(out, [0, 0, 0, 8, 1, b'T', b'L', b'C', b'P', 0, 1, 0]);
    }

    #[test]
    fn records_bytes_by_hand() {
        let mut out = Vec::new();
        Message::Records {
            stream: 1,
            kind: RecordKind::Receive,
            base_ns: 256,
            last: false,
            records: vec![Record {
                position: 2,
                offset_ns: 0x0102_0304,
            }],
        }
        .emit(&mut out);
        let want: Vec<u8> = [
            &[0, 0, 0, 27][..],        // length: 1 + 4 + 1 + 8 + 1 + 4 + 8
            &[10],                     // type Records
            &[0, 0, 0, 1],             // stream
            &[0],                      // receive stamps
            &[0, 0, 0, 0, 0, 0, 1, 0], // base 256
            &[0],                      // not last
            &[0, 0, 0, 1],             // one record
            &[0, 0, 0, 2, 1, 2, 3, 4],
        ]
        .concat();
        assert_eq!(out, want);
    }

    #[test]
    fn bad_frames_are_errors_not_panics() {
        // a length prefix claiming 4 GB is refused before any allocation
        let huge = [0xff, 0xff, 0xff, 0xff, 1];
        assert!(matches!(
            read_message(&mut &huge[..]),
            Err(ControlError::TooLong(_))
        ));
        assert!(matches!(Message::parse(&[]), Err(ControlError::Empty)));
        assert!(matches!(
            Message::parse(&[99]),
            Err(ControlError::UnknownType(99))
        ));
        // Hello with the wrong magic
        assert!(Message::parse(&[1, b'H', b'T', b'T', b'P', 0, 1, 0]).is_err());
        // Records claiming more entries than it carries
        let mut out = Vec::new();
        Message::Records {
            stream: 1,
            kind: RecordKind::Receive,
            base_ns: 0,
            last: true,
            records: vec![],
        }
        .emit(&mut out);
        out[4 + 15..4 + 19].copy_from_slice(&5u32.to_be_bytes());
        assert!(Message::parse(&out[4..]).is_err());
        // trailing bytes
        assert!(Message::parse(&[ty::READY, 0, 0, 0, 1, 0]).is_err());
        // truncated stream reads end cleanly
        assert!(read_message(&mut &[0u8, 0, 0, 9, 1][..]).is_err());
    }
}
