//! What a `UsageReport` answers, computed from `UsageRecord`s: for each consumer in the
//! query's tenants (and workload) whose lifetime overlaps the window, its reserved resources
//! integrated over the overlap (`vCPUHours`, `MemoryGiBHours`, `EphemeralStorageGiBHours`,
//! `LifetimeHours`), and per tenant its own total and the total of its subtree.
//!
//! Pure functions of the records, the query and the time "now" (an open record runs until
//! now; a window reaching into the future ends now), so a report is reproducible.

use std::collections::BTreeMap;

use apimachinery::field::{FieldError, Path};
use apimachinery::quantity::Quantity;
use apimachinery::time::{format_time, parse_rfc3339};
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use crate::naming;

/// The most consumers one report lists (its totals always cover every one).
pub const MAX_CONSUMERS: usize = 2000;

/// The consumption names, in the order they are reported.
pub const VCPU_HOURS: &str = "vCPUHours";
pub const MEMORY_GIB_HOURS: &str = "MemoryGiBHours";
pub const EPHEMERAL_STORAGE_GIB_HOURS: &str = "EphemeralStorageGiBHours";
pub const LIFETIME_HOURS: &str = "LifetimeHours";

const GIB: f64 = (1u64 << 30) as f64;

/// One consumer's lifetime and what it reserved (a `UsageRecord`).
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub tenant: String,
    pub workload_kind: String,
    pub workload_name: String,
    pub consumer_kind: String,
    pub consumer_name: String,
    pub instance_type: String,
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub ephemeral_bytes: i64,
    pub start: Timestamp,
    pub end: Option<Timestamp>,
}

fn text<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn amount(v: &Value, pointer: &str, milli: bool) -> i64 {
    let q = match v.pointer(pointer) {
        Some(Value::String(s)) => Quantity::parse(s).ok(),
        Some(Value::Number(n)) => Quantity::parse(&n.to_string()).ok(),
        _ => None,
    };
    q.map_or(0, |q| if milli { q.milli_value() } else { q.value() })
        .max(0)
}

impl Record {
    /// Reads a `UsageRecord` object (`None`: not one, or without a start).
    pub fn from_object(o: &Value) -> Option<Record> {
        let start = parse_rfc3339(text(o, "/spec/start"))?;
        Some(Record {
            tenant: text(o, "/spec/tenant").to_string(),
            workload_kind: text(o, "/spec/workload/kind").to_string(),
            workload_name: text(o, "/spec/workload/name").to_string(),
            consumer_kind: text(o, "/spec/consumer/kind").to_string(),
            consumer_name: text(o, "/spec/consumer/name").to_string(),
            instance_type: text(o, "/spec/type").to_string(),
            cpu_millis: amount(o, "/spec/resources/cpu", true),
            memory_bytes: amount(o, "/spec/resources/memory", false),
            ephemeral_bytes: amount(o, "/spec/resources/ephemeral-storage", false),
            start,
            end: parse_rfc3339(text(o, "/status/end")),
        })
    }

    /// The seconds of `[from, to)` the record was alive (open records until `now`).
    fn seconds_within(&self, from: Timestamp, to: Timestamp, now: Timestamp) -> f64 {
        let end = self.end.unwrap_or(now).min(now).min(to);
        let start = self.start.max(from);
        if end <= start {
            return 0.0;
        }
        end.duration_since(start).as_secs_f64()
    }
}

/// Consumptions by name.
type Consumptions = BTreeMap<&'static str, f64>;

fn consumptions(r: &Record, seconds: f64) -> Consumptions {
    let hours = seconds / 3600.0;
    BTreeMap::from([
        (VCPU_HOURS, r.cpu_millis as f64 / 1000.0 * hours),
        (MEMORY_GIB_HOURS, r.memory_bytes as f64 / GIB * hours),
        (
            EPHEMERAL_STORAGE_GIB_HOURS,
            r.ephemeral_bytes as f64 / GIB * hours,
        ),
        (LIFETIME_HOURS, hours),
    ])
}

fn add(into: &mut Consumptions, c: &Consumptions) {
    for (k, v) in c {
        *into.entry(k).or_default() += v;
    }
}

