//! The API server's client of kubelets (upstream's `pkg/kubelet/client`): where a node's
//! kubelet listens and an HTTPS connection to it.
//!
//! **Location.** The first node address whose type is in the preferred order
//! (`--kubelet-preferred-address-types`; here `InternalIP, InternalDNS, Hostname,
//! ExternalDNS, ExternalIP`, see [`KubeletOptions::default`]) and `status.daemonEndpoints.kubeletEndpoint.Port`, else the
//! default port 10250.
//!
//! **Credentials.** Each logical cluster's kubelets trust that cluster's CA, so the client
//! certificate is issued by the addressed cluster's own CA: CN `kube-apiserver-kubelet-client`,
//! O `system:masters` (what kubeadm gives kube-apiserver). One TLS configuration per cluster
//! is kept (re-issued daily and when the cluster's CA changes), at most
//! [`MAX_CLUSTERS`] of them.
//!
//! **The kubelet's serving certificate is not verified** unless a CA bundle is configured
//! ([`KubeletOptions::serving_ca_pem`]), which is kube-apiserver's default without
//! `--kubelet-certificate-authority`: kubelets serve self-signed certificates.
//!
//! Dialing gives up after [`KubeletOptions::dial_timeout`] (upstream's 5 s `HTTPTimeout`).

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apimachinery::status::ApiError;
use bytes::Bytes;
use http::{Request, Response, Uri};
use http_body_util::Empty;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use parking_lot::{Mutex, RwLock};
use rustls::pki_types::ServerName;
use serde_json::Value;
use streaming::upgrade::{BoxIo, Connect};
use tokio::net::TcpStream;

use crate::server::ApiServer;

/// How many clusters' kubelet TLS configurations are kept.
pub const MAX_CLUSTERS: usize = 1024;
/// A cluster's client certificate is issued again after this long.
const REISSUE_AFTER: Duration = Duration::from_secs(24 * 3600);
/// The user the API server is at kubelets.
pub const CLIENT_USER: &str = "kube-apiserver-kubelet-client";

/// How kubelets are reached.
#[derive(Debug, Clone)]
pub struct KubeletOptions {
    /// Node address types in the order they are tried.
    pub preferred_address_types: Vec<String>,
    /// The port when a node reports none.
    pub default_port: u16,
    /// How long dialing (TCP and TLS) may take.
    pub dial_timeout: Duration,
    /// CAs the kubelets' serving certificates must chain to; none: not verified.
    pub serving_ca_pem: Option<String>,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        KubeletOptions {
            // InternalIP first, not upstream's Hostname: one control plane serves the nodes of
            // every tenant cluster, and their host names mean nothing to its resolver (Kamaji
            // and the managed offerings order it so too).
            preferred_address_types: [
                "InternalIP",
                "InternalDNS",
                "Hostname",
                "ExternalDNS",
                "ExternalIP",
            ]
            .map(String::from)
            .to_vec(),
            default_port: 10250,
            dial_timeout: Duration::from_secs(5),
            serving_ca_pem: None,
        }
    }
}

/// Where a node's kubelet listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLocation {
    pub host: String,
    pub port: u16,
}

impl NodeLocation {
    /// `host:port`, an IPv6 host in brackets.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// `https://<authority><path_and_query>`.
    pub fn uri(&self, path_and_query: &str) -> Result<Uri, ApiError> {
        format!("https://{}{path_and_query}", self.authority())
            .parse()
            .map_err(|e| ApiError::bad_request(format!("invalid kubelet location: {e}")))
    }
}

/// The location of a node's kubelet as upstream's `NodeConnectionInfoGetter` finds it.
/// Whether a Node is one of Matryoshka's virtual nodes (`spec.providerID: virtual://<name>`):
/// no kubelet listens at its addresses.
pub fn is_virtual(node: &Value) -> bool {
    node.pointer("/spec/providerID")
        .and_then(Value::as_str)
        .is_some_and(|p| p.starts_with("virtual://"))
}

pub fn node_location(node: &Value, options: &KubeletOptions) -> Result<NodeLocation, ApiError> {
    let addresses: Vec<(&str, &str)> = node
        .pointer("/status/addresses")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| Some((x.get("type")?.as_str()?, x.get("address")?.as_str()?)))
                .collect()
        })
        .unwrap_or_default();
    let host = options
        .preferred_address_types
        .iter()
        .find_map(|t| addresses.iter().find(|(ty, _)| ty == t).map(|(_, a)| *a))
        .ok_or_else(|| {
            let known: Vec<String> = addresses
                .iter()
                .map(|(t, a)| format!("{{{t} {a}}}"))
                .collect();
            ApiError::unknown(
                500,
                format!(
                    "no preferred addresses found; known addresses: [{}]",
                    known.join(" ")
                ),
            )
        })?;
    let port = node
        .pointer("/status/daemonEndpoints/kubeletEndpoint/Port")
        .and_then(Value::as_i64)
        .filter(|p| (1..=65535).contains(p))
        .map(|p| p as u16)
        .unwrap_or(options.default_port);
    Ok(NodeLocation {
        host: host.to_string(),
        port,
    })
}

