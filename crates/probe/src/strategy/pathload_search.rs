//! Pathload's rate search (\[IMR\], section 3; Pathload 1.3.2):
//! fleets of streams at one rate, each stream's one-way-delay trend, the
//! fleet's verdict (increasing when at least 60 % of its streams are,
//! non-increasing likewise, grey otherwise), and a binary search that keeps
//! the grey region [Gmin, Gmax] apart from the bounds [Rmin, Rmax].
//!
//! It ends when Rmax - Rmin is within the resolution, or when the grey
//! region reaches both bounds within it; the answer is the middle of the
//! final range (the grey region when there is one), and the range it
//! reports runs from Rmin to Rmax, the rates whose fleets bracketed it. The trend test is Pathload's own or IMR's (`imr-avg`,
//! `imr-wavelet`). Fleets are 6 streams of 100 packets (Pathload: 12).

use super::prcmt_search::measure_adr;
use super::session::Method as Strategy;
use super::session::{single_rate_request, Report, Session, Stop, StrategyError};
use tightlink_core::{analyze, AnalysisParams, Bound, Decision, Method, StreamKind};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathloadSearchParams {
    pub size_bytes: u32,
    pub fleet: usize,
    pub stream_len: usize,
    /// Share of a fleet's streams that decides its trend (Pathload: 0.6).
    pub aggregate: f64,
    pub resolution: f64,
    /// `pathload`, `imr-avg` or `imr-wavelet`.
    pub method: Method,
}

impl Default for PathloadSearchParams {
    fn default() -> Self {
        PathloadSearchParams {
            size_bytes: 9000,
            fleet: 6,
            stream_len: 100,
            aggregate: 0.6,
            resolution: 0.02,
            method: Method::Pathload,
        }
    }
}

/// The search with its default parameters and `method`'s trend test.
pub(super) fn run_default(
    s: &mut Session,
    method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = PathloadSearchParams {
        method: method.per_stream(),
        ..Default::default()
    };
    p.size_bytes = size.unwrap_or(p.size_bytes);
    Ok((run(s, p, analysis)?, p.size_bytes))
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fleet {
    Increasing,
    NoTrend,
    Grey,
}

pub fn run(
    s: &mut Session,
    p: PathloadSearchParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    let name = Strategy::of_per_stream(p.method).unwrap_or(Strategy::Pathload);
    let Some(adr) = measure_adr(s, p.size_bytes, 100, 0, analysis)?.map(|a| a.bps) else {
        return Ok(s.report(name, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableAdrTrain));
    };
    let res = p.resolution * adr;
    let (mut rmin, mut rmax) = (0.0f64, adr);
    let mut grey: Option<(f64, f64)> = None;
    let mut rate = 0.5 * adr;
    let mut stop = Stop::Converged;
    let (mut seen_inc, mut seen_no) = (false, false);
    loop {
        let stream_bytes = p.stream_len as u64 * p.size_bytes as u64;
        // The whole fleet fits, its streams as well as its bytes.
        if !s.fits(p.fleet as u64 * stream_bytes) || s.streams_left(stream_bytes) < p.fleet {
            stop = Stop::Budget;
            break;
        }
        let (mut inc, mut no) = (0, 0);
        for _ in 0..p.fleet {
            let st = s.send(&single_rate_request(rate, p.stream_len, p.size_bytes))?;
            match analyze(&st, StreamKind::SingleRate, p.method, analysis).decision {
                Some(Decision::Above) => inc += 1,
                Some(Decision::Below) => no += 1,
                _ => {}
            }
        }
        let verdict = if inc as f64 >= p.aggregate * p.fleet as f64 {
            Fleet::Increasing
        } else if no as f64 >= p.aggregate * p.fleet as f64 {
            Fleet::NoTrend
        } else {
            Fleet::Grey
        };
        match verdict {
            Fleet::Increasing => {
                rmax = rate;
                seen_inc = true;
                grey = grey.filter(|g| g.1 < rate);
            }
            Fleet::NoTrend => {
                rmin = rate;
                seen_no = true;
                grey = grey.filter(|g| g.0 > rate);
            }
            Fleet::Grey => {
                grey = Some(grey.map_or((rate, rate), |(a, b)| (a.min(rate), b.max(rate))));
            }
        }
        // Next rate, Pathload's way: search above the grey region first.
        rate = match grey {
            None => {
                if rmax - rmin <= res {
                    break;
                }
                0.5 * (rmin + rmax)
            }
            Some((gmin, gmax)) => {
                if rmax - gmax > res {
                    0.5 * (gmax + rmax)
                } else if gmin - rmin > res {
                    0.5 * (rmin + gmin)
                } else {
                    break;
                }
            }
        };
    }
    let (lo, hi) = grey.unwrap_or((rmin, rmax));
    let bound = match (seen_inc, seen_no) {
        (true, true) => Bound::Exact,
        (false, true) => Bound::AtLeast,
        (true, false) => Bound::AtMost,
        (false, false) => {
            if grey.is_some() {
                Bound::Exact
            } else {
                Bound::None
            }
        }
    };
    let value = match bound {
        Bound::AtLeast => lo,
        Bound::AtMost => hi,
        _ => 0.5 * (lo + hi),
    };
    // The fleets put the truth above Rmin and under Rmax; the grey region
    // lies between them and is only where the fleets disagreed.
    let (low, high) = match bound {
        Bound::Exact => (lo.min(rmin), hi.max(rmax)),
        _ => (lo, hi),
    };
    Ok(s.report(name, value, bound, low, high, stop))
}
