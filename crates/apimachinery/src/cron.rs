//! Cron schedules as Kubernetes reads them: `robfig/cron` v3 `ParseStandard`, used both by
//! CronJob validation (its error messages are what a user sees) and by the CronJob controller
//! (the next run times).
//!
//! Five fields (minute, hour, day of month, month, day of week) with `*`, `?`, ranges, steps,
//! lists and month/day names; the descriptors `@yearly`, `@annually`, `@monthly`, `@weekly`,
//! `@daily`, `@midnight`, `@hourly` and `@every <Go duration>`; an optional `TZ=<zone>` or
//! `CRON_TZ=<zone>` prefix (validation refuses it on new objects; the controller honours it on
//! old ones, as upstream's does).
//!
//! Day of month and day of week combine as in cron: if either field has an unstepped `*` both
//! must match, otherwise either may. Times are computed in the schedule's time zone (jiff with
//! the IANA database compiled in); a wall time skipped by a DST jump runs at the first time
//! after it, as Go's `time.Date` normalises. Written here because no maintained crate parses
//! robfig's dialect with its messages (the `cron` crate wants six or seven fields).

use jiff::Timestamp;
use jiff::civil::Date;
use jiff::tz::TimeZone;

/// A parsed schedule.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    kind: Kind,
    /// The `TZ=`/`CRON_TZ=` prefix's zone, if any.
    zone: Option<TimeZone>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Kind {
    Fields(Fields),
    /// `@every <duration>`: a constant delay in whole seconds, at least one.
    Every(i64),
}

/// The bit sets of a five-field schedule.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fields {
    minutes: u64,
    hours: u64,
    dom: u64,
    months: u64,
    dow: u64,
    dom_star: bool,
    dow_star: bool,
}

/// A cron field's bounds and names.
struct Bounds {
    min: u64,
    max: u64,
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

/// `robfig/cron` v3 `ParseStandard`. The error is the library's message.
pub fn parse_standard(spec: &str) -> Result<Schedule, String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    let mut zone = None;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let eq = spec.find('=').unwrap_or(0);
        let Some(i) = spec.find(' ') else {
            let name = &spec[eq + 1..];
            return Err(format!(
                "provided bad location {name}: unknown time zone {name}"
            ));
        };
        let name = &spec[eq + 1..i];
        zone = Some(
            TimeZone::get(name)
                .map_err(|_| format!("provided bad location {name}: unknown time zone {name}"))?,
        );
        spec = spec[i..].trim();
    }
    let expanded = if let Some(desc) = spec.strip_prefix('@') {
        match desc {
            "yearly" | "annually" => "0 0 1 1 *",
            "monthly" => "0 0 1 * *",
            "weekly" => "0 0 * * 0",
            "daily" | "midnight" => "0 0 * * *",
            "hourly" => "0 * * * *",
            d if d.starts_with("every ") => {
                let dur = &spec["@every ".len()..];
                let nanos = crate::time::parse_go_duration(dur).ok_or_else(|| {
                    format!("failed to parse duration {spec}: time: invalid duration {dur:?}")
                })?;
                // robfig rounds down to whole seconds, at least one.
                let secs = (nanos / 1_000_000_000).max(1);
                return Ok(Schedule {
                    kind: Kind::Every(secs),
                    zone,
                });
            }
            _ => return Err(format!("unrecognized descriptor: {spec}")),
        }
    } else {
        spec
    };
    let fields: Vec<&str> = expanded.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    let (minutes, _) = field(fields[0], &MINUTES)?;
    let (hours, _) = field(fields[1], &HOURS)?;
    let (dom, dom_star) = field(fields[2], &DOM)?;
    let (months, _) = field(fields[3], &MONTHS)?;
    let (dow, dow_star) = field(fields[4], &DOW)?;
    Ok(Schedule {
        kind: Kind::Fields(Fields {
            minutes,
            hours,
            dom,
            months,
            dow,
            dom_star,
            dow_star,
        }),
        zone,
    })
}

