//! Debian's headless Chromium driven through chromedriver with fantoccini (W3C WebDriver): the
//! browser in a process group of its own, so that a test leaves nothing running.

use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};

use crate::support::helpers::{free_port, wait_for};

/// A chromedriver process with one browser session.
pub struct Browser {
    client: Client,
    driver: Child,
    profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
        Browser::start_with(&[]).await
    }

    /// A browser with `extra` command-line switches beside ours.
    pub async fn start_with(extra: &[String]) -> Browser {
        let port = free_port();
        // A process group of its own: chromedriver and the browser it starts go together.
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver (Debian package chromium-driver) is installed");
        let addr = format!("127.0.0.1:{port}");
        wait_for(
            Duration::from_secs(20),
            "chromedriver to listen",
            || async {
                let connected = tokio::net::TcpStream::connect(&addr).await.is_ok();
                connected.then_some(())
            },
        )
        .await;
        let profile = tempfile::tempdir().unwrap();
        let mut args = vec![
            json!("--headless=new"),
            json!("--no-sandbox"),
            json!("--disable-gpu"),
            json!("--disable-dev-shm-usage"),
            json!("--disable-quic"),
            json!("--no-first-run"),
            json!("--disable-background-networking"),
            json!("--disable-component-update"),
            json!("--disable-sync"),
            json!("--window-size=1500,900"),
            json!(format!("--user-data-dir={}", profile.path().display())),
        ];
        args.extend(extra.iter().map(|arg| json!(arg)));
        let options = json!({ "binary": "/usr/bin/chromium", "args": args });
        let mut capabilities = serde_json::Map::new();
        capabilities.insert("browserName".into(), json!("chrome"));
        capabilities.insert("goog:chromeOptions".into(), options);
        let client = ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&format!("http://{addr}"))
            .await
            .unwrap_or_else(|e| panic!("a browser session: {e}"));
        Browser {
            client,
            driver,
            profile,
        }
    }

    /// The browser's profile directory (its command line names it).
    pub fn profile(&self) -> &Path {
        self.profile.path()
    }

    pub async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("open {url}: {e}"));
    }

    /// The element matching a CSS selector, if there is one.
    pub async fn find(&self, css: &str) -> Option<Element> {
        let found = self.client.find_all(Locator::Css(css)).await;
        found
            .unwrap_or_else(|e| panic!("look for {css}: {e}"))
            .into_iter()
            .next()
    }

    pub async fn element(&self, css: &str) -> Element {
        match self.find(css).await {
            Some(element) => element,
            None => panic!("no element matches {css} in:\n{}", self.source().await),
        }
    }

    /// The current page's HTML.
    pub async fn source(&self) -> String {
        self.client.source().await.unwrap_or_default()
    }

    /// Waits until an element matches (after a click that navigates, say).
    pub async fn wait_for_element(&self, css: &str) -> Element {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(element) = self.find(css).await {
                return element;
            }
            if std::time::Instant::now() > deadline {
                panic!(
                    "no element matches {css} after 15 s in:\n{}",
                    self.source().await
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Signs in with `token` on the admin's login form, which the browser is on or on its way
    /// to; the form then sends it where it was going.
    pub async fn sign_in(&self, token: &str) {
        self.wait_for_element("#token").await;
        self.type_into("#token", token).await;
        self.click("#sign-in").await;
    }

    pub async fn click(&self, css: &str) {
        let element = self.element(css).await;
        element
            .click()
            .await
            .unwrap_or_else(|e| panic!("click {css}: {e}"));
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css).await;
        element
            .send_keys(text)
            .await
            .unwrap_or_else(|e| panic!("type into {css}: {e}"));
    }

    pub async fn text(&self, css: &str) -> String {
        let element = self.element(css).await;
        element
            .text()
            .await
            .unwrap_or_else(|e| panic!("text of {css}: {e}"))
    }

    pub async fn attribute(&self, css: &str, name: &str) -> String {
        let element = self.element(css).await;
        element
            .attr(name)
            .await
            .unwrap_or_else(|e| panic!("attribute {name} of {css}: {e}"))
            .unwrap_or_default()
    }

    /// The computed value of a CSS property of the element matching `css`.
    pub async fn css_value(&self, css: &str, property: &str) -> String {
        let element = self.element(css).await;
        element
            .css_value(property)
            .await
            .unwrap_or_else(|e| panic!("{property} of {css}: {e}"))
    }

    /// Runs `script` in the page (as the test, not as the page: CSP does not apply to it).
    pub async fn execute(&self, script: &str) -> Value {
        self.client
            .execute(script, Vec::new())
            .await
            .unwrap_or_else(|e| panic!("run {script}: {e}"))
    }

    /// Resizes the browser window (headless: the viewport) to `width` × `height` pixels.
    pub async fn set_window_size(&self, width: u32, height: u32) {
        self.client
            .set_window_size(width, height)
            .await
            .unwrap_or_else(|e| panic!("resize to {width}x{height}: {e}"));
    }

    pub async fn current_url(&self) -> String {
        self.client
            .current_url()
            .await
            .map(String::from)
            .unwrap_or_default()
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let png = self.client.screenshot().await.expect("a screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::write(path, png).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Killing chromedriver alone would leave Chromium running, orphaned: end the group.
        let group = self.driver.id() as i32;
        // SAFETY: kill(2) on a process group this value started; no memory is involved.
        unsafe { libc::killpg(group, libc::SIGKILL) };
        let _ = self.driver.wait();
    }
}

/// Processes whose command line mentions `needle` (read from /proc).
pub fn processes_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(needle))
        })
        .collect()
}
