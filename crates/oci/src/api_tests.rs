//! The distribution API against a real store in a temporary directory: pushes (monolithic,
//! chunked, mounted), pulls, verification, error codes, negotiation, concurrency, restarts.

use bytes::Bytes;
use futures::stream;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;

use crate::api::{Body, Registry, Request, Response};
use crate::digest::Digest;
use crate::manifest::{DOCKER_MANIFEST, OCI_CONFIG, OCI_INDEX, OCI_LAYER_GZIP, OCI_MANIFEST};

type Chunks = stream::Iter<std::vec::IntoIter<std::io::Result<Bytes>>>;

fn body(b: &[u8]) -> Chunks {
    stream::iter(vec![Ok(Bytes::copy_from_slice(b))])
}

fn none() -> Chunks {
    stream::iter(Vec::new())
}

struct T {
    reg: Registry,
    _dir: tempfile::TempDir,
}

async fn registry() -> T {
    let dir = tempfile::tempdir().expect("tempdir");
    let reg = Registry::open(dir.path().join("registry"))
        .await
        .expect("opens");
    T { reg, _dir: dir }
}

fn req(method: &str, target: &str) -> Request {
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    Request::route(method, path, query).unwrap_or_else(|e| panic!("{target} routes: {e}"))
}

async fn text(r: Response) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
    let bytes = match r.body {
        Body::Empty => Vec::new(),
        Body::Bytes(b) => b.to_vec(),
        Body::File { file, len } => {
            let mut v = Vec::new();
            file.take(len).read_to_end(&mut v).await.expect("reads");
            v
        }
    };
    (r.status, r.headers, bytes)
}

fn header<'a>(h: &'a [(&'static str, String)], name: &str) -> Option<&'a str> {
    h.iter()
        .find(|(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

fn error_code(bytes: &[u8]) -> String {
    let v: Value = serde_json::from_slice(bytes).unwrap_or_default();
    v["errors"][0]["code"].as_str().unwrap_or("").to_string()
}

impl T {
    async fn call(&self, r: Request, b: Chunks) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
        text(self.reg.serve(&r, b).await).await
    }

    async fn push_blob(&self, repo: &str, content: &[u8]) -> Digest {
        let d = Digest::sha256(content);
        let (status, h, b) = self
            .call(
                req("POST", &format!("/v2/{repo}/blobs/uploads/?digest={d}")),
                body(content),
            )
            .await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&b));
        assert_eq!(
            header(&h, "Docker-Content-Digest"),
            Some(d.to_string().as_str())
        );
        d
    }

    async fn push_image(&self, repo: &str, tag: &str, layer: &[u8]) -> (Digest, Vec<u8>) {
        let config = self
            .push_blob(repo, b"{\"architecture\":\"amd64\",\"os\":\"linux\"}")
            .await;
        let l = self.push_blob(repo, layer).await;
        let m = serde_json::to_vec(&json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config.to_string(), "size": 37},
            "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": l.to_string(), "size": layer.len()}],
        }))
        .expect("json");
        let mut r = req("PUT", &format!("/v2/{repo}/manifests/{tag}"));
        r.content_type = Some(OCI_MANIFEST.into());
        let (status, h, b) = self.call(r, body(&m)).await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&b));
        let d = Digest::sha256(&m);
        assert_eq!(
            header(&h, "Docker-Content-Digest"),
            Some(d.to_string().as_str())
        );
        assert_eq!(
            header(&h, "Location"),
            Some(format!("/v2/{repo}/manifests/{d}").as_str())
        );
        (d, m)
    }
}

