//! Trace parsing speed in rows per second on one core: a 500 000-row
//! plain-text trace (multi-rate streams of 320 packets, some losses), and
//! the same trace gzip-compressed.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use std::io::Write;
use tightlink_core::schedule::{multi_rate_schedule, rates_around};
use tightlink_core::synth::SynthPath;
use tightlink_trace::{parse_bytes, write, Trace};

fn trace_bytes(rows: usize) -> Vec<u8> {
    let path = SynthPath {
        coalescence_ns: Some(125_000.0),
        ..SynthPath::ten_gig(2.5e9)
    };
    let sched = multi_rate_schedule(&rates_around(7e9, 0.3, 5), 64, 9000);
    let mut t = Trace {
        metadata: vec![("source".into(), "bench".into())],
        streams: Vec::new(),
    };
    for i in 0..rows / sched.len() {
        let mut s = path.stream(i as u64, &sched, 9000);
        s.packets[100 + i % 50].recv_ns = None;
        t.streams.push(s);
    }
    let mut buf = Vec::new();
    write(&mut buf, &t).unwrap();
    buf
}

fn bench(c: &mut Criterion) {
    let plain = trace_bytes(500_000);
    let rows = plain.iter().filter(|&&b| b == b'\n').count() - 2;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).unwrap();
    let gz = gz.finish().unwrap();
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Elements(rows as u64));
    g.sample_size(20);
    g.bench_function("plain_500k_rows", |b| {
        b.iter(|| parse_bytes("bench", black_box(&plain)).unwrap())
    });
    g.bench_function("gzip_500k_rows", |b| {
        b.iter(|| parse_bytes("bench", black_box(&gz)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
