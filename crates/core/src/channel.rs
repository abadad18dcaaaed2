//! The channel boundary: where a probing strategy sends a probe schedule
//! and gets back one record per packet. A strategy does not know whether
//! the far end is the simulator, a recorded trace, a tightlink server or a
//! TWAMP-light reflector; the simulator and the real backends implement
//! these traits and know nothing of each other.
//!
//! Times are integer nanoseconds. What a channel knows beyond the packets
//! (the sending host's limits, the simulator's truth) is an optional side
//! report, never part of probing.

use std::fmt;

use crate::stream::ProbeStream;

/// A stream to send: packet offsets from the stream's start and sizes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamRequest {
    pub offsets_ns: Vec<i64>,
    pub sizes: Vec<u32>,
}

impl StreamRequest {
    /// Packets at the given send times (ns, first at 0).
    pub fn from_send_times(times: &[i64], size_bytes: u32) -> Self {
        let t0 = times.first().copied().unwrap_or(0);
        StreamRequest {
            offsets_ns: times.iter().map(|t| t - t0).collect(),
            sizes: vec![size_bytes; times.len()],
        }
    }

    pub fn bytes(&self) -> u64 {
        self.sizes.iter().map(|&s| s as u64).sum()
    }
}

/// Ground truth for one stream, from outside the tool (the simulator's
/// bookkeeping, or a truth file written beside a trace).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroundTruth {
    /// Tight-link capacity minus the cross traffic over the stream's span.
    pub available_bps: f64,
    /// Its min and max over sub-windows of the span.
    pub min_bps: f64,
    pub max_bps: f64,
}

/// How far behind its schedule a sender must have fallen for a stream
/// to be [`Probed::sender_late`]: a descheduled thread (whole scheduler
/// ticks) lags its schedule by 0.2-4 ms, where a host pacing near its
/// limit lags by 0.1-0.25 ms unloaded, and sending such streams again
/// found them late again, at the same rates (the lab's 2-core VM).
pub const STALL_TO_SEND_AGAIN_NS: i64 = 500_000;

/// What came back for one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub stream: ProbeStream,
    /// Ground truth for this stream, when the channel knows one.
    pub truth: Option<GroundTruth>,
    /// The sender stalled ([`STALL_TO_SEND_AGAIN_NS`] or more behind this
    /// stream's schedule) with no queue of its own to explain it: its
    /// packets left in catch-up bursts, so the send times the stream
    /// carries (the schedule) are not what the path met. A strategy may
    /// send it again.
    pub sender_late: bool,
    /// The receiving host's socket dropped datagrams while this stream
    /// came in (its receive buffer was full: the host read too slowly),
    /// so the stream's lost packets may be the host's, not the path's.
    pub receiver_overflowed: bool,
}

impl Probed {
    /// What came back from a sender that kept its schedule to a receiver
    /// that kept up.
    pub fn on_time(stream: ProbeStream, truth: Option<GroundTruth>) -> Self {
        Probed {
            stream,
            truth,
            sender_late: false,
            receiver_overflowed: false,
        }
    }

    /// Whether the hosts, not the path, may have shaped what came back:
    /// the sender fell behind, or the receiver's socket overflowed and
    /// the stream lost packets. A strategy may send such a stream again.
    pub fn spoiled_by_host(&self) -> bool {
        self.sender_late
            || (self.receiver_overflowed
                && self.stream.received_count() < self.stream.packets.len())
    }
}

/// What a channel is, fixed once it is open.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelInfo {
    /// One line for reports.
    pub description: String,
    /// The fastest rate the sender can probe at (its own link, its host's
    /// pacing, the far end's limit), bit/s.
    pub max_rate_bps: f64,
    /// The probe size this channel wants (`size_bytes`, at its layer), if
    /// it has one: real paths have an MTU, a replay its recorded size.
    pub probe_size_bytes: Option<u32>,
    /// Most probe bytes the far end allows in one measurement, if it says.
    pub byte_limit: Option<u64>,
    /// Most packets the far end takes in one stream, if it says.
    pub stream_packet_limit: Option<usize>,
    /// Longest stream (first to last scheduled send, ns) the far end
    /// takes, if it has a limit.
    pub stream_span_limit_ns: Option<i64>,
}

