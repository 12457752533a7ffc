//! The console benchmark, against a `matryoshka up` process with N TenantClusters (default
//! 1,000; virtual workers, Ready) in one tenant namespace:
//!
//! - **server time of the cluster list**: time to first byte and to the last byte of
//!   `/console/namespaces/tenant-root/tenantclusters` (curl over HTTPS with the session
//!   cookie), against the peer every console page is built on — the same list as `kubectl
//!   get tenantclusters` asks it of the API server (a `Table`).
//! - **full load in Chromium**: the page's Navigation Timing (first byte and `load` event)
//!   in headless Chromium, against the browser's floor: the sign-in page, which carries no
//!   data.
//! - **a live change reaching an open page**: from a write of one TenantCluster to the
//!   page's table being replaced by the server-sent event (a MutationObserver's clock in the
//!   page; the same machine's clock as the writer's), against a raw watch of the same
//!   resource in Rust receiving the event.
//!
//! Targets (issue 18): < 200 ms server time for the list with 1,000 clusters; < 500 ms for a
//! change to reach the page.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use fantoccini::{ClientBuilder, Locator};
use futures::StreamExt;
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::process_platform::ProcessPlatform;
use crate::report::{Better, Samples, header, line};

const NS: &str = "tenant-root";
const ROUNDS: usize = 20;

fn clusters_resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("platform.matryoshka.dev", "v1alpha1", "TenantCluster"),
        "tenantclusters",
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// A cluster-admin service account's token.
async fn admin_token(root: &kube::Client) -> anyhow::Result<String> {
    let sa: ServiceAccount = serde_json::from_value(json!({"metadata": {"name": "bench"}}))?;
    Api::<ServiceAccount>::namespaced(root.clone(), "default")
        .create(&PostParams::default(), &sa)
        .await?;
    let crb: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "bench"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "bench", "namespace": "default"}],
    }))?;
    Api::<ClusterRoleBinding>::all(root.clone())
        .create(&PostParams::default(), &crb)
        .await?;
    let tr: TokenRequest =
        serde_json::from_value(json!({"spec": {"expirationSeconds": 7200, "audiences": []}}))?;
    let out = Api::<ServiceAccount>::namespaced(root.clone(), "default")
        .create_subresource::<TokenRequest, TokenRequest>(
            "token",
            "bench",
            &PostParams::default(),
            &tr,
        )
        .await?;
    out.status
        .map(|s| s.token)
        .context("the token request returned no token")
}