struct CachedTls {
    ca_pem: String,
    issued: Instant,
    config: Arc<rustls::ClientConfig>,
}

/// Kubelet connections for every logical cluster.
#[derive(Default)]
pub struct KubeletClient {
    options: RwLock<Arc<KubeletOptions>>,
    tls: Mutex<HashMap<String, CachedTls>>,
}

impl KubeletClient {
    /// Replaces how kubelets are reached (cached TLS configurations are dropped).
    pub fn configure(&self, options: KubeletOptions) {
        *self.options.write() = Arc::new(options);
        self.tls.lock().clear();
    }

    /// Forgets a deleted cluster's client configuration.
    pub fn forget(&self, cluster: &str) {
        self.tls.lock().remove(cluster);
    }

    /// Clusters with a cached client configuration.
    pub fn cached_clusters(&self) -> usize {
        self.tls.lock().len()
    }

    pub fn options(&self) -> Arc<KubeletOptions> {
        self.options.read().clone()
    }

    /// Where the kubelet of `node` in `cluster` listens (404 for an unknown node).
    pub fn location(
        &self,
        server: &ApiServer,
        cluster: &str,
        node: &str,
    ) -> Result<NodeLocation, ApiError> {
        let obj = server
            .store()
            .cache(cluster)?
            .get("", "nodes", cluster, "", node)
            .ok_or_else(|| ApiError::not_found("nodes", "", node))?
            .value();
        // A virtual node's addresses are made up: never dialled (they may name a real host).
        if is_virtual(&obj) {
            return Err(ApiError::bad_request(format!(
                "node \"{node}\" is a virtual node: it runs no containers and serves no kubelet API"
            )));
        }
        node_location(&obj, &self.options())
    }

    /// Whether `node` of `cluster` is a virtual node (see [`is_virtual`]).
    pub fn is_virtual_node(&self, server: &ApiServer, cluster: &str, node: &str) -> bool {
        server
            .store()
            .cache_for_reads(cluster)
            .get("", "nodes", cluster, "", node)
            .is_some_and(|o| is_virtual(&o.value()))
    }

    /// The TLS client configuration for `cluster`'s kubelets.
    pub fn tls_config(
        &self,
        server: &ApiServer,
        cluster: &str,
    ) -> Result<Arc<rustls::ClientConfig>, ApiError> {
        let ca = crate::tenancy::ca_of(server.control_plane(), cluster)?;
        {
            let cache = self.tls.lock();
            if let Some(c) = cache.get(cluster)
                && c.ca_pem == ca.pair.cert_pem
                && c.issued.elapsed() < REISSUE_AFTER
            {
                return Ok(c.config.clone());
            }
        }
        let pair = ca
            .issue_client(CLIENT_USER, &["system:masters"])
            .map_err(|e| {
                ApiError::internal(format!("issuing the kubelet client certificate: {e}"))
            })?;
        let config = Arc::new(client_config(&pair, &self.options())?);
        let mut cache = self.tls.lock();
        if cache.len() >= MAX_CLUSTERS
            && !cache.contains_key(cluster)
            && let Some(oldest) = cache
                .iter()
                .min_by_key(|(_, c)| c.issued)
                .map(|(k, _)| k.clone())
        {
            cache.remove(&oldest);
        }
        cache.insert(
            cluster.to_string(),
            CachedTls {
                ca_pem: ca.pair.cert_pem,
                issued: Instant::now(),
                config: config.clone(),
            },
        );
        Ok(config)
    }

    /// A connector to `cluster`'s kubelets (TCP, TLS with the cluster's client certificate,
    /// HTTP/1.1, the dial timeout).
    pub fn connector(
        &self,
        server: &ApiServer,
        cluster: &str,
    ) -> Result<Arc<dyn Connect>, ApiError> {
        Ok(Arc::new(KubeletConnect {
            tls: self.tls_config(server, cluster)?,
            timeout: self.options().dial_timeout,
        }))
    }

