//! Port-forward end to end over loopback TCP: SPDY, the legacy WebSocket protocol and the
//! WebSocket tunnel (direct and through the API server's relay), to a real TCP server.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use common::{serve, within};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use streaming::portforward::{self, Duplex, Forwarder};
use streaming::upgrade::{self, DialError, TcpConnect, Target};
use streaming::{spdy, translate};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A TCP server that answers every connection with `pong:`, then echoes until EOF.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = tcp.write_all(b"pong:").await;
                let (mut r, mut w) = tcp.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
            });
        }
    });
    addr
}

/// Forwards every port to the echo server; port 1 fails the way a closed pod port does.
fn forwarder(echo: SocketAddr) -> Arc<dyn Forwarder> {
    Arc::new(move |port: u16, stream: Duplex| async move {
        if port == 1 {
            return Err(format!(
                "error forwarding port {port} to pod abc, uid : connection refused"
            ));
        }
        let tcp = TcpStream::connect(echo).await.map_err(|e| e.to_string())?;
        portforward::pump(stream, tcp).await.map_err(|e| e.to_string())
    })
}

/// The kubelet's port-forward endpoint: SPDY, the legacy WebSocket protocol, or a tunnel.
async fn kubelet(mut req: Request<Incoming>, echo: SocketAddr) -> Response<Bytes> {
    let headers = req.headers().clone();
    if upgrade::is_websocket_request(&headers) {
        let offered = upgrade::offered_websocket_protocols(&headers);
        if offered.iter().any(|p| p.starts_with(portforward::TUNNEL_PREFIX)) {
            let tunnel = format!("{}{}", portforward::TUNNEL_PREFIX, portforward::PROTOCOL_V1);
            let (_, response) = match upgrade::server::accept_websocket(&headers, &[&tunnel]) {
                Ok(ok) => ok,
                Err(e) => return e.response(),
            };
            let on = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let ws = upgrade::server::websocket(on).await.unwrap();
                let (conn, incoming) = portforward::tunnel::serve(ws);
                portforward::spdy::serve(conn, incoming, forwarder(echo), Duration::from_secs(30))
                    .await;
            });
            return response;
        }
        let ports = match portforward::ports_from_query(req.uri().query().unwrap_or(""), "port") {
            Ok(p) => p,
            Err(e) => return upgrade::server::go_http_error(Response::builder().status(400), &e),
        };
        let (protocol, response) =
            match upgrade::server::accept_websocket(&headers, &portforward::WEBSOCKET_PROTOCOLS) {
                Ok(ok) => ok,
                Err(e) => return e.response(),
            };
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let ws = upgrade::server::websocket(on).await.unwrap();
            portforward::websocket::serve(
                ws,
                &protocol,
                &ports,
                forwarder(echo),
                Duration::from_secs(5),
            )
            .await;
        });
        return response;
    }
    let (_, response) = match upgrade::server::accept_spdy(&headers, &[portforward::PROTOCOL_V1]) {
        Ok(ok) => ok,
        Err(e) => return e.response(),
    };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let io = upgrade::server::upgraded(on).await.unwrap();
        let (conn, incoming) = spdy::Connection::new(io, spdy::Role::Server, spdy::Config::default());
        portforward::spdy::serve(conn, incoming, forwarder(echo), Duration::from_secs(30)).await;
    });
    response
}

async fn start_kubelet() -> SocketAddr {
    let echo = echo_server().await;
    serve(move |req| kubelet(req, echo)).await
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
    let (protocol, conn, _incoming) =
        within(portforward::tunnel::dial(&TcpConnect::default(), &target(kubelet, "")))
            .await
            .unwrap();
    assert_eq!(protocol, portforward::PROTOCOL_V1);
    exercise(portforward::spdy::Client::new(conn)).await;
}

#[tokio::test]
async fn the_api_servers_tunnel_relay_reaches_a_spdy_backend() {
    let kubelet = start_kubelet().await;
    let backend = target(kubelet, "");
    let apiserver = serve(move |req| {
        let backend = backend.clone();
        async move { translate::portforward_tunnel(req, Arc::new(TcpConnect::default()), backend).await }
    })
    .await;
    let (protocol, conn, _incoming) =
        within(portforward::tunnel::dial(&TcpConnect::default(), &target(apiserver, "")))
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
            .body(Bytes::from_static(b"Forbidden (user=x, verb=create, resource=nodes, subresource(s)=[proxy])\n"))
            .unwrap()
    })
    .await;
    let target_backend = target(backend, "");
    let apiserver = serve(move |req| {
        let backend = target_backend.clone();
        async move { translate::portforward_tunnel(req, Arc::new(TcpConnect::default()), backend).await }
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
