//! The `sim:` target syntax: a simulated path in one word.
//!
//! `sim:KEY=VALUE,KEY=VALUE,...`; every key is optional (the defaults are
//! \[BASS\]'s testbed: a 10 Gbit/s sender link, then a 10 Gbit/s
//! link shared with 2.5 Gbit/s of bursty cross traffic, 125 us receiver
//! interrupt coalescence). Per-hop values are joined with `+`, one per hop.
//!
//! | key | value | default |
//! |---|---|---|
//! | `hops` | capacities, e.g. `40G+10G` | `10G+10G` |
//! | `capacity` | one capacity for the last hop (shorthand) | |
//! | `cross` | per hop `none`, `cbr:RATE`, `poisson:RATE`, `bursty:RATE`, `smoothed:RATE`, `paced:RATE` (a timer-paced sender such as iperf3's UDP client: `paced:60M:tick=100us`, and `late=`, `stall=`, `stalls=`, `line=`, `block=128KB` for writes of a block at a time as iperf3's capped TCP); one value applies to the last hop | `bursty:2.5G` on the last hop |
//! | `shaper` | per hop `none` or a token bucket `RATE/BUCKET` (`500M/3000B`) in front of the link; one value applies to the last hop | `none` |
//! | `buffer` | bytes per hop (`1MB`, `64KB`) | `1MB` |
//! | `delay` | propagation per hop (`50us`) | `1us` |
//! | `coalescence` | interrupt interval, or `off` | `125us` |
//! | `quantum` | receiver timestamp resolution, or `off` | `off` |
//! | `jitter` | `on` or `off` | `on` |
//! | `drift` | receiver clock drift (`20ppm`) | `0ppm` |
//! | `idle` | idle time after each stream | `10ms` |
//! | `loss` | share of probe packets lost at random after the last hop (`1%`, `0.01`) | `0` |
//! | `stalls` | a sender descheduled now and then: the share of streams in which it stalls once, and for how long (`30%:2ms`); packets due meanwhile leave together after it | none |
//! | `seed` | integer | `1` |
//!
//! Rates take `G`, `M`, `K` suffixes (bit/s), times `ns`, `us`, `ms`, `s`,
//! sizes `B`, `KB`, `MB` (1000-based).

use crate::cross::{CrossModel, CrossSpec, OnOffParams, PacedParams, SizeMix, Step};
use crate::hop::{HopSpec, TokenBucket};
use crate::path::{HopConfig, IcmpSpec, JitterSpec, PathSpec};
use crate::receiver::ReceiverSpec;
use tightlink_core::units::{self, UnitError};

#[derive(Debug, thiserror::Error, PartialEq)]
#[error("sim target: {0}")]
pub struct SpecError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(msg.into()))
}

impl From<UnitError> for SpecError {
    fn from(e: UnitError) -> Self {
        SpecError(e.0)
    }
}

fn parse_rate(s: &str) -> Result<f64, SpecError> {
    Ok(units::parse_rate(s)?)
}

/// Times in the model stay `f64` ns: the event arithmetic is in floats.
fn parse_time_ns(s: &str) -> Result<f64, SpecError> {
    Ok(units::parse_time_ns(s)? as f64)
}

fn parse_bytes(s: &str) -> Result<u64, SpecError> {
    Ok(units::parse_bytes(s)?)
}

/// One hop's cross traffic, `MODEL:RATE[:KEY=VALUE...]` or `none`
/// (shared with `tightlink cross` and lab scenarios).
/// `none` or `RATE/BUCKET`, e.g. `500M/3000B`.
pub fn parse_shaper(s: &str) -> Result<Option<TokenBucket>, SpecError> {
    if s == "none" || s == "off" {
        return Ok(None);
    }
    let Some((rate, bucket)) = s.split_once('/') else {
        return err(format!(
            "'{s}': expected none or RATE/BUCKET, like 500M/3000B"
        ));
    };
    let bucket_bytes = parse_bytes(bucket)?;
    if bucket_bytes == 0 {
        return err(format!("'{s}': the bucket must hold at least one byte"));
    }
    Ok(Some(TokenBucket {
        rate_bps: parse_rate(rate)?,
        bucket_bytes,
    }))
}

