//! One window controller's run as TCPW's Figs. 6 and 7 draw it: the RTT
//! with RTTmin and RTTcong above, each loss marked where it fell
//! (congestion or random), the congestion level at it, and the window.

use std::path::Path;

use plotters::prelude::*;

use crate::{draw_key, line_key, register_font, Res, COLOURS};

/// One trace point: (t s, RTT ms, RTTmin ms, RTTcong ms, window in
/// packets).
pub type TracePoint = (f64, f64, f64, f64, f64);

pub struct CongestionTrace<'a> {
    pub title: &'a str,
    pub points: &'a [TracePoint],
    /// (t s, RTT at the loss ms, congestion level, read as congestion).
    pub losses: &'a [(f64, f64, f64, bool)],
}

pub fn draw_congestion_trace(file: &Path, t: &CongestionTrace<'_>) -> Res<()> {
    register_font();
    let root = BitMapBackend::new(file, (1000, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top, rest) = root.split_vertically(380);
    let (middle, bottom) = rest.split_vertically(220);
    let x_end = t.points.last().map_or(1.0, |p| p.0).max(1e-3);
    let rtt_top = t
        .points
        .iter()
        .map(|p| p.1.max(p.3))
        .chain(t.losses.iter().map(|l| l.1))
        .fold(0.0, f64::max)
        * 1.1;
    let rtt_low = t.points.iter().map(|p| p.2).fold(f64::INFINITY, f64::min) * 0.95;
    let mut c = ChartBuilder::on(&top)
        .caption(format!("{}: RTT and losses", t.title), ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end, rtt_low.min(rtt_top)..rtt_top.max(1e-3))?;
    c.configure_mesh().y_desc("RTT (ms)").draw()?;
    for (k, (label, pick)) in [
        ("RTT", 1usize),
        ("RTTmin", 2),
        ("RTTcong (the controller's)", 3),
    ]
    .into_iter()
    .enumerate()
    {
        let colour = COLOURS[k];
        let v = move |p: &TracePoint| [p.1, p.2, p.3][pick - 1];
        c.draw_series(LineSeries::new(
            t.points.iter().map(|p| (p.0, v(p))),
            colour,
        ))?
        .label(label)
        .legend(line_key(colour));
    }
    for (congestion, colour, label) in [
        (true, RED, "loss read as congestion"),
        (false, COLOURS[4], "loss read as random"),
    ] {
        c.draw_series(
            t.losses
                .iter()
                .filter(|l| l.3 == congestion)
                .map(|l| Cross::new((l.0, l.1), 5, colour.stroke_width(2))),
        )?
        .label(label)
        .legend(move |(x, y)| Cross::new((x + 10, y), 4, colour.stroke_width(2)));
    }
    draw_key(&mut c, SeriesLabelPosition::UpperRight)?;
    let mut c = ChartBuilder::on(&middle)
        .caption("congestion level c at each loss", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end, 0.0..1.05)?;
    c.configure_mesh().y_desc("c").draw()?;
    c.draw_series(t.losses.iter().map(|l| {
        let colour = if l.3 { RED } else { COLOURS[4] };
        Circle::new((l.0, l.2), 3, colour.filled())
    }))?;
    let w_top = t.points.iter().map(|p| p.4).fold(0.0, f64::max).max(1.0) * 1.1;
    let mut c = ChartBuilder::on(&bottom)
        .caption("congestion window", ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end, 0.0..w_top)?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc("packets")
        .draw()?;
    c.draw_series(LineSeries::new(
        t.points.iter().map(|p| (p.0, p.4)),
        COLOURS[0],
    ))?;
    root.present()?;
    Ok(())
}