/// A decimal quantity with at most six decimals (`1.5`, `0.000278`: a second of one vCPU
/// shows).
pub fn decimal(x: f64) -> String {
    let r = (x * 1e6).round() / 1e6;
    if r == 0.0 {
        return "0".into();
    }
    format!("{r}")
}

fn render(c: &Consumptions) -> Value {
    Value::Object(
        c.iter()
            .map(|(k, v)| (k.to_string(), json!(decimal(*v))))
            .collect(),
    )
}

/// A validated query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    /// The tenant's namespace.
    pub tenant: String,
    pub include_sub_tenants: bool,
    /// Tenants (namespaces) left out, with their subtrees.
    pub exclude_tenants: Vec<String>,
    /// Only this workload's consumers (its name).
    pub workload: Option<String>,
    pub start: Timestamp,
    pub end: Timestamp,
}

/// Whether tenant namespace `ns` is `tenant` or in its subtree.
pub fn within(ns: &str, tenant: &str) -> bool {
    ns == tenant || naming::chain(ns).iter().any(|t| t == tenant)
}

/// Reads and checks a report's `query`, as asked in namespace `namespace` (the tenant it
/// defaults to, and the subtree it may ask about).
pub fn parse_query(object: &Value, namespace: &str) -> Result<Query, Vec<FieldError>> {
    let path = Path::new("query");
    let q = object.get("query").cloned().unwrap_or(Value::Null);
    let mut errs = Vec::new();
    if !namespace.starts_with(naming::NAMESPACE_PREFIX) {
        errs.push(FieldError::invalid(
            "metadata.namespace",
            json!(namespace),
            "a UsageReport is asked in a tenant's namespace (tenant-root for the whole platform)",
        ));
    }
    let tenant = match q.get("tenant").and_then(Value::as_str) {
        Some(t) if !t.is_empty() => t.to_string(),
        _ => namespace.to_string(),
    };
    if !within(&tenant, namespace) || !tenant.starts_with(naming::NAMESPACE_PREFIX) {
        errs.push(FieldError::forbidden(
            path.child("tenant").to_string(),
            format!("must be this namespace's tenant ({namespace}) or one of its sub-tenants"),
        ));
    }
    let time = |key: &str, errs: &mut Vec<FieldError>| -> Option<Timestamp> {
        let p = path.child(key).to_string();
        match q.get(key) {
            None | Some(Value::Null) => {
                errs.push(FieldError::required(&p, ""));
                None
            }
            Some(v) => {
                let t = v.as_str().and_then(parse_rfc3339);
                if t.is_none() {
                    errs.push(FieldError::invalid(
                        &p,
                        v.clone(),
                        "must be an RFC 3339 date-time",
                    ));
                }
                t
            }
        }
    };
    let start = time("startTimestamp", &mut errs);
    let end = time("endTimestamp", &mut errs);
    if let (Some(s), Some(e)) = (start, end)
        && e <= s
    {
        errs.push(FieldError::invalid(
            path.child("endTimestamp").to_string(),
            q["endTimestamp"].clone(),
            "must be after startTimestamp",
        ));
    }
    let exclude_tenants: Vec<String> = q
        .get("excludeTenants")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let workload = q
        .get("workload")
        .and_then(Value::as_str)
        .filter(|w| !w.is_empty())
        .map(str::to_string);
    match (start, end, errs.is_empty()) {
        (Some(start), Some(end), true) => Ok(Query {
            tenant,
            include_sub_tenants: q
                .get("includeSubTenants")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            exclude_tenants,
            workload,
            start,
            end,
        }),
        _ => Err(errs),
    }
}

impl Query {
    /// Whether a record of tenant `ns` is in the query's scope.
    fn covers_tenant(&self, ns: &str) -> bool {
        let in_tree = if self.include_sub_tenants {
            within(ns, &self.tenant)
        } else {
            ns == self.tenant
        };
        in_tree && !self.exclude_tenants.iter().any(|x| within(ns, x))
    }
}