pub fn parse_cross(s: &str) -> Result<Option<CrossSpec>, SpecError> {
    if s == "none" || s == "0" {
        return Ok(None);
    }
    let mut parts = s.split(':');
    let kind = parts.next().unwrap_or_default();
    let Some(rate) = parts.next() else {
        return err(format!(
            "cross '{s}': expected MODEL:RATE, e.g. bursty:2.5G"
        ));
    };
    let rate_bps = parse_rate(rate)?;
    let mut on_off = OnOffParams::default();
    let options: Vec<&str> = parts.collect();
    let mut model = match kind {
        "cbr" => CrossModel::Cbr { size_bytes: 1500 },
        "poisson" => CrossModel::Poisson {
            sizes: SizeMix::web(),
        },
        "bursty" | "smoothed" => CrossModel::Bursty(OnOffParams::default()),
        "paced" => CrossModel::Paced(PacedParams::iperf3(1e6)),
        _ => {
            return err(format!(
                "cross model '{kind}': expected cbr, poisson, bursty, smoothed or paced"
            ))
        }
    };
    // ON/OFF options: bursty:2.5G:sources=40:on=100us:duty=0.25:shape=1.5;
    // any model: step=TIME/RATE (the rate from that time on).
    let mut step = None;
    for opt in &options {
        let Some((k, v)) = opt.split_once('=') else {
            return err(format!("cross '{s}': option '{opt}' is not KEY=VALUE"));
        };
        let bad = |what: &str| SpecError(format!("cross '{s}': {k}={v}: {what}"));
        if k == "step" {
            step = Some(parse_step(v).map_err(|e| bad(&e))?);
        } else if let CrossModel::Paced(p) = &mut model {
            paced_option(p, k, v).map_err(|e| bad(&e))?;
        } else if !matches!(model, CrossModel::Bursty(_)) {
            return err(format!("cross '{s}': {kind} takes no options"));
        } else {
            on_off_option(&mut on_off, k, v).map_err(|e| bad(&e))?;
        }
    }
    if on_off.mean_on_ns <= 0.0 {
        return err(format!("cross '{s}': on must be positive"));
    }
    if let CrossModel::Paced(p) = &model {
        if p.line_bps <= rate_bps {
            return err(format!(
                "cross '{s}': a paced sender's line ({} bit/s) must be faster than its rate",
                p.line_bps
            ));
        }
    }
    model = match (kind, model) {
        ("smoothed", _) => CrossModel::Smoothed(on_off),
        ("bursty", _) => CrossModel::Bursty(on_off),
        (_, m) => m,
    };
    Ok(Some(CrossSpec {
        model,
        rate_bps,
        step,
    }))
}

/// `step=TIME/RATE`: the cross rate from that time on.
fn parse_step(v: &str) -> Result<Step, String> {
    let Some((at, rate)) = v.split_once('/') else {
        return Err("expected TIME/RATE, like 500ms/6G".into());
    };
    let at_ns = parse_time_ns(at).map_err(|e| e.0)?;
    let rate_bps = parse_rate(rate).map_err(|e| e.0)?;
    if at_ns <= 0.0 {
        return Err("the time must be after the start".into());
    }
    Ok(Step { at_ns, rate_bps })
}

/// One option of a timer-paced sender (`paced:RATE:tick=100us:...`).
fn paced_option(p: &mut PacedParams, k: &str, v: &str) -> Result<(), String> {
    let time = |what: &str| -> Result<f64, String> {
        let t = parse_time_ns(v).map_err(|e| e.0)?;
        if !(0.0..=1e9).contains(&t) {
            return Err(format!("{what} must be 0 to 1 s"));
        }
        Ok(t)
    };
    match k {
        "tick" => {
            p.tick_ns = time("a tick")?;
            if p.tick_ns < 1_000.0 {
                return Err("a tick must be 1 us or longer".into());
            }
        }
        "late" => p.late_mean_ns = time("the mean lateness")?,
        "block" => {
            p.block_bytes = units::parse_bytes(v).map_err(|e| e.0)?;
            if p.block_bytes > 64_000_000 {
                return Err("a block of at most 64 MB".into());
            }
        }
        "line" => {
            p.line_bps = units::parse_rate(v).map_err(|e| e.0)?;
            if p.line_bps.is_nan() || p.line_bps <= 0.0 {
                return Err("a line rate above 0".into());
            }
        }
        "stall" => p.stall_max_ns = time("the longest stall")?,
        "stalls" => {
            p.stall_share = v
                .parse()
                .ok()
                .filter(|x: &f64| (0.0..=1.0).contains(x))
                .ok_or("expected a share of ticks in [0, 1]")?
        }
        _ => {
            return Err(
                "unknown option (known: tick, late, stall, stalls, block, line, step)".into(),
            )
        }
    }
    Ok(())
}

