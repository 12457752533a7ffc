//! Storage printer cases, as `kubectl get pv,pvc,sc,csidrivers,csinodes,volumeattachments` prints them.

use serde_json::json;

use super::*;
use crate::kinds::testutil::{ago, cells, default_names};

#[test]
fn bound_volume_and_claim_print_capacity_modes_and_class() {
    let pv = json!({
        "metadata": {"name": "pvc-1a2b", "creationTimestamp": ago(86_400)},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard",
            "claimRef": {"namespace": "default", "name": "data"}, "volumeMode": "Filesystem"},
        "status": {"phase": "Bound"}
    });
    assert_eq!(
        cells(&PERSISTENT_VOLUME, &pv),
        vec![
            json!("pvc-1a2b"),
            json!("10Gi"),
            json!("RWO"),
            json!("Delete"),
            json!("Bound"),
            json!("default/data"),
            json!("standard"),
            json!("<unset>"),
            json!(""),
            json!("24h"),
            json!("Filesystem")
        ]
    );
    let pvc = json!({
        "metadata": {"name": "data", "creationTimestamp": ago(86_400)},
        "spec": {"volumeName": "pvc-1a2b", "storageClassName": "standard", "resources": {"requests": {"storage": "8Gi"}}},
        "status": {"phase": "Bound", "capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce", "ReadOnlyMany"]}
    });
    assert_eq!(default_names(&PERSISTENT_VOLUME_CLAIM).len(), 8);
    assert_eq!(
        cells(&PERSISTENT_VOLUME_CLAIM, &pvc),
        vec![
            json!("data"),
            json!("Bound"),
            json!("pvc-1a2b"),
            json!("10Gi"),
            json!("RWO,ROX"),
            json!("standard"),
            json!("<unset>"),
            json!("24h"),
            json!("Filesystem")
        ]
    );
}

#[test]
fn pending_claim_has_no_capacity_and_deleting_volume_terminates() {
    let pvc = json!({"metadata": {"name": "wait", "annotations": {"volume.beta.kubernetes.io/storage-class": "legacy"}},
        "spec": {"storageClassName": "fast", "volumeMode": "Block"}, "status": {"phase": "Pending"}});
    let c = cells(&PERSISTENT_VOLUME_CLAIM, &pvc);
    assert_eq!(
        c[1..6],
        [
            json!("Pending"),
            json!(""),
            json!(""),
            json!(""),
            json!("legacy")
        ]
    );
    assert_eq!(c[8], json!("Block"));
    let pv = json!({"metadata": {"name": "old", "deletionTimestamp": ago(1)}, "spec": {}, "status": {"phase": "Released"}});
    let c = cells(&PERSISTENT_VOLUME, &pv);
    assert_eq!(
        c[1..6],
        [
            json!("0"),
            json!(""),
            json!("Retain"),
            json!("Terminating"),
            json!("")
        ]
    );
}

#[test]
fn default_storage_class_is_marked_and_defaults_fill_in() {
    let sc = json!({"metadata": {"name": "standard", "creationTimestamp": ago(600),
        "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"});
    assert_eq!(
        cells(&STORAGE_CLASS, &sc),
        vec![
            json!("standard (default)"),
            json!("rancher.io/local-path"),
            json!("Delete"),
            json!("WaitForFirstConsumer"),
            json!(false),
            json!("10m")
        ]
    );
}

#[test]
fn csi_objects_print_flags_counts_and_capacity() {
    let driver = json!({"metadata": {"name": "ebs.csi.aws.com"}, "spec": {"attachRequired": false,
        "tokenRequests": [{"audience": "sts.amazonaws.com"}, {"audience": "vault"}]}});
    assert_eq!(
        cells(&CSI_DRIVER, &driver)[1..7],
        [
            json!(false),
            json!(false),
            json!(false),
            json!("sts.amazonaws.com,vault"),
            json!(false),
            json!("Persistent")
        ]
    );
    let bare = json!({"metadata": {"name": "d"}, "spec": {"volumeLifecycleModes": ["Persistent", "Ephemeral"]}});
    assert_eq!(
        cells(&CSI_DRIVER, &bare)[4..7],
        [
            json!("<unset>"),
            json!(false),
            json!("Persistent,Ephemeral")
        ]
    );
    let node =
        json!({"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}});
    assert_eq!(cells(&CSI_NODE, &node)[1], json!(2));
    let va = json!({"metadata": {"name": "csi-123"}, "spec": {"attacher": "ebs.csi.aws.com",
        "source": {"persistentVolumeName": "pv-1"}, "nodeName": "n1"}, "status": {"attached": true}});
    assert_eq!(
        cells(&VOLUME_ATTACHMENT, &va)[1..5],
        [
            json!("ebs.csi.aws.com"),
            json!("pv-1"),
            json!("n1"),
            json!(true)
        ]
    );
    assert_eq!(VOLUME_ATTACHMENT.columns[1].format, "name");
    let cap = json!({"metadata": {"name": "csisc-1"}, "storageClassName": "standard", "capacity": "100Gi"});
    assert_eq!(
        cells(&CSI_STORAGE_CAPACITY, &cap),
        vec![json!("csisc-1"), json!("standard"), json!("100Gi")]
    );
    let unknown = json!({"metadata": {"name": "csisc-2"}, "storageClassName": "standard"});
    assert_eq!(cells(&CSI_STORAGE_CAPACITY, &unknown)[2], json!("<unset>"));
}
