//! Decisions and estimates: is a probing rate above the available bandwidth
//! (PRC-MT, Pathload's trend test), and what is the available bandwidth
//! (multi-rate estimates, TOPP, pathChirp, IGI/PTR, Spruce) and how it
//! moves from stream to stream (BART-style tracking).

pub mod bart;
pub mod bisection;
pub mod burst;
pub mod busy;
pub mod chirp;
pub mod igi;
pub mod multirate;
pub mod prcmt;
pub mod queue_fit;
pub mod spruce;
pub mod standing;
pub mod topp;
pub mod trend;

/// Whether a single-rate stream's rate exceeds the available bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Decision {
    Above,
    Below,
    Ambiguous,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Above => "above",
            Decision::Below => "below",
            Decision::Ambiguous => "ambiguous",
        }
    }
}

/// How an answer bounds the available bandwidth.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Bound {
    /// The estimate lies within the probed rates.
    Exact,
    /// The available bandwidth is at least the given rate (above all rates
    /// probed; for a single-rate stream: its rate was below it).
    AtLeast,
    /// The available bandwidth is at most the given rate.
    AtMost,
    /// The stream cannot say.
    None,
}

impl Bound {
    pub fn as_str(self) -> &'static str {
        match self {
            Bound::Exact => "exact",
            Bound::AtLeast => "at_least",
            Bound::AtMost => "at_most",
            Bound::None => "none",
        }
    }
}
