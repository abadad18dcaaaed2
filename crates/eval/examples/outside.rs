use tightlink_core::decision::multirate::cumulative_crossing;
use tightlink_core::schedule::{multi_rate_schedule, rates_around};
use tightlink_core::smoothing::multipass::{exceeding_suffix, multipass_smooth, MultipassParams};
use tightlink_core::{analyze, AnalysisParams, Bound, Method, StreamKind};
use tightlink_sim::{parse_sim_target, SimPath};
fn main() {
    let target = std::env::args()
        .nth(1)
        .unwrap_or("sim:cross=bursty:2.5G,coalescence=125us".into());
    let side: f64 = std::env::args()
        .nth(2)
        .map(|s| s.parse().unwrap())
        .unwrap_or(0.55);
    let mut spec = parse_sim_target(&target).unwrap();
    let nominal = spec.nominal_available_bps();
    let p = AnalysisParams::default();
    for seed in 0..8 {
        spec.seed = seed;
        let mut path = SimPath::new(spec.clone());
        for i in 0..20 {
            let rates = rates_around(nominal * side, 0.3, 5);
            let sched = multi_rate_schedule(&rates, 64, 9000);
            let offs: Vec<i64> = sched.iter().map(|t| t - sched[0]).collect();
            let s = path.send_stream(i, &offs, &vec![9000; offs.len()]);
            let Some(t) = s.truth else { continue };
            let a = analyze(&s.stream, StreamKind::MultiRate, Method::Multirate, &p);
            if a.bound != Bound::Exact {
                continue;
            }
            let m = multipass_smooth(&s.stream.gaps(), MultipassParams::default());
            let n = m.gaps.len();
            let suf = exceeding_suffix(&m.gaps, 0.005);
            let cum = cumulative_crossing(&m.gaps, 0.005, 8);
            let ex: Vec<String> = m
                .gaps
                .iter()
                .step_by(8)
                .map(|g| format!("{:+.0}", (g.recv_ns / g.send_ns - 1.0) * 100.0))
                .collect();
            println!("seed {seed} s{i} truth {:.2} rates {:.2}-{:.2} ans {:.2} n {n} every-run {suf} cum-start {cum} ({}) | {}", t.available_bps/1e9, rates[0]/1e9, rates[4]/1e9, a.abw_bps.unwrap()/1e9, m.gaps[cum.min(n-1)].end_packet, ex.join(" "));
        }
    }
}
