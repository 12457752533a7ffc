//! The API server's stream translator (`StreamTranslatorHandler`, kube-apiserver 1.30+): it
//! terminates a client's `v5.channel.k8s.io` WebSocket and runs the session against the
//! backend (a kubelet) as a SPDY client offering v4 to v1, relaying stdin (its v5 CLOSE
//! becomes the SPDY stdin FIN), stdout, stderr and resize, and re-encoding the backend's exit
//! status for the client.
//!
//! The WebSocket is accepted first (with the readiness message), so a backend that cannot be
//! reached is reported on the error channel, as upstream does: a refusal that carries a
//! `Status` is passed on, anything else becomes an `InternalError`. The session ends with the
//! status, a close 1000 and a wait for the client's close.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use tokio::io::AsyncWriteExt;

use crate::io::copy_then_close;
use crate::remotecommand::status::Status;
use crate::remotecommand::{
    self, Outcome, StreamOptions, TRANSLATOR_BACKEND_PROTOCOLS, TRANSLATOR_WEBSOCKET_PROTOCOLS,
};
use crate::spdy;
use crate::upgrade::{self, Connect, DialError, Target};

/// The SPDY ping period towards the backend (upstream's translator uses 5 s).
pub const BACKEND_PING_PERIOD: Duration = Duration::from_secs(5);

/// Answers a v5 WebSocket exec or attach request by translating it to SPDY towards
/// `backend`. Returns the response to send (a `101`, or the refusal); the session runs on a
/// spawned task once hyper hands over the upgraded connection.
pub fn exec<B>(
    mut req: Request<B>,
    options: StreamOptions,
    connector: Arc<dyn Connect>,
    backend: Target,
) -> Response<Bytes> {
    let (protocol, response) =
        match upgrade::server::accept_websocket(req.headers(), &TRANSLATOR_WEBSOCKET_PROTOCOLS) {
            Ok(ok) => ok,
            Err(e) => return e.response(),
        };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let ws = match upgrade::server::websocket(on).await {
            Ok(ws) => ws,
            Err(e) => {
                tracing::debug!(error = %e, "translator: websocket upgrade failed");
                return;
            }
        };
        let session = match remotecommand::server::accept_websocket(ws, &protocol, options).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "translator: websocket session failed");
                return;
            }
        };
        run(session, options, connector.as_ref(), &backend).await;
    });
    response
}

/// Runs an accepted client session against the backend (exposed for callers that accept the
/// WebSocket themselves).
pub async fn run(
    mut session: remotecommand::ServerSession,
    options: StreamOptions,
    connector: &dyn Connect,
    backend: &Target,
) {
    let config = spdy::Config {
        ping_interval: Some(BACKEND_PING_PERIOD),
        ..spdy::Config::default()
    };
    let dialed =
        upgrade::client::spdy(connector, backend, &TRANSLATOR_BACKEND_PROTOCOLS, config).await;
    let (protocol, conn) = match dialed {
        Ok((protocol, conn, _incoming)) => (protocol, conn),
        Err(e) => {
            let _ = session.finish(dial_failure(e)).await;
            return;
        }
    };
    let mut client = match remotecommand::client::start_spdy(conn, &protocol, options).await {
        Ok(c) => c,
        Err(e) => {
            let _ = session.finish(Outcome::Failure(e.to_string())).await;
            return;
        }
    };

    // stdin: until the client's v5 CLOSE (EOF here), then FIN to the backend.
    let stdin = match (session.stdin.take(), client.stdin.take()) {
        (Some(mut from), Some(mut to)) => Some(tokio::spawn(async move {
            let _ = copy_then_close(&mut from, &mut to).await;
        })),
        _ => None,
    };
    let resize = match (session.resize.take(), client.resize.take()) {
        (Some(mut from), Some(mut to)) => Some(tokio::spawn(async move {
            while let Some(size) = from.recv().await {
                if to.send(size).await.is_err() {
                    break;
                }
            }
        })),
        _ => None,
    };
    let stdout = relay(client.stdout.take(), session.stdout.take());
    let stderr = relay(client.stderr.take(), session.stderr.take());
    // As client-go: output first, then the error stream.
    for task in [stdout, stderr].into_iter().flatten() {
        let _ = task.await;
    }
    let outcome = match client.outcome().await {
        Ok(Outcome::ExitCode { code, .. }) => Outcome::ExitCode {
            code,
            message: format!("command terminated with exit code {code}"),
        },
        Ok(other) => other,
        Err(e) => Outcome::Failure(e.to_string()),
    };
    for task in [stdin, resize].into_iter().flatten() {
        task.abort();
    }
    client.close().await;
    let _ = session.finish(outcome).await;
}

fn relay(
    from: Option<crate::io::Reader>,
    to: Option<crate::io::Writer>,
) -> Option<tokio::task::JoinHandle<()>> {
    match (from, to) {
        (Some(mut from), Some(mut to)) => Some(tokio::spawn(async move {
            let _ = copy_then_close(&mut from, &mut to).await;
        })),
        (Some(mut from), None) => Some(tokio::spawn(async move {
            let _ = copy_then_close(&mut from, &mut tokio::io::sink()).await;
        })),
        (None, Some(mut to)) => Some(tokio::spawn(async move {
            let _ = to.shutdown().await;
        })),
        (None, None) => None,
    }
}

/// What the client is told when the backend could not be reached.
fn dial_failure(e: DialError) -> Outcome {
    if let DialError::Status { body, .. } = &e
        && let Ok(status) = serde_json::from_slice::<Status>(body)
        && status.status == "Failure"
    {
        return Outcome::Status(Box::new(status));
    }
    Outcome::Failure(e.to_string())
}
