//! `metadata.managedFields` entries and the per-manager field sets they encode.
//!
//! An entry is identified upstream by its manager name, operation, subresource and — for
//! `Update` only — its apiVersion; an applier keeps one entry whatever version it applies with.
//! Entries are written sorted as upstream sorts them (Apply before Update, then by time,
//! manager, apiVersion, subresource) and entries that own nothing are dropped.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::fieldset::{FieldSet, FieldsV1Error};

/// `Apply` or `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// One `metadata.managedFields` entry, serialized exactly as upstream's
/// `ManagedFieldsEntry` (field order and omitted empties included).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedFieldsEntry {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub manager: String,
    pub operation: Operation,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time: Option<String>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub fields_type: String,
    #[serde(default, rename = "fieldsV1", skip_serializing_if = "Option::is_none")]
    pub fields_v1: Option<Value>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

impl ManagedFieldsEntry {
    /// Reads `metadata.managedFields` from an object (absent or `null` reads as empty).
    pub fn list_from_object(obj: &Value) -> Result<Vec<ManagedFieldsEntry>, String> {
        match obj.pointer("/metadata/managedFields") {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(v) => serde_json::from_value(v.clone()).map_err(|e| e.to_string()),
        }
    }

    /// The entries as the JSON list stored in `metadata.managedFields`.
    pub fn list_to_value(entries: &[ManagedFieldsEntry]) -> Value {
        serde_json::to_value(entries).unwrap_or(Value::Null)
    }

    /// The field set this entry records.
    pub fn field_set(&self) -> Result<FieldSet, FieldsV1Error> {
        match &self.fields_v1 {
            Some(v) => FieldSet::from_fields_v1(v),
            None => Ok(FieldSet::new()),
        }
    }
}

/// The entries a non-apply write starts from (upstream `decodeLiveOrNew`): the live object's,
/// unless the request sets its own readable, non-empty entries; `[]` or `[{}]` in the request
/// resets tracking (the result is then untracked). Subresource writes always use the live
/// object's entries.
pub fn entries_for_update(
    live: Option<&Value>,
    new: &Value,
    is_subresource: bool,
) -> Vec<ManagedFieldsEntry> {
    let live_entries = || {
        live.and_then(|l| ManagedFieldsEntry::list_from_object(l).ok())
            .filter(|e| decode(e).is_ok())
            .unwrap_or_default()
    };
    if is_subresource {
        return live_entries();
    }
    match new.pointer("/metadata/managedFields") {
        Some(Value::Array(items)) if items.is_empty() => return Vec::new(),
        Some(Value::Array(items))
            if items.len() == 1 && items[0].as_object().is_some_and(|m| m.is_empty()) =>
        {
            return Vec::new();
        }
        _ => {}
    }
    match ManagedFieldsEntry::list_from_object(new) {
        Ok(entries) if !entries.is_empty() && decode(&entries).is_ok() => entries,
        _ => live_entries(),
    }
}

/// Writes `entries` into `obj.metadata.managedFields` (removing it when there are none).
pub fn set_object_managed_fields(obj: &mut Value, entries: &[ManagedFieldsEntry]) {
    let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) else {
        if entries.is_empty() {
            return;
        }
        if let Some(m) = obj.as_object_mut() {
            m.insert(
                "metadata".into(),
                serde_json::json!({"managedFields": ManagedFieldsEntry::list_to_value(entries)}),
            );
        }
        return;
    };
    if entries.is_empty() {
        meta.remove("managedFields");
    } else {
        meta.insert(
            "managedFields".into(),
            ManagedFieldsEntry::list_to_value(entries),
        );
    }
}

/// Who owns a set: upstream's manager identifier.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct ManagerId {
    pub manager: String,
    pub operation: Operation,
    /// Empty for appliers.
    pub api_version: String,
    pub subresource: String,
}

impl ManagerId {
    pub fn apply(manager: &str, subresource: Option<&str>) -> Self {
        ManagerId {
            manager: manager.into(),
            operation: Operation::Apply,
            api_version: String::new(),
            subresource: subresource.unwrap_or_default().into(),
        }
    }

    pub fn update(manager: &str, api_version: &str, subresource: Option<&str>) -> Self {
        ManagerId {
            manager: manager.into(),
            operation: Operation::Update,
            api_version: api_version.into(),
            subresource: subresource.unwrap_or_default().into(),
        }
    }

