//! A stand-in for containerd's streaming server: one-shot URLs (`/exec/<token>`,
//! `/attach/<token>`, `/portforward/<token>`) that serve the remote-command and port-forward
//! protocols of the `streaming` crate, SPDY or WebSocket as the client asks, running real
//! local processes in the container's directory and forwarding to loopback ports (the
//! "pod network namespace" of a fake pod is the host's loopback).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use streaming::portforward::{self, Duplex, Forwarder};
use streaming::remotecommand::{self, Outcome, ServerSession, StreamOptions};
use streaming::{spdy, upgrade};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

/// What a token was handed out for.
#[derive(Clone, Debug)]
pub enum Session {
    /// Run `argv` in `dir`.
    Exec {
        argv: Vec<String>,
        dir: PathBuf,
        streams: StreamOptions,
    },
    /// Port-forward to loopback; a WebSocket session's ports (as containerd keeps them
    /// from the CRI request).
    PortForward { ports: Vec<u16> },
}

/// The streaming server.
pub struct Runtime {
    pub addr: SocketAddr,
    sessions: Mutex<HashMap<String, Session>>,
    next: Mutex<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Runtime {
    pub async fn start() -> Arc<Runtime> {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        Arc::new_cyclic(|weak: &std::sync::Weak<Runtime>| {
            let weak = weak.clone();
            let task = tokio::spawn(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    let Some(rt) = weak.upgrade() else { return };
                    tokio::spawn(async move {
                        let svc = service_fn(move |req: Request<Incoming>| {
                            let rt = rt.clone();
                            async move {
                                Ok::<_, std::convert::Infallible>(
                                    rt.serve(req).await.map(Full::new),
                                )
                            }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(TokioIo::new(tcp), svc)
                            .with_upgrades()
                            .await;
                    });
                }
            });
            Runtime {
                addr,
                sessions: Mutex::new(HashMap::new()),
                next: Mutex::new(0),
                task,
            }
        })
    }

    /// A one-shot URL for `session`.
    pub fn url(&self, kind: &str, session: Session) -> String {
        let token = {
            let mut n = self.next.lock();
            *n += 1;
            format!("tok{n}")
        };
        self.sessions.lock().insert(token.clone(), session);
        format!("http://{}/{kind}/{token}", self.addr)
    }

    async fn serve(&self, req: Request<Incoming>) -> Response<Bytes> {
        let token = req
            .uri()
            .path()
            .rsplit('/')
            .next()
            .unwrap_or("")
            .to_string();
        let Some(session) = self.sessions.lock().remove(&token) else {
            return Response::builder()
                .status(StatusCode::NOT_FOUND)
                .body(Bytes::from_static(b"session not found"))
                .unwrap();
        };
        match session {
            Session::Exec { argv, dir, streams } => exec(req, argv, dir, streams),
            Session::PortForward { ports } => port_forward(req, ports),
        }
    }
}

fn exec(
    mut req: Request<Incoming>,
    argv: Vec<String>,
    dir: PathBuf,
    opts: StreamOptions,
) -> Response<Bytes> {
    if upgrade::is_websocket_request(req.headers()) {
        let (protocol, response) = match upgrade::server::accept_websocket(
            req.headers(),
            &remotecommand::KUBELET_WEBSOCKET_PROTOCOLS,
        ) {
            Ok(ok) => ok,
            Err(e) => return e.response(),
        };
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let Ok(ws) = upgrade::server::websocket(on).await else {
                return;
            };
            if let Ok(session) = remotecommand::server::accept_websocket(ws, &protocol, opts).await
            {
                run(session, argv, dir).await;
            }
        });
        return response;
    }
    let (protocol, response) =
        match upgrade::server::accept_spdy(req.headers(), &remotecommand::SPDY_PROTOCOLS) {
            Ok(ok) => ok,
            Err(e) => return e.response(),
        };
    let on = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Ok(io) = upgrade::server::upgraded(on).await else {
            return;
        };
        let (conn, incoming) =
            spdy::Connection::new(io, spdy::Role::Server, spdy::Config::default());
        if let Ok(session) = remotecommand::server::accept_spdy(
            conn,
            incoming,
            &protocol,
            opts,
            remotecommand::server::STREAM_CREATION_TIMEOUT,
        )
        .await
        {
            run(session, argv, dir).await;
        }
    });
    response
}

