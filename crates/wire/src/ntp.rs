//! NTP-format timestamps and the error estimate of OWAMP/TWAMP test packets
//! (RFC 5905 section 6 for the format, RFC 4656 section 4.1.2 for the
//! error estimate that TWAMP reuses).

/// Seconds from 1900-01-01 (NTP era 0) to 1970-01-01 (Unix epoch).
pub const UNIX_TO_NTP_S: u64 = 2_208_988_800;

/// A 64-bit NTP timestamp: seconds since 1900 and a binary fraction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NtpTimestamp {
    pub seconds: u32,
    pub fraction: u32,
}

impl NtpTimestamp {
    /// From nanoseconds since the Unix epoch (era 0: until 2036; later
    /// times wrap as NTP itself does).
    pub fn from_unix_ns(ns: u64) -> Self {
        let secs = ns / 1_000_000_000 + UNIX_TO_NTP_S;
        let sub = ns % 1_000_000_000;
        // Round to the nearest 2^-32 s; a carry into the seconds is kept.
        let frac = ((sub as u128) << 32) + 500_000_000;
        let frac = frac / 1_000_000_000;
        let (secs, frac) = if frac >> 32 == 1 {
            (secs + 1, 0)
        } else {
            (secs, frac as u64)
        };
        NtpTimestamp {
            seconds: secs as u32,
            fraction: frac as u32,
        }
    }

    /// Nanoseconds since the Unix epoch, assuming era 0; `None` for times
    /// before 1970.
    pub fn to_unix_ns(self) -> Option<u64> {
        let secs = (self.seconds as u64).checked_sub(UNIX_TO_NTP_S)?;
        let sub = ((self.fraction as u128 * 1_000_000_000) + (1 << 31)) >> 32;
        Some(secs * 1_000_000_000 + sub as u64)
    }

    /// The 64-bit fixed-point value (seconds << 32 | fraction).
    pub fn to_u64(self) -> u64 {
        ((self.seconds as u64) << 32) | self.fraction as u64
    }

    /// `self - earlier` in nanoseconds (rounded), across an NTP era
    /// boundary: the difference is read as a signed 32.32 number, so any
    /// two stamps within 68 years of each other compare right. A far
    /// clock's stamps are only ever compared with each other this way.
    pub fn ns_since(self, earlier: NtpTimestamp) -> i64 {
        let d = self.to_u64().wrapping_sub(earlier.to_u64()) as i64;
        ((d as i128 * 1_000_000_000 + (1 << 31)) >> 32) as i64
    }

    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.seconds.to_be_bytes());
        b[4..].copy_from_slice(&self.fraction.to_be_bytes());
        b
    }

    pub fn from_bytes(b: [u8; 8]) -> Self {
        NtpTimestamp {
            seconds: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            fraction: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }
}

/// The 16-bit error estimate: S (clock synchronised to UTC), Z (must be
/// zero in TWAMP unauthenticated mode), then Multiplier x 2^(Scale - 32) s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorEstimate {
    pub synchronized: bool,
    pub scale: u8,
    pub multiplier: u8,
}

impl ErrorEstimate {
    /// The smallest estimate not below `error_ns` (multiplier 1-255, scale
    /// up to 63); saturates at the largest expressible error.
    pub fn from_ns(error_ns: u64, synchronized: bool) -> Self {
        // error in units of 2^-32 s, rounded up.
        let units = ((error_ns as u128) << 32).div_ceil(1_000_000_000).max(1);
        let mut scale = 0u8;
        let mut mult = units;
        while mult > 255 && scale < 63 {
            scale += 1;
            mult = units.div_ceil(1u128 << scale);
        }
        ErrorEstimate {
            synchronized,
            scale,
            multiplier: mult.min(255) as u8,
        }
    }

    /// The error in nanoseconds (rounded up).
    pub fn to_ns(self) -> u128 {
        ((self.multiplier as u128) << self.scale)
            .saturating_mul(1_000_000_000)
            .div_ceil(1 << 32)
    }

