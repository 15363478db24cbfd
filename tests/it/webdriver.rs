//! A small W3C WebDriver client over chromedriver, driving Debian's headless Chromium: enough
//! to open pages, click, type, read text and attributes, and take screenshots.

use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::helpers::free_port;
use crate::helpers::wait_for;
use crate::http::request;

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver process with one browser session.
pub struct Browser {
    driver: Child,
    addr: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub async fn start() -> Browser {
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
        let capabilities = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-quic", "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync", "--window-size=1500,900",
                    format!("--user-data-dir={}", profile.path().display()),
                ]
            }
        }}});
        let response = post(&addr, "/session", &capabilities).await;
        let session = response["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("a browser session: {response}"))
            .to_owned();
        Browser {
            driver,
            addr,
            session,
            _profile: profile,
        }
    }

    async fn command(&self, method: &str, path: &str, body: &Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        let response = call(&self.addr, method, &path, body).await;
        if let Some(error) = response["value"]["error"].as_str() {
            panic!(
                "webdriver {method} {path}: {error}: {}",
                response["value"]["message"]
            );
        }
        response["value"].clone()
    }

    pub async fn goto(&self, url: &str) {
        self.command("POST", "/url", &json!({ "url": url })).await;
    }

    /// The element matching a CSS selector, if there is one.
    pub async fn find(&self, css: &str) -> Option<String> {
        let path = format!("/session/{}/elements", self.session);
        let found = call(
            &self.addr,
            "POST",
            &path,
            &json!({ "using": "css selector", "value": css }),
        )
        .await;
        found["value"]
            .as_array()
            .and_then(|list| list.first())
            .and_then(|e| e[ELEMENT].as_str())
            .map(str::to_owned)
    }

    pub async fn element(&self, css: &str) -> String {
        match self.find(css).await {
            Some(element) => element,
            None => panic!("no element matches {css} in:\n{}", self.source().await),
        }
    }

    /// The current page's HTML.
    pub async fn source(&self) -> String {
        self.command("GET", "/source", &Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until an element matches (after a click that navigates, say).
    pub async fn wait_for_element(&self, css: &str) -> String {
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

    pub async fn click(&self, css: &str) {
        let element = self.element(css).await;
        self.command("POST", &format!("/element/{element}/click"), &json!({}))
            .await;
    }

    pub async fn type_into(&self, css: &str, text: &str) {
        let element = self.element(css).await;
        self.command(
            "POST",
            &format!("/element/{element}/value"),
            &json!({ "text": text }),
        )
        .await;
    }

    pub async fn text(&self, css: &str) -> String {
        let element = self.element(css).await;
        self.command("GET", &format!("/element/{element}/text"), &Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    pub async fn attribute(&self, css: &str, name: &str) -> String {
        let element = self.element(css).await;
        self.command(
            "GET",
            &format!("/element/{element}/attribute/{name}"),
            &Value::Null,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// The computed value of a CSS property of the element matching `css`.
    pub async fn css_value(&self, css: &str, property: &str) -> String {
        let element = self.element(css).await;
        self.command(
            "GET",
            &format!("/element/{element}/css/{property}"),
            &Value::Null,
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Runs `script` in the page (as the test, not as the page: CSP does not apply to it).
    pub async fn execute(&self, script: &str) -> Value {
        self.command(
            "POST",
            "/execute/sync",
            &json!({ "script": script, "args": [] }),
        )
        .await
    }

    pub async fn current_url(&self) -> String {
        self.command("GET", "/url", &Value::Null)
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &std::path::Path) {
        let encoded = self.command("GET", "/screenshot", &Value::Null).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(encoded.as_str().expect("base64 screenshot"))
            .expect("valid base64");
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

async fn call(addr: &str, method: &str, path: &str, body: &Value) -> Value {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let headers = [("Content-Type", "application/json")];
    let response = request(addr, method, path, &headers, &text).await;
    serde_json::from_str(&response.body)
        .unwrap_or_else(|_| panic!("{method} {path}: {}", response.body))
}

async fn post(addr: &str, path: &str, body: &Value) -> Value {
    call(addr, "POST", path, body).await
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

#[tokio::test]
async fn a_browser_leaves_no_process_behind() {
    let browser = Browser::start().await;
    let profile = browser._profile.path().display().to_string();
    assert!(!processes_mentioning(&profile).is_empty(), "Chromium runs");
    drop(browser);
    wait_for(
        Duration::from_secs(10),
        "every Chromium process of the session to end",
        || async { processes_mentioning(&profile).is_empty().then_some(()) },
    )
    .await;
}
