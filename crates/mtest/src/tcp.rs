//! `mtest tcp HOST:PORT [--send DATA] [--timeout S]`: connects (names resolved with the
//! program's own DNS client), sends DATA and prints what comes back until the peer closes or
//! the timeout passes. Exits 0 when the connection was made.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::{Args, Outcome, dns, fail};

/// Splits `host:port` (`[v6]:port` too).
pub fn split_host_port(s: &str) -> Option<(&str, u16)> {
    let (host, port) = s.rsplit_once(':')?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Some((host, port.parse().ok()?))
}

pub fn connect(target: &str, timeout: Duration) -> Result<TcpStream, String> {
    let (host, port) = split_host_port(target).ok_or_else(|| format!("not HOST:PORT: {target}"))?;
    let mut last = String::new();
    for ip in dns::resolve_host(host)? {
        match TcpStream::connect_timeout(&SocketAddr::new(ip, port), timeout) {
            Ok(s) => return Ok(s),
            Err(e) => last = format!("connecting to {ip}:{port}: {e}"),
        }
    }
    Err(last)
}

pub fn command(args: &Args) -> Outcome {
    let target = args
        .pos(0)
        .ok_or_else(|| fail("usage: mtest tcp HOST:PORT [--send DATA] [--timeout S]"))?;
    let timeout = Duration::from_secs_f64(args.seconds("timeout")?.unwrap_or(5.0));
    let mut s = connect(target, timeout).map_err(fail)?;
    println!("connected to {target}");
    if let Some(data) = args.flag("send") {
        s.write_all(data.as_bytes())
            .map_err(|e| fail(format!("sending: {e}")))?;
        let _ = s.shutdown(std::net::Shutdown::Write);
        s.set_read_timeout(Some(timeout))
            .map_err(|e| fail(e.to_string()))?;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
        print!("{}", String::from_utf8_lossy(&got));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_are_split_for_both_families() {
        assert_eq!(split_host_port("10.0.0.1:80"), Some(("10.0.0.1", 80)));
        assert_eq!(split_host_port("[::1]:8080"), Some(("::1", 8080)));
        assert_eq!(
            split_host_port("web.default.svc:443"),
            Some(("web.default.svc", 443))
        );
        assert_eq!(split_host_port("nope"), None);
    }

    #[test]
    fn data_goes_out_and_the_answer_comes_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let t = std::thread::spawn(move || {
            let (mut c, _) = l.accept().expect("accept");
            let mut buf = [0u8; 5];
            c.read_exact(&mut buf).expect("read");
            c.write_all(&buf).expect("echo");
        });
        let mut s = connect(&addr.to_string(), Duration::from_secs(2)).expect("connects");
        s.write_all(b"hello").expect("write");
        let mut back = [0u8; 5];
        s.read_exact(&mut back).expect("read back");
        assert_eq!(&back, b"hello");
        t.join().expect("server");
    }
}
