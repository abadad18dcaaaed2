//! `tightlink doctor`: is this host, not the path, the bottleneck? (host
//! paper sections 3 and 5-7: timers, syscalls, interrupts and I/O limit
//! what a measuring host can send and stamp.) Measures the clock, how
//! precisely this host paces trains per packet size and rate, what a
//! receiver sees of a paced train (batching, receive-rate error), for
//! every backend side by side (\[CLOUD\]'s Tables 1-2: sending
//! backends against the server's kernel stamps, receiving backends
//! against its transmit stamps), merging offloads and CPU frequency
//! scaling; then the verdict.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};

use tightlink_core::channel::{Channel, ChannelError, StreamRequest};
use tightlink_core::stats::median;
use tightlink_core::ProbeStream;
use tightlink_wire::control::Direction;

use crate::backend::{send_paced, Backend};
use crate::client::{ClientOptions, UdpChannel};
use crate::stamps::Departures;
use crate::udp::ProbeSocket;
use crate::{clock, host, loopback, packets};

/// Gap precision asked of a usable rate: this share of sends within 1 us
/// of schedule (a UDP socket on the machines we measured: ~95 % at 12 us gaps).
pub const PRECISE_SHARE: f64 = 0.90;

#[derive(Debug, Clone)]
pub struct PacingRow {
    pub backend: Backend,
    pub frame_bytes: u32,
    pub rate_bps: f64,
    /// Share of sends that began within 1 us of schedule.
    pub within_1us: f64,
    /// Rate actually sent: frames over the user-space send span.
    pub sent_rate_bps: f64,
}

/// One sending backend at one rate, against a receiver's kernel stamps
/// (\[CLOUD\]'s Table 1: estimated and actual send rates).
#[derive(Debug, Clone)]
pub struct SendRow {
    pub backend: Backend,
    pub rate_bps: f64,
    /// Medians over the repeats: the rate the sender believes it sent
    /// (user-space send times) and the rate the receiver's kernel stamps
    /// saw (the actual one).
    pub est_send_bps: f64,
    pub act_bps: f64,
    /// Relative standard deviation of the actual rate over the repeats.
    pub act_rsd: f64,
    /// Share of sends within 1 us of schedule (all repeats).
    pub within_1us: f64,
    pub lost: usize,
}

/// One receiving backend at one rate (\[CLOUD\]'s Table 2):
/// the server paces with UDP, this host stamps.
#[derive(Debug, Clone)]
pub struct ReceiveRow {
    pub backend: Backend,
    pub rate_bps: f64,
    /// Medians over the repeats: the rate between the sender's kernel
    /// transmit stamps and the rate between this host's receive stamps.
    pub send_rate_bps: f64,
    pub recv_rate_bps: f64,
    /// Relative standard deviation of the receive rate over the repeats.
    pub recv_rsd: f64,
    /// Share of receive gaps under 1 us (packets stamped in one batch).
    pub back_to_back: f64,
    /// Mean run length of back-to-back packets (1 = none batched).
    pub mean_batch: f64,
    pub lost: usize,
}

#[derive(Debug, Clone)]
pub struct Doctor {
    pub clock_read_ns: f64,
    pub clock_resolution_ns: i64,
    /// Per backend and frame size: median cost of one send (ns).
    pub send_cost_ns: Vec<(Backend, u32, f64)>,
    pub pacing: Vec<PacingRow>,
    pub sends: Vec<SendRow>,
    pub receive: Vec<ReceiveRow>,
    /// Backends (and directions) this host could not run, and why.
    pub unavailable: Vec<(Backend, String)>,
    pub offloads: Vec<(String, Option<bool>, Option<bool>)>,
    pub cpu_governor: Option<String>,
    /// Share of this host's CPU time the hypervisor took while the doctor
    /// ran (steal; `None` where `/proc/stat` has no tick to show).
    pub stolen_share: Option<f64>,
    /// Per backend and frame size: the highest rate paced precisely.
    pub limits: Vec<(Backend, u32, f64)>,
    pub target: String,
}

