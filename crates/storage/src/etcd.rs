//! The etcd backend: the [`Storage`] trait on the etcd v3 API (etcd 3.4 and newer).
//!
//! This is how users outgrow one machine: several API servers over one etcd cluster, or a
//! dedicated etcd for a large tenant. Compare-and-swap is an etcd transaction on the key's mod
//! (or create) revision; a watch is an etcd watch with previous values; etcd's "compacted" and
//! "future revision" failures map onto our closed error set. Every key is stored under an
//! optional root prefix so several independent stores can share one etcd.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, DeleteOptions, EventType, GetOptions, KvClient,
    PutOptions, Txn, TxnOp, TxnOpResponse, WatchOptions,
};
use tokio::sync::mpsc;

use crate::{
    ContinueToken, Error, Event, EventKind, KeyValue, ListOptions, ListResult, Result, Revision,
    Storage, WatchStream, check_key, check_value, prefix_end,
};

/// Items fetched per etcd range request when a list has no limit: keeps every response far
/// below gRPC's 4 MiB message limit for ordinary objects.
const LIST_CHUNK: i64 = 500;

/// Events buffered per watch before the watcher is terminated as too slow (as the embedded
/// store's: a burst must not drop the watch cache's feed; the channel allocates as it fills).
const WATCH_BUFFER: usize = 1 << 20;

/// A store on an etcd cluster.
pub struct EtcdStore {
    client: Client,
    /// Prepended to every key; stripped from every key returned.
    root: Vec<u8>,
}

/// How to reach an etcd beyond its endpoints: client TLS and etcd's own authentication.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Security {
    /// PEM of the CA that signed the servers' certificates (endpoints then use `https`).
    pub ca_pem: Option<String>,
    /// PEM of the client certificate and its key.
    pub client_cert_pem: Option<String>,
    pub client_key_pem: Option<String>,
    /// etcd user and password.
    pub user: Option<(String, String)>,
}

impl EtcdStore {
    /// Connects to `endpoints` (e.g. `http://127.0.0.1:2379`). `root` prefixes every key.
    pub async fn connect(endpoints: &[String], root: &[u8]) -> Result<Self> {
        Self::connect_with(endpoints, root, &Security::default()).await
    }

    /// Connects to `endpoints` with `security`. An endpoint without a scheme gets `https://`
    /// when a CA is given, else `http://`.
    pub async fn connect_with(
        endpoints: &[String],
        root: &[u8],
        security: &Security,
    ) -> Result<Self> {
        let mut opts = ConnectOptions::new()
            .with_connect_timeout(Duration::from_secs(5))
            .with_keep_alive(Duration::from_secs(10), Duration::from_secs(5));
        if security.ca_pem.is_some() || security.client_cert_pem.is_some() {
            let mut tls = etcd_client::TlsOptions::new();
            if let Some(ca) = &security.ca_pem {
                tls = tls.ca_certificate(etcd_client::Certificate::from_pem(ca));
            }
            if let (Some(cert), Some(key)) = (&security.client_cert_pem, &security.client_key_pem) {
                tls = tls.identity(etcd_client::Identity::from_pem(cert, key));
            }
            opts = opts.with_tls(tls);
        }
        if let Some((user, password)) = &security.user {
            opts = opts.with_user(user, password);
        }
        let scheme = if security.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        let endpoints: Vec<String> = endpoints
            .iter()
            .map(|e| {
                if e.contains("://") {
                    e.clone()
                } else {
                    format!("{scheme}://{e}")
                }
            })
            .collect();
        let client = Client::connect(&endpoints, Some(opts))
            .await
            .map_err(unavailable)?;
        let store = EtcdStore {
            client,
            root: root.to_vec(),
        };
        // Fail now rather than at the first request if etcd is not there.
        store.current_revision().await?;
        Ok(store)
    }

    fn kv(&self) -> KvClient {
        self.client
            .kv_client()
            .max_decoding_message_size(64 << 20)
            .max_encoding_message_size(64 << 20)
    }

    fn full(&self, key: &[u8]) -> Vec<u8> {
        let mut k = Vec::with_capacity(self.root.len() + key.len());
        k.extend_from_slice(&self.root);
        k.extend_from_slice(key);
        k
    }

    fn convert(&self, kv: &etcd_client::KeyValue) -> KeyValue {
        KeyValue {
            key: Bytes::copy_from_slice(
                kv.key()
                    .strip_prefix(self.root.as_slice())
                    .unwrap_or(kv.key()),
            ),
            value: Bytes::copy_from_slice(kv.value()),
            create_revision: kv.create_revision(),
            mod_revision: kv.mod_revision(),
            version: kv.version(),
        }
    }