#[tokio::test]
async fn a_monolithic_push_is_verified_and_pulled_back() {
    let t = registry().await;
    let d = t.push_blob("library/busybox", b"hello layer").await;
    let (status, h, b) = t
        .call(
            req("GET", &format!("/v2/library/busybox/blobs/{d}")),
            none(),
        )
        .await;
    assert_eq!((status, b.as_slice()), (200, &b"hello layer"[..]));
    assert_eq!(header(&h, "Content-Length"), Some("11"));
    assert_eq!(
        header(&h, "Docker-Distribution-API-Version"),
        Some("registry/2.0")
    );
    let (status, h, b) = t
        .call(
            req("HEAD", &format!("/v2/library/busybox/blobs/{d}")),
            none(),
        )
        .await;
    assert_eq!((status, b.len()), (200, 0));
    assert_eq!(header(&h, "Content-Length"), Some("11"));
    // Another repository does not hold it.
    let (status, _, b) = t
        .call(req("GET", &format!("/v2/other/blobs/{d}")), none())
        .await;
    assert_eq!((status, error_code(&b).as_str()), (404, "BLOB_UNKNOWN"));
}

#[tokio::test]
async fn content_that_does_not_match_its_digest_is_refused_and_kept_nowhere() {
    let t = registry().await;
    let d = Digest::sha256(b"the real content");
    let (status, _, b) = t
        .call(
            req("POST", &format!("/v2/a/blobs/uploads/?digest={d}")),
            body(b"something else"),
        )
        .await;
    assert_eq!((status, error_code(&b).as_str()), (400, "DIGEST_INVALID"));
    assert!(!t.reg.store.blob_stored(&d).await);
    assert!(
        !t.reg
            .store
            .blob_stored(&Digest::sha256(b"something else"))
            .await
    );
    // A declared length that the body does not have.
    let d = Digest::sha256(b"abc");
    let mut r = req("POST", &format!("/v2/a/blobs/uploads/?digest={d}"));
    r.content_length = Some(10);
    let (status, _, b) = t.call(r, body(b"abcd")).await;
    assert_eq!((status, error_code(&b).as_str()), (400, "SIZE_INVALID"));
}

#[tokio::test]
async fn a_chunked_upload_continues_where_it_stands_and_is_verified_at_the_end() {
    let t = registry().await;
    let (status, h, _) = t.call(req("POST", "/v2/a/b/blobs/uploads/"), none()).await;
    assert_eq!(status, 202);
    assert_eq!(header(&h, "Range"), Some("0-0"));
    let location = header(&h, "Location").expect("Location").to_string();
    let id = header(&h, "Docker-Upload-UUID").expect("uuid").to_string();
    assert_eq!(location, format!("/v2/a/b/blobs/uploads/{id}"));
    let mut r = req("PATCH", &location);
    r.content_range = Some("0-4".into());
    let (status, h, _) = t.call(r, body(b"01234")).await;
    assert_eq!((status, header(&h, "Range")), (202, Some("0-4")));
    // A chunk without Content-Range streams on.
    let (status, h, _) = t.call(req("PATCH", &location), body(b"56789")).await;
    assert_eq!((status, header(&h, "Range")), (202, Some("0-9")));
    let (status, h, _) = t.call(req("GET", &location), none()).await;
    assert_eq!((status, header(&h, "Range")), (204, Some("0-9")));
    // The last chunk comes with the PUT.
    let d = Digest::sha256(b"0123456789ab");
    let (status, h, _) = t
        .call(req("PUT", &format!("{location}?digest={d}")), body(b"ab"))
        .await;
    assert_eq!(status, 201);
    assert_eq!(
        header(&h, "Location"),
        Some(format!("/v2/a/b/blobs/{d}").as_str())
    );
    let (_, _, b) = t
        .call(req("GET", &format!("/v2/a/b/blobs/{d}")), none())
        .await;
    assert_eq!(b, b"0123456789ab");
    // The upload is over.
    let (status, _, b) = t.call(req("GET", &location), none()).await;
    assert_eq!(
        (status, error_code(&b).as_str()),
        (404, "BLOB_UPLOAD_UNKNOWN")
    );
}

