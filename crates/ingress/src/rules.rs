//! The routing table: which backend answers a request for a host and path, built from the
//! controller's Ingresses as the Ingress API defines matching and ingress-nginx merges them.
//!
//! - A rule's `host` is exact (`foo.example.com`) or a wildcard of one leading label
//!   (`*.example.com` matches `bar.example.com`, not `example.com` nor `a.bar.example.com`);
//!   an exact host is preferred to a wildcard, a wildcard to the rules without a host.
//! - Within a host the longest matching path wins; at equal length `Exact` beats `Prefix`.
//!   `Prefix` matches element by element on `/` (`/foo` matches `/foo`, `/foo/` and
//!   `/foo/bar`, not `/foobar`); a trailing `/` in the rule is ignored.
//!   `ImplementationSpecific` is a prefix, as ingress-nginx treats it without `use-regex`.
//! - Rules of several Ingresses for the same host merge; for the same path and type the
//!   oldest Ingress (then the first by namespace and name) wins, as in ingress-nginx.
//! - A request that matches no rule goes to the oldest Ingress's `defaultBackend`, else it is
//!   answered 404 by the controller itself (ingress-nginx's default backend).

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::networking::v1::{Ingress, IngressBackend};

/// How a rule's path matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathType {
    Exact,
    Prefix,
}

/// A backend a rule names: a Service of the Ingress's namespace and one of its ports.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BackendRef {
    pub namespace: String,
    pub service: String,
    pub port: ServicePort,
}

/// A Service port by number or by name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ServicePort {
    Number(i32),
    Name(String),
}

impl std::fmt::Display for BackendRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.port {
            ServicePort::Number(n) => write!(f, "{}/{}:{n}", self.namespace, self.service),
            ServicePort::Name(n) => write!(f, "{}/{}:{n}", self.namespace, self.service),
        }
    }
}

/// Per-Ingress settings a route carries (from its annotations).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteOptions {
    /// Plain HTTP requests for a host with TLS are redirected to HTTPS (308), unless the
    /// Ingress says `nginx.ingress.kubernetes.io/ssl-redirect: "false"`.
    pub ssl_redirect: bool,
    /// The largest request body accepted (`nginx.ingress.kubernetes.io/proxy-body-size`,
    /// default 1m as nginx's `client_max_body_size`; 0 = unlimited).
    pub max_body: u64,
    /// Which Ingress the route comes from (`namespace/name`), for logs and Events.
    pub ingress: Arc<str>,
}

/// The default request body limit (nginx's `client_max_body_size 1m`).
pub const DEFAULT_MAX_BODY: u64 = 1 << 20;

/// One path of a host.
#[derive(Debug, Clone)]
pub struct Route {
    pub path: String,
    pub path_type: PathType,
    pub backend: BackendRef,
    pub options: Arc<RouteOptions>,
}

/// The routes of one host, best match first when scanned in order.
#[derive(Debug, Clone, Default)]
pub struct HostRoutes {
    routes: Vec<Route>,
}

impl HostRoutes {
    fn sort(&mut self) {
        // Longest first; at equal length Exact before Prefix. Stable: insertion order (the
        // oldest Ingress first) breaks the remaining ties.
        self.routes.sort_by(|a, b| {
            normalized(&b.path)
                .len()
                .cmp(&normalized(&a.path).len())
                .then(a.path_type.cmp(&b.path_type))
        });
    }

    /// The route a request path takes.
    pub fn find(&self, path: &str) -> Option<&Route> {
        self.routes.iter().find(|r| matches(r, path))
    }
}

/// A prefix path without its trailing slashes (`/` stays `/`'s empty prefix).
fn normalized(p: &str) -> &str {
    p.trim_end_matches('/')
}

fn matches(r: &Route, path: &str) -> bool {
    match r.path_type {
        PathType::Exact => r.path == path,
        PathType::Prefix => {
            let prefix = normalized(&r.path);
            match path.strip_prefix(prefix) {
                Some(rest) => rest.is_empty() || rest.starts_with('/'),
                None => false,
            }
        }
    }
}

/// A TLS entry: the hosts a Secret's certificate serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsRef {
    pub namespace: String,
    pub secret: String,
    pub ingress: Arc<str>,
}