/// One option of the ON/OFF sources (`bursty:RATE:sources=40:...`).
fn on_off_option(on_off: &mut OnOffParams, k: &str, v: &str) -> Result<(), String> {
    match k {
        "sources" => {
            on_off.sources = v
                .parse()
                .ok()
                .filter(|n| (1..=10_000).contains(n))
                .ok_or("expected 1 to 10000 sources")?
        }
        "on" => on_off.mean_on_ns = parse_time_ns(v).map_err(|e| e.0)?,
        "duty" => {
            on_off.duty = v
                .parse()
                .ok()
                .filter(|d: &f64| *d > 0.0 && *d <= 1.0)
                .ok_or("expected a share in (0, 1]")?
        }
        "shape" => {
            on_off.shape = v
                .parse()
                .ok()
                .filter(|a: &f64| *a > 1.0 && *a <= 10.0)
                .ok_or("expected a Pareto shape in (1, 10]")?
        }
        _ => return Err("unknown option (known: sources, on, duty, shape, step)".into()),
    }
    Ok(())
}

fn on_off(key: &str, v: &str) -> Result<bool, SpecError> {
    match v {
        "on" | "yes" | "true" => Ok(true),
        "off" | "no" | "false" | "0" => Ok(false),
        _ => err(format!("{key}={v}: expected on or off")),
    }
}

impl Default for PathSpec {
    fn default() -> Self {
        PathSpec {
            hops: vec![
                HopConfig {
                    hop: HopSpec {
                        capacity_bps: 10e9,
                        buffer_bytes: 1_000_000,
                        propagation_ns: 1_000.0,
                        shaper: None,
                    },
                    cross: None,
                },
                HopConfig {
                    hop: HopSpec {
                        capacity_bps: 10e9,
                        buffer_bytes: 1_000_000,
                        propagation_ns: 1_000.0,
                        shaper: None,
                    },
                    cross: Some(CrossSpec {
                        model: CrossModel::Bursty(OnOffParams::default()),
                        rate_bps: 2.5e9,
                        step: None,
                    }),
                },
            ],
            jitter: JitterSpec::default(),
            receiver: ReceiverSpec::default(),
            sender_offset_ns: 1_000_000_000_000,
            seed: 1,
            warmup_ns: 20e6,
            idle_ns: 10e6,
            truth_splits: 4,
            random_loss: 0.0,
            stall_share: 0.0,
            stall_ns: 0.0,
            icmp: IcmpSpec::default(),
        }
    }
}

/// Parses `sim:...` (or the part after `sim:`); an empty spec is the
/// default path.
pub fn parse_sim_target(target: &str) -> Result<PathSpec, SpecError> {
    let body = target.strip_prefix("sim:").unwrap_or(target);
    if body == "sim" {
        return Ok(PathSpec::default());
    }
    let mut spec = PathSpec::default();
    let mut per_hop = PerHopItems::default();
    for item in body.split(',').filter(|s| !s.is_empty()) {
        let Some((key, value)) = item.split_once('=') else {
            return err(format!("'{item}': expected KEY=VALUE"));
        };
        let (key, value) = (key.trim(), value.trim());
        // Value errors name the item they came from.
        apply_item(&mut spec, &mut per_hop, key, value).map_err(|e| {
            if e.0.starts_with(key) || e.0.starts_with("unknown key") {
                e
            } else {
                SpecError(format!("{key}={value}: {}", e.0))
            }
        })?;
    }
    per_hop.apply(&mut spec)?;
    check_hops(&spec)?;
    Ok(spec)
}

/// The items given per hop (`A+B+...`, or one for all), applied once
/// every item is read: `hops` decides how many there are.
#[derive(Default)]
struct PerHopItems {
    capacities: Option<Vec<f64>>,
    cross: Option<Vec<Option<CrossSpec>>>,
    buffers: Option<Vec<u64>>,
    delays: Option<Vec<f64>>,
    shapers: Option<Vec<Option<TokenBucket>>>,
}

