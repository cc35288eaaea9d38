//! FILETIME: a count of 100 ns intervals since 1601-01-01 UTC (MS-DTYP 2.3.3, MS-FSCC 2.1.1),
//! and its conversion to and from Unix time. Every conversion saturates; none panics.

/// 100 ns ticks per second.
pub const TICKS_PER_SEC: u64 = 10_000_000;
/// FILETIME of 1970-01-01T00:00:00Z.
pub const UNIX_EPOCH: u64 = 116_444_736_000_000_000;
/// Same as [`UNIX_EPOCH`], under the name callers outside this module tend to reach for.
pub const FILETIME_UNIX_EPOCH: u64 = UNIX_EPOCH;
/// Seconds between 1601-01-01 and 1970-01-01.
const EPOCH_DIFF_SECS: i64 = 11_644_473_600;
/// The largest time a server reports: FILETIME is a signed LARGE_INTEGER on the wire, and the
/// negative values are SET_INFO sentinels, so a real time never exceeds `i64::MAX`.
pub const MAX: u64 = i64::MAX as u64;

/// SET_INFO FileBasicInformation: 0 means "leave this time alone" (MS-FSCC 2.4.7).
pub const NO_CHANGE: u64 = 0;
/// SET_INFO FileBasicInformation: -1 means "stop updating this time for the rest of this handle's
/// life" (MS-FSCC 2.4.7).
pub const FREEZE: u64 = u64::MAX;
/// SET_INFO FileBasicInformation: -2 means "resume updating this time on this handle"
/// (MS-FSCC 2.4.7).
pub const UNFREEZE: u64 = u64::MAX - 1;

/// What a time field of a SET_INFO FileBasicInformation asks for (MS-FSCC 2.4.7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetTime {
    /// 0: keep the current value.
    NoChange,
    /// -1: keep it now and stop automatic updates through this handle.
    Freeze,
    /// -2: resume automatic updates through this handle.
    Unfreeze,
    /// A real time to store.
    Set(u64),
}

impl SetTime {
    /// Classifies a wire value. `None` for values below -2, which MS-FSA 2.1.5.15.2 fails with
    /// STATUS_INVALID_PARAMETER.
    pub fn from_wire(v: u64) -> Option<Self> {
        match v {
            NO_CHANGE => Some(Self::NoChange),
            FREEZE => Some(Self::Freeze),
            UNFREEZE => Some(Self::Unfreeze),
            v if v <= MAX => Some(Self::Set(v)),
            _ => None,
        }
    }
}

/// FILETIME for a Unix time. Times before 1601 give 0 and times past the representable range
/// give [`MAX`]; `nsec` above 999_999_999 is clamped (it would only come from a broken stat).
pub fn from_unix(sec: i64, nsec: u32) -> u64 {
    let nsec = u64::from(nsec.min(999_999_999));
    let Some(since_1601) = sec.checked_add(EPOCH_DIFF_SECS) else {
        return if sec < 0 { 0 } else { MAX };
    };
    let Ok(secs) = u64::try_from(since_1601) else {
        return 0;
    };
    secs.checked_mul(TICKS_PER_SEC)
        .and_then(|t| t.checked_add(nsec / 100))
        .map_or(MAX, |t| t.min(MAX))
}

/// Unix (seconds, nanoseconds) for a FILETIME. Every u64 maps (u64::MAX / 10^7 seconds fits an
/// i64), so this cannot fail; sub-100 ns precision is simply absent.
pub fn to_unix(ft: u64) -> (i64, u32) {
    let secs = ft / TICKS_PER_SEC;
    // Both casts are lossless: secs < 2^41 and the remainder * 100 < 10^9.
    let nsec = ((ft % TICKS_PER_SEC) * 100) as u32;
    (secs as i64 - EPOCH_DIFF_SECS, nsec)
}

/// FILETIME for a `std::time::SystemTime`, saturating like [`from_unix`].
pub fn from_system_time(t: std::time::SystemTime) -> u64 {
    match t.duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => from_unix(
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            d.subsec_nanos(),
        ),
        Err(e) => {
            let d = e.duration();
            let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
            if d.subsec_nanos() == 0 {
                from_unix(-secs, 0)
            } else {
                from_unix(
                    secs.saturating_neg().saturating_sub(1),
                    1_000_000_000 - d.subsec_nanos(),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_epoch_is_the_documented_constant() {
        assert_eq!(from_unix(0, 0), 116_444_736_000_000_000);
        assert_eq!(to_unix(UNIX_EPOCH), (0, 0));
    }

    #[test]
    fn known_dates() {
        // 2000-01-01T00:00:00Z = 946684800 Unix seconds; 1601-01-01 is FILETIME 0.
        assert_eq!(
            from_unix(946_684_800, 0),
            UNIX_EPOCH + 946_684_800 * TICKS_PER_SEC
        );
        assert_eq!(from_unix(-EPOCH_DIFF_SECS, 0), 0);
        assert_eq!(to_unix(0), (-11_644_473_600, 0));
        assert_eq!(
            from_unix(1, 123_456_789),
            UNIX_EPOCH + TICKS_PER_SEC + 1_234_567
        );
        assert_eq!(
            to_unix(UNIX_EPOCH + TICKS_PER_SEC + 1_234_567),
            (1, 123_456_700)
        );
    }

    #[test]
    fn saturates_at_both_ends() {
        assert_eq!(from_unix(i64::MIN, 0), 0);
        assert_eq!(from_unix(-EPOCH_DIFF_SECS - 1, 999_999_999), 0);
        assert_eq!(from_unix(i64::MAX, u32::MAX), MAX);
        assert_eq!(from_unix(i64::MAX - EPOCH_DIFF_SECS, 0), MAX);
        // Every wire value converts without panicking, sentinels included.
        for v in [0, 1, MAX, UNFREEZE, FREEZE] {
            let (s, n) = to_unix(v);
            assert!(n < 1_000_000_000);
            assert!(s >= -EPOCH_DIFF_SECS);
        }
    }

    #[test]
    fn round_trip_keeps_100ns_precision() {
        for (s, n) in [
            (0i64, 0u32),
            (1_700_000_000, 999_999_900),
            (-1, 500),
            (-86_400, 0),
        ] {
            let (s2, n2) = to_unix(from_unix(s, n));
            assert_eq!((s2, n2), (s, n - n % 100));
        }
    }

    #[test]
    fn set_time_sentinels() {
        assert_eq!(SetTime::from_wire(0), Some(SetTime::NoChange));
        assert_eq!(SetTime::from_wire(u64::MAX), Some(SetTime::Freeze));
        assert_eq!(SetTime::from_wire(u64::MAX - 1), Some(SetTime::Unfreeze));
        assert_eq!(SetTime::from_wire(u64::MAX - 2), None);
        assert_eq!(SetTime::from_wire(1 << 63), None);
        assert_eq!(
            SetTime::from_wire(UNIX_EPOCH),
            Some(SetTime::Set(UNIX_EPOCH))
        );
    }

    #[test]
    fn system_time_before_and_after_epoch() {
        use std::time::{Duration, UNIX_EPOCH as E};
        assert_eq!(from_system_time(E), UNIX_EPOCH);
        assert_eq!(
            from_system_time(E + Duration::new(1, 500)),
            UNIX_EPOCH + TICKS_PER_SEC + 5
        );
        assert_eq!(
            from_system_time(E - Duration::new(1, 0)),
            UNIX_EPOCH - TICKS_PER_SEC
        );
        assert_eq!(from_system_time(E - Duration::new(0, 100)), UNIX_EPOCH - 1);
    }
}