impl ChannelInfo {
    /// A channel that says nothing of its probe size and sets no limit
    /// of bytes, packets or span.
    pub fn without_limits(description: impl Into<String>, max_rate_bps: f64) -> Self {
        ChannelInfo {
            description: description.into(),
            max_rate_bps,
            probe_size_bytes: None,
            byte_limit: None,
            stream_packet_limit: None,
            stream_span_limit_ns: None,
        }
    }
}

/// What a real channel learned about the sending host and its own link
/// (\[HOST\] section 3: a tool must say when the host, not the path,
/// limits it).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HostFindings {
    /// Highest rate the sending host paces probes at accurately, bit/s:
    /// the strategies never probe above it, so an available bandwidth
    /// beyond it is answered "at least" this.
    pub host_limit_bps: f64,
    /// Streams whose sender fell behind its schedule (host-limited).
    pub late_streams: usize,
    /// Streams queued in the sender's own interface: its kernel transmit
    /// stamps (taken after the qdisc) are spread wider than the schedule,
    /// so the sender's own link is the tight link at those rates.
    pub queued_streams: usize,
    /// Median rate at which those streams left the sender (transmit stamps).
    pub own_link_bps: Option<f64>,
    /// Transmit stamps the kernel did not deliver.
    pub tx_stamps_missing: u64,
    /// Packets the timestamping end dropped, by reason.
    pub drops: Vec<(&'static str, u64)>,
    /// The layer at which the channel counts `size_bytes` and rates.
    pub rate_layer: &'static str,
    /// Warnings about the receive path (offloads that merge packets, a
    /// reflector's stamps).
    pub warnings: Vec<crate::warning::Warning>,
    /// What the far end is and how it stamps, when the channel can tell
    /// (a reflector's layout and stamp quality).
    pub far_end: Option<String>,
    /// Share of this host's CPU time the hypervisor took (steal) from the
    /// session's opening to the report, where the host counts it.
    pub stolen_share: Option<f64>,
}

/// The path's truth, when the channel knows it (the simulator).
#[derive(Debug, Clone, PartialEq)]
pub struct PathTruth {
    /// Each link's sustained rate (its shaper's when slower), bit/s.
    pub link_bps: Vec<f64>,
}

impl PathTruth {
    /// The narrow link's capacity: the least sustained link rate.
    pub fn narrow_capacity_bps(&self) -> f64 {
        self.link_bps.iter().copied().fold(f64::INFINITY, f64::min)
    }
}

/// What a channel knows besides the packets; every part optional.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SideReport {
    /// Real channels: the sending host's limits and its own link.
    pub host: Option<HostFindings>,
    /// The simulator: the configured path.
    pub truth: Option<PathTruth>,
}

/// Why a channel could not deliver a stream.
#[derive(Debug)]
pub enum ChannelError {
    /// A replayed trace ran out of streams.
    TraceExhausted(usize),
    /// A replayed trace holds other packets than the strategy asks for.
    TraceDiverges { index: usize, reason: String },
    /// The request cannot be sent this way (a size or length outside
    /// what the channel carries, an option it does not take).
    BadRequest(String),
    /// The far end could not be reached.
    Unreachable(String),
    /// The far end refused (its version, key, limits or abilities).
    Refused(String),
    /// The far end is busy with other sessions: a session there is sure
    /// to end within `retry_after_ms` (it may end sooner).
    Busy { retry_after_ms: u64, reason: String },
    /// The far end or the path stayed silent past the timeout.
    TimedOut(String),
    /// The far end answered out of protocol.
    Protocol(String),
    /// A real channel's socket, session or timestamping failed.
    Io(String),
}

