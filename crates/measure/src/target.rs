//! Targets as users type them: the simulated path (`sim:` and a path
//! description, or nothing), a tightlink server (`HOST[:PORT]`), a
//! TWAMP-light or STAMP reflector (`twamp:HOST[:PORT]`, `stamp:` the
//! same: the probes are STAMP packets that TWAMP-light reflectors answer
//! too) or a recorded run (`trace:FILE`); and the channel each opens.

use crate::bad_input;
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use anyhow::{Context, Result};
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
    /// A TWAMP-light or STAMP reflector, `HOST[:PORT]` (port 862 by
    /// default); `scheme` is how the user named it (`twamp` or `stamp`),
    /// kept for messages: the probes are the same.
    Twamp { host: String, scheme: &'static str },
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
            if file.is_empty() {
                bad_input!("'trace:' names no file: give trace:FILE (a probe trace)");
            }
            return Ok(Target::Trace {
                path: PathBuf::from(file),
            });
        }
        for scheme in ["twamp", "stamp"] {
            if let Some(host) = s.strip_prefix(scheme).and_then(|r| r.strip_prefix(':')) {
                if host.is_empty() || host.starts_with(':') {
                    bad_input!(
                        "'{s}' names no host: give {scheme}:HOST or {scheme}:HOST:PORT (the reflector's address)"
                    );
                }
                return Ok(Target::Twamp {
                    host: host.to_string(),
                    scheme,
                });
            }
        }
        if s.is_empty() {
            bad_input!("an empty target: give HOST[:PORT], twamp:HOST, sim:... or trace:FILE");
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
            Target::Twamp { host, scheme } => write!(f, "{scheme}:{host}"),
            Target::Trace { path } => write!(f, "trace:{}", path.display()),
        }
    }
}

/// How a measurement toward a real far end is made. The simulator takes
/// the rate ceiling and ignores a key; a direction or backend given for a
/// target that sends no packets is refused ([`RealOptions::check_for`]).
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

impl RealOptions {
    /// Whether these options make sense for `target`: a positive rate
    /// ceiling; on the simulator no direction or backend (it has one
    /// direction and sends no packets); on a replay no ceiling either (the
    /// recorded run's is in its metadata). A user who asked for them would
    /// otherwise get a measurement that quietly did something else. A key
    /// is let through (`TIGHTLINK_KEY_FILE` may be set for every run; it
    /// changes no measurement).
    pub fn check_for(&self, target: &Target) -> Result<()> {
        if let Some(r) = self.max_rate_bps {
            if !(r.is_finite() && r > 0.0) {
                bad_input!("--max-rate must be a positive rate, not {r} bit/s");
            }
        }
        if target.sends_packets() {
            return Ok(());
        }
        let real_only = |what: &str| {
            anyhow::Error::new(crate::error::BadInput(format!(
                "{what} applies to real servers only; '{target}' sends no packets"
            )))
        };
        if self.backend != Backend::Udp {
            return Err(real_only(&format!("--backend {}", self.backend)));
        }
        if self.reverse {
            return Err(real_only("-R (the download direction)"));
        }
        if let (Target::Trace { .. }, Some(_)) = (target, self.max_rate_bps) {
            bad_input!(
                "--max-rate cannot change a replay: '{target}' replays the recorded run's rates"
            );
        }
        Ok(())
    }
}

