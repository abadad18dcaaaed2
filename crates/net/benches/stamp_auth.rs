//! What STAMP's authenticated mode costs per packet on one core: sealing
//! a test packet (both HMACs, before a train), opening one (what the
//! reflector does to each request, and sealing its reply costs the
//! same), and sealing again after the send-time timestamp (what the paced
//! loop does per packet), for 1500- and 9000-byte frames.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use tightlink_net::auth::StampKey;
use tightlink_wire::stamp_auth::{open_sender, reseal, seal_sender, GROWTH};

fn bench(c: &mut Criterion) {
    let key = StampKey::new(&[1u8; 32]);
    let mac = |p: &[&[u8]]| key.mac(p);
    let mut g = c.benchmark_group("stamp_auth");
    for payload in [1472usize, 8972] {
        let mut seq = 0;
        let plain = tightlink_net::packets::single(1, payload - GROWTH, &mut seq);
        let mut sealed = seal_sender(&plain, &mac);
        g.throughput(Throughput::Elements(1));
        g.bench_function(format!("seal/{payload}"), |b| {
            b.iter(|| seal_sender(black_box(&plain), &mac))
        });
        g.bench_function(format!("open/{payload}"), |b| {
            b.iter(|| open_sender(black_box(&sealed), &mac).unwrap())
        });
        g.bench_function(format!("reseal/{payload}"), |b| {
            b.iter(|| reseal(black_box(&mut sealed), &mac))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
