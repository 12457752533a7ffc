//! Pod specs, shared by pods, pod templates and every workload that embeds a template:
//! defaulting (`defaults`), compute resources and QoS (`resources`), container and volume
//! validation (`containers`, `volumes`), whole-spec validation (`spec`) and what a pod update
//! may change (`update`).

pub(crate) mod containers;
pub(crate) mod defaults;
pub(crate) mod resources;
pub(crate) mod spec;
pub(crate) mod update;
pub(crate) mod volumes;

pub(crate) use containers::config_map_key_errors;
pub(crate) use defaults::{claim_spec as default_claim_spec, template as default_template};
pub(crate) use spec::{Owner, validate_template};