/// Opens the channel a target names.
pub fn open_channel(target: &Target, real: &RealOptions) -> Result<Box<dyn Channel>> {
    real.check_for(target)?;
    match target {
        Target::Sim { text, spec } => Ok(Box::new(
            SimChannel::new(spec.clone(), text.clone()).with_max_rate(real.max_rate_bps),
        )),
        Target::Trace { path } => open_trace(path),
        Target::Server { host } => {
            let ch = UdpChannel::connect(host, &client_options(real)?)
                .with_context(|| format!("target '{target}'"))?;
            Ok(Box::new(ch))
        }
        Target::Twamp { host, scheme } => {
            let mut opts = client_options_keyless(real);
            if let Some(f) = &real.key_file {
                if *scheme != "stamp" {
                    crate::bad_input!(
                        "--key-file {}: {scheme}: test packets are unauthenticated (TWAMP's authenticated mode needs TWAMP-Control); give stamp:{host} for STAMP's authenticated mode",
                        f.display()
                    );
                }
                opts.stamp_key = match tightlink_net::auth::StampKey::read_file(f) {
                    Ok(k) => Some(k),
                    Err(e) => crate::bad_input!("--key-file {e}"),
                };
            }
            let ch =
                TwampChannel::connect(host, &opts).with_context(|| format!("target '{target}'"))?;
            Ok(Box::new(ch))
        }
    }
}

fn client_options(real: &RealOptions) -> Result<ClientOptions> {
    let mut opts = client_options_keyless(real);
    opts.key = read_key(real)?;
    Ok(opts)
}

fn client_options_keyless(real: &RealOptions) -> ClientOptions {
    ClientOptions {
        backend: real.backend,
        direction: if real.reverse {
            Direction::Reverse
        } else {
            Direction::Forward
        },
        max_rate_bps: real.max_rate_bps,
        ..ClientOptions::default()
    }
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
        None => bad_input!(
            "{file}: replay needs the sender's link rate (metadata `# max_rate_bps=...`, written by --save-trace)"
        ),
    };
    // Streams whose sender fell behind, or whose receiver's socket
    // overflowed, in the live run: marked so here too, so that the
    // strategy sends again the ones it sent again.
    let late = trace
        .stream_positions("late_streams")
        .map_err(|why| crate::error::BadInput(format!("{file}: {why}")))?;
    let overflowed = trace
        .stream_positions("overflowed_streams")
        .map_err(|why| crate::error::BadInput(format!("{file}: {why}")))?;
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
                host: "192.0.2.1".into(),
                scheme: "twamp"
            }
        );
        // The same reflector and probes; messages name it as typed.
        let stamp = Target::parse("stamp:192.0.2.1").unwrap();
        assert!(matches!(&stamp, Target::Twamp { host, .. } if host == "192.0.2.1"));
        assert_eq!(stamp.to_string(), "stamp:192.0.2.1");
        assert_eq!(
            Target::parse("trace:run.csv.gz").unwrap(),
            Target::Trace {
                path: "run.csv.gz".into()
            }
        );
        // A scheme with nothing after it is no target.
        for empty in ["twamp:", "stamp:", "twamp::862", "trace:"] {
            let e = Target::parse(empty).unwrap_err();
            assert_eq!(crate::kind_of(&e), crate::ErrorKind::BadInput, "{e}");
            assert!(e.to_string().contains("names no"), "{empty}: {e}");
        }
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
        // A direction the simulator does not have, a ceiling of nothing,
        // a ceiling a replay cannot take: refused, not ignored.
        let refused =
            |target: &Target, real: RealOptions| real.check_for(target).unwrap_err().to_string();
        let sim = Target::default_sim();
        let e = refused(
            &sim,
            RealOptions {
                reverse: true,
                ..RealOptions::default()
            },
        );
        assert!(e.contains("-R") && e.contains("real servers only"), "{e}");
        for r in [0.0, -1e9, f64::NAN] {
            let real = RealOptions {
                max_rate_bps: Some(r),
                ..RealOptions::default()
            };
            let server = Target::parse("192.0.2.1").unwrap();
            assert!(refused(&server, real).contains("positive rate"), "{r}");
        }
        let trace = Target::parse("trace:run.csv").unwrap();
        let capped = RealOptions {
            max_rate_bps: Some(1e9),
            ..RealOptions::default()
        };
        assert!(refused(&trace, capped.clone()).contains("replay"));
        // A key is let through; a ceiling caps what the simulator offers.
        let keyed = RealOptions {
            key_file: Some("k".into()),
            ..capped
        };
        let ch = open_channel(&sim, &keyed).unwrap();
        assert_eq!(ch.info().max_rate_bps, 1e9);
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
