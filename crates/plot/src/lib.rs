//! tightlink-plot: the plots every face draws (PNG): estimate against
//! truth per run (`lab run --plot`), throughput in bins (`eval`, `lab cc`), a TCP flow's RTT histograms and
//! bandwidth estimates over time (`analyze-tcp --plot`), and the shared
//! style (compiled-in font, colours, legend) that the evaluation's figures
//! use too. The font (DejaVu Sans, Bitstream Vera licence, `assets/`) is
//! compiled in, so no system font is needed.

use std::error::Error;
use std::path::Path;
use std::sync::Once;

use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use plotters::style::FontStyle;

/// What drawing returns.
mod congestion;
pub use congestion::{draw_congestion_trace, CongestionTrace, TracePoint};

pub type Res<T> = Result<T, Box<dyn Error>>;

static FONT: &[u8] = include_bytes!("../assets/DejaVuSans.ttf");
static REGISTER: Once = Once::new();

/// Makes the compiled-in font the "sans-serif" of every plot; call before
/// drawing text.
pub fn register_font() {
    REGISTER.call_once(|| {
        // The bytes are a valid TTF shipped with the crate; a failure here
        // shows up as missing text, never as a crash.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// Series colours, in order.
pub const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A chart with two float axes on a PNG.
pub type Chart<'a> =
    ChartContext<'a, BitMapBackend<'a>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A legend entry: a short line in the series' colour.
pub fn line_key(colour: RGBColor) -> impl Fn((i32, i32)) -> PathElement<(i32, i32)> {
    move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour)
}

/// The legend box, in one style for every plot.
pub fn draw_key(c: &mut Chart<'_>, position: SeriesLabelPosition) -> Res<()> {
    c.configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    Ok(())
}

/// File-name form of a name (lower case, dashes).
pub fn slug(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    while s.contains("--") {
        s = s.replace("--", "-");
    }
    s.trim_matches('-').to_string()
}

/// Lines over time in bins (rate controllers' throughput, `eval` and `lab
/// cc`): a grey reference line (the available bandwidth, or 100 %) and
/// one coloured line per series; points are (time s, value in `y_desc`).
pub struct Bins<'a> {
    pub title: &'a str,
    pub y_desc: &'a str,
    pub reference: Option<(&'a str, &'a [(f64, f64)])>,
    pub series: &'a [(String, Vec<(f64, f64)>)],
}

pub fn draw_bins(file: &Path, b: &Bins<'_>) -> Res<()> {
    register_font();
    let points = || {
        b.series
            .iter()
            .flat_map(|(_, v)| v.iter())
            .chain(b.reference.iter().flat_map(|(_, v)| v.iter()))
    };
    let x_end = points().map(|p| p.0).fold(0.0f64, f64::max);
    let top = points().map(|p| p.1).fold(0.0f64, f64::max) * 1.1;
    let root = BitMapBackend::new(file, (900, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(b.title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..x_end.max(1e-3) * 1.02, 0.0..top.max(1e-3))?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc(b.y_desc)
        .draw()?;
    if let Some((label, line)) = b.reference {
        let grey = RGBColor(120, 120, 120);
        c.draw_series(LineSeries::new(line.iter().copied(), grey.stroke_width(2)))?
            .label(label)
            .legend(line_key(grey));
    }
    for (j, (label, line)) in b.series.iter().enumerate() {
        let colour = COLOURS[j % COLOURS.len()];
        c.draw_series(LineSeries::new(line.iter().copied(), &colour))?
            .label(label.as_str())
            .legend(line_key(colour));
    }
    draw_key(&mut c, SeriesLabelPosition::MiddleRight)?;
    root.present()?;
    Ok(())
}

/// A tracker's answers over time (`eval`'s step and `lab track`).
pub struct Tracking<'a> {
    pub title: &'a str,
    pub x_desc: &'a str,
    /// (time s, estimate, its sd, the truth over that stream), bit/s.
    pub points: &'a [(f64, f64, f64, f64)],
    /// A second, slower truth series (time s, bit/s), drawn as a line.
    pub truth_line: Option<(&'a str, &'a [(f64, f64)])>,
    /// Where the path changed, drawn as a dashed vertical line.
    pub step_at_s: Option<f64>,
}

/// The tracker's estimate with +-2 sd, each stream's truth as a dot and
/// the optional truth line, over time.
pub fn draw_tracking(file: &Path, t: &Tracking<'_>) -> Res<()> {
    register_font();
    let root = BitMapBackend::new(file, (1000, 500)).into_drawing_area();
    root.fill(&WHITE)?;
    let t_end = t.points.iter().map(|p| p.0).fold(0.0, f64::max).max(0.1);
    let line = t.truth_line.map_or(&[][..], |l| l.1);
    let top = t
        .points
        .iter()
        .map(|p| (p.1 + 2.0 * p.2).max(p.3))
        .chain(line.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    // Gbit/s above 2 Gbit/s, else Mbit/s.
    let (scale, unit) = if top >= 2e9 {
        (1e9, "Gbit/s")
    } else {
        (1e6, "Mbit/s")
    };
    let g = |v: f64| v / scale;
    let top = g(top) * 1.1;
    let mut c = ChartBuilder::on(&root)
        .caption(t.title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(55)
        .build_cartesian_2d(0.0..t_end, 0.0..top.max(1.0))?;
    c.configure_mesh()
        .x_desc(t.x_desc)
        .y_desc(format!("available bandwidth ({unit})"))
        .draw()?;
    c.draw_series(
        t.points
            .iter()
            .map(|p| Circle::new((p.0, g(p.3)), 3, BLACK.filled())),
    )?
    .label("truth over each stream")
    .legend(line_key(BLACK));
    if let Some((name, pts)) = t.truth_line {
        c.draw_series(LineSeries::new(
            pts.iter().map(|p| (p.0, g(p.1))),
            COLOURS[2].stroke_width(2),
        ))?
        .label(name)
        .legend(line_key(COLOURS[2]));
    }
    for k in [-2.0, 2.0] {
        c.draw_series(LineSeries::new(
            t.points.iter().map(|p| (p.0, g(p.1 + k * p.2))),
            COLOURS[0].mix(0.35),
        ))?;
    }
    c.draw_series(LineSeries::new(
        t.points.iter().map(|p| (p.0, g(p.1))),
        &COLOURS[0],
    ))?
    .label("bart estimate (+-2 sd)")
    .legend(line_key(COLOURS[0]));
    if let Some(s) = t.step_at_s {
        c.draw_series(DashedLineSeries::new(
            [(s, 0.0), (s, top)],
            6,
            4,
            COLOURS[3].into(),
        ))?
        .label("cross traffic steps")
        .legend(line_key(COLOURS[3]));
    }
    draw_key(&mut c, SeriesLabelPosition::LowerLeft)?;
    root.present()?;
    Ok(())
}

/// Estimate against truth, one point per run and a colour per method,
/// with the y = x line and a +-10 % band (`tightlink lab run --plot`).
pub fn draw_estimate_vs_truth(
    file: &Path,
    title: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Res<()> {
    register_font();
    let all = series.iter().flat_map(|s| s.1.iter());
    let top = all.fold(1.0f64, |m, &(t, e)| m.max(t).max(e)) / 1e6 * 1.1;
    let root = BitMapBackend::new(file, (800, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(
            format!("{title}: estimate vs truth per run"),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..top, 0.0..top)?;
    c.configure_mesh()
        .x_desc("truth (Mbit/s, kernel counters)")
        .y_desc("estimate (Mbit/s)")
        .draw()?;
    c.draw_series(LineSeries::new([(0.0, 0.0), (top, top)], &BLACK))?
        .label("estimate = truth")
        .legend(line_key(BLACK));
    for f in [0.9, 1.1] {
        c.draw_series(LineSeries::new(
            [(0.0, 0.0), (top, top * f)],
            BLACK.mix(0.3),
        ))?;
    }
    for (i, (name, pts)) in series.iter().enumerate() {
        let colour = COLOURS[i % COLOURS.len()];
        c.draw_series(
            pts.iter()
                .map(|&(t, e)| Circle::new((t / 1e6, e / 1e6), 4, colour.filled())),
        )?
        .label(name.as_str())
        .legend(line_key(colour));
    }
    draw_key(&mut c, SeriesLabelPosition::UpperLeft)?;
    root.present()?;
    Ok(())
}

/// What `analyze-tcp --plot` draws for one flow (\[TCPW\], Fig. 5
/// and 6): the RTT distribution overall and right before losses, and BE,
/// RE and ERE over time.
pub struct TcpFlowPlot<'a> {
    pub title: &'a str,
    pub rtt_ms: &'a [f64],
    pub rtt_before_loss_ms: &'a [f64],
    /// (t_s, BE, RE, ERE), bit/s.
    pub rates: &'a [(f64, f64, f64, f64)],
    pub capacity_bps: Option<f64>,
}

/// The `q` quantile of `v` (0 when empty), defined as tightlink-core's
/// `stats::quantile` (linear between order statistics); this crate depends
/// on nothing of ours, so the few lines are repeated here.
fn quantile_of(v: &[f64], q: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        return 0.0;
    }
    let x = q.clamp(0.0, 1.0) * (s.len() - 1) as f64;
    let (i, f) = (x.floor() as usize, x.fract());
    s[i] + f * (s[(i + 1).min(s.len() - 1)] - s[i])
}

/// Shares of `v` in `bins` equal bins over [0, top).
fn shares(v: &[f64], top: f64, bins: usize) -> Vec<f64> {
    let mut h = vec![0.0; bins];
    for &x in v {
        let i = ((x / top * bins as f64) as usize).min(bins - 1);
        h[i] += 1.0;
    }
    let n = v.len().max(1) as f64;
    h.iter().map(|c| c / n).collect()
}

pub fn draw_tcp_flow(file: &Path, p: &TcpFlowPlot<'_>) -> Res<()> {
    register_font();
    let root = BitMapBackend::new(file, (1000, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (top_area, bottom_area) = root.split_vertically(420);
    rtt_panel(&top_area, p)?;
    rates_panel(&bottom_area, p)?;
    root.present()?;
    Ok(())
}

/// The RTT histograms, all samples beside those right before a loss.
fn rtt_panel(
    top_area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    p: &TcpFlowPlot<'_>,
) -> Res<()> {
    const BINS: usize = 50;
    // Axes end at the 99.5th percentile (a receiver stall's 40 ms sample
    // squeezed a 4 ms queue into two bins); the top bin holds the rest.
    let rtt_top = quantile_of(p.rtt_ms, 0.995).max(1e-3) * 1.05;
    let all = shares(p.rtt_ms, rtt_top, BINS);
    let before = shares(p.rtt_before_loss_ms, rtt_top, BINS);
    let y_top = all
        .iter()
        .chain(&before)
        .copied()
        .fold(0.0, f64::max)
        .max(1e-3)
        * 1.1;
    let mut c = ChartBuilder::on(top_area)
        .caption(
            format!("{}: RTT overall and right before losses", p.title),
            ("sans-serif", 18),
        )
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..rtt_top, 0.0..y_top)?;
    c.configure_mesh()
        .x_desc("RTT (ms; the last bin holds all above)")
        .y_desc("share of samples")
        .draw()?;
    let w = rtt_top / BINS as f64;
    for (k, (h, colour, label)) in [
        (
            &all,
            COLOURS[0],
            format!("all ({} samples)", p.rtt_ms.len()),
        ),
        (
            &before,
            COLOURS[3],
            format!("before a loss ({})", p.rtt_before_loss_ms.len()),
        ),
    ]
    .into_iter()
    .enumerate()
    {
        // Side by side within each bin.
        let off = k as f64 * w / 2.0;
        c.draw_series(h.iter().enumerate().map(|(i, &s)| {
            let x = i as f64 * w + off;
            Rectangle::new([(x, 0.0), (x + w / 2.0, s)], colour.mix(0.8).filled())
        }))?
        .label(label)
        .legend(line_key(colour));
    }
    draw_key(&mut c, SeriesLabelPosition::UpperLeft)?;
    Ok(())
}

/// Westwood's BE, RE and ERE over time, the capacity beside them.
fn rates_panel(
    bottom_area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    p: &TcpFlowPlot<'_>,
) -> Res<()> {
    let t_end = p.rates.last().map_or(1.0, |r| r.0).max(1e-3);
    let rates: Vec<f64> = p.rates.iter().flat_map(|r| [r.1, r.2, r.3]).collect();
    let r_top = quantile_of(&rates, 0.995)
        .max(p.capacity_bps.unwrap_or(0.0))
        .max(1.0)
        / 1e6
        * 1.3;
    let mut c = ChartBuilder::on(bottom_area)
        .caption("Westwood BE, RE and ERE", ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(35)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_end, 0.0..r_top)?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc("Mbit/s (spikes above clipped)")
        .draw()?;
    type Pick = fn(&(f64, f64, f64, f64)) -> f64;
    let lines: [(&str, RGBColor, Pick); 3] = [
        ("BE", COLOURS[0], |r| r.1),
        ("RE", COLOURS[1], |r| r.2),
        ("ERE", COLOURS[2], |r| r.3),
    ];
    for (name, colour, pick) in lines {
        c.draw_series(LineSeries::new(
            p.rates.iter().map(|r| (r.0, pick(r) / 1e6)),
            colour,
        ))?
        .label(name)
        .legend(line_key(colour));
    }
    if let Some(cap) = p.capacity_bps {
        c.draw_series(LineSeries::new(
            [(0.0, cap / 1e6), (t_end, cap / 1e6)],
            BLACK.mix(0.6),
        ))?
        .label("capacity")
        .legend(line_key(BLACK));
    }
    draw_key(&mut c, SeriesLabelPosition::LowerRight)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_file_names() {
        assert_eq!(
            slug("bursty, 125 us coalescence"),
            "bursty-125-us-coalescence"
        );
        assert_eq!(slug("100G, bursty 25G"), "100g-bursty-25g");
    }

    #[test]
    fn estimate_vs_truth_is_a_png() {
        let file = std::env::temp_dir().join(format!("tl-plot-evt-{}.png", std::process::id()));
        let series = vec![
            (
                "multirate".to_string(),
                vec![(200e6, 201e6), (150e6, 149e6)],
            ),
            ("pathload".to_string(), vec![(200e6, 190e6)]),
        ];
        draw_estimate_vs_truth(&file, "quiet", &series).unwrap();
        let bytes = std::fs::read(&file).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!(bytes.len() > 10_000, "{} bytes", bytes.len());
    }

    #[test]
    fn the_shipped_font_loads() {
        assert!(ab_glyph_loads(FONT));
    }

    fn ab_glyph_loads(bytes: &'static [u8]) -> bool {
        plotters::style::register_font("sans-serif-test", FontStyle::Normal, bytes).is_ok()
    }

    /// Four samples in four 1 ms bins over [0, 4): one, two, none, one;
    /// a sample at the top edge goes in the last bin.
    #[test]
    fn shares_by_hand() {
        assert_eq!(
            shares(&[0.5, 1.5, 1.6, 3.9], 4.0, 4),
            vec![0.25, 0.5, 0.0, 0.25]
        );
        assert_eq!(shares(&[4.0], 4.0, 4), vec![0.0, 0.0, 0.0, 1.0]);
        assert_eq!(shares(&[], 4.0, 2), vec![0.0, 0.0]);
    }

    #[test]
    fn a_flow_plot_is_written() {
        let dir = std::env::temp_dir().join(format!("tl-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("flow.png");
        let rates: Vec<(f64, f64, f64, f64)> = (0..100)
            .map(|i| (i as f64 * 0.01, 190e6, 195e6, 192e6))
            .collect();
        draw_tcp_flow(
            &f,
            &TcpFlowPlot {
                title: "test",
                rtt_ms: &[0.1, 2.0, 3.9, 4.0],
                rtt_before_loss_ms: &[3.9, 4.0],
                rates: &rates,
                capacity_bps: Some(200e6),
            },
        )
        .unwrap();
        let png = std::fs::read(&f).unwrap();
        assert_eq!(&png[1..4], b"PNG");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

/// One result of `tightlink history --plot`.
#[derive(Debug, Clone, PartialEq)]
pub struct HistoryPoint {
    pub unix_s: f64,
    pub available_bps: f64,
    pub low_bps: f64,
    /// `None`: no upper limit was measured.
    pub high_bps: Option<f64>,
    pub truth_bps: Option<f64>,
    /// The answer is "at least" `available_bps`: drawn as a triangle with
    /// no bar above it.
    pub at_least: bool,
}

/// One target and method over time.
#[derive(Debug, Clone, PartialEq)]
pub struct HistorySeries {
    pub name: String,
    pub points: Vec<HistoryPoint>,
    /// When measurements failed (drawn as crosses on the time axis).
    pub failures_unix_s: Vec<f64>,
}

/// The estimate over time with its confidence range as bars, the
/// simulator's truth where known, failures as crosses at zero; PNG, or
/// SVG when `file` ends in `.svg`.
pub fn draw_history(file: &Path, title: &str, series: &[HistorySeries]) -> Res<()> {
    register_font();
    let svg = file
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("svg"));
    if svg {
        let root = SVGBackend::new(file, (1000, 500)).into_drawing_area();
        history_on(root, title, series)
    } else {
        let root = BitMapBackend::new(file, (1000, 500)).into_drawing_area();
        history_on(root, title, series)
    }
}

fn history_on<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    series: &[HistorySeries],
) -> Res<()>
where
    DB::ErrorType: 'static,
{
    let times = series.iter().flat_map(|s| {
        s.points
            .iter()
            .map(|p| p.unix_s)
            .chain(s.failures_unix_s.iter().copied())
    });
    let t0 = times.clone().fold(f64::INFINITY, f64::min);
    let t1 = times.fold(f64::NEG_INFINITY, f64::max);
    if !t0.is_finite() {
        return Err("nothing to draw".into());
    }
    // Minutes for up to two hours, hours beyond.
    let (scale, unit) = if t1 - t0 > 7200.0 {
        (3600.0, "hours")
    } else {
        (60.0, "minutes")
    };
    let top_bps = series
        .iter()
        .flat_map(|s| s.points.iter())
        .map(|p| {
            p.high_bps
                .unwrap_or(p.available_bps)
                .max(p.available_bps)
                .max(p.truth_bps.unwrap_or(0.0))
        })
        .fold(0.0f64, f64::max);
    let (div, yunit) = if top_bps >= 2e9 {
        (1e9, "Gbit/s")
    } else {
        (1e6, "Mbit/s")
    };
    // Headroom above the data for the legend (a line per entry), so it
    // covers none of the points.
    let entries = series.len()
        + series
            .iter()
            .filter(|s| s.points.iter().any(|p| p.truth_bps.is_some()))
            .count();
    let top = (top_bps / div * (1.1 + 0.08 * entries as f64)).max(1e-3);
    let x_end = ((t1 - t0) / scale).max(1.0 / scale) * 1.02;
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..x_end, 0.0..top)?;
    c.configure_mesh()
        .x_desc(format!("time ({unit} from the first result)"))
        .y_desc(format!("available bandwidth ({yunit})"))
        .draw()?;
    let frame = HistoryFrame {
        t0,
        scale,
        div,
        top,
    };
    for (i, s) in series.iter().enumerate() {
        draw_history_series(&mut c, s, COLOURS[i % COLOURS.len()], &frame)?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}

/// Where a history chart's axes start and what they are scaled by.
struct HistoryFrame {
    t0: f64,
    scale: f64,
    div: f64,
    top: f64,
}

/// One target and method on a history chart: its ranges, its line and
/// points (triangles for "at least"), its truth and its failures.
fn draw_history_series<DB: DrawingBackend>(
    c: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>,
    s: &HistorySeries,
    colour: RGBColor,
    f: &HistoryFrame,
) -> Res<()>
where
    DB::ErrorType: 'static,
{
    let (t0, scale, div, top) = (f.t0, f.scale, f.div, f.top);
    let xy = |p: &HistoryPoint| ((p.unix_s - t0) / scale, p.available_bps / div);
    // The range as a bar; an "at least" answer has none above its
    // point, which is drawn as a triangle instead.
    c.draw_series(s.points.iter().map(|p| {
        let x = (p.unix_s - t0) / scale;
        let high = match (p.at_least, p.high_bps) {
            (false, Some(h)) => h,
            _ => p.available_bps,
        } / div;
        PathElement::new(
            vec![(x, p.low_bps / div), (x, high.min(top))],
            colour.mix(0.4),
        )
    }))?;
    c.draw_series(LineSeries::new(s.points.iter().map(xy), colour))?
        .label(s.name.as_str())
        .legend(line_key(colour));
    c.draw_series(
        s.points
            .iter()
            .filter(|p| !p.at_least)
            .map(|p| Circle::new(xy(p), 3, colour.filled())),
    )?;
    c.draw_series(
        s.points
            .iter()
            .filter(|p| p.at_least)
            .map(|p| TriangleMarker::new(xy(p), 5, colour.filled())),
    )?;
    let truth: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| p.truth_bps.map(|t| ((p.unix_s - t0) / scale, t / div)))
        .collect();
    if !truth.is_empty() {
        // Each series' truth in its own colour.
        c.draw_series(
            truth
                .iter()
                .map(|&(x, y)| Cross::new((x, y), 4, colour.stroke_width(2))),
        )?
        .label(format!("{} truth (simulator)", s.name))
        .legend(move |(x, y)| Cross::new((x + 10, y), 4, colour.stroke_width(2)));
    }
    c.draw_series(
        s.failures_unix_s
            .iter()
            .map(|&t| Cross::new(((t - t0) / scale, 0.0), 6, RED.stroke_width(2))),
    )?;
    Ok(())
}