/// A comma-separated field: its bits and whether a part is an unstepped `*`/`?`.
fn field(field: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let mut bits = 0;
    let mut star = false;
    for expr in field.split(',').filter(|e| !e.is_empty()) {
        let (part, part_star) = range(expr, b)?;
        bits |= part;
        star |= part_star;
    }
    Ok((bits, star))
}

/// `robfig/cron`'s `getRange`: the bits of one part and whether it is a star.
fn range(expr: &str, b: &Bounds) -> Result<(u64, bool), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let mut star = false;
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
        star = true;
        (b.min, b.max)
    } else {
        let start = int_or_name(low_high[0], b)?;
        match low_high.len() {
            1 => (start, start),
            2 => (start, int_or_name(low_high[1], b)?),
            _ => return Err(format!("too many hyphens: {expr}")),
        }
    };
    let step = match range_and_step.len() {
        1 => 1,
        2 => {
            let step = parse_int(range_and_step[1])?;
            // "N/step" means "N-max/step".
            if low_high.len() == 1 {
                end = b.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => return Err(format!("too many slashes: {expr}")),
    };
    if start < b.min {
        return Err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        ));
    }
    if end > b.max {
        return Err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        ));
    }
    if start > end {
        return Err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        ));
    }
    if step == 0 {
        return Err(format!("step of range should be a positive number: {expr}"));
    }
    let mut bits = 0u64;
    let mut i = start;
    while i <= end {
        bits |= 1 << i;
        i += step;
    }
    Ok((bits, star))
}

fn int_or_name(expr: &str, b: &Bounds) -> Result<u64, String> {
    let lower = expr.to_lowercase();
    if let Some(i) = b.names.iter().position(|n| *n == lower) {
        return Ok(i as u64 + b.min);
    }
    parse_int(expr)
}

