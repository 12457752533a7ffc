//! The probe and hook handlers, as upstream's prober runs them: `exec` through CRI
//! `ExecSync` (exit 0 succeeds), `httpGet` (200 ≤ status < 400 succeeds; host defaults to
//! the pod IP; HTTPS without certificate verification; `User-Agent: kube-probe/<version>`
//! and `Accept: */*` unless overridden; no keep-alive), `tcpSocket` (the connection opens)
//! and `grpc` (`grpc.health.v1.Health/Check` answers `SERVING`). Named ports resolve against
//! the container's ports. Failure messages use upstream's wording.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty};
use k8s_openapi::api::core::v1::{
    Container, ExecAction, GRPCAction, HTTPGetAction, TCPSocketAction,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio::net::TcpStream;

use crate::kubelet::cri::CriClient;

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// With the output or error, for the `Unhealthy` event.
    Failure(String),
}

impl Outcome {
    pub fn ok(&self) -> bool {
        *self == Outcome::Success
    }
}

/// Resolves a probe's port (a number, or a named container port).
pub fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("invalid port number: {n}")),
        IntOrString::String(s) => {
            if let Ok(n) = s.parse::<u16>() {
                return Ok(n);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(s.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| format!("couldn't find port: {s} in {}", container.name))
        }
    }
}

/// Runs `command` in the container.
pub async fn exec(
    cri: &CriClient,
    container_id: &str,
    action: &ExecAction,
    timeout: Duration,
) -> Outcome {
    let cmd = action.command.clone().unwrap_or_default();
    match cri.exec_sync(container_id, cmd.clone(), timeout).await {
        Ok(r) if r.exit_code == 0 => Outcome::Success,
        Ok(r) => {
            let mut out = r.stdout;
            out.extend_from_slice(&r.stderr);
            let text = String::from_utf8_lossy(&out).trim_end().to_string();
            Outcome::Failure(if text.is_empty() {
                format!("command {:?} exited with {}", cmd.join(" "), r.exit_code)
            } else {
                text
            })
        }
        Err(crate::kubelet::cri::CriError::DeadlineExceeded { .. }) => {
            Outcome::Failure(format!("command {:?} timed out", cmd.join(" ")))
        }
        Err(e) => Outcome::Failure(e.message()),
    }
}

fn host_of(explicit: Option<&str>, pod_ip: Option<IpAddr>) -> Result<String, String> {
    match explicit.filter(|h| !h.is_empty()) {
        Some(h) => Ok(h.to_string()),
        None => pod_ip
            .map(|ip| ip.to_string())
            .ok_or_else(|| "the pod has no IP".to_string()),
    }
}

fn authority(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

async fn connect(host: &str, port: u16, timeout: Duration) -> Result<TcpStream, String> {
    let addr = authority(host, port);
    match tokio::time::timeout(timeout, TcpStream::connect(&addr)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("dial tcp {addr}: connect: {}", go_io_error(&e))),
        Err(_) => Err(format!("dial tcp {addr}: i/o timeout")),
    }
}

fn go_io_error(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".into(),
        std::io::ErrorKind::TimedOut => "connection timed out".into(),
        _ => e.to_string(),
    }
}

/// A probe's TCP connection.
pub async fn tcp(
    action: &TCPSocketAction,
    container: &Container,
    pod_ip: Option<IpAddr>,
    timeout: Duration,
) -> Outcome {
    let port = match resolve_port(&action.port, container) {
        Ok(p) => p,
        Err(e) => return Outcome::Failure(e),
    };
    let host = match host_of(action.host.as_deref(), pod_ip) {
        Ok(h) => h,
        Err(e) => return Outcome::Failure(e),
    };
    match connect(&host, port, timeout).await {
        Ok(_) => Outcome::Success,
        Err(e) => Outcome::Failure(e),
    }
}

/// Accepts any server certificate: upstream's HTTPS probes do not verify.
#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn insecure_tls() -> tokio_rustls::TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
        .with_no_client_auth();
    tokio_rustls::TlsConnector::from(Arc::new(config))
}

async fn send<S>(stream: S, req: http::Request<Empty<bytes::Bytes>>) -> Result<u16, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
    let conn = tokio::spawn(conn);
    let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    // Upstream reads (up to 10 KiB of) the body; drain a little so the server is not reset.
    let _ = tokio::time::timeout(Duration::from_millis(100), resp.into_body().collect()).await;
    conn.abort();
    Ok(status)
}

