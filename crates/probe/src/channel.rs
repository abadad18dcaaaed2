//! Channels: where a probing strategy sends a probe schedule and gets back
//! one record per packet. The strategy does not know whether the other end
//! is the simulator, a recorded trace, a server or a TWAMP-light reflector.

use tightlink_core::ProbeStream;
use tightlink_sim::{PathSpec, SimPath};

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
/// bookkeeping; later the lab's qdisc counters).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GroundTruth {
    /// Tight-link capacity minus the cross traffic over the stream's span.
    pub available_bps: f64,
    /// Its min and max over sub-windows of the span.
    pub min_bps: f64,
    pub max_bps: f64,
}

/// What came back for one stream.
#[derive(Debug, Clone, PartialEq)]
pub struct Probed {
    pub stream: ProbeStream,
    /// Ground truth for this stream, when the channel knows one.
    pub truth: Option<GroundTruth>,
}

impl<C: Channel + ?Sized> Channel for Box<C> {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        (**self).probe(request)
    }
    fn max_rate_bps(&self) -> f64 {
        (**self).max_rate_bps()
    }
    fn elapsed_ns(&self) -> f64 {
        (**self).elapsed_ns()
    }
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn probe_size_bytes(&self) -> Option<u32> {
        (**self).probe_size_bytes()
    }
    fn host(&self) -> Option<HostFindings> {
        (**self).host()
    }
    fn close(&mut self) -> Result<(), ChannelError> {
        (**self).close()
    }
    fn byte_limit(&self) -> Option<u64> {
        (**self).byte_limit()
    }
    fn narrow_capacity_bps(&self) -> Option<f64> {
        (**self).narrow_capacity_bps()
    }
}

/// What a real channel learned about the sending host and its own link
/// (host paper: a tool must say when the host, not the path, limits it).
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
    /// Warnings about the receive path (offloads that merge packets).
    pub warnings: Vec<String>,
}

/// A channel that keeps a copy of every stream (and truth) that passed
/// through it: `--save-trace` and `tightlink simulate`.
pub struct Recorder<C> {
    pub inner: C,
    pub streams: Vec<ProbeStream>,
    pub truths: Vec<Option<GroundTruth>>,
}

impl<C: Channel> Recorder<C> {
    pub fn new(inner: C) -> Self {
        Recorder {
            inner,
            streams: Vec::new(),
            truths: Vec::new(),
        }
    }
}

impl<C: Channel> Channel for Recorder<C> {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let p = self.inner.probe(request)?;
        self.streams.push(p.stream.clone());
        self.truths.push(p.truth);
        Ok(p)
    }

    fn max_rate_bps(&self) -> f64 {
        self.inner.max_rate_bps()
    }

    fn elapsed_ns(&self) -> f64 {
        self.inner.elapsed_ns()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn probe_size_bytes(&self) -> Option<u32> {
        self.inner.probe_size_bytes()
    }

    fn host(&self) -> Option<HostFindings> {
        self.inner.host()
    }

    fn close(&mut self) -> Result<(), ChannelError> {
        self.inner.close()
    }

    fn byte_limit(&self) -> Option<u64> {
        self.inner.byte_limit()
    }

    fn narrow_capacity_bps(&self) -> Option<f64> {
        self.inner.narrow_capacity_bps()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    #[error("replayed trace has no stream left (the strategy asked for stream {0})")]
    TraceExhausted(usize),
    #[error("replayed trace diverges from the strategy at stream {index}: {reason}")]
    TraceDiverges { index: usize, reason: String },
    /// A real channel's socket or timestamping failed.
    #[error("{0}")]
    Io(String),
}

/// Sends probe streams somewhere and reports what arrived.
pub trait Channel {
    /// Sends one stream and waits for its per-packet records.
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError>;
    /// The fastest rate the sender can probe at (its own link), bit/s.
    fn max_rate_bps(&self) -> f64;
    /// Time spent on the path so far, ns (simulated time for the simulator).
    fn elapsed_ns(&self) -> f64;
    /// A one-line description for reports.
    fn describe(&self) -> String;
    /// The probe size this channel wants (`size_bytes`, at its layer), if
    /// it has one: real paths have an MTU.
    fn probe_size_bytes(&self) -> Option<u32> {
        None
    }
    /// What a real channel found about its sending host.
    fn host(&self) -> Option<HostFindings> {
        None
    }
    /// Most probe bytes the far end allows in one measurement, if it says.
    fn byte_limit(&self) -> Option<u64> {
        None
    }
    /// Ends the measurement (a real channel closes its session and
    /// collects the far end's counters).
    fn close(&mut self) -> Result<(), ChannelError> {
        Ok(())
    }
    /// The narrow link's capacity when the channel knows it (the
    /// simulator's ground truth for capacity estimates).
    fn narrow_capacity_bps(&self) -> Option<f64> {
        None
    }
}

/// The simulated path as a channel.
pub struct SimChannel {
    path: SimPath,
    next_id: u64,
    start_ns: f64,
    description: String,
}

impl SimChannel {
    pub fn new(spec: PathSpec, description: impl Into<String>) -> Self {
        let path = SimPath::new(spec);
        SimChannel {
            start_ns: path.now_ns(),
            path,
            next_id: 0,
            description: description.into(),
        }
    }

    pub fn path(&self) -> &SimPath {
        &self.path
    }
}

impl Channel for SimChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let s = self
            .path
            .send_stream(self.next_id, &request.offsets_ns, &request.sizes);
        self.next_id += 1;
        Ok(Probed {
            stream: s.stream,
            truth: s.truth.map(|t| GroundTruth {
                available_bps: t.available_bps,
                min_bps: t.min_bps,
                max_bps: t.max_bps,
            }),
        })
    }

    fn max_rate_bps(&self) -> f64 {
        self.path
            .spec()
            .hops
            .first()
            .map_or(0.0, |h| h.hop.capacity_bps)
    }

    fn elapsed_ns(&self) -> f64 {
        self.path.now_ns() - self.start_ns
    }

    fn describe(&self) -> String {
        self.description.clone()
    }

    fn narrow_capacity_bps(&self) -> Option<f64> {
        Some(self.path.spec().narrow_capacity_bps())
    }
}

/// A recorded run played back: stream `i` of the trace answers the
/// strategy's `i`-th request, which must have the same packets and send
/// gaps (within 1 ns per gap); so a run saved with `--save-trace` can be
/// re-estimated offline with the same strategy.
pub struct TraceChannel {
    streams: Vec<ProbeStream>,
    next: usize,
    max_rate_bps: f64,
    elapsed_ns: f64,
}

impl TraceChannel {
    pub fn new(streams: Vec<ProbeStream>, max_rate_bps: f64) -> Self {
        TraceChannel {
            streams,
            next: 0,
            max_rate_bps,
            elapsed_ns: 0.0,
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
        self.elapsed_ns += stream.send_span_ns();
        Ok(Probed {
            stream,
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
        format!("trace replay ({} streams)", self.streams.len())
    }

    /// The recorded probes' size, so the strategy asks for the same.
    fn probe_size_bytes(&self) -> Option<u32> {
        self.streams
            .first()
            .and_then(|s| s.packets.first())
            .map(|p| p.size_bytes)
    }
}