    /// Runs a compare-and-write transaction; on failure reads the key back.
    async fn cas(
        &self,
        key: &[u8],
        cmp: Compare,
        op: TxnOp,
    ) -> Result<(bool, Vec<TxnOpResponse>, Revision)> {
        let full = self.full(key);
        let txn = Txn::new()
            .when([cmp])
            .and_then([op])
            .or_else([TxnOp::get(full, None)]);
        let resp = self.kv().txn(txn).await.map_err(map_err)?;
        let rev = resp.header().map(|h| h.revision()).unwrap_or_default();
        Ok((resp.succeeded(), resp.op_responses(), rev))
    }

    fn current_from(&self, responses: &[TxnOpResponse]) -> Option<KeyValue> {
        responses.iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g.kvs().first().map(|kv| self.convert(kv)),
            _ => None,
        })
    }

    fn put_result(
        &self,
        key: &[u8],
        value: Bytes,
        responses: &[TxnOpResponse],
        rev: Revision,
    ) -> KeyValue {
        let prev = responses.iter().find_map(|r| match r {
            TxnOpResponse::Put(p) => p.prev_key().map(|kv| self.convert(kv)),
            _ => None,
        });
        let (create_revision, version) = match prev {
            Some(p) => (p.create_revision, p.version + 1),
            None => (rev, 1),
        };
        KeyValue {
            key: Bytes::copy_from_slice(key),
            value,
            create_revision,
            mod_revision: rev,
            version,
        }
    }
}

fn unavailable(e: etcd_client::Error) -> Error {
    Error::Unavailable(format!("etcd: {e}"))
}

/// Maps etcd's failures onto our error set.
fn map_err(e: etcd_client::Error) -> Error {
    let msg = e.to_string();
    if msg.contains("required revision has been compacted") {
        Error::Compacted {
            requested: 0,
            compacted: 0,
        }
    } else if msg.contains("required revision is a future revision") {
        Error::FutureRevision {
            requested: 0,
            current: 0,
        }
    } else if msg.contains("request is too large") || msg.contains("message length too large") {
        Error::InvalidArgument(format!("etcd refused the request: {msg}"))
    } else {
        Error::Unavailable(format!("etcd: {msg}"))
    }
}

#[async_trait::async_trait]
impl Storage for EtcdStore {
    async fn get(&self, key: &[u8]) -> Result<Option<KeyValue>> {
        check_key(key)?;
        let resp = self.kv().get(self.full(key), None).await.map_err(map_err)?;
        Ok(resp.kvs().first().map(|kv| self.convert(kv)))
    }

