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
        if let Err(e) = apimachinery::cron::parse_standard(schedule) {
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

/// Upstream `validateTimeZone`, the zone looked up in the IANA database as `time.LoadLocation`
/// does.
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
        return;
    }
    if let Err(e) = apimachinery::cron::load_location(s) {
        errs.push(FieldError::invalid(p, json!(s), e));
    }
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
    fn time_zones_are_looked_up_in_the_zone_database() {
        let messages = |tz: &str| -> Vec<String> {
            let mut c = minimal();
            c["spec"]["timeZone"] = json!(tz);
            CronJobStrategy.default(&mut c);
            CronJobStrategy
                .validate(&c)
                .iter()
                .map(FieldError::message)
                .collect()
        };
        assert!(messages("Europe/Berlin").is_empty());
        assert_eq!(
            messages("Mars/Olympus"),
            vec!["spec.timeZone: Invalid value: \"Mars/Olympus\": unknown time zone Mars/Olympus"]
        );
        assert_eq!(
            messages("Local"),
            vec![
                "spec.timeZone: Invalid value: \"Local\": timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"
            ]
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
