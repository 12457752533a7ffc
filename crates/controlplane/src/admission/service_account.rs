//! ServiceAccount admission (upstream `plugin/pkg/admission/serviceaccount`) for pod creates:
//! a pod without a service account gets `default`, and unless automounting is turned off (by
//! the pod, else by its service account) it gets the projected `kube-api-access-<suffix>`
//! volume — a bound token (3607 s, refreshed by the kubelet), the cluster's `ca.crt` from
//! `kube-root-ca.crt` and the namespace — mounted read-only at
//! `/var/run/secrets/kubernetes.io/serviceaccount` in every container that has nothing there.
//! In-cluster clients (`rest.InClusterConfig`, the Python client, kube-rs) read it.
//!
//! Upstream refuses a pod whose service account does not exist yet; here the pod is admitted
//! (namespaces get their `default` account moments after they are created, and the kubelet
//! waits for the token), so a pod created right after its namespace does not fail.

use apimachinery::meta;
use serde_json::{Value, json};

use crate::ControlPlane;

/// Where the token, `ca.crt` and `namespace` are mounted.
pub const TOKEN_MOUNT_PATH: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Upstream's token lifetime for the projected volume (an hour and a bit, so a kubelet
/// refreshing at 80 % is distinguishable from a legacy token).
const TOKEN_EXPIRATION_SECONDS: i64 = 3607;

/// The characters of upstream's `rand.String` (no vowels, no confusable digits).
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn suffix() -> String {
    let bits = uuid::Uuid::new_v4().as_u128();
    (0..5)
        .map(|i| {
            SUFFIX_ALPHABET[((bits >> (i * 8)) % SUFFIX_ALPHABET.len() as u128) as usize] as char
        })
        .collect()
}

/// Admits a pod create into `namespace` of `cluster` (see the module documentation).
pub fn admit_pod(cp: &ControlPlane, cluster: &str, namespace: &str, pod: &mut Value) {
    // Mirror pods (static pods of a kubelet) may not use service accounts.
    if meta::annotation(pod, "kubernetes.io/config.mirror").is_some() {
        return;
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let named = |v: Option<&Value>| {
        v.and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let account = named(spec.get("serviceAccountName"))
        .or_else(|| named(spec.get("serviceAccount")))
        .unwrap_or_else(|| "default".to_string());
    spec.insert("serviceAccountName".into(), json!(account));
    let automount = match spec
        .get("automountServiceAccountToken")
        .and_then(Value::as_bool)
    {
        Some(b) => b,
        None => super::namespace_objects(cp, cluster, namespace, "serviceaccounts")
            .iter()
            .find(|sa| meta::name(sa) == account)
            .and_then(|sa| {
                sa.get("automountServiceAccountToken")
                    .and_then(Value::as_bool)
            })
            .unwrap_or(true),
    };
    if !automount {
        return;
    }
    let mounts_token = |c: &Value| {
        c.get("volumeMounts")
            .and_then(Value::as_array)
            .is_some_and(|ms| {
                ms.iter()
                    .any(|m| m.get("mountPath").and_then(Value::as_str) == Some(TOKEN_MOUNT_PATH))
            })
    };
    let lists = ["initContainers", "containers"];
    let needs: bool = lists.iter().any(|l| {
        spec.get(*l)
            .and_then(Value::as_array)
            .is_some_and(|cs| cs.iter().any(|c| !mounts_token(c)))
    });
    if !needs {
        return;
    }
    let name = format!("kube-api-access-{}", suffix());
    let volume = json!({
        "name": name,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": TOKEN_EXPIRATION_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ],
            "defaultMode": 420,
        },
    });
    let mount = json!({"name": name, "readOnly": true, "mountPath": TOKEN_MOUNT_PATH});
    for l in lists {
        let Some(cs) = spec.get_mut(l).and_then(Value::as_array_mut) else {
            continue;
        };
        for c in cs.iter_mut().filter(|c| c.is_object()) {
            if mounts_token(c) {
                continue;
            }
            match c.get_mut("volumeMounts").and_then(Value::as_array_mut) {
                Some(ms) => ms.push(mount.clone()),
                None => c["volumeMounts"] = json!([mount.clone()]),
            }
        }
    }
    match spec.get_mut("volumes").and_then(Value::as_array_mut) {
        Some(vs) => vs.push(volume),
        None => {
            spec.insert("volumes".into(), json!([volume]));
        }
    }
}
