//! A container's environment, built as the kubelet builds it (upstream
//! `makeEnvironmentVariables` in `pkg/kubelet/kubelet_pods.go`).
//!
//! 1. `envFrom` sources in order: every key of the ConfigMap or Secret, with the prefix; later
//!    sources overwrite earlier ones. A missing object is an error unless `optional`.
//! 2. `env` entries in order: a literal `value` is expanded (`$(NAME)` against the variables
//!    defined so far, then the service variables; unresolved references stay literal, `$$` is
//!    `$`); a `valueFrom` is resolved (`fieldRef`, `resourceFieldRef`, `configMapKeyRef`,
//!    `secretKeyRef`) without expansion. An optional reference that cannot be resolved leaves
//!    the variable out.
//! 3. The service variables not already set.
//!
//! Every error here is what upstream reports, and the agent shows it as the container's
//! waiting reason `CreateContainerConfigError` with the error as the message.
//!
//! The function is pure: the ConfigMaps, Secrets and Services it may read are looked up
//! beforehand ([`EnvContext::load`] through an [`ObjectSource`], or the agent's own caches).
//! The order of the result is deterministic (first definition, then the service variables
//! sorted); upstream's is map order, which carries no meaning since names are unique.

pub mod expand;
pub mod fieldpath;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_cri::v1::KeyValue;
use k8s_openapi::api::core::v1::{ConfigMap, Container, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::kubelet::volumes::{ObjectSource, SourceError};

/// The result of looking an object up.
#[derive(Debug, Clone, PartialEq)]
pub enum Lookup<T> {
    Found(T),
    /// The object does not exist (an `optional` reference is then skipped).
    NotFound,
    /// The lookup failed otherwise; the message is reported as is.
    Failed(String),
}

/// What building a pod's environment may read besides the pod.
#[derive(Debug, Clone, Default)]
pub struct EnvContext {
    /// Every Service the agent knows (all namespaces; only the pod's namespace and
    /// `default/kubernetes` are used). `None` until the agent's Service list has been read
    /// once: building an environment then fails, as upstream does, so a container never starts
    /// without `KUBERNETES_SERVICE_HOST`.
    pub services: Option<Vec<Service>>,
    /// ConfigMaps of the pod's namespace by name; a name absent here counts as not found.
    pub config_maps: BTreeMap<String, Lookup<ConfigMap>>,
    /// Secrets of the pod's namespace by name; a name absent here counts as not found.
    pub secrets: BTreeMap<String, Lookup<Secret>>,
    /// The pod's IPs, primary first (`status.podIP`, `status.podIPs`).
    pub pod_ips: Vec<String>,
    /// The node's IPs, primary first (`status.hostIP`, `status.hostIPs`).
    pub host_ips: Vec<String>,
    /// The node's allocatable resources: the value of `resourceFieldRef` limits a container
    /// does not set.
    pub node_allocatable: BTreeMap<String, Quantity>,
}

/// Why a container's environment could not be built (the container then waits with
/// `CreateContainerConfigError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The agent has not read the Services yet.
    #[error("services have not yet been read at least once, cannot construct envvars")]
    ServicesNotSynced,
    /// The pod was not defaulted by an API server.
    #[error("nil pod.spec.enableServiceLinks encountered, cannot construct envvars")]
    NoEnableServiceLinks,
    /// A referenced ConfigMap or Secret is missing, a key is missing, a lookup failed or a
    /// field reference is invalid: upstream's message, e.g. `configmap "app" not found` or
    /// `couldn't find key level in ConfigMap ns/app`.
    #[error("{0}")]
    Reference(String),
}

/// The names of the ConfigMaps and Secrets the environments of a pod's containers read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvReferences {
    pub config_maps: BTreeSet<String>,
    pub secrets: BTreeSet<String>,
}

/// What the env of every container of `pod` (init, regular and ephemeral) refers to.
pub fn references(pod: &Pod) -> EnvReferences {
    let mut refs = EnvReferences::default();
    for (env_from, env) in containers(pod) {
        for from in env_from.into_iter().flatten() {
            if let Some(cm) = &from.config_map_ref {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &from.secret_ref {
                refs.secrets.insert(s.name.clone());
            }
        }
        for e in env.into_iter().flatten() {
            let Some(from) = &e.value_from else { continue };
            if let Some(cm) = &from.config_map_key_ref {
                refs.config_maps.insert(cm.name.clone());
            }
            if let Some(s) = &from.secret_key_ref {
                refs.secrets.insert(s.name.clone());
            }
        }
    }
    refs
}

type EnvFields<'a> = (
    Option<&'a Vec<k8s_openapi::api::core::v1::EnvFromSource>>,
    Option<&'a Vec<k8s_openapi::api::core::v1::EnvVar>>,
);

