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
//!                                          | Busy {retry_after_ms, reason}
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
/// Version 5 of this protocol (a server with no session slot free says
/// when one will be, [`Message::Busy`]; version 4: a forward stream's
/// records are followed by the server socket's drops over the stream,
/// [`Message::SocketDrops`];
/// version 3's reverse stream records added how late the server's send
/// calls were, [`RecordKind::SendLag`]; version 2
/// gave its kernel transmit stamps only; version 1 sent the probes in the
/// RFC 5357 padding instead of the STAMP layout of [`crate::twamp`]); a
/// server refuses any other.
pub const VERSION: u16 = 5;
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
    fn malformed(&self, reason: impl Into<String>) -> ControlError {
        malformed(self.what, reason)
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

/// How a rate update's available-bandwidth reading is bounded (the
/// analysis's `Bound`, which the wire crate does not depend on).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateBound {
    Exact,
    AtLeast,
    AtMost,
    None,
}

/// Reverse transfer: the server sends at most `max_bytes` in packets of at
/// most `packet_bytes` (UDP payload), never faster than `max_rate_bps`
/// (0: the session's limit), its controller reading streams with BASS
/// smoothing or without (`raw`); the bytes are the sequence `seed` gives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransferFrom {
    pub max_bytes: u64,
    pub packet_bytes: u16,
    pub max_rate_bps: u64,
    pub raw: bool,
    pub seed: u64,
}

/// Reverse transfer: what the server's controller read from one stream's
/// stamps and the rate it set (bit/s; `abw_bps` 0: none; `at_ns` since the
/// transfer began).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateUpdate {
    pub stream: u32,
    pub at_ns: u64,
    pub sent_bps: u64,
    pub abw_bps: u64,
    pub bound: RateBound,
    pub lost: u32,
    pub rate_bps: u64,
}

/// Reverse transfer: the sender's counts, before `TransferEnd` (RTTs in
/// ns, 0: none measured).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SenderTotals {
    pub sent_bytes: u64,
    pub retransmitted_bytes: u64,
    pub sent_packets: u64,
    pub lost_packets: u64,
    pub streams: u64,
    pub rtt_min_ns: u64,
    pub rtt_median_ns: u64,
}

/// `Credit`'s padding: `len` zero bytes, the rest of the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Padding {
    pub len: u32,
}

/// A value with one encoding in a control frame's body: every field of
/// every message is written and read through this, so a message's layout
/// is the order of its fields and nothing else.
trait Field: Sized {
    fn put(&self, out: &mut Vec<u8>);
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError>;
}

macro_rules! be_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn put(&self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_be_bytes());
            }
            fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
                Ok(<$t>::from_be_bytes(b.take(size_of::<$t>())?.try_into().unwrap()))
            }
        }
    )*};
}
be_field!(u8, u16, u32, u64, i64);

impl Field for bool {
    fn put(&self, out: &mut Vec<u8>) {
        out.push(*self as u8);
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        match u8::get(b)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(b.malformed(format!("flag byte {v} is not 0 or 1"))),
        }
    }
}

impl Field for [u8; 32] {
    fn put(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self);
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        Ok(b.take(32)?.try_into().unwrap())
    }
}

/// A flag byte, then the value if the flag is set.
impl Field for Option<[u8; 32]> {
    fn put(&self, out: &mut Vec<u8>) {
        self.is_some().put(out);
        if let Some(v) = self {
            v.put(out);
        }
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        Ok(if bool::get(b)? {
            Some(Field::get(b)?)
        } else {
            None
        })
    }
}

/// An enum carried as one byte, its variants numbered in the order given.
macro_rules! byte_enum {
    ($t:ident, $noun:literal, [$($v:ident),*]) => {
        impl Field for $t {
            fn put(&self, out: &mut Vec<u8>) {
                const ALL: &[$t] = &[$($t::$v),*];
                out.push(ALL.iter().position(|v| v == self).unwrap() as u8);
            }
            fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
                const ALL: &[$t] = &[$($t::$v),*];
                let v = u8::get(b)?;
                ALL.get(v as usize)
                    .copied()
                    .ok_or_else(|| b.malformed(format!(concat!($noun, " {}"), v)))
            }
        }
    };
}
byte_enum!(
    Direction,
    "direction",
    [Forward, Reverse, Transfer, TransferReverse]
);
byte_enum!(RecordKind, "record kind", [Receive, Transmit, SendLag]);
byte_enum!(RateBound, "bound", [Exact, AtLeast, AtMost, None]);

