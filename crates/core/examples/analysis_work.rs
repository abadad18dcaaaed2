//! A fixed amount of analysis work for counting instructions: `multirate`
//! on the analysis benchmark's 256 multi-rate streams (5 x 64 packets,
//! 125 us coalescence), REPS times. Wall-clock benchmarks on a shared VM
//! scatter by a third between runs; instructions per packet do not, so
//! two builds compare exactly:
//!
//! `valgrind --tool=callgrind --toggle-collect='analysis_work::work' target/release/examples/analysis_work 2`
//!
//! (instructions collected / (2 x 81920) packets). Run alone it prints
//! its own packets per second.

use std::hint::black_box;
use tightlink_core::synth::benchmark_streams;
use tightlink_core::{AnalysisParams, Analyzer, Method, ProbeStream, StreamKind};

/// The counted part: every stream analysed `reps` times, through one
/// analyzer (its memory reused from stream to stream).
#[inline(never)]
fn work(set: &[ProbeStream], params: &AnalysisParams, reps: usize) -> f64 {
    let mut sum_bps = 0.0;
    let mut analyzer = Analyzer::new();
    for _ in 0..reps {
        for s in set {
            let a = analyzer.analyze(
                black_box(s),
                StreamKind::MultiRate,
                Method::Multirate,
                params,
            );
            sum_bps += a.abw_bps.unwrap_or(0.0);
        }
    }
    sum_bps
}

fn main() {
    let reps: usize = match std::env::args().nth(1).map(|s| s.parse()) {
        None => 1,
        Some(Ok(r)) => r,
        Some(Err(e)) => {
            eprintln!("analysis_work: REPS must be a whole number: {e}");
            std::process::exit(2);
        }
    };
    let set = benchmark_streams(true, 256);
    let params = AnalysisParams::default();
    let start = std::time::Instant::now();
    let sum_bps = work(&set, &params, reps);
    let secs = start.elapsed().as_secs_f64();
    let packets = set.iter().map(|s| s.len()).sum::<usize>() * reps;
    println!(
        "{packets} packets, {:.1} M packets/s (answers sum {sum_bps:.0} bit/s)",
        packets as f64 / secs / 1e6
    );
}
