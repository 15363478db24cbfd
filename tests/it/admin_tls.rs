//! The admin over HTTPS (`--admin-tls-cert`, `--admin-tls-key`): pages, the JSON API, /metrics
//! and the health endpoints answer over TLS on both listeners to a client that trusts only the
//! test's own certificate authority, with HSTS and a `Secure` session cookie; plain HTTP to
//! those ports gets no answer; a half pair or an unusable file stops the start naming its key;
//! and Chromium signs in and loads the overview over https.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use history_consumer::admin::ADMIN_SHUTDOWN_GRACE;
use history_consumer::config::admin::TlsFiles;
use history_consumer::config::key;
use history_consumer::startup::{Application, StartupError};
use history_consumer::tools::certs::{Authority, Issued};

use crate::support::app::{ADMIN_TOKEN, TestApp, spawn_app_with, test_settings};
use crate::support::helpers::{
    killed_when_the_spawning_thread_ends, test_database, unique_name, wait_for,
};
use crate::support::http::{Response, get, tls_client, try_send};
use crate::support::kafka::TestKafka;
use crate::support::webdriver::Browser;

/// A certificate authority and a server certificate for `localhost` and `127.0.0.1` from it.
fn certificates(dir: &Path) -> (Authority, Issued) {
    let authority = Authority::new(dir, "admin-ca").expect("a certificate authority");
    let server = authority
        .issue_server("admin", &["localhost", "127.0.0.1"])
        .expect("a server certificate");
    (authority, server)
}

fn tls_files(issued: &Issued) -> TlsFiles {
    TlsFiles {
        cert: issued.cert.clone(),
        key: issued.key.clone(),
    }
}

/// `GET https://{addr}{path}` trusting only `ca`.
async fn get_https(client: &reqwest::Client, addr: &str, path: &str) -> Response {
    try_send(client, "GET", &format!("https://{addr}{path}"), &[], "")
        .await
        .unwrap_or_else(|e| panic!("https {path} on {addr}: {e:?}"))
}

/// Whether a plain-HTTP request to `addr` got no HTTP answer (within a deadline: a listener
/// that waited for more bytes would fail the test rather than hang it).
async fn plain_http_fails(addr: &str) -> bool {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client");
    match try_send(&client, "GET", &format!("http://{addr}/healthz"), &[], "").await {
        Ok(response) => {
            eprintln!("plain HTTP on {addr} answered {}", response.status);
            false
        }
        Err(error) => {
            assert!(!error.is_timeout(), "plain HTTP on {addr} hung: {error}");
            true
        }
    }
}

#[actix_web::test]
async fn pages_metrics_and_health_answer_over_https_with_hsts_and_a_secure_session_cookie() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, server) = certificates(dir.path());
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.admin.tls = Some(tls_files(&server));
    settings.admin.metrics_addr = Some("127.0.0.1:0".parse().unwrap());
    // Not asked for: HTTPS makes the cookie Secure on its own.
    settings.admin.secure_cookie = false;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let admin = app.handle.admin_addr.to_string();
    let metrics = app.handle.metrics_addr.to_string();
    assert_ne!(admin, metrics);
    let client = tls_client(&authority.cert_path);

    for path in [
        "/",
        "/api/status",
        "/partitions/0",
        "/dead-letters",
        "/login",
    ] {
        let response = get_https(&client, &admin, path).await;
        assert_eq!(response.status, 200, "{path}: {}", response.body);
        assert_eq!(
            response.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{path}"
        );
    }
    for path in ["/metrics", "/healthz", "/readyz"] {
        let response = get_https(&client, &metrics, path).await;
        assert_eq!(response.status, 200, "{path}: {}", response.body);
        assert_eq!(
            response.header("strict-transport-security"),
            Some("max-age=31536000"),
            "{path} on the metrics listener"
        );
    }
    assert!(
        get_https(&client, &metrics, "/metrics")
            .await
            .body
            .contains("history_admin_auth_failures_total")
    );

    let signed_in = try_send(
        &client,
        "POST",
        &format!("https://{admin}/login"),
        &[("Content-Type", "application/x-www-form-urlencoded")],
        &format!("token={ADMIN_TOKEN}&next=%2F"),
    )
    .await
    .expect("a sign-in over https");
    assert_eq!(signed_in.status, 303, "{}", signed_in.body);
    let set_cookie = signed_in.header("set-cookie").expect("a session cookie");
    let attributes: Vec<&str> = set_cookie.split(';').map(str::trim).collect();
    assert!(attributes.contains(&"Secure"), "{set_cookie}");
    assert!(attributes.contains(&"HttpOnly"), "{set_cookie}");
    assert!(
        attributes[0].starts_with("__Host-history_session_"),
        "{set_cookie}"
    );
    let cookie = attributes[0];
    let page = try_send(
        &client,
        "GET",
        &format!("https://{admin}/partitions/0"),
        &[("Cookie", cookie)],
        "",
    )
    .await
    .expect("a page over https");
    assert!(
        page.body.contains("name=\"csrf\""),
        "the session holds over https: {}",
        page.body
    );

    assert!(
        plain_http_fails(&admin).await,
        "plain HTTP on the admin port"
    );
    assert!(
        plain_http_fails(&metrics).await,
        "plain HTTP on the metrics port"
    );
    // Still serving after the refused plain-HTTP connections.
    assert_eq!(get_https(&client, &admin, "/").await.status, 200);
    app.shutdown().await;
}