/// A probe's (or hook's) HTTP GET. `user_agent_version` is the kubelet's `major.minor`.
pub async fn http_get(
    action: &HTTPGetAction,
    container: &Container,
    pod_ip: Option<IpAddr>,
    timeout: Duration,
    user_agent_version: &str,
) -> Outcome {
    let port = match resolve_port(&action.port, container) {
        Ok(p) => p,
        Err(e) => return Outcome::Failure(e),
    };
    let host = match host_of(action.host.as_deref(), pod_ip) {
        Ok(h) => h,
        Err(e) => return Outcome::Failure(e),
    };
    let https = action
        .scheme
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("https"));
    let mut path = action.path.clone().unwrap_or_default();
    if !path.starts_with('/') {
        path.insert(0, '/');
    }
    let url = format!(
        "{}://{}{path}",
        if https { "https" } else { "http" },
        authority(&host, port)
    );
    let mut req = http::Request::get(path.as_str());
    let mut has = (false, false, false);
    for h in action.http_headers.iter().flatten() {
        let lower = h.name.to_ascii_lowercase();
        has.0 |= lower == "user-agent";
        has.1 |= lower == "accept";
        has.2 |= lower == "host";
        req = req.header(h.name.as_str(), h.value.as_str());
    }
    if !has.0 {
        req = req.header("User-Agent", format!("kube-probe/{user_agent_version}"));
    }
    if !has.1 {
        req = req.header("Accept", "*/*");
    }
    if !has.2 {
        req = req.header("Host", authority(&host, port));
    }
    let req = match req.header("Connection", "close").body(Empty::new()) {
        Ok(r) => r,
        Err(e) => return Outcome::Failure(e.to_string()),
    };
    let attempt = async {
        let stream = connect(&host, port, timeout).await?;
        if https {
            let name =
                rustls::pki_types::ServerName::try_from(host.clone()).map_err(|e| e.to_string())?;
            let tls = insecure_tls()
                .connect(name, stream)
                .await
                .map_err(|e| e.to_string())?;
            send(tls, req).await
        } else {
            send(stream, req).await
        }
    };
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(code)) if (200..400).contains(&code) => Outcome::Success,
        Ok(Ok(code)) => Outcome::Failure(format!("HTTP probe failed with statuscode: {code}")),
        Ok(Err(e)) => Outcome::Failure(format!("Get {url:?}: {e}")),
        Err(_) => Outcome::Failure(format!(
            "Get {url:?}: context deadline exceeded (Client.Timeout exceeded while awaiting headers)"
        )),
    }
}

/// `grpc.health.v1.HealthCheckRequest`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckRequest {
    #[prost(string, tag = "1")]
    service: String,
}

/// `grpc.health.v1.HealthCheckResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct HealthCheckResponse {
    #[prost(int32, tag = "1")]
    status: i32,
}

fn serving_status(n: i32) -> &'static str {
    match n {
        1 => "SERVING",
        2 => "NOT_SERVING",
        3 => "SERVICE_UNKNOWN",
        _ => "UNKNOWN",
    }
}

