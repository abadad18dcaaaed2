//! The lab's delay line: a user-space wire between two interfaces that
//! holds every frame for a propagation delay (with optional jitter), in
//! both directions. This kernel has no netem (sch_netem is not built and
//! modules cannot be loaded), so a hop's `delay = "15ms"` runs one of
//! these in a namespace of its own between the router and the next node.
//!
//! - Frames are read and written with their virtio-net header
//!   (PACKET_VNET_HDR), so frames whose checksum the sender left to
//!   offload, and segmentation-offload super-frames, cross unchanged.
//! - The delay counts from the kernel's receive stamp, not from when this
//!   process read the frame: a reader woken late does not add to it.
//! - Jitter draws each frame's delay uniformly in `delay ± jitter` but
//!   never lets a frame overtake the one before (a wire does not reorder;
//!   netem's jitter does, which TCP reads as loss).
//! - Memory is bounded: a direction holding more than `queue_limit_bytes`
//!   drops what arrives (counted), as a full link would.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::kernel;
use crate::topology::{Lab, RCV_IP, SND_IP};
use tightlink_core::rng::Rng;
use tightlink_sys::clock::{
    monotonic_ns, realtime_ns, set_timer_slack_ns, sleep_until, spin_until,
};
use tightlink_sys::packet::{
    bind, socket, statistics, ETH_P_ALL, PACKET_IGNORE_OUTGOING, PACKET_VNET_HDR, VNET_HDR_LEN,
};
use tightlink_sys::{netif, sockopt};

/// What a delay line does to each frame.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DelaySpec {
    /// One way, each direction.
    pub delay_ns: i64,
    /// Each frame's delay is uniform in `delay_ns ± jitter_ns`.
    pub jitter_ns: i64,
    /// Per direction.
    pub queue_limit_bytes: usize,
    pub seed: u64,
}

impl DelaySpec {
    pub fn new(delay_ns: i64, jitter_ns: i64) -> DelaySpec {
        DelaySpec {
            delay_ns,
            jitter_ns,
            queue_limit_bytes: 64 << 20,
            seed: 1,
        }
    }
}

/// One direction's counters (the status file's objects).
#[derive(Debug, Default, Serialize)]
pub struct DirectionCounters {
    pub forwarded_packets: AtomicU64,
    pub forwarded_bytes: AtomicU64,
    pub dropped_queue_full: AtomicU64,
    pub send_errors: AtomicU64,
    /// Frames cut short because they exceeded the read buffer.
    pub truncated: AtomicU64,
    /// Frames the kernel dropped because our socket's buffer was full.
    pub socket_drops: AtomicU64,
    /// Frames released more than 100 us after their due time.
    pub late_over_100us: AtomicU64,
    /// Frames dropped because the line had fallen more than 5 ms behind
    /// (more than it can carry arrives).
    pub dropped_late: AtomicU64,
    pub late_max_ns: AtomicU64,
}

/// Both directions, `a` to `b` and back.
#[derive(Debug, Default, Serialize)]
pub struct Counters {
    pub a_to_b: DirectionCounters,
    pub b_to_a: DirectionCounters,
}

/// When a frame leaves: its kernel receive stamp (realtime) carried over
/// to the monotonic clock the writer sleeps on, plus its delay, never
/// before the frame ahead of it. `age` is clamped: a stamp from the
/// future (a clock step) counts as now, one older than a second as a
/// second.
pub fn due_ns(
    now_mono_ns: i64,
    now_real_ns: i64,
    stamp_real_ns: Option<i64>,
    delay_ns: i64,
    previous_due_ns: i64,
) -> i64 {
    let age = stamp_real_ns.map_or(0, |s| (now_real_ns - s).clamp(0, 1_000_000_000));
    (now_mono_ns - age + delay_ns).max(previous_due_ns)
}

