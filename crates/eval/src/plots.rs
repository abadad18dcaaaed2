//! PNG plots of an evaluation run: an example stream's raw and smoothed
//! gaps (like the paper's Fig. 10 and 13), decision error vs length bars
//! (Fig. 6, 8, 11), multi-rate error CDFs (Fig. 14, 15) and the Range /
//! packets-per-rate sensitivity (Fig. 16), throughput per 500 ms bin of
//! the rate controllers (Figs. 17, 18), and TCPW BBE's friendliness as
//! cumulative data per flow (\[TCPW\] Fig. 9), in the style of
//! `tightlink-plot`.

use std::path::{Path, PathBuf};

use plotters::prelude::*;
use tightlink_plot::{draw_bins, draw_key, line_key, register_font, slug, Bins, Res, COLOURS};

use crate::experiments::{decision_lengths, DecisionCell, ErrorDist, PER_RATE, RANGES};
use crate::Results;

/// Draws every plot into `dir` (created if missing); returns the files.
pub fn draw_all(r: &Results, dir: &Path) -> Res<Vec<PathBuf>> {
    register_font();
    std::fs::create_dir_all(dir).map_err(|e| {
        format!(
            "--plots {}: cannot create the directory: {e}",
            dir.display()
        )
    })?;
    let mut files = Vec::new();
    let f = dir.join("gaps-example.png");
    gap_example(r, &f)?;
    files.push(f);
    for (case, cells) in &r.decisions {
        let f = dir.join(format!("decision-error-{}.png", slug(case.name)));
        decision_bars(case.name, &decision_lengths(case), cells, &f)?;
        files.push(f);
    }
    for (case, dists) in &r.multirate {
        let f = dir.join(format!("multirate-cdf-{}.png", slug(case.name)));
        error_cdf(case.name, dists, &f)?;
        files.push(f);
    }
    let f = dir.join("sensitivity.png");
    sensitivity(r, &f)?;
    files.push(f);
    for (case, t) in &r.tracking {
        let f = dir.join(format!("tracking-{}.png", slug(case.name)));
        tracking(case.name, t, &f)?;
        files.push(f);
    }
    for cell in &r.cc {
        let f = dir.join(format!(
            "rate-control-{}-rtt-{}-ms.png",
            cell.cross, cell.rtt_ms as u32
        ));
        rate_control(cell, &f)?;
        files.push(f);
    }
    for cell in &r.tcpw_friendliness {
        let f = dir.join(format!(
            "tcpw-friendliness-{}-{}-loss-{}.png",
            cell.flows[0].controller,
            cell.flows[1].controller,
            (cell.loss * 1e4).round() as u32
        ));
        friendliness(cell, &f)?;
        files.push(f);
    }
    let f = dir.join("tcpw-bbe-trace.png");
    bbe_trace(&r.tcpw_trace, &f)?;
    files.push(f);
    Ok(files)
}

/// One BBE flow's RTT, RTTmin and RTTcong, its losses by class with the
/// congestion level at each, and its window (the paper's Figs. 6, 7).
fn bbe_trace(t: &crate::tcpw::BbeTrace, file: &Path) -> Res<()> {
    let packet = crate::experiments::SIZE_BYTES as f64;
    let t0 = t.points.first().map_or(0, |p| p.t_ns);
    let s = |ns: i64| (ns - t0) as f64 / 1e9;
    let points: Vec<tightlink_plot::TracePoint> = t
        .points
        .iter()
        .map(|p| {
            (
                s(p.t_ns),
                p.rtt_ns / 1e6,
                p.rtt_min_ns / 1e6,
                p.rtt_cong_ns / 1e6,
                p.cwnd_bytes / packet,
            )
        })
        .collect();
    let losses: Vec<(f64, f64, f64, bool)> = t
        .reactions
        .iter()
        .map(|r| (s(r.t_ns), r.rtt_ns / 1e6, r.c, r.is_congestion()))
        .collect();
    tightlink_plot::draw_congestion_trace(
        file,
        &tightlink_plot::CongestionTrace {
            title: &format!(
                "TCPW BBE alone on {} Gbit/s, {} ms, {} % random loss",
                crate::tcpw::TRACE_CAPACITY_BPS / 1e9,
                crate::tcpw::TRACE_RTT_MS,
                crate::tcpw::TRACE_LOSS * 100.0
            ),
            points: &points,
            losses: &losses,
        },
    )
}

