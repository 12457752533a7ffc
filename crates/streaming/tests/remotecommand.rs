//! exec/attach end to end over loopback TCP: our client against our server for every protocol
//! version over SPDY and WebSocket, with stdin EOF, exit codes, tty resize and refusals.

mod common;

use common::{drive, exec, serve, within};
use http::Uri;
use streaming::remotecommand::{self, Outcome, StreamOptions, TerminalSize};
use streaming::spdy;
use streaming::upgrade::{self, DialError, Target, TcpConnect};

fn target(addr: std::net::SocketAddr, query: &str) -> Target {
    Target::new(
        format!("http://{addr}/exec/ns/pod/c?command=toy&{query}")
            .parse::<Uri>()
            .unwrap(),
    )
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
        let (negotiated, ws) = within(upgrade::client::websocket(
            &TcpConnect::default(),
            &t,
            &[protocol],
        ))
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
