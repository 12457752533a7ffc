//! `/healthz`, `/livez`, `/readyz` (with `?verbose` and per-check paths), as upstream answers
//! them: `ok` in plain text, or the list of checks.

use http::{Response, StatusCode};

use crate::response::{self, Body};
use crate::server::{ApiServer, Query};

/// The checks each endpoint runs: (name, passing). `etcd` reads the storage's revision.
async fn checks(server: &ApiServer, kind: &str) -> Vec<(&'static str, bool)> {
    let etcd = server.control_plane().storage_healthy().await;
    let mut c = vec![("ping", true), ("log", true), ("etcd", etcd)];
    if kind == "readyz" {
        c.push(("informer-sync", server.is_ready()));
        c.push(("shutdown", server.is_ready()));
    }
    c
}

pub async fn answer(
    server: &ApiServer,
    kind: &str,
    check: Option<&str>,
    query: &Query,
) -> Response<Body> {
    let all = checks(server, kind).await;
    if let Some(name) = check {
        return match all.iter().find(|(n, _)| *n == name) {
            Some((_, true)) => response::text(StatusCode::OK, "ok"),
            Some((n, false)) => response::text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("[-]{n} failed: reason withheld\n"),
            ),
            None => response::text(StatusCode::NOT_FOUND, "404 page not found\n"),
        };
    }
    let excluded: Vec<&str> = query
        .0
        .iter()
        .filter(|(k, _)| k == "exclude")
        .map(|(_, v)| v.as_str())
        .collect();
    let considered: Vec<_> = all.iter().filter(|(n, _)| !excluded.contains(n)).collect();
    let ok = considered.iter().all(|(_, pass)| *pass);
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::INTERNAL_SERVER_ERROR
    };
    if query.has("verbose") || !ok {
        let mut out = String::new();
        for (n, pass) in &all {
            if excluded.contains(n) {
                out.push_str(&format!("[+]{n} excluded: ok\n"));
            } else if *pass {
                out.push_str(&format!("[+]{n} ok\n"));
            } else {
                out.push_str(&format!("[-]{n} failed: reason withheld\n"));
            }
        }
        out.push_str(&format!(
            "{kind} check {}\n",
            if ok { "passed" } else { "failed" }
        ));
        return response::text(status, out);
    }
    response::text(status, "ok")
}
