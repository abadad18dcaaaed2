//! tightlink-lab: a real testbed in network namespaces. The
//! simulator proves the algorithms; the lab proves the tool on real
//! sockets, real kernel queues and timestamps, against a ground truth
//! taken from kernel counters, not from the tool.
//!
//! - [`scenario`]: the path as a TOML file; the shipped scenarios.
//! - [`topology`]: namespaces, veth links, shaped hops (`tbf`/`htb`), the
//!   random-loss filter, offloads; `up`, `down`, `status`.
//! - [`cross`]: cross traffic on real sockets with the simulator's models.
//! - [`generators`]: cross traffic from tools we did not write (iperf3,
//!   iperf 2), started and stopped like our own.
//! - [`delay`]: the user-space delay line a hop's `delay` runs (no netem
//!   here).
//! - [`kernel`]: `setns`, rtnetlink counters, ethtool offloads.
//! - [`sampler`]: counters every millisecond during a run.
//! - [`truth`]: available bandwidth over a window from the samples.
//! - [`run`]: `lab run` and `lab check`.
//! - [`presets`]: peer tools (pathload, iperf3) for `lab compare`.
//! - [`passive`]: `lab tcp`, the passive estimators on a real transfer.
//! - [`track`]: `lab track`, the tracker's series against the truth over
//!   time.
//! - [`cc`]: `lab cc`, Rapid and the kernel's CUBIC and BBR in turn
//!   against the available bandwidth per bin.

pub mod adversity;
pub mod cc;
pub mod check;
pub mod cross;
pub mod delay;
pub mod generators;
pub mod kernel;
pub mod passive;
pub mod presets;
pub mod run;
pub mod sampler;
pub mod scenario;
pub mod text;
pub mod topology;
pub mod track;
pub mod truth;

pub use scenario::Scenario;
pub use topology::Lab;
