//! Simulator speed in packet events per second (the target: 10 million
//! on one core): the default path (10 Gbit/s sender link, 10 Gbit/s hop
//! with 2.5 Gbit/s of bursty web-mix cross traffic, coalescence), 5 x 64
//! multi-rate streams with 10 ms idle time between them.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tightlink_sim::{parse_sim_target, SimPath};

fn bench(c: &mut Criterion) {
    let spec = parse_sim_target("sim:").unwrap();
    let offsets: Vec<i64> = (0..320).map(|i| i * 12_000).collect();
    let sizes = vec![9000u32; 320];
    // Count the events of one iteration's worth of streams.
    let mut probe = SimPath::new(spec.clone());
    for id in 0..50 {
        probe.send_stream(id, &offsets, &sizes);
    }
    let events = probe.events();
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(events));
    g.sample_size(20);
    g.bench_function("default_path_50_streams", |b| {
        b.iter(|| {
            let mut p = SimPath::new(spec.clone());
            for id in 0..50 {
                std::hint::black_box(p.send_stream(id, &offsets, &sizes));
            }
            p.events()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
