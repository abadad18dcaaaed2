//! The Rust side of the Python package's analysis benchmark: the same
//! million simulated packets (3125 multi-rate streams of 5 x 64 packets
//! through `sim:seed=1`) through `multirate`, timed in-process. Prints
//! packets/s, the median of 5 runs.
//!   cargo run --release -p tightlink-measure --example analyze_speed

use std::time::Instant;

use tightlink_core::{AnalysisParams, Method, StreamKind};
use tightlink_measure::analyze::{analyze_streams, Methods};
use tightlink_measure::simulate::{simulate, Schedule, SimulateOptions};
use tightlink_measure::Target;

fn main() -> anyhow::Result<()> {
    let target = Target::parse("sim:seed=1")?;
    let sim = simulate(
        &target,
        &SimulateOptions {
            streams: 3125,
            size_bytes: 9000,
            schedule: Schedule::Multi {
                centre_bps: None,
                range: 0.3,
                rates: 5,
                per_rate: 64,
            },
        },
    )?;
    let packets: usize = sim.streams.iter().map(|s| s.packets.len()).sum();
    let params = AnalysisParams::default();
    let mut times = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        let rows = analyze_streams(
            &sim.streams,
            Some(StreamKind::MultiRate),
            Methods::One(Method::Multirate),
            &params,
        );
        times.push(t.elapsed().as_secs_f64());
        assert_eq!(rows.len(), sim.streams.len());
    }
    times.sort_by(f64::total_cmp);
    let median = times[times.len() / 2];
    println!(
        "{{\"packets\": {packets}, \"median_s\": {median:.6}, \"packets_per_s\": {:.0}}}",
        packets as f64 / median
    );
    Ok(())
}
