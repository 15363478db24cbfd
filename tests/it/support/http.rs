//! HTTP requests for tests, one connection each (reqwest, no redirects followed, no cookie jar):
//! pages, JSON, forms, cookies and headers exactly as a test writes them; over HTTPS with a
//! client that trusts only the test's own certificate authority (reqwest's native-tls backend:
//! the system's OpenSSL, as the service).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;

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

/// Signs in to the admin at `addr` through its login form with the test token
/// ([`ADMIN_TOKEN`](crate::support::app::ADMIN_TOKEN)); the `name=value` of the session
/// cookie (what a client sends back) and the whole `Set-Cookie` line (its attributes).
pub async fn sign_in(addr: &str) -> (String, String) {
    let token = crate::support::app::ADMIN_TOKEN;
    let response = post_form(addr, "/login", None, &format!("token={token}&next=%2F")).await;
    assert_eq!(response.status, 303, "{}", response.body);
    let set_cookie = response
        .header("set-cookie")
        .expect("a session cookie")
        .to_owned();
    let cookie = set_cookie.split(';').next().unwrap().to_owned();
    (cookie, set_cookie)
}

/// The CSRF token of the (first) form on `page`, which only a signed-in page carries.
pub fn csrf_of(page: &str) -> String {
    page.split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF field")
        .to_owned()
}

/// A client that trusts the certificate authority in `ca` (a PEM file) and no other, and
/// speaks HTTPS only.
pub fn tls_client(ca: &Path) -> reqwest::Client {
    let pem = std::fs::read(ca).unwrap_or_else(|e| panic!("{}: {e}", ca.display()));
    let authority = reqwest::Certificate::from_pem(&pem).expect("a PEM certificate");
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .pool_max_idle_per_host(0)
        .tls_certs_only([authority])
        .https_only(true)
        .build()
        .expect("an HTTPS client")
}

/// Sends one request to `url` with `client`: the response, or why none came.
pub async fn try_send(
    client: &reqwest::Client,
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<Response, reqwest::Error> {
    let method = reqwest::Method::from_bytes(method.as_bytes()).expect("an HTTP method");
    let mut request = client.request(method, url).body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await?;
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
    Ok(Response {
        status,
        headers: joined,
        body,
    })
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
    try_send(
        &client,
        method,
        &format!("http://{addr}{path}"),
        headers,
        body,
    )
    .await
    .unwrap_or_else(|e| panic!("{path} on {addr}: {e}"))
}