    /// Sends a GET to a kubelet and returns its response (the body streams).
    pub async fn get(
        &self,
        server: &ApiServer,
        cluster: &str,
        uri: &Uri,
    ) -> Result<Response<Incoming>, ApiError> {
        let failed =
            |e: &dyn std::fmt::Display| ApiError::unknown(500, format!("Get \"{uri}\": {e}"));
        let connector = self.connector(server, cluster)?;
        let io = connector.connect(uri).await.map_err(|e| failed(&e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
            .await
            .map_err(|e| failed(&e))?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
        let req = Request::get(uri.path_and_query().map(|p| p.as_str()).unwrap_or("/"))
            .header(http::header::HOST, host)
            .header(http::header::USER_AGENT, "kube-apiserver")
            .body(Empty::<Bytes>::new())
            .map_err(|e| ApiError::internal(e.to_string()))?;
        sender.send_request(req).await.map_err(|e| failed(&e))
    }
}

/// A dial failure as kube-apiserver reports it (a 500 without a reason, which kubectl prints
/// as `Error from server: error dialing backend: ...`).
pub fn dial_error(uri: &Uri, e: &std::io::Error) -> ApiError {
    let authority = uri.authority().map(|a| a.as_str()).unwrap_or("");
    ApiError::unknown(
        500,
        format!("error dialing backend: dial tcp {authority}: {e}"),
    )
}

/// The TLS configuration of a kubelet client presenting `pair` (the server verified only
/// when `options` name a CA).
pub fn client_config(
    pair: &pki::CertPair,
    options: &KubeletOptions,
) -> Result<rustls::ClientConfig, ApiError> {
    streaming::proxy::client_tls(
        &pair.cert_pem,
        &pair.key_pem,
        options.serving_ca_pem.as_deref(),
    )
    .map_err(|e| ApiError::internal(format!("kubelet client TLS: {e}")))
}

/// A TLS client configuration that verifies nothing of the server (upstream's proxy transport
/// to pods and services), without a client certificate.
pub fn insecure_tls() -> Result<Arc<rustls::ClientConfig>, ApiError> {
    streaming::proxy::insecure_tls()
        .map(Arc::new)
        .map_err(|e| ApiError::internal(format!("proxy TLS: {e}")))
}

/// TCP then TLS to a kubelet, within the dial timeout.
struct KubeletConnect {
    tls: Arc<rustls::ClientConfig>,
    timeout: Duration,
}

impl Connect for KubeletConnect {
    fn connect<'a>(
        &'a self,
        uri: &'a Uri,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<BoxIo>> + Send + 'a>> {
        Box::pin(async move {
            let dial = async {
                let host = uri.host().ok_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::InvalidInput, "no host")
                })?;
                let bare = host.trim_start_matches('[').trim_end_matches(']');
                let port = uri.port_u16().unwrap_or(443);
                let tcp = TcpStream::connect((bare, port)).await?;
                tcp.set_nodelay(true)?;
                let name = ServerName::try_from(bare.to_string())
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
                let tls = tokio_rustls::TlsConnector::from(self.tls.clone())
                    .connect(name, tcp)
                    .await?;
                Ok::<BoxIo, std::io::Error>(Box::new(tls))
            };
            tokio::time::timeout(self.timeout, dial)
                .await
                .map_err(|_| std::io::Error::new(std::io::ErrorKind::TimedOut, "i/o timeout"))?
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_first_preferred_address_type_wins_and_the_reported_port_is_used() {
        let node = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}, {"type": "Hostname", "address": "n1"}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 12345}}
        }});
        let opts = KubeletOptions::default();
        assert_eq!(
            node_location(&node, &opts).unwrap(),
            NodeLocation {
                host: "10.0.0.5".into(),
                port: 12345
            }
        );
        let hostname_first = KubeletOptions {
            preferred_address_types: vec!["Hostname".into(), "InternalIP".into()],
            ..KubeletOptions::default()
        };
        assert_eq!(node_location(&node, &hostname_first).unwrap().host, "n1");
    }

    #[test]
    fn no_reported_port_means_the_default_and_no_address_is_an_error() {
        let node = json!({"status": {"addresses": [{"type": "ExternalIP", "address": "fd00::1"}]}});
        let loc = node_location(&node, &KubeletOptions::default()).unwrap();
        assert_eq!(loc.port, 10250);
        assert_eq!(loc.authority(), "[fd00::1]:10250");
        let only = KubeletOptions {
            preferred_address_types: vec!["InternalIP".into()],
            ..KubeletOptions::default()
        };
        let e = node_location(&node, &only).unwrap_err();
        assert_eq!(
            (e.code, e.reason),
            (500, apimachinery::status::Reason::Unknown)
        );
        assert_eq!(
            e.message,
            "no preferred addresses found; known addresses: [{ExternalIP fd00::1}]"
        );
    }
}