/// The report for `query` over `records` at `now`.
pub fn compute(records: &[Record], query: &Query, now: Timestamp) -> Value {
    let end = query.end.min(now);
    let mut consumers = Vec::new();
    let mut alive = 0usize;
    let mut own: BTreeMap<String, Consumptions> = BTreeMap::new();
    let mut matched: Vec<&Record> = records
        .iter()
        .filter(|r| query.covers_tenant(&r.tenant))
        .filter(|r| {
            query
                .workload
                .as_ref()
                .is_none_or(|w| *w == r.workload_name)
        })
        .collect();
    matched.sort_by(|a, b| {
        (&a.tenant, &a.workload_name, &a.consumer_name, a.start).cmp(&(
            &b.tenant,
            &b.workload_name,
            &b.consumer_name,
            b.start,
        ))
    });
    for r in matched {
        let seconds = r.seconds_within(query.start, end, now);
        if seconds <= 0.0 {
            continue;
        }
        let c = consumptions(r, seconds);
        alive += 1;
        add(own.entry(r.tenant.clone()).or_default(), &c);
        if consumers.len() < MAX_CONSUMERS {
            let from = r.start.max(query.start);
            let to = r.end.unwrap_or(now).min(end);
            consumers.push(json!({
                "tenant": r.tenant,
                "workload": {"kind": r.workload_kind, "name": r.workload_name},
                "kind": r.consumer_kind,
                "name": r.consumer_name,
                "type": r.instance_type,
                "interval": {"startTimestamp": format_time(from), "endTimestamp": format_time(to)},
                "consumptions": render(&c),
            }));
        }
    }
    let truncated = alive > MAX_CONSUMERS;
    // Each tenant's own usage, and its subtree's (every tenant below it in the report).
    let mut tenants = Vec::new();
    for (t, c) in &own {
        let mut total = Consumptions::new();
        for (u, d) in &own {
            if within(u, t) {
                add(&mut total, d);
            }
        }
        tenants.push((t.clone(), c.clone(), total));
    }
    // Ancestors within the query's tenant that have no consumer of their own still carry
    // their subtree's total.
    let mut ancestors: BTreeMap<String, Consumptions> = BTreeMap::new();
    for (t, c) in &own {
        for a in naming::chain(t) {
            if a != *t && within(&a, &query.tenant) && !own.contains_key(&a) {
                add(ancestors.entry(a).or_default(), c);
            }
        }
    }
    for (a, total) in ancestors {
        tenants.push((a, Consumptions::new(), total));
    }
    tenants.sort_by(|a, b| a.0.cmp(&b.0));
    let mut total = Consumptions::new();
    for c in own.values() {
        add(&mut total, c);
    }
    json!({
        "startTimestamp": format_time(query.start),
        "endTimestamp": format_time(end.max(query.start)),
        "generatedAt": format_time(now),
        "truncated": truncated,
        "consumers": consumers,
        "tenants": tenants.into_iter().map(|(t, own, total)| json!({
            "tenant": t,
            "consumptions": render(&own),
            "totalConsumptions": render(&total),
        })).collect::<Vec<_>>(),
        "totalConsumptions": render(&total),
    })
}