fn parse_int(expr: &str) -> Result<u64, String> {
    match expr.parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("negative number ({n}) not allowed: {expr}")),
        Ok(n) => Ok(n as u64),
        Err(_) => Err(format!(
            "failed to parse int from {expr}: strconv.Atoi: parsing {expr:?}: invalid syntax"
        )),
    }
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
    /// Whether the schedule names its own time zone (a `TZ=`/`CRON_TZ=` prefix).
    pub fn has_zone(&self) -> bool {
        self.zone.is_some()
    }

    /// The first scheduled time strictly after `t`, in the schedule's own zone or else `tz`
    /// (`None` if none within five years, as for `0 0 30 2 *`).
    pub fn next(&self, t: Timestamp, tz: &TimeZone) -> Option<Timestamp> {
        let tz = self.zone.as_ref().unwrap_or(tz);
        let f = match &self.kind {
            Kind::Every(secs) => {
                return Timestamp::from_second(t.as_second().checked_add(*secs)?).ok();
            }
            Kind::Fields(f) => f,
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

/// Go's `time.LoadLocation` for a CronJob's `spec.timeZone`: the zone, or the error message
/// (`unknown time zone Mars/Olympus`).
pub fn load_location(name: &str) -> Result<TimeZone, String> {
    if name.is_empty() || name == "UTC" {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| format!("unknown time zone {name}"))
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
        let next = |s: &str| {
            parse_standard(s)
                .unwrap()
                .next(t, &utc)
                .unwrap()
                .to_string()
        };
        assert_eq!(next("* * * * *"), "2026-11-30T12:35:00Z");
        assert_eq!(next("*/15 * * * *"), "2026-11-30T12:45:00Z");
        assert_eq!(next("5/15 * * * *"), "2026-11-30T12:35:00Z");
        assert_eq!(next("@hourly"), "2026-11-30T13:00:00Z");
        assert_eq!(next("@daily"), "2026-12-01T00:00:00Z");
        assert_eq!(next("0 9 * * mon-fri"), "2026-12-01T09:00:00Z");
        assert_eq!(next("0 9 * * MON"), "2026-12-07T09:00:00Z");
        assert_eq!(next("30 4 1 jan *"), "2027-01-01T04:30:00Z");
        assert_eq!(next("@every 90s"), "2026-11-30T12:36:26Z");
        assert_eq!(next("@every 1.5s"), "2026-11-30T12:34:57Z");
        assert_eq!(next("@every 10ms"), "2026-11-30T12:34:57Z");
        assert!(
            parse_standard("0 0 30 2 *")
                .unwrap()
                .next(t, &utc)
                .is_none()
        );
    }

    #[test]
    fn day_of_month_and_day_of_week_combine_as_in_cron() {
        let utc = TimeZone::UTC;
        // 2026-11-30 is a Monday. Neither is '*': either matches (Friday the 4th comes first).
        let t = at("2026-11-30T12:00:00Z");
        let either = parse_standard("0 0 13 * fri")
            .unwrap()
            .next(t, &utc)
            .unwrap();
        assert_eq!(either.to_string(), "2026-12-04T00:00:00Z");
        // Day of week '*': only the 13th.
        let both = parse_standard("0 0 13 * *").unwrap().next(t, &utc).unwrap();
        assert_eq!(both.to_string(), "2026-12-13T00:00:00Z");
        // A stepped star is not a star: either matches again.
        let stepped = parse_standard("0 0 13 * */2")
            .unwrap()
            .next(t, &utc)
            .unwrap();
        assert_eq!(stepped.to_string(), "2026-12-01T00:00:00Z");
    }

    #[test]
    fn time_zones_shift_the_schedule() {
        let ny = TimeZone::get("America/New_York").unwrap();
        let t = at("2026-11-30T12:00:00Z");
        let next = parse_standard("0 9 * * *").unwrap().next(t, &ny).unwrap();
        assert_eq!(next.to_string(), "2026-11-30T14:00:00Z");
        // A prefix names the zone itself.
        let prefixed = parse_standard("CRON_TZ=America/New_York 0 9 * * *").unwrap();
        assert!(prefixed.has_zone());
        let next = prefixed.next(t, &TimeZone::UTC).unwrap();
        assert_eq!(next.to_string(), "2026-11-30T14:00:00Z");
        // A wall time skipped by the spring jump runs right after it.
        let t = at("2027-03-14T06:00:00Z");
        let next = parse_standard("30 2 * * *").unwrap().next(t, &ny).unwrap();
        assert_eq!(next.to_string(), "2027-03-14T07:30:00Z");
    }

    #[test]
    fn bad_schedules_get_robfig_cron_messages() {
        let err = |s: &str| parse_standard(s).unwrap_err();
        assert_eq!(err(""), "empty spec string");
        assert_eq!(err("foo"), "expected exactly 5 fields, found 1: [foo]");
        assert_eq!(
            err("* * * *"),
            "expected exactly 5 fields, found 4: [* * * *]"
        );
        assert_eq!(
            err("61 * * * *"),
            "end of range (61) above maximum (59): 61"
        );
        assert_eq!(
            err("* * 0 * *"),
            "beginning of range (0) below minimum (1): 0"
        );
        assert_eq!(
            err("5-2 * * * *"),
            "beginning of range (5) beyond end of range (2): 5-2"
        );
        assert_eq!(err("1-2-3 * * * *"), "too many hyphens: 1-2-3");
        assert_eq!(err("*/1/2 * * * *"), "too many slashes: */1/2");
        assert_eq!(
            err("*/0 * * * *"),
            "step of range should be a positive number: */0"
        );
        assert_eq!(
            err("-1 * * * *"),
            "failed to parse int from : strconv.Atoi: parsing \"\": invalid syntax"
        );
        assert_eq!(
            err("x * * * *"),
            "failed to parse int from x: strconv.Atoi: parsing \"x\": invalid syntax"
        );
        assert_eq!(err("@often"), "unrecognized descriptor: @often");
        assert_eq!(
            err("@every soon"),
            "failed to parse duration @every soon: time: invalid duration \"soon\""
        );
        assert_eq!(
            err("TZ=Mars/Olympus * * * * *"),
            "provided bad location Mars/Olympus: unknown time zone Mars/Olympus"
        );
    }

    #[test]
    fn time_zones_load_from_the_iana_database() {
        assert!(load_location("Europe/Berlin").is_ok());
        assert!(load_location("UTC").is_ok());
        assert_eq!(
            load_location("Mars/Olympus").unwrap_err(),
            "unknown time zone Mars/Olympus"
        );
    }
}
