//! The web console of `matryoshka up` at `/console/`, driven over HTTPS with curl as a browser
//! without JavaScript would: sign in with a token, the session in a cookie, the cluster list,
//! a TenantCluster created from the form (and refused with the field error first), signing
//! out.

mod support;

use std::path::Path;
use std::process::Command;

use support::{Backend, Server};

/// A curl run: the status code, the headers and the body.
struct Fetched {
    code: u16,
    headers: String,
    body: String,
}

fn curl(server: &Server, jar: &Path, path: &str, form: &[(&str, &str)]) -> Fetched {
    let url = format!("https://127.0.0.1:{}{path}", server.port);
    let mut cmd = Command::new("curl");
    cmd.args(["-sk", "--max-time", "30", "-D", "-", "-o", "-"])
        .arg("-c")
        .arg(jar)
        .arg("-b")
        .arg(jar);
    for (k, v) in form {
        cmd.arg("--data-urlencode").arg(format!("{k}={v}"));
    }
    let out = cmd.arg(&url).output().expect("run curl");
    assert!(
        out.status.success(),
        "curl {url}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (headers, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let code = headers
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    Fetched {
        code,
        headers: headers.to_lowercase(),
        body: body.to_string(),
    }
}

#[test]
fn a_user_signs_in_with_a_token_lists_and_creates_tenant_clusters_and_signs_out() {
    let server = Server::start(Backend::Embedded);
    let kubectl = server.kubectl("1.33");
    let token = server.admin_token();
    let dir = tempfile::tempdir().expect("tempdir");
    let jar = dir.path().join("cookies");

    // Without a session, pages send to sign-in; the style sheet is served.
    let home = curl(&server, &jar, "/console/", &[]);
    assert_eq!(home.code, 303, "{}", home.headers);
    assert!(home.headers.contains("location: /console/sign-in"));
    let css = curl(&server, &jar, "/console/static/console.css", &[]);
    assert!(css.code == 200 && css.headers.contains("content-type: text/css"));
    let page = curl(&server, &jar, "/console/sign-in", &[]);
    assert!(page.code == 200 && page.body.contains("Bearer token"));
    assert!(
        page.headers
            .contains("content-security-policy: default-src 'self'")
    );

    // A token the server does not accept is refused; a good one starts a session.
    let bad = curl(
        &server,
        &jar,
        "/console/sign-in",
        &[("token", "not-a-token")],
    );
    assert_eq!(bad.code, 401, "{}", bad.body);
    assert!(bad.body.contains("did not accept this token"));
    let signed = curl(&server, &jar, "/console/sign-in", &[("token", &token)]);
    assert_eq!(signed.code, 303, "{}", signed.body);
    assert!(signed.headers.contains("set-cookie: matryoshka-console="));
    assert!(signed.headers.contains("httponly") && signed.headers.contains("samesite=strict"));
    let home = curl(&server, &jar, "/console/", &[]);
    assert_eq!(home.code, 200, "{}", home.body);
    assert!(home.body.contains("system:serviceaccount:default:ops"));

    let list = "/console/namespaces/tenant-root/tenantclusters";
    let page = curl(&server, &jar, list, &[]);
    assert_eq!(page.code, 200, "{}", page.body);
    assert!(page.body.contains("Create a tenant cluster"));
    let refused = curl(
        &server,
        &jar,
        &format!("{list}/new"),
        &[
            ("metadata.name", "demo"),
            ("spec.controlPlane.replicas", "0"),
        ],
    );
    assert_eq!(refused.code, 422, "{}", refused.body);
    assert!(
        refused.body.contains("spec.controlPlane.replicas"),
        "{}",
        refused.body
    );
    kubectl
        .run(&["get", "tenantcluster", "demo", "-n", "tenant-root"])
        .fails(1);
    let created = curl(
        &server,
        &jar,
        &format!("{list}/new"),
        &[
            ("metadata.name", "demo"),
            ("spec.workers.provider", "virtual"),
        ],
    );
    assert_eq!(created.code, 303, "{}", created.body);
    assert!(created.headers.contains(&format!("location: {list}/demo")));
    kubectl
        .run(&[
            "get",
            "tenantcluster",
            "demo",
            "-n",
            "tenant-root",
            "-o",
            "jsonpath={.spec.workers.provider}",
        ])
        .ok()
        .out("virtual");
    let detail = curl(&server, &jar, &format!("{list}/demo"), &[]);
    assert_eq!(detail.code, 200, "{}", detail.body);
    assert!(detail.body.contains("Tenant cluster demo"));

    // The table's rows come again live, as server-sent events (curl stops after 3 s).
    let url = format!(
        "https://127.0.0.1:{}/console/live/namespaces/tenant-root/tenantclusters",
        server.port
    );
    let out = Command::new("curl")
        .args(["-skN", "--max-time", "3", "-b"])
        .arg(&jar)
        .arg(&url)
        .output()
        .expect("run curl");
    let events = String::from_utf8_lossy(&out.stdout);
    assert!(events.starts_with("event: rows\ndata: "), "{events}");
    assert!(events.contains(">demo</a>"), "{events}");
    // A stream still open when the server stops ends with the drain, not after its timeout.
    let mut open = Command::new("curl")
        .args(["-skN", "--max-time", "120", "-b"])
        .arg(&jar)
        .arg(&url)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run curl");
    let mut first = [0u8; 12];
    std::io::Read::read_exact(open.stdout.as_mut().expect("stdout"), &mut first).expect("an event");
    assert_eq!(&first, b"event: rows\n");

    // Signing out ends the session.
    let out = curl(&server, &jar, "/console/sign-out", &[("x", "1")]);
    assert_eq!(out.code, 303);
    assert!(out.headers.contains("max-age=0"));
    let after = curl(&server, &jar, list, &[]);
    assert_eq!(after.code, 303, "{}", after.headers);
    let mut server = server;
    let stopping = std::time::Instant::now();
    let status = server.terminate();
    assert!(status.success(), "{status:?}");
    assert!(
        stopping.elapsed() < std::time::Duration::from_secs(15),
        "the server waited {:?} for an event stream",
        stopping.elapsed()
    );
    let ended = open.wait().expect("curl ends");
    assert!(
        ended.code() != Some(28),
        "curl timed out instead of the stream ending"
    );
}

#[test]
fn a_browser_presenting_a_client_certificate_is_signed_in_with_it() {
    let server = Server::start(Backend::Embedded);
    let dir = tempfile::tempdir().expect("tempdir");
    let (cert, key) = server.write_admin_identity(dir.path());
    let url = format!("https://127.0.0.1:{}/console/", server.port);
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "30", "-D", "-", "--cert"])
        .arg(&cert)
        .arg("--key")
        .arg(&key)
        .arg(&url)
        .output()
        .expect("run curl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with("HTTP/1.1 200") || text.starts_with("HTTP/2 200"),
        "{text}"
    );
    let whoami = server
        .kubectl("1.33")
        .run(&[
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ])
        .ok()
        .stdout
        .clone();
    assert!(
        text.contains(&format!("Signed in as <strong>{whoami}</strong>")),
        "{whoami}: {text}"
    );
    assert!(
        text.contains("<ul class=\"tree\">"),
        "the admin sees the tenant tree"
    );
    // Without it (and no session), the console asks to sign in.
    let jar = dir.path().join("cookies");
    let anonymous = curl(&server, &jar, "/console/", &[]);
    assert_eq!(anonymous.code, 303);
}