#[tokio::test]
async fn a_chunk_out_of_order_is_416_and_changes_nothing() {
    let t = registry().await;
    let (_, h, _) = t.call(req("POST", "/v2/a/blobs/uploads/"), none()).await;
    let location = header(&h, "Location").expect("Location").to_string();
    let (status, _, _) = t.call(req("PATCH", &location), body(b"hello")).await;
    assert_eq!(status, 202);
    let mut r = req("PATCH", &location);
    r.content_range = Some("3-7".into());
    let (status, h, b) = t.call(r, body(b"xxxxx")).await;
    assert_eq!((status, error_code(&b).as_str()), (416, "RANGE_INVALID"));
    assert_eq!(header(&h, "Range"), Some("0-4"));
    assert_eq!(header(&h, "Location"), Some(location.as_str()));
    // A wrong final digest ends the upload.
    let wrong = Digest::sha256(b"nope");
    let (status, _, b) = t
        .call(req("PUT", &format!("{location}?digest={wrong}")), none())
        .await;
    assert_eq!((status, error_code(&b).as_str()), (400, "DIGEST_INVALID"));
    let (status, _, _) = t.call(req("GET", &location), none()).await;
    assert_eq!(status, 404);
    // A PUT without a digest.
    let (_, h, _) = t.call(req("POST", "/v2/a/blobs/uploads/"), none()).await;
    let location = header(&h, "Location").expect("Location").to_string();
    let (status, _, b) = t.call(req("PUT", &location), none()).await;
    assert_eq!((status, error_code(&b).as_str()), (400, "DIGEST_INVALID"));
}

#[tokio::test]
async fn uploads_belong_to_their_repository_and_can_be_cancelled() {
    let t = registry().await;
    let (_, h, _) = t.call(req("POST", "/v2/a/blobs/uploads/"), none()).await;
    let id = header(&h, "Docker-Upload-UUID").expect("uuid").to_string();
    let (status, _, b) = t
        .call(req("GET", &format!("/v2/b/blobs/uploads/{id}")), none())
        .await;
    assert_eq!(
        (status, error_code(&b).as_str()),
        (404, "BLOB_UPLOAD_UNKNOWN")
    );
    let (status, _, b) = t
        .call(req("GET", "/v2/a/blobs/uploads/../../etc"), none())
        .await;
    assert_eq!(
        (status, error_code(&b).as_str()),
        (404, "BLOB_UPLOAD_UNKNOWN")
    );
    let (status, _, _) = t
        .call(req("DELETE", &format!("/v2/a/blobs/uploads/{id}")), none())
        .await;
    assert_eq!(status, 204);
    let (status, _, _) = t
        .call(req("GET", &format!("/v2/a/blobs/uploads/{id}")), none())
        .await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn an_upload_survives_a_restart_of_the_registry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let location = {
        let reg = Registry::open(dir.path()).await.expect("opens");
        let r = reg
            .serve(&req("POST", "/v2/a/blobs/uploads/"), none())
            .await;
        let location = r.header_value("Location").expect("Location").to_string();
        let r = reg
            .serve(&req("PATCH", &location), body(b"first half,"))
            .await;
        assert_eq!(r.status, 202);
        location
    };
    let reg = Registry::open(dir.path()).await.expect("reopens");
    let r = reg.serve(&req("GET", &location), none()).await;
    assert_eq!(r.header_value("Range"), Some("0-10"));
    let d = Digest::sha256(b"first half, second half");
    let r = reg
        .serve(
            &req("PUT", &format!("{location}?digest={d}")),
            body(b" second half"),
        )
        .await;
    assert_eq!(r.status, 201);
}

#[tokio::test]
async fn a_manifest_is_refused_until_the_repository_holds_its_blobs() {
    let t = registry().await;
    let config = Digest::sha256(b"{}");
    let m = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": config.to_string(), "size": 2},
        "layers": [],
    }))
    .expect("json");
    let (status, _, b) = t.call(req("PUT", "/v2/a/manifests/v1"), body(&m)).await;
    assert_eq!(
        (status, error_code(&b).as_str()),
        (400, "MANIFEST_BLOB_UNKNOWN")
    );
    // The blob in another repository does not count.
    t.push_blob("elsewhere", b"{}").await;
    let (status, _, _) = t.call(req("PUT", "/v2/a/manifests/v1"), body(&m)).await;
    assert_eq!(status, 400);
    t.push_blob("a", b"{}").await;
    let (status, _, _) = t.call(req("PUT", "/v2/a/manifests/v1"), body(&m)).await;
    assert_eq!(status, 201);
    // By digest, the body must have that digest.
    let wrong = Digest::sha256(b"other");
    let (status, _, b) = t
        .call(req("PUT", &format!("/v2/a/manifests/{wrong}")), body(&m))
        .await;
    assert_eq!((status, error_code(&b).as_str()), (400, "DIGEST_INVALID"));
    let (status, _, b) = t
        .call(req("PUT", "/v2/a/manifests/v2"), body(b"{not json"))
        .await;
    assert_eq!((status, error_code(&b).as_str()), (400, "MANIFEST_INVALID"));
}

