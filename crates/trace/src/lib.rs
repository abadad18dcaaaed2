//! Probe trace format, version 1: reader and writer.
//!
//! The one format tightlink uses for everything that records or reads probe
//! packets (see `docs/probe-trace.md`): UTF-8 CSV, `# key=value` metadata
//! before the header, header `stream_id,seq,size_bytes,send_ns,recv_ns`,
//! one row per packet, empty `recv_ns` for a lost packet, optionally gzip
//! (detected by its magic bytes, not the file name).
//!
//! The reader is strict: any line it cannot use stops it with the file
//! name, line number and reason. It never skips data.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::path::Path;

use tightlink_core::channel::GroundTruth;
use tightlink_core::{ProbePacket, ProbeStream, StreamKind};

/// The header line, exactly.
pub const HEADER: &str = "stream_id,seq,size_bytes,send_ns,recv_ns";

/// A parsed trace: metadata in file order, then streams in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    pub metadata: Vec<(String, String)>,
    pub streams: Vec<ProbeStream>,
}

impl Trace {
    /// The last value given for a metadata key.
    pub fn meta(&self, key: &str) -> Option<&str> {
        self.metadata
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The kind declared by `# stream_kinds=single|multi|chirp|pairs`, if any.
    pub fn declared_kind(&self) -> Option<StreamKind> {
        match self.meta("stream_kinds")? {
            "single" => Some(StreamKind::SingleRate),
            "multi" => Some(StreamKind::MultiRate),
            "chirp" => Some(StreamKind::Chirp),
            "pairs" => Some(StreamKind::Pairs),
            _ => None,
        }
    }

    /// Stream positions (0-based, in file order) listed by the metadata
    /// `key` (`# late_streams=1,4`); none when the key is absent. An
    /// entry that is not a position in this trace is an error that says
    /// which.
    pub fn stream_positions(&self, key: &str) -> Result<Vec<usize>, BadPositions> {
        let Some(v) = self.meta(key) else {
            return Ok(Vec::new());
        };
        let n = self.streams.len();
        let bad = |why: String| BadPositions {
            key: key.to_string(),
            value: v.to_string(),
            why,
        };
        v.split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| match p.trim().parse::<usize>() {
                Ok(i) if i < n => Ok(i),
                Ok(i) => Err(bad(format!("stream {i} is not in the trace ({n} streams)"))),
                Err(_) => Err(bad(format!("`{p}` is not a stream position"))),
            })
            .collect()
    }

    pub fn packet_count(&self) -> usize {
        self.streams.iter().map(|s| s.len()).sum()
    }
}

/// A metadata list of stream positions that names a stream the trace
/// does not have, or something that is not a position.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata {key}={value}: {why}")]
pub struct BadPositions {
    pub key: String,
    pub value: String,
    pub why: String,
}

/// Why a trace could not be read.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("cannot read {file}")]
    Io {
        file: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {file}")]
    Write {
        file: String,
        #[source]
        source: io::Error,
    },
    #[error("{file}:{line}: {reason}")]
    Line {
        file: String,
        line: usize,
        reason: String,
    },
    #[error("{file}: {reason}")]
    File { file: String, reason: String },
}

/// Reads a trace file, plain or gzip.
pub fn read_path(path: &Path) -> Result<Trace, TraceError> {
    let name = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| TraceError::Io {
        file: name.clone(),
        source,
    })?;
    parse_bytes(&name, &bytes)
}

/// Parses trace bytes (plain or gzip); `name` is used in error messages.
pub fn parse_bytes(name: &str, bytes: &[u8]) -> Result<Trace, TraceError> {
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::with_capacity(bytes.len() * 4);
        flate2::read::MultiGzDecoder::new(bytes)
            .read_to_end(&mut plain)
            .map_err(|e| TraceError::File {
                file: name.to_string(),
                reason: format!("bad gzip data: {e}"),
            })?;
        parse_text(name, &plain)
    } else {
        parse_text(name, bytes)
    }
}

