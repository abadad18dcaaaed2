//! The measuring host's own limits (\[HOST\] sections 3, 5-7: a tool
//! must tell when the host, not the path, is the bottleneck): what a
//! `send` costs, how precisely it paces trains, how its receiver batches,
//! which offloads merge packets, and CPU frequency scaling. `doctor` runs
//! all of it; the UDP channel runs the quick send-cost check on connect.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use tightlink_core::warning::{Warning, WarningCode};

use crate::backend::packet::PacketTx;
use crate::backend::route::next_hop;
use crate::backend::xdp::XdpTx;
use crate::backend::{Backend, Transmit};
use crate::udp::{ProbeSocket, UdpTx};
use tightlink_sys::clock;

/// Median cost of handing one datagram of `payload` bytes to the kernel
/// through `backend`, back to back, to a sink on loopback (ns). On veth
/// and loopback the receive path runs inside the sender's `send`
/// (netif_rx in the sender's xmit), so this is close to the real cost.
pub fn send_cost_ns(backend: Backend, payload: u32, sends: usize) -> std::io::Result<f64> {
    let sink = UdpSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    let to = sink.local_addr()?;
    let mut s = ProbeSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 1 << 20)?;
    let mut tx = loopback_tx(backend, &mut s, to)?;
    let buf = vec![0u8; payload as usize];
    let mut costs = Vec::with_capacity(sends);
    let mut drain = vec![0u8; 65_536];
    let mut stamps = Vec::new();
    sink.set_nonblocking(true)?;
    for i in 0..sends {
        let t = clock::monotonic_ns();
        tx.send_now(&buf)?;
        costs.push((clock::monotonic_ns() - t) as f64);
        if i % 64 == 63 {
            while sink.recv(&mut drain).is_ok() {}
            stamps.clear();
            tx.drain_tx_stamps(&mut stamps)?;
        }
    }
    costs.sort_by(f64::total_cmp);
    Ok(costs[costs.len() / 2])
}

/// A transmitter of `backend` from `sock`'s address to `to`, both on
/// loopback.
pub fn loopback_tx<'a>(
    backend: Backend,
    sock: &'a mut ProbeSocket,
    to: SocketAddr,
) -> std::io::Result<Box<dyn Transmit + 'a>> {
    let v4 = |a: SocketAddr| match a {
        SocketAddr::V4(a) => Ok(a),
        SocketAddr::V6(_) => Err(std::io::Error::other("IPv4 only")),
    };
    let (src, dst) = (v4(sock.local_addr()?)?, v4(to)?);
    let hop = || next_hop(*dst.ip(), &mut || {}).map_err(std::io::Error::from);
    Ok(match backend {
        Backend::Udp => Box::new(UdpTx { sock, to }),
        Backend::Packet => Box::new(PacketTx::open(src, dst, &hop()?)?),
        Backend::Xdp => Box::new(XdpTx::open(src, dst, &hop()?)?),
    })
}

/// The highest rate (bit/s, at the frame layer) this host paces probes of
/// `payload` bytes at through `backend`: one frame per median send cost,
/// with 25 % slack for the spin loop and interrupts. `f64::INFINITY` if
/// it cannot be measured (the strategies then use the server's limit).
pub fn pacing_limit_bps(backend: Backend, payload: u32, frame_bytes: u32) -> f64 {
    match send_cost_ns(backend, payload, 400) {
        Ok(c) if c > 0.0 => frame_bytes as f64 * 8e9 / (c * 1.25),
        _ => f64::INFINITY,
    }
}

/// GRO and LRO state of an interface: `(gro, lro)`, each `None` when the
/// device does not report it.
pub fn offloads(dev: &str) -> (Option<bool>, Option<bool>) {
    use tightlink_sys::ethtool::{command, FLAG_LRO, GFLAGS, GGRO};
    (
        command(dev, GGRO, 0).ok().map(|d| d != 0),
        command(dev, GFLAGS, 0).ok().map(|f| f & FLAG_LRO != 0),
    )
}

/// Warnings about offloads that merge packets (and their timestamps) on
/// the interface holding `ip`. GRO alone merges UDP only for sockets that
/// ask (UDP_GRO) or with `rx-udp-gro-forwarding`, so it is named, not
/// fatal; LRO merges everything.
pub fn merging_offloads(ip: IpAddr) -> Vec<Warning> {
    let Some(dev) = tightlink_sys::netif::interface_of(ip) else {
        return Vec::new();
    };
    let (gro, lro) = offloads(&dev);
    let mut w = Vec::new();
    if lro == Some(true) {
        w.push(Warning::new(WarningCode::MergingOffloads, format!(
            "LRO is on for {dev}: it merges received packets and their timestamps (ethtool -K {dev} lro off)"
        )));
    }
    if gro == Some(true) && dev != "lo" {
        w.push(Warning::new(WarningCode::MergingOffloads, format!(
            "GRO is on for {dev}: UDP probes stay apart unless rx-udp-gro-forwarding or UDP_GRO is on, but turn it off to be sure (ethtool -K {dev} gro off)"
        )));
    }
    w
}

/// CPU frequency scaling: the governor of cpu0, or `None` when the kernel
/// exposes none (as in many VMs, where the hypervisor decides).
pub fn cpu_governor() -> Option<String> {
    std::fs::read_to_string("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor")
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_sends_cost_something_and_limit_is_finite() {
        let c = send_cost_ns(Backend::Udp, 1472, 200).unwrap();
        assert!(c > 50.0 && c < 1e6, "{c}");
        let l = pacing_limit_bps(Backend::Udp, 1472, 1514);
        assert!(l.is_finite() && l > 1e6, "{l}");
    }
}