impl ChannelError {
    /// Whose move it is ([`crate::error::ErrorKind`]).
    pub fn kind(&self) -> crate::error::ErrorKind {
        use crate::error::ErrorKind as K;
        match self {
            // A trace that does not fit the replay is the input's fault.
            ChannelError::TraceExhausted(_)
            | ChannelError::TraceDiverges { .. }
            | ChannelError::BadRequest(_) => K::BadInput,
            ChannelError::Unreachable(_) => K::Unreachable,
            ChannelError::Refused(_) | ChannelError::Busy { .. } => K::Refused,
            ChannelError::TimedOut(_) => K::TimedOut,
            ChannelError::Protocol(_) => K::Protocol,
            ChannelError::Io(_) => K::Io,
        }
    }

    /// An operating-system error while doing `what`, with its kind.
    pub fn from_io(what: &str, e: &std::io::Error) -> ChannelError {
        use crate::error::ErrorKind as K;
        let text = format!("{what}: {e}");
        match K::of_io(e) {
            K::TimedOut => ChannelError::TimedOut(text),
            K::Unreachable => ChannelError::Unreachable(text),
            _ => ChannelError::Io(text),
        }
    }
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelError::TraceExhausted(i) => write!(
                f,
                "replayed trace has no stream left (the strategy asked for stream {i})"
            ),
            ChannelError::TraceDiverges { index, reason } => write!(
                f,
                "replayed trace diverges from the strategy at stream {index}: {reason}"
            ),
            ChannelError::Busy {
                retry_after_ms,
                reason,
            } => write!(
                f,
                "{reason}; a session ends within {:.1} s",
                *retry_after_ms as f64 / 1e3
            ),
            ChannelError::BadRequest(s)
            | ChannelError::Unreachable(s)
            | ChannelError::Refused(s)
            | ChannelError::TimedOut(s)
            | ChannelError::Protocol(s)
            | ChannelError::Io(s) => f.write_str(s),
        }
    }
}

impl std::error::Error for ChannelError {}

/// Sends probe streams somewhere and reports what arrived.
pub trait Channel {
    /// Sends one stream and waits for its per-packet records.
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError>;
    /// What the channel is: its description, rate ceiling and limits.
    fn info(&self) -> ChannelInfo;
    /// Time spent on the path so far, ns (simulated time for the simulator).
    fn elapsed_ns(&self) -> i64;
    /// Lets `ns` pass without probing (a tracker's pause between
    /// streams): the simulator moves its clock, a real channel sleeps and
    /// keeps its session; a replayed trace ignores it (its streams carry
    /// their own times).
    fn idle(&mut self, ns: i64) {
        let _ = ns;
    }
    /// Ends the measurement (a real channel closes its session and
    /// collects the far end's counters).
    fn close(&mut self) -> Result<(), ChannelError> {
        Ok(())
    }
    /// What the channel learned besides the packets.
    fn side_report(&self) -> SideReport {
        SideReport::default()
    }
    /// The strategy sends the last stream again: the one that came back
    /// does not count (a recorder marks it so that a replay re-sends it
    /// too).
    fn supersede_last(&mut self) {}
}

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        (**self).probe(request)
    }
    fn info(&self) -> ChannelInfo {
        (**self).info()
    }
    fn elapsed_ns(&self) -> i64 {
        (**self).elapsed_ns()
    }
    fn idle(&mut self, ns: i64) {
        (**self).idle(ns)
    }
    fn close(&mut self) -> Result<(), ChannelError> {
        (**self).close()
    }
    fn side_report(&self) -> SideReport {
        (**self).side_report()
    }
    fn supersede_last(&mut self) {
        (**self).supersede_last()
    }
}

/// A channel that keeps a copy of every stream (and truth) that passed
/// through it, for saving a run as a trace, and optionally shows each to
/// an observer as it comes back (progress, streamed results).
pub struct Recorder<'a, C> {
    pub inner: C,
    pub streams: Vec<ProbeStream>,
    pub truths: Vec<Option<GroundTruth>>,
    /// Per stream: its sender fell behind ([`Probed::sender_late`]), and
    /// the strategy sent it again ([`Channel::supersede_last`]).
    pub late: Vec<bool>,
    pub superseded: Vec<bool>,
    /// Per stream: the receiver's socket overflowed
    /// ([`Probed::receiver_overflowed`]).
    pub overflowed: Vec<bool>,
    observer: Option<Observer<'a>>,
}

