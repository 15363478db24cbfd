//! The consumer runtime end to end, in process: records produced by a real producer to a
//! broker (the mock cluster, and tansu where named so), consumed by the service, checked in
//! PostgreSQL and in Kafka's committed offsets.

use std::collections::HashSet;
use std::time::Duration;

use history_consumer::domain::DuplicateCause;

use crate::support::app::{spawn_app, spawn_app_with, test_settings};
use crate::support::faults::Trigger;
use crate::support::helpers::{test_database, unique_name, wait_for};
use crate::support::kafka::on_both_brokers;
use crate::support::kafka::{Broker, TestKafka, payload, story_900, story_901};

on_both_brokers!(the_source_documents_story_gives_two_rows_one_republish_and_commits_to_the_end);

async fn the_source_documents_story_gives_two_rows_one_republish_and_commits_to_the_end(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;

    let producer = kafka.producer();
    let (e900, e901) = (story_900(), story_901());
    let first = kafka.send(&producer, None, "ticket-42", &e900).await;
    let again = kafka.send(&producer, None, "ticket-42", &e900).await;
    kafka.send(&producer, None, "ticket-42", &e901).await;
    assert_ne!(first.1, again.1, "the same event at two offsets");

    app.wait_committed(&kafka, &[3]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 2);
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events WHERE ticket_id = 'ticket-42'")
            .await,
        2
    );
    let view = app.partition(0).await.expect("partition 0");
    let counts = view.actor.expect("actor status").counts;
    assert_eq!(counts.applied, 2);
    assert_eq!(counts.already_applied, 1);
    assert_eq!(counts.duplicates_of(DuplicateCause::Republish), 1);
    assert_eq!(counts.duplicates_of(DuplicateCause::Redelivery), 0);
    app.shutdown().await;
}

on_both_brokers!(ten_thousand_events_with_ten_percent_duplicates_give_one_row_per_unique_event);

async fn ten_thousand_events_with_ten_percent_duplicates_give_one_row_per_unique_event(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 4).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(4).await;

    let producer = kafka.producer();
    let mut unique = HashSet::new();
    let mut sends = Vec::new();
    for i in 0..10_000u32 {
        // Every tenth record repeats an earlier event (the outbox republishing it).
        let n = if i % 10 == 9 { i - 5 } else { i };
        unique.insert(n);
        let ticket = format!("ticket-{}", n % 97);
        let body = payload(
            &format!("event-{n}"),
            &ticket,
            "open",
            "resolved",
            "2026-10-03T08:00:00Z",
        );
        let producer = &producer;
        let topic = &kafka.topic;
        sends.push(async move {
            let record = rdkafka::producer::FutureRecord::to(topic)
                .key(&ticket)
                .payload(&body);
            producer
                .send(record, Duration::from_secs(30))
                .await
                .map_err(|(e, _)| e)
                .expect("delivered");
        });
    }
    futures::future::join_all(sends).await;

    let ends = kafka.ends().await;
    assert_eq!(ends.iter().sum::<i64>(), 10_000);
    app.wait_committed(&kafka, &ends).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events").await,
        unique.len() as i64
    );
    assert_eq!(
        db.scalar("SELECT count(*) FROM inbox").await,
        unique.len() as i64
    );
    let status = app.status().await;
    let duplicates: u64 = status
        .partitions
        .iter()
        .map(|p| p.actor.as_ref().unwrap().counts.already_applied)
        .sum();
    assert_eq!(duplicates, 10_000 - unique.len() as u64);
    app.shutdown().await;
}

on_both_brokers!(malformed_records_of_each_kind_are_dead_lettered_and_never_block_the_partition);

async fn malformed_records_of_each_kind_are_dead_lettered_and_never_block_the_partition(
    broker: Broker,
) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();

    let good = |id: &str| payload(id, "ticket-1", "open", "resolved", "2026-10-03T08:00:00Z");
    let huge = {
        let mut body = String::from(
            r#"{"event_id":"big","ticket_id":"t","from_status":"a","to_status":"b","changed_at":"2026-10-03T08:00:00Z","pad":""#,
        );
        body.push_str(&"x".repeat(1024 * 1024));
        body.push_str("\"}");
        body.into_bytes()
    };
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("not_json", b"this is not json".to_vec()),
        ("not_object", b"[1,2,3]".to_vec()),
        ("missing_field", br#"{"event_id":"e1","ticket_id":"t","from_status":"a","changed_at":"2026-10-03T08:00:00Z"}"#.to_vec()),
        ("empty_field", payload("e2", "", "a", "b", "2026-10-03T08:00:00Z")),
        ("wrong_type", br#"{"event_id":7,"ticket_id":"t","from_status":"a","to_status":"b","changed_at":"2026-10-03T08:00:00Z"}"#.to_vec()),
        ("bad_timestamp", payload("e3", "t", "a", "b", "yesterday at noon")),
        ("oversized_id", payload(&"x".repeat(201), "t", "a", "b", "2026-10-03T08:00:00Z")),
        ("invalid_text", payload("e4", "t\u{0}", "a", "b", "2026-10-03T08:00:00Z")),
        ("payload_too_large", huge),
    ];
    kafka.send(&producer, None, "k", &good("before")).await;
    for (_, body) in &bad {
        kafka.send(&producer, None, "k", body).await;
    }
    kafka.send(&producer, None, "k", &good("after")).await;
    let end = 2 + bad.len() as i64;

    app.wait_committed(&kafka, &[end]).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events").await,
        2,
        "good records on both sides"
    );
    let client = db.pool.get().await.unwrap();
    let rows = client
        .query(
            "SELECT reason, kafka_offset, octet_length(payload), message FROM dead_letters ORDER BY kafka_offset",
            &[],
        )
        .await
        .unwrap();
    let reasons: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
    let expected: Vec<String> = bad.iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(reasons, expected);
    for (row, (_, body)) in rows.iter().zip(&bad) {
        assert_eq!(
            row.get::<_, Option<i32>>(2),
            Some(body.len() as i32),
            "raw bytes kept whole"
        );
        assert!(!row.get::<_, String>(3).is_empty(), "a message for people");
    }
    let counts = app.partition(0).await.unwrap().actor.unwrap().counts;
    assert_eq!(counts.dead_lettered, bad.len() as u64);
    assert_eq!(counts.dead_letters.get("payload_too_large"), Some(&1));
    app.shutdown().await;
}

