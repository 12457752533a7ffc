//! Time as the Kubernetes API writes it: RFC 3339 timestamps and Go durations.
//!
//! Timestamps are [`jiff::Timestamp`]s. Go's JSON forms are narrower than what jiff reads
//! (`metav1.Time` is `time.Parse(time.RFC3339, s)`: a `T`, seconds, an optional fraction, then
//! `Z` or `±HH:MM`), so [`parse_rfc3339`] checks Go's shape before jiff does the calendar. The
//! writers are Go's: `metav1.Time` in UTC with whole seconds, `metav1.MicroTime` with six
//! fraction digits.
//!
//! Durations are Go's `time.Duration` text (`1h0m0s`, `1.5s`, `300ms`), which jiff's formats
//! do not cover (Go puts a fraction on any unit and prints `0s`, `1h0m0s`), so the grammar of
//! `time.ParseDuration` and `Duration.String` is written here, once, and checked with the
//! examples of Go's own tests.

use jiff::Timestamp;
use jiff::civil::DateTime;
use jiff::tz::Offset;

pub use jiff;

/// Parses RFC 3339 as Go's `time.Parse(time.RFC3339, s)` accepts it: `YYYY-MM-DDTHH:MM:SS`,
/// an optional fraction (`.` or `,`, up to nine digits kept), then `Z` or `±HH:MM`. A lower-case
/// `t` or `z` is accepted as Go does.
pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !matches!(b[10], b'T' | b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i32> {
        let part = &b[r];
        part.iter().all(u8::is_ascii_digit).then(|| {
            part.iter()
                .fold(0i32, |acc, d| acc * 10 + i32::from(d - b'0'))
        })
    };
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &b[19..];
    let mut nanos: i32 = 0;
    if let [b'.' | b',', tail @ ..] = rest {
        let n = tail.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return None;
        }
        for (i, d) in tail[..n].iter().enumerate() {
            if i < 9 {
                nanos = nanos * 10 + i32::from(d - b'0');
            }
        }
        for _ in n..9 {
            nanos *= 10;
        }
        rest = &tail[n..];
    }
    let offset_seconds = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let digit = |c: &u8| c.is_ascii_digit().then(|| i32::from(c - b'0'));
            let h = digit(h1)? * 10 + digit(h2)?;
            let m = digit(m1)? * 10 + digit(m2)?;
            if h > 23 || m > 59 {
                return None;
            }
            let off = h * 3600 + m * 60;
            if *sign == b'-' { -off } else { off }
        }
        _ => return None,
    };
    let civil = DateTime::new(
        i16::try_from(year).ok()?,
        i8::try_from(month).ok()?,
        i8::try_from(day).ok()?,
        i8::try_from(hour).ok()?,
        i8::try_from(minute).ok()?,
        i8::try_from(second).ok()?,
        nanos,
    )
    .ok()?;
    let offset = Offset::from_seconds(offset_seconds).ok()?;
    offset.to_timestamp(civil).ok()
}

/// Unix seconds of an RFC 3339 timestamp ([`parse_rfc3339`]), the fraction dropped.
pub fn parse_unix_seconds(s: &str) -> Option<i64> {
    parse_rfc3339(s).map(|t| t.as_second())
}

