//! The analysis methods and their registry: each method's name on the
//! command line, the kind of stream it reads, and the function that reads
//! it. The faces list methods from [`REGISTRY`]; adding one is a variant
//! here, a line in the registry and the module that reads its streams.

use super::base::*;
use super::params::AnalysisParams;
use super::{chirp::*, multi_rate::*, pairs::*, queue_fit::*, single_rate::*, steps::*};

/// How a method reads a stream that passed the common checks (its kind,
/// its length, a probing rate): the analyzer's memory, the stream, the
/// method, the parameters, the analysis so far, and `bart`'s tracker.
pub(super) type Read = fn(
    &mut Analyzer,
    &ProbeStream,
    Method,
    &AnalysisParams,
    Analysis,
    &mut BartTracker,
) -> Analysis;

/// One method in the [`REGISTRY`].
#[derive(Debug, Clone, Copy)]
pub struct Registered {
    pub method: Method,
    /// Its name on the command line, in JSON and in traces.
    pub name: &'static str,
    /// The kind of stream it answers for.
    pub kind: StreamKind,
    /// Whether it reads a known capacity (`AnalysisParams::capacity_bps`)
    /// where one is given; the others never look at it.
    pub reads_capacity: bool,
    read: Read,
}

impl Registered {
    const fn new(method: Method, name: &'static str, kind: StreamKind, read: Read) -> Self {
        Registered {
            method,
            name,
            kind,
            reads_capacity: false,
            read,
        }
    }

    /// The same, reading a known capacity where one is given.
    const fn reading_capacity(self) -> Self {
        Registered {
            reads_capacity: true,
            ..self
        }
    }

    /// Reads `stream` (the common checks passed).
    pub(super) fn read(
        &self,
        room: &mut Analyzer,
        stream: &ProbeStream,
        params: &AnalysisParams,
        base: Analysis,
        tracker: &mut BartTracker,
    ) -> Analysis {
        (self.read)(room, stream, self.method, params, base, tracker)
    }
}

use StreamKind::{Chirp, MultiRate, Pairs, SingleRate};

/// Every method, in the order of [`Method`]'s variants. Single-rate
/// readers of the gaps or the delays' trend, and multi-rate readers of
/// the crossing, take steps of queue out first (the `steps` module).
pub const REGISTRY: [Registered; 15] = [
    Registered::new(Method::Prcmt, "prcmt", SingleRate, unstepped_single_rate),
    Registered::new(
        Method::PrcmtBass,
        "prcmt+bass",
        SingleRate,
        unstepped_single_rate,
    ),
    Registered::new(
        Method::Pathload,
        "pathload",
        SingleRate,
        unstepped_single_rate,
    ),
    Registered::new(Method::ImrAvg, "imr-avg", SingleRate, unstepped_single_rate),
    Registered::new(
        Method::ImrWavelet,
        "imr-wavelet",
        SingleRate,
        unstepped_single_rate,
    ),
    Registered::new(
        Method::Multirate,
        "multirate",
        MultiRate,
        unstepped_crossing,
    )
    .reading_capacity(),
    Registered::new(
        Method::MultirateSinglePass,
        "multirate-single-pass",
        MultiRate,
        unstepped_crossing,
    ),
    Registered::new(
        Method::MultiratePrcmtDp1,
        "multirate-prcmt-dp1",
        MultiRate,
        unstepped_crossing,
    ),
    Registered::new(
        Method::MultiratePrcmtDp2,
        "multirate-prcmt-dp2",
        MultiRate,
        unstepped_crossing,
    ),
    Registered::new(Method::Topp, "topp", MultiRate, read_multi_rate),
    Registered::new(Method::Pathchirp, "pathchirp", Chirp, read_chirp),
    Registered::new(Method::Bart, "bart", MultiRate, read_multi_rate),
    Registered::new(Method::Igi, "igi", SingleRate, read_single_rate).reading_capacity(),
    Registered::new(Method::Spruce, "spruce", Pairs, read_pairs).reading_capacity(),
    Registered::new(Method::QueueFit, "queue-fit", MultiRate, read_queue_fit).reading_capacity(),
];

// The registry is indexed by the variant.
const _: () = {
    let mut i = 0;
    while i < REGISTRY.len() {
        assert!(REGISTRY[i].method as usize == i);
        i += 1;
    }
};

impl Method {
    pub const ALL: [Method; 15] = {
        let mut all = [Method::Prcmt; 15];
        let mut i = 0;
        while i < REGISTRY.len() {
            all[i] = REGISTRY[i].method;
            i += 1;
        }
        all
    };

    /// The methods that answer for single-rate streams.
    pub const SINGLE_RATE: [Method; 6] = {
        let mut single = [Method::Prcmt; 6];
        let (mut i, mut n) = (0, 0);
        while i < REGISTRY.len() {
            if matches!(REGISTRY[i].kind, SingleRate) {
                single[n] = REGISTRY[i].method;
                n += 1;
            }
            i += 1;
        }
        assert!(n == single.len());
        single
    };

    /// Its entry in the [`REGISTRY`].
    pub fn registered(self) -> &'static Registered {
        &REGISTRY[self as usize]
    }

    pub fn name(self) -> &'static str {
        self.registered().name
    }

    pub fn from_name(name: &str) -> Option<Method> {
        REGISTRY.iter().find(|r| r.name == name).map(|r| r.method)
    }

    /// The kind of stream the method answers for.
    pub fn kind(self) -> StreamKind {
        self.registered().kind
    }

    /// Whether it reads a known capacity where one is given.
    pub fn reads_capacity(self) -> bool {
        self.registered().reads_capacity
    }

    /// The names of the methods that read a known capacity, for messages
    /// ("queue-fit, igi and spruce").
    pub fn capacity_readers() -> String {
        let names: Vec<&str> = Method::ALL
            .iter()
            .filter(|m| m.reads_capacity())
            .map(|m| m.name())
            .collect();
        match names.split_last() {
            Some((last, [])) => last.to_string(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => String::new(),
        }
    }

    /// The best method for a kind (\[BASS\]: PRC-MT + BASS for single
    /// rates, multi-pass smoothing for multi-rate streams; chirps have
    /// one).
    pub fn default_for(kind: StreamKind) -> Method {
        match kind {
            StreamKind::SingleRate => Method::PrcmtBass,
            StreamKind::MultiRate => Method::Multirate,
            StreamKind::Chirp => Method::Pathchirp,
            StreamKind::Pairs => Method::Spruce,
        }
    }
}
