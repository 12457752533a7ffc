//! Forwarding of names the cluster does not serve to upstream resolvers, like CoreDNS's
//! `forward . /etc/resolv.conf { max_concurrent 1000 }` in kubeadm's Corefile.
//!
//! Each forwarded query goes out on its own socket (a fresh source port) with a fresh random
//! ID, over the transport the client used: a UDP answer that is truncated is passed on
//! truncated (the client retries over TCP, and so do we then). Upstreams are tried in order;
//! the next one is asked when one does not answer within the timeout. Beyond
//! `max_concurrent` queries in flight new ones are refused, so a dead upstream cannot make
//! the server hold unbounded state.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::Semaphore;

use crate::error::{Error, Result};

/// The resolver configuration the node's upstreams come from by default.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// How long one upstream has to answer before the next is asked (CoreDNS's `forward` reads
/// with a 2 s timeout).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(2);

/// Queries in flight upstream at most (kubeadm's `max_concurrent 1000`).
pub const DEFAULT_MAX_CONCURRENT: usize = 1000;

/// The EDNS payload size offered upstream (the DNS flag day 2020 value).
const UPSTREAM_PAYLOAD: u16 = 1232;

/// The `nameserver` addresses of a resolv.conf text, on port 53. Link-local IPv6 addresses
/// with a zone (`fe80::1%eth0`) are skipped: they need an interface index to be reached.
pub fn parse_resolv_conf(text: &str) -> Vec<SocketAddr> {
    text.lines()
        .filter_map(|l| {
            let l = l.split(['#', ';']).next()?.trim();
            let mut words = l.split_whitespace();
            if words.next()? != "nameserver" {
                return None;
            }
            let ip: IpAddr = words.next()?.parse().ok()?;
            Some(SocketAddr::new(ip, 53))
        })
        .collect()
}

/// The `nameserver` addresses of the resolv.conf at `path`.
pub fn read_resolv_conf(path: &Path) -> Result<Vec<SocketAddr>> {
    let text = std::fs::read_to_string(path).map_err(|source| Error::ResolvConf {
        path: path.display().to_string(),
        source,
    })?;
    Ok(parse_resolv_conf(&text))
}

/// A client's question, as it is forwarded.
#[derive(Debug, Clone)]
pub struct Forwarded<'a> {
    pub query: &'a Query,
    pub recursion_desired: bool,
    pub checking_disabled: bool,
    /// The client's EDNS, if it sent one (its DO bit is passed on).
    pub edns: Option<&'a Edns>,
    pub tcp: bool,
}

/// The upstream resolvers of one server.
#[derive(Debug, Clone)]
pub struct Forwarder {
    upstreams: Arc<[SocketAddr]>,
    timeout: Duration,
    limit: Arc<Semaphore>,
}

impl Forwarder {
    pub fn new(upstreams: Vec<SocketAddr>, timeout: Duration, max_concurrent: usize) -> Forwarder {
        Forwarder {
            upstreams: upstreams.into(),
            timeout,
            limit: Arc::new(Semaphore::new(max_concurrent.max(1))),
        }
    }

    pub fn upstreams(&self) -> &[SocketAddr] {
        &self.upstreams
    }

    /// Asks the upstreams; `Ok(None)` when too many queries are in flight already.
    pub async fn forward(&self, q: &Forwarded<'_>) -> Result<Option<Message>> {
        let Ok(_permit) = self.limit.try_acquire() else {
            return Ok(None);
        };
        let mut last = None;
        for &addr in self.upstreams.iter() {
            match self.ask(addr, q).await {
                Ok(m) => return Ok(Some(m)),
                Err(e) => {
                    tracing::debug!(%addr, error = %e, "upstream did not answer");
                    last = Some(e);
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::Config("no upstream resolver is configured".into())))
    }

    async fn ask(&self, addr: SocketAddr, q: &Forwarded<'_>) -> Result<Message> {
        let id: u16 = rand::random();
        let mut msg = Message::new();
        msg.set_id(id)
            .set_message_type(MessageType::Query)
            .set_op_code(OpCode::Query)
            .set_recursion_desired(q.recursion_desired)
            .set_checking_disabled(q.checking_disabled)
            .add_query(q.query.clone());
        if let Some(client) = q.edns {
            let mut edns = Edns::new();
            edns.set_max_payload(UPSTREAM_PAYLOAD)
                .set_dnssec_ok(client.flags().dnssec_ok);
            msg.set_edns(edns);
        }
        let bytes = msg.to_vec()?;
        let fail = |reason: String| Error::Upstream { addr, reason };
        let reply = tokio::time::timeout(self.timeout, async {
            if q.tcp {
                ask_tcp(addr, &bytes).await
            } else {
                ask_udp(addr, &bytes, id).await
            }
        })
        .await
        .map_err(|_| fail(format!("no answer within {:?}", self.timeout)))?
        .map_err(|e| fail(e.to_string()))?;
        let reply = Message::from_vec(&reply)?;
        if reply.id() != id || reply.message_type() != MessageType::Response {
            return Err(fail("the answer does not match the query".into()));
        }
        let same_question = reply.queries().first().is_some_and(|r| {
            r.query_type() == q.query.query_type()
                && r.name().to_lowercase() == q.query.name().to_lowercase()
        });
        if !same_question {
            return Err(fail("the answer is for another question".into()));
        }
        Ok(reply)
    }
}

async fn ask_udp(addr: SocketAddr, bytes: &[u8], id: u16) -> std::io::Result<Vec<u8>> {
    let local: SocketAddr = match addr {
        SocketAddr::V4(_) => (Ipv4Addr::UNSPECIFIED, 0).into(),
        SocketAddr::V6(_) => (Ipv6Addr::UNSPECIFIED, 0).into(),
    };
    let sock = UdpSocket::bind(local).await?;
    sock.connect(addr).await?;
    sock.send(bytes).await?;
    let mut buf = vec![0u8; 65535];
    loop {
        let n = sock.recv(&mut buf).await?;
        // Anything but our answer (a late reply to nothing, garbage) is ignored.
        if n >= 12 && u16::from_be_bytes([buf[0], buf[1]]) == id {
            buf.truncate(n);
            return Ok(buf);
        }
    }
}

async fn ask_tcp(addr: SocketAddr, bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(addr).await?;
    let len = u16::try_from(bytes.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "query too long"))?;
    let mut framed = Vec::with_capacity(bytes.len() + 2);
    framed.extend_from_slice(&len.to_be_bytes());
    framed.extend_from_slice(bytes);
    s.write_all(&framed).await?;
    let n = s.read_u16().await? as usize;
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_nameservers_are_read_and_others_ignored() {
        let text = "# generated\nsearch example.com\nnameserver 10.0.0.2\nnameserver  fd00::53 # v6\n\
                    options ndots:5\nnameserver fe80::1%eth0\nnameserver bogus\n;nameserver 1.1.1.1\n";
        assert_eq!(
            parse_resolv_conf(text),
            vec![
                "10.0.0.2:53".parse::<SocketAddr>().unwrap(),
                "[fd00::53]:53".parse().unwrap()
            ]
        );
    }
}
