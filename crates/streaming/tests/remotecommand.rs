//! exec/attach end to end over loopback TCP: our client against our server for every protocol
//! version over SPDY and WebSocket, with stdin EOF, exit codes, tty resize and refusals.

mod common;

use bytes::Bytes;
use common::{read_all, run_toy, serve, within};
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use streaming::remotecommand::{self, Outcome, StreamOptions, TerminalSize};
use streaming::upgrade::{self, DialError, TcpConnect, Target};
use streaming::{io::Writer, spdy};
use tokio::io::AsyncWriteExt;

/// The kubelet's exec endpoint, minus the container: SPDY or WebSocket per the request.
async fn exec(mut req: Request<Incoming>) -> Response<Bytes> {
    let opts = match StreamOptions::from_query(req.uri().query().unwrap_or("")) {
        Ok(o) => o,
        Err(e) => {
            return upgrade::server::go_http_error(Response::builder().status(400), &e);
        }
    };
    if upgrade::is_websocket_request(req.headers()) {
        match upgrade::server::accept_websocket(
            req.headers(),
            &remotecommand::KUBELET_WEBSOCKET_PROTOCOLS
                .iter()
                .chain(&[remotecommand::V5])
                .copied()
                .collect::<Vec<_>>(),
        ) {
            Err(e) => e.response(),
            Ok((protocol, response)) => {
                let on = hyper::upgrade::on(&mut req);
                tokio::spawn(async move {
                    let ws = upgrade::server::websocket(on).await.unwrap();
                    let session =
                        remotecommand::server::accept_websocket(ws, &protocol, opts)
                            .await
                            .unwrap();
                    run_toy(session).await;
                });
                response
            }
        }
    } else {
        match upgrade::server::accept_spdy(req.headers(), &remotecommand::SPDY_PROTOCOLS) {
            Err(e) => e.response(),
            Ok((protocol, response)) => {
                let on = hyper::upgrade::on(&mut req);
                tokio::spawn(async move {
                    let io = upgrade::server::upgraded(on).await.unwrap();
                    let (conn, incoming) =
                        spdy::Connection::new(io, spdy::Role::Server, spdy::Config::default());
                    let session = remotecommand::server::accept_spdy(
                        conn,
                        incoming,
                        &protocol,
                        opts,
                        remotecommand::server::STREAM_CREATION_TIMEOUT,
                    )
                    .await
                    .unwrap();
                    run_toy(session).await;
                });
                response
            }
        }
    }
}

fn target(addr: std::net::SocketAddr, query: &str) -> Target {
    Target::new(
        format!("http://{addr}/exec/ns/pod/c?command=toy&{query}")
            .parse::<Uri>()
            .unwrap(),
    )
}

struct Result_ {
    protocol: String,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    outcome: Outcome,
}

async fn drive(
    mut session: remotecommand::ClientSession,
    stdin: Option<&'static [u8]>,
    resize: Option<TerminalSize>,
) -> Result_ {
    if let (Some(r), Some(size)) = (session.resize.as_mut(), resize) {
        r.send(size).await.unwrap();
    }
    let mut input: Option<Writer> = session.stdin.take();
    let feed = tokio::spawn(async move {
        if let (Some(w), Some(data)) = (input.as_mut(), stdin) {
            w.write_all(data).await.unwrap();
            w.shutdown().await.unwrap();
        }
        input
    });
    let stdout = tokio::spawn(read_all(session.stdout.take()));
    let stderr = tokio::spawn(read_all(session.stderr.take()));
    let outcome = within(session.outcome()).await.unwrap();
    let stdout = within(stdout).await.unwrap();
    let stderr = within(stderr).await.unwrap();
    drop(feed.await.unwrap());
    let protocol = session.protocol.clone();
    within(session.close()).await;
    Result_ {
        protocol,
        stdout,
        stderr,
        outcome,
    }
}

#[tokio::test]
async fn every_spdy_version_runs_a_command_with_stdin_eof_and_its_exit_status() {
    let addr = serve(exec).await;
    for protocol in remotecommand::SPDY_PROTOCOLS {
        let t = target(addr, "stdin=1&stdout=1&stderr=1");
        let (negotiated, conn, _incoming) = within(upgrade::client::spdy(
            &TcpConnect::default(),
            &t,
            &[protocol],
            spdy::Config::default(),
        ))
        .await
        .unwrap();
        assert_eq!(negotiated, protocol);
        let opts = StreamOptions {
            stdin: true,
            stdout: true,
            stderr: true,
            tty: false,
        };
        let session = remotecommand::client::start_spdy(conn, &negotiated, opts)
            .await
            .unwrap();
        let r = drive(session, Some(b"exit 3"), None).await;
        assert_eq!(r.protocol, protocol);
        assert_eq!(r.stdout, b"EXIT 3", "{protocol}");
        assert_eq!(r.stderr, b"to stderr", "{protocol}");
        let expected = match protocol {
            remotecommand::V4 | remotecommand::V5 => Outcome::ExitCode {
                code: 3,
                message: "command terminated with exit code 3".into(),
            },
            // v1 resets its error stream at once, so its failure text never arrives.
            remotecommand::V1 => Outcome::Success,
            _ => Outcome::Failure(
                "error executing remote command: command terminated with non-zero exit code: \
                 command terminated with exit code 3"
                    .into(),
            ),
        };
        assert_eq!(r.outcome, expected, "{protocol}");
    }
}

