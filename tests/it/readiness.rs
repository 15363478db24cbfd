//! `/readyz` answers within a second whatever the database and the broker do: a database that
//! hangs is "timed out", a broker outage is the Kafka connection failing for `unreachable`
//! brokers, and both are ready again once they work.

use std::time::{Duration, Instant};

use crate::support::app::{spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{test_database, unique_name, wait_for};
use crate::support::kafka::TestKafka;
use crate::support::proxy::{Proxy, through, upstream};

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
        metrics.contains("history_kafka_connection_failing{cause=\"unreachable\"} 1"),
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
    assert!(metrics.contains("history_kafka_connection_failing{cause=\"unreachable\"} 0"));
    app.shutdown().await;
}