/// An AF_PACKET socket on `interface` that reads every frame arriving
/// there (not those leaving) with its virtio-net header and kernel stamp.
fn open_port(interface: &str) -> io::Result<OwnedFd> {
    let ifindex = netif::index(interface)
        .map_err(|e| io::Error::new(e.kind(), format!("interface {interface}: {e}")))?;
    // Protocol 0 until bound: no frame is queued before the options hold.
    let fd = socket(0)?;
    let raw = fd.as_raw_fd();
    sockopt::set_int(raw, libc::SOL_PACKET, PACKET_VNET_HDR, 1)?;
    sockopt::set_int(raw, libc::SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)?;
    sockopt::set_int(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        if sockopt::set_int(raw, libc::SOL_SOCKET, force, 8 << 20).is_err() {
            sockopt::set_int(raw, libc::SOL_SOCKET, plain, 8 << 20)?;
        }
    }
    bind(raw, ifindex, ETH_P_ALL)
        .map_err(|e| io::Error::new(e.kind(), format!("bind to {interface}: {e}")))?;
    Ok(fd)
}

struct Frame {
    due_ns: i64,
    bytes: Vec<u8>,
}

/// Reads frames from `from` and queues them with their due times.
fn read_side(
    from: &OwnedFd,
    spec: DelaySpec,
    seed: u64,
    queued: &AtomicUsize,
    counters: &DirectionCounters,
    out: mpsc::Sender<Frame>,
) -> io::Result<()> {
    // Starved of the CPU, the reader would find frames due already. One
    // below the writer: overloaded, the line should let the socket drop
    // (cheap) rather than read frames it then has no time to send.
    if let Err(e) = set_realtime_priority(10) {
        eprintln!("delay line: no real-time priority ({e}); frames may leave late");
    }
    // A 64 KB segmentation super-frame, its header and room to spare.
    let mut buf = vec![0u8; 128 << 10];
    let mut rng = Rng::new(seed);
    let mut previous_due = i64::MIN;
    loop {
        let (n, stamp, truncated) = match sockopt::recv_stamped(from.as_raw_fd(), &mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if truncated || n <= VNET_HDR_LEN {
            counters.truncated.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        let jitter = if spec.jitter_ns > 0 {
            ((rng.unit() * 2.0 - 1.0) * spec.jitter_ns as f64) as i64
        } else {
            0
        };
        let due = due_ns(
            monotonic_ns(),
            realtime_ns(),
            stamp,
            spec.delay_ns + jitter,
            previous_due,
        );
        if queued.load(Ordering::Relaxed) + n > spec.queue_limit_bytes {
            counters.dropped_queue_full.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        previous_due = due;
        queued.fetch_add(n, Ordering::Relaxed);
        let frame = Frame {
            due_ns: due,
            bytes: buf[..n].to_vec(),
        };
        if out.send(frame).is_err() {
            return Ok(());
        }
    }
}

/// Most a sleep is cut short to make up for wake-up lateness.
const MAX_LEAD_NS: i64 = 200_000;

/// The next lead: the writer sleeps until `due - lead` and spins the
/// rest, so a wake-up late by the usual amount still sends on time
/// (measured: a sleeping real-time thread woke 30-50 us late under load,
/// 100-200 us when the CPU had gone idle). The lead follows the lateness
/// of recent wake-ups (a moving average, 1/8 per wake-up), each clamped
/// to [0, 200 us] so that one stall does not make it spin for long.
pub fn next_lead_ns(lead_ns: i64, woke_late_ns: i64) -> i64 {
    let late = woke_late_ns.clamp(0, MAX_LEAD_NS);
    lead_ns + (late - lead_ns) / 8
}

/// A frame this late is dropped: more arrives than the line can carry,
/// and a backlog of seconds (measured at 1 Gbit/s offered, before this
/// rule) is worse than loss, which the sender can see.
const MAX_BEHIND_NS: i64 = 5_000_000;

/// Frames sent with one `sendmmsg` at most.
const SEND_BATCH: usize = 64;

/// Sends each queued frame on `to` when it is due, every frame due by
/// then in one `sendmmsg` (at 400 Mbit/s a syscall and a wake-up per
/// frame was the line's ceiling).
fn write_side(
    to: &OwnedFd,
    queued: &AtomicUsize,
    counters: &DirectionCounters,
    frames: mpsc::Receiver<Frame>,
) -> io::Result<()> {
    // Without this the kernel may wake a sleep 50 us late to batch
    // wake-ups, half the precision we promise.
    set_timer_slack_ns(1)?;
    // A real-time thread preempts the lab's busy senders at once; under
    // the default policy wake-ups came 100-200 us late on a loaded
    // 2-core host. It only sleeps or sends, so it cannot starve them.
    if let Err(e) = set_realtime_priority(11) {
        eprintln!("delay line: no real-time priority ({e}); wake-ups may come late");
    }
    let mut lead_ns = 0;
    let mut waiting: std::collections::VecDeque<Frame> = Default::default();
    let mut batch: Vec<Frame> = Vec::with_capacity(SEND_BATCH);
    loop {
        if waiting.is_empty() {
            match frames.recv() {
                Ok(f) => waiting.push_back(f),
                Err(_) => return Ok(()),
            }
        }
        waiting.extend(frames.try_iter());
        let due = waiting.front().expect("not empty").due_ns;
        if due - monotonic_ns() > lead_ns {
            lead_ns = next_lead_ns(lead_ns, sleep_until(due - lead_ns));
        }
        let late = spin_until(due).max(0) as u64;
        if late > 100_000 {
            counters.late_over_100us.fetch_add(1, Ordering::Relaxed);
        }
        counters.late_max_ns.fetch_max(late, Ordering::Relaxed);
        let now = monotonic_ns();
        while batch.len() < SEND_BATCH && waiting.front().is_some_and(|f| f.due_ns <= now) {
            let f = waiting.pop_front().expect("checked");
            if now - f.due_ns > MAX_BEHIND_NS {
                counters.dropped_late.fetch_add(1, Ordering::Relaxed);
                queued.fetch_sub(f.bytes.len(), Ordering::Relaxed);
                continue;
            }
            batch.push(f);
        }
        let failed = send_batch(to.as_raw_fd(), &batch);
        for (k, f) in batch.drain(..).enumerate() {
            if failed & (1 << k) == 0 {
                counters.forwarded_packets.fetch_add(1, Ordering::Relaxed);
                let wire = (f.bytes.len() - VNET_HDR_LEN) as u64;
                counters.forwarded_bytes.fetch_add(wire, Ordering::Relaxed);
            } else {
                counters.send_errors.fetch_add(1, Ordering::Relaxed);
            }
            queued.fetch_sub(f.bytes.len(), Ordering::Relaxed);
        }
    }
}

/// `sendmmsg` of up to 64 `frames` on a bound packet socket; returns a
/// bit per frame the kernel refused. Those are skipped, not retried: a
/// wire loses what it cannot carry.
fn send_batch(fd: libc::c_int, frames: &[Frame]) -> u64 {
    debug_assert!(frames.len() <= SEND_BATCH);
    let mut iovs: Vec<libc::iovec> = frames
        .iter()
        .map(|f| libc::iovec {
            iov_base: f.bytes.as_ptr() as *mut libc::c_void,
            iov_len: f.bytes.len(),
        })
        .collect();
    // SAFETY: zeroed mmsghdrs are valid (no name, no control); each points
    // at one iovec that outlives the call.
    let mut msgs: Vec<libc::mmsghdr> = iovs
        .iter_mut()
        .map(|iov| {
            let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
            m.msg_hdr.msg_iov = iov;
            m.msg_hdr.msg_iovlen = 1;
            m
        })
        .collect();
    let mut done = 0;
    let mut failed = 0u64;
    while done < msgs.len() {
        // SAFETY: the remaining mmsghdrs, all initialised above.
        let r = unsafe {
            libc::sendmmsg(
                fd,
                msgs[done..].as_mut_ptr(),
                (msgs.len() - done) as libc::c_uint,
                0,
            )
        };
        if r > 0 {
            done += r as usize;
        } else if r < 0 && io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
            continue;
        } else {
            // The frame at `done` failed: skip it.
            failed |= 1 << done;
            done += 1;
        }
    }
    failed
}

/// SCHED_FIFO at `priority` for the calling thread (root only; the
/// caller may go on without it).
fn set_realtime_priority(priority: i32) -> io::Result<()> {
    // SAFETY: sched_param is plain data (musl's has more fields than
    // glibc's, all zero here); only the priority is set.
    let mut param: libc::sched_param = unsafe { std::mem::zeroed() };
    param.sched_priority = priority;
    // SAFETY: changes only the calling thread's policy.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Runs a delay line between interfaces `a` and `b` of the calling
/// thread's namespace until a thread fails (the error says which) or the
/// process is killed. `ready` runs once both sockets are bound (nothing
/// is lost after it); `status` every second with the counters.
pub fn run(
    a: &str,
    b: &str,
    spec: DelaySpec,
    ready: impl FnOnce(),
    mut status: impl FnMut(&Counters),
) -> io::Result<()> {
    if spec.delay_ns < 0 || spec.jitter_ns < 0 || spec.jitter_ns > spec.delay_ns {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "delay {} ns, jitter {} ns: both must be >= 0 and jitter at most the delay",
                spec.delay_ns, spec.jitter_ns
            ),
        ));
    }
    let port_a = Arc::new(open_port(a)?);
    let port_b = Arc::new(open_port(b)?);
    let counters = Arc::new(Counters::default());
    let mut threads = Vec::new();
    let mut queues = Vec::new();
    for (dir, from, to, name) in [
        (0, &port_a, &port_b, format!("{a} -> {b}")),
        (1, &port_b, &port_a, format!("{b} -> {a}")),
    ] {
        let queued = Arc::new(AtomicUsize::new(0));
        queues.push((name.clone(), Arc::clone(&queued)));
        let (tx, rx) = mpsc::channel();
        let (from, c, q) = (Arc::clone(from), Arc::clone(&counters), Arc::clone(&queued));
        let seed = spec.seed.wrapping_add(dir);
        let reader = std::thread::Builder::new()
            .name(format!("read {name}"))
            .spawn(move || {
                let side = if dir == 0 { &c.a_to_b } else { &c.b_to_a };
                read_side(&from, spec, seed, &q, side, tx)
            })?;
        let (to, c, q) = (Arc::clone(to), Arc::clone(&counters), queued);
        let writer = std::thread::Builder::new()
            .name(format!("write {name}"))
            .spawn(move || {
                let side = if dir == 0 { &c.a_to_b } else { &c.b_to_a };
                write_side(&to, &q, side, rx)
            })?;
        threads.push((format!("reading {name}"), reader));
        threads.push((format!("writing {name}"), writer));
    }
    ready();
    let mut stalls = [Stall::default(), Stall::default()];
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let sides = [(&port_a, &counters.a_to_b), (&port_b, &counters.b_to_a)];
        for (((port, side), stall), (name, queued)) in
            sides.into_iter().zip(&mut stalls).zip(&queues)
        {
            // Reading resets the kernel's counter: add it up here.
            if let Ok((_, drops)) = statistics(port.as_raw_fd()) {
                side.socket_drops.fetch_add(drops, Ordering::Relaxed);
            }
            let queued = queued.load(Ordering::Relaxed);
            if stall.tick(side, queued) >= STALL_SECONDS {
                status(&counters);
                // The lab starts a line that stopped again, and shows
                // this line as the reason.
                return Err(io::Error::other(format!(
                    "{name}: nothing forwarded for {STALL_SECONDS} s while frames came ({queued} bytes queued, {} dropped by the socket, {} dropped late, {} dropped with the queue full); stopping",
                    side.socket_drops.load(Ordering::Relaxed),
                    side.dropped_late.load(Ordering::Relaxed),
                    side.dropped_queue_full.load(Ordering::Relaxed),
                )));
            }
        }
        status(&counters);
        if let Some(k) = threads.iter().position(|(_, t)| t.is_finished()) {
            let (what, t) = threads.swap_remove(k);
            return match t.join() {
                Ok(Ok(())) => Err(io::Error::other(format!("{what}: stopped"))),
                Ok(Err(e)) => Err(io::Error::new(e.kind(), format!("{what}: {e}"))),
                Err(_) => Err(io::Error::other(format!("{what}: thread panicked"))),
            };
        }
    }
}

