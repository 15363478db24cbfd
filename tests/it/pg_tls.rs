//! PostgreSQL over TLS with libpq's sslmode meaning, against throwaway clusters that take TCP
//! connections over TLS only: the modes that verify, the failures an operator must be able to
//! read (which setting asked for what), a client certificate instead of a password, and the
//! password from a file — in process and through the binary, in both forms of the URL.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use history_consumer::config::Secret;
use history_consumer::config::database::DatabaseSettings;
use history_consumer::error_text::chain;
use history_consumer::startup::Application;
use history_consumer::tools::certs::{Authority, Issued};
use history_consumer::tools::pg_cluster::{Access, ClusterOptions, Login, ServerTls, TempCluster};
use tokio::sync::OnceCell;

use crate::support::app::{spawn_app_with, test_settings};
use crate::support::helpers::{TestDb, cluster, unique_name, wait_for};
use crate::support::kafka::{TestKafka, produce};
use crate::support::service::ServiceProcess;

/// The role that logs in with a password, and its password.
const PASSWORD_ROLE: &str = "history";
const PASSWORD: &str = "correct horse battery staple";
/// The role that logs in with a client certificate (its common name).
const CERTIFIED_ROLE: &str = "certified";

/// A TLS-only cluster whose certificate names `localhost` and `127.0.0.1`, the authority that
/// signed it, another authority, and a client certificate for [`CERTIFIED_ROLE`].
pub(crate) struct TlsServer {
    cluster: TempCluster,
    pub(crate) ca: PathBuf,
    other_ca: PathBuf,
    client: Issued,
    _files: tempfile::TempDir,
}

/// Starts a cluster with TLS on, its certificate issued by a fresh authority for `hosts`.
fn start_tls_cluster(hosts: &[&str], rules: Vec<(String, Login)>) -> TlsServer {
    let files = tempfile::tempdir().unwrap();
    let authority = Authority::new(files.path(), "pg-ca").unwrap();
    let other = Authority::new(files.path(), "other-ca").unwrap();
    let server = authority.issue_server("server", hosts).unwrap();
    let client = authority.issue_client("client", CERTIFIED_ROLE).unwrap();
    let cluster = TempCluster::start(ClusterOptions {
        tls: Some(ServerTls {
            cert: server.cert,
            key: server.key,
            client_ca: Some(authority.cert_path.clone()),
        }),
        access: Access::TlsOnly(rules),
        ..ClusterOptions::default()
    })
    .unwrap();
    TlsServer {
        cluster,
        ca: authority.cert_path.clone(),
        other_ca: other.cert_path.clone(),
        client,
        _files: files,
    }
}

/// The TLS cluster most tests share: the password role by scram-sha-256, the certified role by
/// its certificate, everyone else (the superuser) trusted — all over TLS only.
pub(crate) async fn tls_server() -> &'static TlsServer {
    static SERVER: OnceCell<TlsServer> = OnceCell::const_new();
    SERVER
        .get_or_init(|| async {
            let server = start_tls_cluster(
                &["localhost", "127.0.0.1"],
                vec![
                    (PASSWORD_ROLE.into(), Login::Password),
                    (CERTIFIED_ROLE.into(), Login::Certificate),
                    ("all".into(), Login::Trust),
                ],
            );
            server
                .cluster
                .administer(&format!(
                    "CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'; \
                     CREATE ROLE {CERTIFIED_ROLE} LOGIN"
                ))
                .await
                .unwrap();
            server
        })
        .await
}

impl TlsServer {
    /// A fresh database owned by `owner`.
    pub(crate) async fn database(&self, owner: &str) -> String {
        let name = unique_name("tls");
        self.cluster
            .administer(&format!("CREATE DATABASE {name} OWNER {owner}"))
            .await
            .unwrap();
        name
    }

    /// `postgres://user@host:port/database?params`.
    pub(crate) fn url(&self, user: &str, host: &str, database: &str, params: &str) -> String {
        format!(
            "postgres://{user}@{host}:{}/{database}?{params}",
            self.cluster.port()
        )
    }
}

