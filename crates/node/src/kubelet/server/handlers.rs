//! Every request: counted, authenticated, authorized, routed, answered. The endpoints that are
//! not streams or logs live here: `/pods`, `/runningpods/`, `/run`, `/healthz`,
//! `/stats/summary`, `/metrics/resource` and `/metrics` (the server's own request counter,
//! `kubelet_http_requests_total`).

use std::collections::BTreeMap;
use std::sync::Arc;

use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use parking_lot::Mutex;
use rustls::pki_types::CertificateDer;
use serde_json::json;

use super::Shared;
use super::response::{self, Body};
use super::routes::{self, Route};
use crate::kubelet::api::{ApiError, ContainerRef, KubeletApi, Streams};

/// `kubelet_http_requests_total` by (method, path bucket, long running).
#[derive(Default)]
pub struct Counters {
    requests: Mutex<BTreeMap<(String, &'static str, bool), u64>>,
}

impl Counters {
    fn count(&self, method: &Method, bucket: &'static str) {
        let method = match method.as_str() {
            m @ ("OPTIONS" | "GET" | "HEAD" | "POST" | "PUT" | "DELETE" | "TRACE" | "CONNECT") => m,
            _ => "other",
        };
        let long = matches!(bucket, "exec" | "attach" | "portForward");
        *self
            .requests
            .lock()
            .entry((method.to_string(), bucket, long))
            .or_default() += 1;
    }