#[actix_web::test]
async fn plain_http_responses_carry_no_hsts_and_a_cookie_secure_only_when_asked() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let settings = test_settings(&db.url, &kafka, &unique_name("group"));
    let app: TestApp = spawn_app_with(settings).await;
    let admin = app.handle.admin_addr.to_string();
    for path in ["/", "/healthz", "/metrics"] {
        let response = get(&admin, path).await;
        assert_eq!(response.status, 200, "{path}");
        assert_eq!(response.header("strict-transport-security"), None, "{path}");
    }
    let (_, set_cookie) = crate::support::http::sign_in(&admin).await;
    assert!(!set_cookie.contains("Secure"), "{set_cookie}");
    app.shutdown().await;
}

/// What `Application::build` says about these TLS files.
async fn start_error(files: TlsFiles) -> StartupError {
    let kafka = TestKafka::start(1);
    // Nobody listens there: the files are checked before anything is connected to.
    let mut settings = test_settings(
        "postgres://nobody@127.0.0.1:1/nothing",
        &kafka,
        &unique_name("group"),
    );
    settings.admin.tls = Some(files);
    match Application::build(settings).await {
        Ok(_) => panic!("the service started with unusable TLS files"),
        Err(error) => error,
    }
}

#[actix_web::test]
async fn an_unreadable_or_mismatched_tls_file_stops_the_start_naming_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, server) = certificates(dir.path());
    let other = authority
        .issue_server("other", &["localhost"])
        .expect("a second certificate");
    let cert_key = key::ADMIN_TLS_CERT.to_string();
    let key_key = key::ADMIN_TLS_KEY.to_string();

    let missing = TlsFiles {
        cert: dir.path().join("absent.crt"),
        ..tls_files(&server)
    };
    let unreadable_key = TlsFiles {
        key: dir.path().join("absent.key"),
        ..tls_files(&server)
    };
    let not_a_key = TlsFiles {
        key: server.cert.clone(),
        ..tls_files(&server)
    };
    let mismatched = TlsFiles {
        key: other.key.clone(),
        ..tls_files(&server)
    };
    for (files, named, what) in [
        (missing, vec![&cert_key], "a missing certificate"),
        (unreadable_key, vec![&key_key], "a missing key"),
        (not_a_key, vec![&key_key], "a certificate given as the key"),
        (
            mismatched,
            vec![&cert_key, &key_key],
            "another certificate's key",
        ),
    ] {
        let error = start_error(files).await;
        let StartupError::Config(config) = &error else {
            panic!("{what}: not a configuration error: {error:?}");
        };
        for key in named {
            assert!(config.key.contains(key.as_str()), "{what}: {config}");
        }
        assert!(
            !config.to_string().contains("PRIVATE KEY"),
            "{what}: no key material: {config}"
        );
    }
}

