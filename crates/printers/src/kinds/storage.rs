//! Storage printers: PersistentVolume, PersistentVolumeClaim, StorageClass, CSIDriver,
//! CSINode, VolumeAttachment and CSIStorageCapacity.
//!
//! Quantities (capacity) print as stored; the registry keeps them in canonical form.

use serde_json::Value;

use super::Printer;
use crate::column::{AGE, Def, NAME, Row, b, cells, i, s, wide};
use crate::format::access_modes;
use crate::meta;
use crate::time::Instant;
use crate::value::{at, len, list, opt_bool, opt_quantity, opt_str, str_or_empty};

/// The legacy class annotation upstream still prefers over `storageClassName`.
const BETA_CLASS_ANNOTATION: &str = "volume.beta.kubernetes.io/storage-class";

fn volume_mode(obj: &Value) -> &str {
    // Upstream defaults volumeMode to Filesystem for both volumes and claims.
    opt_str(obj, &["spec", "volumeMode"]).unwrap_or("Filesystem")
}

fn attributes_class(obj: &Value) -> &str {
    opt_str(obj, &["spec", "volumeAttributesClassName"]).unwrap_or("<unset>")
}

fn phase(obj: &Value) -> &str {
    if meta::deleting(obj) {
        return "Terminating";
    }
    // Upstream defaults an empty phase to Pending.
    opt_str(obj, &["status", "phase"])
        .filter(|p| !p.is_empty())
        .unwrap_or("Pending")
}

pub(crate) const PERSISTENT_VOLUME: Printer = Printer {
    columns: &[
        NAME,
        s("Capacity", "Storage capacity of the volume."),
        s(
            "Access Modes",
            "How the volume can be mounted: RWO, ROX, RWX, RWOP.",
        ),
        s(
            "Reclaim Policy",
            "What happens to the volume when its claim is released.",
        ),
        s("Status", "Phase of the volume, or Terminating."),
        s("Claim", "The claim bound to the volume, as namespace/name."),
        s("StorageClass", "Storage class of the volume."),
        s(
            "VolumeAttributesClass",
            "Volume attributes class of the volume.",
        ),
        s("Reason", "Why the volume is in its phase, if it says."),
        AGE,
        wide(
            "VolumeMode",
            "Whether the volume is a filesystem or a raw block device.",
        ),
    ],
    row: persistent_volume,
};

fn persistent_volume(obj: &Value, now: Instant) -> Row {
    let claim = match at(obj, &["spec", "claimRef"]).filter(|c| c.is_object()) {
        Some(c) => format!(
            "{}/{}",
            str_or_empty(c, &["namespace"]),
            str_or_empty(c, &["name"])
        ),
        None => String::new(),
    };
    let class = meta::annotation(obj, BETA_CLASS_ANNOTATION)
        .unwrap_or_else(|| str_or_empty(obj, &["spec", "storageClassName"]));
    let reclaim = opt_str(obj, &["spec", "persistentVolumeReclaimPolicy"])
        .filter(|p| !p.is_empty())
        .unwrap_or("Retain");
    Row::new(cells![
        meta::name(obj),
        opt_quantity(obj, &["spec", "capacity", "storage"]).unwrap_or_else(|| "0".into()),
        access_modes(list(obj, &["spec", "accessModes"])),
        reclaim,
        phase(obj),
        claim,
        class,
        attributes_class(obj),
        str_or_empty(obj, &["status", "reason"]),
        meta::age(obj, now),
        volume_mode(obj),
    ])
}

pub(crate) const PERSISTENT_VOLUME_CLAIM: Printer = Printer {
    columns: &[
        NAME,
        s("Status", "Phase of the claim, or Terminating."),
        s("Volume", "The volume bound to the claim."),
        s("Capacity", "Capacity of the bound volume."),
        s("Access Modes", "Access modes of the bound volume."),
        s("StorageClass", "Storage class the claim asks for."),
        s(
            "VolumeAttributesClass",
            "Volume attributes class the claim asks for.",
        ),
        AGE,
        wide(
            "VolumeMode",
            "Whether the claim wants a filesystem or a raw block device.",
        ),
    ],
    row: persistent_volume_claim,
};

fn persistent_volume_claim(obj: &Value, now: Instant) -> Row {
    let volume = str_or_empty(obj, &["spec", "volumeName"]);
    let (capacity, modes) = if volume.is_empty() {
        (String::new(), String::new())
    } else {
        (
            opt_quantity(obj, &["status", "capacity", "storage"]).unwrap_or_else(|| "0".into()),
            access_modes(list(obj, &["status", "accessModes"])),
        )
    };
    let class = meta::annotation(obj, BETA_CLASS_ANNOTATION)
        .or_else(|| opt_str(obj, &["spec", "storageClassName"]))
        .unwrap_or("");
    Row::new(cells![
        meta::name(obj),
        phase(obj),
        volume,
        capacity,
        modes,
        class,
        attributes_class(obj),
        meta::age(obj, now),
        volume_mode(obj),
    ])
}

