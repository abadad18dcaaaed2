//! The server's side of a transfer session: for a transfer from the
//! client, the receiving end (`receive`) behind the session's
//! checks; for `transfer -R`, the sending end (`send`) toward
//! the address the client's data socket spoke from.
//!
//! Bounded like every session: the reassembly window (8 MB without a key,
//! 64 MB with one) and [`MAX_OPEN_STREAMS`](super::reassembly::MAX_OPEN_STREAMS)
//! streams of stamps; the session's byte, rate and time limits; the idle
//! timeout on UDP and control alike. A reverse transfer needs no key:
//! the server sends only to the address the client sent from, over the
//! client's own TCP connection's IP, and never more than the window past
//! what the client has acknowledged (as TCP does; a client that
//! acknowledges bytes it never got harms only its own link).

use std::io::BufWriter;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::time::Duration;

use tightlink_core::rapid::RapidEstimator;

use super::pacer::SendCc;
use tightlink_sys::sockopt;
use tightlink_wire::control::{write_message, Limits, Message, TransferFrom};
use tightlink_wire::data::HEADER_LEN;
use tightlink_wire::DropCounters;

use super::reassembly::Reassembly;
use super::receive::{self, RecvEnd, RecvEvent};
use super::send::{self, SendPlan};
use crate::clock;
use crate::receiver::{absorb, Collected, Expect};
use crate::udp::ProbeSocket;

/// Reassembly window without a key and with one.
pub const OPEN_WINDOW_BYTES: u64 = 8 << 20;
pub const KEYED_WINDOW_BYTES: u64 = 64 << 20;

pub use super::receive::ServeEnd;

/// What a finished transfer session moved.
#[derive(Debug, Default)]
pub struct Served {
    pub bytes: u64,
    pub packets: u64,
    pub streams: u32,
    pub digest_ok: bool,
    pub drops: DropCounters,
}

pub struct Session<'a> {
    pub conn: &'a TcpStream,
    pub session_id: u64,
    pub peer: SocketAddr,
    pub limits: Limits,
    pub authenticated: bool,
    /// Monotonic ns when the session's time is up.
    pub session_end_ns: i64,
    pub idle_timeout: Duration,
}

impl Session<'_> {
    /// Checks a transfer's size and packet size against the limits; the
    /// window the receiver will hold.
    fn admit(&self, max_bytes: u64, packet_bytes: u16) -> Result<u64, ServeEnd> {
        if max_bytes > self.limits.max_session_bytes {
            return Err(ServeEnd::Refuse(format!(
                "transfer of {max_bytes} bytes exceeds the session's limit of {} bytes{}",
                self.limits.max_session_bytes,
                if self.authenticated {
                    ""
                } else {
                    " (without a key)"
                }
            )));
        }
        if (packet_bytes as usize) <= HEADER_LEN || packet_bytes > self.limits.max_packet_bytes {
            return Err(ServeEnd::Refuse(format!(
                "data packets of {packet_bytes} bytes; the limit is {}-{}",
                HEADER_LEN + 1,
                self.limits.max_packet_bytes
            )));
        }
        Ok(if self.authenticated {
            KEYED_WINDOW_BYTES
        } else {
            OPEN_WINDOW_BYTES
        }
        .min(max_bytes.max(1)))
    }
}

