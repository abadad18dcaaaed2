//! What a report tells its reader besides the number: a warning with a
//! stable code for programs (JSON's `warning_codes`, the agent's
//! counters, Python) and a sentence for people. The code names what was
//! seen; the text gives its figures and what it does to the answer.
//! Codes never change meaning once shipped; a new kind gets a new code.

use std::fmt;

/// What kind of thing a warning reports. `name()` is the stable code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WarningCode {
    // The path's answer.
    /// The available bandwidth swung from stream to stream.
    Swing,
    /// Streams met bursts of cross traffic faster than the link.
    Burst,
    /// Streams were held at once (a pause of the path, or a batch).
    Pause,
    /// One step of queue in a single-rate stream carried the reading.
    SingleStep,
    /// Trend tests on streams stamped in receive batches.
    CoalescedTrend,
    /// Chirps of jumbo frames that the receiver batched.
    JumboChirps,
    /// The byte budget ran out before the answer settled.
    UnsettledBudget,
    /// A token bucket shaper passed the streams.
    Shaper,
    /// The top sub-stream passed whole.
    WholeAtTop,
    /// Shaper trains came out slower than the answer.
    SlowTrains,
    /// A queue stood under nearly every one of the trend tests' streams.
    StandingQueue,
    /// The shaper check's short train showed a small head, then a tail
    /// under the answer.
    SmallHead,
    /// Why no stream could be used.
    Unusable,
    /// Streams lost probes even at their lowest rates.
    LossAtLowestRates,
    // The hosts at either end.
    /// The receiving socket or ring overflowed.
    ReceiverDrops,
    /// The sender fell behind its schedule with no queue of its own.
    SenderLate,
    /// A hypervisor took CPU time while the host measured.
    CpuStolen,
    /// The hosts' pace, not the path, set the streams: the answer is a
    /// lower bound.
    HostLowerBound,
    /// Offloads that merge packets and their stamps.
    MergingOffloads,
    /// The xdp backend bypasses this host's qdisc.
    XdpPastQdisc,
    /// Frames in the packet ring that were not the probes.
    MalformedFrames,
    // The path's handling of the probes.
    /// Probes arrived out of order.
    Reordered,
    /// Probes arrived twice.
    Duplicated,
    // The far end.
    /// The reflector took only smaller test packets.
    FallbackProbeSize,
    /// The reflector's receive stamps are coarse.
    CoarseStamps,
    /// The reflector's receive stamps lag at times.
    LaggingStamps,
    /// Replies came without a kernel receive stamp.
    UnstampedReplies,
    /// The reflector sent held trains back late.
    ReflectorLate,
    /// Held trains lost probes on the way out.
    ForwardLoss,
    // Capacity and hops.
    /// Packet pairs arrived faster than the sender can send them.
    BatchedPairs,
    /// Packet pairs lost a packet.
    LostPairs,
    /// The sender, not the path, set the pairs' gaps.
    SenderLimitedPairs,
    /// Trains' tails arrived faster than they were sent.
    FastTails,
    /// Dispersion does not scale with the probe size.
    SizeScaling,
    /// CapProbe did not converge.
    Unsettled,
    /// No pair mode reaches the trains' dispersion rate.
    BelowAdr,
    /// Pairs and a shaper's trains disagree on the rate.
    PartsFromShaper,
    /// A later hop queued heads an earlier one passed.
    HeadFit,
    /// Anything else a part reports (counted under one code).
    Other,
}

impl WarningCode {
    pub const ALL: [WarningCode; 39] = [
        WarningCode::Swing,
        WarningCode::Burst,
        WarningCode::Pause,
        WarningCode::SingleStep,
        WarningCode::CoalescedTrend,
        WarningCode::JumboChirps,
        WarningCode::UnsettledBudget,
        WarningCode::Shaper,
        WarningCode::WholeAtTop,
        WarningCode::SlowTrains,
        WarningCode::StandingQueue,
        WarningCode::SmallHead,
        WarningCode::Unusable,
        WarningCode::LossAtLowestRates,
        WarningCode::ReceiverDrops,
        WarningCode::SenderLate,
        WarningCode::CpuStolen,
        WarningCode::HostLowerBound,
        WarningCode::MergingOffloads,
        WarningCode::XdpPastQdisc,
        WarningCode::MalformedFrames,
        WarningCode::Reordered,
        WarningCode::Duplicated,
        WarningCode::FallbackProbeSize,
        WarningCode::CoarseStamps,
        WarningCode::LaggingStamps,
        WarningCode::UnstampedReplies,
        WarningCode::ReflectorLate,
        WarningCode::ForwardLoss,
        WarningCode::BatchedPairs,
        WarningCode::LostPairs,
        WarningCode::SenderLimitedPairs,
        WarningCode::FastTails,
        WarningCode::SizeScaling,
        WarningCode::Unsettled,
        WarningCode::BelowAdr,
        WarningCode::PartsFromShaper,
        WarningCode::HeadFit,
        WarningCode::Other,
    ];

