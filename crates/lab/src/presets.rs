//! Peer tools as `lab run --tool` presets, for `lab compare`: each one's
//! command line, its far end, where each runs and how to read its number.
//! Used when the user has built the tool and put it on `PATH`; nothing
//! here downloads or builds one. Command lines and output formats are
//! facts of the public tools (pathload's receiver prints `Available
//! bandwidth range : LO - HI (Mbps)` and takes the sender with `-s`; its
//! sender serves repeatedly with `-i`; pathChirp's receiver takes the
//! sender with `-S` and the run's length with `-t`, and writes its
//! estimates to a `.instbw` file; IGI/PTR's `ptr-client DST` prints
//! `PTR: x Mpbs (suggested)` and `IGI: y Mpbs` against a `ptr-server`
//! that serves one client after another; Spruce's `spruce_snd -h DST -c
//! CAPACITY` sends 100 pairs, one every 100 ms on average, and prints
//! `estimate: n Kbps` to stderr, while its `spruce_rcv` writes a log to
//! its working directory and exits after each run; iperf3's client
//! prints the receiver's throughput on a line ending `receiver`).

use regex::Regex;

use crate::run::Tool;

/// A peer tool tightlink knows how to run.
#[derive(Debug, Clone, Copy)]
pub struct Preset {
    pub name: &'static str,
    /// Where its source comes from (docs/lab.md says which versions ran).
    pub source: &'static str,
    /// The binary looked for on `PATH`.
    pub binary: &'static str,
    /// `{server}` becomes the far end's address.
    pub command: &'static str,
    pub server: &'static str,
    /// Named groups `lo` and `hi` (a range: its midpoint), or group 1,
    /// with an optional unit prefix as the group `unit` or group 2.
    pub pick: &'static str,
    /// The tool's client (the end that prints) runs at the receiver and
    /// its server at the sender, as pathload's does.
    pub at_receiver: bool,
    /// What its number is, when not the available bandwidth.
    pub measures: &'static str,
}

pub const PRESETS: [Preset; 6] = [
    Preset {
        name: "peer:pathload",
        source: "pathload 1.3.2 (Georgia Tech) or 1.3.3 (github.com/jean2/pathload)",
        binary: "pathload_rcv",
        command: "pathload_rcv -s {server} -o /dev/null",
        server: "pathload_snd -i -q",
        pick: r"range\s*:\s*(?P<lo>[\d.]+)\s*-\s*(?P<hi>[\d.]+)\s*\((?P<unit>\w)bps\)|greater than\s*(?P<value>[\d.]+)\s*\((?P<vunit>\w)bps\)",
        at_receiver: true,
        measures: "available bandwidth (the midpoint of its range)",
    },
    Preset {
        name: "peer:pathchirp",
        source: "pathChirp 2.3.7 (Rice University; `./configure && make CFLAGS='-O2 -fcommon'`, binaries in Bin/<cpu>/)",
        binary: "pathchirp_rcv",
        // The receiver writes `<time> <Mbps>` lines to a `.instbw` file in
        // its working directory, each already smoothed over 11 chirps:
        // their mean over an 8 s run.
        command: "d=$(mktemp -d) && cd \"$d\" && pathchirp_rcv -S {server} -t 8 >/dev/null 2>&1; \
                  awk '{s+=$2; n++} END {if (n) printf \"%.3f Mbps\\n\", s/n}' \"$d\"/*.instbw; rm -rf \"$d\"",
        server: "pathchirp_snd",
        pick: r"([\d.]+) (M)bps",
        at_receiver: true,
        measures: "available bandwidth (the mean of its smoothed estimates over 8 s)",
    },
    Preset {
        name: "peer:ptr",
        source: "IGI/PTR 2.1 (CMU, cs.cmu.edu/~hnn/igi) or 2.2 (github.com/y-kzm/igi-ptr-2.2), `make`",
        binary: "ptr-client",
        command: "ptr-client {server}",
        server: "ptr-server",
        pick: r"PTR:\s*([\d.]+) (M)pbs",
        at_receiver: false,
        measures: "available bandwidth (PTR, the rate its trains leave at the turning point; the authors' suggested answer)",
    },
    Preset {
        name: "peer:igi",
        source: "IGI/PTR 2.1 (CMU, cs.cmu.edu/~hnn/igi) or 2.2 (github.com/y-kzm/igi-ptr-2.2), `make`",
        binary: "ptr-client",
        command: "ptr-client {server}",
        server: "ptr-server",
        pick: r"IGI:\s*([\d.]+) (M)pbs",
        at_receiver: false,
        measures: "available bandwidth (IGI, the gap model; a second run of the same client as peer:ptr)",
    },
    Preset {
        name: "peer:spruce",
        source: "Spruce 0.3 (MIT; github.com/dirkcgrunwald/spruce), `make CFLAGS='-O2 -fcommon'`",
        binary: "spruce_snd",
        // Told the tight link's configured rate: Spruce takes the capacity
        // as given (its authors measured it with another tool).
        command: "spruce_snd -h {server} -c {capacity} 2>&1",
        // Its receiver exits after every run and logs to its working
        // directory: restarted in a directory of its own.
        server: "cd \"$(mktemp -d)\" && while :; do spruce_rcv >/dev/null 2>&1; sleep 0.1; done",
        pick: r"estimate:\s*(\d+) (K)bps",
        at_receiver: false,
        measures: "available bandwidth (100 pairs over about 10 s, told the tight link's configured capacity)",
    },
    Preset {
        name: "peer:iperf3",
        source: "iperf3 (Debian's package)",
        binary: "iperf3",
        command: "iperf3 -c {server} -t 3 -f m",
        server: "iperf3 -s",
        pick: r"([\d.]+) (\w)bits/sec.*receiver",
        at_receiver: false,
        measures: "one TCP flow's throughput (fills the path; not the available bandwidth)",
    },
];

