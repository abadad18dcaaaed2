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
//!
//! Where a queue stood under nearly every stream at or under the answer
//! (`decision::standing`: cross traffic that fills the buffer whatever
//! the probes' rate), the fleets' "no trend" says nothing of the
//! available bandwidth: the answer is none, with what the streams met.

use super::prcmt_search::measure_adr;
use super::session::Method as Strategy;
use super::session::{single_rate_request, Report, Session, Stop, StrategyError};
use tightlink_core::decision::standing::{
    delay_level, depth_threshold_ns, empty_path_ns, standing_queue, DelayLevel, StandingQueue,
};
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

/// The next fleet's rate, Pathload's way: halfway across the part of
/// `rmin..rmax` still unknown, above the grey region first; `None` once
/// every part is within `res`.
fn next_rate(grey: Option<(f64, f64)>, rmin: f64, rmax: f64, res: f64) -> Option<f64> {
    match grey {
        None => (rmax - rmin > res).then_some(0.5 * (rmin + rmax)),
        Some((_, gmax)) if rmax - gmax > res => Some(0.5 * (gmax + rmax)),
        Some((gmin, _)) if gmin - rmin > res => Some(0.5 * (rmin + gmin)),
        Some(_) => None,
    }
}

pub fn run(
    s: &mut Session,
    p: PathloadSearchParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    let name = Strategy::of_per_stream(p.method).unwrap_or(Strategy::Pathload);
    let Some(train) = measure_adr(s, p.size_bytes, 100, 0, analysis)? else {
        return Ok(s.report(name, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableAdrTrain));
    };
    let adr = train.bps;
    // The ADR trains went first, before any fleet filled a queue: with
    // the fleets' streams they show the empty path's delay.
    let adr_floor_ns = empty_path_ns(s.streams().iter().filter_map(delay_level));
    let mut levels = Vec::new();
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
            levels.extend(delay_level(&st).map(|l| (rate, l)));
            match analyze(&st, StreamKind::SingleRate, p.method, analysis).decision {
                Some(Decision::Above) => inc += 1,
                Some(Decision::Below) => no += 1,
                _ => {}
            }
        }
        match Fleet::of(inc, no, &p) {
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
        let Some(next) = next_rate(grey, rmin, rmax, res) else {
            break;
        };
        rate = next;
    }
    let (lo, hi) = grey.unwrap_or((rmin, rmax));
    let bound = match (seen_inc, seen_no) {
        (true, true) => Bound::Exact,
        (false, true) => Bound::AtLeast,
        (true, false) => Bound::AtMost,
        (false, false) if grey.is_some() => Bound::Exact,
        (false, false) => Bound::None,
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
    let depth_ns = depth_threshold_ns(p.size_bytes, adr, train.batch_interval_ns);
    if let Some(standing) = standing_under(&levels, adr_floor_ns, value, depth_ns) {
        let mut r = s.report(name, value, Bound::None, low, high, stop);
        r.standing_queue = Some(standing);
        return Ok(r);
    }
    Ok(s.report(name, value, bound, low, high, stop))
}

impl Fleet {
    /// The fleet's verdict from its streams' decisions (`inc` increasing,
    /// `no` not), Pathload's way.
    fn of(inc: usize, no: usize, p: &PathloadSearchParams) -> Fleet {
        if inc as f64 >= p.aggregate * p.fleet as f64 {
            Fleet::Increasing
        } else if no as f64 >= p.aggregate * p.fleet as f64 {
            Fleet::NoTrend
        } else {
            Fleet::Grey
        }
    }
}

