//! The Kafka connection flags from outside: the binary started with them, its secrets never
//! shown, OIDC client credentials reaching a token endpoint, and every valid event stored once
//! over SASL SCRAM (both mechanisms, with and without TLS), mutual TLS and a Java client's
//! properties file — on tansu, since the mock cluster speaks neither TLS nor SASL.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::kafka_connection::not_ready_for;
use crate::support::helpers::{TestDb, assert_stored_once, test_database, unique_name, wait_for};
use crate::support::kafka::{TestKafka, produce, wait_committed};
use crate::support::sasl_kafka::{self, sasl_options};
use crate::support::service::ServiceProcess;
use crate::support::tansu::create_topic;
use crate::support::tls_kafka::{self, tls_options};

/// One HTTP request as a token endpoint received it.
#[derive(Debug, Clone)]
struct Received {
    head: String,
    body: String,
}

/// An OIDC token endpoint that records what it is asked and answers every request with a
/// token that expires in an hour.
async fn token_endpoint() -> (String, Arc<Mutex<Vec<Received>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/oauth2/token", listener.local_addr().unwrap());
    let received = Arc::new(Mutex::new(Vec::new()));
    let log = received.clone();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let mut bytes = Vec::new();
                let mut buffer = [0u8; 4096];
                let (head, body) = loop {
                    let Ok(n) = socket.read(&mut buffer).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    bytes.extend_from_slice(&buffer[..n]);
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    let Some((head, body)) = text.split_once("\r\n\r\n") else {
                        continue;
                    };
                    let length = head
                        .lines()
                        .find_map(|l| {
                            let (name, value) = l.split_once(':')?;
                            name.eq_ignore_ascii_case("content-length")
                                .then(|| value.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= length {
                        break (head.to_owned(), body.to_owned());
                    }
                };
                log.lock().unwrap().push(Received { head, body });
                let token = jwt("history", 3600);
                let answer = format!(
                    "{{\"access_token\":\"{token}\",\"token_type\":\"Bearer\",\"expires_in\":3600}}"
                );
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{answer}",
                    answer.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (url, received)
}

/// An unsigned JWT with the claims librdkafka reads (`sub`, `exp`).
fn jwt(subject: &str, lifetime_seconds: i64) -> String {
    let encode = |json: &str| {
        openssl::base64::encode_block(json.as_bytes())
            .trim_end_matches('=')
            .replace('+', "-")
            .replace('/', "_")
    };
    let expires = chrono::Utc::now().timestamp() + lifetime_seconds;
    format!(
        "{}.{}.{}",
        encode(r#"{"alg":"none","typ":"JWT"}"#),
        encode(&format!(r#"{{"sub":"{subject}","exp":{expires}}}"#)),
        encode("signature")
    )
}

fn secret_file(content: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), format!("{content}\n")).unwrap();
    file
}

#[tokio::test(flavor = "multi_thread")]
async fn oauthbearer_asks_the_oidc_token_endpoint_with_the_client_credentials_and_shows_no_secret()
{
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let (url, received) = token_endpoint().await;
    let secret = secret_file("oidc-client-secret-1f2e");
    let service = ServiceProcess::spawn_with(
        &db.url,
        &kafka.brokers,
        &kafka.topic,
        &unique_name("oidc"),
        &[
            "--kafka-security-protocol",
            "sasl_plaintext",
            "--kafka-sasl-mechanism",
            "OAUTHBEARER",
            "--kafka-oauth-token-url",
            &url,
            "--kafka-oauth-client-id",
            "history-client",
            "--kafka-oauth-client-secret-file",
            secret.path().to_str().unwrap(),
            "--kafka-oauth-scope",
            "kafka.read",
        ],
    );
    let request = wait_for(Duration::from_secs(30), "a token request", || {
        let first = received.lock().unwrap().first().cloned();
        async move { first }
    })
    .await;
    assert!(
        request.head.starts_with("POST /oauth2/token "),
        "{request:?}"
    );
    let expected = openssl::base64::encode_block(b"history-client:oidc-client-secret-1f2e");
    assert!(
        request
            .head
            .lines()
            .any(|l| l.eq_ignore_ascii_case(&format!("authorization: basic {expected}"))),
        "the client credentials as HTTP Basic: {request:?}"
    );
    assert!(
        request.body.contains("grant_type=client_credentials"),
        "{request:?}"
    );
    assert!(request.body.contains("scope=kafka.read"), "{request:?}");
    // The mock cluster speaks no SASL: the member never gets in, and is not ready.
    let readyz = reqwest::get(format!("http://{}/readyz", service.admin))
        .await
        .unwrap();
    assert_eq!(readyz.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let log_path = service.log.clone();
    drop(service);
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(!log.contains("oidc-client-secret-1f2e"), "{log}");
}

#[test]
fn help_never_shows_a_secret_given_in_the_environment() {
    let secrets = [
        ("HISTORY_KAFKA_SASL_PASSWORD", "env-kafka-password-77"),
        ("HISTORY_KAFKA_OAUTH_CLIENT_SECRET", "env-oidc-secret-78"),
        (
            "HISTORY_DATABASE_URL",
            "postgres://u:env-db-password-79@h/db",
        ),
        ("HISTORY_ADMIN_TOKEN", "env-admin-token-0123456789"),
    ];
    for command in ["run", "verify", "rewind", "produce"] {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_history-consumer"))
            .args([command, "--help"])
            .envs(secrets)
            .output()
            .unwrap();
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(
            help.contains("--kafka-sasl-password-file"),
            "{command}: {help}"
        );
        assert!(help.contains("--kafka-config-file"), "{command}: {help}");
        for (_, secret) in secrets {
            assert!(!help.contains(secret), "{command} --help shows {secret}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_kafka_secret_given_as_a_flag_warns_without_showing_it() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let service = ServiceProcess::spawn_with(
        &db.url,
        &kafka.brokers,
        &kafka.topic,
        &unique_name("flag-secret"),
        &[
            "--kafka-security-protocol",
            "sasl_plaintext",
            "--kafka-sasl-mechanism",
            "SCRAM-SHA-256",
            "--kafka-sasl-username",
            "history",
            "--kafka-sasl-password",
            "flag-password-5a5a",
        ],
    );
    let log_path = service.log.clone();
    let log = wait_for(Duration::from_secs(30), "the warning", || {
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        async move { log.contains("command-line flag").then_some(log) }
    })
    .await;
    assert!(log.contains("kafka-sasl-password"), "{log}");
    assert!(!log.contains("flag-password-5a5a"), "{log}");
}

/// The service as a binary on `kafka` with `flags`, `events` produced (over the broker's own
/// client options), then every one stored once and the group committed at the end.
async fn stored_once_through_the_binary(
    kafka: &TestKafka,
    brokers: &str,
    flags: &[&str],
    events: usize,
) -> TestDb {
    stored_once_through_the_binary_with_env(kafka, brokers, flags, &[], events).await
}

async fn stored_once_through_the_binary_with_env(
    kafka: &TestKafka,
    brokers: &str,
    flags: &[&str],
    env: &[(&str, &str)],
    events: usize,
) -> TestDb {
    let db = test_database().await;
    let group = unique_name("secure");
    let mut service =
        ServiceProcess::spawn_with_env(&db.url, brokers, &kafka.topic, &group, flags, env);
    produce(kafka, 0..events).await;
    let ends = kafka.ends().await;
    wait_committed(kafka, &group, &ends, Duration::from_secs(90)).await;
    assert_stored_once(&db, events).await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));
    let log = std::fs::read_to_string(&service.log).unwrap();
    assert!(!log.contains("kafka connection failing"), "{log}");
    db
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_sha_256_over_tls_with_the_first_class_flags_stores_every_event_once_on_tansu() {
    let sasl = sasl_kafka::server();
    let broker = sasl.over_tls();
    let mut options = tls_options(&broker.authority.cert_path);
    options[0].1 = "sasl_ssl".into();
    options.extend(sasl_options(&sasl.user, &sasl.password).into_iter().skip(1));
    let topic = unique_name("tickets");
    let kafka = TestKafka::on(broker.brokers.clone(), options, topic, 2);
    create_topic(kafka.client(), &kafka.topic, 2).await;
    let password = secret_file(&sasl.password);
    let ca = broker.authority.cert_path.display().to_string();
    stored_once_through_the_binary(
        &kafka,
        &broker.brokers,
        &[
            "--kafka-security-protocol",
            "SASL_SSL",
            "--kafka-sasl-mechanism",
            "SCRAM-SHA-256",
            "--kafka-sasl-username",
            &sasl.user,
            "--kafka-sasl-password-file",
            password.path().to_str().unwrap(),
            "--kafka-ssl-ca-file",
            &ca,
        ],
        40,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn scram_sha_512_from_a_java_clients_properties_file_stores_every_event_once_on_tansu() {
    let sasl = sasl_kafka::server();
    let options = vec![
        ("security.protocol".to_owned(), "sasl_plaintext".to_owned()),
        ("sasl.mechanism".to_owned(), "SCRAM-SHA-512".to_owned()),
        ("sasl.username".to_owned(), sasl.user_512.clone()),
        ("sasl.password".to_owned(), sasl.password_512.clone()),
    ];
    let topic = unique_name("tickets");
    let kafka = TestKafka::on(sasl.brokers.clone(), options, topic, 2);
    create_topic(kafka.client(), &kafka.topic, 2).await;
    // As a Java client's client.properties has it: the login in sasl.jaas.config, settings
    // librdkafka does not know, and the brokers (no --brokers given).
    let properties = secret_file(&format!(
        "# written for a Java client\n\
         bootstrap.servers={brokers}\n\
         security.protocol=SASL_PLAINTEXT\n\
         sasl.mechanism=SCRAM-SHA-512\n\
         sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n    \
         username=\"{user}\" password=\"{password}\";\n\
         key.deserializer=org.apache.kafka.common.serialization.StringDeserializer\n\
         client.dns.lookup=use_all_dns_ips\n",
        brokers = sasl.brokers,
        user = sasl.user_512,
        password = sasl.password_512,
    ));
    stored_once_through_the_binary(
        &kafka,
        "",
        &["--kafka-config-file", properties.path().to_str().unwrap()],
        40,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn mutual_tls_with_the_certificate_flags_stores_every_event_once_on_tansu() {
    let broker = tls_kafka::mutual_server();
    let kafka = broker.topic(2).await;
    let (ca, cert, key) = (
        broker.authority.cert_path.display().to_string(),
        broker.client.cert.display().to_string(),
        broker.client.key.display().to_string(),
    );
    stored_once_through_the_binary(
        &kafka,
        &broker.brokers,
        &[
            "--kafka-security-protocol",
            "ssl",
            "--kafka-ssl-ca-file",
            &ca,
            "--kafka-ssl-cert-file",
            &cert,
            "--kafka-ssl-key-file",
            &key,
        ],
        40,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_without_a_ca_file_trusts_the_system_store_on_tansu() {
    let broker = tls_kafka::server();
    let kafka = broker.topic(2).await;
    let store = broker.authority.cert_path.display().to_string();
    // OpenSSL's default store, as on a host whose ca-certificates hold the broker's authority
    // (a public one, for a managed service).
    stored_once_through_the_binary_with_env(
        &kafka,
        &broker.brokers,
        &["--kafka-security-protocol", "ssl"],
        &[("SSL_CERT_FILE", &store), ("SSL_CERT_DIR", "/nonexistent")],
        30,
    )
    .await;
}

/// tansu 0.6 offers SCRAM only (it leaves rsasl's PLAIN out), so PLAIN is proven against a
/// broker only as far as this: librdkafka sends it, and the operator is told the broker refused
/// the mechanism, naming it.
#[tokio::test(flavor = "multi_thread")]
async fn sasl_plain_against_a_broker_without_it_is_named_as_a_refused_mechanism_on_tansu() {
    let sasl = sasl_kafka::server();
    let db = test_database().await;
    let password = secret_file(&sasl.password);
    let service = ServiceProcess::spawn_with(
        &db.url,
        &sasl.brokers,
        &unique_name("tickets"),
        &unique_name("plain"),
        &[
            "--kafka-security-protocol",
            "sasl_plaintext",
            "--kafka-sasl-mechanism",
            "PLAIN",
            "--kafka-sasl-username",
            &sasl.user,
            "--kafka-sasl-password-file",
            password.path().to_str().unwrap(),
        ],
    );
    let body = not_ready_for(&service.admin, "mechanism_refused").await;
    let message = body["kafka_connection"]["message"]
        .as_str()
        .unwrap_or_default();
    assert!(message.contains("PLAIN"), "{body}");
    assert!(!body.to_string().contains(&sasl.password), "{body}");
}