/// Parses an unsigned decimal; `None` on anything else (sign, space, overflow).
#[inline]
fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

#[inline]
fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.first() {
        Some(b'-') => {
            let v = parse_u64(&s[1..])?;
            if v <= i64::MAX as u64 + 1 {
                Some((v as i128).wrapping_neg() as i64)
            } else {
                None
            }
        }
        Some(b'+') => i64::try_from(parse_u64(&s[1..])?).ok(),
        _ => i64::try_from(parse_u64(s)?).ok(),
    }
}

struct Field<'a>(&'a [u8]);

impl fmt::Display for Field<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = String::from_utf8_lossy(self.0);
        if s.chars().count() > 40 {
            write!(f, "'{}...'", s.chars().take(40).collect::<String>())
        } else {
            write!(f, "'{s}'")
        }
    }
}

/// A `# key=value` comment before the header: the trace's metadata
/// (other comments: none).
fn metadata_of(line: &[u8]) -> Result<Option<(String, String)>, String> {
    let body = std::str::from_utf8(&line[1..])
        .map_err(|_| "comment is not UTF-8".to_string())?
        .trim();
    let Some((k, v)) = body.split_once('=') else {
        return Ok(None);
    };
    let k = k.trim();
    if k.is_empty() || k.contains(char::is_whitespace) {
        return Ok(None);
    }
    Ok(Some((k.to_string(), v.trim().to_string())))
}

/// One data row: its stream, sequence number and packet, or what is
/// wrong with it.
fn parse_row(line: &[u8]) -> Result<(u64, u64, ProbePacket), String> {
    let mut fields = [&[][..]; 5];
    let mut count = 0;
    for f in line.split(|&b| b == b',') {
        if count < 5 {
            fields[count] = f;
        }
        count += 1;
    }
    if count != 5 {
        return Err(format!("expected 5 columns, found {count}"));
    }
    let bad = |col: &str, f: &[u8], what: &str| format!("{col} {} is not {what}", Field(f));
    let stream_id =
        parse_u64(fields[0]).ok_or_else(|| bad("stream_id", fields[0], "an unsigned integer"))?;
    let seq = parse_u64(fields[1]).ok_or_else(|| bad("seq", fields[1], "an unsigned integer"))?;
    let size = parse_u64(fields[2])
        .and_then(|v| u32::try_from(v).ok())
        .filter(|&v| v > 0)
        .ok_or_else(|| bad("size_bytes", fields[2], "a positive integer below 2^32"))?;
    let send_ns =
        parse_i64(fields[3]).ok_or_else(|| bad("send_ns", fields[3], "a signed 64-bit integer"))?;
    let recv_ns = if fields[4].is_empty() {
        None
    } else {
        Some(
            parse_i64(fields[4])
                .ok_or_else(|| bad("recv_ns", fields[4], "a signed 64-bit integer or empty"))?,
        )
    };
    let packet = ProbePacket {
        size_bytes: size,
        send_ns,
        recv_ns,
    };
    Ok((stream_id, seq, packet))
}

