//! An offset out of range (issue 21): the group's committed position is no longer in the
//! partition's log. Before, librdkafka reset it to the earliest offset in silence
//! (`auto.offset.reset=earliest`) and the records between were gone without a trace. Now the
//! gap is recorded in `offset_resets`, shown on the partition's page, in its API and metrics,
//! and the partition is held (the default) until an operator's live rewind, or reads on from
//! the log's start once the gap is on record (`--offset-reset-policy continue`).
//!
//! Only the mock can make a position fall out of a log: tansu 0.6 answers no fetch with
//! `OFFSET_OUT_OF_RANGE` and its memory engine panics on `DeleteRecords` (see the contract).
//! The mock keeps at most 5 MiB per partition, so records worth more than that move the log's
//! start past a committed position, as retention does on a real broker. On both brokers, a
//! group that never committed still starts at the earliest offset with nothing recorded.

use std::time::Duration;

use chrono::Utc;
use history_consumer::domain::HeldCause;
use history_consumer::domain::Trouble;
use history_consumer::domain::offset_reset::ResetPolicy;
use rdkafka::consumer::{BaseConsumer, Consumer};

use crate::recovery::history_consumer;
use crate::support::app::{ADMIN_TOKEN, TestApp, spawn_app, spawn_app_with, test_settings};
use crate::support::helpers::{TestDb, test_database, unique_name, wait_for};
use crate::support::http::{get, request};
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, numbered_event, point_in_time};

/// A valid event of about 100 KiB (an extra field the service ignores).
fn padded_event(i: usize) -> Vec<u8> {
    let mut event: serde_json::Value = serde_json::from_slice(&numbered_event(i)).unwrap();
    event["padding"] = serde_json::Value::String("x".repeat(100 * 1024));
    serde_json::to_vec(&event).unwrap()
}

/// The partition's log bounds as the broker answers them.
async fn bounds(kafka: &TestKafka) -> (i64, i64) {
    let (client, topic) = (kafka.client(), kafka.topic.clone());
    tokio::task::spawn_blocking(move || {
        let consumer: BaseConsumer = client
            .clone()
            .set("group.id", unique_name("bounds"))
            .create()
            .expect("consumer");
        consumer
            .fetch_watermarks(&topic, 0, Duration::from_secs(10))
            .expect("watermarks")
    })
    .await
    .unwrap()
}

/// Five events, the group committed at 2 (it stopped there), then 60 records of 100 KiB: the
/// mock drops the oldest batches, and the log now starts past 2. Returns (log start, end).
async fn a_committed_position_before_the_log_start(kafka: &TestKafka, group: &str) -> (i64, i64) {
    let producer = kafka.producer();
    for i in 0..5 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    kafka.commit_for(group, &[2]).await;
    for i in 5..65 {
        kafka.send(&producer, Some(0), "k", &padded_event(i)).await;
    }
    let (start, end) = bounds(kafka).await;
    assert!(
        start > 5,
        "the mock dropped the first batches: log {start}..{end}"
    );
    assert_eq!(end, 65);
    (start, end)
}

async fn stored(db: &TestDb) -> i64 {
    db.scalar("SELECT count(*) FROM history_events").await
}

async fn reset_rows(db: &TestDb) -> Vec<(i64, Option<i64>, String, Option<String>)> {
    let client = db.pool.get().await.unwrap();
    client
        .query(
            "SELECT from_offset, to_offset, policy, resumed_by FROM offset_resets \
             ORDER BY detected_at",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3)))
        .collect()
}

async fn metric(app: &TestApp, prefix: &str) -> f64 {
    let admin = app.handle.admin_addr.to_string();
    let metrics = get(&admin, "/metrics").await;
    crate::support::metrics::sum(&metrics.body, prefix, &[])
}

