//! `mtest dns NAME [TYPE]`: a DNS client of its own (an image without libc has no resolver),
//! reading `/etc/resolv.conf` as glibc does — `nameserver`, `search`/`domain`,
//! `options ndots: timeout: attempts:` — and printing every answer as
//! `<name> <ttl> IN <TYPE> <data>`. Types: A, AAAA, SRV, CNAME, PTR (of a name or an IP
//! address), TXT, NS, MX. Over UDP, and TCP when the answer is truncated. Exits 1 when no
//! name of the search list has an answer (NXDOMAIN or no data).

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, UdpSocket};
use std::time::Duration;

use crate::{Args, Outcome, fail};

/// What `/etc/resolv.conf` says.
#[derive(Debug, Clone, PartialEq)]
pub struct ResolvConf {
    pub nameservers: Vec<SocketAddr>,
    pub search: Vec<String>,
    pub ndots: usize,
    pub timeout: Duration,
    pub attempts: usize,
}

impl ResolvConf {
    pub fn parse(text: &str) -> ResolvConf {
        let mut c = ResolvConf {
            nameservers: Vec::new(),
            search: Vec::new(),
            ndots: 1,
            timeout: Duration::from_secs(5),
            attempts: 2,
        };
        for line in text.lines() {
            let mut words = line.split_whitespace();
            match words.next() {
                Some("nameserver") => {
                    if let Some(ip) = words.next().and_then(|w| w.parse::<IpAddr>().ok()) {
                        c.nameservers.push(SocketAddr::new(ip, 53));
                    }
                }
                Some("search") | Some("domain") => {
                    c.search = words.map(|w| w.trim_end_matches('.').to_string()).collect();
                }
                Some("options") => {
                    for o in words {
                        let (k, v) = o.split_once(':').unwrap_or((o, ""));
                        let n = v.parse::<u64>().ok();
                        match (k, n) {
                            ("ndots", Some(n)) => c.ndots = n.min(15) as usize,
                            ("timeout", Some(n)) => c.timeout = Duration::from_secs(n.clamp(1, 30)),
                            ("attempts", Some(n)) => c.attempts = n.clamp(1, 5) as usize,
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
        c
    }

    /// The names to try for `name`, in glibc's order.
    pub fn candidates(&self, name: &str) -> Vec<String> {
        if let Some(abs) = name.strip_suffix('.') {
            return vec![abs.to_string()];
        }
        let with_search = self.search.iter().map(|s| format!("{name}.{s}"));
        if name.matches('.').count() >= self.ndots {
            std::iter::once(name.to_string())
                .chain(with_search)
                .collect()
        } else {
            with_search
                .chain(std::iter::once(name.to_string()))
                .collect()
        }
    }
}

pub fn qtype(name: &str) -> Option<u16> {
    Some(match name.to_ascii_uppercase().as_str() {
        "A" => 1,
        "NS" => 2,
        "CNAME" => 5,
        "PTR" => 12,
        "MX" => 15,
        "TXT" => 16,
        "AAAA" => 28,
        "SRV" => 33,
        _ => return None,
    })
}

fn type_name(t: u16) -> String {
    match t {
        1 => "A".into(),
        2 => "NS".into(),
        5 => "CNAME".into(),
        12 => "PTR".into(),
        15 => "MX".into(),
        16 => "TXT".into(),
        28 => "AAAA".into(),
        33 => "SRV".into(),
        other => format!("TYPE{other}"),
    }
}

/// The `in-addr.arpa`/`ip6.arpa` name of an address.
pub fn reverse_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            format!("{}.{}.{}.{}.in-addr.arpa.", o[3], o[2], o[1], o[0])
        }
        IpAddr::V6(v6) => {
            let mut s = String::new();
            for b in v6.octets().iter().rev() {
                s.push_str(&format!("{:x}.{:x}.", b & 0xf, b >> 4));
            }
            s + "ip6.arpa."
        }
    }
}

/// An encoded query for `name` of type `t`.
pub fn encode_query(id: u16, name: &str, t: u16) -> Vec<u8> {
    let mut m = Vec::with_capacity(64);
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]);
    for label in name
        .trim_end_matches('.')
        .split('.')
        .filter(|l| !l.is_empty())
    {
        let l = &label.as_bytes()[..label.len().min(63)];
        m.push(l.len() as u8);
        m.extend_from_slice(l);
    }
    m.push(0);
    m.extend_from_slice(&t.to_be_bytes());
    m.extend_from_slice(&1u16.to_be_bytes());
    m
}

/// One answer record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub name: String,
    pub ttl: u32,
    pub rtype: u16,
    pub data: String,
}

impl std::fmt::Display for Record {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {} IN {} {}",
            self.name,
            self.ttl,
            type_name(self.rtype),
            self.data
        )
    }
}

/// A decoded response: its id, rcode, whether it was truncated, and its answers.
#[derive(Debug)]
pub struct Answer {
    pub id: u16,
    pub rcode: u8,
    pub truncated: bool,
    pub records: Vec<Record>,
}