fn parse_text(name: &str, text: &[u8]) -> Result<Trace, TraceError> {
    let err = |line: usize, reason: String| TraceError::Line {
        file: name.to_string(),
        line,
        reason,
    };
    let mut trace = Trace::default();
    let mut seen_header = false;
    // First line of each stream, to report non-contiguous rows.
    let mut first_line: HashMap<u64, usize> = HashMap::new();
    let mut cur: Option<(ProbeStream, u64)> = None; // stream, last seq
    let mut lineno = 0usize;
    for raw in text.split(|&b| b == b'\n') {
        lineno += 1;
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        if line[0] == b'#' {
            if !seen_header {
                let kv = metadata_of(line).map_err(|why| err(lineno, why))?;
                trace.metadata.extend(kv);
            }
            continue;
        }
        if !seen_header {
            if line != HEADER.as_bytes() {
                return Err(err(
                    lineno,
                    format!("expected the header '{HEADER}', found {}", Field(line)),
                ));
            }
            seen_header = true;
            continue;
        }
        let (stream_id, seq, packet) = parse_row(line).map_err(|why| err(lineno, why))?;
        let send_ns = packet.send_ns;
        match &mut cur {
            Some((s, last_seq)) if s.id == stream_id => {
                if seq <= *last_seq {
                    return Err(err(
                        lineno,
                        format!("seq {seq} does not increase (previous {last_seq} in stream {stream_id})"),
                    ));
                }
                let prev_send = s.packets.last().map(|p| p.send_ns).unwrap_or(i64::MIN);
                if send_ns < prev_send {
                    return Err(err(
                        lineno,
                        format!("send_ns {send_ns} goes back in time (previous {prev_send} in stream {stream_id})"),
                    ));
                }
                *last_seq = seq;
                s.packets.push(packet);
            }
            _ => {
                if let Some(&first) = first_line.get(&stream_id) {
                    return Err(err(
                        lineno,
                        format!("stream {stream_id} is split: its rows began at line {first} and other streams came between"),
                    ));
                }
                first_line.insert(stream_id, lineno);
                if let Some((s, _)) = cur.take() {
                    trace.streams.push(s);
                }
                let mut s = ProbeStream::new(stream_id, Vec::with_capacity(64));
                s.packets.push(packet);
                cur = Some((s, seq));
            }
        }
    }
    if !seen_header {
        return Err(TraceError::File {
            file: name.to_string(),
            reason: format!("no header line '{HEADER}' (empty or not a probe trace)"),
        });
    }
    if let Some((s, _)) = cur {
        trace.streams.push(s);
    }
    Ok(trace)
}

/// Header of a ground-truth file (one row per stream; rates in bit/s).
pub const TRUTH_HEADER: &str = "stream_id,available_bps,min_bps,max_bps";

/// Writes a ground-truth CSV, one row per (stream id, truth) (kept apart
/// from the trace: a trace never carries truth). Rates are rounded to
/// whole bit/s.
pub fn write_truth_path(path: &Path, rows: &[(u64, GroundTruth)]) -> Result<(), TraceError> {
    let name = path.display().to_string();
    let io_err = |source| TraceError::Write {
        file: name.clone(),
        source,
    };
    let mut w = io::BufWriter::new(std::fs::File::create(path).map_err(io_err)?);
    writeln!(w, "{TRUTH_HEADER}").map_err(io_err)?;
    for (stream_id, t) in rows {
        writeln!(
            w,
            "{},{:.0},{:.0},{:.0}",
            stream_id, t.available_bps, t.min_bps, t.max_bps
        )
        .map_err(io_err)?;
    }
    w.flush().map_err(io_err)
}

/// Writes a trace to `path`, gzip-compressed when the name ends in `.gz`.
pub fn write_path(path: &Path, trace: &Trace) -> Result<(), TraceError> {
    let name = path.display().to_string();
    let io_err = |source| TraceError::Write {
        file: name.clone(),
        source,
    };
    let file = std::fs::File::create(path).map_err(io_err)?;
    let buffered = io::BufWriter::new(file);
    if name.ends_with(".gz") {
        let mut gz = flate2::write::GzEncoder::new(buffered, flate2::Compression::default());
        write(&mut gz, trace).map_err(io_err)?;
        gz.finish().and_then(|mut w| w.flush()).map_err(io_err)?;
    } else {
        let mut w = buffered;
        write(&mut w, trace).map_err(io_err)?;
        w.flush().map_err(io_err)?;
    }
    Ok(())
}

