//! The simulated path behind the core's channel traits: what `estimate`,
//! `capacity` and `hops` probe when the target is `sim:`.

use tightlink_core::channel::{
    Channel, ChannelError, ChannelInfo, HopChannel, HopReply, PathTruth, Probed, SideReport,
    StreamRequest, STALL_TO_SEND_AGAIN_NS,
};

use crate::path::{PathSpec, SimPath, TtlPacket};

/// The simulated path as a [`Channel`].
pub struct SimChannel {
    path: SimPath,
    next_id: u64,
    start_ns: f64,
    description: String,
    /// The caller's ceiling on probe rates (a user's `--max-rate`).
    rate_cap_bps: Option<f64>,
}

impl SimChannel {
    pub fn new(spec: PathSpec, description: impl Into<String>) -> Self {
        let path = SimPath::new(spec);
        SimChannel {
            start_ns: path.now_ns(),
            path,
            next_id: 0,
            description: description.into(),
            rate_cap_bps: None,
        }
    }

    /// Never offers strategies a rate above `bps` (the sender's link
    /// stays the first hop's): what `--max-rate` does to a real sender.
    pub fn with_max_rate(self, bps: Option<f64>) -> Self {
        SimChannel {
            rate_cap_bps: bps,
            ..self
        }
    }

    pub fn path(&self) -> &SimPath {
        &self.path
    }
}

/// Each link's sustained rate (its shaper's when slower).
fn path_truth(spec: &PathSpec) -> PathTruth {
    PathTruth {
        link_bps: spec.hops.iter().map(|h| h.hop.sustained_bps()).collect(),
    }
}

impl Channel for SimChannel {
    fn probe(&mut self, request: &StreamRequest) -> Result<Probed, ChannelError> {
        let s = self
            .path
            .send_stream(self.next_id, &request.offsets_ns, &request.sizes);
        self.next_id += 1;
        Ok(Probed {
            sender_late: s.worst_lag_ns >= STALL_TO_SEND_AGAIN_NS as f64,
            ..Probed::on_time(s.stream, s.truth)
        })
    }

    fn info(&self) -> ChannelInfo {
        let first_hop_bps = self
            .path
            .spec()
            .hops
            .first()
            .map_or(0.0, |h| h.hop.capacity_bps);
        ChannelInfo::without_limits(
            self.description.clone(),
            first_hop_bps.min(self.rate_cap_bps.unwrap_or(f64::INFINITY)),
        )
    }

    fn elapsed_ns(&self) -> i64 {
        (self.path.now_ns() - self.start_ns).round() as i64
    }

    fn idle(&mut self, ns: i64) {
        self.path.idle(ns as f64);
    }

    fn side_report(&self) -> SideReport {
        SideReport {
            host: None,
            truth: Some(path_truth(self.path.spec())),
        }
    }
}

/// The simulated path as a [`HopChannel`]: each probe (with its head) is
/// one TTL-limited stream, then `gap_ns` of idle time.
pub struct SimHopChannel {
    path: SimPath,
    timeout_ns: i64,
    start_ns: f64,
}

/// The simulated first link's MTU (IP bytes).
const SIM_MTU_BYTES: u32 = 1500;

impl SimHopChannel {
    /// `gap_ns`: idle time after each probe; `timeout_ns`: replies later
    /// than this count as lost, as on a real path.
    pub fn new(mut spec: PathSpec, gap_ns: i64, timeout_ns: i64) -> Self {
        spec.idle_ns = gap_ns as f64;
        let path = SimPath::new(spec);
        SimHopChannel {
            start_ns: path.now_ns(),
            path,
            timeout_ns,
        }
    }

    pub fn spec(&self) -> &PathSpec {
        self.path.spec()
    }
}

impl HopChannel for SimHopChannel {
    fn probe_hop(
        &mut self,
        ttl: u8,
        size_bytes: u32,
        head_packets: u32,
        head_bytes: u32,
    ) -> Result<HopReply, ChannelError> {
        let mut packets: Vec<TtlPacket> = (0..head_packets)
            .map(|_| TtlPacket {
                offset_ns: 0,
                size_bytes: head_bytes,
                ttl: u8::MAX,
            })
            .collect();
        packets.push(TtlPacket {
            offset_ns: 0,
            size_bytes,
            ttl,
        });
        let out = self.path.send_ttl_stream(&packets);
        let first_send = out[0].send_ns;
        let probe = out.last().expect("the probe");
        let reply = probe
            .reply
            .filter(|r| r.at_ns - first_send <= self.timeout_ns);
        // The next probe leaves after this one's reply (or timeout).
        let waited = reply.map_or(self.timeout_ns, |r| r.at_ns - first_send);
        self.path.idle(waited as f64);
        Ok(HopReply {
            rtt_ns: reply.map(|r| r.at_ns - first_send),
            responder: reply.map(|r| {
                if r.destination {
                    "receiver".to_string()
                } else {
                    format!("router {}", r.hop)
                }
            }),
            destination: reply.is_some_and(|r| r.destination),
        })
    }

    fn mtu_bytes(&self) -> u32 {
        SIM_MTU_BYTES
    }

    fn elapsed_ns(&self) -> i64 {
        (self.path.now_ns() - self.start_ns).round() as i64
    }

    fn describe(&self) -> String {
        let hops: Vec<String> = self
            .path
            .spec()
            .hops
            .iter()
            .map(|h| match h.hop.shaper {
                Some(s) => format!(
                    "{:.0}M shaped to {:.0}M",
                    h.hop.capacity_bps / 1e6,
                    s.rate_bps / 1e6
                ),
                None => format!("{:.0}M", h.hop.capacity_bps / 1e6),
            })
            .collect();
        format!("simulated path {}", hops.join(" -> "))
    }

    fn side_report(&self) -> SideReport {
        SideReport {
            host: None,
            truth: Some(path_truth(self.path.spec())),
        }
    }
}