/// What a [`Recorder`] calls with each stream that comes back.
pub type Observer<'a> = Box<dyn FnMut(&Probed) + 'a>;

impl<'a, C: Channel> Recorder<'a, C> {
    pub fn new(inner: C) -> Self {
        Recorder {
            inner,
            streams: Vec::new(),
            truths: Vec::new(),
            late: Vec::new(),
            superseded: Vec::new(),
            overflowed: Vec::new(),
            observer: None,
        }
    }

    /// A recorder that also calls `observer` with every stream.
    pub fn observed(inner: C, observer: impl FnMut(&Probed) + 'a) -> Self {
        Recorder {
            observer: Some(Box::new(observer)),
            ..Recorder::new(inner)
        }
    }
}

impl<C: Channel> Channel for Recorder<'_, C> {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let p = self.inner.probe(request)?;
        self.streams.push(p.stream.clone());
        self.truths.push(p.truth);
        self.late.push(p.sender_late);
        self.overflowed.push(p.receiver_overflowed);
        self.superseded.push(false);
        if let Some(f) = &mut self.observer {
            f(&p);
        }
        Ok(p)
    }
    fn info(&self) -> ChannelInfo {
        self.inner.info()
    }
    fn elapsed_ns(&self) -> i64 {
        self.inner.elapsed_ns()
    }
    fn idle(&mut self, ns: i64) {
        self.inner.idle(ns)
    }
    fn close(&mut self) -> Result<(), ChannelError> {
        self.inner.close()
    }
    fn side_report(&self) -> SideReport {
        self.inner.side_report()
    }
    fn supersede_last(&mut self) {
        if let Some(last) = self.superseded.last_mut() {
            *last = true;
        }
        self.inner.supersede_last()
    }
}

impl<C> Recorder<'_, C> {
    /// The streams the strategy kept (not sent again), with their
    /// positions among all recorded.
    pub fn kept(&self) -> impl Iterator<Item = (usize, &ProbeStream)> + Clone {
        self.streams
            .iter()
            .enumerate()
            .filter(|(i, _)| !self.superseded[*i])
    }

    /// Positions of the streams the strategy sent again, and of those
    /// whose sender fell behind, as trace metadata values (`1,4`).
    pub fn superseded_list(&self) -> String {
        positions(&self.superseded)
    }
    pub fn late_list(&self) -> String {
        positions(&self.late)
    }
    pub fn overflowed_list(&self) -> String {
        positions(&self.overflowed)
    }
}

