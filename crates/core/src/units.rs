//! Rates, sizes and times as users type them (`10G`, `64KB`, `125us`) and
//! as reports print them. Every flag, `sim:` path description and lab
//! scenario goes through these parsers, so a unit means the same
//! everywhere: rates in bit/s, sizes in bytes (1000-based suffixes, as
//! link rates are), times in integer nanoseconds.

use std::fmt;

/// A value that is not a rate, size or time; says what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError(pub String);

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

fn number_with_suffix(s: &str, suffixes: &[(&str, f64)], what: &str) -> Result<f64, UnitError> {
    let s = s.trim();
    for (suf, mult) in suffixes {
        if let Some(num) = s.strip_suffix(suf) {
            if let Ok(v) = num.trim().parse::<f64>() {
                if v.is_finite() && v >= 0.0 {
                    return Ok(v * mult);
                }
            }
        }
    }
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(UnitError(format!("'{s}' is not a {what}"))),
    }
}

/// `10G`, `2.5G`, `800M`, `10Gbps`, `1e9` -> bit/s.
pub fn parse_rate(s: &str) -> Result<f64, UnitError> {
    number_with_suffix(
        s,
        &[
            ("Gbps", 1e9),
            ("Mbps", 1e6),
            ("G", 1e9),
            ("M", 1e6),
            ("K", 1e3),
            ("g", 1e9),
            ("m", 1e6),
            ("k", 1e3),
        ],
        "rate (like 10G or 800M)",
    )
}

/// `125us`, `1ms`, `500ns`, `2s`, a bare number of ns -> ns (rounded).
pub fn parse_time_ns(s: &str) -> Result<i64, UnitError> {
    let ns = number_with_suffix(
        s,
        &[("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)],
        "time (like 125us or 10ms)",
    )?;
    if ns > i64::MAX as f64 {
        return Err(UnitError(format!("'{}' is too long a time", s.trim())));
    }
    Ok(ns.round() as i64)
}

/// `500ms`, `30s`, `5m`, `1h`, `30d`, a bare number of seconds ->
/// seconds: the periods of a service (intervals, timeouts, retention).
pub fn parse_period_s(s: &str) -> Result<f64, UnitError> {
    number_with_suffix(
        s,
        &[
            ("ms", 1e-3),
            ("s", 1.0),
            ("m", 60.0),
            ("h", 3600.0),
            ("d", 86_400.0),
        ],
        "period (like 30s, 5m, 1h or 30d)",
    )
}

/// `1GB`, `1MB`, `64KB`, `9000B`, `9000` -> bytes (rounded).
pub fn parse_bytes(s: &str) -> Result<u64, UnitError> {
    number_with_suffix(
        s,
        &[("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1.0)],
        "size (like 64KB)",
    )
    .map(|v| v.round() as u64)
}

/// A rate as typed (`10G`, `800M`; [`parse_rate`]): what a rate flag
/// or setting holds.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd)]
pub struct Rate {
    pub bps: f64,
}

impl std::str::FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_rate(s).map(|bps| Rate { bps })
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_rate(self.bps))
    }
}

/// A size as typed (`64KB`; [`parse_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size {
    pub bytes: u64,
}

impl std::str::FromStr for Size {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_bytes(s).map(|bytes| Size { bytes })
    }
}

/// A time as typed (`125us`, `10s`; [`parse_time_ns`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Time {
    pub ns: i64,
}

impl Time {
    pub fn duration(self) -> std::time::Duration {
        std::time::Duration::from_nanos(self.ns.max(0) as u64)
    }
}

impl std::str::FromStr for Time {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, UnitError> {
        parse_time_ns(s).map(|ns| Time { ns })
    }
}

/// A rate for people: `10.000 Gbit/s` from 1 Gbit/s up, else `978.0 Mbit/s`.
pub fn format_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.3} Gbit/s", bps / 1e9)
    } else {
        format!("{:.1} Mbit/s", bps / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_by_hand() {
        assert_eq!(parse_rate("10G"), Ok(10e9));
        assert_eq!(parse_rate("2.5G"), Ok(2.5e9));
        assert_eq!(parse_rate("800M"), Ok(800e6));
        assert_eq!(parse_rate("10Gbps"), Ok(10e9));
        assert_eq!(parse_rate(" 1e9 "), Ok(1e9));
        assert_eq!(parse_time_ns("125us"), Ok(125_000));
        assert_eq!(parse_time_ns("10ms"), Ok(10_000_000));
        assert_eq!(parse_time_ns("2s"), Ok(2_000_000_000));
        assert_eq!(parse_time_ns("1.5ns"), Ok(2));
        assert_eq!(parse_bytes("64KB"), Ok(64_000));
        assert_eq!(parse_bytes("1.5MB"), Ok(1_500_000));
        assert_eq!(parse_bytes("9000"), Ok(9000));
        assert_eq!(parse_period_s("500ms"), Ok(0.5));
        assert_eq!(parse_period_s("30s"), Ok(30.0));
        assert_eq!(parse_period_s("5m"), Ok(300.0));
        assert_eq!(parse_period_s("1.5h"), Ok(5400.0));
        assert_eq!(parse_period_s("30d"), Ok(2_592_000.0));
        assert_eq!(parse_period_s("42"), Ok(42.0));
        assert!(parse_period_s("1w").unwrap_err().0.contains("30s, 5m"));
    }

    #[test]
    fn errors_say_what_was_expected() {
        assert_eq!(
            parse_rate("fast").unwrap_err().to_string(),
            "'fast' is not a rate (like 10G or 800M)"
        );
        assert!(parse_rate("-1G").is_err());
        assert!(parse_rate("NaN").is_err());
        assert!(parse_time_ns("soon").unwrap_err().0.contains("125us"));
        assert!(parse_time_ns("1e300s").unwrap_err().0.contains("too long"));
        assert!(parse_bytes("big").unwrap_err().0.contains("64KB"));
    }

    #[test]
    fn typed_values_parse_as_the_functions_do() {
        assert_eq!("800M".parse::<Rate>(), Ok(Rate { bps: 800e6 }));
        assert_eq!("64KB".parse::<Size>(), Ok(Size { bytes: 64_000 }));
        assert_eq!("125us".parse::<Time>(), Ok(Time { ns: 125_000 }));
        assert_eq!(
            "1.5s".parse::<Time>().map(Time::duration),
            Ok(std::time::Duration::from_millis(1500))
        );
        assert_eq!(
            "fast".parse::<Rate>().unwrap_err().to_string(),
            "'fast' is not a rate (like 10G or 800M)"
        );
        assert!("big".parse::<Size>().is_err());
        assert_eq!("2.5G".parse::<Rate>().unwrap().to_string(), "2.500 Gbit/s");
        assert!("soon".parse::<Time>().is_err());
    }

    #[test]
    fn formats_rates() {
        assert_eq!(format_rate(10e9), "10.000 Gbit/s");
        assert_eq!(format_rate(977_975_461.0), "978.0 Mbit/s");
    }
}