/// A gRPC health check.
pub async fn grpc(action: &GRPCAction, pod_ip: Option<IpAddr>, timeout: Duration) -> Outcome {
    let Some(ip) = pod_ip else {
        return Outcome::Failure("the pod has no IP".into());
    };
    let Ok(port) = u16::try_from(action.port) else {
        return Outcome::Failure(format!("invalid port number: {}", action.port));
    };
    let addr = authority(&ip.to_string(), port);
    let Ok(endpoint) = tonic::transport::Endpoint::from_shared(format!("http://{addr}")) else {
        return Outcome::Failure(format!("invalid address {addr}"));
    };
    let channel =
        match tokio::time::timeout(timeout, endpoint.connect_timeout(timeout).connect()).await {
            Ok(Ok(c)) => c,
            _ => {
                return Outcome::Failure(format!(
                    "timeout: failed to connect service {addr:?} within {}s",
                    timeout.as_secs()
                ));
            }
        };
    let mut client = tonic::client::Grpc::new(channel);
    let call = async {
        client.ready().await.map_err(|e| e.to_string())?;
        let path = http::uri::PathAndQuery::from_static("/grpc.health.v1.Health/Check");
        let codec = tonic_prost::ProstCodec::<HealthCheckRequest, HealthCheckResponse>::default();
        let req = tonic::Request::new(HealthCheckRequest {
            service: action.service.clone().unwrap_or_default(),
        });
        client
            .unary(req, path, codec)
            .await
            .map(|r| r.into_inner().status)
            .map_err(|s| format!("rpc error: code = {:?} desc = {}", s.code(), s.message()))
    };
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(1)) => Outcome::Success,
        Ok(Ok(n)) => Outcome::Failure(format!(
            "service unhealthy (responded with {:?})",
            serving_status(n)
        )),
        Ok(Err(e)) => Outcome::Failure(e),
        Err(_) => Outcome::Failure(format!(
            "timeout: health rpc did not complete within {}s",
            timeout.as_secs()
        )),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ContainerPort;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    fn container() -> Container {
        Container {
            name: "c".into(),
            ports: Some(vec![ContainerPort {
                name: Some("http".into()),
                container_port: 8080,
                ..ContainerPort::default()
            }]),
            ..Container::default()
        }
    }

    #[test]
    fn named_ports_resolve_against_the_container() {
        let c = container();
        assert_eq!(
            resolve_port(&IntOrString::String("http".into()), &c),
            Ok(8080)
        );
        assert_eq!(resolve_port(&IntOrString::Int(81), &c), Ok(81));
        assert!(resolve_port(&IntOrString::String("nope".into()), &c).is_err());
    }

    async fn serve_once(status: &'static str) -> (u16, tokio::task::JoinHandle<String>) {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        let task = tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            let mut buf = vec![0u8; 4096];
            let n = s.read(&mut buf).await.expect("read");
            let resp =
                format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
            s.write_all(resp.as_bytes()).await.expect("write");
            String::from_utf8_lossy(&buf[..n]).into_owned()
        });
        (port, task)
    }

    fn action(port: u16) -> HTTPGetAction {
        HTTPGetAction {
            path: Some("/healthz".into()),
            port: IntOrString::Int(i32::from(port)),
            ..HTTPGetAction::default()
        }
    }

    #[tokio::test]
    async fn http_probes_succeed_below_400_and_send_the_kube_probe_agent() {
        let ip = Some("127.0.0.1".parse().expect("ip"));
        let (port, req) = serve_once("200 OK").await;
        let o = http_get(
            &action(port),
            &container(),
            ip,
            Duration::from_secs(1),
            "1.33",
        )
        .await;
        assert_eq!(o, Outcome::Success);
        let req = req.await.expect("request").to_ascii_lowercase();
        assert!(req.starts_with("get /healthz http/1.1"), "{req}");
        assert!(req.contains("user-agent: kube-probe/1.33"), "{req}");
        assert!(req.contains("accept: */*"), "{req}");
        let (port, _) = serve_once("503 Service Unavailable").await;
        let o = http_get(
            &action(port),
            &container(),
            ip,
            Duration::from_secs(1),
            "1.33",
        )
        .await;
        assert_eq!(
            o,
            Outcome::Failure("HTTP probe failed with statuscode: 503".into())
        );
    }

    #[tokio::test]
    async fn a_refused_connection_fails_tcp_and_http_probes_with_the_dial_error() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = l.local_addr().expect("addr").port();
        let ip = Some("127.0.0.1".parse().expect("ip"));
        let tcp_action = TCPSocketAction {
            port: IntOrString::Int(i32::from(port)),
            host: None,
        };
        assert!(
            tcp(&tcp_action, &container(), ip, Duration::from_secs(1))
                .await
                .ok()
        );
        drop(l);
        let o = tcp(&tcp_action, &container(), ip, Duration::from_secs(1)).await;
        assert_eq!(
            o,
            Outcome::Failure(format!(
                "dial tcp 127.0.0.1:{port}: connect: connection refused"
            ))
        );
        let o = http_get(
            &action(port),
            &container(),
            ip,
            Duration::from_secs(1),
            "1.33",
        )
        .await;
        assert!(
            matches!(&o, Outcome::Failure(m) if m.contains("connection refused")),
            "{o:?}"
        );
    }
}
