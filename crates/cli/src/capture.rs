//! `tightlink capture`: a pcap file of one interface (both directions,
//! nanosecond kernel stamps) for `analyze-tcp`, where tcpdump is not
//! installed. The socket work is in `tightlink_capture::live`.

use anyhow::{bail, Result};
use clap::Args;
use std::path::PathBuf;
use tightlink_capture::live::{capture_to_pcap, LiveOptions};
use tightlink_core::units::Time;

use crate::flags::{count_within, secs, within};

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
    #[arg(long, default_value = "10s", value_parser = within(Time { ns: 1 }, secs(3600), "a capture needs some time, at most 1 hour"))]
    pub duration: Time,
    /// Stop after this many packets.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Bytes kept of each frame (headers are enough for analyze-tcp).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(64..=65535))]
    pub snaplen: u32,
    /// Kernel buffer for frames not yet written, in MB.
    #[arg(long, default_value_t = 64, value_parser = count_within(1, 1024))]
    pub buffer_mb: usize,
}

pub fn run(a: CaptureArgs) -> Result<()> {
    let opts = LiveOptions {
        interface: a.interface.clone(),
        snaplen: a.snaplen,
        duration: a.duration.duration(),
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
