//! StatefulSet pods and claims (upstream `stateful_set_utils.go`): identities, ordinals, the
//! pod of an ordinal at a revision, and the claims of its volume claim templates.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, PodTemplateSpec, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use crate::history::CONTROLLER_REVISION_HASH;
use crate::podutil;

/// The label naming a StatefulSet pod.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// The label holding a pod's ordinal (1.28+).
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// The ordinal of a pod named `<set>-<ordinal>`, if it is one of `set`'s.
pub fn ordinal(set_name: &str, pod_name: &str) -> Option<i32> {
    let rest = pod_name.strip_prefix(set_name)?.strip_prefix('-')?;
    if rest.is_empty()
        || !rest.bytes().all(|b| b.is_ascii_digit())
        || (rest.len() > 1 && rest.starts_with('0'))
    {
        return None;
    }
    rest.parse().ok()
}

/// The name of the claim of `template` for the pod `pod_name`.
pub fn claim_name(template: &str, pod_name: &str) -> String {
    format!("{template}-{pod_name}")
}

fn set_name(set: &StatefulSet) -> &str {
    set.metadata.name.as_deref().unwrap_or_default()
}

/// The claims of the pod at `ordinal`, with owner references per the retention policy
/// (`whenDeleted: Delete` makes the set an owner).
pub fn claims(set: &StatefulSet, ordinal: i32) -> Vec<PersistentVolumeClaim> {
    let Some(spec) = &set.spec else {
        return Vec::new();
    };
    let pod = format!("{}-{ordinal}", set_name(set));
    let delete_with_set = spec
        .persistent_volume_claim_retention_policy
        .as_ref()
        .and_then(|p| p.when_deleted.as_deref())
        == Some("Delete");
    let selector_labels = spec.selector.match_labels.clone().unwrap_or_default();
    spec.volume_claim_templates
        .iter()
        .flatten()
        .map(|t| {
            let tname = t.metadata.name.as_deref().unwrap_or_default();
            let mut labels = t.metadata.labels.clone().unwrap_or_default();
            labels.extend(selector_labels.clone());
            let owner_references = delete_with_set.then(|| {
                let mut r = podutil::new_controller_ref(&set.metadata, "apps/v1", "StatefulSet");
                r.controller = None;
                r.block_owner_deletion = None;
                vec![r]
            });
            PersistentVolumeClaim {
                metadata: ObjectMeta {
                    name: Some(claim_name(tname, &pod)),
                    namespace: set.metadata.namespace.clone(),
                    labels: Some(labels),
                    annotations: t.metadata.annotations.clone(),
                    owner_references,
                    ..Default::default()
                },
                spec: t.spec.clone(),
                status: None,
            }
        })
        .collect()
}

/// A non-controlling owner reference to a pod (a claim removed with its pod on scale-down).
pub fn pod_owner_ref(pod: &Pod) -> OwnerReference {
    OwnerReference {
        api_version: "v1".into(),
        kind: "Pod".into(),
        name: pod.metadata.name.clone().unwrap_or_default(),
        uid: pod.metadata.uid.clone().unwrap_or_default(),
        controller: None,
        block_owner_deletion: None,
    }
}

/// The pod at `ordinal` from `template`, recorded as revision `revision`.
pub fn new_pod(set: &StatefulSet, template: &PodTemplateSpec, revision: &str, ordinal: i32) -> Pod {
    let name = format!("{}-{ordinal}", set_name(set));
    let tm = template.metadata.clone().unwrap_or_default();
    let mut labels = tm.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(CONTROLLER_REVISION_HASH.into(), revision.to_string());
    let mut spec = template.spec.clone().unwrap_or_default();
    spec.hostname = Some(name.clone());
    if let Some(svc) = set.spec.as_ref().and_then(|s| s.service_name.clone())
        && !svc.is_empty()
    {
        spec.subdomain = Some(svc);
    }
    let claims = set
        .spec
        .as_ref()
        .and_then(|s| s.volume_claim_templates.clone())
        .unwrap_or_default();
    if !claims.is_empty() {
        let volumes = spec.volumes.get_or_insert_with(Vec::new);
        for t in &claims {
            let tname = t.metadata.name.clone().unwrap_or_default();
            volumes.retain(|v| v.name != tname);
            volumes.push(Volume {
                name: tname.clone(),
                persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                    claim_name: claim_name(&tname, &name),
                    read_only: None,
                }),
                ..Default::default()
            });
        }
    }
    Pod {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: set.metadata.namespace.clone(),
            labels: Some(labels),
            annotations: tm.annotations,
            finalizers: tm.finalizers,
            owner_references: Some(vec![podutil::new_controller_ref(
                &set.metadata,
                "apps/v1",
                "StatefulSet",
            )]),
            ..Default::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The revision a pod was created from.
pub fn pod_revision(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(CONTROLLER_REVISION_HASH)
        .map(String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn set() -> StatefulSet {
        serde_json::from_value(json!({
            "metadata": {"name": "web", "namespace": "ns", "uid": "u1"},
            "spec": {
                "serviceName": "nginx",
                "selector": {"matchLabels": {"app": "web"}},
                "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"},
                "template": {"metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "www"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
            },
        }))
        .unwrap()
    }

    #[test]
    fn ordinals_are_read_only_from_the_sets_own_pod_names() {
        assert_eq!(ordinal("web", "web-0"), Some(0));
        assert_eq!(ordinal("web", "web-12"), Some(12));
        assert_eq!(ordinal("web", "web-01"), None);
        assert_eq!(ordinal("web", "webx-1"), None);
        assert_eq!(ordinal("web", "web-a"), None);
        assert_eq!(ordinal("web", "web-"), None);
    }

    #[test]
    fn a_pod_has_its_identity_labels_and_claims_mounted() {
        let s = set();
        let t = s.spec.as_ref().unwrap().template.clone();
        let pod = new_pod(&s, &t, "web-abc", 2);
        assert_eq!(pod.metadata.name.as_deref(), Some("web-2"));
        let l = pod.metadata.labels.unwrap();
        assert_eq!(l[POD_NAME_LABEL], "web-2");
        assert_eq!(l[POD_INDEX_LABEL], "2");
        assert_eq!(l[CONTROLLER_REVISION_HASH], "web-abc");
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("web-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("nginx"));
        let v = &spec.volumes.unwrap()[0];
        assert_eq!(
            v.persistent_volume_claim.as_ref().unwrap().claim_name,
            "www-web-2"
        );
        let c = &claims(&s, 2)[0];
        assert_eq!(c.metadata.name.as_deref(), Some("www-web-2"));
        assert_eq!(c.metadata.labels.as_ref().unwrap()["app"], "web");
        let refs = c.metadata.owner_references.as_ref().unwrap();
        assert_eq!(
            (refs[0].kind.as_str(), refs[0].controller),
            ("StatefulSet", None)
        );
    }
}
