//! A real headless Chromium driven through chromedriver (WebDriver, with fantoccini), for the
//! console's browser tests: screenshots kept as artefacts, accessibility checked with axe-core.
//! chromium, chromedriver and axe-core are installed by `scripts/ensure-deps`; a test fails
//! when one is missing.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// Where `scripts/ensure-deps` puts axe-core.
pub const AXE: &str = "/opt/matryoshka/axe-core-4.14.1/axe.min.js";

/// The screenshots of a test run: `target/browser-artefacts/<test>/`.
pub fn artefacts(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("..")
        .join("browser-artefacts")
        .join(test);
    std::fs::create_dir_all(&dir).expect("the artefact directory");
    dir
}

/// How the browser looks at the pages.
#[derive(Debug, Clone, Copy)]
pub struct Look {
    pub width: u32,
    pub height: u32,
    pub dark: bool,
}

pub const DESKTOP: Look = Look {
    width: 1280,
    height: 900,
    dark: false,
};
pub const PHONE_DARK: Look = Look {
    width: 390,
    height: 844,
    dark: true,
};

/// chromedriver and the Chromium it drives, with a profile of their own; everything they
/// started is killed when this is dropped.
pub struct Browser {
    pub client: Client,
    driver: Child,
    profile: tempfile::TempDir,
    pub downloads: PathBuf,
    shots: PathBuf,
    shot: usize,
    /// The last page's accessibility check, for the report of a failure.
    pub last_axe: Value,
}

impl Browser {
    pub async fn start(test: &str, look: Look) -> Browser {
        let port = crate::support::free_port();
        let profile = tempfile::tempdir().expect("a profile directory");
        let downloads = profile.path().join("downloads");
        std::fs::create_dir_all(&downloads).expect("downloads");
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/ensure-deps installs it)");
        crate::support::watchdog(driver.id());
        let url = format!("http://127.0.0.1:{port}");
        let mut args = vec![
            "--headless".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            format!("--window-size={},{}", look.width, look.height),
            format!(
                "--user-data-dir={}",
                profile.path().join("chrome").display()
            ),
        ];
        if look.dark {
            args.push("--force-dark-mode".into());
            args.push("--blink-settings=preferredColorScheme=0".into());
        }
        let caps = json!({
            "browserName": "chrome",
            // The platform's serving certificate is signed by its own CA.
            "acceptInsecureCerts": true,
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": args,
                "prefs": {
                    "download.default_directory": downloads,
                    "download.prompt_for_download": false,
                },
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let client = loop {
            let connector = hyper_util::client::legacy::connect::HttpConnector::new();
            match ClientBuilder::new(connector)
                .capabilities(caps.clone())
                .connect(&url)
                .await
            {
                Ok(c) => break c,
                Err(e) => {
                    assert!(Instant::now() < deadline, "no browser session: {e}");
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
            }
        };
        client
            .set_window_size(look.width, look.height)
            .await
            .expect("window size");
        Browser {
            client,
            driver,
            profile,
            downloads,
            shots: artefacts(test),
            shot: 0,
            last_axe: Value::Null,
        }
    }

    pub async fn goto(&self, url: &str) {
        self.client.goto(url).await.expect("navigate");
    }

    pub async fn path(&self) -> String {
        self.client
            .current_url()
            .await
            .expect("url")
            .path()
            .to_string()
    }

    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no element {css}: {e}"))
    }

    pub async fn exists(&self, css: &str) -> bool {
        !self
            .client
            .find_all(Locator::Css(css))
            .await
            .expect("find")
            .is_empty()
    }

    pub async fn text(&self, css: &str) -> String {
        self.find(css).await.text().await.expect("text")
    }

    /// Types `text` into the field named `name` (what was there first is cleared).
    pub async fn fill(&self, name: &str, text: &str) {
        let field = self.find(&format!("[name='{name}']")).await;
        field.clear().await.expect("clear");
        field.send_keys(text).await.expect("type");
    }

    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.expect("click");
    }

    /// Clicks the link or button whose text is `text`.
    pub async fn click_text(&self, text: &str) {
        let xpath =
            format!("//a[normalize-space(.)='{text}'] | //button[normalize-space(.)='{text}']");
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::XPath(&xpath))
            .await
            .unwrap_or_else(|e| panic!("nothing to click named {text:?}: {e}"))
            .click()
            .await
            .expect("click");
    }

    pub async fn js(&self, script: &str) -> Value {
        self.client.execute(script, vec![]).await.expect("script")
    }

    /// Waits until `script` returns true in the page.
    pub async fn until(&self, what: &str, script: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            if self.js(script).await == Value::Bool(true) {
                return;
            }
            if Instant::now() > deadline {
                let body = self.js("return document.body.innerText").await;
                panic!("{what}: not reached in {timeout:?}; the page says:\n{body}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a screenshot of the page as `NN-<name>.png` among the artefacts.
    pub async fn screenshot(&mut self, name: &str) {
        self.shot += 1;
        let png = self.client.screenshot().await.expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        let file = self.shots.join(format!("{:02}-{name}.png", self.shot));
        std::fs::write(&file, png).expect("write the screenshot");
    }

    /// Runs axe-core on the page and fails on any serious or critical violation (the WCAG 2 A
    /// and AA rules and axe's best practices).
    pub async fn check_accessibility(&mut self, page: &str) {
        let axe = std::fs::read_to_string(AXE)
            .unwrap_or_else(|e| panic!("{AXE} (scripts/ensure-deps installs it): {e}"));
        self.client
            .execute(&axe, vec![])
            .await
            .expect("axe-core loads");
        let result = self
            .client
            .execute_async(
                r#"const done = arguments[arguments.length - 1];
                axe.run(document, {resultTypes: ["violations"]}).then(
                  (r) => done(r.violations.map((v) => ({id: v.id, impact: v.impact, help: v.help,
                    nodes: v.nodes.map((n) => n.target.join(" ") + ": " + n.failureSummary)}))),
                  (e) => done({error: String(e)}));"#,
                vec![],
            )
            .await
            .expect("axe-core runs");
        assert!(
            result.get("error").is_none(),
            "axe-core failed on {page}: {result}"
        );
        let serious: Vec<&Value> = result
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| matches!(v["impact"].as_str(), Some("serious" | "critical")))
            .collect();
        assert!(
            serious.is_empty(),
            "accessibility violations on {page}:\n{}",
            serde_json::to_string_pretty(&serious).unwrap_or_default()
        );
        self.last_axe = result;
    }

    /// Waits for a downloaded file and returns its path.
    pub async fn downloaded(&self, name: &str) -> PathBuf {
        let file = self.downloads.join(name);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !file.exists() {
            assert!(
                Instant::now() < deadline,
                "{name} was not downloaded into {}",
                self.downloads.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        file
    }

    pub async fn close(mut self) {
        let client = self.client.clone();
        let _ = client.close().await;
        self.kill();
    }

    fn kill(&mut self) {
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        // Chromium's processes, found by the profile only they use.
        let _ = Command::new("pkill")
            .arg("-9")
            .arg("-f")
            .arg(self.profile.path().as_os_str())
            .status();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        self.kill();
    }
}
