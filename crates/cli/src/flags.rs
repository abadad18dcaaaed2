//! Flag values with units (`10G`, `64KB`, `10s`) that must lie within a
//! range: clap parses and checks them before anything runs, and its
//! error names the flag and the value.

use std::str::FromStr;

use tightlink_core::units::{Rate, Size, Time, UnitError};

/// A value with units (a [`Time`] or [`Size`]) within `lo..=hi`;
/// `refusal` is what a value outside hears.
pub fn within<T>(
    lo: T,
    hi: T,
    refusal: &'static str,
) -> impl Fn(&str) -> Result<T, String> + Clone + Send + Sync + 'static
where
    T: FromStr<Err = UnitError> + PartialOrd + Copy + Send + Sync + 'static,
{
    move |s: &str| {
        let v: T = s.parse().map_err(|e: UnitError| e.to_string())?;
        if (lo..=hi).contains(&v) {
            Ok(v)
        } else {
            Err(refusal.to_string())
        }
    }
}

/// A rate of 1 bit/s or more (less would round to a limit of zero);
/// `refusal` is what a lower one hears.
pub fn rate_above_zero(
    refusal: &'static str,
) -> impl Fn(&str) -> Result<Rate, String> + Clone + Send + Sync + 'static {
    move |s: &str| match s.parse::<Rate>() {
        Ok(r) if r.bps >= 1.0 => Ok(r),
        Ok(_) => Err(refusal.to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// A count within `lo..=hi`.
pub fn count_within(lo: u64, hi: u64) -> clap::builder::RangedU64ValueParser<usize> {
    clap::builder::RangedU64ValueParser::<usize>::new().range(lo..=hi)
}

pub const fn ms(n: i64) -> Time {
    Time { ns: n * 1_000_000 }
}

pub const fn secs(n: i64) -> Time {
    Time {
        ns: n * 1_000_000_000,
    }
}

pub const fn bytes(n: u64) -> Size {
    Size { bytes: n }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_by_hand() {
        let p = within(ms(10), secs(1), "must be within 10ms..1s");
        assert_eq!(p("10ms"), Ok(ms(10)));
        assert_eq!(p("1s"), Ok(secs(1)));
        assert_eq!(p("9ms"), Err("must be within 10ms..1s".to_string()));
        assert_eq!(p("1001ms"), Err("must be within 10ms..1s".to_string()));
        assert!(p("soon").unwrap_err().contains("is not a time"));
        let p = within(
            bytes(1500),
            bytes(10_000_000),
            "must be within 1500 B..10 MB",
        );
        assert_eq!(p("3KB"), Ok(bytes(3000)));
        assert_eq!(p("1KB"), Err("must be within 1500 B..10 MB".to_string()));
        assert!(p("big").unwrap_err().contains("is not a size"));
        let p = rate_above_zero("must be above zero");
        assert_eq!(p("1G"), Ok(Rate { bps: 1e9 }));
        assert_eq!(p("0"), Err("must be above zero".to_string()));
        assert!(p("fast").unwrap_err().contains("is not a rate"));
    }
}