    pub fn to_u16(self) -> u16 {
        ((self.synchronized as u16) << 15)
            | (((self.scale & 0x3f) as u16) << 8)
            | self.multiplier as u16
    }

    /// Parses the field; the Z bit is ignored (RFC 5357 receivers must).
    pub fn from_u16(v: u16) -> Self {
        ErrorEstimate {
            synchronized: v & 0x8000 != 0,
            scale: ((v >> 8) & 0x3f) as u8,
            multiplier: (v & 0xff) as u8,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_epoch_and_half_seconds_by_hand() {
        let t = NtpTimestamp::from_unix_ns(0);
        assert_eq!(t.seconds, 0x83AA_7E80); // 2 208 988 800
        assert_eq!(t.fraction, 0);
        let t = NtpTimestamp::from_unix_ns(1_500_000_000);
        assert_eq!(t.seconds, 0x83AA_7E81);
        assert_eq!(t.fraction, 0x8000_0000);
        assert_eq!(t.to_bytes(), [0x83, 0xAA, 0x7E, 0x81, 0x80, 0, 0, 0]);
        assert_eq!(NtpTimestamp::from_bytes(t.to_bytes()), t);
        // Before 1970 has no Unix time.
        assert_eq!(
            NtpTimestamp {
                seconds: 5,
                fraction: 0
            }
            .to_unix_ns(),
            None
        );
        // 999 999 999.7 ns rounds up into the next second.
        let t = NtpTimestamp::from_unix_ns(999_999_999);
        assert_eq!((t.seconds, t.fraction), (0x83AA_7E80, 0xFFFF_FFFC));
    }

    #[test]
    fn ns_round_trip_within_a_quarter_ns() {
        for ns in [0u64, 1, 999, 123_456_789, 1_700_000_000_123_456_789] {
            let back = NtpTimestamp::from_unix_ns(ns).to_unix_ns().unwrap();
            assert!(back.abs_diff(ns) <= 1, "{ns} -> {back}");
        }
    }

    /// Differences by hand: half a second of fraction; 1.25 s across the
    /// 2036 era boundary (0xFFFFFFFF.0 to 0.0x40000000) and back.
    #[test]
    fn differences_cross_the_era_boundary() {
        let t = |seconds, fraction| NtpTimestamp { seconds, fraction };
        assert_eq!(t(7, 0x8000_0000).ns_since(t(7, 0)), 500_000_000);
        assert_eq!(t(0, 0x4000_0000).ns_since(t(0xFFFF_FFFF, 0)), 1_250_000_000);
        assert_eq!(
            t(0xFFFF_FFFF, 0).ns_since(t(0, 0x4000_0000)),
            -1_250_000_000
        );
        // One unit (2^-32 s = 0.233 ns) rounds to 0, three to 1 ns.
        assert_eq!(t(9, 1).ns_since(t(9, 0)), 0);
        assert_eq!(t(9, 3).ns_since(t(9, 0)), 1);
    }

    /// 1 us = 4294.97 units of 2^-32 s: scale 5 gives 134.2, rounded up to
    /// 135 (1.0058 us); synchronised: 0x8000 | 5 << 8 | 135 = 0x8587.
    #[test]
    fn error_estimate_by_hand() {
        let e = ErrorEstimate::from_ns(1_000, true);
        assert_eq!((e.scale, e.multiplier), (5, 135));
        assert_eq!(e.to_u16(), 0x8587);
        assert_eq!(ErrorEstimate::from_u16(0x8587), e);
        assert_eq!(e.to_ns(), 1006);
        // Z bit set by a peer is ignored.
        assert_eq!(ErrorEstimate::from_u16(0xC587), e);
        // Never zero: the smallest error is one unit.
        assert_eq!(ErrorEstimate::from_ns(0, false).multiplier, 1);
    }
}
