//! Every method's answer, bit for bit, on 3000 closed-form streams
//! (single- and multi-rate, 16-600 packets, with and without coalescence,
//! bursts, ON/OFF load, losses). A change made for speed must not change
//! an answer: run it before and after and compare the outputs.
//!
//! `cargo run --release -p tightlink-core --example answers_digest > a.txt`

use tightlink_core::synth::varied_stream;
use tightlink_core::{analyze, AnalysisParams, Method};
fn main() {
    let p = AnalysisParams::default();
    let mut out = String::new();
    for i in 0..3000u64 {
        let s = varied_stream(i, i % 4 != 3);
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
