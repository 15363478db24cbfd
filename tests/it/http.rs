//! A minimal HTTP/1.1 client for tests (one request per connection): enough for pages, JSON,
//! forms, cookies and headers, without pulling a client library into the build.

use std::collections::HashMap;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("connect to the admin server");
    exchange(stream, addr, method, path, headers, body).await
}

/// Sends one request to `addr` from the loopback address `from` (any of 127.0.0.0/8), as
/// another client would.
pub async fn request_from(
    from: std::net::Ipv4Addr,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let socket = tokio::net::TcpSocket::new_v4().expect("a socket");
    socket
        .bind((from, 0).into())
        .unwrap_or_else(|e| panic!("bind to {from}: {e}"));
    let stream = socket
        .connect(addr.parse().expect("an IPv4 host:port"))
        .await
        .expect("connect to the admin server");
    exchange(stream, addr, method, path, headers, body).await
}

async fn exchange(
    mut stream: tokio::net::TcpStream,
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Response {
    let mut text = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        text.push_str(&format!("{name}: {value}\r\n"));
    }
    text.push_str("\r\n");
    text.push_str(body);
    stream.write_all(text.as_bytes()).await.unwrap();
    // Read until the body is complete (by Content-Length or the last chunk): some servers
    // (chromedriver) keep the connection open whatever the request said.
    let mut raw: Vec<u8> = Vec::new();
    let mut buffer = [0u8; 16 * 1024];
    loop {
        let read = stream.read(&mut buffer).await.unwrap();
        if read == 0 {
            break;
        }
        raw.extend_from_slice(&buffer[..read]);
        if complete(&raw) {
            break;
        }
    }
    let raw = String::from_utf8_lossy(&raw).into_owned();
    let (head, rest) = raw.split_once("\r\n\r\n").expect("an HTTP response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers: HashMap<String, String> = HashMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            headers
                .entry(name.trim().to_ascii_lowercase())
                .and_modify(|v| {
                    v.push('\n');
                    v.push_str(value.trim());
                })
                .or_insert_with(|| value.trim().to_owned());
        }
    }
    let body = if headers
        .get("transfer-encoding")
        .is_some_and(|t| t.contains("chunked"))
    {
        dechunk(rest)
    } else {
        rest.to_owned()
    };
    Response {
        status,
        headers,
        body,
    }
}

/// Whether `raw` holds a whole response.
fn complete(raw: &[u8]) -> bool {
    let Some(end) = raw.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let body = &raw[end + 4..];
    if let Some(length) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
    {
        return body.len() >= length;
    }
    if head.contains("transfer-encoding: chunked") {
        return body.ends_with(b"0\r\n\r\n");
    }
    false
}

fn dechunk(mut rest: &str) -> String {
    let mut body = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        body.push_str(&after[..size.min(after.len())]);
        rest = after.get(size + 2..).unwrap_or("");
    }
    body
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
