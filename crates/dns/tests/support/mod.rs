//! Test support: an in-process API server with logical clusters, a DNS client speaking UDP
//! and TCP to loopback, and a stand-in upstream resolver on loopback (no query ever leaves
//! the machine).
#![allow(dead_code)]

use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use apiserver::local::LocalService;
use apiserver::server::ApiServer;
use hickory_proto::op::{Edns, Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::rdata::A;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use hickory_server::ServerFuture;
use hickory_server::authority::MessageResponseBuilder;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};
use parking_lot::Mutex;
use runtime::client::{ClientFactory, ClusterClients, InMemory};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UdpSocket};

/// How long any wait may take before the test fails.
pub const WAIT: Duration = Duration::from_secs(20);

pub struct Env {
    pub server: Arc<ApiServer>,
    _dir: tempfile::TempDir,
}

impl Env {
    /// A server with the logical clusters `clusters` (besides the root).
    pub async fn start(clusters: &[&str]) -> Env {
        let (server, dir) = testkit::Server::with_clusters(clusters).await.into_parts();
        Env { server, _dir: dir }
    }

    /// A client of logical cluster `name`.
    pub fn cluster(&self, name: &str) -> kube::Client {
        ClusterClients::in_memory(LocalService::system(self.server.clone()))
            .cluster(name)
            .expect("cluster client")
    }

    /// A client of every cluster at once (the system identity's cross-cluster view).
    pub fn all_clusters(&self) -> kube::Client {
        InMemory::new(LocalService::system(self.server.clone()))
            .all_clusters()
            .expect("all-clusters client")
    }
}

/// How a test query is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    Udp,
    /// UDP with EDNS advertising this payload size.
    UdpEdns(u16),
    Tcp,
}

/// Sends one query to `server` and returns the response.
pub async fn ask(server: SocketAddr, name: &str, qtype: RecordType, via: Via) -> Message {
    let mut m = Message::new();
    m.set_id(rand::random())
        .set_message_type(MessageType::Query)
        .set_op_code(OpCode::Query)
        .set_recursion_desired(true)
        .add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    if let Via::UdpEdns(size) = via {
        let mut e = Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    let bytes = m.to_vec().unwrap();
    let reply = tokio::time::timeout(WAIT, async {
        match via {
            Via::Tcp => {
                let mut s = TcpStream::connect(server).await.unwrap();
                let mut framed = (bytes.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&bytes);
                s.write_all(&framed).await.unwrap();
                let n = s.read_u16().await.unwrap() as usize;
                let mut buf = vec![0; n];
                s.read_exact(&mut buf).await.unwrap();
                buf
            }
            _ => {
                let s = UdpSocket::bind("127.0.0.1:0").await.unwrap();
                s.send_to(&bytes, server).await.unwrap();
                let mut buf = vec![0; 65535];
                let n = s.recv(&mut buf).await.unwrap();
                buf.truncate(n);
                buf
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no answer to {name} {qtype} from {server} within {WAIT:?}"));
    let reply = Message::from_vec(&reply).expect("a DNS message");
    assert_eq!(reply.id(), m.id(), "the answer's ID");
    reply
}

/// The answer section's data, as text, sorted.
pub fn answers(m: &Message) -> Vec<String> {
    let mut v: Vec<String> = m
        .answers()
        .iter()
        .map(|r| format!("{} {}", r.record_type(), r.data()))
        .collect();
    v.sort();
    v
}

/// Asks until `pred` holds for the response (the informer catches up asynchronously).
pub async fn until(
    server: SocketAddr,
    name: &str,
    qtype: RecordType,
    pred: impl Fn(&Message) -> bool,
) -> Message {
    let deadline = tokio::time::Instant::now() + WAIT;
    let mut pause = Duration::from_millis(5);
    loop {
        let m = ask(server, name, qtype, Via::Udp).await;
        if pred(&m) {
            return m;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("{name} {qtype} never reached the condition; last answer: {m}");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(200));
    }
}

pub fn rcode(m: &Message) -> ResponseCode {
    m.response_code()
}

/// A stand-in upstream resolver on loopback: `*.example.test.` A is 192.0.2.<n> where `n`
/// is the number of labels, `big.example.test.` has 100 A records, everything else NXDOMAIN.
/// It remembers every name it was asked.
pub struct Upstream {
    pub addr: SocketAddr,
    pub asked: Arc<Mutex<Vec<String>>>,
    server: ServerFuture<UpstreamHandler>,
}

struct UpstreamHandler {
    asked: Arc<Mutex<Vec<String>>>,
}

#[async_trait::async_trait]
impl RequestHandler for UpstreamHandler {
    async fn handle_request<R: ResponseHandler>(
        &self,
        request: &Request,
        mut out: R,
    ) -> ResponseInfo {
        let q = &request.queries()[0];
        let name = q.name().to_string();
        self.asked.lock().push(name.clone());
        let mut header = hickory_proto::op::Header::response_from_request(request.header());
        header.set_recursion_available(true);
        let owner: Name = q.original().name().clone();
        let mut records = Vec::new();
        if name == "big.example.test." && q.query_type() == RecordType::A {
            for i in 0..100u8 {
                records.push(Record::from_rdata(
                    owner.clone(),
                    60,
                    RData::A(A::new(192, 0, 2, i)),
                ));
            }
        } else if name.ends_with(".example.test.") && q.query_type() == RecordType::A {
            let n = name.trim_end_matches('.').split('.').count() as u8;
            records.push(Record::from_rdata(
                owner,
                60,
                RData::A(A::new(192, 0, 2, n)),
            ));
        } else {
            header.set_response_code(ResponseCode::NXDomain);
        }
        let mut builder = MessageResponseBuilder::from_message_request(request);
        if let Some(e) = request.edns() {
            let mut edns = Edns::new();
            edns.set_max_payload(e.max_payload().max(512));
            builder.edns(edns);
        }
        let resp = builder.build(header, records.iter(), [], [], []);
        out.send_response(resp).await.unwrap()
    }
}

impl Upstream {
    pub async fn start() -> Upstream {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let mut server = ServerFuture::new(UpstreamHandler {
            asked: asked.clone(),
        });
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let addr = udp.local_addr().unwrap();
        let tcp = TcpListener::bind(addr).await.unwrap();
        server.register_socket(udp);
        server.register_listener(tcp, Duration::from_secs(5));
        Upstream {
            addr,
            asked,
            server,
        }
    }

    pub fn was_asked(&self, name: &str) -> bool {
        self.asked.lock().iter().any(|n| n == name)
    }

    pub async fn stop(mut self) {
        let _ = self.server.shutdown_gracefully().await;
    }
}

pub fn ip(s: &str) -> IpAddr {
    IpAddr::from_str(s).unwrap()
}

/// A DNS config for tests: loopback on a free port, forwarding to `upstream`.
pub fn config(upstream: SocketAddr) -> dns::Config {
    dns::Config {
        listen: vec!["127.0.0.1:0".parse().unwrap()],
        upstream: dns::Upstream::Servers(vec![upstream]),
        forward_timeout: Duration::from_secs(2),
        ..dns::Config::default()
    }
}