#[tokio::test]
async fn a_spdy_tty_session_carries_resize_events() {
    let addr = serve(exec).await;
    let t = target(addr, "stdin=1&stdout=1&tty=1");
    let (negotiated, conn, _i) = within(upgrade::client::spdy(
        &TcpConnect::default(),
        &t,
        &[remotecommand::V4, remotecommand::V3],
        spdy::Config::default(),
    ))
    .await
    .unwrap();
    assert_eq!(negotiated, remotecommand::V4);
    let opts = StreamOptions {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: true,
    };
    let session = remotecommand::client::start_spdy(conn, &negotiated, opts)
        .await
        .unwrap();
    assert!(session.stderr.is_none(), "a tty merges stderr into stdout");
    let size = TerminalSize {
        width: 120,
        height: 40,
    };
    let r = drive(session, Some(b"ls"), Some(size)).await;
    assert_eq!(r.stdout, b"LS 120x40");
    assert_eq!(r.outcome, Outcome::Success);
}

#[tokio::test]
async fn every_websocket_protocol_runs_a_command() {
    let addr = serve(exec).await;
    for protocol in [
        remotecommand::V5,
        remotecommand::V4,
        remotecommand::BASE64_V4,
        remotecommand::V1,
        remotecommand::BASE64_V1,
    ] {
        let t = target(addr, "stdout=1&stderr=1");
        let (negotiated, ws) =
            within(upgrade::client::websocket(&TcpConnect::default(), &t, &[protocol]))
                .await
                .unwrap();
        assert_eq!(negotiated, protocol);
        let opts = StreamOptions {
            stdin: false,
            stdout: true,
            stderr: true,
            tty: false,
        };
        let session = remotecommand::client::start_websocket(ws, &negotiated, opts).unwrap();
        let r = drive(session, None, None).await;
        assert_eq!(r.stdout, b"hello", "{protocol}");
        assert_eq!(r.stderr, b"to stderr", "{protocol}");
        assert_eq!(r.outcome, Outcome::Success, "{protocol}");
    }
}

#[tokio::test]
async fn v5_websocket_stdin_eof_reaches_the_command_and_the_exit_code_comes_back() {
    let addr = serve(exec).await;
    let t = target(addr, "stdin=1&stdout=1&stderr=1");
    let (negotiated, ws) = within(upgrade::client::websocket(
        &TcpConnect::default(),
        &t,
        &[remotecommand::V5],
    ))
    .await
    .unwrap();
    let opts = StreamOptions {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    };
    let session = remotecommand::client::start_websocket(ws, &negotiated, opts).unwrap();
    let r = drive(session, Some(b"exit 7"), None).await;
    assert_eq!(r.stdout, b"EXIT 7");
    assert_eq!(
        r.outcome,
        Outcome::ExitCode {
            code: 7,
            message: "command terminated with exit code 7".into()
        }
    );
}

#[tokio::test]
async fn refusals_are_http_errors_a_client_can_fall_back_on() {
    let addr = serve(exec).await;
    let t = target(addr, "stdout=1");
    let err = upgrade::client::spdy(
        &TcpConnect::default(),
        &t,
        &["v9.channel.k8s.io"],
        spdy::Config::default(),
    )
    .await
    .err()
    .unwrap();
    match &err {
        DialError::Status { status, body, .. } => {
            assert_eq!(*status, 403);
            assert!(
                body.starts_with(b"unable to upgrade: unable to negotiate protocol"),
                "{body:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(err.is_upgrade_failure());
    let err = upgrade::client::websocket(&TcpConnect::default(), &t, &["v9.channel.k8s.io"])
        .await
        .err()
        .unwrap();
    assert!(
        matches!(&err, DialError::Status { status, .. } if *status == 403),
        "{err:?}"
    );
    let err = upgrade::client::spdy(
        &TcpConnect::default(),
        &target(addr, "tty=1"),
        &[remotecommand::V4],
        spdy::Config::default(),
    )
    .await
    .err()
    .unwrap();
    assert!(
        matches!(&err, DialError::Status { status, body, .. }
            if *status == 400 && body.as_ref() == b"you must specify at least 1 of stdin, stdout, stderr\n"),
        "{err:?}"
    );
}
