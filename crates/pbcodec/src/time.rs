//! The text forms of `meta.v1.Time`, `MicroTime` and `Duration`, both ways, without a date library.
//!
//! Go writes `Time` as RFC 3339 in UTC with second precision (`2024-05-01T12:00:00Z`), `MicroTime`
//! with six fraction digits (`2024-05-01T12:00:00.123456Z`), and `Duration` as
//! `time.Duration.String()` (`1h0m0s`, `1.5s`, `300ms`, `0s`). Years outside 0000–9999 cannot be
//! written by Go's JSON encoder and are rejected here too.

/// Seconds from 0000-01-01T00:00:00Z to the Unix epoch, and from the epoch to 9999-12-31T23:59:59Z.
const MIN_SECONDS: i64 = -62_167_219_200;
const MAX_SECONDS: i64 = 253_402_300_799;

/// Days since 1970-01-01 of a proleptic Gregorian date (Hinnant's days-from-civil).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day count since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// RFC 3339 in UTC; `micros` adds six fraction digits. `None` outside years 0000–9999.
pub(crate) fn format_time(seconds: i64, nanos: i32, micros: bool) -> Option<String> {
    if !(MIN_SECONDS..=MAX_SECONDS).contains(&seconds) {
        return None;
    }
    let (days, secs) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    let (y, mo, d) = civil_from_days(days);
    let (h, mi, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}");
    if micros {
        let us = nanos.clamp(0, 999_999_999) / 1000;
        out.push_str(&format!(".{us:06}"));
    }
    out.push('Z');
    Some(out)
}

fn digits(s: &str) -> Option<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// Parses RFC 3339 (`2024-05-01T12:00:00Z`, `...T12:00:00.5+02:00`) into (seconds, nanos) UTC.
pub(crate) fn parse_time(text: &str) -> Option<(i64, i32)> {
    let b = text.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let year = digits(text.get(0..4)?)?;
    let month = digits(text.get(5..7)?)?;
    let day = digits(text.get(8..10)?)?;
    let (hour, minute, second) = (
        digits(text.get(11..13)?)?,
        digits(text.get(14..16)?)?,
        digits(text.get(17..19)?)?,
    );
    let mut rest = text.get(19..)?;
    let mut nanos = 0i32;
    if let Some(frac) = rest.strip_prefix('.') {
        let end = frac
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(frac.len());
        if end == 0 || end > 9 {
            return None;
        }
        let padded = format!("{:0<9}", &frac[..end]);
        nanos = padded.parse().ok()?;
        rest = &frac[end..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ => {
            let sign = match rest.as_bytes().first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            if rest.len() != 6 || rest.as_bytes()[3] != b':' {
                return None;
            }
            sign * (digits(&rest[1..3])? * 3600 + digits(&rest[4..6])? * 60)
        }
    };
    let month_days = [
        31,
        28 + i64::from(is_leap(year)),
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    if !(1..=12).contains(&month) || day < 1 || day > month_days[(month - 1) as usize] {
        return None;
    }
    if hour > 23 || minute > 59 || second > 59 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second;
    Some((seconds - offset, nanos))
}

fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// `fraction` of `v / 10^prec` with trailing zeros (and the dot) trimmed, like Go.
fn fraction(v: u64, prec: u32) -> String {
    let scale = 10u64.pow(prec);
    let frac = v % scale;
    if frac == 0 {
        return String::new();
    }
    let text = format!(".{frac:0width$}", width = prec as usize);
    text.trim_end_matches('0').to_string()
}

/// Go's `time.Duration.String()` of a nanosecond count.
pub(crate) fn format_duration(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_string();
    }
    let sign = if nanos < 0 { "-" } else { "" };
    let u = nanos.unsigned_abs();
    if u < 1_000 {
        return format!("{sign}{u}ns");
    }
    if u < 1_000_000 {
        return format!("{sign}{}{}µs", u / 1_000, fraction(u, 3));
    }
    if u < 1_000_000_000 {
        return format!("{sign}{}{}ms", u / 1_000_000, fraction(u, 6));
    }
    let secs = u / 1_000_000_000;
    let mut out = format!("{}{}s", secs % 60, fraction(u, 9));
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

/// Parses a Go duration string (`1h30m`, `1.5s`, `-300ms`, `0`) into nanoseconds.
pub(crate) fn parse_duration(text: &str) -> Option<i64> {
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
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(num_end);
        let unit_end = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_end);
        let scale: i128 = match unit {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        let (whole, frac) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && frac.is_empty() {
            return None;
        }
        let whole: i128 = if whole.is_empty() {
            0
        } else {
            whole.parse().ok()?
        };
        total = total.checked_add(whole.checked_mul(scale)?)?;
        let mut place = scale;
        for d in frac.bytes() {
            if !d.is_ascii_digit() {
                return None;
            }
            place /= 10;
            total += i128::from(d - b'0') * place;
        }
        rest = tail;
    }
    let total = if negative { -total } else { total };
    i64::try_from(total).ok()
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
