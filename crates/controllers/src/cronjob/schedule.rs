//! Cron schedules as upstream's CronJob controller reads them (`robfig/cron` v3
//! `ParseStandard`): five fields (minute, hour, day of month, month, day of week) with `*`,
//! `?`, ranges, steps, lists and month/day names, the descriptors `@yearly`, `@annually`,
//! `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly` and `@every <duration>`.
//!
//! Day of month and day of week combine as in cron: if either field is `*` (unstepped) both
//! must match, otherwise either may. Times are computed in the CronJob's time zone (jiff with
//! the IANA database compiled in); a wall time skipped by a DST jump runs at the first time
//! after it, as Go's `time.Date` normalises. `TZ=`/`CRON_TZ=` prefixes are refused: upstream
//! requires `spec.timeZone`.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use k8s_openapi::jiff::civil::Date;
use k8s_openapi::jiff::tz::TimeZone;

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Schedule {
    Cron(Fields),
    /// `@every <duration>`: a constant delay, whole seconds, at least one.
    Every(Duration),
}

/// The bit sets of a five-field schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fields {
    minutes: u64,
    hours: u64,
    dom: u64,
    months: u64,
    dow: u64,
    dom_star: bool,
    dow_star: bool,
}

struct Bounds {
    min: u32,
    max: u32,
    names: &'static [&'static str],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &["sun", "mon", "tue", "wed", "thu", "fri", "sat"],
};

/// Parses a schedule; the error says why it cannot be used.
pub fn parse(spec: &str) -> Result<Schedule, String> {
    let spec = spec.trim();
    if spec.contains("TZ") {
        return Err("CRON_TZ or TZ used in schedule is not supported, use spec.timeZone".into());
    }
    let expanded = match spec {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        s if s.starts_with("@every ") => return every(&s["@every ".len()..]),
        s if s.starts_with('@') => return Err(format!("unrecognized descriptor: {s}")),
        s => s,
    };
    let f: Vec<&str> = expanded.split_whitespace().collect();
    if f.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: {spec}",
            f.len()
        ));
    }
    let (dom, dom_star) = field(f[2], &DOM)?;
    let (dow, dow_star) = field(f[4], &DOW)?;
    Ok(Schedule::Cron(Fields {
        minutes: field(f[0], &MINUTES)?.0,
        hours: field(f[1], &HOURS)?.0,
        dom,
        months: field(f[3], &MONTHS)?.0,
        dow,
        dom_star,
        dow_star,
    }))
}

/// A comma-separated field: its bits and whether it is an unstepped `*`/`?`.
fn field(expr: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let mut bits = 0u64;
    let mut star = false;
    for part in expr.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((r, s)) => (
                r,
                Some(s.parse::<u32>().map_err(|_| format!("bad step: {part}"))?),
            ),
            None => (part, None),
        };
        let (lo, hi) = if range == "*" || range == "?" {
            star |= step.is_none_or(|s| s == 1);
            (b.min, b.max)
        } else if let Some((l, h)) = range.split_once('-') {
            (value(l, b)?, value(h, b)?)
        } else {
            let v = value(range, b)?;
            (v, if step.is_some() { b.max } else { v })
        };
        let step = step.unwrap_or(1);
        if lo < b.min || hi > b.max || lo > hi || step == 0 {
            return Err(format!("invalid range: {part}"));
        }
        let mut i = lo;
        while i <= hi {
            bits |= 1 << i;
            i += step;
        }
    }
    Ok((bits, star))
}

fn value(s: &str, b: &Bounds) -> Result<u32, String> {
    let lower = s.to_ascii_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(i as u32 + b.min);
    }
    s.parse::<u32>()
        .map_err(|_| format!("failed to parse int from {s}"))
}

/// Go's duration syntax for `@every` (`1h30m`, `90s`, `1.5h`).
fn every(s: &str) -> Result<Schedule, String> {
    let bad = || format!("failed to parse duration @every {s}");
    let mut total = 0f64;
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let n = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let num: f64 = rest[..n].parse().map_err(|_| bad())?;
        rest = &rest[n..];
        let u = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..u] {
            "h" => 3600.0,
            "m" => 60.0,
            "s" => 1.0,
            "ms" => 1e-3,
            "us" | "µs" => 1e-6,
            "ns" => 1e-9,
            _ => return Err(bad()),
        };
        total += num * scale;
        rest = &rest[u..];
    }
    // robfig rounds down to whole seconds, at least one.
    Ok(Schedule::Every(Duration::from_secs((total as u64).max(1))))
}

