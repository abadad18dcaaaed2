//! tightlink-wire: the bytes on the wire, apart from sockets and the core.
//!
//! Probe packets are TWAMP-light test packets (RFC 5357, section 4.1.2,
//! unauthenticated mode): sequence number, NTP timestamp and error
//! estimate, then padding. tightlink carries its own fields at the start of
//! the padding (session, stream, position, schedule offset), so Wireshark's
//! TWAMP dissector shows the packets and a standard TWAMP-light reflector
//! can serve as the far end (its reply, section 4.2.1, is
//! [`twamp::ReflectorPacket`]).
//!
//! Every format is a zero-copy view over a byte buffer (`Packet<T:
//! AsRef<[u8]>>`) with `new_checked` (after which no accessor panics) and a
//! `Repr` with `parse` / `emit` / `buffer_len`. Anything that does not parse
//! is a [`DropReason`], counted by [`DropCounters`].

pub mod control;
pub mod data;
pub mod ntp;
pub mod stamp_auth;
pub mod twamp;
pub mod udp4;

pub use ntp::{ErrorEstimate, NtpTimestamp};
pub use twamp::{ProbeRepr, ReflectorPacket, ReflectorRepr, SenderPacket};

/// Why a received packet was not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
pub enum DropReason {
    #[error("too short for a TWAMP test packet with tightlink fields")]
    TooShort,
    #[error("no tightlink magic in the Extra Padding TLV (not a tightlink probe)")]
    NotTightlink,
    #[error("tightlink field version not understood")]
    UnknownVersion,
    #[error("session id not open on this end")]
    UnknownSession,
    #[error("fields out of range (position beyond the stream length, or zero length)")]
    Malformed,
    #[error("from an address other than the session's peer")]
    WrongPeer,
    #[error("beyond what the session announced (stream, packet count or rate)")]
    OverAnnounced,
    #[error("arrived after its stream was closed")]
    Late,
    #[error("a second copy of a packet already received (the path duplicated it)")]
    Duplicate,
    #[error("STAMP authentication failed: an HMAC does not match the key")]
    BadHmac,
}

impl DropReason {
    pub const ALL: [DropReason; 10] = [
        DropReason::TooShort,
        DropReason::NotTightlink,
        DropReason::UnknownVersion,
        DropReason::UnknownSession,
        DropReason::Malformed,
        DropReason::WrongPeer,
        DropReason::OverAnnounced,
        DropReason::Late,
        DropReason::Duplicate,
        DropReason::BadHmac,
    ];

    /// A short name for counters and logs.
    pub fn name(self) -> &'static str {
        match self {
            DropReason::TooShort => "too_short",
            DropReason::NotTightlink => "not_tightlink",
            DropReason::UnknownVersion => "unknown_version",
            DropReason::UnknownSession => "unknown_session",
            DropReason::Malformed => "malformed",
            DropReason::WrongPeer => "wrong_peer",
            DropReason::OverAnnounced => "over_announced",
            DropReason::Late => "late",
            DropReason::Duplicate => "duplicate",
            DropReason::BadHmac => "bad_hmac",
        }
    }
}

/// Dropped-packet counts by reason: a fixed array, so counting costs no
/// allocation whatever a hostile sender sends.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DropCounters {
    counts: [u64; DropReason::ALL.len()],
}

impl DropCounters {
    pub fn count(&mut self, reason: DropReason) {
        self.add(reason, 1);
    }

    pub fn add(&mut self, reason: DropReason, n: u64) {
        let i = DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .expect("every reason is in ALL");
        self.counts[i] = self.counts[i].saturating_add(n);
    }

    pub fn get(&self, reason: DropReason) -> u64 {
        DropReason::ALL
            .iter()
            .position(|r| *r == reason)
            .map_or(0, |i| self.counts[i])
    }

    /// Adds another set of counts to these.
    pub fn merge(&mut self, other: &DropCounters) {
        for (a, b) in self.counts.iter_mut().zip(other.counts) {
            *a = a.saturating_add(b);
        }
    }

    pub fn total(&self) -> u64 {
        self.counts.iter().fold(0u64, |a, &c| a.saturating_add(c))
    }

    /// (name, count) for every reason with a non-zero count.
    pub fn nonzero(&self) -> Vec<(&'static str, u64)> {
        DropReason::ALL
            .iter()
            .zip(self.counts)
            .filter(|(_, c)| *c > 0)
            .map(|(r, c)| (r.name(), c))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_count_by_reason() {
        let mut c = DropCounters::default();
        c.count(DropReason::TooShort);
        c.count(DropReason::TooShort);
        c.count(DropReason::UnknownSession);
        assert_eq!(c.get(DropReason::TooShort), 2);
        assert_eq!(c.get(DropReason::Malformed), 0);
        assert_eq!(c.total(), 3);
        assert_eq!(c.nonzero(), vec![("too_short", 2), ("unknown_session", 1)]);
        let mut d = DropCounters::default();
        d.count(DropReason::Late);
        d.merge(&c);
        assert_eq!(
            (
                d.get(DropReason::TooShort),
                d.get(DropReason::Late),
                d.total()
            ),
            (2, 1, 4)
        );
    }
}