/// One `KEY=VALUE` item into `spec` (or, per hop, into `per_hop`).
fn apply_item(
    spec: &mut PathSpec,
    per_hop: &mut PerHopItems,
    key: &str,
    value: &str,
) -> Result<(), SpecError> {
    let each = || value.split('+').map(str::trim);
    let off_or_time = || -> Result<Option<f64>, SpecError> {
        if value == "off" || value == "0" {
            Ok(None)
        } else {
            parse_time_ns(value).map(Some)
        }
    };
    // Bounds that keep a path one a user could mean, and a run's work
    // bounded (a simulated second of delay is simulated traffic).
    let capacity = |v: &str| {
        let c = parse_rate(v)?;
        within(
            key,
            value,
            c,
            1e3..=1e12,
            "capacities from 1 kbit/s to 1 Tbit/s",
        )
    };
    let delay = |v: &str| {
        let d = parse_time_ns(v)?;
        within(key, value, d, 0.0..=10e9, "a one-way delay of at most 10 s")
    };
    let buffer = |v: &str| {
        let b = parse_bytes(v)?;
        within(
            key,
            value,
            b as f64,
            1.0..=1e10,
            "a buffer of 1 byte to 10 GB",
        )?;
        Ok::<u64, SpecError>(b)
    };
    let short_time = |what: &str| -> Result<Option<f64>, SpecError> {
        let t = off_or_time()?;
        if let Some(t) = t {
            within(key, value, t, 0.0..=100e6, what)?;
        }
        Ok(t)
    };
    match key {
        "hops" => per_hop.capacities = Some(each().map(capacity).collect::<Result<_, _>>()?),
        "capacity" => per_hop.capacities = Some(vec![capacity(value)?]),
        "cross" => per_hop.cross = Some(each().map(parse_cross).collect::<Result<_, _>>()?),
        "buffer" => per_hop.buffers = Some(each().map(buffer).collect::<Result<_, _>>()?),
        "delay" => per_hop.delays = Some(each().map(delay).collect::<Result<_, _>>()?),
        "shaper" => per_hop.shapers = Some(each().map(parse_shaper).collect::<Result<_, _>>()?),
        "coalescence" => {
            spec.receiver.coalescence_ns = short_time("coalescence of at most 100 ms")?
        }
        "quantum" => spec.receiver.quantum_ns = short_time("a stamp quantum of at most 100 ms")?,
        "jitter" => {
            if !on_off(key, value)? {
                spec.jitter = JitterSpec::none();
            }
        }
        "drift" => spec.receiver.drift_ppm = parse_drift(value)?,
        "idle" => {
            spec.idle_ns = within(
                key,
                value,
                parse_time_ns(value)?,
                0.0..=3600e9,
                "at most 1 h between streams",
            )?
        }
        "loss" => spec.random_loss = parse_loss(value)?,
        "stalls" => (spec.stall_share, spec.stall_ns) = parse_stalls(value)?,
        "seed" => {
            spec.seed = value
                .parse()
                .map_err(|_| SpecError(format!("seed={value}: expected an unsigned integer")))?
        }
        _ => {
            return err(format!(
                "unknown key '{key}' (known: hops, capacity, cross, shaper, buffer, delay, coalescence, quantum, jitter, drift, idle, loss, stalls, seed)"
            ))
        }
    }
    Ok(())
}

/// `x` if `range` holds it, else an error naming the item and the range.
fn within(
    key: &str,
    value: &str,
    x: f64,
    range: std::ops::RangeInclusive<f64>,
    what: &str,
) -> Result<f64, SpecError> {
    if range.contains(&x) {
        Ok(x)
    } else {
        err(format!("{key}={value}: expected {what}"))
    }
}

/// `drift=20ppm`: the receiver clock's drift, 1000 ppm at most.
fn parse_drift(value: &str) -> Result<f64, SpecError> {
    let v = value.strip_suffix("ppm").unwrap_or(value);
    match v.parse::<f64>() {
        Ok(d) if d.is_finite() && d.abs() <= 1000.0 => Ok(d),
        _ => err(format!(
            "drift={value}: expected parts per million, like 20ppm"
        )),
    }
}

/// A share written `1%` or `0.01`.
fn parse_share(value: &str) -> Option<f64> {
    match value.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().ok().map(|p| p / 100.0),
        None => value.parse::<f64>().ok(),
    }
}