/// Runs the binary's `run` with `args` and `env` until it exits (it must, within a deadline);
/// its exit code and standard error.
async fn run_binary(args: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String) {
    let stderr = tempfile::NamedTempFile::new().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_history-consumer"));
    killed_when_the_spawning_thread_ends(&mut command);
    command
        .args([
            "run",
            "--database-url",
            "postgres://nobody@127.0.0.1:1/nothing",
        ])
        .args(["--admin-addr", "127.0.0.1:0"])
        .args(args)
        .env_remove(key::ADMIN_TLS_CERT.env)
        .env_remove(key::ADMIN_TLS_KEY.env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.reopen().unwrap());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = command.spawn().expect("start the binary");
    let status = wait_for(Duration::from_secs(30), "the binary to exit", || {
        let status = child.try_wait().unwrap();
        async move { status }
    })
    .await;
    let text = std::fs::read_to_string(stderr.path()).unwrap();
    (status.code(), text)
}

#[actix_web::test]
async fn the_binary_refuses_half_a_tls_pair_and_a_mismatched_pair_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let (authority, server) = certificates(dir.path());
    let other = authority.issue_server("other", &["localhost"]).unwrap();
    let cert = server.cert.to_str().unwrap();

    let (code, stderr) = run_binary(&["--admin-tls-cert", cert], &[]).await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("--admin-tls-key / HISTORY_ADMIN_TLS_KEY: missing"),
        "{stderr}"
    );

    // From the environment, as a container would give them.
    let (code, stderr) = run_binary(
        &[],
        &[
            (key::ADMIN_TLS_CERT.env, &server.cert),
            (key::ADMIN_TLS_KEY.env, &other.key),
        ],
    )
    .await;
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("does not belong"), "{stderr}");
    assert!(stderr.contains("HISTORY_ADMIN_TLS_KEY"), "{stderr}");
    assert!(!stderr.contains("PRIVATE KEY"), "{stderr}");
}

/// Chromium's switch that accepts exactly the certificate carrying this key (the base64 SHA-256
/// of its SubjectPublicKeyInfo), and no other certificate error.
fn trust_only(certificate: &Path) -> String {
    let pem = std::fs::read(certificate).unwrap();
    let certificate = openssl::x509::X509::from_pem(&pem).unwrap();
    let spki = certificate
        .public_key()
        .unwrap()
        .public_key_to_der()
        .unwrap();
    let digest = openssl::sha::sha256(&spki);
    format!(
        "--ignore-certificate-errors-spki-list={}",
        openssl::base64::encode_block(&digest)
    )
}

#[actix_web::test]
async fn chromium_signs_in_and_loads_the_overview_over_https() {
    let dir = tempfile::tempdir().unwrap();
    let (_authority, server) = certificates(dir.path());
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.admin.tls = Some(tls_files(&server));
    // Every page needs the session cookie: the browser must have accepted the Secure one.
    settings.admin.read_auth = true;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let admin = app.handle.admin_addr.to_string();

    let browser = Browser::start_with(&[trust_only(&server.cert)]).await;
    browser.goto(&format!("https://{admin}/")).await;
    browser.sign_in(ADMIN_TOKEN).await;
    browser.wait_for_element("#partition-rows").await;
    assert_eq!(browser.current_url().await, format!("https://{admin}/"));
    assert_eq!(
        browser
            .execute(
                "return [location.protocol, window.isSecureContext, \
                 performance.getEntriesByType('navigation')[0].nextHopProtocol]"
            )
            .await,
        serde_json::json!(["https:", true, "h2"])
    );
    // The stylesheet came over the same TLS listener, under the Content-Security-Policy.
    assert_eq!(
        browser.css_value("header", "background-color").await,
        "rgba(17, 24, 39, 1)"
    );
    assert_eq!(
        browser
            .attribute("#partition-rows tr", "data-partition")
            .await,
        "0"
    );
    // The browser keeps its HTTP/2 connection open: the stop waits for it no longer than the
    // admin's grace.
    let stopping = std::time::Instant::now();
    app.shutdown().await;
    assert!(
        stopping.elapsed() < ADMIN_SHUTDOWN_GRACE + Duration::from_secs(5),
        "the stop took {:?} with a browser connected",
        stopping.elapsed()
    );
    drop(browser);
}
