//! Errors as kinds the faces map without reading text
//! ([`tightlink_core::error::ErrorKind`]): the library's own checks of
//! flags and parameters raise [`BadInput`]; [`kind_of`] reads any error
//! the library returns, its causes included.

use tightlink_core::channel::ChannelError;
pub use tightlink_core::error::ErrorKind;
use tightlink_probe::strategy::StrategyError;

/// A flag, parameter, target or file's content that cannot be used as
/// given; its text says which and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadInput(pub String);

impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BadInput {}

/// Returns a [`BadInput`] error from the function (whose error type an
/// `anyhow::Error` converts into), formatted as `format!`.
#[macro_export]
macro_rules! bad_input {
    ($($t:tt)*) => {
        return Err(::anyhow::Error::new($crate::error::BadInput(format!($($t)*))).into())
    };
}
pub use bad_input;

/// The kind of an error the library returned: the first cause, outermost
/// first, whose type says it (an error of unknown type is this host's).
pub fn kind_of(e: &anyhow::Error) -> ErrorKind {
    e.chain().find_map(kind_of_one).unwrap_or(ErrorKind::Io)
}

/// A busy far end's word on when a session there is sure to be free
/// (it may be sooner), from an error the library returned.
pub fn busy_retry_after(e: &anyhow::Error) -> Option<std::time::Duration> {
    e.chain().find_map(|c| {
        let channel = c.downcast_ref::<ChannelError>().or_else(|| {
            c.downcast_ref::<StrategyError>().and_then(|s| match s {
                StrategyError::Channel(ch) => Some(ch),
                _ => None,
            })
        })?;
        match channel {
            ChannelError::Busy { retry_after_ms, .. } => {
                Some(std::time::Duration::from_millis(*retry_after_ms))
            }
            _ => None,
        }
    })
}

fn kind_of_one(e: &(dyn std::error::Error + 'static)) -> Option<ErrorKind> {
    use tightlink_probe::capacity::UnknownCapacityMethod;
    use tightlink_probe::strategy::UnknownMethod;
    if let Some(c) = e.downcast_ref::<ChannelError>() {
        return Some(c.kind());
    }
    if let Some(s) = e.downcast_ref::<StrategyError>() {
        return Some(match s {
            StrategyError::Channel(c) => c.kind(),
            StrategyError::NeedsCapacity(_) => ErrorKind::BadInput,
            StrategyError::NoRate(_) => ErrorKind::Io,
        });
    }
    if let Some(t) = e.downcast_ref::<tightlink_trace::TraceError>() {
        return Some(match t {
            tightlink_trace::TraceError::Io { source, .. }
            | tightlink_trace::TraceError::Write { source, .. } => ErrorKind::of_io(source),
            _ => ErrorKind::BadInput,
        });
    }
    if let Some(io) = e.downcast_ref::<std::io::Error>() {
        return Some(ErrorKind::of_io(io));
    }
    let bad = e.is::<BadInput>()
        || e.is::<tightlink_sim::spec::SpecError>()
        || e.is::<tightlink_core::units::UnitError>()
        || e.is::<UnknownMethod>()
        || e.is::<UnknownCapacityMethod>()
        || e.is::<tightlink_trace::BadPositions>()
        || e.is::<tightlink_capture::CaptureError>();
    bad.then_some(ErrorKind::BadInput)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_far_end_is_refused_with_its_wait() {
        let busy = anyhow::Error::new(StrategyError::Channel(ChannelError::Busy {
            retry_after_ms: 2500,
            reason: "server busy: session limit reached".into(),
        }))
        .context("estimate toward 10.0.0.1");
        assert_eq!(kind_of(&busy), ErrorKind::Refused);
        assert_eq!(
            busy_retry_after(&busy),
            Some(std::time::Duration::from_millis(2500))
        );
        assert_eq!(
            format!("{busy:#}"),
            "estimate toward 10.0.0.1: server busy: session limit reached; a session ends within 2.5 s"
        );
        let refused = anyhow::Error::new(ChannelError::Refused("wrong key".into()));
        assert_eq!(busy_retry_after(&refused), None);
    }

    #[test]
    fn kinds_are_read_through_the_causes() {
        let bad: anyhow::Result<()> = (|| bad_input!("--window {}: must be 1 or more", 0))();
        let e = bad.unwrap_err();
        assert_eq!(e.to_string(), "--window 0: must be 1 or more");
        assert_eq!(kind_of(&e), ErrorKind::BadInput);
        let refused = anyhow::Error::new(StrategyError::Channel(ChannelError::Refused(
            "the server refused: key".into(),
        )))
        .context("target 'x'");
        assert_eq!(kind_of(&refused), ErrorKind::Refused);
        assert_eq!(
            format!("{refused:#}"),
            "target 'x': the server refused: key"
        );
        let io = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(kind_of(&io.context("reading")), ErrorKind::TimedOut);
        assert_eq!(kind_of(&anyhow::anyhow!("something else")), ErrorKind::Io);
        let unit = tightlink_core::units::parse_rate("fast").unwrap_err();
        assert_eq!(kind_of(&anyhow::Error::new(unit)), ErrorKind::BadInput);
    }
}
