//! Accuracy on closed-form synthetic streams with a known truth, and how it
//! depends on BASS's SPIKE_UP / SPIKE_DOWN.
//!
//! Path: 10 Gbit/s; cross traffic from 10 ON/OFF sources of 1 Gbit/s each,
//! ON 25 % of the time (2.5 Gbit/s on average, like \[BASS\]'s ten
//! 1 Gbit/s hosts); 125 us receiver interrupt coalescence at a random phase;
//! 9000-byte probes. Truth: capacity minus the cross-traffic bits sent
//! during the stream's span, over the span. `--bursts` swaps the ON/OFF
//! sources for 1.5 Gbit/s of smooth traffic plus 1 Gbit/s of instantaneous
//! 9-63 KB bursts (a harsher, less realistic load).
//!
//! Run: `cargo run --release -p tightlink-core --example sensitivity [-- --bursts]`
//!
//! This is not the packet-level evaluation (`tightlink eval`):
//! the hop is a fluid FIFO and nothing is lost.

use tightlink_core::decision::multirate::Consistency;
use tightlink_core::schedule::{multi_rate_schedule, rates_around, single_rate_schedule};
use tightlink_core::synth::{SynthPath, XorShift};
use tightlink_core::{analyze, AnalysisParams, Decision, Method, ProbeStream, StreamKind};

const STREAMS: u64 = 400;

struct Case {
    stream: ProbeStream,
    truth_bps: f64,
    rate_bps: f64,
}

fn path(seed: u64, bursts: bool) -> SynthPath {
    let mut rng = XorShift(seed * 7919 + 1);
    let base = SynthPath {
        coalescence_ns: Some(125_000.0),
        coalescence_phase_ns: rng.unit() * 125_000.0,
        ..SynthPath::ten_gig(if bursts { 1.5e9 } else { 0.0 })
    };
    if bursts {
        base.with_bursts(seed, 1e9, 9_000.0, 63_000.0, 6e6)
    } else {
        base.with_on_off(seed, 10, 1e9, 300_000.0, 900_000.0, 6e6)
    }
}

/// Single-rate streams of `len` packets at 5-9 Gbit/s, or multi-rate
/// streams of 5 x 64 packets, Range 30 %, centred within +-20 % of 7.5.
fn cases(multi: bool, len: usize, bursts: bool) -> Vec<Case> {
    (0..STREAMS)
        .map(|seed| {
            let p = path(seed, bursts);
            let mut rng = XorShift(seed * 104_729 + 3);
            let (sched, rate) = if multi {
                let avg = 7.5e9 * (0.8 + 0.4 * rng.unit());
                (
                    multi_rate_schedule(&rates_around(avg, 0.3, 5), 64, 9000),
                    avg,
                )
            } else {
                let r = 5e9 + 4e9 * rng.unit();
                (single_rate_schedule(r, len, 9000, 1_000_000), r)
            };
            let span = (sched[sched.len() - 1] - sched[0]) as f64;
            Case {
                stream: p.stream(seed, &sched, 9000),
                truth_bps: p.available_over_bps(span),
                rate_bps: rate,
            }
        })
        .collect()
}

/// (wrong, ambiguous) shares; an ambiguous answer is not counted wrong.
fn decision_error(cases: &[Case], method: Method, p: &AnalysisParams) -> (f64, f64) {
    let (mut wrong, mut ambiguous) = (0, 0);
    for c in cases {
        let want = if c.rate_bps > c.truth_bps {
            Decision::Above
        } else {
            Decision::Below
        };
        match analyze(&c.stream, StreamKind::SingleRate, method, p).decision {
            Some(Decision::Ambiguous) | None => ambiguous += 1,
            Some(d) if d != want => wrong += 1,
            _ => {}
        }
    }
    let n = cases.len() as f64;
    (wrong as f64 / n, ambiguous as f64 / n)
}

/// Relative errors of exact estimates, and the share of all streams within +-10 %.
fn estimates(cases: &[Case], method: Method, p: &AnalysisParams) -> (Vec<f64>, f64) {
    let mut errs = Vec::new();
    for c in cases {
        if let Some(e) = analyze(&c.stream, StreamKind::MultiRate, method, p).abw_bps {
            errs.push((e - c.truth_bps) / c.truth_bps);
        }
    }
    let within = errs.iter().filter(|e| e.abs() <= 0.10).count() as f64 / cases.len() as f64;
    errs.sort_by(f64::total_cmp);
    (errs, within)
}

fn q(v: &[f64], f: f64) -> f64 {
    v[((v.len() - 1) as f64 * f) as usize]
}

