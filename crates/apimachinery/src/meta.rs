//! Accessors for the parts of an object the server owns or reads: `metadata`, `apiVersion`,
//! `kind`, as they sit in a JSON object. Objects stay `serde_json::Value` end to end; these
//! helpers keep the field names in one place.

use serde_json::{Map, Value};

/// `metadata` of an object (an empty object when absent or not an object).
pub fn metadata(obj: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    obj.get("metadata")
        .and_then(Value::as_object)
        .unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// `metadata`, created if missing (replacing a non-object).
pub fn metadata_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = Value::Object(Map::new());
    }
    let map = obj.as_object_mut().expect("an object");
    let meta = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    meta.as_object_mut().expect("an object")
}

fn str_field<'a>(obj: &'a Value, name: &str) -> &'a str {
    metadata(obj)
        .get(name)
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub fn name(obj: &Value) -> &str {
    str_field(obj, "name")
}

pub fn namespace(obj: &Value) -> &str {
    str_field(obj, "namespace")
}

pub fn generate_name(obj: &Value) -> &str {
    str_field(obj, "generateName")
}

pub fn uid(obj: &Value) -> &str {
    str_field(obj, "uid")
}

pub fn resource_version(obj: &Value) -> &str {
    str_field(obj, "resourceVersion")
}

pub fn deletion_timestamp(obj: &Value) -> Option<&str> {
    metadata(obj)
        .get("deletionTimestamp")
        .and_then(Value::as_str)
}

pub fn generation(obj: &Value) -> i64 {
    metadata(obj)
        .get("generation")
        .and_then(Value::as_i64)
        .unwrap_or(0)
}

pub fn api_version(obj: &Value) -> &str {
    obj.get("apiVersion").and_then(Value::as_str).unwrap_or("")
}

pub fn kind(obj: &Value) -> &str {
    obj.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// A string map in metadata (`labels`, `annotations`), skipping non-string values.
pub fn string_map<'a>(obj: &'a Value, field: &str) -> impl Iterator<Item = (&'a str, &'a str)> {
    metadata(obj)
        .get(field)
        .and_then(Value::as_object)
        .into_iter()
        .flat_map(|m| {
            m.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
        })
}

pub fn label<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    metadata(obj).get("labels")?.get(key)?.as_str()
}

pub fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    metadata(obj).get("annotations")?.get(key)?.as_str()
}

pub fn finalizers(obj: &Value) -> Vec<String> {
    metadata(obj)
        .get("finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

pub fn set_finalizers(obj: &mut Value, finalizers: Vec<String>) {
    let meta = metadata_mut(obj);
    if finalizers.is_empty() {
        meta.remove("finalizers");
    } else {
        meta.insert("finalizers".into(), Value::from(finalizers));
    }
}

pub fn owner_references(obj: &Value) -> &[Value] {
    metadata(obj)
        .get("ownerReferences")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[])
}

pub fn set(obj: &mut Value, field: &str, value: impl Into<Value>) {
    metadata_mut(obj).insert(field.into(), value.into());
}

pub fn remove(obj: &mut Value, field: &str) -> Option<Value> {
    metadata_mut(obj).remove(field)
}

/// Splits `apiVersion` into group and version (`v1` → ("", "v1")).
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    match api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", api_version),
    }
}

/// RFC 3339 UTC with second precision, as Kubernetes prints `metav1.Time`.
pub fn format_time(unix_seconds: i64) -> String {
    let days = unix_seconds.div_euclid(86_400);
    let secs = unix_seconds.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

/// RFC 3339 UTC with microseconds, as Kubernetes prints `metav1.MicroTime`.
pub fn format_micro_time(unix_micros: i64) -> String {
    let secs = unix_micros.div_euclid(1_000_000);
    let micros = unix_micros.rem_euclid(1_000_000);
    let base = format_time(secs);
    format!("{}.{micros:06}Z", &base[..base.len() - 1])
}

/// Parses `2026-11-30T08:54:38Z` (also with fractional seconds or a numeric offset) into unix
/// seconds.
pub fn parse_time(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || (b[10] != b'T' && b[10] != b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        rest = &frac[digits..];
    }
    let offset = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6
            && (rest.starts_with('+') || rest.starts_with('-'))
            && &rest[3..4] == ":" =>
        {
            let oh: i64 = rest[1..3].parse().ok()?;
            let om: i64 = rest[4..6].parse().ok()?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset)
}

// Howard Hinnant's civil-date algorithms (public domain arithmetic).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn times_format_and_parse_as_rfc3339() {
        assert_eq!(format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(1_796_028_878), "2026-11-30T08:54:38Z");
        assert_eq!(parse_time("2026-11-30T08:54:38Z"), Some(1_796_028_878));
        assert_eq!(
            parse_time("2026-11-30T09:54:38.123+01:00"),
            Some(1_796_028_878)
        );
        assert_eq!(
            format_micro_time(1_796_028_878_000_123),
            "2026-11-30T08:54:38.000123Z"
        );
        assert_eq!(parse_time("yesterday"), None);
        assert_eq!(parse_time("2026-13-30T08:54:38Z"), None);
    }

    #[test]
    fn metadata_accessors_tolerate_missing_and_odd_fields() {
        let obj = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": 2}}});
        assert_eq!(name(&obj), "a");
        assert_eq!(namespace(&obj), "");
        assert_eq!(
            string_map(&obj, "labels").collect::<Vec<_>>(),
            vec![("x", "1")]
        );
        let mut odd = json!("not an object");
        set(&mut odd, "name", "b");
        assert_eq!(name(&odd), "b");
    }
}
