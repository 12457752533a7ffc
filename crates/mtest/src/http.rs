//! `mtest serve-http`: a small HTTP/1.1 server for probes, Services and port-forwarding.
//!
//! - `/` — `mtest <hostname>`; `/hostname` — the hostname; `/clientip` — the peer's
//!   `ip:port` as the server sees it (agnhost's, for source-IP preservation checks);
//! - `/echo?msg=TEXT` — TEXT (a POST echoes its body);
//! - `/healthz` (liveness) and `/readyz` (readiness) — 200 `ok`, or 500 once toggled:
//!   `/set-unhealthy`, `/set-healthy`, `/set-unready`, `/set-ready`, or after
//!   `--fail-liveness-after S` / `--unready-after S` seconds;
//! - `/exit?code=N` — ends the process with N.
//!
//! Every answer closes its connection (probes open a new one each time anyway).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::{Args, Outcome, fail};

struct State {
    started: Instant,
    unhealthy: AtomicBool,
    unready: AtomicBool,
    fail_liveness_after: Option<Duration>,
    unready_after: Option<Duration>,
}

impl State {
    fn healthy(&self) -> bool {
        !self.unhealthy.load(Ordering::Relaxed)
            && self
                .fail_liveness_after
                .is_none_or(|d| self.started.elapsed() < d)
    }

    fn ready(&self) -> bool {
        !self.unready.load(Ordering::Relaxed)
            && self
                .unready_after
                .is_none_or(|d| self.started.elapsed() < d)
    }
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

pub fn serve(args: &Args) -> Outcome {
    let port: u16 = args
        .flag("port")
        .or(args.pos(0))
        .unwrap_or("8080")
        .parse()
        .map_err(|_| fail("--port: not a port"))?;
    let state = Arc::new(State {
        started: Instant::now(),
        unhealthy: AtomicBool::new(false),
        unready: AtomicBool::new(false),
        fail_liveness_after: args
            .seconds("fail-liveness-after")?
            .map(Duration::from_secs_f64),
        unready_after: args.seconds("unready-after")?.map(Duration::from_secs_f64),
    });
    // Both families when the network has IPv6, else IPv4 only.
    let listener = TcpListener::bind(("::", port))
        .or_else(|_| TcpListener::bind(("0.0.0.0", port)))
        .map_err(|e| fail(format!("listening on port {port}: {e}")))?;
    println!("serving HTTP on port {port}");
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let state = state.clone();
        std::thread::spawn(move || {
            let _ = handle(conn, &state);
        });
    }
    Ok(())
}

fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        (k == name).then(|| decode(v))
    })
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 3 <= b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b[i] == b'+' { b' ' } else { b[i] });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn handle(conn: TcpStream, state: &State) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_string();
    let target = parts.next().unwrap_or("/").to_string();
    let mut length = 0usize;
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':')
            && k.trim().eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length.min(16 << 20)];
    reader.read_exact(&mut body)?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let peer = conn
        .peer_addr()
        .map(|a| match a {
            std::net::SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
                Some(v4) => std::net::SocketAddr::from((v4, v6.port())).to_string(),
                None => a.to_string(),
            },
            v4 => v4.to_string(),
        })
        .unwrap_or_default();
    let ok = |s: String| (200, s);
    let (status, text) = match path {
        "/" => ok(format!("mtest {}\n", hostname())),
        "/hostname" => ok(hostname()),
        "/clientip" => ok(peer),
        "/echo" if method == "POST" => ok(String::from_utf8_lossy(&body).into_owned()),
        "/echo" => ok(query_param(query, "msg").unwrap_or_default()),
        "/healthz" | "/livez" if state.healthy() => ok("ok".into()),
        "/healthz" | "/livez" => (500, "unhealthy".into()),
        "/readyz" if state.ready() => ok("ok".into()),
        "/readyz" => (500, "not ready".into()),
        "/set-unhealthy" => {
            state.unhealthy.store(true, Ordering::Relaxed);
            ok("unhealthy".into())
        }
        "/set-healthy" => {
            state.unhealthy.store(false, Ordering::Relaxed);
            ok("healthy".into())
        }
        "/set-unready" => {
            state.unready.store(true, Ordering::Relaxed);
            ok("unready".into())
        }
        "/set-ready" => {
            state.unready.store(false, Ordering::Relaxed);
            ok("ready".into())
        }
        "/exit" => {
            let code = query_param(query, "code")
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let mut w = conn;
            let _ = write_response(&mut w, 200, "bye");
            std::process::exit(code);
        }
        _ => (404, "not found".into()),
    };
    let mut w = conn;
    write_response(&mut w, status, &text)
}

fn write_response(w: &mut TcpStream, status: u16, body: &str) -> std::io::Result<()> {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Internal Server Error",
    };
    write!(
        w,
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_decoded() {
        assert_eq!(
            query_param("a=1&msg=hello%20world+x", "msg").as_deref(),
            Some("hello world x")
        );
        assert_eq!(query_param("a=1", "msg"), None);
    }

    #[test]
    fn liveness_fails_after_its_delay_and_readiness_toggles() {
        let s = State {
            started: Instant::now() - Duration::from_secs(5),
            unhealthy: AtomicBool::new(false),
            unready: AtomicBool::new(false),
            fail_liveness_after: Some(Duration::from_secs(3)),
            unready_after: None,
        };
        assert!(!s.healthy());
        assert!(s.ready());
        s.unready.store(true, Ordering::Relaxed);
        assert!(!s.ready());
    }
}