/// Runs the process with the session's streams and reports how it ended.
async fn run(mut session: ServerSession, argv: Vec<String>, dir: PathBuf) {
    session.set_close_wait(Duration::from_secs(5));
    let tty = session.options.tty;
    let mut cmd = if tty {
        // No terminal here: a tty session gets stderr merged into stdout, as a pty would.
        let mut c = tokio::process::Command::new("sh");
        c.arg("-c").arg("exec \"$@\" 2>&1").arg("sh").args(&argv);
        c
    } else {
        let mut c = tokio::process::Command::new(&argv[0]);
        c.args(&argv[1..]);
        c
    };
    cmd.current_dir(&dir)
        .stdin(if session.stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = session
                .finish(Outcome::Failure(format!(
                    "failed to exec in container: exec: {:?}: {e}",
                    argv[0]
                )))
                .await;
            return;
        }
    };
    let stdin = match (session.stdin.take(), child.stdin.take()) {
        (Some(mut from), Some(mut to)) => Some(tokio::spawn(async move {
            let _ = tokio::io::copy(&mut from, &mut to).await;
            let _ = to.shutdown().await;
        })),
        _ => None,
    };
    let out = copy(child.stdout.take(), session.stdout.take());
    let err = copy(child.stderr.take(), session.stderr.take());
    let status = child.wait().await;
    for t in [out, err] {
        let _ = t.await;
    }
    if let Some(t) = stdin {
        t.abort();
    }
    let outcome = match status.ok().and_then(|s| s.code()) {
        Some(0) => Outcome::Success,
        Some(code) => Outcome::ExitCode {
            code,
            message: format!("command terminated with non-zero exit code: exit status {code}"),
        },
        None => Outcome::Failure("the command was killed".into()),
    };
    let _ = session.finish(outcome).await;
}

fn copy<R>(from: Option<R>, to: Option<streaming::io::Writer>) -> tokio::task::JoinHandle<()>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        match (from, to) {
            (Some(mut r), Some(mut w)) => {
                let _ = streaming::io::copy_then_close(&mut r, &mut w).await;
            }
            (Some(mut r), None) => {
                let _ = tokio::io::copy(&mut r, &mut tokio::io::sink()).await;
            }
            (None, Some(mut w)) => {
                let _ = w.shutdown().await;
            }
            (None, None) => {}
        }
    })
}

/// Forwards to `127.0.0.1:<port>`; a closed port is the kubelet's error text.
fn forwarder() -> Arc<dyn Forwarder> {
    Arc::new(|port: u16, stream: Duplex| async move {
        let tcp = TcpStream::connect(("127.0.0.1", port)).await.map_err(|e| {
            format!("error forwarding port {port} to pod fake, uid : failed to connect to localhost:{port}: {e}")
        })?;
        portforward::pump(stream, tcp)
            .await
            .map_err(|e| e.to_string())
    })
}

fn port_forward(mut req: Request<Incoming>, ports: Vec<u16>) -> Response<Bytes> {
    let headers = req.headers().clone();
    if upgrade::is_websocket_request(&headers) {
        let offered = upgrade::offered_websocket_protocols(&headers);
        if offered
            .iter()
            .any(|p| p.starts_with(portforward::TUNNEL_PREFIX))
        {
            let tunnel = format!("{}{}", portforward::TUNNEL_PREFIX, portforward::PROTOCOL_V1);
            let (_, response) = match upgrade::server::accept_websocket(&headers, &[&tunnel]) {
                Ok(ok) => ok,
                Err(e) => return e.response(),
            };
            let on = hyper::upgrade::on(&mut req);
            tokio::spawn(async move {
                let Ok(ws) = upgrade::server::websocket(on).await else {
                    return;
                };
                let (conn, incoming) = portforward::tunnel::serve(ws);
                portforward::spdy::serve(conn, incoming, forwarder(), Duration::from_secs(30))
                    .await;
            });
            return response;
        }
        if ports.is_empty() {
            return upgrade::server::go_http_error(
                Response::builder().status(400),
                "query parameter \"port\" is required",
            );
        }
        let (protocol, response) =
            match upgrade::server::accept_websocket(&headers, &portforward::WEBSOCKET_PROTOCOLS) {
                Ok(ok) => ok,
                Err(e) => return e.response(),
            };
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let Ok(ws) = upgrade::server::websocket(on).await else {
                return;
            };
            portforward::websocket::serve(
                ws,
                &protocol,
                &ports,
                forwarder(),
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
        let Ok(io) = upgrade::server::upgraded(on).await else {
            return;
        };
        let (conn, incoming) =
            spdy::Connection::new(io, spdy::Role::Server, spdy::Config::default());
        portforward::spdy::serve(conn, incoming, forwarder(), Duration::from_secs(30)).await;
    });
    response
}
