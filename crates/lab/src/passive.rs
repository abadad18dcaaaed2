//! `lab tcp`: the passive estimators (\[TCPW\], sections 3-4) on a
//! real bulk TCP transfer through a lab, against the lab's truth. The
//! sender's interface is captured (what `analyze-tcp` reads); the truth is
//! the configured bottleneck (its tbf rate and queue limit) and, per loss
//! event, where the lost segment died: a second capture after the first
//! router's egress (after the random-loss filter, before a bottleneck
//! further on) shows whether the segment got past the filter. Seen there
//! before it was resent: the bottleneck's queue dropped it (overflow);
//! never seen: the filter did (random).
//!
//! Without a hop between filter and bottleneck (the bottleneck is hop 1),
//! the cause of a loss is only known when there is no filter (every loss
//! is an overflow).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use tightlink_capture::{flows, read_capture, segments};
use tightlink_core::tcp::{analyze_flow, BbeParams, LossClass, WestwoodParams};

use crate::run::{in_ns, run_child, Guard, SINK_PORT};
use crate::sampler::Sampler;
use crate::topology::{Lab, LabError, RCV_IP};
use crate::truth::Sample;

#[derive(Debug, Clone)]
pub struct TcpLabOptions {
    pub duration: Duration,
    /// TCP_CONGESTION of the transfer (cubic by default).
    pub congestion: String,
    /// Keep the captures here (else a temporary directory, removed).
    pub keep_captures: Option<PathBuf>,
}

/// Losses by true cause and by BBE's class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct Confusion {
    pub random_as_random: usize,
    pub random_as_congestion: usize,
    pub overflow_as_congestion: usize,
    pub overflow_as_random: usize,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TcpLabReport {
    pub scenario: String,
    pub congestion: String,
    /// The bottleneck: 1-based hop, its rate and queue limit as configured.
    pub bottleneck_hop: usize,
    pub rate_bps: f64,
    pub buffer_bytes: u64,
    pub loss: f64,
    pub data_bytes: u64,
    pub throughput_bps: f64,
    pub rtt_min_ms: Option<f64>,
    pub capacity_bps: Option<f64>,
    pub capacity_source: String,
    /// Relative errors against the configured rate and queue limit.
    pub capacity_error: Option<f64>,
    pub buffer_estimate_bytes: Option<f64>,
    pub buffer_error: Option<f64>,
    pub loss_events: usize,
    /// Retransmission events the receiver D-SACKed (not losses).
    pub spurious_events: usize,
    pub congestion_losses: usize,
    pub random_losses: usize,
    /// `None` where the cause of a loss cannot be told (see module doc).
    pub truth: Option<Confusion>,
    /// Events whose resent segment could not be matched in the truth
    /// capture (resegmented); left out of `truth`.
    pub unmatched: usize,
    /// Packets dropped by the bottleneck qdisc during the transfer.
    pub bottleneck_drops: u64,
    /// What the bottleneck qdisc sent over the transfer's later four
    /// fifths, bit/s. Where TCP kept its queue (no random loss) the rate
    /// it served: under the configured rate where the host woke its timer
    /// late (`lab check` measures that with a flood). With random losses
    /// the queue empties at times and this is lower for that reason too.
    pub bottleneck_sent_bps: Option<f64>,
    pub captures: Option<(String, String)>,
}

/// Starts `tightlink capture` in a namespace and waits until it is bound.
fn start_capture(
    lab: &Lab,
    exe: &PathBuf,
    role: &str,
    dev: &str,
    file: &Path,
    duration: Duration,
) -> Result<Child, LabError> {
    let mut c = in_ns(lab, role, exe);
    c.args(["capture", "-i", dev, "-w"])
        .arg(file)
        .args(["--duration", &format!("{}ms", duration.as_millis())])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c
        .spawn()
        .map_err(|e| LabError::Command(format!("capture in {role}: {e}")))?;
    let mut err = BufReader::new(child.stderr.take().expect("piped"));
    let mut line = String::new();
    let _ = err.read_line(&mut line);
    if !line.starts_with("capturing on") {
        let _ = child.kill();
        let _ = child.wait();
        return Err(LabError::Command(format!(
            "capture on {role}/{dev}: {}",
            line.trim()
        )));
    }
    // Its closing line is read after it ends.
    std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    Ok(child)
}

/// Ends a capture with SIGTERM (the file is completed) and checks it
/// ended well (it fails when the kernel dropped frames).
fn stop_capture(mut child: Child, what: &str) -> Result<(), LabError> {
    // SAFETY: a signal to our own child (`ip netns exec` execs tightlink).
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let status = child
        .wait()
        .map_err(|e| LabError::Command(format!("{what}: {e}")))?;
    if !status.success() {
        return Err(LabError::Command(format!(
            "{what} failed ({status}): frames dropped or not written; see `tightlink capture`"
        )));
    }
    Ok(())
}

