//! Steps of queue (a batch of cross traffic or a pause of the path that
//! arrived at once) taken out of a stream before its reading, and the
//! batches' link time counted after it.

use super::base::*;
use super::params::*;
use super::{multi_rate::*, queue_fit::with_the_queue_fit, single_rate::*};

/// A single-rate stream read by its gaps or the trend of its one-way
/// delays (PRC-MT, Pathload, IMR-Pathload), which a step of queue moves:
/// read with its steps taken out and the batches counted, where that
/// decides; as it came otherwise.
pub(super) fn unstepped_single_rate(
    room: &mut Analyzer,
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    _tracker: &mut BartTracker,
) -> Analysis {
    // As for multi-rate streams below: a step is no rate's doing.
    let mut u = std::mem::take(&mut room.unstepped);
    let window = params.multipass.window;
    let stepped = crate::decision::burst::without_steps_into(stream, window, &mut u);
    let unstepped = stepped.then(|| {
        let a = single_rate(&u.stream, method, params, base.clone(), &mut room.gaps);
        above_with_the_batches(&u, a)
    });
    let a = match unstepped.flatten() {
        Some(a) => a,
        None => single_rate(stream, method, params, base, &mut room.gaps),
    };
    room.unstepped = u;
    a
}

/// A multi-rate stream read by its crossing, sub-stream by sub-stream
/// (the `multirate` family; TOPP and BART fit a line instead): read with
/// its steps taken out and the batches' link time counted, where that
/// reads; as it came otherwise.
pub(super) fn unstepped_crossing(
    room: &mut Analyzer,
    stream: &ProbeStream,
    method: Method,
    params: &AnalysisParams,
    base: Analysis,
    tracker: &mut BartTracker,
) -> Analysis {
    // A queue rise that came in one step is no rate's doing: a batch of
    // cross traffic or a pause of the path.
    let mut u = std::mem::take(&mut room.unstepped);
    let window = params.multipass.window;
    let stepped = crate::decision::burst::without_steps_into(stream, window, &mut u);
    let mut read = |s: &ProbeStream, room: &mut Analyzer| {
        let a = multi_rate(s, method, params, base.clone(), tracker, room);
        let fastest = room.subs.iter().map(|s| s.rate_bps).fold(0.0, f64::max);
        (with_the_queue_fit(s, method, params, a), fastest)
    };
    let unstepped = stepped.then(|| {
        let (a, fastest) = read(&u.stream, room);
        less_the_batches(&u, a, fastest)
    });
    let a = match unstepped.flatten() {
        Some(a) => a,
        None => read(stream, room).0,
    };
    room.unstepped = u;
    a
}

/// The decision `a` on a single-rate stream whose steps were taken out,
/// with the batches behind them counted: "above" between them is above
/// with them; "below" between them is above where the stream's rate
/// exceeds what the batches leave of the drain rate
/// ([`crate::decision::burst::Unstepped::less_the_batches`] of an "at
/// least" reading). `None` where the stream as sent decides better (no
/// decision between them, or no batch explains the steps).
pub(super) fn above_with_the_batches(
    u: &crate::decision::burst::Unstepped,
    a: Analysis,
) -> Option<Analysis> {
    let rate = a.avg_rate_bps?;
    let decision = match a.decision? {
        Decision::Above => Decision::Above,
        Decision::Ambiguous => return None,
        Decision::Below => {
            let (_, left) = u
                .less_the_batches(Bound::AtLeast, rate, rate)
                .filter(|&(_, left)| left > 0.0)?;
            if rate > left {
                Decision::Above
            } else {
                Decision::Below
            }
        }
    };
    let note = format!(
        "{} step{} of queue at once ({:.0} us, {:.1} % of the stream) read as batches of \
         cross traffic",
        u.steps.len(),
        if u.steps.len() == 1 { "" } else { "s" },
        u.steps.iter().map(|&(_, ns)| ns).sum::<f64>() / 1e3,
        100.0 * u.held_share(),
    );
    Some(Analysis {
        decision: Some(decision),
        bound: single_bound(decision),
        reason: Some(match a.reason {
            Some(r) => format!("{r}; {note}"),
            None => note,
        }),
        ..a
    })
}

/// The reading `a` of a stream whose steps were taken out, with the
/// batches behind them counted
/// ([`crate::decision::burst::Unstepped::less_the_batches`]); `fastest_bps`
/// is its fastest sub-stream's rate. `None` where the stream as sent
/// reads better: its steps drained faster than a queue the probes
/// crossed can (they came after the tight link), the reading between
/// them is "at most" (a bound the batches only tighten) or none, or the
/// batches would take all of it (no batch explains such steps).
pub(super) fn less_the_batches(
    u: &crate::decision::burst::Unstepped,
    a: Analysis,
    fastest_bps: f64,
) -> Option<Analysis> {
    let e = a
        .abw_bps
        .filter(|_| matches!(a.bound, Bound::Exact | Bound::AtLeast))?;
    let (bound, left) = u
        .less_the_batches(a.bound, e, fastest_bps)
        .filter(|&(_, left)| left > 0.0)?;
    let between = match a.bound {
        Bound::AtLeast => "at least ",
        _ => "",
    };
    let note = format!(
        "{} step{} of queue at once ({:.0} us, {:.1} % of the stream; drained at {:.3} \
         Gbit/s) read as batches of cross traffic: {between}{:.3} Gbit/s between them, \
         {:.3} with them",
        u.steps.len(),
        if u.steps.len() == 1 { "" } else { "s" },
        u.steps.iter().map(|&(_, ns)| ns).sum::<f64>() / 1e3,
        100.0 * u.held_share(),
        u.drain_bps().unwrap_or(0.0) / 1e9,
        e / 1e9,
        left / 1e9
    );
    let mut detail = a.detail;
    if a.bound == Bound::AtLeast {
        detail.batches = u.batch_count(e, fastest_bps);
    }
    Some(Analysis {
        abw_bps: Some(left),
        bound,
        reason: Some(match a.reason {
            Some(r) => format!("{r}; {note}"),
            None => note,
        }),
        detail,
        ..a
    })
}
