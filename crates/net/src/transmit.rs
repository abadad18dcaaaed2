//! The kinds of sending path (UDP socket, AF_PACKET, AF_XDP) and what
//! each end of one does: hand one payload to the kernel now, take
//! received probes in batches. The backends and the UDP socket implement
//! them.

use std::io;
use std::os::fd::RawFd;

use crate::stamps::{Received, TxStamp, BATCH, HEADER_COPY};

/// Which path probe packets take through the sending host's kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Backend {
    /// A UDP socket (the whole IP stack).
    #[default]
    Udp,
    /// An AF_PACKET socket: frames with headers built in advance, past
    /// the IP stack but through the qdisc; a TPACKET_V3 ring to receive.
    Packet,
    /// An AF_XDP socket in copy mode: frames into a UMEM, past the IP
    /// stack and the qdisc; send only.
    Xdp,
}

impl Backend {
    pub const ALL: [Backend; 3] = [Backend::Udp, Backend::Packet, Backend::Xdp];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Udp => "udp",
            Backend::Packet => "packet",
            Backend::Xdp => "xdp",
        }
    }

    /// Whether this backend can receive a probe stream (reverse mode).
    pub fn receives(self) -> bool {
        !matches!(self, Backend::Xdp)
    }
}

/// A name no backend answers to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown backend '{0}' (udp, packet or xdp)")]
pub struct UnknownBackend(pub String);

impl std::str::FromStr for Backend {
    type Err = UnknownBackend;
    fn from_str(s: &str) -> Result<Self, UnknownBackend> {
        Backend::ALL
            .into_iter()
            .find(|b| b.name() == s)
            .ok_or_else(|| UnknownBackend(s.to_string()))
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The last step of sending: one UDP payload handed to the kernel now.
pub trait Transmit {
    fn backend(&self) -> Backend;
    /// Sends `payload` as one datagram to the peer. Returns the id its
    /// kernel transmit stamp will carry, or `None` where this backend gets
    /// no stamps. A full queue is waited out, never dropped.
    fn send_now(&mut self, payload: &[u8]) -> io::Result<Option<u32>>;
    /// Takes waiting transmit stamps without blocking.
    fn drain_tx_stamps(&mut self, out: &mut Vec<TxStamp>) -> io::Result<()>;
}

/// Where received probes come from: a UDP socket or a packet ring.
pub trait ProbeSource {
    /// Polled for `POLLIN` before [`ProbeSource::recv_batch`].
    fn fd(&self) -> RawFd;
    /// Takes up to [`BATCH`] datagrams without waiting; `headers[k]` gets
    /// the first [`HEADER_COPY`] bytes of datagram `k`'s UDP payload.
    /// `None` marks a datagram whose sender cannot be read.
    fn recv_batch(
        &mut self,
        headers: &mut [[u8; HEADER_COPY]; BATCH],
        out: &mut [Option<Received>; BATCH],
    ) -> io::Result<usize>;
}
