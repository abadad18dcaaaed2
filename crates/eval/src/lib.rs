//! tightlink-eval: \[BASS\]'s evaluation reproduced on the simulator
//! (`tightlink eval`). [`experiments`] runs the cells in parallel,
//! [`run`] collects them, [`markdown`] prints the tables, [`plots`] draws
//! PNGs with a font shipped in this crate (no system fonts needed).

pub mod closed_loop;
pub mod experiments;
pub mod over_time;
pub mod plots;
pub mod tcpw;

use closed_loop::{ChirpRow, GapExample, StrategyRow};
use experiments::{
    DecisionCell, ErrorDist, OutOfRange, PathCase, Scale, SensitivityCell, HUNDRED_GIG,
    HUNDRED_GIG_SMOOTHED, LOSSY, TEN_GIG,
};

/// Everything one `tightlink eval` run measured.
pub struct Results {
    pub scale: Scale,
    pub seed: u64,
    /// Per 10 Gbit/s path (TEN_GIG order), then 100 Gbit/s bursty and
    /// smoothed, then the lossy path.
    pub decisions: Vec<(PathCase, Vec<DecisionCell>)>,
    pub multirate: Vec<(PathCase, Vec<ErrorDist>)>,
    pub sensitivity: Vec<SensitivityCell>,
    /// Each sub-stream read right by its own truth: the bracket rules' ceiling.
    pub ceilings: Vec<(PathCase, experiments::SubStreamCeiling)>,
    /// Multi-pass smoothing's passes and robust signature, per path.
    pub multipass: Vec<(PathCase, Vec<experiments::MultipassRow>)>,
    /// Multi-rate streams whose truth lay outside their rates, per path.
    pub out_of_range: Vec<(PathCase, Vec<OutOfRange>)>,
    /// Multi-pass multirate (5 x 64, Range 30 %) per load time scale.
    pub load_scales: Vec<(PathCase, ErrorDist)>,
    /// `queue-fit` with the capacity given off by a factor.
    /// Per path: its Range and the rows.
    pub capacity_off: Vec<(PathCase, f64, Vec<experiments::CapacityOff>)>,
    pub strategies: Vec<(PathCase, Vec<StrategyRow>)>,
    /// pathChirp per chirp and per 11-chirp mean, per path.
    pub chirps: Vec<(PathCase, ChirpRow)>,
    /// BART following a step in the cross traffic, per path.
    pub tracking: Vec<(PathCase, over_time::Tracking)>,
    pub cc: Vec<over_time::CcCell>,
    pub tcpw_efficiency: Vec<tcpw::EfficiencyCell>,
    pub tcpw_friendliness: Vec<tcpw::FriendlinessCell>,
    pub tcpw_trace: tcpw::BbeTrace,
    pub example: GapExample,
    pub wall_s: f64,
}

