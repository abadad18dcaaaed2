//! Send and receive backends behind the one channel (the
//! \[CLOUD\]'s four methods, section III and Tables 1-2):
//!
//! | `--backend` | sends with                      | receives with              | paper row  |
//! |-------------|---------------------------------|----------------------------|------------|
//! | `udp`       | `send` on a UDP socket          | `recvmmsg`, kernel stamps  | nativeUDP  |
//! | `packet`    | AF_PACKET, headers built ahead  | TPACKET_V3 ring, kernel stamps | LibPcap |
//! | `xdp`       | AF_XDP TX ring (copy mode)      | (not here: see below)      | kernel bypass (Netmap/DPDK) |
//!
//! Every backend paces with the same busy-wait loop ([`send_paced`]) and
//! reports the same [`Departures`]; only the last step (hand one packet to
//! the kernel) and where transmit stamps come from differ. The UDP socket
//! stays bound under every backend: it owns the port the raw backends
//! write into their headers and keeps the kernel from answering the peer
//! with port-unreachable.
//!
//! Limits, measured here (kernel 6.18, veth, no NIC offers zero-copy or
//! hardware stamps): AF_XDP gives no per-packet kernel stamps and its
//! transmit path skips the qdisc, so an `xdp` sender cannot see its own
//! shaped link; receiving over AF_XDP needs an XDP program and would stamp
//! in user space after batching (the paper's Netmap receive row), so
//! `xdp` receives nothing here: reverse mode with `--backend xdp` is an
//! error that says so.

use std::io;
use std::time::Duration;
use tightlink_core::warning::{Warning, WarningCode};

use tightlink_wire::twamp::SenderPacket;
use tightlink_wire::NtpTimestamp;

use std::net::{SocketAddr, SocketAddrV4};

use tightlink_core::channel::ChannelError;
use tightlink_wire::control::Direction;

use crate::packets;
use crate::stamps::Departures;
use crate::udp::ProbeSocket;
use packet::{PacketRing, PacketTx};
use route::next_hop;
use tightlink_sys::clock;
use xdp::XdpTx;

pub mod packet;
pub mod route;
pub mod xdp;

/// Why `packet` and `xdp` cannot send to this host's own addresses.
pub const LOCAL_FRAMES_DROPPED: &str = "frames injected below IP toward this host's own address come back in on lo and IP input drops them as martians (route_localnet=0)";

pub use crate::transmit::{Backend, ProbeSource, Transmit};

/// Sends `packets[i]` at `offsets_ns[i]` after `start_monotonic_ns`,
/// spinning in between, stamping each with its scheduled time (the TWAMP
/// timestamp field), after a throw-away `warmup` packet sent 100 us
/// earlier (the first send of a train is 12-15 us slow: it wakes the
/// receiving side). Drains transmit stamps whenever the next send is more
/// than 20 us away, and once more at the end.
pub fn send_paced(
    tx: &mut dyn Transmit,
    warmup: &[u8],
    packets: &mut [Vec<u8>],
    offsets_ns: &[i64],
    start_monotonic_ns: i64,
) -> io::Result<Departures> {
    let plain = |p: &mut [u8], stamp: NtpTimestamp| {
        SenderPacket::new_unchecked(p).set_timestamp(stamp);
    };
    send_paced_stamped(tx, warmup, packets, offsets_ns, start_monotonic_ns, &plain)
}