#[tokio::test]
async fn manifests_are_pulled_by_tag_and_digest_and_listed() {
    let t = registry().await;
    let (d, m) = t
        .push_image("docker.io/library/busybox", "1", b"layer")
        .await;
    for reference in ["1".to_string(), d.to_string()] {
        let (status, h, b) = t
            .call(
                req(
                    "GET",
                    &format!("/v2/docker.io/library/busybox/manifests/{reference}"),
                ),
                none(),
            )
            .await;
        assert_eq!(status, 200);
        assert_eq!(b, m);
        assert_eq!(header(&h, "Content-Type"), Some(OCI_MANIFEST));
        assert_eq!(
            header(&h, "Docker-Content-Digest"),
            Some(d.to_string().as_str())
        );
    }
    // containerd as a mirror names the registry in `ns`.
    let (status, _, b) = t
        .call(
            req("HEAD", "/v2/library/busybox/manifests/1?ns=docker.io"),
            none(),
        )
        .await;
    assert_eq!((status, b.len()), (200, 0));
    let (status, _, b) = t
        .call(
            req("GET", "/v2/docker.io/library/busybox/manifests/2"),
            none(),
        )
        .await;
    assert_eq!((status, error_code(&b).as_str()), (404, "MANIFEST_UNKNOWN"));
    let (status, _, b) = t.call(req("GET", "/v2/nothing/manifests/1"), none()).await;
    assert_eq!((status, error_code(&b).as_str()), (404, "NAME_UNKNOWN"));
    t.push_image("docker.io/library/busybox", "latest", b"layer")
        .await;
    t.push_image("quay.io/x/y", "v1", b"other").await;
    let (_, _, b) = t
        .call(
            req("GET", "/v2/docker.io/library/busybox/tags/list"),
            none(),
        )
        .await;
    let v: Value = serde_json::from_slice(&b).expect("json");
    assert_eq!(
        v,
        json!({"name": "docker.io/library/busybox", "tags": ["1", "latest"]})
    );
    let (_, _, b) = t.call(req("GET", "/v2/_catalog"), none()).await;
    let v: Value = serde_json::from_slice(&b).expect("json");
    assert_eq!(
        v,
        json!({"repositories": ["docker.io/library/busybox", "quay.io/x/y"]})
    );
}

#[tokio::test]
async fn lists_are_paginated_with_a_link_to_the_next_page() {
    let t = registry().await;
    for tag in ["a", "b", "c"] {
        t.push_image("r", tag, b"l").await;
    }
    let (_, h, b) = t.call(req("GET", "/v2/r/tags/list?n=2"), none()).await;
    let v: Value = serde_json::from_slice(&b).expect("json");
    assert_eq!(v["tags"], json!(["a", "b"]));
    assert_eq!(
        header(&h, "Link"),
        Some("</v2/r/tags/list?last=b&n=2>; rel=\"next\"")
    );
    let (_, h, b) = t
        .call(req("GET", "/v2/r/tags/list?n=2&last=b"), none())
        .await;
    let v: Value = serde_json::from_slice(&b).expect("json");
    assert_eq!(
        (v["tags"].clone(), header(&h, "Link")),
        (json!(["c"]), None)
    );
}