/// The whole table.
#[derive(Debug, Clone, Default)]
pub struct Table {
    exact: BTreeMap<String, HostRoutes>,
    /// Keyed by the suffix after `*` (`.example.com`).
    wildcard: BTreeMap<String, HostRoutes>,
    any_host: HostRoutes,
    default_backend: Option<(BackendRef, Arc<RouteOptions>)>,
    /// TLS host (exact or `*.suffix`) → the Secret serving it (first Ingress wins).
    tls: BTreeMap<String, TlsRef>,
}

/// What a request resolves to.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<'a> {
    /// Proxy to this backend.
    Backend(&'a BackendRef, &'a RouteOptions),
    /// Answer 404 (no rule and no default backend).
    NotFound,
}

impl Table {
    /// The table of `ingresses` (already filtered to this controller's class).
    pub fn build(ingresses: &[Arc<Ingress>]) -> Table {
        let mut sorted: Vec<&Arc<Ingress>> = ingresses.iter().collect();
        sorted.sort_by(|a, b| {
            let created = |i: &Ingress| i.metadata.creation_timestamp.as_ref().map(|t| t.0);
            created(a)
                .cmp(&created(b))
                .then_with(|| a.metadata.namespace.cmp(&b.metadata.namespace))
                .then_with(|| a.metadata.name.cmp(&b.metadata.name))
        });
        let mut t = Table::default();
        for ing in sorted {
            let namespace = ing.metadata.namespace.clone().unwrap_or_default();
            let name = ing.metadata.name.clone().unwrap_or_default();
            let options = Arc::new(route_options(ing, &format!("{namespace}/{name}")));
            let Some(spec) = &ing.spec else { continue };
            if t.default_backend.is_none()
                && let Some(b) = spec
                    .default_backend
                    .as_ref()
                    .and_then(|b| backend(&namespace, b))
            {
                t.default_backend = Some((b, options.clone()));
            }
            for tls in spec.tls.iter().flatten() {
                let Some(secret) = tls.secret_name.clone().filter(|s| !s.is_empty()) else {
                    continue;
                };
                for host in tls.hosts.iter().flatten() {
                    t.tls.entry(host.to_ascii_lowercase()).or_insert(TlsRef {
                        namespace: namespace.clone(),
                        secret: secret.clone(),
                        ingress: options.ingress.clone(),
                    });
                }
            }
            for rule in spec.rules.iter().flatten() {
                let host = rule.host.as_deref().unwrap_or("").to_ascii_lowercase();
                let routes = if host.is_empty() {
                    &mut t.any_host
                } else if let Some(suffix) = host.strip_prefix('*') {
                    t.wildcard.entry(suffix.to_string()).or_default()
                } else {
                    t.exact.entry(host).or_default()
                };
                for p in rule.http.iter().flat_map(|h| h.paths.iter()) {
                    let Some(b) = backend(&namespace, &p.backend) else {
                        continue;
                    };
                    let path_type = match p.path_type.as_str() {
                        "Exact" => PathType::Exact,
                        _ => PathType::Prefix,
                    };
                    let path = p
                        .path
                        .clone()
                        .filter(|p| !p.is_empty())
                        .unwrap_or("/".into());
                    // The oldest Ingress keeps a path another one repeats.
                    if routes
                        .routes
                        .iter()
                        .any(|r| r.path == path && r.path_type == path_type)
                    {
                        continue;
                    }
                    routes.routes.push(Route {
                        path,
                        path_type,
                        backend: b,
                        options: options.clone(),
                    });
                }
            }
        }
        for r in t.exact.values_mut().chain(t.wildcard.values_mut()) {
            r.sort();
        }
        t.any_host.sort();
        t
    }

