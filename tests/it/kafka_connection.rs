//! Bad credentials and certificates get a clear answer and lose nothing. Kafka over TLS
//! (tansu behind stunnel): with the right authority every event is stored once; with a wrong
//! authority, a certificate for another host or a broker that wants a client certificate, and
//! with SASL SCRAM (a tansu that authenticates) a wrong password, the service stays up, says
//! why on `/readyz`, the overview, the API and the metrics, and neither stores nor commits
//! anything; restarted with the right settings it is exact. A client key it cannot read stops
//! it at start, naming the setting.

use std::time::{Duration, Instant};

use crate::support::app::{spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{assert_stored_once, test_database, unique_name, wait_for};
use crate::support::kafka::{TestKafka, produce, wait_committed};
use crate::support::metrics::value as metric;
use crate::support::sasl_kafka::{self, MECHANISM, sasl_options};
use crate::support::service::ServiceProcess;
use crate::support::tls_kafka::{self, Clients, tls_options};

/// How long a failing connection may take to show on `/readyz`.
const DIAGNOSIS_DEADLINE: Duration = Duration::from_secs(30);

/// `GET path` on `addr`: status and body, or `None` while nothing answers. Every answer must
/// come within a second, whatever the broker does.
pub(crate) async fn get(addr: &str, path: &str) -> Option<(u16, String)> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("an HTTP client");
    let started = Instant::now();
    let response = client
        .get(format!("http://{addr}{path}"))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    let body = response.text().await.ok()?;
    let took = started.elapsed();
    assert!(
        path != "/readyz" || took < Duration::from_secs(1),
        "{path} took {took:?}"
    );
    Some((status, body))
}

/// Waits until `/readyz` answers 503 naming `problem`; its body.
pub(crate) async fn not_ready_for(addr: &str, problem: &str) -> serde_json::Value {
    wait_for(
        DIAGNOSIS_DEADLINE,
        &format!("/readyz to answer 503 for {problem}"),
        || async {
            let (status, body) = get(addr, "/readyz").await?;
            let body: serde_json::Value = serde_json::from_str(&body).ok()?;
            (status == 503 && body["kafka_connection"]["problem"] == problem).then_some(body)
        },
    )
    .await
}

pub(crate) async fn nothing_stored_nor_committed(
    db: &crate::support::helpers::TestDb,
    kafka: &TestKafka,
    group: &str,
) {
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 0);
    assert_eq!(db.scalar("SELECT count(*) FROM inbox").await, 0);
    assert_eq!(
        kafka.committed(group).await,
        vec![-1; kafka.partitions as usize],
        "nothing committed for {group}"
    );
}

#[actix_web::test]
async fn over_tls_with_the_right_authority_every_event_is_stored_once_and_the_group_commits_the_end()
 {
    let tls = tls_kafka::server();
    let kafka = tls.topic(2).await;
    let db = test_database().await;
    produce(&kafka, 0..40).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_committed(&kafka, &kafka.ends().await).await;
    assert_stored_once(&db, 40).await;
    let (status, body) = get(&app.handle.metrics_addr.to_string(), "/readyz")
        .await
        .expect("an answer");
    assert_eq!(status, 200, "{body}");
    assert!(
        body.contains("\"kafka_connection\":{\"failing\":false}"),
        "{body}"
    );
    app.shutdown().await;
}