/// The queue under the fleets' streams at or under the answer `value`
/// (`levels`: each stream's rate and delays; `adr_floor_ns`: the lowest
/// delay of the trains before them), where it stood under
/// nearly all of them: those are the streams that said there was room,
/// and those above the answer are meant to build a queue.
fn standing_under(
    levels: &[(f64, DelayLevel)],
    adr_floor_ns: Option<i64>,
    value: f64,
    depth_ns: f64,
) -> Option<StandingQueue> {
    let fleets = empty_path_ns(levels.iter().map(|&(_, l)| l));
    let empty_ns = adr_floor_ns.into_iter().chain(fleets).min()?;
    let under: Vec<DelayLevel> = levels
        .iter()
        .filter(|(rate, _)| *rate <= value)
        .map(|&(_, l)| l)
        .collect();
    Some(standing_queue(&under, empty_ns, depth_ns)).filter(StandingQueue::held_throughout)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Budget;

    /// Rmin 40, Rmax 100, resolution 5 (Mbit/s): halfway, 70; with a grey
    /// region 60-80 above it first (90), then under it (50), then done.
    #[test]
    fn the_next_rate_by_hand() {
        assert_eq!(next_rate(None, 40.0, 100.0, 5.0), Some(70.0));
        assert_eq!(next_rate(None, 40.0, 44.0, 5.0), None);
        assert_eq!(next_rate(Some((60.0, 80.0)), 40.0, 100.0, 5.0), Some(90.0));
        assert_eq!(next_rate(Some((60.0, 80.0)), 40.0, 84.0, 5.0), Some(50.0));
        assert_eq!(next_rate(Some((60.0, 80.0)), 56.0, 84.0, 5.0), None);
    }
    use tightlink_core::channel::{Channel, ChannelError, ChannelInfo, Probed, StreamRequest};
    use tightlink_core::ProbeStream;

    /// A 1 Gbit/s link with `free` of it available. Streams below `free`
    /// meet an empty queue (1 ms of path); above it, a queue that grows
    /// with the excess, as under constant-rate cross traffic. With
    /// `standing`, a flow that fills the buffer keeps 2-3 ms of queue
    /// under every stream whatever its rate, in a sawtooth with no trend,
    /// as a TCP flow with data to send does.
    struct Link {
        free_bps: f64,
        standing: bool,
        now_ns: i64,
    }

    impl Channel for Link {
        fn probe(&mut self, req: &StreamRequest) -> Result<Probed, ChannelError> {
            let n = req.offsets_ns.len();
            let size = req.sizes[0];
            let span_ns = (req.offsets_ns[n - 1] - req.offsets_ns[0]) as f64;
            let r = 8.0 * size as f64 * 1e9 * (n - 1) as f64 / span_ns.max(1.0);
            let send: Vec<i64> = req.offsets_ns.iter().map(|o| self.now_ns + o).collect();
            let service_ns = 8.0 * size as f64 * 1e9 / 1e9;
            let recv: Vec<Option<i64>> = (0..n)
                .map(|i| {
                    // In `standing`, the first stream (the train that
                    // sets the search's range) came before the flow
                    // filled the buffer.
                    let queue_ns = if self.standing && self.now_ns > 0 {
                        2e6 + 1e6 * ((i % 25) as f64 / 25.0)
                    } else if r > self.free_bps {
                        // The excess stays behind: each packet waits for
                        // what came before it beyond the free rate.
                        i as f64 * service_ns * (1.0 - self.free_bps / r)
                    } else {
                        0.0
                    };
                    Some(send[i] + 1_000_000 + queue_ns as i64)
                })
                .collect();
            self.now_ns += span_ns as i64 + 20_000_000;
            Ok(Probed::on_time(
                ProbeStream::from_times(0, size, &send, &recv),
                None,
            ))
        }
        fn info(&self) -> ChannelInfo {
            ChannelInfo::without_limits("a link", 1e9)
        }
        fn elapsed_ns(&self) -> i64 {
            self.now_ns
        }
    }

    fn search(standing: bool) -> Report {
        let mut link = Link {
            free_bps: 400e6,
            standing,
            now_ns: 0,
        };
        let mut progress = |_: f64| {};
        let mut s = Session::start(&mut link, Budget::default(), &mut progress).unwrap();
        run(
            &mut s,
            PathloadSearchParams::default(),
            &AnalysisParams::default(),
        )
        .unwrap()
    }

    /// 400 of 1000 Mbit/s free and no standing queue: the search brackets
    /// 400 to its 2 % resolution of the 1 Gbit/s train rate.
    #[test]
    fn a_free_path_is_bracketed() {
        let r = search(false);
        assert_eq!(r.bound, Bound::Exact, "{r:?}");
        assert!((r.available_bandwidth_bps - 400e6).abs() < 20e6, "{r:?}");
        assert!(r.low_bps <= 400e6 && r.high_bps >= 400e6, "{r:?}");
        assert_eq!(r.standing_queue, None);
    }

    /// The same path under a queue that stood under every stream: the
    /// trend tests saw no trend at any rate, and the search would have
    /// answered the train's rate; it answers none and says why.
    #[test]
    fn a_queue_that_stood_under_every_stream_gives_no_answer() {
        let r = search(true);
        assert_eq!(r.bound, Bound::None, "{r:?}");
        let q = r.standing_queue.expect("the queue stood");
        assert_eq!(q.stood, q.streams, "{q:?}");
        assert!(q.streams >= 12, "{q:?}");
        // Medians of 2-3 ms of queue: 2.48 ms.
        assert!((q.median_depth_ns - 2.48e6).abs() < 0.05e6, "{q:?}");
    }
}
