//! Timestamps and human durations, the way kube-apiserver prints them.
//!
//! Tables show ages (`5m`, `2d3h`) computed against a clock the caller passes in; this crate
//! never reads the system clock. Timestamps are RFC 3339 strings (`metav1.Time`, seconds
//! precision) or their microsecond variant (`metav1.MicroTime`). Arithmetic is done in
//! nanoseconds and differences saturate to Go's `time.Duration` range, as `time.Since` does,
//! so even the zero time (`0001-01-01T00:00:00Z`) yields the same text as upstream.

use std::time::{SystemTime, UNIX_EPOCH};

use apimachinery::time;

const NANOS_PER_SECOND: i128 = 1_000_000_000;

/// An instant as nanoseconds since the Unix epoch (negative before 1970).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Instant(i128);

impl Instant {
    /// The instant `seconds` (and `nanos`) after the Unix epoch.
    pub fn from_unix(seconds: i64, nanos: u32) -> Instant {
        Instant(i128::from(seconds) * NANOS_PER_SECOND + i128::from(nanos))
    }

    /// Converts a wall-clock reading; times before 1970 work too.
    pub fn from_system_time(t: SystemTime) -> Instant {
        match t.duration_since(UNIX_EPOCH) {
            Ok(d) => Instant(d.as_nanos() as i128),
            Err(e) => Instant(-(e.duration().as_nanos() as i128)),
        }
    }

    /// Whole seconds since the Unix epoch (rounded toward negative infinity).
    pub fn unix_seconds(self) -> i64 {
        self.0.div_euclid(NANOS_PER_SECOND) as i64
    }

    /// `self - earlier` as a Go `time.Duration` (nanoseconds), saturating like `time.Sub`.
    pub fn since(self, earlier: Instant) -> i64 {
        let d = self.0 - earlier.0;
        d.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
    }
}

/// Go's `duration.HumanDuration`: about two significant figures (`45s`, `3m20s`, `5h`,
/// `2d3h`, `400d`, `3y20d`, `12y`). `nanos` is a duration in nanoseconds; a clock skew of
/// under two seconds prints `0s`, more prints `<invalid>`.
pub fn human_duration(nanos: i64) -> String {
    const SECOND: i64 = 1_000_000_000;
    const MINUTE: i64 = 60 * SECOND;
    const HOUR: i64 = 60 * MINUTE;
    let seconds = nanos / SECOND;
    if seconds < -1 {
        return "<invalid>".to_string();
    }
    if seconds < 0 {
        return "0s".to_string();
    }
    if seconds < 60 * 2 {
        return format!("{seconds}s");
    }
    let minutes = nanos / MINUTE;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 60 * 3 {
        return format!("{minutes}m");
    }
    let hours = nanos / HOUR;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Parses an RFC 3339 timestamp as Go's `time.Parse(time.RFC3339, s)` accepts it
/// (`apimachinery::time::parse_rfc3339`).
pub fn parse_rfc3339(s: &str) -> Option<Instant> {
    time::parse_rfc3339(s).map(|t| Instant(t.as_nanosecond()))
}

/// Formats an instant as Go's `t.UTC().Format(time.RFC3339)`: whole seconds, `Z` suffix.
pub fn format_rfc3339_utc(t: Instant) -> String {
    time::format_unix_seconds(t.unix_seconds())
}

/// The zero `metav1.Time` (`0001-01-01T00:00:00Z`), which Go prints for unset timestamps.
pub fn zero_time() -> Instant {
    Instant::from_unix(ZERO_TIME_SECONDS, 0)
}

/// Unix seconds of `0001-01-01T00:00:00Z`.
const ZERO_TIME_SECONDS: i64 = -62_135_596_800;

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn human_duration_matches_upstream_table() {
        let cases: &[(i64, &str)] = &[
            (-3 * S, "<invalid>"),
            (-2 * S, "<invalid>"),
            (-S - S / 2, "0s"),
            (0, "0s"),
            (S, "1s"),
            (59 * S, "59s"),
            (119 * S, "119s"),
            (120 * S, "2m"),
            (200 * S, "3m20s"),
            (9 * 60 * S + 59 * S, "9m59s"),
            (10 * 60 * S + 30 * S, "10m"),
            (179 * 60 * S, "179m"),
            (180 * 60 * S, "3h"),
            (3 * 3600 * S + 5 * 60 * S, "3h5m"),
            (8 * 3600 * S + 59 * 60 * S, "8h"),
            (47 * 3600 * S, "47h"),
            (48 * 3600 * S, "2d"),
            (51 * 3600 * S, "2d3h"),
            (8 * 24 * 3600 * S, "8d"),
            (729 * 24 * 3600 * S, "729d"),
            (730 * 24 * 3600 * S, "2y"),
            (750 * 24 * 3600 * S, "2y20d"),
            (8 * 365 * 24 * 3600 * S, "8y"),
            (i64::MAX, "292y"),
        ];
        for (d, want) in cases {
            assert_eq!(human_duration(*d), *want, "duration {d}ns");
        }
    }

    #[test]
    fn parses_rfc3339_with_fraction_and_offset() {
        let base = parse_rfc3339("2024-03-01T12:00:00Z").unwrap();
        assert_eq!(base.unix_seconds(), 1_709_294_400);
        let micro = parse_rfc3339("2024-03-01T12:00:00.250000Z").unwrap();
        assert_eq!(micro.since(base), S / 4);
        let offset = parse_rfc3339("2024-03-01T14:00:00+02:00").unwrap();
        assert_eq!(offset, base);
        let before_epoch = parse_rfc3339("1969-12-31T23:59:59.5Z").unwrap();
        assert_eq!(before_epoch.since(Instant::from_unix(0, 0)), -S / 2);
    }

    #[test]
    fn rejects_malformed_timestamps() {
        for bad in [
            "",
            "2024-03-01",
            "2024-03-01 12:00:00Z",
            "2024-02-30T12:00:00Z",
            "2024-03-01T24:00:00Z",
            "2024-03-01T12:00:00",
            "2024-03-01T12:00:00.Z",
            "2024-03-01T12:00:00+0200",
            "null",
        ] {
            assert!(parse_rfc3339(bad).is_none(), "{bad:?} parsed");
        }
    }

    #[test]
    fn formats_utc_whole_seconds_and_the_zero_time() {
        let t = parse_rfc3339("2024-03-01T14:00:00.9+02:00").unwrap();
        assert_eq!(format_rfc3339_utc(t), "2024-03-01T12:00:00Z");
        assert_eq!(format_rfc3339_utc(zero_time()), "0001-01-01T00:00:00Z");
    }

    #[test]
    fn differences_saturate_like_go_durations() {
        let now = parse_rfc3339("2024-03-01T12:00:00Z").unwrap();
        assert_eq!(now.since(zero_time()), i64::MAX);
        assert_eq!(human_duration(now.since(zero_time())), "292y");
    }
}