/// `loss=1%`: random loss, a share below 1.
fn parse_loss(value: &str) -> Result<f64, SpecError> {
    match parse_share(value) {
        Some(x) if (0.0..1.0).contains(&x) => Ok(x),
        _ => err(format!(
            "loss={value}: expected a share below 1, like 1% or 0.01"
        )),
    }
}

/// `stalls=30%:2ms`: the share of streams in which the sender stalls,
/// and for how long.
fn parse_stalls(value: &str) -> Result<(f64, f64), SpecError> {
    let parsed = value
        .split_once(':')
        .and_then(|(share, dur)| Some((parse_share(share)?, parse_time_ns(dur).ok()?)));
    match parsed {
        Some((share, ns)) if (0.0..=1.0).contains(&share) && ns > 0.0 && ns <= 1e9 => {
            Ok((share, ns))
        }
        _ => err(format!(
            "stalls={value}: expected the share of streams in which the sender stalls and for how long (at most 1 s), like 30%:2ms"
        )),
    }
}

impl PerHopItems {
    /// `hops` first (it sets how many there are), then the per-hop items:
    /// one value for every hop (cross traffic and shaper: the last hop),
    /// or one per hop.
    fn apply(self, spec: &mut PathSpec) -> Result<(), SpecError> {
        if let Some(caps) = self.capacities {
            if caps.iter().any(|&c| c <= 0.0) {
                return err("capacities must be positive");
            }
            let default_cross = spec.hops.last().and_then(|h| h.cross.clone());
            spec.hops = caps
                .iter()
                .map(|&c| HopConfig {
                    hop: HopSpec {
                        capacity_bps: c,
                        buffer_bytes: 1_000_000,
                        propagation_ns: 1_000.0,
                        shaper: None,
                    },
                    cross: None,
                })
                .collect();
            spec.hops.last_mut().expect("at least one hop").cross = default_cross;
        }
        let n = spec.hops.len();
        let spread = |v: usize, key: &str| -> Result<Vec<usize>, SpecError> {
            if v == n {
                Ok((0..n).collect())
            } else if v == 1 {
                Ok(vec![n - 1])
            } else {
                err(format!(
                    "{key} has {v} values for {n} hops (give one, or one per hop)"
                ))
            }
        };
        if let Some(c) = self.cross {
            let idx = spread(c.len(), "cross")?;
            if c.len() == 1 {
                spec.hops[n - 1].cross = c[0].clone();
            } else {
                for (i, x) in idx.into_iter().zip(c) {
                    spec.hops[i].cross = x;
                }
            }
        }
        if let Some(b) = self.buffers {
            if b.len() == 1 {
                spec.hops.iter_mut().for_each(|h| h.hop.buffer_bytes = b[0]);
            } else {
                for (i, x) in spread(b.len(), "buffer")?.into_iter().zip(b) {
                    spec.hops[i].hop.buffer_bytes = x;
                }
            }
        }
        if let Some(d) = self.delays {
            if d.len() == 1 {
                spec.hops
                    .iter_mut()
                    .for_each(|h| h.hop.propagation_ns = d[0]);
            } else {
                for (i, x) in spread(d.len(), "delay")?.into_iter().zip(d) {
                    spec.hops[i].hop.propagation_ns = x;
                }
            }
        }
        if let Some(t) = self.shapers {
            if t.len() == 1 {
                spec.hops[n - 1].hop.shaper = t[0];
            } else {
                for (i, x) in spread(t.len(), "shaper")?.into_iter().zip(t) {
                    spec.hops[i].hop.shaper = x;
                }
            }
        }
        Ok(())
    }
}