/// Runs one transfer and compares the estimators with the truth.
pub fn tcp_run(lab: &Lab, exe: &PathBuf, o: &TcpLabOptions) -> Result<TcpLabReport, LabError> {
    let s = &lab.scenario;
    let (bottleneck, hop) = s
        .hops
        .iter()
        .enumerate()
        .min_by(|a, b| a.1.rate_bps.total_cmp(&b.1.rate_bps))
        .expect("a scenario has a hop");
    let dir = o.keep_captures.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("tightlink-lab-tcp-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir)
        .map_err(|e| LabError::Command(format!("{}: {e}", dir.display())))?;
    let snd_pcap = dir.join(format!("{}-sender.pcap", lab.name));
    let r1_pcap = dir.join(format!("{}-after-hop1.pcap", lab.name));
    let result = transfer(lab, exe, o, bottleneck, &snd_pcap, &r1_pcap);
    let report = result.and_then(|counters| {
        evaluate(
            lab,
            o,
            bottleneck,
            hop.rate_bps,
            hop.buffer_bytes,
            counters,
            &snd_pcap,
            &r1_pcap,
        )
    });
    if o.keep_captures.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    report
}

/// What the bottleneck's qdisc did during a transfer.
struct BottleneckCounters {
    drops: u64,
    /// Its sent rate over the transfer's later four fifths (bytes as tbf
    /// counts them, the configured rate's layer).
    sent_bps: Option<f64>,
}

/// The bottleneck's sent rate over the samples from a fifth of the way in
/// to the last (past slow start).
fn served_rate_bps(samples: &[Sample], hop: usize) -> Option<f64> {
    let (first, last) = (samples.first()?, samples.last()?);
    let from_ns = first.t_ns + (last.t_ns - first.t_ns) / 5;
    let start = samples.iter().find(|x| x.t_ns >= from_ns)?;
    let span_ns = last.t_ns - start.t_ns;
    (span_ns > 0).then(|| {
        last.hop_bytes[hop].saturating_sub(start.hop_bytes[hop]) as f64 * 8e9 / span_ns as f64
    })
}

/// Up, sink, captures, the transfer, down.
fn transfer(
    lab: &Lab,
    exe: &PathBuf,
    o: &TcpLabOptions,
    bottleneck: usize,
    snd_pcap: &Path,
    r1_pcap: &Path,
) -> Result<BottleneckCounters, LabError> {
    let err = LabError::Command;
    let _hold = lab.hold("tcp")?;
    lab.up(exe)?;
    let mut guard = Guard {
        lab,
        children: Vec::new(),
    };
    let sink = format!("{RCV_IP}:{SINK_PORT}");
    let listen = o.duration + Duration::from_secs(5);
    guard.children.push(
        in_ns(lab, "rcv", exe)
            .args(["cross", "--sink", &sink, "--duration"])
            .arg(format!("{}ms", listen.as_millis()))
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| err(format!("sink: {e}")))?,
    );
    std::thread::sleep(Duration::from_millis(200));
    let sampler = Sampler::start(lab, Duration::from_millis(10))
        .map_err(|e| err(format!("counters: {e}")))?;
    let before = sampler.last().map_or(0, |x| x.hop_drops[bottleneck]);
    let snd = start_capture(lab, exe, "snd", "eth0", snd_pcap, listen)?;
    // After hop 1's qdisc (taps see egress frames after the qdisc), so
    // after the random-loss filter at router 1's ingress.
    let r1 = match bottleneck {
        0 => None,
        _ => Some(start_capture(lab, exe, "r1", "to_next", r1_pcap, listen)?),
    };
    let transfer_from = sampler.sample_count();
    let out = run_child(
        {
            let mut c = in_ns(lab, "snd", exe);
            c.args(["cross", &sink, "--traffic", "none", "--tcp", "1"])
                .args(["--tcp-congestion", &o.congestion, "--duration"])
                .arg(format!("{}ms", o.duration.as_millis()));
            c
        },
        o.duration + Duration::from_secs(10),
    )
    .map_err(err)?;
    if !out.2 {
        return Err(err(format!("TCP transfer: {}", out.1.trim())));
    }
    let transfer_to = sampler.sample_count();
    // The last ACKs and the sampler's last read.
    std::thread::sleep(Duration::from_millis(100));
    stop_capture(snd, "capture at the sender")?;
    if let Some(r1) = r1 {
        stop_capture(r1, "capture after hop 1")?;
    }
    let after = sampler.last().map_or(0, |x| x.hop_drops[bottleneck]);
    let samples = sampler
        .finish()
        .map_err(|e| err(format!("counters: {e}")))?;
    drop(guard);
    Ok(BottleneckCounters {
        drops: after.saturating_sub(before),
        sent_bps: samples
            .get(transfer_from..transfer_to)
            .and_then(|s| served_rate_bps(s, bottleneck)),
    })
}