/// Seconds a direction may forward nothing while frames come before the
/// line gives up (a working line forwards within its delay).
const STALL_SECONDS: u32 = 3;

/// A direction's progress, read once a second: how many seconds in a row
/// it forwarded nothing while frames came to it (queued or dropped).
#[derive(Debug, Default)]
struct Stall {
    forwarded: u64,
    dropped: u64,
    seconds: u32,
}

impl Stall {
    fn tick(&mut self, side: &DirectionCounters, queued_bytes: usize) -> u32 {
        let forwarded = side.forwarded_packets.load(Ordering::Relaxed);
        let dropped = side.socket_drops.load(Ordering::Relaxed)
            + side.dropped_late.load(Ordering::Relaxed)
            + side.dropped_queue_full.load(Ordering::Relaxed);
        let came = queued_bytes > 0 || dropped > self.dropped;
        self.seconds = if forwarded == self.forwarded && came {
            self.seconds + 1
        } else {
            0
        };
        (self.forwarded, self.dropped) = (forwarded, dropped);
        self.seconds
    }
}

/// Closes stdout (after the readiness line: whoever started us stops
/// reading, and a later write must not raise SIGPIPE).
pub fn detach_stdout() -> io::Result<()> {
    let null = std::fs::OpenOptions::new().write(true).open("/dev/null")?;
    // SAFETY: dup2 onto fd 1 of a file we opened; the old stdout closes.
    if unsafe { libc::dup2(null.as_raw_fd(), 1) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The one-way delay from the lab's sender to its receiver, as measured.
#[derive(Debug, Clone, Serialize)]
pub struct OneWayDelay {
    /// The hops' configured delays, summed.
    pub asked_ns: i64,
    pub sent: usize,
    pub received: usize,
    pub median_ns: i64,
    pub p5_ns: i64,
    pub p95_ns: i64,
    pub max_ns: i64,
}

/// Port of the delay probes on the receiver.
const PROBE_PORT: u16 = 9003;

/// Sends `count` small UDP datagrams, one every `gap`, from the lab's
/// sender to its receiver, each carrying its send time; the receiver's
/// kernel stamps them. The namespaces share the host's clock, so the
/// difference is the one-way delay (forwarding included: tens of
/// microseconds without a delay line).
pub fn measure_one_way(lab: &Lab, count: usize, gap: Duration) -> io::Result<OneWayDelay> {
    use std::net::UdpSocket;
    use std::sync::atomic::AtomicBool;
    let to = format!("{RCV_IP}:{PROBE_PORT}");
    // Sockets keep the namespace they were opened in; both are bound
    // before the first probe leaves.
    let rx = kernel::in_netns(&lab.ns("rcv"), || {
        let sock = UdpSocket::bind(&to)?;
        sockopt::set_int(sock.as_raw_fd(), libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        sockopt::set_recv_timeout(sock.as_raw_fd(), Duration::from_millis(200))?;
        Ok(sock)
    })?;
    let tx = kernel::in_netns(&lab.ns("snd"), || UdpSocket::bind((SND_IP, 0)))?;
    let done = AtomicBool::new(false);
    let (sent, delays) = std::thread::scope(|scope| {
        let receiver = scope.spawn(|| -> io::Result<Vec<i64>> {
            let mut delays = Vec::with_capacity(count);
            let mut buf = [0u8; 64];
            // After the last send, wait out the longest delay a scenario
            // may ask for (1 s per hop) plus slack.
            let mut quiet_since = None;
            while delays.len() < count {
                match sockopt::recv_stamped(rx.as_raw_fd(), &mut buf) {
                    Ok((16, Some(stamp), false)) => {
                        let sent = i64::from_le_bytes(buf[8..16].try_into().expect("8 bytes"));
                        delays.push(stamp - sent);
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        if done.load(Ordering::Relaxed) {
                            let t = quiet_since.get_or_insert_with(std::time::Instant::now);
                            if t.elapsed() > Duration::from_secs(5) {
                                break;
                            }
                        }
                    }
                    Err(e) => return Err(e),
                }
            }
            Ok(delays)
        });
        let mut sent = 0;
        let start = monotonic_ns();
        let sending = (0..count).try_for_each(|k| {
            sleep_until(start + k as i64 * gap.as_nanos() as i64);
            let mut msg = [0u8; 16];
            msg[..8].copy_from_slice(&(k as u64).to_le_bytes());
            msg[8..].copy_from_slice(&realtime_ns().to_le_bytes());
            tx.send_to(&msg, &to)?;
            sent += 1;
            Ok::<_, io::Error>(())
        });
        done.store(true, Ordering::Relaxed);
        let delays = receiver
            .join()
            .map_err(|_| io::Error::other("delay probe receiver panicked"))?;
        sending?;
        Ok::<_, io::Error>((sent, delays?))
    })?;
    let mut sorted = delays;
    sorted.sort_unstable();
    if sorted.is_empty() {
        return Err(io::Error::other(format!(
            "none of {sent} delay probes reached {to}"
        )));
    }
    let q = |p: f64| sorted[((sorted.len() - 1) as f64 * p).round() as usize];
    Ok(OneWayDelay {
        asked_ns: lab.scenario.hops.iter().map(|h| h.delay_ns).sum(),
        sent,
        received: sorted.len(),
        median_ns: q(0.5),
        p5_ns: q(0.05),
        p95_ns: q(0.95),
        max_ns: q(1.0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Seconds with frames coming and none forwarded count up; a frame
    /// forwarded, or a quiet second, starts again from zero.
    #[test]
    fn a_stall_is_counted_by_hand() {
        let side = DirectionCounters::default();
        let mut stall = Stall::default();
        assert_eq!(stall.tick(&side, 0), 0); // quiet
        assert_eq!(stall.tick(&side, 3000), 1); // queued, nothing sent
        side.socket_drops.fetch_add(10, Ordering::Relaxed);
        assert_eq!(stall.tick(&side, 0), 2); // dropped, nothing sent
        side.dropped_late.fetch_add(1, Ordering::Relaxed);
        assert_eq!(stall.tick(&side, 1500), 3);
        side.forwarded_packets.fetch_add(1, Ordering::Relaxed);
        assert_eq!(stall.tick(&side, 1500), 0); // it moved
        assert_eq!(stall.tick(&side, 0), 0); // quiet again
    }

    /// A frame stamped 30 us before it was read leaves 15 ms after the
    /// stamp, on the monotonic clock: 1_000_000 - 30_000 + 15_000_000.
    #[test]
    fn the_delay_counts_from_the_kernel_stamp() {
        let due = due_ns(1_000_000, 5_000_030_000, Some(5_000_000_000), 15_000_000, 0);
        assert_eq!(due, 15_970_000);
        // No stamp: from the read.
        assert_eq!(due_ns(1_000_000, 0, None, 15_000_000, 0), 16_000_000);
    }

    /// A shorter draw of jitter never overtakes the frame ahead; clock
    /// steps are clamped (stamp in the future: age 0; 5 s old: 1 s).
    #[test]
    fn frames_keep_their_order_and_clock_steps_are_clamped() {
        assert_eq!(due_ns(1_000, 1_000, Some(1_000), 10, 5_000), 5_000);
        assert_eq!(due_ns(2_000_000_000, 9, Some(100), 10, 0), 2_000_000_010);
        assert_eq!(
            due_ns(2_000_000_000, 5_000_000_000, Some(0), 10, 0),
            1_000_000_010
        );
    }

    /// The lead moves an eighth of the way to each wake-up's lateness:
    /// 0 -> 10 us after 80 us late; a 5 ms stall counts as 200 us
    /// (10 + 190/8 = 33.75 us); early wake-ups (negative) count as 0.
    #[test]
    fn the_lead_follows_lateness_by_hand() {
        assert_eq!(next_lead_ns(0, 80_000), 10_000);
        assert_eq!(next_lead_ns(10_000, 5_000_000), 33_750);
        assert_eq!(next_lead_ns(33_750, -4_000), 29_532);
    }

    #[test]
    fn a_jitter_above_the_delay_is_refused() {
        let e = run("lo", "lo", DelaySpec::new(1_000, 2_000), || {}, |_| {}).unwrap_err();
        assert!(e.to_string().contains("jitter at most the delay"), "{e}");
    }
}
