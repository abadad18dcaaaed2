//! Analysis speed: BASS + multi-rate estimation (and with the tight
//! link's capacity known, which adds the queue fit), and PRC-MT + BASS,
//! in probe packets per second on one core. Streams are the paper's
//! shapes (9000-byte probes, 125 us coalescence): multi-rate 5 x 64
//! packets, single-rate 64 packets. One [`Analyzer`] reads them all, as
//! a program reading many streams would (its memory reused).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::hint::black_box;
use tightlink_core::synth::benchmark_streams;
use tightlink_core::{AnalysisParams, Analyzer, Method, StreamKind};

fn bench(c: &mut Criterion) {
    let unknown = AnalysisParams::default();
    let known = AnalysisParams {
        capacity_bps: Some(10e9),
        ..unknown
    };
    let mut g = c.benchmark_group("analysis");
    for (name, multi, kind, method, p) in [
        (
            "multirate_5x64",
            true,
            StreamKind::MultiRate,
            Method::Multirate,
            unknown,
        ),
        (
            "multirate_5x64_capacity_known",
            true,
            StreamKind::MultiRate,
            Method::Multirate,
            known,
        ),
        (
            "prcmt_bass_64",
            false,
            StreamKind::SingleRate,
            Method::PrcmtBass,
            unknown,
        ),
    ] {
        let set = benchmark_streams(multi, 256);
        let packets: usize = set.iter().map(|s| s.len()).sum();
        g.throughput(Throughput::Elements(packets as u64));
        let mut analyzer = Analyzer::new();
        g.bench_function(name, |b| {
            b.iter_batched(
                || (),
                |_| {
                    for s in &set {
                        black_box(analyzer.analyze(black_box(s), kind, method, &p));
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