fn read_name(m: &[u8], mut pos: usize) -> Option<(String, usize)> {
    let mut labels: Vec<String> = Vec::new();
    let mut end = None;
    for _ in 0..128 {
        let len = *m.get(pos)? as usize;
        if len == 0 {
            let name = if labels.is_empty() {
                ".".into()
            } else {
                labels.join(".") + "."
            };
            return Some((name, end.unwrap_or(pos + 1)));
        }
        if len & 0xc0 == 0xc0 {
            let ptr = ((len & 0x3f) << 8) | *m.get(pos + 1)? as usize;
            end.get_or_insert(pos + 2);
            pos = ptr;
            continue;
        }
        let label = m.get(pos + 1..pos + 1 + len)?;
        labels.push(String::from_utf8_lossy(label).into_owned());
        pos += 1 + len;
    }
    None
}

fn u16_at(m: &[u8], p: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*m.get(p)?, *m.get(p + 1)?]))
}

pub fn decode(m: &[u8]) -> Option<Answer> {
    let id = u16_at(m, 0)?;
    let flags = u16_at(m, 2)?;
    let qd = u16_at(m, 4)?;
    let an = u16_at(m, 6)?;
    let mut pos = 12;
    for _ in 0..qd {
        pos = read_name(m, pos)?.1 + 4;
    }
    let mut records = Vec::new();
    for _ in 0..an {
        let (name, p) = read_name(m, pos)?;
        let rtype = u16_at(m, p)?;
        let ttl = u32::from_be_bytes(m.get(p + 4..p + 8)?.try_into().ok()?);
        let len = u16_at(m, p + 8)? as usize;
        let start = p + 10;
        let rdata = m.get(start..start + len)?;
        let data = match rtype {
            1 if len == 4 => IpAddr::from(<[u8; 4]>::try_from(rdata).ok()?).to_string(),
            28 if len == 16 => IpAddr::from(<[u8; 16]>::try_from(rdata).ok()?).to_string(),
            2 | 5 | 12 => read_name(m, start)?.0,
            15 => format!("{} {}", u16_at(m, start)?, read_name(m, start + 2)?.0),
            33 => format!(
                "{} {} {} {}",
                u16_at(m, start)?,
                u16_at(m, start + 2)?,
                u16_at(m, start + 4)?,
                read_name(m, start + 6)?.0
            ),
            16 => {
                let mut parts = Vec::new();
                let mut i = 0;
                while i < rdata.len() {
                    let l = rdata[i] as usize;
                    let s = rdata.get(i + 1..i + 1 + l)?;
                    parts.push(format!("{:?}", String::from_utf8_lossy(s)));
                    i += 1 + l;
                }
                parts.join(" ")
            }
            _ => format!("\\# {len}"),
        };
        records.push(Record {
            name,
            ttl,
            rtype,
            data,
        });
        pos = start + len;
    }
    Some(Answer {
        id,
        rcode: (flags & 0xf) as u8,
        truncated: flags & 0x0200 != 0,
        records,
    })
}

fn query_id() -> u16 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    (t ^ (std::process::id() << 7)) as u16
}

fn exchange(server: SocketAddr, q: &[u8], id: u16, timeout: Duration) -> std::io::Result<Answer> {
    let bad = || std::io::Error::other("a malformed answer");
    let bind: SocketAddr = if server.is_ipv6() {
        "[::]:0"
    } else {
        "0.0.0.0:0"
    }
    .parse()
    .map_err(|_| bad())?;
    let sock = UdpSocket::bind(bind)?;
    sock.set_read_timeout(Some(timeout))?;
    sock.connect(server)?;
    sock.send(q)?;
    let mut buf = vec![0u8; 4096];
    loop {
        let n = sock.recv(&mut buf)?;
        let Some(a) = decode(&buf[..n]) else { continue };
        if a.id != id {
            continue;
        }
        if !a.truncated {
            return Ok(a);
        }
        break;
    }
    // Truncated: the same question over TCP.
    let mut tcp = TcpStream::connect_timeout(&server, timeout)?;
    tcp.set_read_timeout(Some(timeout))?;
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(q);
    tcp.write_all(&framed)?;
    let mut len = [0u8; 2];
    tcp.read_exact(&mut len)?;
    let mut m = vec![0u8; u16::from_be_bytes(len) as usize];
    tcp.read_exact(&mut m)?;
    decode(&m).ok_or_else(bad)
}

/// Asks the nameservers for `name`; `Ok(None)` is NXDOMAIN or no data.
pub fn lookup_one(conf: &ResolvConf, name: &str, t: u16) -> Result<Option<Vec<Record>>, String> {
    let id = query_id();
    let q = encode_query(id, name, t);
    let mut last = String::from("no nameserver in /etc/resolv.conf");
    for _ in 0..conf.attempts {
        for &server in &conf.nameservers {
            match exchange(server, &q, id, conf.timeout) {
                Ok(a) if a.rcode == 0 && !a.records.is_empty() => return Ok(Some(a.records)),
                Ok(a) if a.rcode == 0 || a.rcode == 3 => return Ok(None),
                Ok(a) => last = format!("{server} answered rcode {}", a.rcode),
                Err(e) => last = format!("{server}: {e}"),
            }
        }
    }
    Err(last)
}