/// Whether a connection of `pool` is encrypted, as the server sees it.
async fn over_tls(pool: &deadpool_postgres::Pool) -> bool {
    let client = pool.get().await.expect("a connection");
    let row = client
        .query_one(
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap();
    row.get(0)
}

/// Why a connection to `url` fails, as the product reports it.
async fn connection_error(url: &str) -> String {
    let pool = history_consumer::db::pool(url, 1).expect("the URL is valid");
    match pool.get().await {
        Ok(_) => panic!("{url} connected"),
        Err(error) => chain(&error),
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

#[actix_web::test]
async fn verify_full_connects_over_tls_and_the_service_stores_events_through_it() {
    let server = tls_server().await;
    let database = server.database("postgres").await;
    let ca = display(&server.ca);
    let url = server.url(
        "postgres",
        "localhost",
        &database,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let pool = history_consumer::db::pool(&url, 2).unwrap();
    assert!(over_tls(&pool).await, "the connection is encrypted");
    // The address is in the certificate too: verify-full checks IP addresses as libpq does.
    let by_address = server.url(
        "postgres",
        "127.0.0.1",
        &database,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert!(over_tls(&history_consumer::db::pool(&by_address, 1).unwrap()).await);

    let kafka = TestKafka::start(2);
    let app = spawn_app_with(test_settings(&url, &kafka, &unique_name("group"))).await;
    app.wait_assigned(2).await;
    produce(&kafka, 0..40).await;
    app.wait_committed(&kafka, &kafka.ends().await).await;
    let client = pool.get().await.unwrap();
    let rows: i64 = client
        .query_one("SELECT count(*) FROM history_events", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(rows, 40);
    app.shutdown().await;
}

#[actix_web::test]
async fn verify_ca_accepts_a_certificate_for_another_host_where_verify_full_names_the_mismatch() {
    let server = start_tls_cluster(&["db.example.com"], vec![("all".into(), Login::Trust)]);
    let ca = display(&server.ca);
    let verify_ca = server.url(
        "postgres",
        "localhost",
        "postgres",
        &format!("sslmode=verify-ca&sslrootcert={ca}"),
    );
    assert!(over_tls(&history_consumer::db::pool(&verify_ca, 1).unwrap()).await);

    let verify_full = verify_ca.replace("verify-ca", "verify-full");
    let error = connection_error(&verify_full).await;
    assert!(
        error.contains("the host name localhost does not match the server's certificate"),
        "{error}"
    );
    assert!(error.contains("sslmode=verify-full"), "{error}");
}

#[actix_web::test]
async fn a_certificate_from_an_unknown_authority_fails_naming_sslrootcert() {
    let server = tls_server().await;
    let other = display(&server.other_ca);
    for mode in ["verify-full", "verify-ca", "require"] {
        let url = server.url(
            "postgres",
            "localhost",
            "postgres",
            &format!("sslmode={mode}&sslrootcert={other}"),
        );
        let error = connection_error(&url).await;
        assert!(
            error.contains("certificate verify failed"),
            "{mode}: {error}"
        );
        assert!(
            error.contains(&format!("sslrootcert {other}")),
            "{mode}: {error}"
        );
        assert!(
            error.contains(&format!("sslmode={mode}")),
            "{mode}: {error}"
        );
    }
    // require without a root certificate checks nothing, as in libpq.
    let unchecked = server.url("postgres", "localhost", "postgres", "sslmode=require");
    assert!(over_tls(&history_consumer::db::pool(&unchecked, 1).unwrap()).await);
}

#[actix_web::test]
async fn require_against_a_server_without_tls_fails_saying_so_at_the_services_start() {
    let plain = cluster()
        .create_database(&unique_name("plain"))
        .await
        .unwrap();
    let url = format!("{plain}?sslmode=require");
    let error = connection_error(&url).await;
    assert!(
        error.contains("the server does not support TLS, and sslmode=require asks for it"),
        "{error}"
    );

    let kafka = TestKafka::start(1);
    let started = Application::build(test_settings(&url, &kafka, &unique_name("group"))).await;
    let error = chain(&started.err().expect("the service does not start"));
    assert!(
        error.contains("the server does not support TLS, and sslmode=require asks for it"),
        "{error}"
    );
}

#[actix_web::test]
async fn a_client_certificate_logs_in_where_the_server_asks_for_one_and_no_password() {
    let server = tls_server().await;
    let ca = display(&server.ca);
    let (cert, key) = (display(&server.client.cert), display(&server.client.key));
    let with_certificate = server.url(
        CERTIFIED_ROLE,
        "localhost",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={ca}&sslcert={cert}&sslkey={key}"),
    );
    let pool = history_consumer::db::pool(&with_certificate, 1).unwrap();
    let client = pool.get().await.expect("the certificate logs in");
    let user: String = client
        .query_one("SELECT current_user::text", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(user, CERTIFIED_ROLE);

    let without = server.url(
        CERTIFIED_ROLE,
        "localhost",
        "postgres",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let error = connection_error(&without).await;
    assert!(error.contains("certificate"), "{error}");
}

#[actix_web::test]
async fn sslrootcert_system_trusts_the_store_openssl_is_pointed_at_and_nothing_else() {
    let server = tls_server().await;
    let database = server.database("postgres").await;
    let url = server.url(
        "postgres",
        "localhost",
        &database,
        "sslmode=verify-full&sslrootcert=system",
    );
    let migrate = |store: &Path| {
        Command::new(env!("CARGO_BIN_EXE_history-consumer"))
            .args(["migrate", "--database-url", &url])
            // OpenSSL's default store, as on a host whose ca-certificates hold the server's
            // authority.
            .env("SSL_CERT_FILE", store)
            .env("SSL_CERT_DIR", "/nonexistent")
            .output()
            .unwrap()
    };
    let trusted = migrate(&server.ca);
    let shown = String::from_utf8_lossy(&[trusted.stdout, trusted.stderr].concat()).into_owned();
    assert!(trusted.status.success(), "{shown}");
    let untrusted = migrate(&server.other_ca);
    let shown = String::from_utf8_lossy(&untrusted.stderr).into_owned();
    assert!(!untrusted.status.success(), "{shown}");
    assert!(shown.contains("sslrootcert"), "{shown}");
}

#[actix_web::test]
async fn the_password_file_logs_in_where_the_server_asks_for_a_password() {
    let server = tls_server().await;
    let database = server.database(PASSWORD_ROLE).await;
    let ca = display(&server.ca);
    let url = server.url(
        PASSWORD_ROLE,
        "localhost",
        &database,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    let error = connection_error(&url).await;
    assert!(error.contains("password"), "without one: {error}");

    let files = tempfile::tempdir().unwrap();
    let password_file = files.path().join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let migrate = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args([
            "migrate",
            "--database-url",
            &url,
            "--database-password-file",
        ])
        .arg(&password_file)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&[migrate.stdout, migrate.stderr].concat()).into_owned();
    assert!(migrate.status.success(), "{shown}");
    assert!(shown.contains("applied"), "{shown}");
    assert!(!shown.contains(PASSWORD), "{shown}");

    std::fs::write(&password_file, "wrong\n").unwrap();
    let refused = Command::new(env!("CARGO_BIN_EXE_history-consumer"))
        .args(["migrate", "--database-url", &url])
        .env("HISTORY_DATABASE_PASSWORD_FILE", &password_file)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(!refused.status.success(), "{shown}");
    assert!(shown.contains("password authentication failed"), "{shown}");
    assert!(!shown.contains("wrong"), "{shown}");

    let in_process = DatabaseSettings {
        url: Secret::new(url.as_str()),
        password: Some(Secret::new(PASSWORD)),
    };
    let pool = in_process.database().unwrap().pool(1).unwrap();
    assert!(over_tls(&pool).await);
}

#[actix_web::test]
async fn the_binary_runs_on_the_key_value_form_over_verify_full_with_the_password_from_a_file() {
    let server = tls_server().await;
    let database = server.database(PASSWORD_ROLE).await;
    let files = tempfile::tempdir().unwrap();
    let password_file = files.path().join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    // A quoted value with a blank in it, as libpq's key=value form allows.
    let ca = files.path().join("root ca.crt");
    std::fs::copy(&server.ca, &ca).unwrap();
    let conninfo = format!(
        "host=localhost port={} dbname={database} user={PASSWORD_ROLE} sslmode=verify-full \
         sslrootcert='{}'",
        server.cluster.port(),
        ca.display()
    );
    let kafka = TestKafka::start(2);
    let group = unique_name("group");
    let password_flag = password_file.to_str().unwrap();
    let mut service = ServiceProcess::spawn_with(
        &conninfo,
        &kafka.brokers,
        &kafka.topic,
        &group,
        &["--database-password-file", password_flag],
    );
    produce(&kafka, 0..30).await;

    let settings = DatabaseSettings {
        url: Secret::new(conninfo.as_str()),
        password: Some(Secret::new(PASSWORD)),
    };
    let db = TestDb {
        url: conninfo.clone(),
        pool: settings.database().unwrap().pool(1).unwrap(),
    };
    wait_for(
        Duration::from_secs(60),
        "the binary to store 30 events",
        || async {
            let stored = db
                .pool
                .get()
                .await
                .ok()?
                .query_one("SELECT count(*) FROM history_events", &[])
                .await
                .ok()?
                .get::<_, i64>(0);
            (stored == 30).then_some(())
        },
    )
    .await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));
    let log = std::fs::read_to_string(&service.log).unwrap_or_default();
    assert!(!log.contains(PASSWORD), "{log}");
}
