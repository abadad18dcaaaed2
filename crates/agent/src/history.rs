//! The agent's stored results as `tightlink history` prints them: a
//! table, JSON (each row with its stored report as an object) or CSV.

use std::io::{self, Write};
use std::str::FromStr;

use tightlink_core::units::format_rate;

use crate::store::Row;

/// How `history` writes its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryFormat {
    Table,
    Json,
    Csv,
}

impl FromStr for HistoryFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "table" => Ok(HistoryFormat::Table),
            "json" => Ok(HistoryFormat::Json),
            "csv" => Ok(HistoryFormat::Csv),
            f => Err(format!("{f}: expected table, json or csv")),
        }
    }
}

/// `rows` in `format`.
pub fn write_history(out: &mut dyn Write, format: HistoryFormat, rows: &[Row]) -> io::Result<()> {
    match format {
        HistoryFormat::Table => table(out, rows),
        HistoryFormat::Json => json(out, rows),
        HistoryFormat::Csv => csv(out, rows),
    }
}

/// A stored answer with its bound's sign.
fn answer(r: &Row) -> String {
    let Some(v) = r.available_bps else {
        return "-".into();
    };
    let sign = match r.bound.as_deref() {
        Some("at_least") => ">= ",
        Some("at_most") => "<= ",
        _ => "",
    };
    format!("{sign}{}", format_rate(v))
}

fn table(out: &mut dyn Write, rows: &[Row]) -> io::Result<()> {
    if rows.is_empty() {
        return writeln!(out, "no results");
    }
    writeln!(
        out,
        "{:<20}  {:<16}  {:<10}  {:>19}  {:>29}  {:>15}  {:>9}  {:>7}  result",
        "time (UTC)", "name", "method", "available", "range", "truth", "probe MB", "wall s"
    )?;
    for r in rows {
        let range = match (r.low_bps, r.high_bps, r.ok) {
            (Some(l), Some(h), _) => format!("{} - {}", format_rate(l), format_rate(h)),
            (Some(l), None, true) => format!("{} - (no limit)", format_rate(l)),
            _ => "-".into(),
        };
        let result = if r.ok {
            "ok".to_string()
        } else {
            format!("failed: {}", r.error.as_deref().unwrap_or("?"))
        };
        writeln!(
            out,
            "{:<20}  {:<16}  {:<10}  {:>19}  {:>29}  {:>15}  {:>9}  {:>7.2}  {result}",
            utc_text(r.started_unix_ns),
            r.name,
            r.method,
            answer(r),
            range,
            r.truth_bps.map_or("-".into(), format_rate),
            r.probe_bytes
                .map_or("-".into(), |b| format!("{:.1}", b as f64 / 1e6)),
            r.wall_s,
        )?;
    }
    Ok(())
}

fn json(out: &mut dyn Write, rows: &[Row]) -> io::Result<()> {
    let items: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or(serde_json::Value::Null);
            // The stored report as an object, not a string.
            if let Some(rep) = &r.report {
                v["report"] = serde_json::from_str(rep).unwrap_or(serde_json::Value::Null);
            }
            v["time"] = utc_text(r.started_unix_ns).into();
            v
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &items)?;
    writeln!(out)
}

/// A CSV field, quoted when it holds a comma, quote or line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn csv(out: &mut dyn Write, rows: &[Row]) -> io::Result<()> {
    // Columns are added at the end, never moved: scripts read them by
    // place as well as by name.
    writeln!(out, "id,time,started_unix_ns,name,target,kind,method,origin,ok,available_bps,low_bps,high_bps,bound,truth_bps,probe_bytes,streams,host_limited,seed,wall_s,error,sender_late_streams,resent_streams,receiver_socket_drops,host_stolen_share,shaper_streams_bps,shaper_bucket_bytes")?;
    let opt = |v: Option<f64>| v.map_or(String::new(), |x| format!("{x:.0}"));
    let count = |v: Option<u64>| v.map_or(String::new(), |n| n.to_string());
    for r in rows {
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{:.3},{},{},{},{},{},{},{}",
            r.id,
            utc_text(r.started_unix_ns),
            r.started_unix_ns,
            field(&r.name),
            field(&r.target),
            r.kind,
            r.method,
            r.origin,
            r.ok as u8,
            opt(r.available_bps),
            opt(r.low_bps),
            opt(r.high_bps),
            r.bound.as_deref().unwrap_or(""),
            opt(r.truth_bps),
            r.probe_bytes.map_or(String::new(), |b| b.to_string()),
            r.streams.map_or(String::new(), |b| b.to_string()),
            r.host_limited
                .map_or(String::new(), |b| (b as u8).to_string()),
            r.seed.map_or(String::new(), |b| b.to_string()),
            r.wall_s,
            field(r.error.as_deref().unwrap_or("")),
            count(r.sender_late_streams),
            count(r.resent_streams),
            count(r.receiver_socket_drops),
            r.host_stolen_share
                .map_or(String::new(), |x| format!("{x:.4}")),
            opt(r.shaper_streams_bps),
            opt(r.shaper_bucket_bytes),
        )?;
    }
    Ok(())
}

