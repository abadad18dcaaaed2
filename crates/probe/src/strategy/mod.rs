//! Closed-loop probing strategies over any [`Channel`]: each sends probe
//! streams, decides from what came back what to send next, and stops when
//! its estimate is stable or its budget runs out.
//!
//! - [`multirate`]: repeated multi-rate streams with multi-pass smoothing,
//!   re-centred on the last estimate (\[BASS\], VI).
//! - [`prcmt_search`]: PRC-MT's stream-length choice from the asymptotic
//!   dispersion rate, then a binary search with PRC-MT + BASS (BASS IV-B, V).
//! - [`scan_pba`]: the multi-rate wide scan as the prior of a
//!   probabilistic bisection over PRC-MT + BASS decisions; and `auto`
//!   (the default), which after the scan goes on as that bisection under
//!   receive batches and as [`multirate`] where each packet is stamped.
//! - [`pathload_search`]: Pathload's fleets, trend test and grey region
//!   (\[IMR\], section 3), with Pathload's or IMR's trend test.
//! - [`chirp`]: pathChirp's chirps, averaged (\[HOST\], section 4).
//! - [`bart`]: multi-rate streams taken into BART's Kalman filter.
//! - [`igi`]: IGI/PTR's trains of growing gaps up to the turning point.
//! - [`spruce`]: Spruce's Poisson-spaced packet pairs at the capacity.
//!
//! Every one of them ends with [`shaper_train`]'s back-to-back trains,
//! which see a token bucket larger than the method's streams.

pub mod bart;
pub mod chirp;
pub mod igi;
pub mod multirate;
pub mod pathload_search;
pub mod prcmt_search;
pub mod scan_pba;
mod session;
pub mod shaper_train;
pub mod spruce;

pub use session::*;

use std::fmt;
use std::str::FromStr;
use tightlink_core::channel::Channel;

use tightlink_core::{AnalysisParams, Method as CoreMethod};

/// Runs a strategy's own streams with its default parameters, probes of
/// `size` bytes where the channel has one (else the strategy's own), up
/// to its answer; returns the answer and the probe size it sent.
type RunStreams =
    fn(&mut Session, Method, &AnalysisParams, Option<u32>) -> Result<(Report, u32), StrategyError>;

/// One strategy in the [`REGISTRY`].
#[derive(Debug, Clone, Copy)]
pub struct Registered {
    pub method: Method,
    /// Its name on the command line, in JSON, the agent's config and
    /// Python.
    pub name: &'static str,
    /// The per-stream method that decides its streams.
    pub per_stream: CoreMethod,
    /// Whether it reads a known tight-link capacity
    /// (`AnalysisParams::capacity_bps`).
    pub uses_capacity: bool,
    run_streams: RunStreams,
}

impl Registered {
    const fn new(
        method: Method,
        name: &'static str,
        per_stream: CoreMethod,
        uses_capacity: bool,
        run_streams: RunStreams,
    ) -> Self {
        Registered {
            method,
            name,
            per_stream,
            uses_capacity,
            run_streams,
        }
    }
}

/// Every strategy, in the order of [`Method`]'s variants: adding one is a
/// variant, a line here and its module.
pub const REGISTRY: [Registered; 18] = {
    use CoreMethod as C;
    use Method as M;
    [
        Registered::new(
            M::Multirate,
            "multirate",
            C::Multirate,
            false,
            multirate::run_default,
        ),
        Registered::new(
            M::MultirateSinglePass,
            "multirate-single-pass",
            C::MultirateSinglePass,
            false,
            multirate::run_default,
        ),
        Registered::new(
            M::MultiratePrcmtDp1,
            "multirate-prcmt-dp1",
            C::MultiratePrcmtDp1,
            false,
            multirate::run_default,
        ),
        Registered::new(
            M::MultiratePrcmtDp2,
            "multirate-prcmt-dp2",
            C::MultiratePrcmtDp2,
            false,
            multirate::run_default,
        ),
        Registered::new(
            M::Prcmt,
            "prcmt",
            C::PrcmtBass,
            false,
            prcmt_search::run_default,
        ),
        Registered::new(
            M::PrcmtPba,
            "prcmt-pba",
            C::PrcmtBass,
            false,
            prcmt_search::run_default,
        ),
        Registered::new(
            M::ScanPba,
            "scan-pba",
            C::PrcmtBass,
            false,
            scan_pba::run_default,
        ),
        // Its scan is multi-rate; what follows depends on the receiver.
        Registered::new(M::Auto, "auto", C::Multirate, false, scan_pba::run_default),
        Registered::new(
            M::Pathload,
            "pathload",
            C::Pathload,
            false,
            pathload_search::run_default,
        ),
        Registered::new(
            M::ImrAvg,
            "imr-avg",
            C::ImrAvg,
            false,
            pathload_search::run_default,
        ),
        Registered::new(
            M::ImrWavelet,
            "imr-wavelet",
            C::ImrWavelet,
            false,
            pathload_search::run_default,
        ),
        Registered::new(M::Topp, "topp", C::Topp, false, multirate::run_default),
        Registered::new(
            M::QueueFit,
            "queue-fit",
            C::QueueFit,
            true,
            multirate::run_default,
        ),
        Registered::new(
            M::Pathchirp,
            "pathchirp",
            C::Pathchirp,
            false,
            chirp::run_default,
        ),
        Registered::new(M::Bart, "bart", C::Bart, false, bart::run_default),
        Registered::new(M::Igi, "igi", C::Igi, true, igi::run_default),
        Registered::new(M::Ptr, "ptr", C::Igi, true, igi::run_default),
        Registered::new(M::Spruce, "spruce", C::Spruce, true, spruce::run_default),
    ]
};