fn positions(flags: &[bool]) -> String {
    flags
        .iter()
        .enumerate()
        .filter(|(_, &f)| f)
        .map(|(i, _)| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// A recorded run played back: stream `i` of the trace answers the
/// strategy's `i`-th request, which must have the same packets and send
/// gaps (within 1 ns per gap); so a saved run can be re-estimated offline
/// with the same strategy. Streams whose sender fell behind in the live
/// run come back marked late, and those whose receiver's socket
/// overflowed marked so, so that the strategy decides the same (sends
/// them again or keeps them) here too.
pub struct TraceChannel {
    streams: Vec<ProbeStream>,
    late: Vec<bool>,
    overflowed: Vec<bool>,
    next: usize,
    max_rate_bps: f64,
    elapsed_ns: i64,
}

impl TraceChannel {
    pub fn new(streams: Vec<ProbeStream>, max_rate_bps: f64) -> Self {
        TraceChannel {
            late: vec![false; streams.len()],
            overflowed: vec![false; streams.len()],
            streams,
            next: 0,
            max_rate_bps,
            elapsed_ns: 0,
        }
    }

    /// Marks the streams at `positions` as sent late by the live run.
    pub fn with_late_streams(mut self, positions: &[usize]) -> Self {
        mark(&mut self.late, positions);
        self
    }

    /// Marks the streams at `positions` as ones whose receiver's socket
    /// overflowed in the live run.
    pub fn with_overflowed_streams(mut self, positions: &[usize]) -> Self {
        mark(&mut self.overflowed, positions);
        self
    }
}

fn mark(flags: &mut [bool], positions: &[usize]) {
    for &i in positions {
        if let Some(f) = flags.get_mut(i) {
            *f = true;
        }
    }
}

impl Channel for TraceChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let index = self.next;
        let stream = self
            .streams
            .get(index)
            .cloned()
            .ok_or(ChannelError::TraceExhausted(index))?;
        self.next += 1;
        if stream.len() != request.offsets_ns.len() {
            return Err(ChannelError::TraceDiverges {
                index,
                reason: format!(
                    "{} packets recorded, {} asked for",
                    stream.len(),
                    request.offsets_ns.len()
                ),
            });
        }
        let t0 = stream.packets.first().map_or(0, |p| p.send_ns);
        for (i, (p, &off)) in stream.packets.iter().zip(&request.offsets_ns).enumerate() {
            if ((p.send_ns - t0) - off).abs() > 1 + i as i64 {
                return Err(ChannelError::TraceDiverges {
                    index,
                    reason: format!(
                        "packet {i} was sent at +{} ns, the strategy asks +{off} ns",
                        p.send_ns - t0
                    ),
                });
            }
        }
        self.elapsed_ns += stream.send_span_ns() as i64;
        Ok(Probed {
            stream,
            truth: None,
            sender_late: self.late[index],
            receiver_overflowed: self.overflowed[index],
        })
    }

    fn info(&self) -> ChannelInfo {
        ChannelInfo {
            description: format!("trace replay ({} streams)", self.streams.len()),
            max_rate_bps: self.max_rate_bps,
            // The recorded probes' size, so the strategy asks for the same.
            probe_size_bytes: self
                .streams
                .first()
                .and_then(|s| s.packets.first())
                .map(|p| p.size_bytes),
            byte_limit: None,
            stream_packet_limit: None,
            stream_span_limit_ns: None,
        }
    }

    fn elapsed_ns(&self) -> i64 {
        self.elapsed_ns
    }
}

/// What came back for one TTL-limited probe.
#[derive(Debug, Clone, PartialEq)]
pub struct HopReply {
    /// From the send of the probe (or its head's first packet) to the
    /// reply, ns; `None`: no reply within the channel's timeout.
    pub rtt_ns: Option<i64>,
    /// Who answered (an address, or the simulated hop).
    pub responder: Option<String>,
    /// The destination answered (port unreachable), not a router.
    pub destination: bool,
}

/// Sends TTL-limited probes and reports ICMP replies (per-hop capacity).
pub trait HopChannel {
    /// Sends `head_packets` packets of `head_bytes` that cross the whole
    /// path, then one probe of `size_bytes` (IP layer) with `ttl`, and
    /// waits for the probe's reply.
    fn probe_hop(
        &mut self,
        ttl: u8,
        size_bytes: u32,
        head_packets: u32,
        head_bytes: u32,
    ) -> Result<HopReply, ChannelError>;
    /// Largest IP packet the path's first link carries.
    fn mtu_bytes(&self) -> u32;
    /// Time spent so far, ns (simulated time on the simulator).
    fn elapsed_ns(&self) -> i64;
    fn describe(&self) -> String;
    /// What the channel learned besides the replies.
    fn side_report(&self) -> SideReport {
        SideReport::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::ProbePacket;

    fn stream(send: &[i64]) -> ProbeStream {
        ProbeStream::new(
            0,
            send.iter()
                .map(|&s| ProbePacket {
                    size_bytes: 1500,
                    send_ns: s,
                    recv_ns: Some(s + 1000),
                })
                .collect(),
        )
    }

    #[test]
    fn a_trace_replays_only_what_it_recorded() {
        let recorded = vec![stream(&[100, 200, 300]), stream(&[0, 50])];
        let mut ch = TraceChannel::new(recorded, 1e9);
        assert_eq!(ch.info().probe_size_bytes, Some(1500));
        // Same gaps, shifted start: accepted; path time is the send span.
        let p = ch
            .probe(&StreamRequest::from_send_times(&[0, 100, 200], 1500))
            .unwrap();
        assert_eq!(p.stream.len(), 3);
        assert_eq!(ch.elapsed_ns(), 200);
        // Gap 50 recorded, 60 asked: diverges and says where.
        let e = ch
            .probe(&StreamRequest::from_send_times(&[0, 60], 1500))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "replayed trace diverges from the strategy at stream 1: packet 1 was sent at +50 ns, the strategy asks +60 ns"
        );
        assert!(matches!(
            ch.probe(&StreamRequest::from_send_times(&[0], 1500)),
            Err(ChannelError::TraceExhausted(2))
        ));
    }