/// Resolves `name` through the search list; the first candidate with answers wins. As glibc,
/// a server failure on one candidate does not end the search; it is the answer only when no
/// candidate has records.
pub fn lookup(conf: &ResolvConf, name: &str, t: u16) -> Result<Option<Vec<Record>>, String> {
    let mut failure = None;
    for candidate in conf.candidates(name) {
        match lookup_one(conf, &candidate, t) {
            Ok(Some(records)) => return Ok(Some(records)),
            Ok(None) => {}
            Err(e) => failure = Some(e),
        }
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(None),
    }
}

pub fn system_conf() -> ResolvConf {
    ResolvConf::parse(&std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default())
}

/// The addresses of a host name (A, then AAAA); an IP address is itself.
pub fn resolve_host(host: &str) -> Result<Vec<IpAddr>, String> {
    if let Ok(ip) = host
        .trim_matches(|c| c == '[' || c == ']')
        .parse::<IpAddr>()
    {
        return Ok(vec![ip]);
    }
    let conf = system_conf();
    let mut ips = Vec::new();
    for t in [1, 28] {
        // As getaddrinfo: a failed AAAA lookup does not undo the A answers.
        let found = match lookup(&conf, host, t) {
            Err(_) if !ips.is_empty() => None,
            other => other?,
        };
        for r in found.unwrap_or_default() {
            if r.rtype == t
                && let Ok(ip) = r.data.parse()
            {
                ips.push(ip);
            }
        }
    }
    if ips.is_empty() {
        return Err(format!("{host}: no such host"));
    }
    Ok(ips)
}

pub fn command(args: &Args) -> Outcome {
    let name = args
        .pos(0)
        .ok_or_else(|| fail("usage: mtest dns NAME [TYPE] [--server IP[:PORT]]"))?;
    let tname = args.pos(1).unwrap_or("A");
    let t = qtype(tname).ok_or_else(|| fail(format!("unknown record type {tname}")))?;
    let mut conf = system_conf();
    if let Some(s) = args.flag("server") {
        let addr = s
            .parse::<SocketAddr>()
            .or_else(|_| s.parse::<IpAddr>().map(|ip| SocketAddr::new(ip, 53)))
            .map_err(|_| fail(format!("--server: not an address: {s}")))?;
        conf.nameservers = vec![addr];
    }
    let name = match (t, name.parse::<IpAddr>()) {
        (12, Ok(ip)) => reverse_name(ip),
        _ => name.to_string(),
    };
    match lookup(&conf, &name, t).map_err(fail)? {
        Some(records) => {
            for r in records {
                println!("{r}");
            }
            Ok(())
        }
        None => Err(fail(format!(
            "{name}: no {tname} records (NXDOMAIN or no data)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolv_conf_is_read_as_glibc_does() {
        let c = ResolvConf::parse(
            "# x\nnameserver 10.96.0.10\nnameserver fd00::a\nsearch default.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5 timeout:2 attempts:3\n",
        );
        assert_eq!(c.nameservers.len(), 2);
        assert_eq!(
            (c.ndots, c.timeout, c.attempts),
            (5, Duration::from_secs(2), 3)
        );
        assert_eq!(
            c.candidates("kubernetes"),
            vec![
                "kubernetes.default.svc.cluster.local",
                "kubernetes.svc.cluster.local",
                "kubernetes.cluster.local",
                "kubernetes"
            ]
        );
        assert_eq!(c.candidates("a.b.c.d.e.f")[0], "a.b.c.d.e.f");
        assert_eq!(c.candidates("x.local."), vec!["x.local"]);
    }

    #[test]
    fn answers_with_compressed_names_are_decoded() {
        // A response to "a.example." SRV with one SRV answer pointing at "t.example.".
        let mut m = encode_query(7, "a.example", 33);
        m[2] = 0x81;
        m[3] = 0x80;
        m[7] = 1;
        m.extend_from_slice(&[0xc0, 12, 0, 33, 0, 1, 0, 0, 0, 30]);
        let rdata = [0u8, 10, 0, 5, 0x1f, 0x90, 1, b't', 0xc0, 14];
        m.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
        m.extend_from_slice(&rdata);
        let a = decode(&m).expect("decodes");
        assert_eq!((a.id, a.rcode, a.truncated), (7, 0, false));
        assert_eq!(
            a.records[0].to_string(),
            "a.example. 30 IN SRV 10 5 8080 t.example."
        );
    }

    #[test]
    fn reverse_names_of_both_families() {
        assert_eq!(
            reverse_name("10.96.0.1".parse().expect("ip")),
            "1.0.96.10.in-addr.arpa."
        );
        assert!(reverse_name("::1".parse().expect("ip")).starts_with("1.0.0.0."));
        assert!(reverse_name("::1".parse().expect("ip")).ends_with(".ip6.arpa."));
    }
}
