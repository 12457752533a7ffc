//! The API server's exec translator: a `v5.channel.k8s.io` WebSocket client through the
//! translator to a SPDY backend (the kubelet's exec endpoint), over loopback TCP.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use common::{drive, exec, serve, within};
use http::{Response, Uri};
use streaming::remotecommand::{self, Outcome, StreamOptions, TerminalSize};
use streaming::translate;
use streaming::upgrade::{self, DialError, Target, TcpConnect};

fn target(addr: SocketAddr, query: &str) -> Target {
    Target::new(
        format!("http://{addr}/exec/ns/pod/c?command=toy&{query}")
            .parse::<Uri>()
            .unwrap(),
    )
}

/// An API server whose pods/exec translates to `backend` (the same query).
async fn apiserver(backend: SocketAddr) -> SocketAddr {
    serve(move |req| async move {
        let query = req.uri().query().unwrap_or("").to_string();
        let options = StreamOptions::from_query(&query).unwrap();
        let backend = Target::new(
            format!("http://{backend}/exec/ns/pod/c?{query}")
                .parse::<Uri>()
                .unwrap(),
        );
        translate::exec(req, options, Arc::new(TcpConnect::default()), backend)
    })
    .await
}

async fn v5_session(
    api: SocketAddr,
    query: &str,
    options: StreamOptions,
) -> remotecommand::ClientSession {
    let (protocol, ws) = within(upgrade::client::websocket(
        &TcpConnect::default(),
        &target(api, query),
        &[remotecommand::V5],
    ))
    .await
    .unwrap();
    assert_eq!(protocol, remotecommand::V5);
    remotecommand::client::start_websocket(ws, &protocol, options).unwrap()
}

#[tokio::test]
async fn a_v5_client_reaches_a_spdy_backend_with_stdin_close_and_exit_code() {
    let kubelet = serve(exec).await;
    let api = apiserver(kubelet).await;
    let options = StreamOptions {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    };
    let session = v5_session(api, "stdin=1&stdout=1&stderr=1", options).await;
    let r = drive(session, Some(b"exit 3"), None).await;
    assert_eq!(r.stdout, b"EXIT 3");
    assert_eq!(r.stderr, b"to stderr");
    assert_eq!(
        r.outcome,
        Outcome::ExitCode {
            code: 3,
            message: "command terminated with exit code 3".into()
        }
    );
}

#[tokio::test]
async fn a_tty_session_relays_resize_through_the_translator() {
    let kubelet = serve(exec).await;
    let api = apiserver(kubelet).await;
    let options = StreamOptions {
        stdin: true,
        stdout: true,
        stderr: false,
        tty: true,
    };
    let session = v5_session(api, "stdin=1&stdout=1&tty=1", options).await;
    let size = TerminalSize {
        width: 80,
        height: 24,
    };
    let r = drive(session, Some(b"x"), Some(size)).await;
    assert_eq!(r.stdout, b"X 80x24");
    assert_eq!(r.outcome, Outcome::Success);
}

#[tokio::test]
async fn an_unreachable_backend_is_an_internal_error_on_the_error_channel() {
    // A port nothing listens on.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap();
    drop(closed);
    let api = apiserver(dead).await;
    let options = StreamOptions {
        stdout: true,
        ..StreamOptions::default()
    };
    let session = v5_session(api, "stdout=1", options).await;
    let r = drive(session, None, None).await;
    match r.outcome {
        Outcome::Failure(msg) => {
            assert!(
                msg.starts_with("Internal error occurred: unable to connect to"),
                "{msg}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_backend_refusal_with_a_status_is_passed_on() {
    let status = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"pod does not exist","reason":"NotFound","code":404}"#;
    let backend = serve(move |_req| async move {
        Response::builder()
            .status(404)
            .header("content-type", "application/json")
            .body(Bytes::from_static(status.as_bytes()))
            .unwrap()
    })
    .await;
    let api = apiserver(backend).await;
    let options = StreamOptions {
        stdout: true,
        ..StreamOptions::default()
    };
    let session = v5_session(api, "stdout=1", options).await;
    let r = drive(session, None, None).await;
    assert_eq!(r.outcome, Outcome::Failure("pod does not exist".into()));
}

#[tokio::test]
async fn the_translator_refuses_clients_that_do_not_offer_v5() {
    let kubelet = serve(exec).await;
    let api = apiserver(kubelet).await;
    let err = upgrade::client::websocket(
        &TcpConnect::default(),
        &target(api, "stdout=1"),
        &[remotecommand::V4],
    )
    .await
    .err()
    .unwrap();
    assert!(
        matches!(&err, DialError::Status { status, .. } if *status == 403),
        "{err:?}"
    );
}
