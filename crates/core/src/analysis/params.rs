//! Every tunable of every analysis method, with the documented defaults.

use super::base::*;

/// Every tunable of every method, with the documented defaults.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AnalysisParams {
    pub bass: BassParams,
    pub prcmt_tolerance: f64,
    pub pathload: PathloadParams,
    pub imr_window: ImrWindow,
    pub wavelet_levels: usize,
    /// Window, pass limit and exceed tolerance of multi-rate smoothing.
    pub multipass: MultipassParams,
    /// What "consistently exceed" means for `multirate*` estimates.
    pub consistency: Consistency,
    pub gap_tolerance: GapTolerance,
    /// Gap methods give up above this loss share.
    pub max_loss: f64,
    /// When a lossy multi-rate stream reads "at most" its lowest rate.
    pub multirate_loss: MultirateLoss,
    /// pathChirp's excursion and receive-batch rules.
    pub chirp: ChirpParams,
    /// BART's noise figures.
    pub bart: BartParams,
    /// IGI's slacks.
    pub igi: IgiParams,
    /// The tight link's capacity when known: `queue-fit` needs it, IGI
    /// and Spruce use it over their own reading, `multirate` meets the
    /// queue fit halfway with it.
    pub capacity_bps: Option<f64>,
}

/// Losses in a multi-rate stream: above `at_most_above`, or, while the
/// gaps read "not congested" (at least) or nothing and the loss grows with
/// the rate (the upper half of the sub-streams lost more than twice the
/// lower half's share and 2 points more), above
/// `at_most_unless_congested_above` in the whole stream or in one
/// sub-stream, a queue overflowed, and the answer is "at most" the rate of
/// the slowest sub-stream that lost more than that share and more than
/// twice the share of the slower ones plus 2 points (where the overflow
/// began; the lowest rate when none did: the path carried less than it),
/// or lower where the survivors' delays show the queue growing for good;
/// when the sub-stream before that one was quiet, the answer is exact,
/// between the two rates. Answering the lowest rate for every such stream
/// was wrong at 100 Gbit/s, where the queue overflowed only in the top
/// sub-streams. Seen on real tbf
/// bottlenecks with small queues: gaps that span losses look uncongested
/// (send and receive gaps both cover the lost packets), and a lossy
/// stream was read as "at least" its top rate. A queue that overflows
/// drops more of the faster sub-streams (1 - C/R of each); loss spread
/// evenly over every rate is the path losing packets at random, which
/// says nothing of the available bandwidth (read as "at most" it sank
/// estimates on a path with 5 % random loss to 4 % of the truth).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MultirateLoss {
    pub at_most_above: f64,
    pub at_most_unless_congested_above: f64,
}

impl Default for MultirateLoss {
    fn default() -> Self {
        MultirateLoss {
            at_most_above: 0.2,
            at_most_unless_congested_above: 0.05,
        }
    }
}

impl Default for AnalysisParams {
    fn default() -> Self {
        AnalysisParams {
            bass: BassParams::default(),
            prcmt_tolerance: DEFAULT_TOLERANCE,
            pathload: PathloadParams::default(),
            imr_window: ImrWindow::default(),
            wavelet_levels: 3,
            multipass: MultipassParams::default(),
            consistency: Consistency::default(),
            gap_tolerance: GapTolerance::default(),
            max_loss: 0.5,
            multirate_loss: MultirateLoss::default(),
            chirp: ChirpParams::default(),
            bart: BartParams::default(),
            igi: IgiParams::default(),
            capacity_bps: None,
        }
    }
}

impl AnalysisParams {
    /// The multi-pass smoothing parameters with this analysis's BASS
    /// thresholds.
    pub fn multipass_smoothing(&self) -> MultipassParams {
        MultipassParams {
            bass: self.bass,
            ..self.multipass
        }
    }
}
