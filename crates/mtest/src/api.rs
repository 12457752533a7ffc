//! `mtest api [PATH]`: what a pod's own API call looks like. Reads the service-account token,
//! `ca.crt` and namespace from `/var/run/secrets/kubernetes.io/serviceaccount`, connects to
//! `KUBERNETES_SERVICE_HOST:KUBERNETES_SERVICE_PORT` over TLS verified with that CA, GETs
//! PATH (default `/api/v1/namespaces/<namespace>/pods`) and prints `status: <code>` and the
//! body. Exits 0 on a 2xx answer. `--dir` and `--server host:port` override the defaults.

use std::io::{Read, Write};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::{Args, Failure, Outcome, fail};

pub const SA_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

fn tls_config(ca_pem: &[u8]) -> Result<rustls::ClientConfig, Failure> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        let cert = cert.map_err(|e| fail(format!("ca.crt: {e}")))?;
        roots.add(cert).map_err(|e| fail(format!("ca.crt: {e}")))?;
    }
    if roots.is_empty() {
        return Err(fail(format!(
            "ca.crt holds no certificate ({} bytes)",
            ca_pem.len()
        )));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Ok(rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Undoes `Transfer-Encoding: chunked`.
fn dechunk(mut b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = b.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&b[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok());
        let Some(size) = size.filter(|&s| s > 0) else {
            break;
        };
        let start = eol + 2;
        let end = (start + size).min(b.len());
        out.extend_from_slice(&b[start..end]);
        b = b.get(end + 2..).unwrap_or(&[]);
    }
    out
}

/// Splits a raw HTTP response into its status and decoded body.
pub fn parse_response(raw: &[u8]) -> Option<(u16, Vec<u8>)> {
    let head_end = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..head_end]).ok()?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")
        })
    });
    let body = &raw[head_end + 4..];
    Some((
        status,
        if chunked {
            dechunk(body)
        } else {
            body.to_vec()
        },
    ))
}

pub fn command(args: &Args) -> Outcome {
    let dir = args.flag("dir").unwrap_or(SA_DIR);
    let read = |f: &str| {
        std::fs::read(format!("{dir}/{f}")).map_err(|e| fail(format!("reading {dir}/{f}: {e}")))
    };
    let token = String::from_utf8_lossy(&read("token")?).trim().to_string();
    let ca = read("ca.crt")?;
    let namespace = String::from_utf8_lossy(&read("namespace").unwrap_or_default())
        .trim()
        .to_string();
    let server = match args.flag("server") {
        Some(s) => s.to_string(),
        None => {
            let host = std::env::var("KUBERNETES_SERVICE_HOST")
                .map_err(|_| fail("KUBERNETES_SERVICE_HOST is not set"))?;
            let port = std::env::var("KUBERNETES_SERVICE_PORT").unwrap_or_else(|_| "443".into());
            if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            }
        }
    };
    let path = args
        .pos(0)
        .map(String::from)
        .unwrap_or_else(|| format!("/api/v1/namespaces/{namespace}/pods"));
    let (host, _) = crate::tcp::split_host_port(&server)
        .ok_or_else(|| fail(format!("not host:port: {server}")))?;
    let name = ServerName::try_from(host.to_string()).map_err(|e| fail(format!("{host}: {e}")))?;
    let conn = rustls::ClientConnection::new(Arc::new(tls_config(&ca)?), name)
        .map_err(|e| fail(e.to_string()))?;
    let sock = crate::tcp::connect(&server, Duration::from_secs(10)).map_err(fail)?;
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| fail(e.to_string()))?;
    let mut tls = rustls::StreamOwned::new(conn, sock);
    write!(
        tls,
        "GET {path} HTTP/1.1\r\nHost: {server}\r\nAuthorization: Bearer {token}\r\nAccept: application/json\r\nUser-Agent: mtest\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| fail(format!("sending the request: {e}")))?;
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match tls.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            // A peer that closes without close_notify has still sent everything.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !raw.is_empty() => break,
            Err(e) => return Err(fail(format!("reading the answer: {e}"))),
        }
    }
    let (status, body) = parse_response(&raw).ok_or_else(|| fail("a malformed HTTP answer"))?;
    println!("status: {status}");
    println!("{}", String::from_utf8_lossy(&body));
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(Failure(format!("the API server answered {status}"), 1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunked_and_plain_answers_are_decoded() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        assert_eq!(parse_response(raw), Some((200, b"hello world".to_vec())));
        let raw = b"HTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno";
        assert_eq!(parse_response(raw), Some((403, b"no".to_vec())));
        assert_eq!(parse_response(b"garbage"), None);
    }
}