#[actix_web::test]
async fn a_position_before_the_log_start_is_recorded_and_holds_the_partition_until_a_live_rewind_on_the_mock()
 {
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Mock, 1).await;
    let group = unique_name("group");
    let (start, end) = a_committed_position_before_the_log_start(&kafka, &group).await;

    let app = spawn_app_with(test_settings(&db.url, &kafka, &group)).await;
    app.wait_assigned(1).await;
    let held = wait_for(
        Duration::from_secs(30),
        "the partition to be held at the reset",
        || async {
            match app.partition(0).await?.fetch? {
                Trouble::Held(held) => Some(held),
                Trouble::Failing(_) => None,
            }
        },
    )
    .await;
    assert_eq!(held.offset, Some(2), "{held:?}");
    assert_eq!(
        held.cause,
        HeldCause::OffsetOutOfRange {
            log_start: Some(start),
            log_end: Some(end)
        }
    );
    let rows = wait_for(Duration::from_secs(10), "the reset recorded", || async {
        let rows = reset_rows(&db).await;
        (!rows.is_empty()).then_some(rows)
    })
    .await;
    assert_eq!(rows, vec![(2, None, "hold".to_owned(), None)]);

    // Shown: stuck with the cause on the page and in the API, the reset listed, the metric.
    let admin = app.handle.admin_addr.to_string();
    let api = wait_for(
        Duration::from_secs(10),
        "the partition shown stuck",
        || async {
            let api = get(&admin, "/api/partitions/0").await;
            (api.status == 200 && api.json()["state"] == "stuck").then(|| api.json())
        },
    )
    .await;
    let reason = api["state_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("not in the partition's log"), "{reason}");
    assert_eq!(api["offset_resets"][0]["from_offset"], 2, "{api}");
    assert_eq!(
        api["offset_resets"][0]["to_offset"],
        serde_json::Value::Null
    );
    assert_eq!(api["offset_resets"][0]["log_start"], start);
    let page = get(&admin, "/partitions/0").await;
    assert!(page.body.contains("id=\"offset-resets\""), "{}", page.body);
    assert!(page.body.contains("<td>held</td>"), "{}", page.body);
    assert_eq!(
        metric(
            &app,
            "history_offset_resets_total{partition=\"0\",policy=\"hold\"}"
        )
        .await,
        1.0
    );

    // Held: nothing is read past the gap, the committed offset stays where it was.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(stored(&db).await, 0, "nothing read while held");
    assert_eq!(kafka.committed(&group).await, [2]);

    // An operator's live rewind (to any time) reads on from the log's start; its preview says so.
    let preview = request(
        &admin,
        "POST",
        &format!(
            "/api/partitions/0/rewind?to={}&dry_run=true",
            point_in_time(Utc::now())
        ),
        &[("Authorization", &format!("Bearer {ADMIN_TOKEN}"))],
        "",
    )
    .await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    let row = &preview.json()["plan"]["partitions"][0];
    assert_eq!(row["position"], 2, "{row}");
    assert_eq!(row["decision"]["decision"], "past_gap", "{row}");
    assert_eq!(row["decision"]["to"], start, "{row}");
    let rewound = request(
        &admin,
        "POST",
        &format!("/api/partitions/0/rewind?to={}", point_in_time(Utc::now())),
        &[("Authorization", &format!("Bearer {ADMIN_TOKEN}"))],
        "",
    )
    .await;
    assert_eq!(rewound.status, 200, "{}", rewound.body);
    let result = &rewound.json()["partitions"][0];
    assert_eq!(result["error"], serde_json::Value::Null, "{result}");
    assert_eq!(result["decision"]["decision"], "past_gap", "{result}");
    assert_eq!(result["decision"]["to"], start, "{result}");
    app.wait_committed(&kafka, &[end]).await;
    assert_eq!(
        stored(&db).await,
        end - start,
        "every record still in the log"
    );
    assert_eq!(
        reset_rows(&db).await,
        vec![(
            2,
            Some(start),
            "hold".to_owned(),
            Some("live rewind".to_owned())
        )]
    );
    assert_eq!(
        metric(
            &app,
            "history_offset_reset_gap_offsets_total{partition=\"0\"}"
        )
        .await,
        (start - 2) as f64
    );
    assert!(app.partition(0).await.unwrap().fetch.is_none());
    app.shutdown().await;
}