fn clock_read_ns() -> f64 {
    let n = 200_000;
    let t = clock::monotonic_ns();
    let mut x = 0i64;
    for _ in 0..n {
        x = x.wrapping_add(clock::monotonic_ns());
    }
    std::hint::black_box(x);
    (clock::monotonic_ns() - t) as f64 / n as f64
}

fn clock_resolution_ns() -> i64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_getres(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec * 1_000_000_000 + ts.tv_nsec
}

/// Paces `n` frames of `frame_bytes` at `rate_bps` through `backend` to a
/// local sink and measures how close to schedule each send began.
pub fn pacing_row(
    backend: Backend,
    frame_bytes: u32,
    rate_bps: f64,
    n: usize,
) -> std::io::Result<PacingRow> {
    let payload = frame_bytes - 42;
    let sink = UdpSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    let to = sink.local_addr()?;
    let mut s = ProbeSocket::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 8 << 20)?;
    let mut tx = host::loopback_tx(backend, &mut s, to)?;
    let gap = frame_bytes as f64 * 8e9 / rate_bps;
    let offsets: Vec<i64> = (0..n).map(|i| (i as f64 * gap).round() as i64).collect();
    let mut seq = 0;
    let (warm, mut pk) = packets::build(1, 0, &offsets, &vec![payload; n], &mut seq);
    let d = send_paced(
        tx.as_mut(),
        &warm,
        &mut pk,
        &offsets,
        clock::monotonic_ns() + 200_000,
    )?;
    let span = (d.user_ns[n - 1] - d.user_ns[0]).max(1) as f64;
    Ok(PacingRow {
        backend,
        frame_bytes,
        rate_bps,
        within_1us: 1.0 - d.late_share(1_000),
        sent_rate_bps: (n - 1) as f64 * frame_bytes as f64 * 8e9 / span,
    })
}

/// Frame size of the backend tables' trains (the paper's 1514 bytes).
pub const TABLE_FRAME_BYTES: u32 = 1514;

