//! Conversion between the versions of a custom resource with strategy `None`: the versions
//! share one schema-less storage, so converting is rewriting `apiVersion`.
//!
//! Design: every version of a CRD stores under the same key (group and plural). The
//! [`CustomStrategy`](crate::CustomStrategy) rewrites writes to the storage version before
//! they are stored; everything that leaves the server (get, list, watch events, write
//! responses) is converted to the version the client asked for with
//! [`CustomStrategy::read`](crate::CustomStrategy::read), which also prunes and applies that
//! version's defaults, as upstream does when it decodes from storage.

use serde_json::{Value, json};

/// Rewrites `obj`'s `apiVersion` to `to_version` of its own group.
pub fn convert(obj: &mut Value, to_version: &str) {
    let Some(m) = obj.as_object_mut() else { return };
    let group = m
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|av| av.rsplit_once('/'))
        .map(|(g, _)| g.to_string())
        .unwrap_or_default();
    let av = if group.is_empty() {
        to_version.to_string()
    } else {
        format!("{group}/{to_version}")
    };
    m.insert("apiVersion".into(), json!(av));
}

/// Rewrites `apiVersion` to `group/version`.
pub fn set_api_version(obj: &mut Value, group: &str, version: &str) {
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!(format!("{group}/{version}")));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn convert_rewrites_only_the_version() {
        let mut o = json!({"apiVersion": "example.com/v1beta1", "kind": "W", "spec": {"a": 1}});
        convert(&mut o, "v1");
        assert_eq!(
            o,
            json!({"apiVersion": "example.com/v1", "kind": "W", "spec": {"a": 1}})
        );
    }
}
