//! The probe trace reader (plain or gzip) on any bytes; what parses is
//! analysed by every method.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tightlink_core::{analyze, AnalysisParams, Method};

fuzz_target!(|data: &[u8]| {
    if let Ok(trace) = tightlink_trace::parse_bytes("fuzz", data) {
        let p = AnalysisParams::default();
        for s in trace.streams.iter().take(4) {
            let kind = s.infer_kind(p.gap_tolerance);
            for m in Method::ALL {
                let _ = analyze(s, kind, m, &p);
            }
        }
    }
});
