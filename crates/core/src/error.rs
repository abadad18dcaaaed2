//! What kind of failure an error is, so that every face maps it the same
//! way without reading its text: the CLI's exit status, Python's
//! exception class, the agent's error counter. The text still says what
//! and where; the kind says whose move it is.

use std::fmt;

/// The kinds of failure a measurement can end in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A flag, parameter, target, file's content or method that cannot be
    /// used as given: the user's to fix.
    BadInput,
    /// The far end could not be reached (no address, no route, nothing
    /// listening).
    Unreachable,
    /// The far end answered and refused (a version, a key, a size, its
    /// limits, a reflector that does not hold trains).
    Refused,
    /// The far end or the path went quiet for longer than the timeout.
    TimedOut,
    /// The far end spoke, but not the protocol expected of it.
    Protocol,
    /// This host's sockets, timestamps or files failed.
    Io,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 6] = [
        ErrorKind::BadInput,
        ErrorKind::Unreachable,
        ErrorKind::Refused,
        ErrorKind::TimedOut,
        ErrorKind::Protocol,
        ErrorKind::Io,
    ];

    /// A stable name (JSON, metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::BadInput => "bad-input",
            ErrorKind::Unreachable => "unreachable",
            ErrorKind::Refused => "refused",
            ErrorKind::TimedOut => "timed-out",
            ErrorKind::Protocol => "protocol",
            ErrorKind::Io => "io",
        }
    }

    /// The kind of an operating-system error: timeouts, unreachable
    /// peers and refused connections (nothing listening) by their own
    /// kinds, malformed input as bad input, the rest this host's.
    pub fn of_io(e: &std::io::Error) -> ErrorKind {
        use std::io::ErrorKind as K;
        match e.kind() {
            K::TimedOut | K::WouldBlock => ErrorKind::TimedOut,
            K::ConnectionRefused
            | K::HostUnreachable
            | K::NetworkUnreachable
            | K::AddrNotAvailable
            | K::ConnectionReset
            | K::ConnectionAborted
            | K::NotConnected => ErrorKind::Unreachable,
            K::InvalidInput | K::InvalidData | K::UnexpectedEof => ErrorKind::BadInput,
            _ => ErrorKind::Io,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_and_io_errors_sort_by_whose_move_it_is() {
        let mut names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ErrorKind::ALL.len());
        let io = |k| ErrorKind::of_io(&std::io::Error::from(k));
        use std::io::ErrorKind as K;
        assert_eq!(io(K::ConnectionRefused), ErrorKind::Unreachable);
        assert_eq!(io(K::TimedOut), ErrorKind::TimedOut);
        assert_eq!(io(K::WouldBlock), ErrorKind::TimedOut);
        assert_eq!(io(K::InvalidData), ErrorKind::BadInput);
        assert_eq!(io(K::PermissionDenied), ErrorKind::Io);
        assert_eq!(io(K::NotFound), ErrorKind::Io);
    }
}