/// [`send_paced`], each packet's timestamp written by `stamp` (where the
/// layout puts it, sealed again where it is authenticated).
pub fn send_paced_stamped(
    tx: &mut dyn Transmit,
    warmup: &[u8],
    packets: &mut [Vec<u8>],
    offsets_ns: &[i64],
    start_monotonic_ns: i64,
    stamp: &dyn Fn(&mut [u8], NtpTimestamp),
) -> io::Result<Departures> {
    const WARMUP_LEAD_NS: i64 = 100_000;
    let n = packets.len();
    let mut stamps = Vec::with_capacity(n + 1);
    // REALTIME = MONOTONIC + shift, read once, so schedules are exact.
    let shift = clock::realtime_ns() - clock::monotonic_ns();
    clock::spin_until(start_monotonic_ns - WARMUP_LEAD_NS);
    tx.send_now(warmup)?;
    let mut d = Departures {
        scheduled_ns: Vec::with_capacity(n),
        user_ns: Vec::with_capacity(n),
        tx_ns: vec![None; n],
    };
    let mut first_id = None;
    for (p, &off) in packets.iter_mut().zip(offsets_ns) {
        let due = start_monotonic_ns + off;
        if due - clock::monotonic_ns() > 20_000 {
            tx.drain_tx_stamps(&mut stamps)?;
        }
        // The TWAMP timestamp is the (scheduled) send time, NTP format.
        stamp(
            &mut p[..],
            NtpTimestamp::from_unix_ns((due + shift).max(0) as u64),
        );
        clock::spin_until(due);
        d.scheduled_ns.push(due + shift);
        d.user_ns.push(clock::realtime_ns());
        if let Some(id) = tx.send_now(p)? {
            first_id.get_or_insert(id);
        }
    }
    let Some(f) = first_id else {
        return Ok(d);
    };
    // Stamps trail the last send by a few us; wait up to 2 ms for them.
    let until = clock::monotonic_ns() + 2_000_000;
    loop {
        tx.drain_tx_stamps(&mut stamps)?;
        let have = stamps
            .iter()
            .filter(|s| s.id.wrapping_sub(f) < n as u32)
            .count();
        if have >= n || clock::monotonic_ns() > until {
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    for s in stamps {
        let i = s.id.wrapping_sub(f) as usize;
        if i < n {
            d.tx_ns[i] = Some(s.kernel_ns);
        }
    }
    Ok(d)
}

/// A raw sender (forward) or a packet ring (reverse), or neither (udp).
pub(crate) type BackendParts = (Option<Box<dyn Transmit>>, Option<PacketRing>);

/// The raw sender (forward) or the packet ring (reverse) that `backend`
/// asks for a session with the peer at `server_udp`; neither for udp.
pub(crate) fn open_for_session(
    backend: Backend,
    direction: Direction,
    sock: &ProbeSocket,
    server_udp: SocketAddr,
    session: u64,
    warnings: &mut Vec<Warning>,
) -> Result<BackendParts, ChannelError> {
    let berr = |e: String| ChannelError::Io(format!("--backend {backend}: {e}"));
    if backend == Backend::Udp {
        return Ok((None, None));
    }
    let local = sock
        .local_addr()
        .map_err(|e| ChannelError::Io(format!("probe socket: {e}")))?;
    let (SocketAddr::V4(local4), SocketAddr::V4(peer4)) = (local, server_udp) else {
        return Err(berr("IPv4 only (its frames carry IPv4 headers)".into()));
    };
    match direction {
        Direction::Forward => {
            // Resolving the next hop may need one ordinary packet out: a
            // warm-up of this session, which the server takes.
            let mut seq = u32::MAX / 2;
            let (warm, _) = packets::build(session, u32::MAX, &[], &[], &mut seq);
            let hop = next_hop(*peer4.ip(), &mut || {
                let _ =
                    std::net::UdpSocket::bind(SocketAddr::V4(SocketAddrV4::new(*local4.ip(), 0)))
                        .and_then(|u| u.send_to(&warm, server_udp));
            })
            .map_err(|e| berr(e.to_string()))?;
            if hop.ifname == "lo" {
                return Err(berr(format!(
                    "cannot send to {}: {}; use --backend udp for a server on this host",
                    peer4.ip(),
                    LOCAL_FRAMES_DROPPED
                )));
            }
            let tx: Box<dyn Transmit> = match backend {
                Backend::Packet => {
                    Box::new(PacketTx::open(local4, peer4, &hop).map_err(|e| berr(e.to_string()))?)
                }
                _ => {
                    warnings.push(Warning::new(WarningCode::XdpPastQdisc, format!(
                        "the xdp backend hands frames to {}'s driver past the qdisc and gets no transmit stamps: a shaper on this host's own link neither applies nor shows",
                        hop.ifname
                    )));
                    Box::new(XdpTx::open(local4, peer4, &hop).map_err(|e| berr(e.to_string()))?)
                }
            };
            Ok((Some(tx), None))
        }
        Direction::Reverse | Direction::Transfer | Direction::TransferReverse => {
            if !backend.receives() {
                return Err(berr(
                    "receives nothing here: AF_XDP would need an XDP program and stamps in user space after batching; use --backend packet or udp in reverse mode".into(),
                ));
            }
            let dev = tightlink_sys::netif::interface_of(local.ip())
                .ok_or_else(|| berr(format!("no interface holds {}", local.ip())))?;
            let ifindex = tightlink_sys::netif::index(&dev).map_err(|e| berr(e.to_string()))?;
            let ring = PacketRing::open(ifindex, local)
                .map_err(|e| berr(format!("ring on {dev}: {e}")))?;
            Ok((None, Some(ring)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamps::TxStamp;

    /// A transmitter that records when each packet was handed over and
    /// stamps it `lag_ns` later.
    struct Recorder {
        sent: Vec<(i64, Vec<u8>)>,
        lag_ns: i64,
        stamps: bool,
    }

    impl Transmit for Recorder {
        fn backend(&self) -> Backend {
            Backend::Udp
        }
        fn send_now(&mut self, payload: &[u8]) -> io::Result<Option<u32>> {
            self.sent.push((clock::realtime_ns(), payload.to_vec()));
            Ok(self.stamps.then_some(self.sent.len() as u32 - 1))
        }
        fn drain_tx_stamps(&mut self, out: &mut Vec<TxStamp>) -> io::Result<()> {
            if self.stamps {
                out.clear();
                out.extend(self.sent.iter().enumerate().map(|(i, (t, _))| TxStamp {
                    id: i as u32,
                    kernel_ns: t + self.lag_ns,
                }));
            }
            Ok(())
        }
    }

    fn train(n: usize) -> (Vec<u8>, Vec<Vec<u8>>, Vec<i64>) {
        let offsets: Vec<i64> = (0..n as i64).map(|i| i * 50_000).collect();
        let mut seq = 0;
        let (w, p) = crate::packets::build(7, 1, &offsets, &vec![100; n], &mut seq);
        (w, p, offsets)
    }

    #[test]
    fn stamps_match_packets_after_the_warmup() {
        let (w, mut p, offsets) = train(5);
        let mut r = Recorder {
            sent: Vec::new(),
            lag_ns: 2_000,
            stamps: true,
        };
        let d = send_paced(
            &mut r,
            &w,
            &mut p,
            &offsets,
            clock::monotonic_ns() + 200_000,
        )
        .unwrap();
        assert_eq!(r.sent.len(), 6, "warm-up plus five");
        // Stamp i belongs to packet i (the warm-up's stamp, id 0, is not
        // any packet's).
        for i in 0..5 {
            assert_eq!(d.tx_ns[i], Some(r.sent[i + 1].0 + 2_000));
            assert!(d.user_ns[i] >= d.scheduled_ns[i]);
        }
        // Schedules keep the offsets exactly.
        assert_eq!(d.scheduled_ns[4] - d.scheduled_ns[0], 200_000);
        // Each packet carries its scheduled time in the TWAMP timestamp.
        let ts = SenderPacket::new_checked(&r.sent[3].1[..])
            .unwrap()
            .timestamp();
        let want = NtpTimestamp::from_unix_ns(d.scheduled_ns[2] as u64);
        assert_eq!(ts, want);
    }

    #[test]
    fn a_backend_without_stamps_leaves_them_missing() {
        let (w, mut p, offsets) = train(3);
        let mut r = Recorder {
            sent: Vec::new(),
            lag_ns: 0,
            stamps: false,
        };
        let d = send_paced(
            &mut r,
            &w,
            &mut p,
            &offsets,
            clock::monotonic_ns() + 200_000,
        )
        .unwrap();
        assert_eq!(d.tx_ns, vec![None; 3]);
        assert_eq!(d.user_ns.len(), 3);
    }

    #[test]
    fn backend_names_round_trip() {
        for b in Backend::ALL {
            assert_eq!(b.name().parse::<Backend>(), Ok(b));
        }
        assert!("dpdk"
            .parse::<Backend>()
            .unwrap_err()
            .to_string()
            .contains("udp, packet or xdp"));
    }
}
