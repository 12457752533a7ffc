//! Job and CronJob printers: STATUS, COMPLETIONS `1/1`, DURATION; SCHEDULE, TIMEZONE,
//! SUSPEND, ACTIVE, LAST SCHEDULE.

use serde_json::Value;

use super::Printer;
use crate::column::{AGE, CONTAINERS, Def, IMAGES, NAME, Row, SELECTOR, cells, i, s};
use crate::format::{self, bool_ptr, container_cells};
use crate::meta;
use crate::time::{Instant, human_duration};
use crate::value::{at, int_or_zero, len, list, opt_bool, opt_int, opt_str, str_or_empty};

pub(crate) const JOB: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Status",
            "Status of the job: Running, Complete, Failed, Suspended...",
        ),
        s(
            "Completions",
            "Succeeded pods out of the completions the job needs.",
        ),
        s("Duration", "How long the job ran, or has been running."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    row: job,
};

/// Whether the first condition of that type is True (`hasJobCondition`).
fn has_condition(obj: &Value, type_: &str) -> bool {
    list(obj, &["status", "conditions"])
        .iter()
        .find(|c| str_or_empty(c, &["type"]) == type_)
        .is_some_and(|c| str_or_empty(c, &["status"]) == "True")
}

fn job(obj: &Value, now: Instant) -> Row {
    let succeeded = int_or_zero(obj, &["status", "succeeded"]);
    // Upstream defaulting: both unset means completions = parallelism = 1; parallelism
    // alone defaults to 1.
    let (completions, parallelism) = match (
        opt_int(obj, &["spec", "completions"]),
        opt_int(obj, &["spec", "parallelism"]),
    ) {
        (None, None) => (Some(1), 1),
        (c, p) => (c, p.unwrap_or(1)),
    };
    let completions = match completions {
        Some(c) => format!("{succeeded}/{c}"),
        None if parallelism > 1 => format!("{succeeded}/1 of {parallelism}"),
        None => format!("{succeeded}/1"),
    };
    let start = meta::timestamp(obj, &["status", "startTime"]);
    let end = meta::timestamp(obj, &["status", "completionTime"]);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(start), None) => human_duration(now.since(start)),
        (Some(start), Some(end)) => human_duration(end.since(start)),
    };
    let status = if has_condition(obj, "Complete") {
        "Complete"
    } else if has_condition(obj, "Failed") {
        "Failed"
    } else if meta::deleting(obj) {
        "Terminating"
    } else if has_condition(obj, "Suspended") {
        "Suspended"
    } else if has_condition(obj, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = container_cells(list(obj, &["spec", "template", "spec", "containers"]));
    Row::new(cells![
        meta::name(obj),
        status,
        completions,
        duration,
        meta::age(obj, now),
        names,
        images,
        format::label_selector(at(obj, &["spec", "selector"])),
    ])
}

const SUSPEND: Def = Def {
    name: "Suspend",
    type_: "boolean",
    format: "",
    priority: 0,
    description: "Whether new runs of the schedule are suspended.",
};

pub(crate) const CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        s("Schedule", "The cron schedule."),
        s("Timezone", "The time zone the schedule is read in."),
        SUSPEND,
        i("Active", "Number of jobs currently running."),
        s("Last Schedule", "Time since a job was last scheduled."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    row: cron_job,
};