    /// The JSON upstream uses as the identifier (its sort key in conflict messages).
    pub fn identifier(&self) -> String {
        let mut s = format!(
            "{{\"manager\":{},\"operation\":\"{}\"",
            crate::gofmt::marshal(&Value::String(self.manager.clone())),
            self.operation.as_str()
        );
        if !self.api_version.is_empty() {
            s.push_str(&format!(
                ",\"apiVersion\":{}",
                crate::gofmt::marshal(&Value::String(self.api_version.clone()))
            ));
        }
        if !self.subresource.is_empty() {
            s.push_str(&format!(
                ",\"subresource\":{}",
                crate::gofmt::marshal(&Value::String(self.subresource.clone()))
            ));
        }
        s.push('}');
        s
    }
}

/// One manager's ownership.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Owned {
    pub set: FieldSet,
    pub api_version: String,
    pub time: Option<String>,
}

/// Every manager's ownership, keyed by identifier.
pub(crate) type Managers = std::collections::BTreeMap<ManagerId, Owned>;

/// Decodes entries; fails on an unknown fieldsType, an empty apiVersion or bad `FieldsV1`,
/// as upstream `DecodeManagedFields` does.
pub(crate) fn decode(entries: &[ManagedFieldsEntry]) -> Result<Managers, String> {
    let mut out = Managers::new();
    for (i, e) in entries.iter().enumerate() {
        if e.api_version.is_empty() {
            return Err("apiVersion must not be empty".into());
        }
        match e.fields_type.as_str() {
            "FieldsV1" => {}
            "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
            other => {
                return Err(format!(
                    "invalid fieldsType {other:?} in managed fields entry {i}"
                ));
            }
        }
        let set = e
            .field_set()
            .map_err(|err| format!("error decoding versioned set: {err}"))?;
        let id = ManagerId {
            manager: e.manager.clone(),
            operation: e.operation,
            api_version: if e.operation == Operation::Apply {
                String::new()
            } else {
                e.api_version.clone()
            },
            subresource: e.subresource.clone(),
        };
        out.insert(
            id,
            Owned {
                set,
                api_version: e.api_version.clone(),
                time: e.time.clone(),
            },
        );
    }
    Ok(out)
}

/// Encodes managers as sorted entries, dropping those that own nothing.
pub(crate) fn encode(managers: &Managers) -> Vec<ManagedFieldsEntry> {
    let mut out: Vec<ManagedFieldsEntry> = managers
        .iter()
        .filter(|(_, o)| !o.set.is_empty())
        .map(|(id, o)| ManagedFieldsEntry {
            manager: id.manager.clone(),
            operation: id.operation,
            api_version: o.api_version.clone(),
            time: o.time.clone(),
            fields_type: "FieldsV1".into(),
            fields_v1: Some(o.set.to_fields_v1()),
            subresource: id.subresource.clone(),
        })
        .collect();
    out.sort_by(|p, q| {
        p.operation
            .cmp(&q.operation)
            .then_with(|| {
                p.time
                    .as_deref()
                    .unwrap_or("")
                    .cmp(q.time.as_deref().unwrap_or(""))
            })
            .then_with(|| p.manager.cmp(&q.manager))
            .then_with(|| p.api_version.cmp(&q.api_version))
            .then_with(|| p.subresource.cmp(&q.subresource))
    });
    out
}

/// Upstream keeps at most this many `Update` entries; older ones fold into `ancient-changes`.
pub const MAX_UPDATE_MANAGERS: usize = 10;

