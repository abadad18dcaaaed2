//! Every method's answer, bit for bit, on 3000 closed-form streams
//! (single- and multi-rate, 16-600 packets, with and without coalescence,
//! bursts, ON/OFF load, losses). A change made for speed must not change
//! an answer: run it before and after and compare the outputs.
//!
//! `cargo run --release -p tightlink-core --example answers_digest > a.txt`

use tightlink_core::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
use tightlink_core::synth::SynthPath;
use tightlink_core::{analyze, AnalysisParams, Method, ProbeStream};
fn main() {
    let p = AnalysisParams::default();
    let mut out = String::new();
    for i in 0..3000u64 {
        let mut path = SynthPath {
            coalescence_ns: if i % 3 == 0 { None } else { Some(125_000.0) },
            coalescence_phase_ns: (i as f64 * 7_919.0) % 125_000.0,
            ..SynthPath::ten_gig(1.5e9 + (i % 20) as f64 * 1e8)
        };
        if i % 2 == 0 {
            path = if i % 4 == 0 {
                path.with_bursts(i, 1.0e9, 1500.0, 64000.0, 5e6)
            } else {
                path.with_on_off(i, 10, 1e9, 500e3, 1500e3, 5e6)
            };
        }
        let multi = i % 4 != 3;
        let n = [16usize, 64, 128, 300][(i / 4 % 4) as usize];
        let sched = if multi {
            multi_rate_schedule(
                &rates_around(5e9 + (i % 30) as f64 * 1e8, 0.1 + (i % 5) as f64 * 0.1, 5),
                n,
                9000,
            )
        } else {
            single_rate_schedule(5e9 + (i % 40) as f64 * 1e8, n * 2, 9000, 0)
        };
        let mut s: ProbeStream = path.stream(i, &sched, 9000);
        if i % 5 == 0 {
            for (k, pk) in s.packets.iter_mut().enumerate() {
                if (k as u64 * 7 + i).is_multiple_of(23) {
                    pk.recv_ns = None;
                }
            }
        }
        for m in Method::ALL {
            let a = analyze(&s, m.kind(), m, &p);
            out.push_str(&format!(
                "{i} {} {:?} {:?} {:?} {:?} {:?}\n",
                m.name(),
                a.decision,
                a.abw_bps.map(f64::to_bits),
                a.bound,
                a.reason,
                a.detail
            ));
        }
    }
    print!("{out}");
}