// The registry is indexed by the variant.
const _: () = {
    let mut i = 0;
    while i < REGISTRY.len() {
        assert!(REGISTRY[i].method as usize == i);
        i += 1;
    }
};

impl Method {
    pub const ALL: [Method; 18] = {
        let mut all = [Method::Auto; 18];
        let mut i = 0;
        while i < REGISTRY.len() {
            all[i] = REGISTRY[i].method;
            i += 1;
        }
        all
    };

    /// Its entry in the [`REGISTRY`].
    pub fn registered(self) -> &'static Registered {
        &REGISTRY[self as usize]
    }

    /// Whether the method reads a known tight-link capacity
    /// (`AnalysisParams::capacity_bps`): the queue fit needs it, IGI/PTR
    /// and Spruce take it instead of measuring one; the others never
    /// look at it.
    pub fn uses_capacity(self) -> bool {
        self.registered().uses_capacity
    }

    /// The names of the strategies that use a known capacity, for
    /// messages ("queue-fit, igi, ptr and spruce").
    pub fn capacity_users() -> String {
        let names: Vec<&str> = REGISTRY
            .iter()
            .filter(|r| r.uses_capacity)
            .map(|r| r.name)
            .collect();
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    pub fn name(self) -> &'static str {
        self.registered().name
    }

    /// The per-stream method that decides each of this strategy's streams.
    pub fn per_stream(self) -> CoreMethod {
        self.registered().per_stream
    }

    /// The strategy whose streams `m` decides (`prcmt` without BASS has
    /// none: the search always smooths).
    pub fn of_per_stream(m: CoreMethod) -> Option<Method> {
        Method::ALL.into_iter().find(|s| s.per_stream() == m)
    }

    /// The names, for error messages: `a, b, ... or z`.
    pub fn names() -> String {
        let n: Vec<&str> = Method::ALL.iter().map(|m| m.name()).collect();
        format!("{} or {}", n[..n.len() - 1].join(", "), n[n.len() - 1])
    }

    /// Runs this method with its default parameters, probes of the
    /// channel's own size where it has one (a real path's MTU), and
    /// ends with the shaper trains ([`shaper_train::after_shaper_train`]).
    pub fn run(
        self,
        channel: &mut dyn Channel,
        analysis: &AnalysisParams,
        budget: Budget,
        progress: Progress,
    ) -> Result<Report, StrategyError> {
        if self == Method::QueueFit && analysis.capacity_bps.is_none() {
            return Err(StrategyError::NeedsCapacity(self.name()));
        }
        let size = channel.info().probe_size_bytes;
        let mut s = Session::start(channel, budget, progress)?;
        // The method's streams leave room for the shaper trains (a probe
        // more for rounding: the simulator's are 9000 bytes).
        let probe_bytes = size.unwrap_or(9000);
        let held_back =
            shaper_train::bytes_held_back(s.max_rate_bps(), probe_bytes, budget.max_bytes);
        s.budget.max_bytes = budget.max_bytes.saturating_sub(held_back);
        s.budget.max_streams = budget.max_streams.saturating_sub(2);
        let (report, size_bytes) = (self.registered().run_streams)(&mut s, self, analysis, size)?;
        s.budget = budget;
        // A strategy that checked during its streams (see
        // `shaper_train::early_shaper_check`) has its answer already.
        if report.stop == Stop::Shaped
            || shaper_train::ruled_out_for(&s, report.available_bandwidth_bps)
        {
            return Ok(report);
        }
        shaper_train::after_shaper_train(&mut s, report, size_bytes)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name no method answers to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}: choose {names}", names = Method::names())]
pub struct UnknownMethod(pub String);

impl FromStr for Method {
    type Err = UnknownMethod;
    /// The names of [`Method::name`]; `prcmt+bass` is another name of
    /// `prcmt` (the search always smooths with BASS).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "prcmt+bass" {
            return Ok(Method::Prcmt);
        }
        Method::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMethod(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::Resends;

    /// By hand: a stream goes again twice at most; in all, two plus half
    /// the streams kept; not after three of three, or four of five,
    /// resends came back late again (three of four still may).
    #[test]
    fn when_a_late_stream_goes_again() {
        let r = |attempt, resent, late_again, kept| {
            Resends {
                attempt,
                resent,
                late_again,
                kept,
            }
            .allowed()
        };
        assert!(r(0, 0, 0, 0));
        assert!(r(1, 1, 1, 0));
        assert!(!r(2, 2, 0, 10));
        assert!(!r(0, 2, 0, 1));
        assert!(r(0, 2, 0, 2));
        assert!(!r(0, 3, 3, 10));
        assert!(r(0, 4, 3, 10));
        assert!(!r(0, 5, 4, 10));
        assert!(r(0, 8, 6, 20));
        assert!(!r(0, 8, 7, 20));
    }
}
