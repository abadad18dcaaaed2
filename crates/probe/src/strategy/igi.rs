//! IGI/PTR's search (Hu and Steenkiste, JSAC 2003; IGI/PTR 2.1; \[HOST\]
//! section 4): trains of equal gaps, the gap growing until the trains
//! come out as they went in (the turning point); IGI's and PTR's
//! estimates there (`tightlink_core::decision::igi`).
//!
//! As IGI/PTR 2.1: `trains` trains per send gap (3) of `packets` packets
//! (60); the first at the sender's top rate, back to back, give the
//! capacity (the median of the trains' most common receive gaps) unless
//! the caller knows it; the send gap then starts at half their mean
//! receive gap and grows by a quarter of it per step, jumping to halfway
//! to the receive gap when that is 1.5 times the send gap or more. The
//! turning point is the first of two steps in a row whose summed receive
//! gaps are not above the summed send gaps (by the tolerance); its IGI
//! (capacity minus the median of the trains' cross traffic) and PTR (the
//! rate the trains came out at) are the answers; the range is the
//! trains' lowest and highest, PTR's up to the send rate of the
//! stretched step before the turning point (PTR reads a step's own
//! rate, so it resolves the point only to a step). Ours: the packet
//! size is the channel's (IGI/PTR sends 500 bytes); a search that runs out of budget answers
//! from its last step with stop `budget`; a receiver that stamps the
//! back-to-back trains in batches (interrupt coalescence) ends the search
//! with no answer, as every gap IGI would read is a batch's.

use super::session::{Method as Strategy, Report, Session, Stop, StrategyError};
use tightlink_core::channel::StreamRequest;
use tightlink_core::decision::igi::{bottleneck_bps, igi_train, IgiTrain};
use tightlink_core::schedule::single_rate_schedule;
use tightlink_core::{stats, AnalysisParams, Bound};

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IgiSearchParams {
    pub packets: usize,
    pub trains: usize,
    pub size_bytes: u32,
    /// Answer PTR (else IGI).
    pub ptr: bool,
}

impl Default for IgiSearchParams {
    fn default() -> Self {
        IgiSearchParams {
            packets: 60,
            trains: 3,
            size_bytes: 9000,
            ptr: false,
        }
    }
}

/// One send gap's trains, summed as IGI/PTR sums them.
struct Step {
    src_sum_ns: f64,
    dst_sum_ns: f64,
    igi: Vec<f64>,
    ptr: Vec<f64>,
    /// The rate the trains were sent at, bit/s.
    send_bps: f64,
}

/// The gap search with its default parameters, answering IGI or (for
/// `ptr`) PTR.
pub(super) fn run_default(
    s: &mut Session,
    method: Strategy,
    analysis: &AnalysisParams,
    size: Option<u32>,
) -> Result<(Report, u32), StrategyError> {
    let mut p = IgiSearchParams {
        ptr: method == Strategy::Ptr,
        ..Default::default()
    };
    p.size_bytes = size.unwrap_or(p.size_bytes);
    Ok((run(s, p, analysis)?, p.size_bytes))
}

impl Step {
    fn answer(&self, ptr: bool) -> (f64, f64, f64) {
        let v = if ptr { &self.ptr } else { &self.igi };
        let s = stats::sorted(v);
        let mid = stats::median(&s).unwrap_or(f64::NAN);
        (mid, s[0], s[s.len() - 1])
    }
}