on_both_brokers!(a_graceful_shutdown_commits_the_final_watermark);

async fn a_graceful_shutdown_commits_the_final_watermark(broker: Broker) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let app = spawn_app(&db, &kafka).await;
    app.wait_assigned(2).await;
    let producer = kafka.producer();
    for i in 0..200 {
        let body = payload(&format!("e{i}"), "t", "a", "b", "2026-10-03T08:00:00Z");
        kafka.send(&producer, Some(i % 2), "k", &body).await;
    }
    wait_for(Duration::from_secs(30), "all rows", || async {
        (db.scalar("SELECT count(*) FROM history_events").await == 200).then_some(())
    })
    .await;
    let group = app.group.clone();
    app.shutdown().await;
    assert_eq!(kafka.committed(&group).await, vec![100, 100]);
}

on_both_brokers!(a_partition_that_runs_out_of_work_commits_without_waiting_for_the_tick);

/// The commit interval here is an hour: only the early commit of a partition that ran out of
/// work can bring the committed offsets to the end.
async fn a_partition_that_runs_out_of_work_commits_without_waiting_for_the_tick(broker: Broker) {
    let db = test_database().await;
    let kafka = TestKafka::start_on(broker, 2).await;
    let mut settings = test_settings(&db.url, &kafka, &unique_name("group"));
    settings.runtime.commit_interval = Duration::from_secs(3600);
    let app = spawn_app_with(settings).await;
    app.wait_assigned(2).await;
    let producer = kafka.producer();
    for i in 0..300 {
        let body = payload(&format!("e{i}"), "t", "a", "b", "2026-10-03T08:00:00Z");
        kafka.send(&producer, Some(i % 2), "k", &body).await;
    }
    app.wait_committed(&kafka, &[150, 150]).await;
    assert_eq!(db.scalar("SELECT count(*) FROM history_events").await, 300);
    // A burst later, the same: the partition ran out of work again.
    for i in 300..310 {
        let body = payload(&format!("e{i}"), "t", "a", "b", "2026-10-03T08:00:00Z");
        kafka.send(&producer, Some(i % 2), "k", &body).await;
    }
    app.wait_committed(&kafka, &[155, 155]).await;
    app.shutdown().await;
}

on_both_brokers!(a_partition_that_keeps_up_commits_as_its_transactions_end_though_never_idle);

/// The commit interval is an hour, and each inbox transaction takes at least 100 ms (a trigger
/// sleeps once per transaction) while a record arrives every few milliseconds: whenever a
/// transaction ends, the next records are already queued, so the partition never runs out of
/// work. It keeps up (far less than a batch waits), so its offsets are committed while the
/// records still flow, not only once they stop.
async fn a_partition_that_keeps_up_commits_as_its_transactions_end_though_never_idle(
    broker: Broker,
) {
    const RECORDS: i64 = 600;
    let db = test_database().await;
    Trigger::before("slow_transaction", "INSERT", "history_events")
        .running(
            "IF current_setting('test.slept', true) IS DISTINCT FROM 'yes' THEN \
               PERFORM pg_sleep(0.1); PERFORM set_config('test.slept', 'yes', true); \
             END IF;",
        )
        .install(&db)
        .await;
    let kafka = TestKafka::start_on(broker, 1).await;
    let group = unique_name("group");
    let mut settings = test_settings(&db.url, &kafka, &group);
    settings.runtime.commit_interval = Duration::from_secs(3600);
    // Records reach the partition as they come: the mock answers a fetch that found nothing
    // only after fetch.wait.max.ms (500 ms by default), which would bring them in bursts with
    // the partition out of work in between.
    settings.kafka.options.set("fetch.wait.max.ms", "10");
    let app = spawn_app_with(settings).await;
    app.wait_assigned(1).await;
    let producer = kafka.producer();
    let sent = std::cell::Cell::new(0);
    let produce = async {
        for i in 0..RECORDS {
            let body = payload(&format!("e{i}"), "t", "a", "b", "2026-10-03T08:00:00Z");
            kafka.send(&producer, Some(0), "k", &body).await;
            sent.set(i + 1);
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    };
    let look = async {
        while sent.get() < RECORDS / 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let committed = kafka.committed(&group).await;
        (committed[0], sent.get())
    };
    let ((), (committed, sent_then)) = tokio::join!(produce, look);
    assert!(
        sent_then < RECORDS,
        "the look at the committed offset came after the last record ({sent_then} sent)"
    );
    assert!(
        committed > 0,
        "nothing committed after {sent_then} records, with records still flowing"
    );
    app.wait_committed(&kafka, &[RECORDS]).await;
    assert_eq!(
        db.scalar("SELECT count(*) FROM history_events").await,
        RECORDS
    );
    app.shutdown().await;
}