/// Runs the transfer the client announced with `Transfer`, through its
/// `TransferEnd` and the server's `TransferDone`.
pub fn receive(
    s: &Session,
    sock: &ProbeSocket,
    w: &mut BufWriter<&TcpStream>,
    max_bytes: u64,
    packet_bytes: u16,
) -> Result<Served, ServeEnd> {
    let window = s.admit(max_bytes, packet_bytes)?;
    write_message(
        w,
        &Message::TransferReady {
            window_bytes: window,
        },
    )?;
    let mut re = Reassembly::new(max_bytes, window);
    let end = RecvEnd {
        conn: s.conn,
        sock,
        session_id: s.session_id,
        peer_ip: s.peer.ip(),
        peer_port: None,
        max_stream_packets: s.limits.max_stream_packets,
        end_ns: Some((s.session_end_ns, s.limits.max_session_ms)),
        idle_ns: s.idle_timeout.as_nanos() as i64,
        stop_at_ns: None,
    };
    let got = receive::receive(&end, w, &mut re, &mut |ev| match ev {
        RecvEvent::Tick(_) => Ok(()),
        RecvEvent::Message(m) => Err(ServeEnd::Refuse(
            format!("unexpected message mid-transfer: {m:?}")
                .chars()
                .take(200)
                .collect(),
        )),
    })?;
    Ok(Served {
        bytes: got.bytes,
        packets: got.packets,
        streams: got.streams,
        digest_ok: got.digest_ok(),
        drops: got.drops,
    })
}

/// Runs a reverse transfer: waits (up to a second) for a UDP packet of
/// this session from the client's IP, whose address the data goes to,
/// then sends as the client asked within the session's limits, through
/// the client's `TransferDone`. `seen` holds what the socket already
/// took from the client.
pub fn send(
    s: &Session,
    sock: &mut ProbeSocket,
    seen: &mut Collected,
    w: &mut BufWriter<&TcpStream>,
    ask: &TransferFrom,
) -> Result<Served, ServeEnd> {
    let window = s.admit(ask.max_bytes, ask.packet_bytes)?;
    let until = clock::monotonic_ns() + 1_000_000_000;
    let client = loop {
        let expect = Expect {
            session: s.session_id,
            stream: u32::MAX,
            packets: 0,
            max_size: s.limits.max_packet_bytes as usize,
            peer_ip: s.peer.ip(),
            peer_port: seen.peer.map(|p| p.port()),
        };
        absorb(sock, &expect, seen)?;
        if let Some(c) = seen.peer {
            break c;
        }
        if clock::monotonic_ns() > until {
            return Err(ServeEnd::Refuse(
                "no UDP packet of this session arrived from the client's address within 1 s: the server sends only where the client has sent from".into(),
            ));
        }
        sockopt::wait_fd(sock.fd(), libc::POLLIN, 5)?;
    };
    // No transmit stamps: nothing reads them, and they would fill the
    // socket's error queue.
    sock.stop_tx_stamps()?;
    write_message(
        w,
        &Message::TransferReady {
            window_bytes: window,
        },
    )?;
    let overhead: u32 = if client.is_ipv4() { 42 } else { 62 };
    let payload = ask.packet_bytes as u32;
    let host_limit_bps =
        crate::host::pacing_limit_bps(crate::backend::Backend::Udp, payload, payload + overhead);
    let limit = s.limits.max_rate_bps as f64;
    let asked = if ask.max_rate_bps == 0 {
        f64::INFINITY
    } else {
        ask.max_rate_bps as f64
    };
    let plan = SendPlan {
        session: s.session_id,
        payload,
        frame_bytes: payload + overhead,
        window,
        max_bps: limit.min(asked).min(host_limit_bps),
        cc: SendCc::Rapid(if ask.raw {
            RapidEstimator::Raw
        } else {
            RapidEstimator::Bass
        }),
        bytes: Some(ask.max_bytes),
        seed: ask.seed,
        stop_at_ns: None,
        end_ns: Some(s.session_end_ns),
        timeout_ns: s.idle_timeout.as_nanos() as i64,
        interval_ns: 1_000_000_000,
        tell_receiver: true,
    };
    let mut r = s.conn;
    let fd = s.conn.as_raw_fd();
    let sent = send::send(
        &mut r,
        w,
        fd,
        &plan,
        &mut |b| {
            sock.send_to(b, client)
                .map(|_| ())
                .map_err(|e| super::progress::err(format!("data socket: {e}")))
        },
        &mut |_| {},
    )
    .map_err(|e| ServeEnd::Fail(e.to_string()))?;
    Ok(Served {
        bytes: sent.bytes,
        packets: sent.sent_packets,
        streams: sent.streams as u32,
        digest_ok: true,
        drops: DropCounters::default(),
    })
}