pub fn run(
    s: &mut Session,
    params: IgiSearchParams,
    analysis: &AnalysisParams,
) -> Result<Report, StrategyError> {
    let method = if params.ptr {
        Strategy::Ptr
    } else {
        Strategy::Igi
    };
    let max = s.max_rate_bps();
    let bits = 8.0 * params.size_bytes as f64;
    let tol = analysis.igi.turning_tolerance;
    // Sends one step's trains at `gap_ns`; `None` when the budget is out.
    let step = |s: &mut Session, gap_ns: f64| {
        let rate = bits * 1e9 / gap_ns;
        let sched = single_rate_schedule(rate, params.packets, params.size_bytes, 0);
        let request = StreamRequest::from_send_times(&sched, params.size_bytes);
        let mut trains = Vec::new();
        for _ in 0..params.trains {
            if !s.fits(request.bytes()) {
                return Ok(None);
            }
            trains.push(s.send(&request)?);
        }
        Ok::<_, StrategyError>(Some(trains))
    };

    // Back to back at the top rate: the capacity.
    let Some(first) = step(s, bits * 1e9 / max)? else {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::Budget));
    };
    // A receiver that stamps in batches replaces the gaps IGI reads.
    // (A train that fits in one batch counts: at 100 Gbit/s the 60
    // packets back to back arrive in one, and their zero gaps read as a
    // capacity of terabits.)
    if first.iter().any(|t| t.receive_batch_count().is_some()) {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream));
    }
    let capacity = analysis.capacity_bps.or_else(|| {
        let c: Vec<f64> = first
            .iter()
            .filter_map(|t| bottleneck_bps(t, &analysis.igi))
            .collect();
        stats::median(&c)
    });
    let Some(capacity) = capacity else {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableAdrTrain));
    };
    let read = |trains: &[tightlink_core::ProbeStream]| -> Option<Step> {
        let t: Vec<IgiTrain> = trains
            .iter()
            .filter_map(|x| igi_train(x, Some(capacity), &analysis.igi))
            .collect();
        (!t.is_empty()).then(|| Step {
            src_sum_ns: t.iter().map(|x| x.src_gap_ns).sum(),
            dst_sum_ns: t.iter().map(|x| x.dst_gap_ns).sum(),
            igi: t.iter().map(|x| x.igi_bps).collect(),
            ptr: t.iter().map(|x| x.ptr_bps).collect(),
            send_bps: bits * 1e9 * t.len() as f64 / t.iter().map(|x| x.src_gap_ns).sum::<f64>(),
        })
    };
    let Some(first) = read(&first) else {
        return Ok(s.report(method, 0.0, Bound::None, 0.0, 0.0, Stop::NoUsableStream));
    };
    let first_dst_ns = first.dst_sum_ns / params.trains as f64;
    let interval_ns = first_dst_ns / 4.0;
    let mut gap_ns = first_dst_ns / 2.0;
    let mut last = first;
    // The first step of two in a row at the turning point, and whether
    // it was the back-to-back one (then the path took the top rate: the
    // answer is "at least").
    let mut candidate: Option<(Step, bool, f64)> = None;
    let mut last_is_back_to_back = true;
    // The send rate of the step before `last`: a step that came out
    // stretched unless `last` is the first.
    let mut before_last_bps = f64::NAN;
    loop {
        let equal = last.dst_sum_ns <= last.src_sum_ns * (1.0 + tol);
        if equal {
            if let Some((c, at_top, stretched_bps)) = candidate.take() {
                let (a, lo, mut hi) = c.answer(params.ptr);
                // PTR reads the turning step's own rate, so it resolves
                // the turning point only to a step (a quarter of the
                // capacity's gap: 10, 8, 6.7, 5.7 Gbit/s on a 10 Gbit/s
                // link): the point lies between that rate and the
                // stretched step's before it.
                if params.ptr && stretched_bps > hi {
                    hi = stretched_bps;
                }
                let bound = if at_top { Bound::AtLeast } else { Bound::Exact };
                return Ok(s.report(method, a, bound, lo, hi, Stop::Converged));
            }
        }
        if !last_is_back_to_back && last.dst_sum_ns >= 1.5 * last.src_sum_ns {
            let per_train = (last.src_sum_ns + last.dst_sum_ns) / (2.0 * params.trains as f64);
            gap_ns = gap_ns.max(per_train);
        }
        gap_ns += interval_ns;
        let Some(trains) = step(s, gap_ns)? else {
            break;
        };
        let Some(next) = read(&trains) else {
            continue;
        };
        let last_send_bps = last.send_bps;
        candidate = equal.then_some((last, last_is_back_to_back, before_last_bps));
        last_is_back_to_back = false;
        before_last_bps = last_send_bps;
        last = next;
    }
    let (a, lo, hi) = last.answer(params.ptr);
    Ok(s.report(method, a, Bound::Exact, lo, hi, Stop::Budget))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Budget;
    use tightlink_core::channel::{Channel, ChannelError, ChannelInfo, Probed};
    use tightlink_core::ProbeStream;

    /// A fluid link of capacity `c` carrying `x` of cross traffic: a
    /// train sent at `r` above `c - x` comes out at `r c / (r + x)`, below
    /// it as sent.
    struct FluidLink {
        c: f64,
        x: f64,
        now_ns: i64,
    }

    impl Channel for FluidLink {
        fn probe(&mut self, req: &StreamRequest) -> Result<Probed, ChannelError> {
            let n = req.offsets_ns.len();
            let size = req.sizes[0];
            let gap_ns = (req.offsets_ns[n - 1] - req.offsets_ns[0]) as f64 / (n - 1) as f64;
            let r = 8.0 * size as f64 * 1e9 / gap_ns;
            let out = if r <= self.c - self.x {
                r
            } else {
                r * self.c / (r + self.x)
            };
            let send: Vec<i64> = req.offsets_ns.iter().map(|o| self.now_ns + o).collect();
            let recv: Vec<Option<i64>> = (0..n)
                .map(|i| {
                    Some(send[0] + 1_000_000 + (i as f64 * 8.0 * size as f64 * 1e9 / out) as i64)
                })
                .collect();
            self.now_ns += 10_000_000;
            Ok(Probed::on_time(
                ProbeStream::from_times(0, size, &send, &recv),
                None,
            ))
        }
        fn info(&self) -> ChannelInfo {
            ChannelInfo::without_limits("fluid link", self.c)
        }
        fn elapsed_ns(&self) -> i64 {
            self.now_ns
        }
    }

    /// C = 10 Gbit/s, 3 of cross traffic: 7 free. 9000-byte packets: the
    /// back-to-back trains (gap 7200 ns) come out at 100 / 13 = 7.692
    /// Gbit/s, gap 9360 ns; the send gap starts at 4680 and grows by
    /// 2340: 7020 ns (10.26 Gbit/s, out at 7.738: stretched), 9360 (7.692,
    /// out at 7.194, gap 10 008 > 9360 x 1.05: stretched), 11 700 (6.154:
    /// as sent), 14 040 (5.128: as sent). The turning point is the 11 700
    /// ns step: PTR 6.154 Gbit/s, which only says the point lies between
    /// 6.154 and the stretched step's 7.692; the range says so. IGI (no
    /// gap grew) answers the capacity.
    #[test]
    fn ptr_range_spans_the_step_it_cannot_resolve() {
        let analysis = AnalysisParams {
            capacity_bps: Some(10e9),
            ..AnalysisParams::default()
        };
        for ptr in [true, false] {
            let mut link = FluidLink {
                c: 10e9,
                x: 3e9,
                now_ns: 0,
            };
            let params = IgiSearchParams {
                ptr,
                ..IgiSearchParams::default()
            };
            let mut progress = |_: f64| {};
            let mut s = Session::start(&mut link, Budget::default(), &mut progress).unwrap();
            let r = run(&mut s, params, &analysis).unwrap();
            assert_eq!((r.bound, r.stop), (Bound::Exact, Stop::Converged), "{r:?}");
            // Five steps of three trains.
            assert_eq!(r.cost.streams, 15, "{r:?}");
            if ptr {
                let rel = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-3;
                assert!(
                    rel(r.available_bandwidth_bps, 8.0 * 9000.0 / 11_700e-9),
                    "{r:?}"
                );
                assert!(rel(r.low_bps, 6.154e9) && rel(r.high_bps, 7.692e9), "{r:?}");
            } else {
                assert_eq!((r.available_bandwidth_bps, r.high_bps), (10e9, 10e9));
            }
        }
    }
}