/// Writes a trace (plain text) with its metadata and streams. Each stream's
/// packets get `seq` 0, 1, 2, ... in order.
pub fn write<W: Write>(mut w: W, trace: &Trace) -> io::Result<()> {
    for (k, v) in &trace.metadata {
        writeln!(w, "# {k}={v}")?;
    }
    writeln!(w, "{HEADER}")?;
    for s in &trace.streams {
        for (i, p) in s.packets.iter().enumerate() {
            match p.recv_ns {
                Some(r) => writeln!(w, "{},{},{},{},{}", s.id, i, p.size_bytes, p.send_ns, r)?,
                None => writeln!(w, "{},{},{},{},", s.id, i, p.size_bytes, p.send_ns)?,
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_positions_in_metadata() {
        let with = |v: &str| Trace {
            metadata: vec![("late_streams".into(), v.into())],
            streams: (0..8).map(|i| ProbeStream::new(i, Vec::new())).collect(),
        };
        assert_eq!(
            with("1,4, 7").stream_positions("late_streams"),
            Ok(vec![1, 4, 7])
        );
        assert_eq!(with("").stream_positions("late_streams"), Ok(vec![]));
        assert_eq!(with("1").stream_positions("superseded_streams"), Ok(vec![]));
        assert_eq!(
            with("1,9")
                .stream_positions("late_streams")
                .map_err(|e| e.to_string()),
            Err("metadata late_streams=1,9: stream 9 is not in the trace (8 streams)".to_string())
        );
        assert_eq!(
            with("1,x")
                .stream_positions("late_streams")
                .map_err(|e| e.to_string()),
            Err("metadata late_streams=1,x: `x` is not a stream position".to_string())
        );
    }

    #[test]
    fn writing_into_a_missing_folder_says_write() {
        let path = std::env::temp_dir().join("tightlink-no-such-folder/x.trace");
        let e = write_path(&path, &Trace::default()).unwrap_err();
        assert!(matches!(e, TraceError::Write { .. }), "{e:?}");
        assert_eq!(e.to_string(), format!("cannot write {}", path.display()));
        let e = write_truth_path(&path, &[]).unwrap_err();
        assert!(e.to_string().starts_with("cannot write "), "{e}");
    }

    #[test]
    fn write_path_round_trips_plain_and_gzip() {
        let trace = Trace {
            metadata: vec![("source".into(), "test".into())],
            streams: vec![ProbeStream::new(
                3,
                vec![
                    ProbePacket {
                        size_bytes: 1500,
                        send_ns: 0,
                        recv_ns: Some(100),
                    },
                    ProbePacket {
                        size_bytes: 1500,
                        send_ns: 1200,
                        recv_ns: None,
                    },
                    ProbePacket {
                        size_bytes: 1500,
                        send_ns: 2400,
                        recv_ns: Some(2600),
                    },
                ],
            )],
        };
        let dir = std::env::temp_dir().join(format!("tl-trace-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["t.csv", "t.csv.gz"] {
            let p = dir.join(name);
            write_path(&p, &trace).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(bytes.starts_with(&[0x1f, 0x8b]), name.ends_with(".gz"));
            assert_eq!(read_path(&p).unwrap(), trace);
        }
        let rows = [(
            3,
            GroundTruth {
                available_bps: 7.5e9,
                min_bps: 7e9,
                max_bps: 8e9,
            },
        )];
        let p = dir.join("truth.csv");
        write_truth_path(&p, &rows).unwrap();
        assert_eq!(
            std::fs::read_to_string(&p).unwrap(),
            format!("{TRUTH_HEADER}\n3,7500000000,7000000000,8000000000\n")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn parse(s: &str) -> Result<Trace, TraceError> {
        parse_bytes("t.csv", s.as_bytes())
    }

    fn line_error(s: &str) -> (usize, String) {
        match parse(s) {
            Err(TraceError::Line { line, reason, .. }) => (line, reason),
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    #[test]
    fn reads_metadata_streams_and_losses() {
        let t = parse(
            "# stream_kinds=multi\n# capacity_bps=10000000000\n# a plain comment\n\
             stream_id,seq,size_bytes,send_ns,recv_ns\n\
             7,0,9000,-5,100\n7,1,9000,10,\r\n9,0,1500,20,30\n",
        )
        .unwrap();
        assert_eq!(t.meta("capacity_bps"), Some("10000000000"));
        assert_eq!(t.declared_kind(), Some(StreamKind::MultiRate));
        assert_eq!(t.streams.len(), 2);
        assert_eq!(t.streams[0].id, 7);
        assert_eq!(t.streams[0].packets[0].send_ns, -5);
        assert_eq!(t.streams[0].packets[1].recv_ns, None);
        assert_eq!(t.streams[1].packets[0].size_bytes, 1500);
    }

    #[test]
    fn errors_name_the_line_and_reason() {
        let h = "stream_id,seq,size_bytes,send_ns,recv_ns\n";
        assert_eq!(line_error("x,y\n").0, 1);
        assert!(line_error("x,y\n").1.contains("expected the header"));
        let (l, r) = line_error(&format!("{h}0,0,9000,1,2\n0,1,9000,3\n"));
        assert_eq!((l, r.as_str()), (3, "expected 5 columns, found 4"));
        let (l, r) = line_error(&format!("{h}0,0,9000,1x,2\n"));
        assert_eq!(l, 2);
        assert!(r.contains("send_ns '1x'"), "{r}");
        let (l, r) = line_error(&format!("{h}0,0,9000,1,2\n0,0,9000,3,4\n"));
        assert_eq!(l, 3);
        assert!(r.contains("does not increase"), "{r}");
        let (l, r) = line_error(&format!("{h}0,0,9000,1,2\n1,0,9000,3,4\n0,1,9000,5,6\n"));
        assert_eq!(l, 4);
        assert!(r.contains("split") && r.contains("line 2"), "{r}");
        let (_, r) = line_error(&format!("{h}0,0,0,1,2\n"));
        assert!(r.contains("size_bytes"), "{r}");
        let (_, r) = line_error(&format!("{h}0,0,9000,10,2\n0,1,9000,5,6\n"));
        assert!(r.contains("back in time"), "{r}");
        let (_, r) = line_error(&format!("{h}0,0,9000,99999999999999999999,2\n"));
        assert!(r.contains("signed 64-bit"), "{r}");
        assert!(matches!(parse(""), Err(TraceError::File { .. })));
        assert!(matches!(
            parse_bytes("g", &[0x1f, 0x8b, 1, 2]),
            Err(TraceError::File { .. })
        ));
    }

    #[test]
    fn integer_limits() {
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"9223372036854775808"), None);
        assert_eq!(parse_i64(b"-"), None);
        assert_eq!(parse_u64(b"18446744073709551616"), None);
    }

    #[test]
    fn write_then_read_round_trips_plain_and_gzip() {
        let t = Trace {
            metadata: vec![("source".into(), "test".into())],
            streams: vec![ProbeStream::new(
                3,
                vec![
                    ProbePacket {
                        size_bytes: 9000,
                        send_ns: i64::MIN,
                        recv_ns: Some(i64::MAX),
                    },
                    ProbePacket {
                        size_bytes: 9000,
                        send_ns: 0,
                        recv_ns: None,
                    },
                ],
            )],
        };
        let mut buf = Vec::new();
        write(&mut buf, &t).unwrap();
        assert_eq!(parse_bytes("x", &buf).unwrap(), t);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&buf).unwrap();
        assert_eq!(parse_bytes("x.gz", &gz.finish().unwrap()).unwrap(), t);
    }

    #[test]
    fn the_shipped_samples_parse() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../samples");
        let multi = read_path(&dir.join("multi-rate-10g.csv.gz")).unwrap();
        assert_eq!(multi.declared_kind(), Some(StreamKind::MultiRate));
        assert_eq!(multi.streams.len(), 12);
        assert_eq!(multi.streams[0].len(), 320);
        let single = read_path(&dir.join("single-rate-10g.csv.gz")).unwrap();
        assert_eq!(single.streams.len(), 12);
        assert_eq!(single.packet_count(), 1376);
    }
}