fn main() {
    let bursts = std::env::args().any(|a| a == "--bursts");
    let d = AnalysisParams::default();
    println!(
        "load: {}; {STREAMS} streams per row\n",
        if bursts {
            "1.5 Gbit/s smooth + 1 Gbit/s instantaneous bursts"
        } else {
            "10 ON/OFF sources x 1 Gbit/s, 25 % duty"
        }
    );
    println!("Decision error (wrong / ambiguous) of single-rate streams at 5-9 Gbit/s:\n");
    println!("| method | 32 | 64 | 128 | 320 |");
    println!("|---|---|---|---|---|");
    let by_len: Vec<Vec<Case>> = [32, 64, 128, 320]
        .iter()
        .map(|&n| cases(false, n, bursts))
        .collect();
    for m in Method::SINGLE_RATE {
        let cells: Vec<String> = by_len
            .iter()
            .map(|c| {
                let (w, a) = decision_error(c, m, &d);
                format!("{:.1} / {:.1} %", 100.0 * w, 100.0 * a)
            })
            .collect();
        println!("| {} | {} |", m.name(), cells.join(" | "));
    }
    let multi = cases(true, 0, bursts);
    println!(
        "\nMulti-rate estimates (5 x 64 packets, Range 30 %), relative error of exact estimates:\n"
    );
    println!("| method | within +-10 % | p10 | median | p90 |");
    println!("|---|---:|---:|---:|---:|");
    let cumulative = AnalysisParams {
        consistency: Consistency::Cumulative,
        ..d
    };
    for (label, m, p) in [
        ("multirate", Method::Multirate, &d),
        (
            "multirate --consistency cumulative",
            Method::Multirate,
            &cumulative,
        ),
        ("multirate-single-pass", Method::MultirateSinglePass, &d),
        ("multirate-prcmt-dp1", Method::MultiratePrcmtDp1, &d),
        ("multirate-prcmt-dp2", Method::MultiratePrcmtDp2, &d),
    ] {
        let (e, w) = estimates(&multi, m, p);
        println!(
            "| {label} | {:.1} % | {:+.1} % | {:+.1} % | {:+.1} % |",
            100.0 * w,
            100.0 * q(&e, 0.1),
            100.0 * q(&e, 0.5),
            100.0 * q(&e, 0.9)
        );
    }
    println!(
        "\nThe same 2.5 Gbit/s mean from more, smaller ON/OFF sources (smoother at ms scale):\n"
    );
    println!("| sources x peak | multirate within +-10 % | median error |");
    println!("|---|---:|---:|");
    for (sources, peak) in [(10usize, 1e9), (40, 0.25e9), (160, 0.0625e9)] {
        let set: Vec<Case> = (0..STREAMS)
            .map(|seed| {
                let mut rng = XorShift(seed * 7919 + 1);
                let p = SynthPath {
                    coalescence_ns: Some(125_000.0),
                    coalescence_phase_ns: rng.unit() * 125_000.0,
                    ..SynthPath::ten_gig(0.0)
                }
                .with_on_off(seed, sources, peak, 300_000.0, 900_000.0, 6e6);
                let avg = 7.5e9 * (0.8 + 0.4 * rng.unit());
                let sched = multi_rate_schedule(&rates_around(avg, 0.3, 5), 64, 9000);
                let span = (sched[sched.len() - 1] - sched[0]) as f64;
                Case {
                    stream: p.stream(seed, &sched, 9000),
                    truth_bps: p.available_over_bps(span),
                    rate_bps: avg,
                }
            })
            .collect();
        let (e, w) = estimates(&set, Method::Multirate, &d);
        println!(
            "| {sources} x {:.3} Gbit/s | {:.1} % | {:+.1} % |",
            peak / 1e9,
            100.0 * w,
            100.0 * q(&e, 0.5)
        );
    }
    println!("\nSensitivity to SPIKE_UP / SPIKE_DOWN (in mean send gaps):\n");
    println!("| spike_up | spike_down | prcmt+bass error, 64 pkts | multirate within +-10 % | multirate median error |");
    println!("|---:|---:|---:|---:|---:|");
    let single64 = &by_len[1];
    for up in [0.25, 0.5, 1.0, 2.0, 4.0] {
        for down in [0.25, 0.5, 1.0, 2.0] {
            let mut p = d;
            p.bass.spike_up = up;
            p.bass.spike_down = down;
            let (w, _) = decision_error(single64, Method::PrcmtBass, &p);
            let (e, within) = estimates(&multi, Method::Multirate, &p);
            println!(
                "| {up} | {down} | {:.1} % | {:.1} % | {:+.1} % |",
                100.0 * w,
                100.0 * within,
                100.0 * q(&e, 0.5)
            );
        }
    }
}
