//! CronJobs (batch/v1): upstream `SetDefaults_CronJob` (Allow, not suspended, 3 successful
//! and 1 failed job kept) and `ValidateCronJobCreate`/`Update`: the schedule in standard cron
//! syntax (checked as `robfig/cron`'s `ParseStandard` does, with its messages), the time zone,
//! the concurrency policy and the job template.

use apimachinery::field::{ErrorList, FieldError, Path};
use apimachinery::meta;
use serde_json::{Value, json};

use super::gofmt;
use super::jobspec;
use super::podspec;
use super::util::{at, child, default_str, default_value, i64_at, nonnegative, str_at};
use crate::strategy::Strategy;

/// CronJobs.
pub struct CronJobStrategy;

impl Strategy for CronJobStrategy {
    fn default(&self, obj: &mut Value) {
        let Some(spec) = child(obj, "spec") else {
            return;
        };
        default_str(spec, "concurrencyPolicy", "Allow");
        default_value(spec, "suspend", json!(false));
        default_value(spec, "successfulJobsHistoryLimit", json!(3));
        default_value(spec, "failedJobsHistoryLimit", json!(1));
        if let Some(t) = spec
            .pointer_mut("/jobTemplate/spec/template")
            .filter(|t| t.is_object())
        {
            podspec::default_template(t);
        }
    }

    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({});
    }

    fn validate(&self, obj: &Value) -> ErrorList {
        let mut errs = validate_spec(obj, None);
        let name = meta::name(obj);
        // The controller appends an 11-character suffix to name its jobs.
        if name.len() > 52 {
            errs.push(FieldError::invalid(
                "metadata.name",
                json!(name),
                "must be no more than 52 characters",
            ));
        }
        errs
    }

    fn validate_update(&self, new: &Value, old: &Value) -> ErrorList {
        validate_spec(new, Some(old))
    }

    fn warnings(&self, obj: &Value) -> Vec<String> {
        podspec::spec_warnings(
            obj,
            "/spec/jobTemplate/spec/template/spec",
            "spec.jobTemplate.spec.template.spec",
        )
    }
}

/// Upstream `validateCronJobSpec`.
fn validate_spec(obj: &Value, old: Option<&Value>) -> ErrorList {
    let mut errs = ErrorList::new();
    let p = Path::new("spec");
    let null = Value::Null;
    let spec = obj.get("spec").unwrap_or(&null);
    let schedule = str_at(spec, "/schedule");
    let sp = p.child("schedule");
    if schedule.is_empty() {
        errs.push(FieldError::required(&sp, ""));
    } else {
        if let Err(e) = parse_standard(schedule) {
            errs.push(FieldError::invalid(&sp, json!(schedule), e));
        }
        let old_tz = old.is_some_and(|o| str_at(o, "/spec/schedule").contains("TZ"));
        let has_tz_field = at(spec, "/timeZone").is_some();
        if old_tz && schedule.contains("TZ") && has_tz_field {
            errs.push(FieldError::invalid(
                &sp,
                json!(schedule),
                "cannot use both timeZone field and TZ or CRON_TZ in schedule",
            ));
        } else if !old_tz && schedule.contains("TZ") {
            errs.push(FieldError::invalid(
                &sp,
                json!(schedule),
                "cannot use TZ or CRON_TZ in schedule, use timeZone field instead",
            ));
        }
    }
    nonnegative(
        &mut errs,
        &p.child("startingDeadlineSeconds"),
        i64_at(spec, "/startingDeadlineSeconds"),
    );
    let tz = spec.get("timeZone");
    if old.is_none_or(|o| o.pointer("/spec/timeZone") != tz) {
        time_zone(&mut errs, tz.filter(|t| !t.is_null()), &p.child("timeZone"));
    }
    super::util::one_of(
        &mut errs,
        &p.child("concurrencyPolicy"),
        str_at(spec, "/concurrencyPolicy"),
        &["Allow", "Forbid", "Replace"],
    );
    let jp = p.child("jobTemplate");
    let job_spec = spec.pointer("/jobTemplate/spec").unwrap_or(&null);
    jobspec::validate_job_spec(&mut errs, job_spec, &jp.child("spec"));
    if let Some(sel) = at(job_spec, "/selector") {
        errs.push(gofmt::invalid(
            &jp.child("spec").child("selector"),
            gofmt::label_selector(Some(sel)),
            "`selector` will be auto-generated",
        ));
    }
    if job_spec.get("manualSelector").and_then(Value::as_bool) == Some(true) {
        errs.push(FieldError::not_supported(
            jp.child("spec").child("manualSelector"),
            json!(true),
            &["nil", "false"],
        ));
    }
    for f in ["successfulJobsHistoryLimit", "failedJobsHistoryLimit"] {
        nonnegative(&mut errs, &p.child(f), i64_at(spec, &format!("/{f}")));
    }
    errs
}