/// The usage counters of every tenant (its own consumers, since recording began, until
/// `now`) and what its live consumers reserve, as Prometheus text.
pub fn metrics(records: &[Record], now: Timestamp) -> String {
    use std::fmt::Write as _;
    let mut hours: BTreeMap<&str, Consumptions> = BTreeMap::new();
    let mut live: BTreeMap<&str, (i64, i64, i64, u64)> = BTreeMap::new();
    for r in records {
        let seconds = r.seconds_within(r.start, now, now);
        add(
            hours.entry(r.tenant.as_str()).or_default(),
            &consumptions(r, seconds),
        );
        let l = live.entry(r.tenant.as_str()).or_default();
        if r.end.is_none_or(|e| e > now) && r.start <= now {
            l.0 += r.cpu_millis;
            l.1 += r.memory_bytes;
            l.2 += r.ephemeral_bytes;
            l.3 += 1;
        }
    }
    let mut out = String::new();
    for (name, key, help) in [
        (
            "matryoshka_usage_vcpu_hours_total",
            VCPU_HOURS,
            "vCPU-hours reserved by a tenant's own machines and pods since recording began.",
        ),
        (
            "matryoshka_usage_memory_gib_hours_total",
            MEMORY_GIB_HOURS,
            "Memory GiB-hours reserved by a tenant's own machines and pods since recording began.",
        ),
        (
            "matryoshka_usage_ephemeral_storage_gib_hours_total",
            EPHEMERAL_STORAGE_GIB_HOURS,
            "Ephemeral storage GiB-hours reserved by a tenant's own machines and pods since recording began.",
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} counter");
        for (t, c) in &hours {
            let _ = writeln!(
                out,
                "{name}{{tenant=\"{t}\"}} {}",
                c.get(key).copied().unwrap_or(0.0)
            );
        }
    }
    for (name, help, pick) in [
        (
            "matryoshka_usage_reserved_cpu_cores",
            "CPU cores a tenant's live machines and pods reserve.",
            (|l: &(i64, i64, i64, u64)| l.0 as f64 / 1000.0) as fn(&(i64, i64, i64, u64)) -> f64,
        ),
        (
            "matryoshka_usage_reserved_memory_bytes",
            "Memory a tenant's live machines and pods reserve.",
            |l| l.1 as f64,
        ),
        (
            "matryoshka_usage_reserved_ephemeral_storage_bytes",
            "Ephemeral storage a tenant's live machines and pods reserve.",
            |l| l.2 as f64,
        ),
        (
            "matryoshka_usage_consumers",
            "A tenant's live machines and pods.",
            |l| l.3 as f64,
        ),
    ] {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} gauge");
        for (t, l) in &live {
            let _ = writeln!(out, "{name}{{tenant=\"{t}\"}} {}", pick(l));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> Timestamp {
        parse_rfc3339(s).expect("time")
    }

    fn record(tenant: &str, name: &str, cpu: i64, start: &str, end: Option<&str>) -> Record {
        Record {
            tenant: tenant.into(),
            workload_kind: "TenantCluster".into(),
            workload_name: "demo".into(),
            consumer_kind: "MatryoshkaMachine".into(),
            consumer_name: name.into(),
            instance_type: "u1.medium".into(),
            cpu_millis: cpu,
            memory_bytes: 4 << 30,
            ephemeral_bytes: 20 << 30,
            start: ts(start),
            end: end.map(ts),
        }
    }

    fn query(tenant: &str, sub: bool, start: &str, end: &str) -> Query {
        Query {
            tenant: tenant.into(),
            include_sub_tenants: sub,
            exclude_tenants: vec![],
            workload: None,
            start: ts(start),
            end: ts(end),
        }
    }

    #[test]
    fn a_consumer_is_charged_for_the_part_of_its_life_inside_the_window() {
        let r = [record(
            "tenant-foo",
            "m1",
            2000,
            "2026-01-01T10:00:00Z",
            Some("2026-01-01T14:00:00Z"),
        )];
        let q = query(
            "tenant-foo",
            false,
            "2026-01-01T12:00:00Z",
            "2026-01-02T00:00:00Z",
        );
        let report = compute(&r, &q, ts("2026-02-01T00:00:00Z"));
        let c = &report["consumers"][0];
        assert_eq!(c["consumptions"][VCPU_HOURS], "4");
        assert_eq!(c["consumptions"][MEMORY_GIB_HOURS], "8");
        assert_eq!(c["consumptions"][EPHEMERAL_STORAGE_GIB_HOURS], "40");
        assert_eq!(c["consumptions"][LIFETIME_HOURS], "2");
        assert_eq!(c["interval"]["startTimestamp"], "2026-01-01T12:00:00Z");
        assert_eq!(c["interval"]["endTimestamp"], "2026-01-01T14:00:00Z");
    }

    #[test]
    fn an_open_record_runs_until_now_and_a_window_in_the_future_ends_now() {
        let r = [record(
            "tenant-foo",
            "m1",
            1000,
            "2026-01-01T00:00:00Z",
            None,
        )];
        let q = query(
            "tenant-foo",
            false,
            "2026-01-01T00:00:00Z",
            "2027-01-01T00:00:00Z",
        );
        let report = compute(&r, &q, ts("2026-01-01T01:30:00Z"));
        assert_eq!(report["consumers"][0]["consumptions"][VCPU_HOURS], "1.5");
        assert_eq!(report["endTimestamp"], "2026-01-01T01:30:00Z");
    }

    #[test]
    fn sub_tenants_roll_up_into_their_ancestors_and_exclusions_cut_subtrees() {
        let r = [
            record("tenant-foo", "a", 1000, "2026-01-01T00:00:00Z", None),
            record("tenant-foo-bar", "b", 2000, "2026-01-01T00:00:00Z", None),
            record("tenant-foo-baz", "c", 4000, "2026-01-01T00:00:00Z", None),
            record("tenant-other", "d", 8000, "2026-01-01T00:00:00Z", None),
        ];
        let now = ts("2026-01-01T01:00:00Z");
        let mut q = query(
            "tenant-foo",
            true,
            "2026-01-01T00:00:00Z",
            "2026-01-02T00:00:00Z",
        );
        let report = compute(&r, &q, now);
        assert_eq!(report["consumers"].as_array().unwrap().len(), 3);
        assert_eq!(report["totalConsumptions"][VCPU_HOURS], "7");
        let foo = &report["tenants"][0];
        assert_eq!(foo["tenant"], "tenant-foo");
        assert_eq!(foo["consumptions"][VCPU_HOURS], "1");
        assert_eq!(foo["totalConsumptions"][VCPU_HOURS], "7");
        q.exclude_tenants = vec!["tenant-foo-baz".into()];
        let report = compute(&r, &q, now);
        assert_eq!(report["totalConsumptions"][VCPU_HOURS], "3");
        // From the root, a parent without consumers of its own still carries its subtree.
        let q = query(
            "tenant-root",
            true,
            "2026-01-01T00:00:00Z",
            "2026-01-02T00:00:00Z",
        );
        let r = [record(
            "tenant-foo-bar",
            "b",
            2000,
            "2026-01-01T00:00:00Z",
            None,
        )];
        let report = compute(&r, &q, now);
        let names: Vec<&str> = report["tenants"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["tenant"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["tenant-foo", "tenant-foo-bar", "tenant-root"]);
        assert_eq!(report["tenants"][0]["totalConsumptions"][VCPU_HOURS], "2");
        assert_eq!(report["tenants"][2]["totalConsumptions"][VCPU_HOURS], "2");
    }

    #[test]
    fn a_query_outside_its_namespaces_subtree_or_without_a_window_is_refused_field_by_field() {
        let errs = parse_query(
            &json!({"query": {"tenant": "tenant-bar", "startTimestamp": "yesterday"}}),
            "tenant-foo",
        )
        .unwrap_err();
        let fields: Vec<String> = errs.iter().map(|e| e.field.to_string()).collect();
        assert_eq!(
            fields,
            ["query.tenant", "query.startTimestamp", "query.endTimestamp"]
        );
        let errs = parse_query(
            &json!({"query": {"startTimestamp": "2026-01-02T00:00:00Z", "endTimestamp": "2026-01-01T00:00:00Z"}}),
            "tenant-foo",
        )
        .unwrap_err();
        assert_eq!(errs[0].field.to_string(), "query.endTimestamp");
        let q = parse_query(
            &json!({"query": {"tenant": "tenant-foo-bar", "startTimestamp": "2026-01-01T00:00:00Z", "endTimestamp": "2026-01-02T00:00:00Z"}}),
            "tenant-foo",
        )
        .unwrap();
        assert_eq!(q.tenant, "tenant-foo-bar");
        assert!(parse_query(&json!({"query": {}}), "default").is_err());
    }

    #[test]
    fn metrics_count_each_tenants_hours_and_what_it_reserves_now() {
        let r = [
            record(
                "tenant-foo",
                "a",
                2000,
                "2026-01-01T00:00:00Z",
                Some("2026-01-01T01:00:00Z"),
            ),
            record("tenant-foo", "b", 1000, "2026-01-01T00:00:00Z", None),
        ];
        let text = metrics(&r, ts("2026-01-01T02:00:00Z"));
        assert!(text.contains("matryoshka_usage_vcpu_hours_total{tenant=\"tenant-foo\"} 4\n"));
        assert!(text.contains("matryoshka_usage_reserved_cpu_cores{tenant=\"tenant-foo\"} 1\n"));
        assert!(text.contains("matryoshka_usage_consumers{tenant=\"tenant-foo\"} 1\n"));
    }
}
