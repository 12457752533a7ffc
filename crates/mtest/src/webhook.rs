//! `mtest serve-webhook`: a validating admission webhook over HTTPS (what upstream's agnhost
//! `webhook` command is for its admission e2e tests).
//!
//! ```text
//! mtest serve-webhook --cert FILE --key FILE [--port 8443] [--deny-prefix bad]
//! ```
//!
//! Every `AdmissionReview` (v1 or v1beta1) is answered at once: allowed, unless the object's
//! name starts with the prefix, which is refused with code 403 and the message
//! `<name> is refused by the webhook in a pod`. Connections are kept alive.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};

use crate::{Args, Outcome, fail};

/// The largest request body accepted.
const MAX_BODY: usize = 4 << 20;

pub fn serve(args: &Args) -> Outcome {
    let port: u16 = args
        .flag("port")
        .unwrap_or("8443")
        .parse()
        .map_err(|_| fail("--port: not a port"))?;
    let cert = args
        .flag("cert")
        .ok_or_else(|| fail("--cert is required"))?;
    let key = args.flag("key").ok_or_else(|| fail("--key is required"))?;
    let prefix = args.flag("deny-prefix").unwrap_or("bad").to_string();
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| fail(format!("{cert}: {e}")))?;
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| fail(format!("{key}: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| fail(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| fail(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let config = Arc::new(config);
    let listener =
        TcpListener::bind(("0.0.0.0", port)).map_err(|e| fail(format!("listen :{port}: {e}")))?;
    println!("serving admission reviews on :{port}");
    for conn in listener.incoming().flatten() {
        let (config, prefix) = (config.clone(), prefix.clone());
        std::thread::spawn(move || {
            let _ = connection(conn, config, &prefix);
        });
    }
    Ok(())
}

fn connection(
    tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
    prefix: &str,
) -> std::io::Result<()> {
    let tls = rustls::ServerConnection::new(config).map_err(std::io::Error::other)?;
    let mut stream = BufReader::new(rustls::StreamOwned::new(tls, tcp));
    loop {
        let mut length = 0usize;
        let mut first = true;
        loop {
            let mut line = String::new();
            if stream.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                if first {
                    continue;
                }
                break;
            }
            first = false;
            if let Some((k, v)) = line.split_once(':')
                && k.eq_ignore_ascii_case("content-length")
            {
                length = v.trim().parse().unwrap_or(0);
            }
        }
        if length > MAX_BODY {
            return Ok(());
        }
        let mut body = vec![0; length];
        stream.read_exact(&mut body)?;
        let out = answer(&body, prefix).to_string();
        let w = stream.get_mut();
        write!(
            w,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{out}",
            out.len()
        )?;
        w.flush()?;
    }
}

fn answer(body: &[u8], prefix: &str) -> Value {
    let review: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let request = &review["request"];
    let name = request["object"]["metadata"]["name"]
        .as_str()
        .or(request["name"].as_str())
        .unwrap_or("");
    let mut response = json!({"uid": request["uid"], "allowed": true});
    if !prefix.is_empty() && name.starts_with(prefix) {
        response["allowed"] = json!(false);
        response["status"] = json!({
            "code": 403,
            "reason": "Forbidden",
            "message": format!("{name} is refused by the webhook in a pod"),
        });
    }
    json!({
        "apiVersion": review.get("apiVersion").cloned().unwrap_or(json!("admission.k8s.io/v1")),
        "kind": "AdmissionReview",
        "response": response,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_the_prefix_are_refused_and_others_allowed() {
        let review = |name: &str| {
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "request": {"uid": "u", "object": {"metadata": {"name": name}}}})
            .to_string()
        };
        let no = answer(review("bad-1").as_bytes(), "bad");
        assert_eq!(no["response"]["allowed"], false);
        assert_eq!(no["response"]["uid"], "u");
        assert_eq!(
            no["response"]["status"]["message"],
            "bad-1 is refused by the webhook in a pod"
        );
        let yes = answer(review("good").as_bytes(), "bad");
        assert_eq!(yes["response"]["allowed"], true);
    }
}
