//! Targets as users type them: the simulated path (`sim:` and a path
//! description, or nothing), a tightlink server (`HOST[:PORT]`), a
//! TWAMP-light or STAMP reflector (`twamp:HOST[:PORT]`, `stamp:` the
//! same: the probes are STAMP packets that TWAMP-light reflectors answer
//! too) or a recorded run (`trace:FILE`); and the channel each opens.

use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{bail, Context, Result};
use tightlink_core::channel::{Channel, TraceChannel};
use tightlink_net::backend::Backend;
use tightlink_net::{ClientOptions, TwampChannel, UdpChannel};
use tightlink_sim::{parse_sim_target, PathSpec, SimChannel};
use tightlink_wire::control::Direction;

/// Where a measurement goes.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The embedded simulated path; `text` is what the user typed.
    Sim { text: String, spec: PathSpec },
    /// A `tightlink server`, `HOST[:PORT]` (port 7447 by default).
    Server { host: String },
    /// A TWAMP-light reflector, `HOST[:PORT]` (port 862 by default).
    Twamp { host: String },
    /// A run saved with `--save-trace`, replayed.
    Trace { path: PathBuf },
}

impl Target {
    /// The default: the simulated 10 Gbit/s path with 2.5 Gbit/s of bursty
    /// cross traffic and 125 us receiver coalescence.
    pub fn default_sim() -> Target {
        Target::parse("sim:").expect("the default path parses")
    }

    /// Parses a target in the grammar users type (see the module doc).
    pub fn parse(s: &str) -> Result<Target> {
        if s == "sim" || s.starts_with("sim:") {
            return Ok(Target::Sim {
                text: s.to_string(),
                spec: parse_sim_target(s)?,
            });
        }
        if let Some(file) = s.strip_prefix("trace:") {
            return Ok(Target::Trace {
                path: PathBuf::from(file),
            });
        }
        if let Some(host) = s
            .strip_prefix("twamp:")
            .or_else(|| s.strip_prefix("stamp:"))
        {
            return Ok(Target::Twamp {
                host: host.to_string(),
            });
        }
        if s.is_empty() {
            bail!("an empty target: give HOST[:PORT], twamp:HOST, sim:... or trace:FILE");
        }
        Ok(Target::Server {
            host: s.to_string(),
        })
    }

    /// Whether probing it puts packets on a network.
    pub fn sends_packets(&self) -> bool {
        matches!(self, Target::Server { .. } | Target::Twamp { .. })
    }
}

impl FromStr for Target {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> Result<Self> {
        Target::parse(s)
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Sim { text, .. } => f.write_str(text),
            Target::Server { host } => f.write_str(host),
            Target::Twamp { host } => write!(f, "twamp:{host}"),
            Target::Trace { path } => write!(f, "trace:{}", path.display()),
        }
    }
}

/// How a measurement toward a real far end is made; ignored by the
/// simulator and by replays, except that a backend other than UDP is an
/// error there.
#[derive(Debug, Clone, PartialEq)]
pub struct RealOptions {
    /// Measure the download direction: the server sends, this host stamps.
    pub reverse: bool,
    /// Pre-shared key file (servers that require one, or higher limits).
    pub key_file: Option<PathBuf>,
    /// Never probe faster than this, bit/s.
    pub max_rate_bps: Option<f64>,
    /// How this host sends (forward) or receives (reverse) probes.
    pub backend: Backend,
}

impl Default for RealOptions {
    fn default() -> Self {
        RealOptions {
            reverse: false,
            key_file: None,
            max_rate_bps: None,
            backend: Backend::Udp,
        }
    }
}