pub(crate) const STORAGE_CLASS: Printer = Printer {
    columns: &[
        NAME,
        s(
            "Provisioner",
            "The provisioner creating volumes of this class.",
        ),
        s("ReclaimPolicy", "Reclaim policy of the volumes it creates."),
        s(
            "VolumeBindingMode",
            "When volumes are bound: Immediate or WaitForFirstConsumer.",
        ),
        s(
            "AllowVolumeExpansion",
            "Whether claims of this class may grow.",
        ),
        AGE,
    ],
    row: storage_class,
};

fn storage_class(obj: &Value, now: Instant) -> Row {
    let is_default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|a| meta::annotation(obj, a) == Some("true"));
    let name = if is_default {
        format!("{} (default)", meta::name(obj))
    } else {
        meta::name(obj).to_string()
    };
    Row::new(cells![
        name,
        str_or_empty(obj, &["provisioner"]),
        opt_str(obj, &["reclaimPolicy"]).unwrap_or("Delete"),
        opt_str(obj, &["volumeBindingMode"]).unwrap_or("Immediate"),
        opt_bool(obj, &["allowVolumeExpansion"]).unwrap_or(false),
        meta::age(obj, now),
    ])
}

pub(crate) const CSI_DRIVER: Printer = Printer {
    columns: &[
        NAME,
        b(
            "AttachRequired",
            "Whether volumes need an attach step (VolumeAttachment).",
        ),
        b(
            "PodInfoOnMount",
            "Whether the driver gets pod information on mount.",
        ),
        b(
            "StorageCapacity",
            "Whether the scheduler considers the driver's capacity.",
        ),
        s(
            "TokenRequests",
            "Audiences of the service account tokens passed to the driver.",
        ),
        b(
            "RequiresRepublish",
            "Whether NodePublishVolume is called periodically.",
        ),
        s("Modes", "Volume lifecycle modes the driver supports."),
        AGE,
    ],
    row: csi_driver,
};

fn csi_driver(obj: &Value, now: Instant) -> Row {
    let flag = |field: &str, default: bool| opt_bool(obj, &["spec", field]).unwrap_or(default);
    let token_requests = match at(obj, &["spec", "tokenRequests"]).and_then(Value::as_array) {
        None => "<unset>".to_string(),
        Some(reqs) => reqs
            .iter()
            .map(|r| str_or_empty(r, &["audience"]))
            .collect::<Vec<_>>()
            .join(","),
    };
    let modes: Vec<&str> = list(obj, &["spec", "volumeLifecycleModes"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    // Upstream defaults the modes to [Persistent].
    let modes = if modes.is_empty() {
        "Persistent".to_string()
    } else {
        modes.join(",")
    };
    Row::new(cells![
        meta::name(obj),
        flag("attachRequired", true),
        flag("podInfoOnMount", false),
        flag("storageCapacity", false),
        token_requests,
        flag("requiresRepublish", false),
        modes,
        meta::age(obj, now),
    ])
}

pub(crate) const CSI_NODE: Printer = Printer {
    columns: &[
        NAME,
        i("Drivers", "Number of CSI drivers registered on the node."),
        AGE,
    ],
    row: csi_node,
};

fn csi_node(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        len(obj, &["spec", "drivers"]) as i64,
        meta::age(obj, now)
    ])
}

const ATTACHER: Def = Def {
    name: "Attacher",
    type_: "string",
    format: "name",
    priority: 0,
    description: "The CSI driver attaching the volume.",
};

pub(crate) const VOLUME_ATTACHMENT: Printer = Printer {
    columns: &[
        NAME,
        ATTACHER,
        s("PV", "The persistent volume being attached."),
        s("Node", "The node the volume is attached to."),
        b("Attached", "Whether the attach operation succeeded."),
        AGE,
    ],
    row: volume_attachment,
};

fn volume_attachment(obj: &Value, now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["spec", "attacher"]),
        str_or_empty(obj, &["spec", "source", "persistentVolumeName"]),
        str_or_empty(obj, &["spec", "nodeName"]),
        opt_bool(obj, &["status", "attached"]).unwrap_or(false),
        meta::age(obj, now),
    ])
}

pub(crate) const CSI_STORAGE_CAPACITY: Printer = Printer {
    columns: &[
        NAME,
        s(
            "StorageClassName",
            "The storage class the capacity applies to.",
        ),
        s("Capacity", "Capacity available for new volumes."),
    ],
    row: csi_storage_capacity,
};

fn csi_storage_capacity(obj: &Value, _now: Instant) -> Row {
    Row::new(cells![
        meta::name(obj),
        str_or_empty(obj, &["storageClassName"]),
        opt_quantity(obj, &["capacity"]).unwrap_or_else(|| "<unset>".into()),
    ])
}

#[cfg(test)]
#[path = "storage_tests.rs"]
mod tests;
