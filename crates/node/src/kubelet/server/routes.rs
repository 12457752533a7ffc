//! The kubelet API's paths (upstream's `InstallDefaultHandlers` and
//! `InstallDebuggingHandlers`), parsed into what they address, with the methods each accepts.

use crate::kubelet::api::{ContainerRef, PodRef};

/// What a path addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// `/exec/{ns}/{pod}[/{uid}]/{container}`
    Exec(ContainerRef),
    /// `/attach/{ns}/{pod}[/{uid}]/{container}`
    Attach(ContainerRef),
    /// `/portForward/{ns}/{pod}[/{uid}]`
    PortForward(PodRef),
    /// `/containerLogs/{ns}/{pod}/{container}`
    ContainerLogs(ContainerRef),
    /// `/run/{ns}/{pod}[/{uid}]/{container}`
    Run(ContainerRef),
    /// `/pods`
    Pods,
    /// `/runningpods/`
    RunningPods,
    /// `/healthz` and its checks (`ping`, `log`, `syncloop`).
    Healthz(Option<String>),
    /// `/stats/summary`
    StatsSummary,
    /// `/metrics/resource`
    ResourceMetrics,
    /// `/metrics`: the server's own request counters.
    Metrics,
    NotFound,
}

impl Route {
    /// The methods the route accepts (upstream's web service routes).
    pub fn methods(&self) -> &'static [&'static str] {
        match self {
            Route::Exec(_) | Route::Attach(_) | Route::PortForward(_) => &["GET", "POST"],
            Route::Run(_) => &["POST"],
            Route::NotFound => &[],
            _ => &["GET"],
        }
    }

    /// The metrics bucket of the route (upstream's `getMetricBucket`).
    pub fn bucket(&self) -> &'static str {
        match self {
            Route::Exec(_) => "exec",
            Route::Attach(_) => "attach",
            Route::PortForward(_) => "portForward",
            Route::ContainerLogs(_) => "containerLogs",
            Route::Run(_) => "run",
            Route::Pods => "pods",
            Route::RunningPods => "runningpods",
            Route::Healthz(_) => "healthz",
            Route::StatsSummary => "stats",
            Route::ResourceMetrics => "metrics/resource",
            Route::Metrics => "metrics",
            Route::NotFound => "other",
        }
    }
}

fn pod(ns: &str, name: &str, uid: Option<&str>) -> PodRef {
    PodRef {
        namespace: ns.to_string(),
        name: name.to_string(),
        uid: uid.map(str::to_string),
    }
}

fn container(ns: &str, name: &str, uid: Option<&str>, c: &str) -> ContainerRef {
    ContainerRef {
        pod: pod(ns, name, uid),
        container: c.to_string(),
    }
}

/// Parses a request path (without its query).
pub fn route(path: &str) -> Route {
    let segs: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    if segs.iter().any(|s| s.is_empty()) && !matches!(segs.as_slice(), ["runningpods", ""]) {
        return match segs.as_slice() {
            ["pods", ""] => Route::Pods,
            ["healthz", ""] => Route::Healthz(None),
            _ => Route::NotFound,
        };
    }
    match segs.as_slice() {
        ["exec", ns, p, c] => Route::Exec(container(ns, p, None, c)),
        ["exec", ns, p, uid, c] => Route::Exec(container(ns, p, Some(uid), c)),
        ["attach", ns, p, c] => Route::Attach(container(ns, p, None, c)),
        ["attach", ns, p, uid, c] => Route::Attach(container(ns, p, Some(uid), c)),
        ["portForward", ns, p] => Route::PortForward(pod(ns, p, None)),
        ["portForward", ns, p, uid] => Route::PortForward(pod(ns, p, Some(uid))),
        ["containerLogs", ns, p, c] => Route::ContainerLogs(container(ns, p, None, c)),
        ["run", ns, p, c] => Route::Run(container(ns, p, None, c)),
        ["run", ns, p, uid, c] => Route::Run(container(ns, p, Some(uid), c)),
        ["pods"] => Route::Pods,
        ["runningpods", ""] | ["runningpods"] => Route::RunningPods,
        ["healthz"] => Route::Healthz(None),
        ["healthz", check] => Route::Healthz(Some(check.to_string())),
        ["stats", "summary"] => Route::StatsSummary,
        ["metrics", "resource"] => Route::ResourceMetrics,
        ["metrics"] => Route::Metrics,
        _ => Route::NotFound,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streaming_paths_take_an_optional_uid() {
        assert_eq!(
            route("/exec/default/web/app"),
            Route::Exec(container("default", "web", None, "app"))
        );
        assert_eq!(
            route("/attach/default/web/1234/app"),
            Route::Attach(container("default", "web", Some("1234"), "app"))
        );
        assert_eq!(
            route("/portForward/default/web"),
            Route::PortForward(pod("default", "web", None))
        );
        assert_eq!(
            route("/portForward/default/web/1234"),
            Route::PortForward(pod("default", "web", Some("1234")))
        );
        // Logs have no uid form.
        assert_eq!(
            route("/containerLogs/default/web/1234/app"),
            Route::NotFound
        );
        assert_eq!(route("/exec/default//app"), Route::NotFound);
    }

    #[test]
    fn the_other_endpoints_and_their_methods() {
        assert_eq!(route("/pods"), Route::Pods);
        assert_eq!(route("/pods/"), Route::Pods);
        assert_eq!(route("/runningpods/"), Route::RunningPods);
        assert_eq!(route("/healthz"), Route::Healthz(None));
        assert_eq!(route("/healthz/ping"), Route::Healthz(Some("ping".into())));
        assert_eq!(route("/stats/summary"), Route::StatsSummary);
        assert_eq!(route("/metrics/resource"), Route::ResourceMetrics);
        assert_eq!(route("/configz"), Route::NotFound);
        assert_eq!(route("/run/a/b/c").methods(), ["POST"]);
        assert_eq!(route("/exec/a/b/c").methods(), ["GET", "POST"]);
        assert_eq!(route("/containerLogs/a/b/c").methods(), ["GET"]);
    }
}
