//! The text forms of `meta.v1.Time`, `MicroTime` and `Duration`, both ways, through
//! `apimachinery::time` (the one implementation of Go's formats).
//!
//! Go writes `Time` as RFC 3339 in UTC with second precision (`2024-05-01T12:00:00Z`), `MicroTime`
//! with six fraction digits (`2024-05-01T12:00:00.123456Z`), and `Duration` as
//! `time.Duration.String()` (`1h0m0s`, `1.5s`, `300ms`, `0s`). Years outside 0000–9999 cannot be
//! written by Go's JSON encoder and are rejected here too.

use apimachinery::time::{self, jiff::Timestamp};

/// Seconds from 0000-01-01T00:00:00Z to the Unix epoch, and from the epoch to 9999-12-31T23:59:59Z.
const MIN_SECONDS: i64 = -62_167_219_200;
const MAX_SECONDS: i64 = 253_402_300_799;

/// RFC 3339 in UTC; `micros` adds six fraction digits. `None` outside years 0000–9999.
pub(crate) fn format_time(seconds: i64, nanos: i32, micros: bool) -> Option<String> {
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return None;
    }
    let t = Timestamp::new(seconds, nanos.clamp(0, 999_999_999)).ok()?;
    Some(if micros {
        time::format_micro_time(t)
    } else {
        time::format_time(t)
    })
}

/// Parses RFC 3339 (`2024-05-01T12:00:00Z`, `...T12:00:00.5+02:00`) into (seconds, nanos) UTC.
pub(crate) fn parse_time(text: &str) -> Option<(i64, i32)> {
    let t = time::parse_rfc3339(text)?;
    Some((t.as_second(), t.subsec_nanosecond()))
}

/// Go's `time.Duration.String()` of a nanosecond count.
pub(crate) fn format_duration(nanos: i64) -> String {
    time::format_go_duration(nanos)
}

/// Parses a Go duration string (`1h30m`, `1.5s`, `-300ms`, `0`) into nanoseconds.
pub(crate) fn parse_duration(text: &str) -> Option<i64> {
    time::parse_go_duration(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_format_in_utc_with_second_precision() {
        assert_eq!(
            format_time(0, 0, false).as_deref(),
            Some("1970-01-01T00:00:00Z")
        );
        assert_eq!(
            format_time(1_714_564_800, 999_999_999, false).as_deref(),
            Some("2024-05-01T12:00:00Z")
        );
        assert_eq!(
            format_time(951_782_400, 0, false).as_deref(),
            Some("2000-02-29T00:00:00Z")
        );
    }

    #[test]
    fn micro_times_keep_six_fraction_digits() {
        assert_eq!(
            format_time(1_714_564_800, 123_456_789, true).as_deref(),
            Some("2024-05-01T12:00:00.123456Z")
        );
        assert_eq!(
            format_time(1_714_564_800, 0, true).as_deref(),
            Some("2024-05-01T12:00:00.000000Z")
        );
        // Protobuf's nanos count forward even before the epoch.
        assert_eq!(
            format_time(-1, 500_000_000, true).as_deref(),
            Some("1969-12-31T23:59:59.500000Z")
        );
    }

    #[test]
    fn times_outside_four_digit_years_are_rejected() {
        assert_eq!(format_time(MAX_SECONDS + 1, 0, false), None);
        assert_eq!(format_time(i64::MIN, 0, false), None);
        assert_eq!(
            format_time(MIN_SECONDS, 0, false).as_deref(),
            Some("0000-01-01T00:00:00Z")
        );
    }

    #[test]
    fn rfc3339_with_offsets_and_fractions_parses_to_utc() {
        assert_eq!(parse_time("2024-05-01T12:00:00Z"), Some((1_714_564_800, 0)));
        assert_eq!(
            parse_time("2024-05-01T14:00:00.5+02:00"),
            Some((1_714_564_800, 500_000_000))
        );
        assert_eq!(parse_time("2024-02-30T00:00:00Z"), None);
        assert_eq!(parse_time("2024-05-01 12:00:00Z"), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn durations_format_like_go() {
        let cases = [
            (0, "0s"),
            (1, "1ns"),
            (1_500, "1.5µs"),
            (300_000_000, "300ms"),
            (1_500_000_000, "1.5s"),
            (61_000_000_000, "1m1s"),
            (3_600_000_000_000, "1h0m0s"),
            (-90_000_000_000, "-1m30s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
        ];
        for (nanos, text) in cases {
            assert_eq!(format_duration(nanos), text);
            assert_eq!(parse_duration(text), Some(nanos), "{text}");
        }
    }

    #[test]
    fn bad_durations_do_not_parse() {
        for text in ["", "1", "1x", "h", "-", "1.s.", "99999999999h"] {
            assert_eq!(parse_duration(text), None, "{text}");
        }
        assert_eq!(parse_duration("1h30m"), Some(5_400_000_000_000));
    }
}