/// Why a check of `doctor` could not run.
#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    /// The channel to the peer failed.
    #[error("{0}")]
    Channel(#[from] ChannelError),
    /// A train came back with too little to read.
    #[error("{0}")]
    Train(&'static str),
    /// Pacing a train on this host failed.
    #[error("pacing {backend} {frame_bytes} B at {rate_bps}: {source}")]
    Pacing {
        backend: Backend,
        frame_bytes: u32,
        rate_bps: f64,
        #[source]
        source: std::io::Error,
    },
    /// The loopback server could not start.
    #[error("loopback server: {0}")]
    Server(#[source] std::io::Error),
}

/// A paced train of `n` frames at `rate_bps` through a channel.
fn train(
    ch: &mut UdpChannel,
    rate_bps: f64,
    n: usize,
) -> Result<(ProbeStream, Departures), DoctorError> {
    let frame = TABLE_FRAME_BYTES;
    let gap = frame as f64 * 8e9 / rate_bps;
    let times: Vec<i64> = (0..n).map(|i| (i as f64 * gap).round() as i64).collect();
    let p = ch.probe(&StreamRequest::from_send_times(&times, frame))?;
    let d = ch
        .last_departures()
        .cloned()
        .ok_or(DoctorError::Train("the channel kept no departures"))?;
    Ok((p.stream, d))
}

/// Rate (bit/s) of equal frames between the first and last of `t`.
fn span_rate(frame: u32, t: &[i64]) -> Option<f64> {
    if t.len() < 2 {
        return None;
    }
    let span = (t[t.len() - 1] - t[0]).max(1) as f64;
    Some((t.len() - 1) as f64 * frame as f64 * 8e9 / span)
}

fn rsd(v: &[f64]) -> f64 {
    let m = v.iter().sum::<f64>() / v.len() as f64;
    let var = v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / v.len() as f64;
    var.sqrt() / m
}

/// Table 1 row: `reps` trains sent through the channel's backend; the
/// receiver's kernel stamps give the actual rate.
pub fn send_row(
    ch: &mut UdpChannel,
    rate_bps: f64,
    n: usize,
    reps: usize,
) -> Result<SendRow, DoctorError> {
    let frame = TABLE_FRAME_BYTES;
    let (mut est, mut act) = (Vec::new(), Vec::new());
    let (mut on_time, mut sends, mut lost) = (0.0, 0usize, 0);
    for _ in 0..reps {
        let (s, d) = train(ch, rate_bps, n)?;
        let recv: Vec<i64> = s.packets.iter().filter_map(|p| p.recv_ns).collect();
        lost += n - recv.len();
        act.push(
            span_rate(frame, &recv).ok_or(DoctorError::Train("fewer than two packets arrived"))?,
        );
        est.push(span_rate(frame, &d.user_ns).ok_or(DoctorError::Train("no send times"))?);
        on_time += (1.0 - d.late_share(1_000)) * d.user_ns.len() as f64;
        sends += d.user_ns.len();
    }
    Ok(SendRow {
        backend: ch.backend(),
        rate_bps,
        est_send_bps: median(&est).unwrap_or(f64::NAN),
        act_rsd: rsd(&act),
        act_bps: median(&act).unwrap_or(f64::NAN),
        within_1us: on_time / sends.max(1) as f64,
        lost,
    })
}

/// Table 2 row: `reps` trains the server sends (reverse session), stamped
/// here by the channel's backend.
pub fn receive_row(
    ch: &mut UdpChannel,
    rate_bps: f64,
    n: usize,
    reps: usize,
) -> Result<ReceiveRow, DoctorError> {
    let frame = TABLE_FRAME_BYTES;
    let (mut sent, mut recv) = (Vec::new(), Vec::new());
    let (mut b2b, mut gaps_total, mut batches, mut lost) = (0usize, 0usize, Vec::new(), 0);
    for _ in 0..reps {
        let (s, d) = train(ch, rate_bps, n)?;
        // Packets stamped at both ends.
        let both: Vec<(i64, i64)> = s
            .packets
            .iter()
            .zip(&d.tx_ns)
            .filter_map(|(p, t)| Some((t.as_ref().copied()?, p.recv_ns?)))
            .collect();
        lost += n - s.packets.iter().filter(|p| p.recv_ns.is_some()).count();
        let tx: Vec<i64> = both.iter().map(|b| b.0).collect();
        let rx: Vec<i64> = both.iter().map(|b| b.1).collect();
        sent.push(span_rate(frame, &tx).ok_or(DoctorError::Train(
            "fewer than two packets stamped at both ends",
        ))?);
        recv.push(
            span_rate(frame, &rx).ok_or(DoctorError::Train("fewer than two packets arrived"))?,
        );
        let gaps: Vec<i64> = rx.windows(2).map(|w| w[1] - w[0]).collect();
        b2b += gaps.iter().filter(|&&g| g < 1_000).count();
        gaps_total += gaps.len();
        // Runs of back-to-back gaps: a run of k such gaps is a batch of k+1.
        let mut run = 0;
        for &g in &gaps {
            if g < 1_000 {
                run += 1;
            } else {
                batches.push(run + 1);
                run = 0;
            }
        }
        batches.push(run + 1);
    }
    Ok(ReceiveRow {
        backend: ch.backend(),
        rate_bps,
        send_rate_bps: median(&sent).unwrap_or(f64::NAN),
        recv_rsd: rsd(&recv),
        recv_rate_bps: median(&recv).unwrap_or(f64::NAN),
        back_to_back: b2b as f64 / gaps_total.max(1) as f64,
        mean_batch: batches.iter().sum::<usize>() as f64 / batches.len().max(1) as f64,
        lost,
    })
}

/// Where `doctor` measures against: a given server, or one it starts on
/// loopback (keyed, so its limits do not cap the rates).
struct Peer {
    addr: String,
    key: Option<Vec<u8>>,
    label: String,
    loopback: bool,
}

fn connect(peer: &Peer, backend: Backend, direction: Direction) -> Result<UdpChannel, DoctorError> {
    let opts = ClientOptions {
        key: peer.key.clone(),
        backend,
        direction,
        ..Default::default()
    };
    Ok(UdpChannel::connect(&peer.addr, &opts)?)
}

/// Runs every check. `peer`: a `tightlink server` to measure the
/// receiving side against (with `key`, its keyed limits apply); `None`
/// starts one on loopback.
pub fn run(peer: Option<&str>, key: Option<Vec<u8>>, quick: bool) -> Result<Doctor, DoctorError> {
    let n = if quick { 200 } else { 1000 };
    let reps = if quick { 2 } else { 5 };
    let cpu_at_start = tightlink_sys::cpu_time::read().ok();
    let host = host_pacing(n)?;
    let mut unavailable = host.unavailable;
    let peer = peer_of(peer, key)?;
    let mut t = PeerTables::default();
    for b in Backend::ALL {
        if unavailable.iter().any(|(u, _)| *u == b) {
            continue;
        }
        if peer.loopback && b != Backend::Udp {
            // Frames from 127.0.0.1 injected at layer 2 come back in on lo
            // and IP input drops them as martians (route_localnet=0).
            unavailable.push((
                b,
                format!(
                    "tables need a peer across a real link: {} (run with --peer; scripts/doctor-lab.sh does, across namespaces)",
                    crate::backend::LOCAL_FRAMES_DROPPED
                ),
            ));
            continue;
        }
        if let Err(e) = t.rows(&peer, b, Direction::Forward, n, reps) {
            unavailable.push((b, format!("send: {e}")));
        }
        if !b.receives() {
            unavailable.push((b, "receive: no per-packet kernel stamps (needs an XDP program; would stamp in user space after batching)".into()));
            continue;
        }
        if let Err(e) = t.rows(&peer, b, Direction::Reverse, n, reps) {
            unavailable.push((b, format!("receive: {e}")));
        }
    }
    Ok(Doctor {
        clock_read_ns: clock_read_ns(),
        clock_resolution_ns: clock_resolution_ns(),
        send_cost_ns: host.send_cost_ns,
        pacing: host.pacing,
        sends: t.sends,
        receive: t.receive,
        unavailable,
        offloads: t.offloads,
        cpu_governor: host::cpu_governor(),
        stolen_share: cpu_at_start
            .zip(tightlink_sys::cpu_time::read().ok())
            .and_then(|(a, b)| tightlink_sys::cpu_time::stolen_share(a, b)),
        limits: host.limits,
        target: peer.label,
    })
}

/// Rates the send and receive tables are read at.
const TABLE_RATES: [f64; 5] = [1e9, 2e9, 4e9, 8e9, 10e9];

/// What this host alone can do: each backend's cost to send a frame, and
/// how precisely it paces each frame size at each rate.
#[derive(Default)]
struct HostPacing {
    unavailable: Vec<(Backend, String)>,
    pacing: Vec<PacingRow>,
    /// (backend, frame bytes, the highest rate paced precisely).
    limits: Vec<(Backend, u32, f64)>,
    send_cost_ns: Vec<(Backend, u32, f64)>,
}

fn host_pacing(n: usize) -> Result<HostPacing, DoctorError> {
    let frames = [128u32, 1514, 9014];
    let rates = [100e6, 500e6, 1e9, 2e9, 4e9, 8e9, 10e9];
    let mut h = HostPacing::default();
    for b in Backend::ALL {
        for &f in &frames {
            if b == Backend::Xdp && f as usize - 42 > crate::backend::xdp::MAX_PAYLOAD {
                continue;
            }
            let cost = match host::send_cost_ns(b, f - 42, 2000) {
                Ok(c) => c,
                Err(e) => {
                    h.unavailable.push((b, format!("send: {e}")));
                    break;
                }
            };
            h.send_cost_ns.push((b, f, cost));
            let mut best = 0.0;
            for &r in &rates {
                let row = pacing_row(b, f, r, n).map_err(|source| DoctorError::Pacing {
                    backend: b,
                    frame_bytes: f,
                    rate_bps: r,
                    source,
                })?;
                if row.within_1us >= PRECISE_SHARE {
                    best = r;
                }
                h.pacing.push(row);
            }
            h.limits.push((b, f, best));
        }
    }
    Ok(h)
}

/// The server measured against: `peer` with its key, or one started on
/// loopback.
fn peer_of(peer: Option<&str>, key: Option<Vec<u8>>) -> Result<Peer, DoctorError> {
    Ok(match peer {
        Some(p) => Peer {
            addr: p.to_string(),
            key,
            label: p.to_string(),
            loopback: false,
        },
        None => {
            let key = b"doctor".to_vec();
            let (addr, _) = loopback::spawn_server(crate::ServerConfig {
                key: Some(key.clone()),
                log: false,
                ..Default::default()
            })
            .map_err(DoctorError::Server)?;
            Peer {
                addr: addr.to_string(),
                key: Some(key),
                label: "loopback (a server on 127.0.0.1)".to_string(),
                loopback: true,
            }
        }
    })
}

/// The tables read against the peer.
#[derive(Default)]
struct PeerTables {
    sends: Vec<SendRow>,
    receive: Vec<ReceiveRow>,
    /// (device, GRO, LRO) of the interface toward the peer.
    offloads: Vec<(String, Option<bool>, Option<bool>)>,
}

impl PeerTables {
    /// At each table rate, streams sent to the peer through backend `b`
    /// (`Forward`, with the offloads of the interface toward it) or sent
    /// by the peer and received by `b` (`Reverse`).
    fn rows(
        &mut self,
        peer: &Peer,
        b: Backend,
        direction: Direction,
        n: usize,
        reps: usize,
    ) -> Result<(), DoctorError> {
        let mut ch = connect(peer, b, direction)?;
        let top = ch.limits().max_rate_bps as f64;
        for &r in TABLE_RATES.iter().filter(|&&r| r <= top) {
            if direction == Direction::Forward {
                self.sends.push(send_row(&mut ch, r, n, reps)?);
            } else {
                self.receive.push(receive_row(&mut ch, r, n, reps)?);
            }
        }
        if direction == Direction::Forward && self.offloads.is_empty() {
            let local_ip: Option<IpAddr> = ch.local_udp().ok().map(|a| a.ip());
            if let Some(dev) = local_ip.and_then(tightlink_sys::netif::interface_of) {
                let (gro, lro) = host::offloads(&dev);
                self.offloads.push((dev, gro, lro));
            }
        }
        let _ = ch.close_session();
        Ok(())
    }
}

impl Doctor {
    /// The highest rate paced precisely with `frame`-byte frames through
    /// `backend` (0 when none was).
    pub fn limit(&self, backend: Backend, frame: u32) -> f64 {
        self.limits
            .iter()
            .find(|(b, f, _)| *b == backend && *f == frame)
            .map_or(0.0, |l| l.2)
    }

    /// "this host can probe up to X Gbit/s with Y us gap precision", for
    /// MTU-sized (1514-byte) frames, through the default (udp) backend
    /// and through the best other one.
    pub fn verdict(&self) -> String {
        let limit = self.limit(Backend::Udp, 1514);
        let best = Backend::ALL
            .into_iter()
            .map(|b| (b, self.limit(b, 1514)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .filter(|(b, l)| *b != Backend::Udp && *l > limit);
        let better = best.map_or(String::new(), |(b, l)| {
            format!("; --backend {b} paces up to {:.1} Gbit/s", l / 1e9)
        });
        if limit == 0.0 {
            return format!("this host cannot pace 1514-byte frames within 1 us even at 100 Mbit/s: its estimates are host-limited{better}");
        }
        format!(
            "this host can probe up to {:.1} Gbit/s with 1514-byte frames, {:.0} % of gaps within 1 us of schedule (jumbo 9014-byte frames: {:.1} Gbit/s){better}",
            limit / 1e9,
            PRECISE_SHARE * 100.0,
            self.limit(Backend::Udp, 9014) / 1e9
        )
    }
}