/// Runs every experiment at `scale`.
pub fn run(scale: Scale, seed: u64, progress: &mut dyn FnMut(&str)) -> Results {
    let start = std::time::Instant::now();
    let ten = || [TEN_GIG[0].clone(), TEN_GIG[1].clone()];
    let (single, hundred, multi) = (
        scale.single_streams,
        scale.hundred_gig_streams,
        scale.multi_streams,
    );
    let mut decisions = per_case(
        TEN_GIG.iter().cloned(),
        "decision error vs length",
        progress,
        |c| experiments::decision_error(seed, c, single, &experiments::decision_lengths(c)),
    );
    let hundreds = [HUNDRED_GIG, HUNDRED_GIG_SMOOTHED];
    decisions.extend(per_case(
        hundreds,
        "decision error vs length",
        progress,
        |c| experiments::decision_error(seed, c, hundred, &experiments::decision_lengths(c)),
    ));
    decisions.extend(per_case(
        [LOSSY],
        "decision error vs length",
        progress,
        |c| experiments::decision_error(seed, c, single, &experiments::decision_lengths(c)),
    ));
    let multirate_cases = ten().into_iter().chain([HUNDRED_GIG, LOSSY]);
    let multirate = per_case(
        multirate_cases,
        "multi-rate error distribution",
        progress,
        |c| experiments::multirate_errors(seed, c, multi),
    );
    let multipass = per_case(ten(), "multi-pass smoothing", progress, |c| {
        experiments::multipass_report(seed, c, multi)
    });
    let out_cases = ten().into_iter().chain([HUNDRED_GIG]);
    let out_of_range = per_case(out_cases, "truth outside the probed rates", progress, |c| {
        experiments::out_of_range(seed, c, multi)
    });
    progress("Range / packets-per-rate sensitivity");
    let sensitivity = experiments::sensitivity(seed, &TEN_GIG[0], scale.sensitivity_streams);
    let ceilings = ceilings(scale, seed, progress);
    progress("multi-rate error vs the load's burst time scale");
    let load_scales = experiments::LOAD_SCALES
        .iter()
        .map(|case| {
            let mut d = experiments::multirate_errors(seed, case, multi);
            (case.clone(), d.swap_remove(1))
        })
        .collect();
    let capacity_off = capacity_off(scale, seed, progress);
    let chirp_cases = [HUNDRED_GIG, experiments::HUNDRED_GIG_UNCOALESCED, LOSSY];
    let chirps = per_case(
        TEN_GIG.iter().cloned().chain(chirp_cases),
        "pathChirp",
        progress,
        |c| closed_loop::chirp_errors(seed, c, multi),
    );
    let tracking = per_case(over_time::STEPS, "BART following a step", progress, |c| {
        over_time::tracking(seed, c)
    });
    let strategies = per_case(ten(), "closed-loop strategies", progress, |c| {
        closed_loop::strategies(seed, c, scale.strategy_seeds)
    });
    progress("rate control: rapid, rapid-raw, cubic, bbr");
    let cc = over_time::congestion_control(seed, scale.cc_seconds * 1e9);
    progress("TCPW BBE: efficiency and friendliness");
    let tcpw_efficiency = tcpw::efficiency(seed, scale.tcpw_seconds * 1e9);
    let tcpw_friendliness = tcpw::friendliness(seed, scale.tcpw_pair_seconds * 1e9);
    let tcpw_trace = tcpw::bbe_trace(seed, 20e9);
    let example = closed_loop::gap_example(seed, &TEN_GIG[0]);
    Results {
        scale,
        seed,
        decisions,
        multirate,
        multipass,
        sensitivity,
        ceilings,
        out_of_range,
        load_scales,
        capacity_off,
        strategies,
        chirps,
        tracking,
        cc,
        tcpw_efficiency,
        tcpw_friendliness,
        tcpw_trace,
        example,
        wall_s: start.elapsed().as_secs_f64(),
    }
}

/// `f` on each case in turn, `progress` told "`what`: the case".
fn per_case<T>(
    cases: impl IntoIterator<Item = PathCase>,
    what: &str,
    progress: &mut dyn FnMut(&str),
    mut f: impl FnMut(&PathCase) -> T,
) -> Vec<(PathCase, T)> {
    cases
        .into_iter()
        .map(|case| {
            progress(&format!("{what}: {}", case.name));
            let t = f(&case);
            (case, t)
        })
        .collect()
}

