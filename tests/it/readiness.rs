//! `/readyz` answers within a second whatever the database and the broker do: a database that
//! hangs is "timed out", a broker outage is the Kafka connection failing for `unreachable`
//! brokers, and both are ready again once they work.

use std::time::{Duration, Instant};

use crate::support::app::{spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{
    assert_stored_once, free_port, test_database, unique_name, wait_for,
};
use crate::support::kafka::{Broker, TestKafka, produce, wait_committed};
use crate::support::metrics::value as metric;
use crate::support::proxy::{Proxy, through, upstream};
use crate::support::service::ServiceProcess;

/// `/readyz` of `addr`: its status and body, answered within a second.
async fn readyz(addr: &str) -> (u16, serde_json::Value) {
    let started = Instant::now();
    let response = crate::support::http::get(addr, "/readyz").await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "/readyz took {took:?}");
    (response.status, response.json())
}

#[actix_web::test]
async fn readyz_answers_within_a_second_while_the_database_hangs_and_names_the_check_that_timed_out()
 {
    let db = test_database().await;
    let proxy = Proxy::start(upstream(&db.url)).await;
    let kafka = TestKafka::start(1);
    let settings = test_settings(&through(&db.url, proxy.port), &kafka, &unique_name("group"));
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let addr = app.handle.metrics_addr.to_string();
    assert_eq!(readyz(&addr).await.0, 200);

    proxy.hold_replies(true);
    let (status, body) = readyz(&addr).await;
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["database"], false);
    assert_eq!(body["timed_out"], serde_json::json!(["database"]));
    assert_eq!(body["group_joined"], true);

    proxy.hold_replies(false);
    wait_for(
        Duration::from_secs(10),
        "/readyz to be ready again",
        || async { (readyz(&addr).await.0 == 200).then_some(()) },
    )
    .await;
    app.shutdown().await;
}

// On the mock only: it takes its broker down and up on demand.
#[actix_web::test]
async fn a_broker_outage_makes_the_service_unready_for_unreachable_brokers_until_one_is_up_again() {
    let db = test_database().await;
    let kafka = TestKafka::start(1);
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let addr = app.handle.metrics_addr.to_string();
    assert_eq!(readyz(&addr).await.0, 200);

    kafka.mock().broker_down(1).expect("broker down");
    let body = wait_for(
        Duration::from_secs(30),
        "/readyz to say the brokers are unreachable",
        || async {
            let (status, body) = readyz(&addr).await;
            (status == 503 && body["kafka_connection"]["cause"] == "unreachable").then_some(body)
        },
    )
    .await;
    assert!(
        body["kafka_connection"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("--brokers")),
        "{body}"
    );
    let metrics = crate::support::http::get(&addr, "/metrics").await.body;
    assert!(
        metric(
            &metrics,
            "history_kafka_connection_failing{cause=\"unreachable\"}"
        ) == Some(1.0),
        "{metrics}"
    );

    kafka.mock().broker_up(1).expect("broker up");
    wait_for(
        Duration::from_secs(30),
        "/readyz to be ready again",
        || async {
            let (status, body) = readyz(&addr).await;
            (status == 200 && body["kafka_connection"]["failing"] == false).then_some(())
        },
    )
    .await;
    let metrics = crate::support::http::get(&addr, "/metrics").await.body;
    assert_eq!(
        metric(
            &metrics,
            "history_kafka_connection_failing{cause=\"unreachable\"}"
        ),
        Some(0.0)
    );
    app.shutdown().await;
}

/// `GET path` on the binary's admin address, answered within a second: status and body.
async fn get_within_a_second(member: &ServiceProcess, path: &str) -> (u16, String) {
    let started = Instant::now();
    let response = reqwest::Client::new()
        .get(format!("http://{}{path}", member.admin))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap_or_else(|e| panic!("{path} did not answer: {e}"));
    let status = response.status().as_u16();
    let body = response.text().await.unwrap_or_default();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "{path} took {took:?}");
    (status, body)
}

/// Waits for the binary's admin address to answer `/healthz`.
async fn admin_up(member: &ServiceProcess) {
    wait_for(
        Duration::from_secs(30),
        "the admin address to answer",
        || async {
            reqwest::get(format!("http://{}/healthz", member.admin))
                .await
                .ok()
                .filter(|r| r.status() == reqwest::StatusCode::OK)
                .map(|_| ())
        },
    )
    .await;
}