#[allow(clippy::too_many_arguments)]
fn evaluate(
    lab: &Lab,
    o: &TcpLabOptions,
    bottleneck: usize,
    rate_bps: f64,
    buffer_bytes: u64,
    counters: BottleneckCounters,
    snd_pcap: &Path,
    r1_pcap: &Path,
) -> Result<TcpLabReport, LabError> {
    let err = |e: String| LabError::Command(e);
    let cap = read_capture(snd_pcap).map_err(|e| err(e.to_string()))?;
    let all = flows(&cap);
    let flow = all
        .first()
        .ok_or_else(|| err(format!("{}: no TCP flow captured", snd_pcap.display())))?;
    let r = analyze_flow(
        &segments(&cap, flow),
        WestwoodParams::default(),
        BbeParams::default(),
    );
    let capacity = r.tcpprobe.and_then(|t| t.capacity());
    let buffer = capacity.and_then(|(c, _)| r.bbe.buffer_bytes(c));
    // Where each first transmission was seen after hop 1: start -> (end,
    // time). Only when hop 1 is not the bottleneck.
    let after_hop1: Option<BTreeMap<u32, (u32, i64)>> = if bottleneck > 0 {
        let c = read_capture(r1_pcap).map_err(|e| err(e.to_string()))?;
        let mut m = BTreeMap::new();
        for p in c
            .tcp
            .iter()
            .filter(|p| p.src == flow.sender && p.payload_bytes > 0)
        {
            m.entry(p.seq)
                .or_insert((p.seq.wrapping_add(p.payload_bytes), p.t_ns));
        }
        Some(m)
    } else {
        None
    };
    let mut unmatched = 0;
    let truth = match (&after_hop1, lab.scenario.loss > 0.0) {
        (None, true) => None,
        (m, _) => {
            let mut t = Confusion::default();
            for v in &r.bbe.verdicts {
                let overflow = match m {
                    // No filter: every loss is the queue's.
                    None => true,
                    Some(m) => match m.get(&v.seq) {
                        Some(&(_, seen)) => seen < v.t_ns,
                        // Not seen: dropped before hop 1, unless it was
                        // resegmented (a segment covering seq was seen).
                        None => {
                            let covered =
                                m.range(..v.seq).next_back().is_some_and(|(&s, &(e, _))| {
                                    v.seq.wrapping_sub(s) < e.wrapping_sub(s)
                                });
                            if covered {
                                unmatched += 1;
                                continue;
                            }
                            false
                        }
                    },
                };
                match (overflow, v.class) {
                    (true, LossClass::Congestion) => t.overflow_as_congestion += 1,
                    (true, LossClass::Random) => t.overflow_as_random += 1,
                    (false, LossClass::Random) => t.random_as_random += 1,
                    (false, LossClass::Congestion) => t.random_as_congestion += 1,
                }
            }
            Some(t)
        }
    };
    let f = &r.flow;
    let secs = (f.last_ns - f.first_ns) as f64 / 1e9;
    Ok(TcpLabReport {
        scenario: lab.scenario.name.clone(),
        congestion: o.congestion.clone(),
        bottleneck_hop: bottleneck + 1,
        rate_bps,
        buffer_bytes,
        loss: lab.scenario.loss,
        data_bytes: f.data_bytes,
        throughput_bps: f
            .acks
            .last()
            .map_or(0.0, |a| a.ack as f64 * 8.0 / secs.max(1e-9)),
        rtt_min_ms: f.rtt.iter().map(|x| x.rtt_ns / 1e6).reduce(f64::min),
        capacity_bps: capacity.map(|c| c.0),
        capacity_source: capacity.map_or("none", |c| c.1).to_string(),
        capacity_error: capacity.map(|c| c.0 / rate_bps - 1.0),
        buffer_estimate_bytes: buffer,
        buffer_error: buffer.map(|b| b / buffer_bytes as f64 - 1.0),
        loss_events: f.losses.len(),
        spurious_events: f.spurious.len(),
        congestion_losses: r.bbe.count(LossClass::Congestion).0,
        random_losses: r.bbe.count(LossClass::Random).0,
        truth,
        unmatched,
        bottleneck_drops: counters.drops,
        bottleneck_sent_bps: counters.sent_bps,
        captures: o.keep_captures.as_ref().map(|_| {
            (
                snd_pcap.display().to_string(),
                r1_pcap.display().to_string(),
            )
        }),
    })
}
