//! The hickory request handler of one cluster's server: checks the request, asks the
//! resolver, forwards what is not the cluster's, and writes the response with the client's
//! size limit.
//!
//! Responses over UDP are limited to 512 bytes for clients without EDNS (RFC 1035) and to the
//! advertised payload size for clients with EDNS; hickory truncates the latter itself, the
//! former is cut here (hickory would allow 4096). Cutting drops additional records first
//! (they are optional, RFC 2181 §9) and then answers from the end, setting TC so that the
//! client retries over TCP, where the whole answer fits.

use std::sync::Arc;

use hickory_proto::op::{Edns, Header, Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::{DNSClass, Record, RecordType};
use hickory_proto::xfer::Protocol;
use hickory_server::authority::MessageResponseBuilder;
use hickory_server::server::{Request, RequestHandler, ResponseHandler, ResponseInfo};

use crate::forward::{Forwarded, Forwarder};
use crate::resolve::{Answer, Resolution, resolve};
use crate::view::View;
use crate::zone::Zone;

/// The largest UDP response to a client without EDNS (RFC 1035 §4.2.1).
pub const CLASSIC_UDP_LIMIT: usize = 512;

/// Answers the queries of one cluster.
#[derive(Debug, Clone)]
pub struct Handler {
    zone: Zone,
    view: Arc<View>,
    forwarder: Option<Forwarder>,
}

impl Handler {
    pub fn new(zone: Zone, view: Arc<View>, forwarder: Option<Forwarder>) -> Handler {
        Handler {
            zone,
            view,
            forwarder,
        }
    }
}

/// A response about to be written.
struct Reply {
    header: Header,
    answers: Vec<Record>,
    authority: Vec<Record>,
    additionals: Vec<Record>,
}

impl Reply {
    fn new(request: &Request, rcode: ResponseCode, recursion: bool) -> Reply {
        let mut header = Header::response_from_request(request.header());
        header.set_response_code(rcode);
        header.set_recursion_available(recursion);
        Reply {
            header,
            answers: Vec::new(),
            authority: Vec::new(),
            additionals: Vec::new(),
        }
    }

    fn from_answer(request: &Request, a: Answer, recursion: bool) -> Reply {
        let mut r = Reply::new(request, a.rcode, recursion);
        r.header.set_authoritative(true);
        r.answers = a.answers;
        r.authority = a.authority;
        r.additionals = a.additionals;
        r
    }

    /// The wire size of this reply to `request` (without EDNS).
    fn wire_size(&self, request: &Request) -> usize {
        let mut m = Message::new();
        m.set_header(self.header);
        for q in request.queries() {
            m.add_query(q.original().clone());
        }
        m.insert_answers(self.answers.clone());
        m.insert_name_servers(self.authority.clone());
        m.insert_additionals(self.additionals.clone());
        m.to_vec().map(|v| v.len()).unwrap_or(usize::MAX)
    }

    /// Cuts the reply to `limit` bytes.
    fn fit(&mut self, request: &Request, limit: usize) {
        let bound = 12
            + request
                .queries()
                .iter()
                .map(|q| q.name().len() + 6)
                .sum::<usize>()
            + [&self.answers, &self.authority, &self.additionals]
                .iter()
                .flat_map(|s| s.iter())
                .map(size_bound)
                .sum::<usize>();
        if bound <= limit || self.wire_size(request) <= limit {
            return;
        }
        self.additionals.clear();
        if self.wire_size(request) <= limit {
            return;
        }
        self.header.set_truncated(true);
        self.authority.clear();
        // The largest prefix of the answers that fits (binary search on the count).
        let all = std::mem::take(&mut self.answers);
        let (mut lo, mut hi) = (0, all.len());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            self.answers = all[..mid].to_vec();
            if self.wire_size(request) <= limit {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        self.answers = all[..lo].to_vec();
    }
}

/// An upper bound of a record's wire size, cheap to compute: names count their text length
/// plus two, small fixed-size data its size, anything else 256 bytes.
fn size_bound(r: &Record) -> usize {
    use hickory_proto::rr::RData;
    let name = |n: &hickory_proto::rr::Name| n.len() + 2;
    name(r.name())
        + 10
        + match r.data() {
            RData::A(_) => 4,
            RData::AAAA(_) => 16,
            RData::CNAME(n) => name(&n.0),
            RData::PTR(n) => name(&n.0),
            RData::NS(n) => name(&n.0),
            RData::SRV(s) => 6 + name(s.target()),
            RData::SOA(s) => name(s.mname()) + name(s.rname()) + 20,
            _ => 256,
        }
}

async fn send<R: ResponseHandler>(request: &Request, mut reply: Reply, mut out: R) -> ResponseInfo {
    let mut builder = MessageResponseBuilder::from_message_request(request);
    match request.edns() {
        Some(client) => {
            let mut edns = Edns::new();
            edns.set_max_payload(client.max_payload().max(CLASSIC_UDP_LIMIT as u16))
                .set_version(0)
                .set_dnssec_ok(client.flags().dnssec_ok);
            builder.edns(edns);
        }
        None if request.protocol() == Protocol::Udp => reply.fit(request, CLASSIC_UDP_LIMIT),
        None => {}
    }
    let response = builder.build(
        reply.header,
        reply.answers.iter(),
        reply.authority.iter(),
        std::iter::empty(),
        reply.additionals.iter(),
    );
    match out.send_response(response).await {
        Ok(info) => info,
        Err(e) => {
            tracing::debug!(error = %e, "could not send a DNS response");
            let mut h = Header::response_from_request(request.header());
            h.set_response_code(ResponseCode::ServFail);
            h.into()
        }
    }
}

impl Handler {
    async fn forwarded(&self, request: &Request, q: Forwarded<'_>) -> Result<Reply, ResponseCode> {
        let Some(fw) = &self.forwarder else {
            return Err(ResponseCode::Refused);
        };
        match fw.forward(&q).await {
            Ok(Some(mut m)) => {
                let mut r = Reply::new(request, m.response_code(), true);
                r.header.set_authoritative(m.authoritative());
                r.header.set_truncated(m.truncated());
                r.header.set_authentic_data(m.authentic_data());
                r.answers = m.take_answers();
                r.authority = m.take_name_servers();
                r.additionals = m.take_additionals();
                Ok(r)
            }
            Ok(None) => Err(ResponseCode::Refused),
            Err(e) => {
                tracing::debug!(error = %e, "forwarding failed");
                Err(ResponseCode::ServFail)
            }
        }
    }
}

#[async_trait::async_trait]
impl RequestHandler for Handler {
    async fn handle_request<R: ResponseHandler>(&self, request: &Request, out: R) -> ResponseInfo {
        let recursion = self.forwarder.is_some();
        let error = |rcode| Reply::new(request, rcode, recursion);
        if request.message_type() != MessageType::Query {
            return send(request, error(ResponseCode::FormErr), out).await;
        }
        if request.op_code() != OpCode::Query {
            return send(request, error(ResponseCode::NotImp), out).await;
        }
        if request.edns().is_some_and(|e| e.version() > 0) {
            return send(request, error(ResponseCode::BADVERS), out).await;
        }
        let [query] = request.queries() else {
            return send(request, error(ResponseCode::FormErr), out).await;
        };
        let qtype = query.query_type();
        if query.query_class() != DNSClass::IN
            || matches!(qtype, RecordType::AXFR | RecordType::IXFR)
        {
            return send(request, error(ResponseCode::Refused), out).await;
        }
        let original = query.original();
        let lower = query.name().to_string();
        let forwarded = |q| Forwarded {
            query: q,
            recursion_desired: request.recursion_desired(),
            checking_disabled: request.checking_disabled(),
            edns: request.edns(),
            tcp: request.protocol() == Protocol::Tcp,
        };
        let reply = match resolve(&self.zone, &self.view, original.name(), &lower, qtype) {
            Resolution::Answer(a) => Reply::from_answer(request, a, recursion),
            Resolution::Forward => self
                .forwarded(request, forwarded(original))
                .await
                .unwrap_or_else(error),
            Resolution::Chase { answer, target } => {
                let mut reply = Reply::from_answer(request, answer, recursion);
                let q = hickory_proto::op::Query::query(target, qtype);
                if let Ok(mut up) = self.forwarded(request, forwarded(&q)).await {
                    reply.answers.append(&mut up.answers);
                    reply.header.set_truncated(up.header.truncated());
                }
                reply
            }
        };
        send(request, reply, out).await
    }
}
