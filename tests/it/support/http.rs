//! HTTP requests for tests, one connection each (reqwest, no redirects followed, no cookie jar):
//! pages, JSON, forms, cookies and headers exactly as a test writes them.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};

/// A response: status, headers (lower-case names; repeated ones joined with "\n") and body.
#[derive(Debug)]
pub struct Response {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// Sends one request to `addr` (host:port).
pub async fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    send(None, addr, method, path, headers, body).await
}

/// Sends one request to `addr` from the loopback address `from` (any of 127.0.0.0/8), as
/// another client would.
pub async fn request_from(
    from: Ipv4Addr,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    send(Some(from), addr, method, path, headers, body).await
}

pub async fn get(addr: &str, path: &str) -> Response {
    request(addr, "GET", path, &[], "").await
}

/// A form POST, optionally with a cookie.
pub async fn post_form(addr: &str, path: &str, cookie: Option<&str>, form: &str) -> Response {
    let mut headers = vec![("Content-Type", "application/x-www-form-urlencoded")];
    if let Some(cookie) = cookie {
        headers.push(("Cookie", cookie));
    }
    request(addr, "POST", path, &headers, form).await
}

async fn send(
    from: Option<Ipv4Addr>,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .local_address(from.map(IpAddr::V4))
        .build()
        .expect("an HTTP client");
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let mut request = client
        .request(method, format!("http://{addr}{path}"))
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path} on {addr}: {e}"));
    let status = response.status().as_u16();
    let mut joined: HashMap<String, String> = HashMap::new();
    for (name, value) in response.headers() {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        joined
            .entry(name.as_str().to_owned())
            .and_modify(|v| {
                v.push('\n');
                v.push_str(&value);
            })
            .or_insert(value);
    }
    let body = response.text().await.unwrap_or_default();
    Response {
        status,
        headers: joined,
        body,
    }
}