    async fn list(&self, prefix: &[u8], opts: ListOptions) -> Result<ListResult> {
        let (mut rev, start) = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let tok = ContinueToken::decode(t, prefix)?;
                (tok.revision, tok.start)
            }
            _ => (opts.revision.unwrap_or(0), prefix.to_vec()),
        };
        if rev < 0 {
            return Err(Error::InvalidArgument(format!("negative revision {rev}")));
        }
        let end = match prefix_end(&self.full(prefix)) {
            Some(e) => e,
            None => vec![0],
        };
        let limit = opts.limit.unwrap_or(0) as i64;
        let mut items = Vec::new();
        let mut from = self.full(&start);
        loop {
            // Ask for one more than wanted to learn whether another page exists.
            let want = if limit > 0 {
                (limit - items.len() as i64 + 1).min(LIST_CHUNK)
            } else {
                LIST_CHUNK
            };
            let mut o = GetOptions::new().with_range(end.clone()).with_limit(want);
            if rev > 0 {
                o = o.with_revision(rev);
            }
            let resp =
                self.kv()
                    .get(from.clone(), Some(o))
                    .await
                    .map_err(|e| match map_err(e) {
                        Error::Compacted { .. } => Error::Compacted {
                            requested: rev,
                            compacted: rev,
                        },
                        Error::FutureRevision { .. } if opts.continue_token.is_some() => {
                            Error::InvalidContinue(format!("revision {rev} is in the future"))
                        }
                        Error::FutureRevision { .. } => Error::FutureRevision {
                            requested: rev,
                            current: 0,
                        },
                        other => other,
                    })?;
            if rev == 0 {
                rev = resp.header().map(|h| h.revision()).unwrap_or_default();
            }
            let kvs = resp.kvs();
            for kv in kvs {
                items.push(self.convert(kv));
            }
            if limit > 0 && items.len() as i64 > limit {
                items.truncate(limit as usize);
                let last = &items[items.len() - 1];
                let token = ContinueToken::after(rev, &last.key).encode();
                let remaining = (resp.count() - kvs.len() as i64 + 1).max(1) as u64;
                return Ok(ListResult {
                    items,
                    revision: rev,
                    continue_token: Some(token),
                    remaining: Some(remaining),
                });
            }
            if !resp.more() || kvs.is_empty() {
                return Ok(ListResult {
                    items,
                    revision: rev,
                    continue_token: None,
                    remaining: None,
                });
            }
            from = kvs[kvs.len() - 1].key().to_vec();
            from.push(0);
        }
    }

    async fn create(&self, key: &[u8], value: Bytes) -> Result<KeyValue> {
        check_key(key)?;
        check_value(&value)?;
        let full = self.full(key);
        let cmp = Compare::create_revision(full.clone(), CompareOp::Equal, 0);
        let op = TxnOp::put(full, value.to_vec(), None);
        let (ok, responses, rev) = self.cas(key, cmp, op).await?;
        if !ok {
            return Err(Error::AlreadyExists);
        }
        Ok(self.put_result(key, value, &responses, rev))
    }

    async fn update(
        &self,
        key: &[u8],
        value: Bytes,
        expected_mod_revision: Revision,
    ) -> Result<KeyValue> {
        check_key(key)?;
        check_value(&value)?;
        let full = self.full(key);
        let cmp = Compare::mod_revision(full.clone(), CompareOp::Equal, expected_mod_revision);
        let op = TxnOp::put(
            full,
            value.to_vec(),
            Some(PutOptions::new().with_prev_key()),
        );
        let (ok, responses, rev) = self.cas(key, cmp, op).await?;
        if !ok {
            return match self.current_from(&responses) {
                None => Err(Error::NotFound),
                Some(cur) => Err(Error::Conflict {
                    current: Some(Box::new(cur)),
                    revision: rev,
                }),
            };
        }
        Ok(self.put_result(key, value, &responses, rev))
    }

    async fn delete(
        &self,
        key: &[u8],
        expected_mod_revision: Option<Revision>,
    ) -> Result<KeyValue> {
        check_key(key)?;
        let full = self.full(key);
        let cmp = match expected_mod_revision {
            Some(r) => Compare::mod_revision(full.clone(), CompareOp::Equal, r),
            None => Compare::create_revision(full.clone(), CompareOp::Greater, 0),
        };
        let op = TxnOp::delete(full, Some(DeleteOptions::new().with_prev_key()));
        let (ok, responses, rev) = self.cas(key, cmp, op).await?;
        if !ok {
            return match self.current_from(&responses) {
                None => Err(Error::NotFound),
                Some(cur) => Err(Error::Conflict {
                    current: Some(Box::new(cur)),
                    revision: rev,
                }),
            };
        }
        let prev = responses.iter().find_map(|r| match r {
            TxnOpResponse::Delete(d) => d.prev_kvs().first().map(|kv| self.convert(kv)),
            _ => None,
        });
        match prev {
            Some(mut p) => {
                p.mod_revision = rev;
                Ok(p)
            }
            // Deleted between the compare and the delete: impossible within one transaction.
            None => Err(Error::NotFound),
        }
    }

    async fn delete_prefix(&self, prefix: &[u8]) -> Result<u64> {
        check_key(prefix)?;
        let resp = self
            .kv()
            .delete(self.full(prefix), Some(DeleteOptions::new().with_prefix()))
            .await
            .map_err(map_err)?;
        Ok(resp.deleted() as u64)
    }

    async fn watch(&self, prefix: &[u8], after_revision: Revision) -> Result<WatchStream> {
        if after_revision < 0 {
            return Err(Error::InvalidArgument(format!(
                "negative revision {after_revision}"
            )));
        }
        // etcd reports a compacted start revision asynchronously, after confirming the watch; a
        // read at the first watched revision fails at once in exactly the same case.
        if after_revision > 0 {
            let probe = GetOptions::new()
                .with_count_only()
                .with_revision(after_revision + 1);
            match self
                .kv()
                .get(self.full(prefix), Some(probe))
                .await
                .map_err(map_err)
            {
                Err(Error::Compacted { .. }) => {
                    let compacted = self.compacted_revision().await.unwrap_or_default();
                    return Err(Error::Compacted {
                        requested: after_revision,
                        compacted,
                    });
                }
                Ok(_) | Err(Error::FutureRevision { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        let opts = WatchOptions::new()
            .with_prefix()
            .with_prev_key()
            .with_start_revision(after_revision + 1);
        let mut stream = self
            .client
            .watch_client()
            .max_decoding_message_size(64 << 20)
            .watch(self.full(prefix), Some(opts))
            .await
            .map_err(map_err)?;
        // The first response confirms the creation, or cancels a compacted watch at once.
        let first = stream.message().await.map_err(map_err)?;
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let root = self.root.clone();
        let this = EtcdStore {
            client: self.client.clone(),
            root: root.clone(),
        };
        let mut pending = Vec::new();
        if let Some(resp) = first {
            if resp.compact_revision() > 0 {
                return Err(Error::Compacted {
                    requested: after_revision,
                    compacted: resp.compact_revision(),
                });
            }
            if resp.canceled() {
                return Err(Error::Unavailable(format!(
                    "etcd cancelled the watch: {}",
                    resp.cancel_reason()
                )));
            }
            pending.push(resp);
        }
        tokio::spawn(async move {
            let this = Arc::new(this);
            let deliver = |resp: etcd_client::WatchResponse| -> std::result::Result<(), ()> {
                if resp.compact_revision() > 0 {
                    let _ = tx.try_send(Err(Error::Compacted {
                        requested: after_revision,
                        compacted: resp.compact_revision(),
                    }));
                    return Err(());
                }
                if resp.canceled() {
                    let _ = tx.try_send(Err(Error::Unavailable(format!(
                        "etcd cancelled the watch: {}",
                        resp.cancel_reason()
                    ))));
                    return Err(());
                }
                for ev in resp.events() {
                    let Some(kv) = ev.kv() else { continue };
                    let prev = ev.prev_kv().map(|p| this.convert(p));
                    let mut cur = this.convert(kv);
                    let kind = match ev.event_type() {
                        EventType::Delete => {
                            cur.value = Bytes::new();
                            EventKind::Delete
                        }
                        EventType::Put if kv.version() == 1 => EventKind::Create,
                        EventType::Put => EventKind::Update,
                    };
                    if tx.capacity() <= 1 {
                        let _ = tx.try_send(Err(Error::WatcherTooSlow(WATCH_BUFFER)));
                        return Err(());
                    }
                    if tx
                        .try_send(Ok(Arc::new(Event {
                            kind,
                            kv: cur,
                            prev,
                        })))
                        .is_err()
                    {
                        return Err(());
                    }
                }
                Ok(())
            };
            for resp in pending {
                if deliver(resp).is_err() {
                    return;
                }
            }
            loop {
                tokio::select! {
                    msg = stream.message() => match msg {
                        Ok(Some(resp)) => if deliver(resp).is_err() { return },
                        Ok(None) => return,
                        Err(e) => {
                            let _ = tx.try_send(Err(Error::Unavailable(format!("etcd watch failed: {e}"))));
                            return;
                        }
                    },
                    () = tx.closed() => return,
                }
            }
        });
        Ok(WatchStream::from_channel(rx))
    }

    async fn current_revision(&self) -> Result<Revision> {
        let resp = self
            .kv()
            .get(self.full(b"\0"), Some(GetOptions::new().with_count_only()))
            .await
            .map_err(map_err)?;
        Ok(resp.header().map(|h| h.revision()).unwrap_or_default())
    }

    async fn compact(&self, revision: Revision) -> Result<()> {
        match self.kv().compact(revision, None).await {
            Ok(_) => Ok(()),
            Err(e) => match map_err(e) {
                // Already compacted at or past `revision`: nothing to do.
                Error::Compacted { .. } => Ok(()),
                Error::FutureRevision { .. } => Err(Error::FutureRevision {
                    requested: revision,
                    current: self.current_revision().await?,
                }),
                other => Err(other),
            },
        }
    }

    async fn compacted_revision(&self) -> Result<Revision> {
        // etcd does not report its compacted revision directly; a watch from revision 1 is
        // cancelled with it when history was compacted.
        let mut stream = self
            .client
            .watch_client()
            .watch(
                self.full(b"\0compaction-probe"),
                Some(WatchOptions::new().with_start_revision(1)),
            )
            .await
            .map_err(map_err)?;
        let mut compacted = 0;
        for _ in 0..2 {
            match tokio::time::timeout(Duration::from_millis(500), stream.message()).await {
                Ok(Ok(Some(resp))) if resp.compact_revision() > 0 => {
                    compacted = resp.compact_revision();
                    break;
                }
                Ok(Ok(Some(resp))) if resp.created() => continue,
                _ => break,
            }
        }
        Ok(compacted)
    }
}
