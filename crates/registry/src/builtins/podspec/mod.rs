//! Pod specs, shared by pods, pod templates and every workload that embeds a template:
//! defaulting (`defaults`), compute resources and QoS (`resources`), container and volume
//! validation (`containers`, `env`, `probes`, `volumes`), scheduling constraints
//! (`scheduling`), whole-spec validation (`spec`) and what a pod update
//! may change (`update`), and the warnings upstream sends about specs (`warnings`).

pub(crate) mod containers;
pub(crate) mod defaults;
pub(crate) mod env;
pub(crate) mod probes;
pub(crate) mod resources;
pub(crate) mod scheduling;
pub(crate) mod spec;
pub(crate) mod update;
pub(crate) mod volumes;
pub(crate) mod warnings;

pub(crate) use defaults::{claim_spec as default_claim_spec, template as default_template};
pub(crate) use env::config_map_key_errors;
pub(crate) use spec::{Owner, validate_template};

/// Warnings for the pod spec at JSON pointer `ptr` of `obj`, reported under `path`.
pub(crate) fn spec_warnings(obj: &serde_json::Value, ptr: &str, path: &str) -> Vec<String> {
    match obj.pointer(ptr) {
        Some(spec) if spec.is_object() => {
            warnings::pod_spec_warnings(spec, &apimachinery::field::Path::new(path))
        }
        _ => Vec::new(),
    }
}