#[actix_web::test]
async fn run_with_the_database_down_at_start_waits_up_and_unready_with_the_reason_then_starts_when_it_comes_on_tansu()
 {
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Tansu, 2).await;
    let group = unique_name("group");
    // Nothing listens on the database's port yet.
    let port = free_port();
    let url = through(&db.url, port);
    let mut member = ServiceProcess::spawn_with(&url, &kafka.brokers, &kafka.topic, &group, &[]);
    admin_up(&member).await;

    let (status, body) = get_within_a_second(&member, "/readyz").await;
    assert_eq!(status, 503, "{body}");
    let ready: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(ready["database"], false, "{ready}");
    let reason = ready["waiting_for_database"]["reason"]
        .as_str()
        .unwrap_or_default();
    assert!(reason.contains("onnect"), "{ready}");
    let (status, page) = get_within_a_second(&member, "/").await;
    assert_eq!(status, 503);
    assert!(
        page.contains("Waiting for the database") && page.contains("Last error"),
        "{page}"
    );
    // It keeps trying, and does not exit.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let (_, body) = get_within_a_second(&member, "/readyz").await;
    let ready: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert!(
        ready["waiting_for_database"]["attempts"].as_u64() > Some(1),
        "{ready}"
    );
    let log = std::fs::read_to_string(&member.log).unwrap();
    assert_eq!(
        log.matches("cannot reach the database; waiting for it")
            .count(),
        1,
        "said once, not per attempt:\n{log}"
    );

    // The database comes: the member migrates, joins and stores every event once.
    let _database = Proxy::start_on(port, upstream(&db.url)).await;
    produce(&kafka, 0..100).await;
    // Asked without a pause while it starts: every request is answered, none is dropped as the
    // waiting pages hand the listeners over to the real servers.
    let coming = Instant::now();
    let mut asked = 0;
    while get_within_a_second(&member, "/readyz").await.0 != 200 {
        asked += 1;
        assert!(
            coming.elapsed() < Duration::from_secs(60),
            "/readyz not ready within 60 s of the database coming ({asked} answers)"
        );
    }
    wait_committed(&kafka, &group, &kafka.ends().await, Duration::from_secs(60)).await;
    assert_stored_once(&db, 100).await;
    member.sigterm();
    assert_eq!(member.wait_exit(Duration::from_secs(30)).await, Some(0));
}

#[actix_web::test]
async fn sigterm_while_run_waits_for_the_database_exits_zero_at_once() {
    let db = test_database().await;
    let port = free_port();
    let url = through(&db.url, port);
    let mut member =
        ServiceProcess::spawn_with(&url, "127.0.0.1:9", "topic", &unique_name("group"), &[]);
    admin_up(&member).await;
    member.sigterm();
    assert_eq!(member.wait_exit(Duration::from_secs(5)).await, Some(0));
}

/// The check from outside: the binary, consuming, its database stops answering (a
/// proxy holds every reply back): `/readyz` says so and `/healthz` answers, each within a
/// second, for as long as it lasts; once the database answers again every event is stored once.
#[actix_web::test]
async fn readyz_and_healthz_of_the_binary_answer_within_a_second_while_its_database_hangs_on_tansu()
{
    let db = test_database().await;
    let proxy = Proxy::start(upstream(&db.url)).await;
    let kafka = TestKafka::start_on(Broker::Tansu, 2).await;
    let group = unique_name("group");
    let mut member = ServiceProcess::spawn_with(
        &through(&db.url, proxy.port),
        &kafka.brokers,
        &kafka.topic,
        &group,
        &["--work-timeout", "2s"],
    );
    produce(&kafka, 0..100).await;
    wait_committed(&kafka, &group, &kafka.ends().await, Duration::from_secs(90)).await;
    assert_eq!(get_within_a_second(&member, "/readyz").await.0, 200);

    proxy.hold_replies(true);
    produce(&kafka, 100..300).await;
    let hung = Instant::now();
    let mut answers = 0;
    // For 12 s and at least 10 rounds (on a loaded machine a round takes longer).
    while hung.elapsed() < Duration::from_secs(12) || answers < 10 {
        let (status, body) = get_within_a_second(&member, "/readyz").await;
        if hung.elapsed() > Duration::from_secs(1) {
            assert_eq!(status, 503, "{body}");
            let ready: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(ready["database"], false, "{ready}");
        }
        assert_eq!(get_within_a_second(&member, "/healthz").await.0, 200);
        answers += 1;
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    proxy.hold_replies(false);
    wait_for(
        Duration::from_secs(60),
        "/readyz to be ready again",
        || async { (get_within_a_second(&member, "/readyz").await.0 == 200).then_some(()) },
    )
    .await;
    wait_committed(&kafka, &group, &kafka.ends().await, Duration::from_secs(90)).await;
    assert_stored_once(&db, 300).await;
    member.sigterm();
    assert_eq!(member.wait_exit(Duration::from_secs(30)).await, Some(0));
}