/// Unix nanoseconds as `2026-11-23T10:04:05Z` (UTC, whole seconds).
pub fn utc_text(unix_ns: i64) -> String {
    let secs = unix_ns.div_euclid(1_000_000_000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Days since 1970-01-01 to a civil date (the proleptic Gregorian
    // calendar; the algorithm Howard Hinnant published as days_from_civil's
    // inverse).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_by_hand() {
        assert_eq!(utc_text(0), "1970-01-01T00:00:00Z");
        // 2000-02-29 12:34:56 UTC = 951827696 s.
        assert_eq!(utc_text(951_827_696_000_000_000), "2000-02-29T12:34:56Z");
        // 2026-11-23 00:00:00 UTC = 1795392000 s.
        assert_eq!(utc_text(1_795_392_000_999_999_999), "2026-11-23T00:00:00Z");
        assert_eq!(utc_text(-1_000_000_000), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn csv_fields_are_quoted_when_they_must_be() {
        assert_eq!(field("plain"), "plain");
        assert_eq!(field("a,b"), "\"a,b\"");
        assert_eq!(field("say \"x\""), "\"say \"\"x\"\"\"");
    }

    #[test]
    fn formats_are_named_as_the_flag_takes_them() {
        assert_eq!("csv".parse::<HistoryFormat>(), Ok(HistoryFormat::Csv));
        assert_eq!(
            "xml".parse::<HistoryFormat>(),
            Err("xml: expected table, json or csv".to_string())
        );
    }

    /// Every column the JSON has for the host and the shaper is in the
    /// CSV too, after the first twenty, which stay where they were.
    #[test]
    fn csv_rows_carry_the_host_and_shaper_columns() {
        let target = tightlink_measure::Target::parse("10.0.0.1").unwrap();
        let o = crate::store::Origin {
            name: "far",
            target: &target,
            method: "auto",
            origin: "schedule",
            started_unix_ns: 0,
            wall_s: 1.5,
            seed: None,
        };
        let row = Row {
            sender_late_streams: Some(9),
            resent_streams: Some(3),
            receiver_socket_drops: Some(0),
            host_stolen_share: Some(0.0125),
            shaper_streams_bps: Some(2.4e8),
            shaper_bucket_bytes: Some(63430.0),
            ..Row::failure(&o, "a, b", tightlink_measure::ErrorKind::Unreachable)
        };
        let mut out = Vec::new();
        write_history(&mut out, HistoryFormat::Csv, &[row]).unwrap();
        let text = String::from_utf8(out).unwrap();
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        assert_eq!(header.len(), 26);
        assert_eq!(header[19], "error");
        assert_eq!(
            header[20..],
            [
                "sender_late_streams",
                "resent_streams",
                "receiver_socket_drops",
                "host_stolen_share",
                "shaper_streams_bps",
                "shaper_bucket_bytes"
            ]
        );
        let line = lines.next().unwrap();
        assert!(
            line.ends_with(",\"a, b\",9,3,0,0.0125,240000000,63430"),
            "{line}"
        );
    }

    #[test]
    fn no_rows_say_so() {
        let mut out = Vec::new();
        write_history(&mut out, HistoryFormat::Table, &[]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "no results\n");
    }
}
