//! A connection flood must not lock real users out of `tightlink server`:
//! a connection holds a session slot only once its client has spoken, and
//! the oldest pending handshakes are cut when new ones need room. On
//! loopback (every 127/8 address is local), no namespaces needed.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use tightlink_core::channel::Channel;
use tightlink_core::AnalysisParams;
use tightlink_net::loopback::spawn_server;
use tightlink_net::{ClientOptions, ServerConfig, UdpChannel};
use tightlink_probe::strategy::Method;
use tightlink_probe::Budget;

const KEY: &[u8] = b"correct horse";

/// Resident memory of this process (server and flooders), kB.
fn rss_kb() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// An idle TCP connection from `src`: it never says Hello.
fn idle_from(src: Ipv4Addr, to: SocketAddr) -> Option<TcpStream> {
    let s = socket2_free_connect(src, to)?;
    Some(s)
}

/// connect(2) from a chosen source address with the standard library
/// only: bind a listener-less socket through libc, then connect.
fn socket2_free_connect(src: Ipv4Addr, to: SocketAddr) -> Option<TcpStream> {
    use std::os::fd::FromRawFd;
    let SocketAddr::V4(to) = to else { return None };
    // SAFETY: plain socket/bind/connect on a fresh fd, owned by the
    // TcpStream at once.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let s = TcpStream::from_raw_fd(fd);
        let sin = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as u16,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let local = sin(src, 0);
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, &local as *const _ as *const libc::sockaddr, len) != 0 {
            return None;
        }
        let remote = sin(*to.ip(), to.port());
        if libc::connect(fd, &remote as *const _ as *const libc::sockaddr, len) != 0 {
            return None;
        }
        Some(s)
    }
}

/// A short estimate: a few multi-rate streams through the server.
fn estimate(addr: SocketAddr, key: Option<&[u8]>) -> Result<f64, String> {
    let mut ch = UdpChannel::connect(
        &addr.to_string(),
        &ClientOptions {
            key: key.map(<[u8]>::to_vec),
            max_rate_bps: Some(200e6),
            ..ClientOptions::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let budget = Budget {
        max_streams: 4,
        max_bytes: 10_000_000,
        max_duration_ns: 1_000_000_000,
    };
    let r = Method::Multirate
        .run(&mut ch, &AnalysisParams::default(), budget, &mut |_| {})
        .map_err(|e| e.to_string())?;
    ch.close().map_err(|e| e.to_string())?;
    Ok(r.available_bandwidth_bps)
}

/// 64 addresses x 30 idle connections held open; then a keyed client and
/// an unkeyed client from a fresh address each complete an estimate.
#[test]
fn idle_connections_from_64_addresses_do_not_lock_real_clients_out() {
    let (addr, stats) = spawn_server(ServerConfig {
        key: Some(KEY.to_vec()),
        log: false,
        ..ServerConfig::default()
    })
    .unwrap();
    // Warm up the server's threads and buffers once, then measure.
    estimate(addr, None).expect("an estimate before the flood");
    let before_kb = rss_kb();
    let mut flood = Vec::new();
    for a in 0..64u8 {
        for _ in 0..30 {
            if let Some(s) = idle_from(Ipv4Addr::new(127, 0, 2, a + 1), addr) {
                flood.push(s);
            }
        }
    }
    assert_eq!(flood.len(), 64 * 30, "the flood could not connect");
    // Let the server accept them all (the warm-up estimate was one).
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while stats.accepted.load(Relaxed) < 1 + 64 * 30 && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(stats.accepted.load(Relaxed), 1 + 64 * 30);
    let pending = stats.pending_handshakes();
    assert!(pending <= 256, "{pending} pending handshakes");
    // Per address at most 8 wait; of the 64 x 8, the oldest are cut too.
    assert!(stats.cut.load(Relaxed) >= (64 * 30 - 256) as u64);
    assert_eq!(stats.open_sessions(), 0, "idle connections hold no slot");
    let unkeyed = estimate(addr, None);
    let keyed = estimate(addr, Some(KEY));
    let after_kb = rss_kb();
    eprintln!(
        "flood: {} connections held, {pending} pending, {} cut; RSS {before_kb} kB before, {after_kb} kB after; unkeyed {unkeyed:?}, keyed {keyed:?}",
        flood.len(),
        stats.cut.load(Relaxed)
    );
    assert!(unkeyed.is_ok(), "unkeyed client locked out: {unkeyed:?}");
    assert!(keyed.is_ok(), "keyed client locked out: {keyed:?}");
    // Each pending handshake costs a thread and a socket, not a session.
    assert!(
        after_kb < before_kb + 64 * 1024,
        "{before_kb} kB -> {after_kb} kB"
    );
    drop(flood);
}

/// Two of three slots reserved for the key: one unkeyed session takes the
/// free slot, a second unkeyed one is refused and says why, a keyed one
/// still gets in.
#[test]
fn unkeyed_clients_cannot_take_the_keyed_reserve() {
    let (addr, _stats) = spawn_server(ServerConfig {
        key: Some(KEY.to_vec()),
        log: false,
        max_sessions: 3,
        max_sessions_per_ip: 8,
        reserved_keyed_sessions: 2,
        ..ServerConfig::default()
    })
    .unwrap();
    let opts = |key: Option<&[u8]>| ClientOptions {
        key: key.map(<[u8]>::to_vec),
        ..ClientOptions::default()
    };
    let first = UdpChannel::connect(&addr.to_string(), &opts(None)).expect("a free slot");
    let e = UdpChannel::connect(&addr.to_string(), &opts(None))
        .err()
        .expect("the reserve is not for unkeyed clients")
        .to_string();
    assert!(e.contains("reserved for clients with the key"), "{e}");
    let keyed = UdpChannel::connect(&addr.to_string(), &opts(Some(KEY))).expect("a reserved slot");
    assert!(keyed.authenticated());
    drop((first, keyed));
}