pub use crate::generators::on_path;

impl Preset {
    pub fn tool(&self) -> Tool {
        Tool {
            command: self.command.to_string(),
            pick: Regex::new(self.pick).expect("a preset's pick is a valid regex"),
            name: self.name.to_string(),
            server: Some(self.server.to_string()),
            at_receiver: self.at_receiver,
        }
    }
}

/// The presets whose binary is on `PATH`, and the names of those not.
pub fn found() -> (Vec<Preset>, Vec<Preset>) {
    PRESETS.iter().partition(|p| on_path(p.binary))
}

/// What a lab run cannot be asked for: said with the flag or name at fault.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error("--peers {0}: not a preset ({names})", names = preset_names())]
    UnknownPeer(String),
    #[error("--pick {pick}: {why}")]
    BadPick { pick: String, why: String },
    #[error("lab compare {0:?}: no scenario named")]
    NoScenario(String),
    #[error("--method {0}")]
    UnknownMethod(String),
}

/// The tightlink methods a run takes: those asked for (comma-separated;
/// `all`: every closed-loop method, queue-fit given the scenario's tight
/// link capacity), else `lab compare`'s set, else the scenario's own;
/// each name checked.
pub fn methods(
    asked: Option<&str>,
    compare: bool,
    scenario: &crate::Scenario,
) -> Result<Vec<String>, PlanError> {
    let methods: Vec<String> = match (asked, compare) {
        (Some("all"), _) => tightlink_measure::Method::ALL
            .iter()
            .map(|m| m.name().to_string())
            .collect(),
        (Some(m), _) => m.split(',').map(|s| s.trim().to_string()).collect(),
        (None, true) => crate::run::COMPARE_METHODS
            .split(',')
            .map(str::to_string)
            .collect(),
        (None, false) => scenario.methods.clone(),
    };
    for m in &methods {
        m.parse::<tightlink_measure::Method>()
            .map_err(|e| PlanError::UnknownMethod(e.to_string()))?;
    }
    Ok(methods)
}

