//! A channel whose far end is a second UDP socket on this host: real
//! packets through the kernel's loopback path, kernel receive timestamps,
//! no peer needed. Both ends stamp on CLOCK_REALTIME. Loopback has no
//! link rate: streams measure this host's pacing and stamping, which is
//! what `doctor` and the CI tests want from it.
//!
//! Rates are counted on the UDP payload (`size_bytes` of a request is the
//! payload size, at least the 48-byte probe header).

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tightlink_core::{ProbePacket, ProbeStream};
use tightlink_probe::channel::{ChannelError, Probed};
use tightlink_probe::{Channel, StreamRequest};
use tightlink_wire::twamp::{ProbeRepr, SenderPacket};
use tightlink_wire::{DropCounters, DropReason, ErrorEstimate, NtpTimestamp};

use crate::clock;
use crate::udp::{send_paced, ProbeSocket};

/// How long after the last send the receiver waits for stragglers.
const DRAIN_NS: i64 = 50_000_000;
/// Gap between the throw-away warm-up packet and the train (the first
/// send of a train is slow: it wakes the receiving side).
const WARMUP_LEAD_NS: i64 = 100_000;

pub struct LoopbackChannel {
    tx: ProbeSocket,
    rx: ProbeSocket,
    dest: SocketAddr,
    session: u64,
    next_stream: u32,
    sequence: u32,
    elapsed_ns: f64,
    max_rate_bps: f64,
    /// Packets the receiving end did not use, by reason.
    pub drops: DropCounters,
    /// Worst lateness of a paced send so far, ns.
    pub worst_send_late_ns: i64,
}

impl LoopbackChannel {
    /// `max_rate_bps`: the highest rate strategies may ask for (loopback
    /// itself has none; the host's pacing limit applies).
    pub fn new(max_rate_bps: f64) -> std::io::Result<Self> {
        let any = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
        let rx = ProbeSocket::bind(any, 8 << 20)?;
        let tx = ProbeSocket::bind(any, 1 << 20)?;
        let dest = rx.local_addr()?;
        Ok(LoopbackChannel {
            tx,
            rx,
            dest,
            session: (clock::realtime_ns() as u64) ^ 0x746c_6e6b,
            next_stream: 0,
            sequence: 0,
            elapsed_ns: 0.0,
            max_rate_bps,
            drops: DropCounters::default(),
            worst_send_late_ns: 0,
        })
    }

    /// The receiving socket (tests aim foreign packets at it).
    pub fn receiver_addr(&self) -> SocketAddr {
        self.dest
    }

    fn packet(
        &mut self,
        stream: u32,
        position: u32,
        len: u32,
        offset_ns: i64,
        size: u32,
        warmup: bool,
    ) -> Vec<u8> {
        let mut buf = vec![0u8; (size as usize).max(ProbeRepr::buffer_len())];
        let repr = ProbeRepr {
            sequence: self.sequence,
            timestamp: NtpTimestamp::default(),
            error_estimate: ErrorEstimate::from_ns(1_000, false),
            warmup,
            session: self.session,
            stream,
            position,
            stream_len: len,
            offset_ns: offset_ns.max(0) as u64,
        };
        self.sequence = self.sequence.wrapping_add(1);
        repr.emit(&mut SenderPacket::new_unchecked(&mut buf[..]));
        buf
    }
}

impl Channel for LoopbackChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let n = request.offsets_ns.len();
        let stream = self.next_stream;
        self.next_stream += 1;
        if let Some(&s) = request
            .sizes
            .iter()
            .find(|&&s| (s as usize) < ProbeRepr::buffer_len())
        {
            return Err(ChannelError::Io(format!(
                "probe size {s} bytes: UDP probes carry a {}-byte header",
                ProbeRepr::buffer_len()
            )));
        }
        let warm = self.packet(stream, 0, n as u32, 0, ProbeRepr::buffer_len() as u32, true);
        let packets: Vec<Vec<u8>> = (0..n)
            .map(|i| {
                self.packet(
                    stream,
                    i as u32,
                    n as u32,
                    request.offsets_ns[i],
                    request.sizes[i],
                    false,
                )
            })
            .collect();
        let io = |what: &str, e: std::io::Error| ChannelError::Io(format!("loopback {what}: {e}"));
        let mut recv_ns: Vec<Option<i64>> = vec![None; n];
        let session = self.session;
        let mut drops = DropCounters::default();
        let (tx, rx, dest) = (&self.tx, &self.rx, self.dest);
        let t0 = clock::monotonic_ns();
        let (sent, received) = std::thread::scope(|scope| {
            let receiver = scope.spawn(|| -> std::io::Result<()> {
                let mut buf = vec![0u8; 65_536];
                let mut got = 0;
                let mut idle_since = clock::monotonic_ns();
                while got < n {
                    let Some(r) = rx.recv_stamped(&mut buf, Duration::from_millis(5))? else {
                        if clock::monotonic_ns() - idle_since > DRAIN_NS + 1_000_000_000 {
                            break;
                        }
                        continue;
                    };
                    idle_since = clock::monotonic_ns();
                    let view = match SenderPacket::new_checked(&buf[..r.len]) {
                        Ok(v) => v,
                        Err(reason) => {
                            drops.count(reason);
                            continue;
                        }
                    };
                    let p = match ProbeRepr::parse(&view) {
                        Ok(p) => p,
                        Err(reason) => {
                            drops.count(reason);
                            continue;
                        }
                    };
                    if p.session != session {
                        drops.count(DropReason::UnknownSession);
                    } else if p.warmup {
                        continue;
                    } else if p.stream != stream {
                        drops.count(DropReason::Late);
                    } else if p.stream_len as usize != n || recv_ns[p.position as usize].is_some() {
                        drops.count(DropReason::Malformed);
                    } else if let Some(k) = r.kernel_ns {
                        recv_ns[p.position as usize] = Some(k);
                        got += 1;
                    } else {
                        return Err(std::io::Error::other(
                            "the kernel gave no receive timestamp (SO_TIMESTAMPNS)",
                        ));
                    }
                }
                Ok(())
            });
            let sent = (|| {
                tx.send_to(&warm, dest)?;
                send_paced(tx, dest, &packets, &request.offsets_ns, t0 + WARMUP_LEAD_NS)
            })();
            let received = receiver.join().expect("the receive loop does not panic");
            (sent, received)
        });
        received.map_err(|e| io("receive", e))?;
        let (sent, worst_late) = sent.map_err(|e| io("send", e))?;
        self.worst_send_late_ns = self.worst_send_late_ns.max(worst_late);
        self.drops.merge(&drops);
        if let (Some(a), Some(b)) = (sent.first(), sent.last()) {
            self.elapsed_ns += (b - a) as f64;
        }
        let packets = (0..n)
            .map(|i| ProbePacket {
                size_bytes: request.sizes[i],
                send_ns: sent[i],
                recv_ns: recv_ns[i],
            })
            .collect();
        Ok(Probed {
            stream: ProbeStream::new(stream as u64, packets),
            truth: None,
        })
    }

    fn max_rate_bps(&self) -> f64 {
        self.max_rate_bps
    }

    fn elapsed_ns(&self) -> f64 {
        self.elapsed_ns
    }

    fn describe(&self) -> String {
        format!("loopback {}", self.dest)
    }
}
