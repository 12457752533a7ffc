//! Port-forward end to end over loopback TCP: SPDY, the legacy WebSocket protocol and the
//! WebSocket tunnel (direct and through the API server's relay), to a real TCP server.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{portforward_endpoint, serve, within};
use http::{Response, Uri};
use streaming::portforward;
use streaming::upgrade::{self, DialError, Target, TcpConnect};
use streaming::{spdy, translate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn start_kubelet() -> SocketAddr {
    let echo = common::echo_server().await;
    serve(move |req| portforward_endpoint(req, echo)).await
}

fn target(addr: SocketAddr, query: &str) -> Target {
    Target::new(
        format!("http://{addr}/portForward/ns/pod{query}")
            .parse::<Uri>()
            .unwrap(),
    )
}

/// Runs three concurrent forwarded connections and one to a failing port over `client`.
async fn exercise(client: portforward::spdy::Client) {
    let client = Arc::new(client);
    let mut tasks = Vec::new();
    for i in 0..3 {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            let forwarded = client.open(8080).await.unwrap();
            let (mut data, error) = forwarded.into_parts();
            let msg = format!("hello {i} ").repeat(20_000);
            data.write_all(msg.as_bytes()).await.unwrap();
            data.shutdown().await.unwrap();
            let mut back = Vec::new();
            data.read_to_end(&mut back).await.unwrap();
            assert_eq!(back, format!("pong:{msg}").as_bytes());
            assert_eq!(error.message().await, None);
        }));
    }
    for t in tasks {
        within(t).await.unwrap();
    }
    let failing = within(client.open(1)).await.unwrap();
    assert_eq!(
        within(failing.error()).await.as_deref(),
        Some("error forwarding port 1 to pod abc, uid : connection refused")
    );
}

#[tokio::test]
async fn spdy_port_forward_carries_concurrent_connections_and_errors() {
    let kubelet = start_kubelet().await;
    let (protocol, conn, _incoming) = within(upgrade::client::spdy(
        &TcpConnect::default(),
        &target(kubelet, ""),
        &[portforward::PROTOCOL_V1],
        spdy::Config::default(),
    ))
    .await
    .unwrap();
    assert_eq!(protocol, portforward::PROTOCOL_V1);
    exercise(portforward::spdy::Client::new(conn)).await;
}

#[tokio::test]
async fn the_websocket_tunnel_carries_spdy_port_forward() {
    let kubelet = start_kubelet().await;
    let (protocol, conn, _incoming) = within(portforward::tunnel::dial(
        &TcpConnect::default(),
        &target(kubelet, ""),
    ))
    .await
    .unwrap();
    assert_eq!(protocol, portforward::PROTOCOL_V1);
    exercise(portforward::spdy::Client::new(conn)).await;
}

#[tokio::test]
async fn the_api_servers_tunnel_relay_reaches_a_spdy_backend() {
    let kubelet = start_kubelet().await;
    let backend = target(kubelet, "");
    let apiserver =
        serve(move |req| {
            let backend = backend.clone();
            async move {
                translate::portforward_tunnel(req, Arc::new(TcpConnect::default()), backend).await
            }
        })
        .await;
    let (protocol, conn, _incoming) = within(portforward::tunnel::dial(
        &TcpConnect::default(),
        &target(apiserver, ""),
    ))
    .await
    .unwrap();
    assert_eq!(protocol, portforward::PROTOCOL_V1);
    exercise(portforward::spdy::Client::new(conn)).await;
}

#[tokio::test]
async fn the_relay_passes_a_backend_refusal_through() {
    // A backend that answers every upgrade with 403, as a kubelet does when unauthorised.
    let backend = serve(|_req| async {
        Response::builder()
            .status(403)
            .body(Bytes::from_static(
                b"Forbidden (user=x, verb=create, resource=nodes, subresource(s)=[proxy])\n",
            ))
            .unwrap()
    })
    .await;
    let target_backend = target(backend, "");
    let apiserver =
        serve(move |req| {
            let backend = target_backend.clone();
            async move {
                translate::portforward_tunnel(req, Arc::new(TcpConnect::default()), backend).await
            }
        })
        .await;
    let err = portforward::tunnel::dial(&TcpConnect::default(), &target(apiserver, ""))
        .await
        .err()
        .unwrap();
    match err {
        DialError::Status { status, body, .. } => {
            assert_eq!(status, 403);
            assert!(body.starts_with(b"Forbidden (user=x"), "{body:?}");
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn legacy_websocket_port_forward_announces_ports_and_carries_data() {
    let kubelet = start_kubelet().await;
    for protocol in ["v4.channel.k8s.io", "v4.base64.channel.k8s.io"] {
        let (negotiated, ws) = within(upgrade::client::websocket(
            &TcpConnect::default(),
            &target(kubelet, "?port=8080,1"),
            &[protocol],
        ))
        .await
        .unwrap();
        assert_eq!(negotiated, protocol);
        let (_mux, ports) = within(portforward::websocket::connect(ws, &negotiated, &[8080, 1]))
            .await
            .unwrap();
        let mut ports = ports.into_iter();
        let mut ok = ports.next().unwrap();
        let mut failing = ports.next().unwrap();
        // WebSocket channels cannot be half-closed, so the echo is read as it comes.
        ok.input.write_all(b"ping").await.unwrap();
        let mut echo = [0u8; 9];
        within(ok.data.read_exact(&mut echo)).await.unwrap();
        assert_eq!(&echo, b"pong:ping");
        let expected = b"error forwarding port 1 to pod abc, uid : connection refused";
        let mut err = vec![0u8; expected.len()];
        within(failing.error.read_exact(&mut err)).await.unwrap();
        assert_eq!(&err[..], &expected[..]);
    }
}

#[tokio::test]
async fn legacy_websocket_port_forward_requires_ports() {
    let kubelet = start_kubelet().await;
    let err = upgrade::client::websocket(
        &TcpConnect::default(),
        &target(kubelet, ""),
        &["v4.channel.k8s.io"],
    )
    .await
    .err()
    .unwrap();
    match err {
        DialError::Status { status, body, .. } => {
            assert_eq!(status, 400);
            assert_eq!(&body[..], b"query parameter \"port\" is required\n");
        }
        other => panic!("{other:?}"),
    }
}