    fn render(&self) -> String {
        let mut out = String::from(
            "# HELP kubelet_http_requests_total [ALPHA] Number of the http requests received since the server started\n# TYPE kubelet_http_requests_total counter\n",
        );
        for ((method, path, long), n) in self.requests.lock().iter() {
            out.push_str(&format!(
                "kubelet_http_requests_total{{long_running=\"{long}\",method=\"{method}\",path=\"{path}\",server_type=\"readwrite\"}} {n}\n"
            ));
        }
        out
    }
}

fn api_error(e: &ApiError) -> Response<Body> {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response::text(status, e.to_string())
}

/// Answers one request.
pub(crate) async fn handle(
    shared: &Arc<Shared>,
    chain: &[CertificateDer<'static>],
    req: Request<Incoming>,
) -> Response<Body> {
    let route = routes::route(req.uri().path());
    shared.counters.count(req.method(), route.bucket());
    let authorization = req
        .headers()
        .get(http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let user = match shared.auth.authenticate(Some(chain), authorization).await {
        Ok(u) => u,
        Err(e) => return refusal(&e),
    };
    if let Err(e) = shared
        .auth
        .authorize(&user, req.method().as_str(), req.uri().path())
        .await
    {
        return refusal(&e);
    }
    if route == Route::NotFound {
        return response::text(StatusCode::NOT_FOUND, "404: Page Not Found");
    }
    if !route.methods().contains(&req.method().as_str()) {
        return response::text(StatusCode::METHOD_NOT_ALLOWED, "405: Method Not Allowed");
    }
    let api = shared.api.clone();
    let query = req.uri().query().unwrap_or("").to_string();
    match route {
        Route::Exec(target) => {
            let (streams, command) = match stream_options(&query) {
                Ok(x) => x,
                Err(e) => return response::text(StatusCode::BAD_REQUEST, e),
            };
            match api.exec(&target, command, streams).await {
                Ok(url) => {
                    super::proxy::stream(req, &url.0, shared.limits.stream_idle_timeout).await
                }
                Err(e) => api_error(&e),
            }
        }
        Route::Attach(target) => {
            let (streams, _) = match stream_options(&query) {
                Ok(x) => x,
                Err(e) => return response::text(StatusCode::BAD_REQUEST, e),
            };
            match api.attach(&target, streams).await {
                Ok(url) => {
                    super::proxy::stream(req, &url.0, shared.limits.stream_idle_timeout).await
                }
                Err(e) => api_error(&e),
            }
        }
        Route::PortForward(pod) => {
            // Only the WebSocket protocol carries its ports in the query (`NewV4Options`).
            let mut ports = Vec::new();
            if streaming::upgrade::is_websocket_request(req.headers())
                && !streaming::upgrade::offered_websocket_protocols(req.headers())
                    .iter()
                    .any(|p| p.starts_with(streaming::portforward::TUNNEL_PREFIX))
            {
                match streaming::portforward::ports_from_query(&query, "port") {
                    Ok(p) => ports = p,
                    Err(e) => return response::text(StatusCode::BAD_REQUEST, e),
                }
            }
            match api.port_forward(&pod, ports).await {
                Ok(url) => {
                    super::proxy::stream(req, &url.0, shared.limits.stream_idle_timeout).await
                }
                Err(e) => api_error(&e),
            }
        }
        Route::ContainerLogs(target) => super::logs::serve(api, target, &query).await,
        Route::Run(target) => run(api.as_ref(), &target, &query).await,
        Route::Pods => pod_list(api.pods()),
        Route::RunningPods => pod_list(
            api.pods()
                .into_iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .collect(),
        ),
        Route::Healthz(check) => healthz(check.as_deref(), &query),
        Route::StatsSummary => {
            let only = form_urlencoded::parse(query.as_bytes())
                .find(|(k, _)| k == "only_cpu_and_memory")
                .is_some_and(|(_, v)| {
                    matches!(v.as_ref(), "true" | "1" | "t" | "T" | "TRUE" | "True")
                });
            match api.stats_summary(only).await {
                Ok(s) => match serde_json::to_vec(&s) {
                    Ok(b) => response::json(b),
                    Err(e) => response::text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                },
                Err(e) => response::text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            }
        }
        Route::ResourceMetrics => {
            let summary = api.stats_summary(true).await;
            let text = super::metrics::render(summary.as_ref().map_err(|_| ()));
            response::bytes(StatusCode::OK, super::metrics::CONTENT_TYPE, text)
        }
        Route::Metrics => response::bytes(
            StatusCode::OK,
            super::metrics::CONTENT_TYPE,
            shared.counters.render(),
        ),
        Route::NotFound => response::text(StatusCode::NOT_FOUND, "404: Page Not Found"),
    }
}

fn refusal(e: &super::auth::Refusal) -> Response<Body> {
    let status = StatusCode::from_u16(e.status()).unwrap_or(StatusCode::UNAUTHORIZED);
    response::text(status, e.to_string())
}

/// The streams (`stdin=1`...) and the command (`command=` once per argument) of an exec or
/// attach query.
fn stream_options(query: &str) -> Result<(Streams, Vec<String>), String> {
    let o = streaming::remotecommand::StreamOptions::from_query(query)?;
    let command = form_urlencoded::parse(query.as_bytes())
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.into_owned())
        .collect();
    Ok((
        Streams {
            stdin: o.stdin,
            stdout: o.stdout,
            stderr: o.stderr,
            tty: o.tty,
        },
        command,
    ))
}

/// `/run`: `cmd=` split on spaces (the legacy parameter), the combined output answered with
/// the JSON content type upstream gives it; a non-zero exit is a 500 with the CRI client's
/// text.
async fn run(api: &dyn KubeletApi, target: &ContainerRef, query: &str) -> Response<Body> {
    let cmd = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "cmd")
        .map(|(_, v)| v.into_owned())
        .unwrap_or_default();
    let command: Vec<String> = cmd.split(' ').map(str::to_string).collect();
    match api.run(target, command).await {
        Ok(out) => {
            let mut combined = out.stdout;
            combined.extend_from_slice(&out.stderr);
            if out.exit_code != 0 {
                return response::text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!(
                        "command '{cmd}' exited with {}: {}",
                        out.exit_code,
                        String::from_utf8_lossy(&combined)
                    ),
                );
            }
            response::bytes(StatusCode::OK, "application/json", combined)
        }
        Err(e) => response::text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

fn pod_list(pods: Vec<k8s_openapi::api::core::v1::Pod>) -> Response<Body> {
    let list = json!({"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": pods});
    response::json(serde_json::to_vec(&list).unwrap_or_default())
}

/// `/healthz` with upstream's checks (`ping`, `log`, `syncloop`), `?verbose` listing them.
fn healthz(check: Option<&str>, query: &str) -> Response<Body> {
    const CHECKS: [&str; 3] = ["ping", "log", "syncloop"];
    let ok = |body: String| {
        let mut r = response::text(StatusCode::OK, body);
        r.headers_mut().insert(
            "X-Content-Type-Options",
            http::HeaderValue::from_static("nosniff"),
        );
        r
    };
    match check {
        Some(c) if CHECKS.contains(&c) => ok("ok".into()),
        Some(_) => response::text(StatusCode::NOT_FOUND, "404: Page Not Found"),
        None => {
            let verbose = form_urlencoded::parse(query.as_bytes()).any(|(k, _)| k == "verbose");
            if verbose {
                let mut body: String = CHECKS.iter().map(|c| format!("[+]{c} ok\n")).collect();
                body.push_str("healthz check passed\n");
                ok(body)
            } else {
                ok("ok".into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn body(r: Response<Body>) -> String {
        let b = r.into_body().collect().await.unwrap().to_bytes();
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[tokio::test]
    async fn healthz_answers_ok_and_lists_its_checks() {
        assert_eq!(body(healthz(None, "")).await, "ok");
        assert_eq!(
            body(healthz(None, "verbose")).await,
            "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"
        );
        assert_eq!(healthz(Some("nope"), "").status(), 404);
    }

    #[test]
    fn exec_queries_give_streams_and_the_command() {
        let (s, cmd) =
            stream_options("command=sh&command=-c&command=echo%20hi&stdin=1&stdout=1&tty=1")
                .unwrap();
        assert!(s.stdin && s.stdout && s.tty && !s.stderr);
        assert_eq!(cmd, ["sh", "-c", "echo hi"]);
        assert_eq!(
            stream_options("command=ls").unwrap_err(),
            "you must specify at least 1 of stdin, stdout, stderr"
        );
    }

    #[test]
    fn request_counters_render_as_prometheus_text() {
        let c = Counters::default();
        c.count(&Method::GET, "pods");
        c.count(&Method::GET, "pods");
        c.count(&Method::POST, "exec");
        let text = c.render();
        assert!(text.contains(
            "kubelet_http_requests_total{long_running=\"false\",method=\"GET\",path=\"pods\",server_type=\"readwrite\"} 2\n"
        ));
        assert!(text.contains("long_running=\"true\",method=\"POST\",path=\"exec\""));
    }
}