/// Each sub-stream read by its own truth, per path and Range.
fn ceilings(
    scale: Scale,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Vec<(PathCase, experiments::SubStreamCeiling)> {
    let mut ceilings = Vec::new();
    for (case, n, range) in [
        (TEN_GIG[0].clone(), scale.multi_streams, 0.3),
        (TEN_GIG[0].clone(), scale.sensitivity_streams, 0.5),
        (TEN_GIG[1].clone(), scale.multi_streams, 0.3),
        (HUNDRED_GIG, scale.multi_streams, 0.3),
        (LOSSY, scale.multi_streams, 0.3),
    ] {
        progress(&format!(
            "sub-streams read by their own truth: {}",
            case.name
        ));
        let c = experiments::sub_stream_ceiling(seed, &case, n, range);
        ceilings.push((case, c));
    }
    ceilings
}

/// `queue-fit` with the capacity given off, per path and Range.
fn capacity_off(
    scale: Scale,
    seed: u64,
    progress: &mut dyn FnMut(&str),
) -> Vec<(PathCase, f64, Vec<experiments::CapacityOff>)> {
    let mut capacity_off = Vec::new();
    for (case, n, range) in [
        (TEN_GIG[0].clone(), scale.sensitivity_streams, 0.5),
        (TEN_GIG[1].clone(), scale.sensitivity_streams, 0.5),
        (HUNDRED_GIG, scale.sensitivity_streams, 0.3),
    ] {
        progress(&format!("the capacity given off: {}", case.name));
        let rows = experiments::capacity_off(seed, &case, n, range);
        capacity_off.push((case, range, rows));
    }
    capacity_off
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:.1} %", x * 100.0)
    } else {
        "-".to_string()
    }
}

fn signed_pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1} %", x * 100.0)
    } else {
        "-".to_string()
    }
}

/// A table row: label, exact share, within +-10 %, p10, median, p90.
fn dist_row(label: &str, d: &ErrorDist) -> String {
    format!(
        "| {} | {} | {} | {} | {} | {} |",
        label,
        pct(d.answered()),
        pct(d.within(0.10)),
        signed_pct(d.quantile(0.1)),
        signed_pct(d.quantile(0.5)),
        signed_pct(d.quantile(0.9))
    )
}

/// [`dist_row`] with the share of wrong bounds after the exact share.
fn dist_row_with_bounds(label: &str, d: &ErrorDist) -> String {
    let wrong = d.wrong_bounds.unwrap_or(0) as f64 / d.streams.max(1) as f64;
    format!(
        "| {} | {} | {} | {} | {} | {} | {} |",
        label,
        pct(d.answered()),
        pct(wrong),
        pct(d.within(0.10)),
        signed_pct(d.quantile(0.1)),
        signed_pct(d.quantile(0.5)),
        signed_pct(d.quantile(0.9))
    )
}

/// The tables, as Markdown.
pub fn markdown(r: &Results) -> String {
    let mut s = String::new();
    title(&mut s, r);
    decision_tables(&mut s, r);
    multirate_tables(&mut s, r);
    multipass_tables(&mut s, r);
    out_of_range_table(&mut s, r);
    sensitivity_tables(&mut s, r);
    ceiling_table(&mut s, r);
    load_scale_table(&mut s, r);
    capacity_off_table(&mut s, r);
    chirp_table(&mut s, r);
    tracking_table(&mut s, r);
    strategy_tables(&mut s, r);
    rate_control_table(&mut s, r);
    tcpw_tables(&mut s, r);
    s
}

/// The first line: seed, scale, time and threads.
fn title(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "tightlink eval: seed {}, {} single-rate streams per cell ({} at 100G), {} multi-rate streams per path, {} per sensitivity cell, {} seeds per strategy; {:.1} s on {} threads\n",
        r.seed,
        r.scale.single_streams,
        r.scale.hundred_gig_streams,
        r.scale.multi_streams,
        r.scale.sensitivity_streams,
        r.scale.strategy_seeds,
        r.wall_s,
        rayon::current_num_threads()
    );
}

/// Single-rate decision error vs stream length, per path.
fn decision_tables(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## Decision error (wrong / ambiguous) vs stream length (Fig. 6, 8, 11)\n\nSingle-rate streams of 9000-byte packets at 0.67-1.2 x the nominal available bandwidth; truth per stream from the simulator.\n"
    );
    for (case, cells) in &r.decisions {
        let _ = writeln!(s, "### {}\n", case.name);
        let lengths = experiments::decision_lengths(case);
        let head: Vec<String> = lengths.iter().map(|l| l.to_string()).collect();
        let _ = writeln!(
            s,
            "| method | {} |\n|---|{}",
            head.join(" | "),
            "---|".repeat(lengths.len())
        );
        for m in tightlink_core::Method::SINGLE_RATE {
            let row: Vec<String> = lengths
                .iter()
                .map(|&l| {
                    cells
                        .iter()
                        .find(|c| c.method == m && c.length == l)
                        .map_or("-".into(), |c| {
                            format!("{} / {}", pct(c.wrong), pct(c.ambiguous))
                        })
                })
                .collect();
            let _ = writeln!(s, "| {} | {} |", m.name(), row.join(" | "));
        }
        let _ = writeln!(s);
    }
}