    /// Where a request for `host` (without port, any case) and `path` goes.
    pub fn decide(&self, host: &str, path: &str) -> Decision<'_> {
        let host = host.to_ascii_lowercase();
        let by_host = self
            .exact
            .get(&host)
            .or_else(|| wildcard_of(&host).and_then(|s| self.wildcard.get(s)));
        let route = by_host
            .and_then(|r| r.find(path))
            .or_else(|| self.any_host.find(path));
        match route {
            Some(r) => Decision::Backend(&r.backend, &r.options),
            None => match &self.default_backend {
                Some((b, o)) => Decision::Backend(b, o),
                None => Decision::NotFound,
            },
        }
    }

    /// The Secret serving TLS for `host` (exact first, then a wildcard entry).
    pub fn tls_for(&self, host: &str) -> Option<&TlsRef> {
        let host = host.to_ascii_lowercase();
        self.tls
            .get(&host)
            .or_else(|| wildcard_of(&host).and_then(|s| self.tls.get(&format!("*{s}"))))
    }

    /// Every TLS entry (host → Secret).
    pub fn tls_entries(&self) -> impl Iterator<Item = (&String, &TlsRef)> {
        self.tls.iter()
    }

    /// Every backend the table names (to resolve their endpoints).
    pub fn backends(&self) -> Vec<&BackendRef> {
        let mut out: Vec<&BackendRef> = self
            .exact
            .values()
            .chain(self.wildcard.values())
            .chain(std::iter::once(&self.any_host))
            .flat_map(|h| h.routes.iter().map(|r| &r.backend))
            .chain(self.default_backend.as_ref().map(|(b, _)| b))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// `.example.com` for `foo.example.com` (one label replaced by the wildcard).
fn wildcard_of(host: &str) -> Option<&str> {
    let dot = host.find('.')?;
    (dot > 0).then(|| &host[dot..])
}

fn backend(namespace: &str, b: &IngressBackend) -> Option<BackendRef> {
    let s = b.service.as_ref()?;
    let port = s.port.as_ref()?;
    let port = match (port.number, &port.name) {
        (Some(n), _) => ServicePort::Number(n),
        (None, Some(n)) if !n.is_empty() => ServicePort::Name(n.clone()),
        _ => return None,
    };
    Some(BackendRef {
        namespace: namespace.to_string(),
        service: s.name.clone(),
        port,
    })
}

fn route_options(ing: &Ingress, id: &str) -> RouteOptions {
    let ann = |k: &str| {
        ing.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(&format!("nginx.ingress.kubernetes.io/{k}")))
            .map(String::as_str)
    };
    RouteOptions {
        ssl_redirect: ann("ssl-redirect") != Some("false"),
        max_body: ann("proxy-body-size")
            .and_then(parse_size)
            .unwrap_or(DEFAULT_MAX_BODY),
        ingress: id.into(),
    }
}