    #[test]
    fn a_recorder_keeps_what_passed() {
        let seen = std::cell::Cell::new(0);
        let mut ch = Recorder::observed(TraceChannel::new(vec![stream(&[0, 10])], 1e9), |p| {
            seen.set(seen.get() + p.stream.len())
        });
        ch.probe(&StreamRequest::from_send_times(&[0, 10], 1500))
            .unwrap();
        assert_eq!(seen.get(), 2);
        assert_eq!(ch.streams.len(), 1);
        assert_eq!(ch.truths, vec![None]);
        assert_eq!(ch.info().max_rate_bps, 1e9);
    }

    /// Three recorded streams, the second sent late: the replay says so;
    /// the recorder marks what the strategy sent again and keeps the rest
    /// with their positions.
    #[test]
    fn late_and_superseded_streams_are_recorded_and_replayed() {
        let recorded = vec![stream(&[0, 10]), stream(&[0, 10]), stream(&[0, 20])];
        let mut ch = Recorder::new(TraceChannel::new(recorded, 1e9).with_late_streams(&[1, 7]));
        let req = StreamRequest::from_send_times(&[0, 10], 1500);
        assert!(!ch.probe(&req).unwrap().sender_late);
        assert!(ch.probe(&req).unwrap().sender_late);
        ch.supersede_last();
        assert!(
            !ch.probe(&StreamRequest::from_send_times(&[0, 20], 1500))
                .unwrap()
                .sender_late
        );
        assert_eq!(ch.late_list(), "1");
        assert_eq!(ch.superseded_list(), "1");
        let kept: Vec<usize> = ch.kept().map(|(i, _)| i).collect();
        assert_eq!(kept, vec![0, 2]);
    }

    /// Streams replayed as overflowed come back so, and the recorder
    /// lists them.
    #[test]
    fn overflowed_streams_are_recorded_and_replayed() {
        let recorded = vec![stream(&[0, 10]), stream(&[0, 10])];
        let mut ch =
            Recorder::new(TraceChannel::new(recorded, 1e9).with_overflowed_streams(&[0, 9]));
        let req = StreamRequest::from_send_times(&[0, 10], 1500);
        assert!(ch.probe(&req).unwrap().receiver_overflowed);
        assert!(!ch.probe(&req).unwrap().receiver_overflowed);
        assert_eq!(ch.overflowed_list(), "0");
        assert_eq!(ch.late_list(), "");
    }

    /// A late sender spoils a stream; an overflowing receiver only one
    /// that lost packets (what the socket dropped was then maybe its own);
    /// neither leaves it unspoiled.
    #[test]
    fn spoiled_by_host_by_hand() {
        let whole = stream(&[0, 10, 20]);
        let mut lossy = whole.clone();
        lossy.packets[1].recv_ns = None;
        let p = |s: &ProbeStream, late, overflowed| Probed {
            stream: s.clone(),
            truth: None,
            sender_late: late,
            receiver_overflowed: overflowed,
        };
        assert!(!p(&whole, false, false).spoiled_by_host());
        assert!(!p(&lossy, false, false).spoiled_by_host());
        assert!(!p(&whole, false, true).spoiled_by_host());
        assert!(p(&lossy, false, true).spoiled_by_host());
        assert!(p(&whole, true, false).spoiled_by_host());
    }

    #[test]
    fn the_narrow_link_is_the_slowest() {
        let t = PathTruth {
            link_bps: vec![40e9, 10e9, 25e9],
        };
        assert_eq!(t.narrow_capacity_bps(), 10e9);
    }
}