/// Two flows' cumulative delivered data over time (the paper's Fig. 9).
fn friendliness(cell: &crate::tcpw::FriendlinessCell, file: &Path) -> Res<()> {
    let bin_s = 0.5;
    let series: Vec<(String, Vec<(f64, f64)>)> = cell
        .cumulative_bytes()
        .iter()
        .zip(&cell.flows)
        .enumerate()
        .map(|(k, (cum, f))| {
            (
                format!(
                    "{} {} ({:.0} %)",
                    k + 1,
                    f.controller,
                    100.0 * cell.shares()[k]
                ),
                cum.iter()
                    .enumerate()
                    .map(|(i, &b)| ((i + 1) as f64 * bin_s, b / 1e9))
                    .collect(),
            )
        })
        .collect();
    draw_bins(
        file,
        &Bins {
            title: &format!(
                "Cumulative data delivered, two flows on {} Gbit/s, {} ms, {} % random loss",
                crate::tcpw::FRIENDLY_CAPACITY_BPS / 1e9,
                crate::tcpw::FRIENDLY_RTT_MS,
                cell.loss * 100.0
            ),
            y_desc: "GB delivered",
            reference: None,
            series: &series,
        },
    )
}

/// The tracker's estimate (with +-2 sd) and each stream's truth over
/// path time.
fn tracking(name: &str, t: &crate::over_time::Tracking, file: &Path) -> Res<()> {
    tightlink_plot::draw_tracking(
        file,
        &tightlink_plot::Tracking {
            title: &format!("BART following a step: {name}"),
            x_desc: "path time (s)",
            points: &t.points,
            truth_line: None,
            step_at_s: Some(crate::over_time::STEP_AT_S - 0.02),
        },
    )
}

/// Each controller's goodput per 500 ms bin over time, with the
/// available bandwidth per bin (the paper's Figs. 17 and 18).
fn rate_control(cell: &crate::over_time::CcCell, file: &Path) -> Res<()> {
    let Some(first) = cell.flows.first() else {
        return Ok(());
    };
    let bin_s = crate::over_time::CC_BIN_NS / 1e9;
    let at = |k: usize| (k as f64 + 0.5) * bin_s;
    let gbps = |v: &[f64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(k, &b)| (at(k), b / 1e9))
            .collect()
    };
    let available = gbps(&first.available_bins_bps);
    let series: Vec<(String, Vec<(f64, f64)>)> = cell
        .flows
        .iter()
        .map(|f| {
            (
                format!(
                    "{} ({:.0} % of available)",
                    f.controller,
                    100.0 * f.goodput_bps() / f.available_bps()
                ),
                gbps(&f.bins_bps),
            )
        })
        .collect();
    draw_bins(
        file,
        &Bins {
            title: &format!(
                "Throughput in 500 ms bins: {} cross traffic, RTT {} ms",
                cell.cross, cell.rtt_ms
            ),
            y_desc: "Gbit/s",
            reference: Some(("available", &available)),
            series: &series,
        },
    )
}

