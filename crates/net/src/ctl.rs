//! What the client, the server and the transfer engine share over a
//! control connection: the longest stream, per-packet records, and a
//! control failure said as what happened to the session.

use std::io::{self, BufWriter};
use std::net::TcpStream;

use tightlink_core::channel::ChannelError;
use tightlink_wire::control::{write_message, Message, Record, RecordKind, RECORDS_PER_FRAME};

/// Longest stream, so receive offsets fit the records' 32-bit ns.
pub const MAX_STREAM_NS: u64 = 2_000_000_000;

pub(crate) fn io_err(what: &str) -> impl Fn(io::Error) -> ChannelError + '_ {
    move |e| ChannelError::from_io(what, &e)
}

/// A control-connection failure, said as what happened to the session.
pub(crate) fn ctl_err(e: tightlink_wire::control::ControlError) -> ChannelError {
    use tightlink_wire::control::ControlError;
    let what = match &e {
        ControlError::Io(io) => match io.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Some(
                "the server did not answer within the control timeout (the connection is cut, or the server hangs)",
            ),
            io::ErrorKind::UnexpectedEof
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::BrokenPipe => Some(
                "the server closed the control connection mid-session (restarted, killed, or it ended the session)",
            ),
            _ => None,
        },
        _ => None,
    };
    ChannelError::Io(match what {
        Some(w) => format!("cannot measure: {w} ({e})"),
        None => format!("server control connection: {e}"),
    })
}

pub(crate) fn refused(reason: &str) -> ChannelError {
    ChannelError::Refused(format!("the server refused: {reason}"))
}

/// Sends per-packet timestamps as `Records` frames: a base (the earliest
/// stamp) and 32-bit offsets; positions without a stamp are left out.
pub(crate) fn send_records(
    w: &mut BufWriter<&TcpStream>,
    stream: u32,
    kind: RecordKind,
    stamps: &[Option<i64>],
) -> io::Result<()> {
    let base_ns = stamps.iter().flatten().copied().min().unwrap_or(0);
    let records: Vec<Record> = stamps
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.map(|t| Record {
                position: i as u32,
                offset_ns: (t - base_ns).clamp(0, u32::MAX as i64) as u32,
            })
        })
        .collect();
    let mut chunks = records.chunks(RECORDS_PER_FRAME).peekable();
    if chunks.peek().is_none() {
        return write_message(
            w,
            &Message::Records {
                stream,
                kind,
                base_ns,
                last: true,
                records: vec![],
            },
        );
    }
    while let Some(chunk) = chunks.next() {
        write_message(
            w,
            &Message::Records {
                stream,
                kind,
                base_ns,
                last: chunks.peek().is_none(),
                records: chunk.to_vec(),
            },
        )?;
    }
    Ok(())
}