/// A struct carried as its fields in the order given.
macro_rules! struct_field {
    ($t:ident { $($f:ident),* $(,)? }) => {
        impl Field for $t {
            fn put(&self, out: &mut Vec<u8>) {
                $(self.$f.put(out);)*
            }
            fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
                Ok($t { $($f: Field::get(b)?),* })
            }
        }
    };
}
struct_field!(Limits {
    max_rate_bps,
    max_session_bytes,
    max_session_ms,
    max_stream_packets,
    max_packet_bytes,
});
struct_field!(Scheduled {
    offset_ns,
    size_bytes
});
struct_field!(Record {
    position,
    offset_ns
});
struct_field!(TransferFrom {
    max_bytes,
    packet_bytes,
    max_rate_bps,
    raw,
    seed,
});
struct_field!(RateUpdate {
    stream,
    at_ns,
    sent_bps,
    abw_bps,
    bound,
    lost,
    rate_bps,
});
struct_field!(SenderTotals {
    sent_bytes,
    retransmitted_bytes,
    sent_packets,
    lost_packets,
    streams,
    rtt_min_ns,
    rtt_median_ns,
});

/// The rest of the frame: a `u32` count, then that many fixed-size items
/// and nothing after them.
fn put_counted<T: Field>(items: &[T], max: usize, out: &mut Vec<u8>) {
    assert!(items.len() <= max, "more items than one frame holds");
    (items.len() as u32).put(out);
    for i in items {
        i.put(out);
    }
}

fn get_counted<T: Field>(
    b: &mut Body<'_>,
    max: usize,
    item_bytes: usize,
    noun: &str,
) -> Result<Vec<T>, ControlError> {
    let n = u32::get(b)? as usize;
    if n > max {
        return Err(b.malformed(format!("{n} {noun}s, at most {max}")));
    }
    if b.b.len() != n * item_bytes {
        return Err(b.malformed(format!("length does not match the {noun} count")));
    }
    (0..n).map(|_| T::get(b)).collect()
}

impl Field for Vec<Scheduled> {
    fn put(&self, out: &mut Vec<u8>) {
        put_counted(self, MAX_SCHEDULE, out);
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        get_counted(b, MAX_SCHEDULE, 6, "packet")
    }
}

impl Field for Vec<Record> {
    fn put(&self, out: &mut Vec<u8>) {
        put_counted(self, RECORDS_PER_FRAME, out);
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        get_counted(b, RECORDS_PER_FRAME, 8, "record")
    }
}

/// `Refused`'s reason: the rest of the frame as UTF-8, at most
/// [`MAX_REASON`] bytes (a longer one is cut at a character boundary).
impl Field for String {
    fn put(&self, out: &mut Vec<u8>) {
        let mut end = self.len().min(MAX_REASON);
        while !self.is_char_boundary(end) {
            end -= 1;
        }
        out.extend_from_slice(&self.as_bytes()[..end]);
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        let raw = b.take(b.b.len())?;
        if raw.len() > MAX_REASON {
            return Err(b.malformed("reason too long"));
        }
        Ok(String::from_utf8_lossy(raw).into_owned())
    }
}

impl Field for Padding {
    fn put(&self, out: &mut Vec<u8>) {
        assert!(self.len <= MAX_CREDIT, "credit over one frame");
        out.resize(out.len() + self.len as usize, 0);
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        let len = b.b.len();
        b.take(len)?;
        Ok(Padding { len: len as u32 })
    }
}

/// A count of the reasons with drops, then each reason's index and count.
impl Field for DropCounters {
    fn put(&self, out: &mut Vec<u8>) {
        let nonzero: Vec<_> = DropReason::ALL
            .iter()
            .enumerate()
            .filter(|(_, r)| self.get(**r) > 0)
            .collect();
        (nonzero.len() as u8).put(out);
        for (i, r) in nonzero {
            (i as u8).put(out);
            self.get(*r).put(out);
        }
    }
    fn get(b: &mut Body<'_>) -> Result<Self, ControlError> {
        let n = u8::get(b)?;
        let mut drops = DropCounters::default();
        for _ in 0..n {
            let i = u8::get(b)? as usize;
            let reason = *DropReason::ALL
                .get(i)
                .ok_or_else(|| b.malformed(format!("drop reason {i}")))?;
            drops.add(reason, u64::get(b)?);
        }
        Ok(drops)
    }
}

/// Its first argument: binds a name inside a repetition that another
/// fragment drives.
macro_rules! first {
    ($a:tt, $($_:tt)*) => {
        $a
    };
}