/// Folds the oldest `Update` managers into one `ancient-changes` entry per apiVersion.
pub(crate) fn cap_update_managers(managers: &mut Managers) {
    let mut updaters: Vec<ManagerId> = managers
        .keys()
        .filter(|id| id.operation == Operation::Update)
        .cloned()
        .collect();
    if updaters.len() <= MAX_UPDATE_MANAGERS {
        return;
    }
    updaters.sort_by(|a, b| {
        let ta = managers[a].time.clone().unwrap_or_default();
        let tb = managers[b].time.clone().unwrap_or_default();
        ta.cmp(&tb)
            .then_with(|| a.identifier().cmp(&b.identifier()))
    });
    let mut first_for_version: std::collections::BTreeMap<String, ManagerId> = Default::default();
    let mut length = updaters.len();
    for id in updaters {
        if length <= MAX_UPDATE_MANAGERS {
            break;
        }
        let Some(owned) = managers.get(&id).cloned() else {
            continue;
        };
        let bucket = ManagerId::update("ancient-changes", &owned.api_version, None);
        match first_for_version.get(&owned.api_version).cloned() {
            Some(first) => {
                if !managers.contains_key(&bucket)
                    && let Some(s) = managers.remove(&first)
                {
                    managers.insert(bucket.clone(), s);
                }
                managers.remove(&id);
                if let Some(b) = managers.get_mut(&bucket) {
                    b.set = owned.set.union(&b.set);
                    b.time = owned.time.clone();
                }
                length -= 1;
            }
            None => {
                first_for_version.insert(owned.api_version.clone(), id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn entries_serialize_exactly_like_upstream() {
        let e = ManagedFieldsEntry {
            manager: "kubectl".into(),
            operation: Operation::Update,
            api_version: "apps/v1".into(),
            time: Some("2026-11-30T08:54:38Z".into()),
            fields_type: "FieldsV1".into(),
            fields_v1: Some(json!({"f:spec": {"f:replicas": {}}})),
            subresource: String::new(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"manager":"kubectl","operation":"Update","apiVersion":"apps/v1","time":"2026-11-30T08:54:38Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}}}"#
        );
        let with_sub = ManagedFieldsEntry {
            subresource: "status".into(),
            ..e.clone()
        };
        let back: ManagedFieldsEntry =
            serde_json::from_value(serde_json::to_value(&with_sub).unwrap()).unwrap();
        assert_eq!(back, with_sub);
        assert_eq!(
            serde_json::to_value(&with_sub).unwrap()["subresource"],
            "status"
        );
    }

    #[test]
    fn manager_identifiers_leave_out_the_version_of_appliers() {
        assert_eq!(
            ManagerId::apply("kubectl", None).identifier(),
            r#"{"manager":"kubectl","operation":"Apply"}"#
        );
        assert_eq!(
            ManagerId::update("k", "v1", Some("status")).identifier(),
            r#"{"manager":"k","operation":"Update","apiVersion":"v1","subresource":"status"}"#
        );
    }

    #[test]
    fn decode_rejects_entries_upstream_rejects() {
        let mut e = ManagedFieldsEntry {
            manager: "m".into(),
            operation: Operation::Apply,
            api_version: "v1".into(),
            time: None,
            fields_type: "FieldsV2".into(),
            fields_v1: None,
            subresource: String::new(),
        };
        assert!(
            decode(std::slice::from_ref(&e))
                .unwrap_err()
                .contains("invalid fieldsType")
        );
        e.fields_type = "FieldsV1".into();
        e.api_version.clear();
        assert_eq!(decode(&[e]).unwrap_err(), "apiVersion must not be empty");
    }

    #[test]
    fn updates_start_from_the_live_entries_unless_the_request_sets_or_resets_them() {
        let entry = json!({"manager": "m", "operation": "Update", "apiVersion": "v1",
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}});
        let other = json!({"manager": "n", "operation": "Apply", "apiVersion": "v1",
                           "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}});
        let live = json!({"metadata": {"managedFields": [entry]}});
        let managers =
            |v: &Vec<ManagedFieldsEntry>| v.iter().map(|e| e.manager.clone()).collect::<Vec<_>>();
        let kept = entries_for_update(Some(&live), &json!({"metadata": {}}), false);
        assert_eq!(managers(&kept), ["m"]);
        let set = entries_for_update(
            Some(&live),
            &json!({"metadata": {"managedFields": [other]}}),
            false,
        );
        assert_eq!(managers(&set), ["n"]);
        let on_status = entries_for_update(
            Some(&live),
            &json!({"metadata": {"managedFields": [other]}}),
            true,
        );
        assert_eq!(managers(&on_status), ["m"]);
        assert!(
            entries_for_update(
                Some(&live),
                &json!({"metadata": {"managedFields": []}}),
                false
            )
            .is_empty()
        );
        assert!(
            entries_for_update(
                Some(&live),
                &json!({"metadata": {"managedFields": [{}]}}),
                false
            )
            .is_empty()
        );
        let unreadable = json!({"metadata": {"managedFields": [{"manager": "x"}]}});
        assert_eq!(
            managers(&entries_for_update(Some(&live), &unreadable, false)),
            ["m"]
        );
    }

    #[test]
    fn more_than_ten_updaters_fold_into_ancient_changes() {
        let mut managers = Managers::new();
        for i in 0..12 {
            managers.insert(
                ManagerId::update(&format!("m{i:02}"), "v1", None),
                Owned {
                    set: FieldSet::from_paths([super::super::path::FieldPath::fields(&[
                        "data",
                        &format!("k{i}"),
                    ])]),
                    api_version: "v1".into(),
                    time: Some(format!("2026-01-01T00:00:{i:02}Z")),
                },
            );
        }
        cap_update_managers(&mut managers);
        assert_eq!(managers.len(), 10);
        let ancient = &managers[&ManagerId::update("ancient-changes", "v1", None)];
        assert_eq!(ancient.set.paths().len(), 3);
        assert!(!managers.contains_key(&ManagerId::update("m00", "v1", None)));
        assert!(managers.contains_key(&ManagerId::update("m03", "v1", None)));
    }
}
