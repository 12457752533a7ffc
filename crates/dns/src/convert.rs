//! Kubernetes objects reduced to the records a [`View`](crate::view::View) keeps: what of a
//! Service, an EndpointSlice or a Pod is visible in DNS, and nothing more.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::view::{EndpointRecord, PortRecord, ServiceKind, ServiceRecord, SliceRecord};

/// The label naming an EndpointSlice's Service (`discovery.k8s.io/v1`).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// The legacy annotation with `publishNotReadyAddresses`' meaning, still named by the DNS
/// specification's definition of _ready_.
pub const TOLERATE_UNREADY_ANNOTATION: &str =
    "service.alpha.kubernetes.io/tolerate-unready-endpoints";

fn protocol(p: Option<&str>) -> Box<str> {
    p.unwrap_or("TCP").to_ascii_lowercase().into_boxed_str()
}

fn port(p: i32) -> Option<u16> {
    u16::try_from(p).ok().filter(|p| *p != 0)
}

/// The record of a Service; `None` for one DNS cannot name (no spec).
pub fn service_record(svc: &Service) -> Option<ServiceRecord> {
    let spec = svc.spec.as_ref()?;
    let kind = if spec.type_.as_deref() == Some("ExternalName") {
        let target = spec.external_name.as_deref().unwrap_or("");
        let target = target.trim_end_matches('.').to_ascii_lowercase();
        ServiceKind::ExternalName(target.into_boxed_str())
    } else {
        let ips: Vec<&str> = match &spec.cluster_ips {
            Some(ips) if !ips.is_empty() => ips.iter().map(String::as_str).collect(),
            _ => spec.cluster_ip.as_deref().into_iter().collect(),
        };
        if ips.contains(&"None") {
            ServiceKind::Headless
        } else {
            let parsed: Vec<IpAddr> = ips.iter().filter_map(|ip| ip.parse().ok()).collect();
            if parsed.is_empty() {
                // Not allocated yet (or unparsable): no address to answer with.
                ServiceKind::ClusterIp(Box::new([]))
            } else {
                ServiceKind::ClusterIp(parsed.into_boxed_slice())
            }
        }
    };
    let ports = spec
        .ports
        .iter()
        .flatten()
        .map(|p| PortRecord {
            name: p
                .name
                .as_deref()
                .unwrap_or("")
                .to_ascii_lowercase()
                .into_boxed_str(),
            protocol: protocol(p.protocol.as_deref()),
            port: port(p.port),
        })
        .collect();
    let tolerate = svc
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(TOLERATE_UNREADY_ANNOTATION))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    Some(ServiceRecord {
        kind,
        ports,
        publish_not_ready: spec.publish_not_ready_addresses.unwrap_or(false) || tolerate,
    })
}

/// The Service an EndpointSlice belongs to (its `kubernetes.io/service-name` label) and its
/// record; `None` for a slice of no Service.
pub fn slice_record(slice: &EndpointSlice) -> Option<(&str, SliceRecord)> {
    let service = slice
        .metadata
        .labels
        .as_ref()?
        .get(SERVICE_NAME_LABEL)?
        .as_str();
    let ports = slice
        .ports
        .iter()
        .flatten()
        .map(|p| PortRecord {
            name: p
                .name
                .as_deref()
                .unwrap_or("")
                .to_ascii_lowercase()
                .into_boxed_str(),
            protocol: protocol(p.protocol.as_deref()),
            port: p.port.and_then(port),
        })
        .collect();
    let endpoints = slice
        .endpoints
        .iter()
        .flat_map(|e| {
            let hostname: Option<Box<str>> = e
                .hostname
                .as_deref()
                .filter(|h| !h.is_empty())
                .map(|h| h.to_ascii_lowercase().into_boxed_str());
            let ready = e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            e.addresses
                .iter()
                .filter_map(|a| a.parse().ok())
                .map(move |address| EndpointRecord {
                    address,
                    hostname: hostname.clone(),
                    ready,
                })
        })
        .collect();
    Some((service, SliceRecord { ports, endpoints }))
}

/// A pod's IPs (`status.podIPs`, else `status.podIP`), for verified pod records.
pub fn pod_ips(pod: &Pod) -> Box<[IpAddr]> {
    let Some(status) = pod.status.as_ref() else {
        return Box::new([]);
    };
    let mut ips: Vec<IpAddr> = status
        .pod_ips
        .iter()
        .flatten()
        .filter_map(|p| p.ip.parse().ok())
        .collect();
    if ips.is_empty() {
        ips.extend(
            status
                .pod_ip
                .as_deref()
                .and_then(|ip| ip.parse::<IpAddr>().ok()),
        );
    }
    ips.into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn svc(v: serde_json::Value) -> Service {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_cluster_ip_service_keeps_its_ips_and_lowercased_ports() {
        let r = service_record(&svc(json!({
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7", "fd00::7"],
                     "ports": [{"name": "HTTP", "port": 80}, {"port": 53, "protocol": "UDP"}]},
        })))
        .unwrap();
        assert_eq!(
            r.kind,
            ServiceKind::ClusterIp(Box::new([
                "10.96.0.7".parse().unwrap(),
                "fd00::7".parse().unwrap()
            ]))
        );
        assert_eq!(&*r.ports[0].name, "http");
        assert_eq!(&*r.ports[0].protocol, "tcp");
        assert_eq!(&*r.ports[1].name, "");
        assert_eq!(&*r.ports[1].protocol, "udp");
        assert!(!r.publish_not_ready);
    }

    #[test]
    fn headless_and_external_name_services_are_told_apart() {
        let h = service_record(&svc(json!({"spec": {"clusterIP": "None"}}))).unwrap();
        assert_eq!(h.kind, ServiceKind::Headless);
        let e = service_record(&svc(
            json!({"spec": {"type": "ExternalName", "externalName": "WWW.Example.com."}}),
        ))
        .unwrap();
        assert_eq!(e.kind, ServiceKind::ExternalName("www.example.com".into()));
    }

    #[test]
    fn the_legacy_annotation_publishes_unready_endpoints() {
        let r = service_record(&svc(json!({
            "metadata": {"annotations": {TOLERATE_UNREADY_ANNOTATION: "true"}},
            "spec": {"clusterIP": "None"},
        })))
        .unwrap();
        assert!(r.publish_not_ready);
    }

    #[test]
    fn a_slice_keeps_readiness_hostnames_and_drops_empty_endpoints() {
        let s: EndpointSlice = serde_json::from_value(json!({
            "metadata": {"name": "db-abc", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "db"}},
            "addressType": "IPv4",
            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.1.0.5"], "hostname": "db-0", "conditions": {"ready": true}},
                {"addresses": ["10.1.0.6"], "conditions": {"ready": false}},
                {"addresses": ["10.1.0.7"]},
                {"addresses": ["not-an-ip"]},
            ],
        }))
        .unwrap();
        let (service, r) = slice_record(&s).unwrap();
        assert_eq!(service, "db");
        assert_eq!(r.endpoints.len(), 3);
        assert_eq!(r.endpoints[0].hostname.as_deref(), Some("db-0"));
        assert!(!r.endpoints[1].ready);
        assert!(r.endpoints[2].ready, "an unset condition means ready");
        assert_eq!(r.ports[0].port, Some(5432));
    }

    #[test]
    fn a_slice_without_a_service_label_is_ignored() {
        let s: EndpointSlice = serde_json::from_value(
            json!({"metadata": {"name": "x"}, "addressType": "IPv4", "endpoints": []}),
        )
        .unwrap();
        assert!(slice_record(&s).is_none());
    }
}
