//! `tightlink capture`: a pcap file of one interface (both directions,
//! nanosecond kernel stamps) for `analyze-tcp`, where tcpdump is not
//! installed. The socket work is in `tightlink_capture::live`.

use anyhow::{bail, Context, Result};
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;
use tightlink_capture::live::{capture_to_pcap, LiveOptions};

#[derive(Args)]
pub struct CaptureArgs {
    /// The interface to capture on (e.g. eth0).
    #[arg(long, short = 'i')]
    pub interface: String,
    /// The pcap file to write.
    #[arg(long, short = 'w')]
    pub write: PathBuf,
    /// How long to capture (e.g. 10s, 500ms); SIGINT or SIGTERM ends it
    /// earlier with a complete file.
    #[arg(long, default_value = "10s")]
    pub duration: String,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Bytes kept of each frame (headers are enough for analyze-tcp).
    #[arg(long, default_value_t = 128)]
    pub snaplen: u32,
    /// Kernel buffer for frames not yet written, in MB.
    #[arg(long, default_value_t = 64)]
    pub buffer_mb: usize,
}

pub fn run(a: CaptureArgs) -> Result<()> {
    let ns = tightlink_core::units::parse_time_ns(&a.duration)
        .with_context(|| format!("--duration {}", a.duration))?;
    let duration = Duration::from_nanos(ns as u64);
    if duration.is_zero() {
        tightlink_measure::bad_input!("--duration {}: a capture needs some time", a.duration);
    }
    if a.count == Some(0) {
        tightlink_measure::bad_input!("--count 0: stop after at least one packet");
    }
    if duration > Duration::from_secs(3600) {
        tightlink_measure::bad_input!("--duration {}: at most 1 hour", a.duration);
    }
    if !(64..=65535).contains(&a.snaplen) {
        tightlink_measure::bad_input!("--snaplen {}: must be within 64..65535", a.snaplen);
    }
    if !(1..=1024).contains(&a.buffer_mb) {
        tightlink_measure::bad_input!("--buffer-mb {}: must be within 1..1024", a.buffer_mb);
    }
    let opts = LiveOptions {
        interface: a.interface.clone(),
        snaplen: a.snaplen,
        duration,
        max_packets: a.count,
        buffer_bytes: a.buffer_mb << 20,
    };
    let r = capture_to_pcap(&opts, &a.write, || {
        eprintln!("capturing on {} into {}", a.interface, a.write.display());
    })?;
    eprintln!(
        "{} packets ({} bytes on the wire) written to {}; {} dropped by the kernel",
        r.packets,
        r.bytes_on_wire,
        a.write.display(),
        r.kernel_drops
    );
    if r.kernel_drops > 0 {
        bail!(
            "{} frames were dropped by the kernel (the capture is incomplete: raise --buffer-mb or lower --snaplen)",
            r.kernel_drops
        );
    }
    Ok(())
}
