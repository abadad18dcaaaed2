//! What a transfer reports as it goes (its progress intervals and the
//! rate controller's updates), and the small helpers every part of the
//! transfer engine shares.

use tightlink_core::channel::ChannelError;
use tightlink_core::rapid::RapidUpdate;

/// One progress interval.
#[derive(Debug, Clone, PartialEq)]
pub struct TransferInterval {
    /// Since the first data packet, ns.
    pub start_ns: i64,
    pub end_ns: i64,
    /// Bytes the server came to hold in order during the interval.
    pub delivered_bytes: u64,
    pub sent_bytes: u64,
    pub retransmitted_bytes: u64,
    /// The controller's rate at the interval's end (frame bit/s).
    pub rate_bps: f64,
    /// The last estimate read in the interval, if any.
    pub estimate_bps: Option<f64>,
    /// Median round trip of the streams whose stamps came back.
    pub rtt_ns: Option<i64>,
    /// Bytes delivered in all so far.
    pub total_delivered_bytes: u64,
}

impl TransferInterval {
    /// Goodput over the interval (payload bit/s).
    pub fn goodput_bps(&self) -> f64 {
        self.delivered_bytes as f64 * 8e9 / (self.end_ns - self.start_ns).max(1) as f64
    }
}

pub enum TransferEvent<'a> {
    Interval(&'a TransferInterval),
    Update(&'a RapidUpdate),
}

/// A transfer failure, said as it is.
pub(crate) fn err(what: impl Into<String>) -> ChannelError {
    ChannelError::Io(what.into())
}

/// Lower-case hexadecimal of `b` (a digest as the peers print it).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