#[tokio::test]
async fn a_client_that_cannot_read_indexes_gets_the_linux_amd64_image() {
    let t = registry().await;
    let (amd64, amd64_bytes) = t.push_image("multi", "amd64", b"x86").await;
    let (arm64, _) = t.push_image("multi", "arm64", b"arm").await;
    let index = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [
            {"mediaType": OCI_MANIFEST, "digest": arm64.to_string(), "size": 1,
             "platform": {"os": "linux", "architecture": "arm64"}},
            {"mediaType": OCI_MANIFEST, "digest": amd64.to_string(), "size": 1,
             "platform": {"os": "linux", "architecture": "amd64"}},
        ],
    }))
    .expect("json");
    let (status, _, _) = t
        .call(req("PUT", "/v2/multi/manifests/all"), body(&index))
        .await;
    assert_eq!(status, 201);
    let mut r = req("GET", "/v2/multi/manifests/all");
    r.accept = vec![format!("{OCI_MANIFEST}, {DOCKER_MANIFEST}")];
    let (_, h, b) = t.call(r, none()).await;
    assert_eq!(b, amd64_bytes);
    assert_eq!(
        header(&h, "Docker-Content-Digest"),
        Some(amd64.to_string().as_str())
    );
    let mut r = req("GET", "/v2/multi/manifests/all");
    r.accept = vec![OCI_INDEX.into(), OCI_MANIFEST.into()];
    let (_, h, b) = t.call(r, none()).await;
    assert_eq!((b, header(&h, "Content-Type")), (index, Some(OCI_INDEX)));
    // An index whose child the repository lacks is refused.
    let missing = serde_json::to_vec(&json!({
        "schemaVersion": 2, "mediaType": OCI_INDEX,
        "manifests": [{"mediaType": OCI_MANIFEST, "digest": Digest::sha256(b"?").to_string(), "size": 1}],
    }))
    .expect("json");
    let (status, _, b) = t
        .call(req("PUT", "/v2/multi/manifests/bad"), body(&missing))
        .await;
    assert_eq!(
        (status, error_code(&b).as_str()),
        (400, "MANIFEST_BLOB_UNKNOWN")
    );
}

#[tokio::test]
async fn a_blob_is_mounted_from_another_repository_without_its_content() {
    let t = registry().await;
    let d = t.push_blob("source/repo", b"shared layer").await;
    let (status, h, _) = t
        .call(
            req(
                "POST",
                &format!("/v2/target/blobs/uploads/?mount={d}&from=source/repo"),
            ),
            none(),
        )
        .await;
    assert_eq!(status, 201);
    assert_eq!(
        header(&h, "Location"),
        Some(format!("/v2/target/blobs/{d}").as_str())
    );
    let (status, _, _) = t
        .call(req("HEAD", &format!("/v2/target/blobs/{d}")), none())
        .await;
    assert_eq!(status, 200);
    // Not in `from`: an ordinary upload starts instead.
    let other = Digest::sha256(b"unknown");
    let (status, h, _) = t
        .call(
            req(
                "POST",
                &format!("/v2/target/blobs/uploads/?mount={other}&from=source/repo"),
            ),
            none(),
        )
        .await;
    assert_eq!(status, 202);
    assert!(header(&h, "Docker-Upload-UUID").is_some());
}

#[tokio::test]
async fn byte_ranges_of_a_blob_are_served_partially() {
    let t = registry().await;
    let d = t.push_blob("a", b"0123456789").await;
    let mut r = req("GET", &format!("/v2/a/blobs/{d}"));
    r.range = Some("bytes=2-5".into());
    let (status, h, b) = t.call(r, none()).await;
    assert_eq!((status, b.as_slice()), (206, &b"2345"[..]));
    assert_eq!(header(&h, "Content-Range"), Some("bytes 2-5/10"));
    let mut r = req("GET", &format!("/v2/a/blobs/{d}"));
    r.range = Some("bytes=7-".into());
    let (_, _, b) = t.call(r, none()).await;
    assert_eq!(b, b"789");
    let mut r = req("GET", &format!("/v2/a/blobs/{d}"));
    r.range = Some("bytes=20-30".into());
    let (status, _, _) = t.call(r, none()).await;
    assert_eq!(status, 416);
}