/// An nginx size (`8m`, `512k`, `1g`, bytes without a suffix).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok()?.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ingress(ns: &str, name: &str, created: &str, spec: serde_json::Value) -> Arc<Ingress> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"namespace": ns, "name": name, "creationTimestamp": created},
                "spec": spec,
            }))
            .unwrap(),
        )
    }

    fn path(p: &str, ty: &str, svc: &str) -> serde_json::Value {
        json!({"path": p, "pathType": ty, "backend": {"service": {"name": svc, "port": {"number": 80}}}})
    }

    fn svc<'a>(d: &'a Decision<'a>) -> &'a str {
        match d {
            Decision::Backend(b, _) => &b.service,
            Decision::NotFound => "404",
        }
    }

    #[test]
    fn two_hosts_route_to_their_own_services_and_an_unknown_host_is_not_found() {
        let t = Table::build(&[ingress(
            "default",
            "web",
            "2026-01-01T00:00:00Z",
            json!({"rules": [
                {"host": "a.example.com", "http": {"paths": [path("/", "Prefix", "a")]}},
                {"host": "b.example.com", "http": {"paths": [path("/", "Prefix", "b")]}},
            ]}),
        )]);
        assert_eq!(svc(&t.decide("a.example.com", "/x")), "a");
        assert_eq!(svc(&t.decide("B.Example.com", "/")), "b");
        assert_eq!(svc(&t.decide("c.example.com", "/")), "404");
    }

    #[test]
    fn prefix_matches_whole_path_elements_and_the_longest_wins() {
        let t = Table::build(&[ingress(
            "default",
            "web",
            "2026-01-01T00:00:00Z",
            json!({"rules": [{"host": "h", "http": {"paths": [
                path("/", "Prefix", "root"),
                path("/foo/", "Prefix", "foo"),
                path("/foo/bar", "Prefix", "bar"),
            ]}}]}),
        )]);
        assert_eq!(svc(&t.decide("h", "/foo")), "foo");
        assert_eq!(svc(&t.decide("h", "/foo/")), "foo");
        assert_eq!(svc(&t.decide("h", "/foo/baz")), "foo");
        assert_eq!(svc(&t.decide("h", "/foobar")), "root");
        assert_eq!(svc(&t.decide("h", "/foo/bar/x")), "bar");
        assert_eq!(svc(&t.decide("h", "/foo/barx")), "foo");
    }

    #[test]
    fn exact_beats_prefix_of_the_same_path_and_matches_only_itself() {
        let t = Table::build(&[ingress(
            "default",
            "web",
            "2026-01-01T00:00:00Z",
            json!({"rules": [{"host": "h", "http": {"paths": [
                path("/api", "Prefix", "prefix"),
                path("/api", "Exact", "exact"),
            ]}}]}),
        )]);
        assert_eq!(svc(&t.decide("h", "/api")), "exact");
        assert_eq!(svc(&t.decide("h", "/api/")), "prefix");
        assert_eq!(svc(&t.decide("h", "/api/v1")), "prefix");
    }

    #[test]
    fn a_wildcard_host_matches_one_label_and_an_exact_host_is_preferred() {
        let t = Table::build(&[ingress(
            "default",
            "web",
            "2026-01-01T00:00:00Z",
            json!({"rules": [
                {"host": "*.example.com", "http": {"paths": [path("/", "Prefix", "wild")]}},
                {"host": "a.example.com", "http": {"paths": [path("/", "Prefix", "a")]}},
                {"http": {"paths": [path("/any", "Prefix", "any")]}},
            ]}),
        )]);
        assert_eq!(svc(&t.decide("a.example.com", "/")), "a");
        assert_eq!(svc(&t.decide("b.example.com", "/")), "wild");
        assert_eq!(svc(&t.decide("x.b.example.com", "/")), "404");
        assert_eq!(svc(&t.decide("example.com", "/any/1")), "any");
    }

    #[test]
    fn the_oldest_ingress_keeps_a_repeated_path_and_gives_the_default_backend() {
        let old = ingress(
            "a",
            "old",
            "2026-01-01T00:00:00Z",
            json!({"defaultBackend": {"service": {"name": "fallback-old", "port": {"number": 80}}},
                   "rules": [{"host": "h", "http": {"paths": [path("/", "Prefix", "old")]}}]}),
        );
        let new = ingress(
            "b",
            "new",
            "2026-02-01T00:00:00Z",
            json!({"defaultBackend": {"service": {"name": "fallback-new", "port": {"number": 80}}},
                   "rules": [{"host": "h", "http": {"paths": [path("/", "Prefix", "new"), path("/new", "Prefix", "new")]}}]}),
        );
        let t = Table::build(&[new, old]);
        assert_eq!(svc(&t.decide("h", "/")), "old");
        assert_eq!(svc(&t.decide("h", "/new/x")), "new");
        assert_eq!(svc(&t.decide("other", "/")), "fallback-old");
        let d = t.decide("h", "/new");
        let Decision::Backend(b, _) = d else { panic!() };
        assert_eq!(b.namespace, "b");
    }

    #[test]
    fn tls_hosts_name_their_secret_exactly_or_by_wildcard() {
        let t = Table::build(&[ingress(
            "default",
            "web",
            "2026-01-01T00:00:00Z",
            json!({"tls": [{"hosts": ["a.example.com"], "secretName": "a-tls"},
                           {"hosts": ["*.wild.com"], "secretName": "wild-tls"}],
                   "rules": []}),
        )]);
        assert_eq!(t.tls_for("A.example.com").unwrap().secret, "a-tls");
        assert_eq!(t.tls_for("x.wild.com").unwrap().secret, "wild-tls");
        assert!(t.tls_for("b.example.com").is_none());
    }

    #[test]
    fn annotations_set_ssl_redirect_and_the_body_limit() {
        let mut i = (*ingress("d", "n", "2026-01-01T00:00:00Z", json!({}))).clone();
        assert_eq!(route_options(&i, "d/n").max_body, 1 << 20);
        assert!(route_options(&i, "d/n").ssl_redirect);
        i.metadata.annotations = Some(
            [
                (
                    "nginx.ingress.kubernetes.io/ssl-redirect".into(),
                    "false".into(),
                ),
                (
                    "nginx.ingress.kubernetes.io/proxy-body-size".into(),
                    "8m".into(),
                ),
            ]
            .into(),
        );
        let o = route_options(&i, "d/n");
        assert!(!o.ssl_redirect);
        assert_eq!(o.max_body, 8 << 20);
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("12x"), None);
    }
}