/// Opens the channel a target names.
pub fn open_channel(target: &Target, real: &RealOptions) -> Result<Box<dyn Channel>> {
    if real.backend != Backend::Udp && !target.sends_packets() {
        bail!(
            "--backend {} applies to real servers only; '{target}' sends no packets",
            real.backend
        );
    }
    match target {
        Target::Sim { text, spec } => Ok(Box::new(SimChannel::new(spec.clone(), text.clone()))),
        Target::Trace { path } => open_trace(path),
        Target::Server { host } => {
            let ch = UdpChannel::connect(host, &client_options(real)?)
                .with_context(|| format!("target '{target}'"))?;
            Ok(Box::new(ch))
        }
        Target::Twamp { host } => {
            let ch = TwampChannel::connect(host, &client_options(real)?)
                .with_context(|| format!("target '{target}'"))?;
            Ok(Box::new(ch))
        }
    }
}

fn client_options(real: &RealOptions) -> Result<ClientOptions> {
    let mut opts = ClientOptions {
        backend: real.backend,
        direction: if real.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        max_rate_bps: real.max_rate_bps,
        ..ClientOptions::default()
    };
    opts.key = read_key(real)?;
    Ok(opts)
}

/// The pre-shared key of `--key-file`, if one was given.
pub(crate) fn read_key(real: &RealOptions) -> Result<Option<Vec<u8>>> {
    real.key_file
        .as_ref()
        .map(|f| {
            tightlink_net::auth::read_key_file(f)
                .with_context(|| format!("--key-file {}", f.display()))
        })
        .transpose()
}

/// A saved run: its streams and the sender's link rate from its metadata.
fn open_trace(path: &Path) -> Result<Box<dyn Channel>> {
    let file = path.display();
    let trace = tightlink_trace::read_path(path)?;
    let max_rate_bps = match trace.meta("max_rate_bps") {
        Some(v) => v.parse::<f64>().ok().filter(|r| *r > 0.0).with_context(|| {
            format!("{file}: metadata max_rate_bps={v} is not a positive rate in bit/s")
        })?,
        None => bail!(
            "{file}: replay needs the sender's link rate (metadata `# max_rate_bps=...`, written by --save-trace)"
        ),
    };
    // Streams whose sender fell behind, or whose receiver's socket
    // overflowed, in the live run: marked so here too, so that the
    // strategy sends again the ones it sent again.
    let late = trace
        .stream_positions("late_streams")
        .map_err(|why| anyhow::anyhow!("{file}: {why}"))?;
    let overflowed = trace
        .stream_positions("overflowed_streams")
        .map_err(|why| anyhow::anyhow!("{file}: {why}"))?;
    Ok(Box::new(
        TraceChannel::new(trace.streams, max_rate_bps)
            .with_late_streams(&late)
            .with_overflowed_streams(&overflowed),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_users_type() {
        assert!(matches!(Target::parse("sim:").unwrap(), Target::Sim { .. }));
        assert!(matches!(Target::parse("sim").unwrap(), Target::Sim { .. }));
        assert_eq!(
            Target::parse("twamp:192.0.2.1").unwrap(),
            Target::Twamp {
                host: "192.0.2.1".into()
            }
        );
        assert_eq!(
            Target::parse("stamp:192.0.2.1").unwrap(),
            Target::parse("twamp:192.0.2.1").unwrap()
        );
        assert_eq!(
            Target::parse("trace:run.csv.gz").unwrap(),
            Target::Trace {
                path: "run.csv.gz".into()
            }
        );
        assert_eq!(
            Target::parse("example.net:7447").unwrap(),
            Target::Server {
                host: "example.net:7447".into()
            }
        );
        for t in ["sim:hops=40G+10G,seed=3", "twamp:h:862", "trace:x", "h"] {
            assert_eq!(Target::parse(t).unwrap().to_string(), t);
        }
    }

    #[test]
    fn bad_targets_say_why() {
        let e = Target::parse("sim:colour=blue").unwrap_err().to_string();
        assert!(e.contains("unknown key 'colour'"), "{e}");
        assert!(Target::parse("").is_err());
        let e = open_channel(
            &Target::default_sim(),
            &RealOptions {
                backend: Backend::Packet,
                ..RealOptions::default()
            },
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("applies to real servers only"), "{e}");
        let e = open_channel(
            &Target::parse("trace:/nonexistent/run.csv").unwrap(),
            &RealOptions::default(),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(e.contains("/nonexistent/run.csv"), "{e}");
    }
}
