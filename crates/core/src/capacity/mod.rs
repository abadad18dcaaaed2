//! Narrow-link capacity from packet dispersion (\[TCPW\], section
//! 2.1: Pathrate and CapProbe; \[HOST\], section 4.2: packet pairs and
//! trains).
//!
//! A *pair stream* holds pairs of packets sent back to back (packets `2i`
//! and `2i+1`), the pairs spread apart so that each crosses the path on its
//! own. A pair leaves the narrow link `size / C` apart unless cross traffic
//! got between its packets (longer: an under-estimate) or queued the first
//! packet after the narrow link (shorter: an over-estimate). A *train
//! stream* is one back-to-back train; its dispersion rate is the asymptotic
//! dispersion rate (ADR), at most the capacity.
//!
//! - [`pairs`]: pair samples from a stream, with what was rejected and why
//!   (lost, batched by the receiver, sender too slow), and the check that
//!   dispersion grows with packet size.
//! - [`pathrate`](mod@pathrate): Pathrate's histogram modes, rejected below the ADR.
//! - [`capprobe`](mod@capprobe): CapProbe's minimum delay sum and its convergence test.
//! - [`shaper`]: token-bucket shapers, which pairs cannot see, from the
//!   head and tail of trains.
//! - [`vps`]: per-hop capacity by variable packet size (pathchar; host
//!   paper section 4.1), with probes behind a head for shaped hops.

pub mod capprobe;
pub mod pairs;
pub mod pathrate;
pub mod shaper;
pub mod vps;

pub use capprobe::{capprobe, capprobe_by_size, CapProbeEstimate, CapProbeParams};
pub use pairs::{
    pair_samples, pair_samples_at, size_scaling, train_dispersion_bps, PairSample, Pairs,
    SizeScaling,
};
pub use pathrate::{pathrate, Mode, PathrateEstimate, PathrateParams};
pub use shaper::{shaper_from_trains, shaper_undecided, train_shape, Shaper, TrainShape};
pub use vps::{estimate_links, fit_hop, HopFit, LinkCapacity, LinkEstimate, VpsParams, VpsSample};
