//! A fixed amount of analysis work for counting instructions: `multirate`
//! on the analysis benchmark's 256 multi-rate streams (5 x 64 packets,
//! 125 us coalescence), REPS times; with `single` after REPS, PRC-MT+BASS
//! on its 256 single-rate streams of 64 packets. Wall-clock benchmarks on a shared VM
//! scatter by a third between runs; instructions per packet do not, so
//! two builds compare exactly:
//!
//! `valgrind --tool=callgrind --toggle-collect='analysis_work::work' target/release/examples/analysis_work 2`
//!
//! (instructions collected / (2 x 81920) packets; single-rate: 2 x 16384).
//! Run alone it prints
//! its own packets per second.

use std::hint::black_box;
use tightlink_core::synth::benchmark_streams;
use tightlink_core::{AnalysisParams, Analyzer, Method, ProbeStream, StreamKind};

/// The counted part: every stream analysed `reps` times, through one
/// analyzer (its memory reused from stream to stream).
#[inline(never)]
fn work(
    set: &[ProbeStream],
    (kind, method): (StreamKind, Method),
    params: &AnalysisParams,
    reps: usize,
) -> f64 {
    let mut sum_bps = 0.0;
    let mut analyzer = Analyzer::new();
    for _ in 0..reps {
        for s in set {
            let a = analyzer.analyze(black_box(s), kind, method, params);
            sum_bps += a.abw_bps.unwrap_or(0.0) + a.detail.recv_rate_bps.unwrap_or(0.0);
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
    let single = match std::env::args().nth(2).as_deref() {
        None | Some("multi") => false,
        Some("single") => true,
        Some(other) => {
            eprintln!("analysis_work: the second argument is `multi` or `single`, not {other:?}");
            std::process::exit(2);
        }
    };
    let set = benchmark_streams(!single, 256);
    let what = if single {
        (StreamKind::SingleRate, Method::PrcmtBass)
    } else {
        (StreamKind::MultiRate, Method::Multirate)
    };
    let params = AnalysisParams::default();
    let start = std::time::Instant::now();
    let sum_bps = work(&set, what, &params, reps);
    let secs = start.elapsed().as_secs_f64();
    let packets = set.iter().map(|s| s.len()).sum::<usize>() * reps;
    println!(
        "{packets} packets, {:.1} M packets/s (answers sum {sum_bps:.0} bit/s)",
        packets as f64 / secs / 1e6
    );
}