fn cron_job(obj: &Value, now: Instant) -> Row {
    let last = match meta::timestamp(obj, &["status", "lastScheduleTime"]) {
        Some(t) => meta::since(Some(t), now),
        None => "<none>".to_string(),
    };
    let job_spec = &["spec", "jobTemplate", "spec"];
    let containers = at(obj, job_spec)
        .map(|s| list(s, &["template", "spec", "containers"]))
        .unwrap_or(&[]);
    let (names, images) = container_cells(containers);
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "schedule"]),
        opt_str(obj, &["spec", "timeZone"]).unwrap_or("<none>"),
        // `suspend` defaults to false upstream, so stored objects never print `<unset>`.
        bool_ptr(Some(opt_bool(obj, &["spec", "suspend"]).unwrap_or(false))),
        len(obj, &["status", "active"]) as i64,
        last,
        meta::age(obj, now),
        names,
        images,
        format::label_selector(at(obj, &["spec", "jobTemplate", "spec", "selector"])),
    ])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kinds::testutil::{ago, cells, default_names};

    fn job_obj(spec: Value, status: Value) -> Value {
        let mut spec = spec;
        spec["template"] = json!({"spec": {"containers": [{"name": "pi", "image": "perl:5.34"}]}});
        json!({"metadata": {"name": "pi", "creationTimestamp": ago(400)}, "spec": spec, "status": status})
    }

    #[test]
    fn complete_job_prints_completions_and_duration() {
        let j = job_obj(
            json!({"completions": 1, "parallelism": 1,
                "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "abc"}}}),
            json!({"succeeded": 1, "startTime": ago(400), "completionTime": ago(380),
                "conditions": [{"type": "SuccessCriteriaMet", "status": "True"}, {"type": "Complete", "status": "True"}]}),
        );
        assert_eq!(
            default_names(&JOB),
            ["Name", "Status", "Completions", "Duration", "Age"]
        );
        assert_eq!(
            cells(&JOB, &j),
            vec![
                json!("pi"),
                json!("Complete"),
                json!("1/1"),
                json!("20s"),
                json!("6m40s"),
                json!("pi"),
                json!("perl:5.34"),
                json!("batch.kubernetes.io/controller-uid=abc")
            ]
        );
    }

    #[test]
    fn running_job_duration_counts_to_now() {
        let j = job_obj(
            json!({"completions": 5, "parallelism": 2}),
            json!({"succeeded": 2, "startTime": ago(90)}),
        );
        assert_eq!(
            cells(&JOB, &j)[1..4],
            [json!("Running"), json!("2/5"), json!("90s")]
        );
    }

    #[test]
    fn work_queue_jobs_show_parallelism() {
        let queue = job_obj(json!({"parallelism": 3}), json!({}));
        assert_eq!(cells(&JOB, &queue)[2..4], [json!("0/1 of 3"), json!("")]);
        let defaulted = job_obj(json!({}), json!({}));
        assert_eq!(cells(&JOB, &defaulted)[2], json!("0/1"));
    }

    #[test]
    fn job_status_follows_upstream_precedence() {
        let failed = job_obj(
            json!({}),
            json!({"conditions": [{"type": "Failed", "status": "True"}]}),
        );
        assert_eq!(cells(&JOB, &failed)[1], json!("Failed"));
        let mut deleting = job_obj(
            json!({}),
            json!({"conditions": [{"type": "Suspended", "status": "True"}]}),
        );
        assert_eq!(cells(&JOB, &deleting)[1], json!("Suspended"));
        deleting["metadata"]["deletionTimestamp"] = json!(ago(1));
        assert_eq!(cells(&JOB, &deleting)[1], json!("Terminating"));
        let target = job_obj(
            json!({}),
            json!({"conditions": [{"type": "FailureTarget", "status": "True"}]}),
        );
        assert_eq!(cells(&JOB, &target)[1], json!("FailureTarget"));
    }

    #[test]
    fn cron_job_prints_schedule_suspend_active_and_last_schedule() {
        let cj = json!({
            "metadata": {"name": "backup", "creationTimestamp": ago(86_400 * 10)},
            "spec": {"schedule": "*/5 * * * *", "suspend": false, "jobTemplate": {"spec": {"template": {"spec": {
                "containers": [{"name": "backup", "image": "busybox"}]}}}}},
            "status": {"active": [{"name": "backup-1"}], "lastScheduleTime": ago(150)}
        });
        assert_eq!(
            cells(&CRON_JOB, &cj),
            vec![
                json!("backup"),
                json!("*/5 * * * *"),
                json!("<none>"),
                json!("False"),
                json!(1),
                json!("2m30s"),
                json!("10d"),
                json!("backup"),
                json!("busybox"),
                json!("<none>")
            ]
        );
        let fresh = json!({"metadata": {"name": "x"}, "spec": {"schedule": "@daily", "timeZone": "Etc/UTC", "suspend": true}});
        assert_eq!(
            cells(&CRON_JOB, &fresh)[1..6],
            [
                json!("@daily"),
                json!("Etc/UTC"),
                json!("True"),
                json!(0),
                json!("<none>")
            ]
        );
    }
}