/// Multi-rate error distributions per path and method.
fn multirate_tables(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## Multi-rate estimates, Range 30 % (Fig. 14, 15)\n\nCentres within +-20 % of the nominal available bandwidth. Within +-10 % counts over all streams; quantiles over exact estimates. Wrong bound: \"at least\" a rate 10 % above the stream's truth, or \"at most\" one 10 % below it.\n"
    );
    for (case, dists) in &r.multirate {
        let _ = writeln!(
            s,
            "### {}, 5 x {} packets\n",
            case.name,
            64 * case.length_scale
        );
        let _ = writeln!(
            s,
            "| method | exact | wrong bound | within +-10 % | p10 | median | p90 |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        for d in dists {
            let _ = writeln!(s, "{}", dist_row_with_bounds(&d.label, d));
        }
        let _ = writeln!(s);
    }
}

/// Multi-pass smoothing: passes and robustness.
fn multipass_tables(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## Multi-pass smoothing (VI-B): passes and the robust signature\n\nThe 5 x 64 streams above, smoothed by single-pass BASS and by multi-pass smoothing with the spike thresholds multiplied by a decay per pass after the first (1: the same thresholds every pass, the default). Merged: a pass after the first averaged something. Robust: the window-averaged gaps that exceed their send gap form one unbroken run at the end (the paper's stopping signature).\n\n| path | smoothing | merged | mean passes | robust | exact | wrong bound | within +-10 % | p10 | median | p90 |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (case, rows) in &r.multipass {
        for row in rows {
            let label = match row.threshold_decay {
                None => "single pass".to_string(),
                Some(d) => format!("multi-pass, decay {d}"),
            };
            let _ = writeln!(
                s,
                "| {} | {} | {} | {:.2} | {} |{}",
                case.name,
                label,
                pct(row.merged),
                row.mean_passes,
                pct(row.robust),
                // The rest of the error row, without its label cell.
                dist_row_with_bounds("", &row.errors).trim_start_matches("|  |")
            );
        }
    }
    let _ = writeln!(s);
}

/// Multi-rate streams whose truth lay outside the probed rates.
fn out_of_range_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## Truth outside the probed rates\n\nMulti-rate streams, Range 30 %, centred at 0.45-0.65 or 1.45-1.8 x the nominal available bandwidth; streams whose own truth lay above the top rate or under the lowest, and what `multirate` and `queue-fit` (given the tight link's capacity) answered.\n\n| path | method | truth | streams | right bound | exact | wrong bound | none |\n|---|---|---|---:|---:|---:|---:|---:|"
    );
    for (case, cells) in &r.out_of_range {
        for c in cells {
            let _ = writeln!(
                s,
                "| {} | {} | {} the rates | {} | {} | {} | {} | {} |",
                case.name,
                c.method,
                c.side,
                c.streams,
                pct(c.right_bound),
                pct(c.exact),
                pct(c.wrong_bound),
                pct(c.none)
            );
        }
    }
    let _ = writeln!(s);
}