/// Upstream `validateTimeZone` (the IANA database itself is not consulted).
fn time_zone(errs: &mut ErrorList, tz: Option<&Value>, p: &Path) {
    let Some(tz) = tz else { return };
    let s = tz.as_str().unwrap_or("");
    if s.is_empty() {
        errs.push(FieldError::invalid(
            p,
            json!(s),
            "timeZone must be nil or non-empty string",
        ));
        return;
    }
    let bad_part = s.split('/').any(|part| {
        part == "."
            || part == ".."
            || part.starts_with('-')
            || part.is_empty()
            || part.len() > 14
            || !part
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_' | b'+'))
    });
    if bad_part {
        errs.push(FieldError::invalid(
            p,
            json!(s),
            format!("unknown time zone {s}"),
        ));
        return;
    }
    if s.eq_ignore_ascii_case("local") {
        errs.push(FieldError::invalid(
            p,
            json!(s),
            "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones",
        ));
    }
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

/// `robfig/cron` v3 `ParseStandard`: five fields or a descriptor, optionally behind
/// `TZ=`/`CRON_TZ=`. The error is the library's message.
pub(crate) fn parse_standard(spec: &str) -> Result<(), String> {
    if spec.is_empty() {
        return Err("empty spec string".into());
    }
    let mut spec = spec;
    if spec.starts_with("TZ=") || spec.starts_with("CRON_TZ=") {
        let Some(i) = spec.find(' ') else {
            return Err(format!("provided bad location {spec}: unknown time zone"));
        };
        spec = spec[i..].trim();
    }
    if let Some(desc) = spec.strip_prefix('@') {
        return match desc {
            "yearly" | "annually" | "monthly" | "weekly" | "daily" | "midnight" | "hourly" => {
                Ok(())
            }
            d if d.starts_with("every ") => {
                let dur = &spec["@every ".len()..];
                if valid_go_duration(dur) {
                    Ok(())
                } else {
                    Err(format!(
                        "failed to parse duration {spec}: time: invalid duration {dur:?}"
                    ))
                }
            }
            _ => Err(format!("unrecognized descriptor: {spec}")),
        };
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(format!(
            "expected exactly 5 fields, found {}: [{}]",
            fields.len(),
            fields.join(" ")
        ));
    }
    for (field, bounds) in fields.iter().zip([MINUTES, HOURS, DOM, MONTHS, DOW]) {
        for expr in field.split(',').filter(|e| !e.is_empty()) {
            range(expr, &bounds)?;
        }
    }
    Ok(())
}

/// `robfig/cron`'s `getRange`.
fn range(expr: &str, b: &Bounds) -> Result<(), String> {
    let range_and_step: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = range_and_step[0].split('-').collect();
    let (start, mut end) = if low_high[0] == "*" || low_high[0] == "?" {
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
            if low_high.len() == 1 {
                end = b.max;
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
    Ok(())
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

/// Go's `time.ParseDuration` grammar: `[-+]` then number-unit pairs (`1h30m`, `1.5s`).
fn valid_go_duration(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    if s == "0" {
        return true;
    }
    if s.is_empty() {
        return false;
    }
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 || rest[..num_len] == *"." {
            return false;
        }
        rest = &rest[num_len..];
        let unit = ["ns", "us", "µs", "μs", "ms", "s", "m", "h"]
            .into_iter()
            .find(|u| rest.starts_with(u));
        match unit {
            Some(u) => rest = &rest[u.len()..],
            None => return false,
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal() -> Value {
        json!({"metadata": {"name": "hello"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
            "containers": [{"name": "c", "image": "busybox"}], "restartPolicy": "OnFailure"}}}}}})
    }

    #[test]
    fn cron_jobs_are_defaulted_like_upstream() {
        let mut c = minimal();
        CronJobStrategy.default(&mut c);
        assert_eq!(c["spec"]["concurrencyPolicy"], json!("Allow"));
        assert_eq!(c["spec"]["suspend"], json!(false));
        assert_eq!(c["spec"]["successfulJobsHistoryLimit"], json!(3));
        assert_eq!(c["spec"]["failedJobsHistoryLimit"], json!(1));
        assert!(
            c["spec"]["jobTemplate"]["spec"]
                .get("backoffLimit")
                .is_none()
        );
        assert!(CronJobStrategy.validate(&c).is_empty());
    }

    #[test]
    fn schedules_are_parsed_like_robfig_cron() {
        assert!(parse_standard("0 0 * * mon-fri").is_ok());
        assert!(parse_standard("@hourly").is_ok());
        assert!(parse_standard("@every 1h30m").is_ok());
        assert_eq!(
            parse_standard("foo").unwrap_err(),
            "expected exactly 5 fields, found 1: [foo]"
        );
        assert_eq!(
            parse_standard("61 * * * *").unwrap_err(),
            "end of range (61) above maximum (59): 61"
        );
        assert_eq!(
            parse_standard("@often").unwrap_err(),
            "unrecognized descriptor: @often"
        );
    }

    #[test]
    fn bad_schedules_and_policies_are_reported() {
        let mut c = minimal();
        c["spec"]["schedule"] = json!("* * * *");
        c["spec"]["concurrencyPolicy"] = json!("Sometimes");
        CronJobStrategy.default(&mut c);
        let msgs: Vec<String> = CronJobStrategy
            .validate(&c)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(
            msgs,
            vec![
                "spec.schedule: Invalid value: \"* * * *\": expected exactly 5 fields, found 4: [* * * *]",
                "spec.concurrencyPolicy: Unsupported value: \"Sometimes\": supported values: \"Allow\", \"Forbid\", \"Replace\"",
            ]
        );
    }

    #[test]
    fn long_names_and_generated_selectors_are_refused() {
        let mut c = minimal();
        meta::set(&mut c, "name", "x".repeat(53));
        c["spec"]["jobTemplate"]["spec"]["selector"] = json!({"matchLabels": {"a": "b"}});
        CronJobStrategy.default(&mut c);
        let msgs: Vec<String> = CronJobStrategy
            .validate(&c)
            .iter()
            .map(FieldError::message)
            .collect();
        assert_eq!(msgs.len(), 2);
        assert!(msgs[0].ends_with("`selector` will be auto-generated"));
        assert!(msgs[1].ends_with("must be no more than 52 characters"));
    }
}