#[actix_web::test]
async fn a_broker_certificate_of_an_unknown_authority_keeps_the_service_up_and_unready_with_the_tls_cause_and_nothing_moves_until_a_restart_with_the_right_one()
 {
    let tls = tls_kafka::server();
    let kafka = tls.topic(2).await;
    let db = test_database().await;
    produce(&kafka, 0..30).await;
    let group = unique_name("group");
    let stranger = tls.authority("stranger");
    let refusals_before = tls.front.log().matches("alert unknown ca").count();
    let mut service =
        ServiceProcess::spawn_with_options(&db, &kafka, &group, &tls_options(&stranger.cert_path));

    let ready = not_ready_for(&service.admin, "certificate_not_trusted").await;
    let connection = &ready["kafka_connection"];
    assert_eq!(connection["failing"], true);
    assert_eq!(connection["cause"], "tls");
    assert_eq!(
        connection["message"],
        "the broker's certificate is not trusted: check ssl.ca.location / --kafka-ssl-ca-file"
    );
    assert_eq!(ready["group_joined"], false);

    // The overview says it above the partitions; the API gives it too.
    let (status, page) = get(&service.admin, "/").await.expect("the overview");
    assert_eq!(status, 200, "{page}");
    let banner = page.find("id=\"kafka-connection\"").expect(&page);
    assert!(banner < page.find("id=\"partitions\"").expect("the partitions"));
    assert!(page.contains("Kafka connection failing: tls"), "{page}");
    assert!(page.contains("is not trusted"), "{page}");
    assert!(
        page.contains("check ssl.ca.location / --kafka-ssl-ca-file"),
        "{page}"
    );
    let status = service.get_json("/api/status").await.expect("the status");
    let failing = &status["kafka_connection"]["failing"];
    assert_eq!(failing["cause"]["kind"], "tls", "{status}");
    assert_eq!(failing["cause"]["problem"], "certificate_not_trusted");
    let (_, metrics) = get(&service.admin, "/metrics").await.expect("metrics");
    assert!(
        metric(&metrics, "history_kafka_connection_failing{cause=\"tls\"}") == Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        metric(
            &metrics,
            "history_kafka_connection_failing{cause=\"authentication\"}"
        ),
        Some(0.0)
    );

    // librdkafka keeps retrying (the front sees its handshakes fail); the service stays up,
    // unready, and says so once.
    wait_for(
        Duration::from_secs(30),
        "librdkafka to retry the handshake a few times",
        || async {
            let refusals = tls.front.log().matches("alert unknown ca").count() - refusals_before;
            (refusals >= 5).then_some(())
        },
    )
    .await;
    let (status, _) = get(&service.admin, "/readyz").await.expect("an answer");
    assert_eq!(status, 503);
    let log = std::fs::read_to_string(&service.log).unwrap();
    assert_eq!(
        log.matches("kafka connection failing").count(),
        1,
        "one warning for the failure:\n{log}"
    );
    nothing_stored_nor_committed(&db, &kafka, &group).await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));

    // With the right authority the same group stores every event once and commits the end.
    let service = ServiceProcess::spawn(&db, &kafka, &group);
    let ends = kafka.ends().await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(90)).await;
    assert_stored_once(&db, 30).await;
    let (status, body) = get(&service.admin, "/readyz").await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    drop(service);
}

#[actix_web::test]
async fn a_broker_certificate_for_another_host_is_called_a_host_name_mismatch() {
    let tls = tls_kafka::server();
    let kafka = tls.topic(1).await;
    let elsewhere = tls
        .authority
        .issue_server(&unique_name("elsewhere"), &["elsewhere.example"])
        .expect("a certificate");
    let front = tls.front(&elsewhere, Clients::Any);
    let db = test_database().await;
    let group = unique_name("group");
    let mut settings = test_settings(&db.url, &kafka, &group);
    settings.kafka.brokers = front.brokers.clone();
    let app = spawn_app_with(settings).await;

    let ready = not_ready_for(&app.handle.admin_addr.to_string(), "host_name_mismatch").await;
    let message = ready["kafka_connection"]["message"].as_str().unwrap();
    assert!(
        message.contains("is not issued for the host name \"127.0.0.1\""),
        "{message}"
    );
    assert_eq!(ready["kafka_connection"]["cause"], "tls");
    nothing_stored_nor_committed(&db, &kafka, &group).await;
    app.shutdown().await;
}