/// The Range / packets-per-rate sensitivity grids.
fn sensitivity_tables(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## Sensitivity to Range and packets per rate (Fig. 16), {}\n\nShare of multi-pass multirate estimates within +-10 % (median error).\n",
        TEN_GIG[0].name
    );
    let grid = |s: &mut String, cell: &dyn Fn(&SensitivityCell) -> (f64, f64)| {
        let _ = write!(s, "| Range |");
        for p in experiments::PER_RATE {
            let _ = write!(s, " 5 x {p} |");
        }
        let _ = writeln!(s, "\n|---|{}", "---:|".repeat(experiments::PER_RATE.len()));
        for range in experiments::RANGES {
            let _ = write!(s, "| {:.0} % |", range * 100.0);
            for p in experiments::PER_RATE {
                let c = r
                    .sensitivity
                    .iter()
                    .find(|c| c.range == range && c.per_rate == p);
                let _ = write!(
                    s,
                    " {} |",
                    c.map_or("-".into(), |c| {
                        let (within, median) = cell(c);
                        format!("{} ({})", pct(within), signed_pct(median))
                    })
                );
            }
            let _ = writeln!(s);
        }
    };
    grid(s, &|c| (c.within_10, c.median_error));
    let _ = writeln!(
        s,
        "\nThe same streams read by `queue-fit`, given the tight link's capacity (10 Gbit/s):\n"
    );
    grid(s, &|c| (c.queue_fit_within_10, c.queue_fit_median_error));
}

/// Each sub-stream read by its own truth: the bracket rules' ceiling.
fn ceiling_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "\n## Each sub-stream read by its own truth: the bracket rules' ceiling\n\nThe multi-rate streams above (5 x 64, 5 x 640 at 100 Gbit/s) with each sub-stream judged against the available bandwidth it met at the tight link (from its first packet's arrival there to the next sub-stream's), the stream answered from the bracket between two rates that disagrees with the fewest of those judgements, and scored against the whole stream's truth. Split: a sub-stream's rate lies on the other side of its own truth than of the stream's. Best point: within +-10 % if any point of a best-fitting bracket is, the most any rule that answers inside that bracket can reach; a rule that reads the sub-streams together (`queue-fit`, given the capacity, and `multirate` meeting it halfway) is not bound by it.\n\n| path | Range | streams | split | bracket midpoint within +-10 % | best point within +-10 % | multirate within +-10 % | multirate, capacity given | queue-fit within +-10 % |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (case, c) in &r.ceilings {
        let _ = writeln!(
            s,
            "| {} | {:.0} % | {} | {} | {} | {} | {} | {} | {} |",
            case.name,
            c.range * 100.0,
            c.streams,
            pct(c.split),
            pct(c.midpoint_within),
            pct(c.best_within),
            pct(c.multirate_within),
            pct(c.multirate_given_within),
            pct(c.queue_fit_within)
        );
    }
}

/// Multi-rate error vs the cross traffic's burst time scale.
fn load_scale_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "\n## Multi-rate error vs the cross traffic's burst time scale\n\nMulti-pass multirate, 5 x 64, Range 30 %, 125 us coalescence; 2.5 Gbit/s mean ON/OFF load in every row.\n\n| load | exact | within +-10 % | p10 | median | p90 |\n|---|---:|---:|---:|---:|---:|"
    );
    for (case, d) in &r.load_scales {
        let _ = writeln!(s, "{}", dist_row(case.name, d));
    }
}

/// queue-fit and multirate given the capacity times a factor.
fn capacity_off_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "\n## queue-fit and multirate with the capacity off\n\nMulti-rate streams (5 x 64 packets, 5 x 640 at 100 Gbit/s) read by `queue-fit` and by `multirate` (which meets the queue fit halfway) given the tight link's capacity times a factor. Bounds are `multirate`'s own whatever it is given.\n\n| path | Range | capacity given | queue-fit exact | wrong bound | within +-10 % | p10 | median | p90 | multirate within +-10 % | median |\n|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (case, range, rows) in &r.capacity_off {
        for c in rows {
            let row = dist_row_with_bounds("", &c.queue_fit);
            let _ = writeln!(
                s,
                "| {} | {:.0} % | {} x |{} {} | {} |",
                case.name,
                range * 100.0,
                c.factor,
                row.trim_start_matches("|  |"),
                pct(c.multirate.within(0.10)),
                signed_pct(c.multirate.quantile(0.5))
            );
        }
    }
}