#[actix_web::test]
async fn with_the_continue_policy_a_position_before_the_log_start_is_recorded_before_reading_on_from_the_start_on_the_mock()
 {
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Mock, 1).await;
    let group = unique_name("group");
    let (start, end) = a_committed_position_before_the_log_start(&kafka, &group).await;

    let mut settings = test_settings(&db.url, &kafka, &group);
    settings.runtime.offset_reset_policy = ResetPolicy::Continue;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    app.wait_committed(&kafka, &[end]).await;
    assert_eq!(stored(&db).await, end - start);
    assert_eq!(
        reset_rows(&db).await,
        vec![(
            2,
            Some(start),
            "continue".to_owned(),
            Some("policy continue".to_owned())
        )]
    );
    assert_eq!(
        metric(
            &app,
            "history_offset_resets_total{partition=\"0\",policy=\"continue\"}"
        )
        .await,
        1.0
    );
    assert_eq!(
        metric(
            &app,
            "history_offset_reset_gap_offsets_total{partition=\"0\"}"
        )
        .await,
        (start - 2) as f64
    );
    assert!(app.partition(0).await.unwrap().fetch.is_none());
    // The group view counts the gap beside the partition, in the API and on the page.
    let admin = app.handle.admin_addr.to_string();
    let group = get(&admin, "/api/group").await;
    assert_eq!(group.status, 200, "{}", group.body);
    let row = group.json()["partitions"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["partition"] == 0).cloned())
        .unwrap_or_default();
    assert_eq!(row["offset_resets"], 1, "{row}");
    assert_eq!(row["offsets_skipped"], start - 2, "{row}");
    assert_eq!(row["reset_held"], false, "{row}");
    let page = get(&admin, "/group").await;
    assert!(
        page.body
            .contains(&format!("1 offset reset, {} offsets skipped", start - 2)),
        "{}",
        page.body
    );
    app.shutdown().await;

    // verify's report names the gap: its records are gone, nothing can check them.
    let args = [
        "verify",
        "--brokers",
        &kafka.brokers,
        "--topic",
        &kafka.topic,
        "--database-url",
        &db.url,
    ];
    let run = history_consumer(&args).await;
    assert_eq!(run.code, Some(0), "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains(&format!(
            "partition 0: 2 -> {start} ({} offsets)",
            start - 2
        )),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("OFFSET RESETS: 1 on record"),
        "{}",
        run.stdout
    );
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let report = history_consumer(&json_args).await.json();
    assert_eq!(report["offset_resets"][0]["from_offset"], 2, "{report}");
    assert_eq!(report["offset_resets"][0]["to_offset"], start, "{report}");
}

#[actix_web::test]
async fn a_committed_position_past_the_log_end_holds_the_partition_whatever_the_policy_on_the_mock()
{
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Mock, 1).await;
    let group = unique_name("group");
    let producer = kafka.producer();
    for i in 0..5 {
        kafka
            .send(&producer, Some(0), "k", &numbered_event(i))
            .await;
    }
    // A log shorter than what the group read (truncated, or the topic made again).
    kafka.commit_for(&group, &[50]).await;
    let mut settings = test_settings(&db.url, &kafka, &group);
    settings.runtime.offset_reset_policy = ResetPolicy::Continue;
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let held = wait_for(Duration::from_secs(30), "the partition held", || async {
        match app.partition(0).await?.fetch? {
            Trouble::Held(held) => Some(held),
            Trouble::Failing(_) => None,
        }
    })
    .await;
    assert_eq!(held.offset, Some(50));
    assert!(held.detail.contains("the log ends at 5"), "{held:?}");
    wait_for(Duration::from_secs(10), "the reset recorded", || async {
        (reset_rows(&db).await == vec![(50, None, "hold".to_owned(), None)]).then_some(())
    })
    .await;
    assert_eq!(stored(&db).await, 0);
    assert_eq!(kafka.committed(&group).await, [50]);
    app.shutdown().await;
}

on_both_brokers!(a_group_that_never_committed_starts_at_the_earliest_offset_with_nothing_recorded);

async fn a_group_that_never_committed_starts_at_the_earliest_offset_with_nothing_recorded(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    crate::support::kafka::produce(&kafka, 0..10).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(2).await;
    app.wait_committed(&kafka, &[5, 5]).await;
    assert_eq!(stored(&db).await, 10);
    assert!(reset_rows(&db).await.is_empty());
    assert_eq!(
        metric(&app, "history_offset_resets_total").await,
        0.0,
        "no reset counted"
    );
    app.shutdown().await;
}

/// The same from outside: the binary with `HISTORY_OFFSET_RESET_POLICY=continue` in its
/// environment records the gap and reads on.
#[actix_web::test]
async fn the_binary_takes_the_policy_from_its_environment_on_the_mock() {
    use crate::support::service::ServiceProcess;
    let db = test_database().await;
    let kafka = TestKafka::start_on(Broker::Mock, 1).await;
    let group = unique_name("group");
    let (start, end) = a_committed_position_before_the_log_start(&kafka, &group).await;
    let _service = ServiceProcess::spawn_with_env(
        &db.url,
        &kafka.brokers,
        &kafka.topic,
        &group,
        &[],
        &[("HISTORY_OFFSET_RESET_POLICY", "continue")],
    );
    crate::support::kafka::wait_committed(&kafka, &group, &[end], Duration::from_secs(60)).await;
    assert_eq!(stored(&db).await, end - start);
    assert_eq!(
        reset_rows(&db).await,
        vec![(
            2,
            Some(start),
            "continue".to_owned(),
            Some("policy continue".to_owned())
        )]
    );
}