/// The message table: each message's type byte, an optional fixed prefix,
/// and its fields (in the order they are carried) or the one struct that
/// holds them. The enum, [`Message::emit`] and [`Message::parse`] come
/// from it, so a message's layout is written once.
macro_rules! messages {
    ($(
        $(#[$doc:meta])*
        $code:literal $variant:ident
        $([$prefix:expr, $prefix_error:literal])?
        $({ $($f:ident: $t:ty),* $(,)? })?
        $(($repr:ty))?
    ),* $(,)?) => {
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub enum Message {
            $($(#[$doc])* $variant $({ $($f: $t),* })? $(($repr))?,)*
        }

        impl Message {
            /// The type byte and the name errors give.
            fn kind(&self) -> (u8, &'static str) {
                match self {
                    $(Message::$variant { .. } => ($code, stringify!($variant)),)*
                }
            }

            fn name_of(code: u8) -> Option<&'static str> {
                match code {
                    $($code => Some(stringify!($variant)),)*
                    _ => None,
                }
            }

            fn put_body(&self, out: &mut Vec<u8>) {
                match self {
                    $(Message::$variant $({ $($f),* })? $((first!(r, $repr)))? => {
                        $(out.extend_from_slice(&$prefix);)?
                        $($($f.put(out);)*)?
                        $(<$repr as Field>::put(first!(r, $repr), out);)?
                    })*
                }
            }

            fn get_body(code: u8, b: &mut Body<'_>) -> Result<Message, ControlError> {
                Ok(match code {
                    $($code => {
                        $(if b.take($prefix.len())? != $prefix {
                            return Err(b.malformed($prefix_error));
                        })?
                        Message::$variant
                            $({ $($f: <$t as Field>::get(b)?),* })?
                            $((<$repr as Field>::get(b)?))?
                    })*
                    other => return Err(ControlError::UnknownType(other)),
                })
            }
        }
    };
}

messages! {
    1 Hello [MAGIC, "not a tightlink control connection"] { version: u16, wants_key: bool },
    2 Challenge { version: u16, nonce: [u8; 32], key_required: bool, limits: Limits },
    3 Open { direction: Direction, auth: Option<[u8; 32]> },
    4 Accepted { session: u64, udp_port: u16, authenticated: bool, limits: Limits },
    5 Refused { reason: String },
    /// The client will send `packets` UDP probes of at most `max_size`
    /// payload bytes, `bytes` in all, over `duration_ns`.
    6 Forward { stream: u32, packets: u32, max_size: u16, bytes: u64, duration_ns: u64 },
    /// The client asks the server to send this schedule to it.
    7 Reverse { stream: u32, schedule: Vec<Scheduled> },
    8 Ready { stream: u32 },
    9 StreamSent { stream: u32 },
    10 Records { stream: u32, kind: RecordKind, base_ns: i64, last: bool, records: Vec<Record> },
    11 Close,
    12 Bye { drops: DropCounters },
    /// Zeros: credit for an unauthenticated reverse session, which gets
    /// no more UDP bytes than it sent (TCP, so credit is never lost on a
    /// narrow upload path).
    13 Credit { padding: Padding },
    /// The client will send at most `max_bytes` of data in packets of at
    /// most `packet_bytes` (UDP payload).
    14 Transfer { max_bytes: u64, packet_bytes: u16 },
    /// The server takes data up to `window_bytes` past what it has
    /// delivered in order.
    15 TransferReady { window_bytes: u64 },
    /// Bytes the server holds in order from the start.
    16 Delivered { bytes: u64 },
    /// The client has sent everything: its length and SHA-256.
    17 TransferEnd { bytes: u64, digest: [u8; 32] },
    /// What the receiver holds: its length and SHA-256.
    18 TransferDone { bytes: u64, digest: [u8; 32] },
    19 TransferFrom(TransferFrom),
    /// The receiver's time is up: offer no more bytes, finish those
    /// offered.
    20 TransferStop,
    21 RateUpdate(RateUpdate),
    22 SenderTotals(SenderTotals),
    /// Datagrams the server's probe socket dropped (its receive buffer
    /// full) while `stream` came in: probes the server's host lost, which
    /// the records show as lost.
    23 SocketDrops { stream: u32, dropped: u32 },
    /// No session slot is free: one is sure to be within
    /// `retry_after_ms` (a session's time limit); the connection closes.
    24 Busy { retry_after_ms: u32, reason: String },
}

impl Message {
    /// Appends the whole frame (length, type, body) to `out`. Panics only
    /// on a message that breaks this module's own size limits (a caller
    /// bug: `Records` over [`RECORDS_PER_FRAME`], a schedule over
    /// [`MAX_SCHEDULE`], credit over [`MAX_CREDIT`]).
    pub fn emit(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&[0; 4]);
        out.push(self.kind().0);
        self.put_body(out);
        let len = (out.len() - start - 4) as u32;
        out[start..start + 4].copy_from_slice(&len.to_be_bytes());
    }

    /// The message's name, as errors give it.
    pub fn name(&self) -> &'static str {
        self.kind().1
    }

    /// Parses one frame's type and body (the length prefix removed).
    pub fn parse(frame: &[u8]) -> Result<Message, ControlError> {
        let (&code, body) = frame.split_first().ok_or(ControlError::Empty)?;
        let what = Message::name_of(code).ok_or(ControlError::UnknownType(code))?;
        let mut b = Body { what, b: body };
        let m = Message::get_body(code, &mut b)?;
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

    /// One of every message, some twice with other field values.
    fn samples() -> Vec<Message> {
        let mut drops = DropCounters::default();
        drops.add(DropReason::TooShort, 7);
        drops.add(DropReason::Late, 1);
        vec![
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
            Message::Busy {
                retry_after_ms: 29_500,
                reason: "server busy: session limit reached".into(),
            },
            Message::Close,
            Message::Bye { drops },
            Message::Credit {
                padding: Padding { len: 1000 },
            },
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
            Message::TransferFrom(TransferFrom {
                max_bytes: 1 << 40,
                packet_bytes: 8972,
                max_rate_bps: 0,
                raw: true,
                seed: u64::MAX,
            }),
            Message::TransferStop,
            Message::RateUpdate(RateUpdate {
                stream: 7,
                at_ns: 1_500_000_000,
                sent_bps: 190_000_000,
                abw_bps: 0,
                bound: RateBound::None,
                lost: 2,
                rate_bps: 171_000_000,
            }),
            Message::SenderTotals(SenderTotals {
                sent_bytes: 1,
                retransmitted_bytes: 2,
                sent_packets: 3,
                lost_packets: 4,
                streams: 5,
                rtt_min_ns: 6,
                rtt_median_ns: 7,
            }),
        ]
    }

    #[test]
    fn every_message_round_trips() {
        let all = samples();
        let mut codes: Vec<u8> = all.iter().map(|m| m.kind().0).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(
            codes,
            (1..=24).collect::<Vec<u8>>(),
            "a message type has no sample"
        );
        for m in all {
            round_trip(m);
        }
    }

    #[test]
    fn every_cut_or_padded_frame_is_an_error() {
        for m in samples() {
            let mut out = Vec::new();
            m.emit(&mut out);
            let frame = &out[4..];
            // Refused, Busy, Credit and Bye (with no drops) read to the
            // end of the frame, so a shorter body is another valid message
            // (Busy once its retry time is whole).
            let reads_to_end = matches!(
                m,
                Message::Refused { .. }
                    | Message::Busy { .. }
                    | Message::Credit { .. }
                    | Message::Close
            );
            for cut in 1..frame.len() {
                let r = Message::parse(&frame[..cut]);
                if !reads_to_end {
                    assert!(r.is_err(), "{} cut to {cut} bytes parsed: {r:?}", m.name());
                }
            }
            let mut longer = frame.to_vec();
            longer.push(0);
            if !reads_to_end {
                let e = Message::parse(&longer).unwrap_err().to_string();
                assert!(e.contains(m.name()), "{e}");
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]
        /// Whatever the bytes, a frame parses or is an error, and what
        /// parses emits a frame that parses to the same message.
        #[test]
        fn any_frame_parses_to_a_fixpoint_or_errs(
            code in 0u8..=25,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64),
        ) {
            let mut frame = vec![code];
            frame.extend_from_slice(&body);
            if let Ok(m) = Message::parse(&frame) {
                let mut out = Vec::new();
                m.emit(&mut out);
                proptest::prop_assert_eq!(Message::parse(&out[4..]).unwrap(), m.clone());
                // Only a lossy reason, a drop list or padding (whose bytes
                // are not read) re-encodes differently.
                if !matches!(
                    m,
                    Message::Refused { .. }
                        | Message::Busy { .. }
                        | Message::Bye { .. }
                        | Message::Credit { .. }
                ) {
                    proptest::prop_assert_eq!(&out[4..], &frame[..]);
                }
            }
        }
    }

    #[test]
    fn a_rate_update_with_an_unknown_bound_is_refused() {
        let mut out = Vec::new();
        Message::RateUpdate(RateUpdate {
            stream: 1,
            at_ns: 0,
            sent_bps: 0,
            abw_bps: 0,
            bound: RateBound::None,
            lost: 0,
            rate_bps: 0,
        })
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
        assert!(Message::parse(&[8, 0, 0, 0, 1, 0]).is_err());
        // truncated stream reads end cleanly
        assert!(read_message(&mut &[0u8, 0, 0, 9, 1][..]).is_err());
    }
}