/// pathChirp's chirps on the same paths.
fn chirp_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "\n## pathChirp: chirps on the same paths\n\nChirps of 9000-byte packets from a tenth of the link rate to all of it, spread factor 1.2 (15 packets at 10 Gbit/s); each read by its excursions (decrease factor 1.5, busy period 5), and pathChirp's answer, the mean of {} chirps that answered, against the mean of their truths. Within +-10 % counts over all chirps (all groups).\n\n| path | chirps | answered | per chirp within +-10 % | per chirp median | means within +-10 % | means median | means p90 abs | why not answered |\n|---|---:|---:|---:|---:|---:|---:|---:|---|",
        closed_loop::CHIRP_SMOOTHING
    );
    for (case, row) in &r.chirps {
        let mut abs: Vec<f64> = row.means.errors.iter().map(|e| e.abs()).collect();
        abs.sort_by(f64::total_cmp);
        let p90 = tightlink_core::stats::quantile_sorted(&abs, 0.9).unwrap_or(f64::NAN);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            case.name,
            row.chirps,
            pct(row.answered as f64 / row.chirps.max(1) as f64),
            pct(row.per_chirp.within(0.1)),
            signed_pct(row.per_chirp.quantile(0.5)),
            pct(row.means.within(0.1)),
            signed_pct(row.means.quantile(0.5)),
            pct(p90),
            row.unanswered_reason.as_deref().unwrap_or("-")
        );
    }
}

/// BART following a step of cross traffic.
fn tracking_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "\n## BART following a step\n\n`tightlink estimate --follow` on the simulator for {} streams: the cross traffic steps from 2 to 5 Gbit/s at {} s (available bandwidth 8 to 5 Gbit/s); each stream's estimate against that stream's own truth. \"Streams to follow\": after the step, until three in a row are within +-10 %. Plots: `tracking-*.png`.\n\n| path | streams to follow | median error before | median error after (5th stream on) |\n|---|---:|---:|---:|",
        over_time::TRACK_STREAMS,
        over_time::STEP_AT_S
    );
    for (case, t) in &r.tracking {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            case.name,
            t.streams_to_follow
                .map_or("never".to_string(), |n| n.to_string()),
            pct(t.median_before),
            pct(t.median_after)
        );
    }
}

/// The closed-loop strategies per path.
fn strategy_tables(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(s, "\n## Closed-loop strategies (tightlink estimate)\n");
    for (case, rows) in &r.strategies {
        let _ = writeln!(s, "### {}\n", case.name);
        let _ = writeln!(
            s,
            "| strategy | exact answers | within +-10 % | median error | worst error | median probe MB | median streams | median path time |\n|---|---:|---:|---:|---:|---:|---:|---:|"
        );
        for row in rows {
            let within = row.errors.iter().filter(|e| e.abs() <= 0.10).count();
            let worst = row
                .errors
                .iter()
                .copied()
                .max_by(|a, b| a.abs().total_cmp(&b.abs()))
                .unwrap_or(f64::NAN);
            let med = if row.errors.is_empty() {
                f64::NAN
            } else {
                row.errors[row.errors.len() / 2]
            };
            let _ = writeln!(
                s,
                "| {} | {}/{} | {}/{} | {} | {} | {:.1} | {:.0} | {:.3} s |",
                row.strategy,
                row.errors.len(),
                row.runs,
                within,
                row.runs,
                signed_pct(med),
                signed_pct(worst),
                row.median_bytes / 1e6,
                row.median_streams,
                row.median_duration_s
            );
        }
        let _ = writeln!(s);
    }
}