/// Time to first byte and total time of a GET with curl, in ms.
fn curl(url: &str, headers: &[String]) -> anyhow::Result<(f64, f64, usize)> {
    let mut c = Command::new("curl");
    c.args([
        "-sk",
        "-o",
        "/dev/null",
        "-w",
        "%{http_code} %{time_starttransfer} %{time_total} %{size_download}",
    ]);
    for h in headers {
        c.arg("-H").arg(h);
    }
    let out = c.arg(url).output().context("running curl")?;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let f: Vec<&str> = text.split_whitespace().collect();
    anyhow::ensure!(f.first() == Some(&"200"), "{url}: {text}");
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    Ok((num(1) * 1000.0, num(2) * 1000.0, num(3) as usize))
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

pub async fn run(quick: bool, count: Option<usize>) -> anyhow::Result<()> {
    let count = count.unwrap_or(if quick { 100 } else { 1000 });
    println!(
        "console benchmark: {count} Ready TenantClusters (virtual workers) in {NS}, {ROUNDS} rounds each"
    );
    let p = ProcessPlatform::start(&[]).await?;
    let result = measure(&p, count).await;
    if result.is_err() {
        eprintln!("{}", p.diagnostics());
    }
    p.stop().await;
    result
}

async fn measure(p: &ProcessPlatform, count: usize) -> anyhow::Result<()> {
    let api: Api<DynamicObject> = Api::namespaced_with(p.root.clone(), NS, &clusters_resource());
    let started = Instant::now();
    futures::stream::iter(0..count)
        .map(|i| {
            let api = api.clone();
            async move {
                let obj: DynamicObject = serde_json::from_value(json!({
                    "apiVersion": "platform.matryoshka.dev/v1alpha1", "kind": "TenantCluster",
                    "metadata": {"name": format!("c{i:04}"), "namespace": NS},
                    "spec": {"workers": {"provider": "virtual"}},
                }))?;
                api.create(&PostParams::default(), &obj).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        let list = api.list(&Default::default()).await?;
        let ready = list
            .items
            .iter()
            .filter(|c| {
                c.data
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    })
            })
            .count();
        if ready == count {
            break;
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{ready} of {count} clusters Ready after 900 s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    eprintln!(
        "  {count} clusters Ready in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let token = admin_token(&p.root).await?;
    let base = format!("https://127.0.0.1:{}", p.port);
    let page = format!("{base}/console/namespaces/{NS}/tenantclusters");
    let api_url =
        format!("{base}/apis/platform.matryoshka.dev/v1alpha1/namespaces/{NS}/tenantclusters");
    let cookie = format!("Cookie: matryoshka-console={token}");
    let bearer = format!("Authorization: Bearer {token}");
    let table = "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,application/json".to_string();
    let (mut ttfb, mut total, mut api_ttfb, mut api_total) = (vec![], vec![], vec![], vec![]);
    let (mut page_bytes, mut api_bytes) = (0, 0);
    for _ in 0..ROUNDS {
        let (f, t, n) = curl(&page, std::slice::from_ref(&cookie))?;
        anyhow::ensure!(
            n > count * 100,
            "the page is too small to list {count} clusters: {n} bytes"
        );
        ttfb.push(f);
        total.push(t);
        page_bytes = n;
        let (f, t, n) = curl(&api_url, &[bearer.clone(), table.clone()])?;
        api_ttfb.push(f);
        api_total.push(t);
        api_bytes = n;
    }
    header("console", "kubectl get (API)");
    line(
        &format!("list of {count}: first byte, median (ms)"),
        median(&ttfb),
        median(&api_ttfb),
        "ms",
        Better::Lower,
    );
    line(
        &format!("list of {count}: last byte, median (ms)"),
        median(&total),
        median(&api_total),
        "ms",
        Better::Lower,
    );
    println!("  the page is {page_bytes} bytes; the API's Table {api_bytes} bytes");

    // Chromium.
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let profile = tempfile::tempdir()?;
    let mut driver = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("chromedriver (scripts/ensure-deps installs it)")?;
    let browser = async {
        let caps = json!({
            "browserName": "chrome",
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync",
                format!("--user-data-dir={}", profile.path().display()),
            ]},
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&format!("http://127.0.0.1:{port}"))
                .await
            {
                Ok(c) => break c,
                Err(e) if Instant::now() > deadline => anyhow::bail!("no browser: {e}"),
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let timing = "const n = performance.getEntriesByType('navigation')[0]; \
                      return [n.responseStart - n.requestStart, n.loadEventEnd - n.startTime]";
        client.goto(&format!("{base}/console/sign-in")).await?;
        client
            .find(Locator::Css("#token"))
            .await?
            .send_keys(&token)
            .await?;
        client
            .find(Locator::Css("form button[type=submit]"))
            .await?
            .click()
            .await?;
        client.wait().for_element(Locator::Css("main")).await?;
        let (mut load, mut first, mut floor, mut floor_first) = (vec![], vec![], vec![], vec![]);
        for _ in 0..ROUNDS {
            client.goto(&page).await?;
            let t = client.execute(timing, vec![]).await?;
            first.push(t[0].as_f64().unwrap_or(0.0));
            load.push(t[1].as_f64().unwrap_or(0.0));
            client.goto(&format!("{base}/console/sign-in")).await?;
            let t = client.execute(timing, vec![]).await?;
            floor_first.push(t[0].as_f64().unwrap_or(0.0));
            floor.push(t[1].as_f64().unwrap_or(0.0));
        }
        header("console page", "sign-in page");
        line(
            &format!("Chromium: list of {count}, first byte (ms)"),
            median(&first),
            median(&floor_first),
            "ms",
            Better::Lower,
        );
        line(
            &format!("Chromium: list of {count}, full load (ms)"),
            median(&load),
            median(&floor),
            "ms",
            Better::Lower,
        );

        // A live change: the page's clock when its table is replaced, against a watch.
        client.goto(&page).await?;
        client
            .execute(
                "window.changedAt = 0; new MutationObserver(() => { window.changedAt = Date.now(); })\
                 .observe(document.querySelector('#clusters'), {childList: true}); return true",
                vec![],
            )
            .await?;
        // The stream's first event (the list) replaces the table once: wait for it.
        let deadline = Instant::now() + Duration::from_secs(30);
        while client.execute("return window.changedAt", vec![]).await? == json!(0) {
            anyhow::ensure!(Instant::now() < deadline, "no first live event");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let mut watch = kube::runtime::watcher::watch_object(api.clone(), "c0000").boxed();
        watch.next().await; // the current object
        let (mut page_lat, mut watch_lat) = (vec![], vec![]);
        for i in 0..ROUNDS {
            client
                .execute("window.changedAt = 0; return true", vec![])
                .await?;
            let at = epoch_ms();
            let t0 = Instant::now();
            api.patch(
                "c0000",
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"annotations": {"bench/round": i.to_string()}}})),
            )
            .await?;
            tokio::time::timeout(Duration::from_secs(30), watch.next())
                .await
                .context("the watch saw no change")?;
            watch_lat.push(ms(t0.elapsed()));
            let deadline = Instant::now() + Duration::from_secs(30);
            loop {
                let changed = client
                    .execute("return window.changedAt", vec![])
                    .await?
                    .as_f64()
                    .unwrap_or(0.0);
                if changed > 0.0 {
                    page_lat.push(changed - at);
                    break;
                }
                anyhow::ensure!(Instant::now() < deadline, "the page saw no change");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
        header("open page", "kube watch");
        line(
            &format!("a change reaching the page, {count} rows, median (ms)"),
            median(&page_lat),
            median(&watch_lat),
            "ms",
            Better::Lower,
        );
        let lat = Samples(page_lat.iter().map(|m| Duration::from_secs_f64(m / 1000.0)).collect());
        println!(
            "  p90 {:.1} ms, max {:.1} ms",
            ms(lat.percentile(0.9)),
            ms(lat.percentile(1.0))
        );
        let _ = client.close().await;
        anyhow::Ok(())
    }
    .await;
    let _ = driver.kill();
    let _ = driver.wait();
    let _ = Command::new("pkill")
        .arg("-9")
        .arg("-f")
        .arg(profile.path().as_os_str())
        .status();
    browser
}