/// `metav1.Time` as Go writes it: UTC, whole seconds (`2024-05-01T12:00:00Z`).
pub fn format_time(t: Timestamp) -> String {
    let dt = Offset::UTC.to_datetime(t);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        dt.year(),
        dt.month(),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

/// `metav1.MicroTime` as Go writes it: UTC, six fraction digits
/// (`2024-05-01T12:00:00.123456Z`).
pub fn format_micro_time(t: Timestamp) -> String {
    let base = format_time(t);
    let micros = Offset::UTC.to_datetime(t).subsec_nanosecond() / 1000;
    format!("{}.{micros:06}Z", &base[..base.len() - 1])
}

/// [`format_time`] of Unix seconds; seconds beyond the representable range (years
/// -9999..=9999) are clamped to it.
pub fn format_unix_seconds(seconds: i64) -> String {
    format_time(timestamp_clamped(seconds, 0))
}

fn timestamp_clamped(seconds: i64, nanos: i32) -> Timestamp {
    let s = seconds.clamp(Timestamp::MIN.as_second(), Timestamp::MAX.as_second());
    Timestamp::new(s, nanos).unwrap_or(if s < 0 {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Go's `time.Duration.String()` of a nanosecond count: `0s`, `300ns`, `1.5µs`, `300ms`,
/// `1.5s`, `1m0s`, `1h0m0s`, `-2m3s`.
pub fn format_go_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}{}µs", u / 1_000, fraction(u % 1_000, 3));
    }
    if u < NANOS_PER_SECOND {
        return format!("{sign}{}{}ms", u / 1_000_000, fraction(u % 1_000_000, 6));
    }
    let secs = u / NANOS_PER_SECOND;
    let mut out = format!("{}{}s", secs % 60, fraction(u % NANOS_PER_SECOND, 9));
    let minutes = secs / 60;
    if minutes > 0 {
        out = format!("{}m{out}", minutes % 60);
        let hours = minutes / 60;
        if hours > 0 {
            out = format!("{hours}h{out}");
        }
    }
    format!("{sign}{out}")
}

/// [`format_go_duration`] of a `std::time::Duration`, saturating at Go's largest duration.
pub fn go_duration(d: std::time::Duration) -> String {
    format_go_duration(i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// `.ddd` of `frac` (a remainder below `10^digits`) with trailing zeros trimmed; empty for 0.
fn fraction(frac: u64, digits: usize) -> String {
    if frac == 0 {
        return String::new();
    }
    let text = format!(".{frac:0digits$}");
    text.trim_end_matches('0').to_string()
}

/// Go's `time.ParseDuration`: an optional sign, then one or more decimal numbers each with a
/// unit (`ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`), as in `300ms`, `-1.5h`, `2h45m`; `0`
/// alone needs no unit. `None` for anything else or beyond ±292 years (Go's range).
pub fn parse_go_duration(text: &str) -> Option<i64> {
    let (negative, mut rest) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    const LIMIT: u64 = 1 << 63;
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let int_len = rest.bytes().take_while(u8::is_ascii_digit).count();
        let mut whole: u64 = 0;
        for d in rest[..int_len].bytes() {
            if whole > (LIMIT - 1) / 10 {
                return None;
            }
            whole = whole * 10 + u64::from(d - b'0');
            if whole > LIMIT {
                return None;
            }
        }
        rest = &rest[int_len..];
        // The fraction as Go's leadingFraction reads it: digits until they would overflow,
        // the rest ignored, applied through float64 as Go does.
        let (mut frac, mut scale, mut frac_len) = (0u64, 1f64, 0);
        if let Some(tail) = rest.strip_prefix('.') {
            rest = tail;
            frac_len = rest.bytes().take_while(u8::is_ascii_digit).count();
            let mut overflow = false;
            for d in rest[..frac_len].bytes() {
                if overflow || frac > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let next = frac * 10 + u64::from(d - b'0');
                if next > LIMIT {
                    overflow = true;
                    continue;
                }
                frac = next;
                scale *= 10.0;
            }
            rest = &rest[frac_len..];
        }
        if int_len == 0 && frac_len == 0 {
            return None;
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u64 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_len..];
        if whole > LIMIT / unit {
            return None;
        }
        let mut v = whole * unit;
        if frac > 0 {
            v += (frac as f64 * (unit as f64 / scale)) as u64;
            if v > LIMIT {
                return None;
            }
        }
        total = total.checked_add(v).filter(|t| *t <= LIMIT)?;
    }
    if !negative && total == LIMIT {
        return None;
    }
    Some(if negative {
        (total as i128).wrapping_neg() as i64
    } else {
        total as i64
    })
}

/// [`parse_go_duration`] for settings that must not be negative (flags, timeouts), with the
/// message a user sees.
pub fn parse_std_duration(text: &str) -> Result<std::time::Duration, String> {
    match parse_go_duration(text) {
        Some(n) if n >= 0 => Ok(std::time::Duration::from_nanos(n as u64)),
        Some(_) => Err(format!("{text:?} is negative")),
        None => Err(format!("time: invalid duration {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: i64, ns: i32) -> Timestamp {
        Timestamp::new(s, ns).unwrap()
    }

    #[test]
    fn times_print_as_go_prints_time_and_micro_time() {
        assert_eq!(format_time(at(0, 0)), "1970-01-01T00:00:00Z");
        assert_eq!(
            format_time(at(1_714_564_800, 999_999_999)),
            "2024-05-01T12:00:00Z"
        );
        assert_eq!(format_time(at(951_782_400, 0)), "2000-02-29T00:00:00Z");
        assert_eq!(format_unix_seconds(1_796_028_878), "2026-11-30T08:54:38Z");
        assert_eq!(
            format_micro_time(at(1_714_564_800, 123_456_789)),
            "2024-05-01T12:00:00.123456Z"
        );
        assert_eq!(
            format_micro_time(at(1_714_564_800, 0)),
            "2024-05-01T12:00:00.000000Z"
        );
        assert_eq!(format_time(at(-1, 0)), "1969-12-31T23:59:59Z");
    }

    #[test]
    fn rfc3339_parses_as_go_time_parse_accepts_it() {
        let t = |s| parse_rfc3339(s).map(|t| (t.as_second(), t.subsec_nanosecond()));
        assert_eq!(t("2026-11-30T08:54:38Z"), Some((1_796_028_878, 0)));
        assert_eq!(
            t("2026-11-30T09:54:38.123+01:00"),
            Some((1_796_028_878, 123_000_000))
        );
        assert_eq!(t("2026-11-30t08:54:38z"), Some((1_796_028_878, 0)));
        assert_eq!(
            t("2026-11-30T08:54:38,5Z"),
            Some((1_796_028_878, 500_000_000))
        );
        assert_eq!(
            t("2026-11-30T08:54:38.1234567891Z"),
            Some((1_796_028_878, 123_456_789))
        );
        assert_eq!(t("0001-01-01T00:00:00Z"), Some((-62_135_596_800, 0)));
        for bad in [
            "yesterday",
            "2026-13-30T08:54:38Z",
            "2026-02-30T08:54:38Z",
            "2026-11-30T24:00:00Z",
            "2026-11-30 08:54:38Z",
            "2026-11-30T08:54:38",
            "2026-11-30T08:54:38.Z",
            "2026-11-30T08:54:38+0100",
            "2026-11-30T08:54:38+24:00",
            "2026-11-30T08:54:38Z ",
            "+2026-11-30T08:54:38Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn durations_print_as_go_duration_string() {
        // Go's time_test.go durationTests.
        for (nanos, text) in [
            (0, "0s"),
            (1, "1ns"),
            (1_100, "1.1µs"),
            (2_200_000, "2.2ms"),
            (3_300_000_000, "3.3s"),
            (4 * 60_000_000_000 + 5_000_000_000, "4m5s"),
            (4 * 60_000_000_000 + 5_001_000_000, "4m5.001s"),
            (
                5 * 3_600_000_000_000 + 6 * 60_000_000_000 + 7_001_000_000,
                "5h6m7.001s",
            ),
            (8 * 60_000_000_000 + 1, "8m0.000000001s"),
            (i64::MAX, "2562047h47m16.854775807s"),
            (i64::MIN, "-2562047h47m16.854775808s"),
            (-1_100, "-1.1µs"),
            (3_600_000_000_000, "1h0m0s"),
        ] {
            assert_eq!(format_go_duration(nanos), text);
        }
        assert_eq!(
            go_duration(std::time::Duration::from_millis(60_500)),
            "1m0.5s"
        );
        assert_eq!(
            go_duration(std::time::Duration::MAX),
            "2562047h47m16.854775807s"
        );
    }

    #[test]
    fn durations_parse_as_go_parse_duration() {
        // Go's time_test.go parseDurationTests.
        for (text, nanos) in [
            ("0", 0),
            ("5s", 5_000_000_000),
            ("30s", 30_000_000_000),
            ("1478s", 1_478_000_000_000),
            ("-5s", -5_000_000_000),
            ("+5s", 5_000_000_000),
            ("-0", 0),
            ("+0", 0),
            ("5.0s", 5_000_000_000),
            ("5.6s", 5_600_000_000),
            ("5.s", 5_000_000_000),
            (".5s", 500_000_000),
            ("1.0s", 1_000_000_000),
            ("1.00s", 1_000_000_000),
            ("1.004s", 1_004_000_000),
            ("100.00100s", 100_001_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12µs", 12_000),
            ("12μs", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14_000_000_000),
            ("15m", 900_000_000_000),
            ("16h", 57_600_000_000_000),
            ("3h30m", 12_600_000_000_000),
            ("10.5s4m", 250_500_000_000),
            ("-2m3.4s", -123_400_000_000),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("39h9m14.425s", 140_954_425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 1_200_000_000_000),
            ("9223372036854775807ns", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
        ] {
            assert_eq!(parse_go_duration(text), Some(nanos), "{text}");
        }
        for bad in [
            "",
            "3",
            "-",
            "s",
            ".",
            "-.",
            ".s",
            "+.s",
            "1d",
            "\u{0}",
            "3000000h",
            "1.2.3s",
            "9223372036854775808ns",
            "1 s",
        ] {
            assert_eq!(parse_go_duration(bad), None, "{bad:?}");
        }
        assert_eq!(
            parse_std_duration("1m0s"),
            Ok(std::time::Duration::from_secs(60))
        );
        assert!(parse_std_duration("-5s").is_err());
        assert!(parse_std_duration("soon").is_err());
    }
}