/// A shaper must be slower than its hop, cross traffic slower than what
/// the hop sustains.
fn check_hops(spec: &PathSpec) -> Result<(), SpecError> {
    for h in &spec.hops {
        if let Some(t) = h.hop.shaper {
            if t.rate_bps >= h.hop.capacity_bps {
                return err(format!(
                    "a {:.3} Gbit/s shaper on a {:.3} Gbit/s hop shapes nothing",
                    t.rate_bps / 1e9,
                    h.hop.capacity_bps / 1e9
                ));
            }
        }
        if let Some(c) = &h.cross {
            if c.rate_bps >= h.hop.sustained_bps() {
                return err(format!(
                    "cross traffic of {:.3} Gbit/s fills a {:.3} Gbit/s hop",
                    c.rate_bps / 1e9,
                    h.hop.sustained_bps() / 1e9
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_out_of_range_name_their_item() {
        for (text, says) in [
            (
                "capacity=1e30",
                "capacity=1e30: expected capacities from 1 kbit/s to 1 Tbit/s",
            ),
            ("hops=10G+0", "hops=10G+0: expected capacities"),
            (
                "delay=11s",
                "delay=11s: expected a one-way delay of at most 10 s",
            ),
            ("buffer=0", "buffer=0: expected a buffer of 1 byte"),
            (
                "coalescence=200ms",
                "coalescence=200ms: expected coalescence of at most 100 ms",
            ),
            ("quantum=1s", "quantum=1s: expected a stamp quantum"),
            ("idle=3601s", "idle=3601s: expected at most 1 h"),
            ("stalls=10%:2s", "(at most 1 s)"),
        ] {
            let e = parse_sim_target(text).unwrap_err().0;
            assert!(e.contains(says), "{text}: {e}");
        }
        // The edges themselves are paths.
        for text in [
            "capacity=1k,cross=none",
            "capacity=1000G",
            "delay=10s",
            "buffer=1B",
            "coalescence=100ms",
            "idle=3600s",
            "stalls=10%:1s",
        ] {
            assert!(parse_sim_target(text).is_ok(), "{text}");
        }
    }

    #[test]
    fn shaper_key() {
        let s = parse_sim_target("sim:hops=40G+10G,shaper=500M/3000B,cross=none").unwrap();
        assert_eq!(s.hops[0].hop.shaper, None);
        assert_eq!(
            s.hops[1].hop.shaper,
            Some(TokenBucket {
                rate_bps: 500e6,
                bucket_bytes: 3000
            })
        );
        assert_eq!(s.narrow_capacity_bps(), 500e6);
        let e = parse_sim_target("sim:hops=10G,shaper=20G/3000B").unwrap_err();
        assert!(e.0.contains("shapes nothing"), "{e}");
        let e = parse_sim_target("sim:shaper=500M").unwrap_err();
        assert!(
            e.0.contains("shaper=500M") && e.0.contains("RATE/BUCKET"),
            "{e}"
        );
        let e = parse_sim_target("sim:hops=10G,shaper=500M/3000B,cross=cbr:600M").unwrap_err();
        assert!(e.0.contains("fills"), "{e}");
    }

    #[test]
    fn default_and_shorthands() {
        let d = parse_sim_target("sim:").unwrap();
        assert_eq!(d, PathSpec::default());
        assert_eq!(d.nominal_available_bps(), 7.5e9);
        let s = parse_sim_target("sim:capacity=1G,cross=cbr:300M,coalescence=off,seed=7").unwrap();
        assert_eq!(s.hops.len(), 1);
        assert_eq!(s.nominal_available_bps(), 700e6);
        assert_eq!(s.receiver.coalescence_ns, None);
        assert_eq!(s.seed, 7);
        let m = parse_sim_target("sim:hops=40G+10G+10G,cross=none+smoothed:3G+cbr:1G,buffer=2MB")
            .unwrap();
        assert_eq!(m.hops.len(), 3);
        assert_eq!(m.narrow_capacity_bps(), 10e9);
        assert_eq!(m.nominal_available_bps(), 7e9);
        assert!(m.hops.iter().all(|h| h.hop.buffer_bytes == 2_000_000));
    }

    #[test]
    fn paced_cross_traffic_takes_its_timer_and_blocks() {
        let spec = parse_sim_target("sim:cross=paced:60M:tick=100us:block=128KB:line=2G").unwrap();
        match &spec.hops.last().unwrap().cross.as_ref().unwrap().model {
            CrossModel::Paced(p) => {
                assert_eq!(p.tick_ns, 100_000.0);
                assert_eq!(p.block_bytes, 128_000);
                assert_eq!(p.line_bps, 2e9);
                assert_eq!(p.size_bytes, 1442);
            }
            m => panic!("{m:?}"),
        }
        // iperf3's own default timer: 1 ms.
        match &parse_sim_target("sim:cross=paced:2G").unwrap().hops[1].cross {
            Some(c) => assert!(matches!(&c.model, CrossModel::Paced(p) if p.tick_ns == 1e6)),
            None => panic!("no cross traffic"),
        }
        for (bad, says) in [
            ("sim:cross=paced:2G:tick=10ns", "1 us or longer"),
            ("sim:cross=paced:2G:line=1G", "must be faster than its rate"),
            ("sim:cross=paced:2G:stalls=2", "share of ticks"),
            ("sim:cross=paced:2G:sources=4", "known: tick"),
        ] {
            let e = parse_sim_target(bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn cross_options_set_the_on_off_sources() {
        let spec = parse_sim_target("sim:cross=bursty:2.5G:sources=40:on=100us:duty=0.5").unwrap();
        match &spec.hops.last().unwrap().cross.as_ref().unwrap().model {
            CrossModel::Bursty(p) => {
                assert_eq!(p.sources, 40);
                assert_eq!(p.mean_on_ns, 100_000.0);
                assert_eq!(p.duty, 0.5);
                assert_eq!(p.shape, 1.5);
            }
            m => panic!("{m:?}"),
        }
        // A step, on any model.
        let spec = parse_sim_target("sim:cross=cbr:4G:step=500ms/7G").unwrap();
        let c = spec.hops.last().unwrap().cross.as_ref().unwrap();
        assert_eq!(
            c.step,
            Some(Step {
                at_ns: 500e6,
                rate_bps: 7e9
            })
        );
        assert_eq!(c.rate_bps, 4e9);
        let spec = parse_sim_target("sim:cross=smoothed:2G:sources=20").unwrap();
        assert!(matches!(
            &spec.hops.last().unwrap().cross.as_ref().unwrap().model,
            CrossModel::Smoothed(p) if p.sources == 20
        ));
        for (bad, needle) in [
            ("sim:cross=cbr:2G:sources=4", "takes no options"),
            ("sim:cross=bursty:2G:sources=0", "sources=0"),
            ("sim:cross=bursty:2G:colour=red", "unknown option"),
            ("sim:cross=bursty:2G:duty=2", "duty=2"),
            ("sim:cross=bursty:2G:on=soon", "on=soon"),
            ("sim:cross=cbr:2G:step=6G", "expected TIME/RATE"),
            ("sim:cross=cbr:2G:step=later/6G", "step=later/6G"),
            ("sim:cross=cbr:2G:step=0s/6G", "after the start"),
        ] {
            let e = parse_sim_target(bad).unwrap_err();
            assert!(e.0.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn stalls_key() {
        let s = parse_sim_target("sim:stalls=30%:2ms").unwrap();
        assert_eq!((s.stall_share, s.stall_ns), (0.3, 2e6));
        let s = parse_sim_target("sim:stalls=1:500us").unwrap();
        assert_eq!((s.stall_share, s.stall_ns), (1.0, 5e5));
        assert_eq!(parse_sim_target("sim:").unwrap().stall_share, 0.0);
        for bad in [
            "sim:stalls=30%",
            "sim:stalls=150%:1ms",
            "sim:stalls=0.3:0ms",
            "sim:stalls=a:1ms",
        ] {
            let e = parse_sim_target(bad).unwrap_err();
            assert!(
                e.0.contains("stalls=") && e.0.contains("like 30%:2ms"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn loss_key() {
        assert_eq!(parse_sim_target("sim:loss=1%").unwrap().random_loss, 0.01);
        assert_eq!(parse_sim_target("sim:loss=0.02").unwrap().random_loss, 0.02);
        assert_eq!(parse_sim_target("sim:").unwrap().random_loss, 0.0);
        for bad in [
            "sim:loss=100%",
            "sim:loss=1.5",
            "sim:loss=-1%",
            "sim:loss=lots",
        ] {
            let e = parse_sim_target(bad).unwrap_err();
            assert!(e.0.contains("loss=") && e.0.contains("share"), "{bad}: {e}");
        }
    }

    #[test]
    fn errors_say_what() {
        let e = parse_sim_target("sim:capacity=10G,colour=blue").unwrap_err();
        assert!(e.0.contains("unknown key 'colour'"), "{e}");
        let e = parse_sim_target("sim:hops=10G+10G,cross=cbr:1G+cbr:1G+cbr:1G").unwrap_err();
        assert!(e.0.contains("3 values for 2 hops"), "{e}");
        let e = parse_sim_target("sim:capacity=1G,cross=cbr:2G").unwrap_err();
        assert!(e.0.contains("fills"), "{e}");
        assert!(parse_sim_target("sim:cross=wavy:1G").is_err());
    }
}