fn gap_example(r: &Results, file: &Path) -> Res<()> {
    let e = &r.example;
    let root = BitMapBackend::new(file, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, bottom) = root.split_vertically(350);
    let n = e.raw.iter().map(|p| p.0).fold(0.0, f64::max) + 1.0;
    let raw_max = e.raw.iter().map(|p| p.1).fold(0.0, f64::max) * 1.05;
    let send_max = e.send.iter().map(|p| p.1).fold(0.0, f64::max);
    let mut c = ChartBuilder::on(&top)
        .caption(
            "One multi-rate stream (5 x 64, bursty 2.5G, 125 us coalescence): raw receive gaps",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..n, 0.0..raw_max.max(1.0))?;
    c.configure_mesh().y_desc("gap (us)").draw()?;
    c.draw_series(LineSeries::new(e.raw.iter().copied(), &COLOURS[0]))?
        .label("receive gap")
        .legend(line_key(COLOURS[0]));
    c.draw_series(LineSeries::new(e.send.iter().copied(), &BLACK))?
        .label("send gap")
        .legend(line_key(BLACK));
    draw_key(&mut c, SeriesLabelPosition::MiddleRight)?;
    let caption = format!(
        "Smoothed: BASS single pass and multi-pass + window 16 (estimate {}, truth {:.2} Gbit/s)",
        e.estimate_bps
            .map_or("none".to_string(), |v| format!("{:.2}", v / 1e9)),
        e.truth_bps / 1e9
    );
    let mut c = ChartBuilder::on(&bottom)
        .caption(caption, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..n, 0.0..(send_max * 2.0).max(1.0))?;
    c.configure_mesh()
        .x_desc("packet in stream")
        .y_desc("gap (us)")
        .draw()?;
    for (i, (label, series)) in [
        ("send gap", &e.send),
        ("BASS (single pass)", &e.bass),
        ("multi-pass + window", &e.multipass),
    ]
    .into_iter()
    .enumerate()
    {
        let colour = if i == 0 { BLACK } else { COLOURS[i] };
        c.draw_series(LineSeries::new(series.iter().copied(), &colour))?
            .label(label)
            .legend(line_key(colour));
    }
    draw_key(&mut c, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

fn decision_bars(name: &str, lengths: &[usize], cells: &[DecisionCell], file: &Path) -> Res<()> {
    let root = BitMapBackend::new(file, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let methods = tightlink_core::Method::SINGLE_RATE;
    let mut c = ChartBuilder::on(&root)
        .caption(
            format!("Decision error by stream length: {name} (pale top: ambiguous)"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..lengths.len() as f64, 0.0..100.0)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(lengths.len() * 2 + 1)
        .x_label_formatter(&|x| {
            let i = (x - 0.5).round();
            if (x - 0.5 - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < lengths.len() {
                format!("{} packets", lengths[i as usize])
            } else {
                String::new()
            }
        })
        .y_desc("% of streams")
        .draw()?;
    let w = 0.8 / methods.len() as f64;
    for (j, m) in methods.iter().enumerate() {
        let colour = COLOURS[j % COLOURS.len()];
        let mut wrong = Vec::new();
        let mut ambiguous = Vec::new();
        for (i, &len) in lengths.iter().enumerate() {
            if let Some(cell) = cells.iter().find(|x| x.method == *m && x.length == len) {
                let x0 = i as f64 + 0.1 + j as f64 * w;
                let (e, a) = (cell.wrong * 100.0, cell.ambiguous * 100.0);
                wrong.push(Rectangle::new(
                    [(x0, 0.0), (x0 + w * 0.9, e)],
                    colour.filled(),
                ));
                ambiguous.push(Rectangle::new(
                    [(x0, e), (x0 + w * 0.9, e + a)],
                    colour.mix(0.3).filled(),
                ));
            }
        }
        c.draw_series(wrong)?
            .label(m.name())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], colour.filled()));
        c.draw_series(ambiguous)?;
    }
    draw_key(&mut c, SeriesLabelPosition::UpperRight)?;
    root.present()?;
    Ok(())
}

fn error_cdf(name: &str, dists: &[ErrorDist], file: &Path) -> Res<()> {
    let root = BitMapBackend::new(file, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(
            format!("Multi-rate relative error CDF (5 x 64, Range 30 %): {name}"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(-50.0..50.0, 0.0..1.0)?;
    c.configure_mesh()
        .x_desc("relative error of exact estimates (%)")
        .y_desc("CDF")
        .draw()?;
    for (j, d) in dists.iter().enumerate() {
        let colour = COLOURS[j % COLOURS.len()];
        let n = d.errors.len().max(1) as f64;
        let pts: Vec<(f64, f64)> = d
            .errors
            .iter()
            .enumerate()
            .map(|(i, e)| ((e * 100.0).clamp(-50.0, 50.0), (i + 1) as f64 / n))
            .collect();
        c.draw_series(LineSeries::new(pts, &colour))?
            .label(d.label.clone())
            .legend(line_key(colour));
    }
    draw_key(&mut c, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

fn sensitivity(r: &Results, file: &Path) -> Res<()> {
    let root = BitMapBackend::new(file, (800, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(
            "Multi-pass multirate within +-10 % vs Range (bursty, 125 us)",
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(5.0..55.0, 0.0..100.0)?;
    c.configure_mesh()
        .x_desc("Range (%)")
        .y_desc("% of streams within +-10 %")
        .draw()?;
    for (j, &p) in PER_RATE.iter().enumerate() {
        let colour = COLOURS[j % COLOURS.len()];
        let pts: Vec<(f64, f64)> = RANGES
            .iter()
            .filter_map(|&range| {
                r.sensitivity
                    .iter()
                    .find(|c| c.range == range && c.per_rate == p)
                    .map(|c| (range * 100.0, c.within_10 * 100.0))
            })
            .collect();
        c.draw_series(LineSeries::new(pts.clone(), &colour))?
            .label(format!("5 x {p} packets"))
            .legend(line_key(colour));
        c.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, colour.filled())))?;
    }
    draw_key(&mut c, SeriesLabelPosition::LowerRight)?;
    root.present()?;
    Ok(())
}