#[tokio::test]
async fn deleting_a_tag_or_a_manifest_makes_it_unknown() {
    let t = registry().await;
    let (d, _) = t.push_image("a", "v1", b"l").await;
    t.push_image("a", "v2", b"l").await;
    let (status, _, _) = t.call(req("DELETE", "/v2/a/manifests/v2"), none()).await;
    assert_eq!(status, 202);
    let (status, _, _) = t.call(req("GET", "/v2/a/manifests/v2"), none()).await;
    assert_eq!(status, 404);
    let (status, _, _) = t
        .call(req("DELETE", &format!("/v2/a/manifests/{d}")), none())
        .await;
    assert_eq!(status, 202);
    for r in ["v1".to_string(), d.to_string()] {
        let (status, _, b) = t
            .call(req("GET", &format!("/v2/a/manifests/{r}")), none())
            .await;
        assert_eq!(
            (status, error_code(&b).as_str()),
            (404, "MANIFEST_UNKNOWN"),
            "{r}"
        );
    }
}

#[test]
fn requests_are_routed_and_bad_ones_get_the_spec_codes() {
    use crate::api::{Action, Endpoint};
    let r = req("GET", "/v2/");
    assert_eq!((&r.endpoint, r.action()), (&Endpoint::Base, Action::Pull));
    let r = req("PATCH", "/v2/a/b/c/blobs/uploads/123");
    assert_eq!(r.endpoint, Endpoint::Upload("123".into()));
    assert_eq!((r.repository.as_str(), r.action()), ("a/b/c", Action::Push));
    assert_eq!(req("DELETE", "/v2/a/manifests/x").action(), Action::Delete);
    // A repository may be named like an endpoint word.
    let r = req("GET", "/v2/blobs/manifests/latest");
    assert_eq!(r.repository, "blobs");
    for (path, code) in [
        ("/v2/A/manifests/x", "NAME_INVALID"),
        ("/v2/a/blobs/sha256:xyz", "DIGEST_INVALID"),
        ("/v2/a/other", "NAME_UNKNOWN"),
        ("/v3/", "NAME_UNKNOWN"),
    ] {
        let e = Request::route("GET", path, None).expect_err(path);
        assert_eq!(e.code().as_str(), code, "{path}");
    }
}

#[tokio::test]
async fn a_method_an_endpoint_lacks_is_unsupported() {
    let t = registry().await;
    let (status, _, b) = t.call(req("POST", "/v2/a/manifests/x"), none()).await;
    assert_eq!((status, error_code(&b).as_str()), (405, "UNSUPPORTED"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_pushes_of_the_same_content_and_tag_all_succeed() {
    let t = std::sync::Arc::new(registry().await);
    let mut tasks = Vec::new();
    for i in 0..16 {
        let t = t.clone();
        tasks.push(tokio::spawn(async move {
            // Every task pushes the same layer chunk by chunk and the same tag.
            let (_, h, _) = t.call(req("POST", "/v2/same/blobs/uploads/"), none()).await;
            let location = header(&h, "Location").expect("Location").to_string();
            let layer: Vec<u8> = (0..200_000u32).map(|x| (x % 251) as u8).collect();
            for (n, chunk) in layer.chunks(65_536).enumerate() {
                let mut r = req("PATCH", &location);
                r.content_range = Some(format!("{}-{}", n * 65_536, n * 65_536 + chunk.len() - 1));
                let (status, _, _) = t.call(r, body(chunk)).await;
                assert_eq!(status, 202);
            }
            let d = Digest::sha256(&layer);
            let (status, _, _) = t
                .call(req("PUT", &format!("{location}?digest={d}")), none())
                .await;
            assert_eq!(status, 201);
            t.push_image("same", "latest", format!("layer {}", i % 2).as_bytes())
                .await;
        }));
    }
    for task in tasks {
        task.await.expect("task");
    }
    let (_, _, b) = t
        .call(req("GET", "/v2/same/manifests/latest"), none())
        .await;
    let v: Value = serde_json::from_slice(&b).expect("a whole manifest");
    assert_eq!(v["schemaVersion"], 2);
    let tmp = std::fs::read_dir(t.reg.store.root().join("tmp"))
        .expect("tmp")
        .count();
    assert_eq!(tmp, 0, "temporary files left behind");
}