/// The rate controllers driven by the estimates.
fn rate_control_table(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## Rate control driven by the estimates (section VII, Figs. 17-18)\n\nOne long-lived flow of 9000-byte packets for {} s on the 10 Gbit/s path beside 2.5 Gbit/s of cross traffic (125 us coalescence, 1 MB buffer), per-packet feedback a round trip later. rapid: data sent as multi-rate streams (Range 50 %, 4 x 32), the next rate from each stream's multi-pass estimate; rapid-raw: the same rule on unsmoothed gaps; cubic and bbr: the simulator's models of the kernel's. Goodput and available bandwidth: means of the 500 ms bins after the first.\n\n| cross traffic | RTT | controller | goodput | of available | loss | queueing delay median | p95 |\n|---|---:|---|---:|---:|---:|---:|---:|",
        r.scale.cc_seconds
    );
    for c in &r.cc {
        for f in &c.flows {
            let _ = writeln!(
                s,
                "| {} | {} ms | {} | {:.2} Gbit/s | {} | {} | {:.0} us | {:.0} us |",
                c.cross,
                c.rtt_ms,
                f.controller,
                f.goodput_bps() / 1e9,
                pct(f.goodput_bps() / f.available_bps()),
                pct(f.loss()),
                f.queue_delay_median_ns / 1e3,
                f.queue_delay_p95_ns / 1e3
            );
        }
    }
    let _ = writeln!(s);
}

fn tcpw_tables(s: &mut String, r: &Results) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "## TCP Westwood BBE: efficiency (TCPW section 4.1, Fig. 8)\n\nOne flow alone for {} s: a sender link four times the bottleneck, the bottleneck's buffer a tenth of its bandwidth-delay product, 9000-byte packets, random loss on the path, no cross traffic. bbe: the core's controller (the window after a loss from the congestion level, ERE and the buffer estimate); newreno, cubic: the simulator's models; rapid: the estimate-driven rate controller. Utilisation: goodput over the 500 ms bins after the first, as a share of the bottleneck.\n\n| bottleneck | RTT | random loss | bbe | newreno | cubic | rapid | bbe / newreno |\n|---|---:|---:|---:|---:|---:|---:|---:|",
        r.scale.tcpw_seconds
    );
    for cell in r.tcpw_efficiency.chunks(tcpw::EFFICIENCY_CONTROLLERS.len()) {
        let c = &cell[0];
        let of = |name: &str| cell.iter().find(|x| x.flow.controller == name);
        let u = |name: &str| of(name).map_or("-".into(), |x| pct(x.utilisation()));
        let ratio = match (of("bbe"), of("newreno")) {
            (Some(b), Some(n)) if n.flow.goodput_bps() > 0.0 => {
                format!("{:.2}", b.flow.goodput_bps() / n.flow.goodput_bps())
            }
            _ => "-".into(),
        };
        let _ = writeln!(
            s,
            "| {} Gbit/s | {} ms | {:.2} % | {} | {} | {} | {} | {ratio} |",
            c.capacity_bps / 1e9,
            c.rtt_ms,
            c.loss * 100.0,
            u("bbe"),
            u("newreno"),
            u("cubic"),
            u("rapid")
        );
    }
    let _ = writeln!(
        s,
        "\n## TCP Westwood BBE: friendliness (TCPW section 4.2, Fig. 9)\n\nTwo flows started together on a {} Gbit/s bottleneck, {} ms round trip, for {} s (the same path as above). Share: each flow's bytes of what the two delivered; Jain's index of the two (1 an even split, 0.5 one flow alone); utilisation of the bottleneck by both.\n\n| random loss | flows | first's share | second's share | Jain's index | utilisation | loss |\n|---:|---|---:|---:|---:|---:|---:|",
        tcpw::FRIENDLY_CAPACITY_BPS / 1e9,
        tcpw::FRIENDLY_RTT_MS,
        r.scale.tcpw_pair_seconds
    );
    for c in &r.tcpw_friendliness {
        let [a, b] = c.shares();
        let lost: u64 = c.flows.iter().map(|f| f.lost_packets).sum();
        let sent: u64 = c.flows.iter().map(|f| f.sent_packets).sum();
        let _ = writeln!(
            s,
            "| {:.2} % | {} + {} | {} | {} | {:.3} | {} | {:.3} % |",
            c.loss * 100.0,
            c.flows[0].controller,
            c.flows[1].controller,
            pct(a),
            pct(b),
            c.jain(),
            pct(c.utilisation()),
            100.0 * lost as f64 / sent.max(1) as f64
        );
    }
    let _ = writeln!(s);
}