impl Fields {
    fn day_matches(&self, d: Date) -> bool {
        let dom = self.dom & (1 << d.day()) != 0;
        let dow = self.dow & (1 << d.weekday().to_sunday_zero_offset()) != 0;
        if self.dom_star || self.dow_star {
            dom && dow
        } else {
            dom || dow
        }
    }
}

impl Schedule {
    /// The first scheduled time strictly after `t` in `tz` (`None` if none within 5 years).
    pub fn next(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let f = match self {
            Schedule::Every(d) => {
                let secs = i64::try_from(d.as_secs()).ok()?;
                return Timestamp::from_second(t.as_second().checked_add(secs)?).ok();
            }
            Schedule::Cron(f) => f,
        };
        let start = t.to_zoned(tz.clone()).datetime();
        let mut date = start.date();
        let (mut h0, mut m0) = (start.hour(), start.minute() + 1);
        for _ in 0..(366 * 5) {
            if f.months & (1 << date.month()) != 0 && f.day_matches(date) {
                for h in h0..24 {
                    if f.hours & (1 << h) == 0 {
                        continue;
                    }
                    let from = if h == h0 { m0 } else { 0 };
                    for m in from..60 {
                        if f.minutes & (1 << m) == 0 {
                            continue;
                        }
                        let civil = date.at(h, m, 0, 0);
                        let z = tz.to_ambiguous_zoned(civil).compatible().ok()?;
                        if z.timestamp() > t {
                            return Some(z.timestamp());
                        }
                    }
                }
            }
            date = date.tomorrow().ok()?;
            (h0, m0) = (0, 0);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn fields_steps_names_and_descriptors_give_the_next_time() {
        let utc = TimeZone::UTC;
        let t = at("2026-11-30T12:34:56Z");
        let next = |s: &str| parse(s).unwrap().next(t, &utc).unwrap().to_string();
        assert_eq!(next("* * * * *"), "2026-11-30T12:35:00Z");
        assert_eq!(next("*/15 * * * *"), "2026-11-30T12:45:00Z");
        assert_eq!(next("@hourly"), "2026-11-30T13:00:00Z");
        assert_eq!(next("@daily"), "2026-12-01T00:00:00Z");
        assert_eq!(next("0 9 * * mon-fri"), "2026-12-01T09:00:00Z");
        assert_eq!(next("30 4 1 jan *"), "2027-01-01T04:30:00Z");
        assert_eq!(next("@every 90s"), "2026-11-30T12:36:26Z");
    }

    #[test]
    fn day_of_month_and_day_of_week_combine_as_in_cron() {
        let utc = TimeZone::UTC;
        // 2026-11-30 is a Monday. Neither is '*': either matches (Friday the 4th comes first).
        let t = at("2026-11-30T12:00:00Z");
        let either = parse("0 0 13 * fri").unwrap().next(t, &utc).unwrap();
        assert_eq!(either.to_string(), "2026-12-04T00:00:00Z");
        // Day of week '*': only the 13th.
        let both = parse("0 0 13 * *").unwrap().next(t, &utc).unwrap();
        assert_eq!(both.to_string(), "2026-12-13T00:00:00Z");
    }

    #[test]
    fn time_zones_shift_the_schedule() {
        let ny = TimeZone::get("America/New_York").unwrap();
        let t = at("2026-11-30T12:00:00Z");
        let next = parse("0 9 * * *").unwrap().next(t, &ny).unwrap();
        assert_eq!(next.to_string(), "2026-11-30T14:00:00Z");
    }

    #[test]
    fn invalid_and_tz_prefixed_schedules_are_refused() {
        assert!(parse("CRON_TZ=UTC * * * * *").is_err());
        assert!(parse("TZ=UTC * * * * *").is_err());
        assert!(parse("* * * *").is_err());
        assert!(parse("61 * * * *").is_err());
        assert!(parse("@fortnightly").is_err());
        assert!(parse("*/0 * * * *").is_err());
    }
}