/// The env-relevant fields of every container of the pod.
fn containers(pod: &Pod) -> Vec<EnvFields<'_>> {
    let Some(spec) = pod.spec.as_ref() else {
        return Vec::new();
    };
    let mut out: Vec<EnvFields<'_>> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(|c| (c.env_from.as_ref(), c.env.as_ref()))
        .collect();
    out.extend(
        spec.ephemeral_containers
            .iter()
            .flatten()
            .map(|c| (c.env_from.as_ref(), c.env.as_ref())),
    );
    out
}

impl EnvContext {
    /// Looks up every ConfigMap and Secret the pod's environments refer to through `source`,
    /// adding them to `self`.
    pub async fn load(&mut self, source: &dyn ObjectSource, pod: &Pod) {
        let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
        let refs = references(pod);
        for name in refs.config_maps {
            let found = lookup(source.config_map(ns, &name).await);
            self.config_maps.insert(name, found);
        }
        for name in refs.secrets {
            let found = lookup(source.secret(ns, &name).await);
            self.secrets.insert(name, found);
        }
    }
}

fn lookup<T>(r: Result<Option<T>, SourceError>) -> Lookup<T> {
    match r {
        Ok(Some(o)) => Lookup::Found(o),
        Ok(None) => Lookup::NotFound,
        Err(e) => Lookup::Failed(e.to_string()),
    }
}

/// The variables of an environment in definition order, later definitions replacing values.
#[derive(Default)]
struct Ordered {
    vars: Vec<(String, String)>,
    index: HashMap<String, usize>,
}

impl Ordered {
    fn set(&mut self, name: String, value: String) {
        match self.index.get(&name) {
            Some(&i) => self.vars[i].1 = value,
            None => {
                self.index.insert(name.clone(), self.vars.len());
                self.vars.push((name, value));
            }
        }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.index.get(name).map(|&i| self.vars[i].1.as_str())
    }
}

/// The environment of `container` (one of `pod`'s), as CRI key-value pairs.
pub fn container_env(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext,
) -> Result<Vec<KeyValue>, ConfigError> {
    let spec = pod.spec.as_ref();
    let enable_links = spec
        .and_then(|s| s.enable_service_links)
        .ok_or(ConfigError::NoEnableServiceLinks)?;
    let services = ctx
        .services
        .as_ref()
        .ok_or(ConfigError::ServicesNotSynced)?;
    let ns = pod.metadata.namespace.as_deref().unwrap_or("default");
    let service_env = runtime::envvars::service_env(services, ns, enable_links);

    let mut env = Ordered::default();
    for from in container.env_from.iter().flatten() {
        let prefix = from.prefix.as_deref().unwrap_or_default();
        if let Some(r) = &from.config_map_ref {
            let optional = r.optional.unwrap_or(false);
            let Some(cm) = config_map(ctx, ns, &r.name, optional)? else {
                continue;
            };
            for (k, v) in cm.data.iter().flatten() {
                env.set(format!("{prefix}{k}"), v.clone());
            }
        } else if let Some(r) = &from.secret_ref {
            let optional = r.optional.unwrap_or(false);
            let Some(s) = secret(ctx, ns, &r.name, optional)? else {
                continue;
            };
            for (k, v) in s.data.iter().flatten() {
                env.set(format!("{prefix}{k}"), bytes_to_string(&v.0));
            }
        }
    }

    for var in container.env.iter().flatten() {
        let literal = var.value.as_deref().unwrap_or_default();
        let value = if !literal.is_empty() {
            expand::expand(literal, |name| {
                env.get(name)
                    .or_else(|| service_env.get(name).map(String::as_str))
                    .map(str::to_string)
                    .unwrap_or_else(|| format!("$({name})"))
            })
        } else if let Some(from) = &var.value_from {
            match resolve_value_from(pod, container, ctx, ns, from)? {
                Some(v) => v,
                None => continue,
            }
        } else {
            String::new()
        };
        env.set(var.name.clone(), value);
    }

    let mut out: Vec<KeyValue> = Vec::with_capacity(env.vars.len() + service_env.len());
    for (k, v) in &service_env {
        if env.get(k).is_none() {
            env.vars.push((k.clone(), v.clone()));
        }
    }
    out.extend(
        env.vars
            .into_iter()
            .map(|(key, value)| KeyValue { key, value }),
    );
    Ok(out)
}

