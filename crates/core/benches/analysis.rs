//! Analysis speed: BASS + multi-rate estimation, and PRC-MT + BASS, in
//! probe packets per second on one core. Streams are the paper's shapes
//! (9000-byte probes, 125 us coalescence): multi-rate 5 x 64 packets,
//! single-rate 64 packets.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tightlink_core::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
use tightlink_core::synth::SynthPath;
use tightlink_core::{analyze, AnalysisParams, Method, ProbeStream, StreamKind};

fn streams(multi: bool, count: usize) -> Vec<ProbeStream> {
    (0..count)
        .map(|i| {
            let path = SynthPath {
                coalescence_ns: Some(125_000.0),
                coalescence_phase_ns: (i as f64 * 7_919.0) % 125_000.0,
                ..SynthPath::ten_gig(1.5e9 + (i % 20) as f64 * 1e8)
            };
            let sched = if multi {
                multi_rate_schedule(&rates_around(5e9 + (i % 30) as f64 * 1e8, 0.3, 5), 64, 9000)
            } else {
                single_rate_schedule(5e9 + (i % 40) as f64 * 1e8, 64, 9000, 0)
            };
            path.stream(i as u64, &sched, 9000)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let p = AnalysisParams::default();
    let mut g = c.benchmark_group("analysis");
    for (name, multi, kind, method) in [
        (
            "multirate_5x64",
            true,
            StreamKind::MultiRate,
            Method::Multirate,
        ),
        (
            "prcmt_bass_64",
            false,
            StreamKind::SingleRate,
            Method::PrcmtBass,
        ),
    ] {
        let set = streams(multi, 256);
        let packets: usize = set.iter().map(|s| s.len()).sum();
        g.throughput(Throughput::Elements(packets as u64));
        g.bench_function(name, |b| {
            b.iter_batched(
                || (),
                |_| {
                    for s in &set {
                        black_box(analyze(black_box(s), kind, method, &p));
                    }
                },
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