    /// The stable code: JSON's `warning_codes`, the agent's `code` label.
    pub fn name(self) -> &'static str {
        match self {
            WarningCode::Swing => "swing",
            WarningCode::Burst => "burst",
            WarningCode::Pause => "pause",
            WarningCode::SingleStep => "single-step",
            WarningCode::CoalescedTrend => "coalesced-trend",
            WarningCode::JumboChirps => "jumbo-chirps",
            WarningCode::UnsettledBudget => "unsettled-budget",
            WarningCode::Shaper => "shaper",
            WarningCode::WholeAtTop => "whole-at-top",
            WarningCode::SlowTrains => "slow-trains",
            WarningCode::StandingQueue => "standing-queue",
            WarningCode::SmallHead => "small-head",
            WarningCode::Unusable => "unusable",
            WarningCode::LossAtLowestRates => "loss-at-lowest-rates",
            WarningCode::ReceiverDrops => "receiver-drops",
            WarningCode::SenderLate => "sender-late",
            WarningCode::CpuStolen => "cpu-stolen",
            WarningCode::HostLowerBound => "host-lower-bound",
            WarningCode::MergingOffloads => "merging-offloads",
            WarningCode::XdpPastQdisc => "xdp-past-qdisc",
            WarningCode::MalformedFrames => "malformed-frames",
            WarningCode::Reordered => "reordered",
            WarningCode::Duplicated => "duplicated",
            WarningCode::FallbackProbeSize => "fallback-probe-size",
            WarningCode::CoarseStamps => "coarse-stamps",
            WarningCode::LaggingStamps => "lagging-stamps",
            WarningCode::UnstampedReplies => "unstamped-replies",
            WarningCode::ReflectorLate => "reflector-late",
            WarningCode::ForwardLoss => "forward-loss",
            WarningCode::BatchedPairs => "batched-pairs",
            WarningCode::LostPairs => "lost-pairs",
            WarningCode::SenderLimitedPairs => "sender-limited-pairs",
            WarningCode::FastTails => "fast-tails",
            WarningCode::SizeScaling => "size-scaling",
            WarningCode::Unsettled => "unsettled",
            WarningCode::BelowAdr => "below-adr",
            WarningCode::PartsFromShaper => "parts-from-shaper",
            WarningCode::HeadFit => "head-fit",
            WarningCode::Other => "other",
        }
    }

    /// The code of a name, for readers of stored reports.
    pub fn from_name(name: &str) -> Option<WarningCode> {
        WarningCode::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for WarningCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One warning: its code and its sentence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    pub code: WarningCode,
    pub text: String,
}

impl Warning {
    pub fn new(code: WarningCode, text: impl Into<String>) -> Warning {
        Warning {
            code,
            text: text.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn codes_are_distinct_and_read_back() {
        let names: BTreeSet<&str> = WarningCode::ALL.iter().map(|c| c.name()).collect();
        assert_eq!(names.len(), WarningCode::ALL.len());
        for c in WarningCode::ALL {
            assert_eq!(WarningCode::from_name(c.name()), Some(c));
            // Prometheus label values and JSON keys stay plain.
            assert!(c
                .name()
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b == b'-'));
        }
        assert_eq!(WarningCode::from_name("nonsense"), None);
    }

    #[test]
    fn a_warning_displays_its_text() {
        let w = Warning::new(WarningCode::Swing, "it swung");
        assert_eq!(w.to_string(), "it swung");
        assert_eq!(w.code.to_string(), "swing");
    }
}