/// A `valueFrom`'s value; `None` when an optional source is missing.
fn resolve_value_from(
    pod: &Pod,
    container: &Container,
    ctx: &EnvContext,
    ns: &str,
    from: &k8s_openapi::api::core::v1::EnvVarSource,
) -> Result<Option<String>, ConfigError> {
    if let Some(f) = &from.field_ref {
        let api_version = f.api_version.as_deref().unwrap_or("v1");
        return pod_field_value(pod, ctx, api_version, &f.field_path)
            .map(Some)
            .map_err(ConfigError::Reference);
    }
    if let Some(r) = &from.resource_field_ref {
        let v = match r.container_name.as_deref().filter(|n| !n.is_empty()) {
            None => fieldpath::container_resource_value(
                r,
                &fieldpath::with_allocatable_limits(container, &ctx.node_allocatable),
            ),
            Some(name) => {
                fieldpath::resource_value_by_container_name(r, pod, name, &ctx.node_allocatable)
            }
        };
        return v.map(Some).map_err(ConfigError::Reference);
    }
    if let Some(r) = &from.config_map_key_ref {
        let optional = r.optional.unwrap_or(false);
        let Some(cm) = config_map(ctx, ns, &r.name, optional)? else {
            return Ok(None);
        };
        return match cm.data.as_ref().and_then(|d| d.get(&r.key)) {
            Some(v) => Ok(Some(v.clone())),
            None if optional => Ok(None),
            None => Err(ConfigError::Reference(format!(
                "couldn't find key {} in ConfigMap {ns}/{}",
                r.key, r.name
            ))),
        };
    }
    if let Some(r) = &from.secret_key_ref {
        let optional = r.optional.unwrap_or(false);
        let Some(s) = secret(ctx, ns, &r.name, optional)? else {
            return Ok(None);
        };
        return match s.data.as_ref().and_then(|d| d.get(&r.key)) {
            Some(v) => Ok(Some(bytes_to_string(&v.0))),
            None if optional => Ok(None),
            None => Err(ConfigError::Reference(format!(
                "couldn't find key {} in Secret {ns}/{}",
                r.key, r.name
            ))),
        };
    }
    Ok(Some(String::new()))
}

/// A pod field for an env variable (upstream `podFieldSelectorRuntimeValue`).
pub fn pod_field_value(
    pod: &Pod,
    ctx: &EnvContext,
    api_version: &str,
    path: &str,
) -> Result<String, String> {
    let path = fieldpath::convert_field_label(api_version, path)?;
    let spec = pod.spec.as_ref();
    match path.as_str() {
        "spec.nodeName" => Ok(spec.and_then(|s| s.node_name.clone()).unwrap_or_default()),
        "spec.serviceAccountName" => Ok(spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default()),
        "status.hostIP" => ctx
            .host_ips
            .first()
            .cloned()
            .ok_or_else(|| "host IP unknown; known addresses: []".to_string()),
        "status.hostIPs" => {
            if ctx.host_ips.is_empty() {
                return Err("host IP unknown; known addresses: []".to_string());
            }
            Ok(ctx.host_ips.join(","))
        }
        "status.podIP" => Ok(ctx.pod_ips.first().cloned().unwrap_or_default()),
        "status.podIPs" => Ok(ctx.pod_ips.join(",")),
        other => fieldpath::extract_field_path(pod, other),
    }
}

/// The ConfigMap `name`: `None` when missing and optional (upstream's manager reports a
/// missing one as `configmap "<name>" not found`).
fn config_map<'a>(
    ctx: &'a EnvContext,
    _ns: &str,
    name: &str,
    optional: bool,
) -> Result<Option<&'a ConfigMap>, ConfigError> {
    match ctx.config_maps.get(name) {
        Some(Lookup::Found(cm)) => Ok(Some(cm)),
        Some(Lookup::Failed(msg)) => Err(ConfigError::Reference(msg.clone())),
        Some(Lookup::NotFound) | None if optional => Ok(None),
        Some(Lookup::NotFound) | None => Err(ConfigError::Reference(format!(
            "configmap {} not found",
            fieldpath::go_quote(name)
        ))),
    }
}

/// The Secret `name`, as [`config_map`] (`secret "<name>" not found`).
fn secret<'a>(
    ctx: &'a EnvContext,
    _ns: &str,
    name: &str,
    optional: bool,
) -> Result<Option<&'a Secret>, ConfigError> {
    match ctx.secrets.get(name) {
        Some(Lookup::Found(s)) => Ok(Some(s)),
        Some(Lookup::Failed(msg)) => Err(ConfigError::Reference(msg.clone())),
        Some(Lookup::NotFound) | None if optional => Ok(None),
        Some(Lookup::NotFound) | None => Err(ConfigError::Reference(format!(
            "secret {} not found",
            fieldpath::go_quote(name)
        ))),
    }
}

/// Secret bytes as an env value: upstream converts without checking UTF-8; invalid sequences
/// become U+FFFD here (an env value is a string in CRI).
fn bytes_to_string(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[cfg(test)]
#[path = "env_tests.rs"]
mod tests;