#[actix_web::test]
async fn a_broker_that_wants_a_client_certificate_is_said_to_refuse_the_client() {
    let tls = tls_kafka::server();
    let kafka = tls.topic(1).await;
    let clients = tls.authority("clients");
    let front = tls.front(&tls.server, Clients::CertifiedBy(&clients.cert_path));
    let db = test_database().await;
    let group = unique_name("group");
    let mut settings = test_settings(&db.url, &kafka, &group);
    settings.kafka.brokers = front.brokers.clone();
    let app = spawn_app_with(settings).await;

    let ready = not_ready_for(
        &app.handle.admin_addr.to_string(),
        "client_certificate_refused",
    )
    .await;
    assert_eq!(
        ready["kafka_connection"]["message"],
        "the broker refused the client certificate (or that none was sent): check \
         ssl.certificate.location / --kafka-ssl-cert-file and ssl.key.location / \
         --kafka-ssl-key-file"
    );
    nothing_stored_nor_committed(&db, &kafka, &group).await;
    app.shutdown().await;
}

#[actix_web::test]
async fn a_client_key_that_cannot_be_read_stops_the_service_at_start_naming_the_setting() {
    let tls = tls_kafka::server();
    let kafka = tls.topic(1).await;
    let db = test_database().await;
    let mut options = tls.options();
    options.push((
        "ssl.certificate.location".into(),
        tls.server.cert.display().to_string(),
    ));
    options.push(("ssl.key.location".into(), "/nonexistent/client.key".into()));
    let mut service =
        ServiceProcess::spawn_with_options(&db, &kafka, &unique_name("group"), &options);
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(1));
    let log = std::fs::read_to_string(&service.log).unwrap();
    assert!(
        log.contains(
            "Error: invalid configuration: kafka property ssl.key.location: the client's \
             private key could not be read: check ssl.key.location / --kafka-ssl-key-file"
        ),
        "{log}"
    );
    assert!(!log.contains("panicked"), "{log}");
}

#[actix_web::test]
async fn a_wrong_scram_password_keeps_the_service_up_and_unready_naming_the_user_and_mechanism_and_nothing_moves_until_a_restart_with_the_right_one()
 {
    let sasl = sasl_kafka::server();
    let kafka = sasl.topic(2).await;
    let db = test_database().await;
    produce(&kafka, 0..20).await;
    let group = unique_name("group");
    let wrong = unique_name("wrong-password");
    let mut service =
        ServiceProcess::spawn_with_options(&db, &kafka, &group, &sasl_options(&sasl.user, &wrong));

    let ready = not_ready_for(&service.admin, "invalid_credentials").await;
    assert_eq!(ready["kafka_connection"]["cause"], "authentication");
    assert_eq!(
        ready["kafka_connection"]["message"],
        format!(
            "the broker refused the credentials of user \"{}\" with {MECHANISM}: check \
             sasl.username / --kafka-sasl-username and sasl.password / \
             --kafka-sasl-password-file",
            sasl.user
        )
    );
    let (_, page) = get(&service.admin, "/").await.expect("the overview");
    assert!(
        page.contains("Kafka connection failing: authentication"),
        "{page}"
    );
    let (_, status) = get(&service.admin, "/api/status")
        .await
        .expect("the status");
    let (_, metrics) = get(&service.admin, "/metrics").await.expect("metrics");
    assert!(
        metric(
            &metrics,
            "history_kafka_connection_failing{cause=\"authentication\"}"
        ) == Some(1.0),
        "{metrics}"
    );
    nothing_stored_nor_committed(&db, &kafka, &group).await;
    service.sigterm();
    assert_eq!(service.wait_exit(Duration::from_secs(30)).await, Some(0));
    let log = std::fs::read_to_string(&service.log).unwrap();
    assert_eq!(
        log.matches("kafka connection failing").count(),
        1,
        "one warning for the failure:\n{log}"
    );
    for (what, text) in [
        ("/readyz", ready.to_string()),
        ("the overview", page),
        ("/api/status", status),
        ("/metrics", metrics),
        ("the log", log),
    ] {
        assert!(!text.contains(&wrong), "{what} shows the password");
    }

    let service = ServiceProcess::spawn(&db, &kafka, &group);
    let ends = kafka.ends().await;
    wait_committed(&kafka, &group, &ends, Duration::from_secs(90)).await;
    assert_stored_once(&db, 20).await;
    let (status, body) = get(&service.admin, "/readyz").await.expect("an answer");
    assert_eq!(status, 200, "{body}");
    drop(service);
}
