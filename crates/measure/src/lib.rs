//! tightlink-measure: the library API under every face of tightlink.
//!
//! The command line, the tests and every later face (an agent, a Python
//! package, a rate controller) call these functions; none of them prints
//! anything or draws progress: a caller gets [`Event`]s while a
//! measurement runs and a report at the end, which serialises to the JSON
//! the command line prints.
//!
//! - [`Target`]: where to measure, parsed from the grammar users type
//!   (`sim:...`, `HOST[:PORT]`, `twamp:HOST`, `trace:FILE`).
//! - [`estimate()`]: available bandwidth by one closed-loop [`Method`].
//! - [`capacity()`]: the narrow link's capacity by [`CapacityMethod`]s.
//! - [`hops::hops`]: each link's capacity (pathchar's variable packet size).
//! - [`analyze::analyze_trace`]: recorded streams through the per-stream
//!   methods.
//! - [`passive::analyze_tcp`]: the passive estimators on a captured TCP flow.
//! - [`simulate::simulate`]: streams through the simulated path, with truth.
//! - [`transfer::transfer`]: a bulk transfer rate-controlled by the
//!   estimates (Rapid), to a server or through the simulated path.
//!
//! Estimate on the embedded simulated path (10 Gbit/s, bursty cross
//! traffic, receiver coalescence), next to the simulator's truth:
//!
//! ```
//! use tightlink_measure::{estimate, EstimateOptions, Target};
//!
//! let target = Target::parse("sim:seed=1")?;
//! let report = estimate(&target, &EstimateOptions::default(), &mut |_| {})?;
//! let error = report.error().expect("the simulator knows the truth");
//! assert!(error.abs() < 0.1, "{report:?}");
//! # Ok::<(), anyhow::Error>(())
//! ```
//!
//! Analyse one stream built from plain arrays (send and receive times in
//! ns; `None` for a lost packet): 100 packets of 9000 B sent 12 us apart
//! (6 Gbit/s) that arrive 14.4 us apart (5 Gbit/s) are above the available bandwidth.
//!
//! ```
//! use tightlink_measure::analysis::{analyze, AnalysisParams, Decision, Method, StreamKind};
//! use tightlink_measure::ProbeStream;
//!
//! let send_ns: Vec<i64> = (0..100).map(|i| i * 12_000).collect();
//! let recv_ns: Vec<Option<i64>> = (0..100).map(|i| Some(50_000 + i * 14_400)).collect();
//! let stream = ProbeStream::from_times(0, 9000, &send_ns, &recv_ns);
//! let a = analyze(&stream, StreamKind::SingleRate, Method::PrcmtBass, &AnalysisParams::default());
//! assert_eq!(a.decision, Some(Decision::Above));
//! ```
//!
//! Many streams in a row (a long trace, a rate controller reading a
//! stream every few milliseconds): an [`analysis::Analyzer`] keeps its
//! working memory from one stream to the next, and reads multi-rate
//! streams without allocating once it has grown.
//!
//! ```
//! use tightlink_measure::analysis::{AnalysisParams, Analyzer, Bound, Method, StreamKind};
//! use tightlink_measure::ProbeStream;
//!
//! // Five rates of 20 packets, 4 to 8 Gbit/s, through a path that
//! // carries 6: from 6 Gbit/s on, each packet arrives 12 us after the last.
//! let (mut send_ns, mut recv_ns, mut t, mut r) = (vec![], vec![], 0i64, 50_000i64);
//! for gap_ns in [18_000, 14_400, 12_000, 10_286, 9_000] {
//!     for _ in 0..20 {
//!         t += gap_ns;
//!         r = (r + 12_000).max(t + 50_000);
//!         send_ns.push(t);
//!         recv_ns.push(Some(r));
//!     }
//! }
//! let stream = ProbeStream::from_times(0, 9000, &send_ns, &recv_ns);
//! let mut analyzer = Analyzer::new();
//! let p = AnalysisParams::default();
//! for _ in 0..3 {
//!     let a = analyzer.analyze(&stream, StreamKind::MultiRate, Method::Multirate, &p);
//!     let e = a.abw_bps.unwrap();
//!     assert!(a.bound == Bound::Exact && (e / 6e9 - 1.0).abs() < 0.1, "{a:?}");
//! }
//! ```

pub mod analyze;
pub mod capacity;
pub mod error;
pub mod estimate;
mod estimate_json;
pub mod hops;
pub mod passive;
pub mod report;
mod report_warnings;
mod save;
pub mod simulate;
pub mod target;
pub mod text;
pub mod transfer;

pub use capacity::{capacity, CapacityOptions, CapacityResult};
pub use error::{busy_retry_after, kind_of, BadInput, ErrorKind};
pub use estimate::{estimate, estimate_both, Capped, EstimateOptions, EstimateReport};
pub use estimate_json::{BusyJson, EstimateJson, ShaperJson, SlowTrainsJson};
pub use report::{BartUpdate, Cost, Event};
pub use save::{write_trace, write_truth};
pub use target::{open_channel, RealOptions, Target};
pub use tightlink_core::channel::HostFindings;
pub use tightlink_core::{Bound, ProbeStream};
pub use tightlink_net::backend::Backend;
pub use tightlink_probe::capacity::{CapacityMethod, CapacityReport, CapacityStop};
pub use tightlink_probe::strategy::{Method, Stop, UnknownMethod};

/// Per-stream analysis of recorded or hand-made streams (the pure core).
pub mod analysis {
    pub use tightlink_core::{
        analyze, Analysis, AnalysisParams, Analyzer, Bound, Decision, Method, StreamKind,
    };
}