fn preset_names() -> String {
    PRESETS
        .iter()
        .map(|p| p.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The presets `peers` asks for (`a,b`; `none` for none; `None`: every
/// one), split into those on `PATH` and those not.
pub fn choose(peers: Option<&str>) -> Result<(Vec<Preset>, Vec<Preset>), PlanError> {
    let wanted: Option<Vec<&str>> = peers.map(|p| p.split(',').map(str::trim).collect());
    if let Some(w) = &wanted {
        if let Some(bad) = w
            .iter()
            .find(|n| **n != "none" && !PRESETS.iter().any(|p| p.name == **n))
        {
            return Err(PlanError::UnknownPeer(bad.to_string()));
        }
    }
    let chosen = |p: &&Preset| wanted.as_ref().is_none_or(|w| w.contains(&p.name));
    let (found, missing) = found();
    Ok((
        found.iter().filter(chosen).copied().collect(),
        missing.iter().filter(chosen).copied().collect(),
    ))
}

/// A user's tool (`--tool COMMAND --pick REGEX`), named after its
/// command's first word.
pub fn user_tool(
    command: &str,
    pick: &str,
    server: Option<String>,
    at_receiver: bool,
) -> Result<Tool, PlanError> {
    Ok(Tool {
        command: command.to_string(),
        pick: Regex::new(pick).map_err(|e| PlanError::BadPick {
            pick: pick.to_string(),
            why: e.to_string(),
        })?,
        name: command
            .split_whitespace()
            .next()
            .and_then(|w| std::path::Path::new(w).file_name())
            .map_or("tool".into(), |n| n.to_string_lossy().into_owned()),
        server,
        at_receiver,
    })
}

/// The scenarios `lab compare SCENARIO` runs: a comma-separated list,
/// where `third-party` stands for every shipped scenario whose cross
/// traffic another tool makes ([`crate::scenario::THIRD_PARTY`]).
pub fn campaign(arg: &str) -> Result<Vec<String>, PlanError> {
    let mut v = Vec::new();
    for n in arg.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        if n == "third-party" {
            v.extend(crate::scenario::THIRD_PARTY.iter().map(|s| s.to_string()));
        } else {
            v.push(n.to_string());
        }
    }
    if v.is_empty() {
        return Err(PlanError::NoScenario(arg.to_string()));
    }
    Ok(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::pick_rate;

    #[test]
    fn every_preset_parses_and_reads_its_tools_output() {
        // pathload_rcv's line (printf "%.2f - %.2f (Mbps)"): the midpoint.
        let pathload = PRESETS[0].tool();
        let out = "Available bandwidth range : 132.10 - 148.30 (Mbps)\nMeasurements finished";
        assert!((pick_rate(&pathload.pick, out).unwrap() - 140.2e6).abs() < 1.0);
        // Its coalescence answer is a lower bound: the number it gives.
        let out = "Receiver NIC has interrupt coalescence enabled\nAvailable bandwidth is greater than 95.50 (Mbps)\n";
        assert!((pick_rate(&pathload.pick, out).unwrap() - 95.5e6).abs() < 1.0);
        // iperf3's receiver line, not the sender's.
        // pathChirp's mean, as the preset's awk prints it.
        let chirp = PRESETS[1].tool();
        assert_eq!(pick_rate(&chirp.pick, "157.107 Mbps\n").unwrap(), 157.107e6);
        assert!(PRESETS[1].command.contains("pathchirp_rcv -S {server}"));
        // IGI/PTR's two lines; each preset reads its own.
        let out = "PTR: 195.482 Mpbs (suggested)\nIGI:  83.695 Mpbs\nProbing uses 0.011 seconds";
        assert!((pick_rate(&PRESETS[2].tool().pick, out).unwrap() - 195.482e6).abs() < 1.0);
        assert!((pick_rate(&PRESETS[3].tool().pick, out).unwrap() - 83.695e6).abs() < 1.0);
        // Spruce's sender (stderr joined to stdout), in kbit/s.
        let out =
            "sender starting up\navailalble bandwidth estimate: 204654 Kbps\nsender finished\n";
        assert_eq!(pick_rate(&PRESETS[4].tool().pick, out).unwrap(), 204_654e3);
        assert!(PRESETS[4].command.contains("-c {capacity}"));
        let iperf = PRESETS[5].tool();
        let out = "[  5]   0.00-3.00   sec  50.0 MBytes   140 Mbits/sec    3             sender\n\
                   [  5]   0.00-3.04   sec  49.5 MBytes   137 Mbits/sec                  receiver\n";
        assert_eq!(pick_rate(&iperf.pick, out).unwrap(), 137e6);
    }

    #[test]
    fn a_campaign_names_its_scenarios() {
        let third = crate::scenario::THIRD_PARTY;
        assert_eq!(campaign("third-party").unwrap(), third.to_vec());
        assert_eq!(campaign(" cbr30, two-hop ").unwrap(), ["cbr30", "two-hop"]);
        let mixed = campaign("quiet,third-party").unwrap();
        assert_eq!((mixed.len(), mixed[0].as_str()), (1 + third.len(), "quiet"));
        assert_eq!(
            campaign(" , ").unwrap_err().to_string(),
            "lab compare \" , \": no scenario named"
        );
    }

    #[test]
    fn a_users_tool_is_named_after_its_command() {
        let t = user_tool(
            "/opt/bin/iperf3 -c {server}",
            r"([\d.]+) (\w)bits",
            None,
            true,
        )
        .unwrap();
        assert_eq!((t.name.as_str(), t.at_receiver), ("iperf3", true));
        let e = user_tool("x", "(", None, false).unwrap_err();
        assert!(e.to_string().starts_with("--pick (: "), "{e}");
    }

    #[test]
    fn peers_are_chosen_by_preset_name() {
        let e = choose(Some("peer:pathload,peer:nope")).unwrap_err();
        assert_eq!(e, PlanError::UnknownPeer("peer:nope".into()));
        assert!(e
            .to_string()
            .contains("not a preset (peer:pathload, peer:pathchirp"));
        let (found, missing) = choose(Some("none")).unwrap();
        assert!(found.is_empty() && missing.is_empty());
        let (found, missing) = choose(Some("peer:spruce")).unwrap();
        assert_eq!(found.len() + missing.len(), 1);
        let (found, missing) = choose(None).unwrap();
        assert_eq!(found.len() + missing.len(), PRESETS.len());
    }

    #[test]
    fn methods_are_the_asked_then_the_comparison_then_the_scenario() {
        let quiet = crate::Scenario::load("quiet").unwrap();
        assert_eq!(
            methods(Some("auto, multirate"), false, &quiet).unwrap(),
            ["auto", "multirate"]
        );
        let all = methods(Some("all"), false, &quiet).unwrap();
        assert_eq!(all.len(), tightlink_measure::Method::ALL.len());
        assert_eq!(
            methods(None, true, &quiet).unwrap().join(","),
            crate::run::COMPARE_METHODS
        );
        assert_eq!(methods(None, false, &quiet).unwrap(), quiet.methods);
        let e = methods(Some("auto,nope"), true, &quiet).unwrap_err();
        assert!(e.to_string().starts_with("--method nope"), "{e}");
    }
}
